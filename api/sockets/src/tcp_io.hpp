/**
 * @file tcp_io.hpp
 * @brief Bounded reads and writes of a few bytes on a connected TCP socket, before it is converted: the MPA frames
 *        of a decline (decline.hpp) and the hello and answer of a link (link.hpp). Each waits until a deadline and
 *        never blocks past it, whatever the socket's O_NONBLOCK.
 */
#ifndef OPENRDMA_SOCKETS_TCP_IO_HPP
#define OPENRDMA_SOCKETS_TCP_IO_HPP

#include <sys/types.h>

#include <chrono>
#include <cstddef>

namespace openrdma::sockets {

/** @brief Milliseconds left until @p until (0 once it passed). */
[[nodiscard]] int left_ms(std::chrono::steady_clock::time_point until);
/** @brief Waits for @p events on @p fd until @p until; false when the time is up (or poll failed). */
[[nodiscard]] bool wait_for(int fd, short events, std::chrono::steady_clock::time_point until);
/**
 * @brief Looks at the first @p want bytes on @p fd without taking them, waiting until @p until for all of them: how
 *        many are there (fewer than @p want: the time is up), or -1 with errno (ECONNRESET: the connection ended
 *        first).
 */
[[nodiscard]] ssize_t peek_bytes(int fd, void *buf, size_t want, std::chrono::steady_clock::time_point until);
/** @brief Takes exactly @p n bytes that peek_bytes() saw; false if they cannot be read. */
[[nodiscard]] bool take_exact(int fd, void *buf, size_t n);
/** @brief Sends all @p n bytes at @p p, waiting for room until @p until; false with errno when it cannot. */
[[nodiscard]] bool send_all(int fd, const void *p, size_t n, std::chrono::steady_clock::time_point until);

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_TCP_IO_HPP
