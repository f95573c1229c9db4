/** @file server_child.cpp @brief Forking, watching, killing and reaping the loopback server. */
#include "server_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace it_perf {

namespace {

// The one live child's process group, for the signal handlers and the exit hook: 0 when there is none. A plain
// global because a signal handler can reach nothing else; written only by the parent's main thread.
volatile sig_atomic_t g_child_group = 0;

void kill_child_group() {
    const pid_t group = g_child_group;
    if (group <= 0) return;
    ::kill(-group, SIGKILL);
    while (::waitpid(group, nullptr, 0) < 0 && errno == EINTR) {
    }
    g_child_group = 0;
}

// Async-signal-safe: kill and reap the child's group, then die of the same signal as if there were no handler.
void on_fatal_signal(int sig) {
    const int saved = errno;
    kill_child_group();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    errno = saved;
}

void install_handlers() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    struct sigaction sa{};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(sig, &sa, nullptr);
    std::atexit(kill_child_group);  // exit() from anywhere (CLI11's --help after start, a library) still reaps
}

void write_line(int fd, const std::string &line) {
    size_t off = 0;
    while (off < line.size()) {
        const ssize_t n = ::write(fd, line.data() + off, line.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    ::close(fd);
}

int exit_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

}  // namespace

void report_ready(int fd, const ServerPorts &ports) {
    write_line(fd, "ready " + std::to_string(ports.rdma) + " " + std::to_string(ports.tcp) + "\n");
}

void report_failure(int fd, const std::string &message) { write_line(fd, "error " + message + "\n"); }

rdma::Expected<ServerChild> ServerChild::start(const std::function<int(int ready_fd)> &body) {
    if (g_child_group != 0) return rdma::Error(EBUSY, "a loopback server child is already running");
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return rdma::Error(errno, std::string("pipe: ") + std::strerror(errno));
    const pid_t parent = ::getpid();
    std::fflush(stdout);  // the child must not print what the parent had buffered
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int err = errno;
        ::close(p[0]);
        ::close(p[1]);
        return rdma::Error(err, std::string("fork: ") + std::strerror(err));
    }
    if (pid == 0) {
        ::close(p[0]);
        ::setpgid(0, 0);
        // Die with the parent even if it is killed with SIGKILL; it may already be gone.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(1);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, SIG_DFL);
        const int rc = body(p[1]);
        std::fflush(stdout);
        std::fflush(stderr);
        ::_exit(rc);  // no atexit handlers or static destructors of the parent's copy
    }
    ::close(p[1]);
    ::setpgid(pid, pid);  // both sides set it: whichever runs first, the group exists before any kill
    g_child_group = pid;
    install_handlers();
    return ServerChild(pid, p[0]);
}

ServerChild::ServerChild(ServerChild &&other) noexcept
    : pid_(other.pid_), ready_fd_(other.ready_fd_), status_(other.status_) {
    other.pid_ = -1;
    other.ready_fd_ = -1;
}

ServerChild::~ServerChild() {
    if (ready_fd_ >= 0) ::close(ready_fd_);
    if (pid_ > 0 && status_ < 0) kill_and_reap();
}

void ServerChild::kill_and_reap() {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = status;
    if (g_child_group == pid_) g_child_group = 0;
}

rdma::Expected<ServerPorts> ServerChild::wait_ready(std::chrono::milliseconds timeout) {
    std::string line;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (line.find('\n') == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return rdma::Error(ETIMEDOUT, "the loopback server did not get ready within " +
                                              std::to_string(timeout.count()) + " ms");
        }
        pollfd p{ready_fd_, POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        char buf[512];
        const ssize_t r = ::read(ready_fd_, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        line.append(buf, static_cast<size_t>(r));
    }
    ::close(ready_fd_);
    ready_fd_ = -1;
    if (line.rfind("ready ", 0) == 0) {
        std::istringstream in(line.substr(6));
        unsigned rdma_port = 0, tcp_port = 0;
        if (in >> rdma_port >> tcp_port) return ServerPorts{static_cast<uint16_t>(rdma_port), static_cast<uint16_t>(tcp_port)};
    }
    if (line.rfind("error ", 0) == 0) {
        while (!line.empty() && line.back() == '\n') line.pop_back();
        return rdma::Error(EIO, "the loopback server failed: " + line.substr(6));
    }
    return rdma::Error(EIO, "the loopback server exited before it was ready");
}

int ServerChild::finish(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return -1;
    if (status_ >= 0) return exit_code(status_);
    const auto end = std::chrono::steady_clock::now() + grace;
    for (;;) {
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            status_ = status;
            ::kill(-pid_, SIGKILL);  // anything the child left behind in its group
            if (g_child_group == pid_) g_child_group = 0;
            return exit_code(status);
        }
        if (std::chrono::steady_clock::now() >= end) break;
        ::usleep(10000);
    }
    kill_and_reap();
    return exit_code(status_);
}

}  // namespace it_perf
