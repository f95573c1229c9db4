// Interface adapter management: kVP modules loaded through the loader, RNICs attached to this host's addresses,
// selection by address, and the rules that keep a module or an RNIC in place while something uses it.
#include <gtest/gtest.h>

#include "adapter_manager.hpp"
#include "rnicpi/host/log.hpp"
#include "status_matchers.hpp"

namespace {

const ri_host_ops_t kHost{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

class Adapters : public ::testing::Test {
protected:
    rdma::rnicpi::ModuleLoader loader{kHost, TEST_PROVIDER_DIR};
    kal::AdapterManager mgr{loader};

    void SetUp() override {
        ASSERT_OK(mgr.load("test_cpp_kvp.so"));
        ASSERT_OK(mgr.load("test_good_kvp.so"));  // two providers at once
    }
    kal::AttachRequest req(std::string provider, std::string name, std::string address, std::string netdev = "") {
        return kal::AttachRequest{std::move(provider), std::move(name), std::move(netdev), std::move(address), ""};
    }
};

TEST_F(Adapters, AttachListAndSelectByAddress) {
    auto a = mgr.attach(req("cppkvp", "cpp0", "127.0.0.1"));
    ASSERT_OK(a) << a.error().to_string();
    EXPECT_EQ(a->netdev, "lo");
    EXPECT_EQ(a->address, "127.0.0.1");
    EXPECT_EQ(a->vendor, "OpenRDMA tests");
    EXPECT_NE(a->uvp_library.find("test_good_uvp.so"), std::string::npos);
    auto b = mgr.attach(req("goodtest", "good0", "", "lo"));  // by netdev: its first address
    ASSERT_FALSE(b);  // lo's first address is 127.0.0.1, already taken
    EXPECT_STATUS(b, RI_EEXIST);
    auto list = mgr.list();
    ASSERT_EQ(list.size(), 1u);
    auto found = mgr.find_by_address("127.0.0.1");
    ASSERT_OK(found);
    EXPECT_EQ(found->name, "cpp0");
    auto none = mgr.find_by_address("127.0.0.2");
    ASSERT_FALSE(none);
    EXPECT_STATUS(none, RI_ENODEV);
}

TEST_F(Adapters, RefusesWhatTheHostDoesNotHave) {
    EXPECT_STATUS(mgr.attach(req("nosuch", "x0", "127.0.0.1")), RI_ENOENT);
    EXPECT_STATUS(mgr.attach(req("cppkvp", "x0", "not-an-address")), RI_EINVAL);
    auto foreign = mgr.attach(req("cppkvp", "x0", "192.0.2.55"));  // TEST-NET-1, never configured here
    ASSERT_FALSE(foreign);
    EXPECT_STATUS(foreign, RI_ENODEV);
    EXPECT_NE(foreign.error().message().find("not configured"), std::string::npos);
    EXPECT_STATUS(mgr.attach(req("cppkvp", "x0", "", "nosuchnetdev0")), RI_ENOENT);
    EXPECT_STATUS(mgr.attach(req("cppkvp", "x0", "")), RI_EINVAL);
    EXPECT_STATUS(mgr.attach(req("cppkvp", "", "127.0.0.1")), RI_EINVAL);
    EXPECT_TRUE(mgr.list().empty());
}

TEST_F(Adapters, DuplicateNamesAreRefused) {
    ASSERT_OK(mgr.attach(req("cppkvp", "rnic0", "127.0.0.1")));
    auto again = mgr.attach(req("goodtest", "rnic0", "127.0.0.1"));
    ASSERT_FALSE(again);
    EXPECT_STATUS(again, RI_EEXIST);
    EXPECT_NE(again.error().message().find("named rnic0"), std::string::npos) << again.error().message();
    EXPECT_EQ(mgr.list().size(), 1u);
}

TEST_F(Adapters, OpenRnicsCannotBeDetachedAndAttachedProvidersCannotBeUnloaded) {
    ASSERT_OK(mgr.attach(req("cppkvp", "cpp0", "127.0.0.1")));
    auto unload = mgr.unload("cppkvp");
    ASSERT_FALSE(unload);
    EXPECT_STATUS(unload, RI_EBUSY);
    {
        auto ref = mgr.open("cpp0");
        ASSERT_OK(ref);
        EXPECT_NE(ref->instance(), nullptr);
        EXPECT_EQ(mgr.list()[0].opens, 1u);
        // The provider's verbs work on the attached instance.
        ri_rnic_open_params_t op{};
        op.instance = ref->instance();
        ri_rnic_t rnic = nullptr;
        ASSERT_RI_OK(ref->module()->verbs().open_rnic(&op, &rnic));
        EXPECT_RI_OK(ref->module()->verbs().close_rnic(rnic));
        auto busy = mgr.detach("cpp0");
        ASSERT_FALSE(busy);
        EXPECT_STATUS(busy, RI_EBUSY);
    }
    EXPECT_EQ(mgr.list()[0].opens, 0u);
    ASSERT_OK(mgr.detach("cpp0"));
    EXPECT_TRUE(mgr.list().empty());
    EXPECT_STATUS(mgr.detach("cpp0"), RI_ENODEV);
    EXPECT_OK(mgr.unload("cppkvp"));
    EXPECT_STATUS(mgr.open("cpp0"), RI_ENODEV);
}

}  // namespace
