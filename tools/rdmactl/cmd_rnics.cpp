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
            std::fprintf(stderr, "rdmactl: listing RNICs failed: %s\n", failure_text(r, sizeof q).c_str());
            return std::nullopt;
        }
        std::memcpy(&q, r->payload.data(), sizeof q);
        if (index >= q.count) break;
        out.push_back(q.info);
    }
    return out;
}

}  // namespace

// Resource type names in the kAL's order (krdma_client_info::counts, krdma_rnic_info::objects).
constexpr const char *kResourceTypeNames[KRDMA_RESOURCE_TYPES] = {"endpoint", "listener", "mw", "qp",  "srq",
                                                                  "mr",       "cq",       "pd", "rnic"};

nlohmann::json rnic_json(const krdma_rnic_info &i) {
    nlohmann::json j{{"name", i.name},       {"provider", i.provider},     {"vendor", i.vendor},
                     {"netdev", i.netdev},   {"address", i.address},       {"state", "attached"},
                     {"opens", i.opens},     {"uvp_library", i.uvp_library}};
    for (size_t t = 0; t < KRDMA_RESOURCE_TYPES; ++t) j["objects"][kResourceTypeNames[t]] = i.objects[t];
    return j;
}

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
            for (const auto &r : *rnics) a.push_back(rnic_json(r));
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

    CLI::App *res = app.add_subcommand("resources",
                                       "Show what each consumer process and each RNIC holds (objects by type)");
    res->callback([&global, &exit_code] {
        auto client = ual::DeviceClient::connect(global.device);
        if (!client) {
            std::fprintf(stderr, "rdmactl: %s\n", client.error().message().c_str());
            exit_code = 1;
            return;
        }
        nlohmann::json all = nlohmann::json::array();
        for (uint32_t index = 0;; ++index) {
            krdma_list_clients q{};
            q.index = index;
            auto r = (*client)->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
            if (!r || r->status != 0 || r->payload.size() != sizeof q) {
                std::fprintf(stderr, "rdmactl: listing resources failed: %s\n", failure_text(r, sizeof q).c_str());
                exit_code = 1;
                return;
            }
            std::memcpy(&q, r->payload.data(), sizeof q);
            if (index >= q.count) break;
            nlohmann::json j{{"client", q.info.client_id}, {"pid", q.info.pid},     {"uid", q.info.uid},
                             {"total", q.info.total},      {"pinned_bytes", q.info.pinned_bytes}};
            for (size_t t = 0; t < KRDMA_RESOURCE_TYPES; ++t) j["objects"][kResourceTypeNames[t]] = q.info.counts[t];
            all.push_back(j);
        }
        auto rnics = fetch(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        if (global.json) {
            nlohmann::json per_rnic = nlohmann::json::array();
            for (const auto &r : *rnics) {
                nlohmann::json j = rnic_json(r);
                per_rnic.push_back({{"name", j["name"]}, {"opens", j["opens"]}, {"objects", j["objects"]}});
            }
            std::cout << nlohmann::json{{"processes", all}, {"rnics", per_rnic}}.dump(2) << "\n";
            return;
        }
        std::printf("%-7s %-8s %-6s %5s %4s %4s %4s %4s %4s %4s %4s %4s %6s %12s\n", "CLIENT", "PID", "UID", "RNIC",
                    "PD", "CQ", "QP", "SRQ", "MR", "MW", "EP", "LSN", "TOTAL", "PINNED");
        for (const auto &j : all) {
            const auto &o = j["objects"];
            std::printf("%-7u %-8u %-6u %5u %4u %4u %4u %4u %4u %4u %4u %4u %6u %12llu\n", j["client"].get<unsigned>(),
                        j["pid"].get<unsigned>(), j["uid"].get<unsigned>(), o["rnic"].get<unsigned>(),
                        o["pd"].get<unsigned>(), o["cq"].get<unsigned>(), o["qp"].get<unsigned>(),
                        o["srq"].get<unsigned>(), o["mr"].get<unsigned>(), o["mw"].get<unsigned>(),
                        o["endpoint"].get<unsigned>(), o["listener"].get<unsigned>(), j["total"].get<unsigned>(),
                        static_cast<unsigned long long>(j["pinned_bytes"].get<uint64_t>()));
        }
        std::printf("\n%-16s %5s %4s %4s %4s %4s %4s %4s %4s %4s\n", "RNIC", "OPENS", "PD", "CQ", "QP", "SRQ", "MR",
                    "MW", "EP", "LSN");
        for (const auto &r : *rnics) {
            const uint32_t *o = r.objects;  // kAL order: endpoint, listener, mw, qp, srq, mr, cq, pd, rnic
            std::printf("%-16s %5u %4u %4u %4u %4u %4u %4u %4u %4u\n", r.name, r.opens, o[7], o[6], o[3], o[4], o[5],
                        o[2], o[0], o[1]);
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
                    std::cout << rnic_json(r).dump(2) << "\n";
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
