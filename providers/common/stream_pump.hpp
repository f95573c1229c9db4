// The pieces of a stream pump both providers' data paths use on a non-blocking TCP socket: the batched sendmsg and
// the non-blocking reads, a partial write's bookkeeping (what the socket took of a frame's gather list), the
// staging threshold of the receive side, the MSS watch, and the unsent-bytes budget of full sockets. Header only and
// inline: these run for every frame and every read.
#ifndef PROVIDERS_COMMON_STREAM_PUMP_HPP
#define PROVIDERS_COMMON_STREAM_PUMP_HPP

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "iwarp/engine.hpp"

namespace providers::common {

/**
 * @brief A receive target smaller than this (a header, a trailer, a short payload) is read through a staging buffer,
 *        so a stream of small messages costs one read per batch instead of several per message; a larger one is
 *        read straight into its target.
 */
inline constexpr size_t kStageBelow = 512;

// The stream's reads and writes go to the kernel through syscall(2), not the C library's recv, recvmsg and sendmsg:
// those are cancellation points, and each call turned its thread's asynchronous cancellation on and off around the
// system call (two atomic operations: 5% of a busy poller's user time). Every call here is non-blocking, so there is
// nothing a cancellation could interrupt.

/** @brief One non-blocking recv of up to @p len bytes into @p buf (recv(2)'s result and errno). */
inline ssize_t stream_recv(int fd, void *buf, size_t len) noexcept {
    return ::syscall(SYS_recvfrom, fd, buf, len, MSG_DONTWAIT, nullptr, nullptr);
}

/** @brief One non-blocking recvmsg (recvmsg(2)'s result and errno). */
inline ssize_t stream_recvmsg(int fd, msghdr *m) noexcept { return ::syscall(SYS_recvmsg, fd, m, MSG_DONTWAIT); }

/**
 * @brief One non-blocking sendmsg of the gather list @p iov (@p n pieces, at most IOV_MAX), without SIGPIPE:
 *        sendmsg(2)'s result and errno. A short count is a partial write: consume() says where the rest starts.
 */
inline ssize_t send_iov(int fd, iovec *iov, size_t n) noexcept {
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = n;
    return ::syscall(SYS_sendmsg, fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/**
 * @brief A partial write's bookkeeping: @p n bytes of the gather list @p iov (@p iovcnt pieces, from piece @p first)
 *        were written. Wholly written pieces are passed (@p first moves on), a piece written in part is shortened in
 *        place to what is left of it. Returns the bytes of @p n beyond the list's end (0 while part of it is left).
 */
inline size_t consume(iovec *iov, size_t iovcnt, size_t &first, size_t n) noexcept {
    while (n > 0 && first < iovcnt) {
        iovec &v = iov[first];
        if (n < v.iov_len) {
            v.iov_base = static_cast<uint8_t *>(v.iov_base) + n;
            v.iov_len -= n;
            return 0;
        }
        n -= v.iov_len;
        ++first;
    }
    return n;
}

/** @brief The socket's current TCP MSS, or 0 when it has none (not TCP): what iwarp::EmssWatch::looked() takes. */
inline size_t tcp_mss(int fd) noexcept {
    int mss = 0;
    socklen_t len = sizeof mss;
    return ::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 ? static_cast<size_t>(mss) : 0;
}

/**
 * @brief The MSS watch: @p n bytes went on socket @p fd of @p engine's stream; once every
 *        iwarp::EmssWatch::kRecheckBytes the socket's MSS is read again and the engine's FPDUs sized for it (Linux
 *        raises the MSS after a connection starts).
 */
inline void sent_on(iwarp::EmssWatch &watch, iwarp::Engine &engine, int fd, size_t n) noexcept {
    if (watch.sent(n)) watch.looked(engine, tcp_mss(fd));
}

/**
 * @brief The unsent-bytes budget: full sockets share a budget of bytes they may hold unsent (TCP_NOTSENT_LOWAT), so
 *        that on one host the sending thread, woken when its socket drains, pushes its next bytes itself instead of
 *        the receiver's reads doing it (see providers/softrnic/README.md, "Many full sockets share a budget").
 */
struct UnsentBudget {
    /** @brief No socket's share goes below this. */
    static constexpr int kMinShare = 64 << 10;
    /** @brief A new stream's socket starts with this limit, so a burst to many streams does not fill them whole. */
    static constexpr int kFirstLimit = 256 << 10;
    /** @brief The system's largest send buffer (tcp_wmem): a larger limit limits nothing. */
    static constexpr int kMaxLimit = 4 << 20;

    /**
     * @brief The TCP_NOTSENT_LOWAT of a socket while @p full sockets share @p budget bytes: a power of two, at least
     *        kMinShare; 0 (no limit) for budget 0 or a share of kMaxLimit or more (a socket full alone).
     */
    [[nodiscard]] static constexpr int share(uint64_t budget, uint32_t full) noexcept {
        if (budget == 0) return 0;
        const uint64_t s = budget / std::max<uint32_t>(full, 1);
        if (s >= static_cast<uint64_t>(kMaxLimit)) return 0;
        if (s <= static_cast<uint64_t>(kMinShare)) return kMinShare;
        return static_cast<int>(uint64_t{1} << (63 - __builtin_clzll(s)));
    }

    /**
     * @brief Whether a socket limited to @p now should be set to @p want: lowered at once, raised only to four
     *        times the old limit or more, so a count of full sockets that moves around a boundary does not cost a
     *        system call per refusal (0 is no limit, the largest).
     */
    [[nodiscard]] static constexpr bool worth_changing(int now, int want) noexcept {
        const auto as_bytes = [](int limit) { return limit == 0 ? int64_t{2} * kMaxLimit : int64_t{limit}; };
        const int64_t a = as_bytes(now), b = as_bytes(want);
        return b != a && !(b > a && b < 4 * a);
    }

    /**
     * @brief Sets socket @p fd's TCP_NOTSENT_LOWAT to @p bytes (0: the system's default back, none unless
     *        net.ipv4.tcp_notsent_lowat says otherwise); false when the socket refused it (not TCP).
     */
    static bool set_limit(int fd, int bytes) noexcept {
        return ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bytes, sizeof bytes) == 0;
    }
};

}  // namespace providers::common

#endif  // PROVIDERS_COMMON_STREAM_PUMP_HPP
