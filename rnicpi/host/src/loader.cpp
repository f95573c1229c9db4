// The provider module loader: Boost.DLL for the shared object, RNIC-PI rules for acceptance.
#include "rnicpi/host/loader.hpp"

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <system_error>

#include "rnicpi/host/log.hpp"
#include "rnicpi/host/verbs_fields.hpp"

#ifndef OPENRDMA_PROVIDER_DIR
#error "OPENRDMA_PROVIDER_DIR must be defined by the build"
#endif

namespace rdma::rnicpi {
namespace fs = std::filesystem;

namespace {

constexpr const char *kComponent = "loader";

// rdma-core's dummy_ops idea: a missing operation answers "not supported" instead of being a NULL to test.
template <class Fn>
struct NotSupported;
template <class... A>
struct NotSupported<ri_status_t (*)(A...)> {
    static ri_status_t call(A...) noexcept { return RI_EOPNOTSUPP; }
};
// A kVP without the whole-request op (ABI 1.0) gets every uVP request as the plain verb.
template <>
struct NotSupported<decltype(ri_verbs_ops_t::syscall)> {
    static ri_status_t call(ri_kvp_syscall_t *) noexcept { return RI_ENOSYS; }
};

// The smallest table a 1.x provider may return: everything up to and including the last mandatory operation.
constexpr size_t kMinVerbsSize = offsetof(ri_verbs_ops_t, deregister_mr) + sizeof(ri_verbs_ops_t::deregister_mr);
constexpr size_t kMinModuleSize = offsetof(ri_module_t, fini) + sizeof(ri_module_t::fini);

Error refuse(const fs::path &path, int code, const std::string &why) {
    return Error(code, "provider module " + path.string() + ": " + why);
}

// Strings in a module's description come from foreign code: bound their length before copying.
std::optional<std::string> bounded(const char *s) {
    if (s == nullptr) return std::nullopt;
    size_t n = strnlen(s, RI_NAME_MAX);
    if (n == 0 || n == RI_NAME_MAX) return std::nullopt;
    return std::string(s, n);
}

}  // namespace

struct LoadedModule::Library {
    boost::dll::shared_library lib;
};

fs::path default_provider_dir() {
    if (const char *env = std::getenv("OPENRDMA_PROVIDER_DIR"); env != nullptr && *env != '\0') return env;
    return OPENRDMA_PROVIDER_DIR;
}

std::string abi_version_text(uint32_t version) {
    return std::to_string(RI_ABI_MAJOR(version)) + "." + std::to_string(RI_ABI_MINOR(version));
}

std::string_view mode_name(ri_mode_t mode) noexcept {
    switch (mode) {
        case RI_MODE_PRIVILEGED: return "privileged mode (kVP)";
        case RI_MODE_NONPRIVILEGED: return "non-privileged mode (uVP)";
    }
    return "unknown mode";
}

LoadedModule::~LoadedModule() {
    // fini runs while the code is still mapped; the library goes last.
    if (descriptor_ != nullptr && descriptor_->fini != nullptr) descriptor_->fini();
    RDMA_LOG_INFO(kComponent, "unloaded %s (%s)", name_.c_str(), path_.c_str());
    descriptor_ = nullptr;
    library_.reset();
}

bool LoadedModule::implements(std::string_view op) const noexcept {
    for (const auto &name : implemented_) {
        if (name == op) return true;
    }
    return false;
}

// The directory is made absolute once, so paths reported to users (uVP libraries, errors) do not depend on the cwd.
ModuleLoader::ModuleLoader(const ri_host_ops_t &host, fs::path dir) : host_(host), dir_(fs::absolute(dir)) {}

ModuleLoader::~ModuleLoader() = default;

Expected<ModuleRef> ModuleLoader::load(const fs::path &file, ri_mode_t mode) {
    fs::path path = file.has_parent_path() ? file : dir_ / file;
    std::error_code ec;
    fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) {
        return refuse(path, RI_ENOENT, "no such file (provider directory is " + dir_.string() + ")");
    }
    if (!fs::is_regular_file(st)) return refuse(path, RI_ENOEXEC, "not a regular file");
    fs::path canonical = fs::canonical(path, ec);
    if (ec) return refuse(path, RI_ENOENT, "cannot resolve path: " + ec.message());

    std::lock_guard lock(mutex_);
    for (const auto &[key, module] : modules_) {
        if (module->path() == canonical) {
            if (module->mode() != mode) {
                return refuse(canonical, RI_EINVAL,
                              "already loaded in " + std::string(mode_name(module->mode())) + ", not " +
                                  std::string(mode_name(mode)));
            }
            return module;
        }
    }
    return open(canonical, mode);
}

Expected<ModuleRef> ModuleLoader::open(const fs::path &path, ri_mode_t mode) {
    auto library = std::make_unique<LoadedModule::Library>();
    boost::dll::fs::error_code ec;
    ::dlerror();  // clear any stale message so the one we read is ours
    library->lib.load(path, ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    if (ec) {
        const char *why = ::dlerror();
        return refuse(path, RI_ENOEXEC,
                      std::string("not a loadable shared object: ") + (why != nullptr ? why : ec.message()));
    }
    if (!library->lib.has(RI_MODULE_ENTRY_SYMBOL)) {
        return refuse(path, RI_ELIBBAD,
                      "does not export the entry symbol " RI_MODULE_ENTRY_SYMBOL
                      "; is it an RNIC-PI provider module?");
    }
    auto &entry = library->lib.get<std::remove_pointer_t<ri_module_entry_fn>>(RI_MODULE_ENTRY_SYMBOL);
    const ri_module_t *desc = nullptr;
    ri_status_t rc = entry(&host_, &desc);
    if (rc != RI_OK) {
        return refuse(path, rc > 0 ? rc : RI_EIO,
                      "entry function failed: " + std::string(errno_name(rc)) + " (" + std::strerror(rc) + ")");
    }
    if (desc == nullptr) return refuse(path, RI_ELIBBAD, "entry function returned no module description");
    if (RI_ABI_MAJOR(desc->abi_version) != RI_ABI_VERSION_MAJOR) {
        return refuse(path, RI_ELIBBAD,
                      "built for RNIC-PI ABI " + abi_version_text(desc->abi_version) + ", this host speaks " +
                          abi_version_text(RI_ABI_VERSION) + "; rebuild the provider against this release");
    }
    if (RI_ABI_MINOR(desc->abi_version) > RI_ABI_VERSION_MINOR) {
        return refuse(path, RI_ELIBBAD,
                      "needs RNIC-PI ABI " + abi_version_text(desc->abi_version) + ", this host provides only " +
                          abi_version_text(RI_ABI_VERSION) + "; upgrade the host");
    }
    if (desc->size < kMinModuleSize) {
        return refuse(path, RI_ELIBBAD, "module description too small (" + std::to_string(desc->size) + " bytes)");
    }
    if (desc->mode != static_cast<uint32_t>(mode)) {
        return refuse(path, RI_ELIBBAD,
                      "implements " + std::string(mode_name(static_cast<ri_mode_t>(desc->mode))) + " but " +
                          std::string(mode_name(mode)) + " was expected");
    }
    auto name = bounded(desc->name);
    auto vendor = bounded(desc->vendor);
    if (!name || !vendor) {
        return refuse(path, RI_ELIBBAD, "name and vendor must be non-empty and shorter than " +
                                            std::to_string(RI_NAME_MAX) + " bytes");
    }
    const ri_verbs_ops_t *verbs = desc->verbs;
    if (verbs == nullptr) return refuse(path, RI_ELIBBAD, "no verbs table");
    if (RI_ABI_MAJOR(verbs->abi_version) != RI_ABI_VERSION_MAJOR || verbs->size < kMinVerbsSize) {
        return refuse(path, RI_ELIBBAD,
                      "verbs table has ABI " + abi_version_text(verbs->abi_version) + " and size " +
                          std::to_string(verbs->size) + ", which this host cannot use");
    }

    auto module = std::unique_ptr<LoadedModule>(new LoadedModule());
    // Copy what the provider's table has (it may be an older, shorter one); the rest stays NULL until filled.
    std::memcpy(&module->verbs_, verbs, std::min<size_t>(verbs->size, sizeof(ri_verbs_ops_t)));
    std::string missing;
    auto note_missing = [&missing](const char *op) { missing += (missing.empty() ? "" : ", ") + std::string(op); };
#define RDMA_CHECK_FIELD(field, mandatory)                                                            \
    if (module->verbs_.field == nullptr) {                                                            \
        if (mandatory) note_missing(#field);                                                          \
        module->verbs_.field = &NotSupported<decltype(ri_verbs_ops_t::field)>::call;                  \
    } else {                                                                                          \
        module->implemented_.emplace_back(#field);                                                    \
    }
    RDMA_RI_VERBS_FIELDS(RDMA_CHECK_FIELD)
#undef RDMA_CHECK_FIELD
    if (mode == RI_MODE_PRIVILEGED) {
        if (desc->attach == nullptr) note_missing("attach");
        if (desc->detach == nullptr) note_missing("detach");
    }
    if (!missing.empty()) {
        if (desc->fini != nullptr) desc->fini();
        return refuse(path, RI_ELIBBAD, "mandatory operation missing: " + missing);
    }
    module->verbs_.size = sizeof(ri_verbs_ops_t);
    module->verbs_.abi_version = RI_ABI_VERSION;

    if (mode == RI_MODE_PRIVILEGED && (desc->flags & RI_MODULE_NO_UVP) == 0) {
        if (desc->uvp_library == nullptr || *desc->uvp_library == '\0') {
            if (desc->fini != nullptr) desc->fini();
            return refuse(path, RI_ELIBBAD, "names no uVP library and does not set RI_MODULE_NO_UVP");
        }
        fs::path uvp(desc->uvp_library);
        module->uvp_ = uvp.is_absolute() ? uvp : dir_ / uvp;
    }

    std::pair<std::string, int> key{*name, static_cast<int>(mode)};
    if (auto it = modules_.find(key); it != modules_.end()) {
        if (desc->fini != nullptr) desc->fini();
        return refuse(path, RI_EEXIST,
                      "provider '" + *name + "' is already loaded from " + it->second->path().string());
    }

    module->library_ = std::move(library);
    module->path_ = path;
    module->descriptor_ = desc;
    module->name_ = *name;
    module->vendor_ = *vendor;
    module->version_ = desc->version != nullptr ? std::string(desc->version, strnlen(desc->version, RI_NAME_MAX))
                                                : std::string();
    ModuleRef ref(std::move(module));
    modules_.emplace(std::move(key), ref);
    RDMA_LOG_INFO(kComponent, "loaded %s %s by %s (%s, ABI %s) from %s", ref->name().c_str(),
                  ref->version().c_str(), ref->vendor().c_str(), std::string(mode_name(mode)).c_str(),
                  abi_version_text(ref->abi_version()).c_str(), path.c_str());
    return ref;
}

ModuleRef ModuleLoader::find(std::string_view name, ri_mode_t mode) const {
    std::lock_guard lock(mutex_);
    auto it = modules_.find(std::pair<std::string, int>{std::string(name), static_cast<int>(mode)});
    return it == modules_.end() ? nullptr : it->second;
}

std::vector<ModuleRef> ModuleLoader::modules() const {
    std::lock_guard lock(mutex_);
    std::vector<ModuleRef> out;
    out.reserve(modules_.size());
    for (const auto &[key, module] : modules_) out.push_back(module);
    return out;
}

Expected<void> ModuleLoader::unload(std::string_view name, ri_mode_t mode) {
    std::lock_guard lock(mutex_);
    auto it = modules_.find(std::pair<std::string, int>{std::string(name), static_cast<int>(mode)});
    if (it == modules_.end()) {
        return Error(RI_ENOENT, "no provider '" + std::string(name) + "' is loaded in " +
                                    std::string(mode_name(mode)));
    }
    // The loader holds one reference; any other is a user (an attached instance, an open RNIC).
    if (long users = it->second.use_count() - 1; users > 0) {
        return Error(RI_EBUSY, "provider '" + std::string(name) + "' is in use (" + std::to_string(users) +
                                   " reference" + (users == 1 ? "" : "s") + "); detach its RNICs first");
    }
    modules_.erase(it);
    return {};
}

}  // namespace rdma::rnicpi
