// krdmad: the kernel access layer host. One per host; serves the /dev/krdma device.
//
// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 for a bad command line, 2 for a bad configuration,
// 3 when a provider module, an RNIC or a required consumer module cannot be set up, 4 when the device path cannot
// be served. --check exits with the status a start would have (0, 2 or 3) without serving. SIGHUP reloads the
// configuration file (kal/config/reload.hpp). Under systemd (Type=notify) it reports READY=1 once the device serves,
// RELOADING=1 and READY=1 around a reload, and STOPPING=1.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "adapter_manager.hpp"
#include "admin_commands.hpp"
#include "config.hpp"
#include "connection_commands.hpp"
#include "consumer_modules.hpp"
#include "kal/consumer_host.hpp"
#include "reload.hpp"
#include "verb_commands.hpp"
#include "rnicpi/host/log.hpp"
#include "server.hpp"

namespace {

constexpr const char *kComponent = "krdmad";
constexpr const char *kDefaultConfig = OPENRDMA_SYSCONFDIR "/krdma/krdmad.json";

// Every connected QP's TCP socket is a descriptor here (the kAL keeps its copy of the stream), so the usual soft
// limit of 1024 would stop a host at about a thousand connections: the soft limit goes up to the hard one, as a
// server that holds a socket per client does. Returns the limit in effect.
rlim_t raise_descriptor_limit() {
    rlimit l{};
    if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return 0;
    if (l.rlim_cur < l.rlim_max) {
        rlimit want = l;
        want.rlim_cur = l.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return want.rlim_cur;
    }
    return l.rlim_cur;
}

// Tells systemd (Type=notify) where the daemon stands; nothing without $NOTIFY_SOCKET.
void notify(const std::string &state) { (void)::sd_notify(0, state.c_str()); }

std::string status_line(const kal::Config &c, const kal::AdapterManager &adapters) {
    return "STATUS=serving " + c.device.string() + " with " + std::to_string(adapters.list().size()) + " RNIC(s)";
}

// Where the configuration came from: a file named on the command line, the default file, or nothing (defaults).
struct Source {
    std::string file;  // empty: no file was read
    bool named = false;
};

// Reads @p source's file, with the command line's overrides on top; empty file: the built-in defaults.
rdma::Expected<kal::Config> read_config(const Source &source, const std::string &device, const std::string &level) {
    kal::Config config;
    if (!source.file.empty()) {
        auto loaded = kal::load_config(source.file);
        if (!loaded) return loaded.error();
        config = std::move(*loaded);
    }
    if (!device.empty()) config.device = device;
    if (!level.empty()) config.log_level = level;
    return config;
}

// --check: everything a start does short of serving. Each module is loaded and each RNIC attached (so the provider
// judges its address, netdev and options) and detached again; the provider directory, the device path's directory
// and the consumer modules' files are looked at. Every problem is reported, not only the first.
int check_configuration(const kal::Config &config, const Source &source) {
    if (source.file.empty()) {
        std::printf("krdmad: no configuration file (%s does not exist): checking the built-in defaults\n",
                    kDefaultConfig);
    } else {
        std::printf("krdmad: checking %s\n", source.file.c_str());
    }
    int status = 0;
    auto problem = [&status](int code, const std::string &what) {
        std::printf("  error: %s\n", what.c_str());
        status = std::max(status, code);
    };
    std::error_code ec;
    const std::filesystem::path dir = config.provider_dir.value_or(rdma::rnicpi::default_provider_dir());
    if (!std::filesystem::is_directory(dir, ec)) {
        problem(2, "provider_dir " + dir.string() + " is not a directory");
    }
    // The device's directory is made at start (systemd's RuntimeDirectory= makes /run/krdma): the nearest existing
    // ancestor must be a directory this user may create it in.
    std::filesystem::path parent = config.device.parent_path();
    if (parent.empty()) parent = ".";
    std::filesystem::path existing = parent;
    while (!std::filesystem::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path()) {
        existing = existing.parent_path();
    }
    if (!std::filesystem::is_directory(existing, ec)) {
        problem(2, "device " + config.device.string() + ": " + existing.string() + " is not a directory");
    } else if (existing != parent && ::access(existing.c_str(), W_OK | X_OK) != 0) {
        problem(2, "device " + config.device.string() + ": cannot create " + parent.string() + " in " +
                       existing.string() + ": " + std::strerror(errno));
    }
    rdma::rnicpi::ModuleLoader loader(kal::kal_host_ops(), dir);
    kal::AdapterManager adapters(loader);
    for (const auto &m : config.modules) {
        if (auto r = adapters.load(m); !r) {
            problem(3, r.error().message());
        } else {
            std::printf("  module %s: provider %s\n", m.c_str(), (*r)->name().c_str());
        }
    }
    for (const auto &a : config.rnics) {
        auto r = adapters.attach(a);
        if (!r) {
            problem(3, "RNIC " + a.name + ": " + r.error().message());
            continue;
        }
        std::printf("  RNIC %s: %s on %s (%s)\n", a.name.c_str(), r->provider.c_str(), r->address.c_str(),
                    r->netdev.empty() ? "no netdev" : r->netdev.c_str());
        (void)adapters.detach(a.name);
    }
    for (const auto &c : config.consumers) {
        const std::filesystem::path file(c.module);
        const std::filesystem::path path = file.has_parent_path() ? file : dir / file;
        if (!std::filesystem::is_regular_file(path, ec)) {
            problem(c.required ? 3 : 2, "consumer module " + path.string() + ": no such file");
        }
    }
    if (status == 0) {
        std::printf("krdmad: configuration is valid (device %s, %zu module(s), %zu RNIC(s), %zu consumer module(s))\n",
                    config.device.c_str(), config.modules.size(), config.rnics.size(), config.consumers.size());
    } else {
        std::printf("krdmad: configuration is not valid\n");
    }
    return status;
}

// SIGHUP: the file again, applied as far as it can be live; every change and refusal is logged.
void reload_configuration(const Source &source, const std::string &device, const std::string &level,
                          kal::Config &running, kal::AdapterManager &adapters) {
    notify("RELOADING=1");
    Source now = source;
    if (now.file.empty() && std::filesystem::exists(kDefaultConfig)) now.file = kDefaultConfig;
    auto wanted = read_config(now, device, level);
    if (!wanted) {
        RDMA_LOG_ERROR(kComponent, "reload refused, nothing changed: %s", wanted.error().message().c_str());
    } else {
        const kal::ReloadReport r = kal::reload(running, *wanted, adapters);
        for (const auto &a : r.applied) RDMA_LOG_INFO(kComponent, "reload: %s", a.c_str());
        for (const auto &a : r.refused) RDMA_LOG_WARN(kComponent, "reload: %s", a.c_str());
        RDMA_LOG_INFO(kComponent, "reloaded %s: %zu change(s), %zu refused",
                      now.file.empty() ? "(built-in defaults)" : now.file.c_str(), r.applied.size(), r.refused.size());
    }
    notify("READY=1\n" + status_line(running, adapters));
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"krdmad: the OpenRDMA kernel access layer daemon (serves the /dev/krdma device)"};
    std::string config_file;
    std::string device;
    std::string level;
    bool check = false;
    app.add_option("-c,--config", config_file, std::string("JSON configuration (default: ") + kDefaultConfig +
                                                   " if it exists)");
    app.add_option("--device", device, "Device path, overriding the configuration");
    app.add_option("--log-level", level, "error, warn, info or debug, overriding the configuration")
        ->check(CLI::IsMember({"error", "warn", "info", "debug"}));
    app.add_flag("--check", check,
                 "Check the configuration as a start would (load each module, attach and detach each RNIC) and exit");
    app.set_version_flag("--version", std::string("krdmad (OpenRDMA) ") + OPENRDMA_VERSION + ", device protocol " +
                                          std::to_string(KRDMA_ABI_VERSION) + "." + std::to_string(KRDMA_ABI_MINOR));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 1;
    }

    Source source;
    source.named = !config_file.empty();
    if (source.named) {
        source.file = config_file;
    } else if (std::filesystem::exists(kDefaultConfig)) {
        source.file = kDefaultConfig;
    }
    auto loaded = read_config(source, device, level);
    if (!loaded) {
        std::fprintf(stderr, "krdmad: %s\n", loaded.error().message().c_str());
        return 2;
    }
    kal::Config config = std::move(*loaded);
    if (auto l = rdma::log::parse_level(config.log_level)) rdma::log::set_level(*l);
    // The admin group is resolved once, here: a group that does not exist is a configuration error.
    auto policy = kal::resolve_admin_policy(config.admin_group);
    if (!policy) {
        std::fprintf(stderr, "krdmad: %s\n", policy.error().message().c_str());
        return 2;
    }

    if (check) return check_configuration(config, source);

    const rlim_t descriptors = raise_descriptor_limit();
    if (descriptors != 0 && descriptors != RLIM_INFINITY && descriptors < 4096) {
        RDMA_LOG_WARN(kComponent, "only %llu file descriptors (RLIMIT_NOFILE): each connection holds one; raise "
                                  "LimitNOFILE= or ulimit -n for more than a few thousand",
                      static_cast<unsigned long long>(descriptors));
    }

    // SIGTERM and SIGINT stay blocked in every thread (threads inherit the mask, so this comes before the first
    // kVP thread): the control thread takes them with sigwait() and shuts down in order on an ordinary thread,
    // consumer modules first while the device still serves, which a signal handler could not do.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);  // reload, on the same thread
    ::pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    rdma::rnicpi::ModuleLoader loader(kal::kal_host_ops(), config.provider_dir.value_or(rdma::rnicpi::default_provider_dir()));
    kal::AdapterManager adapters(loader);
    for (const auto &m : config.modules) {
        if (auto r = adapters.load(m); !r) {
            std::fprintf(stderr, "krdmad: %s\n", r.error().message().c_str());
            return 3;
        }
    }
    for (const auto &a : config.rnics) {
        if (auto r = adapters.attach(a); !r) {
            std::fprintf(stderr, "krdmad: cannot attach RNIC %s: %s\n", a.name.c_str(), r.error().message().c_str());
            return 3;
        }
    }

    std::error_code ec;
    std::filesystem::create_directories(config.device.parent_path(), ec);
    kal::DeviceServer server(config.device, config.max_connections, config.connections_per_user);
    if (auto r = server.listen(); !r) {
        std::fprintf(stderr, "krdmad: %s\n", r.error().message().c_str());
        return 4;
    }
    ::chmod(config.device.c_str(), 0666);
    kal::register_admin_commands(server, adapters, *policy);
    kal::PinBudget pin_budget(config.pin_bytes_total);
    kal::Accounts accounts(pin_budget, config.pin_bytes_per_process, config.pin_bytes_per_user, config.quotas,
                           config.objects_per_user);
    // Destroyed first: every context (and its pins) goes before the RNICs and the budget. Access is decided per
    // command from SO_PEERCRED and the caller's own rights, not by the file mode.
    kal::VerbCommands verbs(server, adapters, config.quotas, accounts);
    // LLP and endpoint management share the device's loop; destroyed before the verbs, it lets go of their endpoints.
    kal::ConnectionCommands connections(verbs, config.llp);
    // Kernel consumer modules reach the kAL through the host; they go before it.
    kal::ConsumerHost host(verbs, connections, adapters, config.device.string());
    kal::ConsumerModules consumers(host, loader.provider_dir());
    consumers.register_commands(server);

    // The device serves on its own thread; this one starts and stops the consumer modules, whose calls into the
    // kAL run on the serving thread and must not wait for themselves.
    std::thread serving([&server] {
        server.run();
        ::kill(::getpid(), SIGTERM);  // should the loop ever end by itself, the control thread wakes up
    });
    auto stop_serving = [&] {
        server.stop();
        serving.join();
    };

    if (auto r = consumers.start(config.consumers); !r) {
        std::fprintf(stderr, "krdmad: %s\n", r.error().to_string().c_str());
        consumers.stop();
        stop_serving();
        return 3;
    }

    RDMA_LOG_INFO(kComponent, "ready on %s with %zu RNIC(s)", config.device.c_str(), adapters.list().size());
    std::printf("krdmad: ready on %s\n", config.device.c_str());
    std::fflush(stdout);
    notify("READY=1\n" + status_line(config, adapters));
    int sig = 0;
    for (;;) {
        ::sigwait(&stop_signals, &sig);
        if (sig != SIGHUP) break;
        reload_configuration(source, device, level, config, adapters);
    }
    RDMA_LOG_INFO(kComponent, "%s: stopping", ::strsignal(sig));
    notify("STOPPING=1");

    // Consumer modules first, while the device serves: their connections and objects go the ordinary way.
    consumers.stop();
    stop_serving();
    // Tell every uAL before its resources go, so consumers see a clear reason rather than a dead socket.
    krdma_event bye{};
    bye.event = KRDMA_EVENT_SHUTDOWN;
    server.broadcast(bye);
    RDMA_LOG_INFO(kComponent, "shutting down (%zu client(s) connected)", server.connections());
    return 0;
}
