/**
 * @file peer_marks.hpp
 * @brief The map of the kAL's TCP peer detection, as the sockets layer uses it: mark a socket before connect or
 *        listen, and once the connection is established learn whether the peer's handshake said it runs the layer
 *        too (an experimental TCP option in the SYN and SYN-ACK, written and read by the kAL's sockops program).
 *
 * The kAL hands the map's descriptor to any process that asks (KRDMA_CMD_PEER_MARKS). It reaches only sockets the
 * process holds descriptors for (the map is keyed by the socket's descriptor), so it lets a process say "I run the
 * layer" about its own sockets and read what their peers said: nothing about anyone else's.
 */
#ifndef KRDMA_PEER_MARKS_HPP
#define KRDMA_PEER_MARKS_HPP

#include <cstdint>

#include "krdma/message.hpp"
#include "rnicpi/cpp/status.hpp"

namespace krdma {

/** @brief One socket's value in the map (the sockops program's struct peer_mark). */
struct PeerMark {
    uint8_t marked = 0;       /**< This end runs the layer (set by its process). */
    uint8_t peer = 0;         /**< 0 not decided yet, 1 the peer's handshake carried the option, 2 it did not. */
    uint8_t role = 0;         /**< Once established: 1 this end connected, 2 it was accepted (0: a krdmad before
                                   the role was recorded, or not established). */
    uint8_t reserved[5] = {}; /**< Zero. */
};
static_assert(sizeof(PeerMark) == 8);

/** @brief The peer of a marked, established TCP socket. */
enum class PeerKind { undecided, layer, plain };

/** @brief The map, through its descriptor. Its calls are system calls; nothing is cached. */
class PeerMarks {
public:
    /** @brief Over the map descriptor @p map (from AccessLayer::peer_marks()). */
    explicit PeerMarks(UniqueFd map) noexcept : map_(std::move(map)) {}
    /** @brief The descriptor. */
    [[nodiscard]] int fd() const noexcept { return map_.get(); }
    /** @brief Marks TCP socket @p sock (before connect or listen): its SYN or SYN-ACK will carry the option. */
    [[nodiscard]] rdma::Status mark(int sock) const noexcept;
    /** @brief What marked socket @p sock learned of its peer (undecided before the handshake, or when unmarked). */
    [[nodiscard]] rdma::Expected<PeerKind> peer(int sock) const noexcept;
    /**
     * @brief The whole value of socket @p sock (all zero when it has none): whether it was marked, by a process
     *        that may since have called exec, and its role. A socket that is not TCP has none.
     */
    [[nodiscard]] rdma::Expected<PeerMark> look(int sock) const noexcept;

private:
    UniqueFd map_;
};

}  // namespace krdma

#endif  // KRDMA_PEER_MARKS_HPP
