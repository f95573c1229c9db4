// Abortive teardown after the bytes in flight: FIN, wait for the acknowledgement (or a deadline), then reset.
#include "abort_linger.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>

namespace kal::llp {
namespace {

// While something lingers, how often its send queue is looked at (the peer's acknowledgement has no event).
constexpr int kPollMs = 10;

}  // namespace

void reset_connection(int fd) noexcept {
    // connect() to AF_UNSPEC disconnects a TCP socket with a reset, even while another process holds a descriptor
    // of it (the consumer's uVP): close() would only drop the kAL's reference.
    sockaddr sa{};
    sa.sa_family = AF_UNSPEC;
    (void)::connect(fd, &sa, sizeof sa);
}

size_t unacknowledged(int fd) noexcept {
    int n = 0;
    if (::ioctl(fd, SIOCOUTQ, &n) != 0 || n < 0) return 0;
    return static_cast<size_t>(n);
}

size_t unread(int fd) noexcept {
    int n = 0;
    if (::ioctl(fd, SIOCINQ, &n) != 0 || n < 0) return 0;
    return static_cast<size_t>(n);
}

AbortLinger::~AbortLinger() {
    for (Lingering &l : lingering_) reset_connection(l.sock.get());
}

void AbortLinger::abort(krdma::UniqueFd sock, Clock::time_point now) {
    if (!sock) return;
    if (unacknowledged(sock.get()) == 0) {
        reset_connection(sock.get());
        return;
    }
    (void)::shutdown(sock.get(), SHUT_WR);  // FIN after the bytes in flight; nothing more is written
    lingering_.push_back(Lingering{std::move(sock), now + linger_});
}

int AbortLinger::poll(Clock::time_point now) {
    if (lingering_.empty()) return -1;
    // The kAL's loop calls this on every wake-up; the sockets are looked at (an ioctl each) once per kPollMs.
    if (now < next_look_) {
        return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next_look_ - now).count());
    }
    std::erase_if(lingering_, [now](Lingering &l) {
        if (now < l.deadline && unacknowledged(l.sock.get()) > 0) return false;
        reset_connection(l.sock.get());
        return true;  // closed with its descriptor
    });
    next_look_ = now + std::chrono::milliseconds(kPollMs);
    return lingering_.empty() ? -1 : kPollMs;
}

}  // namespace kal::llp
