// The uDAPL provider's face to libdat2: dat_provider_init / dat_provider_fini for each dat.conf entry that names
// this library, the DAT_PROVIDER dispatch table (every slot filled), dat_ia_open, and the process's access layer.
#include <cstring>
#include <list>
#include <sstream>

#include "dapl.hpp"
#include "embedded_link.hpp"
#include "rnicpi/host/log.hpp"

extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *ia_handle_p);

namespace dapl {
namespace {

std::mutex g_providers_mutex;
std::list<Provider> g_providers;  // one per registered dat.conf entry; a list keeps their addresses

// The udat-only calls (evd.cpp).
}  // namespace

DAT_RETURN evd_create(DAT_IA_HANDLE, DAT_COUNT, DAT_CNO_HANDLE, DAT_EVD_FLAGS, DAT_EVD_HANDLE *);
DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE, DAT_CNO_HANDLE);
DAT_RETURN evd_enable(DAT_EVD_HANDLE);
DAT_RETURN evd_disable(DAT_EVD_HANDLE);
DAT_RETURN evd_wait(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, DAT_EVENT *, DAT_COUNT *);
DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE);
DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE);
DAT_RETURN cno_create(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, DAT_CNO_HANDLE *);
DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT);
DAT_RETURN cno_query(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, DAT_CNO_PARAM *);
DAT_RETURN cno_free(DAT_CNO_HANDLE);
DAT_RETURN cno_wait(DAT_CNO_HANDLE, DAT_TIMEOUT, DAT_EVD_HANDLE *);
DAT_RETURN cno_fd_create(DAT_IA_HANDLE, DAT_FD *, DAT_CNO_HANDLE *);
DAT_RETURN cno_trigger(DAT_CNO_HANDLE, DAT_EVD_HANDLE *);
DAT_RETURN lmr_create(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN, DAT_PZ_HANDLE,
                      DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *, DAT_RMR_CONTEXT *,
                      DAT_VLEN *, DAT_VADDR *);
DAT_RETURN lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);

namespace {

DAT_RETURN ia_ha_related(DAT_IA_HANDLE ia_handle, const DAT_NAME_PTR, DAT_BOOLEAN *answer) {
    if (lookup<Ia>(ia_handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (answer == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    *answer = DAT_FALSE;  // no high-availability pairs
    return DAT_SUCCESS;
}


void fill_table(DAT_PROVIDER &t) {
    t.ia_open_func = ia_open;
    t.ia_query_func = ia_query;
    t.ia_close_func = ia_close;
    t.set_consumer_context_func = set_consumer_context;
    t.get_consumer_context_func = get_consumer_context;
    t.get_handle_type_func = get_handle_type;
    t.cno_create_func = cno_create;
    t.cno_modify_agent_func = cno_modify_agent;
    t.cno_query_func = cno_query;
    t.cno_free_func = cno_free;
    t.cno_wait_func = cno_wait;
    t.cr_query_func = cr_query;
    t.cr_accept_func = cr_accept;
    t.cr_reject_func = cr_reject;
    t.cr_handoff_func = cr_handoff;
    t.evd_create_func = evd_create;
    t.evd_query_func = evd_query;
    t.evd_modify_cno_func = evd_modify_cno;
    t.evd_enable_func = evd_enable;
    t.evd_disable_func = evd_disable;
    t.evd_wait_func = evd_wait;
    t.evd_resize_func = evd_resize;
    t.evd_post_se_func = evd_post_se;
    t.evd_dequeue_func = evd_dequeue;
    t.evd_free_func = evd_free;
    t.ep_create_func = ep_create;
    t.ep_query_func = ep_query;
    t.ep_modify_func = ep_modify;
    t.ep_connect_func = ep_connect;
    t.ep_dup_connect_func = ep_dup_connect;
    t.ep_disconnect_func = ep_disconnect;
    t.ep_post_send_func = ep_post_send;
    t.ep_post_recv_func = ep_post_recv;
    t.ep_post_rdma_read_func = ep_post_rdma_read;
    t.ep_post_rdma_write_func = ep_post_rdma_write;
    t.ep_get_status_func = ep_get_status;
    t.ep_free_func = ep_free;
    t.lmr_create_func = lmr_create;
    t.lmr_query_func = lmr_query;
    t.lmr_free_func = lmr_free;
    t.rmr_create_func = rmr_create;
    t.rmr_query_func = rmr_query;
    t.rmr_bind_func = rmr_bind;
    t.rmr_free_func = rmr_free;
    t.psp_create_func = psp_create;
    t.psp_query_func = psp_query;
    t.psp_free_func = psp_free;
    t.rsp_create_func = rsp_create;
    t.rsp_query_func = rsp_query;
    t.rsp_free_func = rsp_free;
    t.pz_create_func = pz_create;
    t.pz_query_func = pz_query;
    t.pz_free_func = pz_free;
    t.psp_create_any_func = psp_create_any;
    t.ep_reset_func = ep_reset;
    t.evd_set_unwaitable_func = evd_set_unwaitable;
    t.evd_clear_unwaitable_func = evd_clear_unwaitable;
    t.lmr_sync_rdma_read_func = lmr_sync_rdma_read;
    t.lmr_sync_rdma_write_func = lmr_sync_rdma_write;
    t.ep_create_with_srq_func = ep_create_with_srq;
    t.ep_recv_query_func = ep_recv_query;
    t.ep_set_watermark_func = ep_set_watermark;
    t.srq_create_func = srq_create;
    t.srq_free_func = srq_free;
    t.srq_post_recv_func = srq_post_recv;
    t.srq_query_func = srq_query;
    t.srq_resize_func = srq_resize;
    t.srq_set_lw_func = srq_set_lw;
    t.csp_create_func = csp_create;
    t.csp_query_func = csp_query;
    t.csp_free_func = csp_free;
    t.ep_common_connect_func = ep_common_connect;
    t.rmr_create_for_ep_func = rmr_create_for_ep;
    t.ep_post_send_with_invalidate_func = ep_post_send_with_invalidate;
    t.ep_post_rdma_read_to_rmr_func = ep_post_rdma_read_to_rmr;
    t.cno_fd_create_func = cno_fd_create;
    t.cno_trigger_func = cno_trigger;
    t.ia_ha_related_func = ia_ha_related;
#ifdef DAT_EXTENSIONS
    t.handle_extendedop_func = ib_extension_op;
#endif
}

// ia_params: the RNIC (a name or an address) as the first word; nothing else is defined yet.
void parse_params(Provider &p, const char *instance_data) {
    if (instance_data == nullptr) return;
    std::istringstream in(instance_data);
    std::string word;
    if (in >> word) p.rnic = word;
    std::string extra;
    if (in >> extra) {
        p.params_error = "ia_params \"" + std::string(instance_data) +
                         "\" has words after the RNIC; only the RNIC's name or address is defined";
    }
}

}  // namespace

DAT_IA_HANDLE public_ia(const Ia *ia) noexcept {
    // libdat2 gives the consumer an index into its own table, not our handle: queries must answer with that index
    // (the consumer compares it with what dat_ia_open gave it). It is found once, after dat_ia_open returned.
    if (ia->public_handle != nullptr) return ia->public_handle;
    for (uintptr_t i = 1; i <= 65536; ++i) {
        DAT_IA_HANDLE provider_handle = nullptr;
        const auto candidate = reinterpret_cast<DAT_IA_HANDLE>(i);
        if (dats_get_ia_handle(candidate, &provider_handle) != DAT_SUCCESS) continue;
        if (provider_handle == ia->dat<DAT_IA_HANDLE>()) {
            const_cast<Ia *>(ia)->public_handle = candidate;
            return candidate;
        }
    }
    return ia->dat<DAT_IA_HANDLE>();  // opened without libdat2 (a test calling the table directly)
}

rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer() {
    static std::mutex mutex;
    static std::weak_ptr<ual::AccessLayer> shared;  // alive while an IA holds it
    std::lock_guard lock(mutex);
    if (auto al = shared.lock()) return al;
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;  // $OPENRDMA_EMBEDDED_CONFIG runs a kAL in this process
    auto al = ual::AccessLayer::open(o);
    if (!al) return al.error();
    shared = *al;
    return *al;
}

DAT_RETURN ia_open(const DAT_NAME_PTR name, DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle) {
    if (name == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (async_evd == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (ia_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (async_qlen < 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Provider *provider = nullptr;
    {
        std::lock_guard lock(g_providers_mutex);
        for (Provider &p : g_providers) {
            if (p.ia_name == name) provider = &p;
        }
    }
    if (provider == nullptr) return DAT_ERROR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    if (!provider->params_error.empty()) {
        RDMA_LOG_ERROR("dapl", "dat_ia_open(%s): %s", name, provider->params_error.c_str());
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    if (*async_evd != DAT_HANDLE_NULL && *async_evd != DAT_EVD_ASYNC_EXISTS) {
        // An EVD of another IA cannot be this IA's async EVD.
        return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    }
    return open_ia(*provider, async_qlen, async_evd, ia_handle);
}

}  // namespace dapl

using namespace dapl;

/** @brief libdat2 calls this for each dat.conf entry naming this library: register the entry as a provider. */
DAPL_EXPORT void DAT_API dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data) {
    if (info == nullptr) return;
    Provider *p;
    {
        std::lock_guard lock(g_providers_mutex);
        try {
            p = &g_providers.emplace_back();
            p->ia_name = info->ia_name;
        } catch (...) {
            return;
        }
    }
    p->info = *info;
    parse_params(*p, instance_data);
    fill_table(p->table);
    p->table.device_name = p->ia_name.c_str();
    p->table.extension = nullptr;
    if (DAT_RETURN st = dat_registry_add_provider(&p->table, info); st != DAT_SUCCESS) {
        RDMA_LOG_ERROR("dapl", "dat_registry_add_provider(%s) failed: 0x%x", info->ia_name, st);
    }
}

/** @brief libdat2 calls this when the entry's provider is unloaded. */
DAPL_EXPORT void DAT_API dat_provider_fini(const DAT_PROVIDER_INFO *info) {
    if (info == nullptr) return;
    std::lock_guard lock(g_providers_mutex);
    for (Provider &p : g_providers) {
        if (p.ia_name == info->ia_name) (void)dat_registry_remove_provider(&p.table, info);
    }
    // The entries stay: a handle that outlives its provider must still dispatch somewhere that answers.
}

/** @brief The extensions this provider supports: OFED's IB extensions over RFC 7306 (ib_extensions.cpp). */
DAPL_EXPORT DAT_RETURN DAT_API dapl_extensions(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args) {
    return ib_extension_op(handle, op, args);
}
