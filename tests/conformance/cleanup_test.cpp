// Conformance: cleanup. A consumer process killed with kill -9 while its RDMA Writes are in flight: krdmad reclaims
// everything it held (nothing of it is left in krdmad's resource lists), its peer's connection ends and flushes, and
// the RNIC serves a new consumer. And a consumer that closes in order leaves nothing behind.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {

// The consumer child: openrdma-conformance --conformance-consumer DEVICE RNIC ADDRESS PORT RADDR RKEY LEN. It connects
// to ADDRESS:PORT and keeps 16 RDMA Writes of 64 KiB in flight into [RADDR, RADDR + LEN) until it is killed; it
// prints "ready" once the first 16 completed. Exit status 0 is never reached; 1 and up say what failed.
int consumer_child(int argc, char **argv) {
    if (argc != 7) {
        std::fprintf(stderr, "consumer: DEVICE RNIC ADDRESS PORT RADDR RKEY LEN\n");
        return 2;
    }
    const uint16_t port = static_cast<uint16_t>(std::strtoul(argv[3], nullptr, 0));
    const uint64_t raddr = std::strtoull(argv[4], nullptr, 0);
    const ri_stag_t rkey = static_cast<ri_stag_t>(std::strtoul(argv[5], nullptr, 0));
    const uint64_t len = std::strtoull(argv[6], nullptr, 0);
    Consumer c;
    if (auto e = c.open(argv[0], argv[1]); !e.empty()) {
        std::fprintf(stderr, "consumer: %s\n", e.c_str());
        return 3;
    }
    End e;
    EndOptions o;
    o.bytes = 1 << 20;
    if (auto err = e.make(c, o); !err.empty()) {
        std::fprintf(stderr, "consumer: %s\n", err.c_str());
        return 4;
    }
    for (uint64_t i = 0; i < 8; ++i) (void)e.recv(100 + i, {e.sge(i * 64, 64)});
    if (!e.ep->connect(argv[2], port, bytes_of("doomed")).ok()) return 5;
    auto est = e.cm_event();
    if (!est || est->id != static_cast<uint32_t>(ual::CmEventId::established)) return 6;
    constexpr uint32_t kChunk = 64 * 1024;
    uint64_t posted = 0, done = 0;
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end) {
        while (posted - done < 16) {
            const uint64_t off = (posted * kChunk) % std::max<uint64_t>(len - kChunk, kChunk);
            if (!e.send(posted, RI_WR_RDMA_WRITE, {e.sge(0, kChunk)}, RI_SEND_SIGNALED, raddr + off, rkey).ok()) return 7;
            ++posted;
        }
        auto wc = e.completion(10s);
        if (!wc || wc->status != RI_WC_SUCCESS) return 8;
        if (++done == 16) {
            std::printf("ready\n");
            std::fflush(stdout);
        }
    }
    return 9;
}

namespace {

using Cleanup = Conformance;

bool holds(const std::vector<krdma_client_info> &clients, pid_t pid) {
    return std::any_of(clients.begin(), clients.end(), [&](const auto &c) { return c.pid == static_cast<uint32_t>(pid); });
}

// Moves 64 KiB each way over a new pair of @p c and checks every byte.
void serves(Conformance &, Consumer &c) {
    Pair p;
    ASSERT_EQ(p.connect(c, {}, {}, [](Pair &x) { ASSERT_OK(x.b.recv(1, {x.b.sge(0, 65536)})); }), "");
    for (size_t i = 0; i < 65536; ++i) p.a.buf[i] = pattern(i, 77);
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {p.a.sge(0, 65536)}));
    auto rw = p.b.completion();
    ASSERT_TRUE(rw.has_value());
    EXPECT_EQ(rw->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(rw->byte_len, 65536u);
    EXPECT_TRUE(std::equal(p.a.buf.begin(), p.a.buf.begin() + 65536, p.b.buf.begin()));
    ASSERT_OK(p.a.send(2, RI_WR_RDMA_READ, {p.a.sge(0, 65536)}, RI_SEND_SIGNALED, p.b.addr(), p.b.rkey()));
    auto sw = p.a.completions(2);
    ASSERT_EQ(sw.size(), 2u);
    for (const auto &w : sw) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_SUCCESS));
    p.close();
}

TEST_F(Cleanup, KilledConsumerWithWorkInFlightIsReclaimedAndTheRnicServesOn) {
    open_consumer();
    End b;
    EndOptions bo;
    bo.bytes = 2 << 20;
    ASSERT_EQ(b.make(consumer_, bo), "");
    for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(b.recv(10 + i, {b.sge(i * 64, 64)}));
    auto lp = consumer_.adapter->listen(0, consumer_.requests, 9);
    ASSERT_OK(lp) << lp.error().to_string();
    const auto out = dir_ / "consumer.out";
    const pid_t child = spawn(settings().self,
                              {"--conformance-consumer", device().string(), kRnicName, settings().address,
                               std::to_string((*lp)->port()), std::to_string(b.addr(4096)), std::to_string(b.rkey()),
                               std::to_string(b.buf.size() - 4096)},
                              out);
    ASSERT_GT(child, 0);
    auto req = consumer_.requests->wait(20s);
    ASSERT_OK(req) << req.error().to_string() << "\n" << read_text(out);
    ASSERT_EQ(req->id, static_cast<uint32_t>(ual::CmEventId::connect_request));
    ASSERT_OK(b.ep->accept(req->connection->request));
    auto est = b.cm_event();
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(ual::CmEventId::established)) << cm_name(est->id);
    bool ready = false;
    for (int i = 0; i < 1000 && !ready; ++i) {
        ready = read_text(out).find("ready") != std::string::npos;
        if (!ready) std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(ready) << "the consumer never got its Writes going: " << read_text(out);

    // While it runs, krdmad holds its objects: an open, a PZ, a CQ, a QP, a region, an endpoint.
    auto held = clients();
    ASSERT_EQ(held.size(), 2u);
    ASSERT_TRUE(holds(held, child));
    for (const auto &c : held) {
        if (c.pid == static_cast<uint32_t>(child)) {
            EXPECT_GE(c.total, 5u);
            EXPECT_GT(c.pinned_bytes + c.total, 0u);
        }
    }
    auto info = rnic_info();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->opens, 2u);

    // kill -9 with 16 Writes in flight.
    ASSERT_EQ(::kill(-child, SIGKILL), 0);
    EXPECT_EQ(wait_exit(child), -1) << "killed, not exited";
    // Its peer's connection ends, and what the peer had posted is flushed.
    auto end = b.cm_event(10s);
    ASSERT_TRUE(end.has_value()) << "the survivor never heard that its peer died";
    EXPECT_TRUE(end->id == static_cast<uint32_t>(ual::CmEventId::broken) ||
                end->id == static_cast<uint32_t>(ual::CmEventId::peer_disconnect))
        << cm_name(end->id);
    auto flushed = b.completions(4, 10s);
    ASSERT_EQ(flushed.size(), 4u);
    for (const auto &w : flushed) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    EXPECT_EQ(b.state(), RI_QPS_ERROR);
    // krdmad forgets the dead consumer: nothing of it in its lists.
    for (int i = 0; i < 500 && holds(clients(), child); ++i) std::this_thread::sleep_for(10ms);
    auto after = clients();
    EXPECT_FALSE(holds(after, child)) << "krdmad still holds objects of the killed consumer";
    EXPECT_EQ(after.size(), 1u);
    info = rnic_info();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->opens, 1u) << "only the survivor's open";

    // The survivor closes; nothing is left at all.
    ASSERT_OK((*lp)->close());
    lp->reset();  // the listen point holds the adapter
    b.close();
    consumer_.close();
    for (int i = 0; i < 200 && !clients().empty(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(clients().empty());
    info = rnic_info();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->opens, 0u);
    for (uint32_t n : info->objects) EXPECT_EQ(n, 0u);

    // The RNIC serves a new consumer.
    Consumer fresh;
    ASSERT_EQ(fresh.open(device(), settings().address), "");
    serves(*this, fresh);
    fresh.close();
}

// A consumer that closes in order after traffic leaves nothing in krdmad's lists and no pinned byte.
TEST_F(Cleanup, OrderlyCloseLeavesNothingBehind) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) { ASSERT_OK(x.b.recv(1, {x.b.sge(0, 64)})); });
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {p.a.sge(0, 64)}));
    ASSERT_EQ(p.b.completions(1).size(), 1u);
    ASSERT_EQ(p.a.completions(1).size(), 1u);
    ASSERT_OK(p.a.ep->disconnect());
    ASSERT_TRUE(p.a.cm_event().has_value());
    ASSERT_TRUE(p.b.cm_event().has_value());
    auto held = clients();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_GE(held[0].total, 9u) << "an open, two PZs, CQs, QPs and regions, a listen point";
    p.close();
    consumer_.close();
    for (int i = 0; i < 200 && !clients().empty(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(clients().empty());
    auto info = rnic_info();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->opens, 0u);
    for (uint32_t n : info->objects) EXPECT_EQ(n, 0u);
}

}  // namespace
}  // namespace conformance
