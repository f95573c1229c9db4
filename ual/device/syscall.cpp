// ri_syscall over /dev/krdma.
#include "syscall.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "krdma/pins.hpp"

namespace ual {
namespace {

// The destroy op that undoes a create op, for when the owner cannot lock what the kAL pinned.
uint32_t undo_op(uint32_t op) {
    switch (op) {
        case RI_OPEN_RNIC: return RI_CLOSE_RNIC;
        case RI_ALLOC_PD: return RI_DEALLOC_PD;
        case RI_CREATE_CQ: return RI_DESTROY_CQ;
        case RI_CREATE_QP: return RI_DESTROY_QP;
        case RI_CREATE_SRQ: return RI_DESTROY_SRQ;
        case RI_REGISTER_MR:
        case RI_REGISTER_SHARED_MR:
        case RI_ALLOC_STAG: return RI_DEREGISTER_MR;
        case RI_ALLOC_MW: return RI_DEALLOC_MW;
        default: return 0;
    }
}

// Locks and unlocks what the kAL's reply says (krdma::apply_pins): 0 or the errno of the first failed lock.
int apply_reply_pins(const krdma_syscall &s) {
    return krdma::apply_pins({s.pins, std::min<size_t>(s.npins, KRDMA_SYSCALL_MAX_PINS)});
}

// The device request of @p call: RI_OK, or RI_EMSGSIZE for parameters beyond the device's limits.
ri_status_t build_request(const ri_syscall_t &call, krdma_syscall &s) noexcept {
    if (call.param_len > sizeof s.param || call.priv_in_len > sizeof s.priv || call.nfds_in > KRDMA_MAX_FDS) {
        return RI_EMSGSIZE;
    }
    s.op = call.op;
    s.object = call.object;
    for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) s.refs[i] = call.refs[i];
    s.param_len = call.param_len;
    if (call.param_len > 0) std::memcpy(s.param, call.param, call.param_len);
    s.priv_len = call.priv_in_len;
    if (call.priv_in_len > 0) std::memcpy(s.priv, call.priv_in, call.priv_in_len);
    return RI_OK;
}

}  // namespace

ri_status_t device_syscall(void *host_ctx, ri_syscall_t *call) noexcept {
    if (host_ctx == nullptr || call == nullptr) return RI_EINVAL;
    return forward_syscall(*static_cast<DeviceClient *>(host_ctx), *call, 0);
}

ri_status_t device_syscall_post(void *host_ctx, const ri_syscall_t *call) noexcept {
    if (host_ctx == nullptr || call == nullptr) return RI_EINVAL;
    return forward_syscall_post(*static_cast<DeviceClient *>(host_ctx), *call);
}

ri_status_t forward_syscall_post(DeviceClient &client, const ri_syscall_t &call) noexcept {
    if (call.size < sizeof(ri_syscall_t)) return RI_EINVAL;
    // Nothing can come back: only a QP modify (a create, destroy, resize or reregistration may answer with memory
    // to lock or unlock), no result, private reply or descriptor asked for, and no descriptor sent.
    if (call.op != RI_MODIFY_QP || call.result_cap != 0 || call.priv_out_cap != 0 || call.nfds_out_cap != 0 ||
        call.nfds_in != 0) {
        return RI_EINVAL;
    }
    krdma_syscall s{};
    if (ri_status_t rc = build_request(call, s); rc != RI_OK) return rc;
    try {
        DeviceClient::PostedFailure log_only;
        log_only.type = DeviceClient::kLogRefusal;
        auto sent = client.post(KRDMA_CMD_SYSCALL, {reinterpret_cast<const uint8_t *>(&s), sizeof s}, log_only);
        if (!sent) return sent.error().code();
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;  // nothing C++ crosses the upcall
    } catch (...) {
        return RI_EIO;
    }
}

ri_status_t forward_syscall(DeviceClient &client_ref, ri_syscall_t &call_ref, uint32_t cookie,
                            std::string *reason, uint32_t *number) noexcept {
    DeviceClient *client = &client_ref;
    ri_syscall_t *call = &call_ref;
    if (call->size < sizeof(ri_syscall_t)) return RI_EINVAL;
    krdma_syscall s{};
    if (undo_op(call->op) != 0) s.cookie = cookie;  // only a create names a new object
    if (ri_status_t rc = build_request(*call, s); rc != RI_OK) return rc;
    call->result_len = call->priv_out_len = call->nfds_out = 0;
    call->handle_out = 0;
    try {
        // The reply struct lands in `s` itself (the request is sent by then): no allocation, one copy.
        auto reply = client->call_into(KRDMA_CMD_SYSCALL, {reinterpret_cast<const uint8_t *>(&s), sizeof s},
                                       {reinterpret_cast<uint8_t *>(&s), sizeof s},
                                       std::span<const int>(call->fds_in, call->nfds_in));
        if (!reply) return reply.error().code();
        if (reply->status != RI_OK) {
            if (reason != nullptr) reason->assign(reply->why());
            return reply->status;
        }
        if (reply->payload_len != sizeof s) return RI_EPROTO;
        if (s.result_len > sizeof s.result || s.priv_len > sizeof s.priv) return RI_EPROTO;
        if (s.result_len > call->result_cap || s.priv_len > call->priv_out_cap || reply->nfds > call->nfds_out_cap) {
            return RI_EOVERFLOW;  // the caller's buffers cannot hold the reply
        }
        if (s.result_len > 0) std::memcpy(call->result, s.result, s.result_len);
        if (s.priv_len > 0) std::memcpy(call->priv_out, s.priv, s.priv_len);
        call->result_len = s.result_len;
        call->priv_out_len = s.priv_len;
        for (size_t i = 0; i < reply->nfds; ++i) call->fds_out[call->nfds_out++] = reply->fds[i].release();
        call->handle_out = s.handle_out;
        // Protocol 1.2: a create's reply names the new object's number (a QP's); a 1.1 kAL echoed the refs.
        if (number != nullptr) *number = undo_op(call->op) != 0 && client->abi_minor() >= 2 ? static_cast<uint32_t>(s.refs[0]) : 0;
        if (int e = apply_reply_pins(s); e != 0) {
            // The kAL accounted pages this process cannot lock: give the object back, as ibv_reg_mr fails when
            // RLIMIT_MEMLOCK is exceeded.
            if (uint32_t undo = undo_op(call->op); undo != 0 && s.handle_out != 0) {
                krdma_syscall u{};
                u.op = undo;
                u.object = s.handle_out;
                auto r = client->call_into(KRDMA_CMD_SYSCALL, {reinterpret_cast<const uint8_t *>(&u), sizeof u},
                                           {reinterpret_cast<uint8_t *>(&u), sizeof u});
                if (r && r->status == RI_OK && r->payload_len == sizeof u) (void)apply_reply_pins(u);
            }
            for (uint32_t i = 0; i < call->nfds_out; ++i) ::close(call->fds_out[i]);
            call->nfds_out = 0;
            call->handle_out = 0;
            return e == EPERM || e == EAGAIN ? RI_ENOMEM : e;
        }
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;  // nothing C++ crosses the upcall
    } catch (...) {
        return RI_EIO;
    }
}

}  // namespace ual
