// What offload buys and what it costs (issue 15, "Speed"): the same transfers through softrnic (the iWARP protocol
// runs in the consumer process, in its uVP), through hwstub (an emulated offloading RNIC: its offload engine (OE)
// threads run inside krdmad and own the TCP sockets; the consumer only writes WQEs, rings a doorbell and reads
// CQEs) and over raw TCP, in one run:
//  - per workload (RDMA Write 64 KiB, RDMA Write 1 MiB, Send 8 KiB; the same window of outstanding requests for
//    both RNICs): GB/s, the consumer process's CPU seconds per GB moved (getrusage(RUSAGE_SELF): both ends of every
//    connection live in this process, so both ends count) and krdmad's CPU seconds per GB over the same interval
//    (for hwstub that is where its OEs run: the cost offload moves out of the consumer, shown, not hidden);
//  - 8-byte RDMA Write ping-pong half round trip of each RNIC, idle and while a second connection on the same RNIC
//    streams 64 KiB Writes (busy OEs, a busy softrnic stack). Both ends spin on their CQs and cells alike, and a
//    pass that found nothing calls sched_yield() (both RNICs; --no-yield spins without it).
// Each side of a connection has an RNIC open of its own, as two hosts' adapters would: side a (the active side)
// and side b (the passive side, whose adapter holds the listen point) each open the RNIC (AccessLayer::open_adapter:
// one kVP open each), with their own PZ, registered buffer and CQs. hwstub is attached with {"engines": N}
// (--engines, default 2) and serves each open from one engine, round robin: a on hwstub-oe0, b on hwstub-oe1.
// Targets: hwstub consumer CPU/GB <= 0.15x softrnic's; hwstub GB/s >= 0.9x softrnic's at 64 KiB and 1 MiB; busy
// 8-byte latency <= 1.5x softrnic's. A target missed is printed as "not met", never an error: the exit status is
// non-zero only when something failed (a krdmad that does not serve, a connection, a transfer).
//
// Two krdmad processes, started here on private device paths in a temporary directory (two RNICs cannot share an
// address in one krdmad, and a second loopback address needs root): one with softrnic sr0 on 127.0.0.1, one with
// hwstub hw0 on 127.0.0.1. Each runs in its own process group, killed on every way out of this program.
//   bench_offload [--seconds S] [--window N] [--engines N] [--no-yield] [--krdmad PATH] [--json FILE]
//                 [--only write64k|write1m|send8k|latency] [--wait-slice MS]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "endpoint_attributes.hpp"
#include "harness.hpp"
#include "krdmad_process.hpp"
#include "tcp_baseline.hpp"
#include "ual/access_layer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Rounds: each figure alternates with the others in this many slices of --seconds (drift on a shared VM then
// touches every column alike); bandwidth and CPU are summed over the slices, latency keeps the best slice.
constexpr int kRounds = 3;

// ---------------------------------------------------------------------------------------------------------------
// CPU clocks

double seconds_of(const timeval &t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

/** @brief CPU seconds (user + system, every thread) this process has used: getrusage(RUSAGE_SELF). */
double self_cpu() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return seconds_of(u.ru_utime) + seconds_of(u.ru_stime);
}

/**
 * @brief CPU seconds (user + system, every thread) process @p pid has used: the figure /proc/PID/stat gives as
 *        utime + stime, read through the process's CPU clock because /proc counts in 10 ms ticks (too coarse for
 *        short slices); /proc/PID/stat when that clock cannot be read. Negative when neither can.
 */
double process_cpu(pid_t pid) {
    clockid_t id{};
    timespec ts{};
    if (::clock_getcpuclockid(pid, &id) == 0 && ::clock_gettime(id, &ts) == 0) {
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');  // the command name may hold spaces and parentheses
    if (paren == std::string::npos) return -1;
    std::istringstream fields(text.substr(paren + 2));
    std::string f;
    unsigned long long utime = 0, stime = 0;
    for (int field = 3; field <= 15 && fields >> f; ++field) {  // fields 14 and 15: utime, stime
        if (field == 14) utime = std::stoull(f);
        if (field == 15) stime = std::stoull(f);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/** @brief How many threads of process @p pid have a name (comm) that starts with @p prefix; -1 when unreadable. */
int threads_named(pid_t pid, const std::string &prefix) {
    std::error_code ec;
    int n = 0;
    for (const auto &task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::ifstream in(task.path() / "comm");
        std::string name;
        if (std::getline(in, name) && name.rfind(prefix, 0) == 0) ++n;
    }
    return ec ? -1 : n;
}

// ---------------------------------------------------------------------------------------------------------------
// The krdmad processes

// The files this bench makes in its private directory, for the signal handler.
constexpr const char *kDirFiles[] = {"softrnic.json", "softrnic.sock", "softrnic.log",
                                     "hwstub.json",   "hwstub.sock",   "hwstub.log", nullptr};

void kill_groups_and_die(int sig) {
    bench::kill_krdmads();
    bench::remove_dir_files();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

// ---------------------------------------------------------------------------------------------------------------
// One RNIC's consumer objects

// The registered buffer of each side (each RNIC open): side a's Write/Send source, side b's Write sink (at the same
// offset of b's buffer) and receive slots, each side's ping-pong source byte and cell. Small enough that the four
// buffers (two sides of two RNICs) stay inside a non-root RLIMIT_MEMLOCK (8 MiB by default).
constexpr size_t kMaxMessage = 1u << 20;
constexpr size_t kSrc = 0;  // in side a's buffer
constexpr size_t kDst = 0;  // in side b's buffer
constexpr uint32_t kRecvSlots = 32;
constexpr uint32_t kRecvSlot = 8u << 10;
constexpr size_t kRecv = kMaxMessage;  // in side b's buffer
constexpr size_t kCells = kRecv + size_t{kRecvSlots} * kRecvSlot;
constexpr size_t kPingSource = kCells;    // the byte a side's ping-pong Write sends
constexpr size_t kPingCell = kCells + 64;  // where the other side's ping-pong Write lands
constexpr size_t kBufferBytes = kCells + 4096;

/** @brief A completion queue with its DTO dispatcher (whose wait() sleeps until the CQ is notified). */
struct Cq {
    std::shared_ptr<ual::SimpleDispatcher> events;
    std::shared_ptr<ual::CompletionQueue> cq;
};

/** @brief Two connected endpoints: `a` (the active side, on side a's open) and `b` (on side b's), each with its CQ. */
struct Pair {
    std::shared_ptr<ual::Endpoint> a, b;
    Cq ca, cb;
};

/**
 * @brief One side's RNIC open, as one host's adapter: the adapter (one kVP open; for hwstub, one engine), its PZ,
 *        its registered buffer and the dispatcher of its endpoints' connection events.
 */
struct Side {
    std::shared_ptr<ual::Adapter> adapter;
    std::shared_ptr<ual::ProtectionZone> pz;
    std::shared_ptr<ual::SimpleDispatcher> cm;
    std::vector<uint8_t> buf;
    std::shared_ptr<ual::MemoryRegion> mr;

    /** @brief Opens RNIC @p rnic through @p al; empty, or why not. */
    std::string open(ual::AccessLayer &al, const std::string &rnic) {
        auto ad = al.open_adapter(rnic);
        if (!ad) return "open_adapter(" + rnic + "): " + ad.error().to_string();
        adapter = *ad;
        auto p = adapter->create_pz();
        if (!p) return "create_pz: " + p.error().to_string();
        pz = *p;
        cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, 256);
        buf.assign(kBufferBytes, 1);
        auto m = pz->register_memory(buf.data(), buf.size(),
                                     RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
        if (!m) return "register_memory: " + m.error().to_string();
        mr = *m;
        return "";
    }

    /** @brief A CQ of @p depth on this open, with a dispatcher of its own. */
    Cq own_cq(uint32_t depth) {
        auto d = ual::SimpleDispatcher::create(ual::EventStream::dto, depth);
        if (!d) return {};
        auto c = adapter->create_cq(depth, *d);
        if (!c) return {};
        return {*d, *c};
    }

    /** @brief An endpoint of this open's PZ on CQ @p c, whose connection events carry @p context. */
    std::shared_ptr<ual::Endpoint> endpoint(uint32_t depth, const Cq &c, uint64_t context) {
        auto e = pz->create_endpoint(bench::endpoint_attributes(depth, context), c.cq, c.cq);
        if (!e) return nullptr;
        (*e)->set_connection_dispatcher(cm);
        return *e;
    }

    /** @brief Waits for the ESTABLISHED event of the endpoint of @p context; empty, or why not. */
    std::string await_established(uint64_t context) {
        for (;;) {
            auto e = cm->wait(10s);
            if (!e) return "no connection event";
            if (e->context != context) continue;
            if (e->id != static_cast<uint32_t>(ual::CmEventId::established)) {
                return "connection event " + std::to_string(e->id) + " instead of established";
            }
            return "";
        }
    }

    ri_sge_t sge(size_t off, uint32_t len) const {
        return ri_sge_t{reinterpret_cast<uint64_t>(buf.data() + off), len, mr->keys().lkey};
    }
    /** @brief What a peer puts in a Write's remote address and rkey to reach offset @p off of this buffer. */
    uint64_t remote(size_t off) const { return reinterpret_cast<uint64_t>(buf.data() + off); }
    uint32_t rkey() const { return mr->keys().rkey; }
};

/**
 * @brief A consumer's objects on one RNIC of one krdmad: the access layer, side a's open and side b's open (two
 *        AccessLayer::open_adapter calls: two kVP opens), and side b's listen point.
 */
struct Rig {
    std::string label;  // "softrnic" or "hwstub"
    std::shared_ptr<ual::AccessLayer> al;
    Side a, b;
    std::shared_ptr<ual::SimpleDispatcher> req;  // connection requests at b's listen point
    std::shared_ptr<ual::ListenPoint> lp;        // side b's
    uint64_t contexts = 0;

    /** @brief Opens RNIC @p rnic through krdmad's device @p device, once per side; empty, or why not. */
    std::string open(const std::filesystem::path &device, const std::string &rnic, bench::Krdmad &daemon) {
        ual::Options o;
        o.device = device;
        // krdmad is still starting: its device appears when it serves.
        al = bench::open_when_served(o, &daemon, 1000);
        if (!al) return "krdmad did not serve " + device.string();
        // a first, then b: with hwstub's round robin a is on engine 0 and b on engine 1 (of 2 or more).
        if (auto why = a.open(*al, rnic); !why.empty()) return "side a: " + why;
        if (auto why = b.open(*al, rnic); !why.empty()) return "side b: " + why;
        req = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 64);
        auto l = b.adapter->listen(0, req);
        if (!l) return "listen: " + l.error().to_string();
        lp = *l;
        return "";
    }

    /** @brief Connects a new pair of endpoints, a's to b's listen point; empty, or why not. */
    std::string connect_pair(uint32_t depth, Pair &p) {
        p.ca = a.own_cq(4 * depth);
        p.cb = b.own_cq(4 * depth);
        if (!p.ca.cq || !p.cb.cq) return "create_cq failed";
        const uint64_t a_ctx = ++contexts;
        const uint64_t b_ctx = ++contexts;
        p.a = a.endpoint(depth, p.ca, a_ctx);
        p.b = b.endpoint(depth, p.cb, b_ctx);
        if (!p.a || !p.b) return "create_endpoint failed";
        if (auto r = p.a->connect("127.0.0.1", lp->port()); !r) return "connect: " + r.error().to_string();
        auto r = req->wait(10s);
        if (!r || !r->connection) return "no connection request";
        if (auto acc = p.b->accept(r->connection->request); !acc) return "accept: " + acc.error().to_string();
        if (auto why = a.await_established(a_ctx); !why.empty()) return "side a: " + why;
        if (auto why = b.await_established(b_ctx); !why.empty()) return "side b: " + why;
        return "";
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Measured intervals

/** @brief What one measured interval moved and cost. */
struct Sample {
    double bytes = 0;
    double seconds = 0;
    double consumer_cpu = 0;  // this process, every thread
    double daemon_cpu = 0;    // both krdmads
    Sample &operator+=(const Sample &o) {
        bytes += o.bytes;
        seconds += o.seconds;
        consumer_cpu += o.consumer_cpu;
        daemon_cpu += o.daemon_cpu;
        return *this;
    }
};

/** @brief Reads every clock at the start of an interval and turns the differences into a Sample at its end. */
class Meter {
public:
    /** @brief Starts the clocks; @p daemons are the krdmad pids whose CPU counts. */
    explicit Meter(const std::array<pid_t, 2> &daemons) : daemons_(daemons) {
        t0_ = clock_type::now();
        self0_ = self_cpu();
        daemon0_ = daemon_cpu();
    }
    /** @brief The Sample of the interval so far, for @p bytes moved. */
    Sample stop(double bytes) const {
        Sample s;
        s.bytes = bytes;
        s.seconds = std::chrono::duration<double>(clock_type::now() - t0_).count();
        s.consumer_cpu = self_cpu() - self0_;
        s.daemon_cpu = daemon_cpu() - daemon0_;
        return s;
    }

private:
    double daemon_cpu() const {
        double sum = 0;
        for (pid_t p : daemons_) sum += p > 0 ? std::max(0.0, process_cpu(p)) : 0;
        return sum;
    }
    std::array<pid_t, 2> daemons_;
    clock_type::time_point t0_;
    double self0_ = 0, daemon0_ = 0;
};

/** @brief The transfers of the bandwidth table. */
struct Workload {
    const char *key;  // its name for --only
    uint32_t opcode;  // RI_WR_RDMA_WRITE or RI_WR_SEND
    uint32_t size;
    const char *name;
};

// Sleeping waits on a CQ run in slices of this length (--wait-slice MS), re-polling the CQ at each slice's end: a
// completion whose notification never came (a provider's bug; a large --wait-slice shows whether one does) would
// cost at most a slice instead of stalling the figure until the 10 s deadline. A receiver with no Send in flight waits in
// kIdleSlice slices, so an idle receiver thread wakes rarely and adds nothing measurable to the CPU figures.
std::chrono::milliseconds g_wait_slice{10};
constexpr std::chrono::milliseconds kIdleSlice{100};

/**
 * @brief Sleeps on @p events for one completion, in @p slice slices, until @p deadline_after has passed or @p stop
 *        (when given) turns true; ::RI_ETIMEDOUT then.
 */
rdma::Expected<ual::Event> wait_completion(ual::SimpleDispatcher &events, std::chrono::milliseconds slice,
                                           std::chrono::milliseconds deadline_after,
                                           const std::atomic<bool> *stop = nullptr) {
    const auto give_up = clock_type::now() + deadline_after;
    for (;;) {
        auto e = events.wait(slice);
        if (e || e.error().code() != RI_ETIMEDOUT || clock_type::now() > give_up) return e;
        if (stop && stop->load(std::memory_order_relaxed)) return e;
    }
}

/**
 * @brief A connected pair that streams from `a` (side a's buffer) to `b` (side b's buffer): `b`'s receive queue
 *        always holds kRecvSlots receives, reposted by a receiver thread that sleeps on b's CQ; Sends take a
 *        credit per receive so none finds the queue empty (both ends are in this process, so the credit count is a
 *        shared counter, not a message).
 */
class Stream {
public:
    Stream(Rig &rig, Pair pair) : rig_(rig), p_(std::move(pair)) {}
    ~Stream() { stop(); }
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;

    /** @brief Posts the receives and starts the receiver thread; false when a receive cannot be posted. */
    bool start() {
        for (uint32_t i = 0; i < kRecvSlots; ++i) {
            if (!post_recv(i)) return false;
        }
        receiver_ = std::thread([this] { receive_loop(); });
        return true;
    }

    /** @brief Stops the receiver thread. */
    void stop() {
        stopping_ = true;
        if (receiver_.joinable()) receiver_.join();
    }

    /**
     * @brief Streams @p w with @p window requests outstanding until @p end (or until @p until turns true when it is
     *        given), then sends a one-byte marker and waits until it is received: everything before it is placed
     *        (iWARP places a Send after the Writes posted before it). Bytes moved, or a negative value on an
     *        error completion or a transfer that stalls for 10 s.
     */
    double run(const Workload &w, uint32_t window, clock_type::time_point end,
               const std::atomic<bool> *until = nullptr) {
        const bool send = w.opcode == RI_WR_SEND;
        uint32_t outstanding = 0;
        double bytes = 0;
        auto going = [&] { return until ? !until->load(std::memory_order_relaxed) : clock_type::now() < end; };
        while (going()) {
            while (outstanding < window && (!send || credit())) {
                if (!post(w.opcode, w.size, send)) return -1;
                ++outstanding;
                bytes += w.size;
            }
            if (outstanding == 0) {  // only credits are missing: sleep until the receiver reposts
                if (!wait_credit()) return -1;
                continue;
            }
            if (!reap_one()) return -1;
            --outstanding;
        }
        for (; outstanding > 0; --outstanding) {
            if (!reap_one()) return -1;
        }
        if (!wait_credit() || !post(RI_WR_SEND, 1, true) || !reap_one()) return -1;
        if (!wait_received([this] { return received_.load() >= sends_; })) return -1;
        return bytes;
    }

private:
    bool post_recv(uint32_t slot) {
        ri_sge_t s = rig_.b.sge(kRecv + size_t{slot} * kRecvSlot, kRecvSlot);
        ri_recv_wr_t wr{slot, &s, 1, 0};
        return p_.b->post_recv({&wr, 1}).ok();
    }

    void receive_loop() {
        while (!stopping_) {
            const auto slice = sends_.load() != received_.load() ? g_wait_slice : kIdleSlice;
            auto e = wait_completion(*p_.cb.events, slice, slice, &stopping_);
            if (!e) continue;  // a timeout: look at the stop flag
            if (e->wc.status != RI_WC_SUCCESS || !post_recv(static_cast<uint32_t>(e->wc.wr_id))) {
                if (!stopping_) {
                    std::fprintf(stderr, "bench_offload: %s receive completion status %u\n", rig_.label.c_str(),
                                 e->wc.status);
                    failed_ = true;
                }
                count_receive();
                return;
            }
            count_receive();
        }
    }

    void count_receive() {
        std::lock_guard<std::mutex> lock(mutex_);
        received_.fetch_add(1);
        arrived_.notify_all();
    }

    // Sleeps until @p ready() holds (false after 10 s without, or when the receiver failed).
    template <class Ready>
    bool wait_received(Ready &&ready) {
        const auto give_up = clock_type::now() + 10s;
        std::unique_lock<std::mutex> lock(mutex_);
        while (!ready()) {
            if (failed_ || arrived_.wait_until(lock, give_up) == std::cv_status::timeout) break;
        }
        return ready() && !failed_;
    }

    bool credit() const { return sends_ - received_.load() < kRecvSlots; }

    bool wait_credit() {
        return wait_received([this] { return credit(); });
    }

    bool post(uint32_t opcode, uint32_t size, bool send) {
        ri_sge_t s = rig_.a.sge(kSrc, size);
        ri_send_wr_t wr{};
        wr.opcode = opcode;
        wr.flags = RI_SEND_SIGNALED;
        wr.sgl = &s;
        wr.num_sge = 1;
        wr.u.rdma.remote_addr = rig_.b.remote(kDst);
        wr.u.rdma.rkey = rig_.b.rkey();
        if (!p_.a->post_send({&wr, 1}).ok()) return false;
        if (send) ++sends_;
        return true;
    }

    // Sleeps on a's CQ for one send completion.
    bool reap_one() {
        auto e = wait_completion(*p_.ca.events, g_wait_slice, 10s);
        if (!e) {
            std::fprintf(stderr, "bench_offload: %s: no send completion in 10 s (%s)\n", rig_.label.c_str(),
                         e.error().to_string().c_str());
            return false;
        }
        if (e->wc.status != RI_WC_SUCCESS) {
            std::fprintf(stderr, "bench_offload: %s send completion status %u\n", rig_.label.c_str(), e->wc.status);
            return false;
        }
        return true;
    }

    Rig &rig_;
    Pair p_;
    std::thread receiver_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> failed_{false};
    std::mutex mutex_;  // with arrived_: the sender sleeps for receives
    std::condition_variable arrived_;
    std::atomic<uint64_t> received_{0};  // receives completed at b
    std::atomic<uint64_t> sends_{0};     // Sends posted by a (written by the sender's thread only)
};

// ---------------------------------------------------------------------------------------------------------------
// Raw TCP

using bench::Fd;
using bench::io_all;
using bench::tcp_pair;

/**
 * @brief Raw TCP: a thread writes messages of @p size (blocking) until @p end, another reads them whole (blocking);
 *        the interval ends when the reader has read every byte. Negative on failure.
 */
Sample tcp_stream(size_t size, clock_type::time_point end, const std::array<pid_t, 2> &daemons) {
    Fd c, s;
    if (!tcp_pair(c, s)) return Sample{-1};
    std::vector<uint8_t> src(size, 1), dst(size);
    uint64_t read = 0;
    std::thread reader([&, fd = s.fd] { read = bench::stream_receive(fd, dst.data(), size); });
    Meter m(daemons);
    const int64_t messages = bench::stream_send(c.fd, src.data(), size, [&](uint64_t) { return clock_type::now() < end; });
    ::shutdown(c.fd, SHUT_WR);
    reader.join();
    const double sent = messages > 0 ? static_cast<double>(messages) * static_cast<double>(size) : 0;
    Sample out = m.stop(sent);
    if (messages < 0 || static_cast<double>(read) != sent) out.bytes = -1;
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// RDMA latency

// Whether a ping-pong pass that found nothing yields the CPU (--no-yield: it does not).
bool g_yield = true;

/**
 * @brief One side of the 8-byte ping-pong waits until its own @p cell holds @p v: each pass polls the side's CQ
 *        (which drives softrnic's inline progress) and looks at the cell; a pass that found neither calls
 *        sched_yield() unless --no-yield. Both sides of both RNICs wait through this one loop. False when @p stop
 *        turned true or 5 s passed without the value.
 */
bool await_value(volatile uint8_t *cell, uint8_t v, ual::CompletionQueue &cq, const std::atomic<bool> &stop) {
    const auto give_up = clock_type::now() + 5s;
    ri_wc_t wc[16];
    for (uint32_t spins = 0; *cell != v; ++spins) {
        if (stop.load(std::memory_order_relaxed)) return false;
        const auto reaped = cq.poll({wc, 16});
        if (*cell == v) break;
        if (g_yield && (!reaped || *reaped == 0)) ::sched_yield();
        if ((spins & 1023) == 1023 && clock_type::now() > give_up) return false;
    }
    return true;
}

/**
 * @brief 8-byte RDMA Write ping-pong on @p p for @p seconds, as ib_write_lat runs it: a writes the round's value
 *        from its buffer into b's cell, b (a responder thread) sees it there and writes it back into a's cell, a
 *        waits for it. Seconds per half round trip; 0 when no round completed or a side failed.
 */
double rdma_pingpong(Rig &r, Pair &p, double seconds) {
    volatile uint8_t *a_cell = r.a.buf.data() + kPingCell;  // where b writes
    volatile uint8_t *b_cell = r.b.buf.data() + kPingCell;  // where a writes
    // Each run starts from zero: a value left by the previous run must not pass for this one's answer.
    *a_cell = 0;
    *b_cell = 0;
    // An unsignaled 8-byte Write of @p v from side @p from's source byte into side @p to's cell.
    auto write_to = [](Side &from, ual::Endpoint &ep, const Side &to, uint8_t v) {
        from.buf[kPingSource] = v;
        ri_sge_t s = from.sge(kPingSource, 8);
        ri_send_wr_t wr{};
        wr.opcode = RI_WR_RDMA_WRITE;
        wr.sgl = &s;
        wr.num_sge = 1;
        wr.u.rdma.remote_addr = to.remote(kPingCell);
        wr.u.rdma.rkey = to.rkey();
        return ep.post_send({&wr, 1}).ok();
    };
    std::atomic<bool> stop{false};
    std::atomic<bool> b_failed{false};
    std::thread responder([&] {
        for (uint8_t v = 1;; ++v) {
            if (!await_value(b_cell, v, *p.cb.cq, stop)) {
                if (!stop.load()) b_failed = true;  // 5 s without a's Write (not the end of the run)
                break;
            }
            if (!write_to(r.b, *p.b, r.a, v)) {
                b_failed = true;
                break;
            }
        }
        stop = true;
    });
    bool ok = true;
    size_t n = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    for (uint8_t v = 1; clock_type::now() < end; ++v, ++n) {
        if (!write_to(r.a, *p.a, r.b, v) || !await_value(a_cell, v, *p.ca.cq, stop)) {
            ok = false;
            break;
        }
    }
    const double el = std::chrono::duration<double>(clock_type::now() - t0).count();
    stop = true;
    responder.join();
    return ok && !b_failed && n > 0 ? el / static_cast<double>(n) / 2 : 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Reporting

const char *verdict(bool met) { return met ? "met" : "not met"; }

double per_gb(double cpu, const Sample &s) { return s.bytes > 0 ? cpu / (s.bytes / 1e9) : 0; }
double gbps(const Sample &s) { return s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0; }

void print_row(const char *workload, const char *transport, const Sample &s, const char *note) {
    std::printf("%-14s %-10s %8.3f %14.3f %14.3f %12.3f   %s\n", workload, transport, gbps(s),
                per_gb(s.consumer_cpu, s), per_gb(s.daemon_cpu, s), per_gb(s.consumer_cpu + s.daemon_cpu, s), note);
}

}  // namespace

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_offload", argc, argv);
    std::string krdmad = BENCH_KRDMAD;
    uint32_t window = 16;
    uint32_t engines = 2;  // hwstub's engine threads: side a's open on one, side b's on the next
    std::string only;      // one figure alone (for profiling), or all
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--no-yield") == 0) g_yield = false;
    }
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--krdmad") == 0) krdmad = argv[i + 1];
        if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
        if (std::strcmp(argv[i], "--wait-slice") == 0) g_wait_slice = std::chrono::milliseconds(std::max(1, std::atoi(argv[i + 1])));
        if (std::strcmp(argv[i], "--window") == 0) window = static_cast<uint32_t>(std::max(1, std::atoi(argv[i + 1])));
        if (std::strcmp(argv[i], "--engines") == 0) {
            const int n = std::atoi(argv[i + 1]);
            if (n < 1 || n > 16) {
                std::fprintf(stderr, "bench_offload: --engines %s: hwstub takes 1 to 16 engines\n", argv[i + 1]);
                return 2;
            }
            engines = static_cast<uint32_t>(n);
        }
    }
    // This bench talks only to the krdmads it starts.
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    ::unsetenv("KRDMA_DEVICE");
    std::atexit(&bench::kill_krdmads);
    bench::TempDir dir("openrdma-offload");
    if (dir.path().empty()) {
        std::perror("bench_offload: mkdtemp");
        return 1;
    }
    bench::remember_dir(dir.path(), kDirFiles);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT}) ::signal(sig, &kill_groups_and_die);
    struct Spec {
        const char *label, *module, *provider, *rnic;
        std::string options;  // the RNIC's attach options (JSON object), or empty
    };
    const Spec specs[2] = {{"softrnic", "softrnic_kvp.so", "softrnic", "sr0", ""},
                           {"hwstub", "hwstub_kvp.so", "hwstub", "hw0", R"({"engines": )" + std::to_string(engines) + "}"}};
    // Both daemons start before this process makes any thread (fork in a threaded process is best avoided).
    std::vector<std::unique_ptr<bench::Krdmad>> daemons;
    std::array<std::filesystem::path, 2> devices;
    for (int i = 0; i < 2; ++i) {
        const auto config = dir.path() / (std::string(specs[i].label) + ".json");
        devices[i] = dir.path() / (std::string(specs[i].label) + ".sock");
        std::ofstream(config) << R"({"device": ")" << devices[i].string() << R"(", "provider_dir": ")"
                              << BENCH_PROVIDER_DIR << R"(", "log_level": "warn", "modules": [")" << specs[i].module
                              << R"("], "rnics": [{"provider": ")" << specs[i].provider << R"(", "name": ")"
                              << specs[i].rnic << R"(", "address": "127.0.0.1")"
                              << (specs[i].options.empty() ? "" : R"(, "options": )" + specs[i].options) << "}]}";
        daemons.push_back(std::make_unique<bench::Krdmad>(i, krdmad, config, dir.path() / (std::string(specs[i].label) + ".log")));
        if (daemons.back()->pid() <= 0) {
            std::perror("bench_offload: fork");
            return 1;
        }
    }
    const std::array<pid_t, 2> daemon_pids{daemons[0]->pid(), daemons[1]->pid()};

    int rc = 0;
    auto fail = [&](int i, const std::string &why) {
        std::fprintf(stderr, "bench_offload: %s: %s\n", specs[i].label, why.c_str());
        std::fprintf(stderr, "its krdmad's log:\n%s\n", daemons[i]->log().c_str());
        rc = 1;
    };
    {
        std::array<Rig, 2> rigs;
        std::array<std::unique_ptr<Stream>, 2> streams;  // the bandwidth pairs (also the busy load)
        std::array<Pair, 2> latency;                      // the ping-pong pairs
        for (int i = 0; i < 2 && rc == 0; ++i) {
            rigs[i].label = specs[i].label;
            if (auto why = rigs[i].open(devices[i], specs[i].rnic, *daemons[i]); !why.empty()) {
                fail(i, why);
                break;
            }
            Pair bw;
            if (auto why = rigs[i].connect_pair(std::max<uint32_t>(window, kRecvSlots) + 1, bw); !why.empty()) {
                fail(i, "bandwidth pair: " + why);
                break;
            }
            streams[i] = std::make_unique<Stream>(rigs[i], std::move(bw));
            if (!streams[i]->start()) {
                fail(i, "cannot post receives");
                break;
            }
            if (auto why = rigs[i].connect_pair(64, latency[i]); !why.empty()) {
                fail(i, "latency pair: " + why);
                break;
            }
        }
        if (rc != 0) return rc;

        std::printf("bench_offload: %.2f s per figure in %d alternating slices; window %u outstanding requests for both "
                    "RNICs; hwstub engines %u; completions awaited by sleeping on the CQ (TCP: blocking write/read)\n",
                    seconds, kRounds, window, engines);
        std::printf("  softrnic sr0 on 127.0.0.1 (krdmad pid %d: control path only; the protocol runs in this "
                    "process)\n  hwstub   hw0 on 127.0.0.1 (krdmad pid %d: %d offload engine thread(s) hwstub-oeN "
                    "move the data)\n",
                    daemon_pids[0], daemon_pids[1], threads_named(daemon_pids[1], "hwstub-oe"));
        if (engines > 1) {
            std::printf("  each side of a connection has its own RNIC open (adapter, PZ, buffer, CQs): side a's is "
                        "served by hwstub-oe0, side b's (the listener's) by hwstub-oe1\n");
        } else {
            std::printf("  each side of a connection has its own RNIC open (adapter, PZ, buffer, CQs); one engine, "
                        "hwstub-oe0, serves both\n");
        }
        std::printf("  consumer CPU = getrusage(RUSAGE_SELF) of this process, which holds both ends; krdmad CPU = "
                    "utime+stime of both krdmads over the same interval\n\n");
        std::printf("%-14s %-10s %8s %14s %14s %12s\n", "workload", "transport", "GB/s", "consumer s/GB",
                    "krdmad s/GB", "total s/GB");

        const Workload all_workloads[] = {{"write64k", RI_WR_RDMA_WRITE, 64u << 10, "Write 64 KiB"},
                                          {"write1m", RI_WR_RDMA_WRITE, 1u << 20, "Write 1 MiB"},
                                          {"send8k", RI_WR_SEND, 8u << 10, "Send 8 KiB"}};
        std::vector<Workload> workloads;
        for (const Workload &w : all_workloads) {
            if (only.empty() || only == w.key) workloads.push_back(w);
        }
        struct Result {
            Sample tcp, rnic[2];
        };
        std::vector<Result> results;
        const auto slice = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds / kRounds));
        for (const Workload &w : workloads) {
            Result res;
            for (int round = 0; round < kRounds && rc == 0; ++round) {
                Sample t = tcp_stream(w.size, clock_type::now() + slice, daemon_pids);
                if (t.bytes < 0) {
                    std::fprintf(stderr, "bench_offload: the raw TCP stream of %s failed\n", w.name);
                    rc = 1;
                }
                res.tcp += t;
                for (int i = 0; i < 2 && rc == 0; ++i) {
                    Meter m(daemon_pids);
                    const double bytes = streams[i]->run(w, window, clock_type::now() + slice);
                    if (bytes < 0) {
                        fail(i, std::string(w.name) + " failed");
                        break;
                    }
                    res.rnic[i] += m.stop(bytes);
                }
            }
            if (rc != 0) break;
            print_row(w.name, "raw TCP", res.tcp, "");
            print_row("", "softrnic", res.rnic[0], "");
            print_row("", "hwstub", res.rnic[1], "(krdmad = hwstub's OEs)");
            results.push_back(res);
        }
        if (rc != 0) return rc;

        // Latency: idle, and with the bandwidth pair of the same RNIC streaming 64 KiB Writes in a thread.
        const Workload load{"busy", RI_WR_RDMA_WRITE, 64u << 10, "Write 64 KiB"};
        double lat[2][2] = {{1e9, 1e9}, {1e9, 1e9}};  // [rnic][busy]
        double tcp_lat = 1e9;
        const bool want_latency = only.empty() || only == "latency";
        for (int round = 0; round < kRounds && rc == 0 && want_latency; ++round) {
            tcp_lat = std::min(tcp_lat, bench::tcp_pingpong(seconds / kRounds, bench::Waiting::spinning));
            for (int busy = 0; busy < 2 && rc == 0; ++busy) {
                for (int i = 0; i < 2 && rc == 0; ++i) {
                    std::atomic<bool> done{false};
                    double loaded = 0;
                    std::thread bg;
                    if (busy) bg = std::thread([&] { loaded = streams[i]->run(load, window, {}, &done); });
                    if (busy) std::this_thread::sleep_for(5ms);  // the stream is under way before the clock starts
                    const double l = rdma_pingpong(rigs[i], latency[i], seconds / kRounds);
                    done = true;
                    if (bg.joinable()) bg.join();
                    if (l <= 0) fail(i, std::string("8-byte ping-pong") + (busy ? " (busy)" : "") + " failed");
                    if (busy && loaded < 0) fail(i, "the background 64 KiB stream failed");
                    lat[i][busy] = std::min(lat[i][busy], l);
                }
            }
        }
        if (rc != 0) return rc;
        if (want_latency) {
            std::printf("\n%-44s %10s %10s\n", "8-byte RDMA Write half round trip (best slice)", "idle", "busy");
            std::printf("  (both sides of both RNICs spin alike on their CQ and cell; %s)\n",
                        g_yield ? "a pass that finds nothing calls sched_yield(), so hwstub's engines get a CPU"
                                : "--no-yield: pure spinning, no sched_yield()");
            std::printf("%-44s %8.2f us %8.2f us\n", "softrnic (busy: its stack streams 64 KiB)", lat[0][0] * 1e6,
                        lat[0][1] * 1e6);
            std::printf("%-44s %8.2f us %8.2f us\n", "hwstub   (busy: its OEs stream 64 KiB)", lat[1][0] * 1e6,
                        lat[1][1] * 1e6);
            std::printf("%-44s %8.2f us\n", "raw TCP 8 B ping-pong (spinning, reference)", tcp_lat * 1e6);
        }

        std::printf("\nratios\n");
        bool all_met = true;
        for (size_t k = 0; k < results.size(); ++k) {
            const Result &r = results[k];
            const double sr_cpu = per_gb(r.rnic[0].consumer_cpu, r.rnic[0]);
            const double hw_cpu = per_gb(r.rnic[1].consumer_cpu, r.rnic[1]);
            const double tcp_cpu = per_gb(r.tcp.consumer_cpu, r.tcp);
            const double cpu_ratio = sr_cpu > 0 ? hw_cpu / sr_cpu : 0;
            const double bw_ratio = gbps(r.rnic[0]) > 0 ? gbps(r.rnic[1]) / gbps(r.rnic[0]) : 0;
            const bool cpu_met = cpu_ratio <= 0.15;
            all_met = all_met && cpu_met;
            std::printf("  %-13s consumer CPU/GB hwstub / softrnic %6.3f (target <= 0.15: %s)\n", workloads[k].name,
                        cpu_ratio, verdict(cpu_met));
            const std::string what = workloads[k].name;
            figures.add(what + ": consumer CPU per GB, hwstub", hw_cpu, "s/GB", "softrnic", sr_cpu, cpu_ratio,
                        "<= 0.15x", cpu_met);
            figures.add(what + ": bandwidth, softrnic", gbps(r.rnic[0]), "GB/s", "raw TCP", gbps(r.tcp));
            figures.add(what + ": bandwidth, hwstub", gbps(r.rnic[1]), "GB/s", "softrnic", gbps(r.rnic[0]), bw_ratio,
                        workloads[k].opcode == RI_WR_RDMA_WRITE ? ">= 0.9x" : "",
                        workloads[k].opcode == RI_WR_RDMA_WRITE ? bw_ratio >= 0.9 : -1);
            if (workloads[k].opcode == RI_WR_RDMA_WRITE) {
                const bool bw_met = bw_ratio >= 0.9;
                all_met = all_met && bw_met;
                std::printf("  %-13s GB/s hwstub / softrnic            %6.3f (target >= 0.9: %s)\n", "", bw_ratio,
                            verdict(bw_met));
            } else {
                std::printf("  %-13s GB/s hwstub / softrnic            %6.3f (no target)\n", "", bw_ratio);
            }
            std::printf("  %-13s vs raw TCP: GB/s softrnic %.3f, hwstub %.3f; consumer CPU/GB softrnic %.3f, hwstub "
                        "%.3f; total CPU/GB softrnic %.3f, hwstub %.3f\n",
                        "", gbps(r.rnic[0]) / gbps(r.tcp), gbps(r.rnic[1]) / gbps(r.tcp), sr_cpu / tcp_cpu,
                        hw_cpu / tcp_cpu, per_gb(r.rnic[0].consumer_cpu + r.rnic[0].daemon_cpu, r.rnic[0]) / tcp_cpu,
                        per_gb(r.rnic[1].consumer_cpu + r.rnic[1].daemon_cpu, r.rnic[1]) / tcp_cpu);
        }
        if (want_latency) {
            const double busy_ratio = lat[1][1] / lat[0][1];
            const bool lat_met = busy_ratio <= 1.5;
            all_met = all_met && lat_met;
            figures.add("8 B Write half round trip, busy, hwstub", lat[1][1] * 1e6, "us", "softrnic busy",
                        lat[0][1] * 1e6, busy_ratio, "<= 1.5x", lat_met);
            figures.add("8 B Write half round trip, idle, hwstub", lat[1][0] * 1e6, "us", "softrnic idle",
                        lat[0][0] * 1e6);
            std::printf("  8 B latency   hwstub / softrnic busy %6.3f (target <= 1.5: %s); idle %.3f (no target)\n",
                        busy_ratio, verdict(lat_met), lat[1][0] / lat[0][0]);
        }
        std::printf("\ntargets%s: %s\n", only.empty() ? "" : " measured", all_met ? "all met" : "not all met (see above)");
        for (auto &s : streams) {
            if (s) s->stop();
        }
    }
    return rc;
}
