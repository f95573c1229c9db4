/**
 * @file server_child.hpp
 * @brief it_perf --loopback's server: a child process in a process group of its own, which the parent kills and
 *        reaps on every way out (normal return, error, exit(), SIGINT/SIGTERM/SIGHUP/SIGQUIT), and which dies with
 *        its parent (PR_SET_PDEATHSIG) if the parent is killed outright.
 *
 * The child reports readiness on a pipe with one line, "ready RDMA_PORT TCP_PORT", or "error MESSAGE".
 * Fork before any thread starts (the IT-API library and its embedded kAL start threads), as the child continues
 * with a copy of only the forking thread.
 */
#ifndef IT_PERF_SERVER_CHILD_HPP
#define IT_PERF_SERVER_CHILD_HPP

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>

#include "rnicpi/cpp/status.hpp"

namespace it_perf {

/** @brief The ports a ready server listens on. */
struct ServerPorts {
    uint16_t rdma = 0; /**< IT-API connection qualifier (IANA port); 0 with --tcp-only. */
    uint16_t tcp = 0;  /**< TCP baseline port. */
};

/** @brief Writes the ready line to @p fd (the child's end of the pipe) and closes it. */
void report_ready(int fd, const ServerPorts &ports);
/** @brief Writes an error line to @p fd and closes it. */
void report_failure(int fd, const std::string &message);

/** @brief The forked server process; move-only; killing and reaping it is the destructor's job too. */
class ServerChild {
public:
    /**
     * @brief Forks; the child runs @p body with the write end of the ready pipe and exits with its result. The
     *        parent installs the signal handlers that kill the child's group.
     */
    static rdma::Expected<ServerChild> start(const std::function<int(int ready_fd)> &body);

    ServerChild(ServerChild &&other) noexcept;
    ServerChild &operator=(ServerChild &&) = delete;
    ServerChild(const ServerChild &) = delete;
    ~ServerChild();

    /** @brief Waits up to @p timeout for the ready line; an error with the child's message otherwise. */
    rdma::Expected<ServerPorts> wait_ready(std::chrono::milliseconds timeout);

    /**
     * @brief Waits up to @p grace for the child to leave by itself (after the client said bye), then kills its
     *        group; returns the child's exit status (128 + signal when killed).
     */
    int finish(std::chrono::milliseconds grace);

    /** @brief The child's process id (its process group id too). */
    [[nodiscard]] pid_t pid() const { return pid_; }

private:
    ServerChild(pid_t pid, int ready_fd) : pid_(pid), ready_fd_(ready_fd) {}
    void kill_and_reap();
    pid_t pid_ = -1;
    int ready_fd_ = -1;
    int status_ = -1;
};

}  // namespace it_perf

#endif  // IT_PERF_SERVER_CHILD_HPP
