/**
 * @file event_route.hpp
 * @brief Event management of the kAL (OpenRDMA section 3): the handlers the kAL sets on each RNIC open, and the
 *        route by which a kVP's asynchronous and completion events reach the consumer that owns the resource.
 *
 * One EventRoute per RNIC open, shared with the open's CQs, is the context of the kAL's asynchronous event handler
 * (route_async) and completion event handler (route_completion). They run on the kVP's threads: they turn the
 * event into a record carrying the consumer's cookies and hand it to an EventSink (the verbs' delivery to a device
 * connection or a hosted consumer's callback), and they tell endpoint management when the kVP that runs a stream
 * ended its QP on its own.
 */
#ifndef KAL_EVENT_EVENT_ROUTE_HPP
#define KAL_EVENT_EVENT_ROUTE_HPP

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "krdma/abi.h"
#include "resource_table.hpp"
#include "rnicpi/ri_verbs.h"

namespace kal {

/** @brief Where event records go: the owner's device connection, or a hosted consumer's callback. Any thread. */
class EventSink {
public:
    virtual ~EventSink() = default;
    /** @brief Sends @p event to client @p client_id. */
    virtual void deliver(uint32_t client_id, const krdma_event &event) noexcept = 0;
    /**
     * @brief The kVP running a stream of client @p client_id ended its QP @p qp_num of RNIC open @p rnic with
     *        asynchronous event @p event_id; hands it to endpoint management and returns at once.
     */
    virtual void kvp_ended_qp(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id) noexcept = 0;
};

/** @brief Where a kVP's event handlers deliver: one route per RNIC open, shared with the open's CQs. */
struct EventRoute {
    EventSink *commands = nullptr;    /**< Event management's delivery. */
    uint32_t client_id = 0;           /**< The owner's device connection. */
    Handle rnic = 0;                  /**< The open's kAL handle, known once it is recorded. */
    uint32_t rnic_cookie = 0;         /**< The open's consumer cookie (krdma_event::cookie of its events). */
    std::string netdev;               /**< The RNIC's network device (for its link events). */
    bool kvp_streams = false;         /**< The open's kVP runs its QPs' streams (hosted consumer, offloading RNIC). */
    std::mutex mutex;                 /**< Guards ::cqs against the kVP's event threads. */
    /** @brief A CQ as its completion events name it. */
    struct Cq {
        Handle handle = 0;   /**< kAL handle. */
        uint32_t cookie = 0; /**< Consumer cookie. */
    };
    std::map<void *, Cq> cqs;         /**< kVP CQ -> its names, for completion events. */
};

/** @brief The kAL's asynchronous event handler (::ri_aeh_fn); @p ctx is the open's EventRoute. */
void route_async(void *ctx, ri_rnic_t rnic, const ri_async_event_t *e);
/** @brief The kAL's completion event handler (::ri_ceh_fn); @p ctx is the open's EventRoute. */
void route_completion(void *ctx, ri_rnic_t rnic, ri_cq_t cq);

}  // namespace kal

#endif  // KAL_EVENT_EVENT_ROUTE_HPP
