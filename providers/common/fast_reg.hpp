// Fast registration's page list as both providers take it: reduced at post to the one range of the consumer's
// address space it maps, which the STag table then maps only inside a registered region (StagTable::fast_register).
#ifndef PROVIDERS_COMMON_FAST_REG_HPP
#define PROVIDERS_COMMON_FAST_REG_HPP

#include <cstdint>

#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

namespace providers::common {

/** @brief The range a fast registration maps. */
struct FastRegRange {
    uint64_t addr = 0;    /**< First byte, in the consumer's address space. */
    uint64_t length = 0;  /**< Bytes. */
    uint64_t iova = 0;    /**< Tagged offset of the first byte. */
    uint32_t access = 0;  /**< RI_ACCESS_* rights. */
    uint32_t pages = 0;   /**< Pages of the list. */
    ri_stag_t stag = 0;   /**< The STag it becomes. */
};

/** @brief log2 of the one page size the providers map (their page_size_cap). */
inline constexpr uint32_t kFastRegPageShift = 12;
/** @brief The rights a fast registration may give. */
inline constexpr uint32_t kFastRegRights = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                           RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC;

/**
 * @brief Reduces fast registration @p w of the STag allocated as @p allocated to the range it maps, in @p out.
 *        ::RI_EINVAL for what the providers do not map: pages other than 4 KiB, an empty list, a first page not
 *        aligned, pages that do not follow each other in the address space (a software RNIC has no IOMMU to make
 *        them contiguous), a range beyond the pages, a new STag of another index, rights it does not know, or a
 *        remote write or atomic without local write.
 */
[[nodiscard]] inline ri_status_t fast_reg_range(const ri_send_wr_t &w, ri_stag_t allocated, FastRegRange &out) noexcept {
    const auto &f = w.u.fast_reg;
    constexpr uint64_t kPage = uint64_t{1} << kFastRegPageShift;
    constexpr uint32_t kRemoteWrites = RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC;
    if (f.page_shift != kFastRegPageShift || f.num_pages == 0 || f.pages == nullptr ||
        (f.pages[0] & (kPage - 1)) != 0) {
        return RI_EINVAL;
    }
    for (uint32_t i = 1; i < f.num_pages; ++i) {
        if (f.pages[i] != f.pages[0] + (uint64_t{i} << kFastRegPageShift)) return RI_EINVAL;
    }
    const uint64_t offset = f.iova & (kPage - 1);
    const uint64_t span = uint64_t{f.num_pages} << kFastRegPageShift;
    if (f.length == 0 || f.length > span - offset || (f.stag >> 8) != (allocated >> 8)) return RI_EINVAL;
    if ((f.access & ~kFastRegRights) != 0 || ((f.access & kRemoteWrites) != 0 && (f.access & RI_ACCESS_LOCAL_WRITE) == 0)) {
        return RI_EINVAL;
    }
    out = FastRegRange{f.pages[0] + offset, f.length, f.iova, f.access, f.num_pages, f.stag};
    return RI_OK;
}

}  // namespace providers::common

#endif  // PROVIDERS_COMMON_FAST_REG_HPP
