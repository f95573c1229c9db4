/**
 * @file host_queues.hpp
 * @brief The host's fast path of hwstub, shared by the uVP (a consumer process) and the kVP (consumers hosted in
 *        the kAL): verbs work requests formatted into WQEs, CQEs turned into work completions, a doorbell rung once
 *        per post call. This is all a hardware RNIC's user library does on its fast path; no protocol code.
 */
#ifndef HWSTUB_COMMON_HOST_QUEUES_HPP
#define HWSTUB_COMMON_HOST_QUEUES_HPP

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/fast_reg.hpp"
#include "hw_queues.hpp"
#include "rnicpi/ri_verbs.h"

namespace hwstub {

/** @brief QP contexts by QP number, for the work completions of one RNIC open (lock-free reads). */
class QpContexts {
public:
    /** @brief Room for QP numbers below @p max_qp. */
    explicit QpContexts(uint32_t max_qp) : size_(max_qp), ctx_(new std::atomic<uint64_t>[max_qp]()) {}
    /** @brief Records the context of QP @p qp_num. */
    void set(uint32_t qp_num, uint64_t context) noexcept {
        if (qp_num < size_) ctx_[qp_num].store(context, std::memory_order_relaxed);
    }
    /** @brief The context of QP @p qp_num (0 if unknown). */
    [[nodiscard]] uint64_t get(uint32_t qp_num) const noexcept {
        return qp_num < size_ ? ctx_[qp_num].load(std::memory_order_relaxed) : 0;
    }

private:
    uint32_t size_;
    std::unique_ptr<std::atomic<uint64_t>[]> ctx_;
};

/** @brief The STags a Bind Memory Window names, from its handles (the owner of the handles resolves them). */
struct BindStags {
    ri_stag_t window = 0;     /**< The window's STag. */
    uint32_t window_type = 0; /**< RI_MW_TYPE_1 or RI_MW_TYPE_2. */
    bool same_pd = false;     /**< The window (fast registration: the STag) is of the posting QP's protection domain. */
    ri_stag_t region = 0;     /**< The region's STag (0 when none is named); fast registration: the allocated STag. */
    uint32_t max_pages = 0;   /**< Fast registration: the pages the allocated STag may map (0: not one). */
};
/**
 * @brief Resolves the handles of memory operation @p wr (Bind Memory Window: the window and region; Fast Register:
 *        the allocated STag); false when they name nothing.
 */
using BindResolver = bool (*)(void *ctx, const ri_send_wr_t &wr, BindStags &out);

/**
 * @brief The BindStags of window @p mw and region @p mr (null when the bind names none) for a bind posted on a QP of
 *        protection domain @p pd; false without a window. The kVP's and the uVP's objects both carry `pd` and `stag`,
 *        and windows their `type`.
 */
template <class Pd, class Mw, class Mr>
[[nodiscard]] bool bind_stags(const Pd *pd, const Mw *mw, const Mr *mr, BindStags &out) noexcept {
    if (mw == nullptr) return false;
    out.window = mw->stag;
    out.window_type = mw->type;
    out.same_pd = mw->pd == pd && (mr == nullptr || mr->pd == pd);
    out.region = mr != nullptr ? mr->stag : 0;
    return true;
}

/**
 * @brief The BindStags of fast registration's allocated STag @p mr posted on a QP of protection domain @p pd (the
 *        objects of both halves carry `pd`, `stag` and `max_pages`); false without one.
 */
template <class Pd, class Mr>
[[nodiscard]] bool fast_reg_stags(const Pd *pd, const Mr *mr, BindStags &out) noexcept {
    if (mr == nullptr) return false;
    out.region = mr->stag;
    out.same_pd = mr->pd == pd;
    out.max_pages = mr->max_pages;
    return true;
}

/** @brief Whether @p opcode is one of RFC 7306's (atomics, Immediate Data): only for a peer that speaks it. */
[[nodiscard]] constexpr bool rfc7306_opcode(uint32_t opcode) noexcept {
    return opcode == RI_WR_ATOMIC_FETCH_ADD || opcode == RI_WR_ATOMIC_CMP_SWAP || opcode == RI_WR_RDMA_WRITE_IMM ||
           opcode == RI_WR_IMMEDIATE;
}

/**
 * @brief Formats @p wr into send slot @p slot: ::RI_EOPNOTSUPP for operations hwstub does not execute. A window
 *        bind's handles are resolved by @p bind (with @p bind_ctx); without one a bind is ::RI_EOPNOTSUPP.
 */
[[nodiscard]] inline ri_status_t format_send(const ri_send_wr_t &wr, uint8_t *slot, uint32_t slot_size,
                                             uint32_t max_inline, uint32_t max_sge, BindResolver bind = nullptr,
                                             void *bind_ctx = nullptr) noexcept {
    hwstub_send_wqe w{};
    w.wr_id = wr.wr_id;
    if ((wr.flags & RI_SEND_SIGNALED) != 0) w.flags |= HWSTUB_WQE_SIGNALED;
    if ((wr.flags & RI_SEND_LOCAL_FENCE) != 0) w.flags |= HWSTUB_WQE_FENCE;
    if ((wr.flags & RI_SEND_READ_FENCE) != 0) w.flags |= HWSTUB_WQE_READ_FENCE;
    if ((wr.flags & RI_SEND_SOLICITED) != 0) {
        if (wr.opcode != RI_WR_RDMA_WRITE_IMM && wr.opcode != RI_WR_IMMEDIATE) return RI_EINVAL;
        w.flags |= HWSTUB_WQE_SOLICITED;
    }
    if (wr.opcode == RI_WR_FAST_REG) {
        if (bind == nullptr) return RI_EOPNOTSUPP;
        BindStags b;
        providers::common::FastRegRange r;
        if (!bind(bind_ctx, wr, b) || b.max_pages == 0 || !b.same_pd || wr.num_sge != 0) return RI_EINVAL;
        if (ri_status_t rc = providers::common::fast_reg_range(wr, b.region, r); rc != RI_OK) return rc;
        if (r.pages > b.max_pages) return RI_ERANGE;
        w.opcode = HWSTUB_OP_FAST_REG;
        w.inv_stag = b.region;
        w.remote_stag = r.stag;
        w.remote_to = r.iova;
        w.bind_length = r.length;
        w.bind_access = r.access;
        w.operand[0] = r.addr;
        w.operand[1] = r.pages;
        if (sizeof w > slot_size) return RI_EINVAL;
        std::memcpy(slot, &w, sizeof w);
        return RI_OK;
    }
    if (wr.opcode == RI_WR_BIND_MW) {
        if (bind == nullptr) return RI_EOPNOTSUPP;
        BindStags b;
        // A type 2 window of the QP's PD; a region unless it unbinds; remote rights only; no SGE.
        if (!bind(bind_ctx, wr, b) || b.window_type != RI_MW_TYPE_2 || !b.same_pd || wr.num_sge != 0 ||
            (wr.u.bind.length != 0 && b.region == 0) ||
            (wr.u.bind.access & ~uint32_t{RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE}) != 0) {
            return RI_EINVAL;
        }
        w.opcode = HWSTUB_OP_BIND_MW;
        w.remote_stag = b.window;
        if (wr.u.bind.length != 0) {
            w.inv_stag = b.region;
            w.remote_to = wr.u.bind.addr;
            w.bind_length = wr.u.bind.length;
            w.bind_access = wr.u.bind.access;
        }
        if (sizeof w > slot_size) return RI_EINVAL;
        std::memcpy(slot, &w, sizeof w);
        return RI_OK;
    }
    switch (wr.opcode) {
        case RI_WR_SEND: w.opcode = HWSTUB_OP_SEND; break;
        case RI_WR_SEND_SE:
            w.opcode = HWSTUB_OP_SEND;
            w.flags |= HWSTUB_WQE_SOLICITED;
            break;
        case RI_WR_SEND_INV: w.opcode = HWSTUB_OP_SEND_INV; break;
        case RI_WR_SEND_SE_INV:
            w.opcode = HWSTUB_OP_SEND_INV;
            w.flags |= HWSTUB_WQE_SOLICITED;
            break;
        case RI_WR_RDMA_WRITE: w.opcode = HWSTUB_OP_WRITE; break;
        case RI_WR_RDMA_READ: w.opcode = HWSTUB_OP_READ; break;
        case RI_WR_LOCAL_INV: w.opcode = HWSTUB_OP_LOCAL_INV; break;
        case RI_WR_ATOMIC_FETCH_ADD:
        case RI_WR_ATOMIC_CMP_SWAP:
            // One 8-byte sink, a 64-bit aligned target (RFC 7306 §8.2): anything else is the poster's error here,
            // not a Terminate from the peer.
            if (wr.num_sge != 1 || wr.sgl == nullptr || wr.sgl[0].length != 8 || (wr.u.atomic.remote_addr & 7) != 0 ||
                (wr.flags & RI_SEND_INLINE) != 0) {
                return RI_EINVAL;
            }
            w.opcode = wr.opcode == RI_WR_ATOMIC_CMP_SWAP ? HWSTUB_OP_ATOMIC_CSWAP : HWSTUB_OP_ATOMIC_FADD;
            w.remote_stag = wr.u.atomic.rkey;
            w.remote_to = wr.u.atomic.remote_addr;
            w.operand[0] = wr.u.atomic.compare_add;
            w.operand[1] = wr.opcode == RI_WR_ATOMIC_CMP_SWAP ? wr.u.atomic.swap : 0;
            break;
        case RI_WR_RDMA_WRITE_IMM: w.opcode = HWSTUB_OP_WRITE_IMM; break;
        case RI_WR_IMMEDIATE:
            if (wr.num_sge != 0) return RI_EINVAL;
            w.opcode = HWSTUB_OP_IMMEDIATE;
            w.operand[0] = wr.u.rdma.imm_data;
            break;
        default: return RI_EOPNOTSUPP;  // an InfiniBand extension (Read with Invalidate)
    }
    if (w.opcode == HWSTUB_OP_SEND_INV || w.opcode == HWSTUB_OP_LOCAL_INV) w.inv_stag = wr.inv_stag;
    if (w.opcode == HWSTUB_OP_WRITE || w.opcode == HWSTUB_OP_READ || w.opcode == HWSTUB_OP_WRITE_IMM) {
        w.remote_stag = wr.u.rdma.rkey;
        w.remote_to = wr.u.rdma.remote_addr;
    }
    if (w.opcode == HWSTUB_OP_WRITE_IMM) w.operand[0] = wr.u.rdma.imm_data;
    if (wr.num_sge > 0 && wr.sgl == nullptr) return RI_EINVAL;
    uint8_t *body = slot + sizeof w;
    if ((wr.flags & RI_SEND_INLINE) != 0 && (w.opcode == HWSTUB_OP_SEND || w.opcode == HWSTUB_OP_SEND_INV ||
                                             w.opcode == HWSTUB_OP_WRITE || w.opcode == HWSTUB_OP_WRITE_IMM)) {
        size_t total = 0;
        for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sgl[i].length;
        if (total > max_inline || sizeof w + total > slot_size) return RI_EINVAL;
        w.flags |= HWSTUB_WQE_INLINE;
        w.inline_len = static_cast<uint32_t>(total);
        for (uint32_t i = 0; i < wr.num_sge; ++i) {
            std::memcpy(body, reinterpret_cast<const void *>(static_cast<uintptr_t>(wr.sgl[i].addr)),
                        wr.sgl[i].length);
            body += wr.sgl[i].length;
        }
    } else {
        if (wr.num_sge > max_sge || sizeof w + wr.num_sge * sizeof(hwstub_sge) > slot_size) return RI_EINVAL;
        w.num_sge = static_cast<uint8_t>(wr.num_sge);
        uint64_t total = 0;
        for (uint32_t i = 0; i < wr.num_sge; ++i) {
            const hwstub_sge g{wr.sgl[i].addr, wr.sgl[i].length, wr.sgl[i].lkey};
            std::memcpy(body + i * sizeof g, &g, sizeof g);
            total += wr.sgl[i].length;
        }
        // A Read's sinks may be several SGEs: the engine asks for each piece in turn.
        if (w.opcode == HWSTUB_OP_READ) {
            if (total > UINT32_MAX) return RI_EINVAL;
            w.length = static_cast<uint32_t>(total);
        }
    }
    std::memcpy(slot, &w, sizeof w);
    return RI_OK;
}

/** @brief Formats @p wr into receive slot @p slot. */
[[nodiscard]] inline ri_status_t format_recv(const ri_recv_wr_t &wr, uint8_t *slot, uint32_t slot_size,
                                             uint32_t max_sge) noexcept {
    if (wr.num_sge > max_sge || sizeof(hwstub_recv_wqe) + wr.num_sge * sizeof(hwstub_sge) > slot_size) {
        return RI_EINVAL;
    }
    if (wr.num_sge > 0 && wr.sgl == nullptr) return RI_EINVAL;
    hwstub_recv_wqe w{};
    w.wr_id = wr.wr_id;
    w.num_sge = wr.num_sge;
    std::memcpy(slot, &w, sizeof w);
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
        const hwstub_sge g{wr.sgl[i].addr, wr.sgl[i].length, wr.sgl[i].lkey};
        std::memcpy(slot + sizeof w + i * sizeof g, &g, sizeof g);
    }
    return RI_OK;
}

/**
 * @brief Formats up to @p count receives of @p wr into @p wq's free slots (of @p slot_size bytes, at most @p max_sge
 *        SGEs each) and publishes them; *@p posted counts them. ::RI_EAGAIN once the ring is full. The caller holds
 *        the queue's posting lock.
 */
[[nodiscard]] inline ri_status_t post_receives(WqProducer &wq, uint32_t slot_size, uint32_t max_sge,
                                               const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) noexcept {
    ri_status_t rc = RI_OK;
    for (uint32_t i = 0; i < count; ++i) {
        uint8_t *slot = wq.next();
        if (slot == nullptr) {
            rc = RI_EAGAIN;
            break;
        }
        if ((rc = format_recv(wr[i], slot, slot_size, max_sge)) != RI_OK) break;
        wq.advance();
        ++*posted;
    }
    if (*posted > 0) wq.publish();
    return rc;
}

/** @brief The work completion of CQE @p c. */
inline void to_wc(const hwstub_cqe &c, uint64_t qp_context, ri_wc_t &wc) noexcept {
    wc = ri_wc_t{};
    wc.wr_id = c.wr_id;
    wc.qp_context = qp_context;
    wc.status = c.status;
    wc.byte_len = c.byte_len;
    wc.qp_num = c.qp_num;
    wc.vendor_err = c.vendor_err;
    switch (c.opcode) {
        case HWSTUB_CQE_SEND: wc.opcode = RI_WC_SEND; break;
        case HWSTUB_CQE_WRITE: wc.opcode = RI_WC_RDMA_WRITE; break;
        case HWSTUB_CQE_READ: wc.opcode = RI_WC_RDMA_READ; break;
        case HWSTUB_CQE_LOCAL_INV: wc.opcode = RI_WC_LOCAL_INV; break;
        case HWSTUB_CQE_BIND_MW: wc.opcode = RI_WC_BIND_MW; break;
        case HWSTUB_CQE_FAST_REG: wc.opcode = RI_WC_FAST_REG; break;
        case HWSTUB_CQE_RECV: wc.opcode = RI_WC_RECV; break;
        case HWSTUB_CQE_ATOMIC: wc.opcode = RI_WC_ATOMIC; break;
        case HWSTUB_CQE_CMP_SWAP: wc.opcode = RI_WC_ATOMIC_CMP_SWAP; break;
        case HWSTUB_CQE_WRITE_IMM:
            wc.opcode = RI_WC_RDMA_WRITE;
            wc.flags |= RI_WC_WITH_IMM;
            break;
        case HWSTUB_CQE_IMMEDIATE:
            wc.opcode = RI_WC_SEND;
            wc.flags |= RI_WC_WITH_IMM;
            break;
        case HWSTUB_CQE_RECV_IMM:
            wc.opcode = RI_WC_RECV_RDMA_IMM;
            wc.flags |= RI_WC_WITH_IMM;
            wc.imm_data = c.imm_data;
            break;
        default: wc.opcode = RI_WC_SEND; break;  // a NOP reports as a Send of nothing
    }
    if ((c.flags & HWSTUB_CQE_SOLICITED) != 0) wc.flags |= RI_WC_SOLICITED;
    if ((c.flags & HWSTUB_CQE_WITH_INV) != 0) {
        wc.flags |= RI_WC_WITH_INV;
        wc.invalidated_stag = c.inv_stag;
    }
}

/** @brief The host's side of one QP: both work queues and the doorbell. Posters of one queue are serialised. */
class HostQp {
public:
    /** @brief Over the rings and control blocks of the QP, ringing @p bell. */
    HostQp(RingGeometry sq, hwstub_wq_ctrl *sq_ctrl, RingGeometry rq, hwstub_wq_ctrl *rq_ctrl, Doorbell bell,
           uint32_t max_inline, uint32_t sq_sge, uint32_t rq_sge)
        : sq_(sq, sq_ctrl), rq_(rq, rq_ctrl), sq_slot_(sq.slot_size), rq_slot_(rq.slot_size), bell_(bell),
          max_inline_(max_inline), sq_sge_(sq_sge), rq_sge_(rq_sge) {}

    /** @brief Window binds posted from now on resolve their handles with @p fn (with @p ctx). */
    void set_bind_resolver(BindResolver fn, void *ctx) noexcept {
        bind_ = fn;
        bind_ctx_ = ctx;
    }
    /**
     * @brief The RDMA-mode transition said whether the peer speaks RFC 7306 (::RI_MPA_RFC7306): from now on its
     *        requests are refused here with ::RI_EOPNOTSUPP when it does not, rather than failing the QP in the
     *        adapter. Before the transition they are queued, and the adapter decides.
     */
    void set_peer_rfc7306(bool speaks) noexcept {
        refuse_rfc7306_.store(!speaks, std::memory_order_relaxed);
    }
    /** @brief Post Send: formats each request into a slot, publishes them, rings once. */
    ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) noexcept {
        if (posted == nullptr || (count > 0 && wr == nullptr)) return RI_EINVAL;
        *posted = 0;
        if (bell_.adapter_dead()) return RI_EIO;
        std::lock_guard g(sq_lock_);
        ri_status_t rc = RI_OK;
        for (uint32_t i = 0; i < count; ++i) {
            if (rfc7306_opcode(wr[i].opcode) && refuse_rfc7306_.load(std::memory_order_relaxed)) {
                rc = RI_EOPNOTSUPP;
                break;
            }
            uint8_t *slot = sq_.next();
            if (slot == nullptr) {
                rc = RI_EAGAIN;
                break;
            }
            if ((rc = format_send(wr[i], slot, sq_slot_, max_inline_, sq_sge_, bind_, bind_ctx_)) != RI_OK) break;
            sq_.advance();
            ++*posted;
        }
        if (*posted > 0) {
            sq_.publish();
            (void)bell_.ring();
        }
        return rc;
    }
    /** @brief The QP takes its receives from an SRQ: Post Receive on it is refused (::RI_EINVAL). */
    void set_uses_srq() noexcept { uses_srq_ = true; }
    /** @brief Post Receive. */
    ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) noexcept {
        if (posted == nullptr || (count > 0 && wr == nullptr)) return RI_EINVAL;
        *posted = 0;
        if (uses_srq_) return RI_EINVAL;
        if (bell_.adapter_dead()) return RI_EIO;
        std::lock_guard g(rq_lock_);
        const ri_status_t rc = post_receives(rq_, rq_slot_, rq_sge_, wr, count, posted);
        if (*posted > 0) (void)bell_.ring();
        return rc;
    }
    /** @brief True once the adapter put the QP in ERROR. */
    [[nodiscard]] bool in_error() const noexcept { return sq_.in_error(); }

private:
    BindResolver bind_ = nullptr;
    void *bind_ctx_ = nullptr;
    bool uses_srq_ = false;
    std::atomic<bool> refuse_rfc7306_{false};
    std::mutex sq_lock_, rq_lock_;
    WqProducer sq_, rq_;
    uint32_t sq_slot_, rq_slot_;
    Doorbell bell_;
    uint32_t max_inline_, sq_sge_, rq_sge_;
};

/**
 * @brief The host's side of a shared receive queue. Posters are serialised. It rings no doorbell: the adapter reads
 *        the producer index when a message of one of the SRQ's QPs needs a receive (hwstub_hw.h).
 */
class HostSrq {
public:
    /** @brief Over the SRQ's ring and control block; WQEs carry at most @p max_sge SGEs. */
    HostSrq(RingGeometry ring, hwstub_wq_ctrl *ctrl, Doorbell bell, uint32_t max_sge)
        : wq_(ring, ctrl), slot_(ring.slot_size), bell_(bell), max_sge_(max_sge) {}

    /** @brief Post SRQ Receive: ::RI_EAGAIN once every slot holds a receive no QP has taken. */
    ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) noexcept {
        if (posted == nullptr || (count > 0 && wr == nullptr)) return RI_EINVAL;
        *posted = 0;
        if (bell_.adapter_dead()) return RI_EIO;
        std::lock_guard g(lock_);
        return post_receives(wq_, slot_, max_sge_, wr, count, posted);
    }

private:
    std::mutex lock_;
    WqProducer wq_;
    uint32_t slot_;
    Doorbell bell_;
    uint32_t max_sge_;
};

/** @brief The host's side of one CQ. Pollers are serialised. */
class HostCq {
public:
    /** @brief Over the CQ's ring and control block, with the open's QP contexts. */
    HostCq(hwstub_cqe *ring, uint32_t depth, hwstub_cq_ctrl *ctrl, const QpContexts &contexts)
        : reader_(ring, depth, ctrl), contexts_(&contexts) {}
    /** @brief Poll CQ; ::RI_EOVERFLOW when it is empty and the adapter lost a completion to a full ring. */
    ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) noexcept {
        if (polled == nullptr || (max > 0 && wc == nullptr)) return RI_EINVAL;
        std::lock_guard g(lock_);
        uint32_t n = 0;
        hwstub_cqe c;
        while (n < max && reader_.poll(c)) {
            to_wc(c, contexts_->get(c.qp_num), wc[n]);
            ++n;
        }
        *polled = n;
        // A completion was lost to a full CQ: once what is left is taken, the CQ says so (as softrnic's does).
        return n == 0 && max > 0 && reader_.overflowed() ? RI_EOVERFLOW : RI_OK;
    }
    /** @brief Request Completion Notification: the adapter answers the arm when it writes a matching CQE. */
    ri_status_t request_notify(uint32_t type) noexcept {
        if (type != RI_CQ_NOTIFY_NEXT && type != RI_CQ_NOTIFY_SOLICITED) return RI_EINVAL;
        std::lock_guard g(lock_);
        reader_.arm(type == RI_CQ_NOTIFY_SOLICITED);
        // The caller polls once more after arming: the arm must be visible before that poll reads an owner byte
        // (the engine's take_arm() fences the other way).
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return RI_OK;
    }

    /** @brief Stops polls and arms of this CQ while the returned lock lives (a resize). */
    [[nodiscard]] std::unique_lock<std::mutex> hold() { return std::unique_lock(lock_); }
    /**
     * @brief After the adapter moved the CQ (CqWriter::move_to()), reads the new ring of @p depth CQEs at @p ring
     *        with control block @p ctrl, from the consumer index the adapter copied there. Call with hold()'s lock.
     */
    void switch_to(hwstub_cqe *ring, uint32_t depth, hwstub_cq_ctrl *ctrl) noexcept { reader_ = CqReader(ring, depth, ctrl); }

private:
    std::mutex lock_;
    CqReader reader_;
    const QpContexts *contexts_;
};

}  // namespace hwstub

#endif  // HWSTUB_COMMON_HOST_QUEUES_HPP
