/**
 * @file embedded_kal.hpp
 * @brief The kAL hosted inside one process (no daemon): the same blocks as krdmad, serving its device over an
 *        in-process socket pair instead of a path. For single-process use, tests and the zero-setup demo.
 */
#ifndef KAL_EMBEDDED_EMBEDDED_KAL_HPP
#define KAL_EMBEDDED_EMBEDDED_KAL_HPP

#include <memory>
#include <thread>

#include "admin_commands.hpp"
#include "config.hpp"
#include "connection_commands.hpp"
#include "consumer_modules.hpp"
#include "hosted_consumer.hpp"
#include "server.hpp"
#include "verb_commands.hpp"

namespace kal {

/** @brief An embedded kAL: loader, adapters, device server and verbs on a thread of this process. */
class EmbeddedKal {
public:
    /**
     * @brief Loads @p config's modules, attaches its RNICs, starts serving, then starts its consumer modules (a
     *        required one that fails fails the start). The device path of @p config is not used for serving
     *        (clients connect with connect_local()), only as the consumer modules' instance identity. ::RI_ENOENT
     *        for an admin group this host does not have. C++ consumer modules need the program to link
     *        kal_consumer_exports.
     */
    [[nodiscard]] static rdma::Expected<std::unique_ptr<EmbeddedKal>> start(const Config &config);
    EmbeddedKal(const EmbeddedKal &) = delete;
    EmbeddedKal &operator=(const EmbeddedKal &) = delete;
    /** @brief Stops the consumer modules, then serving, tears every client's objects down, detaches the RNICs. */
    ~EmbeddedKal();

    /** @brief A new client connection's socket (hand it to ual::DeviceClient::adopt). */
    [[nodiscard]] rdma::Expected<krdma::UniqueFd> connect_local() { return server_.connect_local(); }
    /** @brief The RNICs. */
    [[nodiscard]] AdapterManager &adapters() noexcept { return adapters_; }
    /**
     * @brief A consumer hosted in this kAL (the kernel consumers' entry point): its objects and connections are
     *        the kAL's own, its data path runs in the kVP. Destroy it before the kAL.
     */
    [[nodiscard]] std::unique_ptr<HostedConsumer> host_consumer(HostedCallbacks callbacks,
                                                                std::string name = "hosted") {
        return host_.host_consumer(std::move(callbacks), std::move(name));
    }
    /** @brief The kAL as hosted C++ code sees it (what consumer modules get through their env). */
    [[nodiscard]] ConsumerHost &consumer_host() noexcept { return host_; }
    /** @brief The configured consumer modules. */
    [[nodiscard]] ConsumerModules &consumers() noexcept { return consumers_; }

private:
    EmbeddedKal(const Config &config, AdminPolicy policy);

    rdma::rnicpi::ModuleLoader loader_;
    AdapterManager adapters_;
    PinBudget budget_;
    Accounts accounts_;
    DeviceServer server_;
    VerbCommands verbs_;
    ConnectionCommands connections_;
    ConsumerHost host_;
    ConsumerModules consumers_;
    std::thread thread_;
};

}  // namespace kal

#endif  // KAL_EMBEDDED_EMBEDDED_KAL_HPP
