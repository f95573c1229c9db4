// A completion queue of the data path: the completion ring, its arming state, and the queue pairs whose progress a
// poll that finds the ring empty drives itself (inline progress: a busy-polling consumer gets the lowest latency).
#ifndef SOFTRNIC_DATAPATH_COMPLETION_QUEUE_HPP
#define SOFTRNIC_DATAPATH_COMPLETION_QUEUE_HPP

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "ring.hpp"
#include "rnicpi/ri_verbs.h"

namespace softrnic::datapath {

class QueuePair;

/** @brief One completion queue on a ring of ri_wc_t slots. */
class CompletionQueue {
public:
    /** @brief Called (without any data-path lock held) when an armed CQ gets a completion: the owner's CEH. */
    using NotifyFn = void (*)(void *ctx);

    /** @brief A CQ on @p depth slots at @p ring; @p fn (may be null) fires the consumer's CEH with @p ctx. */
    CompletionQueue(uint8_t *ring, uint32_t depth, NotifyFn fn, void *ctx) noexcept
        : ring_(ring, depth, sizeof(ri_wc_t)), notify_(fn), ctx_(ctx) {}
    CompletionQueue(const CompletionQueue &) = delete;
    CompletionQueue &operator=(const CompletionQueue &) = delete;

    /**
     * @brief Adds a completion. Returns true when the CEH must be called (by notify(), after the caller dropped its
     *        locks). A full ring loses the completion and puts the CQ in overflow.
     */
    [[nodiscard]] bool add(const ri_wc_t &wc) noexcept;
    /** @brief Calls the CEH. */
    void notify() const noexcept {
        if (notify_ != nullptr) notify_(ctx_);
    }
    /**
     * @brief Poll CQ. When the ring is empty, first makes one non-blocking progress pass over the attached queue
     *        pairs (those whose lock is free). ::RI_EOVERFLOW once empty after a completion was lost.
     */
    [[nodiscard]] ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled);
    /**
     * @brief Request Completion Notification (::ri_cq_notify). The consumer is about to sleep: queue pairs it was
     *        moving by polling (parked) go back to the progress thread now, so what it leaves to polls that no
     *        longer come (input, held requests) is moved and completed, and the CEH fires, without a timer.
     */
    [[nodiscard]] ri_status_t request_notify(uint32_t type) noexcept;
    /**
     * @brief Whether a notification was requested and has not fired (any thread, no lock): a queue pair whose CQ
     *        is armed is not left to its consumer's polls (QueuePair::service). Read after a sequentially consistent
     *        fence that follows the reader's own store (see QueuePair::service and request_notify).
     */
    [[nodiscard]] bool armed() const noexcept { return armed_.load(std::memory_order_relaxed) != 0; }

    /**
     * @brief Resize CQ: moves the ring to @p depth slots at @p ring, keeping the completions not yet polled, in
     *        order, and the overflow state. ::RI_EINVAL, with nothing changed, when more than @p depth are waiting.
     *        The caller frees the old ring once this returns (no poll or add uses it any more).
     */
    [[nodiscard]] ri_status_t resize(uint8_t *ring, uint32_t depth) noexcept;
    /** @brief Completions waiting in the ring. */
    [[nodiscard]] uint32_t pending() noexcept;

    /** @brief Lets poll() drive @p qp (at create of a QP using this CQ). */
    void attach(QueuePair *qp);
    /** @brief Stops poll() from driving @p qp; waits for a poll using it (at destroy). */
    void detach(QueuePair *qp);

private:
    bool take(uint32_t max, ri_wc_t *wc, uint32_t &n) noexcept;

    SpinLock lock_;  // the ring and the arming state
    SlotRing ring_;
    std::atomic<uint32_t> armed_{0};  // 0 or the ::ri_cq_notify type requested (written under lock_)
    bool overflow_ = false;  // a completion was lost: the CQ is in error
    // Nothing in the ring and no loss to report (set under lock_, read without it): an empty poll, most of a busy
    // poller's polls, looks at this instead of taking the lock twice. A completion added while a poll looks is
    // seen by the next poll, as one added just after it would be.
    std::atomic<bool> idle_{true};
    NotifyFn notify_;
    void *ctx_;
    std::mutex qps_mutex_;  // the attached QPs; a poll only tries it, so it never waits for a destroy
    std::vector<QueuePair *> qps_;
    size_t next_ = 0;     // round robin over qps_
    uint64_t polls_ = 0;  // empty polls that drove queue pairs (under qps_mutex_)
    // The queue pair whose socket moved bytes in the last inline pass that moved any: with more queue pairs than
    // one poll drives, it is served by every empty poll, so the stream a consumer waits on is not one turn in a
    // round robin over many idle ones (under qps_mutex_).
    QueuePair *recent_ = nullptr;
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_COMPLETION_QUEUE_HPP
