// LLP management: a TCP socket's ends in the RNIC-PI's terms.
#include "socket_ends.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>

#include "krdma/net_addr.hpp"

namespace kal::llp {

StreamEnd StreamEnd::of(const ri_net_addr_t &a, uint16_t p) noexcept {
    StreamEnd e;
    e.family = a.family;
    std::memcpy(e.addr.data(), a.addr, a.family == RI_AF_INET6 ? 16 : 4);
    e.port = p;
    return e;
}

std::string text_of(const ri_net_addr_t &a, uint16_t port) {
    const std::string t = a.family == RI_AF_NONE ? "?" : krdma::to_text(a);
    return a.family == RI_AF_INET6 ? "[" + t + "]:" + std::to_string(port) : t + ":" + std::to_string(port);
}

void local_end_of(int fd, ri_llp_params_t &p) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0) {
        if (auto a = krdma::net_addr_from_sockaddr(ss, &p.local_port)) p.local = *a;
    }
}

ri_llp_params_t addresses_of(int fd) {
    ri_llp_params_t p{};
    p.fd = -1;
    local_end_of(fd, p);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0) {
        if (auto a = krdma::net_addr_from_sockaddr(ss, &p.remote_port)) p.remote = *a;
    }
    return p;
}

namespace {

#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP (-1)  // Linux 4.19
#endif

struct Sequences {
    uint32_t sent;      // the next byte this end queues (write_seq)
    uint32_t received;  // the next byte this end expects (rcv_nxt)
};

// Reads @p fd's two sequence numbers in repair mode and leaves it at once.
std::optional<Sequences> sequences_of(int fd) {
    int on = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &on, sizeof on) != 0) return std::nullopt;
    Sequences s{};
    bool ok = true;
    for (int q : {TCP_SEND_QUEUE, TCP_RECV_QUEUE}) {
        uint32_t v = 0;
        socklen_t len = sizeof v;
        ok = ok && ::setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &q, sizeof q) == 0 &&
             ::getsockopt(fd, IPPROTO_TCP, TCP_QUEUE_SEQ, &v, &len) == 0 && len == sizeof v;
        (q == TCP_SEND_QUEUE ? s.sent : s.received) = v;
    }
    int none = TCP_NO_QUEUE;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_REPAIR_QUEUE, &none, sizeof none);
    int off = TCP_REPAIR_OFF_NO_WP;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &off, sizeof off) != 0) {
        off = 0;  // an older kernel: leaving sends a window probe, which the peer only acknowledges
        (void)::setsockopt(fd, IPPROTO_TCP, TCP_REPAIR, &off, sizeof off);
    }
    if (!ok) return std::nullopt;
    return s;
}

}  // namespace

bool one_connection(int a, int b, uint32_t in_flight) {
    const auto x = sequences_of(a);
    const auto y = x ? sequences_of(b) : std::nullopt;
    if (!x || !y) return false;
    // Modulo 2^32: what one sent is at or ahead of what the other received, by what is still on its way.
    return static_cast<uint32_t>(x->sent - y->received) <= in_flight &&
           static_cast<uint32_t>(y->sent - x->received) <= in_flight;
}

}  // namespace kal::llp
