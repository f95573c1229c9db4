// Helpers shared by the kAL tests.
#ifndef TESTS_KAL_TEST_UTIL_HPP
#define TESTS_KAL_TEST_UTIL_HPP

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace testutil {

/** @brief Descriptors open in this process now: a leak check compares two counts. */
inline size_t open_fds() {
    size_t n = 0;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)e;
        ++n;
    }
    return n;
}

/** @brief The inode of the file open as @p fd (a socket's is what /proc shows for it), or 0. */
inline unsigned long inode_of(int fd) {
    struct stat st{};
    return ::fstat(fd, &st) == 0 ? static_cast<unsigned long>(st.st_ino) : 0;
}

/**
 * @brief The inodes of the files in any epoll set of process @p pid (0: this one), from the `tfd:` lines of
 *        /proc/PID/fdinfo: what that process's epoll sets have an entry on the wait queue of.
 */
inline std::set<unsigned long> epoll_watched_inodes(pid_t pid = 0) {
    const std::string dir = pid == 0 ? "/proc/self/fdinfo" : "/proc/" + std::to_string(pid) + "/fdinfo";
    std::set<unsigned long> out;
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
        std::ifstream in(e.path());
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("tfd:", 0) != 0) continue;
            const size_t at = line.find(" ino:");
            if (at != std::string::npos) out.insert(std::stoul(line.substr(at + 5), nullptr, 16));
        }
    }
    return out;
}

/** @brief The inodes of the TCP (IPv4 or IPv6) sockets this process has open. */
inline std::set<unsigned long> tcp_socket_inodes() {
    std::set<unsigned long> out;
    std::error_code ec;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
        int fd = -1;
        try {
            fd = std::stoi(e.path().filename().string());
        } catch (...) {
            continue;
        }
        int domain = 0, type = 0;
        socklen_t len = sizeof domain;
        if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) continue;
        len = sizeof type;
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
        if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM) out.insert(inode_of(fd));
    }
    return out;
}

}  // namespace testutil

#endif  // TESTS_KAL_TEST_UTIL_HPP
