// ri_net_addr_t conversions.
#include "krdma/net_addr.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

namespace krdma {

rdma::Expected<ri_net_addr_t> parse_net_addr(std::string_view text) {
    ri_net_addr_t a{};
    std::string s(text);
    std::string scope;
    if (auto pct = s.find('%'); pct != std::string::npos) {
        scope = s.substr(pct + 1);
        s.resize(pct);
    }
    if (scope.empty() && ::inet_pton(AF_INET, s.c_str(), a.addr) == 1) {
        a.family = RI_AF_INET;
        return a;
    }
    if (::inet_pton(AF_INET6, s.c_str(), a.addr) == 1) {
        a.family = RI_AF_INET6;
        if (!scope.empty()) {
            a.scope_id = ::if_nametoindex(scope.c_str());
            if (a.scope_id == 0) {
                // A numeric scope is an interface index already.
                char *end = nullptr;
                unsigned long v = std::strtoul(scope.c_str(), &end, 10);
                if (end == scope.c_str() || *end != '\0' || v == 0 || v > UINT32_MAX) {
                    return rdma::Error(RI_ENOENT, "no interface \"" + scope + "\" for the scope of " + std::string(text));
                }
                a.scope_id = static_cast<uint32_t>(v);
            }
        }
        return a;
    }
    return rdma::Error(RI_EINVAL, "\"" + std::string(text) + "\" is not an IPv4 or IPv6 address");
}

rdma::Expected<ri_net_addr_t> net_addr_from_sockaddr(const sockaddr_storage &ss, uint16_t *port) {
    ri_net_addr_t a{};
    if (ss.ss_family == AF_INET) {
        sockaddr_in sin{};
        std::memcpy(&sin, &ss, sizeof(sin));
        a.family = RI_AF_INET;
        std::memcpy(a.addr, &sin.sin_addr, sizeof(sin.sin_addr));
        if (port != nullptr) *port = ntohs(sin.sin_port);
        return a;
    }
    if (ss.ss_family == AF_INET6) {
        sockaddr_in6 sin6{};
        std::memcpy(&sin6, &ss, sizeof(sin6));
        if (IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr)) {
            // An IPv4 connection of a dual-stack socket: the peer and the wire see IPv4, and so do RNICs.
            a.family = RI_AF_INET;
            std::memcpy(a.addr, reinterpret_cast<const uint8_t *>(&sin6.sin6_addr) + 12, 4);
            if (port != nullptr) *port = ntohs(sin6.sin6_port);
            return a;
        }
        a.family = RI_AF_INET6;
        a.scope_id = sin6.sin6_scope_id;
        std::memcpy(a.addr, &sin6.sin6_addr, sizeof(sin6.sin6_addr));
        if (port != nullptr) *port = ntohs(sin6.sin6_port);
        return a;
    }
    return rdma::Error(RI_EINVAL, "address family " + std::to_string(ss.ss_family) + " is not IPv4 or IPv6");
}

sockaddr_storage to_sockaddr(const ri_net_addr_t &addr, uint16_t port) noexcept {
    sockaddr_storage ss{};
    if (addr.family == RI_AF_INET) {
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(port);
        std::memcpy(&sin.sin_addr, addr.addr, sizeof(sin.sin_addr));
        std::memcpy(&ss, &sin, sizeof(sin));
    } else if (addr.family == RI_AF_INET6) {
        sockaddr_in6 sin6{};
        sin6.sin6_family = AF_INET6;
        sin6.sin6_port = htons(port);
        sin6.sin6_scope_id = addr.scope_id;
        std::memcpy(&sin6.sin6_addr, addr.addr, sizeof(sin6.sin6_addr));
        std::memcpy(&ss, &sin6, sizeof(sin6));
    }
    return ss;
}

socklen_t sockaddr_len(const ri_net_addr_t &addr) noexcept {
    return addr.family == RI_AF_INET ? sizeof(sockaddr_in) : addr.family == RI_AF_INET6 ? sizeof(sockaddr_in6) : 0;
}

std::string to_text(const ri_net_addr_t &addr) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (addr.family == RI_AF_INET) {
        ::inet_ntop(AF_INET, addr.addr, buf, sizeof(buf));
        return buf;
    }
    if (addr.family == RI_AF_INET6) {
        ::inet_ntop(AF_INET6, addr.addr, buf, sizeof(buf));
        std::string s = buf;
        if (addr.scope_id != 0) s += "%" + std::to_string(addr.scope_id);
        return s;
    }
    return {};
}

bool same_net_addr(const ri_net_addr_t &a, const ri_net_addr_t &b) noexcept {
    if (a.family != b.family) return false;
    if (a.family == RI_AF_INET6 && a.scope_id != 0 && b.scope_id != 0 && a.scope_id != b.scope_id) return false;
    return std::memcmp(a.addr, b.addr, net_addr_len(a)) == 0;
}

bool is_loopback(const ri_net_addr_t &addr) noexcept {
    if (addr.family == RI_AF_INET) return addr.addr[0] == 127;
    if (addr.family != RI_AF_INET6) return false;
    static constexpr uint8_t kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(addr.addr, kLoopback6, 16) == 0) return true;
    return std::memcmp(addr.addr, kMapped, 12) == 0 && addr.addr[12] == 127;
}

}  // namespace krdma
