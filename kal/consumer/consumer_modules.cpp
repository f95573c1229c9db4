// Kernel consumer modules: Boost.DLL for the shared object (as the kVP loader does), the consumer-module ABI for
// acceptance, and the start/stop order of the configuration.
#include "consumer_modules.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace fs = std::filesystem;

namespace {

constexpr const char *kComponent = "consumers";

// The smallest descriptor a 1.x module may export: everything up to and including stop.
constexpr size_t kMinDescriptorSize =
    offsetof(krdma_consumer_module_t, stop) + sizeof(krdma_consumer_module_t::stop);

static_assert(KRDMA_CONSUMER_LOG_ERROR == static_cast<int>(rdma::log::Level::error) &&
                  KRDMA_CONSUMER_LOG_DEBUG == static_cast<int>(rdma::log::Level::debug),
              "consumer log levels are the RNIC-PI's");

// A level from a module is foreign input: out of range is clamped, never trusted as an enum value.
rdma::log::Level level_of(int level) noexcept {
    if (level <= KRDMA_CONSUMER_LOG_ERROR) return rdma::log::Level::error;
    if (level >= KRDMA_CONSUMER_LOG_DEBUG) return rdma::log::Level::debug;
    return static_cast<rdma::log::Level>(level);
}

int env_log_enabled(const krdma_consumer_env_t *, int level) { return rdma::log::enabled(level_of(level)) ? 1 : 0; }

void env_log(const krdma_consumer_env_t *env, int level, const char *format, ...) {
    const rdma::log::Level l = level_of(level);
    if (!rdma::log::enabled(l) || format == nullptr) return;
    char text[1024];  // a log line, not a payload: longer messages are cut
    va_list ap;
    va_start(ap, format);
    std::vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    rdma::log::write(l, env != nullptr && env->module_name != nullptr ? env->module_name : "consumer", "%s", text);
}

// Strings in a module's descriptor come from foreign code: bound their length before copying.
std::optional<std::string> bounded(const char *s, size_t max) {
    if (s == nullptr) return std::nullopt;
    const size_t n = strnlen(s, max);
    if (n == max) return std::nullopt;
    return std::string(s, n);
}

template <size_t N>
void copy_text(char (&dst)[N], const std::string &src) {
    const size_t n = std::min(src.size(), N - 1);
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

}  // namespace

struct ConsumerModules::Module {
    ConsumerModuleSpec spec;
    ConsumerModuleInfo info;  // guarded by ConsumerModules::mutex_
    boost::dll::shared_library library;
    const krdma_consumer_module_t *descriptor = nullptr;
    krdma_consumer_env_t env{};  // its address is the module's env until stop returns
    std::string device;          // what env points into
    void *state = nullptr;
};

ConsumerModules::ConsumerModules(ConsumerHost &host, fs::path provider_dir)
    : host_(host), dir_(fs::absolute(provider_dir)) {}

ConsumerModules::~ConsumerModules() { stop(); }

rdma::Expected<void> ConsumerModules::start(const std::vector<ConsumerModuleSpec> &specs) {
    for (const auto &spec : specs) {
        auto m = std::make_unique<Module>();
        m->spec = spec;
        const fs::path file(spec.module);
        // Like kVP modules: a bare file name is looked up in the provider directory.
        m->info.path = (file.has_parent_path() ? file : dir_ / file).string();
        m->info.required = spec.required;
        Module &mod = *m;
        {
            std::lock_guard g(mutex_);
            modules_.push_back(std::move(m));
        }
        if (!spec.enabled) {
            RDMA_LOG_INFO(kComponent, "consumer module %s is disabled in the configuration", mod.info.path.c_str());
            continue;
        }
        auto r = start_one(mod);
        if (r) continue;
        {
            std::lock_guard g(mutex_);
            mod.info.state = KRDMA_CONSUMER_FAILED;
            mod.info.error = r.error().to_string();
        }
        if (spec.required) {
            RDMA_LOG_ERROR(kComponent, "%s; it is required, so the kAL gives up", r.error().to_string().c_str());
            return r.error();
        }
        RDMA_LOG_ERROR(kComponent, "%s; skipped (not required)", r.error().to_string().c_str());
    }
    return {};
}

rdma::Expected<void> ConsumerModules::start_one(Module &m) {
    const fs::path path(m.info.path);
    auto refuse = [&path](int code, const std::string &why) {
        return rdma::Error(code, "consumer module " + path.string() + ": " + why);
    };
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) {
        return refuse(RI_ENOENT, "no such file (bare names are looked up in the provider directory " +
                                     dir_.string() + ")");
    }
    if (!fs::is_regular_file(st)) return refuse(RI_ENOEXEC, "not a regular file");
    const fs::path canonical = fs::canonical(path, ec);
    if (ec) return refuse(RI_ENOENT, "cannot resolve path: " + ec.message());

    boost::dll::shared_library library;
    boost::dll::fs::error_code lec;
    ::dlerror();  // clear any stale message so the one we read is ours
    // RTLD_NOW: a C++ module needing a kAL symbol this host does not export fails here, with dlerror's name of it.
    library.load(canonical, lec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    if (lec) {
        const char *why = ::dlerror();
        return refuse(RI_ENOEXEC,
                      std::string("not a loadable shared object: ") + (why != nullptr ? why : lec.message()));
    }
    if (!library.has(KRDMA_CONSUMER_MODULE_ENTRY_SYMBOL)) {
        return refuse(RI_ELIBBAD, "does not export the entry symbol " KRDMA_CONSUMER_MODULE_ENTRY_SYMBOL
                                  "; is it a consumer module (krdma/consumer_module.h)?");
    }
    const auto *desc = &library.get<const krdma_consumer_module_t>(KRDMA_CONSUMER_MODULE_ENTRY_SYMBOL);
    auto version = [](uint32_t v) {
        return std::to_string(KRDMA_CONSUMER_ABI_MAJOR(v)) + "." + std::to_string(KRDMA_CONSUMER_ABI_MINOR(v));
    };
    if (KRDMA_CONSUMER_ABI_MAJOR(desc->abi_version) != KRDMA_CONSUMER_ABI_MAJOR(KRDMA_CONSUMER_ABI_VERSION)) {
        return refuse(RI_ELIBBAD, "built for consumer-module ABI " + version(desc->abi_version) +
                                      ", this host speaks " + version(KRDMA_CONSUMER_ABI_VERSION) +
                                      "; rebuild the module against this release");
    }
    if (KRDMA_CONSUMER_ABI_MINOR(desc->abi_version) > KRDMA_CONSUMER_ABI_MINOR(KRDMA_CONSUMER_ABI_VERSION)) {
        return refuse(RI_ELIBBAD, "needs consumer-module ABI " + version(desc->abi_version) +
                                      ", this host provides only " + version(KRDMA_CONSUMER_ABI_VERSION) +
                                      "; upgrade the host");
    }
    if (desc->size < kMinDescriptorSize) {
        return refuse(RI_ELIBBAD, "module description too small (" + std::to_string(desc->size) + " bytes)");
    }
    auto name = bounded(desc->name, KRDMA_CONSUMER_NAME_MAX);
    if (!name || name->empty()) {
        return refuse(RI_ELIBBAD, "name must be non-empty and shorter than " +
                                      std::to_string(KRDMA_CONSUMER_NAME_MAX) + " bytes");
    }
    if (desc->start == nullptr || desc->stop == nullptr) return refuse(RI_ELIBBAD, "start or stop missing");
    {
        std::lock_guard g(mutex_);
        for (const auto &other : modules_) {
            if (other.get() != &m && other->info.state == KRDMA_CONSUMER_RUNNING && other->info.name == *name) {
                return refuse(RI_EEXIST, "a consumer module named '" + *name + "' already runs, from " +
                                             other->info.path);
            }
        }
        m.info.name = *name;
        m.info.description = bounded(desc->description, sizeof(krdma_consumer_info::description)).value_or("");
        m.info.path = canonical.string();
        m.info.abi_version = desc->abi_version;
    }

    m.device = host_.device();
    m.env.size = sizeof(krdma_consumer_env_t);
    m.env.abi_version = KRDMA_CONSUMER_ABI_VERSION;
    m.env.device = m.device.c_str();
    m.env.module_name = m.info.name.c_str();  // info.name does not change while the module runs
    m.env.log = &env_log;
    m.env.log_enabled = &env_log_enabled;
    m.env.kal = &host_;
    m.env.host_build = KAL_CONSUMER_HOST_BUILD;

    int rc = 0;
    void *state = nullptr;
    // The boundary is C, but a C++ module's exception must not take the kAL down with it.
    try {
        rc = desc->start(&m.env, m.spec.args.c_str(), &state);
    } catch (...) {
        rc = RI_EIO;
        RDMA_LOG_ERROR(kComponent, "consumer module %s: start threw an exception", name->c_str());
    }
    if (rc != 0) {
        const int code = rc > 0 ? rc : RI_EIO;  // a negative errno from a module is still a failure
        return refuse(code, std::string("start failed: ") + std::strerror(code));
    }
    m.library = std::move(library);
    m.descriptor = desc;
    m.state = state;
    {
        std::lock_guard g(mutex_);
        m.info.state = KRDMA_CONSUMER_RUNNING;
    }
    RDMA_LOG_INFO(kComponent, "started consumer module %s (%s)", name->c_str(), canonical.c_str());
    return {};
}

void ConsumerModules::stop() {
    std::vector<Module *> running;
    {
        std::lock_guard g(mutex_);
        for (auto &m : modules_) {
            if (m->info.state == KRDMA_CONSUMER_RUNNING) running.push_back(m.get());
        }
    }
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
        Module &m = **it;
        try {
            m.descriptor->stop(m.state);
        } catch (...) {
            RDMA_LOG_ERROR(kComponent, "consumer module %s: stop threw an exception", m.info.name.c_str());
        }
        {
            std::lock_guard g(mutex_);
            m.info.state = KRDMA_CONSUMER_STOPPED;
        }
        m.descriptor = nullptr;
        m.state = nullptr;
        // The module's code goes with it, as a kernel frees a module after its exit function: stop must have
        // destroyed every HostedConsumer (and so every callback into this code) it made.
        m.library.unload();
        RDMA_LOG_INFO(kComponent, "stopped consumer module %s", m.info.name.c_str());
    }
}

std::vector<ConsumerModuleInfo> ConsumerModules::list() const {
    std::lock_guard g(mutex_);
    std::vector<ConsumerModuleInfo> out;
    out.reserve(modules_.size());
    for (const auto &m : modules_) out.push_back(m->info);
    return out;
}

void ConsumerModules::register_commands(DeviceServer &server) {
    server.on(KRDMA_CMD_LIST_CONSUMERS, [this](Connection &, const Request &req, Reply &rep) {
        krdma_list_consumers q;
        std::memcpy(&q, req.payload.data(), sizeof q);
        const auto all = list();
        krdma_list_consumers a{};
        a.index = q.index;
        a.count = static_cast<uint32_t>(all.size());
        if (q.index < all.size()) {
            const ConsumerModuleInfo &m = all[q.index];
            copy_text(a.info.name, m.name);
            copy_text(a.info.description, m.description);
            copy_text(a.info.path, m.path);
            copy_text(a.info.error, m.error);
            a.info.state = m.state;
            a.info.abi_version = m.abi_version;
            a.info.required = m.required ? 1 : 0;
        }
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
}

}  // namespace kal
