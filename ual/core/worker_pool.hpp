/**
 * @file worker_pool.hpp
 * @brief The uAL's small worker pool: runs consumers' event callbacks off the event thread and off providers'
 *        threads, so a slow or blocking callback never stalls event delivery or a provider's progress.
 */
#ifndef UAL_CORE_WORKER_POOL_HPP
#define UAL_CORE_WORKER_POOL_HPP

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ual {

/** @brief A fixed set of threads taking jobs from one bounded queue. */
class WorkerPool {
public:
    /** @brief @p threads workers, at most @p max_queued jobs waiting. */
    WorkerPool(unsigned threads, size_t max_queued);
    WorkerPool(const WorkerPool &) = delete;
    WorkerPool &operator=(const WorkerPool &) = delete;
    /** @brief Runs the queued jobs, then joins the workers. */
    ~WorkerPool();
    /** @brief Queues @p job; false (job dropped) when the queue is full or the pool is stopping. */
    bool submit(std::function<void()> job);

private:
    void run();
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    size_t max_queued_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace ual

#endif  // UAL_CORE_WORKER_POOL_HPP
