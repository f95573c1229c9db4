// Conformance: errors. A local buffer the QP may not use (a forged lkey, a range outside its region), remote access
// violations (a bad STag, out of bounds, missing rights: RFC 5040/5041 Terminate codes reach both sides), a Send
// with no receive posted (RFC 5041: no buffer), and what a QP in ERROR does with new work.
#include <map>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {
namespace {

using Errors = Conformance;
using ual::CmEventId;

constexpr uint32_t id_of(CmEventId e) { return static_cast<uint32_t>(e); }

// A request naming local memory the QP may not use. The RDMAC verbs allow two answers, and this suite takes either:
// the post is refused at once (EINVAL or EACCES: nothing queued, the QP untouched and still usable), or the request
// completes with RI_WC_LOC_PROT_ERR, the QP goes to ERROR and everything behind it is flushed.
void bad_local_buffer(Consumer &c, Pair &p, const ri_sge_t &bad, const char *what) {
    SCOPED_TRACE(what);
    const rdma::Status st = p.a.send(77, RI_WR_RDMA_WRITE, {bad}, RI_SEND_SIGNALED, p.b.addr(), p.b.rkey());
    if (!st.ok()) {
        EXPECT_TRUE(st.code() == RI_EINVAL || st.code() == RI_EACCES) << "refused at post with " << st.code();
        std::printf("%s: %s refuses it at post (%s)\n", what, settings().provider.c_str(), std::strerror(st.code()));
        EXPECT_TRUE(p.a.idle()) << "a refused request completed";
        EXPECT_EQ(p.a.state(), RI_QPS_RTS) << "a refused post changed the QP";
        // The QP serves on.
        ASSERT_OK(p.a.send(78, RI_WR_SEND, {p.a.sge(4096, 16)}));
        auto ok = p.a.completion();
        ASSERT_TRUE(ok.has_value());
        EXPECT_EQ(ok->wr_id, 78u);
        EXPECT_EQ(ok->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        auto rw = p.b.completion();
        ASSERT_TRUE(rw.has_value());
        EXPECT_EQ(rw->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        return;
    }
    std::printf("%s: %s completes it with RI_WC_LOC_PROT_ERR\n", what, settings().provider.c_str());
    // Behind it: a Send that must be flushed, not executed.
    ASSERT_OK(p.a.send(79, RI_WR_SEND, {p.a.sge(4096, 16)}));
    std::map<uint64_t, ri_wc_t> wcs;
    for (const auto &w : p.a.completions(4)) wcs[w.wr_id] = w;  // the Write, the Send, two receives
    ASSERT_EQ(wcs.count(77), 1u);
    EXPECT_EQ(wcs[77].status, static_cast<uint32_t>(RI_WC_LOC_PROT_ERR));
    EXPECT_EQ(wcs[77].opcode, static_cast<uint32_t>(RI_WC_RDMA_WRITE));
    for (uint64_t id : {79, 10, 11}) {
        ASSERT_EQ(wcs.count(id), 1u) << "request " << id << " never completed";
        EXPECT_EQ(wcs[id].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "request " << id;
    }
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_TRUE(std::all_of(p.b.buf.begin(), p.b.buf.begin() + 4096, [](uint8_t x) { return x == 0; }))
        << "the bad Write placed data";
    // Posting to a QP in ERROR completes at once, flushed.
    ASSERT_OK(p.a.send(80, RI_WR_SEND, {p.a.sge(4096, 16)}));
    auto late = p.a.completion(5s);
    ASSERT_TRUE(late.has_value());
    EXPECT_EQ(late->wr_id, 80u);
    EXPECT_EQ(late->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    (void)c;
}

void with_receives(Pair &x) {
    ASSERT_OK(x.a.recv(10, {x.a.sge(0, 64)}));
    ASSERT_OK(x.a.recv(11, {x.a.sge(64, 64)}));
    for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(x.b.recv(20 + i, {x.b.sge(8192 + i * 64, 64)}));
}

TEST_F(Errors, ForgedLkeyIsALocalProtectionError) {
    Pair &p = pair();
    connect(p, {}, {}, with_receives);
    ri_sge_t bad = p.a.sge(4096, 4096);
    bad.lkey ^= 0x100u;  // another index of the STag table: a key the consumer was never given
    bad_local_buffer(consumer_, p, bad, "a forged lkey");
}

TEST_F(Errors, RangeOutsideTheRegionIsALocalProtectionError) {
    Pair &p = pair();
    connect(p, {}, {}, with_receives);
    ri_sge_t bad = p.a.sge(p.a.buf.size() - 100, 4096);  // the right lkey, 3996 bytes past the region's end
    bad_local_buffer(consumer_, p, bad, "a range past the region");
}

// ---------------------------------------------------------------------------------------------------------------
// Remote access violations. Moved from tests/ual/fault_test.cpp (RemoteAccess.TerminateReachesTheRequesterBothQpsFlush,
// softrnic only there): the requester and the victim are two QPs of the RNIC under test.

struct AccessCase {
    const char *name;
    uint32_t opcode;  // RI_WR_RDMA_WRITE or RI_WR_RDMA_READ
    bool bad_stag;    // else: out of the region's bounds
    uint32_t term;    // the Terminate code both sides report: layer/etype << 8 | error code
};

// RFC 5041 §7.2 (tagged buffer errors, for a Write's placement) and RFC 5040 §7.2 (remote protection errors, for a
// Read Request's source).
const AccessCase kAccessCases[] = {
    {"WriteWithABadStag", RI_WR_RDMA_WRITE, true, 0x1100},  // DDP, tagged buffer, invalid STag
    {"WriteOutOfBounds", RI_WR_RDMA_WRITE, false, 0x1101},  // DDP, tagged buffer, base or bounds violation
    {"ReadWithABadStag", RI_WR_RDMA_READ, true, 0x0100},    // RDMAP, remote protection, invalid STag
    {"ReadOutOfBounds", RI_WR_RDMA_READ, false, 0x0101},    // RDMAP, remote protection, base or bounds
};

// The case's name in test names (not its bytes).
[[maybe_unused]] void PrintTo(const AccessCase &c, std::ostream *os) { *os << c.name; }

class RemoteAccess : public Conformance, public ::testing::WithParamInterface<AccessCase> {};

TEST_P(RemoteAccess, TerminateReachesBothSidesAndBothQpsFlush) {
    const AccessCase &c = GetParam();
    constexpr size_t kBytes = 64 * 1024;
    EndOptions ao, bo;
    ao.context = 42;
    bo.bytes = kBytes;
    Pair &p = pair();
    connect(p, ao, bo, [](Pair &x) {
        for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(x.a.recv(100 + i, {x.a.sge(i * 256, 256)}));
        for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(x.b.recv(200 + i, {x.b.sge(i * 256, 256)}));
    });
    // The same operation within the rules works: the fault below is the key or the bounds alone.
    ASSERT_OK(p.a.send(1, c.opcode, {p.a.sge(4096, 4096)}, RI_SEND_SIGNALED, p.b.addr(), p.b.rkey()));
    auto good = p.a.completion(10s);
    ASSERT_TRUE(good.has_value());
    ASSERT_EQ(good->status, static_cast<uint32_t>(RI_WC_SUCCESS));

    const uint64_t addr = c.bad_stag ? p.b.addr() : p.b.addr() + kBytes - 100;
    const uint32_t rkey = c.bad_stag ? p.b.rkey() ^ 0xffu : p.b.rkey();  // another key of the same index
    ASSERT_OK(p.a.send(2, c.opcode, {p.a.sge(4096, 4096)}, RI_SEND_SIGNALED, addr, rkey));
    // Behind it: a valid Read (its request reaches a QP that already terminated) and a Send fenced behind it.
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_READ, {p.a.sge(8192, 4096)}, RI_SEND_SIGNALED, p.b.addr(), p.b.rkey()));
    ASSERT_OK(p.a.send(4, RI_WR_SEND, {p.a.sge(2048, 8)}, RI_SEND_SIGNALED | RI_SEND_READ_FENCE));

    std::map<uint64_t, ri_wc_t> wcs;
    for (const auto &w : p.a.completions(7, 10s)) wcs[w.wr_id] = w;  // three requests, four receives
    for (uint64_t id = 2; id <= 4; ++id) ASSERT_EQ(wcs.count(id), 1u) << "request " << id;
    // The request the Terminate reports fails with the peer's access error, every later one is flushed. A Read
    // waits for its response, so it is always the one. An RDMA Write is complete for its requester once its data
    // left (RFC 5040 §5.1): it may have completed before the Terminate came back, and then nothing posted later is
    // to blame, or the Read behind it may take the error instead of a flush.
    if (c.opcode == RI_WR_RDMA_WRITE && wcs[2].status == RI_WC_SUCCESS) {
        EXPECT_TRUE(wcs[3].status == RI_WC_REM_ACCESS_ERR || wcs[3].status == RI_WC_WR_FLUSH_ERR) << wcs[3].status;
    } else {
        EXPECT_EQ(wcs[2].status, static_cast<uint32_t>(RI_WC_REM_ACCESS_ERR));
        EXPECT_EQ(wcs[3].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    }
    EXPECT_EQ(wcs[4].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    EXPECT_EQ(wcs[2].opcode, static_cast<uint32_t>(c.opcode == RI_WR_RDMA_READ ? RI_WC_RDMA_READ : RI_WC_RDMA_WRITE));
    for (uint64_t id = 100; id < 104; ++id) {
        ASSERT_EQ(wcs.count(id), 1u) << "receive " << id;
        EXPECT_EQ(wcs[id].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "receive " << id;
        EXPECT_EQ(wcs[id].qp_context, 42u);
    }

    // The requester's asynchronous events: the peer's Terminate, and what it says.
    const uint32_t qa = p.a.ep->qp_num(), qb = p.b.ep->qp_num();
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(qa, RI_AE_QP_TERMINATE_RECEIVED, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, c.term) << std::hex << detail;
    const bool remote_error = consumer_.await_event(qa, RI_AE_QP_REMOTE_ACCESS_ERROR, &detail, 2s);
    ASSERT_TRUE(remote_error) << consumer_.events_text();
    EXPECT_EQ(detail, c.term) << std::hex << detail;
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    // Work posted now completes at once, flushed.
    ASSERT_OK(p.a.send(5, RI_WR_SEND, {p.a.sge(2048, 8)}));
    auto late = p.a.completion(5s);
    ASSERT_TRUE(late.has_value());
    EXPECT_EQ(late->wr_id, 5u);
    EXPECT_EQ(late->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    // The connection is over for the requester.
    auto end = p.a.cm_event(10s);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->id, id_of(CmEventId::broken)) << cm_name(end->id);

    // The victim: its RNIC detected the violation and sent the Terminate; its QP flushed; its connection broke.
    ASSERT_TRUE(consumer_.await_event(qb, RI_AE_QP_TERMINATE_SENT, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, c.term) << std::hex << detail;
    ASSERT_TRUE(consumer_.await_event(qb, RI_AE_QP_LOCAL_ACCESS_ERROR, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, c.term) << std::hex << detail;
    auto bw = p.b.completions(8, 10s);
    ASSERT_EQ(bw.size(), 8u);
    for (const auto &w : bw) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "receive " << w.wr_id;
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
    auto vend = p.b.cm_event(10s);
    ASSERT_TRUE(vend.has_value());
    EXPECT_EQ(vend->id, id_of(CmEventId::broken)) << cm_name(vend->id);
    // ECONNABORTED when its QP went first, ECONNRESET when the requester's reset came first.
    EXPECT_TRUE(vend->connection->status == ECONNABORTED || vend->connection->status == ECONNRESET)
        << vend->connection->status;
}

INSTANTIATE_TEST_SUITE_P(Violations, RemoteAccess, ::testing::ValuesIn(kAccessCases),
                         [](const ::testing::TestParamInfo<AccessCase> &i) { return std::string(i.param.name); });

// Moved from tests/softrnic/datapath_test.cpp (RemoteAccessViolationTerminatesBothSides): a Read of a region without
// remote read rights fails with RFC 5040's "access rights violation" (RDMAP, remote protection, 0x02).
TEST_F(Errors, ReadWithoutRemoteReadRightsTerminates) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        ASSERT_OK(x.a.recv(3, {x.a.sge(0, 64)}));
        ASSERT_OK(x.b.recv(1, {x.b.sge(0, 64)}));
    });
    std::vector<uint8_t> noread(4096, 0x5a);
    auto mr = p.b.pz->register_memory(noread.data(), noread.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE);
    ASSERT_OK(mr) << mr.error().to_string();
    ASSERT_OK(p.a.send(10, RI_WR_RDMA_READ, {p.a.sge(4096, 4096)}, RI_SEND_SIGNALED,
                         reinterpret_cast<uint64_t>(noread.data()), (*mr)->keys().rkey)
                    );
    // Fenced behind it, so it is still queued when the Terminate comes: flushed.
    ASSERT_OK(p.a.send(11, RI_WR_SEND, {p.a.sge(0, 8)}, RI_SEND_SIGNALED | RI_SEND_READ_FENCE));
    std::map<uint64_t, ri_wc_t> wcs;
    for (const auto &w : p.a.completions(3)) wcs[w.wr_id] = w;
    ASSERT_EQ(wcs.count(10), 1u);
    EXPECT_EQ(wcs[10].status, static_cast<uint32_t>(RI_WC_REM_ACCESS_ERR));
    ASSERT_EQ(wcs.count(11), 1u);
    EXPECT_EQ(wcs[11].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    ASSERT_EQ(wcs.count(3), 1u);
    EXPECT_EQ(wcs[3].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED, &detail))
        << consumer_.events_text();
    EXPECT_EQ(detail, 0x0102u) << std::hex << detail;
    ASSERT_TRUE(consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, 0x0102u) << std::hex << detail;
    auto bw = p.b.completion();
    ASSERT_TRUE(bw.has_value());
    EXPECT_EQ(bw->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
    p.close();
}

// Moved from tests/softrnic/datapath_test.cpp (WriteWithoutRemoteWriteRightsTerminates): a Write into a region
// without remote write rights places nothing and terminates the stream (RFC 5040 §7.2: access rights violation).
TEST_F(Errors, WriteWithoutRemoteWriteRightsTerminates) {
    Pair &p = pair();
    connect(p);
    std::vector<uint8_t> readonly(4096);
    auto mr = p.b.pz->register_memory(readonly.data(), readonly.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ);
    ASSERT_OK(mr) << mr.error().to_string();
    std::fill(p.a.buf.begin(), p.a.buf.begin() + 4096, 0x77);
    ASSERT_OK(p.a.send(1, RI_WR_RDMA_WRITE, {p.a.sge(0, 4096)}, RI_SEND_SIGNALED,
                         reinterpret_cast<uint64_t>(readonly.data()), (*mr)->keys().rkey)
                    );
    uint32_t detail = 0;
    const bool sent = consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, &detail, 5s);
    ASSERT_TRUE(sent) << consumer_.events_text();
    EXPECT_EQ(detail, 0x0102u) << std::hex << detail;  // RDMAP, remote protection, access rights violation
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED)) << consumer_.events_text();
    EXPECT_TRUE(std::all_of(readonly.begin(), readonly.end(), [](uint8_t x) { return x == 0; }));
    auto sw = p.a.completion();  // the Write completed when it was sent, or the Terminate failed it
    ASSERT_TRUE(sw.has_value());
    EXPECT_TRUE(sw->status == RI_WC_SUCCESS || sw->status == RI_WC_REM_ACCESS_ERR) << sw->status;
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
    p.close();
}

// iWARP has no receiver-not-ready retry: a Send that finds no receive posted is an error for the stream (RFC 5041:
// DDP untagged buffer, no buffer available), both QPs go to ERROR and both connections end.
TEST_F(Errors, SendWithoutAPostedReceiveTerminatesTheConnection) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) { ASSERT_OK(x.a.recv(5, {x.a.sge(0, 64)})); });
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {p.a.sge(4096, 32)}));
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, 0x1202u) << std::hex << detail;  // DDP, untagged buffer, no buffer available (RFC 5041 §7.2)
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED, &detail))
        << consumer_.events_text();
    EXPECT_EQ(detail, 0x1202u) << std::hex << detail;
    std::map<uint64_t, ri_wc_t> wcs;
    for (const auto &w : p.a.completions(2)) wcs[w.wr_id] = w;
    ASSERT_EQ(wcs.count(5), 1u);
    EXPECT_EQ(wcs[5].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    ASSERT_EQ(wcs.count(1), 1u);
    EXPECT_NE(wcs[1].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "the Send was executed, not flushed";
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
    for (End *e : {&p.a, &p.b}) {
        auto end = e->cm_event(10s);
        ASSERT_TRUE(end.has_value());
        EXPECT_EQ(end->id, id_of(CmEventId::broken)) << cm_name(end->id);
    }
}

}  // namespace
}  // namespace conformance
