/**
 * @file rights.hpp
 * @brief What a caller of the device could do itself: the yardstick for everything krdmad, running as root, does on
 *        its behalf (least privilege; see docs/security.md).
 *
 * The kernel checks a process's own system calls against its credentials at the time of the call. krdmad does the
 * same for the calls it makes for a client: it reads the caller's effective capabilities and RLIMIT_MEMLOCK from
 * /proc when a request needs them (binding a port, pinning memory), not once at connect, so a process that dropped
 * its privileges after opening the device has dropped them for krdmad too. A caller is identified by its pid and the
 * start time of that pid (SO_PEERCRED gives the pid at connect): a pid reused by another process, or a caller that
 * has gone, has no rights at all.
 */
#ifndef KAL_DEVICE_RIGHTS_HPP
#define KAL_DEVICE_RIGHTS_HPP

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kal {

/** @brief Linux capability numbers krdmad checks (linux/capability.h). */
enum class Capability : unsigned {
    net_bind_service = 10, /**< CAP_NET_BIND_SERVICE: bind ports below ip_unprivileged_port_start. */
    ipc_lock = 14,         /**< CAP_IPC_LOCK: lock memory beyond RLIMIT_MEMLOCK. */
};

/** @brief A caller's rights, read from /proc at the time of a request. */
struct Rights {
    bool known = false;           /**< The process could be read and is the one that connected. */
    uint64_t cap_effective = 0;   /**< Effective capability set (empty when in another user namespace). */
    uint64_t memlock_limit = 0;   /**< Soft RLIMIT_MEMLOCK in bytes (UINT64_MAX: unlimited). */
    /** @brief Whether the caller holds @p cap in krdmad's user namespace. */
    [[nodiscard]] bool has(Capability cap) const noexcept {
        return known && (cap_effective >> static_cast<unsigned>(cap) & 1u) != 0;
    }
};

/**
 * @brief The start time of process @p pid (clock ticks since boot, /proc/PID/stat field 22), which tells a process
 *        from a later one given the same pid; nullopt when it cannot be read (the process has gone).
 */
[[nodiscard]] std::optional<uint64_t> process_start_time(pid_t pid);

/**
 * @brief Whether process @p pid is in krdmad's own pid namespace, so that its number means the same to every other
 *        process krdmad found there (false when it cannot be told).
 */
[[nodiscard]] bool in_own_pid_namespace(pid_t pid);

/**
 * @brief The rights of process @p pid, provided it is still the process that started at @p start_time (0: do not
 *        check). Capabilities count only when the process shares krdmad's user namespace: a root of a container's
 *        namespace is not root here.
 */
[[nodiscard]] Rights rights_of(pid_t pid, uint64_t start_time);

/**
 * @brief The first port an unprivileged process may bind in krdmad's network namespace
 *        (net.ipv4.ip_unprivileged_port_start, which governs IPv6 too; 1024 when it cannot be read).
 */
[[nodiscard]] uint32_t unprivileged_port_start();

/**
 * @brief Whether binding port @p port needs CAP_NET_BIND_SERVICE: a nonzero port below unprivileged_port_start().
 *        Port 0 (any free port) never does.
 */
[[nodiscard]] bool privileged_port(uint32_t port);

}  // namespace kal

#endif  // KAL_DEVICE_RIGHTS_HPP
