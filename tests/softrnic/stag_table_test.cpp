// The data path's STag table: a lookup through a queue pair's cache gives what a locked lookup would, before and
// after every kind of change (invalidate, deregister, register again, a window bound and unbound).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "stag_table.hpp"

namespace softrnic::datapath {
namespace {

constexpr uint32_t kPd = 3;

TEST(StagTable, ACachedLookupSeesEveryChange) {
    StagTable t;
    StagCache cache;
    t.add(0x100, StagEntry::region(0x1000, 4096, 0, RI_ACCESS_LOCAL_WRITE, kPd));
    StagEntry e;
    ASSERT_TRUE(t.find(0x100, e, cache));
    EXPECT_EQ(e.addr, 0x1000u);
    EXPECT_TRUE(e.valid);
    ASSERT_TRUE(t.find(0x100, e, cache));  // from the cache now
    EXPECT_EQ(e.length, 4096u);
    EXPECT_FALSE(t.find(0x200, e, cache)) << "another STag is looked up, not taken from the cache";

    ASSERT_TRUE(t.find(0x100, e, cache));
    ASSERT_TRUE(t.invalidate(0x100, kPd));
    ASSERT_TRUE(t.find(0x100, e, cache));
    EXPECT_FALSE(e.valid) << "the cached copy from before the invalidation was used";

    t.add(0x100, StagEntry::region(0x8000, 512, 0, RI_ACCESS_LOCAL_WRITE, kPd));  // registered again
    ASSERT_TRUE(t.find(0x100, e, cache));
    EXPECT_TRUE(e.valid);
    EXPECT_EQ(e.addr, 0x8000u);
    EXPECT_EQ(e.length, 512u);

    StagEntry w = StagEntry::region(0x8000, 64, 0, RI_ACCESS_REMOTE_WRITE, kPd);
    w.parent = 0x100;
    t.add_window(0x300, w);
    ASSERT_TRUE(t.find(0x300, e, cache));
    EXPECT_EQ(e.parent, 0x100u);
    t.remove(0x100);  // the region, and the window bound into it
    EXPECT_FALSE(t.find(0x300, e, cache)) << "the window went with its region";
    EXPECT_FALSE(t.find(0x100, e, cache));
}

// A reader that keeps looking up through its cache while another thread invalidates and registers the STag again:
// once the writer says a change is done, the reader's next lookup shows it.
TEST(StagTable, ACachedLookupSeesAnotherThreadsChange) {
    StagTable t;
    t.add(0x100, StagEntry::region(0x1000, 4096, 0, RI_ACCESS_LOCAL_WRITE, kPd));
    std::atomic<int> round{0};
    std::atomic<int> seen{0};
    constexpr int kRounds = 2000;
    std::thread reader([&] {
        StagCache cache;
        StagEntry e;
        for (int r = 1; r <= kRounds; ++r) {
            while (round.load(std::memory_order_acquire) < r) {
                (void)t.find(0x100, e, cache);  // keeps the cache warm with the old entry
            }
            ASSERT_TRUE(t.find(0x100, e, cache));
            // Odd rounds invalidated the region, even ones registered it again at an address that names the round.
            if (r % 2 == 1) {
                ASSERT_FALSE(e.valid) << "round " << r;
            } else {
                ASSERT_TRUE(e.valid) << "round " << r;
                ASSERT_EQ(e.addr, 0x1000u * static_cast<uint64_t>(r)) << "round " << r;
            }
            seen.store(r, std::memory_order_release);
        }
    });
    for (int r = 1; r <= kRounds; ++r) {
        if (r % 2 == 1) {
            ASSERT_TRUE(t.invalidate(0x100, kPd));
        } else {
            t.add(0x100, StagEntry::region(0x1000u * static_cast<uint64_t>(r), 4096, 0, RI_ACCESS_LOCAL_WRITE, kPd));
        }
        round.store(r, std::memory_order_release);
        while (seen.load(std::memory_order_acquire) < r) std::this_thread::yield();
    }
    reader.join();
}

// hwstub's DMA check: the region of the PD that covers a range, never an invalid one or another PD's, and a
// generation that moves with every change so a cached check goes stale.
TEST(StagTable, CoveringFindsTheValidRegionOfThePdAndTheGenerationMovesOnEveryChange) {
    StagTable t;
    t.add(0x100, StagEntry::region(0x10000, 4096, 0, RI_ACCESS_LOCAL_WRITE, kPd));
    t.add(0x200, StagEntry::region(0x20000, 4096, 0x20000, RI_ACCESS_LOCAL_WRITE, kPd + 1));
    uint64_t lo = 0, hi = 0;
    ASSERT_TRUE(t.covering(0x10010, 100, kPd, lo, hi));
    EXPECT_EQ(lo, 0x10000u);
    EXPECT_EQ(hi, 0x11000u);
    EXPECT_TRUE(t.covering(0x10000, 4096, kPd, lo, hi));
    EXPECT_FALSE(t.covering(0x10001, 4096, kPd, lo, hi));                 // one byte past the end
    EXPECT_FALSE(t.covering(0x20000, 16, kPd, lo, hi));                   // another PD's region
    EXPECT_FALSE(t.covering(~uint64_t{0} - 8, 16, kPd, lo, hi));          // wraps
    const uint64_t g0 = t.generation();
    ASSERT_TRUE(t.invalidate(0x100, kPd));
    const uint64_t g1 = t.generation();
    EXPECT_NE(g1, g0);
    EXPECT_FALSE(t.covering(0x10010, 100, kPd, lo, hi));                  // invalid now
    t.add(0x300, StagEntry::region(0x30000, 64, 0, 0, kPd));
    EXPECT_NE(t.generation(), g1);
    EXPECT_TRUE(t.covering(0x30000, 64, kPd, lo, hi));
}

TEST(StagTable, MarkedWindowsOutliveTheirRegionUnboundAndGoInvalidWithTheirQp) {
    StagTable t;
    t.add(0x100, StagEntry::region(0x10000, 4096, 0x10000, RI_ACCESS_MW_BIND | RI_ACCESS_LOCAL_WRITE, 1));
    // An allocated window (hwstub's), bound to QP 7 into the region; one entered only at bind (softrnic's).
    t.add_window(0x200, StagTable::unbound_window(1));
    StagEntry bound;
    bound.addr = 0x10100;
    bound.length = 64;
    bound.to_base = 0x10100;
    bound.access = RI_ACCESS_REMOTE_READ;
    bound.pd = 1;
    bound.qp = 7;
    bound.parent = 0x100;
    bound.window = true;
    t.add_window(0x200, bound);
    StagEntry plain = bound;
    plain.window = false;
    t.add_window(0x300, plain);
    StagEntry e;
    ASSERT_TRUE(t.find(0x200, e));
    EXPECT_TRUE(e.valid);
    t.invalidate_windows_of(7);
    ASSERT_TRUE(t.find(0x200, e));
    EXPECT_FALSE(e.valid) << "a window of a QP that went stays bound to its number";
    EXPECT_TRUE(e.window);
    // The region goes: the marked window stays, unbound; the other goes with it.
    t.remove(0x100);
    ASSERT_TRUE(t.find(0x200, e)) << "an allocated window went with its region";
    EXPECT_FALSE(e.valid);
    EXPECT_EQ(e.parent, 0u);
    EXPECT_EQ(e.pd, 1u);
    EXPECT_FALSE(t.find(0x300, e)) << "a window entered at bind outlived its region";
    t.remove(0x200);
    EXPECT_FALSE(t.find(0x200, e));
}

TEST(StagTable, AFastRegisteredStagLivesInsideItsRegionAndKeepsItsIndexUnderANewKey) {
    StagTable t;
    constexpr ri_stag_t kRegion = 0x300, kAllocated = 0x4401, kRekeyed = 0x4402;
    t.add(kRegion, StagEntry::region(0x10000, 0x4000, 0x10000, RI_ACCESS_LOCAL_WRITE, kPd));
    t.add_allocated(kAllocated, kPd, 4);
    StagEntry e;
    ASSERT_TRUE(t.find(kAllocated, e));
    EXPECT_FALSE(e.valid) << "allocated, mapping nothing";
    constexpr uint32_t kRw = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE;
    // Refused: outside the region, too many pages, another PD, another index, or a write into a read-only region.
    EXPECT_FALSE(t.fast_register(kAllocated, kRekeyed, kPd, 2, 0x13000, 0x2000, 0, kRw));
    EXPECT_FALSE(t.fast_register(kAllocated, kRekeyed, kPd, 5, 0x10000, 0x1000, 0, kRw));
    EXPECT_FALSE(t.fast_register(kAllocated, kRekeyed, kPd + 1, 1, 0x10000, 0x1000, 0, kRw));
    EXPECT_FALSE(t.fast_register(kAllocated, 0x4502, kPd, 1, 0x10000, 0x1000, 0, kRw));
    t.add(0x500, StagEntry::region(0x40000, 0x1000, 0x40000, 0, kPd));
    EXPECT_FALSE(t.fast_register(kAllocated, kRekeyed, kPd, 1, 0x40000, 0x1000, 0, kRw)) << "read-only memory";
    ASSERT_TRUE(t.find(kAllocated, e));
    EXPECT_FALSE(e.valid) << "a refusal changes nothing";
    // Mapped under the new key, tagged offsets from 0x7000.
    ASSERT_TRUE(t.fast_register(kAllocated, kRekeyed, kPd, 2, 0x10010, 0x1800, 0x7010, kRw));
    EXPECT_FALSE(t.find(kAllocated, e)) << "the old key names nothing";
    ASSERT_TRUE(t.find(kRekeyed, e));
    EXPECT_TRUE(e.valid);
    EXPECT_EQ(e.map(0x7010 + 0x100, 16).value_or(nullptr), reinterpret_cast<uint8_t *>(0x10110));
    EXPECT_FALSE(e.map(0x7010 + 0x1800, 1).has_value()) << "past the mapped length";
    EXPECT_FALSE(t.fast_register(kRekeyed, kRekeyed, kPd, 1, 0x10000, 0x1000, 0, kRw)) << "valid already";
    ri_stag_t current = 0;
    ASSERT_TRUE(t.find_allocated(kAllocated, e, current)) << "found by the key its owner was given";
    EXPECT_EQ(current, kRekeyed);
    // Invalidated, then mapped again; then its region goes: allocated again, invalid.
    ASSERT_TRUE(t.invalidate(kRekeyed, kPd));
    ASSERT_TRUE(t.fast_register(kAllocated, kRekeyed, kPd, 1, 0x11000, 0x1000, 0, kRw));
    t.remove(kRegion);
    ASSERT_TRUE(t.find(kRekeyed, e));
    EXPECT_FALSE(e.valid) << "a fast-registered STag does not outlive the region it maps";
    EXPECT_EQ(e.max_pages, 4u);
    uint64_t lo = 0, hi = 0;
    EXPECT_FALSE(t.covering(0x11000, 16, kPd, lo, hi));
    // Deregistered by its first key after the key changed: gone.
    t.remove(kAllocated);
    EXPECT_FALSE(t.find(kRekeyed, e));
    EXPECT_FALSE(t.find_allocated(kAllocated, e, current));
}

}  // namespace
}  // namespace softrnic::datapath
