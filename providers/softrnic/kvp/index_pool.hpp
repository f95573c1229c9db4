// A pool of small integer identifiers (QP numbers, STag indices) handed out round-robin, so a freed identifier is
// reused as late as possible and a stale one rarely names a new object. Not thread-safe: the instance locks it.
#ifndef SOFTRNIC_KVP_INDEX_POOL_HPP
#define SOFTRNIC_KVP_INDEX_POOL_HPP

#include <cstdint>
#include <optional>
#include <vector>

namespace softrnic::kvp {

class IndexPool {
public:
    // Identifiers first .. first + size - 1.
    IndexPool(uint32_t first, uint32_t size) : first_(first), used_(size, false) {}

    [[nodiscard]] std::optional<uint32_t> allocate() {
        const auto n = static_cast<uint32_t>(used_.size());
        if (in_use_ == n) return std::nullopt;
        for (uint32_t i = 0; i < n; ++i) {
            const uint32_t slot = (next_ + i) % n;
            if (!used_[slot]) {
                used_[slot] = true;
                ++in_use_;
                next_ = (slot + 1) % n;
                return first_ + slot;
            }
        }
        return std::nullopt;
    }

    void release(uint32_t id) {
        const uint32_t slot = id - first_;
        if (slot < used_.size() && used_[slot]) {
            used_[slot] = false;
            --in_use_;
        }
    }

    [[nodiscard]] uint32_t in_use() const noexcept { return in_use_; }

private:
    uint32_t first_;
    std::vector<bool> used_;
    uint32_t next_ = 0;
    uint32_t in_use_ = 0;
};

}  // namespace softrnic::kvp

#endif  // SOFTRNIC_KVP_INDEX_POOL_HPP
