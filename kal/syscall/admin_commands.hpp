/**
 * @file admin_commands.hpp
 * @brief System call management: the device commands that report on and administer the host's RNICs and kVP
 *        modules.
 *
 * LIST_RNICS and LIST_MODULES are open to every caller, and so is CONTROL_RNIC with the empty request `{}` (it
 * changes nothing: the provider's state and tunables, for `rdmactl show`). ATTACH_RNIC, DETACH_RNIC, any other
 * CONTROL_RNIC, LOAD_MODULE and UNLOAD_MODULE need uid 0 or membership in krdmad's admin group; anyone else gets
 * ::RI_EPERM and nothing changes.
 * Errors of the adapter manager reach the caller unchanged.
 */
#ifndef KAL_SYSCALL_ADMIN_COMMANDS_HPP
#define KAL_SYSCALL_ADMIN_COMMANDS_HPP

#include <sys/types.h>

#include <optional>
#include <string>

#include "adapter_manager.hpp"
#include "server.hpp"

namespace kal {

/** @brief Who may administer besides root. */
struct AdminPolicy {
    std::optional<gid_t> admin_gid;  /**< The admin group's gid; none: root only. */
};

/**
 * @brief The policy of krdmad's configured admin group @p group (empty: root only), resolved once at start;
 *        ::RI_ENOENT with a message naming the group when this host has no such group.
 */
[[nodiscard]] rdma::Expected<AdminPolicy> resolve_admin_policy(const std::string &group);

/**
 * @brief True when @p peer may administer under @p policy: uid 0, a primary gid equal to the admin group, or the
 *        admin group among the groups of the peer uid's passwd entry.
 */
[[nodiscard]] bool may_administer(const Peer &peer, const AdminPolicy &policy);

/** @brief Registers the listing and administration commands on @p server, served by @p adapters under @p policy. */
void register_admin_commands(DeviceServer &server, AdapterManager &adapters, AdminPolicy policy = {});

}  // namespace kal

#endif  // KAL_SYSCALL_ADMIN_COMMANDS_HPP
