// Kernel consumer modules: real krdmad processes on private device paths load the example module (a C++ consumer
// hosted in the kAL with a PD, a CQ and an MR on a softrnic RNIC) and a C module whose start fails, from their
// "consumers" configuration; rdmactl shows the module and its objects; SIGTERM stops it before the kAL goes. Bad
// entries are refused with errors that name them, and the embedded kAL runs the same modules.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config.hpp"
#include "embedded_kal.hpp"
#include "krdmad_fixture.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool contains(const std::string &text, const std::string &what) { return text.find(what) != std::string::npos; }

class ConsumerModules : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        marker_ = dir_ / "marker";
    }

    // krdmad's configuration: softrnic with one RNIC, and @p consumers.
    std::string config(const json &consumers) const {
        json c{{"device", device_.string()},
               {"provider_dir", SOFTRNIC_PROVIDER_DIR},
               {"modules", {"softrnic_kvp.so"}},
               {"rnics", {{{"provider", "softrnic"}, {"name", "sr0"}, {"address", "127.0.0.1"}}}},
               {"log_level", "info"},
               {"consumers", consumers}};
        return c.dump();
    }
    json example(bool required = false) const {
        return {{"module", CONSUMER_MODULE_DIR "/consumer_module_example.so"},
                {"args", {{"marker", marker_.string()}}},
                {"required", required}};
    }
    static json failing(bool required = false) {
        return {{"module", CONSUMER_MODULE_DIR "/consumer_module_failing.so"}, {"args", {{"lun", 7}}},
                {"required", required}};
    }
    pid_t start_with(const json &consumers) { return start({"--config", write_config(config(consumers)).string()}); }
    json rdmactl_json(const std::string &command) {
        std::string out;
        EXPECT_EQ(rdmactl({"--json", "--device", device_.string(), command}, out), 0) << out;
        return json::parse(out, nullptr, false);
    }
    int stop(pid_t pid) {
        ::kill(pid, SIGTERM);
        return wait_exit(pid);
    }
    std::string marker() const { return read_text(marker_); }

    fs::path device_, marker_;
};

TEST_F(ConsumerModules, ExampleHoldsItsObjectsWhileKrdmadServesAndStopsOnSigterm) {
    pid_t pid = start_with(json::array({example()}));
    ASSERT_TRUE(wait_ready(pid)) << stderr_text();
    EXPECT_TRUE(contains(marker(), "started client")) << marker();
    const std::string log = stderr_text();
    EXPECT_TRUE(contains(log, "example consumer ready on " + device_.string() + ": RNIC sr0 opened")) << log;
    EXPECT_TRUE(contains(log, "the process's current kAL")) << log;
    EXPECT_TRUE(contains(log, "started consumer module example")) << log;

    // Its objects are the kAL's own, counted under krdmad's pid and on the RNIC.
    json res = rdmactl_json("resources");
    ASSERT_TRUE(res.is_object()) << res;
    bool found = false;
    for (const auto &p : res["processes"]) {
        if (p["pid"].get<pid_t>() != pid) continue;
        found = true;
        EXPECT_GE(p["client"].get<uint32_t>(), 0x80000000u) << p;
        EXPECT_EQ(p["objects"]["rnic"], 1) << p;
        EXPECT_EQ(p["objects"]["pd"], 1) << p;
        EXPECT_EQ(p["objects"]["cq"], 1) << p;
        EXPECT_EQ(p["objects"]["mr"], 1) << p;
    }
    EXPECT_TRUE(found) << res;
    ASSERT_EQ(res["rnics"].size(), 1u) << res;
    EXPECT_EQ(res["rnics"][0]["opens"], 1) << res;

    json list = rdmactl_json("consumers");
    ASSERT_EQ(list.size(), 1u) << list;
    EXPECT_EQ(list[0]["name"], "example");
    EXPECT_EQ(list[0]["state"], "running");
    EXPECT_TRUE(contains(list[0]["file"].get<std::string>(), "consumer_module_example.so")) << list;
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "consumers"}, out), 0) << out;
    EXPECT_TRUE(contains(out, "example") && contains(out, "running")) << out;

    EXPECT_EQ(stop(pid), 0) << stderr_text();
    EXPECT_TRUE(contains(marker(), "stopped")) << marker();
    const std::string end = stderr_text();
    const size_t stopped = end.find("example consumer stopped");
    ASSERT_NE(stopped, std::string::npos) << end;
    // The module went while the kAL still served: before krdmad's last words.
    EXPECT_LT(stopped, end.find("shutting down")) << end;
    EXPECT_TRUE(contains(end, "stopped consumer module example")) << end;
}

TEST_F(ConsumerModules, FailingModuleIsSkippedWithItsReason) {
    pid_t pid = start_with(json::array({failing(), example()}));
    ASSERT_TRUE(wait_ready(pid)) << stderr_text();
    const std::string log = stderr_text();
    EXPECT_TRUE(contains(log, "failing consumer refuses to start on " + device_.string() + " (args {\"lun\":7})"))
        << log;
    EXPECT_TRUE(contains(log, "consumer_module_failing.so: start failed: No such device (ENODEV)")) << log;
    EXPECT_TRUE(contains(log, "skipped (not required)")) << log;
    EXPECT_TRUE(contains(marker(), "started client")) << marker();  // the next module runs all the same

    json list = rdmactl_json("consumers");
    ASSERT_EQ(list.size(), 2u) << list;
    EXPECT_EQ(list[0]["name"], "failing");
    EXPECT_EQ(list[0]["state"], "failed");
    EXPECT_TRUE(contains(list[0]["error"].get<std::string>(), "ENODEV")) << list;
    EXPECT_EQ(list[1]["state"], "running");
    EXPECT_EQ(stop(pid), 0) << stderr_text();
    EXPECT_TRUE(contains(marker(), "stopped")) << marker();
}

TEST_F(ConsumerModules, RequiredModuleThatFailsStopsKrdmadBeforeItServes) {
    pid_t pid = start_with(json::array({example(), failing(true)}));
    EXPECT_EQ(wait_exit(pid), 3) << stderr_text();
    const std::string log = stderr_text();
    EXPECT_TRUE(contains(log, "start failed: No such device (ENODEV)")) << log;
    EXPECT_TRUE(contains(log, "it is required")) << log;
    EXPECT_FALSE(contains(read_text(dir_ / "stdout"), "ready on"));
    // The module started before it was stopped on the way out.
    EXPECT_TRUE(contains(marker(), "started client")) << marker();
    EXPECT_TRUE(contains(marker(), "stopped")) << marker();

    pid = start_with(json::array({{{"module", "no_such_consumer.so"}, {"required", true}}}));
    EXPECT_EQ(wait_exit(pid), 3) << stderr_text();
    EXPECT_TRUE(contains(stderr_text(), "no_such_consumer.so: no such file")) << stderr_text();
}

TEST_F(ConsumerModules, UnloadableAndDisabledModulesAreListedWithTheReason) {
    std::ofstream(dir_ / "text.so") << "not an ELF file\n";
    json disabled = example();
    disabled["enabled"] = false;
    pid_t pid = start_with(json::array({{{"module", "no_such_consumer.so"}},
                                        {{"module", (dir_ / "text.so").string()}},
                                        {{"module", "softrnic_kvp.so"}},  // a shared object, but a kVP
                                        disabled}));
    ASSERT_TRUE(wait_ready(pid)) << stderr_text();
    const std::string log = stderr_text();
    EXPECT_TRUE(contains(log, "no_such_consumer.so: no such file (bare names are looked up in the provider directory"))
        << log;
    EXPECT_TRUE(contains(log, "text.so: not a loadable shared object")) << log;
    EXPECT_TRUE(contains(log, "does not export the entry symbol krdma_consumer_module_v1")) << log;
    EXPECT_TRUE(contains(log, "is disabled in the configuration")) << log;
    EXPECT_FALSE(fs::exists(marker_));

    json list = rdmactl_json("consumers");
    ASSERT_EQ(list.size(), 4u) << list;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(list[i]["state"], "failed") << list;
    EXPECT_EQ(list[3]["state"], "disabled") << list;
    EXPECT_EQ(stop(pid), 0) << stderr_text();
}

TEST_F(ConsumerModules, BadEntriesAreRejectedWithTheKeyNamed) {
    const std::pair<const char *, const char *> bad[] = {
        {R"({"consumers": {"module": "x.so"}})", "config.consumers must be an array"},
        {R"({"consumers": ["x.so"]})", "config.consumers[0] must be an object"},
        {R"({"consumers": [{"module": "x.so", "arg": {}}]})", "unknown key config.consumers[0].arg"},
        {R"({"consumers": [{"module": 5}]})", "config.consumers[0].module must be a string"},
        {R"({"consumers": [{"args": {}}]})", "config.consumers[0].module must name the module's file"},
        {R"({"consumers": [{"module": ""}]})", "config.consumers[0].module must name the module's file"},
        {R"({"consumers": [{"module": "x.so", "enabled": "yes"}]})", "config.consumers[0].enabled must be true or"},
        {R"({"consumers": [{"module": "a.so"}, {"module": "x.so", "required": 1}]})",
         "config.consumers[1].required must be true or false"},
    };
    for (const auto &[text, message] : bad) {
        auto c = kal::parse_config(text);
        ASSERT_FALSE(c) << text;
        EXPECT_TRUE(contains(c.error().message(), message)) << text << ": " << c.error().message();
    }
    auto good = kal::parse_config(
        R"({"consumers": [{"module": "a.so", "args": {"luns": [1, 2]}, "required": true}, {"module": "/x/b.so",
            "enabled": false}, {"module": "c.so", "args": "text"}]})");
    ASSERT_OK(good) << good.error().message();
    ASSERT_EQ(good->consumers.size(), 3u);
    EXPECT_EQ(good->consumers[0].args, R"({"luns":[1,2]})");
    EXPECT_TRUE(good->consumers[0].required && good->consumers[0].enabled);
    EXPECT_EQ(good->consumers[1].args, "{}");
    EXPECT_FALSE(good->consumers[1].enabled || good->consumers[1].required);
    EXPECT_EQ(good->consumers[2].args, R"("text")");

    // krdmad refuses such a configuration at start, and --check says why.
    const auto file = write_config(R"({"device": ")" + device_.string() +
                                   R"(", "consumers": [{"module": "x.so", "args": {}, "requierd": true}]})");
    EXPECT_EQ(wait_exit(start({"--check", "--config", file.string()})), 2);
    EXPECT_TRUE(contains(stderr_text(), "unknown key config.consumers[0].requierd")) << stderr_text();
    EXPECT_EQ(wait_exit(start({"--config", file.string()})), 2);
    EXPECT_FALSE(fs::exists(device_));
}

// The embedded kAL reads the same configuration and runs the same modules (this program exports the kAL's
// functions to them: kal_consumer_exports).
TEST_F(ConsumerModules, EmbeddedKalRunsTheSameModules) {
    auto c = kal::parse_config(config(json::array({failing(), example()})));
    ASSERT_OK(c) << c.error().message();
    auto k = kal::EmbeddedKal::start(*c);
    ASSERT_OK(k) << k.error().to_string();
    EXPECT_TRUE(contains(marker(), "started client")) << marker();
    EXPECT_EQ(kal::ConsumerHost::current(), &(*k)->consumer_host());
    auto list = (*k)->consumers().list();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].state, KRDMA_CONSUMER_FAILED);
    EXPECT_EQ(list[1].state, KRDMA_CONSUMER_RUNNING);
    EXPECT_EQ((*k)->adapters().list().at(0).opens, 1u);
    k->reset();
    EXPECT_TRUE(contains(marker(), "stopped")) << marker();
    EXPECT_EQ(kal::ConsumerHost::current(), nullptr);

    c->consumers = {c->consumers[0]};
    c->consumers[0].required = true;
    auto refused = kal::EmbeddedKal::start(*c);
    ASSERT_FALSE(refused);
    EXPECT_TRUE(contains(refused.error().to_string(), "start failed: No such device (ENODEV)"))
        << refused.error().to_string();
}

}  // namespace
