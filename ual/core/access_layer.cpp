// The user access layer's object model over a KalLink: the same code for a process (device link) and for a
// consumer hosted in the kAL (hosted link). Objects that receive events are found by the cookie they gave the kAL.
#include "ual/access_layer.hpp"

#include <cstdlib>
#include <cstring>

#include "ual/device_link.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"
#include "verb_error.hpp"
#include "worker_pool.hpp"

namespace ual {
namespace {

constexpr const char *kComponent = "ual";

// A slow-path result as the Status of the object model's older calls; the reason is logged, not lost.
rdma::Status status_of(const rdma::Expected<void> &r, const char *what) {
    if (r) return rdma::Status(RI_OK);
    RDMA_LOG_DEBUG(kComponent, "%s: %s", what, r.error().to_string().c_str());
    return rdma::Status(r.error().code());
}

// The dispatcher event of an asynchronous event record, whether a kVP (through the kAL) or the uVP raised it.
Event async_event_of(const ri_async_event_t &a) {
    Event ev;
    ev.stream = a.resource_type == RI_RES_RNIC ? EventStream::unaffiliated_async : EventStream::affiliated_async;
    ev.id = a.event_id;
    ev.resource_type = a.resource_type;
    ev.resource_id = a.resource_id;
    ev.context = a.context;
    ev.detail = a.detail;
    return ev;
}

// A destructor's close: what the consumer did not close is closed here, and a refusal is logged.
template <class T>
void close_quietly(T &object, const char *what) {
    if (rdma::Status st = object.close(); !st.ok()) {
        RDMA_LOG_WARN(kComponent, "%s failed: %s", what, std::strerror(st.code()));
    }
}

// Releases @p ref (an object of @p kind) through @p al's link; the reference is forgotten only when the link
// agrees (a provider answers EBUSY while children exist).
rdma::Status release(AccessLayer *al, ObjectKind kind, ObjectRef &ref, const char *what) {
    if (!ref || al == nullptr) return rdma::Status(RI_OK);
    if (auto r = al->link().destroy(kind, ref); !r) return status_of(r, what);
    ref = ObjectRef{};
    return rdma::Status(RI_OK);
}

rdma::Error embedded_unavailable(const std::filesystem::path &config) {
    return rdma::Error(RI_EOPNOTSUPP, "an embedded kAL is configured (" + config.string() +
                                          ") but this program was built without one (link kal_embedded)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// AccessLayer

rdma::Expected<std::shared_ptr<AccessLayer>> AccessLayer::open(const Options &options) {
    std::filesystem::path embedded = options.embedded_config;
    const char *embedded_from = "ual::Options::embedded_config";
    // A device named by the program wins over the environment's embedded kAL, as the embedded configuration
    // named by the program wins over $KRDMA_DEVICE.
    if (embedded.empty() && options.device.empty()) {
        if (const char *env = std::getenv("OPENRDMA_EMBEDDED_CONFIG"); env != nullptr && *env != '\0') {
            embedded = env;
            embedded_from = "$OPENRDMA_EMBEDDED_CONFIG";
        }
    }
    if (!embedded.empty()) {
        if (options.embedded_kal == nullptr) return embedded_unavailable(embedded);
        auto device = options.embedded_kal(embedded.string());
        if (!device) {
            // The message names the file and the place in it; say where the file name came from too.
            return rdma::Error(device.error().code(), device.error().message() +
                                                          " (the embedded kAL's configuration, from " + embedded_from +
                                                          ")");
        }
        auto link = adopt_device_link(std::move(device->socket), std::move(device->keep_alive));
        if (!link) return link.error();
        return open(std::move(*link), options);
    }
    std::filesystem::path dev = options.device;
    if (dev.empty()) {
        const char *env = std::getenv("KRDMA_DEVICE");
        dev = env != nullptr && *env != '\0' ? env : KRDMA_DEFAULT_DEVICE;
    }
    auto link = connect_device_link(dev);
    if (!link) {
        const int e = link.error().code();
        if (e != RI_ENOENT && e != RI_ECONNREFUSED) return link.error();
        return rdma::Error(e, "krdmad is not running at " + dev.string() + " (" + std::strerror(e) +
                                  "): start it (systemctl start krdmad, or krdmad --config FILE), point "
                                  "$KRDMA_DEVICE at the device of the krdmad that runs, or set "
                                  "$OPENRDMA_EMBEDDED_CONFIG to a krdmad configuration file to host a kAL in "
                                  "this process");
    }
    return open(std::move(*link), options);
}

rdma::Expected<std::shared_ptr<AccessLayer>> AccessLayer::open(std::unique_ptr<KalLink> link,
                                                               const Options &options) {
    if (!link) return rdma::Error(RI_EINVAL, "no link to a kAL");
    std::shared_ptr<AccessLayer> al(new AccessLayer());
    al->link_ = std::move(link);
    al->pool_ = std::make_unique<WorkerPool>(options.workers, 4096);
    if (auto r = al->link_->start(std::weak_ptr<LinkEvents>(al)); !r) return r.error();
    RDMA_LOG_DEBUG(kComponent, "access layer open (%.*s kAL, client %#x)", static_cast<int>(al->link_->kind().size()),
                   al->link_->kind().data(), al->link_->client_id());
    return al;
}

AccessLayer::~AccessLayer() {
    // The link's thread delivers to us: it stops first (or, when its delivery dropped the last reference, it is
    // told to touch nothing more). Then the callbacks still queued run.
    link_.reset();
    pool_.reset();
}

SimpleDispatcher::Executor AccessLayer::executor() {
    return [w = std::weak_ptr<AccessLayer>(weak_from_this())](std::function<void()> job) {
        if (auto al = w.lock()) {
            if (!al->pool_->submit(std::move(job))) RDMA_LOG_WARN(kComponent, "worker queue full: a callback was dropped");
        }
    };
}

uint32_t AccessLayer::enroll(ObjectKind kind, std::weak_ptr<void> object) {
    std::lock_guard lock(mutex_);
    uint32_t c = next_cookie_;
    while (c == 0 || registry_.contains(c)) ++c;  // 0 names nothing; a wrapped counter skips live cookies
    next_cookie_ = c + 1;
    registry_.emplace(c, Registered{kind, std::move(object)});
    return c;
}

void AccessLayer::withdraw(uint32_t cookie) {
    std::lock_guard lock(mutex_);
    registry_.erase(cookie);
}

template <class T>
std::shared_ptr<T> AccessLayer::find(uint32_t cookie, ObjectKind kind) {
    std::lock_guard lock(mutex_);
    auto it = registry_.find(cookie);
    if (it == registry_.end() || it->second.kind != kind) return nullptr;
    return std::static_pointer_cast<T>(it->second.object.lock());
}

void AccessLayer::async_event(uint32_t rnic, const ri_async_event_t &e) {
    if (auto a = find<Adapter>(rnic, ObjectKind::rnic)) a->deliver_async(async_event_of(e));
}

void AccessLayer::completion(uint32_t cq) {
    if (auto q = find<CompletionQueue>(cq, ObjectKind::cq)) q->notified();
}

void AccessLayer::kal_gone() {
    std::vector<std::shared_ptr<Adapter>> adapters;
    std::vector<std::shared_ptr<Endpoint>> eps;
    {
        std::lock_guard lock(mutex_);
        if (kal_gone_) return;  // told once: krdmad's own notice, or the device closing
        kal_gone_ = true;
        for (auto &[cookie, r] : registry_) {
            auto p = r.object.lock();
            if (!p) continue;
            if (r.kind == ObjectKind::rnic) adapters.push_back(std::static_pointer_cast<Adapter>(p));
            if (r.kind == ObjectKind::qp) eps.push_back(std::static_pointer_cast<Endpoint>(p));
        }
    }
    ri_async_event_t fatal{};
    fatal.resource_type = RI_RES_RNIC;
    fatal.event_id = RI_AE_RNIC_FATAL;  // the kAL is gone: nothing of the RNIC works any more
    const Event ev = async_event_of(fatal);
    for (auto &a : adapters) a->deliver_async(ev);
    // Every connection is lost with the kAL: QPs to ERROR (the provider flushes and closes its streams), and each
    // endpoint's consumer hears that its connection broke.
    for (auto &ep : eps) {
        {
            std::lock_guard lock(ep->ref_mutex_);
            if (ep->ref_) link_->stream_ended(ep->ref_);
        }
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

void AccessLayer::connection(const krdma_cm_event &e, krdma::UniqueFd fd, krdma::UniqueFd channel,
                             krdma::UniqueFd byte_channel, krdma::UniqueFd link) {
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
        auto lp = find<ListenPoint>(e.cookie, ObjectKind::listener);
        if (!lp || !lp->requests_) {
            // Nobody will decide: refuse now rather than let the peer wait for the kAL's timeout.
            (void)link_->reject(e.request, {});
            return;
        }
        ev.stream = EventStream::cm_request;
        ev.connection = std::move(data);
        lp->requests_->post(ev);
        return;
    }
    auto ep = find<Endpoint>(e.cookie, ObjectKind::qp);
    if (!ep) return;  // the endpoint is gone; an ESTABLISHED record's socket closes with the record
    ev.stream = EventStream::cm_message;
    ev.context = ep->init_.context;
    if (e.type == KRDMA_CM_DISCONNECTED && !ep->local_close_) {
        // The kAL saw the QP go to ERROR without the peer closing; this consumer never disconnected, so its RNIC
        // tore the stream down (e.g. after sending a Terminate): for the consumer the connection broke.
        ev.id = KRDMA_CM_BROKEN;
        data->status = ECONNABORTED;
        ev.detail = ECONNABORTED;
    }
    const bool ended = e.type == KRDMA_CM_PEER_DISCONNECT || e.type == KRDMA_CM_BROKEN || e.type == KRDMA_CM_DISCONNECTED;
    // The kAL saw the connection end: a stream the consumer's provider runs stops before the consumer is told.
    if (ended && ep->streaming_.exchange(false)) {
        std::lock_guard lock(ep->ref_mutex_);
        if (ep->ref_) link_->stream_ended(ep->ref_);  // a QP destroyed meanwhile took its stream with it
    }
    if (e.type == KRDMA_CM_ESTABLISHED) {
        ep->local_close_ = false;
        // The RDMA-mode transition, the consumer's half; only then is the consumer told.
        std::unique_lock lock(ep->ref_mutex_);
        if (!ep->ref_) return;  // destroyed meanwhile: the record's socket closes with it
        if (auto r = link_->take_stream(ep->ref_, e.llp, std::move(fd), std::move(channel)); !r) {
            RDMA_LOG_WARN(kComponent, "QP %u: %s", ep->qp_num_, r.error().to_string().c_str());
            ev.id = KRDMA_CM_BROKEN;
            data->status = r.error().code();
        } else {
            ep->streaming_ = true;
            data->byte_channel = std::make_shared<krdma::UniqueFd>(std::move(byte_channel));
            data->link = std::make_shared<krdma::UniqueFd>(std::move(link));
        }
        ev.detail = static_cast<uint32_t>(data->status);
    }
    ev.connection = std::move(data);
    ep->deliver_cm(std::move(ev));
}

rdma::Expected<std::vector<RnicDescription>> AccessLayer::rnics() { return link_->rnics(); }

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
    std::shared_ptr<Adapter> a(new Adapter());
    a->al_ = shared_from_this();
    a->desc_ = *d;
    a->cookie_ = enroll(ObjectKind::rnic, a);
    auto ref = link_->open_rnic(*d, a->cookie_);
    if (!ref) return ref.error();  // the adapter's destructor withdraws the cookie
    a->ref_ = *ref;
    return a;
}

// ---------------------------------------------------------------------------------------------------------------
// Adapter

Adapter::~Adapter() {
    close_quietly(*this, "closing an RNIC");
    if (al_) al_->withdraw(cookie_);
}

rdma::Status Adapter::close() { return release(al_.get(), ObjectKind::rnic, ref_, "Close RNIC"); }

rdma::Expected<std::shared_ptr<ListenPoint>> Adapter::listen(uint16_t port, std::shared_ptr<SimpleDispatcher> requests,
                                                              uint64_t context, uint16_t backlog) {
    if (ref_.kal == 0) return rdma::Error(RI_EOPNOTSUPP, "this RNIC open has no kAL side to listen with");
    if (requests && requests->stream() != EventStream::cm_request) {
        return rdma::Error(RI_EINVAL, "connection requests need a dispatcher of the cm_request stream");
    }
    std::shared_ptr<ListenPoint> lp(new ListenPoint());
    lp->adapter_ = shared_from_this();
    if (requests) requests->set_pump(al_->link_->event_pump());  // a waiter for requests reads the kAL itself
    lp->requests_ = std::move(requests);
    lp->cookie_ = al_->enroll(ObjectKind::listener, lp);
    auto r = al_->link_->listen(ref_, port, backlog, context, lp->cookie_);
    if (!r) return r.error();
    lp->ref_ = ObjectRef{r->handle, nullptr, nullptr};
    lp->port_ = r->port;
    return lp;
}

rdma::Expected<void> Adapter::reject(uint64_t request, std::span<const uint8_t> private_data) {
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) {
        return rdma::Error(RI_EMSGSIZE, "Reject: " + std::to_string(private_data.size()) +
                                            " bytes of private data, at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    return al_->link_->reject(request, private_data);
}

rdma::Expected<ri_rnic_attr_t> Adapter::query() const {
    ri_rnic_attr_t attr{};
    if (ri_status_t rc = ref_.verbs->query_rnic(handle(), &attr); rc != RI_OK) return verb_error(rc, "Query RNIC");
    return attr;
}

void Adapter::share_event_pump(SimpleDispatcher &d) { d.set_pump(al_->link_->event_pump()); }

void Adapter::set_async_dispatchers(std::shared_ptr<SimpleDispatcher> affiliated,
                                    std::shared_ptr<SimpleDispatcher> unaffiliated) {
    for (const auto *d : {&affiliated, &unaffiliated}) {
        if (*d) (*d)->set_pump(al_->link_->event_pump());
    }
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

rdma::Expected<std::shared_ptr<ProtectionZone>> Adapter::create_pz() {
    auto ref = al_->link_->alloc_pd(ref_);
    if (!ref) return ref.error();
    std::shared_ptr<ProtectionZone> pz(new ProtectionZone());
    pz->ref_ = *ref;
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
    cq->adapter_ = shared_from_this();
    cq->dto_ = dto;
    cq->cookie_ = al_->enroll(ObjectKind::cq, cq);
    uint32_t provided = depth;
    auto ref = al_->link_->create_cq(ref_, cq->cookie_, provided);
    if (!ref) return ref.error();
    cq->ref_ = *ref;
    cq->depth_ = provided;
    std::lock_guard lock(dto->poll_mutex_);
    dto->cq_ = cq.get();
    return cq;
}

// ---------------------------------------------------------------------------------------------------------------
// CompletionQueue

CompletionQueue::~CompletionQueue() {
    close_quietly(*this, "destroying a CQ");
    if (adapter_) adapter_->al_->withdraw(cookie_);
}

rdma::Status CompletionQueue::close() {
    if (!ref_) return rdma::Status(RI_OK);
    // Unbind first, so a notification racing with the destruction finds no CQ to poll; bind again if refused.
    auto bind = [this](bool on) {
        std::lock_guard lock(dto_->poll_mutex_);
        dto_->cq_ = on ? this : nullptr;
    };
    bind(false);
    rdma::Status st = release(adapter_->al_.get(), ObjectKind::cq, ref_, "Destroy CQ");
    if (!st.ok()) bind(true);  // still in use (EBUSY): deliver as before
    return st;
}

rdma::Expected<size_t> CompletionQueue::poll(std::span<ri_wc_t> wc) noexcept {
    uint32_t n = 0;
    if (ri_status_t rc = ref_.verbs->poll_cq(handle(), static_cast<uint32_t>(wc.size()), wc.data(), &n); rc != RI_OK) {
        return rdma::Error(rc, "");  // the fast path builds no message
    }
    return static_cast<size_t>(n);
}

rdma::Status CompletionQueue::request_notify(uint32_t type) noexcept {
    return rdma::Status(ref_.verbs->request_cq_notify(handle(), type));
}

rdma::Expected<uint32_t> CompletionQueue::resize(uint32_t depth) {
    uint32_t actual = 0;
    if (ri_status_t rc = ref_.verbs->resize_cq(handle(), depth, &actual); rc != RI_OK) return verb_error(rc, "Resize CQ");
    depth_ = actual;
    return actual;
}

void CompletionQueue::notified() noexcept { dto_->notify_completion(); }

// ---------------------------------------------------------------------------------------------------------------
// ProtectionZone and its objects

ProtectionZone::~ProtectionZone() { close_quietly(*this, "deallocating a PD"); }

rdma::Status ProtectionZone::close() {
    return release(adapter_ ? adapter_->al_.get() : nullptr, ObjectKind::pd, ref_, "Deallocate PD");
}

rdma::Expected<std::shared_ptr<Endpoint>> ProtectionZone::create_endpoint(
    const EndpointAttributes &a, const std::shared_ptr<CompletionQueue> &send,
    const std::shared_ptr<CompletionQueue> &recv, const std::shared_ptr<SharedReceiveQueue> &srq) {
    if (!send || !recv) return rdma::Error(RI_EINVAL, "an endpoint needs a send and a receive completion queue");
    if (send->adapter_ != adapter_ || recv->adapter_ != adapter_) {
        return rdma::Error(RI_EINVAL, "the completion queues belong to another adapter");
    }
    if (srq && srq->pz_->adapter_ != adapter_) return rdma::Error(RI_EINVAL, "the SRQ belongs to another adapter");
    RDMA_LOG_DEBUG(kComponent, "create endpoint: create_qp");
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
    const uint32_t access_flags = ri_qp_access_flags(a.access);
    ia.flags |= access_flags;
    ep->pz_ = shared_from_this();
    ep->send_ = send;
    ep->recv_ = recv;
    ep->srq_ = srq;
    AccessLayer &al = *adapter_->al_;
    ep->cookie_ = al.enroll(ObjectKind::qp, ep);
    auto ref = al.link_->create_qp(ref_, send->ref_, recv->ref_, srq ? &srq->ref_ : nullptr, ia, ep->cookie_);
    if (!ref && access_flags != 0 && ref.error().code() == RI_EINVAL) {
        // A provider from before the access flags: create without them, then set the access (below).
        ia.flags &= ~access_flags;
        ref = al.link_->create_qp(ref_, send->ref_, recv->ref_, srq ? &srq->ref_ : nullptr, ia, ep->cookie_);
    }
    if (!ref) return ref.error();
    ep->ref_ = *ref;
    ep->init_ = ia;
    constexpr uint32_t kRemote = RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE;
    const uint32_t wanted = a.access & kRemote;
    if (ref->number != 0 && (ia.flags & access_flags) == access_flags) {
        // The kAL named the QP and the provider took the access at creation: nothing to ask.
        ep->qp_num_ = ref->number;
        ep->access_ = wanted;
        RDMA_LOG_DEBUG(kComponent, "create endpoint: QP %u ready", ep->qp_num_);
        return ep;
    }
    ri_qp_attr_t q{};
    if (ri_status_t rc = ep->ref_.verbs->query_qp(ep->handle(), &q); rc != RI_OK) return verb_error(rc, "Query QP");
    ep->qp_num_ = q.qp_num;
    if ((q.access & kRemote) != wanted) {
        ri_qp_attr_t m{};
        m.access = wanted;
        if (rdma::Status st = ep->modify(m, RI_QP_ATTR_ACCESS); !st.ok()) return verb_error(st.code(), "Modify QP (remote access)");
        q.access = wanted;
    }
    ep->access_ = q.access;
    RDMA_LOG_DEBUG(kComponent, "create endpoint: QP %u ready", ep->qp_num_);
    return ep;
}

rdma::Expected<std::shared_ptr<MemoryRegion>> ProtectionZone::register_memory(void *addr, uint64_t length,
                                                                             uint32_t access) {
    std::shared_ptr<MemoryRegion> mr(new MemoryRegion());
    auto ref = adapter_->al_->link_->register_mr(ref_, addr, length, access, mr->keys_);
    if (!ref) return ref.error();
    mr->ref_ = *ref;
    mr->pz_ = shared_from_this();
    return mr;
}

rdma::Expected<std::shared_ptr<SharedReceiveQueue>> ProtectionZone::create_srq(uint32_t depth, uint32_t sge,
                                                                             uint32_t limit, uint64_t context) {
    ri_srq_attr_t attr{depth, sge, limit, 0, context};
    auto ref = adapter_->al_->link_->create_srq(ref_, attr);
    if (!ref) return ref.error();
    std::shared_ptr<SharedReceiveQueue> srq(new SharedReceiveQueue());
    srq->ref_ = *ref;
    srq->pz_ = shared_from_this();
    return srq;
}

rdma::Expected<std::shared_ptr<MemoryWindow>> ProtectionZone::allocate_window(uint32_t type) {
    std::shared_ptr<MemoryWindow> mw(new MemoryWindow());
    auto ref = adapter_->al_->link_->alloc_mw(ref_, type, mw->rkey_);
    if (!ref) return ref.error();
    mw->ref_ = *ref;
    mw->pz_ = shared_from_this();
    return mw;
}

// ---------------------------------------------------------------------------------------------------------------
// Endpoint

Endpoint::~Endpoint() {
    close_quietly(*this, "destroying a QP");
    if (pz_) pz_->adapter()->al_->withdraw(cookie_);
}

rdma::Status Endpoint::close() {
    std::lock_guard lock(ref_mutex_);
    return release(pz_ ? pz_->adapter()->al_.get() : nullptr, ObjectKind::qp, ref_, "Destroy QP");
}

void Endpoint::set_connection_dispatcher(std::shared_ptr<SimpleDispatcher> events) {
    // A waiter for this endpoint's connection events reads the kAL itself (leader/follower).
    if (events && pz_) events->set_pump(pz_->adapter()->al_->link_->event_pump());
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

namespace {

// Checks what every connection command of an endpoint needs before it goes to the kAL.
rdma::Expected<void> connectable(const ObjectRef &ref, std::span<const uint8_t> private_data, const char *what) {
    if (!ref || ref.kal == 0) return rdma::Error(RI_EINVAL, std::string(what) + ": the endpoint is closed");
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) {
        return rdma::Error(RI_EMSGSIZE, std::string(what) + ": " + std::to_string(private_data.size()) +
                                            " bytes of private data, at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    return {};
}

}  // namespace

rdma::Expected<void> Endpoint::connect(const std::string &address, uint16_t port,
                                       std::span<const uint8_t> private_data, std::chrono::milliseconds timeout) {
    if (auto ok = connectable(ref_, private_data, "Connect"); !ok) return ok;
    auto remote = krdma::parse_net_addr(address);
    if (!remote) return remote.error();
    return pz_->adapter()->al_->link_->connect(ref_, *remote, port, private_data, init_.context,
                                               static_cast<uint32_t>(timeout.count()));
}

rdma::Expected<void> Endpoint::connect_async(const std::string &address, uint16_t port,
                                             std::span<const uint8_t> private_data, std::chrono::milliseconds timeout) {
    if (auto ok = connectable(ref_, private_data, "Connect"); !ok) return ok;
    auto remote = krdma::parse_net_addr(address);
    if (!remote) return remote.error();
    // The one refusal a caller can tell from its arguments alone stays a refusal here rather than an event.
    const RnicDescription &rnic = pz_->adapter()->description();
    if (auto own = krdma::parse_net_addr(rnic.address); own && own->family != remote->family) {
        return rdma::Error(RI_EAFNOSUPPORT, "Connect: " + address + " is not of the address family of RNIC " +
                                                rnic.name + " (" + rnic.address + ")");
    }
    return pz_->adapter()->al_->link_->connect_async(ref_, *remote, port, private_data, init_.context,
                                                     static_cast<uint32_t>(timeout.count()), cookie_);
}

rdma::Expected<void> Endpoint::convert(int fd, std::span<const uint8_t> private_data, uint32_t role,
                                       std::chrono::milliseconds timeout, uint32_t flags) {
    if (auto ok = connectable(ref_, private_data, "Convert"); !ok) return ok;
    return pz_->adapter()->al_->link_->convert(ref_, fd, private_data, role, flags, init_.context,
                                               static_cast<uint32_t>(timeout.count()));
}

rdma::Expected<void> Endpoint::accept(uint64_t request, std::span<const uint8_t> private_data) {
    if (auto ok = connectable(ref_, private_data, "Accept"); !ok) return ok;
    return pz_->adapter()->al_->link_->accept(request, ref_, private_data, init_.context);
}

rdma::Expected<void> Endpoint::accept_async(uint64_t request, std::span<const uint8_t> private_data) {
    if (auto ok = connectable(ref_, private_data, "Accept"); !ok) return ok;
    return pz_->adapter()->al_->link_->accept_async(request, ref_, private_data, init_.context, cookie_);
}

rdma::Status Endpoint::disconnect(bool abortive) {
    ri_qp_attr_t a{};
    a.state = abortive ? RI_QPS_ERROR : RI_QPS_CLOSING;
    return modify(a, RI_QP_ATTR_STATE);
}

rdma::Expected<ri_qp_attr_t> Endpoint::query() const {
    ri_qp_attr_t attr{};
    if (ri_status_t rc = ref_.verbs->query_qp(handle(), &attr); rc != RI_OK) return verb_error(rc, "Query QP");
    return attr;
}

rdma::Status Endpoint::modify(const ri_qp_attr_t &attr, uint32_t mask) {
    if ((mask & RI_QP_ATTR_STATE) != 0 && (attr.state == RI_QPS_CLOSING || attr.state == RI_QPS_ERROR)) {
        local_close_ = true;
    }
    return status_of(pz_->adapter()->al_->link_->modify_qp(ref_, attr, mask), "Modify QP");
}

rdma::Status Endpoint::post_send(std::span<const ri_send_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = ref_.verbs->post_send(handle(), wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

rdma::Status Endpoint::post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = ref_.verbs->post_recv(handle(), wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

// ---------------------------------------------------------------------------------------------------------------
// ListenPoint

ListenPoint::~ListenPoint() {
    if (rdma::Status st = close(); !st.ok() && st.code() != RI_ENODEV) {
        RDMA_LOG_WARN(kComponent, "closing a listen point: %s", st.describe().c_str());
    }
    if (adapter_) adapter_->al_->withdraw(cookie_);
}

rdma::Status ListenPoint::close() {
    if (!ref_) return rdma::Status(RI_OK);
    rdma::Status st = release(adapter_->al_.get(), ObjectKind::listener, ref_, "Close a listen point");
    if (st.code() == RI_ENODEV) ref_ = ObjectRef{};  // the kAL is gone, and the listen point with it
    return st;
}

// ---------------------------------------------------------------------------------------------------------------
// MemoryRegion, MemoryWindow, SharedReceiveQueue

MemoryRegion::~MemoryRegion() { close_quietly(*this, "deregistering a region"); }

rdma::Status MemoryRegion::close() {
    return release(pz_ ? pz_->adapter()->al_.get() : nullptr, ObjectKind::mr, ref_, "Deregister Memory Region");
}

rdma::Expected<ri_mr_attr_t> MemoryRegion::query() const {
    ri_mr_attr_t attr{};
    if (ri_status_t rc = ref_.verbs->query_mr(handle(), &attr); rc != RI_OK) return verb_error(rc, "Query Memory Region");
    return attr;
}

MemoryWindow::~MemoryWindow() { close_quietly(*this, "deallocating a window"); }

rdma::Status MemoryWindow::close() {
    return release(pz_ ? pz_->adapter()->al_.get() : nullptr, ObjectKind::mw, ref_, "Deallocate Memory Window");
}

SharedReceiveQueue::~SharedReceiveQueue() { close_quietly(*this, "destroying an SRQ"); }

rdma::Status SharedReceiveQueue::close() {
    return release(pz_ ? pz_->adapter()->al_.get() : nullptr, ObjectKind::srq, ref_, "Destroy SRQ");
}

rdma::Status SharedReceiveQueue::post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted) noexcept {
    uint32_t n = 0;
    ri_status_t rc = ref_.verbs->post_srq_recv(handle(), wr.data(), static_cast<uint32_t>(wr.size()), &n);
    if (posted != nullptr) *posted = n;
    return rdma::Status(rc);
}

rdma::Expected<ri_srq_attr_t> SharedReceiveQueue::query() const {
    ri_srq_attr_t attr{};
    if (ri_status_t rc = ref_.verbs->query_srq(handle(), &attr); rc != RI_OK) return verb_error(rc, "Query SRQ");
    return attr;
}

rdma::Status SharedReceiveQueue::modify(const ri_srq_attr_t &attr, uint32_t mask) {
    return status_of(pz_->adapter()->al_->link_->modify_srq(ref_, attr, mask), "Modify SRQ");
}

}  // namespace ual
