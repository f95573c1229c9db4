// hwstub's host interface on its own: work queues, completion queues with owner bits, arms and the doorbell, in one
// process and between two processes sharing a memfd (the uVP and the offload engine's arrangement).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "host_queues.hpp"
#include "hw_queues.hpp"

namespace {

using hwstub::CqReader;
using hwstub::CqWriter;
using hwstub::Doorbell;
using hwstub::DoorbellWait;
using hwstub::RingGeometry;
using hwstub::WqConsumer;
using hwstub::WqProducer;

TEST(HwstubFormats, SlotSizesArePowersOfTwoThatHoldTheWqe) {
    EXPECT_EQ(hwstub_sq_slot_size(0, 0), 64u);
    EXPECT_EQ(hwstub_sq_slot_size(1, 0), 128u);
    EXPECT_EQ(hwstub_sq_slot_size(4, 0), 128u);
    EXPECT_EQ(hwstub_sq_slot_size(5, 0), 256u);
    EXPECT_EQ(hwstub_sq_slot_size(1, 200), 512u);
    EXPECT_EQ(hwstub_rq_slot_size(1), 64u);
    EXPECT_EQ(hwstub_rq_slot_size(3), 64u);
    EXPECT_EQ(hwstub_rq_slot_size(4), 128u);
    EXPECT_EQ(offsetof(hwstub_wq_ctrl, consumer), HWSTUB_CACHE_LINE);
    EXPECT_EQ(offsetof(hwstub_cq_ctrl, producer), HWSTUB_CACHE_LINE);
}

// RFC 7306 requests as the host formats them (the WQE the engine reads) and their CQEs as the host reports them;
// what the verbs forbid is refused at post, before anything reaches the adapter.
TEST(HwstubFormats, Rfc7306RequestsAndTheirCompletions) {
    uint8_t slot[256] = {};
    hwstub_send_wqe w{};
    ri_sge_t sink{0x1000, 8, 0x55};
    ri_send_wr_t wr{};
    wr.wr_id = 9;
    wr.opcode = RI_WR_ATOMIC_CMP_SWAP;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = &sink;
    wr.num_sge = 1;
    wr.u.atomic.remote_addr = 0x2008;
    wr.u.atomic.rkey = 0x77;
    wr.u.atomic.compare_add = 5;
    wr.u.atomic.swap = 6;
    ASSERT_EQ(hwstub::format_send(wr, slot, sizeof slot, 0, 4), RI_OK);
    std::memcpy(&w, slot, sizeof w);
    EXPECT_EQ(w.opcode, HWSTUB_OP_ATOMIC_CSWAP);
    EXPECT_EQ(w.remote_stag, 0x77u);
    EXPECT_EQ(w.remote_to, 0x2008u);
    EXPECT_EQ(w.operand[0], 5u);
    EXPECT_EQ(w.operand[1], 6u);
    EXPECT_EQ(w.num_sge, 1u);
    // The verbs' rules: one 8-byte sink, a 64-bit aligned target, nothing inline.
    for (auto bad : {+[](ri_send_wr_t &x) { x.u.atomic.remote_addr += 4; },
                     +[](ri_send_wr_t &x) { const_cast<ri_sge_t *>(x.sgl)->length = 4; },
                     +[](ri_send_wr_t &x) { x.flags |= RI_SEND_INLINE; },
                     +[](ri_send_wr_t &x) { x.num_sge = 2; }}) {
        ri_send_wr_t x = wr;
        ri_sge_t two[2] = {sink, sink};
        x.sgl = two;
        bad(x);
        EXPECT_EQ(hwstub::format_send(x, slot, sizeof slot, 0, 4), RI_EINVAL);
    }
    // A Write with immediate data: the Write's fields, the value in operand[0], the solicited flag.
    ri_sge_t data{0x3000, 100, 0x55};
    ri_send_wr_t wi{};
    wi.opcode = RI_WR_RDMA_WRITE_IMM;
    wi.flags = RI_SEND_SOLICITED;
    wi.sgl = &data;
    wi.num_sge = 1;
    wi.u.rdma.remote_addr = 0x4000;
    wi.u.rdma.rkey = 0x88;
    wi.u.rdma.imm_data = 0xfeedf00du;
    ASSERT_EQ(hwstub::format_send(wi, slot, sizeof slot, 0, 4), RI_OK);
    std::memcpy(&w, slot, sizeof w);
    EXPECT_EQ(w.opcode, HWSTUB_OP_WRITE_IMM);
    EXPECT_EQ(w.operand[0], 0xfeedf00du);
    EXPECT_NE(w.flags & HWSTUB_WQE_SOLICITED, 0u);
    EXPECT_EQ(w.remote_to, 0x4000u);
    ri_send_wr_t alone = wi;
    alone.opcode = RI_WR_IMMEDIATE;
    EXPECT_EQ(hwstub::format_send(alone, slot, sizeof slot, 0, 4), RI_EINVAL) << "Immediate Data carries no payload";
    alone.num_sge = 0;
    alone.sgl = nullptr;
    EXPECT_EQ(hwstub::format_send(alone, slot, sizeof slot, 0, 4), RI_OK);
    ri_send_wr_t plain = wi;
    plain.opcode = RI_WR_RDMA_WRITE;
    EXPECT_EQ(hwstub::format_send(plain, slot, sizeof slot, 0, 4), RI_EINVAL) << "RI_SEND_SOLICITED on a Write";
    // Completions.
    ri_wc_t wc{};
    hwstub_cqe c{};
    c.opcode = HWSTUB_CQE_RECV_IMM;
    c.imm_data = 0xfeedf00du;
    c.byte_len = 100;
    hwstub::to_wc(c, 1, wc);
    EXPECT_EQ(wc.opcode, static_cast<uint32_t>(RI_WC_RECV_RDMA_IMM));
    EXPECT_NE(wc.flags & RI_WC_WITH_IMM, 0u);
    EXPECT_EQ(wc.imm_data, 0xfeedf00du);
    EXPECT_EQ(wc.byte_len, 100u);
    c = hwstub_cqe{};
    c.opcode = HWSTUB_CQE_WRITE_IMM;
    hwstub::to_wc(c, 1, wc);
    EXPECT_EQ(wc.opcode, static_cast<uint32_t>(RI_WC_RDMA_WRITE));
    EXPECT_NE(wc.flags & RI_WC_WITH_IMM, 0u);
    c.opcode = HWSTUB_CQE_CMP_SWAP;
    hwstub::to_wc(c, 1, wc);
    EXPECT_EQ(wc.opcode, static_cast<uint32_t>(RI_WC_ATOMIC_CMP_SWAP));
    c.opcode = HWSTUB_CQE_ATOMIC;
    hwstub::to_wc(c, 1, wc);
    EXPECT_EQ(wc.opcode, static_cast<uint32_t>(RI_WC_ATOMIC));
}

TEST(HwstubQueues, AWorkQueueHoldsItsDepthInOrderAndFreesWhatIsRetired) {
    std::vector<uint8_t> ring(8 * 64);
    hwstub_wq_ctrl ctrl{};
    const RingGeometry g{ring.data(), 8, 64};
    ASSERT_TRUE(g.valid());
    WqProducer host(g, &ctrl);
    WqConsumer oe(g, &ctrl);

    EXPECT_EQ(oe.fetch(), nullptr);
    for (uint64_t i = 0; i < 8; ++i) {
        uint8_t *slot = host.next();
        ASSERT_NE(slot, nullptr) << i;
        std::memcpy(slot, &i, sizeof i);
        host.advance();
    }
    EXPECT_EQ(host.next(), nullptr) << "full at its depth";
    EXPECT_FALSE(oe.pending()) << "nothing is visible before publish()";
    host.publish();
    ASSERT_TRUE(oe.pending());
    for (uint64_t i = 0; i < 8; ++i) {
        const uint8_t *slot = oe.fetch();
        ASSERT_NE(slot, nullptr);
        uint64_t v = 0;
        std::memcpy(&v, slot, sizeof v);
        EXPECT_EQ(v, i);
    }
    EXPECT_EQ(oe.fetch(), nullptr);
    EXPECT_EQ(host.free_slots(), 0u) << "fetched is not done";
    oe.retire(3);
    EXPECT_EQ(host.free_slots(), 3u);
    EXPECT_EQ(host.done(), 3u);
    EXPECT_EQ(oe.in_flight(), 5u);
    EXPECT_FALSE(host.in_error());
    oe.set_error();
    EXPECT_TRUE(host.in_error());
}

TEST(HwstubQueues, AProducerIndexBeyondTheRingIsAnOverrunNotAReadPastIt) {
    std::vector<uint8_t> ring(4 * 64);
    hwstub_wq_ctrl ctrl{};
    WqConsumer oe(RingGeometry{ring.data(), 4, 64}, &ctrl);
    ctrl.producer = 1000;  // a consumer scribbling over its control block
    EXPECT_EQ(oe.fetch(), nullptr);
    EXPECT_TRUE(oe.overrun());
}

TEST(HwstubQueues, CqesAreValidByOwnerBitAcrossManyPassesAndAFullCqOverflows) {
    constexpr uint32_t kDepth = 4;
    std::vector<hwstub_cqe> ring(kDepth);  // zeroed: no valid CQE
    hwstub_cq_ctrl ctrl{};
    CqWriter oe(ring.data(), kDepth, &ctrl);
    CqReader host(ring.data(), kDepth, &ctrl);
    hwstub_cqe out{};
    EXPECT_FALSE(host.poll(out));

    uint64_t next_read = 0;
    for (uint64_t id = 0; id < 37; ++id) {
        hwstub_cqe c{};
        c.wr_id = id;
        c.byte_len = static_cast<uint32_t>(id * 3);
        ASSERT_TRUE(oe.push(c)) << id;
        if (id % 3 == 2) {  // the host drains every third CQE, so the ring wraps with CQEs pending
            while (host.poll(out)) {
                EXPECT_EQ(out.wr_id, next_read);
                EXPECT_EQ(out.byte_len, next_read * 3);
                ++next_read;
            }
        }
    }
    while (host.poll(out)) ++next_read;
    EXPECT_EQ(next_read, 37u);
    EXPECT_FALSE(host.poll(out)) << "a slot from the last pass is not valid again";

    for (uint32_t i = 0; i < kDepth; ++i) ASSERT_TRUE(oe.push(hwstub_cqe{}));
    EXPECT_FALSE(host.overflowed());
    EXPECT_FALSE(oe.push(hwstub_cqe{})) << "the host has not made room";
    EXPECT_TRUE(host.overflowed());
    EXPECT_EQ(oe.occupancy(), kDepth);
}

TEST(HwstubQueues, AResizedCqKeepsWhatWaitsAndItsOwnerBitsAcrossPassesOfTheNewDepth) {
    // Six passes over a ring of 4 first, so the free-running indexes are far from 0 and the owner bits of the new
    // depth differ from the old ones for some slots.
    std::vector<hwstub_cqe> small(4), big(16), tiny(2);
    hwstub_cq_ctrl ctrl{}, ctrl2{}, ctrl3{};
    CqWriter oe(small.data(), 4, &ctrl);
    CqReader host(small.data(), 4, &ctrl);
    hwstub_cqe out{};
    uint64_t id = 0, next_read = 0;
    for (; id < 23; ++id) {
        hwstub_cqe c{};
        c.wr_id = id;
        ASSERT_TRUE(oe.push(c));
        if (id % 2 == 1) {
            while (host.poll(out)) ASSERT_EQ(out.wr_id, next_read++);
        }
    }
    for (; id < 26; ++id) {  // four wait: 22 (pushed after the last read) to 25
        hwstub_cqe c{};
        c.wr_id = id;
        ASSERT_TRUE(oe.push(c));
    }
    ASSERT_EQ(oe.occupancy(), 4u);
    host.arm(true);
    EXPECT_FALSE(oe.move_to(tiny.data(), 2, &ctrl3)) << "4 CQEs wait: a ring of 2 cannot take them";
    EXPECT_FALSE(oe.move_to(big.data(), 12, &ctrl2)) << "not a power of two";
    ASSERT_TRUE(oe.move_to(big.data(), 16, &ctrl2));
    host = CqReader(big.data(), 16, &ctrl2);  // what HostCq::switch_to() does
    EXPECT_EQ(oe.occupancy(), 4u);
    // The pending arm (solicited only) moved with the CQ.
    EXPECT_FALSE(oe.take_arm(false));
    EXPECT_TRUE(oe.take_arm(true));
    // Many passes of the new depth, the host behind by up to 16.
    for (; id < 200; ++id) {
        hwstub_cqe c{};
        c.wr_id = id;
        ASSERT_TRUE(oe.push(c)) << id;
        if (id % 7 == 0) {
            while (host.poll(out)) ASSERT_EQ(out.wr_id, next_read++) << "after the resize";
        }
    }
    while (host.poll(out)) ASSERT_EQ(out.wr_id, next_read++);
    EXPECT_EQ(next_read, 200u) << "a CQE was lost or repeated across the resize";
    EXPECT_FALSE(host.overflowed());
}

TEST(HwstubQueues, AnArmIsAnsweredOnceAndASolicitedArmWaitsForASolicitedCqe) {
    hwstub_cqe ring[2]{};
    hwstub_cq_ctrl ctrl{};
    CqWriter oe(ring, 2, &ctrl);
    CqReader host(ring, 2, &ctrl);
    EXPECT_FALSE(oe.take_arm(true)) << "not armed";
    host.arm(false);
    EXPECT_TRUE(oe.take_arm(false));
    EXPECT_FALSE(oe.take_arm(false)) << "one arm, one interrupt";
    host.arm(true);
    EXPECT_FALSE(oe.take_arm(false));
    EXPECT_TRUE(oe.take_arm(true));
}

TEST(HwstubQueues, ThePosterRingsOnlyASleepingEngine) {
    hwstub_engine_page page{};
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    Doorbell bell(&page, fd);
    DoorbellWait wait(&page, fd);
    uint64_t count = 0;

    EXPECT_FALSE(bell.ring()) << "a busy engine costs the poster no system call";
    EXPECT_LT(::read(fd, &count, sizeof count), 0);
    wait.prepare_sleep();
    EXPECT_TRUE(bell.ring());
    EXPECT_EQ(page.doorbells, 1u);
    EXPECT_EQ(page.sleeping, 2u) << "the first poster says it rang";
    EXPECT_FALSE(bell.ring()) << "a second post of the same sleep makes no system call";
    EXPECT_EQ(page.doorbells, 1u);
    EXPECT_EQ(::read(fd, &count, sizeof count), static_cast<ssize_t>(sizeof count));
    EXPECT_EQ(count, 1u) << "one eventfd write per sleep";
    wait.prepare_sleep();
    EXPECT_TRUE(bell.ring()) << "the next sleep is rung again";
    wait.awake();
    EXPECT_EQ(page.wakeups, 1u);
    EXPECT_EQ(page.doorbells, 2u);
    EXPECT_EQ(page.sleeping, 0u);
    EXPECT_LT(::read(fd, &count, sizeof count), 0) << "awake() drained the doorbell";
    EXPECT_FALSE(bell.adapter_dead());
    wait.die();
    EXPECT_TRUE(bell.adapter_dead());
    ::close(fd);
}

// The layout both processes map: the engine page, one send queue, one CQ.
struct Shared {
    hwstub_engine_page engine;
    hwstub_wq_ctrl sq_ctrl;
    hwstub_cq_ctrl cq_ctrl;
    alignas(64) uint8_t sq[64 * 64];
    hwstub_cqe cq[128];
};

// The consumer process: posts kPosts WQEs in bursts of 1 to 8, rings after each burst, and checks that every CQE
// comes back once and in order. Exit status 0 when all is well.
constexpr uint32_t kPosts = 100000;

int host_process(Shared *s, int efd) {
    ::alarm(60);  // never outlive a stuck test
    WqProducer sq(RingGeometry{s->sq, 64, 64}, &s->sq_ctrl);
    CqReader cq(s->cq, 128, &s->cq_ctrl);
    Doorbell bell(&s->engine, efd);
    uint64_t next_post = 0, next_cqe = 0;
    while (next_cqe < kPosts) {
        const uint32_t burst = 1 + static_cast<uint32_t>(next_post % 8);
        uint32_t made = 0;
        while (made < burst && next_post < kPosts && next_cqe + 128 > next_post) {
            uint8_t *slot = sq.next();
            if (slot == nullptr) break;
            hwstub_send_wqe w{};
            w.wr_id = next_post++;
            w.opcode = HWSTUB_OP_NOP;
            w.flags = HWSTUB_WQE_SIGNALED;
            std::memcpy(slot, &w, sizeof w);
            sq.advance();
            ++made;
        }
        if (made > 0) {
            sq.publish();
            bell.ring();
        }
        hwstub_cqe c{};
        while (cq.poll(c)) {
            if (c.wr_id != next_cqe || c.opcode != HWSTUB_CQE_NOP) return 2;
            ++next_cqe;
        }
        if (cq.overflowed()) return 3;
    }
    return 0;
}

TEST(HwstubQueues, TwoProcessesOnAMemfdMoveEveryRequestOnceAndInOrder) {
    const int mfd = ::memfd_create("hwstub-test", MFD_CLOEXEC);
    ASSERT_GE(mfd, 0);
    ASSERT_EQ(::ftruncate(mfd, sizeof(Shared)), 0);
    auto *s = static_cast<Shared *>(::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
    ASSERT_NE(s, MAP_FAILED);
    const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(efd, 0);

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(host_process(s, efd));

    // The offload engine: completes every WQE with a CQE, sleeps on the eventfd when there is nothing to do.
    WqConsumer sq(RingGeometry{s->sq, 64, 64}, &s->sq_ctrl);
    CqWriter cq(s->cq, 128, &s->cq_ctrl);
    DoorbellWait wait(&s->engine, efd);
    uint32_t done = 0;
    uint64_t sleeps = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool stuck = false;
    while (done < kPosts) {
        if (std::chrono::steady_clock::now() > deadline) {
            stuck = true;
            break;
        }
        const uint8_t *slot = sq.fetch();
        if (slot == nullptr) {
            ASSERT_FALSE(sq.overrun());
            wait.prepare_sleep();
            if (!sq.pending()) {
                ++sleeps;
                pollfd p{efd, POLLIN, 0};
                ::poll(&p, 1, 1000);  // a lost doorbell would show as a stall, and the deadline ends the test
            }
            wait.awake();
            continue;
        }
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        hwstub_cqe c{};
        c.wr_id = w.wr_id;
        c.opcode = HWSTUB_CQE_NOP;
        while (cq.occupancy() >= 128) std::this_thread::yield();  // the host drains; CQ sized to its window
        ASSERT_TRUE(cq.push(c));
        sq.retire();
        ++done;
    }
    int status = 0;
    if (stuck) ::kill(child, SIGKILL);
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_FALSE(stuck) << "the engine stalled after " << done << " requests";
    ASSERT_TRUE(WIFEXITED(status)) << "the consumer process died";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: a CQE out of order, 3: a CQ overflow";
    EXPECT_EQ(done, kPosts);
    // Every wait was ended by a doorbell (or the 1 s timer, which would have tripped nothing but the speed), and
    // posters rang only a sleeping engine: never more doorbells than posts.
    EXPECT_LE(s->engine.doorbells, kPosts);
    EXPECT_LE(s->engine.wakeups, s->engine.doorbells);
    RecordProperty("doorbells", std::to_string(s->engine.doorbells));
    RecordProperty("sleeps", std::to_string(sleeps));
    ::munmap(s, sizeof(Shared));
    ::close(mfd);
    ::close(efd);
}

}  // namespace
