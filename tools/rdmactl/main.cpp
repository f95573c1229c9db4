// rdmactl: the administrator's tool for RNICs, providers, resources and statistics.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "krdma/abi.h"
#include "rnicpi/host/log.hpp"

namespace rdmactl {

std::string failure_text(const rdma::Expected<ual::CallReply> &reply, size_t expected) {
    if (!reply) return reply.error().message();
    if (reply->status != 0) {
        return (reply->reason.empty() ? std::string(std::strerror(reply->status)) : reply->reason) + " (" +
               std::string(rdma::errno_name(reply->status)) + ")";
    }
    return "krdmad answered with " + std::to_string(reply->payload.size()) + " bytes instead of " +
           std::to_string(expected) + " (a krdmad of another version?)";
}

}  // namespace rdmactl

int main(int argc, char **argv) {
    CLI::App app{"rdmactl: list and select RNICs, manage provider modules, show resources and statistics"};
    app.set_version_flag("--version", std::string("rdmactl (OpenRDMA) ") + OPENRDMA_VERSION);
    app.require_subcommand(1);
    rdmactl::GlobalOptions global;
    app.add_flag("--json", global.json, "Print machine-readable JSON");
    const char *env_device = std::getenv("KRDMA_DEVICE");
    global.device = env_device != nullptr ? env_device : KRDMA_DEFAULT_DEVICE;
    app.add_option("--device", global.device, "krdmad's device path (default: $KRDMA_DEVICE or " KRDMA_DEFAULT_DEVICE ")");
    // A krdmad that never answers (stopped, hung) must not hold an administrator for long: 10 s by default.
    app.add_option_function<double>(
           "--timeout",
           [&global](double s) { global.timeout = std::chrono::milliseconds(static_cast<long long>(s * 1000)); },
           "Seconds to wait for krdmad to take the connection and answer (default 10)")
        ->check(CLI::Range(0.001, 3600.0));
    std::string level;
    app.add_option("--log-level", level, "Log level: error, warn, info, debug (default: $OPENRDMA_LOG or warn)")
        ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
        ->each([](const std::string &text) {
            if (auto l = rdma::log::parse_level(text)) rdma::log::set_level(*l);
        });
    int exit_code = 0;
    rdmactl::add_modinfo(app, global, exit_code);
    rdmactl::add_rnic_commands(app, global, exit_code);
    rdmactl::add_admin_commands(app, global, exit_code);
    rdmactl::add_stats_command(app, global, exit_code);
    rdmactl::add_limits_command(app, global, exit_code);
    rdmactl::add_dat_command(app, global, exit_code);
    rdmactl::add_sockets_command(app, global, exit_code);
    // Global options anywhere on the line, as `rdma` takes them: `rdmactl list --json` as `rdmactl --json list`.
    for (CLI::App *sub : app.get_subcommands({})) sub->fallthrough();
    // The first word that is not an option (or an option's value) names the command: an unknown one is named as
    // such, with the commands there are, rather than CLI11's "A subcommand is required".
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word == "--device" || word == "--log-level" || word == "--timeout") {
            ++i;
            continue;
        }
        if (word.empty() || word[0] == '-') continue;
        std::string names;
        bool known = false;
        for (const CLI::App *sub : app.get_subcommands({})) {
            names += (names.empty() ? "" : ", ") + sub->get_name();
            known = known || sub->check_name(word);
        }
        if (!known) {
            std::fprintf(stderr, "rdmactl: unknown command '%s' (commands: %s; rdmactl --help)\n",
                         rdmactl::shown(word).c_str(),
                         names.c_str());
            return 2;
        }
        break;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help, --version: 0; a bad command line: 2, as the manual says
    }
    return exit_code;
}
