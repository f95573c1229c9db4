// DAT memory: LMRs over the access layer's regions, RMRs over its memory windows (type 2 windows, bound by a Bind
// Memory Window work request on the EP's send queue, completing as RMR bind events), and shared receive queues.
#include <cstring>

#include "dapl.hpp"

namespace dapl {
namespace {

// With the IB extensions' remote atomic right (DAT_IB_MEM_PRIV_REMOTE_ATOMIC, the first extension bit).
constexpr uint32_t kAllPrivs = DAT_MEM_PRIV_ALL_FLAG | DAT_MEM_PRIV_EXTENSION_BASE;

DAT_RETURN bad_lmr() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR); }
DAT_RETURN bad_rmr() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_RMR); }
DAT_RETURN bad_srq() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ); }

// The tagged offset where @p l starts (0 for zero-based addressing).
uint64_t lmr_base(const Lmr *l) noexcept {
    return l->va_type == DAT_VA_TYPE_ZB ? 0 : reinterpret_cast<uint64_t>(l->addr);
}

}  // namespace

DAT_RETURN register_lmr(Ia *ia, Pz *pz, DAT_MEM_TYPE type, const DAT_REGION_DESCRIPTION &region, void *addr,
                        DAT_VLEN length, DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va_type, Lmr **out) {
    if (length == 0) return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    if ((privs & ~kAllPrivs) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (va_type != DAT_VA_TYPE_VA && va_type != DAT_VA_TYPE_ZB) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG7);
    if (va_type == DAT_VA_TYPE_ZB && !(ia->attr.caps & RI_CAP_ZERO_BASED)) return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (length > ia->attr.max_mr_size) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION);
    uint32_t access = access_of(privs);
    if (va_type == DAT_VA_TYPE_ZB) access |= RI_ACCESS_ZERO_BASED;
    // Windows bound to the region (RMRs) need the region's permission.
    access |= RI_ACCESS_MW_BIND;
    Lmr *l = make_child<Lmr>(ia);
    if (l == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto mr = pz->pz->register_memory(addr, length, access);
    if (!mr && (access & RI_ACCESS_MW_BIND)) {
        access &= ~static_cast<uint32_t>(RI_ACCESS_MW_BIND);  // a provider without windows: plain regions still work
        mr = pz->pz->register_memory(addr, length, access);
    }
    if (!mr) {
        destroy_child(ia, l);
        const int c = mr.error().code();
        return failed("dat_lmr_create", mr.error(),
                      c == RI_EFAULT || c == RI_EINVAL ? DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3)
                                                       : from_ri(c, DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION)));
    }
    l->mr = std::move(*mr);
    l->pz = pz;
    l->mem_type = type;
    l->region = region;
    l->addr = addr;
    l->length = length;
    l->privs = privs;
    l->va_type = va_type;
    l->lmr_context = l->mr->keys().lkey;
    l->rmr_context = l->mr->keys().rkey;
    ++pz->users;
    *out = l;
    return DAT_SUCCESS;
}

void query_lmr(const Lmr *l, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *p) noexcept {
    (void)mask;  // every field is cheap: all are filled
    p->ia_handle = public_ia(l->ia);
    p->mem_type = l->mem_type;
    p->region_desc = l->region;
    p->length = l->length;
    p->pz_handle = l->pz->dat<DAT_PZ_HANDLE>();
    p->mem_priv = l->privs;
    p->va_type = l->va_type;
    p->lmr_context = l->lmr_context;
    p->rmr_context = l->rmr_context;
    p->registered_size = l->length;
    p->registered_address = lmr_base(l);
}

#ifndef OPENRDMA_KDAPL
DAT_RETURN lmr_create(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                      DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va_type,
                      DAT_LMR_HANDLE *lmr_handle, DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                      DAT_VLEN *registered_length, DAT_VADDR *registered_address) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr || pz->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (lmr_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    void *addr = nullptr;
    switch (type) {
        case DAT_MEM_TYPE_VIRTUAL:
            if (length == 0) return DAT_ERROR(DAT_LENGTH_ERROR, 0);  // before the address: FFT "mem" case 2
            addr = region.for_va;
            if (addr == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
            break;
        case DAT_MEM_TYPE_LMR: {
            // The memory of another LMR, registered once more (in this PZ, with these rights).
            Lmr *other = lookup<Lmr>(region.for_lmr_handle);
            if (other == nullptr || other->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
            addr = other->addr;
            length = other->length;
            break;
        }
        case DAT_MEM_TYPE_SHARED_VIRTUAL: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // see README
        default: return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    std::lock_guard lock(ia->mutex);
    Lmr *l = nullptr;
    if (DAT_RETURN st = register_lmr(ia, pz, type, region, addr, length, privs, va_type, &l); st != DAT_SUCCESS) {
        return st;
    }
    *lmr_handle = l->dat<DAT_LMR_HANDLE>();
    if (lmr_context != nullptr) *lmr_context = l->lmr_context;
    if (rmr_context != nullptr) *rmr_context = l->rmr_context;
    if (registered_length != nullptr) *registered_length = l->length;
    if (registered_address != nullptr) *registered_address = lmr_base(l);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_query(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *p) {
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return bad_lmr();
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_LMR_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(l->ia->mutex);
    query_lmr(l, mask, p);
    return DAT_SUCCESS;
}
#endif

DAT_RETURN lmr_free(DAT_LMR_HANDLE lmr_handle) {
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return bad_lmr();
    Ia *ia = l->ia;
    std::lock_guard lock(ia->mutex);
    if (l->users != 0) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE);  // RMRs bound to it
    if (rdma::Status st = l->mr->close(); !st.ok()) {
        return st.code() == RI_EBUSY ? DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_LMR_IN_USE)
                                     : from_ri(st.code(), DAT_ERROR(DAT_INTERNAL_ERROR, 0));
    }
    --l->pz->users;
    destroy_child(ia, l);
    return DAT_SUCCESS;
}

namespace {

DAT_RETURN check_triplets(DAT_IA_HANDLE ia_handle, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (iov == nullptr && n > 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return DAT_SUCCESS;
}

}  // namespace

// The RNICs behind RNIC-PI place data coherently with the CPU (softrnic writes through the CPU): nothing to flush.
DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return check_triplets(ia, iov, n);
}

DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *iov, DAT_VLEN n) {
    return check_triplets(ia, iov, n);
}

// --- RMR -------------------------------------------------------------------------------------------------------------

namespace {

DAT_RETURN make_rmr(DAT_PZ_HANDLE pz_handle, DAT_RMR_HANDLE *rmr_handle, bool for_ep) {
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (rmr_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    Ia *ia = pz->ia;
    if (!(ia->attr.caps & RI_CAP_MW_TYPE2)) return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    std::lock_guard lock(ia->mutex);
    Rmr *r = make_child<Rmr>(ia);
    if (r == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto mw = pz->pz->allocate_window(RI_MW_TYPE_2);
    if (!mw) {
        destroy_child(ia, r);
        return failed("dat_rmr_create", mw.error(),
                      from_ri(mw.error().code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY_REGION)));
    }
    r->mw = std::move(*mw);
    r->pz = pz;
    r->rmr_context = r->mw->rkey();
    r->scope_ep = nullptr;
    (void)for_ep;  // a type 2 window is bound through one EP at a time either way
    ++pz->users;
    *rmr_handle = r->dat<DAT_RMR_HANDLE>();
    return DAT_SUCCESS;
}

}  // namespace

DAT_RETURN rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return make_rmr(pz, rmr, false); }
DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr) { return make_rmr(pz, rmr, true); }

DAT_RETURN rmr_query(DAT_RMR_HANDLE rmr_handle, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *p) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return bad_rmr();
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_RMR_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(r->ia->mutex);
    p->ia_handle = public_ia(r->ia);
    p->pz_handle = r->pz->dat<DAT_PZ_HANDLE>();
    p->lmr_triplet = r->triplet;
    p->mem_priv = r->privs;
    p->rmr_context = r->rmr_context;
    p->rmr_scope = DAT_RMR_SCOPE_EP;
    p->va_type = r->va_type;
    return DAT_SUCCESS;
}

DAT_RETURN rmr_bind(DAT_RMR_HANDLE rmr_handle, DAT_LMR_HANDLE lmr_handle, const DAT_LMR_TRIPLET *triplet,
                    DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep_handle, DAT_RMR_COOKIE cookie,
                    DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *rmr_context) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return bad_rmr();
    Lmr *l = nullptr;
    if (lmr_handle != DAT_HANDLE_NULL) {
        l = lookup<Lmr>(lmr_handle);
        if (l == nullptr || l->ia != r->ia) return bad_lmr();
        if (triplet == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr || ep->ia != r->ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP);
    if ((privs & ~static_cast<uint32_t>(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG |
                                        DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)) != 0) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    }
    if ((flags & ~static_cast<uint32_t>(DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                                        DAT_COMPLETION_BARRIER_FENCE_FLAG)) != 0) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG8);
    }
    if (l != nullptr) {
        if (l->pz != r->pz || ep->pz != r->pz) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_PZ);
        if (va_type != l->va_type) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        const uint64_t base = lmr_base(l);
        const uint64_t start = triplet->virtual_address;
        const uint64_t len = triplet->segment_length;
        if (start < base || len > l->length || start - base > l->length - len) {
            return DAT_ERROR(DAT_LENGTH_ERROR, 0);
        }
    }
    if (ep->state->load() != DAT_EP_STATE_CONNECTED || !ep->ep) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY);
    const bool signaled = !(flags & DAT_COMPLETION_SUPPRESS_FLAG);
    ri_send_wr_t wr{};
    {
        std::lock_guard lock(ep->bind_mutex);
        wr.wr_id = ep->next_bind++;
        if (signaled) ep->binds.emplace(wr.wr_id, std::make_pair(rmr_handle, cookie.as_64));
    }
    wr.opcode = RI_WR_BIND_MW;
    wr.flags = signaled ? static_cast<uint32_t>(RI_SEND_SIGNALED) : 0u;
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) wr.flags |= RI_SEND_READ_FENCE;
    wr.u.bind.mw = r->mw->handle();
    wr.u.bind.mr = l != nullptr ? l->mr->handle() : nullptr;
    wr.u.bind.addr = l != nullptr ? triplet->virtual_address : 0;
    wr.u.bind.length = l != nullptr ? triplet->segment_length : 0;  // 0 unbinds
    wr.u.bind.access = access_of(privs) & (RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_LOCAL_WRITE);
    uint32_t posted = 0;
    if (ri_status_t rc = ep->verbs->post_send(ep->qp, &wr, 1, &posted); rc != RI_OK) {
        std::lock_guard lock(ep->bind_mutex);
        ep->binds.erase(wr.wr_id);
        return rc == RI_EAGAIN || rc == RI_ENOSPC ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP)
                                                  : from_ri(rc, DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_NOTREADY));
    }
    std::lock_guard lock(r->ia->mutex);
    if (r->lmr != nullptr) --r->lmr->users;
    r->lmr = l;
    if (l != nullptr) ++l->users;
    r->triplet = l != nullptr ? *triplet : DAT_LMR_TRIPLET{};
    r->privs = privs;
    r->va_type = va_type;
    r->scope_ep = ep;
    if (rmr_context != nullptr) *rmr_context = r->rmr_context;
    return DAT_SUCCESS;
}

DAT_RETURN rmr_free(DAT_RMR_HANDLE rmr_handle) {
    Rmr *r = lookup<Rmr>(rmr_handle);
    if (r == nullptr) return bad_rmr();
    Ia *ia = r->ia;
    std::lock_guard lock(ia->mutex);
    if (r->lmr != nullptr) --r->lmr->users;
    --r->pz->users;
    destroy_child(ia, r);
    return DAT_SUCCESS;
}

// --- SRQ -------------------------------------------------------------------------------------------------------------

DAT_RETURN srq_create(DAT_IA_HANDLE ia_handle, DAT_PZ_HANDLE pz_handle, DAT_SRQ_ATTR *attr, DAT_SRQ_HANDLE *srq_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr || pz->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (attr == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (srq_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (!(ia->attr.caps & RI_CAP_SRQ)) return DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0);
    if (attr->max_recv_dtos <= 0 || static_cast<uint64_t>(attr->max_recv_dtos) > ia->attr.max_srq_wr ||
        attr->max_recv_iov <= 0 || static_cast<uint64_t>(attr->max_recv_iov) > ia->attr.max_srq_sge ||
        attr->low_watermark < 0 || attr->low_watermark > attr->max_recv_dtos) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    }
    std::lock_guard lock(ia->mutex);
    Srq *s = make_child<Srq>(ia);
    if (s == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto made = pz->pz->create_srq(static_cast<uint32_t>(attr->max_recv_dtos), static_cast<uint32_t>(attr->max_recv_iov),
                                   static_cast<uint32_t>(attr->low_watermark), reinterpret_cast<uint64_t>(s->handle));
    if (!made) {
        destroy_child(ia, s);
        return failed("dat_srq_create", made.error(),
                      from_ri(made.error().code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ)));
    }
    s->srq = std::move(*made);
    s->pz = pz;
    s->verbs = &ia->adapter->verbs();
    s->provider = s->srq->handle();
    s->max_recv_dtos = attr->max_recv_dtos;
    s->max_recv_iov = attr->max_recv_iov;
    s->low_watermark = attr->low_watermark;
    if (auto q = s->srq->query()) {
        s->max_recv_dtos = static_cast<DAT_COUNT>(q->max_wr);
        attr->max_recv_dtos = s->max_recv_dtos;
    }
    ++pz->users;
    *srq_handle = s->dat<DAT_SRQ_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN srq_free(DAT_SRQ_HANDLE srq_handle) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return bad_srq();
    Ia *ia = s->ia;
    std::lock_guard lock(ia->mutex);
    if (s->users != 0) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_SRQ_IN_USE);
    --s->pz->users;
    destroy_child(ia, s);
    return DAT_SUCCESS;
}

DAT_RETURN srq_query(DAT_SRQ_HANDLE srq_handle, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *p) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return bad_srq();
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_SRQ_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(s->ia->mutex);
    p->ia_handle = public_ia(s->ia);
    p->srq_state = DAT_SRQ_STATE_OPERATIONAL;
    p->pz_handle = s->pz->dat<DAT_PZ_HANDLE>();
    p->max_recv_dtos = s->max_recv_dtos;
    p->max_recv_iov = s->max_recv_iov;
    p->low_watermark = s->low_watermark;
    p->available_dto_count = std::max<int32_t>(s->posted.load(), 0);
    p->outstanding_dto_count = DAT_VALUE_UNKNOWN;
    return DAT_SUCCESS;
}

DAT_RETURN srq_resize(DAT_SRQ_HANDLE srq_handle, DAT_COUNT max_recv_dtos) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return bad_srq();
    if (max_recv_dtos <= 0 || static_cast<uint64_t>(max_recv_dtos) > s->ia->attr.max_srq_wr) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    std::lock_guard lock(s->ia->mutex);
    if (max_recv_dtos < s->posted.load()) return DAT_ERROR(DAT_INVALID_STATE, 0);
    ri_srq_attr_t a{};
    a.max_wr = static_cast<uint32_t>(max_recv_dtos);
    if (rdma::Status st = s->srq->modify(a, RI_SRQ_ATTR_MAX_WR); !st.ok()) {
        return from_ri(st.code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ));
    }
    s->max_recv_dtos = max_recv_dtos;
    if (auto q = s->srq->query()) s->max_recv_dtos = static_cast<DAT_COUNT>(q->max_wr);
    return DAT_SUCCESS;
}

DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE srq_handle, DAT_COUNT low_watermark) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return bad_srq();
    std::lock_guard lock(s->ia->mutex);
    if (low_watermark < 0 || low_watermark > s->max_recv_dtos) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ri_srq_attr_t a{};
    a.limit = static_cast<uint32_t>(low_watermark);
    if (rdma::Status st = s->srq->modify(a, RI_SRQ_ATTR_LIMIT); !st.ok()) {
        return from_ri(st.code(), DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2));
    }
    s->low_watermark = low_watermark;
    return DAT_SUCCESS;
}

}  // namespace dapl
