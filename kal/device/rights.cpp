// The caller's own rights, read from /proc as the kernel would check them for the caller's own system calls.
#include "rights.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace kal {
namespace {

std::string proc_path(pid_t pid, const char *what) {
    return "/proc/" + std::to_string(static_cast<long>(pid)) + "/" + what;
}

// The inode of a namespace link (/proc/PID/ns/user); 0 when it cannot be read.
ino_t ns_inode(const std::string &link) {
    struct stat st {};
    return ::stat(link.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

bool in_own_pid_namespace(pid_t pid) {
    if (pid == ::getpid()) return true;
    struct stat mine {}, theirs {};
    return ::stat("/proc/self/ns/pid", &mine) == 0 && ::stat(proc_path(pid, "ns/pid").c_str(), &theirs) == 0 &&
           mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

std::optional<uint64_t> process_start_time(pid_t pid) {
    std::ifstream in(proc_path(pid, "stat"));
    std::string line;
    if (!std::getline(in, line)) return std::nullopt;
    // Field 2, the command, is in parentheses and may hold anything, spaces and ')' included: count from the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(line.substr(close + 1));
    std::string field;
    // After the command come field 3 (state) .. field 22 (starttime): skip 19, read the 20th.
    for (int i = 0; i < 19; ++i) {
        if (!(rest >> field)) return std::nullopt;
    }
    uint64_t start = 0;
    if (!(rest >> start)) return std::nullopt;
    return start;
}

Rights rights_of(pid_t pid, uint64_t start_time) {
    Rights r;
    if (pid <= 0) return r;
    std::ifstream status(proc_path(pid, "status"));
    std::ifstream limits(proc_path(pid, "limits"));
    if (!status || !limits) return r;
    std::string line;
    bool have_caps = false;
    while (std::getline(status, line)) {
        if (line.rfind("CapEff:", 0) == 0) {
            r.cap_effective = std::strtoull(line.c_str() + 7, nullptr, 16);
            have_caps = true;
            break;
        }
    }
    bool have_memlock = false;
    while (std::getline(limits, line)) {
        // "Max locked memory         8388608              8388608              bytes"
        if (line.rfind("Max locked memory", 0) != 0) continue;
        std::istringstream f(line.substr(17));
        std::string soft;
        if (f >> soft) {
            r.memlock_limit = soft == "unlimited" ? UINT64_MAX : std::strtoull(soft.c_str(), nullptr, 10);
            have_memlock = true;
        }
        break;
    }
    // Read the start time last: if the pid still names the process that connected now, what was read above was its.
    if (!have_caps || !have_memlock) return r;
    if (start_time != 0) {
        auto now = process_start_time(pid);
        if (!now || *now != start_time) return r;
    }
    if (ns_inode(proc_path(pid, "ns/user")) != ns_inode("/proc/self/ns/user")) r.cap_effective = 0;
    r.known = true;
    return r;
}

uint32_t unprivileged_port_start() {
    std::ifstream in("/proc/sys/net/ipv4/ip_unprivileged_port_start");
    uint32_t port = 1024;
    if (!(in >> port)) return 1024;
    return port;
}

bool privileged_port(uint32_t port) { return port != 0 && port < unprivileged_port_start(); }

}  // namespace kal
