// The same-host hooks: endpoint management asks system call management's tables and memory management's accounts.
#include "same_host_hooks.hpp"

#include "host_upcalls.hpp"

namespace kal {

SameHostHooks same_host_hooks(VerbCommands &verbs) {
    SameHostHooks h;
    h.open_of = [&verbs](uint32_t client, Handle qp) -> KvpObject * {
        Context *ctx = verbs.find_context(client);
        if (ctx == nullptr) return nullptr;
        auto open = object_of(ctx->table, open_of(ctx->table, qp), ResourceType::rnic);
        return open ? *open : nullptr;
    };
    h.charge = [&verbs](uint32_t client, uint64_t bytes) -> rdma::Expected<std::shared_ptr<void>> {
        Context *ctx = verbs.find_context(client);
        if (ctx == nullptr) return rdma::Error(RI_ENOENT, "the client is gone");
        return charge_shared_memory(*ctx, bytes);
    };
    h.peer_of = [&verbs](uint32_t client) -> const Peer * {
        Context *ctx = verbs.find_context(client);
        return ctx != nullptr ? &ctx->peer : nullptr;
    };
    return h;
}

}  // namespace kal
