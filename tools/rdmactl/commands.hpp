// rdmactl's subcommands: each file registers one with the CLI11 app.
#ifndef TOOLS_RDMACTL_COMMANDS_HPP
#define TOOLS_RDMACTL_COMMANDS_HPP

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "client.hpp"
#include "krdma/abi.h"
#include "rnicpi/host/printable.hpp"

namespace rdmactl {

/**
 * @brief @p text as the terminal may show it: what krdmad reports (names, paths, reasons) and what the command
 *        line holds came from someone else, so control sequences and invalid UTF-8 are escaped (rdma::printable()).
 *        Use it in a printf argument list (the temporary lives until the call returns): `shown(name).c_str()`.
 */
inline std::string shown(std::string_view text) { return rdma::printable(text); }

/**
 * @brief Why a request to krdmad failed, for "rdmactl: WHAT failed: WHY": the call's own error (krdmad gone, no
 *        answer), krdmad's reason with the status name ("address 127.0.0.1 is already served by RNIC sr0 (EEXIST)";
 *        the C library's text for the status when an older krdmad gave no reason), or a reply that is not
 *        @p expected bytes long. Only for a reply that failed in one of these ways.
 */
[[nodiscard]] std::string failure_text(const rdma::Expected<ual::CallReply> &reply, size_t expected);

/**
 * @brief Sends @p io (a fixed-size krdma request that krdmad answers in place) as command @p cmd and copies the
 *        reply back into it; false, with "rdmactl: WHAT failed: WHY" on stderr (@p what), when krdmad refused or
 *        the reply is not sizeof(T) bytes long.
 */
template <class T>
[[nodiscard]] bool ask(ual::DeviceClient &client, uint32_t cmd, T &io, const char *what) {
    auto r = client.call(cmd, {reinterpret_cast<const uint8_t *>(&io), sizeof io});
    if (!r || r->status != 0 || r->payload.size() != sizeof io) {
        std::fprintf(stderr, "rdmactl: %s failed: %s\n", what, failure_text(r, sizeof io).c_str());
        return false;
    }
    std::memcpy(&io, r->payload.data(), sizeof io);
    return true;
}

/**
 * @brief Walks an indexed listing (LIST_RNICS, LIST_CLIENTS, LIST_ENDPOINTS, LIST_MODULES...: request index i until
 *        i reaches the reply's count) and returns each reply's info; nothing, after saying why (@p what), when a
 *        request fails.
 */
template <class T>
[[nodiscard]] std::optional<std::vector<decltype(T::info)>> list_each(ual::DeviceClient &client, uint32_t cmd,
                                                                      const char *what) {
    std::vector<decltype(T::info)> out;
    for (uint32_t index = 0;; ++index) {
        T q{};
        q.index = index;
        if (!ask(client, cmd, q, what)) return std::nullopt;
        if (index >= q.count) break;
        out.push_back(q.info);
    }
    return out;
}

/** @brief Options every subcommand shares. */
struct GlobalOptions {
    bool json = false;  /**< Print JSON instead of text. */
    std::string device; /**< krdmad's device path. */
    /** @brief How long to wait for krdmad to take the connection and answer (--timeout). */
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

/** @brief Registers `rdmactl sockets`: the sockets layer's decisions and connections, per process. */
void add_sockets_command(CLI::App &app, const GlobalOptions &global, int &exit_code);

/** @brief Registers `rdmactl modinfo`: describe provider module files without a running krdmad. */
void add_modinfo(CLI::App &app, const GlobalOptions &global, int &exit_code);

/** @brief Registers `rdmactl list`, `show ADDRESS` and `resources`: what a running krdmad serves and holds. */
void add_rnic_commands(CLI::App &app, const GlobalOptions &global, int &exit_code);

/**
 * @brief Registers `rdmactl attach`, `detach`, `load`, `unload` (root or krdmad's admin group) and `modules`:
 *        changes to what a running krdmad serves, and its loaded kVPs.
 */
void add_admin_commands(CLI::App &app, const GlobalOptions &global, int &exit_code);

/** @brief Registers `rdmactl limits`: krdmad's limits per user and process, their use and their refusals. */
void add_limits_command(CLI::App &app, const GlobalOptions &global, int &exit_code);
/** @brief Registers `rdmactl stats`: connection statistics merged with the host's TCP MIB. */
void add_stats_command(CLI::App &app, const GlobalOptions &global, int &exit_code);
/**
 * @brief Registers `rdmactl dat-conf`: the dat.conf entry of each attached RNIC (the uDAPL provider's
 *        registration in the distribution's DAT registry), and `--check FILE` for a dat.conf.
 */
void add_dat_command(CLI::App &app, const GlobalOptions &global, int &exit_code);
/** @brief One RNIC as `rdmactl --json` prints it. */
[[nodiscard]] nlohmann::json rnic_json(const krdma_rnic_info &info);
/** @brief Every kVP module krdmad has loaded; on failure prints why and returns nothing. */
[[nodiscard]] std::optional<std::vector<krdma_module_info>> fetch_modules(const GlobalOptions &global);
/** @brief One module as `rdmactl --json modules` prints it. */
[[nodiscard]] nlohmann::json module_info_json(const krdma_module_info &m);
/** @brief Every RNIC krdmad serves; on failure prints why and returns nothing. */
[[nodiscard]] std::optional<std::vector<krdma_rnic_info>> fetch_rnics(const GlobalOptions &global);
/** @brief The RNIC of @p rnics named @p name_or_address, or serving that address; null when none. */
[[nodiscard]] const krdma_rnic_info *find_rnic(const std::vector<krdma_rnic_info> &rnics,
                                               const std::string &name_or_address);

/**
 * @brief The path of an endpoint's stream from its negotiated parameters @p llp: "same-host" (the kAL paired it
 *        with the other end of its connection on this host, ::RI_LLP_SAME_HOST) or "wire" (TCP; also before the
 *        RDMA-mode transition).
 */
[[nodiscard]] const char *endpoint_path(const ri_llp_params_t &llp) noexcept;

/** @brief Endpoints and per-RNIC totals, as `rdmactl stats` and `show` print them. */
struct EndpointStats {
    nlohmann::json endpoints; /**< An array: one object per endpoint, with its TCP and RDMA counters. */
    nlohmann::json rnics;     /**< An array: one object per RNIC ("name", totals, "rdma"), zeros for an idle one. */
};
/**
 * @brief Lists every endpoint of krdmad over @p client and sums them per RNIC, for every RNIC of @p rnics (only
 *        @p rnic, by name or address, when not empty); nothing when krdmad did not answer (said on stderr).
 */
[[nodiscard]] std::optional<EndpointStats> collect_endpoints(ual::DeviceClient &client,
                                                             const std::vector<krdma_rnic_info> &rnics,
                                                             const std::string &rnic = {});

}  // namespace rdmactl

#endif  // TOOLS_RDMACTL_COMMANDS_HPP
