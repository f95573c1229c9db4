// The stream pump pieces both providers use (providers/common/stream_pump.hpp), white-box: over a socket pair and
// over a real loopback TCP connection.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "common/stream_pump.hpp"

namespace providers::common {
namespace {

// A connected loopback TCP pair (client, accepted server end), both non-blocking.
std::pair<int, int> tcp_pair() {
    const int l = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l, 1), 0);
    EXPECT_EQ(::getsockname(l, reinterpret_cast<sockaddr *>(&a), &len), 0);
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a);
    const int s = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK);
    ::close(l);
    return {c, s};
}

TEST(StreamPump, ConsumeWalksAPartialWriteThroughTheGatherList) {
    uint8_t a[10], b[20], c[5];
    iovec iov[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
    size_t first = 0;
    EXPECT_EQ(consume(iov, 3, first, 4), 0u);  // inside the first piece
    EXPECT_EQ(first, 0u);
    EXPECT_EQ(iov[0].iov_base, a + 4);
    EXPECT_EQ(iov[0].iov_len, 6u);
    EXPECT_EQ(consume(iov, 3, first, 6), 0u);  // exactly to the end of a piece
    EXPECT_EQ(first, 1u);
    EXPECT_EQ(consume(iov, 3, first, 21), 0u);  // across a piece boundary
    EXPECT_EQ(first, 2u);
    EXPECT_EQ(iov[2].iov_base, c + 1);
    EXPECT_EQ(iov[2].iov_len, 4u);
    EXPECT_EQ(consume(iov, 3, first, 7), 3u);  // past the end: what belongs to the next frame
    EXPECT_EQ(first, 3u);
}

// A socket that takes part of a batch: what consume() leaves is exactly what the peer has not yet received, and
// sending it on delivers every byte once, in order.
TEST(StreamPump, APartialWriteResumesWhereTheSocketStopped) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    const int small = 4096;
    ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    std::vector<uint8_t> data(1 << 20);
    std::iota(data.begin(), data.end(), uint8_t{0});
    // Three pieces of odd sizes: the socket stops inside one of them.
    iovec iov[3] = {{data.data(), 1000}, {data.data() + 1000, 300000}, {data.data() + 301000, data.size() - 301000}};
    size_t first = 0;
    std::vector<uint8_t> got;
    std::vector<uint8_t> buf(65536);
    int partial = 0;
    while (first < 3) {
        const ssize_t n = send_iov(sv[0], iov + first, 3 - first);
        if (n < 0) {
            ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
        } else {
            ++partial;
            EXPECT_EQ(consume(iov, 3, first, static_cast<size_t>(n)), 0u);
        }
        for (ssize_t r; (r = stream_recv(sv[1], buf.data(), buf.size())) > 0;) {
            got.insert(got.end(), buf.begin(), buf.begin() + r);
        }
    }
    EXPECT_GT(partial, 2) << "the socket took the batch in one call: no partial write was tested";
    EXPECT_TRUE(got == data) << "got " << got.size() << " of " << data.size() << " bytes";
    ::close(sv[0]);
    ::close(sv[1]);
}

TEST(StreamPump, RecvmsgAndRecvAreNonBlocking) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);  // blocking sockets: the calls must not wait
    uint8_t b[16];
    EXPECT_EQ(stream_recv(sv[1], b, sizeof b), -1);
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
    iovec v{b, sizeof b};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    EXPECT_EQ(stream_recvmsg(sv[1], &m), -1);
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
    ::close(sv[0]);
    ::close(sv[1]);
}

// The MSS watch reads a TCP socket's MSS and sizes the engine's FPDUs for it; a socket without one stops the watch.
TEST(StreamPump, TheMssIsReadOnTcpAndNotOnASocketPair) {
    auto [c, s] = tcp_pair();
    ASSERT_GE(c, 0);
    ASSERT_GE(s, 0);
    EXPECT_GT(tcp_mss(c), 0u);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    EXPECT_EQ(tcp_mss(sv[0]), 0u);
    iwarp::EmssWatch w;
    EXPECT_FALSE(w.sent(iwarp::EmssWatch::kRecheckBytes - 1));
    EXPECT_TRUE(w.sent(1)) << "due once kRecheckBytes went out";
    ::close(sv[0]);
    ::close(sv[1]);
    ::close(c);
    ::close(s);
}

TEST(StreamPump, FullSocketsShareTheUnsentBudget) {
    constexpr uint64_t kBudget = 4u << 20;
    EXPECT_EQ(UnsentBudget::share(0, 5), 0) << "budget 0: no limit";
    EXPECT_EQ(UnsentBudget::share(kBudget, 1), 0) << "a socket full alone is not limited";
    EXPECT_EQ(UnsentBudget::share(kBudget, 2), 2 << 20);
    EXPECT_EQ(UnsentBudget::share(kBudget, 3), 1 << 20) << "a power of two, rounded down";
    EXPECT_EQ(UnsentBudget::share(kBudget, 32), 128 << 10);
    EXPECT_EQ(UnsentBudget::share(kBudget, 1000), UnsentBudget::kMinShare) << "never below the floor";
    // Lowered at once, raised only fourfold, and "no limit" is the largest.
    EXPECT_TRUE(UnsentBudget::worth_changing(256 << 10, 128 << 10));
    EXPECT_FALSE(UnsentBudget::worth_changing(128 << 10, 256 << 10));
    EXPECT_TRUE(UnsentBudget::worth_changing(128 << 10, 512 << 10));
    EXPECT_FALSE(UnsentBudget::worth_changing(256 << 10, 256 << 10));
    EXPECT_TRUE(UnsentBudget::worth_changing(64 << 10, 0));
    EXPECT_TRUE(UnsentBudget::worth_changing(0, 2 << 20));
    EXPECT_FALSE(UnsentBudget::worth_changing(4 << 20, 0)) << "no limit is only twice the largest limit";
    // On a real TCP socket the limit is set and read back; a socket pair refuses it.
    auto [c, s] = tcp_pair();
    ASSERT_TRUE(UnsentBudget::set_limit(c, UnsentBudget::kFirstLimit));
    int v = 0;
    socklen_t len = sizeof v;
    ASSERT_EQ(::getsockopt(c, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len), 0);
    EXPECT_EQ(v, UnsentBudget::kFirstLimit);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    EXPECT_FALSE(UnsentBudget::set_limit(sv[0], UnsentBudget::kFirstLimit));
    for (int fd : {c, s, sv[0], sv[1]}) ::close(fd);
}

}  // namespace
}  // namespace providers::common
