/**
 * @file dapl.hpp
 * @brief The objects behind DAT 2.0 handles, each a thin holder of the access layer's object of the same kind (IA:
 *        adapter, PZ: protection zone, EVD: a completion queue and/or an event queue over the uAL's dispatchers,
 *        EP: endpoint, PSP/RSP: listen point, LMR: region, RMR: window, SRQ: shared receive queue) plus what DAT
 *        keeps that the access layer does not: consumer contexts, the EP state DAT defines, dependants.
 *
 * Every handle is a Handle: its first word is the DAT_PROVIDER table of the dat.conf entry it was opened through
 * (libdat2 dispatches through it), then a live/dead marker and the kind. Handles are never given back to the heap:
 * a freed handle stays readable and says "dead", so a stale or freed handle gets DAT_INVALID_HANDLE, never a crash;
 * handle memory is reused only after a long quarantine.
 *
 * Slow-path calls (create, free, modify, connection management) serialise on their IA's mutex; the fast paths
 * (post, dequeue) read only fields fixed at creation.
 */
#ifndef DAPL_DAPL_HPP
#define DAPL_DAPL_HPP

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>

#ifdef OPENRDMA_KDAPL
#include <dat2/kdat.h>
#else
#include <dat2/udat.h>
#endif
#ifndef OPENRDMA_KDAPL
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

#include <cstdarg>
#endif

/** A DAT error status: its class, type and subtype (the headers name the parts, not the sum). */
#ifndef DAT_ERROR
#define DAT_ERROR(type, subtype) (static_cast<DAT_RETURN>(DAT_CLASS_ERROR | (type) | (subtype)))
#endif

#include "rnicpi/cpp/status.hpp"
#include "ual/access_layer.hpp"

/** Marks a DAT entry point that libdat2 finds by name: C linkage, exported (everything else stays hidden). */
#define DAPL_EXPORT extern "C" __attribute__((visibility("default")))

namespace dapl {

/** @brief The DAT handle kinds (the same order as ::DAT_HANDLE_TYPE). */
enum class Kind : uint32_t { cr, ep, evd, ia, lmr, psp, pz, rmr, rsp, cno, srq, csp };

struct Ia;
struct Body;

#ifdef OPENRDMA_KDAPL
/**
 * @brief kDAPL's provider record. krdmad's dat_* functions call this provider directly, so there is no dispatch
 *        table; a handle's first word still names its provider (the layout a kDAT registry dispatches through).
 */
struct KdatProvider {
    const char *device_name = nullptr; /**< The IA name. */
    void *extension = nullptr;         /**< Unused. */
};
using ProviderTable = KdatProvider;
#else
using ProviderTable = DAT_PROVIDER; /**< libdat2's dispatch table. */
#endif

/** @brief One registered dat.conf entry (kDAPL: one IA name): the table handles point to, what the entry names. */
struct Provider {
    ProviderTable table{};  /**< First: handles point here. */
    DAT_PROVIDER_INFO info{}; /**< As registered. */
    std::string ia_name;    /**< The entry's IA name (table.device_name points into it). */
    std::string rnic;       /**< The RNIC named by ia_params (a name or an address); empty: the first RNIC. */
    std::string params_error; /**< Why ia_params could not be used (dat_ia_open then fails and says it). */
};

/** @brief A DAT handle. Its first word is the provider table (DAT_HANDLE_TO_PROVIDER). */
struct Handle {
    const ProviderTable *provider = nullptr; /**< The dispatch table. */
    std::atomic<uint32_t> magic{0};         /**< kLive while the object lives. */
    Kind kind = Kind::ia;                   /**< What it is. */
    Body *body = nullptr;                   /**< The object; null once freed. */
};

/** @brief Marks a live handle. */
inline constexpr uint32_t kLive = 0x4441504cu;  // "DAPL"
/** @brief Marks a freed handle. */
inline constexpr uint32_t kDead = 0xdeadda7au;

/** @brief A fresh handle of @p kind for @p body, dispatching through @p provider (null when out of memory). */
Handle *make_handle(const ProviderTable *provider, Kind kind, Body *body) noexcept;
/** @brief Marks @p h dead; its memory is reused only after a quarantine. */
void retire_handle(Handle *h) noexcept;

/** @brief The live object of kind @p T behind @p h, or null (null, freed, stale or of another kind). */
template <class T>
T *lookup(const void *h) noexcept {
    if (h == nullptr) return nullptr;
    auto *handle = static_cast<const Handle *>(h);
    if (handle->magic.load(std::memory_order_acquire) != kLive || handle->kind != T::kKind) return nullptr;
    return static_cast<T *>(handle->body);
}

/** @brief Whatever lives behind @p h, or null. */
inline Body *lookup_any(const void *h) noexcept {
    if (h == nullptr) return nullptr;
    auto *handle = static_cast<const Handle *>(h);
    return handle->magic.load(std::memory_order_acquire) == kLive ? handle->body : nullptr;
}

/** @brief The base of every object: its handle, its consumer context and its IA. */
struct Body {
    explicit Body(Kind k, Ia *owner) noexcept : kind(k), ia(owner) {}
    virtual ~Body() = default;
    Kind kind;                 /**< What it is. */
    Ia *ia;                    /**< The IA it belongs to (itself for an IA). */
    Handle *handle = nullptr;  /**< Its handle. */
    DAT_CONTEXT context{};     /**< dat_set_consumer_context. */
    uint32_t users = 0;        /**< Objects that depend on it (under the IA's mutex): non-zero refuses free. */
    /** @brief The handle as a DAT handle of any type. */
    template <class H = DAT_HANDLE>
    [[nodiscard]] H dat() const noexcept {
        return static_cast<H>(static_cast<void *>(handle));
    }
};

struct Evd;
struct Cno;
struct Ep;
struct Psp;
struct Rsp;
struct Cr;

/** @brief An interface adapter: one open of an RNIC. */
struct Ia : Body {
    static constexpr Kind kKind = Kind::ia; /**< Handle kind. */
    Ia() noexcept : Body(kKind, this) {}
    Provider *provider = nullptr;           /**< The dat.conf entry it was opened through. */
    std::shared_ptr<ual::AccessLayer> al;   /**< The process's access layer. */
    std::shared_ptr<ual::Adapter> adapter;  /**< The RNIC open. */
    ri_rnic_attr_t attr{};                  /**< Query RNIC. */
    sockaddr_storage address{};             /**< The RNIC's network address (ia_address_ptr). */
    std::recursive_mutex mutex;             /**< Serialises the slow path of everything on this IA. */
    std::vector<Body *> objects;            /**< Every object created on it (owned). */
    Evd *async_evd = nullptr;               /**< The asynchronous EVD. */
    bool own_async = false;                 /**< The async EVD was made by dat_ia_open (freed with the IA). */
    DAT_IA_HANDLE public_handle = nullptr;  /**< The handle libdat2 gave the consumer (for queries). */
};

/** @brief A protection zone. */
struct Pz : Body {
    static constexpr Kind kKind = Kind::pz; /**< Handle kind. */
    explicit Pz(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::ProtectionZone> pz; /**< The access layer's zone. */
};

#ifndef OPENRDMA_KDAPL
/** @brief What a CNO's notifiers reach (shared: a notifier already queued may run after the CNO is freed). */
struct CnoCore {
    std::mutex mutex;                      /**< Guards what follows. */
    std::condition_variable cv;            /**< Wakes dat_cno_wait. */
    std::vector<DAT_EVD_HANDLE> triggered; /**< EVDs that fired since they were last reported, oldest first. */
    DAT_OS_WAIT_PROXY_AGENT agent{};       /**< Called with each triggering EVD (may be empty). */
    int fd = -1;                           /**< An eventfd readable while triggered (dat_cno_fd_create), else -1. */
    ~CnoCore();
    /** @brief An event reached @p evd: remember it, wake the waiter, raise the fd, call the agent (any thread). */
    void trigger(DAT_EVD_HANDLE evd);
};

/** @brief A consumer notification object: wakes a waiter when an EVD attached to it gets an event. */
struct Cno : Body {
    static constexpr Kind kKind = Kind::cno; /**< Handle kind. */
    explicit Cno(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<CnoCore> core = std::make_shared<CnoCore>(); /**< Where notifications land. */
    bool fd_cno = false;                     /**< Made by dat_cno_fd_create (proxy type FD). */
    std::vector<Evd *> evds;                 /**< The EVDs attached to it (under the IA's mutex). */
};
#else
struct Cno;  // kDAT has no CNO
#endif

/** @brief An event dispatcher: the DTO/bind completions of its CQ, and a queue of every other kind of event. */
struct Evd : Body {
    static constexpr Kind kKind = Kind::evd; /**< Handle kind. */
    explicit Evd(Ia *owner) noexcept : Body(kKind, owner) {}
    DAT_EVD_FLAGS flags = DAT_EVD_DEFAULT_FLAG;     /**< Creation flags. */
    DAT_COUNT qlen = 0;                              /**< Queue length in effect. */
    std::shared_ptr<ual::SimpleDispatcher> dto;      /**< DTO/RMR-bind EVDs: the CQ's dispatcher. */
    std::shared_ptr<ual::CompletionQueue> cq;        /**< DTO/RMR-bind EVDs: the completion queue. */
    std::shared_ptr<ual::SimpleDispatcher> queue;    /**< Every other event (connection, async, software). */
    std::shared_ptr<ual::SimpleDispatcher> requests; /**< CR EVDs: connection requests (the uAL's listen stream). */
    std::shared_ptr<ual::AggregateDispatcher> agg;   /**< Both, for waiting. */
    const ri_verbs_ops_t *verbs = nullptr;           /**< Fast path: the provider's verbs. */
    ri_cq_t cq_handle = nullptr;                     /**< Fast path: the provider's CQ. */
    std::vector<DAT_EVENT> ring;                     /**< Converted events not yet returned (threshold waits). */
    size_t head = 0, count = 0;                      /**< Ring state. */
    /** dat_evd_enable / disable; shared with CNO notifiers, which may run once more after the EVD is freed. */
    std::shared_ptr<std::atomic<bool>> enabled = std::make_shared<std::atomic<bool>>(true);
    std::atomic<bool> waitable{true};                /**< dat_evd_set_unwaitable / clear_unwaitable. */
    std::atomic<bool> waiting{false};                /**< A thread is in dat_evd_wait. */
    Cno *cno = nullptr;                              /**< The CNO it triggers. */
#ifdef OPENRDMA_KDAPL
    /** kDAPL: the EVD's upcall state, shared with notifications that may still run after it is freed. */
    std::shared_ptr<struct Upcalls> upcalls;
#endif
    /** @brief Whether its events come from a CQ. */
    [[nodiscard]] bool has_cq() const noexcept { return static_cast<bool>(cq); }
};

/** @brief The storage of an EP's connection event data (the event points into it until the next one). */
struct ConnData {
    std::vector<uint8_t> private_data; /**< The peer's private data. */
};

struct Srq;

/** @brief An endpoint (RC). */
struct Ep : Body {
    static constexpr Kind kKind = Kind::ep; /**< Handle kind. */
    explicit Ep(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::Endpoint> ep;          /**< The access layer's endpoint (null until configured). */
    std::shared_ptr<ual::SimpleDispatcher> cm;  /**< Its own connection-event dispatcher (moves the state). */
    Pz *pz = nullptr;                           /**< Its protection zone. */
    Evd *request = nullptr;                     /**< Request (send queue) EVD. */
    Evd *recv = nullptr;                        /**< Receive EVD. */
    Evd *connect = nullptr;                     /**< Connection EVD (may be another IA's: see ep.cpp). */
    DAT_EVD_HANDLE connect_handle = DAT_HANDLE_NULL; /**< Its handle, which stays readable if that IA closes first. */
    Srq *srq = nullptr;                         /**< Its SRQ, if any. */
    const ri_verbs_ops_t *verbs = nullptr;      /**< Fast path: the provider's verbs. */
    ri_qp_t qp = nullptr;                       /**< Fast path: the provider's QP. */
    DAT_EP_ATTR attr{};                         /**< Attributes in effect. */
    /** DAT_EP_STATE, shared with the connection-event callback (which may outlive a freed EP briefly). */
    std::shared_ptr<std::atomic<int>> state = std::make_shared<std::atomic<int>>(DAT_EP_STATE_UNCONNECTED);
    sockaddr_storage remote{};                  /**< The peer's address once connecting. */
    DAT_PORT_QUAL remote_port = 0;              /**< The peer's port. */
    DAT_PORT_QUAL local_port = 0;               /**< This side's port. */
    uint32_t recv_watermark = 0, send_watermark = 0; /**< dat_ep_set_watermark. */
    std::atomic<int32_t> recv_posted{0};        /**< Receives posted minus completed (dat_ep_recv_query). */
    std::mutex bind_mutex;                      /**< Guards binds and next_bind. */
    /** RMR binds in flight (posted as Bind Memory Window work requests): work request id -> RMR handle, cookie. */
    std::unordered_map<uint64_t, std::pair<DAT_RMR_HANDLE, uint64_t>> binds;
    uint64_t next_bind = 1;                     /**< The next bind's work request id. */
    std::mutex conn_mutex;                      /**< Guards conn_data. */
    std::vector<std::shared_ptr<ConnData>> conn_data; /**< Private data of delivered connection events. */
};

/** @brief A public service point: a listen point whose requests reach an EVD. */
struct Psp : Body {
    static constexpr Kind kKind = Kind::psp; /**< Handle kind. */
    explicit Psp(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::ListenPoint> lp; /**< The access layer's listen point. */
    Evd *evd = nullptr;                   /**< Where its requests go. */
    DAT_CONN_QUAL conn_qual = 0;          /**< The TCP port. */
    DAT_PSP_FLAGS flags = DAT_PSP_CONSUMER_FLAG; /**< Creation flags. */
};

/** @brief A reserved service point: a listen point for one request, bound to an EP. */
struct Rsp : Body {
    static constexpr Kind kKind = Kind::rsp; /**< Handle kind. */
    explicit Rsp(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::ListenPoint> lp; /**< The access layer's listen point. */
    Evd *evd = nullptr;                   /**< Where its request goes. */
    Ep *ep = nullptr;                     /**< The EP reserved for it. */
    DAT_CONN_QUAL conn_qual = 0;          /**< The TCP port. */
};

/** @brief A connection request, from its arrival until accept, reject or handoff. */
struct Cr : Body {
    static constexpr Kind kKind = Kind::cr; /**< Handle kind. */
    explicit Cr(Ia *owner) noexcept : Body(kKind, owner) {}
    uint64_t request = 0;                 /**< The access layer's request identifier. */
    ual::Event event;                     /**< The request as it arrived (for handoff). */
    sockaddr_storage remote{};            /**< The requester's address. */
    DAT_PORT_QUAL remote_port = 0;        /**< Its port. */
    DAT_CONN_QUAL conn_qual = 0;          /**< The port it arrived on. */
    std::vector<uint8_t> private_data;    /**< The requester's private data. */
    Ep *local_ep = nullptr;               /**< An RSP's reserved EP, or the EP the provider made (PROVIDER_FLAG). */
    bool provider_ep = false;             /**< local_ep was made by the provider (freed if the request is rejected). */
    Body *sp = nullptr;                   /**< The PSP it arrived on (null for an RSP's). */
};

/** @brief A local memory region. */
struct Lmr : Body {
    static constexpr Kind kKind = Kind::lmr; /**< Handle kind. */
    explicit Lmr(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::MemoryRegion> mr; /**< The access layer's region. */
    Pz *pz = nullptr;                      /**< Its zone. */
    DAT_MEM_TYPE mem_type = DAT_MEM_TYPE_VIRTUAL; /**< How it was described. */
    DAT_REGION_DESCRIPTION region{};       /**< As created. */
    void *addr = nullptr;                  /**< Start. */
    DAT_VLEN length = 0;                   /**< Length. */
    DAT_MEM_PRIV_FLAGS privs = DAT_MEM_PRIV_NONE_FLAG; /**< Privileges. */
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;  /**< Absolute or zero-based addressing. */
    DAT_LMR_CONTEXT lmr_context = 0;       /**< Local STag. */
    DAT_RMR_CONTEXT rmr_context = 0;       /**< Remote STag. */
};

/** @brief A remote memory region (a memory window). */
struct Rmr : Body {
    static constexpr Kind kKind = Kind::rmr; /**< Handle kind. */
    explicit Rmr(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::MemoryWindow> mw; /**< The access layer's window. */
    Pz *pz = nullptr;                      /**< Its zone. */
    Ep *scope_ep = nullptr;                /**< dat_rmr_create_for_ep: the EP it may be bound through. */
    Lmr *lmr = nullptr;                    /**< The region it is bound to, if any. */
    DAT_LMR_TRIPLET triplet{};             /**< The bound range. */
    DAT_MEM_PRIV_FLAGS privs = DAT_MEM_PRIV_NONE_FLAG; /**< Bound rights. */
    DAT_VA_TYPE va_type = DAT_VA_TYPE_VA;  /**< Addressing. */
    DAT_RMR_CONTEXT rmr_context = 0;       /**< Its STag. */
};

/** @brief A shared receive queue. */
struct Srq : Body {
    static constexpr Kind kKind = Kind::srq; /**< Handle kind. */
    explicit Srq(Ia *owner) noexcept : Body(kKind, owner) {}
    std::shared_ptr<ual::SharedReceiveQueue> srq; /**< The access layer's SRQ. */
    Pz *pz = nullptr;                             /**< Its zone. */
    const ri_verbs_ops_t *verbs = nullptr;        /**< Fast path: the provider's verbs. */
    ri_srq_t provider = nullptr;                  /**< Fast path: the provider's SRQ. */
    DAT_COUNT max_recv_dtos = 0;                  /**< Depth in effect. */
    DAT_COUNT max_recv_iov = 0;                   /**< Segments per receive. */
    DAT_COUNT low_watermark = DAT_SRQ_LW_DEFAULT; /**< Armed limit. */
    std::atomic<int32_t> posted{0};               /**< Receives posted minus completed. */
};

// --- shared helpers (ia.cpp) -----------------------------------------------------------------------------------

/** @brief Opens the RNIC @p provider names; the IA's handle in @p ia_handle (ia.cpp). */
DAT_RETURN open_ia(Provider &provider, DAT_COUNT async_qlen, DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia_handle);
/** @brief The process's access layer, opened on first use and shared by every IA. */
rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer();

/** @brief Makes a @p T on @p ia with a handle (the caller holds ia->mutex); null when out of memory. */
template <class T>
T *make_child(Ia *ia) noexcept {
    T *raw = nullptr;
    try {
        raw = new T(ia);
        raw->handle = make_handle(&ia->provider->table, T::kKind, raw);
        if (raw->handle == nullptr) {
            delete raw;
            return nullptr;
        }
        ia->objects.push_back(raw);
    } catch (...) {
        delete raw;
        return nullptr;
    }
    return raw;
}

/** @brief Retires @p o's handle and destroys it (the caller holds its IA's mutex). */
void destroy_child(Ia *ia, Body *o) noexcept;

/** @brief Records and logs why @p call failed; returns @p status. */
DAT_RETURN failed(const char *call, const rdma::Error &error, DAT_RETURN status);
/** @brief The DAT status for RNIC-PI/errno status @p code; @p fallback for codes with no general meaning. */
DAT_RETURN from_ri(int code, DAT_RETURN fallback) noexcept;

/** @brief The ::ri_access rights for DAT privileges @p privs. */
uint32_t access_of(DAT_MEM_PRIV_FLAGS privs) noexcept;

/** @brief The handle the consumer knows @p ia by (libdat2's public handle). */
DAT_IA_HANDLE public_ia(const Ia *ia) noexcept;

/** @brief @p addr as text ("" when not IPv4/IPv6). */
std::string address_text(const sockaddr *addr);
/** @brief Fills @p out with the address in @p a. */
void to_sockaddr(const ri_net_addr_t &a, uint16_t port, sockaddr_storage &out) noexcept;

// --- EVDs (evd.cpp) --------------------------------------------------------------------------------------------

/** @brief Posts an event of the uAL's kind @p e into @p evd's queue; false when full. */
bool post_event(Evd *evd, const ual::Event &e) noexcept;
/** @brief Markers of events the DAT layer posts itself into an EVD's queue (ual::Event::id, software stream). */
enum SoftwareKind : uint32_t {
    kConsumerEvent = 0, /**< dat_evd_post_se. */
    kRmrBind = 1,       /**< An RMR bind completed: context the RMR, resource_id the cookie, detail the status. */
    kWake = 2           /**< Wakes a waiter (unwaitable, CNO change); no event. */
};
/** @brief Detaches @p evd from everything and lets its dispatchers go (the caller holds the IA's mutex). */
void release_evd(Evd *evd) noexcept;
#ifndef OPENRDMA_KDAPL
/** @brief Attaches @p evd to @p cno (null: detaches). */
void attach_cno(Evd *evd, Cno *cno);
#else
/** @brief kDAPL: stops @p evd's upcalls and waits for those in progress (kdapl.cpp). */
void stop_upcalls(Evd *evd) noexcept;
#endif

// --- connections (ep.cpp) --------------------------------------------------------------------------------------

/** @brief Makes the CR of a request that reached @p sp (a Psp or Rsp); null when out of memory. */
Cr *make_cr(Ia *ia, const ual::Event &e);
/** @brief Makes the DAT connection event of access-layer event @p e for EP @p ep; false: none to deliver. */
bool connection_event(Ep *ep, const ual::Event &e, DAT_EVENT &out);
/** @brief Releases what @p ep holds (the caller holds the IA's mutex), disconnecting abruptly if connected. */
void release_ep(Ep *ep) noexcept;

// --- DAT entry points of the provider table ---------------------------------------------------------------------

/** @cond INTERNAL */
DAT_RETURN ia_open(const DAT_NAME_PTR, DAT_COUNT, DAT_EVD_HANDLE *, DAT_IA_HANDLE *);
DAT_RETURN ia_query(DAT_IA_HANDLE, DAT_EVD_HANDLE *, DAT_IA_ATTR_MASK, DAT_IA_ATTR *, DAT_PROVIDER_ATTR_MASK,
                    DAT_PROVIDER_ATTR *);
DAT_RETURN ia_close(DAT_IA_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN set_consumer_context(DAT_HANDLE, DAT_CONTEXT);
DAT_RETURN get_consumer_context(DAT_HANDLE, DAT_CONTEXT *);
DAT_RETURN get_handle_type(DAT_HANDLE, DAT_HANDLE_TYPE *);
DAT_RETURN pz_create(DAT_IA_HANDLE, DAT_PZ_HANDLE *);
DAT_RETURN pz_query(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, DAT_PZ_PARAM *);
DAT_RETURN pz_free(DAT_PZ_HANDLE);

DAT_RETURN cr_query(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, DAT_CR_PARAM *);
DAT_RETURN cr_accept(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN cr_reject(DAT_CR_HANDLE, DAT_COUNT, const DAT_PVOID);
DAT_RETURN cr_handoff(DAT_CR_HANDLE, DAT_CONN_QUAL);

DAT_RETURN evd_resize(DAT_EVD_HANDLE, DAT_COUNT);
DAT_RETURN evd_post_se(DAT_EVD_HANDLE, const DAT_EVENT *);
DAT_RETURN evd_dequeue(DAT_EVD_HANDLE, DAT_EVENT *);
DAT_RETURN evd_free(DAT_EVD_HANDLE);
DAT_RETURN evd_query(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, DAT_EVD_PARAM *);

DAT_RETURN ep_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
                     const DAT_EP_ATTR *, DAT_EP_HANDLE *);
DAT_RETURN ep_create_with_srq(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE,
                              DAT_SRQ_HANDLE, const DAT_EP_ATTR *, DAT_EP_HANDLE *);
DAT_RETURN ep_query(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, DAT_EP_PARAM *);
DAT_RETURN ep_modify(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, const DAT_EP_PARAM *);
DAT_RETURN ep_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_CONN_QUAL, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID,
                      DAT_QOS, DAT_CONNECT_FLAGS);
DAT_RETURN ep_common_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID);
DAT_RETURN ep_dup_connect(DAT_EP_HANDLE, DAT_EP_HANDLE, DAT_TIMEOUT, DAT_COUNT, const DAT_PVOID, DAT_QOS);
DAT_RETURN ep_disconnect(DAT_EP_HANDLE, DAT_CLOSE_FLAGS);
DAT_RETURN ep_post_send(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_send_with_invalidate(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
                                        DAT_COMPLETION_FLAGS, DAT_BOOLEAN, DAT_RMR_CONTEXT);
DAT_RETURN ep_post_recv(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_read(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                             DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_read_to_rmr(DAT_EP_HANDLE, const DAT_RMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                                    DAT_COMPLETION_FLAGS);
DAT_RETURN ep_post_rdma_write(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *,
                              DAT_COMPLETION_FLAGS);
DAT_RETURN ep_get_status(DAT_EP_HANDLE, DAT_EP_STATE *, DAT_BOOLEAN *, DAT_BOOLEAN *);
#if defined(DAT_EXTENSIONS) && !defined(OPENRDMA_KDAPL)
/** @brief dat_ib_post_rdma_write_immed: an RDMA Write, then RFC 7306 Immediate Data carrying @p immed. */
DAT_RETURN ib_post_rdma_write_immed(DAT_EP_HANDLE, DAT_COUNT, const DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
                                    const DAT_RMR_TRIPLET *, DAT_UINT32 immed, DAT_COMPLETION_FLAGS);
/** @brief dat_ib_post_cmp_and_swap (@p cmp_swap) or dat_ib_post_fetch_and_add: an RFC 7306 atomic. */
DAT_RETURN ib_post_atomic(DAT_EP_HANDLE, bool cmp_swap, DAT_UINT64 compare_add, DAT_UINT64 swap,
                          const DAT_LMR_TRIPLET *, DAT_DTO_COOKIE, const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS);
/** @brief The IB extensions' entry (DAT_PROVIDER::handle_extendedop_func). */
DAT_RETURN ib_extension_op(DAT_HANDLE, DAT_EXTENDED_OP, va_list);
/** @brief Makes DTO event @p out (filled from @p wc) OFED's DAT_IB_DTO_EVENT when @p wc is an RFC 7306 completion. */
void ib_dto_event(const ri_wc_t &wc, DAT_EVENT &out) noexcept;
#endif
DAT_RETURN ep_free(DAT_EP_HANDLE);
DAT_RETURN ep_reset(DAT_EP_HANDLE);
DAT_RETURN ep_recv_query(DAT_EP_HANDLE, DAT_COUNT *, DAT_COUNT *);
DAT_RETURN ep_set_watermark(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT);

DAT_RETURN lmr_free(DAT_LMR_HANDLE);
DAT_RETURN lmr_sync_rdma_read(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
DAT_RETURN lmr_sync_rdma_write(DAT_IA_HANDLE, const DAT_LMR_TRIPLET *, DAT_VLEN);
DAT_RETURN rmr_create(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN rmr_create_for_ep(DAT_PZ_HANDLE, DAT_RMR_HANDLE *);
DAT_RETURN rmr_query(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, DAT_RMR_PARAM *);
DAT_RETURN rmr_bind(DAT_RMR_HANDLE, DAT_LMR_HANDLE, const DAT_LMR_TRIPLET *, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE,
                    DAT_EP_HANDLE, DAT_RMR_COOKIE, DAT_COMPLETION_FLAGS, DAT_RMR_CONTEXT *);
DAT_RETURN rmr_free(DAT_RMR_HANDLE);

DAT_RETURN psp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, DAT_PSP_HANDLE *);
DAT_RETURN psp_create_any(DAT_IA_HANDLE, DAT_CONN_QUAL *, DAT_EVD_HANDLE, DAT_PSP_FLAGS, DAT_PSP_HANDLE *);
DAT_RETURN psp_query(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, DAT_PSP_PARAM *);
DAT_RETURN psp_free(DAT_PSP_HANDLE);
DAT_RETURN rsp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EP_HANDLE, DAT_EVD_HANDLE, DAT_RSP_HANDLE *);
DAT_RETURN rsp_query(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, DAT_RSP_PARAM *);
DAT_RETURN rsp_free(DAT_RSP_HANDLE);
DAT_RETURN csp_create(DAT_IA_HANDLE, DAT_COMM *, DAT_IA_ADDRESS_PTR, DAT_EVD_HANDLE, DAT_CSP_HANDLE *);
DAT_RETURN csp_query(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, DAT_CSP_PARAM *);
DAT_RETURN csp_free(DAT_CSP_HANDLE);

DAT_RETURN srq_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_SRQ_ATTR *, DAT_SRQ_HANDLE *);
DAT_RETURN srq_free(DAT_SRQ_HANDLE);
DAT_RETURN srq_post_recv(DAT_SRQ_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE);
DAT_RETURN srq_query(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, DAT_SRQ_PARAM *);
DAT_RETURN srq_resize(DAT_SRQ_HANDLE, DAT_COUNT);
DAT_RETURN srq_set_lw(DAT_SRQ_HANDLE, DAT_COUNT);
/** @endcond */

/** @brief What every LMR create shares (virtual memory): registers and fills @p out's fields. */
DAT_RETURN register_lmr(Ia *ia, Pz *pz, DAT_MEM_TYPE type, const DAT_REGION_DESCRIPTION &region, void *addr,
                        DAT_VLEN length, DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va_type, Lmr **out);
/** @brief Fills @p p from @p l for the fields of @p mask. */
void query_lmr(const Lmr *l, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *p) noexcept;

/** @brief Creates an EVD of @p flags and queue length @p qlen on @p ia (the caller holds ia->mutex). */
DAT_RETURN create_evd(Ia *ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags, Evd **out);
/** @brief The next event of @p evd without waiting; DAT_QUEUE_EMPTY when none. */
DAT_RETURN next_event(Evd *evd, DAT_EVENT *event);

}  // namespace dapl

#endif  // DAPL_DAPL_HPP
