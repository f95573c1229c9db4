/**
 * @file mirror.hpp
 * @brief The kernel descriptor an RDMA-mode socket shows the application: a Unix stream socket whose readiness
 *        mirrors the RDMA stream's, so that poll, select and epoll (edge- or level-triggered, in any event loop)
 *        work on it unchanged.
 *
 * The application's descriptor number is moved (dup2) onto one end, X, of a socket pair; the layer keeps both ends.
 * X polls readable while one byte waits in it (sent from the other end, Y) and unwritable while X's own send buffer
 * holds bytes Y has not read: the two are set independently, each with one system call when it changes and none
 * when it does not. The end of the peer's stream is Y shut down for writing (X reads end of file, POLLRDHUP); a reset
 * is Y closed (POLLHUP).
 */
#ifndef OPENRDMA_SOCKETS_MIRROR_HPP
#define OPENRDMA_SOCKETS_MIRROR_HPP

#include <cstdint>

namespace openrdma::sockets {

/** @brief A readiness mirror. Not thread-safe: its stream's mutex guards it. */
class Mirror {
public:
    /** @brief Makes the socket pair: readable no, writable yes. False (errno set) when the system refuses. */
    bool open();
    ~Mirror();
    /** @brief The end the application sees (the layer's own descriptor of it). */
    [[nodiscard]] int app_end() const noexcept { return x_; }
    /** @brief Shows the poll(2) events @p events (POLLIN, POLLOUT, POLLRDHUP, POLLHUP); true when it changed anything. */
    bool show(uint32_t events);

private:
    int x_ = -1, y_ = -1;
    bool readable_ = false, writable_ = true, eof_ = false, hup_ = false;
};

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_MIRROR_HPP
