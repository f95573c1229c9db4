// The progress thread and its epoll set.
#include "progress.hpp"

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

}  // namespace

Progress &Progress::get() {
    std::lock_guard g(instance_mutex());
    Progress *&p = instance_ptr();
    if (p == nullptr) p = new Progress;
    return *p;
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

void Progress::interest(QueuePair *qp, int fd, bool input, bool output) {
    epoll_event ev{};
    ev.events = EPOLLRDHUP | EPOLLET | (input ? static_cast<uint32_t>(EPOLLIN) : 0u) |
                (output ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.ptr = qp;
    (void)::epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);  // the QP holds fd open and registered while it asks
}

void Progress::parked(QueuePair *qp) {
    if (std::find(parked_.begin(), parked_.end(), qp) == parked_.end()) parked_.push_back(qp);
}

void Progress::remove_locked(QueuePair *qp, int fd) {
    if (fd >= 0) (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    watched_.erase(qp);
    erase_all(again_, qp);
    erase_all(parked_, qp);
    {
        std::lock_guard k(kick_lock_);
        erase_all(kicked_, qp);
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

void Progress::run() {
    constexpr int kEvents = 64;
    epoll_event events[kEvents];
    std::vector<QueuePair *> again;
    uint64_t seen = 0;
    bool more = false;
    {
        std::lock_guard g(mutex_);
        seen = generation_;
    }
    auto last_look = std::chrono::steady_clock::now();
    for (;;) {
        // While a consumer busy-polls a parked stream, the thread wakes every millisecond to see whether it still
        // does (a stream nobody moves must get its input edges back soon); otherwise it sleeps until an edge.
        const int n = ::epoll_wait(epoll_, events, kEvents, more ? 0 : (parked_.empty() ? -1 : 1));
        std::lock_guard g(mutex_);
        if (stop_) return;
        if (!parked_.empty()) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last_look >= std::chrono::milliseconds(1)) {
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
        // Served once per pass each, so one busy stream cannot starve the others; a service may queue it again.
        again.swap(again_);
        std::sort(again.begin(), again.end());
        again.erase(std::unique(again.begin(), again.end()), again.end());
        for (size_t i = 0; i < again.size(); ++i) {
            // A QP served earlier in this pass may have removed itself (and a later one with it): check.
            if (watched_.count(again[i]) != 0) again[i]->service();
        }
        again.clear();
        more = !again_.empty();
        seen = generation_;
    }
}

}  // namespace softrnic::datapath
