// The sockets layer's interposition: the C library's socket calls of an unmodified program, served over RDMA for
// the connections whose peers run the layer, passed to the C library untouched for every other descriptor.
//
// Every TCP socket starts as a kernel socket. connect() and listen() mark it (when the policy says so) so that its
// handshake tells the peer this end runs the layer; once established, each end knows whether the other does. A
// connection whose two ends do is converted (MPA on the same TCP connection) and its descriptor number moved onto a
// readiness mirror (mirror.hpp); any other stays the kernel's socket, untouched, and costs nothing more.
//
// The client converts at once (its peer may be waiting for its first byte); an accepted connection converts on its
// first use, so that a server that forks a child per connection converts it in the child that serves it.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "layer.hpp"
#include "libc.hpp"
#include "link.hpp"
#include "mirror.hpp"
#include "rnicpi/host/log.hpp"
#include "decline.hpp"
#include "stream.hpp"

using namespace openrdma::sockets;

// The interposed C library functions: visible, whatever the build's default visibility.
#define OPENRDMA_EXPORT __attribute__((visibility("default")))

namespace {

constexpr const char *kComponent = "sockets";
constexpr int kMaxFd = 1 << 16;  // descriptors above are left to the C library

// One socket the layer follows. Descriptors that dup() made share it.
struct Sock {
    enum class Mode : uint8_t {
        fresh,      // a TCP socket, neither connected nor listening
        connecting, // marked, non-blocking connect under way
        listening,  // marked listener
        accepted,   // accepted from a marked listener, the peer runs the layer: converts on first use
        rdma,       // converted: the descriptor is the mirror, the bytes go through the stream
        plain,      // decided: stays the kernel's TCP socket (the entry goes at the next call, costing nothing after)
        orphan      // converted in the parent of a fork: nothing here can serve it
    };
    std::mutex mutex;
    Mode mode = Mode::fresh;
    bool nonblock = false;
    bool linger0 = false;
    int refs = 1;  // descriptors naming it (guarded by the table's mutex)
    int tcp = -1;  // the layer's own descriptor of the TCP socket once converted (names, options)
    sockaddr_storage peer{};  // the peer's address once converted (recvfrom and recvmsg give it without a call)
    socklen_t peer_len = 0;
    std::shared_ptr<Stream> stream;
    std::unique_ptr<Mirror> mirror;
    struct Reg {
        int epfd;
        epoll_event ev;
    };
    std::vector<Reg> epolls;  // the application's epoll registrations of its descriptor
};

std::atomic<Sock *> g_table[kMaxFd];
// Epoll instances that hold a converted socket: their waits spin on those streams before sleeping (guarded by
// g_epoll_mutex; g_epoll_has says, without the lock, whether an instance has any).
std::atomic<uint8_t> g_epoll_has[kMaxFd];
std::mutex g_epoll_mutex;
std::unordered_map<int, std::vector<int>> g_epoll_fds;

void epoll_note(int epfd, int fd, bool in) {
    if (epfd < 0 || epfd >= kMaxFd) return;
    std::lock_guard lock(g_epoll_mutex);
    auto &v = g_epoll_fds[epfd];
    std::erase(v, fd);
    if (in) v.push_back(fd);
    g_epoll_has[epfd].store(v.empty() ? 0 : 1, std::memory_order_release);
}
std::mutex g_table_mutex;  // guards refs and the slots' changes (lookups read the slot without it)
thread_local int t_inside = 0;
const bool g_trace = std::getenv("OPENRDMA_SOCKETS_TRACE") != nullptr;  // the layer's own calls pass through

struct Inside {
    Inside() { ++t_inside; }
    ~Inside() { --t_inside; }
};

inline Sock *lookup(int fd) noexcept {
    if (fd < 0 || fd >= kMaxFd || t_inside != 0) return nullptr;
    return g_table[fd].load(std::memory_order_acquire);
}

void put(int fd, Sock *s) {
    if (fd < 0 || fd >= kMaxFd) return;
    g_table[fd].store(s, std::memory_order_release);
}

// Removes descriptor @p fd from the table; returns its socket when this was its last descriptor.
std::unique_ptr<Sock> drop(int fd) {
    if (fd < 0 || fd >= kMaxFd) return nullptr;
    std::lock_guard lock(g_table_mutex);
    Sock *s = g_table[fd].exchange(nullptr, std::memory_order_acq_rel);
    if (s == nullptr) return nullptr;
    if (--s->refs > 0) return nullptr;
    return std::unique_ptr<Sock>(s);
}

// Makes the descriptor @p make() duplicates name @p s too (dup, dup2, dup3, F_DUPFD), under the table's lock so
// that a close racing it cannot free @p s in between.
template <class Make>
int duplicate(Sock *s, Make make) {
    std::lock_guard lock(g_table_mutex);
    const int nfd = make();
    if (s != nullptr && nfd >= 0 && nfd < kMaxFd) {
        ++s->refs;
        put(nfd, s);
    }
    return nfd;
}

// The peer's address of converted socket @p s, as recvfrom and recvmsg give it (truncated to *@p len bytes).
void peer_address(const Sock &s, void *out, socklen_t *len) {
    std::memcpy(out, &s.peer, std::min<socklen_t>(*len, s.peer_len));
    *len = s.peer_len;
}

// The application's last descriptor of @p s went: the stream finishes in the background.
std::mutex g_closing_mutex;
std::vector<std::weak_ptr<Stream>> g_closing;  // closed by the program, maybe still sending (for the exit handler)

void release(std::unique_ptr<Sock> s) {
    if (!s) return;
    Inside in;
    if (s->stream) {
        s->stream->close(s->linger0);
        if (!s->linger0) {
            if (!s->nonblock) {
                // A blocking close waits (a while) for the queued bytes to go, as a lingering TCP close would: a
                // forked server's child that closes and exits must not take its answer's tail with it.
                s->stream->flush(std::chrono::seconds(5));
            } else {
                std::lock_guard lock(g_closing_mutex);
                std::erase_if(g_closing, [](const std::weak_ptr<Stream> &w) { return w.expired(); });
                g_closing.push_back(s->stream);
            }
        }
    }
    s->stream.reset();
    s->mirror.reset();
    if (s->tcp >= 0) real().close(s->tcp);
}

bool is_tcp(int domain, int type, int protocol) {
    return (domain == AF_INET || domain == AF_INET6) && (type & 0xff) == SOCK_STREAM &&
           (protocol == 0 || protocol == IPPROTO_TCP);
}

// Moves the application's descriptor @p fd onto the mirror, keeping its epoll registrations.
bool swap_to_mirror(int fd, Sock &s) {
    const int fdflags = real().fcntl(fd, F_GETFD);
    for (const auto &r : s.epolls) (void)real().epoll_ctl(r.epfd, EPOLL_CTL_DEL, fd, nullptr);
    if (real().dup3(s.mirror->app_end(), fd, (fdflags & FD_CLOEXEC) != 0 ? O_CLOEXEC : 0) < 0) return false;
    for (auto r : s.epolls) (void)real().epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &r.ev);
    return true;
}

// The application's descriptor @p fd becomes @p stream's mirror (the TCP socket kept as s.tcp).
template <typename Fail>
void finish_conversion(int fd, Sock &s, bool initiator, std::shared_ptr<Stream> stream, Fail &fail) {
    Layer *layer = Layer::get();
    s.tcp = real().fcntl(fd, F_DUPFD_CLOEXEC, 0);
    auto mirror = std::make_unique<Mirror>();
    if (s.tcp < 0 || !mirror->open()) {
        stream->close(true);
        return fail(Reason::convert_failed, std::string("no descriptor: ") + std::strerror(errno));
    }
    s.stream = std::move(stream);
    s.mirror = std::move(mirror);
    if (!swap_to_mirror(fd, s)) {
        s.stream->close(true);
        s.stream.reset();
        return fail(Reason::convert_failed, std::string("dup3: ") + std::strerror(errno));
    }
    s.peer_len = sizeof s.peer;
    if (real().getpeername(s.tcp, reinterpret_cast<sockaddr *>(&s.peer), &s.peer_len) != 0) s.peer_len = 0;
    s.mode = Sock::Mode::rdma;
    if (!s.epolls.empty()) s.stream->watch(s.mirror.get());
    for (const auto &r : s.epolls) epoll_note(r.epfd, fd, true);
    layer->note(fd, Reason::rdma, !initiator, s.stream, s.tcp);
}

// Converts connected socket @p fd (the peer runs the layer). Over a link to the peer's process when there is one
// (link.hpp), else through the kAL. An end that cannot (no RNIC, no memory or QP left) declines with MPA's frames and
// both ends stay TCP (decline.hpp); so does a responder whose initiator declined. Any other failure shuts the
// connection down: the peer, which converts too, must not read this end's bytes as MPA nor wait for them.
void convert(int fd, Sock &s, bool initiator) {
    Inside in;
    Layer *layer = Layer::get();
    auto fail = [&](Reason r, const std::string &why) {
        RDMA_LOG_WARN(kComponent, "descriptor %d: the peer runs the layer but %s: the connection is reset", fd,
                      why.c_str());
        layer->note(fd, r, !initiator);
        const linger l{1, 0};
        (void)real().setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        (void)real().shutdown(fd, SHUT_RDWR);
        s.mode = Sock::Mode::plain;  // a kernel socket again, reset: the application sees what TCP shows
    };
    auto decline = [&](Reason r, const std::string &why) {
        auto done = initiator ? decline_as_initiator(fd, kDeclineWait) : decline_request(fd, kDeclineWait);
        if (!done) return fail(Reason::convert_failed, why + ", and declining failed (" + done.error().message() + ")");
        RDMA_LOG_WARN(kComponent, "descriptor %d: the peer runs the layer but %s: declined, the connection stays TCP",
                      fd, why.c_str());
        layer->note(fd, r, !initiator);
        s.mode = Sock::Mode::plain;
    };
    auto device = layer->device_for(fd);
    if (!device) return decline(Reason::no_rnic, device.error().message());
    // Over a link: the initiator says hello when it holds a link to the peer's address; a responder answers any
    // hello, a link it knows with a channel, one it does not with "unknown" (then MPA follows, as below).
    int bell = -1;
    std::string link_why;
    const auto link_until = std::chrono::steady_clock::now() + kDeclineWait;
    LinkOutcome over = LinkOutcome::unknown;
    if (!initiator) {
        over = link_respond(fd, bell, link_until, link_why);
    } else if (std::shared_ptr<Link> link = Links::get().enabled() ? Links::get().to(peer_key(fd)) : nullptr) {
        over = link_initiate(fd, *link, bell, link_until, link_why);
        if (over == LinkOutcome::unknown) {
            RDMA_LOG_INFO(kComponent, "descriptor %d: the peer's process holds no such link (another process took "
                                      "the connection): converting through the kAL", fd);
        }
    }
    if (over == LinkOutcome::failed) return fail(Reason::convert_failed, link_why);
    if (over == LinkOutcome::channel) {
        auto linked = Stream::over_link(*device, layer->shape(), bell);
        if (!linked) return fail(Reason::convert_failed, linked.error().message());
        return finish_conversion(fd, s, initiator, std::move(*linked), fail);
    }
    auto stream = Stream::prepare(*device, layer->shape());
    if (!stream) return decline(Reason::declined, stream.error().message());
    if (!initiator) {
        // The initiator's request is looked at first: an initiator that could not convert declined in it.
        std::string why;
        switch (peek_request(fd, kDeclineWait, why)) {
            case Request::converts: break;
            case Request::declines:
                if (auto d = decline_request(fd, kDeclineWait); !d) return fail(Reason::convert_failed, d.error().message());
                layer->note(fd, Reason::peer_declined, true);
                s.mode = Sock::Mode::plain;
                return;
            case Request::none: return fail(Reason::convert_failed, "no MPA request came: " + why);
        }
    }
    if (auto ok = (*stream)->begin(fd, initiator); !ok) return fail(Reason::convert_failed, ok.error().message());
    finish_conversion(fd, s, initiator, std::move(*stream), fail);
}

// The peer declined the conversion of @p s (its stream says so): the application's descriptor @p fd names the TCP
// socket again, with its epoll registrations and the blocking mode the application set (the kAL made the socket
// non-blocking for MPA), and its calls go to the kernel from now on.
void fall_back(int fd, Sock &s) {
    Layer *layer = Layer::get();
    layer->revise(s.stream.get(), Reason::peer_declined);
    const int fdflags = real().fcntl(fd, F_GETFD);
    for (const auto &r : s.epolls) {
        (void)real().epoll_ctl(r.epfd, EPOLL_CTL_DEL, fd, nullptr);
        epoll_note(r.epfd, fd, false);
    }
    const int fl = real().fcntl(s.tcp, F_GETFL);
    if (fl >= 0) (void)real().fcntl(s.tcp, F_SETFL, s.nonblock ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
    (void)real().dup3(s.tcp, fd, (fdflags & FD_CLOEXEC) != 0 ? O_CLOEXEC : 0);
    for (auto r : s.epolls) (void)real().epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &r.ev);
    real().close(s.tcp);
    s.tcp = -1;
    s.stream->close(false);
    s.stream.reset();
    s.mirror.reset();
    s.mode = Sock::Mode::plain;
}

// A marked client's connection is established (or failed): decide.
void decide_client(int fd, Sock &s) {
    Layer *layer = Layer::get();
    const Peer p = layer->peer(fd);
    if (p == Peer::layer) {
        convert(fd, s, true);
        return;
    }
    layer->note(fd, Reason::peer_plain, false);
    s.mode = Sock::Mode::plain;
}

// Brings @p s to its steady mode before I/O: a finished non-blocking connect decided, an accepted connection
// converted. Returns the mode.
Sock::Mode settle(int fd, Sock &s) {
    if (s.mode == Sock::Mode::connecting) {
        pollfd p{fd, POLLOUT, 0};
        if (real().poll(&p, 1, 0) == 1) {
            sockaddr_storage peer{};
            socklen_t len = sizeof peer;
            if (real().getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &len) == 0) {
                decide_client(fd, s);
            } else {
                s.mode = Sock::Mode::fresh;  // the connect failed: SO_ERROR tells the application
            }
        }
    } else if (s.mode == Sock::Mode::accepted) {
        convert(fd, s, false);
    } else if (s.mode == Sock::Mode::rdma && s.stream && s.stream->state() == Stream::State::declined) {
        Inside in;
        fall_back(fd, s);
    }
    return s.mode;
}

// The socket behind @p fd when the layer serves its bytes (settled first), else null.
Sock *serving(int fd) {
    Sock *s = lookup(fd);
    if (s == nullptr) return nullptr;
    Sock::Mode m;
    {
        std::lock_guard lock(s->mutex);
        m = settle(fd, *s);
    }
    if (m == Sock::Mode::plain) {
        release(drop(fd));  // the kernel's socket from now on: its calls no longer come here
        return nullptr;
    }
    return m == Sock::Mode::rdma || m == Sock::Mode::orphan ? s : nullptr;
}

ssize_t result(ssize_t r) {
    if (r < 0) {
        errno = static_cast<int>(-r);
        return -1;
    }
    return r;
}

// The peer declined while the caller waited in the stream: the descriptor goes back to the TCP socket (settle()),
// and the call is made there.
msghdr settle_declined(int fd, Sock &s, std::span<const iovec> iov) {
    {
        std::lock_guard lock(s.mutex);
        settle(fd, s);
    }
    msghdr m{};
    m.msg_iov = const_cast<iovec *>(iov.data());
    m.msg_iovlen = iov.size();
    return m;
}

ssize_t do_send(int fd, Sock &s, std::span<const iovec> iov, int flags) {
    if (s.mode == Sock::Mode::orphan) return result(-EIO);
    ssize_t r;
    {
        Inside in;
        r = s.stream->send(iov, s.nonblock || (flags & MSG_DONTWAIT) != 0);
    }
    if (r == Stream::kDeclined) {
        const msghdr m = settle_declined(fd, s, iov);
        return real().sendmsg(fd, &m, flags);
    }
    if (r == -EPIPE && (flags & MSG_NOSIGNAL) == 0) ::raise(SIGPIPE);
    return result(r);
}

ssize_t do_recv(int fd, Sock &s, std::span<const iovec> iov, int flags) {
    if (s.mode == Sock::Mode::orphan) return result(-EIO);
    ssize_t r;
    {
        Inside in;
        r = s.stream->recv(iov, flags, s.nonblock || (flags & MSG_DONTWAIT) != 0);
    }
    if (r == Stream::kDeclined) {
        msghdr m = settle_declined(fd, s, iov);
        return real().recvmsg(fd, &m, flags);
    }
    return result(r);
}

void forked_child() {
    if (Layer *l = Layer::get()) l->forked_child();
    Links::forget_in_child();
    // Converted streams are the parent's: in the child their descriptors serve nothing.
    for (auto &slot : g_table) {
        Sock *s = slot.load(std::memory_order_relaxed);
        if (s == nullptr) continue;
        new (&s->mutex) std::mutex();
        if (s->mode == Sock::Mode::rdma) {
            new std::shared_ptr<Stream>(std::move(s->stream));  // not destroyed: it is not this process's
            s->mode = Sock::Mode::orphan;
        }
    }
    new (&g_table_mutex) std::mutex();
}

// Sockets inherited across exec are served as if this program had made them: an established connection whose
// peer runs the layer and that the previous program had not converted yet (an accepted one converts on first use:
// inetd's handlers, a forking server's child that execs a worker), and a marked listener (a server that executes its
// new binary keeping its listeners). Otherwise the peer, which converts, would be answered by the kernel's TCP and
// its MPA request read as data. A converted connection's descriptor is its mirror, not a TCP socket: its stream
// ended with the program that held it, as a process's RDMA connections do at exec. The detection map says which
// is which: marked by the program before, the peer's answer, and whether this end connected or was accepted.
void adopt_inherited() {
    std::vector<std::pair<ino_t, int>> tcp;  // the socket (its inode: dup'd descriptors share it), the descriptor
    if (DIR *d = ::opendir("/proc/self/fd"); d != nullptr) {
        const int own = ::dirfd(d);
        while (const dirent *e = ::readdir(d)) {
            char *end = nullptr;
            const long fd = std::strtol(e->d_name, &end, 10);
            if (end == e->d_name || *end != '\0' || fd == own || fd < 0 || fd >= kMaxFd) continue;
            struct stat st{};
            if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
            int v[3] = {0, 0, 0};
            const int opts[3] = {SO_DOMAIN, SO_TYPE, SO_PROTOCOL};
            bool ok = true;
            for (int i = 0; i < 3 && ok; ++i) {
                socklen_t l = sizeof v[i];
                ok = real().getsockopt(static_cast<int>(fd), SOL_SOCKET, opts[i], &v[i], &l) == 0;
            }
            if (ok && is_tcp(v[0], v[1], v[2])) tcp.emplace_back(st.st_ino, static_cast<int>(fd));
        }
        ::closedir(d);
    }
    if (tcp.empty()) return;  // the usual start: nothing inherited, nothing asked of the kAL
    Layer *layer = Layer::get();
    if (layer == nullptr) return;
    Inside in;
    std::sort(tcp.begin(), tcp.end());
    for (size_t i = 0, next = 0; i < tcp.size(); i = next) {
        next = i + 1;
        while (next < tcp.size() && tcp[next].first == tcp[i].first) ++next;
        const int fd = tcp[i].second;  // one Sock for every descriptor of the socket, as dup() makes
        const krdma::PeerMark m = layer->look(fd);
        if (m.marked == 0) continue;
        int listening = 0;
        socklen_t l = sizeof listening;
        (void)real().getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l);
        Sock::Mode mode;
        if (listening != 0) {
            mode = Sock::Mode::listening;
        } else if (m.peer == 1 && m.role == 2) {
            mode = Sock::Mode::accepted;
        } else if (m.peer == 0 || (m.peer == 1 && m.role == 1)) {
            mode = Sock::Mode::connecting;  // decided (and converted, as the initiator) once established
        } else {
            continue;  // a plain peer, or a krdmad that does not record roles: TCP, as before
        }
        auto *s = new Sock();
        s->mode = mode;
        s->nonblock = (real().fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
        s->refs = static_cast<int>(next - i);
        for (size_t k = i; k < next; ++k) put(tcp[k].second, s);
        if (g_trace) std::fprintf(stderr, "sockets: descriptor %d inherited (mode %d)\n", fd, static_cast<int>(mode));
    }
}

[[gnu::constructor]] void init() {
    (void)real();
    ::pthread_atfork(nullptr, nullptr, &forked_child);
    adopt_inherited();
}

// At exit, converted connections end in order (the bytes written go first, then the end of stream), as the
// kernel would close a process's TCP sockets, instead of breaking when the process's device link goes.
[[gnu::destructor]] void fini() {
    if (Layer *l = Layer::get()) l->unpublish();
    std::vector<std::shared_ptr<Stream>> open;
    for (auto &slot : g_table) {
        Sock *s = slot.load(std::memory_order_acquire);
        if (s != nullptr && s->mode == Sock::Mode::rdma && s->stream) open.push_back(s->stream);
    }
    {
        // And the ones the program closed without waiting (non-blocking) that are still sending.
        std::lock_guard lock(g_closing_mutex);
        for (auto &w : g_closing) {
            if (auto st = w.lock()) open.push_back(st);
        }
    }
    if (open.empty()) return;
    Inside in;
    for (auto &st : open) (void)st->shutdown(SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (auto &st : open) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() > 0) st->flush(left);
    }
}

// What one poll, select or epoll_wait works with, kept by the thread so that a call allocates nothing once the
// vectors have grown. A call made by a signal handler that interrupted one of them gets vectors of its own.
struct Scratch {
    std::vector<pollfd> set;                          // select's sets as a poll set
    std::vector<pollfd> all;                          // the kernel's descriptors and the streams' notifications
    std::vector<std::pair<size_t, Stream *>> streams; // converted sockets among the caller's
    std::vector<int> fds;                             // an epoll instance's converted sockets
};
thread_local Scratch t_scratch;
thread_local bool t_scratch_busy = false;

// The thread's Scratch, or @p own when the thread's is in use (a signal handler's call).
class ScratchUse {
public:
    explicit ScratchUse(Scratch &own) noexcept : mine_(!t_scratch_busy), s_(mine_ ? t_scratch : own) {
        t_scratch_busy = true;
    }
    ~ScratchUse() {
        if (mine_) t_scratch_busy = false;
    }
    ScratchUse(const ScratchUse &) = delete;
    ScratchUse &operator=(const ScratchUse &) = delete;
    Scratch &get() noexcept { return s_; }

private:
    bool mine_;
    Scratch &s_;
};

int poll_fds(pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask, bool use_ppoll, Scratch &sc);

}  // namespace

namespace openrdma::sockets {

std::shared_ptr<Stream> stream_of(int fd, const char **why, bool *nonblock) {
    if (fd < 0 || fd >= kMaxFd) {
        if (why != nullptr) *why = "bad-descriptor";
        return nullptr;
    }
    Sock *s = g_table[fd].load(std::memory_order_acquire);
    if (s == nullptr) {
        if (why != nullptr) *why = "not-converted";
        return nullptr;
    }
    std::lock_guard lock(s->mutex);
    settle(fd, *s);
    if (s->mode != Sock::Mode::rdma || !s->stream) {
        if (why != nullptr) *why = s->mode == Sock::Mode::orphan ? "forked" : "not-converted";
        return nullptr;
    }
    if (!s->stream->has_qp()) {  // converted over a link (link.hpp): its byte channel, no QP to post on
        if (why != nullptr) *why = "byte-channel-only";
        return nullptr;
    }
    if (nonblock != nullptr) *nonblock = s->nonblock;
    return s->stream;
}

}  // namespace openrdma::sockets

extern "C" {

OPENRDMA_EXPORT int socket(int domain, int type, int protocol) {
    const int fd = real().socket(domain, type, protocol);
    if (fd < 0 || fd >= kMaxFd || t_inside != 0 || !is_tcp(domain, type, protocol)) return fd;
    if (Layer::get() == nullptr) return fd;
    auto *s = new Sock();
    s->nonblock = (type & SOCK_NONBLOCK) != 0;
    put(fd, s);
    return fd;
}

OPENRDMA_EXPORT int connect(int fd, const sockaddr *addr, socklen_t len) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().connect(fd, addr, len);
    std::unique_lock lock(s->mutex);
    if (s->mode != Sock::Mode::fresh) return real().connect(fd, addr, len);
    Layer *layer = Layer::get();
    Reason why = Reason::policy;
    bool marked = false;
    {
        Inside in;
        marked = layer->policy().accelerate(addr, len) && layer->mark(fd, &why);
    }
    if (!marked) {
        layer->count(why);
        lock.unlock();
        release(drop(fd));
        return real().connect(fd, addr, len);
    }
    const int rc = real().connect(fd, addr, len);
    const int err = errno;
    if (rc == 0) {
        decide_client(fd, *s);
    } else if (err == EINPROGRESS) {
        s->mode = Sock::Mode::connecting;
    }
    const bool plain = s->mode == Sock::Mode::plain;
    lock.unlock();
    if (plain) release(drop(fd));
    errno = err;
    return rc;
}

OPENRDMA_EXPORT int listen(int fd, int backlog) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().listen(fd, backlog);
    std::unique_lock lock(s->mutex);
    if (s->mode == Sock::Mode::fresh) {
        Layer *layer = Layer::get();
        sockaddr_storage local{};
        socklen_t len = sizeof local;
        Reason why = Reason::policy;
        Inside in;
        if (real().getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0 &&
            layer->policy().accelerate(reinterpret_cast<sockaddr *>(&local), len) && layer->mark(fd, &why)) {
            s->mode = Sock::Mode::listening;
        } else {
            layer->count(why);
        }
    }
    return real().listen(fd, backlog);
}

OPENRDMA_EXPORT int accept4(int fd, sockaddr *addr, socklen_t *len, int flags) {
    const int nfd = real().accept4(fd, addr, len, flags);
    Sock *s = lookup(fd);
    if (nfd < 0 || nfd >= kMaxFd || s == nullptr || s->mode != Sock::Mode::listening) return nfd;
    Layer *layer = Layer::get();
    Peer p;
    {
        Inside in;
        p = layer->peer(nfd);
    }
    if (p != Peer::layer) {
        Inside in;
        layer->note(nfd, Reason::peer_plain, true);
        return nfd;
    }
    auto *a = new Sock();
    a->mode = Sock::Mode::accepted;
    a->nonblock = (flags & SOCK_NONBLOCK) != 0;
    put(nfd, a);
    return nfd;
}

OPENRDMA_EXPORT int accept(int fd, sockaddr *addr, socklen_t *len) { return accept4(fd, addr, len, 0); }

OPENRDMA_EXPORT int close(int fd) {
    Sock *was = lookup(fd);
    if (was == nullptr) return real().close(fd);
    {
        std::lock_guard lock(was->mutex);
        for (const auto &r : was->epolls) epoll_note(r.epfd, fd, false);
    }
    auto s = drop(fd);
    // The descriptor goes first: the mirror's other references go with the socket, after it.
    const int rc = real().close(fd);
    const int err = errno;
    release(std::move(s));
    errno = err;
    return rc;
}

OPENRDMA_EXPORT int shutdown(int fd, int how) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().shutdown(fd, how);
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
        errno = EINVAL;
        return -1;
    }
    if (s->mode == Sock::Mode::orphan) return real().shutdown(s->tcp, how);
    Inside in;
    return s->stream->shutdown(how);
}

OPENRDMA_EXPORT ssize_t read(int fd, void *buf, size_t n) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().read(fd, buf, n);
    const iovec v{buf, n};
    return do_recv(fd, *s, {&v, 1}, 0);
}

OPENRDMA_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().recv(fd, buf, n, flags);
    const iovec v{buf, n};
    return do_recv(fd, *s, {&v, 1}, flags);
}

OPENRDMA_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, sockaddr *from, socklen_t *fromlen) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().recvfrom(fd, buf, n, flags, from, fromlen);
    if (from != nullptr && fromlen != nullptr) peer_address(*s, from, fromlen);
    const iovec v{buf, n};
    return do_recv(fd, *s, {&v, 1}, flags);
}

OPENRDMA_EXPORT ssize_t readv(int fd, const iovec *iov, int cnt) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().readv(fd, iov, cnt);
    if (cnt < 0 || cnt > IOV_MAX) return result(-EINVAL);
    return do_recv(fd, *s, {iov, static_cast<size_t>(cnt)}, 0);
}

OPENRDMA_EXPORT ssize_t recvmsg(int fd, msghdr *m, int flags) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().recvmsg(fd, m, flags);
    if (m->msg_iovlen > IOV_MAX) return result(-EINVAL);
    if (m->msg_name != nullptr) peer_address(*s, m->msg_name, &m->msg_namelen);
    m->msg_controllen = 0;
    m->msg_flags = 0;
    return do_recv(fd, *s, {m->msg_iov, m->msg_iovlen}, flags);
}

OPENRDMA_EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().write(fd, buf, n);
    const iovec v{const_cast<void *>(buf), n};
    return do_send(fd, *s, {&v, 1}, 0);
}

OPENRDMA_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().send(fd, buf, n, flags);
    const iovec v{const_cast<void *>(buf), n};
    return do_send(fd, *s, {&v, 1}, flags);
}

OPENRDMA_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const sockaddr *to, socklen_t tolen) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().sendto(fd, buf, n, flags, to, tolen);
    (void)to;  // as Linux's TCP: the address of a connected stream socket's sendto is ignored
    (void)tolen;
    const iovec v{const_cast<void *>(buf), n};
    return do_send(fd, *s, {&v, 1}, flags);
}

OPENRDMA_EXPORT ssize_t writev(int fd, const iovec *iov, int cnt) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().writev(fd, iov, cnt);
    if (cnt < 0 || cnt > IOV_MAX) return result(-EINVAL);
    return do_send(fd, *s, {iov, static_cast<size_t>(cnt)}, 0);
}

OPENRDMA_EXPORT ssize_t sendmsg(int fd, const msghdr *m, int flags) {
    Sock *s = serving(fd);
    if (s == nullptr) return real().sendmsg(fd, m, flags);
    if (m->msg_iovlen > IOV_MAX) return result(-EINVAL);
    return do_send(fd, *s, {m->msg_iov, m->msg_iovlen}, flags);
}

static ssize_t sendfile_to(int out_fd, Sock &s, int in_fd, off_t *offset, size_t count) {
    // Through a buffer: the file's pages are not registered memory. The thread's own, made once: a server that sends
    // files calls this per response.
    thread_local std::vector<uint8_t> buf(256 * 1024);
    size_t done = 0;
    while (done < count) {
        const size_t want = std::min(buf.size(), count - done);
        const ssize_t got = offset != nullptr ? ::pread(in_fd, buf.data(), want, *offset + static_cast<off_t>(done))
                                              : real().read(in_fd, buf.data(), want);
        if (got < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
        if (got == 0) break;
        const iovec v{buf.data(), static_cast<size_t>(got)};
        const ssize_t put = do_send(out_fd, s, {&v, 1}, 0);
        if (put < 0) {
            if (offset == nullptr) (void)::lseek(in_fd, -got, SEEK_CUR);
            if (done > 0) break;
            return -1;
        }
        done += static_cast<size_t>(put);
        if (put < got) {
            if (offset == nullptr) (void)::lseek(in_fd, -(got - put), SEEK_CUR);
            break;
        }
    }
    if (offset != nullptr) *offset += static_cast<off_t>(done);
    return static_cast<ssize_t>(done);
}

OPENRDMA_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    Sock *s = serving(out_fd);
    if (s == nullptr) return real().sendfile(out_fd, in_fd, offset, count);
    return sendfile_to(out_fd, *s, in_fd, offset, count);
}

OPENRDMA_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count) {
    Sock *s = serving(out_fd);
    if (s == nullptr) return real().sendfile64(out_fd, in_fd, offset, count);
    return sendfile_to(out_fd, *s, in_fd, offset, count);
}

OPENRDMA_EXPORT int getsockname(int fd, sockaddr *addr, socklen_t *len) {
    Sock *s = lookup(fd);
    if (s == nullptr || s->tcp < 0) return real().getsockname(fd, addr, len);
    return real().getsockname(s->tcp, addr, len);
}

OPENRDMA_EXPORT int getpeername(int fd, sockaddr *addr, socklen_t *len) {
    Sock *s = lookup(fd);
    if (s == nullptr || s->tcp < 0) return real().getpeername(fd, addr, len);
    return real().getpeername(s->tcp, addr, len);
}

OPENRDMA_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().getsockopt(fd, level, name, val, len);
    std::unique_lock lock(s->mutex);
    settle(fd, *s);
    if (s->tcp < 0) return real().getsockopt(fd, level, name, val, len);
    if (level == SOL_SOCKET && name == SO_ERROR && s->stream && val != nullptr && len != nullptr &&
        *len >= sizeof(int)) {
        Inside in;
        *static_cast<int *>(val) = s->stream->take_error();
        *len = sizeof(int);
        return 0;
    }
    return real().getsockopt(s->tcp, level, name, val, len);
}

OPENRDMA_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().setsockopt(fd, level, name, val, len);
    if (level == SOL_SOCKET && name == SO_LINGER && val != nullptr && len >= sizeof(linger)) {
        const auto *l = static_cast<const linger *>(val);
        s->linger0 = l->l_onoff != 0 && l->l_linger == 0;
    }
    return real().setsockopt(s->tcp >= 0 ? s->tcp : fd, level, name, val, len);
}

OPENRDMA_EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    const long arg = va_arg(ap, long);
    va_end(ap);
    Sock *s = lookup(fd);
    if (s == nullptr || (cmd != F_SETFL && cmd != F_GETFL && cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)) {
        return real().fcntl(fd, cmd, arg);
    }
    if (cmd == F_SETFL) {
        s->nonblock = (arg & O_NONBLOCK) != 0;
        // The mirror stays non-blocking underneath: the layer never blocks on it.
        return real().fcntl(fd, cmd, s->mode == Sock::Mode::rdma ? (arg | O_NONBLOCK) : arg);
    }
    if (cmd == F_GETFL) {
        const int fl = real().fcntl(fd, cmd);
        if (fl < 0 || s->mode != Sock::Mode::rdma) return fl;
        return s->nonblock ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    }
    return duplicate(s, [&] { return real().fcntl(fd, cmd, arg); });
}

OPENRDMA_EXPORT int ioctl(int fd, unsigned long req, ...) {
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    Sock *s = lookup(fd);
    if (s == nullptr) return real().ioctl(fd, req, arg);
    if (req == FIONBIO && arg != nullptr) s->nonblock = *static_cast<int *>(arg) != 0;
    if (req == FIONREAD || req == TIOCOUTQ) {
        s = serving(fd);
        if (s != nullptr && s->stream && arg != nullptr) {
            Inside in;
            *static_cast<int *>(arg) = req == FIONREAD ? static_cast<int>(s->stream->readable_bytes()) : 0;
            return 0;
        }
    }
    if (req == FIONBIO && s->mode == Sock::Mode::rdma) return 0;  // the mirror stays non-blocking
    return real().ioctl(fd, req, arg);
}

static int dup_onto(int oldfd, int newfd, int flags, bool three) {
    Sock *s = lookup(oldfd);
    if (s == nullptr && lookup(newfd) == nullptr) {
        return three ? real().dup3(oldfd, newfd, flags) : real().dup2(oldfd, newfd);
    }
    if (oldfd == newfd) return three ? real().dup3(oldfd, newfd, flags) : real().dup2(oldfd, newfd);
    auto old = drop(newfd);  // the descriptor dup2 closes
    const int rc = duplicate(s, [&] { return three ? real().dup3(oldfd, newfd, flags) : real().dup2(oldfd, newfd); });
    release(std::move(old));
    return rc;
}

OPENRDMA_EXPORT int dup(int fd) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().dup(fd);
    return duplicate(s, [&] { return real().dup(fd); });
}

OPENRDMA_EXPORT int dup2(int oldfd, int newfd) { return dup_onto(oldfd, newfd, 0, false); }
OPENRDMA_EXPORT int dup3(int oldfd, int newfd, int flags) { return dup_onto(oldfd, newfd, flags, true); }

OPENRDMA_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event *ev) {
    Sock *s = lookup(fd);
    if (s == nullptr) return real().epoll_ctl(epfd, op, fd, ev);
    std::lock_guard lock(s->mutex);
    settle(fd, *s);
    const int rc = real().epoll_ctl(epfd, op, fd, ev);
    if (rc != 0) return rc;
    auto it = std::find_if(s->epolls.begin(), s->epolls.end(), [&](const Sock::Reg &r) { return r.epfd == epfd; });
    if (op == EPOLL_CTL_DEL) {
        if (it != s->epolls.end()) s->epolls.erase(it);
    } else if (ev != nullptr) {
        if (it != s->epolls.end()) {
            it->ev = *ev;
        } else {
            s->epolls.push_back(Sock::Reg{epfd, *ev});
        }
    }
    if (s->mode == Sock::Mode::rdma && !s->epolls.empty()) {
        Inside in;
        s->stream->watch(s->mirror.get());
    }
    if (s->mode == Sock::Mode::rdma) epoll_note(epfd, fd, op != EPOLL_CTL_DEL);
    return rc;
}

// An epoll instance that holds converted sockets is answered in user space while any of them is ready: their
// readiness is the streams', read without a system call, and the kernel is asked only (without waiting) for its
// own descriptors. Before it sleeps it spins a while on the streams: the answer to a small message comes in
// microseconds, the background thread's wake-up and the mirror's in tens. Asleep, the mirrors wake it.
// Returns the events found (0: none, sleep in the kernel).
static int epoll_user(int epfd, epoll_event *events, int max, int timeout, const sigset_t *mask, bool pwait) {
    if (max <= 0 || epfd < 0 || epfd >= kMaxFd || g_epoll_has[epfd].load(std::memory_order_acquire) == 0 ||
        t_inside != 0) {
        return 0;
    }
    Scratch own;
    ScratchUse use(own);
    std::vector<int> &fds = use.get().fds;
    fds.clear();
    {
        std::lock_guard lock(g_epoll_mutex);
        auto it = g_epoll_fds.find(epfd);
        if (it != g_epoll_fds.end()) fds.assign(it->second.begin(), it->second.end());
    }
    Layer *layer = Layer::get();
    if (layer == nullptr) return 0;
    Inside in;
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout == 0 ? 0 : layer->shape().spin_ns);
    for (;;) {
        int n = 0;
        for (int fd : fds) {
            if (n == max) break;
            Sock *s = fd >= 0 && fd < kMaxFd ? g_table[fd].load(std::memory_order_acquire) : nullptr;
            if (s == nullptr || s->mode != Sock::Mode::rdma || !s->stream) continue;
            epoll_event want{};
            bool found = false;
            {
                std::lock_guard lock(s->mutex);
                for (const auto &r : s->epolls) {
                    if (r.epfd == epfd) {
                        want = r.ev;
                        found = true;
                    }
                }
            }
            if (!found) continue;
            const uint32_t ready = s->stream->refresh() & (want.events | EPOLLERR | EPOLLHUP);
            // A stream only writable, asked for output alongside input, waits like the kernel's: reported, since
            // writability is readiness too.
            if (ready != 0) events[n++] = epoll_event{ready, want.data};
        }
        if (n > 0) {
            // The kernel's own descriptors, without waiting; the mirrors among them are not reported twice.
            epoll_event more[64];
            const int room = std::min(max - n, 64);
            const int k = pwait ? real().epoll_pwait(epfd, more, room, 0, mask) : real().epoll_wait(epfd, more, room, 0);
            for (int i = 0; i < k; ++i) {
                bool dup = false;
                for (int j = 0; j < n && !dup; ++j) dup = events[j].data.u64 == more[i].data.u64;
                if (!dup) events[n++] = more[i];
            }
            return n;
        }
        if (std::chrono::steady_clock::now() >= until) return 0;
    }
}

OPENRDMA_EXPORT int epoll_wait(int epfd, epoll_event *events, int max, int timeout) {
    if (const int n = epoll_user(epfd, events, max, timeout, nullptr, false); n > 0) return n;
    return real().epoll_wait(epfd, events, max, timeout);
}

OPENRDMA_EXPORT int epoll_pwait(int epfd, epoll_event *events, int max, int timeout, const sigset_t *mask) {
    if (const int n = epoll_user(epfd, events, max, timeout, mask, true); n > 0) return n;
    return real().epoll_pwait(epfd, events, max, timeout, mask);
}

OPENRDMA_EXPORT int poll(pollfd *fds, nfds_t n, int timeout) {
    Scratch own;
    ScratchUse sc(own);
    return poll_fds(fds, n, timeout, nullptr, false, sc.get());
}

OPENRDMA_EXPORT int ppoll(pollfd *fds, nfds_t n, const timespec *ts, const sigset_t *mask) {
    const int ms = ts == nullptr ? -1 : static_cast<int>(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
    Scratch own;
    ScratchUse sc(own);
    return poll_fds(fds, n, ms, mask, true, sc.get());
}

static int select_fds(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout, const sigset_t *mask, bool pselect_) {
    bool ours = false;
    for (int fd = 0; fd < nfds && !ours; ++fd) {
        if ((r != nullptr && FD_ISSET(fd, r)) || (w != nullptr && FD_ISSET(fd, w))) ours = lookup(fd) != nullptr;
    }
    if (!ours) return -2;  // the caller passes it on untouched
    Scratch own;
    ScratchUse use(own);
    Scratch &sc = use.get();
    std::vector<pollfd> &p = sc.set;
    p.clear();
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = 0;
        if (r != nullptr && FD_ISSET(fd, r)) ev |= POLLIN;
        if (w != nullptr && FD_ISSET(fd, w)) ev |= POLLOUT;
        if (e != nullptr && FD_ISSET(fd, e)) ev |= POLLPRI;
        if (ev != 0) p.push_back(pollfd{fd, ev, 0});
    }
    const int rc = poll_fds(p.data(), p.size(), timeout, mask, pselect_, sc);
    if (rc < 0) return rc;
    if (r != nullptr) FD_ZERO(r);
    if (w != nullptr) FD_ZERO(w);
    if (e != nullptr) FD_ZERO(e);
    int count = 0;
    for (const auto &q : p) {
        if (r != nullptr && (q.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (q.events & POLLIN) != 0) {
            FD_SET(q.fd, r);
            ++count;
        }
        if (w != nullptr && (q.revents & (POLLOUT | POLLERR)) != 0 && (q.events & POLLOUT) != 0) {
            FD_SET(q.fd, w);
            ++count;
        }
        if (e != nullptr && (q.revents & POLLPRI) != 0) {
            FD_SET(q.fd, e);
            ++count;
        }
    }
    return count;
}

OPENRDMA_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, timeval *tv) {
    const int ms = tv == nullptr ? -1 : static_cast<int>(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000);
    const int rc = select_fds(nfds, r, w, e, ms, nullptr, false);
    return rc == -2 ? real().select(nfds, r, w, e, tv) : rc;
}

OPENRDMA_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const timespec *ts, const sigset_t *mask) {
    const int ms = ts == nullptr ? -1 : static_cast<int>(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
    const int rc = select_fds(nfds, r, w, e, ms, mask, true);
    return rc == -2 ? real().pselect(nfds, r, w, e, ts, mask) : rc;
}

}  // extern "C"

namespace {

// poll(2) over kernel descriptors and RDMA streams at once: the streams' readiness is read in user space, and the
// wait sleeps on the kernel descriptors and the streams' completion notifications together.
int poll_fds(pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask, bool use_ppoll, Scratch &sc) {
    auto &streams = sc.streams;
    streams.clear();
    for (nfds_t i = 0; i < n; ++i) {
        if (Sock *s = serving(fds[i].fd); s != nullptr && s->mode == Sock::Mode::rdma) streams.emplace_back(i, s->stream.get());
    }
    auto kernel_poll = [&](pollfd *p, nfds_t k, int ms) {
        if (!use_ppoll) return real().poll(p, k, ms);
        timespec ts{ms / 1000, static_cast<long>(ms % 1000) * 1000000};
        return real().ppoll(p, k, ms < 0 ? nullptr : &ts, mask);
    };
    if (streams.empty()) return kernel_poll(fds, n, timeout_ms);
    Inside in;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    auto &all = sc.all;
    all.assign(fds, fds + n);
    for (auto &[i, st] : streams) all[i].fd = -1;  // the mirror is not looked at: the stream answers
    for (auto &[i, st] : streams) {
        all.push_back(pollfd{st->notify_fd(), POLLIN, 0});
        all.push_back(pollfd{st->event_fd(), POLLIN, 0});
    }
    // A short busy poll of the streams first (and of the kernel's descriptors, without sleeping, at its end): the
    // answer to a small message or a credit comes in microseconds, a sleep and a wake-up cost more.
    if (timeout_ms != 0) {
        const auto spin_until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(Layer::get()->shape().spin_ns);
        for (bool done = false; !done && std::chrono::steady_clock::now() < spin_until;) {
            for (auto &[i, st] : streams) {
                if ((st->readiness() & (static_cast<uint32_t>(fds[i].events) | POLLERR | POLLHUP)) != 0) done = true;
            }
        }
    }
    for (;;) {
        int ready = 0;
        bool armed_all = true;
        for (auto &[i, st] : streams) {
            const uint32_t ev = st->arm();
            fds[i].revents = static_cast<short>(ev & (static_cast<uint32_t>(fds[i].events) | POLLERR | POLLHUP));
            if (fds[i].revents != 0) {
                ++ready;
                armed_all = false;
            }
        }
        int wait = timeout_ms;
        if (ready > 0 || !armed_all) {
            wait = 0;
        } else if (timeout_ms > 0) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                                     std::chrono::steady_clock::now());
            wait = static_cast<int>(std::max<int64_t>(0, left.count()));
        }
        if (wait != 0 && g_trace) {
            for (auto &[i, st] : streams) {
                std::fprintf(stderr, "%ld poll fd %d events %x wait %d: %s\n",
                             static_cast<long>(std::chrono::steady_clock::now().time_since_epoch().count() / 1000),
                             fds[i].fd, fds[i].events, wait, st->describe().c_str());
            }
        }
        if (wait != 0) {
            for (auto &[i, st] : streams) st->sleeping(true);
        }
        // Sleeps in slices of at most 200 ms: the streams' wake-ups come through their descriptors, and the slice
        // only bounds the cost of one lost to the background thread (it looks again at every slice's end).
        const int slice = wait < 0 || wait > 200 ? 200 : wait;
        const int rc = kernel_poll(all.data(), static_cast<nfds_t>(all.size()), slice);
        if (wait != 0) {
            for (auto &[i, st] : streams) st->sleeping(false);
        }
        if (rc < 0) return rc;
        if (g_trace && rc == 0 && slice == 200) {
            for (auto &[i, st] : streams) std::fprintf(stderr, "a slice ended with nothing: %s\n", st->describe().c_str());
        }
        for (nfds_t i = 0; i < n; ++i) {
            if (all[i].fd >= 0) {
                fds[i].revents = all[i].revents;
                if (all[i].revents != 0) ++ready;
            }
        }
        if (ready > 0 || wait == 0) return ready;
        if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) {
            // The time is up: one last look at the streams before saying nothing came.
            for (auto &[i, st] : streams) {
                fds[i].revents = static_cast<short>(st->readiness() & (static_cast<uint32_t>(fds[i].events) | POLLERR | POLLHUP));
                if (fds[i].revents != 0) ++ready;
            }
            return ready;
        }
    }
}

}  // namespace
