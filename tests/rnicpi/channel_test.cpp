// The same-host channel (rnicpi/cpp/channel.hpp): what the kAL makes, what a provider reads and writes, and what
// a peer that breaks the rules gets.
#include "rnicpi/cpp/channel.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace {

using rdma::provider::Channel;
using rdma::provider::make_channel;

// Both ends of a fresh channel, opened.
struct Pair {
    explicit Pair(uint64_t ring = 4096) {
        int ends[2];
        const int e = make_channel(ring, ends);
        EXPECT_EQ(e, 0) << "make_channel: " << std::strerror(e);
        if (e != 0) return;
        EXPECT_EQ(a.open(ends[0]), RI_OK) << "side 0 could not open its end";
        EXPECT_EQ(b.open(ends[1]), RI_OK) << "side 1 could not open its end";
    }
    Channel a, b;
};

ssize_t write_all(Channel &c, const void *p, size_t n) {
    iovec v{const_cast<void *>(p), n};
    return c.write(&v, 1);
}

bool bell_rang(const Channel &c) {
    pollfd p{c.bell(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
}

TEST(Channel, MakeRefusesARingThatIsNotAPowerOfTwoInRange) {
    int ends[2];
    EXPECT_EQ(make_channel(5000, ends), EINVAL) << "5000 bytes is not a power of two";
    EXPECT_EQ(make_channel(2048, ends), EINVAL) << "below the smallest ring";
    EXPECT_EQ(ends[0], -1) << "nothing may be left open on failure";
}

TEST(Channel, BytesGoEachWayInOrderAcrossTheRingsEnd) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open()) << "the pair did not open";
    std::vector<uint8_t> out(10000), in(10000);
    std::iota(out.begin(), out.end(), uint8_t{7});
    size_t sent = 0, got = 0;
    // The ring holds 4096 bytes: the stream wraps around it twice, read in odd-sized pieces.
    while (got < out.size()) {
        if (sent < out.size()) {
            const ssize_t n = write_all(p.a, out.data() + sent, out.size() - sent);
            if (n > 0) sent += static_cast<size_t>(n);
        }
        const ssize_t n = p.b.read(in.data() + got, std::min<size_t>(777, in.size() - got));
        ASSERT_TRUE(n > 0 || errno == EAGAIN) << "read failed: " << std::strerror(errno);
        if (n > 0) got += static_cast<size_t>(n);
    }
    EXPECT_EQ(in, out) << "the bytes read are not the bytes written, in order";
    const uint8_t back[3] = {1, 2, 3};
    ASSERT_EQ(write_all(p.b, back, 3), 3) << "the other direction took no bytes";
    uint8_t r[3] = {};
    EXPECT_EQ(p.a.read(r, 3), 3);
    EXPECT_EQ(std::memcmp(r, back, 3), 0) << "the other direction's bytes changed";
}

TEST(Channel, AFullRingSaysEagainAndAnArmedWriterIsRungWhenRoomComes) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open());
    std::vector<uint8_t> big(8192, 0x5a);
    ASSERT_EQ(write_all(p.a, big.data(), big.size()), 4096) << "a write takes what fits, no more";
    errno = 0;
    EXPECT_EQ(write_all(p.a, big.data(), 1), -1);
    EXPECT_EQ(errno, EAGAIN) << "a full ring must answer EAGAIN, as a full socket does";
    EXPECT_TRUE(p.a.arm_write()) << "no room came, so the writer may sleep";
    EXPECT_FALSE(bell_rang(p.a)) << "nobody rang yet";
    uint8_t r[100];
    ASSERT_EQ(p.b.read(r, sizeof r), 100);
    EXPECT_TRUE(bell_rang(p.a)) << "the reader freed room for a waiting writer and did not ring";
    EXPECT_TRUE(p.a.drain_bell()) << "the peer is there";
    EXPECT_FALSE(bell_rang(p.a)) << "drain_bell() left bells behind";
}

TEST(Channel, AnArmedReaderIsRungOnceAndAPollingOneNever) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open());
    const uint8_t x = 1;
    ASSERT_TRUE(p.b.arm_read()) << "an empty ring may be slept on";
    ASSERT_EQ(write_all(p.a, &x, 1), 1);
    ASSERT_EQ(write_all(p.a, &x, 1), 1);
    EXPECT_TRUE(bell_rang(p.b)) << "bytes for a sleeping reader and no bell";
    char bells[8];
    EXPECT_EQ(::recv(p.b.bell(), bells, sizeof bells, MSG_DONTWAIT), 1) << "two writes to one sleep must ring once";
    p.b.disarm_read();
    ASSERT_EQ(write_all(p.a, &x, 1), 1);
    EXPECT_FALSE(bell_rang(p.b)) << "a reader that polls on its own must not be rung (a system call per message)";
    EXPECT_FALSE(p.b.arm_read()) << "bytes are waiting: arming must say so instead of sleeping";
}

TEST(Channel, TheWritersCloseIsTheEndAfterTheLastByte) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open());
    const uint8_t x[2] = {9, 8};
    ASSERT_EQ(write_all(p.a, x, 2), 2);
    p.a.close_write();
    errno = 0;
    EXPECT_EQ(write_all(p.a, x, 1), -1) << "no writes after close_write()";
    EXPECT_EQ(errno, EPIPE);
    uint8_t r[8];
    EXPECT_EQ(p.b.read(r, sizeof r), 2) << "the bytes before the end come first";
    EXPECT_EQ(p.b.read(r, sizeof r), 0) << "then the end, as recv() answers after a FIN";
}

TEST(Channel, APeerThatGoesAwayIsAResetOnceItsBytesAreRead) {
    Pair p;
    ASSERT_TRUE(p.a.is_open() && p.b.is_open());
    const uint8_t x = 3;
    ASSERT_EQ(write_all(p.a, &x, 1), 1);
    p.a.reset();  // its process died, say: its end of the bell closes
    EXPECT_TRUE(bell_rang(p.b)) << "the end of the peer's bell must wake a sleeper";
    EXPECT_FALSE(p.b.drain_bell()) << "drain_bell() must see the peer's end";
    uint8_t r;
    EXPECT_EQ(p.b.read(&r, 1), 1) << "bytes written before the end are still read";
    errno = 0;
    EXPECT_EQ(p.b.read(&r, 1), -1);
    EXPECT_EQ(errno, ECONNRESET) << "after them, the peer's end reads as a reset";
    EXPECT_EQ(write_all(p.b, &x, 1), -1);
    EXPECT_EQ(errno, ECONNRESET) << "and writes to it fail";
}

TEST(Channel, ABrokenIndexFromThePeerIsAResetNotAnOverrun) {
    int ends[2];
    ASSERT_EQ(make_channel(4096, ends), 0);
    Channel victim;
    ASSERT_EQ(victim.open(ends[1]), RI_OK);
    // Side 0 is hostile: it takes its hello itself and maps the memory file on its own.
    ri_channel_hello_t hello{};
    int mem = -1, flags = 0;
    ASSERT_EQ(rdma::provider::channel_detail::recv_hello(ends[0], hello, mem, flags), static_cast<ssize_t>(sizeof hello));
    ASSERT_GE(mem, 0) << "the hello came without the memory file";
    void *base = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
    ASSERT_NE(base, MAP_FAILED);
    auto *hdr = static_cast<ri_channel_header_t *>(base);
    hdr->ring[0].tail = 1u << 20;  // a million bytes "written" into a 4 KiB ring
    uint8_t r[16];
    errno = 0;
    EXPECT_EQ(victim.read(r, sizeof r), -1) << "a tail beyond the ring must not be read from";
    EXPECT_EQ(errno, ECONNRESET) << "it is the peer breaking the rules: a reset";
    Channel victim2;
    int ends2[2];
    ASSERT_EQ(make_channel(4096, ends2), 0);
    ASSERT_EQ(victim2.open(ends2[1]), RI_OK);
    int mem2 = -1;
    ASSERT_EQ(rdma::provider::channel_detail::recv_hello(ends2[0], hello, mem2, flags),
              static_cast<ssize_t>(sizeof hello));
    ASSERT_GE(mem2, 0) << "the hello came without the memory file";
    void *base2 = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mem2, 0);
    ASSERT_NE(base2, MAP_FAILED);
    static_cast<ri_channel_header_t *>(base2)->ring[1].head = 1u << 20;  // consumed more than was ever written
    const uint8_t x = 1;
    errno = 0;
    EXPECT_EQ(write_all(victim2, &x, 1), -1) << "a head beyond the tail must not make room";
    EXPECT_EQ(errno, ECONNRESET);
    ::munmap(base, 4096);
    ::munmap(base2, 4096);
    ::close(mem);
    ::close(mem2);
    ::close(ends[0]);
    ::close(ends2[0]);
}

TEST(Channel, AnEndThatIsNotAChannelIsRefused) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    Channel c;
    EXPECT_EQ(c.open(sv[0]), RI_EBADF) << "an end without a hello is no channel";  // open() closed sv[0]
    ::close(sv[1]);
    // A hello with an unsealed file: a peer could shrink it under our mapping.
    const int mem = static_cast<int>(::syscall(SYS_memfd_create, "x", MFD_CLOEXEC));
    ASSERT_GE(mem, 0);
    ASSERT_EQ(::ftruncate(mem, 3 * 4096), 0);
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, pair), 0);
    const ri_channel_hello_t hello{RI_CHANNEL_MAGIC, RI_CHANNEL_VERSION, 0, 12};
    ASSERT_TRUE(rdma::provider::channel_detail::send_hello(pair[1], hello, mem));
    Channel unsealed;
    EXPECT_EQ(unsealed.open(pair[0]), RI_EPROTO) << "a memory file that is not sealed must be refused";
    ::close(pair[1]);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, pair), 0);
    const ri_channel_hello_t wrong{RI_CHANNEL_MAGIC, RI_CHANNEL_VERSION + 1, 0, 12};
    ASSERT_TRUE(rdma::provider::channel_detail::send_hello(pair[1], wrong, mem));
    Channel other_version;
    EXPECT_EQ(other_version.open(pair[0]), RI_EPROTO) << "a hello of another layout version must be refused";
    ::close(pair[1]);
    ::close(mem);
}

}  // namespace
