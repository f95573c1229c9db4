/**
 * @file adapter_manager.hpp
 * @brief Interface adapter management: kVP modules, the RNIC instances attached to network addresses or netdevs,
 *        their uVP libraries, and RNIC selection by network address.
 */
#ifndef KAL_ADAPTER_ADAPTER_MANAGER_HPP
#define KAL_ADAPTER_ADAPTER_MANAGER_HPP

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rnicpi/host/loader.hpp"
#include "rnicpi/rnicpi.h"

namespace kal {

/** @brief What the administrator asks to attach. */
struct AttachRequest {
    std::string provider; /**< A loaded kVP's provider name, e.g. "softrnic". */
    std::string name;     /**< The new RNIC's name, unique on the host, e.g. "softrnic0". */
    std::string netdev;   /**< Network device (e.g. "eth0"), or empty when ::address selects it. */
    std::string address;  /**< IPv4 or IPv6 address configured on this host, or empty to take the netdev's first. */
    std::string options;  /**< Provider options as a JSON object text, or empty. */
    bool operator==(const AttachRequest &) const = default;
};

/** @brief Number of object types counted per RNIC (the kAL's resource types, in their teardown order). */
inline constexpr size_t kRnicObjectTypes = 9;

/** @brief Objects consumers hold on one RNIC, by resource type; updated by system call management. */
struct RnicObjectCounts {
    std::array<std::atomic<uint32_t>, kRnicObjectTypes> by_type{}; /**< Live objects of each type. */
};

/** @brief An attached RNIC, as rdmactl lists it. */
struct RnicInfo {
    std::string name;        /**< RNIC name. */
    std::string provider;    /**< Provider name. */
    std::string vendor;      /**< Provider vendor. */
    std::string netdev;      /**< Network device. */
    std::string address;     /**< Network address, as text. */
    std::string uvp_library; /**< The uVP library a uAL loads for it, or empty for kAL-only RNICs. */
    uint32_t opens = 0;      /**< Current opens (by consumers). */
    std::array<uint32_t, kRnicObjectTypes> objects{}; /**< Objects consumers hold on it, by resource type. */
};

/** @brief A loaded kVP module, as rdmactl lists it. */
struct ModuleInfo {
    std::string provider;     /**< Provider name. */
    std::string vendor;       /**< Provider vendor. */
    std::string version;      /**< The provider's own version text. */
    std::string path;         /**< Canonical path of the module file. */
    std::string uvp_library;  /**< The matching uVP library, or empty. */
    uint32_t abi_version = 0; /**< RNIC-PI ABI version the module was built with. */
    uint32_t rnics = 0;       /**< RNICs of this provider attached now. */
};

class AdapterManager;

/** @brief An open of an RNIC: keeps the instance (and its module) attached while it exists. */
class RnicRef {
public:
    RnicRef() = default;
    RnicRef(RnicRef &&o) noexcept;
    RnicRef &operator=(RnicRef &&o) noexcept;
    RnicRef(const RnicRef &) = delete;
    RnicRef &operator=(const RnicRef &) = delete;
    ~RnicRef();
    /** @brief The provider instance handle, for ri_rnic_open_params_t::instance. */
    [[nodiscard]] ri_instance_t instance() const noexcept;
    /** @brief The provider module. */
    [[nodiscard]] const rdma::rnicpi::ModuleRef &module() const noexcept;
    /** @brief The RNIC's object counters (valid while this reference, or any other open of the RNIC, lives). */
    [[nodiscard]] RnicObjectCounts &counts() const noexcept;
    /** @brief The RNIC's name. */
    [[nodiscard]] const std::string &name() const noexcept;
    /** @brief The network address the RNIC serves (connections leave from and arrive at it). */
    [[nodiscard]] const ri_net_addr_t &address() const noexcept;
    /** @brief The RNIC's network device. */
    [[nodiscard]] const std::string &netdev() const noexcept;

private:
    friend class AdapterManager;
    struct Instance;
    std::shared_ptr<Instance> inst_;
};

/** @brief The host's RNICs. Thread-safe. */
class AdapterManager {
public:
    /** @brief A manager loading kVP modules with @p loader. */
    explicit AdapterManager(rdma::rnicpi::ModuleLoader &loader) : loader_(loader) {}
    /** @brief Detaches every instance (no open may remain). */
    ~AdapterManager();

    /** @brief Loads a kVP module (a bare file name is looked up in the provider directory). */
    [[nodiscard]] rdma::Expected<rdma::rnicpi::ModuleRef> load(const std::string &file);
    /** @brief Unloads a provider; ::RI_EBUSY while RNICs of it are attached. */
    [[nodiscard]] rdma::Expected<void> unload(const std::string &provider);
    /**
     * @brief Attaches a new RNIC instance. ::RI_ENOENT for an unknown provider or netdev, ::RI_ENODEV for an
     *        address this host does not have, ::RI_EEXIST for a taken name or address.
     */
    [[nodiscard]] rdma::Expected<RnicInfo> attach(const AttachRequest &request);
    /** @brief Detaches an RNIC; ::RI_EBUSY while it is open. */
    [[nodiscard]] rdma::Expected<void> detach(const std::string &name);
    /**
     * @brief Run-time administration of RNIC @p name: passes @p request (a JSON object text in the provider's
     *        vocabulary) to its module's control operation and returns the provider's reply. ::RI_ENODEV for an
     *        unknown RNIC, ::RI_EOPNOTSUPP when the provider has no control operation, else the provider's status
     *        with its own words.
     */
    [[nodiscard]] rdma::Expected<std::string> control(const std::string &name, const std::string &request);
    /** @brief Every attached RNIC. */
    [[nodiscard]] std::vector<RnicInfo> list() const;
    /** @brief Every loaded kVP module, with how many RNICs each serves. */
    [[nodiscard]] std::vector<ModuleInfo> modules() const;
    /** @brief The RNIC serving network address @p address (the consumer's way of choosing one). */
    [[nodiscard]] rdma::Expected<RnicInfo> find_by_address(const std::string &address) const;
    /** @brief Opens RNIC @p name: the instance stays attached while the returned reference lives. */
    [[nodiscard]] rdma::Expected<RnicRef> open(const std::string &name);

private:
    static RnicInfo info_of(const RnicRef::Instance &i);

    rdma::rnicpi::ModuleLoader &loader_;
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<RnicRef::Instance>> rnics_;
};

}  // namespace kal

#endif  // KAL_ADAPTER_ADAPTER_MANAGER_HPP
