// Memory management: reference-counted page ranges with per-address-space and host-wide limits.
#include "pin_map.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kal {

bool PinBudget::take(uint64_t bytes, const PinBudget **refused) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (bytes > limit_ || used_ > limit_ - bytes) {
            if (refused != nullptr) *refused = this;
            return false;
        }
        used_ += bytes;
    }
    if (parent_ != nullptr && !parent_->take(bytes, refused)) {
        std::lock_guard lock(mutex_);
        used_ -= bytes;
        return false;
    }
    return true;
}

void PinBudget::give(uint64_t bytes) noexcept {
    {
        std::lock_guard lock(mutex_);
        used_ -= bytes;
    }
    if (parent_ != nullptr) parent_->give(bytes);
}

uint64_t PinBudget::used() const noexcept {
    std::lock_guard lock(mutex_);
    return used_;
}

uint64_t PinBudget::limit() const noexcept {
    std::lock_guard lock(mutex_);
    return limit_;
}

void PinBudget::set_limit(uint64_t limit_bytes) noexcept {
    std::lock_guard lock(mutex_);
    limit_ = limit_bytes;
}

PinMap::PinMap(PinBudget &budget, uint64_t limit_bytes, uint64_t page_size)
    : budget_(budget), limit_(limit_bytes), page_(page_size) {}

PinMap::~PinMap() {
    if (pinned_ + charged_ > 0) budget_.give(pinned_ + charged_);
}

void PinMap::set_limit(uint64_t limit_bytes, std::string what) {
    limit_ = limit_bytes;
    limit_what_ = std::move(what);
}

std::string PinMap::take(uint64_t bytes) {
    const uint64_t used = pinned_ + charged_;
    if (bytes > limit_ || used > limit_ - bytes) {
        last_refused_ = nullptr;
        return std::to_string(bytes) + " more bytes would exceed " + limit_what_ + " of " + std::to_string(limit_) +
               " bytes (" + std::to_string(used) + " pinned or charged)";
    }
    const PinBudget *refused = nullptr;
    if (!budget_.take(bytes, &refused)) {
        last_refused_ = refused;
        return std::to_string(bytes) + " more bytes would exceed " + refused->owner() + "'s limit of " +
               std::to_string(refused->limit()) + " bytes (" + std::to_string(refused->used()) + " in use)";
    }
    return {};
}

rdma::Expected<void> PinMap::charge(uint64_t bytes) {
    if (bytes == 0) return {};
    if (std::string why = take(bytes); !why.empty()) return rdma::Error(RI_ENOSPC, "queue memory: " + why);
    charged_ += bytes;
    return {};
}

void PinMap::discharge(uint64_t bytes) noexcept {
    bytes = std::min(bytes, charged_);
    charged_ -= bytes;
    budget_.give(bytes);
}

uint32_t PinMap::count_at(uint64_t addr) const noexcept {
    auto it = segments_.upper_bound(addr);
    if (it == segments_.begin()) return 0;
    --it;
    return addr < it->second.end ? it->second.count : 0;
}

void PinMap::split_at(uint64_t at) {
    auto it = segments_.upper_bound(at);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
        segments_.emplace(at, Segment{it->second.end, it->second.count});
        it->second.end = at;
    }
}

// Joins neighbouring segments with equal counts so the map stays as small as the registrations are distinct.
void PinMap::merge_around(uint64_t start, uint64_t end) {
    auto it = segments_.lower_bound(start);
    if (it != segments_.begin()) --it;
    while (it != segments_.end() && it->first <= end) {
        auto next = std::next(it);
        if (next != segments_.end() && it->second.end == next->first && it->second.count == next->second.count) {
            it->second.end = next->second.end;
            segments_.erase(next);
        } else {
            it = next;
        }
    }
}

rdma::Expected<PinResult> PinMap::pin(uint64_t addr, uint64_t length, const RangeCheck &check) {
    // The range's end, rounded up to a page, must not wrap either (a range in the last page of the address space).
    if (length == 0 || addr + length < addr || addr + length > UINT64_MAX - (page_ - 1)) {
        return rdma::Error(RI_EINVAL, "empty or wrapping memory range");
    }
    PinResult r;
    r.range = PageRange{addr / page_ * page_, (addr + length + page_ - 1) / page_ * page_};
    // First find the gaps (what is new) without changing anything, so a refused pin leaves no trace.
    uint64_t at = r.range.start;
    auto it = segments_.upper_bound(at);
    if (it != segments_.begin() && std::prev(it)->second.end > at) --it;
    while (at < r.range.end) {
        if (it == segments_.end() || it->first >= r.range.end) {
            r.newly_pinned.push_back({at, r.range.end});
            break;
        }
        if (it->first > at) r.newly_pinned.push_back({at, it->first});
        at = std::max(at, it->second.end);
        ++it;
    }
    uint64_t new_bytes = 0;
    for (const PageRange &g : r.newly_pinned) new_bytes += g.bytes();
    if (std::string why = take(new_bytes); !why.empty()) return rdma::Error(RI_ENOSPC, "pinning " + why);
    if (check && !r.newly_pinned.empty()) {
        if (auto ok = check(r.newly_pinned); !ok) {
            budget_.give(new_bytes);
            return ok.error();
        }
    }
    // Now apply: count up what exists, fill the gaps with count 1.
    split_at(r.range.start);
    split_at(r.range.end);
    for (auto s = segments_.lower_bound(r.range.start); s != segments_.end() && s->first < r.range.end; ++s) {
        ++s->second.count;
    }
    for (const PageRange &g : r.newly_pinned) segments_.emplace(g.start, Segment{g.end, 1});
    merge_around(r.range.start, r.range.end);
    pinned_ += new_bytes;
    r.pin_id = next_id_++;
    pins_.emplace(r.pin_id, r.range);
    return r;
}

rdma::Expected<std::vector<PageRange>> PinMap::unpin(uint64_t pin_id) {
    auto p = pins_.find(pin_id);
    if (p == pins_.end()) return rdma::Error(RI_ENOENT, "no such pin");
    const PageRange range = p->second;
    pins_.erase(p);
    split_at(range.start);
    split_at(range.end);
    std::vector<PageRange> released;
    for (auto s = segments_.lower_bound(range.start); s != segments_.end() && s->first < range.end;) {
        if (--s->second.count == 0) {
            if (!released.empty() && released.back().end == s->first) {
                released.back().end = s->second.end;
            } else {
                released.push_back({s->first, s->second.end});
            }
            s = segments_.erase(s);
        } else {
            ++s;
        }
    }
    merge_around(range.start, range.end);
    uint64_t freed = 0;
    for (const PageRange &g : released) freed += g.bytes();
    pinned_ -= freed;
    budget_.give(freed);
    return released;
}

}  // namespace kal
