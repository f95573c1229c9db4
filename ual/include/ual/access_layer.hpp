/**
 * @file access_layer.hpp
 * @brief The user access layer: one per consumer process. Opens the device (krdmad's, or an embedded kAL in this
 *        process), learns the RNICs, loads an RNIC's uVP on first use, and offers the access-layer object model on
 *        which IT-API and uDAPL both sit: interface adapter, protection zone, completion queue, endpoint, memory
 *        region, memory window, shared receive queue, and the event dispatchers of events.hpp.
 *
 * Objects are shared: a child keeps its parent alive (an endpoint its protection zone, a zone its adapter, an
 * adapter the access layer). close() releases the provider object and returns its status (::RI_EBUSY while the
 * provider still has children of it); a destructor closes what was not closed.
 *
 * The event thread reads the device's event records (a kVP's events routed by the kAL, the kAL shutting down) and
 * the uVP's own handlers report in-process; both reach the adapter's dispatchers without a kAL round trip.
 * Callbacks run on a small worker pool, never on the event thread or a provider's thread.
 *
 * Connections: Adapter::listen() makes a listen point whose requests reach a cm_request dispatcher;
 * Endpoint::connect(), accept(), Adapter::reject() and Endpoint::disconnect() run the kAL's LLP management, whose
 * events (established, rejected, unreachable, peer disconnect, broken, timeout, disconnected) reach the endpoint's
 * cm_message dispatcher. On ESTABLISHED the uVP takes the socket over locally (the RDMA-mode transition); from then
 * on the data path makes no kAL call.
 */
#ifndef UAL_ACCESS_LAYER_HPP
#define UAL_ACCESS_LAYER_HPP

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"
#include "ual/events.hpp"
#include "krdma/kal_link.hpp"

namespace ual {

struct CmRecord;
class Endpoint;
class ListenPoint;
class WorkerPool;
class Adapter;

/** @brief How the access layer reaches a kAL when open() makes the link. */
struct Options {
    /** krdmad's device; empty: $KRDMA_DEVICE, else the default /run/krdma/krdma.sock. */
    std::filesystem::path device;
    /**
     * Host an embedded kAL in this process with this krdmad configuration file instead of connecting to krdmad;
     * empty: $OPENRDMA_EMBEDDED_CONFIG if set and Options::device is empty, else use krdmad. Needs
     * Options::embedded_kal.
     */
    std::filesystem::path embedded_config;
    /**
     * Starts the embedded kAL (kal::start_embedded_link, from the kal_embedded library). The uAL does not link the
     * kAL itself: a program that may run one embedded names it here.
     */
    EmbeddedLinkStarter embedded_kal = nullptr;
    unsigned workers = 2; /**< Worker threads that run event callbacks. */
};

/** @brief The access layer of this process (or of a consumer hosted in the kAL). */
class AccessLayer : public LinkEvents, public std::enable_shared_from_this<AccessLayer> {
public:
    /**
     * @brief Opens the device (or starts the embedded kAL) and starts the event thread; ::RI_ENOENT /
     *        ::RI_ECONNREFUSED when krdmad is not running.
     */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<AccessLayer>> open(const Options &options = {});
    /** @brief An access layer over @p link (a hosted consumer's, say); Options::workers of @p options applies. */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<AccessLayer>> open(std::unique_ptr<KalLink> link,
                                                                           const Options &options = {});
    AccessLayer(const AccessLayer &) = delete;
    AccessLayer &operator=(const AccessLayer &) = delete;
    /** @brief Stops the event thread and the workers; every adapter must be gone. */
    ~AccessLayer() override;

    /** @brief The host's RNICs. */
    [[nodiscard]] rdma::Expected<std::vector<RnicDescription>> rnics();
    /**
     * @brief Opens the RNIC named @p name_or_address (an RNIC name, or a network address it serves): loads its uVP
     *        if this is the first use, opens it through the uVP, and registers the uAL's event handlers.
     */
    [[nodiscard]] rdma::Expected<std::shared_ptr<Adapter>> open_adapter(const std::string &name_or_address);
    /** @brief The kAL's TCP peer-detection map (krdma/peer_marks.hpp), for the sockets layer. */
    [[nodiscard]] rdma::Expected<krdma::UniqueFd> peer_marks() { return link_->peer_marks(); }
    /** @brief Runs callback jobs on the uAL's worker pool (for SimpleDispatcher::set_callback). */
    [[nodiscard]] SimpleDispatcher::Executor executor();
    /** @brief The link to the kAL. */
    [[nodiscard]] KalLink &link() noexcept { return *link_; }
    /** @brief Whether the kAL is an embedded one. */
    [[nodiscard]] bool embedded() const noexcept { return link_->kind() == "embedded"; }

    /** @cond INTERNAL */
    void async_event(uint32_t rnic, const ri_async_event_t &e) override;
    void completion(uint32_t cq) override;
    void connection(const krdma_cm_event &e, krdma::UniqueFd fd, krdma::UniqueFd channel,
                    krdma::UniqueFd byte_channel, krdma::UniqueFd link) override;
    void kal_gone() override;
    /** @endcond */

private:
    friend class Adapter;
    friend class CompletionQueue;
    friend class Endpoint;
    friend class ListenPoint;
    friend class ProtectionZone;
    friend class SharedReceiveQueue;
    AccessLayer() = default;

    // Objects that receive events, by the cookie their creator gave the kAL.
    struct Registered {
        ObjectKind kind;
        std::weak_ptr<void> object;
    };
    uint32_t enroll(ObjectKind kind, std::weak_ptr<void> object);
    void withdraw(uint32_t cookie);
    template <class T>
    std::shared_ptr<T> find(uint32_t cookie, ObjectKind kind);

    std::unique_ptr<KalLink> link_;  // declared first: destroyed last (its thread delivers to us)
    std::unique_ptr<WorkerPool> pool_;
    std::mutex mutex_;  // guards the registry
    std::unordered_map<uint32_t, Registered> registry_;
    uint32_t next_cookie_ = 1;
    bool kal_gone_ = false;
};

class ProtectionZone;
class Endpoint;
class ListenPoint;
class MemoryRegion;
class MemoryWindow;
class SharedReceiveQueue;

/** @brief An interface adapter: one open of an RNIC through its uVP. */
class Adapter : public std::enable_shared_from_this<Adapter> {
public:
    ~Adapter();
    /** @brief The RNIC. */
    [[nodiscard]] const RnicDescription &description() const noexcept { return desc_; }
    /** @brief Query RNIC. */
    [[nodiscard]] rdma::Expected<ri_rnic_attr_t> query() const;
    /** @brief Allocates a protection zone. */
    [[nodiscard]] rdma::Expected<std::shared_ptr<ProtectionZone>> create_pz();
    /**
     * @brief Creates a completion queue of at least @p depth entries whose completions @p dto (a DTO dispatcher
     *        not yet bound to a CQ) delivers.
     */
    [[nodiscard]] rdma::Expected<std::shared_ptr<CompletionQueue>> create_cq(uint32_t depth,
                                                                            const std::shared_ptr<SimpleDispatcher> &dto);
    /**
     * @brief Lets a thread that waits on @p d read and deliver this access layer's kAL records itself
     *        (leader/follower, see EventPump): for a dispatcher that events reach through a consumer's own callback
     *        (an API layer's queue behind a per-endpoint dispatcher). Listen points, endpoints and the async
     *        dispatchers given here get it without asking.
     */
    void share_event_pump(SimpleDispatcher &d);
    /** @brief Where this adapter's asynchronous events go (either may be null: those events are dropped). */
    void set_async_dispatchers(std::shared_ptr<SimpleDispatcher> affiliated,
                               std::shared_ptr<SimpleDispatcher> unaffiliated);
    /**
     * @brief Creates a listen point on this RNIC's address and TCP @p port (0: the host chooses; see
     *        ListenPoint::port()). Connection requests go to @p requests (a cm_request dispatcher) with @p context.
     */
    [[nodiscard]] rdma::Expected<std::shared_ptr<ListenPoint>> listen(uint16_t port,
                                                                     std::shared_ptr<SimpleDispatcher> requests,
                                                                     uint64_t context = 0, uint16_t backlog = 0);
    /** @brief Rejects connection request @p request with @p private_data (at most 512 bytes). */
    [[nodiscard]] rdma::Expected<void> reject(uint64_t request, std::span<const uint8_t> private_data = {});
    /** @brief Closes the RNIC open; ::RI_EBUSY while zones or CQs exist. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's verbs (for the API layers' fast paths): the uVP's, or a hosted consumer's kVP's. */
    [[nodiscard]] const ri_verbs_ops_t &verbs() const noexcept { return *ref_.verbs; }
    /** @brief The provider's RNIC handle. */
    [[nodiscard]] ri_rnic_t handle() const noexcept { return ref_.as<ri_rnic_t>(); }
    /** @brief The access layer. */
    [[nodiscard]] AccessLayer &access_layer() const noexcept { return *al_; }

private:
    friend class AccessLayer;
    friend class CompletionQueue;
    friend class Endpoint;
    friend class ListenPoint;
    friend class MemoryRegion;
    friend class MemoryWindow;
    friend class ProtectionZone;
    friend class SharedReceiveQueue;
    Adapter() = default;
    void deliver_async(const Event &e);

    std::shared_ptr<AccessLayer> al_;
    ObjectRef ref_;
    uint32_t cookie_ = 0;
    RnicDescription desc_;
    mutable std::mutex mutex_;
    std::shared_ptr<SimpleDispatcher> affiliated_, unaffiliated_;
};

/** @brief A completion queue, delivered through a DTO dispatcher. */
class CompletionQueue : public std::enable_shared_from_this<CompletionQueue> {
public:
    ~CompletionQueue();
    /** @brief Poll CQ: up to @p wc.size() completions; how many were written. */
    [[nodiscard]] rdma::Expected<size_t> poll(std::span<ri_wc_t> wc) noexcept;
    /** @brief Request Completion Notification (::ri_cq_notify). */
    [[nodiscard]] rdma::Status request_notify(uint32_t type) noexcept;
    /** @brief Resize to at least @p depth entries; the provided depth. */
    [[nodiscard]] rdma::Expected<uint32_t> resize(uint32_t depth);
    /** @brief The provided depth. */
    [[nodiscard]] uint32_t depth() const noexcept { return depth_; }
    /** @brief The dispatcher its completions go to. */
    [[nodiscard]] const std::shared_ptr<SimpleDispatcher> &dispatcher() const noexcept { return dto_; }
    /** @brief Destroys the CQ; ::RI_EBUSY while an endpoint uses it. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's CQ handle. */
    [[nodiscard]] ri_cq_t handle() const noexcept { return ref_.as<ri_cq_t>(); }

private:
    friend class Adapter;
    friend class AccessLayer;
    friend class ProtectionZone;
    CompletionQueue() = default;
    void notified() noexcept;

    std::shared_ptr<Adapter> adapter_;
    std::shared_ptr<SimpleDispatcher> dto_;
    ObjectRef ref_;
    uint32_t cookie_ = 0;
    uint32_t depth_ = 0;
};

/** @brief Creation attributes of an endpoint's queue pair. */
struct EndpointAttributes {
    uint32_t sq_depth = 64;  /**< Send queue work requests. */
    uint32_t rq_depth = 64;  /**< Receive queue work requests (ignored with an SRQ). */
    uint32_t sq_sge = 4;     /**< Gather elements per send. */
    uint32_t rq_sge = 4;     /**< Scatter elements per receive. */
    uint32_t rd_sge = 4;     /**< Scatter elements per RDMA Read. */
    uint32_t max_inline = 0; /**< Inline bytes. */
    uint32_t ird = 8;        /**< Inbound RDMA Read depth. */
    uint32_t ord = 8;        /**< Outbound RDMA Read depth. */
    bool signal_all = false; /**< Every send completes visibly. */
    uint64_t context = 0;    /**< Reported in work completions (ri_wc_t::qp_context) and events. */
    /** Remote access from creation (::RI_ACCESS_REMOTE_READ, ::RI_ACCESS_REMOTE_WRITE; see Endpoint::access()). */
    uint32_t access = 0;
};

/** @brief A protection zone (PD). */
class ProtectionZone : public std::enable_shared_from_this<ProtectionZone> {
public:
    ~ProtectionZone();
    /** @brief Creates an RC endpoint (its QP) with completion queues @p send and @p recv and optional @p srq. */
    [[nodiscard]] rdma::Expected<std::shared_ptr<Endpoint>> create_endpoint(
        const EndpointAttributes &attr, const std::shared_ptr<CompletionQueue> &send,
        const std::shared_ptr<CompletionQueue> &recv, const std::shared_ptr<SharedReceiveQueue> &srq = nullptr);
    /**
     * @brief Registers [@p addr, @p addr + @p length) with ::ri_access rights @p access (with ::RI_ACCESS_ZERO_BASED
     *        the region's tagged offsets start at 0).
     */
    [[nodiscard]] rdma::Expected<std::shared_ptr<MemoryRegion>> register_memory(void *addr, uint64_t length,
                                                                               uint32_t access);
    /** @brief Creates a shared receive queue; @p context is reported in its asynchronous events. */
    [[nodiscard]] rdma::Expected<std::shared_ptr<SharedReceiveQueue>> create_srq(uint32_t depth, uint32_t sge,
                                                                               uint32_t limit = 0,
                                                                               uint64_t context = 0);
    /** @brief Allocates a memory window of ::ri_mw_type @p type. */
    [[nodiscard]] rdma::Expected<std::shared_ptr<MemoryWindow>> allocate_window(uint32_t type);
    /** @brief Deallocates the PD; ::RI_EBUSY while objects of it exist. */
    [[nodiscard]] rdma::Status close();
    /** @brief The adapter. */
    [[nodiscard]] const std::shared_ptr<Adapter> &adapter() const noexcept { return adapter_; }
    /** @brief The provider's PD handle. */
    [[nodiscard]] ri_pd_t handle() const noexcept { return ref_.as<ri_pd_t>(); }

private:
    friend class Adapter;
    ProtectionZone() = default;
    std::shared_ptr<Adapter> adapter_;
    ObjectRef ref_;
};

/** @brief A listen point: a TCP port on an RNIC's address where connection requests arrive. */
class ListenPoint : public std::enable_shared_from_this<ListenPoint> {
public:
    ~ListenPoint();
    /** @brief The TCP port (the connection qualifier). */
    [[nodiscard]] uint16_t port() const noexcept { return port_; }
    /** @brief Stops listening; pending requests are refused. */
    [[nodiscard]] rdma::Status close();

private:
    friend class Adapter;
    friend class AccessLayer;
    ListenPoint() = default;
    std::shared_ptr<Adapter> adapter_;
    std::shared_ptr<SimpleDispatcher> requests_;
    ObjectRef ref_;
    uint32_t cookie_ = 0;
    uint16_t port_ = 0;
};

/** @brief An endpoint: a reliable connected queue pair and its connection. */
class Endpoint : public std::enable_shared_from_this<Endpoint> {
public:
    ~Endpoint();
    /** @brief Where this endpoint's connection events go (a cm_message dispatcher; null: dropped). */
    void set_connection_dispatcher(std::shared_ptr<SimpleDispatcher> events);
    /**
     * @brief Connects to @p address (IPv4 or IPv6 text) port @p port with @p private_data in the MPA request. The
     *        outcome arrives as a connection event: established, rejected, unreachable, timeout or broken.
     *        @p timeout 0 takes the kAL's default.
     */
    [[nodiscard]] rdma::Expected<void> connect(const std::string &address, uint16_t port,
                                       std::span<const uint8_t> private_data = {},
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
    /**
     * @brief connect() without waiting for the kAL: the call returns once the request is sent, and a refusal (no
     *        route to @p address, a limit, the endpoint cannot connect) arrives as an unreachable connection event
     *        with the refusal's code as its status, like a peer that cannot be reached. A client that opens many
     *        connections makes no round trip each. A link that answers at once (a consumer hosted in the kAL)
     *        returns the refusal instead, as connect() does.
     */
    [[nodiscard]] rdma::Expected<void> connect_async(const std::string &address, uint16_t port,
                                             std::span<const uint8_t> private_data = {},
                                             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
    /**
     * @brief Turns @p fd, a TCP socket this process connected (or accepted) on this RNIC's address, into this
     *        endpoint's connection: MPA negotiates on it (this side's frame carries @p private_data; ::krdma_convert_role
     *        @p role says which side sends the request, AUTO lets the two ends agree by their addresses) and the
     *        outcome arrives as a connection event. The kAL and the uVP take their own references: the caller
     *        closes @p fd afterwards. Quiesce the stream first: MPA reads what arrives from now on. @p flags
     *        (::krdma_convert_flags) asks for more: ::KRDMA_CONVERT_BYTE_CHANNEL brings ConnectionData::byte_channel,
     *        and with it ::KRDMA_CONVERT_LINK ConnectionData::link (a kAL before minor 8: never).
     */
    [[nodiscard]] rdma::Expected<void> convert(int fd, std::span<const uint8_t> private_data = {}, uint32_t role = 0,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                                       uint32_t flags = 0);
    /** @brief Accepts connection request @p request with this endpoint, replying @p private_data. */
    [[nodiscard]] rdma::Expected<void> accept(uint64_t request, std::span<const uint8_t> private_data = {});
    /**
     * @brief accept() without waiting for the kAL: the call returns once the request is sent, and a refusal (the
     *        request expired or was decided, the endpoint cannot take it) arrives as a BROKEN connection event with
     *        the refusal's code as its status. A server that accepts many connections makes no round trip each.
     *        A link that answers at once (a consumer hosted in the kAL) returns the refusal instead.
     */
    [[nodiscard]] rdma::Expected<void> accept_async(uint64_t request, std::span<const uint8_t> private_data = {});
    /**
     * @brief Disconnects: in order (the QP to CLOSING: outstanding sends complete, then FIN) or, with
     *        @p abortive, at once (the QP to ERROR: posted work is flushed, the peer gets a reset).
     */
    [[nodiscard]] rdma::Status disconnect(bool abortive = false);
    /** @brief Query QP. */
    [[nodiscard]] rdma::Expected<ri_qp_attr_t> query() const;
    /** @brief Modify QP with a mask of ::ri_qp_attr_mask. */
    [[nodiscard]] rdma::Status modify(const ri_qp_attr_t &attr, uint32_t mask);
    /** @brief Post Send (fast path: straight to the uVP). */
    [[nodiscard]] rdma::Status post_send(std::span<const ri_send_wr_t> wr, uint32_t *posted = nullptr) noexcept;
    /** @brief Post Receive (fast path). */
    [[nodiscard]] rdma::Status post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted = nullptr) noexcept;
    /** @brief The QP number. */
    [[nodiscard]] uint32_t qp_num() const noexcept { return qp_num_; }
    /** @brief The remote access the QP was created with (ri_qp_attr_t::access; modify() may change it since). */
    [[nodiscard]] uint32_t access() const noexcept { return access_; }
    /** @brief The attributes in effect after creation. */
    [[nodiscard]] const ri_qp_init_attr_t &attributes() const noexcept { return init_; }
    /** @brief Destroys the QP. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's QP handle. */
    [[nodiscard]] ri_qp_t handle() const noexcept { return ref_.as<ri_qp_t>(); }

private:
    friend class ProtectionZone;
    friend class AccessLayer;
    Endpoint() = default;
    void deliver_cm(Event e);
    std::mutex cm_mutex_;
    std::shared_ptr<SimpleDispatcher> cm_;
    // The consumer moved the QP to CLOSING or ERROR (disconnected) since it was last connected.
    std::atomic<bool> local_close_{false};
    // The uVP has the stream (from ESTABLISHED until the connection's end was handled).
    std::atomic<bool> streaming_{false};
    std::shared_ptr<ProtectionZone> pz_;
    std::shared_ptr<CompletionQueue> send_, recv_;
    std::shared_ptr<SharedReceiveQueue> srq_;
    // Held while the QP is destroyed, and while the event thread hands the stream to the provider or takes it
    // back: a connection event racing close() must not reach a QP the provider has freed.
    std::mutex ref_mutex_;
    ObjectRef ref_;
    uint32_t cookie_ = 0;
    uint32_t qp_num_ = 0;
    uint32_t access_ = 0;
    ri_qp_init_attr_t init_{};
};

/** @brief A registered memory region. */
class MemoryRegion {
public:
    ~MemoryRegion();
    /** @brief The local and remote STags. */
    [[nodiscard]] const ri_mr_keys_t &keys() const noexcept { return keys_; }
    /** @brief Query Memory Region. */
    [[nodiscard]] rdma::Expected<ri_mr_attr_t> query() const;
    /** @brief Deregisters; ::RI_EBUSY while windows are bound to it. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's MR handle. */
    [[nodiscard]] ri_mr_t handle() const noexcept { return ref_.as<ri_mr_t>(); }

private:
    friend class ProtectionZone;
    MemoryRegion() = default;
    std::shared_ptr<ProtectionZone> pz_;
    ObjectRef ref_;
    ri_mr_keys_t keys_{};
};

/** @brief A memory window. */
class MemoryWindow {
public:
    ~MemoryWindow();
    /** @brief The window's STag. */
    [[nodiscard]] ri_stag_t rkey() const noexcept { return rkey_; }
    /** @brief Deallocates the window. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's MW handle. */
    [[nodiscard]] ri_mw_t handle() const noexcept { return ref_.as<ri_mw_t>(); }

private:
    friend class ProtectionZone;
    MemoryWindow() = default;
    std::shared_ptr<ProtectionZone> pz_;
    ObjectRef ref_;
    ri_stag_t rkey_ = 0;
};

/** @brief A shared receive queue. */
class SharedReceiveQueue {
public:
    ~SharedReceiveQueue();
    /** @brief Post Receive to the SRQ (fast path). */
    [[nodiscard]] rdma::Status post_recv(std::span<const ri_recv_wr_t> wr, uint32_t *posted = nullptr) noexcept;
    /** @brief Query SRQ. */
    [[nodiscard]] rdma::Expected<ri_srq_attr_t> query() const;
    /** @brief Modify SRQ with a mask of ::ri_srq_attr_mask. */
    [[nodiscard]] rdma::Status modify(const ri_srq_attr_t &attr, uint32_t mask);
    /** @brief Destroys the SRQ; ::RI_EBUSY while endpoints use it. */
    [[nodiscard]] rdma::Status close();
    /** @brief The provider's SRQ handle. */
    [[nodiscard]] ri_srq_t handle() const noexcept { return ref_.as<ri_srq_t>(); }

private:
    friend class ProtectionZone;
    SharedReceiveQueue() = default;
    std::shared_ptr<ProtectionZone> pz_;
    ObjectRef ref_;
};

}  // namespace ual

#endif  // UAL_ACCESS_LAYER_HPP
