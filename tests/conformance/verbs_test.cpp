// Conformance: the verbs without a connection. Opening the RNIC by name and by address, Query RNIC's limits, every
// object made, queried and closed in the verbs' order, limits and destroy order refused cleanly, flushes of a QP
// moved to ERROR, and the optional capabilities (SRQ, memory windows, fast registration, resize CQ), each either
// working as advertised or answering RI_EOPNOTSUPP.
#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {
namespace {

using Verbs = Conformance;

// Objects a consumer holds on the RNIC, by krdmad's count.
uint32_t objects_of(const std::vector<krdma_client_info> &clients) {
    uint32_t n = 0;
    for (const auto &c : clients) n += c.total;
    return n;
}

TEST_F(Verbs, RnicIsListedAndOpensByNameAndByAddress) {
    ual::Options o;
    o.device = device();
    auto al = ual::AccessLayer::open(o);
    ASSERT_OK(al) << al.error().to_string();
    auto list = (*al)->rnics();
    ASSERT_OK(list) << list.error().to_string();
    ASSERT_EQ(list->size(), 1u);
    for (const std::string &how : {std::string(kRnicName), settings().address}) {
        SCOPED_TRACE("open by " + how);
        auto ad = (*al)->open_adapter(how);
        ASSERT_OK(ad) << ad.error().to_string();
        auto attr = (*ad)->query();
        ASSERT_OK(attr) << attr.error().to_string();
        EXPECT_STREQ(attr->name, kRnicName);
        EXPECT_EQ((*ad)->description().name, kRnicName);
        EXPECT_OK((*ad)->close());
    }
    auto info = rnic_info();
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(std::string(info->provider), settings().provider);
    EXPECT_EQ(info->opens, 0u) << "both opens were closed";
    // An RNIC nobody attached is not there.
    auto none = (*al)->open_adapter("no-such-rnic");
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().code(), 0);
}

TEST_F(Verbs, QueryRnicReportsSaneLimits) {
    open_consumer(settings().address);
    const ri_rnic_attr_t &a = consumer_.attr;
    EXPECT_STREQ(a.name, kRnicName);
    EXPECT_GE(a.max_qp, 2u) << "two QPs connect to each other in this suite";
    EXPECT_GE(a.max_qp_wr, 16u);
    EXPECT_GE(a.max_sge, 1u);
    EXPECT_GE(a.max_sge_rd, 1u);
    EXPECT_LE(a.max_sge_rd, a.max_sge == 0 ? 1u : std::max(a.max_sge, a.max_sge_rd));
    EXPECT_GE(a.max_cq, 1u);
    EXPECT_GE(a.max_cqe, 16u);
    EXPECT_GE(a.max_pd, 1u);
    EXPECT_GE(a.max_mr, 1u);
    EXPECT_GE(a.max_ird, 1u);
    EXPECT_GE(a.max_ord, 1u);
    EXPECT_GE(a.max_mr_size, uint64_t{1} << 20);
    EXPECT_NE(a.page_size_cap, 0u);
    // MPA (RFC 5044) carries up to 512 bytes of private data; revision 2 (RFC 6581) takes 4 of them for IRD and ORD.
    EXPECT_EQ(a.max_private_data, 508u);
    EXPECT_NE(a.caps & RI_CAP_MPA_CRC, 0u) << "RFC 5044 requires every implementation to offer CRC32c";
    if ((a.caps & RI_CAP_SRQ) != 0) {
        EXPECT_GE(a.max_srq, 1u);
        EXPECT_GE(a.max_srq_wr, 1u);
        EXPECT_GE(a.max_srq_sge, 1u);
    }
    if ((a.caps & (RI_CAP_MW_TYPE1 | RI_CAP_MW_TYPE2)) != 0) {
        EXPECT_GE(a.max_mw, 1u);
    }
    if ((a.caps & RI_CAP_FAST_REG) != 0) {
        EXPECT_GE(a.max_fast_reg_pages, 1u);
    }
    std::printf("%s: caps %#x, max_qp %u, max_qp_wr %u, max_sge %u/%u (rd), max_inline %u, max_cqe %u, max_mr %u, "
                "ird/ord %u/%u\n",
                settings().provider.c_str(), a.caps, a.max_qp, a.max_qp_wr, a.max_sge, a.max_sge_rd, a.max_inline,
                a.max_cqe, a.max_mr, a.max_ird, a.max_ord);
}

// Moved from tests/ual/softrnic_test.cpp (ObjectModelEndToEnd, the provider-neutral part): zones, CQs, endpoints,
// regions, made, queried and closed in the verbs' order; krdmad counts them and forgets them.
TEST_F(Verbs, ObjectsAreMadeQueriedAndClosedInTheVerbsOrder) {
    open_consumer();
    auto &ad = consumer_.adapter;
    auto pz = ad->create_pz();
    ASSERT_OK(pz) << pz.error().to_string();
    auto dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 64);
    auto cq = ad->create_cq(64, dto);
    ASSERT_OK(cq) << cq.error().to_string();
    EXPECT_GE((*cq)->depth(), 64u);
    ual::EndpointAttributes ea;
    ea.sq_depth = ea.rq_depth = 16;
    ea.sq_sge = ea.rq_sge = 1;
    ea.rd_sge = 1;
    ea.ird = ea.ord = 1;
    ea.context = 0xc0ffee;
    auto ep = (*pz)->create_endpoint(ea, *cq, *cq);
    ASSERT_OK(ep) << ep.error().to_string();
    auto ep2 = (*pz)->create_endpoint(ea, *cq, *cq);
    ASSERT_OK(ep2) << ep2.error().to_string();
    EXPECT_NE((*ep)->qp_num(), 0u);
    EXPECT_NE((*ep)->qp_num(), (*ep2)->qp_num());
    auto qa = (*ep)->query();
    ASSERT_OK(qa) << qa.error().to_string();
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_IDLE));
    EXPECT_EQ(qa->qp_num, (*ep)->qp_num());
    EXPECT_GE(qa->init.sq_depth, 16u);
    EXPECT_GE(qa->init.rq_depth, 16u);
    EXPECT_EQ(qa->init.context, 0xc0ffeeu);
    EXPECT_EQ(qa->access & (RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE), 0u) << "no remote access unless asked";
    // Remote access asked for at creation (RI_QP_REMOTE_READ / RI_QP_REMOTE_WRITE) is in effect without a Modify QP.
    for (uint32_t access : {static_cast<uint32_t>(RI_ACCESS_REMOTE_WRITE), static_cast<uint32_t>(RI_ACCESS_REMOTE_READ),
                            static_cast<uint32_t>(RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE)}) {
        ual::EndpointAttributes remote = ea;
        remote.access = access;
        auto rep = (*pz)->create_endpoint(remote, *cq, *cq);
        ASSERT_OK(rep) << rep.error().to_string();
        EXPECT_EQ((*rep)->access(), access);
        auto ra = (*rep)->query();
        ASSERT_OK(ra) << ra.error().to_string();
        EXPECT_EQ(ra->access & (RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE), access);
        EXPECT_NE(ra->init.flags & (RI_QP_REMOTE_READ | RI_QP_REMOTE_WRITE), 0u)
            << "the provider took the access at creation (no Modify QP after it)";
        EXPECT_OK((*rep)->close());
    }
    // RTS needs a connection: refused without one, and the QP stays IDLE.
    ri_qp_attr_t rts{};
    rts.state = RI_QPS_RTS;
    EXPECT_FALSE((*ep)->modify(rts, RI_QP_ATTR_STATE).ok());
    EXPECT_EQ((*ep)->query()->state, static_cast<uint32_t>(RI_QPS_IDLE));

    std::vector<uint8_t> mem(64 * 1024);
    auto mr = (*pz)->register_memory(mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE);
    ASSERT_OK(mr) << mr.error().to_string();
    EXPECT_NE((*mr)->keys().lkey, 0u);
    auto ma = (*mr)->query();
    ASSERT_OK(ma) << ma.error().to_string();
    EXPECT_EQ(ma->addr, reinterpret_cast<uint64_t>(mem.data()));
    EXPECT_EQ(ma->length, mem.size());
    EXPECT_EQ(ma->state, static_cast<uint32_t>(RI_STAG_VALID));
    EXPECT_EQ(ma->keys.lkey, (*mr)->keys().lkey);
    EXPECT_NE(ma->access & RI_ACCESS_REMOTE_WRITE, 0u);
    auto mr2 = (*pz)->register_memory(mem.data(), 4096, RI_ACCESS_LOCAL_WRITE);
    ASSERT_OK(mr2) << mr2.error().to_string();
    EXPECT_NE((*mr2)->keys().lkey, (*mr)->keys().lkey) << "every registration gets an STag of its own";

    // krdmad counts what this consumer holds: the open, the PZ, the CQ, two QPs, two regions.
    auto held = clients();
    ASSERT_EQ(held.size(), 1u);
    EXPECT_EQ(held[0].pid, static_cast<uint32_t>(::getpid()));
    EXPECT_GE(held[0].total, 7u);

    // Children first, then their parents: every close succeeds.
    EXPECT_OK((*ep)->close());
    EXPECT_OK((*ep2)->close());
    EXPECT_OK((*mr)->close());
    EXPECT_OK((*mr2)->close());
    EXPECT_OK((*cq)->close());
    EXPECT_OK((*pz)->close());
    EXPECT_EQ(objects_of(clients()), 1u) << "only the RNIC open is left";
    EXPECT_OK(ad->close());
    EXPECT_EQ(objects_of(clients()), 0u);
}

// Moved from tests/ual/softrnic_test.cpp (ObjectModelEndToEnd): parents refuse to go while children exist.
TEST_F(Verbs, ParentsInUseRefuseToClose) {
    open_consumer();
    Pair &p = pair();
    ASSERT_EQ(p.a.make(consumer_, EndOptions{}), "");
    EXPECT_STATUS(p.a.pz->close(), RI_EBUSY) << "a PZ with an endpoint and a region";
    EXPECT_STATUS(p.a.cq->close(), RI_EBUSY) << "a CQ an endpoint uses";
    EXPECT_STATUS(consumer_.adapter->close(), RI_EBUSY) << "an RNIC open with a PZ and a CQ";
    // Nothing was lost by the refusals: the objects still work and close in order.
    EXPECT_EQ(p.a.state(), RI_QPS_IDLE);
    EXPECT_OK(p.a.ep->close());
    EXPECT_STATUS(p.a.pz->close(), RI_EBUSY) << "the region is still there";
    EXPECT_OK(p.a.mr->close());
    EXPECT_OK(p.a.pz->close());
    EXPECT_OK(p.a.cq->close());
    EXPECT_OK(consumer_.adapter->close());
}

// Moved from tests/softrnic/control_test.cpp (CompletionQueues, QpCreationChecksItsAttributes): requests beyond
// Query RNIC's limits are refused with an error, leave nothing behind, and the RNIC serves on.
TEST_F(Verbs, LimitsAreRefusedCleanly) {
    open_consumer();
    const ri_rnic_attr_t lim = consumer_.attr;
    auto &ad = consumer_.adapter;
    auto pz = *ad->create_pz();
    auto dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 16);
    const auto range_or_inval = [](int code) { return code == RI_ERANGE || code == RI_EINVAL; };
    if (lim.max_cqe < UINT32_MAX) {
        auto huge = ad->create_cq(lim.max_cqe + 1, dto);
        ASSERT_FALSE(huge) << "a CQ of max_cqe + 1 entries";
        EXPECT_STATUS(huge, RI_ERANGE) << huge.error().to_string();
    }
    auto zero = ad->create_cq(0, dto);
    ASSERT_FALSE(zero) << "a CQ of no entries";
    EXPECT_STATUS(zero, RI_EINVAL) << zero.error().to_string();
    auto cq = ad->create_cq(16, dto);
    ASSERT_OK(cq) << "the dispatcher is free again after the refusals: " << cq.error().to_string();
    const uint32_t before = objects_of(clients());

    struct Case {
        const char *what;
        std::function<void(ual::EndpointAttributes &)> change;
    };
    const std::vector<Case> cases = {
        {"sq_depth above max_qp_wr", [&](auto &a) { a.sq_depth = lim.max_qp_wr + 1; }},
        {"rq_depth above max_qp_wr", [&](auto &a) { a.rq_depth = lim.max_qp_wr + 1; }},
        {"sq_sge above max_sge", [&](auto &a) { a.sq_sge = lim.max_sge + 1; }},
        {"rd_sge above max_sge_rd", [&](auto &a) { a.rd_sge = lim.max_sge_rd + 1; }},
        {"max_inline above the RNIC's", [&](auto &a) { a.max_inline = lim.max_inline + 1; }},
        {"ord above max_ord", [&](auto &a) { a.ord = lim.max_ord + 1; }},
        {"ird above max_ird", [&](auto &a) { a.ird = lim.max_ird + 1; }},
        {"sq_depth 0", [](auto &a) { a.sq_depth = 0; }},
    };
    for (const Case &c : cases) {
        ual::EndpointAttributes a;
        a.sq_depth = a.rq_depth = 4;
        a.sq_sge = a.rq_sge = a.rd_sge = 1;
        a.ird = a.ord = 1;
        c.change(a);
        auto ep = pz->create_endpoint(a, *cq, *cq);
        EXPECT_FALSE(ep) << c.what << " was accepted";
        if (!ep) {
            EXPECT_PRED1(range_or_inval, ep.error().code()) << c.what << ": " << ep.error().to_string();
        }
    }
    std::vector<uint8_t> mem(4096);
    auto zero_mr = pz->register_memory(mem.data(), 0, RI_ACCESS_LOCAL_WRITE);
    EXPECT_FALSE(zero_mr) << "a region of no bytes";
    // The verbs' rule: remote write needs local write.
    auto no_local = pz->register_memory(mem.data(), mem.size(), RI_ACCESS_REMOTE_WRITE);
    EXPECT_FALSE(no_local) << "remote write without local write";
    if (!no_local) {
        EXPECT_STATUS(no_local, RI_EINVAL) << no_local.error().to_string();
    }

    EXPECT_EQ(objects_of(clients()), before) << "a refusal left an object behind";
    // The RNIC serves on: the same requests within the limits work.
    ual::EndpointAttributes ok;
    ok.sq_depth = ok.rq_depth = std::min(lim.max_qp_wr, 64u);
    ok.sq_sge = ok.rq_sge = lim.max_sge;
    ok.rd_sge = lim.max_sge_rd;
    ok.ird = ok.ord = 1;
    ok.max_inline = lim.max_inline;
    auto ep = pz->create_endpoint(ok, *cq, *cq);
    ASSERT_OK(ep) << "an endpoint at the RNIC's limits: " << ep.error().to_string();
    EXPECT_OK((*ep)->close());
    EXPECT_OK((*cq)->close());
    EXPECT_OK(pz->close());
}

// Moved from tests/softrnic/control_test.cpp (QpNumbersAndStagsAreUniqueAcrossConnections): QP numbers and STags
// are unique on the RNIC, across consumers.
TEST_F(Verbs, QpNumbersAndStagsAreUniqueAcrossConsumers) {
    Consumer other;
    ASSERT_EQ(other.open(device(), kRnicName), "");
    open_consumer();
    std::set<uint32_t> qp_nums;
    std::set<ri_stag_t> stags;
    std::vector<std::unique_ptr<End>> ends;
    for (Consumer *c : {&consumer_, &other}) {
        for (int i = 0; i < 3; ++i) {
            ends.push_back(std::make_unique<End>());
            EndOptions o;
            o.bytes = 4096;
            o.depth = 4;
            ASSERT_EQ(ends.back()->make(*c, o), "");
            EXPECT_TRUE(qp_nums.insert(ends.back()->ep->qp_num()).second) << ends.back()->ep->qp_num();
            EXPECT_TRUE(stags.insert(ends.back()->mr->keys().lkey).second) << ends.back()->mr->keys().lkey;
        }
    }
    EXPECT_EQ(qp_nums.size(), 6u);
    EXPECT_EQ(stags.size(), 6u);
    EXPECT_EQ(clients().size(), 2u);
    for (auto &e : ends) e->close();
    other.close();
}

// Moved from tests/softrnic/control_test.cpp (ModifyToErrorFlushesEveryPostedRequest) and tests/ual/
// softrnic_test.cpp (the flush reaching a waiting consumer): work posted before a connection waits; moving the QP to
// ERROR flushes all of it, in order, signaled or not, to a consumer blocked on its dispatcher; work posted in ERROR
// completes at once, flushed.
TEST_F(Verbs, ModifyToErrorFlushesEveryPostedRequest) {
    open_consumer();
    End e;
    EndOptions o;
    o.context = 0xfeed;
    ASSERT_EQ(e.make(consumer_, o), "");
    ASSERT_OK(e.recv(10, {e.sge(0, 64)}));
    ASSERT_OK(e.recv(11, {e.sge(64, 64)}));
    ASSERT_OK(e.send(1, RI_WR_SEND, {e.sge(128, 8)}));
    ASSERT_OK(e.send(2, RI_WR_RDMA_WRITE, {e.sge(128, 8)}, 0, e.addr(1024), e.rkey()));  // unsignaled
    ASSERT_OK(e.send(3, RI_WR_RDMA_READ, {e.sge(256, 8)}, RI_SEND_SIGNALED, e.addr(1024), e.rkey()));
    EXPECT_TRUE(e.idle()) << "queued, not executed: there is no connection";
    auto waiter = std::thread([&] {
        std::this_thread::sleep_for(50ms);  // the consumer is already waiting
        ri_qp_attr_t to_error{};
        to_error.state = RI_QPS_ERROR;
        EXPECT_OK(e.ep->modify(to_error, RI_QP_ATTR_STATE));
    });
    auto first = e.dto->wait(10s);  // woken by the provider's completion event
    waiter.join();
    ASSERT_OK(first) << "the flush never woke the waiting consumer: " << first.error().to_string();
    std::vector<ri_wc_t> wcs{first->wc};
    for (auto more = e.completions(4, 5s); auto &w : more) wcs.push_back(w);
    ASSERT_EQ(wcs.size(), 5u) << "three sends (one unsignaled: flushed all the same) and two receives";
    std::vector<uint64_t> sends, recvs;
    for (const ri_wc_t &w : wcs) {
        EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "wr " << w.wr_id;
        EXPECT_EQ(w.qp_num, e.ep->qp_num());
        EXPECT_EQ(w.qp_context, 0xfeedu);
        (w.opcode == RI_WC_RECV ? recvs : sends).push_back(w.wr_id);
        if (w.wr_id == 1) {
            EXPECT_EQ(w.opcode, static_cast<uint32_t>(RI_WC_SEND));
        }
        if (w.wr_id == 2) {
            EXPECT_EQ(w.opcode, static_cast<uint32_t>(RI_WC_RDMA_WRITE));
        }
        if (w.wr_id == 3) {
            EXPECT_EQ(w.opcode, static_cast<uint32_t>(RI_WC_RDMA_READ));
        }
    }
    EXPECT_EQ(sends, (std::vector<uint64_t>{1, 2, 3})) << "flushed in posting order";
    EXPECT_EQ(recvs, (std::vector<uint64_t>{10, 11})) << "flushed in posting order";
    EXPECT_EQ(e.state(), RI_QPS_ERROR);
    // In ERROR, new work completes at once, flushed.
    ASSERT_OK(e.send(42, RI_WR_SEND, {e.sge(128, 8)}));
    ASSERT_OK(e.recv(43, {e.sge(0, 64)}));
    auto late = e.completions(2, 5s);
    ASSERT_EQ(late.size(), 2u);
    std::set<uint64_t> ids;
    for (auto &w : late) {
        EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
        ids.insert(w.wr_id);
    }
    EXPECT_EQ(ids, (std::set<uint64_t>{42, 43}));
    e.close();
}

// ---------------------------------------------------------------------------------------------------------------
// Optional capabilities: used when advertised, "not supported" otherwise.

// Whether @p pz makes an SRQ (what CONFORMANCE_REQUIRE looks at).
int try_srq(ual::ProtectionZone &pz) {
    auto s = pz.create_srq(16, 1);
    return s ? RI_OK : s.error().code();
}

TEST_F(Verbs, SharedReceiveQueue) {
    open_consumer();
    auto pz = *consumer_.adapter->create_pz();
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_SRQ), try_srq(*pz), "shared receive queues (RI_CAP_SRQ)");
    auto srq = pz->create_srq(16, 1, 0, 7);
    ASSERT_OK(srq) << srq.error().to_string();
    auto q = (*srq)->query();
    ASSERT_OK(q) << q.error().to_string();
    EXPECT_GE(q->max_wr, 16u);
    EXPECT_EQ(q->context, 7u);
    auto big = pz->create_srq(consumer_.attr.max_srq_wr + 1, 1);
    EXPECT_FALSE(big) << "an SRQ above max_srq_wr";
    ASSERT_TRUE(pz->close().code() == RI_EBUSY);
    // The SRQ feeds a connected QP: its receives take the Sends.
    Pair &p = pair();
    EndOptions bo;
    bo.srq = true;
    connect(p, {}, bo, [](Pair &x) {
        for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(x.b.recv(100 + i, {x.b.sge(i * 64, 64)}));
    });
    EXPECT_STATUS(p.b.srq->close(), RI_EBUSY) << "an SRQ an endpoint uses";
    for (uint64_t i = 0; i < 3; ++i) {
        p.a.buf[i] = static_cast<uint8_t>('a' + i);
        ASSERT_OK(p.a.send(i, RI_WR_SEND, {p.a.sge(i, 1)}));
    }
    auto rw = p.b.completions(3);
    ASSERT_EQ(rw.size(), 3u);
    for (uint64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(rw[i].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(rw[i].wr_id, 100 + i) << "an SRQ's receives are taken in posting order";
        EXPECT_EQ(p.b.buf[i * 64], 'a' + i);
    }
    EXPECT_EQ(p.a.completions(3).size(), 3u);
    EXPECT_OK((*srq)->close());
}

TEST_F(Verbs, OneSharedReceiveQueueFeedsTwoEndpointsAndWarnsAtItsLimit) {
    open_consumer();
    auto pz = *consumer_.adapter->create_pz();
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_SRQ), try_srq(*pz), "shared receive queues (RI_CAP_SRQ)");
    auto made = pz->create_srq(16, 1, 0, 9);
    ASSERT_OK(made) << made.error().to_string();
    auto srq = *made;
    EndOptions bo;
    bo.pz = pz;
    bo.shared_srq = srq;
    Pair &p1 = pair();
    Pair &p2 = pair();
    connect(p1, {}, bo);
    connect(p2, {}, bo);
    // Eight receives over p1.b's buffer (registered in the SRQ's PD), then the limit armed at three.
    for (uint64_t i = 0; i < 8; ++i) {
        const ri_sge_t g = p1.b.sge(i * 64, 64);
        const ri_recv_wr_t wr{100 + i, &g, 1, 0};
        ASSERT_OK(srq->post_recv({&wr, 1}));
    }
    ri_srq_attr_t arm{};
    arm.limit = 3;
    ASSERT_OK(srq->modify(arm, RI_SRQ_ATTR_LIMIT));
    // Each endpoint takes the SRQ's receives in posting order as its messages arrive; a receive completes on the
    // taking endpoint's CQ with its QP number.
    auto exchange = [&](Pair &p, uint64_t first, char tag) {
        for (uint64_t i = 0; i < 3; ++i) {
            p.a.buf[i] = static_cast<uint8_t>(tag + i);
            ASSERT_OK(p.a.send(i, RI_WR_SEND, {p.a.sge(i, 1)}));
        }
        auto rw = p.b.completions(3);
        ASSERT_EQ(rw.size(), 3u);
        for (uint64_t i = 0; i < 3; ++i) {
            EXPECT_EQ(rw[i].status, static_cast<uint32_t>(RI_WC_SUCCESS));
            EXPECT_EQ(rw[i].wr_id, first + i) << "the SRQ's receives go in posting order, to whichever QP needs one";
            EXPECT_EQ(rw[i].qp_num, p.b.ep->qp_num());
            EXPECT_EQ(rw[i].byte_len, 1u);
            EXPECT_EQ(p1.b.buf[(first - 100 + i) * 64], tag + i);
        }
        EXPECT_EQ(p.a.completions(3).size(), 3u);
    };
    exchange(p1, 100, 'a');
    exchange(p2, 103, 'k');
    // Two receives are left after the sixth, fewer than three: the limit event, once, for the SRQ.
    auto limit_seen = [&] {
        return std::count_if(consumer_.events.begin(), consumer_.events.end(), [](const ual::Event &e) {
            return e.id == RI_AE_SRQ_LIMIT_REACHED && e.resource_type == RI_RES_SRQ;
        });
    };
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (limit_seen() == 0 && std::chrono::steady_clock::now() < deadline) {
        if (auto e = consumer_.async->wait(100ms)) consumer_.events.push_back(*e);
    }
    EXPECT_EQ(limit_seen(), 1) << "events:" << consumer_.events_text();
    // A QP of an SRQ has no receive queue of its own.
    ri_sge_t g = p2.b.sge(0, 8);
    ri_recv_wr_t own{1, &g, 1, 0};
    EXPECT_STATUS(p2.b.ep->post_recv({&own, 1}), RI_EINVAL) << "Post Receive on a QP that takes from an SRQ";
    // The two receives left serve the next messages of either endpoint.
    p2.a.buf[0] = 'z';
    ASSERT_OK(p2.a.send(7, RI_WR_SEND, {p2.a.sge(0, 1)}));
    auto last = p2.b.completion();
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(last->wr_id, 106u);
    EXPECT_EQ(p1.b.buf[6 * 64], 'z');
    EXPECT_STATUS(srq->close(), RI_EBUSY) << "an SRQ two endpoints use";
    // An endpoint of an SRQ that leaves RTS takes no more of its receives, and says so (InfiniBand's "last WQE
    // reached"): its owner may destroy it then without losing one. uDAPL's dtestsrq waits for it.
    ASSERT_OK(p2.b.ep->disconnect(true));
    EXPECT_TRUE(consumer_.await_event(p2.b.ep->qp_num(), RI_AE_QP_LAST_WQE_REACHED)) << consumer_.events_text();
}

TEST_F(Verbs, MemoryWindows) {
    open_consumer();
    auto pz = *consumer_.adapter->create_pz();
    // Each type the provider advertises is allocated; one it does not advertise is refused with RI_EOPNOTSUPP.
    std::vector<uint32_t> offered;
    for (uint32_t type : {RI_MW_TYPE_1, RI_MW_TYPE_2}) {
        SCOPED_TRACE("type " + std::to_string(type));
        const uint32_t cap = type == RI_MW_TYPE_1 ? RI_CAP_MW_TYPE1 : RI_CAP_MW_TYPE2;
        auto w = pz->allocate_window(type);
        if (consumer_.has(cap)) {
            ASSERT_OK(w) << w.error().to_string();
            EXPECT_OK((*w)->close());
            offered.push_back(type);
        } else {
            ASSERT_FALSE(w) << "type " << type << " windows are not advertised, yet one was allocated";
            EXPECT_STATUS(w, RI_EOPNOTSUPP) << w.error().to_string();
        }
    }
    if (offered.empty()) GTEST_SKIP() << settings().provider << " offers no memory windows (answers RI_EOPNOTSUPP)";
    std::vector<uint8_t> mem(4096);
    auto mr = pz->register_memory(mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_MW_BIND);
    ASSERT_OK(mr) << mr.error().to_string();
    // Two windows of every type offered: one STag namespace with the region, and the PD stays busy while they live.
    std::vector<std::shared_ptr<ual::MemoryWindow>> windows;
    std::set<uint32_t> keys{(*mr)->keys().rkey};
    for (uint32_t type : offered) {
        for (int i = 0; i < 2; ++i) {
            auto w = pz->allocate_window(type);
            ASSERT_OK(w) << w.error().to_string();
            EXPECT_TRUE(keys.insert((*w)->rkey()).second) << "windows and regions share one STag namespace";
            windows.push_back(*w);
        }
    }
    EXPECT_STATUS(pz->close(), RI_EBUSY);
    for (auto &w : windows) EXPECT_OK(w->close());
    EXPECT_OK((*mr)->close());
    EXPECT_OK(pz->close());
}

TEST_F(Verbs, FastRegistrationStags) {
    open_consumer();
    auto pz = *consumer_.adapter->create_pz();
    const ri_verbs_ops_t &v = consumer_.adapter->verbs();
    ri_mr_t st = nullptr;
    ri_mr_keys_t k{};
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_FAST_REG), v.alloc_stag(pz->handle(), 16, &st, &k),
                        "fast registration (RI_CAP_FAST_REG)");
    ASSERT_RI_OK(v.alloc_stag(pz->handle(), 16, &st, &k));
    ri_mr_attr_t a{};
    ASSERT_RI_OK(v.query_mr(st, &a));
    EXPECT_EQ(a.state, static_cast<uint32_t>(RI_STAG_INVALID)) << "an allocated STag is invalid until registered";
    EXPECT_GE(a.max_pages, 16u);
    ri_mr_t bad = nullptr;
    EXPECT_STATUS(v.alloc_stag(pz->handle(), consumer_.attr.max_fast_reg_pages + 1, &bad, &k), RI_ERANGE);
    EXPECT_EQ(bad, nullptr);
    EXPECT_RI_OK(v.deregister_mr(st));
    EXPECT_OK(pz->close());
}

TEST_F(Verbs, ResizeCompletionQueue) {
    open_consumer();
    auto dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 16);
    auto cq = consumer_.adapter->create_cq(16, dto);
    ASSERT_OK(cq) << cq.error().to_string();
    auto attempt = [&] {
        auto r = (*cq)->resize(64);
        return r ? RI_OK : r.error().code();
    };
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_RESIZE_CQ), attempt(), "resizing a CQ (RI_CAP_RESIZE_CQ)");
    auto r = (*cq)->resize(64);
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_GE(*r, 64u);
    EXPECT_OK((*cq)->close());
}

}  // namespace
}  // namespace conformance
