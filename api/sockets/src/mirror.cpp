// The readiness mirror: a Unix socket pair whose one end polls as the RDMA stream would.
#include "mirror.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libc.hpp"

namespace openrdma::sockets {

bool Mirror::open() {
    int sv[2];
    if (real().socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
    x_ = sv[0];
    y_ = sv[1];
    // The smallest send buffer: one small write from X makes it unwritable.
    const int one = 1;
    (void)real().setsockopt(x_, SOL_SOCKET, SO_SNDBUF, &one, sizeof one);
    return true;
}

Mirror::~Mirror() {
    if (x_ >= 0) real().close(x_);
    if (y_ >= 0) real().close(y_);
}

bool Mirror::show(uint32_t events) {
    bool changed = false;
    char buf[1024];
    const bool hup = (events & (POLLHUP | POLLERR)) != 0;
    const bool eof = hup || (events & POLLRDHUP) != 0;
    const bool readable = (events & POLLIN) != 0 && !eof;  // end of file makes X readable by itself
    const bool writable = (events & POLLOUT) != 0;
    if (readable != readable_ && !eof_) {
        if (readable) {
            const char b = 1;
            (void)real().send(y_, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            (void)real().recv(x_, buf, sizeof buf, MSG_DONTWAIT);
        }
        readable_ = readable;
        changed = true;
    }
    if (writable != writable_ && !hup_) {
        if (writable) {
            while (real().recv(y_, buf, sizeof buf, MSG_DONTWAIT) > 0) {
            }
        } else {
            (void)real().send(x_, buf, 512, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        writable_ = writable;
        changed = true;
    }
    if (eof && !eof_) {
        (void)real().shutdown(y_, SHUT_WR);
        eof_ = true;
        changed = true;
    }
    if (hup && !hup_) {
        real().close(y_);
        y_ = -1;
        hup_ = true;
        changed = true;
    }
    return changed;
}

}  // namespace openrdma::sockets
