// A queue pair's receive side: the stream read into the engine, small targets through the thread's staging buffer,
// large ones straight into place; and pump(), one pass each way.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {
namespace {

// What one inline pass of a parked same-host channel reads at most before the progress thread takes over: bytes come
// as fast as the peer copies them, so a budget only bounds how long one poll keeps the QP (64 MiB: a few ms).
constexpr size_t kParkedChannelBudget = size_t{64} << 20;

// Reads that start at a header ask for this much through the staging buffer.
constexpr size_t kStageSize = 8192;

// A stream whose last segment carried a payload from about kStageSize to 32 KiB reads up to this much through the
// staging buffer, so the next such FPDU (header, payload, CRC) comes in one recv and is copied to its target: the
// 8 KiB read took the header and all but the last few bytes of an 8 KiB payload, and a second recv the rest, which
// cost a ping-pong of 8 KiB Writes about 0.8 us per message (7.6 us against 6.9). A larger payload is placed by the
// kernel's own copy instead (the two-part read below): copying it once more would cost more than the call it saves.
constexpr size_t kStageMid = 32768 + 1024;

// The thread's page-aligned staging buffer for reads that start at a header (kStageMid bytes); allocated on first
// use, then reused. Not on the stack: a consumer's threads may have small stacks (dapltest's overflowed under ASan).
struct StageBuffer {
    struct Free {
        void operator()(uint8_t *p) const noexcept { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> data;
};
thread_local StageBuffer t_stage;

// The thread's staging buffer, or null when it could not be allocated.
uint8_t *stage_buffer() noexcept {
    StageBuffer &b = t_stage;
    if (!b.data) {
        void *p = nullptr;
        if (::posix_memalign(&p, 4096, kStageMid) != 0) return nullptr;
        b.data.reset(static_cast<uint8_t *>(p));
    }
    return b.data.get();
}

}  // namespace

void QueuePair::receive(size_t budget, bool to_eagain) {
    Stream &s = *stream_;
    iwarp::Receiver &rx = s.engine.receiver();
    size_t moved = 0;
    const uint64_t receives_before = s.receives_done;
    // A reset met while sending still lets us read what the peer sent before it: a Terminate says why it reset.
    while (s.fail == Stream::Fail::none || s.fail == Stream::Fail::llp_reset) {
        std::span<uint8_t> dst = rx.next_buffer();
        if (dst.empty()) return;  // failed: the Terminate goes out next
        ssize_t n;
        size_t asked;
        if (dst.size() < kStageBelow) {
            // Page-aligned, as the kernel's socket page a message starts in usually is (see realign()): its copy
            // of the next bytes then never takes the slow `rep movsb` case.
            uint8_t small[kStageBelow];  // only when the thread's buffer could not be allocated
            uint8_t *stage = stage_buffer();
            const size_t last = rx.current_payload_len();
            asked = last + kStageBelow >= kStageSize && last + kStageBelow <= kStageMid ? kStageMid : kStageSize;
            if (stage == nullptr) {
                stage = small;
                asked = sizeof small;
            }
            n = s.recv(stage, asked);
            if (n > 0) (void)rx.feed(std::span<const uint8_t>(stage, static_cast<size_t>(n)));
        } else {
            // Payload goes straight to its placement target (no copy); what follows it (the trailer, the next
            // header and the start of the next payload) comes in the same call through the staging buffer.
            uint8_t stage[kStageSize];
            iovec iov[2] = {{dst.data(), dst.size()}, {stage, sizeof stage}};
            asked = dst.size() + sizeof stage;
            n = s.recvv(iov, 2);
            if (n > 0) {
                const size_t placed = std::min(static_cast<size_t>(n), dst.size());
                rx.advance(placed);
                if (static_cast<size_t>(n) > placed) {
                    (void)rx.feed(std::span<const uint8_t>(stage, static_cast<size_t>(n) - placed));
                }
            }
        }
        if (n == 0) {
            if (s.fail == Stream::Fail::none) s.fail = Stream::Fail::llp_closed;  // a reset stays a reset
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) s.fail = Stream::Fail::llp_reset;
            return;
        }
        moved += static_cast<size_t>(n);
        s.io_bytes += static_cast<uint64_t>(n);
        s.heard = true;
        s.nudge_armed = false;  // the peer reads and speaks: it needs no nudge
        // A parked channel's consumer reads on, up to kParkedChannelBudget, while it only places (Writes): handing
        // the rest to the progress thread would put a third thread on the copies, beside the two consumers
        // (bench_samehost's 64 KiB Writes moved 24 GB/s that way, 40 without). Once a receive completed, the
        // consumer has work to see and receives to post again: the pass ends at the usual budget.
        const bool own = consumer_moves(s);
        const bool read_on = own && s.receives_done == receives_before;
        if (moved >= (read_on ? kParkedChannelBudget : budget)) {
            // The progress thread reads on, except for a parked channel's consumer, whose next poll does: the
            // thread's service would unpark the stream and the two threads would take it from each other (Sends of
            // 64 KiB to 8 MiB: 13-16 GB/s with the kick, 28-29 without, in one sitting).
            if (!own) out_->kick = true;
            return;
        }
        // A short read took what the socket held: asking again would most likely hear EAGAIN, a system call on the
        // latency path (a busy-polling receiver would pay it before seeing the data it just placed). Inline
        // progress stops here; the progress thread reads on, since the end of the stream (or bytes that came
        // after the edge it woke for) may be behind a short read, and no edge would announce them again.
        if (!to_eagain && static_cast<size_t>(n) < asked) return;
    }
}

void QueuePair::pump(size_t budget, bool to_eagain) {
    Stream &s = *stream_;
    const uint64_t before = s.io_bytes;
    // Nothing held, waiting or left to send: no transmit pass (a busy poller's empty polls are most passes).
    const bool idle = !sending(s);
    if (!idle) transmit(budget);
    if (!stream_) return;
    receive(budget, to_eagain);
    // Not a byte either way and nothing failed: no request can have been answered, freed room or failed, so there
    // is nothing to issue, send or settle.
    if (idle && s.io_bytes == before && s.fail == Stream::Fail::none && !s.engine.failed() && !s.peer_terminate) {
        return;
    }
    // Inbound responses and completions free engine room: more work goes, and read responses are owed. A plain
    // inbound Send or Write leaves nothing to send: no transmit pass for it (30 ns of a small message's path).
    issue();
    if (sending(s) || s.engine.has_frame()) transmit(budget);
    settle();
}

}  // namespace softrnic::datapath
