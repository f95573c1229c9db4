/**
 * @file hw_queues.hpp
 * @brief Both sides of hwstub's host interface (hwstub_hw.h) as small C++ classes: the host's work-queue producer,
 *        completion-queue reader and doorbell (used by the uVP, a few instructions each, no lock shared with the
 *        OE, no system call unless the OE sleeps), and the offload engine's work-queue consumer, completion-queue
 *        writer and doorbell wait.
 *
 * None of them owns memory: they sit on a ring and its control block wherever those are mapped (a memfd mapped by
 * the uVP and the kVP, or one process's memory in the tests). Ordering rules, from the hardware model:
 * - a WQE is written before the producer index that covers it is published (release), and read after the
 *   producer index is read (acquire);
 * - a CQE is written before its owner byte (release), and read after its owner byte (acquire);
 * - a poster publishes its producer index, then (after a full fence) reads whether the OE sleeps; the OE says it
 *   sleeps, then (after a full fence) reads every producer index once more. One of the two always sees the other.
 */
#ifndef HWSTUB_COMMON_HW_QUEUES_HPP
#define HWSTUB_COMMON_HW_QUEUES_HPP

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwstub_hw.h"

namespace hwstub {

/** @brief A 32-bit word of shared memory seen as an atomic. */
[[nodiscard]] inline std::atomic_ref<uint32_t> word(uint32_t &w) noexcept { return std::atomic_ref<uint32_t>(w); }

/** @brief Adds one to eventfd @p fd (a doorbell or a kick of the engine); retried when interrupted. */
inline void signal_eventfd(int fd) noexcept {
    const uint64_t one = 1;
    ssize_t n;
    do {
        n = ::write(fd, &one, sizeof one);
    } while (n < 0 && errno == EINTR);
}

/** @brief A ring of @p depth slots of @p slot_size bytes (both powers of two) at @p base. */
struct RingGeometry {
    uint8_t *base = nullptr; /**< First slot. */
    uint32_t depth = 0;      /**< Slots (a power of two). */
    uint32_t slot_size = 0;  /**< Bytes per slot (a power of two). */

    /** @brief The slot that free-running index @p index lands in. */
    [[nodiscard]] uint8_t *slot(uint32_t index) const noexcept {
        return base + static_cast<size_t>(index & (depth - 1)) * slot_size;
    }
    /** @brief True for a usable geometry (non-null, powers of two). */
    [[nodiscard]] bool valid() const noexcept {
        return base != nullptr && depth != 0 && (depth & (depth - 1)) == 0 && slot_size >= 16 &&
               (slot_size & (slot_size - 1)) == 0;
    }
};

/**
 * @brief The host's side of a work queue: claims a slot, lets the caller fill it, publishes it. Single producer
 *        (the uVP serialises posters of one queue).
 */
class WqProducer {
public:
    WqProducer() = default;
    /** @brief Over @p ring with control block @p ctrl. */
    WqProducer(RingGeometry ring, hwstub_wq_ctrl *ctrl) noexcept
        : ring_(ring), ctrl_(ctrl), producer_(word(ctrl->producer).load(std::memory_order_relaxed)) {}

    /** @brief Slots free now (the OE's consumer index read with acquire: a slot it released is really done). */
    [[nodiscard]] uint32_t free_slots() const noexcept {
        return ring_.depth - (producer_ - word(ctrl_->consumer).load(std::memory_order_acquire));
    }
    /** @brief The next slot to fill, or nullptr when the queue is full. Not visible to the OE until publish(). */
    [[nodiscard]] uint8_t *next() const noexcept { return free_slots() == 0 ? nullptr : ring_.slot(producer_); }
    /** @brief The filled slot counts; published with the next publish(). */
    void advance() noexcept { ++producer_; }
    /** @brief Makes every advanced slot visible to the OE (the doorbell record). */
    void publish() noexcept { word(ctrl_->producer).store(producer_, std::memory_order_release); }
    /** @brief WQEs posted so far (free-running). */
    [[nodiscard]] uint32_t produced() const noexcept { return producer_; }
    /** @brief WQEs the OE has finished (free-running). */
    [[nodiscard]] uint32_t done() const noexcept { return word(ctrl_->consumer).load(std::memory_order_acquire); }
    /** @brief True once the OE put the queue's QP in ERROR. */
    [[nodiscard]] bool in_error() const noexcept { return word(ctrl_->error).load(std::memory_order_acquire) != 0; }

private:
    RingGeometry ring_;
    hwstub_wq_ctrl *ctrl_ = nullptr;
    uint32_t producer_ = 0;
};

/** @brief The OE's side of a work queue: reads posted WQEs in order and releases them when done. */
class WqConsumer {
public:
    WqConsumer() = default;
    /** @brief Over @p ring with control block @p ctrl. */
    WqConsumer(RingGeometry ring, hwstub_wq_ctrl *ctrl) noexcept
        : ring_(ring), ctrl_(ctrl), fetched_(word(ctrl->consumer).load(std::memory_order_relaxed)),
          done_(fetched_) {}

    /**
     * @brief The next posted WQE not yet fetched, or nullptr. A producer index outside [fetched, retired + depth]
     *        (a consumer scribbling over its control block: more than the ring holds, or moved back over work
     *        already fetched) is reported by overrun(), and from then on nothing more is read from the ring.
     */
    [[nodiscard]] const uint8_t *fetch() noexcept {
        if (overrun_) return nullptr;
        const uint32_t producer = word(ctrl_->producer).load(std::memory_order_acquire);
        if (producer == fetched_) return nullptr;
        // Unsigned: a producer behind fetched_ wraps to a huge distance and counts as an overrun too.
        if (producer - fetched_ > ring_.depth - (fetched_ - done_)) {
            overrun_ = true;
            return nullptr;
        }
        return ring_.slot(fetched_++);
    }
    /** @brief Gives back the last fetched WQE: the next fetch() returns it again (work that must wait). */
    void unfetch() noexcept {
        if (fetched_ != done_) --fetched_;
    }
    /** @brief The host's producer index: WQEs posted so far (free-running). */
    [[nodiscard]] uint32_t posted() const noexcept { return word(ctrl_->producer).load(std::memory_order_acquire); }
    /** @brief True when a fetch() would find work (no state change). */
    [[nodiscard]] bool pending() const noexcept {
        return word(ctrl_->producer).load(std::memory_order_acquire) != fetched_;
    }
    /** @brief The oldest @p n fetched WQEs are done: their slots go back to the host. */
    void retire(uint32_t n = 1) noexcept {
        done_ += n;
        word(ctrl_->consumer).store(done_, std::memory_order_release);
    }
    /** @brief Tells the host the queue's QP is in ERROR. */
    void set_error() noexcept { word(ctrl_->error).store(1, std::memory_order_release); }
    /**
     * @brief WQEs posted and not fetched yet (an SRQ's receives left for its QPs). A producer index the host moved
     *        beyond the ring reads as overrun() at the next fetch(), not here.
     */
    [[nodiscard]] uint32_t unfetched() const noexcept { return posted() - fetched_; }
    /** @brief WQEs fetched and not yet retired. */
    [[nodiscard]] uint32_t in_flight() const noexcept { return fetched_ - done_; }
    /** @brief True after the host published a producer index beyond the ring's capacity. */
    [[nodiscard]] bool overrun() const noexcept { return overrun_; }

private:
    RingGeometry ring_;
    hwstub_wq_ctrl *ctrl_ = nullptr;
    uint32_t fetched_ = 0;
    uint32_t done_ = 0;
    bool overrun_ = false;
};

/** @brief The owner bit of CQEs written in the pass over a ring of @p depth slots that free-running @p index is in. */
[[nodiscard]] inline uint8_t owner_bit(uint32_t index, uint32_t depth) noexcept {
    return static_cast<uint8_t>(((index / depth) & 1u) ^ 1u);
}

/** @brief The OE's side of a completion queue. */
class CqWriter {
public:
    CqWriter() = default;
    /** @brief Over a ring of @p depth ::hwstub_cqe at @p ring with control block @p ctrl. */
    CqWriter(hwstub_cqe *ring, uint32_t depth, hwstub_cq_ctrl *ctrl) noexcept
        : ring_(ring), depth_(depth), ctrl_(ctrl), producer_(word(ctrl->producer).load(std::memory_order_relaxed)) {}

    /**
     * @brief Writes @p cqe (its owner byte is set here, last). False when the CQ is full: the CQE is lost, the
     *        overflow flag is set, and the caller raises the CQ overflow.
     */
    bool push(const hwstub_cqe &cqe) noexcept {
        const uint32_t consumer = word(ctrl_->consumer).load(std::memory_order_acquire);
        if (producer_ - consumer >= depth_) {
            word(ctrl_->overflow).store(1, std::memory_order_release);
            return false;
        }
        hwstub_cqe &slot = ring_[producer_ & (depth_ - 1)];
        const uint8_t owner = owner_bit(producer_, depth_);
        hwstub_cqe copy = cqe;
        copy.owner = static_cast<uint8_t>(owner ^ 1u);  // stays invalid while the body is written
        std::memcpy(&slot, &copy, sizeof copy);
        std::atomic_ref<uint8_t>(slot.owner).store(owner, std::memory_order_release);
        ++producer_;
        word(ctrl_->producer).store(producer_, std::memory_order_relaxed);
        return true;
    }
    /**
     * @brief Resize CQ, as the adapter does it: from now on this writer fills the ring of @p depth CQEs at @p ring
     *        with control block @p ctrl (fresh memory), which receives the CQEs the host has not consumed, at the
     *        slots and with the owner bits the new depth gives their free-running indexes, and the counters, the
     *        pending arm and the overflow flag; every other slot is marked not yet written for its next index. The
     *        host must not poll meanwhile (it holds its CQ, see HostCq::hold()). False, with nothing changed, when
     *        more CQEs wait than @p depth holds or @p depth is not a power of two.
     */
    bool move_to(hwstub_cqe *ring, uint32_t depth, hwstub_cq_ctrl *ctrl) noexcept {
        if (ring == nullptr || ctrl == nullptr || depth == 0 || (depth & (depth - 1)) != 0) return false;
        const uint32_t consumer = word(ctrl_->consumer).load(std::memory_order_acquire);
        if (producer_ - consumer > depth) return false;
        for (uint32_t k = 0; k < depth; ++k) {
            const uint32_t index = producer_ + k;
            ring[index & (depth - 1)].owner = static_cast<uint8_t>(owner_bit(index, depth) ^ 1u);
        }
        for (uint32_t index = consumer; index != producer_; ++index) {
            hwstub_cqe e;
            std::memcpy(&e, &ring_[index & (depth_ - 1)], sizeof e);
            e.owner = owner_bit(index, depth);
            std::memcpy(&ring[index & (depth - 1)], &e, sizeof e);
        }
        word(ctrl->consumer).store(consumer, std::memory_order_relaxed);
        word(ctrl->arm_seq).store(word(ctrl_->arm_seq).load(std::memory_order_relaxed), std::memory_order_relaxed);
        word(ctrl->arm_solicited)
            .store(word(ctrl_->arm_solicited).load(std::memory_order_relaxed), std::memory_order_relaxed);
        word(ctrl->notified_seq)
            .store(word(ctrl_->notified_seq).load(std::memory_order_relaxed), std::memory_order_relaxed);
        word(ctrl->overflow).store(word(ctrl_->overflow).load(std::memory_order_relaxed), std::memory_order_relaxed);
        word(ctrl->producer).store(producer_, std::memory_order_release);
        ring_ = ring;
        depth_ = depth;
        ctrl_ = ctrl;
        return true;
    }
    /** @brief Sets the overflow flag without a full ring (an injected CQ overflow). */
    void set_overflow() noexcept { word(ctrl_->overflow).store(1, std::memory_order_release); }
    /**
     * @brief Whether a CQE with @p solicited matches an arm not answered yet; if so the arm is consumed (the caller
     *        raises the interrupt). An arm for solicited CQEs only is not consumed by others.
     */
    [[nodiscard]] bool take_arm(bool solicited) noexcept {
        // The CQE's owner byte (stored just before) and the arm (loaded now) are a store-load pair against the
        // host's arm-then-poll: without a full fence both sides can miss each other and the wakeup is lost.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const uint32_t arm = word(ctrl_->arm_seq).load(std::memory_order_acquire);
        if (arm == word(ctrl_->notified_seq).load(std::memory_order_relaxed)) return false;
        if (!solicited && word(ctrl_->arm_solicited).load(std::memory_order_relaxed) != 0) return false;
        word(ctrl_->notified_seq).store(arm, std::memory_order_release);
        return true;
    }
    /** @brief CQEs the host has not consumed yet. */
    [[nodiscard]] uint32_t occupancy() const noexcept {
        return producer_ - word(ctrl_->consumer).load(std::memory_order_acquire);
    }

private:
    hwstub_cqe *ring_ = nullptr;
    uint32_t depth_ = 0;
    hwstub_cq_ctrl *ctrl_ = nullptr;
    uint32_t producer_ = 0;
};

/** @brief The host's side of a completion queue. Single consumer (the uVP serialises pollers of one CQ). */
class CqReader {
public:
    CqReader() = default;
    /** @brief Over a ring of @p depth ::hwstub_cqe at @p ring with control block @p ctrl. */
    CqReader(hwstub_cqe *ring, uint32_t depth, hwstub_cq_ctrl *ctrl) noexcept
        : ring_(ring), depth_(depth), ctrl_(ctrl), consumer_(word(ctrl->consumer).load(std::memory_order_relaxed)) {}

    /** @brief Copies the next valid CQE into @p out and consumes it; false when there is none. */
    bool poll(hwstub_cqe &out) noexcept {
        hwstub_cqe &slot = ring_[consumer_ & (depth_ - 1)];
        const uint8_t owner = std::atomic_ref<uint8_t>(slot.owner).load(std::memory_order_acquire);
        if (owner != owner_bit(consumer_, depth_)) return false;
        std::memcpy(&out, &slot, sizeof out);
        ++consumer_;
        word(ctrl_->consumer).store(consumer_, std::memory_order_release);
        return true;
    }
    /** @brief Requests a notification for the next CQE (@p solicited_only: the next solicited one). */
    void arm(bool solicited_only) noexcept {
        word(ctrl_->arm_solicited).store(solicited_only ? 1u : 0u, std::memory_order_relaxed);
        const uint32_t next = word(ctrl_->arm_seq).load(std::memory_order_relaxed) + 1;
        word(ctrl_->arm_seq).store(next, std::memory_order_release);
    }
    /** @brief True once the OE lost a CQE to a full CQ. */
    [[nodiscard]] bool overflowed() const noexcept {
        return word(ctrl_->overflow).load(std::memory_order_acquire) != 0;
    }

private:
    hwstub_cqe *ring_ = nullptr;
    uint32_t depth_ = 0;
    hwstub_cq_ctrl *ctrl_ = nullptr;
    uint32_t consumer_ = 0;
};

/**
 * @brief The host's doorbell: after publishing work, ring() writes the engine's eventfd only if the OE said it
 *        sleeps. Returns true when it made the system call (what the statistics count).
 */
class Doorbell {
public:
    Doorbell() = default;
    /** @brief On engine page @p page, with the engine's eventfd @p fd (not owned). */
    Doorbell(hwstub_engine_page *page, int fd) noexcept : page_(page), fd_(fd) {}

    /**
     * @brief Call after WqProducer::publish() or CqReader::arm(). Rings only an engine that said it sleeps, and only
     *        once per sleep: the poster that moves `sleeping` from 1 to 2 writes the eventfd; a poster that finds 2
     *        knows the engine is already being woken (and will see its post, which was published before the look).
     *        True when this call wrote the eventfd.
     */
    bool ring() noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        auto sleeping = word(page_->sleeping);
        uint32_t seen = sleeping.load(std::memory_order_relaxed);
        if (seen != 1 || !sleeping.compare_exchange_strong(seen, 2, std::memory_order_relaxed)) return false;
        signal_eventfd(fd_);
        std::atomic_ref<uint64_t>(page_->doorbells).fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    /** @brief True once the adapter reported a catastrophic error. */
    [[nodiscard]] bool adapter_dead() const noexcept {
        return word(page_->dead).load(std::memory_order_acquire) != 0;
    }

private:
    hwstub_engine_page *page_ = nullptr;
    int fd_ = -1;
};

/**
 * @brief The OE's side of the doorbell. Before it waits the OE calls prepare_sleep(), then looks at its queues once
 *        more (WqConsumer::pending()); with work found it calls awake() instead of waiting; after any wait, awake().
 */
class DoorbellWait {
public:
    DoorbellWait() = default;
    /** @brief On engine page @p page, with the engine's eventfd @p fd (not owned; made with EFD_NONBLOCK). */
    DoorbellWait(hwstub_engine_page *page, int fd) noexcept : page_(page), fd_(fd) {}

    /** @brief Says the OE is about to sleep; the caller looks at every queue after this. */
    void prepare_sleep() noexcept {
        word(page_->sleeping).store(1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    /** @brief The OE runs again: posters stop ringing; pending doorbell writes are drained. */
    void awake() noexcept {
        word(page_->sleeping).store(0, std::memory_order_relaxed);
        uint64_t count = 0;
        if (::read(fd_, &count, sizeof count) > 0) {
            std::atomic_ref<uint64_t>(page_->wakeups).fetch_add(1, std::memory_order_relaxed);
        }
    }
    /** @brief Marks the adapter dead (a catastrophic error): posters see it on their next post. */
    void die() noexcept { word(page_->dead).store(1, std::memory_order_release); }

private:
    hwstub_engine_page *page_ = nullptr;
    int fd_ = -1;
};

}  // namespace hwstub

#endif  // HWSTUB_COMMON_HW_QUEUES_HPP
