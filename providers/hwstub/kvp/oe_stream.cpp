// The offload engine's stream pump: frames built ahead of the socket and written in one sendmsg (a partial write
// resumes from the head frame), the socket read into the QP's iWARP engine, and how a stream ends.
#include "oe_inside.hpp"

namespace hwstub {

// Appends what is unsent of frame @p i of the ring (the head's remainder, or a whole frame) to @p iov; false when
// it does not fit in the same sendmsg.
bool OffloadEngine::add_frame(const Stream &s, size_t i, iovec *iov, size_t &iovcnt) noexcept {
    const iwarp::TxFrame &f = s.frames[(s.head + i) % s.frames.size()];
    const size_t first = i == 0 ? s.head_iov : 0;
    if (iovcnt + (f.iovcnt - first) > kSendIov) return false;
    std::memcpy(iov + iovcnt, f.iov + first, (f.iovcnt - first) * sizeof(iovec));
    iovcnt += f.iovcnt - first;
    return true;
}

// The socket took @p n bytes from the head of the frame ring: frames wholly written leave it.
void OffloadEngine::written(Stream &s, size_t n) {
    if (!s.chan) providers::common::sent_on(s.emss, s.engine, s.fd, n);  // a channel has no MSS to follow
    while (n > 0 && s.count > 0) {
        iwarp::TxFrame &f = s.frames[s.head];
        n = providers::common::consume(f.iov, f.iovcnt, s.head_iov, n);
        if (s.head_iov < f.iovcnt) return;  // the head frame is written in part
        s.head_iov = 0;
        s.head = (s.head + 1) % s.frames.size();
        --s.count;
        s.engine.frame_sent();
    }
}

// A QP that failed here (a bad WQE, a lost completion, an overrun queue) tells its peer why before its stream goes:
// the frames built, then the Terminate, as far as the socket takes them now. A full socket loses the Terminate;
// the connection's reset then tells the peer.
void OffloadEngine::send_terminate(Stream &s) {
    iwarp::Engine &engine = s.engine;
    if (!engine.failed() || s.error != 0 || s.eof) return;
    while (!(engine.terminate_sent() && s.count == 0)) {
        while (s.count < s.frames.size()) {
            const size_t slot = (s.head + s.count) % s.frames.size();
            if (!engine.next_frame(s.frames[slot])) break;
            ++s.count;
        }
        if (s.count == 0) return;
        iovec iov[kSendIov];
        size_t iovcnt = 0;
        for (size_t i = 0; i < s.count; ++i) {
            if (!add_frame(s, i, iov, iovcnt)) break;
        }
        const ssize_t n = s.send(iov, iovcnt);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        written(s, static_cast<size_t>(n));
    }
}

// Moves what the socket holds into the QP's engine (at most the stream budget); true if anything came.
bool OffloadEngine::receive(Qp &qp) {
    Stream &s = *qp.stream;
    bool did = false;
    // Receive: payload straight into its target when the receiver asks for many bytes, else through a stage.
    iwarp::Receiver &rx = s.engine.receiver();
    size_t moved = 0;
    while (!s.eof && s.error == 0 && moved < kStreamBudget) {
        std::span<uint8_t> dst = rx.next_buffer();
        if (dst.empty()) break;  // failed: the Terminate goes out next
        ssize_t n;
        if (dst.size() < kStageBelow) {
            uint8_t stage[kStageSize];
            n = s.recv(stage, sizeof stage);
            if (n > 0) {
                corrupt_inbound(qp, stage[n - 1]);
                (void)rx.feed(std::span<const uint8_t>(stage, static_cast<size_t>(n)));
            }
        } else {
            n = s.recv(dst.data(), dst.size());
            if (n > 0) {
                corrupt_inbound(qp, dst[static_cast<size_t>(n) - 1]);
                rx.advance(static_cast<size_t>(n));
            }
        }
        if (n == 0) {
            s.eof = true;
            break;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) s.error = errno;
            break;
        }
        moved += static_cast<size_t>(n);
        did = true;
    }
    return did;
}

// Moves bytes both ways on the QP's socket and notices how the stream ends.
bool OffloadEngine::serve_stream(Qp &qp, Pending &out) {
    Stream &s = *qp.stream;
    iwarp::Engine &engine = s.engine;
    bool did = receive(qp);
    // Transmit: keep the frame ring full and hand the socket everything built, in one sendmsg.
    size_t moved = 0;
    int64_t now = 0;  // read once, and only when a delayed frame asks
    while (s.error == 0 && moved < kStreamBudget) {
        while (s.count < s.frames.size()) {
            const size_t slot = (s.head + s.count) % s.frames.size();
            if (!engine.next_frame(s.frames[slot])) break;
            ++s.count;
            ++qp.stats.tx_fpdus;
            s.due[slot] = 0;
            s.lost[slot] = 0;
            if (faults_armed_for(qp)) outbound_faults(qp, slot);
        }
        // Frames the wire lost count as sent.
        while (s.count > 0 && s.head_iov == 0 && s.lost[s.head] != 0) {
            s.lost[s.head] = 0;
            s.head = (s.head + 1) % s.frames.size();
            --s.count;
            engine.frame_sent();
            did = true;
        }
        if (s.count == 0) break;
        iovec iov[kSendIov];
        size_t iovcnt = 0;
        for (size_t i = 0; i < s.count; ++i) {
            const size_t slot = (s.head + i) % s.frames.size();
            if (i > 0 && s.lost[slot] != 0) break;  // goes when it is the head
            if (s.due[slot] != 0) {
                if (now == 0) now = steady_ns();
                if (s.due[slot] > now) {
                    if (wake_at_ns_ == 0 || s.due[slot] < wake_at_ns_) wake_at_ns_ = s.due[slot];
                    break;
                }
            }
            if (!add_frame(s, i, iov, iovcnt)) break;  // the rest goes in the next sendmsg
        }
        if (iovcnt == 0) break;  // the head waits for its delay
        const ssize_t n = s.send(iov, iovcnt);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                s.want_out = true;
            } else {
                s.error = errno;
                s.tx_failed = true;
            }
            break;
        }
        did = true;
        moved += static_cast<size_t>(n);
        written(s, static_cast<size_t>(n));
        s.want_out = s.count > 0;
        if (s.want_out) break;  // the socket took part: wait for room
    }
    const iwarp::EngineStats &es = engine.stats();
    stats_.tx_bytes.fetch_add(es.tx_bytes - qp.stats.tx_bytes, std::memory_order_relaxed);
    stats_.rx_bytes.fetch_add(es.rx_bytes - qp.stats.rx_bytes, std::memory_order_relaxed);
    qp.stats.tx_bytes = es.tx_bytes;
    qp.stats.rx_bytes = es.rx_bytes;
    qp.stats.rx_fpdus = es.rx_fpdus;
    retire_sends(qp, out);

    // An orderly close: FIN once everything posted before it is sent and done (the kAL sees the peer's FIN).
    if (s.closing && !s.fin_sent && s.count == 0 && engine.outstanding() == 0 && qp.sq_done == qp.sq_started &&
        closed_queue(qp)) {
        s.fin_sent = true;
        // The socket's FIN first, then the ring's: the peer's kAL, which judges an orderly end by the FIN on its
        // copy of the socket, has it by the time the peer's engine reads the end of the ring.
        (void)::shutdown(s.fd, SHUT_WR);
        if (s.chan) s.chan->close_write();
        did = true;
    }
    // A socket that failed while we sent (the peer reset it) may still hold what the peer sent before: its
    // Terminate says why, so it is read before the failure decides.
    if (s.error != 0 && s.tx_failed && !s.peer_terminated) {
        const int err = s.error;
        s.error = 0;
        s.tx_failed = false;
        (void)receive(qp);
        if (s.error == 0) s.error = err;
    }
    // How the stream ends: the peer's Terminate, ours once it is out, or the socket.
    // The events and statuses are iwarp/verbs_errors.hpp's, as every provider of this tree reports them.
    if (s.peer_terminated) {
        const iwarp::TermCode c = s.term.code;
        const uint32_t word = iwarp::term_word(c);
        fail_oldest(qp, static_cast<uint8_t>(iwarp::status_of_peer_terminate(c)), word);
        enter_error(qp, out, RI_AE_QP_TERMINATE_RECEIVED, word);
        if (iwarp::is_access_error(c)) out.events.push_back(qp_event(qp.setup, RI_AE_QP_REMOTE_ACCESS_ERROR, word));
    } else if (engine.failed() && engine.terminate_sent() && s.count == 0) {
        ++qp.stats.terminates_sent;
        const iwarp::TermCode c = engine.failure();
        const uint32_t word = iwarp::term_word(c);
        if (c == iwarp::term::kLlpCrcError) ++qp.stats.crc_errors;
        qp.recv_fail_status = static_cast<uint8_t>(iwarp::receive_status_of_sent_terminate(c));
        enter_error(qp, out, RI_AE_QP_TERMINATE_SENT, word);
        out.events.push_back(qp_event(qp.setup, iwarp::event_of_sent_terminate(c), word));
    } else if (s.error != 0) {
        enter_error(qp, out, RI_AE_QP_LLP_RESET);
    } else if (s.eof) {
        enter_error(qp, out, RI_AE_QP_LLP_CLOSED);
    } else {
        return did;
    }
    flush(qp, out);
    return true;
}

}  // namespace hwstub
