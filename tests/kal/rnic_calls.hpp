// Test helper: opening an RNIC the way a uVP does, an ri_syscall through the uAL's upcall.
#ifndef TESTS_KAL_RNIC_CALLS_HPP
#define TESTS_KAL_RNIC_CALLS_HPP

#include <cstring>

#include "syscall.hpp"

namespace testutil {

/**
 * @brief One ri_syscall over @p c as a uVP makes it (the uAL applies the kAL's pin instructions): op @p op on
 *        object @p object with @p param; the result into @p result, the new object's handle into @p handle_out.
 */
inline ri_status_t sys(ual::DeviceClient &c, uint32_t op, uint64_t object, const void *param, uint32_t param_len,
                       void *result = nullptr, uint32_t result_cap = 0, uint64_t *handle_out = nullptr) {
    ri_syscall_t call{};
    call.size = sizeof call;
    call.op = op;
    call.object = object;
    call.param = param;
    call.param_len = param_len;
    call.result = result;
    call.result_cap = result_cap;
    const ri_status_t rc = ual::device_syscall(&c, &call);
    if (handle_out != nullptr) *handle_out = call.handle_out;
    return rc;
}

/** @brief RI_OPEN_RNIC of RNIC @p name over @p c; the kAL's handle in @p handle (0 on failure). */
inline ri_status_t open_rnic(ual::DeviceClient &c, const char *name, uint64_t *handle = nullptr) {
    ri_rnic_open_params_t p{};
    std::strncpy(p.instance_name, name, sizeof p.instance_name - 1);
    ri_syscall_t call{};
    call.size = sizeof call;
    call.op = RI_OPEN_RNIC;
    call.param = &p;
    call.param_len = sizeof p;
    ri_status_t rc = ual::device_syscall(&c, &call);
    if (handle != nullptr) *handle = call.handle_out;
    return rc;
}

}  // namespace testutil

#endif  // TESTS_KAL_RNIC_CALLS_HPP
