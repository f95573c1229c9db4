// Links between two processes of one host (link.hpp).
#include "link.hpp"

#include <elf.h>
#include <link.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "krdma/abi.h"
#include "libc.hpp"
#include "tcp_io.hpp"
#include "rnicpi/cpp/channel.hpp"

namespace openrdma::sockets {

namespace {

/** @brief A channel end given on a link, and the connection it is for. */
struct LinkGift {
    uint32_t magic;    // kGiftMagic
    uint32_t reserved; // zero
    uint64_t nonce;    // LinkHello::nonce of the connection
};
constexpr uint32_t kGiftMagic = 0x5446474cu;  // "LGFT"

// Whether the main program names the layer's library among those it needs: it was linked to the layer for the
// extended interface (a program openrdma-run only preloads it into does not).
bool linked_to_layer() {
    bool found = false;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *out) -> int {
            // The first object is the main program.
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
                const auto *dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
                const char *strtab = nullptr;
                for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; ++d) {
                    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char *>(d->d_un.d_ptr);
                }
                if (strtab == nullptr) break;
                for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; ++d) {
                    if (d->d_tag == DT_NEEDED && std::strstr(strtab + d->d_un.d_val, "libopenrdma_sockets") != nullptr) {
                        *static_cast<bool *>(out) = true;
                    }
                }
            }
            return 1;  // the main program only
        },
        &found);
    return found;
}

}  // namespace

std::string peer_key(int tcp) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (real().getpeername(tcp, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return {};
    return std::string(reinterpret_cast<const char *>(&ss), len);
}

Link::~Link() {
    for (auto &[nonce, fd] : gifts_) real().close(fd);
    real().close(fd_);
}

bool Link::alive() const noexcept {
    pollfd p{fd_, POLLIN, 0};
    return real().poll(&p, 1, 0) >= 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL)) == 0;
}

bool Link::give(uint64_t nonce, int channel) noexcept {
    const LinkGift g{kGiftMagic, 0, nonce};
    return rdma::provider::channel_detail::send_with_fd(fd_, &g, sizeof g, channel);
}

void Link::read_all_locked() {
    for (;;) {
        LinkGift g{};
        int fd = -1, flags = 0;
        const ssize_t n = rdma::provider::channel_detail::recv_with_fd(fd_, &g, sizeof g, fd, flags);
        if (n < 0 || (n == 0 && fd < 0)) return;  // nothing more (or the peer's end closed)
        // Only a whole gift with its one descriptor counts; anything else from the peer is dropped, and so is a gift
        // whose connection gave up waiting for it.
        if (n != static_cast<ssize_t>(sizeof g) || g.magic != kGiftMagic || (flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 ||
            fd < 0 || gifts_.count(g.nonce) != 0 || abandoned_.erase(g.nonce) != 0) {
            if (fd >= 0) real().close(fd);
            continue;
        }
        if (gifts_.size() >= kGiftsKept) {  // a peer that gives what nobody asked for does not fill this process
            real().close(gifts_.begin()->second);
            gifts_.erase(gifts_.begin());
        }
        gifts_.emplace(g.nonce, fd);
    }
}

int Link::take_locked(uint64_t nonce) {
    read_all_locked();
    auto it = gifts_.find(nonce);
    if (it == gifts_.end()) return -1;
    const int fd = it->second;
    gifts_.erase(it);
    return fd;
}

int Link::take(uint64_t nonce, std::chrono::steady_clock::time_point until) {
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (const int fd = take_locked(nonce); fd >= 0) return fd;
        }
        // The responder gives before it answers on TCP, so the gift is normally here at the first look.
        pollfd p{fd_, POLLIN, 0};
        const int ms = left_ms(until);
        const int r = ms == 0 ? 0 : real().poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (p.revents & (POLLHUP | POLLERR)) != 0) {
            std::lock_guard lock(mutex_);
            const int fd = take_locked(nonce);
            if (fd < 0 && abandoned_.size() < kGiftsKept) abandoned_.insert(nonce);
            return fd;
        }
    }
}

LinkOutcome link_initiate(int tcp, Link &link, int &bell, std::chrono::steady_clock::time_point until,
                          std::string &why) {
    bell = -1;
    LinkHello h{{'O', 'R', 'S', 'L'}, 1, 0, link.token(), link.next_nonce()};
    if (!send_all(tcp, &h, sizeof h, until)) {
        why = std::string("sending the link's hello: ") + std::strerror(errno);
        return LinkOutcome::failed;
    }
    LinkAnswer a{};
    const ssize_t n = peek_bytes(tcp, &a, sizeof a, until);
    if (n != static_cast<ssize_t>(sizeof a) || !take_exact(tcp, &a, sizeof a)) {
        why = n < 0 ? std::string("reading the link's answer: ") + std::strerror(errno)
                    : "no answer to the link's hello in time";
        return LinkOutcome::failed;
    }
    if (std::memcmp(a.magic, "ORSL", 4) != 0 || a.version != 1 || a.status > kLinkUnknown) {
        why = "the peer's answer to the link's hello is not one this layer speaks";
        return LinkOutcome::failed;
    }
    if (a.status == kLinkUnknown) return LinkOutcome::unknown;
    bell = link.take(h.nonce, until);
    if (bell < 0) {
        why = "the peer answered the link's hello but gave no channel on the link";
        return LinkOutcome::failed;
    }
    return LinkOutcome::channel;
}

LinkOutcome link_respond(int tcp, int &bell, std::chrono::steady_clock::time_point until, std::string &why) {
    bell = -1;
    LinkHello h{};
    const ssize_t first = peek_bytes(tcp, &h, 4, until);
    if (first < 4 || std::memcmp(h.magic, "ORSL", 4) != 0) return LinkOutcome::unknown;  // MPA's (or nothing yet)
    if (peek_bytes(tcp, &h, sizeof h, until) != static_cast<ssize_t>(sizeof h) || !take_exact(tcp, &h, sizeof h) ||
        h.version != 1) {
        why = "a link's hello that is not one this layer speaks";
        return LinkOutcome::failed;
    }
    LinkAnswer a{{'O', 'R', 'S', 'L'}, 1, kLinkUnknown};
    std::shared_ptr<Link> link = Links::get().with(h.token);
    int ends[2] = {-1, -1};
    // The channel goes on the link before the answer on TCP: the initiator finds it at its first look.
    if (link && rdma::provider::make_channel(link->ring(), ends, nullptr) == 0) {
        const bool given = link->give(h.nonce, ends[1]);
        real().close(ends[1]);
        if (given) {
            a.status = kLinkOk;
            bell = ends[0];
        } else {
            real().close(ends[0]);
        }
    }
    if (!send_all(tcp, &a, sizeof a, until)) {
        if (bell >= 0) real().close(bell);
        bell = -1;
        why = std::string("answering the link's hello: ") + std::strerror(errno);
        return LinkOutcome::failed;
    }
    return a.status == kLinkOk ? LinkOutcome::channel : LinkOutcome::unknown;
}

Links::Links() {
    const char *e = std::getenv("OPENRDMA_SOCKETS_LINKS");
    enabled_ = !(e != nullptr && std::strcmp(e, "0") == 0) && !linked_to_layer();
}

namespace {
std::atomic<Links *> g_links{nullptr};
}  // namespace

Links &Links::get() {
    static Links *links = [] {
        auto *l = new Links();  // never destroyed: streams may use it until the process ends
        g_links.store(l, std::memory_order_release);
        return l;
    }();
    return *links;
}

void Links::forget_in_child() noexcept {
    // Only links this process had: a child whose parent never made any makes nothing here (no getenv, no walk of
    // the loaded objects between fork and exec).
    if (Links *l = g_links.load(std::memory_order_acquire)) l->forget();
}

void Links::adopt(int fd, const std::string &peer, uint64_t ring) {
    krdma_link_hello h{};
    const ssize_t n = real().recv(fd, &h, sizeof h, MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof h) || h.magic != KRDMA_LINK_MAGIC || h.version != 1 || ring == 0) {
        real().close(fd);
        return;
    }
    auto l = std::make_shared<Link>(fd, h.token, ring);
    std::lock_guard lock(mutex_);
    // The links of processes that ended go here, not only when a connection looks for them: a long-lived server
    // met by many short-lived clients would otherwise keep one descriptor per client it ever saw.
    for (auto it = by_token_.begin(); it != by_token_.end();) {
        it = it->second->alive() ? std::next(it) : by_token_.erase(it);
    }
    for (auto it = by_peer_.begin(); it != by_peer_.end();) {
        it = by_token_.count(it->second) != 0 ? std::next(it) : by_peer_.erase(it);
    }
    by_token_[h.token] = std::move(l);
    if (!peer.empty()) by_peer_[peer] = h.token;
}

std::shared_ptr<Link> Links::to(const std::string &peer) {
    std::lock_guard lock(mutex_);
    auto p = by_peer_.find(peer);
    if (p == by_peer_.end()) return nullptr;
    auto t = by_token_.find(p->second);
    if (t != by_token_.end() && t->second->alive()) return t->second;
    if (t != by_token_.end()) by_token_.erase(t);
    by_peer_.erase(p);
    return nullptr;
}

std::shared_ptr<Link> Links::with(uint64_t token) {
    std::lock_guard lock(mutex_);
    auto t = by_token_.find(token);
    if (t == by_token_.end()) return nullptr;
    if (t->second->alive()) return t->second;
    by_token_.erase(t);
    return nullptr;
}

size_t Links::count() {
    std::lock_guard lock(mutex_);
    return by_token_.size();
}

void Links::forget() noexcept {
    new (&mutex_) std::mutex();
    // The parent's links: this process's copies of their descriptors are closed, so that the parent's peers see
    // the parent go when it goes.
    by_token_.clear();
    by_peer_.clear();
}

}  // namespace openrdma::sockets
