// Memory management's upcalls for kVP modules: a kVP pins and charges through these while it serves a verb, on the
// context of the client the verb is for.
#include "host_upcalls.hpp"

#include <chrono>
#include <new>
#include <string>
#include <vector>

#include "context.hpp"
#include "krdma/pins.hpp"
#include "rights.hpp"
#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

// Refusals are logged under system call management's name: they are the reason the verb being served fails.
constexpr const char *kComponent = "syscall";

// How often a process's rights (RLIMIT_MEMLOCK, CAP_IPC_LOCK) are read again for its pins: reading them costs four
// /proc files, too much for every registration, and a limit raised meanwhile is seen at once anyway (a refusal
// reads them again before it refuses).
constexpr auto kRightsTtl = std::chrono::seconds(1);

// Sets the process's pin limit from its rights, as Linux limits a process's pinned pages: its RLIMIT_MEMLOCK unless
// it holds CAP_IPC_LOCK, and never beyond the kAL's per-process limit.
void refresh_pin_limit(Context &ctx, bool force) {
    ProcessAccount &a = *ctx.account;
    const auto now = std::chrono::steady_clock::now();
    if (!force && a.rights_read != std::chrono::steady_clock::time_point{} && now - a.rights_read < kRightsTtl) return;
    a.rights_read = now;
    const uint64_t configured = ctx.accounts->per_process();
    const Rights r = rights_of(ctx.peer.pid, ctx.peer.start_time);
    if (!r.known) {
        a.pins.set_limit(0, "the limit of a process krdmad cannot identify (it has gone)");
    } else if (!r.has(Capability::ipc_lock) && r.memlock_limit < configured) {
        a.pins.set_limit(r.memlock_limit, "its RLIMIT_MEMLOCK (ulimit -l; CAP_IPC_LOCK lifts it)");
    } else {
        a.pins.set_limit(configured, "the per-process limit (limits.pin_bytes_per_process)");
    }
}

// Counts a refusal of the limits by who refused.
void count_refusal(Context &ctx) {
    LimitRefusals &n = ctx.accounts->refusals();
    const PinBudget *by = ctx.pins.last_refused();
    if (by == nullptr) {
        n.pin_process.fetch_add(1, std::memory_order_relaxed);
    } else if (by == &ctx.accounts->host()) {
        n.pin_host.fetch_add(1, std::memory_order_relaxed);
    } else {
        n.pin_user.fetch_add(1, std::memory_order_relaxed);
    }
}

ri_status_t pin_range(void *host_ctx, uint64_t addr, uint64_t length, uint32_t, ri_pin_t *out) {
    if (host_ctx == nullptr || out == nullptr) return RI_EINVAL;
    auto *ctx = static_cast<Context *>(host_ctx);
    try {
        // Only pages the process has mapped, checked for the pages this pin adds (after the limits, as Linux does):
        // an account charged for pages that do not exist would be a way to take the budget without holding memory.
        const pid_t pid = ctx->peer.pid;
        const int pidfd = ctx->account->pidfd();
        const PinMap::RangeCheck mapped = [pidfd, pid, length](const std::vector<PageRange> &fresh) -> rdma::Expected<void> {
            for (const PageRange &g : fresh) {
                if (auto m = check_mapped(pidfd, pid, g.start, g.bytes()); !m) {
                    return rdma::Error(m.error().code(), "pinning " + std::to_string(length) + " bytes: " +
                                                             m.error().message());
                }
            }
            return {};
        };
        refresh_pin_limit(*ctx, false);
        auto r = ctx->pins.pin(addr, length, mapped);
        if (!r && r.error().code() == RI_ENOSPC && ctx->pins.last_refused() == nullptr) {
            refresh_pin_limit(*ctx, true);  // the process may have raised its limit since it was read
            r = ctx->pins.pin(addr, length, mapped);
        }
        if (!r) {
            if (r.error().code() == RI_ENOSPC) count_refusal(*ctx);
            if (r.error().code() == RI_EFAULT) {
                ctx->accounts->refusals().pin_unmapped.fetch_add(1, std::memory_order_relaxed);
            }
            RDMA_LOG_CLIENT(warn, kComponent, "client %u: %s", ctx->peer.client_id, r.error().message().c_str());
            ctx->pin_refusal = r.error().message();  // the reason of the verb's refusal, if the kVP gives up
            return r.error().code();
        }
        RDMA_LOG_DEBUG(kComponent, "client %u: pinned %#lx+%lu", ctx->peer.client_id,
                       static_cast<unsigned long>(r->range.start), static_cast<unsigned long>(r->range.bytes()));
        // Locking the whole pinned range is always right: every page of it is pinned now. A range whose every page
        // was pinned already is locked already (the owner locked each pin's pages when it was made, and unlocks
        // them only when the last pin goes): no instruction, no system call in the owner (a registration inside a
        // registered pool, DAPL's LMR per transfer, a registration cache's overlapping entries).
        if (!r->newly_pinned.empty()) {
            ctx->instruct(krdma_pin_op{r->range.start, r->range.bytes(), KRDMA_PIN_LOCK, 0});
        }
        *out = ri_pin_t{r->pin_id, r->range.start, r->range.bytes(), 4096, 0};
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    }
}

ri_status_t unpin_range(void *host_ctx, uint64_t pin_id) {
    if (host_ctx == nullptr) return RI_EINVAL;
    auto *ctx = static_cast<Context *>(host_ctx);
    try {
        auto r = ctx->pins.unpin(pin_id);
        if (!r) return r.error().code();
        for (const PageRange &g : *r) ctx->instruct(krdma_pin_op{g.start, g.bytes(), KRDMA_PIN_UNLOCK, 0});
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    }
}

ri_status_t charge_memory(void *host_ctx, uint64_t bytes) {
    if (host_ctx == nullptr) return RI_EINVAL;
    auto *ctx = static_cast<Context *>(host_ctx);
    try {
        refresh_pin_limit(*ctx, false);
        auto r = ctx->pins.charge(bytes);
        if (!r) {
            count_refusal(*ctx);
            RDMA_LOG_CLIENT(warn, kComponent, "client %u: %s", ctx->peer.client_id, r.error().message().c_str());
            ctx->pin_refusal = r.error().message();
            return r.error().code();
        }
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    }
}

void uncharge_memory(void *host_ctx, uint64_t bytes) {
    if (host_ctx != nullptr) static_cast<Context *>(host_ctx)->pins.discharge(bytes);
}

}  // namespace

rdma::Expected<std::shared_ptr<void>> charge_shared_memory(Context &ctx, uint64_t bytes) {
    refresh_pin_limit(ctx, false);
    // Shared memory is a speed-up, never a reason for a registration or a queue to fail: it may take the process's
    // budget only up to half its limit, so that the other half stays for what must be pinned.
    if (ctx.pins.pinned_bytes() + ctx.pins.charged_bytes() + bytes > ctx.pins.limit() / 2) {
        return rdma::Error(RI_ENOSPC, "shared memory would take the process's pinned and charged memory past half "
                                      "its limit of " + std::to_string(ctx.pins.limit()) + " bytes");
    }
    if (auto r = ctx.pins.charge(bytes); !r) {
        refresh_pin_limit(ctx, true);  // a limit raised meanwhile is seen before the refusal
        if (auto again = ctx.pins.charge(bytes); !again) return again.error();
    }
    std::shared_ptr<ProcessAccount> account = ctx.account;
    ProcessAccount *raw = account.get();
    return std::shared_ptr<void>(raw, [account = std::move(account), bytes](void *) noexcept {
        account->pins.discharge(bytes);
    });
}

namespace {

const ri_host_ops_t kHostOps{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, &pin_range, &unpin_range,
                             nullptr,
                             &charge_memory, &uncharge_memory, nullptr};

}  // namespace

const ri_host_ops_t &kal_host_ops() noexcept { return kHostOps; }

}  // namespace kal
