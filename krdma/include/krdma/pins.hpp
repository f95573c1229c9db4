/**
 * @file pins.hpp
 * @brief Carrying out the kAL's page-locking instructions (krdma_pin_op) in the process that owns the pages.
 *
 * The kAL decides what is pinned (reference counts across RNICs, limits); the owner of the memory locks and unlocks
 * the pages: a consumer process's uAL after a SYSCALL reply, and the kAL itself for consumers hosted in it.
 */
#ifndef KRDMA_PINS_HPP
#define KRDMA_PINS_HPP

#include <cstdint>
#include <span>

#include "krdma/abi.h"

namespace krdma {

/** @brief Whether every page of [@p addr, @p addr + @p length) is mapped in this process (false for length 0). */
[[nodiscard]] bool mapped(uint64_t addr, uint64_t length) noexcept;

/**
 * @brief Locks and unlocks as @p ops say, in order. Returns 0, or the errno of the first lock that failed: EFAULT
 *        for pages that are not mapped (mlock says ENOMEM for those and for RLIMIT_MEMLOCK alike; mincore tells them
 *        apart, and in AddressSanitizer builds, whose mlock does nothing, it alone decides), ENOMEM or EPERM over
 *        the caller's locking limit. A failed unlock is ignored: the pages just stay resident.
 */
[[nodiscard]] int apply_pins(std::span<const krdma_pin_op> ops) noexcept;

}  // namespace krdma

#endif  // KRDMA_PINS_HPP
