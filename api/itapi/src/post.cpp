// IT-API data transfer: the posting calls (straight to the provider's verbs, no lock, no allocation) and S-RQs.
#include <cstring>

#include "common.hpp"
#include "failure.hpp"

namespace itapi {
namespace {

// Gather/scatter lists longer than this are refused (IT_ERR_INVALID_NUM_SEGMENTS unless the EP allows more,
// which the RNIC's max_sge caps well below it).
constexpr size_t kMaxSegments = 32;

// Translates IT-API triplets into provider scatter/gather elements; IT_SUCCESS or the status for the first bad one.
it_status_t to_sgl(const it_lmr_triplet_t *seg, size_t n, size_t max, ri_sge_t *sgl) noexcept {
    if (n > max || n > kMaxSegments) return IT_ERR_INVALID_NUM_SEGMENTS;
    if (n > 0 && seg == nullptr) return IT_ERR_FAULT;
    for (size_t i = 0; i < n; ++i) {
        const Lmr *l = lookup<Lmr>(seg[i].lmr);
        if (l == nullptr) return IT_ERR_INVALID_LMR;
        if (seg[i].length > UINT32_MAX) return IT_ERR_INVALID_LENGTH;
        sgl[i].addr = l->mode == IT_ADDR_MODE_RELATIVE ? seg[i].addr.rel : reinterpret_cast<uint64_t>(seg[i].addr.abs);
        sgl[i].length = static_cast<uint32_t>(seg[i].length);
        sgl[i].lkey = l->lkey;
    }
    return IT_SUCCESS;
}

it_status_t post_status(ri_status_t rc) noexcept {
    switch (rc) {
        case RI_OK: return IT_SUCCESS;
        case RI_EAGAIN:
        case RI_ENOSPC: return IT_ERR_TOO_MANY_POSTS;
        case RI_ENOTCONN:
        case RI_EINVAL: return IT_ERR_INVALID_EP_STATE;
        case RI_EMSGSIZE:
        case RI_ERANGE: return IT_ERR_PAYLOAD_SIZE;
        default: return from_ri(rc, IT_ERR_INVALID_EP_STATE);
    }
}

// The checks every request-side post shares.
inline it_status_t request_ep(it_ep_handle_t h, it_dto_flags_t flags, Ep *&ep) noexcept {
    ep = lookup<Ep>(h);
    if (ep == nullptr) return IT_ERR_INVALID_EP;
    if ((flags & ~kAllDtoFlags) != 0) return IT_ERR_INVALID_DTO_FLAGS;
    return IT_SUCCESS;
}

it_status_t post_one(Ep *ep, ri_send_wr_t &wr) noexcept {
    uint32_t posted = 0;
    return post_status(ep->verbs->post_send(ep->qp, &wr, 1, &posted));
}

it_status_t send(it_ep_handle_t ep_handle, const it_lmr_triplet_t *segs, size_t n, it_dto_cookie_t cookie,
                 it_dto_flags_t flags, bool invalidate, it_rmr_context_t rmr) noexcept {
    Ep *ep;
    if (it_status_t st = request_ep(ep_handle, flags, ep); st != IT_SUCCESS) return st;
    ri_sge_t sgl[kMaxSegments];
    if (it_status_t st = to_sgl(segs, n, ep->attr.max_send_segments, sgl); st != IT_SUCCESS) return st;
    ri_send_wr_t wr;
    wr.wr_id = cookie;
    const bool se = (flags & IT_SOLICITED_WAIT_FLAG) != 0;
    wr.opcode = invalidate ? (se ? RI_WR_SEND_SE_INV : RI_WR_SEND_INV) : (se ? RI_WR_SEND_SE : RI_WR_SEND);
    wr.flags = send_flags_of(flags);
    wr.sgl = sgl;
    wr.num_sge = static_cast<uint32_t>(n);
    wr.inv_stag = static_cast<ri_stag_t>(rmr);
    wr.u.rdma.remote_addr = 0;
    wr.u.rdma.rkey = 0;
    wr.u.rdma.imm_data = 0;
    return post_one(ep, wr);
}

it_status_t rdma_op(it_ep_handle_t ep_handle, const it_lmr_triplet_t *segs, size_t n, it_dto_cookie_t cookie,
                 it_dto_flags_t flags, it_rdma_addr_t rdma_addr, it_rmr_context_t rmr, bool read) noexcept {
    Ep *ep;
    if (it_status_t st = request_ep(ep_handle, flags, ep); st != IT_SUCCESS) return st;
    ri_sge_t sgl[kMaxSegments];
    const size_t max = read ? (ep->attr.srv.rc.max_rdma_read_segments == 0 ? 1 : ep->attr.srv.rc.max_rdma_read_segments)
                            : ep->attr.max_send_segments;
    if (it_status_t st = to_sgl(segs, n, max, sgl); st != IT_SUCCESS) return st;
    ri_send_wr_t wr;
    wr.wr_id = cookie;
    wr.opcode = read ? RI_WR_RDMA_READ : RI_WR_RDMA_WRITE;
    wr.flags = send_flags_of(flags);
    wr.sgl = sgl;
    wr.num_sge = static_cast<uint32_t>(n);
    wr.inv_stag = 0;
    wr.u.rdma.remote_addr = rdma_addr;
    wr.u.rdma.rkey = static_cast<ri_stag_t>(rmr);
    wr.u.rdma.imm_data = 0;
    return post_one(ep, wr);
}

}  // namespace
}  // namespace itapi

using namespace itapi;

ITAPI_EXPORT it_status_t it_post_send(it_ep_handle_t ep_handle, const it_lmr_triplet_t *local_segments,
                                      size_t num_segments, it_dto_cookie_t cookie, it_dto_flags_t dto_flags) {
    return send(ep_handle, local_segments, num_segments, cookie, dto_flags, false, 0);
}

ITAPI_EXPORT it_status_t it_post_send_and_unlink(it_ep_handle_t ep_handle, const it_lmr_triplet_t *local_segments,
                                                 size_t num_segments, it_dto_cookie_t cookie, it_dto_flags_t dto_flags,
                                                 it_rmr_context_t rmr_context) {
    return send(ep_handle, local_segments, num_segments, cookie, dto_flags, true, rmr_context);
}

ITAPI_EXPORT it_status_t it_post_rdma_write(it_ep_handle_t ep_handle, const it_lmr_triplet_t *local_segments,
                                            size_t num_segments, it_dto_cookie_t cookie, it_dto_flags_t dto_flags,
                                            it_rdma_addr_t rdma_addr, it_rmr_context_t rmr_context) {
    return rdma_op(ep_handle, local_segments, num_segments, cookie, dto_flags, rdma_addr, rmr_context, false);
}

ITAPI_EXPORT it_status_t it_post_rdma_read(it_ep_handle_t ep_handle, const it_lmr_triplet_t *local_segments,
                                           size_t num_segments, it_dto_cookie_t cookie, it_dto_flags_t dto_flags,
                                           it_rdma_addr_t rdma_addr, it_rmr_context_t rmr_context) {
    if (dto_flags & IT_UNLINK_LOCAL_SINK) return IT_ERR_INVALID_DTO_FLAGS;  // rdma_read_local_extensions is IT_FALSE
    return rdma_op(ep_handle, local_segments, num_segments, cookie, dto_flags, rdma_addr, rmr_context, true);
}

ITAPI_EXPORT it_status_t it_post_atomic(it_ep_handle_t ep_handle, it_atomic_op_t op, uint64_t swap_or_add,
                                        uint64_t compare, const it_lmr_triplet_t *result, it_dto_cookie_t cookie,
                                        it_dto_flags_t dto_flags, it_rdma_addr_t rdma_addr,
                                        it_rmr_context_t rmr_context) {
    Ep *ep;
    if (it_status_t st = request_ep(ep_handle, dto_flags, ep); st != IT_SUCCESS) return st;
    if (op != IT_COMPARE_AND_SWAP && op != IT_FETCH_AND_ADD) return IT_ERR_INVALID_ATOMIC_OP;
    // The EP was created (or modified) with atomics enabled, which the IA allows only with RI_CAP_ATOMICS.
    if (ep->attr.srv.rc.atomics_enable != IT_TRUE) return IT_ERR_OP_NOT_SUPPORTED;
    ri_sge_t sink;
    if (it_status_t st = to_sgl(result, 1, 1, &sink); st != IT_SUCCESS) return st;
    // The original value is one 64-bit word, at a 64-bit aligned remote address (RFC 7306 §8.2).
    if (sink.length != 8 || (rdma_addr & 7) != 0) return IT_ERR_INVALID_LENGTH;
    ri_send_wr_t wr{};
    wr.wr_id = cookie;
    wr.opcode = op == IT_COMPARE_AND_SWAP ? RI_WR_ATOMIC_CMP_SWAP : RI_WR_ATOMIC_FETCH_ADD;
    wr.flags = send_flags_of(dto_flags);
    wr.sgl = &sink;
    wr.num_sge = 1;
    wr.u.atomic.remote_addr = rdma_addr;
    wr.u.atomic.rkey = static_cast<ri_stag_t>(rmr_context);
    wr.u.atomic.compare_add = op == IT_COMPARE_AND_SWAP ? compare : swap_or_add;
    wr.u.atomic.swap = op == IT_COMPARE_AND_SWAP ? swap_or_add : 0;
    // RI_EOPNOTSUPP here: the peer was not found to speak RFC 7306 (IT_ERR_OP_NOT_SUPPORTED).
    return post_one(ep, wr);
}

ITAPI_EXPORT it_status_t it_post_rdma_read_to_rmr(it_ep_handle_t ep_handle, const it_rmr_triplet_t *, size_t,
                                                  it_dto_cookie_t, it_dto_flags_t, it_rdma_addr_t, it_rmr_context_t) {
    return lookup<Ep>(ep_handle) == nullptr ? IT_ERR_INVALID_EP : IT_ERR_OP_NOT_SUPPORTED;
}

ITAPI_EXPORT it_status_t it_post_recv(it_handle_t handle, const it_lmr_triplet_t *local_segments, size_t num_segments,
                                      it_dto_cookie_t cookie, it_dto_flags_t dto_flags) {
    if ((dto_flags & ~kAllDtoFlags) != 0) {
        return HandleTable::instance().find(reinterpret_cast<uint64_t>(handle)) == nullptr ? IT_ERR_INVALID_HANDLE
                                                                                           : IT_ERR_INVALID_DTO_FLAGS;
    }
    ri_sge_t sgl[kMaxSegments];
    ri_recv_wr_t wr;
    wr.wr_id = cookie;
    wr.sgl = sgl;
    wr.num_sge = static_cast<uint32_t>(num_segments);
    wr.reserved = 0;
    uint32_t posted = 0;
    if (Ep *ep = lookup<Ep>(handle)) {
        if (ep->srq != nullptr) return IT_ERR_INVALID_EP;  // its receives come from its S-RQ
        if (it_status_t st = to_sgl(local_segments, num_segments, ep->attr.max_recv_segments, sgl); st != IT_SUCCESS) {
            return st;
        }
        return post_status(ep->verbs->post_recv(ep->qp, &wr, 1, &posted));
    }
    if (Srq *srq = lookup<Srq>(handle)) {
        if (it_status_t st = to_sgl(local_segments, num_segments, srq->max_recv_segs, sgl); st != IT_SUCCESS) return st;
        return post_status(srq->verbs->post_srq_recv(srq->provider, &wr, 1, &posted));
    }
    return IT_ERR_INVALID_HANDLE;
}

ITAPI_EXPORT it_status_t it_srq_create(it_pz_handle_t pz_handle, size_t max_recv_segments, size_t max_recv_dtos,
                                       it_srq_handle_t *srq_handle) {
    forget_failure();
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr) return IT_ERR_INVALID_PZ;
    if (srq_handle == nullptr) return IT_ERR_FAULT;
    Ia *ia = pz->ia;
    if (!(ia->attr.caps & RI_CAP_SRQ)) return IT_ERR_SRQ_NOT_SUPPORTED;
    if (max_recv_dtos == 0 || max_recv_dtos > ia->attr.max_srq_wr) return IT_ERR_INVALID_SRQ_SIZE;
    if (max_recv_segments == 0 || max_recv_segments > ia->attr.max_srq_sge) return IT_ERR_RESOURCE_RSEG;
    std::lock_guard lock(ia->mutex);
    Srq *s = make_child<Srq>(ia);
    if (s == nullptr) return IT_ERR_RESOURCES;
    auto srq = pz->pz->create_srq(static_cast<uint32_t>(max_recv_dtos), static_cast<uint32_t>(max_recv_segments), 0,
                                  s->handle);
    if (!srq) {
        destroy_child(ia, s);
        return failed("it_srq_create", srq.error(), from_ri(srq.error().code(), IT_ERR_RESOURCES));
    }
    s->srq = std::move(*srq);
    s->pz = pz;
    s->verbs = &ia->adapter->verbs();
    s->provider = s->srq->handle();
    s->max_recv_segs = max_recv_segments;
    s->max_recv_dtos = max_recv_dtos;
    if (auto q = s->srq->query()) s->max_recv_dtos = q->max_wr;
    ++pz->users;
    *srq_handle = to_handle<it_srq_handle_t>(s);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_srq_free(it_srq_handle_t srq_handle) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return IT_ERR_INVALID_SRQ;
    Ia *ia = s->ia;
    std::lock_guard lock(ia->mutex);
    if (s->users != 0) return IT_ERR_SRQ_BUSY;
    --s->pz->users;
    destroy_child(ia, s);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_srq_query(it_srq_handle_t srq_handle, it_srq_param_mask_t mask, it_srq_param_t *params) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return IT_ERR_INVALID_SRQ;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0x3fu) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(s->ia->mutex);
    params->ia = to_handle<it_ia_handle_t>(s->ia);
    params->pz = to_handle<it_pz_handle_t>(s->pz);
    params->max_recv_dtos = s->max_recv_dtos;
    params->max_recv_segs = s->max_recv_segs;
    params->low_watermark = s->low_watermark;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_srq_modify(it_srq_handle_t srq_handle, it_srq_param_mask_t mask, const it_srq_param_t *params) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return IT_ERR_INVALID_SRQ;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~static_cast<uint32_t>(IT_SRQ_PARAM_MAX_RECV_DTO | IT_SRQ_PARAM_LOW_WATERMARK)) != 0 || mask == 0) {
        return IT_ERR_INVALID_MASK;
    }
    std::lock_guard lock(s->ia->mutex);
    ri_srq_attr_t a{};
    uint32_t m = 0;
    if (mask & IT_SRQ_PARAM_MAX_RECV_DTO) {
        if (params->max_recv_dtos == 0 || params->max_recv_dtos > s->ia->attr.max_srq_wr) return IT_ERR_INVALID_SRQ_SIZE;
        a.max_wr = static_cast<uint32_t>(params->max_recv_dtos);
        m |= RI_SRQ_ATTR_MAX_WR;
    }
    if (mask & IT_SRQ_PARAM_LOW_WATERMARK) {
        const size_t depth = (mask & IT_SRQ_PARAM_MAX_RECV_DTO) ? params->max_recv_dtos : s->max_recv_dtos;
        if (params->low_watermark > depth) return IT_ERR_INVALID_WATERMARK;
        a.limit = static_cast<uint32_t>(params->low_watermark);
        m |= RI_SRQ_ATTR_LIMIT;
    }
    if (rdma::Status st = s->srq->modify(a, m); !st.ok()) {
        return st.code() == RI_EOPNOTSUPP ? IT_ERR_OP_NOT_SUPPORTED : from_ri(st.code(), IT_ERR_INVALID_SRQ_SIZE);
    }
    if (mask & IT_SRQ_PARAM_MAX_RECV_DTO) {
        s->max_recv_dtos = params->max_recv_dtos;
        if (auto q = s->srq->query()) s->max_recv_dtos = q->max_wr;
    }
    if (mask & IT_SRQ_PARAM_LOW_WATERMARK) s->low_watermark = params->low_watermark;
    return IT_SUCCESS;
}
