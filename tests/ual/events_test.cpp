// The uAL's event dispatchers: queues with thresholds and overflow, pollable descriptors, callbacks on an
// executor, and aggregation across dispatchers.
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ual/events.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;

bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
}

ual::Event software(uintptr_t n) {
    ual::Event e;
    e.stream = ual::EventStream::software;
    e.software = reinterpret_cast<void *>(n);
    return e;
}

TEST(SimpleDispatcher, QueuesInOrderAndPollsReadableWhilePending) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 4);
    ASSERT_OK(d);
    auto &q = **d;
    EXPECT_FALSE(readable(q.fd()));
    EXPECT_TRUE(q.post(software(1)));
    EXPECT_TRUE(q.post(software(2)));
    EXPECT_TRUE(readable(q.fd()));
    auto a = q.dequeue();
    ASSERT_TRUE(a && *a);
    EXPECT_EQ((*a)->software, reinterpret_cast<void *>(1));
    auto b = q.dequeue();
    ASSERT_TRUE(b && *b);
    EXPECT_EQ((*b)->software, reinterpret_cast<void *>(2));
    EXPECT_FALSE(readable(q.fd()));  // drained
    auto none = q.dequeue();
    ASSERT_OK(none);
    EXPECT_FALSE(*none);
}

// The descriptor is kept only once asked for (an event costs no eventfd write before that), so one asked for late
// must already say what is waiting.
TEST(SimpleDispatcher, ADescriptorAskedForLateSaysWhatIsAlreadyQueued) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 4);
    ASSERT_OK(d);
    auto &q = **d;
    EXPECT_TRUE(q.post(software(1)));
    EXPECT_TRUE(readable(q.fd()));
    auto a = q.dequeue();
    ASSERT_TRUE(a && *a);
    EXPECT_FALSE(readable(q.fd()));
    EXPECT_TRUE(q.post(software(2)));
    EXPECT_TRUE(readable(q.fd())) << "kept in step after the first fd()";
    // A DTO dispatcher whose CQ never notified has nothing to say: not readable when first asked.
    auto dto = ual::SimpleDispatcher::create(ual::EventStream::dto, 4);
    ASSERT_OK(dto);
    EXPECT_FALSE(readable((*dto)->fd()));
}

TEST(SimpleDispatcher, OnlyADescriptorAskedForIsMade) {
    // An endpoint's own dispatcher, or a queue only ever waited on, costs no descriptor (and no eventfd/close pair
    // per connection); the first fd() makes it, later ones return the same.
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 4);
    ASSERT_OK(d);
    const int next = ::dup(0);
    ASSERT_GE(next, 0);
    ::close(next);
    auto other = ual::SimpleDispatcher::create(ual::EventStream::cm_message, 4);
    auto agg = ual::AggregateDispatcher::create();
    ASSERT_TRUE(other && agg);
    const int probe = ::dup(0);
    EXPECT_EQ(probe, next) << "creating dispatchers opened a descriptor nobody asked for";
    ::close(probe);
    const int fd = (*d)->fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ((*d)->fd(), fd);
}

TEST(AggregateDispatcher, ItsDescriptorFollowsItsMembers) {
    auto a = ual::SimpleDispatcher::create(ual::EventStream::software, 4);
    auto agg = ual::AggregateDispatcher::create();
    ASSERT_TRUE(a && agg);
    auto lone = ual::AggregateDispatcher::create();
    ASSERT_OK(lone);
    EXPECT_FALSE(readable((*lone)->fd())) << "an aggregate nobody woke";
    ASSERT_OK((*agg)->add(*a));
    (*a)->post(software(1));
    const int fd = (*agg)->fd();
    EXPECT_TRUE(readable(fd)) << "an event posted before fd() was asked for";
    auto got = (*agg)->dequeue();
    ASSERT_TRUE(got && *got);
    auto none = (*agg)->dequeue();
    ASSERT_OK(none);
    EXPECT_FALSE(*none);
    EXPECT_FALSE(readable(fd)) << "a dequeue that finds nothing quiets it";
    (*a)->post(software(2));
    EXPECT_TRUE(readable(fd));
}

TEST(SimpleDispatcher, OverflowDropsAndIsReportedOnce) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 2);
    ASSERT_OK(d);
    auto &q = **d;
    EXPECT_TRUE(q.post(software(1)));
    EXPECT_TRUE(q.post(software(2)));
    EXPECT_FALSE(q.post(software(3)));
    EXPECT_EQ(q.overflows(), 1u);
    auto r = q.dequeue();
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_EOVERFLOW);
    auto next = q.dequeue();  // reported once; the queued events are still there
    ASSERT_TRUE(next && *next);
    EXPECT_EQ((*next)->software, reinterpret_cast<void *>(1));
}

TEST(SimpleDispatcher, DtoDispatchersTakeNoPostedEvents) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::dto, 4);
    ASSERT_OK(d);
    EXPECT_FALSE((*d)->post(software(1)));
    auto none = (*d)->dequeue();  // no CQ bound yet: nothing, and no error
    ASSERT_OK(none);
    EXPECT_FALSE(*none);
}

TEST(SimpleDispatcher, BadSizesAreRefused) {
    EXPECT_STATUS(ual::SimpleDispatcher::create(ual::EventStream::software, 0), RI_ERANGE);
    EXPECT_STATUS(ual::SimpleDispatcher::create(ual::EventStream::software, 2, 3), RI_EINVAL);
}

TEST(SimpleDispatcher, WaitHonoursThresholdAndTimeout) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 8, 3);
    ASSERT_OK(d);
    auto q = *d;
    auto t0 = std::chrono::steady_clock::now();
    auto r = q->wait(50ms);
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_ETIMEDOUT);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 45ms);
    std::thread poster([q] {
        for (uintptr_t i = 1; i <= 3; ++i) {
            std::this_thread::sleep_for(5ms);
            q->post(software(i));
        }
    });
    auto got = q->wait(5s);  // wakes only when three are queued
    poster.join();
    ASSERT_OK(got);
    EXPECT_EQ(got->software, reinterpret_cast<void *>(1));
    EXPECT_EQ(q->pending(), 2u);
    // Below the threshold but present when the time runs out: returned, not lost.
    ASSERT_OK(q->dequeue());
    auto last = q->wait(20ms);
    ASSERT_OK(last);
    EXPECT_EQ(last->software, reinterpret_cast<void *>(3));
}

TEST(SimpleDispatcher, CallbacksRunOnTheExecutorAndTakeTheBacklog) {
    auto d = ual::SimpleDispatcher::create(ual::EventStream::software, 8);
    ASSERT_OK(d);
    auto q = *d;
    q->post(software(1));
    std::atomic<int> calls{0}, ran_on_executor{0};
    std::vector<std::thread> workers;
    std::mutex m;
    auto executor = [&](std::function<void()> job) {
        std::lock_guard lock(m);
        workers.emplace_back([job = std::move(job), &ran_on_executor] {
            ++ran_on_executor;
            job();
        });
    };
    q->set_callback([&](const ual::Event &) { ++calls; }, executor);
    q->post(software(2));
    for (int i = 0; i < 500 && calls < 2; ++i) std::this_thread::sleep_for(1ms);
    {
        std::lock_guard lock(m);
        for (auto &t : workers) t.join();
    }
    EXPECT_EQ(calls.load(), 2);
    EXPECT_EQ(ran_on_executor.load(), 2);
    EXPECT_EQ(q->pending(), 0u);
    q->set_callback({});
    q->post(software(3));
    EXPECT_EQ(q->pending(), 1u);  // back to queuing
}

TEST(AggregateDispatcher, WaitsOnEveryMember) {
    auto a = ual::SimpleDispatcher::create(ual::EventStream::software, 4);
    auto b = ual::SimpleDispatcher::create(ual::EventStream::cm_message, 4);
    auto agg = ual::AggregateDispatcher::create();
    ASSERT_TRUE(a && b && agg);
    ASSERT_OK((*agg)->add(*a));
    ASSERT_OK((*agg)->add(*b));
    auto other = ual::AggregateDispatcher::create();
    EXPECT_STATUS((*other)->add(*a), RI_EBUSY);  // one aggregate per dispatcher
    auto r = (*agg)->wait(20ms);
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_ETIMEDOUT);
    auto member = *b;
    std::thread poster([member] {
        std::this_thread::sleep_for(10ms);
        ual::Event e;
        e.stream = ual::EventStream::cm_message;
        e.id = 42;
        member->post(e);
    });
    auto got = (*agg)->wait(5s);
    poster.join();
    ASSERT_OK(got);
    EXPECT_EQ(got->stream, ual::EventStream::cm_message);
    EXPECT_EQ(got->id, 42u);
    (*agg)->remove(*a);
    (*a)->post(software(1));
    auto none = (*agg)->dequeue();
    ASSERT_OK(none);
    EXPECT_FALSE(*none);  // a removed member is not visited
    EXPECT_OK((*other)->add(*a));
}

}  // namespace
