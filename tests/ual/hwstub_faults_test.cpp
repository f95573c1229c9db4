// hwstub's fault injection, as an administrator drives it: krdmad serves hwstub on 127.0.0.1, a consumer (this test)
// connects to a peer program (ual_rdma_peer) on the same RNIC, and `rdmactl inject` (or the RNIC's "faults" option)
// makes the emulated wire or adapter fail. Each test asserts what the consumers see: the asynchronous event, the
// completions flushed, the Terminate the peer receives, the verb's error, and that krdmad and the adapter serve on.
// Wire faults name this test's QP ("qp"), so the peer's own frames stay whole and the peer reports what it received.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "connection_fixtures.hpp"
#include "exchange.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using namespace std::chrono_literals;
using ual::CmEventId;

// The detail of an event about the MPA CRC error Terminate (RFC 5044: layer LLP, code 0x02): the Terminate word
// (layer/etype << 8 | code), and as the peer program prints it.
constexpr uint32_t kCrcErrorDetail = 0x2002u;
const std::string kCrcErrorText = "0x2002";

class HwstubFaults : public testutil::KrdmadFixture {
protected:
    void SetUp() override { testutil::KrdmadFixture::SetUp(); }

    // krdmad with hwstub hw0 on 127.0.0.1, whose options are @p options (a JSON object text).
    void serve(const std::string &options = "{}") {
        device_ = dir_ / "krdma.sock";
        const std::string cfg = R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                std::string(SOFTRNIC_PROVIDER_DIR) + R"(", "modules": ["hwstub_kvp.so"], "rnics": [)"
                                R"({"provider": "hwstub", "name": "hw0", "address": "127.0.0.1", "options": )" +
                                options + "}]}";
        krdmad_ = start({"--config", write_config(cfg).string()});
        ASSERT_TRUE(wait_ready(krdmad_)) << stderr_text();
    }

    // The peer program on hw0 in @p mode; its pid and port.
    std::pair<pid_t, uint16_t> start_peer(const std::string &mode, size_t bytes) {
        const auto out = dir_ / ("peer-" + mode + ".out");
        peer_out_ = out;
        pid_t pid = spawn(PEER_PATH, {device_.string(), "hw0", mode, std::to_string(bytes)}, out, dir_ / "peer.err");
        return {pid, wait_for_port(out)};
    }
    std::string peer_text() { return read_text(peer_out_); }
    // Waits (10 s at most) until the peer's output has @p line.
    bool peer_says(const std::string &line) {
        for (int i = 0; i < 500; ++i) {
            if (peer_text().find(line) != std::string::npos) return true;
            ::usleep(20000);
        }
        return false;
    }

    // rdmactl inject hw0 ARGS...; the provider's reply as JSON (null when rdmactl failed; its text in @p out).
    nlohmann::json inject(std::vector<std::string> args, std::string *out = nullptr) {
        std::vector<std::string> argv = {"--device", device_.string(), "--json", "inject", "hw0"};
        argv.insert(argv.end(), args.begin(), args.end());
        std::string text;
        const int rc = rdmactl(argv, text);
        if (out != nullptr) *out = text;
        if (rc != 0) return nullptr;
        return nlohmann::json::parse(text, nullptr, false);
    }

    // Our side connected to a "watch" peer: the side, its endpoint, its QP number and the peer's buffer.
    struct Connected {
        Side s;
        std::shared_ptr<ual::Endpoint> ep;
        uint32_t qp_num = 0;
        BufferInfo peer{};
    };
    void connect_watcher(Connected &c, uint16_t port) {
        ASSERT_EQ(c.s.open(device_.string(), "hw0", 1 << 20), "");
        c.ep = c.s.endpoint(5);
        ASSERT_NE(c.ep, nullptr);
        for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(c.s, *c.ep, i * 256, 256, 100 + i));
        auto info = connect_to_watcher(c.s, *c.ep, "127.0.0.1", port);
        ASSERT_TRUE(info.has_value()) << stderr_text();
        c.peer = *info;
        auto qa = c.ep->query();
        ASSERT_OK(qa);
        c.qp_num = qa->qp_num;
        ASSERT_NE(c.qp_num, 0u);
    }

    // krdmad serving hw0, a "watch" peer on it, and @p c connected to the peer: the peer's pid, 0 after a failure.
    pid_t serve_and_watch(Connected &c) {
        serve();
        if (HasFatalFailure()) return 0;
        auto [pid, port] = start_peer("watch", 1 << 16);
        EXPECT_NE(port, 0) << read_text(dir_ / "peer.err");
        if (port == 0) return 0;
        connect_watcher(c, port);
        return HasFatalFailure() ? 0 : pid;
    }

    // The next affiliated asynchronous event of @p s with id @p id (others are skipped), within 10 s.
    static std::optional<ual::Event> async_event(Side &s, uint32_t id) {
        const auto end = std::chrono::steady_clock::now() + 10s;
        while (std::chrono::steady_clock::now() < end) {
            auto e = s.async->wait(100ms);
            if (e && e->id == id) return *e;
        }
        return std::nullopt;
    }

    std::filesystem::path device_;
    std::filesystem::path peer_out_;
    pid_t krdmad_ = 0;
};

// An outbound FPDU corrupted on the wire: the peer's CRC check fails, it terminates the connection with the LLP
// layer's CRC error, our consumer hears RI_AE_QP_TERMINATE_RECEIVED and later work is flushed.
TEST_F(HwstubFaults, CorruptedOutboundFrameMakesThePeerTerminateWithCrcError) {
    Connected c;
    const pid_t pid = serve_and_watch(c);
    if (pid == 0) return;
    auto armed = inject({"tx_corrupt=1", "qp=" + std::to_string(c.qp_num)});
    ASSERT_TRUE(armed.is_object());
    EXPECT_EQ(armed["faults"]["tx_corrupt"], 1);
    EXPECT_EQ(armed["faults"]["qp"], c.qp_num);

    std::memcpy(c.s.buffer.data() + 4096, "corrupted", 9);
    ASSERT_OK(post(c.s, *c.ep, RI_WR_SEND, 4096, 9, 1));
    auto term = async_event(c.s, RI_AE_QP_TERMINATE_RECEIVED);
    ASSERT_TRUE(term.has_value()) << "no Terminate from the peer";
    EXPECT_EQ(term->resource_id, c.qp_num);
    EXPECT_EQ(term->detail, kCrcErrorDetail) << std::hex << term->detail;
    // The peer's QP failed on the frame with the CRC error (it sent the Terminate: a protocol error) and its
    // receives were flushed; the bytes never reached it.
    EXPECT_TRUE(peer_says("done")) << peer_text() << stderr_text() << read_text(dir_ / "peer.err");
    EXPECT_NE(peer_text().find("ae " + std::to_string(RI_AE_QP_TERMINATE_SENT) + " " + kCrcErrorText),
              std::string::npos)
        << peer_text() << read_text(dir_ / "peer.err");
    EXPECT_NE(peer_text().find("ae " + std::to_string(RI_AE_QP_PROTOCOL_ERROR) + " " + kCrcErrorText),
              std::string::npos)
        << peer_text() << read_text(dir_ / "peer.err");
    EXPECT_EQ(peer_text().find("wc " + std::to_string(RI_WC_RECV) + " 0"), std::string::npos) << peer_text();
    // Our QP is in ERROR: what we post now is flushed.
    for (auto wc = c.s.completion(2s); wc; wc = c.s.completion(500ms)) {
        if (wc->wr_id == 1) {
            EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));  // it left the adapter
        }
    }
    ASSERT_OK(post(c.s, *c.ep, RI_WR_SEND, 4096, 9, 2));
    auto late = c.s.completion(5s);
    ASSERT_TRUE(late.has_value());
    EXPECT_EQ(late->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    auto fired = inject({});
    ASSERT_TRUE(fired.is_object());
    EXPECT_EQ(fired["faults"]["tx_corrupt"], 0);
    EXPECT_GE(fired["engine"]["faults_fired"].get<uint64_t>(), 1u);
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
}

// An inbound FPDU corrupted: our adapter's CRC check fails; it terminates the stream (the peer hears a Terminate),
// our QP goes to ERROR with the Terminate it sent, and the RDMA Read whose response was hit is flushed.
TEST_F(HwstubFaults, CorruptedInboundFrameTerminatesOurQpWithCrcError) {
    Connected c;
    const pid_t pid = serve_and_watch(c);
    if (pid == 0) return;
    ASSERT_TRUE(inject({"rx_corrupt=1", "qp=" + std::to_string(c.qp_num)}).is_object());
    ASSERT_OK(post(c.s, *c.ep, RI_WR_RDMA_READ, 4096, 4096, 7, c.peer.addr, c.peer.rkey));
    // The adapter sent the CRC error's Terminate: RI_AE_QP_TERMINATE_SENT (and a protocol error) with its word.
    auto sent = async_event(c.s, RI_AE_QP_TERMINATE_SENT);
    ASSERT_TRUE(sent.has_value()) << "our adapter did not terminate the stream";
    EXPECT_EQ(sent->detail, kCrcErrorDetail) << std::hex << sent->detail;
    auto wc = c.s.completion(5s);
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->wr_id, 7u);
    EXPECT_NE(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_TRUE(peer_says("done")) << peer_text() << stderr_text();
    EXPECT_NE(peer_text().find("ae " + std::to_string(RI_AE_QP_TERMINATE_RECEIVED) + " " + kCrcErrorText),
              std::string::npos)
        << peer_text() << read_text(dir_ / "peer.err");
    auto qa = c.ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
}

// A Send the wire loses: the next one arrives with the wrong message sequence number (RFC 5041 MSN), the peer
// terminates with the DDP error, and our consumer hears it.
TEST_F(HwstubFaults, ALostSendBreaksTheMessageSequenceAndThePeerTerminates) {
    Connected c;
    const pid_t pid = serve_and_watch(c);
    if (pid == 0) return;
    ASSERT_TRUE(inject({"tx_drop=1", "qp=" + std::to_string(c.qp_num)}).is_object());
    ASSERT_OK(post(c.s, *c.ep, RI_WR_SEND, 4096, 16, 1));  // lost
    auto first = c.s.completion(5s);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->status, static_cast<uint32_t>(RI_WC_SUCCESS));  // the adapter sent it, as far as it knows
    ASSERT_OK(post(c.s, *c.ep, RI_WR_SEND, 4096, 16, 2));  // arrives out of sequence
    auto term = async_event(c.s, RI_AE_QP_TERMINATE_RECEIVED);
    ASSERT_TRUE(term.has_value()) << peer_text();
    EXPECT_TRUE(peer_says("done")) << peer_text() << stderr_text();
    EXPECT_NE(peer_text().find("ae " + std::to_string(RI_AE_QP_TERMINATE_SENT)), std::string::npos) << peer_text();
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
}

// A slow wire: every outbound FPDU of our QP waits 100 ms. Nothing is lost or reordered (the exchange checks every
// byte), and each round trip takes at least the delay.
TEST_F(HwstubFaults, ADelayedWireSlowsTheQpAndLosesNothing) {
    serve();
    const size_t kBytes = 1 << 18;
    auto [pid, port] = start_peer("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    auto ep = connect_to_acceptor(s, device_.string(), "hw0", "127.0.0.1", port, kBytes);
    ASSERT_NE(ep, nullptr);
    auto qa = ep->query();
    ASSERT_OK(qa);
    ASSERT_TRUE(inject({"tx_delay_ms=100", "qp=" + std::to_string(qa->qp_num)}).is_object());
    const auto t0 = std::chrono::steady_clock::now();
    exchange(s, *ep, {size_t{1}, size_t{65536}, kBytes}, kBytes);
    const auto took = std::chrono::steady_clock::now() - t0;
    // Three rounds, each at least a delayed Write+Send out and a delayed Read Request: 6 delays.
    EXPECT_GE(took, 600ms);
    auto cleared = inject({"--clear"});
    ASSERT_TRUE(cleared.is_object());
    EXPECT_EQ(cleared["faults"]["tx_delay_ms"], 0);
    ASSERT_OK(ep->disconnect());
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
}

// A completion lost to a full CQ: the CQ's overflow event, the QP's fatal error, a Terminate to the peer, and the
// CQ's poll says RI_EOVERFLOW once it is empty.
TEST_F(HwstubFaults, ALostCompletionOverflowsTheCqAndEndsTheQp) {
    Connected c;
    const pid_t pid = serve_and_watch(c);
    if (pid == 0) return;
    ASSERT_TRUE(inject({"cq_overflow=1", "qp=" + std::to_string(c.qp_num)}).is_object());
    ASSERT_OK(post(c.s, *c.ep, RI_WR_SEND, 4096, 8, 1));
    auto overflow = async_event(c.s, RI_AE_CQ_OVERFLOW);
    ASSERT_TRUE(overflow.has_value());
    EXPECT_EQ(overflow->resource_type, static_cast<uint32_t>(RI_RES_CQ));
    EXPECT_TRUE(peer_says("done")) << peer_text() << stderr_text();
    EXPECT_NE(peer_text().find("ae " + std::to_string(RI_AE_QP_TERMINATE_RECEIVED)), std::string::npos)
        << peer_text() << stderr_text();
    // Our receives are flushed into the overflowed CQ; once they are taken, the CQ reports the loss.
    bool said_overflow = false;
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!said_overflow && std::chrono::steady_clock::now() < end) {
        ri_wc_t wc{};
        auto n = c.s.cq->poll({&wc, 1});
        if (!n) {
            EXPECT_STATUS(n, RI_EOVERFLOW) << n.error().to_string();
            said_overflow = true;
        } else if (*n == 1) {
            EXPECT_NE(wc.wr_id, 1u) << "the lost completion appeared";
        }
    }
    EXPECT_TRUE(said_overflow);
    auto qa = c.ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
}

// A verb the adapter fails, at run time and from the options: the call says RI_EIO, nothing is left half made,
// and the next call works.
TEST_F(HwstubFaults, AFailingVerbSaysEioOnceAndTheNextCallWorks) {
    serve(R"({"faults": {"fail_verb": "alloc_pd"}})");
    {
        ual::Options o;
        o.device = device_;
        auto al = ual::AccessLayer::open(o);
        ASSERT_OK(al);
        auto ad = (*al)->open_adapter("hw0");
        ASSERT_OK(ad);
        auto pz = (*ad)->create_pz();
        ASSERT_FALSE(pz);
        EXPECT_STATUS(pz, RI_EIO) << pz.error().to_string();
        auto again = (*ad)->create_pz();
        EXPECT_OK(again) << again.error().to_string();
    }
    auto armed = inject({"fail_verb=create_qp", "fail_count=2"});
    ASSERT_TRUE(armed.is_object());
    EXPECT_EQ(armed["faults"]["fail_verb"], "create_qp");
    EXPECT_EQ(armed["faults"]["fail_count"], 2);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "hw0", 4096), "");
    EXPECT_EQ(s.endpoint(), nullptr);
    EXPECT_EQ(s.endpoint(), nullptr);
    auto ep = s.endpoint();
    EXPECT_NE(ep, nullptr);
    // Nothing of the failed creations is left: one QP of this process.
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "resources"}, out), 0) << out;
    const auto res = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(res.is_object()) << out;
    EXPECT_EQ(res["rnics"][0]["objects"]["qp"], 1) << out;
}

// A catastrophic adapter error: every consumer of the RNIC hears RI_AE_RNIC_FATAL, their work is flushed and later
// posts fail, krdmad stays up, and once the consumers have closed it the administrator detaches and re-attaches the
// RNIC and it serves again.
TEST_F(HwstubFaults, ACatastrophicErrorReachesEveryConsumerAndKrdmadStaysUp) {
    serve();
    auto [pid, port] = start_peer("watch", 1 << 16);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    {
        Connected c;
        connect_watcher(c, port);
        if (HasFatalFailure()) return;
        auto dead = inject({"fatal"});
        ASSERT_TRUE(dead.is_object());
        EXPECT_EQ(dead["engine"]["dead"], true);
        auto fatal = c.s.unaffiliated->wait(10s);
        ASSERT_OK(fatal);
        EXPECT_EQ(fatal->id, static_cast<uint32_t>(RI_AE_RNIC_FATAL));
        EXPECT_TRUE(peer_says("uae " + std::to_string(RI_AE_RNIC_FATAL))) << peer_text();
        // What we had posted is flushed; what we post now fails or is flushed, never runs.
        auto wc = c.s.completion(5s);
        ASSERT_TRUE(wc.has_value());
        EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
        const auto st = post(c.s, *c.ep, RI_WR_SEND, 4096, 8, 9);
        if (st.ok()) {
            auto late = c.s.completion(5s);
            ASSERT_TRUE(late.has_value());
            EXPECT_EQ(late->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
        }
        ::kill(-pid, SIGKILL);
        (void)wait_exit(pid);
    }
    // krdmad is up and says who is dead.
    EXPECT_EQ(::kill(krdmad_, 0), 0);
    std::string out;
    auto state = inject({}, &out);
    ASSERT_TRUE(state.is_object()) << out;
    EXPECT_EQ(state["engine"]["dead"], true);
    // Once no consumer holds it, the administrator replaces the adapter: detach, attach, and it serves.
    bool detached = false;
    for (int i = 0; i < 250 && !detached; ++i) {
        detached = rdmactl({"--device", device_.string(), "detach", "hw0"}, out) == 0;
        if (!detached) ::usleep(20000);
    }
    ASSERT_TRUE(detached) << out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "attach", "--provider", "hwstub", "--name", "hw0", "--address",
                       "127.0.0.1"},
                      out),
              0)
        << out;
    const size_t kBytes = 1 << 16;
    auto [pid2, port2] = start_peer("accept", kBytes);
    ASSERT_NE(port2, 0) << read_text(dir_ / "peer.err");
    Side s;
    auto ep = connect_to_acceptor(s, device_.string(), "hw0", "127.0.0.1", port2, kBytes);
    ASSERT_NE(ep, nullptr);
    exchange(s, *ep, {size_t{4096}, kBytes}, kBytes);
    ASSERT_OK(ep->disconnect());
    EXPECT_EQ(wait_exit(pid2), 0) << read_text(dir_ / "peer.err");
}

// An adapter of several engines ("engines": 2): each open is served by one engine thread, round robin, so the peer
// program and this test run on different engines, and traffic between them moves every byte. The threads carry
// their names for `top -H`, and the adapter's state counts them.
TEST_F(HwstubFaults, SeveralEnginesServeTheOpensRoundRobin) {
    serve(R"({"engines": 2})");
    std::set<std::string> names;
    for (const auto &t : std::filesystem::directory_iterator("/proc/" + std::to_string(krdmad_) + "/task")) {
        std::string comm = read_text(t.path() / "comm");
        if (!comm.empty() && comm.back() == '\n') comm.pop_back();
        names.insert(comm);
    }
    EXPECT_TRUE(names.contains("hwstub-oe0") && names.contains("hwstub-oe1")) << ::testing::PrintToString(names);
    EXPECT_FALSE(names.contains("hwstub-oe2"));
    auto state = inject({});
    ASSERT_TRUE(state.is_object());
    EXPECT_EQ(state["engine"]["engines"], 2);
    const size_t kBytes = 1 << 20;
    auto [pid, port] = start_peer("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    auto ep = connect_to_acceptor(s, device_.string(), "hw0", "127.0.0.1", port, kBytes);
    ASSERT_NE(ep, nullptr);
    exchange(s, *ep, {size_t{1}, size_t{65537}, kBytes}, kBytes);
    ASSERT_OK(ep->disconnect());
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.err");
    // Both engines worked: each moved payload for its open.
    state = inject({});
    ASSERT_TRUE(state.is_object());
    EXPECT_GE(state["engine"]["tx_bytes"].get<uint64_t>(), 2 * kBytes);
    // More engines than the adapter has are refused by name.
    std::string out;
    EXPECT_NE(rdmactl({"--device", device_.string(), "attach", "--provider", "hwstub", "--name", "hw9", "--address",
                       "::1", "--options", R"({"engines": 17})"},
                      out),
              0);
    EXPECT_NE(stderr_text().find("'engines' must be at most 16"), std::string::npos) << stderr_text();
    EXPECT_NE(rdmactl({"--device", device_.string(), "attach", "--provider", "hwstub", "--name", "hw9", "--address",
                       "::1", "--options", R"({"moderation_us": 100001})"},
                      out),
              0);
    EXPECT_NE(stderr_text().find("'moderation_us' must be at most 100000"), std::string::npos) << stderr_text();
}

// Bad requests get clear refusals: an unknown fault, a bad value, an unknown RNIC, a fatal fault in the options.
TEST_F(HwstubFaults, BadFaultRequestsAreRefusedByName) {
    serve();
    std::string out;
    EXPECT_TRUE(inject({"melt=1"}, &out).is_null());
    EXPECT_NE(out.find("'melt' is unknown"), std::string::npos) << out;
    EXPECT_TRUE(inject({"fail_verb=format_disk"}, &out).is_null());
    EXPECT_NE(out.find("fail_verb"), std::string::npos) << out;
    EXPECT_TRUE(inject({"tx_drop=many"}, &out).is_null());
    EXPECT_NE(out.find("must be a number"), std::string::npos) << out;
    EXPECT_NE(rdmactl({"--device", device_.string(), "inject", "nosuch", "fatal"}, out), 0);
    EXPECT_NE(out.find("no RNIC named nosuch"), std::string::npos) << out;
    EXPECT_NE(rdmactl({"--device", device_.string(), "control", "hw0", "{\"reboot\": 1}"}, out), 0);
    EXPECT_NE(out.find("not a hwstub control request"), std::string::npos) << out;
    // Nothing was armed by the refusals, and the adapter is alive.
    auto state = inject({});
    ASSERT_TRUE(state.is_object());
    EXPECT_EQ(state["engine"]["dead"], false);
    EXPECT_EQ(state["faults"]["tx_drop"], 0);
    // "fatal" belongs to run time, not to a configuration.
    EXPECT_NE(rdmactl({"--device", device_.string(), "attach", "--provider", "hwstub", "--name", "hw1", "--address",
                       "::1", "--options", R"({"faults": {"fatal": true}})"},
                      out),
              0);
    EXPECT_NE(stderr_text().find("run time only"), std::string::npos) << stderr_text();
    // Non-administrators may not inject (root only: the test needs another uid).
    if (::geteuid() == 0) {
        EXPECT_NE(rdmactl({"--device", device_.string(), "inject", "hw0", "fatal"}, out,
                          testutil::Credentials{65534, 65534, {}}),
                  0);
        EXPECT_NE(out.find("permission denied"), std::string::npos) << out;
        state = inject({});
        ASSERT_TRUE(state.is_object());
        EXPECT_EQ(state["engine"]["dead"], false);
    }
}

}  // namespace
