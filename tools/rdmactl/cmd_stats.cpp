// rdmactl stats: LLP management's counters, every endpoint with the TCP statistics of its connection, totals per
// RNIC, and the host's TCP MIB (RFC 4022 names), in one view.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>

#include "client.hpp"
#include "commands.hpp"
#include "tcp_stats.hpp"

namespace rdmactl {
namespace {

const char *ep_state_name(uint32_t s) {
    switch (s) {
        case KRDMA_EP_IDLE: return "idle";
        case KRDMA_EP_CONNECTING: return "connecting";
        case KRDMA_EP_CONNECTED: return "connected";
        case KRDMA_EP_DISCONNECTING: return "disconnecting";
        case KRDMA_EP_DISCONNECTED: return "disconnected";
        case KRDMA_EP_ERROR: return "error";
        default: return "?";
    }
}


// The data path's counters of one QP (the kVP's query_qp_stats), by the names both views use.
nlohmann::json rdma_json(const ri_qp_stats_t &s) {
    return {{"bytes_sent", s.tx_bytes},       {"bytes_received", s.rx_bytes},
            {"fpdus_sent", s.tx_fpdus},       {"fpdus_received", s.rx_fpdus},
            {"crc_errors", s.crc_errors},     {"terminates_sent", s.terminates_sent},
            {"terminates_received", s.terminates_received}, {"nudges", s.nudges}};
}


// Zero totals of one RNIC, as stats and show print them.
nlohmann::json zero_totals() {
    nlohmann::json r{{"endpoints", 0}, {"bytes_sent", 0}, {"bytes_received", 0}, {"retransmissions", 0}};
    r["rdma"] = rdma_json(ri_qp_stats_t{});
    return r;
}

}  // namespace

const char *endpoint_path(const ri_llp_params_t &llp) noexcept {
    return (llp.mpa_flags & RI_LLP_SAME_HOST) != 0 ? "same-host" : "wire";
}

std::optional<EndpointStats> collect_endpoints(ual::DeviceClient &client, const std::vector<krdma_rnic_info> &rnics,
                                               const std::string &rnic) {
    // The RNIC by name (an address selects its RNIC's name).
    std::string only;
    if (!rnic.empty()) {
        const krdma_rnic_info *r = find_rnic(rnics, rnic);
        if (r == nullptr) return std::nullopt;
        only = r->name;
    }
    nlohmann::json eps = nlohmann::json::array();
    std::map<std::string, nlohmann::json> per_rnic;
    auto listed = list_each<krdma_list_endpoints>(client, KRDMA_CMD_LIST_ENDPOINTS, "listing endpoints");
    if (!listed) return std::nullopt;
    for (const krdma_endpoint_info &i : *listed) {
        if (!only.empty() && only != i.rnic) continue;
        nlohmann::json e{{"client", i.client_id},
                         {"qp_num", i.qp_num},
                         {"rnic", i.rnic},
                         {"state", ep_state_name(i.state)},
                         {"local", i.local},
                         {"remote", i.remote},
                         {"path", endpoint_path(i.llp)},
                         {"tcp_state", std::string(kal::llp::tcp_state_name(static_cast<uint8_t>(i.tcp_state)))},
                         {"mpa", {{"revision", i.llp.mpa_revision},
                                  {"crc", (i.llp.mpa_flags & RI_MPA_CRC) != 0},
                                  {"markers", (i.llp.mpa_flags & RI_MPA_MARKERS) != 0},
                                  {"peer2peer", (i.llp.mpa_flags & RI_MPA_PEER2PEER) != 0},
                                  {"ird", i.llp.ird},
                                  {"ord", i.llp.ord},
                                  {"fpdu_max", i.llp.fpdu_max}}},
                         {"bytes_sent", i.bytes_sent},
                         {"bytes_received", i.bytes_received},
                         {"segments_out", i.segs_out},
                         {"segments_in", i.segs_in},
                         {"retransmissions", i.retransmits},
                         {"rtt_us", i.rtt_us},
                         {"cwnd", i.snd_cwnd},
                         {"rdma", rdma_json(i.rdma)}};
        nlohmann::json &r = per_rnic[i.rnic];
        if (r.is_null()) r = zero_totals();
        r["endpoints"] = r["endpoints"].get<uint64_t>() + 1;
        r["bytes_sent"] = r["bytes_sent"].get<uint64_t>() + i.bytes_sent;
        r["bytes_received"] = r["bytes_received"].get<uint64_t>() + i.bytes_received;
        r["retransmissions"] = r["retransmissions"].get<uint64_t>() + i.retransmits;
        const nlohmann::json counters = e["rdma"];
        nlohmann::json &sum = r["rdma"];
        if (sum.is_null()) sum = nlohmann::json::object();
        for (const auto &[k, v] : counters.items()) {
            sum[k] = (sum.contains(k) ? sum[k].get<uint64_t>() : 0) + v.get<uint64_t>();
        }
        eps.push_back(std::move(e));
    }
    EndpointStats out;
    out.endpoints = std::move(eps);
    out.rnics = nlohmann::json::array();
    // Every attached RNIC, with zeros when it has no endpoint; then any an endpoint names that is gone since.
    for (const krdma_rnic_info &r : rnics) {
        if (!only.empty() && only != r.name) continue;
        auto it = per_rnic.find(r.name);
        nlohmann::json j = it != per_rnic.end() ? it->second : zero_totals();
        j["name"] = r.name;
        out.rnics.push_back(std::move(j));
        if (it != per_rnic.end()) per_rnic.erase(it);
    }
    for (auto &[name, j] : per_rnic) {
        j["name"] = name;
        out.rnics.push_back(std::move(j));
    }
    return out;
}

void add_stats_command(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    CLI::App *stats = app.add_subcommand(
        "stats", "Show connection statistics: LLP counters, endpoints with their TCP counters, per-RNIC totals and "
                 "the host's TCP MIB");
    auto rnic = std::make_shared<std::string>();
    auto pid = std::make_shared<uint32_t>(0);
    stats->add_option("--rnic", *rnic, "Only this RNIC (by name or address): its endpoints and totals");
    stats->add_option("--pid", *pid, "Only the endpoints of this consumer process (the RNICs' totals stay whole)");
    stats->callback([&global, &exit_code, rnic, pid] {
        auto rnics = fetch_rnics(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        if (!rnic->empty() && !find_rnic(*rnics, *rnic)) {
            std::fprintf(stderr, "rdmactl: no RNIC named or serving %s\n", shown(*rnic).c_str());
            exit_code = 1;
            return;
        }
        auto client = ual::DeviceClient::connect(global.device, global.timeout);
        if (!client) {
            std::fprintf(stderr, "rdmactl: %s\n", shown(client.error().message()).c_str());
            exit_code = 1;
            return;
        }
        krdma_llp_counters c{};
        if (!ask(**client, KRDMA_CMD_LLP_COUNTERS, c, "LLP counters")) {
            exit_code = 1;
            return;
        }
        nlohmann::json llp{{"ActiveOpens", c.active_opens},     {"PassiveOpens", c.passive_opens},
                           {"Established", c.established},      {"Rejected", c.rejected},
                           {"PeerRejected", c.peer_rejected},   {"SetupFailures", c.failed},
                           {"SetupTimeouts", c.timeouts},       {"PeerDisconnects", c.peer_disconnects},
                           {"Resets", c.resets},                {"ListenPoints", c.listen_points},
                           {"PendingRequests", c.pending_requests}};
        // Where setups spent their time inside krdmad (protocol 1.5; zero from an older krdmad): mean microseconds
        // per active or passive setup since krdmad started.
        auto mean_us = [](uint64_t ns, uint64_t n) { return n == 0 ? 0.0 : static_cast<double>(ns) / 1e3 / static_cast<double>(n); };
        const nlohmann::json setup{{"tcp_connect", mean_us(c.tcp_connect_ns, c.active_opens)},
                                   {"mpa_active", mean_us(c.mpa_active_ns, c.active_opens)},
                                   {"request", mean_us(c.request_ns, c.passive_opens)},
                                   {"decision", mean_us(c.decision_ns, c.passive_opens)},
                                   {"accept", mean_us(c.accept_ns, c.passive_opens)}};
        auto collected = collect_endpoints(**client, *rnics, *rnic);
        if (!collected) {
            exit_code = 1;
            return;
        }
        // Each endpoint's process, from the kAL's list of device connections.
        auto clients = list_each<krdma_list_clients>(**client, KRDMA_CMD_LIST_CLIENTS, "listing clients");
        if (!clients) {
            exit_code = 1;
            return;
        }
        std::map<uint32_t, uint32_t> pid_of;
        for (const krdma_client_info &info : *clients) pid_of[info.client_id] = info.pid;
        nlohmann::json eps = nlohmann::json::array();
        for (auto &e : collected->endpoints) {
            auto it = pid_of.find(e["client"].get<uint32_t>());
            e["pid"] = it != pid_of.end() ? nlohmann::json(it->second) : nlohmann::json(nullptr);
            if (*pid != 0 && (it == pid_of.end() || it->second != *pid)) continue;
            eps.push_back(e);
        }
        const nlohmann::json &rnics_json = collected->rnics;
        nlohmann::json host = nlohmann::json::object();
        if (auto m = kal::llp::host_tcp_counters()) {
            for (const auto &mc : *m) host[mc.name] = mc.value;
        }
        if (global.json) {
            std::cout << nlohmann::json{{"llp", llp},          {"setup_us", setup}, {"rnics", rnics_json},
                                        {"endpoints", eps},    {"host_tcp", host}}
                             .dump(2)
                      << "\n";
            return;
        }
        std::printf("LLP management (since krdmad started)\n");
        for (const auto &[k, v] : llp.items()) std::printf("  %-18s %llu\n", k.c_str(), v.get<unsigned long long>());
        std::printf("  setup steps, mean us: TCP connect %.1f, MPA (active) %.1f; request %.1f, decision %.1f, "
                    "accept %.1f (passive)\n",
                    setup["tcp_connect"].get<double>(), setup["mpa_active"].get<double>(), setup["request"].get<double>(),
                    setup["decision"].get<double>(), setup["accept"].get<double>());
        std::printf("\nEndpoints\n  %-6s %-7s %-10s %-13s %-22s %-22s %-9s %12s %12s %7s %7s\n", "CLIENT", "QPN",
                    "RNIC", "STATE", "LOCAL", "REMOTE", "PATH", "BYTES OUT", "BYTES IN", "RETRANS", "RTT us");
        for (const auto &e : eps) {
            std::printf("  %-6u %-7u %-10s %-13s %-22s %-22s %-9s %12llu %12llu %7llu %7u\n",
                        e["client"].get<unsigned>(), e["qp_num"].get<unsigned>(),
                        shown(e["rnic"].get<std::string>()).c_str(), e["state"].get<std::string>().c_str(),
                        e["local"].get<std::string>().c_str(), e["remote"].get<std::string>().c_str(),
                        e["path"].get<std::string>().c_str(), e["bytes_sent"].get<unsigned long long>(),
                        e["bytes_received"].get<unsigned long long>(), e["retransmissions"].get<unsigned long long>(),
                        e["rtt_us"].get<unsigned>());
        }
        std::printf("\nRDMA data path (per QP)\n  %-6s %-7s %12s %12s %10s %10s %6s %8s %8s %6s\n", "CLIENT", "QPN",
                    "BYTES OUT", "BYTES IN", "FPDUS OUT", "FPDUS IN", "CRC", "TERM OUT", "TERM IN", "NUDGES");
        for (const auto &e : eps) {
            const auto &d = e["rdma"];
            std::printf("  %-6u %-7u %12llu %12llu %10llu %10llu %6llu %8llu %8llu %6llu\n", e["client"].get<unsigned>(),
                        e["qp_num"].get<unsigned>(), d["bytes_sent"].get<unsigned long long>(),
                        d["bytes_received"].get<unsigned long long>(), d["fpdus_sent"].get<unsigned long long>(),
                        d["fpdus_received"].get<unsigned long long>(), d["crc_errors"].get<unsigned long long>(),
                        d["terminates_sent"].get<unsigned long long>(),
                        d["terminates_received"].get<unsigned long long>(), d["nudges"].get<unsigned long long>());
        }
        std::printf("\nPer RNIC\n");
        for (const auto &j : rnics_json) {
            const std::string name = j["name"].get<std::string>();
            std::printf("  %-10s endpoints %llu, bytes out %llu, bytes in %llu, retransmissions %llu\n", shown(name).c_str(),
                        j["endpoints"].get<unsigned long long>(), j["bytes_sent"].get<unsigned long long>(),
                        j["bytes_received"].get<unsigned long long>(), j["retransmissions"].get<unsigned long long>());
            const auto &d = j["rdma"];
            std::printf("  %-10s RDMA: FPDUs out %llu, in %llu, payload out %llu, in %llu, CRC errors %llu, "
                        "Terminates out %llu, in %llu, nudges %llu\n",
                        "", d["fpdus_sent"].get<unsigned long long>(), d["fpdus_received"].get<unsigned long long>(),
                        d["bytes_sent"].get<unsigned long long>(), d["bytes_received"].get<unsigned long long>(),
                        d["crc_errors"].get<unsigned long long>(), d["terminates_sent"].get<unsigned long long>(),
                        d["terminates_received"].get<unsigned long long>(), d["nudges"].get<unsigned long long>());
        }
        std::printf("\nHost TCP (RFC 4022 tcp group, TcpExt)\n");
        for (const auto &[k, v] : host.items()) std::printf("  %-20s %lld\n", k.c_str(), v.get<long long>());
    });
}

}  // namespace rdmactl
