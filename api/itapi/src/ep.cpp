// IT-API endpoints and connection management over the access layer's endpoints and listen points.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <unordered_map>

#include "common.hpp"
#include "it_api_openrdma.h"
#include "failure.hpp"
#include "requests.hpp"

namespace itapi {
namespace {

std::mutex g_requests_mutex;
std::unordered_map<uint64_t, PendingRequest> g_requests;

uint16_t host_port(uint16_t wire) noexcept {
#ifdef ITAPI_IANA_PORT_HOST_BYTE_ORDER
    return wire;
#else
    return ntohs(wire);
#endif
}

// The other way: a port as an it_conn_qual_t carries it.
uint16_t wire_port(uint16_t host) noexcept { return host_port(host); }  // the swap is its own inverse

// A listen point's qualifier, of the type the consumer listened with: IT_IANA_PORT, or IT_IANA_LR_PORT with the
// local port and 0 (any peer port) for the remote one.
void listen_qual(const Listen &l, it_conn_qual_t &q) noexcept {
    q.type = l.lr_port ? IT_IANA_LR_PORT : IT_IANA_PORT;
    if (l.lr_port) {
        q.conn_qual.lr_port.local = wire_port(l.port);
        q.conn_qual.lr_port.remote = 0;
    } else {
        q.conn_qual.port = wire_port(l.port);
    }
}

std::span<const uint8_t> bytes(const unsigned char *p, size_t n) noexcept { return {p, n}; }

size_t max_private_data(const Ia *ia) noexcept { return std::min<size_t>(ia->attr.max_private_data, IT_MAX_PRIV_DATA); }

// What it_ep_rc_create and it_ep_modify check of the RC attributes against the RNIC.
it_status_t check_attributes(const Ia *ia, const it_ep_attributes_t &a, bool with_srq) {
    const ri_rnic_attr_t &r = ia->attr;
    if (a.max_request_dtos == 0 || a.max_request_dtos > r.max_qp_wr) return IT_ERR_RESOURCE_REQ_DTO;
    if (!with_srq && (a.max_recv_dtos == 0 || a.max_recv_dtos > r.max_qp_wr)) return IT_ERR_RESOURCE_RECV_DTO;
    if (a.max_send_segments == 0 || a.max_send_segments > r.max_sge) return IT_ERR_RESOURCE_SSEG;
    if (!with_srq && (a.max_recv_segments == 0 || a.max_recv_segments > r.max_sge)) return IT_ERR_RESOURCE_RSEG;
    const it_rc_only_attributes_t &rc = a.srv.rc;
    if (rc.max_rdma_read_segments > r.max_sge_rd) return IT_ERR_RESOURCE_RRSEG;
    if (rc.max_rdma_write_segments > r.max_sge) return IT_ERR_RESOURCE_RWSEG;
    if (rc.rdma_read_ird > r.max_ird) return IT_ERR_RESOURCE_IRD;
    if (rc.rdma_read_ord > r.max_ord) return IT_ERR_RESOURCE_ORD;
    if (rc.atomics_enable == IT_TRUE && !(r.caps & RI_CAP_ATOMICS)) return IT_ERR_OP_NOT_SUPPORTED;
    if (a.priv_ops_enable == IT_TRUE) return IT_ERR_PRIV_OPS_UNAVAILABLE;  // user consumers are not privileged
    return IT_SUCCESS;
}

uint32_t remote_access(const it_rc_only_attributes_t &rc) noexcept {
    uint32_t a = 0;
    if (rc.rdma_read_enable == IT_TRUE) a |= RI_ACCESS_REMOTE_READ;
    if (rc.rdma_write_enable == IT_TRUE) a |= RI_ACCESS_REMOTE_WRITE;
    return a;
}

void release_ep(Ep *ep) {
    --ep->pz->users;
    --ep->request->users;
    --ep->recv->users;
    --ep->connect->users;
    if (ep->srq != nullptr) --ep->srq->users;
}

}  // namespace

void remember_request(const ual::Event &e, Ia *ia) {
    if (!e.connection) return;
    std::lock_guard lock(g_requests_mutex);
    g_requests[e.connection->request] = PendingRequest{ia, e};
}

std::optional<PendingRequest> take_request(uint64_t id) {
    std::lock_guard lock(g_requests_mutex);
    auto it = g_requests.find(id);
    if (it == g_requests.end()) return std::nullopt;
    PendingRequest r = std::move(it->second);
    g_requests.erase(it);
    return r;
}

void restore_request(uint64_t id, PendingRequest r) {
    std::lock_guard lock(g_requests_mutex);
    g_requests.emplace(id, std::move(r));
}

void forget_requests(const Ia *ia) {
    std::lock_guard lock(g_requests_mutex);
    std::erase_if(g_requests, [ia](const auto &kv) { return kv.second.ia == ia; });
}

}  // namespace itapi

using namespace itapi;

ITAPI_EXPORT it_status_t it_ep_rc_create(it_pz_handle_t pz_handle, it_evd_handle_t request_sevd_handle,
                                         it_evd_handle_t recv_sevd_handle, it_evd_handle_t connect_sevd_handle,
                                         it_ep_rc_creation_flags_t flags, const it_ep_attributes_t *ep_attr,
                                         it_ep_handle_t *ep_handle) {
    forget_failure();
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    if (ep_handle == nullptr || ep_attr == nullptr) return IT_ERR_FAULT;
    if ((flags & ~static_cast<uint32_t>(IT_EP_REUSEADDR | IT_EP_SRQ)) != 0) return IT_ERR_INVALID_FLAGS;
    Ia *ia = pz->ia;
    Evd *req = lookup<Evd>(request_sevd_handle);
    if (req == nullptr || req->ia != ia) return IT_ERR_INVALID_REQ_EVD;
    if (req->stream != IT_DTO_EVENT_STREAM) return req->aggregate() ? IT_ERR_AEVD_NOT_ALLOWED : IT_ERR_INVALID_REQ_EVD;
    Evd *recv = lookup<Evd>(recv_sevd_handle);
    if (recv == nullptr || recv->ia != ia) return IT_ERR_INVALID_RECV_EVD;
    if (recv->stream != IT_DTO_EVENT_STREAM) return recv->aggregate() ? IT_ERR_AEVD_NOT_ALLOWED : IT_ERR_INVALID_RECV_EVD;
    Evd *conn = lookup<Evd>(connect_sevd_handle);
    if (conn == nullptr || conn->ia != ia) return IT_ERR_INVALID_CONN_EVD;
    if (conn->stream != IT_CM_MSG_EVENT_STREAM) return conn->aggregate() ? IT_ERR_AEVD_NOT_ALLOWED : IT_ERR_INVALID_CONN_EVD;
    Srq *srq = nullptr;
    if (flags & IT_EP_SRQ) {
        srq = lookup<Srq>(ep_attr->srv.rc.srq);
        if (srq == nullptr || srq->ia != ia) return IT_ERR_INVALID_SRQ;
        if (srq->pz != pz) return IT_ERR_INVALID_PZ;
    }
    if (it_status_t st = check_attributes(ia, *ep_attr, srq != nullptr); st != IT_SUCCESS) return st;

    std::lock_guard lock(ia->mutex);
    Ep *ep = make_child<Ep>(ia);
    if (ep == nullptr) return IT_ERR_RESOURCES;
    const it_rc_only_attributes_t &rc = ep_attr->srv.rc;
    ual::EndpointAttributes a;
    a.sq_depth = static_cast<uint32_t>(ep_attr->max_request_dtos);
    a.rq_depth = srq != nullptr ? 0 : static_cast<uint32_t>(ep_attr->max_recv_dtos);
    a.sq_sge = static_cast<uint32_t>(ep_attr->max_send_segments);
    a.rq_sge = srq != nullptr ? 1 : static_cast<uint32_t>(ep_attr->max_recv_segments);
    a.rd_sge = static_cast<uint32_t>(rc.max_rdma_read_segments == 0 ? 1 : rc.max_rdma_read_segments);
    a.ird = rc.rdma_read_ird;
    a.ord = rc.rdma_read_ord;
    a.signal_all = false;
    a.context = ep->handle;  // work completions and events name the EP by its handle
    a.access = remote_access(rc);  // set at creation (one device call fewer than a Modify QP after it)
    auto made = pz->pz->create_endpoint(a, req->cq, recv->cq, srq != nullptr ? srq->srq : nullptr);
    if (!made) {
        destroy_child(ia, ep);
        const int c = made.error().code();
        return failed("it_ep_rc_create", made.error(),
                      c == RI_ERANGE ? IT_ERR_INVALID_EP_ATTR : from_ri(c, IT_ERR_RESOURCES));
    }
    ep->ep = std::move(*made);
    // Connection events pass through the EP's own dispatcher, which moves the IT-API EP state as they happen
    // (not when the consumer dequeues them) and hands them on to the consumer's connection SEVD.
    auto cm = ual::SimpleDispatcher::create(ual::EventStream::cm_message, 4, 1);
    if (!cm) {
        destroy_child(ia, ep);
        return failed("it_ep_rc_create", cm.error(), from_ri(cm.error().code(), IT_ERR_RESOURCES));
    }
    ep->cm = std::move(*cm);
    ep->cm->set_callback([state = ep->state, to = conn->sd](const ual::Event &e) {
        state->store(state_after(e.id), std::memory_order_release);
        to->post(e);
    });
    ep->ep->set_connection_dispatcher(ep->cm);
    ep->pz = pz;
    ep->request = req;
    ep->recv = recv;
    ep->connect = conn;
    ep->srq = srq;
    ep->verbs = &ia->adapter->verbs();
    ep->qp = ep->ep->handle();
    ep->attr = *ep_attr;
    const ri_qp_init_attr_t &in = ep->ep->attributes();
    ep->attr.max_request_dtos = in.sq_depth;
    if (srq == nullptr) ep->attr.max_recv_dtos = in.rq_depth;
    ep->attr.srv.rc.srq = srq != nullptr ? ep_attr->srv.rc.srq : nullptr;
    ++pz->users;
    ++req->users;
    ++recv->users;
    ++conn->users;
    if (srq != nullptr) ++srq->users;
    *ep_handle = to_handle<it_ep_handle_t>(ep);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ep_free(it_ep_handle_t ep_handle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    Ia *ia = ep->ia;
    std::lock_guard lock(ia->mutex);
    if (ep->users != 0) return IT_ERR_EP_BUSY;
    const int s = ep->state->load();
    if (s != IT_EP_STATE_UNCONNECTED && s != IT_EP_STATE_NONOPERATIONAL) (void)ep->ep->disconnect(true);
    ep->ep->set_connection_dispatcher(nullptr);
    // The QP goes now, not when the last reference does: the uAL's event thread may hold one (krdmad going away),
    // and the consumer may free the EP's CQs next.
    (void)ep->ep->close();
    release_ep(ep);
    destroy_child(ia, ep);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ep_query(it_ep_handle_t ep_handle, it_ep_param_mask_t mask, it_ep_param_t *params) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0x0fffffffu) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(ep->ia->mutex);
    params->ia = to_handle<it_ia_handle_t>(ep->ia);
    params->spigot_id = 0;
    params->ep_state.rc = static_cast<it_ep_state_rc_t>(ep->state->load());
    params->service_type = IT_RC_SERVICE;
    params->dst_path = ep->path;
    params->pz = to_handle<it_pz_handle_t>(ep->pz);
    params->request_sevd = to_handle<it_evd_handle_t>(ep->request);
    params->recv_sevd = to_handle<it_evd_handle_t>(ep->recv);
    params->connect_sevd = to_handle<it_evd_handle_t>(ep->connect);
    params->attr = ep->attr;
    if (auto q = ep->ep->query()) {
        params->attr.srv.rc.rdma_read_ird = q->ird;
        params->attr.srv.rc.rdma_read_ord = q->ord;
    }
    return IT_SUCCESS;
}

ITAPI_EXPORT const char *openrdma_it_ep_path(it_ep_handle_t ep_handle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return "";
    auto q = ep->ep->query();
    if (!q || q->llp.mpa_revision == 0) return "";  // not in RDMA mode: no path yet
    return (q->llp.mpa_flags & RI_LLP_SAME_HOST) != 0 ? "same-host" : "wire";
}

ITAPI_EXPORT it_status_t it_ep_modify(it_ep_handle_t ep_handle, it_ep_param_mask_t mask,
                                      const it_ep_attributes_t *ep_attr) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (ep_attr == nullptr) return IT_ERR_FAULT;
    constexpr uint32_t kModifiable =
        IT_EP_PARAM_RDMA_RD_ENABLE | IT_EP_PARAM_RDMA_WR_ENABLE | IT_EP_PARAM_MAX_IRD | IT_EP_PARAM_MAX_ORD;
    if ((mask & ~kModifiable) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(ep->ia->mutex);
    // The RNIC changes these on an unconnected EP only.
    if (ep->state->load() != IT_EP_STATE_UNCONNECTED) return IT_ERR_INVALID_EP_STATE;
    it_ep_attributes_t next = ep->attr;
    if (mask & IT_EP_PARAM_RDMA_RD_ENABLE) next.srv.rc.rdma_read_enable = ep_attr->srv.rc.rdma_read_enable;
    if (mask & IT_EP_PARAM_RDMA_WR_ENABLE) next.srv.rc.rdma_write_enable = ep_attr->srv.rc.rdma_write_enable;
    if (mask & IT_EP_PARAM_MAX_IRD) next.srv.rc.rdma_read_ird = ep_attr->srv.rc.rdma_read_ird;
    if (mask & IT_EP_PARAM_MAX_ORD) next.srv.rc.rdma_read_ord = ep_attr->srv.rc.rdma_read_ord;
    if (next.srv.rc.rdma_read_ird > ep->ia->attr.max_ird) return IT_ERR_RESOURCE_IRD;
    if (next.srv.rc.rdma_read_ord > ep->ia->attr.max_ord) return IT_ERR_RESOURCE_ORD;
    ri_qp_attr_t qa{};
    qa.access = remote_access(next.srv.rc);
    qa.ird = next.srv.rc.rdma_read_ird;
    qa.ord = next.srv.rc.rdma_read_ord;
    if (rdma::Status st = ep->ep->modify(qa, RI_QP_ATTR_ACCESS | RI_QP_ATTR_IRD | RI_QP_ATTR_ORD); !st.ok()) {
        return from_ri(st.code(), IT_ERR_INVALID_EP_ATTR);
    }
    ep->attr = next;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ep_reset(it_ep_handle_t ep_handle) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    std::lock_guard lock(ep->ia->mutex);
    if (ep->state->load() != IT_EP_STATE_NONOPERATIONAL) return IT_ERR_INVALID_EP_STATE;
    ri_qp_attr_t qa{};
    qa.state = RI_QPS_IDLE;
    if (rdma::Status st = ep->ep->modify(qa, RI_QP_ATTR_STATE); !st.ok()) return from_ri(st.code(), IT_ERR_CANNOT_RESET);
    ep->state->store(IT_EP_STATE_UNCONNECTED);
    std::memset(&ep->path, 0, sizeof ep->path);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ep_connect(it_ep_handle_t ep_handle, const it_path_t *path,
                                       const it_conn_attributes_t * /*conn_attr: iWARP has none*/,
                                       const it_conn_qual_t *connect_qual, it_cn_est_flags_t cn_est_flags,
                                       const unsigned char *private_data, size_t private_data_length) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (path == nullptr || connect_qual == nullptr) return IT_ERR_FAULT;
    if (path->spigot_id != 0) return IT_ERR_INVALID_SPIGOT;
    if ((cn_est_flags & ~static_cast<uint32_t>(IT_CONNECT_FLAG_TWO_WAY | IT_CONNECT_FLAG_THREE_WAY |
                                                 IT_CONNECT_SUPPRESS_IRD_ORD)) != 0 ||
        (cn_est_flags & (IT_CONNECT_FLAG_THREE_WAY | IT_CONNECT_SUPPRESS_IRD_ORD)) != 0) {
        return IT_ERR_INVALID_CN_EST_FLAGS;  // iWARP connects in two handshakes; IRD/ORD are always exchanged
    }
    uint16_t port;
    if (connect_qual->type == IT_IANA_PORT) {
        port = host_port(connect_qual->conn_qual.port);
    } else if (connect_qual->type == IT_IANA_LR_PORT) {
        port = host_port(connect_qual->conn_qual.lr_port.remote);
    } else {
        return IT_ERR_INVALID_CONN_QUAL;
    }
    if (port == 0) return IT_ERR_INVALID_CONN_QUAL;
    if (private_data_length > max_private_data(ep->ia)) return IT_ERR_INVALID_PDATA_LENGTH;
    if (private_data_length > 0 && private_data == nullptr) return IT_ERR_FAULT;
    it_net_addr_t remote{};
    const it_iwarp_net_endpoint_t &w = path->remote.iwarp;
    if (w.ip_vers == IT_IP_VERS_IPV4) {
        remote.addr_type = IT_IPV4;
        std::memcpy(&remote.addr.ipv4, &w.raddr.ipv4, sizeof remote.addr.ipv4);
    } else if (w.ip_vers == IT_IP_VERS_IPV6) {
        remote.addr_type = IT_IPV6;
        std::memcpy(&remote.addr.ipv6, &w.raddr.ipv6, sizeof remote.addr.ipv6);
    } else {
        return IT_ERR_INVALID_NETADDR;
    }
    const std::string address = address_text(remote);
    if (address.empty()) return IT_ERR_INVALID_NETADDR;
    std::lock_guard lock(ep->ia->mutex);
    int expected = IT_EP_STATE_UNCONNECTED;
    if (!ep->state->compare_exchange_strong(expected, IT_EP_STATE_ACTIVE1_CONNECTION_PENDING)) {
        return IT_ERR_INVALID_EP_STATE;
    }
    // The path's timeout is in microseconds; 0 takes the kAL's connect deadline.
    const auto timeout = std::chrono::milliseconds((path->timeout + 999) / 1000);
    // Not waiting for the kAL (a client opening many connections makes no round trip each): a refusal (no route,
    // a limit) ends in a non-peer reject on the EP's connection SEVD, as an unreachable peer does.
    auto st = ep->ep->connect_async(address, port, bytes(private_data, private_data_length), timeout);
    if (!st) {
        ep->state->store(IT_EP_STATE_UNCONNECTED);
        const int c = st.code();
        return failed("it_ep_connect", st.error(),
                      c == RI_EINVAL ? IT_ERR_INVALID_NETADDR : from_ri(c, IT_ERR_RESOURCES));
    }
    ep->path = *path;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ep_accept(it_ep_handle_t ep_handle, it_cn_est_identifier_t cn_est_id,
                                      const unsigned char *private_data, size_t private_data_length) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (private_data_length > max_private_data(ep->ia)) return IT_ERR_INVALID_PDATA_LENGTH;
    if (private_data_length > 0 && private_data == nullptr) return IT_ERR_FAULT;
    auto req = take_request(cn_est_id);
    if (!req) return IT_ERR_INVALID_CN_EST_ID;
    if (req->ia != ep->ia) {
        restore_request(cn_est_id, std::move(*req));
        return IT_ERR_INVALID_EP;  // an EP of another IA cannot take this request
    }
    std::lock_guard lock(ep->ia->mutex);
    int expected = IT_EP_STATE_UNCONNECTED;
    if (!ep->state->compare_exchange_strong(expected, IT_EP_STATE_PASSIVE_CONNECTION_PENDING)) {
        restore_request(cn_est_id, std::move(*req));
        return IT_ERR_INVALID_EP_STATE;
    }
    // Not waiting for the kAL (a server accepting many connections makes no round trip each): a request that
    // expired meanwhile, or that the kAL refuses, ends in a broken connection on the EP's connection SEVD.
    auto st = ep->ep->accept_async(cn_est_id, bytes(private_data, private_data_length));
    if (!st) {
        ep->state->store(IT_EP_STATE_UNCONNECTED);
        // The kAL no longer knows the request (it timed out or the peer left): the identifier is spent.
        return failed("it_ep_accept", st.error(),
                      st.code() == RI_ENOENT ? IT_ERR_INVALID_CN_EST_ID : from_ri(st.code(), IT_ERR_RESOURCES));
    }
    if (req->event.connection) {
        const ri_llp_params_t &l = req->event.connection->llp;
        std::memset(&ep->path, 0, sizeof ep->path);
        ep->path.remote.iwarp.ip_vers = l.remote.family == RI_AF_INET6 ? IT_IP_VERS_IPV6 : IT_IP_VERS_IPV4;
        std::memcpy(&ep->path.remote.iwarp.raddr, l.remote.addr, l.remote.family == RI_AF_INET6 ? 16 : 4);
        std::memcpy(&ep->path.remote.iwarp.laddr, l.local.addr, l.local.family == RI_AF_INET6 ? 16 : 4);
    }
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_reject(it_cn_est_identifier_t cn_est_id, const unsigned char *private_data,
                                   size_t private_data_length) {
    auto req = take_request(cn_est_id);
    if (!req) return IT_ERR_INVALID_CN_EST_ID;
    if (private_data_length > max_private_data(req->ia)) {
        restore_request(cn_est_id, std::move(*req));
        return IT_ERR_INVALID_PDATA_LENGTH;
    }
    if (private_data_length > 0 && private_data == nullptr) {
        restore_request(cn_est_id, std::move(*req));
        return IT_ERR_FAULT;
    }
    auto st = req->ia->adapter->reject(cn_est_id, bytes(private_data, private_data_length));
    if (!st) {
        return failed("it_reject", st.error(),
                      st.code() == RI_ENOENT ? IT_ERR_INVALID_CN_EST_ID : from_ri(st.code(), IT_ERR_RESOURCES));
    }
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_handoff(const it_conn_qual_t *conn_qual, size_t spigot_id, it_cn_est_identifier_t cn_est_id) {
    if (conn_qual == nullptr) return IT_ERR_FAULT;
    if (conn_qual->type != IT_IANA_PORT) return IT_ERR_INVALID_CONN_QUAL;
    if (spigot_id != 0) return IT_ERR_INVALID_SPIGOT;
    auto req = take_request(cn_est_id);
    if (!req) return IT_ERR_INVALID_CN_EST_ID;
    // The request goes to the listen point of this IA at the other connection qualifier, as if it had come there.
    const uint16_t port = host_port(conn_qual->conn_qual.port);
    Ia *ia = req->ia;
    std::lock_guard lock(ia->mutex);
    for (auto &[o, owned] : ia->objects) {
        if (o->type != IT_HANDLE_TYPE_LISTEN) continue;
        auto *l = static_cast<Listen *>(o);
        if (l->port != port) continue;
        ual::Event e = req->event;
        e.context = l->handle;
        return l->evd->sd->post(e) ? IT_SUCCESS : IT_ERR_EVD_QUEUE_FULL;
    }
    restore_request(cn_est_id, std::move(*req));
    return IT_ERR_INVALID_CONN_QUAL;
}

ITAPI_EXPORT it_status_t it_ep_disconnect(it_ep_handle_t ep_handle, const unsigned char *private_data,
                                          size_t private_data_length) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (private_data_length > 0 || (private_data != nullptr && private_data_length > 0)) {
        return IT_ERR_INVALID_PDATA_LENGTH;  // MPA carries no private data when a stream closes
    }
    std::lock_guard lock(ep->ia->mutex);
    const int s = ep->state->load();
    if (s == IT_EP_STATE_UNCONNECTED || s == IT_EP_STATE_NONOPERATIONAL) return IT_ERR_INVALID_EP_STATE;
    // A connection still being set up is abandoned abortively; an established one closes in order.
    const bool abortive = s != IT_EP_STATE_CONNECTED;
    rdma::Status st = ep->ep->disconnect(abortive);
    if (!st.ok()) return from_ri(st.code(), IT_ERR_INVALID_EP_STATE);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_listen_create(it_ia_handle_t ia_handle, size_t spigot_id, it_evd_handle_t connect_evd,
                                          it_listen_flags_t flags, it_conn_qual_t *conn_qual,
                                          it_listen_handle_t *listen_handle) {
    forget_failure();
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    if (conn_qual == nullptr || listen_handle == nullptr) return IT_ERR_FAULT;
    if (spigot_id != 0) return IT_ERR_INVALID_SPIGOT;
    if ((flags & ~static_cast<uint32_t>(IT_LISTEN_CONN_QUAL_INPUT | IT_LISTEN_SUPPRESS_IRD_ORD)) != 0 ||
        (flags & IT_LISTEN_SUPPRESS_IRD_ORD) != 0) {
        return IT_ERR_INVALID_FLAGS;
    }
    Evd *evd = lookup<Evd>(connect_evd);
    if (evd == nullptr || evd->ia != ia) return IT_ERR_INVALID_EVD;
    if (evd->stream != IT_CM_REQ_EVENT_STREAM) return evd->aggregate() ? IT_ERR_AEVD_NOT_ALLOWED : IT_ERR_INVALID_EVD_TYPE;
    uint16_t port = 0;
    bool lr_port = false;
    if (flags & IT_LISTEN_CONN_QUAL_INPUT) {
        if (conn_qual->type == IT_IANA_PORT) {
            port = host_port(conn_qual->conn_qual.port);
        } else if (conn_qual->type == IT_IANA_LR_PORT) {
            // IBM's IT-API programs listen on a local/remote pair whose remote port is 0 (any peer port); a listen
            // point that admits one remote port only is not offered.
            if (conn_qual->conn_qual.lr_port.remote != 0) return IT_ERR_INVALID_CONN_QUAL;
            port = host_port(conn_qual->conn_qual.lr_port.local);
            lr_port = true;
        } else {
            return IT_ERR_INVALID_CONN_QUAL;
        }
        if (port == 0) return IT_ERR_INVALID_CONN_QUAL;
    }
    std::lock_guard lock(ia->mutex);
    Listen *l = make_child<Listen>(ia);
    if (l == nullptr) return IT_ERR_RESOURCES;
    auto lp = ia->adapter->listen(port, evd->sd, l->handle);
    if (!lp) {
        destroy_child(ia, l);
        const int c = lp.error().code();
        return failed("it_listen_create", lp.error(),
                      c == RI_EEXIST || c == RI_EADDRINUSE || c == RI_EBUSY ? IT_ERR_CONN_QUAL_BUSY
                                                                           : from_ri(c, IT_ERR_RESOURCES));
    }
    l->lp = std::move(*lp);
    l->evd = evd;
    l->port = l->lp->port();
    l->lr_port = lr_port;
    ++evd->users;
    listen_qual(*l, *conn_qual);
    *listen_handle = to_handle<it_listen_handle_t>(l);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_listen_free(it_listen_handle_t listen_handle) {
    Listen *l = lookup<Listen>(listen_handle);
    if (l == nullptr) return IT_ERR_INVALID_LISTEN;
    Ia *ia = l->ia;
    std::lock_guard lock(ia->mutex);
    --l->evd->users;
    destroy_child(ia, l);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_listen_query(it_listen_handle_t listen_handle, it_listen_param_mask_t mask,
                                         it_listen_param_t *params) {
    Listen *l = lookup<Listen>(listen_handle);
    if (l == nullptr) return IT_ERR_INVALID_LISTEN;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0x1fu) != 0) return IT_ERR_INVALID_MASK;
    params->ia_handle = to_handle<it_ia_handle_t>(l->ia);
    params->spigot_id = 0;
    params->connect_evd = to_handle<it_evd_handle_t>(l->evd);
    listen_qual(*l, params->connect_qual);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_socket_convert(int sd, it_ep_handle_t ep_handle, it_sc_flags_t flags,
                                           const unsigned char *msg, size_t len) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if ((flags & ~static_cast<uint32_t>(IT_SC_NO_REQ_REP)) != 0) return IT_ERR_INVALID_FLAGS;
    // Without the MPA request/reply nothing would agree CRC, markers and IRD/ORD with the peer: not supported.
    if (flags & IT_SC_NO_REQ_REP) return IT_ERR_OP_NOT_SUPPORTED;
    if (len > max_private_data(ep->ia)) return IT_ERR_INVALID_PDATA_LENGTH;
    if (len > 0 && msg == nullptr) return IT_ERR_FAULT;
    int type = 0;
    socklen_t tl = sizeof type;
    sockaddr_storage peer{};
    socklen_t pl = sizeof peer;
    if (sd < 0 || ::getsockopt(sd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
        ::getpeername(sd, reinterpret_cast<sockaddr *>(&peer), &pl) != 0) {
        return IT_ERR_INVALID_CONVERSION;  // not a connected stream socket
    }
    std::lock_guard lock(ep->ia->mutex);
    int expected = IT_EP_STATE_UNCONNECTED;
    if (!ep->state->compare_exchange_strong(expected, IT_EP_STATE_ACTIVE1_CONNECTION_PENDING)) {
        return IT_ERR_INVALID_EP_STATE;
    }
    auto st = ep->ep->convert(sd, bytes(msg, len), KRDMA_CONVERT_AUTO);
    if (!st) {
        ep->state->store(IT_EP_STATE_UNCONNECTED);
        const int c = st.code();
        it_status_t status = from_ri(c, IT_ERR_RESOURCES);
        if (c == RI_EOPNOTSUPP) status = IT_ERR_OP_NOT_SUPPORTED;
        if (c == RI_EBADF || c == RI_ENOTCONN || c == RI_EADDRNOTAVAIL) status = IT_ERR_INVALID_CONVERSION;
        return failed("it_socket_convert", st.error(), status);
    }
    // The endpoint owns the stream now (the kAL holds it, the uVP takes it at ESTABLISHED): the consumer's
    // descriptor goes, so the stream's end is the endpoint's alone.
    ::close(sd);
    return IT_SUCCESS;
}
