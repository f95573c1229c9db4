// Page locking on the kAL's instructions, in the owner of the pages.
#include "krdma/pins.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>

namespace krdma {
namespace {

// AddressSanitizer replaces mlock() with a call that does nothing and succeeds, so a sanitized build would accept a
// region over unmapped pages that every other build refuses: there, mincore() alone says whether they are mapped.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMlockIsANoOp = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMlockIsANoOp = true;
#else
constexpr bool kMlockIsANoOp = false;
#endif
#else
constexpr bool kMlockIsANoOp = false;
#endif

}  // namespace

bool mapped(uint64_t addr, uint64_t length) noexcept {
    if (length == 0 || addr + length < addr) return false;
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = addr & ~(page - 1);
    const uint64_t end = addr + length;
    // A bounded window at a time: a bogus length of terabytes must cost one failed call, not a vector of a byte per
    // page of it (4 GiB for 16 TiB).
    constexpr uint64_t kWindowPages = 4096;
    unsigned char vec[kWindowPages];
    for (uint64_t at = start; at < end;) {
        const uint64_t len = std::min(end - at, kWindowPages * page);
        if (::mincore(reinterpret_cast<void *>(static_cast<uintptr_t>(at)), len, vec) != 0) return false;
        at += len;
    }
    return true;
}

int apply_pins(std::span<const krdma_pin_op> ops) noexcept {
    int failed = 0;
    const krdma_pin_op *last = nullptr;
    for (const krdma_pin_op &p : ops) {
        // A QP's send and receive rings often share a page, and the kAL lists a lock for each: locking (or
        // unlocking) the same range again changes nothing, so it costs no second system call.
        const bool again = last != nullptr && last->op == p.op && last->addr == p.addr && last->length == p.length;
        last = &p;
        if (again) continue;
        void *addr = reinterpret_cast<void *>(static_cast<uintptr_t>(p.addr));
        if (p.op == KRDMA_PIN_LOCK) {
            const int err = ::mlock(addr, p.length) != 0 ? errno : 0;
            if (failed != 0) continue;
            if (err != 0) {
                failed = err == ENOMEM && !mapped(p.addr, p.length) ? EFAULT : err;
            } else if (kMlockIsANoOp && !mapped(p.addr, p.length)) {
                failed = EFAULT;
            }
        } else if (p.op == KRDMA_PIN_UNLOCK) {
            (void)::munlock(addr, p.length);
        }
    }
    return failed;
}

}  // namespace krdma
