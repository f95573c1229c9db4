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

TEST(RingMemory, AFreedLargeRingServesTheNextOfItsSizeZeroed) {
    auto arena = std::make_shared<RingArena>();
    const size_t size = 4 * RingArena::kPage;
    uint8_t *first = nullptr;
    {
        RingMemory m(arena, size - 100);
        ASSERT_TRUE(m.ok());
        first = m.data();
        std::fill(m.data(), m.data() + size, uint8_t{0x5a});
    }
    RingMemory other(arena, 2 * RingArena::kPage);  // another size: a mapping of its own
    RingMemory again(arena, size);
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE(again.ok());
    EXPECT_NE(other.data(), first) << "a mapping of another size was handed out";
    EXPECT_EQ(again.data(), first) << "the freed mapping of the same size was not reused";
    EXPECT_TRUE(std::all_of(again.data(), again.data() + size, [](uint8_t x) { return x == 0; }))
        << "a reused mapping must come back zeroed, as a new one does";
}

TEST(RingMemory, TheArenaKeepsABoundedAmountOfFreedRings) {
    // Freeing many large rings at once keeps some of them mapped, up to the bound; the rest are unmapped.
    auto arena = std::make_shared<RingArena>();
    const size_t size = 16 * RingArena::kPage;  // 64 KiB
    std::vector<RingMemory> rings;
    for (int i = 0; i < 16; ++i) rings.emplace_back(arena, size);
    EXPECT_EQ(arena->kept_bytes(), 0u);
    rings.clear();
    EXPECT_GT(arena->kept_bytes(), 0u) << "no freed ring was kept";
    EXPECT_LE(arena->kept_bytes(), size_t{256} * 1024) << "the arena kept more than its bound of freed rings";
    RingMemory again(arena, size);
    EXPECT_EQ(arena->kept_bytes() % size, 0u);
    EXPECT_LT(arena->kept_bytes(), size_t{256} * 1024) << "take() did not use a kept ring";
}

}  // namespace
}  // namespace softrnic::datapath
