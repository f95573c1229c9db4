// IT-API <-> RNIC-PI / access layer value mapping (see mapping.hpp).
#include "mapping.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace itapi {

it_status_t from_ri(int code, it_status_t fallback) noexcept {
    switch (code) {
        case RI_OK: return IT_SUCCESS;
        case RI_ENOMEM:
        case RI_ENOSPC: return IT_ERR_RESOURCES;
        case RI_EOPNOTSUPP:
        case RI_ENOSYS: return IT_ERR_OP_NOT_SUPPORTED;
        case RI_EPERM:
        case RI_EACCES: return IT_ERR_NO_PERMISSION;
        case RI_EFAULT: return IT_ERR_FAULT;
        case RI_ETIMEDOUT: return IT_ERR_TIMEOUT_EXPIRED;
        case RI_EINTR: return IT_ERR_INTERRUPT;
        case RI_EIO: return IT_ERR_IA_CATASTROPHE;
        case RI_EAFNOSUPPORT:    // an address of another family than the IA's
        case RI_EADDRNOTAVAIL: return IT_ERR_INVALID_NETADDR;
        default: return fallback;
    }
}

bool valid_privs(uint32_t privs) noexcept { return (privs & ~static_cast<uint32_t>(IT_PRIV_ALL)) == 0; }

uint32_t access_of(uint32_t privs) noexcept {
    uint32_t a = 0;
    if (privs & IT_PRIV_LOCAL_READ) a |= RI_ACCESS_LOCAL_READ;
    if (privs & IT_PRIV_LOCAL_WRITE) a |= RI_ACCESS_LOCAL_WRITE;
    if (privs & IT_PRIV_REMOTE_READ) a |= RI_ACCESS_REMOTE_READ;
    // The verbs refuse remote write (and atomics) on memory the local side may not write.
    if (privs & IT_PRIV_REMOTE_WRITE) a |= RI_ACCESS_REMOTE_WRITE | RI_ACCESS_LOCAL_WRITE;
    if (privs & IT_PRIV_ATOMIC) a |= RI_ACCESS_REMOTE_ATOMIC | RI_ACCESS_LOCAL_WRITE;
    return a;
}

it_mem_priv_t privs_of(uint32_t access) noexcept {
    uint32_t p = 0;
    if (access & RI_ACCESS_LOCAL_READ) p |= IT_PRIV_LOCAL_READ;
    if (access & RI_ACCESS_LOCAL_WRITE) p |= IT_PRIV_LOCAL_WRITE;
    if (access & RI_ACCESS_REMOTE_READ) p |= IT_PRIV_REMOTE_READ;
    if (access & RI_ACCESS_REMOTE_WRITE) p |= IT_PRIV_REMOTE_WRITE;
    if (access & RI_ACCESS_REMOTE_ATOMIC) p |= IT_PRIV_ATOMIC;
    return static_cast<it_mem_priv_t>(p);
}

it_dto_status_t dto_status_of(uint32_t status) noexcept {
    switch (status) {
        case RI_WC_SUCCESS: return IT_DTO_SUCCESS;
        case RI_WC_LOC_LEN_ERR: return IT_DTO_ERR_LOCAL_LENGTH;
        case RI_WC_LOC_QP_OP_ERR: return IT_DTO_ERR_LOCAL_EP;
        case RI_WC_LOC_PROT_ERR:
        case RI_WC_LOC_ACCESS_ERR: return IT_DTO_ERR_LOCAL_PROTECTION;
        case RI_WC_WR_FLUSH_ERR: return IT_DTO_ERR_FLUSHED;
        case RI_WC_MW_BIND_ERR: return IT_RMR_OPERATION_FAILED;
        case RI_WC_REM_ACCESS_ERR: return IT_DTO_ERR_REMOTE_ACCESS;
        case RI_WC_REM_OP_ERR:
        case RI_WC_REM_INV_REQ_ERR: return IT_DTO_ERR_REMOTE_RESPONDER;
        case RI_WC_BAD_RESP_ERR: return IT_DTO_ERR_BAD_RESPONSE;
        default: return IT_DTO_ERR_TRANSPORT;  // LLP, fatal, general
    }
}

it_event_type_t dto_event_of(uint32_t opcode) noexcept {
    if (opcode & RI_WC_RECV) return IT_DTO_RC_RECV_CMPL_EVENT;
    switch (opcode) {
        case RI_WC_SEND: return IT_DTO_SEND_CMPL_EVENT;
        case RI_WC_RDMA_WRITE: return IT_DTO_RDMA_WRITE_CMPL_EVENT;
        case RI_WC_RDMA_READ: return IT_DTO_RDMA_READ_CMPL_EVENT;
        case RI_WC_BIND_MW: return IT_RMR_LINK_CMPL_EVENT;
        case RI_WC_LOCAL_INV: return IT_RMR_LINK_CMPL_EVENT;  // an unlink completes as a link event does
        case RI_WC_FAST_REG: return IT_LMR_LINK_CMPL_EVENT;
        case RI_WC_ATOMIC: return IT_DTO_FETCH_ADD_CMPL_EVENT;
        case RI_WC_ATOMIC_CMP_SWAP: return IT_DTO_CMP_SWAP_CMPL_EVENT;
        default: return IT_DTO_SEND_CMPL_EVENT;
    }
}

namespace {

void copy_private_data(const ual::Event &e, unsigned char (&dst)[IT_MAX_PRIV_DATA], it_boolean_t &present) noexcept {
    std::memset(dst, 0, sizeof dst);
    present = IT_FALSE;
    if (!e.connection || e.connection->private_data.empty()) return;
    const auto &pd = e.connection->private_data;
    std::memcpy(dst, pd.data(), std::min(pd.size(), sizeof dst));
    present = IT_TRUE;
}

void iwarp_path(const ri_llp_params_t &llp, it_path_t &path) noexcept {
    std::memset(&path, 0, sizeof path);
    it_iwarp_net_endpoint_t &w = path.remote.iwarp;
    if (llp.remote.family == RI_AF_INET6) {
        w.ip_vers = IT_IP_VERS_IPV6;
        std::memcpy(&w.laddr.ipv6, llp.local.addr, 16);
        std::memcpy(&w.raddr.ipv6, llp.remote.addr, 16);
    } else {
        w.ip_vers = IT_IP_VERS_IPV4;
        std::memcpy(&w.laddr.ipv4, llp.local.addr, 4);
        std::memcpy(&w.raddr.ipv4, llp.remote.addr, 4);
    }
}

uint16_t wire_port(uint16_t host_order) noexcept {
#ifdef ITAPI_IANA_PORT_HOST_BYTE_ORDER
    return host_order;
#else
    return htons(host_order);
#endif
}

}  // namespace

it_net_addr_t net_addr_of(const ri_net_addr_t &a) noexcept {
    it_net_addr_t n;
    std::memset(&n, 0, sizeof n);
    if (a.family == RI_AF_INET6) {
        n.addr_type = IT_IPV6;
        std::memcpy(&n.addr.ipv6, a.addr, 16);
    } else {
        n.addr_type = IT_IPV4;
        std::memcpy(&n.addr.ipv4, a.addr, 4);
    }
    return n;
}

std::string address_text(const it_net_addr_t &a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.addr_type == IT_IPV4) {
        if (::inet_ntop(AF_INET, &a.addr.ipv4, buf, sizeof buf) == nullptr) return {};
    } else if (a.addr_type == IT_IPV6) {
        if (::inet_ntop(AF_INET6, &a.addr.ipv6, buf, sizeof buf) == nullptr) return {};
    } else {
        return {};
    }
    return buf;
}

void conn_request_event(const ual::Event &e, it_evd_handle_t evd, it_event_t &out) noexcept {
    std::memset(&out, 0, sizeof out);
    it_conn_request_event_t &r = out.conn_req;
    r.event_number = IT_CM_REQ_CONN_REQUEST_EVENT;
    r.evd = evd;
    copy_private_data(e, r.private_data, r.private_data_present);
    if (!e.connection) return;
    const ual::ConnectionData &c = *e.connection;
    r.cn_est_id = c.request;
    r.conn_qual.type = IT_IANA_PORT;
    r.conn_qual.conn_qual.port = wire_port(c.llp.local_port);
    r.source_addr = net_addr_of(c.llp.remote);
    r.spigot_id = 0;
    r.max_message_size = 0;  // it_ia_info_t::max_message_size_support is IT_FALSE
    r.rdma_read_ird = c.llp.ird;
    r.rdma_read_ord = c.llp.ord;
}

void connection_event(const ual::Event &e, it_evd_handle_t evd, it_event_t &out) noexcept {
    std::memset(&out, 0, sizeof out);
    it_connection_event_t &c = out.conn;
    c.evd = evd;
    c.ep = reinterpret_cast<it_ep_handle_t>(e.context);
    copy_private_data(e, c.private_data, c.private_data_present);
    if (e.connection) {
        c.rdma_read_ird = e.connection->llp.ird;
        c.rdma_read_ord = e.connection->llp.ord;
        iwarp_path(e.connection->llp, c.dst_path);
    }
    c.reject_reason_code = IT_CN_REJ_OTHER;
    switch (static_cast<ual::CmEventId>(e.id)) {
        case ual::CmEventId::established: c.event_number = IT_CM_MSG_CONN_ESTABLISHED_EVENT; break;
        case ual::CmEventId::rejected: c.event_number = IT_CM_MSG_CONN_PEER_REJECT_EVENT; break;
        case ual::CmEventId::unreachable:
            c.event_number = IT_CM_MSG_CONN_NONPEER_REJECT_EVENT;
            c.reject_reason_code = IT_CN_REJ_BAD_PATH;
            break;
        case ual::CmEventId::timeout:
            c.event_number = IT_CM_MSG_CONN_NONPEER_REJECT_EVENT;
            c.reject_reason_code = IT_CN_REJ_TIMEOUT;
            break;
        case ual::CmEventId::peer_disconnect:
        case ual::CmEventId::disconnected: c.event_number = IT_CM_MSG_CONN_DISCONNECT_EVENT; break;
        default: c.event_number = IT_CM_MSG_CONN_BROKEN_EVENT; break;
    }
}

it_ep_state_rc_t state_after(uint32_t cm_event) noexcept {
    return static_cast<ual::CmEventId>(cm_event) == ual::CmEventId::established ? IT_EP_STATE_CONNECTED
                                                                                 : IT_EP_STATE_NONOPERATIONAL;
}

it_event_type_t affiliated_event_of(uint32_t id) noexcept {
    switch (id) {
        case RI_AE_QP_TERMINATE_RECEIVED: return IT_ASYNC_AFF_EP_R_ERROR;
        case RI_AE_QP_LOCAL_ACCESS_ERROR: return IT_ASYNC_AFF_EP_L_ACCESS_VIOLATION;
        case RI_AE_QP_REMOTE_ACCESS_ERROR: return IT_ASYNC_AFF_EP_R_ACCESS_VIOLATION;
        case RI_AE_QP_PROTOCOL_ERROR: return IT_ASYNC_AFF_EP_BAD_TRANSPORT_OPCODE;
        case RI_AE_QP_LLP_CLOSED:
        case RI_AE_QP_LLP_RESET: return IT_ASYNC_AFF_EP_L_LLP_ERROR;
        case RI_AE_QP_TERMINATE_SENT: return IT_ASYNC_AFF_EP_L_TRANSPORT_ERROR;
        case RI_AE_CQ_OVERFLOW: return IT_ASYNC_AFF_SEVD_ENQUEUE_FAILURE;
        case RI_AE_SRQ_LIMIT_REACHED: return IT_ASYNC_AFF_SRQ_LOW_WATERMARK;
        case RI_AE_SRQ_ERROR: return IT_ASYNC_AFF_EP_SRQ_ERROR;
        case RI_AE_QP_LAST_WQE_REACHED: return IT_ASYNC_AFF_EP_SRQ_ERROR;
        default: return IT_ASYNC_AFF_EP_FAILURE;
    }
}

it_event_type_t unaffiliated_event_of(uint32_t id) noexcept {
    switch (id) {
        case RI_AE_RNIC_LINK_UP: return IT_ASYNC_UNAFF_SPIGOT_ONLINE;
        default: return IT_ASYNC_UNAFF_SPIGOT_OFFLINE;  // link down, RNIC fatal, the kAL going away
    }
}

bool ual_stream_of(it_event_type_t s, ual::EventStream &out) noexcept {
    switch (s) {
        case IT_DTO_EVENT_STREAM: out = ual::EventStream::dto; return true;
        case IT_CM_REQ_EVENT_STREAM: out = ual::EventStream::cm_request; return true;
        case IT_CM_MSG_EVENT_STREAM: out = ual::EventStream::cm_message; return true;
        case IT_ASYNC_AFF_EVENT_STREAM: out = ual::EventStream::affiliated_async; return true;
        case IT_ASYNC_UNAFF_EVENT_STREAM: out = ual::EventStream::unaffiliated_async; return true;
        case IT_SOFTWARE_EVENT_STREAM: out = ual::EventStream::software; return true;
        default: return false;
    }
}

}  // namespace itapi
