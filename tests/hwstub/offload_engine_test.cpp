// hwstub's offload engine thread driven through its host interface, as the uVP drives it: doorbells, CQEs,
// interrupts for armed CQs, the checks on every WQE, flushing, CQ overflow and the adapter's catastrophic error; and
// a consumer in another process on a memfd, including one that scribbles over its own control block.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "hw_queues.hpp"
#include "offload_engine.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using hwstub::CqReader;
using hwstub::Doorbell;
using hwstub::OffloadEngine;
using hwstub::RingGeometry;
using hwstub::WqProducer;

constexpr uint32_t kSqDepth = 16;
constexpr uint32_t kRqDepth = 16;
constexpr uint32_t kSlot = 128;

// The memory one consumer shares with the adapter: the engine page, one QP's rings and one CQ.
struct Shared {
    hwstub_engine_page engine;
    hwstub_wq_ctrl sq_ctrl;
    hwstub_wq_ctrl rq_ctrl;
    hwstub_cq_ctrl cq_ctrl;
    alignas(64) uint8_t sq[kSqDepth * kSlot];
    alignas(64) uint8_t rq[kRqDepth * 64];
    hwstub_cqe cq[64];
};

// Shared memory (a memfd, so a forked consumer sees the same pages) and the events the engine raised.
class Adapter {
public:
    explicit Adapter(uint32_t cq_depth = 64) {
        fd_ = ::memfd_create("hwstub-oe-test", MFD_CLOEXEC);
        if (fd_ < 0 || ::ftruncate(fd_, sizeof(Shared)) != 0) return;
        void *p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) return;
        s = static_cast<Shared *>(p);
        hwstub::EngineHooks hooks;
        hooks.interrupt = [this](uint32_t cq_id) {
            std::lock_guard g(m_);
            interrupts.push_back(cq_id);
            cv_.notify_all();
        };
        hooks.async_event = [this](const ri_async_event_t &e) {
            std::lock_guard g(m_);
            events.push_back(e);
            cv_.notify_all();
        };
        oe = std::make_unique<OffloadEngine>(&s->engine, hooks);
        cq_depth_ = cq_depth;
    }
    ~Adapter() {
        oe.reset();
        if (s != nullptr) ::munmap(s, sizeof(Shared));
        if (fd_ >= 0) ::close(fd_);
    }

    // Starts the engine with one CQ (id 7) and one QP (number 3) owned by @p owner.
    void start(pid_t owner = ::getpid(), bool signal_all = false) {
        ASSERT_NE(s, nullptr);
        ASSERT_TRUE(oe->start());
        ASSERT_RI_OK(oe->add_cq({7, s->cq, cq_depth_, &s->cq_ctrl}));
        hwstub::QpSetup q;
        q.qp_num = 3;
        q.sq = RingGeometry{s->sq, kSqDepth, kSlot};
        q.sq_ctrl = &s->sq_ctrl;
        q.rq = RingGeometry{s->rq, kRqDepth, 64};
        q.rq_ctrl = &s->rq_ctrl;
        q.send_cq = 7;
        q.recv_cq = 7;
        q.max_send_sge = 2;
        q.max_recv_sge = 2;
        q.max_inline = 32;
        q.signal_all = signal_all;
        q.owner = owner;
        ASSERT_RI_OK(oe->add_qp(q));
        sq = WqProducer(RingGeometry{s->sq, kSqDepth, kSlot}, &s->sq_ctrl);
        rq = WqProducer(RingGeometry{s->rq, kRqDepth, 64}, &s->rq_ctrl);
        cq = CqReader(s->cq, cq_depth_, &s->cq_ctrl);
        bell = Doorbell(&s->engine, oe->doorbell_fd());
    }

    void post(const hwstub_send_wqe &w) {
        uint8_t *slot = sq.next();
        ASSERT_NE(slot, nullptr);
        std::memcpy(slot, &w, sizeof w);
        sq.advance();
        sq.publish();
        bell.ring();
    }
    void post_recv(uint64_t wr_id) {
        uint8_t *slot = rq.next();
        ASSERT_NE(slot, nullptr);
        hwstub_recv_wqe w{};
        w.wr_id = wr_id;
        std::memcpy(slot, &w, sizeof w);
        rq.advance();
        rq.publish();
        bell.ring();
    }
    // Polls until @p n CQEs arrived or 5 s passed.
    std::vector<hwstub_cqe> wait_cqes(size_t n) {
        std::vector<hwstub_cqe> got;
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
            hwstub_cqe c{};
            if (cq.poll(c)) {
                got.push_back(c);
            } else {
                std::this_thread::yield();
            }
        }
        return got;
    }
    bool wait_event(uint32_t event_id) {
        std::unique_lock l(m_);
        return cv_.wait_for(l, 5s, [&] {
            for (const auto &e : events) {
                if (e.event_id == event_id) return true;
            }
            return false;
        });
    }
    bool wait_interrupts(size_t n) {
        std::unique_lock l(m_);
        return cv_.wait_for(l, 5s, [&] { return interrupts.size() >= n; });
    }
    size_t count_events(uint32_t event_id) {
        std::lock_guard g(m_);
        size_t n = 0;
        for (const auto &e : events) n += e.event_id == event_id ? 1 : 0;
        return n;
    }

    Shared *s = nullptr;
    std::unique_ptr<OffloadEngine> oe;
    WqProducer sq, rq;
    CqReader cq;
    Doorbell bell;
    std::vector<uint32_t> interrupts;
    std::vector<ri_async_event_t> events;

private:
    int fd_ = -1;
    uint32_t cq_depth_ = 64;
    std::mutex m_;
    std::condition_variable cv_;
};

hwstub_send_wqe nop(uint64_t id, bool signaled = true) {
    hwstub_send_wqe w{};
    w.wr_id = id;
    w.opcode = HWSTUB_OP_NOP;
    w.flags = signaled ? HWSTUB_WQE_SIGNALED : 0;
    return w;
}

TEST(HwstubEngine, SignalledWorkCompletesInOrderAndUnsignalledWorkStillFreesItsSlots) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    for (uint64_t i = 0; i < 200; ++i) {
        while (a.sq.free_slots() == 0) std::this_thread::yield();
        ASSERT_NO_FATAL_FAILURE(a.post(nop(i, i % 4 == 3)));
        hwstub_cqe c{};
        while (a.cq.poll(c)) {
            EXPECT_EQ(c.wr_id % 4, 3u);
            EXPECT_EQ(c.status, RI_WC_SUCCESS);
            EXPECT_EQ(c.qp_num, 3u);
        }
    }
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (a.sq.done() != 200 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    EXPECT_EQ(a.sq.done(), 200u) << "the engine mirrors requests done, signalled or not";
    EXPECT_EQ(a.oe->stats().wqes.load(), 200u);
    EXPECT_EQ(a.oe->stats().cqes.load(), 50u);
    // The engine goes to sleep a moment after its last completion.
    const auto idle = std::chrono::steady_clock::now() + 5s;
    while (a.oe->stats().sleeps.load() == 0 && std::chrono::steady_clock::now() < idle) std::this_thread::yield();
    EXPECT_GT(a.oe->stats().sleeps.load(), 0u) << "an idle engine sleeps on its doorbell";
}

TEST(HwstubEngine, AnArmedCqRaisesOneInterruptPerArm) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    a.cq.arm(false);
    a.bell.ring();
    ASSERT_NO_FATAL_FAILURE(a.post(nop(1)));
    ASSERT_TRUE(a.wait_interrupts(1));
    EXPECT_EQ(a.interrupts[0], 7u);
    ASSERT_NO_FATAL_FAILURE(a.post(nop(2)));
    EXPECT_EQ(a.wait_cqes(2).size(), 2u);
    EXPECT_EQ(a.oe->stats().interrupts.load(), 1u) << "no interrupt without a new arm";
    a.cq.arm(true);  // solicited only: a NOP does not qualify
    ASSERT_NO_FATAL_FAILURE(a.post(nop(3)));
    EXPECT_EQ(a.wait_cqes(1).size(), 1u);
    EXPECT_EQ(a.oe->stats().interrupts.load(), 1u);
}

// Interrupt moderation holds an interrupt only while the engine stays busy: one completion on a quiet engine
// interrupts at once, long before the moderation window (10 s here) would let it.
TEST(HwstubEngine, AModeratedInterruptIsRaisedAtOnceWhenTheEngineGoesIdle) {
    Adapter a;
    a.oe->set_moderation(8, 10s);
    ASSERT_NO_FATAL_FAILURE(a.start());
    a.cq.arm(false);
    a.bell.ring();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(a.post(nop(1)));
    ASSERT_TRUE(a.wait_interrupts(1));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_EQ(a.wait_cqes(1).size(), 1u);
    // Still one interrupt per arm.
    ASSERT_NO_FATAL_FAILURE(a.post(nop(2)));
    EXPECT_EQ(a.wait_cqes(1).size(), 1u);
    EXPECT_EQ(a.oe->stats().interrupts.load(), 1u);
    a.cq.arm(false);
    a.bell.ring();
    ASSERT_NO_FATAL_FAILURE(a.post(nop(3)));
    ASSERT_TRUE(a.wait_interrupts(2));
}

TEST(HwstubEngine, AMalformedWqeFailsWithLocalQpOperationErrorAndFlushesTheRest) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    ASSERT_NO_FATAL_FAILURE(a.post_recv(100));
    hwstub_send_wqe bad = nop(1);
    bad.opcode = 99;  // no such opcode
    // Posted together so the engine sees them in one go: the bad one, then two that must be flushed.
    for (const auto &w : {bad, nop(2, false), nop(3)}) {
        std::memcpy(a.sq.next(), &w, sizeof w);
        a.sq.advance();
    }
    a.sq.publish();
    a.bell.ring();
    const auto got = a.wait_cqes(4);
    ASSERT_EQ(got.size(), 4u);
    size_t flushed = 0;
    bool saw_bad = false, saw_recv = false;
    for (const auto &c : got) {
        if (c.wr_id == 1) {
            saw_bad = true;
            EXPECT_EQ(c.status, RI_WC_LOC_QP_OP_ERR);
        } else {
            EXPECT_EQ(c.status, RI_WC_WR_FLUSH_ERR) << c.wr_id;
            ++flushed;
            saw_recv |= c.wr_id == 100 && c.opcode == HWSTUB_CQE_RECV;
        }
    }
    EXPECT_TRUE(saw_bad);
    EXPECT_TRUE(saw_recv) << "the receive queue is flushed too";
    EXPECT_EQ(flushed, 3u) << "a flushed request completes even unsignalled";
    EXPECT_TRUE(a.wait_event(RI_AE_QP_FATAL));
    EXPECT_TRUE(a.sq.in_error());
    // Later work is flushed as it arrives.
    ASSERT_NO_FATAL_FAILURE(a.post(nop(4)));
    const auto later = a.wait_cqes(1);
    ASSERT_EQ(later.size(), 1u);
    EXPECT_EQ(later[0].status, RI_WC_WR_FLUSH_ERR);
}

TEST(HwstubEngine, EveryFieldIsCheckedBeforeItIsUsed) {
    // Each of these WQEs alone puts a fresh QP in ERROR with RI_WC_LOC_QP_OP_ERR.
    std::vector<hwstub_send_wqe> bad;
    hwstub_send_wqe w = nop(1);
    w.flags |= 0x80;  // unknown flag
    bad.push_back(w);
    w = nop(1);
    w.opcode = HWSTUB_OP_SEND;
    w.num_sge = 3;  // over max_send_sge
    bad.push_back(w);
    w = nop(1);
    w.opcode = HWSTUB_OP_SEND;
    w.flags |= HWSTUB_WQE_INLINE;
    w.inline_len = 33;  // over max_inline
    bad.push_back(w);
    w = nop(1);
    w.opcode = 0;
    bad.push_back(w);
    for (size_t i = 0; i < bad.size(); ++i) {
        SCOPED_TRACE(i);
        Adapter a;
        ASSERT_NO_FATAL_FAILURE(a.start());
        ASSERT_NO_FATAL_FAILURE(a.post(bad[i]));
        const auto got = a.wait_cqes(1);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].status, RI_WC_LOC_QP_OP_ERR);
        EXPECT_TRUE(a.wait_event(RI_AE_QP_FATAL));
    }
}

TEST(HwstubEngine, DataWorkWaitsForTheStreamAndIsFlushedWhenTheQpFails) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    hwstub_send_wqe w = nop(9);
    w.opcode = HWSTUB_OP_WRITE;
    w.num_sge = 0;
    ASSERT_NO_FATAL_FAILURE(a.post(w));
    ASSERT_NO_FATAL_FAILURE(a.post(nop(10)));
    std::this_thread::sleep_for(50ms);
    hwstub_cqe c{};
    EXPECT_FALSE(a.cq.poll(c)) << "work posted in IDLE waits in order";
    EXPECT_EQ(a.sq.done(), 0u);
    ASSERT_RI_OK(a.oe->set_qp_error(3));
    const auto got = a.wait_cqes(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].wr_id, 9u);
    EXPECT_EQ(got[0].opcode, HWSTUB_CQE_WRITE);
    EXPECT_EQ(got[0].status, RI_WC_WR_FLUSH_ERR);
    EXPECT_EQ(got[1].wr_id, 10u);
    EXPECT_STATUS(a.oe->set_qp_error(42), RI_ENOENT);
}

TEST(HwstubEngine, AFullCqRaisesOneOverflowEvent) {
    Adapter a(2);
    ASSERT_NO_FATAL_FAILURE(a.start());
    for (uint64_t i = 0; i < 5; ++i) ASSERT_NO_FATAL_FAILURE(a.post(nop(i)));
    ASSERT_TRUE(a.wait_event(RI_AE_CQ_OVERFLOW));
    EXPECT_TRUE(a.cq.overflowed());
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(a.count_events(RI_AE_CQ_OVERFLOW), 1u);
}

TEST(HwstubEngine, ACatastrophicErrorIsRaisedOnceAndFlushesEveryQp) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    hwstub_send_wqe w = nop(1);
    w.opcode = HWSTUB_OP_READ;  // waits in IDLE
    ASSERT_NO_FATAL_FAILURE(a.post(w));
    EXPECT_FALSE(a.bell.adapter_dead());
    a.oe->fail();
    a.oe->fail();
    ASSERT_TRUE(a.wait_event(RI_AE_RNIC_FATAL));
    EXPECT_TRUE(a.bell.adapter_dead()) << "posters see the dead adapter on the engine page";
    EXPECT_TRUE(a.oe->dead());
    const auto got = a.wait_cqes(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, RI_WC_WR_FLUSH_ERR);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(a.count_events(RI_AE_RNIC_FATAL), 1u);
}

TEST(HwstubEngine, ControlOperationsCheckWhatTheyAreGiven) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    EXPECT_STATUS(a.oe->add_cq({7, a.s->cq, 64, &a.s->cq_ctrl}), RI_EEXIST);
    EXPECT_STATUS(a.oe->add_cq({8, a.s->cq, 3, &a.s->cq_ctrl}), RI_EINVAL);
    EXPECT_STATUS(a.oe->remove_cq(7), RI_EBUSY) << "a QP still completes into it";
    hwstub::QpSetup q;
    q.qp_num = 4;
    EXPECT_STATUS(a.oe->add_qp(q), RI_EINVAL);
    EXPECT_RI_OK(a.oe->remove_qp(3));
    EXPECT_STATUS(a.oe->remove_qp(3), RI_ENOENT);
    EXPECT_RI_OK(a.oe->remove_cq(7));
}

// A consumer in another process posts through the memfd; the engine in this one completes its work. A second one
// scribbles a producer index beyond its ring: its QP fails, the engine goes on.
TEST(HwstubEngine, AConsumerProcessDrivesTheEngineAndOneThatScribblesOnlyBreaksItsQp) {
    Adapter a;
    ASSERT_NO_FATAL_FAILURE(a.start());
    constexpr uint64_t kPosts = 20000;
    const pid_t poster = ::fork();
    ASSERT_GE(poster, 0);
    if (poster == 0) {
        ::alarm(30);
        uint64_t posted = 0, seen = 0;
        while (seen < kPosts) {
            while (posted < kPosts && posted < seen + 32 && a.sq.free_slots() > 0) {
                hwstub_send_wqe w = nop(posted++);
                std::memcpy(a.sq.next(), &w, sizeof w);
                a.sq.advance();
            }
            a.sq.publish();
            a.bell.ring();
            hwstub_cqe c{};
            while (a.cq.poll(c)) {
                if (c.wr_id != seen || c.status != RI_WC_SUCCESS) ::_exit(2);
                ++seen;
            }
        }
        // Now scribble: a producer index far beyond the ring.
        a.s->sq_ctrl.producer += 1000;
        a.bell.ring();
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(poster, &status, 0), poster);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: a CQE out of order or failed";
    EXPECT_TRUE(a.wait_event(RI_AE_QP_FATAL)) << "the scribbled queue put its QP in ERROR";
    EXPECT_TRUE(a.sq.in_error());
    EXPECT_FALSE(a.oe->dead()) << "the engine itself is fine";
    EXPECT_EQ(a.oe->stats().cqes.load(), kPosts);
}

}  // namespace
