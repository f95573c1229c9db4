/**
 * @file host_upcalls.hpp
 * @brief Memory management's upcalls for kVP modules: pinning and unpinning a process's pages and charging kVP
 *        memory to its account, against the per-process, per-user and host limits, with logging.
 */
#ifndef KAL_MEMORY_HOST_UPCALLS_HPP
#define KAL_MEMORY_HOST_UPCALLS_HPP

#include <cstdint>
#include <memory>

#include "rnicpi/cpp/status.hpp"
#include "rnicpi/ri_host.h"

namespace kal {

struct Context;

/**
 * @brief The kAL's upcalls for kVP modules: logging, and ri_vm_pin_range/unpin on the pin map of the context
 *        given as ri_rnic_open_params_t::host_ctx at Open RNIC.
 */
[[nodiscard]] const ri_host_ops_t &kal_host_ops() noexcept;

/**
 * @brief Charges @p bytes of memory the kAL shares with @p ctx's process on its behalf (its ring of a same-host
 *        channel) to the process's account, against the limits kVP memory meets (the process's RLIMIT_MEMLOCK or
 *        the per-process limit, its user's and the host's budgets), and only while the process's pinned and charged
 *        memory stays within half its limit: the other half stays for what must be pinned. Returns a token that gives the bytes back when
 *        its last copy goes (it keeps the account alive until then), or ::RI_ENOSPC with the reason. A refusal is
 *        not counted among the pin refusals of `rdmactl limits`: nothing fails, the connection stays on the wire.
 */
[[nodiscard]] rdma::Expected<std::shared_ptr<void>> charge_shared_memory(Context &ctx, uint64_t bytes);

}  // namespace kal

#endif  // KAL_MEMORY_HOST_UPCALLS_HPP
