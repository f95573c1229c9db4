/**
 * @file requests.hpp
 * @brief Connection requests the consumer has seen and not yet decided: it_ep_accept, it_reject and it_handoff
 *        name a request by its identifier alone, so the library keeps which IA it arrived on (and the request
 *        itself, for a handoff) until the consumer decides or frees the IA.
 */
#ifndef ITAPI_REQUESTS_HPP
#define ITAPI_REQUESTS_HPP

#include <optional>

#include "objects.hpp"

namespace itapi {

/** @brief A pending request. */
struct PendingRequest {
    Ia *ia = nullptr;  /**< The IA it arrived on. */
    ual::Event event;  /**< The request as the access layer delivered it. */
};

/** @brief Records request @p e (cm_request stream) as seen on @p ia. */
void remember_request(const ual::Event &e, Ia *ia);
/** @brief The pending request @p id, removed; nothing when unknown. */
std::optional<PendingRequest> take_request(uint64_t id);
/** @brief Puts @p r back (an accept that failed before the kAL took it). */
void restore_request(uint64_t id, PendingRequest r);
/** @brief Forgets every request of @p ia (it is being freed). */
void forget_requests(const Ia *ia);
/** @brief The IT-API event of access-layer event @p e delivered on SEVD @p sevd (evd.cpp). */
void to_it_event(const ual::Event &e, const struct Evd &sevd, it_event_t &out);

}  // namespace itapi

#endif  // ITAPI_REQUESTS_HPP
