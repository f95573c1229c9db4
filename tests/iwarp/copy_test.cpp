// Payload copies: copy_payload() gives memcpy's bytes at every relative alignment, and aliased_copy() names exactly
// the slow `rep movsb` case (destination 1..31 bytes after the source, modulo 4 KiB).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "iwarp/copy.hpp"

namespace {

TEST(Copy, AliasedCopyIsTheDestinationJustAfterTheSourceModuloAPage) {
    alignas(4096) static uint8_t page[3 * 4096];
    const uint8_t *src = page + 4096;
    EXPECT_FALSE(iwarp::aliased_copy(src, src));
    EXPECT_TRUE(iwarp::aliased_copy(src + 1, src));
    EXPECT_TRUE(iwarp::aliased_copy(src + 16, src));  // a page-aligned payload behind a tagged header
    EXPECT_TRUE(iwarp::aliased_copy(src + 31, src));
    EXPECT_FALSE(iwarp::aliased_copy(src + 32, src));
    EXPECT_FALSE(iwarp::aliased_copy(src - 16, src));  // before the source is fine
    EXPECT_TRUE(iwarp::aliased_copy(src + 4096 + 20, src));  // any page: only the offset counts
    EXPECT_TRUE(iwarp::aliased_copy(src - 4096 + 20, src));
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
