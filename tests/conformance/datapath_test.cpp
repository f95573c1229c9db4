// Conformance: the data path between two connected QPs of the RNIC. Send/Recv, RDMA Write and RDMA Read from 0 or 1
// byte to 1 MiB with every byte checked, scatter/gather lists, completion order, signaled and unsignaled requests,
// inline data, solicited events, and what only some RNICs offer (Send with Invalidate, atomics) when advertised.
#include <algorithm>
#include <numeric>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {
namespace {

using Datapath = Conformance;

void fill(std::vector<uint8_t> &buf, size_t off, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i) buf[off + i] = pattern(i, seed);
}

// The first byte of [off, off + n) of @p buf that differs from the pattern of @p seed, or n.
size_t first_wrong(const std::vector<uint8_t> &buf, size_t off, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; ++i) {
        if (buf[off + i] != pattern(i, seed)) return i;
    }
    return n;
}

TEST_F(Datapath, SendsOfEverySizeArriveWholeAndInOrder) {
    const std::vector<size_t> sizes = {0, 1, 4095, 65536, 1u << 20};
    const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
    EndOptions ao, bo;
    ao.bytes = total;
    bo.bytes = total + sizes.size() * 16;
    Pair &p = pair();
    connect(p, ao, bo, [&](Pair &x) {
        size_t off = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
            ASSERT_OK(x.b.recv(100 + i, {x.b.sge(off, static_cast<uint32_t>(sizes[i] + 16))}));
            off += sizes[i] + 16;
        }
    });
    size_t off = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        fill(p.a.buf, off, sizes[i], static_cast<uint32_t>(i));
        std::vector<ri_sge_t> sgl;
        if (sizes[i] > 0) sgl.push_back(p.a.sge(off, static_cast<uint32_t>(sizes[i])));
        ASSERT_OK(p.a.send(i, RI_WR_SEND, sgl)) << "size " << sizes[i];
        off += sizes[i];
    }
    auto rw = p.b.completions(sizes.size(), 30s);
    ASSERT_EQ(rw.size(), sizes.size());
    auto sw = p.a.completions(sizes.size(), 30s);
    ASSERT_EQ(sw.size(), sizes.size());
    size_t roff = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        SCOPED_TRACE("size " + std::to_string(sizes[i]));
        EXPECT_EQ(rw[i].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(rw[i].opcode, static_cast<uint32_t>(RI_WC_RECV));
        EXPECT_EQ(rw[i].wr_id, 100 + i) << "receives complete in order";
        EXPECT_EQ(rw[i].byte_len, sizes[i]);
        EXPECT_EQ(rw[i].qp_num, p.b.ep->qp_num());
        EXPECT_EQ(rw[i].qp_context, 0xbu);
        EXPECT_EQ(first_wrong(p.b.buf, roff, sizes[i], static_cast<uint32_t>(i)), sizes[i]) << "first wrong byte";
        EXPECT_EQ(p.b.buf[roff + sizes[i]], 0) << "a byte past the message was written";
        roff += sizes[i] + 16;
        EXPECT_EQ(sw[i].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(sw[i].opcode, static_cast<uint32_t>(RI_WC_SEND));
        EXPECT_EQ(sw[i].wr_id, i) << "sends complete in order";
        EXPECT_EQ(sw[i].qp_num, p.a.ep->qp_num());
        EXPECT_EQ(sw[i].qp_context, 0xau);
    }
}

TEST_F(Datapath, WritesAndReadsOfEverySizeMoveEveryByte) {
    const std::vector<size_t> sizes = {1, 4097, 1u << 20};
    constexpr size_t kMax = 1u << 20;
    EndOptions ao, bo;
    ao.bytes = 2 * kMax;  // [0, kMax) written from, [kMax, 2 kMax) read into
    bo.bytes = kMax;
    Pair &p = pair();
    connect(p, ao, bo);
    uint32_t seed = 10;
    for (size_t n : sizes) {
        SCOPED_TRACE("size " + std::to_string(n));
        fill(p.a.buf, 0, n, seed);
        std::fill(p.a.buf.begin() + kMax, p.a.buf.end(), 0);
        ASSERT_OK(p.a.send(1, RI_WR_RDMA_WRITE, {p.a.sge(0, static_cast<uint32_t>(n))}, RI_SEND_SIGNALED, p.b.addr(),
                             p.b.rkey())
                        );
        // A Read behind the Write on the same stream returns what the Write placed.
        ASSERT_OK(p.a.send(2, RI_WR_RDMA_READ, {p.a.sge(kMax, static_cast<uint32_t>(n))}, RI_SEND_SIGNALED,
                             p.b.addr(), p.b.rkey())
                        );
        auto wc = p.a.completions(2, 30s);
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].opcode, static_cast<uint32_t>(RI_WC_RDMA_WRITE));
        EXPECT_EQ(wc[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(wc[1].wr_id, 2u);
        EXPECT_EQ(wc[1].opcode, static_cast<uint32_t>(RI_WC_RDMA_READ));
        EXPECT_EQ(wc[1].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(wc[1].byte_len, n);
        EXPECT_EQ(first_wrong(p.b.buf, 0, n, seed), n) << "written: first wrong byte";
        EXPECT_EQ(first_wrong(p.a.buf, kMax, n, seed), n) << "read back: first wrong byte";
        if (n < kMax) {
            EXPECT_EQ(p.a.buf[kMax + n], 0) << "the Read wrote past its sink";
        }
        ++seed;
    }
    EXPECT_TRUE(p.b.idle()) << "tagged operations complete nothing at the target";
}

// Moved from tests/softrnic/datapath_test.cpp (ScatterGatherListsAndReadsIntoSeveralBuffers), within the RNIC's
// max_sge and max_sge_rd.
TEST_F(Datapath, ScatterGatherLists) {
    EndOptions ao, bo;
    ao.bytes = 40000;
    bo.bytes = 40000;
    Pair &p = pair();
    connect(p, ao, bo);
    const uint32_t max_sge = std::min(4u, consumer_.attr.max_sge);
    const uint32_t max_rd = std::min(3u, consumer_.attr.max_sge_rd);
    fill(p.a.buf, 0, 30000, 3);
    // A Send gathered from up to three pieces lands scattered over up to four.
    std::vector<ri_sge_t> gather = {p.a.sge(0, 10), p.a.sge(10, 20000), p.a.sge(20010, 9990)};
    if (max_sge < 3) gather = {p.a.sge(0, 10), p.a.sge(10, 29990)};
    if (max_sge < 2) gather = {p.a.sge(0, 30000)};
    std::vector<ri_sge_t> scatter = {p.b.sge(0, 100), p.b.sge(100, 7000), p.b.sge(7100, 3), p.b.sge(7103, 30000)};
    if (max_sge < 4) scatter = {p.b.sge(0, 100), p.b.sge(100, 35000)};
    if (max_sge < 2) scatter = {p.b.sge(0, 35000)};
    ASSERT_OK(p.b.recv(9, scatter));
    ASSERT_OK(p.a.send(1, RI_WR_SEND, gather));
    auto rw = p.b.completion();
    ASSERT_TRUE(rw.has_value());
    EXPECT_EQ(rw->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(rw->byte_len, 30000u);
    EXPECT_EQ(first_wrong(p.b.buf, 0, 30000, 3), 30000u);
    auto sent = p.a.completion();
    ASSERT_TRUE(sent.has_value());
    EXPECT_EQ(sent->wr_id, 1u);
    EXPECT_EQ(sent->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    // A Write gathered from two pieces; a Read scattered into up to three.
    std::fill(p.b.buf.begin(), p.b.buf.end(), 0);
    std::vector<ri_sge_t> wgather = {p.a.sge(0, 5000), p.a.sge(5000, 25000)};
    if (max_sge < 2) wgather = {p.a.sge(0, 30000)};
    ASSERT_OK(p.a.send(2, RI_WR_RDMA_WRITE, wgather, RI_SEND_SIGNALED, p.b.addr(1000), p.b.rkey()));
    auto wwc = p.a.completion();
    ASSERT_TRUE(wwc.has_value());
    EXPECT_EQ(wwc->wr_id, 2u);
    EXPECT_EQ(wwc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    // A completed request is done with its buffers (RDMAC verbs): the source may be reused at once.
    std::fill(p.a.buf.begin(), p.a.buf.end(), 0);
    std::vector<ri_sge_t> rscatter = {p.a.sge(20000, 10000), p.a.sge(0, 1), p.a.sge(1, 19999)};
    if (max_rd < 3) rscatter = {p.a.sge(20000, 10000), p.a.sge(0, 20000)};
    if (max_rd < 2) rscatter = {p.a.sge(0, 30000)};
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_READ, rscatter, RI_SEND_SIGNALED, p.b.addr(1000), p.b.rkey()));
    auto rw3 = p.a.completion();
    ASSERT_TRUE(rw3.has_value());
    EXPECT_EQ(rw3->wr_id, 3u);
    EXPECT_EQ(rw3->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(rw3->byte_len, 30000u);
    EXPECT_EQ(first_wrong(p.b.buf, 1000, 30000, 3), 30000u) << "the gathered Write";
    if (max_rd >= 2) {
        // The Read brought [0, 10000) into [20000, 30000) and [10000, 30000) into [0, 20000).
        std::vector<uint8_t> expect(30000);
        fill(expect, 0, 30000, 3);
        EXPECT_TRUE(std::equal(expect.begin(), expect.begin() + 10000, p.a.buf.begin() + 20000));
        EXPECT_TRUE(std::equal(expect.begin() + 10000, expect.end(), p.a.buf.begin()));
    } else {
        EXPECT_EQ(first_wrong(p.a.buf, 0, 30000, 3), 30000u);
    }
    std::printf("scatter/gather with up to %u elements (%u for RDMA Read sinks)\n", max_sge, max_rd);
}

// Completions of one send queue come in posting order whatever the operations; receives in posting order too.
TEST_F(Datapath, CompletionsComeInPostingOrder) {
    EndOptions o;
    o.bytes = 1 << 18;
    Pair &p = pair();
    connect(p, o, o, [](Pair &x) {
        for (uint64_t i = 0; i < 16; ++i) ASSERT_OK(x.b.recv(1000 + i, {x.b.sge(i * 256, 256)}));
    });
    constexpr uint64_t kRequests = 48;
    uint64_t sends = 0;
    for (uint64_t i = 0; i < kRequests; ++i) {
        const uint32_t op = i % 3 == 0 ? RI_WR_SEND : i % 3 == 1 ? RI_WR_RDMA_WRITE : RI_WR_RDMA_READ;
        // A large Read among small Writes: a later small request may finish first inside the RNIC, but not on its CQ.
        const uint32_t len = op == RI_WR_RDMA_READ ? (i % 2 ? 65536 : 16) : 64;
        const size_t src = op == RI_WR_RDMA_READ ? 65536 : 0;
        if (op == RI_WR_SEND) ++sends;
        ASSERT_OK(p.a.send(i, op, {p.a.sge(src, len)}, RI_SEND_SIGNALED, p.b.addr(65536), p.b.rkey())) << i;
        if (i % 16 == 15) {
            // Keep within the send queue's depth.
            auto part = p.a.completions(16);
            ASSERT_EQ(part.size(), 16u);
            for (uint64_t k = 0; k < 16; ++k) {
                EXPECT_EQ(part[k].wr_id, i - 15 + k) << "completion " << k << " of round " << i / 16;
                EXPECT_EQ(part[k].status, static_cast<uint32_t>(RI_WC_SUCCESS));
            }
        }
    }
    auto rw = p.b.completions(sends);
    ASSERT_EQ(rw.size(), sends);
    for (uint64_t k = 0; k < sends; ++k) EXPECT_EQ(rw[k].wr_id, 1000 + k);
}

TEST_F(Datapath, AResizedCompletionQueueKeepsWhatWaitsInIt) {
    EndOptions o;
    o.cq_depth = 16;
    Pair &p = pair();
    connect(p, o, o);
    auto attempt = [&] {
        auto r = p.a.cq->resize(32);
        return r ? RI_OK : r.error().code();
    };
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_RESIZE_CQ), attempt(), "resizing a CQ (RI_CAP_RESIZE_CQ)");
    // Completions made before a resize and polled after it all come, in order, whichever ring they were in.
    for (uint64_t i = 0; i < 12; ++i) {
        ASSERT_OK(p.a.send(i, RI_WR_RDMA_WRITE, {p.a.sge(i * 64, 64)}, RI_SEND_SIGNALED, p.b.addr(i * 64), p.b.rkey()));
    }
    auto first = p.a.completions(2);
    ASSERT_EQ(first.size(), 2u);
    auto grown = p.a.cq->resize(64);
    ASSERT_OK(grown) << grown.error().to_string();
    EXPECT_GE(*grown, 64u);
    auto rest = p.a.completions(10);
    ASSERT_EQ(rest.size(), 10u) << "completions made before the resize were lost";
    for (uint64_t k = 0; k < 10; ++k) {
        EXPECT_EQ(rest[k].wr_id, 2 + k) << "completion " << k << " after the resize, out of order";
        EXPECT_EQ(rest[k].status, static_cast<uint32_t>(RI_WC_SUCCESS));
    }
    // The data path goes on as before on the new ring; an empty ring may shrink.
    for (uint64_t i = 0; i < 40; ++i) {
        ASSERT_OK(p.a.send(100 + i, RI_WR_RDMA_WRITE, {p.a.sge(0, 8)}, RI_SEND_SIGNALED, p.b.addr(0), p.b.rkey()));
    }
    auto more = p.a.completions(40);
    ASSERT_EQ(more.size(), 40u);
    for (uint64_t k = 0; k < 40; ++k) EXPECT_EQ(more[k].wr_id, 100 + k);
    auto shrunk = p.a.cq->resize(4);
    ASSERT_OK(shrunk) << shrunk.error().to_string();
    EXPECT_GE(*shrunk, 4u);
    // What no CQ can be.
    auto none = p.a.cq->resize(0);
    ASSERT_FALSE(none) << "a CQ of no entries";
    EXPECT_EQ(none.error().code(), RI_EINVAL) << none.error().to_string();
    if (consumer_.attr.max_cqe < UINT32_MAX) {
        auto huge = p.a.cq->resize(consumer_.attr.max_cqe + 1);
        ASSERT_FALSE(huge) << "a CQ beyond the RNIC's max_cqe";
        EXPECT_EQ(huge.error().code(), RI_ERANGE) << huge.error().to_string();
    }
}

// Allocating a type 2 window in @p pz (and closing it): RI_OK or why not.
int try_window(ual::ProtectionZone &pz) {
    auto w = pz.allocate_window(RI_MW_TYPE_2);
    return w ? RI_OK : w.error().code();
}

// Binds type 2 window @p w over [@p addr, @p addr + @p length) of region @p mr with the remote rights @p access, on
// @p end's send queue (wr_id 9): the bind's completion, or nothing when the post failed or none came.
std::optional<ri_wc_t> bind_window(End &end, const ual::MemoryWindow &w, const ual::MemoryRegion &mr, uint64_t addr,
                                   uint64_t length, uint32_t access) {
    ri_send_wr_t bind{};
    bind.wr_id = 9;
    bind.opcode = RI_WR_BIND_MW;
    bind.flags = RI_SEND_SIGNALED;
    bind.u.bind.mw = w.handle();
    bind.u.bind.mr = mr.handle();
    bind.u.bind.addr = addr;
    bind.u.bind.length = length;
    bind.u.bind.access = access;
    if (auto posted = end.ep->post_send({&bind, 1}); !posted.ok()) {
        ADD_FAILURE() << "posting the bind: " << posted.describe();
        return std::nullopt;
    }
    return end.completion();
}

TEST_F(Datapath, ATypeTwoWindowGrantsItsRangeAndNoMore) {
    Pair &p = pair();
    connect(p);
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_MW_TYPE2), try_window(*p.b.pz), "type 2 memory windows (RI_CAP_MW_TYPE2)");
    // A region with no remote right of its own: only the window lets the peer in, and only to its 512 bytes.
    std::vector<uint8_t> mem(4096, 0x11);
    auto mr = p.b.pz->register_memory(mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_MW_BIND);
    ASSERT_OK(mr) << mr.error().to_string();
    auto w = p.b.pz->allocate_window(RI_MW_TYPE_2);
    ASSERT_OK(w) << w.error().to_string();
    const uint64_t base = reinterpret_cast<uint64_t>(mem.data());
    auto bound = bind_window(p.b, **w, **mr, base + 1024, 512, RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(bound.has_value()) << "the bind did not complete";
    EXPECT_EQ(bound->wr_id, 9u);
    EXPECT_EQ(bound->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(bound->opcode, static_cast<uint32_t>(RI_WC_BIND_MW));
    // Through the window, inside it: a Write lands, a Read brings it back.
    fill(p.a.buf, 0, 64, 7);
    const ri_stag_t key = (*w)->rkey();
    ASSERT_OK(p.a.send(1, RI_WR_RDMA_WRITE, {p.a.sge(0, 64)}, RI_SEND_SIGNALED, base + 1024 + 100, key));
    ASSERT_OK(p.a.send(2, RI_WR_RDMA_READ, {p.a.sge(1024, 64)}, RI_SEND_SIGNALED, base + 1024 + 100, key));
    auto done = p.a.completions(2);
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(done[1].status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(first_wrong(p.a.buf, 1024, 64, 7), 64u) << "the Read through the window brought back other bytes";
    EXPECT_EQ(mem[1024 + 99], 0x11) << "a byte before the write changed";
    EXPECT_EQ(mem[1024 + 164], 0x11) << "a byte after the write changed";
    // Across the window's end: refused by the peer, the region's bytes past the window untouched.
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_READ, {p.a.sge(2048, 64)}, RI_SEND_SIGNALED, base + 1024 + 480, key));
    auto past = p.a.completion();
    ASSERT_TRUE(past.has_value());
    EXPECT_EQ(past->wr_id, 3u);
    EXPECT_EQ(past->status, static_cast<uint32_t>(RI_WC_REM_ACCESS_ERR))
        << "a Read past the window's end was served (status " << past->status << ")";
}

TEST_F(Datapath, ATypeTwoWindowServesOnlyTheQpItIsBoundOn) {
    Pair &p = pair();
    connect(p);
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_MW_TYPE2), try_window(*p.b.pz), "type 2 memory windows (RI_CAP_MW_TYPE2)");
    // A second connection whose passive end is in the same protection zone as the first's.
    EndOptions same;
    same.pz = p.b.pz;
    Pair &q = pair();
    connect(q, {}, same);
    std::vector<uint8_t> mem(4096, 0x22);
    auto mr = p.b.pz->register_memory(mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_MW_BIND);
    ASSERT_OK(mr) << mr.error().to_string();
    auto w = p.b.pz->allocate_window(RI_MW_TYPE_2);
    ASSERT_OK(w) << w.error().to_string();
    const uint64_t base = reinterpret_cast<uint64_t>(mem.data());
    auto bound = bind_window(p.b, **w, **mr, base, 1024, RI_ACCESS_REMOTE_READ);  // on the first connection's QP
    ASSERT_TRUE(bound.has_value());
    ASSERT_EQ(bound->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    // Through the QP it is bound on: served.
    ASSERT_OK(p.a.send(1, RI_WR_RDMA_READ, {p.a.sge(0, 64)}, RI_SEND_SIGNALED, base, (*w)->rkey()));
    auto mine = p.a.completion();
    ASSERT_TRUE(mine.has_value());
    EXPECT_EQ(mine->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(p.a.buf[0], 0x22);
    // Through another QP of the same protection zone: refused.
    ASSERT_OK(q.a.send(2, RI_WR_RDMA_READ, {q.a.sge(0, 64)}, RI_SEND_SIGNALED, base, (*w)->rkey()));
    auto other = q.a.completion();
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(other->status, static_cast<uint32_t>(RI_WC_REM_ACCESS_ERR))
        << "a window bound on one QP served a Read that came through another (status " << other->status << ")";
}

// A signalled fast registration of allocated STag @p mr as @p stag: @p n pages of 4 KiB at @p pages, @p length bytes
// at tagged offset @p iova, with rights @p access.
ri_send_wr_t fast_reg_wr(uint64_t wr_id, ri_mr_t mr, const uint64_t *pages, uint32_t n, uint64_t iova, uint64_t length,
                         uint32_t access, ri_stag_t stag) {
    ri_send_wr_t w{};
    w.wr_id = wr_id;
    w.opcode = RI_WR_FAST_REG;
    w.flags = RI_SEND_SIGNALED;
    w.u.fast_reg.mr = mr;
    w.u.fast_reg.pages = pages;
    w.u.fast_reg.num_pages = n;
    w.u.fast_reg.page_shift = 12;
    w.u.fast_reg.iova = iova;
    w.u.fast_reg.length = length;
    w.u.fast_reg.access = access;
    w.u.fast_reg.stag = stag;
    return w;
}

// Fast registration (RI_WR_FAST_REG), executed in send queue order: an allocated STag, given a new consumer key, maps
// two pages of a registered region for the peer's Writes and Reads, until a Local Invalidate; a page list that
// points outside registered memory fails the request, not the memory.
TEST_F(Datapath, AFastRegisteredStagServesThePeerUntilItIsInvalidated) {
    Pair &p = pair();
    connect(p);
    const ri_verbs_ops_t &v = consumer_.adapter->verbs();
    ri_mr_t st = nullptr;
    ri_mr_keys_t k{};
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_FAST_REG), v.alloc_stag(p.b.pz->handle(), 4, &st, &k),
                        "fast registration (RI_CAP_FAST_REG)");
    ASSERT_RI_OK(v.alloc_stag(p.b.pz->handle(), 4, &st, &k));
    // Two pages inside b's registered buffer; the range starts 16 bytes into the first.
    const uint64_t base = (p.b.addr(0) + 4095) & ~uint64_t{4095};
    const uint64_t pages[2] = {base, base + 4096};
    const ri_stag_t fresh = (k.lkey & ~0xffu) | ((k.lkey + 1) & 0xffu);
    constexpr uint64_t kIova = 0x70010;
    constexpr uint32_t kLen = 6000;
    auto fast_reg = [&](uint64_t wr_id, const uint64_t *list, ri_stag_t stag) {
        const ri_send_wr_t w = fast_reg_wr(wr_id, st, list, 2, kIova, kLen,
                                           RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ, stag);
        return p.b.ep->post_send({&w, 1});
    };
    // Pages that do not follow each other, or a new STag of another index: refused at post.
    const uint64_t apart[2] = {base, base + 3 * 4096};
    EXPECT_STATUS(fast_reg(1, apart, fresh), RI_EINVAL) << "pages that do not follow each other";
    EXPECT_STATUS(fast_reg(1, pages, fresh + 0x100), RI_EINVAL) << "a new STag of another index";
    ASSERT_OK(fast_reg(50, pages, fresh));
    auto done = p.b.completion();
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(done->opcode, static_cast<uint32_t>(RI_WC_FAST_REG));
    ri_mr_attr_t a{};
    ASSERT_RI_OK(v.query_mr(st, &a));
    EXPECT_EQ(a.state, static_cast<uint32_t>(RI_STAG_VALID));
    EXPECT_EQ(a.keys.rkey, fresh) << "the consumer key the fast registration gave";
    // The peer writes 256 bytes at tagged offset kIova + 100 and reads them back.
    fill(p.a.buf, 0, 256, 3);
    ASSERT_OK(p.a.send(2, RI_WR_RDMA_WRITE, {p.a.sge(0, 256)}, RI_SEND_SIGNALED, kIova + 100, fresh));
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_READ, {p.a.sge(4096, 256)}, RI_SEND_SIGNALED, kIova + 100, fresh));
    auto aw = p.a.completions(2);
    ASSERT_EQ(aw.size(), 2u);
    for (const auto &w : aw) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_SUCCESS)) << "wr " << w.wr_id;
    const size_t at = static_cast<size_t>(base - p.b.addr(0)) + 16 + 100;
    EXPECT_EQ(first_wrong(p.b.buf, at, 256, 3), 256u) << "the Write landed where the page list maps it";
    EXPECT_EQ(first_wrong(p.a.buf, 4096, 256, 3), 256u) << "the Read brought it back";
    // Local Invalidate: the peer's next Write is a Terminate (invalid STag).
    ASSERT_OK(p.b.send(51, RI_WR_LOCAL_INV, {}, RI_SEND_SIGNALED, 0, 0, fresh));
    auto inv = p.b.completion();
    ASSERT_TRUE(inv.has_value());
    EXPECT_EQ(inv->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(inv->opcode, static_cast<uint32_t>(RI_WC_LOCAL_INV));
    ASSERT_RI_OK(v.query_mr(st, &a));
    EXPECT_EQ(a.state, static_cast<uint32_t>(RI_STAG_INVALID));
    ASSERT_OK(p.a.send(4, RI_WR_RDMA_WRITE, {p.a.sge(0, 64)}, RI_SEND_SIGNALED, kIova, fresh));
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED, &detail))
        << consumer_.events_text();
    EXPECT_EQ(detail, 0x1100u) << "DDP tagged buffer error, invalid STag";
    EXPECT_RI_OK(v.deregister_mr(st));
}

TEST_F(Datapath, AFastRegistrationOutsideRegisteredMemoryFailsTheRequest) {
    Pair &p = pair();
    connect(p);
    const ri_verbs_ops_t &v = consumer_.adapter->verbs();
    ri_mr_t st = nullptr;
    ri_mr_keys_t k{};
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_FAST_REG), v.alloc_stag(p.b.pz->handle(), 4, &st, &k),
                        "fast registration (RI_CAP_FAST_REG)");
    ASSERT_RI_OK(v.alloc_stag(p.b.pz->handle(), 4, &st, &k));
    // Page-aligned memory no region covers.
    std::vector<uint8_t> loose(3 * 4096, 0x44);
    const uint64_t page = (reinterpret_cast<uint64_t>(loose.data()) + 4095) & ~uint64_t{4095};
    const ri_send_wr_t w = fast_reg_wr(60, st, &page, 1, 0, 4096, RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE, k.lkey);
    const rdma::Status posted = p.b.ep->post_send({&w, 1});
    if (posted.ok()) {
        auto c = p.b.completion();
        ASSERT_TRUE(c.has_value());
        EXPECT_NE(c->status, static_cast<uint32_t>(RI_WC_SUCCESS)) << "a fast registration of unregistered memory";
    } else {
        EXPECT_STATUS(posted, RI_EINVAL);
    }
    ri_mr_attr_t a{};
    ASSERT_RI_OK(v.query_mr(st, &a));
    EXPECT_EQ(a.state, static_cast<uint32_t>(RI_STAG_INVALID)) << "the STag maps nothing";
    EXPECT_RI_OK(v.deregister_mr(st));
}

// Moved from tests/softrnic/datapath_test.cpp (UnsignaledWorkCompletesSilently): only signaled requests complete
// visibly, and unsignaled ones give back their queue slots all the same.
TEST_F(Datapath, UnsignaledRequestsCompleteSilently) {
    EndOptions o;
    o.bytes = 16000;
    o.depth = 32;
    Pair &p = pair();
    connect(p, o, o, [](Pair &x) {
        for (uint64_t i = 0; i < 11; ++i) ASSERT_OK(x.b.recv(i, {x.b.sge(1000 * i, 1000)}));
    });
    fill(p.a.buf, 0, 1000, 4);
    for (uint64_t i = 0; i < 10; ++i) ASSERT_OK(p.a.send(i, RI_WR_SEND, {p.a.sge(0, 1000)}, 0));
    ASSERT_OK(p.a.send(99, RI_WR_SEND, {p.a.sge(0, 1000)}));
    EXPECT_EQ(p.b.completions(11).size(), 11u);
    auto sw = p.a.completions(1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].wr_id, 99u) << "only the signaled one";
    EXPECT_TRUE(p.a.idle());
    // More unsignaled requests than the send queue holds (32), in rounds: their slots come back without a CQE.
    for (uint64_t round = 0; round < 4; ++round) {
        for (uint64_t i = 0; i < 20; ++i) {
            ASSERT_OK(p.a.send(i, RI_WR_RDMA_WRITE, {p.a.sge(0, 1000)}, 0, p.b.addr(12000), p.b.rkey()))
                << "round " << round << " request " << i << ": the send queue did not free its slots";
        }
        ASSERT_OK(p.a.send(1000 + round, RI_WR_RDMA_WRITE, {p.a.sge(0, 1000)}, RI_SEND_SIGNALED, p.b.addr(12000),
                             p.b.rkey())
                        );
        auto w = p.a.completions(1);
        ASSERT_EQ(w.size(), 1u);
        EXPECT_EQ(w[0].wr_id, 1000 + round);
    }
    // A signaled Read behind them all sees every Write placed.
    ASSERT_OK(p.a.send(7, RI_WR_RDMA_READ, {p.a.sge(2000, 1000)}, RI_SEND_SIGNALED, p.b.addr(12000), p.b.rkey()));
    auto r = p.a.completion();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(first_wrong(p.a.buf, 2000, 1000, 4), 1000u);
}

// Moved from tests/softrnic/datapath_test.cpp (InlineSendsAndWritesNeedNoRegistration), for RNICs that advertise
// inline data (max_inline > 0).
TEST_F(Datapath, InlineDataIsCopiedAtPost) {
    open_consumer();
    const uint32_t max_inline = consumer_.attr.max_inline;
    if (max_inline == 0) {
        End e;
        ASSERT_EQ(e.make(consumer_, {}), "");
        std::vector<uint8_t> tmp(16);
        ri_sge_t s{reinterpret_cast<uint64_t>(tmp.data()), 16, 0};
        EXPECT_FALSE(e.send(1, RI_WR_SEND, {s}, RI_SEND_SIGNALED | RI_SEND_INLINE).ok())
            << "an inline request on an RNIC without inline data (max_inline 0) was accepted";
        GTEST_SKIP() << settings().provider << " does not offer inline data (max_inline 0)";
    }
    const uint32_t n = std::min(max_inline, 100u);
    EndOptions ao;
    ao.max_inline = n;
    Pair &p = pair();
    connect(p, ao, {}, [](Pair &x) { ASSERT_OK(x.b.recv(1, {x.b.sge(0, 128)})); });
    std::vector<uint8_t> tmp(n), copy(n);
    fill(tmp, 0, n, 9);
    copy = tmp;
    ri_sge_t s{reinterpret_cast<uint64_t>(tmp.data()), n, 0};  // no lkey: inline
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {s}, RI_SEND_SIGNALED | RI_SEND_INLINE));
    std::fill(tmp.begin(), tmp.end(), 0xee);  // the payload was copied at post
    ri_sge_t w{reinterpret_cast<uint64_t>(copy.data()), n, 0};
    ASSERT_OK(p.a.send(2, RI_WR_RDMA_WRITE, {w}, RI_SEND_SIGNALED | RI_SEND_INLINE, p.b.addr(256), p.b.rkey()));
    auto rw = p.b.completion();
    ASSERT_TRUE(rw.has_value());
    EXPECT_EQ(rw->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(rw->byte_len, n);
    EXPECT_EQ(p.a.completions(2).size(), 2u);
    EXPECT_TRUE(std::equal(copy.begin(), copy.end(), p.b.buf.begin()));
    // The Send behind nothing, the Write before nothing: a Read shows the Write placed.
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_READ, {p.a.sge(1024, n)}, RI_SEND_SIGNALED, p.b.addr(256), p.b.rkey()));
    ASSERT_TRUE(p.a.completion().has_value());
    EXPECT_TRUE(std::equal(copy.begin(), copy.end(), p.a.buf.begin() + 1024));
    // More than the QP's inline limit is refused at post.
    std::vector<uint8_t> big(n + 1);
    ri_sge_t b{reinterpret_cast<uint64_t>(big.data()), n + 1, 0};
    EXPECT_FALSE(p.a.send(4, RI_WR_SEND, {b}, RI_SEND_SIGNALED | RI_SEND_INLINE).ok());
}

// Send with Solicited Event: the receiver's completion says so.
TEST_F(Datapath, SolicitedSendsAreFlagged) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        for (uint64_t i = 0; i < 2; ++i) ASSERT_OK(x.b.recv(i, {x.b.sge(i * 64, 64)}));
    });
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {p.a.sge(0, 8)}));
    ASSERT_OK(p.a.send(2, RI_WR_SEND_SE, {p.a.sge(0, 8)}));
    auto rw = p.b.completions(2);
    ASSERT_EQ(rw.size(), 2u);
    EXPECT_EQ(rw[0].flags & RI_WC_SOLICITED, 0u);
    EXPECT_NE(rw[1].flags & RI_WC_SOLICITED, 0u);
    EXPECT_EQ(p.a.completions(2).size(), 2u);
}

// Moved from tests/softrnic/datapath_test.cpp (SendWithInvalidateLeavesTheStagInvalid): Send with Invalidate, for
// RNICs that advertise it (RI_CAP_SEND_INV).
TEST_F(Datapath, SendWithInvalidateLeavesTheStagInvalid) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        ASSERT_OK(x.b.recv(1, {x.b.sge(0, 64)}));
        ASSERT_OK(x.a.recv(7, {x.a.sge(0, 64)}));
    });
    // The target has a region of its own, so the invalidation leaves the receive buffers' region alone.
    std::vector<uint8_t> target(4096);
    auto tmr = p.b.pz->register_memory(target.data(), target.size(), kAllAccess);
    ASSERT_OK(tmr) << tmr.error().to_string();
    const ri_stag_t stag = (*tmr)->keys().rkey;
    CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_SEND_INV),
                        p.a.send(2, RI_WR_SEND_INV, {p.a.sge(64, 8)}, RI_SEND_SIGNALED, 0, 0, stag).code(),
                        "Send with Invalidate (RI_CAP_SEND_INV)");
    // Before: Writes to the target work.
    fill(p.a.buf, 64, 64, 1);
    ASSERT_OK(p.a.send(1, RI_WR_RDMA_WRITE, {p.a.sge(64, 64)}, RI_SEND_SIGNALED,
                         reinterpret_cast<uint64_t>(target.data()), stag)
                    );
    ASSERT_OK(p.a.send(2, RI_WR_SEND_INV, {p.a.sge(64, 8)}, RI_SEND_SIGNALED, 0, 0, stag));
    auto rw = p.b.completion();
    ASSERT_TRUE(rw.has_value());
    EXPECT_EQ(rw->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_NE(rw->flags & RI_WC_WITH_INV, 0u);
    EXPECT_EQ(rw->invalidated_stag, stag);
    EXPECT_EQ(first_wrong(target, 0, 64, 1), 64u);
    EXPECT_EQ(p.a.completions(2).size(), 2u);
    // After: a Write to it is a Terminate with "invalid STag" (RFC 5041: DDP, tagged buffer, invalid STag).
    ASSERT_OK(p.a.send(3, RI_WR_RDMA_WRITE, {p.a.sge(64, 64)}, RI_SEND_SIGNALED,
                         reinterpret_cast<uint64_t>(target.data()), stag)
                    );
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED, &detail))
        << consumer_.events_text();
    EXPECT_EQ(detail, 0x1100u);
    const bool sent = consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, nullptr, 5s);
    EXPECT_TRUE(sent) << consumer_.events_text();
    auto aw = p.a.completions(2);
    ASSERT_EQ(aw.size(), 2u);
    for (const auto &w : aw) {
        if (w.wr_id == 7) {
            EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << "the receive";
        }
    }
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
    p.close();  // before the target region's bytes go
}

}  // namespace
}  // namespace conformance
