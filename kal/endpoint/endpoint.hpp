/**
 * @file endpoint.hpp
 * @brief Endpoint management of the kAL (OpenRDMA section 3): a QP's connection and the owner of every endpoint of
 *        one device.
 *
 * An Endpoint keeps a QP's connection in step with its socket and its QP: setup (TCP, MPA through
 * kal/llp/mpa_session), the RDMA-mode transition, and the kAL's watch over the socket afterwards. Its state moves
 * only through the state machine beside it (endpoint_fsm.hpp): the endpoint observes the socket, the MPA session
 * and the kVP, feeds what it saw to the machine, and carries out each step. Endpoints, their owner, holds what they
 * share: the device server that watches their sockets, the LLP settings and counters, the abortive closes that
 * wait for their last bytes, and the deadlines tick() visits.
 *
 * Everything runs on the device server's thread, so neither takes a lock.
 */
#ifndef KAL_ENDPOINT_ENDPOINT_HPP
#define KAL_ENDPOINT_ENDPOINT_HPP

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "abort_linger.hpp"
#include "endpoint_fsm.hpp"
#include "krdma/abi.h"
#include "kvp_object.hpp"
#include "llp_settings.hpp"
#include "mpa_session.hpp"
#include "peer_detection.hpp"
#include "rendezvous.hpp"
#include "server.hpp"

namespace kal {

/** @brief Counters of LLP management since start. */
struct LlpCounters {
    uint64_t active_opens = 0;       /**< CONNECTs started. */
    uint64_t passive_opens = 0;      /**< TCP connections accepted on listen points. */
    uint64_t established = 0;        /**< RDMA-mode transitions done. */
    uint64_t rejected = 0;           /**< Requests rejected (by a consumer, or refused by our MPA policy). */
    uint64_t peer_rejected = 0;      /**< Our requests the peer rejected. */
    uint64_t failed = 0;             /**< Setups that failed (unreachable, bad MPA, transition refused). */
    uint64_t timeouts = 0;           /**< Setups that ran out of time. */
    uint64_t peer_disconnects = 0;   /**< Connections the peer closed in order. */
    uint64_t resets = 0;             /**< Connections reset or broken (by the peer or by us). */
    uint64_t tcp_connect_ns = 0;     /**< Active setups: CONNECT served to TCP connected, summed. */
    uint64_t mpa_active_ns = 0;      /**< Active setups: TCP connected to RDMA mode, summed. */
    uint64_t request_ns = 0;         /**< Passive setups: TCP accepted to the request reported, summed. */
    uint64_t decision_ns = 0;        /**< Passive setups: the request reported to ACCEPT served, summed. */
    uint64_t accept_ns = 0;          /**< Passive setups: ACCEPT served to RDMA mode, summed. */
};

/**
 * @brief Nanoseconds from @p at to now, for LlpCounters' sums of setup steps; @p at becomes now, where the next
 *        step begins (one clock read for both).
 */
[[nodiscard]] inline uint64_t lap(std::chrono::steady_clock::time_point &at) noexcept {
    const auto now = std::chrono::steady_clock::now();
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - at).count();
    at = now;
    return static_cast<uint64_t>(ns);
}

/** @brief One endpoint as the administrator sees it. */
struct EndpointInfo {
    uint32_t client_id = 0;     /**< Owner's device connection. */
    uint64_t qp = 0;            /**< kAL handle of the QP. */
    uint32_t qp_num = 0;        /**< The QP number. */
    std::string rnic;           /**< RNIC name. */
    uint32_t state = 0;         /**< ::krdma_ep_state. */
    std::string local, remote;  /**< "address:port". */
    ri_llp_params_t llp{};      /**< Negotiated parameters (when connected). */
    int fd = -1;                /**< The kAL's reference to the socket (for TCP_INFO), or -1. */
    ri_qp_stats_t rdma{};       /**< The QP's data-path counters, from the kVP (zero when it keeps none). */
    /** @brief Whether the stream moves over a same-host channel (::RI_LLP_SAME_HOST) rather than the wire. */
    [[nodiscard]] bool same_host() const noexcept { return (llp.mpa_flags & RI_LLP_SAME_HOST) != 0; }
};

/** @brief The path of a connection with negotiated parameters @p llp: "same-host" or "wire". */
[[nodiscard]] inline const char *path_name(const ri_llp_params_t &llp) noexcept {
    return (llp.mpa_flags & RI_LLP_SAME_HOST) != 0 ? "same-host" : "wire";
}

/**
 * @brief What pairing two endpoints of one host (the same-host path) asks of the rest of the kAL: system call
 *        management's tables and memory management's accounts. Without them no endpoint is paired.
 */
struct SameHostHooks {
    /** @brief The RNIC open that QP @p qp of client @p client belongs to, or null. */
    std::function<KvpObject *(uint32_t client, Handle qp)> open_of;
    /**
     * @brief Charges @p bytes of channel memory to client @p client's process: a token that gives them back when
     *        released, or the refusal (over a limit: the connection stays on the wire).
     */
    std::function<rdma::Expected<std::shared_ptr<void>>(uint32_t client, uint64_t bytes)> charge;
    /**
     * @brief The process behind client @p client (SO_PEERCRED, in the kAL's pid namespace), or null: for single copy
     *        (ri_channel.h), the kAL names each QP's peer process only when it can vouch for both. Optional.
     */
    std::function<const Peer *(uint32_t client)> peer_of;
    /** @brief Whether both hooks are set. */
    [[nodiscard]] explicit operator bool() const noexcept { return open_of && charge; }
};

using llp::StreamEnd;

/** @brief A connection event record of @p type about kAL object @p object, with the consumer's @p context. */
[[nodiscard]] inline krdma_cm_event cm_event(uint32_t type, uint64_t object, uint64_t context) {
    krdma_cm_event e{};
    e.event = KRDMA_EVENT_CM;
    e.type = type;
    e.object = object;
    e.context = context;
    e.llp.fd = -1;
    return e;
}

class Endpoint;

/** @brief Every endpoint of one device, and what they share (serving thread). */
class Endpoints {
public:
    /** @brief The clock of every deadline. */
    using Clock = std::chrono::steady_clock;
    /** @brief Sends a connection event @p record with @p fds to client @p client_id; false when it could not. */
    using Deliver = std::function<bool(uint32_t client_id, std::span<const uint8_t> record, std::span<const int> fds)>;

    /**
     * @brief Endpoints whose sockets @p server watches, set up with @p settings, reporting through @p deliver; with
     *        @p same_host set (and LlpSettings::same_host enabled), two endpoints of one connection are paired.
     */
    Endpoints(DeviceServer &server, const LlpSettings &settings, Deliver deliver, SameHostHooks same_host = {});
    Endpoints(const Endpoints &) = delete;
    Endpoints &operator=(const Endpoints &) = delete;
    /** @brief Detaches every endpoint: they live in the consumers' tables, which may outlive this object. */
    ~Endpoints() { detach_all(); }

    /** @brief The first endpoint, in the order LIST_ENDPOINTS walks them. */
    [[nodiscard]] std::set<Endpoint *>::const_iterator begin() const noexcept { return all_.begin(); }
    /** @brief Past the last endpoint. */
    [[nodiscard]] std::set<Endpoint *>::const_iterator end() const noexcept { return all_.end(); }
    /** @brief How many endpoints there are. */
    [[nodiscard]] size_t size() const noexcept { return all_.size(); }
    /** @brief Counters of LLP management. */
    [[nodiscard]] LlpCounters &counters() noexcept { return counters_; }
    /** @brief The kAL's TCP peer detection (ConnectionCommands' own), for RFC 7306 with peers of this stack. */
    void set_peer_detection(llp::PeerDetection *detection) noexcept { detection_ = detection; }
    /** @brief Marks LLP socket @p fd before connect() or listen() (llp::PeerDetection::mark()); false when it cannot. */
    bool mark_socket(int fd) { return detection_ != nullptr && detection_->mark(fd); }
    /** @brief Whether established socket @p fd's peer said in its handshake that it runs this stack. */
    [[nodiscard]] bool peer_runs_stack(int fd) { return detection_ != nullptr && detection_->peer_marked(fd); }
    /** @brief Counters of LLP management. */
    [[nodiscard]] const LlpCounters &counters() const noexcept { return counters_; }
    /** @brief Abortive closes that wait for a socket's last bytes to be acknowledged. */
    [[nodiscard]] llp::AbortLinger &linger() noexcept { return linger_; }
    /** @brief Detaches every endpoint (see Endpoint::detach()). */
    void detach_all() noexcept;

    /** @brief A deadline at @p deadline is armed: the next visit comes no later. */
    void arm(Clock::time_point deadline) noexcept {
        if (deadline < next_due_) next_due_ = deadline;
    }
    /**
     * @brief Starts a visit of the deadlines at @p now: false when none can be due yet (@p wait_ms then holds the
     *        milliseconds to the earliest, or -1); true when one may be, and the earliest is forgotten until the
     *        visit arms again the ones that stay.
     */
    [[nodiscard]] bool begin_visit(Clock::time_point now, int &wait_ms) noexcept;
    /** @brief Visits the endpoints with a deadline armed at @p now; the milliseconds to the next of theirs, or -1. */
    int visit_timed(Clock::time_point now);
    /** @brief The milliseconds from @p now to @p t (0 when passed), rounded up. */
    [[nodiscard]] static int ms_until(Clock::time_point t, Clock::time_point now);

private:
    friend class Endpoint;

    DeviceServer &server_;
    LlpSettings settings_;
    Deliver deliver_;
    SameHostHooks same_host_;
    llp::PeerDetection *detection_ = nullptr;
    // Endpoints before their transition that may be paired, by the remote end of their connection: the one whose
    // remote end is another's local end (and the other way round) holds the other end of the same connection.
    std::multimap<StreamEnd, Endpoint *> by_remote_;
    // The other kALs of this host (llp.same_host.rendezvous), or null.
    std::unique_ptr<Rendezvous> rendezvous_;
    LlpCounters counters_;
    llp::AbortLinger linger_;  // connections reset once their last bytes (a Terminate, say) are acknowledged
    std::set<Endpoint *> all_;
    std::set<Endpoint *> timed_;             // endpoints with a deadline armed, visited by visit_timed()
    std::vector<Endpoint *> timed_snapshot_;  // visit_timed()'s copy of timed_ (kept for its storage)
    // The earliest deadline armed: until then no visit is made (tick() runs at every turn of the device loop, and
    // walking every connection in setup each time cost 6% of krdmad's CPU at 256 in flight). Every deadline armed
    // lowers it (arm()); each visit recomputes it; a deadline dropped meanwhile only makes one visit early.
    Clock::time_point next_due_ = Clock::time_point::max();
};

/**
 * @brief A QP's connection: setup, the transition, and the kAL's watch over the socket afterwards. Its state moves
 *        only through endpoint management's state machine (endpoint_fsm.hpp): this class observes the socket, the
 *        MPA session and the kVP, feeds what it saw to the machine, and carries out each step (drive()). Owned by
 *        its QP's record (KvpObject::link).
 */
class Endpoint final : public QpLink {
    friend class Endpoints;
    static constexpr size_t kEndpointType = static_cast<size_t>(ResourceType::endpoint);

public:
    /** @brief The clock of every deadline. */
    using Clock = Endpoints::Clock;

    /**
     * @brief The endpoint of QP @p qp (@p qp_handle, number @p qp_num) of client @p client on RNIC @p rnic, whose
     *        events carry @p context; @p kvp_stream: the kVP runs its stream (VerbCommands::kvp_runs_streams()).
     */
    Endpoint(Endpoints &m, uint32_t client, Handle qp_handle, KvpObject &qp, uint32_t qp_num, uint64_t context,
             std::string rnic, bool kvp_stream);
    /** @brief Ends the connection abortively (the QP is going) and leaves its owner. */
    ~Endpoint() override;

    /** @brief The owner's device connection. */
    [[nodiscard]] uint32_t client() const noexcept { return client_; }
    /** @brief The QP's kAL handle. */
    [[nodiscard]] Handle qp_handle() const noexcept { return qp_handle_; }
    /** @brief The QP's number. */
    [[nodiscard]] uint32_t qp_num() const noexcept { return qp_num_; }

    /**
     * @brief Active side, before start_active(): the peer's address and port, as CONNECT named them (the transition
     *        then asks the socket only for its own end).
     */
    void know_remote(const ri_net_addr_t &addr, uint16_t port);

    /**
     * @brief Active side (CONNECT, or CONVERT's initiator as @p how): TCP connect from @p local to @p remote has been
     *        started on @p sock (or a connected socket's first writable event starts MPA).
     */
    void start_active(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                      Clock::time_point deadline, EndpointInput how = EndpointInput::connect_started);

    /**
     * @brief A socket the consumer connected itself (CONVERT), on the responder's side: the peer's MPA request is read
     *        and answered here (the consumer decided by converting), then the transition as for an accepted request.
     */
    void start_converted_responder(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                                   uint16_t ird, uint16_t ord, Clock::time_point deadline);

    /**
     * @brief Passive side: the consumer accepted; the session is writing (or wrote) the reply. @p liveness_set: the
     *        socket has the liveness options already (from its listener); @p ends: its addresses and ports.
     */
    void start_passive(krdma::UniqueFd sock, llp::MpaSession session, bool liveness_set, const ri_llp_params_t &ends);

    /** @brief The consumer moved the QP to @p state: CLOSING, ERROR and IDLE move the connection. */
    void qp_state_changed(uint32_t state) override;

    /**
     * @brief The kVP running this (hosted) connection's stream ended the QP on its own with asynchronous event @p
     *        event_id: the same end as the consumer moving the QP to ERROR, but the kAL hears it first-hand. Once the
     *        endpoint has ended, this and the consumer's own Modify QP to ERROR are ignored, whichever comes second.
     */
    void kvp_ended_qp(uint32_t event_id);

    /** @brief The socket reported @p revents (serving thread). */
    void on_events(short revents);

    /** @brief Puts this endpoint among those tick() visits, with its next deadline @p when. */
    void arm_timer(Clock::time_point when);

    /** @brief Returns the milliseconds to this endpoint's deadline, or -1; times the setup out when it has passed. */
    int check_deadline(Clock::time_point now);

    /** @brief Its owner is gone: the endpoint no longer reports, counts or watches. */
    void detach() { m_ = nullptr; }
    /** @brief Whether it holds a connection or one being set up (the QP takes no new stream then). */
    [[nodiscard]] bool busy() const noexcept { return holds_connection(fsm_.state()); }

    /** @brief How the administrator sees it (LIST_ENDPOINTS). */
    [[nodiscard]] EndpointInfo info() const;

    /**
     * @brief Whether this endpoint holds its end of a same-host channel for its transition (stashed by its mirror,
     *        the other end of its connection, which transitioned first).
     */
    [[nodiscard]] bool has_channel() const noexcept { return static_cast<bool>(channel_); }

    /**
     * @brief CONVERT asked for the consumer's own byte channel (::KRDMA_CONVERT_BYTE_CHANNEL): made beside the QP's
     *        when both ends of a same-host pair asked, and handed over with ESTABLISHED; with @p link
     *        (::KRDMA_CONVERT_LINK), the two processes' link as well when both asked.
     */
    void want_byte_channel(bool link) noexcept {
        byte_channel_wanted_ = true;
        link_wanted_ = link;
    }


private:

    // What became of a step's report.
    enum class Driven : uint8_t { refused, done, undelivered };

    // The kVP runs this connection's stream (a consumer hosted in the kAL, or an offloading RNIC): the socket never
    // leaves the kAL's process, and the kVP's asynchronous events tell how the stream ended.
    [[nodiscard]] bool kvp_stream() const noexcept { return kvp_stream_; }

    // Feeds @p in with @p facts to the state machine and carries out the step: the report is built first (with
    // @p decorate, while the MPA session it may read is still there); then the counter, the kVP's QP, the socket;
    // then the report goes out, with the socket when it is ESTABLISHED for an owner in another process.
    Driven drive(EndpointInput in, const EndpointFacts &facts = {},
                 const std::function<void(krdma_cm_event &)> &decorate = nullptr);

    void count(LlpCount c);

    // How a connection in RDMA mode stands, for the end of its QP: the socket's error (SO_ERROR is read once, and
    // until our FIN a socket TCP closed tells by its state), the peer's FIN, a Terminate either way.
    EndpointFacts observe() const;

    static EndpointFacts failure(int error);

    krdma_cm_event cm(uint32_t type, int status) const;

    bool send(const krdma_cm_event &e, std::span<const int> fds = {});

    void rewatch(short events) {
        m_->server_.watch(sock_.get(), events, [this](short revents) { on_events(revents); });
    }

    void close_socket(bool abortive);

    // The data path sent or received a Terminate on this connection (its counters say so).
    bool terminated() const;

    // The kVP's QP to ERROR, unless it is there already (the kVP ended it on its own).
    void qp_to_error();

    void negotiate(llp::MpaState s);

    // The RDMA-mode transition: the kVP's QP to RTS with the negotiated parameters, the socket to the owner.
    void transition();

    // Same-host pairing. Whether this endpoint could be paired at all (the setting and the hooks; whoever runs its
    // stream, its owner or the kVP, takes the channel at the transition).
    [[nodiscard]] bool may_pair() const noexcept;
    // Puts this endpoint among those a mirror can find (its remote end known), once.
    void index_ends();
    // Leaves them.
    void unindex() noexcept;
    // The endpoint of @p m in setup (not in RDMA mode yet, without a channel, with its socket), other than
    // @p except, whose connection runs from @p local to @p remote and which @p accept takes; or null.
    template <class Accept>
    static Endpoint *in_setup(Endpoints &m, const StreamEnd &local, const StreamEnd &remote, const Endpoint *except,
                              Accept accept);
    // The endpoint holding the other end of this one's connection, not yet in RDMA mode, or null.
    Endpoint *find_mirror();
    // The first of two to transition: makes the channel, takes one end and stashes the other in the mirror; nothing
    // (and the wire) when the two may not be paired or the channel cannot be made.
    void pair();
    // The RNIC attributes of this endpoint's QP when it may take a same-host channel, else why not (logged).
    [[nodiscard]] bool takes_channel(ri_rnic_attr_t &a) const;
    // pair()'s second channel, for two ends that both asked for their own (byte_channel_wanted_); nothing (and only
    // the QP's channel) when it cannot be charged or made.
    void pair_byte_channels(Endpoint &m, uint64_t ring);
    // The link of the two consumer processes (KRDMA_CONVERT_LINK), made beside their byte channels; nothing when it
    // cannot be made.
    void pair_link(Endpoint &m);
    // Closes the ends this endpoint holds for its owner (the same-host channel's, the byte channel's, the link's).
    void drop_ends() noexcept;
    // A responder about to write its MPA reply, whose other end no endpoint here holds: offers the connection to the
    // other kALs of the host (rendezvous.hpp) and keeps the channel end of the one that pairs it.
    void offer_pairing();
    // Another kAL's offer @p o of connection socket @p tcp: the endpoint of @p m holding its other end (in setup),
    // proven one connection, keeps a new channel's end; the other end for the offering kAL, or empty.
    static krdma::UniqueFd answer_offer(Endpoints &m, const RendezvousOffer &o, int tcp);

    Endpoints *m_;
    uint32_t client_;
    Handle qp_handle_;
    KvpObject &qp_;
    uint32_t qp_num_;
    uint64_t context_;
    std::string rnic_;
    EndpointFsm fsm_;
    krdma::UniqueFd sock_;
    // Only while negotiating: a connected endpoint does not carry the negotiation's buffers.
    std::unique_ptr<llp::MpaSession> session_;
    bool initiator_ = false;
    bool liveness_set_ = false;  // an accepted socket inherits its listener's
    bool tcp_connecting_ = false;
    iwarp::MpaConfig cfg_{};
    std::vector<uint8_t> pd_;
    Clock::time_point deadline_{};
    Clock::time_point end_by_{};  // a kVP stream's peer ended it: the kVP reports by then, or the kAL decides
    ri_llp_params_t llp_{};
    // The stream's addresses and ports as far as known without asking the socket (an end not known has family
    // RI_AF_NONE): from accept (passive), or the remote end from CONNECT (active; its own end is read at the
    // transition).
    ri_llp_params_t ends_{};
    // CONVERT's responder: answers the peer's request itself with these.
    bool auto_accept_ = false;
    uint16_t ird_ = 0, ord_ = 0;
    bool kvp_stream_;  // constant: its client and its RNIC's kind never change
    // Same-host path: this end of the channel, from pair() (the first of the two) or stashed by the mirror (the
    // second), until the transition hands it to the owner; closed with the endpoint otherwise (the peer QP then
    // reads the bell's end of file: reset).
    krdma::UniqueFd channel_;
    std::shared_ptr<void> channel_charge_;  // this side's ring, charged to its owner's process until the endpoint goes
    // The consumer's own channel (KRDMA_CONVERT_BYTE_CHANNEL), made and kept as channel_ is, handed over after it.
    bool byte_channel_wanted_ = false;
    krdma::UniqueFd byte_channel_;
    std::shared_ptr<void> byte_channel_charge_;
    // The two processes' link (KRDMA_CONVERT_LINK), made with the byte channels and handed over after them.
    bool link_wanted_ = false;
    krdma::UniqueFd link_;
    bool rfc7306_ = false;                  // paired with a peer whose RNIC speaks RFC 7306 as this one's does
    bool converted_ = false;                // its socket came from the consumer (CONVERT)
    // When the current setup step began (CONNECT served, TCP connected, ACCEPT served), for LlpCounters' sums;
    // unset (epoch) for a converted socket, whose steps are not counted.
    Clock::time_point step_at_{};
    bool indexed_ = false;
    std::multimap<StreamEnd, Endpoint *>::iterator index_it_;
};

}  // namespace kal

#endif  // KAL_ENDPOINT_ENDPOINT_HPP
