// A queue pair's data path: the send ring handed to the engine slot by slot (the slot number is the engine's wr_id,
// so a completion finds its request without a search), completions written in posting order, the socket served
// without blocking, and the error paths (Terminate either way, peer close, reset) that end in ERROR with everything
// flushed.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {

QueuePair::QueuePair(const QpSetup &setup, uint8_t *sq_ring, ReceiveQueue &rq, bool shared, CompletionQueue &scq,
                     CompletionQueue &rcq, StagTable &stags, QpOwner &owner)
    : setup_(setup),
      sq_slot_size_(static_cast<uint32_t>(softrnic_sq_slot_size(setup.init.sq_sge, setup.init.max_inline))),
      sq_(sq_ring, setup.init.sq_depth, sq_slot_size_),
      rq_(rq),
      shared_rq_(shared),
      scq_(scq),
      rcq_(rcq),
      stags_(stags),
      owner_(owner),
      full_streams_(Progress::get().full_streams()) {
    scq_.attach(this);
    if (&rcq_ != &scq_) rcq_.attach(this);
}

QueuePair::~QueuePair() {
    scq_.detach(this);
    if (&rcq_ != &scq_) rcq_.detach(this);
    int fd = -1;
    int watched = -1;
    std::unique_ptr<rdma::provider::Channel> chan;  // its bell stays open until the thread let go of it
    bool registered = false;
    {
        std::lock_guard g(mutex_);
        if (stream_) {
            fd = stream_->fd;
            watched = stream_->watched_fd();
            chan = std::move(stream_->chan);
            stream_->unpark();
            stream_.reset();
        }
        registered = registered_;
    }
    if (registered) Progress::get().remove(this, watched);
    if (fd >= 0) ::close(fd);
}

// Decides what the stream's condition means for the QP: failures end in ERROR, an orderly close sends the FIN.
void QueuePair::settle() {
    if (!stream_) return;
    Stream &s = *stream_;
    // A reset met while sending (posting, say) hides nothing the peer sent before it: its Terminate says why.
    if (s.fail == Stream::Fail::llp_reset && !s.peer_terminate && !s.engine.failed()) receive(kPosterBudget);
    counters_.publish(carried_, s.engine.stats());
    if (s.peer_terminate) {
        const iwarp::TermCode c = s.term.code;
        counters_.terminate_received();
        add_event(RI_AE_QP_TERMINATE_RECEIVED, term_word(c));
        if (is_access_error(c)) add_event(RI_AE_QP_REMOTE_ACCESS_ERROR, term_word(c));
        return enter_error(oldest_inflight(), status_of_peer_terminate(c), term_word(c), RI_WC_WR_FLUSH_ERR, true);
    }
    if (s.engine.failed()) {
        const iwarp::TermCode c = s.engine.failure();
        const bool sent = s.engine.terminate_sent() && s.parked.empty();
        if (!sent && s.fail == Stream::Fail::none) {
            set_state(RI_QPS_TERMINATE);  // the Terminate waits for room in the socket
            return;
        }
        if (c == iwarp::term::kLlpCrcError && !s.consumer_terminate) counters_.crc_error();
        if (sent) counters_.terminate_sent();
        if (sent && !s.consumer_terminate) {
            add_event(RI_AE_QP_TERMINATE_SENT, term_word(c));
            add_event(iwarp::event_of_sent_terminate(c), term_word(c));
        } else if (!sent) {
            add_event(RI_AE_QP_LLP_RESET);
        }
        return enter_error(-1, RI_WC_WR_FLUSH_ERR, term_word(c), iwarp::receive_status_of_sent_terminate(c), true);
    }
    switch (s.fail) {
        case Stream::Fail::local:
            return enter_error(static_cast<int>(s.fail_slot), s.fail_status, 0, RI_WC_WR_FLUSH_ERR, true);
        case Stream::Fail::llp_closed:
            add_event(RI_AE_QP_LLP_CLOSED);
            return enter_error(oldest_inflight(), RI_WC_LLP_ERR, 0, RI_WC_WR_FLUSH_ERR, true);
        case Stream::Fail::llp_reset:
            add_event(RI_AE_QP_LLP_RESET);
            return enter_error(oldest_inflight(), RI_WC_LLP_ERR, 0, RI_WC_WR_FLUSH_ERR, true);
        case Stream::Fail::none: break;
    }
    // Orderly close: once every send request completed and nothing is left to write, the FIN follows.
    if (state_ == RI_QPS_CLOSING && !s.fin_sent && sq_.empty() && s.engine.outstanding() == 0 && s.parked.empty() &&
        s.tx_idle) {
        // The socket's FIN first, then the ring's: the peer's kAL, which judges an orderly end by the FIN on its copy
        // of the socket, has it by the time the peer's QP reads the end of the ring (loopback delivers it within
        // the call).
        (void)::shutdown(s.fd, SHUT_WR);
        if (s.chan) s.chan->close_write();
        s.fin_sent = true;
        add_event(RI_AE_QP_SQ_DRAINED);
    }
}

ri_status_t QueuePair::attach(int fd, const ri_llp_params_t &llp) {
    // The same-host channel's bell is owned from here on, as the socket is.
    int bell = (llp.mpa_flags & RI_LLP_SAME_HOST) != 0 ? llp.channel : -1;
    std::unique_ptr<rdma::provider::Channel> chan;  // owns the bell once made
    auto refuse = [fd, &bell](ri_status_t rc) {
        if (fd >= 0) ::close(fd);
        if (bell >= 0) ::close(bell);
        return rc;
    };
    if (fd < 0) return refuse(RI_EBADF);
    if ((llp.mpa_flags & RI_LLP_SAME_HOST) != 0) {
        if (bell < 0) return refuse(RI_EBADF);
        chan = std::make_unique<rdma::provider::Channel>();
        const ri_status_t rc = chan->open(bell);
        bell = -1;  // the channel's now (open() closes it when it fails)
        if (rc != RI_OK) return refuse(rc);
    }
    const bool p2p = (llp.mpa_flags & RI_MPA_PEER2PEER) != 0;
    if ((llp.mpa_revision != 1 && llp.mpa_revision != 2) || llp.rtr_type > RI_RTR_READ ||
        (p2p && (llp.mpa_revision != 2 || llp.rtr_type == RI_RTR_NONE))) {
        return refuse(RI_EINVAL);
    }
    (void)iwarp::slow_copy_offsets();  // measured here, once per process, rather than by the first large message
    // RDMA messages go when posted: no Nagle. The option also checks the descriptor in the same system call: it
    // succeeds only on a TCP socket. A stream socket of another family (a test's socket pair) refuses it and is
    // then checked by its type. The socket's blocking mode is left as it is: every send and receive of the stream
    // says MSG_DONTWAIT, so two more system calls per connection (read the flags, maybe set them) buy nothing.
    const int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        int type = 0;
        socklen_t len = sizeof type;
        if (errno == EBADF || errno == ENOTSOCK ||
            ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
            return refuse(RI_EBADF);
        }
    }
    const int first_limit = setup_.tunables.unsent_budget == 0 || chan ? 0 : UnsentBudget::kFirstLimit;
    const bool limited = first_limit != 0 && UnsentBudget::set_limit(fd, first_limit);
    {
        std::lock_guard g(mutex_);
        if (state_ != RI_QPS_IDLE || stream_) return refuse(RI_EINVAL);
        ri_llp_params_t p = llp;
        p.fd = fd;
        if (p.mpa_revision == 1 && p.ird == 0 && p.ord == 0) {
            // Revision 1 negotiates no IRD/ORD on the wire: the QP's own apply.
            p.ird = setup_.init.ird;
            p.ord = setup_.init.ord;
        }
        ri_llp_params_t framing = p;
        if (chan) {
            // The channel is memory, not a network: FPDUs as large as MPA allows, and no CRC or markers (the kAL
            // cleared them for both ends).
            framing.fpdu_max = 1u << 17;
            framing.mpa_flags &= ~static_cast<uint32_t>(RI_MPA_CRC | RI_MPA_MARKERS);
        }
        const bool same_host = chan != nullptr;
        on_channel_.store(same_host, std::memory_order_relaxed);
        iwarp::EngineConfig cfg = iwarp::engine_config(framing, setup_.pd, std::min(sq_.depth(), kEngineQueue));
        if (chan) {
            // Single copy: this side takes pulls if its RNIC has single copy on (pull_min), the kAL named the peer's
            // process and it may read it; it sends them when the peer says it takes them (rnicpi/ri_channel.h). With
            // single copy off (the default) the probe of the peer's memory and its pidfd cost a connection nothing.
            cfg.accept_pull = setup_.tunables.pull_min != 0 && chan->accept_pulls();
            cfg.pull_min = setup_.tunables.pull_min;
        }
        rfc7306_ = cfg.rfc7306;
        stream_ = std::make_unique<Stream>(static_cast<iwarp::EngineOwner &>(*this), fd, std::move(chan), p, cfg,
                                           sq_.depth(), full_streams_);
        if ((p.mpa_flags & RI_LLP_FPDU_FIXED) != 0) stream_->emss.keep();  // FPDUs of the host's size, not the MSS
        // The initiator's first bytes may reach a peer that has not yet handed its socket to its QP (Linux siw):
        // see docs/siw-interop.md. A same-host peer is this stack.
        stream_->nudge_armed = !same_host && setup_.tunables.nudge && (p.mpa_flags & RI_MPA_INITIATOR) != 0 &&
                               (!p2p || p.rtr_type == RI_RTR_WRITE);
        stream_->rdma_mode = Clock::now();
        if (limited) stream_->unsent_limit = first_limit;
        registered_ = true;
        parked_.store(false, std::memory_order_relaxed);  // a reconnected QP starts with the thread's attention
        set_state(RI_QPS_RTS);
    }
    int watched = fd;
    {
        std::lock_guard g(mutex_);
        if (stream_) watched = stream_->watched_fd();
    }
    if (ri_status_t rc = Progress::get().add(this, watched); rc != RI_OK) {
        {
            std::lock_guard g(mutex_);
            stream_.reset();  // closes the channel
            set_state(RI_QPS_IDLE);
        }
        return refuse(rc);
    }
    {
        // A post from another thread may have filled the socket before the set knew it: ask for output now. (A
        // channel comes with its reader marked waiting, so the first bytes ring the bell without a look at the
        // rings here: an idle QP's channel costs no memory.)
        std::lock_guard g(mutex_);
        if (stream_ && stream_->out_watched) (void)update_interest();
    }
    // Requests posted in IDLE go now, and a peer-to-peer initiator's RTR.
    Outcome o;
    {
        std::lock_guard g(mutex_);
        out_ = &o;
        if (stream_) {
            issue();
            transmit(kPosterBudget);
            settle();
        }
        out_ = nullptr;
    }
    finish(o);
    return RI_OK;
}

void QueuePair::change_state(uint32_t state, iwarp::TermCode term) {
    Outcome o;
    {
        std::lock_guard g(mutex_);
        out_ = &o;
        switch (state) {
            case RI_QPS_ERROR:
                if (state_ != RI_QPS_ERROR) enter_error(-1, RI_WC_WR_FLUSH_ERR, 0, RI_WC_WR_FLUSH_ERR, false);
                break;
            case RI_QPS_IDLE:
                set_state(RI_QPS_IDLE);
                break;
            case RI_QPS_CLOSING:
                if (stream_ && state_ == RI_QPS_RTS) {
                    set_state(RI_QPS_CLOSING);
                    transmit(kPosterBudget);
                    settle();
                }
                break;
            case RI_QPS_TERMINATE:
                if (stream_ && (state_ == RI_QPS_RTS || state_ == RI_QPS_CLOSING)) {
                    stream_->consumer_terminate = true;
                    stream_->engine.abort(term);
                    transmit(kPosterBudget);
                    settle();
                }
                break;
            default: break;
        }
        out_ = nullptr;
    }
    finish(o);
}

uint32_t QueuePair::state() const noexcept {
    std::lock_guard g(mutex_);
    return state_;
}

bool QueuePair::llp(ri_llp_params_t &out) const {
    std::lock_guard g(mutex_);
    if (!stream_) return false;
    out = stream_->llp;
    return true;
}

bool QueuePair::attached() const {
    std::lock_guard g(mutex_);
    return stream_ != nullptr;
}

void QueuePair::service() {
    Outcome o;
    {
        std::lock_guard g(mutex_);
        if (!stream_) return;
        out_ = &o;
        stream_->tx_blocked = false;  // an event of the socket (maybe EPOLLOUT) or a kick: try again
        if (stream_->chan) (void)stream_->chan->drain_bell();  // a gone peer shows in the reads and writes
        park_asked_ = false;
        // Served by the thread (the consumer armed its CQ, the stream ended, output): not parked any more.
        bool change = parked_.exchange(false, std::memory_order_relaxed);
        if (change) polls_seen_ = polls();
        pump(kServiceBudget);
        out_ = nullptr;
        if (stream_) {
            Stream &s = *stream_;
            if (s.out_watched && !s.tx_blocked) {
                s.out_watched = false;  // the socket took everything: no more output edges wanted
                s.full_streams.fetch_sub(1, std::memory_order_relaxed);
                change = true;
            }
            // The consumer polled its CQ (with nothing there) again and again since the thread's last service: it
            // moves the stream itself, and the thread's wakeups for each message would only take its CPU and its
            // QP. Parked, the stream's input wakes nobody until the consumer stops polling or arms its CQ. A
            // consumer that armed a CQ of this QP is going to sleep (or sleeps): not parked while it is armed.
            const bool polled = polls() - polls_seen_ >= kBusyPolls && !cq_armed();
            // A full channel is memory, not a socket: a consumer that polls moves its backlog as soon as the peer
            // made room (try_service). Left to the thread, every read of the peer rang a bell, and the thread and
            // the polling consumer took the QP from each other (8 MiB Writes through a 512 KiB ring: 12-15 GB/s
            // before, 16-17 after, in one sitting; transmit() keeps a parked stream's full channel its own).
            if (polled && s.out_watched && s.chan) {
                s.out_watched = false;
                s.full_streams.fetch_sub(1, std::memory_order_relaxed);
                s.chan->disarm_write();
            }
            if (!s.out_watched && polled) {
                parked_.store(true, std::memory_order_relaxed);
                // A CQ armed since the look above: CompletionQueue::request_notify() stores its arming, fences and
                // then looks for parked QPs; this stores the park, fences and looks at the arming, so one of the
                // two sees the other. Seen here: the park is undone and the stream served again at once (it may
                // have just given up watching a full channel for its consumer's polls).
                std::atomic_thread_fence(std::memory_order_seq_cst);
                if (cq_armed()) {
                    parked_.store(false, std::memory_order_relaxed);
                    o.kick = true;
                } else {
                    Progress::get().parked(this);
                    change = true;
                }
            }
            polls_seen_ = polls();
            const bool wanted = !parked_.load(std::memory_order_relaxed) || s.out_watched;
            // A channel's bell is rung once per request in its rings: every service asks again.
            if ((change || s.chan || (wanted && !s.in_set)) && !update_interest()) {
                // The set could not take the socket (no memory for its entry): the consumer's polls move the
                // stream, and the thread's millisecond look at parked streams asks again.
                parked_.store(true, std::memory_order_relaxed);
                Progress::get().parked(this);
            }
        }
    }
    finish(o);
}

bool QueuePair::try_service(const CompletionQueue &cq, uint64_t poll, bool *moved) {
    Outcome o;
    {
        std::unique_lock g(mutex_, std::try_to_lock);
        if (!g.owns_lock()) {
            if (on_channel_.load(std::memory_order_relaxed)) held_polls_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        if (!stream_) return true;
        const uint64_t before = stream_->io_bytes;
        // Busy polling is polls of this QP close together. A QP among many on its CQ is reached by one empty poll
        // in many (round robin): however hard the consumer polls the CQ, that QP's input is not what it waits
        // for, and parking it would only make the progress thread unpark and park it again every millisecond.
        uint64_t &last = &cq == &scq_ ? last_poll_send_cq_ : last_poll_recv_cq_;  // each CQ counts its own polls
        const bool close = poll - last <= kAdjacentPolls;
        last = poll;
        // The socket was full and the progress thread moves the backlog when EPOLLOUT comes. A consumer that keeps
        // posting while it polls (a stream of messages) moves the backlog itself once the socket has room again:
        // poll() takes no socket lock, so it does not fight the stack's ACK processing as a refused sendmsg would.
        // One that only waits leaves it to the thread and yields (a thread hand-off per refill cost a stream of
        // 1 MiB Writes a sixth of its bandwidth; taking over while only waiting slowed a 1 MiB ping-pong).
        if (stream_->tx_blocked) {
            // A same-host channel's ring is memory: a consumer that polls takes the backlog over as soon as the
            // peer made room, posting or not. Left to the progress thread, every refill of a full ring was a bell
            // and a wake-up, and a stream could stay that way for a tenth of a second at 5 GB/s (1 MiB Writes:
            // 5 to 13 of 40 rounds of 0.1 s, against 0 or 1 taken over).
            if (stream_->chan) {
                // Resumed only for a useful piece of room, not for each of the reader's hand-backs. Room or not,
                // the poll goes on to read the inbound ring: a peer whose own ring is full may wait for that.
                const uint64_t useful =
                    std::min<uint64_t>(stream_->chan->ring_size() / 4, rdma::provider::Channel::kPublishEvery);
                if (stream_->chan->writable() >= useful) stream_->tx_blocked = false;
            } else {
                if (posts_since_poll_ == 0) return false;
                pollfd p{stream_->fd, POLLOUT, 0};
                if (::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0) return false;
                stream_->tx_blocked = false;
            }
        }
        if (close) ++inline_polls_;
        posts_since_poll_ = 0;
        // A consumer polling this hard is parked at the thread's next service; a stream whose socket never raises
        // an edge (a pure sender's) would never get one: one kick per service brings the thread to look.
        if (!park_asked_ && !parked_.load(std::memory_order_relaxed) && polls() - polls_seen_ >= kBusyPolls &&
            !cq_armed()) {
            park_asked_ = true;
            o.kick = true;
        }
        // The progress thread serves this stream's input (it is not parked), and it has nothing of its own to send
        // or to wait for: an arriving byte raises the edge that wakes the thread, so a read here would only hear
        // EAGAIN. On a CQ shared by thousands of idle QPs, those reads were most of a busy poller's spin.
        if (parked_.load(std::memory_order_relaxed) || !quiet(*stream_)) {
            out_ = &o;
            pump(kServiceBudget, false);
            out_ = nullptr;
            if (moved != nullptr && stream_ && stream_->io_bytes != before) *moved = true;
        }
    }
    finish(o);
    return true;
}

bool QueuePair::recheck_park() {
    // Held: the consumer is posting or polling right now, so the stream is still its own. Waiting for the lock would
    // put the thread to sleep on the futex and make the consumer's unlock a system call and a wake-up, which on a
    // busy host preempts a spinning consumer (most of the futex calls of a 64 KiB ping-pong were this look).
    std::unique_lock g(mutex_, std::try_to_lock);
    const bool armed = cq_armed();
    if (!g.owns_lock()) {
        // A consumer that armed a CQ of this QP is about to sleep and must not wait for the next look: the thread
        // serves the QP in this pass (service() waits for the lock and unparks).
        if (armed && parked_.load(std::memory_order_relaxed)) Progress::get().kick(this);
        return parked_.load(std::memory_order_relaxed);
    }
    if (!stream_ || !parked_.load(std::memory_order_relaxed)) return false;
    if (polls() != polls_seen_ && !armed) {
        polls_seen_ = polls();
        return true;  // still polled: stays the consumer's
    }
    parked_.store(false, std::memory_order_relaxed);
    if (!update_interest()) {
        parked_.store(true, std::memory_order_relaxed);  // not in the set: looked at again in a millisecond
        return true;
    }
    // Requests held for a poll that did not come go now (the thread serves it later in this pass), and so does what
    // the polls were moving on a channel (the backlog of a full ring, a message beyond one poll's budget:
    // transmit()); bytes left in the channel's ring are the arming's (update_interest).
    if (sending(*stream_)) Progress::get().kick(this);
    return false;
}

bool QueuePair::sending(const Stream &s) const noexcept {
    return !s.tx_idle || s.tx_blocked || !s.parked.empty() || s.corked != 0 || sq_.count() != s.issued;
}

bool QueuePair::consumer_moves(const Stream &s) const noexcept {
    return s.chan && parked_.load(std::memory_order_relaxed);
}

bool QueuePair::quiet(const Stream &s) const noexcept {
    return s.fail == Stream::Fail::none && !sending(s) && s.inflight == 0;
}

bool QueuePair::update_interest() {
    Stream &s = *stream_;
    const bool input = !parked_.load(std::memory_order_relaxed);
    if (s.chan) {
        // The bell stays in the set whatever the stream wants (its end of file is the peer's end); what the
        // stream waits for is said in the rings, so that the other side rings only for a sleeper.
        if (!s.in_set) s.in_set = Progress::get().interest(this, s.chan->bell(), true, false, false);
        bool missed = false;  // bytes or room came before the flag was up: nobody rings for them
        if (input) {
            missed = !s.chan->arm_read();
        } else {
            s.chan->disarm_read();
        }
        if (s.out_watched) missed |= !s.chan->arm_write();
        if (missed) Progress::get().kick(this);
        return s.in_set;
    }
    s.in_set = Progress::get().interest(this, s.fd, input, s.out_watched, s.in_set);
    return s.in_set || (!input && !s.out_watched);
}

}  // namespace softrnic::datapath
