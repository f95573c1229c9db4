// Declining a conversion with MPA's own frames, read and written here on the TCP socket (decline.hpp).
#include "decline.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "iwarp/mpa.hpp"
#include "libc.hpp"
#include "stream.hpp"

namespace openrdma::sockets {
namespace {

using Clock = std::chrono::steady_clock;
// The largest request: header, the RFC 6581 words and the most private data MPA allows.
constexpr size_t kMaxFrame = iwarp::kMpaFrameHeaderLen + iwarp::kMpaIrdOrdLen + iwarp::kMpaMaxPrivateData;

int left_ms(Clock::time_point until) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    return ms > 0 ? static_cast<int>(ms) : 0;
}

// Waits for @p events on @p fd until @p until; false when the time is up.
bool wait_for(int fd, short events, Clock::time_point until) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = real().poll(&p, 1, left_ms(until));
        if (n > 0) return true;
        if (n == 0 || errno != EINTR) return false;
    }
}

using FrameBuffer = std::array<uint8_t, kMaxFrame>;

// Peeks at what @p fd holds until a whole MPA frame of @p kind is there; its size, or an error.
rdma::Expected<size_t> peek_frame(int fd, iwarp::MpaKind kind, FrameBuffer &buf, Clock::time_point until) {
    size_t need = iwarp::kMpaFrameHeaderLen;
    for (;;) {
        const ssize_t n = real().recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return rdma::Error(RI_ECONNRESET, "the connection ended before the peer's MPA frame");
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return rdma::Error(rdma::from_errno(errno), std::string("reading the peer's MPA frame: ") +
                                                            std::strerror(errno));
        }
        const size_t have = n > 0 ? static_cast<size_t>(n) : 0;
        if (have >= iwarp::kMpaFrameHeaderLen) {
            auto pd = iwarp::decode_mpa_header(std::span<const uint8_t>(buf.data(), iwarp::kMpaFrameHeaderLen), kind);
            if (!pd) return pd.error();
            need = iwarp::kMpaFrameHeaderLen + *pd;
            if (have >= need) return need;
        }
        if (Clock::now() >= until) return rdma::Error(RI_ETIMEDOUT, "no MPA frame from the peer in time");
        if (have == 0) {
            if (!wait_for(fd, POLLIN, until)) return rdma::Error(RI_ETIMEDOUT, "no MPA frame from the peer in time");
        } else {
            // Part of the frame is there (it came in two segments): the rest follows within microseconds.
            const timespec pause{0, 50000};
            ::nanosleep(&pause, nullptr);
        }
    }
}

// Takes exactly @p n bytes from @p fd (they are there: peek_frame saw them).
rdma::Expected<void> take(int fd, uint8_t *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = real().recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (r > 0) {
            got += static_cast<size_t>(r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        return rdma::Error(RI_EIO, "the MPA frame seen could not be read");
    }
    return {};
}

rdma::Expected<void> send_all(int fd, std::span<const uint8_t> bytes, Clock::time_point until) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = real().send(fd, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(fd, POLLOUT, until)) continue;
        return rdma::Error(n < 0 ? rdma::from_errno(errno) : RI_EIO, "sending an MPA frame");
    }
    return {};
}

std::span<const uint8_t> decline_bytes(const Hello &h) {
    return {reinterpret_cast<const uint8_t *>(&h), sizeof h};
}

// Waits until @p until for the whole MPA frame of @p kind on @p fd and decodes it; its private data points into
// @p buf. With @p consume the frame's bytes are taken from the socket (exactly them), otherwise only looked at.
rdma::Expected<iwarp::MpaFrame> read_frame(int fd, iwarp::MpaKind kind, FrameBuffer &buf, Clock::time_point until,
                                           bool consume) {
    auto n = peek_frame(fd, kind, buf, until);
    if (!n) return n.error();
    if (consume) {
        if (auto ok = take(fd, buf.data(), *n); !ok) return ok.error();
    }
    return iwarp::decode_mpa(std::span<const uint8_t>(buf.data(), *n), kind);
}

rdma::Expected<void> send_frame(int fd, const iwarp::MpaFrame &f, Clock::time_point until) {
    FrameBuffer out{};
    auto len = iwarp::encode_mpa(f, out);
    if (!len) return len.error();
    return send_all(fd, std::span<const uint8_t>(out.data(), *len), until);
}

}  // namespace

Request peek_request(int fd, std::chrono::milliseconds limit, std::string &why) {
    FrameBuffer buf{};
    auto f = read_frame(fd, iwarp::MpaKind::request, buf, Clock::now() + limit, false);
    if (!f) {
        why = f.error().message();
        return Request::none;
    }
    return Stream::is_decline(f->private_data) ? Request::declines : Request::converts;
}

rdma::Expected<void> decline_request(int fd, std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    FrameBuffer buf{};
    auto request = read_frame(fd, iwarp::MpaKind::request, buf, until, true);
    if (!request) return request.error();
    const Hello h = Stream::hello();  // no receive buffers: the decline
    return send_frame(fd, iwarp::reject_reply(*request, decline_bytes(h)), until);
}

rdma::Expected<void> decline_as_initiator(int fd, std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    const Hello h = Stream::hello();  // no receive buffers: the decline
    if (auto ok = send_frame(fd, iwarp::make_request(iwarp::MpaConfig{}, decline_bytes(h)), until); !ok) {
        return ok.error();
    }
    FrameBuffer buf{};
    auto reply = read_frame(fd, iwarp::MpaKind::reply, buf, until, true);
    if (!reply) return reply.error();
    if (!reply->reject) return rdma::Error(RI_EPROTO, "the peer accepted a conversion this end declined");
    return {};
}

}  // namespace openrdma::sockets
