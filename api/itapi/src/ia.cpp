// IT-API: interfaces, interface adapters, protection zones, handles and contexts, and the calls this
// implementation does not support.
#include <arpa/inet.h>
#include <endian.h>

#include <cstdlib>
#include <cstring>

#include "common.hpp"
#include "failure.hpp"
#include "it_api_openrdma.h"
#include "requests.hpp"

namespace itapi {

void destroy_child(Ia *ia, Object *o) {
    HandleTable::instance().erase(o);
    ia->objects.erase(o);  // destroys it: the access layer's object closes with its last reference
}

void destroy_all(Ia *ia) {
    // Dependants first: connections and endpoints, then windows, regions, S-RQs, SEVDs, AEVDs, zones.
    const it_handle_type_enum_t order[] = {IT_HANDLE_TYPE_LISTEN, IT_HANDLE_TYPE_EP, IT_HANDLE_TYPE_RMR,
                                           IT_HANDLE_TYPE_LMR,    IT_HANDLE_TYPE_SRQ, IT_HANDLE_TYPE_EVD,
                                           IT_HANDLE_TYPE_EVD,    IT_HANDLE_TYPE_PZ};
    for (size_t pass = 0; pass < std::size(order); ++pass) {
        for (auto it = ia->objects.begin(); it != ia->objects.end();) {
            Object *o = it->first;
            ++it;
            if (o->type != order[pass]) continue;
            // SEVDs before the AEVDs they feed: the first EVD pass leaves aggregates.
            if (o->type == IT_HANDLE_TYPE_EVD && pass == 5 && static_cast<Evd *>(o)->aggregate()) continue;
            if (o->type == IT_HANDLE_TYPE_EVD) {
                auto *e = static_cast<Evd *>(o);
                if (e->aevd != nullptr && e->aevd->agg && e->sd) e->aevd->agg->remove(e->sd);
                if (e->sd) e->sd->set_notifier({});
            }
            destroy_child(ia, o);
        }
    }
    ia->affiliated = ia->unaffiliated = nullptr;
}

}  // namespace itapi

using namespace itapi;

ITAPI_EXPORT void it_interface_list(it_interface_t *interfaces, size_t *num_interfaces, size_t *total_interfaces) {
    if (num_interfaces == nullptr || total_interfaces == nullptr) return;
    forget_failure();
    *total_interfaces = 0;
    auto al = access_layer();
    if (!al) {
        // No status to return: the reason is what tells "no RNIC" from "no access layer".
        (void)failed("it_interface_list", al.error(), IT_ERR_RESOURCES);
        *num_interfaces = 0;
        return;
    }
    auto rnics = (*al)->rnics();
    if (!rnics) {
        (void)failed("it_interface_list", rnics.error(), IT_ERR_RESOURCES);
        *num_interfaces = 0;
        return;
    }
    *total_interfaces = rnics->size();
    const size_t n = interfaces == nullptr ? 0 : std::min(*num_interfaces, rnics->size());
    for (size_t i = 0; i < n; ++i) {
        it_interface_t &it = interfaces[i];
        std::memset(&it, 0, sizeof it);
        it.major_version = 2;
        it.minor_version = 1;
        it.transport_type = IT_IWARP_TCP_TRANSPORT;
        std::strncpy(it.name, (*rnics)[i].name.c_str(), sizeof it.name - 1);
    }
    *num_interfaces = n;
}

ITAPI_EXPORT it_status_t it_ia_create(const char *name, uint32_t major_version, uint32_t minor_version,
                                      it_ia_handle_t *ia_handle) {
    if (ia_handle == nullptr) return IT_ERR_INVALID_HANDLE;
    *ia_handle = nullptr;
    forget_failure();
    if (name == nullptr || name[0] == '\0' || std::strlen(name) >= IT_INTERFACE_NAME_SIZE) return IT_ERR_INVALID_NAME;
    if (major_version < 1 || major_version > 2) return IT_ERR_INVALID_MAJOR_VERSION;
    if (major_version == 2 && minor_version > 1) return IT_ERR_INVALID_MINOR_VERSION;
    if (major_version == 1 && minor_version != 0) return IT_ERR_INVALID_MINOR_VERSION;
    auto al = access_layer();
    // Without an access layer (no krdmad, a bad embedded configuration) no IA can be had, whatever the name: IT-API
    // v2.1 gives it_ia_create no status for that but IT_ERR_RESOURCES; the reason says which.
    if (!al) return failed("it_ia_create", al.error(), IT_ERR_RESOURCES);
    auto adapter = (*al)->open_adapter(name);
    if (!adapter) {
        const int c = adapter.error().code();
        return failed("it_ia_create", adapter.error(),
                      c == RI_ENODEV || c == RI_ENOENT ? IT_ERR_INVALID_NAME : from_ri(c, IT_ERR_RESOURCES));
    }
    auto attr = (*adapter)->query();
    if (!attr) return failed("it_ia_create", attr.error(), from_ri(attr.error().code(), IT_ERR_RESOURCES));
    auto ia = std::make_unique<Ia>();
    ia->al = *al;
    ia->adapter = *adapter;
    ia->name = name;
    ia->attr = *attr;
    ia->major = major_version;
    ia->minor = minor_version;
    std::memset(&ia->address, 0, sizeof ia->address);
    const std::string &addr = ia->adapter->description().address;
    if (::inet_pton(AF_INET, addr.c_str(), &ia->address.addr.ipv4) == 1) {
        ia->address.addr_type = IT_IPV4;
    } else if (::inet_pton(AF_INET6, addr.c_str(), &ia->address.addr.ipv6) == 1) {
        ia->address.addr_type = IT_IPV6;
    }
    if (HandleTable::instance().insert(ia.get()) == 0) return IT_ERR_RESOURCES;
    *ia_handle = to_handle<it_ia_handle_t>(ia.release());
    return IT_SUCCESS;
}

ITAPI_EXPORT const char *openrdma_it_last_error(const char **call) { return last_failure(call); }

ITAPI_EXPORT it_status_t it_ia_free(it_ia_handle_t ia_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    {
        std::lock_guard lock(ia->mutex);
        destroy_all(ia);
    }
    forget_requests(ia);
    HandleTable::instance().erase(ia);
    delete ia;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_ia_query(it_ia_handle_t ia_handle, it_ia_info_t **ia_info) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    if (ia_info == nullptr) return IT_ERR_FAULT;
    // One block the consumer frees with it_ia_info_free: the info, its spigot, the spigot's address, the name.
    const size_t name_len = ia->name.size() + 1;
    const size_t size = sizeof(it_ia_info_t) + sizeof(it_spigot_info_t) + sizeof(it_net_addr_t) + name_len;
    auto *block = static_cast<unsigned char *>(std::calloc(1, size));
    if (block == nullptr) return IT_ERR_RESOURCES;
    auto *info = reinterpret_cast<it_ia_info_t *>(block);
    auto *spigot = reinterpret_cast<it_spigot_info_t *>(block + sizeof(it_ia_info_t));
    auto *net = reinterpret_cast<it_net_addr_t *>(block + sizeof(it_ia_info_t) + sizeof(it_spigot_info_t));
    char *name = reinterpret_cast<char *>(block + sizeof(it_ia_info_t) + sizeof(it_spigot_info_t) + sizeof(it_net_addr_t));
    std::memcpy(name, ia->name.c_str(), name_len);
    const ri_rnic_attr_t &a = ia->attr;
    info->ia_name = name;
    info->api_major_version = 2;
    info->api_minor_version = 1;
    info->sw_major_version = static_cast<uint32_t>(a.fw_version >> 32);
    info->sw_minor_version = static_cast<uint32_t>(a.fw_version);
    info->vendor.iwarp.valid_vid = IT_TRUE;
    std::snprintf(reinterpret_cast<char *>(info->vendor.iwarp.vid), sizeof info->vendor.iwarp.vid,
                  "%s (vendor %06x part %u hw %u)", ia->adapter->description().vendor.c_str(), a.vendor_id,
                  a.vendor_part_id, a.hw_version);
    info->dto_alignment_hint = 64;
    info->transport_type = IT_IWARP_TCP_TRANSPORT;
    info->supported_service_types = IT_RC_SERVICE;
    info->ep_work_queues_resizable = IT_FALSE;
    info->three_way_handshake_support = IT_FALSE;
    info->private_data_support = IT_TRUE;
    info->max_message_size_support = IT_FALSE;
    info->ird_ord_ia_support = IT_TRUE;
    info->ird_ord_suppressible = IT_FALSE;
    info->spigot_online_support = IT_TRUE;
    info->spigot_offline_support = IT_TRUE;
    const size_t pd = std::min<size_t>(a.max_private_data, IT_MAX_PRIV_DATA);
    info->connect_private_data_len = pd;
    info->accept_private_data_len = pd;
    info->reject_private_data_len = pd;
    info->disconnect_private_data_len = 0;  // MPA has no private data on close
    info->ud_req_private_data_len = 0;
    info->ud_rep_private_data_len = 0;
    info->num_spigots = 1;
    info->spigot_info = spigot;
    spigot->spigot_id = 0;
    spigot->max_rc_send_len = a.max_mr_size;
    spigot->max_rc_rdma_len = a.max_mr_size;
    spigot->max_ud_send_len = 0;
    spigot->spigot_online = IT_TRUE;
    spigot->active_side_conn_qual = IT_IANA_PORT;
    spigot->passive_side_conn_qual = IT_IANA_PORT;
    spigot->num_net_addr = ia->address.addr_type != 0 ? 1 : 0;
    *net = ia->address;
    spigot->net_addr = net;
    {
        std::lock_guard lock(ia->mutex);
        info->affiliated_err_evd = to_handle<it_evd_handle_t>(ia->affiliated);
        info->unaffiliated_err_evd = to_handle<it_evd_handle_t>(ia->unaffiliated);
    }
    info->srq_support = (a.caps & RI_CAP_SRQ) ? IT_TRUE : IT_FALSE;
    info->hard_hi_watermark_support = IT_FALSE;
    info->soft_hi_watermark_support = IT_FALSE;
    // RNIC-PI has no capability bit for resizing an SRQ, and softrnic refuses it (its ring is mapped once): an
    // it_srq_modify of IT_SRQ_PARAM_MAX_RECV_DTO answers IT_ERR_OP_NOT_SUPPORTED, so nothing is promised here.
    info->srq_resizable = IT_FALSE;
    info->extended_iwarp_qp_states = IT_FALSE;
    info->socket_conversion_support = ia->al->link().can_convert_sockets() ? IT_TRUE : IT_FALSE;
    info->rdma_read_ord_increasable = IT_FALSE;
    info->rdma_read_ird_modifiable = IT_FALSE;
    uint32_t rmr = 0;
    if (a.caps & RI_CAP_MW_TYPE2) rmr |= IT_RMR_TYPE_NARROW;
    if (a.caps & RI_CAP_MW_TYPE1) rmr |= IT_RMR_TYPE_WIDE;
    info->rmr_types_supported = static_cast<it_rmr_type_t>(rmr);
    info->addr_mode_relative_support = (a.caps & RI_CAP_ZERO_BASED) ? IT_TRUE : IT_FALSE;
    info->rdma_read_requires_remote_write = IT_FALSE;
    info->ep_rdma_enables_modifiable = IT_TRUE;
    info->rdma_read_local_extensions = IT_FALSE;
    info->dto_evd_overflow_detection = IT_FALSE;
    info->atomic_support = (a.caps & RI_CAP_ATOMICS) ? IT_TRUE : IT_FALSE;
    info->lmr_link_support = IT_FALSE;
    info->direct_lmr_handle_support = IT_FALSE;
    info->direct_lmr_handle = nullptr;
    info->post_send_unlink_remote_support = (a.caps & RI_CAP_SEND_INV) ? IT_TRUE : IT_FALSE;
    info->narrow_rmr_unlink_support = (rmr & IT_RMR_TYPE_NARROW) ? IT_TRUE : IT_FALSE;
    info->wide_rmr_unlink_support = (rmr & IT_RMR_TYPE_WIDE) ? IT_TRUE : IT_FALSE;
    info->unlink_fence_support = IT_TRUE;
    info->iobl_types_supported = static_cast<it_iobl_type_t>(0);
    *ia_info = info;
    return IT_SUCCESS;
}

ITAPI_EXPORT void it_ia_info_free(it_ia_info_t *ia_info) { std::free(ia_info); }

ITAPI_EXPORT it_status_t it_pz_create(it_ia_handle_t ia_handle, it_pz_handle_t *pz_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    if (pz_handle == nullptr) return IT_ERR_FAULT;
    forget_failure();
    auto pz = ia->adapter->create_pz();
    if (!pz) return failed("it_pz_create", pz.error(), from_ri(pz.error().code(), IT_ERR_RESOURCES));
    std::lock_guard lock(ia->mutex);
    Pz *p = make_child<Pz>(ia);
    if (p == nullptr) return IT_ERR_RESOURCES;
    p->pz = std::move(*pz);
    *pz_handle = to_handle<it_pz_handle_t>(p);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_pz_free(it_pz_handle_t pz_handle) {
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    std::lock_guard lock(pz->ia->mutex);
    if (pz->users != 0) return IT_ERR_PZ_BUSY;
    destroy_child(pz->ia, pz);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_pz_query(it_pz_handle_t pz_handle, it_pz_param_mask_t mask, it_pz_param_t *params) {
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~static_cast<uint32_t>(IT_PZ_PARAM_ALL | IT_PZ_PARAM_IA)) != 0) return IT_ERR_INVALID_MASK;
    params->ia = to_handle<it_ia_handle_t>(pz->ia);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_get_handle_type(it_handle_t handle, it_handle_type_enum_t *type_of_handle) {
    Object *o = HandleTable::instance().find(reinterpret_cast<uint64_t>(handle));
    if (o == nullptr) return IT_ERR_INVALID_HANDLE;
    if (type_of_handle == nullptr) return IT_ERR_FAULT;
    *type_of_handle = o->type;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_set_consumer_context(it_handle_t handle, it_context_t context) {
    Object *o = HandleTable::instance().find(reinterpret_cast<uint64_t>(handle));
    if (o == nullptr) return IT_ERR_INVALID_HANDLE;
    o->context = context;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_get_consumer_context(it_handle_t handle, it_context_t *context) {
    Object *o = HandleTable::instance().find(reinterpret_cast<uint64_t>(handle));
    if (o == nullptr) return IT_ERR_INVALID_HANDLE;
    if (context == nullptr) return IT_ERR_FAULT;
    *context = o->context;
    return IT_SUCCESS;
}

ITAPI_EXPORT uint64_t it_hton64(uint64_t hostint) { return htobe64(hostint); }
ITAPI_EXPORT uint64_t it_ntoh64(uint64_t netint) { return be64toh(netint); }

ITAPI_EXPORT it_rdma_addr_t it_make_rdma_addr_absolute(void *addr) { return reinterpret_cast<it_rdma_addr_t>(addr); }
ITAPI_EXPORT it_rdma_addr_t it_make_rdma_addr_relative(it_length_t offset) { return offset; }

ITAPI_EXPORT it_status_t it_convert_net_addr(const it_net_addr_t *source_addr, it_net_addr_type_t addr_type,
                                             it_net_addr_t *destination_addr) {
    if (source_addr == nullptr || destination_addr == nullptr) return IT_ERR_FAULT;
    if (source_addr->addr_type == addr_type) {
        *destination_addr = *source_addr;
        return IT_SUCCESS;
    }
    if (source_addr->addr_type == IT_IPV4 && addr_type == IT_IPV6) {
        std::memset(destination_addr, 0, sizeof *destination_addr);
        destination_addr->addr_type = IT_IPV6;
        auto *b = reinterpret_cast<unsigned char *>(&destination_addr->addr.ipv6);
        b[10] = b[11] = 0xff;  // the IPv4-mapped IPv6 address
        std::memcpy(b + 12, &source_addr->addr.ipv4, 4);
        return IT_SUCCESS;
    }
    return IT_ERR_INVALID_NETADDR;
}

ITAPI_EXPORT it_status_t it_get_pathinfo(it_ia_handle_t ia_handle, size_t spigot_id, const it_net_addr_t *net_addr,
                                         size_t *num_paths, size_t *total_paths, it_path_t *paths) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    if (spigot_id != 0) return IT_ERR_INVALID_SPIGOT;
    if (net_addr == nullptr || num_paths == nullptr || total_paths == nullptr) return IT_ERR_FAULT;
    if (net_addr->addr_type != IT_IPV4 && net_addr->addr_type != IT_IPV6) return IT_ERR_INVALID_NETADDR;
    // One path: this spigot's address to the peer's; the kAL picks the route when the EP connects.
    *total_paths = 1;
    if (*num_paths == 0 || paths == nullptr) {
        *num_paths = 0;
        return IT_SUCCESS;
    }
    std::memset(paths, 0, sizeof *paths);
    paths->spigot_id = 0;
    paths->timeout = 0;
    it_iwarp_net_endpoint_t &w = paths->remote.iwarp;
    if (net_addr->addr_type == IT_IPV4) {
        w.ip_vers = IT_IP_VERS_IPV4;
        std::memcpy(&w.laddr.ipv4, &ia->address.addr.ipv4, sizeof w.laddr.ipv4);
        w.raddr.ipv4 = net_addr->addr.ipv4;
    } else {
        w.ip_vers = IT_IP_VERS_IPV6;
        std::memcpy(&w.laddr.ipv6, &ia->address.addr.ipv6, sizeof w.laddr.ipv6);
        w.raddr.ipv6 = net_addr->addr.ipv6;
    }
    *num_paths = 1;
    return IT_SUCCESS;
}

// --- Calls of features no RNIC this library drives has: "not supported" (listed in api/itapi/README.md). ---

ITAPI_EXPORT it_status_t it_address_handle_create(it_pz_handle_t pz_handle, const it_path_t *, it_ah_flags_t,
                                                  it_addr_handle_t *) {
    return lookup<Pz>(pz_handle) == nullptr ? IT_ERR_INVALID_PZ : IT_ERR_OP_NOT_SUPPORTED;  // UD only
}
ITAPI_EXPORT it_status_t it_address_handle_free(it_addr_handle_t) { return IT_ERR_INVALID_HANDLE; }
ITAPI_EXPORT it_status_t it_address_handle_modify(it_addr_handle_t, it_addr_param_mask_t, const it_addr_param_t *) {
    return IT_ERR_INVALID_HANDLE;
}
ITAPI_EXPORT it_status_t it_address_handle_query(it_addr_handle_t, it_addr_param_mask_t, it_addr_param_t *) {
    return IT_ERR_INVALID_HANDLE;
}
ITAPI_EXPORT it_status_t it_ep_ud_create(it_pz_handle_t pz_handle, it_evd_handle_t, it_evd_handle_t,
                                         const it_ep_attributes_t *, size_t, it_ep_handle_t *) {
    return lookup<Pz>(pz_handle) == nullptr ? IT_ERR_INVALID_PZ : IT_ERR_OP_NOT_SUPPORTED;
}
ITAPI_EXPORT it_status_t it_post_sendto(it_ep_handle_t ep_handle, const it_lmr_triplet_t *, size_t, it_dto_cookie_t,
                                        it_dto_flags_t, const it_dg_remote_ep_addr_t *) {
    return lookup<Ep>(ep_handle) == nullptr ? IT_ERR_INVALID_EP : IT_ERR_OP_NOT_SUPPORTED;
}
ITAPI_EXPORT it_status_t it_post_recvfrom(it_ep_handle_t ep_handle, const it_lmr_triplet_t *, size_t,
                                          it_dto_cookie_t, it_dto_flags_t) {
    return lookup<Ep>(ep_handle) == nullptr ? IT_ERR_INVALID_EP : IT_ERR_OP_NOT_SUPPORTED;
}
ITAPI_EXPORT it_status_t it_ud_service_reply(it_ud_svc_req_identifier_t, it_ud_svc_req_status_t,
                                             it_remote_ep_info_t, const unsigned char *, size_t) {
    return IT_ERR_OP_NOT_SUPPORTED;
}
ITAPI_EXPORT it_status_t it_ud_service_request(it_ud_svc_req_handle_t) { return IT_ERR_INVALID_HANDLE; }
ITAPI_EXPORT it_status_t it_ud_service_request_handle_create(const it_conn_qual_t *, it_evd_handle_t,
                                                             const it_path_t *, const unsigned char *, size_t,
                                                             it_ud_svc_req_handle_t *) {
    return IT_ERR_OP_NOT_SUPPORTED;
}
ITAPI_EXPORT it_status_t it_ud_service_request_handle_free(it_ud_svc_req_handle_t) { return IT_ERR_INVALID_HANDLE; }
ITAPI_EXPORT it_status_t it_ud_service_request_handle_query(it_ud_svc_req_handle_t, it_ud_svc_req_param_mask_t,
                                                            it_ud_svc_req_param_t *) {
    return IT_ERR_INVALID_HANDLE;
}
ITAPI_EXPORT it_status_t it_mem_map(it_ia_handle_t ia_handle, void *, uint64_t, size_t, it_io_addr_t *, size_t *) {
    // I/O addresses are for privileged (kernel) consumers.
    return lookup<Ia>(ia_handle) == nullptr ? IT_ERR_INVALID_IA : IT_ERR_PRIV_OPS_UNAVAILABLE;
}
ITAPI_EXPORT it_status_t it_mem_unmap(it_ia_handle_t ia_handle, it_io_addr_t, size_t) {
    return lookup<Ia>(ia_handle) == nullptr ? IT_ERR_INVALID_IA : IT_ERR_PRIV_OPS_UNAVAILABLE;
}
