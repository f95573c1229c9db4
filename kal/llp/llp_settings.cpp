// LLP management: the liveness options of an established connection's socket.
#include "llp_settings.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace kal::llp {
namespace {

rdma::Expected<void> set_int(int fd, int level, int name, long value, const char *what) {
    const int v = static_cast<int>(value);
    if (::setsockopt(fd, level, name, &v, sizeof v) != 0) {
        return rdma::Error(errno, std::string("setsockopt ") + what);
    }
    return {};
}

}  // namespace

rdma::Expected<void> set_liveness(int fd, const LlpSettings &s) {
    if (s.user_timeout.count() > 0) {
        if (auto r = set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, s.user_timeout.count(), "TCP_USER_TIMEOUT"); !r) {
            return r;
        }
    }
    if (s.keepalive_idle.count() == 0) return set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 0, "SO_KEEPALIVE");
    if (auto r = set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, s.keepalive_idle.count(), "TCP_KEEPIDLE"); !r) return r;
    if (auto r = set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, s.keepalive_interval.count(), "TCP_KEEPINTVL"); !r) return r;
    if (auto r = set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, s.keepalive_count, "TCP_KEEPCNT"); !r) return r;
    return set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
}

}  // namespace kal::llp
