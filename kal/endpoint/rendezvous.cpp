// The same-host path between the kALs of one host: the rendezvous directory and the offers made through it.
#include "rendezvous.hpp"

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "llp";

// The header's command word of both messages.
constexpr uint32_t kOfferCmd = kRendezvousMagic;

bool safe_dir(const std::string &dir, std::string &why) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        why = "cannot make " + dir + ": " + std::strerror(errno);
        return false;
    }
    struct stat st{};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        why = dir + " is not a directory";
        return false;
    }
    // Whoever may put a socket here could pose as a kAL: the directory is the kALs' user's alone.
    if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        why = dir + " must belong to this user and be writable by nobody else";
        return false;
    }
    return true;
}

// Connects to the kAL listening at @p path; empty when none does.
krdma::UniqueFd dial(const std::string &path) {
    sockaddr_un a{};
    if (!krdma::unix_address(path, a)) return {};
    krdma::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return {};
    return fd;
}

// Whether the process at the other end of @p fd is of this kAL's user.
bool same_user(int fd) {
    ucred c{};
    socklen_t len = sizeof c;
    return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) == 0 && c.uid == ::geteuid();
}

}  // namespace

Rendezvous::Rendezvous(DeviceServer &server, std::string dir, Answer answer)
    : server_(server), dir_(std::move(dir)), answer_(std::move(answer)) {
    std::string why;
    if (!safe_dir(dir_, why)) {
        RDMA_LOG_WARN(kComponent, "same-host rendezvous off: %s", why.c_str());
        return;
    }
    path_ = dir_ + "/kal-" + std::to_string(::getpid()) + ".sock";
    sockaddr_un a{};
    krdma::UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    (void)::unlink(path_.c_str());  // a kAL of this pid before us (a pid is not reused while it lives)
    if (!fd || !krdma::unix_address(path_, a) || ::bind(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        ::chmod(path_.c_str(), 0600) != 0 || ::listen(fd.get(), 64) != 0) {
        RDMA_LOG_WARN(kComponent, "same-host rendezvous off: cannot listen at %s: %s", path_.c_str(),
                      std::strerror(errno));
        return;
    }
    listener_ = std::move(fd);
    server_.watch(listener_.get(), POLLIN, [this](short) { on_listener(); });
    RDMA_LOG_INFO(kComponent, "same-host rendezvous at %s", path_.c_str());
}

Rendezvous::~Rendezvous() {
    for (auto &[fd, conn] : waiting_) server_.unwatch(fd);
    if (listener_) {
        server_.unwatch(listener_.get());
        (void)::unlink(path_.c_str());
    }
}

void Rendezvous::on_listener() {
    for (;;) {
        krdma::UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!c) return;
        if (!same_user(c.get())) continue;
        const int fd = c.get();
        waiting_.emplace(fd, std::move(c));
        server_.watch(fd, POLLIN, [this, fd](short) { serve(fd, 0); });
    }
}

void Rendezvous::serve(int fd, int wait_ms) {
    if (wait_ms > 0) {
        pollfd p{fd, POLLIN, 0};
        (void)::poll(&p, 1, wait_ms);
    }
    auto m = std::make_unique<krdma::Message>();
    const krdma::RecvResult r = krdma::receive(fd, *m, false);
    if (r == krdma::RecvResult::again) return;  // not yet: the watch (or the offer's wait) comes back
    if (waiting_.count(fd) != 0) server_.unwatch(fd);
    krdma::UniqueFd bell;
    RendezvousOffer o;
    if (r == krdma::RecvResult::message && m->hdr.cmd == kOfferCmd && m->payload_len() == sizeof o && m->nfds == 1) {
        std::memcpy(&o, m->payload().data(), sizeof o);
        if (o.magic == kRendezvousMagic && o.version == kRendezvousVersion) bell = answer_(o, m->fds[0].get());
    }
    RendezvousAnswer a{kRendezvousMagic, bell ? 1u : 0u};
    krdma_msg_hdr h{};
    h.cmd = kOfferCmd;
    const int out[1] = {bell.get()};
    // A kAL that stopped waiting meets a closed socket: its channel end then goes with this one's (closed here),
    // and the endpoint that kept the other end reads the bell's end of file at its first use.
    (void)krdma::send(fd, h, std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(&a), sizeof a),
                      bell ? std::span<const int>(out, 1) : std::span<const int>());
    waiting_.erase(fd);  // closes an accepted connection (a connection served inside offer() is the caller's)
}

krdma::UniqueFd Rendezvous::offer(const RendezvousOffer &o, int tcp, std::chrono::milliseconds wait) {
    if (!listener_) return {};
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(quiet_, [now](const auto &q) { return q.second <= now; });
    std::vector<std::string> others;
    if (DIR *d = ::opendir(dir_.c_str())) {
        while (dirent *e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name.rfind("kal-", 0) == 0 && name.size() > 9 && name.compare(name.size() - 5, 5, ".sock") == 0 &&
                dir_ + "/" + name != path_ && quiet_.count(dir_ + "/" + name) == 0) {
                others.push_back(dir_ + "/" + name);
            }
        }
        ::closedir(d);
    }
    krdma_msg_hdr h{};
    h.cmd = kOfferCmd;
    const int fds[1] = {tcp};
    for (const std::string &path : others) {
        krdma::UniqueFd c = dial(path);
        if (!c) continue;  // a kAL gone (its file stays when it was killed)
        if (!krdma::send(c.get(), h, std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(&o), sizeof o), fds)) {
            continue;
        }
        // Waits for the answer, serving the offers other kALs make meanwhile (one may be waiting for us).
        const auto end = std::chrono::steady_clock::now() + wait;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                RDMA_LOG_WARN(kComponent, "same-host rendezvous: %s did not answer within %lld ms: offered nothing for "
                              "%lld s", path.c_str(), static_cast<long long>(wait.count()),
                              static_cast<long long>(kQuietFor.count()));
                quiet_[path] = std::chrono::steady_clock::now() + kQuietFor;
                break;
            }
            pollfd p[2] = {{c.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
            if (::poll(p, 2, static_cast<int>(left.count())) <= 0) continue;
            if ((p[1].revents & POLLIN) != 0) {
                krdma::UniqueFd in(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
                if (in && same_user(in.get())) serve(in.get(), 100);
            }
            if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
            auto m = std::make_unique<krdma::Message>();
            if (krdma::receive(c.get(), *m, false) != krdma::RecvResult::message) break;  // that kAL went: the next
            RendezvousAnswer a;
            if (m->hdr.cmd != kOfferCmd || m->payload_len() != sizeof a) break;
            std::memcpy(&a, m->payload().data(), sizeof a);
            if (a.magic == kRendezvousMagic && a.paired == 1 && m->nfds == 1) return std::move(m->fds[0]);
            break;  // not that kAL's: the next
        }
    }
    return {};
}

}  // namespace kal
