// The header-only C++ provider adapter, exercised in-process: which entries it fills, how it converts handles,
// and that no exception crosses the C ABI.
#include <gtest/gtest.h>

#include <stdexcept>

#include "rnicpi/cpp/provider.hpp"
#include "test_provider.hpp"
#include "status_matchers.hpp"

namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Toy : rdmatest::TestProvider<> {
    static constexpr const char *name = "toy";

    struct Cq {
        int polls = 0;
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) {
            ++polls;
            for (uint32_t i = 0; i < max; ++i) wc[i].wr_id = 100 + i;
            *polled = max;
            return RI_OK;
        }
        ri_status_t resize(uint32_t, uint32_t *) { throw std::bad_alloc(); }
        ri_status_t query(ri_cq_attr_t *) { throw std::runtime_error("provider bug"); }
        ri_status_t destroy() { return RI_OK; }
    };
    struct Rnic {
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq) {
            attr->cqe = 64;
            *cq = to_handle<ri_cq_t>(new Cq);
            return RI_OK;
        }
        ri_status_t close() { return RI_OK; }
    };

    static ri_status_t open_rnic(const ri_rnic_open_params_t *, ri_rnic_t *rnic) {
        *rnic = to_handle<ri_rnic_t>(new Rnic);
        return RI_OK;
    }
};

constexpr ri_verbs_ops_t kToy = rdma::provider::make_verbs<Toy>();

TEST(ProviderAdapter, TableStartsWithSizeAndVersion) {
    EXPECT_EQ(kToy.size, sizeof(ri_verbs_ops_t));
    EXPECT_EQ(kToy.abi_version, RI_ABI_VERSION);
}

TEST(ProviderAdapter, FillsOnlyWhatTheClassDefines) {
    EXPECT_NE(kToy.open_rnic, nullptr);
    EXPECT_NE(kToy.close_rnic, nullptr);
    EXPECT_NE(kToy.create_cq, nullptr);
    EXPECT_NE(kToy.poll_cq, nullptr);
    EXPECT_NE(kToy.destroy_cq, nullptr);
    EXPECT_EQ(kToy.request_cq_notify, nullptr);
    EXPECT_EQ(kToy.alloc_pd, nullptr);
    EXPECT_EQ(kToy.create_qp, nullptr);
    EXPECT_EQ(kToy.post_send, nullptr);
    EXPECT_EQ(kToy.dealloc_mw, nullptr);
}

TEST(ProviderAdapter, CallsThroughHandles) {
    ri_rnic_open_params_t params{};
    ri_rnic_t rnic = nullptr;
    ASSERT_RI_OK(kToy.open_rnic(&params, &rnic));
    ri_cq_attr_t attr{};
    attr.cqe = 10;
    ri_cq_t cq = nullptr;
    ASSERT_RI_OK(kToy.create_cq(rnic, &attr, &cq));
    EXPECT_EQ(attr.cqe, 64u);
    ri_wc_t wc[3]{};
    uint32_t polled = 0;
    ASSERT_RI_OK(kToy.poll_cq(cq, 3, wc, &polled));
    EXPECT_EQ(polled, 3u);
    EXPECT_EQ(wc[2].wr_id, 102u);
    EXPECT_EQ(from_handle<Toy::Cq>(cq)->polls, 1);
    EXPECT_RI_OK(kToy.destroy_cq(cq));
    EXPECT_RI_OK(kToy.close_rnic(rnic));
}

TEST(ProviderAdapter, NullHandleIsInvalidArgument) {
    uint32_t polled = 0;
    EXPECT_STATUS(kToy.poll_cq(nullptr, 1, nullptr, &polled), RI_EINVAL);
    EXPECT_STATUS(kToy.close_rnic(nullptr), RI_EINVAL);
}

TEST(ProviderAdapter, ExceptionsBecomeErrnoValues) {
    auto *cq = new Toy::Cq;
    ri_cq_t h = to_handle<ri_cq_t>(cq);
    uint32_t actual = 0;
    EXPECT_STATUS(kToy.resize_cq(h, 128, &actual), RI_ENOMEM);
    ri_cq_attr_t attr{};
    EXPECT_STATUS(kToy.query_cq(h, &attr), RI_EIO);
    EXPECT_RI_OK(kToy.destroy_cq(h));
}

TEST(ProviderAdapter, ModuleDescription) {
    const ri_module_t &m = rdma::provider::Module<Toy>::module;
    EXPECT_EQ(m.size, sizeof(ri_module_t));
    EXPECT_EQ(m.abi_version, RI_ABI_VERSION);
    EXPECT_EQ(m.mode, static_cast<uint32_t>(RI_MODE_NONPRIVILEGED));
    EXPECT_STREQ(m.name, "toy");
    EXPECT_EQ(m.uvp_library, nullptr);
    EXPECT_EQ(m.attach, nullptr);
    EXPECT_EQ(m.verbs, &rdma::provider::Module<Toy>::verbs);

    const ri_module_t *out = nullptr;
    EXPECT_STATUS(rdma::provider::Module<Toy>::entry(nullptr, &out), RI_EINVAL);
    ri_host_ops_t host{sizeof(ri_host_ops_t), RI_ABI_VERSION, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    ASSERT_RI_OK(rdma::provider::Module<Toy>::entry(&host, &out));
    EXPECT_EQ(out, &m);
    EXPECT_EQ(&rdma::provider::Module<Toy>::host(), &host);
}

}  // namespace
