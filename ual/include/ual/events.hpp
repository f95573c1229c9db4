/**
 * @file events.hpp
 * @brief The uAL's event dispatchers: simple dispatchers (one event stream, a bounded queue, a threshold, a
 *        pollable descriptor, optional callbacks) and aggregate dispatchers over several simple ones.
 *
 * Both IT-API (SEVD/AEVD) and uDAPL (EVD) map onto these. A dispatcher of the DTO stream is bound to a completion
 * queue: its events are the CQ's work completions, read straight from the provider's CQ (no copy through a queue);
 * every other stream queues event records that the event thread, the uVP's handlers or the consumer post.
 */
#ifndef UAL_EVENTS_HPP
#define UAL_EVENTS_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "krdma/kal_link.hpp"
#include "krdma/message.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"

namespace ual {

/** @brief The event streams of the access layer. */
enum class EventStream : uint8_t {
    dto,                /**< Work completions of a completion queue. */
    cm_request,         /**< Incoming connection requests of a listen point. */
    cm_message,         /**< Connection events of an endpoint (established, rejected, disconnected, broken). */
    affiliated_async,   /**< Asynchronous events of a resource (QP, CQ, SRQ, MR). */
    unaffiliated_async, /**< Asynchronous events of the RNIC (fatal, link up/down, kAL shut down). */
    software            /**< Events the consumer posts itself. */
};

/** @brief Connection events (Event::id on the cm_request and cm_message streams). */
enum class CmEventId : uint32_t {
    connect_request = KRDMA_CM_CONNECT_REQUEST, /**< A peer asks to connect (cm_request). */
    established = KRDMA_CM_ESTABLISHED,         /**< The endpoint is connected: RDMA may flow. */
    rejected = KRDMA_CM_REJECTED,               /**< The peer rejected the request (its private data attached). */
    unreachable = KRDMA_CM_UNREACHABLE,         /**< The peer could not be reached or refused TCP (status). */
    peer_disconnect = KRDMA_CM_PEER_DISCONNECT, /**< The peer closed in order. */
    broken = KRDMA_CM_BROKEN,                   /**< Reset, failed, or negotiation failed (status, term). */
    timeout = KRDMA_CM_TIMEOUT,                 /**< Setup did not finish in time. */
    disconnected = KRDMA_CM_DISCONNECTED        /**< This side's disconnect completed. */
};

/** @brief What a connection event carries besides its identifier. */
struct ConnectionData {
    uint64_t request = 0;               /**< connect_request: the identifier to accept or reject. */
    int status = 0;                     /**< 0 or an errno value. */
    uint32_t term = 0;                  /**< broken by negotiation: the Terminate code (layer<<16|type<<8|code). */
    ri_llp_params_t llp{};              /**< Addresses and ports; negotiated (established) or requested parameters. */
    std::vector<uint8_t> private_data;  /**< The peer's private data. */
    /**
     * ESTABLISHED of a conversion that asked for it (::KRDMA_CONVERT_BYTE_CHANNEL) and was paired on this host: the
     * end of the consumer's own channel (rnicpi/cpp/channel.hpp), for the one consumer that takes it; else empty.
     */
    std::shared_ptr<krdma::UniqueFd> byte_channel;
    /**
     * ESTABLISHED of a conversion that asked for it too (::KRDMA_CONVERT_LINK) and got its byte channel: the two
     * processes' link (krdma_link_hello first on it), for the one consumer that takes it; else empty.
     */
    std::shared_ptr<krdma::UniqueFd> link;
};

/** @brief One event. */
struct Event {
    EventStream stream = EventStream::software; /**< The stream it belongs to. */
    uint32_t id = 0;                            /**< ri_event_id (async), a connection event code, or 0. */
    uint32_t resource_type = 0;                 /**< ri_resource_type of an async event. */
    uint64_t resource_id = 0;                   /**< QP number, STag... of an async event. */
    uint64_t context = 0;                       /**< The consumer context of the resource or of the event. */
    uint32_t detail = 0;                        /**< Event detail (e.g. a Terminate code). */
    ri_wc_t wc{};                               /**< DTO: the work completion. */
    void *software = nullptr;                   /**< Software events: the consumer's pointer. */
    std::shared_ptr<const ConnectionData> connection; /**< Connection events: their data. */
};

class AggregateDispatcher;
class Adapter;
class CompletionQueue;

namespace detail {

/**
 * @brief A dispatcher's pollable descriptor (an eventfd), made and kept only once somebody asked for it: until then
 *        a signal costs no system call and is only remembered, so the first want() can say it, and a dispatcher
 *        nobody polls (an endpoint's own, a DTO queue waited on) costs no descriptor at all. Not thread-safe: its
 *        dispatcher's mutex guards it.
 */
class LazyEventFd {
public:
    /**
     * @brief The descriptor, made on the first call and kept from now on: readable at once when a signal came since
     *        the last quiet(). -1 (and errno) when no eventfd could be made; a later call tries again.
     */
    [[nodiscard]] int want() noexcept;
    /** @brief Something waits: readable (one write until quiet()), or remembered while nobody wants it. */
    void signal() noexcept;
    /** @brief Nothing waits any more: no longer readable, and nothing remembered. */
    void quiet() noexcept;

private:
    krdma::UniqueFd fd_;
    bool wanted_ = false;    // want() was called: the eventfd follows signal() and quiet() from then on
    bool signaled_ = false;  // the eventfd holds a count
    bool missed_ = false;    // signalled while not wanted, and not quieted since
};

}  // namespace detail

/**
 * @brief A simple event dispatcher: one stream, a bounded queue, a wake-up threshold, a pollable descriptor and
 *        an optional callback (called from the uAL's worker pool instead of queuing).
 *
 * Thread-safe. post() never blocks and never allocates: a full queue drops the event and counts it (overflow).
 */
class SimpleDispatcher : public std::enable_shared_from_this<SimpleDispatcher> {
public:
    /** @brief Callback mode: called for every event. */
    using Callback = std::function<void(const Event &)>;
    /** @brief Runs a callback job somewhere (AccessLayer::executor(): on the uAL's worker pool). */
    using Executor = std::function<void(std::function<void()>)>;

    /** @brief A dispatcher of @p stream holding up to @p capacity events, waking waiters at @p threshold. */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<SimpleDispatcher>> create(EventStream stream,
                                                                                 uint32_t capacity,
                                                                                 uint32_t threshold = 1);
    SimpleDispatcher(const SimpleDispatcher &) = delete;
    SimpleDispatcher &operator=(const SimpleDispatcher &) = delete;
    ~SimpleDispatcher();

    /** @brief The stream. */
    [[nodiscard]] EventStream stream() const noexcept { return stream_; }
    /** @brief Queue capacity. */
    [[nodiscard]] uint32_t capacity() const noexcept { return static_cast<uint32_t>(ring_.size()); }
    /** @brief Events dropped because the queue was full. */
    [[nodiscard]] uint64_t overflows() const noexcept { return overflows_.load(std::memory_order_relaxed); }

    /**
     * @brief Queues @p e (or calls the callback); false when the queue is full (counted as an overflow) or for a DTO
     *        dispatcher, whose events come only from its completion queue.
     */
    bool post(const Event &e) noexcept;
    /** @brief The next event without waiting; nothing when none is queued. ::RI_EOVERFLOW reports lost events once. */
    [[nodiscard]] rdma::Expected<std::optional<Event>> dequeue();
    /**
     * @brief Waits up to @p timeout for an event (for the threshold's count of events to be queued, then returns
     *        the first). ::RI_ETIMEDOUT when none came.
     */
    [[nodiscard]] rdma::Expected<Event> wait(std::chrono::milliseconds timeout);
    /**
     * @brief A descriptor that polls readable while events are queued (IT-API's fd of an EVD). It is kept up to
     *        date only once asked for: until then an event costs no eventfd write and a dequeue no read.
     */
    [[nodiscard]] int fd() const noexcept;
    /**
     * @brief Switches to callback mode (queued events are delivered first); an empty callback switches back.
     *        Callbacks run through @p run (empty: in the thread that posts the event).
     */
    void set_callback(Callback cb, Executor run = {});
    /**
     * @brief Notification mode (IT-API's EVD callbacks): @p fn runs through @p run (empty: in the posting thread)
     *        whenever an event arrives - for a DTO dispatcher, on each notification of its CQ, which is re-armed
     *        after @p fn returns - while the events stay queued for the consumer to dequeue. An empty @p fn ends it.
     */
    void set_notifier(std::function<void()> fn, Executor run = {});
    /** @brief Queued events. */
    [[nodiscard]] size_t pending() const;
    /**
     * @brief Lets a thread that waits on this dispatcher (not a DTO one) read and deliver the kAL's records itself
     *        through @p pump (leader/follower) instead of sleeping until the event thread does. Set by the access
     *        layer when the dispatcher is bound to a listen point or an endpoint; held weakly.
     */
    void set_pump(const std::shared_ptr<EventPump> &pump);
    /** @brief Attaches a value of the dispatcher's owner (an API layer's object), reported by aggregates. */
    void set_tag(uint64_t tag) noexcept { tag_.store(tag, std::memory_order_relaxed); }
    /** @brief The owner's value from set_tag(). */
    [[nodiscard]] uint64_t tag() const noexcept { return tag_.load(std::memory_order_relaxed); }

private:
    friend class AggregateDispatcher;
    friend class CompletionQueue;
    friend class Adapter;
    SimpleDispatcher(EventStream stream, uint32_t capacity, uint32_t threshold);
    std::optional<Event> take_locked();
    // Raises the eventfd for a queued event; @p wake_waiters says whether cv_ must be notified, and the aggregate
    // (if any) is returned to be woken: both after mutex_ is let go.
    std::shared_ptr<AggregateDispatcher> signal_fd_locked(bool &wake_waiters);
    // DTO dispatchers: the CQ's notification fired (from the uVP's CEH or the kAL's completion event).
    void notify_completion() noexcept;
    // DTO dispatchers: ask the CQ to notify the next completion.
    void arm() noexcept;
    // DTO dispatchers: the next completion of the bound CQ (they are polled from it, not queued). Takes
    // poll_mutex_, never mutex_: a provider may notify (notify_completion, which takes mutex_) from inside a poll.
    std::optional<Event> poll_cq();

    const EventStream stream_;
    const uint32_t threshold_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<Event> ring_;
    size_t head_ = 0, count_ = 0;
    std::atomic<uint64_t> overflows_{0};
    uint64_t reported_overflows_ = 0;
    mutable detail::LazyEventFd efd_;  // readable while events are queued (DTO: after a CQ notification)
    uint64_t notifications_ = 0;  // DTO: CQ notifications so far
    Callback callback_;
    Executor executor_;
    std::function<void()> notifier_;
    Executor notifier_run_;
    std::atomic<uint64_t> tag_{0};
    std::weak_ptr<AggregateDispatcher> aggregate_;
    std::weak_ptr<EventPump> pump_;  // the link's, once bound (set_pump)
    std::thread::id leader_;         // a waiter leading through pump_ (posts from other threads nudge it)
    // Guards cq_ against the CQ going while it is polled. Recursive: a callback run inline by a notification
    // from inside a poll polls again.
    std::recursive_mutex poll_mutex_;
    CompletionQueue *cq_ = nullptr;  // set by the CQ it belongs to; cleared when the CQ goes
};

/** @brief An aggregate dispatcher: waits on several simple dispatchers at once (IT-API AEVD). Thread-safe. */
class AggregateDispatcher : public std::enable_shared_from_this<AggregateDispatcher> {
public:
    /** @brief An empty aggregate. */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<AggregateDispatcher>> create();
    /** @brief Adds @p member; ::RI_EBUSY when it already belongs to an aggregate. */
    [[nodiscard]] rdma::Expected<void> add(const std::shared_ptr<SimpleDispatcher> &member);
    /** @brief Removes @p member. */
    void remove(const std::shared_ptr<SimpleDispatcher> &member);
    /**
     * @brief The next event of any member without waiting (members are visited round-robin); @p source_tag (if
     *        given) receives the tag of the member it came from.
     */
    [[nodiscard]] rdma::Expected<std::optional<Event>> dequeue(uint64_t *source_tag = nullptr);
    /** @brief Waits up to @p timeout for an event of any member; @p source_tag as for dequeue(). */
    [[nodiscard]] rdma::Expected<Event> wait(std::chrono::milliseconds timeout, uint64_t *source_tag = nullptr);
    /** @brief A descriptor that polls readable while any member has events (kept up to date once asked for). */
    [[nodiscard]] int fd() const noexcept;

private:
    friend class SimpleDispatcher;
    AggregateDispatcher() = default;
    void wake() noexcept;
    void wake_locked_free() noexcept;

    // A member's pump (SimpleDispatcher::set_pump), kept when it joins or gets one: for a waiter to lead through.
    void adopt_pump(const std::shared_ptr<EventPump> &pump);

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::weak_ptr<SimpleDispatcher>> members_;
    size_t next_ = 0;
    uint64_t wakeups_ = 0;
    std::weak_ptr<EventPump> pump_;      // a member's pump (adopt_pump), the first one kept
    std::thread::id leader_;             // a waiter leading through pump_ (a member's wake-up nudges it)
    mutable detail::LazyEventFd efd_;  // readable from a member's wake-up until a dequeue finds nothing
};

}  // namespace ual

#endif  // UAL_EVENTS_HPP
