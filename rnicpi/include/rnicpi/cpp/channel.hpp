/**
 * @file channel.hpp
 * @brief The same-host channel of ri_channel.h in C++: make_channel() for the kAL, which pairs two QPs, and
 *        Channel for a provider's data path, which reads and writes it as it would a non-blocking TCP socket.
 *        Header only; nothing of it crosses the ABI.
 *
 * Channel::write() and Channel::read() answer as send(2) and recv(2) on a non-blocking socket do: a byte count, or
 * -1 with errno EAGAIN (no room, no bytes), ECONNRESET (the peer went away, or broke the ring's rules); read()
 * answers 0 once the peer closed its direction and every byte before it was read. Neither makes a system call
 * unless the other side sleeps and must be woken (a one-byte write to the bell).
 */
#ifndef RNICPI_CPP_CHANNEL_HPP
#define RNICPI_CPP_CHANNEL_HPP

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rnicpi/ri_channel.h"
#include "rnicpi/ri_types.h"

namespace rdma::provider {

/// @cond INTERNAL
// The channel's atomics and helpers: not part of the interface.
namespace channel_detail {

inline uint64_t load_acquire(const uint64_t &v) noexcept { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline void store_release(uint64_t &v, uint64_t x) noexcept { __atomic_store_n(&v, x, __ATOMIC_RELEASE); }
inline uint32_t load_relaxed(const uint32_t &v) noexcept { return __atomic_load_n(&v, __ATOMIC_RELAXED); }
inline void store_relaxed(uint32_t &v, uint32_t x) noexcept { __atomic_store_n(&v, x, __ATOMIC_RELAXED); }
inline uint32_t exchange(uint32_t &v, uint32_t x) noexcept { return __atomic_exchange_n(&v, x, __ATOMIC_ACQ_REL); }
// Between a store of one side's word and a load of the other side's (the index moved, then: does the other side
// sleep? / I sleep, then: did the index move?): without it both could miss each other and sleep forever.
inline void full_fence() noexcept { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline constexpr size_t kPage = 4096;
inline constexpr size_t header_bytes() noexcept {
    return (sizeof(ri_channel_header_t) + kPage - 1) & ~(kPage - 1);
}

// Sends @p len bytes at @p p with the @p n descriptors at @p fds (SCM_RIGHTS, at most 4), without blocking: true
// when all went.
inline bool send_with_fds(int sock, const void *p, size_t len, const int *fds, size_t n) noexcept {
    if (n > 4) return false;
    iovec iov{const_cast<void *>(p), len};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(n * sizeof(int));
    cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    return ::sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

// Sends @p len bytes at @p p with one descriptor, @p fd, as send_with_fds().
inline bool send_with_fd(int sock, const void *p, size_t len, int fd) noexcept {
    return send_with_fds(sock, p, len, &fd, 1);
}

// Reads one message of at most @p len bytes into @p p from @p sock (non-blocking): recvmsg(2)'s result; the
// descriptor it carried in @p fd (-1 when none; close-on-exec) and the message's flags (truncation) in @p msg_flags.
// A message with more than one descriptor is the sender's mistake or malice: every one is closed, @p fd is -1 and
// @p msg_flags has MSG_CTRUNC (an empty message may carry descriptors too: they are counted the same way).
inline ssize_t recv_with_fd(int sock, void *p, size_t len, int &fd, int &msg_flags) noexcept {
    constexpr size_t kRoom = 4;  // more than the one expected, so that extra ones arrive here and are closed
    iovec iov{p, len};
    alignas(cmsghdr) char control[CMSG_SPACE(kRoom * sizeof(int))] = {};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    fd = -1;
    msg_flags = n >= 0 ? m.msg_flags : 0;
    int got[kRoom];
    size_t count = 0;
    for (cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&m) : nullptr; c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && count < kRoom; ++i) std::memcpy(&got[count++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    if (count == 1) {
        fd = got[0];
    } else if (count > 1) {
        for (size_t i = 0; i < count; ++i) ::close(got[i]);
        msg_flags |= MSG_CTRUNC;
    }
    return n;
}

// One SCM_RIGHTS descriptor with a hello.
inline bool send_hello(int sock, const ri_channel_hello_t &h, int fd, size_t len = sizeof(ri_channel_hello_t)) noexcept {
    return send_with_fd(sock, &h, len, fd);
}

// Reads one hello from @p sock (non-blocking), as recv_with_fd().
inline ssize_t recv_hello(int sock, ri_channel_hello_t &hello, int &fd, int &msg_flags) noexcept {
    return recv_with_fd(sock, &hello, sizeof hello, fd, msg_flags);
}

}  // namespace channel_detail
/// @endcond

/** @brief The smallest ring a channel may have (bytes per direction). */
inline constexpr uint64_t kChannelRingMin = 4096;
/** @brief The largest ring a channel may have (bytes per direction). */
inline constexpr uint64_t kChannelRingMax = uint64_t{1} << 30;

/**
 * @brief The kAL's side: makes a channel with rings of @p ring_size bytes each (a power of two within
 *        kChannelRingMin..kChannelRingMax) and returns its two bell ends in @p ends (close-on-exec, non-blocking),
 *        each already holding its hello and the memory file; the caller hands one to each QP. With @p pids (the
 *        processes of side 0's and side 1's QP, which the kAL vouches for; both RNICs take ::RI_CAP_CHANNEL_PULL)
 *        each end's hello names its peer's process (version 2, ::RI_CHANNEL_HELLO_PULL); without, the hellos are
 *        version 1. An errno on failure (nothing is left open).
 */
[[nodiscard]] inline int make_channel(uint64_t ring_size, int ends[2], const int32_t *pids = nullptr) noexcept {
    using namespace channel_detail;
    ends[0] = ends[1] = -1;
    if (ring_size < kChannelRingMin || ring_size > kChannelRingMax || (ring_size & (ring_size - 1)) != 0) {
        return EINVAL;
    }
    const uint64_t file_size = header_bytes() + 2 * ring_size;
    const int mem = static_cast<int>(::syscall(SYS_memfd_create, "openrdma-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (mem < 0) return errno;
    auto fail = [&](int e) {
        ::close(mem);
        for (int i = 0; i < 2; ++i) {
            if (ends[i] >= 0) ::close(ends[i]);
            ends[i] = -1;
        }
        return e;
    };
    if (::ftruncate(mem, static_cast<off_t>(file_size)) != 0) return fail(errno);
    // Written, not mapped: unmapping a page of a process with threads on other CPUs flushes their TLBs, which on a
    // virtual machine costs more than the whole write.
    ri_channel_header_t h{};
    h.magic = RI_CHANNEL_MAGIC;
    h.version = RI_CHANNEL_VERSION;
    h.ring_size = ring_size;
    h.data_offset[0] = header_bytes();
    h.data_offset[1] = header_bytes() + ring_size;
    h.file_size = file_size;
    // Fresh: both readers count as sleeping until they look (see ri_channel.h).
    h.ring[0].reader_waiting = 1;
    h.ring[1].reader_waiting = 1;
    if (::pwrite(mem, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return fail(errno != 0 ? errno : EIO);
    // Sealed: neither QP can shrink the file under the other's mapping (a fault on every access) or grow it.
    if (::fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return fail(errno);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return fail(errno);
    ends[0] = sv[0];
    ends[1] = sv[1];
    // What is sent on one end is read on the other: each end's own hello goes into its peer.
    for (uint32_t side = 0; side < 2; ++side) {
        ri_channel_hello_t hello{RI_CHANNEL_MAGIC, pids != nullptr ? RI_CHANNEL_VERSION : 1u, side,
                                 static_cast<uint32_t>(__builtin_ctzll(ring_size)), 0, 0};
        if (pids != nullptr) {
            hello.flags = RI_CHANNEL_HELLO_PULL;
            hello.peer_pid = pids[1 - side];
        }
        const size_t len = pids != nullptr ? sizeof hello : RI_CHANNEL_HELLO_V1_SIZE;
        if (!send_hello(ends[1 - side], hello, mem, len)) return fail(errno != 0 ? errno : EIO);
    }
    ::close(mem);
    return 0;
}

/**
 * @brief One QP's side of a channel: writes its ring, reads the other. Single writer and single reader per side (the
 *        QP's lock); the other side is another process and is not trusted.
 */
class Channel {
public:
    Channel() = default;
    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;
    ~Channel() { reset(); }

    /**
     * @brief Takes bell end @p bell (owned from now on, closed on failure too): reads its hello and maps the memory
     *        file. ::RI_EBADF when @p bell is not a channel's end, ::RI_EPROTO for a hello or a file of another
     *        layout, ::RI_ENOMEM when it cannot be mapped.
     */
    [[nodiscard]] ri_status_t open(int bell) noexcept {
        using namespace channel_detail;
        reset();
        if (bell < 0) return RI_EBADF;
        bell_ = bell;
        ri_channel_hello_t hello{};
        int mem = -1;
        int flags = 0;
        const ssize_t n = recv_hello(bell_, hello, mem, flags);
        const ri_status_t rc = n < 0 ? RI_EBADF : map(hello, static_cast<size_t>(n), flags, mem);
        if (mem >= 0) ::close(mem);
        if (rc != RI_OK) reset();
        return rc;
    }

    /** @brief Unmaps the memory and closes the bell (the peer reads its end of file). */
    void reset() noexcept {
        if (base_ != nullptr) ::munmap(base_, size_);
        if (pidfd_ >= 0) ::close(pidfd_);
        pidfd_ = -1;
        peer_pid_ = 0;
        pulls_ = Pulls::none;
        base_ = nullptr;
        if (bell_ >= 0) ::close(bell_);
        bell_ = -1;
        closed_ = false;
        peer_gone_ = false;
        tail_ = head_ = 0;
    }

    /** @brief Whether open() succeeded. */
    [[nodiscard]] bool is_open() const noexcept { return base_ != nullptr; }
    /** @brief The bell's end: readable when the other side rang, or went away. */
    [[nodiscard]] int bell() const noexcept { return bell_; }
    /** @brief The bytes of each ring. */
    [[nodiscard]] uint64_t ring_size() const noexcept { return ring_; }
    /** @brief Bytes a write() copies before it lets the reader see them (and looks for more room). */
    static constexpr size_t kPublishEvery = size_t{64} << 10;

    /** @brief Writes what fits of the gather list @p iov (@p n pieces); see the file comment for the answer. */
    ssize_t write(const iovec *iov, size_t n) noexcept {
        using namespace channel_detail;
        if (peer_gone_ || closed_) return fail(peer_gone_ ? ECONNRESET : EPIPE);
        ri_channel_ring_t &r = *out_;
        const uint64_t head = load_acquire(r.head);
        if (tail_ - head > ring_) return fail_broken();
        size_t room = static_cast<size_t>(ring_ - (tail_ - head));
        if (room == 0) return fail(EAGAIN);
        // Published every kPublishEvery bytes, so that a reader copies out while this writer copies in: a gather
        // list as large as the ring, published once, made the two sides take turns (8 MiB Writes through a 512 KiB
        // ring at half the speed of a 1 MiB one). Room the reader made meanwhile is taken too.
        const ssize_t moved = move(
            iov, n, tail_, room, [&](uint64_t at, uint8_t *p, size_t len) { put(out_data_, at, p, len); },
            [&](uint64_t at) {
                const uint64_t used = at - load_acquire(r.head);
                return used > ring_ ? ring_ + 1 : ring_ - used;
            },
            [&](uint64_t at) { store_release(r.tail, at); });
        if (moved <= 0) return moved;
        tail_ += static_cast<uint64_t>(moved);
        store_release(r.tail, tail_);
        full_fence();
        if (load_relaxed(r.reader_waiting) != 0) ring_reader(r);
        return moved;
    }

    /** @brief Reads up to @p len bytes into @p buf; see the file comment for the answer. */
    ssize_t read(void *buf, size_t len) noexcept {
        iovec v{buf, len};
        return readv(&v, 1);
    }

    /** @brief Reads into the scatter list @p iov (@p n pieces), in order; see the file comment for the answer. */
    ssize_t readv(const iovec *iov, size_t n) noexcept {
        using namespace channel_detail;
        ri_channel_ring_t &r = *in_;
        const uint64_t tail = load_acquire(r.tail);
        const uint64_t avail = tail - head_;
        if (avail > ring_) return fail_broken();
        if (avail == 0) {
            // The writer's FIN comes after its last byte: read the flag, then look at the index again.
            if (__atomic_load_n(&r.closed, __ATOMIC_ACQUIRE) != 0 && load_acquire(r.tail) == head_) return 0;
            return fail(peer_gone_ ? ECONNRESET : EAGAIN);
        }
        // Room handed back every kPublishEvery bytes, as write() publishes (there: why); bytes the writer published
        // meanwhile are read too.
        const ssize_t moved = move(
            iov, n, head_, static_cast<size_t>(avail),
            [&](uint64_t at, uint8_t *p, size_t len) { get(in_data_, at, p, len); },
            [&](uint64_t at) { return load_acquire(r.tail) - at; }, [&](uint64_t at) { store_release(r.head, at); });
        if (moved <= 0) return moved;  // 0: nothing asked for
        head_ += static_cast<uint64_t>(moved);
        store_release(r.head, head_);
        full_fence();
        if (load_relaxed(r.writer_waiting) != 0) ring_writer(r);
        return moved;
    }

    /**
     * @brief Copies up to the bytes waiting into the scatter list @p iov (@p n pieces) and leaves them waiting
     *        (recv(2)'s MSG_PEEK): a byte count, 0 at the end, or -1 with errno as readv() answers.
     */
    ssize_t peekv(const iovec *iov, size_t n) noexcept {
        using namespace channel_detail;
        const uint64_t tail = load_acquire(in_->tail);
        const uint64_t avail = tail - head_;
        if (avail > ring_) return fail_broken();
        if (avail == 0) {
            if (__atomic_load_n(&in_->closed, __ATOMIC_ACQUIRE) != 0 && load_acquire(in_->tail) == head_) return 0;
            return fail(peer_gone_ ? ECONNRESET : EAGAIN);
        }
        return move(
            iov, n, head_, static_cast<size_t>(avail),
            [&](uint64_t at, uint8_t *p, size_t len) { get(in_data_, at, p, len); }, [](uint64_t) { return 0; },
            [](uint64_t) {});
    }

    /**
     * @brief Ends this side at once without unmapping (a reset): the peer's bell reads its end of file, so the peer
     *        reads what waits and then ECONNRESET; this side's writes answer ECONNRESET. Safe while another thread
     *        still looks at the indexes, unlike reset().
     */
    void hang_up() noexcept {
        if (bell_ >= 0) (void)::shutdown(bell_, SHUT_RDWR);
        peer_gone_ = true;
    }

    /** @brief Bytes waiting to be read (a corrupt ring reads as some, so that the reader meets the error). */
    [[nodiscard]] uint64_t readable() const noexcept {
        return channel_detail::load_acquire(in_->tail) - head_;
    }
    /** @brief Whether the peer closed its direction (its FIN): after the bytes readable() counts, the end. */
    [[nodiscard]] bool peer_closed() const noexcept { return __atomic_load_n(&in_->closed, __ATOMIC_ACQUIRE) != 0; }
    /** @brief Room to write now (0 for a corrupt ring: the writer meets the error). */
    [[nodiscard]] uint64_t writable() const noexcept {
        const uint64_t used = tail_ - channel_detail::load_acquire(out_->head);
        return used > ring_ ? 1 : ring_ - used;
    }

    /** @brief No more writes (the stream's FIN): the peer reads its end after the last byte. */
    void close_write() noexcept {
        if (closed_ || base_ == nullptr) return;
        closed_ = true;
        __atomic_store_n(&out_->closed, 1u, __ATOMIC_RELEASE);
        channel_detail::full_fence();
        ring_bell();  // whether or not it sleeps now: the reader's next wait must see the end
    }

    /**
     * @brief The reader is about to sleep: asks the writer for the bell. False when bytes (or the end) came
     *        meanwhile: read them instead, nobody will ring for them.
     */
    [[nodiscard]] bool arm_read() noexcept {
        channel_detail::store_relaxed(in_->reader_waiting, 1);
        channel_detail::full_fence();
        return readable() == 0 && !peer_closed() && !peer_gone_;
    }
    /** @brief The reader polls on its own: the writer need not ring. */
    void disarm_read() noexcept {
        if (channel_detail::load_relaxed(in_->reader_waiting) != 0) channel_detail::store_relaxed(in_->reader_waiting, 0);
    }
    /** @brief The writer polls for room on its own: the reader need not ring. */
    void disarm_write() noexcept {
        if (channel_detail::load_relaxed(out_->writer_waiting) != 0) channel_detail::store_relaxed(out_->writer_waiting, 0);
    }
    /** @brief The writer is about to wait for room: asks the reader for the bell. False when room came meanwhile. */
    [[nodiscard]] bool arm_write() noexcept {
        channel_detail::store_relaxed(out_->writer_waiting, 1);
        channel_detail::full_fence();
        return writable() == 0 && !peer_gone_;
    }

    /**
     * @brief Empties the bell after it woke the caller; false when the peer's end is gone (its QP or its process),
     *        after which reads answer ECONNRESET once the ring is empty and writes at once.
     */
    bool drain_bell() noexcept {
        if (bell_ < 0) return false;
        char buf[64];
        for (;;) {
            const ssize_t n = ::syscall(SYS_recvfrom, bell_, buf, sizeof buf, MSG_DONTWAIT, nullptr, nullptr);
            if (n > 0) continue;
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return !peer_gone_;
            peer_gone_ = true;  // end of file, or an error of the pair
            return false;
        }
    }
    /** @brief Whether the peer's end is known to be gone. */
    [[nodiscard]] bool peer_gone() const noexcept { return peer_gone_; }

    /**
     * @brief Single copy, the reader's side: takes pulls in the ring this side reads, if the kAL named the peer's
     *        process (::RI_CHANNEL_HELLO_PULL) and this process may read its memory (the kernel's ptrace check, asked
     *        with a process_vm_readv of an unmapped byte), and says so to the peer (ri_channel_ring_t::reader_pulls). Keeps a pidfd
     *        of the peer, to tell after each pull that the pid still named the peer. False, and nothing said, when
     *        any of it fails: the peer then sends its bytes through the ring.
     */
    bool accept_pulls() noexcept {
        if (base_ == nullptr || peer_pid_ <= 0) return false;
        if (pulls_ == Pulls::none) {
            if (peer_pid_ == ::getpid()) {
                pulls_ = Pulls::local;
            } else {
                // The kernel checks the ptrace rule before it reads a byte, and answers EPERM (or ESRCH) for a
                // process this one may not read; the byte at address 0, which no process maps, then fails as EFAULT.
                // (An empty range would prove nothing: it returns before the check.)
                uint8_t probe = 0;
                iovec local{&probe, 1};
                iovec remote{nullptr, 1};
                if (::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0) < 0 && errno != EFAULT) return false;
                const int fd = static_cast<int>(::syscall(SYS_pidfd_open, peer_pid_, 0));  // close-on-exec already
                if (fd < 0) return false;
                pidfd_ = fd;
                pulls_ = Pulls::remote;
            }
        }
        __atomic_store_n(&in_->reader_pulls, 1u, __ATOMIC_RELEASE);
        return true;
    }
    /** @brief Single copy, the writer's side: whether the peer takes pulls in the ring this side writes. */
    [[nodiscard]] bool peer_takes_pulls() const noexcept {
        return base_ != nullptr && __atomic_load_n(&out_->reader_pulls, __ATOMIC_ACQUIRE) != 0;
    }
    /**
     * @brief Single copy: copies the peer's bytes at @p remote (@p nremote ranges, in the peer's address space, as
     *        its pull named them) into @p local (@p nlocal ranges here), in order, the last byte last (after every
     *        other byte is visible: a consumer polling it finds the whole message). Only after accept_pulls(). False
     *        when not every byte moved (a range the peer does not map, the peer gone; errno says which).
     */
    bool pull(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept {
        size_t total = 0;
        for (size_t i = 0; i < nlocal; ++i) total += local[i].iov_len;
        size_t rtotal = 0;
        for (size_t i = 0; i < nremote; ++i) rtotal += remote[i].iov_len;
        if (total != rtotal || nlocal > kMaxPullPieces || nremote > kMaxPullPieces) return fail_pull(EINVAL);
        if (total == 0) return true;
        if (pulls_ == Pulls::local) return pull_local(local, nlocal, remote, nremote);
        if (pulls_ != Pulls::remote) return fail_pull(EPERM);
        // The local list with its last byte as a piece of its own: the kernel copies pieces in order, and a piece is
        // a copy of its own, so that byte is stored after the others.
        iovec l[kMaxPullPieces + 1];
        size_t n = 0;
        for (size_t i = 0; i < nlocal; ++i) {
            if (local[i].iov_len > 0) l[n++] = local[i];
        }
        if (l[n - 1].iov_len > 1) {
            l[n] = iovec{static_cast<uint8_t *>(l[n - 1].iov_base) + l[n - 1].iov_len - 1, 1};
            --l[n - 1].iov_len;
            ++n;
        }
        size_t done = 0;
        size_t li = 0, ri = 0;
        size_t loff = 0, roff = 0;
        iovec lv[kMaxPullPieces + 1], rv[kMaxPullPieces];
        // process_vm_readv may stop early (at a page the peer does not map): go on from there; no progress is a fault.
        while (done < total) {
            size_t nl = 0, nr = 0;
            for (size_t i = li; i < n; ++i) {
                lv[nl++] = i == li ? iovec{static_cast<uint8_t *>(l[i].iov_base) + loff, l[i].iov_len - loff} : l[i];
            }
            for (size_t i = ri; i < nremote; ++i) {
                rv[nr++] = i == ri ? iovec{static_cast<uint8_t *>(remote[i].iov_base) + roff, remote[i].iov_len - roff}
                                   : remote[i];
            }
            const ssize_t got = ::process_vm_readv(peer_pid_, lv, nl, rv, nr, 0);
            if (got <= 0) return fail_pull(got == 0 ? EFAULT : errno);
            done += static_cast<size_t>(got);
            advance(l, n, li, loff, static_cast<size_t>(got));
            advance(remote, nremote, ri, roff, static_cast<size_t>(got));
        }
        // The pid named the peer for the whole copy only if the peer still lives now (a pid is not reused before).
        // Signal 0 only asks; EPERM (the peer changed its credentials since) still says it lives.
        if (::syscall(SYS_pidfd_send_signal, pidfd_, 0, nullptr, 0) != 0 && errno == ESRCH) return fail_pull(ESRCH);
        return true;
    }
    /** @brief Most ranges a pull names on either side. */
    static constexpr size_t kMaxPullPieces = 16;

private:
    // The copy loop of write() and readv(): moves the pieces of @p iov (@p n of them) through a ring from index @p at,
    // where @p ready bytes (room, or bytes to read) are known to be, in steps of at most kPublishEvery. copy(index,
    // piece, len) moves a step; publish(index) hands the progress over to the other side every kPublishEvery bytes;
    // when @p ready runs out, more(index) tells how much more the other side allows now (more than the ring: its
    // index is broken). The bytes moved, or fail_broken().
    template <class Copy, class More, class Publish>
    ssize_t move(const iovec *iov, size_t n, uint64_t at, size_t ready, Copy copy, More more,
                 Publish publish) noexcept {
        size_t done = 0;
        size_t shown = 0;  // of done, published
        size_t off = 0;    // into iov[i]
        for (size_t i = 0; i < n;) {
            if (ready == 0) {
                const uint64_t allowed = more(at + done);
                if (allowed > ring_) return fail_broken();
                ready = static_cast<size_t>(allowed);
                if (ready == 0) break;
            }
            size_t len = iov[i].iov_len - off;
            len = len < ready ? len : ready;
            len = len < kPublishEvery ? len : kPublishEvery;
            copy(at + done, static_cast<uint8_t *>(iov[i].iov_base) + off, len);
            done += len;
            ready -= len;
            off += len;
            if (off == iov[i].iov_len) {
                off = 0;
                ++i;
            }
            if (done - shown >= kPublishEvery) {
                publish(at + done);
                shown = done;
            }
        }
        return static_cast<ssize_t>(done);
    }

    ri_status_t map(const ri_channel_hello_t &hello, size_t got, int msg_flags, int mem) noexcept {
        using namespace channel_detail;
        if ((got != sizeof hello && got != RI_CHANNEL_HELLO_V1_SIZE) || (msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
            mem < 0) {
            return RI_EBADF;
        }
        const uint32_t version = got == RI_CHANNEL_HELLO_V1_SIZE ? 1u : RI_CHANNEL_VERSION;
        if (hello.magic != RI_CHANNEL_MAGIC || hello.version != version || hello.side > 1 || hello.ring_log2 < 12 ||
            hello.ring_log2 > 30 || (version >= 2 && (hello.flags & ~RI_CHANNEL_HELLO_PULL) != 0)) {
            return RI_EPROTO;
        }
        peer_pid_ = version >= 2 && (hello.flags & RI_CHANNEL_HELLO_PULL) != 0 && hello.peer_pid > 0 ? hello.peer_pid : 0;
        const uint64_t ring = uint64_t{1} << hello.ring_log2;
        const int seals = ::fcntl(mem, F_GET_SEALS);
        struct stat st{};
        // The layout follows from the hello and is checked against the file's size: nothing of the file is read
        // here, so an idle QP's channel costs no memory (its pages are made when data first moves).
        if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
            ::fstat(mem, &st) != 0 || static_cast<uint64_t>(st.st_size) != header_bytes() + 2 * ring) {
            return RI_EPROTO;
        }
        size_ = static_cast<size_t>(st.st_size);
        void *p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
        if (p == MAP_FAILED) return RI_ENOMEM;
        base_ = static_cast<uint8_t *>(p);
        ring_ = ring;
        const uint32_t side = hello.side;
        auto *hdr = reinterpret_cast<ri_channel_header_t *>(base_);
        out_ = &hdr->ring[side];
        in_ = &hdr->ring[1 - side];
        out_data_ = base_ + header_bytes() + side * ring;
        in_data_ = base_ + header_bytes() + (1 - side) * ring;
        tail_ = 0;  // a channel is handed out fresh (ri_channel.h)
        head_ = 0;
        return RI_OK;
    }

    void put(uint8_t *data, uint64_t at, const uint8_t *src, size_t len) const noexcept {
        const size_t off = static_cast<size_t>(at & (ring_ - 1));
        const size_t first = len < ring_ - off ? len : static_cast<size_t>(ring_ - off);
        std::memcpy(data + off, src, first);
        if (len > first) std::memcpy(data, src + first, len - first);
    }
    void get(const uint8_t *data, uint64_t at, uint8_t *dst, size_t len) const noexcept {
        const size_t off = static_cast<size_t>(at & (ring_ - 1));
        const size_t first = len < ring_ - off ? len : static_cast<size_t>(ring_ - off);
        std::memcpy(dst, data + off, first);
        if (len > first) std::memcpy(dst + first, data, len - first);
    }

    void ring_reader(ri_channel_ring_t &r) noexcept {
        // Whoever clears the flag rings: one bell per sleep, however many writes come before the reader wakes.
        if (channel_detail::exchange(r.reader_waiting, 0) != 0) ring_bell();
    }
    void ring_writer(ri_channel_ring_t &r) noexcept {
        if (channel_detail::exchange(r.writer_waiting, 0) != 0) ring_bell();
    }
    void ring_bell() noexcept {
        const char b = 0;
        // A full bell (the sleeper has bells to read already) needs no more; a gone peer is met by the next call.
        (void)::syscall(SYS_sendto, bell_, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
    }
    bool pull_local(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept {
        // The peer is this process (the embedded kAL, or both QPs in one consumer): plain copies, the last byte
        // after a store fence. pull() checked that both lists hold as many bytes.
        (void)nremote;
        size_t li = 0, ri = 0, loff = 0, roff = 0;
        size_t left = 0;
        for (size_t i = 0; i < nlocal; ++i) left += local[i].iov_len;
        while (left > 0) {
            while (local[li].iov_len == loff) ++li, loff = 0;
            while (remote[ri].iov_len == roff) ++ri, roff = 0;
            size_t take = local[li].iov_len - loff < remote[ri].iov_len - roff ? local[li].iov_len - loff
                                                                               : remote[ri].iov_len - roff;
            if (take == left && take > 1) --take;  // the last byte goes alone
            uint8_t *dst = static_cast<uint8_t *>(local[li].iov_base) + loff;
            const uint8_t *src = static_cast<const uint8_t *>(remote[ri].iov_base) + roff;
            if (left == 1) __atomic_thread_fence(__ATOMIC_RELEASE);
            std::memcpy(dst, src, take);
            loff += take;
            roff += take;
            left -= take;
        }
        return true;
    }
    static void advance(const iovec *v, size_t n, size_t &i, size_t &off, size_t by) noexcept {
        while (by > 0 && i < n) {
            const size_t room = v[i].iov_len - off;
            if (by < room) {
                off += by;
                return;
            }
            by -= room;
            ++i;
            off = 0;
        }
        while (i < n && v[i].iov_len == 0) ++i;
    }
    bool fail_pull(int e) noexcept {
        errno = e;
        return false;
    }
    ssize_t fail(int e) noexcept {
        errno = e;
        return -1;
    }
    ssize_t fail_broken() noexcept {
        peer_gone_ = true;  // an index beyond the ring's rules: the peer is not to be believed any more
        return fail(ECONNRESET);
    }

    uint8_t *base_ = nullptr;
    size_t size_ = 0;
    int bell_ = -1;
    uint64_t ring_ = 0;
    ri_channel_ring_t *out_ = nullptr;
    ri_channel_ring_t *in_ = nullptr;
    uint8_t *out_data_ = nullptr;
    const uint8_t *in_data_ = nullptr;
    uint64_t tail_ = 0;  // this side's own copy of its ring's tail (never read back from shared memory)
    uint64_t head_ = 0;  // this side's own copy of the other ring's head
    bool closed_ = false;
    bool peer_gone_ = false;
    // Single copy: the peer's process as the kAL named it (0: not named), and how this side reads it.
    enum class Pulls : uint8_t { none, local, remote };
    int32_t peer_pid_ = 0;
    int pidfd_ = -1;
    Pulls pulls_ = Pulls::none;
};

}  // namespace rdma::provider

#endif  // RNICPI_CPP_CHANNEL_HPP
