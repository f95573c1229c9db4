/**
 * @file status_matchers.hpp
 * @brief Assertions on the project's statuses that print the reason of a failure, not "Actual: false".
 *
 * `ASSERT_OK(call())` asserts what `ASSERT_TRUE(call().ok())` asserts (an `rdma::Status` of 0, an `rdma::Expected`
 * holding a value) and, when it fails, prints the status name, or the `Expected`'s message and status name.
 * The expression is evaluated once.
 */
#ifndef OPENRDMA_TESTS_STATUS_MATCHERS_HPP
#define OPENRDMA_TESTS_STATUS_MATCHERS_HPP

#include <gtest/gtest.h>

#include <string>

#include "rnicpi/cpp/status.hpp"

namespace rdmatest {

/** @brief Success when @p s is 0; else a failure naming the expression @p text and the status ("EINVAL: ..."). */
inline ::testing::AssertionResult status_ok(const char *text, const rdma::Status &s) {
    if (s.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text << " failed: " << s.name() << " (" << s.describe() << ")";
}

/** @brief Success when @p e holds a value; else a failure naming the expression @p text and the error's message. */
template <class T>
::testing::AssertionResult status_ok(const char *text, const rdma::Expected<T> &e) {
    if (e.has_value()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text << " failed: " << e.error().to_string();
}

}  // namespace rdmatest

/** @brief Fatal: @p expr (an rdma::Status or rdma::Expected) succeeded; prints its reason when it did not. */
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::rdmatest::status_ok, expr)
/** @brief Non-fatal: @p expr (an rdma::Status or rdma::Expected) succeeded; prints its reason when it did not. */
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::rdmatest::status_ok, expr)

#endif  // OPENRDMA_TESTS_STATUS_MATCHERS_HPP
