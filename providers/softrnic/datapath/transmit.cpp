// A queue pair's transmit side: frames built into the thread's batch and written with one sendmsg, a frame the
// socket took in part parked until the rest goes, and the full socket's share of the unsent budget.
#include "queue_pair_stream.hpp"

namespace softrnic::datapath {
namespace {

// Frames are built here first (per thread, never on the stack: one is 5 KiB); only one the socket did not take
// whole is copied out.
struct TxBatch {
    iwarp::TxFrame frames[kBatchFrames];
    iovec iov[kBatchIov];
};
thread_local TxBatch t_batch;

// The socket took @p n more bytes of parked frame @p p.
void advance(Parked &p, size_t n) { (void)providers::common::consume(p.frame.iov, p.frame.iovcnt, p.first, n); }

// Copies a partly written frame out of the thread's buffer into a frame of @p pool (when there is one); pieces
// pointing into the frame itself move with it.
std::unique_ptr<Parked> park(const iwarp::TxFrame &f, size_t written, FramePool *pool) {
    std::unique_ptr<Parked> p = pool != nullptr ? pool->get() : std::make_unique<Parked>();
    std::memcpy(static_cast<void *>(&p->frame), &f, sizeof f);
    const auto *lo = reinterpret_cast<const uint8_t *>(&f);
    auto *to = reinterpret_cast<uint8_t *>(&p->frame);
    for (size_t i = 0; i < p->frame.iovcnt; ++i) {
        auto *b = static_cast<uint8_t *>(p->frame.iov[i].iov_base);
        if (b >= lo && b < lo + sizeof f) p->frame.iov[i].iov_base = to + (b - lo);
    }
    p->first = 0;
    advance(*p, written);
    return p;
}

// Payload bytes one sendmsg may stage (realign()): the first FPDU of a batch is the one that needs it (see there),
// and an FPDU is at most 64 KiB.
constexpr size_t kRealignBytes = 128u << 10;

// The thread's staging area for realign(); allocated on first use, then reused.
struct RealignBuffer {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
};
thread_local RealignBuffer t_realign;
// Before a sendmsg that most likely starts at the beginning of a socket page, moves the payload pieces the kernel
// would copy with the slow `rep movsb` (see iwarp/copy.hpp) to addresses at the same page offset as their place in
// that page. The kernel copies the gather list into its socket page from offset 0 when the page is free again (every
// byte sent before was read and acknowledged, as in a request/response exchange), so a page-aligned payload 16 bytes
// into the batch (after its FPDU's header) would land 16 bytes after its source, modulo 4 KiB: 2 GB/s instead of 40
// on AMD Zen 3/4. A copy here at memory speed saves most of it; the frames keep pointing at the consumer's memory
// (only the gather list changes), so a frame the socket takes only part of is parked as before.
void realign(iovec *iov, size_t n) {
    RealignBuffer &r = t_realign;
    size_t used = 0;
    uint64_t at = 0;  // where this piece lands in the socket page
    for (size_t i = 0; i < n; ++i) {
        iovec &v = iov[i];
        if (v.iov_len >= iwarp::kAliasCheckMin &&
            iwarp::aliased_copy(reinterpret_cast<const void *>(static_cast<uintptr_t>(at)), v.iov_base)) {
            if (r.data == nullptr) {
                r.size = kRealignBytes + 2 * 4096;
                r.data = std::make_unique_for_overwrite<uint8_t[]>(r.size);
            }
            const auto base = reinterpret_cast<uintptr_t>(r.data.get()) + used;
            const size_t skip = static_cast<size_t>((at - base) & 4095u);
            if (used + skip + v.iov_len > r.size) return;
            uint8_t *to = r.data.get() + used + skip;
            iwarp::copy_payload(to, v.iov_base, v.iov_len);
            v.iov_base = to;
            used += skip + v.iov_len;
        }
        at += v.iov_len;
    }
}

}  // namespace

std::shared_ptr<FramePool> make_frame_pool() { return std::make_shared<FramePool>(); }

// Requests the engine had no room for wait in the send queue; the frames just sent completed some and made room.
// Handed over here, so whoever drained the engine (a poster, the thread, an inline pass) also sends what waited:
// otherwise they would wait for the consumer's next poll, which a consumer that posted and now waits on
// something else never makes. True when the engine took more.
bool QueuePair::refill() {
    Stream &s = *stream_;
    const uint32_t waiting = sq_.count() - s.issued;
    if (waiting == 0) return false;
    issue();
    return sq_.count() - s.issued != waiting && s.fail == Stream::Fail::none;  // (release_done pops both alike)
}

void QueuePair::transmit(size_t budget) {
    Stream &s = *stream_;
    if (s.tx_blocked) return;
    s.corked = 0;
    s.corked_bytes = 0;
    TxBatch &b = t_batch;
    size_t moved = 0;
    while (s.fail == Stream::Fail::none) {
        // One gather list: what is left of parked frames (oldest first), then new frames while they fit.
        size_t iovcnt = 0, parked = 0, built = 0;
        for (const auto &p : s.parked) {
            const size_t n = p->frame.iovcnt - p->first;
            if (iovcnt + n > kBatchIov) break;
            std::memcpy(b.iov + iovcnt, p->frame.iov + p->first, n * sizeof(iovec));
            iovcnt += n;
            ++parked;
        }
        bool drained = false;  // the engine has nothing more to send
        // Bytes came from the peer since this stream last wrote, and nothing is held: most likely an exchange whose
        // peer waits for this batch, and whose earlier bytes are read and acknowledged (so the kernel's socket page
        // starts afresh: realign()). The CRC of the batch's last large segment is worked out once everything before
        // it is in the socket, while the peer reads that (a 64 KiB segment's CRC is over a microsecond).
        const bool answering = s.heard && parked == 0;
        iwarp::TxFrame *deferred = nullptr;  // the segment whose CRC waits
        size_t split = 0;                    // gather entries before its CRC field
        size_t head = 0;                     // bytes before its CRC field (only built frames: nothing is held)
        size_t large = 0;                    // segments built with their CRC left for later
        if (parked == s.parked.size()) {
            size_t bytes = 0;
            while (built < kBatchFrames && iovcnt + iwarp::kMaxFpduIov <= kBatchIov && moved + bytes < budget) {
                iwarp::TxFrame &f = b.frames[built];
                if (!s.engine.next_frame(f, answering)) {
                    drained = true;
                    break;
                }
                if (f.crc_pending) {
                    if (deferred != nullptr) iwarp::finish_crc(*deferred);  // only the last one waits
                    deferred = &f;
                    split = iovcnt + f.iovcnt - 1;
                    head = bytes + f.bytes - iwarp::kMpaCrcLen;
                    ++large;
                }
                std::memcpy(b.iov + iovcnt, f.iov, f.iovcnt * sizeof(iovec));
                iovcnt += f.iovcnt;
                bytes += f.bytes;
                ++built;
            }
        }
        if (iovcnt == 0) {
            if (refill()) continue;
            s.tx_idle = true;
            return;
        }
        s.tx_idle = false;
        // Only where the CRC field can go with bytes that take a later TCP segment anyway: one large segment with
        // more of the batch after it, as a 64 KiB message's tail behind its first FPDU (64 KiB Write ping-pong
        // 22.3 to 18.8 us). A message of one FPDU (16 and 32 KiB Sends: 8.6 to 12.4 us, 12.4 to 13.7 us) would
        // send its CRC in a segment of its own, which the peer's completion waits for; a batch of several large
        // segments (256 KiB to 1 MiB) came out slower too.
        if (deferred != nullptr && (large > 1 || split + 1 == iovcnt)) {
            iwarp::finish_crc(*deferred);
            deferred = nullptr;
        }
        // Never for a frame resumed after a full socket.
        if (answering && !s.chan) realign(b.iov, iovcnt);  // socket pages only
        bool interrupted = false;
        ssize_t n;
        if (deferred == nullptr) {
            n = s.send(b.iov, iovcnt);
        } else {
            n = s.send(b.iov, split);
            iwarp::finish_crc(*deferred);  // before the CRC field can be sent or its frame parked
            if (n >= 0 && static_cast<size_t>(n) == head) {
                const ssize_t rest = s.send(b.iov + split, iovcnt - split);
                if (rest > 0) {
                    n += rest;
                } else if (rest < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                    if (errno != EINTR) {
                        s.fail = Stream::Fail::llp_reset;
                        return;
                    }
                    interrupted = true;  // what is left is parked below and goes on at once
                }
            }
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                s.fail = Stream::Fail::llp_reset;
                return;
            }
            interrupted = errno == EINTR;
            n = 0;  // the frames built are parked below
        }
        moved += static_cast<size_t>(n);
        if (n > 0) {
            s.io_bytes += static_cast<uint64_t>(n);
            s.heard = false;
            if (s.nudge_armed) nudge_sent_bytes();
            if (!s.chan) providers::common::sent_on(s.emss, s.engine, s.fd, static_cast<size_t>(n));
        }
        // Hand the written bytes out in stream order: whole frames are sent, the rest waits.
        size_t left = static_cast<size_t>(n);
        size_t done = 0;
        for (; done < parked; ++done) {
            Parked &p = *s.parked[done];
            size_t rest = 0;
            for (size_t i = p.first; i < p.frame.iovcnt; ++i) rest += p.frame.iov[i].iov_len;
            if (left < rest) {
                advance(p, left);
                left = 0;
                break;
            }
            left -= rest;
            if (setup_.frames != nullptr) setup_.frames->put(std::move(s.parked[done]));
            s.engine.frame_sent();
        }
        s.parked.erase(s.parked.begin(), s.parked.begin() + static_cast<std::ptrdiff_t>(done));
        for (size_t i = 0; i < built; ++i) {
            const iwarp::TxFrame &f = b.frames[i];
            if (left >= f.bytes) {
                left -= f.bytes;
                s.engine.frame_sent();
            } else {
                s.parked.push_back(park(f, left, setup_.frames.get()));
                left = 0;
            }
        }
        if (!s.parked.empty()) {
            if (interrupted) continue;
            s.tx_blocked = true;  // full: EPOLLOUT brings the progress thread back
            // A channel whose consumer busy-polls (parked): its next poll takes the backlog on as soon as the peer
            // made room (try_service), as service() leaves it. The thread's millisecond look takes the stream back
            // if the polls stop (recheck_park).
            if (consumer_moves(s)) return;
            if (!s.out_watched) {
                // The progress thread moves the backlog; a parked stream is the thread's again.
                s.out_watched = true;
                const uint32_t full = s.full_streams.fetch_add(1, std::memory_order_relaxed) + 1;
                if (!s.chan) limit_unsent(s, setup_.tunables.unsent_budget, full);
                parked_.store(false, std::memory_order_relaxed);
                if (!update_interest()) out_->kick = true;  // the thread asks again
            }
            return;
        }
        if (drained && !refill()) {
            s.tx_idle = true;
            return;
        }
        if (moved >= budget) {
            // The progress thread continues; the poster returns. A parked channel's consumer continues itself at
            // its next poll (as receive() leaves it).
            if (!consumer_moves(s)) out_->kick = true;
            return;
        }
    }
}

void QueuePair::limit_unsent(Stream &s, uint64_t budget, uint32_t full) {
    const int want = UnsentBudget::share(budget, full);
    if (UnsentBudget::worth_changing(s.unsent_limit, want) && UnsentBudget::set_limit(s.fd, want)) {
        s.unsent_limit = want;
    }
}

}  // namespace softrnic::datapath
