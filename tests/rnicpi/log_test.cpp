// Logging: levels, parsing, the replaceable sink and the provider upcall.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rnicpi/host/log.hpp"

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
    EXPECT_EQ(bad.error().code(), RI_EINVAL);
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

}  // namespace
