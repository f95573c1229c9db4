// The offload engine's thread: doorbell records and sockets in; frames, placed payload, CQEs and interrupts out.
// See offload_engine.hpp.
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
#include "common/stream_pump.hpp"

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

int64_t steady_ns() noexcept {
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

uint8_t cqe_opcode(uint8_t op) {
    switch (op) {
        case HWSTUB_OP_SEND:
        case HWSTUB_OP_SEND_INV: return HWSTUB_CQE_SEND;
        case HWSTUB_OP_WRITE: return HWSTUB_CQE_WRITE;
        case HWSTUB_OP_READ: return HWSTUB_CQE_READ;
        case HWSTUB_OP_LOCAL_INV: return HWSTUB_CQE_LOCAL_INV;
        default: return HWSTUB_CQE_NOP;
    }
}

// The checks hardware makes on a fetched send WQE before it touches anything the WQE names.
bool well_formed(const hwstub_send_wqe &w, const QpSetup &s) {
    if (w.opcode < HWSTUB_OP_SEND || w.opcode > HWSTUB_OP_NOP) return false;
    if ((w.flags & ~kKnownFlags) != 0) return false;
    if ((w.flags & HWSTUB_WQE_INLINE) != 0) {
        if (w.num_sge != 0 || w.inline_len > s.max_inline) return false;
        if (w.opcode != HWSTUB_OP_SEND && w.opcode != HWSTUB_OP_SEND_INV && w.opcode != HWSTUB_OP_WRITE) return false;
        if (sizeof(hwstub_send_wqe) + w.inline_len > s.sq.slot_size) return false;
    } else {
        if (w.num_sge > s.max_send_sge || w.num_sge > iwarp::kMaxSge) return false;
        if (sizeof(hwstub_send_wqe) + w.num_sge * sizeof(hwstub_sge) > s.sq.slot_size) return false;
    }
    return true;
}

hwstub_cqe make_cqe(uint32_t qp_num, uint64_t wr_id, uint8_t opcode, uint8_t status) {
    hwstub_cqe c{};
    c.wr_id = wr_id;
    c.qp_num = qp_num;
    c.opcode = opcode;
    c.status = status;
    return c;
}

ri_async_event_t qp_event(const QpSetup &s, uint32_t event_id, uint32_t detail = 0) {
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
    Stream(iwarp::EngineOwner &owner, int socket, const ri_llp_params_t &params, const iwarp::EngineConfig &cfg)
        : fd(socket), llp(params), engine(owner, cfg), frames(kTxFrames), due(kTxFrames), lost(kTxFrames) {}
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    ~Stream() {
        if (fd >= 0) ::close(fd);
    }
    int fd;
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
    bool closing = false;  // the QP is in CLOSING: FIN once the send side drained
    uint32_t close_at = 0; // the send queue's producer index at the move to CLOSING: what must still go
    bool fin_sent = false;
    // An offload RNIC sizes its FPDUs by the connection's current MSS, which Linux raises after the transition.
    iwarp::EmssWatch emss;
};

struct OffloadEngine::Qp final : iwarp::EngineOwner {
    Qp(OffloadEngine &e, const QpSetup &s)
        : oe(&e), setup(s), sq(s.sq, s.sq_ctrl), rq(s.rq, s.rq_ctrl), dma(s.owner),
          shadow(static_cast<size_t>(s.sq.depth) * s.sq.slot_size), sends(s.sq.depth), recvs(s.rq.depth) {}

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
        if (rq_taken == rq_checked && out != nullptr && !error) (void)oe->serve_receive_queue(*this, *out);
        if (rq_taken == rq_checked) return false;
        b = recvs[rq_taken & (setup.rq.depth - 1)];
        ++rq_taken;
        return true;
    }
    bool invalidate_stag(uint32_t stag) override { return oe->stags_.invalidate(stag, setup.pd); }
    void completed(const iwarp::Completion &c) override {
        if (c.kind == iwarp::Completion::Kind::recv) {
            const iwarp::ReceiveBuffer &b = recvs[rq_done & (setup.rq.depth - 1)];
            hwstub_cqe cqe = make_cqe(setup.qp_num, b.wr_id, HWSTUB_CQE_RECV, RI_WC_SUCCESS);
            cqe.byte_len = c.byte_len;
            if (c.solicited) cqe.flags |= HWSTUB_CQE_SOLICITED;
            if (c.invalidated) {
                cqe.flags |= HWSTUB_CQE_WITH_INV;
                cqe.inv_stag = c.inv_stag;
            }
            ++rq_done;
            rq.retire();
            oe->complete(setup.recv_cq, cqe, c.solicited, *out);
            return;
        }
        // Send-side requests carry their send queue index as the engine's wr_id.
        SendRecord &r = sends[static_cast<uint32_t>(c.wr_id) & (setup.sq.depth - 1)];
        if (r.read) {
            if (reads_out > 0) --reads_out;
            r.byte_len += c.byte_len;
            if (r.parts > 0 && --r.parts > 0) return;  // more parts of the scattered Read to come
            r.done = true;
            return;
        }
        r.done = true;
        r.byte_len = c.byte_len;
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
};

OffloadEngine::OffloadEngine(hwstub_engine_page *page, EngineHooks hooks, StagTable *stags, FaultPlan *faults,
                             std::string name)
    : page_(page), hooks_(std::move(hooks)), name_(std::move(name)), stags_(stags != nullptr ? *stags : own_stags_),
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
    auto q = std::make_unique<Qp>(*this, qp);
    // The control blocks may be reused memory: the engine's counters start where the host's are.
    q->sq_started = q->sq_done = word(qp.sq_ctrl->consumer).load(std::memory_order_relaxed);
    q->rq_checked = q->rq_taken = q->rq_done = word(qp.rq_ctrl->consumer).load(std::memory_order_relaxed);
    q->sq_seen = q->sq.posted();
    q->rq_seen = q->rq.posted();
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
        gone = std::move(it->second);
        qps_.erase(it);
    }
    return RI_OK;  // the stream's socket closes here, outside the lock
}

ri_status_t OffloadEngine::start_stream(uint32_t qp_num, int fd, const ri_llp_params_t &llp) {
    {
        std::lock_guard g(mutex_);
        auto it = qps_.find(qp_num);
        if (it == qps_.end() || it->second->error || it->second->stream) {
            ::close(fd);
            return it == qps_.end() ? RI_ENOENT : RI_EINVAL;
        }
        Qp &qp = *it->second;
        try {
            iwarp::EngineConfig cfg = iwarp::engine_config(llp, qp.setup.pd, qp.setup.sq.depth);
            cfg.foreign_memory = qp.foreign();
            qp.stream = std::make_unique<Stream>(qp, fd, llp, cfg);
            qp.stream->crc = cfg.tx.crc;
        } catch (...) {
            ::close(fd);
            return RI_ENOMEM;
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

void OffloadEngine::complete(uint32_t cq_id, const hwstub_cqe &cqe, bool solicited, Pending &out) {
    auto it = cqs_.find(cq_id);
    if (it == cqs_.end()) return;
    Cq &cq = *it->second;
    const bool injected = faults_.cq_overflow.load(std::memory_order_relaxed) != 0 && faults_.aims_at(cqe.qp_num) &&
                          FaultPlan::take(faults_.cq_overflow);
    if (injected) {
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
        cq.writer.set_overflow();
    }
    if (injected || !cq.writer.push(cqe)) {
        // The completion is lost, so its QP cannot go on as if it had been delivered (RDMAC: the QP goes to ERROR).
        if (auto q = qps_.find(cqe.qp_num); q != qps_.end()) q->second->cqe_lost = true;
        if (!cq.overflow_reported) {
            cq.overflow_reported = true;
            ri_async_event_t e{};
            e.resource_type = RI_RES_CQ;
            e.event_id = RI_AE_CQ_OVERFLOW;
            e.resource_id = cq_id;
            out.events.push_back(e);
        }
        return;
    }
    stats_.cqes.fetch_add(1, std::memory_order_relaxed);
    // An error completion satisfies a solicited-only arm too (RDMAC verbs).
    if (cq.writer.take_arm(solicited || cqe.status != RI_WC_SUCCESS)) out.interrupts.push_back(cq_id);
}

// Writes the CQEs of finished send WQEs in posting order and frees their slots: a later Write that finished
// before an earlier Read waits for it.
void OffloadEngine::retire_sends(Qp &qp, Pending &out) {
    while (qp.sq_done != qp.sq_started) {
        SendRecord &r = qp.sends[qp.sq_done & (qp.setup.sq.depth - 1)];
        if (!r.done) break;
        if (r.signaled || qp.setup.signal_all || r.status != RI_WC_SUCCESS) {
            hwstub_cqe c = make_cqe(qp.setup.qp_num, r.wr_id, r.opcode, r.status);
            c.byte_len = r.byte_len;
            c.vendor_err = r.vendor_err;
            complete(qp.setup.send_cq, c, false, out);
        }
        r = SendRecord{};
        ++qp.sq_done;
        qp.sq.retire();
    }
}

// ERROR as the host sees it too: both control blocks say so (the uVP then completes later posts itself).
void OffloadEngine::mark_error(Qp &qp) {
    qp.error = true;
    qp.sq.set_error();
    qp.rq.set_error();
}

void OffloadEngine::enter_error(Qp &qp, Pending &out, uint32_t event_id, uint32_t detail) {
    if (qp.error) return;
    mark_error(qp);
    out.events.push_back(qp_event(qp.setup, event_id, detail));
}

// The WQE at the head of the send queue (fetched, not started) failed its checks: it completes with @p status,
// the QP enters ERROR, and its stream sends a Terminate on the way down.
void OffloadEngine::wqe_failed(Qp &qp, uint8_t status, Pending &out) {
    const auto *w = reinterpret_cast<const hwstub_send_wqe *>(
        &qp.shadow[static_cast<size_t>(qp.sq_started & (qp.setup.sq.depth - 1)) * qp.setup.sq.slot_size]);
    SendRecord &r = qp.sends[qp.sq_started & (qp.setup.sq.depth - 1)];
    r = SendRecord{};
    r.wr_id = w->wr_id;
    r.opcode = cqe_opcode(w->opcode);
    r.status = status;
    r.signaled = true;  // an error always completes
    r.done = true;
    ++qp.sq_started;
    if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
    retire_sends(qp, out);  // in order: earlier requests still in flight complete (flushed) first
    enter_error(qp, out, RI_AE_QP_FATAL);
}

// A peer's Terminate failed the oldest request in flight (the one it answers): it completes with @p status and the
// Terminate word, the rest are flushed.
void OffloadEngine::fail_oldest(Qp &qp, uint8_t status, uint32_t word) {
    for (uint32_t i = qp.sq_done; i != qp.sq_started; ++i) {
        SendRecord &r = qp.sends[i & (qp.setup.sq.depth - 1)];
        if (r.done) continue;
        r.done = true;
        r.status = status;
        r.vendor_err = word;
        return;
    }
}

// Completes the receives checked and not yet done (the one being placed among them) with RI_WC_WR_FLUSH_ERR.
bool OffloadEngine::flush_checked_receives(Qp &qp, Pending &out) {
    const bool any = qp.rq_done != qp.rq_checked;
    while (qp.rq_done != qp.rq_checked) {
        const iwarp::ReceiveBuffer &b = qp.recvs[qp.rq_done & (qp.setup.rq.depth - 1)];
        // The receive being placed when the stream failed takes the failure's status (too long a message).
        const uint8_t status = qp.rq_done != qp.rq_taken ? qp.recv_fail_status : uint8_t{RI_WC_WR_FLUSH_ERR};
        qp.recv_fail_status = RI_WC_WR_FLUSH_ERR;
        complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, b.wr_id, HWSTUB_CQE_RECV, status), false, out);
        ++qp.rq_done;
        qp.rq.retire();
    }
    qp.rq_taken = qp.rq_checked;
    return any;
}

// Completes everything posted to a QP in ERROR with RI_WC_WR_FLUSH_ERR (RDMAC verbs: flushed requests always
// complete, signalled or not): first what the engine was given, in order, then what was never fetched.
bool OffloadEngine::flush(Qp &qp, Pending &out) {
    bool did = false;
    if (qp.stream) {
        send_terminate(*qp.stream);
        qp.stream.reset();  // closes our reference to the socket; the kAL resets or closes the connection
        did = true;
    }
    for (uint32_t i = qp.sq_done; i != qp.sq_started; ++i) {
        SendRecord &r = qp.sends[i & (qp.setup.sq.depth - 1)];
        if (!r.done) {
            r.done = true;
            r.status = RI_WC_WR_FLUSH_ERR;
        }
    }
    if (qp.sq_done != qp.sq_started) did = true;
    retire_sends(qp, out);
    qp.reads_out = 0;
    did |= flush_checked_receives(qp, out);
    while (const uint8_t *slot = qp.sq.fetch()) {
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.send_cq, make_cqe(qp.setup.qp_num, w.wr_id, cqe_opcode(w.opcode), RI_WC_WR_FLUSH_ERR),
                 false, out);
        qp.sq.retire();
        ++qp.sq_started;
        ++qp.sq_done;
        did = true;
    }
    while (const uint8_t *slot = qp.rq.fetch()) {
        hwstub_recv_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, w.wr_id, HWSTUB_CQE_RECV, RI_WC_WR_FLUSH_ERR), false,
                 out);
        qp.rq.retire();
        ++qp.rq_checked;
        ++qp.rq_taken;
        ++qp.rq_done;
        did = true;
    }
    return did;
}

// Receive WQEs are checked as they are posted, as a chip validates on the doorbell: a malformed one or one whose
// SGEs are not writable registered memory of the QP's PD fails the QP now, not when a Send finds it.
bool OffloadEngine::serve_receive_queue(Qp &qp, Pending &out) {
    bool did = false;
    while (qp.rq_checked - qp.rq_done < qp.setup.rq.depth) {
        const uint8_t *slot = qp.rq.fetch();
        if (slot == nullptr) break;
        did = true;
        uint8_t copy[sizeof(hwstub_recv_wqe) + iwarp::kMaxSge * sizeof(hwstub_sge)];
        hwstub_recv_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        iwarp::ReceiveBuffer &b = qp.recvs[qp.rq_checked & (qp.setup.rq.depth - 1)];
        b = iwarp::ReceiveBuffer{};
        b.wr_id = w.wr_id;
        b.foreign = qp.foreign();
        uint8_t status = RI_WC_SUCCESS;
        if (w.num_sge > qp.setup.max_recv_sge ||
            sizeof w + w.num_sge * sizeof(hwstub_sge) > qp.setup.rq.slot_size) {
            status = RI_WC_LOC_QP_OP_ERR;
        } else {
            std::memcpy(copy, slot, sizeof w + w.num_sge * sizeof(hwstub_sge));
            const auto *sge = reinterpret_cast<const hwstub_sge *>(copy + sizeof w);
            for (uint32_t i = 0; i < w.num_sge && status == RI_WC_SUCCESS; ++i) {
                if (!qp.translate(sge[i], RI_ACCESS_LOCAL_WRITE, b.sge[i])) status = RI_WC_LOC_PROT_ERR;
            }
            b.num_sge = w.num_sge;
        }
        if (status != RI_WC_SUCCESS) {
            // It completes in its place: after the receives checked before it, which are flushed.
            if (qp.stream) qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
            enter_error(qp, out, RI_AE_QP_FATAL);
            flush_checked_receives(qp, out);
            complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, w.wr_id, HWSTUB_CQE_RECV, status), false, out);
            qp.rq.retire();
            ++qp.rq_checked;
            ++qp.rq_taken;
            ++qp.rq_done;
            return true;
        }
        ++qp.rq_checked;
    }
    return did;
}

bool OffloadEngine::serve_send_queue(Qp &qp, Pending &out) {
    if (qp.blocked) return false;  // until the RDMA-mode transition (a control operation, which kicks the engine)
    bool did = false;
    for (uint32_t n = 0; n < kBudget && !qp.error; ++n) {
        // The stream is going down, or closing and what was posted before is started: nothing new starts (what
        // waits is flushed with the QP).
        if (qp.stream && (qp.stream->engine.failed() || (qp.stream->closing && closed_queue(qp)))) break;
        const uint8_t *slot = qp.sq.fetch();
        if (slot == nullptr) break;
        const uint32_t index = qp.sq_started & (qp.setup.sq.depth - 1);
        uint8_t *mine = &qp.shadow[static_cast<size_t>(index) * qp.setup.sq.slot_size];
        // One read of the consumer's slot: checks and use agree (a scattered Read resumed uses the same copy).
        const uint32_t resume = qp.read_parts_posted;
        if (resume == 0) std::memcpy(mine, slot, qp.setup.sq.slot_size);
        hwstub_send_wqe w{};
        std::memcpy(&w, mine, sizeof w);
        if (!well_formed(w, qp.setup)) {
            stats_.wqes.fetch_add(1, std::memory_order_relaxed);
            wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
            return true;
        }
        const bool data = w.opcode != HWSTUB_OP_NOP && w.opcode != HWSTUB_OP_LOCAL_INV;
        if (data && !qp.stream) {
            // Data operations need the QP's stream: RDMAC verbs queue work posted before RTS.
            qp.sq.unfetch();
            qp.blocked = true;
            return did;
        }
        // Fences: the WQE starts once every earlier one (or every earlier Read) is done.
        if (resume == 0 && (((w.flags & HWSTUB_WQE_FENCE) != 0 && qp.sq_done != qp.sq_started) ||
                            ((w.flags & HWSTUB_WQE_READ_FENCE) != 0 && qp.reads_out != 0))) {
            qp.sq.unfetch();
            return did;
        }
        SendRecord &r = qp.sends[index];
        if (resume == 0) {
            r = SendRecord{};
            r.wr_id = w.wr_id;
            r.opcode = cqe_opcode(w.opcode);
            r.status = RI_WC_SUCCESS;
            r.signaled = (w.flags & HWSTUB_WQE_SIGNALED) != 0;
            r.read = w.opcode == HWSTUB_OP_READ;
            r.parts = r.read ? std::max<uint32_t>(w.num_sge, 1) : 0;
        }
        if (w.opcode == HWSTUB_OP_NOP) {
            r.done = true;
        } else if (w.opcode == HWSTUB_OP_LOCAL_INV) {
            r.done = true;
            if (!stags_.invalidate(w.inv_stag, qp.setup.pd)) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_LOC_PROT_ERR, out);
                return true;
            }
        } else {
            iwarp::WorkRequest wr;
            wr.wr_id = qp.sq_started;  // the send queue index: the completion finds its record by it
            const bool solicited = (w.flags & HWSTUB_WQE_SOLICITED) != 0;
            bool ok = true;
            if ((w.flags & HWSTUB_WQE_INLINE) != 0) {
                wr.sge[0] = iwarp::LocalSpan{mine + sizeof w, w.inline_len};  // the engine's own copy
                wr.num_sge = w.inline_len > 0 ? 1 : 0;
            } else {
                const auto *sge = reinterpret_cast<const hwstub_sge *>(mine + sizeof w);
                const uint32_t need = w.opcode == HWSTUB_OP_READ ? RI_ACCESS_LOCAL_WRITE : RI_ACCESS_LOCAL_READ;
                for (uint32_t i = 0; i < w.num_sge && ok; ++i) ok = qp.translate(sge[i], need, wr.sge[i]);
                wr.num_sge = w.num_sge;
                wr.foreign = qp.foreign();
            }
            if (!ok) {
                stats_.wqes.fetch_add(1, std::memory_order_relaxed);
                wqe_failed(qp, RI_WC_LOC_PROT_ERR, out);
                return true;
            }
            switch (w.opcode) {
                case HWSTUB_OP_SEND: wr.type = solicited ? iwarp::WorkType::send_se : iwarp::WorkType::send; break;
                case HWSTUB_OP_SEND_INV:
                    wr.type = solicited ? iwarp::WorkType::send_se_inv : iwarp::WorkType::send_inv;
                    wr.inv_stag = w.inv_stag;
                    break;
                case HWSTUB_OP_WRITE:
                    wr.type = iwarp::WorkType::write;
                    wr.remote_stag = w.remote_stag;
                    wr.remote_to = w.remote_to;
                    break;
                default:  // HWSTUB_OP_READ (well_formed() let nothing else through)
                    wr.type = iwarp::WorkType::read;
                    wr.remote_stag = w.remote_stag;
                    break;
            }
            if (w.opcode == HWSTUB_OP_READ) {
                // One Read per sink SGE, each for the next piece of the remote buffer (as softrnic does): the
                // responder sends one Read Response per part, placed straight into that SGE's region.
                const auto *sge = reinterpret_cast<const hwstub_sge *>(mine + sizeof w);
                uint64_t offset = 0;
                for (uint32_t i = 0; i < resume; ++i) offset += sge[i].length;
                for (uint32_t i = resume; i < r.parts; ++i) {
                    iwarp::WorkRequest part = wr;
                    part.num_sge = 0;
                    if (w.num_sge > 0) {
                        part.local_stag = sge[i].lkey;
                        part.local_to = sge[i].addr;
                        part.length = sge[i].length;
                    }
                    part.remote_to = w.remote_to + offset;
                    const rdma::Status st = qp.stream->engine.post(part);
                    if (st.code() == RI_EAGAIN) {
                        qp.read_parts_posted = i;  // the rest when the engine has room again
                        qp.sq.unfetch();
                        return did;
                    }
                    if (!st) {
                        qp.read_parts_posted = 0;
                        if (i > 0) {
                            // Parts are with the engine: the QP fails behind them (its Terminate flushes them).
                            qp.stream->engine.abort(iwarp::term::kRdmapLocalCatastrophic);
                            ++qp.sq_started;
                            enter_error(qp, out, RI_AE_QP_FATAL);
                            return true;
                        }
                        wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
                        return true;
                    }
                    ++qp.reads_out;
                    offset += sge[i].length;
                }
                qp.read_parts_posted = 0;
            } else {
                wr.remote_to = w.remote_to;
                const rdma::Status st = qp.stream->engine.post(wr);
                if (st.code() == RI_EAGAIN) {
                    qp.sq.unfetch();  // the engine's queue is full: this WQE waits for a completion
                    return did;
                }
                if (!st) {
                    wqe_failed(qp, RI_WC_LOC_QP_OP_ERR, out);
                    return true;
                }
            }
        }
        stats_.wqes.fetch_add(1, std::memory_order_relaxed);
        ++qp.sq_started;
        did = true;
    }
    retire_sends(qp, out);
    return did;
}

// A closing QP has started everything posted before its move to CLOSING (or the host's index says nothing more is
// there: a scribbled one must not hold the FIN back for ever).
bool OffloadEngine::closed_queue(const Qp &qp) noexcept {
    const uint32_t left = qp.stream->close_at - qp.sq_started;
    return left == 0 || left > qp.setup.sq.depth || !qp.sq.pending() || qp.sq.overrun();
}

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
    providers::common::sent_on(s.emss, s.engine, s.fd, n);
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
        const ssize_t n = send_iov(s.fd, iov, iovcnt);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        written(s, static_cast<size_t>(n));
    }
}

bool OffloadEngine::faults_armed_for(const Qp &qp) const noexcept {
    return (faults_.tx_drop.load(std::memory_order_relaxed) | faults_.tx_corrupt.load(std::memory_order_relaxed) |
            faults_.tx_delay_ms.load(std::memory_order_relaxed)) != 0 &&
           faults_.aims_at(qp.setup.qp_num);
}

// The wire's faults on the frame just built in @p slot: lost, corrupted (the DDP version's low bit: with CRC the
// peer's CRC check fails, without it the version check), or held back.
void OffloadEngine::outbound_faults(Qp &qp, size_t slot) {
    Stream &s = *qp.stream;
    if (FaultPlan::take(faults_.tx_drop)) {
        s.lost[slot] = 1;
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
    } else if (FaultPlan::take(faults_.tx_corrupt)) {
        iwarp::TxFrame &f = s.frames[slot];
        const iovec &last = f.iov[f.iovcnt - 1];
        const bool whole = last.iov_base == static_cast<void *>(f.compact);  // a small FPDU, framed in one piece
        if (s.crc && (whole || (last.iov_base >= static_cast<void *>(f.tail) &&
                                last.iov_base < static_cast<void *>(f.tail + sizeof f.tail)))) {
            static_cast<uint8_t *>(last.iov_base)[last.iov_len - 1] ^= 0x10;  // the CRC's last byte
        } else {
            (whole ? f.compact : f.head)[iwarp::kMpaLengthLen] ^= 0x01;  // the DDP version
        }
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
    }
    if (const uint32_t ms = faults_.tx_delay_ms.load(std::memory_order_relaxed); ms != 0) {
        s.due[slot] = steady_ns() + static_cast<int64_t>(ms) * 1'000'000;
    }
}

// An inbound fault: one bit of @p last (the last byte a read brought) flipped. With CRC the FPDU it belongs to
// fails its check; reads end where the peer's writes did, so that is almost always a CRC byte.
void OffloadEngine::corrupt_inbound(const Qp &qp, uint8_t &last) {
    if (faults_.rx_corrupt.load(std::memory_order_relaxed) == 0 || !faults_.aims_at(qp.setup.qp_num)) return;
    if (!FaultPlan::take(faults_.rx_corrupt)) return;
    last ^= 0x10;
    stats_.faults.fetch_add(1, std::memory_order_relaxed);
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
            n = stream_recv(s.fd, stage, sizeof stage);
            if (n > 0) {
                corrupt_inbound(qp, stage[n - 1]);
                (void)rx.feed(std::span<const uint8_t>(stage, static_cast<size_t>(n)));
            }
        } else {
            n = stream_recv(s.fd, dst.data(), dst.size());
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
        const ssize_t n = send_iov(s.fd, iov, iovcnt);
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
        (void)::shutdown(s.fd, SHUT_WR);
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

void OffloadEngine::serve() {
    Pending out;
    std::vector<pollfd> fds;
    int64_t idle_since = 0;
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
            continue;
        }
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
        {
            std::lock_guard g(mutex_);
            set_sleeping(1);
            work = anything_to_do();
            for (auto &[num, qp] : qps_) {
                if (!qp->stream || qp->error) continue;
                const Stream &s = *qp->stream;
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
        }
        uint64_t count = 0;
        if (::read(efd_, &count, sizeof count) > 0) {
            std::atomic_ref<uint64_t>(page_->wakeups).fetch_add(1, std::memory_order_relaxed);
        }
    }
}

}  // namespace hwstub
