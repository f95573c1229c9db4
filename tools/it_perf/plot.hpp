/**
 * @file plot.hpp
 * @brief it_perf --plot: bandwidth against message size and latency against message size, RDMA beside TCP, drawn
 *        by gnuplot (Debian package gnuplot-nox) into one PNG with a log-scaled size axis.
 */
#ifndef IT_PERF_PLOT_HPP
#define IT_PERF_PLOT_HPP

#include <string>
#include <vector>

#include "report.hpp"
#include "rnicpi/cpp/status.hpp"

namespace it_perf {

/** @brief The gnuplot executable on $PATH, or empty when there is none. */
std::string find_gnuplot();

/**
 * @brief The gnuplot script that draws @p rows into @p png_path: a bandwidth panel (GB/s) when there are bandwidth
 *        rows, a latency panel (typical latency, us) when there are latency rows; the data is inline. Uses the
 *        pngcairo terminal when gnuplot has it, else png.
 */
std::string plot_script(const std::string &png_path, const std::vector<Row> &rows);

/**
 * @brief Runs gnuplot on plot_script(). Fails with a message saying what to install when gnuplot is missing, and
 *        with gnuplot's exit status when it fails.
 */
rdma::Expected<void> plot_png(const std::string &png_path, const std::vector<Row> &rows);

}  // namespace it_perf

#endif  // IT_PERF_PLOT_HPP
