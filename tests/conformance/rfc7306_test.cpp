// Conformance: RFC 7306 (atomics and Immediate Data), for RNICs that advertise them (RI_CAP_ATOMICS,
// RI_CAP_IMMEDIATE). A stream carries them only where the host knows the peer speaks RFC 7306 too
// (RI_MPA_RFC7306): two QPs the kAL paired on this host, or a peer whose handshake said it runs this stack (the
// kAL's TCP peer detection, where krdmad may load it). Where the kAL knows nothing of the peer (it may be Linux siw,
// which terminates on those opcodes), a post must answer RI_EOPNOTSUPP at once, the QP untouched.
#include <algorithm>
#include <set>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {
namespace {

using Extensions = Conformance;

constexpr uint32_t kAtomicAccess = kAllAccess | RI_ACCESS_REMOTE_ATOMIC;

ri_send_wr_t atomic_wr(uint64_t id, uint32_t opcode, const ri_sge_t &sink, uint64_t remote, ri_stag_t rkey,
                       uint64_t compare_add, uint64_t swap = 0) {
    ri_send_wr_t wr{};
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = &sink;
    wr.num_sge = 1;
    wr.u.atomic.remote_addr = remote;
    wr.u.atomic.rkey = rkey;
    wr.u.atomic.compare_add = compare_add;
    wr.u.atomic.swap = swap;
    return wr;
}

ri_send_wr_t immediate_wr(uint64_t id, uint32_t opcode, uint32_t imm, const ri_sge_t *sge = nullptr,
                          uint64_t remote = 0, ri_stag_t rkey = 0, uint32_t flags = RI_SEND_SIGNALED) {
    ri_send_wr_t wr{};
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.flags = flags;
    wr.sgl = sge;
    wr.num_sge = sge != nullptr ? 1 : 0;
    wr.u.rdma.remote_addr = remote;
    wr.u.rdma.rkey = rkey;
    wr.u.rdma.imm_data = imm;
    return wr;
}

// The RDMA-mode transition's flags of the pair's active end.
uint32_t mpa_flags(const Pair &p) {
    auto a = p.a.ep->query();
    return a ? a->llp.mpa_flags : 0;
}

// The first request of a test: skipped (after checking RI_EOPNOTSUPP) when the RNIC does not advertise @p cap.
// Two QPs the kAL paired on this host must have agreed to RFC 7306. Where they did not agree, the post must be
// refused with RI_EOPNOTSUPP and leave the QP serving (the test ends there).
#define EXTENSION_POST(p, cap, wr, what)                                                                             \
    do {                                                                                                             \
        const rdma::Status st_ = (p).a.ep->post_send({&(wr), 1});                                                    \
        CONFORMANCE_REQUIRE(consumer_.has(cap), st_.code(), what);                                                   \
        const uint32_t flags_ = mpa_flags(p);                                                                        \
        if ((flags_ & RI_LLP_SAME_HOST) != 0) {                                                                      \
            EXPECT_NE(flags_ & RI_MPA_RFC7306, 0u) << "the kAL paired the QPs on this host, so it knows both ends";  \
        }                                                                                                            \
        if ((flags_ & RI_MPA_RFC7306) == 0) {                                                                        \
            ASSERT_STATUS(st_.code(), RI_EOPNOTSUPP)                                                                 \
                << what << " on a stream whose peer nobody vouched for must be refused at post";                     \
            EXPECT_TRUE((p).a.idle()) << "a refused request completed";                                              \
            EXPECT_EQ((p).a.state(), RI_QPS_RTS) << "a refused post changed the QP";                                 \
            std::printf("%s: refused (the peer's RFC 7306 is unknown here), as it must be\n", what);                 \
            return;                                                                                                  \
        }                                                                                                            \
        ASSERT_OK(st_) << what;                                                                                      \
    } while (0)

TEST_F(Extensions, FetchAndAddReturnsTheOriginalAndAdds) {
    Pair &p = pair();
    EndOptions target;
    target.access = kAtomicAccess;
    connect(p, {}, target);
    uint64_t *counter = reinterpret_cast<uint64_t *>(p.b.buf.data() + 64);
    *counter = 5;
    ri_sge_t sink = p.a.sge(0, 8);
    ri_send_wr_t wr = atomic_wr(1, RI_WR_ATOMIC_FETCH_ADD, sink, p.b.addr(64), p.b.rkey(), 3);
    EXTENSION_POST(p, RI_CAP_ATOMICS, wr, "RFC 7306 atomics (RI_CAP_ATOMICS)");
    auto wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_ATOMIC));
    uint64_t before = 0;
    std::memcpy(&before, p.a.buf.data(), 8);
    EXPECT_EQ(before, 5u) << "the original value goes to the sink";
    EXPECT_EQ(*counter, 8u);
    // A carry across the 32-bit halves: one 64-bit add.
    *counter = 0xffffffffu;
    wr = atomic_wr(2, RI_WR_ATOMIC_FETCH_ADD, sink, p.b.addr(64), p.b.rkey(), 1);
    ASSERT_OK(p.a.ep->post_send({&wr, 1}));
    wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(*counter, 0x100000000u);
}

TEST_F(Extensions, CompareAndSwapSwapsOnlyWhenEqual) {
    Pair &p = pair();
    EndOptions target;
    target.access = kAtomicAccess;
    connect(p, {}, target);
    uint64_t *word = reinterpret_cast<uint64_t *>(p.b.buf.data() + 128);
    *word = 7;
    ri_sge_t sink = p.a.sge(8, 8);
    ri_send_wr_t wr = atomic_wr(1, RI_WR_ATOMIC_CMP_SWAP, sink, p.b.addr(128), p.b.rkey(), 7, 42);
    EXTENSION_POST(p, RI_CAP_ATOMICS, wr, "RFC 7306 atomics (RI_CAP_ATOMICS)");
    auto wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_ATOMIC_CMP_SWAP));
    uint64_t before = 0;
    std::memcpy(&before, p.a.buf.data() + 8, 8);
    EXPECT_EQ(before, 7u);
    EXPECT_EQ(*word, 42u) << "equal: swapped";
    wr = atomic_wr(2, RI_WR_ATOMIC_CMP_SWAP, sink, p.b.addr(128), p.b.rkey(), 7, 1);
    ASSERT_OK(p.a.ep->post_send({&wr, 1}));
    wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    std::memcpy(&before, p.a.buf.data() + 8, 8);
    EXPECT_EQ(before, 42u);
    EXPECT_EQ(*word, 42u) << "not equal: left alone";
}

// Each of three QPs adds 1 to one counter 300 times, all outstanding at once as far as ORD allows: the counter ends
// at 900 and the originals the requesters got back are 0..899, each exactly once.
TEST_F(Extensions, AtomicsFromSeveralQpsLoseNoIncrement) {
    constexpr int kQps = 3;
    constexpr uint64_t kEach = 300;
    Pair *pairs[kQps];
    EndOptions target;
    target.access = kAtomicAccess;
    pairs[0] = &pair();
    connect(*pairs[0], {}, target);
    for (int q = 1; q < kQps; ++q) {
        EndOptions b;
        b.pz = pairs[0]->b.pz;  // the counter's STag is valid on every responder QP
        pairs[q] = &pair();
        connect(*pairs[q], {}, b);
    }
    Pair &owner = *pairs[0];
    uint64_t *counter = reinterpret_cast<uint64_t *>(owner.b.buf.data() + 256);
    *counter = 0;
    std::vector<uint64_t> originals;
    std::vector<uint64_t> posted(kQps, 0), done(kQps, 0);
    {
        ri_sge_t sink = pairs[0]->a.sge(0, 8);
        ri_send_wr_t wr = atomic_wr(0, RI_WR_ATOMIC_FETCH_ADD, sink, owner.b.addr(256), owner.b.rkey(), 1);
        EXTENSION_POST(owner, RI_CAP_ATOMICS, wr, "RFC 7306 atomics (RI_CAP_ATOMICS)");
        posted[0] = 1;
    }
    // Each request has a sink of its own (8 bytes at 8 * id of its requester's buffer).
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::any_of(done.begin(), done.end(), [&](uint64_t d) { return d < kEach; })) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline)
            << "atomics stopped completing: " << done[0] << ", " << done[1] << ", " << done[2] << " of " << kEach;
        for (int q = 0; q < kQps; ++q) {
            End &a = pairs[q]->a;
            while (posted[q] < kEach && posted[q] - done[q] < 16) {
                ri_sge_t sink = a.sge(8 * posted[q], 8);
                ri_send_wr_t wr =
                    atomic_wr(posted[q], RI_WR_ATOMIC_FETCH_ADD, sink, owner.b.addr(256), owner.b.rkey(), 1);
                const rdma::Status st = a.ep->post_send({&wr, 1});
                if (st.code() == RI_EAGAIN) break;
                ASSERT_OK(st);
                ++posted[q];
            }
            ri_wc_t wc[16];
            auto n = a.cq->poll({wc, 16});
            ASSERT_OK(n);
            for (size_t i = 0; i < *n; ++i) {
                ASSERT_EQ(wc[i].status, static_cast<uint32_t>(RI_WC_SUCCESS)) << "QP " << q << " request " << wc[i].wr_id;
                uint64_t v = 0;
                std::memcpy(&v, a.buf.data() + 8 * wc[i].wr_id, 8);
                originals.push_back(v);
                ++done[q];
            }
        }
    }
    EXPECT_EQ(*counter, kQps * kEach) << "increments were lost";
    std::set<uint64_t> distinct(originals.begin(), originals.end());
    EXPECT_EQ(distinct.size(), originals.size()) << "two requests saw the same original value";
    EXPECT_EQ(*distinct.begin(), 0u);
    EXPECT_EQ(*distinct.rbegin(), kQps * kEach - 1);
}

// A misaligned target is the poster's error, refused at once (RFC 7306 §8.2 lets the responder serve only 64-bit
// aligned targets); a target without remote atomic rights is the peer's to refuse: a Terminate with RDMAP's remote
// protection error, the target untouched.
TEST_F(Extensions, AtomicsTheTargetDoesNotAllowAreRefused) {
    Pair &p = pair();
    connect(p);  // b's buffer: remote read and write, no remote atomics
    uint64_t *word = reinterpret_cast<uint64_t *>(p.b.buf.data() + 64);
    *word = 11;
    ri_sge_t sink = p.a.sge(0, 8);
    ri_send_wr_t misaligned = atomic_wr(1, RI_WR_ATOMIC_FETCH_ADD, sink, p.b.addr(68), p.b.rkey(), 1);
    {
        const rdma::Status st = p.a.ep->post_send({&misaligned, 1});
        CONFORMANCE_REQUIRE(consumer_.has(RI_CAP_ATOMICS), st.code(), "RFC 7306 atomics (RI_CAP_ATOMICS)");
        EXPECT_TRUE(st.code() == RI_EINVAL || st.code() == RI_EOPNOTSUPP) << "a misaligned atomic: " << st.code();
    }
    ri_sge_t short_sink = p.a.sge(0, 4);
    ri_send_wr_t small = atomic_wr(2, RI_WR_ATOMIC_FETCH_ADD, short_sink, p.b.addr(64), p.b.rkey(), 1);
    const rdma::Status st = p.a.ep->post_send({&small, 1});
    EXPECT_TRUE(st.code() == RI_EINVAL || st.code() == RI_EOPNOTSUPP) << "a 4-byte sink: " << st.code();
    EXPECT_TRUE(p.a.idle()) << "a refused request completed";
    ri_send_wr_t denied = atomic_wr(3, RI_WR_ATOMIC_FETCH_ADD, sink, p.b.addr(64), p.b.rkey(), 1);
    EXTENSION_POST(p, RI_CAP_ATOMICS, denied, "RFC 7306 atomics (RI_CAP_ATOMICS)");
    auto wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->wr_id, 3u);
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_REM_ACCESS_ERR));
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail >> 8, 0x01u) << std::hex << detail;  // RDMAP, remote protection error
    EXPECT_EQ(*word, 11u) << "a refused atomic changed its target";
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
}

TEST_F(Extensions, WriteWithImmediateDataPlacesTheDataThenTakesAReceive) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) { ASSERT_OK(x.b.recv(9, {x.b.sge(0, 64)})); });
    for (size_t i = 0; i < 1000; ++i) p.a.buf[4096 + i] = pattern(i, 3);
    ri_sge_t data = p.a.sge(4096, 1000);
    ri_send_wr_t wr = immediate_wr(1, RI_WR_RDMA_WRITE_IMM, 0xdeadbeefu, &data, p.b.addr(8192), p.b.rkey());
    EXTENSION_POST(p, RI_CAP_IMMEDIATE, wr, "RFC 7306 Immediate Data (RI_CAP_IMMEDIATE)");
    auto wc = p.a.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_RDMA_WRITE));
    auto rc = p.b.completion();
    ASSERT_TRUE(rc.has_value());
    EXPECT_EQ(rc->wr_id, 9u);
    EXPECT_EQ(rc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(rc->opcode, static_cast<uint32_t>(RI_WC_RECV_RDMA_IMM));
    EXPECT_NE(rc->flags & RI_WC_WITH_IMM, 0u);
    EXPECT_EQ(rc->flags & RI_WC_SOLICITED, 0u);
    EXPECT_EQ(rc->imm_data, 0xdeadbeefu);
    EXPECT_EQ(rc->byte_len, 1000u) << "the Write's length, as InfiniBand's RDMA Write with Immediate reports it";
    for (size_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(p.b.buf[8192 + i], pattern(i, 3)) << "byte " << i << ": the Write's data is placed before the receive completes";
    }
}

TEST_F(Extensions, ImmediateDataWithSolicitedEvent) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        ASSERT_OK(x.b.recv(1, {x.b.sge(0, 64)}));
        ASSERT_OK(x.b.recv(2, {x.b.sge(64, 64)}));
    });
    ri_send_wr_t wr = immediate_wr(1, RI_WR_IMMEDIATE, 17);
    EXTENSION_POST(p, RI_CAP_IMMEDIATE, wr, "RFC 7306 Immediate Data (RI_CAP_IMMEDIATE)");
    wr = immediate_wr(2, RI_WR_IMMEDIATE, 0x80000001u, nullptr, 0, 0, RI_SEND_SIGNALED | RI_SEND_SOLICITED);
    ASSERT_OK(p.a.ep->post_send({&wr, 1}));
    auto sent = p.a.completions(2);
    ASSERT_EQ(sent.size(), 2u);
    for (const auto &w : sent) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_SUCCESS)) << w.wr_id;
    auto got = p.b.completions(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].imm_data, 17u);
    EXPECT_EQ(got[0].flags & RI_WC_SOLICITED, 0u);
    EXPECT_EQ(got[1].imm_data, 0x80000001u);
    EXPECT_NE(got[1].flags & RI_WC_SOLICITED, 0u);
    for (const auto &w : got) EXPECT_EQ(w.opcode, static_cast<uint32_t>(RI_WC_RECV_RDMA_IMM));
}

// Immediate Data takes a receive as a Send does: with none posted, the stream ends with RFC 5041's "no buffer".
TEST_F(Extensions, ImmediateDataWithNoReceivePostedTerminates) {
    Pair &p = pair();
    connect(p);
    ri_send_wr_t wr = immediate_wr(1, RI_WR_IMMEDIATE, 5);
    EXTENSION_POST(p, RI_CAP_IMMEDIATE, wr, "RFC 7306 Immediate Data (RI_CAP_IMMEDIATE)");
    uint32_t detail = 0;
    ASSERT_TRUE(consumer_.await_event(p.b.ep->qp_num(), RI_AE_QP_TERMINATE_SENT, &detail)) << consumer_.events_text();
    EXPECT_EQ(detail, 0x1202u) << std::hex << detail;  // DDP, untagged buffer, no buffer available (RFC 5041 §7.2)
    ASSERT_TRUE(consumer_.await_event(p.a.ep->qp_num(), RI_AE_QP_TERMINATE_RECEIVED)) << consumer_.events_text();
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
}

}  // namespace
}  // namespace conformance
