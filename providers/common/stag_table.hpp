// The STag table both providers keep: what each region or window STag maps to, for resolving the lkeys of posted
// work and the STags of inbound tagged operations. softrnic keeps one per RNIC open in its data path; hwstub keeps
// one per adapter, in the offload engine ("the chip's memory").
#ifndef PROVIDERS_COMMON_STAG_TABLE_HPP
#define PROVIDERS_COMMON_STAG_TABLE_HPP

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace providers::common {

/** @brief One region as the data path sees it. */
struct StagEntry {
    uint64_t addr = 0;    /**< Address of the region's first byte in this process. */
    uint64_t length = 0;  /**< Bytes. */
    uint64_t to_base = 0; /**< Tagged offset of the first byte: 0 for a zero-based region, else the address. */
    uint32_t access = 0;  /**< RI_ACCESS_* rights (local read always granted). */
    uint32_t pd = 0;      /**< Protection domain identifier. */
    bool valid = true;    /**< False once invalidated (Send with Invalidate, Local Invalidate). */
    uint32_t qp = 0;      /**< A bound type 2 window: the only QP number it serves; 0 for a region. */
    ri_stag_t parent = 0; /**< A bound window: the region it lies in (it goes when the region does). */
    /**
     * An allocated memory window the table keeps while it is unbound (hwstub: the adapter checks a bind against its
     * PD): invalid, no parent. Such a window outlives its region, unbound again; one without the mark (softrnic's,
     * entered at bind) goes with its region.
     */
    bool window = false;
    /**
     * An STag allocated for fast registration: the pages a fast registration may map into it (0: not one). Invalid
     * until a fast registration maps it (then its parent is the registered region its pages lie in).
     */
    uint32_t max_pages = 0;

    /** @brief The entry of a registered region: its bytes, tagged offset base, rights (local read added) and PD. */
    [[nodiscard]] static StagEntry region(uint64_t addr, uint64_t length, uint64_t to_base, uint32_t access,
                                          uint32_t pd) noexcept {
        StagEntry e;
        e.addr = addr;
        e.length = length;
        e.to_base = to_base;
        e.access = access | RI_ACCESS_LOCAL_READ;
        e.pd = pd;
        return e;
    }

    /**
     * @brief The address of [to, to + len) in the region, or nothing when the range is outside it.
     */
    [[nodiscard]] std::optional<uint8_t *> map(uint64_t to, uint64_t len) const noexcept {
        if (to < to_base || to - to_base > length || len > length - (to - to_base)) return std::nullopt;
        return reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(addr + (to - to_base)));
    }
};

/**
 * @brief One reader's copy of the entry it found last, good while the table has not changed since (StagTable::find
 *        with a cache). Not thread-safe: each belongs to one user, under that user's own lock.
 */
struct StagCache {
    ri_stag_t stag = 0;
    uint64_t generation = 0;  // the table's generation when copied; 0: empty
    StagEntry entry;
};

/**
 * @brief STag to region map (of one RNIC open in softrnic, of one adapter in hwstub). Thread-safe: lookups share a reader lock, so posting threads and the
 *        progress thread resolve concurrently; changes (register, deregister, invalidate) take it exclusively.
 *        Every change also moves the table's generation on, so a lookup with a StagCache that still holds the
 *        STag takes no lock at all: a queue pair resolves the same few STags for every message it moves (four per
 *        message on each end of a Send ping-pong), and each locked lookup cost the shared lock's two atomic
 *        operations and a hash.
 */
class StagTable {
public:
    /** @brief Adds or replaces @p stag. */
    void add(ri_stag_t stag, const StagEntry &entry) {
        Change change(*this);
        map_[stag] = entry;
    }
    /** @brief Adds or replaces window @p stag, bound into region @p entry.parent. */
    void add_window(ri_stag_t stag, const StagEntry &entry) {
        Change change(*this);
        auto [it, fresh] = map_.insert_or_assign(stag, entry);
        (void)it;
        if (fresh) ++windows_;
    }
    /**
     * @brief Forgets @p stag, and every window bound into it when it is a region (a window marked
     *        StagEntry::window stays, unbound).
     */
    void remove(ri_stag_t stag) {
        Change change(*this);
        auto it = map_.find(stag);
        if (it == map_.end()) {
            // An allocated STag fast registration gave another consumer key: its owner names the first one.
            auto k = keyed_.find(stag >> 8);
            if (k == keyed_.end() || (it = map_.find(k->second)) == map_.end()) return;
        }
        if (it->second.max_pages != 0) keyed_.erase(it->first >> 8);
        if (it->second.parent != 0 || it->second.window) --windows_;
        map_.erase(it);
        if (windows_ == 0) return;  // the scan is for regions with windows bound, rare
        for (auto w = map_.begin(); w != map_.end();) {
            if (w->second.parent != stag) {
                ++w;
            } else if (w->second.window) {
                w->second = unbound_window(w->second.pd);
                ++w;
            } else if (w->second.max_pages != 0) {
                // A fast-registered STag in the region: allocated still, invalid, mapping nothing.
                w->second = allocated_stag(w->second.pd, w->second.max_pages);
                --windows_;
                ++w;
            } else {
                w = map_.erase(w);
                --windows_;
            }
        }
    }
    /** @brief Adds STag @p stag, allocated for fast registration of up to @p max_pages pages in PD @p pd: invalid. */
    void add_allocated(ri_stag_t stag, uint32_t pd, uint32_t max_pages) {
        Change change(*this);
        map_[stag] = allocated_stag(pd, max_pages);
        keyed_[stag >> 8] = stag;
    }
    /** @brief The entry of an STag allocated for fast registration of up to @p max_pages pages in PD @p pd, unmapped. */
    [[nodiscard]] static StagEntry allocated_stag(uint32_t pd, uint32_t max_pages) noexcept {
        StagEntry e;
        e.valid = false;
        e.pd = pd;
        e.max_pages = max_pages;
        return e;
    }
    /**
     * @brief Fast registration (executed in send queue order): the STag allocated as @p allocated (any consumer key
     *        of its index) becomes @p stag (the same index) over [@p addr, @p addr + @p length) of this process,
     *        tagged offsets from @p to_base, with rights @p access, if it is an invalid allocated STag of PD @p pd
     *        with room for @p pages pages and the range lies in one valid registered region of the PD (with local
     *        write when @p access writes): memory that region pinned and checked, so the new STag reaches nothing
     *        its region did not. The region becomes its parent: deregistering it makes the STag invalid again.
     *        False, nothing changed, otherwise.
     */
    [[nodiscard]] bool fast_register(ri_stag_t allocated, ri_stag_t stag, uint32_t pd, uint32_t pages, uint64_t addr,
                                     uint64_t length, uint64_t to_base, uint32_t access) {
        Change change(*this);
        auto k = keyed_.find(allocated >> 8);
        if (k == keyed_.end() || (stag >> 8) != (allocated >> 8)) return false;
        auto it = map_.find(k->second);
        if (it == map_.end()) return false;
        const StagEntry &was = it->second;
        if (was.max_pages == 0 || was.pd != pd || was.valid || pages > was.max_pages) return false;
        constexpr uint32_t kWrites = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC;
        const uint32_t need = (access & kWrites) != 0 ? uint32_t{RI_ACCESS_LOCAL_WRITE} : 0u;
        ri_stag_t parent = 0;
        for (const auto &[r, e] : map_) {
            if (!e.valid || e.pd != pd || e.parent != 0 || e.window || e.max_pages != 0 || (e.access & need) != need) {
                continue;
            }
            if (addr < e.addr || addr - e.addr > e.length || length > e.length - (addr - e.addr)) continue;
            parent = r;
            break;
        }
        if (parent == 0) return false;
        StagEntry n = StagEntry::region(addr, length, to_base, access, pd);
        n.max_pages = was.max_pages;
        n.parent = parent;
        if (was.parent == 0) ++windows_;  // counted with the entries that go with their region
        if (k->second != stag) {
            map_.erase(it);
            k->second = stag;
        }
        map_[stag] = n;
        return true;
    }
    /**
     * @brief The entry of the STag allocated as @p allocated (under whatever consumer key fast registration gave it
     *        since) and that key in @p current; false when it is not an allocated STag.
     */
    [[nodiscard]] bool find_allocated(ri_stag_t allocated, StagEntry &out, ri_stag_t &current) const {
        std::shared_lock lock(mutex_);
        auto k = keyed_.find(allocated >> 8);
        if (k == keyed_.end()) return false;
        auto it = map_.find(k->second);
        if (it == map_.end()) return false;
        out = it->second;
        current = k->second;
        return true;
    }
    /**
     * @brief Query MR of an STag allocated as @p allocated: @p out's state, keys and (while it maps memory) range and
     *        rights as fast registration left them in this table. Nothing changes for another STag.
     */
    void fast_reg_attr(ri_stag_t allocated, ri_mr_attr_t &out) const {
        StagEntry e;
        ri_stag_t current = 0;
        if (!find_allocated(allocated, e, current)) return;
        out.state = e.valid ? RI_STAG_VALID : RI_STAG_INVALID;
        out.keys = ri_mr_keys_t{current, current};
        if (!e.valid) return;
        out.addr = e.addr;
        out.length = e.length;
        out.iova = e.to_base;
        out.access = e.access;
    }
    /**
     * @brief Invalidates every window bound to QP @p qp_num (the QP is going: a later QP given its number must not
     *        find them bound to it). They stay allocated, to be bound again.
     */
    void invalidate_windows_of(uint32_t qp_num) {
        if (qp_num == 0) return;
        Change change(*this);
        if (windows_ == 0) return;
        for (auto &[stag, e] : map_) {
            if (e.qp == qp_num) e.valid = false;
        }
    }
    /** @brief The entry of an allocated, unbound window of protection domain @p pd. */
    [[nodiscard]] static StagEntry unbound_window(uint32_t pd) noexcept {
        StagEntry e;
        e.valid = false;
        e.pd = pd;
        e.window = true;
        return e;
    }
    /** @brief A copy of @p stag's entry (valid or not: the caller checks StagEntry::valid), or false when the STag
     *         names no region. */
    [[nodiscard]] bool find(ri_stag_t stag, StagEntry &out) const {
        std::shared_lock lock(mutex_);
        auto it = map_.find(stag);
        if (it == map_.end()) return false;
        out = it->second;
        return true;
    }
    /**
     * @brief find() through @p cache: the cached copy when the table has not changed since it was made (a lookup
     *        then happens before any change still to come), else a lookup that refills the cache.
     */
    [[nodiscard]] bool find(ri_stag_t stag, StagEntry &out, StagCache &cache) const {
        if (cache.stag == stag && cache.generation == generation_.load(std::memory_order_acquire)) {
            out = cache.entry;
            return true;
        }
        std::shared_lock lock(mutex_);
        auto it = map_.find(stag);
        if (it == map_.end()) return false;
        out = it->second;
        // Writers move the generation on while holding the lock exclusively: under the shared lock it is the one
        // this copy belongs to.
        cache = StagCache{stag, generation_.load(std::memory_order_relaxed), it->second};
        return true;
    }
    /**
     * @brief Marks @p stag invalid if it is a valid region of protection domain @p pd; false otherwise. The kVP is
     *        not told: the STag stays allocated there and becomes valid again only by reregistration.
     */
    [[nodiscard]] bool invalidate(ri_stag_t stag, uint32_t pd) {
        Change change(*this);
        auto it = map_.find(stag);
        if (it == map_.end() || it->second.pd != pd || !it->second.valid) return false;
        it->second.valid = false;
        return true;
    }

    /**
     * @brief Whether [@p addr, @p addr + @p len) of this process lies in a valid region of protection domain @p pd;
     *        if so, that region's bounds in @p lo and @p hi (what a DMA check caches until generation() changes).
     *        A scan of the table: for the slow path of a cached check only.
     */
    [[nodiscard]] bool covering(uint64_t addr, uint64_t len, uint32_t pd, uint64_t &lo, uint64_t &hi) const {
        std::shared_lock lock(mutex_);
        for (const auto &[stag, e] : map_) {
            if (!e.valid || e.pd != pd || addr < e.addr || addr - e.addr > e.length ||
                len > e.length - (addr - e.addr)) {
                continue;
            }
            lo = e.addr;
            hi = e.addr + e.length;
            return true;
        }
        return false;
    }
    /** @brief Moves on with every change (add, remove, invalidate): a check cached at another generation is stale. */
    [[nodiscard]] uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

private:
    // A writer's exclusive hold: the generation moves on before the lock is let go, whatever the change did.
    struct Change {
        explicit Change(StagTable &t) : table(t), lock(t.mutex_) {}
        ~Change() { table.generation_.fetch_add(1, std::memory_order_release); }
        Change(const Change &) = delete;
        Change &operator=(const Change &) = delete;
        StagTable &table;
        std::unique_lock<std::shared_mutex> lock;
    };

    mutable std::shared_mutex mutex_;
    std::atomic<uint64_t> generation_{1};  // moved on by every change; a StagCache of another generation is stale
    std::unordered_map<ri_stag_t, StagEntry> map_;
    std::unordered_map<uint32_t, ri_stag_t> keyed_;  // allocated STags: index -> the consumer key in effect
    size_t windows_ = 0;  // entries with a parent
};

}  // namespace providers::common

#endif  // PROVIDERS_COMMON_STAG_TABLE_HPP
