// The kDAT entry points krdmad exports to its consumer modules (kernel_exports.list): every dat_* call of
// <dat2/kdat.h> and the common ones of <dat2/dat.h>, each calling the provider directly (krdmad's kDAPL has one
// provider), plus the registry calls a kernel module opens its IAs with.
#include <cstring>
#include <list>
#include <mutex>

#include "dapl.hpp"

#define KDAT_EXPORT extern "C" __attribute__((visibility("default")))

namespace dapl {

DAT_RETURN evd_kcreate(DAT_IA_HANDLE, DAT_COUNT, DAT_UPCALL_POLICY, const DAT_UPCALL_OBJECT *, DAT_EVD_FLAGS,
                       DAT_EVD_HANDLE *);
DAT_RETURN evd_modify_upcall(DAT_EVD_HANDLE, DAT_UPCALL_POLICY, const DAT_UPCALL_OBJECT *, DAT_UPCALL_FLAG);
DAT_RETURN evd_kquery(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, DAT_EVD_PARAM *);
DAT_RETURN lmr_kcreate(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN, DAT_PZ_HANDLE,
                       DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_MEM_OPT, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *,
                       DAT_RMR_CONTEXT *, DAT_VLEN *, DAT_VADDR *);
DAT_RETURN lmr_kquery(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);
DAT_RETURN ia_memtype_hint(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_VLEN, DAT_MEM_OPT, DAT_VLEN *, DAT_VADDR *);

namespace {

std::mutex g_mutex;
std::list<Provider> g_providers;  // one per IA name a module opened (handles point at them: never removed)

constexpr const char kPrefix[] = "openrdma-";

// The provider record of IA name @p name: "openrdma-RNIC" or the RNIC's own name or address.
Provider *provider_for(const char *name) {
    std::lock_guard lock(g_mutex);
    for (Provider &p : g_providers) {
        if (p.ia_name == name) return &p;
    }
    try {
        Provider &p = g_providers.emplace_back();
        p.ia_name = name;
        p.rnic = std::strncmp(name, kPrefix, sizeof kPrefix - 1) == 0 ? name + sizeof kPrefix - 1 : name;
        p.table.device_name = p.ia_name.c_str();
        std::strncpy(p.info.ia_name, name, sizeof p.info.ia_name - 1);
        p.info.dapl_version_major = 2;
        p.info.dapl_version_minor = 0;
        p.info.is_thread_safe = DAT_TRUE;
        return &p;
    } catch (...) {
        return nullptr;
    }
}

struct Text {
    DAT_UINT32 value;
    const char *text;
};

constexpr Text kTypes[] = {
    {DAT_SUCCESS, "DAT_SUCCESS"},
    {DAT_ABORT, "DAT_ABORT"},
    {DAT_CONN_QUAL_IN_USE, "DAT_CONN_QUAL_IN_USE"},
    {DAT_INSUFFICIENT_RESOURCES, "DAT_INSUFFICIENT_RESOURCES"},
    {DAT_INTERNAL_ERROR, "DAT_INTERNAL_ERROR"},
    {DAT_INVALID_HANDLE, "DAT_INVALID_HANDLE"},
    {DAT_INVALID_PARAMETER, "DAT_INVALID_PARAMETER"},
    {DAT_INVALID_STATE, "DAT_INVALID_STATE"},
    {DAT_LENGTH_ERROR, "DAT_LENGTH_ERROR"},
    {DAT_MODEL_NOT_SUPPORTED, "DAT_MODEL_NOT_SUPPORTED"},
    {DAT_PROVIDER_NOT_FOUND, "DAT_PROVIDER_NOT_FOUND"},
    {DAT_PRIVILEGES_VIOLATION, "DAT_PRIVILEGES_VIOLATION"},
    {DAT_PROTECTION_VIOLATION, "DAT_PROTECTION_VIOLATION"},
    {DAT_QUEUE_EMPTY, "DAT_QUEUE_EMPTY"},
    {DAT_QUEUE_FULL, "DAT_QUEUE_FULL"},
    {DAT_TIMEOUT_EXPIRED, "DAT_TIMEOUT_EXPIRED"},
    {DAT_PROVIDER_ALREADY_REGISTERED, "DAT_PROVIDER_ALREADY_REGISTERED"},
    {DAT_PROVIDER_IN_USE, "DAT_PROVIDER_IN_USE"},
    {DAT_INVALID_ADDRESS, "DAT_INVALID_ADDRESS"},
    {DAT_INTERRUPTED_CALL, "DAT_INTERRUPTED_CALL"},
    {DAT_NOT_IMPLEMENTED, "DAT_NOT_IMPLEMENTED"},
};

}  // namespace
}  // namespace dapl

using namespace dapl;

// --- the registry ------------------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd,
                                    DAT_IA_HANDLE *ia_handle, DAT_UINT32 major, DAT_UINT32 minor,
                                    DAT_BOOLEAN thread_safe) {
    (void)thread_safe;  // krdmad's kDAPL is thread safe
    if (name == nullptr || name[0] == '\0') return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (async_evd == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (ia_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (major != 2) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);  // a kDAT 1.x module
    (void)minor;
    Provider *p = provider_for(name);
    if (p == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    if (*async_evd != DAT_HANDLE_NULL && *async_evd != reinterpret_cast<DAT_EVD_HANDLE>(0x1)) {
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    }
    *async_evd = DAT_HANDLE_NULL;
    return open_ia(*p, async_qlen, async_evd, ia_handle);
}

KDAT_EXPORT DAT_RETURN dat_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags) { return ia_close(ia, flags); }

KDAT_EXPORT DAT_RETURN dat_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *async_evd, DAT_IA_ATTR_MASK ia_mask,
                                    DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK provider_mask,
                                    DAT_PROVIDER_ATTR *provider_attr) {
    return ia_query(ia, async_evd, ia_mask, ia_attr, provider_mask, provider_attr);
}

/** @brief The IA names a module may open: "openrdma-" and each RNIC's name (its address works too). */
KDAT_EXPORT DAT_RETURN dat_registry_list_providers(DAT_COUNT max, DAT_COUNT *count, DAT_PROVIDER_INFO *(list[])) {
    if (count == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (max > 0 && list == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    auto al = access_layer();
    if (!al) return failed("dat_registry_list_providers", al.error(), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    auto rnics = (*al)->rnics();
    if (!rnics) return failed("dat_registry_list_providers", rnics.error(), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    DAT_COUNT n = 0;
    for (const auto &r : *rnics) {
        if (n < max && list[n] != nullptr) {
            DAT_PROVIDER_INFO &i = *list[n];
            std::memset(&i, 0, sizeof i);
            std::snprintf(i.ia_name, sizeof i.ia_name, "%s%s", kPrefix, r.name.c_str());
            i.dapl_version_major = 2;
            i.dapl_version_minor = 0;
            i.is_thread_safe = DAT_TRUE;
        }
        ++n;
    }
    *count = std::min(n, max);
    return DAT_SUCCESS;
}

KDAT_EXPORT DAT_RETURN dat_strerror(DAT_RETURN value, const char **major, const char **minor) {
    if (major == nullptr || minor == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, 0);
    *major = "unknown DAT status";
    for (const Text &t : kTypes) {
        if (t.value == DAT_GET_TYPE(value)) *major = t.text;
    }
    *minor = DAT_GET_SUBTYPE(value) == 0 ? "" : "(see dat_error.h for the subtype)";
    return DAT_SUCCESS;
}

KDAT_EXPORT DAT_RETURN dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP, ...) {
    if (lookup_any(handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}

// --- handles and contexts -------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_set_consumer_context(DAT_HANDLE h, DAT_CONTEXT c) { return set_consumer_context(h, c); }
KDAT_EXPORT DAT_RETURN dat_get_consumer_context(DAT_HANDLE h, DAT_CONTEXT *c) { return get_consumer_context(h, c); }
KDAT_EXPORT DAT_RETURN dat_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *t) { return get_handle_type(h, t); }

// --- CR, EVD -------------------------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK m, DAT_CR_PARAM *p) { return cr_query(cr, m, p); }
KDAT_EXPORT DAT_RETURN dat_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT n, const DAT_PVOID d) {
    return cr_accept(cr, ep, n, d);
}
KDAT_EXPORT DAT_RETURN dat_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT n, const DAT_PVOID d) { return cr_reject(cr, n, d); }
KDAT_EXPORT DAT_RETURN dat_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL q) { return cr_handoff(cr, q); }
KDAT_EXPORT DAT_RETURN dat_evd_kcreate(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_UPCALL_POLICY policy,
                                       const DAT_UPCALL_OBJECT *upcall, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd) {
    return evd_kcreate(ia, qlen, policy, upcall, flags, evd);
}
KDAT_EXPORT DAT_RETURN dat_evd_modify_upcall(DAT_EVD_HANDLE evd, DAT_UPCALL_POLICY policy,
                                             const DAT_UPCALL_OBJECT *upcall, DAT_UPCALL_FLAG flag) {
    return evd_modify_upcall(evd, policy, upcall, flag);
}
KDAT_EXPORT DAT_RETURN dat_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK m, DAT_EVD_PARAM *p) {
    return evd_kquery(evd, m, p);
}
KDAT_EXPORT DAT_RETURN dat_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen) { return evd_resize(evd, qlen); }
KDAT_EXPORT DAT_RETURN dat_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *e) { return evd_post_se(evd, e); }
KDAT_EXPORT DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *e) { return evd_dequeue(evd, e); }
KDAT_EXPORT DAT_RETURN dat_evd_free(DAT_EVD_HANDLE evd) { return evd_free(evd); }

// --- EP ------------------------------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv, DAT_EVD_HANDLE req,
                                     DAT_EVD_HANDLE conn, const DAT_EP_ATTR *a, DAT_EP_HANDLE *ep) {
    return ep_create(ia, pz, recv, req, conn, a, ep);
}
KDAT_EXPORT DAT_RETURN dat_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv,
                                              DAT_EVD_HANDLE req, DAT_EVD_HANDLE conn, DAT_SRQ_HANDLE srq,
                                              const DAT_EP_ATTR *a, DAT_EP_HANDLE *ep) {
    return ep_create_with_srq(ia, pz, recv, req, conn, srq, a, ep);
}
KDAT_EXPORT DAT_RETURN dat_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK m, DAT_EP_PARAM *p) { return ep_query(ep, m, p); }
KDAT_EXPORT DAT_RETURN dat_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK m, const DAT_EP_PARAM *p) {
    return ep_modify(ep, m, p);
}
KDAT_EXPORT DAT_RETURN dat_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR a, DAT_CONN_QUAL q, DAT_TIMEOUT t,
                                      DAT_COUNT n, const DAT_PVOID d, DAT_QOS qos, DAT_CONNECT_FLAGS f) {
    return ep_connect(ep, a, q, t, n, d, qos, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT t, DAT_COUNT n,
                                          const DAT_PVOID d, DAT_QOS qos) {
    return ep_dup_connect(ep, dup, t, n, d, qos);
}
KDAT_EXPORT DAT_RETURN dat_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR a, DAT_TIMEOUT t, DAT_COUNT n,
                                             const DAT_PVOID d) {
    return ep_common_connect(ep, a, t, n, d);
}
KDAT_EXPORT DAT_RETURN dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS f) { return ep_disconnect(ep, f); }
KDAT_EXPORT DAT_RETURN dat_ep_post_send(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                        DAT_COMPLETION_FLAGS f) {
    return ep_post_send(ep, n, iov, c, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                                        DAT_DTO_COOKIE c, DAT_COMPLETION_FLAGS f, DAT_BOOLEAN inv,
                                                        DAT_RMR_CONTEXT ctx) {
    return ep_post_send_with_invalidate(ep, n, iov, c, f, inv, ctx);
}
KDAT_EXPORT DAT_RETURN dat_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                        DAT_COMPLETION_FLAGS f) {
    return ep_post_recv(ep, n, iov, c, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_post_rdma_read(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                             const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) {
    return ep_post_rdma_read(ep, n, iov, c, r, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *l, DAT_DTO_COOKIE c,
                                                    const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) {
    return ep_post_rdma_read_to_rmr(ep, l, c, r, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c,
                                              const DAT_RMR_TRIPLET *r, DAT_COMPLETION_FLAGS f) {
    return ep_post_rdma_write(ep, n, iov, c, r, f);
}
KDAT_EXPORT DAT_RETURN dat_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *s, DAT_BOOLEAN *r, DAT_BOOLEAN *q) {
    return ep_get_status(ep, s, r, q);
}
KDAT_EXPORT DAT_RETURN dat_ep_free(DAT_EP_HANDLE ep) { return ep_free(ep); }
KDAT_EXPORT DAT_RETURN dat_ep_reset(DAT_EP_HANDLE ep) { return ep_reset(ep); }
KDAT_EXPORT DAT_RETURN dat_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *a, DAT_COUNT *b) { return ep_recv_query(ep, a, b); }
KDAT_EXPORT DAT_RETURN dat_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT a, DAT_COUNT b) {
    return ep_set_watermark(ep, a, b);
}

// --- memory --------------------------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_lmr_kcreate(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
                                       DAT_VLEN length, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va,
                                       DAT_MEM_OPTIMIZE_FLAGS opt, DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lctx,
                                       DAT_RMR_CONTEXT *rctx, DAT_VLEN *len, DAT_VADDR *addr) {
    return lmr_kcreate(ia, type, region, length, pz, privs, va, opt, lmr, lctx, rctx, len, addr);
}
KDAT_EXPORT DAT_RETURN dat_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK m, DAT_LMR_PARAM *p) {
    return lmr_kquery(lmr, m, p);
}
KDAT_EXPORT DAT_RETURN dat_ia_memtype_hint(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_VLEN length,
                                           DAT_MEM_OPTIMIZE_FLAGS opt, DAT_VLEN *len, DAT_VADDR *align) {
    return ia_memtype_hint(ia, type, length, opt, len, align);
}
KDAT_EXPORT DAT_RETURN dat_lmr_free(DAT_LMR_HANDLE lmr) { return lmr_free(lmr); }
KDAT_EXPORT DAT_RETURN dat_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return lmr_sync_rdma_read(ia, iov, n);
}
KDAT_EXPORT DAT_RETURN dat_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return lmr_sync_rdma_write(ia, iov, n);
}
// Fast memory registration through an EP and the reserved LMR: not offered (see api/dapl/README.md).
KDAT_EXPORT DAT_RETURN dat_lmr_allocate(DAT_IA_HANDLE ia, DAT_PZ_HANDLE, DAT_COUNT, DAT_LMR_SCOPE, DAT_LMR_HANDLE *) {
    if (lookup<Ia>(ia) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}
KDAT_EXPORT DAT_RETURN dat_lmr_fmr(DAT_LMR_HANDLE lmr, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN,
                                   DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_EP_HANDLE, DAT_LMR_COOKIE,
                                   DAT_COMPLETION_FLAGS, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT) {
    if (lookup<Lmr>(lmr) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}
KDAT_EXPORT DAT_RETURN dat_lmr_invalidate(DAT_LMR_HANDLE lmr, DAT_EP_HANDLE, DAT_LMR_COOKIE, DAT_COMPLETION_FLAGS) {
    if (lookup<Lmr>(lmr) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
}
KDAT_EXPORT DAT_RETURN dat_ia_reserved_lmr(DAT_IA_HANDLE ia, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *) {
    if (lookup<Ia>(ia) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // reserved_lmr_supported is DAT_FALSE
}
KDAT_EXPORT DAT_RETURN dat_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return rmr_create(pz, rmr); }
KDAT_EXPORT DAT_RETURN dat_rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return rmr_create_for_ep(pz, rmr); }
KDAT_EXPORT DAT_RETURN dat_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK m, DAT_RMR_PARAM *p) {
    return rmr_query(rmr, m, p);
}
KDAT_EXPORT DAT_RETURN dat_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *t,
                                    DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va, DAT_EP_HANDLE ep, DAT_RMR_COOKIE c,
                                    DAT_COMPLETION_FLAGS f, DAT_RMR_CONTEXT *ctx) {
    return rmr_bind(rmr, lmr, t, privs, va, ep, c, f, ctx);
}
KDAT_EXPORT DAT_RETURN dat_rmr_free(DAT_RMR_HANDLE rmr) { return rmr_free(rmr); }

// --- service points, PZ, SRQ --------------------------------------------------------------------------------------

KDAT_EXPORT DAT_RETURN dat_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL q, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS f,
                                      DAT_PSP_HANDLE *psp) {
    return psp_create(ia, q, evd, f, psp);
}
KDAT_EXPORT DAT_RETURN dat_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *q, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS f,
                                          DAT_PSP_HANDLE *psp) {
    return psp_create_any(ia, q, evd, f, psp);
}
KDAT_EXPORT DAT_RETURN dat_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK m, DAT_PSP_PARAM *p) {
    return psp_query(psp, m, p);
}
KDAT_EXPORT DAT_RETURN dat_psp_free(DAT_PSP_HANDLE psp) { return psp_free(psp); }
KDAT_EXPORT DAT_RETURN dat_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL q, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd,
                                      DAT_RSP_HANDLE *rsp) {
    return rsp_create(ia, q, ep, evd, rsp);
}
KDAT_EXPORT DAT_RETURN dat_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK m, DAT_RSP_PARAM *p) {
    return rsp_query(rsp, m, p);
}
KDAT_EXPORT DAT_RETURN dat_rsp_free(DAT_RSP_HANDLE rsp) { return rsp_free(rsp); }
KDAT_EXPORT DAT_RETURN dat_csp_create(DAT_IA_HANDLE ia, DAT_COMM *c, DAT_IA_ADDRESS_PTR a, DAT_EVD_HANDLE evd,
                                      DAT_CSP_HANDLE *csp) {
    return csp_create(ia, c, a, evd, csp);
}
KDAT_EXPORT DAT_RETURN dat_csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK m, DAT_CSP_PARAM *p) {
    return csp_query(csp, m, p);
}
KDAT_EXPORT DAT_RETURN dat_csp_free(DAT_CSP_HANDLE csp) { return csp_free(csp); }
KDAT_EXPORT DAT_RETURN dat_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz) { return pz_create(ia, pz); }
KDAT_EXPORT DAT_RETURN dat_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK m, DAT_PZ_PARAM *p) { return pz_query(pz, m, p); }
KDAT_EXPORT DAT_RETURN dat_pz_free(DAT_PZ_HANDLE pz) { return pz_free(pz); }
KDAT_EXPORT DAT_RETURN dat_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *a, DAT_SRQ_HANDLE *srq) {
    return srq_create(ia, pz, a, srq);
}
KDAT_EXPORT DAT_RETURN dat_srq_free(DAT_SRQ_HANDLE srq) { return srq_free(srq); }
KDAT_EXPORT DAT_RETURN dat_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE c) {
    return srq_post_recv(srq, n, iov, c);
}
KDAT_EXPORT DAT_RETURN dat_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK m, DAT_SRQ_PARAM *p) {
    return srq_query(srq, m, p);
}
KDAT_EXPORT DAT_RETURN dat_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT n) { return srq_resize(srq, n); }
KDAT_EXPORT DAT_RETURN dat_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT n) { return srq_set_lw(srq, n); }
