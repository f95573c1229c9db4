/**
 * @file status_matchers.hpp
 * @brief Assertions on the project's statuses that print the reason of a failure, not "Actual: false".
 *
 * `ASSERT_OK(call())` asserts what `ASSERT_TRUE(call().ok())` asserts (an `rdma::Status` of 0, an `rdma::Expected`
 * holding a value) and, when it fails, prints the status name, or the `Expected`'s message and status name.
 * The expression is evaluated once.
 *
 * `ASSERT_RI_OK(ri_call())` does the same for a C ABI ::ri_status_t (what `ASSERT_EQ(ri_call(), RI_OK)` asserted)
 * and prints "RI_EINVAL (Invalid argument)" instead of "Which is: 22".
 *
 * `EXPECT_STATUS(call(), RI_EINVAL)` is for a call that must fail with one error: the actual may be an
 * ::ri_status_t, an `rdma::Status`, an `rdma::Error` or an `rdma::Expected`, and a failure prints the error that was
 * expected and what came instead (a success, another status by name, or an `Expected`'s message).
 */
#ifndef OPENRDMA_TESTS_STATUS_MATCHERS_HPP
#define OPENRDMA_TESTS_STATUS_MATCHERS_HPP

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>

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

/** @brief "RI_EINVAL (Invalid argument)", "RI_OK (Success)", or "RI_E? 1234 (Unknown error 1234)". */
inline std::string ri_status_text(int code) {
    std::string text = "RI_" + std::string(rdma::errno_name(code));
    if (!rdma::in_vocabulary(code)) text += " " + std::to_string(code);
    return text + " (" + std::strerror(code) + ")";
}

/**
 * @brief Success when the ::ri_status_t @p code is ::RI_OK; else a failure naming the expression @p text and the
 *        status. Only an `int` (or an ::ri_errno) is taken, so a `bool` cannot pass for a status.
 */
template <class T, std::enable_if_t<std::is_same_v<T, int> || std::is_same_v<T, ri_errno>, int> = 0>
::testing::AssertionResult ri_ok(const char *text, T code) {
    if (code == RI_OK) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text << " failed: " << ri_status_text(code);
}

/** @brief What came, in words, for status_is: the status of an ::ri_status_t, a Status or an Error. */
template <class T, std::enable_if_t<std::is_same_v<T, int> || std::is_same_v<T, ri_errno>, int> = 0>
int status_code_of(T code, std::string &what) {
    what = ri_status_text(code);
    return code;
}
inline int status_code_of(const rdma::Status &s, std::string &what) { return status_code_of(s.code(), what); }
inline int status_code_of(const rdma::Error &e, std::string &what) {
    what = ri_status_text(e.code()) + ": " + e.message();
    return e.code();
}
template <class T>
int status_code_of(const rdma::Expected<T> &e, std::string &what) {
    if (e.has_value()) {
        what = "a value (success)";
        return RI_OK;
    }
    return status_code_of(e.error(), what);
}

/**
 * @brief Success when @p actual (an ::ri_status_t, Status, Error or Expected) carries the status @p expected;
 *        else a failure saying which status was expected and what came.
 */
template <class A>
::testing::AssertionResult status_is(const char *actual_text, const char * /*expected_text*/, const A &actual,
                                     int expected) {
    std::string what;
    if (status_code_of(actual, what) == expected) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << actual_text << " was expected to give " << ri_status_text(expected)
                                         << ", and gave " << what;
}

}  // namespace rdmatest

/** @brief Fatal: @p expr (an rdma::Status or rdma::Expected) succeeded; prints its reason when it did not. */
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::rdmatest::status_ok, expr)
/** @brief Non-fatal: @p expr (an rdma::Status or rdma::Expected) succeeded; prints its reason when it did not. */
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::rdmatest::status_ok, expr)

/** @brief Fatal: the ::ri_status_t @p expr is ::RI_OK; prints the status by name when it is not. */
#define ASSERT_RI_OK(expr) ASSERT_PRED_FORMAT1(::rdmatest::ri_ok, expr)
/** @brief Non-fatal: the ::ri_status_t @p expr is ::RI_OK; prints the status by name when it is not. */
#define EXPECT_RI_OK(expr) EXPECT_PRED_FORMAT1(::rdmatest::ri_ok, expr)
/** @brief Fatal: @p expr failed with the status @p code; prints the expected status and what came. */
#define ASSERT_STATUS(expr, code) ASSERT_PRED_FORMAT2(::rdmatest::status_is, expr, code)
/** @brief Non-fatal: @p expr failed with the status @p code; prints the expected status and what came. */
#define EXPECT_STATUS(expr, code) EXPECT_PRED_FORMAT2(::rdmatest::status_is, expr, code)

#endif  // OPENRDMA_TESTS_STATUS_MATCHERS_HPP
