// The offload engine's thread: doorbell records in, CQEs and interrupts out. See offload_engine.hpp.
#include "offload_engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <vector>

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

// WQEs one queue executes per pass, so one busy QP cannot starve the others.
constexpr uint32_t kBudget = 32;

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
        if (sizeof(hwstub_send_wqe) + w.inline_len > s.sq.slot_size) return false;
    } else {
        if (w.num_sge > s.max_send_sge) return false;
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

ri_async_event_t qp_event(uint32_t qp_num, uint32_t event_id) {
    ri_async_event_t e{};
    e.resource_type = RI_RES_QP;
    e.event_id = event_id;
    e.resource_id = qp_num;
    return e;
}

}  // namespace

OffloadEngine::OffloadEngine(hwstub_engine_page *page, EngineHooks hooks) : page_(page), hooks_(std::move(hooks)) {}

OffloadEngine::~OffloadEngine() {
    stop();
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
        qp.sq.slot_size < sizeof(hwstub_send_wqe) || qp.rq.slot_size < sizeof(hwstub_recv_wqe)) {
        return RI_EINVAL;
    }
    std::lock_guard g(mutex_);
    if (qps_.count(qp.qp_num) != 0) return RI_EEXIST;
    auto scq = cqs_.find(qp.send_cq);
    auto rcq = cqs_.find(qp.recv_cq);
    if (scq == cqs_.end() || rcq == cqs_.end()) return RI_EINVAL;
    auto q = std::make_unique<Qp>();
    q->setup = qp;
    q->sq = WqConsumer(qp.sq, qp.sq_ctrl);
    q->rq = WqConsumer(qp.rq, qp.rq_ctrl);
    ++scq->second->users;
    ++rcq->second->users;
    qps_.emplace(qp.qp_num, std::move(q));
    return RI_OK;
}

ri_status_t OffloadEngine::remove_qp(uint32_t qp_num) {
    std::lock_guard g(mutex_);
    auto it = qps_.find(qp_num);
    if (it == qps_.end()) return RI_ENOENT;
    for (uint32_t cq : {it->second->setup.send_cq, it->second->setup.recv_cq}) {
        auto c = cqs_.find(cq);
        if (c != cqs_.end()) --c->second->users;
    }
    qps_.erase(it);
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

void OffloadEngine::fail() {
    if (dead_.exchange(true, std::memory_order_acq_rel)) return;
    DoorbellWait(page_, efd_).die();
    fatal_pending_.store(true, std::memory_order_release);
    kick();
}

void OffloadEngine::complete(uint32_t cq_id, const hwstub_cqe &cqe, bool solicited, Pending &out) {
    auto it = cqs_.find(cq_id);
    if (it == cqs_.end()) return;
    Cq &cq = *it->second;
    if (!cq.writer.push(cqe)) {
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
    if (cq.writer.take_arm(solicited)) out.interrupts.push_back(cq_id);
}

// ERROR as the host sees it too: both control blocks say so (the uVP then completes later posts itself).
void OffloadEngine::mark_error(Qp &qp) {
    qp.error = true;
    qp.sq.set_error();
    qp.rq.set_error();
}

void OffloadEngine::enter_error(Qp &qp, Pending &out, uint32_t event_id) {
    if (qp.error) return;
    mark_error(qp);
    out.events.push_back(qp_event(qp.setup.qp_num, event_id));
}

// Completes everything posted to a QP in ERROR with RI_WC_WR_FLUSH_ERR (RDMAC verbs: flushed requests always
// complete, signalled or not).
bool OffloadEngine::flush(Qp &qp, Pending &out) {
    bool did = false;
    while (const uint8_t *slot = qp.sq.fetch()) {
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.send_cq, make_cqe(qp.setup.qp_num, w.wr_id, cqe_opcode(w.opcode), RI_WC_WR_FLUSH_ERR),
                 false, out);
        qp.sq.retire();
        did = true;
    }
    while (const uint8_t *slot = qp.rq.fetch()) {
        hwstub_recv_wqe w{};
        std::memcpy(&w, slot, sizeof w);
        complete(qp.setup.recv_cq, make_cqe(qp.setup.qp_num, w.wr_id, HWSTUB_CQE_RECV, RI_WC_WR_FLUSH_ERR), false,
                 out);
        qp.rq.retire();
        did = true;
    }
    return did;
}

bool OffloadEngine::serve_qp(Qp &qp, Pending &out) {
    if (qp.error) return flush(qp, out);
    if (qp.blocked) return false;  // until a state change (a control operation, which kicks the engine)
    bool did = false;
    for (uint32_t n = 0; n < kBudget; ++n) {
        const uint8_t *slot = qp.sq.fetch();
        if (slot == nullptr) break;
        did = true;
        hwstub_send_wqe w{};
        std::memcpy(&w, slot, sizeof w);  // one read of the consumer's slot: checks and use see the same bytes
        stats_.wqes.fetch_add(1, std::memory_order_relaxed);
        if (!well_formed(w, qp.setup)) {
            complete(qp.setup.send_cq,
                     make_cqe(qp.setup.qp_num, w.wr_id, cqe_opcode(w.opcode), RI_WC_LOC_QP_OP_ERR), false, out);
            qp.sq.retire();
            enter_error(qp, out, RI_AE_QP_FATAL);
            flush(qp, out);
            return true;
        }
        if (w.opcode != HWSTUB_OP_NOP) {
            // Data and memory operations need the QP's stream and STag table: until the engine runs a stream
            // the QP is not in RTS, and its work waits (RDMAC verbs queue work posted before RTS).
            qp.sq.unfetch();
            qp.blocked = true;
            return did;
        }
        if ((w.flags & HWSTUB_WQE_SIGNALED) != 0 || qp.setup.signal_all) {
            complete(qp.setup.send_cq, make_cqe(qp.setup.qp_num, w.wr_id, HWSTUB_CQE_NOP, RI_WC_SUCCESS), false,
                     out);
        }
        qp.sq.retire();
    }
    if (qp.sq.overrun() || qp.rq.overrun()) {
        enter_error(qp, out, RI_AE_QP_FATAL);
        flush(qp, out);
        did = true;
    }
    return did;
}

bool OffloadEngine::pass(Pending &out) {
    if (fatal_pending_.exchange(false, std::memory_order_acq_rel)) {
        ri_async_event_t e{};
        e.resource_type = RI_RES_RNIC;
        e.event_id = RI_AE_RNIC_FATAL;
        out.events.push_back(e);
        for (auto &[num, qp] : qps_) mark_error(*qp);  // no per-QP event: the RNIC's says it all
    }
    bool did = false;
    for (auto &[num, qp] : qps_) did |= serve_qp(*qp, out);
    return did;
}

bool OffloadEngine::anything_posted() {
    if (fatal_pending_.load(std::memory_order_acquire)) return true;
    for (auto &[num, qp] : qps_) {
        if (qp->sq.overrun() || qp->rq.overrun()) continue;  // in ERROR for good: nothing it posts is read
        if (qp->sq.pending() && (qp->error || !qp->blocked)) return true;
        if (qp->rq.pending() && qp->error) return true;
    }
    return false;
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
    DoorbellWait bell(page_, efd_);
    Pending out;
    while (!stop_.load(std::memory_order_acquire)) {
        bool did;
        {
            std::lock_guard g(mutex_);
            did = pass(out);
        }
        deliver(out);
        if (did) continue;
        // Nothing to do: say so, then look once more (a post may have landed before the flag was seen).
        bell.prepare_sleep();
        bool work;
        {
            std::lock_guard g(mutex_);
            work = anything_posted();
        }
        if (!work && !stop_.load(std::memory_order_acquire)) {
            stats_.sleeps.fetch_add(1, std::memory_order_relaxed);
            pollfd p{efd_, POLLIN, 0};
            ::poll(&p, 1, -1);
        }
        bell.awake();
    }
}

}  // namespace hwstub
