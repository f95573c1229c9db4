// A TCP connection over 127.0.0.1 made with plain sockets, for tests that hand one to the stack (CONVERT).
#ifndef OPENRDMA_TESTS_TCP_CONNECTION_HPP
#define OPENRDMA_TESTS_TCP_CONNECTION_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace rdmatest {

/** @brief {the connecting end, the accepted end} of a new TCP connection on 127.0.0.1; {-1, -1} on failure. */
inline std::pair<int, int> tcp_connection() {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (l < 0 || ::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
        ::getsockname(l, reinterpret_cast<sockaddr *>(&a), &al) != 0) {
        if (l >= 0) ::close(l);
        return {-1, -1};
    }
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || ::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        ::close(l);
        if (c >= 0) ::close(c);
        return {-1, -1};
    }
    const int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(l);
    return {c, s};
}

}  // namespace rdmatest

#endif  // OPENRDMA_TESTS_TCP_CONNECTION_HPP
