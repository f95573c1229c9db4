// RDMA between two processes on one host (issue 40): two consumer processes through one krdmad (started here on a
// private device path), softrnic on 127.0.0.1, so the kAL holds both ends of every connection and pairs them with a
// same-host channel (unless --path wire, which turns the RNIC's same_host option off). Each figure next to its
// baselines, measured in the same run with the same sizes:
//
//  - RDMA Write and Send bandwidth, one QP, 64 KiB to 8 MiB (a window of messages; the clock stops when a Read
//    behind them returns, so every byte is placed) vs a raw TCP loopback stream of the same messages (target
//    >= 5x) and vs one thread's memcpy of the same size (target >= 0.4x: one copy is the limit);
//  - 8 B RDMA Write and Send ping-pong half round trips and the 8 B RDMA Read round trip, both ends polling, vs the
//    spinning TCP ping-pong (target <= 0.2x); 64 KiB Write ping-pong (target <= 0.5x); the 8 B RFC 7306
//    fetch-and-add round trip on the same QP vs its 8 B Read round trip, one of each in turn, medians (target <= 1.1x;
//    issue 43);
//  - 64 QPs of 64 KiB Writes between the two processes vs 64 TCP streams (target >= 5x).
//
//   bench_samehost [--seconds S] [--provider softrnic|hwstub] [--path same-host|wire] [--ring BYTES]
//                  [--pull-min BYTES] [--krdmad PATH]
//                  [--only WORDS] [--json FILE]
// --only runs just the figures whose name contains WORDS ("Write 8 MiB", "round trip", "64 QPs"), to profile one.
// --pull-min sets softrnic's pull_min option: 0 moves every byte through the channel's rings (two copies).
//
// Exit status non-zero only when something failed. krdmad and the passive process go with it on every way out.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <string>
#include <thread>
#include <vector>

#include "endpoint_attributes.hpp"
#include "harness.hpp"
#include "krdmad_consumer.hpp"
#include "krdmad_process.hpp"
#include "tcp_baseline.hpp"
#include "ual/access_layer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The RNIC both processes open: softrnic's sr0, or hwstub's hw0 with --provider hwstub.
std::string g_provider = "softrnic";
std::string g_rnic = "sr0";

constexpr size_t kBuffer = 8u << 20;  // each process's registered buffer: the largest message
constexpr size_t kCells = 4096;       // ping-pong cells live past the messages' end
constexpr uint32_t kQps = 64;
constexpr int kRounds = 3;
// Sends of these sizes are pings the passive side answers with a Send of the same size; bandwidth Sends are powers of
// two and are not answered.
constexpr uint32_t kPing = 8;
constexpr uint32_t kBigPing = (64u << 10) - 8;
// Receives the passive side keeps posted on each QP, and the credit: iWARP has no receiver-not-ready retry (a Send
// that finds no receive ends the connection), so as real protocols do, the passive side writes how many Sends it
// received (at kCreditCell of the active side's buffer, every kCreditEvery) and the active side keeps at most
// kCredit Sends beyond that.
constexpr uint32_t kRecvs = 64;
constexpr uint32_t kCreditEvery = 8;
constexpr uint64_t kCredit = kRecvs - 2 * kCreditEvery;
constexpr size_t kCreditCell = kBuffer + 512;
uint64_t g_sends = 0;  // Sends the active side posted on its first QP

// One consumer process: its buffer holds the messages, then the cells.
struct Consumer : bench::KrdmadConsumer {
    std::string open(const std::filesystem::path &device) {
        std::string why = KrdmadConsumer::open(device, kBuffer + kCells, 1024, 8192, g_rnic);
        if (why.empty()) std::memset(buf.data() + kCreditCell, 0, 8);  // no Send received yet
        return why;
    }
};

struct Peer {
    uint16_t port = 0;
    uint64_t addr = 0;
    uint32_t rkey = 0;
};

ri_send_wr_t make_wr(const Consumer &c, ri_sge_t &sge, uint32_t opcode, size_t off, uint32_t len, uint64_t raddr,
                     uint32_t rkey, uint32_t flags = RI_SEND_SIGNALED) {
    sge = ri_sge_t{c.addr(off), len, c.mr->keys().lkey};
    ri_send_wr_t w{};
    w.opcode = opcode;
    w.flags = flags;
    w.sgl = &sge;
    w.num_sge = 1;
    w.u.rdma.remote_addr = raddr;
    w.u.rdma.rkey = rkey;
    return w;
}

// The passive process: listens, accepts every connection (the active side's buffer address and rkey come as
// private data), keeps receives posted on each, and busy-polls its CQ: it answers a Send with a Send and a change of
// its Write cell with a Write of the same value into the active side's cell. Leaves when @p ctl closes.
int run_passive(const std::filesystem::path &device, int ctl) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    Consumer c;
    if (auto why = c.open(device); !why.empty()) {
        std::fprintf(stderr, "bench_samehost (passive): %s\n", why.c_str());
        return 1;
    }
    auto req = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 1024);
    auto lp = c.adapter->listen(0, req);
    if (!lp) return 1;
    Peer me{(*lp)->port(), c.addr(), c.mr->keys().rkey};
    if (::write(ctl, &me, sizeof me) != static_cast<ssize_t>(sizeof me)) return 1;
    struct Conn {
        std::shared_ptr<ual::Endpoint> ep;
        Peer peer;
    };
    std::vector<Conn> conns;
    volatile uint8_t *cell = c.buf.data() + kBuffer;  // the active side writes here
    uint8_t last = *cell;
    uint64_t received = 0;  // Sends that arrived on the first QP (the credit)
    ri_sge_t rs{c.addr(), static_cast<uint32_t>(kBuffer), c.mr->keys().lkey};
    ri_recv_wr_t rw{0, &rs, 1, 0};
    for (uint64_t n = 0;; ++n) {
        if ((n & 1023) == 0) {
            pollfd p{ctl, POLLIN, 0};
            if (::poll(&p, 1, 0) > 0) break;  // the active side is done
            if (auto r = req->dequeue(); r && *r && (*r)->connection) {
                const auto &pd = (*r)->connection->private_data;
                Conn k;
                k.ep = c.endpoint(256, conns.size() + 1);
                if (!k.ep || pd.size() != 12) return 1;
                std::memcpy(&k.peer.addr, pd.data(), 8);
                std::memcpy(&k.peer.rkey, pd.data() + 8, 4);
                rw.wr_id = conns.size();
                for (int i = 0; i < 64; ++i) (void)k.ep->post_recv({&rw, 1});
                if (!k.ep->accept_async((*r)->connection->request).ok()) return 1;
                conns.push_back(std::move(k));
            }
        }
        ri_wc_t wc[32];
        auto got = c.cq->poll({wc, 32});
        if (!got) return 1;
        for (size_t i = 0; i < *got; ++i) {
            if (wc[i].status != RI_WC_SUCCESS) {
                if (wc[i].status == RI_WC_WR_FLUSH_ERR) continue;  // a connection the active side closed
                std::fprintf(stderr, "bench_samehost (passive): completion status %u\n", wc[i].status);
                return 1;
            }
            if (wc[i].opcode != RI_WC_RECV) continue;
            Conn &k = conns.at(wc[i].wr_id);
            rw.wr_id = wc[i].wr_id;
            if (auto st = k.ep->post_recv({&rw, 1}); !st.ok()) {
                std::fprintf(stderr, "bench_samehost (passive): repost failed: %s\n", st.describe().c_str());
            }
            if (wc[i].wr_id == 0 && (++received % kCreditEvery) == 0) {
                std::memcpy(c.buf.data() + kCreditCell, &received, sizeof received);
                ri_sge_t s;
                ri_send_wr_t w = make_wr(c, s, RI_WR_RDMA_WRITE, kCreditCell, 8, k.peer.addr + kCreditCell,
                                         k.peer.rkey, 0);
                (void)k.ep->post_send({&w, 1});
            }
            if (wc[i].byte_len == kPing || wc[i].byte_len == kBigPing) {  // a ping: answer it
                ri_sge_t s;
                ri_send_wr_t w = make_wr(c, s, RI_WR_SEND, 0, wc[i].byte_len, 0, 0, 0);
                (void)k.ep->post_send({&w, 1});
            }
        }
        if (*cell != last && !conns.empty()) {
            last = *cell;
            c.buf[kBuffer + 128] = last;
            ri_sge_t s;
            ri_send_wr_t w = make_wr(c, s, RI_WR_RDMA_WRITE, kBuffer + 128, 8, conns.front().peer.addr + kBuffer,
                                     conns.front().peer.rkey, 0);
            (void)conns.front().ep->post_send({&w, 1});
        }
    }
    return 0;
}

bool reap(ual::CompletionQueue &cq, size_t &done, uint32_t *recvs = nullptr) {
    ri_wc_t wc[32];
    auto n = cq.poll({wc, 32});
    if (!n) return false;
    for (size_t i = 0; i < *n; ++i) {
        if (wc[i].status != RI_WC_SUCCESS) {
            std::fprintf(stderr, "bench_samehost: completion status %u (opcode %u, vendor error %#x)\n", wc[i].status, wc[i].opcode, wc[i].vendor_err);
            return false;
        }
        if (wc[i].opcode == RI_WC_RECV) {
            if (recvs != nullptr) ++*recvs;
        } else {
            ++done;
        }
    }
    return true;
}

bool await(ual::CompletionQueue &cq, size_t &done, size_t want, uint32_t *recvs = nullptr) {
    const auto give_up = clock_type::now() + 20s;
    while (done < want) {
        if (!reap(cq, done, recvs) || clock_type::now() > give_up) return false;
    }
    return true;
}

// Bandwidth of @p opcode messages of @p size on @p eps (round robin), a window per QP; bytes per second.
double stream_bw(Consumer &c, std::vector<std::shared_ptr<ual::Endpoint>> &eps, const Peer &peer, uint32_t opcode,
                 size_t size, double seconds) {
    const uint32_t window = size >= (4u << 20) ? 4 : size >= (1u << 20) ? 8 : 16;
    size_t posted = 0, done = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        for (auto &ep : eps) {
            while (posted - done < window * eps.size()) {
                if (opcode == RI_WR_SEND) {
                    uint64_t credit;
                    std::memcpy(&credit, const_cast<const uint8_t *>(c.buf.data()) + kCreditCell, sizeof credit);
                    if (g_sends - credit >= kCredit) break;  // the passive side has not reposted enough yet
                }
                ri_sge_t s;
                ri_send_wr_t w = make_wr(c, s, opcode, 0, static_cast<uint32_t>(size), peer.addr, peer.rkey);
                if (!ep->post_send({&w, 1}).ok()) break;
                ++posted;
                if (opcode == RI_WR_SEND) ++g_sends;
                if (eps.size() > 1) break;  // next QP
            }
        }
        if (!reap(*c.cq, done)) return 0;
    }
    // A Read behind the messages on each QP: once they return, every byte before them is placed.
    for (auto &ep : eps) {
        ri_sge_t s;
        ri_send_wr_t r = make_wr(c, s, RI_WR_RDMA_READ, kBuffer + 256, 1, peer.addr + kBuffer + 256, peer.rkey);
        // The send queue may be full (a Write completes once its bytes left, or, by single copy, once the peer
        // copied them): completions make room.
        const auto give_up = clock_type::now() + 20s;
        for (;;) {
            auto st = ep->post_send({&r, 1});
            if (st.ok()) break;
            if (st.code() != RI_EAGAIN || clock_type::now() > give_up) {
                std::fprintf(stderr, "bench_samehost: the Read behind the messages: %s\n", st.describe().c_str());
                return 0;
            }
            if (!reap(*c.cq, done)) return 0;
        }
        ++posted;
    }
    if (!await(*c.cq, done, posted)) {
        std::fprintf(stderr, "bench_samehost: %zu of %zu completions after 20 s\n", done, posted);
        return 0;
    }
    const size_t messages = posted - eps.size();
    return static_cast<double>(messages) * static_cast<double>(size) /
           std::chrono::duration<double>(clock_type::now() - t0).count();
}

// One thread's memcpy of @p size bytes between two buffers, bytes per second.
double memcpy_rate(size_t size, double seconds) {
    std::vector<uint8_t> a(size, 1), b(size, 2);
    size_t n = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        std::memcpy(b.data(), a.data(), size);
        a[n % size] = static_cast<uint8_t>(n);
        ++n;
    }
    volatile uint8_t sink = b[size / 2];
    (void)sink;
    return static_cast<double>(n) * static_cast<double>(size) /
           std::chrono::duration<double>(clock_type::now() - t0).count();
}

// 64 TCP streams of 64 KiB messages: one thread writes a message to each in turn, another reads them likewise.
double tcp_streams(size_t n, size_t size, double seconds) {
    std::vector<bench::Fd> cs(n), ss(n);
    for (size_t i = 0; i < n; ++i) {
        if (!bench::tcp_pair(cs[i], ss[i])) return 0;
    }
    std::atomic<bool> stop{false};
    std::atomic<size_t> rounds{0};
    std::thread reader([&] {
        std::vector<uint8_t> buf(size);
        while (true) {
            for (size_t i = 0; i < n; ++i) {
                if (!bench::io_all(false, ss[i].fd, buf.data(), size)) return;
            }
            if (rounds.fetch_add(1) + 1 == 0) return;
        }
    });
    std::vector<uint8_t> buf(size, 3);
    size_t sent = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock_type::now() < end) {
        for (size_t i = 0; i < n; ++i) {
            if (!bench::io_all(true, cs[i].fd, buf.data(), size)) stop = true;
        }
        if (stop) break;
        ++sent;
    }
    while (rounds.load() < sent) std::this_thread::yield();
    const double el = std::chrono::duration<double>(clock_type::now() - t0).count();
    for (auto &c : cs) ::shutdown(c.fd, SHUT_RDWR);
    reader.join();
    return static_cast<double>(sent) * static_cast<double>(n) * static_cast<double>(size) / el;
}

}  // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_samehost", argc, argv);
    std::string krdmad = BENCH_KRDMAD;
    std::string path = "same-host";
    std::string ring;      // llp.same_host.ring_bytes, or krdmad's default
    std::string pull_min;  // softrnic's pull_min, or its default
    std::string only;      // run only the figures whose name contains this
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--ring") == 0) ring = argv[i + 1];
        if (std::strcmp(argv[i], "--pull-min") == 0) pull_min = argv[i + 1];
        if (std::strcmp(argv[i], "--krdmad") == 0) krdmad = argv[i + 1];
        if (std::strcmp(argv[i], "--path") == 0) path = argv[i + 1];
        if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
        if (std::strcmp(argv[i], "--provider") == 0) g_provider = argv[i + 1];
    }
    if (g_provider != "softrnic" && g_provider != "hwstub") {
        std::fprintf(stderr, "bench_samehost: --provider is softrnic or hwstub\n");
        return 2;
    }
    if (g_provider == "hwstub") {
        g_rnic = "hw0";
        if (!pull_min.empty()) {
            std::fprintf(stderr, "bench_samehost: --pull-min is softrnic's option\n");
            return 2;
        }
    }
    auto wanted = [&](const std::string &name) { return only.empty() || name.find(only) != std::string::npos; };
    if (path != "same-host" && path != "wire") {
        std::fprintf(stderr, "bench_samehost: --path is same-host or wire\n");
        return 2;
    }
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    ::unsetenv("KRDMA_DEVICE");
    bench::kill_children_at_exit();
    bench::TempDir dir("openrdma-samehost");
    if (dir.path().empty()) return 1;
    bench::remember_dir(dir.path(), bench::kKrdmadDirFiles);
    const auto device = dir.path() / "krdma.sock";
    const auto config = dir.path() / "krdmad.json";
    {
        std::ofstream f(config);
        f << R"({"device": ")" << device.string() << R"(", "provider_dir": ")" BENCH_PROVIDER_DIR
          << R"(", "log_level": "warn", "modules": [")" << g_provider << R"(_kvp.so"], )"
          << (ring.empty() ? "" : R"("llp": {"same_host": {"ring_bytes": )" + ring + "}}, ")
          << R"("rnics": [{"provider": ")" << g_provider << R"(", )"
          << R"("name": ")" << g_rnic << R"(", "address": "127.0.0.1", "options": {"same_host": )"
          << (path == "wire" ? "false" : "true") << (pull_min.empty() ? "" : R"(, "pull_min": )" + pull_min)
          << "}}]}";
    }
    bench::Krdmad daemon(0, krdmad, config, dir.path() / "krdmad.log");
    if (daemon.pid() <= 0) return 1;
    int ctl[2];
    if (::pipe2(ctl, O_CLOEXEC) != 0) return 1;
    const pid_t passive = ::fork();
    if (passive == 0) {
        ::close(ctl[0]);
        ::_exit(run_passive(device, ctl[1]));
    }
    bench::g_passive = passive;
    ::close(ctl[1]);
    int rc = 0;
    {
        Consumer c;
        Peer peer;
        if (auto why = c.open(device); !why.empty()) {
            std::fprintf(stderr, "bench_samehost: %s\n%s", why.c_str(), daemon.log().c_str());
            rc = 1;
        } else if (::read(ctl[0], &peer, sizeof peer) != static_cast<ssize_t>(sizeof peer)) {
            std::fprintf(stderr, "bench_samehost: the passive process did not start\n");
            rc = 1;
        }
        std::vector<std::shared_ptr<ual::Endpoint>> eps;
        uint32_t path_flags = 0;
        auto connect = [&](size_t n) {
            std::set<uint64_t> want;
            uint8_t pd[12];
            const uint64_t a = c.addr();
            const uint32_t k = c.mr->keys().rkey;
            std::memcpy(pd, &a, 8);
            std::memcpy(pd + 8, &k, 4);
            for (size_t i = 0; i < n; ++i) {
                auto ep = c.endpoint(256, eps.size() + 1);
                if (!ep) return false;
                ri_sge_t rs{c.addr(), static_cast<uint32_t>(kBuffer), c.mr->keys().lkey};
                ri_recv_wr_t rw{0, &rs, 1, 0};
                for (int j = 0; j < 64; ++j) (void)ep->post_recv({&rw, 1});
                if (!ep->connect("127.0.0.1", peer.port, std::vector<uint8_t>(pd, pd + 12)).ok()) return false;
                want.insert(eps.size() + 1);
                eps.push_back(std::move(ep));
            }
            while (!want.empty()) {
                auto e = c.cm->wait(30s);
                if (!e || e->id != static_cast<uint32_t>(ual::CmEventId::established)) return false;
                if (e->connection) path_flags = e->connection->llp.mpa_flags;
                want.erase(e->context);
            }
            return true;
        };
        if (rc == 0 && !connect(1)) {
            std::fprintf(stderr, "bench_samehost: the first QP did not connect\n%s", daemon.log().c_str());
            rc = 1;
        }
        const bool same_host = (path_flags & RI_LLP_SAME_HOST) != 0;
        if (rc == 0) {
            std::string shown = same_host ? "same-host channel" : "wire (TCP)";
            if (same_host && !pull_min.empty() && pull_min != "0") shown += ", single copy from " + pull_min + " bytes";
            std::printf("bench_samehost: two processes through krdmad pid %d, %s %s on 127.0.0.1; path: %s; "
                        "%.2f s per figure in %d alternating rounds (best of each)\n",
                        daemon.pid(), g_provider.c_str(), g_rnic.c_str(), shown.c_str(), seconds, kRounds);
            if ((path == "wire") == same_host) {
                std::fprintf(stderr, "bench_samehost: asked for the %s path and got the other\n", path.c_str());
                rc = 1;
            }
        }
        const std::string tag = same_host ? "" : " (wire)";
        // Bandwidth, one QP.
        for (uint32_t opcode : {uint32_t{RI_WR_RDMA_WRITE}, uint32_t{RI_WR_SEND}}) {
            const char *name = opcode == RI_WR_SEND ? "Send" : "RDMA Write";
            for (size_t size : {size_t{64} << 10, size_t{1} << 20, size_t{8} << 20}) {
                if (rc != 0) break;
                const std::string label = std::string(name) + " " +
                                          (size >= (1u << 20) ? std::to_string(size >> 20) + " MiB"
                                                              : std::to_string(size >> 10) + " KiB") + tag;
                if (!wanted(label)) continue;
                double bw = 0, tcp = 0, mem = 0;
                std::vector<std::shared_ptr<ual::Endpoint>> one{eps.front()};
                for (int r = 0; r < kRounds; ++r) {
                    tcp = std::max(tcp, bench::tcp_stream(size, seconds / kRounds));
                    mem = std::max(mem, memcpy_rate(size, seconds / kRounds / 2));
                    const double got = stream_bw(c, one, peer, opcode, size, seconds / kRounds);
                    if (got <= 0) rc = 1;
                    bw = std::max(bw, got);
                }
                bench::row(label, bw, "TCP stream", tcp);
                std::printf("%-34s %9.2f GB/s   %-12s %9.2f GB/s   ratio %6.3f (target >= 0.4)\n", "",
                            bw / 1e9, "memcpy", mem / 1e9, bw / mem);
                figures.add(label, bw / 1e9, "GB/s", "TCP stream", tcp / 1e9, -1, ">= 5x", bw / tcp >= 5);
                figures.add(label + " vs memcpy", bw / 1e9, "GB/s", "one thread's memcpy", mem / 1e9, -1, ">= 0.4x",
                            bw / mem >= 0.4);
            }
        }
        // Latency, both ends polling.
        if (rc == 0 && wanted("round trip")) {
            double tcp = 1e9, wlat = 1e9, slat = 1e9, rlat = 1e9, alat = 1e9, w64 = 1e9, tcp64 = 1e9;
            double rlat_turn = 1e9;  // the Read's median beside the fetch-and-adds, in turn with them
            bool atomics = true;  // until a post says the connection did not agree to RFC 7306
            volatile uint8_t *mine = c.buf.data() + kBuffer;  // the passive side writes here
            for (int r = 0; r < kRounds && rc == 0; ++r) {
                tcp = std::min(tcp, bench::tcp_pingpong(seconds / kRounds, bench::Waiting::spinning));
                auto &ep = *eps.front();
                size_t done = 0, posted = 0;
                uint32_t recvs = 0;
                // Write ping-pong: write v into the passive side's cell, wait for v in ours.
                uint8_t v = *mine;
                size_t n = 0;
                auto t0 = clock_type::now();
                auto end = t0 + std::chrono::duration<double>(seconds / kRounds / 4);
                while (clock_type::now() < end) {
                    v = static_cast<uint8_t>(v + 1);
                    c.buf[kBuffer + 192] = v;
                    ri_sge_t s;
                    ri_send_wr_t w = make_wr(c, s, RI_WR_RDMA_WRITE, kBuffer + 192, 8, peer.addr + kBuffer, peer.rkey,
                                             (n & 63) == 0 ? RI_SEND_SIGNALED : 0);
                    if (!ep.post_send({&w, 1}).ok()) { rc = 1; break; }
                    if ((n & 63) == 0) ++posted;
                    const auto give_up = clock_type::now() + 10s;
                    while (*mine != v) {
                        if (!reap(*c.cq, done) || clock_type::now() > give_up) { rc = 1; break; }
                    }
                    if (rc != 0) break;
                    ++n;
                }
                if (rc == 0) wlat = std::min(wlat, std::chrono::duration<double>(clock_type::now() - t0).count() / n / 2);
                if (rc == 0 && !await(*c.cq, done, posted)) rc = 1;
                // Send ping-pongs: 8 B, and 64 KiB less 8 B (a size the bandwidth Sends never have).
                auto send_pingpong = [&](uint32_t size) -> double {
                    size_t k = 0;
                    const auto start = clock_type::now();
                    const auto stop = start + std::chrono::duration<double>(seconds / kRounds / 4);
                    while (rc == 0 && clock_type::now() < stop) {
                        ri_sge_t s;
                        ri_send_wr_t w = make_wr(c, s, RI_WR_SEND, 0, size, 0, 0, (k & 63) == 0 ? RI_SEND_SIGNALED : 0);
                        if (!ep.post_send({&w, 1}).ok()) { rc = 1; break; }
                        ++g_sends;
                        if ((k & 63) == 0) ++posted;
                        const uint32_t want = recvs + 1;
                        const auto give_up = clock_type::now() + 10s;
                        while (recvs < want) {
                            if (!reap(*c.cq, done, &recvs) || clock_type::now() > give_up) { rc = 1; break; }
                        }
                        ri_sge_t rs{c.addr(), static_cast<uint32_t>(kBuffer), c.mr->keys().lkey};
                        ri_recv_wr_t rw{0, &rs, 1, 0};
                        (void)ep.post_recv({&rw, 1});
                        ++k;
                    }
                    const double el = std::chrono::duration<double>(clock_type::now() - start).count();
                    if (rc == 0 && !await(*c.cq, done, posted, &recvs)) rc = 1;
                    return k == 0 ? 1e9 : el / static_cast<double>(k) / 2;
                };
                slat = std::min(slat, send_pingpong(kPing));
                w64 = std::min(w64, send_pingpong(kBigPing));
                // Read round trips.
                n = 0;
                t0 = clock_type::now();
                end = t0 + std::chrono::duration<double>(seconds / kRounds / 4);
                while (rc == 0 && clock_type::now() < end) {
                    ri_sge_t s;
                    ri_send_wr_t w = make_wr(c, s, RI_WR_RDMA_READ, kBuffer + 320, 8, peer.addr + kBuffer + 320, peer.rkey);
                    if (!ep.post_send({&w, 1}).ok() || !await(*c.cq, done, ++posted)) { rc = 1; break; }
                    ++n;
                }
                if (rc == 0) rlat = std::min(rlat, std::chrono::duration<double>(clock_type::now() - t0).count() / n);
                // Fetch-and-add against Read on the same QP (RFC 7306, where agreed), one of each in turn, each
                // timed alone: both meet the same moments of this VM's noise (an engine's wake-up, a preempted
                // thread), which a run of one and then a run of the other did not, and the medians leave the
                // outliers out.
                std::vector<double> reads, adds;
                reads.reserve(1 << 14);
                adds.reserve(1 << 14);
                end = clock_type::now() + std::chrono::duration<double>(seconds / kRounds / 4);
                while (rc == 0 && atomics && clock_type::now() < end && adds.size() < (1u << 14)) {
                    ri_sge_t s;
                    ri_send_wr_t rd = make_wr(c, s, RI_WR_RDMA_READ, kBuffer + 320, 8, peer.addr + kBuffer + 320, peer.rkey);
                    auto t = clock_type::now();
                    if (!ep.post_send({&rd, 1}).ok() || !await(*c.cq, done, ++posted)) { rc = 1; break; }
                    reads.push_back(std::chrono::duration<double>(clock_type::now() - t).count());
                    ri_sge_t a;
                    ri_send_wr_t w = make_wr(c, a, RI_WR_ATOMIC_FETCH_ADD, kBuffer + 384, 8, 0, 0);
                    w.u.atomic.remote_addr = peer.addr + kBuffer + 384;
                    w.u.atomic.rkey = peer.rkey;
                    w.u.atomic.compare_add = 1;
                    t = clock_type::now();
                    const rdma::Status st = ep.post_send({&w, 1});
                    if (st.code() == RI_EOPNOTSUPP) {
                        atomics = false;
                        break;
                    }
                    if (!st.ok() || !await(*c.cq, done, ++posted)) { rc = 1; break; }
                    adds.push_back(std::chrono::duration<double>(clock_type::now() - t).count());
                }
                if (rc == 0 && atomics && !adds.empty()) {
                    auto median = [](std::vector<double> &xs) {
                        std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(xs.size() / 2), xs.end());
                        return xs[xs.size() / 2];
                    };
                    // The round with the lowest pair of medians (its Read's), as the other figures keep their best.
                    const double ra = median(reads), aa = median(adds);
                    if (ra < rlat_turn) {
                        rlat_turn = ra;
                        alat = aa;
                    }
                }
                tcp64 = std::min(tcp64, bench::tcp_pingpong(seconds / kRounds, bench::Waiting::spinning, kBigPing));
            }
            if (rc == 0) {
                auto lat_row = [&](const std::string &label, double x, const char *base_name, double base,
                                   const char *target, double limit) {
                    std::printf("%-34s %9.2f us     %-12s %9.2f us     ratio %6.3f (target %s)\n", label.c_str(),
                                x * 1e6, base_name, base * 1e6, x / base, target);
                    figures.add(label + tag, x * 1e6, "us", base_name, base * 1e6, -1, target, x / base <= limit);
                };
                lat_row("8 B Write half round trip", wlat, "TCP 8 B spin", tcp, "<= 0.2x", 0.2);
                lat_row("8 B Send half round trip", slat, "TCP 8 B spin", tcp, "<= 0.2x", 0.2);
                lat_row("8 B Read round trip", rlat, "TCP 8 B RTT", 2 * tcp, "<= 0.2x", 0.2);
                if (atomics) {
                    lat_row("8 B fetch-and-add round trip", alat, "8 B Read RT", rlat_turn, "<= 1.1x", 1.1);
                } else {
                    std::printf("%-34s not agreed on this connection (RFC 7306)\n", "8 B fetch-and-add round trip");
                }
                lat_row("64 KiB Send half round trip", w64, "TCP 64 KiB", tcp64, "<= 0.5x", 0.5);
            }
        }
        // 64 QPs.
        if (rc == 0 && !wanted("64 QPs of 64 KiB Writes")) {
        } else if (rc == 0 && connect(kQps - 1)) {
            double bw = 0, tcp = 0;
            for (int r = 0; r < kRounds; ++r) {
                tcp = std::max(tcp, tcp_streams(kQps, 64u << 10, seconds / kRounds));
                const double got = stream_bw(c, eps, peer, RI_WR_RDMA_WRITE, 64u << 10, seconds / kRounds);
                if (got <= 0) rc = 1;
                bw = std::max(bw, got);
            }
            bench::row("64 QPs, 64 KiB Writes" + tag, bw, "64 TCP", tcp);
            figures.add("64 QPs of 64 KiB Writes" + tag, bw / 1e9, "GB/s", "64 TCP streams", tcp / 1e9, -1, ">= 5x",
                        bw / tcp >= 5);
        } else if (rc == 0) {
            std::fprintf(stderr, "bench_samehost: the 64 QPs did not connect\n%s", daemon.log().c_str());
            rc = 1;
        }
        eps.clear();
    }
    ::close(ctl[0]);
    if (!bench::await_child(passive, 30, "bench_samehost: the passive process")) rc = 1;
    bench::g_passive = 0;
    return rc;
}
