// The offload engine's completions: CQEs in posting order, interrupts earned, a QP's way into ERROR and the flush
// of what was posted to it.
#include "oe_inside.hpp"

namespace hwstub {

void OffloadEngine::complete(uint32_t cq_id, const hwstub_cqe &cqe, bool solicited, Pending &out) {
    auto it = cqs_.find(cq_id);
    if (it == cqs_.end()) return;
    Cq &cq = *it->second;
    const bool injected = faults_.cq_overflow.load(std::memory_order_relaxed) != 0 && faults_.aims_at(cqe.qp_num) &&
                          FaultPlan::take(faults_.cq_overflow);
    if (injected) {
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
        cq.writer.set_overflow();
    }
    if (injected || !cq.writer.push(cqe)) {
        // The completion is lost, so its QP cannot go on as if it had been delivered (RDMAC: the QP goes to ERROR).
        if (auto q = qps_.find(cqe.qp_num); q != qps_.end()) q->second->cqe_lost = true;
        if (!cq.overflow_reported) {
            cq.overflow_reported = true;
            ri_async_event_t e{};
            e.resource_type = RI_RES_CQ;
            e.event_id = RI_AE_CQ_OVERFLOW;
            e.resource_id = cq_id;
            out.events.push_back(e);
        }
        return;
    }
    stats_.cqes.fetch_add(1, std::memory_order_relaxed);
    // An error completion satisfies a solicited-only arm too (RDMAC verbs).
    if (cq.writer.take_arm(solicited || cqe.status != RI_WC_SUCCESS)) out.interrupts.push_back(cq_id);
}

// Writes the CQEs of finished send WQEs in posting order and frees their slots: a later Write that finished
// before an earlier Read waits for it.
void OffloadEngine::retire_sends(Qp &qp, Pending &out) {
    while (qp.sq_done != qp.sq_started) {
        SendRecord &r = qp.sends[qp.sq_done & (qp.setup.sq.depth - 1)];
        if (!r.done) break;
        if (r.signaled || qp.setup.signal_all || r.status != RI_WC_SUCCESS) {
            hwstub_cqe c = make_cqe(qp.setup.qp_num, r.wr_id, r.opcode, r.status);
            c.byte_len = r.byte_len;
            c.vendor_err = r.vendor_err;
            complete(qp.setup.send_cq, c, false, out);
        }
        r = SendRecord{};
        ++qp.sq_done;
        qp.sq.retire();
    }
}

// ERROR as the host sees it too: both control blocks say so (the uVP then completes later posts itself).
void OffloadEngine::mark_error(Qp &qp) {
    qp.error = true;
    qp.sq.set_error();
    qp.rq.set_error();
}

void OffloadEngine::enter_error(Qp &qp, Pending &out, uint32_t event_id, uint32_t detail) {
    if (qp.error) return;
    mark_error(qp);
    out.events.push_back(qp_event(qp.setup, event_id, detail));
}

// The WQE at the head of the send queue (fetched, not started) failed its checks: it completes with @p status,
// the QP enters ERROR, and its stream sends a Terminate on the way down.
void OffloadEngine::wqe_failed(Qp &qp, uint8_t status, Pending &out) {
    const auto *w = reinterpret_cast<const hwstub_send_wqe *>(
        &qp.shadow[static_cast<size_t>(qp.sq_started & (qp.setup.sq.depth - 1)) * qp.setup.sq.slot_size]);
    SendRecord &r = qp.sends[qp.sq_started & (qp.setup.sq.depth - 1)];
    r = SendRecord{};
    r.wr_id = w->wr_id;
    r.opcode = cqe_opcode(w->opcode);
    r.status = status;
    r.signaled = true;  // an error always completes
    r.done = true;
    ++qp.sq_started;
    if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
    retire_sends(qp, out);  // in order: earlier requests still in flight complete (flushed) first
    enter_error(qp, out, RI_AE_QP_FATAL);
}

// A peer's Terminate failed the oldest request in flight (the one it answers): it completes with @p status and the
// Terminate word, the rest are flushed.
void OffloadEngine::fail_oldest(Qp &qp, uint8_t status, uint32_t word) {
    for (uint32_t i = qp.sq_done; i != qp.sq_started; ++i) {
        SendRecord &r = qp.sends[i & (qp.setup.sq.depth - 1)];
        if (r.done) continue;
        r.done = true;
        r.status = status;
        r.vendor_err = word;
        return;
    }
}

// Completes the receives checked and not yet done (the one being placed among them) with RI_WC_WR_FLUSH_ERR.
bool OffloadEngine::flush_checked_receives(Qp &qp, Pending &out) {
    const bool any = qp.rq_done != qp.rq_checked;
    while (qp.rq_done != qp.rq_checked) {
        const iwarp::ReceiveBuffer &b = qp.recvs[qp.rq_done & qp.recv_mask];
        // The receive being placed when the stream failed takes the failure's status (too long a message).
        const uint8_t status = qp.rq_done != qp.rq_taken ? qp.recv_fail_status : uint8_t{RI_WC_WR_FLUSH_ERR};
        qp.recv_fail_status = RI_WC_WR_FLUSH_ERR;
        complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, b.wr_id, HWSTUB_CQE_RECV, status), false, out);
        ++qp.rq_done;
        qp.retire_receive();
    }
    qp.rq_taken = qp.rq_checked;
    return any;
}

// Completes everything posted to a QP in ERROR with RI_WC_WR_FLUSH_ERR (RDMAC verbs: flushed requests always
// complete, signalled or not): first what the engine was given, in order, then what was never fetched.
bool OffloadEngine::flush(Qp &qp, Pending &out) {
    bool did = false;
    if (qp.stream) {
        send_terminate(*qp.stream);
        // The peer closed in order: the connection ends in order both ways, as the kAL's copy of the socket ends
        // it with a FIN. A channel whose bell just closes reads as a reset at the other end.
        if (Stream &s = *qp.stream; s.chan && s.eof && s.error == 0 && !s.peer_terminated && !s.engine.failed()) {
            s.chan->close_write();
        }
        qp.stream.reset();  // closes our reference to the socket; the kAL resets or closes the connection
        did = true;
    }
    for (uint32_t i = qp.sq_done; i != qp.sq_started; ++i) {
        SendRecord &r = qp.sends[i & (qp.setup.sq.depth - 1)];
        if (!r.done) {
            r.done = true;
            r.status = RI_WC_WR_FLUSH_ERR;
        }
    }
    if (qp.sq_done != qp.sq_started) did = true;
    retire_sends(qp, out);
    qp.reads_out = 0;
    did |= flush_checked_receives(qp, out);
    while (const uint8_t *slot = qp.sq.fetch()) {
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.send_cq, make_cqe(qp.setup.qp_num, w.wr_id, cqe_opcode(w.opcode), RI_WC_WR_FLUSH_ERR),
                 false, out);
        qp.sq.retire();
        ++qp.sq_started;
        ++qp.sq_done;
        did = true;
    }
    // A QP of an SRQ flushed what it took above; what no QP took stays in the SRQ for the others. Its owner hears
    // that the QP takes no more (as an InfiniBand HCA's "last WQE reached"): it may then destroy the QP without
    // losing a receive of the SRQ.
    if (qp.srq != nullptr && qp.ran && !qp.last_wqe_reported) {
        qp.last_wqe_reported = true;
        out.events.push_back(qp_event(qp.setup, RI_AE_QP_LAST_WQE_REACHED));
        did = true;
    }
    while (const uint8_t *slot = qp.srq == nullptr ? qp.rq.fetch() : nullptr) {
        hwstub_recv_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, w.wr_id, HWSTUB_CQE_RECV, RI_WC_WR_FLUSH_ERR), false,
                 out);
        qp.rq.retire();
        ++qp.rq_checked;
        ++qp.rq_taken;
        ++qp.rq_done;
        did = true;
    }
    return did;
}

}  // namespace hwstub
