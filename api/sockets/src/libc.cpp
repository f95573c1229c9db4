// The C library's definitions behind the interposed ones.
#include "libc.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace openrdma::sockets {
namespace {

template <class F>
void find(F &slot, const char *name) {
    slot = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
    if (slot == nullptr) {
        // Without the C library's own function nothing can be served: say which, and stop.
        std::fprintf(stderr, "openrdma sockets: the C library has no %s\n", name);
        std::abort();
    }
}

Libc resolve() {
    Libc l{};
    find(l.socket, "socket");
    find(l.socketpair, "socketpair");
    find(l.connect, "connect");
    find(l.listen, "listen");
    find(l.accept, "accept");
    find(l.accept4, "accept4");
    find(l.close, "close");
    find(l.shutdown, "shutdown");
    find(l.read, "read");
    find(l.write, "write");
    find(l.readv, "readv");
    find(l.writev, "writev");
    find(l.send, "send");
    find(l.recv, "recv");
    find(l.sendto, "sendto");
    find(l.recvfrom, "recvfrom");
    find(l.sendmsg, "sendmsg");
    find(l.recvmsg, "recvmsg");
    find(l.sendfile, "sendfile");
    find(l.sendfile64, "sendfile64");
    find(l.getsockopt, "getsockopt");
    find(l.setsockopt, "setsockopt");
    find(l.getsockname, "getsockname");
    find(l.getpeername, "getpeername");
    find(l.fcntl, "fcntl");
    find(l.ioctl, "ioctl");
    find(l.dup, "dup");
    find(l.dup2, "dup2");
    find(l.dup3, "dup3");
    find(l.poll, "poll");
    find(l.ppoll, "ppoll");
    find(l.select, "select");
    find(l.pselect, "pselect");
    find(l.epoll_ctl, "epoll_ctl");
    find(l.epoll_wait, "epoll_wait");
    find(l.epoll_pwait, "epoll_pwait");
    find(l.fork, "fork");
    find(l.execve, "execve");
    return l;
}

}  // namespace

const Libc &real() noexcept {
    static const Libc libc = resolve();
    return libc;
}

}  // namespace openrdma::sockets
