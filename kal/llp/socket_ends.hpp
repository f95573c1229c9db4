/**
 * @file socket_ends.hpp
 * @brief LLP management: a TCP socket's two ends (address and port) as the RNIC-PI names them, and as text.
 */
#ifndef KAL_LLP_SOCKET_ENDS_HPP
#define KAL_LLP_SOCKET_ENDS_HPP

#include <cstdint>
#include <string>

#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace kal::llp {

/** @brief @p a and @p port as "address:port" ("[address]:port" for IPv6, "?:port" for no address). */
[[nodiscard]] std::string text_of(const ri_net_addr_t &a, uint16_t port);

/** @brief Socket @p fd's own address and port into @p p (left as they are when the socket cannot say). */
void local_end_of(int fd, ri_llp_params_t &p);

/**
 * @brief The addresses and ports of connected socket @p fd, for a connection request (the negotiated parameters
 *        come later); ri_llp_params_t::fd is -1.
 */
[[nodiscard]] ri_llp_params_t addresses_of(int fd);

}  // namespace kal::llp

#endif  // KAL_LLP_SOCKET_ENDS_HPP
