/**
 * @file pin_map.hpp
 * @brief Memory management: one pin/translate account per address space, shared by every RNIC.
 *
 * Registrations pin page ranges. The same pages registered several times (by one RNIC or several) are pinned once
 * and unpinned when the last registration goes: the map keeps a reference count per page range and tells its
 * caller exactly which ranges became pinned (to mlock in the owner process) and which became unpinned (to munlock).
 * Pinned bytes count against a per-address-space limit and a host-wide limit; a pin over either is refused whole
 * with ::RI_ENOSPC and changes nothing.
 */
#ifndef KAL_MEMORY_PIN_MAP_HPP
#define KAL_MEMORY_PIN_MAP_HPP

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "rnicpi/cpp/status.hpp"

namespace kal {

/** @brief A page-aligned byte range [start, end). */
struct PageRange {
    uint64_t start = 0; /**< First byte (page-aligned). */
    uint64_t end = 0;   /**< One past the last byte (page-aligned). */
    /** @brief Bytes in the range. */
    [[nodiscard]] uint64_t bytes() const noexcept { return end - start; }
    /** @brief Field-wise equality. */
    friend bool operator==(const PageRange &, const PageRange &) = default;
};

/**
 * @brief A pin budget: the host's, or one user's charging the host's (its parent) as well. Thread-safe.
 */
class PinBudget {
public:
    /** @brief A budget of @p limit_bytes for @p owner ("the host", "uid 1000"), within @p parent if given. */
    explicit PinBudget(uint64_t limit_bytes, PinBudget *parent = nullptr, std::string owner = "the host")
        : parent_(parent), owner_(std::move(owner)), limit_(limit_bytes) {}
    /**
     * @brief Takes @p bytes here and in every parent; false (and nothing taken) when that would exceed a limit, and
     *        then *@p refused (if given) names the budget that refused.
     */
    [[nodiscard]] bool take(uint64_t bytes, const PinBudget **refused = nullptr) noexcept;
    /** @brief Gives back @p bytes here and in every parent. */
    void give(uint64_t bytes) noexcept;
    /** @brief Bytes taken from this budget. */
    [[nodiscard]] uint64_t used() const noexcept;
    /** @brief The limit. */
    [[nodiscard]] uint64_t limit() const noexcept;
    /** @brief Changes the limit (what is taken stays taken). */
    void set_limit(uint64_t limit_bytes) noexcept;
    /** @brief Whose budget this is, for messages ("the host", "uid 1000"). */
    [[nodiscard]] const std::string &owner() const noexcept { return owner_; }

private:
    mutable std::mutex mutex_;
    PinBudget *parent_;
    std::string owner_;
    uint64_t limit_;
    uint64_t used_ = 0;
};

/** @brief What a pin did. */
struct PinResult {
    uint64_t pin_id = 0;                 /**< Identifier for unpin(). */
    PageRange range;                     /**< The page-aligned range the pin covers. */
    std::vector<PageRange> newly_pinned; /**< Ranges that were not pinned before: the owner must lock them. */
};

/** @brief The pins of one address space (one consumer process, or the kAL itself). */
class PinMap {
public:
    /** @brief A map charging @p budget, allowing at most @p limit_bytes here, with pages of @p page_size bytes. */
    PinMap(PinBudget &budget, uint64_t limit_bytes, uint64_t page_size = 4096);
    PinMap(const PinMap &) = delete;
    PinMap &operator=(const PinMap &) = delete;
    /** @brief Releases everything still pinned back to the budget. */
    ~PinMap();

    /** @brief Checks ranges about to be pinned; an error refuses the pin (see pin()). */
    using RangeCheck = std::function<rdma::Expected<void>(const std::vector<PageRange> &)>;
    /**
     * @brief Pins [addr, addr + length). ::RI_EINVAL for an empty or wrapping range (also one that wraps once
     *        rounded up to whole pages), ::RI_ENOSPC over a limit. Within the limits, @p check (if given) sees the
     *        ranges no pin covered yet, as Linux checks a pin's limit before it faults the pages in; its error
     *        refuses the pin, which then changes nothing.
     */
    [[nodiscard]] rdma::Expected<PinResult> pin(uint64_t addr, uint64_t length, const RangeCheck &check = {});
    /**
     * @brief Charges @p bytes of memory held for this address space that is not one of its pages (queue rings a
     *        kVP allocates itself), against the same limits as pins: ::RI_ENOSPC over one, and nothing charged.
     */
    [[nodiscard]] rdma::Expected<void> charge(uint64_t bytes);
    /** @brief Releases @p bytes charged by charge(). */
    void discharge(uint64_t bytes) noexcept;
    /**
     * @brief Sets this address space's limit to @p limit_bytes; @p what names it in refusals ("its RLIMIT_MEMLOCK",
     *        "the per-process limit"). Applies to later pins; what is pinned stays.
     */
    void set_limit(uint64_t limit_bytes, std::string what);
    /** @brief This address space's limit. */
    [[nodiscard]] uint64_t limit() const noexcept { return limit_; }
    /**
     * @brief Who refused the last refused pin or charge: the budget (a user's or the host's), or null when it was
     *        this address space's own limit.
     */
    [[nodiscard]] const PinBudget *last_refused() const noexcept { return last_refused_; }
    /** @brief Releases a pin; returns the ranges no pin covers any more (the owner unlocks them). */
    [[nodiscard]] rdma::Expected<std::vector<PageRange>> unpin(uint64_t pin_id);
    /** @brief Bytes pinned in this address space (each page once, however often it is registered). */
    [[nodiscard]] uint64_t pinned_bytes() const noexcept { return pinned_; }
    /** @brief Bytes charged by charge(). */
    [[nodiscard]] uint64_t charged_bytes() const noexcept { return charged_; }
    /** @brief Live pins. */
    [[nodiscard]] size_t pins() const noexcept { return pins_.size(); }
    /** @brief The reference count of the page holding @p addr (0 when not pinned). */
    [[nodiscard]] uint32_t count_at(uint64_t addr) const noexcept;

private:
    struct Segment {
        uint64_t end;
        uint32_t count;
    };
    void split_at(uint64_t at);
    void merge_around(uint64_t start, uint64_t end);

    PinBudget &budget_;
    // Why a pin or charge of @p bytes is refused, or empty when the limits allow it (and then the budget is taken).
    std::string take(uint64_t bytes);

    uint64_t limit_;
    std::string limit_what_ = "this process's limit";
    uint64_t page_;
    uint64_t pinned_ = 0;
    uint64_t charged_ = 0;
    const PinBudget *last_refused_ = nullptr;
    uint64_t next_id_ = 1;
    std::map<uint64_t, Segment> segments_;  // start -> [start, end) with a reference count, non-overlapping
    std::map<uint64_t, PageRange> pins_;
};

}  // namespace kal

#endif  // KAL_MEMORY_PIN_MAP_HPP
