/**
 * @file offload_engine.hpp
 * @brief The offload engine (OE) of one hwstub RNIC instance: the emulated adapter's processor.
 *
 * One thread per engine (an instance has `engines` of them, each serving its own opens), never the consumer's: it
 * watches the doorbell records of every queue it was given and the sockets of every stream it runs, fetches and checks
 * WQEs in order, translates their local STags through the adapter's STag table, hands them to the shared iWARP engine
 * (iwarp::Engine) of the QP's stream, moves payload between the wire and the consumer's registered memory through its
 * DMA channel, writes CQEs with their owner bits in posting order, mirrors the "requests done" counters, raises an
 * interrupt (a call of the instance's completion hook, which the kVP routes through the kAL's completion event handler
 * path) for an armed CQ, and raises asynchronous events (QP errors and how a stream ended, CQ overflow, the adapter's
 * own catastrophic error). When nothing is posted and no socket has anything for it, it says so on every engine page
 * and sleeps on its eventfd and its sockets, so posters ring only a sleeping engine.
 *
 * Every check a chip makes is made here, on a private copy of the WQE: an unknown opcode or flag, too many SGEs,
 * inline data over the QP's limit or its slot complete the WQE with RI_WC_LOC_QP_OP_ERR; an lkey that is not a
 * valid STag of the QP's protection domain, a range outside its region or missing rights complete it with
 * RI_WC_LOC_PROT_ERR; either moves the QP to ERROR (RI_AE_QP_FATAL), flushes the rest and terminates the stream.
 * Inbound segments are checked by iwarp::Engine (RFC 5040/5041) against the same table.
 *
 * Control operations (add/remove objects, state changes, the RDMA-mode transition) may come from any thread; they
 * are applied under the engine's table lock, which the OE holds only while it works, never while it sleeps.
 */
#ifndef HWSTUB_KVP_OFFLOAD_ENGINE_HPP
#define HWSTUB_KVP_OFFLOAD_ENGINE_HPP

#include <poll.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/stag_table.hpp"
#include "hw_queues.hpp"
#include "iwarp/wire.hpp"
#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace hwstub {

/** @brief The adapter's STag table (a chip keeps it in its own memory): written by the kVP at registration, read by
 *         the OE for every SGE it fetches and every tagged segment it receives. The one both providers use. */
using providers::common::StagEntry;
using providers::common::StagTable;

/** @brief A completion queue as the adapter sees it: its ring and control block (mapped by both sides). */
struct CqSetup {
    uint32_t id = 0;                /**< The CQ's identifier (interrupts name it). */
    hwstub_cqe *ring = nullptr;     /**< depth CQEs. */
    uint32_t depth = 0;             /**< A power of two. */
    hwstub_cq_ctrl *ctrl = nullptr; /**< Its control block. */
};

/** @brief A queue pair as the adapter sees it. The rings and CQs outlive its registration. */
struct QpSetup {
    uint32_t qp_num = 0;               /**< QP number (CQEs, events). */
    RingGeometry sq;                   /**< Send ring. */
    hwstub_wq_ctrl *sq_ctrl = nullptr; /**< Its control block. */
    RingGeometry rq;                   /**< Receive ring. */
    hwstub_wq_ctrl *rq_ctrl = nullptr; /**< Its control block. */
    uint32_t send_cq = 0;              /**< CQ id for send completions. */
    uint32_t recv_cq = 0;              /**< CQ id for receive completions. */
    uint32_t max_send_sge = 0;         /**< SGEs a send WQE may carry. */
    uint32_t max_recv_sge = 0;         /**< SGEs a receive WQE may carry. */
    uint32_t max_inline = 0;           /**< Inline bytes a send WQE may carry. */
    bool signal_all = false;           /**< Every send WQE completes with a CQE. */
    pid_t owner = 0;                   /**< The consumer process whose memory the QP's WQEs name (its DmaChannel). */
    uint32_t pd = 0;                   /**< Protection domain of the QP: STags of other PDs are refused. */
    uint64_t context = 0;              /**< Consumer context, reported with the QP's asynchronous events. */
    /**
     * A shared receive queue of this engine (add_srq()) the QP takes its receives from, or 0 for its own receive
     * queue: then `rq` is a ring the engine never reads.
     */
    uint32_t srq = 0;
};

/** @brief A shared receive queue as the adapter sees it. The ring outlives its registration. */
struct SrqSetup {
    uint32_t id = 0;                /**< The SRQ's identifier (nonzero; its asynchronous events name it). */
    RingGeometry ring;              /**< Receive ring. */
    hwstub_wq_ctrl *ctrl = nullptr; /**< Its control block. */
    uint32_t max_sge = 0;           /**< SGEs a receive WQE may carry. */
    uint32_t pd = 0;                /**< Protection domain: only QPs of this PD take from it, its SGEs are checked in it. */
    uint64_t context = 0;           /**< Consumer context, reported with ::RI_AE_SRQ_LIMIT_REACHED. */
    uint32_t limit = 0;             /**< The armed limit (set_srq_limit() changes it; a take disarms it); 0: disarmed. */
};

/** @brief What the engine reports to its kVP. Called on the OE thread with no engine lock held. */
struct EngineHooks {
    /** @brief An armed CQ got a matching CQE: raise its completion event (the interrupt). */
    std::function<void(uint32_t cq_id)> interrupt;
    /** @brief An asynchronous event (QP error, how a stream ended, CQ overflow, catastrophic error). */
    std::function<void(const ri_async_event_t &event)> async_event;
};

/** @brief Counters of the engine (read with relaxed loads from any thread). */
struct EngineStats {
    std::atomic<uint64_t> wqes{0};       /**< WQEs executed or failed. */
    std::atomic<uint64_t> cqes{0};       /**< CQEs written. */
    std::atomic<uint64_t> interrupts{0}; /**< Completion events raised. */
    std::atomic<uint64_t> sleeps{0};     /**< Times the engine waited for a doorbell or a socket. */
    std::atomic<uint64_t> tx_bytes{0};   /**< Payload bytes sent on every stream. */
    std::atomic<uint64_t> rx_bytes{0};   /**< Payload bytes placed from every stream. */
    std::atomic<uint64_t> faults{0};     /**< Injected faults that fired (FaultPlan). */
};

/**
 * @brief The faults an engine injects, hwstub's emulation of a failing wire or adapter (set from the instance's
 *        `faults` option or `rdmactl inject`; see the provider's README). Counts are consumed as faults fire; every
 *        field may be changed from any thread at any time.
 */
struct FaultPlan {
    std::atomic<uint32_t> qp{0};          /**< Wire and CQ faults hit only this QP number; 0: any QP. */
    std::atomic<uint32_t> rx_corrupt{0};  /**< Inbound reads to corrupt (one bit of the last byte read flipped). */
    std::atomic<uint32_t> tx_corrupt{0};  /**< Outbound FPDUs to corrupt (the DDP version bit of their header). */
    std::atomic<uint32_t> tx_drop{0};     /**< Outbound FPDUs the wire loses (never sent, as if sent). */
    std::atomic<uint32_t> tx_delay_ms{0}; /**< Every outbound FPDU waits this long before the wire (until cleared). */
    std::atomic<uint32_t> cq_overflow{0}; /**< CQE writes lost as if their CQ were full. */

    /** @brief Consumes one fault of @p count if any is left; true when the caller must inject it. */
    static bool take(std::atomic<uint32_t> &count) noexcept {
        uint32_t n = count.load(std::memory_order_relaxed);
        while (n != 0 && !count.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
        }
        return n != 0;
    }
    /** @brief True when a fault aimed at QP @p qp_num may hit it. */
    [[nodiscard]] bool aims_at(uint32_t qp_num) const noexcept {
        const uint32_t q = qp.load(std::memory_order_relaxed);
        return q == 0 || q == qp_num;
    }
    /** @brief Cancels every fault not yet fired. */
    void clear() noexcept {
        for (auto *f : {&qp, &rx_corrupt, &tx_corrupt, &tx_drop, &tx_delay_ms, &cq_overflow}) {
            f->store(0, std::memory_order_relaxed);
        }
    }
};

/** @brief One RNIC instance's offload engine. */
class OffloadEngine {
public:
    /**
     * @brief An engine on @p page (the instance's own engine page), reporting through @p hooks. An instance with
     *        several engines gives them one STag table (@p stags), one fault plan (@p faults) and one lock for the
     *        RFC 7306 atomics they serve on host memory (@p atomics), as a chip's processors share the adapter's
     *        memory; without them the engine has its own.
     * @param name The thread's name (as `ps -L` and `top -H` show it), at most 15 characters.
     */
    OffloadEngine(hwstub_engine_page *page, EngineHooks hooks, StagTable *stags = nullptr,
                  FaultPlan *faults = nullptr, std::string name = "hwstub-oe", std::mutex *atomics = nullptr);
    OffloadEngine(const OffloadEngine &) = delete;
    OffloadEngine &operator=(const OffloadEngine &) = delete;
    /** @brief Stops the thread and closes every stream. */
    ~OffloadEngine();

    /** @brief Starts the engine thread; false when the eventfd cannot be made. */
    [[nodiscard]] bool start();
    /** @brief Stops and joins the engine thread (idempotent). */
    void stop();
    /** @brief The doorbell's eventfd, which consumers' Doorbell writes (the engine keeps it). */
    [[nodiscard]] int doorbell_fd() const noexcept { return efd_; }

    /**
     * @brief Adds an engine page (one per RNIC open, mapped by that consumer alone): the engine tells it when it
     *        sleeps and when it died, so a consumer that scribbles over its page misleads only itself.
     */
    void add_page(hwstub_engine_page *page);
    /** @brief Removes a page added with add_page(). */
    void remove_page(hwstub_engine_page *page);
    /** @brief The STag table the engine checks. */
    [[nodiscard]] StagTable &stags() noexcept { return stags_; }

    /** @brief Adds a CQ; ::RI_EINVAL for a bad geometry, ::RI_EEXIST for an id in use. */
    [[nodiscard]] ri_status_t add_cq(const CqSetup &cq);
    /** @brief Removes a CQ (its QPs must be gone first: ::RI_EBUSY otherwise). */
    [[nodiscard]] ri_status_t remove_cq(uint32_t id);
    /**
     * @brief Resize CQ @p cq.id: the engine writes its CQEs to the new ring and control block of @p cq from now on,
     *        which receive what the host has not consumed (CqWriter::move_to()). ::RI_EINVAL, nothing changed, when
     *        more wait than the new ring holds; ::RI_ENOENT for an unknown CQ.
     */
    [[nodiscard]] ri_status_t resize_cq(const CqSetup &cq);
    /** @brief Adds a shared receive queue; ::RI_EINVAL for a bad geometry, ::RI_EEXIST for an id in use. */
    [[nodiscard]] ri_status_t add_srq(const SrqSetup &srq);
    /** @brief Removes an SRQ; ::RI_EBUSY while a QP takes from it, ::RI_ENOENT for an unknown one. */
    [[nodiscard]] ri_status_t remove_srq(uint32_t id);
    /**
     * @brief Arms SRQ @p id's limit (0 disarms): once fewer than @p limit receives are left untaken after a take,
     *        the engine raises ::RI_AE_SRQ_LIMIT_REACHED and disarms it. ::RI_ENOENT for an unknown SRQ.
     */
    [[nodiscard]] ri_status_t set_srq_limit(uint32_t id, uint32_t limit);
    /** @brief Adds a QP in IDLE. ::RI_EINVAL for a bad geometry, an unknown CQ or an SRQ of another PD. */
    [[nodiscard]] ri_status_t add_qp(const QpSetup &qp);
    /** @brief Removes a QP; its stream closes, posted work is dropped without completions. */
    [[nodiscard]] ri_status_t remove_qp(uint32_t qp_num);
    /**
     * @brief The RDMA-mode transition: the QP (in IDLE) runs the stream on socket @p fd (the engine owns it from
     *        now on, also when this fails) with the negotiated parameters @p llp. Work posted while IDLE starts.
     *        With ::RI_LLP_SAME_HOST in @p llp, @p bell is the QP's end of a same-host channel (rnicpi/ri_channel.h,
     *        owned from now on as @p fd is): the stream's bytes move through it and @p fd only carries the
     *        connection's orderly or abortive end. ::RI_EBADF when the flag comes without a channel's end.
     */
    [[nodiscard]] ri_status_t start_stream(uint32_t qp_num, int fd, const ri_llp_params_t &llp, int bell = -1);
    /** @brief Moves a QP to ERROR: its stream stops, what is posted (and what is posted later) is flushed. */
    [[nodiscard]] ri_status_t set_qp_error(uint32_t qp_num);
    /**
     * @brief Orderly close (the QP to CLOSING): nothing new starts; once what was posted is sent and done, the
     *        stream sends FIN, and the peer's FIN ends it.
     */
    [[nodiscard]] ri_status_t close_qp(uint32_t qp_num);
    /** @brief The consumer's Terminate: the stream sends one with @p code, then the QP enters ERROR. */
    [[nodiscard]] ri_status_t terminate_qp(uint32_t qp_num, iwarp::TermCode code);
    /** @brief The QP's state as the adapter sees it (::RI_QPS_IDLE, RTS or ERROR). */
    [[nodiscard]] ri_status_t qp_state(uint32_t qp_num, uint32_t &state);
    /** @brief The QP's data-path counters. */
    [[nodiscard]] ri_status_t qp_stats(uint32_t qp_num, ri_qp_stats_t &out);
    /**
     * @brief A catastrophic adapter error (fault injection, or the engine's own failure): every engine page says
     *        dead, every QP is flushed, ::RI_AE_RNIC_FATAL is raised once, and the engine executes nothing more.
     */
    void fail();
    /** @brief Why the engine failed by itself (an exception escaped its thread); empty otherwise. */
    [[nodiscard]] std::string failure() const {
        std::lock_guard g(mutex_);
        return failure_;
    }
    /** @brief True after fail(). */
    [[nodiscard]] bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
    /** @brief Counters. */
    [[nodiscard]] const EngineStats &stats() const noexcept { return stats_; }
    /** @brief The faults to inject (changed from any thread; call kick() after arming a delay's end). */
    [[nodiscard]] FaultPlan &faults() noexcept { return faults_; }
    /**
     * @brief How long the engine keeps looking at its queues and sockets after its last work before it sleeps
     *        (0: it sleeps at once). Posters ring no doorbell while it looks.
     */
    void set_poll_window(std::chrono::microseconds window) noexcept {
        poll_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count(),
                       std::memory_order_relaxed);
    }
    /**
     * @brief Interrupt moderation, as a NIC's interrupt coalescing: while the engine stays busy, the interrupt an
     *        armed CQ has earned waits until @p cqes completions are unread in that CQ or @p window has passed since
     *        it was earned. An engine that runs out of work raises every interrupt it holds at once, so a consumer
     *        waiting for one completion at a time on a quiet RNIC waits no longer. @p cqes 0 or 1: no moderation.
     */
    void set_moderation(uint32_t cqes, std::chrono::microseconds window) noexcept {
        moderation_cqes_.store(cqes, std::memory_order_relaxed);
        moderation_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(window).count(),
                             std::memory_order_relaxed);
    }
    /**
     * @brief Returns once the engine is between passes: every DMA it makes from now on sees the STag table as it
     *        is now (deregistration calls it after removing a region, before the memory may be freed).
     */
    void quiesce() { std::lock_guard g(mutex_); }
    /** @brief Wakes the engine (after a control operation that gives it work). */
    void kick() noexcept;

private:
    struct Cq {
        CqWriter writer;
        uint32_t users = 0;
        bool overflow_reported = false;
    };
    struct Srq {
        SrqSetup setup;
        WqConsumer wq;
        uint32_t users = 0;  // QPs that take from it
    };
    struct Qp;
    struct Stream;
    struct Pending;  // events collected under the lock, delivered after it

    void run();
    void serve();
    [[nodiscard]] bool faults_armed_for(const Qp &qp) const noexcept;
    void outbound_faults(Qp &qp, size_t slot);
    void corrupt_inbound(const Qp &qp, uint8_t &last);
    static void written(Stream &s, size_t n);
    static bool add_frame(const Stream &s, size_t i, iovec *iov, size_t &iovcnt) noexcept;
    static bool closed_queue(const Qp &qp) noexcept;
    static void send_terminate(Stream &s);
    void drain_rung(const std::vector<pollfd> &fds);  // the channel bells poll() found readable, emptied
    void look_at_bells(std::vector<pollfd> &fds);      // a busy engine's look at its channel bells
    bool pass(Pending &out);  // one pass over every queue and stream; true if it did anything
    bool serve_qp(Qp &qp, Pending &out);
    bool serve_send_queue(Qp &qp, Pending &out);
    bool bind_window(const Qp &qp, const hwstub_send_wqe &w);  // a Bind MW WQE, in send queue order
    bool serve_receive_queue(Qp &qp, Pending &out);
    bool take_shared_receive(Qp &qp, Pending &out);  // one receive of the QP's SRQ, checked, into the QP's context
    bool receive_failed(Qp &qp, uint64_t wr_id, uint8_t status, Pending &out);  // a bad receive WQE: the QP fails
    bool serve_stream(Qp &qp, Pending &out);
    bool receive(Qp &qp);
    void complete(uint32_t cq_id, const hwstub_cqe &cqe, bool solicited, Pending &out);
    void retire_sends(Qp &qp, Pending &out);
    void wqe_failed(Qp &qp, uint8_t status, Pending &out);
    void fail_oldest(Qp &qp, uint8_t status, uint32_t word);
    void mark_error(Qp &qp);
    void enter_error(Qp &qp, Pending &out, uint32_t event_id, uint32_t detail = 0);
    bool flush(Qp &qp, Pending &out);
    bool flush_checked_receives(Qp &qp, Pending &out);
    [[nodiscard]] bool anything_to_do();
    void set_sleeping(uint32_t value);
    void deliver(Pending &out);
    void moderate(Pending &out, bool idle);

    hwstub_engine_page *page_;
    EngineHooks hooks_;
    int efd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> dead_{false};
    std::atomic<bool> fatal_pending_{false};
    std::string name_;
    StagTable own_stags_;
    StagTable &stags_;
    std::mutex own_atomics_;
    std::mutex &atomics_;  // an atomic's read, new value and write on host memory, one at a time per adapter
    mutable std::mutex mutex_;  // the tables below, and failure_
    std::vector<hwstub_engine_page *> pages_;
    std::map<uint32_t, std::unique_ptr<Cq>> cqs_;
    std::map<uint32_t, std::unique_ptr<Qp>> qps_;
    std::map<uint32_t, std::unique_ptr<Srq>> srqs_;
    EngineStats stats_;
    FaultPlan own_faults_;
    FaultPlan &faults_;
    std::string failure_;
    // Earliest time (steady clock, ns) a delayed frame is due, found by the last pass; 0: none waits.
    int64_t wake_at_ns_ = 0;
    std::atomic<int64_t> poll_ns_{0};  // the poll window (set_poll_window)
    std::atomic<uint32_t> moderation_cqes_{0};  // set_moderation()
    std::atomic<int64_t> moderation_ns_{0};
    // Interrupts held by moderation: the CQ and when it earned the interrupt (steady clock, ns). Under mutex_.
    struct Held {
        uint32_t cq;
        int64_t since_ns;
    };
    std::vector<Held> held_;
};

}  // namespace hwstub

#endif  // HWSTUB_KVP_OFFLOAD_ENGINE_HPP
