// Queue memory of the data path: page-aligned mappings made once at create (the kVP pins them), work-request rings
// of fixed-size slots on them, and the spin lock that guards a ring on the fast path.
#ifndef SOFTRNIC_DATAPATH_RING_HPP
#define SOFTRNIC_DATAPATH_RING_HPP

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace softrnic::datapath {

// A short critical section on the fast path (a post, a poll): cheaper than a mutex, never held across a call out.
class SpinLock {
public:
    void lock() noexcept {
        while (flag_.exchange(true, std::memory_order_acquire)) {
            while (flag_.load(std::memory_order_relaxed)) {
            }
        }
    }
    [[nodiscard]] bool try_lock() noexcept { return !flag_.exchange(true, std::memory_order_acquire); }
    void unlock() noexcept { flag_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> flag_{false};
};

// Anonymous, page-aligned memory of its own pages, so pinning and locking it touches nothing else.
class Mapping {
public:
    Mapping() = default;
    explicit Mapping(size_t length) {
        const size_t page = 4096;
        const size_t rounded = (length + page - 1) / page * page;
        void *p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            base_ = static_cast<uint8_t *>(p);
            length_ = rounded;
        }
    }
    Mapping(Mapping &&o) noexcept : base_(std::exchange(o.base_, nullptr)), length_(std::exchange(o.length_, 0)) {}
    Mapping &operator=(Mapping &&o) noexcept {
        if (this != &o) {
            reset();
            base_ = std::exchange(o.base_, nullptr);
            length_ = std::exchange(o.length_, 0);
        }
        return *this;
    }
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() { reset(); }

    [[nodiscard]] bool ok() const noexcept { return base_ != nullptr; }
    [[nodiscard]] uint8_t *data() const noexcept { return base_; }
    [[nodiscard]] size_t size() const noexcept { return length_; }
    [[nodiscard]] uint64_t address() const noexcept { return reinterpret_cast<uintptr_t>(base_); }

private:
    void reset() noexcept {
        if (base_ != nullptr) ::munmap(base_, length_);
        base_ = nullptr;
        length_ = 0;
    }
    uint8_t *base_ = nullptr;
    size_t length_ = 0;
};

// Queue memory for small queue pairs, several to a page: a QP of depth 16 needs 2 KiB of rings, and a page of its
// own would double what an idle connection costs. Blocks are 64-byte aligned powers of two from 256 bytes to half a
// page, zeroed when handed out; pages come from 64 KiB mappings kept until the arena goes (the pin map counts
// pins per page, so neighbours pinning the same page is fine). Thread-safe; used at create and destroy only.
class RingArena {
public:
    static constexpr size_t kPage = 4096;
    static constexpr size_t kMinBlock = 256;
    // Largest block the arena serves; larger rings get a mapping of their own.
    static constexpr size_t kMaxBlock = kPage / 2;

    // A zeroed block of at least @p length bytes (at most kMaxBlock), or nullptr when out of memory.
    uint8_t *get(size_t length) {
        const size_t c = size_class(length);
        const size_t size = kMinBlock << c;
        std::lock_guard g(lock_);
        std::vector<uint8_t *> &free = free_[c];
        uint8_t *p = nullptr;
        if (!free.empty()) {
            p = free.back();
            free.pop_back();
        } else {
            if (chunks_.empty() || next_page_ == kChunk / kPage) {
                Mapping m(kChunk);
                if (!m.ok()) return nullptr;
                chunks_.push_back(std::move(m));
                next_page_ = 0;
            }
            p = chunks_.back().data() + next_page_++ * kPage;
            for (size_t off = kPage - size; off > 0; off -= size) free.push_back(p + off);
        }
        std::memset(p, 0, size);
        return p;
    }
    // Gives back a block get(@p length) returned.
    void put(uint8_t *p, size_t length) {
        if (p == nullptr) return;
        std::lock_guard g(lock_);
        free_[size_class(length)].push_back(p);
    }

    // A zeroed mapping of at least @p length bytes, for rings larger than kMaxBlock: one given back of the same size
    // when there is one (its pages are in memory already: no mmap, no page fault, no munmap when it was freed),
    // else a new one. Not ok() when out of memory.
    Mapping take(size_t length) {
        const size_t rounded = (length + kPage - 1) / kPage * kPage;
        Mapping m;
        {
            std::lock_guard g(lock_);
            for (size_t i = 0; i < cached_.size(); ++i) {
                if (cached_[i].size() != rounded) continue;
                m = std::move(cached_[i]);
                cached_[i] = std::move(cached_.back());
                cached_.pop_back();
                cached_bytes_ -= rounded;
                break;
            }
        }
        if (!m.ok()) return Mapping(length);
        std::memset(m.data(), 0, m.size());
        return m;
    }
    // Gives back a mapping take() returned: kept for the next take() while the arena keeps at most kCachedBytes,
    // unmapped otherwise.
    void keep(Mapping m) {
        std::lock_guard g(lock_);
        if (!m.ok() || cached_bytes_ + m.size() > kCachedBytes) return;  // m unmaps as it goes
        cached_bytes_ += m.size();
        cached_.push_back(std::move(m));
    }

    // Bytes of freed mappings kept for take().
    [[nodiscard]] size_t kept_bytes() {
        std::lock_guard g(lock_);
        return cached_bytes_;
    }

private:
    // What the arena keeps of freed mappings: sixteen QPs' rings at the default depths, so a server that accepts
    // and frees connections all day maps and faults no ring memory after the first ones.
    static constexpr size_t kCachedBytes = 256 * 1024;
    static constexpr size_t kChunk = 16 * kPage;
    static constexpr size_t kClasses = 4;  // 256, 512, 1024, 2048
    static size_t size_class(size_t length) {
        size_t c = 0;
        while ((kMinBlock << c) < length && c + 1 < kClasses) ++c;
        return c;
    }
    std::mutex lock_;
    std::vector<Mapping> chunks_;
    size_t next_page_ = 0;
    std::vector<uint8_t *> free_[kClasses];
    std::vector<Mapping> cached_;
    size_t cached_bytes_ = 0;
};

// Queue memory of one queue pair: a block of the arena when small, else a mapping of its own (which the arena
// keeps for the next queue pair of its size when this one goes).
class RingMemory {
public:
    RingMemory() = default;
    RingMemory(std::shared_ptr<RingArena> arena, size_t length) {
        if (length <= RingArena::kMaxBlock) {
            base_ = arena->get(length);
            length_ = length;
        } else {
            own_ = arena->take(length);
            base_ = own_.data();
            length_ = own_.size();
        }
        if (base_ != nullptr) arena_ = std::move(arena);
    }
    RingMemory(RingMemory &&o) noexcept
        : arena_(std::move(o.arena_)), own_(std::move(o.own_)), base_(std::exchange(o.base_, nullptr)),
          length_(std::exchange(o.length_, 0)) {}
    RingMemory &operator=(RingMemory &&o) noexcept {
        if (this != &o) {
            reset();
            arena_ = std::move(o.arena_);
            own_ = std::move(o.own_);
            base_ = std::exchange(o.base_, nullptr);
            length_ = std::exchange(o.length_, 0);
        }
        return *this;
    }
    RingMemory(const RingMemory &) = delete;
    RingMemory &operator=(const RingMemory &) = delete;
    ~RingMemory() { reset(); }

    [[nodiscard]] bool ok() const noexcept { return base_ != nullptr; }
    [[nodiscard]] uint8_t *data() const noexcept { return base_; }
    [[nodiscard]] uint64_t address() const noexcept { return reinterpret_cast<uintptr_t>(base_); }

private:
    void reset() noexcept {
        if (arena_ && own_.ok()) {
            arena_->keep(std::move(own_));
        } else if (arena_ && base_ != nullptr) {
            arena_->put(base_, length_);
        }
        arena_.reset();
        own_ = Mapping();
        base_ = nullptr;
        length_ = 0;
    }
    std::shared_ptr<RingArena> arena_;
    Mapping own_;
    uint8_t *base_ = nullptr;
    size_t length_ = 0;
};

// A ring of `depth` slots of `slot_size` bytes: the producer fills the slot after the last, the consumer takes the
// first. The caller holds the ring's lock.
class SlotRing {
public:
    SlotRing() = default;
    SlotRing(uint8_t *base, uint32_t depth, uint32_t slot_size) : base_(base), depth_(depth), slot_(slot_size) {}

    [[nodiscard]] uint32_t depth() const noexcept { return depth_; }
    [[nodiscard]] uint32_t count() const noexcept { return count_; }
    [[nodiscard]] bool full() const noexcept { return count_ >= depth_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    // The slot a push fills; valid while not full().
    [[nodiscard]] uint8_t *next() const noexcept { return slot_at((head_ + count_) % depth_); }
    void push() noexcept { ++count_; }
    // The oldest slot; valid while not empty().
    [[nodiscard]] uint8_t *front() const noexcept { return slot_at(head_); }
    void pop() noexcept {
        head_ = (head_ + 1) % depth_;
        --count_;
    }
    void clear() noexcept { head_ = count_ = 0; }
    // Slot number (0..depth-1) of the oldest slot, and of the slot @p n places after it.
    [[nodiscard]] uint32_t head() const noexcept { return head_; }
    [[nodiscard]] uint32_t index(uint32_t n) const noexcept { return (head_ + n) % depth_; }
    // The slot with slot number @p i.
    [[nodiscard]] uint8_t *at(uint32_t i) const noexcept { return slot_at(i); }

private:
    [[nodiscard]] uint8_t *slot_at(uint32_t i) const noexcept { return base_ + static_cast<size_t>(i) * slot_; }
    uint8_t *base_ = nullptr;
    uint32_t depth_ = 0;
    uint32_t slot_ = 0;
    uint32_t head_ = 0;
    uint32_t count_ = 0;
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_RING_HPP
