// krdmad: the kernel access layer host. One per host; serves the /dev/krdma device.
//
// Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 for a bad command line, 2 for a bad configuration,
// 3 when a provider module, an RNIC or a required consumer module cannot be set up, 4 when the device path cannot
// be served.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
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
#include "verb_commands.hpp"
#include "rnicpi/host/log.hpp"
#include "server.hpp"

namespace {

constexpr const char *kComponent = "krdmad";
constexpr const char *kDefaultConfig = "/etc/krdma/krdmad.json";

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
    app.add_flag("--check", check, "Check the configuration and exit");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 1;
    }

    kal::Config config;
    if (!config_file.empty() || std::filesystem::exists(kDefaultConfig)) {
        auto loaded = kal::load_config(config_file.empty() ? kDefaultConfig : config_file);
        if (!loaded) {
            std::fprintf(stderr, "krdmad: %s\n", loaded.error().message().c_str());
            return 2;
        }
        config = std::move(*loaded);
    }
    if (!device.empty()) config.device = device;
    if (!level.empty()) config.log_level = level;
    if (auto l = rdma::log::parse_level(config.log_level)) rdma::log::set_level(*l);
    // The admin group is resolved once, here: a group that does not exist is a configuration error.
    auto policy = kal::resolve_admin_policy(config.admin_group);
    if (!policy) {
        std::fprintf(stderr, "krdmad: %s\n", policy.error().message().c_str());
        return 2;
    }

    if (check) {
        std::printf("krdmad: configuration is valid (device %s, %zu module(s), %zu RNIC(s), %zu consumer "
                    "module(s))\n",
                    config.device.c_str(), config.modules.size(), config.rnics.size(), config.consumers.size());
        return 0;
    }

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
    kal::DeviceServer server(config.device, config.max_connections);
    if (auto r = server.listen(); !r) {
        std::fprintf(stderr, "krdmad: %s\n", r.error().message().c_str());
        return 4;
    }
    ::chmod(config.device.c_str(), 0666);
    kal::register_admin_commands(server, adapters, *policy);
    kal::PinBudget pin_budget(config.pin_bytes_total);
    // Destroyed first: every context (and its pins) goes before the RNICs and the budget.
    kal::VerbCommands verbs(server, adapters, config.quotas, pin_budget, config.pin_bytes_per_process);  // access is decided per command from SO_PEERCRED, not by the file mode
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
    int sig = 0;
    ::sigwait(&stop_signals, &sig);
    RDMA_LOG_INFO(kComponent, "%s: stopping", ::strsignal(sig));

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
