/** @file stats.cpp @brief Latency distribution and the choice of the best round. */
#include "stats.hpp"

#include <algorithm>
#include <cmath>

namespace it_perf {

namespace {

// Nearest-rank percentile of sorted samples: the smallest sample with at least p of all samples at or below it.
uint64_t nearest_rank(const std::vector<uint64_t> &sorted, double p) {
    const auto n = static_cast<double>(sorted.size());
    auto rank = static_cast<size_t>(std::ceil(p * n));
    rank = std::clamp<size_t>(rank, 1, sorted.size());
    return sorted[rank - 1];
}

}  // namespace

LatencyStats summarize_latency(std::vector<uint64_t> &samples_ns, unsigned divisor) {
    LatencyStats s;
    if (samples_ns.empty() || divisor == 0) return s;
    std::sort(samples_ns.begin(), samples_ns.end());
    const double scale = 1.0 / (1000.0 * divisor);  // ns -> us, then per direction
    const size_t n = samples_ns.size();
    double sum = 0;
    for (uint64_t v : samples_ns) sum += static_cast<double>(v);
    const double mean = sum / static_cast<double>(n);
    double var = 0;
    for (uint64_t v : samples_ns) var += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
    var /= static_cast<double>(n);
    s.min_us = static_cast<double>(samples_ns.front()) * scale;
    s.max_us = static_cast<double>(samples_ns.back()) * scale;
    // The median of an even count is the mean of the two middle samples.
    s.typical_us = (n % 2 == 1 ? static_cast<double>(samples_ns[n / 2])
                               : (static_cast<double>(samples_ns[n / 2 - 1]) + static_cast<double>(samples_ns[n / 2])) / 2) *
                   scale;
    s.avg_us = mean * scale;
    s.stdev_us = std::sqrt(var) * scale;
    s.p99_us = static_cast<double>(nearest_rank(samples_ns, 0.99)) * scale;
    s.p999_us = static_cast<double>(nearest_rank(samples_ns, 0.999)) * scale;
    return s;
}

bool better(const Measurement &a, const Measurement &b, bool latency) {
    if (!a.valid) return false;
    if (!b.valid) return true;
    return latency ? a.latency.typical_us < b.latency.typical_us : a.bytes_per_second() > b.bytes_per_second();
}

}  // namespace it_perf
