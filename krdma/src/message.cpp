// SOCK_SEQPACKET message I/O for /dev/krdma with SCM_RIGHTS descriptors.
#include "krdma/message.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace krdma {

UniqueFd &UniqueFd::operator=(UniqueFd &&o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
}

void UniqueFd::reset(int fd) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

bool unix_address(const std::filesystem::path &path, sockaddr_un &out) noexcept {
    out = sockaddr_un{};
    out.sun_family = AF_UNIX;
    const std::string &s = path.native();
    if (s.size() >= sizeof out.sun_path) return false;
    std::memcpy(out.sun_path, s.c_str(), s.size() + 1);
    return true;
}

RecvResult receive(int fd, Message &m, bool wait) noexcept {
    for (auto &f : m.fds) f.reset();
    m.nfds = 0;
    m.fds_lost = false;
    std::memset(&m.hdr, 0, sizeof m.hdr);
    iovec iov[2] = {{&m.hdr, sizeof m.hdr}, {m.body.data(), m.body.size() - sizeof m.hdr}};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (KRDMA_MAX_FDS + 4))];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? RecvResult::again : RecvResult::closed;
    // Take ownership of every descriptor first (even an empty packet can carry some), so that none leaks whatever
    // is wrong with the message.
    bool too_many = false;
    for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int received;
            std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
            if (m.nfds < KRDMA_MAX_FDS) {
                m.fds[m.nfds++].reset(received);
            } else {
                ::close(received);
                too_many = true;
            }
        }
    }
    if (n == 0) {
        for (auto &f : m.fds) f.reset();
        m.nfds = 0;
        // SOCK_SEQPACKET returns 0 both at the end of the stream and for an empty packet: ask which one it was.
        pollfd p{fd, POLLRDHUP, 0};
        if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP)) != 0) return RecvResult::closed;
        return RecvResult::invalid;
    }
    const bool bad = too_many || (msg.msg_flags & MSG_TRUNC) != 0 || static_cast<size_t>(n) < sizeof(krdma_msg_hdr) ||
                     m.hdr.length != static_cast<size_t>(n);
    if (bad || (msg.msg_flags & MSG_CTRUNC) != 0) {
        for (auto &f : m.fds) f.reset();
        m.nfds = 0;
        if (bad) return RecvResult::invalid;
        // Only the descriptors were cut (the kernel could not install them all): the message is still one to answer.
        m.fds_lost = true;
    }
    return RecvResult::message;
}

rdma::Status send(int fd, krdma_msg_hdr hdr, std::span<const uint8_t> payload, std::span<const int> fds,
                  bool wait) noexcept {
    if (sizeof hdr + payload.size() > KRDMA_MAX_MESSAGE || fds.size() > KRDMA_MAX_FDS) {
        return rdma::Status(RI_EMSGSIZE);
    }
    hdr.length = static_cast<uint32_t>(sizeof hdr + payload.size());
    iovec iov[2] = {{&hdr, sizeof hdr}, {const_cast<uint8_t *>(payload.data()), payload.size()}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = payload.empty() ? 1 : 2;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * KRDMA_MAX_FDS)];
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n;
    do {
        n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
    } while (n < 0 && errno == EINTR);
    if (n < 0) return rdma::Status(errno);
    return {};
}

}  // namespace krdma
