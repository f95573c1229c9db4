// rdmactl list / show: the RNICs a running krdmad serves, selected by network address.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client.hpp"
#include "commands.hpp"

namespace rdmactl {
namespace {

// Asks krdmad for every RNIC; on failure prints why and returns nothing.
std::optional<std::vector<krdma_rnic_info>> fetch(const GlobalOptions &global) {
    auto client = ual::DeviceClient::connect(global.device);
    if (!client) {
        std::fprintf(stderr, "rdmactl: %s\n", client.error().message().c_str());
        return std::nullopt;
    }
    std::vector<krdma_rnic_info> out;
    for (uint32_t index = 0;; ++index) {
        krdma_list_rnics q{};
        q.index = index;
        auto r = (*client)->call(KRDMA_CMD_LIST_RNICS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r || r->status != 0 || r->payload.size() != sizeof q) {
            std::fprintf(stderr, "rdmactl: listing RNICs failed: %s\n",
                         r ? std::strerror(r->status) : r.error().message().c_str());
            return std::nullopt;
        }
        std::memcpy(&q, r->payload.data(), sizeof q);
        if (index >= q.count) break;
        out.push_back(q.info);
    }
    return out;
}

nlohmann::json to_json(const krdma_rnic_info &i) {
    return {{"name", i.name},       {"provider", i.provider},     {"vendor", i.vendor},
            {"netdev", i.netdev},   {"address", i.address},       {"state", "attached"},
            {"opens", i.opens},     {"uvp_library", i.uvp_library}};
}

}  // namespace

void add_rnic_commands(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *list = app.add_subcommand("list", "List the RNICs krdmad serves");
    list->callback([&global, &exit_code] {
        auto rnics = fetch(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        if (global.json) {
            nlohmann::json a = nlohmann::json::array();
            for (const auto &r : *rnics) a.push_back(to_json(r));
            std::cout << a.dump(2) << "\n";
            return;
        }
        std::printf("%-16s %-12s %-20s %-8s %-24s %-9s %s\n", "NAME", "PROVIDER", "VENDOR", "NETDEV", "ADDRESS",
                    "STATE", "UVP LIBRARY");
        for (const auto &r : *rnics) {
            std::printf("%-16s %-12s %-20s %-8s %-24s %-9s %s\n", r.name, r.provider, r.vendor, r.netdev, r.address,
                        "attached", r.uvp_library[0] != '\0' ? r.uvp_library : "-");
        }
    });

    auto address = std::make_shared<std::string>();
    CLI::App *show = app.add_subcommand("show", "Show the RNIC that serves a network address");
    show->add_option("address", *address, "IPv4 or IPv6 address")->required();
    show->callback([&global, &exit_code, address] {
        auto rnics = fetch(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        for (const auto &r : *rnics) {
            if (*address == r.address) {
                if (global.json) {
                    std::cout << to_json(r).dump(2) << "\n";
                } else {
                    std::printf("%s\n  provider:    %s (%s)\n  netdev:      %s\n  address:     %s\n"
                                "  state:       attached, %u open(s)\n  uVP library: %s\n",
                                r.name, r.provider, r.vendor, r.netdev, r.address, r.opens,
                                r.uvp_library[0] != '\0' ? r.uvp_library : "-");
                }
                return;
            }
        }
        std::fprintf(stderr, "rdmactl: no RNIC serves %s\n", address->c_str());
        exit_code = 1;
    });
}

}  // namespace rdmactl
