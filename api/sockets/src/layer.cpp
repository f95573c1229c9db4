// The sockets layer of one process.
#include "layer.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <nlohmann/json.hpp>

#include "embedded_link.hpp"
#include "krdma/net_addr.hpp"
#include "libc.hpp"
#include "link.hpp"
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
// @p ss as text (an IPv4-mapped address as IPv4), with its port ("[address]:port" for IPv6) when @p with_port;
// @p none when it is no IP address.
std::string address_text(const sockaddr_storage &ss, bool with_port, const char *none) {
    uint16_t port = 0;
    auto a = krdma::net_addr_from_sockaddr(ss, &port);
    if (!a) return none;
    const std::string text = krdma::to_text(*a);
    if (!with_port) return text;
    return (a->family == RI_AF_INET6 ? "[" + text + "]" : text) + ":" + std::to_string(port);
}

// The local address of socket @p fd as text, or empty.
std::string local_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (real().getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return {};
    return address_text(ss, false, "");
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
        case Reason::declined: return "declined";
        case Reason::peer_declined: return "peer-declined";
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
        l->shape_.spin_ns = 1000 * env_u32("OPENRDMA_SOCKETS_SPIN_US", l->shape_.spin_ns / 1000, 0, 1000000);
        l->shape_.direct = env_u32("OPENRDMA_SOCKETS_DIRECT", 1, 0, 1) != 0;
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

const krdma::PeerMarks *Layer::marks() {
    std::lock_guard lock(mutex_);
    if (marks_) return marks_.get();
    if (!marks_error_.empty()) return nullptr;
    auto al = access_layer_locked();
    if (!al) {
        marks_error_ = al.error().message();
        return nullptr;
    }
    auto fd = (*al)->peer_marks();
    if (!fd) {
        // Said once: every connection of this process stays TCP, and rdmactl sockets counts them as no-detection.
        marks_error_ = fd.error().message();
        RDMA_LOG_WARN(kComponent, "no peer detection (%s): every connection stays TCP", marks_error_.c_str());
        return nullptr;
    }
    marks_ = std::make_unique<krdma::PeerMarks>(std::move(*fd));
    return marks_.get();
}

bool Layer::mark(int fd, Reason *why) {
    const krdma::PeerMarks *m = marks();
    if (m == nullptr) {
        *why = Reason::no_detection;
        return false;
    }
    if (!m->mark(fd).ok()) {
        *why = Reason::no_detection;
        return false;
    }
    return true;
}

Peer Layer::peer(int fd) {
    const krdma::PeerMarks *m = marks();
    if (m == nullptr) return Peer::plain;
    auto k = m->peer(fd);
    if (!k) return Peer::plain;
    switch (*k) {
        case krdma::PeerKind::layer: return Peer::layer;
        case krdma::PeerKind::plain: return Peer::plain;
        case krdma::PeerKind::undecided: break;
    }
    return Peer::undecided;
}

krdma::PeerMark Layer::look(int fd) {
    const krdma::PeerMarks *m = marks();
    if (m == nullptr) return {};
    auto v = m->look(fd);
    return v ? *v : krdma::PeerMark{};
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


void Layer::start_report() noexcept {
    std::lock_guard lock(report_mutex_);
    dirty_ = true;
    if (reporting_) return;
    reporting_ = true;
    reported_.store(true, std::memory_order_relaxed);
    report_path_ = std::string(kReportDir) + "/openrdma-sockets." + std::to_string(::getpid());
    try {
        std::thread([this] { report_loop(); }).detach();
    } catch (...) {
        reporting_ = false;  // no thread: no report, nothing else lost
    }
}

void Layer::revise(const Stream *stream, Reason r) {
    std::lock_guard lock(report_mutex_);
    for (auto &n : noted_) {
        auto s = n.stream.lock();
        if (s.get() != stream || n.reason != Reason::rdma) continue;
        decisions_[static_cast<size_t>(Reason::rdma)].fetch_sub(1, std::memory_order_relaxed);
        decisions_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
        n.reason = r;
        n.stream.reset();
        RDMA_LOG_INFO(kComponent, "descriptor %d (%s to %s): stays TCP after all (%s)", n.fd, n.local.c_str(),
                      n.remote.c_str(), reason_name(r));
        dirty_ = true;
        return;
    }
}

void Layer::note(int fd, Reason r, bool server, const std::shared_ptr<Stream> &stream, int sock) {
    count(r);
    Noted n{fd, r, server, {}, {}, stream, static_cast<int64_t>(::time(nullptr))};
    if (sock < 0) sock = fd;  // the TCP socket (a converted one's descriptor is the mirror)
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (real().getsockname(sock, reinterpret_cast<sockaddr *>(&ss), &len) == 0) n.local = address_text(ss, true, "?");
    len = sizeof ss;
    if (real().getpeername(sock, reinterpret_cast<sockaddr *>(&ss), &len) == 0) n.remote = address_text(ss, true, "?");
    if (r == Reason::rdma) {
        RDMA_LOG_INFO(kComponent, "descriptor %d (%s to %s): converted to RDMA%s", fd, n.local.c_str(), n.remote.c_str(),
                      !stream                ? ""
                      : !stream->has_qp()    ? " (over the link to its peer's process)"
                      : stream->kit_reused() ? " (on a QP reused)"
                                             : "");
    } else {
        RDMA_LOG_INFO(kComponent, "descriptor %d (%s to %s): stays TCP (%s)", fd, n.local.c_str(), n.remote.c_str(),
                      reason_name(r));
    }
    std::lock_guard lock(report_mutex_);
    // Keep every live stream and the last 32 other decisions.
    constexpr size_t kKept = 32;
    size_t others = 0;
    for (const auto &x : noted_) others += x.stream.expired() ? 1 : 0;
    if (others >= kKept) {
        for (auto it = noted_.begin(); it != noted_.end(); ++it) {
            if (it->stream.expired()) {
                noted_.erase(it);
                break;
            }
        }
    }
    noted_.push_back(std::move(n));
    dirty_ = true;
}

void Layer::report_loop() {
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        publish();
    }
}

void Layer::publish() {
    nlohmann::json j;
    std::string path;
    {
        std::lock_guard lock(report_mutex_);
        bool live = false;
        for (const auto &n : noted_) live = live || !n.stream.expired();
        const KitCounts kits = kit_counts();
        // Counters of live streams move: rewritten while any lives, and when kits were made or reused.
        if (!dirty_ && !live && kits.made == kits_published_.made && kits.reused == kits_published_.reused) return;
        dirty_ = false;
        kits_published_ = kits;
        path = report_path_;
        j["pid"] = ::getpid();
        j["uid"] = ::getuid();
        j["program"] = program_name();
        nlohmann::json d = nlohmann::json::object();
        for (size_t r = 0; r < static_cast<size_t>(Reason::count); ++r) {
            d[reason_name(static_cast<Reason>(r))] = decisions_[r].load(std::memory_order_relaxed);
        }
        j["decisions"] = d;
        j["kits"] = {{"made", kits.made}, {"reused", kits.reused}};
        j["links"] = Links::get().count();
        nlohmann::json conns = nlohmann::json::array();
        for (const auto &n : noted_) {
            nlohmann::json c;
            c["fd"] = n.fd;
            c["role"] = n.server ? "server" : "client";
            c["local"] = n.local;
            c["remote"] = n.remote;
            c["decision"] = reason_name(n.reason);
            c["since"] = n.when;
            if (auto s = n.stream.lock()) {
                c["path"] = s->same_host() ? "same-host" : "wire";
                c["byte_channel"] = s->direct();
                c["link"] = !s->has_qp();  // converted over a link (link.hpp): no QP
                c["state"] = s->state_name();
                c["tx_bytes"] = s->counters().tx_bytes.load(std::memory_order_relaxed);
                c["rx_bytes"] = s->counters().rx_bytes.load(std::memory_order_relaxed);
                c["tx_messages"] = s->counters().tx_messages.load(std::memory_order_relaxed);
                c["tx_inline"] = s->counters().tx_inline.load(std::memory_order_relaxed);
                c["rx_messages"] = s->counters().rx_messages.load(std::memory_order_relaxed);
                c["credit_stalls"] = s->counters().credit_stalls.load(std::memory_order_relaxed);
                c["sleeps"] = s->counters().sleeps.load(std::memory_order_relaxed);
            } else {
                c["path"] = n.reason == Reason::rdma ? "closed" : "tcp";
            }
            conns.push_back(std::move(c));
        }
        j["connections"] = std::move(conns);
    }
    // Written whole, then renamed: a reader never sees half a report.
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return;
    const std::string text = j.dump() + "\n";
    const bool ok = real().write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    real().close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) (void)::unlink(tmp.c_str());
}

void Layer::unpublish() noexcept {
    std::lock_guard lock(report_mutex_);
    if (reporting_) (void)::unlink(report_path_.c_str());
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
    (void)marks_.release();  // the map's descriptor is the parent's copy too: it stays open for the child to use
    marks_error_.clear();
    al_.reset();
    devices_.clear();
    no_device_.clear();
    al_error_.clear();
    new (&mutex_) std::mutex();
    // The child reports under its own process identifier, by its own thread, from its first decision on.
    new (&report_mutex_) std::mutex();
    noted_.clear();
    reporting_ = false;
    reported_.store(false, std::memory_order_relaxed);
    dirty_ = false;
}

}  // namespace openrdma::sockets
