// A minimal measuring harness for the benchmarks: run a body until a time budget is spent, report bytes per second.
#ifndef BENCH_HARNESS_HPP
#define BENCH_HARNESS_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

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

/**
 * @brief An 8-byte RDMA Write ping-pong as ib_write_lat runs it, for @p seconds: side a writes the round's value into
 *        @p b_mem, a responder thread for side b sees it there and writes it back into @p a_mem, and a waits for it.
 *        Each side reaps its completions while it waits (which drives a provider's inline progress).
 * @param write_a / write_b post the side's 8-byte Write of the value (a uint8_t) to the other; false stops the run.
 * @param reap_a / reap_b poll the side's completions.
 * @return seconds per half round trip; 0 when no round completed or an answer did not come within 5 s (the figure
 *         fails instead of hanging the run).
 */
template <class WriteA, class WriteB, class ReapA, class ReapB>
double write_pingpong(double seconds, volatile uint8_t *a_mem, volatile uint8_t *b_mem, WriteA &&write_a,
                      WriteB &&write_b, ReapA &&reap_a, ReapB &&reap_b) {
    using clock = std::chrono::steady_clock;
    // Each run starts from zero: a value left by the previous run must not pass for this one's answer.
    *a_mem = 0;
    *b_mem = 0;
    std::atomic<bool> stop{false};
    std::thread responder([&] {
        uint8_t expect = 1;
        while (!stop.load(std::memory_order_relaxed)) {
            while (*b_mem != expect) {
                if (stop.load(std::memory_order_relaxed)) return;
                reap_b();
            }
            (void)write_b(expect);
            ++expect;
        }
    });
    auto finish = [&](double result) {
        stop = true;
        responder.join();
        return result;
    };
    uint8_t v = 1;
    size_t n = 0;
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock::now() < end) {
        if (!write_a(v)) break;
        const auto give_up = clock::now() + std::chrono::seconds(5);
        for (uint32_t spins = 0; *a_mem != v; ++spins) {
            reap_a();
            if ((spins & 1023) == 1023 && clock::now() > give_up) return finish(0);
        }
        ++v;
        ++n;
    }
    const double el = std::chrono::duration<double>(clock::now() - t0).count();
    return finish(n == 0 ? 0 : el / static_cast<double>(n) / 2);
}

}  // namespace bench

#endif  // BENCH_HARNESS_HPP
