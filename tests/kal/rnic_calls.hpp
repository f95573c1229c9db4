// Test helper: opening an RNIC the way a uVP does, an ri_syscall through the uAL's upcall.
#ifndef TESTS_KAL_RNIC_CALLS_HPP
#define TESTS_KAL_RNIC_CALLS_HPP

#include <cstring>

#include "syscall.hpp"

namespace testutil {

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
