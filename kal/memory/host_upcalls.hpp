/**
 * @file host_upcalls.hpp
 * @brief Memory management's upcalls for kVP modules: pinning and unpinning a process's pages and charging kVP
 *        memory to its account, against the per-process, per-user and host limits, with logging.
 */
#ifndef KAL_MEMORY_HOST_UPCALLS_HPP
#define KAL_MEMORY_HOST_UPCALLS_HPP

#include "rnicpi/ri_host.h"

namespace kal {

/**
 * @brief The kAL's upcalls for kVP modules: logging, and ri_vm_pin_range/unpin on the pin map of the context
 *        given as ri_rnic_open_params_t::host_ctx at Open RNIC.
 */
[[nodiscard]] const ri_host_ops_t &kal_host_ops() noexcept;

}  // namespace kal

#endif  // KAL_MEMORY_HOST_UPCALLS_HPP
