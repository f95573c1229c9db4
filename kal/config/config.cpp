// krdmad configuration: strict JSON parsing with errors that name the key.
#include "config.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "rnicpi/cpp/channel.hpp"
#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

using nlohmann::json;

struct Bad {
    std::string message;
};

void only_keys(const json &obj, const std::string &where, std::initializer_list<const char *> allowed) {
    if (!obj.is_object()) throw Bad{where + " must be an object"};
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto &[key, value] : obj.items()) {
        (void)value;
        if (ok.count(key) == 0) throw Bad{"unknown key " + where + "." + key};
    }
}

std::string str(const json &obj, const char *key, const std::string &where, const std::string &fallback) {
    if (!obj.contains(key)) return fallback;
    if (!obj[key].is_string()) throw Bad{where + "." + key + " must be a string"};
    return obj[key].get<std::string>();
}

bool flag(const json &obj, const char *key, const std::string &where, bool fallback) {
    if (!obj.contains(key)) return fallback;
    if (!obj[key].is_boolean()) throw Bad{where + "." + key + " must be true or false"};
    return obj[key].get<bool>();
}

uint64_t num(const json &obj, const char *key, const std::string &where, uint64_t fallback) {
    if (!obj.contains(key)) return fallback;
    if (!obj[key].is_number_unsigned()) throw Bad{where + "." + key + " must be a non-negative integer"};
    return obj[key].get<uint64_t>();
}

uint32_t num32(const json &obj, const char *key, const std::string &where, uint32_t fallback) {
    uint64_t v = num(obj, key, where, fallback);
    if (v > UINT32_MAX) throw Bad{where + "." + key + " is too large"};
    return static_cast<uint32_t>(v);
}

// "LINE:COLUMN: not valid JSON: what was wrong" for a syntax error in @p text: the position as an editor counts it
// (both from 1), and the parser's own words without its exception prefix.
std::string syntax_error(const json::parse_error &e, const std::string &text) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while parsing ..."
    unsigned line = 0, column = 0;
    const size_t at = what.find(" at line ");
    const size_t colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
    if (at == std::string::npos || colon == std::string::npos ||
        std::sscanf(what.c_str() + at, " at line %u, column %u", &line, &column) != 2) {
        // Another wording: count the position from the byte offset the parser read up to.
        const size_t end = std::min<size_t>(e.byte, text.size());
        line = 1;
        column = 0;
        for (size_t i = 0; i < end; ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 0;
            } else {
                ++column;
            }
        }
        const size_t bracket = what.find("] ");
        return std::to_string(line) + ":" + std::to_string(column) +
               ": not valid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2));
    }
    return std::to_string(line) + ":" + std::to_string(column) + ": not valid JSON: " + what.substr(colon + 2);
}

}  // namespace

rdma::Expected<Config> parse_config(const std::string &text, const std::string &origin) {
    json root;
    try {
        // Comments (// and /* */) are allowed: the installed default explains itself in place.
        root = json::parse(text, nullptr, true, true);
    } catch (const json::parse_error &e) {
        return rdma::Error(RI_EINVAL, origin + ":" + syntax_error(e, text));
    }
    Config c;
    try {
        only_keys(root, "config", {"device", "provider_dir", "admin_group", "log_level", "modules", "rnics", "limits",
                                    "llp", "consumers"});
        c.device = str(root, "device", "config", c.device.string());
        if (c.device.empty()) throw Bad{"config.device must not be empty"};
        if (root.contains("provider_dir")) c.provider_dir = str(root, "provider_dir", "config", "");
        c.admin_group = str(root, "admin_group", "config", "");
        c.log_level = str(root, "log_level", "config", c.log_level);
        if (!rdma::log::parse_level(c.log_level)) throw Bad{"config.log_level must be error, warn, info or debug"};
        if (root.contains("modules")) {
            const json &m = root["modules"];
            if (!m.is_array()) throw Bad{"config.modules must be an array of file names"};
            for (size_t i = 0; i < m.size(); ++i) {
                if (!m[i].is_string()) throw Bad{"config.modules[" + std::to_string(i) + "] must be a string"};
                c.modules.push_back(m[i].get<std::string>());
            }
        }
        if (root.contains("rnics")) {
            const json &r = root["rnics"];
            if (!r.is_array()) throw Bad{"config.rnics must be an array"};
            for (size_t i = 0; i < r.size(); ++i) {
                std::string where = "config.rnics[" + std::to_string(i) + "]";
                only_keys(r[i], where, {"name", "provider", "address", "netdev", "options"});
                AttachRequest a;
                a.name = str(r[i], "name", where, "");
                a.provider = str(r[i], "provider", where, "");
                a.address = str(r[i], "address", where, "");
                a.netdev = str(r[i], "netdev", where, "");
                if (a.name.empty() || a.provider.empty()) throw Bad{where + " needs a name and a provider"};
                if (a.address.empty() && a.netdev.empty()) throw Bad{where + " needs an address or a netdev"};
                if (r[i].contains("options")) {
                    if (!r[i]["options"].is_object()) throw Bad{where + ".options must be an object"};
                    a.options = r[i]["options"].dump();
                }
                for (const AttachRequest &o : c.rnics) {
                    if (o.name == a.name) throw Bad{where + ".name: another RNIC is already named " + a.name};
                    if (!a.address.empty() && o.address == a.address) {
                        throw Bad{where + ".address: RNIC " + o.name + " already serves " + a.address};
                    }
                }
                c.rnics.push_back(std::move(a));
            }
        }
        if (root.contains("limits")) {
            const json &l = root["limits"];
            only_keys(l, "config.limits",
                      {"max_connections", "connections_per_user", "pin_bytes_per_process", "pin_bytes_per_user",
                       "pin_bytes_total", "objects_per_process", "objects_per_user", "per_type"});
            c.max_connections = num32(l, "max_connections", "config.limits", c.max_connections);
            c.pin_bytes_per_process = num(l, "pin_bytes_per_process", "config.limits", c.pin_bytes_per_process);
            c.pin_bytes_total = num(l, "pin_bytes_total", "config.limits", c.pin_bytes_total);
            c.connections_per_user = num32(l, "connections_per_user", "config.limits", c.connections_per_user);
            c.pin_bytes_per_user = num(l, "pin_bytes_per_user", "config.limits", c.pin_bytes_per_user);
            c.quotas.total = num32(l, "objects_per_process", "config.limits", c.quotas.total);
            c.objects_per_user = num32(l, "objects_per_user", "config.limits", c.objects_per_user);
            if (l.contains("per_type")) {
                const json &p = l["per_type"];
                if (!p.is_object()) throw Bad{"config.limits.per_type must be an object"};
                for (const auto &[key, value] : p.items()) {
                    size_t t = 0;
                    while (t < kResourceTypes && resource_name(static_cast<ResourceType>(t)) != key) ++t;
                    if (t == kResourceTypes) throw Bad{"unknown key config.limits.per_type." + key};
                    if (!value.is_number_unsigned() || value.get<uint64_t>() > UINT32_MAX) {
                        throw Bad{"config.limits.per_type." + key + " must be a non-negative integer"};
                    }
                    c.quotas.per_type[t] = value.get<uint32_t>();
                }
            }
        }
        if (root.contains("llp")) {
            const json &l = root["llp"];
            const std::string w = "config.llp";
            only_keys(l, w,
                      {"connect_timeout_ms", "request_timeout_ms", "accept_timeout_ms", "max_pending_requests",
                       "user_timeout_ms", "keepalive_idle_s", "keepalive_interval_s", "keepalive_count",
                       "same_host", "peer_detection"});
            using ms = std::chrono::milliseconds;
            using sec = std::chrono::seconds;
            LlpSettings &s = c.llp;
            // Kernel socket options take an int: keep every value well inside one.
            auto bounded = [&](const char *key, uint64_t fallback, uint32_t max) {
                const uint32_t v = num32(l, key, w, static_cast<uint32_t>(fallback));
                if (v > max) throw Bad{w + "." + key + " must be at most " + std::to_string(max)};
                return v;
            };
            constexpr uint32_t kHour = 3600000;
            s.connect_timeout = ms(bounded("connect_timeout_ms", s.connect_timeout.count(), kHour));
            s.request_timeout = ms(bounded("request_timeout_ms", s.request_timeout.count(), kHour));
            s.accept_timeout = ms(bounded("accept_timeout_ms", s.accept_timeout.count(), kHour));
            s.max_pending = bounded("max_pending_requests", s.max_pending, 65535);
            s.user_timeout = ms(bounded("user_timeout_ms", s.user_timeout.count(), kHour));
            s.keepalive_idle = sec(bounded("keepalive_idle_s", s.keepalive_idle.count(), 32767));
            s.keepalive_interval = sec(bounded("keepalive_interval_s", s.keepalive_interval.count(), 32767));
            s.keepalive_count = bounded("keepalive_count", s.keepalive_count, 127);
            if (s.connect_timeout.count() == 0 || s.request_timeout.count() == 0 || s.accept_timeout.count() == 0) {
                throw Bad{w + ": setup timeouts must be positive"};
            }
            if (s.keepalive_idle.count() > 0 && (s.keepalive_interval.count() == 0 || s.keepalive_count == 0)) {
                throw Bad{w + ": keepalive needs a positive keepalive_interval_s and keepalive_count"};
            }
            s.peer_detection = flag(l, "peer_detection", w, s.peer_detection);
            if (l.contains("same_host")) {
                const json &h = l["same_host"];
                const std::string hw = w + ".same_host";
                only_keys(h, hw, {"enabled", "ring_bytes", "rendezvous"});
                s.same_host.enabled = flag(h, "enabled", hw, s.same_host.enabled);
                s.same_host.rendezvous = str(h, "rendezvous", hw, s.same_host.rendezvous);
                if (!s.same_host.rendezvous.empty() && s.same_host.rendezvous.front() != '/') {
                    throw Bad{hw + ".rendezvous must be an absolute directory path"};
                }
                const uint64_t ring = num(h, "ring_bytes", hw, s.same_host.ring_bytes);
                if (ring < rdma::provider::kChannelRingMin || ring > rdma::provider::kChannelRingMax ||
                    (ring & (ring - 1)) != 0) {
                    throw Bad{hw + ".ring_bytes must be a power of two from " +
                              std::to_string(rdma::provider::kChannelRingMin) + " to " +
                              std::to_string(rdma::provider::kChannelRingMax)};
                }
                s.same_host.ring_bytes = ring;
            }
        }
        if (root.contains("consumers")) {
            const json &m = root["consumers"];
            if (!m.is_array()) throw Bad{"config.consumers must be an array of objects"};
            for (size_t i = 0; i < m.size(); ++i) {
                const std::string where = "config.consumers[" + std::to_string(i) + "]";
                only_keys(m[i], where, {"module", "args", "enabled", "required"});
                ConsumerModuleSpec s;
                s.module = str(m[i], "module", where, "");
                if (s.module.empty()) throw Bad{where + ".module must name the module's file"};
                // Any JSON value: the module parses its own arguments.
                if (m[i].contains("args")) s.args = m[i]["args"].dump();
                s.enabled = flag(m[i], "enabled", where, true);
                s.required = flag(m[i], "required", where, false);
                c.consumers.push_back(std::move(s));
            }
        }
    } catch (const Bad &b) {
        return rdma::Error(RI_EINVAL, origin + ": configuration error: " + b.message);
    }
    return c;
}

rdma::Expected<Config> load_config(const std::filesystem::path &file) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
        return rdma::Error(RI_EINVAL, file.string() + ": is a directory, not a configuration file");
    }
    errno = 0;
    std::ifstream in(file);
    if (!in) {
        const int e = errno != 0 ? errno : ENOENT;
        return rdma::Error(rdma::from_errno(e), file.string() + ": cannot read the configuration: " + std::strerror(e));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_config(ss.str(), file.string());
}

}  // namespace kal
