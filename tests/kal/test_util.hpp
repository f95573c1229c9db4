// Helpers shared by the kAL tests.
#ifndef TESTS_KAL_TEST_UTIL_HPP
#define TESTS_KAL_TEST_UTIL_HPP

#include <cstddef>
#include <filesystem>

namespace testutil {

/** @brief Descriptors open in this process now: a leak check compares two counts. */
inline size_t open_fds() {
    size_t n = 0;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)e;
        ++n;
    }
    return n;
}

}  // namespace testutil

#endif  // TESTS_KAL_TEST_UTIL_HPP
