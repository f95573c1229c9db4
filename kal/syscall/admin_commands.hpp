/**
 * @file admin_commands.hpp
 * @brief System call management: the device commands that report on and administer the host's RNICs.
 */
#ifndef KAL_SYSCALL_ADMIN_COMMANDS_HPP
#define KAL_SYSCALL_ADMIN_COMMANDS_HPP

#include "adapter_manager.hpp"
#include "server.hpp"

namespace kal {

/** @brief Registers LIST_RNICS (open to every caller) on @p server, answered from @p adapters. */
void register_admin_commands(DeviceServer &server, AdapterManager &adapters);

}  // namespace kal

#endif  // KAL_SYSCALL_ADMIN_COMMANDS_HPP
