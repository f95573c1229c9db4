// Event management: a kVP's asynchronous and completion events routed to the consumer that owns the resource.
// These handlers run on the kVP's threads.
#include "event_route.hpp"

#include "endpoint_fsm.hpp"

namespace kal {

void route_async(void *ctx, ri_rnic_t, const ri_async_event_t *e) {
    auto *route = static_cast<EventRoute *>(ctx);
    if (route == nullptr || e == nullptr) return;
    krdma_event ev{};
    ev.event = KRDMA_EVENT_ASYNC;
    ev.object = route->rnic;
    ev.cookie = route->rnic_cookie;
    ev.detail = e->detail;
    ev.context = e->context;
    ev.resource_id = e->resource_id;
    ev.resource_type = e->resource_type;
    ev.event_id = e->event_id;
    // A kVP that ends a hosted client's QP (or any QP of an offloading RNIC) on its own ran the stream itself:
    // endpoint management must hear it from here, since no uVP will move the QP for it. Handed over before the
    // owner hears the event, so whatever the owner does about it reaches the serving thread after the endpoint has
    // moved.
    if (e->resource_type == RI_RES_QP && route->kvp_streams &&
        input_of_async_event(e->event_id).has_value()) {
        route->commands->kvp_ended_qp(route->client_id, route->rnic, static_cast<uint32_t>(e->resource_id),
                                      e->event_id);
    }
    route->commands->deliver(route->client_id, ev);
}

void route_completion(void *ctx, ri_rnic_t, ri_cq_t cq) {
    auto *route = static_cast<EventRoute *>(ctx);
    if (route == nullptr) return;
    krdma_event ev{};
    ev.event = KRDMA_EVENT_COMPLETION;
    {
        std::lock_guard lock(route->mutex);
        auto it = route->cqs.find(cq);
        if (it == route->cqs.end()) return;  // a CQ the kAL does not know (or no longer): nobody to tell
        ev.object = it->second.handle;
        ev.cookie = it->second.cookie;
    }
    route->commands->deliver(route->client_id, ev);
}

}  // namespace kal
