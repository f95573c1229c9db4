/**
 * @file common.hpp
 * @brief What every part of the user IT-API library shares: the exported-symbol marker, the process's access
 *        layer, object creation and destruction under an IA.
 */
#ifndef ITAPI_COMMON_HPP
#define ITAPI_COMMON_HPP

#include <memory>

#include "mapping.hpp"
#include "objects.hpp"

/** Marks an IT-API entry point: C linkage, exported from libitapi (everything else stays hidden). */
#define ITAPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace itapi {

/** @brief The process's access layer, opened on first use and shared by every IA. */
rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer();

/** @brief Makes a @p T on @p ia with a handle (the caller holds ia->mutex); null when out of handles. */
template <class T>
T *make_child(Ia *ia) {
    auto owned = std::make_unique<T>(ia);
    T *raw = owned.get();
    if (HandleTable::instance().insert(raw) == 0) return nullptr;
    ia->objects.emplace(raw, std::move(owned));
    return raw;
}

/** @brief Retires @p o's handle and destroys it (the caller holds o's IA's mutex). */
void destroy_child(Ia *ia, Object *o);

/** @brief Frees everything on @p ia, dependants first (the caller holds ia->mutex). */
void destroy_all(Ia *ia);

}  // namespace itapi

#endif  // ITAPI_COMMON_HPP
