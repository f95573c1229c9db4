// MPA connection setup on a non-blocking socket: exact-length reads, one frame each way, no blocking.
#include "mpa_session.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>

#include "iwarp/framing.hpp"
#include "krdma/net_addr.hpp"

namespace kal::llp {
namespace {

using iwarp::MpaFrame;
using iwarp::MpaKind;

// RFC 5044 §7.1: the 16-byte key leads every request and reply.
constexpr size_t kKeyLen = 16;

// Socket errors in the RNIC-PI vocabulary: every way of losing the peer reads as a reset.
int llp_errno(int e) noexcept {
    switch (e) {
        case EPIPE:
        case ECONNRESET:
        case ECONNABORTED: return RI_ECONNRESET;
        default: return e;
    }
}

rdma::Error socket_error(int e, const char *what) {
    return rdma::Error(llp_errno(e), std::string("MPA: ") + what + ": " + std::strerror(e),
                       iwarp::term_detail(iwarp::term::kLlpConnectionLost));
}

bool is_negotiation_term(const iwarp::TermCode &t) noexcept {
    return t == iwarp::term::kLlpInsufficientIrd || t == iwarp::term::kLlpNoMatchingRtr;
}

uint32_t rtr_to_ri(uint8_t rtr) noexcept {
    switch (rtr) {
        case iwarp::kRtrSend: return RI_RTR_SEND;
        case iwarp::kRtrWrite: return RI_RTR_WRITE;
        case iwarp::kRtrRead: return RI_RTR_READ;
        default: return RI_RTR_NONE;  // no peer-to-peer mode
    }
}

}  // namespace

std::string_view to_string(MpaState state) noexcept {
    switch (state) {
        case MpaState::idle: return "idle";
        case MpaState::sending_request: return "sending_request";
        case MpaState::awaiting_reply: return "awaiting_reply";
        case MpaState::awaiting_request: return "awaiting_request";
        case MpaState::request_received: return "request_received";
        case MpaState::sending_reply: return "sending_reply";
        case MpaState::established: return "established";
        case MpaState::rejected: return "rejected";
        case MpaState::failed: return "failed";
    }
    return "?";
}

rdma::Expected<void> MpaSession::start_initiator(const iwarp::MpaConfig &config,
                                                 std::span<const uint8_t> private_data,
                                                 MpaClock::time_point deadline) {
    if (state_ != MpaState::idle) return rdma::Error(RI_EINVAL, "MPA: the session was already started");
    if (config.revision != 1 && config.revision != 2) {
        return rdma::Error(RI_EINVAL, "MPA: revision " + std::to_string(config.revision) +
                                          " is not supported; configure 1 or 2");
    }
    MpaFrame request = iwarp::make_request(config, private_data);
    auto n = iwarp::encode_mpa(request, tx_);
    if (!n) return n.error();
    request.private_data = {};  // only the negotiated fields are needed to check the reply
    request_ = request;
    tx_len_ = *n;
    tx_sent_ = 0;
    role_ = MpaRole::initiator;
    config_ = config;
    deadline_ = deadline;
    state_ = MpaState::sending_request;
    after_send_ = MpaState::awaiting_reply;
    return {};
}

rdma::Expected<void> MpaSession::start_responder(const iwarp::MpaConfig &config, MpaClock::time_point deadline) {
    if (state_ != MpaState::idle) return rdma::Error(RI_EINVAL, "MPA: the session was already started");
    if (config.revision != 1 && config.revision != 2) {
        return rdma::Error(RI_EINVAL, "MPA: revision " + std::to_string(config.revision) +
                                          " is not supported; configure 1 or 2");
    }
    role_ = MpaRole::responder;
    config_ = config;
    deadline_ = deadline;
    state_ = MpaState::awaiting_request;
    return {};
}

rdma::Expected<void> MpaSession::accept(std::span<const uint8_t> private_data, uint16_t ird, uint16_t ord) {
    if (role_ != MpaRole::responder || state_ != MpaState::request_received) {
        return rdma::Error(RI_EINVAL, "MPA: accept() needs a responder holding a request, not one in state " +
                                          std::string(to_string(state_)));
    }
    iwarp::MpaConfig capped = config_;
    capped.ird = std::min(capped.ird, ird);
    capped.ord = std::min(capped.ord, ord);
    auto response = iwarp::respond(capped, *peer_frame());
    if (!response) return response.error();  // cannot happen: the same request passed with higher limits
    response->reply.private_data = private_data;
    auto n = iwarp::encode_mpa(response->reply, tx_);
    if (!n) return n.error();  // still in request_received: the consumer may retry or reject
    result_ = response->result;
    tx_len_ = *n;
    tx_sent_ = 0;
    state_ = MpaState::sending_reply;
    after_send_ = MpaState::established;
    return {};
}

rdma::Expected<void> MpaSession::reject(std::span<const uint8_t> private_data) {
    if (role_ != MpaRole::responder || state_ != MpaState::request_received) {
        return rdma::Error(RI_EINVAL, "MPA: reject() needs a responder holding a request, not one in state " +
                                          std::string(to_string(state_)));
    }
    auto n = iwarp::encode_mpa(iwarp::reject_reply(*peer_frame(), private_data), tx_);
    if (!n) return n.error();
    tx_len_ = *n;
    tx_sent_ = 0;
    state_ = MpaState::sending_reply;
    after_send_ = MpaState::rejected;
    return {};
}

MpaState MpaSession::on_events(short revents) {
    if (done()) return state_;
    if ((revents & (POLLERR | POLLHUP)) != 0 && poll_events() == 0) {
        // Waiting for the consumer: we must not read (the next bytes are not ours), so learn the error here.
        int err = 0;
        socklen_t len = sizeof(err);
        if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0) err = ECONNRESET;
        fail(socket_error(err, "the connection failed while the request waited for a decision"),
             MpaTeardown::close);
        return state_;
    }
    // An error or hang-up shows up as the result of the next recv()/send(), so both paths handle it.
    if ((revents & (POLLIN | POLLERR | POLLHUP)) != 0 && (poll_events() & POLLIN) != 0) on_readable();
    if ((revents & (POLLOUT | POLLERR | POLLHUP)) != 0 && (poll_events() & POLLOUT) != 0) on_writable();
    return state_;
}

short MpaSession::poll_events() const noexcept {
    switch (state_) {
        case MpaState::sending_request:
        case MpaState::sending_reply: return POLLOUT;
        case MpaState::awaiting_reply:
        case MpaState::awaiting_request: return POLLIN;
        case MpaState::idle:
        case MpaState::request_received:
        case MpaState::established:
        case MpaState::rejected:
        case MpaState::failed: return 0;
    }
    return 0;
}

bool MpaSession::key_prefix_ok() const noexcept {
    // The key of the frame we expect, taken from the codec rather than spelled out twice.
    std::array<uint8_t, iwarp::kMpaFrameHeaderLen> expected{};
    MpaFrame f;
    f.kind = role_ == MpaRole::initiator ? MpaKind::reply : MpaKind::request;
    (void)iwarp::encode_mpa(f, expected);
    size_t n = std::min(rx_have_, kKeyLen);
    return std::memcmp(rx_.data(), expected.data(), n) == 0;
}

MpaState MpaSession::on_readable() {
    while (state_ == MpaState::awaiting_reply || state_ == MpaState::awaiting_request) {
        // Never ask for more than the rest of the current frame: what follows belongs to the RDMA stream.
        ssize_t n = ::recv(fd_, rx_.data() + rx_have_, rx_need_ - rx_have_, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            fail(socket_error(errno, "receiving the peer's frame"), MpaTeardown::close);
            break;
        }
        if (n == 0) {
            fail(rdma::Error(RI_ECONNRESET,
                             "MPA: the peer closed the connection after " + std::to_string(rx_have_) + " of " +
                                 std::to_string(rx_need_) + " bytes of its " +
                                 (role_ == MpaRole::initiator ? "reply" : "request"),
                             iwarp::term_detail(iwarp::term::kLlpConnectionLost)),
                 MpaTeardown::close);
            break;
        }
        bool in_header = rx_need_ == iwarp::kMpaFrameHeaderLen && !have_header_;
        rx_have_ += static_cast<size_t>(n);
        // Fail garbage (an HTTP request, a stray client) on its first wrong byte instead of waiting for 20.
        if (in_header && !key_prefix_ok()) {
            fail(rdma::Error(RI_EPROTO,
                             std::string("MPA: the peer's first bytes are not an MPA ") +
                                 (role_ == MpaRole::initiator ? "reply" : "request") + " key",
                             iwarp::term_detail(iwarp::term::kLlpInvalidMpaFrame)),
                 MpaTeardown::close);
            break;
        }
        if (rx_have_ < rx_need_) continue;
        if (in_header) {
            on_header();
        } else {
            on_frame();
        }
    }
    return state_;
}

void MpaSession::on_header() {
    MpaKind kind = role_ == MpaRole::initiator ? MpaKind::reply : MpaKind::request;
    auto pd_len = iwarp::decode_mpa_header(std::span<const uint8_t>(rx_.data(), iwarp::kMpaFrameHeaderLen), kind);
    if (!pd_len) {
        // The key matched (checked as it arrived), so this is an MPA peer asking for too much private data.
        if (role_ == MpaRole::responder) {
            // Decode the header with its length patched to four zero bytes (room for revision 2's IRD/ORD words)
            // for the revision and CRC the reject must echo; the private data itself is never read.
            std::array<uint8_t, iwarp::kMpaFrameHeaderLen + iwarp::kMpaIrdOrdLen> head{};
            std::copy_n(rx_.begin(), iwarp::kMpaFrameHeaderLen, head.begin());
            head[iwarp::kMpaFrameHeaderLen - 2] = 0;
            head[iwarp::kMpaFrameHeaderLen - 1] = static_cast<uint8_t>(iwarp::kMpaIrdOrdLen);
            auto f = iwarp::decode_mpa(head, kind);
            reject_and_fail(f ? *f : MpaFrame{}, pd_len.error());
        } else {
            fail(pd_len.error(), MpaTeardown::close);
        }
        return;
    }
    have_header_ = true;
    rx_need_ = iwarp::kMpaFrameHeaderLen + *pd_len;
    if (*pd_len == 0) on_frame();
}

void MpaSession::on_frame() {
    MpaKind kind = role_ == MpaRole::initiator ? MpaKind::reply : MpaKind::request;
    auto f = iwarp::decode_mpa(std::span<const uint8_t>(rx_.data(), rx_need_), kind);
    if (!f) {
        if (role_ == MpaRole::responder) {
            reject_and_fail(MpaFrame{}, f.error());
        } else {
            fail(f.error(), MpaTeardown::close);
        }
        return;
    }
    have_peer_ = true;
    peer_pd_offset_ = static_cast<size_t>(f->private_data.data() - rx_.data());
    peer_ = *f;
    peer_.private_data = {};
    if (role_ == MpaRole::initiator) {
        on_reply(*f);
    } else {
        on_request(*f);
    }
}

void MpaSession::on_request(const MpaFrame &request) {
    // Judge now, so that a request this RNIC cannot serve is refused without bothering the consumer; accept()
    // repeats the decision with the consumer's IRD/ORD.
    auto response = iwarp::respond(config_, request);
    if (!response) {
        reject_and_fail(request, response.error());
        return;
    }
    state_ = MpaState::request_received;
}

void MpaSession::on_reply(const MpaFrame &reply) {
    auto res = iwarp::complete(config_, request_, reply);
    if (res) {
        result_ = *res;
        state_ = MpaState::established;
        return;
    }
    if (reply.reject) {
        error_ = rdma::Error(RI_ECONNREFUSED, "MPA: the peer rejected the connection");
        teardown_ = MpaTeardown::close;
        state_ = MpaState::rejected;
        return;
    }
    // RFC 5044 §8: an invalid reply closes the connection at once; RFC 6581: a valid reply whose IRD or RTR choice
    // this side cannot live with is answered with a Terminate, because the responder is already in full operation.
    iwarp::TermCode t;
    bool negotiation = iwarp::term_from_detail(res.error().detail(), t) && is_negotiation_term(t);
    fail(res.error(), negotiation ? MpaTeardown::terminate : MpaTeardown::close);
}

void MpaSession::reject_and_fail(const MpaFrame &request, const rdma::Error &why) {
    auto n = iwarp::encode_mpa(iwarp::reject_reply(request, {}), tx_);
    if (!n) {  // cannot happen: a reject without private data always fits
        fail(why, MpaTeardown::close);
        return;
    }
    tx_len_ = *n;
    tx_sent_ = 0;
    pending_failure_ = why;
    state_ = MpaState::sending_reply;
    after_send_ = MpaState::failed;
}

MpaState MpaSession::on_writable() {
    while (state_ == MpaState::sending_request || state_ == MpaState::sending_reply) {
        ssize_t n = ::send(fd_, tx_.data() + tx_sent_, tx_len_ - tx_sent_, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (pending_failure_) {
                fail(*pending_failure_, MpaTeardown::close);  // the reason we were rejecting matters more
            } else {
                fail(socket_error(errno, "sending our frame"), MpaTeardown::close);
            }
            break;
        }
        tx_sent_ += static_cast<size_t>(n);
        if (tx_sent_ < tx_len_) continue;
        switch (after_send_) {
            case MpaState::failed:
                fail(pending_failure_.value_or(rdma::Error(RI_EPROTO, "MPA: request refused")), MpaTeardown::close);
                break;
            case MpaState::rejected:
                error_ = rdma::Error(RI_ECONNREFUSED, "MPA: this side rejected the connection");
                teardown_ = MpaTeardown::close;
                state_ = MpaState::rejected;
                break;
            case MpaState::idle:
            case MpaState::sending_request:
            case MpaState::awaiting_reply:
            case MpaState::awaiting_request:
            case MpaState::request_received:
            case MpaState::sending_reply:
            case MpaState::established: state_ = after_send_; break;
        }
    }
    return state_;
}

void MpaSession::fail(rdma::Error error, MpaTeardown teardown) {
    error_ = std::move(error);
    teardown_ = teardown;
    state_ = MpaState::failed;
}

int MpaSession::poll_timeout_ms(MpaClock::time_point now) const noexcept {
    if (done()) return -1;
    if (now >= deadline_) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now).count();
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

void MpaSession::time_out() {
    if (done()) return;
    fail(rdma::Error(RI_ETIMEDOUT, "MPA: connection setup did not finish before its deadline (state " +
                                       std::string(to_string(state_)) + ")"),
         MpaTeardown::close);
}

std::span<const uint8_t> MpaSession::peer_private_data() const noexcept {
    if (!have_peer_) return {};
    return {rx_.data() + peer_pd_offset_, rx_need_ - peer_pd_offset_};
}

std::vector<uint8_t> MpaSession::terminate_fpdu() const {
    const std::optional<iwarp::TermCode> code = term();
    const std::optional<MpaFrame> reply = peer_frame();
    if (teardown_ != MpaTeardown::terminate || !code || !reply) return {};
    iwarp::Terminate t;
    t.code = *code;  // no offending DDP or RDMAP header: the failure is the negotiation's
    uint8_t payload[iwarp::kTerminateMaxLen];
    const size_t n = iwarp::encode_terminate(t, payload);
    iwarp::Header h;
    h.opcode = static_cast<uint8_t>(iwarp::Opcode::terminate);
    h.qn = static_cast<uint32_t>(iwarp::Queue::terminate);
    h.msn = 1;
    // RFC 5044 §7.1: CRC unless both sides declined it; markers toward the responder if its reply asked for them.
    iwarp::Transmitter tx(iwarp::FramingOptions{request_.crc || reply->crc, reply->markers});
    auto frame = std::make_unique<iwarp::TxFrame>();  // 5 KiB: not on the stack
    tx.build(h, std::span<const uint8_t>(payload, n), {}, *frame);
    std::vector<uint8_t> out;
    out.reserve(frame->bytes);
    for (size_t i = 0; i < frame->iovcnt; ++i) {
        const auto *b = static_cast<const uint8_t *>(frame->iov[i].iov_base);
        out.insert(out.end(), b, b + frame->iov[i].iov_len);
    }
    return out;
}

std::optional<MpaFrame> MpaSession::peer_frame() const noexcept {
    if (!have_peer_) return std::nullopt;
    MpaFrame f = peer_;
    f.private_data = peer_private_data();
    return f;
}

std::optional<iwarp::TermCode> MpaSession::term() const noexcept {
    iwarp::TermCode t;
    if (!error_ || !iwarp::term_from_detail(error_->detail(), t)) return std::nullopt;
    return t;
}

void widen_fpdus(ri_llp_params_t &p) noexcept {
    if ((p.mpa_flags & RI_MPA_MARKERS) != 0) return;
    const size_t ulpdu = iwarp::mulpdu(kPeerStackEmss, false);
    const size_t fpdu = iwarp::kMpaLengthLen + ulpdu + iwarp::pad_len(ulpdu) + iwarp::kMpaCrcLen;
    if (fpdu <= p.fpdu_max) return;
    p.fpdu_max = static_cast<uint32_t>(fpdu);
    p.mpa_flags |= RI_LLP_FPDU_FIXED;
}

rdma::Expected<ri_llp_params_t> to_llp_params(const iwarp::MpaResult &result, bool initiator, int fd,
                                              const ri_llp_params_t *ends) {
    ri_llp_params_t p{};
    p.fd = fd;
    p.mpa_revision = result.revision;
    if (result.crc) p.mpa_flags |= RI_MPA_CRC;
    if (result.markers_tx || result.markers_rx) p.mpa_flags |= RI_MPA_MARKERS;
    if (result.peer2peer) p.mpa_flags |= RI_MPA_PEER2PEER;
    if (initiator) p.mpa_flags |= RI_MPA_INITIATOR;
    if (result.rfc7306) p.mpa_flags |= RI_MPA_RFC7306;
    p.rtr_type = result.peer2peer ? rtr_to_ri(result.rtr) : uint32_t{RI_RTR_NONE};
    p.ird = result.ird;
    p.ord = result.ord;

    int mss = 0;
    socklen_t len = sizeof(mss);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0) {
        return rdma::Error(errno, std::string("LLP: TCP_MAXSEG of the stream: ") + std::strerror(errno));
    }
    p.mss = static_cast<uint32_t>(mss);
    // The largest FPDU that still fits one segment: MULPDU plus length field, pad, CRC field and the markers.
    size_t emss = static_cast<size_t>(mss);
    size_t ulpdu = iwarp::mulpdu(emss, result.markers_tx);
    size_t fpdu = iwarp::kMpaLengthLen + ulpdu + iwarp::pad_len(ulpdu) + iwarp::kMpaCrcLen;
    if (result.markers_tx) fpdu += iwarp::kMarkerLen * ((emss + iwarp::kMarkerInterval - 1) / iwarp::kMarkerInterval);
    p.fpdu_max = static_cast<uint32_t>(fpdu);

    if (ends != nullptr) {
        p.local = ends->local;
        p.local_port = ends->local_port;
        p.remote = ends->remote;
        p.remote_port = ends->remote_port;
        return p;
    }
    sockaddr_storage ss{};
    len = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) {
        return rdma::Error(errno, std::string("LLP: local address of the stream: ") + std::strerror(errno));
    }
    auto local = krdma::net_addr_from_sockaddr(ss, &p.local_port);
    if (!local) return local.error();
    p.local = *local;
    ss = sockaddr_storage{};
    len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) {
        return rdma::Error(errno, std::string("LLP: remote address of the stream: ") + std::strerror(errno));
    }
    auto remote = krdma::net_addr_from_sockaddr(ss, &p.remote_port);
    if (!remote) return remote.error();
    p.remote = *remote;
    return p;
}

}  // namespace kal::llp
