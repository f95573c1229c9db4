// Which relative page offsets make `rep movsb` slow on this CPU (iwarp/copy.hpp): measured, because it differs
// between CPU models of one family and no library or kernel interface reports it.
#include "iwarp/copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>

namespace iwarp {
namespace {

constexpr uint32_t kEveryOffset = 0xfffffffeu;  // 1 to 31: what the project assumed before it measured

#if defined(__x86_64__)
void movsb(void *dst, const void *src, size_t n) noexcept {
    asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

uint32_t measure() noexcept {
    constexpr size_t kLen = 32u << 10;  // past L1, where the offsets that only cost in L1 stop mattering
    constexpr int kRuns = 4;             // interleaved, so one preemption spoils one sample of one offset
    struct Free {
        void operator()(uint8_t *p) const noexcept { std::free(p); }
    };
    void *a = nullptr, *b = nullptr;
    if (::posix_memalign(&a, 4096, kLen + 4096) != 0) return kEveryOffset;
    std::unique_ptr<uint8_t, Free> src(static_cast<uint8_t *>(a));
    if (::posix_memalign(&b, 4096, kLen + 4096) != 0) return kEveryOffset;
    std::unique_ptr<uint8_t, Free> dst(static_cast<uint8_t *>(b));
    for (size_t i = 0; i < kLen + 4096; ++i) src.get()[i] = static_cast<uint8_t>(i);
    movsb(dst.get(), src.get(), kLen + 4096);  // fault the destination in
    double best[32];
    std::fill(std::begin(best), std::end(best), std::numeric_limits<double>::max());
    for (int run = 0; run < kRuns; ++run) {
        for (size_t d = 0; d < 32; ++d) {
            const auto t0 = std::chrono::steady_clock::now();
            movsb(dst.get() + d, src.get(), kLen);
            const auto t1 = std::chrono::steady_clock::now();
            best[d] = std::min(best[d], std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
    }
    return classify_copy_times(best);
}
#else
uint32_t measure() noexcept { return kEveryOffset; }
#endif

}  // namespace

uint32_t classify_copy_times(const double (&best_us)[32]) noexcept {
    // The yardstick is the fastest offset, not offset 0 alone: a sample of offset 0 slowed by the machine would
    // otherwise clear offsets that are slow.
    const double fastest = *std::min_element(std::begin(best_us), std::end(best_us));
    uint32_t slow = 0;
    for (uint32_t d = 1; d < 32; ++d) {
        if (best_us[d] > 2.0 * fastest) slow |= 1u << d;
    }
    return slow;
}

uint32_t slow_copy_offsets() noexcept {
    static const uint32_t slow = measure();
    return slow;
}

}  // namespace iwarp
