// The siw nudge (docs/siw-interop.md): an initiator whose first FPDUs met silence sends a zero-length Write, on the
// progress thread's timer.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {

void QueuePair::nudge_sent_bytes() {
    Stream &s = *stream_;
    const auto now = Clock::now();
    if (!s.nudge_timer) {
        if (now - s.rdma_mode > kNudgeWindow) {
            s.nudge_armed = false;  // a first send this late follows no handshake the peer may still be in
            return;
        }
        s.nudge_timer = true;
        out_->timer = now + kNudgeAfter;
    }
    s.last_send = now;
}

std::optional<Clock::time_point> QueuePair::nudge_due(Clock::time_point now) {
    Outcome o;
    std::optional<Clock::time_point> next;
    {
        std::lock_guard g(mutex_);
        if (!stream_) return std::nullopt;
        Stream &s = *stream_;
        if (!s.nudge_armed || state_ != RI_QPS_RTS || s.fail != Stream::Fail::none ||
            now - s.rdma_mode > kNudgeGiveUp) {
            s.nudge_armed = false;
            s.nudge_timer = false;
            return std::nullopt;
        }
        const auto due = s.last_send + (s.nudges == 0 ? kNudgeAfter : kNudgeBackoff * kNudgeAfter);
        if (now < due) return due;
        // Still sending (the socket full, work the engine has not framed): the stream is not silent yet.
        if (!s.tx_idle || !s.parked.empty() || !s.engine.nudge()) return now + kNudgeAfter;
        out_ = &o;
        ++s.nudges;
        counters_.nudge();
        transmit(kPosterBudget);  // moves last_send
        settle();
        out_ = nullptr;
        if (stream_ && s.nudge_armed && s.nudges < kMaxNudges) {
            next = s.last_send + kNudgeBackoff * kNudgeAfter;
        } else if (stream_) {
            s.nudge_armed = false;
            s.nudge_timer = false;
        }
    }
    finish(o);
    return next;
}

}  // namespace softrnic::datapath
