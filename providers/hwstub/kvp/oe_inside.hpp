// The inside of an offload engine (offload_engine.hpp), shared by the files that implement it by job:
// offload_engine.cpp (the control operations from the kVP), oe_thread.cpp (the engine thread's loop: passes, sleep,
// interrupt moderation, delivery), oe_queues.cpp (send and receive WQEs fetched and checked), oe_stream.cpp (the
// stream pump: frames to the socket, the socket into the iWARP engine), oe_completions.cpp (CQEs, errors, flushes)
// and oe_faults.cpp (injected faults). Not installed.
#ifndef HWSTUB_KVP_OE_INSIDE_HPP
#define HWSTUB_KVP_OE_INSIDE_HPP

#include "offload_engine.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "dma.hpp"
#include "iwarp/copy.hpp"
#include "iwarp/engine.hpp"
#include "iwarp/framing.hpp"
#include "iwarp/mpa.hpp"
#include "iwarp/verbs_errors.hpp"
#include "common/fast_reg.hpp"
#include "common/stream_pump.hpp"
#include "rnicpi/cpp/channel.hpp"

namespace hwstub {

// Events found while the table lock is held, delivered after it is dropped (a hook may call back into the engine).
struct OffloadEngine::Pending {
    std::vector<uint32_t> interrupts;
    std::vector<ri_async_event_t> events;
    void clear() {
        interrupts.clear();
        events.clear();
    }
};

namespace {

using providers::common::send_iov;
using providers::common::stream_recv;

inline int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// WQEs one queue starts per pass, and bytes one stream moves each way per pass, so one busy QP cannot starve the
// others.
constexpr uint32_t kBudget = 32;
// 128 KiB is two 64 KiB FPDUs: a bulk stream yields to its neighbours after about 30 us of copying, so a small
// message on another QP waits for at most that.
constexpr size_t kStreamBudget = 128 * 1024;
// Frames a stream builds ahead of the socket; a frame holds at most one 64 KiB FPDU.
constexpr size_t kTxFrames = 4;
// The gather list of one sendmsg (IOV_MAX): frames with markers have many pieces, and at least one always fits.
constexpr size_t kSendIov = 1024;
static_assert(iwarp::kMaxFpduIov <= kSendIov);
// Inbound bytes below providers::common::kStageBelow go through a staging buffer of this size (headers, small
// payloads); above, straight to the target.
using providers::common::kStageBelow;
constexpr size_t kStageSize = 16384;

constexpr uint8_t kKnownFlags = HWSTUB_WQE_SIGNALED | HWSTUB_WQE_SOLICITED | HWSTUB_WQE_FENCE |
                                HWSTUB_WQE_READ_FENCE | HWSTUB_WQE_INLINE;

inline uint8_t cqe_opcode(uint8_t op) {
    switch (op) {
        case HWSTUB_OP_SEND:
        case HWSTUB_OP_SEND_INV: return HWSTUB_CQE_SEND;
        case HWSTUB_OP_WRITE: return HWSTUB_CQE_WRITE;
        case HWSTUB_OP_WRITE_IMM: return HWSTUB_CQE_WRITE_IMM;
        case HWSTUB_OP_IMMEDIATE: return HWSTUB_CQE_IMMEDIATE;
        case HWSTUB_OP_READ: return HWSTUB_CQE_READ;
        case HWSTUB_OP_ATOMIC_FADD: return HWSTUB_CQE_ATOMIC;
        case HWSTUB_OP_ATOMIC_CSWAP: return HWSTUB_CQE_CMP_SWAP;
        case HWSTUB_OP_LOCAL_INV: return HWSTUB_CQE_LOCAL_INV;
        case HWSTUB_OP_BIND_MW: return HWSTUB_CQE_BIND_MW;
        case HWSTUB_OP_FAST_REG: return HWSTUB_CQE_FAST_REG;
        default: return HWSTUB_CQE_NOP;
    }
}

// The checks hardware makes on a fetched send WQE before it touches anything the WQE names.
inline bool well_formed(const hwstub_send_wqe &w, const QpSetup &s) {
    if (w.opcode < HWSTUB_OP_SEND || w.opcode > HWSTUB_OP_FAST_REG) return false;
    if ((w.flags & ~kKnownFlags) != 0) return false;
    if (w.opcode == HWSTUB_OP_BIND_MW) return w.num_sge == 0 && (w.flags & HWSTUB_WQE_INLINE) == 0;
    if (w.opcode == HWSTUB_OP_FAST_REG) {
        // No payload; known rights; a range within its pages (the STag table checks the rest).
        using providers::common::kFastRegPageShift;
        constexpr uint64_t kPageMask = (uint64_t{1} << kFastRegPageShift) - 1;
        const uint64_t pages = w.operand[1];
        return w.num_sge == 0 && (w.flags & HWSTUB_WQE_INLINE) == 0 &&
               (w.bind_access & ~providers::common::kFastRegRights) == 0 && pages != 0 && pages <= UINT32_MAX &&
               w.bind_length != 0 && w.bind_length <= (pages << kFastRegPageShift) - (w.remote_to & kPageMask);
    }
    if (w.bind_access != 0 || w.bind_length != 0) return false;
    const bool atomic = w.opcode == HWSTUB_OP_ATOMIC_FADD || w.opcode == HWSTUB_OP_ATOMIC_CSWAP;
    const bool immediate = w.opcode == HWSTUB_OP_WRITE_IMM || w.opcode == HWSTUB_OP_IMMEDIATE;
    if (!atomic && !immediate && (w.operand[0] != 0 || w.operand[1] != 0)) return false;
    if (immediate && (w.operand[0] >> 32) != 0) return false;  // the verbs' immediate value is 32 bits
    // An atomic's one 8-byte sink (its length is checked with its region); an Immediate Data carries no payload.
    if (atomic && (w.num_sge != 1 || (w.flags & HWSTUB_WQE_INLINE) != 0 || (w.remote_to & 7) != 0)) return false;
    if (w.opcode == HWSTUB_OP_IMMEDIATE && (w.num_sge != 0 || (w.flags & HWSTUB_WQE_INLINE) != 0)) return false;
    if ((w.flags & HWSTUB_WQE_INLINE) != 0) {
        if (w.num_sge != 0 || w.inline_len > s.max_inline) return false;
        if (w.opcode != HWSTUB_OP_SEND && w.opcode != HWSTUB_OP_SEND_INV && w.opcode != HWSTUB_OP_WRITE &&
            w.opcode != HWSTUB_OP_WRITE_IMM) {
            return false;
        }
        if (sizeof(hwstub_send_wqe) + w.inline_len > s.sq.slot_size) return false;
    } else {
        if (w.num_sge > s.max_send_sge || w.num_sge > iwarp::kMaxSge) return false;
        if (sizeof(hwstub_send_wqe) + w.num_sge * sizeof(hwstub_sge) > s.sq.slot_size) return false;
    }
    return true;
}

// The RFC 7306 Atomic Request of atomic WQE @p w: one whole 64-bit field, as the verbs' atomics are (no masks).
inline iwarp::AtomicRequest atomic_request(const hwstub_send_wqe &w) {
    iwarp::AtomicRequest a;
    if (w.opcode == HWSTUB_OP_ATOMIC_CSWAP) {
        a.op = static_cast<uint8_t>(iwarp::AtomicOp::cmp_swap);
        a.compare = w.operand[0];
        a.add_swap = w.operand[1];
        a.add_swap_mask = ~0ull;
    } else {
        a.op = static_cast<uint8_t>(iwarp::AtomicOp::fetch_add);
        a.add_swap = w.operand[0];
    }
    return a;
}

inline hwstub_cqe make_cqe(uint32_t qp_num, uint64_t wr_id, uint8_t opcode, uint8_t status) {
    hwstub_cqe c{};
    c.wr_id = wr_id;
    c.qp_num = qp_num;
    c.opcode = opcode;
    c.status = status;
    return c;
}

inline ri_async_event_t qp_event(const QpSetup &s, uint32_t event_id, uint32_t detail = 0) {
    ri_async_event_t e{};
    e.resource_type = RI_RES_QP;
    e.event_id = event_id;
    e.resource_id = s.qp_num;
    e.context = s.context;
    e.detail = detail;
    return e;
}

}  // namespace

// A send WQE the engine was given, until its completion is written in posting order.
struct SendRecord {
    uint64_t wr_id = 0;
    uint32_t byte_len = 0;
    uint8_t opcode = 0;  // the CQE's
    uint8_t status = 0;
    uint32_t vendor_err = 0;  // the Terminate word of a request a Terminate failed
    bool signaled = false;
    bool done = false;
    bool read = false;
    uint32_t parts = 0;       // a Read scattered over n SGEs is n Reads for the engine: those not yet completed
};

// The RDMA-mode part of a QP: the socket, the protocol engine and the frames built ahead of the socket.
struct OffloadEngine::Stream {
    Stream(iwarp::EngineOwner &owner, int socket, std::unique_ptr<rdma::provider::Channel> same_host,
           const ri_llp_params_t &params, const iwarp::EngineConfig &cfg)
        : fd(socket), chan(std::move(same_host)), llp(params), engine(owner, cfg), frames(kTxFrames),
          due(kTxFrames), lost(kTxFrames) {}
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    ~Stream() {
        if (fd >= 0) ::close(fd);
        // chan's destructor unmaps the rings and closes the bell: the peer QP reads its end of file
    }
    // The stream's bytes go over the same-host channel when the transition brought one, else over the TCP socket;
    // the calls answer alike (rnicpi/cpp/channel.hpp).
    ssize_t send(iovec *iov, size_t n) noexcept { return chan ? chan->write(iov, n) : send_iov(fd, iov, n); }
    ssize_t recv(void *buf, size_t len) noexcept { return chan ? chan->read(buf, len) : stream_recv(fd, buf, len); }
    // What the engine sleeps on: the channel's bell (rung when the peer moved a ring it waits on, or at its end),
    // or the socket.
    [[nodiscard]] int watched_fd() const noexcept { return chan ? chan->bell() : fd; }
    int fd;
    // The same-host channel (RI_LLP_SAME_HOST): the stream's bytes move through it, and the TCP socket fd is only
    // the connection's control channel (the orderly close's FIN goes on it too, before the ring's).
    std::unique_ptr<rdma::provider::Channel> chan;
    ri_llp_params_t llp;
    iwarp::Engine engine;
    std::vector<iwarp::TxFrame> frames;  // a ring: [head, head + count) built, the head partly written
    // Fault injection, by frame slot: when a delayed frame may go on the wire (0: now), and frames the wire loses.
    std::vector<int64_t> due;
    std::vector<uint8_t> lost;
    size_t head = 0, count = 0, head_iov = 0;
    bool want_out = false;               // the socket was full
    bool eof = false;                    // the peer closed
    int error = 0;                       // the socket failed
    bool tx_failed = false;              // ... on a send: what it received before may still be read
    bool peer_terminated = false;
    iwarp::Terminate term;
    bool crc = false;      // frames carry a CRC (negotiated)
    bool rfc7306 = false;  // the peer agreed to RFC 7306 (atomics, Immediate Data)
    bool closing = false;  // the QP is in CLOSING: FIN once the send side drained
    uint32_t close_at = 0; // the send queue's producer index at the move to CLOSING: what must still go
    bool fin_sent = false;
    // An offload RNIC sizes its FPDUs by the connection's current MSS, which Linux raises after the transition.
    iwarp::EmssWatch emss;
};

struct OffloadEngine::Qp final : iwarp::EngineOwner {
    Qp(OffloadEngine &e, const QpSetup &s)
        : oe(&e), setup(s), sq(s.sq, s.sq_ctrl), rq(s.rq, s.rq_ctrl), dma(s.owner),
          shadow(static_cast<size_t>(s.sq.depth) * s.sq.slot_size), sends(s.sq.depth), recvs(s.rq.depth),
          recv_mask(s.rq.depth - 1) {}

    OffloadEngine *oe;
    QpSetup setup;
    WqConsumer sq;
    WqConsumer rq;
    DmaChannel dma;
    std::vector<uint8_t> shadow;            // the engine's copy of each fetched send slot (inline data stays put)
    std::vector<SendRecord> sends;          // by send queue index
    uint32_t sq_started = 0, sq_done = 0;   // send WQEs given to the engine, and completed in order
    uint32_t reads_out = 0;                 // RDMA Reads (parts) given to the engine and not completed
    uint32_t read_parts_posted = 0;         // of the scattered Read at sq_started: parts the engine already has
    std::vector<iwarp::ReceiveBuffer> recvs; // by receive queue index: validated receive WQEs
    uint32_t recv_mask;                     // recvs.size() - 1
    // With an SRQ: the receives come from it, one at a time as messages need them (take_shared_receive), and
    // rq_checked counts those taken into `recvs`; the QP's own receive queue is never read.
    Srq *srq = nullptr;
    bool ran = false;                // it had a stream (RTS): its way into ERROR is reported to an SRQ's owner
    bool last_wqe_reported = false;  // RI_AE_QP_LAST_WQE_REACHED raised
    uint32_t rq_checked = 0, rq_taken = 0, rq_done = 0;
    // The producer indexes the last pass started from: posts after them are what a sleeping engine must not miss.
    uint32_t sq_seen = 0, rq_seen = 0;
    bool error = false;
    bool cqe_lost = false; // a completion of this QP was lost to a full CQ: the QP goes to ERROR after the pass
    uint8_t recv_fail_status = RI_WC_WR_FLUSH_ERR;  // for the receive being placed when the stream failed
    bool blocked = false;  // IDLE: the send queue's head waits for RTS
    std::unique_ptr<Stream> stream;
    ri_qp_stats_t stats{};
    Pending *out = nullptr;  // where engine callbacks report, during a pass

    // Every access to the consumer's memory goes through the DMA channel, also for a consumer in the engine's own
    // process: that is where each one is checked against the STag table, as an adapter's translation table checks
    // each DMA, so a region deregistered with work in flight is never written or read again.
    [[nodiscard]] bool foreign() const noexcept { return true; }

    // Whether [addr, addr + len) is still registered memory of the QP's PD: one cached region (the last one that
    // covered an access) while the table's generation stands, the table otherwise.
    uint64_t dma_gen = 0, dma_lo = 0, dma_hi = 0;
    bool registered(uint64_t addr, size_t len) noexcept {
        const uint64_t gen = oe->stags_.generation();
        if (gen == dma_gen && addr >= dma_lo && addr - dma_lo <= dma_hi - dma_lo && len <= dma_hi - addr) return true;
        uint64_t lo = 0, hi = 0;
        if (!oe->stags_.covering(addr, len, setup.pd, lo, hi)) return false;
        dma_gen = gen;
        dma_lo = lo;
        dma_hi = hi;
        return true;
    }

    // An SGE named by the consumer, checked and translated: false for a bad lkey, PD, range or right.
    bool translate(const hwstub_sge &g, uint32_t need, iwarp::LocalSpan &out_span) const {
        StagEntry e;
        if (!oe->stags_.find(g.lkey, e) || !e.valid || e.pd != setup.pd || (e.access & need) != need) return false;
        if (g.addr < e.to_base || g.addr - e.to_base > e.length || g.length > e.length - (g.addr - e.to_base)) {
            return false;
        }
        const uint64_t at = e.addr + (g.addr - e.to_base);
        out_span.addr = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(at));
        out_span.len = g.length;
        return true;
    }

    // iwarp::EngineOwner
    bool resolve_stag(uint32_t stag, iwarp::Region &r) override {
        StagEntry e;
        if (!oe->stags_.find(stag, e) || !e.valid) return false;
        if (e.qp != 0 && e.qp != setup.qp_num) return false;  // a type 2 window serves the QP it was bound on
        r.base = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(e.addr));
        r.to_base = e.to_base;
        r.length = e.length;
        r.access = e.access;
        r.pd = e.pd;
        r.foreign = foreign();
        return true;
    }
    bool take_receive(iwarp::ReceiveBuffer &b) override {
        // A receive posted after this pass looked at the queue (before the Send that needs it left the peer, so
        // the consumer did nothing wrong) is checked now rather than refused with a "no buffer" Terminate.
        if (rq_taken == rq_checked && out != nullptr && !error) {
            (void)(srq != nullptr ? oe->take_shared_receive(*this, *out) : oe->serve_receive_queue(*this, *out));
        }
        if (rq_taken == rq_checked) return false;
        b = recvs[rq_taken & recv_mask];
        ++rq_taken;
        return true;
    }
    // A receive of the QP is done: its own queue's slot goes back to the host (an SRQ's went when it was taken).
    void retire_receive() noexcept {
        if (srq == nullptr) rq.retire();
    }
    bool invalidate_stag(uint32_t stag) override { return oe->stags_.invalidate(stag, setup.pd); }
    void completed(const iwarp::Completion &c) override {
        if (c.kind == iwarp::Completion::Kind::recv) {
            const iwarp::ReceiveBuffer &b = recvs[rq_done & recv_mask];
            hwstub_cqe cqe = make_cqe(setup.qp_num, b.wr_id, c.immediate ? HWSTUB_CQE_RECV_IMM : HWSTUB_CQE_RECV,
                                      RI_WC_SUCCESS);
            cqe.byte_len = c.byte_len;
            if (c.immediate) {
                cqe.imm_data = iwarp::immediate_value(c.imm_data);
                cqe.byte_len = iwarp::immediate_write_len(c.imm_data);  // the Write's, as InfiniBand reports it
            }
            if (c.solicited) cqe.flags |= HWSTUB_CQE_SOLICITED;
            if (c.invalidated) {
                cqe.flags |= HWSTUB_CQE_WITH_INV;
                cqe.inv_stag = c.inv_stag;
            }
            ++rq_done;
            retire_receive();
            oe->complete(setup.recv_cq, cqe, c.solicited, *out);
            return;
        }
        // Send-side requests carry their send queue index as the engine's wr_id.
        SendRecord &r = sends[static_cast<uint32_t>(c.wr_id) & (setup.sq.depth - 1)];
        if (r.read && reads_out > 0) --reads_out;  // a Read's part or an atomic
        r.byte_len += c.byte_len;
        // More parts to come: of a scattered Read, or the Immediate Data after a Write.
        if (r.parts > 0 && --r.parts > 0) return;
        r.done = true;
    }
    void peer_terminated(const iwarp::Terminate &t) override {
        stream->peer_terminated = true;
        stream->term = t;
        ++stats.terminates_received;
    }
    bool dma_read(uint64_t src, void *dst, size_t len) noexcept override {
        return registered(src, len) && dma.read(src, len, static_cast<uint8_t *>(dst));
    }
    bool dma_write(uint64_t dst, const void *src, size_t len) noexcept override {
        return registered(dst, len) && dma.write(dst, len, static_cast<const uint8_t *>(src));
    }
    bool dma_atomic(uint64_t target, const iwarp::AtomicRequest &r, uint64_t &original) noexcept override {
        // The read, the new value and the write as one step among every atomic the adapter serves (its engines
        // may target one counter). As with InfiniBand's HCA atomics, the consumer's own CPU stores to the target are
        // not part of it.
        if (!registered(target, 8)) return false;
        std::lock_guard g(oe->atomics_);
        uint8_t bytes[8];
        if (!dma.read(target, 8, bytes)) return false;
        std::memcpy(&original, bytes, 8);
        const uint64_t result = iwarp::atomic_result(r, original);
        std::memcpy(bytes, &result, 8);
        return dma.write(target, 8, bytes);
    }
};

}  // namespace hwstub

#endif  // HWSTUB_KVP_OE_INSIDE_HPP
