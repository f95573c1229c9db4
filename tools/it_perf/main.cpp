/**
 * @file main.cpp
 * @brief it_perf: perftest-style bandwidth and latency of Send, RDMA Write and RDMA Read over IT-API v2.1, each
 *        row beside the same measurement over a raw TCP socket taken in the same run, with their ratio.
 *
 *   it_perf --loopback                        the headline figures: write bw 64 KiB and 1 MiB, write lat 8 B,
 *                                             RDMA and TCP alternating in 5 rounds, best of each, and a summary
 *   it_perf --loopback -t send,write,read --bw --lat --sweep --plot perf.png
 *   it_perf --server [--port P]               on one host, then
 *   it_perf --client HOST [--port P] ...      on another
 *
 * --loopback forks the server as a child process (its own process group, killed and reaped on every way out) and
 * runs the client against 127.0.0.1. The TCP baseline listens on --tcp-port (default: --port + 1).
 * Exit status: 0 when every measurement succeeded, 1 when one failed, 2 for a usage error.
 */
#include <CLI/CLI.hpp>

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "itapi_names.hpp"
#include "krdma/abi.h"
#include "itapi_runner.hpp"
#include "kal_steps.hpp"
#include "plot.hpp"
#include "report.hpp"
#include "server_child.hpp"
#include "tcp_baseline.hpp"

namespace {

using namespace it_perf;

constexpr uint16_t kDefaultPort = 18515;  // perftest's
constexpr uint64_t kSweepMax = uint64_t{8} << 20;

struct Args {
    bool server = false;
    std::string client;
    bool loopback = false;
    bool list = false;
    std::vector<std::string> tests;
    bool bw = false;
    bool lat = false;
    uint64_t size = 65536;
    bool sweep = false;
    uint64_t min_size = 1;
    uint64_t max_size = kSweepMax;
    uint32_t qps = 1;
    uint32_t window = 64;
    bool setup = false;
    std::vector<uint32_t> in_flight;
    uint64_t iters = 0;
    double seconds = 0;
    int rounds = 0;
    uint16_t port = 0;
    uint16_t tcp_port = 0;
    std::string ia;
    bool event_mode = false;
    std::string json;
    std::string csv;
    std::string plot;
    bool tcp_only = false;
};

Op parse_op(const std::string &s) {
    if (s == "send") return Op::send;
    if (s == "read") return Op::read;
    return Op::write;
}

// A default run length that keeps a sweep's large sizes from taking minutes: perftest's counts (5000 for bandwidth,
// 1000 for latency), fewer for large messages. Bandwidth over many QPs runs at least eight windows of every QP (up
// to 4 GiB): 5000 64 KiB Writes over 64 QPs with windows of 64 are barely more than the first window, so such a run
// timed the first fill of 64 sockets and the last drain, not the rate (perftest counts its iterations per QP).
Budget default_budget(Kind kind, uint64_t size, uint32_t qps, uint32_t window) {
    Budget b;
    if (kind == Kind::bw) {
        b.iterations = std::clamp<uint64_t>((uint64_t{1} << 30) / size, 64, 5000);
        const uint64_t windows = uint64_t{8} * qps * window;
        b.iterations = std::max(b.iterations, std::min(windows, (uint64_t{4} << 30) / size));
    } else {
        b.iterations = std::clamp<uint64_t>((uint64_t{256} << 20) / size, 16, 1000);
    }
    return b;
}

// What a run measures when no test option narrows it: the headline figures, or with --sweep alone every size the
// targets name (bandwidth 64 B .. 8 MiB for Write and Send, latency 8 B .. 1 MiB for Write, Send and Read).
enum class Headline { none, figures, sweep };

std::vector<TestCase> build_cases(const Args &a, Headline headline) {
    std::vector<TestCase> cases;
    auto add = [&](Op op, Kind kind, uint64_t size) {
        TestCase t;
        t.op = op;
        t.kind = kind;
        t.size = size;
        t.qps = a.qps;
        t.window = a.window;
        t.budget = default_budget(kind, size, a.qps, a.window);
        if (a.iters > 0) t.budget = Budget{a.iters, 0};
        if (a.seconds > 0) t.budget = Budget{0, a.seconds};
        cases.push_back(t);
    };
    if (headline == Headline::sweep) {
        for (Op op : {Op::write, Op::send}) {
            for (uint64_t size = 64; size <= (uint64_t{8} << 20); size *= 2) add(op, Kind::bw, size);
        }
        for (Op op : {Op::write, Op::send, Op::read}) {
            for (uint64_t size = 8; size <= (uint64_t{1} << 20); size *= 2) add(op, Kind::lat, size);
        }
        if (a.iters == 0 && a.seconds <= 0) {
            for (TestCase &t : cases) t.budget = Budget{0, 0.2};
        }
        return cases;
    }
    if (headline == Headline::figures) {
        add(Op::write, Kind::bw, 64 << 10);
        add(Op::write, Kind::bw, 1 << 20);
        add(Op::write, Kind::lat, 8);
        if (a.iters == 0 && a.seconds <= 0) {
            for (TestCase &t : cases) t.budget = Budget{0, 0.2};
        }
        return cases;
    }
    std::vector<uint64_t> sizes;
    if (a.sweep) {
        for (uint64_t s = 1; s <= a.max_size; s *= 2) {
            if (s >= a.min_size) sizes.push_back(s);
        }
    } else {
        sizes.push_back(a.size);
    }
    std::vector<Op> ops;
    for (const std::string &t : a.tests.empty() ? std::vector<std::string>{"write"} : a.tests) ops.push_back(parse_op(t));
    std::vector<Kind> kinds;
    if (a.bw || !a.lat) kinds.push_back(Kind::bw);
    if (a.lat) kinds.push_back(Kind::lat);
    for (Op op : ops) {
        for (Kind k : kinds) {
            for (uint64_t s : sizes) add(op, k, s);
        }
    }
    return cases;
}

// The server: the TCP baseline on a thread of its own, IT-API on this one; both until the client's TCP bye.
// @p ready_fd is the loopback parent's pipe (-1 for --server, which prints where it listens instead).
int run_server(const Args &a, int ready_fd, const std::string &tcp_address) {
    auto fail = [ready_fd](const std::string &message) {
        if (ready_fd >= 0) report_failure(ready_fd, message);
        else std::fprintf(stderr, "it_perf server: %s\n", message.c_str());
        return 1;
    };
    const uint16_t rdma_port = a.port != 0 ? a.port : (ready_fd >= 0 ? 0 : kDefaultPort);
    uint16_t tcp_port = a.tcp_port;
    if (tcp_port == 0 && ready_fd < 0) tcp_port = static_cast<uint16_t>(rdma_port + 1);
    if (tcp_port == 0 && a.port != 0) tcp_port = static_cast<uint16_t>(a.port + 1);
    auto tcp = TcpServer::listen(tcp_address, tcp_port);
    if (!tcp) return fail(tcp.error().to_string());
    std::unique_ptr<ItapiServer> rdma;
    if (!a.tcp_only) {
        auto s = ItapiServer::open(a.ia, rdma_port, a.event_mode);
        if (!s) return fail(s.error().to_string());
        rdma = std::move(*s);
    }
    const ServerPorts ports{rdma ? rdma->port() : uint16_t{0}, tcp->port()};
    if (ready_fd >= 0) {
        report_ready(ready_fd, ports);
    } else {
        std::printf("it_perf server: IT-API interface %s, connection qualifier (port) %u; TCP baseline on port %u\n",
                    rdma ? rdma->ia_name().c_str() : "(none: --tcp-only)", ports.rdma, ports.tcp);
        std::fflush(stdout);
    }
    std::atomic<bool> stop{false};
    std::thread tcp_thread([&] {
        tcp->serve(stop);
        stop = true;
    });
    int rc = 0;
    if (rdma) {
        auto served = rdma->serve(stop);
        if (!served) {
            std::fprintf(stderr, "it_perf server: %s\n", served.error().to_string().c_str());
            rc = 1;
            stop = true;
        }
    }
    tcp_thread.join();
    return rc;
}

// The server to measure against: --client's host and ports, or (--loopback) a server child forked now, before
// this process starts any thread (the IT-API library starts some). False, said on standard error, when it fails.
bool find_server(const Args &a, std::optional<ServerChild> &child, std::string &host, ServerPorts &ports) {
    host = a.client;
    ports = ServerPorts{a.port != 0 ? a.port : kDefaultPort, a.tcp_port};
    if (ports.tcp == 0) ports.tcp = static_cast<uint16_t>(ports.rdma + 1);
    if (!a.loopback) return true;
    host = "127.0.0.1";
    auto c = ServerChild::start([&a](int fd) { return run_server(a, fd, "127.0.0.1"); });
    if (!c) {
        std::fprintf(stderr, "it_perf: cannot start the loopback server: %s\n", c.error().to_string().c_str());
        return false;
    }
    child.emplace(std::move(*c));
    auto p = child->wait_ready(std::chrono::seconds(30));
    if (!p) {
        std::fprintf(stderr, "it_perf: %s\n", p.error().to_string().c_str());
        return false;
    }
    ports = *p;
    return true;
}

// Tells the server the run is over (the TCP baseline's bye ends both of its loops) and reaps a loopback child;
// false when the child failed and nothing had failed before (a failure is said only once).
bool end_server(std::optional<ServerChild> &child, const std::string &host, const ServerPorts &ports, bool failed) {
    if (auto b = send_tcp_bye(host, ports.tcp); !b && child) {
        std::fprintf(stderr, "it_perf: %s\n", b.error().to_string().c_str());
    }
    if (!child) return true;
    const int status = child->finish(std::chrono::seconds(5));
    child.reset();
    if (status != 0 && !failed) {
        std::fprintf(stderr, "it_perf: the loopback server exited with status %d\n", status);
        return false;
    }
    return true;
}

// The processes whose work the setup test counts: this one, the loopback server (when forked), and the krdmad
// serving $KRDMA_DEVICE (none when the kAL is embedded: its work is then this process's and the server's).
struct SetupCounted {
    std::vector<std::string> names;
    std::vector<ProcessCounters> counters;
    std::string why_not;             // why system calls are not counted (empty: they are)
    std::optional<KalCounters> kal;  // krdmad's LLP counters, when a krdmad serves the test
    [[nodiscard]] std::vector<const ProcessCounters *> pointers() const {
        std::vector<const ProcessCounters *> p;
        for (const ProcessCounters &c : counters) p.push_back(&c);
        return p;
    }
};

SetupCounted count_setup(const std::optional<ServerChild> &child) {
    SetupCounted s;
    std::string why;
    auto add = [&](const std::string &name, pid_t pid) {
        s.names.push_back(name);
        s.counters.push_back(ProcessCounters::open(pid, &why));
        if (!why.empty()) s.why_not = why;
    };
    add("it_perf", 0);
    if (child) add("server", child->pid());
    const char *embedded = std::getenv("OPENRDMA_EMBEDDED_CONFIG");
    if (embedded == nullptr || *embedded == '\0') {
        const char *device = std::getenv("KRDMA_DEVICE");
        const std::string path = device != nullptr && *device != '\0' ? device : KRDMA_DEFAULT_DEVICE;
        const pid_t k = server_of_socket(path);
        if (k > 0 && k != ::getpid()) {
            add("krdmad", k);
            s.kal = KalCounters::open(path);
        }
    }
    return s;
}

// What krdmad's LLP counters moved by from @p before to @p after.
krdma_llp_counters counters_moved(const krdma_llp_counters &before, const krdma_llp_counters &after) {
    krdma_llp_counters d{};
    d.active_opens = after.active_opens - before.active_opens;
    d.passive_opens = after.passive_opens - before.passive_opens;
    d.tcp_connect_ns = after.tcp_connect_ns - before.tcp_connect_ns;
    d.mpa_active_ns = after.mpa_active_ns - before.mpa_active_ns;
    d.request_ns = after.request_ns - before.request_ns;
    d.decision_ns = after.decision_ns - before.decision_ns;
    d.accept_ns = after.accept_ns - before.accept_ns;
    return d;
}

// Prints where the best RDMA round's time and work went, per connection (cmtime's breakdown, with the work of each
// process beside it, and krdmad's own steps when it reports them).
void print_steps(uint32_t in_flight, const SetupSteps &st, const SetupCounted &counted,
                 const krdma_llp_counters *kal) {
    if (st.connections == 0) return;
    const double n = static_cast<double>(st.connections);
    auto us = [n](double seconds) { return seconds / n * 1e6; };
    std::printf("  where the time went, %u in flight (the best RDMA round, per connection):\n", in_flight);
    std::printf("    %-12s %10.1f us   it_ep_rc_create (before the clock starts)\n", "create", us(st.create));
    std::printf("    %-12s %10.1f us   it_ep_connect's call\n", "connect", us(st.connect));
    std::printf("    %-12s %10.1f us   it_ep_connect to ESTABLISHED: TCP, MPA, the server's accept and both "
                "RDMA-mode transitions (mean latency; %u overlap)\n",
                "establish", us(st.established), in_flight);
    if (kal != nullptr && kal->active_opens > 0 && kal->passive_opens > 0) {
        // krdmad's steps of the same connections (both ends are its own on one host), per connection.
        const double a = static_cast<double>(kal->active_opens), p = static_cast<double>(kal->passive_opens);
        auto kus = [](uint64_t ns, double count) { return static_cast<double>(ns) / count / 1e3; };
        if (kal->tcp_connect_ns + kal->mpa_active_ns + kal->decision_ns == 0) {
            std::printf("    %-12s %13s   (this krdmad reports no setup steps: protocol before 1.5)\n", "  in krdmad", "");
        } else {
            std::printf("    %-12s %10.1f us   krdmad, active end: CONNECT to TCP connected\n", "  TCP",
                        kus(kal->tcp_connect_ns, a));
            std::printf("    %-12s %10.1f us   krdmad, active end: TCP connected to RDMA mode (MPA both ways, "
                        "the steps below)\n", "  MPA", kus(kal->mpa_active_ns, a));
            std::printf("    %-12s %10.1f us   krdmad, passive end: TCP accepted to the request reported (MPA "
                        "Request read)\n", "  request", kus(kal->request_ns, p));
            std::printf("    %-12s %10.1f us   the server: the request reported to its ACCEPT (event to the "
                        "server, it_ep_rc_create, it_ep_accept)\n", "  accept", kus(kal->decision_ns, p));
            std::printf("    %-12s %10.1f us   krdmad, passive end: ACCEPT to RDMA mode (MPA Reply, the "
                        "transition)\n", "  reply", kus(kal->accept_ns, p));
        }
    }
    std::printf("    %-12s %10.1f us   the clock per connection (1 / rate)\n", "  timed", us(st.timed));
    std::printf("    %-12s %10.1f us   it_ep_disconnect to the last disconnect event (batch wall time)\n",
                "disconnect", us(st.disconnect));
    std::printf("    %-12s %10.1f us   it_ep_free\n", "destroy", us(st.destroy));
    auto row = [&](const char *what, const std::vector<ProcessCosts> &costs) {
        std::printf("    %-30s", what);
        for (size_t i = 0; i < counted.names.size(); ++i) {
            const ProcessCosts c = i < costs.size() ? costs[i] : ProcessCosts{};
            char sys[32] = "?";
            if (c.syscalls) std::snprintf(sys, sizeof sys, "%.1f", static_cast<double>(*c.syscalls) / n);
            std::printf("  %s %s syscalls, %.1f switches;", counted.names[i].c_str(), sys,
                        static_cast<double>(c.switches) / n);
        }
        std::printf("\n");
    };
    row("work, connect to established:", st.setup);
    row("work, create to destroy:", st.life);
    if (!counted.why_not.empty()) std::printf("    (system calls not counted: %s)\n", counted.why_not.c_str());
}

// The setup-rate test: connections per second, RDMA (connect, MPA, RDMA mode at both ends) against TCP (connect,
// accept, a header and its answer), at each count in flight; RDMA and TCP alternate and the best of each is kept.
int run_setup(const Args &a) {
    const std::vector<uint32_t> in_flight = a.in_flight.empty() ? std::vector<uint32_t>{16, 256} : a.in_flight;
    const int rounds = a.rounds > 0 ? a.rounds : 3;
    const uint64_t count = a.iters > 0 ? a.iters : 2048;
    std::optional<ServerChild> child;
    std::string host = a.client;
    ServerPorts ports;
    if (!find_server(a, child, host, ports)) return 1;
    std::printf("Connection setup, %llu connections per run, best of %d rounds (ratio = RDMA / TCP, target >= 0.50)\n",
                static_cast<unsigned long long>(count), rounds);
    std::printf("%-12s %16s %16s %8s\n", "in flight", "RDMA conn/s", "TCP conn/s", "ratio");
    SetupCounted counted = count_setup(child);
    bool failed = false;
    for (uint32_t k : in_flight) {
        double best_rdma = 0, best_tcp = 0;
        SetupSteps best_steps, steps;
        krdma_llp_counters best_kal{}, kal_before{};
        bool have_best_kal = false, have_kal_before = false;
        for (int r = 0; r < rounds && !failed; ++r) {
            for (int side = 0; side < 2; ++side) {
                const bool tcp_turn = (side == 0) == (r % 2 == 0);
                if (!tcp_turn && counted.kal) {
                    const auto now = counted.kal->read();
                    have_kal_before = now.has_value();
                    if (now) kal_before = *now;
                }
                auto rate = tcp_turn ? run_tcp_setup(host, ports.tcp, k, count)
                                     : (a.tcp_only ? rdma::Expected<double>(0.0)
                                                   : run_itapi_setup(a.ia, host, ports.rdma, k, count, &steps,
                                                                     counted.pointers()));
                if (!rate) {
                    std::fprintf(stderr, "it_perf: setup, %u in flight: %s\n", k, rate.error().to_string().c_str());
                    failed = true;
                    break;
                }
                double &best = tcp_turn ? best_tcp : best_rdma;
                if (!tcp_turn && *rate > best) {
                    best_steps = steps;
                    have_best_kal = false;
                    if (have_kal_before) {
                        if (auto after = counted.kal->read()) {
                            best_kal = counters_moved(kal_before, *after);
                            have_best_kal = true;
                        }
                    }
                }
                best = std::max(best, *rate);
            }
        }
        const double ratio = best_tcp > 0 ? best_rdma / best_tcp : 0;
        std::printf("%-12u %16.0f %16.0f %8.3f  (target >= 0.50, %s)\n", k, best_rdma, best_tcp, ratio,
                    ratio >= 0.5 ? "met" : "missed");
        if (!a.tcp_only) print_steps(k, best_steps, counted, have_best_kal ? &best_kal : nullptr);
    }
    if (!end_server(child, host, ports, failed)) failed = true;
    return failed ? 1 : 0;
}

int run_client(const Args &a, Headline headline) {
    std::vector<TestCase> cases = build_cases(a, headline);
    const int rounds = a.rounds > 0 ? a.rounds : (headline == Headline::figures ? 5 : headline == Headline::sweep ? 3 : 1);
    uint64_t max_size = 0;
    for (const TestCase &t : cases) max_size = std::max(max_size, t.size);

    std::optional<ServerChild> child;
    std::string host = a.client;
    ServerPorts ports;
    if (!find_server(a, child, host, ports)) return 1;

    RunInfo info;
    info.mode = a.loopback ? "loopback" : "client";
    info.peer = host;
    info.event_mode = a.event_mode;
    info.tcp_only = a.tcp_only;
    info.ia = a.tcp_only ? "(none: --tcp-only)" : a.ia;
    std::unique_ptr<ItapiClient> rdma;
    if (!a.tcp_only) {
        ItapiClientConfig config;
        config.ia = a.ia;
        config.qps = a.qps;
        config.window = a.window;
        config.max_size = max_size;
        config.event_mode = a.event_mode;
        auto c = ItapiClient::connect(config, host, ports.rdma);
        if (!c) {
            std::fprintf(stderr, "it_perf: %s\n", c.error().to_string().c_str());
            return 1;
        }
        rdma = std::move(*c);
        info.ia = rdma->ia_name();
        info.path = rdma->path();
    }

    // The human table goes to standard error when standard output carries JSON or CSV.
    std::FILE *table = (a.json == "-" || a.csv == "-") ? stderr : stdout;
    std::vector<Row> rows;
    bool failed = false;
    bool rdma_broken = false;
    for (const TestCase &t : cases) {
        Row row;
        row.test = t;
        row.rounds = rounds;
        for (int r = 0; r < rounds; ++r) {
            // Alternate which side goes first, so neither always runs on a machine the other just warmed.
            for (int side = 0; side < 2; ++side) {
                const bool tcp_turn = (side == 0) == (r % 2 == 0);
                if (tcp_turn) {
                    auto m = run_tcp_test(host, ports.tcp, t);
                    if (!m) {
                        std::fprintf(stderr, "it_perf: %s: %s\n", t.label().c_str(), m.error().to_string().c_str());
                        failed = true;
                    } else if (better(*m, row.tcp, t.kind == Kind::lat)) {
                        row.tcp = *m;
                    }
                } else if (rdma && !rdma_broken) {
                    auto m = rdma->run(t);
                    if (!m) {
                        std::fprintf(stderr, "it_perf: %s: %s\n", t.label().c_str(), m.error().to_string().c_str());
                        failed = true;
                        rdma_broken = true;  // the session is gone with its endpoints; TCP rows go on
                    } else if (better(*m, row.rdma, t.kind == Kind::lat)) {
                        row.rdma = *m;
                    }
                }
            }
        }
        print_table_row(table, info, rows.empty() ? nullptr : &rows.back(), row);
        rows.push_back(row);
    }
    print_table_end(table);

    if (rdma && !rdma_broken) {
        if (auto c = rdma->close(); !c) {
            std::fprintf(stderr, "it_perf: closing the session: %s\n", c.error().to_string().c_str());
            failed = true;
        }
    }
    rdma.reset();
    if (!end_server(child, host, ports, failed)) failed = true;

    print_summary(table, rows);
    print_series_verdicts(table, rows);
    if (!a.json.empty() && !write_output(a.json, to_json(info, rows).dump(2) + "\n")) failed = true;
    if (!a.csv.empty() && !write_output(a.csv, to_csv(rows))) failed = true;
    if (!a.plot.empty()) {
        if (auto p = plot_png(a.plot, rows); !p) {
            std::fprintf(stderr, "it_perf: %s\n", p.error().to_string().c_str());
            failed = true;
        } else {
            std::fprintf(table, "plot written to %s\n", a.plot.c_str());
        }
    }
    return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"it_perf: bandwidth and latency of Send, RDMA Write and RDMA Read over IT-API, each beside raw TCP "
                 "measured in the same run (ratio = RDMA / TCP)"};
    Args a;
    auto *mode = app.add_option_group("mode", "Exactly one of these");
    mode->add_flag("--server", a.server, "Serve clients (IT-API listen point and the TCP baseline)");
    mode->add_option("--client", a.client, "Run the tests against the server at HOST")->type_name("HOST");
    mode->add_flag("--loopback", a.loopback,
                   "Fork a server child and run the client against 127.0.0.1 (without test options: the headline "
                   "figures)");
    mode->add_flag("--list", a.list, "List the IT-API interfaces (it_interface_list) and exit");
    mode->require_option(1);

    app.add_option("-t,--test", a.tests, "Operations to test: send, write, read (comma-separated; default write)")
        ->delimiter(',')
        ->check(CLI::IsMember({"send", "write", "read"}));
    app.add_flag("--bw", a.bw, "Bandwidth: a window of outstanding operations (default when --lat is not given)");
    app.add_flag("--lat", a.lat,
                 "Latency: Send and Write ping-pong (Write polls the buffer's last byte, as ib_write_lat), one Read "
                 "at a time");
    app.add_option("-s,--size", a.size, "Message size in bytes (suffixes K, M: 64K)")
        ->transform(CLI::AsSizeValue(false))
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
    app.add_flag("-a,--sweep", a.sweep,
                 "Every power of 2 from --min to --max (default 1 B to 8 MiB); alone, every size the targets name: "
                 "Write and Send bandwidth 64 B to 8 MiB, Write, Send and Read latency 8 B to 1 MiB, best of 3 rounds");
    app.add_option("--min", a.min_size, "Smallest size of --sweep")->transform(CLI::AsSizeValue(false));
    app.add_option("--max", a.max_size, "Largest size of --sweep")
        ->transform(CLI::AsSizeValue(false))
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
    app.add_option("-q,--qps", a.qps, "Data QPs (endpoints); work is spread over them round-robin")
        ->check(CLI::Range(1u, 1024u));
    app.add_option("-w,--window", a.window, "Outstanding operations per QP in bandwidth tests (default 64)")
        ->check(CLI::Range(1u, 4096u));
    app.add_flag("--setup", a.setup,
                 "Connection setup rate instead of transfers: connections per second, RDMA against TCP, at each "
                 "--inflight (default 16 and 256); -n connections per run (default 2048)");
    app.add_option("--inflight", a.in_flight, "Connections in flight in --setup (comma-separated)")
        ->delimiter(',')
        ->check(CLI::Range(1u, 1024u));
    app.add_option("-n,--iters", a.iters,
                   "Timed operations per run (default 5000 for bw, at least 8 windows of every QP, 1000 for lat, fewer for large sizes)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
    app.add_option("-D,--seconds", a.seconds, "Time each run for S seconds instead of a count")
        ->check(CLI::Range(0.001, 3600.0));
    app.add_option("--rounds", a.rounds,
                   "Runs of each test, RDMA and TCP alternating; the best of each is kept (default 1, headline 5)")
        ->check(CLI::Range(1, 1000));
    app.add_option("-p,--port", a.port, "IT-API connection qualifier (IANA port); default 18515, --loopback: any free");
    app.add_option("--tcp-port", a.tcp_port, "TCP baseline port (default: --port + 1)");
    app.add_option("-d,--ia", a.ia, "IT-API interface name or address for it_ia_create (default: the first listed)");
    app.add_flag("--event", a.event_mode, "Wait for completions with it_evd_wait instead of polling it_evd_dequeue");
    app.add_option("--json", a.json, "Write the results as JSON to FILE (- for standard output)")->type_name("FILE");
    app.add_option("--csv", a.csv, "Write the results as CSV to FILE (- for standard output)")->type_name("FILE");
    app.add_option("--plot", a.plot, "Draw bandwidth and latency against size into FILE.png (needs gnuplot)")
        ->type_name("FILE.png");
    // A developer's switch: the TCP baseline alone, without IT-API.
    app.add_flag("--tcp-only", a.tcp_only, "Run only the TCP baseline")->group("");
    app.set_version_flag("--version", std::string("it_perf (OpenRDMA) ") + OPENRDMA_VERSION);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help is a success, anything else a usage error
    }

    ::signal(SIGPIPE, SIG_IGN);  // a peer that goes away is an error return, not a death
    if (a.list) {
        const auto names = itapi_interfaces();
        if (names.empty()) {
            const std::string why = it_tools::failure_reason("it_interface_list");
            std::fprintf(stderr, "it_perf: it_interface_list found no interface: %s\n",
                         why.empty() ? "krdmad serves no RNIC (rdmactl list shows what it serves)" : why.c_str());
            return 1;
        }
        for (const std::string &n : names) std::printf("%s\n", n.c_str());
        return 0;
    }
    if (a.sweep && a.min_size > a.max_size) {
        std::fprintf(stderr, "it_perf: --min %llu is above --max %llu\n", static_cast<unsigned long long>(a.min_size),
                     static_cast<unsigned long long>(a.max_size));
        return 2;
    }
    if (a.server) return run_server(a, -1, "");
    if (a.setup) return run_setup(a);
    const bool narrowed = app.count("--test") != 0 || app.count("--bw") != 0 || app.count("--lat") != 0 ||
                          app.count("--size") != 0 || app.count("--min") != 0 || app.count("--max") != 0;
    Headline headline = Headline::none;
    if (!narrowed) headline = a.sweep ? Headline::sweep : Headline::figures;
    return run_client(a, headline);
}
