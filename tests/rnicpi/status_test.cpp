// The error model: Status on fast paths, Expected<T> with messages on slow paths, errno names.
#include <gtest/gtest.h>

#include <cerrno>

#include "rnicpi/cpp/status.hpp"

namespace {

TEST(Status, DefaultIsSuccess) {
    rdma::Status s;
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE(static_cast<bool>(s));
    EXPECT_EQ(s.code(), 0);
    EXPECT_EQ(s.name(), "OK");
}

TEST(Status, CarriesErrnoValues) {
    rdma::Status s(RI_EAGAIN);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.code(), EAGAIN);
    EXPECT_EQ(s.name(), "EAGAIN");
    EXPECT_EQ(s.describe(), std::string(std::strerror(EAGAIN)));
    EXPECT_EQ(rdma::Status(RI_EAGAIN), s);
    EXPECT_FALSE(rdma::Status(RI_EINVAL) == s);
}

TEST(Status, UnknownCodesAreNamedButNotTrusted) {
    EXPECT_EQ(rdma::errno_name(-5), "E?");
    EXPECT_EQ(rdma::errno_name(4242), "E?");
}

TEST(Expected, HoldsValue) {
    rdma::Expected<int> e(42);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, 42);
    EXPECT_EQ(e.value(), 42);
}

TEST(Expected, HoldsErrorWithMessage) {
    rdma::Expected<std::string> e(rdma::Error(RI_ENODEV, "no RNIC serves 10.0.0.1"));
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code(), ENODEV);
    EXPECT_EQ(e.error().status(), rdma::Status(RI_ENODEV));
    EXPECT_EQ(e.error().to_string(), "no RNIC serves 10.0.0.1 (ENODEV)");
}

TEST(Expected, VoidSpecialization) {
    rdma::Expected<void> ok;
    EXPECT_TRUE(ok.has_value());
    rdma::Expected<void> bad(rdma::Error(RI_EBUSY, "in use"));
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.error().code(), EBUSY);
    EXPECT_EQ(bad.error().message(), "in use");
}

TEST(Expected, MovesOutValue) {
    rdma::Expected<std::unique_ptr<int>> e(std::make_unique<int>(7));
    std::unique_ptr<int> p = std::move(e).value();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(*p, 7);
}

}  // namespace
