/**
 * @file offload_engine.hpp
 * @brief The offload engine (OE) of one hwstub RNIC instance: the emulated adapter's processor.
 *
 * One thread per instance, never the consumer's: it watches the doorbell records of every queue it was given,
 * fetches and checks WQEs in order, executes them, writes CQEs with their owner bits, mirrors the "requests done"
 * counters, raises an interrupt (a call of the instance's completion handler, which the kVP routes through the
 * kAL's completion event handler path) for an armed CQ, and raises asynchronous events (QP errors, CQ overflow, the
 * adapter's own catastrophic error). When nothing is posted it says so on the engine page and sleeps on its
 * eventfd (and, later, the sockets of its streams), so posters ring only a sleeping engine.
 *
 * What it executes today: NOP and the checks of every WQE; work posted to a QP in ERROR is flushed; a malformed
 * WQE (unknown opcode or flag, too many SGEs, inline data over the QP's limit or its slot) completes with
 * RI_WC_LOC_QP_OP_ERR and moves its QP to ERROR (RI_AE_QP_FATAL), flushing the rest. Data operations wait in their
 * ring while the QP is IDLE, as RDMAC verbs queue work posted before RTS.
 *
 * Control operations (add/remove objects, state changes) may come from any thread; they are applied under the
 * engine's table lock, which the OE holds only while it works, never while it sleeps.
 */
#ifndef HWSTUB_KVP_OFFLOAD_ENGINE_HPP
#define HWSTUB_KVP_OFFLOAD_ENGINE_HPP

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "hw_queues.hpp"
#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace hwstub {

/** @brief A completion queue as the adapter sees it: its ring and control block (mapped by both sides). */
struct CqSetup {
    uint32_t id = 0;               /**< The CQ's identifier (interrupts name it). */
    hwstub_cqe *ring = nullptr;    /**< depth CQEs. */
    uint32_t depth = 0;            /**< A power of two. */
    hwstub_cq_ctrl *ctrl = nullptr; /**< Its control block. */
};

/** @brief A queue pair as the adapter sees it. The rings and CQs outlive its registration. */
struct QpSetup {
    uint32_t qp_num = 0;            /**< QP number (CQEs, events). */
    RingGeometry sq;                /**< Send ring. */
    hwstub_wq_ctrl *sq_ctrl = nullptr; /**< Its control block. */
    RingGeometry rq;                /**< Receive ring. */
    hwstub_wq_ctrl *rq_ctrl = nullptr; /**< Its control block. */
    uint32_t send_cq = 0;           /**< CQ id for send completions. */
    uint32_t recv_cq = 0;           /**< CQ id for receive completions. */
    uint32_t max_send_sge = 0;      /**< SGEs a send WQE may carry. */
    uint32_t max_recv_sge = 0;      /**< SGEs a receive WQE may carry. */
    uint32_t max_inline = 0;        /**< Inline bytes a send WQE may carry. */
    bool signal_all = false;        /**< Every send WQE completes with a CQE. */
    pid_t owner = 0;                /**< The consumer process whose memory the QP's WQEs name (for its DmaChannel). */
};

/** @brief What the engine reports to its kVP. Called on the OE thread with no engine lock held. */
struct EngineHooks {
    /** @brief An armed CQ got a matching CQE: raise its completion event (the interrupt). */
    std::function<void(uint32_t cq_id)> interrupt;
    /** @brief An asynchronous event (QP error, CQ overflow, catastrophic error). */
    std::function<void(const ri_async_event_t &event)> async_event;
};

/** @brief Counters of the engine (read with relaxed loads from any thread). */
struct EngineStats {
    std::atomic<uint64_t> wqes{0};      /**< WQEs executed or failed. */
    std::atomic<uint64_t> cqes{0};      /**< CQEs written. */
    std::atomic<uint64_t> interrupts{0}; /**< Completion events raised. */
    std::atomic<uint64_t> sleeps{0};    /**< Times the engine waited for a doorbell. */
};

/** @brief One RNIC instance's offload engine. */
class OffloadEngine {
public:
    /** @brief An engine on @p page (mapped by every consumer of the instance), reporting through @p hooks. */
    OffloadEngine(hwstub_engine_page *page, EngineHooks hooks);
    OffloadEngine(const OffloadEngine &) = delete;
    OffloadEngine &operator=(const OffloadEngine &) = delete;
    /** @brief Stops the thread. */
    ~OffloadEngine();

    /** @brief Starts the engine thread; false when the eventfd cannot be made. */
    [[nodiscard]] bool start();
    /** @brief Stops and joins the engine thread (idempotent). */
    void stop();
    /** @brief The doorbell's eventfd, which consumers' Doorbell writes (the engine keeps it). */
    [[nodiscard]] int doorbell_fd() const noexcept { return efd_; }

    /** @brief Adds a CQ; ::RI_EINVAL for a bad geometry, ::RI_EEXIST for an id in use. */
    [[nodiscard]] ri_status_t add_cq(const CqSetup &cq);
    /** @brief Removes a CQ (its QPs must be gone first: ::RI_EBUSY otherwise). */
    [[nodiscard]] ri_status_t remove_cq(uint32_t id);
    /** @brief Adds a QP in IDLE. ::RI_EINVAL for a bad geometry or an unknown CQ. */
    [[nodiscard]] ri_status_t add_qp(const QpSetup &qp);
    /** @brief Removes a QP; posted work is dropped without completions, as a destroyed QP's is. */
    [[nodiscard]] ri_status_t remove_qp(uint32_t qp_num);
    /** @brief Moves a QP to ERROR: what is posted, and what is posted later, is flushed. */
    [[nodiscard]] ri_status_t set_qp_error(uint32_t qp_num);
    /**
     * @brief A catastrophic adapter error (fault injection, or the engine's own failure): the engine page says
     *        dead, every QP is flushed, ::RI_AE_RNIC_FATAL is raised once, and the engine executes nothing more.
     */
    void fail();
    /** @brief True after fail(). */
    [[nodiscard]] bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
    /** @brief Counters. */
    [[nodiscard]] const EngineStats &stats() const noexcept { return stats_; }
    /** @brief Wakes the engine (after a control operation that gives it work). */
    void kick() noexcept;

private:
    struct Cq {
        CqWriter writer;
        uint32_t users = 0;
        bool overflow_reported = false;
    };
    struct Qp {
        QpSetup setup;
        WqConsumer sq;
        WqConsumer rq;
        bool error = false;
        bool blocked = false;  // the send queue's head waits for RTS
    };
    struct Pending;  // events collected under the lock, delivered after it

    void run();
    bool pass(Pending &out);  // one pass over every queue; true if it did anything
    bool serve_qp(Qp &qp, Pending &out);
    void complete(uint32_t cq_id, const hwstub_cqe &cqe, bool solicited, Pending &out);
    void mark_error(Qp &qp);
    void enter_error(Qp &qp, Pending &out, uint32_t event_id);
    bool flush(Qp &qp, Pending &out);
    [[nodiscard]] bool anything_posted();
    void deliver(Pending &out);

    hwstub_engine_page *page_;
    EngineHooks hooks_;
    int efd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> dead_{false};
    std::atomic<bool> fatal_pending_{false};
    std::mutex mutex_;  // the tables below
    std::map<uint32_t, std::unique_ptr<Cq>> cqs_;
    std::map<uint32_t, std::unique_ptr<Qp>> qps_;
    EngineStats stats_;
};

}  // namespace hwstub

#endif  // HWSTUB_KVP_OFFLOAD_ENGINE_HPP
