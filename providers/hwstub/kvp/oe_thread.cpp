// The offload engine's thread: a pass over every queue and stream while there is work, then sleep on the doorbell
// and the sockets; interrupts held by moderation and delivered once the table lock is dropped.
#include "oe_inside.hpp"

namespace hwstub {

bool OffloadEngine::serve_qp(Qp &qp, Pending &out) {
    qp.sq_seen = qp.sq.posted();
    qp.rq_seen = qp.rq.posted();
    if (qp.error) return flush(qp, out);
    qp.out = &out;
    bool did = serve_receive_queue(qp, out);
    if (!qp.error) did |= serve_send_queue(qp, out);
    if (!qp.error && qp.stream) did |= serve_stream(qp, out);
    if (!qp.error && qp.cqe_lost) {
        if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
        enter_error(qp, out, RI_AE_QP_FATAL);
        did = true;
    }
    if (!qp.error && (qp.sq.overrun() || qp.rq.overrun())) {
        if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
        enter_error(qp, out, RI_AE_QP_FATAL);
        did = true;
    }
    if (qp.error) flush(qp, out);
    qp.out = nullptr;
    return did;
}

bool OffloadEngine::pass(Pending &out) {
    if (fatal_pending_.exchange(false, std::memory_order_acq_rel)) {
        ri_async_event_t e{};
        e.resource_type = RI_RES_RNIC;
        e.event_id = RI_AE_RNIC_FATAL;
        out.events.push_back(e);
    }
    if (dead()) {
        // A dead adapter executes nothing: it flushes what consumers post (they see the dead flag and stop). Each
        // QP's own fatal error too, so the kAL ends each connection (the peer hears it) as for any QP the adapter
        // ended.
        for (auto &[num, qp] : qps_) {
            if (qp->stream) qp->stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
            enter_error(*qp, out, RI_AE_QP_FATAL);
        }
    }
    bool did = false;
    for (auto &[num, qp] : qps_) did |= serve_qp(*qp, out);
    return did;
}

bool OffloadEngine::anything_to_do() {
    if (fatal_pending_.load(std::memory_order_acquire)) return true;
    // Only posts the last pass has not seen: work that waits (for RTS, a fence, a completion, the socket) is brought
    // back by a control operation or a socket event, so the engine never spins on it.
    for (auto &[num, qp] : qps_) {
        if (qp->sq.overrun() || qp->rq.overrun()) continue;  // in ERROR for good: nothing it posts is read
        if (qp->sq.posted() != qp->sq_seen || qp->rq.posted() != qp->rq_seen) return true;
    }
    return false;
}

void OffloadEngine::set_sleeping(uint32_t value) {
    for (hwstub_engine_page *p : pages_) word(p->sleeping).store(value, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

void OffloadEngine::moderate(Pending &out, bool idle) {
    const uint32_t cqes = moderation_cqes_.load(std::memory_order_relaxed);
    // Nothing held and nothing earned (most passes), or no moderation: no clock read, nothing to do.
    if (held_.empty() && (out.interrupts.empty() || cqes <= 1)) return;
    const int64_t now = steady_ns();
    for (uint32_t cq : out.interrupts) held_.push_back(Held{cq, now});
    out.interrupts.clear();
    const int64_t window = moderation_ns_.load(std::memory_order_relaxed);
    std::erase_if(held_, [&](const Held &h) {
        auto it = cqs_.find(h.cq);
        if (it == cqs_.end()) return true;  // the CQ is gone: nobody to interrupt
        if (idle || cqes <= 1 || it->second->writer.occupancy() >= cqes || now - h.since_ns >= window) {
            out.interrupts.push_back(h.cq);
            return true;
        }
        return false;
    });
}

void OffloadEngine::deliver(Pending &out) {
    for (uint32_t cq : out.interrupts) {
        stats_.interrupts.fetch_add(1, std::memory_order_relaxed);
        if (hooks_.interrupt) hooks_.interrupt(cq);
    }
    for (const auto &e : out.events) {
        if (hooks_.async_event) hooks_.async_event(e);
    }
    out.clear();
}

void OffloadEngine::run() {
    // The adapter's processor failing must not take krdmad with it: whatever escapes is the adapter's catastrophic
    // error, which every consumer of the instance hears (RI_AE_RNIC_FATAL), and the engine serves on as a dead one.
    std::string why;
    try {
        serve();
        return;
    } catch (const std::exception &e) {
        why = e.what();
    } catch (...) {
        why = "unknown exception";
    }
    {
        std::lock_guard g(mutex_);
        failure_ = why;
    }
    fail();
    try {
        serve();
    } catch (...) {
        // A dead engine that fails again stops: its pages already say dead.
    }
}

// Empties every channel bell among @p fds that poll() found readable (table lock held).
void OffloadEngine::drain_rung(const std::vector<pollfd> &fds) {
    for (const pollfd &p : fds) {
        if (p.revents == 0 || p.fd == efd_) continue;
        for (auto &[num, qp] : qps_) {
            if (qp->stream && qp->stream->chan && qp->stream->chan->bell() == p.fd) {
                (void)qp->stream->chan->drain_bell();
                break;
            }
        }
    }
}

// A look at every channel's bell without sleeping (table lock held): those that rang are emptied.
void OffloadEngine::look_at_bells(std::vector<pollfd> &fds) {
    fds.clear();
    for (auto &[num, qp] : qps_) {
        if (qp->stream && !qp->error && qp->stream->chan) fds.push_back(pollfd{qp->stream->chan->bell(), POLLIN, 0});
    }
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    drain_rung(fds);
}

void OffloadEngine::serve() {
    Pending out;
    std::vector<pollfd> fds;
    std::vector<uint32_t> bells;  // the QPs whose channel bells are in fds
    int64_t idle_since = 0;
    uint64_t busy_passes = 0;
    int64_t bells_seen = 0;
    while (!stop_.load(std::memory_order_acquire)) {
        bool did;
        {
            std::lock_guard g(mutex_);
            wake_at_ns_ = 0;
            did = pass(out);
            moderate(out, !did);
        }
        deliver(out);
        if (did) {
            idle_since = 0;
            // A busy engine never sleeps on the bells: about once a millisecond it looks whether one rang or its
            // peer went away (a peer gone ends the stream here, not at the kAL's grace period).
            if ((++busy_passes & 63) == 0) {
                const int64_t now = steady_ns();
                if (now - bells_seen >= 1'000'000) {
                    bells_seen = now;
                    std::lock_guard g(mutex_);
                    look_at_bells(fds);
                }
            }
            continue;
        }
        busy_passes = 0;
        bells_seen = steady_ns();
        // The poll window: a little while after its last work the engine keeps looking instead of sleeping, so the
        // next post or segment of a busy consumer meets an awake engine (no doorbell system call for the poster,
        // no wake-up for the engine), as an adapter's processor never sleeps. It costs a CPU while it looks: for
        // hosts with one to spare (where every CPU spins in a consumer, it starves them and they it).
        if (const int64_t window = poll_ns_.load(std::memory_order_relaxed); window > 0) {
            const int64_t now = steady_ns();
            if (idle_since == 0) idle_since = now;
            if (now - idle_since < window) continue;
        }
        idle_since = 0;
        // Nothing to do: say so, then look once more (a post may have landed before the flag was seen).
        bool work;
        fds.clear();
        fds.push_back(pollfd{efd_, POLLIN, 0});
        bells.clear();
        {
            std::lock_guard g(mutex_);
            set_sleeping(1);
            work = anything_to_do();
            for (auto &[num, qp] : qps_) {
                if (!qp->stream || qp->error) continue;
                Stream &s = *qp->stream;
                if (s.chan) {
                    // A channel says in its rings what the engine waits for, so that the peer rings only for a
                    // sleeper; the bell stays in the set whatever the stream wants (its end of file is the peer's
                    // end). A flag raised after the bytes or the room came is a bell nobody rings: no sleep then.
                    if (!s.eof && s.error == 0 && !s.chan->arm_read()) work = true;
                    if (s.want_out && !s.chan->arm_write()) work = true;
                    fds.push_back(pollfd{s.chan->bell(), POLLIN, 0});
                    bells.push_back(num);
                    continue;
                }
                short ev = s.eof || s.error != 0 ? 0 : POLLIN;
                if (s.want_out) ev |= POLLOUT;
                fds.push_back(pollfd{s.fd, ev, 0});
            }
        }
        if (!work && !stop_.load(std::memory_order_acquire)) {
            stats_.sleeps.fetch_add(1, std::memory_order_relaxed);
            int timeout = -1;
            if (wake_at_ns_ != 0) {  // a delayed frame falls due: wake for it (rounded up to whole ms)
                const int64_t left = wake_at_ns_ - steady_ns();
                timeout = left <= 0 ? 0 : static_cast<int>((left + 999'999) / 1'000'000);
            }
            ::poll(fds.data(), fds.size(), timeout);
        }
        {
            std::lock_guard g(mutex_);
            set_sleeping(0);
            // Awake: the channels' waiting flags go down, so that the engine's own writes into a ring it also reads
            // (both QPs of a channel served here) and the peer's writes ring no bell while it looks anyway; the
            // next sleep raises them again and looks at the rings after (arm_read/arm_write: no lost wake-up).
            for (auto &[num, qp] : qps_) {
                if (qp->stream && qp->stream->chan) {
                    qp->stream->chan->disarm_read();
                    qp->stream->chan->disarm_write();
                }
            }
            // The bells that rang are emptied, or the next poll would not sleep: a peer gone shows in the stream's
            // reads (after the bytes it left) and writes from now on.
            if (!bells.empty()) drain_rung(fds);
        }
        uint64_t count = 0;
        if (::read(efd_, &count, sizeof count) > 0) {
            std::atomic_ref<uint64_t>(page_->wakeups).fetch_add(1, std::memory_order_relaxed);
        }
    }
}

}  // namespace hwstub
