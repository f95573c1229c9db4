// Declining a conversion with MPA's own frames, read and written here on the TCP socket (decline.hpp).
#include "decline.hpp"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "iwarp/mpa.hpp"
#include "libc.hpp"
#include "tcp_io.hpp"
#include "stream.hpp"

namespace openrdma::sockets {
namespace {

using Clock = std::chrono::steady_clock;
// The largest request: header, the RFC 6581 words and the most private data MPA allows.
constexpr size_t kMaxFrame = iwarp::kMpaFrameHeaderLen + iwarp::kMpaIrdOrdLen + iwarp::kMpaMaxPrivateData;

using FrameBuffer = std::array<uint8_t, kMaxFrame>;

// Peeks at what @p fd holds until a whole MPA frame of @p kind is there; its size, or an error.
rdma::Expected<size_t> peek_frame(int fd, iwarp::MpaKind kind, FrameBuffer &buf, Clock::time_point until) {
    auto peek = [&](size_t want) -> rdma::Expected<void> {
        const ssize_t n = peek_bytes(fd, buf.data(), want, until);
        if (n < 0 && errno == ECONNRESET) return rdma::Error(RI_ECONNRESET, "the connection ended before the peer's MPA frame");
        if (n < 0) {
            return rdma::Error(rdma::from_errno(errno), std::string("reading the peer's MPA frame: ") +
                                                            std::strerror(errno));
        }
        if (static_cast<size_t>(n) < want) return rdma::Error(RI_ETIMEDOUT, "no MPA frame from the peer in time");
        return {};
    };
    if (auto ok = peek(iwarp::kMpaFrameHeaderLen); !ok) return ok.error();
    auto pd = iwarp::decode_mpa_header(std::span<const uint8_t>(buf.data(), iwarp::kMpaFrameHeaderLen), kind);
    if (!pd) return pd.error();
    const size_t need = iwarp::kMpaFrameHeaderLen + *pd;
    if (auto ok = peek(need); !ok) return ok.error();
    return need;
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
        if (!take_exact(fd, buf.data(), *n)) return rdma::Error(RI_EIO, "the MPA frame seen could not be read");
    }
    return iwarp::decode_mpa(std::span<const uint8_t>(buf.data(), *n), kind);
}

rdma::Expected<void> send_frame(int fd, const iwarp::MpaFrame &f, Clock::time_point until) {
    FrameBuffer out{};
    auto len = iwarp::encode_mpa(f, out);
    if (!len) return len.error();
    if (!send_all(fd, out.data(), *len, until)) {
        return rdma::Error(errno != 0 ? rdma::from_errno(errno) : RI_EIO, "sending an MPA frame");
    }
    return {};
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
