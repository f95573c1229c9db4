/**
 * @file stats.hpp
 * @brief it_perf's measurements and the statistics drawn from them: bandwidth and message rate of a stream of
 *        operations, and the latency distribution (perftest's t_min / t_typical / t_avg / percentiles) of a
 *        ping-pong or of one operation at a time.
 *
 * Pure computation: no clock, no I/O, so every figure can be checked against hand-made samples.
 */
#ifndef IT_PERF_STATS_HPP
#define IT_PERF_STATS_HPP

#include <cstdint>
#include <vector>

namespace it_perf {

/** @brief The latency distribution of one test, in microseconds. */
struct LatencyStats {
    double min_us = 0;     /**< Fastest sample. */
    double max_us = 0;     /**< Slowest sample. */
    double typical_us = 0; /**< The median (perftest's t_typical). */
    double avg_us = 0;     /**< The mean. */
    double stdev_us = 0;   /**< Population standard deviation. */
    double p99_us = 0;     /**< 99th percentile. */
    double p999_us = 0;    /**< 99.9th percentile. */
};

/**
 * @brief Summarizes @p samples_ns (nanoseconds per sample; reordered in place), each divided by @p divisor first:
 *        2 for a ping-pong, whose one-way latency is half a round trip, 1 for an operation timed alone (as
 *        perftest's ib_read_lat). An empty vector gives all zeros.
 *
 * Percentiles take the sample at rank ceil(p * n) (nearest rank), so p99 of 100 samples is the 99th smallest.
 */
LatencyStats summarize_latency(std::vector<uint64_t> &samples_ns, unsigned divisor);

/** @brief What one run of a test measured, on RDMA or on TCP. */
struct Measurement {
    bool valid = false;      /**< False when the run failed or was not made. */
    uint64_t iterations = 0; /**< Timed operations (messages, round trips, reads). */
    uint64_t bytes = 0;      /**< Payload bytes moved by the timed operations (bandwidth tests). */
    double seconds = 0;      /**< Wall time of the timed operations (bandwidth tests). */
    LatencyStats latency;    /**< Latency tests only. */

    /** @brief Payload bytes per second (0 when nothing was timed). */
    [[nodiscard]] double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
    /** @brief Millions of messages per second. */
    [[nodiscard]] double mpps() const { return seconds > 0 ? static_cast<double>(iterations) / seconds / 1e6 : 0; }
};

/** @brief Bandwidth in gigabits per second (10^9 bits), as perftest's --report_gbits. */
inline double gbit_per_second(double bytes_per_second) { return bytes_per_second * 8 / 1e9; }
/** @brief Bandwidth in MB/s with perftest's MB of 2^20 bytes. */
inline double mib_per_second(double bytes_per_second) { return bytes_per_second / (1024.0 * 1024.0); }

/**
 * @brief Of several rounds of the same test, the better one: the higher bandwidth, or for latency the lower
 *        typical (median) latency. An invalid measurement always loses.
 */
[[nodiscard]] bool better(const Measurement &a, const Measurement &b, bool latency);

}  // namespace it_perf

#endif  // IT_PERF_STATS_HPP
