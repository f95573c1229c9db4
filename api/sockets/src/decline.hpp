/**
 * @file decline.hpp
 * @brief Declining a conversion: the MPA frames an end that cannot convert exchanges by itself, so that both ends
 *        go on with TCP on the same connection.
 *
 * Once both ends of a connection learned from its handshake that the other runs the layer, both must convert or
 * neither: the initiator sends an MPA request at once and the responder waits for it. An end that then finds it
 * cannot (its pinned-memory limit reached, no QP left, no RNIC for the address) says so with MPA's own frames,
 * carrying a Hello without receive buffers: an initiator sends a request with it and takes the reply, a responder
 * takes the request and answers it with a reject. Nothing else was sent, and each frame is read exactly, so the
 * byte stream the programs see is whole: the connection goes on as TCP, where before it was reset.
 */
#ifndef OPENRDMA_SOCKETS_DECLINE_HPP
#define OPENRDMA_SOCKETS_DECLINE_HPP

#include <chrono>
#include <string>

#include "rnicpi/cpp/status.hpp"

namespace openrdma::sockets {

/** @brief How long an end waits for the other's frame when it declines or looks at a request. */
inline constexpr std::chrono::milliseconds kDeclineWait{5000};

/** @brief What the initiator's MPA request says. */
enum class Request : uint8_t {
    converts, /**< A request with a Hello that posts receive buffers. */
    declines, /**< A request with the decline Hello: the initiator stays TCP. */
    none      /**< No valid request within the wait (the reason is given). */
};

/**
 * @brief Responder: waits up to @p limit for the whole MPA request on connected TCP socket @p fd and looks at it
 *        without taking it (when the conversion goes on, the kAL reads it). none, with @p why, when what came is
 *        not a request or nothing came.
 */
[[nodiscard]] Request peek_request(int fd, std::chrono::milliseconds limit, std::string &why);

/**
 * @brief Responder: takes the MPA request from @p fd (waiting up to @p limit for it) and answers it with a reject
 *        carrying the decline Hello.
 */
[[nodiscard]] rdma::Expected<void> decline_request(int fd, std::chrono::milliseconds limit);

/**
 * @brief Initiator: sends an MPA request carrying the decline Hello on @p fd and takes the peer's reply (waiting up
 *        to @p limit). Succeeds when the reply is a reject: both ends go on with TCP.
 */
[[nodiscard]] rdma::Expected<void> decline_as_initiator(int fd, std::chrono::milliseconds limit);

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_DECLINE_HPP
