/**
 * @file reload.hpp
 * @brief krdmad's configuration reload (SIGHUP, `systemctl reload krdmad`): what can change while consumers run.
 *
 * The log level, the kVP modules and the RNICs change live. An RNIC that is removed or changed (provider, address,
 * netdev or options) is detached, and a changed one attached again with its new settings; an RNIC consumers hold
 * open is not detached, and stays as it was. A module is unloaded once no RNIC uses it. Everything else (device
 * path, provider directory, admin group, limits, LLP settings, consumer modules) is read at start only: a change
 * there is reported as refused, with the restart that would apply it. Nothing a live consumer holds is taken away.
 */
#ifndef KAL_CONFIG_RELOAD_HPP
#define KAL_CONFIG_RELOAD_HPP

#include <string>
#include <vector>

#include "adapter_manager.hpp"
#include "config.hpp"

namespace kal {

/** @brief What a reload did, one sentence per change, for the log. */
struct ReloadReport {
    std::vector<std::string> applied; /**< Changes made, e.g. "attached RNIC sr1 (softrnic, 10.0.0.2)". */
    std::vector<std::string> refused; /**< Changes not made, each with its reason. */
};

/**
 * @brief Moves the running daemon from @p running toward @p wanted through @p adapters and sets the log level;
 *        @p running becomes what now runs (the wanted settings where they were applied, the old ones where not).
 *        Detaches come first, then unloads, loads and attaches, so an RNIC can move to a new address or provider.
 */
[[nodiscard]] ReloadReport reload(Config &running, const Config &wanted, AdapterManager &adapters);

}  // namespace kal

#endif  // KAL_CONFIG_RELOAD_HPP
