// DAT endpoints, service points (PSP, RSP), connection requests and connection management over the access layer's
// endpoints and listen points. A connection qualifier is a TCP port (its low 16 bits, as OFA's providers map it).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "dapl.hpp"
#include "rnicpi/host/log.hpp"

namespace dapl {

/** @brief Where an EP's connection events go (shared with the callback, which may outlive a freed EP briefly). */
struct CmSink {
    std::mutex mutex;                              /**< Guards to. */
    std::shared_ptr<ual::SimpleDispatcher> to;     /**< The connect EVD's queue (null: dropped). */
    std::weak_ptr<ual::Endpoint> endpoint;         /**< To finish a close the peer began. */
    ual::SimpleDispatcher::Executor run;           /**< The uAL's worker pool. */
};

namespace {

constexpr DAT_COUNT kDefaultDtos = 64;
constexpr DAT_COUNT kDefaultIov = 4;
constexpr DAT_COUNT kDefaultReads = 4;
constexpr uint32_t kAllCompletionFlags = DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                         DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG |
                                         DAT_COMPLETION_EVD_THRESHOLD_FLAG;

std::span<const uint8_t> bytes(const void *p, DAT_COUNT n) noexcept {
    return {static_cast<const uint8_t *>(p), static_cast<size_t>(n)};
}

DAT_COUNT max_private_data(const Ia *ia) noexcept {
    return static_cast<DAT_COUNT>(std::min<uint32_t>(ia->attr.max_private_data, 512));
}

// The TCP port of connection qualifier @p q (0: none).
uint16_t port_of(DAT_CONN_QUAL q) noexcept { return static_cast<uint16_t>(q & 0xffff); }

bool disconnect_like(uint32_t id) noexcept {
    return id == KRDMA_CM_PEER_DISCONNECT || id == KRDMA_CM_DISCONNECTED || id == KRDMA_CM_BROKEN;
}

// The EP state after connection event @p id, given the state @p before.
int state_after(uint32_t id, int before) noexcept {
    switch (id) {
        case KRDMA_CM_ESTABLISHED: return DAT_EP_STATE_CONNECTED;
        default: (void)before; return DAT_EP_STATE_DISCONNECTED;
    }
}

DAT_EP_ATTR default_attr(const Ia *ia) noexcept {
    DAT_EP_ATTR a;
    std::memset(&a, 0, sizeof a);
    a.service_type = DAT_SERVICE_TYPE_RC;
    a.max_message_size = static_cast<DAT_SEG_LENGTH>(std::min<uint64_t>(ia->attr.max_mr_size, INT32_MAX));
    a.max_rdma_size = a.max_message_size;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.max_recv_dtos = std::min<DAT_COUNT>(kDefaultDtos, static_cast<DAT_COUNT>(ia->attr.max_qp_wr));
    a.max_request_dtos = a.max_recv_dtos;
    a.max_recv_iov = std::min<DAT_COUNT>(kDefaultIov, static_cast<DAT_COUNT>(ia->attr.max_sge));
    a.max_request_iov = a.max_recv_iov;
    a.max_rdma_read_in = std::min<DAT_COUNT>(kDefaultReads, static_cast<DAT_COUNT>(ia->attr.max_ird));
    a.max_rdma_read_out = std::min<DAT_COUNT>(kDefaultReads, static_cast<DAT_COUNT>(ia->attr.max_ord));
    a.srq_soft_hw = DAT_HW_DEFAULT;
    a.max_rdma_read_iov = std::min<DAT_COUNT>(kDefaultIov, static_cast<DAT_COUNT>(ia->attr.max_sge_rd));
    a.max_rdma_write_iov = a.max_request_iov;
    return a;
}

// What dat_ep_create and dat_ep_modify check of the attributes against the RNIC.
DAT_RETURN check_attr(const Ia *ia, const DAT_EP_ATTR &a, bool with_srq, int arg) {
    const ri_rnic_attr_t &r = ia->attr;
    const DAT_RETURN bad = DAT_ERROR(DAT_INVALID_PARAMETER, arg);
    if (a.service_type != DAT_SERVICE_TYPE_RC) return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    if (a.max_message_size > std::min<uint64_t>(r.max_mr_size, INT32_MAX)) return bad;
    if (a.max_rdma_size > std::min<uint64_t>(r.max_mr_size, INT32_MAX)) return bad;
    if ((a.qos & ~static_cast<uint32_t>(DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY |
                                        DAT_QOS_ECONOMY | DAT_QOS_PREMIUM)) != 0) {
        return bad;
    }
    if ((a.recv_completion_flags & ~kAllCompletionFlags) != 0) return bad;
    if ((a.request_completion_flags & ~kAllCompletionFlags) != 0) return bad;
    if (a.max_request_dtos < 0 || static_cast<uint64_t>(a.max_request_dtos) > r.max_qp_wr) return bad;
    if (!with_srq && (a.max_recv_dtos < 0 || static_cast<uint64_t>(a.max_recv_dtos) > r.max_qp_wr)) return bad;
    if (a.max_request_iov < 0 || static_cast<uint64_t>(a.max_request_iov) > r.max_sge) return bad;
    if (!with_srq && (a.max_recv_iov < 0 || static_cast<uint64_t>(a.max_recv_iov) > r.max_sge)) return bad;
    if (a.max_rdma_read_in < 0 || static_cast<uint64_t>(a.max_rdma_read_in) > r.max_ird) return bad;
    if (a.max_rdma_read_out < 0 || static_cast<uint64_t>(a.max_rdma_read_out) > r.max_ord) return bad;
    if (a.max_rdma_read_iov < 0 || static_cast<uint64_t>(a.max_rdma_read_iov) > r.max_sge_rd) return bad;
    if (a.max_rdma_write_iov < 0 || static_cast<uint64_t>(a.max_rdma_write_iov) > r.max_sge) return bad;
    return DAT_SUCCESS;
}

// The connection events of @p ep flow through its own dispatcher: its callback moves the DAT state as they happen
// (on the uAL's event thread), finishes a close the peer began, and hands them on to the connect EVD.
std::shared_ptr<CmSink> sink_of(Ep *ep);

void configure_sink(Ep *ep, const std::shared_ptr<CmSink> &sink) {
    std::lock_guard lock(sink->mutex);
    Evd *connect = lookup<Evd>(ep->connect_handle);
    sink->to = connect != nullptr ? connect->queue : nullptr;
    sink->endpoint = ep->ep;
    sink->run = ep->ia->al->executor();
}

std::mutex g_sinks_mutex;

}  // namespace

// The sinks live beside the EPs (an Ep cannot hold the type CmSink in dapl.hpp without exposing it).
namespace {
std::unordered_map<const Ep *, std::shared_ptr<CmSink>> g_sinks;
std::shared_ptr<CmSink> sink_of(Ep *ep) {
    std::lock_guard lock(g_sinks_mutex);
    auto &s = g_sinks[ep];
    if (!s) s = std::make_shared<CmSink>();
    return s;
}
void drop_sink(const Ep *ep) {
    std::lock_guard lock(g_sinks_mutex);
    g_sinks.erase(ep);
}

// (Re)creates @p ep's QP from its PZ, EVDs, SRQ and attributes, once all it needs is there (IA mutex held).
DAT_RETURN configure(Ep *ep) {
    if (ep->pz == nullptr || ep->request == nullptr || (ep->recv == nullptr && ep->srq == nullptr)) {
        ep->state->store(DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        return DAT_SUCCESS;
    }
    const DAT_EP_ATTR &d = ep->attr;
    ual::EndpointAttributes a;
    a.sq_depth = static_cast<uint32_t>(std::max<DAT_COUNT>(d.max_request_dtos, 1));
    a.rq_depth = ep->srq != nullptr ? 0 : static_cast<uint32_t>(std::max<DAT_COUNT>(d.max_recv_dtos, 1));
    a.sq_sge = static_cast<uint32_t>(std::max({d.max_request_iov, d.max_rdma_write_iov, DAT_COUNT{1}}));
    a.rq_sge = ep->srq != nullptr ? 1 : static_cast<uint32_t>(std::max<DAT_COUNT>(d.max_recv_iov, 1));
    a.rd_sge = static_cast<uint32_t>(std::max<DAT_COUNT>(d.max_rdma_read_iov, 1));
    a.ird = static_cast<uint32_t>(d.max_rdma_read_in);
    a.ord = static_cast<uint32_t>(d.max_rdma_read_out);
    a.signal_all = false;
    a.context = reinterpret_cast<uint64_t>(ep->handle);  // completions and events name the EP by its handle
    if (ep->ep) {
        ep->ep->set_connection_dispatcher(nullptr);
        ep->ep.reset();
    }
    auto made = ep->pz->pz->create_endpoint(a, ep->request->cq, ep->recv != nullptr ? ep->recv->cq : ep->request->cq,
                                            ep->srq != nullptr ? ep->srq->srq : nullptr);
    if (!made) {
        ep->state->store(DAT_EP_STATE_UNCONFIGURED_UNCONNECTED);
        const int c = made.error().code();
        return failed("dat_ep_create", made.error(),
                      c == RI_ERANGE || c == RI_EINVAL
                          ? DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6)
                          : from_ri(c, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)));
    }
    ep->ep = std::move(*made);
    ri_qp_attr_t qa{};
    // Remote access is for the regions and windows to decide: the QP allows both.
    qa.access = RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE;
    if (rdma::Status st = ep->ep->modify(qa, RI_QP_ATTR_ACCESS); !st.ok()) {
        ep->ep.reset();
        return from_ri(st.code(), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    ep->ep->set_connection_dispatcher(ep->cm);
    ep->verbs = &ep->ia->adapter->verbs();
    ep->qp = ep->ep->handle();
    const ri_qp_init_attr_t &in = ep->ep->attributes();
    ep->attr.max_request_dtos = static_cast<DAT_COUNT>(in.sq_depth);
    if (ep->srq == nullptr) ep->attr.max_recv_dtos = static_cast<DAT_COUNT>(in.rq_depth);
    configure_sink(ep, sink_of(ep));
    ep->state->store(DAT_EP_STATE_UNCONNECTED);
    return DAT_SUCCESS;
}

void use(Body *b) noexcept {
    if (b != nullptr) ++b->users;
}
void unuse(Body *b) noexcept {
    if (b != nullptr) --b->users;
}

DAT_RETURN create_ep(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_EVD_HANDLE recv_handle,
                     DAT_EVD_HANDLE request_handle, DAT_EVD_HANDLE connect_handle, DAT_SRQ_HANDLE srq_handle,
                     const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep_handle, bool with_srq) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz *pz = nullptr;
    if (pz_handle != DAT_HANDLE_NULL) {
        pz = lookup<Pz>(pz_handle);
        if (pz == nullptr || pz->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    }
    auto dto_evd = [&](DAT_EVD_HANDLE h, Evd *&out) {
        if (h == DAT_HANDLE_NULL) return true;
        out = lookup<Evd>(h);
        return out != nullptr && out->ia == ia && out->has_cq();
    };
    Evd *recv = nullptr, *request = nullptr, *connect = nullptr;
    if (!dto_evd(recv_handle, recv)) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
    if (!dto_evd(request_handle, request)) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (connect_handle != DAT_HANDLE_NULL) {
        // A connection EVD may be another IA's of this process (as OFA's providers allow; dapltest's limit test
        // shares one): only events are posted to it.
        connect = lookup<Evd>(connect_handle);
        if (connect == nullptr || !(connect->flags & DAT_EVD_CONNECTION_FLAG)) {
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        }
    }
    Srq *srq = nullptr;
    if (with_srq) {
        srq = lookup<Srq>(srq_handle);
        if (srq == nullptr || srq->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
        if (pz != nullptr && srq->pz != pz) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PZ);
    }
    if (ep_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, with_srq ? DAT_INVALID_ARG8 : DAT_INVALID_ARG7);
    const DAT_EP_ATTR a = attr != nullptr ? *attr : default_attr(ia);
    if (DAT_RETURN st = check_attr(ia, a, srq != nullptr, with_srq ? DAT_INVALID_ARG7 : DAT_INVALID_ARG6);
        st != DAT_SUCCESS) {
        return st;
    }
    std::lock_guard lock(ia->mutex);
    Ep *ep = make_child<Ep>(ia);
    if (ep == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto cm = ual::SimpleDispatcher::create(ual::EventStream::cm_message, 8, 1);
    if (!cm) {
        destroy_child(ia, ep);
        return failed("dat_ep_create", cm.error(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP));
    }
    ep->cm = std::move(*cm);
    auto sink = sink_of(ep);
    ep->cm->set_callback([state = ep->state, sink](const ual::Event &e) {
        const int before = state->load(std::memory_order_acquire);
        RDMA_LOG_DEBUG("dapl", "EP %#llx: connection event %u (status %d, terminate %#x) in state %d",
                       static_cast<unsigned long long>(e.context), e.id, e.connection ? e.connection->status : 0,
                       e.connection ? e.connection->term : 0u,
                       before);
        if (disconnect_like(e.id) && before == DAT_EP_STATE_DISCONNECTED) return;  // one DISCONNECTED per connection
        ual::Event out = e;
        out.resource_type = static_cast<uint32_t>(before);  // what connection_event() needs to name the event
        state->store(state_after(e.id, before), std::memory_order_release);
        std::shared_ptr<ual::SimpleDispatcher> to;
        {
            std::lock_guard l(sink->mutex);
            to = sink->to;
            if (e.id == KRDMA_CM_PEER_DISCONNECT && sink->run) {
                // The peer closed: close this side too (as OFA's CMs answer a disconnect request), off this thread.
                sink->run([w = sink->endpoint] {
                    if (auto live = w.lock()) (void)live->disconnect(false);
                });
            }
        }
        if (to) (void)to->post(out);
    });
    ep->pz = pz;
    ep->recv = recv;
    ep->request = request;
    ep->connect = connect;
    ep->connect_handle = connect != nullptr ? connect->dat<DAT_EVD_HANDLE>() : DAT_HANDLE_NULL;
    ep->srq = srq;
    ep->attr = a;
    if (DAT_RETURN st = configure(ep); st != DAT_SUCCESS) {
        drop_sink(ep);
        destroy_child(ia, ep);
        return st;
    }
    configure_sink(ep, sink);
    use(pz);
    use(recv);
    use(request);
    use(connect);
    use(srq);
    *ep_handle = ep->dat<DAT_EP_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN bad_ep() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP); }

DAT_RETURN state_error(int state) noexcept {
    switch (state) {
        case DAT_EP_STATE_UNCONNECTED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED);
        case DAT_EP_STATE_UNCONFIGURED_UNCONNECTED:
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFIGURED);
        case DAT_EP_STATE_RESERVED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);
        case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_ACTCONNPENDING);
        case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PASSCONNPENDING);
        case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
            return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_TENTCONNPENDING);
        case DAT_EP_STATE_CONNECTED: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_CONNECTED);
        case DAT_EP_STATE_DISCONNECT_PENDING: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCPENDING);
        default: return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    }
}

}  // namespace

void release_ep(Ep *ep) noexcept {
    const int s = ep->state->load();
    if (ep->ep) {
        if (s != DAT_EP_STATE_UNCONNECTED && s != DAT_EP_STATE_DISCONNECTED &&
            s != DAT_EP_STATE_UNCONFIGURED_UNCONNECTED && s != DAT_EP_STATE_RESERVED) {
            (void)ep->ep->disconnect(true);
        }
        ep->ep->set_connection_dispatcher(nullptr);
    }
    if (auto sink = sink_of(ep)) {
        std::lock_guard l(sink->mutex);
        sink->to.reset();
        sink->run = {};
    }
    drop_sink(ep);
    unuse(ep->pz);
    unuse(ep->recv);
    unuse(ep->request);
    if (lookup<Evd>(ep->connect_handle) == ep->connect) unuse(ep->connect);
    unuse(ep->srq);
    ep->pz = nullptr;
    ep->recv = ep->request = ep->connect = nullptr;
    ep->srq = nullptr;
}

Cr *make_cr(Ia *ia, const ual::Event &e) {
    if (!e.connection) return nullptr;
    Body *sp = lookup_any(reinterpret_cast<void *>(e.context));
    if (sp == nullptr || (sp->kind != Kind::psp && sp->kind != Kind::rsp)) {
        (void)ia->adapter->reject(e.connection->request);  // its service point is gone
        return nullptr;
    }
    Cr *cr = make_child<Cr>(ia);
    if (cr == nullptr) {
        (void)ia->adapter->reject(e.connection->request);
        return nullptr;
    }
    const ual::ConnectionData &c = *e.connection;
    cr->request = c.request;
    cr->event = e;
    try {
        cr->private_data = c.private_data;
    } catch (...) {
    }
    to_sockaddr(c.llp.remote, c.llp.remote_port, cr->remote);
    cr->remote_port = c.llp.remote_port;
    cr->conn_qual = c.llp.local_port;
    if (sp->kind == Kind::psp) {
        auto *psp = static_cast<Psp *>(sp);
        cr->sp = sp;
        cr->conn_qual = psp->conn_qual;
        if (psp->flags == DAT_PSP_PROVIDER_FLAG) {
            // The provider makes the EP (no PZ, no EVDs: unconfigured); the consumer configures it with
            // dat_ep_modify, then accepts with it, or rejects (the EP goes with the request).
            DAT_EP_HANDLE made = DAT_HANDLE_NULL;
            if (ep_create(ia->dat<DAT_IA_HANDLE>(), DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL,
                          nullptr, &made) != DAT_SUCCESS) {
                (void)ia->adapter->reject(c.request);
                destroy_child(ia, cr);
                return nullptr;
            }
            cr->local_ep = lookup<Ep>(made);
            cr->provider_ep = true;
            cr->local_ep->state->store(DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
        }
    } else {
        // A reserved service point serves one request and goes: its EP is the one to accept with.
        auto *rsp = static_cast<Rsp *>(sp);
        cr->local_ep = rsp->ep;
        cr->conn_qual = rsp->conn_qual;
        if (rsp->ep != nullptr) {
            rsp->ep->state->store(DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
            unuse(rsp->ep);
        }
        unuse(rsp->evd);
        destroy_child(ia, rsp);
    }
    return cr;
}

bool connection_event(Ep *ep, const ual::Event &e, DAT_EVENT &out) {
    DAT_CONNECTION_EVENT_DATA &c = out.event_data.connect_event_data;
    c.ep_handle = ep->dat<DAT_EP_HANDLE>();
    c.private_data_size = 0;
    c.private_data = nullptr;
    const int before = static_cast<int>(e.resource_type);
    switch (e.id) {
        case KRDMA_CM_ESTABLISHED: out.event_number = DAT_CONNECTION_EVENT_ESTABLISHED; break;
        case KRDMA_CM_REJECTED: out.event_number = DAT_CONNECTION_EVENT_PEER_REJECTED; break;
        case KRDMA_CM_UNREACHABLE:
            out.event_number = e.connection && e.connection->status == ECONNREFUSED
                                   ? DAT_CONNECTION_EVENT_NON_PEER_REJECTED
                                   : DAT_CONNECTION_EVENT_UNREACHABLE;
            break;
        case KRDMA_CM_TIMEOUT: out.event_number = DAT_CONNECTION_EVENT_TIMED_OUT; break;
        case KRDMA_CM_BROKEN:
            // An established stream that ends by a reset is the end of the connection, as a socket CM sees it
            // (a peer that closes while data is in flight, two ends closing at once, a peer that dies):
            // DISCONNECTED. BROKEN is for what RDMA itself reports: a Terminate, a failed stream during setup.
            if (before == DAT_EP_STATE_PASSIVE_CONNECTION_PENDING) {
                out.event_number = DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR;
            } else if ((before == DAT_EP_STATE_CONNECTED || before == DAT_EP_STATE_DISCONNECT_PENDING) &&
                       (!e.connection || e.connection->term == 0)) {
                out.event_number = DAT_CONNECTION_EVENT_DISCONNECTED;
            } else {
                out.event_number = DAT_CONNECTION_EVENT_BROKEN;
            }
            break;
        case KRDMA_CM_PEER_DISCONNECT:
        case KRDMA_CM_DISCONNECTED: out.event_number = DAT_CONNECTION_EVENT_DISCONNECTED; break;
        default: return false;
    }
    if (e.connection && !e.connection->private_data.empty()) {
        // The event points at the data until the EP is freed: keep it with the EP.
        try {
            auto d = std::make_shared<ConnData>();
            d->private_data = e.connection->private_data;
            std::lock_guard lock(ep->conn_mutex);
            if (ep->conn_data.size() >= 8) ep->conn_data.erase(ep->conn_data.begin());
            ep->conn_data.push_back(d);
            c.private_data_size = static_cast<DAT_COUNT>(d->private_data.size());
            c.private_data = d->private_data.data();
        } catch (...) {
        }
    }
    if (e.id == KRDMA_CM_ESTABLISHED && e.connection) {
        const ri_llp_params_t &l = e.connection->llp;
        to_sockaddr(l.remote, l.remote_port, ep->remote);
        ep->remote_port = l.remote_port;
        ep->local_port = l.local_port;
    }
    return true;
}

// --- EP ------------------------------------------------------------------------------------------------------------

DAT_RETURN ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE request,
                     DAT_EVD_HANDLE connect, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep) {
    return create_ep(ia, pz, recv, request, connect, DAT_HANDLE_NULL, attr, ep, false);
}

DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE request,
                              DAT_EVD_HANDLE connect, DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep) {
    return create_ep(ia, pz, recv, request, connect, srq, attr, ep, true);
}

DAT_RETURN ep_free(DAT_EP_HANDLE ep_handle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    Ia *ia = ep->ia;
    std::lock_guard lock(ia->mutex);
    if (ep->users != 0) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_RESERVED);  // an RSP holds it
    release_ep(ep);
    destroy_child(ia, ep);
    return DAT_SUCCESS;
}

DAT_RETURN ep_query(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *p) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~DAT_EP_FIELD_ALL) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(ep->ia->mutex);
    p->ia_handle = public_ia(ep->ia);
    p->ep_state = static_cast<DAT_EP_STATE>(ep->state->load());
    std::memset(&p->comm, 0, sizeof p->comm);
    p->local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->ia->address);
    p->local_port_qual = ep->local_port;
    p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ep->remote);
    p->remote_port_qual = ep->remote_port;
    p->pz_handle = ep->pz != nullptr ? ep->pz->dat<DAT_PZ_HANDLE>() : DAT_HANDLE_NULL;
    p->recv_evd_handle = ep->recv != nullptr ? ep->recv->dat<DAT_EVD_HANDLE>() : DAT_HANDLE_NULL;
    p->request_evd_handle = ep->request != nullptr ? ep->request->dat<DAT_EVD_HANDLE>() : DAT_HANDLE_NULL;
    p->connect_evd_handle = lookup<Evd>(ep->connect_handle) != nullptr ? ep->connect_handle : DAT_HANDLE_NULL;
    p->srq_handle = ep->srq != nullptr ? ep->srq->dat<DAT_SRQ_HANDLE>() : DAT_HANDLE_NULL;
    p->ep_attr = ep->attr;
    if (ep->ep) {
        if (auto q = ep->ep->query()) {
            p->ep_attr.max_rdma_read_in = static_cast<DAT_COUNT>(q->ird);
            p->ep_attr.max_rdma_read_out = static_cast<DAT_COUNT>(q->ord);
        }
    }
    return DAT_SUCCESS;
}

DAT_RETURN ep_modify(DAT_EP_HANDLE ep_handle, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    constexpr DAT_EP_PARAM_MASK kReadOnly = DAT_EP_FIELD_IA_HANDLE | DAT_EP_FIELD_EP_STATE | DAT_EP_FIELD_COMM |
                                            DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR | DAT_EP_FIELD_LOCAL_PORT_QUAL |
                                            DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR | DAT_EP_FIELD_REMOTE_PORT_QUAL |
                                            DAT_EP_FIELD_SRQ_HANDLE | DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE |
                                            DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW;
    if ((mask & ~DAT_EP_FIELD_ALL) != 0 || (mask & kReadOnly) != 0) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    Ia *ia = ep->ia;
    std::lock_guard lock(ia->mutex);
    const int s = ep->state->load();
    // A provider-created EP (DAT_PSP_PROVIDER_FLAG) is configured while its request waits: it stays tentative.
    const bool tentative = s == DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING || s == DAT_EP_STATE_UNCONFIGURED_TENTATIVE;
    if (s != DAT_EP_STATE_UNCONNECTED && s != DAT_EP_STATE_UNCONFIGURED_UNCONNECTED && !tentative) return state_error(s);
    Pz *pz = ep->pz;
    Evd *recv = ep->recv, *request = ep->request, *connect = ep->connect;
    if (mask & DAT_EP_FIELD_PZ_HANDLE) {
        pz = p->pz_handle == DAT_HANDLE_NULL ? nullptr : lookup<Pz>(p->pz_handle);
        if (p->pz_handle != DAT_HANDLE_NULL && (pz == nullptr || pz->ia != ia)) {
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
        }
    }
    auto dto_evd = [&](DAT_EVD_HANDLE h, Evd *&out) {
        if (h == DAT_HANDLE_NULL) {
            out = nullptr;
            return true;
        }
        out = lookup<Evd>(h);
        return out != nullptr && out->ia == ia && out->has_cq();
    };
    if ((mask & DAT_EP_FIELD_RECV_EVD_HANDLE) && !dto_evd(p->recv_evd_handle, recv)) {
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_RECV);
    }
    if ((mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE) && !dto_evd(p->request_evd_handle, request)) {
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    }
    if (mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE) {
        connect = p->connect_evd_handle == DAT_HANDLE_NULL ? nullptr : lookup<Evd>(p->connect_evd_handle);
        if (p->connect_evd_handle != DAT_HANDLE_NULL &&
            (connect == nullptr || !(connect->flags & DAT_EVD_CONNECTION_FLAG))) {
            return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CONN);
        }
    }
    DAT_EP_ATTR a = ep->attr;
    const DAT_EP_ATTR &n = p->ep_attr;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE) a.max_message_size = n.max_message_size;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE) a.max_rdma_size = n.max_rdma_size;
    if (mask & DAT_EP_FIELD_EP_ATTR_QOS) a.qos = n.qos;
    if (mask & DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) a.recv_completion_flags = n.recv_completion_flags;
    if (mask & DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS) a.request_completion_flags = n.request_completion_flags;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS) a.max_recv_dtos = n.max_recv_dtos;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS) a.max_request_dtos = n.max_request_dtos;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV) a.max_recv_iov = n.max_recv_iov;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV) a.max_request_iov = n.max_request_iov;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN) a.max_rdma_read_in = n.max_rdma_read_in;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT) a.max_rdma_read_out = n.max_rdma_read_out;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV) a.max_rdma_read_iov = n.max_rdma_read_iov;
    if (mask & DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV) a.max_rdma_write_iov = n.max_rdma_write_iov;
    if (DAT_RETURN st = check_attr(ia, a, ep->srq != nullptr, DAT_INVALID_ARG3); st != DAT_SUCCESS) return st;
    // Only the read depths and the connect EVD change on a live QP; anything else makes a new one (nothing is
    // connected, so nothing is lost).
    constexpr DAT_EP_PARAM_MASK kOnLiveQp = DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN |
                                        DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT | DAT_EP_FIELD_EP_ATTR_QOS |
                                        DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE | DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE |
                                        DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS |
                                        DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS;
    const bool rebuild = !ep->ep || (mask & ~kOnLiveQp) != 0;
    unuse(ep->pz);
    unuse(ep->recv);
    unuse(ep->request);
    if (lookup<Evd>(ep->connect_handle) == ep->connect) unuse(ep->connect);
    ep->pz = pz;
    ep->recv = recv;
    ep->request = request;
    ep->connect = connect;
    ep->connect_handle = connect != nullptr ? connect->dat<DAT_EVD_HANDLE>() : DAT_HANDLE_NULL;
    use(pz);
    use(recv);
    use(request);
    use(connect);
    ep->attr = a;
    if (rebuild) {
        const DAT_RETURN st = configure(ep);
        if (tentative) {
            ep->state->store(ep->ep ? DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING : DAT_EP_STATE_UNCONFIGURED_TENTATIVE);
        }
        return st;
    }
    ri_qp_attr_t qa{};
    qa.ird = static_cast<uint32_t>(a.max_rdma_read_in);
    qa.ord = static_cast<uint32_t>(a.max_rdma_read_out);
    if (rdma::Status st = ep->ep->modify(qa, RI_QP_ATTR_IRD | RI_QP_ATTR_ORD); !st.ok()) {
        return from_ri(st.code(), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3));
    }
    configure_sink(ep, sink_of(ep));
    return DAT_SUCCESS;
}

namespace {

DAT_RETURN connect_to(Ep *ep, const sockaddr *remote, uint16_t port, DAT_TIMEOUT timeout, DAT_COUNT size,
                      const void *pdata) {
    if (size < 0 || size > max_private_data(ep->ia)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (size > 0 && pdata == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    const std::string address = address_text(remote);
    if (address.empty()) return DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED);
    if (port == 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::lock_guard lock(ep->ia->mutex);
    int expected = DAT_EP_STATE_UNCONNECTED;
    if (!ep->ep || !ep->state->compare_exchange_strong(expected, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING)) {
        return state_error(ep->state->load());
    }
    std::memset(&ep->remote, 0, sizeof ep->remote);
    std::memcpy(&ep->remote, remote, remote->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    ep->remote_port = port;
    const auto ms = timeout == DAT_TIMEOUT_INFINITE ? std::chrono::milliseconds(0)
                                                    : std::chrono::milliseconds((uint64_t{timeout} + 999) / 1000);
    // Not waiting for the kAL (a client opening many connections makes no round trip each): a refusal there (no
    // route, a limit) ends in DAT_CONNECTION_EVENT_UNREACHABLE on the EP's connect EVD, as an unreachable peer does.
    // An address of another family than the IA's is still refused here.
    auto st = ep->ep->connect_async(address, port, bytes(pdata, size), ms);
    if (!st) {
        ep->state->store(DAT_EP_STATE_UNCONNECTED);
        const int c = st.code();
        return failed("dat_ep_connect", st.error(),
                      c == RI_EINVAL || c == RI_EAFNOSUPPORT
                          ? DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE)
                          : from_ri(c, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)));
    }
    return DAT_SUCCESS;
}

}  // namespace

DAT_RETURN ep_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR remote, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout,
                      DAT_COUNT size, const DAT_PVOID pdata, DAT_QOS qos, DAT_CONNECT_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (remote == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if ((qos & ~static_cast<uint32_t>(DAT_QOS_BEST_EFFORT | DAT_QOS_HIGH_THROUGHPUT | DAT_QOS_LOW_LATENCY |
                                       DAT_QOS_ECONOMY | DAT_QOS_PREMIUM)) != 0) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    }
    if ((flags & ~static_cast<uint32_t>(DAT_CONNECT_MULTIPATH_REQUESTED_FLAG | DAT_CONNECT_MULTIPATH_REQUIRED_FLAG)) != 0) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    }
    if (flags & DAT_CONNECT_MULTIPATH_REQUIRED_FLAG) return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    return connect_to(ep, reinterpret_cast<const sockaddr *>(remote), port_of(qual), timeout, size, pdata);
}

DAT_RETURN ep_dup_connect(DAT_EP_HANDLE ep_handle, DAT_EP_HANDLE dup_handle, DAT_TIMEOUT timeout, DAT_COUNT size,
                          const DAT_PVOID pdata, DAT_QOS qos) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    Ep *dup = lookup<Ep>(dup_handle);
    if (dup == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    (void)qos;
    sockaddr_storage remote;
    uint16_t port;
    {
        std::lock_guard lock(dup->ia->mutex);
        if (dup->state->load() != DAT_EP_STATE_CONNECTED) return state_error(dup->state->load());
        remote = dup->remote;
        port = static_cast<uint16_t>(dup->remote_port);
    }
    return connect_to(ep, reinterpret_cast<const sockaddr *>(&remote), port, timeout, size, pdata);
}

DAT_RETURN ep_disconnect(DAT_EP_HANDLE ep_handle, DAT_CLOSE_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    std::lock_guard lock(ep->ia->mutex);
    const int s = ep->state->load();
    switch (s) {
        case DAT_EP_STATE_DISCONNECTED: return DAT_SUCCESS;  // the peer closed first: nothing is left to do
        case DAT_EP_STATE_CONNECTED:
        case DAT_EP_STATE_ACTIVE_CONNECTION_PENDING:
        case DAT_EP_STATE_PASSIVE_CONNECTION_PENDING:
        case DAT_EP_STATE_DISCONNECT_PENDING: break;
        case DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING:
            ep->state->store(DAT_EP_STATE_UNCONNECTED);  // an RSP's request not yet accepted
            return DAT_SUCCESS;
        default: return state_error(s);
    }
    const bool abortive = flags == DAT_CLOSE_ABRUPT_FLAG || s != DAT_EP_STATE_CONNECTED;
    if (s == DAT_EP_STATE_DISCONNECT_PENDING && !abortive) return DAT_SUCCESS;
    int expected = s;
    (void)ep->state->compare_exchange_strong(expected, DAT_EP_STATE_DISCONNECT_PENDING);
    rdma::Status st = ep->ep->disconnect(abortive);
    if (!st.ok()) {
        // The stream is already gone (the peer's end and ours crossed): the event that says so is on its way.
        if (ep->state->load() == DAT_EP_STATE_DISCONNECTED) return DAT_SUCCESS;
        return from_ri(st.code(), DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED));
    }
    return DAT_SUCCESS;
}

DAT_RETURN ep_reset(DAT_EP_HANDLE ep_handle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    std::lock_guard lock(ep->ia->mutex);
    const int s = ep->state->load();
    if (s == DAT_EP_STATE_UNCONNECTED || s == DAT_EP_STATE_UNCONFIGURED_UNCONNECTED) return DAT_SUCCESS;
    if (s != DAT_EP_STATE_DISCONNECTED) return state_error(s);
    ri_qp_attr_t qa{};
    qa.state = RI_QPS_IDLE;
    if (rdma::Status st = ep->ep->modify(qa, RI_QP_ATTR_STATE); !st.ok()) {
        // The provider cannot take the QP back to IDLE: a new QP serves the next connection.
        if (DAT_RETURN r = configure(ep); r != DAT_SUCCESS) return r;
    }
    ep->recv_posted.store(0);
    ep->state->store(DAT_EP_STATE_UNCONNECTED);
    std::memset(&ep->remote, 0, sizeof ep->remote);
    ep->remote_port = ep->local_port = 0;
    return DAT_SUCCESS;
}

DAT_RETURN ep_get_status(DAT_EP_HANDLE ep_handle, DAT_EP_STATE *state, DAT_BOOLEAN *recv_idle,
                         DAT_BOOLEAN *request_idle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (state == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    const int s = ep->state->load();
    *state = static_cast<DAT_EP_STATE>(s);
    if (recv_idle != nullptr) {
        *recv_idle = (ep->srq != nullptr || ep->recv_posted.load() <= 0) ? DAT_TRUE : DAT_FALSE;
    }
    if (request_idle != nullptr) {
        // Unsignalled requests never report back, so only a QP that cannot be sending is known idle.
        *request_idle = s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_DISCONNECT_PENDING ? DAT_FALSE : DAT_TRUE;
    }
    return DAT_SUCCESS;
}

DAT_RETURN ep_recv_query(DAT_EP_HANDLE ep_handle, DAT_COUNT *nbufs_alloc, DAT_COUNT *bufs_alloc_span) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (ep->srq == nullptr) return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);  // defined for EPs on an SRQ only
    if (nbufs_alloc != nullptr) *nbufs_alloc = DAT_VALUE_UNKNOWN;
    if (bufs_alloc_span != nullptr) *bufs_alloc_span = DAT_VALUE_UNKNOWN;
    return DAT_SUCCESS;
}

DAT_RETURN ep_set_watermark(DAT_EP_HANDLE ep_handle, DAT_COUNT soft_high, DAT_COUNT hard_high) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (ep->srq == nullptr) return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    (void)soft_high;
    (void)hard_high;
    // RNIC-PI has no per-QP share of an SRQ to limit (see README: not supported).
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}

// --- CR ------------------------------------------------------------------------------------------------------------

DAT_RETURN cr_query(DAT_CR_HANDLE cr_handle, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *p) {
    Cr *cr = lookup<Cr>(cr_handle);
    if (cr == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_CR_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    p->remote_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&cr->remote);
    p->remote_port_qual = cr->remote_port;
    p->private_data_size = static_cast<DAT_COUNT>(cr->private_data.size());
    p->private_data = cr->private_data.empty() ? nullptr : cr->private_data.data();
    p->local_ep_handle = cr->local_ep != nullptr ? cr->local_ep->dat<DAT_EP_HANDLE>() : DAT_HANDLE_NULL;
    return DAT_SUCCESS;
}

DAT_RETURN cr_accept(DAT_CR_HANDLE cr_handle, DAT_EP_HANDLE ep_handle, DAT_COUNT size, const DAT_PVOID pdata) {
    Cr *cr = lookup<Cr>(cr_handle);
    if (cr == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    Ep *ep = ep_handle == DAT_HANDLE_NULL ? cr->local_ep : lookup<Ep>(ep_handle);
    if (ep == nullptr || ep->ia != cr->ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (cr->local_ep != nullptr && ep != cr->local_ep) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if (size < 0 || size > max_private_data(cr->ia)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (size > 0 && pdata == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    Ia *ia = cr->ia;
    std::lock_guard lock(ia->mutex);
    const int want = cr->local_ep != nullptr ? DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING : DAT_EP_STATE_UNCONNECTED;
    if (ep->state->load() == DAT_EP_STATE_UNCONFIGURED_TENTATIVE) {
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONFTENTATIVE);  // dat_ep_modify it first
    }
    int expected = want;
    if (!ep->ep || !ep->state->compare_exchange_strong(expected, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING)) {
        return state_error(ep->state->load());
    }
    // Not waiting for the kAL either (a server accepting many connections keeps going): a refusal there (the
    // request timed out meanwhile, a limit) arrives as DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR.
    auto st = ep->ep->accept_async(cr->request, bytes(pdata, size));
    if (!st) {
        ep->state->store(want);
        return failed("dat_cr_accept", st.error(),
                      st.code() == RI_ENOENT ? DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR)
                                             : from_ri(st.code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)));
    }
    ep->remote = cr->remote;
    ep->remote_port = cr->remote_port;
    ep->local_port = cr->conn_qual;
    destroy_child(ia, cr);
    return DAT_SUCCESS;
}

DAT_RETURN cr_reject(DAT_CR_HANDLE cr_handle, DAT_COUNT size, const DAT_PVOID pdata) {
    Cr *cr = lookup<Cr>(cr_handle);
    if (cr == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    if (size < 0 || size > max_private_data(cr->ia)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (size > 0 && pdata == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    Ia *ia = cr->ia;
    std::lock_guard lock(ia->mutex);
    auto st = ia->adapter->reject(cr->request, bytes(pdata, size));
    if (cr->local_ep != nullptr) {
        if (cr->provider_ep) {
            release_ep(cr->local_ep);
            destroy_child(ia, cr->local_ep);
        } else {
            cr->local_ep->state->store(DAT_EP_STATE_UNCONNECTED);
        }
    }
    destroy_child(ia, cr);
    if (!st && st.code() != RI_ENOENT) {
        return failed("dat_cr_reject", st.error(), from_ri(st.code(), DAT_ERROR(DAT_INTERNAL_ERROR, 0)));
    }
    return DAT_SUCCESS;  // a request whose requester gave up is gone either way
}

DAT_RETURN cr_handoff(DAT_CR_HANDLE cr_handle, DAT_CONN_QUAL qual) {
    Cr *cr = lookup<Cr>(cr_handle);
    if (cr == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CR);
    Ia *ia = cr->ia;
    std::lock_guard lock(ia->mutex);
    for (Body *o : ia->objects) {
        if (o->kind != Kind::psp) continue;
        auto *psp = static_cast<Psp *>(o);
        if (psp->conn_qual != qual) continue;
        ual::Event e = cr->event;
        e.context = reinterpret_cast<uint64_t>(psp->handle);
        if (!psp->evd->requests->post(e)) return DAT_ERROR(DAT_QUEUE_FULL, 0);
        destroy_child(ia, cr);
        return DAT_SUCCESS;
    }
    return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);  // no PSP of this IA listens there
}

// --- PSP and RSP -----------------------------------------------------------------------------------------------------

namespace {

DAT_RETURN listen_on(Ia *ia, uint16_t port, Evd *evd, Body *sp, std::shared_ptr<ual::ListenPoint> &out) {
    auto lp = ia->adapter->listen(port, evd->requests, reinterpret_cast<uint64_t>(sp->handle));
    if (!lp) {
        const int c = lp.error().code();
        return failed("dat_psp_create", lp.error(),
                      c == RI_EEXIST || c == RI_EADDRINUSE || c == RI_EBUSY
                          ? DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0)
                          : from_ri(c, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)));
    }
    out = std::move(*lp);
    return DAT_SUCCESS;
}

DAT_RETURN make_psp(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL *qual, bool any, DAT_EVD_HANDLE evd_handle,
                    DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (qual == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr || evd->ia != ia || !(evd->flags & DAT_EVD_CR_FLAG)) {
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    }
    if (flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    }
    if (psp_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    const uint16_t port = any ? 0 : port_of(*qual);
    if (!any && port == 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(ia->mutex);
    Psp *psp = make_child<Psp>(ia);
    if (psp == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (DAT_RETURN st = listen_on(ia, port, evd, psp, psp->lp); st != DAT_SUCCESS) {
        destroy_child(ia, psp);
        return st;
    }
    psp->evd = evd;
    psp->flags = flags;
    psp->conn_qual = any ? psp->lp->port() : *qual;
    use(evd);
    if (any) *qual = psp->conn_qual;
    *psp_handle = psp->dat<DAT_PSP_HANDLE>();
    return DAT_SUCCESS;
}

}  // namespace

DAT_RETURN psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                      DAT_PSP_HANDLE *psp) {
    return make_psp(ia, &qual, false, evd, flags, psp);
}

DAT_RETURN psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags,
                          DAT_PSP_HANDLE *psp) {
    return make_psp(ia, qual, true, evd, flags, psp);
}

DAT_RETURN psp_query(DAT_PSP_HANDLE psp_handle, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *p) {
    Psp *psp = lookup<Psp>(psp_handle);
    if (psp == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_PSP_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    p->ia_handle = public_ia(psp->ia);
    p->conn_qual = psp->conn_qual;
    p->evd_handle = psp->evd->dat<DAT_EVD_HANDLE>();
    p->psp_flags = psp->flags;
    return DAT_SUCCESS;
}

DAT_RETURN psp_free(DAT_PSP_HANDLE psp_handle) {
    Psp *psp = lookup<Psp>(psp_handle);
    if (psp == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PSP);
    Ia *ia = psp->ia;
    std::lock_guard lock(ia->mutex);
    unuse(psp->evd);
    destroy_child(ia, psp);  // closes the listen point; CRs already delivered stay valid
    return DAT_SUCCESS;
}

DAT_RETURN rsp_create(DAT_IA_HANDLE ia_handle, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep_handle, DAT_EVD_HANDLE evd_handle,
                      DAT_RSP_HANDLE *rsp_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr || ep->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr || evd->ia != ia || !(evd->flags & DAT_EVD_CR_FLAG)) {
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_CR);
    }
    if (rsp_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (port_of(qual) == 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(ia->mutex);
    int expected = DAT_EP_STATE_UNCONNECTED;
    if (!ep->ep || !ep->state->compare_exchange_strong(expected, DAT_EP_STATE_RESERVED)) {
        return state_error(ep->state->load());
    }
    Rsp *rsp = make_child<Rsp>(ia);
    if (rsp == nullptr) {
        ep->state->store(DAT_EP_STATE_UNCONNECTED);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (DAT_RETURN st = listen_on(ia, port_of(qual), evd, rsp, rsp->lp); st != DAT_SUCCESS) {
        ep->state->store(DAT_EP_STATE_UNCONNECTED);
        destroy_child(ia, rsp);
        return st;
    }
    rsp->evd = evd;
    rsp->ep = ep;
    rsp->conn_qual = qual;
    use(evd);
    use(ep);
    *rsp_handle = rsp->dat<DAT_RSP_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN rsp_query(DAT_RSP_HANDLE rsp_handle, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *p) {
    Rsp *rsp = lookup<Rsp>(rsp_handle);
    if (rsp == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_RSP_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    p->ia_handle = public_ia(rsp->ia);
    p->conn_qual = rsp->conn_qual;
    p->evd_handle = rsp->evd->dat<DAT_EVD_HANDLE>();
    p->ep_handle = rsp->ep != nullptr ? rsp->ep->dat<DAT_EP_HANDLE>() : DAT_HANDLE_NULL;
    return DAT_SUCCESS;
}

DAT_RETURN rsp_free(DAT_RSP_HANDLE rsp_handle) {
    Rsp *rsp = lookup<Rsp>(rsp_handle);
    if (rsp == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RSP);
    Ia *ia = rsp->ia;
    std::lock_guard lock(ia->mutex);
    if (rsp->ep != nullptr) {
        int expected = DAT_EP_STATE_RESERVED;
        (void)rsp->ep->state->compare_exchange_strong(expected, DAT_EP_STATE_UNCONNECTED);
        unuse(rsp->ep);
    }
    unuse(rsp->evd);
    destroy_child(ia, rsp);
    return DAT_SUCCESS;
}

}  // namespace dapl
