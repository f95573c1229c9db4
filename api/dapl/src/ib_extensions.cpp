// OFED DAPL's IB extensions (dat_ib_extensions.h) over RFC 7306: dat_ib_post_rdma_write_immed,
// dat_ib_post_cmp_and_swap and dat_ib_post_fetch_and_add, and their completions as DAT_IB_DTO_EVENTs. Offered where
// the RNIC has RFC 7306 (ia_query's extension_supported and DAT_IB_* attributes say so); a connection whose peer
// was not found to speak RFC 7306 answers DAT_NOT_IMPLEMENTED at post. UD, counters and collectives are
// InfiniBand's and are not implemented.
#include "dapl.hpp"

namespace dapl {

DAT_RETURN ib_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args) {
    if (lookup_any(handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, 0);
    // The arguments in the order dat_ib_extensions.h's macros pass them (the cookie by value, as a union).
    switch (static_cast<DAT_IB_OP>(op)) {
        case DAT_IB_RDMA_WRITE_IMMED_OP: {
            const DAT_COUNT n = va_arg(args, DAT_COUNT);
            const DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
            const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
            const DAT_RMR_TRIPLET *remote = va_arg(args, DAT_RMR_TRIPLET *);
            const DAT_UINT32 immed = va_arg(args, DAT_UINT32);
            const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
            return ib_post_rdma_write_immed(handle, n, local, cookie, remote, immed, flags);
        }
        case DAT_IB_CMP_AND_SWAP_OP: {
            const DAT_UINT64 compare = va_arg(args, DAT_UINT64);
            const DAT_UINT64 swap = va_arg(args, DAT_UINT64);
            const DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
            const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
            const DAT_RMR_TRIPLET *remote = va_arg(args, DAT_RMR_TRIPLET *);
            const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
            return ib_post_atomic(handle, true, compare, swap, local, cookie, remote, flags);
        }
        case DAT_IB_FETCH_AND_ADD_OP: {
            const DAT_UINT64 add = va_arg(args, DAT_UINT64);
            const DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
            const DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
            const DAT_RMR_TRIPLET *remote = va_arg(args, DAT_RMR_TRIPLET *);
            const auto flags = static_cast<DAT_COMPLETION_FLAGS>(va_arg(args, int));
            return ib_post_atomic(handle, false, add, 0, local, cookie, remote, flags);
        }
        default: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // UD, counters, collectives: InfiniBand's
    }
}

void ib_dto_event(const ri_wc_t &wc, DAT_EVENT &out) noexcept {
    DAT_IB_EXT_TYPE type;
    DAT_DTOS operation;
    const bool with_imm = (wc.flags & RI_WC_WITH_IMM) != 0;
    if (wc.opcode == RI_WC_ATOMIC) {
        type = DAT_IB_FETCH_AND_ADD;
        operation = static_cast<DAT_DTOS>(DAT_IB_DTO_FETCH_ADD);
    } else if (wc.opcode == RI_WC_ATOMIC_CMP_SWAP) {
        type = DAT_IB_CMP_AND_SWAP;
        operation = static_cast<DAT_DTOS>(DAT_IB_DTO_CMP_SWAP);
    } else if (wc.opcode == RI_WC_RECV_RDMA_IMM) {
        type = DAT_IB_RDMA_WRITE_IMMED_DATA;
        operation = static_cast<DAT_DTOS>(DAT_IB_DTO_RECV_IMMED);
    } else if (wc.opcode == RI_WC_RDMA_WRITE && with_imm) {
        type = DAT_IB_RDMA_WRITE_IMMED;
        operation = static_cast<DAT_DTOS>(DAT_IB_DTO_RDMA_WRITE_IMMED);
    } else {
        return;  // a core DTO
    }
    out.event_number = static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT);
    out.event_data.dto_completion_event_data.operation = operation;
    static_assert(sizeof(DAT_IB_EXTENSION_EVENT_DATA) <= sizeof out.event_extension_data);
    auto *ext = reinterpret_cast<DAT_IB_EXTENSION_EVENT_DATA *>(out.event_extension_data);
    std::memset(static_cast<void *>(ext), 0, sizeof *ext);
    ext->type = type;
    ext->status = wc.status == RI_WC_SUCCESS ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;  // the DTO status says which error
    if (type == DAT_IB_RDMA_WRITE_IMMED_DATA) ext->val.immed.data = wc.imm_data;
}

}  // namespace dapl
