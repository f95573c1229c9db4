// rdmactl modinfo: load provider module files with the same loader the kAL and uAL use and describe them, or say
// exactly why a module would be refused. Needs no running krdmad.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "rnicpi/host/verbs_fields.hpp"

namespace rdmactl {
namespace {

using rdma::rnicpi::ModuleLoader;
using rdma::rnicpi::ModuleRef;

struct ModinfoOptions {
    std::vector<std::string> files;
    std::string mode = "auto";
    std::string provider_dir;
};

// A host with logging only: describing a module must not pin memory or reach a kAL.
const ri_host_ops_t kInspectHost = {sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr,
                                    nullptr, nullptr, nullptr, nullptr};

std::vector<std::string> implemented_ops(const rdma::rnicpi::LoadedModule &m, bool want_implemented) {
    std::vector<std::string> ops;
#define RDMACTL_OP(field, mandatory)                                              \
    if (m.implements(#field) == want_implemented) ops.emplace_back(#field);
    RDMA_RI_VERBS_FIELDS(RDMACTL_OP)
#undef RDMACTL_OP
    return ops;
}

nlohmann::json describe(const rdma::rnicpi::LoadedModule &m) {
    nlohmann::json j;
    j["file"] = m.path().string();
    j["name"] = m.name();
    j["vendor"] = m.vendor();
    j["version"] = m.version();
    j["mode"] = m.mode() == RI_MODE_PRIVILEGED ? "kvp" : "uvp";
    j["abi_version"] = rdma::rnicpi::abi_version_text(m.abi_version());
    j["software"] = (m.flags() & RI_MODULE_SOFTWARE) != 0;
    j["uvp_library"] = m.uvp_library() ? nlohmann::json(m.uvp_library()->string()) : nlohmann::json(nullptr);
    j["operations"] = implemented_ops(m, true);
    j["not_supported"] = implemented_ops(m, false);
    return j;
}

void print_text(const nlohmann::json &j) {
    std::cout << j["file"].get<std::string>() << "\n";
    if (j.contains("error")) {
        std::cout << "  refused:       " << j["error"].get<std::string>() << "\n";
        return;
    }
    auto list = [](const nlohmann::json &a) {
        std::string s;
        for (const auto &e : a) s += (s.empty() ? "" : " ") + e.get<std::string>();
        return s.empty() ? std::string("-") : s;
    };
    std::cout << "  name:          " << j["name"].get<std::string>() << "\n"
              << "  vendor:        " << j["vendor"].get<std::string>() << "\n"
              << "  version:       " << j["version"].get<std::string>() << "\n"
              << "  mode:          "
              << (j["mode"] == "kvp" ? "privileged (kVP)" : "non-privileged (uVP)") << "\n"
              << "  RNIC-PI ABI:   " << j["abi_version"].get<std::string>() << "\n"
              << "  uVP library:   " << (j["uvp_library"].is_null() ? "-" : j["uvp_library"].get<std::string>())
              << "\n"
              << "  operations:    " << list(j["operations"]) << "\n"
              << "  not supported: " << list(j["not_supported"]) << "\n";
}

rdma::Expected<ModuleRef> load_any(ModuleLoader &loader, const std::string &file, const std::string &mode) {
    if (mode == "kvp") return loader.load(file, RI_MODE_PRIVILEGED);
    if (mode == "uvp") return loader.load(file, RI_MODE_NONPRIVILEGED);
    auto as_kvp = loader.load(file, RI_MODE_PRIVILEGED);
    if (as_kvp) return as_kvp;
    auto as_uvp = loader.load(file, RI_MODE_NONPRIVILEGED);
    if (as_uvp) return as_uvp;
    // Report the kVP error unless the file was a uVP that failed for its own reason.
    return as_uvp.error().message().find("but privileged") == std::string::npos ? as_uvp : as_kvp;
}

}  // namespace

void add_modinfo(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto opts = std::make_shared<ModinfoOptions>();
    CLI::App *cmd = app.add_subcommand("modinfo", "Describe provider module files (kVP modules, uVP libraries)");
    cmd->add_option("files", opts->files, "Module files; a bare name is looked up in the provider directory")
        ->required();
    cmd->add_option("--mode", opts->mode, "Expected mode: kvp, uvp or auto")
        ->check(CLI::IsMember({"auto", "kvp", "uvp"}));
    cmd->add_option("--provider-dir", opts->provider_dir, "Provider directory (default: installed one)");
    cmd->callback([opts, &global, &exit_code] {
        ModuleLoader loader(kInspectHost, opts->provider_dir.empty() ? rdma::rnicpi::default_provider_dir()
                                                                     : std::filesystem::path(opts->provider_dir));
        nlohmann::json all = nlohmann::json::array();
        for (const auto &file : opts->files) {
            auto module = load_any(loader, file, opts->mode);
            nlohmann::json j;
            if (module) {
                j = describe(**module);
            } else {
                j["file"] = file;
                j["error"] = module.error().message();
                j["errno"] = std::string(rdma::errno_name(module.error().code()));
                exit_code = 1;
            }
            all.push_back(j);
        }
        if (global.json) {
            std::cout << all.dump(2) << "\n";
        } else {
            for (const auto &j : all) print_text(j);
        }
    });
}

}  // namespace rdmactl
