/**
 * @file consumer_host.hpp
 * @brief The kAL as C++ code hosted in krdmad sees it: how a consumer module (or a kernel-consumer API library
 *        linked into one, such as the kernel IT-API) finds the running kAL and gets kal::HostedConsumer objects.
 *
 * This is not the stable ABI: that is the C of krdma/consumer_module.h. C++ code that uses this header calls
 * krdmad's own functions (kal::ConsumerHost, kal::HostedConsumer), which krdmad exports for modules like a kernel
 * exports symbols to its modules (kal/consumer/exports.list), so a module using it must be built with the same
 * sources and compiler as its krdmad. consumer_host() checks that (krdma_consumer_env::host_build, the kernel's
 * "vermagic") and gives nullptr rather than a kAL whose classes might have another layout.
 *
 * A module links nothing of the kAL: the symbols resolve against the krdmad (or the embedding program) that loads
 * it; a host that does not export them fails the load with "undefined symbol".
 */
#ifndef KAL_CONSUMER_HOST_HPP
#define KAL_CONSUMER_HOST_HPP

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adapter_manager.hpp"
#include "hosted_consumer.hpp"
#include "krdma/consumer_module.h"

/**
 * @brief Identity of the C++ side of the host: bump the revision whenever ConsumerHost, HostedConsumer or the types
 *        they pass change shape. The compiler version is part of it, since the standard library's layout is.
 */
#define KAL_CONSUMER_HOST_BUILD "openrdma-kal-cxx/1 " __VERSION__

/**
 * @brief Marks the classes whose functions krdmad exports to consumer modules: the project builds with hidden
 *        visibility, and the export list (kal/consumer/exports.list) can only export what is visible.
 */
#define KAL_CONSUMER_API __attribute__((visibility("default")))

namespace kal {

/**
 * @brief The running kAL, offered to hosted C++ code: new HostedConsumer objects and the RNIC list. One per kAL
 *        (krdmad or an EmbeddedKal), outliving every consumer module it started. Thread-safe.
 */
class KAL_CONSUMER_API ConsumerHost {
public:
    /** @brief The host of a kAL made of @p verbs, @p connections and @p adapters, serving device @p device. */
    ConsumerHost(VerbCommands &verbs, ConnectionCommands &connections, AdapterManager &adapters, std::string device);
    ConsumerHost(const ConsumerHost &) = delete;
    ConsumerHost &operator=(const ConsumerHost &) = delete;
    ~ConsumerHost();

    /**
     * @brief A new consumer of this kAL named @p name (rdmactl lists its objects with krdmad's pid), its events
     *        going to @p callbacks. The caller destroys it before its module's stop returns.
     */
    [[nodiscard]] std::unique_ptr<HostedConsumer> host_consumer(HostedCallbacks callbacks, std::string name);
    /** @brief The RNICs attached now (open one by RnicInfo::name with HostedConsumer::open_rnic). */
    [[nodiscard]] std::vector<RnicInfo> rnics() const;
    /** @brief The kAL's device path (its identity on the host). */
    [[nodiscard]] const std::string &device() const noexcept { return device_; }

    /**
     * @brief The process's kAL for C APIs that give a host no way to pass it (IT-API's it_ia_create(name, ...),
     *        kDAPL's registry): the first ConsumerHost made in the process, until it is destroyed; nullptr before
     *        and after. krdmad has one kAL, so this is its kAL while it serves. Code that has a
     *        krdma_consumer_env_t should use consumer_host() instead, which also works with several embedded kALs.
     */
    [[nodiscard]] static ConsumerHost *current() noexcept;

private:
    VerbCommands &verbs_;
    ConnectionCommands &connections_;
    AdapterManager &adapters_;
    std::string device_;
};

/**
 * @brief The kAL that gave a module @p env, or nullptr when @p env is null or comes from a host built from other
 *        sources or with another compiler (the module must then be rebuilt with its krdmad).
 */
[[nodiscard]] inline ConsumerHost *consumer_host(const krdma_consumer_env_t *env) noexcept {
    if (env == nullptr || env->size < sizeof(krdma_consumer_env_t) || env->kal == nullptr ||
        env->host_build == nullptr || std::strcmp(env->host_build, KAL_CONSUMER_HOST_BUILD) != 0) {
        return nullptr;
    }
    return static_cast<ConsumerHost *>(env->kal);
}

}  // namespace kal

#endif  // KAL_CONSUMER_HOST_HPP
