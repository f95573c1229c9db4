// Payload copies: copy_payload() gives memcpy's bytes at every relative alignment, aliased_copy() names exactly the
// slow `rep movsb` offsets this CPU was measured to have (destination 1..31 bytes after the source, modulo 4 KiB), and
// the rule that turns measured times into those offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "iwarp/copy.hpp"

namespace {

TEST(Copy, AliasedCopyIsTheDestinationJustAfterTheSourceModuloAPageAtAMeasuredSlowOffset) {
    alignas(4096) static uint8_t page[3 * 4096];
    const uint8_t *src = page + 4096;
    const uint32_t slow = iwarp::slow_copy_offsets();
    EXPECT_EQ(slow & 1u, 0u);                     // a copy at the source's own offset is the yardstick
    EXPECT_EQ(iwarp::slow_copy_offsets(), slow);  // measured once: every caller sees one answer
    for (uint32_t d = 0; d < 32; ++d) {
        const bool named = ((slow >> d) & 1u) != 0;
        EXPECT_EQ(iwarp::aliased_copy(src + d, src), named) << d;
        EXPECT_EQ(iwarp::aliased_copy(src + 4096 + d, src), named) << d;  // any page: only the offset counts
        EXPECT_EQ(iwarp::aliased_copy(src - 4096 + d, src), named) << d;
    }
    for (size_t d : {32, 33, 64, 4064, 4080, 4095}) EXPECT_FALSE(iwarp::aliased_copy(src + d, src)) << d;
}

// Times as the two CPUs the project has run on gave them (best of four, 32 KiB, microseconds).
TEST(Copy, TheSlowOffsetsAreThoseOverTwiceTheFastest) {
    double zen3[32], zen4[32], busy[32];
    for (size_t d = 0; d < 32; ++d) {
        zen3[d] = d == 0 ? 0.6 : 12.8;                                     // every offset 1..31 slow
        zen4[d] = d == 0 ? 0.58 : d < 16 ? 9.35 : d == 16 ? 0.60 : 0.80;  // 16 as fast as 0, 17..31 1.4x
        busy[d] = zen4[d];
    }
    busy[16] = 0.99;  // a busy neighbour made offset 16 1.7x: not worth a copy
    busy[20] = 1.17;  // just over twice 0.58: named
    EXPECT_EQ(iwarp::classify_copy_times(zen3), 0xfffffffeu);
    EXPECT_EQ(iwarp::classify_copy_times(zen4), 0x0000fffeu);
    EXPECT_EQ(iwarp::classify_copy_times(busy), 0x0010fffeu);
    zen4[0] = 1.5;  // offset 0 slowed by the machine: offset 16 is the yardstick, and 0 itself is never named
    EXPECT_EQ(iwarp::classify_copy_times(zen4), 0x0000fffeu);
}

TEST(Copy, CopyPayloadMovesEveryByteAtEveryRelativeAlignment) {
    constexpr size_t kMax = 70000;
    std::vector<uint8_t> in(kMax + 4096);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
    std::vector<uint8_t> out(kMax + 2 * 4096);
    for (size_t n : {size_t{0}, size_t{1}, size_t{1023}, size_t{1024}, size_t{1025}, size_t{4097}, size_t{65536}, kMax}) {
        for (size_t shift : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{20}, size_t{31}, size_t{32}, size_t{4080}}) {
            std::fill(out.begin(), out.end(), 0xee);
            const uint8_t *src = in.data() + 64;
            uint8_t *dst = out.data() + 64 + shift;
            iwarp::copy_payload(dst, src, n);
            ASSERT_TRUE(std::equal(src, src + n, dst)) << n << " bytes, destination " << shift << " after";
            ASSERT_EQ(dst[n], 0xee) << "wrote past the end: " << n << " bytes, shift " << shift;
            ASSERT_EQ(dst[-1], 0xee) << "wrote before the start: " << n << " bytes, shift " << shift;
        }
    }
}

}  // namespace
