// A consumer that scribbles over its own queue memory, against a real offload engine thread whose QPs run real TCP
// streams to an iWARP peer (issue 15, "Bad input and faults"): malformed send and receive WQEs, SGEs that leave
// their region or wrap around 2^64, forged STags and STags of another PD, producer indexes beyond the ring or moving
// backwards, a CQ whose consumer index is garbage, and thousands of WQE slots of random bytes. Each ends in the
// completion status the engine documents (offload_engine.hpp), the QP in ERROR with the rest flushed and its event
// raised, the stream torn down, another QP still served, and the canary bytes around every registered region intact.
//
// What tests/hwstub/offload_engine_test.cpp already covers (a bad opcode, an unknown flag, too many SGEs and inline
// data over max_inline on an IDLE QP; a full CQ; a producer index +1000 from another process) is not repeated here;
// these run on QPs in RTS, where the stream, the peer and the other QP are part of the outcome.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "oe_harness.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using oe_harness::Adapter;
using oe_harness::Arena;
using oe_harness::Fd;
using oe_harness::HostCq;
using oe_harness::HostQp;
using oe_harness::Peer;
using oe_harness::wait_until;

// The STags of the consumer's regions: PD 1 (the QP's) read-write VA-based, read-write zero-based, read-only; PD 2.
constexpr uint32_t kRw = 0x100, kZero = 0x101, kRo = 0x102, kOtherPd = 0x200;
// The STag of the peer's region, which the QP's Writes and Reads name.
constexpr uint32_t kPeerStag = 0x900;
constexpr size_t kRwLen = 64 * 1024, kSmallLen = 4096;
constexpr uint32_t kVictim = 3, kBystander = 4;
constexpr uint32_t kVictimCq = 7, kBystanderCq = 8;

// The shape of the victim QP: what the engine checks send WQEs against.
struct Shape {
    uint32_t max_send_sge = 2;
    uint32_t max_inline = 32;
    uint32_t sq_slot = 128;
};

hwstub_send_wqe wqe(uint64_t wr_id, uint8_t opcode, uint8_t flags = HWSTUB_WQE_SIGNALED) {
    hwstub_send_wqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.flags = flags;
    return w;
}

uint64_t va(const uint8_t *p) { return reinterpret_cast<uintptr_t>(p); }

/**
 * @brief An engine with two QPs in RTS, each on its own TCP stream to its own iWARP peer: the victim (QP 3, CQ 7),
 *        which each test scribbles on, and the bystander (QP 4, CQ 8), which must go on working. The consumer's
 *        regions live in a canary-guarded arena.
 */
class Rig {
public:
    explicit Rig(Shape shape = {}) : arena_(1 << 20), cq(kVictimCq, 256), cq2(kBystanderCq, 64) {
        rw = arena_.carve(kRwLen);
        zero = arena_.carve(kSmallLen);
        ro = arena_.carve(kSmallLen);
        other = arena_.carve(kSmallLen);
        victim = std::make_unique<HostQp>(kVictim, 16, shape.sq_slot, kVictimCq);
        victim->setup.max_send_sge = shape.max_send_sge;
        victim->setup.max_inline = shape.max_inline;
        bystander = std::make_unique<HostQp>(kBystander, 16, 128, kBystanderCq);
    }
    ~Rig() {
        // The engine first (its thread joined, its sockets closed, before the rings it reads go), then the peers.
        a.oe.reset();
        peer.reset();
        peer2.reset();
    }

    /** @brief Registers the regions, starts the engine and connects both QPs; call under ASSERT_NO_FATAL_FAILURE. */
    void start() {
        ASSERT_TRUE(arena_.ok());
        ASSERT_NE(other, nullptr);
        std::memset(rw, 0, kRwLen);
        for (uint8_t *p : {zero, ro, other}) std::memset(p, 0, kSmallLen);
        register_regions();
        ASSERT_TRUE(a.start());
        ASSERT_RI_OK(a.oe->add_cq(cq.setup()));
        ASSERT_RI_OK(a.oe->add_cq(cq2.setup()));
        ASSERT_RI_OK(a.oe->add_qp(victim->setup));
        ASSERT_RI_OK(a.oe->add_qp(bystander->setup));
        ASSERT_NO_FATAL_FAILURE(connect(kVictim, peer));
        ASSERT_NO_FATAL_FAILURE(connect(kBystander, peer2));
    }
    /** @brief (Re-)registers the consumer's regions, undoing any invalidation. */
    void register_regions() {
        constexpr uint32_t all = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                 RI_ACCESS_REMOTE_WRITE;
        a.oe->stags().add(kRw, {va(rw), kRwLen, va(rw), all, 1, true});
        a.oe->stags().add(kZero, {va(zero), kSmallLen, 0, all, 1, true});
        a.oe->stags().add(kRo, {va(ro), kSmallLen, va(ro), RI_ACCESS_LOCAL_READ | RI_ACCESS_REMOTE_READ, 1, true});
        a.oe->stags().add(kOtherPd, {va(other), kSmallLen, va(other), all, 2, true});
    }
    /** @brief Gives QP @p qp_num a TCP stream whose far end @p out runs. */
    void connect(uint32_t qp_num, std::unique_ptr<Peer> &out) {
        Fd mine, theirs;
        ASSERT_TRUE(oe_harness::stream_pair(mine, theirs, true));
        const ri_llp_params_t llp = oe_harness::llp_params(true, false);
        ASSERT_RI_OK(a.oe->start_stream(qp_num, mine.release(), llp));
        out = std::make_unique<Peer>(std::move(theirs), llp);
        out->add_region(kPeerStag, kRwLen, RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE);
    }

    /** @brief Publishes the victim's queues and rings. */
    void publish() { a.publish(*victim); }
    /** @brief Posts @p w (and its SGEs) on the victim's send queue. */
    void post(const hwstub_send_wqe &w, std::initializer_list<hwstub_sge> sges = {}) {
        ASSERT_TRUE(victim->put_send(w, sges));
        publish();
    }
    /** @brief CQEs of the victim until @p n arrived or 5 s passed. */
    std::vector<hwstub_cqe> cqes(size_t n) {
        std::vector<hwstub_cqe> got;
        (void)wait_until([&] {
            for (const auto &c : cq.drain()) got.push_back(c);
            return got.size() >= n;
        });
        return got;
    }

    /**
     * @brief The victim failed for good: QP_FATAL raised for it, ERROR in the engine and on both control blocks,
     *        its stream closed (the peer sees the end), nothing left unconsumed on its queues.
     */
    void expect_victim_failed() {
        EXPECT_TRUE(a.wait_event(RI_AE_QP_FATAL, kVictim)) << "RI_AE_QP_FATAL for the victim";
        EXPECT_EQ(a.state(kVictim), static_cast<uint32_t>(RI_QPS_ERROR));
        EXPECT_TRUE(victim->sq.in_error());
        EXPECT_TRUE(victim->rq.in_error());
        EXPECT_TRUE(wait_until([&] { return peer->ended(); })) << "the victim's stream was torn down";
        const auto t = peer->terminate();
        EXPECT_TRUE(t.has_value()) << "the stream ended without a Terminate";
        if (t) {
            EXPECT_EQ(t->code, iwarp::term::kRdmapLocalCatastrophic) << iwarp::term_name(t->code);
        }
        EXPECT_EQ(a.count_events(RI_AE_QP_FATAL, kVictim), 1u) << "one event per QP";
    }
    /** @brief The bystander still works: a Send of 300 bytes reaches its peer and completes successfully. */
    void expect_bystander_served() {
        std::memset(rw + 1000, 0x3c, 300);
        hwstub_send_wqe w = wqe(77, HWSTUB_OP_SEND);
        w.num_sge = 1;
        ASSERT_TRUE(bystander->put_send(w, {hwstub_sge{va(rw) + 1000, 300, kRw}}));
        a.publish(*bystander);
        std::vector<hwstub_cqe> got;
        ASSERT_TRUE(wait_until([&] {
            for (const auto &c : cq2.drain()) got.push_back(c);
            return !got.empty();
        })) << "the engine stopped serving the other QP";
        EXPECT_EQ(got[0].wr_id, 77u);
        EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
        ASSERT_TRUE(wait_until([&] { return !peer2->received().empty(); })) << "the other QP's Send never arrived";
        EXPECT_EQ(peer2->received().at(0), 300u);
        EXPECT_EQ(a.state(kBystander), static_cast<uint32_t>(RI_QPS_RTS));
        EXPECT_FALSE(a.oe->dead());
        EXPECT_EQ(a.page().dead, 0u);
    }
    /** @brief No byte outside the registered regions changed. */
    void expect_canaries() { EXPECT_EQ(arena_.damaged(), -1) << "a byte outside registered memory was written"; }

    Arena arena_;
    Adapter a;
    HostCq cq, cq2;
    std::unique_ptr<HostQp> victim, bystander;
    std::unique_ptr<Peer> peer, peer2;
    uint8_t *rw = nullptr, *zero = nullptr, *ro = nullptr, *other = nullptr;
};

// Posts @p bad (after a good NOP) on a fresh rig of @p shape and checks the whole outcome of a send WQE the engine
// must refuse with @p status: the NOP before it succeeds, it fails with @p status, the NOP after it is flushed, the
// QP fails, nothing reached the peer, the other QP is served, the canaries hold.
void expect_send_refused(const std::string &what, uint8_t status, const hwstub_send_wqe &bad,
                         std::initializer_list<hwstub_sge> sges, Shape shape = {}) {
    SCOPED_TRACE(what);
    Rig r(shape);
    ASSERT_NO_FATAL_FAILURE(r.start());
    ASSERT_TRUE(r.victim->put_send(wqe(1, HWSTUB_OP_NOP)));
    ASSERT_TRUE(r.victim->put_send(bad, sges));
    ASSERT_TRUE(r.victim->put_send(wqe(3, HWSTUB_OP_NOP, 0)));  // unsignalled: a flushed request completes anyway
    r.publish();
    const auto got = r.cqes(3);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
    EXPECT_EQ(got[1].wr_id, bad.wr_id);
    EXPECT_EQ(got[1].status, status);
    EXPECT_EQ(got[1].qp_num, kVictim);
    EXPECT_EQ(got[2].wr_id, 3u);
    EXPECT_EQ(got[2].status, RI_WC_WR_FLUSH_ERR);
    r.expect_victim_failed();
    EXPECT_TRUE(r.peer->received().empty()) << "nothing of a refused WQE reached the wire";
    EXPECT_FALSE(r.peer->failed()) << "whatever the victim sent was valid iWARP";
    EXPECT_EQ(r.victim->sq.done(), r.victim->sq.produced()) << "every slot went back to the host";
    // Later work is flushed as it arrives, and never executed.
    ASSERT_NO_FATAL_FAILURE(r.post(wqe(4, HWSTUB_OP_NOP)));
    const auto later = r.cqes(1);
    ASSERT_EQ(later.size(), 1u);
    EXPECT_EQ(later[0].status, RI_WC_WR_FLUSH_ERR);
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

TEST(HwstubScribble, MalformedSendWqesOnAnRtsQpFailWithLocalQpOperationError) {
    hwstub_send_wqe w = wqe(2, HWSTUB_OP_BIND_MW + 1);  // one past the last opcode
    expect_send_refused("opcode 8", RI_WC_LOC_QP_OP_ERR, w, {});
    w = wqe(2, HWSTUB_OP_SEND);
    w.bind_length = 4096;  // a bind's field in a Send: not zero where the format says zero
    expect_send_refused("a Send with a bind length", RI_WC_LOC_QP_OP_ERR, w, {});
    // A bind naming STags the consumer made up: no window of the QP's PD, so the adapter refuses to bind.
    w = wqe(2, HWSTUB_OP_BIND_MW);
    w.remote_stag = 0x12345600;
    w.inv_stag = 0x65432100;
    w.bind_length = 64;
    w.bind_access = RI_ACCESS_REMOTE_WRITE;
    expect_send_refused("a bind of a window nobody allocated", RI_WC_MW_BIND_ERR, w, {});
    w = wqe(2, 0xff);
    expect_send_refused("opcode 255", RI_WC_LOC_QP_OP_ERR, w, {});
    w = wqe(2, HWSTUB_OP_SEND, HWSTUB_WQE_SIGNALED | 0x20);  // the first unknown flag bit
    expect_send_refused("flag 0x20", RI_WC_LOC_QP_OP_ERR, w, {});
    w = wqe(2, HWSTUB_OP_SEND, HWSTUB_WQE_SIGNALED | HWSTUB_WQE_INLINE);
    w.num_sge = 1;  // inline data and SGEs at once
    w.inline_len = 8;
    expect_send_refused("inline with an SGE", RI_WC_LOC_QP_OP_ERR, w, {});
    w = wqe(2, HWSTUB_OP_READ, HWSTUB_WQE_SIGNALED | HWSTUB_WQE_INLINE);  // a Read's sink cannot be inline
    w.inline_len = 8;
    expect_send_refused("inline Read", RI_WC_LOC_QP_OP_ERR, w, {});
    w = wqe(2, HWSTUB_OP_SEND, HWSTUB_WQE_SIGNALED | HWSTUB_WQE_INLINE);
    w.inline_len = 0xffffffffu;  // far over max_inline and the slot
    expect_send_refused("inline length 2^32-1", RI_WC_LOC_QP_OP_ERR, w, {});
    // max_inline larger than the slot holds (a kVP bug or a scribbled QP context): the slot bound still holds.
    w = wqe(2, HWSTUB_OP_SEND, HWSTUB_WQE_SIGNALED | HWSTUB_WQE_INLINE);
    w.inline_len = 128 - 64 + 1;
    expect_send_refused("inline length one over the slot", RI_WC_LOC_QP_OP_ERR, w, {}, Shape{2, 4096, 128});
    // max_send_sge over the engine's own maximum: iwarp::kMaxSge still bounds it.
    w = wqe(2, HWSTUB_OP_SEND);
    w.num_sge = iwarp::kMaxSge + 1;
    expect_send_refused("num_sge over kMaxSge", RI_WC_LOC_QP_OP_ERR, w, {}, Shape{16, 32, 512});
    // SGEs that do not fit the slot.
    w = wqe(2, HWSTUB_OP_SEND);
    w.num_sge = 5;
    expect_send_refused("num_sge over the slot", RI_WC_LOC_QP_OP_ERR, w, {}, Shape{8, 32, 128});
    w = wqe(2, HWSTUB_OP_SEND);
    w.num_sge = 0xff;
    expect_send_refused("num_sge 255", RI_WC_LOC_QP_OP_ERR, w, {});
}

TEST(HwstubScribble, SgesOutsideTheirRegionOrWithForeignStagsFailWithLocalProtectionError) {
    // The rig's addresses are known only once it exists: a probe rig gives the arena layout, which is the same for
    // every rig (the same carving of a fresh mapping), but the base differs. So each case computes from its own rig
    // through this indirection: a function of the rig's regions to the bad SGE.
    struct Case {
        const char *what;
        uint8_t opcode;
        std::function<std::vector<hwstub_sge>(const Rig &)> sges;
    };
    const std::vector<Case> cases = {
        {"forged lkey", HWSTUB_OP_SEND, [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw), 16, 0xdead00}}; }},
        {"lkey 0", HWSTUB_OP_SEND, [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw), 16, 0}}; }},
        {"STag of another PD", HWSTUB_OP_SEND,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.other), 16, kOtherPd}}; }},
        {"one byte past the end", HWSTUB_OP_SEND,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw) + kRwLen - 10, 11, kRw}}; }},
        {"starts past the end", HWSTUB_OP_WRITE,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw) + kRwLen + 1, 0, kRw}}; }},
        {"one byte before the start", HWSTUB_OP_SEND,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw) - 1, 2, kRw}}; }},
        {"length 2^32-1", HWSTUB_OP_WRITE,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw), 0xffffffffu, kRw}}; }},
        {"addr + length wraps 2^64 (VA-based)", HWSTUB_OP_SEND,
         [](const Rig &) { return std::vector{hwstub_sge{UINT64_MAX - 15, 32, kRw}}; }},
        {"addr + length wraps 2^64 (zero-based)", HWSTUB_OP_SEND,
         [](const Rig &) { return std::vector{hwstub_sge{UINT64_MAX - 15, 32, kZero}}; }},
        {"zero-based offset past the end", HWSTUB_OP_SEND,
         [](const Rig &) { return std::vector{hwstub_sge{kSmallLen - 4, 8, kZero}}; }},
        {"second SGE bad, first good", HWSTUB_OP_SEND,
         [](const Rig &r) {
             return std::vector{hwstub_sge{va(r.rw), 100, kRw}, hwstub_sge{va(r.other), 100, kOtherPd}};
         }},
        {"Read sink without local write", HWSTUB_OP_READ,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.ro), 64, kRo}}; }},
        {"Read sink past the end", HWSTUB_OP_READ,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw) + kRwLen - 32, 64, kRw}}; }},
        {"Read sink in another PD", HWSTUB_OP_READ,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.other), 64, kOtherPd}}; }},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.what);
        Rig r;
        ASSERT_NO_FATAL_FAILURE(r.start());
        hwstub_send_wqe w = wqe(2, c.opcode);
        const auto sges = c.sges(r);
        w.num_sge = static_cast<uint8_t>(sges.size());
        w.remote_stag = kPeerStag;
        w.length = sges[0].length;
        ASSERT_TRUE(r.victim->put_send(wqe(1, HWSTUB_OP_NOP)));
        std::vector<uint8_t> bytes(sizeof w + sges.size() * sizeof(hwstub_sge));
        std::memcpy(bytes.data(), &w, sizeof w);
        std::memcpy(bytes.data() + sizeof w, sges.data(), sges.size() * sizeof(hwstub_sge));
        ASSERT_TRUE(r.victim->put_send(bytes.data(), bytes.size()));
        ASSERT_TRUE(r.victim->put_send(wqe(3, HWSTUB_OP_NOP, 0)));
        r.publish();
        const auto got = r.cqes(3);
        ASSERT_EQ(got.size(), 3u);
        EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
        EXPECT_EQ(got[1].wr_id, 2u);
        EXPECT_EQ(got[1].status, RI_WC_LOC_PROT_ERR);
        EXPECT_EQ(got[2].status, RI_WC_WR_FLUSH_ERR);
        r.expect_victim_failed();
        EXPECT_TRUE(r.peer->received().empty());
        EXPECT_EQ(r.victim->sq.done(), r.victim->sq.produced());
        ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
        r.expect_canaries();
    }
}

TEST(HwstubScribble, LocalInvalidateOfAForgedOrForeignStagFailsAndAnInvalidatedStagIsRefusedAfterwards) {
    for (uint32_t stag : {0xdead00u, kOtherPd}) {
        SCOPED_TRACE(stag);
        hwstub_send_wqe w = wqe(2, HWSTUB_OP_LOCAL_INV);
        w.inv_stag = stag;
        expect_send_refused("Local Invalidate", RI_WC_LOC_PROT_ERR, w, {});
    }
    // A valid Local Invalidate succeeds; the STag it invalidated is then a forged one.
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    hwstub_send_wqe inv = wqe(1, HWSTUB_OP_LOCAL_INV);
    inv.inv_stag = kZero;
    ASSERT_NO_FATAL_FAILURE(r.post(inv));
    hwstub_send_wqe send = wqe(2, HWSTUB_OP_SEND);
    send.num_sge = 1;
    ASSERT_NO_FATAL_FAILURE(r.post(send, {hwstub_sge{0, 16, kZero}}));
    const auto got = r.cqes(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
    EXPECT_EQ(got[0].opcode, HWSTUB_CQE_LOCAL_INV);
    EXPECT_EQ(got[1].status, RI_WC_LOC_PROT_ERR);
    r.expect_victim_failed();
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

// A fast registration the consumer forged in its send ring: an STag nobody allocated, no pages, rights nobody knows,
// or an allocated STag over memory of another PD's region. Each fails the QP, and the STag maps nothing.
TEST(HwstubScribble, AForgedFastRegistrationMapsNothingOutsideTheQpsRegisteredMemory) {
    constexpr uint32_t kAllocated = 0x4400;
    constexpr uint32_t kWrite = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE;
    auto forged = [](uint64_t addr, uint64_t pages, uint32_t access) {
        hwstub_send_wqe w = wqe(2, HWSTUB_OP_FAST_REG);
        w.inv_stag = kAllocated;
        w.remote_stag = kAllocated | 1;
        w.operand[0] = addr;
        w.operand[1] = pages;
        w.bind_length = 64;
        w.bind_access = access;
        return w;
    };
    expect_send_refused("an STag nobody allocated", RI_WC_LOC_QP_OP_ERR, forged(0x10000, 1, kWrite), {});
    expect_send_refused("no pages", RI_WC_LOC_QP_OP_ERR, forged(0x10000, 0, kWrite), {});
    expect_send_refused("rights nobody knows", RI_WC_LOC_QP_OP_ERR, forged(0x10000, 1, 0x8000), {});
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    r.a.oe->stags().add_allocated(kAllocated, 1, 4);
    ASSERT_NO_FATAL_FAILURE(r.post(forged(va(r.other), 1, kWrite)));
    const auto got = r.cqes(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, RI_WC_LOC_QP_OP_ERR) << "memory of another PD's region";
    EXPECT_EQ(got[0].opcode, HWSTUB_CQE_FAST_REG);
    hwstub::StagEntry e;
    EXPECT_FALSE(r.a.oe->stags().find(kAllocated | 1, e)) << "the new key names nothing";
    ASSERT_TRUE(r.a.oe->stags().find(kAllocated, e));
    EXPECT_FALSE(e.valid) << "the allocated STag maps nothing";
    r.expect_victim_failed();
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

// The Terminate of a refused WQE: wqe_failed() aborts the stream and puts the QP in ERROR in the same pass, so the
// Terminate must be built and written when flush() tears the stream down (before that was done, the socket closed
// with the Terminate never built and the peer saw only the end of the stream).
TEST(HwstubScribble, ARefusedWqeMakesTheStreamSendATerminate) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    ASSERT_NO_FATAL_FAILURE(r.post(wqe(1, 0x42)));
    ASSERT_EQ(r.cqes(1).size(), 1u);
    ASSERT_TRUE(wait_until([&] { return r.peer->ended(); }));
    const auto t = r.peer->terminate();
    ASSERT_TRUE(t.has_value()) << "the peer saw the stream end without a Terminate";
    EXPECT_EQ(t->code, iwarp::term::kRdmapLocalCatastrophic);
}

TEST(HwstubScribble, MalformedReceiveWqesFailInTheirPlaceAfterTheReceivesBeforeThemAreFlushed) {
    struct Case {
        const char *what;
        uint8_t status;
        uint32_t num_sge;
        std::function<std::vector<hwstub_sge>(const Rig &)> sges;
    };
    const std::vector<Case> cases = {
        {"num_sge over max_recv_sge", RI_WC_LOC_QP_OP_ERR, 3,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw), 8, kRw}}; }},
        {"num_sge 2^32-1", RI_WC_LOC_QP_OP_ERR, 0xffffffffu, [](const Rig &) { return std::vector<hwstub_sge>{}; }},
        {"forged lkey", RI_WC_LOC_PROT_ERR, 1,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.rw), 8, 0x77777777}}; }},
        {"read-only region", RI_WC_LOC_PROT_ERR, 1,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.ro), 8, kRo}}; }},
        {"another PD", RI_WC_LOC_PROT_ERR, 1,
         [](const Rig &r) { return std::vector{hwstub_sge{va(r.other), 8, kOtherPd}}; }},
        {"past the end", RI_WC_LOC_PROT_ERR, 2,
         [](const Rig &r) {
             return std::vector{hwstub_sge{va(r.rw), 8, kRw}, hwstub_sge{va(r.rw) + kRwLen - 8, 9, kRw}};
         }},
        {"wraps 2^64", RI_WC_LOC_PROT_ERR, 1, [](const Rig &) { return std::vector{hwstub_sge{UINT64_MAX, 2, kZero}}; }},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.what);
        Rig r;
        ASSERT_NO_FATAL_FAILURE(r.start());
        ASSERT_TRUE(r.victim->put_recv(10, 1, {hwstub_sge{va(r.rw), 100, kRw}}));
        ASSERT_TRUE(r.victim->put_recv(11, 1, {hwstub_sge{va(r.rw) + 100, 100, kRw}}));
        const auto sges = c.sges(r);
        ASSERT_TRUE(r.victim->put_recv(12, c.num_sge, {}));
        // put_recv() takes an initializer list; write this case's SGEs into the slot it just filled.
        uint8_t *slot = r.victim->setup.rq.slot(r.victim->rq.produced() - 1);
        for (size_t i = 0; i < sges.size(); ++i) {
            std::memcpy(slot + sizeof(hwstub_recv_wqe) + i * sizeof(hwstub_sge), &sges[i], sizeof(hwstub_sge));
        }
        ASSERT_TRUE(r.victim->put_recv(13, 1, {hwstub_sge{va(r.rw) + 200, 100, kRw}}));
        r.publish();
        const auto got = r.cqes(4);
        ASSERT_EQ(got.size(), 4u);
        const uint64_t ids[] = {10, 11, 12, 13};
        for (size_t i = 0; i < 4; ++i) {
            EXPECT_EQ(got[i].wr_id, ids[i]);
            EXPECT_EQ(got[i].opcode, HWSTUB_CQE_RECV);
            EXPECT_EQ(got[i].status, i == 2 ? c.status : static_cast<uint8_t>(RI_WC_WR_FLUSH_ERR)) << i;
        }
        r.expect_victim_failed();
        // The peer's Send after the failure finds no receive: nothing is placed anywhere.
        (void)r.peer->send(std::vector<uint8_t>(64, 0xee), 1);
        std::this_thread::sleep_for(20ms);
        EXPECT_EQ(std::count(r.rw, r.rw + 300, 0xee), 0);
        ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
        r.expect_canaries();
    }
}

TEST(HwstubScribble, AnInvalidInboundSegmentGetsATerminateAndLeavesTheConsumersMemoryAlone) {
    // The peer writes to the consumer's region with a tagged offset whose end wraps 2^64, then past its end.
    for (uint64_t to : {UINT64_MAX - 10, uint64_t{kRwLen - 8}}) {
        SCOPED_TRACE(to);
        Rig r;
        ASSERT_NO_FATAL_FAILURE(r.start());
        // Zero-based at 0 so that the tagged offsets above are relative to the region's start.
        const uint32_t access = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE;
        r.a.oe->stags().add(kRw, {va(r.rw), kRwLen, 0, access, 1, true});
        ASSERT_TRUE(r.victim->put_recv(10, 1, {hwstub_sge{0, 100, kRw}}));
        r.publish();
        std::vector<uint8_t> data(64, 0xab);
        iwarp::WorkRequest wr;
        wr.wr_id = 5;
        wr.type = iwarp::WorkType::write;
        wr.sge[0] = iwarp::LocalSpan{data.data(), data.size()};
        wr.num_sge = 1;
        wr.remote_stag = kRw;
        wr.remote_to = to;
        ASSERT_TRUE(r.peer->post(wr));
        ASSERT_TRUE(wait_until([&] { return r.peer->terminate().has_value(); })) << "no Terminate from the QP";
        EXPECT_EQ(r.peer->terminate()->code.etype, 0x1) << "a remote protection error";
        EXPECT_TRUE(r.a.wait_event(RI_AE_QP_LOCAL_ACCESS_ERROR, kVictim));
        EXPECT_EQ(r.a.state(kVictim), static_cast<uint32_t>(RI_QPS_ERROR));
        const auto got = r.cqes(1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].status, RI_WC_WR_FLUSH_ERR);
        EXPECT_EQ(std::count(r.rw, r.rw + kRwLen, 0xab), 0) << "nothing of the bad Write was placed";
        r.register_regions();  // the bystander's Send names the region VA-based
        ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
        r.expect_canaries();
    }
}

// Not a scribble, but this file's rig: an offload RNIC sizes its FPDUs by the connection's MSS as it is now, not as
// the kAL read it at the transition (here 1460, the rig's LLP parameters; the loopback's MSS is 32 KiB and up). The
// first MiB goes in 1454-octet ULPDUs, the rest in far fewer, larger ones; every byte arrives.
TEST(HwstubStream, FpdusFollowTheConnectionsMss) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    constexpr size_t kBig = 4u << 20;
    constexpr uint32_t kBigStag = 0x4300, kPeerBig = 0x902;
    std::vector<uint8_t> src(kBig);
    for (size_t i = 0; i < kBig; ++i) src[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
    r.a.oe->stags().add(kBigStag, {va(src.data()), kBig, va(src.data()), RI_ACCESS_LOCAL_READ, 1, true});
    r.peer->add_region(kPeerBig, kBig, RI_ACCESS_REMOTE_WRITE);
    const iwarp::EngineStats before = r.peer->stats();
    hwstub_send_wqe w = wqe(9, HWSTUB_OP_WRITE);
    w.num_sge = 1;
    w.remote_stag = kPeerBig;
    w.remote_to = 0;
    r.post(w, {hwstub_sge{va(src.data()), static_cast<uint32_t>(kBig), kBigStag}});
    const auto got = r.cqes(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
    ASSERT_TRUE(wait_until([&] { return r.peer->stats().rx_bytes - before.rx_bytes >= kBig; }));
    EXPECT_TRUE(r.peer->region_bytes(kPeerBig) == src) << "the Write arrived whole";
    const uint64_t fpdus = r.peer->stats().rx_fpdus - before.rx_fpdus;
    constexpr uint64_t kSmall = 1454 - iwarp::kTaggedHeaderLen;  // payload of an FPDU for an MSS of 1460
    EXPECT_LT(fpdus, (kBig / 2) / kSmall) << "the FPDUs never grew past the transition's MSS";
    EXPECT_GT(fpdus, (1u << 20) / kSmall - 64) << "the first MiB keeps the transition's size";
}

// A region deregistered while an RDMA Write from it is still on its way: the adapter checks every DMA against the
// STag table (as a chip's translation table does), so not one byte is read from the memory after the
// deregistration returned (here it is overwritten at once, as freed memory may be). The Write cannot finish: the
// QP terminates its stream and fails, and the peer holds only bytes read before.
TEST(HwstubScribble, ARegionDeregisteredWithAWriteInFlightIsNeverReadAgain) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    constexpr size_t kBig = 16u << 20;  // more than the socket buffers hold while the peer is paused
    constexpr uint32_t kBigStag = 0x4200, kPeerBig = 0x901;
    std::vector<uint8_t> src(kBig, 0x5a);
    r.a.oe->stags().add(kBigStag, {va(src.data()), kBig, va(src.data()), RI_ACCESS_LOCAL_READ, 1, true});
    r.peer->add_region(kPeerBig, kBig, RI_ACCESS_REMOTE_WRITE);
    r.peer->pause(true);
    const uint64_t sent_before = r.a.oe->stats().tx_bytes.load();
    hwstub_send_wqe w = wqe(9, HWSTUB_OP_WRITE);
    w.num_sge = 1;
    w.remote_stag = kPeerBig;
    w.remote_to = 0;
    r.post(w, {hwstub_sge{va(src.data()), static_cast<uint32_t>(kBig), kBigStag}});
    // The Write is under way (on a busy machine a fixed wait could end before the engine fetched it, and the
    // WQE would then fail at its fetch without a byte sent); the paused peer keeps it from finishing.
    ASSERT_TRUE(wait_until([&] { return r.a.oe->stats().tx_bytes.load() - sent_before >= (64u << 10); }))
        << "the engine never started the Write";
    r.a.oe->stags().remove(kBigStag);  // what the kVP's deregistration does
    r.a.oe->quiesce();
    std::fill(src.begin(), src.end(), 0xee);
    r.peer->pause(false);
    ASSERT_TRUE(wait_until([&] { return r.peer->terminate().has_value(); })) << "no Terminate from the QP";
    EXPECT_EQ(r.a.state(kVictim), static_cast<uint32_t>(RI_QPS_ERROR));
    const auto got = r.cqes(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 9u);
    EXPECT_NE(got[0].status, RI_WC_SUCCESS);
    const std::vector<uint8_t> placed = r.peer->region_bytes(kPeerBig);
    ASSERT_EQ(placed.size(), kBig);
    EXPECT_EQ(std::count(placed.begin(), placed.end(), 0xee), 0) << "bytes read after the deregistration";
    EXPECT_GT(std::count(placed.begin(), placed.end(), 0x5a), 0) << "nothing was moved before it";
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
}

TEST(HwstubScribble, AReceiveQueueProducerBeyondAnEmptyRingFailsTheQpAndNothingIsRead) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    hwstub::word(r.victim->rq_ctrl->producer).store(16 + 1, std::memory_order_release);
    r.a.bell.ring();
    r.expect_victim_failed();
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(r.cq.drain().empty()) << "nothing of an overrun ring is read, so nothing completes";
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

// A producer index beyond the ring while receives are checked and not retired: the QP fails, and the flush that
// retires the checked receives does not make the rest of the claimed index look valid again (the engine once read
// fifteen slots nobody posted here): nothing past what was posted is read.
TEST(HwstubScribble, AReceiveQueueProducerBeyondTheRingFailsTheQpAndNothingPastTheRingIsRead) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    ASSERT_TRUE(r.victim->put_recv(10, 1, {hwstub_sge{va(r.rw), 100, kRw}}));
    ASSERT_TRUE(r.victim->put_recv(11, 1, {hwstub_sge{va(r.rw) + 100, 100, kRw}}));
    r.publish();
    // The consumer claims one WQE more than the ring holds beyond what the engine has released.
    std::this_thread::sleep_for(20ms);  // the engine checks them as they are posted
    hwstub::word(r.victim->rq_ctrl->producer).store(16 + 1, std::memory_order_release);
    r.a.bell.ring();
    r.expect_victim_failed();
    const auto got = r.cqes(2);
    ASSERT_EQ(got.size(), 2u) << "the two receives checked before are flushed; nothing else is read";
    EXPECT_EQ(got[0].wr_id, 10u);
    EXPECT_EQ(got[1].wr_id, 11u);
    for (const auto &c : got) EXPECT_EQ(c.status, RI_WC_WR_FLUSH_ERR);
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(r.cq.drain().empty());
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

TEST(HwstubScribble, AFullSendRingIsFineAndOneWqeMoreThanTheDepthFailsTheQp) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    // Exactly the depth, published at once: all complete.
    for (uint64_t i = 0; i < 16; ++i) ASSERT_TRUE(r.victim->put_send(wqe(i, HWSTUB_OP_NOP)));
    r.publish();
    const auto full = r.cqes(16);
    ASSERT_EQ(full.size(), 16u);
    for (const auto &c : full) EXPECT_EQ(c.status, RI_WC_SUCCESS);
    ASSERT_TRUE(wait_until([&] { return r.victim->sq.done() == 16; }));
    // Then 17 more at once: one more than the ring can hold.
    hwstub::word(r.victim->sq_ctrl->producer).store(16 + 17, std::memory_order_release);
    r.a.bell.ring();
    r.expect_victim_failed();
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(r.cq.drain().empty()) << "nothing of an overrun ring is read, so nothing completes";
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

TEST(HwstubScribble, AProducerIndexMovedBehindWhatTheEngineReleasedFailsTheQp) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(r.victim->put_send(wqe(i, HWSTUB_OP_NOP)));
    r.publish();
    ASSERT_EQ(r.cqes(4).size(), 4u);
    ASSERT_TRUE(wait_until([&] { return r.victim->sq.done() == 4; }));
    hwstub::word(r.victim->sq_ctrl->producer).store(1, std::memory_order_release);  // 3 behind
    r.a.bell.ring();
    r.expect_victim_failed();
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(r.cq.drain().empty()) << "no WQE is executed twice";
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

// A receive queue producer index moved backwards over receives the engine already fetched (4 posted, then 2): a
// scribbled control block, which fails the QP like a producer beyond the ring, instead of letting the engine read
// slots nobody published.
TEST(HwstubScribble, AReceiveProducerMovedBackwardsOverPostedWorkFailsTheQp) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(r.victim->put_recv(10 + i, 1, {hwstub_sge{va(r.rw) + 100 * i, 100, kRw}}));
    r.publish();
    std::this_thread::sleep_for(20ms);  // the engine checks them as they are posted
    hwstub::word(r.victim->rq_ctrl->producer).store(2, std::memory_order_release);
    r.a.bell.ring();
    std::this_thread::sleep_for(20ms);
    for (uint64_t i = 0; i < 6; ++i) (void)r.peer->send(std::vector<uint8_t>(8, 0x5a), i);
    (void)wait_until([&] { return r.a.state(kVictim) == RI_QPS_ERROR; }, 1000ms);
    std::vector<hwstub_cqe> got;
    (void)wait_until([&] {
        for (const auto &c : r.cq.drain()) got.push_back(c);
        return got.size() >= 6;
    }, 1000ms);
    for (const auto &c : got) {
        EXPECT_TRUE(c.wr_id >= 10 && c.wr_id < 14) << "a completion for a receive never posted: wr_id " << c.wr_id;
    }
    EXPECT_EQ(r.a.state(kVictim), static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_EQ(r.a.count_events(RI_AE_QP_FATAL, kVictim), 1u);
    r.expect_canaries();
}

// The same on the send queue: with an RDMA Read outstanding and three NOPs behind it fetched and not retired, a
// producer index moved from 20 back to 18 fails the QP; old NOPs left in the ring are never executed again.
TEST(HwstubScribble, ASendProducerMovedBackwardsOverWorkInFlightFailsTheQp) {
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    for (uint64_t i = 0; i < 16; ++i) ASSERT_TRUE(r.victim->put_send(wqe(1000 + i, HWSTUB_OP_NOP)));
    r.publish();
    ASSERT_EQ(r.cqes(16).size(), 16u);
    ASSERT_TRUE(wait_until([&] { return r.victim->sq.done() == 16; }));
    r.peer->pause(true);
    hwstub_send_wqe read = wqe(1, HWSTUB_OP_READ);
    read.num_sge = 1;
    read.remote_stag = kPeerStag;
    read.length = 64;
    ASSERT_TRUE(r.victim->put_send(read, {hwstub_sge{va(r.rw), 64, kRw}}));
    for (uint64_t i = 2; i < 5; ++i) ASSERT_TRUE(r.victim->put_send(wqe(i, HWSTUB_OP_NOP)));
    r.publish();
    std::this_thread::sleep_for(20ms);
    hwstub::word(r.victim->sq_ctrl->producer).store(18, std::memory_order_release);
    r.a.bell.ring();
    std::this_thread::sleep_for(50ms);
    r.peer->pause(false);
    (void)wait_until([&] { return r.a.state(kVictim) == RI_QPS_ERROR; }, 1000ms);
    std::vector<hwstub_cqe> got;
    (void)wait_until([&] {
        for (const auto &c : r.cq.drain()) got.push_back(c);
        return false;
    }, 200ms);
    for (const auto &c : got) EXPECT_LT(c.wr_id, 1000u) << "an old WQE was executed again";
    EXPECT_EQ(r.a.state(kVictim), static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_EQ(r.a.count_events(RI_AE_QP_FATAL, kVictim), 1u);
    r.expect_canaries();
}

TEST(HwstubScribble, AGarbageCqConsumerIndexIsAnOverflowEventNotACrash) {
    for (uint32_t consumer : {0x80000000u, 5u, 1000u}) {  // each ahead of the engine's producer (0)
        SCOPED_TRACE(consumer);
        Rig r;
        ASSERT_NO_FATAL_FAILURE(r.start());
        hwstub::word(r.cq.ctrl->consumer).store(consumer, std::memory_order_release);
        r.cq.ctrl->arm_seq = 0x12345;  // and an arm that was never made
        r.cq.ctrl->arm_solicited = 0xdeadbeef;
        for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(r.victim->put_send(wqe(i, HWSTUB_OP_NOP)));
        r.publish();
        ASSERT_TRUE(r.a.wait_event(RI_AE_CQ_OVERFLOW, kVictimCq));
        ASSERT_TRUE(wait_until([&] { return r.victim->sq.done() == 8; })) << "the WQEs still complete";
        std::this_thread::sleep_for(20ms);
        EXPECT_EQ(r.a.count_events(RI_AE_CQ_OVERFLOW, kVictimCq), 1u) << "raised once";
        EXPECT_NE(r.cq.ctrl->overflow, 0u);
        for (const auto &c : r.cq.ring) EXPECT_EQ(c.owner, 0) << "a full CQ is not written";
        ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
        r.expect_canaries();
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Random bytes in whole WQE slots, with a model of the checks the engine documents as the oracle.

// What the engine must make of one send WQE.
enum class Verdict { ok, op_err, prot_err };

// The consumer's regions as the model sees them.
struct ModelRegion {
    uint64_t addr, iova, length;
    uint32_t access, pd;
    bool valid = true;
};

class Model {
public:
    Model(const Rig &r, Shape shape) : shape_(shape) {
        constexpr uint32_t all = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                 RI_ACCESS_REMOTE_WRITE;
        regions_[kRw] = {va(r.rw), va(r.rw), kRwLen, all, 1};
        regions_[kZero] = {va(r.zero), 0, kSmallLen, all, 1};
        regions_[kRo] = {va(r.ro), va(r.ro), kSmallLen, RI_ACCESS_LOCAL_READ | RI_ACCESS_REMOTE_READ, 1};
        regions_[kOtherPd] = {va(r.other), va(r.other), kSmallLen, all, 2};
    }
    void reset() {
        for (auto &[k, v] : regions_) v.valid = true;
    }
    // The hardware checks of hwstub_hw.h and offload_engine.hpp, written from their text, on a whole slot; the
    // effect of a Local Invalidate that passes is applied.
    Verdict judge(const uint8_t *slot) {
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        if (w.opcode < HWSTUB_OP_SEND || w.opcode > HWSTUB_OP_NOP) return Verdict::op_err;
        if ((w.flags & ~0x1fu) != 0) return Verdict::op_err;
        const bool inl = (w.flags & HWSTUB_WQE_INLINE) != 0;
        if (inl) {
            if (w.num_sge != 0 || w.inline_len > shape_.max_inline || 64u + w.inline_len > shape_.sq_slot) {
                return Verdict::op_err;
            }
            if (w.opcode != HWSTUB_OP_SEND && w.opcode != HWSTUB_OP_SEND_INV && w.opcode != HWSTUB_OP_WRITE) {
                return Verdict::op_err;
            }
        } else {
            if (w.num_sge > shape_.max_send_sge || w.num_sge > iwarp::kMaxSge ||
                64u + 16u * w.num_sge > shape_.sq_slot) {
                return Verdict::op_err;
            }
        }
        if (w.opcode == HWSTUB_OP_NOP) return Verdict::ok;
        if (w.opcode == HWSTUB_OP_LOCAL_INV) {
            auto it = regions_.find(w.inv_stag);
            if (it == regions_.end() || !it->second.valid || it->second.pd != 1) return Verdict::prot_err;
            it->second.valid = false;
            return Verdict::ok;
        }
        if (inl) return Verdict::ok;
        const uint32_t need = w.opcode == HWSTUB_OP_READ ? RI_ACCESS_LOCAL_WRITE : RI_ACCESS_LOCAL_READ;
        for (uint32_t i = 0; i < w.num_sge; ++i) {
            hwstub_sge g{};
            std::memcpy(&g, slot + sizeof w + i * sizeof g, sizeof g);
            auto it = regions_.find(g.lkey);
            if (it == regions_.end() || !it->second.valid || it->second.pd != 1) return Verdict::prot_err;
            const ModelRegion &m = it->second;
            if ((m.access & need) != need) return Verdict::prot_err;
            // [addr, addr + length) inside [iova, iova + region length), computed without overflow.
            if (g.addr < m.iova) return Verdict::prot_err;
            const uint64_t off = g.addr - m.iova;
            if (off > m.length || g.length > m.length - off) return Verdict::prot_err;
        }
        return Verdict::ok;
    }
    // Whether the model's region for @p lkey can be read by the engine (for the generator).
    std::map<uint32_t, ModelRegion> regions_;

private:
    Shape shape_;
};

// A send WQE slot for the random test: a third pure random bytes, the rest a plausible WQE with one or two fields
// made wrong (or none), so that both the checks and the data path are reached.
// A tame slot (every other batch) is a signalled Send, Write, Read or NOP with one or two SGEs in the consumer's
// read-write regions, now and then one that leaves its region: so whole batches run on the data path too.
std::vector<uint8_t> random_slot(std::mt19937_64 &rng, const Model &model, uint32_t slot_size, uint64_t wr_id,
                                 bool tame) {
    std::vector<uint8_t> slot(slot_size);
    auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    if (tame) {
        const uint8_t ops[] = {HWSTUB_OP_SEND, HWSTUB_OP_WRITE, HWSTUB_OP_READ, HWSTUB_OP_NOP};
        hwstub_send_wqe w{};
        w.wr_id = wr_id;
        w.opcode = ops[pick(4)];
        w.flags = HWSTUB_WQE_SIGNALED;
        w.remote_stag = kPeerStag;
        w.num_sge = static_cast<uint8_t>(w.opcode == HWSTUB_OP_READ ? 1 : 1 + pick(2));
        std::memcpy(slot.data(), &w, sizeof w);
        for (uint32_t i = 0; i < w.num_sge; ++i) {
            hwstub_sge g{};
            g.lkey = pick(2) == 0 ? kRw : kZero;
            const ModelRegion &m = model.regions_.at(g.lkey);
            g.length = static_cast<uint32_t>(1 + pick(512));
            g.addr = m.iova + m.length - g.length - pick(64);  // near the end of the region
            if (pick(24) == 0) g.addr += 64 + 1;               // now and then one byte or more past it
            std::memcpy(slot.data() + sizeof w + i * sizeof g, &g, sizeof g);
            if (w.opcode == HWSTUB_OP_READ) {
                w.length = g.length;
                std::memcpy(slot.data(), &w, sizeof w);
            }
        }
        return slot;
    }
    if (pick(3) == 0) {
        for (auto &b : slot) b = static_cast<uint8_t>(rng());
        return slot;
    }
    hwstub_send_wqe w{};
    w.wr_id = wr_id;
    w.opcode = static_cast<uint8_t>(pick(10) == 0 ? rng() : HWSTUB_OP_SEND + pick(6));
    w.flags = static_cast<uint8_t>(pick(2) == 0 ? HWSTUB_WQE_SIGNALED : 0);
    if (pick(8) == 0) w.flags |= static_cast<uint8_t>(HWSTUB_WQE_FENCE << pick(2));  // a fence or a read fence
    if (pick(16) == 0) w.flags |= static_cast<uint8_t>(1u << (5 + pick(3)));         // an unknown bit
    if (pick(8) == 0) w.flags |= HWSTUB_WQE_SOLICITED;
    const uint32_t stags[] = {kRw, kRw, kRw, kZero, kRo, kOtherPd, 0xdead00, static_cast<uint32_t>(rng())};
    if (w.opcode == HWSTUB_OP_LOCAL_INV) w.inv_stag = stags[pick(8)];
    w.remote_stag = pick(16) == 0 ? static_cast<uint32_t>(rng()) : kPeerStag;
    w.remote_to = pick(4);
    if (pick(4) == 0 && (w.opcode == HWSTUB_OP_SEND || w.opcode == HWSTUB_OP_WRITE)) {
        w.flags |= HWSTUB_WQE_INLINE;
        w.inline_len = static_cast<uint32_t>(pick(8) == 0 ? rng() : pick(48));
        std::memcpy(slot.data(), &w, sizeof w);
        for (size_t i = sizeof w; i < slot.size(); ++i) slot[i] = static_cast<uint8_t>(rng());
        return slot;
    }
    w.num_sge = static_cast<uint8_t>(w.opcode == HWSTUB_OP_READ ? (pick(8) == 0 ? pick(4) : 1)
                                                              : (pick(8) == 0 ? rng() : pick(3)));
    std::memcpy(slot.data(), &w, sizeof w);
    for (uint32_t i = 0; i < std::min<uint32_t>(w.num_sge, (slot_size - sizeof w) / sizeof(hwstub_sge)); ++i) {
        hwstub_sge g{};
        g.lkey = stags[pick(8)];
        auto it = model.regions_.find(g.lkey);
        const uint64_t base = it == model.regions_.end() ? rng() : it->second.iova;
        const uint64_t len = it == model.regions_.end() ? 4096 : it->second.length;
        switch (pick(6)) {
            case 0: g.addr = base + pick(len); g.length = static_cast<uint32_t>(len - (g.addr - base)); break;  // to the end
            case 1: g.addr = base + len - pick(4); g.length = static_cast<uint32_t>(pick(8)); break;  // around the end
            case 2: g.addr = base - pick(4); g.length = static_cast<uint32_t>(pick(16)); break;       // around the start
            case 3: g.addr = UINT64_MAX - pick(64); g.length = static_cast<uint32_t>(pick(128)); break;  // wraps
            default: g.addr = base + pick(len / 2); g.length = static_cast<uint32_t>(pick(2048)); break;
        }
        if (pick(32) == 0) g.length = static_cast<uint32_t>(rng());
        if (w.opcode == HWSTUB_OP_READ) {
            hwstub_send_wqe fix{};
            std::memcpy(&fix, slot.data(), sizeof fix);
            fix.length = g.length;
            std::memcpy(slot.data(), &fix, sizeof fix);
        }
        std::memcpy(slot.data() + sizeof w + i * sizeof g, &g, sizeof g);
    }
    return slot;
}

TEST(HwstubScribble, ThousandsOfRandomSendWqeSlotsEndInDocumentedStatusesAndNeverTouchOtherMemory) {
    constexpr int kWqes = 4096;
    const Shape shape{4, 48, 256};
    Rig r(shape);
    ASSERT_NO_FATAL_FAILURE(r.start());
    Model model(r, shape);
    std::mt19937_64 rng(20261125);
    uint32_t next_qp = 100;
    int posted = 0, failed_qps = 0, successes = 0, op_errs = 0, prot_errs = 0;
    uint64_t wr_id = 1;
    while (posted < kWqes) {
        // One ring's worth, published at once.
        model.reset();
        r.register_regions();
        std::vector<std::vector<uint8_t>> slots;
        std::vector<Verdict> verdicts;
        for (int i = 0; i < 16; ++i) {
            slots.push_back(random_slot(rng, model, shape.sq_slot, wr_id++, (posted / 16) % 2 == 1));
            verdicts.push_back(model.judge(slots.back().data()));
            ASSERT_TRUE(r.victim->put_send(slots.back().data(), slots.back().size()));
        }
        model.reset();
        posted += 16;
        r.publish();
        ASSERT_TRUE(wait_until([&] { return r.victim->sq.done() == r.victim->sq.produced(); }))
            << "the batch did not finish: done " << r.victim->sq.done() << " of " << r.victim->sq.produced();
        const auto got = r.cq.drain();
        // The CQEs come in posting order: walk both. Once a WQE is refused, everything after it is flushed; WQEs
        // before it that were still in flight are flushed too (so a refusal may follow flushed CQEs), and once
        // anything is flushed nothing succeeds any more.
        size_t c = 0;
        bool refused = false;  // a WQE before this one was refused by the checks
        bool flushed = false;  // a WQE before this one was flushed (the QP is going down)
        for (size_t i = 0; i < slots.size(); ++i) {
            hwstub_send_wqe w{};
            std::memcpy(&w, slots[i].data(), sizeof w);
            const bool signaled = (w.flags & HWSTUB_WQE_SIGNALED) != 0;
            const bool local = w.opcode == HWSTUB_OP_NOP || w.opcode == HWSTUB_OP_LOCAL_INV;
            SCOPED_TRACE("WQE " + std::to_string(i) + " opcode " + std::to_string(w.opcode));
            if (c < got.size() && got[c].wr_id == w.wr_id) {
                const hwstub_cqe &e = got[c++];
                EXPECT_EQ(e.qp_num, r.victim->setup.qp_num);
                switch (e.status) {
                    case RI_WC_SUCCESS:
                        // A NOP or Local Invalidate the engine executes at once may be done before an earlier
                        // request in flight is flushed: it keeps its success.
                        EXPECT_FALSE(refused || (flushed && !local)) << "success after the QP went down";
                        EXPECT_EQ(verdicts[i], Verdict::ok);
                        ++successes;
                        break;
                    case RI_WC_LOC_QP_OP_ERR:
                        EXPECT_FALSE(refused) << "a second refusal: it should have been flushed";
                        EXPECT_EQ(verdicts[i], Verdict::op_err);
                        refused = true;
                        ++op_errs;
                        break;
                    case RI_WC_LOC_PROT_ERR:
                        EXPECT_FALSE(refused) << "a second refusal: it should have been flushed";
                        EXPECT_EQ(verdicts[i], Verdict::prot_err);
                        refused = true;
                        ++prot_errs;
                        break;
                    case RI_WC_WR_FLUSH_ERR: flushed = true; break;
                    default: ADD_FAILURE() << "status " << int{e.status}; break;
                }
            } else {
                // No CQE: only an unsignalled WQE that succeeded, before the QP went down (or a local one done
                // before an earlier request in flight was flushed).
                EXPECT_FALSE(refused || (flushed && !local)) << "a flushed or refused WQE completes, signalled or not";
                EXPECT_FALSE(signaled) << "a signalled WQE without its CQE";
                EXPECT_EQ(verdicts[i], Verdict::ok);
            }
        }
        EXPECT_EQ(c, got.size()) << "CQEs for WQEs never posted";
        ASSERT_FALSE(HasFailure()) << "after " << posted << " WQEs";
        ASSERT_EQ(r.arena_.damaged(), -1) << "a byte outside registered memory was written, after " << posted;
        if (r.a.state(r.victim->setup.qp_num) == RI_QPS_ERROR) {
            // A fresh QP and stream for the next batch (the ERROR QP goes, its peer with it).
            ++failed_qps;
            ASSERT_RI_OK(r.a.oe->remove_qp(r.victim->setup.qp_num));
            r.peer.reset();
            r.victim = std::make_unique<HostQp>(next_qp++, 16, shape.sq_slot, kVictimCq);
            r.victim->setup.max_send_sge = shape.max_send_sge;
            r.victim->setup.max_inline = shape.max_inline;
            ASSERT_RI_OK(r.a.oe->add_qp(r.victim->setup));
            ASSERT_NO_FATAL_FAILURE(r.connect(r.victim->setup.qp_num, r.peer));
        }
    }
    std::printf("random send WQEs: %d posted, %d succeeded with a CQE, %d LOC_QP_OP_ERR, %d LOC_PROT_ERR, %d QPs "
                "failed\n", posted, successes, op_errs, prot_errs, failed_qps);
    EXPECT_GT(successes, 50) << "the generator should reach the data path";
    EXPECT_GT(op_errs, 50);
    EXPECT_GT(prot_errs, 20);
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
    r.expect_canaries();
}

TEST(HwstubScribble, RandomReceiveWqesAreCheckedAndInboundSendsLandOnlyInsideTheirSges) {
    constexpr int kBatches = 160;
    Rig r;
    ASSERT_NO_FATAL_FAILURE(r.start());
    std::mt19937_64 rng(77);
    auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
    const uint32_t stags[] = {kRw, kRw, kRw, kZero, kRo, kOtherPd, 0xdead00};
    const std::map<uint32_t, std::pair<uint64_t, uint64_t>> where = {  // iova, length
        {kRw, {va(r.rw), kRwLen}}, {kZero, {0, kSmallLen}}, {kRo, {va(r.ro), kSmallLen}},
        {kOtherPd, {va(r.other), kSmallLen}}};
    uint32_t next_qp = 200;
    int placed = 0, refused = 0;
    for (int b = 0; b < kBatches; ++b) {
        SCOPED_TRACE(b);
        std::memset(r.rw, 0, kRwLen);
        std::memset(r.zero, 0, kSmallLen);
        // Up to 4 receive WQEs; remember which are valid (the model) and their SGEs.
        const int n = 1 + static_cast<int>(pick(4));
        int first_bad = -1;
        uint8_t bad_status = 0;
        std::vector<std::vector<std::pair<uint8_t *, uint32_t>>> spans(n);  // where each valid one's bytes go
        for (int i = 0; i < n; ++i) {
            uint8_t *slot = r.victim->rq.next();
            ASSERT_NE(slot, nullptr);
            if (pick(6) == 0) {
                for (uint32_t k = 0; k < 64; ++k) slot[k] = static_cast<uint8_t>(rng());
            } else {
                std::memset(slot, 0, 64);
                hwstub_recv_wqe w{};
                w.num_sge = static_cast<uint32_t>(pick(10) == 0 ? 3 : pick(3));
                std::memcpy(slot, &w, sizeof w);
                for (uint32_t k = 0; k < std::min(w.num_sge, 3u); ++k) {
                    hwstub_sge g{};
                    g.lkey = stags[pick(7)];
                    auto it = where.find(g.lkey);
                    const uint64_t base = it == where.end() ? rng() : it->second.first;
                    const uint64_t len = it == where.end() ? 64 : it->second.second;
                    // 64 bytes per SGE, at the start, in the middle, at the very end or one past it.
                    const uint64_t offs[] = {0, len / 2 + 64 * k, len - 64, len - 63};
                    g.addr = base + offs[pick(4)];
                    g.length = 64;
                    std::memcpy(slot + sizeof w + k * sizeof g, &g, sizeof g);
                }
            }
            hwstub_recv_wqe w{};
            std::memcpy(&w, slot, sizeof w);
            w.wr_id = 5000 + static_cast<uint64_t>(b) * 8 + static_cast<uint64_t>(i);
            std::memcpy(slot, &w, sizeof w);
            // The model: num_sge within max_recv_sge (2), every SGE writable memory of PD 1 inside its region.
            uint8_t status = RI_WC_SUCCESS;
            if (w.num_sge > 2) {
                status = RI_WC_LOC_QP_OP_ERR;
            } else {
                for (uint32_t k = 0; k < w.num_sge && status == RI_WC_SUCCESS; ++k) {
                    hwstub_sge g{};
                    std::memcpy(&g, slot + sizeof w + k * sizeof g, sizeof g);
                    auto it = where.find(g.lkey);
                    if (it == where.end() || g.lkey == kRo || g.lkey == kOtherPd || g.addr < it->second.first ||
                        g.addr - it->second.first > it->second.second ||
                        g.length > it->second.second - (g.addr - it->second.first)) {
                        status = RI_WC_LOC_PROT_ERR;
                    } else {
                        uint8_t *base = g.lkey == kZero ? r.zero : r.rw;
                        spans[i].emplace_back(base + (g.addr - it->second.first), g.length);
                    }
                }
            }
            if (status != RI_WC_SUCCESS && first_bad < 0) {
                first_bad = i;
                bad_status = status;
            }
            r.victim->rq.advance();
        }
        r.publish();
        if (first_bad < 0) {
            // All valid: the peer fills each with a Send of its whole capacity, a distinct byte per receive, one
            // at a time (receives of one batch may overlap; each is checked before the next Send lands).
            for (int i = 0; i < n; ++i) {
                size_t cap = 0;
                for (const auto &sp : spans[i]) cap += sp.second;
                ASSERT_TRUE(r.peer->send(std::vector<uint8_t>(cap, static_cast<uint8_t>(0x80 + i)), 1));
                const auto got = r.cqes(1);
                ASSERT_EQ(got.size(), 1u);
                EXPECT_EQ(got[0].wr_id, 5000 + static_cast<uint64_t>(b) * 8 + static_cast<uint64_t>(i));
                EXPECT_EQ(got[0].status, RI_WC_SUCCESS);
                EXPECT_EQ(got[0].byte_len, cap);
                for (const auto &[p, len] : spans[i]) {
                    EXPECT_EQ(std::count(p, p + len, static_cast<uint8_t>(0x80 + i)), static_cast<long>(len))
                        << "receive " << i << " not placed where its SGE says";
                }
                ++placed;
            }
        } else {
            const auto got = r.cqes(static_cast<size_t>(n));
            ASSERT_EQ(got.size(), static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) {
                EXPECT_EQ(got[i].status, i == first_bad ? bad_status : static_cast<uint8_t>(RI_WC_WR_FLUSH_ERR))
                    << "receive " << i;
            }
            ++refused;
            EXPECT_TRUE(r.a.wait_event(RI_AE_QP_FATAL, r.victim->setup.qp_num));
            ASSERT_RI_OK(r.a.oe->remove_qp(r.victim->setup.qp_num));
            r.peer.reset();
            r.victim = std::make_unique<HostQp>(next_qp++, 16, 128, kVictimCq);
            ASSERT_RI_OK(r.a.oe->add_qp(r.victim->setup));
            ASSERT_NO_FATAL_FAILURE(r.connect(r.victim->setup.qp_num, r.peer));
        }
        ASSERT_FALSE(HasFailure());
        ASSERT_EQ(r.arena_.damaged(), -1) << "a byte outside registered memory was written";
    }
    std::printf("random receive WQEs: %d filled by inbound Sends, %d batches refused\n", placed, refused);
    EXPECT_GT(placed, 20);
    EXPECT_GT(refused, 20);
    ASSERT_NO_FATAL_FAILURE(r.expect_bystander_served());
}

}  // namespace
