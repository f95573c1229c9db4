// The same-host path chosen by the kAL (issue 40): two uAL consumers of one real krdmad (this test and the
// ual_rdma_peer program) connecting over real TCP on 127.0.0.1 are paired with a same-host channel at the
// RDMA-mode transition: both get RI_LLP_SAME_HOST (without CRC and markers) in their negotiated parameters, and
// `rdmactl stats` and `rdmactl resources` show the path of each endpoint. The softrnic option same_host false,
// the kAL's setting off, a consumer over its memory limit and a peer that is not a kAL endpoint keep the wire.
// hwstub, whose streams its offload engine runs inside krdmad, is paired too: the engine moves them over the
// channel (nothing but the MPA negotiation on TCP); its option same_host false keeps the wire.
// (Until softrnic moves bytes over the channel, both ends run TCP without CRC: the data checks hold either way.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "krdmad_fixture.hpp"
#include "raw_mpa_peer.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;

constexpr size_t kRdmaOffset = 4096;
constexpr size_t kBytes = 256 * 1024;

class SameHost : public testutil::KrdmadFixture {
protected:
    // krdmad with RNIC rnic_ of provider_ (softrnic sr0 unless a test says otherwise) on 127.0.0.1; @p extra: more
    // top-level keys of the configuration (",..."), @p options: the RNIC's options object, if any.
    void start_krdmad(const std::string &extra = "", const std::string &options = "") {
        device_ = dir_ / "krdma.sock";
        const auto cfg = write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                      std::string(SOFTRNIC_PROVIDER_DIR) + R"(", "modules": [")" + provider_ +
                                      R"(_kvp.so"], "rnics": [{"provider": ")" + provider_ + R"(",
                                      "name": ")" + rnic_ + R"(", "address": "127.0.0.1")" +
                                      (options.empty() ? "" : ", \"options\": " + options) + "}]" + extra + "}");
        start({"--config", cfg.string()});
        for (int i = 0; i < 200 && !std::filesystem::exists(device_); ++i) ::usleep(20000);
        ASSERT_TRUE(std::filesystem::exists(device_)) << stderr_text();
    }

    nlohmann::json ctl_json(std::vector<std::string> args) {
        std::string out;
        args.insert(args.begin(), {"--device", device_.string(), "--json"});
        EXPECT_EQ(rdmactl(std::move(args), out), 0) << out;
        auto j = nlohmann::json::parse(out, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << out;
        return j;
    }

    // The paths of the connected endpoints as `rdmactl stats` and `rdmactl resources` show them (each sorted).
    std::vector<std::string> paths(const char *command) {
        const nlohmann::json j = ctl_json({command});
        std::vector<std::string> out;
        for (const auto &e : j["endpoints"]) {
            if (e["state"] == "connected") out.push_back(e["path"].get<std::string>());
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    // The peer program in "accept" mode; its port.
    uint16_t start_peer() {
        peer_ = spawn(PEER_PATH, {device_.string(), rnic_, "accept", std::to_string(kBytes)}, dir_ / "peer.out",
                      dir_ / "peer.err");
        for (int i = 0; i < 500; ++i) {
            std::smatch m;
            const std::string text = read_text(dir_ / "peer.out");
            if (std::regex_search(text, m, std::regex("port (\\d+)"))) return static_cast<uint16_t>(std::stoi(m[1]));
            ::usleep(20000);
        }
        ADD_FAILURE() << read_text(dir_ / "peer.err");
        return 0;
    }

    // Connects to the peer program, checks one RDMA Write of kBytes through it and returns the
    // negotiated parameters this side's uAL saw at ESTABLISHED; @p check runs while the connection is up.
    ri_llp_params_t connect_and_exchange(const std::function<void()> &check) {
        const uint16_t port = start_peer();
        if (port == 0) return {};
        Side s;
        EXPECT_EQ(s.open(device_.string(), rnic_, kRdmaOffset + kBytes), "");
        auto ep = s.endpoint(9);
        EXPECT_NE(ep, nullptr);
        if (ep == nullptr) return {};
        for (uint64_t i = 0; i < 8; ++i) EXPECT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
        EXPECT_OK(ep->connect("127.0.0.1", port, bytes_of("hello server")));
        auto est = next_cm(s.cm);
        EXPECT_TRUE(est.has_value());
        if (!est || est->id != static_cast<uint32_t>(CmEventId::established) || !est->connection) {
            ADD_FAILURE() << "not established";
            return {};
        }
        const ri_llp_params_t llp = est->connection->llp;
        auto wc = s.completion();
        EXPECT_TRUE(wc.has_value());
        if (!wc) return llp;
        BufferInfo info{};
        std::memcpy(&info, s.buffer.data() + (wc->wr_id - 100) * 256, sizeof info);
        EXPECT_OK(post_recv(s, *ep, (wc->wr_id - 100) * 256, 256, wc->wr_id));
        // Written bytes, verified by the peer ("V size seed" -> "ok").
        uint8_t *area = s.buffer.data() + kRdmaOffset;
        for (size_t i = 0; i < kBytes; ++i) area[i] = pattern(i, 7);
        EXPECT_OK(post(s, *ep, RI_WR_RDMA_WRITE, kRdmaOffset, static_cast<uint32_t>(kBytes), 1, info.addr, info.rkey));
        const std::string v = "V " + std::to_string(kBytes) + " 7";
        std::memcpy(s.buffer.data() + 2048, v.data(), v.size());
        EXPECT_OK(post(s, *ep, RI_WR_SEND, 2048, static_cast<uint32_t>(v.size()), 2));
        std::string reply;
        for (int got = 0; got < 3; ++got) {
            auto c = s.completion(60s);
            EXPECT_TRUE(c.has_value());
            if (!c) return llp;
            EXPECT_EQ(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
            if (c->opcode == RI_WC_RECV) {
                reply.assign(reinterpret_cast<const char *>(s.buffer.data() + (c->wr_id - 100) * 256), c->byte_len);
                EXPECT_OK(post_recv(s, *ep, (c->wr_id - 100) * 256, 256, c->wr_id));
            }
        }
        EXPECT_EQ(reply, "ok");
        check();
        std::memcpy(s.buffer.data() + 2048, "Q", 1);
        EXPECT_OK(post(s, *ep, RI_WR_SEND, 2048, 1, 4));
        EXPECT_TRUE(s.completion().has_value());
        EXPECT_OK(ep->disconnect());
        (void)next_cm(s.cm);
        EXPECT_EQ(wait_exit(peer_), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
        return llp;
    }

    // hwstub RNIC hw0 instead of softrnic's sr0.
    void use_hwstub() {
        provider_ = "hwstub";
        rnic_ = "hw0";
    }

    std::filesystem::path device_;
    std::string provider_ = "softrnic";
    std::string rnic_ = "sr0";
    pid_t peer_ = -1;
};

TEST_F(SameHost, TwoConsumersOfOneKrdmadArePairedAndBothShowTheSameHostPath) {
    start_krdmad();
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"same-host", "same-host"}));
        EXPECT_EQ(paths("resources"), (std::vector<std::string>{"same-host", "same-host"}));
        // Both ends alike: no CRC, no markers on the channel.
        const nlohmann::json stats = ctl_json({"stats"});  // the loop below must not outlive it
        for (const auto &e : stats["endpoints"]) {
            EXPECT_FALSE(e["mpa"]["crc"].get<bool>()) << e.dump();
            EXPECT_FALSE(e["mpa"]["markers"].get<bool>()) << e.dump();
        }
        std::string text;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "stats"}, text), 0) << text;
        EXPECT_NE(text.find("PATH"), std::string::npos) << text;
        EXPECT_NE(text.find("same-host"), std::string::npos) << text;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "resources"}, text), 0) << text;
        EXPECT_NE(text.find("same-host"), std::string::npos) << text;
    });
    EXPECT_NE(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_EQ(llp.mpa_flags & (RI_MPA_CRC | RI_MPA_MARKERS), 0u);
}

// Single copy (rnicpi/ri_channel.h): with pull_min at or below the Write's size, the 256 KiB Write between two
// processes of one user is one frame whose bytes the receiver copies from the sender; without, the rings carry them
// in FPDUs of at most 128 KiB. Either way the peer finds every byte.
uint64_t fpdus_sent_by_both(const nlohmann::json &stats) {
    uint64_t n = 0;
    for (const auto &e : stats["endpoints"]) {
        if (e["state"] == "connected") n += e["rdma"]["fpdus_sent"].get<uint64_t>();
    }
    return n;
}

TEST_F(SameHost, WithPullMinLargeWritesBetweenProcessesOfOneUserMoveBySingleCopy) {
    start_krdmad("", R"({"pull_min": 65536})");
    if (HasFatalFailure()) return;
    uint64_t fpdus = 0;
    (void)connect_and_exchange([&] { fpdus = fpdus_sent_by_both(ctl_json({"stats"})); });
    ASSERT_FALSE(HasFailure()) << "the peer did not find the Write's bytes";
    const uint64_t pulled = fpdus;
    std::string out;
    // Consumers that open the RNIC from now on take the new value.
    ASSERT_EQ(rdmactl({"--device", device_.string(), "control", "sr0", R"({"pull_min": 0})"}, out), 0) << out;
    std::filesystem::remove(dir_ / "peer.out");  // the next peer's port, not the last one's
    (void)connect_and_exchange([&] { fpdus = fpdus_sent_by_both(ctl_json({"stats"})); });
    ASSERT_FALSE(HasFailure()) << "the peer did not find the Write's bytes through the rings";
    // Through the rings the Write is five frames (an FPDU carries at most 64 KiB); pulled, it is one, and its
    // acknowledgement one more the other way.
    EXPECT_EQ(pulled + 3, fpdus) << "frames sent by both ends with single copy: " << pulled << ", without: " << fpdus;
}

TEST_F(SameHost, TheRnicOptionSameHostFalseKeepsTheWire) {
    start_krdmad("", R"({"same_host": false})");
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
        EXPECT_EQ(paths("resources"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

TEST_F(SameHost, TheRnicOptionChangedAtRunTimeAppliesToNewConnections) {
    start_krdmad();
    if (HasFatalFailure()) return;
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "control", "sr0", R"({"same_host": false})"}, out), 0) << out;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

TEST_F(SameHost, TheKalSettingOffKeepsTheWire) {
    start_krdmad(R"(, "llp": {"same_host": {"enabled": false}})");
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

TEST_F(SameHost, AConsumerOverItsMemoryLimitStaysOnTheWire) {
    // Rings of 512 MiB cannot be charged within a per-process limit of 256 MiB: nothing fails, the wire it is.
    start_krdmad(R"(, "limits": {"pin_bytes_per_process": 268435456},
                    "llp": {"same_host": {"ring_bytes": 536870912}})");
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

TEST_F(SameHost, APeerThatIsNotAKalEndpointStaysOnTheWire) {
    start_krdmad();
    if (HasFatalFailure()) return;
    // A raw MPA responder on a plain TCP listener of this process: the kAL holds only one end of the connection.
    testutil::RawMpaPeer peer;
    ASSERT_TRUE(peer.listening()) << std::strerror(errno);

    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 1 << 16), "");
    auto ep = s.endpoint(9);
    ASSERT_NE(ep, nullptr);
    ASSERT_OK(ep->connect("127.0.0.1", peer.port(), bytes_of("hi")));
    ASSERT_EQ(peer.accept_and_negotiate(), "");
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
    ASSERT_TRUE(est->connection);
    EXPECT_EQ(est->connection->llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire"}));
    EXPECT_EQ(paths("resources"), (std::vector<std::string>{"wire"}));
}

TEST_F(SameHost, TwoHwstubConsumersArePairedAndTheOffloadEngineMovesTheStreamOverTheChannel) {
    use_hwstub();
    start_krdmad();
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"same-host", "same-host"}));
        EXPECT_EQ(paths("resources"), (std::vector<std::string>{"same-host", "same-host"}));
        // The engine moved 256 KiB and more each way: over TCP only the MPA negotiation went.
        const nlohmann::json stats = ctl_json({"stats"});  // the loop below must not outlive it
        for (const auto &e : stats["endpoints"]) {
            if (e["state"] != "connected") continue;
            EXPECT_LT(e["bytes_received"].get<uint64_t>(), 4096u) << e.dump();
        }
    });
    EXPECT_NE(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_EQ(llp.mpa_flags & (RI_MPA_CRC | RI_MPA_MARKERS), 0u);
}

TEST_F(SameHost, TheHwstubOptionSameHostFalseKeepsTheWire) {
    use_hwstub();
    start_krdmad("", R"({"same_host": false})");
    if (HasFatalFailure()) return;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

TEST_F(SameHost, TheHwstubOptionChangedAtRunTimeAppliesToNewConnections) {
    use_hwstub();
    start_krdmad();
    if (HasFatalFailure()) return;
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "control", "hw0", R"({"same_host": false})"}, out), 0) << out;
    EXPECT_NE(out.find("same_host"), std::string::npos) << out;
    const ri_llp_params_t llp = connect_and_exchange([&] {
        EXPECT_EQ(paths("stats"), (std::vector<std::string>{"wire", "wire"}));
    });
    EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

}  // namespace
