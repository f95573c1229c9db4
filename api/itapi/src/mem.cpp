// IT-API memory: LMRs over the access layer's regions, RMRs over its windows.
#include <cstring>

#include "common.hpp"
#include "failure.hpp"

namespace itapi {
namespace {

constexpr uint32_t kLmrFlags = IT_LMR_FLAG_NONE | IT_LMR_FLAG_SHARED | IT_LMR_FLAG_NONCOHERENT | IT_LMR_FLAG_NON_SHAREABLE;

// Checks and registers [addr, addr + length) for @p pz on behalf of IT-API call @p call; the region or the IT-API
// status.
it_status_t register_region(const char *call, Pz *pz, void *addr, it_length_t length, it_addr_mode_t mode,
                            it_mem_priv_t privs, std::shared_ptr<ual::MemoryRegion> &out) {
    forget_failure();
    const ri_rnic_attr_t &r = pz->ia->attr;
    if (addr == nullptr) return IT_ERR_INVALID_ADDRESS;
    if (length == 0) return IT_ERR_INVALID_LENGTH;
    if (length > r.max_mr_size) return IT_ERR_RESOURCE_LMR_LENGTH;
    if (!valid_privs(privs)) return IT_ERR_INVALID_PRIVS;
    if ((privs & IT_PRIV_ATOMIC) && !(r.caps & RI_CAP_ATOMICS)) return IT_ERR_INVALID_PRIVS;
    if (mode != IT_ADDR_MODE_ABSOLUTE && mode != IT_ADDR_MODE_RELATIVE) return IT_ERR_INVALID_ADDR_MODE;
    if (mode == IT_ADDR_MODE_RELATIVE && !(r.caps & RI_CAP_ZERO_BASED)) return IT_ERR_INVALID_ADDR_MODE;
    uint32_t access = access_of(privs) | RI_ACCESS_MW_BIND;
    if (mode == IT_ADDR_MODE_RELATIVE) access |= RI_ACCESS_ZERO_BASED;
    auto mr = pz->pz->register_memory(addr, length, access);
    if (!mr) {
        const int c = mr.error().code();
        return failed(call, mr.error(), c == RI_EFAULT ? IT_ERR_INVALID_ADDRESS : from_ri(c, IT_ERR_RESOURCES));
    }
    out = std::move(*mr);
    return IT_SUCCESS;
}

void set_region(Lmr *l, std::shared_ptr<ual::MemoryRegion> mr) {
    Ia *ia = l->ia;
    if (l->rkey != 0) ia->stags.erase(l->rkey);
    l->mr = std::move(mr);
    l->lkey = l->mr->keys().lkey;
    l->rkey = l->mr->keys().rkey;
    l->base = l->mode == IT_ADDR_MODE_RELATIVE ? 0 : reinterpret_cast<uint64_t>(l->addr);
    ia->stags[l->rkey] = l->handle;
}

}  // namespace
}  // namespace itapi

using namespace itapi;

ITAPI_EXPORT it_status_t it_lmr_create21(it_pz_handle_t pz_handle, void *addr, it_iobl_t *iobl, it_length_t length,
                                         it_addr_mode_t addr_mode, it_mem_priv_t privs, it_lmr_flag_t flags,
                                         uint32_t shared_id, it_lmr_handle_t *lmr_handle, it_rmr_context_t *rmr_context) {
    forget_failure();
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    if (lmr_handle == nullptr) return IT_ERR_FAULT;
    if (iobl != nullptr) return addr != nullptr ? IT_ERR_INVALID_IOBL : IT_ERR_PRIV_OPS_UNAVAILABLE;  // I/O lists: kernel only
    if ((flags & ~kLmrFlags) != 0) return IT_ERR_INVALID_FLAGS;
    // A shared LMR whose shared_id no other shared LMR of the IA carries yet is an ordinary registration that later
    // ones could share; sharing an existing one's registration is not offered (listed in README).
    if (flags & IT_LMR_FLAG_SHARED) {
        std::lock_guard lock(pz->ia->mutex);
        for (const auto &[p, o] : pz->ia->objects) {
            const auto *other = o->type == IT_HANDLE_TYPE_LMR ? static_cast<const Lmr *>(o.get()) : nullptr;
            if (other != nullptr && (other->flags & IT_LMR_FLAG_SHARED) != 0 && other->shared_id == shared_id) {
                return IT_ERR_OP_NOT_SUPPORTED;
            }
        }
    }
    std::shared_ptr<ual::MemoryRegion> mr;
    if (it_status_t st = register_region("it_lmr_create", pz, addr, length, addr_mode, privs, mr); st != IT_SUCCESS) {
        return st;
    }
    Ia *ia = pz->ia;
    std::lock_guard lock(ia->mutex);
    Lmr *l = make_child<Lmr>(ia);
    if (l == nullptr) return IT_ERR_RESOURCES;
    l->pz = pz;
    l->addr = addr;
    l->length = length;
    l->privs = privs;
    l->flags = flags;
    l->mode = addr_mode;
    l->shared_id = shared_id;
    set_region(l, std::move(mr));
    ++pz->users;
    if (rmr_context != nullptr) *rmr_context = l->rkey;
    *lmr_handle = to_handle<it_lmr_handle_t>(l);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_lmr_create20(it_pz_handle_t pz_handle, void *addr, it_length_t length,
                                         it_addr_mode_t addr_mode, it_mem_priv_t privs, it_lmr_flag_t flags,
                                         uint32_t shared_id, it_lmr_handle_t *lmr_handle, it_rmr_context_t *rmr_context) {
    return it_lmr_create21(pz_handle, addr, nullptr, length, addr_mode, privs, flags, shared_id, lmr_handle, rmr_context);
}

ITAPI_EXPORT it_status_t it_lmr_create10(it_pz_handle_t pz_handle, void *addr, it_length_t length, it_mem_priv_t privs,
                                         it_lmr_flag_t flags, uint32_t shared_id, it_lmr_handle_t *lmr_handle,
                                         it_rmr_context_t *rmr_context) {
    return it_lmr_create21(pz_handle, addr, nullptr, length, IT_ADDR_MODE_ABSOLUTE, privs, flags, shared_id, lmr_handle,
                           rmr_context);
}

ITAPI_EXPORT it_status_t it_lmr_create_unlinked(it_pz_handle_t pz_handle, size_t, it_lmr_flag_t, uint32_t,
                                                it_lmr_handle_t *) {
    // LMR links are for privileged consumers (it_ia_info_t::lmr_link_support).
    return lookup<Pz>(pz_handle) == nullptr ? IT_ERR_INVALID_PZ : IT_ERR_PRIV_OPS_UNAVAILABLE;
}

ITAPI_EXPORT it_status_t it_lmr_link(it_lmr_handle_t lmr_handle, const void *, const it_iobl_t *, it_length_t,
                                     it_addr_mode_t, it_mem_priv_t, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t,
                                     it_rmr_context_t *) {
    return lookup<Lmr>(lmr_handle) == nullptr ? IT_ERR_INVALID_LMR : IT_ERR_PRIV_OPS_UNAVAILABLE;
}

ITAPI_EXPORT it_status_t it_lmr_unlink(it_lmr_handle_t lmr_handle, it_ep_handle_t, it_dto_cookie_t, it_dto_flags_t) {
    return lookup<Lmr>(lmr_handle) == nullptr ? IT_ERR_INVALID_LMR : IT_ERR_PRIV_OPS_UNAVAILABLE;
}

ITAPI_EXPORT it_status_t it_lmr_free(it_lmr_handle_t lmr_handle) {
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return IT_ERR_INVALID_LMR;
    Ia *ia = l->ia;
    std::lock_guard lock(ia->mutex);
    if (l->users != 0) return IT_ERR_LMR_BUSY;  // RMRs linked to it
    if (rdma::Status st = l->mr->close(); !st.ok()) return st.code() == RI_EBUSY ? IT_ERR_LMR_BUSY : from_ri(st.code(), IT_ERR_RESOURCES);
    ia->stags.erase(l->rkey);
    --l->pz->users;
    destroy_child(ia, l);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_lmr_query(it_lmr_handle_t lmr_handle, it_lmr_param_mask_t mask, it_lmr_param_t *params) {
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return IT_ERR_INVALID_LMR;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0x7fffu) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(l->ia->mutex);
    std::memset(params, 0, sizeof *params);
    params->ia = to_handle<it_ia_handle_t>(l->ia);
    params->pz = to_handle<it_pz_handle_t>(l->pz);
    params->addr = l->addr;
    params->length = l->length;
    params->privs = l->privs;
    params->flags = l->flags;
    params->shared_id = l->shared_id;
    params->rmr_context = l->rkey;
    params->actual_addr = l->addr;
    params->actual_length = l->length;
    if (auto q = l->mr->query()) {
        params->actual_length = q->length;
        if (l->mode == IT_ADDR_MODE_ABSOLUTE) params->actual_addr = reinterpret_cast<void *>(q->addr);
    }
    params->addr_mode = l->mode;
    params->linked = IT_TRUE;
    params->iobl_num_elts = 0;
    params->iobl_type = static_cast<it_iobl_type_t>(0);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_lmr_modify(it_lmr_handle_t lmr_handle, it_lmr_param_mask_t mask, const it_lmr_param_t *params) {
    forget_failure();
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return IT_ERR_INVALID_LMR;
    if (params == nullptr) return IT_ERR_FAULT;
    constexpr uint32_t kModifiable = IT_LMR_PARAM_PZ | IT_LMR_PARAM_ADDR | IT_LMR_PARAM_LENGTH | IT_LMR_PARAM_MEM_PRIV;
    if ((mask & ~kModifiable) != 0 || mask == 0) return IT_ERR_INVALID_MASK;
    Ia *ia = l->ia;
    Pz *pz = l->pz;
    if (mask & IT_LMR_PARAM_PZ) {
        pz = lookup<Pz>(params->pz);
        if (pz == nullptr || pz->ia != ia) return IT_ERR_INVALID_PZ;
    }
    void *addr = (mask & IT_LMR_PARAM_ADDR) ? params->addr : l->addr;
    const it_length_t length = (mask & IT_LMR_PARAM_LENGTH) ? params->length : l->length;
    const it_mem_priv_t privs = (mask & IT_LMR_PARAM_MEM_PRIV) ? params->privs : l->privs;
    std::lock_guard lock(ia->mutex);
    if (l->users != 0) return IT_ERR_LMR_BUSY;
    // A new registration replaces the old one (the RMR context changes: query it again), as Reregister would.
    std::shared_ptr<ual::MemoryRegion> mr;
    if (it_status_t st = register_region("it_lmr_modify", pz, addr, length, l->mode, privs, mr); st != IT_SUCCESS) {
        return st;
    }
    (void)l->mr->close();
    if (pz != l->pz) {
        --l->pz->users;
        ++pz->users;
        l->pz = pz;
    }
    l->addr = addr;
    l->length = length;
    l->privs = privs;
    set_region(l, std::move(mr));
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_lmr_flush_to_mem(const it_lmr_triplet_t *local_segments, size_t num_segments) {
    if (num_segments > 0 && local_segments == nullptr) return IT_ERR_FAULT;
    for (size_t i = 0; i < num_segments; ++i) {
        if (lookup<Lmr>(local_segments[i].lmr) == nullptr) return IT_ERR_INVALID_LMR;
    }
    return IT_SUCCESS;  // softrnic's memory is coherent: the RNIC reads and writes the consumer's own pages
}

ITAPI_EXPORT it_status_t it_lmr_refresh_from_mem(const it_lmr_triplet_t *local_segments, size_t num_segments) {
    return it_lmr_flush_to_mem(local_segments, num_segments);
}

ITAPI_EXPORT it_status_t it_rmr_create20(it_pz_handle_t pz_handle, it_rmr_type_t rmr_type, it_rmr_handle_t *rmr_handle) {
    forget_failure();
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    if (rmr_handle == nullptr) return IT_ERR_FAULT;
    if (rmr_type == IT_RMR_TYPE_DEFAULT) rmr_type = IT_RMR_TYPE_NARROW;
    if (rmr_type != IT_RMR_TYPE_NARROW && rmr_type != IT_RMR_TYPE_WIDE) return IT_ERR_INVALID_RMR_TYPE;
    const uint32_t cap = rmr_type == IT_RMR_TYPE_NARROW ? RI_CAP_MW_TYPE2 : RI_CAP_MW_TYPE1;
    if (!(pz->ia->attr.caps & cap)) return IT_ERR_OP_NOT_SUPPORTED;
    auto mw = pz->pz->allocate_window(rmr_type == IT_RMR_TYPE_NARROW ? RI_MW_TYPE_2 : RI_MW_TYPE_1);
    if (!mw) return failed("it_rmr_create", mw.error(), from_ri(mw.error().code(), IT_ERR_RESOURCES));
    Ia *ia = pz->ia;
    std::lock_guard lock(ia->mutex);
    Rmr *r = make_child<Rmr>(ia);
    if (r == nullptr) return IT_ERR_RESOURCES;
    r->mw = std::move(*mw);
    r->pz = pz;
    r->rmr_type = rmr_type;
    ++pz->users;
    *rmr_handle = to_handle<it_rmr_handle_t>(r);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_rmr_create10(it_pz_handle_t pz_handle, it_rmr_handle_t *rmr_handle) {
    return it_rmr_create20(pz_handle, IT_RMR_TYPE_DEFAULT, rmr_handle);
}

ITAPI_EXPORT it_status_t it_rmr_free(it_rmr_handle_t rmr_handle) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return IT_ERR_INVALID_RMR;
    Ia *ia = r->ia;
    std::lock_guard lock(ia->mutex);
    if (r->lmr != nullptr) --r->lmr->users;
    ia->stags.erase(r->mw->rkey());
    --r->pz->users;
    destroy_child(ia, r);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_rmr_query(it_rmr_handle_t rmr_handle, it_rmr_param_mask_t mask, it_rmr_param_t *params) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return IT_ERR_INVALID_RMR;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0x7ffu) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(r->ia->mutex);
    std::memset(params, 0, sizeof *params);
    params->ia = to_handle<it_ia_handle_t>(r->ia);
    params->pz = to_handle<it_pz_handle_t>(r->pz);
#ifdef ITAPI_ENABLE_V10_BINDINGS
    params->bound = r->linked ? IT_TRUE : IT_FALSE;
#else
    params->linked = r->linked ? IT_TRUE : IT_FALSE;
#endif
    params->lmr = to_handle<it_lmr_handle_t>(r->lmr);
    params->addr = r->addr;
    params->length = r->length;
    params->privs = r->privs;
    params->rmr_context = r->mw->rkey();
    params->type = r->rmr_type;
    params->addr_mode = r->mode;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_rmr_link(it_rmr_handle_t rmr_handle, it_lmr_handle_t lmr_handle, void *addr,
                                     it_length_t length, it_addr_mode_t addr_mode, it_mem_priv_t privs,
                                     it_ep_handle_t ep_handle, it_dto_cookie_t cookie, it_dto_flags_t dto_flags,
                                     it_rmr_context_t *rmr_context) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return IT_ERR_INVALID_RMR;
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return IT_ERR_INVALID_LMR;
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if (rmr_context == nullptr) return IT_ERR_FAULT;
    if (l->pz != r->pz || ep->pz != r->pz) return IT_ERR_INVALID_PZ;
    if ((dto_flags & ~kAllDtoFlags) != 0) return IT_ERR_INVALID_DTO_FLAGS;
    if (!valid_privs(privs) || (privs & ~static_cast<uint32_t>(IT_PRIV_REMOTE)) != 0) return IT_ERR_INVALID_PRIVS;
    if (addr_mode != l->mode) return IT_ERR_INVALID_ADDR_MODE;
    const uint64_t start = addr_mode == IT_ADDR_MODE_RELATIVE ? reinterpret_cast<uint64_t>(addr)
                                                              : reinterpret_cast<uint64_t>(addr);
    const uint64_t lmr_start = l->mode == IT_ADDR_MODE_RELATIVE ? 0 : reinterpret_cast<uint64_t>(l->addr);
    if (start < lmr_start || length > l->length || start - lmr_start > l->length - length) return IT_ERR_RANGE;
    if (ep->state->load() != IT_EP_STATE_CONNECTED) return IT_ERR_INVALID_EP_STATE;
    ri_stag_t rkey = r->mw->rkey();
    if (r->rmr_type == IT_RMR_TYPE_WIDE) {
        // A wide RMR (type 1 window) is bound by the Bind Memory Window verb.
        if (ri_status_t rc = ep->verbs->bind_mw(ep->qp, r->mw->handle(), l->mr->handle(), start, length,
                                                access_of(privs), &rkey);
            rc != RI_OK) {
            return from_ri(rc, IT_ERR_INVALID_EP_STATE);
        }
    } else {
        ri_send_wr_t wr{};
        wr.wr_id = cookie;
        wr.opcode = RI_WR_BIND_MW;
        wr.flags = send_flags_of(dto_flags);
        wr.u.bind.mw = r->mw->handle();
        wr.u.bind.mr = l->mr->handle();
        wr.u.bind.addr = start;
        wr.u.bind.length = length;
        wr.u.bind.access = access_of(privs);
        uint32_t posted = 0;
        if (ri_status_t rc = ep->verbs->post_send(ep->qp, &wr, 1, &posted); rc != RI_OK) {
            return rc == RI_EAGAIN ? IT_ERR_TOO_MANY_POSTS : from_ri(rc, IT_ERR_INVALID_EP_STATE);
        }
    }
    std::lock_guard lock(r->ia->mutex);
    if (r->lmr != nullptr) --r->lmr->users;
    r->lmr = l;
    ++l->users;
    r->addr = addr;
    r->length = length;
    r->privs = privs;
    r->mode = addr_mode;
    r->linked = true;
    r->ia->stags[rkey] = r->handle;
    *rmr_context = rkey;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_rmr_bind10(it_rmr_handle_t rmr_handle, it_lmr_handle_t lmr_handle, void *addr,
                                       it_length_t length, it_mem_priv_t privs, it_ep_handle_t ep_handle,
                                       it_dto_cookie_t cookie, it_dto_flags_t dto_flags, it_rmr_context_t *rmr_context) {
    return it_rmr_link(rmr_handle, lmr_handle, addr, length, IT_ADDR_MODE_ABSOLUTE, privs, ep_handle, cookie, dto_flags,
                       rmr_context);
}

ITAPI_EXPORT it_status_t it_rmr_unlink(it_rmr_handle_t rmr_handle, it_ep_handle_t ep_handle, it_dto_cookie_t cookie,
                                       it_dto_flags_t dto_flags) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return IT_ERR_INVALID_RMR;
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if ((dto_flags & ~kAllDtoFlags) != 0) return IT_ERR_INVALID_DTO_FLAGS;
    if (!r->linked) return IT_ERR_INVALID_RMR;
    if (ep->state->load() != IT_EP_STATE_CONNECTED) return IT_ERR_INVALID_EP_STATE;
    ri_send_wr_t wr{};
    wr.wr_id = cookie;
    wr.opcode = RI_WR_LOCAL_INV;
    wr.flags = send_flags_of(dto_flags);
    wr.inv_stag = r->mw->rkey();
    uint32_t posted = 0;
    if (ri_status_t rc = ep->verbs->post_send(ep->qp, &wr, 1, &posted); rc != RI_OK) {
        return rc == RI_EAGAIN ? IT_ERR_TOO_MANY_POSTS : from_ri(rc, IT_ERR_INVALID_EP_STATE);
    }
    std::lock_guard lock(r->ia->mutex);
    if (r->lmr != nullptr) --r->lmr->users;
    r->lmr = nullptr;
    r->linked = false;
    return IT_SUCCESS;
}
