// The raw TCP baselines the benchmarks print their ratios against: a connected pair over 127.0.0.1, whole-message
// reads and writes, and an 8-byte ping-pong that waits the way the RDMA side it is compared with waits.
#ifndef BENCH_TCP_BASELINE_HPP
#define BENCH_TCP_BASELINE_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>

namespace bench {

/** @brief An owned descriptor. */
struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
    Fd &operator=(Fd &&o) noexcept {
        std::swap(fd, o.fd);
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

/** @brief A connected TCP pair over 127.0.0.1, TCP_NODELAY on both ends (as the RNICs' streams have). */
inline bool tcp_pair(Fd &c, Fd &s) {
    Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(l.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(l.fd, 1) != 0 ||
        ::getsockname(l.fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        return false;
    }
    c = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(c.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return false;
    s = Fd(::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s.fd >= 0;
}

/**
 * @brief Writes or reads all @p n bytes; false at the end of the stream or on an error. With MSG_DONTWAIT in
 *        @p flags a receive spins on an empty socket instead of sleeping.
 */
inline bool io_all(bool write, int fd, uint8_t *p, size_t n, int flags = 0) {
    while (n > 0) {
        const ssize_t r = write ? ::send(fd, p, n, flags | MSG_NOSIGNAL) : ::recv(fd, p, n, flags);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

/** @brief How a ping-pong's ends wait for the other's message. */
enum class Waiting {
    spinning, /**< A non-blocking receive, retried at once (as an RDMA side spinning on its CQ and memory). */
    blocking  /**< A blocking receive: the thread sleeps until data arrives (as a side sleeping on its CQ). */
};

/** @brief Raw TCP 8-byte ping-pong for @p seconds, both ends waiting as @p how says: seconds per half round trip. */
inline double tcp_pingpong(double seconds, Waiting how) {
    using clock = std::chrono::steady_clock;
    Fd c, s;
    if (!tcp_pair(c, s)) return 0;
    const int flags = how == Waiting::spinning ? MSG_DONTWAIT : 0;
    std::thread echo([fd = s.fd, flags] {
        uint8_t b[8];
        while (io_all(false, fd, b, 8, flags) && io_all(true, fd, b, 8)) {
        }
    });
    uint8_t b[8] = {};
    size_t n = 0;
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock::now() < end) {
        if (!io_all(true, c.fd, b, 8) || !io_all(false, c.fd, b, 8, flags)) break;
        ++n;
    }
    const double el = std::chrono::duration<double>(clock::now() - t0).count();
    ::shutdown(c.fd, SHUT_WR);
    echo.join();
    return n == 0 ? 0 : el / static_cast<double>(n) / 2;
}

}  // namespace bench

#endif  // BENCH_TCP_BASELINE_HPP
