/**
 * @file net_addr.hpp
 * @brief The device protocol's address helpers, shared by the kAL and the uAL: conversions between the RNIC-PI's ri_net_addr_t and text or socket addresses.
 */
#ifndef KRDMA_NET_ADDR_HPP
#define KRDMA_NET_ADDR_HPP

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "rnicpi/cpp/status.hpp"
#include "rnicpi/ri_verbs.h"

namespace krdma {

/**
 * @brief Parses an IPv4 or IPv6 address ("192.0.2.1", "2001:db8::1", "fe80::1%eth0" with a scope); ::RI_EINVAL
 *        for anything else, ::RI_ENOENT for an unknown scope interface.
 */
[[nodiscard]] rdma::Expected<ri_net_addr_t> parse_net_addr(std::string_view text);
/**
 * @brief The address (and port, host byte order) of an AF_INET or AF_INET6 socket address (an IPv4-mapped IPv6
 *        address as the IPv4 one); ::RI_EINVAL otherwise.
 */
[[nodiscard]] rdma::Expected<ri_net_addr_t> net_addr_from_sockaddr(const sockaddr_storage &ss, uint16_t *port = nullptr);
/** @brief A socket address for @p addr and @p port (host byte order); family AF_UNSPEC for an empty address. */
[[nodiscard]] sockaddr_storage to_sockaddr(const ri_net_addr_t &addr, uint16_t port) noexcept;
/** @brief Length of the socket address to_sockaddr() makes for @p addr (for bind() and connect()). */
[[nodiscard]] socklen_t sockaddr_len(const ri_net_addr_t &addr) noexcept;
/** @brief Text form ("192.0.2.1", "fe80::1%2"); empty for ::RI_AF_NONE. */
[[nodiscard]] std::string to_text(const ri_net_addr_t &addr);
/** @brief Same family and address bytes (the IPv6 scope counts when both have one). */
[[nodiscard]] bool same_net_addr(const ri_net_addr_t &a, const ri_net_addr_t &b) noexcept;
/** @brief 127.0.0.0/8, ::1 or an IPv4-mapped 127.0.0.0/8 address. */
[[nodiscard]] bool is_loopback(const ri_net_addr_t &addr) noexcept;
/** @brief Address bytes for the family: 4 for IPv4, 16 for IPv6, 0 for none. */
[[nodiscard]] constexpr size_t net_addr_len(const ri_net_addr_t &addr) noexcept {
    return addr.family == RI_AF_INET ? 4 : addr.family == RI_AF_INET6 ? 16 : 0;
}

}  // namespace krdma

#endif  // KRDMA_NET_ADDR_HPP
