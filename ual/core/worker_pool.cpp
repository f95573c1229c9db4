// The uAL's worker pool.
#include "worker_pool.hpp"

#include <pthread.h>

namespace ual {

WorkerPool::WorkerPool(unsigned threads, size_t max_queued) : max_queued_(max_queued) {
    for (unsigned i = 0; i < (threads == 0 ? 1 : threads); ++i) {
        threads_.emplace_back([this] { run(); });
        ::pthread_setname_np(threads_.back().native_handle(), "ual-worker");  // for top -H, perf and gdb
    }
}

WorkerPool::~WorkerPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto &t : threads_) t.join();
}

bool WorkerPool::submit(std::function<void()> job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || jobs_.size() >= max_queued_) return false;
        jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
}

void WorkerPool::run() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty()) return;  // stopping, and everything queued has run
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        try {
            job();
        } catch (...) {
            // A consumer's callback must not end the worker.
        }
    }
}

}  // namespace ual
