// The hwstub kVP: the privileged half of the emulated offload RNIC, loaded by the kAL. Per attached instance it
// runs the adapter (one offload engine thread) and keeps what a chip's driver keeps: the QP numbers, the STag table
// the engine checks, the CQ and QP memory (memfds it maps itself and hands to the uVP), one engine page and doorbell
// per open. At the RDMA-mode transition the kAL gives it the socket (RI_MODULE_OFFLOAD) and the engine runs the
// stream. Interrupts and asynchronous events go through the handlers the kAL set: the kAL's completion and
// asynchronous event handler paths (OpenRDMA's CEH and AEH). Consumers hosted in the kAL itself use the same
// queues through the plain verbs (common/host_queues.hpp), as the uVP does in a consumer's process.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "host_queues.hpp"
#include "hwstub_abi.h"
#include "offload_engine.hpp"
#include "rnicpi/cpp/event_handlers.hpp"
#include "rnicpi/cpp/provider.hpp"
#include "rnicpi/cpp/syscall_reply.hpp"
#include "rnicpi/cpp/status.hpp"

namespace hwstub::kvp {
namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Kvp;
const ri_host_ops_t &host() { return rdma::provider::Module<Kvp>::host(); }

void say(uint32_t level, const std::string &text) {
    if (host().log != nullptr) host().log(level, HWSTUB_PROVIDER_NAME, text.c_str());
}

using Reply = rdma::provider::SyscallReply<Kvp>;

uint32_t pow2_at_least(uint32_t n) {
    uint32_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

// Memory the adapter and a consumer share: a memfd mapped here; the consumer maps its descriptor.
class SharedBlock {
public:
    SharedBlock() = default;
    SharedBlock(const SharedBlock &) = delete;
    SharedBlock &operator=(const SharedBlock &) = delete;
    ~SharedBlock() {
        if (base_ != nullptr) ::munmap(base_, size_);
        if (fd_ >= 0) ::close(fd_);
    }
    [[nodiscard]] ri_status_t make(const char *name, size_t size) {
        size_ = (size + 4095) & ~size_t{4095};
        fd_ = ::memfd_create(name, MFD_CLOEXEC);
        if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) return RI_ENOMEM;
        void *p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) return RI_ENOMEM;
        base_ = static_cast<uint8_t *>(p);
        return RI_OK;
    }
    [[nodiscard]] uint8_t *data() const noexcept { return base_; }
    [[nodiscard]] size_t size() const noexcept { return size_; }
    [[nodiscard]] int fd() const noexcept { return fd_; }
    // Exchanges the blocks (a resized CQ's new memory takes the old one's place).
    void swap(SharedBlock &o) noexcept {
        std::swap(base_, o.base_);
        std::swap(size_, o.size_);
        std::swap(fd_, o.fd_);
    }

private:
    uint8_t *base_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
};

// Attach options: the instance's limits (hwstub's "adapter" has fixed resources, as a chip does).
struct Limits {
    uint32_t max_qp = 1024;
    uint32_t max_qp_wr = 4096;
    uint32_t max_cq = 1024;
    uint32_t max_cqe = 65536;
    uint32_t max_pd = 1024;
    uint32_t max_srq = 1024;
    uint32_t max_mr = 65536;
    uint32_t max_inline = 256;
    uint32_t max_ird = 16;
    uint32_t max_ord = 16;
    uint32_t max_fast_reg_pages = 256;  // pages one fast registration maps (1 MiB)
    // The tunables (kTunableKeys) from here to moderation_us: after attach, read and changed (control) under
    // Instance::mutex.
    uint32_t engines = 1;  // offload engine threads; each RNIC open is served by one of them
    uint32_t poll_us = 0;  // how long an engine keeps looking after its last work before it sleeps
    // Interrupt moderation of a busy engine: an earned interrupt waits for this many unread CQEs (0 or 1: none)...
    uint32_t moderation_cqes = 8;
    uint32_t moderation_us = 100;  // ...or this long at most
    uint64_t max_mr_size = 1ull << 40;
};
constexpr uint32_t kMaxSge = 8;
constexpr uint32_t kMaxEngines = 16;

// The verbs a fault can make fail, as an adapter's firmware command would.
constexpr const char *kFailableVerbs[] = {"open_rnic", "alloc_pd", "create_cq", "create_qp", "modify_qp",
                                          "register_mr"};

// "A verb that fails": the next `count` calls of `verb` answer RI_EIO.
struct VerbFault {
    std::mutex mutex;
    std::string verb;
    uint32_t count = 0;

    // RI_EIO when the fault fires for @p name, else RI_OK.
    ri_status_t fire(const char *name) {
        std::lock_guard g(mutex);
        if (count == 0 || verb != name) return RI_OK;
        --count;
        return RI_EIO;
    }
};

// One change of faults, from the `faults` option or a control request, checked whole before any of it applies.
struct FaultChange {
    bool clear = false;
    std::vector<std::pair<std::atomic<uint32_t> FaultPlan::*, uint32_t>> counts;  // FaultPlan fields to set
    std::optional<std::string> fail_verb;
    uint32_t fail_count = 1;
    bool fatal = false;
};

rdma::Expected<FaultChange> parse_faults(const nlohmann::json &j, bool at_run_time) {
    FaultChange c;
    if (j.is_string() && j.get<std::string>() == "clear") {
        c.clear = true;
        return c;
    }
    if (!j.is_object()) return rdma::Error(RI_EINVAL, "hwstub faults must be an object, or \"clear\"");
    // The counted faults by name, each the FaultPlan field it sets (fail_count: none, it goes with fail_verb).
    using Field = std::atomic<uint32_t> FaultPlan::*;
    static const std::map<std::string, Field> kCounts = {
        {"qp", &FaultPlan::qp},           {"rx_corrupt", &FaultPlan::rx_corrupt},
        {"tx_corrupt", &FaultPlan::tx_corrupt}, {"tx_drop", &FaultPlan::tx_drop},
        {"tx_delay_ms", &FaultPlan::tx_delay_ms}, {"cq_overflow", &FaultPlan::cq_overflow},
        {"fail_count", nullptr}};
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string &k = it.key();
        const nlohmann::json &v = it.value();
        if (auto field = kCounts.find(k); field != kCounts.end()) {
            if (!v.is_number_unsigned() || v.get<uint64_t>() > 1'000'000) {
                return rdma::Error(RI_EINVAL, "hwstub fault '" + k + "' must be a number from 0 to 1000000");
            }
            if (field->second == nullptr) {
                c.fail_count = v.get<uint32_t>();
            } else {
                c.counts.emplace_back(field->second, v.get<uint32_t>());
            }
        } else if (k == "fail_verb") {
            const std::string verb = v.is_string() ? v.get<std::string>() : "";
            bool known = verb.empty() && v.is_string();  // "" cancels
            for (const char *name : kFailableVerbs) known |= verb == name;
            if (!known) {
                return rdma::Error(RI_EINVAL, "hwstub fault 'fail_verb' must name one of open_rnic, alloc_pd, "
                                              "create_cq, create_qp, modify_qp, register_mr");
            }
            c.fail_verb = verb;
        } else if (k == "fatal") {
            if (!at_run_time) {
                return rdma::Error(RI_EINVAL, "hwstub fault 'fatal' is for run time only (rdmactl inject NAME fatal)");
            }
            if (!v.is_boolean()) return rdma::Error(RI_EINVAL, "hwstub fault 'fatal' must be true or false");
            c.fatal = v.get<bool>();
        } else {
            return rdma::Error(RI_EINVAL, "hwstub fault '" + k +
                                              "' is unknown (known: qp, rx_corrupt, tx_corrupt, tx_drop, "
                                              "tx_delay_ms, cq_overflow, fail_verb, fail_count, fatal)");
        }
    }
    return c;
}

// The options an engine reads at run time (its tunables), with the help `rdmactl show -v` prints. The limits
// above are Query RNIC's (rdmactl show lists them there) and fixed at attach, as a chip's resources are.
struct TunableKey {
    const char *key;
    uint32_t Limits::*field;
    uint32_t least;  // 0 is a value of some: no poll window, no moderation
    uint32_t most;
    bool settable;   // a control request changes it at run time
    const char *help;
};
constexpr TunableKey kTunableKeys[] = {
    {"engines", &Limits::engines, 1, kMaxEngines, false,
     "offload engine threads; each RNIC open is served by one, round robin (attach only). Default 1"},
    {"poll_us", &Limits::poll_us, 0, 100000, true,
     "microseconds an engine keeps looking at its queues after its last work before it sleeps (a CPU while it "
     "looks); 0: it sleeps at once. Default 0"},
    {"moderation_cqes", &Limits::moderation_cqes, 0, 1u << 20, true,
     "interrupt moderation of a busy engine: unread completions an earned interrupt waits for; 0 or 1: none. "
     "Default 8"},
    {"moderation_us", &Limits::moderation_us, 0, 100000, true,
     "interrupt moderation of a busy engine: microseconds an earned interrupt waits at most. Default 100"},
};

// The tunable named @p key, or nullptr.
const TunableKey *tunable_key(const std::string &key) {
    for (const TunableKey &t : kTunableKeys) {
        if (key == t.key) return &t;
    }
    return nullptr;
}

// Sets tunable @p t of @p l to @p v when it is in range.
rdma::Expected<void> set_tunable(const TunableKey &t, const nlohmann::json &v, Limits &l) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > t.most) {
        return rdma::Error(RI_EINVAL, std::string("hwstub option '") + t.key + "' must be at most " +
                                          std::to_string(t.most));
    }
    if (!v.is_number_unsigned() || v.get<uint64_t>() < t.least) {
        return rdma::Error(RI_EINVAL, std::string("hwstub option '") + t.key + "' must be a number from " +
                                          std::to_string(t.least) + " to " + std::to_string(t.most));
    }
    l.*t.field = v.get<uint32_t>();
    return {};
}

// What `rdmactl control <rnic> '{}'` says of the option a control request may change too.
constexpr const char *kSameHostHelp =
    "two QPs of this stack on one host whose connection the kAL holds both ends of move their bytes over a "
    "shared-memory channel, which the offload engine reads and writes instead of TCP; false: always TCP. New "
    "connections follow a change. Default true";

// Everything an instance's options set.
struct Options {
    Limits limits;
    FaultChange faults;
    bool same_host = true;  // RI_CAP_SAME_HOST: the engine takes a same-host channel
};

rdma::Expected<Options> parse_options(const char *text) {
    Options o;
    Limits &l = o.limits;
    if (text == nullptr || *text == '\0') return o;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return rdma::Error(RI_EINVAL, "hwstub options must be a JSON object, e.g. {\"max_qp\": 64}");
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string &k = it.key();
        if (k == "faults") {
            auto f = parse_faults(it.value(), false);
            if (!f) return f.error();
            o.faults = std::move(*f);
            continue;
        }
        if (k == "same_host") {
            if (!it.value().is_boolean()) return rdma::Error(RI_EINVAL, "hwstub option 'same_host' must be true or false");
            o.same_host = it.value().get<bool>();
            continue;
        }
        if (const TunableKey *t = tunable_key(k)) {
            if (auto r = set_tunable(*t, it.value(), l); !r) return r.error();
            continue;
        }
        uint32_t *field = k == "max_qp"       ? &l.max_qp
                          : k == "max_qp_wr"  ? &l.max_qp_wr
                          : k == "max_cq"     ? &l.max_cq
                          : k == "max_cqe"    ? &l.max_cqe
                          : k == "max_pd"     ? &l.max_pd
                          : k == "max_srq"    ? &l.max_srq
                          : k == "max_mr"     ? &l.max_mr
                          : k == "max_inline" ? &l.max_inline
                          : k == "max_ird"    ? &l.max_ird
                          : k == "max_ord"    ? &l.max_ord
                          : k == "max_fast_reg_pages" ? &l.max_fast_reg_pages
                                              : nullptr;
        if (field == nullptr) {
            return rdma::Error(RI_EINVAL, "hwstub option '" + k +
                                              "' is unknown (known: max_qp, max_qp_wr, max_cq, max_cqe, max_pd, max_srq, "
                                              "max_mr, max_inline, max_ird, max_ord, max_fast_reg_pages, engines, poll_us, "
                                              "moderation_cqes, moderation_us, same_host, faults)");
        }
        if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() < 1 ||
            it.value().get<uint64_t>() > (1u << 20)) {
            return rdma::Error(RI_EINVAL, "hwstub option '" + k + "' must be a number from 1 to 1048576");
        }
        *field = it.value().get<uint32_t>();
    }
    if (l.max_inline > 1024) return rdma::Error(RI_EINVAL, "hwstub option 'max_inline' must be at most 1024");
    return o;
}

struct Instance;

// The events of the instance's engine go to the open that owns the CQ or QP named.
struct Routes {
    std::mutex mutex;
    struct CqRoute {
        rdma::provider::EventHandlers *handlers = nullptr;
        ri_rnic_t rnic = nullptr;
        ri_cq_t cq = nullptr;
        uint32_t ceh_id = 0;
    };
    struct QpRoute {
        rdma::provider::EventHandlers *handlers = nullptr;
        ri_rnic_t rnic = nullptr;
    };
    std::map<uint32_t, CqRoute> cqs;
    std::map<uint32_t, QpRoute> qps;
    std::map<uint32_t, QpRoute> srqs;  // an SRQ's events go to its open
    std::set<std::pair<rdma::provider::EventHandlers *, ri_rnic_t>> opens;
};

// One attached RNIC: its adapter (the engine thread), the namespaces shared by every open in every process.
struct Instance {
    std::string name;
    std::string netdev;
    Limits limits;
    std::atomic<bool> same_host{true};  // the `same_host` option: RI_CAP_SAME_HOST in the attributes
    Routes routes;
    // The adapter: its processors (one thread each, with the page each owns), the STag table and the fault plan
    // they share. Each open is served by one engine, so its CQs and QPs never cross engines.
    StagTable stags;
    FaultPlan faults;
    std::mutex atomics;  // the engines' RFC 7306 atomics on host memory, one at a time (OffloadEngine)
    std::vector<std::unique_ptr<hwstub_engine_page>> pages;
    std::vector<std::unique_ptr<OffloadEngine>> engines;
    uint32_t next_engine = 0;
    std::mutex mutex;
    std::set<uint32_t> qp_nums;
    uint32_t next_qp = 1;
    uint32_t next_cq = 1;
    uint32_t next_pd = 1;
    uint32_t next_srq = 1;
    uint32_t next_stag_index = 1;
    uint32_t counts[6]{};  // pd, cq, qp, mr, open, srq
    VerbFault verb_fault;

    // The engine for a new open: round robin.
    OffloadEngine &pick_engine() {
        std::lock_guard g(mutex);
        return *engines[next_engine++ % engines.size()];
    }

    // Applies a checked change of faults (the engine's fire as its thread meets them; a verb's at its next call).
    void apply(const FaultChange &c) {
        FaultPlan &plan = faults;
        if (c.clear) {
            plan.clear();
            std::lock_guard g(verb_fault.mutex);
            verb_fault.count = 0;
            verb_fault.verb.clear();
        }
        for (const auto &[field, value] : c.counts) (plan.*field).store(value, std::memory_order_relaxed);
        if (c.fail_verb) {
            std::lock_guard g(verb_fault.mutex);
            verb_fault.verb = *c.fail_verb;
            verb_fault.count = c.fail_verb->empty() ? 0 : c.fail_count;
        }
        if (c.fatal) {
            say(RI_LOG_WARN, "instance " + name + ": injected catastrophic adapter error");
            for (auto &e : engines) e->fail();  // the adapter fails whole
        }
        for (auto &e : engines) e->kick();  // a delay that ended, or a dead engine, is news to a sleeping engine
    }

    // What `rdmactl inject` and `rdmactl control` show: the faults not yet fired and the adapter's state.
    nlohmann::json state() {
        FaultPlan &plan = faults;
        nlohmann::json f = {{"qp", plan.qp.load()},
                            {"rx_corrupt", plan.rx_corrupt.load()},
                            {"tx_corrupt", plan.tx_corrupt.load()},
                            {"tx_drop", plan.tx_drop.load()},
                            {"tx_delay_ms", plan.tx_delay_ms.load()},
                            {"cq_overflow", plan.cq_overflow.load()}};
        {
            std::lock_guard g(verb_fault.mutex);
            f["fail_verb"] = verb_fault.count != 0 ? verb_fault.verb : "";
            f["fail_count"] = verb_fault.count;
        }
        // The adapter's counters are its engines' together.
        bool dead = false;
        uint64_t fired = 0, wqes = 0, cqes = 0, interrupts = 0, sleeps = 0, tx = 0, rx = 0;
        std::string why;
        for (const auto &oe : engines) {
            const EngineStats &st = oe->stats();
            dead |= oe->dead();
            fired += st.faults.load();
            wqes += st.wqes.load();
            cqes += st.cqes.load();
            interrupts += st.interrupts.load();
            sleeps += st.sleeps.load();
            tx += st.tx_bytes.load();
            rx += st.rx_bytes.load();
            if (why.empty()) why = oe->failure();
        }
        nlohmann::json e = {{"engines", engines.size()}, {"dead", dead},  {"faults_fired", fired},
                            {"wqes", wqes},              {"cqes", cqes},  {"interrupts", interrupts},
                            {"sleeps", sleeps},          {"tx_bytes", tx}, {"rx_bytes", rx}};
        if (!why.empty()) e["failure"] = why;
        return {{"rnic", name}, {"faults", f}, {"engine", e}, {"tunables", tunables_json()}};
    }

    // The tunables now, each with its value, whether control changes it, and its help (RNIC-PI control's
    // "tunables").
    nlohmann::json tunables_json() {
        std::lock_guard g(mutex);
        nlohmann::json all = nlohmann::json::object();
        for (const TunableKey &t : kTunableKeys) {
            all[t.key] = {{"value", limits.*t.field}, {"settable", t.settable}, {"help", t.help}};
        }
        all["same_host"] = {{"value", same_host.load(std::memory_order_relaxed)}, {"settable", true},
                            {"help", kSameHostHelp}};
        return all;
    }

    // Applies checked tunables @p next (a control request's) to the instance and its engines.
    void retune(const Limits &next) {
        std::lock_guard g(mutex);
        limits.poll_us = next.poll_us;
        limits.moderation_cqes = next.moderation_cqes;
        limits.moderation_us = next.moderation_us;
        for (auto &e : engines) {
            e->set_poll_window(std::chrono::microseconds(limits.poll_us));
            e->set_moderation(limits.moderation_cqes, std::chrono::microseconds(limits.moderation_us));
            e->kick();  // an engine asleep in a longer window hears of the new one now
        }
    }

    void interrupt(uint32_t cq_id) {
        Routes::CqRoute r;
        {
            std::lock_guard g(routes.mutex);
            auto it = routes.cqs.find(cq_id);
            if (it == routes.cqs.end()) return;
            r = it->second;
        }
        const auto h = r.handlers->ceh(r.ceh_id);
        if (h.fn != nullptr) h.fn(h.ctx, r.rnic, r.cq);
    }
    void async_event(const ri_async_event_t &e) {
        std::vector<Routes::QpRoute> to;
        {
            std::lock_guard g(routes.mutex);
            if (e.resource_type == RI_RES_QP) {
                auto it = routes.qps.find(static_cast<uint32_t>(e.resource_id));
                if (it != routes.qps.end()) to.push_back(it->second);
            } else if (e.resource_type == RI_RES_CQ) {
                auto it = routes.cqs.find(static_cast<uint32_t>(e.resource_id));
                if (it != routes.cqs.end()) to.push_back(Routes::QpRoute{it->second.handlers, it->second.rnic});
            } else if (e.resource_type == RI_RES_SRQ) {
                auto it = routes.srqs.find(static_cast<uint32_t>(e.resource_id));
                if (it != routes.srqs.end()) to.push_back(it->second);
            } else {
                for (const auto &[handlers, rnic] : routes.opens) to.push_back(Routes::QpRoute{handlers, rnic});
            }
        }
        for (const auto &r : to) {
            const auto h = r.handlers->aeh();
            if (h.fn != nullptr) h.fn(h.ctx, r.rnic, &e);
        }
    }
    ri_status_t charge(size_t kind, uint32_t limit) {
        std::lock_guard g(mutex);
        if (counts[kind] >= limit) return RI_ENOSPC;
        ++counts[kind];
        return RI_OK;
    }
    void uncharge(size_t kind) {
        std::lock_guard g(mutex);
        --counts[kind];
    }
    uint32_t alloc_qp_num() {
        std::lock_guard g(mutex);
        for (uint32_t i = 0; i < limits.max_qp; ++i) {
            const uint32_t n = next_qp;
            next_qp = next_qp + 1 >= limits.max_qp ? 1 : next_qp + 1;
            if (qp_nums.insert(n).second) return n;
        }
        return 0;
    }
    void free_qp_num(uint32_t n) {
        std::lock_guard g(mutex);
        qp_nums.erase(n);
    }
    // A fresh STag: a 24-bit index and an 8-bit key that varies, so a stale STag rarely names a new region.
    ri_stag_t alloc_stag() {
        std::lock_guard g(mutex);
        const uint32_t index = next_stag_index++ & 0xffffffu;
        if (next_stag_index > 0xffffffu) next_stag_index = 1;
        return index << 8 | ((index * 37u + 0x5au) & 0xffu);
    }
    // Takes @p stag (a region's or a window's) out of the adapter's table; once this returns no engine moves data
    // with it any more, so the memory it named may go.
    void forget_stag(ri_stag_t stag) {
        stags.remove(stag);
        for (auto &e : engines) e->quiesce();
    }
    uint32_t next_id(uint32_t &counter) {
        std::lock_guard g(mutex);
        return counter++;
    }
};

enum Kind : size_t { kPd = 0, kCq = 1, kQp = 2, kMr = 3, kOpen = 4, kSrq = 5 };

constexpr uint32_t kAccessKnown = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                  RI_ACCESS_REMOTE_WRITE | RI_ACCESS_MW_BIND | RI_ACCESS_ZERO_BASED |
                                  RI_ACCESS_REMOTE_ATOMIC;

struct Kvp {
    static constexpr ri_mode_t mode = RI_MODE_PRIVILEGED;
    static constexpr uint32_t flags = RI_MODULE_OFFLOAD;
    static constexpr const char *name = HWSTUB_PROVIDER_NAME;
    static constexpr uint32_t private_abi_version = HWSTUB_ABI_VERSION;  // of hwstub_abi.h's blocks
    static constexpr const char *vendor = HWSTUB_VENDOR;
    static constexpr const char *version = "1.0";
    static constexpr const char *uvp_library = "hwstub_uvp.so";

    struct Srq;
    struct Mw;
    struct Pd;
    struct Cq;
    struct Qp;
    struct Mr;

    static ri_status_t attach(const ri_attach_params_t *params, ri_instance_t *out) {
        if (params == nullptr || out == nullptr) return RI_EINVAL;
        auto options = parse_options(params->options);
        if (!options) {
            say(RI_LOG_ERROR, options.error().message());
            return options.error().code();
        }
        auto inst = std::make_unique<Instance>();
        inst->name.assign(params->name, strnlen(params->name, sizeof params->name));
        inst->netdev.assign(params->netdev, strnlen(params->netdev, sizeof params->netdev));
        inst->limits = options->limits;
        inst->same_host.store(options->same_host, std::memory_order_relaxed);
        Instance *raw = inst.get();
        EngineHooks hooks;
        hooks.interrupt = [raw](uint32_t cq) { raw->interrupt(cq); };
        hooks.async_event = [raw](const ri_async_event_t &e) { raw->async_event(e); };
        for (uint32_t i = 0; i < inst->limits.engines; ++i) {
            inst->pages.push_back(std::make_unique<hwstub_engine_page>());
            inst->engines.push_back(std::make_unique<OffloadEngine>(inst->pages.back().get(), hooks, &inst->stags,
                                                                    &inst->faults, "hwstub-oe" + std::to_string(i),
                                                                    &inst->atomics));
            inst->engines.back()->set_poll_window(std::chrono::microseconds(inst->limits.poll_us));
            inst->engines.back()->set_moderation(inst->limits.moderation_cqes,
                                                  std::chrono::microseconds(inst->limits.moderation_us));
            if (!inst->engines.back()->start()) return RI_ENOMEM;
        }
        inst->apply(options->faults);
        say(RI_LOG_INFO, "instance " + inst->name + " attached: " + std::to_string(inst->engines.size()) +
                             " offload engine thread(s)");
        *out = to_handle<ri_instance_t>(inst.release());
        return RI_OK;
    }
    // Run-time administration: {"faults": {...} | "clear"} changes the faults, {"poll_us": N, "moderation_cqes":
    // N, "moderation_us": N} the engines' tunables (a request with one bad part changes nothing); any request
    // answers the state.
    static ri_status_t control(ri_instance_t instance, const char *request, char *reply, size_t reply_size) {
        auto *inst = from_handle<Instance>(instance);
        if (inst == nullptr || request == nullptr || reply == nullptr || reply_size == 0) return RI_EINVAL;
        auto answer = [&](const std::string &text) {
            std::snprintf(reply, reply_size, "%s", text.c_str());
        };
        const nlohmann::json j = nlohmann::json::parse(request, nullptr, false);
        if (!j.is_object()) {
            answer("the request must be a JSON object, e.g. {\"faults\": {\"rx_corrupt\": 1}}");
            return RI_EINVAL;
        }
        Limits next;
        {
            std::lock_guard g(inst->mutex);
            next = inst->limits;
        }
        bool retune = false;
        for (auto it = j.begin(); it != j.end(); ++it) {
            const TunableKey *t = tunable_key(it.key());
            if (t != nullptr && t->settable) {
                if (auto r = set_tunable(*t, it.value(), next); !r) {
                    answer(r.error().message());
                    return r.error().code();
                }
                retune = true;
            } else if (it.key() == "same_host") {
                if (!it.value().is_boolean()) {
                    answer("hwstub option same_host must be true or false");
                    return RI_EINVAL;
                }
            } else if (it.key() != "faults") {
                answer("'" + it.key() + "' is not a hwstub control request (known: faults, poll_us, "
                                        "moderation_cqes, moderation_us, same_host)");
                return RI_EINVAL;
            }
        }
        std::optional<FaultChange> change;
        if (j.contains("faults")) {
            auto c = parse_faults(j["faults"], true);
            if (!c) {
                answer(c.error().message());
                return c.error().code();
            }
            change = std::move(*c);
        }
        if (retune) {
            inst->retune(next);
            say(RI_LOG_INFO, "instance " + inst->name + ": control " + request);
        }
        if (change) {
            inst->apply(*change);
            say(RI_LOG_INFO, "instance " + inst->name + ": faults " + j["faults"].dump());
        }
        if (j.contains("same_host")) {
            inst->same_host.store(j["same_host"].get<bool>(), std::memory_order_relaxed);
            say(RI_LOG_INFO, "instance " + inst->name + ": same_host " + j["same_host"].dump());
        }
        answer(inst->state().dump());
        return RI_OK;
    }
    static ri_status_t detach(ri_instance_t instance) {
        auto *inst = from_handle<Instance>(instance);
        if (inst == nullptr) return RI_EINVAL;
        for (auto &e : inst->engines) e->stop();
        delete inst;
        return RI_OK;
    }

    struct Rnic {
        Instance *inst = nullptr;
        void *host_ctx = nullptr;
        pid_t owner = 0;
        rdma::provider::EventHandlers handlers;
        SharedBlock page;  // this open's engine page
        OffloadEngine *engine;  // the one that serves this open's CQs and QPs
        // Consumers hosted here (the plain verbs) poll and post through the host side of the queues.
        QpContexts contexts;
        explicit Rnic(Instance *i) : inst(i), engine(&i->pick_engine()), contexts(i->limits.max_qp) {}
        ~Rnic() {
            engine->remove_page(reinterpret_cast<hwstub_engine_page *>(page.data()));
            {
                std::lock_guard g(inst->routes.mutex);
                inst->routes.opens.erase({&handlers, to_handle<ri_rnic_t>(this)});
            }
            inst->uncharge(kOpen);
        }
        [[nodiscard]] hwstub_engine_page *engine_page() const {
            return reinterpret_cast<hwstub_engine_page *>(page.data());
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t close() { return RI_OK; }
        ri_status_t query(ri_rnic_attr_t *a) {
            *a = ri_rnic_attr_t{};
            std::snprintf(a->name, sizeof a->name, "%s", inst->name.c_str());
            std::snprintf(a->netdev, sizeof a->netdev, "%s", inst->netdev.c_str());
            a->vendor_id = 0x0;
            a->vendor_part_id = 0x4857;  // "HW"
            a->hw_version = HWSTUB_HW_MAJOR;
            a->caps = RI_CAP_ZERO_BASED | RI_CAP_SEND_INV | RI_CAP_MPA_CRC | RI_CAP_MPA_MARKERS |
                      RI_CAP_MPA_PEER2PEER | RI_CAP_RESIZE_CQ | RI_CAP_MW_TYPE2 | RI_CAP_ATOMICS | RI_CAP_IMMEDIATE |
                      RI_CAP_SRQ | RI_CAP_FAST_REG;
            if (inst->same_host.load(std::memory_order_relaxed)) a->caps |= RI_CAP_SAME_HOST;
            a->fw_version = HWSTUB_HW_VERSION;
            const Limits &l = inst->limits;
            a->max_mr_size = l.max_mr_size;
            a->page_size_cap = 4096;
            a->max_qp = l.max_qp - 1;
            a->max_qp_wr = l.max_qp_wr;
            a->max_sge = kMaxSge;
            a->max_sge_rd = kMaxSge;
            a->max_inline = l.max_inline;
            a->max_cq = l.max_cq;
            a->max_cqe = l.max_cqe;
            a->max_pd = l.max_pd;
            a->max_srq = l.max_srq;
            a->max_srq_wr = l.max_qp_wr;
            a->max_srq_sge = kMaxSge;
            a->max_fast_reg_pages = l.max_fast_reg_pages;
            a->max_mr = l.max_mr;
            a->max_mw = l.max_mr;  // one STag namespace, one limit
            a->max_ird = l.max_ird;
            a->max_ord = l.max_ord;
            a->max_ceh = rdma::provider::EventHandlers::kMaxCeh;
            a->max_private_data = 508;  // MPA carries 512 bytes; RFC 6581 (revision 2) takes 4 for IRD and ORD
            return RI_OK;
        }
        ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) { return handlers.set_aeh(fn, ctx, id); }
        ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) { return handlers.set_ceh(fn, ctx, id); }
        ri_status_t clear_handler(uint32_t id) { return handlers.clear(id); }
        ri_status_t alloc_pd(ri_pd_t *pd);
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq);
    };

    struct Pd {
        Rnic *rnic = nullptr;
        uint32_t id = 0;
        ~Pd() { rnic->inst->uncharge(kPd); }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t dealloc() { return RI_OK; }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *qp);
        ri_status_t create_srq(ri_srq_attr_t *attr, ri_srq_t *srq);
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_stag(uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_mw(uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    };

    // A shared receive queue: a ring in memory the adapter and the consumer share, read by the adapter when a
    // message of one of its QPs needs a receive (hwstub_hw.h).
    struct Srq {
        Pd *pd = nullptr;
        uint32_t id = 0;
        std::mutex mutex;
        ri_srq_attr_t attr{};
        SharedBlock memory;
        std::unique_ptr<HostSrq> host_side;  // a consumer hosted here posts through it
        ~Srq() {
            if (id != 0) {
                {
                    std::lock_guard g(pd->rnic->inst->routes.mutex);
                    pd->rnic->inst->routes.srqs.erase(id);
                }
                (void)pd->rnic->engine->remove_srq(id);
            }
            pd->rnic->inst->uncharge(kSrq);
        }
        // Refused while a QP takes from it: the adapter would read a ring that is gone.
        ri_status_t destroy() {
            if (id != 0 && pd->rnic->engine->remove_srq(id) == RI_EBUSY) return RI_EBUSY;
            return RI_OK;  // the destructor forgets its route
        }
        ri_status_t query(ri_srq_attr_t *out) {
            std::lock_guard g(mutex);
            *out = attr;
            return RI_OK;
        }
        ri_status_t modify(const ri_srq_attr_t *in, uint32_t mask) {
            if (in == nullptr || (mask & ~(RI_SRQ_ATTR_MAX_WR | RI_SRQ_ATTR_LIMIT)) != 0) return RI_EINVAL;
            // The ring is fixed at create, as on most adapters.
            if ((mask & RI_SRQ_ATTR_MAX_WR) != 0) return RI_EOPNOTSUPP;
            std::lock_guard g(mutex);
            if ((mask & RI_SRQ_ATTR_LIMIT) != 0) {
                if (in->limit > attr.max_wr) return RI_ERANGE;
                if (ri_status_t rc = pd->rnic->engine->set_srq_limit(id, in->limit); rc != RI_OK) return rc;
                attr.limit = in->limit;
            }
            return RI_OK;
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            return host_side->post_recv(wr, count, posted);
        }
    };

    struct Cq {
        Rnic *rnic = nullptr;
        uint32_t id = 0;
        ri_cq_attr_t attr{};
        SharedBlock memory;
        std::unique_ptr<HostCq> host_side;
        ~Cq() {
            if (id != 0) {
                {
                    std::lock_guard g(rnic->inst->routes.mutex);
                    rnic->inst->routes.cqs.erase(id);
                }
                (void)rnic->engine->remove_cq(id);
            }
            rnic->inst->uncharge(kCq);
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t destroy() { return RI_OK; }
        ri_status_t query(ri_cq_attr_t *out) {
            *out = attr;
            return RI_OK;
        }
        // Resize CQ of a consumer hosted here; a uVP's comes as RI_RESIZE_CQ with its private block (and takes the
        // new memory's descriptor).
        ri_status_t resize(uint32_t cqe, uint32_t *actual) { return move(cqe, actual, nullptr); }
        // New memory for @p cqe CQEs, to which the adapter moves the CQ; with @p fd, a duplicate of its descriptor
        // made first (nothing changes when none can be made).
        ri_status_t move(uint32_t cqe, uint32_t *actual, int *fd);
        // A consumer with a uVP polls in its process; a consumer hosted here polls here.
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) { return host_side->poll(max, wc, polled); }
        ri_status_t request_notify(uint32_t type) { return host_side->request_notify(type); }
    };

    struct Qp {
        Pd *pd = nullptr;
        uint32_t qp_num = 0;
        std::mutex mutex;
        ri_qp_attr_t attr{};
        SharedBlock memory;
        std::unique_ptr<HostQp> host_side;
        ~Qp() {
            if (qp_num != 0) {
                {
                    std::lock_guard g(pd->rnic->inst->routes.mutex);
                    pd->rnic->inst->routes.qps.erase(qp_num);
                }
                (void)pd->rnic->engine->remove_qp(qp_num);
                pd->rnic->inst->free_qp_num(qp_num);
            }
            pd->rnic->inst->uncharge(kQp);
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t destroy() { return RI_OK; }
        ri_status_t query(ri_qp_attr_t *out) {
            std::lock_guard g(mutex);
            *out = attr;
            uint32_t state = 0;
            // The adapter learns first that a stream failed: its ERROR wins.
            if (pd->rnic->engine->qp_state(qp_num, state) == RI_OK && state == RI_QPS_ERROR) {
                out->state = RI_QPS_ERROR;
            }
            return RI_OK;
        }
        ri_status_t query_stats(ri_qp_stats_t *out) {
            if (out == nullptr) return RI_EINVAL;
            return pd->rnic->engine->qp_stats(qp_num, *out);
        }
        ri_status_t modify(const ri_qp_attr_t *in, uint32_t mask);
        ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
            return host_side->post_send(wr, count, posted);
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            return host_side->post_recv(wr, count, posted);
        }
    };

    // A type 2 memory window: an STag of the adapter's table, unbound until a Bind MW on a QP of its PD (the engine
    // checks the bind against the entry the window keeps while unbound).
    struct Mw {
        Pd *pd = nullptr;
        ri_stag_t stag = 0;
        uint32_t type = RI_MW_TYPE_2;  // the only type this adapter allocates
        ~Mw() {
            if (stag != 0) pd->rnic->inst->forget_stag(stag);
            pd->rnic->inst->uncharge(kMr);  // windows and regions share the STags
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t dealloc() { return RI_OK; }
    };

    struct Mr {
        Pd *pd = nullptr;
        ri_stag_t stag = 0;
        uint64_t pin_id = 0;
        uint32_t max_pages = 0;  // allocated for fast registration: pages it may map
        ri_mr_attr_t attr{};
        ~Mr() {
            if (stag != 0) pd->rnic->inst->forget_stag(stag);
            if (pin_id != 0) (void)host().vm_unpin_range(pd->rnic->host_ctx, pin_id);
            pd->rnic->inst->uncharge(kMr);
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t deregister() { return RI_OK; }
        ri_status_t query(ri_mr_attr_t *out) {
            *out = attr;
            StagEntry e;
            // A Send with Invalidate or a Local Invalidate may have made it invalid since.
            out->state = pd->rnic->inst->stags.find(stag, e) && e.valid ? RI_STAG_VALID : RI_STAG_INVALID;
            // A fast registration, executed by the adapter, may have mapped it under another consumer key.
            if (max_pages != 0) pd->rnic->inst->stags.fast_reg_attr(stag, *out);
            return RI_OK;
        }
    };

    // A hosted consumer's Bind MW handles, as the adapter's STags (its HostQp formats the WQE with them).
    static bool resolve_bind(void *ctx, const ri_send_wr_t &wr, BindStags &out) {
        if (wr.opcode == RI_WR_FAST_REG) return fast_reg_stags(static_cast<const Qp *>(ctx)->pd, from_handle<Mr>(wr.u.fast_reg.mr), out);
        return bind_stags(static_cast<const Qp *>(ctx)->pd, from_handle<Mw>(wr.u.bind.mw),
                          from_handle<Mr>(wr.u.bind.mr), out);
    }

    static ri_status_t open_rnic(const ri_rnic_open_params_t *p, ri_rnic_t *out) {
        if (p == nullptr || out == nullptr || p->instance == nullptr) return RI_EINVAL;
        Instance *inst = from_handle<Instance>(p->instance);
        if (ri_status_t rc = inst->verb_fault.fire("open_rnic"); rc != RI_OK) return rc;
        if (ri_status_t rc = inst->charge(kOpen, 4096); rc != RI_OK) return rc;
        auto r = std::make_unique<Rnic>(inst);
        r->host_ctx = p->host_ctx;
        // 0 is a consumer in the kAL's own process: plain copies, as for the embedded kAL's consumer.
        r->owner = p->owner_pid != 0 ? static_cast<pid_t>(p->owner_pid) : ::getpid();
        if (ri_status_t rc = r->page.make("hwstub-engine-page", sizeof(hwstub_engine_page)); rc != RI_OK) return rc;
        r->engine->add_page(r->engine_page());
        {
            std::lock_guard g(inst->routes.mutex);
            inst->routes.opens.insert({&r->handlers, to_handle<ri_rnic_t>(r.get())});
        }
        *out = to_handle<ri_rnic_t>(r.release());
        return RI_OK;
    }

    static ri_status_t syscall(ri_kvp_syscall_t *k);
};

ri_status_t Kvp::Rnic::alloc_pd(ri_pd_t *out) {
    if (ri_status_t rc = inst->verb_fault.fire("alloc_pd"); rc != RI_OK) return rc;
    if (ri_status_t rc = inst->charge(kPd, inst->limits.max_pd); rc != RI_OK) return rc;
    auto *pd = new Pd;
    pd->rnic = this;
    pd->id = inst->next_id(inst->next_pd);
    *out = to_handle<ri_pd_t>(pd);
    return RI_OK;
}

ri_status_t Kvp::Rnic::create_cq(ri_cq_attr_t *a, ri_cq_t *out) {
    if (a == nullptr || a->cqe == 0) return RI_EINVAL;
    if (a->cqe > inst->limits.max_cqe) return RI_ERANGE;
    if (ri_status_t rc = inst->verb_fault.fire("create_cq"); rc != RI_OK) return rc;
    if (ri_status_t rc = inst->charge(kCq, inst->limits.max_cq); rc != RI_OK) return rc;
    auto cq = std::make_unique<Cq>();
    cq->rnic = this;
    const uint32_t depth = pow2_at_least(a->cqe);
    const size_t ring_offset = sizeof(hwstub_cq_ctrl);
    if (ri_status_t rc = cq->memory.make("hwstub-cq", ring_offset + static_cast<size_t>(depth) * sizeof(hwstub_cqe));
        rc != RI_OK) {
        return rc;
    }
    auto *ctrl = reinterpret_cast<hwstub_cq_ctrl *>(cq->memory.data());
    auto *ring = reinterpret_cast<hwstub_cqe *>(cq->memory.data() + ring_offset);
    const uint32_t id = inst->next_id(inst->next_cq);
    if (ri_status_t rc = engine->add_cq({id, ring, depth, ctrl}); rc != RI_OK) return rc;
    cq->id = id;
    a->cqe = depth;
    cq->attr = *a;
    cq->host_side = std::make_unique<HostCq>(ring, depth, ctrl, contexts);
    {
        std::lock_guard g(inst->routes.mutex);
        inst->routes.cqs[id] = Routes::CqRoute{&handlers, to_handle<ri_rnic_t>(this), to_handle<ri_cq_t>(cq.get()),
                                               a->ceh_id};
    }
    *out = to_handle<ri_cq_t>(cq.release());
    return RI_OK;
}

ri_status_t Kvp::Cq::move(uint32_t cqe, uint32_t *actual, int *fd) {
    if (actual == nullptr || cqe == 0) return RI_EINVAL;
    Instance *inst = rnic->inst;
    if (cqe > inst->limits.max_cqe) return RI_ERANGE;
    if (ri_status_t rc = inst->verb_fault.fire("resize_cq"); rc != RI_OK) return rc;
    const uint32_t depth = pow2_at_least(cqe);
    const size_t ring_offset = sizeof(hwstub_cq_ctrl);
    SharedBlock fresh;
    if (ri_status_t rc = fresh.make("hwstub-cq", ring_offset + static_cast<size_t>(depth) * sizeof(hwstub_cqe));
        rc != RI_OK) {
        return rc;
    }
    if (fd != nullptr) {
        *fd = ::fcntl(fresh.fd(), F_DUPFD_CLOEXEC, 0);
        if (*fd < 0) return RI_ENOSPC;
    }
    auto *ctrl = reinterpret_cast<hwstub_cq_ctrl *>(fresh.data());
    auto *ring = reinterpret_cast<hwstub_cqe *>(fresh.data() + ring_offset);
    // A hosted consumer's polls wait while the adapter moves the CQ (a uVP holds its own side the same way).
    auto hold = host_side->hold();
    if (ri_status_t rc = rnic->engine->resize_cq({id, ring, depth, ctrl}); rc != RI_OK) {
        if (fd != nullptr) ::close(*fd);
        return rc;
    }
    host_side->switch_to(ring, depth, ctrl);
    memory.swap(fresh);  // the old block is unmapped with `fresh`: the adapter no longer writes it
    attr.cqe = depth;
    *actual = depth;
    return RI_OK;
}

ri_status_t Kvp::Pd::create_qp(ri_cq_t scq_h, ri_cq_t rcq_h, ri_srq_t srq, ri_qp_init_attr_t *a, ri_qp_t *out) {
    Cq *scq = from_handle<Cq>(scq_h);
    Cq *rcq = from_handle<Cq>(rcq_h);
    Srq *shared = from_handle<Srq>(srq);
    if (scq == nullptr || rcq == nullptr || a == nullptr) return RI_EINVAL;
    const bool use_srq = (a->flags & RI_QP_USE_SRQ) != 0;
    if (use_srq != (shared != nullptr)) return RI_EINVAL;
    if (shared != nullptr && shared->pd != this) return RI_EINVAL;  // an SRQ serves the QPs of its own PD
    if ((a->flags & ~(RI_QP_SIGNAL_ALL | RI_QP_REMOTE_WRITE | RI_QP_REMOTE_READ | RI_QP_USE_SRQ)) != 0) {
        return RI_EINVAL;
    }
    if (a->type != RI_QPT_RC) return RI_EOPNOTSUPP;
    // An open's objects live on its engine: a QP's CQs must be of the same open (a verbs context's own).
    if (scq->rnic != rnic || rcq->rnic != rnic) return RI_EINVAL;
    Instance *inst = rnic->inst;
    if (ri_status_t rc = inst->verb_fault.fire("create_qp"); rc != RI_OK) return rc;
    const Limits &l = inst->limits;
    if (a->sq_depth == 0 || a->sq_depth > l.max_qp_wr || a->rq_depth > l.max_qp_wr || a->sq_sge > kMaxSge || a->rd_sge > kMaxSge ||
        a->rq_sge > kMaxSge || a->max_inline > l.max_inline || a->ird > l.max_ird || a->ord > l.max_ord) {
        return RI_ERANGE;
    }
    if (ri_status_t rc = inst->charge(kQp, l.max_qp); rc != RI_OK) return rc;
    auto qp = std::make_unique<Qp>();
    qp->pd = this;
    const uint32_t sq_depth = pow2_at_least(a->sq_depth);
    // A QP of an SRQ keeps a receive ring of one slot the adapter never reads.
    if (use_srq) a->rq_depth = a->rq_sge = 0;
    const uint32_t rq_depth = pow2_at_least(std::max<uint32_t>(a->rq_depth, 1));
    // A Read's sinks are SGEs of its send WQE: the slot holds the larger of the two counts.
    const uint32_t sq_sge = std::max({a->sq_sge, a->rd_sge, 1u});
    const uint32_t rq_sge = std::max<uint32_t>(a->rq_sge, 1);
    const uint32_t sq_slot = hwstub_sq_slot_size(sq_sge, a->max_inline);
    const uint32_t rq_slot = hwstub_rq_slot_size(rq_sge);
    const size_t rq_ctrl = sizeof(hwstub_wq_ctrl);
    const size_t sq_off = 2 * sizeof(hwstub_wq_ctrl);
    const size_t rq_off = sq_off + static_cast<size_t>(sq_depth) * sq_slot;
    const size_t total = rq_off + static_cast<size_t>(rq_depth) * rq_slot;
    if (ri_status_t rc = qp->memory.make("hwstub-qp", total); rc != RI_OK) return rc;
    const uint32_t num = inst->alloc_qp_num();
    if (num == 0) return RI_ENOSPC;
    QpSetup s;
    s.qp_num = num;
    s.sq = RingGeometry{qp->memory.data() + sq_off, sq_depth, sq_slot};
    s.sq_ctrl = reinterpret_cast<hwstub_wq_ctrl *>(qp->memory.data());
    s.rq = RingGeometry{qp->memory.data() + rq_off, rq_depth, rq_slot};
    s.rq_ctrl = reinterpret_cast<hwstub_wq_ctrl *>(qp->memory.data() + rq_ctrl);
    s.send_cq = scq->id;
    s.recv_cq = rcq->id;
    s.max_send_sge = sq_sge;
    s.max_recv_sge = rq_sge;
    s.max_inline = a->max_inline;
    s.signal_all = (a->flags & RI_QP_SIGNAL_ALL) != 0;
    s.owner = rnic->owner;
    s.pd = id;
    s.context = a->context;
    s.srq = shared != nullptr ? shared->id : 0;
    if (ri_status_t rc = rnic->engine->add_qp(s); rc != RI_OK) {
        inst->free_qp_num(num);
        return rc;
    }
    qp->qp_num = num;
    a->sq_depth = sq_depth;
    a->rq_depth = use_srq ? 0 : rq_depth;
    a->sq_sge = sq_sge;
    a->rq_sge = use_srq ? 0 : rq_sge;
    a->rd_sge = sq_sge;
    qp->attr.state = RI_QPS_IDLE;
    qp->attr.qp_num = num;
    qp->attr.access = ri_qp_initial_access(a->flags);
    qp->attr.ird = a->ird;
    qp->attr.ord = a->ord;
    qp->attr.init = *a;
    qp->attr.llp.fd = -1;
    qp->host_side = std::make_unique<HostQp>(s.sq, s.sq_ctrl, s.rq, s.rq_ctrl,
                                             Doorbell(rnic->engine_page(), rnic->engine->doorbell_fd()),
                                             a->max_inline, sq_sge, rq_sge);
    qp->host_side->set_bind_resolver(&resolve_bind, qp.get());
    if (use_srq) qp->host_side->set_uses_srq();
    rnic->contexts.set(num, a->context);
    {
        std::lock_guard g(inst->routes.mutex);
        inst->routes.qps[num] = Routes::QpRoute{&rnic->handlers, to_handle<ri_rnic_t>(rnic)};
    }
    *out = to_handle<ri_qp_t>(qp.release());
    return RI_OK;
}

// The RDMAC state machine as the adapter's driver keeps it; the adapter itself runs the stream.
ri_status_t Kvp::Qp::modify(const ri_qp_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    constexpr uint32_t kKnown = RI_QP_ATTR_STATE | RI_QP_ATTR_IRD | RI_QP_ATTR_ORD | RI_QP_ATTR_ACCESS |
                                RI_QP_ATTR_LLP | RI_QP_ATTR_TERM;
    if ((mask & ~kKnown) != 0) return (mask & (RI_QP_ATTR_SQ_DEPTH | RI_QP_ATTR_RQ_DEPTH)) != 0 ? RI_EOPNOTSUPP
                                                                                              : RI_EINVAL;
    if (ri_status_t rc = pd->rnic->inst->verb_fault.fire("modify_qp"); rc != RI_OK) return rc;
    OffloadEngine &oe = *pd->rnic->engine;
    std::lock_guard g(mutex);
    uint32_t from = attr.state;
    uint32_t seen = 0;
    if (oe.qp_state(qp_num, seen) == RI_OK && seen == RI_QPS_ERROR) from = attr.state = RI_QPS_ERROR;
    const uint32_t to = (mask & RI_QP_ATTR_STATE) != 0 ? in->state : from;
    if (to > RI_QPS_ERROR) return RI_EINVAL;
    const bool transition = from == RI_QPS_IDLE && to == RI_QPS_RTS;
    if ((mask & RI_QP_ATTR_LLP) != 0) {
        if (!transition) return RI_EINVAL;
        const ri_llp_params_t &l = in->llp;
        if ((l.mpa_revision != 1 && l.mpa_revision != 2) || l.rtr_type > RI_RTR_READ) return RI_EINVAL;
        if (l.ird > pd->rnic->inst->limits.max_ird || l.ord > pd->rnic->inst->limits.max_ord) return RI_ERANGE;
        // The offloading adapter runs every stream: without the socket there is nothing to run.
        if (l.fd < 0) return RI_EBADF;
    } else if (transition) {
        return RI_ENOTCONN;  // the RDMA-mode transition carries the negotiated stream
    }
    switch (to) {
        case RI_QPS_IDLE:
            if (from != RI_QPS_IDLE && from != RI_QPS_ERROR) return RI_EINVAL;
            // A reset QP would need fresh rings (the adapter's queues are where they were): not offered.
            if (from == RI_QPS_ERROR) return RI_EOPNOTSUPP;
            break;
        case RI_QPS_RTS:
            if (from != RI_QPS_IDLE && from != RI_QPS_RTS) return RI_EINVAL;
            break;
        case RI_QPS_CLOSING:
        case RI_QPS_TERMINATE:
            if (from != RI_QPS_RTS && from != to) return RI_EINVAL;
            break;
        case RI_QPS_ERROR: break;
    }
    if ((mask & RI_QP_ATTR_TERM) != 0 && to != RI_QPS_TERMINATE) return RI_EINVAL;
    const uint32_t attrs = mask & (RI_QP_ATTR_IRD | RI_QP_ATTR_ORD | RI_QP_ATTR_ACCESS);
    if (attrs != 0) {
        if (from != RI_QPS_IDLE || to != RI_QPS_IDLE) return RI_EINVAL;
        if ((mask & RI_QP_ATTR_IRD) != 0 && in->ird > pd->rnic->inst->limits.max_ird) return RI_ERANGE;
        if ((mask & RI_QP_ATTR_ORD) != 0 && in->ord > pd->rnic->inst->limits.max_ord) return RI_ERANGE;
        if ((mask & RI_QP_ATTR_ACCESS) != 0 &&
            (in->access & ~(RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC)) != 0) {
            return RI_EINVAL;
        }
    }
    if (transition) {
        const int fd = ::fcntl(in->llp.fd, F_DUPFD_CLOEXEC, 0);  // the kAL keeps its own reference
        if (fd < 0) return RI_EBADF;
        // The same-host path: the engine takes its own reference to the channel's end too (the kAL closes its
        // copy after the call).
        int bell = -1;
        if ((in->llp.mpa_flags & RI_LLP_SAME_HOST) != 0) {
            bell = in->llp.channel >= 0 ? ::fcntl(in->llp.channel, F_DUPFD_CLOEXEC, 0) : -1;
            if (bell < 0) {
                ::close(fd);
                return RI_EBADF;
            }
        }
        ri_llp_params_t llp = in->llp;
        if (llp.mpa_revision == 1 && llp.ird == 0 && llp.ord == 0) {
            // Revision 1 negotiates no IRD/ORD on the wire: the QP's own apply.
            llp.ird = attr.ird;
            llp.ord = attr.ord;
        }
        if (ri_status_t rc = oe.start_stream(qp_num, fd, llp, bell); rc != RI_OK) return rc;
        if (host_side) host_side->set_peer_rfc7306((in->llp.mpa_flags & RI_MPA_RFC7306) != 0);
        attr.llp = in->llp;
        attr.llp.fd = -1;
        attr.llp.channel = (in->llp.mpa_flags & RI_LLP_SAME_HOST) != 0 ? -1 : 0;
        if (in->llp.mpa_revision == 2 || in->llp.ird != 0 || in->llp.ord != 0) {
            attr.ird = in->llp.ird;
            attr.ord = in->llp.ord;
        }
    }
    if ((mask & RI_QP_ATTR_IRD) != 0) attr.ird = in->ird;
    if ((mask & RI_QP_ATTR_ORD) != 0) attr.ord = in->ord;
    if ((mask & RI_QP_ATTR_ACCESS) != 0) attr.access = in->access;
    if (to == RI_QPS_TERMINATE && from == RI_QPS_RTS) {
        iwarp::TermCode code = iwarp::term::kRdmapLocalCatastrophic;
        if ((mask & RI_QP_ATTR_TERM) != 0) {
            code = iwarp::TermCode{static_cast<uint8_t>(in->term_layer_etype >> 4),
                                   static_cast<uint8_t>(in->term_layer_etype & 0xf),
                                   static_cast<uint8_t>(in->term_ecode)};
        }
        (void)oe.terminate_qp(qp_num, code);
    }
    if (to == RI_QPS_CLOSING && from == RI_QPS_RTS) (void)oe.close_qp(qp_num);
    if (to == RI_QPS_ERROR && from != RI_QPS_ERROR) (void)oe.set_qp_error(qp_num);
    attr.state = to;
    return RI_OK;
}

ri_status_t Kvp::Pd::register_mr(const ri_mr_reg_t *reg, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (reg == nullptr || out == nullptr || keys == nullptr) return RI_EINVAL;
    if ((reg->access & ~kAccessKnown) != 0) return RI_EINVAL;
    // Remote writes and atomics need local write: both change the region.
    if ((reg->access & (RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC)) != 0 &&
        (reg->access & RI_ACCESS_LOCAL_WRITE) == 0) {
        return RI_EINVAL;
    }
    if (reg->length == 0 || reg->addr + reg->length < reg->addr) return RI_EINVAL;
    Instance *inst = rnic->inst;
    if (reg->length > inst->limits.max_mr_size) return RI_ERANGE;
    if (ri_status_t rc = inst->verb_fault.fire("register_mr"); rc != RI_OK) return rc;
    const bool zero_based = (reg->access & RI_ACCESS_ZERO_BASED) != 0;
    if (zero_based ? reg->iova != 0 : reg->iova != reg->addr) return RI_EINVAL;
    if (ri_status_t rc = inst->charge(kMr, inst->limits.max_mr); rc != RI_OK) return rc;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    if (rnic->host_ctx != nullptr && host().vm_pin_range != nullptr) {
        ri_pin_t pin{};
        const uint32_t fl = (reg->access & (RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE)) != 0 ? RI_PIN_WRITE : 0;
        if (ri_status_t rc = host().vm_pin_range(rnic->host_ctx, reg->addr, reg->length, fl, &pin); rc != RI_OK) {
            return rc;
        }
        mr->pin_id = pin.pin_id;
    }
    mr->stag = inst->alloc_stag();
    StagEntry e;
    e.addr = reg->addr;
    e.length = reg->length;
    e.to_base = reg->iova;
    e.access = reg->access | RI_ACCESS_LOCAL_READ;
    e.pd = id;
    inst->stags.add(mr->stag, e);
    mr->attr = ri_mr_attr_t{reg->addr, reg->length, reg->iova, e.access, RI_STAG_VALID, {mr->stag, mr->stag}, 0, 0};
    *keys = ri_mr_keys_t{mr->stag, mr->stag};
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Kvp::Pd::create_srq(ri_srq_attr_t *a, ri_srq_t *out) {
    if (a == nullptr || out == nullptr || a->max_wr == 0) return RI_EINVAL;
    Instance *inst = rnic->inst;
    const Limits &l = inst->limits;
    if (a->max_wr > l.max_qp_wr || a->max_sge > kMaxSge || a->limit > a->max_wr) return RI_ERANGE;
    if (ri_status_t rc = inst->charge(kSrq, l.max_srq); rc != RI_OK) return rc;
    auto srq = std::make_unique<Srq>();
    srq->pd = this;
    const uint32_t depth = pow2_at_least(a->max_wr);
    const uint32_t sge = std::max<uint32_t>(a->max_sge, 1);
    const uint32_t slot = hwstub_rq_slot_size(sge);
    const size_t ring_off = sizeof(hwstub_wq_ctrl);
    if (ri_status_t rc = srq->memory.make("hwstub-srq", ring_off + static_cast<size_t>(depth) * slot); rc != RI_OK) {
        return rc;
    }
    SrqSetup s;
    s.id = inst->next_id(inst->next_srq);
    s.ring = RingGeometry{srq->memory.data() + ring_off, depth, slot};
    s.ctrl = reinterpret_cast<hwstub_wq_ctrl *>(srq->memory.data());
    s.max_sge = sge;
    s.pd = id;
    s.context = a->context;
    s.limit = a->limit;
    if (ri_status_t rc = rnic->engine->add_srq(s); rc != RI_OK) return rc;
    srq->id = s.id;
    a->max_wr = depth;
    a->max_sge = sge;
    a->reserved = 0;
    srq->attr = *a;
    srq->host_side = std::make_unique<HostSrq>(s.ring, s.ctrl, Doorbell(rnic->engine_page(), rnic->engine->doorbell_fd()),
                                               sge);
    {
        std::lock_guard g(inst->routes.mutex);
        inst->routes.srqs[s.id] = Routes::QpRoute{&rnic->handlers, to_handle<ri_rnic_t>(rnic)};
    }
    *out = to_handle<ri_srq_t>(srq.release());
    return RI_OK;
}

ri_status_t Kvp::Pd::alloc_stag(uint32_t max_pages, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (out == nullptr || keys == nullptr || max_pages == 0) return RI_EINVAL;
    Instance *inst = rnic->inst;
    if (max_pages > inst->limits.max_fast_reg_pages) return RI_ERANGE;
    if (ri_status_t rc = inst->charge(kMr, inst->limits.max_mr); rc != RI_OK) return rc;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    mr->max_pages = max_pages;
    mr->stag = inst->alloc_stag();
    // Invalid until a fast registration maps it; it maps only registered memory, which this adapter pinned.
    inst->stags.add_allocated(mr->stag, id, max_pages);
    mr->attr = ri_mr_attr_t{};
    mr->attr.state = RI_STAG_INVALID;
    mr->attr.keys = ri_mr_keys_t{mr->stag, mr->stag};
    mr->attr.max_pages = max_pages;
    *keys = ri_mr_keys_t{mr->stag, mr->stag};
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Kvp::Pd::alloc_mw(uint32_t type, ri_mw_t *out, ri_stag_t *rkey) {
    if (out == nullptr || rkey == nullptr) return RI_EINVAL;
    if (type == RI_MW_TYPE_1) return RI_EOPNOTSUPP;  // bound by the Bind MW verb, which this adapter does not execute
    if (type != RI_MW_TYPE_2) return RI_EINVAL;
    Instance *inst = rnic->inst;
    if (ri_status_t rc = inst->charge(kMr, inst->limits.max_mr); rc != RI_OK) return rc;
    auto mw = std::make_unique<Mw>();
    mw->pd = this;
    mw->stag = inst->alloc_stag();
    inst->stags.add_window(mw->stag, StagTable::unbound_window(id));
    *rkey = mw->stag;
    *out = to_handle<ri_mw_t>(mw.release());
    return RI_OK;
}

ri_status_t Kvp::syscall(ri_kvp_syscall_t *k) {
    ri_syscall_t &call = *k->call;
    Reply reply(call);
    switch (call.op) {
        case RI_OPEN_RNIC: {
            if (!reply.has_priv()) return RI_ENOSYS;
            hwstub_open_req req;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            if (ri_status_t rc = reply.check_room(sizeof(hwstub_open_resp), 0, 2); rc != RI_OK) return rc;
            ri_rnic_open_params_t p;
            if (ri_status_t rc = reply.read_param(&p); rc != RI_OK) return rc;
            ri_rnic_t r = nullptr;
            if (ri_status_t rc = open_rnic(&p, &r); rc != RI_OK) return rc;
            Rnic *open = from_handle<Rnic>(r);
            // Duplicates: the page and the doorbell stay the kVP's too.
            if (reply.pass_dup(open->page.fd()) != RI_OK || reply.pass_dup(open->engine->doorbell_fd()) != RI_OK) {
                reply.drop_fds();
                delete open;
                return RI_ENOSPC;
            }
            k->created = r;
            hwstub_open_resp resp{};
            resp.page_size = static_cast<uint32_t>(open->page.size());
            resp.max_qp = open->inst->limits.max_qp;
            return reply.write_priv(resp);
        }
        case RI_CREATE_CQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            hwstub_create_cq_req req;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            ri_cq_attr_t attr;
            if (ri_status_t rc = reply.check_room(sizeof(hwstub_create_cq_resp), sizeof attr, 1); rc != RI_OK) {
                return rc;
            }
            if (ri_status_t rc = reply.read_param(&attr); rc != RI_OK) return rc;
            ri_cq_t cq = nullptr;
            if (ri_status_t rc = from_handle<Rnic>(k->object)->create_cq(&attr, &cq); rc != RI_OK) return rc;
            Cq *c = from_handle<Cq>(cq);
            if (reply.pass_dup(c->memory.fd()) != RI_OK) {
                delete c;
                return RI_ENOSPC;
            }
            k->created = cq;
            hwstub_create_cq_resp resp{};
            resp.cq_id = c->id;
            resp.depth = attr.cqe;
            resp.ring_offset = sizeof(hwstub_cq_ctrl);
            resp.map_size = static_cast<uint32_t>(c->memory.size());
            (void)reply.write_result(attr);  // cannot fail: check_room held
            return reply.write_priv(resp);
        }
        case RI_RESIZE_CQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            hwstub_resize_cq_req req;
            uint32_t cqe = 0;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            if (ri_status_t rc = reply.read_param(&cqe); rc != RI_OK) return rc;
            if (ri_status_t rc = reply.check_room(sizeof(hwstub_resize_cq_resp), sizeof(uint32_t), 1); rc != RI_OK) {
                return rc;
            }
            Cq *c = from_handle<Cq>(k->object);
            hwstub_resize_cq_resp resp{};
            int fd = -1;
            if (ri_status_t rc = c->move(cqe, &resp.depth, &fd); rc != RI_OK) return rc;
            (void)reply.pass_fd(fd);  // cannot fail: check_room held
            resp.ring_offset = sizeof(hwstub_cq_ctrl);
            resp.map_size = static_cast<uint32_t>(c->memory.size());
            (void)reply.write_result(resp.depth);
            return reply.write_priv(resp);
        }
        case RI_CREATE_SRQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            hwstub_create_srq_req req;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            ri_srq_attr_t attr;
            if (ri_status_t rc = reply.check_room(sizeof(hwstub_create_srq_resp), sizeof attr, 1); rc != RI_OK) {
                return rc;
            }
            if (ri_status_t rc = reply.read_param(&attr); rc != RI_OK) return rc;
            ri_srq_t srq = nullptr;
            if (ri_status_t rc = from_handle<Pd>(k->object)->create_srq(&attr, &srq); rc != RI_OK) return rc;
            Srq *q = from_handle<Srq>(srq);
            if (reply.pass_dup(q->memory.fd()) != RI_OK) {
                delete q;
                return RI_ENOSPC;
            }
            k->created = srq;
            hwstub_create_srq_resp resp{};
            resp.srq_id = q->id;
            resp.depth = attr.max_wr;
            resp.slot = hwstub_rq_slot_size(attr.max_sge);
            resp.ring_offset = sizeof(hwstub_wq_ctrl);
            resp.map_size = static_cast<uint32_t>(q->memory.size());
            (void)reply.write_result(attr);  // cannot fail: check_room held
            return reply.write_priv(resp);
        }
        case RI_CREATE_QP: {
            if (!reply.has_priv()) return RI_ENOSYS;
            hwstub_create_qp_req req;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            ri_qp_init_attr_t attr;
            if (ri_status_t rc = reply.check_room(sizeof(hwstub_create_qp_resp), sizeof attr, 1); rc != RI_OK) {
                return rc;
            }
            if (ri_status_t rc = reply.read_param(&attr); rc != RI_OK) return rc;
            ri_qp_t qp = nullptr;
            auto *pd = from_handle<Pd>(k->object);
            if (ri_status_t rc = pd->create_qp(static_cast<ri_cq_t>(k->refs[0]), static_cast<ri_cq_t>(k->refs[1]),
                                               static_cast<ri_srq_t>(k->refs[2]), &attr, &qp);
                rc != RI_OK) {
                return rc;
            }
            Qp *q = from_handle<Qp>(qp);
            if (reply.pass_dup(q->memory.fd()) != RI_OK) {
                delete q;
                return RI_ENOSPC;
            }
            k->created = qp;
            hwstub_create_qp_resp resp{};
            resp.qp_num = q->qp_num;
            resp.sq_depth = attr.sq_depth;
            resp.sq_slot = hwstub_sq_slot_size(attr.sq_sge, attr.max_inline);
            resp.rq_depth = std::max<uint32_t>(attr.rq_depth, 1);  // a QP of an SRQ: the one slot never read
            resp.rq_slot = hwstub_rq_slot_size(std::max<uint32_t>(attr.rq_sge, 1));
            resp.rq_ctrl_offset = sizeof(hwstub_wq_ctrl);
            resp.sq_offset = 2 * sizeof(hwstub_wq_ctrl);
            resp.rq_offset = resp.sq_offset + resp.sq_depth * resp.sq_slot;
            resp.map_size = static_cast<uint32_t>(q->memory.size());
            (void)reply.write_result(attr);  // cannot fail: check_room held
            return reply.write_priv(resp);
        }
        default: return RI_ENOSYS;
    }
}

}  // namespace
}  // namespace hwstub::kvp

RI_PROVIDER_MODULE(hwstub::kvp::Kvp)
