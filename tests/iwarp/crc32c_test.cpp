// CRC32c against the RFC 3720 appendix B.4 vectors, the hardware path against the table path, and the byte order
// MPA uses on the wire.
#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <random>
#include <vector>

#include "iwarp/crc32c.hpp"

namespace {

// RFC 3720 B.4 lists each CRC as the four bytes that are transmitted.
std::array<uint8_t, 4> wire(uint32_t crc) {
    std::array<uint8_t, 4> b{};
    iwarp::put_crc32c(b.data(), crc);
    return b;
}

TEST(Crc32c, Rfc3720Zeros) {
    std::vector<uint8_t> d(32, 0x00);
    EXPECT_EQ(wire(iwarp::crc32c(d.data(), d.size())), (std::array<uint8_t, 4>{0xaa, 0x36, 0x91, 0x8a}));
}

TEST(Crc32c, Rfc3720Ones) {
    std::vector<uint8_t> d(32, 0xff);
    EXPECT_EQ(wire(iwarp::crc32c(d.data(), d.size())), (std::array<uint8_t, 4>{0x43, 0xab, 0xa8, 0x62}));
}

TEST(Crc32c, Rfc3720Incrementing) {
    std::vector<uint8_t> d(32);
    std::iota(d.begin(), d.end(), 0);
    EXPECT_EQ(wire(iwarp::crc32c(d.data(), d.size())), (std::array<uint8_t, 4>{0x4e, 0x79, 0xdd, 0x46}));
}

TEST(Crc32c, Rfc3720Decrementing) {
    std::vector<uint8_t> d(32);
    for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(31 - i);
    EXPECT_EQ(wire(iwarp::crc32c(d.data(), d.size())), (std::array<uint8_t, 4>{0x5c, 0xdb, 0x3f, 0x11}));
}

TEST(Crc32c, Rfc3720IscsiReadCommand) {
    std::vector<uint8_t> d = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                              0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    EXPECT_EQ(wire(iwarp::crc32c(d.data(), d.size())), (std::array<uint8_t, 4>{0x56, 0x3a, 0x96, 0xd9}));
}

TEST(Crc32c, WireOrderRoundTrips) {
    uint8_t b[4];
    iwarp::put_crc32c(b, 0xb4e64228u);
    EXPECT_EQ(b[0], 0x28);
    EXPECT_EQ(b[3], 0xb4);
    EXPECT_EQ(iwarp::get_crc32c(b), 0xb4e64228u);
}

// Every length and alignment around the interleaving block sizes, against the table implementation.
TEST(Crc32c, HardwareMatchesTableAtEveryShape) {
    std::mt19937 rng(1234);
    std::vector<uint8_t> buf(3 * 8192 * 2 + 3 * 256 * 2 + 64);
    for (auto &b : buf) b = static_cast<uint8_t>(rng());
    std::vector<size_t> lengths;
    for (size_t n = 0; n < 80; ++n) lengths.push_back(n);
    for (size_t base : {size_t{192}, size_t{768}, size_t{24576}, size_t{49152}, size_t{65536} - 2048}) {
        for (size_t d = 0; d < 20; ++d) {
            lengths.push_back(base - 10 + d);
        }
    }
    for (size_t off = 0; off < 8; ++off) {
        for (size_t len : lengths) {
            if (off + len > buf.size()) continue;
            ASSERT_EQ(iwarp::crc32c(buf.data() + off, len),
                      iwarp::detail::crc32c_extend_soft(0, buf.data() + off, len))
                << "offset " << off << " length " << len;
        }
    }
}

// The folding path (AVX-512 VPCLMULQDQ, where the CPU has it) against the instruction path at random lengths and
// alignments, including the boundaries of its 256-byte loop.
TEST(Crc32c, FoldingMatchesInstructionPath) {
    std::mt19937 rng(99);
    std::vector<uint8_t> buf(140000);
    for (auto &b : buf) b = static_cast<uint8_t>(rng());
    std::vector<size_t> lengths = {511, 512, 513, 767, 768, 769, 1023, 1024, 1436, 16370, 65536, 131072};
    for (int i = 0; i < 200; ++i) lengths.push_back(std::uniform_int_distribution<size_t>(500, 135000)(rng));
    for (size_t len : lengths) {
        size_t off = rng() % 64;
        uint32_t seed = static_cast<uint32_t>(rng());
        ASSERT_EQ(iwarp::crc32c_extend(seed, buf.data() + off, len),
                  iwarp::detail::crc32c_extend_instruction(seed, buf.data() + off, len))
            << "length " << len << " offset " << off;
    }
    if (!iwarp::detail::crc32c_folding()) GTEST_SKIP() << "no AVX-512 VPCLMULQDQ here: only the instruction path ran";
}

TEST(Crc32c, ExtendEqualsWhole) {
    std::vector<uint8_t> d(70000);
    std::mt19937 rng(7);
    for (auto &b : d) b = static_cast<uint8_t>(rng());
    uint32_t whole = iwarp::crc32c(d.data(), d.size());
    for (size_t split : {size_t{1}, size_t{3}, size_t{511}, size_t{8192}, size_t{40000}, d.size() - 1}) {
        uint32_t c = iwarp::crc32c_extend(0, d.data(), split);
        c = iwarp::crc32c_extend(c, d.data() + split, d.size() - split);
        EXPECT_EQ(c, whole) << "split at " << split;
    }
}

}  // namespace
