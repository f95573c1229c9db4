// The connection commands: listen points and their requests, CONNECT, ACCEPT, REJECT and CONVERT decoded, checked
// and handed to the endpoints (kal/endpoint) and the LLP (kal/llp). Everything here runs on the device server's
// thread.
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
    if constexpr (requires { q.reserved2; }) {
        if (q.reserved != 0 || q.reserved2 != 0) {
            return rep.fail(RI_EINVAL, std::string(cmd) + ": the reserved words must be zero");
        }
    }
    return RI_OK;
}

}  // namespace

// A listen point: a listening TCP socket on an RNIC's address, in its owner's table under the RNIC open.
class ListenPoint final : public Resource {
public:
    ListenPoint(ConnectionCommands &m, uint32_t client, uint64_t context, krdma::UniqueFd sock, iwarp::MpaConfig cfg,
                std::string rnic)
        : m_(&m), client_(client), context_(context), sock_(std::move(sock)), cfg_(cfg), rnic_(std::move(rnic)) {}
    ~ListenPoint() override {
        if (m_ == nullptr) return;
        m_->server_.unwatch(sock_.get());
        const std::set<uint64_t> ids = requests_;  // drop_pending() edits the set
        for (uint64_t id : ids) m_->drop_pending(id);
        m_->listens_.erase(this);
    }
    ConnectionCommands *m_;
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

// A connection request on a listen point: the accepted socket and its MPA session, until the consumer decides.
struct PendingRequest {
    PendingRequest(uint64_t i, ListenPoint &l, krdma::UniqueFd s) : id(i), lp(&l), sock(std::move(s)), session(sock.get()) {}
    uint64_t id;
    ListenPoint *lp;
    krdma::UniqueFd sock;
    llp::MpaSession session;
    ri_llp_params_t ends{};  // local and remote address and port, learned at accept (fd -1)
    bool announced = false;  // the consumer has the CONNECT_REQUEST event
};


ConnectionCommands::ConnectionCommands(VerbCommands &verbs, LlpSettings settings)
    : verbs_(verbs),
      server_(verbs.server()),
      settings_(settings),
      endpoints_(server_, settings_,
                 [&verbs](uint32_t client_id, std::span<const uint8_t> record, std::span<const int> fds) {
                     return verbs.deliver_record(client_id, KRDMA_EVENT_CM, record, fds);
                 },
                 same_host_hooks(verbs)) {
    server_.on(KRDMA_CMD_LISTEN, [this](Connection &c, const Request &r, Reply &rep) { return listen(c, r, rep); });
    server_.on(KRDMA_CMD_DESTROY_LISTEN,
               [this](Connection &c, const Request &r, Reply &rep) { return destroy_listen(c, r, rep); });
    server_.on(KRDMA_CMD_CONNECT, [this](Connection &c, const Request &r, Reply &rep) { return connect(c, r, rep); });
    server_.on(KRDMA_CMD_ACCEPT, [this](Connection &c, const Request &r, Reply &rep) { return accept(c, r, rep); });
    server_.on(KRDMA_CMD_REJECT, [this](Connection &c, const Request &r, Reply &rep) { return reject(c, r, rep); });
    server_.on(KRDMA_CMD_CONVERT, [this](Connection &c, const Request &r, Reply &rep) { return convert(c, r, rep); });
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
        a.rejected = endpoints_.counters().rejected;
        a.peer_rejected = endpoints_.counters().peer_rejected;
        a.failed = endpoints_.counters().failed;
        a.timeouts = endpoints_.counters().timeouts;
        a.peer_disconnects = endpoints_.counters().peer_disconnects;
        a.resets = endpoints_.counters().resets;
        a.listen_points = listens_.size();
        a.pending_requests = pending_.size();
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
                         KRDMA_CMD_REJECT, KRDMA_CMD_CONVERT, KRDMA_CMD_LIST_ENDPOINTS, KRDMA_CMD_LLP_COUNTERS}) {
        server_.off(cmd);
    }
    server_.on_tick(nullptr);
    verbs_.count_endpoints_with(nullptr);
    verbs_.on_qp_ended(nullptr);
    if (links_) server_.unwatch(links_->fd());
    for (auto &[id, p] : pending_) server_.unwatch(p->sock.get());
    pending_.clear();
    // Endpoints and listen points live in the consumers' tables, which may outlive this object.
    endpoints_.detach_all();
    for (ListenPoint *l : listens_) {
        server_.unwatch(l->sock_.get());
        l->m_ = nullptr;
    }
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
    sockaddr_storage ss = krdma::to_sockaddr(addr, q.port);
    const socklen_t len = krdma::sockaddr_len(addr);
    if (len == 0) return rep.fail(RI_EAFNOSUPPORT, "listen: RNIC " + (*open)->ref.name() + " has no IP address");
    krdma::UniqueFd s(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) return rep.fail(rdma::from_errno(errno), std::string("listen: socket: ") + std::strerror(errno));
    int one = 1;
    (void)::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&ss), len) != 0) {
        return rep.fail(rdma::from_errno(errno), "listen: cannot bind " + llp::text_of(addr, q.port) + ": " +
                                                     std::strerror(errno));
    }
    if (::listen(s.get(), q.backlog != 0 ? q.backlog : 128) != 0) {
        return rep.fail(rdma::from_errno(errno), std::string("listen: ") + std::strerror(errno));
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof bound;
    ::getsockname(s.get(), reinterpret_cast<sockaddr *>(&bound), &blen);
    uint16_t port = 0;
    (void)krdma::net_addr_from_sockaddr(bound, &port);
    ri_rnic_attr_t a{};
    (void)(*open)->v->query_rnic(static_cast<ri_rnic_t>((*open)->handle), &a);
    const int fd = s.get();
    const bool inherits = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 &&
                          llp::set_liveness(fd, settings_).has_value();
    auto lp = std::make_unique<ListenPoint>(*this, c.peer().client_id, q.context, std::move(s),
                                            mpa_config(a, a.max_ird, a.max_ord), (*open)->ref.name());
    ListenPoint *raw = lp.get();
    raw->inherits_options_ = inherits;
    raw->local_ = addr;
    raw->port_ = port;
    listens_.insert(raw);
    auto h = ctx.table.add(ResourceType::listener, q.rnic, {}, std::move(lp));
    if (!h) return rep.fail(h.error().code(), "listen: " + h.error().message());  // its destructor closes the socket
    raw->handle_ = *h;
    raw->cookie_ = q.cookie;
    server_.watch(fd, POLLIN, [this, raw](short) { accept_tcp(*raw); });
    RDMA_LOG_INFO(kComponent, "client %u listens on %s (RNIC %s)", c.peer().client_id, llp::text_of(addr, port).c_str(),
                  raw->rnic_.c_str());
    q.port = port;
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

void ConnectionCommands::accept_tcp(ListenPoint &lp) {
    for (;;) {
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        krdma::UniqueFd s(::accept4(lp.sock_.get(), reinterpret_cast<sockaddr *>(&peer), &peer_len,
                                    SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!s) return;
        ++endpoints_.counters().passive_opens;
        if (lp.requests_.size() >= settings_.max_pending) {
            RDMA_LOG_CLIENT(warn, kComponent, "listen point %#lx: %u requests pending, refusing one",
                          static_cast<unsigned long>(lp.handle_), settings_.max_pending);
            ++endpoints_.counters().rejected;
            continue;  // closing the socket refuses it
        }
        if (!lp.inherits_options_) {
            int one = 1;
            (void)::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        const uint64_t id = next_request_++;
        auto p = std::make_unique<PendingRequest>(id, lp, std::move(s));
        // The ends as accept4() and the listen point know them: the request's record and the transition need no
        // getsockname()/getpeername() (four system calls per passive connection).
        if (auto remote = krdma::net_addr_from_sockaddr(peer, &p->ends.remote_port)) {
            p->ends.remote = *remote;
            p->ends.local = lp.local_;
            p->ends.local_port = lp.port_;
            p->ends.fd = -1;
        } else {
            p->ends = llp::addresses_of(p->sock.get());
        }
        if (auto st = p->session.start_responder(lp.cfg_, Clock::now() + settings_.request_timeout); !st) {
            RDMA_LOG_CLIENT(warn, kComponent, "cannot start MPA: %s", st.error().message().c_str());
            continue;
        }
        endpoints_.arm(p->session.deadline());
        const int fd = p->sock.get();
        lp.requests_.insert(id);
        pending_.emplace(id, std::move(p));
        server_.watch(fd, POLLIN, [this, id](short revents) { pending_events(id, revents); });
    }
}

void ConnectionCommands::pending_events(uint64_t id, short revents) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    PendingRequest &p = *it->second;
    if (p.announced && p.session.state() == llp::MpaState::request_received) {
        // Waiting for the consumer: only the peer giving up wakes us.
        if ((revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
            RDMA_LOG_INFO(kComponent, "connection request %lu withdrawn by the peer", static_cast<unsigned long>(id));
            drop_pending(id);
        }
        return;
    }
    const llp::MpaState s = p.session.on_events(revents);
    switch (s) {
        case llp::MpaState::request_received: {
            if (p.announced) break;
            p.announced = true;
            krdma_cm_event e = cm_event(KRDMA_CM_CONNECT_REQUEST, p.lp->handle_, p.lp->context_);
            e.cookie = p.lp->cookie_;
            e.request = id;
            e.llp = p.ends;
            if (auto f = p.session.peer_frame()) {
                e.llp.mpa_revision = f->revision;
                e.llp.ird = f->ird;
                e.llp.ord = f->ord;
                if (f->crc) e.llp.mpa_flags |= RI_MPA_CRC;
                if (f->markers) e.llp.mpa_flags |= RI_MPA_MARKERS;
                if (f->peer2peer) e.llp.mpa_flags |= RI_MPA_PEER2PEER;
            }
            krdma::set_private_data(e, p.session.peer_private_data());
            p.session.set_deadline(Clock::now() + settings_.accept_timeout);
            endpoints_.arm(p.session.deadline());
            if (!verbs_.deliver_record(p.lp->client_, KRDMA_EVENT_CM, {reinterpret_cast<const uint8_t *>(&e), sizeof e})) {
                drop_pending(id);
                return;
            }
            server_.watch(p.sock.get(), POLLRDHUP, [this, id](short r) { pending_events(id, r); });
            return;
        }
        case llp::MpaState::rejected:
        case llp::MpaState::failed:
            if (s == llp::MpaState::failed) {
                ++endpoints_.counters().failed;
                const rdma::Error *why = p.session.error();
                RDMA_LOG_INFO(kComponent, "connection request refused: %s",
                              why != nullptr ? why->message().c_str() : "?");
            }
            drop_pending(id);
            return;
        default: break;
    }
    const short ev = p.session.poll_events();
    server_.watch(p.sock.get(), ev != 0 ? ev : POLLIN, [this, id](short r) { pending_events(id, r); });
}

void ConnectionCommands::drop_pending(uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    server_.unwatch(it->second->sock.get());
    if (it->second->lp != nullptr) it->second->lp->requests_.erase(id);
    krdma::UniqueFd sock = std::move(it->second->sock);
    pending_.erase(it);
    // Closing with the peer's bytes unread (oversized private data, say) makes TCP reset at once, and a reject
    // reply still in flight would go with it: FIN after the reply instead, and the reset once it is acknowledged.
    if (sock && llp::unread(sock.get()) > 0) endpoints_.linger().abort(std::move(sock));
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

rdma::Expected<ConnectionCommands::PendingMap::iterator> ConnectionCommands::undecided_request(Connection &c,
                                                                                               uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second->lp->client_ != c.peer().client_id) {
        return rdma::Error(RI_ENOENT, "no such request of this client");
    }
    if (it->second->session.state() != llp::MpaState::request_received) {
        return rdma::Error(RI_ENOTCONN, "the request is not waiting for a decision");
    }
    return it;
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
    raw->start_active(std::move(s), mpa_config(*open, qa.ird, qa.ord),
                      std::span<const uint8_t>(q.private_data, q.private_data_len), Clock::now() + timeout);
    return RI_OK;
}

int ConnectionCommands::accept(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_accept>();
    if (const int rc = check_prologue("accept", q, rep); rc != RI_OK) return rc;
    auto found = undecided_request(c, q.request);
    if (!found) return rep.fail(found.error().code(), "accept: " + found.error().message());
    auto it = *found;
    PendingRequest &p = *it->second;
    auto target = stream_target(c, q.qp);
    if (!target) return rep.fail(target.error().code(), "accept: " + target.error().message());
    KvpObject *qp = target->qp;
    KvpObject *open = target->open;
    const ri_qp_attr_t &qa = target->attr;
    if (open->ref.name() != p.lp->rnic_) {
        return rep.fail(RI_EINVAL, "accept: the request came to RNIC " + p.lp->rnic_ + ", the QP is of RNIC " +
                                       open->ref.name());
    }
    if (auto st = p.session.accept(std::span<const uint8_t>(q.private_data, q.private_data_len),
                                   static_cast<uint16_t>(std::min<uint32_t>(qa.ird, iwarp::kMpaIrdOrdMax)),
                                   static_cast<uint16_t>(std::min<uint32_t>(qa.ord, iwarp::kMpaIrdOrdMax)));
        !st) {
        return rep.fail(rdma::from_errno(st.error().code()), "accept: " + st.error().message());
    }
    // The request becomes the QP's endpoint: the socket and the session move over. The socket stays in the epoll
    // set: the endpoint's first watch replaces the request's (one epoll_ctl where removing and adding again took
    // two), and a stale event of the request finds no request under its id.
    krdma::UniqueFd sock = std::move(p.sock);
    llp::MpaSession session = std::move(p.session);
    const bool inherited = p.lp->inherits_options_;
    const ri_llp_params_t ends = p.ends;
    p.lp->requests_.erase(q.request);
    pending_.erase(it);
    auto ep = std::make_unique<Endpoint>(endpoints_, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name(),
                                       VerbCommands::kvp_runs_streams(c.peer().client_id, qp->offload));
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    raw->start_passive(std::move(sock), std::move(session), inherited, ends);
    return RI_OK;
}

int ConnectionCommands::convert(Connection &c, const Request &req, Reply &rep) {
    const auto q = req.as<krdma_convert>();
    if (const int rc = check_prologue("convert", q, rep); rc != RI_OK) return rc;
    if (q.role > KRDMA_CONVERT_RESPONDER) return rep.fail(RI_EINVAL, "convert: unknown role " + std::to_string(q.role));
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
    auto found = undecided_request(c, q.request);
    if (!found) return rep.fail(found.error().code(), "reject: " + found.error().message());
    PendingRequest &p = *(*found)->second;
    if (auto st = p.session.reject(std::span<const uint8_t>(q.private_data, q.private_data_len)); !st) {
        return rep.fail(rdma::from_errno(st.error().code()), "reject: " + st.error().message());
    }
    ++endpoints_.counters().rejected;
    // The reply (at most 532 bytes) nearly always fits the socket at once; otherwise it finishes in the loop.
    if (p.session.on_writable() == llp::MpaState::sending_reply) {
        server_.watch(p.sock.get(), POLLOUT, [this, id = q.request](short r) { pending_events(id, r); });
    } else {
        drop_pending(q.request);
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
    std::vector<uint64_t> expired;
    for (auto &[id, p] : pending_) {
        if (p->session.expired(now)) {
            expired.push_back(id);
        } else if (!p->session.done()) {
            endpoints_.arm(p->session.deadline());
            earlier(p->session.poll_timeout_ms(now));
        }
    }
    for (uint64_t id : expired) {
        PendingRequest &p = *pending_.at(id);
        ++endpoints_.counters().timeouts;
        if (p.session.state() == llp::MpaState::request_received) {
            // The consumer never decided: the peer gets a reject rather than a silent close.
            RDMA_LOG_INFO(kComponent, "connection request %lu not answered in time: rejecting it",
                          static_cast<unsigned long>(id));
            if (p.session.reject({})) (void)p.session.on_writable();
        }
        drop_pending(id);
    }
    return wait;
}

}  // namespace kal
