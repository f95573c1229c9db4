/** @file test_case.cpp @brief Labels of test cases and sizes. */
#include "test_case.hpp"

namespace it_perf {

std::string size_label(uint64_t bytes) {
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
    if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
    return std::to_string(bytes) + "B";
}

std::string TestCase::label() const {
    return std::string(op_name(op)) + " " + kind_name(kind) + " " + size_label(size);
}

}  // namespace it_perf
