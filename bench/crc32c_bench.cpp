// CRC32c throughput on 64 KiB buffers next to memcpy of the same buffers in the same run.
// Target (issue 3): >= 20 GB/s. Run: build/bench/bench_crc32c [--seconds S] [--json FILE]
#include <cstdint>
#include <memory>
#include <span>

#include "harness.hpp"
#include "iwarp/crc32c.hpp"

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_crc32c", argc, argv);
    constexpr size_t kSize = 64 * 1024;
    // Page-aligned: glibc's memcpy of a destination 1-31 bytes after its source (modulo 4 KiB) takes AMD Zen 3/4's
    // slow `rep movsb` case (iwarp/copy.hpp), which would make the baseline 20 times slower than memory is.
    struct Page {
        alignas(4096) uint8_t b[kSize];
    };
    auto src_page = std::make_unique<Page>(), dst_page = std::make_unique<Page>();
    std::span<uint8_t> src(src_page->b, kSize), dst(dst_page->b, kSize);
    for (size_t i = 0; i < kSize; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);

    double memcpy_bps = bench::bytes_per_second(seconds, kSize, [&] {
        std::memcpy(dst.data(), src.data(), kSize);
        bench::keep(dst[kSize / 2]);
    });
    double hw_bps = bench::bytes_per_second(seconds, kSize, [&] { bench::keep(iwarp::crc32c(src.data(), kSize)); });
    double instr_bps = bench::bytes_per_second(
        seconds, kSize, [&] { bench::keep(iwarp::detail::crc32c_extend_instruction(0, src.data(), kSize)); });
    double soft_bps = bench::bytes_per_second(
        seconds, kSize, [&] { bench::keep(iwarp::detail::crc32c_extend_soft(0, src.data(), kSize)); });

    std::printf("CRC32c on 64 KiB buffers (crc32 instruction %s, VPCLMULQDQ folding %s)\n",
                iwarp::crc32c_hardware() ? "present" : "absent", iwarp::detail::crc32c_folding() ? "used" : "absent");
    bench::row("crc32c (dispatch)", hw_bps, "memcpy", memcpy_bps);
    bench::row("crc32c (crc32 instruction, 3-way)", instr_bps, "memcpy", memcpy_bps);
    bench::row("crc32c (table, slicing-by-8)", soft_bps, "memcpy", memcpy_bps);
    figures.add("crc32c 64 KiB (dispatch)", hw_bps / 1e9, "GB/s", "memcpy", memcpy_bps / 1e9, -1, ">= 20 GB/s",
                hw_bps >= 20e9);
    figures.add("crc32c 64 KiB (crc32 instruction, 3-way)", instr_bps / 1e9, "GB/s", "memcpy", memcpy_bps / 1e9);
    figures.add("crc32c 64 KiB (table, slicing-by-8)", soft_bps / 1e9, "GB/s", "memcpy", memcpy_bps / 1e9);
    std::printf("target: crc32c >= 20 GB/s -> %s\n", hw_bps >= 20e9 ? "met" : "NOT met on this machine");
    return 0;
}
