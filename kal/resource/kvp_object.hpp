/**
 * @file kvp_object.hpp
 * @brief The record of one kVP object in a caller's resource table, shared by the verbs (kal/syscall), endpoint
 *        management (kal/endpoint) and event management's routes.
 */
#ifndef KAL_RESOURCE_KVP_OBJECT_HPP
#define KAL_RESOURCE_KVP_OBJECT_HPP

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "adapter_manager.hpp"
#include "resource_table.hpp"
#include "rnicpi/ri_verbs.h"

namespace kal {

struct EventRoute;  // event management's (kal/event/event_route.hpp)

/**
 * @brief What a QP's connection (its endpoint) must hear from the verbs: the consumer moved the QP to another state.
 *        Owned by the QP's record and destroyed (abortively) before the QP itself.
 */
class QpLink : public Resource {
public:
    /** @brief The kVP accepted a consumer's Modify QP to @p state. */
    virtual void qp_state_changed(uint32_t state) = 0;
};

/** @brief One kVP object in a caller's table; its destructor releases it with the plain destroy verb. */
struct KvpObject : Resource {
    /** @brief A record of type @p t whose module's verbs are @p verbs. */
    KvpObject(ResourceType t, const ri_verbs_ops_t *verbs) : type(t), v(verbs) {}
    ~KvpObject() override;
    ResourceType type;                   /**< What it is. */
    const ri_verbs_ops_t *v;             /**< The kVP's verbs. */
    void *handle = nullptr;              /**< The kVP's object. */
    uint32_t cookie = 0;                 /**< The consumer's cookie (krdma_syscall::cookie of its create). */
    std::shared_ptr<EventRoute> route;   /**< RNIC opens and CQs. */
    uint32_t aeh_id = 0;                 /**< RNIC opens: the handler the kAL set at open. */
    RnicRef ref;                         /**< RNIC opens: keeps the instance attached (released after close_rnic). */
    RnicObjectCounts *counts = nullptr;  /**< The RNIC's counters (its open outlives every object below it). */
    std::unique_ptr<QpLink> link;        /**< QPs: the connection, if any (torn down first). */
    /** Every object of an open on an offloading RNIC (::RI_MODULE_OFFLOAD): its kVP runs the QPs' streams. */
    bool offload = false;
};

/** @brief The provider object behind @p h if it is a live @p type of @p table: one lookup, its error as the status. */
[[nodiscard]] inline rdma::Expected<KvpObject *> object_of(const ResourceTable &table, Handle h, ResourceType type) {
    auto r = table.get(h, type);
    if (!r) return r.error();
    return static_cast<KvpObject *>(*r);
}

/** @brief The RNIC open @p h belongs to: the root of its ownership tree. */
[[nodiscard]] inline Handle open_of(const ResourceTable &table, Handle h) noexcept {
    for (Handle p = table.parent(h); p != 0; p = table.parent(p)) h = p;
    return h;
}

}  // namespace kal

#endif  // KAL_RESOURCE_KVP_OBJECT_HPP
