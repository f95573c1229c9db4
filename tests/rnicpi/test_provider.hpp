// The frame of the toy providers that adapter_test.cpp and kit_test.cpp hand to rdma::provider::make_verbs: a test
// provider derives from TestProvider, names itself and declares the objects it implements; every object it does not
// declare is rdma::provider::Unsupported.
#ifndef TESTS_RNICPI_TEST_PROVIDER_HPP
#define TESTS_RNICPI_TEST_PROVIDER_HPP

#include "rnicpi/cpp/provider.hpp"

namespace rdmatest {

/** @brief A provider of vendor "tests", version "0", in mode @p Mode, that implements no object of its own. */
template <ri_mode_t Mode = RI_MODE_NONPRIVILEGED>
struct TestProvider {
    static constexpr ri_mode_t mode = Mode;
    static constexpr const char *vendor = "tests";
    static constexpr const char *version = "0";
    using Rnic = rdma::provider::Unsupported;
    using Pd = rdma::provider::Unsupported;
    using Cq = rdma::provider::Unsupported;
    using Qp = rdma::provider::Unsupported;
    using Srq = rdma::provider::Unsupported;
    using Mr = rdma::provider::Unsupported;
    using Mw = rdma::provider::Unsupported;
};

}  // namespace rdmatest

#endif  // TESTS_RNICPI_TEST_PROVIDER_HPP
