/** @file process_counters.cpp @brief System calls (perf tracepoint) and context switches (/proc) of processes. */
#include "process_counters.hpp"

#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

namespace it_perf {

namespace {

// The id of the raw_syscalls:sys_enter tracepoint, or nullopt without tracefs.
std::optional<uint64_t> sys_enter_id() {
    for (const char *dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
        std::ifstream in(std::string(dir) + "/events/raw_syscalls/sys_enter/id");
        uint64_t id = 0;
        if (in >> id) return id;
    }
    return std::nullopt;
}

// The threads of process @p pid, as /proc lists them now.
std::vector<pid_t> threads_of(pid_t pid) {
    std::vector<pid_t> tids;
    const std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR *d = ::opendir(dir.c_str());
    if (d == nullptr) return tids;
    while (const dirent *e = ::readdir(d)) {
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9') tids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
    ::closedir(d);
    return tids;
}

// Context switches of thread @p tid of @p pid since it started (0 when it is gone).
uint64_t switches_of(pid_t pid, pid_t tid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
    uint64_t total = 0;
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
            total += std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10);
        }
    }
    return total;
}

}  // namespace

ProcessCounters ProcessCounters::open(pid_t pid, std::string *why_not) {
    ProcessCounters c;
    c.pid_ = pid == 0 ? ::getpid() : pid;
    const auto id = sys_enter_id();
    if (!id) {
        if (why_not != nullptr) {
            // Two different causes, two different remedies: say which.
            std::error_code ec;
            const bool mounted = std::filesystem::exists("/sys/kernel/tracing/events", ec) ||
                                 std::filesystem::exists("/sys/kernel/debug/tracing/events", ec);
            *why_not = mounted ? "the raw_syscalls:sys_enter tracepoint is not readable (tracefs: root only)"
                               : "tracefs is not mounted (as root: mount -t tracefs nodev /sys/kernel/tracing)";
        }
        return c;
    }
    for (pid_t tid : threads_of(c.pid_)) {
        perf_event_attr a{};
        a.size = sizeof a;
        a.type = PERF_TYPE_TRACEPOINT;
        a.config = *id;
        a.inherit = 1;  // threads this one starts later count into it
        const long fd = ::syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ESRCH) continue;  // the thread ended meanwhile
            if (why_not != nullptr) {
                *why_not = std::string("perf_event_open: ") + std::strerror(errno) +
                           (errno == EACCES || errno == EPERM ? " (needs root or CAP_PERFMON)" : "");
            }
            c.close_all();
            return c;
        }
        c.fds_.push_back(static_cast<int>(fd));
    }
    if (why_not != nullptr) why_not->clear();
    return c;
}

ProcessCounters::ProcessCounters(ProcessCounters &&other) noexcept
    : pid_(std::exchange(other.pid_, 0)), fds_(std::move(other.fds_)) {
    other.fds_.clear();
}

ProcessCounters &ProcessCounters::operator=(ProcessCounters &&other) noexcept {
    if (this != &other) {
        close_all();
        pid_ = std::exchange(other.pid_, 0);
        fds_ = std::move(other.fds_);
        other.fds_.clear();
    }
    return *this;
}

ProcessCounters::~ProcessCounters() { close_all(); }

void ProcessCounters::close_all() noexcept {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
}

ProcessReading ProcessCounters::read() const {
    ProcessReading r;
    if (pid_ == 0) return r;
    if (!fds_.empty()) {
        uint64_t total = 0;
        for (int fd : fds_) {
            uint64_t v = 0;
            if (::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) total += v;
        }
        r.syscalls = total;
    }
    for (pid_t tid : threads_of(pid_)) r.switches += switches_of(pid_, tid);
    return r;
}

pid_t server_of_socket(const std::string &path) {
    sockaddr_un a{};
    if (path.empty() || path.size() >= sizeof a.sun_path) return 0;
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size());
    const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) return 0;
    pid_t pid = 0;
    if (::connect(s, reinterpret_cast<const sockaddr *>(&a), sizeof a) == 0) {
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) pid = cred.pid;
    }
    ::close(s);
    return pid;
}

}  // namespace it_perf
