/**
 * @file hosted_consumer.hpp
 * @brief The kAL's internal entry point for consumers hosted in the kAL process itself (kDAPL and kernel IT-API
 *        consumers, a storage target...): the verbs through the kVP, listen/connect/accept/reject through the same
 *        LLP management the device commands use, and events by callback.
 *
 * A hosted consumer is a client of the kAL without a device connection: it has its own client identifier (from
 * VerbCommands::kHostedClientBase up), its own context (resource table, quotas, pin map), and its objects are
 * recorded, checked and torn down exactly like a process's. Its privileged verbs run the SYSCALL command's code on
 * the serving thread, so the kVP sees plain verbs with no uVP private data: softrnic then runs the QP's data path
 * in the kVP itself. When its connection is established the kAL hands the stream to the kVP (modify_qp RTS|LLP
 * with the socket) instead of sending it to a process. The fast path (post, poll, notify) calls the kVP's verbs
 * directly from the consumer's threads, as a kernel consumer calls its RNIC's driver.
 *
 * Events arrive through HostedCallbacks: connection events on the serving thread, asynchronous and completion
 * events on the kVP's threads. A callback may call this class again (from the serving thread a request runs at
 * once), but must not destroy the consumer.
 */
#ifndef KAL_SYSCALL_HOSTED_CONSUMER_HPP
#define KAL_SYSCALL_HOSTED_CONSUMER_HPP

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "connection_commands.hpp"
#include "verb_commands.hpp"

namespace kal {

/** @brief One object of a hosted consumer: the kAL's handle (for the commands) and the kVP's object (fast path). */
struct HostedObject {
    Handle handle = 0;                      /**< kAL handle in the consumer's table. */
    ResourceType type = ResourceType::rnic; /**< What it is. */
    void *kvp = nullptr;                    /**< The kVP's object (cast to ri_qp_t, ri_cq_t...). */
    const ri_verbs_ops_t *verbs = nullptr;  /**< The kVP's verbs. */
};

/** @brief Where a hosted consumer's events go; any may be empty. */
struct HostedCallbacks {
    std::function<void(const krdma_cm_event &)> cm;  /**< Connection events (serving thread). */
    std::function<void(const krdma_event &)> async;  /**< Asynchronous events (kVP thread). */
    /** An armed CQ got a completion (kVP thread): its handle and the cookie given at its creation. */
    std::function<void(Handle cq, uint32_t cookie)> completion;
};

/**
 * @brief A consumer hosted in the kAL. Thread-safe. Its functions are exported to consumer modules
 *        (kal/consumer_host.hpp), hence the default visibility.
 */
class __attribute__((visibility("default"))) HostedConsumer {
public:
    /** @brief A new consumer of @p verbs and @p connections, named @p name in logs. */
    HostedConsumer(VerbCommands &verbs, ConnectionCommands &connections, HostedCallbacks callbacks,
                   std::string name = "hosted");
    HostedConsumer(const HostedConsumer &) = delete;
    HostedConsumer &operator=(const HostedConsumer &) = delete;
    /** @brief Destroys everything the consumer made, connections abortively (like a process that exits). */
    ~HostedConsumer();

    /** @brief The consumer's client identifier (as rdmactl lists it). */
    [[nodiscard]] uint32_t client_id() const noexcept { return conn_.peer().client_id; }

    /**
     * @brief Open RNIC @p rnic (by instance name); sets up the consumer's completion event handler on it. Its
     *        asynchronous events carry @p cookie (krdma_event::cookie).
     */
    [[nodiscard]] rdma::Expected<HostedObject> open_rnic(const std::string &rnic, uint32_t cookie = 0);
    /** @brief Allocate PD. */
    [[nodiscard]] rdma::Expected<HostedObject> alloc_pd(const HostedObject &rnic);
    /** @brief Create CQ of @p cqe entries whose notifications reach HostedCallbacks::completion with @p cookie. */
    [[nodiscard]] rdma::Expected<HostedObject> create_cq(const HostedObject &rnic, uint32_t cqe, uint32_t cookie = 0);
    /** @brief Create QP; @p attr is updated with the attributes in effect; its connection events carry @p cookie. */
    [[nodiscard]] rdma::Expected<HostedObject> create_qp(const HostedObject &pd, const HostedObject &send_cq,
                                                         const HostedObject &recv_cq, ri_qp_init_attr_t &attr,
                                                         const HostedObject *srq = nullptr, uint32_t cookie = 0);
    /** @brief Create SRQ in @p pd; @p attr is updated with the attributes in effect. */
    [[nodiscard]] rdma::Expected<HostedObject> create_srq(const HostedObject &pd, ri_srq_attr_t &attr);
    /** @brief Modify SRQ with a mask of ::ri_srq_attr_mask. */
    [[nodiscard]] rdma::Expected<void> modify_srq(const HostedObject &srq, const ri_srq_attr_t &attr, uint32_t mask);
    /** @brief Allocate a memory window of ::ri_mw_type @p type in @p pd; @p rkey receives its STag. */
    [[nodiscard]] rdma::Expected<HostedObject> alloc_mw(const HostedObject &pd, uint32_t type, ri_stag_t &rkey);
    /** @brief Register @p length bytes at @p addr (in this process) with @p access; @p keys receives the STags. */
    [[nodiscard]] rdma::Expected<HostedObject> register_mr(const HostedObject &pd, void *addr, uint64_t length,
                                                           uint32_t access, ri_mr_keys_t &keys);
    /** @brief Modify QP (a state change also moves the QP's connection: CLOSING orderly, ERROR abortive). */
    [[nodiscard]] rdma::Expected<void> modify_qp(const HostedObject &qp, const ri_qp_attr_t &attr, uint32_t mask);
    /** @brief Query QP. */
    [[nodiscard]] rdma::Expected<ri_qp_attr_t> query_qp(const HostedObject &qp);
    /** @brief Destroys @p o; ::RI_EBUSY while objects made under it or using it live (the verbs' order). */
    [[nodiscard]] rdma::Expected<void> destroy(const HostedObject &o);

    /**
     * @brief Listens on @p rnic's address at @p port (0: any) with @p backlog (0: the kAL's); returns the listen
     *        point and the port bound. Its requests carry @p context and @p cookie.
     */
    [[nodiscard]] rdma::Expected<std::pair<Handle, uint16_t>> listen(const HostedObject &rnic, uint16_t port,
                                                                     uint64_t context, uint32_t cookie = 0,
                                                                     uint16_t backlog = 0);
    /** @brief Connects the IDLE @p qp to @p address:@p port with @p private_data; the outcome is a CM event. */
    [[nodiscard]] rdma::Expected<void> connect(const HostedObject &qp, const std::string &address, uint16_t port,
                                               std::span<const uint8_t> private_data, uint64_t context,
                                               uint32_t timeout_ms = 0);
    /** @brief connect() to an address already parsed. */
    [[nodiscard]] rdma::Expected<void> connect(const HostedObject &qp, const ri_net_addr_t &remote, uint16_t port,
                                               std::span<const uint8_t> private_data, uint64_t context,
                                               uint32_t timeout_ms = 0);
    /** @brief Accepts connection request @p request with the IDLE @p qp. */
    [[nodiscard]] rdma::Expected<void> accept(uint64_t request, const HostedObject &qp,
                                              std::span<const uint8_t> private_data, uint64_t context);
    /** @brief Rejects connection request @p request. */
    [[nodiscard]] rdma::Expected<void> reject(uint64_t request, std::span<const uint8_t> private_data);

private:
    struct Sink;
    rdma::Expected<HostedObject> syscall(krdma_syscall &s, ResourceType made, uint32_t cookie = 0);
    rdma::Expected<HostedObject> object(Handle h, ResourceType type);
    // Runs connection command @p cmd (its handler @p handler) with request @p q on the serving thread; the reply
    // struct, if any, goes to @p out. A refusal carries the handler's reason after @p what.
    template <class T>
    rdma::Expected<void> command(int (ConnectionCommands::*handler)(Connection &, const Request &, Reply &),
                                 uint32_t cmd, const T &q, T *out, const char *what);

    VerbCommands &verbs_;
    ConnectionCommands &connections_;
    std::shared_ptr<Sink> sink_;
    Connection conn_;
    std::string name_;
    std::mutex mutex_;
    std::map<Handle, uint32_t> cehs_;  // RNIC open -> the consumer's CEH on it
};

}  // namespace kal

#endif  // KAL_SYSCALL_HOSTED_CONSUMER_HPP
