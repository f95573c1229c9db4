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
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <regex>

#include "krdmad_fixture.hpp"
#include "raw_mpa_peer.hpp"
#include "rdma_util.hpp"
#include "rendezvous.hpp"
#include "socket_ends.hpp"
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
        // Ready, not only bound: the device file exists a moment before krdmad listens on it (a peer that connects
        // then is refused).
        ASSERT_TRUE(wait_ready(start({"--config", cfg.string()}))) << "krdmad did not get ready: " << stderr_text();
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

// Two TCP sockets of one connection, made by connecting to a listener on 127.0.0.1.
struct TcpPair {
    krdma::UniqueFd client, server;
};
// A new connection on 127.0.0.1 (a port the kernel picks); empty ends when any step failed (errno says why).
TcpPair loopback_connection() {
    krdma::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (!listener || ::bind(listener.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        ::listen(listener.get(), 1) != 0 || ::getsockname(listener.get(), reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        return {};
    }
    TcpPair p;
    p.client.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!p.client || ::connect(p.client.get(), reinterpret_cast<sockaddr *>(&a), len) != 0) return TcpPair{};
    p.server.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return p;
}

// What a kAL answering another kAL's offer relies on (llp::one_connection, rendezvous.hpp): the two ends of one
// connection are proven one by their sequence numbers, with bytes not yet read too; ends of two connections are
// not; and the sockets work on afterwards (repair mode was left).
TEST(LlpOneConnection, TheTwoEndsOfOneConnectionAreProvenAndEndsOfTwoAreNot) {
    if (::geteuid() != 0) GTEST_SKIP() << "reading sequence numbers (TCP repair mode) needs CAP_NET_ADMIN";
    TcpPair one = loopback_connection(), two = loopback_connection();
    ASSERT_TRUE(one.client && one.server && two.client && two.server) << std::strerror(errno);
    EXPECT_TRUE(kal::llp::one_connection(one.client.get(), one.server.get())) << "the two ends of one connection";
    EXPECT_TRUE(kal::llp::one_connection(two.server.get(), two.client.get())) << "either order";
    EXPECT_FALSE(kal::llp::one_connection(one.client.get(), two.server.get())) << "ends of two connections";
    EXPECT_FALSE(kal::llp::one_connection(two.client.get(), one.server.get())) << "ends of two connections";
    const std::string unread(3000, 'x');
    ASSERT_EQ(::send(one.client.get(), unread.data(), unread.size(), 0), static_cast<ssize_t>(unread.size()));
    EXPECT_TRUE(kal::llp::one_connection(one.client.get(), one.server.get())) << "with 3000 bytes not read yet";
    std::string got(unread.size(), '\0');
    size_t n = 0;
    while (n < unread.size()) {
        const ssize_t r = ::recv(one.server.get(), got.data() + n, unread.size() - n, 0);
        ASSERT_GT(r, 0) << "the connection broke after its sequence numbers were read: " << std::strerror(errno);
        n += static_cast<size_t>(r);
    }
    EXPECT_EQ(got, unread);
    ASSERT_EQ(::send(one.server.get(), "y", 1, 0), 1);
    char c = 0;
    ASSERT_EQ(::recv(one.client.get(), &c, 1, 0), 1);
    EXPECT_EQ(c, 'y');
    EXPECT_FALSE(kal::llp::one_connection(-1, one.server.get())) << "a socket that cannot tell proves nothing";
}

// Whatever reaches a kAL's rendezvous socket (rendezvous.hpp) gets an answer and pairs nothing unless it proves a
// connection: a message of another size, an offer without a socket or of another version, an offer of a socket
// whose connection no endpoint holds. krdmad stays up and pairs its own consumers as before.
TEST_F(SameHost, TheRendezvousAnswersMalformedAndUnprovenOffersWithNo) {
    if (::geteuid() != 0) GTEST_SKIP() << "the rendezvous directory is root's";
    const auto dir = dir_ / "rendezvous";
    start_krdmad(R"(, "llp": {"same_host": {"rendezvous": ")" + dir.string() + R"("}})");
    if (HasFatalFailure()) return;
    std::filesystem::path sock;
    for (int i = 0; i < 100 && sock.empty(); ++i) {
        if (std::filesystem::exists(dir)) {
            for (const auto &e : std::filesystem::directory_iterator(dir)) sock = e.path();
        }
        if (sock.empty()) ::usleep(20000);
    }
    ASSERT_FALSE(sock.empty()) << "krdmad made no rendezvous socket in " << dir << "\n" << stderr_text();
    TcpPair other = loopback_connection();
    ASSERT_TRUE(other.client && other.server) << std::strerror(errno);
    kal::RendezvousOffer good;
    good.magic = kal::kRendezvousMagic;
    good.version = kal::kRendezvousVersion;
    good.local.family = good.remote.family = RI_AF_INET;
    good.local.port = 1;
    good.remote.port = 2;
    good.local.addr[0] = good.remote.addr[0] = 127;
    good.local.addr[3] = good.remote.addr[3] = 1;
    good.ring_bytes = 4096;
    kal::RendezvousOffer old_version = good;
    old_version.version = 99;
    struct Try {
        const char *what;
        std::vector<uint8_t> bytes;
        bool with_socket;
    } tries[] = {
        {"three bytes", {1, 2, 3}, true},
        {"an offer without its socket", {reinterpret_cast<uint8_t *>(&good), reinterpret_cast<uint8_t *>(&good + 1)},
         false},
        {"an offer of another version",
         {reinterpret_cast<uint8_t *>(&old_version), reinterpret_cast<uint8_t *>(&old_version + 1)}, true},
        {"an offer of a connection nobody holds",
         {reinterpret_cast<uint8_t *>(&good), reinterpret_cast<uint8_t *>(&good + 1)}, true},
    };
    for (const Try &t : tries) {
        sockaddr_un a{};
        ASSERT_TRUE(krdma::unix_address(sock, a));
        krdma::UniqueFd c(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        ASSERT_EQ(::connect(c.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0) << t.what;
        krdma_msg_hdr h{};
        h.cmd = kal::kRendezvousMagic;
        const int fds[1] = {other.client.get()};
        ASSERT_TRUE(krdma::send(c.get(), h, t.bytes, t.with_socket ? std::span<const int>(fds, 1) : std::span<const int>()))
            << t.what;
        pollfd p{c.get(), POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 10000), 1) << "no answer to " << t.what;
        auto m = std::make_unique<krdma::Message>();
        ASSERT_EQ(krdma::receive(c.get(), *m, false), krdma::RecvResult::message) << t.what;
        kal::RendezvousAnswer ans;
        ASSERT_EQ(m->payload_len(), sizeof ans) << t.what;
        std::memcpy(&ans, m->payload().data(), sizeof ans);
        EXPECT_EQ(ans.paired, 0u) << t.what << " was paired";
        EXPECT_EQ(m->nfds, 0u) << t.what << " got a channel end";
    }
    // Still serving, and still pairing its own consumers.
    const ri_llp_params_t llp = connect_and_exchange([] {});
    EXPECT_NE(llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
}

// A kAL of the rendezvous directory that takes an offer and never answers (stopped, hung) costs the offering kAL
// one wait: it is left out of the offers after that, so it cannot hold up every connection the other accepts.
TEST(Rendezvous, AKalThatDoesNotAnswerIsLeftOutOfTheNextOffers) {
    char tmpl[] = "/tmp/openrdma-rendezvous-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    const std::filesystem::path dir(tmpl);
    struct Gone {
        std::filesystem::path p;
        ~Gone() { std::filesystem::remove_all(p); }
    } gone{dir};
    kal::DeviceServer server(dir / "krdma");  // never listens: the rendezvous only needs its watch table
    kal::Rendezvous r(server, dir.string(), [](const kal::RendezvousOffer &, int) { return krdma::UniqueFd(); });
    ASSERT_TRUE(r.listening()) << "the rendezvous did not listen in " << dir;
    // The silent kAL: a listener that never accepts.
    krdma::UniqueFd silent(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un a{};
    ASSERT_TRUE(krdma::unix_address(dir / "kal-1.sock", a));
    ASSERT_TRUE(silent && ::bind(silent.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
                ::listen(silent.get(), 8) == 0)
        << std::strerror(errno);
    krdma::UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    kal::RendezvousOffer o;
    o.magic = kal::kRendezvousMagic;
    o.version = kal::kRendezvousVersion;
    EXPECT_FALSE(r.offer(o, tcp.get(), std::chrono::milliseconds(50))) << "a kAL that never answered paired";
    auto offers_waiting = [&] {
        int n = 0;
        while (true) {
            krdma::UniqueFd c(::accept4(silent.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (!c) return n;
            ++n;
        }
    };
    EXPECT_EQ(offers_waiting(), 1) << "the first offer did not reach the silent kAL";
    EXPECT_FALSE(r.offer(o, tcp.get(), std::chrono::milliseconds(50)));
    EXPECT_FALSE(r.offer(o, tcp.get(), std::chrono::milliseconds(50)));
    EXPECT_EQ(offers_waiting(), 0) << "the kAL that did not answer was offered connections again at once";
}

}  // namespace
