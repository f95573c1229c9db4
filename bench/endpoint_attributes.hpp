// The endpoint the RDMA benchmarks make: one scatter/gather element each way, the given depth and context.
#ifndef BENCH_ENDPOINT_ATTRIBUTES_HPP
#define BENCH_ENDPOINT_ATTRIBUTES_HPP

#include <cstdint>

#include "ual/access_layer.hpp"

namespace bench {

/** @brief Attributes of a benchmark endpoint: @p depth sends and receives, one SGE each, events with @p context. */
inline ual::EndpointAttributes endpoint_attributes(uint32_t depth, uint64_t context) {
    ual::EndpointAttributes ea;
    ea.sq_depth = depth;
    ea.rq_depth = depth;
    ea.sq_sge = 1;
    ea.rq_sge = 1;
    ea.rd_sge = 1;
    ea.context = context;
    return ea;
}

}  // namespace bench

#endif  // BENCH_ENDPOINT_ATTRIBUTES_HPP
