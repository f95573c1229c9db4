// krdmad's configuration reload: live changes to the log level, kVP modules and RNICs; the rest is reported.
#include "reload.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

const AttachRequest *find_rnic(const std::vector<AttachRequest> &list, const std::string &name) {
    auto it = std::find_if(list.begin(), list.end(), [&](const AttachRequest &a) { return a.name == name; });
    return it == list.end() ? nullptr : &*it;
}

bool listed(const std::vector<std::string> &modules, const std::string &file) {
    return std::find(modules.begin(), modules.end(), file) != modules.end();
}

// The provider a configured module file was loaded as (matched by file name: the loader keeps canonical paths).
std::optional<std::string> provider_of(const AdapterManager &adapters, const std::string &file) {
    const auto name = std::filesystem::path(file).filename();
    for (const ModuleInfo &m : adapters.modules()) {
        if (std::filesystem::path(m.path).filename() == name) return m.provider;
    }
    return std::nullopt;
}

std::string describe(const AttachRequest &a) {
    std::string where = !a.address.empty() ? a.address : a.netdev;
    if (!a.address.empty() && !a.netdev.empty()) where += " on " + a.netdev;
    return "RNIC " + a.name + " (" + a.provider + ", " + where + (a.options.empty() ? "" : ", " + a.options) + ")";
}

// The settings read at start only: each change is reported with what would apply it.
void restart_only(const Config &running, const Config &wanted, ReloadReport &r) {
    auto note = [&r](bool changed, const char *what) {
        if (changed) r.refused.push_back(std::string(what) + " changed: read at start only; restart krdmad to apply it");
    };
    note(running.device != wanted.device, "device");
    note(running.provider_dir != wanted.provider_dir, "provider_dir");
    note(running.admin_group != wanted.admin_group, "admin_group");
    note(running.max_connections != wanted.max_connections || running.pin_bytes_per_process != wanted.pin_bytes_per_process ||
             running.pin_bytes_total != wanted.pin_bytes_total || !(running.quotas == wanted.quotas) ||
             running.objects_per_user != wanted.objects_per_user ||
             running.connections_per_user != wanted.connections_per_user ||
             running.pin_bytes_per_user != wanted.pin_bytes_per_user,
         "limits");
    note(!(running.llp == wanted.llp), "llp");
    note(running.consumers != wanted.consumers, "consumers");
}

}  // namespace

ReloadReport reload(Config &running, const Config &wanted, AdapterManager &adapters) {
    ReloadReport r;
    restart_only(running, wanted, r);

    if (running.log_level != wanted.log_level) {
        if (auto l = rdma::log::parse_level(wanted.log_level)) {
            rdma::log::set_level(*l);
            r.applied.push_back("log level " + running.log_level + " -> " + wanted.log_level);
            running.log_level = wanted.log_level;
        }
    }

    // 1. RNICs removed or changed go first, so their addresses and providers are free for what replaces them.
    std::vector<AttachRequest> kept;  // running RNICs that stay attached (unchanged, or refused to detach)
    for (const AttachRequest &a : running.rnics) {
        const AttachRequest *w = find_rnic(wanted.rnics, a.name);
        if (w != nullptr && *w == a) {
            kept.push_back(a);
            continue;
        }
        if (auto d = adapters.detach(a.name); !d) {
            r.refused.push_back(describe(a) + " kept as it is: " + d.error().message());
            kept.push_back(a);
            continue;
        }
        r.applied.push_back("detached " + describe(a) + (w == nullptr ? "" : " to attach it again changed"));
    }

    // 2. Modules no longer listed, once nothing uses them.
    std::vector<std::string> modules;
    for (const std::string &file : running.modules) {
        if (listed(wanted.modules, file)) {
            modules.push_back(file);
            continue;
        }
        const auto provider = provider_of(adapters, file);
        if (!provider) continue;  // not loaded (any more): nothing to do
        if (auto u = adapters.unload(*provider); !u) {
            r.refused.push_back("module " + file + " kept loaded: " + u.error().message());
            modules.push_back(file);
            continue;
        }
        r.applied.push_back("unloaded module " + file + " (provider " + *provider + ")");
    }

    // 3. Modules newly listed.
    for (const std::string &file : wanted.modules) {
        if (listed(modules, file)) continue;
        auto m = adapters.load(file);
        if (!m) {
            r.refused.push_back("module " + file + " not loaded: " + m.error().message());
            continue;
        }
        r.applied.push_back("loaded module " + file + " (provider " + (*m)->name() + ")");
        modules.push_back(file);
    }

    // 4. RNICs newly listed or changed, in the configuration's order.
    std::vector<AttachRequest> rnics;
    for (const AttachRequest &w : wanted.rnics) {
        if (const AttachRequest *k = find_rnic(kept, w.name)) {
            rnics.push_back(*k);
            continue;
        }
        if (auto a = adapters.attach(w); !a) {
            r.refused.push_back(describe(w) + " not attached: " + a.error().message());
            continue;
        }
        r.applied.push_back("attached " + describe(w));
        rnics.push_back(w);
    }
    // Kept RNICs the new configuration drops (a refused detach) still run: they stay in the running list.
    for (const AttachRequest &k : kept) {
        if (find_rnic(rnics, k.name) == nullptr) rnics.push_back(k);
    }
    running.rnics = std::move(rnics);
    running.modules = std::move(modules);
    return r;
}

}  // namespace kal
