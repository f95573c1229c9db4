// A receive queue of the data path: a QP's own receive ring or a shared receive queue (SRQ). Posting checks every
// scatter element against the STag table; the engine takes the oldest request, resolved to addresses, when a Send
// arrives.
#ifndef SOFTRNIC_DATAPATH_RECEIVE_QUEUE_HPP
#define SOFTRNIC_DATAPATH_RECEIVE_QUEUE_HPP

#include <cstdint>

#include "iwarp/engine.hpp"
#include "ring.hpp"
#include "rnicpi/ri_verbs.h"
#include "softrnic_abi.h"
#include "stag_table.hpp"

namespace softrnic::datapath {

/** @brief Checks the scatter list of @p wr: ::RI_ERANGE over @p max_sge, ::RI_EINVAL for an unknown, invalid or
 *         foreign lkey or a range outside its region, ::RI_EACCES without local write access. */
[[nodiscard]] ri_status_t check_receive(const ri_recv_wr_t &wr, uint32_t max_sge, const StagTable &stags,
                                        uint32_t pd);

class ReceiveQueue;

/**
 * @brief Post Receive to a shared receive queue: checks each request (check_receive()) and queues those before the
 *        first that fails; returns that failure, ::RI_EAGAIN when the queue filled, else ::RI_OK.
 */
[[nodiscard]] ri_status_t post_receives(ReceiveQueue &rq, const ri_recv_wr_t *wr, uint32_t count, uint32_t max_sge,
                                        const StagTable &stags, uint32_t pd, uint32_t *posted);

/** @brief Receive requests on a ring of ::softrnic_rq_wqe slots. */
class ReceiveQueue {
public:
    /** @brief What take() found. */
    enum class Take : uint8_t {
        ok,      /**< A request, resolved. */
        empty,   /**< Nothing posted. */
        invalid  /**< The oldest request no longer resolves (its region went away); it was removed. */
    };

    ReceiveQueue() = default;
    ReceiveQueue(const ReceiveQueue &) = delete;
    ReceiveQueue &operator=(const ReceiveQueue &) = delete;
    /** @brief Places the queue on @p depth slots at @p ring with up to @p max_sge scatter elements each (once). */
    void init(uint8_t *ring, uint32_t depth, uint32_t max_sge) noexcept {
        ring_ = SlotRing(ring, depth, static_cast<uint32_t>(softrnic_rq_slot_size(max_sge)));
        max_sge_ = max_sge;
    }

    /** @brief The lock a caller holds around post() and pop(); take() locks itself. */
    [[nodiscard]] SpinLock &lock() noexcept { return lock_; }
    /** @brief Scatter elements per request. */
    [[nodiscard]] uint32_t max_sge() const noexcept { return max_sge_; }
    /** @brief Appends one checked request; false when the ring is full. Caller holds lock(). */
    [[nodiscard]] bool push(const ri_recv_wr_t &wr) noexcept;
    /** @brief Removes the oldest request and returns its wr_id; false when empty. Caller holds lock(). */
    [[nodiscard]] bool pop(uint64_t &wr_id) noexcept;
    /** @brief Forgets every request (reset). Caller holds lock(). */
    void clear() noexcept { ring_.clear(); }

    /**
     * @brief Takes the oldest request, resolved through @p stags for protection domain @p pd into @p out (wr_id is
     *        set in every case but empty). @p limit_reached becomes true when this take made the queue fall below
     *        its armed limit, which disarms it. @p cache is the taking queue pair's (StagTable::find).
     */
    [[nodiscard]] Take take(iwarp::ReceiveBuffer &out, const StagTable &stags, uint32_t pd, bool &limit_reached,
                            StagCache &cache);
    /** @brief Arms the limit (0 disarms): take() reports the queue falling below it once. */
    void set_limit(uint32_t limit) noexcept {
        std::lock_guard g(lock_);
        limit_ = limit;
    }

    uint32_t id = 0;      /**< SRQ: identifier for event records. */
    uint64_t context = 0; /**< SRQ: consumer context for event records. */

private:
    SpinLock lock_;
    SlotRing ring_;
    uint32_t max_sge_ = 0;
    uint32_t limit_ = 0;
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_RECEIVE_QUEUE_HPP
