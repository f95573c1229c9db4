/**
 * @file mapping.hpp
 * @brief How IT-API's values map to the RNIC-PI's and the access layer's: statuses, memory privileges, DTO flags,
 *        work completions and connection/asynchronous events as IT-API events. Pure functions, shared by the user
 *        library and the kernel IT-API hosted in the kAL, so the two cannot disagree.
 */
#ifndef ITAPI_MAPPING_HPP
#define ITAPI_MAPPING_HPP

#include <cstdint>
#include <string>

#include <it_api.h>

#include "rnicpi/rnicpi.h"
#include "ual/events.hpp"

namespace itapi {

/** @brief The IT-API status for RNIC-PI/errno status @p code; @p fallback for codes with no general meaning. */
it_status_t from_ri(int code, it_status_t fallback) noexcept;

/** @brief Whether @p privs holds only IT-API privilege bits. */
bool valid_privs(uint32_t privs) noexcept;
/** @brief The ::ri_access rights for IT-API privileges @p privs (remote write implies local write, as in verbs). */
uint32_t access_of(uint32_t privs) noexcept;
/** @brief The IT-API privileges for ::ri_access rights @p access. */
it_mem_priv_t privs_of(uint32_t access) noexcept;

/** @brief Every DTO flag IT-API defines. */
inline constexpr uint32_t kAllDtoFlags = IT_COMPLETION_FLAG | IT_NOTIFY_FLAG | IT_SOLICITED_WAIT_FLAG |
                                         IT_BARRIER_FENCE_FLAG | IT_UNLINK_FENCE_FLAG | IT_UNLINK_LOCAL_SINK |
                                         IT_COALESCE_WR_FLAG;
/** @brief The ::ri_send_flags for IT-API DTO flags @p flags. */
inline uint32_t send_flags_of(uint32_t flags) noexcept {
    uint32_t f = 0;
    if (flags & IT_COMPLETION_FLAG) f |= RI_SEND_SIGNALED;
    if (flags & IT_BARRIER_FENCE_FLAG) f |= RI_SEND_READ_FENCE;
    if (flags & IT_UNLINK_FENCE_FLAG) f |= RI_SEND_LOCAL_FENCE;
    return f;
}

/** @brief The IT-API DTO status of work completion status @p status (::ri_wc_status). */
it_dto_status_t dto_status_of(uint32_t status) noexcept;
/** @brief The IT-API event number of a work completion of opcode @p opcode (::ri_wc_opcode). */
it_event_type_t dto_event_of(uint32_t opcode) noexcept;

/** @brief Fills @p out with the DTO completion event of @p wc, delivered on @p evd. */
inline void dto_event(const ri_wc_t &wc, it_evd_handle_t evd, it_event_t &out) noexcept {
    it_dto_cmpl_event_t &d = out.dto_cmpl;
    d.event_number = dto_event_of(wc.opcode);
    d.evd = evd;
    d.ep = reinterpret_cast<it_ep_handle_t>(wc.qp_context);
    d.cookie = wc.wr_id;
    d.dto_status = dto_status_of(wc.status);
    d.transferred_length = wc.byte_len;
    d.unlinked_mr_handle = IT_NULL_HANDLE;
}

/** @brief Fills @p out with the IT-API event of a connection request (cm_request stream) delivered on @p evd. */
void conn_request_event(const ual::Event &e, it_evd_handle_t evd, it_event_t &out) noexcept;
/** @brief Fills @p out with the IT-API event of an endpoint's connection event (cm_message) delivered on @p evd. */
void connection_event(const ual::Event &e, it_evd_handle_t evd, it_event_t &out) noexcept;
/** @brief The EP state a connection event (ual::CmEventId) leaves an endpoint in. */
it_ep_state_rc_t state_after(uint32_t cm_event) noexcept;
/** @brief The affiliated IT-API event number of asynchronous event @p id (::ri_event_id). */
it_event_type_t affiliated_event_of(uint32_t id) noexcept;
/** @brief The unaffiliated IT-API event number of asynchronous event @p id. */
it_event_type_t unaffiliated_event_of(uint32_t id) noexcept;

/** @brief The IT-API stream of an event number (its stream bits). */
inline it_event_type_t stream_of(uint32_t event_number) noexcept {
    return static_cast<it_event_type_t>(event_number & IT_EVENT_STREAM_MASK);
}
/** @brief The access layer's stream for IT-API stream @p s; false for a stream it has none for. */
bool ual_stream_of(it_event_type_t s, ual::EventStream &out) noexcept;

/** @brief An it_net_addr_t as text (IPv4/IPv6); empty for another address type. */
std::string address_text(const it_net_addr_t &a);
/** @brief An ri_net_addr_t as an it_net_addr_t. */
it_net_addr_t net_addr_of(const ri_net_addr_t &a) noexcept;

}  // namespace itapi

#endif  // ITAPI_MAPPING_HPP
