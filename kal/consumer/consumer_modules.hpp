/**
 * @file consumer_modules.hpp
 * @brief Kernel consumer modules (krdma/consumer_module.h): loaded with Boost.DLL from the configuration's
 *        "consumers", started in order once the kAL serves, stopped in reverse order before it goes, and listed
 *        over the device (LIST_CONSUMERS).
 *
 * A module that cannot be loaded or whose start fails is logged with the reason and skipped, unless its entry is
 * required: start() then returns the error and the host gives up before it announces that it serves.
 */
#ifndef KAL_CONSUMER_CONSUMER_MODULES_HPP
#define KAL_CONSUMER_CONSUMER_MODULES_HPP

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "kal/consumer_host.hpp"
#include "krdma/abi.h"
#include "server.hpp"

namespace kal {

/** @brief A configured consumer module, as rdmactl lists it. */
struct ConsumerModuleInfo {
    std::string name;                                /**< The module's name, or empty when it was not loaded. */
    std::string description;                         /**< The module's description. */
    std::string path;                                /**< The module's file, resolved. */
    std::string error;                               /**< Why it failed, when it did. */
    krdma_consumer_state state = KRDMA_CONSUMER_DISABLED; /**< Where it is in its life. */
    uint32_t abi_version = 0;                        /**< ABI version of its descriptor, or 0. */
    bool required = false;                           /**< Required by the configuration. */
};

/** @brief The consumer modules of one kAL. Thread-safe; start() and stop() from the host's control thread. */
class ConsumerModules {
public:
    /** @brief Modules of @p host; bare file names are looked up in @p provider_dir. */
    ConsumerModules(ConsumerHost &host, std::filesystem::path provider_dir);
    ConsumerModules(const ConsumerModules &) = delete;
    ConsumerModules &operator=(const ConsumerModules &) = delete;
    /** @brief Stops whatever still runs. */
    ~ConsumerModules();

    /**
     * @brief Loads and starts @p specs in order (call once, while the kAL serves: a module's start waits for the
     *        serving thread). Failures of modules not required are logged and skipped; the first required one that
     *        fails ends the call with its error (modules started before it keep running until stop()).
     */
    [[nodiscard]] rdma::Expected<void> start(const std::vector<ConsumerModuleSpec> &specs);
    /** @brief Stops the running modules in reverse order and unloads them; a second call does nothing. */
    void stop();
    /** @brief Every configured module, in configuration order. */
    [[nodiscard]] std::vector<ConsumerModuleInfo> list() const;
    /** @brief Serves LIST_CONSUMERS on @p server from list() (before the server runs). */
    void register_commands(DeviceServer &server);

private:
    struct Module;
    rdma::Expected<void> start_one(Module &m);

    ConsumerHost &host_;
    std::filesystem::path dir_;
    mutable std::mutex mutex_;  // guards the modules' listed fields against LIST_CONSUMERS on the serving thread
    std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace kal

#endif  // KAL_CONSUMER_CONSUMER_MODULES_HPP
