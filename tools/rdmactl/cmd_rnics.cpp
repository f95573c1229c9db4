// rdmactl list / show: the RNICs a running krdmad serves, selected by network address.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "client.hpp"
#include "commands.hpp"
#include "rnicpi/host/loader.hpp"
#include "ual/access_layer.hpp"

namespace rdmactl {

std::optional<std::vector<krdma_rnic_info>> fetch_rnics(const GlobalOptions &global) {
    auto client = ual::DeviceClient::connect(global.device, global.timeout);
    if (!client) {
        std::fprintf(stderr, "rdmactl: %s\n", shown(client.error().message()).c_str());
        return std::nullopt;
    }
    return list_each<krdma_list_rnics>(**client, KRDMA_CMD_LIST_RNICS, "listing RNICs");
}

const krdma_rnic_info *find_rnic(const std::vector<krdma_rnic_info> &rnics, const std::string &name_or_address) {
    for (const auto &r : rnics) {
        if (name_or_address == r.name || name_or_address == r.address) return &r;
    }
    return nullptr;
}

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

namespace {

// The capability bits of Query RNIC, by name.
constexpr std::pair<uint32_t, const char *> kCaps[] = {
    {RI_CAP_SRQ, "srq"},           {RI_CAP_ZERO_BASED, "zero_based"},   {RI_CAP_MW_TYPE1, "mw_type1"},
    {RI_CAP_MW_TYPE2, "mw_type2"}, {RI_CAP_FAST_REG, "fast_reg"},       {RI_CAP_SEND_INV, "send_inv"},
    {RI_CAP_PHYS_MR, "phys_mr"},   {RI_CAP_ATOMICS, "atomics"},         {RI_CAP_MPA_CRC, "mpa_crc"},
    {RI_CAP_MPA_MARKERS, "mpa_markers"}, {RI_CAP_MPA_PEER2PEER, "mpa_peer2peer"}, {RI_CAP_RESIZE_CQ, "resize_cq"},
    {RI_CAP_SHARED_MR, "shared_mr"}};

// What the kernel says of network device @p netdev (sysfs): its state, MTU, speed and hardware address.
nlohmann::json link_json(const std::string &netdev) {
    auto read = [&netdev](const char *attr) {
        std::ifstream in("/sys/class/net/" + netdev + "/" + attr);
        std::string v;
        std::getline(in, v);
        return v;
    };
    auto number = [](const std::string &v) -> nlohmann::json {
        try {
            const long n = std::stol(v);
            return n >= 0 ? nlohmann::json(n) : nlohmann::json(nullptr);
        } catch (...) {
            return nullptr;  // no such attribute, or the device does not say (speed of a virtual device)
        }
    };
    const std::string state = read("operstate");
    return {{"state", state.empty() ? "unknown" : state},
            {"mtu", number(read("mtu"))},
            {"speed_mbps", number(read("speed"))},
            {"mac", read("address")}};
}

// Limits and capabilities as a consumer sees them: the RNIC opened through the uAL (loading its uVP) and queried,
// as ibv_devinfo opens a device.
rdma::Expected<ri_rnic_attr_t> query_rnic(const GlobalOptions &global, const std::string &name) {
    ual::Options o;
    o.device = global.device;  // krdmad's, never an embedded kAL
    o.workers = 1;
    auto al = ual::AccessLayer::open(o);
    if (!al) return al.error();
    rdma::Expected<ri_rnic_attr_t> attr = rdma::Error(RI_EIO, "not queried");
    {
        auto adapter = (*al)->open_adapter(name);
        if (!adapter) return adapter.error();
        attr = (*adapter)->query();
    }  // the adapter goes before its access layer
    return attr;
}

nlohmann::json limits_json(const ri_rnic_attr_t &a) {
    return {{"max_qp", a.max_qp},       {"max_qp_wr", a.max_qp_wr},   {"max_sge", a.max_sge},
            {"max_sge_rd", a.max_sge_rd}, {"max_inline", a.max_inline}, {"max_cq", a.max_cq},
            {"max_cqe", a.max_cqe},     {"max_pd", a.max_pd},         {"max_mr", a.max_mr},
            {"max_mr_size", a.max_mr_size}, {"max_mw", a.max_mw},     {"max_srq", a.max_srq},
            {"max_srq_wr", a.max_srq_wr}, {"max_srq_sge", a.max_srq_sge}, {"max_ird", a.max_ird},
            {"max_ord", a.max_ord},     {"max_fast_reg_pages", a.max_fast_reg_pages},
            {"max_private_data", a.max_private_data}, {"page_size_cap", a.page_size_cap}};
}

// The provider's tunables of RNIC @p name, each {"value", "settable", "help"}: the "tunables" of its reply to the
// empty control request (RNIC-PI ri_module_t::control), which changes nothing and is open to every caller. An
// empty object for a provider that lists none or has no control operation; nothing, and @p why, when there is no
// answer.
std::optional<nlohmann::json> fetch_tunables(const GlobalOptions &global, const std::string &name, std::string &why) {
    auto client = ual::DeviceClient::connect(global.device, global.timeout);
    if (!client) {
        why = client.error().message();
        return std::nullopt;
    }
    krdma_control_rnic q{};
    if (name.size() >= sizeof q.name) {
        why = "the RNIC's name is too long";
        return std::nullopt;
    }
    std::memcpy(q.name, name.data(), name.size());
    std::memcpy(q.text, "{}", 3);
    auto r = (*client)->call(KRDMA_CMD_CONTROL_RNIC, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    if (r && r->status == RI_EOPNOTSUPP) return nlohmann::json::object();  // a provider without control has none
    if (!r || r->status != 0 || r->payload.size() != sizeof q) {
        why = !r ? r.error().message() : !r->reason.empty() ? r->reason : "status " + std::to_string(r->status);
        return std::nullopt;
    }
    std::memcpy(&q, r->payload.data(), sizeof q);
    const nlohmann::json reply = nlohmann::json::parse(std::string(q.text, strnlen(q.text, sizeof q.text)), nullptr,
                                                       false);
    nlohmann::json out = nlohmann::json::object();
    if (!reply.is_object() || !reply.contains("tunables") || !reply["tunables"].is_object()) return out;
    for (const auto &[key, t] : reply["tunables"].items()) {
        if (!t.is_object() || !t.contains("value")) continue;  // not in the RNIC-PI's form
        out[key] = {{"value", t["value"]},
                    {"settable", t.value("settable", false)},
                    {"help", t.contains("help") && t["help"].is_string() ? t["help"] : nlohmann::json("")}};
    }
    return out;
}

// Everything `show` says of one RNIC: what krdmad lists, its module, its netdev's link, its limits and
// capabilities (queried as a consumer), its provider's tunables, and its counters.
nlohmann::json show_json(const GlobalOptions &global, const krdma_rnic_info &r) {
    nlohmann::json j = rnic_json(r);
    if (auto modules = fetch_modules(global)) {
        for (const auto &m : *modules) {
            if (r.provider == std::string(m.provider)) j["module"] = module_info_json(m);
        }
    }
    j["link"] = r.netdev[0] != '\0' ? link_json(r.netdev) : nlohmann::json(nullptr);
    if (auto attr = query_rnic(global, r.name)) {
        j["limits"] = limits_json(*attr);
        nlohmann::json caps = nlohmann::json::array();
        for (const auto &[bit, name] : kCaps) {
            if ((attr->caps & bit) != 0) caps.push_back(name);
        }
        j["capabilities"] = caps;
        j["mpa"] = {{"crc", (attr->caps & RI_CAP_MPA_CRC) != 0},
                    {"markers", (attr->caps & RI_CAP_MPA_MARKERS) != 0},
                    {"peer2peer", (attr->caps & RI_CAP_MPA_PEER2PEER) != 0}};
        j["vendor_id"] = attr->vendor_id;
        j["vendor_part_id"] = attr->vendor_part_id;
        j["hw_version"] = attr->hw_version;
        j["fw_version"] = attr->fw_version;
    } else {
        j["limits"] = nullptr;
        j["limits_error"] = attr.error().message();
    }
    std::string why;
    if (auto t = fetch_tunables(global, r.name, why)) {
        j["tunables"] = std::move(*t);
    } else {
        j["tunables"] = nullptr;
        j["tunables_error"] = why;
    }
    if (auto client = ual::DeviceClient::connect(global.device, global.timeout)) {
        std::vector<krdma_rnic_info> one{r};
        if (auto stats = collect_endpoints(**client, one, r.name); stats && !stats->rnics.empty()) {
            j["counters"] = stats->rnics[0];
            j["counters"].erase("name");
        }
    }
    return j;
}

// A tunable's value as text: a string as it is, anything else as JSON.
std::string value_text(const nlohmann::json &v) { return v.is_string() ? shown(v.get<std::string>()) : v.dump(); }

void print_show(const nlohmann::json &j, bool verbose) {
    auto text = [&j](const char *k) { return j.contains(k) && j[k].is_string() ? shown(j[k].get<std::string>()) : "-"; };
    std::printf("%s\n", text("name").c_str());
    std::printf("  provider:      %s (%s)", text("provider").c_str(), text("vendor").c_str());
    if (j.contains("module")) {
        std::printf(", version %s, RNIC-PI ABI %s", shown(j["module"]["version"].get<std::string>()).c_str(),
                    j["module"]["abi_version"].get<std::string>().c_str());
    }
    std::printf("\n  address:       %s\n  netdev:        %s", text("address").c_str(), text("netdev").c_str());
    if (!j["link"].is_null()) {
        const auto &l = j["link"];
        std::printf(" (link %s", l["state"].get<std::string>().c_str());
        if (!l["mtu"].is_null()) std::printf(", MTU %ld", l["mtu"].get<long>());
        if (!l["speed_mbps"].is_null()) std::printf(", %ld Mb/s", l["speed_mbps"].get<long>());
        std::printf(")");
    }
    std::printf("\n  state:         attached, %u open(s)\n  uVP library:   %s\n", j["opens"].get<unsigned>(),
                text("uvp_library").c_str());
    if (j["limits"].is_null()) {
        std::printf("  limits:        not available: %s\n", text("limits_error").c_str());
    } else {
        std::string caps;
        for (const auto &c : j["capabilities"]) caps += (caps.empty() ? "" : " ") + c.get<std::string>();
        std::printf("  capabilities:  %s\n", caps.empty() ? "-" : caps.c_str());
        const auto &m = j["mpa"];
        std::printf("  MPA:           CRC %s, markers %s, peer-to-peer (RFC 6581) %s\n", m["crc"] ? "yes" : "no",
                    m["markers"] ? "yes" : "no", m["peer2peer"] ? "yes" : "no");
        std::printf("  limits:\n");
        for (const auto &[k, v] : j["limits"].items()) {
            std::printf("    %-20s %llu\n", k.c_str(), v.get<unsigned long long>());
        }
    }
    if (j["tunables"].is_null()) {
        std::printf("  tunables:      not available: %s\n", text("tunables_error").c_str());
    } else if (j["tunables"].empty()) {
        std::printf("  tunables:      none\n");
    } else {
        std::printf("  tunables:      (settable: rdmactl control %s '{\"NAME\": VALUE}'; the others at attach)\n",
                    text("name").c_str());
        for (const auto &[k, t] : j["tunables"].items()) {
            std::printf("    %-20s %-12s %s\n", shown(k).c_str(), value_text(t["value"]).c_str(),
                        t["settable"].get<bool>() ? "settable" : "attach only");
            if (verbose && !t["help"].get<std::string>().empty()) {
                std::printf("      %s\n", shown(t["help"].get<std::string>()).c_str());
            }
        }
    }
    std::printf("  objects:      ");
    for (const auto &[k, v] : j["objects"].items()) std::printf(" %s %u", k.c_str(), v.get<unsigned>());
    std::printf("\n");
    if (j.contains("counters")) {
        const auto &c = j["counters"];
        std::printf("  counters:      endpoints %llu, bytes out %llu, in %llu, retransmissions %llu, CRC errors %llu\n",
                    c["endpoints"].get<unsigned long long>(), c["bytes_sent"].get<unsigned long long>(),
                    c["bytes_received"].get<unsigned long long>(), c["retransmissions"].get<unsigned long long>(),
                    c["rdma"]["crc_errors"].get<unsigned long long>());
    }
}

}  // namespace

void add_rnic_commands(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *list = app.add_subcommand("list", "List the RNICs krdmad serves");
    list->callback([&global, &exit_code] {
        auto rnics = fetch_rnics(global);
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
            std::printf("%-16s %-12s %-20s %-8s %-24s %-9s %s\n", shown(r.name).c_str(), shown(r.provider).c_str(),
                        shown(r.vendor).c_str(), shown(r.netdev).c_str(), shown(r.address).c_str(), "attached",
                        r.uvp_library[0] != '\0' ? shown(r.uvp_library).c_str() : "-");
        }
    });

    CLI::App *res = app.add_subcommand("resources",
                                       "Show what each consumer process and each RNIC holds (objects by type)");
    struct Filter {
        uint32_t pid = 0;
        std::string rnic, type;
    };
    auto filter = std::make_shared<Filter>();
    res->add_option("--pid", filter->pid, "Only this consumer process");
    res->add_option("--rnic", filter->rnic, "Only this RNIC (by name or address)");
    res->add_option("--type", filter->type, "Only processes holding objects of this type")
        ->check(CLI::IsMember({"endpoint", "listener", "mw", "qp", "srq", "mr", "cq", "pd", "rnic"}));
    res->callback([&global, &exit_code, filter] {
        auto client = ual::DeviceClient::connect(global.device, global.timeout);
        if (!client) {
            std::fprintf(stderr, "rdmactl: %s\n", shown(client.error().message()).c_str());
            exit_code = 1;
            return;
        }
        auto clients = list_each<krdma_list_clients>(**client, KRDMA_CMD_LIST_CLIENTS, "listing resources");
        if (!clients) {
            exit_code = 1;
            return;
        }
        nlohmann::json all = nlohmann::json::array();
        for (const krdma_client_info &info : *clients) {
            nlohmann::json j{{"client", info.client_id}, {"pid", info.pid},     {"uid", info.uid},
                             {"total", info.total},      {"pinned_bytes", info.pinned_bytes}};
            for (size_t t = 0; t < KRDMA_RESOURCE_TYPES; ++t) j["objects"][kResourceTypeNames[t]] = info.counts[t];
            if (filter->pid != 0 && info.pid != filter->pid) continue;
            if (!filter->type.empty() && j["objects"][filter->type].get<uint32_t>() == 0) continue;
            all.push_back(j);
        }
        auto listed = fetch_rnics(global);
        if (!listed) {
            exit_code = 1;
            return;
        }
        auto rnics = listed;
        if (!filter->rnic.empty()) {
            const krdma_rnic_info *r = find_rnic(*listed, filter->rnic);
            if (r == nullptr) {
                std::fprintf(stderr, "rdmactl: no RNIC named or serving %s\n", shown(filter->rnic).c_str());
                exit_code = 1;
                return;
            }
            rnics = std::vector<krdma_rnic_info>{*r};
        }
        // Each endpoint with its path (same host or wire), of the processes and the RNIC shown.
        auto collected = collect_endpoints(**client, *listed, filter->rnic);
        if (!collected) {
            exit_code = 1;
            return;
        }
        std::map<uint32_t, uint32_t> pid_of;
        for (const krdma_client_info &info : *clients) pid_of[info.client_id] = info.pid;
        nlohmann::json endpoints = nlohmann::json::array();
        for (const auto &e : collected->endpoints) {
            auto it = pid_of.find(e["client"].get<uint32_t>());
            if (filter->pid != 0 && (it == pid_of.end() || it->second != filter->pid)) continue;
            endpoints.push_back({{"client", e["client"]},
                                 {"pid", it != pid_of.end() ? nlohmann::json(it->second) : nlohmann::json(nullptr)},
                                 {"qp_num", e["qp_num"]},
                                 {"rnic", e["rnic"]},
                                 {"state", e["state"]},
                                 {"local", e["local"]},
                                 {"remote", e["remote"]},
                                 {"path", e["path"]}});
        }
        if (global.json) {
            nlohmann::json per_rnic = nlohmann::json::array();
            for (const auto &r : *rnics) {
                nlohmann::json j = rnic_json(r);
                per_rnic.push_back({{"name", j["name"]}, {"opens", j["opens"]}, {"objects", j["objects"]}});
            }
            std::cout << nlohmann::json{{"processes", all}, {"rnics", per_rnic}, {"endpoints", endpoints}}.dump(2)
                      << "\n";
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
            std::printf("%-16s %5u %4u %4u %4u %4u %4u %4u %4u %4u\n", shown(r.name).c_str(), r.opens, o[7], o[6], o[3], o[4], o[5],
                        o[2], o[0], o[1]);
        }
        if (!endpoints.empty()) {
            std::printf("\n%-7s %-8s %-7s %-16s %-13s %-22s %-22s %s\n", "CLIENT", "PID", "QPN", "RNIC", "STATE",
                        "LOCAL", "REMOTE", "PATH");
            for (const auto &e : endpoints) {
                std::printf("%-7u %-8s %-7u %-16s %-13s %-22s %-22s %s\n", e["client"].get<unsigned>(),
                            e["pid"].is_null() ? "-" : std::to_string(e["pid"].get<unsigned>()).c_str(),
                            e["qp_num"].get<unsigned>(), shown(e["rnic"].get<std::string>()).c_str(),
                            e["state"].get<std::string>().c_str(), e["local"].get<std::string>().c_str(),
                            e["remote"].get<std::string>().c_str(), e["path"].get<std::string>().c_str());
            }
        }
    });

    auto which = std::make_shared<std::string>();
    auto verbose = std::make_shared<bool>(false);
    CLI::App *show = app.add_subcommand("show", "Show an RNIC, by name or by an address it serves: provider, link, "
                                                "limits, capabilities, tunables, counters");
    show->add_option("rnic", *which, "RNIC name, or an IPv4 or IPv6 address it serves")->required();
    show->add_flag("-v,--verbose", *verbose, "Explain each tunable (its help; --json always has it)");
    show->callback([&global, &exit_code, which, verbose] {
        auto rnics = fetch_rnics(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        const krdma_rnic_info *r = find_rnic(*rnics, *which);
        if (r == nullptr) {
            std::fprintf(stderr, "rdmactl: no RNIC named or serving %s\n", shown(*which).c_str());
            exit_code = 1;
            return;
        }
        const nlohmann::json j = show_json(global, *r);
        if (global.json) {
            std::cout << j.dump(2) << "\n";
        } else {
            print_show(j, *verbose);
        }
    });
}

}  // namespace rdmactl
