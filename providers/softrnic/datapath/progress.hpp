// The progress thread: one per process, one epoll set over the socket of every queue pair on a stream. It receives
// what arrives while the consumer computes (incoming Writes are placed, Read Requests answered) and finishes
// transmissions the socket could not take at once.
#ifndef SOFTRNIC_DATAPATH_PROGRESS_HPP
#define SOFTRNIC_DATAPATH_PROGRESS_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "ring.hpp"
#include "rnicpi/ri_types.h"

namespace softrnic::datapath {

class QueuePair;

/** @brief The process's progress thread. */
class Progress {
public:
    /** @brief The process's instance (made on first use; the thread starts with the first queue pair). */
    [[nodiscard]] static Progress &get();
    /** @brief Stops the thread and frees the instance (module unload); every queue pair must be gone. */
    static void shutdown();
    /**
     * @brief In the child of a fork: forgets the parent's thread and its streams (they are not the child's) without
     *        touching them; the child's first stream starts a thread of its own.
     */
    static void forget_in_child() noexcept;

    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;

    /** @brief Watches @p fd for @p qp (edge-triggered input; output only once asked for); starts the thread. */
    [[nodiscard]] ri_status_t add(QueuePair *qp, int fd);
    /**
     * @brief Sets which edges of @p fd wake the thread: input (@p input) and output (@p output); the end of the
     *        stream and errors do while either is wanted. Output interest is taken only while the socket has
     *        refused bytes (a writable socket raises an output edge at every ACK), input is dropped while the
     *        consumer busy-polls the QP's CQ (park). With neither, @p fd leaves the epoll set: a socket with an
     *        entry on its wait queue pays a wake-up call for every segment that arrives and every ACK that frees
     *        room, even when the entry wants neither (bench/README, "An epoll entry costs every segment").
     *        @p in_set says whether @p fd is in the set now; returns whether it is after the call. Safe from any
     *        thread; epoll checks readiness when a descriptor is added or changed, so an edge that came before
     *        the call is reported by it.
     */
    [[nodiscard]] bool interest(QueuePair *qp, int fd, bool input, bool output, bool in_set);
    /**
     * @brief On the thread: @p qp's consumer is busy-polling and moves the stream itself, so its input no longer
     *        wakes the thread; the thread looks every millisecond whether the consumer still polls, and gives
     *        the stream its input edges back when it stopped (QueuePair::recheck_park).
     */
    void parked(QueuePair *qp);
    /**
     * @brief Stops watching @p qp (and @p fd unless -1). From another thread it waits until the progress thread no
     *        longer uses @p qp; on the progress thread itself it acts at once.
     */
    void remove(QueuePair *qp, int fd);
    /** @brief Serves @p qp soon, without waiting for a socket event (work left over by a budget). */
    void kick(QueuePair *qp);
    /**
     * @brief Looks at every parked stream at once rather than at the next millisecond look (QueuePair::recheck_park):
     *        a CQ was armed whose queue pairs the caller could not reach (CompletionQueue::request_notify). Safe
     *        from any thread.
     */
    void look_at_parked();
    /**
     * @brief Calls QueuePair::nudge_due() for @p qp on the thread at @p when, and again at each time it answers
     *        (the nudge timer: a few per connection, in its first second). Safe from any thread.
     */
    void timer(QueuePair *qp, std::chrono::steady_clock::time_point when);
    /**
     * @brief The process's count of streams whose socket refused bytes and that wait for room: they share the
     *        unsent budget (Tunables::unsent_budget).
     */
    [[nodiscard]] std::atomic<uint32_t> &full_streams() noexcept { return full_streams_; }
    /** @brief True on the progress thread. */
    [[nodiscard]] bool on_thread() const noexcept { return std::this_thread::get_id() == thread_id_.load(); }

private:
    Progress();
    ~Progress();
    void run();
    void remove_locked(QueuePair *qp, int fd);

    int epoll_ = -1;
    int wake_ = -1;  // eventfd: kick and stop
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};
    std::mutex mutex_;  // held by the thread while it serves (never while it waits); guards the sets below
    bool stop_ = false;
    uint64_t generation_ = 0;  // bumped by every removal: events fetched before it must be checked
    std::unordered_set<QueuePair *> watched_;
    std::vector<QueuePair *> again_;  // to serve in the next pass without an event
    SpinLock kick_lock_;               // kicks from other threads, merged into again_ by the thread
    std::vector<QueuePair *> kicked_;
    std::vector<QueuePair *> parked_;  // the thread's: QPs whose input edges are off while their consumer polls
    std::atomic<bool> look_{false};    // look_at_parked() asked for a look before the millisecond is over
    using Deadline = std::pair<std::chrono::steady_clock::time_point, QueuePair *>;
    void merge_timers();
    void merge_timers_locked();  // with kick_lock_ held
    void run_timers();
    [[nodiscard]] int wait_ms(bool more) const;
    // On the thread, under mutex_: takes the timers asked for, returns how long the next wait may last and
    // publishes when it ends (wakes_at_).
    [[nodiscard]] int next_wait(bool more);
    std::vector<Deadline> timers_;    // the thread's: a min-heap on the time
    std::vector<Deadline> asked_;     // timers asked for from other threads (under kick_lock_)
    // When the thread's current wait ends at the latest (under kick_lock_): a timer asked for later needs no
    // wake-up. The smallest time until the thread first says (every timer wakes it).
    std::chrono::steady_clock::time_point wakes_at_ = std::chrono::steady_clock::time_point::min();
    std::atomic<uint32_t> full_streams_{0};
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_PROGRESS_HPP
