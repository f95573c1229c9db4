// The /dev/krdma device server: accept, identify, check, dispatch, reply.
#include "server.hpp"

#include "rights.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "krdma/reason.hpp"
#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "device";

// Watch callbacks are told poll() revents; epoll's bits are the same numbers.
static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT && EPOLLERR == POLLERR && EPOLLHUP == POLLHUP &&
              EPOLLRDHUP == POLLRDHUP && EPOLLPRI == POLLPRI);

// What an epoll registration is: the kind in the top byte; a client's id, or a watch's descriptor and the low 24
// bits of its generation (an event that a callback's unwatch/watch of a reused descriptor number made stale).
enum Kind : uint64_t { kStop = 1, kListener, kWake, kClient, kWatch };
constexpr uint64_t tag(Kind k, uint64_t low = 0) { return static_cast<uint64_t>(k) << 56 | low; }
constexpr uint64_t watch_tag(int fd, uint64_t generation) {
    return tag(kWatch, (generation & 0xffffffu) << 32 | static_cast<uint32_t>(fd));
}
void add(int ep, int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) (void)::epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}
std::string hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%#x", v);
    return buf;
}

void modify(int ep, int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    (void)::epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

}  // namespace

int Reply::fail(int code, std::string_view why) noexcept {
    reason_len_ = krdma::reason_text(why, reason_);
    return code;
}

rdma::Status Connection::send_event(const krdma_event &event) noexcept {
    krdma_msg_hdr hdr{};
    hdr.cmd = event.event;
    hdr.flags = KRDMA_MSG_EVENT;
    rdma::Status sent = krdma::send(sock_.get(), hdr, {reinterpret_cast<const uint8_t *>(&event), sizeof event});
    if (sent.ok()) ring();
    return sent;
}

void Connection::ring() const noexcept {
    if (!doorbell_) return;
    // MSG_DONTWAIT whatever the client did to its end: a full doorbell (EAGAIN) has rung already, and krdmad never
    // waits for a client. A stream pair, so the client reads any number of rings in one recv.
    const char one = 1;
    (void)::send(doorbell_.get(), &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

DeviceServer::DeviceServer(std::filesystem::path path, size_t max_connections, size_t per_user)
    : path_(std::move(path)),
      max_connections_(max_connections),
      per_user_(per_user),
      stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
    add(epoll_.get(), stop_fd_.get(), EPOLLIN, tag(kStop));
    add(epoll_.get(), wake_fd_.get(), EPOLLIN, tag(kWake));
    on(KRDMA_CMD_HELLO, [](Connection &c, const Request &req, Reply &rep) -> int {
        krdma_hello h;
        std::memcpy(&h, req.payload.data(), sizeof h);
        if (KRDMA_ABI_MAJOR_OF(h.abi_version) != KRDMA_ABI_VERSION) {
            return rep.fail(RI_EPROTO, "protocol version " + std::to_string(KRDMA_ABI_MAJOR_OF(h.abi_version)) +
                                           " is not this kAL's " + std::to_string(KRDMA_ABI_VERSION) +
                                           ": use a uAL of the same major version as krdmad");
        }
        // The lower of the two minors; a 1.0 client (word 1) gets word 1 back and replies as 1.0 made them.
        c.abi_minor_ = std::min<uint32_t>(KRDMA_ABI_MINOR_OF(h.abi_version), KRDMA_ABI_MINOR);
        h.abi_version = KRDMA_ABI_WORD(KRDMA_ABI_VERSION, c.abi_minor_);
        h.max_message = KRDMA_MAX_MESSAGE;
        h.pid = static_cast<uint32_t>(c.peer().pid);
        h.uid = c.peer().uid;
        h.gid = c.peer().gid;
        h.client_id = c.peer().client_id;
        std::memcpy(rep.payload.data(), &h, sizeof h);
        if (c.abi_minor_ >= 7 && c.sock_ && !c.doorbell_) {
            // The doorbell (minor 7): the client watches its end for the messages nobody waits for, so a call's
            // reply wakes only the caller. Without a pair (EMFILE here), the client watches the socket as before.
            int pair[2];
            if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) == 0) {
                c.doorbell_.reset(pair[0]);
                rep.owned[0].reset(pair[1]);
                rep.fds[rep.nfds++] = pair[1];
                (void)::shutdown(pair[0], SHUT_RD);  // the kAL only rings
            }
        }
        return RI_OK;
    });
    on(KRDMA_CMD_ECHO, [](Connection &, const Request &req, Reply &rep) {
        // The reply payload already holds the request; pass the descriptors back as they came.
        for (size_t i = 0; i < req.message->nfds; ++i) rep.fds[rep.nfds++] = req.message->fds[i].get();
        return RI_OK;
    });
}

DeviceServer::~DeviceServer() {
    std::lock_guard lock(mutex_);
    for (auto &[id, c] : clients_) {
        if (on_disconnect_) on_disconnect_(*c);
    }
    clients_.clear();
    if (listener_) std::filesystem::remove(path_);
}

void DeviceServer::on(uint32_t cmd, Handler handler) { handlers_[cmd] = std::move(handler); }

void DeviceServer::off(uint32_t cmd) { handlers_.erase(cmd); }

void DeviceServer::on_disconnect(std::function<void(Connection &)> callback) { on_disconnect_ = std::move(callback); }

namespace {

// What a path that is not a socket is, for an error message ("a regular file").
std::string file_kind(std::filesystem::file_type t) {
    switch (t) {
        case std::filesystem::file_type::regular: return "a regular file";
        case std::filesystem::file_type::directory: return "a directory";
        case std::filesystem::file_type::symlink: return "a symbolic link";
        case std::filesystem::file_type::fifo: return "a FIFO";
        case std::filesystem::file_type::block: return "a block device";
        case std::filesystem::file_type::character: return "a character device";
        default: return "a file that is not a socket";
    }
}

}  // namespace

rdma::Expected<void> DeviceServer::listen() {
    sockaddr_un addr;
    if (!krdma::unix_address(path_, addr)) return rdma::Error(RI_ENAMETOOLONG, "device path " + path_.string() + " is too long");
    // A socket file may be left by a krdmad that died; replace it only if nobody answers on it.
    krdma::UniqueFd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0) {
        return rdma::Error(RI_EEXIST, "device path " + path_.string() +
                                          " is in use by a running krdmad; stop it or choose another path");
    }
    std::error_code ec;
    const auto status = std::filesystem::symlink_status(path_, ec);
    if (std::filesystem::is_socket(path_, ec)) {
        std::filesystem::remove(path_, ec);
    } else if (std::filesystem::exists(status)) {
        // bind() would say only "Address already in use": say what is there, and that krdmad leaves it alone.
        return rdma::Error(RI_EEXIST, "device path " + path_.string() + " is " + file_kind(status.type()) +
                                          ", not a stale krdmad socket: krdmad removes only a socket there; remove "
                                          "it yourself or choose another path (\"device\" in krdmad.json, or --device)");
    }
    krdma::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s) return rdma::Error(errno, std::string("socket: ") + std::strerror(errno));
    if (::bind(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        int e = errno;
        return rdma::Error(e, "cannot create device " + path_.string() + ": " + std::strerror(e));
    }
    if (::listen(s.get(), 128) != 0) return rdma::Error(errno, std::string("listen: ") + std::strerror(errno));
    listener_ = std::move(s);
    add(epoll_.get(), listener_.get(), EPOLLIN, tag(kListener));
    RDMA_LOG_INFO(kComponent, "serving %s", path_.c_str());
    return {};
}

void DeviceServer::stop() noexcept {
    uint64_t one = 1;
    ssize_t n = ::write(stop_fd_.get(), &one, sizeof one);
    (void)n;  // a full eventfd counter already means "stop"
}

size_t DeviceServer::connections() const {
    std::lock_guard lock(mutex_);
    return clients_.size();
}

DeviceServer::Refusals DeviceServer::refusals() const {
    std::lock_guard lock(mutex_);
    return refusals_;
}

size_t DeviceServer::connections_of(uid_t uid) const {
    std::lock_guard lock(mutex_);
    auto it = per_uid_.find(uid);
    return it == per_uid_.end() ? 0 : it->second;
}

void DeviceServer::broadcast(const krdma_event &event) {
    std::lock_guard lock(mutex_);
    for (auto &[id, c] : clients_) (void)c->send_event(event);
}

rdma::Status DeviceServer::send_event(uint32_t client_id, const krdma_event &event) {
    return send_record(client_id, event.event, {reinterpret_cast<const uint8_t *>(&event), sizeof event});
}

rdma::Status DeviceServer::send_record(uint32_t client_id, uint32_t code, std::span<const uint8_t> record,
                                       std::span<const int> fds) {
    krdma_msg_hdr hdr{};
    hdr.cmd = code;
    hdr.flags = KRDMA_MSG_EVENT;
    std::lock_guard lock(mutex_);
    auto it = clients_.find(client_id);
    if (it == clients_.end()) return rdma::Status(RI_ENOENT);
    return send_or_hold(*it->second, hdr, record, fds);
}

rdma::Status DeviceServer::send_or_hold(Connection &c, const krdma_msg_hdr &hdr, std::span<const uint8_t> payload,
                                        std::span<const int> fds, bool awaited) {
    // Nobody waits for a record, nor for the failure reply of a quiet request: they ring the doorbell (once sent;
    // a held one when flush_held() sends it). A reply to a call wakes only the caller, who reads it.
    const bool unawaited = (hdr.flags & KRDMA_MSG_REPLY) == 0 || !awaited;
    if (c.held_.empty()) {
        rdma::Status sent = krdma::send(c.fd(), hdr, payload, fds);
        if (sent.code() != EAGAIN) {
            if (sent.ok() && unawaited) c.ring();
            return sent;
        }
    } else if (c.held_.size() >= kMaxHeld && (hdr.flags & KRDMA_MSG_REPLY) == 0) {
        // A reply is always held (a caller waits for it); records beyond the bound are refused.
        return rdma::Status(EAGAIN);
    }
    // Its queue is full of unread records: hold this one behind them, with copies of its descriptors, until the
    // client reads. The only allocation on these paths, and only for a client that does not keep up.
    Connection::Held held;
    held.hdr = hdr;
    held.unawaited = unawaited;
    held.payload.assign(payload.begin(), payload.end());
    for (int fd : fds) held.fds.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    const bool first = c.held_.empty();
    c.held_.push_back(std::move(held));
    // Its requests wait in its socket: only writability matters until the held messages are out.
    if (first) modify(epoll_.get(), c.fd(), EPOLLOUT, tag(kClient, c.peer().client_id));
    return rdma::Status();
}

void DeviceServer::watch(int fd, short events, WatchFn fn) {
    const uint64_t generation = next_watch_++;
    const bool fresh = watches_.insert_or_assign(fd, Watch{events, generation, std::move(fn)}).second;
    epoll_event ev{};
    ev.events = static_cast<uint16_t>(events);
    ev.data.u64 = watch_tag(fd, generation);
    // A descriptor watched already is modified, a new one added: one system call where trying ADD first cost two
    // on every re-watch (MPA negotiation re-watches each socket twice). A watched number that its owner closed
    // without unwatching is gone from the epoll set (MOD fails with ENOENT), and a number watched through
    // another path is there already (ADD fails with EEXIST): each falls back to the other operation.
    const int first = fresh ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (::epoll_ctl(epoll_.get(), first, fd, &ev) != 0 && (errno == EEXIST || errno == ENOENT)) {
        (void)::epoll_ctl(epoll_.get(), fresh ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
    }
}

void DeviceServer::unwatch(int fd) {
    if (watches_.erase(fd) != 0) (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void DeviceServer::accept_clients() {
    for (;;) {
        krdma::UniqueFd s(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!s) return;
        adopt(std::move(s));
    }
}

namespace {

// Tells a client why it is not served before closing its connection: a KRDMA_EVENT_REFUSED record carrying the
// reason, with the error in the header's status (the uAL reports it instead of "krdmad closed the connection").
void refuse(int sock, int code, const std::string &why) {
    krdma_msg_hdr hdr{};
    hdr.cmd = KRDMA_EVENT_REFUSED;
    hdr.flags = KRDMA_MSG_EVENT;
    hdr.status = code;
    (void)krdma::send(sock, hdr, {reinterpret_cast<const uint8_t *>(why.data()), std::min(why.size(),
                                                                                      size_t{KRDMA_MAX_REASON})});
}

}  // namespace

void DeviceServer::adopt(krdma::UniqueFd s) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
    std::lock_guard lock(mutex_);
    // Root may go kRootReserve beyond the host's limit, and has no per-user limit: however many connections users
    // hold, the administrator can still look (rdmactl) and act.
    const bool root = cred.uid == 0;
    const auto held = per_uid_.find(cred.uid);
    const size_t mine = held == per_uid_.end() ? 0 : held->second;
    std::string why;
    if (clients_.size() >= max_connections_ + (root ? kRootReserve : 0)) {
        ++refusals_.host;
        why = "krdmad serves " + std::to_string(clients_.size()) + " device connections, its limit (limits." +
              "max_connections " + std::to_string(max_connections_) + ")";
    } else if (!root && per_user_ != 0 && mine >= per_user_) {
        ++refusals_.user;
        why = "uid " + std::to_string(cred.uid) + " holds " + std::to_string(mine) + " device connections, the " +
              "per-user limit (limits.connections_per_user)";
    }
    if (!why.empty()) {
        RDMA_LOG_CLIENT(warn, kComponent, "refusing a connection of pid %d: %s", static_cast<int>(cred.pid),
                        why.c_str());
        refuse(s.get(), RI_ENOSPC, why);
        return;  // closing the socket ends it
    }
    auto c = std::make_unique<Connection>();
    c->sock_ = std::move(s);
    c->peer_ = Peer{cred.pid, cred.uid, cred.gid, next_client_id_++, process_start_time(cred.pid).value_or(0),
                    in_own_pid_namespace(cred.pid)};
    RDMA_LOG_INFO(kComponent, "client %u connected: pid %d uid %u", c->peer_.client_id, static_cast<int>(cred.pid),
                  static_cast<unsigned>(cred.uid));
    add(epoll_.get(), c->fd(), EPOLLIN, tag(kClient, c->peer_.client_id));
    ++per_uid_[cred.uid];
    clients_.emplace(c->peer_.client_id, std::move(c));
}

rdma::Expected<krdma::UniqueFd> DeviceServer::connect_local() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        return rdma::Error(errno, std::string("socketpair: ") + std::strerror(errno));
    }
    krdma::UniqueFd ours(sv[1]), theirs(sv[0]);
    ::fcntl(ours.get(), F_SETFL, ::fcntl(ours.get(), F_GETFL) | O_NONBLOCK);
    adopt(std::move(ours));
    // adopt() registered it with the epoll set; a wait in progress sees it (no wake-up needed).
    return theirs;
}

void DeviceServer::drop(uint32_t client_id) {
    std::lock_guard lock(mutex_);
    auto it = clients_.find(client_id);
    if (it == clients_.end()) return;
    RDMA_LOG_INFO(kComponent, "client %u disconnected", client_id);
    if (on_disconnect_) on_disconnect_(*it->second);
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd(), nullptr);
    if (auto u = per_uid_.find(it->second->peer().uid); u != per_uid_.end() && --u->second == 0) per_uid_.erase(u);
    clients_.erase(it);
}

bool DeviceServer::flush_held(Connection &c) {
    {
        std::lock_guard lock(mutex_);
        while (!c.held_.empty()) {
            Connection::Held &h = c.held_.front();
            int fds[KRDMA_MAX_FDS];
            for (size_t i = 0; i < h.fds.size(); ++i) fds[i] = h.fds[i].get();
            rdma::Status sent = krdma::send(c.fd(), h.hdr, h.payload, std::span<const int>(fds, h.fds.size()));
            if (sent.code() == EAGAIN) return true;  // still full: poll for writability again
            if (!sent.ok()) {
                RDMA_LOG_WARN(kComponent, "held message to client %u failed: %s", c.peer().client_id,
                              sent.describe().c_str());
                return false;
            }
            if (h.unawaited) c.ring();
            c.held_.pop_front();
        }
        modify(epoll_.get(), c.fd(), EPOLLIN, tag(kClient, c.peer().client_id));
    }
    return serve(c);  // requests that waited behind the held messages
}

void DeviceServer::refuse_message(Connection &c, int status, std::string_view why) {
    krdma_msg_hdr hdr{};
    hdr.cmd = message_.hdr.cmd;
    hdr.seq = message_.hdr.seq;
    hdr.status = status;
    hdr.flags = KRDMA_MSG_REPLY;
    const std::span<const uint8_t> text(reinterpret_cast<const uint8_t *>(why.data()), why.size());
    const rdma::Status sent = krdma::send(c.fd(), hdr, c.abi_minor_ >= 1 ? text : std::span<const uint8_t>());
    if (sent.ok() && (message_.hdr.flags & KRDMA_MSG_QUIET) != 0) c.ring();  // nobody waits for it
}

bool DeviceServer::serve(Connection &c) {
    // One message per readiness: a client waits for each reply, so reading on until EAGAIN would cost every request
    // a second recvmsg that finds nothing. A client with more queued is polled readable again at once.
    if (has_held(c)) return true;  // nothing more is read until the held messages are out
    switch (krdma::receive(c.fd(), message_)) {
        case krdma::RecvResult::again:
            return true;
        case krdma::RecvResult::closed:
            return false;
        case krdma::RecvResult::invalid:
            // Answer with what could be read of the header, so a client waiting on that sequence wakes up.
            refuse_message(c, RI_EMSGSIZE,
                           "malformed message: truncated, longer than KRDMA_MAX_MESSAGE, with too many descriptors, "
                           "or its header's length is not its size");
            return true;
        case krdma::RecvResult::message:
            if (message_.fds_lost) {
                // The request is whole but its descriptors did not fit this process: refuse it, saying why.
                static constexpr std::string_view kWhy =
                    "krdmad could not take the descriptors the request carried: it is at its RLIMIT_NOFILE "
                    "(raise LimitNOFILE=)";
                RDMA_LOG_WARN(kComponent, "client %u: %s", c.peer().client_id, kWhy.data());
                refuse_message(c, RI_ENOSPC, kWhy);
                return true;
            }
            dispatch(c, message_);
            return true;
    }
    return true;
}

void DeviceServer::dispatch(Connection &c, krdma::Message &m) {
    krdma_msg_hdr hdr{};
    hdr.cmd = m.hdr.cmd;
    hdr.seq = m.hdr.seq;
    hdr.flags = KRDMA_MSG_REPLY;
    const size_t size = krdma::command_size(m.hdr.cmd);
    auto it = handlers_.find(m.hdr.cmd);
    Reply rep;
    if (it == handlers_.end()) {
        // What ioctl() answers for a command the device does not know.
        hdr.status = rep.fail(RI_ENOTTY, "unknown command " + hex(m.hdr.cmd) + ": is this krdmad older than the uAL?");
    } else if ((m.hdr.flags != 0 && (m.hdr.flags != KRDMA_MSG_QUIET || c.abi_minor_ < 3)) || m.hdr.status != 0 ||
               m.hdr.reserved != 0) {
        hdr.status = rep.fail(RI_EINVAL, "a request's header must have zero status and reserved word, and no flag "
                                         "but KRDMA_MSG_QUIET (protocol 1.3)");
    } else if (m.payload_len() != size) {
        hdr.status = rep.fail(RI_EINVAL, "command " + hex(m.hdr.cmd) + " takes " + std::to_string(size) +
                                             " bytes, the request has " + std::to_string(m.payload_len()));
    }
    if (hdr.status == RI_OK) {
        rep.payload = std::span<uint8_t>(reply_buf_.data(), size);
        std::memcpy(reply_buf_.data(), m.body.data(), size);
        Request req{m.hdr.cmd, m.payload(), &m};
        try {
            hdr.status = it->second(c, req, rep);
        } catch (const std::exception &e) {
            RDMA_LOG_ERROR(kComponent, "handler of command %#x failed: %s", m.hdr.cmd, e.what());
            hdr.status = rep.fail(RI_EIO, std::string("the kAL failed to serve the command: ") + e.what());
        }
        if (!rdma::in_vocabulary(hdr.status)) {
            // A kAL bug (or a module's value passed on unchecked): clients must only ever see the vocabulary.
            RDMA_LOG_ERROR(kComponent, "handler of command %#x returned %d, outside the RNIC-PI vocabulary (%.*s)",
                           m.hdr.cmd, hdr.status, static_cast<int>(rep.why().size()), rep.why().data());
            const std::string why(rep.why());
            hdr.status = rep.fail(RI_EIO, (why.empty() ? std::string("the kAL failed") : why) + " (error " +
                                              std::to_string(hdr.status) + ")");
        }
    }
    // Only a successful reply carries the reply struct and descriptors; a failed one its reason, if the client
    // speaks minor version 1.
    const bool ok = hdr.status == RI_OK;
    if (ok && m.hdr.flags == KRDMA_MSG_QUIET) return;  // a quiet request's success is not answered
    const std::string_view why = rep.why();
    const std::span<const uint8_t> payload =
        ok ? std::span<const uint8_t>(rep.payload)
           : c.abi_minor_ >= 1 ? std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(why.data()), why.size())
                               : std::span<const uint8_t>();
    const std::span<const int> fds(rep.fds, ok ? rep.nfds : 0);
    rdma::Status sent;
    {
        std::lock_guard lock(mutex_);
        // A reply is held like a record, behind the records the client has not read.
        sent = send_or_hold(c, hdr, payload, fds, m.hdr.flags != KRDMA_MSG_QUIET);
    }
    if (!sent.ok()) {
        RDMA_LOG_WARN(kComponent, "reply to client %u failed: %s", c.peer().client_id, sent.describe().c_str());
    }
    for (auto &f : m.fds) f.reset();  // descriptors a handler did not take are closed here
}

struct DeviceServer::Task {
    const std::function<int()> *fn = nullptr;
    int result = 0;
    bool done = false;
};

int DeviceServer::call_on_loop(const std::function<int()> &fn) {
    if (std::this_thread::get_id() == loop_thread_.load()) return fn();
    std::unique_lock lock(tasks_mutex_);
    if (loop_state_ == LoopState::stopped) {
        lock.unlock();
        std::lock_guard g(inline_mutex_);
        return fn();
    }
    Task t;
    t.fn = &fn;
    tasks_.emplace_back(&t);
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);  // make run() look at the task
    (void)n;
    tasks_done_.wait(lock, [&t] { return t.done; });
    return t.result;
}

bool DeviceServer::post(std::function<void()> fn) {
    std::lock_guard lock(tasks_mutex_);
    if (loop_state_ == LoopState::stopped) return false;  // nothing will run it, and no thread is safe to run it on
    tasks_.emplace_back(std::move(fn));
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
    (void)n;
    return true;
}

void DeviceServer::run_tasks() {
    std::vector<std::variant<Task *, std::function<void()>>> batch;
    {
        std::lock_guard lock(tasks_mutex_);
        batch.swap(tasks_);
    }
    bool waited = false;
    for (auto &item : batch) {
        if (auto *posted = std::get_if<std::function<void()>>(&item)) {
            try {
                (*posted)();
            } catch (...) {
                RDMA_LOG_WARN(kComponent, "a call posted to the serving thread threw");
            }
            continue;
        }
        Task *t = std::get<Task *>(item);
        int r;
        try {
            r = (*t->fn)();
        } catch (...) {
            r = EIO;
        }
        std::lock_guard lock(tasks_mutex_);
        t->result = r;
        t->done = true;
        waited = true;
    }
    if (waited) tasks_done_.notify_all();
}

void DeviceServer::run() {
    loop_thread_.store(std::this_thread::get_id());
    {
        std::lock_guard lock(tasks_mutex_);
        loop_state_ = LoopState::running;  // calls queued before now wait in tasks_; the wake descriptor is set
    }
    // However the loop ends, waiting callers get their tasks run (here, once more) and later calls run inline.
    struct Stopped {
        DeviceServer *s;
        ~Stopped() { s->end_loop(); }
    } stopped{this};
    while (turn(tick_ ? tick_() : -1)) {
    }
}

bool DeviceServer::run_once(int timeout_ms) {
    {
        std::lock_guard lock(tasks_mutex_);
        if (loop_state_ == LoopState::stopped) return false;
        loop_state_ = LoopState::running;
    }
    loop_thread_.store(std::this_thread::get_id());
    int timeout = tick_ ? tick_() : -1;
    if (timeout < 0 || (timeout_ms >= 0 && timeout_ms < timeout)) timeout = timeout_ms;
    if (turn(timeout)) return true;
    end_loop();
    return false;
}

void DeviceServer::end_loop() {
    {
        std::lock_guard lock(tasks_mutex_);
        loop_state_ = LoopState::stopped;
    }
    run_tasks();
    loop_thread_.store(std::thread::id{});
}

bool DeviceServer::turn(int timeout_ms) {
    // One epoll set, level-triggered (a readiness not consumed is reported again, as poll() would): an event costs
    // the same with ten endpoints watched or ten thousand.
    constexpr int kEvents = 64;
    epoll_event events[kEvents];
    const int n = ::epoll_wait(epoll_.get(), events, kEvents, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return true;
        RDMA_LOG_ERROR(kComponent, "epoll_wait: %s", std::strerror(errno));
        return false;
    }
    for (int i = 0; i < n; ++i) {
        const uint64_t data = events[i].data.u64;
        const auto revents = static_cast<short>(events[i].events);
        switch (static_cast<Kind>(data >> 56)) {
            case kStop: return false;
            case kListener: accept_clients(); break;
            case kWake: {
                uint64_t count;
                ssize_t r = ::read(wake_fd_.get(), &count, sizeof count);
                (void)r;
                break;
            }
            case kWatch: {
                const int fd = static_cast<int>(static_cast<uint32_t>(data));
                // A callback earlier in this batch may have removed or replaced this watch.
                auto w = watches_.find(fd);
                if (w == watches_.end() || (w->second.generation & 0xffffffu) != ((data >> 32) & 0xffffffu)) break;
                WatchFn fn = w->second.fn;  // a copy: the callback may unwatch itself
                fn(revents);
                break;
            }
            case kClient: {
                const auto id = static_cast<uint32_t>(data);
                Connection *c;
                {
                    std::lock_guard lock(mutex_);
                    auto it = clients_.find(id);
                    if (it == clients_.end()) break;  // dropped earlier in this batch
                    c = it->second.get();
                }
                const bool alive = has_held(*c) ? (revents & (POLLERR | POLLHUP)) == 0 && flush_held(*c) : serve(*c);
                if (!alive) drop(id);
                break;
            }
            default: break;
        }
    }
    run_tasks();  // work other threads queued (call_on_loop), woken by the wake descriptor
    return true;
}

}  // namespace kal
