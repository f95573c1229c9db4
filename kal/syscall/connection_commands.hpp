/**
 * @file connection_commands.hpp
 * @brief LLP and endpoint management of the kAL (OpenRDMA §3): listen points, active and passive TCP connection
 *        setup from an RNIC's address, MPA negotiation, the RDMA-mode transition and teardown.
 *
 * A consumer listens on an RNIC open's address (LISTEN), connects one of its IDLE QPs (CONNECT), and accepts or
 * rejects a connection request it was told about (ACCEPT, REJECT). The kAL makes the TCP connection through the
 * host's stack, routed by the host's tables and bound to the RNIC's address, negotiates MPA with the RNIC's policy
 * (the kVP's MPA capabilities) and the QP's IRD/ORD, then performs the RDMA-mode transition: the kVP's QP goes to
 * RTS with the negotiated ri_llp_params_t, and the established socket goes to the owner with the ESTABLISHED event
 * (SCM_RIGHTS), where the uAL hands it to the uVP. The kAL keeps its own reference to the socket, to report it
 * (TCP_INFO) and to notice and report the peer closing or resetting it, and to reset it when the owner's QP goes
 * to ERROR, is destroyed, or the owner dies.
 *
 * It also watches the links of the host (rtnetlink): when an RNIC's network device goes down or comes back, every
 * process with that RNIC open gets the unaffiliated event RI_AE_RNIC_LINK_DOWN or RI_AE_RNIC_LINK_UP. The
 * connections themselves end by the liveness settings (LlpSettings), not by the link event: a link that comes
 * back in time loses nothing.
 *
 * Each endpoint's state moves only through endpoint management's state machine (kal/endpoint/endpoint_fsm.hpp),
 * fed by what is seen here: the consumer's commands and QP state changes, the socket, the MPA session, and the
 * asynchronous events with which a kVP running a hosted consumer's stream ends a QP on its own (handed over by event
 * management, VerbCommands::on_qp_ended).
 *
 * This class decodes and checks each command and dispatches it: the listen points, the connections they accept
 * and the requests waiting for ACCEPT or REJECT are endpoint management's ListenPoints
 * (kal/endpoint/listen_point.hpp), the QPs' connections its Endpoints (kal/endpoint/endpoint.hpp).
 *
 * Everything runs on the device server's thread (DeviceServer::watch, on_tick and post), so the endpoints and
 * listen points need no locks, and every step has a deadline.
 */
#ifndef KAL_SYSCALL_CONNECTION_COMMANDS_HPP
#define KAL_SYSCALL_CONNECTION_COMMANDS_HPP

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "endpoint.hpp"
#include "link_monitor.hpp"
#include "peer_detection.hpp"
#include "listen_point.hpp"
#include "llp_settings.hpp"
#include "route.hpp"
#include "verb_commands.hpp"

namespace kal {

class Endpoint;
struct KvpObject;

/** @brief LISTEN, CONNECT, ACCEPT, REJECT and DESTROY_LISTEN on the device, and the connections they make. */
class ConnectionCommands {
public:
    /** @brief Serves the connection commands on @p verbs' device, with @p settings. */
    ConnectionCommands(VerbCommands &verbs, LlpSettings settings = {});
    ConnectionCommands(const ConnectionCommands &) = delete;
    ConnectionCommands &operator=(const ConnectionCommands &) = delete;
    /** @brief Unregisters (with the server stopped); connections of live QPs stay theirs. */
    ~ConnectionCommands();

    /** @brief Counters. */
    [[nodiscard]] const LlpCounters &counters() const noexcept { return endpoints_.counters(); }
    /** @brief Every endpoint with a connection or one being set up (serving thread). */
    [[nodiscard]] std::vector<EndpointInfo> endpoints() const;

private:
    friend class HostedConsumer;  // a consumer hosted in the kAL uses the same commands

    // An IDLE QP of the caller without a live connection, the RNIC open it belongs to, and its attributes: what
    // CONNECT and ACCEPT take a new stream with.
    struct StreamTarget {
        KvpObject *qp;
        KvpObject *open;
        ri_qp_attr_t attr;
    };
    rdma::Expected<StreamTarget> stream_target(Connection &c, Handle qp);

    int listen(Connection &c, const Request &req, Reply &rep);
    int destroy_listen(Connection &c, const Request &req, Reply &rep);
    int connect(Connection &c, const Request &req, Reply &rep);
    int accept(Connection &c, const Request &req, Reply &rep);
    int reject(Connection &c, const Request &req, Reply &rep);
    int convert(Connection &c, const Request &req, Reply &rep);
    int tick();
    void link_events();
    // Event management's news that the kVP ended QP @p qp_num of RNIC open @p rnic of client @p client_id on its own.
    void kvp_ended_qp(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id);

    VerbCommands &verbs_;
    DeviceServer &server_;
    LlpSettings settings_;
    llp::PeerDetection detection_;  // the sockets layer's peer detection, loaded on its first request
    Endpoints endpoints_;  // every endpoint, the counters, the abortive closes, the deadlines tick() visits
    ListenPoints listen_points_;  // every listen point and the connection requests waiting for ACCEPT or REJECT
    std::optional<llp::LinkMonitor> links_;  // the host's links, for RI_AE_RNIC_LINK_DOWN/UP
    llp::RouteCache routes_;                 // route checks of CONNECT, kept until the host's tables change
};

}  // namespace kal

#endif  // KAL_SYSCALL_CONNECTION_COMMANDS_HPP
