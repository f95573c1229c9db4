/**
 * @file same_host_hooks.hpp
 * @brief What endpoint management's same-host pairing needs of system call and memory management: a QP's RNIC
 *        open from its owner's table, and its owner's process account for the channel's memory.
 */
#ifndef KAL_SYSCALL_SAME_HOST_HOOKS_HPP
#define KAL_SYSCALL_SAME_HOST_HOOKS_HPP

#include "endpoint.hpp"
#include "verb_commands.hpp"

namespace kal {

/** @brief The same-host hooks of Endpoints over @p verbs' clients (serving thread; @p verbs outlives them). */
[[nodiscard]] SameHostHooks same_host_hooks(VerbCommands &verbs);

}  // namespace kal

#endif  // KAL_SYSCALL_SAME_HOST_HOOKS_HPP
