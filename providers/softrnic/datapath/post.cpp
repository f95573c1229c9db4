// A queue pair's post path: the checks of every posted request, the send ring's slots, and the requests handed to
// the engine slot by slot (the slot number is the engine's wr_id); the engine's callbacks into the QP.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {

ri_status_t QueuePair::check_send(const ri_send_wr_t &w, uint64_t &inline_len) const {
    constexpr uint32_t kFlags = RI_SEND_SIGNALED | RI_SEND_READ_FENCE | RI_SEND_LOCAL_FENCE | RI_SEND_INLINE;
    const ri_qp_init_attr_t &init = setup_.init;
    const bool immediate = w.opcode == RI_WR_RDMA_WRITE_IMM || w.opcode == RI_WR_IMMEDIATE;
    const uint32_t flags = immediate ? kFlags | RI_SEND_SOLICITED : kFlags;
    if ((w.flags & ~flags) != 0 || (w.num_sge > 0 && w.sgl == nullptr)) return RI_EINVAL;
    uint32_t sge_limit = init.sq_sge;
    bool may_inline = false;
    uint32_t need = RI_ACCESS_LOCAL_READ;
    switch (w.opcode) {
        case RI_WR_SEND:
        case RI_WR_SEND_SE:
        case RI_WR_SEND_INV:
        case RI_WR_SEND_SE_INV:
        case RI_WR_RDMA_WRITE: may_inline = true; break;
        case RI_WR_RDMA_READ:
            // The scatter list lives in the slot, which holds sq_sge elements (the ring layout of the ABI).
            sge_limit = std::min(init.rd_sge, init.sq_sge);
            need = RI_ACCESS_LOCAL_WRITE;  // the scatter list is written by the responses
            break;
        case RI_WR_BIND_MW: {
            // Executed in order on the send queue (issue()); its window must be of this QP's protection domain.
            softrnic_bind_op b{};
            if (ri_status_t rc = owner_.check_memory_op(w, &b, nullptr); rc != RI_OK) return rc;
            if (b.window_pd != setup_.pd) return RI_EINVAL;
            sge_limit = 0;
            break;
        }
        case RI_WR_FAST_REG: {
            // Executed in order on the send queue (issue()), where the STag table decides whether the range lies in
            // a registered region of the QP's PD; here, what the slot can hold.
            softrnic_fast_reg_op f{};
            if (ri_status_t rc = owner_.check_memory_op(w, nullptr, &f); rc != RI_OK) return rc;
            if (f.pd != setup_.pd) return RI_EINVAL;
            sge_limit = 0;
            break;
        }
        case RI_WR_LOCAL_INV: sge_limit = 0; break;
        case RI_WR_RDMA_WRITE_IMM:
            if (stream_ && !rfc7306_) return RI_EOPNOTSUPP;  // the peer does not speak RFC 7306
            may_inline = true;
            break;
        case RI_WR_IMMEDIATE:
            if (stream_ && !rfc7306_) return RI_EOPNOTSUPP;
            sge_limit = 0;
            break;
        case RI_WR_ATOMIC_FETCH_ADD:
        case RI_WR_ATOMIC_CMP_SWAP:
            if (stream_ && !rfc7306_) return RI_EOPNOTSUPP;
            // One 8-byte sink for the original value, and a target RFC 7306 lets the responder serve (64-bit
            // aligned): a request the peer would refuse is the poster's error, not a Terminate.
            if (w.num_sge != 1 || w.sgl == nullptr || w.sgl[0].length != 8 || (w.u.atomic.remote_addr & 7) != 0) {
                return RI_EINVAL;
            }
            need = RI_ACCESS_LOCAL_WRITE;
            break;
        case RI_WR_RDMA_READ_INV: return RI_EOPNOTSUPP;  // an InfiniBand extension softrnic does not offer
        default: return RI_EINVAL;
    }
    const bool inl = (w.flags & RI_SEND_INLINE) != 0;
    if (inl && !may_inline) return RI_EINVAL;
    if (w.num_sge > sge_limit) return RI_ERANGE;
    inline_len = 0;
    if (inl) {
        for (uint32_t s = 0; s < w.num_sge; ++s) inline_len += w.sgl[s].length;
        return inline_len > init.max_inline ? RI_ERANGE : RI_OK;
    }
    if (w.num_sge > iwarp::kMaxSge) return RI_ERANGE;  // the engine's gather list
    // Local buffers are checked now, so a bad lkey is the poster's error, not a broken stream.
    for (uint32_t s = 0; s < w.num_sge; ++s) {
        const ri_sge_t &g = w.sgl[s];
        if (g.length == 0) continue;
        StagEntry e;
        if (!stags_.find(g.lkey, e, posted_stag_) || !e.valid || e.pd != setup_.pd || !e.map(g.addr, g.length)) {
            return RI_EINVAL;
        }
        if ((e.access & need) != need) return RI_EACCES;
    }
    return RI_OK;
}

void QueuePair::write_slot(const ri_send_wr_t &w, uint64_t inline_len) {
    const bool inl = (w.flags & RI_SEND_INLINE) != 0;
    uint8_t *slot = sq_.next();
    softrnic_sq_wqe h{};
    h.wr_id = w.wr_id;
    h.opcode = w.opcode;
    h.flags = w.flags | ((setup_.init.flags & RI_QP_SIGNAL_ALL) != 0 ? uint32_t{RI_SEND_SIGNALED} : 0u);
    h.num_sge = inl ? 0 : w.num_sge;
    h.inline_len = static_cast<uint32_t>(inline_len);
    h.inv_stag = w.inv_stag;
    if (w.opcode == RI_WR_BIND_MW) {
        softrnic_bind_op b{};
        (void)owner_.check_memory_op(w, &b, nullptr);  // accepted by check_send() just now
        static_assert(sizeof b <= sizeof h.op);
        std::memcpy(h.op, &b, sizeof b);
    } else if (w.opcode == RI_WR_FAST_REG) {
        softrnic_fast_reg_op f{};
        (void)owner_.check_memory_op(w, nullptr, &f);  // accepted by check_send() just now
        static_assert(sizeof f <= sizeof h.op);
        std::memcpy(h.op, &f, sizeof f);
    } else {
        std::memcpy(h.op, &w.u, sizeof h.op);
    }
    std::memcpy(slot, &h, sizeof h);
    uint8_t *p = slot + sizeof h;
    if (inl) {
        // Inline payload is copied now (the consumer may reuse its buffer) and stays in the slot until completion.
        uint8_t *data = p + static_cast<size_t>(setup_.init.sq_sge) * sizeof(ri_sge_t);
        for (uint32_t s = 0; s < w.num_sge; ++s) {
            std::memcpy(data, reinterpret_cast<const void *>(static_cast<uintptr_t>(w.sgl[s].addr)), w.sgl[s].length);
            data += w.sgl[s].length;
        }
    } else if (w.num_sge > 0) {
        std::memcpy(p, w.sgl, w.num_sge * sizeof(ri_sge_t));
    }
    sq_.push();
}

ri_status_t QueuePair::post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (wr == nullptr && count > 0) return RI_EINVAL;
    ri_status_t rc = RI_OK;
    Outcome o;
    uint64_t bytes = 0;  // payload of what was queued for the stream
    {
        std::lock_guard g(mutex_);
        out_ = &o;
        for (uint32_t i = 0; i < count; ++i) {
            const ri_send_wr_t &w = wr[i];
            uint64_t inline_len = 0;
            rc = check_send(w, inline_len);
            if (rc != RI_OK) break;
            if (state_ == RI_QPS_ERROR) {
                // RDMAC verbs: a request posted to a QP in ERROR completes at once, flushed.
                o.notify_s |= scq_.add(wc(w.wr_id, wc_opcode_of(w.opcode), RI_WC_WR_FLUSH_ERR));
                ++*posted;
                continue;
            }
            // RDMAC verbs: CLOSING and TERMINATE take no new send work ("invalid QP state").
            if (state_ == RI_QPS_CLOSING || state_ == RI_QPS_TERMINATE) {
                rc = RI_EINVAL;
                break;
            }
            if (sq_.full()) {
                rc = RI_EAGAIN;
                break;
            }
            write_slot(w, inline_len);
            bytes += wire_payload(w);
            ++*posted;
        }
        if (stream_ && state_ == RI_QPS_RTS && *posted > 0) {
            Stream &s = *stream_;
            issue();
            // A stream still moving earlier work (the socket full, or past the poster's budget) belongs to the
            // progress thread, which EPOLLOUT or a kick brings back: two threads writing one socket only fight for
            // its lock and this QP's. A parked stream's consumer polls again within microseconds, and that poll
            // (an inline pass) transmits: a second post since the last poll waits for it, or for a full batch.
            // The first post after a poll always goes at once, so a ping-pong never waits; a consumer that stops
            // polling is unparked (and its held requests sent) at the thread's next millisecond look, or at once
            // when it arms its CQ.
            if (s.tx_idle) {
                const bool cork = parked_.load(std::memory_order_relaxed) && posts_since_poll_ > 0 &&
                                  s.corked + *posted < kCorkPosts && s.corked_bytes + bytes < kCorkBytes;
                if (cork) {
                    s.corked += *posted;
                    s.corked_bytes += bytes;
                } else {
                    transmit(kPosterBudget);
                }
            }
            posts_since_poll_ += *posted;
            settle();
        }
        out_ = nullptr;
    }
    finish(o);
    return rc;
}

ri_status_t QueuePair::post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (shared_rq_) return RI_EINVAL;  // receives of this QP come from its SRQ
    if (wr == nullptr && count > 0) return RI_EINVAL;
    // Checked before the ring's lock is taken: the STag table has its own.
    ri_status_t rc = RI_OK;
    uint32_t good = 0;
    for (; good < count; ++good) {
        rc = check_receive(wr[good], rq_.max_sge(), stags_, setup_.pd);
        if (rc != RI_OK) break;
    }
    bool notify = false;
    {
        std::lock_guard g(rq_.lock());
        for (uint32_t i = 0; i < good; ++i) {
            if (state_ == RI_QPS_ERROR) {
                notify |= rcq_.add(wc(wr[i].wr_id, RI_WC_RECV, RI_WC_WR_FLUSH_ERR));
            } else if (!rq_.push(wr[i])) {
                rc = RI_EAGAIN;
                break;
            }
            ++*posted;
        }
    }
    if (notify) rcq_.notify();
    return rc;
}

void QueuePair::local_failure(uint32_t slot, uint32_t status) {
    Stream &s = *stream_;
    s.fail = Stream::Fail::local;
    s.fail_slot = slot;
    s.fail_status = status;
}

bool QueuePair::resolve_gather(const softrnic_sq_wqe &h, const uint8_t *slot, iwarp::WorkRequest &wr) const {
    const uint8_t *p = slot + sizeof h;
    if (h.inline_len > 0 || (h.flags & RI_SEND_INLINE) != 0) {
        const uint8_t *data = p + static_cast<size_t>(setup_.init.sq_sge) * sizeof(ri_sge_t);
        wr.sge[0] = iwarp::LocalSpan{const_cast<uint8_t *>(data), h.inline_len};
        wr.num_sge = h.inline_len > 0 ? 1 : 0;
        return true;
    }
    wr.num_sge = 0;
    for (uint32_t i = 0; i < h.num_sge && i < iwarp::kMaxSge; ++i) {
        ri_sge_t g;
        std::memcpy(&g, p + i * sizeof g, sizeof g);
        if (g.length == 0) continue;
        StagEntry e;
        if (!stags_.find(g.lkey, e, posted_stag_) || !e.valid || e.pd != setup_.pd) return false;
        auto a = e.map(g.addr, g.length);
        if (!a) return false;
        wr.sge[wr.num_sge++] = iwarp::LocalSpan{*a, g.length};
    }
    return true;
}

void QueuePair::issue() {
    Stream &s = *stream_;
    while (s.issued < sq_.count() && s.fail == Stream::Fail::none && !s.engine.failed()) {
        const uint32_t idx = sq_.index(s.issued);
        const uint8_t *slot = sq_.at(idx);
        softrnic_sq_wqe h;
        std::memcpy(&h, slot, sizeof h);
        WrUnion u;
        std::memcpy(&u, h.op, sizeof u);
        SlotState &st = s.slots[idx];
        if (s.issued_parts == 0) {
            if ((h.flags & RI_SEND_LOCAL_FENCE) != 0 && s.inflight > 0) return;
            if ((h.flags & RI_SEND_READ_FENCE) != 0 && s.reads_inflight > 0) return;
        }
        switch (h.opcode) {
            case RI_WR_LOCAL_INV:
                // Executed here, in order; it completes when the requests before it have.
                if (!stags_.invalidate(h.inv_stag, setup_.pd)) return local_failure(idx, RI_WC_LOC_PROT_ERR);
                st = SlotState{0, true, false};
                ++s.issued;
                continue;
            case RI_WR_FAST_REG: {
                // Executed here, in order: the requests after it (and the peer, once told) use the new STag.
                softrnic_fast_reg_op f;
                std::memcpy(&f, h.op, sizeof f);
                if (!stags_.fast_register(f.allocated, f.stag, f.pd, f.pages, f.addr, f.length, f.iova, f.access)) {
                    return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                }
                st = SlotState{0, true, false};
                ++s.issued;
                continue;
            }
            case RI_WR_BIND_MW: {
                // Executed here, in order: the requests after it see the window bound (or gone).
                softrnic_bind_op b;
                std::memcpy(&b, h.op, sizeof b);
                if (!bind_window(b)) return local_failure(idx, RI_WC_MW_BIND_ERR);
                st = SlotState{0, true, false};
                ++s.issued;
                continue;
            }
            case RI_WR_RDMA_READ: {
                if (s.llp.ord == 0) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);  // no Read may be outstanding
                const uint32_t parts = std::max<uint32_t>(h.num_sge, 1);
                uint64_t offset = 0;
                for (uint32_t p = 0; p < parts; ++p) {
                    ri_sge_t g{};
                    if (h.num_sge > 0) std::memcpy(&g, slot + sizeof h + p * sizeof g, sizeof g);
                    if (p < s.issued_parts) {
                        offset += g.length;
                        continue;
                    }
                    iwarp::WorkRequest wr;
                    wr.wr_id = idx;
                    wr.type = iwarp::WorkType::read;
                    wr.remote_stag = u.rdma.rkey;
                    wr.remote_to = u.rdma.remote_addr + offset;
                    wr.local_stag = g.lkey;
                    wr.local_to = g.addr;
                    wr.length = g.length;
                    if (g.length > 0) {
                        // The sink is resolved again by the engine when the response arrives; checked here too so
                        // that a region gone since the post fails this request, not the stream.
                        StagEntry e;
                        if (!stags_.find(g.lkey, e, posted_stag_) || !e.valid || e.pd != setup_.pd ||
                            (e.access & RI_ACCESS_LOCAL_WRITE) == 0 || !e.map(g.addr, g.length)) {
                            if (s.issued_parts == 0) return local_failure(idx, RI_WC_LOC_PROT_ERR);
                            // Parts are out already: the rest of the request cannot go; fail it with them.
                            st.parts = static_cast<uint16_t>(st.parts - (parts - p));
                            return local_failure(idx, RI_WC_LOC_PROT_ERR);
                        }
                    }
                    if (!s.engine.post(wr).ok()) return;  // the engine's queue is full: the rest goes later
                    if (s.issued_parts == 0) {
                        st = SlotState{static_cast<uint16_t>(parts), false, true};
                        ++s.inflight;
                        ++s.reads_inflight;
                    }
                    s.issued_parts = p + 1;
                    offset += g.length;
                }
                s.issued_parts = 0;
                ++s.issued;
                continue;
            }
            case RI_WR_RDMA_WRITE_IMM:
            case RI_WR_IMMEDIATE: {
                // The Write (if any), then the Immediate Data: two engine requests, one completion. Queued before a
                // transition whose peer did not agree to RFC 7306: refused whole, before the Write goes.
                if (!rfc7306_) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                const bool write = h.opcode == RI_WR_RDMA_WRITE_IMM;
                const uint32_t parts = write ? 2 : 1;
                if (write && s.issued_parts == 0) {
                    iwarp::WorkRequest wr;
                    wr.wr_id = idx;
                    wr.type = iwarp::WorkType::write;
                    if (!resolve_gather(h, slot, wr)) return local_failure(idx, RI_WC_LOC_PROT_ERR);
                    wr.remote_stag = u.rdma.rkey;
                    wr.remote_to = u.rdma.remote_addr;
                    rdma::Status rc = s.engine.post(wr);
                    if (rc.code() == RI_EAGAIN) return;
                    if (!rc.ok()) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                    st = SlotState{static_cast<uint16_t>(parts), false, false};
                    ++s.inflight;
                    s.issued_parts = 1;
                }
                iwarp::WorkRequest wr;
                wr.wr_id = idx;
                wr.type = (h.flags & RI_SEND_SOLICITED) != 0 ? iwarp::WorkType::immediate_se : iwarp::WorkType::immediate;
                uint64_t write_len = write ? h.inline_len : 0;
                for (uint32_t i = 0; write && i < h.num_sge; ++i) {
                    ri_sge_t g;
                    std::memcpy(&g, slot + sizeof h + i * sizeof g, sizeof g);
                    write_len += g.length;
                }
                wr.immediate = iwarp::immediate_field(u.rdma.imm_data, static_cast<uint32_t>(write_len));
                rdma::Status rc = s.engine.post(wr);
                if (rc.code() == RI_EAGAIN) return;  // the Write went: issued_parts says so
                if (!rc.ok()) {
                    if (s.issued_parts > 0) --st.parts;  // the Write's own completion still comes
                    return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                }
                if (s.issued_parts == 0) {
                    st = SlotState{static_cast<uint16_t>(parts), false, false};
                    ++s.inflight;
                }
                s.issued_parts = 0;
                ++s.issued;
                continue;
            }
            case RI_WR_SEND:
            case RI_WR_SEND_SE:
            case RI_WR_SEND_INV:
            case RI_WR_SEND_SE_INV:
            case RI_WR_RDMA_WRITE:
            case RI_WR_ATOMIC_FETCH_ADD:
            case RI_WR_ATOMIC_CMP_SWAP: {
                // An atomic counts with the Reads: it takes one of the ORD's places and a read fence waits for it.
                const bool atomic = h.opcode == RI_WR_ATOMIC_FETCH_ADD || h.opcode == RI_WR_ATOMIC_CMP_SWAP;
                if (atomic && s.llp.ord == 0) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                iwarp::WorkRequest wr;
                wr.wr_id = idx;
                wr.type = atomic ? iwarp::WorkType::atomic : work_type(h.opcode);
                if (!resolve_gather(h, slot, wr) || (atomic && wr.num_sge != 1)) {
                    return local_failure(idx, RI_WC_LOC_PROT_ERR);
                }
                if (atomic) {
                    wr.remote_stag = u.atomic.rkey;
                    wr.remote_to = u.atomic.remote_addr;
                    wr.atomic = atomic_request(h.opcode, u);
                } else {
                    wr.remote_stag = u.rdma.rkey;
                    wr.remote_to = u.rdma.remote_addr;
                    wr.inv_stag = h.inv_stag;
                }
                rdma::Status rc = s.engine.post(wr);
                if (rc.code() == RI_EAGAIN) return;
                if (!rc.ok()) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                st = SlotState{1, false, atomic};
                ++s.inflight;
                if (atomic) ++s.reads_inflight;
                ++s.issued;
                continue;
            }
            default:
                // Fast registrations queued before the stream are not executed yet.
                return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
        }
    }
    release_done();  // a Local Invalidate at the head is done already
}

void QueuePair::release_done() {
    Stream &s = *stream_;
    while (s.issued > 0 && s.slots[sq_.head()].done) {
        const uint8_t *slot = sq_.front();
        uint32_t flags;
        std::memcpy(&flags, slot + offsetof(softrnic_sq_wqe, flags), sizeof flags);
        if ((flags & RI_SEND_SIGNALED) != 0) out_->notify_s |= scq_.add(sq_wc(slot, RI_WC_SUCCESS));
        s.slots[sq_.head()] = SlotState{};
        sq_.pop();
        --s.issued;
    }
}

bool QueuePair::bind_window(const softrnic_bind_op &b) {
    if (b.length == 0) {
        stags_.remove(b.window);
        return true;
    }
    StagEntry r;
    if (!stags_.find(b.region, r) || !r.valid || r.pd != setup_.pd || r.parent != 0) return false;
    if ((r.access & RI_ACCESS_MW_BIND) == 0) return false;
    // A window may not grant a remote write into memory the region does not let the RNIC write.
    if ((b.access & RI_ACCESS_REMOTE_WRITE) != 0 && (r.access & RI_ACCESS_LOCAL_WRITE) == 0) return false;
    auto at = r.map(b.addr, b.length);
    if (!at) return false;
    StagEntry w;
    w.addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(*at));
    w.length = b.length;
    w.to_base = b.addr;
    w.access = b.access;  // remote rights only: a window is no local key
    w.pd = setup_.pd;
    w.qp = setup_.qp_num;
    w.parent = b.region;
    stags_.add_window(b.window, w);
    return true;
}

bool QueuePair::resolve_stag(uint32_t stag, iwarp::Region &out) {
    StagEntry e;
    if (!stags_.find(stag, e, inbound_stag_) || !e.valid) return false;
    if (e.qp != 0 && e.qp != setup_.qp_num) return false;  // a type 2 window serves the QP it was bound on
    out.base = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(e.addr));
    out.to_base = e.to_base;
    out.length = e.length;
    out.access = e.access;
    out.pd = e.pd;
    return true;
}

bool QueuePair::peer_takes_pulls() noexcept {
    return stream_ && stream_->chan && stream_->chan->peer_takes_pulls();
}

bool QueuePair::pull(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept {
    return stream_ && stream_->chan && stream_->chan->pull(local, nlocal, remote, nremote);
}

bool QueuePair::take_receive(iwarp::ReceiveBuffer &out) {
    bool limit = false;
    const ReceiveQueue::Take t = rq_.take(out, stags_, setup_.pd, limit, inbound_stag_);
    if (limit) {
        Outcome &o = *out_;
        if (o.nevents < std::size(o.events)) {
            o.events[o.nevents++] = ri_async_event_t{RI_RES_SRQ, RI_AE_SRQ_LIMIT_REACHED, rq_.id, rq_.context, 0, 0};
        }
    }
    if (t == ReceiveQueue::Take::invalid) {
        // Its region went away after the post: the request fails, and the engine terminates the stream.
        stream_->bad_receive = true;
        stream_->bad_receive_id = out.wr_id;
    }
    return t == ReceiveQueue::Take::ok;
}

bool QueuePair::invalidate_stag(uint32_t stag) { return stags_.invalidate(stag, setup_.pd); }

void QueuePair::completed(const iwarp::Completion &c) {
    if (c.kind == iwarp::Completion::Kind::recv) {
        ri_wc_t w = wc(c.wr_id, c.immediate ? RI_WC_RECV_RDMA_IMM : RI_WC_RECV, RI_WC_SUCCESS);
        w.byte_len = c.byte_len;
        if (c.immediate) {
            w.flags |= RI_WC_WITH_IMM;
            w.imm_data = iwarp::immediate_value(c.imm_data);
            w.byte_len = iwarp::immediate_write_len(c.imm_data);  // the Write's, as InfiniBand reports it
        }
        if (c.solicited) w.flags |= RI_WC_SOLICITED;
        if (c.invalidated) {
            w.flags |= RI_WC_WITH_INV;
            w.invalidated_stag = c.inv_stag;
        }
        out_->notify_r |= rcq_.add(w);
        if (stream_) ++stream_->receives_done;
        return;
    }
    Stream &s = *stream_;
    SlotState &st = s.slots[static_cast<uint32_t>(c.wr_id)];
    if (st.parts > 0 && --st.parts == 0) {
        st.done = true;
        --s.inflight;
        if (st.read) --s.reads_inflight;
    }
    release_done();
}

void QueuePair::peer_terminated(const iwarp::Terminate &t) {
    stream_->peer_terminate = true;
    stream_->term = t;
}

}  // namespace softrnic::datapath
