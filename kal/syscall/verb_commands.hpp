/**
 * @file verb_commands.hpp
 * @brief System call management for the verbs: the SYSCALL device command, per-connection contexts, and the
 *        privileged verbs executed on the kVP on behalf of a uVP (OpenRDMA Figure 3/4); and the delivery of the
 *        records event management (kal/event) makes of a kVP's events to the process that owns the resource.
 *
 * Every object a caller names is looked up in that caller's own resource table (type-checked), so another
 * process's handle, a stale one or a made-up one is refused before the kVP is called; so is a reference to an
 * object of another RNIC open than the one the verb runs on (its kVP, maybe another module, would take it for its
 * own object). A kVP of ABI 1.1 receives the
 * whole request (private data and descriptors in both directions) through ri_verbs_ops_t::syscall; older kVPs get
 * the plain verb. A connection that closes (the process exited or died) has everything it created destroyed in
 * dependency order.
 *
 * Every ::ri_syscall_op is served. ::RI_MODIFY_QP with ::RI_QP_ATTR_LLP (the RDMA-mode transition) is refused with
 * ::RI_EOPNOTSUPP: the kAL's LLP management owns that step. ::RI_REREGISTER_MR with ::RI_REREG_PD is refused with
 * ::RI_EOPNOTSUPP: moving a region to another PD would change the ownership tree under a live object.
 */
#ifndef KAL_SYSCALL_VERB_COMMANDS_HPP
#define KAL_SYSCALL_VERB_COMMANDS_HPP

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accounts.hpp"
#include "adapter_manager.hpp"
#include "context.hpp"
#include "event_route.hpp"
#include "host_upcalls.hpp"
#include "pin_map.hpp"
#include "resource_table.hpp"
#include "server.hpp"

namespace kal {

/**
 * @brief Where the event records of a consumer hosted in the kAL go (event management's callback path): the
 *        record's code (::KRDMA_EVENT_ASYNC, ::KRDMA_EVENT_COMPLETION, ::KRDMA_EVENT_CM) and its bytes. Called on
 *        the serving thread (connection events) or a kVP's thread (asynchronous and completion events).
 */
using HostedSink = std::function<void(uint32_t code, std::span<const uint8_t> record)>;

/** @brief The verbs over the device, and the delivery of event management's records. */
class VerbCommands : public EventSink {
public:
    /** @brief Client identifiers of consumers hosted in the kAL start here (the device's own count up from 1). */
    static constexpr uint32_t kHostedClientBase = 0x80000000u;
    /**
     * @brief Serves SYSCALL on @p server with RNICs from @p adapters; each connection is limited by @p quotas and
     *        may pin @p pin_limit bytes of the host-wide @p budget.
     */
    VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, PinBudget &budget,
                 uint64_t pin_limit);
    /**
     * @brief Serves SYSCALL on @p server with RNICs from @p adapters; each connection is limited by @p quotas, each
     *        process and user by @p accounts (which must outlive this object).
     */
    VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, Accounts &accounts);
    VerbCommands(const VerbCommands &) = delete;
    VerbCommands &operator=(const VerbCommands &) = delete;
    /**
     * @brief Unregisters from the server and destroys every context (with the server stopped): the server may
     *        outlive this object.
     */
    ~VerbCommands() override;
    /** @brief Live contexts (connections that issued a SYSCALL). */
    [[nodiscard]] size_t contexts() const;
    /** @brief Events delivered to processes since start, and events dropped because a client did not read. */
    [[nodiscard]] std::pair<uint64_t, uint64_t> event_counts() const noexcept;

    /** @brief Event management: sends @p event to client @p client_id (any thread). */
    void deliver(uint32_t client_id, const krdma_event &event) noexcept override;
    /**
     * @brief Event management: sends a variable-size @p record (header cmd @p code) with @p fds to client
     *        @p client_id; counted like deliver(). False when it could not be sent.
     */
    bool deliver_record(uint32_t client_id, uint32_t code, std::span<const uint8_t> record,
                        std::span<const int> fds = {}) noexcept;
    /**
     * @brief Event management: tells every process that has an RNIC on network device @p netdev open the
     *        unaffiliated asynchronous event @p event_id (::RI_AE_RNIC_LINK_DOWN, ::RI_AE_RNIC_LINK_UP), as that
     *        RNIC's kVP would raise it (any thread).
     */
    void raise_rnic_event(const std::string &netdev, uint32_t event_id);
    /** @brief Event management: @p route is a new RNIC open's (record_created()); raise_rnic_event() reaches it. */
    void track_open(const std::shared_ptr<EventRoute> &route);
    /** @brief The state of connection @p c (made at its first use); for other blocks serving the same device. */
    [[nodiscard]] Context &context_of(const Connection &c);
    /** @brief The state of client @p client_id, or null when it has none (serving thread). */
    [[nodiscard]] Context *find_context(uint32_t client_id);
    /** @brief The device server. */
    [[nodiscard]] DeviceServer &server() noexcept { return server_; }
    /**
     * @brief How many endpoints a client has (they belong to its QPs, not to its resource table); LIST_CLIENTS adds
     *        them to the client's counts. Set by LLP management; empty = none. Serving thread.
     */
    void count_endpoints_with(std::function<uint32_t(uint32_t client_id)> fn) { endpoint_count_ = std::move(fn); }

    /**
     * @brief What endpoint management hears of a QP the kVP ended on its own: client, RNIC open (kAL handle), QP
     *        number and the ::ri_async_event_id. Called on the serving thread.
     */
    using QpEndedFn = std::function<void(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id)>;
    /** @brief Set by LLP management (serving thread, or with the server stopped); empty = nobody listens. */
    void on_qp_ended(QpEndedFn fn) { qp_ended_ = std::move(fn); }
    /**
     * @brief Event management: the kVP running a hosted client's stream ended its QP @p qp_num of RNIC open
     *        @p rnic with asynchronous event @p event_id. Hands it to the on_qp_ended() function on the serving
     *        thread and returns at once (from a kVP's thread, which must not wait for the serving thread).
     */
    void kvp_ended_qp(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id) noexcept override;

    /**
     * @brief A consumer hosted in the kAL: a new client identifier whose event records go to @p sink instead of
     *        a device connection. Its requests run through execute() and the other blocks' handlers with a
     *        Connection made from that identifier (see kal::HostedConsumer).
     */
    [[nodiscard]] uint32_t host(HostedSink sink);
    /** @brief Ends hosted client @p client_id: its events stop, and everything it made is destroyed. */
    void unhost(uint32_t client_id);
    /** @brief Whether @p client_id is a consumer hosted in the kAL. */
    [[nodiscard]] static bool hosted(uint32_t client_id) noexcept { return client_id >= kHostedClientBase; }
    /**
     * @brief Whether the kVP runs the streams of @p client_id's QPs on an RNIC that is (@p offload) or is not an
     *        offloading one: a consumer hosted in the kAL has no uVP, an offloading RNIC's adapter owns its streams.
     */
    [[nodiscard]] static bool kvp_runs_streams(uint32_t client_id, bool offload) noexcept {
        return offload || hosted(client_id);
    }
    /**
     * @brief The SYSCALL command for @p c without a message (serving thread): the same checks, the same records.
     *        A refusal's reason goes to @p why when given.
     */
    [[nodiscard]] int execute(Connection &c, krdma_syscall &s, std::string *why = nullptr);
    /** @brief Every process's and user's account. */
    [[nodiscard]] Accounts &accounts() noexcept { return accounts_; }

private:
    void serve();  // registers the handlers (both constructors)
    int handle(Connection &c, const Request &req, Reply &rep);

    DeviceServer &server_;
    AdapterManager &adapters_;
    Quotas quotas_;
    std::unique_ptr<Accounts> own_accounts_;  // when made with a budget and a per-process limit only
    Accounts &accounts_;
    std::function<uint32_t(uint32_t)> endpoint_count_;
    QpEndedFn qp_ended_;  // serving thread
    mutable std::mutex mutex_;
    std::map<uint32_t, std::unique_ptr<Context>> contexts_;
    std::mutex hosted_mutex_;  // the hosted consumers' sinks, looked up by event threads
    std::map<uint32_t, std::shared_ptr<HostedSink>> hosted_;
    uint32_t next_hosted_ = kHostedClientBase;
    std::vector<std::weak_ptr<EventRoute>> opens_;  // every RNIC open's route, for raise_rnic_event() (mutex_)
    std::atomic<uint64_t> delivered_{0};
    std::atomic<uint64_t> dropped_{0};
};

}  // namespace kal

#endif  // KAL_SYSCALL_VERB_COMMANDS_HPP
