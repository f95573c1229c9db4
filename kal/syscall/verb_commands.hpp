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
 * (without SRQ), QUERY_QP, MODIFY_QP (without the LLP hand-over), DESTROY_QP. The others answer ::RI_EOPNOTSUPP.
 */
#ifndef KAL_SYSCALL_VERB_COMMANDS_HPP
#define KAL_SYSCALL_VERB_COMMANDS_HPP

#include <map>
#include <memory>
#include <mutex>

#include "adapter_manager.hpp"
#include "resource_table.hpp"
#include "server.hpp"

namespace kal {

/** @brief The kAL's state for one device connection. */
struct Context {
    /** @brief A context for @p who with @p quotas. */
    Context(const Peer &who, const Quotas &quotas) : peer(who), table(quotas) {}
    Peer peer;           /**< Who the connection is. */
    ResourceTable table; /**< Everything this connection created. */
};

/** @brief The verbs over the device. */
class VerbCommands {
public:
    /** @brief Serves SYSCALL on @p server with RNICs from @p adapters, each connection limited by @p quotas. */
    VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas);
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
    mutable std::mutex mutex_;
    std::map<uint32_t, std::unique_ptr<Context>> contexts_;
};

}  // namespace kal

#endif  // KAL_SYSCALL_VERB_COMMANDS_HPP
