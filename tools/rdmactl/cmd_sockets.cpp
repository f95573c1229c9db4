// rdmactl sockets: what the sockets layer (openrdma-run) decided in each process that runs it: the count of each
// decision with its reason, the connections it converted (path, state, bytes) and its last other decisions. Each
// process publishes its report in /dev/shm/openrdma-sockets.PID; no krdmad is asked. The report of a process that
// is gone (killed before its exit handlers ran) is removed.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"

namespace rdmactl {
namespace {

constexpr const char *kDir = "/dev/shm";
constexpr const char *kPrefix = "openrdma-sockets.";

// The reports of live processes (a dead process's report is left over from a crash: skipped).
std::vector<nlohmann::json> reports(std::optional<long> only_pid, std::string &problems) {
    std::vector<nlohmann::json> out;
    DIR *d = ::opendir(kDir);
    if (d == nullptr) return out;
    while (const dirent *e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind(kPrefix, 0) != 0 || name.find(".tmp") != std::string::npos) continue;
        char *end = nullptr;
        const long pid = std::strtol(name.c_str() + std::strlen(kPrefix), &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        if (only_pid && pid != *only_pid) continue;
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
            // Left by a process that died without its exit handlers (kill -9): removed when the caller may.
            (void)::unlink((std::string(kDir) + "/" + name).c_str());
            continue;
        }
        std::ifstream in(std::string(kDir) + "/" + name);
        std::stringstream ss;
        ss << in.rdbuf();
        try {
            auto j = nlohmann::json::parse(ss.str());
            if (!j.is_object() || j.value("pid", 0L) != pid) throw std::runtime_error("not a report of this process");
            out.push_back(std::move(j));
        } catch (const std::exception &x) {
            problems += "rdmactl: " + std::string(kDir) + "/" + name + ": " + x.what() + "\n";
        }
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.value("pid", 0L) < b.value("pid", 0L); });
    return out;
}

std::string text(const nlohmann::json &j, const char *key) {
    if (!j.contains(key)) return "-";
    const auto &v = j.at(key);
    return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

void add_sockets_command(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *cmd = app.add_subcommand(
        "sockets", "Show what the sockets layer (openrdma-run) decided in each process: counts by reason, converted "
                   "connections with their path, state and bytes, and the last connections left to TCP and why");
    static std::optional<long> only_pid;  // the option's value: lives as long as the program
    std::optional<long> *pid = &only_pid;
    cmd->add_option_function<long>("--pid", [pid](long p) { *pid = p; }, "Only this process");
    cmd->callback([&global, &exit_code, pid] {
        std::string problems;
        const auto all = reports(*pid, problems);
        if (!problems.empty()) std::fputs(shown(problems).c_str(), stderr);
        if (global.json) {
            std::cout << nlohmann::json(all).dump(2) << "\n";
            return;
        }
        if (all.empty()) {
            std::printf("No process runs the sockets layer%s.\n", pid->has_value() ? " with that PID" : "");
            if (pid->has_value()) exit_code = 1;
            return;
        }
        static const char *kReasons[] = {"rdma",    "policy",         "no-detection", "peer-plain",
                                         "no-rnic", "convert-failed", "declined",     "peer-declined"};
        std::printf("%-8s %-6s %-16s", "PID", "UID", "PROGRAM");
        for (const char *r : kReasons) std::printf(" %14s", r);
        std::printf("\n");
        for (const auto &r : all) {
            std::printf("%-8s %-6s %-16s", text(r, "pid").c_str(), text(r, "uid").c_str(),
                        shown(text(r, "program")).c_str());
            const auto d = r.value("decisions", nlohmann::json::object());
            for (const char *k : kReasons) std::printf(" %14s", text(d, k).c_str());
            std::printf("\n");
        }
        std::printf("\n%-8s %-5s %-7s %-24s %-24s %-15s %-10s %-11s %14s %14s\n", "PID", "FD", "ROLE", "LOCAL", "REMOTE",
                    "DECISION", "PATH", "STATE", "TX BYTES", "RX BYTES");
        for (const auto &r : all) {
            for (const auto &c : r.value("connections", nlohmann::json::array())) {
                // A same-host connection whose bytes move on its own byte channel shows as "channel".
                const std::string path = c.value("link", false)           ? "link"
                                         : c.value("byte_channel", false) ? "channel"
                                                                          : text(c, "path");
                std::printf("%-8s %-5s %-7s %-24s %-24s %-15s %-10s %-11s %14s %14s\n", text(r, "pid").c_str(),
                            text(c, "fd").c_str(), text(c, "role").c_str(), shown(text(c, "local")).c_str(),
                            shown(text(c, "remote")).c_str(), text(c, "decision").c_str(), path.c_str(),
                            text(c, "state").c_str(), text(c, "tx_bytes").c_str(), text(c, "rx_bytes").c_str());
            }
        }
    });
}

}  // namespace rdmactl
