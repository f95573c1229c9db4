/**
 * @file verb_commands.hpp
 * @brief System call management for the verbs: the SYSCALL device command, per-connection contexts, and the
 *        privileged verbs executed on the kVP on behalf of a uVP (OpenRDMA Figure 3/4).
 *
 * Every object a caller names is looked up in that caller's own resource table (type-checked), so another
 * process's handle, a stale one or a made-up one is refused before the kVP is called. A connection that closes
 * (the process exited or died) has everything it created destroyed in dependency order.
 *
 * Ops served so far: OPEN_RNIC, QUERY_RNIC, CLOSE_RNIC, ALLOC_PD, DEALLOC_PD, CREATE_CQ, DESTROY_CQ, CREATE_QP
 * (without SRQ), QUERY_QP, MODIFY_QP (without the LLP hand-over), DESTROY_QP, REGISTER_MR, DEREGISTER_MR. The
 * others answer ::RI_EOPNOTSUPP. Pinning is accounted by the kAL (limits, sharing across RNICs); locking the pages
 * in the owner process on the kAL's instruction is not done yet.
 */
#ifndef KAL_SYSCALL_VERB_COMMANDS_HPP
#define KAL_SYSCALL_VERB_COMMANDS_HPP

#include <map>
#include <memory>
#include <mutex>

#include "adapter_manager.hpp"
#include "pin_map.hpp"
#include "resource_table.hpp"
#include "server.hpp"

namespace kal {

/** @brief The kAL's state for one device connection. */
struct Context {
    /** @brief A context for @p who with @p quotas, pinning against @p budget up to @p pin_limit bytes. */
    Context(const Peer &who, const Quotas &quotas, PinBudget &budget, uint64_t pin_limit)
        : peer(who), pins(budget, pin_limit), table(quotas) {}
    Peer peer;           /**< Who the connection is. */
    PinMap pins;         /**< Memory pinned for it (declared before the table: the table's objects unpin into it). */
    ResourceTable table; /**< Everything this connection created. */
};

/**
 * @brief The kAL's upcalls for kVP modules: logging, and ri_vm_pin_range/unpin on the pin map of the context
 *        given as ri_rnic_open_params_t::host_ctx at Open RNIC.
 */
[[nodiscard]] const ri_host_ops_t &kal_host_ops() noexcept;

/** @brief The verbs over the device. */
class VerbCommands {
public:
    /**
     * @brief Serves SYSCALL on @p server with RNICs from @p adapters; each connection is limited by @p quotas and
     *        may pin @p pin_limit bytes of the host-wide @p budget.
     */
    VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, PinBudget &budget,
                 uint64_t pin_limit);
    VerbCommands(const VerbCommands &) = delete;
    VerbCommands &operator=(const VerbCommands &) = delete;
    /**
     * @brief Unregisters from the server and destroys every context (with the server stopped): the server may
     *        outlive this object.
     */
    ~VerbCommands();
    /** @brief Live contexts (connections that issued a SYSCALL). */
    [[nodiscard]] size_t contexts() const;

private:
    int handle(Connection &c, const Request &req, Reply &rep);
    Context &context_of(const Connection &c);

    DeviceServer &server_;
    AdapterManager &adapters_;
    Quotas quotas_;
    PinBudget &budget_;
    uint64_t pin_limit_;
    mutable std::mutex mutex_;
    std::map<uint32_t, std::unique_ptr<Context>> contexts_;
};

}  // namespace kal

#endif  // KAL_SYSCALL_VERB_COMMANDS_HPP
