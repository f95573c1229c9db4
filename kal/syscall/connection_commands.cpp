// The connection commands: LISTEN, DESTROY_LISTEN, CONNECT, ACCEPT, REJECT and CONVERT decoded, checked and handed
// to the listen points and endpoints (kal/endpoint) and the LLP (kal/llp). Everything here runs on the device
// server's thread.
#include "krdma/peer_marks.hpp"
#include "connection_commands.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "kvp_object.hpp"
#include "mpa_session.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"
#include "rights.hpp"
#include "route.hpp"
#include "same_host_hooks.hpp"
#include "socket_ends.hpp"
#include "tcp_stats.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "llp";
using Clock = std::chrono::steady_clock;

// The RNIC's MPA policy (the kVP's MPA capabilities in @p a) with these read depths.
iwarp::MpaConfig mpa_config(const ri_rnic_attr_t &a, uint32_t ird, uint32_t ord) {
    iwarp::MpaConfig c;
    c.revision = 2;
    c.crc = (a.caps & RI_CAP_MPA_CRC) != 0;
    c.markers_wanted = false;
    c.markers_allowed = (a.caps & RI_CAP_MPA_MARKERS) != 0;
    c.peer2peer = (a.caps & RI_CAP_MPA_PEER2PEER) != 0;
    c.ird = static_cast<uint16_t>(std::min<uint32_t>(ird, iwarp::kMpaIrdOrdMax));
    c.ord = static_cast<uint16_t>(std::min<uint32_t>(ord, iwarp::kMpaIrdOrdMax));
    // RFC 7306 where the RNIC speaks it; each connection offers it only to a peer of this stack (peer detection).
    c.rfc7306 = (a.caps & (RI_CAP_ATOMICS | RI_CAP_IMMEDIATE)) != 0;
    return c;
}

// The same for the RNIC of @p open, with a QP's read depths.
iwarp::MpaConfig mpa_config(const KvpObject &open, uint32_t ird, uint32_t ord) {
    ri_rnic_attr_t a{};
    (void)open.v->query_rnic(static_cast<ri_rnic_t>(open.handle), &a);
    return mpa_config(a, ird, ord);
}

// The checks every command that carries private data shares (CONNECT, and ACCEPT, REJECT, CONVERT with their
// reserved words): RI_OK, or the refusal, its reason in @p rep, named by @p cmd.
template <class Q>
int check_prologue(const char *cmd, const Q &q, Reply &rep) {
    if (q.private_data_len > KRDMA_MAX_PRIVATE_DATA) {
        return rep.fail(RI_EINVAL, std::string(cmd) + ": " + std::to_string(q.private_data_len) +
                                       " bytes of private data; MPA carries at most " +
                                       std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    bool reserved_set = false;
    if constexpr (requires { q.reserved; }) reserved_set = q.reserved != 0;
    if constexpr (requires { q.reserved2; }) reserved_set = reserved_set || q.reserved2 != 0;
    if (reserved_set) return rep.fail(RI_EINVAL, std::string(cmd) + ": the reserved words must be zero");
    return RI_OK;
}

}  // namespace

ConnectionCommands::ConnectionCommands(VerbCommands &verbs, LlpSettings settings)
    : verbs_(verbs),
      server_(verbs.server()),
      settings_(settings),
      detection_(settings.peer_detection),
      endpoints_(server_, settings_,
                 [&verbs](uint32_t client_id, std::span<const uint8_t> record, std::span<const int> fds) {
                     return verbs.deliver_record(client_id, KRDMA_EVENT_CM, record, fds);
                 },
                 same_host_hooks(verbs)),
      listen_points_(server_, settings_, endpoints_,
                     [&verbs](uint32_t client_id, std::span<const uint8_t> record, std::span<const int> fds) {
                         return verbs.deliver_record(client_id, KRDMA_EVENT_CM, record, fds);
                     }) {
    endpoints_.set_peer_detection(&detection_);
    server_.on(KRDMA_CMD_LISTEN, [this](Connection &c, const Request &r, Reply &rep) { return listen(c, r, rep); });
    server_.on(KRDMA_CMD_DESTROY_LISTEN,
               [this](Connection &c, const Request &r, Reply &rep) { return destroy_listen(c, r, rep); });
    server_.on(KRDMA_CMD_CONNECT, [this](Connection &c, const Request &r, Reply &rep) { return connect(c, r, rep); });
    server_.on(KRDMA_CMD_ACCEPT, [this](Connection &c, const Request &r, Reply &rep) { return accept(c, r, rep); });
    server_.on(KRDMA_CMD_REJECT, [this](Connection &c, const Request &r, Reply &rep) { return reject(c, r, rep); });
    server_.on(KRDMA_CMD_CONVERT, [this](Connection &c, const Request &r, Reply &rep) { return convert(c, r, rep); });
    server_.on(KRDMA_CMD_PEER_MARKS, [this](Connection &, const Request &, Reply &rep) {
        // Loaded on the first request: most kALs never serve a sockets layer (and a cgroup holds few programs).
        auto fd = detection_.map_fd();
        if (!fd) return rep.fail(fd.error().code(), fd.error().message());
        krdma_peer_marks q{};
        q.value_size = sizeof(krdma::PeerMark);
        std::memcpy(rep.payload.data(), &q, sizeof q);
        rep.fds[0] = *fd;
        rep.nfds = 1;
        return static_cast<int>(RI_OK);
    });
    verbs_.count_endpoints_with([this](uint32_t client_id) {
        return static_cast<uint32_t>(std::count_if(endpoints_.begin(), endpoints_.end(),
                                                   [client_id](const Endpoint *e) { return e->client() == client_id; }));
    });
    server_.on(KRDMA_CMD_LIST_ENDPOINTS, [this](Connection &, const Request &r, Reply &rep) {
        krdma_list_endpoints q;
        std::memcpy(&q, r.payload.data(), sizeof q);
        krdma_list_endpoints a{};
        a.index = q.index;
        a.count = static_cast<uint32_t>(endpoints_.size());
        if (q.index < endpoints_.size()) {
            const EndpointInfo e = (*std::next(endpoints_.begin(), static_cast<long>(q.index)))->info();
            krdma_endpoint_info &i = a.info;
            i.client_id = e.client_id;
            i.qp_num = e.qp_num;
            i.qp = e.qp;
            std::snprintf(i.rnic, sizeof i.rnic, "%s", e.rnic.c_str());
            std::snprintf(i.local, sizeof i.local, "%s", e.local.c_str());
            std::snprintf(i.remote, sizeof i.remote, "%s", e.remote.c_str());
            i.state = e.state;
            i.llp = e.llp;
            i.rdma = e.rdma;
            if (e.fd >= 0) {
                if (auto t = llp::tcp_info_of(e.fd)) {
                    i.tcp_state = t->state;
                    i.bytes_sent = t->bytes_acked;
                    i.bytes_received = t->bytes_received;
                    i.segs_out = t->segs_out;
                    i.segs_in = t->segs_in;
                    i.retransmits = t->total_retrans;
                    i.rtt_us = t->rtt_us;
                    i.snd_cwnd = t->snd_cwnd;
                }
            }
        }
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
    server_.on(KRDMA_CMD_LLP_COUNTERS, [this](Connection &, const Request &, Reply &rep) {
        krdma_llp_counters a{};
        a.active_opens = endpoints_.counters().active_opens;
        a.passive_opens = endpoints_.counters().passive_opens;
        a.established = endpoints_.counters().established;
        a.tcp_connect_ns = endpoints_.counters().tcp_connect_ns;
        a.mpa_active_ns = endpoints_.counters().mpa_active_ns;
        a.request_ns = endpoints_.counters().request_ns;
        a.decision_ns = endpoints_.counters().decision_ns;
        a.accept_ns = endpoints_.counters().accept_ns;
        a.rejected = endpoints_.counters().rejected;
        a.peer_rejected = endpoints_.counters().peer_rejected;
        a.failed = endpoints_.counters().failed;
        a.timeouts = endpoints_.counters().timeouts;
        a.peer_disconnects = endpoints_.counters().peer_disconnects;
        a.resets = endpoints_.counters().resets;
        a.listen_points = listen_points_.size();
        a.pending_requests = listen_points_.pending();
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
    server_.on_tick([this] { return tick(); });
    verbs_.on_qp_ended([this](uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id) {
        kvp_ended_qp(client_id, rnic, qp_num, event_id);
    });
    if (auto m = llp::LinkMonitor::open()) {
        links_.emplace(std::move(*m));
        server_.watch(links_->fd(), POLLIN, [this](short) { link_events(); });
    } else {
        RDMA_LOG_WARN(kComponent, "link state not watched: %s", m.error().message().c_str());
    }
}

ConnectionCommands::~ConnectionCommands() {
    for (uint32_t cmd : {KRDMA_CMD_LISTEN, KRDMA_CMD_DESTROY_LISTEN, KRDMA_CMD_CONNECT, KRDMA_CMD_ACCEPT,
                         KRDMA_CMD_REJECT, KRDMA_CMD_CONVERT, KRDMA_CMD_LIST_ENDPOINTS, KRDMA_CMD_LLP_COUNTERS,
                         KRDMA_CMD_PEER_MARKS}) {
        server_.off(cmd);
    }
    server_.on_tick(nullptr);
    verbs_.count_endpoints_with(nullptr);
    verbs_.on_qp_ended(nullptr);
    if (links_) server_.unwatch(links_->fd());
    // Endpoints and listen points live in the consumers' tables, which may outlive this object: ~ListenPoints()
    // drops the pending requests and detaches the listen points, and the endpoints are detached here.
    endpoints_.detach_all();
}

std::vector<EndpointInfo> ConnectionCommands::endpoints() const {
    std::vector<EndpointInfo> out;
    for (const Endpoint *e : endpoints_) out.push_back(e->info());
    return out;
}

void ConnectionCommands::kvp_ended_qp(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id) {
    Context *ctx = verbs_.find_context(client_id);
    if (ctx == nullptr) return;  // the client is gone, and its endpoints with it
    for (Endpoint *e : endpoints_) {
        if (e->client() == client_id && e->qp_num() == qp_num && open_of(ctx->table, e->qp_handle()) == rnic) {
            e->kvp_ended_qp(event_id);
            return;
        }
    }
}

int ConnectionCommands::listen(Connection &c, const Request &req, Reply &rep) {
    auto q = req.as<krdma_listen>();  // the reply is the request with the port and handle filled in
    Context &ctx = verbs_.context_of(c);
    auto open = object_of(ctx.table, q.rnic, ResourceType::rnic);
    if (!open) return rep.fail(open.error().code(), "listen: " + open.error().message());
    const ri_net_addr_t &addr = (*open)->ref.address();
    if (privileged_port(q.port) && !VerbCommands::hosted(c.peer().client_id) &&
        !rights_of(c.peer().pid, c.peer().start_time).has(Capability::net_bind_service)) {
        // krdmad binds as root; the caller gets no port it could not bind itself.
        verbs_.accounts().refusals().privileged_port.fetch_add(1, std::memory_order_relaxed);
        RDMA_LOG_CLIENT(info, kComponent, "client %u (pid %d, uid %u): listen on privileged port %u refused",
                        c.peer().client_id, static_cast<int>(c.peer().pid), static_cast<unsigned>(c.peer().uid),
                        static_cast<unsigned>(q.port));
        return rep.fail(RI_EACCES, "listen: port " + std::to_string(q.port) + " is privileged (below " +
                                       "net.ipv4.ip_unprivileged_port_start, " +
                                       std::to_string(unprivileged_port_start()) + "): binding it needs " +
                                       "CAP_NET_BIND_SERVICE, which pid " + std::to_string(c.peer().pid) +
                                       " does not hold");
    }
    ri_rnic_attr_t a{};
    (void)(*open)->v->query_rnic(static_cast<ri_rnic_t>((*open)->handle), &a);
    auto lp = listen_points_.open(c.peer().client_id, q.context, addr, q.port, q.backlog,
                                  mpa_config(a, a.max_ird, a.max_ord), (*open)->ref.name());
    if (!lp) return rep.fail(lp.error().code(), "listen: " + lp.error().message());
    ListenPoint *raw = lp->get();
    auto h = ctx.table.add(ResourceType::listener, q.rnic, {}, std::move(*lp));
    if (!h) return rep.fail(h.error().code(), "listen: " + h.error().message());  // its destructor closes the socket
    listen_points_.start(*raw, *h, q.cookie);
    q.port = raw->port();
    q.handle = *h;
    std::memcpy(rep.payload.data(), &q, sizeof q);
    return RI_OK;
}

int ConnectionCommands::destroy_listen(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_destroy_listen>();
    Context &ctx = verbs_.context_of(c);
    if (auto r = ctx.table.get(q.handle, ResourceType::listener); !r) {
        return rep.fail(r.error().code(), "destroy listen: " + r.error().message());
    }
    if (auto d = ctx.table.destroy(q.handle); !d) return rep.fail(d.error().code(), "destroy listen: " + d.error().message());
    return RI_OK;
}

void ConnectionCommands::link_events() {
    for (const llp::LinkChange &c : links_->changes()) {
        RDMA_LOG_INFO(kComponent, "link %s %s", c.netdev.c_str(), c.up ? "up" : "down");
        verbs_.raise_rnic_event(c.netdev, c.up ? RI_AE_RNIC_LINK_UP : RI_AE_RNIC_LINK_DOWN);
    }
}

rdma::Expected<ConnectionCommands::StreamTarget> ConnectionCommands::stream_target(Connection &c, Handle qp) {
    Context &ctx = verbs_.context_of(c);
    auto q = object_of(ctx.table, qp, ResourceType::qp);
    if (!q) return q.error();
    auto open = object_of(ctx.table, open_of(ctx.table, qp), ResourceType::rnic);
    if (!open) return open.error();
    if ((*q)->link && static_cast<Endpoint *>((*q)->link.get())->busy()) {
        return rdma::Error(RI_EISCONN, "the QP is connected or connecting; it takes a new stream only in IDLE");
    }
    StreamTarget t{*q, *open, {}};
    if (ri_status_t rc = t.qp->v->query_qp(static_cast<ri_qp_t>(t.qp->handle), &t.attr); rc != RI_OK) {
        return rdma::Error(rdma::from_errno(rc), std::string("the kVP cannot query the QP: ") + std::strerror(rc));
    }
    if (t.attr.state != RI_QPS_IDLE) return rdma::Error(RI_EINVAL, "only an IDLE QP takes a new stream");
    return t;
}

int ConnectionCommands::connect(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_connect>();
    if (const int rc = check_prologue("connect", q, rep); rc != RI_OK) return rc;
    if (q.port == 0) return rep.fail(RI_EINVAL, "connect: the peer's port must not be 0");
    auto target = stream_target(c, q.qp);
    if (!target) return rep.fail(target.error().code(), "connect: " + target.error().message());
    KvpObject *qp = target->qp;
    KvpObject *open = target->open;
    const ri_qp_attr_t &qa = target->attr;

    sockaddr_storage remote = krdma::to_sockaddr(q.remote, q.port);
    const socklen_t rlen = krdma::sockaddr_len(q.remote);
    if (rlen == 0) return rep.fail(RI_EAFNOSUPPORT, "connect: the peer's address is neither IPv4 nor IPv6");
    const ri_net_addr_t &rnic_addr = open->ref.address();
    if (rnic_addr.family != q.remote.family) {
        return rep.fail(RI_EAFNOSUPPORT, "connect: " + llp::text_of(q.remote, q.port) + " is not of the address family of "
                                         "RNIC " + open->ref.name() + " (" + krdma::to_text(rnic_addr) + ")");
    }
    // The host's tables decide the route; it must leave through the RNIC's netdev (or stay on this host).
    auto route = routes_.route_for(llp::RnicBinding{rnic_addr, open->ref.netdev()}, q.remote);
    if (!route) {
        RDMA_LOG_INFO(kComponent, "client %u: no route to %s from RNIC %s: %s", c.peer().client_id,
                      llp::text_of(q.remote, q.port).c_str(), open->ref.name().c_str(),
                      route.error().message().c_str());
        return rep.fail(rdma::from_errno(route.error().code()), "connect: from RNIC " + open->ref.name() + ": " +
                                                                    route.error().message());
    }
    sockaddr_storage local = krdma::to_sockaddr(rnic_addr, 0);
    const socklen_t llen = krdma::sockaddr_len(rnic_addr);
    krdma::UniqueFd s(::socket(remote.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) return rep.fail(rdma::from_errno(errno), std::string("connect: socket: ") + std::strerror(errno));
    int one = 1;
    (void)::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // The port is chosen at connect() (per 4-tuple, not per address), and this socket's TIME_WAIT, reusable, does
    // not keep a later listen off its ephemeral port (a DAT conn qual may well fall in the ephemeral range).
    (void)::setsockopt(s.get(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    (void)::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // The connection leaves from the RNIC's address, so the peer sees (and may select by) that RNIC.
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&local), llen) != 0) {
        return rep.fail(rdma::from_errno(errno), "connect: cannot bind " + krdma::to_text(rnic_addr) + ": " +
                                                     std::strerror(errno));
    }
    iwarp::MpaConfig cfg = mpa_config(*open, qa.ird, qa.ord);
    // An RNIC that speaks RFC 7306 says in its SYN that it runs this stack, to learn whether the peer does.
    if (cfg.rfc7306 && !endpoints_.mark_socket(s.get())) cfg.rfc7306 = false;
    if (::connect(s.get(), reinterpret_cast<sockaddr *>(&remote), rlen) != 0 && errno != EINPROGRESS) {
        return rep.fail(rdma::from_errno(errno), "connect: to " + llp::text_of(q.remote, q.port) + ": " +
                                                     std::strerror(errno));
    }
    ++endpoints_.counters().active_opens;
    const auto timeout = q.timeout_ms != 0 ? std::chrono::milliseconds(q.timeout_ms) : settings_.connect_timeout;
    auto ep = std::make_unique<Endpoint>(endpoints_, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name(),
                                       VerbCommands::kvp_runs_streams(c.peer().client_id, qp->offload));
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    raw->know_remote(q.remote, q.port);
    raw->start_active(std::move(s), cfg,
                      std::span<const uint8_t>(q.private_data, q.private_data_len), Clock::now() + timeout);
    return RI_OK;
}

int ConnectionCommands::accept(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_accept>();
    if (const int rc = check_prologue("accept", q, rep); rc != RI_OK) return rc;
    auto found = listen_points_.undecided(c.peer().client_id, q.request);
    if (!found) return rep.fail(found.error().code(), "accept: " + found.error().message());
    PendingRequest &p = **found;
    auto target = stream_target(c, q.qp);
    if (!target) return rep.fail(target.error().code(), "accept: " + target.error().message());
    KvpObject *qp = target->qp;
    KvpObject *open = target->open;
    const ri_qp_attr_t &qa = target->attr;
    if (open->ref.name() != p.rnic()) {
        return rep.fail(RI_EINVAL, "accept: the request came to RNIC " + p.rnic() + ", the QP is of RNIC " +
                                       open->ref.name());
    }
    auto taken = listen_points_.accept(p, std::span<const uint8_t>(q.private_data, q.private_data_len),
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ird, iwarp::kMpaIrdOrdMax)),
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ord, iwarp::kMpaIrdOrdMax)));
    if (!taken) return rep.fail(rdma::from_errno(taken.error().code()), "accept: " + taken.error().message());
    // The request becomes the QP's endpoint, with its socket and session.
    auto ep = std::make_unique<Endpoint>(endpoints_, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name(),
                                       VerbCommands::kvp_runs_streams(c.peer().client_id, qp->offload));
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    raw->start_passive(std::move(taken->sock), std::move(taken->session), taken->liveness_set, taken->ends);
    return RI_OK;
}

int ConnectionCommands::convert(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_convert>();
    if (const int rc = check_prologue("convert", q, rep); rc != RI_OK) return rc;
    if (q.role > KRDMA_CONVERT_RESPONDER) return rep.fail(RI_EINVAL, "convert: unknown role " + std::to_string(q.role));
    if ((q.flags & ~uint32_t{KRDMA_CONVERT_BYTE_CHANNEL | KRDMA_CONVERT_LINK}) != 0) {
        return rep.fail(RI_EINVAL, "convert: unknown flags " + std::to_string(q.flags));
    }
    if ((q.flags & KRDMA_CONVERT_LINK) != 0 && (q.flags & KRDMA_CONVERT_BYTE_CHANNEL) == 0) {
        return rep.fail(RI_EINVAL, "convert: KRDMA_CONVERT_LINK comes only with KRDMA_CONVERT_BYTE_CHANNEL");
    }
    if (req.message == nullptr || req.message->nfds != 1) {
        return rep.fail(RI_EBADF, "convert: the request must carry exactly one descriptor, the connected socket");
    }
    krdma::UniqueFd s = std::move(req.message->fds[0]);
    req.message->nfds = 0;
    // A connected TCP stream socket, using the QP's RNIC's address.
    int type = 0;
    socklen_t tl = sizeof type;
    if (::getsockopt(s.get(), SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) {
        return rep.fail(RI_EBADF, "convert: the descriptor is not a stream socket");
    }
    sockaddr_storage local{}, remote{};
    socklen_t ll = sizeof local, rl = sizeof remote;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr *>(&local), &ll) != 0 ||
        (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
        return rep.fail(RI_EBADF, "convert: the descriptor is not a TCP socket over IPv4 or IPv6");
    }
    if (::getpeername(s.get(), reinterpret_cast<sockaddr *>(&remote), &rl) != 0) {
        return rep.fail(RI_ENOTCONN, "convert: the socket is not connected");
    }
    auto target = stream_target(c, q.qp);
    if (!target) return rep.fail(target.error().code(), "convert: " + target.error().message());
    KvpObject *qp = target->qp;
    KvpObject *open = target->open;
    const ri_qp_attr_t &qa = target->attr;
    const ri_llp_params_t ends = llp::addresses_of(s.get());
    const ri_net_addr_t &rnic_addr = open->ref.address();
    if (ends.local.family != rnic_addr.family ||
        std::memcmp(ends.local.addr, rnic_addr.addr, rnic_addr.family == RI_AF_INET6 ? 16 : 4) != 0) {
        return rep.fail(RI_EADDRNOTAVAIL, "convert: the socket's local address " +
                                              llp::text_of(ends.local, ends.local_port) + " is not RNIC " +
                                              open->ref.name() + "'s (" + krdma::to_text(rnic_addr) + ")");
    }
    const int flags = ::fcntl(s.get(), F_GETFL);
    if (flags < 0 || ::fcntl(s.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
        return rep.fail(rdma::from_errno(errno), std::string("convert: fcntl: ") + std::strerror(errno));
    }
    int one = 1;
    (void)::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bool initiator = q.role == KRDMA_CONVERT_INITIATOR;
    if (q.role == KRDMA_CONVERT_AUTO) {
        // Both ends see the same two (address, port) pairs, swapped: the lower one sends the request.
        const size_t n = ends.local.family == RI_AF_INET6 ? 16 : 4;
        const int cmp = std::memcmp(ends.local.addr, ends.remote.addr, n);
        initiator = cmp < 0 || (cmp == 0 && ends.local_port < ends.remote_port);
    }
    const auto timeout = q.timeout_ms != 0 ? std::chrono::milliseconds(q.timeout_ms) : settings_.connect_timeout;
    const std::span<const uint8_t> pd(q.private_data, q.private_data_len);
    auto ep = std::make_unique<Endpoint>(endpoints_, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name(),
                                       VerbCommands::kvp_runs_streams(c.peer().client_id, qp->offload));
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    if ((q.flags & KRDMA_CONVERT_BYTE_CHANNEL) != 0) raw->want_byte_channel((q.flags & KRDMA_CONVERT_LINK) != 0);
    if (initiator) {
        ++endpoints_.counters().active_opens;
        // Connected already: the first writable event finds no socket error and starts MPA.
        raw->start_active(std::move(s), mpa_config(*open, qa.ird, qa.ord), pd, Clock::now() + timeout,
                          EndpointInput::convert_started);
    } else {
        ++endpoints_.counters().passive_opens;
        raw->start_converted_responder(std::move(s), mpa_config(*open, qa.ird, qa.ord), pd,
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ird, iwarp::kMpaIrdOrdMax)),
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ord, iwarp::kMpaIrdOrdMax)),
                                       Clock::now() + timeout);
    }
    return RI_OK;
}

int ConnectionCommands::reject(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_reject>();
    if (const int rc = check_prologue("reject", q, rep); rc != RI_OK) return rc;
    auto found = listen_points_.undecided(c.peer().client_id, q.request);
    if (!found) return rep.fail(found.error().code(), "reject: " + found.error().message());
    if (auto st = listen_points_.reject(**found, std::span<const uint8_t>(q.private_data, q.private_data_len)); !st) {
        return rep.fail(rdma::from_errno(st.error().code()), "reject: " + st.error().message());
    }
    return RI_OK;
}

int ConnectionCommands::tick() {
    const auto now = Clock::now();
    int wait = -1;
    auto earlier = [&wait](int ms) {
        if (ms >= 0 && (wait < 0 || ms < wait)) wait = ms;
    };
    earlier(endpoints_.linger().poll(now));
    if (int ms = -1; !endpoints_.begin_visit(now, ms)) {
        earlier(ms);
        return wait;
    }
    earlier(endpoints_.visit_timed(now));
    earlier(listen_points_.visit(now));
    return wait;
}

}  // namespace kal
