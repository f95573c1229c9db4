// rdmactl attach / detach / control / inject / load / unload / modules / consumers: the administrator's changes to what a running
// krdmad serves, and its kVP and kernel consumer modules.
// Changes need root or membership in krdmad's admin group; krdmad decides, from the caller's SO_PEERCRED identity.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "client.hpp"
#include "commands.hpp"
#include "rnicpi/host/loader.hpp"

namespace rdmactl {
namespace {

struct AttachOptions {
    std::string provider, name, netdev, address, options;
};

// What a refusal without a reason (from a krdmad of protocol 1.0) means to the administrator, and what to do.
std::string explain(int status, const std::string &busy_hint) {
    switch (status) {
        case RI_EPERM:
            return "permission denied: needs root or membership in krdmad's admin group";
        case RI_EBUSY:
            return "busy: " + busy_hint;
        case RI_ENOTTY:
            return "this krdmad does not know the command (an older version?)";
        default:
            return std::string(std::strerror(status)) + " (" + std::string(rdma::errno_name(status)) + ")";
    }
}

// Connects to krdmad; on failure prints why (krdmad not running at that path...) and returns nothing.
std::unique_ptr<ual::DeviceClient> connect(const GlobalOptions &global) {
    auto client = ual::DeviceClient::connect(global.device, global.timeout);
    if (!client) {
        std::fprintf(stderr, "rdmactl: %s\n", shown(client.error().message()).c_str());
        return nullptr;
    }
    return std::move(*client);
}

// Sends one request of type T; on failure prints what failed and why and returns nothing.
template <typename T>
std::optional<T> request(ual::DeviceClient &client, uint32_t cmd, const T &q, const std::string &what,
                         const std::string &busy_hint = "") {
    auto r = client.call(cmd, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    if (!r || r->status != 0 || r->payload.size() != sizeof(T)) {
        // krdmad's own reason when it gave one: it knows what was wrong.
        const bool unexplained = r && r->status != 0 && r->reason.empty();
        std::fprintf(stderr, "rdmactl: %s failed: %s\n", shown(what).c_str(),
                     shown(unexplained ? explain(r->status, busy_hint) : failure_text(r, sizeof(T))).c_str());
        return std::nullopt;
    }
    T a;
    std::memcpy(&a, r->payload.data(), sizeof a);
    return a;
}

// Connects and sends one request: the whole of a changing command.
template <typename T>
std::optional<T> request(const GlobalOptions &global, uint32_t cmd, const T &q, const std::string &what,
                         const std::string &busy_hint = "") {
    auto client = connect(global);
    if (!client) return std::nullopt;
    return request(*client, cmd, q, what, busy_hint);
}

// An indexed listing (LIST_MODULES, LIST_CONSUMERS) over a new connection; nothing (after saying why) on failure.
template <typename T>
auto list_all(const GlobalOptions &global, uint32_t cmd, const std::string &what)
    -> std::optional<std::vector<decltype(T::info)>> {
    auto client = connect(global);
    if (!client) return std::nullopt;
    return list_each<T>(*client, cmd, what.c_str());
}

// An RNIC argument may be its name or an address it serves (as everywhere in rdmactl): an address becomes the name
// of the RNIC serving it; anything else is passed on as it is, so krdmad names what it does not know.
std::string rnic_name(const GlobalOptions &global, const std::string &name_or_address) {
    if (name_or_address.find_first_of(".:") == std::string::npos) return name_or_address;
    if (auto rnics = fetch_rnics(global)) {
        if (const krdma_rnic_info *r = find_rnic(*rnics, name_or_address)) return r->name;
    }
    return name_or_address;
}

// Copies @p text into a request field; false (after saying so) when it does not fit.
template <size_t N>
bool put(char (&field)[N], const std::string &text, const char *what) {
    if (text.size() >= N || text.find('\0') != std::string::npos) {
        std::fprintf(stderr, "rdmactl: the %s must be shorter than %zu characters\n", what, N);
        return false;
    }
    std::memcpy(field, text.c_str(), text.size() + 1);
    return true;
}

nlohmann::json module_json(const krdma_module_info &m) {
    return {{"provider", m.provider},
            {"vendor", m.vendor},
            {"version", m.version},
            {"file", m.path},
            {"abi_version", rdma::rnicpi::abi_version_text(m.abi_version)},
            {"uvp_library", m.uvp_library[0] != '\0' ? nlohmann::json(m.uvp_library) : nlohmann::json(nullptr)},
            {"rnics", m.rnics}};
}

void add_attach(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto opt = std::make_shared<AttachOptions>();
    CLI::App *cmd = app.add_subcommand("attach", "Attach a new RNIC instance of a loaded provider (admin)");
    cmd->add_option("--provider", opt->provider, "Provider name of a loaded kVP")->required();
    cmd->add_option("--name", opt->name, "The new RNIC's name, unique on the host")->required();
    auto *netdev = cmd->add_option("--netdev", opt->netdev, "Network device (its first address is taken)");
    auto *address = cmd->add_option("--address", opt->address, "IPv4 or IPv6 address configured on this host");
    cmd->add_option("--options", opt->options, "Provider options, a JSON object");
    netdev->excludes(address);
    cmd->callback([&global, &exit_code, opt] {
        exit_code = 1;
        if (opt->netdev.empty() && opt->address.empty()) {
            std::fprintf(stderr, "rdmactl: attach needs --netdev or --address\n");
            return;
        }
        if (!opt->options.empty()) {
            auto parsed = nlohmann::json::parse(opt->options, nullptr, false);
            if (parsed.is_discarded() || !parsed.is_object()) {
                std::fprintf(stderr, "rdmactl: --options must be a JSON object, e.g. '{\"mtu\": 4096}'\n");
                return;
            }
        }
        krdma_attach_rnic q{};
        if (!put(q.provider, opt->provider, "provider name") || !put(q.name, opt->name, "RNIC name") ||
            !put(q.netdev, opt->netdev, "netdev name") || !put(q.address, opt->address, "address") ||
            !put(q.options, opt->options, "options text")) {
            return;
        }
        auto a = request(global, KRDMA_CMD_ATTACH_RNIC, q, "attach");
        if (!a) return;
        exit_code = 0;
        if (global.json) {
            std::cout << rnic_json(a->info).dump(2) << "\n";
        } else {
            std::printf("attached %s (%s) to %s on %s\n", shown(a->info.name).c_str(), shown(a->info.provider).c_str(),
                        shown(a->info.address).c_str(), shown(a->info.netdev).c_str());
        }
    });
}

void add_detach(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto name = std::make_shared<std::string>();
    CLI::App *cmd = app.add_subcommand("detach", "Detach an RNIC that no consumer has open (admin)");
    cmd->add_option("name", *name, "RNIC name, or an address it serves")->required();
    cmd->callback([&global, &exit_code, name] {
        exit_code = 1;
        *name = rnic_name(global, *name);
        krdma_detach_rnic q{};
        if (!put(q.name, *name, "RNIC name")) return;
        if (!request(global, KRDMA_CMD_DETACH_RNIC, q, "detach",
                     "consumers have it open; they must close it first (rdmactl resources shows who)")) {
            return;
        }
        exit_code = 0;
        if (global.json) {
            std::cout << nlohmann::json{{"detached", *name}}.dump(2) << "\n";
        } else {
            std::printf("detached %s\n", shown(*name).c_str());
        }
    });
}

void add_load(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto file = std::make_shared<std::string>();
    CLI::App *cmd = app.add_subcommand("load", "Load a kVP module into krdmad (admin)");
    cmd->add_option("file", *file, "Module file: a name in krdmad's provider directory, or a path")->required();
    cmd->callback([&global, &exit_code, file] {
        exit_code = 1;
        // krdmad runs elsewhere: a relative path means this shell's directory, a bare name its provider directory.
        std::string target = *file;
        if (target.find('/') != std::string::npos) target = std::filesystem::absolute(target).lexically_normal();
        krdma_load_module q{};
        if (!put(q.file, target, "module path")) return;
        auto a = request(global, KRDMA_CMD_LOAD_MODULE, q, "load");
        if (!a) return;
        exit_code = 0;
        if (global.json) {
            std::cout << module_json(a->info).dump(2) << "\n";
        } else {
            std::printf("loaded %s %s (%s) from %s\n", shown(a->info.provider).c_str(), shown(a->info.version).c_str(),
                        shown(a->info.vendor).c_str(), shown(a->info.path).c_str());
        }
    });
}

void add_unload(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto provider = std::make_shared<std::string>();
    CLI::App *cmd = app.add_subcommand("unload", "Unload a provider's kVP module (admin)");
    cmd->add_option("provider", *provider, "Provider name")->required();
    cmd->callback([&global, &exit_code, provider] {
        exit_code = 1;
        krdma_unload_module q{};
        if (!put(q.provider, *provider, "provider name")) return;
        if (!request(global, KRDMA_CMD_UNLOAD_MODULE, q, "unload",
                     "RNICs of this provider are attached; detach them first")) {
            return;
        }
        exit_code = 0;
        if (global.json) {
            std::cout << nlohmann::json{{"unloaded", *provider}}.dump(2) << "\n";
        } else {
            std::printf("unloaded %s\n", shown(*provider).c_str());
        }
    });
}

void add_modules(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *cmd = app.add_subcommand("modules", "List the kVP modules krdmad has loaded");
    cmd->callback([&global, &exit_code] {
        auto listed = list_all<krdma_list_modules>(global, KRDMA_CMD_LIST_MODULES, "listing modules");
        if (!listed) {
            exit_code = 1;
            return;
        }
        const auto &list = *listed;
        if (global.json) {
            nlohmann::json all = nlohmann::json::array();
            for (const auto &m : list) all.push_back(module_json(m));
            std::cout << all.dump(2) << "\n";
            return;
        }
        std::printf("%-12s %-20s %-10s %-5s %5s %-40s %s\n", "PROVIDER", "VENDOR", "VERSION", "ABI", "RNICS", "FILE",
                    "UVP LIBRARY");
        for (const auto &m : list) {
            std::printf("%-12s %-20s %-10s %-5s %5u %-40s %s\n", shown(m.provider).c_str(), shown(m.vendor).c_str(),
                        shown(m.version).c_str(), rdma::rnicpi::abi_version_text(m.abi_version).c_str(), m.rnics,
                        shown(m.path).c_str(), m.uvp_library[0] != '\0' ? shown(m.uvp_library).c_str() : "-");
        }
    });
}

const char *consumer_state_name(uint32_t state) {
    switch (state) {
        case KRDMA_CONSUMER_DISABLED: return "disabled";
        case KRDMA_CONSUMER_FAILED: return "failed";
        case KRDMA_CONSUMER_RUNNING: return "running";
        case KRDMA_CONSUMER_STOPPED: return "stopped";
        default: return "unknown";  // a newer krdmad's state
    }
}

void add_consumers(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *cmd =
        app.add_subcommand("consumers", "List the kernel consumer modules of krdmad's configuration and their state");
    cmd->callback([&global, &exit_code] {
        auto listed = list_all<krdma_list_consumers>(global, KRDMA_CMD_LIST_CONSUMERS, "listing consumer modules");
        if (!listed) {
            exit_code = 1;
            return;
        }
        const auto &list = *listed;
        if (global.json) {
            nlohmann::json all = nlohmann::json::array();
            for (const auto &m : list) {
                all.push_back({{"name", m.name},
                               {"description", m.description},
                               {"file", m.path},
                               {"state", consumer_state_name(m.state)},
                               {"required", m.required != 0},
                               {"error", m.error[0] != '\0' ? nlohmann::json(m.error) : nlohmann::json(nullptr)}});
            }
            std::cout << all.dump(2) << "\n";
            return;
        }
        std::printf("%-20s %-9s %-8s %-40s %s\n", "NAME", "STATE", "REQUIRED", "FILE", "DESCRIPTION / ERROR");
        for (const auto &m : list) {
            std::printf("%-20s %-9s %-8s %-40s %s\n", m.name[0] != '\0' ? shown(m.name).c_str() : "-",
                        consumer_state_name(m.state), m.required != 0 ? "yes" : "no", shown(m.path).c_str(),
                        shown(m.error[0] != '\0' ? m.error : m.description).c_str());
        }
    });
}

}  // namespace

// Sends @p request to RNIC @p name's provider and prints its reply (JSON as the provider gave it, or indented).
void control(const GlobalOptions &global, int &exit_code, const std::string &name, const nlohmann::json &body,
             const char *what) {
    exit_code = 1;
    krdma_control_rnic q{};
    if (!put(q.name, name, "RNIC name") || !put(q.text, body.dump(), "request")) return;
    auto a = request(global, KRDMA_CMD_CONTROL_RNIC, q, what);
    if (!a) return;
    exit_code = 0;
    const std::string text(a->text, strnlen(a->text, sizeof a->text));
    const nlohmann::json reply = nlohmann::json::parse(text, nullptr, false);
    if (reply.is_discarded()) {
        std::printf("%s\n", text.c_str());  // a provider's reply that is not JSON, shown as it came
    } else {
        std::printf("%s\n", reply.dump(global.json ? -1 : 2).c_str());
    }
}

// One `KEY[=VALUE]` argument of `rdmactl inject`: a number when VALUE reads as one, true without a VALUE.
nlohmann::json fault_value(const std::string &value) {
    if (value.empty()) return true;
    char *end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(value.c_str(), &end, 0);
    if (errno == 0 && end != value.c_str() && *end == '\0' && value[0] != '-') return n;
    return value;
}

void add_control(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto name = std::make_shared<std::string>();
    auto text = std::make_shared<std::string>();
    CLI::App *cmd = app.add_subcommand(
        "control", "Send a provider's own run-time request to an RNIC (admin; the provider's README lists its words)");
    cmd->add_option("name", *name, "RNIC name, or an address it serves")->required();
    cmd->add_option("request", *text, "A JSON object, e.g. '{}' to see the provider's run-time state")->required();
    cmd->callback([&global, &exit_code, name, text] {
        const nlohmann::json request = nlohmann::json::parse(*text, nullptr, false);
        if (!request.is_object()) {
            exit_code = 1;
            std::fprintf(stderr, "rdmactl: control: the request must be a JSON object, e.g. '{}'\n");
            return;
        }
        control(global, exit_code, rnic_name(global, *name), request, "control");
    });
}

void add_inject(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    auto name = std::make_shared<std::string>();
    auto faults = std::make_shared<std::vector<std::string>>();
    auto clear = std::make_shared<bool>(false);
    CLI::App *cmd = app.add_subcommand(
        "inject", "Inject faults into an RNIC whose provider emulates them, e.g. hwstub (admin); no FAULT: show them");
    cmd->add_option("name", *name, "RNIC name, or an address it serves")->required();
    cmd->add_option("faults", *faults,
                    "FAULT[=VALUE]... in the provider's words, e.g. rx_corrupt=1 tx_delay_ms=20 fail_verb=create_qp "
                    "fatal (hwstub's README lists them)");
    cmd->add_flag("--clear", *clear, "Cancel every fault not yet fired");
    cmd->callback([&global, &exit_code, name, faults, clear] {
        nlohmann::json set = nlohmann::json::object();
        for (const std::string &f : *faults) {
            const size_t eq = f.find('=');
            const std::string key = f.substr(0, eq);
            if (key.empty()) {
                exit_code = 1;
                std::fprintf(stderr, "rdmactl: inject: '%s' names no fault (FAULT[=VALUE])\n", shown(f).c_str());
                return;
            }
            set[key] = fault_value(eq == std::string::npos ? "" : f.substr(eq + 1));
        }
        nlohmann::json request = nlohmann::json::object();
        if (*clear) request["faults"] = "clear";
        if (!set.empty()) {
            if (*clear) {
                exit_code = 1;
                std::fprintf(stderr, "rdmactl: inject: --clear takes no FAULT\n");
                return;
            }
            request["faults"] = set;
        }
        control(global, exit_code, rnic_name(global, *name), request, "inject");
    });
}

void add_admin_commands(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    add_attach(app, global, exit_code);
    add_detach(app, global, exit_code);
    add_control(app, global, exit_code);
    add_inject(app, global, exit_code);
    add_load(app, global, exit_code);
    add_unload(app, global, exit_code);
    add_modules(app, global, exit_code);
    add_consumers(app, global, exit_code);
}

}  // namespace rdmactl

namespace rdmactl {

nlohmann::json module_info_json(const krdma_module_info &m) { return module_json(m); }

std::optional<std::vector<krdma_module_info>> fetch_modules(const GlobalOptions &global) {
    return list_all<krdma_list_modules>(global, KRDMA_CMD_LIST_MODULES, "listing modules");
}

}  // namespace rdmactl
