// The counters region of one RNIC open: a memfd of softrnic_qp_counters slots, mapped shared here and (through the
// descriptor the Open RNIC reply carries) in the process whose data path writes them. Each QP of the open gets a
// slot, handed out round-robin so a freed slot is reused as late as possible.
#ifndef SOFTRNIC_KVP_COUNTER_REGION_HPP
#define SOFTRNIC_KVP_COUNTER_REGION_HPP

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "index_pool.hpp"
#include "rnicpi/ri_verbs.h"
#include "softrnic_abi.h"

namespace softrnic::kvp {

class CounterRegion {
public:
    // A region of @p slots slots; null when the memfd cannot be made or mapped. @p fd_out (may be null) receives
    // the descriptor, which the caller then owns; without it the descriptor is closed at once.
    static std::unique_ptr<CounterRegion> create(uint32_t slots, int *fd_out);
    CounterRegion(const CounterRegion &) = delete;
    CounterRegion &operator=(const CounterRegion &) = delete;
    ~CounterRegion();

    [[nodiscard]] uint32_t slots() const noexcept { return slots_; }
    // A zeroed slot, or nothing when all are taken.
    [[nodiscard]] std::optional<uint32_t> allocate();
    void release(uint32_t slot) noexcept;
    [[nodiscard]] softrnic_qp_counters *slot(uint32_t n) const noexcept;
    [[nodiscard]] ri_qp_stats_t read(uint32_t n) const noexcept;

private:
    CounterRegion(uint8_t *base, size_t length, uint32_t slots) : base_(base), length_(length), slots_(slots), pool_(0, slots) {}
    uint8_t *base_;
    size_t length_;
    uint32_t slots_;
    std::mutex mutex_;
    IndexPool pool_;
};

}  // namespace softrnic::kvp

#endif  // SOFTRNIC_KVP_COUNTER_REGION_HPP
