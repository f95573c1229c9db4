/**
 * @file mpa_session.hpp
 * @brief LLP management: MPA connection setup (RFC 5044 §7, RFC 6581) on one connected, non-blocking TCP socket,
 *        as a state machine the connection manager drives from its own poll loop.
 *
 * The session never blocks, never owns the socket, allocates nothing on the success path (both frames live in
 * fixed buffers inside the object) and reads exactly the bytes of the peer's MPA frame: the header first, then the
 * private data length it announces. Whatever the peer sends after its frame (an RTR message, the first FPDU) stays
 * in the socket for the provider that takes the stream over in RDMA mode.
 *
 * Typical use (initiator; a responder calls start_responder() and, in MpaState::request_received, accept() or
 * reject()):
 * @code
 *   MpaSession s(fd);
 *   if (auto ok = s.start_initiator(config, private_data, steady_clock::now() + 5s); !ok) ...;
 *   while (!s.done()) {
 *       pollfd p{fd, s.poll_events(), 0};
 *       poll(&p, 1, s.poll_timeout_ms(steady_clock::now()));
 *       if (s.expired(steady_clock::now())) s.time_out();
 *       else s.on_events(p.revents);
 *   }
 *   if (s.state() == MpaState::established) params = to_llp_params(s.result(), true, fd);
 * @endcode
 */
#ifndef KAL_LLP_MPA_SESSION_HPP
#define KAL_LLP_MPA_SESSION_HPP

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "iwarp/mpa.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/ri_verbs.h"

namespace kal::llp {

/** @brief The clock of session deadlines. */
using MpaClock = std::chrono::steady_clock;

/** @brief Which end of the connection setup this session is. */
enum class MpaRole : uint8_t {
    initiator, /**< Connected actively (connect() completed); sends the MPA request. */
    responder  /**< Accepted passively (accept()); receives the request and answers it. */
};

/** @brief Where a session stands. The last three are final. */
enum class MpaState : uint8_t {
    idle,             /**< Constructed; neither start function called yet. */
    sending_request,  /**< Initiator: writing the MPA request (wants POLLOUT). */
    awaiting_reply,   /**< Initiator: reading the reply header and private data (wants POLLIN). */
    awaiting_request, /**< Responder: reading the request header and private data (wants POLLIN). */
    request_received, /**< Responder: a serviceable request is in; waiting for accept() or reject(). */
    sending_reply,    /**< Responder: writing the accept or reject reply (wants POLLOUT). */
    established,      /**< Final: both frames exchanged; result() holds the agreement. */
    rejected,         /**< Final: the connection was refused by the peer (initiator) or by this side's consumer. */
    failed            /**< Final: a protocol error, a lost connection or a time-out; see error() and teardown(). */
};

/** @brief Name of a state, for logs. */
[[nodiscard]] std::string_view to_string(MpaState state) noexcept;

/** @brief What the caller does with the socket once a session is rejected or has failed. */
enum class MpaTeardown : uint8_t {
    none,     /**< The session has neither failed nor been rejected. */
    close,    /**< A reject, or (RFC 5044 §8) an invalid frame, a lost connection or a time-out: close the socket. */
    terminate /**< RFC 6581: the frames were valid but the negotiation (IRD, RTR) failed after the peer entered
                   full operation; have the provider send a Terminate FPDU with term(), then close. */
};

/** @brief MPA connection setup on one connected TCP socket. Movable; not thread-safe. */
class MpaSession {
public:
    /** @brief A session over connected socket @p fd, which must be non-blocking; the caller keeps ownership. */
    explicit MpaSession(int fd) noexcept : fd_(fd) {}

    /**
     * @brief Initiator: queues the MPA request built from @p config with @p private_data (nothing is written until
     *        on_writable()). ::RI_EINVAL when already started or @p config has a revision other than 1 or 2,
     *        ::RI_EMSGSIZE when the private data does not fit the 512-byte limit (508 with revision 2).
     */
    [[nodiscard]] rdma::Expected<void> start_initiator(const iwarp::MpaConfig &config,
                                                       std::span<const uint8_t> private_data,
                                                       MpaClock::time_point deadline);
    /**
     * @brief Responder: starts reading the peer's MPA request, to be judged by @p config. ::RI_EINVAL when already
     *        started or @p config has a revision other than 1 or 2.
     */
    [[nodiscard]] rdma::Expected<void> start_responder(const iwarp::MpaConfig &config,
                                                       MpaClock::time_point deadline);

    /**
     * @brief Responder in MpaState::request_received: answers with an accept reply carrying @p private_data.
     *        @p ird and @p ord cap this side's depths (e.g. the QP's); the session's config caps them too.
     *        ::RI_EINVAL in any other state, ::RI_EMSGSIZE for private data over the limit.
     */
    [[nodiscard]] rdma::Expected<void> accept(std::span<const uint8_t> private_data, uint16_t ird, uint16_t ord);
    /**
     * @brief Responder in MpaState::request_received: answers with a reject reply carrying @p private_data; the
     *        session ends in MpaState::rejected once it is written. ::RI_EINVAL in any other state.
     */
    [[nodiscard]] rdma::Expected<void> reject(std::span<const uint8_t> private_data);

    /** @brief Makes progress after poll() reported @p revents (POLLIN, POLLOUT, POLLERR, POLLHUP). */
    MpaState on_events(short revents);
    /** @brief Reads as much of the peer's frame as the socket has, never past its end. */
    MpaState on_readable();
    /** @brief Writes as much of the queued frame as the socket takes. */
    MpaState on_writable();
    /** @brief The poll() events the session waits for now (POLLIN, POLLOUT or 0 when it waits for nothing). */
    [[nodiscard]] short poll_events() const noexcept;

    /** @brief The deadline given at start. */
    [[nodiscard]] MpaClock::time_point deadline() const noexcept { return deadline_; }
    /** @brief Moves the deadline, e.g. while a consumer is asked to accept. */
    void set_deadline(MpaClock::time_point deadline) noexcept { deadline_ = deadline; }
    /** @brief True when the session is not done and @p now is at or past the deadline. */
    [[nodiscard]] bool expired(MpaClock::time_point now) const noexcept { return !done() && now >= deadline_; }
    /** @brief Milliseconds from @p now to the deadline (rounded up, at least 0), or -1 once done: a poll() time-out. */
    [[nodiscard]] int poll_timeout_ms(MpaClock::time_point now) const noexcept;
    /** @brief Ends an unfinished session as failed with ::RI_ETIMEDOUT (the caller's timer fired). */
    void time_out();

    /** @brief The socket the session works on (still the caller's). */
    [[nodiscard]] int fd() const noexcept { return fd_; }
    /** @brief Current state. */
    [[nodiscard]] MpaState state() const noexcept { return state_; }
    /** @brief Role, from the start function used. */
    [[nodiscard]] MpaRole role() const noexcept { return role_; }
    /** @brief True in a final state. */
    [[nodiscard]] bool done() const noexcept {
        return state_ == MpaState::established || state_ == MpaState::rejected || state_ == MpaState::failed;
    }
    /** @brief The agreement; meaningful in MpaState::established. */
    [[nodiscard]] const iwarp::MpaResult &result() const noexcept { return result_; }
    /**
     * @brief The consumer private data of the peer's frame (after the RFC 6581 IRD/ORD words): the request's for a
     *        responder from MpaState::request_received on, the reply's for an initiator once it is read (also when
     *        it rejects). Empty before. Points into the session.
     */
    [[nodiscard]] std::span<const uint8_t> peer_private_data() const noexcept;
    /** @brief The peer's decoded frame (its private_data points into the session), once read; else nothing. */
    [[nodiscard]] std::optional<iwarp::MpaFrame> peer_frame() const noexcept;
    /** @brief Why the session was rejected (::RI_ECONNREFUSED) or failed; nullptr otherwise. */
    [[nodiscard]] const rdma::Error *error() const noexcept { return error_ ? &*error_ : nullptr; }
    /** @brief The Terminate code of a failure (from error()'s detail), if the failure has one. */
    [[nodiscard]] std::optional<iwarp::TermCode> term() const noexcept;
    /** @brief What to do with the socket after a reject or a failure. */
    [[nodiscard]] MpaTeardown teardown() const noexcept { return teardown_; }
    /**
     * @brief With MpaTeardown::terminate: the Terminate FPDU (the stream's first, framed with the CRC and markers
     *        the valid reply agreed) that tells the responder, already in full operation, why the connection ends.
     *        Empty otherwise.
     */
    [[nodiscard]] std::vector<uint8_t> terminate_fpdu() const;

private:
    static constexpr size_t kFrameMax = iwarp::kMpaFrameHeaderLen + iwarp::kMpaMaxPrivateData;

    void queue(const iwarp::MpaFrame &frame, MpaState after);
    void fail(rdma::Error error, MpaTeardown teardown);
    void on_header();
    void on_frame();
    void on_request(const iwarp::MpaFrame &request);
    void on_reply(const iwarp::MpaFrame &reply);
    void reject_and_fail(const iwarp::MpaFrame &request, const rdma::Error &why);
    [[nodiscard]] bool key_prefix_ok() const noexcept;

    int fd_;
    MpaRole role_ = MpaRole::initiator;
    MpaState state_ = MpaState::idle;
    MpaState after_send_ = MpaState::idle;  // where sending_reply/sending_request lead
    MpaTeardown teardown_ = MpaTeardown::none;
    iwarp::MpaConfig config_{};
    iwarp::MpaResult result_{};
    iwarp::MpaFrame request_{};  // initiator: what we asked for (private_data cleared)
    iwarp::MpaFrame peer_{};     // the peer's frame (private_data cleared; see peer_private_data())
    bool have_header_ = false;  // the 20-byte header is in and rx_need_ covers the whole frame
    bool have_peer_ = false;
    size_t peer_pd_offset_ = 0;  // where the consumer's private data starts in rx_
    MpaClock::time_point deadline_{};
    std::optional<rdma::Error> error_;
    std::optional<rdma::Error> pending_failure_;  // a reject being written before the session fails
    // Exactly one frame each way: the peer's arrives in rx_ (rx_need_ grows from the header to the whole frame),
    // ours leaves from tx_.
    size_t rx_have_ = 0;
    size_t rx_need_ = iwarp::kMpaFrameHeaderLen;
    size_t tx_len_ = 0;
    size_t tx_sent_ = 0;
    std::array<uint8_t, kFrameMax> rx_{};
    std::array<uint8_t, kFrameMax> tx_{};
};

/**
 * @brief The RDMA-mode transition parameters of an established session on socket @p fd: what the QP's provider
 *        needs to take the stream over.
 *
 * - mpa_flags: ::RI_MPA_CRC; ::RI_MPA_MARKERS when markers flow in either direction (the ABI has one bit: a provider
 *   that sees it must ask the session's result which way, or support both); ::RI_MPA_PEER2PEER when an RTR message
 *   is exchanged (RFC 6581 peer-to-peer mode; a revision 2 setup without it is told apart by mpa_revision 2 alone);
 *   ::RI_MPA_INITIATOR for @p initiator.
 * - rtr_type: the RtrBits type in use mapped to ::ri_rtr_type (::RI_RTR_NONE without peer-to-peer).
 * - mss from TCP_MAXSEG; fpdu_max is the largest FPDU that fits one segment: RFC 5044's MULPDU for that MSS plus
 *   the length field, pad, CRC field and the markers it may carry when this side sends markers.
 * - local/remote addresses and ports: from @p ends when given (the caller learned them at accept or connect, which
 *   saves two system calls per connection), else from getsockname()/getpeername().
 * - tcp_snd_nxt/tcp_rcv_nxt stay 0: reading them needs TCP_REPAIR, which needs CAP_NET_ADMIN and stops the
 *   connection; only an offload RNIC migrating the connection needs them, and it gets them its own way.
 *
 * ::RI_EBADF or another errno when the socket cannot be queried, ::RI_EINVAL for a non-IP socket.
 */
[[nodiscard]] rdma::Expected<ri_llp_params_t> to_llp_params(const iwarp::MpaResult &result, bool initiator, int fd,
                                                            const ri_llp_params_t *ends = nullptr);

/** @brief The effective MSS whose MULPDU sizes the FPDUs sent to a peer of this stack (widen_fpdus()). */
inline constexpr size_t kPeerStackEmss = 16384;

/**
 * @brief For a stream whose peer runs this stack (the kAL's peer detection said so): FPDUs of about 16 KiB where
 *        one TCP segment would carry less, and ::RI_LLP_FPDU_FIXED so that the provider keeps them. FPDUs of one
 *        segment cost their framing, CRC and gather entry some 11 times per 16 KiB on a 1500-byte path; this stack's
 *        receivers reassemble FPDUs across segments as RFC 5044 requires. Without markers only (a marker's position
 *        follows the segments); a stream whose MSS already allows as much is left as it is.
 */
void widen_fpdus(ri_llp_params_t &p) noexcept;

}  // namespace kal::llp

#endif  // KAL_LLP_MPA_SESSION_HPP
