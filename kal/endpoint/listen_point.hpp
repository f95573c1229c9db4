/**
 * @file listen_point.hpp
 * @brief Endpoint management of the kAL (OpenRDMA section 3), passive side: listen points, the connection requests
 *        they accept, and the owner of both for one device.
 *
 * A ListenPoint is a listening TCP socket on an RNIC's address, kept in its owner's resource table under the RNIC
 * open (LISTEN makes it, DESTROY_LISTEN or the owner's teardown ends it). Each TCP connection it accepts becomes a
 * PendingRequest: the socket and its MPA session as responder, until the peer's MPA request is in and announced to
 * the consumer (KRDMA_CM_CONNECT_REQUEST), then until the consumer accepts it (the request becomes its QP's
 * Endpoint, endpoint.hpp) or rejects it, the peer withdraws it, or a deadline passes (the peer then gets a reject).
 * ListenPoints, their owner, holds what they share: the device server that watches their sockets, the LLP settings,
 * the endpoints' counters, abortive closes and deadlines (Endpoints), and every pending request by its identifier.
 *
 * Everything runs on the device server's thread, so nothing takes a lock.
 */
#ifndef KAL_ENDPOINT_LISTEN_POINT_HPP
#define KAL_ENDPOINT_LISTEN_POINT_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>

#include "endpoint.hpp"
#include "krdma/message.hpp"
#include "llp_settings.hpp"
#include "mpa_session.hpp"
#include "resource_table.hpp"
#include "rnicpi/cpp/status.hpp"
#include "server.hpp"

namespace kal {

class ListenPoints;
class PendingRequest;

/**
 * @brief A listen point: a listening TCP socket on an RNIC's address, owned by its record in the consumer's table
 *        (under the RNIC open). Destroying it drops its pending requests and leaves its owner.
 */
class ListenPoint final : public Resource {
public:
    /** @brief Stops listening, drops every request still pending here and leaves its owner (if it still has one). */
    ~ListenPoint() override;
    ListenPoint(const ListenPoint &) = delete;
    ListenPoint &operator=(const ListenPoint &) = delete;

    /** @brief The owner's device connection. */
    [[nodiscard]] uint32_t client() const noexcept { return client_; }
    /** @brief The name of the RNIC it listens on. */
    [[nodiscard]] const std::string &rnic() const noexcept { return rnic_; }
    /** @brief The port bound. */
    [[nodiscard]] uint16_t port() const noexcept { return port_; }

private:
    friend class ListenPoints;

    ListenPoint(ListenPoints &m, uint32_t client, uint64_t context, krdma::UniqueFd sock, iwarp::MpaConfig cfg,
                std::string rnic)
        : m_(&m), client_(client), context_(context), sock_(std::move(sock)), cfg_(cfg), rnic_(std::move(rnic)) {}

    ListenPoints *m_;
    uint32_t client_;
    uint64_t context_;
    Handle handle_ = 0;
    uint32_t cookie_ = 0;  // the consumer's, repeated in its CONNECT_REQUEST records
    krdma::UniqueFd sock_;
    iwarp::MpaConfig cfg_;
    std::string rnic_;
    std::set<uint64_t> requests_;
    // The bound address and port: every socket accepted here has them as its local end (no getsockname()).
    ri_net_addr_t local_{};
    uint16_t port_ = 0;
    // TCP_NODELAY and the liveness options are set on the listening socket, and Linux copies them to every socket
    // it accepts: six system calls fewer per passive connection.
    bool inherits_options_ = false;
};

/**
 * @brief A connection request on a listen point: the accepted socket and its MPA session, until the consumer
 *        decides.
 */
class PendingRequest {
public:
    /** @brief Request @p id, accepted on @p lp as @p sock (its MPA session not started yet). */
    PendingRequest(uint64_t id, ListenPoint &lp, krdma::UniqueFd sock)
        : id_(id), lp_(&lp), sock_(std::move(sock)), session_(sock_.get()) {}

    /** @brief Its identifier, as the CONNECT_REQUEST record, ACCEPT and REJECT name it. */
    [[nodiscard]] uint64_t id() const noexcept { return id_; }
    /** @brief The name of the RNIC its listen point is on (an ACCEPT must give it a QP of that RNIC). */
    [[nodiscard]] const std::string &rnic() const noexcept { return lp_->rnic(); }

private:
    friend class ListenPoints;

    uint64_t id_;
    ListenPoint *lp_;
    krdma::UniqueFd sock_;
    llp::MpaSession session_;
    ri_llp_params_t ends_{};  // local and remote address and port, learned at accept (fd -1)
    bool announced_ = false;  // the consumer has the CONNECT_REQUEST event
    std::chrono::steady_clock::time_point step_at_ = std::chrono::steady_clock::now();  // TCP accepted, then reported
};

/** @brief What an accepted request hands to its QP's endpoint (Endpoint::start_passive()). */
struct AcceptedRequest {
    /** @brief The connection. It stays in the server's epoll set: the endpoint's first watch replaces the request's. */
    krdma::UniqueFd sock;
    /** @brief Its MPA session, writing (or having written) the reply. */
    llp::MpaSession session;
    /** @brief The socket has its listener's liveness options already. */
    bool liveness_set = false;
    /** @brief Its addresses and ports, as accept4() and the listen point knew them. */
    ri_llp_params_t ends{};
};

/** @brief Every listen point and pending connection request of one device, and what they share (serving thread). */
class ListenPoints {
public:
    /** @brief The clock of every deadline. */
    using Clock = Endpoints::Clock;
    /** @brief Sends a connection event record (CONNECT_REQUEST) to its client; false when it could not. */
    using Deliver = Endpoints::Deliver;

    /**
     * @brief Listen points whose sockets @p server watches, set up with @p settings, counting, closing abortively and
     *        arming deadlines through @p endpoints, announcing requests through @p deliver.
     */
    ListenPoints(DeviceServer &server, const LlpSettings &settings, Endpoints &endpoints, Deliver deliver);
    ListenPoints(const ListenPoints &) = delete;
    ListenPoints &operator=(const ListenPoints &) = delete;
    /**
     * @brief Drops every pending request (closing its socket) and detaches every listen point: they live in the
     *        consumers' tables, which may outlive this object.
     */
    ~ListenPoints();

    /** @brief How many listen points there are. */
    [[nodiscard]] size_t size() const noexcept { return all_.size(); }
    /** @brief How many connection requests are pending (set up, or waiting for the consumer). */
    [[nodiscard]] size_t pending() const noexcept { return pending_.size(); }

    /**
     * @brief LISTEN's socket: a TCP socket of client @p client listening on @p addr, port @p port (0: one the host
     *        chooses) with @p backlog (0: 128), for RNIC @p rnic, negotiating MPA with @p cfg; its requests' records
     *        carry @p context. It accepts nothing until start(); destroyed before, it closes its socket. An error's
     *        message names the step that failed, without the command.
     */
    [[nodiscard]] rdma::Expected<std::unique_ptr<ListenPoint>> open(uint32_t client, uint64_t context,
                                                                    const ri_net_addr_t &addr, uint16_t port,
                                                                    uint16_t backlog, iwarp::MpaConfig cfg,
                                                                    std::string rnic);
    /** @brief @p lp, now in its owner's table as @p handle, accepts connections; their records carry @p cookie. */
    void start(ListenPoint &lp, Handle handle, uint32_t cookie);

    /**
     * @brief The request @p id of client @p client's listen points that waits for ACCEPT or REJECT: RI_ENOENT when
     *        there is none, RI_ENOTCONN when it is not waiting for a decision. Valid until the request goes (accept(),
     *        reject(), or the serving loop dropping it).
     */
    [[nodiscard]] rdma::Expected<PendingRequest *> undecided(uint32_t client, uint64_t id);
    /**
     * @brief The consumer accepts @p p, a request undecided() gave, with private data @p pd and read depths @p ird,
     *        @p ord: the MPA reply goes out and the request goes, its socket and session handed over. On the session's
     *        error (an errno value) the request stays as it was.
     */
    [[nodiscard]] rdma::Expected<AcceptedRequest> accept(PendingRequest &p, std::span<const uint8_t> pd, uint16_t ird,
                                                         uint16_t ord);
    /**
     * @brief The consumer rejects @p p, a request undecided() gave, with private data @p pd: counted, the reject
     *        reply goes out (in the loop when the socket does not take it at once), then the request goes. On the
     *        session's error (an errno value) the request stays as it was.
     */
    [[nodiscard]] rdma::Expected<void> reject(PendingRequest &p, std::span<const uint8_t> pd);

    /**
     * @brief The deadlines of the pending requests at @p now (part of a visit Endpoints::begin_visit() started): one
     *        passed rejects a request the consumer did not decide in time and drops it; the others are armed again.
     *        The milliseconds to the next, or -1.
     */
    int visit(Clock::time_point now);

private:
    friend class ListenPoint;
    using PendingMap = std::map<uint64_t, std::unique_ptr<PendingRequest>>;

    void accept_tcp(ListenPoint &lp);
    void pending_events(uint64_t id, short revents);
    void drop_pending(uint64_t id);

    DeviceServer &server_;
    LlpSettings settings_;
    Endpoints &endpoints_;
    Deliver deliver_;
    PendingMap pending_;
    std::set<ListenPoint *> all_;
    uint64_t next_request_ = 1;
};

}  // namespace kal

#endif  // KAL_ENDPOINT_LISTEN_POINT_HPP
