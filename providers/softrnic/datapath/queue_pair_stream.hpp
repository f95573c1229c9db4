// The inside of a queue pair (queue_pair.hpp), shared by the files that implement it by job: queue_pair.cpp (the
// stream's life: the RDMA-mode transition, state changes, service by the progress thread or an inline pass),
// post.cpp (post checks, the send ring handed to the engine, the engine's callbacks), transmit.cpp, receive.cpp,
// flush.cpp (completions, errors and flushes) and nudge.cpp (the siw nudge's timer). Not installed.
#ifndef SOFTRNIC_DATAPATH_QUEUE_PAIR_STREAM_HPP
#define SOFTRNIC_DATAPATH_QUEUE_PAIR_STREAM_HPP

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
#include "rnicpi/cpp/channel.hpp"

namespace softrnic::datapath {
namespace {

// The poster writes up to this much itself before it leaves the rest to the progress thread.
constexpr size_t kPosterBudget = 1u << 20;
// One service moves up to this much each way before another stream's turn.
constexpr size_t kServiceBudget = 1u << 20;
using providers::common::kStageBelow;
using providers::common::UnsentBudget;
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

// Frames written with one sendmsg: a large message leaves in few system calls (an FPDU is at most 64 KiB, so a
// 1 MiB Write is 16 of them), as a raw TCP sender writes its whole buffer at once.
constexpr size_t kBatchFrames = 8;
// The gather list of one sendmsg (IOV_MAX): at least one frame with markers at the largest ULPDU fits.
constexpr size_t kBatchIov = 1024;
static_assert(iwarp::kMaxFpduIov <= kBatchIov);

using providers::common::send_iov;
using providers::common::stream_recv;
using providers::common::stream_recvmsg;

inline uint32_t wc_opcode_of(uint32_t wr_opcode) {
    switch (wr_opcode) {
        case RI_WR_RDMA_WRITE:
        case RI_WR_RDMA_WRITE_IMM: return RI_WC_RDMA_WRITE;
        case RI_WR_RDMA_READ:
        case RI_WR_RDMA_READ_INV: return RI_WC_RDMA_READ;
        case RI_WR_BIND_MW: return RI_WC_BIND_MW;
        case RI_WR_FAST_REG: return RI_WC_FAST_REG;
        case RI_WR_LOCAL_INV: return RI_WC_LOCAL_INV;
        case RI_WR_ATOMIC_FETCH_ADD: return RI_WC_ATOMIC;
        case RI_WR_ATOMIC_CMP_SWAP: return RI_WC_ATOMIC_CMP_SWAP;
        default: return RI_WC_SEND;
    }
}

inline iwarp::WorkType work_type(uint32_t wr_opcode) {
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

// The RFC 7306 Atomic Request of send slot opcode @p opcode with operands @p u (RI_WR_ATOMIC_FETCH_ADD or
// RI_WR_ATOMIC_CMP_SWAP): one whole 64-bit field, as the verbs' atomics are (no masks).
inline iwarp::AtomicRequest atomic_request(uint32_t opcode, const WrUnion &u) {
    iwarp::AtomicRequest a;
    if (opcode == RI_WR_ATOMIC_CMP_SWAP) {
        a.op = static_cast<uint8_t>(iwarp::AtomicOp::cmp_swap);
        a.compare = u.atomic.compare_add;
        a.add_swap = u.atomic.swap;
        a.add_swap_mask = ~0ull;
    } else {
        a.op = static_cast<uint8_t>(iwarp::AtomicOp::fetch_add);
        a.add_swap = u.atomic.compare_add;
    }
    return a;
}

// Payload bytes request @p w puts on the wire (an RDMA Read Request carries none of its own).
inline uint64_t wire_payload(const ri_send_wr_t &w) {
    if (w.opcode == RI_WR_RDMA_READ || w.opcode == RI_WR_RDMA_READ_INV) return 0;
    uint64_t n = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) n += w.sgl[i].length;
    return n;
}

}  // namespace

// A frame the socket took only part of: kept (with its own headers, markers and trailer) until the rest is written.
struct Parked {
    iwarp::TxFrame frame;
    size_t first = 0;  // first iovec not completely written
};

// Parked frames are recycled: the socket fills often under load, and that must not allocate each time. One pool
// per RNIC open (QpSetup::frames), not per process.
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

// Per send slot: parts of the request still with the engine (an RDMA Read with a scatter list is one Read per
// element), and whether it is done.
struct QueuePair::SlotState {
    uint16_t parts = 0;
    bool done = false;
    bool read = false;
};

// The RDMA-mode part of a queue pair, from the RDMA-mode transition to ERROR.
struct QueuePair::Stream {
    Stream(iwarp::EngineOwner &owner, int socket, std::unique_ptr<rdma::provider::Channel> same_host,
           const ri_llp_params_t &params, const iwarp::EngineConfig &cfg, uint32_t depth,
           std::atomic<uint32_t> &full)
        : fd(socket), chan(std::move(same_host)), llp(params), engine(owner, cfg), slots(depth), full_streams(full) {
        parked.reserve(kBatchFrames);
    }
    ~Stream() {
        if (out_watched) full_streams.fetch_sub(1, std::memory_order_relaxed);
    }
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    // Drops the parked frames: the stream is over (at most kBatchFrames, so they are freed, not recycled).
    void unpark() { parked.clear(); }

    // The stream's bytes go over the same-host channel when there is one, else over the TCP socket; the calls
    // answer alike (see rnicpi/cpp/channel.hpp).
    ssize_t send(iovec *iov, size_t n) noexcept { return chan ? chan->write(iov, n) : send_iov(fd, iov, n); }
    ssize_t recv(void *buf, size_t len) noexcept { return chan ? chan->read(buf, len) : stream_recv(fd, buf, len); }
    ssize_t recvv(iovec *iov, size_t n) noexcept {
        if (chan) return chan->readv(iov, n);
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = n;
        return stream_recvmsg(fd, &m);
    }
    // What the progress thread watches: the channel's bell, or the socket.
    [[nodiscard]] int watched_fd() const noexcept { return chan ? chan->bell() : fd; }

    enum class Fail : uint8_t { none, local, llp_closed, llp_reset };
    uint64_t io_bytes = 0;  // bytes the socket took or gave so far: an inline pass that moves some did work
    uint64_t receives_done = 0;  // receives completed so far (a pass that completed one returns to its consumer)

    int fd;
    // The same-host channel (RI_LLP_SAME_HOST): the stream's bytes move through it, and the TCP socket fd is only
    // the connection's control channel (its orderly close goes on it too).
    std::unique_ptr<rdma::provider::Channel> chan;
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
    int watched_fd = -1;  // what the progress thread watched (the socket, or the channel's bell)
    std::unique_ptr<rdma::provider::Channel> close_chan;  // closed after the progress thread let go of its bell
    bool kick = false;
    std::optional<Clock::time_point> timer;  // the nudge's first deadline, for the progress thread
    uint32_t nevents = 0;
    // Only the first nevents are written and read. Left uninitialized: an Outcome is made for every post and poll,
    // and zeroing these 192 bytes (`rep stos`) was the largest cost of an empty poll's inline pass.
    ri_async_event_t events[6];
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_QUEUE_PAIR_STREAM_HPP
