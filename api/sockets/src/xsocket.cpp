// The extended sockets interface (openrdma/xsocket.h) over the layer's RDMA streams.
#include "openrdma/xsocket.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <map>
#include <memory>
#include <mutex>

#include "device.hpp"
#include "stream.hpp"

#define OPENRDMA_EXPORT __attribute__((visibility("default")))

namespace openrdma::sockets {
/** @brief The stream behind @p fd when it is in RDMA mode (else null, and @p why says what it is). preload.cpp. */
std::shared_ptr<Stream> stream_of(int fd, const char **why, bool *nonblock);
}  // namespace openrdma::sockets

using namespace openrdma::sockets;

namespace {

// A registration: its region, where it lies, and the RNIC whose protection zone holds it.
struct Registered {
    std::shared_ptr<ual::MemoryRegion> mr;
    uint64_t addr = 0;
    uint64_t length = 0;
    Device *device = nullptr;
};

std::mutex g_mutex;
std::map<int64_t, Registered> g_regs;
int64_t g_next = 1;

int fail(int err) {
    errno = err;
    return -1;
}

// The stream of @p fd, or null with errno set (EBADF, or EOPNOTSUPP: not in RDMA mode).
std::shared_ptr<Stream> rdma_stream(int fd, bool *nonblock = nullptr) {
    const char *why = nullptr;
    auto s = stream_of(fd, &why, nonblock);
    if (!s) errno = (::fcntl(fd, F_GETFD) < 0) ? EBADF : EOPNOTSUPP;
    return s;
}

// The local gather element for [offset, offset + len) of registration @p handle, on the same RNIC as @p s.
bool local_range(const Stream &s, int64_t handle, size_t offset, size_t len, ri_sge_t &sge) {
    std::lock_guard lock(g_mutex);
    auto it = g_regs.find(handle);
    if (it == g_regs.end() || it->second.device != s.device().get()) return (errno = EINVAL), false;
    const Registered &r = it->second;
    if (offset > r.length || len > r.length - offset || len > UINT32_MAX) return (errno = EINVAL), false;
    sge = ri_sge_t{r.addr + offset, static_cast<uint32_t>(len), r.mr->keys().lkey};
    return true;
}

}  // namespace

extern "C" {

OPENRDMA_EXPORT int xs_rdma_mode(int fd, const char **why) {
    const char *w = nullptr;
    if (stream_of(fd, &w, nullptr)) return 1;
    if (::fcntl(fd, F_GETFD) < 0) return fail(EBADF);
    if (why != nullptr) *why = w;
    return 0;
}

OPENRDMA_EXPORT int64_t xs_register(int fd, void *addr, size_t len, unsigned access, xs_region_t *region) {
    auto s = rdma_stream(fd);
    if (!s) return -1;
    if (addr == nullptr || len == 0 || (access & ~(XS_REMOTE_READ | XS_REMOTE_WRITE)) != 0) return fail(EINVAL);
    uint32_t ri = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE;
    if ((access & XS_REMOTE_READ) != 0) ri |= RI_ACCESS_REMOTE_READ;
    if ((access & XS_REMOTE_WRITE) != 0) ri |= RI_ACCESS_REMOTE_WRITE;
    auto mr = s->device()->pz().register_memory(addr, len, ri);
    if (!mr) return fail(mr.error().code() == RI_ENOMEM ? ENOMEM : (mr.error().code() == RI_EPERM ? EPERM : EINVAL));
    std::lock_guard lock(g_mutex);
    const int64_t h = g_next++;
    g_regs[h] = Registered{*mr, reinterpret_cast<uint64_t>(addr), len, s->device().get()};
    if (region != nullptr) {
        *region = xs_region_t{reinterpret_cast<uint64_t>(addr), len, (*mr)->keys().rkey, access, 0};
    }
    return h;
}

OPENRDMA_EXPORT int xs_deregister(int fd, int64_t handle) {
    (void)fd;
    std::shared_ptr<ual::MemoryRegion> mr;
    {
        std::lock_guard lock(g_mutex);
        auto it = g_regs.find(handle);
        if (it == g_regs.end()) return fail(EINVAL);
        mr = it->second.mr;
        g_regs.erase(it);
    }
    const auto st = mr->close();
    return st.ok() ? 0 : fail(EBUSY);
}

OPENRDMA_EXPORT int xs_advertise(int fd, const xs_region_t *region) {
    bool nonblock = false;
    auto s = rdma_stream(fd, &nonblock);
    if (!s) return -1;
    if (region == nullptr) return fail(EINVAL);
    const AdvertWire a{region->addr, region->length, region->rkey, region->access, region->tag};
    const int rc = s->advertise(a, nonblock);
    return rc == 0 ? 0 : fail(-rc);
}

OPENRDMA_EXPORT int xs_peer_region(int fd, xs_region_t *region, int nonblock) {
    auto s = rdma_stream(fd);
    if (!s) return -1;
    if (region == nullptr) return fail(EINVAL);
    AdvertWire a{};
    const int rc = s->peer_region(a, nonblock != 0);
    if (rc != 0) return fail(-rc);
    *region = xs_region_t{a.addr, a.length, a.rkey, a.access, a.tag};
    return 0;
}

static int one_sided(int fd, bool read, int64_t handle, size_t offset, size_t len, const xs_region_t *remote,
                     uint64_t remote_offset, uint64_t context) {
    bool nonblock = false;
    auto s = rdma_stream(fd, &nonblock);
    if (!s) return -1;
    if (remote == nullptr || remote_offset > remote->length || len > remote->length - remote_offset) return fail(EINVAL);
    ri_sge_t sge{};
    if (!local_range(*s, handle, offset, len, sge)) return -1;
    const int rc = s->rdma(read, sge, remote->addr + remote_offset, remote->rkey, context, nonblock);
    return rc == 0 ? 0 : fail(-rc);
}

OPENRDMA_EXPORT int xs_write(int fd, int64_t handle, size_t offset, size_t len, const xs_region_t *remote,
                             uint64_t remote_offset, uint64_t context) {
    return one_sided(fd, false, handle, offset, len, remote, remote_offset, context);
}

OPENRDMA_EXPORT int xs_read(int fd, int64_t handle, size_t offset, size_t len, const xs_region_t *remote,
                            uint64_t remote_offset, uint64_t context) {
    return one_sided(fd, true, handle, offset, len, remote, remote_offset, context);
}

OPENRDMA_EXPORT int xs_send(int fd, int64_t handle, size_t offset, size_t len, uint64_t context) {
    bool nonblock = false;
    auto s = rdma_stream(fd, &nonblock);
    if (!s) return -1;
    ri_sge_t sge{};
    if (len == 0 || !local_range(*s, handle, offset, len, sge)) return len == 0 ? fail(EINVAL) : -1;
    const int rc = s->send_registered(sge, context, nonblock);
    return rc == 0 ? 0 : fail(-rc);
}

OPENRDMA_EXPORT int xs_completion_fd(int fd) {
    auto s = rdma_stream(fd);
    if (!s) return -1;
    return s->completion_fd();
}

OPENRDMA_EXPORT int xs_poll(int fd, xs_completion_t *out, int max) {
    auto s = rdma_stream(fd);
    if (!s) return -1;
    if (out == nullptr || max < 0) return fail(EINVAL);
    static_assert(sizeof(XsCompletion) == sizeof(xs_completion_t));
    return static_cast<int>(s->take_completions(reinterpret_cast<XsCompletion *>(out), static_cast<size_t>(max)));
}

}  // extern "C"
