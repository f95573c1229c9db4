// Event dispatchers: bounded queues with a threshold, a pollable eventfd, callbacks, and aggregation.
#include "ual/events.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include "ual/access_layer.hpp"

namespace ual {
namespace {

void raise(int fd) noexcept {
    uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
}

void drain(int fd) noexcept {
    uint64_t n;
    (void)!::read(fd, &n, sizeof n);
}

}  // namespace

namespace detail {

int LazyEventFd::want() noexcept {
    if (!fd_) {
        fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!fd_) return -1;
    }
    if (!wanted_) {
        wanted_ = true;
        // Nobody could poll it until now, so it was not kept: bring it in line.
        if (missed_) signal();
    }
    return fd_.get();
}

void LazyEventFd::signal() noexcept {
    if (!wanted_) {
        missed_ = true;
    } else if (!signaled_) {
        raise(fd_.get());
        signaled_ = true;
    }
}

void LazyEventFd::quiet() noexcept {
    missed_ = false;
    if (signaled_) {
        drain(fd_.get());
        signaled_ = false;
    }
}

}  // namespace detail

SimpleDispatcher::SimpleDispatcher(EventStream stream, uint32_t capacity, uint32_t threshold)
    : stream_(stream), threshold_(threshold == 0 ? 1 : threshold), ring_(capacity) {}

SimpleDispatcher::~SimpleDispatcher() = default;

rdma::Expected<std::shared_ptr<SimpleDispatcher>> SimpleDispatcher::create(EventStream stream, uint32_t capacity,
                                                                          uint32_t threshold) {
    if (capacity == 0 || capacity > (1u << 20)) return rdma::Error(RI_ERANGE, "queue capacity must be 1..1048576");
    if (threshold > capacity) return rdma::Error(RI_EINVAL, "the threshold exceeds the queue capacity");
    return std::shared_ptr<SimpleDispatcher>(new SimpleDispatcher(stream, capacity, threshold));
}

int SimpleDispatcher::fd() const noexcept {
    std::lock_guard lock(mutex_);
    return efd_.want();
}

std::shared_ptr<AggregateDispatcher> SimpleDispatcher::signal_fd_locked(bool &wake_waiters) {
    efd_.signal();
    wake_waiters = count_ >= threshold_;
    return aggregate_.lock();
}

bool SimpleDispatcher::post(const Event &e) noexcept {
    if (stream_ == EventStream::dto) return false;  // a DTO dispatcher's events are its CQ's completions
    Callback cb;
    Executor run;
    {
        std::unique_lock lock(mutex_);
        if (!callback_) {
            if (count_ == ring_.size()) {
                overflows_.fetch_add(1, std::memory_order_relaxed);
                return false;
            }
            ring_[(head_ + count_) % ring_.size()] = e;
            ++count_;
            // The waiters are woken after the lock is let go: woken under it, a waiter would find the mutex
            // still held and sleep again on it, and its wake-up would cost the poster one more futex call.
            // The caller holds a reference to this dispatcher, so it outlives the notification.
            bool wake_waiters = false;
            auto agg = signal_fd_locked(wake_waiters);
            auto fn = notifier_;
            auto nrun = notifier_run_;
            // A waiter reading the kAL itself sleeps in the pump, not on cv_: an event from another thread (a
            // provider's, the consumer's) wakes it there. Its own deliveries need no nudge.
            const bool nudge = leader_ != std::thread::id{} && leader_ != std::this_thread::get_id();
            lock.unlock();
            if (nudge) {
                if (auto pump = pump_.lock()) pump->nudge();
            }
            if (wake_waiters) cv_.notify_all();
            if (agg) agg->wake();
            if (!fn) return true;
            try {
                if (nrun) {
                    nrun(std::move(fn));
                } else {
                    fn();
                }
            } catch (...) {
                // As for callbacks: the consumer's code must not take the poster down.
            }
            return true;
        }
        cb = callback_;
        run = executor_;
    }
    try {
        if (run) {
            run([cb, e] { cb(e); });
        } else {
            cb(e);
        }
    } catch (...) {
        // A consumer's callback must not take the poster down with it.
    }
    return true;
}

std::optional<Event> SimpleDispatcher::take_locked() {
    if (count_ == 0) return std::nullopt;
    Event e = std::move(ring_[head_]);  // the slot lets go of a connection event's data
    head_ = (head_ + 1) % ring_.size();
    if (--count_ == 0) efd_.quiet();
    return e;
}

std::optional<Event> SimpleDispatcher::poll_cq() {
    std::lock_guard p(poll_mutex_);
    if (cq_ == nullptr) return std::nullopt;
    Event e;
    e.stream = EventStream::dto;
    auto n = cq_->poll(std::span<ri_wc_t>(&e.wc, 1));
    if (!n || *n == 0) return std::nullopt;
    e.context = e.wc.qp_context;
    return e;
}

void SimpleDispatcher::notify_completion() noexcept {
    Callback cb;
    Executor run;
    {
        std::unique_lock lock(mutex_);
        if (notifier_) {
            // Notification mode: tell the consumer, who dequeues; the CQ is armed again once it has looked.
            auto job = [self = shared_from_this(), fn = notifier_] {
                try {
                    fn();
                } catch (...) {
                }
                self->arm();
            };
            ++notifications_;
            try {
                if (notifier_run_) {
                    notifier_run_(std::move(job));
                } else {
                    job();
                }
            } catch (...) {
            }
            return;
        }
        if (!callback_) {
            ++notifications_;
            auto agg = aggregate_.lock();
            // The descriptor is raised under the lock: LazyEventFd is guarded by it, and a quiet() racing an unlocked
            // signal() lost the notification (the signal saw the flag the quiet was about to clear).
            efd_.signal();
            // Waiters are woken after the lock is dropped: a waiter woken while it is held wakes only to sleep on
            // the mutex (half a wake-up more per completion for a consumer sleeping in wait()).
            lock.unlock();
            cv_.notify_all();
            if (agg) agg->wake();
            return;
        }
        cb = callback_;
        run = executor_;
    }
    // Callback mode: hand every completion to the callback, then re-arm.
    auto drain_cq = [self = shared_from_this(), cb] {
        auto next = [&self] { return self->poll_cq(); };
        for (;;) {
            while (auto e = next()) {
                try {
                    cb(*e);
                } catch (...) {
                }
            }
            self->arm();
            // A completion between the last poll and the arming notifies nobody: look once more.
            auto late = next();
            if (!late) break;
            try {
                cb(*late);
            } catch (...) {
            }
        }
    };
    try {
        if (run) {
            run(drain_cq);
        } else {
            drain_cq();
        }
    } catch (...) {
    }
}

void SimpleDispatcher::arm() noexcept {
    CompletionQueue *cq;
    {
        std::lock_guard p(poll_mutex_);
        cq = cq_;
    }
    if (cq != nullptr) (void)cq->request_notify(RI_CQ_NOTIFY_NEXT);
}

rdma::Expected<std::optional<Event>> SimpleDispatcher::dequeue() {
    if (stream_ == EventStream::dto) {
        auto e = poll_cq();  // without mutex_ (see poll_cq)
        if (!e) {
            std::lock_guard lock(mutex_);
            efd_.quiet();
        }
        return e;
    }
    std::lock_guard lock(mutex_);
    if (uint64_t lost = overflows_.load(std::memory_order_relaxed); lost != reported_overflows_) {
        reported_overflows_ = lost;
        return rdma::Error(RI_EOVERFLOW, "the event queue overflowed: events were lost");
    }
    return take_locked();
}

rdma::Expected<Event> SimpleDispatcher::wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (stream_ == EventStream::dto) {
        // Polls never hold mutex_: a provider may notify (taking it) from inside a poll.
        for (;;) {
            uint64_t seen;
            {
                std::lock_guard lock(mutex_);
                seen = notifications_;
            }
            if (auto e = poll_cq()) return *e;
            // Arm, then look again: a completion that arrived before the arming would otherwise be missed.
            arm();
            if (auto e = poll_cq()) return *e;
            std::unique_lock lock(mutex_);
            if (!cv_.wait_until(lock, deadline, [&] { return notifications_ != seen; })) {
                lock.unlock();
                if (auto e = poll_cq()) return *e;
                return rdma::Error(RI_ETIMEDOUT, "no completion within the timeout");
            }
        }
    }
    std::unique_lock lock(mutex_);
    if (count_ < threshold_ && !callback_ && leader_ == std::thread::id{}) {
        // Leader/follower: rather than sleep until the event thread reads the kAL's record and wakes this thread,
        // read it here (one wake-up instead of two). Only one waiter of a dispatcher leads; the others sleep on
        // cv_, which the leader's deliveries notify. A pump already led by another thread says no at once.
        if (auto pump = pump_.lock()) {
            leader_ = std::this_thread::get_id();
            lock.unlock();
            (void)pump->lead(deadline, [this] {
                std::lock_guard l(mutex_);
                return count_ >= threshold_ || callback_;
            });
            pump.reset();
            lock.lock();
            leader_ = std::thread::id{};
        }
    }
    if (!cv_.wait_until(lock, deadline, [&] { return count_ >= threshold_; }) && count_ == 0) {
        return rdma::Error(RI_ETIMEDOUT, "no event within the timeout");
    }
    return *take_locked();  // at the threshold, or below it but present when the time ran out
}

void SimpleDispatcher::set_pump(const std::shared_ptr<EventPump> &pump) {
    if (stream_ == EventStream::dto) return;  // completions come from the CQ, not from the kAL's records
    std::shared_ptr<AggregateDispatcher> agg;
    {
        std::lock_guard lock(mutex_);
        pump_ = pump;
        agg = aggregate_.lock();
    }
    if (agg) agg->adopt_pump(pump);  // its waiters lead through it too
}

void SimpleDispatcher::set_callback(Callback cb, Executor run) {
    std::vector<Event> backlog;
    {
        std::lock_guard lock(mutex_);
        callback_ = std::move(cb);
        executor_ = std::move(run);
        if (!callback_) return;
        while (auto e = take_locked()) backlog.push_back(*e);
    }
    for (const Event &e : backlog) post(e);
}

void SimpleDispatcher::set_notifier(std::function<void()> fn, Executor run) {
    bool ready;
    {
        std::lock_guard lock(mutex_);
        notifier_ = std::move(fn);
        notifier_run_ = std::move(run);
        if (!notifier_) return;
        ready = count_ > 0;
    }
    if (stream_ == EventStream::dto) {
        arm();
        // Completions already in the CQ notify nobody once armed: let the consumer look now.
        ready = true;
    }
    if (ready) {
        std::function<void()> fn2;
        Executor run2;
        {
            std::lock_guard lock(mutex_);
            fn2 = notifier_;
            run2 = notifier_run_;
        }
        if (!fn2) return;
        if (run2) {
            run2(std::move(fn2));
        } else {
            fn2();
        }
    }
}

size_t SimpleDispatcher::pending() const {
    std::lock_guard lock(mutex_);
    return count_;
}

rdma::Expected<std::shared_ptr<AggregateDispatcher>> AggregateDispatcher::create() {
    return std::shared_ptr<AggregateDispatcher>(new AggregateDispatcher());
}

rdma::Expected<void> AggregateDispatcher::add(const std::shared_ptr<SimpleDispatcher> &member) {
    std::shared_ptr<EventPump> pump;
    {
        std::lock_guard m(member->mutex_);
        if (!member->aggregate_.expired()) return rdma::Error(RI_EBUSY, "the dispatcher already has an aggregate");
        member->aggregate_ = weak_from_this();
        pump = member->pump_.lock();
    }
    if (pump) adopt_pump(pump);
    std::lock_guard lock(mutex_);
    members_.push_back(member);
    wake_locked_free();
    return {};
}

void AggregateDispatcher::remove(const std::shared_ptr<SimpleDispatcher> &member) {
    {
        std::lock_guard m(member->mutex_);
        member->aggregate_.reset();
    }
    std::lock_guard lock(mutex_);
    std::erase_if(members_, [&](const std::weak_ptr<SimpleDispatcher> &w) {
        auto s = w.lock();
        return !s || s == member;
    });
}

int AggregateDispatcher::fd() const noexcept {
    std::lock_guard lock(mutex_);
    return efd_.want();
}

void AggregateDispatcher::wake_locked_free() noexcept {
    ++wakeups_;
    cv_.notify_all();
    efd_.signal();
}

void AggregateDispatcher::wake() noexcept {
    std::shared_ptr<EventPump> nudge;
    {
        std::lock_guard lock(mutex_);
        wake_locked_free();
        // A waiter reading the kAL sleeps in the pump: a member's event from another thread (a CQ's notification,
        // a post) wakes it there. Its own deliveries need no nudge.
        if (leader_ != std::thread::id{} && leader_ != std::this_thread::get_id()) nudge = pump_.lock();
    }
    if (nudge) nudge->nudge();
}

void AggregateDispatcher::adopt_pump(const std::shared_ptr<EventPump> &pump) {
    std::lock_guard lock(mutex_);
    if (pump_.expired()) pump_ = pump;
}

rdma::Expected<std::optional<Event>> AggregateDispatcher::dequeue(uint64_t *source_tag) {
    std::vector<std::shared_ptr<SimpleDispatcher>> members;
    size_t start;
    uint64_t seen;
    {
        std::lock_guard lock(mutex_);
        for (auto &w : members_) {
            if (auto s = w.lock()) members.push_back(std::move(s));
        }
        start = next_++;
        seen = wakeups_;
    }
    for (size_t i = 0; i < members.size(); ++i) {
        auto &m = members[(start + i) % members.size()];
        auto r = m->dequeue();
        if (source_tag != nullptr) *source_tag = m->tag();
        if (!r) return r.error();
        if (*r) return *r;
    }
    std::lock_guard lock(mutex_);
    // Nothing found: the descriptor goes quiet, unless a member woke it after the look began (its event may be
    // one the look passed by).
    if (wakeups_ == seen) efd_.quiet();
    return std::optional<Event>{};
}

rdma::Expected<Event> AggregateDispatcher::wait(std::chrono::milliseconds timeout, uint64_t *source_tag) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        uint64_t seen;
        {
            std::lock_guard lock(mutex_);
            seen = wakeups_;
        }
        auto r = dequeue(source_tag);
        if (!r) return r.error();
        if (*r) return **r;
        // Completion queues notify only when armed: arm them, then look once more before sleeping.
        std::vector<std::shared_ptr<SimpleDispatcher>> dto;
        {
            std::lock_guard lock(mutex_);
            for (auto &w : members_) {
                if (auto m = w.lock(); m && m->stream() == EventStream::dto) dto.push_back(std::move(m));
            }
        }
        for (auto &m : dto) m->arm();
        if (!dto.empty()) {
            r = dequeue(source_tag);
            if (!r) return r.error();
            if (*r) return **r;
        }
        std::unique_lock lock(mutex_);
        // Leader/follower, as SimpleDispatcher::wait(): read the kAL here rather than sleep until the event thread
        // has read it and wakes this thread.
        if (auto pump = pump_.lock(); pump && leader_ == std::thread::id{} && wakeups_ == seen) {
            leader_ = std::this_thread::get_id();
            lock.unlock();
            (void)pump->lead(deadline, [this, seen] {
                std::lock_guard l(mutex_);
                return wakeups_ != seen;
            });
            pump.reset();
            lock.lock();
            leader_ = std::thread::id{};
        }
        if (!cv_.wait_until(lock, deadline, [&] { return wakeups_ != seen; })) {
            return rdma::Error(RI_ETIMEDOUT, "no event within the timeout");
        }
    }
}

}  // namespace ual
