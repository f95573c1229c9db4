// Endpoint management: a QP's connection, moved by its state machine, and the owner of every endpoint of a device.
// Everything here runs on the device server's thread.
#include "endpoint.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "krdma/net_addr.hpp"
#include "rnicpi/cpp/channel.hpp"
#include "rnicpi/host/log.hpp"
#include "socket_ends.hpp"
#include "tcp_stats.hpp"

namespace kal {
namespace {

// How long a kVP that runs a stream has to report the end its peer made (it reads the bytes before the FIN first)
// before the kAL ends the connection itself.
constexpr std::chrono::milliseconds kKvpEndGrace{2000};

constexpr const char *kComponent = "llp";

// The peer closed its side (FIN) or the connection failed.
bool peer_closed(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int socket_error(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
}

// The error that ended a connection in RDMA mode, or 0 when none shows. SO_ERROR is read once, and the uVP reading
// the same socket may have taken it first; but until this side sent its FIN, a socket that TCP closed (a reset, the
// user timeout, keepalive) still tells by its state. (After our FIN, the peer's FIN closes it too.)
int connection_error(int fd, bool fin_sent) {
    if (const int err = socket_error(fd); err != 0) return rdma::from_errno(err);
    if (fin_sent) return 0;
    auto t = llp::tcp_info_of(fd);
    if (!t || t->state != TCP_CLOSE) return 0;
    return t->retransmits > 0 || t->probes > 0 ? RI_ETIMEDOUT : RI_ECONNRESET;
}

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71  // Linux 5.14
#endif

// The cookie of the network namespace socket @p fd lives in, where the kernel tells it.
std::optional<uint64_t> netns_cookie(int fd) {
    uint64_t cookie = 0;
    socklen_t len = sizeof cookie;
    if (::getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0 || len != sizeof cookie) return std::nullopt;
    return cookie;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Endpoints

Endpoints::Endpoints(DeviceServer &server, const LlpSettings &settings, Deliver deliver, SameHostHooks same_host)
    : server_(server), settings_(settings), deliver_(std::move(deliver)), same_host_(std::move(same_host)) {
    if (settings_.same_host.enabled && !settings_.same_host.rendezvous.empty() && same_host_) {
        rendezvous_ = std::make_unique<Rendezvous>(server_, settings_.same_host.rendezvous,
                                                   [this](const RendezvousOffer &o, int tcp) {
                                                       return Endpoint::answer_offer(*this, o, tcp);
                                                   });
    }
}

void Endpoints::detach_all() noexcept {
    for (Endpoint *e : all_) e->detach();
}

bool Endpoints::begin_visit(Clock::time_point now, int &wait_ms) noexcept {
    wait_ms = -1;
    if (now < next_due_) {
        // No deadline is due: nothing to visit (a loop turn per device message would otherwise walk every
        // connection in setup).
        if (next_due_ != Clock::time_point::max()) wait_ms = ms_until(next_due_, now);
        return false;
    }
    next_due_ = Clock::time_point::max();
    return true;
}

int Endpoints::visit_timed(Clock::time_point now) {
    int wait = -1;
    // Endpoints with a deadline armed (a setup, a kVP's grace period): only those, so that a wake-up costs the same
    // with ten thousand idle connections. One whose deadline is gone (or just fired) leaves the set until it arms
    // another. fail() never destroys an endpoint, so the snapshot stays valid.
    timed_snapshot_.assign(timed_.begin(), timed_.end());
    for (Endpoint *e : timed_snapshot_) {
        const int ms = e->check_deadline(now);
        if (ms < 0) {
            timed_.erase(e);
        } else {
            if (wait < 0 || ms < wait) wait = ms;
            arm(now + std::chrono::milliseconds(ms));
        }
    }
    return wait;
}

int Endpoints::ms_until(Clock::time_point t, Clock::time_point now) {
    if (t <= now) return 0;
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count()) + 1;
}

// ---------------------------------------------------------------------------------------------------------------
// Endpoint

Endpoint::Endpoint(Endpoints &m, uint32_t client, Handle qp_handle, KvpObject &qp, uint32_t qp_num, uint64_t context,
                   std::string rnic, bool kvp_stream)
    : m_(&m),
      client_(client),
      qp_handle_(qp_handle),
      qp_(qp),
      qp_num_(qp_num),
      context_(context),
      rnic_(std::move(rnic)),
      kvp_stream_(kvp_stream) {
    m.all_.insert(this);
    // The RNIC's object counts (rdmactl resources) include its endpoints.
    if (qp_.counts != nullptr) qp_.counts->by_type[kEndpointType].fetch_add(1, std::memory_order_relaxed);
}

Endpoint::~Endpoint() {
    if (qp_.counts != nullptr) qp_.counts->by_type[kEndpointType].fetch_sub(1, std::memory_order_relaxed);
    if (m_ == nullptr) return;
    // The QP is going (destroyed, or its owner died): the connection goes with it, abortively.
    (void)drive(EndpointInput::qp_destroyed);
    unindex();
    m_->all_.erase(this);
    m_->timed_.erase(this);
}

void Endpoint::know_remote(const ri_net_addr_t &addr, uint16_t port) {
    ends_.remote = addr;
    ends_.remote_port = port;
    ends_.fd = -1;
}

void Endpoint::start_active(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                            Clock::time_point deadline, EndpointInput how) {
    sock_ = std::move(sock);
    initiator_ = true;
    tcp_connecting_ = true;
    if (how != EndpointInput::convert_started) step_at_ = Clock::now();
    if (how == EndpointInput::convert_started) {
        converted_ = true;
        // The consumer's socket: its ends are known now, so that its mirror can find it.
        if (may_pair()) ends_ = llp::addresses_of(sock_.get());
    }
    index_ends();
    cfg_ = cfg;
    pd_.assign(pd.begin(), pd.end());
    deadline_ = deadline;
    arm_timer(deadline_);
    (void)drive(how);
    rewatch(POLLOUT);
}

void Endpoint::start_converted_responder(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                                         uint16_t ird, uint16_t ord, Clock::time_point deadline) {
    sock_ = std::move(sock);
    initiator_ = false;
    converted_ = true;
    if (may_pair()) ends_ = llp::addresses_of(sock_.get());
    index_ends();
    auto_accept_ = true;
    ird_ = ird;
    ord_ = ord;
    pd_.assign(pd.begin(), pd.end());
    deadline_ = deadline;
    arm_timer(deadline_);
    (void)drive(EndpointInput::convert_started);
    session_ = std::make_unique<llp::MpaSession>(sock_.get());
    iwarp::MpaConfig agreed = cfg;
    if (agreed.rfc7306) agreed.rfc7306 = m_->peer_runs_stack(sock_.get());  // as for an initiator (on_events)
    if (auto st = session_->start_responder(agreed, deadline); !st) {
        (void)drive(EndpointInput::setup_failed, failure(st.error().code()));
        return;
    }
    rewatch(POLLIN);
}

void Endpoint::start_passive(krdma::UniqueFd sock, llp::MpaSession session, bool liveness_set,
                             const ri_llp_params_t &ends) {
    step_at_ = Clock::now();  // ACCEPT served
    sock_ = std::move(sock);
    liveness_set_ = liveness_set;
    ends_ = ends;
    index_ends();
    session_ = std::make_unique<llp::MpaSession>(std::move(session));
    initiator_ = false;
    deadline_ = session_->deadline();
    arm_timer(deadline_);
    (void)drive(EndpointInput::accept_started);
    offer_pairing();  // before the reply: the initiator's kAL holds its end in setup until it comes
    negotiate(session_->on_writable());
}

void Endpoint::qp_state_changed(uint32_t state) {
    if (m_ == nullptr) return;
    switch (state) {  // from the consumer's request; the other states move no connection
        case RI_QPS_CLOSING: (void)drive(EndpointInput::qp_closing); break;
        case RI_QPS_ERROR: (void)drive(EndpointInput::qp_error, observe()); break;
        case RI_QPS_IDLE: (void)drive(EndpointInput::qp_idle); break;
        default: break;
    }
}

void Endpoint::kvp_ended_qp(uint32_t event_id) {
    if (m_ == nullptr) return;
    const std::optional<EndpointInput> in = input_of_async_event(event_id);
    if (!in) return;
    RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx ended by the kVP (asynchronous event %u)", client_,
                   static_cast<unsigned long>(qp_handle_), event_id);
    (void)drive(*in, observe());
}

void Endpoint::on_events(short revents) {
    const EndpointState state = fsm_.state();
    if (state == EndpointState::connecting) {
        if (tcp_connecting_) {
            const int err = socket_error(sock_.get());
            if (err != 0 || (revents & (POLLERR | POLLHUP)) != 0) {
                (void)drive(EndpointInput::unreachable, failure(err));
                return;
            }
            tcp_connecting_ = false;
            if (step_at_ != Clock::time_point{}) m_->counters_.tcp_connect_ns += lap(step_at_);
            // RFC 7306 is offered only to a peer whose handshake said it runs this stack (Linux siw must never see
            // the offer).
            if (cfg_.rfc7306) cfg_.rfc7306 = m_->peer_runs_stack(sock_.get());
            session_ = std::make_unique<llp::MpaSession>(sock_.get());
            if (auto st = session_->start_initiator(cfg_, pd_, deadline_); !st) {
                (void)drive(EndpointInput::setup_failed, failure(st.error().code()));
                return;
            }
            negotiate(session_->on_writable());
            return;
        }
        negotiate(session_->on_events(revents));
        return;
    }
    if (state != EndpointState::connected && state != EndpointState::disconnecting) return;
    if ((revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) return;
    // Whoever runs the stream reads what came before its end (the last Send, a Terminate that decides how the
    // connection ended), meets the end itself and reports it with the whole story: a uVP by its QP's state
    // change (qp_state_changed), a kVP by its asynchronous event (kvp_ended_qp, RI_AE_QP_LLP_CLOSED or
    // _RESET). Deciding here, on our own reference, would race it: the kAL would end the QP while the bytes
    // before the FIN still wait in the socket, and they would be flushed instead of placed.
    m_->server_.unwatch(sock_.get());
    // A kVP whose QP no longer reads its stream (a QP it already failed, a consumer's own Terminate) reports
    // nothing more: after a grace period the kAL ends the connection from what its reference shows.
    if (kvp_stream()) {
        end_by_ = Clock::now() + kKvpEndGrace;
        arm_timer(end_by_);
    }
}

void Endpoint::arm_timer(Clock::time_point when) {
    m_->timed_.insert(this);
    m_->arm(when);
}

int Endpoint::check_deadline(Clock::time_point now) {
    if (end_by_ != Clock::time_point{}) {
        const EndpointState state = fsm_.state();
        if (state != EndpointState::connected && state != EndpointState::disconnecting) {
            end_by_ = {};  // the kVP's report came first
        } else if (now < end_by_) {
            return Endpoints::ms_until(end_by_, now);
        } else {
            end_by_ = {};
            EndpointFacts f = observe();
            f.peer_closed = true;
            (void)drive(f.error != 0 ? EndpointInput::socket_error : EndpointInput::peer_fin, f);
        }
        return -1;
    }
    if (fsm_.state() != EndpointState::connecting) return -1;
    if (now < deadline_) return Endpoints::ms_until(deadline_, now);
    (void)drive(EndpointInput::setup_timed_out);
    return -1;
}

EndpointInfo Endpoint::info() const {
    EndpointInfo i;
    i.client_id = client_;
    i.qp = qp_handle_;
    i.rnic = rnic_;
    i.state = to_krdma(fsm_.state());
    ri_qp_attr_t a{};
    if (qp_.v->query_qp(static_cast<ri_qp_t>(qp_.handle), &a) == RI_OK) i.qp_num = a.qp_num;
    (void)qp_.v->query_qp_stats(static_cast<ri_qp_t>(qp_.handle), &i.rdma);  // wherever the data path runs
    ri_llp_params_t p = sock_ ? llp::addresses_of(sock_.get()) : llp_;
    i.local = llp::text_of(p.local, p.local_port);
    i.remote = llp::text_of(p.remote, p.remote_port);
    i.llp = llp_;
    i.fd = sock_ ? sock_.get() : -1;
    return i;
}

Endpoint::Driven Endpoint::drive(EndpointInput in, const EndpointFacts &facts,
                                 const std::function<void(krdma_cm_event &)> &decorate) {
    const EndpointState from = fsm_.state();
    const EndpointStep step = fsm_.apply(in, facts);
    if (!step.accepted()) {
        RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx: %s ignored while %s", client_,
                       static_cast<unsigned long>(qp_handle_), std::string(name_of(in)).c_str(),
                       std::string(name_of(from)).c_str());
        return Driven::refused;
    }
    if (from == EndpointState::connecting && step.next == EndpointState::error && step.report != 0) {
        RDMA_LOG_INFO(kComponent, "client %u: QP %#lx connection setup failed (%s): %s", client_,
                      static_cast<unsigned long>(qp_handle_), std::string(name_of(in)).c_str(),
                      std::strerror(step.status));
    }
    krdma_cm_event e = cm(step.report, step.status);
    if (step.report != 0 && decorate) decorate(e);
    count(step.count);
    if (step.qp_to_error) qp_to_error();
    switch (step.release) {
        case SocketRelease::keep: break;
        case SocketRelease::close: close_socket(false); break;
        case SocketRelease::reset: close_socket(true); break;
    }
    if (step.report == 0) return Driven::done;
    const bool handoff = step.report == KRDMA_CM_ESTABLISHED && !kvp_stream() && sock_;
    // The owner's half of the transition: the socket, and on the same-host path the channel's end after it, then
    // the consumer's own channel's when it asked for one.
    const int fds[4] = {sock_.get(), channel_.get(), byte_channel_.get(), link_.get()};
    const size_t nfds = !handoff ? 0 : !channel_ ? 1 : !byte_channel_ ? 2 : link_ ? 4 : 3;
    return send(e, std::span<const int>(fds, nfds)) ? Driven::done : Driven::undelivered;
}

void Endpoint::count(LlpCount c) {
    LlpCounters &n = m_->counters_;
    switch (c) {
        case LlpCount::none: break;
        case LlpCount::established: ++n.established; break;
        case LlpCount::failed: ++n.failed; break;
        case LlpCount::timeouts: ++n.timeouts; break;
        case LlpCount::peer_rejected: ++n.peer_rejected; break;
        case LlpCount::peer_disconnects: ++n.peer_disconnects; break;
        case LlpCount::resets: ++n.resets; break;
    }
}

EndpointFacts Endpoint::observe() const {
    EndpointFacts f;
    if (!sock_) return f;
    f.error = connection_error(sock_.get(), fsm_.state() == EndpointState::disconnecting);
    f.peer_closed = peer_closed(sock_.get());
    f.terminated = terminated();
    // A same-host stream ends in its channel, which the kAL does not read: the TCP connection carries nothing
    // until a kAL releases its end. Once this side closed in order (its FIN went through the channel), an end
    // without a socket error is the peer's answer (or its going, which its own endpoint reports): this side's
    // release is a FIN, never a reset, which could reach the peer's endpoint before it saw the channel's FIN and
    // turn an orderly end into BROKEN (ECONNRESET) there (ual.ManyQps, 1 run in 8).
    if (f.error == 0 && !f.peer_closed && fsm_.state() == EndpointState::disconnecting &&
        (llp_.mpa_flags & RI_LLP_SAME_HOST) != 0) {
        f.peer_closed = true;
    }
    return f;
}

EndpointFacts Endpoint::failure(int error) {
    EndpointFacts f;
    f.error = rdma::from_errno(error);  // a socket's or the kernel's errno, in the RNIC-PI vocabulary
    return f;
}

krdma_cm_event Endpoint::cm(uint32_t type, int status) const {
    krdma_cm_event e = cm_event(type, qp_handle_, context_);
    e.cookie = qp_.cookie;
    e.status = status;
    e.llp = llp_;
    return e;
}

bool Endpoint::send(const krdma_cm_event &e, std::span<const int> fds) {
    return m_->deliver_(client_, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, fds);
}

void Endpoint::close_socket(bool abortive) {
    drop_ends();  // ends not handed over yet: the peer QP reads the bell's end of file
    if (!sock_) return;
    m_->server_.unwatch(sock_.get());
    if (abortive) {
        m_->linger_.abort(std::move(sock_));  // a reset, once what the socket still holds is out
    } else {
        sock_.reset();
    }
    session_.reset();
}

bool Endpoint::terminated() const {
    ri_qp_stats_t st{};
    return qp_.v->query_qp_stats(static_cast<ri_qp_t>(qp_.handle), &st) == RI_OK &&
           st.terminates_sent + st.terminates_received > 0;
}

void Endpoint::qp_to_error() {
    ri_qp_attr_t a{};
    if (qp_.v->query_qp(static_cast<ri_qp_t>(qp_.handle), &a) == RI_OK && a.state == RI_QPS_ERROR) return;
    a = ri_qp_attr_t{};
    a.state = RI_QPS_ERROR;
    (void)qp_.v->modify_qp(static_cast<ri_qp_t>(qp_.handle), &a, RI_QP_ATTR_STATE);
}

void Endpoint::negotiate(llp::MpaState s) {
    switch (s) {
        case llp::MpaState::established: transition(); return;
        case llp::MpaState::request_received:
            if (auto_accept_) {
                auto_accept_ = false;
                offer_pairing();
                if (auto st = session_->accept(pd_, ird_, ord_); !st) {
                    (void)drive(EndpointInput::setup_failed, failure(st.error().code()));
                    return;
                }
                negotiate(session_->on_writable());
                return;
            }
            break;
        case llp::MpaState::rejected:
            (void)drive(EndpointInput::rejected, {},
                        [this](krdma_cm_event &e) { krdma::set_private_data(e, session_->peer_private_data()); });
            return;
        case llp::MpaState::failed: {
            const rdma::Error *why = session_->error();
            if (why != nullptr && why->code() == RI_ETIMEDOUT) {
                (void)drive(EndpointInput::setup_timed_out);
                return;
            }
            uint32_t term = 0;
            if (auto t = session_->term()) term = iwarp::term_detail(*t) & 0xffffffu;
            if (const std::vector<uint8_t> t = session_->terminate_fpdu(); !t.empty()) {
                // RFC 6581: the responder is in full operation; it learns why from a Terminate, then FIN
                // (setup_failed closes in order, so a reset does not discard it). A full socket drops it.
                (void)::send(sock_.get(), t.data(), t.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
            }
            (void)drive(EndpointInput::setup_failed, failure(why != nullptr ? why->code() : RI_EPROTO),
                        [term](krdma_cm_event &e) { e.term = term; });
            return;
        }
        default: break;
    }
    const short ev = session_->poll_events();
    rewatch(ev != 0 ? ev : POLLIN);
}

void Endpoint::transition() {
    // The active side knows where it connected to; its own port it learns once, here.
    if (ends_.remote.family != RI_AF_NONE && ends_.local.family == RI_AF_NONE) llp::local_end_of(sock_.get(), ends_);
    const bool known = ends_.local.family != RI_AF_NONE && ends_.remote.family != RI_AF_NONE;
    auto llp = llp::to_llp_params(session_->result(), initiator_, sock_.get(), known ? &ends_ : nullptr);
    if (!llp) {
        (void)drive(EndpointInput::setup_failed, failure(llp.error().code()));
        return;
    }
    // The same-host path: the second of the two ends to transition found its end of the channel stashed here by
    // the first; the first makes the channel now if the two may be paired. Either way this endpoint is nobody's
    // mirror any more.
    unindex();
    if (!channel_) pair();
    const bool same_host = static_cast<bool>(channel_);
    // A peer of this stack on the wire takes FPDUs larger than a segment (Linux siw's streams keep one per segment).
    if (!same_host && m_->peer_runs_stack(sock_.get())) llp::widen_fpdus(*llp);
    // The stream lives in the consumer's process, or, for a consumer hosted in the kAL and for an offloading
    // RNIC, in the kVP, which takes a duplicate of it here (the kAL keeps its own reference either way).
    ri_qp_attr_t a{};
    a.state = RI_QPS_RTS;
    a.llp = *llp;
    a.llp.fd = kvp_stream() ? sock_.get() : -1;
    a.llp.channel = 0;
    if (same_host) {
        // The channel carries the stream's bytes between two QPs of this host: no CRC, no markers (both ends alike,
        // whatever MPA negotiated). The kVP learns the path; the channel's end goes to whoever runs the stream: the
        // owner (with ESTABLISHED), or the kVP, which takes its own duplicate here as it does of the socket.
        a.llp.mpa_flags = (a.llp.mpa_flags | RI_LLP_SAME_HOST) & ~static_cast<uint32_t>(RI_MPA_CRC | RI_MPA_MARKERS);
        if (rfc7306_) a.llp.mpa_flags |= RI_MPA_RFC7306;
        a.llp.channel = kvp_stream() ? channel_.get() : -1;
    }
    if (ri_status_t rc = qp_.v->modify_qp(static_cast<ri_qp_t>(qp_.handle), &a,
                                          RI_QP_ATTR_STATE | RI_QP_ATTR_LLP);
        rc != RI_OK) {
        RDMA_LOG_WARN(kComponent, "kVP refused the RDMA-mode transition: %s", std::strerror(rc));
        drop_ends();
        (void)drive(EndpointInput::transition_refused, failure(rc));
        return;
    }
    llp_ = a.llp;
    llp_.fd = -1;
    llp_.channel = same_host ? -1 : 0;  // the kAL's descriptors are nobody else's business
    if (step_at_ != Clock::time_point{}) (initiator_ ? m_->counters_.mpa_active_ns : m_->counters_.accept_ns) += lap(step_at_);
    // Before the socket leaves: a dead peer or path must fail it in bounded time, not after TCP's minutes.
    if (auto r = liveness_set_ ? rdma::Expected<void>{} : llp::set_liveness(sock_.get(), m_->settings_); !r) {
        RDMA_LOG_CLIENT(warn, kComponent, "client %u: QP %#lx: %s: %s", client_, static_cast<unsigned long>(qp_handle_),
                      r.error().message().c_str(), std::strerror(r.error().code()));
    }
    const Driven d = drive(EndpointInput::established, {}, [this](krdma_cm_event &e) {
        // The initiator learns the reply's private data here; so does a converted responder, which saw no
        // connection request to learn the peer's from.
        if (initiator_ || converted_) krdma::set_private_data(e, session_->peer_private_data());
    });
    session_.reset();
    drop_ends();  // the owner or the kVP has its own now (or nobody will: the connection goes)
    if (d == Driven::undelivered) {
        // The owner cannot take the socket: nobody can use this connection.
        (void)drive(EndpointInput::handoff_failed);
        return;
    }
    RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx in RDMA mode, %s -> %s (%s)", client_,
                   static_cast<unsigned long>(qp_handle_), llp::text_of(llp_.local, llp_.local_port).c_str(),
                   llp::text_of(llp_.remote, llp_.remote_port).c_str(), path_name(llp_));
    // A kVP's stream: the kAL watches for its end (only that: the data is the kVP's to read), in case the kVP
    // no longer reads it (see on_events). A uVP's stream is not watched at all: its owner meets the end and
    // reports it (on_events would only unwatch it), and a socket with an epoll entry on its wait queue pays a
    // wake-up call for every segment in and every ACK that frees room: about a twentieth of a small
    // ping-pong's round trip on loopback (bench/README, "An epoll entry costs every segment").
    if (kvp_stream()) {
        rewatch(POLLRDHUP);
    } else {
        m_->server_.unwatch(sock_.get());
    }
}

}  // namespace kal

namespace kal {

// ---------------------------------------------------------------------------------------------------------------
// The same-host path: two endpoints of this kAL holding the two ends of one TCP connection

namespace {

// Single copy: whether the kAL vouches for both processes @p a and @p b (one user, in its own pid namespace); then
// their pids, in that order, in @p pids.
bool vouch_for_pull(const Peer *a, const Peer *b, int32_t pids[2]) {
    if (a == nullptr || b == nullptr || a->pid <= 0 || b->pid <= 0 || a->uid != b->uid) return false;
    if (!a->own_pid_namespace || !b->own_pid_namespace) return false;  // read once, when each connected
    pids[0] = a->pid;
    pids[1] = b->pid;
    return true;
}

}  // namespace

bool Endpoint::may_pair() const noexcept {
    // A hosted consumer's or an offloading RNIC's stream runs in the kVP, which takes the channel at the transition
    // as a uVP would; pair() asks both RNICs whether they take one (RI_CAP_SAME_HOST).
    return m_ != nullptr && m_->settings_.same_host.enabled && static_cast<bool>(m_->same_host_);
}

void Endpoint::index_ends() {
    if (indexed_ || !may_pair() || ends_.remote.family == RI_AF_NONE) return;
    index_it_ = m_->by_remote_.emplace(StreamEnd::of(ends_.remote, ends_.remote_port), this);
    indexed_ = true;
}

void Endpoint::unindex() noexcept {
    if (!indexed_) return;
    indexed_ = false;
    if (m_ != nullptr) m_->by_remote_.erase(index_it_);
}

template <class Accept>
Endpoint *Endpoint::in_setup(Endpoints &m, const StreamEnd &local, const StreamEnd &remote, const Endpoint *except,
                             Accept accept) {
    auto [it, end] = m.by_remote_.equal_range(remote);
    for (; it != end; ++it) {
        Endpoint *e = it->second;
        // Not in RDMA mode yet, without a channel, with its socket: the one to stash the other end in.
        if (e == except || e->fsm_.state() != EndpointState::connecting || e->channel_ || !e->sock_) continue;
        // An active endpoint learns its own port at its transition; its mirror asks for it now (once).
        if (e->ends_.local.family == RI_AF_NONE) llp::local_end_of(e->sock_.get(), e->ends_);
        if (StreamEnd::of(e->ends_.local, e->ends_.local_port) != local) continue;
        if (accept(*e)) return e;
    }
    return nullptr;
}

Endpoint *Endpoint::find_mirror() {
    if (ends_.local.family == RI_AF_NONE || ends_.remote.family == RI_AF_NONE) return nullptr;
    return in_setup(*m_, StreamEnd::of(ends_.remote, ends_.remote_port), StreamEnd::of(ends_.local, ends_.local_port),
                    this, [this](const Endpoint &e) {
                        // Mirrored ends in one network namespace are one TCP connection. The kAL's own sockets live
                        // in its own namespace; a converted one may come from another, where the same addresses
                        // name another connection.
                        const auto a = netns_cookie(sock_.get());
                        const auto b = netns_cookie(e.sock_.get());
                        return a && b ? *a == *b : !(converted_ || e.converted_);
                    });
}

void Endpoint::pair() {
    if (!may_pair()) return;
    Endpoint *m = find_mirror();
    if (m == nullptr || !m->may_pair()) return;
    const SameHostHooks &hooks = m_->same_host_;
    KvpObject *mine = hooks.open_of(client_, qp_handle_);
    KvpObject *theirs = hooks.open_of(m->client_, m->qp_handle_);
    ri_rnic_attr_t a{}, b{};
    if (mine == nullptr || theirs == nullptr || !takes_channel(a) || !m->takes_channel(b)) return;
    if (mine->v != theirs->v || a.vendor_id != b.vendor_id || a.vendor_part_id != b.vendor_part_id) {
        RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx stays on the wire: the two RNICs are of different providers",
                       client_, static_cast<unsigned long>(qp_handle_));
        return;
    }
    const uint64_t ring = m_->settings_.same_host.ring_bytes;
    // Each side's process pays for the ring it writes.
    auto charge_mine = hooks.charge(client_, ring);
    auto charge_theirs = charge_mine ? hooks.charge(m->client_, ring) : charge_mine;
    if (!charge_mine || !charge_theirs) {
        const rdma::Error &e = !charge_mine ? charge_mine.error() : charge_theirs.error();
        RDMA_LOG_INFO(kComponent, "client %u: QP %#lx stays on the wire: the channel's %llu bytes: %s", client_,
                      static_cast<unsigned long>(qp_handle_), static_cast<unsigned long long>(ring),
                      e.message().c_str());
        return;  // a charge taken goes with its token
    }
    // Single copy: both RNICs read a version 2 hello, and the kAL vouches for both processes (one user, pids that
    // mean the same in both ends' namespaces); the kernel still checks each pull (process_vm_readv's ptrace rule).
    int32_t pids[2] = {0, 0};
    const bool pull = (a.caps & b.caps & RI_CAP_CHANNEL_PULL) != 0 && hooks.peer_of &&
                      vouch_for_pull(hooks.peer_of(client_), hooks.peer_of(m->client_), pids);
    int ends[2];
    if (const int err = rdma::provider::make_channel(ring, ends, pull ? pids : nullptr); err != 0) {
        RDMA_LOG_WARN(kComponent, "client %u: QP %#lx stays on the wire: cannot make a same-host channel: %s", client_,
                      static_cast<unsigned long>(qp_handle_), std::strerror(err));
        return;
    }
    channel_.reset(ends[0]);
    m->channel_.reset(ends[1]);
    channel_charge_ = std::move(*charge_mine);
    m->channel_charge_ = std::move(*charge_theirs);
    if (byte_channel_wanted_ && m->byte_channel_wanted_ && !kvp_stream() && !m->kvp_stream()) {
        pair_byte_channels(*m, ring);
    }
    // RFC 7306: MPA cannot say whether the peer speaks it, but here the kAL holds both ends and sees both RNICs (of
    // one provider, checked above).
    constexpr uint32_t kRfc7306 = RI_CAP_ATOMICS | RI_CAP_IMMEDIATE;
    rfc7306_ = m->rfc7306_ = (a.caps & kRfc7306) != 0 && (a.caps & kRfc7306) == (b.caps & kRfc7306);
    RDMA_LOG_DEBUG(kComponent,
                   "client %u: QP %#lx paired with client %u's QP %#lx on this host (rings of %llu bytes, %s)",
                   client_, static_cast<unsigned long>(qp_handle_), m->client_,
                   static_cast<unsigned long>(m->qp_handle_), static_cast<unsigned long long>(ring),
                   pull ? "single copy offered" : "ring copies only");
}

void Endpoint::pair_byte_channels(Endpoint &m, uint64_t ring) {
    const SameHostHooks &hooks = m_->same_host_;
    auto charge_mine = hooks.charge(client_, ring);
    auto charge_theirs = charge_mine ? hooks.charge(m.client_, ring) : charge_mine;
    int ends[2];
    const int err = !charge_mine || !charge_theirs ? ENOSPC : rdma::provider::make_channel(ring, ends, nullptr);
    if (err != 0) {
        // The QP's channel still carries the connection: the consumers move their bytes through their QPs.
        RDMA_LOG_INFO(kComponent, "client %u: QP %#lx: no byte channel of its own beside the QP's: %s", client_,
                      static_cast<unsigned long>(qp_handle_), std::strerror(err));
        return;
    }
    byte_channel_.reset(ends[0]);
    m.byte_channel_.reset(ends[1]);
    byte_channel_charge_ = std::move(*charge_mine);
    m.byte_channel_charge_ = std::move(*charge_theirs);
    if (link_wanted_ && m.link_wanted_) pair_link(m);
}

void Endpoint::drop_ends() noexcept {
    channel_.reset();
    byte_channel_.reset();
    link_.reset();
}

void Endpoint::pair_link(Endpoint &m) {
    krdma_link_hello h{KRDMA_LINK_MAGIC, 1, 0};
    int sv[2];
    if (::getrandom(&h.token, sizeof h.token, 0) != static_cast<ssize_t>(sizeof h.token) ||
        ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
        RDMA_LOG_INFO(kComponent, "client %u: QP %#lx: no link to its peer's process: %s", client_,
                      static_cast<unsigned long>(qp_handle_), std::strerror(errno));
        return;  // the byte channels carry the connection all the same
    }
    krdma::UniqueFd a(sv[0]), b(sv[1]);
    // What is sent on one end is read on the other: each end's hello goes into its peer.
    if (::send(a.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h) ||
        ::send(b.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h)) {
        return;
    }
    link_ = std::move(a);
    m.link_ = std::move(b);
}

bool Endpoint::takes_channel(ri_rnic_attr_t &a) const {
    KvpObject *open = m_->same_host_.open_of(client_, qp_handle_);
    if (open == nullptr || open->v->query_rnic(static_cast<ri_rnic_t>(open->handle), &a) != RI_OK) return false;
    if ((a.caps & RI_CAP_SAME_HOST) == 0) {
        RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx stays on the wire: its RNIC takes no same-host channel "
                       "(option same_host false, or a provider without it)", client_,
                       static_cast<unsigned long>(qp_handle_));
        return false;
    }
    return true;
}

void Endpoint::offer_pairing() {
    if (m_ == nullptr || !m_->rendezvous_ || channel_ || !may_pair() || !sock_) return;
    if (ends_.local.family == RI_AF_NONE || ends_.remote.family == RI_AF_NONE) return;
    if (find_mirror() != nullptr) return;  // both ends are here: paired at the first transition
    ri_rnic_attr_t a{};
    if (!takes_channel(a)) return;
    const uint64_t ring = m_->settings_.same_host.ring_bytes;
    auto charge = m_->same_host_.charge(client_, ring);  // before the offer: a channel made must be taken
    if (!charge) return;
    RendezvousOffer o;
    o.magic = kRendezvousMagic;
    o.version = kRendezvousVersion;
    o.local = StreamEnd::of(ends_.local, ends_.local_port);
    o.remote = StreamEnd::of(ends_.remote, ends_.remote_port);
    o.vendor_id = a.vendor_id;
    o.vendor_part_id = a.vendor_part_id;
    o.ring_bytes = ring;
    // Another kAL answers from its loop in microseconds; 100 ms leaves room for a busy one.
    krdma::UniqueFd bell = m_->rendezvous_->offer(o, sock_.get(), std::chrono::milliseconds(100));
    if (!bell) return;
    channel_ = std::move(bell);
    channel_charge_ = std::move(*charge);
    RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx paired with another kAL's QP on this host (rings of %llu bytes)",
                   client_, static_cast<unsigned long>(qp_handle_), static_cast<unsigned long long>(ring));
}

krdma::UniqueFd Endpoint::answer_offer(Endpoints &m, const RendezvousOffer &o, int tcp) {
    Endpoint *e = in_setup(m, o.remote, o.local, nullptr, [tcp](const Endpoint &c) {
        if (!c.may_pair()) return false;
        // Mirrored addresses prove nothing across namespaces: the sequence numbers do (a secret of the two ends).
        if (llp::one_connection(tcp, c.sock_.get())) return true;
        RDMA_LOG_INFO(kComponent, "client %u: QP %#lx: an offer with its mirrored addresses is another connection "
                      "(sequence numbers differ): not paired", c.client_, static_cast<unsigned long>(c.qp_handle_));
        return false;
    });
    ri_rnic_attr_t a{};
    if (e == nullptr || !e->takes_channel(a) || a.vendor_id != o.vendor_id || a.vendor_part_id != o.vendor_part_id) {
        return {};
    }
    auto charge = m.same_host_.charge(e->client_, o.ring_bytes);
    if (!charge) return {};
    int ends[2];
    if (rdma::provider::make_channel(o.ring_bytes, ends, nullptr) != 0) return {};
    e->channel_.reset(ends[0]);
    e->channel_charge_ = std::move(*charge);
    RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx paired with another kAL's QP on this host (rings of %llu bytes)",
                   e->client_, static_cast<unsigned long>(e->qp_handle_),
                   static_cast<unsigned long long>(o.ring_bytes));
    return krdma::UniqueFd(ends[1]);
}

}  // namespace kal
