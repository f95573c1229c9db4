// The same-host channel (rnicpi/cpp/channel.hpp): what the kAL makes, what a provider reads and writes, and what
// a peer that breaks the rules gets.
#include "rnicpi/cpp/channel.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace {

using rdma::provider::Channel;
using rdma::provider::make_channel;

// Both ends of a fresh channel, opened.
struct Pair {
    explicit Pair(uint64_t ring = 4096, const int32_t *pids = nullptr) {
        int ends[2];
        const int e = make_channel(ring, ends, pids);
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

// write() and readv() hand their progress over every Channel::kPublishEvery bytes and take what the other side made
// meanwhile; pieces of odd sizes that cross those marks and the ring's end must still arrive whole and in order
// while both sides copy at once.
TEST(Channel, LargeGatherAndScatterListsGoWholeWhileBothSidesCopyAtOnce) {
    Pair p(256u << 10);
    ASSERT_TRUE(p.a.is_open() && p.b.is_open()) << "the pair did not open";
    constexpr size_t kTotal = 8u << 20;
    std::vector<uint8_t> out(kTotal), in(kTotal);
    for (size_t i = 0; i < kTotal; ++i) out[i] = static_cast<uint8_t>(i * 131 + (i >> 16));
    std::thread reader([&] {
        size_t got = 0;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (got < kTotal && std::chrono::steady_clock::now() < give_up) {
            // Three pieces: 1000 bytes, then 100 KiB + 3, then the rest of 200 KiB.
            const size_t want = std::min<size_t>(200u << 10, kTotal - got);
            const size_t a = std::min<size_t>(1000, want), b = std::min<size_t>((100u << 10) + 3, want - a);
            iovec v[3] = {{in.data() + got, a}, {in.data() + got + a, b}, {in.data() + got + a + b, want - a - b}};
            const ssize_t n = p.b.readv(v, 3);
            if (n > 0) got += static_cast<size_t>(n);
            if (n < 0 && errno != EAGAIN) return;
        }
    });
    size_t sent = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (sent < kTotal && std::chrono::steady_clock::now() < give_up) {
        // Pieces of 7 bytes, 70 KiB + 1 and 300 KiB (more than the ring), as a batch of FPDUs would be.
        const size_t want = std::min<size_t>((370u << 10) + 8, kTotal - sent);
        const size_t a = std::min<size_t>(7, want), b = std::min<size_t>((70u << 10) + 1, want - a);
        iovec v[3] = {{out.data() + sent, a}, {out.data() + sent + a, b}, {out.data() + sent + a + b, want - a - b}};
        const ssize_t n = p.a.write(v, 3);
        ASSERT_TRUE(n > 0 || errno == EAGAIN) << "write failed: " << std::strerror(errno);
        if (n > 0) sent += static_cast<size_t>(n);
    }
    reader.join();
    ASSERT_EQ(sent, kTotal) << "the writer did not get everything into the ring within 30 s";
    EXPECT_TRUE(in == out) << "bytes were lost, doubled or reordered between publications";
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
    ASSERT_EQ(rdma::provider::channel_detail::recv_hello(ends[0], hello, mem, flags),
              static_cast<ssize_t>(RI_CHANNEL_HELLO_V1_SIZE))
        << "a channel made without pids has version 1 hellos";
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
              static_cast<ssize_t>(RI_CHANNEL_HELLO_V1_SIZE));
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
    const ri_channel_hello_t hello{RI_CHANNEL_MAGIC, RI_CHANNEL_VERSION, 0, 12, 0, 0};
    ASSERT_TRUE(rdma::provider::channel_detail::send_hello(pair[1], hello, mem));
    Channel unsealed;
    EXPECT_EQ(unsealed.open(pair[0]), RI_EPROTO) << "a memory file that is not sealed must be refused";
    ::close(pair[1]);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, pair), 0);
    const ri_channel_hello_t wrong{RI_CHANNEL_MAGIC, RI_CHANNEL_VERSION + 1, 0, 12, 0, 0};
    ASSERT_TRUE(rdma::provider::channel_detail::send_hello(pair[1], wrong, mem));
    Channel other_version;
    EXPECT_EQ(other_version.open(pair[0]), RI_EPROTO) << "a hello of another layout version must be refused";
    ::close(pair[1]);
    ::close(mem);
}

// How many descriptors this process has open.
int open_descriptors() {
    int n = 0;
    for (int fd = 0; fd < 1024; ++fd) n += ::fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
    return n;
}

TEST(Channel, AMessageWithSeveralDescriptorsOrAnEmptyOneLeavesNoneOpen) {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, pair), 0);
    const int before = open_descriptors();
    // Two descriptors where one is expected: both closed, the message marked, nothing returned.
    int two[2] = {::dup(0), ::dup(0)};
    uint32_t word = 7;
    ASSERT_TRUE(rdma::provider::channel_detail::send_with_fds(pair[1], &word, sizeof word, two, 2));
    ::close(two[0]);
    ::close(two[1]);
    uint32_t got = 0;
    int fd = -2, flags = 0;
    EXPECT_EQ(rdma::provider::channel_detail::recv_with_fd(pair[0], &got, sizeof got, fd, flags),
              static_cast<ssize_t>(sizeof got));
    EXPECT_EQ(fd, -1) << "two descriptors are not the one a gift or a hello carries";
    EXPECT_NE(flags & MSG_CTRUNC, 0) << "the message says it was not what was expected";
    // An empty message can carry a descriptor too: it comes back with a length of 0, for the caller to close.
    const int one = ::dup(0);
    ASSERT_TRUE(rdma::provider::channel_detail::send_with_fd(pair[1], &word, 0, one));
    ::close(one);
    EXPECT_EQ(rdma::provider::channel_detail::recv_with_fd(pair[0], &got, sizeof got, fd, flags), 0);
    ASSERT_GE(fd, 0) << "the empty message's descriptor is returned, not left open unseen";
    ::close(fd);
    EXPECT_EQ(open_descriptors(), before) << "every descriptor that came was closed";
    ::close(pair[0]);
    ::close(pair[1]);
}

// Single copy (ri_channel.h): what the kAL's pids allow, and what a pull copies.

TEST(ChannelPull, WithoutPidsFromTheKalNoSideTakesPulls) {
    Pair p;
    EXPECT_FALSE(p.a.accept_pulls()) << "a version 1 hello names no peer: nothing to read from";
    EXPECT_FALSE(p.b.peer_takes_pulls()) << "so the writer must not send pulls";
}

TEST(ChannelPull, APeerInThisProcessIsCopiedPlainlyTheLastByteLast) {
    const int32_t pids[2] = {::getpid(), ::getpid()};
    Pair p(4096, pids);
    EXPECT_FALSE(p.a.peer_takes_pulls()) << "before its reader says so, a writer sends no pulls";
    ASSERT_TRUE(p.b.accept_pulls()) << "side 1 may read its own process";
    EXPECT_TRUE(p.a.peer_takes_pulls()) << "side 0 now sees that side 1 takes pulls in ring 0";
    EXPECT_FALSE(p.b.peer_takes_pulls()) << "the other direction is side 0's to say";
    std::vector<uint8_t> src(70000), dst(70000, 0);
    std::iota(src.begin(), src.end(), uint8_t{3});
    const iovec remote[2] = {{src.data(), 1000}, {src.data() + 1000, 69000}};
    const iovec local[3] = {{dst.data(), 500}, {dst.data() + 500, 0}, {dst.data() + 500, 69500}};
    ASSERT_TRUE(p.b.pull(local, 3, remote, 2)) << std::strerror(errno);
    EXPECT_EQ(dst, src);
    const iovec shorter[1] = {{dst.data(), 10}};
    EXPECT_FALSE(p.b.pull(shorter, 1, remote, 2)) << "lists of different totals are refused";
    EXPECT_EQ(errno, EINVAL);
}

TEST(ChannelPull, AnotherProcessIsReadWithProcessVmReadvAndItsDeathFailsThePull) {
    std::vector<uint8_t> buf(1 << 20);
    std::iota(buf.begin(), buf.end(), uint8_t{11});
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // The peer: the same buffer at the same address (a copy of the parent's), until told to go.
        char c;
        (void)!::read(go[0], &c, 1);
        ::_exit(0);
    }
    std::fill(buf.begin(), buf.end(), 0);  // the parent's copy differs from the child's now
    const int32_t pids[2] = {child, ::getpid()};
    Pair p(4096, pids);
    ASSERT_TRUE(p.b.accept_pulls()) << "side 1's peer is the child, of this user: the kernel lets it read it";
    std::vector<uint8_t> dst(buf.size(), 0);
    const iovec remote{buf.data(), buf.size()};
    const iovec local{dst.data(), dst.size()};
    ASSERT_TRUE(p.b.pull(&local, 1, &remote, 1)) << std::strerror(errno);
    std::vector<uint8_t> expect(buf.size());
    std::iota(expect.begin(), expect.end(), uint8_t{11});
    EXPECT_EQ(dst, expect) << "the bytes came from the child's memory, not this process's";
    const iovec unmapped{reinterpret_cast<void *>(uintptr_t{4096}), 16};
    const iovec local16{dst.data(), 16};
    EXPECT_FALSE(p.b.pull(&local16, 1, &unmapped, 1)) << "a range the peer does not map fails the pull";
    ASSERT_EQ(::write(go[1], "x", 1), 1);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_FALSE(p.b.pull(&local, 1, &remote, 1)) << "a dead peer's bytes cannot be pulled";
    ::close(go[0]);
    ::close(go[1]);
}

TEST(ChannelPull, AProcessThatMayNotReadItsPeerDoesNotTakePulls) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to drop to another user in a child";
    const int32_t pids[2] = {::getpid(), 0};  // side 1's peer is this (root) process; side 1 goes to the child
    int ends[2];
    ASSERT_EQ(make_channel(4096, ends, pids), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // Another user may not read a root process: the kernel's ptrace rule, which the probe asks.
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
        Channel c;
        const ri_status_t rc = c.open(ends[1]);
        if (rc != RI_OK) ::_exit(10 + static_cast<int>(rc));
        ::_exit(c.accept_pulls() ? 1 : 0);
    }
    ::close(ends[0]);
    ::close(ends[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: it took pulls from a process it may not read; 2: setuid failed; 10 + a status: open failed";
}

TEST(ChannelPull, AVersion2HelloWithUnknownFlagsIsRefused) {
    const int mem = static_cast<int>(::syscall(SYS_memfd_create, "x", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_GE(mem, 0);
    ASSERT_EQ(::ftruncate(mem, 3 * 4096), 0);
    ASSERT_EQ(::fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, pair), 0);
    const ri_channel_hello_t hello{RI_CHANNEL_MAGIC, RI_CHANNEL_VERSION, 0, 12, 0x80, 1};
    ASSERT_TRUE(rdma::provider::channel_detail::send_hello(pair[1], hello, mem));
    Channel c;
    EXPECT_EQ(c.open(pair[0]), RI_EPROTO) << "flags this version does not define must be refused";
    ::close(pair[1]);
    ::close(mem);
}

}  // namespace
