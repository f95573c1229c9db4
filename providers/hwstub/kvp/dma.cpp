// hwstub's DMA engine: process_vm_readv/writev into the consumer, plain copies for a consumer in our own process.
#include "dma.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "iwarp/copy.hpp"

namespace hwstub {
DmaChannel::DmaChannel(pid_t pid) noexcept : pid_(pid), local_(pid == ::getpid()) {}

bool DmaChannel::read(const DmaRange *ranges, size_t count, uint8_t *dst) const noexcept {
    return transfer(ranges, count, dst, false);
}

bool DmaChannel::write(const DmaRange *ranges, size_t count, const uint8_t *src) const noexcept {
    return transfer(ranges, count, const_cast<uint8_t *>(src), true);
}

bool DmaChannel::transfer(const DmaRange *ranges, size_t count, uint8_t *buf, bool to_target) const noexcept {
    if (count > kMaxDmaPieces) {
        errno = E2BIG;
        return false;
    }
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) total += ranges[i].len;
    if (total == 0) return true;

    // A write places its last byte last (see write()): the range that holds it is the last one with bytes.
    size_t tail = count;
    if (to_target) {
        while (ranges[tail - 1].len == 0) --tail;
        --tail;
    }

    if (local_) {
        // A consumer in our own process is trusted code that shares our fate (it could fault us by itself); its
        // ranges were pinned by the kAL at registration, so they are mapped. No system call on this path.
        uint8_t *at = buf;
        for (size_t i = 0; i < count; ++i) {
            auto *target = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(ranges[i].addr));
            if (!to_target) {
                std::memcpy(at, target, ranges[i].len);
            } else if (i != tail) {
                std::memcpy(target, at, ranges[i].len);
            } else {
                const size_t n = ranges[i].len - 1;
                std::memcpy(target, at, n);
                iwarp::placement_fence();
                target[n] = at[n];
            }
            at += ranges[i].len;
        }
        return true;
    }

    // Into another process, the last byte is a remote piece of its own: the kernel copies the pieces one after the
    // other, each by a copy of its own, so the last byte lands after the rest in the same system call.
    iovec remote[kMaxDmaPieces + 1];
    size_t pieces = 0;
    for (size_t i = 0; i < count; ++i) {
        auto *base = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(ranges[i].addr));
        if (i == tail && ranges[i].len > 1) {
            remote[pieces++] = iovec{base, ranges[i].len - 1};
            remote[pieces++] = iovec{base + ranges[i].len - 1, 1};
        } else {
            remote[pieces++] = iovec{base, ranges[i].len};
        }
    }
    count = pieces;
    // process_vm_* may stop early (a partly mapped range): go on from where it stopped, so a short transfer that
    // is not a fault still completes, and a fault is reported as one.
    size_t done = 0;
    size_t first = 0;
    while (done < total) {
        iovec local{buf + done, total - done};
        const ssize_t n = to_target ? ::process_vm_writev(pid_, &local, 1, remote + first, count - first, 0)
                                    : ::process_vm_readv(pid_, &local, 1, remote + first, count - first, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (n == 0) {
            errno = EFAULT;
            return false;
        }
        done += static_cast<size_t>(n);
        size_t skip = static_cast<size_t>(n);
        while (first < count && skip >= remote[first].iov_len) {
            skip -= remote[first].iov_len;
            ++first;
        }
        if (first < count && skip > 0) {
            remote[first].iov_base = static_cast<uint8_t *>(remote[first].iov_base) + skip;
            remote[first].iov_len -= skip;
        }
    }
    return true;
}

}  // namespace hwstub
