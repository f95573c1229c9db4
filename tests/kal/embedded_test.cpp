// The embedded kAL: the same blocks as krdmad on a thread of this process, reached over an in-process socket pair.
#include <gtest/gtest.h>

#include <cstring>

#include "embedded_kal.hpp"
#include "rnic_calls.hpp"
#include "syscall.hpp"
#include "status_matchers.hpp"

namespace {

kal::Config config() {
    kal::Config c;
    c.provider_dir = TEST_PROVIDER_DIR;
    c.modules = {"test_cpp_kvp.so"};
    c.rnics = {kal::AttachRequest{"cppkvp", "cpp0", "", "127.0.0.1", ""}};
    return c;
}

std::unique_ptr<ual::DeviceClient> connect(kal::EmbeddedKal &k) {
    auto fd = k.connect_local();
    EXPECT_OK(fd);
    auto c = ual::DeviceClient::adopt(std::move(*fd));
    EXPECT_OK(c) << (c ? "" : c.error().to_string());
    return c ? std::move(*c) : nullptr;
}

// Opens RNIC cpp0 the way a uVP does: an ri_syscall through the uAL's upcall. Returns the kAL handle, 0 on failure.
uint64_t open_cpp0(ual::DeviceClient &c, ri_status_t expect = RI_OK) {
    uint64_t h = 0;
    EXPECT_EQ(testutil::open_rnic(c, "cpp0", &h), expect);
    return h;
}

TEST(EmbeddedKal, ServesTheSameDeviceInProcess) {
    auto k = kal::EmbeddedKal::start(config());
    ASSERT_OK(k) << k.error().to_string();
    auto c = connect(**k);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->hello().pid, static_cast<uint32_t>(::getpid()));
    // An RNIC open and a query through the kVP, exactly as over krdmad's path.
    uint64_t rnic = open_cpp0(*c);
    ASSERT_NE(rnic, 0u);
    ri_rnic_attr_t attr{};
    ri_syscall_t q{};
    q.size = sizeof q;
    q.op = RI_QUERY_RNIC;
    q.object = rnic;
    q.result = &attr;
    q.result_cap = sizeof attr;
    ASSERT_RI_OK(ual::device_syscall(c.get(), &q));
    EXPECT_STREQ(attr.name, "cppkvp0");
    EXPECT_EQ((*k)->adapters().list().at(0).opens, 1u);
    // Several clients at once.
    auto c2 = connect(**k);
    ASSERT_NE(c2, nullptr);
    EXPECT_NE(c2->hello().client_id, c->hello().client_id);
}

TEST(EmbeddedKal, StoppingWithClientsConnectedIsClean) {
    auto k = kal::EmbeddedKal::start(config());
    ASSERT_OK(k);
    auto c = connect(**k);
    ASSERT_NE(open_cpp0(*c), 0u);
    k->reset();  // the open is torn down with the kAL
    open_cpp0(*c, RI_ENODEV);
}

TEST(EmbeddedKal, BadConfigurationIsRefused) {
    kal::Config c = config();
    c.modules = {"no_such.so"};
    auto k = kal::EmbeddedKal::start(c);
    ASSERT_FALSE(k);
    EXPECT_STATUS(k, RI_ENOENT);
    c = config();
    c.rnics[0].address = "192.0.2.1";
    auto k2 = kal::EmbeddedKal::start(c);
    ASSERT_FALSE(k2);
    EXPECT_NE(k2.error().message().find("cannot attach RNIC cpp0"), std::string::npos);
}

TEST(EmbeddedKal, AnUnknownAdminGroupIsRefused) {
    kal::Config c = config();
    c.admin_group = "no-such-group-for-krdmad";
    auto k = kal::EmbeddedKal::start(c);
    ASSERT_FALSE(k);
    EXPECT_STATUS(k, RI_ENOENT);
    EXPECT_NE(k.error().message().find("no-such-group-for-krdmad"), std::string::npos);
}

}  // namespace
