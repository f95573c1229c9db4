// DAT data transfer: each post is one work request straight to the provider's verbs - no lock, no allocation; the
// scatter/gather list is built on the stack from the consumer's triplets.
#include "dapl.hpp"

namespace dapl {
namespace {

// More segments than this per request no RNIC behind RNIC-PI offers (softrnic: 16); the rest is refused.
constexpr DAT_COUNT kMaxSegments = 64;

DAT_RETURN bad_ep() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EP); }

// Copies @p n triplets into @p sge; false when there are too many or the list is missing.
bool gather(DAT_COUNT n, const DAT_LMR_TRIPLET *iov, ri_sge_t *sge) noexcept {
    if (n < 0 || n > kMaxSegments || (n > 0 && iov == nullptr)) return false;
    for (DAT_COUNT i = 0; i < n; ++i) {
        sge[i].addr = iov[i].virtual_address;
        sge[i].length = iov[i].segment_length;
        sge[i].lkey = iov[i].lmr_context;
    }
    return true;
}

uint32_t send_flags(DAT_COMPLETION_FLAGS flags) noexcept {
    uint32_t f = (flags & DAT_COMPLETION_SUPPRESS_FLAG) ? 0u : static_cast<uint32_t>(RI_SEND_SIGNALED);
    if (flags & DAT_COMPLETION_BARRIER_FENCE_FLAG) f |= RI_SEND_READ_FENCE;
    return f;
}

constexpr uint32_t kPostFlags = DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                DAT_COMPLETION_UNSIGNALLED_FLAG | DAT_COMPLETION_BARRIER_FENCE_FLAG;

DAT_RETURN post_status(ri_status_t rc, const Ep *ep) noexcept {
    switch (rc) {
        case RI_OK: return DAT_SUCCESS;
        case RI_EAGAIN:
        case RI_ENOSPC:
        case RI_ENOMEM: return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEP);
        case RI_ERANGE: return DAT_ERROR(DAT_LENGTH_ERROR, 0);
        // RFC 7306 on a connection whose peer was not found to speak it (or an RNIC without it).
        case RI_EOPNOTSUPP: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
        default:
            return ep->state->load(std::memory_order_relaxed) == DAT_EP_STATE_CONNECTED
                       ? DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)
                       : DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_DISCONNECTED);
    }
}

// The checks every send-queue post makes: known flags, a connected EP.
DAT_RETURN may_post(const Ep *ep, DAT_COMPLETION_FLAGS flags) noexcept {
    if ((flags & ~kPostFlags) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    const int s = ep->state->load(std::memory_order_acquire);
    if (s != DAT_EP_STATE_CONNECTED) {
        return DAT_ERROR(DAT_INVALID_STATE, s == DAT_EP_STATE_DISCONNECTED ? DAT_INVALID_STATE_EP_DISCONNECTED
                                                                           : DAT_INVALID_STATE_EP_NOTREADY);
    }
    return DAT_SUCCESS;
}

// Posts one send-queue request of @p opcode; @p remote for RDMA (and @p imm for RDMA Write with immediate data).
DAT_RETURN post(Ep *ep, uint32_t opcode, DAT_COUNT n, const DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags, ri_stag_t inv = 0, uint32_t imm = 0) {
    if (DAT_RETURN st = may_post(ep, flags); st != DAT_SUCCESS) return st;
    ri_sge_t sge[kMaxSegments];
    if (!gather(n, iov, sge)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ri_send_wr_t wr;
    wr.wr_id = cookie.as_64;
    wr.opcode = opcode;
    wr.flags = send_flags(flags);
    wr.sgl = sge;
    wr.num_sge = static_cast<uint32_t>(n);
    wr.inv_stag = inv;
    if (remote != nullptr) {
        wr.u.rdma.remote_addr = remote->virtual_address;
        wr.u.rdma.rkey = remote->rmr_context;
        wr.u.rdma.imm_data = imm;
    }
    if (opcode == RI_WR_RDMA_WRITE_IMM && (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG)) wr.flags |= RI_SEND_SOLICITED;
    uint32_t posted = 0;
    return post_status(ep->verbs->post_send(ep->qp, &wr, 1, &posted), ep);
}

}  // namespace

#if defined(DAT_EXTENSIONS) && !defined(OPENRDMA_KDAPL)
DAT_RETURN ib_post_rdma_write_immed(DAT_EP_HANDLE ep_handle, DAT_COUNT n, const DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, DAT_UINT32 immed,
                                    DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (remote == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (!(ep->ia->attr.caps & RI_CAP_IMMEDIATE)) return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    return post(ep, RI_WR_RDMA_WRITE_IMM, n, iov, cookie, remote, flags, 0, immed);
}

DAT_RETURN ib_post_atomic(DAT_EP_HANDLE ep_handle, bool cmp_swap, DAT_UINT64 compare_add, DAT_UINT64 swap,
                          const DAT_LMR_TRIPLET *local, DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                          DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (!(ep->ia->attr.caps & RI_CAP_ATOMICS)) return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    if (DAT_RETURN st = may_post(ep, flags); st != DAT_SUCCESS) return st;
    if (local == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (remote == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    // The original value: one 64-bit word; the target 64-bit aligned (RFC 7306 §8.2).
    if (local->segment_length != 8 || (remote->virtual_address & 7) != 0) return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    ri_sge_t sink{local->virtual_address, 8, local->lmr_context};
    ri_send_wr_t wr{};
    wr.wr_id = cookie.as_64;
    wr.opcode = cmp_swap ? RI_WR_ATOMIC_CMP_SWAP : RI_WR_ATOMIC_FETCH_ADD;
    wr.flags = send_flags(flags);
    wr.sgl = &sink;
    wr.num_sge = 1;
    wr.u.atomic.remote_addr = remote->virtual_address;
    wr.u.atomic.rkey = remote->rmr_context;
    wr.u.atomic.compare_add = compare_add;
    wr.u.atomic.swap = swap;
    uint32_t posted = 0;
    return post_status(ep->verbs->post_send(ep->qp, &wr, 1, &posted), ep);
}
#endif

DAT_RETURN ep_post_send(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    const uint32_t op = (flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG) ? RI_WR_SEND_SE : RI_WR_SEND;
    return post(ep, op, n, iov, cookie, nullptr, flags);
}

DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
                                        DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_BOOLEAN invalidate,
                                        DAT_RMR_CONTEXT rmr_context) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (invalidate != DAT_TRUE && invalidate != DAT_FALSE) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (invalidate == DAT_TRUE && !(ep->ia->attr.caps & RI_CAP_SEND_INV)) return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    const bool se = flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG;
    uint32_t op = se ? RI_WR_SEND_SE : RI_WR_SEND;
    if (invalidate == DAT_TRUE) op = se ? RI_WR_SEND_SE_INV : RI_WR_SEND_INV;
    return post(ep, op, n, iov, cookie, nullptr, flags, invalidate == DAT_TRUE ? rmr_context : 0);
}

DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                              const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (remote == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    return post(ep, RI_WR_RDMA_WRITE, n, iov, cookie, remote, flags);
}

DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                             const DAT_RMR_TRIPLET *remote, DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if (remote == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    return post(ep, RI_WR_RDMA_READ, n, iov, cookie, remote, flags);
}

DAT_RETURN ep_post_recv(DAT_EP_HANDLE ep_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie,
                        DAT_COMPLETION_FLAGS flags) {
    Ep *ep = lookup<Ep>(ep_handle);
    if (ep == nullptr) return bad_ep();
    if ((flags & ~kPostFlags) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (ep->srq != nullptr || !ep->ep) {
        return DAT_ERROR(DAT_INVALID_STATE, ep->srq != nullptr ? DAT_INVALID_STATE_EP_RECV_WATERMARK
                                                               : DAT_INVALID_STATE_EP_UNCONFIGURED);
    }
    ri_sge_t sge[kMaxSegments];
    if (!gather(n, iov, sge)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    ri_recv_wr_t wr{cookie.as_64, sge, static_cast<uint32_t>(n), 0};
    uint32_t posted = 0;
    const ri_status_t rc = ep->verbs->post_recv(ep->qp, &wr, 1, &posted);
    if (rc == RI_OK) ep->recv_posted.fetch_add(1, std::memory_order_relaxed);
    return post_status(rc, ep);
}

DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE srq_handle, DAT_COUNT n, DAT_LMR_TRIPLET *iov, DAT_DTO_COOKIE cookie) {
    Srq *s = lookup<Srq>(srq_handle);
    if (s == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_SRQ);
    ri_sge_t sge[kMaxSegments];
    if (n > s->max_recv_iov || !gather(n, iov, sge)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ri_recv_wr_t wr{cookie.as_64, sge, static_cast<uint32_t>(n), 0};
    uint32_t posted = 0;
    const ri_status_t rc = s->verbs->post_srq_recv(s->provider, &wr, 1, &posted);
    if (rc == RI_OK) {
        s->posted.fetch_add(1, std::memory_order_relaxed);
        return DAT_SUCCESS;
    }
    return rc == RI_EAGAIN || rc == RI_ENOSPC || rc == RI_ENOMEM ? DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_SRQ)
                                                                 : DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
}

}  // namespace dapl
