/**
 * @file syscall.hpp
 * @brief The uAL's implementation of the ri_syscall upcall (ri_host_ops_t::syscall): a uVP's privileged verb,
 *        carried unchanged over the device to the kAL and the kVP, and the reply carried back.
 */
#ifndef UAL_DEVICE_SYSCALL_HPP
#define UAL_DEVICE_SYSCALL_HPP

#include "client.hpp"
#include "rnicpi/rnicpi.h"

namespace ual {

/**
 * @brief ri_syscall over the device. @p host_ctx is the DeviceClient of the RNIC open. Returns the kVP's (or the
 *        kAL's) status unchanged; ::RI_EMSGSIZE for parameters or private data over the RNIC-PI limits, ::RI_ENODEV
 *        when krdmad is gone. Descriptors returned are owned by the caller.
 */
ri_status_t device_syscall(void *host_ctx, ri_syscall_t *call) noexcept;

/**
 * @brief One ri_syscall @p call over @p client; a create op carries @p cookie (krdma_syscall::cookie), which the kAL
 *        keeps with the object it makes and repeats in the object's event records. A refusal's reason in the kAL's
 *        words goes to @p reason when given (the RNIC-PI upcall itself returns only the status), and a created QP's
 *        number to @p number when the kAL reports it (protocol 1.2; else 0). What device_syscall() does.
 */
ri_status_t forward_syscall(DeviceClient &client, ri_syscall_t &call, uint32_t cookie,
                            std::string *reason = nullptr, uint32_t *number = nullptr) noexcept;

/**
 * @brief ri_syscall_post over the device (ri_host_ops_t::syscall_post): @p call is sent as a quiet request and not
 *        waited for; a refusal is logged. ::RI_EINVAL for an op but ::RI_MODIFY_QP or a call that asks for anything back,
 *        ::RI_EMSGSIZE as device_syscall(), ::RI_ENODEV when krdmad is gone.
 */
ri_status_t device_syscall_post(void *host_ctx, const ri_syscall_t *call) noexcept;

/** @brief What device_syscall_post() does, over @p client. */
ri_status_t forward_syscall_post(DeviceClient &client, const ri_syscall_t &call) noexcept;

}  // namespace ual

#endif  // UAL_DEVICE_SYSCALL_HPP
