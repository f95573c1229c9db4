// The user access layer: device, RNIC list, uVP loading on first use, event thread, and the object model.
#include "ual/access_layer.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "client.hpp"
#include "config.hpp"
#include "embedded_kal.hpp"
#include "kal/consumer_host.hpp"
#include "net_addr.hpp"
#include "rnicpi/host/log.hpp"
#include "syscall.hpp"
#include "worker_pool.hpp"

namespace ual {
namespace {

constexpr const char *kComponent = "ual";

// The kAL handle of the object a verb creates is seen only by the ri_syscall upcall the uVP makes inside the verb;
// the verb's caller names the op it waits for, and the upcall leaves the handle here (per thread: verbs may run in
// several threads at once).
struct Capture {
    uint32_t op = 0;
    uint64_t handle = 0;
};
thread_local Capture t_capture;

class CaptureScope {
public:
    explicit CaptureScope(uint32_t op) noexcept { t_capture = Capture{op, 0}; }
    ~CaptureScope() { t_capture = Capture{}; }
    CaptureScope(const CaptureScope &) = delete;
    CaptureScope &operator=(const CaptureScope &) = delete;
    [[nodiscard]] uint64_t handle() const noexcept { return t_capture.handle; }
};

ri_status_t ual_syscall(void *host_ctx, ri_syscall_t *call) noexcept {
    if (call != nullptr) RDMA_LOG_DEBUG(kComponent, "ri_syscall op %u: to the kAL", call->op);
    ri_status_t rc = device_syscall(host_ctx, call);
    if (call != nullptr) {
        RDMA_LOG_DEBUG(kComponent, "ri_syscall op %u: kAL answered %d, handle %#lx", call->op, rc,
                       static_cast<unsigned long>(call->handle_out));
    }
    if (rc == RI_OK && call != nullptr && call->op == t_capture.op) t_capture.handle = call->handle_out;
    return rc;
}

const ri_host_ops_t kUalHostOps{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr,
                                &ual_syscall};

rdma::Error verb_error(ri_status_t rc, const char *verb) {
    return rdma::Error(rc, std::string(verb) + " failed: " + std::strerror(rc));
}

std::string field(const char *s, size_t cap) { return std::string(s, strnlen(s, cap)); }

// The dispatcher event of an asynchronous event record, whether a kVP (through the kAL) or the uVP raised it.
Event async_event(const ri_async_event_t &a) {
    Event ev;
    ev.stream = a.resource_type == RI_RES_RNIC ? EventStream::unaffiliated_async : EventStream::affiliated_async;
    ev.id = a.event_id;
    ev.resource_type = a.resource_type;
    ev.resource_id = a.resource_id;
    ev.context = a.context;
    ev.detail = a.detail;
    return ev;
}

// Releases the provider object @p handle with the destroy verb @p destroy; the handle is forgotten only when the
// provider agrees (it answers EBUSY while children exist).
template <class H, class Destroy>
rdma::Status release(H &handle, Destroy destroy) {
    if (handle == nullptr) return rdma::Status(RI_OK);
    if (ri_status_t rc = destroy(handle); rc != RI_OK) return rdma::Status(rc);
    handle = nullptr;
    return rdma::Status(RI_OK);
}

// A destructor's close: what the consumer did not close is closed here, and a refusal is logged.
template <class T>
void close_quietly(T &object, const char *what) {
    if (rdma::Status st = object.close(); !st.ok()) {
        RDMA_LOG_WARN(kComponent, "%s failed: %s", what, std::strerror(st.code()));
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// AccessLayer

rdma::Expected<std::shared_ptr<AccessLayer>> AccessLayer::open_hosted(const Options &options) {
    std::shared_ptr<AccessLayer> al(new AccessLayer());
    al->host_ = options.host;
    al->pool_ = std::make_unique<WorkerPool>(options.workers, 4096);
    // The kAL calls back on its serving thread (connection events) and the kVP's threads (asynchronous and
    // completion events); a callback in flight may outlive this access layer, hence the weak reference.
    kal::HostedCallbacks cb;
    std::weak_ptr<AccessLayer> w = al;
    cb.cm = [w](const krdma_cm_event &e) {
        if (auto self = w.lock()) self->route_cm(CmRecord{e, krdma::UniqueFd()});
    };
    cb.async = [w](const krdma_event &e) {
        if (auto self = w.lock()) self->route(e);
    };
    cb.completion = [w](uint64_t cq) {
        if (auto self = w.lock()) {
            krdma_event e{};
            e.event = KRDMA_EVENT_COMPLETION;
            e.object = cq;
            self->route(e);
        }
    };
    al->hosted_ = options.host->host_consumer(std::move(cb), options.host_name);
    if (!al->hosted_) return rdma::Error(RI_ENODEV, "the kAL refused to host a consumer");
    RDMA_LOG_DEBUG(kComponent, "access layer open (hosted in the kAL, client %#x)", al->hosted_->client_id());
    return al;
}

rdma::Status AccessLayer::hosted_destroy(uint64_t handle, uint8_t type) {
    auto r = hosted_->destroy(kal::HostedObject{handle, static_cast<kal::ResourceType>(type), nullptr, nullptr});
    return rdma::Status(r ? RI_OK : r.error().code());
}

rdma::Expected<std::shared_ptr<AccessLayer>> AccessLayer::open(const Options &options) {
    if (options.host != nullptr) return open_hosted(options);
    std::shared_ptr<AccessLayer> al(new AccessLayer());
    std::filesystem::path embedded = options.embedded_config;
    const char *embedded_from = "ual::Options::embedded_config";
    if (embedded.empty()) {
        if (const char *env = std::getenv("OPENRDMA_EMBEDDED_CONFIG"); env != nullptr && *env != '\0') {
            embedded = env;
            embedded_from = "$OPENRDMA_EMBEDDED_CONFIG";
        }
    }
    if (!embedded.empty()) {
        // The message names the file and the place in it; say where the file name came from too.
        auto cfg = kal::load_config(embedded);
        if (!cfg) {
            return rdma::Error(cfg.error().code(), cfg.error().message() + " (the embedded kAL's configuration, from " +
                                                       embedded_from + ")");
        }
        auto k = kal::EmbeddedKal::start(*cfg);
        if (!k) return rdma::Error(k.error().code(), "the embedded kAL did not start: " + k.error().message());
        al->embedded_ = std::move(*k);
        auto sock = al->embedded_->connect_local();
        if (!sock) return sock.error();
        auto c = DeviceClient::adopt(std::move(*sock));
        if (!c) return c.error();
        al->device_ = std::move(*c);
    } else {
        std::filesystem::path dev = options.device;
        if (dev.empty()) {
            const char *env = std::getenv("KRDMA_DEVICE");
            dev = env != nullptr && *env != '\0' ? env : KRDMA_DEFAULT_DEVICE;
        }
        auto c = DeviceClient::connect(dev);
        if (!c) {
            const int e = c.error().code();
            if (e != RI_ENOENT && e != RI_ECONNREFUSED) return c.error();
            return rdma::Error(e, "krdmad is not running at " + dev.string() + " (" + std::strerror(e) +
                                      "): start it (systemctl start krdmad, or krdmad --config FILE), point "
                                      "$KRDMA_DEVICE at the device of the krdmad that runs, or set "
                                      "$OPENRDMA_EMBEDDED_CONFIG to a krdmad configuration file to host a kAL in "
                                      "this process");
        }
        al->device_ = std::move(*c);
    }
    al->loader_ = std::make_unique<rdma::rnicpi::ModuleLoader>(kUalHostOps);
    al->pool_ = std::make_unique<WorkerPool>(options.workers, 4096);
    al->stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!al->stop_fd_) return rdma::Error(errno, "eventfd failed");
    al->thread_ = std::thread([raw = al.get()] { raw->event_loop(); });
    RDMA_LOG_DEBUG(kComponent, "access layer open (%s kAL, client %u)", al->embedded_ ? "embedded" : "krdmad",
                   al->device_->hello().client_id);
    return al;
}

AccessLayer::~AccessLayer() {
    hosted_.reset();  // no callbacks after this (a late one finds no access layer)
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
        thread_.detach();  // the event thread dropped the last reference: it touches nothing of ours afterwards
    } else if (thread_.joinable()) {
        uint64_t one = 1;
        (void)!::write(stop_fd_.get(), &one, sizeof one);
        thread_.join();
    }
    pool_.reset();  // runs the callbacks still queued
    loader_.reset();
    device_.reset();  // the kAL tears down anything left
}

SimpleDispatcher::Executor AccessLayer::executor() {
    return [w = std::weak_ptr<AccessLayer>(weak_from_this())](std::function<void()> job) {
        if (auto al = w.lock()) {
            if (!al->pool_->submit(std::move(job))) RDMA_LOG_WARN(kComponent, "worker queue full: a callback was dropped");
        }
    };
}

void AccessLayer::event_loop() {
    bool device_open = true;
    for (;;) {
        pollfd fds[3] = {{stop_fd_.get(), POLLIN, 0},
                         {device_open ? device_->fd() : -1, POLLIN, 0},
                         {device_->queued_fd(), POLLIN, 0}};
        if (::poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            RDMA_LOG_ERROR(kComponent, "event thread: poll failed: %s", std::strerror(errno));
            return;
        }
        if (fds[0].revents != 0) return;
        // Routing may hold the last references to adapters and through them to this access layer: keep it alive
        // while routing, and if the release below was the last one, leave without touching any member.
        std::shared_ptr<AccessLayer> self = weak_from_this().lock();
        if (!self) return;  // being destroyed by another thread, which joins this one
        while (auto e = device_->next_event()) route(*e);
        while (auto c = device_->next_cm_event()) route_cm(std::move(*c));
        if (device_open && device_->closed()) {
            device_open = false;
            RDMA_LOG_WARN(kComponent, "the kAL closed the device: every RNIC of this process is unusable");
            krdma_event gone{};
            gone.event = KRDMA_EVENT_SHUTDOWN;
            route(gone);
        }
        std::weak_ptr<AccessLayer> alive = self;
        self.reset();
        if (alive.expired()) return;
    }
}

void AccessLayer::route(const krdma_event &e) {
    if (e.event == KRDMA_EVENT_COMPLETION) {
        std::shared_ptr<CompletionQueue> cq;
        {
            std::lock_guard lock(mutex_);
            if (auto it = cqs_.find(e.object); it != cqs_.end()) cq = it->second.lock();
        }
        if (cq) cq->notified();
        return;
    }
    std::vector<std::shared_ptr<Adapter>> targets;
    {
        std::lock_guard lock(mutex_);
        if (e.event == KRDMA_EVENT_SHUTDOWN) {
            if (kal_gone_) return;  // told once: krdmad's own notice, or the device closing
            kal_gone_ = true;
            for (auto &w : all_adapters_) {
                if (auto a = w.lock()) targets.push_back(std::move(a));
            }
        } else if (auto it = adapters_.find(e.object); it != adapters_.end()) {
            if (auto a = it->second.lock()) targets.push_back(std::move(a));
        }
    }
    ri_async_event_t async{};
    if (e.event == KRDMA_EVENT_ASYNC) {
        async = ri_async_event_t{e.resource_type, e.event_id,  e.resource_id,
                                 e.context,       static_cast<uint32_t>(e.detail), 0};
    } else if (e.event == KRDMA_EVENT_SHUTDOWN) {
        async.resource_type = RI_RES_RNIC;
        async.event_id = RI_AE_RNIC_FATAL;  // the kAL is gone: nothing of the RNIC works any more
    } else {
        return;  // an event this uAL does not know
    }
    const Event ev = async_event(async);
    for (auto &a : targets) a->deliver_async(ev);
    if (hosted_ && e.event == KRDMA_EVENT_ASYNC && e.resource_type == RI_RES_QP) end_hosted_stream(e);
    if (e.event == KRDMA_EVENT_SHUTDOWN) {
        // Every connection of this process is lost with the kAL: QPs to ERROR (the uVP flushes and closes its
        // sockets), and each endpoint's consumer hears that its connection broke.
        std::vector<std::shared_ptr<Endpoint>> eps;
        {
            std::lock_guard lock(mutex_);
            for (auto &[h, w] : endpoints_) {
                if (auto ep = w.lock()) eps.push_back(std::move(ep));
            }
        }
        for (auto &ep : eps) {
            ri_qp_attr_t a{};
            a.state = RI_QPS_ERROR;
            (void)ep->v_->modify_qp(ep->qp_, &a, RI_QP_ATTR_STATE);
            Event b;
            b.stream = EventStream::cm_message;
            b.id = KRDMA_CM_BROKEN;
            b.context = ep->init_.context;
            b.detail = RI_ENODEV;
            auto d = std::make_shared<ConnectionData>();
            d->status = RI_ENODEV;
            b.connection = std::move(d);
            ep->deliver_cm(std::move(b));
        }
    }
}

void AccessLayer::end_hosted_stream(const krdma_event &e) {
    // The kVP runs a hosted consumer's stream; when its data path ends a QP on its own (a Terminate either way, a
    // fatal error), the kAL must hear it as it hears a uVP's QP going to ERROR - then it closes the stream and
    // tells both consumers why. The uAL speaks for the kVP here, off the kVP's thread.
    switch (e.event_id) {
        case RI_AE_QP_FATAL:
        case RI_AE_QP_TERMINATE_RECEIVED:
        case RI_AE_QP_TERMINATE_SENT:
        case RI_AE_QP_LOCAL_ACCESS_ERROR:
        case RI_AE_QP_REMOTE_ACCESS_ERROR:
        case RI_AE_QP_PROTOCOL_ERROR: break;
        default: return;
    }
    std::shared_ptr<Endpoint> ep;
    {
        std::lock_guard lock(mutex_);
        for (auto &[h, w] : endpoints_) {
            auto p = w.lock();
            if (p && p->qp_num_ == e.resource_id && p->pz_ && p->pz_->adapter()->kal_handle_ == e.object) {
                ep = std::move(p);
                break;
            }
        }
    }
    if (!ep || !ep->streaming_.exchange(false)) return;  // told once per connection
    (void)pool_->submit([w = weak_from_this(), ep] {
        auto self = w.lock();
        if (!self || !self->hosted_) return;
        ri_qp_attr_t a{};
        a.state = RI_QPS_ERROR;
        (void)self->hosted_->modify_qp(kal::HostedObject{ep->kal_handle_, kal::ResourceType::qp, ep->qp_, ep->v_}, a,
                                       RI_QP_ATTR_STATE);
    });
}

template <class T>
rdma::Status AccessLayer::command(uint32_t cmd, T &io, std::span<const int> fds) {
    auto r = device_->call_into(cmd, {reinterpret_cast<const uint8_t *>(&io), sizeof io},
                                {reinterpret_cast<uint8_t *>(&io), sizeof io}, fds);
    if (!r) return rdma::Status(r.error().code());
    return rdma::Status(r->status);
}

void AccessLayer::route_cm(CmRecord &&r) {
    const krdma_cm_event &e = r.event;
    auto data = std::make_shared<ConnectionData>();
    data->request = e.request;
    data->status = e.status;
    data->term = e.term;
    data->llp = e.llp;
    data->private_data.assign(e.private_data, e.private_data + std::min<size_t>(e.private_data_len, KRDMA_MAX_PRIVATE_DATA));
    Event ev;
    ev.id = e.type;
    ev.context = e.context;
    ev.detail = static_cast<uint32_t>(e.status);
    if (e.type == KRDMA_CM_CONNECT_REQUEST) {
        std::shared_ptr<ListenPoint> lp;
        {
            std::lock_guard lock(mutex_);
            if (auto it = listeners_.find(e.object); it != listeners_.end()) lp = it->second.lock();
        }
        if (!lp || !lp->requests_) {
            // Nobody will decide: refuse now rather than let the peer wait for the kAL's timeout.
            krdma_reject q{};
            q.request = e.request;
            (void)command(KRDMA_CMD_REJECT, q);
            return;
        }
        ev.stream = EventStream::cm_request;
        ev.connection = std::move(data);
        lp->requests_->post(ev);
        return;
    }
    std::shared_ptr<Endpoint> ep;
    {
        std::lock_guard lock(mutex_);
        if (auto it = endpoints_.find(e.object); it != endpoints_.end()) ep = it->second.lock();
    }
    if (!ep) return;  // the endpoint is gone; an ESTABLISHED record's socket closes with the record
    ev.stream = EventStream::cm_message;
    if (e.type == KRDMA_CM_DISCONNECTED && !ep->local_close_) {
        // The kAL saw the QP go to ERROR without the peer closing; this consumer never disconnected, so its RNIC
        // tore the stream down (e.g. after sending a Terminate): for the consumer the connection broke.
        ev.id = KRDMA_CM_BROKEN;
        data->status = ECONNABORTED;
        ev.detail = ECONNABORTED;
    }
    const bool ended = e.type == KRDMA_CM_PEER_DISCONNECT || e.type == KRDMA_CM_BROKEN || e.type == KRDMA_CM_DISCONNECTED;
    if (hosted_) {
        // The kAL handed the stream to the kVP (ESTABLISHED) and moved the kVP's QP at its end: nothing is local.
        ep->streaming_ = e.type == KRDMA_CM_ESTABLISHED;
        if (e.type == KRDMA_CM_ESTABLISHED) ep->local_close_ = false;
        ev.connection = std::move(data);
        ep->deliver_cm(std::move(ev));
        return;
    }
    if (ended && ep->streaming_.exchange(false)) {
        // The kAL saw the connection end (and moved the kVP's QP to ERROR). The uVP may not have seen it on its own
        // reference yet, or ever (an error the socket reports once may have been the kAL's to read): the local QP
        // follows now, so posted work flushes and new work fails, before the consumer is told.
        ri_qp_attr_t err{};
        err.state = RI_QPS_ERROR;
        (void)ep->v_->modify_qp(ep->qp_, &err, RI_QP_ATTR_STATE);
    }
    if (e.type == KRDMA_CM_ESTABLISHED) {
        ep->local_close_ = false;
        // The RDMA-mode transition, the consumer's half: the uVP takes the socket over (a local step; the kAL
        // already moved the kVP's QP to RTS). Only then is the consumer told.
        ri_qp_attr_t a{};
        a.state = RI_QPS_RTS;
        a.llp = e.llp;
        a.llp.fd = r.fd.release();
        if (a.llp.fd < 0) {
            ev.id = KRDMA_CM_BROKEN;
            data->status = EPROTO;
        } else if (ri_status_t rc = ep->v_->modify_qp(ep->qp_, &a, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP); rc != RI_OK) {
            RDMA_LOG_WARN(kComponent, "the uVP did not take the connection of QP %u: %s", ep->qp_num_,
                          std::strerror(rc));
            ri_qp_attr_t err{};
            err.state = RI_QPS_ERROR;
            (void)ep->v_->modify_qp(ep->qp_, &err, RI_QP_ATTR_STATE);  // the kAL resets the connection
            ev.id = KRDMA_CM_BROKEN;
            data->status = rc;
        }
        if (ev.id == KRDMA_CM_ESTABLISHED) ep->streaming_ = true;
        ev.detail = static_cast<uint32_t>(data->status);
    }
    ev.connection = std::move(data);
    ep->deliver_cm(std::move(ev));
}

void AccessLayer::register_adapter(uint64_t kal_rnic, const std::shared_ptr<Adapter> &a) {
    std::lock_guard lock(mutex_);
    if (kal_rnic != 0) adapters_[kal_rnic] = a;  // a uVP that opened without the kAL gets no kVP events
    std::erase_if(all_adapters_, [](const std::weak_ptr<Adapter> &w) { return w.expired(); });
    all_adapters_.push_back(a);
}
void AccessLayer::unregister_adapter(uint64_t kal_rnic) {
    std::lock_guard lock(mutex_);
    adapters_.erase(kal_rnic);
}
void AccessLayer::register_cq(uint64_t kal_cq, const std::shared_ptr<CompletionQueue> &cq) {
    if (kal_cq == 0) return;
    std::lock_guard lock(mutex_);
    cqs_[kal_cq] = cq;
}
void AccessLayer::unregister_cq(uint64_t kal_cq) {
    std::lock_guard lock(mutex_);
    cqs_.erase(kal_cq);
}

rdma::Expected<std::vector<RnicDescription>> AccessLayer::rnics() {
    std::vector<RnicDescription> out;
    if (hosted_) {
        for (const kal::RnicInfo &r : host_->rnics()) {
            out.push_back(RnicDescription{r.name, r.provider, r.vendor, r.netdev, r.address, r.uvp_library});
        }
        return out;
    }
    for (uint32_t i = 0;; ++i) {
        krdma_list_rnics q{};
        q.index = i;
        auto r = device_->call(KRDMA_CMD_LIST_RNICS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r) return r.error();
        if (r->status != RI_OK) return rdma::Error(r->status, "listing RNICs failed");
        std::memcpy(&q, r->payload.data(), sizeof q);
        if (i >= q.count) break;
        const krdma_rnic_info &n = q.info;
        out.push_back(RnicDescription{field(n.name, sizeof n.name), field(n.provider, sizeof n.provider),
                                      field(n.vendor, sizeof n.vendor), field(n.netdev, sizeof n.netdev),
                                      field(n.address, sizeof n.address), field(n.uvp_library, sizeof n.uvp_library)});
    }
    return out;
}

rdma::Expected<std::shared_ptr<Adapter>> AccessLayer::open_adapter(const std::string &name_or_address) {
    auto list = rnics();
    if (!list) return list.error();
    const RnicDescription *d = nullptr;
    for (const auto &r : *list) {
        if (r.name == name_or_address) d = &r;
    }
    for (const auto &r : *list) {
        if (d == nullptr && r.address == name_or_address) d = &r;
    }
    if (d == nullptr) return rdma::Error(RI_ENODEV, "no RNIC is named or serves '" + name_or_address + "'");
    if (hosted_) {
        // A hosted consumer opens the RNIC through the kAL and calls the kVP's verbs; its asynchronous and
        // completion events come by the kAL's callbacks.
        auto o = hosted_->open_rnic(d->name);
        if (!o) return o.error();
        std::shared_ptr<Adapter> a(new Adapter());
        a->al_ = shared_from_this();
        a->v_ = o->verbs;
        a->rnic_ = static_cast<ri_rnic_t>(o->kvp);
        a->kal_handle_ = o->handle;
        a->desc_ = *d;
        register_adapter(a->kal_handle_, a);
        return a;
    }
    if (d->uvp_library.empty()) {
        return rdma::Error(RI_EOPNOTSUPP, "RNIC " + d->name + " has no user-mode provider (kernel consumers only)");
    }
    rdma::rnicpi::ModuleRef uvp;
    {
        // The uVP is loaded when a consumer first uses one of its RNICs, and stays loaded while adapters use it.
        std::lock_guard lock(mutex_);
        for (auto &m : loader_->modules()) {
            if (m->path() == std::filesystem::path(d->uvp_library)) uvp = m;
        }
        if (!uvp) {
            auto r = loader_->load(d->uvp_library, RI_MODE_NONPRIVILEGED);
            if (!r) return r.error();
            uvp = std::move(*r);
            RDMA_LOG_INFO(kComponent, "loaded uVP %s for RNIC %s", d->uvp_library.c_str(), d->name.c_str());
        }
    }
    std::shared_ptr<Adapter> a(new Adapter());
    a->al_ = shared_from_this();
    a->v_ = &uvp->verbs();
    a->uvp_ = std::move(uvp);
    a->desc_ = *d;
    ri_rnic_open_params_t p{};
    p.host_ctx = device_.get();
    std::memcpy(p.instance_name, d->name.c_str(), std::min(d->name.size(), sizeof p.instance_name - 1));
    {
        CaptureScope cap(RI_OPEN_RNIC);
        if (ri_status_t rc = a->v_->open_rnic(&p, &a->rnic_); rc != RI_OK) {
            a->rnic_ = nullptr;
            return verb_error(rc, "Open RNIC");
        }
        a->kal_handle_ = cap.handle();
    }
    uint32_t aeh = 0;
    if (ri_status_t rc = a->v_->set_aeh(a->rnic_, &Adapter::on_async, a.get(), &aeh); rc != RI_OK) {
        return verb_error(rc, "Set AEH");
    }
    if (ri_status_t rc = a->v_->set_ceh(a->rnic_, &Adapter::on_completion, a.get(), &a->ceh_id_); rc != RI_OK) {
        return verb_error(rc, "Set CEH");
    }
    register_adapter(a->kal_handle_, a);
    return a;
}

// ---------------------------------------------------------------------------------------------------------------
// Adapter

Adapter::~Adapter() { close_quietly(*this, "closing an RNIC"); }

rdma::Status Adapter::close() {
    const bool open = rnic_ != nullptr;
    if (open && al_ && al_->hosted()) {
        if (rdma::Status st = al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::rnic)); !st.ok()) {
            return st;
        }
        rnic_ = nullptr;
        al_->unregister_adapter(kal_handle_);
        return rdma::Status(RI_OK);
    }
    if (rdma::Status st = release(rnic_, v_ != nullptr ? v_->close_rnic : nullptr); !st.ok() || !open) return st;
    if (kal_handle_ != 0) al_->unregister_adapter(kal_handle_);
    return rdma::Status(RI_OK);
}

rdma::Expected<std::shared_ptr<ListenPoint>> Adapter::listen(uint16_t port, std::shared_ptr<SimpleDispatcher> requests,
                                                              uint64_t context, uint16_t backlog) {
    if (kal_handle_ == 0) return rdma::Error(RI_EOPNOTSUPP, "this RNIC open has no kAL side to listen with");
    if (requests && requests->stream() != EventStream::cm_request) {
        return rdma::Error(RI_EINVAL, "connection requests need a dispatcher of the cm_request stream");
    }
    krdma_listen q{};
    q.rnic = kal_handle_;
    q.context = context;
    q.port = port;
    q.backlog = backlog;
    if (al_->hosted()) {
        auto r = al_->hosted_->listen(kal::HostedObject{kal_handle_, kal::ResourceType::rnic, rnic_, v_}, port, context);
        if (!r) return r.error();
        q.handle = r->first;
        q.port = r->second;
    } else if (rdma::Status st = al_->command(KRDMA_CMD_LISTEN, q); !st.ok()) {
        return rdma::Error(st.code(), "Listen on port " + std::to_string(port) + " failed: " + std::strerror(st.code()));
    }
    std::shared_ptr<ListenPoint> lp(new ListenPoint());
    lp->adapter_ = shared_from_this();
    lp->requests_ = std::move(requests);
    lp->kal_handle_ = q.handle;
    lp->port_ = q.port;
    std::lock_guard lock(al_->mutex_);
    std::erase_if(al_->listeners_, [](const auto &kv) { return kv.second.expired(); });
    al_->listeners_[q.handle] = lp;
    return lp;
}

rdma::Status Adapter::reject(uint64_t request, std::span<const uint8_t> private_data) {
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return rdma::Status(RI_EMSGSIZE);
    if (al_->hosted()) {
        auto r = al_->hosted_->reject(request, private_data);
        return rdma::Status(r ? RI_OK : r.error().code());
    }
    krdma_reject q{};
    q.request = request;
    q.private_data_len = static_cast<uint16_t>(private_data.size());
    if (!private_data.empty()) std::memcpy(q.private_data, private_data.data(), private_data.size());
    return al_->command(KRDMA_CMD_REJECT, q);
}

rdma::Expected<ri_rnic_attr_t> Adapter::query() const {
    ri_rnic_attr_t attr{};
    if (ri_status_t rc = v_->query_rnic(rnic_, &attr); rc != RI_OK) return verb_error(rc, "Query RNIC");
    return attr;
}

void Adapter::set_async_dispatchers(std::shared_ptr<SimpleDispatcher> affiliated,
                                    std::shared_ptr<SimpleDispatcher> unaffiliated) {
    std::lock_guard lock(mutex_);
    affiliated_ = std::move(affiliated);
    unaffiliated_ = std::move(unaffiliated);
}

void Adapter::deliver_async(const Event &e) {
    std::shared_ptr<SimpleDispatcher> d;
    {
        std::lock_guard lock(mutex_);
        d = e.stream == EventStream::unaffiliated_async ? unaffiliated_ : affiliated_;
    }
    // A consumer that set no dispatcher asked not to hear about these events (as with an unread async fd in
    // rdma-core): that is not worth a warning; a full queue loses an event the consumer wanted.
    if (!d) {
        RDMA_LOG_DEBUG(kComponent, "RNIC %s: asynchronous event %u on resource %lu dropped (no dispatcher)",
                       desc_.name.c_str(), e.id, static_cast<unsigned long>(e.resource_id));
    } else if (!d->post(e)) {
        RDMA_LOG_WARN(kComponent, "RNIC %s: asynchronous event %u on resource %lu dropped (queue full)",
                      desc_.name.c_str(), e.id, static_cast<unsigned long>(e.resource_id));
    }
}

void Adapter::on_async(void *ctx, ri_rnic_t, const ri_async_event_t *e) {
    if (ctx == nullptr || e == nullptr) return;
    static_cast<Adapter *>(ctx)->deliver_async(async_event(*e));
}

void Adapter::on_completion(void *ctx, ri_rnic_t, ri_cq_t cq) {
    auto *a = static_cast<Adapter *>(ctx);
    if (a == nullptr) return;
    std::shared_ptr<CompletionQueue> q;
    {
        std::lock_guard lock(a->mutex_);
        if (auto it = a->cqs_.find(cq); it != a->cqs_.end()) q = it->second.lock();
    }
    if (q) q->notified();
}

rdma::Expected<std::shared_ptr<ProtectionZone>> Adapter::create_pz() {
    std::shared_ptr<ProtectionZone> pz(new ProtectionZone());
    if (al_->hosted()) {
        auto o = al_->hosted_->alloc_pd(kal::HostedObject{kal_handle_, kal::ResourceType::rnic, rnic_, v_});
        if (!o) return o.error();
        pz->pd_ = static_cast<ri_pd_t>(o->kvp);
        pz->kal_handle_ = o->handle;
    } else if (ri_status_t rc = v_->alloc_pd(rnic_, &pz->pd_); rc != RI_OK) {
        pz->pd_ = nullptr;
        return verb_error(rc, "Allocate PD");
    }
    pz->adapter_ = shared_from_this();
    return pz;
}

rdma::Expected<std::shared_ptr<CompletionQueue>> Adapter::create_cq(uint32_t depth,
                                                                   const std::shared_ptr<SimpleDispatcher> &dto) {
    if (!dto || dto->stream() != EventStream::dto) {
        return rdma::Error(RI_EINVAL, "a completion queue needs a dispatcher of the DTO stream");
    }
    {
        std::lock_guard lock(dto->poll_mutex_);
        if (dto->cq_ != nullptr) return rdma::Error(RI_EBUSY, "the dispatcher already delivers another CQ");
    }
    std::shared_ptr<CompletionQueue> cq(new CompletionQueue());
    ri_cq_attr_t attr{};
    attr.cqe = depth;
    attr.ceh_id = ceh_id_;
    if (al_->hosted()) {
        auto o = al_->hosted_->create_cq(kal::HostedObject{kal_handle_, kal::ResourceType::rnic, rnic_, v_}, depth);
        if (!o) return o.error();
        cq->cq_ = static_cast<ri_cq_t>(o->kvp);
        cq->kal_handle_ = o->handle;
        ri_cq_attr_t q{};
        if (v_->query_cq(cq->cq_, &q) == RI_OK) attr.cqe = q.cqe;
    } else {
        CaptureScope cap(RI_CREATE_CQ);
        if (ri_status_t rc = v_->create_cq(rnic_, &attr, &cq->cq_); rc != RI_OK) {
            cq->cq_ = nullptr;
            return verb_error(rc, "Create CQ");
        }
        cq->kal_handle_ = cap.handle();
    }
    cq->adapter_ = shared_from_this();
    cq->dto_ = dto;
    cq->depth_ = attr.cqe;
    {
        std::lock_guard lock(dto->poll_mutex_);
        dto->cq_ = cq.get();
    }
    {
        std::lock_guard lock(mutex_);
        cqs_[cq->cq_] = cq;
    }
    al_->register_cq(cq->kal_handle_, cq);
    return cq;
}

// ---------------------------------------------------------------------------------------------------------------
// CompletionQueue

CompletionQueue::~CompletionQueue() { close_quietly(*this, "destroying a CQ"); }

rdma::Status CompletionQueue::close() {
    if (cq_ == nullptr) return rdma::Status(RI_OK);
    // Unbind first, so a notification racing with the destruction finds no CQ to poll; bind again if refused.
    auto bind = [this](bool on) {
        {
            std::lock_guard lock(dto_->poll_mutex_);
            dto_->cq_ = on ? this : nullptr;
        }
        std::lock_guard lock(adapter_->mutex_);
        if (on) {
            adapter_->cqs_[cq_] = weak_from_this();
        } else {
            adapter_->cqs_.erase(cq_);
        }
    };
    bind(false);
    ri_cq_t cq = cq_;
    rdma::Status st = adapter_->al_->hosted()
                          ? adapter_->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::cq))
                          : release(cq, adapter_->verbs().destroy_cq);
    if (!st.ok()) {
        if (!weak_from_this().expired()) bind(true);  // still in use (EBUSY): deliver as before
        return st;
    }
    adapter_->al_->unregister_cq(kal_handle_);
    cq_ = nullptr;
    return rdma::Status(RI_OK);
}

rdma::Expected<size_t> CompletionQueue::poll(std::span<ri_wc_t> wc) noexcept {
    uint32_t n = 0;
    if (ri_status_t rc = adapter_->verbs().poll_cq(cq_, static_cast<uint32_t>(wc.size()), wc.data(), &n); rc != RI_OK) {
        return rdma::Error(rc, "");  // the fast path builds no message
    }
    return static_cast<size_t>(n);
}

rdma::Status CompletionQueue::request_notify(uint32_t type) noexcept {
    return rdma::Status(adapter_->verbs().request_cq_notify(cq_, type));
}

rdma::Expected<uint32_t> CompletionQueue::resize(uint32_t depth) {
    uint32_t actual = 0;
    if (ri_status_t rc = adapter_->verbs().resize_cq(cq_, depth, &actual); rc != RI_OK) return verb_error(rc, "Resize CQ");
    depth_ = actual;
    return actual;
}

void CompletionQueue::notified() noexcept { dto_->notify_completion(); }

// ---------------------------------------------------------------------------------------------------------------
// ProtectionZone and its objects

ProtectionZone::~ProtectionZone() { close_quietly(*this, "deallocating a PD"); }

rdma::Status ProtectionZone::close() {
    if (pd_ != nullptr && adapter_ && adapter_->al_->hosted()) {
        rdma::Status st = adapter_->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::pd));
        if (st.ok()) pd_ = nullptr;
        return st;
    }
    return release(pd_, adapter_ ? adapter_->verbs().dealloc_pd : nullptr);
}

rdma::Expected<std::shared_ptr<Endpoint>> ProtectionZone::create_endpoint(
    const EndpointAttributes &a, const std::shared_ptr<CompletionQueue> &send,
    const std::shared_ptr<CompletionQueue> &recv, const std::shared_ptr<SharedReceiveQueue> &srq) {
    if (!send || !recv) return rdma::Error(RI_EINVAL, "an endpoint needs a send and a receive completion queue");
    if (send->adapter_ != adapter_ || recv->adapter_ != adapter_) {
        return rdma::Error(RI_EINVAL, "the completion queues belong to another adapter");
    }
    if (srq && srq->pz_->adapter_ != adapter_) return rdma::Error(RI_EINVAL, "the SRQ belongs to another adapter");
    const ri_verbs_ops_t &v = adapter_->verbs();
    RDMA_LOG_DEBUG(kComponent, "create endpoint: uVP create_qp");
    std::shared_ptr<Endpoint> ep(new Endpoint());
    ri_qp_init_attr_t ia{};
    ia.type = RI_QPT_RC;
    ia.flags = (a.signal_all ? static_cast<uint32_t>(RI_QP_SIGNAL_ALL) : 0u) |
               (srq ? static_cast<uint32_t>(RI_QP_USE_SRQ) : 0u);
    ia.sq_depth = a.sq_depth;
    ia.rq_depth = srq ? 0 : a.rq_depth;
    ia.sq_sge = a.sq_sge;
    ia.rq_sge = a.rq_sge;
    ia.rd_sge = a.rd_sge;
    ia.max_inline = a.max_inline;
    ia.ird = a.ird;
    ia.ord = a.ord;
    ia.context = a.context;
    if (adapter_->al_->hosted()) {
        const kal::HostedObject srq_o{srq ? srq->kal_handle_ : 0, kal::ResourceType::srq, srq ? srq->srq_ : nullptr, &v};
        auto o = adapter_->al_->hosted_->create_qp(kal::HostedObject{kal_handle_, kal::ResourceType::pd, pd_, &v},
                                                   kal::HostedObject{send->kal_handle_, kal::ResourceType::cq, send->cq_, &v},
                                                   kal::HostedObject{recv->kal_handle_, kal::ResourceType::cq, recv->cq_, &v},
                                                   ia, srq ? &srq_o : nullptr);
        if (!o) return o.error();
        ep->qp_ = static_cast<ri_qp_t>(o->kvp);
        ep->kal_handle_ = o->handle;
    } else {
        CaptureScope cap(RI_CREATE_QP);
        if (ri_status_t rc = v.create_qp(pd_, send->cq_, recv->cq_, srq ? srq->srq_ : nullptr, &ia, &ep->qp_);
            rc != RI_OK) {
            ep->qp_ = nullptr;
            return verb_error(rc, "Create QP");
        }
        ep->kal_handle_ = cap.handle();
    }
    ep->v_ = &v;
    ep->pz_ = shared_from_this();
    ep->send_ = send;
    ep->recv_ = recv;
    ep->srq_ = srq;
    ep->init_ = ia;
    ri_qp_attr_t q{};
    if (ri_status_t rc = v.query_qp(ep->qp_, &q); rc != RI_OK) return verb_error(rc, "Query QP");
    ep->qp_num_ = q.qp_num;
    if (ep->kal_handle_ != 0) {
        AccessLayer &al = *adapter_->al_;
        std::lock_guard lock(al.mutex_);
        std::erase_if(al.endpoints_, [](const auto &kv) { return kv.second.expired(); });
        al.endpoints_[ep->kal_handle_] = ep;
    }
    RDMA_LOG_DEBUG(kComponent, "create endpoint: QP %u ready", ep->qp_num_);
    return ep;
}

rdma::Expected<std::shared_ptr<MemoryRegion>> ProtectionZone::register_memory(void *addr, uint64_t length,
                                                                             uint32_t access) {
    std::shared_ptr<MemoryRegion> mr(new MemoryRegion());
    ri_mr_reg_t reg{};
    reg.addr = reinterpret_cast<uint64_t>(addr);
    reg.length = length;
    reg.iova = (access & RI_ACCESS_ZERO_BASED) != 0 ? 0 : reg.addr;  // zero-based: tagged offsets from 0
    reg.access = access;
    if (adapter_->al_->hosted()) {
        auto o = adapter_->al_->hosted_->register_mr(
            kal::HostedObject{kal_handle_, kal::ResourceType::pd, pd_, &adapter_->verbs()}, addr, length, access,
            mr->keys_);
        if (!o) return o.error();
        mr->mr_ = static_cast<ri_mr_t>(o->kvp);
        mr->kal_handle_ = o->handle;
    } else if (ri_status_t rc = adapter_->verbs().register_mr(pd_, &reg, &mr->mr_, &mr->keys_); rc != RI_OK) {
        mr->mr_ = nullptr;
        return verb_error(rc, "Register Memory Region");
    }
    mr->pz_ = shared_from_this();
    return mr;
}

rdma::Expected<std::shared_ptr<SharedReceiveQueue>> ProtectionZone::create_srq(uint32_t depth, uint32_t sge,
                                                                             uint32_t limit, uint64_t context) {
    std::shared_ptr<SharedReceiveQueue> srq(new SharedReceiveQueue());
    ri_srq_attr_t attr{depth, sge, limit, 0, context};
    if (adapter_->al_->hosted()) {
        auto o = adapter_->al_->hosted_->create_srq(
            kal::HostedObject{kal_handle_, kal::ResourceType::pd, pd_, &adapter_->verbs()}, attr);
        if (!o) return o.error();
        srq->srq_ = static_cast<ri_srq_t>(o->kvp);
        srq->kal_handle_ = o->handle;
    } else if (ri_status_t rc = adapter_->verbs().create_srq(pd_, &attr, &srq->srq_); rc != RI_OK) {
        srq->srq_ = nullptr;
        return verb_error(rc, "Create SRQ");
    }
    srq->pz_ = shared_from_this();
    return srq;
}

rdma::Expected<std::shared_ptr<MemoryWindow>> ProtectionZone::allocate_window(uint32_t type) {
    std::shared_ptr<MemoryWindow> mw(new MemoryWindow());
    if (adapter_->al_->hosted()) {
        auto o = adapter_->al_->hosted_->alloc_mw(
            kal::HostedObject{kal_handle_, kal::ResourceType::pd, pd_, &adapter_->verbs()}, type, mw->rkey_);
        if (!o) return o.error();
        mw->mw_ = static_cast<ri_mw_t>(o->kvp);
        mw->kal_handle_ = o->handle;
    } else if (ri_status_t rc = adapter_->verbs().alloc_mw(pd_, type, &mw->mw_, &mw->rkey_); rc != RI_OK) {
        mw->mw_ = nullptr;
        return verb_error(rc, "Allocate Memory Window");
    }
    mw->pz_ = shared_from_this();
    return mw;
}

Endpoint::~Endpoint() { close_quietly(*this, "destroying a QP"); }

rdma::Status Endpoint::close() {
    const bool open = qp_ != nullptr;
    if (open && pz_ && pz_->adapter()->al_->hosted()) {
        if (rdma::Status st = pz_->adapter()->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::qp));
            !st.ok()) {
            return st;
        }
        qp_ = nullptr;
    } else if (rdma::Status st = release(qp_, v_ != nullptr ? v_->destroy_qp : nullptr); !st.ok() || !open) {
        return st;
    }
    if (kal_handle_ != 0 && pz_) {
        AccessLayer &al = *pz_->adapter()->al_;
        std::lock_guard lock(al.mutex_);
        al.endpoints_.erase(kal_handle_);
    }
    return rdma::Status(RI_OK);
}

void Endpoint::set_connection_dispatcher(std::shared_ptr<SimpleDispatcher> events) {
    std::lock_guard lock(cm_mutex_);
    cm_ = std::move(events);
}

void Endpoint::deliver_cm(Event e) {
    std::shared_ptr<SimpleDispatcher> d;
    {
        std::lock_guard lock(cm_mutex_);
        d = cm_;
    }
    if (d) d->post(e);
}

rdma::Status Endpoint::connect(const std::string &address, uint16_t port, std::span<const uint8_t> private_data,
                               std::chrono::milliseconds timeout) {
    if (qp_ == nullptr || kal_handle_ == 0) return rdma::Status(RI_EINVAL);
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return rdma::Status(RI_EMSGSIZE);
    krdma_connect q{};
    auto remote = kal::llp::parse_net_addr(address);
    if (!remote) return rdma::Status(remote.error().code());
    q.remote = *remote;
    q.qp = kal_handle_;
    q.context = init_.context;
    q.port = port;
    q.timeout_ms = static_cast<uint32_t>(timeout.count());
    q.private_data_len = static_cast<uint16_t>(private_data.size());
    if (!private_data.empty()) std::memcpy(q.private_data, private_data.data(), private_data.size());
    AccessLayer &al = *pz_->adapter()->al_;
    if (al.hosted()) {
        auto r = al.hosted_->connect(kal::HostedObject{kal_handle_, kal::ResourceType::qp, qp_, v_}, address, port,
                                     private_data, init_.context, q.timeout_ms);
        return rdma::Status(r ? RI_OK : r.error().code());
    }
    return al.command(KRDMA_CMD_CONNECT, q);
}

rdma::Status Endpoint::convert(int fd, std::span<const uint8_t> private_data, uint32_t role,
                               std::chrono::milliseconds timeout) {
    if (qp_ == nullptr || kal_handle_ == 0) return rdma::Status(RI_EINVAL);
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return rdma::Status(RI_EMSGSIZE);
    AccessLayer &al = *pz_->adapter()->al_;
    if (al.hosted()) return rdma::Status(RI_EOPNOTSUPP);  // a hosted consumer's sockets are the kAL's own to make
    krdma_convert q{};
    q.qp = kal_handle_;
    q.context = init_.context;
    q.role = role;
    q.timeout_ms = static_cast<uint32_t>(timeout.count());
    q.private_data_len = static_cast<uint16_t>(private_data.size());
    if (!private_data.empty()) std::memcpy(q.private_data, private_data.data(), private_data.size());
    const int fds[1] = {fd};
    return al.command(KRDMA_CMD_CONVERT, q, fds);
}

rdma::Status Endpoint::accept(uint64_t request, std::span<const uint8_t> private_data) {
    if (qp_ == nullptr || kal_handle_ == 0) return rdma::Status(RI_EINVAL);
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return rdma::Status(RI_EMSGSIZE);
    krdma_accept q{};
    q.request = request;
    q.qp = kal_handle_;
    q.context = init_.context;
    q.private_data_len = static_cast<uint16_t>(private_data.size());
    if (!private_data.empty()) std::memcpy(q.private_data, private_data.data(), private_data.size());
    AccessLayer &al = *pz_->adapter()->al_;
    if (al.hosted()) {
        auto r = al.hosted_->accept(request, kal::HostedObject{kal_handle_, kal::ResourceType::qp, qp_, v_},
                                    private_data, init_.context);
        return rdma::Status(r ? RI_OK : r.error().code());
    }
    return al.command(KRDMA_CMD_ACCEPT, q);
}

rdma::Status Endpoint::disconnect(bool abortive) {
    ri_qp_attr_t a{};
    a.state = abortive ? RI_QPS_ERROR : RI_QPS_CLOSING;
    return modify(a, RI_QP_ATTR_STATE);
}

// ---------------------------------------------------------------------------------------------------------------
// ListenPoint

ListenPoint::~ListenPoint() {
    if (rdma::Status st = close(); !st.ok() && st.code() != RI_ENODEV) {
        RDMA_LOG_WARN(kComponent, "closing a listen point: %s", st.describe().c_str());
    }
}

rdma::Status ListenPoint::close() {
    if (kal_handle_ == 0) return rdma::Status(RI_OK);
    AccessLayer &al = *adapter_->al_;
    krdma_destroy_listen q{kal_handle_};
    rdma::Status st = al.hosted() ? al.hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::listener))
                                  : al.command(KRDMA_CMD_DESTROY_LISTEN, q);
    if (!st.ok() && st.code() != RI_ENODEV) return st;
    {
        std::lock_guard lock(al.mutex_);
        al.listeners_.erase(kal_handle_);
    }
    kal_handle_ = 0;
    return rdma::Status(RI_OK);
}

rdma::Expected<ri_qp_attr_t> Endpoint::query() const {
    ri_qp_attr_t attr{};
    if (ri_status_t rc = v_->query_qp(qp_, &attr); rc != RI_OK) return verb_error(rc, "Query QP");
    return attr;
}

rdma::Status Endpoint::modify(const ri_qp_attr_t &attr, uint32_t mask) {
    if ((mask & RI_QP_ATTR_STATE) != 0 && (attr.state == RI_QPS_CLOSING || attr.state == RI_QPS_ERROR)) {
        local_close_ = true;
    }
    if (pz_ && pz_->adapter()->al_->hosted()) {
        // Through the kAL: a state change also moves the QP's connection (the kVP runs the stream).
        auto r = pz_->adapter()->al_->hosted_->modify_qp(kal::HostedObject{kal_handle_, kal::ResourceType::qp, qp_, v_},
                                                        attr, mask);
        return rdma::Status(r ? RI_OK : r.error().code());
    }
    return rdma::Status(v_->modify_qp(qp_, &attr, mask));
}

rdma::Status Endpoint::post_send(std::span<const ri_send_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = v_->post_send(qp_, wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

rdma::Status Endpoint::post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = v_->post_recv(qp_, wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

MemoryRegion::~MemoryRegion() { close_quietly(*this, "deregistering a region"); }

rdma::Status MemoryRegion::close() {
    if (mr_ != nullptr && pz_ && pz_->adapter()->al_->hosted()) {
        rdma::Status st = pz_->adapter()->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::mr));
        if (st.ok()) mr_ = nullptr;
        return st;
    }
    return release(mr_, pz_ ? pz_->adapter()->verbs().deregister_mr : nullptr);
}

rdma::Expected<ri_mr_attr_t> MemoryRegion::query() const {
    ri_mr_attr_t attr{};
    if (ri_status_t rc = pz_->adapter()->verbs().query_mr(mr_, &attr); rc != RI_OK) {
        return verb_error(rc, "Query Memory Region");
    }
    return attr;
}

MemoryWindow::~MemoryWindow() { close_quietly(*this, "deallocating a window"); }

rdma::Status MemoryWindow::close() {
    if (mw_ != nullptr && pz_ && pz_->adapter()->al_->hosted()) {
        rdma::Status st = pz_->adapter()->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::mw));
        if (st.ok()) mw_ = nullptr;
        return st;
    }
    return release(mw_, pz_ ? pz_->adapter()->verbs().dealloc_mw : nullptr);
}

SharedReceiveQueue::~SharedReceiveQueue() { close_quietly(*this, "destroying an SRQ"); }

rdma::Status SharedReceiveQueue::close() {
    if (srq_ != nullptr && pz_ && pz_->adapter()->al_->hosted()) {
        rdma::Status st = pz_->adapter()->al_->hosted_destroy(kal_handle_, static_cast<uint8_t>(kal::ResourceType::srq));
        if (st.ok()) srq_ = nullptr;
        return st;
    }
    return release(srq_, pz_ ? pz_->adapter()->verbs().destroy_srq : nullptr);
}

rdma::Status SharedReceiveQueue::post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = pz_->adapter()->verbs().post_srq_recv(srq_, wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

rdma::Expected<ri_srq_attr_t> SharedReceiveQueue::query() const {
    ri_srq_attr_t attr{};
    if (ri_status_t rc = pz_->adapter()->verbs().query_srq(srq_, &attr); rc != RI_OK) return verb_error(rc, "Query SRQ");
    return attr;
}

rdma::Status SharedReceiveQueue::modify(const ri_srq_attr_t &attr, uint32_t mask) {
    AccessLayer &al = *pz_->adapter()->al_;
    if (al.hosted()) {
        auto r = al.hosted_->modify_srq(kal::HostedObject{kal_handle_, kal::ResourceType::srq, srq_, &pz_->adapter()->verbs()},
                                        attr, mask);
        return rdma::Status(r ? RI_OK : r.error().code());
    }
    return rdma::Status(pz_->adapter()->verbs().modify_srq(srq_, &attr, mask));
}

}  // namespace ual
