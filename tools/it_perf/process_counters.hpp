/**
 * @file process_counters.hpp
 * @brief System calls and context switches of whole processes (every thread), read twice around a piece of work:
 *        what `it_perf --setup` prints per connection for itself, its server and krdmad.
 *
 * System calls are counted by the kernel's raw_syscalls:sys_enter tracepoint, one perf counter per thread that
 * exists when the counters open, inherited by the threads those threads start later. That needs root or
 * CAP_PERFMON (or kernel.perf_event_paranoid <= -1); without it, or without tracefs, the count is unknown and the
 * report says so. Context switches (voluntary and not) are read from /proc/PID/task/TID/status, which any user may
 * read: threads that exit between two reads take theirs with them.
 */
#ifndef IT_PERF_PROCESS_COUNTERS_HPP
#define IT_PERF_PROCESS_COUNTERS_HPP

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace it_perf {

/** @brief One reading of a process's counters. */
struct ProcessReading {
    std::optional<uint64_t> syscalls; /**< System calls so far (since the counters opened); nullopt: unknown. */
    uint64_t switches = 0;            /**< Context switches of the threads alive now, since each started. */
};

/** @brief The counters of one process; move-only (it holds the perf descriptors). */
class ProcessCounters {
public:
    /**
     * @brief Opens the counters of process @p pid (0: this process). @p why_not, when given, learns why system calls
     *        cannot be counted (empty when they can).
     */
    static ProcessCounters open(pid_t pid, std::string *why_not = nullptr);

    ProcessCounters() = default;
    ProcessCounters(ProcessCounters &&other) noexcept;
    ProcessCounters &operator=(ProcessCounters &&other) noexcept;
    ProcessCounters(const ProcessCounters &) = delete;
    ProcessCounters &operator=(const ProcessCounters &) = delete;
    ~ProcessCounters();

    /** @brief The counters now. */
    [[nodiscard]] ProcessReading read() const;
    /** @brief The process counted (0 until opened). */
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

private:
    void close_all() noexcept;
    pid_t pid_ = 0;
    std::vector<int> fds_;  // one raw_syscalls:sys_enter counter per thread; empty when not countable
};

/** @brief The pid of the process serving the Unix socket at @p path (SO_PEERCRED of a connection to it), or 0. */
[[nodiscard]] pid_t server_of_socket(const std::string &path);

}  // namespace it_perf

#endif  // IT_PERF_PROCESS_COUNTERS_HPP
