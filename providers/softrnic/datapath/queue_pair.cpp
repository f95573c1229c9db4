// A queue pair's data path: the send ring handed to the engine slot by slot (the slot number is the engine's wr_id,
// so a completion finds its request without a search), completions written in posting order, the socket served
// without blocking, and the error paths (Terminate either way, peer close, reset) that end in ERROR with everything
// flushed.
#include "queue_pair.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "iwarp/copy.hpp"
#include "iwarp/verbs_errors.hpp"
#include "common/stream_pump.hpp"
#include "progress.hpp"

namespace softrnic::datapath {
namespace {

// The poster writes up to this much itself before it leaves the rest to the progress thread.
constexpr size_t kPosterBudget = 1u << 20;
// One service moves up to this much each way before another stream's turn.
constexpr size_t kServiceBudget = 1u << 20;
using providers::common::kStageBelow;
using providers::common::UnsentBudget;
constexpr size_t kStageSize = 8192;
// A stream whose last segment carried a payload from about kStageSize to 32 KiB reads up to this much through the
// staging buffer, so the next such FPDU (header, payload, CRC) comes in one recv and is copied to its target: the
// 8 KiB read took the header and all but the last few bytes of an 8 KiB payload, and a second recv the rest, which
// cost a ping-pong of 8 KiB Writes about 0.8 us per message (7.6 us against 6.9). A larger payload is placed by the
// kernel's own copy instead (the two-part read below): copying it once more would cost more than the call it saves.
constexpr size_t kStageMid = 32768 + 1024;
// Empty inline passes between two of the progress thread's services that mark a busy-polling consumer (one that
// waits for completions polls two or three times a wait).
constexpr uint32_t kBusyPolls = 8;

// The nudge (docs/siw-interop.md): an initiator whose first FPDUs met only silence sends a zero-length Write after
// kNudgeAfter without traffic, and a second kNudgeBackoff times later; only for FPDUs sent within kNudgeWindow of
// the RDMA-mode transition.
using Clock = std::chrono::steady_clock;
constexpr auto kNudgeAfter = std::chrono::milliseconds(25);
constexpr int kNudgeBackoff = 8;
constexpr auto kNudgeWindow = std::chrono::seconds(1);
constexpr uint8_t kMaxNudges = 2;
// A stream that has not gone quiet this long after the RDMA-mode transition (its socket stays full) is not the one
// the nudge is for: the timer stops.
constexpr auto kNudgeGiveUp = std::chrono::seconds(5);

using WrUnion = decltype(ri_send_wr_t::u);

// A frame the socket took only part of: kept (with its own headers, markers and trailer) until the rest is written.
struct Parked {
    iwarp::TxFrame frame;
    size_t first = 0;  // first iovec not completely written
};

// Parked frames are recycled: the socket fills often under load, and that must not allocate each time.
class FramePool {
public:
    std::unique_ptr<Parked> get() {
        {
            std::lock_guard g(lock_);
            if (!free_.empty()) {
                std::unique_ptr<Parked> p = std::move(free_.back());
                free_.pop_back();
                return p;
            }
        }
        return std::make_unique<Parked>();
    }
    void put(std::unique_ptr<Parked> p) {
        if (p == nullptr) return;
        std::lock_guard g(lock_);
        free_.push_back(std::move(p));
    }

private:
    SpinLock lock_;
    std::vector<std::unique_ptr<Parked>> free_;
};

FramePool &pool() {
    static FramePool p;
    return p;
}

// Frames written with one sendmsg: a large message leaves in few system calls (an FPDU is at most 64 KiB, so a
// 1 MiB Write is 16 of them), as a raw TCP sender writes its whole buffer at once.
constexpr size_t kBatchFrames = 8;
// The gather list of one sendmsg (IOV_MAX): at least one frame with markers at the largest ULPDU fits.
constexpr size_t kBatchIov = 1024;
static_assert(iwarp::kMaxFpduIov <= kBatchIov);
// Frames are built here first (per thread, never on the stack: one is 5 KiB); only one the socket did not take
// whole is copied out.
struct TxBatch {
    iwarp::TxFrame frames[kBatchFrames];
    iovec iov[kBatchIov];
};
thread_local TxBatch t_batch;

// The socket took @p n more bytes of parked frame @p p.
void advance(Parked &p, size_t n) { (void)providers::common::consume(p.frame.iov, p.frame.iovcnt, p.first, n); }

// Copies a partly written frame out of the thread's buffer; pieces pointing into the frame itself move with it.
std::unique_ptr<Parked> park(const iwarp::TxFrame &f, size_t written) {
    std::unique_ptr<Parked> p = pool().get();
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

using providers::common::send_iov;
using providers::common::stream_recv;
using providers::common::stream_recvmsg;

uint32_t wc_opcode_of(uint32_t wr_opcode) {
    switch (wr_opcode) {
        case RI_WR_RDMA_WRITE: return RI_WC_RDMA_WRITE;
        case RI_WR_RDMA_READ:
        case RI_WR_RDMA_READ_INV: return RI_WC_RDMA_READ;
        case RI_WR_BIND_MW: return RI_WC_BIND_MW;
        case RI_WR_FAST_REG: return RI_WC_FAST_REG;
        case RI_WR_LOCAL_INV: return RI_WC_LOCAL_INV;
        case RI_WR_ATOMIC_FETCH_ADD:
        case RI_WR_ATOMIC_CMP_SWAP: return RI_WC_ATOMIC;
        default: return RI_WC_SEND;
    }
}

iwarp::WorkType work_type(uint32_t wr_opcode) {
    switch (wr_opcode) {
        case RI_WR_SEND_SE: return iwarp::WorkType::send_se;
        case RI_WR_SEND_INV: return iwarp::WorkType::send_inv;
        case RI_WR_SEND_SE_INV: return iwarp::WorkType::send_se_inv;
        case RI_WR_RDMA_WRITE: return iwarp::WorkType::write;
        case RI_WR_RDMA_READ: return iwarp::WorkType::read;
        default: return iwarp::WorkType::send;
    }
}

// Work requests handed to the engine at once. The send ring holds the rest and issue() hands them over as the
// engine finishes earlier ones, so this bounds memory per QP (each engine slot holds a resolved gather list), not
// the depth the consumer sees; a few requests in the engine keep the socket's buffer full.
constexpr uint32_t kEngineQueue = 8;

// Autocorking: posts to a parked stream (its consumer busy-polls, so its next poll comes within microseconds) after
// the first since a poll are held until this many are waiting, or the next poll, and then leave in one sendmsg. On
// loopback a small segment costs the sender the receiver's whole TCP input path and a wake-up; a window of 64 B
// Writes sent one segment each moved at 0.7x TCP.
constexpr uint32_t kCorkPosts = kBatchFrames < kEngineQueue ? kBatchFrames : kEngineQueue;
// Held payload stays below this. Merging mid-size messages pays as well as merging small ones: a window of 32 KiB
// Writes sent one sendmsg each moved at 0.82-0.92x TCP (which makes one write() per message too), and at 1.2-1.35x
// four to a sendmsg; 128 KiB ones went from 0.75-0.79x to 1.2-1.25x two to a sendmsg. A message this large or
// larger is sent as it is posted: its own sendmsg amortizes itself.
constexpr uint64_t kCorkBytes = 256u << 10;

// Payload bytes request @p w puts on the wire (an RDMA Read Request carries none of its own).
uint64_t wire_payload(const ri_send_wr_t &w) {
    if (w.opcode == RI_WR_RDMA_READ || w.opcode == RI_WR_RDMA_READ_INV) return 0;
    uint64_t n = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) n += w.sgl[i].length;
    return n;
}

}  // namespace

// Per send slot: parts of the request still with the engine (an RDMA Read with a scatter list is one Read per
// element), and whether it is done.
struct QueuePair::SlotState {
    uint16_t parts = 0;
    bool done = false;
    bool read = false;
};

// The RDMA-mode part of a queue pair, from the RDMA-mode transition to ERROR.
struct QueuePair::Stream {
    Stream(iwarp::EngineOwner &owner, int socket, const ri_llp_params_t &params, const iwarp::EngineConfig &cfg,
           uint32_t depth, std::atomic<uint32_t> &full)
        : fd(socket), llp(params), engine(owner, cfg), slots(depth), full_streams(full) {
        parked.reserve(kBatchFrames);
    }
    ~Stream() {
        if (out_watched) full_streams.fetch_sub(1, std::memory_order_relaxed);
    }
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    // Gives the parked frames back to the pool.
    void unpark() {
        for (auto &p : parked) pool().put(std::move(p));
        parked.clear();
    }

    enum class Fail : uint8_t { none, local, llp_closed, llp_reset };
    uint64_t io_bytes = 0;  // bytes the socket took or gave so far: an inline pass that moves some did work

    int fd;
    ri_llp_params_t llp;
    iwarp::Engine engine;
    std::vector<SlotState> slots;
    std::vector<std::unique_ptr<Parked>> parked;  // in stream order; at most kBatchFrames (reserved)
    uint32_t issued = 0;        // slots from the ring's head handed to the engine (or executed)
    uint32_t issued_parts = 0;  // parts of the next slot already handed (a Read with a scatter list)
    uint32_t inflight = 0;      // issued slots not done
    uint32_t reads_inflight = 0;
    uint32_t corked = 0;        // requests posted since the last transmit() and held for the next (autocorking)
    uint64_t corked_bytes = 0;  // their payload
    bool tx_idle = true;  // the engine had nothing more to send
    bool heard = false;   // bytes arrived since the last sendmsg (transmit() realigns the next one)
    // The socket refused bytes: until the progress thread hears EPOLLOUT, nobody else tries (a busy-polling
    // consumer's sendmsg on a full socket only fights the stack's ACK processing for the socket lock).
    bool tx_blocked = false;
    bool out_watched = false;  // the progress thread's epoll set has EPOLLOUT for the socket (only while blocked)
    // The socket is in the progress thread's epoll set (not while a busy-polled stream wants no edges). True from the
    // start: attach() makes the stream just before Progress::add puts the socket there, and a change asked for in
    // between only fails to modify an entry not yet made (attach asks again once it is).
    bool in_set = true;
    int unsent_limit = 0;      // the socket's TCP_NOTSENT_LOWAT (UnsentBudget); 0: none set
    bool fin_sent = false;
    bool consumer_terminate = false;
    bool peer_terminate = false;
    iwarp::Terminate term;
    Fail fail = Fail::none;
    uint32_t fail_slot = 0;
    uint32_t fail_status = 0;
    bool bad_receive = false;  // a receive taken from the queue whose region went away
    uint64_t bad_receive_id = 0;
    // The nudge: armed on an initiator's stream (unless the peer asked for a Read or Send RTR, so it may not take
    // a zero-length Write) until the peer sends a byte, kMaxNudges went out, or the first send came after
    // kNudgeWindow.
    bool nudge_armed = false;
    bool nudge_timer = false;  // the progress thread holds a deadline for this stream
    uint8_t nudges = 0;
    Clock::time_point rdma_mode{};  // the RDMA-mode transition
    Clock::time_point last_send{};  // the last sendmsg that moved bytes, while armed
    iwarp::EmssWatch emss;  // when the socket's MSS is read again, to size the FPDUs for it
    std::atomic<uint32_t> &full_streams;  // the process's count of streams waiting for room (Progress)
};

// What a locked operation leaves to do once the QP's lock is dropped: events, the kVP, the socket.
struct QueuePair::Outcome {
    bool notify_s = false;
    bool notify_r = false;
    bool unwatch = false;
    int close_fd = -1;
    bool tell_kvp = false;
    bool kick = false;
    std::optional<Clock::time_point> timer;  // the nudge's first deadline, for the progress thread
    uint32_t nevents = 0;
    // Only the first nevents are written and read. Left uninitialized: an Outcome is made for every post and poll,
    // and zeroing these 192 bytes (`rep stos`) was the largest cost of an empty poll's inline pass.
    ri_async_event_t events[6];
};

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
    bool registered = false;
    {
        std::lock_guard g(mutex_);
        if (stream_) {
            fd = stream_->fd;
            stream_->unpark();
            stream_.reset();
        }
        registered = registered_;
    }
    if (registered) Progress::get().remove(this, fd);
    if (fd >= 0) ::close(fd);
}

// ---------------------------------------------------------------------------------------------------------------
// Posting

ri_status_t QueuePair::check_send(const ri_send_wr_t &w, uint64_t &inline_len) const {
    constexpr uint32_t kFlags = RI_SEND_SIGNALED | RI_SEND_READ_FENCE | RI_SEND_LOCAL_FENCE | RI_SEND_INLINE;
    const ri_qp_init_attr_t &init = setup_.init;
    if ((w.flags & ~kFlags) != 0 || (w.num_sge > 0 && w.sgl == nullptr)) return RI_EINVAL;
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
            if (ri_status_t rc = owner_.check_memory_op(w, &b); rc != RI_OK) return rc;
            if (b.window_pd != setup_.pd) return RI_EINVAL;
            sge_limit = 0;
            break;
        }
        case RI_WR_FAST_REG:
            // Queued for a stream but not executed yet: refused once there is a stream to execute them on.
            if (state_ != RI_QPS_IDLE && state_ != RI_QPS_ERROR) return RI_EOPNOTSUPP;
            if (ri_status_t rc = owner_.check_memory_op(w, nullptr); rc != RI_OK) return rc;
            sge_limit = 0;
            break;
        case RI_WR_LOCAL_INV: sge_limit = 0; break;
        case RI_WR_RDMA_READ_INV:  // an InfiniBand extension softrnic does not offer
        case RI_WR_ATOMIC_FETCH_ADD:
        case RI_WR_ATOMIC_CMP_SWAP: return RI_EOPNOTSUPP;
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
        (void)owner_.check_memory_op(w, &b);  // accepted by check_send() just now
        static_assert(sizeof b <= sizeof h.op);
        std::memcpy(h.op, &b, sizeof b);
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

// ---------------------------------------------------------------------------------------------------------------
// Handing work to the engine

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
            case RI_WR_SEND:
            case RI_WR_SEND_SE:
            case RI_WR_SEND_INV:
            case RI_WR_SEND_SE_INV:
            case RI_WR_RDMA_WRITE: {
                iwarp::WorkRequest wr;
                wr.wr_id = idx;
                wr.type = work_type(h.opcode);
                if (!resolve_gather(h, slot, wr)) return local_failure(idx, RI_WC_LOC_PROT_ERR);
                wr.remote_stag = u.rdma.rkey;
                wr.remote_to = u.rdma.remote_addr;
                wr.inv_stag = h.inv_stag;
                rdma::Status rc = s.engine.post(wr);
                if (rc.code() == RI_EAGAIN) return;
                if (!rc.ok()) return local_failure(idx, RI_WC_LOC_QP_OP_ERR);
                st = SlotState{1, false, false};
                ++s.inflight;
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

// ---------------------------------------------------------------------------------------------------------------
// The engine's questions and reports (called under mutex_, from inside engine calls)

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
        ri_wc_t w = wc(c.wr_id, RI_WC_RECV, RI_WC_SUCCESS);
        w.byte_len = c.byte_len;
        if (c.solicited) w.flags |= RI_WC_SOLICITED;
        if (c.invalidated) {
            w.flags |= RI_WC_WITH_INV;
            w.invalidated_stag = c.inv_stag;
        }
        out_->notify_r |= rcq_.add(w);
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

// ---------------------------------------------------------------------------------------------------------------
// The socket

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
        if (answering) realign(b.iov, iovcnt);
        bool interrupted = false;
        ssize_t n;
        if (deferred == nullptr) {
            n = send_iov(s.fd, b.iov, iovcnt);
        } else {
            n = send_iov(s.fd, b.iov, split);
            iwarp::finish_crc(*deferred);  // before the CRC field can be sent or its frame parked
            if (n >= 0 && static_cast<size_t>(n) == head) {
                const ssize_t rest = send_iov(s.fd, b.iov + split, iovcnt - split);
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
            providers::common::sent_on(s.emss, s.engine, s.fd, static_cast<size_t>(n));
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
            pool().put(std::move(s.parked[done]));
            s.engine.frame_sent();
        }
        s.parked.erase(s.parked.begin(), s.parked.begin() + static_cast<std::ptrdiff_t>(done));
        for (size_t i = 0; i < built; ++i) {
            const iwarp::TxFrame &f = b.frames[i];
            if (left >= f.bytes) {
                left -= f.bytes;
                s.engine.frame_sent();
            } else {
                s.parked.push_back(park(f, left));
                left = 0;
            }
        }
        if (!s.parked.empty()) {
            if (interrupted) continue;
            s.tx_blocked = true;  // full: EPOLLOUT brings the progress thread back
            if (!s.out_watched) {
                // The progress thread moves the backlog; a parked stream is the thread's again.
                s.out_watched = true;
                limit_unsent(s, setup_.tunables.unsent_budget, s.full_streams.fetch_add(1, std::memory_order_relaxed) + 1);
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
            out_->kick = true;  // the progress thread continues; the poster returns
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

void QueuePair::receive(size_t budget, bool to_eagain) {
    Stream &s = *stream_;
    iwarp::Receiver &rx = s.engine.receiver();
    size_t moved = 0;
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
            n = stream_recv(s.fd, stage, asked);
            if (n > 0) (void)rx.feed(std::span<const uint8_t>(stage, static_cast<size_t>(n)));
        } else {
            // Payload goes straight to its placement target (no copy); what follows it (the trailer, the next
            // header and the start of the next payload) comes in the same call through the staging buffer.
            uint8_t stage[kStageSize];
            iovec iov[2] = {{dst.data(), dst.size()}, {stage, sizeof stage}};
            asked = dst.size() + sizeof stage;
            msghdr m{};
            m.msg_iov = iov;
            m.msg_iovlen = 2;
            n = stream_recvmsg(s.fd, &m);
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
        if (moved >= budget) {
            out_->kick = true;
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
        (void)::shutdown(s.fd, SHUT_WR);
        s.fin_sent = true;
        add_event(RI_AE_QP_SQ_DRAINED);
    }
}

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

// ---------------------------------------------------------------------------------------------------------------
// Errors and state

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
    flush_rings(failing, status, vendor_err, recv_status);
    Outcome &o = *out_;
    if (shared_rq_ && state_ != RI_QPS_IDLE) add_event(RI_AE_QP_LAST_WQE_REACHED);
    if (stream_) {
        // Abortive: the engine stops and the socket closes (the kAL's own copy of it sends the reset).
        o.unwatch = registered_;
        o.close_fd = stream_->fd;
        const iwarp::EngineStats &last = stream_->engine.stats();  // the counters outlive the stream
        carried_ = iwarp::EngineStats{carried_.tx_fpdus + last.tx_fpdus, carried_.tx_bytes + last.tx_bytes,
                                      carried_.rx_fpdus + last.rx_fpdus, carried_.rx_bytes + last.rx_bytes};
        counters_.publish(carried_, iwarp::EngineStats{});
        stream_->unpark();
        stream_.reset();
    }
    set_state(RI_QPS_ERROR);
    o.tell_kvp |= tell_kvp;
}

void QueuePair::finish(Outcome &o) {
    if (o.unwatch) Progress::get().remove(this, o.close_fd);
    if (o.close_fd >= 0) ::close(o.close_fd);
    if (o.tell_kvp) owner_.entered_error();
    for (uint32_t i = 0; i < o.nevents; ++i) owner_.async_event(o.events[i]);
    if (o.notify_s) scq_.notify();
    if (o.notify_r && !(&rcq_ == &scq_ && o.notify_s)) rcq_.notify();  // one call per CQ
    if (o.kick && !o.unwatch) Progress::get().kick(this);
    if (o.timer && !o.unwatch) Progress::get().timer(this, *o.timer);
}

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

ri_status_t QueuePair::attach(int fd, const ri_llp_params_t &llp) {
    if (fd < 0) return RI_EBADF;
    auto refuse = [fd](ri_status_t rc) {
        ::close(fd);
        return rc;
    };
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
    const int first_limit = setup_.tunables.unsent_budget == 0 ? 0 : UnsentBudget::kFirstLimit;
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
        stream_ = std::make_unique<Stream>(static_cast<iwarp::EngineOwner &>(*this), fd, p, iwarp::engine_config(p, setup_.pd, std::min(sq_.depth(), kEngineQueue)), sq_.depth(), full_streams_);
        // The initiator's first bytes may reach a peer that has not yet handed its socket to its QP (Linux siw):
        // see docs/siw-interop.md.
        stream_->nudge_armed =
            setup_.tunables.nudge && (p.mpa_flags & RI_MPA_INITIATOR) != 0 && (!p2p || p.rtr_type == RI_RTR_WRITE);
        stream_->rdma_mode = Clock::now();
        if (limited) stream_->unsent_limit = first_limit;
        registered_ = true;
        parked_.store(false, std::memory_order_relaxed);  // a reconnected QP starts with the thread's attention
        set_state(RI_QPS_RTS);
    }
    if (ri_status_t rc = Progress::get().add(this, fd); rc != RI_OK) {
        {
            std::lock_guard g(mutex_);
            stream_.reset();
            set_state(RI_QPS_IDLE);
        }
        return refuse(rc);
    }
    {
        // A post from another thread may have filled the socket before the set knew it: ask for output now.
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
        park_asked_ = false;
        // Served by the thread (the consumer armed its CQ, the stream ended, output): not parked any more.
        bool change = parked_.exchange(false, std::memory_order_relaxed);
        if (change) polls_seen_ = inline_polls_;
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
            // QP. Parked, the stream's input wakes nobody until the consumer stops polling or arms its CQ.
            if (!s.out_watched && inline_polls_ - polls_seen_ >= kBusyPolls) {
                parked_.store(true, std::memory_order_relaxed);
                Progress::get().parked(this);
                change = true;
            }
            polls_seen_ = inline_polls_;
            const bool wanted = !parked_.load(std::memory_order_relaxed) || s.out_watched;
            if ((change || (wanted && !s.in_set)) && !update_interest()) {
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
        if (!g.owns_lock()) return false;
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
            if (posts_since_poll_ == 0) return false;
            pollfd p{stream_->fd, POLLOUT, 0};
            if (::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0) return false;
            stream_->tx_blocked = false;
        }
        if (close) ++inline_polls_;
        posts_since_poll_ = 0;
        // A consumer polling this hard is parked at the thread's next service; a stream whose socket never raises
        // an edge (a pure sender's) would never get one: one kick per service brings the thread to look.
        if (!park_asked_ && !parked_.load(std::memory_order_relaxed) && inline_polls_ - polls_seen_ >= kBusyPolls) {
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
    if (!g.owns_lock()) return parked_.load(std::memory_order_relaxed);
    if (!stream_ || !parked_.load(std::memory_order_relaxed)) return false;
    if (inline_polls_ != polls_seen_) {
        polls_seen_ = inline_polls_;
        return true;  // still polled: stays the consumer's
    }
    parked_.store(false, std::memory_order_relaxed);
    if (!update_interest()) {
        parked_.store(true, std::memory_order_relaxed);  // not in the set: looked at again in a millisecond
        return true;
    }
    // Requests held for a poll that did not come go now (the thread serves it later in this pass).
    if (stream_->corked > 0) Progress::get().kick(this);
    return false;
}

bool QueuePair::sending(const Stream &s) const noexcept {
    return !s.tx_idle || s.tx_blocked || !s.parked.empty() || s.corked != 0 || sq_.count() != s.issued;
}

bool QueuePair::quiet(const Stream &s) const noexcept {
    return s.fail == Stream::Fail::none && !sending(s) && s.inflight == 0;
}

bool QueuePair::update_interest() {
    Stream &s = *stream_;
    const bool input = !parked_.load(std::memory_order_relaxed);
    s.in_set = Progress::get().interest(this, s.fd, input, s.out_watched, s.in_set);
    return s.in_set || (!input && !s.out_watched);
}

}  // namespace softrnic::datapath
