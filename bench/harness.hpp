// A minimal measuring harness for the benchmarks: run a body until a time budget is spent, report bytes per second.
#ifndef BENCH_HARNESS_HPP
#define BENCH_HARNESS_HPP

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace bench {

/** @brief Seconds per measurement, from `--seconds S` (default 0.5). */
inline double budget_from_args(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--seconds") == 0) return std::atof(argv[i + 1]);
    }
    return 0.5;
}

/** @brief Keeps the optimizer from discarding a computed value. */
template <class T>
inline void keep(const T &value) {
    asm volatile("" : : "r,m"(value) : "memory");
}

/** @brief Calls body() repeatedly for @p seconds (at least once) and returns bytes per second. */
template <class Body>
double bytes_per_second(double seconds, size_t bytes_per_call, Body &&body) {
    using clock = std::chrono::steady_clock;
    body();  // warm caches and lazily built tables
    size_t calls = 0;
    auto start = clock::now();
    auto deadline = start + std::chrono::duration<double>(seconds);
    clock::time_point now;
    do {
        for (int i = 0; i < 16; ++i) body();
        calls += 16;
        now = clock::now();
    } while (now < deadline);
    double elapsed = std::chrono::duration<double>(now - start).count();
    return static_cast<double>(calls * bytes_per_call) / elapsed;
}

/** @brief Prints one result row: name, GB/s, baseline GB/s, ratio. */
inline void row(const std::string &name, double bps, const std::string &baseline_name, double baseline_bps) {
    std::printf("%-34s %9.2f GB/s   %-12s %9.2f GB/s   ratio %6.3f\n", name.c_str(), bps / 1e9,
                baseline_name.c_str(), baseline_bps / 1e9, bps / baseline_bps);
}

}  // namespace bench

#endif  // BENCH_HARNESS_HPP
