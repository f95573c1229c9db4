// Logging: levels, parsing, the replaceable sink and the provider upcall.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rnicpi/host/log.hpp"
#include "status_matchers.hpp"

namespace {

struct Captured {
    rdma::log::Level level;
    std::string component;
    std::string message;
};

class LogTest : public ::testing::Test {
protected:
    void SetUp() override {
        saved_level_ = rdma::log::level();
        previous_ = rdma::log::set_sink([this](rdma::log::Level l, std::string_view c, std::string_view m) {
            lines_.push_back({l, std::string(c), std::string(m)});
        });
    }
    void TearDown() override {
        rdma::log::set_sink(std::move(previous_));
        rdma::log::set_level(saved_level_);
    }
    std::vector<Captured> lines_;
    rdma::log::Sink previous_;
    rdma::log::Level saved_level_{};
};

TEST_F(LogTest, WritesEnabledLevelsOnly) {
    rdma::log::set_level(rdma::log::Level::info);
    RDMA_LOG_DEBUG("test", "hidden %d", 1);
    RDMA_LOG_INFO("test", "shown %d", 2);
    RDMA_LOG_ERROR("kal", "failed: %s", "why");
    ASSERT_EQ(lines_.size(), 2u);
    EXPECT_EQ(lines_[0].message, "shown 2");
    EXPECT_EQ(lines_[0].component, "test");
    EXPECT_EQ(lines_[1].level, rdma::log::Level::error);
    EXPECT_EQ(lines_[1].message, "failed: why");
}

TEST_F(LogTest, ParsesLevels) {
    EXPECT_EQ(*rdma::log::parse_level("debug"), rdma::log::Level::debug);
    EXPECT_EQ(*rdma::log::parse_level("warning"), rdma::log::Level::warn);
    auto bad = rdma::log::parse_level("loud");
    ASSERT_FALSE(bad);
    EXPECT_STATUS(bad, RI_EINVAL);
    EXPECT_NE(bad.error().message().find("loud"), std::string::npos);
}

TEST_F(LogTest, TruncatesLongMessagesSafely) {
    rdma::log::set_level(rdma::log::Level::info);
    std::string big(5000, 'x');
    RDMA_LOG_INFO("test", "%s", big.c_str());
    ASSERT_EQ(lines_.size(), 1u);
    EXPECT_EQ(lines_[0].message.size(), 1023u);
}

TEST_F(LogTest, HostUpcallClampsForeignValues) {
    rdma::log::set_level(rdma::log::Level::debug);
    rdma::log::host_log(RI_LOG_WARN, "vendorx", "link flap");
    rdma::log::host_log(999, nullptr, nullptr);  // a buggy module must not crash the host
    ASSERT_EQ(lines_.size(), 2u);
    EXPECT_EQ(lines_[0].level, rdma::log::Level::warn);
    EXPECT_EQ(lines_[0].component, "vendorx");
    EXPECT_EQ(lines_[1].level, rdma::log::Level::debug);
    EXPECT_EQ(lines_[1].component, "provider");
    EXPECT_EQ(lines_[1].message, "");
}


// A client that sends a malformed request per millisecond must not fill the log: 10 lines per 5 s from one call
// site, and the count of what was held back with the next line written.
TEST_F(LogTest, ClientCausedMessagesAreRateLimitedAndTheSuppressedCounted) {
    rdma::log::set_level(rdma::log::Level::warn);
    for (int i = 0; i < 1000; ++i) RDMA_LOG_CLIENT(warn, "test", "malformed request %d", i);
    ASSERT_EQ(lines_.size(), 10u);
    EXPECT_EQ(lines_.back().message, "malformed request 9");
    // A new interval reports the 990 held back before its first message.
    rdma::log::RateLimit limit(2, std::chrono::milliseconds(50));
    lines_.clear();
    for (int i = 0; i < 5; ++i) rdma::log::write_limited(limit, rdma::log::Level::warn, "test", "burst %d", i);
    EXPECT_EQ(lines_.size(), 2u);
    EXPECT_EQ(limit.suppressed_total(), 3u);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    rdma::log::write_limited(limit, rdma::log::Level::warn, "test", "after");
    ASSERT_EQ(lines_.size(), 4u);
    EXPECT_EQ(lines_[2].message, "3 similar message(s) suppressed (at most 10 per 5 s are logged)");
    EXPECT_EQ(lines_[3].message, "after");
}

TEST_F(LogTest, ProvidersWarningsAreRateLimited) {
    rdma::log::set_level(rdma::log::Level::debug);
    for (int i = 0; i < 100; ++i) rdma::log::host_log(RI_LOG_WARN, "prov", "the client's private data is malformed");
    // 20 per 5 s for all modules together (another test of this process may have used one).
    EXPECT_LE(lines_.size(), 20u);
    EXPECT_GE(lines_.size(), 18u);
    const size_t warned = lines_.size();
    for (int i = 0; i < 5; ++i) rdma::log::host_log(RI_LOG_DEBUG, "prov", "detail");
    EXPECT_EQ(lines_.size(), warned + 5);  // what is not a warning is not limited (and is off by default)
}

}  // namespace
