// A structured fuzz driver for the device's SYSCALL and administration commands: a real DeviceServer with
// VerbCommands and the admin commands, the cppkvp and goodtest kVP modules loaded and RNICs attached, and two
// clients sending requests that are mostly almost valid (real op codes, handles from their own earlier replies, from
// the other client, stale ones of destroyed objects, off-by-one lengths, private data up to and beyond the limit,
// reserved fields set, 0 to 5 descriptors), plus some random payloads and packets.
//
// Checked on every request: exactly one reply with its sequence number, in the documented form; a call that
// succeeds names only live objects of the caller, of the right type and of the same RNIC open (a model of each
// client's table is the oracle), never destroys an object that has children or referrers, and never takes a client
// over its quota; an event reaches only the client whose RNIC open or CQ it names. After the run: a valid call still
// works, and closing the clients leaves no context, no pinned byte, no RNIC open and no extra descriptor.
//
// Built two ways: with libFuzzer (clang -fsanitize=fuzzer, see scripts/fuzz.sh kal) the input bytes drive one
// thread that alternates between the two clients and serves the device between their requests (DeviceServer::
// run_once(): no thread hand-off per request, which made the hand-offs most of an input's cost); otherwise main()
// runs the two clients in two threads from a seed for a bounded number of requests (kal_syscall_fuzz REQUESTS
// [SEED]) with the server on a thread of its own, under ASan/UBSan in the sanitizer build, or replays saved inputs
// through the libFuzzer entry point (kal_syscall_fuzz PATH...: the corpus in tests/fuzz/corpus/kal).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "adapter_manager.hpp"
#include "admin_commands.hpp"
#include "fuzz_wait.hpp"
#include "krdma/message.hpp"
#include "rnicpi/host/log.hpp"
#include "replay.hpp"
#include "rnicpi/ri_syscall.h"
#include "test_util.hpp"
#include "verb_commands.hpp"

namespace {

[[noreturn]] void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "syscall_fuzz: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::abort();
}
#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) fail(__VA_ARGS__);   \
    } while (0)

// ---- Where the choices come from: libFuzzer's bytes (zeros once they run out), or a seeded generator.
class Input {
public:
    explicit Input(uint64_t seed) : rng_(seed), random_(true) {}
    Input(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    [[nodiscard]] bool exhausted() const noexcept { return !random_ && pos_ >= size_; }
    uint8_t byte() {
        if (random_) return static_cast<uint8_t>(rng_());
        return pos_ < size_ ? data_[pos_++] : 0;
    }
    uint64_t bits(unsigned nbytes) {
        uint64_t v = 0;
        for (unsigned i = 0; i < nbytes; ++i) v |= static_cast<uint64_t>(byte()) << (8 * i);
        return v;
    }
    uint32_t u32() { return static_cast<uint32_t>(bits(4)); }
    uint64_t u64() { return bits(8); }
    // A number below @p n (n > 0).
    uint32_t below(uint32_t n) { return n <= 1 ? 0 : static_cast<uint32_t>(bits(n <= 256 ? 1 : n <= 65536 ? 2 : 4) % n); }
    bool chance(unsigned percent) { return below(100) < percent; }
    void fill(void *p, size_t n) {
        auto *b = static_cast<uint8_t *>(p);
        for (size_t i = 0; i < n; ++i) b[i] = byte();
    }
    template <class T>
    const T &pick(const std::vector<T> &v) { return v[below(static_cast<uint32_t>(v.size()))]; }

private:
    std::mt19937_64 rng_;
    bool random_ = false;
    const uint8_t *data_ = nullptr;
    size_t size_ = 0, pos_ = 0;
};

// ---- The server side: what krdmad runs, in process.
constexpr uint32_t kQuotaTotal = 40;
constexpr uint32_t kQuotaRnic = 4;
constexpr uint64_t kPinLimit = 32 * 4096;

struct Planned {
    std::string name, provider, file, address;
};

// The host's addresses that attach can bind to (no link-local IPv6: its text form needs a scope).
std::vector<std::string> host_addresses() {
    std::vector<std::string> out;
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (i->ifa_addr->sa_family == AF_INET) {
            ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, text, sizeof text);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto *a6 = &reinterpret_cast<sockaddr_in6 *>(i->ifa_addr)->sin6_addr;
            if (IN6_IS_ADDR_LINKLOCAL(a6)) continue;
            ::inet_ntop(AF_INET6, a6, text, sizeof text);
        } else {
            continue;
        }
        if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
    }
    ::freeifaddrs(list);
    // Loopback first: it exists everywhere.
    std::stable_partition(out.begin(), out.end(), [](const std::string &a) { return a == "127.0.0.1"; });
    return out;
}

// Whether the rig serves the device on a thread of its own (the seeded two-thread run) or from the one thread that
// also runs the clients (libFuzzer inputs and replays); set before the rig is first used.
bool g_server_thread = false;

struct Rig {
    kal::PinBudget budget{1 << 30};
    rdma::rnicpi::ModuleLoader loader{kal::kal_host_ops(), TEST_PROVIDER_DIR};
    kal::AdapterManager adapters{loader};
    std::unique_ptr<kal::DeviceServer> server;
    std::unique_ptr<kal::VerbCommands> verbs;
    std::thread thread;
    std::vector<std::string> addresses = host_addresses();
    std::vector<Planned> plan;
    std::atomic<bool> serving{true};  // false once run() returned (it must not before the end)
    const bool threaded = g_server_thread;

    Rig() {
        // One RNIC per address: cppkvp (ABI 1.1, pins memory, returns descriptors and events), then goodtest (a
        // plain C kVP of ABI 1.0), then another cppkvp one.
        const Planned wanted[] = {{"cpp0", "cppkvp", "test_cpp_kvp.so", ""},
                                  {"good0", "goodtest", "test_good_kvp.so", ""},
                                  {"cpp1", "cppkvp", "test_cpp_kvp.so", ""}};
        for (size_t i = 0; i < std::size(wanted) && i < addresses.size(); ++i) {
            plan.push_back(wanted[i]);
            plan.back().address = addresses[i];
        }
        CHECK(!plan.empty(), "this host has no address to attach an RNIC to");
        restore();
        kal::Quotas q;
        q.total = kQuotaTotal;
        q.per_type[static_cast<size_t>(kal::ResourceType::rnic)] = kQuotaRnic;
        server = std::make_unique<kal::DeviceServer>("/nonexistent/krdma-fuzz");  // connect_local only
        verbs = std::make_unique<kal::VerbCommands>(*server, adapters, q, budget, kPinLimit);
        // The admin group is ours, so the administration commands are served whoever runs the test.
        kal::register_admin_commands(*server, adapters, kal::AdminPolicy{::getgid()});
        if (threaded) {
            thread = std::thread([this] {
                server->run();
                serving = false;
            });
        }
    }
    ~Rig() {
        server->stop();
        if (thread.joinable()) thread.join();
        verbs.reset();
        server.reset();
    }
    // Puts the planned modules and RNICs back (with no client connected: the administration commands of a run may
    // have detached, unloaded or attached others).
    void restore() {
        for (const auto &r : adapters.list()) {
            bool keep = std::any_of(plan.begin(), plan.end(), [&](const Planned &p) {
                return p.name == r.name && p.provider == r.provider && p.address == r.address;
            });
            if (!keep) CHECK(adapters.detach(r.name), "cannot detach %s after a run", r.name.c_str());
        }
        auto attached = adapters.list();
        for (const auto &p : plan) {
            if (std::any_of(attached.begin(), attached.end(), [&](const kal::RnicInfo &r) { return r.name == p.name; })) {
                continue;
            }
            auto m = adapters.load(p.file);
            CHECK(m, "cannot load %s: %s", p.file.c_str(), m ? "" : m.error().to_string().c_str());
            auto a = adapters.attach(kal::AttachRequest{p.provider, p.name, "", p.address, ""});
            CHECK(a, "cannot attach %s: %s", p.name.c_str(), a ? "" : a.error().to_string().c_str());
        }
    }
    // Serves what is ready when this thread is the serving one, waiting at most @p timeout_ms for it (false when
    // the server thread serves).
    bool pump(int timeout_ms) {
        if (threaded) return false;
        if (!server->run_once(timeout_ms)) serving = false;
        return true;
    }
    // Waits (up to 2 s) until the server has seen every client go: in steps of 20 us, since the server thread
    // usually needs a few to do it, and every input of a libFuzzer run waits here once.
    void settle() {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while ((server->connections() != 0 || verbs->contexts() != 0) && std::chrono::steady_clock::now() < until) {
            if (!pump(1)) std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
    void check_clean() {
        settle();
        CHECK(server->connections() == 0, "%zu connections left after the clients closed", server->connections());
        CHECK(verbs->contexts() == 0, "%zu contexts left after the clients closed", verbs->contexts());
        CHECK(budget.used() == 0, "%llu bytes still pinned after the clients closed",
              static_cast<unsigned long long>(budget.used()));
        for (const auto &r : adapters.list()) CHECK(r.opens == 0, "RNIC %s still open %u times", r.name.c_str(), r.opens);
    }
};

// ---- The client side, with a model of what the kAL holds for it.
enum class T : uint8_t { none, rnic, pd, cq, qp, srq, mr, mw };

struct OpInfo {
    T object = T::none;
    T refs[RI_SYSCALL_MAX_REFS] = {T::none, T::none, T::none, T::none};
    bool ref_required[RI_SYSCALL_MAX_REFS] = {};
    T creates = T::none;
    bool destroys = false;
    uint32_t param_len = 0;
};

constexpr uint32_t kModify = sizeof(ri_syscall_modify_t);

// What each op takes, from the table of ri_syscall.h (independent of the kAL's own table: this is the oracle).
OpInfo op_info(uint32_t op) {
    OpInfo i;
    switch (op) {
        case RI_OPEN_RNIC: i.creates = T::rnic; i.param_len = sizeof(ri_rnic_open_params_t); break;
        case RI_CLOSE_RNIC: i.object = T::rnic; i.destroys = true; break;
        case RI_QUERY_RNIC: case RI_SET_CEH: case RI_SET_AEH: i.object = T::rnic; break;
        case RI_ALLOC_PD: i.object = T::rnic; i.creates = T::pd; break;
        case RI_DEALLOC_PD: i.object = T::pd; i.destroys = true; break;
        case RI_CREATE_CQ: i.object = T::rnic; i.creates = T::cq; i.param_len = sizeof(ri_cq_attr_t); break;
        case RI_RESIZE_CQ: i.object = T::cq; i.param_len = sizeof(uint32_t); break;
        case RI_DESTROY_CQ: i.object = T::cq; i.destroys = true; break;
        case RI_QUERY_CQ: i.object = T::cq; break;
        case RI_CREATE_QP:
            i.object = T::pd;
            i.refs[0] = i.refs[1] = T::cq;
            i.ref_required[0] = i.ref_required[1] = true;
            i.refs[2] = T::srq;
            i.creates = T::qp;
            i.param_len = sizeof(ri_qp_init_attr_t);
            break;
        case RI_QUERY_QP: i.object = T::qp; break;
        case RI_MODIFY_QP: i.object = T::qp; i.param_len = kModify + sizeof(ri_qp_attr_t); break;
        case RI_DESTROY_QP: i.object = T::qp; i.destroys = true; break;
        case RI_CREATE_SRQ: i.object = T::pd; i.creates = T::srq; i.param_len = sizeof(ri_srq_attr_t); break;
        case RI_MODIFY_SRQ: i.object = T::srq; i.param_len = kModify + sizeof(ri_srq_attr_t); break;
        case RI_DESTROY_SRQ: i.object = T::srq; i.destroys = true; break;
        case RI_QUERY_SRQ: i.object = T::srq; break;
        case RI_REGISTER_MR: i.object = T::pd; i.creates = T::mr; i.param_len = sizeof(ri_mr_reg_t); break;
        case RI_REGISTER_SHARED_MR:
            i.object = T::mr;
            i.refs[0] = T::pd;
            i.ref_required[0] = true;
            i.creates = T::mr;
            i.param_len = sizeof(ri_mr_reg_t);
            break;
        case RI_ALLOC_STAG: i.object = T::pd; i.creates = T::mr; i.param_len = sizeof(uint32_t); break;
        case RI_REREGISTER_MR:
            i.object = T::mr;
            i.refs[0] = T::pd;
            i.param_len = kModify + sizeof(ri_mr_reg_t);
            break;
        case RI_QUERY_MR: i.object = T::mr; break;
        case RI_DEREGISTER_MR: i.object = T::mr; i.destroys = true; break;
        case RI_ALLOC_MW: i.object = T::pd; i.creates = T::mw; i.param_len = sizeof(uint32_t); break;
        case RI_DEALLOC_MW: i.object = T::mw; i.destroys = true; break;
        default: break;
    }
    return i;
}

struct Obj {
    uint64_t handle = 0;
    T type = T::none;
    uint64_t open = 0;    // the RNIC open it belongs to (itself for an open)
    uint64_t parent = 0;  // 0 for an open
    std::vector<uint64_t> held;  // objects it refers to (a QP: its CQs and SRQ)
};

// Handles each client has seen, for the other one to try.
struct Shared {
    std::mutex mutex;
    std::vector<uint64_t> seen[2];
    void publish(int client, uint64_t h) {
        std::lock_guard lock(mutex);
        auto &v = seen[client];
        if (v.size() < 256) {
            v.push_back(h);
        } else {
            v[h % v.size()] = h;
        }
    }
    uint64_t any_of(int client, Input &in) {
        std::lock_guard lock(mutex);
        const auto &v = seen[client];
        return v.empty() ? 0 : v[in.below(static_cast<uint32_t>(v.size()))];
    }
};

struct Stats {
    std::atomic<uint64_t> requests{0}, ok{0}, created{0}, destroyed{0}, events{0}, admin_ok{0}, raw{0};
};

// Memory that a client's registrations and queues name (160 KiB; no kVP of the test writes to it), from a pool that
// lasts as long as the process: a libFuzzer run makes three clients per input, and allocating and faulting in fresh
// zeroed pages for each took a seventh of its time under ASan.
class QueueMemory {
public:
    static constexpr size_t kSize = 40 * 4096;
    QueueMemory() {
        std::lock_guard lock(mutex());
        if (free_list().empty()) {
            block_ = std::make_unique<uint8_t[]>(kSize);
        } else {
            block_ = std::move(free_list().back());
            free_list().pop_back();
        }
    }
    ~QueueMemory() {
        std::lock_guard lock(mutex());
        free_list().push_back(std::move(block_));
    }
    QueueMemory(const QueueMemory &) = delete;
    QueueMemory &operator=(const QueueMemory &) = delete;
    [[nodiscard]] uint8_t *data() const noexcept { return block_.get(); }

private:
    static std::mutex &mutex() {
        static std::mutex m;
        return m;
    }
    static std::vector<std::unique_ptr<uint8_t[]>> &free_list() {
        static auto *list = new std::vector<std::unique_ptr<uint8_t[]>>();  // never destroyed: no exit-order issue
        return *list;
    }
    std::unique_ptr<uint8_t[]> block_;
};

class Client {
public:
    Client(int index, krdma::UniqueFd sock, Shared &shared, Stats &stats, Rig &rig)
        : index_(index), sock_(std::move(sock)), shared_(shared), stats_(stats), rig_(rig) {
        int p[2];
        CHECK(::pipe(p) == 0, "pipe");
        spare_[0] = krdma::UniqueFd(p[0]);
        spare_[1] = krdma::UniqueFd(p[1]);
        spare_[2] = krdma::UniqueFd(::eventfd(0, EFD_CLOEXEC));
    }

    // One request of any kind, chosen by @p in.
    void step(Input &in) {
        const uint32_t kind = in.below(100);
        if (kind < 76) {
            syscall_structured(in);
        } else if (kind < 80) {
            syscall_random(in);
        } else if (kind < 91) {
            admin(in);
        } else if (kind < 95) {
            listing(in);
        } else {
            raw_packet(in);
        }
    }

    // After the run: nothing but events may be waiting.
    void drain() {
        krdma::Message m;
        while (wait_readable(0)) {
            auto r = krdma::receive(sock_.get(), m);
            if (r != krdma::RecvResult::message) break;
            CHECK((m.hdr.flags & KRDMA_MSG_REPLY) == 0, "client %d: a reply (seq %u) nobody asked for", index_, m.hdr.seq);
            check_event(m);
        }
    }
    // A valid call still works: open an attached RNIC (ENOSPC when this client used up its quota).
    void valid_call() {
        auto attached = rig_.adapters.list();
        if (attached.empty()) {  // the run detached them all: attach one again
            const Planned &p = rig_.plan[0];
            CHECK(rig_.adapters.load(p.file) && rig_.adapters.attach({p.provider, p.name, "", p.address, ""}),
                  "cannot attach %s again", p.name.c_str());
            attached = rig_.adapters.list();
        }
        krdma_syscall s{};
        s.op = RI_OPEN_RNIC;
        s.param_len = sizeof(ri_rnic_open_params_t);
        ri_rnic_open_params_t p{};
        std::snprintf(p.instance_name, sizeof p.instance_name, "%s", attached[0].name.c_str());
        std::memcpy(s.param, &p, sizeof p);
        const int st = send_syscall(s, 0);
        CHECK(st == RI_OK || (st == RI_ENOSPC && (count(T::rnic) >= kQuotaRnic || live_.size() >= kQuotaTotal)),
              "client %d: a valid Open RNIC of %s failed with %d", index_, attached[0].name.c_str(), st);
        check_syscall(s, st);
    }
    [[nodiscard]] size_t live() const noexcept { return live_.size(); }

private:
    // Resumes after a signal (libFuzzer's SIGALRM) with the time that is left: see fuzz_wait.hpp. Without a server
    // thread, serves the device meanwhile (what this client sent, and what the other one did).
    bool wait_readable(int timeout_ms) {
        if (!rig_.pump(0)) return fuzzwait::wait_readable(sock_.get(), timeout_ms);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            if (fuzzwait::wait_readable(sock_.get(), 0)) return true;
            if (std::chrono::steady_clock::now() >= until) return false;
            rig_.pump(1);
        }
    }

    // Receives until the reply to @p seq; events on the way are checked. Returns the reply in reply_.
    void await_reply(uint32_t seq, uint32_t cmd, bool exact_seq = true) {
        for (;;) {
            CHECK(wait_readable(10000), "client %d: no reply to seq %u (cmd %#x) in 10 s; the server is %s, %zu "
                  "connections", index_, seq, cmd, rig_.serving ? "running" : "stopped", rig_.server->connections());
            auto r = krdma::receive(sock_.get(), reply_);
            CHECK(r == krdma::RecvResult::message, "client %d: bad message or closed connection (%d) awaiting seq %u",
                  index_, static_cast<int>(r), seq);
            if ((reply_.hdr.flags & KRDMA_MSG_EVENT) != 0) {
                check_event(reply_);
                continue;
            }
            CHECK(reply_.hdr.flags == KRDMA_MSG_REPLY, "client %d: message with flags %#x", index_, reply_.hdr.flags);
            if (exact_seq) {
                CHECK(reply_.hdr.seq == seq, "client %d: reply to seq %u while awaiting %u", index_, reply_.hdr.seq, seq);
            }
            CHECK(reply_.hdr.status >= 0 && reply_.hdr.status < 4096, "client %d: status %d", index_, reply_.hdr.status);
            if (reply_.hdr.status != 0) {
                // Never descriptors; a reason (text of at most KRDMA_MAX_REASON bytes, no C0 control character or
                // DEL) only once the client has said HELLO with minor version 1 or later (abi.h, "Versions").
                const size_t n = reply_.payload_len();
                CHECK(reply_.nfds == 0 && (n == 0 || (minor_ >= 1 && n <= KRDMA_MAX_REASON)),
                      "client %d: an error reply (status %d) with a payload of %zu bytes and %zu descriptors to cmd %#x "
                      "(seq %u) at minor version %u", index_, reply_.hdr.status, n, static_cast<size_t>(reply_.nfds),
                      reply_.hdr.cmd, reply_.hdr.seq, minor_);
                const uint8_t *text = reply_.body.data();
                CHECK(std::none_of(text, text + n, [](uint8_t b) { return b < 0x20 || b == 0x7f; }),
                      "client %d: an error reason with a control character", index_);
            } else if (exact_seq) {
                CHECK(reply_.hdr.cmd == cmd, "client %d: reply to cmd %#x for %#x", index_, reply_.hdr.cmd, cmd);
                CHECK(reply_.payload_len() == krdma::command_size(cmd), "client %d: reply of %zu bytes to cmd %#x",
                      index_, reply_.payload_len(), cmd);
            }
            return;
        }
    }

    // An event must name one of this client's own RNIC opens (asynchronous) or CQs (completion).
    void check_event(const krdma::Message &m) {
        CHECK(m.hdr.flags == KRDMA_MSG_EVENT && m.hdr.seq == 0 && m.payload_len() == sizeof(krdma_event),
              "client %d: malformed event", index_);
        krdma_event ev;
        std::memcpy(&ev, m.body.data(), sizeof ev);
        const Obj *o = find(ev.object);
        if (ev.event == KRDMA_EVENT_ASYNC) {
            CHECK(o != nullptr && o->type == T::rnic, "client %d: async event for %#llx, not an RNIC open of its own",
                  index_, static_cast<unsigned long long>(ev.object));
        } else {
            CHECK(ev.event == KRDMA_EVENT_COMPLETION && o != nullptr && o->type == T::cq,
                  "client %d: event %u for %#llx, not a CQ of its own", index_, ev.event,
                  static_cast<unsigned long long>(ev.object));
        }
        stats_.events.fetch_add(1, std::memory_order_relaxed);
    }

    int send_request(uint32_t cmd, const void *payload, size_t len, size_t nfds, bool bad_header = false,
                     uint32_t junk = 0) {
        krdma_msg_hdr hdr{};
        hdr.cmd = cmd;
        hdr.seq = ++seq_;
        if (bad_header) {
            switch (junk % 3) {
                case 0: hdr.flags = junk | 1; break;
                case 1: hdr.status = static_cast<int32_t>(junk | 1); break;
                default: hdr.reserved = junk | 1; break;
            }
        }
        int fds[5];
        for (size_t i = 0; i < nfds; ++i) fds[i] = spare_[i % 3].get();
        stats_.requests.fetch_add(1, std::memory_order_relaxed);
        if (nfds <= KRDMA_MAX_FDS) {
            rdma::Status st = krdma::send(sock_.get(), hdr, {static_cast<const uint8_t *>(payload), len},
                                          std::span<const int>(fds, nfds));
            CHECK(st.ok(), "client %d: send failed: %s", index_, st.describe().c_str());
        } else {
            raw_send(hdr, payload, len, fds, nfds);
        }
        await_reply(hdr.seq, cmd);
        if (nfds > KRDMA_MAX_FDS) {
            CHECK(reply_.hdr.status == RI_EMSGSIZE, "client %d: %zu descriptors accepted", index_, nfds);
        } else if (bad_header) {
            CHECK(reply_.hdr.status == RI_EINVAL || reply_.hdr.status == RI_ENOTTY,
                  "client %d: a header with reserved bits set got %d", index_, reply_.hdr.status);
        }
        return reply_.hdr.status;
    }

    void raw_send(krdma_msg_hdr hdr, const void *payload, size_t len, const int *fds, size_t nfds) {
        hdr.length = static_cast<uint32_t>(sizeof hdr + len);
        iovec iov[2] = {{&hdr, sizeof hdr}, {const_cast<void *>(payload), len}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = len > 0 ? 2 : 1;
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
        if (nfds > 0) {
            msg.msg_control = control;
            msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
            cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
            std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
        }
        ssize_t n;
        while ((n = ::sendmsg(sock_.get(), &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
            // libFuzzer's SIGALRM (-timeout) while the socket was full: a datagram is sent whole or not at all
        }
        CHECK(n == static_cast<ssize_t>(sizeof hdr + len), "client %d: sendmsg failed: %s", index_,
              n < 0 ? std::strerror(errno) : "short");
    }

    // ---- The model.
    const Obj *find(uint64_t h) const {
        if (h == 0) return nullptr;
        for (const Obj &o : live_) {
            if (o.handle == h) return &o;
        }
        return nullptr;
    }
    uint32_t count(T t) const {
        return static_cast<uint32_t>(std::count_if(live_.begin(), live_.end(), [t](const Obj &o) { return o.type == t; }));
    }
    bool in_use(uint64_t h) const {
        return std::any_of(live_.begin(), live_.end(), [h](const Obj &o) {
            return o.parent == h || std::find(o.held.begin(), o.held.end(), h) != o.held.end();
        });
    }

    // A handle for a slot of type @p want: mostly a live one of this client, sometimes anything else.
    uint64_t choose_handle(Input &in, T want, uint64_t same_open) {
        const uint32_t k = pristine_ ? 0 : in.below(100);
        std::vector<const Obj *> fit, any_type;
        for (const Obj &o : live_) {
            any_type.push_back(&o);
            if (o.type == want && (same_open == 0 || o.open == same_open)) fit.push_back(&o);
        }
        if (fit.empty() && same_open != 0) {
            for (const Obj &o : live_) {
                if (o.type == want) fit.push_back(&o);
            }
        }
        if (k < 72 && !fit.empty()) return in.pick(fit)->handle;
        if (k < 78) {  // the right type, any open
            std::vector<const Obj *> typed;
            for (const Obj &o : live_) {
                if (o.type == want) typed.push_back(&o);
            }
            if (!typed.empty()) return in.pick(typed)->handle;
        }
        if (k < 84 && !any_type.empty()) return in.pick(any_type)->handle;  // maybe the wrong type
        if (k < 88) return shared_.any_of(1 - index_, in);                  // the other client's
        if (k < 92 && !stale_.empty()) return in.pick(stale_);              // destroyed
        if (k < 96 && !any_type.empty()) {                                  // off by a little
            uint64_t h = in.pick(any_type)->handle;
            switch (in.below(4)) {
                case 0: return h + 1;
                case 1: return h - 1;
                case 2: return h + (uint64_t{1} << 32);
                default: return h ^ (uint64_t{1} << (32 + in.below(32)));
            }
        }
        if (k < 98) return 0;
        return in.u64();
    }

    // A mutation with probability @p percent, unless this request is to be well formed.
    bool odd(Input &in, unsigned percent) { return !pristine_ && in.chance(percent); }

    uint64_t interesting_u64(Input &in) {
        const uint64_t base = (reinterpret_cast<uint64_t>(queues_.data()) + 4095) & ~uint64_t{4095};
        switch (in.below(8)) {
            case 0: return base + 4096 * in.below(8) + in.below(3) * (in.below(2) != 0 ? 1 : 4095);
            case 1: return 4096 * uint64_t{in.below(40)} + in.below(2);
            case 2: return ~uint64_t{0} - in.below(8200);
            case 3: return uint64_t{1} << in.below(64);
            case 4: return 0;
            case 5: return base;
            default: return in.u64();
        }
    }

    // Parameters that mostly make sense for @p op.
    void fill_param(Input &in, uint32_t op, krdma_syscall &s) {
        if (odd(in, 8)) {
            in.fill(s.param, std::min<size_t>(s.param_len, sizeof s.param));
            return;
        }
        switch (op) {
            case RI_OPEN_RNIC: {
                ri_rnic_open_params_t p{};
                p.instance = reinterpret_cast<ri_instance_t>(static_cast<uintptr_t>(in.u64()));  // the kAL's to set
                p.host_ctx = reinterpret_cast<void *>(static_cast<uintptr_t>(in.u64()));
                static const std::vector<std::string> names = {"cpp0", "good0", "cpp1", "fz0", "nosuch", ""};
                if (pristine_) {
                    std::snprintf(p.instance_name, sizeof p.instance_name, "%s", in.pick(rig_.plan).name.c_str());
                } else if (in.chance(5)) {
                    std::memset(p.instance_name, 'a' + static_cast<int>(in.below(26)), sizeof p.instance_name);
                } else {
                    std::snprintf(p.instance_name, sizeof p.instance_name, "%s", in.pick(names).c_str());
                }
                if (odd(in, 10)) p.flags = in.u32();
                std::memcpy(s.param, &p, sizeof p);
                break;
            }
            case RI_CREATE_CQ: {
                ri_cq_attr_t a{};
                a.cqe = in.chance(80) ? 1 + in.below(256) : in.u32();
                a.ceh_id = in.below(4);
                a.context = in.u64();
                std::memcpy(s.param, &a, sizeof a);
                break;
            }
            case RI_RESIZE_CQ:
            case RI_ALLOC_STAG:
            case RI_ALLOC_MW: {
                uint32_t v = in.chance(70) ? in.below(64) : in.u32();
                std::memcpy(s.param, &v, sizeof v);
                break;
            }
            case RI_CREATE_QP: {
                ri_qp_init_attr_t a{};
                a.type = in.chance(90) ? uint32_t{RI_QPT_RC} : in.u32();
                a.flags = in.below(4);
                a.sq_depth = in.below(64);
                a.rq_depth = in.below(64);
                a.sq_sge = a.rq_sge = in.below(4);
                a.context = in.u64();
                std::memcpy(s.param, &a, sizeof a);
                break;
            }
            case RI_MODIFY_QP: {
                ri_syscall_modify_t m{};
                m.mask = in.chance(70) ? uint32_t{RI_QP_ATTR_STATE} : in.u32();
                if (odd(in, 5)) m.reserved = in.u32();
                ri_qp_attr_t a{};
                a.state = in.chance(50) ? uint32_t{RI_QPS_ERROR} : in.below(8);
                a.llp.fd = static_cast<int32_t>(in.below(2) != 0 ? spare_[0].get() : static_cast<int>(in.u32()));
                std::memcpy(s.param, &m, sizeof m);
                std::memcpy(s.param + kModify, &a, sizeof a);
                break;
            }
            case RI_CREATE_SRQ:
            case RI_MODIFY_SRQ: {
                ri_syscall_modify_t m{in.below(4), 0};
                ri_srq_attr_t a{};
                a.max_wr = in.below(64);
                a.max_sge = in.below(4);
                a.limit = in.below(8);
                size_t at = 0;
                if (op == RI_MODIFY_SRQ) {
                    std::memcpy(s.param, &m, sizeof m);
                    at = kModify;
                }
                std::memcpy(s.param + at, &a, sizeof a);
                break;
            }
            case RI_REGISTER_MR:
            case RI_REGISTER_SHARED_MR:
            case RI_REREGISTER_MR: {
                ri_mr_reg_t r{};
                r.addr = interesting_u64(in);
                r.length = in.chance(70) ? 1 + in.below(6 * 4096) : interesting_u64(in);
                r.iova = in.chance(50) ? r.addr : interesting_u64(in);
                r.access = in.below(128);
                size_t at = 0;
                if (op == RI_REREGISTER_MR) {
                    ri_syscall_modify_t m{in.chance(80) ? in.below(8) : in.u32(), 0};
                    std::memcpy(s.param, &m, sizeof m);
                    at = kModify;
                }
                std::memcpy(s.param + at, &r, sizeof r);
                break;
            }
            default: in.fill(s.param, std::min<size_t>(s.param_len, 64)); break;
        }
    }

    void syscall_structured(Input &in) {
        krdma_syscall s{};
        // Mostly an op whose main object exists.
        uint32_t op;
        if (in.chance(90)) {
            if (live_.empty() || in.chance(count(T::rnic) < kQuotaRnic ? 12 : 2)) {
                op = RI_OPEN_RNIC;
            } else {
                const T want = in.pick(live_).type;
                std::vector<uint32_t> ops;
                for (uint32_t o = RI_OPEN_RNIC; o <= RI_QUERY_CQ; ++o) {
                    if (op_info(o).object == want) ops.push_back(o);
                }
                op = in.pick(ops);
            }
        } else {
            op = in.chance(70) ? in.below(30) : in.u32();
        }
        const OpInfo info = op_info(op);
        s.op = op;
        pristine_ = in.chance(55);  // this request is well formed: only its values may be refused
        s.object = info.object == T::none ? (!odd(in, 5) ? 0 : choose_handle(in, T::rnic, 0))
                                          : choose_handle(in, info.object, 0);
        if (pristine_ && op == RI_CREATE_QP) {  // a PD of an open that has a CQ, so the QP can be made
            std::vector<const Obj *> pds;
            for (const Obj &cq : live_) {
                if (cq.type != T::cq) continue;
                for (const Obj &pd : live_) {
                    if (pd.type == T::pd && pd.open == cq.open) pds.push_back(&pd);
                }
            }
            if (!pds.empty()) s.object = in.pick(pds)->handle;
        }
        const Obj *obj = find(s.object);
        const uint64_t open = obj != nullptr ? obj->open : 0;
        for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) {
            if (info.refs[i] != T::none && (info.ref_required[i] || in.chance(40))) {
                s.refs[i] = choose_handle(in, info.refs[i], open);
            } else if (odd(in, 3)) {
                s.refs[i] = choose_handle(in, static_cast<T>(1 + in.below(7)), open);
            }
        }
        switch (pristine_ ? 19 : in.below(20)) {
            case 0: s.param_len = info.param_len + 1; break;
            case 1: s.param_len = info.param_len - 1; break;  // wraps for 0: far beyond the limit
            case 2: s.param_len = in.below(RI_SYSCALL_MAX_PARAM + 8); break;
            default: s.param_len = info.param_len; break;
        }
        fill_param(in, op, s);
        const uint32_t p = in.below(pristine_ ? 85 : 100);
        if (p < 70) {
            s.priv_len = 0;
        } else if (p < 85 && op == RI_CREATE_QP) {  // the cppkvp's queue memory (OpenRDMA Figure 4)
            const uint64_t base = (reinterpret_cast<uint64_t>(queues_.data()) + 4095) & ~uint64_t{4095};
            const uint64_t mem[2] = {in.chance(70) ? base + 4096 * in.below(32) : interesting_u64(in),
                                     in.chance(70) ? 4096 * (1 + uint64_t{in.below(8)}) : interesting_u64(in)};
            s.priv_len = sizeof mem;
            std::memcpy(s.priv, mem, sizeof mem);
        } else if (p < 95) {
            s.priv_len = in.below(RI_SYSCALL_MAX_PRIV + 1);
            in.fill(s.priv, std::min<size_t>(s.priv_len, 64));
        } else {
            s.priv_len = RI_SYSCALL_MAX_PRIV + 1 + in.below(64);
        }
        if (odd(in, 3)) s.cookie = in.u32();  // any cookie is the consumer's to choose
        if (odd(in, 5)) {  // reply-only fields: the kAL must not trust them
            s.handle_out = choose_handle(in, T::rnic, 0);
            s.result_len = in.u32();
            s.npins = in.u32();
        }
        size_t nfds = 0;
        if (odd(in, 10)) nfds = in.below(6);
        const bool bad_header = odd(in, 2);
        pristine_ = false;
        if (bad_header) {
            (void)send_request(KRDMA_CMD_SYSCALL, &s, sizeof s, nfds, true, in.u32() | 1);
            return;
        }
        check_syscall(s, send_syscall(s, nfds));
    }

    // A SYSCALL of random bytes (mostly refused; checked like any other).
    void syscall_random(Input &in) {
        krdma_syscall s;
        in.fill(&s, sizeof s);
        if (in.chance(50)) {
            s.op = in.below(30);
            s.param_len = op_info(s.op).param_len;
            s.priv_len %= RI_SYSCALL_MAX_PRIV + 2;
        }
        stats_.raw.fetch_add(1, std::memory_order_relaxed);
        check_syscall(s, send_syscall(s, 0));
    }

    int send_syscall(const krdma_syscall &s, size_t nfds) {
        int st = send_request(KRDMA_CMD_SYSCALL, &s, sizeof s, nfds);
        if (st == RI_OK) std::memcpy(&answer_, reply_.body.data(), sizeof answer_);
        return st;
    }

    // The oracle: what a successful SYSCALL may have done, checked against the model, and the model updated.
    void check_syscall(const krdma_syscall &s, int status) {
        const OpInfo info = op_info(s.op);
        if (status != RI_OK) {
            // An error changes nothing; a few must be what they are.
            if (status != RI_EMSGSIZE &&  // too many descriptors: refused before it is decoded
                (s.param_len > RI_SYSCALL_MAX_PARAM || s.priv_len > RI_SYSCALL_MAX_PRIV)) {
                CHECK(status == RI_EINVAL, "client %d: op %u with bad sizes got %d", index_, s.op, status);
            }
            return;
        }
        stats_.ok.fetch_add(1, std::memory_order_relaxed);
        const krdma_syscall &a = answer_;
        CHECK(s.op >= RI_OPEN_RNIC && s.op <= RI_QUERY_CQ, "client %d: op %u succeeded", index_, s.op);
        CHECK(s.param_len == info.param_len && s.priv_len <= RI_SYSCALL_MAX_PRIV,
              "client %d: op %u with param_len %u (not %u), priv_len %u succeeded", index_, s.op, s.param_len,
              info.param_len, s.priv_len);
        CHECK(a.op == s.op && a.cookie == s.cookie && a.result_len <= sizeof a.result && a.priv_len <= sizeof a.priv &&
                  a.npins <= KRDMA_SYSCALL_MAX_PINS && a.param_len == s.param_len,
              "client %d: malformed reply to op %u", index_, s.op);
        for (uint32_t i = 0; i < a.npins; ++i) {
            const krdma_pin_op &pin = a.pins[i];
            CHECK((pin.op == KRDMA_PIN_LOCK || pin.op == KRDMA_PIN_UNLOCK) && pin.reserved == 0 && pin.length != 0 &&
                      pin.addr % 4096 == 0 && pin.length % 4096 == 0 && pin.addr + pin.length > pin.addr &&
                      pin.length <= kPinLimit,
                  "client %d: op %u: pin instruction %u {%#llx, %#llx, %u} is not a page range within the limit",
                  index_, s.op, i, static_cast<unsigned long long>(pin.addr),
                  static_cast<unsigned long long>(pin.length), pin.op);
        }
        // The main object: a live object of this client, of the right type.
        const Obj *obj = find(s.object);
        if (info.object == T::none) {
            CHECK(s.object == 0, "client %d: Open RNIC naming object %#llx succeeded", index_,
                  static_cast<unsigned long long>(s.object));
        } else {
            CHECK(obj != nullptr, "client %d: op %u on %#llx succeeded: not a live object of this client (forged, "
                  "stale or another client's handle)", index_, s.op, static_cast<unsigned long long>(s.object));
            CHECK(obj->type == info.object, "client %d: op %u on %#llx of another type succeeded", index_, s.op,
                  static_cast<unsigned long long>(s.object));
        }
        std::vector<uint64_t> held;
        for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) {
            if (s.refs[i] == 0) {
                CHECK(!info.ref_required[i], "client %d: op %u without its reference %zu succeeded", index_, s.op, i);
                continue;
            }
            const Obj *r = find(s.refs[i]);
            CHECK(info.refs[i] != T::none, "client %d: op %u with a reference in position %zu succeeded", index_, s.op, i);
            CHECK(r != nullptr && r->type == info.refs[i],
                  "client %d: op %u with reference %zu = %#llx succeeded: not a live %s of this client", index_, s.op,
                  i, static_cast<unsigned long long>(s.refs[i]), r == nullptr ? "object" : "object of that type");
            CHECK(obj != nullptr && r->open == obj->open,
                  "client %d: op %u with reference %zu of another RNIC open succeeded", index_, s.op, i);
            if (s.op == RI_CREATE_QP) held.push_back(s.refs[i]);
        }
        if (info.destroys) {
            CHECK(!in_use(s.object), "client %d: op %u destroyed %#llx while other objects depend on it", index_, s.op,
                  static_cast<unsigned long long>(s.object));
            live_.erase(std::find_if(live_.begin(), live_.end(), [&](const Obj &o) { return o.handle == s.object; }));
            if (stale_.size() < 64) stale_.push_back(s.object);
            stats_.destroyed.fetch_add(1, std::memory_order_relaxed);
            CHECK(a.handle_out == 0 && a.result_len == 0 && a.priv_len == 0, "client %d: destroy with a result", index_);
        } else if (info.creates != T::none) {
            CHECK(a.handle_out != 0 && find(a.handle_out) == nullptr,
                  "client %d: op %u returned handle %#llx, which is 0 or already live", index_, s.op,
                  static_cast<unsigned long long>(a.handle_out));
            Obj o;
            o.handle = a.handle_out;
            o.type = info.creates;
            o.open = info.creates == T::rnic ? a.handle_out : obj->open;
            o.parent = s.op == RI_REGISTER_SHARED_MR ? s.refs[0] : s.object;
            o.held = held;
            live_.push_back(o);
            shared_.publish(index_, o.handle);
            stale_.erase(std::remove(stale_.begin(), stale_.end(), o.handle), stale_.end());
            stats_.created.fetch_add(1, std::memory_order_relaxed);
            CHECK(live_.size() <= kQuotaTotal && count(T::rnic) <= kQuotaRnic,
                  "client %d: %zu objects (%u RNIC opens), over the quota", index_, live_.size(), count(T::rnic));
        } else {
            CHECK(a.handle_out == 0, "client %d: op %u returned a handle", index_, s.op);
        }
    }

    // ---- Administration and listing.
    template <size_t N>
    void text(Input &in, char (&field)[N], const std::vector<std::string> &choices) {
        const uint32_t k = in.below(100);
        if (k < 85) {
            std::snprintf(field, N, "%s", in.pick(choices).c_str());
        } else if (k < 93) {
            const size_t n = in.below(N);
            for (size_t i = 0; i < n; ++i) field[i] = static_cast<char>(' ' + in.below(95));
            field[n] = '\0';
        } else if (k < 97) {
            std::memset(field, 'x', N);  // no terminating NUL
        } else {
            in.fill(field, N);
        }
    }

    void admin(Input &in) {
        static const std::vector<std::string> providers = {"cppkvp", "goodtest", "nosuch", ""};
        static const std::vector<std::string> names = {"cpp0", "good0", "cpp1", "fz0", "nosuch"};
        static const std::vector<std::string> files = {"test_cpp_kvp.so", "test_good_kvp.so", "test_wrong_abi.so",
                                                       "test_good_uvp.so", "test_no_entry.so", "test_entry_fails.so",
                                                       "not_a_module.so", "nosuch.so", ""};
        std::vector<std::string> addresses = rig_.addresses;
        addresses.insert(addresses.end(), {"", "10.255.255.1", "::1", "not-an-address", "1.2.3.4.5"});
        std::vector<std::string> netdevs = {"", "", "lo", "nosuch0"};
        int st = 0;
        switch (in.below(6)) {
            case 0:
            case 1: {
                krdma_attach_rnic q{};
                if (in.chance(60)) {  // put a planned RNIC back, correctly
                    const Planned &p = in.pick(rig_.plan);
                    std::snprintf(q.provider, sizeof q.provider, "%s", p.provider.c_str());
                    std::snprintf(q.name, sizeof q.name, "%s", p.name.c_str());
                    std::snprintf(q.address, sizeof q.address, "%s", p.address.c_str());
                } else {
                    text(in, q.provider, providers);
                    text(in, q.name, names);
                    text(in, q.netdev, netdevs);
                    text(in, q.address, addresses);
                    text(in, q.options, {"", "{}", "{\"mtu\": 1500}", "[", "{\"a\":"});
                }
                in.fill(&q.info, in.below(2) != 0 ? sizeof q.info : 0);
                st = send_request(KRDMA_CMD_ATTACH_RNIC, &q, sizeof q, in.chance(5) ? in.below(3) : 0);
                break;
            }
            case 2: {
                krdma_detach_rnic q{};
                text(in, q.name, names);
                st = send_request(KRDMA_CMD_DETACH_RNIC, &q, sizeof q, 0);
                break;
            }
            case 3:
            case 4: {
                krdma_load_module q{};
                text(in, q.file, files);
                if (std::strchr(q.file, '/') != nullptr || std::strstr(q.file, "..") != nullptr) q.file[0] = '\0';
                st = send_request(KRDMA_CMD_LOAD_MODULE, &q, sizeof q, 0);
                break;
            }
            default: {
                krdma_unload_module q{};
                text(in, q.provider, providers);
                st = send_request(KRDMA_CMD_UNLOAD_MODULE, &q, sizeof q, 0);
                break;
            }
        }
        if (st == RI_OK) stats_.admin_ok.fetch_add(1, std::memory_order_relaxed);
    }

    void listing(Input &in) {
        const uint32_t index = in.chance(80) ? in.below(6) : in.u32();
        switch (in.below(4)) {
            case 0: {
                krdma_list_rnics q{};
                q.index = index;
                CHECK(send_request(KRDMA_CMD_LIST_RNICS, &q, sizeof q, 0) == RI_OK, "LIST_RNICS failed");
                break;
            }
            case 1: {
                krdma_list_modules q{};
                q.index = index;
                CHECK(send_request(KRDMA_CMD_LIST_MODULES, &q, sizeof q, 0) == RI_OK, "LIST_MODULES failed");
                break;
            }
            case 2: {
                krdma_list_clients q{};
                q.index = index;
                CHECK(send_request(KRDMA_CMD_LIST_CLIENTS, &q, sizeof q, 0) == RI_OK, "LIST_CLIENTS failed");
                krdma_list_clients a;
                std::memcpy(&a, reply_.body.data(), sizeof a);
                CHECK(a.count <= 3, "%u contexts for 2 clients", a.count);
                if (index < a.count) {
                    CHECK(a.info.total <= kQuotaTotal && a.info.pinned_bytes <= kPinLimit,
                          "client %u holds %u objects and %llu pinned bytes, over its limits", a.info.client_id,
                          a.info.total, static_cast<unsigned long long>(a.info.pinned_bytes));
                }
                break;
            }
            default: {
                krdma_hello h{};
                h.abi_version = in.chance(90) ? KRDMA_ABI_VERSION : in.u32();
                if (send_request(KRDMA_CMD_HELLO, &h, sizeof h, 0) == RI_OK) {
                    // Major 1 taken, answered with the lower of the two minors, which this connection now speaks.
                    krdma_hello a;
                    std::memcpy(&a, reply_.body.data(), sizeof a);
                    const uint32_t minor = std::min<uint32_t>(KRDMA_ABI_MINOR_OF(h.abi_version), KRDMA_ABI_MINOR);
                    CHECK(KRDMA_ABI_MAJOR_OF(h.abi_version) == KRDMA_ABI_VERSION &&
                              a.abi_version == KRDMA_ABI_WORD(KRDMA_ABI_VERSION, minor),
                          "client %d: HELLO %#x answered with %#x", index_, h.abi_version, a.abi_version);
                    minor_ = minor;
                }
                break;
            }
        }
    }

    // A packet of any shape: exactly one reply, whatever it holds.
    void raw_packet(Input &in) {
        static const uint32_t cmds[] = {KRDMA_CMD_SYSCALL, KRDMA_CMD_ATTACH_RNIC, KRDMA_CMD_LOAD_MODULE,
                                        KRDMA_CMD_LIST_CLIENTS, KRDMA_CMD_ECHO, 0, _IOWR(KRDMA_IOC_MAGIC, 0x35, uint32_t)};
        krdma_msg_hdr hdr{};
        hdr.cmd = cmds[in.below(std::size(cmds))];
        std::vector<uint8_t> body(in.below(KRDMA_MAX_MESSAGE + 64));
        // A well-formed SYSCALL goes through the oracle (syscall_random), never here.
        if (hdr.cmd == KRDMA_CMD_SYSCALL && body.size() == sizeof(krdma_syscall)) body.push_back(0);
        in.fill(body.data(), std::min<size_t>(body.size(), 256));
        hdr.seq = ++seq_;
        int fds[3] = {spare_[0].get(), spare_[1].get(), spare_[2].get()};
        stats_.requests.fetch_add(1, std::memory_order_relaxed);
        raw_send(hdr, body.data(), body.size(), fds, in.chance(10) ? in.below(4) : 0);
        await_reply(hdr.seq, hdr.cmd, false);
        CHECK(reply_.hdr.seq == hdr.seq, "client %d: raw packet seq %u answered as %u", index_, hdr.seq, reply_.hdr.seq);
    }

    int index_;
    krdma::UniqueFd sock_;
    Shared &shared_;
    Stats &stats_;
    Rig &rig_;
    uint32_t seq_ = 0;
    uint32_t minor_ = 0;  // the protocol minor version of the connection (0 until a HELLO says otherwise)
    krdma::Message reply_;
    krdma_syscall answer_{};
    krdma::UniqueFd spare_[3];
    QueueMemory queues_;  // memory that registrations and queues name
    std::vector<Obj> live_;
    std::vector<uint64_t> stale_;
    bool pristine_ = false;  // the request being built has the right form (see odd())
};

Rig &rig() {
    static Rig r;
    return r;
}

std::unique_ptr<Client> connect_client(Rig &r, int index, Shared &shared, Stats &stats) {
    auto s = r.server->connect_local();
    CHECK(s, "connect_local failed");
    return std::make_unique<Client>(index, std::move(*s), shared, stats, r);
}

// One run: two clients, @p steps requests between them, then the clean-up checks.
void run(Input &in, long steps, bool threaded, Stats &stats) {
    Rig &r = rig();
    r.restore();
    const size_t fds_before = testutil::open_fds();
    {
        Shared shared;
        auto a = connect_client(r, 0, shared, stats);
        auto b = connect_client(r, 1, shared, stats);
        if (threaded) {
            // Two processes at once: each client its own thread and its own stream of choices.
            const uint64_t seed_b = in.u64();
            std::thread other([&] {
                Input in_b(seed_b);
                for (long i = 0; i < steps / 2; ++i) b->step(in_b);
            });
            for (long i = 0; i < steps - steps / 2; ++i) a->step(in);
            other.join();
        } else {
            for (long i = 0; i < steps && !in.exhausted(); ++i) (in.byte() & 1 ? b : a)->step(in);
        }
        a->drain();
        b->drain();
        // A valid call still works, from a fresh client too.
        a->valid_call();
        auto c = connect_client(r, 0, shared, stats);
        c->valid_call();
        c->drain();
    }
    r.check_clean();
    const size_t fds_after = testutil::open_fds();
    CHECK(fds_after == fds_before, "%zu descriptors open after the run, %zu before", fds_after, fds_before);
}

// What the inputs of a replay did in all (each input runs with its own Stats).
struct Totals {
    uint64_t requests = 0, ok = 0, created = 0, destroyed = 0, admin_ok = 0;
} g_totals;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet = [] {
        rdma::log::set_level(rdma::log::Level::error);
        return true;
    }();
    (void)quiet;
    Stats stats;
    Input in(data, size);
    run(in, 200, false, stats);
    g_totals.requests += stats.requests.load();
    g_totals.ok += stats.ok.load();
    g_totals.created += stats.created.load();
    g_totals.destroyed += stats.destroyed.load();
    g_totals.admin_ok += stats.admin_ok.load();
    return 0;
}

#ifndef OPENRDMA_LIBFUZZER
// Seeded driver: kal_syscall_fuzz [REQUESTS [SEED]]; or kal_syscall_fuzz PATH... replays saved inputs (files, or
// directories of them such as tests/fuzz/corpus/kal) as libFuzzer would run them.
int main(int argc, char **argv) {
    if (fuzz_replay::wanted(argc, argv)) {
        const int rc = fuzz_replay::run(argc, argv, "kal_syscall_fuzz",
                                        [](const uint8_t *d, size_t n) { LLVMFuzzerTestOneInput(d, n); });
        if (rc != 0) return rc;
        const Totals &t = g_totals;
        std::printf("kal_syscall_fuzz: replay: %llu requests, %llu syscalls succeeded (%llu objects created, %llu "
                    "destroyed), %llu administration commands succeeded; every request answered once, no forged "
                    "handle accepted, nothing left behind\n",
                    static_cast<unsigned long long>(t.requests), static_cast<unsigned long long>(t.ok),
                    static_cast<unsigned long long>(t.created), static_cast<unsigned long long>(t.destroyed),
                    static_cast<unsigned long long>(t.admin_ok));
        // The corpus must still get past the decoder and the handle checks: calls that succeed, objects created and
        // destroyed through them, administration commands served.
        int shallow = 0;
        shallow += fuzz_replay::reached("kal_syscall_fuzz", static_cast<long>(t.created), "an object created") ? 0 : 1;
        shallow += fuzz_replay::reached("kal_syscall_fuzz", static_cast<long>(t.destroyed), "an object destroyed") ? 0 : 1;
        shallow += fuzz_replay::reached("kal_syscall_fuzz", static_cast<long>(t.admin_ok), "an administration command")
                       ? 0
                       : 1;
        return shallow == 0 ? 0 : 1;
    }
    const long requests = argc > 1 ? std::atol(argv[1]) : 20000;
    const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 2024;
    rdma::log::set_level(rdma::log::Level::error);
    Stats stats;
    Input in(seed);
    const auto start = std::chrono::steady_clock::now();
    g_server_thread = true;  // two client threads: the server gets a thread of its own
    run(in, requests, true, stats);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("syscall_fuzz: %llu requests (seed %llu) in %.1f s: %llu syscalls succeeded (%llu objects created, %llu "
                "destroyed), %llu random syscalls, %llu administration commands succeeded, %llu events; every request "
                "answered once, no forged handle accepted, nothing left behind\n",
                static_cast<unsigned long long>(stats.requests.load()), static_cast<unsigned long long>(seed), secs,
                static_cast<unsigned long long>(stats.ok.load()), static_cast<unsigned long long>(stats.created.load()),
                static_cast<unsigned long long>(stats.destroyed.load()), static_cast<unsigned long long>(stats.raw.load()),
                static_cast<unsigned long long>(stats.admin_ok.load()), static_cast<unsigned long long>(stats.events.load()));
    return 0;
}
#endif
