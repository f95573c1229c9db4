/** @file plot.cpp @brief The gnuplot script and running gnuplot. */
#include "plot.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

namespace it_perf {

std::string find_gnuplot() {
    const char *path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
    std::istringstream in(dirs);
    for (std::string dir; std::getline(in, dir, ':');) {
        if (dir.empty()) dir = ".";
        const std::string candidate = dir + "/gnuplot";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

namespace {

// gnuplot string literal in single quotes: a quote is doubled.
std::string quoted(const std::string &s) {
    std::string q = "'";
    for (char c : s) {
        q += c;
        if (c == '\'') q += '\'';
    }
    return q + "'";
}

// One series (an operation on RDMA or on TCP) as an inline data block named $name: size, value.
struct Series {
    std::string name;
    std::string title;
    bool tcp = false;
    std::ostringstream data;
};

void panel(std::ostringstream &s, std::map<std::string, Series> &series, const char *ylabel, const char *title,
           bool log_y) {
    s << "set title " << quoted(title) << "\n";
    s << "set ylabel " << quoted(ylabel) << "\n";
    s << (log_y ? "set logscale y 10\n" : "unset logscale y\n");
    s << "set yrange [" << (log_y ? "*" : "0") << ":*]\n";
    s << "plot ";
    bool first = true;
    int color = 1;
    std::map<std::string, int> colors;  // one colour per operation, RDMA solid and TCP dashed
    for (auto &[key, ser] : series) {
        const std::string op = key.substr(0, key.find(' '));
        if (colors.find(op) == colors.end()) colors[op] = color++;
        if (!first) s << ", \\\n     ";
        first = false;
        s << "$" << ser.name << " using 1:2 with linespoints lw 2 pt " << (ser.tcp ? 6 : 7) << " lc " << colors[op]
          << " dt " << (ser.tcp ? 2 : 1) << " title " << quoted(ser.title);
    }
    s << "\n";
}

}  // namespace

std::string plot_script(const std::string &png_path, const std::vector<Row> &rows) {
    std::map<std::string, Series> bw, lat;
    for (const Row &r : rows) {
        auto &group = r.test.kind == Kind::bw ? bw : lat;
        for (int side = 0; side < 2; ++side) {
            const Measurement &m = side == 0 ? r.rdma : r.tcp;
            if (!m.valid) continue;
            const std::string key = std::string(op_name(r.test.op)) + (side == 0 ? " RDMA" : " TCP");
            Series &ser = group[key];
            if (ser.name.empty()) {
                ser.name = std::string(r.test.kind == Kind::bw ? "bw_" : "lat_") + op_name(r.test.op) +
                           (side == 0 ? "_rdma" : "_tcp");
                ser.title = side == 0 ? std::string(op_name(r.test.op)) + " (RDMA, IT-API)"
                                      : std::string(op_name(r.test.op)) + " baseline (TCP)";
                ser.tcp = side == 1;
            }
            const double v = r.test.kind == Kind::bw ? m.bytes_per_second() / 1e9 : m.latency.typical_us;
            ser.data << r.test.size << " " << v << "\n";
        }
    }
    std::ostringstream s;
    for (auto *group : {&bw, &lat}) {
        for (auto &[key, ser] : *group) s << "$" << ser.name << " << EOD\n" << ser.data.str() << "EOD\n";
    }
    const int panels = (bw.empty() ? 0 : 1) + (lat.empty() ? 0 : 1);
    const int width = panels == 2 ? 1400 : 800;
    s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      << "  set terminal pngcairo size " << width << ",560 enhanced font 'sans,10'\n"
      << "} else {\n"
      << "  set terminal png size " << width << ",560\n"
      << "}\n";
    s << "set output " << quoted(png_path) << "\n";
    s << "set grid\nset key top left\nset logscale x 2\nset format x '%.0b%BB'\nset xlabel 'message size'\n";
    s << "set xtics rotate by -45\n";
    if (panels == 2) s << "set multiplot layout 1,2 title 'it\\_perf: IT-API over OpenRDMA vs raw TCP'\n";
    if (!bw.empty()) panel(s, bw, "bandwidth [GB/s]", "bandwidth", false);
    if (!lat.empty()) panel(s, lat, "typical latency [us]", "latency (median)", true);
    if (panels == 2) s << "unset multiplot\n";
    s << "set output\n";
    return s.str();
}

rdma::Expected<void> plot_png(const std::string &png_path, const std::vector<Row> &rows) {
    const std::string gnuplot = find_gnuplot();
    if (gnuplot.empty()) {
        return rdma::Error(ENOENT, "--plot needs gnuplot, which is not on $PATH: install the Debian package "
                                   "gnuplot-nox (apt-get install gnuplot-nox)");
    }
    bool any = false;
    for (const Row &r : rows) any = any || r.rdma.valid || r.tcp.valid;
    if (!any) return rdma::Error(EINVAL, "--plot: no measurement to draw");
    const std::string script = plot_script(png_path, rows);
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return rdma::Error(errno, "--plot: pipe to gnuplot failed");
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(in[0]);
        ::close(in[1]);
        return rdma::Error(errno, "--plot: cannot start gnuplot");
    }
    if (pid == 0) {
        ::dup2(in[0], STDIN_FILENO);
        ::execl(gnuplot.c_str(), "gnuplot", static_cast<char *>(nullptr));
        ::_exit(127);
    }
    ::close(in[0]);
    size_t off = 0;
    while (off < script.size()) {
        const ssize_t n = ::write(in[1], script.data() + off, script.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    ::close(in[1]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return rdma::Error(EIO, "--plot: gnuplot (" + gnuplot + ") failed with status " +
                                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
                                    " drawing " + png_path);
    }
    return {};
}

}  // namespace it_perf
