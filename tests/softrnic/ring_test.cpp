// The ring arena: small queue pairs' rings packed several to a page, zeroed, reused after release, never
// overlapping; large rings get mappings of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "ring.hpp"

namespace softrnic::datapath {
namespace {

TEST(RingArena, PacksSmallRingsWithoutOverlap) {
    auto arena = std::make_shared<RingArena>();
    std::vector<std::pair<uint8_t *, size_t>> blocks;
    std::set<uintptr_t> pages;
    for (size_t len : {100u, 256u, 300u, 700u, 2048u, 2000u, 64u, 1500u, 2048u, 512u}) {
        uint8_t *p = arena->get(len);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "cache-line aligned";
        EXPECT_TRUE(std::all_of(p, p + len, [](uint8_t b) { return b == 0; })) << "zeroed";
        std::fill(p, p + len, uint8_t{0xa5});
        blocks.emplace_back(p, len);
        pages.insert(reinterpret_cast<uintptr_t>(p) / RingArena::kPage);
    }
    // Two 2 KiB rings share a page: fewer pages than blocks.
    EXPECT_LT(pages.size(), blocks.size());
    std::sort(blocks.begin(), blocks.end());
    for (size_t i = 1; i < blocks.size(); ++i) {
        EXPECT_LE(blocks[i - 1].first + blocks[i - 1].second, blocks[i].first) << "blocks overlap";
    }
    for (auto &[p, len] : blocks) arena->put(p, len);
}

TEST(RingArena, ReusesReleasedBlocksZeroed) {
    auto arena = std::make_shared<RingArena>();
    uint8_t *a = arena->get(2048);
    ASSERT_NE(a, nullptr);
    std::fill(a, a + 2048, uint8_t{1});
    arena->put(a, 2048);
    uint8_t *b = arena->get(2000);  // same size class
    EXPECT_EQ(b, a);
    EXPECT_TRUE(std::all_of(b, b + 2000, [](uint8_t x) { return x == 0; }));
    arena->put(b, 2000);
}

TEST(RingMemory, LargeRingsGetTheirOwnPages) {
    auto arena = std::make_shared<RingArena>();
    RingMemory small(arena, 1024);
    RingMemory large(arena, 3 * RingArena::kPage + 10);
    ASSERT_TRUE(small.ok());
    ASSERT_TRUE(large.ok());
    EXPECT_EQ(large.address() % RingArena::kPage, 0u);
    // A block outlives the consumer's handle on the arena (a QP leaked past its RNIC's close).
    arena.reset();
    small.data()[1023] = 7;
    EXPECT_EQ(small.data()[1023], 7);
    RingMemory moved(std::move(small));
    EXPECT_FALSE(small.ok());  // NOLINT(bugprone-use-after-move): the moved-from block is empty
    EXPECT_TRUE(moved.ok());
}

}  // namespace
}  // namespace softrnic::datapath
