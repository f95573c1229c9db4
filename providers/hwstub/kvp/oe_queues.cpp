// The offload engine's work queues: receive WQEs checked as posted, send WQEs fetched, checked and handed to the
// QP's iWARP engine, as a chip's queue processor does.
#include "oe_inside.hpp"

namespace hwstub {

// Receive WQEs are checked as they are posted, as a chip validates on the doorbell: a malformed one or one whose
// SGEs are not writable registered memory of the QP's PD fails the QP now, not when a Send finds it.
namespace {

// Checks receive WQE @p slot (of a ring of @p slot_size bytes whose WQEs carry at most @p max_sge SGEs) into @p b
// for @p qp: its SGEs translated in the QP's PD, with local write. The CQE status of what is wrong with it.
template <class Qp>
uint8_t check_receive(const Qp &qp, const uint8_t *slot, uint32_t slot_size, uint32_t max_sge,
                      iwarp::ReceiveBuffer &b) {
    uint8_t copy[sizeof(hwstub_recv_wqe) + iwarp::kMaxSge * sizeof(hwstub_sge)];
    hwstub_recv_wqe w{};
    std::memcpy(&w, slot, sizeof w);
    b = iwarp::ReceiveBuffer{};
    b.wr_id = w.wr_id;
    b.foreign = qp.foreign();
    if (w.num_sge > max_sge || w.num_sge > iwarp::kMaxSge || sizeof w + w.num_sge * sizeof(hwstub_sge) > slot_size) {
        return RI_WC_LOC_QP_OP_ERR;
    }
    std::memcpy(copy, slot, sizeof w + w.num_sge * sizeof(hwstub_sge));
    const auto *sge = reinterpret_cast<const hwstub_sge *>(copy + sizeof w);
    for (uint32_t i = 0; i < w.num_sge; ++i) {
        if (!qp.translate(sge[i], RI_ACCESS_LOCAL_WRITE, b.sge[i])) return RI_WC_LOC_PROT_ERR;
    }
    b.num_sge = w.num_sge;
    return RI_WC_SUCCESS;
}

}  // namespace

bool OffloadEngine::receive_failed(Qp &qp, uint64_t wr_id, uint8_t status, Pending &out) {
    // It completes in its place: after the receives checked before it, which are flushed.
    if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
    enter_error(qp, out, RI_AE_QP_FATAL);
    flush_checked_receives(qp, out);
    complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, wr_id, HWSTUB_CQE_RECV, status), false, out);
    qp.retire_receive();
    ++qp.rq_checked;
    ++qp.rq_taken;
    ++qp.rq_done;
    return true;
}

bool OffloadEngine::serve_receive_queue(Qp &qp, Pending &out) {
    if (qp.srq != nullptr) return false;  // its receives are taken from the SRQ when messages need them
    bool did = false;
    while (qp.rq_checked - qp.rq_done < qp.setup.rq.depth) {
        const uint8_t *slot = qp.rq.fetch();
        if (slot == nullptr) break;
        did = true;
        iwarp::ReceiveBuffer &b = qp.recvs[qp.rq_checked & qp.recv_mask];
        const uint8_t status = check_receive(qp, slot, qp.setup.rq.slot_size, qp.setup.max_recv_sge, b);
        if (status != RI_WC_SUCCESS) return receive_failed(qp, b.wr_id, status, out);
        ++qp.rq_checked;
    }
    return did;
}

bool OffloadEngine::take_shared_receive(Qp &qp, Pending &out) {
    Srq &srq = *qp.srq;
    // The QP holds at most an SRQ's worth of receives it took and has not completed.
    if (qp.rq_checked - qp.rq_done > qp.recv_mask) return false;
    const uint8_t *slot = srq.wq.fetch();
    if (slot == nullptr) {
        // An SRQ whose producer index the host moved beyond its ring gives nothing more to any QP.
        return false;
    }
    iwarp::ReceiveBuffer &b = qp.recvs[qp.rq_checked & qp.recv_mask];
    const uint8_t status = check_receive(qp, slot, srq.setup.ring.slot_size, srq.setup.max_sge, b);
    srq.wq.retire();  // copied: the slot is the host's again
    if (srq.setup.limit != 0 && srq.wq.unfetched() < srq.setup.limit) {
        srq.setup.limit = 0;  // one event per arming
        out.events.push_back(ri_async_event_t{RI_RES_SRQ, RI_AE_SRQ_LIMIT_REACHED, srq.setup.id, srq.setup.context,
                                              0, 0});
    }
    // A bad WQE fails the QP that took it, as a bad WQE of its own receive queue would.
    if (status != RI_WC_SUCCESS) return receive_failed(qp, b.wr_id, status, out);
    ++qp.rq_checked;
    return true;
}

bool OffloadEngine::bind_window(const Qp &qp, const hwstub_send_wqe &w) {
    // The window: allocated for this QP's protection domain, and not bound (valid) to another QP.
    StagEntry win;
    if (!stags_.find(w.remote_stag, win) || !win.window || win.pd != qp.setup.pd) return false;
    if (win.valid && win.qp != qp.setup.qp_num) return false;
    if (w.bind_length == 0) {
        stags_.add_window(w.remote_stag, StagTable::unbound_window(win.pd));
        return true;
    }
    // The region: valid, of the same PD, with the bind right; the range inside it; no right it could not grant.
    StagEntry reg;
    if (!stags_.find(w.inv_stag, reg) || !reg.valid || reg.window || reg.parent != 0 || reg.pd != qp.setup.pd) {
        return false;
    }
    if ((reg.access & RI_ACCESS_MW_BIND) == 0) return false;
    const uint32_t access = w.bind_access;
    if ((access & ~uint32_t{RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE}) != 0) return false;
    if ((access & RI_ACCESS_REMOTE_WRITE) != 0 && (reg.access & RI_ACCESS_LOCAL_WRITE) == 0) return false;
    const auto at = reg.map(w.remote_to, w.bind_length);
    if (!at) return false;
    StagEntry b;
    b.addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*at));
    b.length = w.bind_length;
    b.to_base = w.remote_to;
    b.access = access;  // remote rights only: a window is no local key
    b.pd = qp.setup.pd;
    b.qp = qp.setup.qp_num;
    b.parent = w.inv_stag;
    b.window = true;
    stags_.add_window(w.remote_stag, b);
    return true;
}

bool OffloadEngine::serve_send_queue(Qp &qp, Pending &out) {
    if (qp.blocked) return false;  // until the RDMA-mode transition (a control operation, which kicks the engine)
    bool did = false;
    for (uint32_t n = 0; n < kBudget && !qp.error; ++n) {
        // The stream is going down, or closing and what was posted before is started: nothing new starts (what
        // waits is flushed with the QP).
        if (qp.stream && (qp.stream->engine.failed() || (qp.stream->closing && closed_queue(qp)))) break;
        const uint8_t *slot = qp.sq.fetch();
        if (slot == nullptr) break;
        const uint32_t index = qp.sq_started & (qp.setup.sq.depth - 1);
        uint8_t *mine = &qp.shadow[static_cast<size_t>(index) * qp.setup.sq.slot_size];
        // One read of the consumer's slot: checks and use agree (a scattered Read resumed uses the same copy).
        const uint32_t resume = qp.read_parts_posted;
        if (resume == 0) std::memcpy(mine, slot, qp.setup.sq.slot_size);
        hwstub_send_wqe w{};
        std::memcpy(&w, mine, sizeof w);
        if (!well_formed(w, qp.setup)) {
            stats_.wqes.fetch_add(1, std::memory_order_relaxed);
            wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
            return true;
        }
        const bool data = w.opcode != HWSTUB_OP_NOP && w.opcode != HWSTUB_OP_LOCAL_INV &&
                          w.opcode != HWSTUB_OP_BIND_MW && w.opcode != HWSTUB_OP_FAST_REG;
        if (data && !qp.stream) {
            // Data operations need the QP's stream: RDMAC verbs queue work posted before RTS.
            qp.sq.unfetch();
            qp.blocked = true;
            return did;
        }
        // Fences: the WQE starts once every earlier one (or every earlier Read) is done.
        if (resume == 0 && (((w.flags & HWSTUB_WQE_FENCE) != 0 && qp.sq_done != qp.sq_started) ||
                            ((w.flags & HWSTUB_WQE_READ_FENCE) != 0 && qp.reads_out != 0))) {
            qp.sq.unfetch();
            return did;
        }
        // RFC 7306 posted before the transition to a stream whose peer did not agree to it: refused whole, before
        // any part of it reaches the engine (the host refuses it at post once it knows).
        const bool extension = w.opcode >= HWSTUB_OP_ATOMIC_FADD && w.opcode <= HWSTUB_OP_IMMEDIATE;
        if (extension && resume == 0 && !qp.stream->rfc7306) {
            stats_.wqes.fetch_add(1, std::memory_order_relaxed);
            wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
            return true;
        }
        SendRecord &r = qp.sends[index];
        if (resume == 0) {
            r = SendRecord{};
            r.wr_id = w.wr_id;
            r.opcode = cqe_opcode(w.opcode);
            r.status = RI_WC_SUCCESS;
            r.signaled = (w.flags & HWSTUB_WQE_SIGNALED) != 0;
            const bool atomic = w.opcode == HWSTUB_OP_ATOMIC_FADD || w.opcode == HWSTUB_OP_ATOMIC_CSWAP;
            r.read = w.opcode == HWSTUB_OP_READ || atomic;  // an atomic counts with the Reads (ORD, read fence)
            r.parts = w.opcode == HWSTUB_OP_READ ? std::max<uint32_t>(w.num_sge, 1)
                      : w.opcode == HWSTUB_OP_WRITE_IMM ? 2
                                                         : 0;
        }
        if (w.opcode == HWSTUB_OP_NOP) {
            r.done = true;
        } else if (w.opcode == HWSTUB_OP_LOCAL_INV) {
            r.done = true;
            if (!stags_.invalidate(w.inv_stag, qp.setup.pd)) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_LOC_PROT_ERR, out);
                return true;
            }
        } else if (w.opcode == HWSTUB_OP_FAST_REG) {
            r.done = true;
            // The table maps it only inside a valid registered region of the QP's PD: a WQE the host scribbled
            // reaches no memory its consumer did not register.
            if (!stags_.fast_register(w.inv_stag, w.remote_stag, qp.setup.pd, static_cast<uint32_t>(w.operand[1]),
                                      w.operand[0], w.bind_length, w.remote_to, w.bind_access)) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
                return true;
            }
        } else if (w.opcode == HWSTUB_OP_BIND_MW) {
            r.done = true;
            if (!bind_window(qp, w)) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_MW_BIND_ERR, out);
                return true;
            }
        } else {
            iwarp::WorkRequest wr;
            wr.wr_id = qp.sq_started;  // the send queue index: the completion finds its record by it
            const bool solicited = (w.flags & HWSTUB_WQE_SOLICITED) != 0;
            bool ok = true;
            if ((w.flags & HWSTUB_WQE_INLINE) != 0) {
                wr.sge[0] = iwarp::LocalSpan{mine + sizeof w, w.inline_len};  // the engine's own copy
                wr.num_sge = w.inline_len > 0 ? 1 : 0;
            } else {
                const auto *sge = reinterpret_cast<const hwstub_sge *>(mine + sizeof w);
                // A Read's and an atomic's sinks are written; everything else's gather list is read.
                const uint32_t need = r.read ? RI_ACCESS_LOCAL_WRITE : RI_ACCESS_LOCAL_READ;
                for (uint32_t i = 0; i < w.num_sge && ok; ++i) ok = qp.translate(sge[i], need, wr.sge[i]);
                if (ok && w.opcode != HWSTUB_OP_READ && r.read) ok = sge[0].length == 8;  // an atomic's sink
                wr.num_sge = w.num_sge;
                wr.foreign = qp.foreign();
            }
            if (!ok) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_LOC_PROT_ERR, out);
                return true;
            }
            switch (w.opcode) {
                case HWSTUB_OP_SEND: wr.type = solicited ? iwarp::WorkType::send_se : iwarp::WorkType::send; break;
                case HWSTUB_OP_SEND_INV:
                    wr.type = solicited ? iwarp::WorkType::send_se_inv : iwarp::WorkType::send_inv;
                    wr.inv_stag = w.inv_stag;
                    break;
                case HWSTUB_OP_WRITE:
                case HWSTUB_OP_WRITE_IMM:
                    wr.type = iwarp::WorkType::write;
                    wr.remote_stag = w.remote_stag;
                    wr.remote_to = w.remote_to;
                    break;
                case HWSTUB_OP_IMMEDIATE:
                    wr.type = solicited ? iwarp::WorkType::immediate_se : iwarp::WorkType::immediate;
                    wr.immediate = iwarp::immediate_field(static_cast<uint32_t>(w.operand[0]), 0);
                    break;
                case HWSTUB_OP_ATOMIC_FADD:
                case HWSTUB_OP_ATOMIC_CSWAP:
                    wr.type = iwarp::WorkType::atomic;
                    wr.remote_stag = w.remote_stag;
                    wr.atomic = atomic_request(w);
                    break;
                default:  // HWSTUB_OP_READ (well_formed() let nothing else through)
                    wr.type = iwarp::WorkType::read;
                    wr.remote_stag = w.remote_stag;
                    break;
            }
            // Part @p i of a WQE the engine takes as several requests (a scattered Read's, or a Write and then its
            // Immediate Data): posted; or the engine is full, and the WQE resumes at this part later; or failed, and
            // the QP with it (behind parts the engine has already, by a Terminate that flushes them).
            enum class Part { posted, wait, failed };
            auto post_part = [&](const iwarp::WorkRequest &part, uint32_t i) {
                const rdma::Status st = qp.stream->engine.post(part);
                if (st.code() == RI_EAGAIN) {
                    qp.read_parts_posted = i;
                    qp.sq.unfetch();
                    return Part::wait;
                }
                if (st) return Part::posted;
                qp.read_parts_posted = 0;
                if (i > 0) {
                    qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
                    ++qp.sq_started;
                    enter_error(qp, out, RI_AE_QP_FATAL);
                } else {
                    wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
                }
                return Part::failed;
            };
            if (w.opcode == HWSTUB_OP_READ) {
                // One Read per sink SGE, each for the next piece of the remote buffer (as softrnic does): the
                // responder sends one Read Response per part, placed straight into that SGE's region.
                const auto *sge = reinterpret_cast<const hwstub_sge *>(mine + sizeof w);
                uint64_t offset = 0;
                for (uint32_t i = 0; i < resume; ++i) offset += sge[i].length;
                for (uint32_t i = resume; i < r.parts; ++i) {
                    iwarp::WorkRequest part = wr;
                    part.num_sge = 0;
                    if (w.num_sge > 0) {
                        part.local_stag = sge[i].lkey;
                        part.local_to = sge[i].addr;
                        part.length = sge[i].length;
                    }
                    part.remote_to = w.remote_to + offset;
                    if (const Part p = post_part(part, i); p != Part::posted) return p == Part::wait ? did : true;
                    ++qp.reads_out;
                    offset += sge[i].length;
                }
                qp.read_parts_posted = 0;
            } else if (w.opcode == HWSTUB_OP_WRITE_IMM) {
                // The Write, then the Immediate Data: two engine requests, one CQE (SendRecord::parts).
                for (uint32_t i = resume; i < 2; ++i) {
                    iwarp::WorkRequest part = wr;
                    part.remote_to = w.remote_to;
                    if (i == 1) {
                        part = iwarp::WorkRequest{};
                        part.wr_id = wr.wr_id;
                        part.type = solicited ? iwarp::WorkType::immediate_se : iwarp::WorkType::immediate;
                        uint64_t len = 0;
                        for (uint32_t s = 0; s < wr.num_sge; ++s) len += wr.sge[s].len;
                        part.immediate = iwarp::immediate_field(static_cast<uint32_t>(w.operand[0]),
                                                                static_cast<uint32_t>(len));
                    }
                    if (const Part p = post_part(part, i); p != Part::posted) return p == Part::wait ? did : true;
                }
                qp.read_parts_posted = 0;
            } else {
                wr.remote_to = w.remote_to;
                const rdma::Status st = qp.stream->engine.post(wr);
                if (st.code() == RI_EAGAIN) {
                    qp.sq.unfetch();  // the engine's queue is full: this WQE waits for a completion
                    return did;
                }
                if (!st) {
                    wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
                    return true;
                }
                if (r.read) ++qp.reads_out;  // an atomic
            }
        }
        stats_.wqes.fetch_add(1, std::memory_order_relaxed);
        ++qp.sq_started;
        did = true;
    }
    retire_sends(qp, out);
    return did;
}

// A closing QP has started everything posted before its move to CLOSING (or the host's index says nothing more is
// there: a scribbled one must not hold the FIN back for ever).
bool OffloadEngine::closed_queue(const Qp &qp) noexcept {
    const uint32_t left = qp.stream->close_at - qp.sq_started;
    return left == 0 || left > qp.setup.sq.depth || !qp.sq.pending() || qp.sq.overrun();
}

}  // namespace hwstub
