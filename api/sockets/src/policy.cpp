// The sockets layer's policy: which programs, addresses and ports are accelerated.
#include "policy.hpp"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace openrdma::sockets {
namespace {

rdma::Error bad(const std::string &what) { return rdma::Error(RI_EINVAL, "sockets policy: " + what); }

// "22", "1024-65535", "80,443,5000-5100".
rdma::Expected<std::vector<std::pair<uint16_t, uint16_t>>> parse_ports(const std::string &text) {
    std::vector<std::pair<uint16_t, uint16_t>> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) return bad("an empty port in \"" + text + "\"");
        const auto dash = item.find('-');
        char *end = nullptr;
        const long lo = std::strtol(item.c_str(), &end, 10);
        long hi = lo;
        if (dash != std::string::npos) {
            if (end != item.c_str() + dash) return bad("a port range is LOW-HIGH: \"" + item + "\"");
            hi = std::strtol(item.c_str() + dash + 1, &end, 10);
        }
        if (*end != '\0' || lo < 0 || hi > 65535 || lo > hi) return bad("not a port or port range: \"" + item + "\"");
        out.emplace_back(static_cast<uint16_t>(lo), static_cast<uint16_t>(hi));
    }
    return out;
}

rdma::Expected<void> parse_prefix(const std::string &text, Policy::Rule &r) {
    const auto slash = text.find('/');
    const std::string addr = text.substr(0, slash);
    if (::inet_pton(AF_INET, addr.c_str(), r.net.data()) == 1) {
        r.family = AF_INET;
    } else if (::inet_pton(AF_INET6, addr.c_str(), r.net.data()) == 1) {
        r.family = AF_INET6;
    } else {
        return bad("not an IPv4 or IPv6 address: \"" + addr + "\"");
    }
    const unsigned max = r.family == AF_INET ? 32 : 128;
    r.prefix = max;
    if (slash != std::string::npos) {
        char *end = nullptr;
        const long p = std::strtol(text.c_str() + slash + 1, &end, 10);
        if (*end != '\0' || p < 0 || p > static_cast<long>(max)) return bad("a bad prefix length in \"" + text + "\"");
        r.prefix = static_cast<unsigned>(p);
    }
    r.any_address = false;
    return {};
}

bool prefix_matches(const Policy::Rule &r, const uint8_t *a) {
    unsigned bits = r.prefix;
    for (size_t i = 0; bits > 0; ++i) {
        const unsigned take = bits >= 8 ? 8 : bits;
        const uint8_t mask = static_cast<uint8_t>(0xff00u >> take);
        if ((a[i] & mask) != (r.net[i] & mask)) return false;
        bits -= take;
    }
    return true;
}

std::vector<std::string> names(const nlohmann::json &j, const char *key) {
    std::vector<std::string> out;
    if (!j.contains(key)) return out;
    for (const auto &n : j.at(key)) out.push_back(n.get<std::string>());
    return out;
}

}  // namespace

std::string program_name() {
    char path[4096];
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return {};
    path[n] = '\0';
    const char *slash = std::strrchr(path, '/');
    return slash != nullptr ? slash + 1 : path;
}

rdma::Expected<Policy> Policy::parse(const std::string &json) {
    Policy p;
    try {
        const auto j = nlohmann::json::parse(json);
        if (!j.is_object()) return bad("the policy is a JSON object");
        for (const auto &[k, v] : j.items()) {
            if (k != "enabled" && k != "programs" && k != "rules" && k != "default") return bad("unknown key \"" + k + "\"");
        }
        p.enabled_ = j.value("enabled", true);
        const std::string def = j.value("default", std::string("rdma"));
        if (def != "rdma" && def != "tcp") return bad("\"default\" is \"rdma\" or \"tcp\", not \"" + def + "\"");
        p.default_rdma_ = def == "rdma";
        if (j.contains("programs")) {
            const auto &pr = j.at("programs");
            p.include_ = names(pr, "include");
            p.exclude_ = names(pr, "exclude");
        }
        if (j.contains("rules")) {
            size_t i = 0;
            for (const auto &jr : j.at("rules")) {
                ++i;
                Rule r;
                const std::string action = jr.value("action", std::string());
                if (action != "rdma" && action != "tcp") {
                    return bad("rule " + std::to_string(i) + ": \"action\" is \"rdma\" or \"tcp\"");
                }
                r.rdma = action == "rdma";
                if (jr.contains("addresses")) {
                    if (auto ok = parse_prefix(jr.at("addresses").get<std::string>(), r); !ok) return ok.error();
                }
                if (jr.contains("ports")) {
                    const auto &jp = jr.at("ports");
                    auto ports = parse_ports(jp.is_number() ? std::to_string(jp.get<int>()) : jp.get<std::string>());
                    if (!ports) return ports.error();
                    r.ports = std::move(*ports);
                }
                r.text = "rule " + std::to_string(i) + " (" + jr.dump() + ")";
                p.rules_.push_back(std::move(r));
            }
        }
    } catch (const nlohmann::json::exception &e) {
        return bad(e.what());
    }
    return p;
}

rdma::Expected<Policy> Policy::load() {
    Policy p;
    if (const char *sw = std::getenv("OPENRDMA_SOCKETS"); sw != nullptr) {
        if (std::strcmp(sw, "off") == 0 || std::strcmp(sw, "0") == 0) {
            p.enabled_ = false;
            return p;
        }
    }
    std::string text;
    std::string where = kPolicyFile;
    if (const char *env = std::getenv("OPENRDMA_SOCKETS_POLICY"); env != nullptr && *env != '\0') {
        if (env[0] == '{') {
            text = env;
            where = "OPENRDMA_SOCKETS_POLICY";
        } else {
            where = env;
        }
    }
    if (text.empty()) {
        std::ifstream in(where);
        if (!in) {
            if (where != kPolicyFile) return bad("cannot read " + where);
            return p;  // no file: everything accelerated
        }
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    }
    auto parsed = parse(text);
    if (!parsed) return rdma::Error(parsed.error().code(), where + ": " + parsed.error().message());
    p = std::move(*parsed);
    const std::string me = program_name();
    for (const auto &x : p.exclude_) {
        if (::fnmatch(x.c_str(), me.c_str(), 0) == 0) p.enabled_ = false;
    }
    if (!p.include_.empty()) {
        bool in = false;
        for (const auto &x : p.include_) in = in || ::fnmatch(x.c_str(), me.c_str(), 0) == 0;
        if (!in) p.enabled_ = false;
    }
    return p;
}

bool Policy::accelerate(const sockaddr *addr, socklen_t len, std::string *why) const {
    int family = addr->sa_family;
    const uint8_t *bytes = nullptr;
    uint16_t port = 0;
    if (family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto *in = reinterpret_cast<const sockaddr_in *>(addr);
        bytes = reinterpret_cast<const uint8_t *>(&in->sin_addr);
        port = ntohs(in->sin_port);
    } else if (family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto *in6 = reinterpret_cast<const sockaddr_in6 *>(addr);
        bytes = reinterpret_cast<const uint8_t *>(&in6->sin6_addr);
        port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {  // an IPv4 peer of a dual-stack socket: IPv4 rules
            family = AF_INET;
            bytes += 12;
        }
    } else {
        if (why != nullptr) *why = "not an IPv4 or IPv6 address";
        return false;
    }
    for (const auto &r : rules_) {
        if (!r.any_address && (r.family != family || !prefix_matches(r, bytes))) continue;
        if (!r.ports.empty()) {
            bool in = false;
            for (auto [lo, hi] : r.ports) in = in || (port >= lo && port <= hi);
            if (!in) continue;
        }
        if (why != nullptr) *why = r.text;
        return r.rdma;
    }
    if (why != nullptr) *why = "the default";
    return default_rdma_;
}

}  // namespace openrdma::sockets
