// The progress thread and its epoll set.
#include "progress.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "queue_pair.hpp"

namespace softrnic::datapath {
namespace {

std::mutex &instance_mutex() {
    static std::mutex m;
    return m;
}
Progress *&instance_ptr() {
    static Progress *p = nullptr;
    return p;
}

void erase_all(std::vector<QueuePair *> &v, QueuePair *qp) { v.erase(std::remove(v.begin(), v.end(), qp), v.end()); }

// std::push_heap and friends build a max-heap: the earliest deadline on top.
bool later(const std::pair<std::chrono::steady_clock::time_point, QueuePair *> &a,
           const std::pair<std::chrono::steady_clock::time_point, QueuePair *> &b) {
    return a.first > b.first;
}

}  // namespace

Progress &Progress::get() {
    std::lock_guard g(instance_mutex());
    Progress *&p = instance_ptr();
    if (p == nullptr) {
        // A forked child that makes QPs of its own (a server's child serving its connection) needs a thread of its
        // own: the parent's does not exist there.
        static const int registered = ::pthread_atfork(nullptr, nullptr, &Progress::forget_in_child);
        (void)registered;
        p = new Progress;
    }
    return *p;
}

void Progress::forget_in_child() noexcept {
    instance_ptr() = nullptr;  // the parent's object stays, untouched: its thread and streams are the parent's
    new (&instance_mutex()) std::mutex();  // a thread of the parent may have held it at the fork
}

void Progress::shutdown() {
    Progress *p = nullptr;
    {
        std::lock_guard g(instance_mutex());
        p = std::exchange(instance_ptr(), nullptr);
    }
    delete p;
}

Progress::Progress() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_ >= 0 && wake_ >= 0) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = nullptr;  // the wake-up descriptor
        (void)::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    }
}

Progress::~Progress() {
    if (thread_.joinable()) {
        {
            std::lock_guard g(mutex_);
            stop_ = true;
        }
        const uint64_t one = 1;
        (void)!::write(wake_, &one, sizeof one);
        thread_.join();
    }
    if (wake_ >= 0) ::close(wake_);
    if (epoll_ >= 0) ::close(epoll_);
}

ri_status_t Progress::add(QueuePair *qp, int fd) {
    if (epoll_ < 0 || wake_ < 0) return RI_ENOMEM;
    std::lock_guard g(mutex_);
    if (!thread_.joinable()) {
        thread_ = std::thread([this] { run(); });
        ::pthread_setname_np(thread_.native_handle(), "softrnic-prog");  // for top -H, perf and gdb
        thread_id_.store(thread_.get_id());
    }
    epoll_event ev{};
    // Edge-triggered: no epoll_ctl per send or receive; the QP reads until the socket is empty.
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = qp;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) return errno == ENOMEM ? RI_ENOMEM : RI_EBADF;
    watched_.insert(qp);
    return RI_OK;
}

bool Progress::interest(QueuePair *qp, int fd, bool input, bool output, bool in_set) {
    if (!input && !output) {
        if (in_set) (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        return false;
    }
    epoll_event ev{};
    ev.events = EPOLLRDHUP | EPOLLET | (input ? static_cast<uint32_t>(EPOLLIN) : 0u) |
                (output ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.ptr = qp;
    // The QP holds fd open while it asks. A failed add (no memory for the entry) leaves the stream to its
    // consumer's polls and the thread's millisecond look, which asks again.
    return ::epoll_ctl(epoll_, in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) == 0 || in_set;
}

void Progress::parked(QueuePair *qp) {
    if (std::find(parked_.begin(), parked_.end(), qp) == parked_.end()) parked_.push_back(qp);
}

void Progress::remove_locked(QueuePair *qp, int fd) {
    if (fd >= 0) (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    watched_.erase(qp);
    erase_all(again_, qp);
    erase_all(parked_, qp);
    if (std::erase_if(timers_, [qp](const Deadline &d) { return d.second == qp; }) > 0) {
        std::make_heap(timers_.begin(), timers_.end(), later);
    }
    {
        std::lock_guard k(kick_lock_);
        erase_all(kicked_, qp);
        std::erase_if(asked_, [qp](const Deadline &d) { return d.second == qp; });
    }
    ++generation_;
}

void Progress::remove(QueuePair *qp, int fd) {
    if (on_thread()) {
        remove_locked(qp, fd);  // the thread holds mutex_ while it serves
        return;
    }
    std::lock_guard g(mutex_);  // waits for the pass that may be using qp
    remove_locked(qp, fd);
}

void Progress::kick(QueuePair *qp) {
    if (on_thread()) {
        again_.push_back(qp);
        return;
    }
    {
        std::lock_guard k(kick_lock_);
        kicked_.push_back(qp);
    }
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
}

void Progress::look_at_parked() {
    if (on_thread()) {
        look_.store(true, std::memory_order_relaxed);  // the pass under way looks next
        return;
    }
    look_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
}

void Progress::timer(QueuePair *qp, std::chrono::steady_clock::time_point when) {
    if (on_thread()) {
        timers_.emplace_back(when, qp);
        std::push_heap(timers_.begin(), timers_.end(), later);
        return;
    }
    bool sooner = false;
    {
        std::lock_guard k(kick_lock_);
        asked_.emplace_back(when, qp);
        sooner = when < wakes_at_;
    }
    // The thread wakes by itself no later than wakes_at_ and then takes the timers asked for: only an earlier
    // deadline needs the eventfd (a connection setup used to wake the thread once for each nudge timer).
    if (sooner) {
        const uint64_t one = 1;
        (void)!::write(wake_, &one, sizeof one);
    }
}

int Progress::next_wait(bool more) {
    std::lock_guard k(kick_lock_);
    merge_timers_locked();
    const int ms = wait_ms(more);
    wakes_at_ = ms < 0 ? std::chrono::steady_clock::time_point::max()
                       : std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    return ms;
}

void Progress::merge_timers() {
    std::lock_guard k(kick_lock_);
    merge_timers_locked();
}

void Progress::merge_timers_locked() {
    for (const Deadline &d : asked_) {
        timers_.push_back(d);
        std::push_heap(timers_.begin(), timers_.end(), later);
    }
    asked_.clear();
}

void Progress::run_timers() {
    const auto now = std::chrono::steady_clock::now();
    while (!timers_.empty() && timers_.front().first <= now) {
        std::pop_heap(timers_.begin(), timers_.end(), later);
        QueuePair *qp = timers_.back().second;
        timers_.pop_back();
        if (watched_.count(qp) == 0) continue;
        // nudge_due() may send, and a failure it meets may remove the QP (and its timers) right here.
        if (auto next = qp->nudge_due(now); next && watched_.count(qp) != 0) {
            timers_.emplace_back(*next, qp);
            std::push_heap(timers_.begin(), timers_.end(), later);
        }
    }
}

int Progress::wait_ms(bool more) const {
    if (more) return 0;
    int ms = parked_.empty() ? -1 : 1;
    if (!timers_.empty()) {
        const auto left = timers_.front().first - std::chrono::steady_clock::now();
        // Rounded up: a wait that ends before the deadline would only spin until it.
        const auto up = std::chrono::ceil<std::chrono::milliseconds>(left).count();
        const int t = up <= 0 ? 0 : static_cast<int>(std::min<int64_t>(up, 60'000));
        ms = ms < 0 ? t : std::min(ms, t);
    }
    return ms;
}

void Progress::run() {
    constexpr int kEvents = 64;
    epoll_event events[kEvents];
    std::vector<QueuePair *> again;
    uint64_t seen = 0;
    bool more = false;
    // While a consumer busy-polls a parked stream, the thread wakes every millisecond to see whether it still does
    // (a stream nobody moves must get its input edges back soon); otherwise it sleeps until an edge. Timers (the
    // nudge) shorten the wait to the earliest deadline. The wait is worked out while the thread still holds mutex_
    // (a removal from another thread edits timers_ under it).
    int wait = -1;
    {
        std::lock_guard g(mutex_);
        seen = generation_;
        wait = next_wait(false);
    }
    auto last_look = std::chrono::steady_clock::now();
    for (;;) {
        const int n = ::epoll_wait(epoll_, events, kEvents, wait);
        std::lock_guard g(mutex_);
        if (stop_) return;
        const bool asked = look_.exchange(false, std::memory_order_acquire);
        if (!parked_.empty()) {
            const auto now = std::chrono::steady_clock::now();
            if (asked || now - last_look >= std::chrono::milliseconds(1)) {
                last_look = now;
                // recheck_park gives a stream its input back (its pending bytes raise an edge at once) or keeps
                // it parked; a QP removed since was erased from parked_ by the removal.
                std::erase_if(parked_, [](QueuePair *qp) { return !qp->recheck_park(); });
            }
        }
        // A removal since the last pass may have freed a QP whose event this wait still returned.
        const bool check = generation_ != seen;
        for (int i = 0; i < n; ++i) {
            auto *qp = static_cast<QueuePair *>(events[i].data.ptr);
            if (qp == nullptr) {
                uint64_t count;
                (void)!::read(wake_, &count, sizeof count);
                continue;
            }
            if (check && watched_.count(qp) == 0) continue;
            qp->service();
        }
        {
            std::lock_guard k(kick_lock_);
            again_.insert(again_.end(), kicked_.begin(), kicked_.end());
            kicked_.clear();
        }
        merge_timers();
        if (!timers_.empty()) run_timers();
        // Served once per pass each, so one busy stream cannot starve the others; a service may queue it again.
        again.swap(again_);
        std::sort(again.begin(), again.end());
        again.erase(std::unique(again.begin(), again.end()), again.end());
        for (size_t i = 0; i < again.size(); ++i) {
            // A QP served earlier in this pass may have removed itself (and a later one with it): check.
            if (watched_.count(again[i]) != 0) again[i]->service();
        }
        again.clear();
        more = !again_.empty() || look_.load(std::memory_order_relaxed);
        seen = generation_;
        wait = next_wait(more);
    }
}

}  // namespace softrnic::datapath
