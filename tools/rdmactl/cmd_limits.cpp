// rdmactl limits: what krdmad allows each caller (connections, pinned memory, privileged ports), what is in use,
// and how often each limit refused a request.
#include <cstdio>
#include <cstring>
#include <iostream>

#include "client.hpp"
#include "commands.hpp"

namespace rdmactl {

void add_limits_command(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *cmd = app.add_subcommand(
        "limits", "Show krdmad's limits per user and per process, what is in use, and what each limit refused");
    cmd->callback([&global, &exit_code] {
        auto client = ual::DeviceClient::connect(global.device, global.timeout);
        if (!client) {
            std::fprintf(stderr, "rdmactl: %s\n", shown(client.error().message()).c_str());
            exit_code = 1;
            return;
        }
        krdma_limits l{};
        if (!ask(**client, KRDMA_CMD_LIMITS, l, "limits")) {
            exit_code = 1;
            return;
        }
        const nlohmann::json j{
            {"connections",
             {{"limit", l.max_connections}, {"per_user", l.connections_per_user}, {"in_use", l.connections},
              {"in_use_by_caller", l.connections_of_caller}}},
            {"pinned_bytes",
             {{"limit", l.pin_bytes_total}, {"per_user", l.pin_bytes_per_user}, {"per_process", l.pin_bytes_per_process},
              {"in_use", l.pinned_total}, {"in_use_by_caller", l.pinned_by_caller}}},
            {"objects",
             {{"per_process", l.objects_per_process}, {"per_user", l.objects_per_user},
              {"in_use_by_caller", l.objects_of_caller}}},
            {"refused",
             {{"connections_host", l.refused_connections_host}, {"connections_user", l.refused_connections_user},
              {"pins_process", l.refused_pins_process}, {"pins_user", l.refused_pins_user},
              {"pins_host", l.refused_pins_host}, {"pins_unmapped", l.refused_pins_unmapped},
              {"privileged_ports", l.refused_privileged_ports}, {"objects_process", l.refused_objects_process},
              {"objects_user", l.refused_objects_user}}}};
        if (global.json) {
            std::cout << j.dump(2) << "\n";
            return;
        }
        const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
        std::printf("Device connections: %llu in use (%llu of your uid); limit %llu host-wide (root: 32 more), ", u(l.connections),
                    u(l.connections_of_caller), u(l.max_connections));
        if (l.connections_per_user != 0) {
            std::printf("%llu per user\n", u(l.connections_per_user));
        } else {
            std::printf("no per-user limit\n");
        }
        std::printf("Pinned memory:      %llu bytes in use (%llu of your uid); limit %llu host-wide, %llu per user, "
                    "%llu per process (or its RLIMIT_MEMLOCK, without CAP_IPC_LOCK)\n",
                    u(l.pinned_total), u(l.pinned_by_caller), u(l.pin_bytes_total), u(l.pin_bytes_per_user),
                    u(l.pin_bytes_per_process));
        std::printf("Objects:            %llu held by your uid; limit %llu per process (all its connections), ",
                    u(l.objects_of_caller), u(l.objects_per_process));
        if (l.objects_per_user != 0) {
            std::printf("%llu per user\n", u(l.objects_per_user));
        } else {
            std::printf("no per-user limit\n");
        }
        std::printf("Refused since krdmad started:\n");
        for (const auto &[k, v] : j["refused"].items()) std::printf("  %-18s %llu\n", k.c_str(), v.get<unsigned long long>());
    });
}

}  // namespace rdmactl
