/**
 * @file report.hpp
 * @brief it_perf's output: the perftest-like table (one block per operation and shape, each RDMA row beside the
 *        raw TCP figure measured in the same run and their ratio), the summary block with the targets, and the same
 *        rows as JSON or CSV.
 */
#ifndef IT_PERF_REPORT_HPP
#define IT_PERF_REPORT_HPP

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats.hpp"
#include "test_case.hpp"

namespace it_perf {

/** @brief One row: a test case, its best RDMA and TCP rounds, and how many rounds each ran. */
struct Row {
    TestCase test;
    Measurement rdma;
    Measurement tcp;
    int rounds = 1;

    /**
     * @brief RDMA / TCP: bandwidth over bandwidth, or typical latency over typical latency; 0 when either side
     *        is missing.
     */
    [[nodiscard]] double ratio() const;
};

/** @brief The ratio a row should reach: >= 0.95 of TCP's bandwidth, <= 1.10 of TCP's latency. */
double target_ratio(Kind kind);
/** @brief True when the row's ratio meets its target (false when a side is missing). */
bool meets_target(const Row &row);

/** @brief Context printed above the table and stored in JSON. */
struct RunInfo {
    std::string mode;      /**< "loopback", "client". */
    std::string ia;        /**< The IT-API interface used. */
    std::string peer;      /**< The server's address. */
    std::string path;      /**< The data's path: "same-host" (shared memory), "wire" (TCP), or "" (no RDMA). */
    bool event_mode = false;
    bool tcp_only = false;
};

/** @brief Prints the perftest-like table of @p rows, one block per (operation, shape). */
void print_table(std::FILE *out, const RunInfo &info, const std::vector<Row> &rows);
/**
 * @brief Prints one row as it is measured: first the block header when @p previous (null for the first row) is of
 *        another operation or shape.
 */
void print_table_row(std::FILE *out, const RunInfo &info, const Row *previous, const Row &row);
/** @brief The line that closes the table. */
void print_table_end(std::FILE *out);
/** @brief Prints the summary block: one line per row with both figures, the ratio and its target. */
void print_summary(std::FILE *out, const std::vector<Row> &rows);
/**
 * @brief For each test and kind measured at several sizes (a sweep), one line: how many sizes met the target and the
 *        worst ratio with its size.
 */
void print_series_verdicts(std::FILE *out, const std::vector<Row> &rows);
/** @brief All rows as a JSON document. */
nlohmann::json to_json(const RunInfo &info, const std::vector<Row> &rows);
/** @brief All rows as CSV with a header line. */
std::string to_csv(const std::vector<Row> &rows);

/**
 * @brief Writes @p text to @p path, or to standard output when @p path is "-". False (and a message on standard
 *        error naming the file) when the file cannot be written.
 */
bool write_output(const std::string &path, const std::string &text);

}  // namespace it_perf

#endif  // IT_PERF_REPORT_HPP
