// TCP_INFO's byte counters on their own: linux/tcp.h has them (glibc's netinet/tcp.h, which the harness includes,
// stops before them) and the two headers cannot meet in one file.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

namespace hwstub_test {

// Bytes the TCP connection of socket @p fd received (tcpi_bytes_received), or UINT64_MAX when it cannot be read.
uint64_t tcp_bytes_received(int fd) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return UINT64_MAX;
    return ti.tcpi_bytes_received;
}

}  // namespace hwstub_test
