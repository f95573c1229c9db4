// rdmactl's subcommands: each file registers one with the CLI11 app.
#ifndef TOOLS_RDMACTL_COMMANDS_HPP
#define TOOLS_RDMACTL_COMMANDS_HPP

#include <CLI/CLI.hpp>

namespace rdmactl {

/** @brief Options every subcommand shares. */
struct GlobalOptions {
    bool json = false; /**< Print JSON instead of text. */
};

/** @brief Registers `rdmactl modinfo`: describe provider module files without a running krdmad. */
void add_modinfo(CLI::App &app, const GlobalOptions &global, int &exit_code);

}  // namespace rdmactl

#endif  // TOOLS_RDMACTL_COMMANDS_HPP
