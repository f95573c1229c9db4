/** @file report.cpp @brief The table, the summary, JSON and CSV. */
#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace it_perf {

double Row::ratio() const {
    if (!rdma.valid || !tcp.valid) return 0;
    if (test.kind == Kind::bw) {
        const double base = tcp.bytes_per_second();
        return base > 0 ? rdma.bytes_per_second() / base : 0;
    }
    return tcp.latency.typical_us > 0 ? rdma.latency.typical_us / tcp.latency.typical_us : 0;
}

double target_ratio(Kind kind) { return kind == Kind::bw ? 0.95 : 1.10; }

bool meets_target(const Row &row) {
    const double r = row.ratio();
    if (r <= 0) return false;
    return row.test.kind == Kind::bw ? r >= target_ratio(Kind::bw) : r <= target_ratio(Kind::lat);
}

namespace {

const char *perftest_title(Op op) {
    switch (op) {
        case Op::send: return "Send";
        case Op::write: return "RDMA_Write";
        case Op::read: return "RDMA_Read";
    }
    return "?";
}

const char *tcp_shape(const TestCase &t) {
    if (t.kind == Kind::bw) return "one TCP stream writing messages of the same size";
    return t.op == Op::read ? "TCP request (8 B) and response of the size, full round trip"
                            : "TCP ping-pong of the size, half round trip";
}

const char *dashes =
    "-----------------------------------------------------------------------------------------------------------"
    "-----------";

void print_block_header(std::FILE *out, const RunInfo &info, const TestCase &t) {
    std::fprintf(out, "%s\n", dashes);
    std::fprintf(out, "                    %s %s Test%s\n", perftest_title(t.op), t.kind == Kind::bw ? "BW" : "Latency",
                 info.tcp_only ? " (TCP baseline only)" : "");
    std::fprintf(out, " IT-API interface: %s   peer: %s   mode: %s   path: %s   completions: %s\n", info.ia.c_str(),
                 info.peer.c_str(), info.mode.c_str(), info.path.empty() ? "-" : info.path.c_str(),
                 info.event_mode ? "it_evd_wait (event)" : "it_evd_dequeue (poll)");
    if (t.kind == Kind::bw)
        std::fprintf(out, " QPs: %u   window: %u outstanding per QP\n", t.qps, t.window);
    else
        std::fprintf(out, " QPs: %u   one operation at a time\n", t.qps);
    std::fprintf(out, " baseline: %s\n", tcp_shape(t));
    std::fprintf(out, "%s\n", dashes);
    if (t.kind == Kind::bw) {
        std::fprintf(out, " %-10s %-12s %-19s %-19s %-14s %-16s %-16s %-7s\n", "#bytes", "#iterations",
                     "BW average[Gb/sec]", "BW average[MB/sec]", "MsgRate[Mpps]", "TCP BW[Gb/sec]", "TCP BW[MB/sec]",
                     "ratio");
    } else {
        std::fprintf(out, " %-10s %-12s %-11s %-11s %-15s %-11s %-13s %-9s %-11s %-17s %-7s\n", "#bytes", "#iterations",
                     "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99%[usec]",
                     "99.9%[usec]", "TCP t_typ[usec]", "ratio");
    }
}

std::string fmt_ratio(const Row &r) {
    const double v = r.ratio();
    if (v <= 0) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

void print_row(std::FILE *out, const Row &r) {
    const Measurement &m = r.rdma;
    const std::string ratio = fmt_ratio(r);
    if (r.test.kind == Kind::bw) {
        char rdma_cols[96] = " -                   -                   -             ";
        if (m.valid) {
            std::snprintf(rdma_cols, sizeof rdma_cols, " %-19.2f %-19.2f %-14.6f", gbit_per_second(m.bytes_per_second()),
                          mib_per_second(m.bytes_per_second()), m.mpps());
        }
        char tcp_cols[64] = " -                -               ";
        if (r.tcp.valid) {
            std::snprintf(tcp_cols, sizeof tcp_cols, " %-16.2f %-16.2f", gbit_per_second(r.tcp.bytes_per_second()),
                          mib_per_second(r.tcp.bytes_per_second()));
        }
        std::fprintf(out, " %-10llu %-12llu%s%s %-7s\n", static_cast<unsigned long long>(r.test.size),
                     static_cast<unsigned long long>(m.valid ? m.iterations : r.tcp.iterations), rdma_cols, tcp_cols,
                     ratio.c_str());
    } else {
        const LatencyStats &l = m.latency;
        char rdma_cols[160] = " -           -           -               -           -             -         -          ";
        if (m.valid) {
            std::snprintf(rdma_cols, sizeof rdma_cols, " %-11.2f %-11.2f %-15.2f %-11.2f %-13.2f %-9.2f %-11.2f",
                          l.min_us, l.max_us, l.typical_us, l.avg_us, l.stdev_us, l.p99_us, l.p999_us);
        }
        char tcp_col[32] = "-";
        if (r.tcp.valid) std::snprintf(tcp_col, sizeof tcp_col, "%.2f", r.tcp.latency.typical_us);
        std::fprintf(out, " %-10llu %-12llu%s %-17s %-7s\n", static_cast<unsigned long long>(r.test.size),
                     static_cast<unsigned long long>(m.valid ? m.iterations : r.tcp.iterations), rdma_cols, tcp_col,
                     ratio.c_str());
    }
}

bool same_block(const TestCase &a, const TestCase &b) {
    return a.op == b.op && a.kind == b.kind && a.qps == b.qps && a.window == b.window;
}

nlohmann::json measurement_json(const TestCase &t, const Measurement &m) {
    if (!m.valid) return nullptr;
    nlohmann::json j{{"iterations", m.iterations}};
    if (t.kind == Kind::bw) {
        j["bytes"] = m.bytes;
        j["seconds"] = m.seconds;
        j["bytes_per_second"] = m.bytes_per_second();
        j["bw_gbit_per_second"] = gbit_per_second(m.bytes_per_second());
        j["bw_mib_per_second"] = mib_per_second(m.bytes_per_second());
        j["msg_rate_mpps"] = m.mpps();
    } else {
        const LatencyStats &l = m.latency;
        j["t_min_us"] = l.min_us;
        j["t_max_us"] = l.max_us;
        j["t_typical_us"] = l.typical_us;
        j["t_avg_us"] = l.avg_us;
        j["t_stdev_us"] = l.stdev_us;
        j["t_p99_us"] = l.p99_us;
        j["t_p999_us"] = l.p999_us;
    }
    return j;
}

}  // namespace

void print_table_row(std::FILE *out, const RunInfo &info, const Row *previous, const Row &row) {
    if (previous == nullptr || !same_block(previous->test, row.test)) print_block_header(out, info, row.test);
    print_row(out, row);
    std::fflush(out);
}

void print_table_end(std::FILE *out) { std::fprintf(out, "%s\n", dashes); }

void print_table(std::FILE *out, const RunInfo &info, const std::vector<Row> &rows) {
    for (size_t i = 0; i < rows.size(); ++i) print_table_row(out, info, i == 0 ? nullptr : &rows[i - 1], rows[i]);
    if (!rows.empty()) print_table_end(out);
}

void print_summary(std::FILE *out, const std::vector<Row> &rows) {
    if (rows.empty()) return;
    std::fprintf(out, "\nSummary (best of each side's rounds; ratio = RDMA / TCP):\n");
    for (const Row &r : rows) {
        const std::string what = r.test.label();
        const std::string ratio = fmt_ratio(r);
        const char *verdict = r.ratio() <= 0 ? "" : meets_target(r) ? ", met" : ", missed";
        if (r.test.kind == Kind::bw) {
            char a[32] = "-", b[32] = "-";
            if (r.rdma.valid) std::snprintf(a, sizeof a, "%.3f", r.rdma.bytes_per_second() / 1e9);
            if (r.tcp.valid) std::snprintf(b, sizeof b, "%.3f", r.tcp.bytes_per_second() / 1e9);
            std::fprintf(out, "  %s: RDMA %s GB/s, TCP %s GB/s, ratio %s (target >= %.2f%s) [%d round%s]\n",
                         what.c_str(), a, b, ratio.c_str(), target_ratio(Kind::bw), verdict, r.rounds,
                         r.rounds == 1 ? "" : "s");
        } else {
            char a[32] = "-", b[32] = "-";
            if (r.rdma.valid) std::snprintf(a, sizeof a, "%.2f", r.rdma.latency.typical_us);
            if (r.tcp.valid) std::snprintf(b, sizeof b, "%.2f", r.tcp.latency.typical_us);
            std::fprintf(out, "  %s: RDMA %s us, TCP %s us (typical), ratio %s (target <= %.2f%s) [%d round%s]\n",
                         what.c_str(), a, b, ratio.c_str(), target_ratio(Kind::lat), verdict, r.rounds,
                         r.rounds == 1 ? "" : "s");
        }
    }
}

void print_series_verdicts(std::FILE *out, const std::vector<Row> &rows) {
    // One line per test and kind measured at more than one size: how many sizes met the target, and the worst.
    std::vector<std::pair<Op, Kind>> series;
    for (const Row &r : rows) {
        const std::pair<Op, Kind> k{r.test.op, r.test.kind};
        if (std::find(series.begin(), series.end(), k) == series.end()) series.push_back(k);
    }
    bool header = false;
    for (const auto &[op, kind] : series) {
        size_t sizes = 0, measured = 0, met = 0;
        const Row *worst = nullptr;
        for (const Row &r : rows) {
            if (r.test.op != op || r.test.kind != kind) continue;
            ++sizes;
            if (r.ratio() <= 0) continue;
            ++measured;
            met += meets_target(r) ? 1 : 0;
            const bool worse = worst == nullptr ||
                               (kind == Kind::bw ? r.ratio() < worst->ratio() : r.ratio() > worst->ratio());
            if (worse) worst = &r;
        }
        if (sizes < 2) continue;
        if (!header) {
            std::fprintf(out, "\nEvery size (target %s):\n", "bandwidth >= 0.95, latency <= 1.10");
            header = true;
        }
        std::fprintf(out, "  %s %s: %zu of %zu sizes met", op_name(op), kind_name(kind), met, sizes);
        if (worst != nullptr) {
            std::fprintf(out, ", worst ratio %s at %s", fmt_ratio(*worst).c_str(), worst->test.label().c_str());
        }
        if (measured < sizes) std::fprintf(out, ", %zu not measured", sizes - measured);
        std::fprintf(out, "\n");
    }
}

nlohmann::json to_json(const RunInfo &info, const std::vector<Row> &rows) {
    nlohmann::json j;
    j["tool"] = "it_perf";
    j["mode"] = info.mode;
    j["path"] = info.path;
    j["interface"] = info.ia;
    j["peer"] = info.peer;
    j["completions"] = info.event_mode ? "event" : "poll";
    j["tcp_only"] = info.tcp_only;
    j["results"] = nlohmann::json::array();
    for (const Row &r : rows) {
        nlohmann::json e{{"test", op_name(r.test.op)},
                         {"kind", kind_name(r.test.kind)},
                         {"bytes", r.test.size},
                         {"qps", r.test.qps},
                         {"window", r.test.window},
                         {"rounds", r.rounds},
                         {"rdma", measurement_json(r.test, r.rdma)},
                         {"tcp", measurement_json(r.test, r.tcp)}};
        const double ratio = r.ratio();
        e["ratio"] = ratio > 0 ? nlohmann::json(ratio) : nlohmann::json(nullptr);
        e["target"] = r.test.kind == Kind::bw ? ">= 0.95" : "<= 1.10";
        e["target_met"] = meets_target(r);
        j["results"].push_back(std::move(e));
    }
    return j;
}

std::string to_csv(const std::vector<Row> &rows) {
    std::ostringstream o;
    o << "test,kind,bytes,qps,window,rounds,rdma_iterations,rdma_bw_gbps,rdma_bw_MBps,rdma_mpps,rdma_t_min_us,"
         "rdma_t_typical_us,rdma_t_avg_us,rdma_t_p99_us,rdma_t_p999_us,tcp_iterations,tcp_bw_gbps,tcp_bw_MBps,"
         "tcp_t_typical_us,ratio\n";
    auto num = [&o](bool have, double v) {
        o << ',';
        if (have) o << v;
    };
    for (const Row &r : rows) {
        const bool bw = r.test.kind == Kind::bw;
        const Measurement &m = r.rdma;
        const Measurement &t = r.tcp;
        o << op_name(r.test.op) << ',' << kind_name(r.test.kind) << ',' << r.test.size << ',' << r.test.qps << ','
          << r.test.window << ',' << r.rounds << ',';
        if (m.valid) o << m.iterations;
        num(m.valid && bw, gbit_per_second(m.bytes_per_second()));
        num(m.valid && bw, mib_per_second(m.bytes_per_second()));
        num(m.valid && bw, m.mpps());
        num(m.valid && !bw, m.latency.min_us);
        num(m.valid && !bw, m.latency.typical_us);
        num(m.valid && !bw, m.latency.avg_us);
        num(m.valid && !bw, m.latency.p99_us);
        num(m.valid && !bw, m.latency.p999_us);
        o << ',';
        if (t.valid) o << t.iterations;
        num(t.valid && bw, gbit_per_second(t.bytes_per_second()));
        num(t.valid && bw, mib_per_second(t.bytes_per_second()));
        num(t.valid && !bw, t.latency.typical_us);
        num(r.ratio() > 0, r.ratio());
        o << '\n';
    }
    return o.str();
}

bool write_output(const std::string &path, const std::string &text) {
    if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    }
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (f) f << text;
    if (!f) {
        std::fprintf(stderr, "it_perf: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    return true;
}

}  // namespace it_perf
