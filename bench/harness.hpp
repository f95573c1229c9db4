// A minimal measuring harness for the benchmarks: run a body until a time budget is spent, report bytes per second.
#ifndef BENCH_HARNESS_HPP
#define BENCH_HARNESS_HPP

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace bench {

/** @brief Seconds per measurement, from `--seconds S` (default 0.5). */
inline double budget_from_args(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--seconds") == 0) return std::atof(argv[i + 1]);
    }
    return 0.5;
}

/**
 * @brief The figures of one benchmark run, written as JSON to the file named by `--json FILE` (`-` for standard
 *        output) when the program ends; without `--json` nothing is written. `scripts/figures.sh` reads these files
 *        to write the tables of `docs/performance.md`, so the tables are regenerated, never edited.
 *
 * The file is `{"tool": ..., "seconds": S, "figures": [{"name", "value", "unit", "baseline", "baseline_value",
 * "ratio", "target", "met"}, ...]}`; a field a figure does not have is null.
 */
class Figures {
public:
    /** @brief One measured figure, with the baseline it is compared with when it has one. */
    struct Figure {
        std::string name;            ///< what was measured
        double value = 0;            ///< the figure, in @ref unit
        std::string unit;            ///< e.g. "GB/s", "us", "ratio"
        std::string baseline;        ///< the baseline's name; empty when there is none
        double baseline_value = 0;   ///< the baseline, in @ref unit
        double ratio = 0;            ///< figure / baseline as the program prints it; 0 when there is none
        std::string target;          ///< e.g. ">= 0.95x"; empty when the figure has no target
        int met = -1;                ///< 1 met, 0 not met, -1 no target
    };

    /** @brief Reads `--json FILE` from the arguments; @p tool names the program in the file. */
    Figures(const char *tool, int argc, char **argv) : tool_(tool) {
        for (int i = 1; i + 1 < argc; ++i) {
            if (std::strcmp(argv[i], "--json") == 0) path_ = argv[i + 1];
        }
        seconds_ = budget_from_args(argc, argv);
    }
    Figures(const Figures &) = delete;
    Figures &operator=(const Figures &) = delete;
    ~Figures() { (void)write(); }

    /** @brief Records one figure. */
    void add(Figure f) { figures_.push_back(std::move(f)); }

    /** @brief Records a figure with no baseline. */
    void add(const std::string &name, double value, const std::string &unit, const std::string &target = {},
             int met = -1) {
        add(Figure{name, value, unit, {}, 0, 0, target, met});
    }

    /** @brief Records a figure next to its baseline (ratio = value / baseline unless given). */
    void add(const std::string &name, double value, const std::string &unit, const std::string &baseline,
             double baseline_value, double ratio = -1, const std::string &target = {}, int met = -1) {
        if (ratio < 0) ratio = baseline_value > 0 ? value / baseline_value : 0;
        add(Figure{name, value, unit, baseline, baseline_value, ratio, target, met});
    }

    /** @brief Writes the file once (also done by the destructor); false when it could not be written. */
    bool write() {
        if (path_.empty() || written_) return true;
        written_ = true;
        std::FILE *out = path_ == "-" ? stdout : std::fopen(path_.c_str(), "w");
        if (out == nullptr) {
            std::fprintf(stderr, "%s: cannot write %s: %s\n", tool_.c_str(), path_.c_str(), std::strerror(errno));
            return false;
        }
        std::fprintf(out, "{\"tool\": %s, \"seconds\": %g, \"figures\": [", quote(tool_).c_str(), seconds_);
        for (size_t i = 0; i < figures_.size(); ++i) {
            const Figure &f = figures_[i];
            std::fprintf(out, "%s\n  {\"name\": %s, \"value\": %s, \"unit\": %s, \"baseline\": %s, "
                              "\"baseline_value\": %s, \"ratio\": %s, \"target\": %s, \"met\": %s}",
                         i == 0 ? "" : ",", quote(f.name).c_str(), number(f.value).c_str(), quote(f.unit).c_str(),
                         f.baseline.empty() ? "null" : quote(f.baseline).c_str(),
                         f.baseline.empty() ? "null" : number(f.baseline_value).c_str(),
                         f.baseline.empty() || f.ratio <= 0 ? "null" : number(f.ratio).c_str(),
                         f.target.empty() ? "null" : quote(f.target).c_str(),
                         f.met < 0 ? "null" : (f.met != 0 ? "true" : "false"));
        }
        std::fprintf(out, "\n]}\n");
        return out == stdout ? std::fflush(out) == 0 : std::fclose(out) == 0;
    }

private:
    static std::string quote(const std::string &s) {
        std::string o = "\"";
        for (unsigned char c : s) {
            if (c == '"' || c == '\\') {
                o += '\\';
                o += static_cast<char>(c);
            } else if (c < 0x20) {
                char esc[8];
                std::snprintf(esc, sizeof esc, "\\u%04x", c);
                o += esc;
            } else {
                o += static_cast<char>(c);
            }
        }
        return o + '"';
    }
    // JSON has no NaN or infinity: a figure that could not be measured is null.
    static std::string number(double v) {
        if (!(v == v) || v > 1e300 || v < -1e300) return "null";
        char b[32];
        std::snprintf(b, sizeof b, "%.6g", v);
        return b;
    }

    std::string tool_;
    std::string path_;
    double seconds_ = 0;
    bool written_ = false;
    std::vector<Figure> figures_;
};

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
