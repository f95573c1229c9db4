// The offload engine's control operations, from the kVP on any thread: objects added and removed, the RDMA-mode
// transition, state changes. See offload_engine.hpp.
#include "oe_inside.hpp"

namespace hwstub {

OffloadEngine::OffloadEngine(hwstub_engine_page *page, EngineHooks hooks, StagTable *stags, FaultPlan *faults,
                             std::string name, std::mutex *atomics)
    : page_(page), hooks_(std::move(hooks)), name_(std::move(name)), stags_(stags != nullptr ? *stags : own_stags_),
      atomics_(atomics != nullptr ? *atomics : own_atomics_),
      faults_(faults != nullptr ? *faults : own_faults_) {
    pages_.push_back(page_);
    (void)iwarp::slow_copy_offsets();  // measured now, once per process, not by the engine's first large payload
}

OffloadEngine::~OffloadEngine() {
    stop();
    qps_.clear();  // closes the streams
    if (efd_ >= 0) ::close(efd_);
}

bool OffloadEngine::start() {
    if (thread_.joinable()) return true;
    if (efd_ < 0) {
        efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (efd_ < 0) return false;
    }
    stop_.store(false);
    thread_ = std::thread([this] { run(); });
    // Named by its creator, so the name is there once start() returns (`top -H`, and tests that look for it).
    ::pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
    return true;
}

void OffloadEngine::stop() {
    if (!thread_.joinable()) return;
    stop_.store(true, std::memory_order_release);
    kick();
    thread_.join();
}

void OffloadEngine::kick() noexcept {
    if (efd_ < 0) return;
    signal_eventfd(efd_);
}

void OffloadEngine::add_page(hwstub_engine_page *page) {
    std::lock_guard g(mutex_);
    if (dead()) word(page->dead).store(1, std::memory_order_release);
    pages_.push_back(page);
}

void OffloadEngine::remove_page(hwstub_engine_page *page) {
    std::lock_guard g(mutex_);
    std::erase(pages_, page);
}

ri_status_t OffloadEngine::add_cq(const CqSetup &cq) {
    if (cq.ring == nullptr || cq.ctrl == nullptr || cq.depth == 0 || (cq.depth & (cq.depth - 1)) != 0) {
        return RI_EINVAL;
    }
    std::lock_guard g(mutex_);
    if (cqs_.count(cq.id) != 0) return RI_EEXIST;
    auto c = std::make_unique<Cq>();
    c->writer = CqWriter(cq.ring, cq.depth, cq.ctrl);
    cqs_.emplace(cq.id, std::move(c));
    return RI_OK;
}

ri_status_t OffloadEngine::remove_cq(uint32_t id) {
    std::lock_guard g(mutex_);
    auto it = cqs_.find(id);
    if (it == cqs_.end()) return RI_ENOENT;
    if (it->second->users != 0) return RI_EBUSY;
    cqs_.erase(it);
    return RI_OK;
}

ri_status_t OffloadEngine::resize_cq(const CqSetup &cq) {
    std::lock_guard g(mutex_);
    auto it = cqs_.find(cq.id);
    if (it == cqs_.end()) return RI_ENOENT;
    return it->second->writer.move_to(cq.ring, cq.depth, cq.ctrl) ? RI_OK : RI_EINVAL;
}

ri_status_t OffloadEngine::add_srq(const SrqSetup &srq) {
    if (srq.id == 0 || !srq.ring.valid() || srq.ctrl == nullptr || srq.ring.slot_size < sizeof(hwstub_recv_wqe) ||
        srq.max_sge > iwarp::kMaxSge) {
        return RI_EINVAL;
    }
    std::lock_guard g(mutex_);
    if (srqs_.count(srq.id) != 0) return RI_EEXIST;
    auto s = std::make_unique<Srq>();
    s->setup = srq;
    s->wq = WqConsumer(srq.ring, srq.ctrl);
    srqs_.emplace(srq.id, std::move(s));
    return RI_OK;
}

ri_status_t OffloadEngine::remove_srq(uint32_t id) {
    std::lock_guard g(mutex_);
    auto it = srqs_.find(id);
    if (it == srqs_.end()) return RI_ENOENT;
    if (it->second->users != 0) return RI_EBUSY;
    srqs_.erase(it);
    return RI_OK;
}

ri_status_t OffloadEngine::set_srq_limit(uint32_t id, uint32_t limit) {
    std::lock_guard g(mutex_);
    auto it = srqs_.find(id);
    if (it == srqs_.end()) return RI_ENOENT;
    it->second->setup.limit = limit;
    return RI_OK;
}

ri_status_t OffloadEngine::add_qp(const QpSetup &qp) {
    if (!qp.sq.valid() || !qp.rq.valid() || qp.sq_ctrl == nullptr || qp.rq_ctrl == nullptr ||
        qp.sq.slot_size < sizeof(hwstub_send_wqe) || qp.rq.slot_size < sizeof(hwstub_recv_wqe) ||
        qp.max_recv_sge > iwarp::kMaxSge) {
        return RI_EINVAL;
    }
    std::lock_guard g(mutex_);
    if (qps_.count(qp.qp_num) != 0) return RI_EEXIST;
    auto scq = cqs_.find(qp.send_cq);
    auto rcq = cqs_.find(qp.recv_cq);
    if (scq == cqs_.end() || rcq == cqs_.end()) return RI_EINVAL;
    Srq *srq = nullptr;
    if (qp.srq != 0) {
        auto it = srqs_.find(qp.srq);
        if (it == srqs_.end() || it->second->setup.pd != qp.pd) return RI_EINVAL;
        srq = it->second.get();
    }
    auto q = std::make_unique<Qp>(*this, qp);
    // The control blocks may be reused memory: the engine's counters start where the host's are.
    q->sq_started = q->sq_done = word(qp.sq_ctrl->consumer).load(std::memory_order_relaxed);
    q->rq_checked = q->rq_taken = q->rq_done = word(qp.rq_ctrl->consumer).load(std::memory_order_relaxed);
    q->sq_seen = q->sq.posted();
    q->rq_seen = q->rq.posted();
    if (srq != nullptr) {
        // It may hold as many taken receives as the SRQ has slots.
        q->srq = srq;
        q->recvs.assign(srq->setup.ring.depth, iwarp::ReceiveBuffer{});
        q->recv_mask = srq->setup.ring.depth - 1;
        q->rq_checked = q->rq_taken = q->rq_done = 0;
        ++srq->users;
    }
    ++scq->second->users;
    ++rcq->second->users;
    qps_.emplace(qp.qp_num, std::move(q));
    return RI_OK;
}

ri_status_t OffloadEngine::remove_qp(uint32_t qp_num) {
    std::unique_ptr<Qp> gone;
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end()) return RI_ENOENT;
        for (uint32_t cq : {it->second->setup.send_cq, it->second->setup.recv_cq}) {
            auto c = cqs_.find(cq);
            if (c != cqs_.end()) --c->second->users;
        }
        if (it->second->srq != nullptr) --it->second->srq->users;
        gone = std::move(it->second);
        qps_.erase(it);
    }
    // Windows bound to it go invalid: its number may be given to another QP.
    stags_.invalidate_windows_of(qp_num);
    return RI_OK;  // the stream's socket closes here, outside the lock
}

ri_status_t OffloadEngine::start_stream(uint32_t qp_num, int fd, const ri_llp_params_t &llp, int bell) {
    const bool same_host = (llp.mpa_flags & RI_LLP_SAME_HOST) != 0;
    auto refuse = [&](ri_status_t rc) {
        if (fd >= 0) ::close(fd);
        if (bell >= 0) ::close(bell);
        return rc;
    };
    if (fd < 0 || (same_host && bell < 0)) return refuse(RI_EBADF);
    if (!same_host && bell >= 0) {
        ::close(bell);  // not asked for: the stream stays on the socket
        bell = -1;
    }
    std::unique_ptr<rdma::provider::Channel> chan;
    if (same_host) {
        try {
            chan = std::make_unique<rdma::provider::Channel>();
        } catch (...) {
            return refuse(RI_ENOMEM);
        }
        const ri_status_t rc = chan->open(bell);
        bell = -1;  // the channel's now (open() closes it when it fails)
        if (rc != RI_OK) return refuse(rc);
    }
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end() || it->second->error || it->second->stream) {
            return refuse(it == qps_.end() ? RI_ENOENT : RI_EINVAL);
        }
        Qp &qp = *it->second;
        try {
            ri_llp_params_t framing = llp;
            if (chan) {
                // The channel is memory, not a network: FPDUs as large as MPA allows, and no markers (the kAL
                // cleared them and CRC for both ends). The emulated adapter keeps the CRC, which its hardware would
                // compute for nothing: the other end is a hwstub engine too (the kAL pairs QPs of one provider
                // only), and the wire's faults (tx_corrupt, rx_corrupt) end in the wire's CRC error, not in bytes
                // placed corrupt.
                framing.fpdu_max = 1u << 17;
                framing.mpa_flags = (framing.mpa_flags & ~static_cast<uint32_t>(RI_MPA_MARKERS)) | RI_MPA_CRC;
            }
            iwarp::EngineConfig cfg = iwarp::engine_config(framing, qp.setup.pd, qp.setup.sq.depth);
            cfg.foreign_memory = qp.foreign();
            qp.stream = std::make_unique<Stream>(qp, fd, std::move(chan), llp, cfg);
            qp.ran = true;
            qp.stream->crc = cfg.tx.crc;
            qp.stream->rfc7306 = cfg.rfc7306;
            if ((llp.mpa_flags & RI_LLP_FPDU_FIXED) != 0) qp.stream->emss.keep();  // the host's FPDU size, not the MSS
        } catch (...) {
            return refuse(RI_ENOMEM);  // chan, if made, closes with its unique_ptr
        }
        qp.blocked = false;
    }
    kick();
    return RI_OK;
}

ri_status_t OffloadEngine::set_qp_error(uint32_t qp_num) {
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end()) return RI_ENOENT;
        mark_error(*it->second);
    }
    kick();  // the engine flushes what is posted
    return RI_OK;
}

ri_status_t OffloadEngine::terminate_qp(uint32_t qp_num, iwarp::TermCode code) {
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end()) return RI_ENOENT;
        Qp &qp = *it->second;
        if (qp.error) return RI_OK;
        if (!qp.stream) {
            mark_error(qp);
        } else {
            qp.stream->engine.abort(code);  // the next frame is the Terminate; ERROR once it is out
        }
    }
    kick();
    return RI_OK;
}

ri_status_t OffloadEngine::close_qp(uint32_t qp_num) {
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end()) return RI_ENOENT;
        Qp &qp = *it->second;
        if (qp.stream) {
            // RDMAC verbs: what was posted before the move to CLOSING is still carried out, then the FIN goes.
            qp.stream->closing = true;
            qp.stream->close_at = qp.sq.posted();
        }
    }
    kick();
    return RI_OK;
}

ri_status_t OffloadEngine::qp_state(uint32_t qp_num, uint32_t &state) {
    std::lock_guard g(mutex_);
    auto it = qps_.find(qp_num);
    if (it == qps_.end()) return RI_ENOENT;
    const Qp &qp = *it->second;
    state = qp.error ? RI_QPS_ERROR : qp.stream ? RI_QPS_RTS : RI_QPS_IDLE;
    return RI_OK;
}

ri_status_t OffloadEngine::qp_stats(uint32_t qp_num, ri_qp_stats_t &out) {
    std::lock_guard g(mutex_);
    auto it = qps_.find(qp_num);
    if (it == qps_.end()) return RI_ENOENT;
    out = it->second->stats;
    return RI_OK;
}

void OffloadEngine::fail() {
    if (dead_.exchange(true, std::memory_order_acq_rel)) return;
    {
        std::lock_guard g(mutex_);
        for (hwstub_engine_page *p : pages_) word(p->dead).store(1, std::memory_order_release);
    }
    fatal_pending_.store(true, std::memory_order_release);
    kick();
}

}  // namespace hwstub
