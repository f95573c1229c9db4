// Bounded reads and writes on a TCP socket before its conversion (tcp_io.hpp).
#include "tcp_io.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>

#include "libc.hpp"

namespace openrdma::sockets {

int left_ms(std::chrono::steady_clock::time_point until) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    return ms > 0 ? static_cast<int>(ms) : 0;
}

bool wait_for(int fd, short events, std::chrono::steady_clock::time_point until) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = real().poll(&p, 1, left_ms(until));
        if (n > 0) return true;
        if (n == 0 || errno != EINTR) return false;
    }
}

ssize_t peek_bytes(int fd, void *buf, size_t want, std::chrono::steady_clock::time_point until) {
    for (;;) {
        const ssize_t n = real().recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (n > 0 && static_cast<size_t>(n) >= want) return n;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        const ssize_t have = n > 0 ? n : 0;
        if (std::chrono::steady_clock::now() >= until) return have;
        if (have > 0) {
            // Part came (in two segments): the rest follows within microseconds.
            const timespec pause{0, 50000};
            ::nanosleep(&pause, nullptr);
        } else if (!wait_for(fd, POLLIN, until)) {
            return 0;
        }
    }
}

bool take_exact(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = real().recv(fd, static_cast<char *>(buf) + got, n - got, MSG_DONTWAIT);
        if (r > 0) {
            got += static_cast<size_t>(r);
        } else if (!(r < 0 && errno == EINTR)) {
            return false;
        }
    }
    return true;
}

bool send_all(int fd, const void *p, size_t n, std::chrono::steady_clock::time_point until) {
    size_t sent = 0;
    while (sent < n) {
        const ssize_t r = real().send(fd, static_cast<const char *>(p) + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r > 0) {
            sent += static_cast<size_t>(r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(fd, POLLOUT, until)) continue;
        if (r == 0) errno = EIO;
        return false;
    }
    return true;
}

}  // namespace openrdma::sockets
