// rdmactl: the administrator's tool for RNICs, providers, resources and statistics.
#include <CLI/CLI.hpp>

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
    rdmactl::add_dat_command(app, global, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    return exit_code;
}
