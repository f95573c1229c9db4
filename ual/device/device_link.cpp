// The uAL's device link: uVP verbs, ri_syscall over the device with the creator's cookie, and the event thread.
#include "ual/device_link.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "client.hpp"
#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "syscall.hpp"
#include "verb_error.hpp"

namespace ual {
namespace {

constexpr const char *kComponent = "ual";

rdma::Expected<void> verb_status(ri_status_t rc, const char *verb) {
    if (rc != RI_OK) return verb_error(rc, verb);
    return {};
}

std::string field(const char *s, size_t cap) { return std::string(s, strnlen(s, cap)); }

// What the event thread shares with the link: the link may be destroyed by a delivery on that thread (the
// delivery held the last reference to the access layer), after which the thread touches only this.
struct Core {
    std::shared_ptr<void> keep_alive;     // an embedded kAL: released after the client below
    std::unique_ptr<DeviceClient> client;
    krdma::UniqueFd stop_fd;
    std::atomic<bool> stopping{false};
    std::weak_ptr<LinkEvents> sink;       // set by start(), before any event is read
    // Creates run one at a time, so that the one create op in flight carries its creator's cookie, and the kAL's
    // handle of what it made is read from the reply that echoes that cookie.
    std::mutex create_mutex;
    uint32_t create_cookie = 0;
    uint64_t created = 0;
    uint32_t created_number = 0;  // the created object's number, when the kAL said (protocol 1.2: a QP's)
    std::string create_refusal;  // the kAL's reason when it refused the create op in flight
    // Whoever reads and delivers the kAL's records holds this: the event thread, or a waiting consumer thread
    // that leads (Pump). Records are so delivered in the order they came, by one thread at a time.
    std::mutex delivery;
    bool device_open = true;                  // under delivery: the device connection has not closed
    std::vector<krdma_event> events;          // under delivery: one wake-up's records, storage kept
    std::vector<CmRecord> cm_events;
    krdma::UniqueFd nudge_fd;                 // wakes a leader (EventPump::nudge)
};

// One RNIC open: the uVP's host context (its syscalls arrive with it) and its event handlers' context.
struct Open {
    Core *core = nullptr;
    uint32_t cookie = 0;
    uint32_t ceh_id = 0;
    rdma::rnicpi::ModuleRef uvp;          // keeps the uVP loaded while the open lives
    std::mutex mutex;                     // guards cqs against the uVP's handler threads
    std::map<ri_cq_t, uint32_t> cqs;      // for the uVP's own completion handler: CQ -> cookie
};

bool creates(uint32_t op) noexcept {
    switch (op) {
        case RI_OPEN_RNIC:
        case RI_ALLOC_PD:
        case RI_CREATE_CQ:
        case RI_CREATE_QP:
        case RI_CREATE_SRQ:
        case RI_REGISTER_MR:
        case RI_REGISTER_SHARED_MR:
        case RI_ALLOC_STAG:
        case RI_ALLOC_MW: return true;
        default: return false;
    }
}

ri_status_t link_syscall(void *host_ctx, ri_syscall_t *call) noexcept {
    if (host_ctx == nullptr || call == nullptr) return RI_EINVAL;
    Core &core = *static_cast<Open *>(host_ctx)->core;
    RDMA_LOG_DEBUG(kComponent, "ri_syscall op %u: to the kAL", call->op);
    const bool create = creates(call->op);
    uint32_t number = 0;
    const ri_status_t rc = forward_syscall(*core.client, *call, create ? core.create_cookie : 0,
                                           create ? &core.create_refusal : nullptr, &number);
    RDMA_LOG_DEBUG(kComponent, "ri_syscall op %u: kAL answered %d, handle %#lx", call->op, rc,
                   static_cast<unsigned long>(call->handle_out));
    if (rc == RI_OK && create) {
        core.created = call->handle_out;
        core.created_number = number;
    }
    return rc;
}

ri_status_t link_syscall_post(void *host_ctx, const ri_syscall_t *call) noexcept {
    if (host_ctx == nullptr || call == nullptr) return RI_EINVAL;
    RDMA_LOG_DEBUG(kComponent, "ri_syscall_post op %u: to the kAL, not waited for", call->op);
    return forward_syscall_post(*static_cast<Open *>(host_ctx)->core->client, *call);
}

const ri_host_ops_t kLinkHostOps{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr,
                                 &link_syscall, nullptr, nullptr, &link_syscall_post};

void on_async(void *ctx, ri_rnic_t, const ri_async_event_t *e) {
    auto *o = static_cast<Open *>(ctx);
    if (o == nullptr || e == nullptr) return;
    if (auto sink = o->core->sink.lock()) sink->async_event(o->cookie, *e);
}

void on_completion(void *ctx, ri_rnic_t, ri_cq_t cq) {
    auto *o = static_cast<Open *>(ctx);
    if (o == nullptr) return;
    uint32_t cookie = 0;
    {
        std::lock_guard lock(o->mutex);
        if (auto it = o->cqs.find(cq); it != o->cqs.end()) cookie = it->second;
    }
    if (cookie == 0) return;
    if (auto sink = o->core->sink.lock()) sink->completion(cookie);
}

// One delivery to the sink; false when the thread must stop (the link is gone or going).
template <class F>
bool deliver(Core &core, F &&f) {
    if (core.stopping) return false;
    std::shared_ptr<LinkEvents> sink = core.sink.lock();
    if (!sink) return false;  // the access layer is being destroyed by another thread, which joins this one
    f(*sink);
    sink.reset();  // may destroy the access layer, and this link with it (stopping is then set)
    return !core.stopping;
}

// Takes every record waiting (on the socket, or queued by calls) and delivers them in order; false when the
// thread must stop. Called with core.delivery held.
bool take_and_deliver(Core &core) {
    DeviceClient &client = *core.client;
    std::vector<krdma_event> &events = core.events;
    std::vector<CmRecord> &cm_events = core.cm_events;
    events.clear();
    cm_events.clear();
    client.take_events(events, cm_events);
    for (const krdma_event &e : events) {
        bool go = true;
        switch (e.event) {
            case KRDMA_EVENT_COMPLETION: go = deliver(core, [&](LinkEvents &s) { s.completion(e.cookie); }); break;
            case KRDMA_EVENT_ASYNC: {
                const ri_async_event_t a{e.resource_type, e.event_id, e.resource_id, e.context,
                                         static_cast<uint32_t>(e.detail), 0};
                go = deliver(core, [&](LinkEvents &s) { s.async_event(e.cookie, a); });
                break;
            }
            case KRDMA_EVENT_SHUTDOWN: go = deliver(core, [](LinkEvents &s) { s.kal_gone(); }); break;
            default: break;  // an event this uAL does not know
        }
        if (!go) return false;
    }
    for (CmRecord &c : cm_events) {
        if (!deliver(core, [&](LinkEvents &s) { s.connection(c.event, std::move(c.fd), std::move(c.channel), std::move(c.byte_channel),
                                                               std::move(c.link));
            })) {
            return false;
        }
    }
    if (core.device_open && client.closed()) {
        core.device_open = false;
        RDMA_LOG_WARN(kComponent, "the kAL closed the device: every RNIC of this process is unusable");
        if (!deliver(core, [](LinkEvents &s) { s.kal_gone(); })) return false;
    }
    return true;
}

void event_loop(std::shared_ptr<Core> core) {
    DeviceClient &client = *core->client;
    bool device_open = true;  // this thread's copy of core->device_open, read under delivery
    bool said = false;        // a failed poll was logged (once: it may repeat until the cause goes)
    for (;;) {
        pollfd fds[3] = {{core->stop_fd.get(), POLLIN, 0},
                         {device_open ? client.fd() : -1, POLLIN, 0},
                         {client.queued_fd(), POLLIN, 0}};
        if (::poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            // EINVAL while RLIMIT_NOFILE is below the three descriptors, ENOMEM: passing conditions. Ending the
            // thread would leave every event of this process unread for good; try again a little later.
            if (!said) {
                RDMA_LOG_ERROR(kComponent, "event thread: poll failed: %s (trying again every 10 ms)",
                               std::strerror(errno));
                said = true;
            }
            if (core->stopping) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        said = false;
        if (fds[0].revents != 0 || core->stopping) return;
        std::unique_lock d(core->delivery, std::try_to_lock);
        if (!d.owns_lock()) {
            // A consumer thread leads (it reads the socket, muted for this thread, and the calls' queue): what
            // woke this one is its to take. Never wait for it here: its delivery may destroy the link, whose
            // destructor joins this thread.
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            continue;
        }
        if (!take_and_deliver(*core)) return;
        device_open = core->device_open;
    }
}

// The link's EventPump: a waiting consumer thread does the event thread's work (see EventPump).
class Pump final : public EventPump {
public:
    explicit Pump(std::shared_ptr<Core> core) : core_(std::move(core)) {}

    bool lead(std::chrono::steady_clock::time_point deadline, const std::function<bool()> &ready) override {
        Core &core = *core_;
        std::unique_lock d(core.delivery, std::try_to_lock);
        if (!d.owns_lock() || core.stopping) return false;
        DeviceClient &client = *core.client;
        // The event thread no longer wakes for the socket: this thread reads it (not while a call of another thread
        // reads its reply: lead_fd() is muted then). Unmuted when this thread stops, the socket wakes the event thread
        // for anything that came meanwhile (level-triggered).
        client.lead(true);
        struct Unmute {
            DeviceClient &c;
            ~Unmute() { c.lead(false); }
        } unmute{client};
        for (;;) {
            if (ready() || core.stopping) return true;
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) return true;
            // Nothing but the socket, the calls' queue, a nudge or the stop wakes this thread before its deadline (an
            // infinite wait's is centuries away: poll's int of milliseconds takes the rest in several turns).
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
            pollfd fds[4] = {{core.stop_fd.get(), POLLIN, 0},
                             {core.device_open ? client.lead_fd() : -1, POLLIN, 0},
                             {client.queued_fd(), POLLIN, 0},
                             {core.nudge_fd.get(), POLLIN, 0}};
            const int r = ::poll(fds, 4, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
            if (r < 0 && errno != EINTR) return true;  // the caller waits as it would have
            if (r <= 0) continue;
            if (fds[0].revents != 0) return true;
            if (fds[3].revents != 0) {
                uint64_t n;
                (void)!::read(core.nudge_fd.get(), &n, sizeof n);
            }
            if ((fds[1].revents | fds[2].revents) != 0 && !take_and_deliver(core)) return true;
        }
    }

    void nudge() noexcept override {
        const uint64_t one = 1;
        (void)!::write(core_->nudge_fd.get(), &one, sizeof one);
    }

private:
    std::shared_ptr<Core> core_;  // outlives the link while a leader uses it
};

class DeviceLink final : public KalLink {
public:
    DeviceLink(std::unique_ptr<DeviceClient> client, std::shared_ptr<void> keep_alive, bool embedded)
        : core_(std::make_shared<Core>()), loader_(kLinkHostOps), embedded_(embedded) {
        core_->keep_alive = std::move(keep_alive);
        core_->client = std::move(client);
    }
    DeviceLink(const DeviceLink &) = delete;
    DeviceLink &operator=(const DeviceLink &) = delete;

    ~DeviceLink() override {
        core_->stopping = true;
        if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
            thread_.detach();  // a delivery dropped the last reference: the thread only checks `stopping` now
        } else if (thread_.joinable()) {
            uint64_t one = 1;
            (void)!::write(core_->stop_fd.get(), &one, sizeof one);
            thread_.join();
        }
        opens_.clear();  // every adapter is gone: the uVPs call no handler any more
    }

    rdma::Expected<void> start(std::weak_ptr<LinkEvents> sink) override {
        core_->sink = std::move(sink);
        core_->stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!core_->stop_fd) return rdma::Error(errno, std::string("eventfd failed: ") + std::strerror(errno));
        core_->nudge_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!core_->nudge_fd) return rdma::Error(errno, std::string("eventfd failed: ") + std::strerror(errno));
        pump_ = std::make_shared<Pump>(core_);
        thread_ = std::thread(event_loop, core_);
        // Named for top -H, perf and gdb: a consumer's threads are otherwise all called after its program.
        ::pthread_setname_np(thread_.native_handle(), "ual-events");
        return {};
    }

    std::string_view kind() const noexcept override { return embedded_ ? "embedded" : "krdmad"; }
    uint32_t client_id() const noexcept override { return core_->client->hello().client_id; }
    std::shared_ptr<EventPump> event_pump() override { return pump_; }
    bool can_convert_sockets() const noexcept override { return true; }

    rdma::Expected<krdma::UniqueFd> peer_marks() override {
        krdma_peer_marks q{};
        auto r = core_->client->request(KRDMA_CMD_PEER_MARKS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r) return rdma::Error(r.error().code(), r.error().message());
        if (r->fds.empty()) return rdma::Error(RI_EPROTO, "the kAL answered PEER_MARKS without the map");
        return std::move(r->fds.front());
    }

    rdma::Expected<std::vector<RnicDescription>> rnics() override {
        std::vector<RnicDescription> out;
        for (uint32_t i = 0;; ++i) {
            krdma_list_rnics q{};
            q.index = i;
            auto r = core_->client->request(KRDMA_CMD_LIST_RNICS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
            if (!r) return rdma::Error(r.error().code(), "listing RNICs failed: " + r.error().message());
            std::memcpy(&q, r->payload.data(), sizeof q);
            if (i >= q.count) break;
            const krdma_rnic_info &n = q.info;
            out.push_back(RnicDescription{field(n.name, sizeof n.name), field(n.provider, sizeof n.provider),
                                          field(n.vendor, sizeof n.vendor), field(n.netdev, sizeof n.netdev),
                                          field(n.address, sizeof n.address),
                                          field(n.uvp_library, sizeof n.uvp_library)});
        }
        return out;
    }

    rdma::Expected<ObjectRef> open_rnic(const RnicDescription &d, uint32_t cookie) override {
        if (d.uvp_library.empty()) {
            return rdma::Error(RI_EOPNOTSUPP, "RNIC " + d.name + " has no user-mode provider (kernel consumers only)");
        }
        auto o = std::make_unique<Open>();
        o->core = core_.get();
        o->cookie = cookie;
        {
            // The uVP is loaded when a consumer first uses one of its RNICs, and stays loaded while opens use it.
            std::lock_guard lock(mutex_);
            for (auto &m : loader_.modules()) {
                if (m->path() == std::filesystem::path(d.uvp_library)) o->uvp = m;
            }
            if (!o->uvp) {
                auto r = loader_.load(d.uvp_library, RI_MODE_NONPRIVILEGED);
                if (!r) return r.error();
                o->uvp = std::move(*r);
                RDMA_LOG_INFO(kComponent, "loaded uVP %s for RNIC %s", d.uvp_library.c_str(), d.name.c_str());
            }
        }
        const ri_verbs_ops_t &v = o->uvp->verbs();
        ri_rnic_open_params_t p{};
        p.host_ctx = o.get();
        std::memcpy(p.instance_name, d.name.c_str(), std::min(d.name.size(), sizeof p.instance_name - 1));
        ri_rnic_t rnic = nullptr;
        uint64_t handle = 0;
        auto made = create(cookie, handle, "Open RNIC", [&] { return v.open_rnic(&p, &rnic); });
        if (!made) return made.error();
        uint32_t aeh = 0;
        ri_status_t rc = v.set_aeh(rnic, &on_async, o.get(), &aeh);
        if (rc == RI_OK) rc = v.set_ceh(rnic, &on_completion, o.get(), &o->ceh_id);
        if (rc != RI_OK) {
            (void)v.close_rnic(rnic);
            return verb_error(rc, "Set event handlers");
        }
        std::lock_guard lock(mutex_);
        opens_[rnic] = std::move(o);
        return ObjectRef{handle, rnic, &v};
    }

    rdma::Expected<ObjectRef> alloc_pd(const ObjectRef &rnic) override {
        ri_pd_t pd = nullptr;
        uint64_t handle = 0;
        auto made = create(0, handle, "Allocate PD", [&] { return rnic.verbs->alloc_pd(rnic.as<ri_rnic_t>(), &pd); });
        if (!made) return made.error();
        return ObjectRef{handle, pd, rnic.verbs};
    }

    rdma::Expected<ObjectRef> create_cq(const ObjectRef &rnic, uint32_t cookie, uint32_t &depth) override {
        Open *o = open_of(rnic);
        if (o == nullptr) return rdma::Error(RI_EINVAL, "not an RNIC open of this access layer");
        ri_cq_attr_t attr{};
        attr.cqe = depth;
        attr.ceh_id = o->ceh_id;
        attr.context = cookie;
        ri_cq_t cq = nullptr;
        uint64_t handle = 0;
        auto made = create(cookie, handle, "Create CQ", [&] {
            return rnic.verbs->create_cq(rnic.as<ri_rnic_t>(), &attr, &cq);
        });
        if (!made) return made.error();
        depth = attr.cqe;
        std::lock_guard lock(o->mutex);
        o->cqs[cq] = cookie;
        return ObjectRef{handle, cq, rnic.verbs};
    }

    rdma::Expected<ObjectRef> create_qp(const ObjectRef &pd, const ObjectRef &send, const ObjectRef &recv,
                                        const ObjectRef *srq, ri_qp_init_attr_t &attr, uint32_t cookie) override {
        ri_qp_t qp = nullptr;
        uint64_t handle = 0;
        uint32_t number = 0;
        auto made = create(cookie, handle, "Create QP", [&] {
            return pd.verbs->create_qp(pd.as<ri_pd_t>(), send.as<ri_cq_t>(), recv.as<ri_cq_t>(),
                                       srq != nullptr ? srq->as<ri_srq_t>() : nullptr, &attr, &qp);
        }, &number);
        if (!made) return made.error();
        return ObjectRef{handle, qp, pd.verbs, number};
    }

    rdma::Expected<ObjectRef> create_srq(const ObjectRef &pd, ri_srq_attr_t &attr) override {
        ri_srq_t srq = nullptr;
        uint64_t handle = 0;
        auto made = create(0, handle, "Create SRQ", [&] {
            return pd.verbs->create_srq(pd.as<ri_pd_t>(), &attr, &srq);
        });
        if (!made) return made.error();
        return ObjectRef{handle, srq, pd.verbs};
    }

    rdma::Expected<ObjectRef> register_mr(const ObjectRef &pd, void *addr, uint64_t length, uint32_t access,
                                          ri_mr_keys_t &keys) override {
        ri_mr_reg_t reg{};
        reg.addr = reinterpret_cast<uint64_t>(addr);
        reg.length = length;
        reg.iova = (access & RI_ACCESS_ZERO_BASED) != 0 ? 0 : reg.addr;  // zero-based: tagged offsets from 0
        reg.access = access;
        ri_mr_t mr = nullptr;
        uint64_t handle = 0;
        auto made = create(0, handle, "Register Memory Region", [&] {
            return pd.verbs->register_mr(pd.as<ri_pd_t>(), &reg, &mr, &keys);
        });
        if (!made) return made.error();
        return ObjectRef{handle, mr, pd.verbs};
    }

    rdma::Expected<ObjectRef> alloc_mw(const ObjectRef &pd, uint32_t type, ri_stag_t &rkey) override {
        ri_mw_t mw = nullptr;
        uint64_t handle = 0;
        auto made = create(0, handle, "Allocate Memory Window", [&] {
            return pd.verbs->alloc_mw(pd.as<ri_pd_t>(), type, &mw, &rkey);
        });
        if (!made) return made.error();
        return ObjectRef{handle, mw, pd.verbs};
    }

    rdma::Expected<void> destroy(ObjectKind kind, const ObjectRef &o) override {
        const ri_verbs_ops_t *v = o.verbs;
        switch (kind) {
            case ObjectKind::rnic: {
                if (ri_status_t rc = v->close_rnic(o.as<ri_rnic_t>()); rc != RI_OK) return verb_error(rc, "Close RNIC");
                std::lock_guard lock(mutex_);
                opens_.erase(o.as<ri_rnic_t>());
                return {};
            }
            case ObjectKind::pd: return verb_status(v->dealloc_pd(o.as<ri_pd_t>()), "Deallocate PD");
            case ObjectKind::cq: {
                if (ri_status_t rc = v->destroy_cq(o.as<ri_cq_t>()); rc != RI_OK) return verb_error(rc, "Destroy CQ");
                std::lock_guard lock(mutex_);
                for (auto &[rnic, open] : opens_) {
                    std::lock_guard cq_lock(open->mutex);
                    open->cqs.erase(o.as<ri_cq_t>());
                }
                return {};
            }
            case ObjectKind::qp: return verb_status(v->destroy_qp(o.as<ri_qp_t>()), "Destroy QP");
            case ObjectKind::srq: return verb_status(v->destroy_srq(o.as<ri_srq_t>()), "Destroy SRQ");
            case ObjectKind::mr: return verb_status(v->deregister_mr(o.as<ri_mr_t>()), "Deregister Memory Region");
            case ObjectKind::mw: return verb_status(v->dealloc_mw(o.as<ri_mw_t>()), "Deallocate Memory Window");
            case ObjectKind::listener: {
                krdma_destroy_listen q{o.kal};
                return command(KRDMA_CMD_DESTROY_LISTEN, q, "Closing a listen point");
            }
        }
        return rdma::Error(RI_EINVAL, "unknown object kind");
    }

    rdma::Expected<void> modify_qp(const ObjectRef &qp, const ri_qp_attr_t &attr, uint32_t mask) override {
        // The uVP makes the kAL's part of it (a state change reaches the QP's endpoint there).
        return verb_status(qp.verbs->modify_qp(qp.as<ri_qp_t>(), &attr, mask), "Modify QP");
    }

    rdma::Expected<void> modify_srq(const ObjectRef &srq, const ri_srq_attr_t &attr, uint32_t mask) override {
        return verb_status(srq.verbs->modify_srq(srq.as<ri_srq_t>(), &attr, mask), "Modify SRQ");
    }

    rdma::Expected<ListenResult> listen(const ObjectRef &rnic, uint16_t port, uint16_t backlog, uint64_t context,
                                        uint32_t cookie) override {
        krdma_listen q{};
        q.rnic = rnic.kal;
        q.context = context;
        q.port = port;
        q.backlog = backlog;
        q.cookie = cookie;
        if (auto r = command(KRDMA_CMD_LISTEN, q, "Listen on port " + std::to_string(port)); !r) return r.error();
        return ListenResult{q.handle, q.port};
    }

    rdma::Expected<void> connect(const ObjectRef &qp, const ri_net_addr_t &remote, uint16_t port,
                                 std::span<const uint8_t> private_data, uint64_t context,
                                 uint32_t timeout_ms) override {
        krdma_connect q = connect_request(qp, remote, port, private_data, context, timeout_ms);
        return command(KRDMA_CMD_CONNECT, q, "Connect");
    }

    rdma::Expected<void> connect_async(const ObjectRef &qp, const ri_net_addr_t &remote, uint16_t port,
                                       std::span<const uint8_t> private_data, uint64_t context, uint32_t timeout_ms,
                                       uint32_t cookie) override {
        const krdma_connect q = connect_request(qp, remote, port, private_data, context, timeout_ms);
        return post(KRDMA_CMD_CONNECT, q, {KRDMA_CM_UNREACHABLE, qp.kal, context, cookie});
    }

    rdma::Expected<void> accept(uint64_t request, const ObjectRef &qp, std::span<const uint8_t> private_data,
                                uint64_t context) override {
        krdma_accept q = accept_request(request, qp, private_data, context);
        return command(KRDMA_CMD_ACCEPT, q, "Accept");
    }

    rdma::Expected<void> accept_async(uint64_t request, const ObjectRef &qp, std::span<const uint8_t> private_data,
                                      uint64_t context, uint32_t cookie) override {
        const krdma_accept q = accept_request(request, qp, private_data, context);
        return post(KRDMA_CMD_ACCEPT, q, {KRDMA_CM_BROKEN, qp.kal, context, cookie});
    }

    rdma::Expected<void> reject(uint64_t request, std::span<const uint8_t> private_data) override {
        krdma_reject q{};
        q.request = request;
        krdma::set_private_data(q, private_data);
        return command(KRDMA_CMD_REJECT, q, "Reject");
    }

    rdma::Expected<void> convert(const ObjectRef &qp, int fd, std::span<const uint8_t> private_data, uint32_t role,
                                 uint32_t flags, uint64_t context, uint32_t timeout_ms) override {
        krdma_convert q{};
        q.qp = qp.kal;
        q.context = context;
        q.role = role;
        // A kAL before minor 6 refuses the word nonzero, one before minor 8 the link; what the flags ask for is
        // optional.
        const uint32_t minor = core_->client->abi_minor();
        if (minor < 8) flags &= ~uint32_t{KRDMA_CONVERT_LINK};
        q.flags = minor >= 6 ? static_cast<uint16_t>(flags) : 0;
        q.timeout_ms = timeout_ms;
        krdma::set_private_data(q, private_data);
        const int fds[1] = {fd};
        return command(KRDMA_CMD_CONVERT, q, "Convert a socket", fds);
    }

    rdma::Expected<void> take_stream(const ObjectRef &qp, const ri_llp_params_t &llp, krdma::UniqueFd fd,
                                     krdma::UniqueFd channel) override {
        // The RDMA-mode transition, the consumer's half: the uVP takes the socket over (a local step; the kAL
        // already moved the kVP's QP to RTS). An offloading RNIC's kVP kept the socket: the record comes without
        // one and the uVP only learns that its QP is in RTS.
        const bool with_socket = static_cast<bool>(fd);
        const bool same_host = (llp.mpa_flags & RI_LLP_SAME_HOST) != 0;
        if (with_socket && same_host && !channel) {
            stream_ended(qp);  // the kAL resets the connection
            return rdma::Error(RI_EPROTO, "the kAL's ESTABLISHED record names the same-host path but came without "
                                          "the channel's end");
        }
        ri_qp_attr_t a{};
        a.state = RI_QPS_RTS;
        a.llp = llp;
        // The channel's end, on the same-host path, is the QP's as the socket is (zero otherwise: no descriptor).
        a.llp.channel = same_host ? (with_socket ? channel.release() : -1) : 0;
        a.llp.fd = with_socket ? fd.release() : -1;
        const ri_status_t rc = qp.verbs->modify_qp(qp.as<ri_qp_t>(), &a, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP);
        if (rc != RI_OK) {
            stream_ended(qp);  // the kAL resets the connection
            if (!with_socket) {
                return rdma::Error(RI_EPROTO, "the kAL's ESTABLISHED record came without the connection's socket, "
                                              "which this RNIC's uVP needs");
            }
            return rdma::Error(rc, std::string("the uVP did not take the connection: ") + std::strerror(rc));
        }
        return {};
    }

    void stream_ended(const ObjectRef &qp) noexcept override {
        // The uVP may not have seen the end on its own reference yet, or ever (an error the socket reports once
        // may have been the kAL's to read): the local QP follows now, so posted work flushes and new work fails.
        ri_qp_attr_t err{};
        err.state = RI_QPS_ERROR;
        (void)qp.verbs->modify_qp(qp.as<ri_qp_t>(), &err, RI_QP_ATTR_STATE);
    }

private:
    static krdma_connect connect_request(const ObjectRef &qp, const ri_net_addr_t &remote, uint16_t port,
                                         std::span<const uint8_t> private_data, uint64_t context,
                                         uint32_t timeout_ms) {
        krdma_connect q{};
        q.qp = qp.kal;
        q.context = context;
        q.remote = remote;
        q.port = port;
        q.timeout_ms = timeout_ms;
        krdma::set_private_data(q, private_data);
        return q;
    }

    static krdma_accept accept_request(uint64_t request, const ObjectRef &qp, std::span<const uint8_t> private_data,
                                       uint64_t context) {
        krdma_accept q{};
        q.request = request;
        q.qp = qp.kal;
        q.context = context;
        krdma::set_private_data(q, private_data);
        return q;
    }

    // A connection command sent without waiting: a refusal becomes the connection record @p failure describes.
    template <class T>
    rdma::Expected<void> post(uint32_t cmd, const T &request, const DeviceClient::PostedFailure &failure) {
        return core_->client->post(cmd, {reinterpret_cast<const uint8_t *>(&request), sizeof request}, failure);
    }

    // A connection command: its reply struct is copied back into @p io.
    template <class T>
    rdma::Expected<void> command(uint32_t cmd, T &io, const std::string &what, std::span<const int> fds = {}) {
        auto r = core_->client->call_into(cmd, {reinterpret_cast<const uint8_t *>(&io), sizeof io},
                                          {reinterpret_cast<uint8_t *>(&io), sizeof io}, fds);
        if (!r) return r.error();
        if (r->status != RI_OK) {
            const rdma::Error e = refusal(r->status, r->why());  // the kAL's reason, when it gave one
            return rdma::Error(e.code(), what + " failed: " + e.message());
        }
        return {};
    }

    // Runs the create verb @p verb (named @p what) with @p cookie on its create op; @p handle gets the kAL's handle
    // of the object. A refusal's error has the kAL's reason, which the uVP could not pass on through the RNIC-PI.
    template <class Verb>
    rdma::Expected<void> create(uint32_t cookie, uint64_t &handle, const char *what, Verb &&verb,
                                uint32_t *number = nullptr) {
        std::lock_guard lock(core_->create_mutex);
        core_->create_cookie = cookie;
        core_->created = 0;
        core_->created_number = 0;
        core_->create_refusal.clear();
        const ri_status_t rc = verb();
        core_->create_cookie = 0;
        handle = rc == RI_OK ? core_->created : 0;
        if (number != nullptr) *number = rc == RI_OK ? core_->created_number : 0;
        if (rc == RI_OK) return {};
        if (core_->create_refusal.empty()) return verb_error(rc, what);
        return rdma::Error(rc, std::string(what) + " failed: " + core_->create_refusal);
    }

    Open *open_of(const ObjectRef &rnic) {
        std::lock_guard lock(mutex_);
        auto it = opens_.find(rnic.as<ri_rnic_t>());
        return it == opens_.end() ? nullptr : it->second.get();
    }

    std::shared_ptr<Core> core_;
    rdma::rnicpi::ModuleLoader loader_;
    bool embedded_;
    std::mutex mutex_;  // guards the loader and the opens
    std::map<ri_rnic_t, std::unique_ptr<Open>> opens_;
    std::thread thread_;
    std::shared_ptr<Pump> pump_;  // made by start()
};

}  // namespace

namespace {

// Events find their objects by cookie, which a 1.0 kAL neither keeps nor repeats.
rdma::Expected<void> check_cookies(const DeviceClient &c, const std::string &where) {
    if (c.abi_minor() >= 1) return {};
    return rdma::Error(RI_EPROTO, where + " speaks device protocol 1.0; this access layer needs 1.1 (event records "
                                          "that name objects by cookie): upgrade krdmad");
}

}  // namespace

rdma::Expected<std::unique_ptr<KalLink>> connect_device_link(const std::filesystem::path &device) {
    auto c = DeviceClient::connect(device);
    if (!c) return c.error();
    if (auto ok = check_cookies(**c, "krdmad at " + device.string()); !ok) return ok.error();
    return std::unique_ptr<KalLink>(new DeviceLink(std::move(*c), nullptr, false));
}

rdma::Expected<std::unique_ptr<KalLink>> adopt_device_link(krdma::UniqueFd socket, std::shared_ptr<void> keep_alive) {
    auto c = DeviceClient::adopt(std::move(socket));
    if (!c) return c.error();
    if (auto ok = check_cookies(**c, "the embedded kAL"); !ok) return ok.error();
    return std::unique_ptr<KalLink>(new DeviceLink(std::move(*c), std::move(keep_alive), true));
}

}  // namespace ual
