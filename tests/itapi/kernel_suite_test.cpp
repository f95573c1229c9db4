// The kernel IT-API: a real krdmad with softrnic "sr0" on 127.0.0.1 loads the conformance suite as a consumer
// module (kernel_suite_module.cpp), which runs every conformance test inside krdmad against the kernel IT-API.
// This test reads the suite's report: every test ran and passed.
#include <fstream>
#include <iterator>
#include <regex>

#include "connection_fixtures.hpp"

namespace {

class KernelItApi : public testutil::KrdmadFixture {};

TEST_F(KernelItApi, ConformanceSuitePassesInsideKrdmad) {
    const auto device = dir_ / "krdma.sock";
    const auto report = dir_ / "kernel-suite.xml";
    const std::string consumers = R"("consumers": [{"module": ")" + std::string(SUITE_MODULE) +
                                  R"(", "required": true, "args": {"output": ")" + report.string() + R"("}}])";
    start({"--config", write_config(rdmatest::krdmad_config(device, "sr0", "127.0.0.1",
                                                                                  consumers))
                                                .string()});
    for (int i = 0; i < 3000 && !std::filesystem::exists(report); ++i) ::usleep(20000);
    ASSERT_TRUE(std::filesystem::exists(report)) << stderr_text();
    ::usleep(100000);  // the report is written in one go at the end; let it finish
    std::ifstream in(report);
    const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto attribute = [&xml](const char *name) {
        std::smatch m;
        const std::regex re(std::string("<testsuites [^>]*") + name + "=\"(\\d+)\"");
        return std::regex_search(xml, m, re) ? std::stoi(m[1]) : -1;
    };
    EXPECT_GE(attribute("tests"), 20) << "the whole suite ran: " << xml;
    EXPECT_EQ(attribute("failures"), 0) << xml;
    EXPECT_EQ(attribute("errors"), 0) << xml;
}

}  // namespace
