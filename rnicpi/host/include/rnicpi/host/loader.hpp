/**
 * @file loader.hpp
 * @brief The one provider module loader (Boost.DLL), used by the kAL for kVP modules and by the uAL for uVPs.
 *
 * load() resolves the entry symbol, calls it with the host's upcalls, checks the ABI version, the mode and the
 * mandatory operations, and refuses a module with an Error whose message names the file and the reason. An
 * accepted module gets a complete verbs table: operations the provider left NULL answer ::RI_EOPNOTSUPP.
 * A module stays loaded while any ModuleRef to it exists; unload() refuses with ::RI_EBUSY while one is in use.
 */
#ifndef RNICPI_HOST_LOADER_HPP
#define RNICPI_HOST_LOADER_HPP

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"

namespace rdma::rnicpi {

/** @brief The provider directory compiled in, overridden by the environment variable OPENRDMA_PROVIDER_DIR. */
[[nodiscard]] std::filesystem::path default_provider_dir();

/** @brief A loaded and accepted provider module. Destroying it calls the module's fini and unloads the file. */
class LoadedModule {
public:
    LoadedModule(const LoadedModule &) = delete;
    LoadedModule &operator=(const LoadedModule &) = delete;
    ~LoadedModule();

    /** @brief Canonical path of the module file. */
    [[nodiscard]] const std::filesystem::path &path() const noexcept { return path_; }
    /** @brief Provider name, e.g. "softrnic". */
    [[nodiscard]] const std::string &name() const noexcept { return name_; }
    /** @brief Vendor name. */
    [[nodiscard]] const std::string &vendor() const noexcept { return vendor_; }
    /** @brief The provider's own version text. */
    [[nodiscard]] const std::string &version() const noexcept { return version_; }
    /** @brief ABI version the module was built with. */
    [[nodiscard]] uint32_t abi_version() const noexcept { return descriptor_->abi_version; }
    /** @brief Privileged (kVP) or non-privileged (uVP). */
    [[nodiscard]] ri_mode_t mode() const noexcept { return static_cast<ri_mode_t>(descriptor_->mode); }
    /** @brief Module flags (::ri_module_flags). */
    [[nodiscard]] uint32_t flags() const noexcept { return descriptor_->flags; }
    /** @brief kVP: the matching uVP library, resolved against the provider directory; empty if none. */
    [[nodiscard]] const std::optional<std::filesystem::path> &uvp_library() const noexcept { return uvp_; }
    /** @brief The complete verbs table: no entry is NULL. */
    [[nodiscard]] const ri_verbs_ops_t &verbs() const noexcept { return verbs_; }
    /** @brief The module's own description, as it returned it. */
    [[nodiscard]] const ri_module_t &descriptor() const noexcept { return *descriptor_; }
    /**
     * @brief The module's run-time administration operation (ri_module_t::control, ABI 1.4), or NULL when the
     *        module has none (also when it was built for an older minor version, whose description ends before it).
     */
    [[nodiscard]] decltype(ri_module_t::control) control() const noexcept {
        constexpr size_t end = offsetof(ri_module_t, control) + sizeof(ri_module_t::control);
        return descriptor_->size >= end ? descriptor_->control : nullptr;
    }
    /** @brief True when the provider implements @p op itself (false when it answers ::RI_EOPNOTSUPP). */
    [[nodiscard]] bool implements(std::string_view op) const noexcept;

private:
    friend class ModuleLoader;
    struct Library;
    LoadedModule() = default;

    std::unique_ptr<Library> library_;  // destroyed last among the members that need it: see ~LoadedModule
    std::filesystem::path path_;
    const ri_module_t *descriptor_ = nullptr;
    ri_verbs_ops_t verbs_{};
    std::vector<std::string> implemented_;
    std::string name_, vendor_, version_;
    std::optional<std::filesystem::path> uvp_;
};

/** @brief Shared ownership of a loaded module: the module stays loaded while a reference exists. */
using ModuleRef = std::shared_ptr<const LoadedModule>;

/** @brief Loads provider modules for one host (a kAL or a uAL) and keeps them by provider name. */
class ModuleLoader {
public:
    /**
     * @brief A loader for a host with upcalls @p host (must outlive every module) and provider directory @p dir.
     */
    explicit ModuleLoader(const ri_host_ops_t &host, std::filesystem::path dir = default_provider_dir());
    ModuleLoader(const ModuleLoader &) = delete;
    ModuleLoader &operator=(const ModuleLoader &) = delete;
    /** @brief Releases the loader's references; modules still referenced elsewhere stay loaded until released. */
    ~ModuleLoader();

    /**
     * @brief Loads the module at @p file (a bare file name is looked up in the provider directory) expecting
     *        mode @p mode. Loading the same file again returns the same module.
     */
    [[nodiscard]] Expected<ModuleRef> load(const std::filesystem::path &file, ri_mode_t mode);
    /** @brief The loaded module named @p name in mode @p mode, or nullptr. */
    [[nodiscard]] ModuleRef find(std::string_view name, ri_mode_t mode) const;
    /** @brief Every loaded module. */
    [[nodiscard]] std::vector<ModuleRef> modules() const;
    /** @brief Unloads module @p name of mode @p mode; ::RI_EBUSY while anything else references it. */
    [[nodiscard]] Expected<void> unload(std::string_view name, ri_mode_t mode);
    /** @brief The provider directory. */
    [[nodiscard]] const std::filesystem::path &provider_dir() const noexcept { return dir_; }

private:
    Expected<ModuleRef> open(const std::filesystem::path &path, ri_mode_t mode);

    const ri_host_ops_t &host_;
    std::filesystem::path dir_;
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, ModuleRef, std::less<>> modules_;
};

/** @brief "major.minor" of an ABI version word, e.g. "1.0". */
[[nodiscard]] std::string abi_version_text(uint32_t version);

/** @brief "privileged mode (kVP)" or "non-privileged mode (uVP)". */
[[nodiscard]] std::string_view mode_name(ri_mode_t mode) noexcept;

}  // namespace rdma::rnicpi

#endif  // RNICPI_HOST_LOADER_HPP
