// The data path's completion queue on its own: a resize moves the completions not yet polled to the new ring, in
// order, and refuses a ring too small for them without losing one.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "completion_queue.hpp"
#include "status_matchers.hpp"

namespace softrnic::datapath {
namespace {

ri_wc_t wc(uint64_t id) {
    ri_wc_t w{};
    w.wr_id = id;
    w.status = RI_WC_SUCCESS;
    return w;
}

std::vector<uint64_t> poll_all(CompletionQueue &cq) {
    std::vector<uint64_t> ids;
    ri_wc_t got[8];
    for (;;) {
        uint32_t n = 0;
        EXPECT_RI_OK(cq.poll(8, got, &n));
        if (n == 0) return ids;
        for (uint32_t i = 0; i < n; ++i) ids.push_back(got[i].wr_id);
    }
}

TEST(CompletionQueue, AResizeKeepsWhatWaitsInOrderAndRefusesARingTooSmall) {
    std::vector<ri_wc_t> first(8), second(4), third(16);
    CompletionQueue cq(reinterpret_cast<uint8_t *>(first.data()), 8, nullptr, nullptr);
    // Wrap the ring first, so that the waiting completions do not start at slot 0.
    for (uint64_t i = 0; i < 6; ++i) (void)cq.add(wc(i));
    EXPECT_EQ(poll_all(cq), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
    for (uint64_t i = 10; i < 16; ++i) (void)cq.add(wc(i));
    EXPECT_EQ(cq.pending(), 6u);
    EXPECT_STATUS(cq.resize(reinterpret_cast<uint8_t *>(second.data()), 4), RI_EINVAL)
        << "a ring of 4 cannot take the 6 completions waiting";
    EXPECT_EQ(cq.pending(), 6u) << "a refused resize changed the ring";
    ASSERT_RI_OK(cq.resize(reinterpret_cast<uint8_t *>(third.data()), 16));
    first.assign(first.size(), ri_wc_t{});  // the old ring is the caller's again: nothing may read it now
    for (uint64_t i = 16; i < 26; ++i) (void)cq.add(wc(i));
    EXPECT_EQ(cq.pending(), 16u) << "the new ring does not hold its 16";
    std::vector<uint64_t> want;
    for (uint64_t i = 10; i < 26; ++i) want.push_back(i);
    EXPECT_EQ(poll_all(cq), want);
    EXPECT_STATUS(cq.resize(nullptr, 4), RI_EINVAL);
    EXPECT_STATUS(cq.resize(reinterpret_cast<uint8_t *>(second.data()), 0), RI_EINVAL);
}

TEST(CompletionQueue, AnOverflowOutlivesAResize) {
    std::vector<ri_wc_t> small(2), big(8);
    CompletionQueue cq(reinterpret_cast<uint8_t *>(small.data()), 2, nullptr, nullptr);
    for (uint64_t i = 0; i < 3; ++i) (void)cq.add(wc(i));  // the third is lost
    ASSERT_RI_OK(cq.resize(reinterpret_cast<uint8_t *>(big.data()), 8));
    ri_wc_t got[8];
    uint32_t n = 0;
    EXPECT_RI_OK(cq.poll(8, got, &n));
    EXPECT_EQ(n, 2u);
    EXPECT_STATUS(cq.poll(8, got, &n), RI_EOVERFLOW) << "a resize must not hide that a completion was lost";
}

}  // namespace
}  // namespace softrnic::datapath
