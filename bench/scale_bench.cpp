// Many connected QPs on one host, as issue 16 asks: two consumer processes through one krdmad (started here on a
// private device path), softrnic on 127.0.0.1. The passive process listens and accepts every connection; this
// process connects them, up to --in-flight at once. Printed:
//
//  - the setup rate of the whole batch (connections per second, both ends established), next to raw TCP connect +
//    accept of as many connections, as many in flight, measured before it (target >= 0.5x);
//  - memory per idle connected QP: the resident growth of both consumer processes and krdmad over the batch, per
//    QP (two per connection); socket buffers are kernel memory and not counted (target <= 8 KiB);
//  - one active QP among them: its 8-byte RDMA Read round trip and its 64 KiB RDMA Write bandwidth, measured before
//    the batch (the QP alone) and after it, and their ratio (target: the same figures, ratio about 1);
//  - teardown (issue 42: back to baseline in under 1 s of krdmad CPU): the passive process killed with SIGKILL (its
//    half of the QPs, and the connections they held), then this process destroying its half; for each, krdmad's CPU
//    time and the wall time until krdmad holds no more descriptors than before the batch (its reference to each
//    connection's socket is one).
//
//   bench_scale [--connections N (default 5000: 10,000 QPs)] [--in-flight N (default 256)] [--seconds S]
//              [--krdmad PATH] [--json FILE]
//
// Exit status non-zero only when something failed. Every process it starts goes with it: krdmad and the passive
// process are killed (their process groups, PR_SET_PDEATHSIG) on every way out.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "endpoint_attributes.hpp"
#include "harness.hpp"
#include "tcp_baseline.hpp"
#include "krdmad_consumer.hpp"
#include "krdmad_process.hpp"
#include "ual/access_layer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kBuffer = 1u << 20;
constexpr uint32_t kWriteSize = 64u << 10;
constexpr uint32_t kWindow = 16;

/** @brief Resident set of process @p pid in KiB (0 when unreadable). */
long rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
    long pages = 0, resident = 0;
    in >> pages >> resident;
    return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

/** @brief CPU time (user and system) process @p pid has used so far, in seconds (0 when unreadable). */
double cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return 0;
    const size_t close = line.rfind(')');  // the command may hold anything: count fields from its end
    if (close == std::string::npos) return 0;
    std::istringstream rest(line.substr(close + 1));
    std::string field;
    for (int i = 0; i < 11; ++i) rest >> field;  // fields 3 (state) to 13
    unsigned long long utime = 0, stime = 0;
    rest >> utime >> stime;                        // fields 14 and 15
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/** @brief How many descriptors process @p pid holds (-1 when unreadable). */
long descriptors(pid_t pid) {
    std::error_code ec;
    long n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        ++n;
    }
    return ec ? -1 : n;
}

/**
 * @brief The baseline of the setup rate: @p connections raw TCP connections on 127.0.0.1, @p in_flight connects at
 *        a time, each counted once a thread of this process has accepted it; all held until the last, then closed.
 *        Connections per second; 0 when a connect failed.
 */
double tcp_setup_rate(size_t connections, size_t in_flight) {
    sockaddr_in a{};
    const bench::Fd l = bench::loopback_listener(static_cast<int>(std::max<size_t>(in_flight, 128)), a);
    if (l.fd < 0) return 0;
    std::vector<krdma::UniqueFd> clients, servers;
    clients.reserve(connections);
    servers.reserve(connections);
    std::atomic<size_t> accepted{0};
    std::thread acceptor([&] {
        while (servers.size() < connections) {
            krdma::UniqueFd s(::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
            if (!s) return;  // the listener was shut down: a connect failed
            servers.push_back(std::move(s));
            accepted.store(servers.size(), std::memory_order_release);
        }
    });
    const auto t0 = clock_type::now();
    bool ok = true;
    while (ok && clients.size() < connections) {
        const size_t batch = std::min(in_flight, connections - clients.size());
        for (size_t i = 0; i < batch && ok; ++i) {
            krdma::UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
            ok = c && ::connect(c.get(), reinterpret_cast<const sockaddr *>(&a), sizeof a) == 0;
            clients.push_back(std::move(c));
        }
        while (ok && accepted.load(std::memory_order_acquire) < clients.size()) std::this_thread::yield();
    }
    const double took = std::chrono::duration<double>(clock_type::now() - t0).count();
    ::shutdown(l.fd, SHUT_RDWR);  // an acceptor still waiting (a connect failed) returns
    acceptor.join();
    return ok ? static_cast<double>(connections) / took : 0;
}

/** @brief A teardown's cost to krdmad: its CPU seconds and the wall seconds until its descriptors came down. */
struct Teardown {
    double cpu = 0;
    double wall = 0;
    bool done = false;  // the descriptors came down within the time allowed
};

/**
 * @brief Runs @p act (a teardown), then waits (60 s at most) until krdmad (@p pid) holds at most @p target
 *        descriptors and its CPU time stops growing.
 */
template <class Act>
Teardown tear_down(pid_t pid, long target, Act &&act) {
    Teardown t;
    const double cpu0 = cpu_seconds(pid);
    const auto t0 = clock_type::now();
    act();
    const auto give_up = t0 + 60s;
    while (descriptors(pid) > target && clock_type::now() < give_up) std::this_thread::sleep_for(1ms);
    t.wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    t.done = descriptors(pid) <= target;
    // Work queued behind the last close (abortive closes lingering, timers) shows as CPU a little later.
    std::this_thread::sleep_for(100ms);
    t.cpu = cpu_seconds(pid) - cpu0;
    return t;
}

/**
 * @brief The soft descriptor limit raised to the hard one, and the hard one to 2^20 when this process may (root):
 *        every connection is a socket in each consumer and in krdmad, which inherits the limit.
 */
void raise_descriptor_limit() {
    rlimit l{};
    if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return;
    if (const rlimit big{1u << 20, 1u << 20}; l.rlim_max < big.rlim_max && ::setrlimit(RLIMIT_NOFILE, &big) == 0) return;
    if (l.rlim_cur < l.rlim_max) {
        l.rlim_cur = l.rlim_max;
        (void)::setrlimit(RLIMIT_NOFILE, &l);
    }
}

/** @brief One consumer process: its buffer of kBuffer bytes, and room for every connection's events (queued until
 *         read). */
struct Consumer : bench::KrdmadConsumer {
    std::string open(const std::filesystem::path &device, size_t connections) {
        return KrdmadConsumer::open(device, kBuffer, 2 * connections + 64);
    }
};

/** @brief What the passive process tells the active one once it listens. */
struct Hello {
    uint16_t port = 0;
    uint64_t addr = 0;
    uint32_t rkey = 0;
};

// The passive process: listens, accepts every request that comes, and stays until @p ctl closes. Writes a Hello on
// @p ctl once it listens.
int run_passive(const std::filesystem::path &device, size_t connections, int ctl) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    raise_descriptor_limit();
    Consumer c;
    if (auto why = c.open(device, connections); !why.empty()) {
        std::fprintf(stderr, "bench_scale (passive): %s\n", why.c_str());
        return 1;
    }
    auto req = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 1024);
    auto lp = c.adapter->listen(0, req);
    if (!lp) return 1;
    Hello h{(*lp)->port(), reinterpret_cast<uint64_t>(c.buf.data()), c.mr->keys().rkey};
    if (::write(ctl, &h, sizeof h) != static_cast<ssize_t>(sizeof h)) return 1;
    std::vector<std::shared_ptr<ual::Endpoint>> eps;
    eps.reserve(connections);
    uint64_t context = 0;
    for (;;) {
        pollfd p{ctl, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) break;  // the active side closed its end: done
        auto r = req->wait(100ms);
        if (!r || !r->connection) continue;
        auto ep = c.endpoint(4, ++context);
        if (!ep || !ep->accept_async(r->connection->request).ok()) {
            std::fprintf(stderr, "bench_scale (passive): accept %llu failed\n",
                         static_cast<unsigned long long>(context));
            return 1;
        }
        eps.push_back(std::move(ep));
        for (;;) {  // this side's ESTABLISHED events: nothing waits for them; a refused accept ends the run
            auto e = c.cm->dequeue();
            if (!e || !*e) break;
            if ((*e)->id != static_cast<uint32_t>(ual::CmEventId::established)) {
                std::fprintf(stderr, "bench_scale (passive): connection %llu: event %u, status %u\n",
                             static_cast<unsigned long long>((*e)->context), (*e)->id, (*e)->detail);
                return 1;
            }
        }
    }
    return 0;
}

// The active QP's figures: an 8-byte RDMA Read round trip (seconds) and 64 KiB RDMA Write bandwidth (bytes/s).
struct Active {
    double read_rtt = 0;
    double write_bps = 0;
};

bool reap(ual::CompletionQueue &cq, size_t &done) {
    ri_wc_t wc[32];
    auto n = cq.poll({wc, 32});
    if (!n) return false;
    for (size_t i = 0; i < *n; ++i) {
        if (wc[i].status != RI_WC_SUCCESS) return false;
    }
    done += *n;
    return true;
}

// Polls until @p done reaches @p posted; false on a failed completion or after @p limit.
bool await_completions(Consumer &c, size_t &done, size_t posted, std::chrono::seconds limit) {
    const auto give_up = clock_type::now() + limit;
    while (done < posted) {
        if (!reap(*c.cq, done) || clock_type::now() > give_up) return false;
    }
    return true;
}

Active measure(Consumer &c, ual::Endpoint &ep, const Hello &peer, double seconds) {
    Active out;
    auto wr = [&](uint32_t opcode, uint32_t len, ri_sge_t &sge) {
        sge = ri_sge_t{reinterpret_cast<uint64_t>(c.buf.data()), len, c.mr->keys().lkey};
        ri_send_wr_t w{};
        w.opcode = opcode;
        w.flags = RI_SEND_SIGNALED;
        w.sgl = &sge;
        w.num_sge = 1;
        w.u.rdma.remote_addr = peer.addr;
        w.u.rdma.rkey = peer.rkey;
        return w;
    };
    // Read round trips, one at a time, busy-polled.
    size_t done = 0, posted = 0;
    auto t0 = clock_type::now();
    const auto read_end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < read_end) {
        ri_sge_t sge;
        ri_send_wr_t w = wr(RI_WR_RDMA_READ, 8, sge);
        if (!ep.post_send({&w, 1}).ok()) return {};
        ++posted;
        if (!await_completions(c, done, posted, 5s)) return {};
    }
    out.read_rtt = std::chrono::duration<double>(clock_type::now() - t0).count() / static_cast<double>(posted);
    // Writes, a window of kWindow, then a Read that returns once every Write before it is placed.
    done = posted = 0;
    t0 = clock_type::now();
    const auto write_end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < write_end) {
        while (posted - done < kWindow) {
            ri_sge_t sge;
            ri_send_wr_t w = wr(RI_WR_RDMA_WRITE, kWriteSize, sge);
            if (!ep.post_send({&w, 1}).ok()) return {};
            ++posted;
        }
        if (!reap(*c.cq, done)) return {};
    }
    const size_t writes = posted;
    ri_sge_t sge;
    ri_send_wr_t fence = wr(RI_WR_RDMA_READ, 1, sge);
    if (!ep.post_send({&fence, 1}).ok()) return {};
    ++posted;
    if (!await_completions(c, done, posted, 10s)) return {};
    out.write_bps = static_cast<double>(writes) * kWriteSize /
                    std::chrono::duration<double>(clock_type::now() - t0).count();
    return out;
}

/** @brief Waits for the ESTABLISHED events of @p want (contexts), ignoring others; false on anything else. */
bool await_established(ual::SimpleDispatcher &cm, std::set<uint64_t> want) {
    while (!want.empty()) {
        auto e = cm.wait(30s);
        if (!e) {
            std::fprintf(stderr, "bench_scale: waiting for %zu connections: %s\n", want.size(),
                         e.error().to_string().c_str());
            return false;
        }
        if (want.count(e->context) == 0) continue;
        if (e->id != static_cast<uint32_t>(ual::CmEventId::established)) {
            std::fprintf(stderr, "bench_scale: connection event %u instead of established\n", e->id);
            return false;
        }
        want.erase(e->context);
    }
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_scale", argc, argv);  // the passive child leaves by _exit: only this one writes
    size_t connections = 5000;
    size_t in_flight = 256;
    std::string krdmad = BENCH_KRDMAD;
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--connections") == 0) connections = std::strtoull(argv[i + 1], nullptr, 10);
        if (std::strcmp(argv[i], "--in-flight") == 0) in_flight = std::strtoull(argv[i + 1], nullptr, 10);
        if (std::strcmp(argv[i], "--krdmad") == 0) krdmad = argv[i + 1];
    }
    if (connections < 2 || in_flight == 0) {
        std::fprintf(stderr, "bench_scale: --connections must be at least 2 and --in-flight at least 1\n");
        return 2;
    }
    // This bench talks only to the krdmad it starts.
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    ::unsetenv("KRDMA_DEVICE");
    raise_descriptor_limit();
    bench::kill_children_at_exit();

    bench::TempDir dir("openrdma-scale");
    if (dir.path().empty()) return 1;
    bench::remember_dir(dir.path(), bench::kKrdmadDirFiles);
    const auto device = dir.path() / "krdma.sock";
    const auto config = dir.path() / "krdmad.json";
    {
        // Room for every QP (both ends are on sr0) and every object of either process.
        std::ofstream f(config);
        f << R"({"device": ")" << device.string() << R"(", "provider_dir": ")" BENCH_PROVIDER_DIR
          << R"(", "log_level": "warn", "modules": ["softrnic_kvp.so"], "limits": {"objects_per_process": )"
          << 2 * connections + 256 << R"(}, "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1", )"
          << R"("options": {"max_qp": )" << 2 * connections + 64 << "}}]}";
    }
    // Both processes start before this one makes any thread.
    bench::Krdmad daemon(0, krdmad, config, dir.path() / "krdmad.log");
    if (daemon.pid() <= 0) return 1;
    int ctl[2];
    if (::pipe2(ctl, O_CLOEXEC) != 0) return 1;
    const pid_t passive = ::fork();
    if (passive == 0) {
        ::close(ctl[0]);
        ::_exit(run_passive(device, connections, ctl[1]));
    }
    bench::g_passive = passive;
    ::close(ctl[1]);
    int rc = 0;
    bool killed = false;  // the passive process was killed (the teardown measure), not asked to leave
    {
        Consumer c;
        Hello peer;
        if (auto why = c.open(device, connections); !why.empty()) {
            std::fprintf(stderr, "bench_scale: %s\n%s", why.c_str(), daemon.log().c_str());
            rc = 1;
        } else if (::read(ctl[0], &peer, sizeof peer) != static_cast<ssize_t>(sizeof peer)) {
            std::fprintf(stderr, "bench_scale: the passive process did not start\n");
            rc = 1;
        }
        std::vector<std::shared_ptr<ual::Endpoint>> eps;
        eps.reserve(connections);
        uint64_t context = 0;
        // The active QP has room for its window of Writes and the closing Read; the idle ones are small.
        auto connect_batch = [&](size_t n) {
            std::set<uint64_t> want;
            for (size_t i = 0; i < n; ++i) {
                auto ep = c.endpoint(eps.empty() ? 2 * kWindow : 4, ++context);
                if (!ep) return false;
                if (auto st = ep->connect("127.0.0.1", peer.port); !st) {
                    std::fprintf(stderr, "bench_scale: connect %llu: %s\n", static_cast<unsigned long long>(context),
                                 st.error().to_string().c_str());
                    return false;
                }
                want.insert(context);
                eps.push_back(std::move(ep));
            }
            return await_established(*c.cm, std::move(want));
        };
        Active alone, among;
        const long krdmad_fds = descriptors(daemon.pid());  // before any connection: the baseline of the teardowns
        if (rc == 0) {
            std::printf("bench_scale: softrnic sr0 on 127.0.0.1 (CRC on) through krdmad pid %d, passive process pid "
                        "%d; %zu connections (%zu QPs), %zu in flight\n",
                        daemon.pid(), passive, connections, 2 * connections, in_flight);
            if (!connect_batch(1)) {
                std::fprintf(stderr, "bench_scale: the active QP did not connect\n%s", daemon.log().c_str());
                rc = 1;
            } else {
                alone = measure(c, *eps.front(), peer, seconds);
            }
        }
        if (rc == 0 && alone.write_bps <= 0) {
            std::fprintf(stderr, "bench_scale: the active QP's transfers failed\n");
            rc = 1;
        }
        // The same number of raw TCP connections, the same number in flight, before the batch (closed again).
        const double tcp_rate = rc == 0 ? tcp_setup_rate(connections - 1, in_flight) : 0;
        if (rc == 0) {
            const long before = rss_kib(::getpid()) + rss_kib(passive) + rss_kib(daemon.pid());
            const auto t0 = clock_type::now();
            size_t made = 1;
            while (rc == 0 && made < connections) {
                const size_t n = std::min(in_flight, connections - made);
                if (!connect_batch(n)) {
                    std::fprintf(stderr, "bench_scale: connection setup failed after %zu connections\n%s", made,
                                 daemon.log().c_str());
                    rc = 1;
                }
                made += n;
            }
            const double took = std::chrono::duration<double>(clock_type::now() - t0).count();
            // The passive side has seen every ESTABLISHED by now or within moments: let its last accepts settle.
            std::this_thread::sleep_for(200ms);
            const long after = rss_kib(::getpid()) + rss_kib(passive) + rss_kib(daemon.pid());
            if (rc == 0) {
                const double qps = 2.0 * static_cast<double>(connections - 1);
                const double rate = static_cast<double>(connections - 1) / took;
                std::printf("%-34s %9.0f /s     (%zu connections in %.2f s, %zu in flight); TCP connect+accept %.0f /s, "
                            "ratio %.3f (target >= 0.5)\n",
                            "connection setup", rate, connections - 1, took, in_flight, tcp_rate,
                            tcp_rate > 0 ? rate / tcp_rate : 0.0);
                std::printf("%-34s %9.2f KiB    (RSS growth of both consumers and krdmad per QP, %.0f QPs; target "
                            "<= 8 KiB)\n",
                            "memory per idle connected QP", static_cast<double>(after - before) / qps, qps);
                figures.add("connection setup, " + std::to_string(in_flight) + " in flight", rate, "/s",
                            "TCP connect+accept", tcp_rate, tcp_rate > 0 ? rate / tcp_rate : 0.0, ">= 0.5x",
                            tcp_rate > 0 && rate / tcp_rate >= 0.5);
                const double per_qp = static_cast<double>(after - before) / qps;
                figures.add("memory per idle connected QP, " + std::to_string(static_cast<long>(qps)) + " QPs", per_qp,
                            "KiB", "<= 8 KiB", per_qp <= 8);
                among = measure(c, *eps.front(), peer, seconds);
                if (among.write_bps <= 0) {
                    std::fprintf(stderr, "bench_scale: the active QP's transfers failed among the idle ones\n");
                    rc = 1;
                }
            }
        }
        if (rc == 0) {
            std::printf("%-34s %9.2f us     alone %9.2f us     ratio %6.3f (target about 1)\n",
                        "active QP: 8 B Read round trip", among.read_rtt * 1e6, alone.read_rtt * 1e6,
                        among.read_rtt / alone.read_rtt);
            std::printf("%-34s %9.2f GB/s   alone %9.2f GB/s   ratio %6.3f (target about 1)\n",
                        "active QP: 64 KiB Write", among.write_bps / 1e9, alone.write_bps / 1e9,
                        among.write_bps / alone.write_bps);
            figures.add("active QP among the idle: 8 B Read round trip", among.read_rtt * 1e6, "us", "the QP alone",
                        alone.read_rtt * 1e6, -1, "about 1x");
            figures.add("active QP among the idle: 64 KiB Write", among.write_bps / 1e9, "GB/s", "the QP alone",
                        alone.write_bps / 1e9, -1, "about 1x");
        }
        if (rc == 0 && krdmad_fds > 0) {
            // kill -9 of the passive process: krdmad destroys its QPs and closes the connections they held (this
            // process's ends then see the peer gone). Its descriptors come down by one socket per connection.
            const long full = descriptors(daemon.pid());
            const Teardown killing = tear_down(daemon.pid(), full - static_cast<long>(connections), [&] {
                ::kill(passive, SIGKILL);
                (void)::waitpid(passive, nullptr, 0);
            });
            killed = true;
            bench::g_passive = 0;
            // This process destroys its QPs one by one (a round trip each): krdmad back to where it began.
            const Teardown closing = tear_down(daemon.pid(), krdmad_fds, [&] { eps.clear(); });
            auto report = [&](const char *what, const Teardown &t) {
                std::printf("%-34s %9.0f ms     krdmad CPU (target < 1000 ms), %.0f ms until its descriptors are back%s\n",
                            what, t.cpu * 1e3, t.wall * 1e3, t.done ? "" : " (they did not come back in 60 s)");
                figures.add(std::string(what) + ": krdmad CPU", t.cpu * 1e3, "ms", "< 1000 ms", t.done && t.cpu < 1.0);
                if (!t.done) rc = 1;
            };
            const std::string qps = std::to_string(connections) + " QPs";
            report(("teardown, kill -9 of " + qps).c_str(), killing);
            report(("teardown, destroy of " + qps).c_str(), closing);
        }
        eps.clear();
    }
    ::close(ctl[0]);  // the passive process leaves when its end closes
    if (!killed && !bench::await_child(passive, 30, "bench_scale: the passive process")) rc = 1;
    bench::g_passive = 0;
    return rc;
}
