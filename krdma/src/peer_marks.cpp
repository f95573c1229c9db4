// The peer-detection map from user space: two bpf(2) map operations, keyed by a socket descriptor.
#include "krdma/peer_marks.hpp"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace krdma {
namespace {

long bpf(int cmd, bpf_attr &a) noexcept { return ::syscall(__NR_bpf, cmd, &a, sizeof a); }

}  // namespace

rdma::Status PeerMarks::mark(int sock) const noexcept {
    if (sock < 0) return rdma::Status(RI_EBADF);
    PeerMark v{};
    v.marked = 1;
    bpf_attr a{};
    a.map_fd = static_cast<uint32_t>(map_.get());
    a.key = reinterpret_cast<uint64_t>(&sock);
    a.value = reinterpret_cast<uint64_t>(&v);
    a.flags = BPF_ANY;
    if (bpf(BPF_MAP_UPDATE_ELEM, a) != 0) return rdma::Status(rdma::from_errno(errno));
    return rdma::Status(RI_OK);
}

rdma::Expected<PeerMark> PeerMarks::look(int sock) const noexcept {
    if (sock < 0) return rdma::Error(RI_EBADF, "not a descriptor");
    PeerMark v{};
    bpf_attr a{};
    a.map_fd = static_cast<uint32_t>(map_.get());
    a.key = reinterpret_cast<uint64_t>(&sock);
    a.value = reinterpret_cast<uint64_t>(&v);
    if (bpf(BPF_MAP_LOOKUP_ELEM, a) != 0) {
        if (errno == ENOENT) return PeerMark{};  // never marked
        return rdma::Error(rdma::from_errno(errno), std::string("peer marks: ") + std::strerror(errno));
    }
    return v;
}

rdma::Expected<PeerKind> PeerMarks::peer(int sock) const noexcept {
    auto m = look(sock);
    if (!m) return m.error();
    const PeerMark &v = *m;
    if (v.marked == 0 || v.peer == 0) return PeerKind::undecided;
    return v.peer == 1 ? PeerKind::layer : PeerKind::plain;
}

}  // namespace krdma
