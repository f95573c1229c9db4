/**
 * @file test_case.hpp
 * @brief What it_perf measures: an operation (Send, RDMA Write, RDMA Read), a shape (bandwidth with a window of
 *        outstanding operations, or latency), a message size, and how long to run (iterations or seconds).
 *        Shared by the IT-API runner, the TCP baseline, the report and the plot.
 */
#ifndef IT_PERF_TEST_CASE_HPP
#define IT_PERF_TEST_CASE_HPP

#include <cstdint>
#include <string>

namespace it_perf {

/** @brief The RDMA operation a test exercises. */
enum class Op : uint8_t { send = 1, write = 2, read = 3 };

/** @brief Bandwidth (a window of outstanding operations) or latency (one at a time). */
enum class Kind : uint8_t { bw = 1, lat = 2 };

/** @brief "send", "write", "read". */
inline const char *op_name(Op op) {
    switch (op) {
        case Op::send: return "send";
        case Op::write: return "write";
        case Op::read: return "read";
    }
    return "?";
}

/** @brief "bw", "lat". */
inline const char *kind_name(Kind kind) {
    switch (kind) {
        case Kind::bw: return "bw";
        case Kind::lat: return "lat";
    }
    return "?";
}

/** @brief How long one run of a test lasts: a count of timed operations, or (when seconds > 0) a wall time. */
struct Budget {
    uint64_t iterations = 1000; /**< Timed operations when seconds == 0. */
    double seconds = 0;         /**< Wall time of the timed part; 0: use iterations. */
};

/** @brief One row of the report: an operation, a shape and a message size. */
struct TestCase {
    Op op = Op::write;
    Kind kind = Kind::bw;
    uint64_t size = 65536;
    uint32_t window = 64; /**< Outstanding operations per QP (bandwidth tests). */
    uint32_t qps = 1;     /**< Data QPs the operations are spread over, round-robin (RDMA only). */
    Budget budget;

    /** @brief "write bw 64KiB". */
    [[nodiscard]] std::string label() const;
};

/** @brief "8B", "64KiB", "1MiB": a size as the summary prints it. */
std::string size_label(uint64_t bytes);

/**
 * @brief The divisor that turns a timed round trip into the latency perftest reports: 2 for a ping-pong (Send,
 *        Write), 1 for a Read, which is a round trip by nature (as ib_read_lat).
 */
inline unsigned latency_divisor(Op op) { return op == Op::read ? 1 : 2; }

}  // namespace it_perf

#endif  // IT_PERF_TEST_CASE_HPP
