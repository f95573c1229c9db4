// Interface adapter management: kVP modules, RNIC instances bound to addresses, selection by address.
#include "adapter_manager.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <atomic>
#include <cstring>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "adapter";

struct HostAddress {
    std::string netdev;
    ri_net_addr_t addr{};
    std::string text;
};

std::string to_text(const ri_net_addr_t &a) {
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(a.family == RI_AF_INET6 ? AF_INET6 : AF_INET, a.addr, buf, sizeof buf);
    return buf;
}

bool parse_address(const std::string &text, ri_net_addr_t &out) {
    out = ri_net_addr_t{};
    if (::inet_pton(AF_INET, text.c_str(), out.addr) == 1) {
        out.family = RI_AF_INET;
        return true;
    }
    if (::inet_pton(AF_INET6, text.c_str(), out.addr) == 1) {
        out.family = RI_AF_INET6;
        return true;
    }
    return false;
}

bool same_address(const ri_net_addr_t &a, const ri_net_addr_t &b) {
    size_t n = a.family == RI_AF_INET ? 4 : 16;
    return a.family == b.family && std::memcmp(a.addr, b.addr, n) == 0;
}

// The host's configured addresses, IPv4 first, in interface order.
std::vector<HostAddress> host_addresses() {
    std::vector<HostAddress> out, v6;
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        HostAddress h;
        h.netdev = i->ifa_name;
        if (i->ifa_addr->sa_family == AF_INET) {
            h.addr.family = RI_AF_INET;
            std::memcpy(h.addr.addr, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, 4);
            h.text = to_text(h.addr);
            out.push_back(h);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const auto *s6 = reinterpret_cast<sockaddr_in6 *>(i->ifa_addr);
            h.addr.family = RI_AF_INET6;
            h.addr.scope_id = s6->sin6_scope_id;
            std::memcpy(h.addr.addr, &s6->sin6_addr, 16);
            h.text = to_text(h.addr);
            v6.push_back(h);
        }
    }
    ::freeifaddrs(list);
    out.insert(out.end(), v6.begin(), v6.end());
    return out;
}

}  // namespace

struct RnicRef::Instance {
    std::string name;
    rdma::rnicpi::ModuleRef module;
    ri_instance_t handle = nullptr;
    std::string netdev;
    ri_net_addr_t addr{};
    std::atomic<uint32_t> opens{0};
    RnicObjectCounts counts;
};

RnicRef::RnicRef(RnicRef &&o) noexcept : inst_(std::move(o.inst_)) {}

RnicRef &RnicRef::operator=(RnicRef &&o) noexcept {
    if (this != &o) {
        if (inst_) --inst_->opens;
        inst_ = std::move(o.inst_);
    }
    return *this;
}

const std::string &RnicRef::name() const noexcept { return inst_->name; }
const ri_net_addr_t &RnicRef::address() const noexcept { return inst_->addr; }
const std::string &RnicRef::netdev() const noexcept { return inst_->netdev; }

RnicRef::~RnicRef() {
    if (inst_) --inst_->opens;
}

ri_instance_t RnicRef::instance() const noexcept { return inst_ ? inst_->handle : nullptr; }

const rdma::rnicpi::ModuleRef &RnicRef::module() const noexcept {
    static const rdma::rnicpi::ModuleRef none;
    return inst_ ? inst_->module : none;
}

RnicObjectCounts &RnicRef::counts() const noexcept {
    static RnicObjectCounts none;  // a moved-from reference counts nowhere that matters
    return inst_ ? inst_->counts : none;
}

AdapterManager::~AdapterManager() {
    std::lock_guard lock(mutex_);
    for (auto &[name, inst] : rnics_) {
        if (inst->opens.load() != 0) {
            RDMA_LOG_WARN(kComponent, "RNIC %s is still open at shutdown", name.c_str());
        }
        inst->module->descriptor().detach(inst->handle);
    }
    rnics_.clear();
}

rdma::Expected<rdma::rnicpi::ModuleRef> AdapterManager::load(const std::string &file) {
    return loader_.load(file, RI_MODE_PRIVILEGED);
}

rdma::Expected<void> AdapterManager::unload(const std::string &provider) {
    {
        std::lock_guard lock(mutex_);
        for (const auto &[name, inst] : rnics_) {
            if (inst->module->name() == provider) {
                return rdma::Error(RI_EBUSY, "provider '" + provider + "' still serves RNIC " + name +
                                                 "; detach it first");
            }
        }
    }
    return loader_.unload(provider, RI_MODE_PRIVILEGED);
}

RnicInfo AdapterManager::info_of(const RnicRef::Instance &i) {
    RnicInfo r;
    r.name = i.name;
    r.provider = i.module->name();
    r.vendor = i.module->vendor();
    r.netdev = i.netdev;
    r.address = to_text(i.addr);
    r.uvp_library = i.module->uvp_library() ? i.module->uvp_library()->string() : std::string();
    r.opens = i.opens.load();
    for (size_t t = 0; t < kRnicObjectTypes; ++t) r.objects[t] = i.counts.by_type[t].load();
    return r;
}

rdma::Expected<RnicInfo> AdapterManager::attach(const AttachRequest &req) {
    if (req.name.empty() || req.name.size() >= RI_NAME_MAX) {
        return rdma::Error(RI_EINVAL, "an RNIC name must have 1 to " + std::to_string(RI_NAME_MAX - 1) +
                                          " characters");
    }
    rdma::rnicpi::ModuleRef module = loader_.find(req.provider, RI_MODE_PRIVILEGED);
    if (!module) return rdma::Error(RI_ENOENT, "no kVP '" + req.provider + "' is loaded; load its module first");
    if (!req.netdev.empty() && (req.netdev.size() >= RI_NETDEV_MAX || ::if_nametoindex(req.netdev.c_str()) == 0)) {
        return rdma::Error(RI_ENOENT, "no network device '" + req.netdev + "' on this host");
    }
    // Bind to an address the host really has: that is how consumers select the RNIC.
    auto addresses = host_addresses();
    const HostAddress *chosen = nullptr;
    if (!req.address.empty()) {
        ri_net_addr_t want;
        if (!parse_address(req.address, want)) {
            return rdma::Error(RI_EINVAL, "'" + req.address + "' is not an IPv4 or IPv6 address");
        }
        for (const auto &h : addresses) {
            if (same_address(h.addr, want) && (req.netdev.empty() || h.netdev == req.netdev)) {
                chosen = &h;
                break;
            }
        }
        if (chosen == nullptr) {
            return rdma::Error(RI_ENODEV, "address " + req.address + " is not configured on " +
                                              (req.netdev.empty() ? std::string("this host") : req.netdev));
        }
    } else if (!req.netdev.empty()) {
        for (const auto &h : addresses) {
            if (h.netdev == req.netdev) {
                chosen = &h;
                break;
            }
        }
        if (chosen == nullptr) return rdma::Error(RI_ENODEV, "network device " + req.netdev + " has no address");
    } else {
        return rdma::Error(RI_EINVAL, "attach needs a network address or a network device");
    }

    std::lock_guard lock(mutex_);
    if (rnics_.count(req.name) != 0) return rdma::Error(RI_EEXIST, "an RNIC named " + req.name + " exists");
    for (const auto &[name, inst] : rnics_) {
        if (same_address(inst->addr, chosen->addr)) {
            return rdma::Error(RI_EEXIST, "address " + chosen->text + " is already served by RNIC " + name);
        }
    }
    ri_attach_params_t params{};
    std::memcpy(params.name, req.name.c_str(), req.name.size() + 1);
    std::memcpy(params.netdev, chosen->netdev.c_str(), std::min(chosen->netdev.size() + 1, sizeof params.netdev));
    params.addr = chosen->addr;
    params.options = req.options.empty() ? nullptr : req.options.c_str();
    auto inst = std::make_shared<RnicRef::Instance>();
    ri_status_t rc = module->descriptor().attach(&params, &inst->handle);
    if (rc != RI_OK) {
        return rdma::Error(rc, "provider '" + req.provider + "' refused to attach " + req.name + ": " +
                                   std::strerror(rc));
    }
    inst->name = req.name;
    inst->module = std::move(module);
    inst->netdev = chosen->netdev;
    inst->addr = chosen->addr;
    RnicInfo info = info_of(*inst);
    rnics_.emplace(req.name, std::move(inst));
    RDMA_LOG_INFO(kComponent, "attached %s (%s) to %s on %s", info.name.c_str(), info.provider.c_str(),
                  info.address.c_str(), info.netdev.c_str());
    return info;
}

rdma::Expected<void> AdapterManager::detach(const std::string &name) {
    std::lock_guard lock(mutex_);
    auto it = rnics_.find(name);
    if (it == rnics_.end()) return rdma::Error(RI_ENODEV, "no RNIC named " + name);
    if (uint32_t opens = it->second->opens.load(); opens != 0) {
        return rdma::Error(RI_EBUSY, "RNIC " + name + " is open " + std::to_string(opens) +
                                         " time(s); its consumers must close it first");
    }
    ri_status_t rc = it->second->module->descriptor().detach(it->second->handle);
    if (rc != RI_OK) return rdma::Error(rc, "provider refused to detach " + name + ": " + std::strerror(rc));
    rnics_.erase(it);
    RDMA_LOG_INFO(kComponent, "detached %s", name.c_str());
    return {};
}

rdma::Expected<std::string> AdapterManager::control(const std::string &name, const std::string &request) {
    // An open reference keeps the instance attached while the provider works, without holding the manager's lock
    // (a control operation may take as long as the adapter needs).
    auto ref = open(name);
    if (!ref) return ref.error();
    const auto control = ref->module()->control();
    if (control == nullptr) {
        return rdma::Error(RI_EOPNOTSUPP, "provider " + ref->module()->name() + " of RNIC " + name +
                                              " has no run-time control operation");
    }
    std::string reply(4096, '\0');
    const ri_status_t rc = control(ref->instance(), request.c_str(), reply.data(), reply.size());
    reply.resize(strnlen(reply.data(), reply.size()));
    if (rc != RI_OK) {
        if (reply.empty()) reply = std::strerror(rc);
        return rdma::Error(rc, "RNIC " + name + ": " + reply);
    }
    return reply;
}

std::vector<RnicInfo> AdapterManager::list() const {
    std::lock_guard lock(mutex_);
    std::vector<RnicInfo> out;
    for (const auto &[name, inst] : rnics_) out.push_back(info_of(*inst));
    return out;
}

std::vector<ModuleInfo> AdapterManager::modules() const {
    std::vector<ModuleInfo> out;
    for (const auto &m : loader_.modules()) {
        if (m->mode() != RI_MODE_PRIVILEGED) continue;
        ModuleInfo info;
        info.provider = m->name();
        info.vendor = m->vendor();
        info.version = m->version();
        info.path = m->path().string();
        info.uvp_library = m->uvp_library() ? m->uvp_library()->string() : std::string();
        info.abi_version = m->abi_version();
        out.push_back(std::move(info));
    }
    std::lock_guard lock(mutex_);
    for (auto &info : out) {
        for (const auto &[name, inst] : rnics_) {
            if (inst->module->name() == info.provider) ++info.rnics;
        }
    }
    return out;
}

rdma::Expected<RnicInfo> AdapterManager::find_by_address(const std::string &address) const {
    ri_net_addr_t want;
    if (!parse_address(address, want)) {
        return rdma::Error(RI_EINVAL, "'" + address + "' is not an IPv4 or IPv6 address");
    }
    std::lock_guard lock(mutex_);
    for (const auto &[name, inst] : rnics_) {
        if (same_address(inst->addr, want)) return info_of(*inst);
    }
    return rdma::Error(RI_ENODEV, "no RNIC serves " + address);
}

rdma::Expected<RnicRef> AdapterManager::open(const std::string &name) {
    std::lock_guard lock(mutex_);
    auto it = rnics_.find(name);
    if (it == rnics_.end()) return rdma::Error(RI_ENODEV, "no RNIC named " + name);
    RnicRef ref;
    ref.inst_ = it->second;
    ++ref.inst_->opens;
    return ref;
}

}  // namespace kal
