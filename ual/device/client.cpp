// The uAL's device client.
#include "client.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "krdma/reason.hpp"
#include "rnicpi/host/log.hpp"

namespace ual {

namespace {
constexpr const char *kComponent = "ual";
}  // namespace

namespace {

// What is at @p path when it is not a socket ("a directory"), or empty when it is one or nothing is there.
std::string not_a_socket(const std::filesystem::path &path) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    switch (st.type()) {
        case std::filesystem::file_type::regular: return "a regular file";
        case std::filesystem::file_type::directory: return "a directory";
        case std::filesystem::file_type::socket:
        case std::filesystem::file_type::not_found:
        case std::filesystem::file_type::none: return "";
        default: return "not a socket";
    }
}

timeval timeval_of(std::chrono::milliseconds t) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    return tv;
}

// "2.5 s" for a message.
std::string seconds_text(std::chrono::milliseconds t) {
    char b[32];
    std::snprintf(b, sizeof b, "%g s", static_cast<double>(t.count()) / 1000);
    return b;
}

}  // namespace

rdma::Expected<std::unique_ptr<DeviceClient>> DeviceClient::connect(const std::filesystem::path &path,
                                                                    std::chrono::milliseconds wait) {
    sockaddr_un addr;
    if (!krdma::unix_address(path, addr)) {
        return rdma::Error(RI_ENAMETOOLONG, "device path " + path.string() + " is too long");
    }
    std::unique_ptr<DeviceClient> c(new DeviceClient());
    c->sock_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!c->sock_) return rdma::Error(errno, std::string("socket: ") + std::strerror(errno));
    // A krdmad that accepts nothing (stopped, hung) leaves connect() blocked once its backlog is full: the send
    // timeout bounds that wait (a Unix socket's connect() honours it), and is cleared again for the requests.
    const timeval bounded = timeval_of(wait), unbounded{};
    (void)::setsockopt(c->sock_.get(), SOL_SOCKET, SO_SNDTIMEO, &bounded, sizeof bounded);
    if (::connect(c->sock_.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        int e = errno;
        if (const std::string kind = not_a_socket(path); !kind.empty()) {
            // connect() says only "Connection refused" for a file or a directory.
            return rdma::Error(ENOTSOCK, "not a krdmad device: " + path.string() + " is " + kind +
                                             " (krdmad's device is a socket; is the path right?)");
        }
        if (e == EAGAIN || e == EWOULDBLOCK) {
            return rdma::Error(RI_ETIMEDOUT, "krdmad at " + path.string() + " took no connection within " +
                                                 seconds_text(wait) + ": is it stopped (state T in ps) or hung? "
                                                 "check the process and its log");
        }
        return rdma::Error(e, "cannot open " + path.string() + ": " + std::strerror(e) +
                                  (e == ENOENT || e == ECONNREFUSED ? " (is krdmad running with this device path?)"
                                                                    : ""));
    }
    (void)::setsockopt(c->sock_.get(), SOL_SOCKET, SO_SNDTIMEO, &unbounded, sizeof unbounded);
    if (auto ok = c->handshake("krdmad at " + path.string(), wait); !ok) {
        if (ok.error().code() == RI_ETIMEDOUT) {
            return rdma::Error(RI_ETIMEDOUT, "krdmad at " + path.string() + " did not answer within " +
                                                 seconds_text(wait) + ": is it stopped (state T in ps), hung or "
                                                 "overloaded, or is another program listening there? check the "
                                                 "process and its log");
        }
        return ok.error();
    }
    return c;
}

rdma::Expected<std::unique_ptr<DeviceClient>> DeviceClient::adopt(krdma::UniqueFd socket) {
    std::unique_ptr<DeviceClient> c(new DeviceClient());
    c->sock_ = std::move(socket);
    if (auto ok = c->handshake("the embedded kAL"); !ok) return ok.error();
    return c;
}

rdma::Expected<void> DeviceClient::handshake(const std::string &where, std::chrono::milliseconds wait) {
    queued_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!queued_) return rdma::Error(errno, std::string("eventfd: ") + std::strerror(errno));
    watch_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!watch_) return rdma::Error(errno, std::string("epoll_create1: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (::epoll_ctl(watch_.get(), EPOLL_CTL_ADD, sock_.get(), &ev) != 0) {
        return rdma::Error(errno, std::string("epoll_ctl: ") + std::strerror(errno));
    }
    // The event thread watches watch_ through a set of its own: a thread that leads mutes it there, and a call's
    // mute of the socket in watch_ holds for both.
    events_watch_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!events_watch_) return rdma::Error(errno, std::string("epoll_create1: ") + std::strerror(errno));
    if (::epoll_ctl(events_watch_.get(), EPOLL_CTL_ADD, watch_.get(), &ev) != 0) {
        return rdma::Error(errno, std::string("epoll_ctl: ") + std::strerror(errno));
    }
    krdma_hello h{};
    h.abi_version = KRDMA_ABI_WORD(KRDMA_ABI_VERSION, KRDMA_ABI_MINOR);
    auto reply = call(KRDMA_CMD_HELLO, {reinterpret_cast<const uint8_t *>(&h), sizeof h}, {}, wait);
    if (reply && reply->status == RI_EPROTO && reply->reason.empty()) {
        // A 1.0 krdmad accepts only the word 1 (and explains nothing): speak 1.0 with it (see krdma/abi.h).
        h.abi_version = KRDMA_ABI_VERSION;
        reply = call(KRDMA_CMD_HELLO, {reinterpret_cast<const uint8_t *>(&h), sizeof h}, {}, wait);
    }
    if (!reply) return reply.error();
    if (reply->status != 0) {
        const std::string why = reply->reason.empty() ? std::strerror(reply->status) : reply->reason;
        return rdma::Error(reply->status, where + " refused the handshake: " + why +
                                              (reply->status == RI_EPROTO ? " (protocol version mismatch)" : ""));
    }
    if (reply->payload.size() != sizeof hello_) {
        return rdma::Error(RI_EPROTO, where + " answered the handshake with " + std::to_string(reply->payload.size()) +
                                          " bytes instead of " + std::to_string(sizeof hello_));
    }
    std::memcpy(&hello_, reply->payload.data(), sizeof hello_);
    if (abi_minor() >= 7 && !reply->fds.empty()) {
        // The doorbell rings for every message nobody waits for: the pollers watch it, and the socket only for its
        // hang-up (a socket watched for no event still reports one), so a call's reply wakes only its caller.
        epoll_event bell{};
        bell.events = EPOLLIN;
        epoll_event hangup{};
        if (::epoll_ctl(watch_.get(), EPOLL_CTL_ADD, reply->fds[0].get(), &bell) == 0 &&
            ::epoll_ctl(watch_.get(), EPOLL_CTL_MOD, sock_.get(), &hangup) == 0) {
            doorbell_ = std::move(reply->fds[0]);
        }
    }
    return {};
}

namespace {

// The kAL's reason carried after the header of an error reply or a refusal record, cut and cleaned.
std::string reason_of(const krdma::Message &m) {
    std::array<char, KRDMA_MAX_REASON> why;
    const auto text = m.payload();
    return std::string(why.data(),
                       krdma::reason_text({reinterpret_cast<const char *>(text.data()), text.size()}, why));
}

}  // namespace

rdma::Error refusal(int status, std::string_view reason) {
    return rdma::Error(status, reason.empty() ? std::string(std::strerror(status)) : std::string(reason));
}

rdma::Error DeviceClient::refused_error() const {
    return rdma::Error(refused_, "krdmad refused the connection: " + refused_reason_);
}

void DeviceClient::read_refusal() {
    // A kAL closing a connection that has a request of ours unread makes the first receive fail with ECONNRESET
    // before the records it sent can be read: read on, without waiting, until nothing is left.
    for (int i = 0; i < 8 && refused_ == 0; ++i) {
        switch (krdma::receive(sock_.get(), message_, false)) {
            case krdma::RecvResult::message:
                (void)take_event(message_);
                break;
            case krdma::RecvResult::closed:
            case krdma::RecvResult::invalid:
                break;
            case krdma::RecvResult::again:
                return;
        }
    }
}

bool DeviceClient::take_event(krdma::Message &m, bool *queued) {
    if ((m.hdr.flags & KRDMA_MSG_EVENT) == 0) return false;
    if (m.hdr.cmd == KRDMA_EVENT_REFUSED) {
        // The kAL will not serve this connection and closes it next: keep why, for the call that finds it closed.
        refused_reason_ = reason_of(m);
        refused_ = m.hdr.status > 0 ? m.hdr.status : RI_ENOSPC;
    } else if (m.hdr.cmd == KRDMA_EVENT_CM && m.payload_len() == sizeof(krdma_cm_event)) {
        CmRecord r;
        std::memcpy(&r.event, m.body.data(), sizeof r.event);
        if (m.nfds > 0) r.fd = std::move(m.fds[0]);
        if (m.nfds > 1) r.channel = std::move(m.fds[1]);
        if (m.nfds > 2) r.byte_channel = std::move(m.fds[2]);
        if (m.nfds > 3) r.link = std::move(m.fds[3]);
        if (m.fds_lost && r.event.type == KRDMA_CM_ESTABLISHED) {
            // The connection's socket could not be installed here: it is lost to this process, which hears so
            // rather than wait for an establishment that never comes.
            RDMA_LOG_WARN(kComponent, "a connection's socket did not reach this process: it is at its descriptor "
                                      "limit (RLIMIT_NOFILE; raise ulimit -n); the connection is reported broken");
            r.event.type = KRDMA_CM_BROKEN;
            r.event.status = EMFILE;
        }
        // The kAL reports on a QP's connection only after it served the CONNECT or ACCEPT posted for it: a quiet
        // one that succeeded is settled here too, for a consumer that makes no other call meanwhile.
        if (!posted_.empty()) {
            const uint64_t object = r.event.object;
            std::erase_if(posted_, [object](const auto &p) { return p.second.object == object; });
        }
        std::lock_guard q(queue_mutex_);
        cm_events_.push_back(std::move(r));
        if (queued != nullptr) *queued = true;
    } else if (m.payload_len() == sizeof(krdma_event)) {
        krdma_event e;
        std::memcpy(&e, m.body.data(), sizeof e);
        std::lock_guard q(queue_mutex_);
        events_.push_back(e);
        if (queued != nullptr) *queued = true;
    }
    for (auto &f : m.fds) f.reset();  // descriptors of a record that takes none are not kept
    m.nfds = 0;
    return true;
}

bool DeviceClient::take_posted_reply(krdma::Message &m, bool *queued) {
    if ((m.hdr.flags & KRDMA_MSG_REPLY) == 0) return false;
    auto it = posted_.find(m.hdr.seq);
    if (it == posted_.end()) return false;
    const PostedFailure f = it->second;
    posted_.erase(it);
    for (auto &fd : m.fds) fd.reset();
    m.nfds = 0;
    if (m.hdr.status == 0) return true;
    RDMA_LOG_INFO(kComponent, "a request sent without waiting was refused (%s): %s", std::strerror(m.hdr.status),
                  reason_of(m).c_str());
    if (f.type == kLogRefusal) return true;
    CmRecord r;
    r.event.event = KRDMA_EVENT_CM;
    r.event.type = f.type;
    r.event.object = f.object;
    r.event.context = f.context;
    r.event.status = m.hdr.status;
    r.event.cookie = f.cookie;
    r.event.llp.fd = -1;
    std::lock_guard q(queue_mutex_);
    cm_events_.push_back(std::move(r));
    if (queued != nullptr) *queued = true;
    return true;
}

rdma::Status DeviceClient::send_reading_locked(const krdma_msg_hdr &hdr, std::span<const uint8_t> request,
                                               std::span<const int> fds) {
    // The kAL stops reading a client's requests while records it sent that client wait unread (it holds them, and
    // polls for writability only): a request that waits for room in a full socket must read those records meanwhile,
    // or each side waits for the other for ever. The event thread, which would read them, waits for mutex_, held
    // here (dtestcm's client posting 500-1000 disconnects in a row while their connection events came back).
    for (;;) {
        rdma::Status s = krdma::send(sock_.get(), hdr, request, fds, false);
        if (s.code() != EAGAIN) return s;
        pollfd p{sock_.get(), POLLIN | POLLOUT, 0};
        if (::poll(&p, 1, -1) < 0 && errno != EINTR) return rdma::Status(errno);
        if ((p.revents & POLLIN) == 0) continue;  // room (or a hang-up, which the next send reports)
        // A call's reply cannot be among them (a call holds mutex_ until its reply): events and posted replies.
        bool queued = false;
        read_waiting_locked(&queued, message_);
        if (queued) announce_locked();
        if (closed_) return rdma::Status(EPIPE);
    }
}

rdma::Expected<uint32_t> DeviceClient::send_locked(uint32_t cmd, std::span<const uint8_t> request,
                                                   std::span<const int> fds, uint32_t flags) {
    krdma_msg_hdr hdr{};
    hdr.cmd = cmd;
    hdr.seq = next_seq_++;
    hdr.flags = flags;
    if (rdma::Status s = send_reading_locked(hdr, request, fds); !s.ok()) {
        if (s.code() == EPIPE || s.code() == ECONNRESET) {
            // A kAL that refused the connection said why before it closed: read that, if it is there.
            read_refusal();
            if (refused_ != 0) return refused_error();
        }
        return rdma::Error(s.code() == EPIPE || s.code() == ECONNRESET ? RI_ENODEV : s.code(),
                           "sending to krdmad failed: " + s.describe());
    }
    return hdr.seq;
}

rdma::Expected<void> DeviceClient::post(uint32_t cmd, std::span<const uint8_t> request, const PostedFailure &failure) {
    std::lock_guard lock(mutex_);
    // A 1.3 kAL answers a quiet request only when it fails: no reply to read (and no wake-up) per success.
    auto seq = send_locked(cmd, request, {}, abi_minor() >= 3 ? uint32_t{KRDMA_MSG_QUIET} : 0u);
    if (!seq) return seq.error();
    posted_.emplace(*seq, failure);
    return {};
}

void DeviceClient::settle_posted_before(uint32_t seq) {
    // The kAL answers one connection's requests in order: a quiet request sent before @p seq that has no failure
    // reply by the time @p seq's reply arrives succeeded.
    std::erase_if(posted_, [seq](const auto &p) { return static_cast<int32_t>(p.first - seq) < 0; });
}

void DeviceClient::lead(bool on) noexcept {
    epoll_event ev{};
    ev.events = on ? 0u : static_cast<uint32_t>(EPOLLIN);
    (void)::epoll_ctl(events_watch_.get(), EPOLL_CTL_MOD, watch_.get(), &ev);
}

void DeviceClient::mute(bool on) noexcept {
    if (doorbell_) return;  // a reply does not ring the doorbell: nothing to mute
    // Level-triggered: turning the watch back on reports anything that arrived meanwhile. A muted socket still
    // reports a hang-up, which only makes the poller wait for the call and then find the connection closed.
    epoll_event ev{};
    ev.events = on ? 0u : static_cast<uint32_t>(EPOLLIN);
    (void)::epoll_ctl(watch_.get(), EPOLL_CTL_MOD, sock_.get(), &ev);
}

rdma::Expected<void> DeviceClient::exchange(uint32_t cmd, std::span<const uint8_t> request, std::span<const int> fds,
                                            std::chrono::milliseconds timeout) {
    // The reply would wake the event poller, which could only wait for this call to end: mute the socket for it
    // while the call reads it (event records read meanwhile are queued and announced on queued_fd()).
    mute(true);
    struct Unmute {
        DeviceClient *self;
        ~Unmute() { self->mute(false); }
    } unmute{this};
    auto seq = send_locked(cmd, request, fds, 0);
    if (!seq) return seq.error();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    // The first wait is a blocking recvmsg bounded by SO_RCVTIMEO (set when the timeout changes): the reply
    // usually comes first, and poll() then recvmsg() would cost a system call more. Later waits (after an event
    // record or a stale reply) poll() for the time left. A non-blocking socket just takes the poll() path.
    bool first = true;
    bool met_unawaited = false;  // a record or a posted request's reply was read: its ring is left on the doorbell
    if (timeout.count() > 0 && timeout != rcvtimeo_) {
        timeval tv{};
        tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
        tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
        if (::setsockopt(sock_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0) {
            rcvtimeo_ = timeout;
        } else {
            rcvtimeo_ = std::chrono::milliseconds(0);
        }
    }
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return rdma::Error(RI_ETIMEDOUT, "krdmad did not answer in time");
        const bool wait = first && rcvtimeo_ == timeout;
        first = false;
        if (!wait) {
            pollfd p{sock_.get(), POLLIN, 0};
            int r = ::poll(&p, 1, static_cast<int>(left.count()));
            if (r < 0 && errno != EINTR) return rdma::Error(errno, std::string("poll: ") + std::strerror(errno));
            if (r <= 0) continue;
        }
        switch (krdma::receive(sock_.get(), message_, wait)) {
            case krdma::RecvResult::again:
                continue;
            case krdma::RecvResult::closed:
                closed_ = true;
                read_refusal();
                if (refused_ != 0) return refused_error();
                return rdma::Error(RI_ENODEV, "krdmad closed the device connection (stopped or restarted?)");
            case krdma::RecvResult::invalid:
                return rdma::Error(RI_EPROTO, "malformed message from krdmad");
            case krdma::RecvResult::message:
                break;
        }
        bool queued = false;
        if (take_event(message_, &queued) || take_posted_reply(message_, &queued)) {
            // A record for the event thread, which may be asleep in poll() (a posted request's success is none).
            if (queued) announce_locked();
            met_unawaited = true;
            continue;
        }
        if ((message_.hdr.flags & KRDMA_MSG_REPLY) == 0 || message_.hdr.seq != *seq) continue;  // stale reply
        if (!posted_.empty()) settle_posted_before(*seq);
        if (met_unawaited && doorbell_) settle_doorbell_locked();
        // A HELLO reply that lost its doorbell still serves: the socket is then watched as before minor 7.
        if (message_.fds_lost && cmd != KRDMA_CMD_HELLO) {
            return rdma::Error(RI_ENOSPC, "the kAL's reply came without its descriptors: this process is at its "
                                          "descriptor limit (RLIMIT_NOFILE; raise ulimit -n)");
        }
        return {};
    }
}

rdma::Expected<CallReply> DeviceClient::call(uint32_t cmd, std::span<const uint8_t> request,
                                             std::span<const int> fds, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    if (auto ok = exchange(cmd, request, fds, timeout); !ok) return ok.error();
    CallReply out;
    out.status = message_.hdr.status;
    if (out.status != 0) {
        // An error reply carries no struct: what follows the header is the kAL's reason (minor version 1).
        out.reason = reason_of(message_);
        return out;
    }
    out.payload.assign(message_.payload().begin(), message_.payload().end());
    for (size_t i = 0; i < message_.nfds; ++i) out.fds.push_back(std::move(message_.fds[i]));
    return out;
}

rdma::Expected<CallReply> DeviceClient::request(uint32_t cmd, std::span<const uint8_t> request,
                                                std::span<const int> fds, std::chrono::milliseconds timeout) {
    auto r = call(cmd, request, fds, timeout);
    if (r && r->status != 0) return refusal(r->status, r->reason);
    return r;
}

rdma::Expected<CallStatus> DeviceClient::call_into(uint32_t cmd, std::span<const uint8_t> request,
                                                   std::span<uint8_t> reply, std::span<const int> fds,
                                                   std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    if (auto ok = exchange(cmd, request, fds, timeout); !ok) return ok.error();
    CallStatus out;
    out.status = message_.hdr.status;
    if (out.status != 0) {
        const auto text = message_.payload();
        out.reason_len = krdma::reason_text({reinterpret_cast<const char *>(text.data()), text.size()}, out.reason);
        return out;
    }
    out.payload_len = message_.payload_len();
    if (const size_t n = std::min(out.payload_len, reply.size()); n > 0) std::memcpy(reply.data(), message_.body.data(), n);
    for (size_t i = 0; i < message_.nfds; ++i) out.fds[out.nfds++] = std::move(message_.fds[i]);
    return out;
}

void DeviceClient::announce_locked() {
    std::lock_guard q(queue_mutex_);
    if (announced_) return;  // one unread announcement wakes the poller as well as several
    const uint64_t one = 1;
    (void)!::write(queued_.get(), &one, sizeof one);
    announced_ = true;
}

void DeviceClient::take_announcement() {
    std::lock_guard q(queue_mutex_);
    if (announced_) {
        uint64_t n;
        (void)!::read(queued_.get(), &n, sizeof n);
        announced_ = false;
    }
}

void DeviceClient::read_waiting_locked(bool *queued, krdma::Message &into) {
    for (;;) {
        const krdma::RecvResult r = krdma::receive(sock_.get(), into);
        if (r == krdma::RecvResult::closed) closed_ = true;
        if (r != krdma::RecvResult::message) return;
        // A stray reply without a caller is dropped.
        if (!take_event(into, queued)) (void)take_posted_reply(into, queued);
    }
}

void DeviceClient::drain_doorbell_locked() {
    // Rings first, then records: a record sent after this read rings again. Only a reader of the socket may do this
    // (mutex_ held), and it reads the socket empty afterwards: rings taken by a thread that leaves a record on the
    // socket would leave it unannounced.
    char rings[64];
    while (::recv(doorbell_.get(), rings, sizeof rings, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof rings)) {
    }
}

void DeviceClient::settle_doorbell_locked() {
    // The call read what rang (queued and announced on queued_): take the rings, so that the pollers do not wake
    // for records they will not find, and read on (the reply aside) what came after the reply and rang too.
    drain_doorbell_locked();
    bool queued = false;
    read_waiting_locked(&queued, spare_);
    if (queued) announce_locked();
}

void DeviceClient::receive_all_locked() {
    if (doorbell_) drain_doorbell_locked();
    take_announcement();
    read_waiting_locked(nullptr, message_);
}

template <class Record, class Other>
std::optional<Record> DeviceClient::next_of(std::deque<Record> &queue, const std::deque<Other> &other) {
    std::lock_guard lock(mutex_);
    size_t other_before = 0;
    bool empty = false;
    {
        std::lock_guard q(queue_mutex_);
        empty = queue.empty();
        other_before = other.size();
    }
    if (empty) {
        receive_all_locked();
        // Records of the other kind read on the way wait in their queue, and the socket no longer says so:
        // announce them as exchange() does, or the event thread sleeps on them (an asynchronous event right behind
        // a connection event was lost this way).
        bool grew = false;
        {
            std::lock_guard q(queue_mutex_);
            grew = other.size() > other_before;
        }
        if (grew) announce_locked();
    }
    std::lock_guard q(queue_mutex_);
    if (queue.empty()) return std::nullopt;
    Record r = std::move(queue.front());
    queue.pop_front();
    return r;
}

std::optional<krdma_event> DeviceClient::next_event() { return next_of(events_, cm_events_); }

std::optional<CmRecord> DeviceClient::next_cm_event() { return next_of(cm_events_, events_); }

void DeviceClient::take_events(std::vector<krdma_event> &events, std::vector<CmRecord> &cm_events) {
    // A call in progress holds mutex_ for its round trip and reads the socket itself: it queues the records it
    // meets and announces them on queued_. The event thread then takes what is queued instead of waiting for the
    // call to end (a server's event thread waited out every endpoint creation of its accepting thread).
    // Woken by the socket itself (between the call's taking the lock and muting the socket, or a post), it waits
    // for the lock as before: taking nothing and polling again would spin until then.
    std::unique_lock lock(mutex_, std::try_to_lock);
    bool announced = false;
    if (!lock.owns_lock()) {
        std::lock_guard q(queue_mutex_);
        announced = announced_;
    }
    if (announced) {
        take_announcement();
    } else {
        if (!lock.owns_lock()) lock.lock();
        receive_all_locked();
    }
    std::lock_guard q(queue_mutex_);
    events.insert(events.end(), events_.begin(), events_.end());
    events_.clear();
    for (CmRecord &r : cm_events_) cm_events.push_back(std::move(r));
    cm_events_.clear();
}

}  // namespace ual
