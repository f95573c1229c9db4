// TCP statistics: TCP_INFO per connection and the host's TCP MIB from procfs.
#include "tcp_stats.hpp"

#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace kal::llp {
namespace {

// RFC 4022 tcp group objects Linux keeps in /proc/net/snmp, in the order of the MIB.
constexpr std::array<std::string_view, 10> kTcpCounters = {"ActiveOpens", "PassiveOpens", "AttemptFails",
                                                           "EstabResets", "CurrEstab",    "InSegs",
                                                           "OutSegs",     "RetransSegs",  "InErrs",
                                                           "OutRsts"};
// Linux extensions worth showing next to them: why segments were retransmitted and connections aborted.
constexpr std::array<std::string_view, 7> kTcpExtCounters = {"TCPTimeouts",         "TCPLossProbes",
                                                             "TCPFastRetrans",      "TCPSlowStartRetrans",
                                                             "TCPLostRetransmit",   "TCPAbortOnTimeout",
                                                             "TCPAbortOnData"};

struct Section {
    std::vector<std::string_view> names;
    std::vector<int64_t> values;
    [[nodiscard]] std::optional<int64_t> find(std::string_view name) const {
        auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) return std::nullopt;
        return values[static_cast<size_t>(it - names.begin())];
    }
};

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    while (!s.empty()) {
        size_t at = s.find(sep);
        out.push_back(s.substr(0, at));
        if (at == std::string_view::npos) break;
        s.remove_prefix(at + 1);
    }
    return out;
}

std::vector<std::string_view> fields(std::string_view s) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
        size_t start = i;
        while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
        if (i > start) out.push_back(s.substr(start, i - start));
    }
    return out;
}

rdma::Error malformed(std::string_view file, size_t line, const std::string &why) {
    return rdma::Error(RI_EPROTO, std::string(file) + " line " + std::to_string(line) + ": " + why);
}

// The section whose lines start with "<prefix>:": exactly a header line and the value line right after it.
rdma::Expected<std::optional<Section>> find_section(std::string_view text, std::string_view prefix,
                                                    std::string_view file) {
    std::vector<std::string_view> lines = split(text, '\n');
    std::vector<size_t> at;
    for (size_t i = 0; i < lines.size(); ++i) {
        std::string_view l = lines[i];
        if (l.size() > prefix.size() && l.substr(0, prefix.size()) == prefix && l[prefix.size()] == ':') at.push_back(i);
    }
    if (at.empty()) return std::optional<Section>{};
    if (at.size() != 2 || at[1] != at[0] + 1) {
        return malformed(file, at[0] + 1, "section " + std::string(prefix) +
                                              " must be one header line and, right after it, one value line");
    }
    Section s;
    s.names = fields(lines[at[0]].substr(prefix.size() + 1));
    std::vector<std::string_view> raw = fields(lines[at[1]].substr(prefix.size() + 1));
    if (s.names.empty() || s.names.size() != raw.size()) {
        return malformed(file, at[1] + 1, std::to_string(s.names.size()) + " names but " +
                                              std::to_string(raw.size()) + " values in section " + std::string(prefix));
    }
    for (size_t i = 0; i < raw.size(); ++i) {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(raw[i].data(), raw[i].data() + raw[i].size(), v);
        if (ec != std::errc{} || end != raw[i].data() + raw[i].size()) {
            return malformed(file, at[1] + 1, "value \"" + std::string(raw[i]) + "\" of " + std::string(s.names[i]) +
                                                  " is not a whole decimal number");
        }
        if (std::find(s.names.begin(), s.names.begin() + static_cast<std::ptrdiff_t>(i), s.names[i]) !=
            s.names.begin() + static_cast<std::ptrdiff_t>(i)) {
            return malformed(file, at[0] + 1, "counter " + std::string(s.names[i]) + " appears twice");
        }
        s.values.push_back(v);
    }
    return std::optional<Section>(std::move(s));
}

rdma::Expected<std::string> read_file(const char *path) {
    std::ifstream in(path);
    if (!in) return rdma::Error(errno != 0 ? errno : RI_EIO, std::string("cannot read ") + path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

rdma::Expected<TcpInfo> tcp_info_of(int fd) {
    tcp_info raw{};
    socklen_t len = sizeof(raw);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &raw, &len) != 0) {
        int e = errno;
        return rdma::Error(e, std::string("TCP_INFO: ") + std::strerror(e));
    }
    TcpInfo t;
    t.state = raw.tcpi_state;
    t.rtt_us = raw.tcpi_rtt;
    t.rttvar_us = raw.tcpi_rttvar;
    t.min_rtt_us = raw.tcpi_min_rtt;
    t.rto_us = raw.tcpi_rto;
    t.snd_mss = raw.tcpi_snd_mss;
    t.rcv_mss = raw.tcpi_rcv_mss;
    t.pmtu = raw.tcpi_pmtu;
    t.snd_cwnd = raw.tcpi_snd_cwnd;
    t.snd_ssthresh = raw.tcpi_snd_ssthresh;
    t.unacked = raw.tcpi_unacked;
    t.lost = raw.tcpi_lost;
    t.retransmits = raw.tcpi_retransmits;
    t.probes = raw.tcpi_probes;
    t.total_retrans = raw.tcpi_total_retrans;
    t.bytes_sent = raw.tcpi_bytes_sent;
    t.bytes_retrans = raw.tcpi_bytes_retrans;
    t.bytes_acked = raw.tcpi_bytes_acked;
    t.bytes_received = raw.tcpi_bytes_received;
    t.segs_out = raw.tcpi_segs_out;
    t.segs_in = raw.tcpi_segs_in;
    t.data_segs_out = raw.tcpi_data_segs_out;
    t.data_segs_in = raw.tcpi_data_segs_in;
    t.delivered = raw.tcpi_delivered;
    t.delivery_rate = raw.tcpi_delivery_rate;
    t.snd_wnd = raw.tcpi_snd_wnd;
    return t;
}

std::string_view tcp_state_name(uint8_t state) noexcept {
    switch (state) {  // values of the kernel's enum, read from TCP_INFO
        case 1: return "ESTABLISHED";
        case 2: return "SYN_SENT";
        case 3: return "SYN_RECV";
        case 4: return "FIN_WAIT1";
        case 5: return "FIN_WAIT2";
        case 6: return "TIME_WAIT";
        case 7: return "CLOSE";
        case 8: return "CLOSE_WAIT";
        case 9: return "LAST_ACK";
        case 10: return "LISTEN";
        case 11: return "CLOSING";
        default: return "UNKNOWN";
    }
}

rdma::Expected<std::vector<MibCounter>> parse_tcp_counters(std::string_view snmp, std::string_view netstat) {
    auto tcp = find_section(snmp, "Tcp", "/proc/net/snmp");
    if (!tcp) return tcp.error();
    if (!tcp->has_value()) return rdma::Error(RI_EPROTO, "/proc/net/snmp: no Tcp section");
    auto ext = find_section(netstat, "TcpExt", "/proc/net/netstat");
    if (!ext) return ext.error();

    std::vector<MibCounter> out;
    out.reserve(kTcpCounters.size() + kTcpExtCounters.size());
    for (std::string_view name : kTcpCounters) {
        auto v = (*tcp)->find(name);
        if (!v) return rdma::Error(RI_EPROTO, "/proc/net/snmp: the Tcp section has no " + std::string(name));
        out.push_back(MibCounter{std::string(name), *v});
    }
    if (ext->has_value()) {
        for (std::string_view name : kTcpExtCounters) {
            if (auto v = (*ext)->find(name)) out.push_back(MibCounter{std::string(name), *v});
        }
    }
    return out;
}

rdma::Expected<std::vector<MibCounter>> host_tcp_counters() {
    auto snmp = read_file("/proc/net/snmp");
    if (!snmp) return snmp.error();
    auto netstat = read_file("/proc/net/netstat");
    if (!netstat) return netstat.error();
    return parse_tcp_counters(*snmp, *netstat);
}

}  // namespace kal::llp
