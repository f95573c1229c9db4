/**
 * @file objects.hpp
 * @brief The objects behind IT-API handles, each a thin holder of the access layer's object of the same kind
 *        (IA: adapter, PZ: protection zone, SEVD: simple dispatcher and, for DTO streams, its completion queue,
 *        AEVD: aggregate dispatcher, EP: endpoint, LMR: region, RMR: window, SRQ: shared receive queue) plus what
 *        IT-API keeps that the access layer does not: consumer contexts, the EP state IT-API defines, dependants.
 *
 * Slow-path calls (create, free, modify, connection management) serialise on their IA's mutex; the fast paths
 * (post, dequeue) read only fields fixed at creation.
 */
#ifndef ITAPI_OBJECTS_HPP
#define ITAPI_OBJECTS_HPP

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "handles.hpp"
#include "ual/access_layer.hpp"

namespace itapi {

struct Ia;

/** @brief An object that belongs to an IA. */
struct Child : Object {
    /** @brief A child of @p owner. */
    Child(it_handle_type_enum_t t, Ia *owner) noexcept : Object(t), ia(owner) {}
    Ia *ia;             /**< The IA it was created on. */
    uint32_t users = 0; /**< Objects that depend on it (under the IA's mutex): a non-zero count refuses free. */
};

struct Evd;

/** @brief An interface adapter. */
struct Ia : Object {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_IA; /**< Handle type. */
    Ia() noexcept : Object(kType) {}
    std::shared_ptr<ual::AccessLayer> al;       /**< The process's access layer. */
    std::shared_ptr<ual::Adapter> adapter;      /**< The RNIC open. */
    std::string name;                           /**< The name it was created with. */
    ri_rnic_attr_t attr{};                      /**< Query RNIC. */
    it_net_addr_t address{};                    /**< The RNIC's network address (spigot 0). */
    uint32_t major = 2, minor = 1;              /**< The API version the consumer asked for. */
    std::mutex mutex;                           /**< Serialises the slow path of everything on this IA. */
    std::map<Object *, std::unique_ptr<Object>> objects; /**< Every object created on it. */
    Evd *affiliated = nullptr;                  /**< The affiliated async SEVD, if any. */
    Evd *unaffiliated = nullptr;                /**< The unaffiliated async SEVD, if any. */
    std::unordered_map<ri_stag_t, uint64_t> stags; /**< Remote STag -> LMR/RMR handle (unlinked_mr_handle). */
};

/** @brief A protection zone. */
struct Pz : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_PZ; /**< Handle type. */
    explicit Pz(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::ProtectionZone> pz; /**< The access layer's zone. */
};

/** @brief A simple or aggregate event dispatcher. */
struct Evd : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_EVD; /**< Handle type. */
    explicit Evd(Ia *owner) noexcept : Child(kType, owner) {}
    it_event_type_t stream = IT_DTO_EVENT_STREAM;   /**< The stream (IT_AEVD_NOTIFICATION_EVENT_STREAM: an AEVD). */
    it_evd_flags_t flags = static_cast<it_evd_flags_t>(0); /**< Creation flags. */
    size_t queue_size = 0;                          /**< SEVD queue size. */
    size_t threshold = 0;                           /**< SEVD threshold. */
    std::shared_ptr<ual::SimpleDispatcher> sd;      /**< SEVD: its dispatcher. */
    std::shared_ptr<ual::CompletionQueue> cq;       /**< DTO SEVD: the completion queue it is. */
    std::shared_ptr<ual::AggregateDispatcher> agg;  /**< AEVD: its aggregate. */
    Evd *aevd = nullptr;                            /**< SEVD: the AEVD it feeds, if any. */
    const ri_verbs_ops_t *verbs = nullptr;          /**< DTO SEVD: the provider's verbs (fast-path poll). */
    ri_cq_t cq_handle = nullptr;                    /**< DTO SEVD: the provider's CQ. */
    it_evd_callback_rtn_t callback = nullptr;       /**< An attached callback. */
    void *callback_arg = nullptr;                   /**< Its argument. */
    /** IT_EVD_DEQUEUE_NOTIFICATIONS: events its AEVD took and announced, waiting for it_evd_dequeue here. */
    std::deque<ual::Event> stash;
    std::mutex stash_mutex;            /**< Guards stash. */
    std::atomic<bool> stashed{false};  /**< Whether stash may hold events (checked without the lock). */
    /** @brief Whether this is an AEVD. */
    [[nodiscard]] bool aggregate() const noexcept { return stream == IT_AEVD_NOTIFICATION_EVENT_STREAM; }
};

struct Srq;

/** @brief An endpoint (RC). */
struct Ep : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_EP; /**< Handle type. */
    explicit Ep(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::Endpoint> ep;          /**< The access layer's endpoint. */
    std::shared_ptr<ual::SimpleDispatcher> cm;  /**< Its own connection-event dispatcher (see ep.cpp). */
    Pz *pz = nullptr;                           /**< Its protection zone. */
    Evd *request = nullptr;                     /**< Request (send queue) DTO SEVD. */
    Evd *recv = nullptr;                        /**< Receive DTO SEVD. */
    Evd *connect = nullptr;                     /**< Connection-event SEVD. */
    Srq *srq = nullptr;                         /**< Its S-RQ, if any. */
    const ri_verbs_ops_t *verbs = nullptr;      /**< Fast path: the provider's verbs. */
    ri_qp_t qp = nullptr;                       /**< Fast path: the provider's QP. */
    it_ep_attributes_t attr{};                  /**< Attributes in effect. */
    it_path_t path{};                           /**< The path it connected on (query). */
    /** it_ep_state_rc_t, shared with the connection-event callback (which may outlive a freed EP briefly). */
    std::shared_ptr<std::atomic<int>> state = std::make_shared<std::atomic<int>>(IT_EP_STATE_UNCONNECTED);
};

/** @brief A listen point. */
struct Listen : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_LISTEN; /**< Handle type. */
    explicit Listen(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::ListenPoint> lp; /**< The access layer's listen point. */
    Evd *evd = nullptr;                   /**< Where its requests go. */
    uint16_t port = 0;                    /**< TCP port, host order. */
    bool lr_port = false;                 /**< Listened with IT_IANA_LR_PORT (queries answer the same type). */
};

/** @brief A local memory region. */
struct Lmr : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_LMR; /**< Handle type. */
    explicit Lmr(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::MemoryRegion> mr;  /**< The access layer's region. */
    Pz *pz = nullptr;                       /**< Its zone. */
    void *addr = nullptr;                   /**< Start. */
    it_length_t length = 0;                 /**< Length. */
    it_mem_priv_t privs = IT_PRIV_NONE;     /**< Privileges. */
    it_lmr_flag_t flags = IT_LMR_FLAG_NONE; /**< Flags. */
    it_addr_mode_t mode = IT_ADDR_MODE_ABSOLUTE; /**< Absolute or relative (zero-based) addressing. */
    uint32_t shared_id = 0;                 /**< As created. */
    ri_stag_t lkey = 0;                     /**< Local STag (fast path). */
    ri_stag_t rkey = 0;                     /**< Remote STag (the RMR context). */
    uint64_t base = 0;                      /**< Tagged offset of addr (0 for relative addressing). */
};

/** @brief A remote memory region (memory window). */
struct Rmr : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_RMR; /**< Handle type. */
    explicit Rmr(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::MemoryWindow> mw; /**< The access layer's window. */
    Pz *pz = nullptr;                      /**< Its zone. */
    it_rmr_type_t rmr_type = IT_RMR_TYPE_NARROW; /**< Narrow (QP-bound, type 2) or wide (type 1). */
    std::atomic<bool> linked{false};       /**< Bound to a region. */
    Lmr *lmr = nullptr;                    /**< The region it is linked to. */
    void *addr = nullptr;                  /**< Linked range. */
    it_length_t length = 0;                /**< Linked length. */
    it_mem_priv_t privs = IT_PRIV_NONE;    /**< Linked rights. */
    it_addr_mode_t mode = IT_ADDR_MODE_ABSOLUTE; /**< Addressing. */
};

/** @brief A shared receive queue. */
struct Srq : Child {
    static constexpr it_handle_type_enum_t kType = IT_HANDLE_TYPE_SRQ; /**< Handle type. */
    explicit Srq(Ia *owner) noexcept : Child(kType, owner) {}
    std::shared_ptr<ual::SharedReceiveQueue> srq; /**< The access layer's SRQ. */
    Pz *pz = nullptr;                             /**< Its zone. */
    const ri_verbs_ops_t *verbs = nullptr;        /**< Fast path: the provider's verbs. */
    ri_srq_t provider = nullptr;                  /**< Fast path: the provider's SRQ. */
    size_t max_recv_dtos = 0;                     /**< Depth in effect. */
    size_t max_recv_segs = 0;                     /**< Segments per receive. */
    size_t low_watermark = 0;                     /**< Armed limit. */
};

}  // namespace itapi

#endif  // ITAPI_OBJECTS_HPP
