// Completion queues: the ring, notification, and inline progress from an empty poll.
#include "completion_queue.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "progress.hpp"
#include "queue_pair.hpp"

namespace softrnic::datapath {
namespace {

// Queue pairs one empty poll drives (round robin): enough for a latency-bound consumer, bounded for a CQ shared by
// many streams, whose progress thread serves the rest.
constexpr size_t kInlinePerPoll = 4;

}  // namespace

bool CompletionQueue::add(const ri_wc_t &wc) noexcept {
    std::lock_guard g(lock_);
    if (ring_.full()) {
        overflow_ = true;
        return false;
    }
    std::memcpy(ring_.next(), &wc, sizeof wc);
    ring_.push();
    idle_.store(false, std::memory_order_release);
    const uint32_t armed = armed_.load(std::memory_order_relaxed);
    const bool fire = armed == RI_CQ_NOTIFY_NEXT ||
                      (armed == RI_CQ_NOTIFY_SOLICITED &&
                       ((wc.flags & RI_WC_SOLICITED) != 0 || wc.status != RI_WC_SUCCESS));
    if (fire) armed_.store(0, std::memory_order_relaxed);
    return fire;
}

bool CompletionQueue::take(uint32_t max, ri_wc_t *wc, uint32_t &n) noexcept {
    std::lock_guard g(lock_);
    while (n < max && !ring_.empty()) {
        std::memcpy(&wc[n++], ring_.front(), sizeof(ri_wc_t));
        ring_.pop();
    }
    if (ring_.empty() && !overflow_) idle_.store(true, std::memory_order_relaxed);
    return n == 0 && overflow_;
}

ri_status_t CompletionQueue::poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) {
    if (polled == nullptr || (wc == nullptr && max > 0)) return RI_EINVAL;
    uint32_t n = 0;
    bool lost = !idle_.load(std::memory_order_acquire) && take(max, wc, n);
    if (n == 0 && max > 0) {
        // Nothing yet: move the streams of this CQ along right here instead of waiting for the progress thread.
        std::unique_lock g(qps_mutex_, std::try_to_lock);
        if (g.owns_lock() && !qps_.empty()) {
            const size_t count = std::min(qps_.size(), kInlinePerPoll);
            const bool many = qps_.size() > count;
            const uint64_t poll = ++polls_;
            size_t busy = 0;
            size_t served = 0;
            if (many && recent_ != nullptr) {
                if (!recent_->try_service(*this, poll)) ++busy;
                ++served;
            }
            for (; served < count; ++served) {
                next_ = next_ % qps_.size();
                QueuePair *qp = qps_[next_++];
                if (many && qp == recent_) continue;  // served first (its turn still counts)
                bool moved = false;
                if (!qp->try_service(*this, poll, &moved)) ++busy;
                if (moved) recent_ = qp;
            }
            // Every stream served by another thread (the progress thread, usually): that thread may have lost its
            // CPU while holding the QP, and spinning only keeps it off (with more spinning pollers than cores, for
            // a whole scheduler time slice). Let it run, at once: on two cores with two spinning pollers, waiting
            // even 64 such polls let a preempted progress thread hold a QP for milliseconds.
            const bool yield = busy == count;
            g.unlock();
            lost = !idle_.load(std::memory_order_acquire) && take(max, wc, n);
            if (yield && n == 0) sched_yield();
        }
    }
    *polled = n;
    // Once the consumer has everything that fitted, it learns that completions were lost.
    return lost ? RI_EOVERFLOW : RI_OK;
}

ri_status_t CompletionQueue::request_notify(uint32_t type) noexcept {
    if (type != RI_CQ_NOTIFY_NEXT && type != RI_CQ_NOTIFY_SOLICITED) return RI_EINVAL;
    {
        std::lock_guard g(lock_);
        // A solicited request does not weaken an armed "next".
        if (armed_.load(std::memory_order_relaxed) != RI_CQ_NOTIFY_NEXT) armed_.store(type, std::memory_order_relaxed);
    }
    // Pairs with the fence in QueuePair::service() between parking a stream and looking at its CQs: either that
    // service sees this CQ armed and does not park, or the loop below sees the stream parked.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A consumer that arms its CQ is about to sleep: streams it was moving by polling (parked) go back to the
    // progress thread now. Nothing to do, and no system call, otherwise. Only tried: a handler may arm the CQ from
    // inside this CQ's inline progress, which holds qps_mutex_ on the same thread, and another thread's poll may
    // hold it. Then the progress thread looks at its parked streams at once (an armed CQ's are unparked): before,
    // they waited for the thread's millisecond look, which kept them parked while polls had come in the last
    // millisecond, and a consumer that alternates between polling and sleeping met that delay at every sleep.
    std::unique_lock q(qps_mutex_, std::try_to_lock);
    if (!q.owns_lock()) {
        Progress::get().look_at_parked();
        return RI_OK;
    }
    for (QueuePair *qp : qps_) {
        if (qp->parked()) Progress::get().kick(qp);
    }
    return RI_OK;
}

ri_status_t CompletionQueue::resize(uint8_t *ring, uint32_t depth) noexcept {
    if (ring == nullptr || depth == 0) return RI_EINVAL;
    std::lock_guard g(lock_);
    if (ring_.count() > depth) return RI_EINVAL;
    SlotRing moved(ring, depth, sizeof(ri_wc_t));
    while (!ring_.empty()) {
        std::memcpy(moved.next(), ring_.front(), sizeof(ri_wc_t));
        moved.push();
        ring_.pop();
    }
    ring_ = moved;
    return RI_OK;
}

uint32_t CompletionQueue::pending() noexcept {
    std::lock_guard g(lock_);
    return ring_.count();
}

void CompletionQueue::attach(QueuePair *qp) {
    std::lock_guard g(qps_mutex_);
    qps_.push_back(qp);
}

void CompletionQueue::detach(QueuePair *qp) {
    std::lock_guard g(qps_mutex_);
    qps_.erase(std::remove(qps_.begin(), qps_.end(), qp), qps_.end());
    if (recent_ == qp) recent_ = nullptr;
}

}  // namespace softrnic::datapath
