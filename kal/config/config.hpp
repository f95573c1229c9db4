/**
 * @file config.hpp
 * @brief krdmad's JSON configuration: device path, provider modules, RNIC instances, limits, logging, consumer
 *        modules.
 *
 * Every key is checked: an unknown key (a typo) or a value of the wrong type is an error that names the key's
 * path, so a bad configuration stops krdmad at start with a clear message instead of running with defaults. The text
 * is JSON with comments (line and block comments, as in C) allowed; two RNICs may not share a name or an address.
 */
#ifndef KAL_CONFIG_CONFIG_HPP
#define KAL_CONFIG_CONFIG_HPP

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "adapter_manager.hpp"
#include "krdma/abi.h"
#include "llp_settings.hpp"
#include "resource_table.hpp"
#include "rnicpi/cpp/status.hpp"

namespace kal {

/** @brief One entry of "consumers": a kernel consumer module to start once the device serves. */
struct ConsumerModuleSpec {
    std::string module;       /**< File: a bare name is looked up in the provider directory, like kVP modules. */
    std::string args = "{}";  /**< The "args" value as JSON text, handed to the module's start. */
    bool enabled = true;      /**< False: listed as disabled, not loaded. */
    bool required = false;    /**< True: a module that cannot be loaded or started stops krdmad before serving. */
    bool operator==(const ConsumerModuleSpec &) const = default;
};

/** @brief krdmad's configuration. */
struct Config {
    std::filesystem::path device = KRDMA_DEFAULT_DEVICE;  /**< Device path (a Unix socket). */
    std::optional<std::filesystem::path> provider_dir;    /**< Provider directory, if not the installed one. */
    std::string admin_group;                              /**< Group allowed admin commands besides root. */
    std::string log_level = "info";                       /**< error, warn, info or debug. */
    std::vector<std::string> modules;                     /**< kVP modules to load at start. */
    std::vector<AttachRequest> rnics;                     /**< RNIC instances to attach at start. */
    uint32_t max_connections = 1024;                      /**< Most device connections (root: 32 more). */
    uint32_t connections_per_user = 256;                  /**< Most device connections of one non-root uid (0: none). */
    uint64_t pin_bytes_per_process = 1ull << 30;          /**< Pinned memory per process (and its RLIMIT_MEMLOCK). */
    uint64_t pin_bytes_per_user = 4ull << 30;             /**< Pinned memory per non-root uid (0: the host's limit). */
    uint64_t pin_bytes_total = 8ull << 30;                /**< Pinned memory host-wide. */
    Quotas quotas;                                        /**< Objects per consumer process (all its connections). */
    uint32_t objects_per_user = 65536;                    /**< Objects of all processes of one non-root uid (0: none). */
    LlpSettings llp;                                      /**< Connection setup and liveness ("llp"). */
    std::vector<ConsumerModuleSpec> consumers;            /**< Kernel consumer modules, in start order. */
};

/**
 * @brief Parses a configuration text from @p origin (a file name, for the messages). Errors begin with @p origin: a
 *        syntax error with its place and the parser's words ("ORIGIN:LINE:COLUMN: not valid JSON: ..."), a
 *        well-formed text that is not a configuration with the offending key ("ORIGIN: configuration error: ...").
 */
[[nodiscard]] rdma::Expected<Config> parse_config(const std::string &text,
                                                  const std::string &origin = "configuration");
/**
 * @brief Reads and parses configuration file @p file; errors as parse_config() with the file as origin, and
 *        "FILE: cannot read the configuration: REASON" (::RI_ENOENT, ::RI_EACCES...) for a file that cannot be read.
 */
[[nodiscard]] rdma::Expected<Config> load_config(const std::filesystem::path &file);

}  // namespace kal

#endif  // KAL_CONFIG_CONFIG_HPP
