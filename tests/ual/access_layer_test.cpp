// The access layer against real kALs: an embedded one configured by a krdmad configuration file, and a real
// krdmad process. RNICs are learned from the kAL, the uVP is loaded from the path the kAL gives, adapters are
// chosen by name or network address, and the kAL going away reaches the consumer as an event.
#include <gtest/gtest.h>

#include <signal.h>

#include "krdmad_fixture.hpp"
#include "embedded_link.hpp"
#include "ual/access_layer.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;

std::string config_json(const std::string &device) {
    return std::string(R"({"device": ")") + device + R"(", "provider_dir": ")" TEST_PROVIDER_DIR R"(",
        "modules": ["test_cpp_kvp.so"],
        "rnics": [{"provider": "cppkvp", "name": "cpp0", "address": "127.0.0.1"}]})";
}

class AccessLayerTest : public testutil::KrdmadFixture {};

TEST_F(AccessLayerTest, EmbeddedKalServesRnicsAndLoadsTheirUvp) {
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    o.embedded_config = write_config(config_json((dir_ / "unused").string()));
    auto al = ual::AccessLayer::open(o);
    ASSERT_OK(al) << al.error().to_string();
    EXPECT_TRUE((*al)->embedded());
    auto list = (*al)->rnics();
    ASSERT_OK(list);
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ(list->at(0).name, "cpp0");
    EXPECT_EQ(list->at(0).address, "127.0.0.1");
    EXPECT_EQ(list->at(0).uvp_library, TEST_PROVIDER_DIR "/test_good_uvp.so");  // resolved by the kAL
    // By name and by network address: both load (once) and open the uVP named by the kAL.
    auto by_name = (*al)->open_adapter("cpp0");
    ASSERT_OK(by_name) << by_name.error().to_string();
    auto by_addr = (*al)->open_adapter("127.0.0.1");
    ASSERT_OK(by_addr) << by_addr.error().to_string();
    auto attr = (*by_addr)->query();
    ASSERT_OK(attr);
    EXPECT_STREQ(attr->name, "goodtest0");  // answered by the uVP
    auto none = (*al)->open_adapter("10.99.99.99");
    ASSERT_FALSE(none);
    EXPECT_STATUS(none, RI_ENODEV);
    EXPECT_NE(none.error().message().find("10.99.99.99"), std::string::npos);
    // Objects keep their parents alive: dropping the access layer first is safe.
    al->reset();
    auto pz = (*by_name)->create_pz();
    ASSERT_OK(pz);
}

TEST_F(AccessLayerTest, KrdmadNotRunningIsAClearError) {
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    o.device = dir_ / "nobody-home";
    auto al = ual::AccessLayer::open(o);
    ASSERT_FALSE(al);
    EXPECT_TRUE(al.error().code() == RI_ENOENT || al.error().code() == RI_ECONNREFUSED);
    EXPECT_NE(al.error().message().find("krdmad"), std::string::npos) << al.error().message();
}

// A device the program names is where it goes, whatever $OPENRDMA_EMBEDDED_CONFIG says (a benchmark that starts
// its own krdmad was sent to an embedded kAL it never asked for); without one, the environment still applies.
TEST_F(AccessLayerTest, ANamedDeviceWinsOverTheEnvironmentsEmbeddedKal) {
    const auto device = dir_ / "krdma.sock";
    pid_t pid = start({"--config", write_config(config_json(device.string()))});
    ASSERT_GT(pid, 0);
    ASSERT_NE(connect(device), nullptr) << stderr_text();
    const std::string embedded = write_config(config_json((dir_ / "unused").string()));
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", embedded.c_str(), 1);
    struct Unset {
        ~Unset() { ::unsetenv("OPENRDMA_EMBEDDED_CONFIG"); }
    } unset;
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    o.device = device;
    auto named = ual::AccessLayer::open(o);
    ASSERT_OK(named) << named.error().to_string();
    EXPECT_FALSE((*named)->embedded());
    o.device.clear();
    auto from_env = ual::AccessLayer::open(o);
    ASSERT_OK(from_env) << from_env.error().to_string();
    EXPECT_TRUE((*from_env)->embedded());
}

TEST_F(AccessLayerTest, KrdmadStoppingReachesTheConsumerAsAnEvent) {
    const auto device = dir_ / "krdma.sock";
    pid_t pid = start({"--config", write_config(config_json(device.string()))});
    ASSERT_NE(connect(device), nullptr) << stderr_text();
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    o.device = device;
    auto al = ual::AccessLayer::open(o);
    ASSERT_OK(al) << al.error().to_string();
    EXPECT_FALSE((*al)->embedded());
    auto adapter = (*al)->open_adapter("cpp0");
    ASSERT_OK(adapter) << adapter.error().to_string();
    auto unaffiliated = ual::SimpleDispatcher::create(ual::EventStream::unaffiliated_async, 8);
    ASSERT_OK(unaffiliated);
    (*adapter)->set_async_dispatchers(nullptr, *unaffiliated);
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    auto e = (*unaffiliated)->wait(10s);
    ASSERT_OK(e) << e.error().to_string();
    EXPECT_EQ(e->stream, ual::EventStream::unaffiliated_async);
    EXPECT_EQ(e->id, static_cast<uint32_t>(RI_AE_RNIC_FATAL));
    EXPECT_EQ(e->resource_type, static_cast<uint32_t>(RI_RES_RNIC));
    EXPECT_EQ(wait_exit(pid), 0);
}

}  // namespace
