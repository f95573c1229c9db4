/**
 * @file kal_steps.hpp
 * @brief The kAL's side of `it_perf --setup`'s breakdown: krdmad's LLP counters (LLP_COUNTERS, open to every
 *        caller), read over a device connection of it_perf's own, whose setup-step sums (protocol minor 5) say
 *        where a connection's time went inside krdmad: TCP, MPA, the server's decision, the reply.
 */
#ifndef IT_PERF_KAL_STEPS_HPP
#define IT_PERF_KAL_STEPS_HPP

#include <optional>
#include <string>

#include "krdma/abi.h"
#include "krdma/message.hpp"

namespace it_perf {

/** @brief A device connection to a krdmad for its LLP counters; move-only. */
class KalCounters {
public:
    /** @brief Connects to the krdmad at @p device and says HELLO; nullopt when it is not there or refuses. */
    static std::optional<KalCounters> open(const std::string &device);
    /** @brief The counters now; nullopt when the kAL did not answer. */
    [[nodiscard]] std::optional<krdma_llp_counters> read();

private:
    explicit KalCounters(krdma::UniqueFd sock) : sock_(std::move(sock)) {}
    // One request and its reply's payload into @p out; false on any failure.
    bool ask(uint32_t cmd, const void *request, size_t size, void *out);
    krdma::UniqueFd sock_;
    uint32_t seq_ = 1;
};

}  // namespace it_perf

#endif  // IT_PERF_KAL_STEPS_HPP
