// The error model: Status on fast paths, Expected<T> with messages on slow paths, errno names.
#include <gtest/gtest.h>

#include <cerrno>
#include <utility>

#include "rnicpi/cpp/status.hpp"
#include "status_matchers.hpp"

namespace {

TEST(Status, DefaultIsSuccess) {
    rdma::Status s;
    EXPECT_OK(s);
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
    EXPECT_FALSE(rdma::in_vocabulary(4242));
    EXPECT_FALSE(rdma::in_vocabulary(EMFILE));
}

// The connection codes the kAL's LLP management reports are named members of the vocabulary.
TEST(Status, NetworkCodesHaveTheirNames) {
    const std::pair<int, const char *> codes[] = {
        {RI_EAFNOSUPPORT, "EAFNOSUPPORT"}, {RI_EADDRINUSE, "EADDRINUSE"}, {RI_EADDRNOTAVAIL, "EADDRNOTAVAIL"},
        {RI_ENETUNREACH, "ENETUNREACH"},   {RI_ECONNABORTED, "ECONNABORTED"}, {RI_EISCONN, "EISCONN"},
        {RI_EHOSTUNREACH, "EHOSTUNREACH"}};
    for (const auto &[code, name] : codes) {
        EXPECT_EQ(rdma::errno_name(code), name);
        EXPECT_TRUE(rdma::in_vocabulary(code)) << name;
        EXPECT_EQ(rdma::Error(code, "x").to_string(), std::string("x (") + name + ")");
    }
}

// What a system call sets becomes a member of the vocabulary, whatever it was.
TEST(Status, ErrnoValuesMapIntoTheVocabulary) {
    EXPECT_STATUS(rdma::from_errno(EADDRINUSE), RI_EADDRINUSE);
    EXPECT_STATUS(rdma::from_errno(ECONNREFUSED), RI_ECONNREFUSED);
    EXPECT_STATUS(rdma::from_errno(EMFILE), RI_ENOSPC);
    EXPECT_STATUS(rdma::from_errno(ENFILE), RI_ENOSPC);
    EXPECT_STATUS(rdma::from_errno(ENOBUFS), RI_ENOMEM);
    EXPECT_STATUS(rdma::from_errno(EPIPE), RI_ECONNRESET);
    EXPECT_STATUS(rdma::from_errno(ENETDOWN), RI_ENETUNREACH);
    EXPECT_STATUS(rdma::from_errno(0), RI_EIO);  // a failure never turns into success
    EXPECT_STATUS(rdma::from_errno(ENOLINK), RI_EIO);
    for (int e = 0; e < 200; ++e) EXPECT_TRUE(rdma::in_vocabulary(rdma::from_errno(e))) << e;
}

TEST(Expected, HoldsValue) {
    rdma::Expected<int> e(42);
    ASSERT_OK(e);
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
    EXPECT_OK(ok);
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
