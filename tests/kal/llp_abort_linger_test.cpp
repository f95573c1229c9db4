// Abortive teardown that keeps what the connection already said: a socket with unacknowledged bytes sends FIN after
// them and is reset only once the peer has them (or its time is up); one with nothing in flight is reset at once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "abort_linger.hpp"

namespace kal::llp {
namespace {

using namespace std::chrono_literals;

struct Pair {
    krdma::UniqueFd client, server;
};

// A loopback connection whose receiving side has a small buffer, so a sender that writes on fills its window and
// keeps bytes unacknowledged while the receiver does not read.
Pair tcp_pair() {
    krdma::UniqueFd l(::socket(AF_INET, SOCK_STREAM, 0));
    const int small = 4096;
    ::setsockopt(l.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(l.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l.get(), 1), 0);
    socklen_t len = sizeof a;
    ::getsockname(l.get(), reinterpret_cast<sockaddr *>(&a), &len);
    Pair p;
    p.client = krdma::UniqueFd(::socket(AF_INET, SOCK_STREAM, 0));
    EXPECT_EQ(::connect(p.client.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    p.server = krdma::UniqueFd(::accept(l.get(), nullptr, nullptr));
    return p;
}

// Writes without blocking until the socket takes no more; the bytes written.
size_t fill(int fd) {
    std::vector<char> chunk(65536, 'x');
    size_t total = 0;
    for (;;) {
        ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) return total;
        total += static_cast<size_t>(n);
    }
}

// Reads until end of stream or an error: the bytes read, and errno of the error (0 for an orderly end).
std::pair<size_t, int> drain(int fd) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::vector<char> buf(65536);
    size_t total = 0;
    for (;;) {
        ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n == 0) return {total, 0};
        if (n < 0) return {total, errno};
        total += static_cast<size_t>(n);
    }
}

TEST(LlpAbortLinger, CountsUnreadAndUnacknowledgedBytes) {
    Pair p = tcp_pair();
    ASSERT_EQ(::send(p.client.get(), "0123456789", 10, 0), 10);
    for (int i = 0; i < 100 && unread(p.server.get()) == 0; ++i) ::usleep(1000);
    EXPECT_EQ(unread(p.server.get()), 10u);
    for (int i = 0; i < 500 && unacknowledged(p.client.get()) > 0; ++i) ::usleep(1000);  // a delayed ACK
    EXPECT_EQ(unacknowledged(p.client.get()), 0u) << "the receiver's buffer took it all";
    EXPECT_EQ(unread(-1), 0u);
}

TEST(LlpAbortLinger, NothingInFlightIsResetAtOnce) {
    Pair p = tcp_pair();
    AbortLinger linger;
    linger.abort(std::move(p.client));
    EXPECT_EQ(linger.size(), 0u);
    EXPECT_EQ(linger.poll(), -1);
    auto [bytes, err] = drain(p.server.get());
    EXPECT_EQ(bytes, 0u);
    EXPECT_EQ(err, ECONNRESET);
}

TEST(LlpAbortLinger, BytesInFlightReachThePeerBeforeTheReset) {
    Pair p = tcp_pair();
    const size_t written = fill(p.client.get());
    ASSERT_GT(unacknowledged(p.client.get()), 0u) << "the receiver's window is full";
    AbortLinger linger(5000ms);
    const int fd = p.client.get();
    linger.abort(std::move(p.client));
    EXPECT_EQ(linger.size(), 1u);
    EXPECT_EQ(linger.poll(), 10) << "kept while the peer has not acknowledged";
    // The peer reads everything, then the FIN: nothing was lost to a reset.
    auto [bytes, err] = drain(p.server.get());
    EXPECT_EQ(bytes, written);
    EXPECT_EQ(err, 0);
    // Acknowledged: the next look resets and closes it.
    for (int i = 0; i < 200 && linger.size() > 0; ++i) {
        (void)linger.poll();
        ::usleep(5000);
    }
    EXPECT_EQ(linger.size(), 0u);
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor is closed";
}

// The kAL's loop calls poll() on every wake-up: the sockets are looked at once per 10 ms, not once per call.
TEST(LlpAbortLinger, TheSocketsAreLookedAtOncePerTenMilliseconds) {
    Pair p = tcp_pair();
    (void)fill(p.client.get());
    AbortLinger linger(5000ms);
    const auto t0 = AbortLinger::Clock::now();
    linger.abort(std::move(p.client), t0);
    EXPECT_EQ(linger.poll(t0), 10);
    auto [bytes, err] = drain(p.server.get());  // everything acknowledged now
    EXPECT_GT(bytes, 0u);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(linger.poll(t0 + 1ms), 9) << "not due: the time left until the next look";
    EXPECT_EQ(linger.size(), 1u) << "not looked at before it was due";
    EXPECT_EQ(linger.poll(t0 + 10ms), -1);
    EXPECT_EQ(linger.size(), 0u);
}

TEST(LlpAbortLinger, APeerThatNeverReadsIsResetWhenTheTimeIsUp) {
    Pair p = tcp_pair();
    (void)fill(p.client.get());
    AbortLinger linger(100ms);
    const auto t0 = AbortLinger::Clock::now();
    linger.abort(std::move(p.client), t0);
    EXPECT_EQ(linger.poll(t0 + 50ms), 10);
    EXPECT_EQ(linger.size(), 1u);
    EXPECT_EQ(linger.poll(t0 + 100ms), -1);
    EXPECT_EQ(linger.size(), 0u);
    auto [bytes, err] = drain(p.server.get());
    (void)bytes;  // some of the data may have arrived before the reset
    EXPECT_EQ(err, ECONNRESET);
}

}  // namespace
}  // namespace kal::llp
