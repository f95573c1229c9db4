// Queue memory of the data path: page-aligned mappings made once at create (the kVP pins them), work-request rings
// of fixed-size slots on them, and the spin lock that guards a ring on the fast path.
#ifndef SOFTRNIC_DATAPATH_RING_HPP
#define SOFTRNIC_DATAPATH_RING_HPP

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

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
