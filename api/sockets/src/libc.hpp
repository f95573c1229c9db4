/**
 * @file libc.hpp
 * @brief The C library's own socket and descriptor functions, found behind the ones this layer interposes
 *        (dlsym RTLD_NEXT), for the layer's own use and for every descriptor it does not serve.
 */
#ifndef OPENRDMA_SOCKETS_LIBC_HPP
#define OPENRDMA_SOCKETS_LIBC_HPP

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace openrdma::sockets {

/** @brief The next definition of every function the layer interposes. */
struct Libc {
    int (*socket)(int, int, int);
    int (*socketpair)(int, int, int, int *);
    int (*connect)(int, const sockaddr *, socklen_t);
    int (*listen)(int, int);
    int (*accept)(int, sockaddr *, socklen_t *);
    int (*accept4)(int, sockaddr *, socklen_t *, int);
    int (*close)(int);
    int (*shutdown)(int, int);
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*readv)(int, const iovec *, int);
    ssize_t (*writev)(int, const iovec *, int);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const sockaddr *, socklen_t);
    ssize_t (*recvfrom)(int, void *, size_t, int, sockaddr *, socklen_t *);
    ssize_t (*sendmsg)(int, const msghdr *, int);
    ssize_t (*recvmsg)(int, msghdr *, int);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    ssize_t (*sendfile64)(int, int, off_t *, size_t);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    int (*getsockname)(int, sockaddr *, socklen_t *);
    int (*getpeername)(int, sockaddr *, socklen_t *);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*poll)(pollfd *, nfds_t, int);
    int (*ppoll)(pollfd *, nfds_t, const timespec *, const sigset_t *);
    int (*select)(int, fd_set *, fd_set *, fd_set *, timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const timespec *, const sigset_t *);
    int (*epoll_ctl)(int, int, int, epoll_event *);
    int (*epoll_wait)(int, epoll_event *, int, int);
    int (*epoll_pwait)(int, epoll_event *, int, int, const sigset_t *);
    pid_t (*fork)();
    int (*execve)(const char *, char *const[], char *const[]);
};

/** @brief The C library's functions (resolved on first use; safe from library constructors). */
const Libc &real() noexcept;

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_LIBC_HPP
