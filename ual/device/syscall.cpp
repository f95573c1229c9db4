// ri_syscall over /dev/krdma.
#include "syscall.hpp"

#include <cstring>

namespace ual {

ri_status_t device_syscall(void *host_ctx, ri_syscall_t *call) noexcept {
    if (host_ctx == nullptr || call == nullptr || call->size < sizeof(ri_syscall_t)) return RI_EINVAL;
    auto *client = static_cast<DeviceClient *>(host_ctx);
    krdma_syscall s{};
    if (call->param_len > sizeof s.param || call->priv_in_len > sizeof s.priv || call->nfds_in > KRDMA_MAX_FDS) {
        return RI_EMSGSIZE;
    }
    s.op = call->op;
    s.object = call->object;
    for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) s.refs[i] = call->refs[i];
    s.param_len = call->param_len;
    if (call->param_len > 0) std::memcpy(s.param, call->param, call->param_len);
    s.priv_len = call->priv_in_len;
    if (call->priv_in_len > 0) std::memcpy(s.priv, call->priv_in, call->priv_in_len);
    call->result_len = call->priv_out_len = call->nfds_out = 0;
    call->handle_out = 0;
    try {
        auto reply = client->call(KRDMA_CMD_SYSCALL, {reinterpret_cast<const uint8_t *>(&s), sizeof s},
                                  std::span<const int>(call->fds_in, call->nfds_in));
        if (!reply) return reply.error().code();
        if (reply->status != RI_OK) return reply->status;
        if (reply->payload.size() != sizeof s) return RI_EPROTO;
        std::memcpy(&s, reply->payload.data(), sizeof s);
        if (s.result_len > sizeof s.result || s.priv_len > sizeof s.priv) return RI_EPROTO;
        if (s.result_len > call->result_cap || s.priv_len > call->priv_out_cap ||
            reply->fds.size() > call->nfds_out_cap) {
            return RI_EOVERFLOW;  // the caller's buffers cannot hold the reply
        }
        if (s.result_len > 0) std::memcpy(call->result, s.result, s.result_len);
        if (s.priv_len > 0) std::memcpy(call->priv_out, s.priv, s.priv_len);
        call->result_len = s.result_len;
        call->priv_out_len = s.priv_len;
        for (auto &fd : reply->fds) call->fds_out[call->nfds_out++] = fd.release();
        call->handle_out = s.handle_out;
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;  // nothing C++ crosses the upcall
    } catch (...) {
        return RI_EIO;
    }
}

}  // namespace ual
