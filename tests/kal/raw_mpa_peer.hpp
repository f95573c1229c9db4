// A raw MPA responder on a plain TCP listener of the test process: the far end of an iWARP connection that is not an
// endpoint of any kAL, for the kAL tests that play the peer byte by byte.
#ifndef TESTS_KAL_RAW_MPA_PEER_HPP
#define TESTS_KAL_RAW_MPA_PEER_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "krdma/message.hpp"
#include "mpa_session.hpp"

namespace testutil {

/** @brief Listens on 127.0.0.1 (a port the kernel picks); accepts one connection and answers its MPA request. */
class RawMpaPeer {
public:
    RawMpaPeer() {
        listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!listener_) return;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t alen = sizeof a;
        if (::bind(listener_.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
            ::listen(listener_.get(), 4) != 0 ||
            ::getsockname(listener_.get(), reinterpret_cast<sockaddr *>(&a), &alen) != 0) {
            listener_.reset();
            return;
        }
        port_ = ntohs(a.sin_port);
    }
    /** @brief Whether the listener is up (else errno says why). */
    [[nodiscard]] bool listening() const noexcept { return static_cast<bool>(listener_); }
    /** @brief The listener's port, host byte order. */
    [[nodiscard]] uint16_t port() const noexcept { return port_; }

    /**
     * @brief Accepts one connection (10 s at most), answers its MPA request (no private data, IRD and ORD 8) and
     *        negotiates until established: an empty string, or what failed.
     */
    std::string accept_and_negotiate() {
        pollfd lp{listener_.get(), POLLIN, 0};
        if (::poll(&lp, 1, 10000) != 1) return "nobody connected within 10 s";
        stream_.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!stream_) return "accept failed";
        mpa_ = std::make_unique<kal::llp::MpaSession>(stream_.get());
        if (auto r = mpa_->start_responder(iwarp::MpaConfig{},
                                           kal::llp::MpaClock::now() + std::chrono::seconds(10));
            !r) {
            return "start_responder: " + r.error().to_string();
        }
        if (!negotiate_until(kal::llp::MpaState::request_received)) return "no MPA request came";
        if (auto r = mpa_->accept({}, 8, 8); !r) return "accept: " + r.error().to_string();
        (void)mpa_->on_writable();
        if (!negotiate_until(kal::llp::MpaState::established)) return "the MPA reply did not establish the stream";
        return "";
    }
    /** @brief The accepted connection (after accept_and_negotiate()), non-blocking. */
    [[nodiscard]] int fd() const noexcept { return stream_.get(); }
    /** @brief The MPA session of the accepted connection (after accept_and_negotiate()). */
    [[nodiscard]] kal::llp::MpaSession &mpa() noexcept { return *mpa_; }

private:
    bool negotiate_until(kal::llp::MpaState want) {
        for (int i = 0; i < 200 && mpa_->state() != want && !mpa_->done(); ++i) {
            pollfd p{stream_.get(), mpa_->poll_events() != 0 ? mpa_->poll_events() : short{POLLIN}, 0};
            if (::poll(&p, 1, 50) > 0) (void)mpa_->on_events(p.revents);
        }
        return mpa_->state() == want;
    }

    krdma::UniqueFd listener_;
    krdma::UniqueFd stream_;
    uint16_t port_ = 0;
    std::unique_ptr<kal::llp::MpaSession> mpa_;
};

}  // namespace testutil

#endif  // TESTS_KAL_RAW_MPA_PEER_HPP
