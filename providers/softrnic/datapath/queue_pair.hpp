// A queue pair of the data path: its send ring, its receive queue (own or shared), and, from the RDMA-mode
// transition on, its stream: the iWARP engine on a non-blocking TCP socket. The poster's thread frames and writes
// what it posts; the progress thread (or a poll that finds its CQ empty) receives and finishes what the socket could
// not take at once.
#ifndef SOFTRNIC_DATAPATH_QUEUE_PAIR_HPP
#define SOFTRNIC_DATAPATH_QUEUE_PAIR_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/fast_reg.hpp"
#include "completion_queue.hpp"
#include "counters.hpp"
#include "iwarp/engine.hpp"
#include "receive_queue.hpp"
#include "ring.hpp"
#include "rnicpi/ri_verbs.h"
#include "stag_table.hpp"
#include "tunables.hpp"

namespace softrnic::datapath {

/** @brief What the owner of a queue pair (the uVP, later the kVP) does for it. Called with no data-path lock held. */
class QpOwner {
public:
    virtual ~QpOwner() = default;
    /** @brief Raises @p event through the RNIC's asynchronous event handler. */
    virtual void async_event(const ri_async_event_t &event) noexcept = 0;
    /** @brief The QP entered ERROR on its own (stream failure, Terminate, peer close): tell the kVP. */
    virtual void entered_error() noexcept = 0;
    /**
     * @brief Checks the operation-specific part of a memory operation (::RI_WR_BIND_MW, ::RI_WR_FAST_REG) that
     *        names the owner's objects; ::RI_OK to accept it. For a bind, fills @p bind (when given) with the STags
     *        its handles name; for a fast registration, @p fast_reg (when given) with its slot form (fast_reg_op()).
     */
    virtual ri_status_t check_memory_op(const ri_send_wr_t &wr, softrnic_bind_op *bind,
                                        softrnic_fast_reg_op *fast_reg) noexcept = 0;
};

/**
 * @brief The checks of QpOwner::check_memory_op() on the owner's objects: for ::RI_WR_BIND_MW the window @p mw
 *        (type 2 only: type 1 windows bind by the verb) and a region named unless it unbinds; for ::RI_WR_FAST_REG the region @p mr
 *        (made for fast registration, enough pages, a page list when there are pages). Null: no such object.
 */
template <class Mw, class Mr>
[[nodiscard]] ri_status_t check_memory_op(const ri_send_wr_t &w, const Mw *mw, const Mr *mr) noexcept {
    if (w.opcode == RI_WR_BIND_MW) {
        const bool no_region = w.u.bind.mr == nullptr && w.u.bind.length != 0;
        return mw == nullptr || no_region || mw->type != RI_MW_TYPE_2 ? RI_EINVAL : RI_OK;
    }
    if (mr == nullptr || mr->max_pages == 0 || (w.u.fast_reg.num_pages > 0 && w.u.fast_reg.pages == nullptr)) {
        return RI_EINVAL;
    }
    return w.u.fast_reg.num_pages > mr->max_pages ? RI_ERANGE : RI_OK;
}

/**
 * @brief The slot form of fast registration @p w of the STag allocated as @p allocated in data-path PD @p pd, in
 *        @p out; ::RI_EINVAL for a page list softrnic does not map (providers::common::fast_reg_range()).
 */
[[nodiscard]] inline ri_status_t fast_reg_op(const ri_send_wr_t &w, ri_stag_t allocated, uint32_t pd,
                                             softrnic_fast_reg_op &out) noexcept {
    providers::common::FastRegRange r;
    if (ri_status_t rc = providers::common::fast_reg_range(w, allocated, r); rc != RI_OK) return rc;
    out = softrnic_fast_reg_op{allocated, r.stag, r.addr, r.length, r.iova, r.access, pd, r.pages, 0};
    return RI_OK;
}

/**
 * @brief The slot form of bind @p w: window @p window of protection domain @p window_pd over region @p region (0 when
 *        @p w unbinds).
 */
[[nodiscard]] inline softrnic_bind_op bind_op(const ri_send_wr_t &w, ri_stag_t window, uint32_t window_pd,
                                              ri_stag_t region) noexcept {
    softrnic_bind_op b{};
    b.window = window;
    b.window_pd = window_pd;
    b.length = w.u.bind.length;
    if (b.length != 0) {
        b.region = region;
        b.addr = w.u.bind.addr;
        b.access = w.u.bind.access & (RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE);
    }
    return b;
}

class FramePool;
/** @brief A new pool of parked frames (transmit.cpp): one per RNIC open, shared by its queue pairs. */
[[nodiscard]] std::shared_ptr<FramePool> make_frame_pool();

/** @brief Creation parameters of a queue pair. */
struct QpSetup {
    uint32_t qp_num = 0;     /**< QP number (completions, events). */
    uint32_t pd = 0;         /**< Protection domain identifier. */
    ri_qp_init_attr_t init{}; /**< Attributes in effect (depths, SGEs, inline size, flags, context). */
    Tunables tunables;       /**< The RNIC's tunables when the QP was made. */
    /** @brief The open's pool of parked frames (make_frame_pool()), kept while the QP is; null: none recycled. */
    std::shared_ptr<FramePool> frames;
};

/** @brief One queue pair. Thread-safe; see the file comment for who does what. */
class QueuePair final : private iwarp::EngineOwner {
public:
    /**
     * @brief A queue pair in IDLE. @p sq_ring holds init.sq_depth send slots (::softrnic_sq_slot_size()); @p rq is
     *        the QP's receive queue or its SRQ (@p shared). The CQs, the queue and the STag table outlive the QP.
     */
    QueuePair(const QpSetup &setup, uint8_t *sq_ring, ReceiveQueue &rq, bool shared, CompletionQueue &scq,
              CompletionQueue &rcq, StagTable &stags, QpOwner &owner);
    QueuePair(const QueuePair &) = delete;
    QueuePair &operator=(const QueuePair &) = delete;
    /** @brief Stops the stream (posted work is dropped without completions) and closes its socket. */
    ~QueuePair() override;

    /** @brief Post Send: checks and queues; in RTS, hands the work to the engine and writes what the socket takes. */
    [[nodiscard]] ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted);
    /** @brief Post Receive to the QP's own receive queue. */
    [[nodiscard]] ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);

    /**
     * @brief The local RDMA-mode transition IDLE -> RTS on the connected TCP socket @p fd, which the QP owns from
     *        now on (it is closed on failure too). ::RI_EINVAL when not IDLE or for inconsistent parameters,
     *        ::RI_EBADF when @p fd is not a stream socket.
     */
    [[nodiscard]] ri_status_t attach(int fd, const ri_llp_params_t &llp);
    /**
     * @brief Acts on a state change the kVP accepted: CLOSING (orderly: FIN after the outstanding send work),
     *        TERMINATE (a Terminate with @p term, then ERROR), ERROR (abortive: flush, close), IDLE (reset).
     */
    void change_state(uint32_t state, iwarp::TermCode term = {});
    /** @brief The local state (::ri_qp_state). */
    [[nodiscard]] uint32_t state() const noexcept;
    /** @brief The stream's parameters; false before the RDMA-mode transition. */
    [[nodiscard]] bool llp(ri_llp_params_t &out) const;
    /** @brief Whether the QP is on a stream now (RTS, CLOSING or TERMINATE with a socket). */
    [[nodiscard]] bool attached() const;

    /** @brief Counts this QP's traffic and errors into @p slot from now on (set before attach()). */
    void set_counters(CounterSlot slot) noexcept {
        std::lock_guard g(mutex_);
        counters_ = slot;
    }

    /** @brief Progress thread: serve the socket (events from epoll). */
    void service();
    /**
     * @brief Inline progress from empty poll number @p poll of @p cq (one of this QP's CQs): serve the socket if
     *        nobody else is (try-lock); false if it was busy. @p moved (when given) is set when the socket took or
     *        gave bytes in this pass.
     */
    bool try_service(const CompletionQueue &cq, uint64_t poll, bool *moved = nullptr);
    /**
     * @brief Progress thread, for a parked QP (its consumer busy-polls): true while the consumer polled since the
     *        last look and none of the QP's CQs is armed; else the stream gets its input edges back and the answer
     *        is false.
     */
    bool recheck_park();
    /**
     * @brief Progress thread, at the time the QP asked for (its nudge timer, see docs/siw-interop.md): sends a nudge
     *        when one is due and returns when to look again; std::nullopt when the nudge is over for this stream.
     */
    std::optional<std::chrono::steady_clock::time_point> nudge_due(std::chrono::steady_clock::time_point now);
    /** @brief Whether the progress thread left this QP's input to its busy-polling consumer (any thread). */
    [[nodiscard]] bool parked() const noexcept { return parked_.load(std::memory_order_relaxed); }

private:
    struct Stream;
    struct Outcome;
    struct SlotState;

    /** @brief Executes bind @p b on this QP's STag table (length 0: unbinds); false when the region refuses it. */
    bool bind_window(const softrnic_bind_op &b);

    // EngineOwner
    bool resolve_stag(uint32_t stag, iwarp::Region &out) override;
    bool take_receive(iwarp::ReceiveBuffer &out) override;
    bool invalidate_stag(uint32_t stag) override;
    void completed(const iwarp::Completion &c) override;
    void peer_terminated(const iwarp::Terminate &t) override;
    bool peer_takes_pulls() noexcept override;
    bool pull(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept override;

    ri_status_t check_send(const ri_send_wr_t &w, uint64_t &inline_len) const;
    void write_slot(const ri_send_wr_t &w, uint64_t inline_len);
    void issue();
    bool resolve_gather(const softrnic_sq_wqe &h, const uint8_t *slot, iwarp::WorkRequest &wr) const;
    void release_done();
    void local_failure(uint32_t slot, uint32_t status);
    void transmit(size_t budget);
    // Hands the engine requests that waited for its room; true when it took any.
    bool refill();
    // The socket of @p s refused bytes and @p full streams of the process now wait for room: limits what its send
    // queue may hold unsent to their share of @p budget (providers::common::UnsentBudget).
    static void limit_unsent(Stream &s, uint64_t budget, uint32_t full);
    // @p to_eagain: read until the socket says EAGAIN (or ends), as the progress thread must after an edge; else a
    // short read ends the pass (inline progress: the progress thread still drains after every edge).
    void receive(size_t budget, bool to_eagain = true);
    void pump(size_t budget, bool to_eagain = true);
    // transmit() moved bytes while the nudge is armed: the silence the nudge waits for starts now.
    void nudge_sent_bytes();
    void settle();
    // Tells the progress thread's epoll set what the stream wants now (under mutex_, with a stream): input unless
    // parked, output while the socket has refused bytes; wanting neither takes the socket out of the set. False
    // when the set could not take a socket that wants edges (no memory): the caller arranges another try.
    bool update_interest();
    // Under mutex_: the stream has something to send (the engine had more, the socket refused bytes, frames or
    // corked requests wait, or requests wait in the send queue for the engine's room).
    [[nodiscard]] bool sending(const Stream &s) const noexcept;
    // Under mutex_: the stream sends nothing, has nothing in flight and has not failed; only its peer can give it
    // work.
    [[nodiscard]] bool quiet(const Stream &s) const noexcept;
    // Under mutex_: the stream moves over a same-host channel and its consumer busy-polls it (parked): what one post
    // or poll leaves (a full ring, a budget spent) waits for that consumer's next poll, not for the progress thread.
    [[nodiscard]] bool consumer_moves(const Stream &s) const noexcept;
    // Any thread: a consumer armed one of the QP's CQs to sleep until a completion (CompletionQueue::armed): what
    // the QP would leave to that consumer's polls would wait for polls that do not come, so it is not parked.
    [[nodiscard]] bool cq_armed() const noexcept { return scq_.armed() || rcq_.armed(); }
    void enter_error(int failing, uint32_t status, uint32_t vendor_err, uint32_t recv_status, bool tell_kvp);
    void flush_rings(int failing, uint32_t status, uint32_t vendor_err, uint32_t recv_status);
    int oldest_inflight() const;
    void set_state(uint32_t state);
    void add_event(uint32_t event_id, uint32_t detail = 0);
    ri_wc_t sq_wc(const uint8_t *slot, uint32_t status) const;
    ri_wc_t wc(uint64_t wr_id, uint32_t opcode, uint32_t status) const;
    void finish(Outcome &o);

    const QpSetup setup_;
    const uint32_t sq_slot_size_;
    SlotRing sq_;
    ReceiveQueue &rq_;
    const bool shared_rq_;
    CompletionQueue &scq_;
    CompletionQueue &rcq_;
    StagTable &stags_;
    QpOwner &owner_;
    // The STags this QP resolved last (under mutex_): its own buffers of posted work, and what its input names (the
    // receive buffer a Send lands in, the region an inbound Write or Read names).
    mutable StagCache posted_stag_;
    StagCache inbound_stag_;

    mutable std::mutex mutex_;  // the send ring, the stream and the state; order: mutex_, rq_.lock(), a CQ's lock
    uint32_t state_ = RI_QPS_IDLE;  // changed under mutex_ and rq_.lock()
    std::unique_ptr<Stream> stream_;  // from the RDMA-mode transition to ERROR
    bool registered_ = false;         // ever handed to the progress thread
    bool rfc7306_ = false;            // the stream's peer speaks RFC 7306 (RI_MPA_RFC7306 at the transition)
    // Busy-poll detection (under mutex_): inline passes so far, and their number at the progress thread's last
    // service; parked_ is written under mutex_ and read anywhere (a CQ being armed unparks its QPs).
    uint32_t inline_polls_ = 0;
    uint32_t polls_seen_ = 0;
    // Polls that found the QP held (by the progress thread serving it, usually) while its stream moves over a
    // same-host channel: busy polling as much as the inline passes, or a stream the thread serves would never be
    // parked while its consumer spins on the lock beside it. (On TCP the thread keeps such a stream: counted there
    // too, 8 MiB Writes on the wire lost a tenth.)
    std::atomic<uint32_t> held_polls_{0};
    std::atomic<bool> on_channel_{false};  // the stream moves over a same-host channel (set at attach)
    // Both kinds of poll so far (under mutex_).
    [[nodiscard]] uint32_t polls() const noexcept {
        return inline_polls_ + held_polls_.load(std::memory_order_relaxed);
    }
    // The empty-poll number of the last inline pass from each of its CQs (under mutex_): passes more than
    // kAdjacentPolls of that CQ's polls apart are not busy polling of this QP.
    uint64_t last_poll_send_cq_ = 0;
    uint64_t last_poll_recv_cq_ = 0;
    static constexpr uint64_t kAdjacentPolls = 256;
    std::atomic<bool> parked_{false};
    // A kick asked the progress thread to look at a busy-polling consumer's QP that nothing else brings it to (a
    // pure sender's socket raises no input edges); cleared by the thread's next service.
    bool park_asked_ = false;
    // Posts since the consumer's last inline pass (under mutex_): a second post in a row to a parked stream is
    // corked (see post_send()).
    uint32_t posts_since_poll_ = 0;
    Outcome *out_ = nullptr;          // under mutex_: what to do once it is dropped (the caller's)
    CounterSlot counters_;            // under mutex_: published at every settle()
    std::atomic<uint32_t> &full_streams_;  // Progress::full_streams(), looked up once
    iwarp::EngineStats carried_{};    // traffic of earlier streams (a QP reset and reconnected)
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_QUEUE_PAIR_HPP
