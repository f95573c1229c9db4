/**
 * @file socket_ends.hpp
 * @brief LLP management: a TCP socket's two ends (address and port) as the RNIC-PI names them, and as text.
 */
#ifndef KAL_LLP_SOCKET_ENDS_HPP
#define KAL_LLP_SOCKET_ENDS_HPP

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace kal::llp {

/** @brief One end of a TCP connection (address and port), as an ordered key (and, fixed in layout, a message's). */
struct StreamEnd {
    uint16_t family = 0;               /**< ::ri_addr_family. */
    std::array<uint8_t, 16> addr{};    /**< The address (IPv4: the first four bytes, the rest zero). */
    uint16_t port = 0;                 /**< Host byte order. */
    /** @brief Ordered by family, address, port. */
    auto operator<=>(const StreamEnd &) const = default;
    /** @brief The end @p a : @p p. */
    [[nodiscard]] static StreamEnd of(const ri_net_addr_t &a, uint16_t p) noexcept;
};

/** @brief @p a and @p port as "address:port" ("[address]:port" for IPv6, "?:port" for no address). */
[[nodiscard]] std::string text_of(const ri_net_addr_t &a, uint16_t port);

/** @brief Socket @p fd's own address and port into @p p (left as they are when the socket cannot say). */
void local_end_of(int fd, ri_llp_params_t &p);

/**
 * @brief The addresses and ports of connected socket @p fd, for a connection request (the negotiated parameters
 *        come later); ri_llp_params_t::fd is -1.
 */
[[nodiscard]] ri_llp_params_t addresses_of(int fd);

/**
 * @brief Whether TCP sockets @p a and @p b are the two ends of one connection, proven by the kernel's sequence
 *        numbers: what each has sent (queued) reaches, within @p in_flight bytes still on their way, what the other
 *        has received. Both numbers start at random (RFC 6528), so two other connections, even with mirrored
 *        addresses in two network namespaces, match by chance with a probability of 2^-24 at 1 MiB; only a party
 *        that sees the connection's packets knows them. Needs CAP_NET_ADMIN in the sockets' network namespaces
 *        (the numbers are read in TCP repair mode, entered and left at once; leaving it sends no window probe where
 *        the kernel allows, 4.19 on). False when either socket cannot tell.
 */
[[nodiscard]] bool one_connection(int a, int b, uint32_t in_flight = 1u << 20);

}  // namespace kal::llp

#endif  // KAL_LLP_SOCKET_ENDS_HPP
