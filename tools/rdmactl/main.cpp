// rdmactl: the administrator's tool for RNICs, providers, resources and statistics.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "rnicpi/host/log.hpp"

int main(int argc, char **argv) {
    CLI::App app{"rdmactl: list and select RNICs, manage provider modules, show resources and statistics"};
    app.require_subcommand(1);
    rdmactl::GlobalOptions global;
    app.add_flag("--json", global.json, "Print machine-readable JSON");
    std::string level;
    app.add_option("--log-level", level, "Log level: error, warn, info, debug (default: $OPENRDMA_LOG or warn)")
        ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
        ->each([](const std::string &text) {
            if (auto l = rdma::log::parse_level(text)) rdma::log::set_level(*l);
        });
    int exit_code = 0;
    rdmactl::add_modinfo(app, global, exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    return exit_code;
}
