// The raw TCP baselines every tool prints its ratios against (bench_rdma, bench_offload, bench_verbs, it_perf): one
// implementation, so that two tools measuring TCP in one sitting measure it the same way. A stream is messages of
// the test's size, each written whole by one send loop and read whole into a buffer of that size (as an RDMA
// receiver places each message in a buffer of its size; iperf3 -l does the same); a ping-pong spins on a
// non-blocking receive or blocks, as the RDMA side it is compared with waits. TCP_NODELAY on both ends.
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
#include <vector>

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

/**
 * @brief A TCP listener on 127.0.0.1 at a port the host picks, with @p backlog; its address in @p a. Its fd is -1
 *        when it could not listen.
 */
inline Fd loopback_listener(int backlog, sockaddr_in &a) {
    Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    a = sockaddr_in{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (l.fd < 0 || ::bind(l.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(l.fd, backlog) != 0 ||
        ::getsockname(l.fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        return Fd();
    }
    return l;
}

/** @brief A connected TCP pair over 127.0.0.1, TCP_NODELAY on both ends (as the RNICs' streams have). */
inline bool tcp_pair(Fd &c, Fd &s) {
    sockaddr_in a{};
    Fd l = loopback_listener(1, a);
    if (l.fd < 0) return false;
    c = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(c.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return false;
    s = Fd(::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s.fd >= 0;
}

/**
 * @brief Writes or reads all @p n bytes; false at the end of the stream (errno 0) or on an error (errno says which).
 *        With MSG_DONTWAIT in @p flags a receive spins on an empty socket instead of sleeping.
 */
inline bool io_all(bool write, int fd, uint8_t *p, size_t n, int flags = 0) {
    while (n > 0) {
        const ssize_t r = write ? ::send(fd, p, n, flags | MSG_NOSIGNAL) : ::recv(fd, p, n, flags);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r == 0) errno = 0;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

/**
 * @brief The sending end of a stream: whole messages of @p size from @p message (blocking sends) while
 *        @p more(messages sent so far) says so. The messages sent, or -1 when the stream broke.
 */
template <class More>
inline int64_t stream_send(int fd, const uint8_t *message, size_t size, More &&more) {
    int64_t sent = 0;
    while (more(static_cast<uint64_t>(sent))) {
        if (!io_all(true, fd, const_cast<uint8_t *>(message), size)) return -1;
        ++sent;
    }
    return sent;
}

/**
 * @brief The receiving end of a stream: reads into @p buffer (@p size bytes, one message) until the end of the
 *        stream, each receive asking for the rest of the current message (blocking). The bytes read.
 */
inline uint64_t stream_receive(int fd, uint8_t *buffer, size_t size) {
    uint64_t total = 0;
    size_t at = 0;
    for (;;) {
        const ssize_t r = ::recv(fd, buffer + at, size - at, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return total;
        total += static_cast<uint64_t>(r);
        at = (at + static_cast<size_t>(r)) % size;
    }
}

/**
 * @brief Raw TCP stream bandwidth over a connected pair in this process: one thread sends messages of @p size for
 *        @p seconds, another reads them (stream_send(), stream_receive()); the clock stops when every byte is read.
 *        Bytes per second; 0 on failure.
 */
inline double tcp_stream(size_t size, double seconds) {
    using clock = std::chrono::steady_clock;
    Fd c, s;
    if (!tcp_pair(c, s)) return 0;
    std::vector<uint8_t> src(size, 1), dst(size);
    uint64_t read = 0;
    std::thread reader([&, fd = s.fd] { read = stream_receive(fd, dst.data(), size); });
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    const int64_t sent = stream_send(c.fd, src.data(), size, [&](uint64_t) { return clock::now() < end; });
    ::shutdown(c.fd, SHUT_WR);
    reader.join();  // every byte is read before the clock stops
    const double el = std::chrono::duration<double>(clock::now() - t0).count();
    if (sent <= 0 || read != static_cast<uint64_t>(sent) * size) return 0;
    return static_cast<double>(read) / el;
}

/** @brief How a ping-pong's ends wait for the other's message. */
enum class Waiting {
    spinning, /**< A non-blocking receive, retried at once (as an RDMA side spinning on its CQ and memory). */
    blocking  /**< A blocking receive: the thread sleeps until data arrives (as a side sleeping on its CQ). */
};

/**
 * @brief Raw TCP ping-pong of @p size-byte messages (8 by default) for @p seconds, both ends waiting as @p how says:
 *        seconds per half round trip.
 */
inline double tcp_pingpong(double seconds, Waiting how, size_t size = 8) {
    using clock = std::chrono::steady_clock;
    Fd c, s;
    if (!tcp_pair(c, s)) return 0;
    const int flags = how == Waiting::spinning ? MSG_DONTWAIT : 0;
    std::thread echo([fd = s.fd, flags, size] {
        std::vector<uint8_t> b(size);
        while (io_all(false, fd, b.data(), size, flags) && io_all(true, fd, b.data(), size)) {
        }
    });
    std::vector<uint8_t> b(size);
    size_t n = 0;
    const auto t0 = clock::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (clock::now() < end) {
        if (!io_all(true, c.fd, b.data(), size) || !io_all(false, c.fd, b.data(), size, flags)) break;
        ++n;
    }
    const double el = std::chrono::duration<double>(clock::now() - t0).count();
    ::shutdown(c.fd, SHUT_WR);
    echo.join();
    return n == 0 ? 0 : el / static_cast<double>(n) / 2;
}

}  // namespace bench

#endif  // BENCH_TCP_BASELINE_HPP
