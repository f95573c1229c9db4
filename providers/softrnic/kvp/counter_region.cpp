// The counters region: one memfd per RNIC open, shared with the data path that writes it.
#include "counter_region.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "counters.hpp"

namespace softrnic::kvp {

std::unique_ptr<CounterRegion> CounterRegion::create(uint32_t slots, int *fd_out) {
    if (fd_out != nullptr) *fd_out = -1;
    if (slots == 0) return nullptr;
    const size_t length = static_cast<size_t>(slots) * sizeof(softrnic_qp_counters);
    const int fd = ::memfd_create("softrnic-counters", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    // Sparse: a page of the region exists only once a slot on it was handed out.
    void *m = ::ftruncate(fd, static_cast<off_t>(length)) == 0
                  ? ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    if (m == MAP_FAILED) {
        ::close(fd);
        return nullptr;
    }
    if (fd_out != nullptr) {
        *fd_out = fd;
    } else {
        ::close(fd);  // the mapping keeps the memory
    }
    return std::unique_ptr<CounterRegion>(new CounterRegion(static_cast<uint8_t *>(m), length, slots));
}

CounterRegion::~CounterRegion() { ::munmap(base_, length_); }

std::optional<uint32_t> CounterRegion::allocate() {
    std::optional<uint32_t> n;
    {
        std::lock_guard g(mutex_);
        n = pool_.allocate();
    }
    if (n) {
        softrnic_qp_counters *s = slot(*n);
        // Relaxed stores like the writer's: a reader may look at any time.
        for (uint64_t *f = &s->tx_bytes; f <= &s->nudges; ++f) std::atomic_ref<uint64_t>(*f).store(0, std::memory_order_relaxed);
    }
    return n;
}

void CounterRegion::release(uint32_t slot) noexcept {
    std::lock_guard g(mutex_);
    pool_.release(slot);
}

softrnic_qp_counters *CounterRegion::slot(uint32_t n) const noexcept {
    return n < slots_ ? reinterpret_cast<softrnic_qp_counters *>(base_ + static_cast<size_t>(n) * sizeof(softrnic_qp_counters))
                      : nullptr;
}

ri_qp_stats_t CounterRegion::read(uint32_t n) const noexcept {
    const softrnic_qp_counters *s = slot(n);
    return s != nullptr ? datapath::CounterSlot::read(*s) : ri_qp_stats_t{};
}

}  // namespace softrnic::kvp
