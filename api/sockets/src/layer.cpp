// The sockets layer of one process.
#include "layer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

#include "embedded_link.hpp"
#include "libc.hpp"
#include "rnicpi/host/log.hpp"

namespace openrdma::sockets {
namespace {

constexpr const char *kComponent = "sockets";

uint32_t env_u32(const char *name, uint32_t def, uint32_t lo, uint32_t hi) {
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0') return def;
    char *end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 0);
    if (*end != '\0' || n < lo || n > hi) {
        RDMA_LOG_WARN(kComponent, "%s=%s is not between %u and %u: %u is used", name, v, lo, hi, def);
        return def;
    }
    return static_cast<uint32_t>(n);
}

// The local address of socket @p fd as text (an IPv4-mapped IPv6 address as IPv4), or empty.
std::string local_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (real().getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return {};
    char text[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(&ss)->sin_addr, text, sizeof text);
    } else if (ss.ss_family == AF_INET6) {
        const auto &a6 = reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a6)) {
            ::inet_ntop(AF_INET, reinterpret_cast<const uint8_t *>(&a6) + 12, text, sizeof text);
        } else {
            ::inet_ntop(AF_INET6, &a6, text, sizeof text);
        }
    }
    return text;
}

}  // namespace

const char *reason_name(Reason r) noexcept {
    switch (r) {
        case Reason::rdma: return "rdma";
        case Reason::policy: return "policy";
        case Reason::no_detection: return "no-detection";
        case Reason::peer_plain: return "peer-plain";
        case Reason::no_rnic: return "no-rnic";
        case Reason::convert_failed: return "convert-failed";
        case Reason::count: break;
    }
    return "?";
}

Layer *Layer::get() noexcept {
    static Layer *layer = [] {
        auto policy = Policy::load();
        if (!policy) {
            // A policy that does not parse turns the layer off, loudly: TCP as before, never a guess.
            RDMA_LOG_ERROR(kComponent, "%s: the layer is off", policy.error().to_string().c_str());
            return static_cast<Layer *>(nullptr);
        }
        if (!policy->enabled()) return static_cast<Layer *>(nullptr);
        auto *l = new Layer();  // never destroyed: it outlives every descriptor, up to the process's exit
        l->policy_ = std::move(*policy);
        l->shape_.slot = env_u32("OPENRDMA_SOCKETS_SLOT", l->shape_.slot, 1024, 1u << 20);
        l->shape_.send_slots = env_u32("OPENRDMA_SOCKETS_SLOTS", l->shape_.send_slots, 2, 256);
        l->shape_.recv_slots = l->shape_.send_slots;
        const char *peer = std::getenv("OPENRDMA_SOCKETS_PEER");
        l->assume_peer_ = peer != nullptr && std::strcmp(peer, "layer") == 0;
        return l;
    }();
    return layer;
}

rdma::Expected<std::shared_ptr<ual::AccessLayer>> Layer::access_layer_locked() {
    if (al_) return al_;
    if (!al_error_.empty()) return rdma::Error(RI_ENODEV, al_error_);
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;  // $OPENRDMA_EMBEDDED_CONFIG runs a kAL in this process
    o.workers = 1;
    auto al = ual::AccessLayer::open(o);
    if (!al) {
        al_error_ = al.error().to_string();
        RDMA_LOG_WARN(kComponent, "no access layer (%s): every connection stays TCP", al_error_.c_str());
        return al.error();
    }
    al_ = *al;
    watcher_ = std::make_unique<Watcher>();
    return al_;
}

bool Layer::mark(int fd, Reason *why) {
    (void)fd;
    if (assume_peer_) return true;
    // Peer detection through the kAL's sockops program: not yet in this build.
    *why = Reason::no_detection;
    return false;
}

Peer Layer::peer(int fd) {
    (void)fd;
    return assume_peer_ ? Peer::layer : Peer::plain;
}

rdma::Expected<std::shared_ptr<Device>> Layer::device_for(int fd) {
    const std::string addr = local_address(fd);
    std::lock_guard lock(mutex_);
    if (auto it = devices_.find(addr); it != devices_.end()) return it->second;
    if (auto it = no_device_.find(addr); it != no_device_.end()) return rdma::Error(RI_ENODEV, it->second);
    auto al = access_layer_locked();
    if (!al) return al.error();
    auto d = Device::open(*al, addr, shape_, watcher_.get());
    if (!d) {
        const std::string why = "no RNIC for " + addr + ": " + d.error().message();
        no_device_[addr] = why;
        return rdma::Error(d.error().code(), why);
    }
    devices_[addr] = *d;
    return *d;
}

void Layer::forked_child() noexcept {
    // Everything here belongs to the parent (its device connection, its threads, its registered memory, which is not
    // even mapped in the child): let go of it without a destructor, and start over on first need.
    new std::shared_ptr<ual::AccessLayer>(std::move(al_));
    new std::map<std::string, std::shared_ptr<Device>>(std::move(devices_));
    if (watcher_) {
        watcher_->abandon();
        (void)watcher_.release();
    }
    al_.reset();
    devices_.clear();
    no_device_.clear();
    al_error_.clear();
    new (&mutex_) std::mutex();
}

}  // namespace openrdma::sockets
