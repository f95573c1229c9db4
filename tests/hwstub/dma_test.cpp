// hwstub's DMA channel into another process (process_vm_readv/writev) and into its own: data lands where it should,
// in order across pieces, and a range the target does not map is a failed transfer, not a fault.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "dma.hpp"

namespace {

using hwstub::DmaChannel;
using hwstub::DmaRange;

// A child process with private memory that only process_vm_* can reach; it reports the address and, on request, a
// checksum of what it sees.
struct Target {
    pid_t pid = -1;
    int to_child[2]{-1, -1};
    int from_child[2]{-1, -1};
    ~Target() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
        for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) {
            if (fd >= 0) ::close(fd);
        }
    }
};

constexpr size_t kLen = 3 * 4096 + 100;

// The child: allocates kLen bytes of private memory filled with 0x5a, sends its address, then for each byte it
// reads from the pipe ('c' = checksum request) answers the sum of its buffer, until the pipe closes.
void child_main(int in, int out) {
    ::alarm(30);
    // Four pages for the buffer and an inaccessible guard page after them, so a range past the end meets no
    // neighbouring mapping.
    auto *b = static_cast<uint8_t *>(
        ::mmap(nullptr, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (b == MAP_FAILED || ::mprotect(b + 4 * 4096, 4096, PROT_NONE) != 0) ::_exit(1);
    std::memset(b, 0x5a, kLen);
    const uint64_t addr = reinterpret_cast<uintptr_t>(b);
    if (::write(out, &addr, sizeof addr) != sizeof addr) ::_exit(1);
    char c;
    while (::read(in, &c, 1) == 1) {
        uint64_t sum = 0;
        for (size_t i = 0; i < kLen; ++i) sum += static_cast<uint64_t>(b[i]) * (i % 251 + 1);
        if (::write(out, &sum, sizeof sum) != sizeof sum) ::_exit(1);
    }
    ::_exit(0);
}

uint64_t weighted_sum(const std::vector<uint8_t> &v) {
    uint64_t sum = 0;
    for (size_t i = 0; i < v.size(); ++i) sum += static_cast<uint64_t>(v[i]) * (i % 251 + 1);
    return sum;
}

TEST(HwstubDma, WritesAndReadsAnotherProcessAcrossPiecesAndRefusesWhatItDoesNotMap) {
    Target t;
    ASSERT_EQ(::pipe(t.to_child), 0);
    ASSERT_EQ(::pipe(t.from_child), 0);
    t.pid = ::fork();
    ASSERT_GE(t.pid, 0);
    if (t.pid == 0) child_main(t.to_child[0], t.from_child[1]);
    uint64_t addr = 0;
    ASSERT_EQ(::read(t.from_child[0], &addr, sizeof addr), static_cast<ssize_t>(sizeof addr));

    const DmaChannel dma(t.pid);
    EXPECT_FALSE(dma.local());
    std::vector<uint8_t> image(kLen);
    ASSERT_TRUE(dma.read(addr, kLen, image.data()));
    EXPECT_EQ(image[0], 0x5a);
    EXPECT_EQ(image[kLen - 1], 0x5a);

    // Scatter a pattern over three pieces that cross page boundaries, out of address order.
    std::vector<uint8_t> pattern(5000);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 1);
    const DmaRange pieces[] = {{addr + 8000, 2000}, {addr + 10, 1000}, {addr + 4090, 2000}};
    ASSERT_TRUE(dma.write(pieces, 3, pattern.data()));
    std::memcpy(&image[8000], &pattern[0], 2000);
    std::memcpy(&image[10], &pattern[2000], 1000);
    std::memcpy(&image[4090], &pattern[3000], 2000);

    // The child's own view agrees, byte for byte (weighted so a misplaced byte changes the sum).
    ASSERT_EQ(::write(t.to_child[1], "c", 1), 1);
    uint64_t sum = 0;
    ASSERT_EQ(::read(t.from_child[0], &sum, sizeof sum), static_cast<ssize_t>(sizeof sum));
    EXPECT_EQ(sum, weighted_sum(image));

    // Gathering the same pieces gives the pattern back.
    std::vector<uint8_t> back(5000);
    ASSERT_TRUE(dma.read(pieces, 3, back.data()));
    EXPECT_EQ(back, pattern);

    // A range past the child's mapping: a failed transfer with EFAULT, and the engine is still here.
    std::vector<uint8_t> junk(8192);
    errno = 0;
    EXPECT_FALSE(dma.write(addr + kLen - 100, 8192, junk.data()));
    EXPECT_EQ(errno, EFAULT);
    errno = 0;
    EXPECT_FALSE(dma.read(0x1000, 64, junk.data()));
    EXPECT_EQ(errno, EFAULT);

    // A process that is gone.
    ::kill(t.pid, SIGKILL);
    ::waitpid(t.pid, nullptr, 0);
    t.pid = -1;
    errno = 0;
    EXPECT_FALSE(dma.read(addr, 64, junk.data()));
    EXPECT_EQ(errno, ESRCH);
}

TEST(HwstubDma, OwnProcessIsAPlainCopyAndTooManyPiecesAreRefused) {
    const DmaChannel dma(::getpid());
    EXPECT_TRUE(dma.local());
    std::vector<uint8_t> region(100, 0), src(30);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
    const uint64_t a = reinterpret_cast<uintptr_t>(region.data());
    const DmaRange pieces[] = {{a + 50, 10}, {a, 20}};
    ASSERT_TRUE(dma.write(pieces, 2, src.data()));
    EXPECT_EQ(region[50], 1);
    EXPECT_EQ(region[59], 10);
    EXPECT_EQ(region[0], 11);
    EXPECT_EQ(region[19], 30);
    EXPECT_EQ(region[20], 0);

    std::vector<DmaRange> many(hwstub::kMaxDmaPieces + 1, DmaRange{a, 1});
    errno = 0;
    EXPECT_FALSE(dma.read(many.data(), many.size(), src.data()));
    EXPECT_EQ(errno, E2BIG);
    EXPECT_TRUE(dma.read(nullptr, 0, src.data())) << "nothing to move is done";
}

}  // namespace
