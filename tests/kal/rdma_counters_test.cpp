// The data path's per-QP counters as the administrator sees them: uAL consumers in two processes on a real krdmad
// (this test and the ual_rdma_peer program), real TCP on 127.0.0.1, and `rdmactl --json stats`, whose per-endpoint
// "rdma" counters come from the counter slots the uVPs write in memory shared with the kVP. A raw MPA peer that
// sends an FPDU with a bad CRC shows that the CRC error and the Terminate it causes are counted too.
#include <arpa/inet.h>
#include <fcntl.h>
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

// One RNIC's totals in `rdmactl --json stats` (an array of objects, one per attached RNIC).
nlohmann::json rnic_of(const nlohmann::json &stats, const std::string &name) {
    for (const auto &r : stats["rnics"]) {
        if (r["name"] == name) return r;
    }
    ADD_FAILURE() << "no RNIC " << name << " in " << stats["rnics"].dump();
    return nlohmann::json{{"rdma", {{"bytes_sent", 0}, {"crc_errors", 0}}}};
}

using namespace rdmatest;
using ual::CmEventId;

constexpr size_t kRdmaOffset = 4096;

class RdmaCounters : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        const auto cfg = write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                      std::string(SOFTRNIC_PROVIDER_DIR) +
                                      R"(", "modules": ["softrnic_kvp.so"], "rnics": [{"provider": "softrnic",
                                      "name": "sr0", "address": "127.0.0.1"}]})");
        // Ready, not only bound: the device file exists a moment before krdmad listens on it (a peer that connects
        // then is refused).
        ASSERT_TRUE(wait_ready(start({"--config", cfg.string()}))) << "krdmad did not get ready: " << stderr_text();
    }

    nlohmann::json stats() {
        std::string out;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "--json", "stats"}, out), 0) << out;
        auto j = nlohmann::json::parse(out, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << out;
        return j;
    }
    static nlohmann::json endpoint(const nlohmann::json &s, uint32_t qp_num) {
        for (const auto &e : s["endpoints"]) {
            if (e["qp_num"].get<uint32_t>() == qp_num) return e;
        }
        return nullptr;
    }

    std::filesystem::path device_;
};

// One Write of @p size bytes with seed @p seed, checked by the peer program ("V size seed" -> "ok").
void write_and_check(Side &s, ual::Endpoint &ep, const BufferInfo &info, size_t size, uint32_t seed) {
    uint8_t *area = s.buffer.data() + kRdmaOffset;
    for (size_t i = 0; i < size; ++i) area[i] = pattern(i, seed);
    ASSERT_OK(post(s, ep, RI_WR_RDMA_WRITE, kRdmaOffset, static_cast<uint32_t>(size), 1, info.addr, info.rkey));
    const std::string v = "V " + std::to_string(size) + " " + std::to_string(seed);
    std::memcpy(s.buffer.data() + 2048, v.data(), v.size());
    ASSERT_OK(post(s, ep, RI_WR_SEND, 2048, static_cast<uint32_t>(v.size()), 2));
    std::string reply;
    for (int got = 0; got < 3; ++got) {
        auto c = s.completion(60s);
        ASSERT_TRUE(c.has_value());
        ASSERT_EQ(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        if (c->opcode == RI_WC_RECV) {
            reply.assign(reinterpret_cast<const char *>(s.buffer.data() + (c->wr_id - 100) * 256), c->byte_len);
            ASSERT_OK(post_recv(s, ep, (c->wr_id - 100) * 256, 256, c->wr_id));
        }
    }
    ASSERT_EQ(reply, "ok");
}

TEST_F(RdmaCounters, StatsShowEachQpsDataPathCountersMovingWithTrafficAndSummedPerRnic) {
    const size_t kBytes = 1u << 20;
    const auto out = dir_ / "peer.out";
    pid_t pid = spawn(PEER_PATH, {device_.string(), "sr0", "accept", std::to_string(kBytes)}, out, dir_ / "peer.err");
    uint16_t port = 0;
    for (int i = 0; i < 500 && port == 0; ++i) {
        std::smatch m;
        const std::string text = read_text(out);
        if (std::regex_search(text, m, std::regex("port (\\d+)"))) port = static_cast<uint16_t>(std::stoi(m[1]));
        if (port == 0) ::usleep(20000);
    }
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", kRdmaOffset + kBytes), "");
    auto ep = s.endpoint(9);
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    ASSERT_OK(ep->connect("127.0.0.1", port, bytes_of("hello server")));
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
    auto qa = ep->query();
    ASSERT_OK(qa);
    const uint32_t qpn = qa->qp_num;
    auto wc = s.completion();
    ASSERT_TRUE(wc.has_value());
    BufferInfo info{};
    std::memcpy(&info, s.buffer.data() + (wc->wr_id - 100) * 256, sizeof info);
    ASSERT_OK(post_recv(s, *ep, (wc->wr_id - 100) * 256, 256, wc->wr_id));

    write_and_check(s, *ep, info, kBytes, 1);
    if (HasFatalFailure()) return;
    const nlohmann::json s1 = stats();
    const nlohmann::json mine1 = endpoint(s1, qpn);
    ASSERT_FALSE(mine1.is_null()) << s1.dump(2);
    ASSERT_EQ(s1["endpoints"].size(), 2u) << "this process's QP and the peer's";
    const nlohmann::json &r1 = mine1["rdma"];
    EXPECT_GE(r1["bytes_sent"].get<uint64_t>(), kBytes);
    EXPECT_GE(r1["fpdus_sent"].get<uint64_t>(), kBytes / 65536);  // a Write is cut at the MULPDU (< 64 KiB)
    EXPECT_GT(r1["fpdus_received"].get<uint64_t>(), 0u);       // the buffer description and the verdict
    EXPECT_EQ(r1["crc_errors"].get<uint64_t>(), 0u);
    EXPECT_EQ(r1["terminates_sent"].get<uint64_t>(), 0u);
    // The peer's QP received what this one sent; the RNIC's line is the sum of both.
    uint64_t peer_rx = 0, sum_tx = 0;
    for (const auto &e : s1["endpoints"]) {
        sum_tx += e["rdma"]["bytes_sent"].get<uint64_t>();
        if (e["qp_num"].get<uint32_t>() != qpn) peer_rx = e["rdma"]["bytes_received"].get<uint64_t>();
    }
    EXPECT_GE(peer_rx, kBytes);
    EXPECT_EQ(rnic_of(s1, "sr0")["rdma"]["bytes_sent"].get<uint64_t>(), sum_tx);

    // More traffic: the counters move by at least what was written.
    write_and_check(s, *ep, info, kBytes, 3);
    if (HasFatalFailure()) return;
    const nlohmann::json mine2 = endpoint(stats(), qpn);
    ASSERT_FALSE(mine2.is_null());
    EXPECT_GE(mine2["rdma"]["bytes_sent"].get<uint64_t>(), r1["bytes_sent"].get<uint64_t>() + kBytes);
    EXPECT_GT(mine2["rdma"]["fpdus_received"].get<uint64_t>(), r1["fpdus_received"].get<uint64_t>());

    // The text view shows the same table.
    std::string text;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "stats"}, text), 0) << text;
    EXPECT_NE(text.find("RDMA data path (per QP)"), std::string::npos) << text;

    std::memcpy(s.buffer.data() + 2048, "Q", 1);
    ASSERT_OK(post(s, *ep, RI_WR_SEND, 2048, 1, 4));
    ASSERT_TRUE(s.completion().has_value());
    ASSERT_OK(ep->disconnect());
    (void)next_cm(s.cm);
    EXPECT_EQ(wait_exit(pid), 0) << read_text(out) << read_text(dir_ / "peer.err");
}

TEST_F(RdmaCounters, AnFpduWithABadCrcIsCountedWithTheTerminateItCauses) {
    // A raw MPA responder on a plain TCP listener: it negotiates properly, then corrupts its first FPDU.
    testutil::RawMpaPeer peer;
    ASSERT_TRUE(peer.listening()) << std::strerror(errno);

    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 1 << 16), "");
    auto ep = s.endpoint(9);
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    ASSERT_OK(ep->connect("127.0.0.1", peer.port(), bytes_of("hi")));

    ASSERT_EQ(peer.accept_and_negotiate(), "");
    ASSERT_TRUE(peer.mpa().result().crc);
    const int fd = peer.fd();
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
    auto qa = ep->query();
    ASSERT_OK(qa);

    // A zero-length Send (RFC 5041 untagged header: last segment, DDP and RDMAP version 1, queue 0, MSN 1) whose CRC
    // field is wrong.
    const uint8_t fpdu[] = {0x00, 18,                      // ULPDU_Length
                            0x41, 0x43,                    // DDP: L, DV 1; RDMAP: RV 1, Send
                            0, 0, 0, 0,                    // reserved for the ULP
                            0, 0, 0, 0,                    // QN 0
                            0, 0, 0, 1,                    // MSN 1
                            0, 0, 0, 0,                    // MO 0
                            0xde, 0xad, 0xbe, 0xef};       // not the CRC32c of the above
    ASSERT_EQ(::send(fd, fpdu, sizeof fpdu, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof fpdu));
    // The QP flushes its receives and goes to ERROR.
    int errors = 0;
    while (auto wc = s.completion(5s)) {
        EXPECT_NE(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        if (++errors == 4) break;
    }
    EXPECT_EQ(errors, 4);
    // The Terminate reached this side (after the RTR the initiator sent first).
    std::vector<uint8_t> got;
    for (int i = 0; i < 100; ++i) {
        uint8_t buf[512];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) got.insert(got.end(), buf, buf + n);
        if (n == 0) break;
        ::usleep(20000);
    }
    EXPECT_GE(got.size(), 28u) << "RTR and Terminate FPDUs";

    nlohmann::json st;
    nlohmann::json mine;
    for (int i = 0; i < 50; ++i) {  // the kAL learns of the error from the uVP; the counters are already there
        st = stats();
        mine = endpoint(st, qa->qp_num);
        if (!mine.is_null() && mine["rdma"]["terminates_sent"].get<uint64_t>() > 0) break;
        ::usleep(20000);
    }
    ASSERT_FALSE(mine.is_null()) << st.dump(2);
    EXPECT_EQ(mine["rdma"]["crc_errors"].get<uint64_t>(), 1u) << mine.dump(2);
    EXPECT_EQ(mine["rdma"]["terminates_sent"].get<uint64_t>(), 1u);
    EXPECT_EQ(mine["rdma"]["terminates_received"].get<uint64_t>(), 0u);
    EXPECT_EQ(rnic_of(st, "sr0")["rdma"]["crc_errors"].get<uint64_t>(), 1u);
}

}  // namespace
