// DAT interface adapters, protection zones, handles and contexts, the value mapping every part shares, and the
// calls this provider does not support.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "dapl.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"

namespace dapl {

DAT_RETURN failed(const char *call, const rdma::Error &error, DAT_RETURN status) {
    RDMA_LOG_WARN("dapl", "%s: %s", call, error.to_string().c_str());
    return status;
}

DAT_RETURN from_ri(int code, DAT_RETURN fallback) noexcept {
    switch (code) {
        case RI_OK: return DAT_SUCCESS;
        case RI_ENOMEM:
        case RI_ENOSPC: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        case RI_EOPNOTSUPP:
        case RI_ENOSYS: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
        case RI_EPERM:
        case RI_EACCES: return DAT_ERROR(DAT_PRIVILEGES_VIOLATION, 0);
        case RI_ETIMEDOUT: return DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0);
        case RI_EINTR: return DAT_ERROR(DAT_INTERRUPTED_CALL, 0);
        case RI_EIO: return DAT_ERROR(DAT_INTERNAL_ERROR, 0);
        default: return fallback;
    }
}

uint32_t access_of(DAT_MEM_PRIV_FLAGS privs) noexcept {
    uint32_t a = RI_ACCESS_LOCAL_READ;
    if (privs & DAT_MEM_PRIV_LOCAL_WRITE_FLAG) a |= RI_ACCESS_LOCAL_WRITE;
    if (privs & DAT_MEM_PRIV_REMOTE_READ_FLAG) a |= RI_ACCESS_REMOTE_READ;
    // The verbs refuse remote write on memory the local side may not write.
    if (privs & DAT_MEM_PRIV_REMOTE_WRITE_FLAG) a |= RI_ACCESS_REMOTE_WRITE | RI_ACCESS_LOCAL_WRITE;
    // DAT_IB_MEM_PRIV_REMOTE_ATOMIC: an RFC 7306 atomic writes the target too.
    if (privs & DAT_MEM_PRIV_EXTENSION_BASE) a |= RI_ACCESS_REMOTE_ATOMIC | RI_ACCESS_LOCAL_WRITE;
    return a;
}

// The provider's named attributes, with what the RNIC has of RFC 7306 (OFED's names, which dtestx and MPIs read):
// one static table per combination, since the consumer keeps the pointer.
template <bool Atomics, bool Immediate>
std::span<const DAT_NAMED_ATTR> specific() noexcept {
    static const DAT_NAMED_ATTR table[] = {
        {"DAT_IB_RDMA_READ", "TRUE"},  // the name OFA's providers and their consumers use for RDMA Read
        {"DAT_IW_RDMA_READ", "TRUE"},
        // OFA's consumers size message buffers by the transport MTU; iWARP messages have no such bound, so the
        // value is a page, a size every FPDU-friendly buffer divides.
        {"DAT_IB_TRANSPORT_MTU", "4096"},
        {"OPENRDMA_TRANSPORT", "iWARP"},
        {"OPENRDMA_SEND_WITH_INVALIDATE", "TRUE"},
        {"OPENRDMA_RDMA_READ_TO_RMR", "FALSE"},
        // Usable on a connection whose peer speaks RFC 7306 too; elsewhere a post answers DAT_NOT_IMPLEMENTED.
        {"OPENRDMA_ATOMICS", Atomics ? "TRUE" : "FALSE"},
        {"DAT_IB_FETCH_AND_ADD", Atomics ? "TRUE" : "FALSE"},
        {"DAT_IB_CMP_AND_SWAP", Atomics ? "TRUE" : "FALSE"},
        {"DAT_IB_IMMED_DATA", Immediate ? "TRUE" : "FALSE"},
    };
    return table;
}

std::string address_text(const sockaddr *addr) {
    char text[INET6_ADDRSTRLEN] = {};
    if (addr == nullptr) return {};
    if (addr->sa_family == AF_INET) {
        if (::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(addr)->sin_addr, text, sizeof text)) {
            return text;
        }
    } else if (addr->sa_family == AF_INET6) {
        if (::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_addr, text, sizeof text)) {
            return text;
        }
    }
    return {};
}

void to_sockaddr(const ri_net_addr_t &a, uint16_t port, sockaddr_storage &out) noexcept {
    std::memset(&out, 0, sizeof out);
    if (a.family == RI_AF_INET6) {
        auto *s = reinterpret_cast<sockaddr_in6 *>(&out);
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        s->sin6_scope_id = a.scope_id;
        std::memcpy(&s->sin6_addr, a.addr, 16);
    } else if (a.family == RI_AF_INET) {
        auto *s = reinterpret_cast<sockaddr_in *>(&out);
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        std::memcpy(&s->sin_addr, a.addr, 4);
    }
}

void destroy_child(Ia *ia, Body *o) noexcept {
    std::erase(ia->objects, o);
    retire_handle(o->handle);
    delete o;  // the access layer's objects close with their last reference
}

namespace {

// Frees everything on @p ia, dependants first (the caller holds ia->mutex).
void destroy_all(Ia *ia) {
    const Kind order[] = {Kind::cr, Kind::rsp, Kind::psp, Kind::ep, Kind::rmr, Kind::lmr,
                          Kind::srq, Kind::evd, Kind::cno, Kind::pz};
    for (Kind k : order) {
        for (size_t i = ia->objects.size(); i-- > 0;) {
            if (i >= ia->objects.size()) continue;
            Body *o = ia->objects[i];
            if (o->kind != k) continue;
            if (k == Kind::ep) release_ep(static_cast<Ep *>(o));
            if (k == Kind::evd) release_evd(static_cast<Evd *>(o));
            destroy_child(ia, o);
        }
    }
    ia->async_evd = nullptr;
}

}  // namespace


// dat_ia_open's RNIC: ia_params' first word (an RNIC name or address), else the first RNIC.
static std::string rnic_name(const Provider &p, ual::AccessLayer &al) {
    if (!p.rnic.empty()) return p.rnic;
    auto rnics = al.rnics();
    if (!rnics || rnics->empty()) return {};
    return rnics->front().name;
}

/** @brief Opens the RNIC @p provider names (its ia_params or, in the kernel, its IA name). */
DAT_RETURN open_ia(Provider &provider, DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle) {
    const char *name = provider.ia_name.c_str();
    auto al = access_layer();
    if (!al) {
        RDMA_LOG_ERROR("dapl", "dat_ia_open(%s): %s", name, al.error().to_string().c_str());
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_DEVICE);
    }
    const std::string rnic = rnic_name(provider, **al);
    auto adapter = (*al)->open_adapter(rnic);
    if (!adapter) {
        // The message names the RNIC and the dat.conf entry, so a wrong ia_params is found at once.
        RDMA_LOG_ERROR("dapl", "dat_ia_open(%s): RNIC \"%s\" named by its ia_params cannot be opened: %s", name,
                       rnic.c_str(), adapter.error().to_string().c_str());
        const int c = adapter.error().code();
        return c == RI_ENODEV || c == RI_ENOENT ? DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED)
                                               : from_ri(c, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_DEVICE));
    }
    auto attr = (*adapter)->query();
    if (!attr) return failed("dat_ia_open", attr.error(), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    Ia *ia = nullptr;
    try {
        ia = new Ia;
    } catch (...) {
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    ia->provider = &provider;
    ia->al = *al;
    ia->adapter = *adapter;
    ia->attr = *attr;
    if (auto a = krdma::parse_net_addr(ia->adapter->description().address)) to_sockaddr(*a, 0, ia->address);
    ia->handle = make_handle(&provider.table, Kind::ia, ia);
    if (ia->handle == nullptr) {
        delete ia;
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (*async_evd == DAT_HANDLE_NULL && async_qlen > 0) {
        std::lock_guard lock(ia->mutex);
        Evd *evd = nullptr;
        if (DAT_RETURN st = create_evd(ia, async_qlen, DAT_EVD_ASYNC_FLAG, &evd); st != DAT_SUCCESS) {
            (void)ia_close(ia->dat<DAT_IA_HANDLE>(), DAT_CLOSE_ABRUPT_FLAG);
            return st;
        }
        ia->async_evd = evd;
        ia->own_async = true;
        *async_evd = evd->dat<DAT_EVD_HANDLE>();
    }
    *ia_handle = ia->dat<DAT_IA_HANDLE>();
    return DAT_SUCCESS;
}

// --- IA -------------------------------------------------------------------------------------------------------

DAT_RETURN ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
                    DAT_PROVIDER_ATTR_MASK provider_mask, DAT_PROVIDER_ATTR *provider_attr) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (ia_mask != 0 && ia_attr == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (provider_mask != 0 && provider_attr == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    std::lock_guard lock(ia->mutex);
    if (async_evd != nullptr) *async_evd = ia->async_evd != nullptr ? ia->async_evd->dat<DAT_EVD_HANDLE>() : nullptr;
    const ri_rnic_attr_t &r = ia->attr;
    auto count = [](uint64_t v) { return static_cast<DAT_COUNT>(std::min<uint64_t>(v, INT32_MAX)); };
    if (ia_mask != 0) {
        DAT_IA_ATTR &a = *ia_attr;
        std::memset(&a, 0, sizeof a);
        std::strncpy(a.adapter_name, ia->adapter->description().name.c_str(), sizeof a.adapter_name - 1);
        std::strncpy(a.vendor_name, ia->adapter->description().vendor.c_str(), sizeof a.vendor_name - 1);
        a.hardware_version_major = r.hw_version >> 16;
        a.hardware_version_minor = r.hw_version & 0xffff;
        a.firmware_version_major = static_cast<DAT_UINT32>(r.fw_version >> 32);
        a.firmware_version_minor = static_cast<DAT_UINT32>(r.fw_version & 0xffffffffu);
        a.ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&ia->address);
        a.max_eps = count(r.max_qp);
        a.max_dto_per_ep = count(r.max_qp_wr);
        a.max_rdma_read_per_ep_in = count(r.max_ird);
        a.max_rdma_read_per_ep_out = count(r.max_ord);
        a.max_evds = count(r.max_cq);
        a.max_evd_qlen = count(r.max_cqe);
        a.max_iov_segments_per_dto = count(r.max_sge);
        a.max_lmrs = count(r.max_mr);
        a.max_lmr_block_size = static_cast<DAT_SEG_LENGTH>(std::min<uint64_t>(r.max_mr_size, UINT32_MAX));
        a.max_lmr_virtual_address = UINT64_MAX;
        a.max_pzs = count(r.max_pd);
        // A DAT segment length is 32 bits; MPA's messages are bounded only by the regions.
        a.max_message_size = static_cast<DAT_SEG_LENGTH>(std::min<uint64_t>(r.max_mr_size, INT32_MAX));
        a.max_rdma_size = a.max_message_size;
        a.max_rmrs = count(r.max_mw);
        a.max_rmr_target_address = UINT64_MAX;
        a.max_srqs = (r.caps & RI_CAP_SRQ) ? count(r.max_srq) : 0;
        a.max_ep_per_srq = a.max_srqs > 0 ? count(r.max_qp) : 0;
        a.max_recv_per_srq = a.max_srqs > 0 ? count(r.max_srq_wr) : 0;
        a.max_iov_segments_per_rdma_read = count(r.max_sge_rd);
        a.max_iov_segments_per_rdma_write = count(r.max_sge);
        a.max_rdma_read_in = count(r.max_ird);
        a.max_rdma_read_out = count(r.max_ord);
        a.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
        a.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
        a.zb_supported = (r.caps & RI_CAP_ZERO_BASED) ? DAT_TRUE : DAT_FALSE;
#ifdef OPENRDMA_KDAPL
        a.reserved_lmr_supported = DAT_FALSE;
#endif
#if defined(DAT_EXTENSIONS) && !defined(OPENRDMA_KDAPL)
        // OFED's IB extensions where the RNIC has RFC 7306 (ib_extensions.cpp): RDMA Write with immediate data and
        // the two atomics. Without, libdat2 refuses every dat_extension_op itself.
        const bool ib = (r.caps & (RI_CAP_ATOMICS | RI_CAP_IMMEDIATE)) != 0;
        a.extension_supported = ib ? DAT_EXTENSION_IB : DAT_EXTENSION_NONE;
        a.extension_version = ib ? DAT_IB_EXTENSION_VERSION : 0;
#elif defined(DAT_EXTENSIONS)
        a.extension_supported = DAT_EXTENSION_NONE;
        a.extension_version = 0;
#endif
        a.num_transport_attr = 0;
        a.transport_attr = nullptr;
        a.num_vendor_attr = 0;
        a.vendor_attr = nullptr;
    }
    if (provider_mask != 0) {
        DAT_PROVIDER_ATTR &p = *provider_attr;
        std::memset(static_cast<void *>(&p), 0, sizeof p);
        std::strncpy(p.provider_name, ia->provider->ia_name.c_str(), sizeof p.provider_name - 1);
        p.provider_version_major = 1;
        p.provider_version_minor = 0;
        p.dapl_version_major = 2;
        p.dapl_version_minor = 0;
#ifdef OPENRDMA_KDAPL
        p.lmr_mem_types_supported =
            static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_PHYSICAL);
#else
        p.lmr_mem_types_supported = static_cast<DAT_MEM_TYPE>(DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR);
#endif
        p.iov_ownership_on_return = DAT_IOV_CONSUMER;
        p.dat_qos_supported = DAT_QOS_BEST_EFFORT;
        p.completion_flags_supported = static_cast<DAT_COMPLETION_FLAGS>(
            DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
            DAT_COMPLETION_BARRIER_FENCE_FLAG | DAT_COMPLETION_EVD_THRESHOLD_FLAG);
        p.is_thread_safe = DAT_FALSE;
        p.max_private_data_size = static_cast<DAT_COUNT>(std::min<uint32_t>(r.max_private_data, 512));
        p.supports_multipath = DAT_FALSE;
        p.ep_creator = DAT_PSP_CREATES_EP_IFASKED;
#ifdef OPENRDMA_KDAPL
        p.upcall_policy = DAT_UPCALL_MANY;  // the strongest policy offered; SINGLE_INSTANCE and DISABLE are too
#else
        p.pz_support = DAT_PZ_UNIQUE;
#endif
        p.optimal_buffer_alignment = 64;
        // Any streams may share an EVD: each EVD holds a CQ and a queue of every other event.
        auto *merging = const_cast<DAT_BOOLEAN *>(&p.evd_stream_merging_supported[0][0]);
        std::fill(merging, merging + 36, DAT_TRUE);
        p.srq_supported = (r.caps & RI_CAP_SRQ) ? DAT_TRUE : DAT_FALSE;
        p.srq_watermarks_supported = 0;
        p.srq_ep_pz_difference_supported = DAT_FALSE;
        p.srq_info_supported = 0;
        p.ep_recv_info_supported = DAT_TRUE;
        p.lmr_sync_req = DAT_FALSE;
        p.dto_async_return_guaranteed = DAT_FALSE;
        p.rdma_write_for_rdma_read_req = DAT_FALSE;
        p.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
        p.rmr_scope_supported = DAT_RMR_SCOPE_ANY;
#ifdef OPENRDMA_KDAPL
        p.is_interrupt_safe = DAT_FALSE;
        p.fmr_supported = DAT_FALSE;
        p.lmr_for_fmr_scope_supported = DAT_LMR_SCOPE_PZ;
#else
        p.is_signal_safe = DAT_FALSE;
#endif
        p.ha_supported = DAT_FALSE;
        p.ha_loadbalancing = DAT_HA_LB_NONE;
        const bool atomics = (r.caps & RI_CAP_ATOMICS) != 0, immediate = (r.caps & RI_CAP_IMMEDIATE) != 0;
        const std::span<const DAT_NAMED_ATTR> named = atomics ? (immediate ? specific<true, true>() : specific<true, false>())
                                                              : (immediate ? specific<false, true>() : specific<false, false>());
        p.num_provider_specific_attr = static_cast<DAT_COUNT>(named.size());
        p.provider_specific_attr = const_cast<DAT_NAMED_ATTR *>(named.data());
    }
    return DAT_SUCCESS;
}

DAT_RETURN ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    {
        std::lock_guard lock(ia->mutex);
        if (flags == DAT_CLOSE_GRACEFUL_FLAG) {
            // A graceful close leaves the consumer's objects to the consumer: only dat_ia_open's own async EVD may
            // remain.
            for (Body *o : ia->objects) {
                if (o == ia->async_evd && ia->own_async) continue;
                return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
            }
        }
        destroy_all(ia);
    }
    retire_handle(ia->handle);
    delete ia;
    return DAT_SUCCESS;
}

// --- contexts and handle types ---------------------------------------------------------------------------------

DAT_RETURN set_consumer_context(DAT_HANDLE handle, DAT_CONTEXT context) {
    Body *b = lookup_any(handle);
    if (b == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    std::lock_guard lock(b->ia->mutex);
    b->context = context;
    return DAT_SUCCESS;
}

DAT_RETURN get_consumer_context(DAT_HANDLE handle, DAT_CONTEXT *context) {
    Body *b = lookup_any(handle);
    if (b == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    if (context == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(b->ia->mutex);
    *context = b->context;
    return DAT_SUCCESS;
}

DAT_RETURN get_handle_type(DAT_HANDLE handle, DAT_HANDLE_TYPE *type) {
    Body *b = lookup_any(handle);
    if (b == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    if (type == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    switch (b->kind) {
        case Kind::cr: *type = DAT_HANDLE_TYPE_CR; break;
        case Kind::ep: *type = DAT_HANDLE_TYPE_EP; break;
        case Kind::evd: *type = DAT_HANDLE_TYPE_EVD; break;
        case Kind::ia: *type = DAT_HANDLE_TYPE_IA; break;
        case Kind::lmr: *type = DAT_HANDLE_TYPE_LMR; break;
        case Kind::psp: *type = DAT_HANDLE_TYPE_PSP; break;
        case Kind::pz: *type = DAT_HANDLE_TYPE_PZ; break;
        case Kind::rmr: *type = DAT_HANDLE_TYPE_RMR; break;
        case Kind::rsp: *type = DAT_HANDLE_TYPE_RSP; break;
#ifndef OPENRDMA_KDAPL
        case Kind::cno: *type = DAT_HANDLE_TYPE_CNO; break;  // kDAT has no CNO (its numbering has no slot for one)
#endif
        case Kind::srq: *type = DAT_HANDLE_TYPE_SRQ; break;
        default: *type = DAT_HANDLE_TYPE_CSP; break;
    }
    return DAT_SUCCESS;
}

// --- PZ -------------------------------------------------------------------------------------------------------

DAT_RETURN pz_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE *pz_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (pz_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(ia->mutex);
    Pz *pz = make_child<Pz>(ia);
    if (pz == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto made = ia->adapter->create_pz();
    if (!made) {
        destroy_child(ia, pz);
        return failed("dat_pz_create", made.error(),
                      from_ri(made.error().code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_PROTECTION_DOMAIN)));
    }
    pz->pz = std::move(*made);
    *pz_handle = pz->dat<DAT_PZ_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN pz_query(DAT_PZ_HANDLE pz_handle, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param) {
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (param == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (mask & DAT_PZ_FIELD_IA_HANDLE) param->ia_handle = public_ia(pz->ia);
    return DAT_SUCCESS;
}

DAT_RETURN pz_free(DAT_PZ_HANDLE pz_handle) {
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    Ia *ia = pz->ia;
    std::lock_guard lock(ia->mutex);
    if (pz->users != 0) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_PZ_IN_USE);
    destroy_child(ia, pz);
    return DAT_SUCCESS;
}

// --- what this provider does not support (listed in api/dapl/README.md) -----------------------------------------

DAT_RETURN csp_create(DAT_IA_HANDLE ia_handle, DAT_COMM *, DAT_IA_ADDRESS_PTR, DAT_EVD_HANDLE, DAT_CSP_HANDLE *) {
    if (lookup<Ia>(ia_handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // common service points: the iWARP CM has no such model
}

DAT_RETURN csp_query(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *) {
    return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP);  // none can exist
}

DAT_RETURN csp_free(DAT_CSP_HANDLE) { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CSP); }

DAT_RETURN ep_common_connect(DAT_EP_HANDLE ep_handle, DAT_IA_ADDRESS_PTR, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID) {
    if (lookup<Ep>(ep_handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // needs common service points
}

DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep_handle, const DAT_RMR_TRIPLET *, DAT_DTO_COOKIE,
                                    const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS) {
    if (lookup<Ep>(ep_handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    // RDMA Read into a remote region (a third party's sink) is an InfiniBand extension no iWARP RNIC offers.
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}

}  // namespace dapl
