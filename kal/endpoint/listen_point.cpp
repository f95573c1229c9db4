// Endpoint management, passive side: listen points, the connection requests they accept, and their owner.
// Everything here runs on the device server's thread.
#include "listen_point.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "abort_linger.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"
#include "socket_ends.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "llp";

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// ListenPoint

ListenPoint::~ListenPoint() {
    if (m_ == nullptr) return;
    m_->server_.unwatch(sock_.get());
    const std::set<uint64_t> ids = requests_;  // drop_pending() edits the set
    for (uint64_t id : ids) m_->drop_pending(id);
    m_->all_.erase(this);
}

// ---------------------------------------------------------------------------------------------------------------
// ListenPoints

ListenPoints::ListenPoints(DeviceServer &server, const LlpSettings &settings, Endpoints &endpoints, Deliver deliver)
    : server_(server), settings_(settings), endpoints_(endpoints), deliver_(std::move(deliver)) {}

ListenPoints::~ListenPoints() {
    for (auto &[id, p] : pending_) server_.unwatch(p->sock_.get());
    pending_.clear();
    // Listen points live in the consumers' tables, which may outlive this object.
    for (ListenPoint *l : all_) {
        server_.unwatch(l->sock_.get());
        l->m_ = nullptr;
    }
}

rdma::Expected<std::unique_ptr<ListenPoint>> ListenPoints::open(uint32_t client, uint64_t context,
                                                                const ri_net_addr_t &addr, uint16_t port,
                                                                uint16_t backlog, iwarp::MpaConfig cfg,
                                                                std::string rnic) {
    sockaddr_storage ss = krdma::to_sockaddr(addr, port);
    const socklen_t len = krdma::sockaddr_len(addr);
    if (len == 0) return rdma::Error(RI_EAFNOSUPPORT, "RNIC " + rnic + " has no IP address");
    krdma::UniqueFd s(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) return rdma::Error(rdma::from_errno(errno), std::string("socket: ") + std::strerror(errno));
    int one = 1;
    (void)::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&ss), len) != 0) {
        return rdma::Error(rdma::from_errno(errno),
                           "cannot bind " + llp::text_of(addr, port) + ": " + std::strerror(errno));
    }
    // An RNIC that speaks RFC 7306 says in its handshakes that it runs this stack (before listen(): the program
    // then keeps each SYN, and the accepted sockets inherit the mark).
    if (cfg.rfc7306 && !endpoints_.mark_socket(s.get())) cfg.rfc7306 = false;
    if (::listen(s.get(), backlog != 0 ? backlog : 128) != 0) {
        return rdma::Error(rdma::from_errno(errno), std::strerror(errno));
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof bound;
    ::getsockname(s.get(), reinterpret_cast<sockaddr *>(&bound), &blen);
    uint16_t bound_port = 0;
    (void)krdma::net_addr_from_sockaddr(bound, &bound_port);
    const int fd = s.get();
    const bool inherits = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 &&
                          llp::set_liveness(fd, settings_).has_value();
    std::unique_ptr<ListenPoint> lp(new ListenPoint(*this, client, context, std::move(s), cfg, std::move(rnic)));
    lp->inherits_options_ = inherits;
    lp->local_ = addr;
    lp->port_ = bound_port;
    all_.insert(lp.get());
    return lp;
}

void ListenPoints::start(ListenPoint &lp, Handle handle, uint32_t cookie) {
    lp.handle_ = handle;
    lp.cookie_ = cookie;
    ListenPoint *raw = &lp;
    server_.watch(lp.sock_.get(), POLLIN, [this, raw](short) { accept_tcp(*raw); });
    RDMA_LOG_INFO(kComponent, "client %u listens on %s (RNIC %s)", lp.client_,
                  llp::text_of(lp.local_, lp.port_).c_str(), lp.rnic_.c_str());
}

rdma::Expected<PendingRequest *> ListenPoints::undecided(uint32_t client, uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second->lp_->client_ != client) {
        return rdma::Error(RI_ENOENT, "no such request of this client");
    }
    if (it->second->session_.state() != llp::MpaState::request_received) {
        return rdma::Error(RI_ENOTCONN, "the request is not waiting for a decision");
    }
    return it->second.get();
}

rdma::Expected<AcceptedRequest> ListenPoints::accept(PendingRequest &p, std::span<const uint8_t> pd, uint16_t ird,
                                                     uint16_t ord) {
    if (auto st = p.session_.accept(pd, ird, ord); !st) return st.error();
    endpoints_.counters().decision_ns += lap(p.step_at_);
    // The request becomes the QP's endpoint: the socket and the session move over. The socket stays in the epoll
    // set: the endpoint's first watch replaces the request's (one epoll_ctl where removing and adding again took
    // two), and a stale event of the request finds no request under its id.
    AcceptedRequest a{std::move(p.sock_), std::move(p.session_), p.lp_->inherits_options_, p.ends_};
    const uint64_t id = p.id_;
    p.lp_->requests_.erase(id);
    pending_.erase(id);  // p goes
    return a;
}

rdma::Expected<void> ListenPoints::reject(PendingRequest &p, std::span<const uint8_t> pd) {
    const uint64_t id = p.id_;
    if (auto st = p.session_.reject(pd); !st) return st.error();
    ++endpoints_.counters().rejected;
    // The reply (at most 532 bytes) nearly always fits the socket at once; otherwise it finishes in the loop.
    if (p.session_.on_writable() == llp::MpaState::sending_reply) {
        server_.watch(p.sock_.get(), POLLOUT, [this, id](short r) { pending_events(id, r); });
    } else {
        drop_pending(id);
    }
    return {};
}

int ListenPoints::visit(Clock::time_point now) {
    int wait = -1;
    std::vector<uint64_t> expired;
    for (auto &[id, p] : pending_) {
        if (p->session_.expired(now)) {
            expired.push_back(id);
        } else if (!p->session_.done()) {
            endpoints_.arm(p->session_.deadline());
            if (const int ms = p->session_.poll_timeout_ms(now); ms >= 0 && (wait < 0 || ms < wait)) wait = ms;
        }
    }
    for (uint64_t id : expired) {
        PendingRequest &p = *pending_.at(id);
        ++endpoints_.counters().timeouts;
        if (p.session_.state() == llp::MpaState::request_received) {
            // The consumer never decided: the peer gets a reject rather than a silent close.
            RDMA_LOG_INFO(kComponent, "connection request %lu not answered in time: rejecting it",
                          static_cast<unsigned long>(id));
            if (p.session_.reject({})) (void)p.session_.on_writable();
        }
        drop_pending(id);
    }
    return wait;
}

void ListenPoints::accept_tcp(ListenPoint &lp) {
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
        if (auto remote = krdma::net_addr_from_sockaddr(peer, &p->ends_.remote_port)) {
            p->ends_.remote = *remote;
            p->ends_.local = lp.local_;
            p->ends_.local_port = lp.port_;
            p->ends_.fd = -1;
        } else {
            p->ends_ = llp::addresses_of(p->sock_.get());
        }
        iwarp::MpaConfig cfg = lp.cfg_;
        if (cfg.rfc7306) cfg.rfc7306 = endpoints_.peer_runs_stack(p->sock_.get());  // only with a peer of this stack
        if (auto st = p->session_.start_responder(cfg, Clock::now() + settings_.request_timeout); !st) {
            RDMA_LOG_CLIENT(warn, kComponent, "cannot start MPA: %s", st.error().message().c_str());
            continue;
        }
        endpoints_.arm(p->session_.deadline());
        const int fd = p->sock_.get();
        lp.requests_.insert(id);
        pending_.emplace(id, std::move(p));
        server_.watch(fd, POLLIN, [this, id](short revents) { pending_events(id, revents); });
    }
}

void ListenPoints::pending_events(uint64_t id, short revents) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    PendingRequest &p = *it->second;
    if (p.announced_ && p.session_.state() == llp::MpaState::request_received) {
        // Waiting for the consumer: only the peer giving up wakes us.
        if ((revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
            RDMA_LOG_INFO(kComponent, "connection request %lu withdrawn by the peer", static_cast<unsigned long>(id));
            drop_pending(id);
        }
        return;
    }
    const llp::MpaState s = p.session_.on_events(revents);
    switch (s) {
        case llp::MpaState::request_received: {
            if (p.announced_) break;
            p.announced_ = true;
            endpoints_.counters().request_ns += lap(p.step_at_);
            krdma_cm_event e = cm_event(KRDMA_CM_CONNECT_REQUEST, p.lp_->handle_, p.lp_->context_);
            e.cookie = p.lp_->cookie_;
            e.request = id;
            e.llp = p.ends_;
            if (auto f = p.session_.peer_frame()) {
                e.llp.mpa_revision = f->revision;
                e.llp.ird = f->ird;
                e.llp.ord = f->ord;
                if (f->crc) e.llp.mpa_flags |= RI_MPA_CRC;
                if (f->markers) e.llp.mpa_flags |= RI_MPA_MARKERS;
                if (f->peer2peer) e.llp.mpa_flags |= RI_MPA_PEER2PEER;
            }
            krdma::set_private_data(e, p.session_.peer_private_data());
            p.session_.set_deadline(Clock::now() + settings_.accept_timeout);
            endpoints_.arm(p.session_.deadline());
            if (!deliver_(p.lp_->client_, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, {})) {
                drop_pending(id);
                return;
            }
            server_.watch(p.sock_.get(), POLLRDHUP, [this, id](short r) { pending_events(id, r); });
            return;
        }
        case llp::MpaState::rejected:
        case llp::MpaState::failed:
            if (s == llp::MpaState::failed) {
                ++endpoints_.counters().failed;
                const rdma::Error *why = p.session_.error();
                RDMA_LOG_INFO(kComponent, "connection request refused: %s",
                              why != nullptr ? why->message().c_str() : "?");
            }
            drop_pending(id);
            return;
        default: break;
    }
    const short ev = p.session_.poll_events();
    server_.watch(p.sock_.get(), ev != 0 ? ev : POLLIN, [this, id](short r) { pending_events(id, r); });
}

void ListenPoints::drop_pending(uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    server_.unwatch(it->second->sock_.get());
    if (it->second->lp_ != nullptr) it->second->lp_->requests_.erase(id);
    krdma::UniqueFd sock = std::move(it->second->sock_);
    pending_.erase(it);
    // Closing with the peer's bytes unread (oversized private data, say) makes TCP reset at once, and a reject
    // reply still in flight would go with it: FIN after the reply instead, and the reset once it is acknowledged.
    if (sock && llp::unread(sock.get()) > 0) endpoints_.linger().abort(std::move(sock));
}

}  // namespace kal
