// The data path and connection setup of softrnic over real TCP on 127.0.0.1, each figure next to raw TCP measured
// in the same run with the same sizes:
//  - RDMA Write bandwidth (64 KiB and 1 MiB messages, CRC on) vs a raw TCP stream of the same messages (two
//    threads); the Writes go to a target process of its own (its own uAL, embedded kAL and progress thread, as a
//    peer host's consumer has);
//  - 8-byte RDMA Write ping-pong half round trip vs a raw TCP 8-byte ping-pong, both ends spinning on their CQs;
//  - connection setup (connect + MPA + RDMA-mode transition, both ends, 16 in flight; endpoints made and destroyed
//    outside the clock) per second vs TCP connect + accept likewise, and for reference the design's floor (the
//    system calls such a setup cannot avoid, made by one thread: see floor_setup_rate());
//  - memory per idle connected QP (RSS growth over 256 connected pairs, excluding socket buffers, which are
//    kernel memory).
// Except for the bandwidth target, one process with an embedded kAL: the two ends of each connection are two
// endpoints of it, served by the process's progress thread as any consumer's are. Bandwidth and latency alternate
// with their baselines in rounds and keep the best of each.
//   bench_rdma [--seconds S] [--qps N] [--only bw|latency|setup|memory] [--json FILE]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "endpoint_attributes.hpp"
#include "harness.hpp"
#include "krdmad_process.hpp"
#include "tcp_baseline.hpp"
#include "embedded_link.hpp"
#include "krdma/abi.h"
#include "krdma/message.hpp"
#include "ual/access_layer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

using bench::Fd;
using bench::loopback_listener;
using bench::io_all;

// Context switches of this process (every thread) so far: each is a thread that went to sleep and was woken, or was
// preempted. Per connection set up, the count says how many thread wake-ups the setup costs.
long context_switches() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

// Rounds each bandwidth and latency figure alternates with its baseline, keeping the best of each: on a shared
// virtual machine wakeups vary several-fold from one moment to the next (as bench_verbs does).
constexpr int kRounds = 5;

// Connections set up at once in the setup figures (a server's accept queue under load).
constexpr size_t kSetupBatch = 16;

// Raw TCP connect + accept per second, kSetupBatch at a time; the sockets are made before and closed after the
// clock runs, as the RDMA figure's endpoints are.
double tcp_setup_rate(double seconds, double *switches_per_setup) {
    sockaddr_in a{};
    Fd l = loopback_listener(128, a);
    size_t n = 0;
    long switches = 0;
    std::chrono::duration<double> timed{0};
    const auto end = clock_type::now() + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        std::vector<Fd> clients, servers;
        for (size_t i = 0; i < kSetupBatch; ++i) clients.emplace_back(::socket(AF_INET, SOCK_STREAM, 0));
        const long cs0 = context_switches();
        const auto t0 = clock_type::now();
        for (Fd &c : clients) {
            if (::connect(c.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return 0;
        }
        for (size_t i = 0; i < kSetupBatch; ++i) servers.emplace_back(::accept(l.fd, nullptr, nullptr));
        timed += clock_type::now() - t0;
        switches += context_switches() - cs0;
        n += kSetupBatch;
    }
    *switches_per_setup = static_cast<double>(switches) / static_cast<double>(n);
    return static_cast<double>(n) / timed.count();
}

// Sends @p len bytes on connection @p from and reads them on @p to: one MPA frame or FPDU.
bool hop(int from, int to, uint8_t *buf, size_t len) {
    return ::send(from, buf, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len) &&
           ::recv(to, buf, len, MSG_WAITALL) == static_cast<ssize_t>(len);
}

// One device message from @p from to @p to (a socket pair's ends), framed and read by the device's own code as a
// request or record is: @p len bytes of payload, and @p fd (closed again on arrival) when it is not -1, as an
// ESTABLISHED record brings its socket.
bool device_hop(int from, int to, krdma::Message &m, size_t len, int fd = -1) {
    krdma_msg_hdr h{};
    h.flags = KRDMA_MSG_EVENT;
    const int fds[1] = {fd};
    if (!krdma::send(from, h, std::span<const uint8_t>(m.body.data(), len),
                     std::span<const int>(fds, fd >= 0 ? 1 : 0)).ok()) {
        return false;
    }
    const bool got = krdma::receive(to, m, true) == krdma::RecvResult::message && m.nfds == (fd >= 0 ? 1u : 0u);
    for (size_t i = 0; i < m.nfds; ++i) m.fds[i].reset();
    m.nfds = 0;
    return got;
}

// The floor of this design's setup: the system calls an RDMA connection setup cannot do without when a kAL process
// sets it up for its consumers, made back to back by one thread that never sleeps, kSetupBatch at a time as
// tcp_setup_rate() does. Per connection: TCP connect and accept; an MPA request, reply (RFC 5044, with RFC 6581's
// IRD/ORD private data) and the RTR FPDU, each sent and read; and on a socket pair, as between a consumer and the
// kAL, framed and read by the device's own code (krdma::send and receive): the CONNECT request, the CONNECT_REQUEST
// record, the ACCEPT request, and the two ESTABLISHED records, each of which passes a socket. No MPA parsing, no QP,
// no threads: what is left of a setup when every cost of ours is gone.
// Connections per second; 0 on failure.
double floor_setup_rate(double seconds) {
    sockaddr_in a{};
    Fd l = loopback_listener(128, a);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 0;
    Fd kal_end(pair[0]), consumer_end(pair[1]);
    constexpr size_t kMpaFrame = 20 + 4;  // MPA request or reply header and IRD/ORD private data
    constexpr size_t kRtr = 20;           // a zero-length RDMA Write: MPA length, DDP/RDMAP header, CRC
    auto m = std::make_unique<krdma::Message>();
    uint8_t frame[kMpaFrame];
    size_t n = 0;
    std::chrono::duration<double> timed{0};
    const auto end = clock_type::now() + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        std::vector<Fd> clients, servers;
        for (size_t i = 0; i < kSetupBatch; ++i) clients.emplace_back(::socket(AF_INET, SOCK_STREAM, 0));
        const auto t0 = clock_type::now();
        for (Fd &c : clients) {
            if (!device_hop(consumer_end.fd, kal_end.fd, *m, sizeof(krdma_connect))) return 0;  // CONNECT
            if (::connect(c.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return 0;
        }
        for (size_t i = 0; i < kSetupBatch; ++i) {
            servers.emplace_back(::accept(l.fd, nullptr, nullptr));
            const int c = clients[i].fd, s = servers.back().fd;
            if (!hop(c, s, frame, kMpaFrame)) return 0;                                            // MPA request
            if (!device_hop(kal_end.fd, consumer_end.fd, *m, sizeof(krdma_cm_event))) return 0;  // CONNECT_REQUEST
            if (!device_hop(consumer_end.fd, kal_end.fd, *m, sizeof(krdma_accept))) return 0;    // ACCEPT
            if (!hop(s, c, frame, kMpaFrame)) return 0;                                            // MPA reply
            if (!device_hop(kal_end.fd, consumer_end.fd, *m, sizeof(krdma_cm_event), s)) return 0;  // ESTABLISHED
            if (!device_hop(kal_end.fd, consumer_end.fd, *m, sizeof(krdma_cm_event), c)) return 0;  // ESTABLISHED
            if (!hop(c, s, frame, kRtr)) return 0;                                                  // RTR
        }
        timed += clock_type::now() - t0;
        n += kSetupBatch;
    }
    return static_cast<double>(n) / timed.count();
}

// One consumer's objects for the RDMA figures.
struct Rdma {
    std::shared_ptr<ual::AccessLayer> al;
    std::shared_ptr<ual::Adapter> adapter;
    std::shared_ptr<ual::ProtectionZone> pz;
    std::shared_ptr<ual::SimpleDispatcher> dto, req, cm;
    std::shared_ptr<ual::CompletionQueue> cq;
    std::shared_ptr<ual::ListenPoint> lp;
    std::vector<uint8_t> buf;
    std::shared_ptr<ual::MemoryRegion> mr;
    uint64_t contexts = 0;  // the last endpoint context handed out
    long setup_switches = 0;  // context switches inside setup_batch()'s clock

    bool open(const std::string &config, size_t bytes) {
        ual::Options o;
        o.embedded_kal = &kal::start_embedded_link;
        o.embedded_config = config;
        auto a = ual::AccessLayer::open(o);
        if (!a) return false;
        al = *a;
        auto ad = al->open_adapter("sr0");
        if (!ad) return false;
        adapter = *ad;
        pz = *adapter->create_pz();
        dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 4096);
        req = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 1024);
        cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, 4096);
        cq = *adapter->create_cq(4096, dto);
        buf.assign(bytes, 0);
        mr = *pz->register_memory(buf.data(), buf.size(),
                                  RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
        auto l = adapter->listen(0, req);
        if (!l) return false;
        lp = *l;
        return true;
    }

    // A completion queue of its own with its DTO dispatcher (which waits for completions without spinning).
    struct Cq {
        std::shared_ptr<ual::SimpleDispatcher> events;
        std::shared_ptr<ual::CompletionQueue> cq;
    };
    Cq own_cq() {
        auto d = ual::SimpleDispatcher::create(ual::EventStream::dto, 4096);
        if (!d) return {};
        auto c = adapter->create_cq(4096, *d);
        if (!c) return {};
        return {*d, *c};
    }

    std::shared_ptr<ual::Endpoint> endpoint(uint32_t depth, const std::shared_ptr<ual::CompletionQueue> &c) {
        auto e = pz->create_endpoint(bench::endpoint_attributes(depth, ++contexts), c, c);
        if (!e) return nullptr;
        (*e)->set_connection_dispatcher(cm);
        return *e;
    }

    // A connected pair of endpoints (client, server) on completion queues @p ca and @p cb (null: the shared one);
    // null on failure.
    std::pair<std::shared_ptr<ual::Endpoint>, std::shared_ptr<ual::Endpoint>> connect_pair(
        uint32_t depth, const std::shared_ptr<ual::CompletionQueue> &ca = nullptr,
        const std::shared_ptr<ual::CompletionQueue> &cb = nullptr) {
        auto a = endpoint(depth, ca ? ca : cq);
        const uint64_t a_ctx = contexts;
        auto b = endpoint(depth, cb ? cb : cq);
        const uint64_t b_ctx = contexts;
        if (!a || !b) return {};
        if (!a->connect("127.0.0.1", lp->port()).ok()) return {};
        auto r = req->wait(10s);
        if (!r || !r->connection) return {};
        if (!b->accept(r->connection->request).ok()) return {};
        for (int got = 0; got < 2;) {
            auto e = cm->wait(10s);
            if (!e) return {};
            // The previous pair's teardown (one end destroyed while its peer still lived) left events behind.
            if (e->context != a_ctx && e->context != b_ctx) continue;
            if (e->id != static_cast<uint32_t>(ual::CmEventId::established)) return {};
            ++got;
        }
        return {a, b};
    }

    // Connects kSetupBatch pairs of endpoints made beforehand, all in flight at once: connect each, accept each
    // request as it comes, then wait until every end is established. Seconds the setup took (the endpoints are
    // destroyed after the clock stops); negative on failure.
    double setup_batch() {
        std::vector<std::shared_ptr<ual::Endpoint>> clients, servers;
        std::set<uint64_t> mine;
        for (size_t i = 0; i < kSetupBatch; ++i) {
            clients.push_back(endpoint(4, cq));
            mine.insert(contexts);
            servers.push_back(endpoint(4, cq));
            mine.insert(contexts);
            if (!clients.back() || !servers.back()) return -1;
        }
        const long cs0 = context_switches();
        const auto t0 = clock_type::now();
        for (auto &c : clients) {
            if (!c->connect("127.0.0.1", lp->port()).ok()) return -1;
        }
        for (auto &srv : servers) {
            auto r = req->wait(10s);
            // As a server would: no round trip per accept (a refusal would come as a BROKEN event below).
            if (!r || !r->connection || !srv->accept_async(r->connection->request).ok()) return -1;
        }
        for (size_t established = 0; established < 2 * kSetupBatch;) {
            auto e = cm->wait(10s);
            if (!e) return -1;
            if (mine.count(e->context) == 0) continue;  // an earlier batch's teardown
            if (e->id != static_cast<uint32_t>(ual::CmEventId::established)) return -1;
            ++established;
        }
        setup_switches += context_switches() - cs0;
        return std::chrono::duration<double>(clock_type::now() - t0).count();
    }

    static void drain(ual::CompletionQueue &c) {
        ri_wc_t wc[64];
        for (;;) {
            auto n = c.poll({wc, 64});
            if (!n || *n == 0) return;
        }
    }

};

ri_send_wr_t write_wr(Rdma &r, ri_sge_t &sge, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled) {
    sge = ri_sge_t{reinterpret_cast<uint64_t>(r.buf.data() + off), len, r.mr->keys().lkey};
    ri_send_wr_t wr{};
    wr.opcode = RI_WR_RDMA_WRITE;
    wr.flags = signaled ? RI_SEND_SIGNALED : 0;
    wr.sgl = &sge;
    wr.num_sge = 1;
    wr.u.rdma.remote_addr = raddr;
    wr.u.rdma.rkey = rkey;
    return wr;
}

// 8-byte RDMA Write ping-pong: each side waits for the other's byte to change in its own memory (polling its CQ
// meanwhile, which drives inline progress), as ib_write_lat does. Seconds per half round trip.
double rdma_pingpong(Rdma &r, ual::Endpoint &a, ual::CompletionQueue &ca, ual::Endpoint &b, ual::CompletionQueue &cb,
                     double seconds) {
    volatile uint8_t *a_mem = r.buf.data() + 64;   // where b writes
    volatile uint8_t *b_mem = r.buf.data() + 128;  // where a writes
    auto poll_some = [](ual::CompletionQueue &c) {
        ri_wc_t wc[16];
        (void)c.poll({wc, 16});
    };
    // Each side writes the value from its own source byte (a at 0, b at 192) into the other's cell.
    auto write_from = [&r](ual::Endpoint &ep, size_t source, volatile uint8_t *cell, uint8_t v) {
        r.buf[source] = v;
        ri_sge_t sge;
        ri_send_wr_t wr = write_wr(r, sge, source, 8, reinterpret_cast<uint64_t>(cell), r.mr->keys().rkey, false);
        return ep.post_send({&wr, 1}).ok();
    };
    return bench::write_pingpong(
        seconds, a_mem, b_mem, [&](uint8_t v) { return write_from(a, 0, b_mem, v); },
        [&](uint8_t v) { return write_from(b, 192, a_mem, v); }, [&] { poll_some(ca); }, [&] { poll_some(cb); });
}

// The bandwidth target: a process of its own (its own uAL, embedded kAL and progress thread, as a peer host's
// consumer would have), so sender and receiver do not share one progress thread. It reads the listen port from
// @p ctl, connects with its buffer's address and rkey as private data, then reports each Send that arrives (the
// sender's end-of-run marker) with one byte on @p ctl until @p ctl closes.
int run_target(const std::string &config, int ctl) {
    uint16_t port = 0;
    if (::read(ctl, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) return 1;
    Rdma t;
    if (!t.open(config, 4u << 20)) return 1;
    auto c = t.own_cq();
    auto ep = c.cq ? t.endpoint(64, c.cq) : nullptr;
    if (!ep) return 1;
    ri_sge_t rs{reinterpret_cast<uint64_t>(t.buf.data()), 64, t.mr->keys().lkey};
    ri_recv_wr_t rw{1, &rs, 1, 0};
    for (int i = 0; i < 8; ++i) (void)ep->post_recv({&rw, 1});
    uint8_t pd[12];
    const uint64_t addr = reinterpret_cast<uint64_t>(t.buf.data());
    const uint32_t rkey = t.mr->keys().rkey;
    std::memcpy(pd, &addr, 8);
    std::memcpy(pd + 8, &rkey, 4);
    if (!ep->connect("127.0.0.1", port, std::vector<uint8_t>(pd, pd + sizeof pd)).ok()) return 1;
    auto e = t.cm->wait(10s);
    if (!e || e->id != static_cast<uint32_t>(ual::CmEventId::established)) return 1;
    for (;;) {
        auto w = c.events->wait(1s);
        if (!w) {
            pollfd p{ctl, POLLIN, 0};
            if (::poll(&p, 1, 0) == 1) return 0;  // the sender is done (closed, or nothing more to say)
            continue;
        }
        // The sender tearing its end down flushes the receives left: the run is over.
        if (w->wc.status != RI_WC_SUCCESS) return w->wc.status == RI_WC_WR_FLUSH_ERR ? 0 : 1;
        (void)ep->post_recv({&rw, 1});
        const uint8_t one = 1;
        if (::write(ctl, &one, 1) != 1) return 0;
    }
}

// RDMA Write bandwidth into the target process's buffer (@p raddr, @p rkey): a window of signaled Writes; the
// clock stops when the target reports that the final Send arrived on @p ctl (everything before it is placed).
double remote_write_bw(Rdma &r, ual::Endpoint &a, Rdma::Cq &ca, uint64_t raddr, uint32_t rkey, int ctl, size_t size,
                       double seconds) {
    const uint32_t window = 16;
    size_t outstanding = 0, sent = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        while (outstanding < window) {
            ri_sge_t sge;
            ri_send_wr_t wr = write_wr(r, sge, 0, static_cast<uint32_t>(size), raddr, rkey, true);
            if (!a.post_send({&wr, 1}).ok()) break;
            ++outstanding;
            sent += size;
        }
        auto e = ca.events->wait(10s);
        if (!e || e->wc.status != RI_WC_SUCCESS) return 0;
        if (e->wc.opcode == RI_WC_RDMA_WRITE) --outstanding;
    }
    ri_sge_t sge{reinterpret_cast<uint64_t>(r.buf.data()), 1, r.mr->keys().lkey};
    ri_send_wr_t fin{};
    fin.opcode = RI_WR_SEND;
    fin.flags = RI_SEND_SIGNALED;
    fin.sgl = &sge;
    fin.num_sge = 1;
    if (!a.post_send({&fin, 1}).ok()) return 0;
    // The target says when the final Send arrived; 10 s without a word is a failure, never a hang.
    pollfd p{ctl, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
        std::fprintf(stderr, "bench_rdma: the target did not report the final Send within 10 s\n");
        return 0;
    }
    uint8_t got = 0;
    if (::read(ctl, &got, 1) != 1) return 0;
    const double el = std::chrono::duration<double>(clock_type::now() - t0).count();
    Rdma::drain(*ca.cq);
    return static_cast<double>(sent) / el;
}

long rss_kib() {
    std::ifstream in("/proc/self/statm");
    long pages = 0, resident = 0;
    in >> pages >> resident;
    return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

int main(int argc, char **argv) {
    // Line by line, so a run killed by a timeout has printed every figure it finished.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_rdma", argc, argv);
    int qps = 256;
    std::string only;  // one figure alone (for profiling), or all
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--qps") == 0) qps = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    }
    const auto wanted = [&only](const char *figure) { return only.empty() || only == figure; };
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("bench_rdma." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string config = (dir / "kal.json").string();
    {
        std::ofstream f(config);
        // Room for the memory figure's QPs (both ends of each pair are on this RNIC and in this process) beside
        // softrnic's default 1024 QPs and the kAL's default 4096 objects per process.
        const int max_qp = std::max(1024, 2 * qps + 64);
        f << R"({"provider_dir": ")" BENCH_PROVIDER_DIR R"(", "log_level": "warn", "modules": ["softrnic_kvp.so"],
               "limits": {"objects_per_process": )"
          << std::max(4096, 4 * qps + 256) << R"(},
               "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1", "options": {"max_qp": )"
          << max_qp << "}}]}";
    }
    // The bandwidth target process, forked before this process starts any thread.
    int ctl[2] = {-1, -1};
    pid_t target = -1;
    if (wanted("bw")) {
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) return 1;
        target = ::fork();
        if (target == 0) {
            ::close(ctl[0]);
            ::_exit(run_target(config, ctl[1]));
        }
        ::close(ctl[1]);
    }
    int rc = 0;
    {
        Rdma r;
        if (!r.open(config, 4u << 20)) {
            std::fprintf(stderr, "bench_rdma: cannot open softrnic through an embedded kAL\n");
            std::filesystem::remove_all(dir);
            return 1;
        }
        // The measured pair has a completion queue per end, as two processes would.
        auto ca = r.own_cq(), cb = r.own_cq();
        auto [a, b] = ca.cq && cb.cq ? r.connect_pair(64, ca.cq, cb.cq) : decltype(r.connect_pair(64)){};
        if (!a) {
            std::fprintf(stderr, "bench_rdma: cannot connect two endpoints\n");
            rc = 1;
        } else {
            std::printf("softrnic over TCP on 127.0.0.1 (CRC on), %.2f s per figure in %d alternating rounds (best of "
                        "each); ratio = RDMA / raw TCP\n",
                        seconds, kRounds);
            if (wanted("bw")) {
                // The target connects to the listen point with its buffer's address and rkey.
                const uint16_t port = r.lp->port();
                auto req = ::write(ctl[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port)
                               ? r.req->wait(30s)
                               : rdma::Expected<ual::Event>(rdma::Error(RI_EIO, "no target"));
                auto tx = r.endpoint(64, ca.cq);
                std::shared_ptr<const ual::ConnectionData> cd = req ? req->connection : nullptr;
                bool up = cd && cd->private_data.size() == 12 && tx && tx->accept(cd->request).ok();
                for (int got = 0; up && got == 0;) {
                    auto e = r.cm->wait(10s);
                    if (!e) up = false;
                    else if (e->context == r.contexts) got = e->id == static_cast<uint32_t>(ual::CmEventId::established) ? 1 : -1;
                    if (got < 0) up = false;
                }
                if (!up) {
                    std::fprintf(stderr, "bench_rdma: the bandwidth target process did not connect\n");
                    rc = 1;
                } else {
                    uint64_t raddr;
                    uint32_t rkey;
                    std::memcpy(&raddr, cd->private_data.data(), 8);
                    std::memcpy(&rkey, cd->private_data.data() + 8, 4);
                    for (size_t size : {size_t{64} << 10, size_t{1} << 20}) {
                        double base = 0, bw = 0;
                        for (int round = 0; round < kRounds; ++round) {
                            base = std::max(base, bench::tcp_stream(size, seconds / kRounds));
                            const double got = remote_write_bw(r, *tx, ca, raddr, rkey, ctl[0], size, seconds / kRounds);
                            if (got <= 0) rc = 1;  // a failed completion (the smoke test's check)
                            bw = std::max(bw, got);
                        }
                        bench::row("RDMA Write " + std::to_string(size >> 10) + " KiB", bw, "TCP stream", base);
                        figures.add("RDMA Write " + std::to_string(size >> 10) + " KiB", bw / 1e9, "GB/s",
                                    "TCP stream", base / 1e9, -1, ">= 0.95x", bw / base >= 0.95);
                    }
                }
            }
            if (wanted("latency")) {
                // Like for like: the RDMA ends spin on their CQs and memory, so the baseline's ends spin on a
                // non-blocking receive; the blocking TCP ping-pong (sleeping ends) is printed for reference.
                double spin_lat = 1e9, block_lat = 1e9, lat = 1e9;
                for (int round = 0; round < kRounds; ++round) {
                    spin_lat = std::min(spin_lat, bench::tcp_pingpong(seconds / kRounds, bench::Waiting::spinning));
                    block_lat = std::min(block_lat, bench::tcp_pingpong(seconds / kRounds, bench::Waiting::blocking));
                    const double got = rdma_pingpong(r, *a, *ca.cq, *b, *cb.cq, seconds / kRounds);
                    if (got <= 0) rc = 1;
                    lat = std::min(lat, got);
                }
                std::printf("%-34s %9.2f us     %-12s %9.2f us     ratio %6.3f (target <= 1.10)\n",
                            "8 B RDMA Write half round trip", lat * 1e6, "TCP 8 B spin", spin_lat * 1e6,
                            lat / spin_lat);
                std::printf("%-34s %9.2f us     %-12s %9.2f us     ratio %6.3f (reference: sleeping ends)\n", "",
                            lat * 1e6, "TCP 8 B block", block_lat * 1e6, lat / block_lat);
                figures.add("8 B RDMA Write half round trip", lat * 1e6, "us", "TCP 8 B ping-pong, spinning ends",
                            spin_lat * 1e6, -1, "<= 1.10x", lat / spin_lat <= 1.10);
                figures.add("8 B RDMA Write half round trip (reference)", lat * 1e6, "us",
                            "TCP 8 B ping-pong, sleeping ends", block_lat * 1e6);
            }
            // Connection setup: connect + MPA + transition at both ends, then both endpoints destroyed.
            size_t n = 0;
            double timed = 0;
            const auto end = clock_type::now() + std::chrono::duration<double>(seconds);
            while (wanted("setup") && clock_type::now() < end) {
                const double t = r.setup_batch();
                if (t < 0) {
                    std::fprintf(stderr, "bench_rdma: connection setup failed after %zu connections\n", n);
                    rc = 1;
                    break;
                }
                timed += t;
                n += kSetupBatch;
            }
            if (n > 0) {
                const double setup = static_cast<double>(n) / timed;
                double base_switches = 0;
                const double base_setup = tcp_setup_rate(seconds, &base_switches);
                std::printf("%-34s %9.0f /s     %-12s %9.0f /s     ratio %6.3f (target >= 0.5)\n",
                            "connection setup", setup, "TCP connect", base_setup, setup / base_setup);
                figures.add("connection setup, 16 in flight", setup, "/s", "TCP connect+accept", base_setup, -1,
                            ">= 0.5x", setup / base_setup >= 0.5);
                std::printf("%-34s %9.1f          %-12s %9.1f\n", "  context switches per connection",
                            static_cast<double>(r.setup_switches) / static_cast<double>(n), "TCP connect",
                            base_switches);
                // What the design allows at best (see floor_setup_rate): the target above can be no nearer.
                const double floor = floor_setup_rate(seconds);
                std::printf("%-34s %9.0f /s     %-12s %9.0f /s     ratio %6.3f (reference: RDMA / floor %.3f)\n",
                            "  the design's floor, one thread", floor, "TCP connect", base_setup,
                            floor / base_setup, floor > 0 ? setup / floor : 0.0);
            }
            // Memory per idle connected QP.
            std::vector<std::shared_ptr<ual::Endpoint>> keep;
            Rdma::drain(*r.cq);
            const long before = rss_kib();
            for (int i = 0; wanted("memory") && i < qps; ++i) {
                auto [x, y] = r.connect_pair(16);
                if (!x) {
                    std::fprintf(stderr, "bench_rdma: connection %d of %d failed\n", i, qps);
                    rc = 1;
                    break;
                }
                keep.push_back(x);
                keep.push_back(y);
            }
            const long after = rss_kib();
                if (!keep.empty()) {
                std::printf("%-34s %9.2f KiB    (%zu QPs of depth 16, RSS growth; target <= 8 KiB)\n",
                            "memory per idle connected QP", static_cast<double>(after - before) / keep.size(),
                            keep.size());
                const double per_qp = static_cast<double>(after - before) / static_cast<double>(keep.size());
                figures.add("memory per idle connected QP", per_qp, "KiB", "<= 8 KiB", per_qp <= 8);
            }
        }
    }
    if (target > 0) {
        ::close(ctl[0]);  // the target leaves when its control socket closes
        // 30 s at most (it sees the close within a second): a target that hangs is killed and reported.
        if (!bench::await_child(target, 30, "bench_rdma: the bandwidth target process")) rc = 1;
    }
    std::filesystem::remove_all(dir);
    return rc;
}
