// LLP and endpoint management: listen points, connection setup through the host's TCP stack, MPA negotiation
// (kal/llp/mpa_session), the RDMA-mode transition and teardown. Everything here runs on the device server's thread.
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

#include "endpoint_fsm.hpp"
#include "kvp_object.hpp"
#include "mpa_session.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"
#include "rights.hpp"
#include "route.hpp"
#include "tcp_stats.hpp"

namespace kal {
namespace {

// How long a kVP that runs a stream has to report the end its peer made (it reads the bytes before the FIN first)
// before the kAL ends the connection itself.
constexpr std::chrono::milliseconds kKvpEndGrace{2000};

constexpr const char *kComponent = "llp";
using Clock = std::chrono::steady_clock;

std::string text_of(const ri_net_addr_t &a, uint16_t port) {
    const std::string t = a.family == RI_AF_NONE ? "?" : krdma::to_text(a);
    return a.family == RI_AF_INET6 ? "[" + t + "]:" + std::to_string(port) : t + ":" + std::to_string(port);
}

// Socket @p fd's own address and port into @p p (left as they are when the socket cannot say).
void local_end_of(int fd, ri_llp_params_t &p) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0) {
        if (auto a = krdma::net_addr_from_sockaddr(ss, &p.local_port)) p.local = *a;
    }
}

// The addresses of a connected socket, for a connection request (the negotiated parameters come later).
ri_llp_params_t addresses_of(int fd) {
    ri_llp_params_t p{};
    p.fd = -1;
    local_end_of(fd, p);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0) {
        if (auto a = krdma::net_addr_from_sockaddr(ss, &p.remote_port)) p.remote = *a;
    }
    return p;
}

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

krdma_cm_event cm_event(uint32_t type, uint64_t object, uint64_t context) {
    krdma_cm_event e{};
    e.event = KRDMA_EVENT_CM;
    e.type = type;
    e.object = object;
    e.context = context;
    e.llp.fd = -1;
    return e;
}

int ms_until(Clock::time_point t, Clock::time_point now) {
    if (t <= now) return 0;
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count()) + 1;
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

// A QP's connection: setup, the transition, and the kAL's watch over the socket afterwards. Its state moves only
// through endpoint management's state machine (kal/endpoint/endpoint_fsm.hpp): this class observes the socket, the
// MPA session and the kVP, feeds what it saw to the machine, and carries out each step (drive()).
class Endpoint final : public QpLink {
    static constexpr size_t kEndpointType = static_cast<size_t>(ResourceType::endpoint);

public:
    Endpoint(ConnectionCommands &m, uint32_t client, Handle qp_handle, KvpObject &qp, uint32_t qp_num,
             uint64_t context, std::string rnic)
        : m_(&m),
          client_(client),
          qp_handle_(qp_handle),
          qp_(qp),
          qp_num_(qp_num),
          context_(context),
          rnic_(std::move(rnic)) {
        m.endpoints_.insert(this);
        // The RNIC's object counts (rdmactl resources) include its endpoints.
        if (qp_.counts != nullptr) qp_.counts->by_type[kEndpointType].fetch_add(1, std::memory_order_relaxed);
    }
    ~Endpoint() override {
        if (qp_.counts != nullptr) qp_.counts->by_type[kEndpointType].fetch_sub(1, std::memory_order_relaxed);
        if (m_ == nullptr) return;
        // The QP is going (destroyed, or its owner died): the connection goes with it, abortively.
        (void)drive(EndpointInput::qp_destroyed);
        m_->endpoints_.erase(this);
        m_->timed_.erase(this);
    }

    // The owner's device connection.
    [[nodiscard]] uint32_t client() const noexcept { return client_; }
    // The QP's kAL handle and number.
    [[nodiscard]] Handle qp_handle() const noexcept { return qp_handle_; }
    [[nodiscard]] uint32_t qp_num() const noexcept { return qp_num_; }

    // Active side, before start_active(): the peer's address and port, as CONNECT named them (the transition then
    // asks the socket only for its own end).
    void know_remote(const ri_net_addr_t &addr, uint16_t port) {
        ends_.remote = addr;
        ends_.remote_port = port;
        ends_.fd = -1;
    }

    // Active side (CONNECT, or CONVERT's initiator as @p how): TCP connect from @p local to @p remote has been
    // started on @p sock (or a connected socket's first writable event starts MPA).
    void start_active(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                      Clock::time_point deadline, EndpointInput how = EndpointInput::connect_started) {
        sock_ = std::move(sock);
        initiator_ = true;
        tcp_connecting_ = true;
        cfg_ = cfg;
        pd_.assign(pd.begin(), pd.end());
        deadline_ = deadline;
        arm_timer(deadline_);
        (void)drive(how);
        rewatch(POLLOUT);
    }

    // A socket the consumer connected itself (CONVERT), on the responder's side: the peer's MPA request is read and
    // answered here (the consumer decided by converting), then the transition as for an accepted request.
    void start_converted_responder(krdma::UniqueFd sock, const iwarp::MpaConfig &cfg, std::span<const uint8_t> pd,
                                   uint16_t ird, uint16_t ord, Clock::time_point deadline) {
        sock_ = std::move(sock);
        initiator_ = false;
        auto_accept_ = true;
        ird_ = ird;
        ord_ = ord;
        pd_.assign(pd.begin(), pd.end());
        deadline_ = deadline;
        arm_timer(deadline_);
        (void)drive(EndpointInput::convert_started);
        session_ = std::make_unique<llp::MpaSession>(sock_.get());
        if (auto st = session_->start_responder(cfg, deadline); !st) {
            (void)drive(EndpointInput::setup_failed, failure(st.error().code()));
            return;
        }
        rewatch(POLLIN);
    }

    // Passive side: the consumer accepted; the session is writing (or wrote) the reply. @p liveness_set: the socket
    // has the liveness options already (from its listener); @p ends: its addresses and ports.
    void start_passive(krdma::UniqueFd sock, llp::MpaSession session, bool liveness_set, const ri_llp_params_t &ends) {
        sock_ = std::move(sock);
        liveness_set_ = liveness_set;
        ends_ = ends;
        session_ = std::make_unique<llp::MpaSession>(std::move(session));
        initiator_ = false;
        deadline_ = session_->deadline();
        arm_timer(deadline_);
        (void)drive(EndpointInput::accept_started);
        negotiate(session_->on_writable());
    }

    void qp_state_changed(uint32_t state) override {
        if (m_ == nullptr) return;
        switch (state) {  // from the consumer's request; the other states move no connection
            case RI_QPS_CLOSING: (void)drive(EndpointInput::qp_closing); break;
            case RI_QPS_ERROR: (void)drive(EndpointInput::qp_error, observe()); break;
            case RI_QPS_IDLE: (void)drive(EndpointInput::qp_idle); break;
            default: break;
        }
    }

    // The kVP running this (hosted) connection's stream ended the QP on its own with asynchronous event
    // @p event_id: the same end as the consumer moving the QP to ERROR, but the kAL hears it first-hand. Once the
    // endpoint has ended, this and the consumer's own Modify QP to ERROR are ignored, whichever comes second.
    void kvp_ended_qp(uint32_t event_id) {
        if (m_ == nullptr) return;
        const std::optional<EndpointInput> in = input_of_async_event(event_id);
        if (!in) return;
        RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx ended by the kVP (asynchronous event %u)", client_,
                       static_cast<unsigned long>(qp_handle_), event_id);
        (void)drive(*in, observe());
    }

    void on_events(short revents) {
        const EndpointState state = fsm_.state();
        if (state == EndpointState::connecting) {
            if (tcp_connecting_) {
                const int err = socket_error(sock_.get());
                if (err != 0 || (revents & (POLLERR | POLLHUP)) != 0) {
                    (void)drive(EndpointInput::unreachable, failure(err));
                    return;
                }
                tcp_connecting_ = false;
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

    // Puts this endpoint among those tick() visits, with its next deadline @p when.
    void arm_timer(Clock::time_point when) {
        m_->timed_.insert(this);
        m_->arm(when);
    }

    // Returns the milliseconds to this endpoint's deadline, or -1; times the setup out when it has passed.
    int check_deadline(Clock::time_point now) {
        if (end_by_ != Clock::time_point{}) {
            const EndpointState state = fsm_.state();
            if (state != EndpointState::connected && state != EndpointState::disconnecting) {
                end_by_ = {};  // the kVP's report came first
            } else if (now < end_by_) {
                return ms_until(end_by_, now);
            } else {
                end_by_ = {};
                EndpointFacts f = observe();
                f.peer_closed = true;
                (void)drive(f.error != 0 ? EndpointInput::socket_error : EndpointInput::peer_fin, f);
            }
            return -1;
        }
        if (fsm_.state() != EndpointState::connecting) return -1;
        if (now < deadline_) return ms_until(deadline_, now);
        (void)drive(EndpointInput::setup_timed_out);
        return -1;
    }

    void detach() { m_ = nullptr; }
    [[nodiscard]] bool busy() const noexcept { return holds_connection(fsm_.state()); }

    EndpointInfo info() const {
        EndpointInfo i;
        i.client_id = client_;
        i.qp = qp_handle_;
        i.rnic = rnic_;
        i.state = to_krdma(fsm_.state());
        ri_qp_attr_t a{};
        if (qp_.v->query_qp(static_cast<ri_qp_t>(qp_.handle), &a) == RI_OK) i.qp_num = a.qp_num;
        (void)qp_.v->query_qp_stats(static_cast<ri_qp_t>(qp_.handle), &i.rdma);  // wherever the data path runs
        ri_llp_params_t p = sock_ ? addresses_of(sock_.get()) : llp_;
        i.local = text_of(p.local, p.local_port);
        i.remote = text_of(p.remote, p.remote_port);
        i.llp = llp_;
        i.fd = sock_ ? sock_.get() : -1;
        return i;
    }

private:
    // What became of a step's report.
    enum class Driven : uint8_t { refused, done, undelivered };

    // The kVP runs this connection's stream (a consumer hosted in the kAL, or an offloading RNIC): the socket never
    // leaves the kAL's process, and the kVP's asynchronous events tell how the stream ended.
    [[nodiscard]] bool kvp_stream() const noexcept { return VerbCommands::kvp_runs_streams(client_, qp_.offload); }

    // Feeds @p in with @p facts to the state machine and carries out the step: the report is built first (with
    // @p decorate, while the MPA session it may read is still there); then the counter, the kVP's QP, the socket;
    // then the report goes out, with the socket when it is ESTABLISHED for an owner in another process.
    Driven drive(EndpointInput in, const EndpointFacts &facts = {},
                 const std::function<void(krdma_cm_event &)> &decorate = nullptr) {
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
        return send(e, handoff ? sock_.get() : -1) ? Driven::done : Driven::undelivered;
    }

    void count(LlpCount c) {
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

    // How a connection in RDMA mode stands, for the end of its QP: the socket's error (SO_ERROR is read once, and
    // until our FIN a socket TCP closed tells by its state), the peer's FIN, a Terminate either way.
    EndpointFacts observe() const {
        EndpointFacts f;
        if (!sock_) return f;
        f.error = connection_error(sock_.get(), fsm_.state() == EndpointState::disconnecting);
        f.peer_closed = peer_closed(sock_.get());
        f.terminated = terminated();
        return f;
    }

    static EndpointFacts failure(int error) {
        EndpointFacts f;
        f.error = rdma::from_errno(error);  // a socket's or the kernel's errno, in the RNIC-PI vocabulary
        return f;
    }

    krdma_cm_event cm(uint32_t type, int status) const {
        krdma_cm_event e = cm_event(type, qp_handle_, context_);
        e.cookie = qp_.cookie;
        e.status = status;
        e.llp = llp_;
        return e;
    }

    bool send(const krdma_cm_event &e, int fd = -1) {
        const int fds[1] = {fd};
        return m_->verbs_.deliver_record(client_, KRDMA_EVENT_CM,
                                         {reinterpret_cast<const uint8_t *>(&e), sizeof e},
                                         std::span<const int>(fds, fd >= 0 ? 1 : 0));
    }

    void rewatch(short events) {
        m_->server_.watch(sock_.get(), events, [this](short revents) { on_events(revents); });
    }

    void close_socket(bool abortive) {
        if (!sock_) return;
        m_->server_.unwatch(sock_.get());
        if (abortive) {
            m_->linger_.abort(std::move(sock_));  // a reset, once what the socket still holds is out
        } else {
            sock_.reset();
        }
        session_.reset();
    }

    // The data path sent or received a Terminate on this connection (its counters say so).
    bool terminated() const {
        ri_qp_stats_t st{};
        return qp_.v->query_qp_stats(static_cast<ri_qp_t>(qp_.handle), &st) == RI_OK &&
               st.terminates_sent + st.terminates_received > 0;
    }

    // The kVP's QP to ERROR, unless it is there already (the kVP ended it on its own).
    void qp_to_error() {
        ri_qp_attr_t a{};
        if (qp_.v->query_qp(static_cast<ri_qp_t>(qp_.handle), &a) == RI_OK && a.state == RI_QPS_ERROR) return;
        a = ri_qp_attr_t{};
        a.state = RI_QPS_ERROR;
        (void)qp_.v->modify_qp(static_cast<ri_qp_t>(qp_.handle), &a, RI_QP_ATTR_STATE);
    }

    void negotiate(llp::MpaState s) {
        switch (s) {
            case llp::MpaState::established: transition(); return;
            case llp::MpaState::request_received:
                if (auto_accept_) {
                    auto_accept_ = false;
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

    // The RDMA-mode transition: the kVP's QP to RTS with the negotiated parameters, the socket to the owner.
    void transition() {
        // The active side knows where it connected to; its own port it learns once, here.
        if (ends_.remote.family != RI_AF_NONE && ends_.local.family == RI_AF_NONE) local_end_of(sock_.get(), ends_);
        const bool known = ends_.local.family != RI_AF_NONE && ends_.remote.family != RI_AF_NONE;
        auto llp = llp::to_llp_params(session_->result(), initiator_, sock_.get(), known ? &ends_ : nullptr);
        if (!llp) {
            (void)drive(EndpointInput::setup_failed, failure(llp.error().code()));
            return;
        }
        // The stream lives in the consumer's process, or, for a consumer hosted in the kAL and for an offloading
        // RNIC, in the kVP, which takes a duplicate of it here (the kAL keeps its own reference either way).
        ri_qp_attr_t a{};
        a.state = RI_QPS_RTS;
        a.llp = *llp;
        a.llp.fd = kvp_stream() ? sock_.get() : -1;
        if (ri_status_t rc = qp_.v->modify_qp(static_cast<ri_qp_t>(qp_.handle), &a,
                                              RI_QP_ATTR_STATE | RI_QP_ATTR_LLP);
            rc != RI_OK) {
            RDMA_LOG_WARN(kComponent, "kVP refused the RDMA-mode transition: %s", std::strerror(rc));
            (void)drive(EndpointInput::transition_refused, failure(rc));
            return;
        }
        llp_ = a.llp;
        llp_.fd = -1;
        // Before the socket leaves: a dead peer or path must fail it in bounded time, not after TCP's minutes.
        if (auto r = liveness_set_ ? rdma::Expected<void>{} : llp::set_liveness(sock_.get(), m_->settings_); !r) {
            RDMA_LOG_CLIENT(warn, kComponent, "client %u: QP %#lx: %s: %s", client_, static_cast<unsigned long>(qp_handle_),
                          r.error().message().c_str(), std::strerror(r.error().code()));
        }
        const Driven d = drive(EndpointInput::established, {}, [this](krdma_cm_event &e) {
            if (initiator_) krdma::set_private_data(e, session_->peer_private_data());
        });
        session_.reset();
        if (d == Driven::undelivered) {
            // The owner cannot take the socket: nobody can use this connection.
            (void)drive(EndpointInput::handoff_failed);
            return;
        }
        RDMA_LOG_DEBUG(kComponent, "client %u: QP %#lx in RDMA mode, %s -> %s", client_,
                       static_cast<unsigned long>(qp_handle_), text_of(llp_.local, llp_.local_port).c_str(),
                       text_of(llp_.remote, llp_.remote_port).c_str());
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

    ConnectionCommands *m_;
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
};

ConnectionCommands::ConnectionCommands(VerbCommands &verbs, LlpSettings settings)
    : verbs_(verbs), server_(verbs.server()), settings_(settings) {
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
        a.active_opens = counters_.active_opens;
        a.passive_opens = counters_.passive_opens;
        a.established = counters_.established;
        a.rejected = counters_.rejected;
        a.peer_rejected = counters_.peer_rejected;
        a.failed = counters_.failed;
        a.timeouts = counters_.timeouts;
        a.peer_disconnects = counters_.peer_disconnects;
        a.resets = counters_.resets;
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
    for (Endpoint *e : endpoints_) e->detach();
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
    krdma_listen q;
    std::memcpy(&q, req.payload.data(), sizeof q);
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
        return rep.fail(rdma::from_errno(errno), "listen: cannot bind " + text_of(addr, q.port) + ": " +
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
    RDMA_LOG_INFO(kComponent, "client %u listens on %s (RNIC %s)", c.peer().client_id, text_of(addr, port).c_str(),
                  raw->rnic_.c_str());
    q.port = port;
    q.handle = *h;
    std::memcpy(rep.payload.data(), &q, sizeof q);
    return RI_OK;
}

int ConnectionCommands::destroy_listen(Connection &c, const Request &req, Reply &rep) {
    krdma_destroy_listen q;
    std::memcpy(&q, req.payload.data(), sizeof q);
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
        ++counters_.passive_opens;
        if (lp.requests_.size() >= settings_.max_pending) {
            RDMA_LOG_CLIENT(warn, kComponent, "listen point %#lx: %u requests pending, refusing one",
                          static_cast<unsigned long>(lp.handle_), settings_.max_pending);
            ++counters_.rejected;
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
            p->ends = addresses_of(p->sock.get());
        }
        if (auto st = p->session.start_responder(lp.cfg_, Clock::now() + settings_.request_timeout); !st) {
            RDMA_LOG_CLIENT(warn, kComponent, "cannot start MPA: %s", st.error().message().c_str());
            continue;
        }
        arm(p->session.deadline());
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
            arm(p.session.deadline());
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
                ++counters_.failed;
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
    if (sock && llp::unread(sock.get()) > 0) linger_.abort(std::move(sock));
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
    krdma_connect q;
    std::memcpy(&q, req.payload.data(), sizeof q);
    if (q.private_data_len > KRDMA_MAX_PRIVATE_DATA) {
        return rep.fail(RI_EINVAL, "connect: " + std::to_string(q.private_data_len) + " bytes of private data; MPA "
                                   "carries at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
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
        return rep.fail(RI_EAFNOSUPPORT, "connect: " + text_of(q.remote, q.port) + " is not of the address family of "
                                         "RNIC " + open->ref.name() + " (" + krdma::to_text(rnic_addr) + ")");
    }
    // The host's tables decide the route; it must leave through the RNIC's netdev (or stay on this host).
    auto route = routes_.route_for(llp::RnicBinding{rnic_addr, open->ref.netdev()}, q.remote);
    if (!route) {
        RDMA_LOG_INFO(kComponent, "client %u: no route to %s from RNIC %s: %s", c.peer().client_id,
                      text_of(q.remote, q.port).c_str(), open->ref.name().c_str(),
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
        return rep.fail(rdma::from_errno(errno), "connect: to " + text_of(q.remote, q.port) + ": " +
                                                     std::strerror(errno));
    }
    ++counters_.active_opens;
    const auto timeout = q.timeout_ms != 0 ? std::chrono::milliseconds(q.timeout_ms) : settings_.connect_timeout;
    auto ep = std::make_unique<Endpoint>(*this, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name());
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    raw->know_remote(q.remote, q.port);
    raw->start_active(std::move(s), mpa_config(*open, qa.ird, qa.ord),
                      std::span<const uint8_t>(q.private_data, q.private_data_len), Clock::now() + timeout);
    return RI_OK;
}

int ConnectionCommands::accept(Connection &c, const Request &req, Reply &rep) {
    krdma_accept q;
    std::memcpy(&q, req.payload.data(), sizeof q);
    if (q.private_data_len > KRDMA_MAX_PRIVATE_DATA) {
        return rep.fail(RI_EINVAL, "accept: " + std::to_string(q.private_data_len) + " bytes of private data; MPA "
                                   "carries at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    if (q.reserved != 0 || q.reserved2 != 0) return rep.fail(RI_EINVAL, "accept: the reserved words must be zero");
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
    auto ep = std::make_unique<Endpoint>(*this, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name());
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    raw->start_passive(std::move(sock), std::move(session), inherited, ends);
    return RI_OK;
}

int ConnectionCommands::convert(Connection &c, const Request &req, Reply &rep) {
    krdma_convert q;
    std::memcpy(&q, req.payload.data(), sizeof q);
    if (q.private_data_len > KRDMA_MAX_PRIVATE_DATA) {
        return rep.fail(RI_EINVAL, "convert: " + std::to_string(q.private_data_len) + " bytes of private data; MPA "
                                   "carries at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    if (q.reserved != 0 || q.reserved2 != 0) return rep.fail(RI_EINVAL, "convert: the reserved words must be zero");
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
    const ri_llp_params_t ends = addresses_of(s.get());
    const ri_net_addr_t &rnic_addr = open->ref.address();
    if (ends.local.family != rnic_addr.family ||
        std::memcmp(ends.local.addr, rnic_addr.addr, rnic_addr.family == RI_AF_INET6 ? 16 : 4) != 0) {
        return rep.fail(RI_EADDRNOTAVAIL, "convert: the socket's local address " +
                                              text_of(ends.local, ends.local_port) + " is not RNIC " +
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
    auto ep = std::make_unique<Endpoint>(*this, c.peer().client_id, q.qp, *qp, qa.qp_num, q.context,
                                       open->ref.name());
    Endpoint *raw = ep.get();
    qp->link = std::move(ep);
    if (initiator) {
        ++counters_.active_opens;
        // Connected already: the first writable event finds no socket error and starts MPA.
        raw->start_active(std::move(s), mpa_config(*open, qa.ird, qa.ord), pd, Clock::now() + timeout,
                          EndpointInput::convert_started);
    } else {
        ++counters_.passive_opens;
        raw->start_converted_responder(std::move(s), mpa_config(*open, qa.ird, qa.ord), pd,
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ird, iwarp::kMpaIrdOrdMax)),
                                       static_cast<uint16_t>(std::min<uint32_t>(qa.ord, iwarp::kMpaIrdOrdMax)),
                                       Clock::now() + timeout);
    }
    return RI_OK;
}

int ConnectionCommands::reject(Connection &c, const Request &req, Reply &rep) {
    krdma_reject q;
    std::memcpy(&q, req.payload.data(), sizeof q);
    if (q.private_data_len > KRDMA_MAX_PRIVATE_DATA) {
        return rep.fail(RI_EINVAL, "reject: " + std::to_string(q.private_data_len) + " bytes of private data; MPA "
                                   "carries at most " + std::to_string(KRDMA_MAX_PRIVATE_DATA));
    }
    if (q.reserved != 0 || q.reserved2 != 0) return rep.fail(RI_EINVAL, "reject: the reserved words must be zero");
    auto found = undecided_request(c, q.request);
    if (!found) return rep.fail(found.error().code(), "reject: " + found.error().message());
    PendingRequest &p = *(*found)->second;
    if (auto st = p.session.reject(std::span<const uint8_t>(q.private_data, q.private_data_len)); !st) {
        return rep.fail(rdma::from_errno(st.error().code()), "reject: " + st.error().message());
    }
    ++counters_.rejected;
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
    earlier(linger_.poll(now));
    if (now < next_due_) {
        // No deadline is due: nothing to visit (a loop turn per device message would otherwise walk every
        // connection in setup).
        if (next_due_ != Clock::time_point::max()) earlier(ms_until(next_due_, now));
        return wait;
    }
    next_due_ = Clock::time_point::max();
    // Endpoints with a deadline armed (a setup, a kVP's grace period): only those, so that a wake-up costs the same
    // with ten thousand idle connections. One whose deadline is gone (or just fired) leaves the set until it arms
    // another. fail() never destroys an endpoint, so the snapshot stays valid.
    timed_snapshot_.assign(timed_.begin(), timed_.end());
    for (Endpoint *e : timed_snapshot_) {
        const int ms = e->check_deadline(now);
        if (ms < 0) {
            timed_.erase(e);
        } else {
            earlier(ms);
            arm(now + std::chrono::milliseconds(ms));
        }
    }
    std::vector<uint64_t> expired;
    for (auto &[id, p] : pending_) {
        if (p->session.expired(now)) {
            expired.push_back(id);
        } else if (!p->session.done()) {
            arm(p->session.deadline());
            earlier(p->session.poll_timeout_ms(now));
        }
    }
    for (uint64_t id : expired) {
        PendingRequest &p = *pending_.at(id);
        ++counters_.timeouts;
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
