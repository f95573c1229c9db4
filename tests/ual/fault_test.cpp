// Scale and faults between consumer processes, each with its own uAL, through real krdmads and real TCP:
// - 256 QPs connected at once between two processes, every one moving verified bytes both ways, then torn down;
// (Remote access violations moved to the provider conformance suite, tests/conformance/errors_test.cpp.)
// - the peer host's krdmad killed mid-transfer (two hosts: a network namespace and a veth pair);
// - the link between the hosts going down mid-transfer: the kAL's liveness settings (TCP_USER_TIMEOUT, keepalive)
//   end both sides' connections in seconds instead of TCP's minutes, and both kALs report the link down.
// The passive side is always the ual_rdma_peer program (modes "many" and "watch").
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "connection_fixtures.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;
using Clock = std::chrono::steady_clock;

constexpr size_t kRdmaOffset = 4096;

long long ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

// Milliseconds on the monotonic clock, as the peer prints them.
long long at_ms(Clock::time_point t) { return ms_between(Clock::time_point{}, t); }

bool is_end(uint32_t id) {
    return id == static_cast<uint32_t>(CmEventId::disconnected) ||
           id == static_cast<uint32_t>(CmEventId::peer_disconnect);
}

// A watching peer's report.
struct Report {
    uint32_t cm_id = 0;
    int cm_status = 0;
    long long cm_at = 0;  // monotonic milliseconds
    std::vector<std::pair<uint32_t, uint32_t>> async;  // id, detail
    std::vector<uint32_t> unaffiliated;
    std::map<uint32_t, int> receive_status;  // status -> count of receive completions
    int late = -1;
    int state = -1;
    bool done = false;
};

Report parse_report(const std::string &text) {
    Report r;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        std::string word;
        l >> word;
        if (word == "cm") {
            l >> r.cm_id >> r.cm_status >> r.cm_at;
        } else if (word == "ae") {
            std::string detail;
            uint32_t id = 0;
            l >> id >> detail;
            r.async.emplace_back(id, static_cast<uint32_t>(std::stoul(detail, nullptr, 0)));
        } else if (word == "uae") {
            uint32_t id = 0;
            l >> id;
            r.unaffiliated.push_back(id);
        } else if (word == "wc") {
            uint32_t opcode = 0, status = 0;
            l >> opcode >> status;
            if (opcode == RI_WC_RECV) ++r.receive_status[status];
        } else if (word == "late") {
            l >> r.late;
        } else if (word == "state") {
            l >> r.state;
        } else if (word == "done") {
            r.done = true;
        }
    }
    return r;
}

// ---------------------------------------------------------------------------------------------------------------
// 256 QPs at once

using ManyQps = OneHost;

// The messages of the peer's "many" mode.
struct Message {
    uint32_t kind;  // 1: the peer's region, 2: "check what I wrote" (info: where to write back), 3: ok, 4: bad
    uint32_t index;
    BufferInfo info;
};

TEST_F(ManyQps, TwoHundredFiftySixQpsConnectAtOnceAndMoveVerifiedBytesBothWays) {
    constexpr size_t kCount = 256;
    constexpr size_t kBytes = 8192;  // QP i moves kBytes + i bytes each way: no two lengths alike
    const auto t0 = Clock::now();
    auto [pid, port] = start_peer("many", kBytes, {std::to_string(kCount)});
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    // The peer's layout: receive slots (2 per QP), send slots (1 per QP), then per QP a region to write into and
    // one written back.
    const size_t slot = kBytes + kCount;
    const size_t control = kCount * 3 * 64;
    auto recv_off = [&](size_t i, size_t j) { return (i * 2 + j) * 64; };
    auto send_off = [&](size_t i) { return kCount * 2 * 64 + i * 64; };
    auto region = [&](size_t i) { return control + i * slot; };
    auto back = [&](size_t i) { return control + (kCount + i) * slot; };
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", control + 2 * kCount * slot, kCount * 8), "");

    std::vector<std::shared_ptr<ual::Endpoint>> eps(kCount);
    for (size_t i = 0; i < kCount; ++i) {
        eps[i] = s.endpoint(i);
        ASSERT_NE(eps[i], nullptr) << "endpoint " << i;
        for (size_t j = 0; j < 2; ++j) ASSERT_OK(post_recv(s, *eps[i], recv_off(i, j), 64, i * 2 + j));
    }
    // Every connection is started before any is waited for.
    for (size_t i = 0; i < kCount; ++i) {
        ASSERT_OK(eps[i]->connect("127.0.0.1", port, bytes_of("qp " + std::to_string(i)))) << i;
    }
    std::set<uint64_t> established;
    for (size_t n = 0; n < kCount; ++n) {
        auto e = next_cm(s.cm, 30s);
        ASSERT_TRUE(e.has_value()) << "only " << established.size() << " established";
        ASSERT_EQ(e->id, static_cast<uint32_t>(CmEventId::established)) << "QP " << e->context << " status " << e->detail;
        EXPECT_EQ(text(e->connection->private_data), "ok " + std::to_string(e->context));
        established.insert(e->context);
    }
    ASSERT_EQ(established.size(), kCount);
    // All 256 at once: every QP is in RTS before any data moves.
    for (size_t i = 0; i < kCount; ++i) {
        auto qa = eps[i]->query();
        ASSERT_OK(qa);
        ASSERT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_RTS)) << "QP " << i;
    }
    const auto connected = Clock::now();

    // Each QP learns the peer's region for it.
    std::vector<BufferInfo> info(kCount);
    for (size_t n = 0; n < kCount; ++n) {
        auto wc = s.completion(30s);
        ASSERT_TRUE(wc.has_value()) << "only " << n << " regions announced";
        ASSERT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        ASSERT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_RECV));
        Message m{};
        std::memcpy(&m, s.buffer.data() + recv_off(wc->wr_id / 2, wc->wr_id % 2), sizeof m);
        const size_t i = wc->wr_id / 2;
        ASSERT_EQ(wc->qp_num, eps[i]->qp_num());
        ASSERT_EQ(m.kind, 1u);
        ASSERT_EQ(m.index, i);
        ASSERT_EQ(m.info.length, kBytes + i);
        info[i] = m.info;
    }
    // Every QP at once: an RDMA Write of its own pattern, then a Send that asks the peer to check it and write back.
    for (size_t i = 0; i < kCount; ++i) {
        uint8_t *out = s.buffer.data() + region(i);
        for (size_t k = 0; k < kBytes + i; ++k) out[k] = pattern(k, static_cast<uint32_t>(i));
        std::memset(s.buffer.data() + back(i), 0, slot);
        ASSERT_OK(post(s, *eps[i], RI_WR_RDMA_WRITE, region(i), static_cast<uint32_t>(kBytes + i), i * 4 + 1,
                         info[i].addr, info[i].rkey)
                        );
        Message m{2, static_cast<uint32_t>(i),
                  {reinterpret_cast<uint64_t>(s.buffer.data() + back(i)), s.mr->keys().rkey,
                   static_cast<uint32_t>(kBytes + i)}};
        std::memcpy(s.buffer.data() + send_off(i), &m, sizeof m);
        ASSERT_OK(post(s, *eps[i], RI_WR_SEND, send_off(i), sizeof m, i * 4 + 2));
    }
    size_t writes = 0, sends = 0, answers = 0, verified = 0;
    std::vector<size_t> bad;
    while (writes + sends + answers < 3 * kCount) {
        auto wc = s.completion(30s);
        ASSERT_TRUE(wc.has_value()) << writes << " writes, " << sends << " sends, " << answers << " answers";
        ASSERT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS)) << "wr " << wc->wr_id;
        if (wc->opcode == RI_WC_RDMA_WRITE) {
            ++writes;
        } else if (wc->opcode == RI_WC_SEND) {
            ++sends;
        } else {
            ASSERT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_RECV));
            const size_t i = wc->wr_id / 2;
            Message m{};
            std::memcpy(&m, s.buffer.data() + recv_off(i, wc->wr_id % 2), sizeof m);
            ASSERT_EQ(m.index, i);
            EXPECT_EQ(m.kind, 3u) << "the peer found QP " << i << "'s bytes wrong";
            // The peer's RDMA Write came before its answer on the same stream.
            const uint8_t *got = s.buffer.data() + back(i);
            size_t k = 0;
            while (k < kBytes + i && got[k] == pattern(k, static_cast<uint32_t>(i + 1000))) ++k;
            if (k == kBytes + i && got[k] == 0) {
                ++verified;  // and not one byte more
            } else {
                bad.push_back(i);
            }
            ++answers;
        }
    }
    EXPECT_EQ(verified, kCount) << "first bad QP " << (bad.empty() ? -1 : static_cast<long>(bad[0]));
    const auto moved = Clock::now();

    // Orderly teardown of every connection; the peer sees each one end.
    for (size_t i = 0; i < kCount; ++i) ASSERT_OK(eps[i]->disconnect()) << i;
    size_t ended = 0;
    for (size_t n = 0; n < kCount; ++n) {
        auto e = next_cm(s.cm, 30s);
        ASSERT_TRUE(e.has_value()) << "only " << ended << " connections ended";
        EXPECT_TRUE(is_end(e->id)) << "QP " << e->context << ": event " << e->id;
        ++ended;
    }
    EXPECT_EQ(wait_exit(pid), 0) << peer_output("many") << read_text(dir_ / "peer.err");
    const std::string out = peer_output("many");
    EXPECT_NE(out.find("established 256"), std::string::npos) << out;
    EXPECT_NE(out.find("verified 256"), std::string::npos) << out;
    EXPECT_NE(out.find("ended 256"), std::string::npos) << out;
    for (auto &ep : eps) ASSERT_OK(ep->close());
    std::printf("256 QPs: connected in %lld ms, data verified in %lld ms, torn down in %lld ms\n",
                ms_between(t0, connected), ms_between(connected, moved), ms_between(moved, Clock::now()));
}

// ---------------------------------------------------------------------------------------------------------------
// Two hosts: the peer host's krdmad dies, the link goes down

// Short liveness settings, so a dead path is noticed in seconds.
class TwoHostFaults : public TwoHosts {
protected:
    std::string extra_config() override {
        return R"("llp": {"user_timeout_ms": 2000, "keepalive_idle_s": 1, "keepalive_interval_s": 1,
                          "keepalive_count": 2})";
    }

    // What the active side saw of a fault during a transfer.
    struct Transfer {
        size_t before = 0;          // RDMA Writes completed before the fault
        size_t posted = 0;          // RDMA Writes posted in all
        size_t succeeded = 0;       // ... completed successfully
        size_t flushed = 0;         // ... flushed
        uint32_t first_error = 0;   // the status of the first one that failed
        size_t receives_flushed = 0;
        Clock::time_point fault{}, error{};
        bool errored = false;
    };

    // Keeps 8 RDMA Writes of 256 KiB in flight to @p info for 300 ms, runs @p fault, keeps writing until a Write
    // fails, and then collects every completion still owed (posted Writes and @p receives posted receives).
    Transfer transfer_through(Side &s, ual::Endpoint &ep, const BufferInfo &info, size_t receives,
                              const std::function<void()> &fault, std::chrono::milliseconds limit) {
        constexpr uint32_t kChunk = 256 * 1024;
        constexpr size_t kDepth = 8;
        Transfer t;
        const auto start = Clock::now();
        bool faulted = false;
        size_t done = 0, receives_done = 0;
        Clock::time_point deadline = start + 60s;
        while (Clock::now() < deadline) {
            if (!faulted && Clock::now() - start > 300ms && t.succeeded > 0) {
                t.before = t.succeeded;
                fault();
                t.fault = Clock::now();
                faulted = true;
                deadline = t.fault + limit;
            }
            while (!t.errored && t.posted - done < kDepth) {
                const size_t off = (t.posted % 4) * kChunk;
                if (!post(s, ep, RI_WR_RDMA_WRITE, kRdmaOffset + off, kChunk, t.posted, info.addr + off, info.rkey)
                         .ok()) {
                    ADD_FAILURE() << "post_send failed";
                    return t;
                }
                ++t.posted;
            }
            ri_wc_t wc[16];
            auto n = s.cq->poll(wc);
            for (uint32_t i = 0; n && i < *n; ++i) {
                if (wc[i].opcode == RI_WC_RECV) {
                    ++receives_done;
                    if (wc[i].status == RI_WC_WR_FLUSH_ERR) ++t.receives_flushed;
                    continue;
                }
                ++done;
                if (wc[i].status == RI_WC_SUCCESS) {
                    ++t.succeeded;
                } else {
                    if (wc[i].status == RI_WC_WR_FLUSH_ERR) ++t.flushed;
                    if (!t.errored) {
                        t.errored = true;
                        t.first_error = wc[i].status;
                        t.error = Clock::now();
                    }
                }
            }
            if (t.errored && done == t.posted && receives_done == receives) break;
            if (!n || *n == 0) std::this_thread::sleep_for(200us);
        }
        EXPECT_EQ(done, t.posted) << "Writes never completed";
        EXPECT_EQ(receives_done, receives) << "receives never completed";
        return t;
    }
};

TEST_F(TwoHostFaults, PeerKrdmadKilledMidTransfer) {
    constexpr size_t kBytes = 1 << 20;
    auto [pid, port] = start_peer_b("watch", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    ASSERT_EQ(s.open(dev_a_.string(), addr_a_, kRdmaOffset + kBytes), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    auto info = connect_to_watcher(s, *ep, addr_b_, port);
    ASSERT_TRUE(info.has_value()) << read_text(dir_ / "peer.err");

    const Transfer t = transfer_through(s, *ep, *info, 3, [&] { ::kill(-krdmad_b_, SIGKILL); }, 10s);
    EXPECT_GT(t.before, 0u) << "the transfer was under way";
    ASSERT_TRUE(t.errored) << "the QP never failed: " << t.succeeded << " Writes completed";
    EXPECT_LT(ms_between(t.fault, t.error), 5000);
    // The stream failed under a request still being sent (LLP error), or between requests (a Write completes once
    // its data is in the socket), when every later one is flushed.
    EXPECT_TRUE(t.first_error == RI_WC_LLP_ERR || t.first_error == RI_WC_WR_FLUSH_ERR) << t.first_error;
    EXPECT_EQ(t.receives_flushed, 3u);
    auto qa = ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
    // The survivor hears that the connection ended: the peer's side of the stream closed or reset.
    auto end = next_cm(s.cm, 10s);
    ASSERT_TRUE(end.has_value());
    EXPECT_TRUE(end->id == static_cast<uint32_t>(CmEventId::broken) ||
                end->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
        << end->id;
    EXPECT_LT(ms_between(t.fault, Clock::now()), 10000);

    // The peer's consumer lost its kAL: its endpoint broke (ENODEV), its RNIC is gone, its work flushed, and it
    // finished by itself (no thread of its uAL or uVP hangs).
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
    const std::string out = read_text(dir_ / "peer.out");
    const Report r = parse_report(out);
    ASSERT_TRUE(r.done) << out;
    EXPECT_EQ(r.cm_id, static_cast<uint32_t>(CmEventId::broken)) << out;
    EXPECT_STATUS(r.cm_status, RI_ENODEV) << out;
    EXPECT_LT(r.cm_at - at_ms(t.fault), 5000) << out;
    EXPECT_NE(std::find(r.unaffiliated.begin(), r.unaffiliated.end(), RI_AE_RNIC_FATAL), r.unaffiliated.end()) << out;
    EXPECT_EQ(r.receive_status.count(RI_WC_WR_FLUSH_ERR) ? r.receive_status.at(RI_WC_WR_FLUSH_ERR) : 0, 8) << out;
    EXPECT_EQ(r.late, RI_WC_WR_FLUSH_ERR) << out;
    EXPECT_EQ(r.state, -1) << out;  // the QP's state lives in the kVP, which went with its krdmad

    EXPECT_EQ(s.unaffiliated->pending(), 0u) << "no link event: the link stayed up";

    const auto closing = Clock::now();
    ASSERT_OK(ep->close());
    s.close();
    EXPECT_LT(ms_between(closing, Clock::now()), 5000);
}

TEST_F(TwoHostFaults, LinkDownMidTransferEndsBothSidesInSeconds) {
    constexpr size_t kBytes = 1 << 20;
    auto [pid, port] = start_peer_b("watch", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    ASSERT_EQ(s.open(dev_a_.string(), addr_a_, kRdmaOffset + kBytes), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    auto info = connect_to_watcher(s, *ep, addr_b_, port);
    ASSERT_TRUE(info.has_value()) << read_text(dir_ / "peer.err");

    // Host B's end of the link goes down: nothing reaches the other side any more, and nothing says so.
    const Transfer t = transfer_through(
        s, *ep, *info, 3, [&] { ASSERT_EQ(sh(in_ns("ip link set " + veth_b_ + " down")), 0); }, 15s);
    EXPECT_GT(t.before, 0u) << "the transfer was under way";
    ASSERT_TRUE(t.errored) << "the QP never failed: " << t.succeeded << " Writes completed";
    // TCP_USER_TIMEOUT of 2 s: unacknowledged data fails the socket; TCP alone would retransmit for minutes.
    EXPECT_LT(ms_between(t.fault, t.error), 8000);
    EXPECT_GE(ms_between(t.fault, t.error), 1500);
    EXPECT_EQ(t.first_error, static_cast<uint32_t>(RI_WC_LLP_ERR));
    EXPECT_GT(t.flushed, 0u);
    EXPECT_EQ(t.receives_flushed, 3u);
    auto qa = ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
    auto end = next_cm(s.cm, 10s);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->id, static_cast<uint32_t>(CmEventId::broken)) << end->id;
    EXPECT_EQ(end->connection->status, ETIMEDOUT);
    // The kAL watches the RNIC's netdev: host A's end of the veth pair lost its carrier.
    auto link = s.unaffiliated->wait(5s);
    ASSERT_OK(link);
    EXPECT_EQ(link->id, static_cast<uint32_t>(RI_AE_RNIC_LINK_DOWN));
    EXPECT_EQ(link->resource_type, static_cast<uint32_t>(RI_RES_RNIC));

    // Host B only received: keepalive (1 s idle, 1 s apart) with the user timeout ends its side too.
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
    const std::string out = read_text(dir_ / "peer.out");
    const Report r = parse_report(out);
    ASSERT_TRUE(r.done) << out;
    EXPECT_EQ(r.cm_id, static_cast<uint32_t>(CmEventId::broken)) << out;
    EXPECT_NE(r.cm_status, 0) << out;
    const long long b_after_fault = r.cm_at - at_ms(t.fault);
    EXPECT_LT(b_after_fault, 8000) << out;
    EXPECT_NE(std::find(r.unaffiliated.begin(), r.unaffiliated.end(), RI_AE_RNIC_LINK_DOWN), r.unaffiliated.end())
        << out;
    EXPECT_EQ(r.receive_status.count(RI_WC_WR_FLUSH_ERR) ? r.receive_status.at(RI_WC_WR_FLUSH_ERR) : 0, 8) << out;
    EXPECT_EQ(r.late, RI_WC_WR_FLUSH_ERR) << out;
    EXPECT_EQ(r.state, RI_QPS_ERROR) << out;
    std::printf("link down: host A failed after %lld ms, host B after %lld ms\n", ms_between(t.fault, t.error),
                b_after_fault);
}

// The kAL tells an RNIC's owners when its link goes down and comes back, connected or not.
TEST_F(TwoHostFaults, RnicLinkDownAndUpReachTheRnicsOwner) {
    Side s;
    ASSERT_EQ(s.open(dev_a_.string(), addr_a_, 4096), "");
    ASSERT_EQ(sh(in_ns("ip link set " + veth_b_ + " down")), 0);  // host A's end loses its carrier
    auto down = s.unaffiliated->wait(5s);
    ASSERT_OK(down);
    EXPECT_EQ(down->id, static_cast<uint32_t>(RI_AE_RNIC_LINK_DOWN));
    ASSERT_EQ(sh(in_ns("ip link set " + veth_b_ + " up")), 0);
    auto up = s.unaffiliated->wait(5s);
    ASSERT_OK(up);
    EXPECT_EQ(up->id, static_cast<uint32_t>(RI_AE_RNIC_LINK_UP));
    EXPECT_EQ(s.unaffiliated->pending(), 0u);
}

}  // namespace
