/**
 * @file kal_link.hpp
 * @brief The uAL's one interface to its privileged side: how the access layer reaches a kAL.
 *
 * It is part of the contract between the layers (krdma/), not of the uAL library, so that the kAL implements it
 * without including anything of the uAL; its names stay in namespace ual, whose objects it serves.
 *
 * Two implementations exist, and the object model in access_layer.hpp never asks which one it has:
 * - the device link (ual/device): a process talks to krdmad's /dev/krdma (or to an embedded kAL over a socket
 *   pair); the verbs are a uVP's, whose privileged steps travel as ri_syscall over the device;
 * - the hosted link (kal/hosted): a consumer hosted in the kAL process (kernel IT-API, kDAPL) calls the kVP's
 *   verbs, and the kAL's commands run directly on its serving thread.
 *
 * Every object the access layer makes is one ObjectRef (the kAL's handle, the provider's object and its verbs).
 * Objects that receive events (RNIC opens, CQs, endpoints, listen points) are also named by a cookie the access
 * layer chooses: the kAL keeps it with the object and repeats it in every event record about it (as rdma-core's
 * user_handle), so events find their object without any table of kAL handles in the uAL.
 *
 * Slow-path calls return rdma::Expected so that the kAL's reason for a refusal reaches the consumer.
 */
#ifndef KRDMA_KAL_LINK_HPP
#define KRDMA_KAL_LINK_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "krdma/abi.h"
#include "krdma/message.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"

namespace ual {

/** @brief An RNIC as the kAL describes it. */
struct RnicDescription {
    std::string name;        /**< RNIC name. */
    std::string provider;    /**< Provider name. */
    std::string vendor;      /**< Provider vendor. */
    std::string netdev;      /**< Network device. */
    std::string address;     /**< Network address. */
    std::string uvp_library; /**< The uVP library (absolute path), empty for kAL-only RNICs. */
};

/** @brief What one uAL object holds of the layers beneath it. */
struct ObjectRef {
    uint64_t kal = 0;                      /**< The kAL's handle (0 when the kAL keeps no record of it). */
    void *provider = nullptr;              /**< The provider's object (ri_rnic_t, ri_pd_t, ri_cq_t...). */
    const ri_verbs_ops_t *verbs = nullptr; /**< The provider's verbs: a uVP's or, hosted, the kVP's. */
    uint32_t number = 0;                   /**< A QP's number when the kAL reported it at creation, else 0. */

    /** @brief The provider object as its RNIC-PI handle type. */
    template <class T>
    [[nodiscard]] T as() const noexcept {
        return static_cast<T>(provider);
    }
    /** @brief Whether it names an object (a listen point has only the kAL's handle). */
    [[nodiscard]] explicit operator bool() const noexcept { return provider != nullptr || kal != 0; }
};

/** @brief The kinds of objects a link destroys. */
enum class ObjectKind : uint8_t { rnic, pd, cq, qp, srq, mr, mw, listener };

/** @brief A listen point the kAL made. */
struct ListenResult {
    uint64_t handle = 0; /**< The kAL's handle. */
    uint16_t port = 0;   /**< The TCP port bound. */
};

/**
 * @brief Leader/follower for the kAL's records: a thread about to sleep until an event arrives reads the kAL's
 *        device itself and delivers what it reads, instead of sleeping while the link's event thread wakes, reads
 *        and then wakes it (one wake-up per record instead of two). One thread leads at a time; the event thread
 *        does the rest. Thread-safe.
 */
class EventPump {
public:
    virtual ~EventPump() = default;
    /**
     * @brief Reads and delivers the kAL's records in the calling thread until @p ready() holds, @p deadline passes,
     *        the link stops or nudge() is called. False at once, with nothing done, when another thread leads or
     *        delivers: the caller then waits as it would without a pump. @p ready must not call into the link.
     */
    virtual bool lead(std::chrono::steady_clock::time_point deadline, const std::function<bool()> &ready) = 0;
    /** @brief Wakes the thread that leads: what it waits for came from elsewhere (a provider's thread, a post). */
    virtual void nudge() noexcept = 0;
};

/**
 * @brief Where a link delivers what the kAL and the provider's own handlers report, each named by its object's
 *        cookie. Called from the link's event thread or a provider's thread; must not block for long.
 */
class LinkEvents {
public:
    virtual ~LinkEvents() = default;
    /** @brief An asynchronous event @p e of the RNIC open whose cookie is @p rnic (or of one of its resources). */
    virtual void async_event(uint32_t rnic, const ri_async_event_t &e) = 0;
    /** @brief The armed CQ whose cookie is @p cq has a completion. */
    virtual void completion(uint32_t cq) = 0;
    /**
     * @brief Connection event @p e (krdma_cm_event::cookie names the endpoint or, for a request, the listen point);
     *        @p fd is an ESTABLISHED record's socket where the consumer's provider runs the stream, and @p channel
     *        its end of the same-host channel when the kAL paired the two ends (::RI_LLP_SAME_HOST), else empty;
     *        @p byte_channel the end of the consumer's own channel when its CONVERT asked for one and got it
     *        (::KRDMA_CONVERT_BYTE_CHANNEL), else empty; @p link the two processes' link when it asked for one too
     *        and got it (::KRDMA_CONVERT_LINK), else empty.
     */
    virtual void connection(const krdma_cm_event &e, krdma::UniqueFd fd, krdma::UniqueFd channel,
                            krdma::UniqueFd byte_channel, krdma::UniqueFd link) = 0;
    /** @brief The kAL went away: every object of this access layer is unusable. */
    virtual void kal_gone() = 0;
};

/** @brief The privileged side of one access layer. Thread-safe. */
class KalLink {
public:
    virtual ~KalLink() = default;

    /** @brief Starts delivering events to @p sink; the link holds it weakly (a delivery keeps it alive). */
    [[nodiscard]] virtual rdma::Expected<void> start(std::weak_ptr<LinkEvents> sink) = 0;
    /** @brief What the link is ("krdmad", "embedded", "hosted"), for logs. */
    [[nodiscard]] virtual std::string_view kind() const noexcept = 0;
    /** @brief The kAL's identifier of this consumer (as rdmactl lists it). */
    [[nodiscard]] virtual uint32_t client_id() const noexcept = 0;
    /** @brief The link's EventPump, for dispatchers whose waiters may read the kAL themselves; null for none. */
    [[nodiscard]] virtual std::shared_ptr<EventPump> event_pump() { return nullptr; }
    /** @brief Whether the consumer's own TCP sockets can become streams (convert()). */
    [[nodiscard]] virtual bool can_convert_sockets() const noexcept = 0;
    /**
     * @brief The kAL's TCP peer-detection map for the sockets layer (PEER_MARKS); ::RI_EOPNOTSUPP, with the kAL's
     *        reason, when it has none.
     */
    [[nodiscard]] virtual rdma::Expected<krdma::UniqueFd> peer_marks() {
        return rdma::Error(RI_EOPNOTSUPP, "this link has no peer detection");
    }

    /** @brief The host's RNICs. */
    [[nodiscard]] virtual rdma::Expected<std::vector<RnicDescription>> rnics() = 0;
    /** @brief Opens @p rnic; its events carry @p cookie. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> open_rnic(const RnicDescription &rnic, uint32_t cookie) = 0;
    /** @brief Allocate PD on @p rnic. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> alloc_pd(const ObjectRef &rnic) = 0;
    /** @brief Create CQ of at least @p depth entries (updated to the depth provided); its events carry @p cookie. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> create_cq(const ObjectRef &rnic, uint32_t cookie,
                                                              uint32_t &depth) = 0;
    /** @brief Create QP in @p pd; @p attr is updated with what is in effect; its connection events carry @p cookie. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> create_qp(const ObjectRef &pd, const ObjectRef &send,
                                                              const ObjectRef &recv, const ObjectRef *srq,
                                                              ri_qp_init_attr_t &attr, uint32_t cookie) = 0;
    /** @brief Create SRQ in @p pd; @p attr is updated with what is in effect. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> create_srq(const ObjectRef &pd, ri_srq_attr_t &attr) = 0;
    /** @brief Register [@p addr, @p addr + @p length) in @p pd with ::ri_access @p access; @p keys gets the STags. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> register_mr(const ObjectRef &pd, void *addr, uint64_t length,
                                                                uint32_t access, ri_mr_keys_t &keys) = 0;
    /** @brief Allocate a memory window of ::ri_mw_type @p type in @p pd; @p rkey gets its STag. */
    [[nodiscard]] virtual rdma::Expected<ObjectRef> alloc_mw(const ObjectRef &pd, uint32_t type, ri_stag_t &rkey) = 0;
    /** @brief Destroys @p o of kind @p kind; ::RI_EBUSY while objects made under it or using it live. */
    [[nodiscard]] virtual rdma::Expected<void> destroy(ObjectKind kind, const ObjectRef &o) = 0;
    /** @brief Modify QP (a state change also moves the QP's connection: CLOSING orderly, ERROR abortive). */
    [[nodiscard]] virtual rdma::Expected<void> modify_qp(const ObjectRef &qp, const ri_qp_attr_t &attr,
                                                         uint32_t mask) = 0;
    /** @brief Modify SRQ with a mask of ::ri_srq_attr_mask. */
    [[nodiscard]] virtual rdma::Expected<void> modify_srq(const ObjectRef &srq, const ri_srq_attr_t &attr,
                                                          uint32_t mask) = 0;

    /**
     * @brief Listens on @p rnic's address at @p port (0: any) with @p backlog (0: the kAL's); requests carry
     *        @p context and @p cookie.
     */
    [[nodiscard]] virtual rdma::Expected<ListenResult> listen(const ObjectRef &rnic, uint16_t port, uint16_t backlog,
                                                              uint64_t context, uint32_t cookie) = 0;
    /** @brief Connects the IDLE @p qp to @p remote:@p port; the outcome is a connection event. */
    [[nodiscard]] virtual rdma::Expected<void> connect(const ObjectRef &qp, const ri_net_addr_t &remote, uint16_t port,
                                                       std::span<const uint8_t> private_data, uint64_t context,
                                                       uint32_t timeout_ms) = 0;
    /**
     * @brief connect() without waiting for the kAL's answer: a refusal arrives as an UNREACHABLE connection event
     *        of @p qp (its status the refusal's code; @p cookie routes it). The default waits, as connect() does.
     */
    [[nodiscard]] virtual rdma::Expected<void> connect_async(const ObjectRef &qp, const ri_net_addr_t &remote,
                                                             uint16_t port, std::span<const uint8_t> private_data,
                                                             uint64_t context, uint32_t timeout_ms, uint32_t cookie) {
        (void)cookie;
        return connect(qp, remote, port, private_data, context, timeout_ms);
    }
    /** @brief Accepts connection request @p request with the IDLE @p qp. */
    [[nodiscard]] virtual rdma::Expected<void> accept(uint64_t request, const ObjectRef &qp,
                                                      std::span<const uint8_t> private_data, uint64_t context) = 0;
    /**
     * @brief accept() without waiting for the kAL's answer: a refusal arrives as a BROKEN connection event of
     *        @p qp (its status the refusal's code; @p cookie routes it). The default waits, as accept() does.
     */
    [[nodiscard]] virtual rdma::Expected<void> accept_async(uint64_t request, const ObjectRef &qp,
                                                            std::span<const uint8_t> private_data, uint64_t context,
                                                            uint32_t cookie) {
        (void)cookie;
        return accept(request, qp, private_data, context);
    }
    /** @brief Rejects connection request @p request. */
    [[nodiscard]] virtual rdma::Expected<void> reject(uint64_t request, std::span<const uint8_t> private_data) = 0;
    /**
     * @brief Makes the connected TCP socket @p fd the IDLE @p qp's stream after MPA negotiation (::krdma_convert_role
     *        @p role) and ::krdma_convert_flags @p flags (dropped, not refused, where the kAL is older than minor 6);
     *        ::RI_EOPNOTSUPP where the consumer has no sockets of its own (hosted).
     */
    [[nodiscard]] virtual rdma::Expected<void> convert(const ObjectRef &qp, int fd,
                                                       std::span<const uint8_t> private_data, uint32_t role,
                                                       uint32_t flags, uint64_t context, uint32_t timeout_ms) = 0;
    /**
     * @brief The consumer's half of the RDMA-mode transition, after ESTABLISHED: the provider takes the stream
     *        (@p fd with @p llp, and on the same-host path, ::RI_LLP_SAME_HOST in its flags, the channel's end
     *        @p channel as ri_llp_params_t::channel) where the consumer runs it; nothing where the kAL's provider
     *        already has it.
     */
    [[nodiscard]] virtual rdma::Expected<void> take_stream(const ObjectRef &qp, const ri_llp_params_t &llp,
                                                           krdma::UniqueFd fd, krdma::UniqueFd channel) = 0;
    /**
     * @brief The kAL reported the end of @p qp's connection: a stream the consumer runs stops (the QP to ERROR,
     *        posted work flushes) before the consumer is told; nothing where the kAL already moved it.
     */
    virtual void stream_ended(const ObjectRef &qp) noexcept = 0;
};

/**
 * @brief A kAL embedded in this process, as the uAL's device link takes it: the uAL's end of a connected device
 *        socket, and what keeps the kAL serving it (released after the link's last use of it).
 */
struct EmbeddedDevice {
    krdma::UniqueFd socket;           /**< The uAL's end of the device connection. */
    std::shared_ptr<void> keep_alive; /**< Keeps the embedded kAL running. */
};

/**
 * @brief Starts an embedded kAL from configuration file @p config and returns the device connection to it (see
 *        kal/embedded); the uAL makes its device link over it, as over krdmad's device.
 */
using EmbeddedLinkStarter = rdma::Expected<EmbeddedDevice> (*)(const std::string &config);

}  // namespace ual

#endif  // KRDMA_KAL_LINK_HPP
