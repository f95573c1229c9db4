/**
 * @file tcp_stats.hpp
 * @brief LLP management: TCP statistics for the MIB view, per connection (TCP_INFO) and for the host (the RFC 4022
 *        TCP group from /proc/net/snmp, plus a few Linux extensions from /proc/net/netstat).
 */
#ifndef KAL_LLP_TCP_STATS_HPP
#define KAL_LLP_TCP_STATS_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rnicpi/cpp/status.hpp"

namespace kal::llp {

/**
 * @brief One connection's TCP state and counters, from TCP_INFO. Times in microseconds. Fields a running kernel
 *        does not report (an older one returns a shorter structure) read 0.
 */
struct TcpInfo {
    uint8_t state = 0;           /**< TCP_ESTABLISHED, TCP_LISTEN, ... (see tcp_state_name()). */
    uint32_t rtt_us = 0;         /**< Smoothed round-trip time. */
    uint32_t rttvar_us = 0;      /**< Round-trip time variation. */
    uint32_t min_rtt_us = 0;     /**< Smallest round-trip time seen. */
    uint32_t rto_us = 0;         /**< Retransmission time-out. */
    uint32_t snd_mss = 0;        /**< Send MSS. */
    uint32_t rcv_mss = 0;        /**< Receive MSS estimate. */
    uint32_t pmtu = 0;           /**< Path MTU. */
    uint32_t snd_cwnd = 0;       /**< Congestion window, in segments. */
    uint32_t snd_ssthresh = 0;   /**< Slow-start threshold, in segments. */
    uint32_t unacked = 0;        /**< Segments in flight. */
    uint32_t lost = 0;           /**< Segments considered lost now. */
    uint32_t retransmits = 0;    /**< Consecutive time-outs of the current segment. */
    uint32_t probes = 0;         /**< Unanswered zero-window or keepalive probes. */
    uint32_t total_retrans = 0;  /**< Segments retransmitted over the connection's life. */
    uint64_t bytes_sent = 0;     /**< Payload bytes sent, retransmissions included (RFC 4898 HCDataOctetsOut). */
    uint64_t bytes_retrans = 0;  /**< Payload bytes retransmitted (RFC 4898 OctetsRetrans). */
    uint64_t bytes_acked = 0;    /**< Payload bytes acknowledged by the peer (RFC 4898 HCThruOctetsAcked). */
    uint64_t bytes_received = 0; /**< Payload bytes received in order (RFC 4898 HCThruOctetsReceived). */
    uint32_t segs_out = 0;       /**< Segments sent (RFC 4898 SegsOut). */
    uint32_t segs_in = 0;        /**< Segments received (RFC 4898 SegsIn). */
    uint32_t data_segs_out = 0;  /**< Segments with payload sent. */
    uint32_t data_segs_in = 0;   /**< Segments with payload received. */
    uint32_t delivered = 0;      /**< Segments delivered (acknowledged), retransmissions counted once. */
    uint64_t delivery_rate = 0;  /**< Latest delivery rate estimate, bytes per second. */
    uint32_t snd_wnd = 0;        /**< The peer's advertised receive window, bytes. */
};

/** @brief TCP_INFO of socket @p fd; the errno of getsockopt() (::RI_EBADF, EOPNOTSUPP for a non-TCP socket...). */
[[nodiscard]] rdma::Expected<TcpInfo> tcp_info_of(int fd);
/** @brief "ESTABLISHED", "LISTEN", ... as netstat names the states; "UNKNOWN" for a value it does not know. */
[[nodiscard]] std::string_view tcp_state_name(uint8_t state) noexcept;

/** @brief One counter of the host's TCP MIB. */
struct MibCounter {
    std::string name; /**< RFC 4022 object name without its "tcp" prefix ("ActiveOpens"), or a Linux TcpExt name. */
    int64_t value = 0; /**< Its value (CurrEstab is a gauge; the others count up and wrap as the kernel's do). */
    /** @brief Field-wise equality. */
    friend bool operator==(const MibCounter &, const MibCounter &) = default;
};

/**
 * @brief Builds the host's TCP MIB view from the texts of /proc/net/snmp and /proc/net/netstat: the RFC 4022
 *        counters ActiveOpens, PassiveOpens, AttemptFails, EstabResets, CurrEstab, InSegs, OutSegs, RetransSegs,
 *        InErrs, OutRsts in that order, all required; then those of TCPTimeouts, TCPLossProbes, TCPFastRetrans,
 *        TCPSlowStartRetrans, TCPLostRetransmit, TCPAbortOnTimeout, TCPAbortOnData that the kernel has.
 *
 * Strict: each section is a header line and a value line with the same prefix and the same number of fields, every
 * value a whole decimal number, no section or name twice. ::RI_EPROTO, naming the line, otherwise.
 */
[[nodiscard]] rdma::Expected<std::vector<MibCounter>> parse_tcp_counters(std::string_view snmp,
                                                                         std::string_view netstat);
/** @brief parse_tcp_counters() of this host's /proc/net/snmp and /proc/net/netstat (of the caller's namespace). */
[[nodiscard]] rdma::Expected<std::vector<MibCounter>> host_tcp_counters();

}  // namespace kal::llp

#endif  // KAL_LLP_TCP_STATS_HPP
