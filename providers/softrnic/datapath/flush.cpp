// A queue pair's completions and its way into ERROR: work completions from send slots, events, and the flush of
// both rings.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {

int QueuePair::oldest_inflight() const {
    const Stream &s = *stream_;
    for (uint32_t n = 0; n < s.issued; ++n) {
        const uint32_t idx = sq_.index(n);
        if (!s.slots[idx].done) return static_cast<int>(idx);
    }
    // A Read with only some parts out counts as in flight too.
    if (s.issued_parts > 0) return static_cast<int>(sq_.index(s.issued));
    return -1;
}

void QueuePair::set_state(uint32_t state) {
    std::lock_guard r(rq_.lock());  // post_recv reads the state under the receive queue's lock
    state_ = state;
}

void QueuePair::add_event(uint32_t event_id, uint32_t detail) {
    Outcome &o = *out_;
    if (o.nevents < std::size(o.events)) {
        o.events[o.nevents++] =
            ri_async_event_t{RI_RES_QP, event_id, setup_.qp_num, setup_.init.context, detail, 0};
    }
}

ri_wc_t QueuePair::wc(uint64_t wr_id, uint32_t opcode, uint32_t status) const {
    ri_wc_t w{};
    w.wr_id = wr_id;
    w.qp_context = setup_.init.context;
    w.status = status;
    w.opcode = opcode;
    w.qp_num = setup_.qp_num;
    return w;
}

ri_wc_t QueuePair::sq_wc(const uint8_t *slot, uint32_t status) const {
    softrnic_sq_wqe h;
    std::memcpy(&h, slot, sizeof h);
    ri_wc_t w = wc(h.wr_id, wc_opcode_of(h.opcode), status);
    if (h.opcode == RI_WR_RDMA_WRITE_IMM || h.opcode == RI_WR_IMMEDIATE) w.flags |= RI_WC_WITH_IMM;
    uint64_t bytes = h.inline_len;
    for (uint32_t i = 0; i < h.num_sge && i < setup_.init.sq_sge; ++i) {
        ri_sge_t g;
        std::memcpy(&g, slot + sizeof h + i * sizeof g, sizeof g);
        bytes += g.length;
    }
    w.byte_len = static_cast<uint32_t>(bytes);
    return w;
}

// Completes every posted request: done ones as they are (if signaled), the failing one with @p status, the rest
// flushed; receives likewise (an SRQ's stay in the SRQ).
void QueuePair::flush_rings(int failing, uint32_t status, uint32_t vendor_err, uint32_t recv_status) {
    Outcome &o = *out_;
    Stream *s = stream_.get();
    for (uint32_t n = 0; !sq_.empty(); ++n) {
        const uint32_t idx = sq_.head();
        const uint8_t *slot = sq_.front();
        const bool done = s != nullptr && n < s->issued && s->slots[idx].done;
        if (done) {
            uint32_t flags;
            std::memcpy(&flags, slot + offsetof(softrnic_sq_wqe, flags), sizeof flags);
            if ((flags & RI_SEND_SIGNALED) != 0) o.notify_s |= scq_.add(sq_wc(slot, RI_WC_SUCCESS));
        } else {
            ri_wc_t w = sq_wc(slot, static_cast<int>(idx) == failing ? status : uint32_t{RI_WC_WR_FLUSH_ERR});
            if (static_cast<int>(idx) == failing) w.vendor_err = vendor_err;
            o.notify_s |= scq_.add(w);
        }
        if (s != nullptr) s->slots[idx] = SlotState{};
        sq_.pop();
    }
    if (s != nullptr) {
        s->issued = s->issued_parts = s->inflight = s->reads_inflight = 0;
        // A receive the engine was placing into, or one taken whose region went away, is done with too.
        if (const iwarp::ReceiveBuffer *r = s->engine.active_receive()) {
            o.notify_r |= rcq_.add(wc(r->wr_id, RI_WC_RECV, recv_status));
        }
        if (s->bad_receive) o.notify_r |= rcq_.add(wc(s->bad_receive_id, RI_WC_RECV, RI_WC_LOC_PROT_ERR));
    }
    if (!shared_rq_) {
        std::lock_guard g(rq_.lock());
        uint64_t id;
        while (rq_.pop(id)) o.notify_r |= rcq_.add(wc(id, RI_WC_RECV, RI_WC_WR_FLUSH_ERR));
    }
}

void QueuePair::enter_error(int failing, uint32_t status, uint32_t vendor_err, uint32_t recv_status, bool tell_kvp) {
    // The kVP hears of it before the flushed completions can be polled: a consumer that saw them and moves the QP on
    // (ERROR -> IDLE) sends its request after this report, and the kAL runs them in order. Reported after the lock
    // (in finish()), it could come after the consumer's and put the kVP's QP back in ERROR.
    if (tell_kvp) owner_.entered_error();
    flush_rings(failing, status, vendor_err, recv_status);
    Outcome &o = *out_;
    if (shared_rq_ && state_ != RI_QPS_IDLE) add_event(RI_AE_QP_LAST_WQE_REACHED);
    if (stream_) {
        // Abortive: the engine stops and the socket closes (the kAL's own copy of it sends the reset).
        o.unwatch = registered_;
        o.close_fd = stream_->fd;
        o.watched_fd = stream_->watched_fd();
        // The peer closed in order: the connection ends in order both ways, as the kAL's copy of the socket ends
        // it with a FIN. A channel whose bell just closes reads as a reset at the other end.
        if (stream_->chan && stream_->fail == Stream::Fail::llp_closed) stream_->chan->close_write();
        o.close_chan = std::move(stream_->chan);
        const iwarp::EngineStats &last = stream_->engine.stats();  // the counters outlive the stream
        carried_ = iwarp::EngineStats{carried_.tx_fpdus + last.tx_fpdus, carried_.tx_bytes + last.tx_bytes,
                                      carried_.rx_fpdus + last.rx_fpdus, carried_.rx_bytes + last.rx_bytes};
        counters_.publish(carried_, iwarp::EngineStats{});
        stream_->unpark();
        stream_.reset();
    }
    set_state(RI_QPS_ERROR);
}

void QueuePair::finish(Outcome &o) {
    if (o.unwatch) Progress::get().remove(this, o.watched_fd);
    if (o.close_fd >= 0) ::close(o.close_fd);
    o.close_chan.reset();  // the peer reads its bell's end of file: this QP is gone
    for (uint32_t i = 0; i < o.nevents; ++i) owner_.async_event(o.events[i]);
    if (o.notify_s) scq_.notify();
    if (o.notify_r && !(&rcq_ == &scq_ && o.notify_s)) rcq_.notify();  // one call per CQ
    if (o.kick && !o.unwatch) Progress::get().kick(this);
    if (o.timer && !o.unwatch) Progress::get().timer(this, *o.timer);
}

}  // namespace softrnic::datapath
