/**
 * @file llp_settings.hpp
 * @brief LLP management's settings (krdmad's "llp" configuration section): the deadlines of connection setup and
 *        how a connection in RDMA mode notices a dead peer or path.
 *
 * TCP alone retransmits unacknowledged data for many minutes (tcp_retries2) and never probes an idle connection,
 * so an RDMA connection whose peer host vanished or whose link went down would stay in RTS that long, its work
 * requests neither completing nor flushing. The kAL therefore sets TCP_USER_TIMEOUT and keepalive on every
 * connection's socket before it hands the socket to the consumer: unacknowledged data older than the user timeout,
 * or an idle connection whose keepalive probes go unanswered, fails the socket (ETIMEDOUT), and the QP goes to
 * ERROR and flushes like for a reset.
 */
#ifndef KAL_LLP_LLP_SETTINGS_HPP
#define KAL_LLP_LLP_SETTINGS_HPP

#include <chrono>
#include <string>
#include <cstdint>

#include "rnicpi/cpp/status.hpp"

namespace kal {

/**
 * @brief The same-host path (krdmad.json "llp": {"same_host": {...}}): when the kAL holds both ends of one TCP
 *        connection between two consumer processes whose RNICs take a same-host channel (::RI_CAP_SAME_HOST), it
 *        pairs their QPs with a shared-memory channel at the RDMA-mode transition (rnicpi/ri_channel.h).
 */
struct SameHostSettings {
    bool enabled = true;          /**< false: every connection stays on the wire. */
    uint64_t ring_bytes = 524288; /**< Bytes of each direction's ring: a power of two from 4 KiB to 1 GiB. */
    /**
     * A directory the kALs of one host (one per network namespace, as in containers joined by veth pairs) share:
     * each listens there, and a kAL about to answer a connection request offers its socket to the others, which
     * pair it with the other end of the connection when they hold it (proven by its TCP sequence numbers).
     * Empty (the default): only connections whose two ends this kAL holds are paired.
     */
    std::string rendezvous;
    bool operator==(const SameHostSettings &) const = default;
};

/** @brief Timeouts and limits of connection setup, and the liveness of established connections. */
struct LlpSettings {
    std::chrono::milliseconds connect_timeout{10000};  /**< CONNECT without its own: TCP connect plus MPA. */
    std::chrono::milliseconds request_timeout{5000};   /**< Passive side: until the peer's MPA request is in. */
    std::chrono::milliseconds accept_timeout{30000};   /**< Until the consumer accepts or rejects a request. */
    uint32_t max_pending = 256;                        /**< Connection requests per listen point. */
    /** Established connections: TCP_USER_TIMEOUT, the longest data may stay unacknowledged (0: the host's). */
    std::chrono::milliseconds user_timeout{60000};
    /** Established connections: idle time before the first keepalive probe (TCP_KEEPIDLE); 0: no keepalive. */
    std::chrono::seconds keepalive_idle{60};
    std::chrono::seconds keepalive_interval{10};  /**< Between keepalive probes (TCP_KEEPINTVL). */
    uint32_t keepalive_count = 6;                  /**< Unanswered probes that end the connection (TCP_KEEPCNT). */
    SameHostSettings same_host;                    /**< The same-host path between consumers of this kAL. */
    bool peer_detection = true;                    /**< The sockets layer's TCP peer detection (PEER_MARKS). */
    bool operator==(const LlpSettings &) const = default;
};

namespace llp {

/**
 * @brief Sets @p s's liveness options (TCP_USER_TIMEOUT, SO_KEEPALIVE and its timers) on the connected TCP socket
 *        @p fd. The options belong to the socket, so they hold in every process that shares it.
 */
[[nodiscard]] rdma::Expected<void> set_liveness(int fd, const LlpSettings &s);

}  // namespace llp
}  // namespace kal

#endif  // KAL_LLP_LLP_SETTINGS_HPP
