// The IT-API conformance suite as a kernel consumer module: krdmad loads it from its configuration and its start
// runs every test of conformance_test.cpp against the kernel IT-API krdmad exports (the it_* calls resolve against
// krdmad), writing GoogleTest's XML report where the module's arguments say. tests/itapi/kernel_suite_test.cpp
// starts that krdmad and reads the report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "krdma/consumer_module.h"

namespace {

int suite_start(const krdma_consumer_env_t *env, const char *args_json, void **state) {
    *state = nullptr;
    std::string output = "xml:/tmp/itapi-kernel-suite.xml";
    std::string filter = "*";
    try {
        const auto args = nlohmann::json::parse(args_json != nullptr ? args_json : "{}");
        if (args.contains("output")) output = "xml:" + args.at("output").get<std::string>();
        if (args.contains("filter")) filter = args.at("filter").get<std::string>();
    } catch (const std::exception &e) {
        env->log(env, KRDMA_CONSUMER_LOG_ERROR, "bad arguments: %s", e.what());
        return 22;  // EINVAL
    }
    std::vector<std::string> args{"itapi-kernel-suite", "--gtest_output=" + output, "--gtest_filter=" + filter};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    ::testing::InitGoogleTest(&argc, argv.data());
    const int failed = RUN_ALL_TESTS();
    env->log(env, KRDMA_CONSUMER_LOG_INFO, "kernel IT-API suite %s", failed == 0 ? "passed" : "FAILED");
    return 0;  // the report says how the tests went; the module itself started fine
}

void suite_stop(void *) {}

}  // namespace

extern "C" {
/** @brief The module's entry symbol. */
KRDMA_CONSUMER_MODULE_EXPORT extern const krdma_consumer_module_t krdma_consumer_module_v1;
const krdma_consumer_module_t krdma_consumer_module_v1 = {
    sizeof(krdma_consumer_module_t),
    KRDMA_CONSUMER_ABI_VERSION,
    "itapi-kernel-suite",
    "the IT-API conformance suite against the kernel IT-API",
    &suite_start,
    &suite_stop,
};
}
