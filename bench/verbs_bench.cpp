// The control path of the verbs through the uAL and softrnic, each figure next to a baseline measured in the same
// run (issue 4, "Speed"):
//  - the privileged round trip: Adapter::query() (uVP -> ri_syscall -> device -> kAL -> softrnic kVP -> back) next
//    to a bare SOCK_SEQPACKET ping-pong with a thread, with the size of a SYSCALL message (target <= 1.2x); for
//    krdmad also to the same ping-pong between two processes, since every call to krdmad switches address space;
//  - memory registration: register + deregister of a 4 KiB and a 1 MiB region (touched first) next to mlock +
//    munlock of the same range, the floor of what pinning costs the owner process;
//  - QP create + destroy (the CQ made once) next to the privileged round trip, so the ratio reads as "round trips
//    per create + destroy"; and what it costs beyond locking and unlocking its rings' pages (mlock + munlock of a
//    mapping of the rings' size, measured here), in round trips too: issue 42's "one round trip each, plus the
//    pinning the kernel does for mlock".
// Every ratio is the figure's time per operation over the baseline's.
//
// Hostings: the embedded kAL (a server thread in this process) always; with --krdmad PATH also a real krdmad
// process, started here on a private device path in /tmp, in its own process group, killed when the bench ends.
// With --cpu N every thread (this process's and krdmad's) runs on CPU N: on a virtual machine, waking a thread that
// sleeps on another vCPU costs the waker tens of microseconds of hypervisor time, and whether two threads that
// ping-pong share a vCPU decides each round's time more than the code does (registration unpinned came out at 27 or
// at 80-120 us from one run to the next). Pinned, the figures measure the stack's work.
// Run: build/bench/bench_verbs [--seconds S] [--krdmad build/kal/krdmad] [--cpu N] [--json FILE]
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "krdmad_process.hpp"
#include "krdma/abi.h"
#include "softrnic_abi.h"
#include "embedded_link.hpp"
#include "ual/access_layer.hpp"

namespace {

constexpr size_t kSyscallMessage = sizeof(krdma_msg_hdr) + sizeof(krdma_syscall);

// Seconds per call of body(), run for about @p seconds.
template <class Body>
double seconds_per_call(double seconds, Body &&body) {
    return 1.0 / bench::bytes_per_second(seconds, 1, body);  // 1 "byte" per call: calls per second
}

// One figure and its baseline; with @p limit > 0, the ratio's target (met when it is at most @p limit).
void print_row(bench::Figures &figures, const char *hosting, const std::string &name, double t,
               const std::string &base_name, double base, const char *note = "", const char *target = "",
               double limit = 0) {
    figures.add(std::string(hosting) + ": " + name, t * 1e6, "us", base_name, base * 1e6, t / base, target,
                limit <= 0 ? -1 : (t / base <= limit));
    std::printf("%-9s %-34s %10.2f us %10.0f/s   %-32s %9.2f us %10.0f/s   ratio %6.2f%s\n", hosting, name.c_str(),
                t * 1e6, 1.0 / t, base_name.c_str(), base * 1e6, 1.0 / base, t / base, note);
}

// The baseline round trip: packets of one size bounced by a thread (or, @p process, by a child process) over a
// bare SOCK_SEQPACKET pair, blocking send/recv on both ends (what the device would cost with nothing but the
// transport). Between two processes each switch also changes address space, as every call to krdmad does.
class BareEcho {
public:
    explicit BareEcho(size_t size, bool process = false) : msg_(size, 0x5a) {
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv_) != 0) return;
        if (process) {
            child_ = ::fork();
            if (child_ == 0) {
                // Only system calls from here: the parent has threads.
                (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
                echo(sv_[1], size);
                ::_exit(0);
            }
            return;
        }
        echo_ = std::thread([fd = sv_[1], size] { echo(fd, size); });
    }
    ~BareEcho() {
        if (!echo_.joinable() && child_ <= 0) return;
        ::shutdown(sv_[0], SHUT_RDWR);
        if (echo_.joinable()) echo_.join();
        if (child_ > 0) (void)::waitpid(child_, nullptr, 0);
        ::close(sv_[0]);
        ::close(sv_[1]);
    }
    BareEcho(const BareEcho &) = delete;
    BareEcho &operator=(const BareEcho &) = delete;
    // One ping-pong; false if the pair is broken.
    bool round_trip() {
        return ::send(sv_[0], msg_.data(), msg_.size(), 0) == static_cast<ssize_t>(msg_.size()) &&
               ::recv(sv_[0], msg_.data(), msg_.size(), 0) == static_cast<ssize_t>(msg_.size());
    }

private:
    static void echo(int fd, size_t size) {
        uint8_t buf[kSyscallMessage];
        for (;;) {
            ssize_t n = ::recv(fd, buf, std::min(size, sizeof buf), 0);
            if (n <= 0 || ::send(fd, buf, static_cast<size_t>(n), 0) != n) return;
        }
    }
    int sv_[2] = {-1, -1};
    pid_t child_ = -1;
    std::thread echo_;
    std::vector<uint8_t> msg_;
};

// The machine is shared: a figure and its baseline run alternately, in kRounds short rounds, and each keeps its
// best round (the least time per operation), so a burst of load elsewhere does not land on one side only.
constexpr int kRounds = 20;

struct Pair {
    double figure = 0;    // seconds per operation
    double baseline = 0;  // seconds per operation
};

template <class Figure, class Baseline>
Pair paired(double seconds, Figure &&figure, Baseline &&baseline) {
    Pair best{1e9, 1e9};
    for (int r = 0; r < kRounds; ++r) {
        best.baseline = std::min(best.baseline, seconds_per_call(seconds / kRounds, baseline));
        best.figure = std::min(best.figure, seconds_per_call(seconds / kRounds, figure));
    }
    return best;
}

void kill_krdmad_and_exit(int sig) {
    bench::kill_krdmads();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

std::string read_text(const std::filesystem::path &file) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string config_json(const std::filesystem::path &device) {
    return std::string(R"({"device": ")") + device.string() + R"(", "provider_dir": ")" BENCH_PROVIDER_DIR R"(",
        "log_level": "warn", "modules": ["softrnic_kvp.so"],
        "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]})";
}

// The figures of one hosting of the kAL, through the access layer @p al.
bool measure(bench::Figures &figures, const char *hosting, const std::shared_ptr<ual::AccessLayer> &al, double seconds) {
    auto adapter = al->open_adapter("sr0");
    if (!adapter) {
        std::fprintf(stderr, "%s: open_adapter(sr0): %s\n", hosting, adapter.error().to_string().c_str());
        return false;
    }
    const std::shared_ptr<ual::Adapter> &a = *adapter;
    if (auto q = a->query(); !q) {
        std::fprintf(stderr, "%s: query: %s\n", hosting, q.error().to_string().c_str());
        return false;
    }

    // The privileged round trip next to the bare one, with the same message size as a SYSCALL.
    bool ok = true;
    BareEcho echo(kSyscallMessage);
    const Pair rt = paired(
        seconds, [&] { ok = a->query().has_value() && ok; }, [&] { ok = echo.round_trip() && ok; });
    if (!ok) {
        std::fprintf(stderr, "%s: a query or a bare round trip failed\n", hosting);
        return false;
    }
    const double query = rt.figure;
    print_row(figures, hosting, "privileged round trip (query)", query,
              "bare SEQPACKET ping-pong " + std::to_string(kSyscallMessage) + " B", rt.baseline, "   (target <= 1.2)",
              "<= 1.2x", 1.2);
    if (std::strcmp(hosting, "krdmad") == 0) {
        // krdmad is another process: the same transport between two processes, address-space switches included.
        BareEcho process_echo(kSyscallMessage, true);
        const Pair across = paired(
            seconds, [&] { ok = a->query().has_value() && ok; }, [&] { ok = process_echo.round_trip() && ok; });
        if (!ok) {
            std::fprintf(stderr, "%s: a query or a bare round trip between processes failed\n", hosting);
            return false;
        }
        print_row(figures, hosting, "privileged round trip (processes)", across.figure,
                  "bare ping-pong between two processes", across.baseline, "   (target <= 1.2)", "<= 1.2x", 1.2);
    }

    // Memory registration: the region is touched first so no page fault is measured on either side.
    auto pz = a->create_pz();
    if (!pz) {
        std::fprintf(stderr, "%s: create_pz: %s\n", hosting, pz.error().to_string().c_str());
        return false;
    }
    for (size_t size : {size_t{4} << 10, size_t{1} << 20}) {
        void *mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return false;
        std::memset(mem, 1, size);
        const std::string label = size >= (1u << 20) ? std::to_string(size >> 20) + " MiB" : std::to_string(size >> 10) + " KiB";
        const uint32_t access = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                RI_ACCESS_REMOTE_WRITE;
        const Pair reg = paired(
            seconds,
            [&] {
                auto mr = (*pz)->register_memory(mem, size, access);
                ok = mr.has_value() && ok;
                if (mr) ok = (*mr)->close().ok() && ok;
            },
            [&] {
                ok = ::mlock(mem, size) == 0 && ok;
                ok = ::munlock(mem, size) == 0 && ok;
            });
        ::munmap(mem, size);
        if (!ok) {
            std::fprintf(stderr, "%s: registering %s (or locking it) failed\n", hosting, label.c_str());
            return false;
        }
        print_row(figures, hosting, "MR register+deregister " + label, reg.figure, "mlock+munlock " + label, reg.baseline);
        if (size == (size_t{4} << 10)) {
            // Issue 42's target: what registration costs beyond the pinning itself, in privileged round trips.
            const double beyond = std::max(reg.figure - reg.baseline, 0.0);
            print_row(figures, hosting, "  the same less mlock+munlock", beyond, "privileged round trip (query)",
                      query, "   (round trips' worth; target <= 2)", "<= 2 round trips", 2.0);
        }
    }

    // QP create + destroy on one CQ made once, next to the round trip measured above.
    auto dto = ual::SimpleDispatcher::create(ual::EventStream::dto, 64);
    if (!dto) return false;
    auto cq = a->create_cq(256, *dto);
    if (!cq) {
        std::fprintf(stderr, "%s: create_cq: %s\n", hosting, cq.error().to_string().c_str());
        return false;
    }
    const ual::EndpointAttributes attr{};
    const Pair qp = paired(
        seconds,
        [&] {
            auto ep = (*pz)->create_endpoint(attr, *cq, *cq);
            ok = ep.has_value() && ok;
            if (ep) ok = (*ep)->close().ok() && ok;
        },
        [&] { ok = a->query().has_value() && ok; });
    if (!ok) {
        std::fprintf(stderr, "%s: creating or destroying a QP failed\n", hosting);
        return false;
    }
    print_row(figures, hosting, "QP create+destroy (CQ made once)", qp.figure, "privileged round trip (query)", qp.baseline,
              "   (round trips' worth; target <= 2)", "<= 2 round trips", 2.0);
    // The rings' pages as softrnic's uVP lays them out (the send ring, then the receive ring 64-byte aligned), present
    // in memory as they are when the uVP reuses a freed QP's rings: what locking and unlocking them costs the owner.
    const size_t sq_bytes = attr.sq_depth * softrnic_sq_slot_size(attr.sq_sge, attr.max_inline);
    const size_t ring_bytes = ((sq_bytes + 63) & ~size_t{63}) + attr.rq_depth * softrnic_rq_slot_size(attr.rq_sge);
    const size_t ring_pages = (ring_bytes + 4095) & ~size_t{4095};
    void *rings = ::mmap(nullptr, ring_pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (rings == MAP_FAILED) return false;
    std::memset(rings, 0, ring_pages);
    const double lock = seconds_per_call(seconds / kRounds, [&] {
        ok = ::mlock(rings, ring_pages) == 0 && ok;
        ok = ::munlock(rings, ring_pages) == 0 && ok;
    });
    ::munmap(rings, ring_pages);
    const double beyond = std::max(qp.figure - lock, 0.0);
    print_row(figures, hosting,
              "  the same less mlock+munlock " + std::to_string(ring_pages >> 10) + " KiB", beyond,
              "privileged round trip (query)", qp.baseline, "   (round trips' worth; target <= 2)",
              "<= 2 round trips", 2.0);
    return ok;
}

}  // namespace

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_verbs", argc, argv);
    std::string krdmad;
    int cpu = -1;
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--krdmad") == 0) krdmad = argv[i + 1];
        if (std::strcmp(argv[i], "--cpu") == 0) cpu = std::atoi(argv[i + 1]);
    }
    if (cpu >= 0) {
        // Every thread of this process and the krdmad it forks inherit the affinity (none runs yet).
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (::sched_setaffinity(0, sizeof set, &set) != 0) {
            std::perror("bench_verbs: sched_setaffinity");
            return 1;
        }
    }
    bench::TempDir dir("openrdma-bench");
    if (dir.path().empty()) {
        std::perror("mkdtemp");
        return 1;
    }
    const std::filesystem::path config = dir.path() / "krdmad.json";
    const std::filesystem::path device = dir.path() / "krdma.sock";
    std::ofstream(config) << config_json(device);

    std::printf("softrnic sr0 on 127.0.0.1; %.2f s per figure and its baseline, alternating in %d rounds, best round of "
                "each; ratio = time per operation / the baseline's; %s\n",
                seconds, kRounds, cpu >= 0 ? ("every thread on CPU " + std::to_string(cpu)).c_str() : "threads unpinned");
    std::printf("%-9s %-34s %13s %12s   %-32s %12s %12s\n", "hosting", "figure", "per op", "rate", "baseline",
                "per op", "rate");
    int rc = 0;
    {
        ual::Options o;
        o.embedded_kal = &kal::start_embedded_link;
        o.embedded_config = config;  // the device path of the file is not used by an embedded kAL
        auto al = ual::AccessLayer::open(o);
        if (!al) {
            std::fprintf(stderr, "embedded kAL: %s\n", al.error().to_string().c_str());
            return 1;
        }
        if (!measure(figures, "embedded", *al, seconds)) rc = 1;
    }
    if (!krdmad.empty()) {
        const std::filesystem::path log = dir.path() / "krdmad.log";
        bench::Krdmad daemon(0, krdmad, config, log);  // declared before the access layer: killed after it is gone
        ::signal(SIGINT, &kill_krdmad_and_exit);
        ::signal(SIGTERM, &kill_krdmad_and_exit);
        if (daemon.pid() <= 0) {
            std::perror("fork");
            return 1;
        }
        std::shared_ptr<ual::AccessLayer> al;
        ual::Options o;
        o.embedded_kal = &kal::start_embedded_link;
        o.device = device;
        al = bench::open_when_served(o, &daemon, 500);
        if (!al) {
            std::fprintf(stderr, "krdmad %s did not serve %s:\n%s\n", krdmad.c_str(), device.c_str(),
                         read_text(log).c_str());
            return 1;
        }
        if (!measure(figures, "krdmad", al, seconds)) {
            std::fprintf(stderr, "krdmad's log:\n%s\n", read_text(log).c_str());
            rc = 1;
        }
    }
    return rc;
}
