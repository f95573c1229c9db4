/**
 * @file copy.hpp
 * @brief Payload copies that stay fast where `rep movsb` is not.
 *
 * On AMD Zen 3 and Zen 4 (and VMs on them), `rep movsb`, which glibc 2.36's memcpy uses from 4 KiB up and the
 * kernel's copy_from_user/copy_to_user use for every size when the CPU reports FSRM, is many times slower when the
 * destination lies a few bytes after the source modulo 4 KiB. An iWARP payload sits 16 (tagged) or 20 (untagged)
 * bytes after its FPDU's start, so this is exactly where page-aligned buffers land: a staging buffer's payload copied
 * to a page-aligned target, and the kernel copying a page-aligned source into a socket page right after the 16-byte
 * header it has just copied. A plain TCP stream of page-aligned buffers never meets it, which is why a 64 KiB Write
 * ping-pong cost 2-3x TCP's.
 *
 * Which offsets are slow depends on the CPU. On the project's first VMs every offset from 1 to 31 was (about 2 GB/s
 * instead of 40: 64 KiB in 26 us instead of 1.5); on a later Zen 4 (family 25, model 17) offsets 1 to 15 take 16
 * times as long, 17 to 31 about 1.4 times, and 16 no longer than 0. So the slow set is measured once per process
 * (slow_copy_offsets()), and a copy is worked around only where that pays here.
 */
#ifndef IWARP_COPY_HPP
#define IWARP_COPY_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace iwarp {

/** @brief Copies at least this long are worth checking (below it the slow path costs well under a microsecond). */
inline constexpr size_t kAliasCheckMin = 1024;

/**
 * @brief The offsets at which `rep movsb` is slow on this CPU: bit d (1 to 31) is set when a copy to a destination d
 *        bytes after its source, modulo 4 KiB, took more than twice as long as one at the fastest offset (the best
 *        of four interleaved runs of 32 KiB each, classify_copy_times()). Twice, because working around a slow copy
 *        costs one copy at full speed (a staged piece, or softrnic's realigned source): below that it does not pay,
 *        and a nearer line would follow the machine's noise (offset 16 on the Zen 4 above measures 1.0x alone and up
 *        to 1.7x beside a busy neighbour). Measured once per process, on first use, in under a millisecond; the
 *        providers ask at a stream's start so that no data path pays it. Where there is no `rep movsb` to measure
 *        (not x86-64) or no memory to measure with, every offset from 1 to 31 is named.
 */
[[nodiscard]] uint32_t slow_copy_offsets() noexcept;

/**
 * @brief The rule behind slow_copy_offsets(): bit d of the result (1 to 31) is set when @p best_us[d], the time of a
 *        copy to a destination d bytes after its source, exceeds twice the smallest of @p best_us. Bit 0 is never
 *        set.
 */
[[nodiscard]] uint32_t classify_copy_times(const double (&best_us)[32]) noexcept;

/**
 * @brief True when `rep movsb` from @p src to @p dst is slow on this CPU: dst 1 to 31 bytes after src, modulo 4 KiB,
 *        at an offset slow_copy_offsets() names.
 */
[[nodiscard]] inline bool aliased_copy(const void *dst, const void *src) noexcept {
    const uintptr_t d = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095u;
    return d < 32 && ((slow_copy_offsets() >> d) & 1u) != 0;
}

/**
 * @brief glibc's memcpy, called through a pointer the compiler cannot see through. GCC expands a memcpy whose
 *        length it can bound (a 1 KiB piece) inline as `rep movsq`, which has the same slow case as `rep movsb`:
 *        perf showed it taking three quarters of the sender's own time in a 32 KiB Write ping-pong.
 */
inline void *(*volatile const g_piece_copy)(void *, const void *, size_t) noexcept = std::memcpy;

/**
 * @brief memcpy(), except that a long copy in the slow case goes in 1 KiB pieces, each below every glibc
 *        `rep movsb` threshold (2 KiB at the least), so its vector loop moves them.
 */
inline void copy_payload(void *dst, const void *src, size_t n) noexcept {
    if (n < kAliasCheckMin || !aliased_copy(dst, src)) {
        std::memcpy(dst, src, n);
        return;
    }
    auto *d = static_cast<uint8_t *>(dst);
    const auto *s = static_cast<const uint8_t *>(src);
    constexpr size_t kPiece = 1024;
    while (n > 0) {
        const size_t k = n < kPiece ? n : kPiece;
        g_piece_copy(d, s, k);
        d += k;
        s += k;
        n -= k;
    }
}

/**
 * @brief Makes every store this thread made so far (its own copies, and the kernel's copies into its buffers in the
 *        system calls it made, which ran on this CPU) visible to other CPUs before any store it makes afterwards.
 *
 * The payload of a tagged message is placed so that its last byte is written after this fence and every other byte
 * before it (Engine::payload_target(), hwstub's DmaChannel::write()): a consumer that polls the last byte of a
 * buffer for a peer's RDMA Write (perftest's ib_write_lat, `dtest -W -D`, MPI eager paths) then finds the whole
 * message there. Without it, the stores of a single `rep movsb` (the kernel's copy into a recvmsg buffer, glibc's
 * memcpy from 2 KiB up) may become visible in any order, and glibc's vector copy stores a large copy's head and
 * tail after its loop. On x86 an `sfence` (it orders fast-string and non-temporal stores, which the plain
 * store-ordering of x86 does not cover, and costs a few nanoseconds); elsewhere a release fence. Once per message.
 */
inline void placement_fence() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_sfence();
#endif
    std::atomic_thread_fence(std::memory_order_release);
}

}  // namespace iwarp

#endif  // IWARP_COPY_HPP
