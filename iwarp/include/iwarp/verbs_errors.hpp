/**
 * @file verbs_errors.hpp
 * @brief How a Terminate reads in the RNIC-PI's words, the same for every provider that runs iWARP with this
 *        library: the detail word of events and completions, which asynchronous events a Terminate raises, and the
 *        status of the request it failed.
 *
 * A consumer of softrnic and one of an offloading RNIC must see the same completion and the same events for the same
 * failure on the wire; these are the one place that decides them.
 */
#ifndef IWARP_VERBS_ERRORS_HPP
#define IWARP_VERBS_ERRORS_HPP

#include <cstdint>

#include "iwarp/wire.hpp"
#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace iwarp {

/**
 * @brief The Terminate word of ri_async_event_t::detail and ri_wc_t::vendor_err: the Terminate control field's
 *        layer/etype byte in bits 15..8 and the error code in bits 7..0 (0x2002: the MPA CRC error).
 */
[[nodiscard]] constexpr uint32_t term_word(TermCode c) noexcept {
    return static_cast<uint32_t>(c.layer_etype()) << 8 | c.code;
}

/** @brief True for protection errors (RFC 5040 remote protection, RFC 5041 tagged buffer), not protocol errors. */
[[nodiscard]] constexpr bool is_access_error(TermCode c) noexcept {
    if (c.etype != 0x1) return false;
    if (c.layer == static_cast<uint8_t>(Layer::rdmap)) return true;
    return c.layer == static_cast<uint8_t>(Layer::ddp) && c != term::kDdpTaggedInvalidVersion;
}

/** @brief The status of the request (the oldest in flight) that a peer's Terminate with @p c failed. */
[[nodiscard]] constexpr uint32_t status_of_peer_terminate(TermCode c) noexcept {
    if (c.layer == static_cast<uint8_t>(Layer::llp)) return RI_WC_LLP_ERR;
    if (is_access_error(c)) return RI_WC_REM_ACCESS_ERR;
    if (c.layer == static_cast<uint8_t>(Layer::ddp) && c.etype == 0x2) return RI_WC_REM_INV_REQ_ERR;
    return RI_WC_REM_OP_ERR;
}

/**
 * @brief The second event beside RI_AE_QP_TERMINATE_SENT for a Terminate this side sent because of @p c: a
 *        local access error for a protection error of the peer's request, a protocol error otherwise.
 */
[[nodiscard]] constexpr uint32_t event_of_sent_terminate(TermCode c) noexcept {
    return is_access_error(c) ? RI_AE_QP_LOCAL_ACCESS_ERROR : RI_AE_QP_PROTOCOL_ERROR;
}

/** @brief The status of the receive being placed when this side terminated with @p c (others are flushed). */
[[nodiscard]] constexpr uint32_t receive_status_of_sent_terminate(TermCode c) noexcept {
    return c == term::kDdpMessageTooLong ? uint32_t{RI_WC_LOC_LEN_ERR} : uint32_t{RI_WC_WR_FLUSH_ERR};
}

}  // namespace iwarp

#endif  // IWARP_VERBS_ERRORS_HPP
