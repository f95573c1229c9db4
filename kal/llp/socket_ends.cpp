// LLP management: a TCP socket's ends in the RNIC-PI's terms.
#include "socket_ends.hpp"

#include <sys/socket.h>

#include "krdma/net_addr.hpp"

namespace kal::llp {

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

}  // namespace kal::llp
