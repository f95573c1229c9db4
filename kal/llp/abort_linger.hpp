/**
 * @file abort_linger.hpp
 * @brief Abortive teardown that does not lose what the connection already said.
 *
 * A QP that goes to ERROR ends its connection with a reset (verbs: ERROR is abortive). But the socket may still hold
 * bytes the peer must get: a Terminate the RNIC sent to say why (RFC 5040 §7), or messages the consumer already saw
 * complete. A reset at once discards them (on a real network they are often still unsent or unacknowledged). So a
 * socket with bytes in flight first sends FIN after them and lingers until the peer has acknowledged everything,
 * or a deadline passes, and only then is reset; a socket with nothing in flight is reset at once.
 */
#ifndef KAL_LLP_ABORT_LINGER_HPP
#define KAL_LLP_ABORT_LINGER_HPP

#include <chrono>
#include <cstddef>
#include <vector>

#include "krdma/message.hpp"

namespace kal::llp {

/** @brief Resets the TCP connection of @p fd now (RST; the socket stays open). */
void reset_connection(int fd) noexcept;

/** @brief Bytes of @p fd's stream not yet acknowledged by the peer (SIOCOUTQ), 0 on error. */
[[nodiscard]] size_t unacknowledged(int fd) noexcept;
/** @brief Bytes that arrived on @p fd and were not read (SIOCINQ), 0 on error. */
[[nodiscard]] size_t unread(int fd) noexcept;

/** @brief The sockets being torn down abortively once their last bytes are out. Not thread-safe. */
class AbortLinger {
public:
    using Clock = std::chrono::steady_clock;

    /** @brief Lingering sockets wait at most @p linger for the peer's acknowledgement. */
    explicit AbortLinger(std::chrono::milliseconds linger = std::chrono::milliseconds(2000)) noexcept
        : linger_(linger) {}
    AbortLinger(const AbortLinger &) = delete;
    AbortLinger &operator=(const AbortLinger &) = delete;
    /** @brief Resets and closes whatever still lingers. */
    ~AbortLinger();

    /**
     * @brief Ends @p sock's connection abortively: reset and closed now when nothing is in flight, else FIN after
     *        the bytes in flight and kept until they are acknowledged or the linger time ends (see poll()).
     */
    void abort(krdma::UniqueFd sock, Clock::time_point now = Clock::now());
    /**
     * @brief Resets and closes the sockets whose bytes are acknowledged or whose time is up; returns the
     *        milliseconds until it should be called again, or -1 with nothing lingering. The sockets are looked at
     *        once per 10 ms however often it is called (the peer's acknowledgement has no event to wait for).
     */
    int poll(Clock::time_point now = Clock::now());
    /** @brief Sockets lingering. */
    [[nodiscard]] size_t size() const noexcept { return lingering_.size(); }

private:
    struct Lingering {
        krdma::UniqueFd sock;
        Clock::time_point deadline;
    };
    std::chrono::milliseconds linger_;
    std::vector<Lingering> lingering_;
    Clock::time_point next_look_{};  // poll() looks at the sockets again from then
};

}  // namespace kal::llp

#endif  // KAL_LLP_ABORT_LINGER_HPP
