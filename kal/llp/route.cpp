// Route and neighbour look-ups through rtnetlink (libnl-route).
#include "route.hpp"

#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace kal::llp {
namespace {

struct SockFree {
    void operator()(nl_sock *s) const noexcept { nl_socket_free(s); }
};
struct MsgFree {
    void operator()(nl_msg *m) const noexcept { nlmsg_free(m); }
};
struct AddrPut {
    void operator()(nl_addr *a) const noexcept { nl_addr_put(a); }
};
struct CacheFree {
    void operator()(nl_cache *c) const noexcept { nl_cache_free(c); }
};
struct RoutePut {
    void operator()(rtnl_route *r) const noexcept { rtnl_route_put(r); }
};
struct NeighPut {
    void operator()(rtnl_neigh *n) const noexcept { rtnl_neigh_put(n); }
};
using Socket = std::unique_ptr<nl_sock, SockFree>;

rdma::Expected<Socket> open_rtnl() {
    Socket sk(nl_socket_alloc());
    if (!sk) return rdma::Error(RI_ENOMEM, "route: cannot allocate a netlink socket");
    if (int e = nl_connect(sk.get(), NETLINK_ROUTE); e < 0) {
        return rdma::Error(RI_EIO, std::string("route: cannot open rtnetlink: ") + nl_geterror(e));
    }
    return sk;
}

int af_of(const ri_net_addr_t &a) noexcept { return a.family == RI_AF_INET6 ? AF_INET6 : AF_INET; }

std::optional<ri_net_addr_t> from_nl(const nl_addr *a) noexcept {
    if (a == nullptr) return std::nullopt;
    ri_net_addr_t r{};
    unsigned len = nl_addr_get_len(a);
    int family = nl_addr_get_family(a);
    if (family == AF_INET && len == 4) {
        r.family = RI_AF_INET;
    } else if (family == AF_INET6 && len == 16) {
        r.family = RI_AF_INET6;
    } else {
        return std::nullopt;
    }
    std::memcpy(r.addr, nl_addr_get_binary_addr(a), len);
    static constexpr uint8_t kZero[16] = {};
    if (std::memcmp(r.addr, kZero, len) == 0) return std::nullopt;  // "::" or 0.0.0.0 means none
    return r;
}

bool is_loopback_device(const char *ifname) noexcept {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname, std::min(std::strlen(ifname), size_t{IFNAMSIZ - 1}));
    bool lo = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_LOOPBACK) != 0;
    ::close(fd);
    return lo;
}

// The netdev holding address @p a, or empty.
std::string netdev_of(const ri_net_addr_t &a) {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) return {};
    std::string name;
    for (ifaddrs *i = list; i != nullptr && name.empty(); i = i->ifa_next) {
        if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
        sockaddr_storage ss{};
        std::memcpy(&ss, i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        auto have = krdma::net_addr_from_sockaddr(ss);
        if (have && krdma::same_net_addr(*have, a)) name = i->ifa_name;
    }
    ::freeifaddrs(list);
    return name;
}

struct Reply {
    bool got = false;
    int error = 0;  // positive errno from the kernel's NLMSG_ERROR
    Route route;
};

int on_error(sockaddr_nl *, nlmsgerr *e, void *arg) {
    static_cast<Reply *>(arg)->error = -e->error;
    return NL_STOP;
}

int on_route(nl_msg *msg, void *arg) {
    auto *reply = static_cast<Reply *>(arg);
    rtnl_route *raw = nullptr;
    if (rtnl_route_parse(nlmsg_hdr(msg), &raw) < 0 || raw == nullptr) return NL_SKIP;
    std::unique_ptr<rtnl_route, RoutePut> rt(raw);
    Route &r = reply->route;
    r.type = rtnl_route_get_type(rt.get());
    r.table = rtnl_route_get_table(rt.get());
    if (rtnl_route_get_nnexthops(rt.get()) > 0) {
        rtnl_nexthop *nh = rtnl_route_nexthop_n(rt.get(), 0);  // a route get answers with the one path it chose
        r.ifindex = rtnl_route_nh_get_ifindex(nh);
        r.gateway = from_nl(rtnl_route_nh_get_gateway(nh));
    }
    r.preferred_source = from_nl(rtnl_route_get_pref_src(rt.get()));
    uint32_t mtu = 0;
    if (rtnl_route_get_metric(rt.get(), RTAX_MTU, &mtu) == 0) r.mtu = mtu;
    reply->got = true;
    return NL_STOP;
}

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

bool Route::local() const noexcept { return type == RTN_LOCAL; }

rdma::Expected<Route> lookup_route(const RouteQuery &query) {
    const ri_net_addr_t &dst = query.destination;
    size_t len = krdma::net_addr_len(dst);
    if (len == 0) return rdma::Error(RI_EINVAL, "route: the destination is not an IPv4 or IPv6 address");
    if (query.source && query.source->family != dst.family) {
        return rdma::Error(RI_EINVAL, "route: source " + krdma::to_text(*query.source) + " and destination " +
                                          krdma::to_text(dst) + " are of different families");
    }
    auto sk = open_rtnl();
    if (!sk) return sk.error();

    std::unique_ptr<nl_msg, MsgFree> msg(nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST));
    if (!msg) return rdma::Error(RI_ENOMEM, "route: cannot allocate a netlink message");
    rtmsg rtm{};
    rtm.rtm_family = static_cast<unsigned char>(af_of(dst));
    rtm.rtm_dst_len = static_cast<unsigned char>(len * 8);
    rtm.rtm_src_len = query.source ? static_cast<unsigned char>(len * 8) : 0;
    rtm.rtm_flags = RTM_F_LOOKUP_TABLE;  // report the table that matched, not "main" (IPv4 does only when asked)
    int oif = query.ifindex != 0 ? query.ifindex : static_cast<int>(dst.scope_id);
    if (nlmsg_append(msg.get(), &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
        nla_put(msg.get(), RTA_DST, static_cast<int>(len), dst.addr) < 0 ||
        (query.source && nla_put(msg.get(), RTA_SRC, static_cast<int>(len), query.source->addr) < 0) ||
        (oif != 0 && nla_put_u32(msg.get(), RTA_OIF, static_cast<uint32_t>(oif)) < 0)) {
        return rdma::Error(RI_ENOMEM, "route: cannot build the RTM_GETROUTE request");
    }

    Reply reply;
    nl_socket_modify_cb(sk->get(), NL_CB_VALID, NL_CB_CUSTOM, on_route, &reply);
    nl_socket_modify_err_cb(sk->get(), NL_CB_CUSTOM, on_error, &reply);
    if (int e = nl_send_auto(sk->get(), msg.get()); e < 0) {
        return rdma::Error(RI_EIO, std::string("route: sending RTM_GETROUTE: ") + nl_geterror(e));
    }
    int e = nl_recvmsgs_default(sk->get());
    std::string what = "route to " + krdma::to_text(dst) + (query.source ? " from " + krdma::to_text(*query.source) : "");
    if (reply.error != 0) {
        // The kernel's own verdict: ENETUNREACH (no route), EHOSTUNREACH (unreachable route), EACCES (prohibit),
        // EINVAL (blackhole, or a source it refuses for this destination).
        return rdma::Error(rdma::from_errno(reply.error), what + ": " + errno_text(reply.error));
    }
    if (!reply.got) {
        return rdma::Error(RI_EIO, what + ": no answer from the kernel" + (e < 0 ? std::string(": ") + nl_geterror(e) : ""));
    }
    Route r = std::move(reply.route);
    r.destination = dst;
    switch (r.type) {
        case RTN_UNICAST:
        case RTN_LOCAL: break;
        case RTN_UNREACHABLE: return rdma::Error(RI_EHOSTUNREACH, what + ": the route is unreachable");
        case RTN_BLACKHOLE:
        case RTN_PROHIBIT:
        case RTN_THROW: return rdma::Error(RI_ENETUNREACH, what + ": the route discards traffic (type " +
                                                            std::to_string(r.type) + ")");
        default:  // broadcast, multicast, anycast, NAT...: nothing a TCP connection can use
            return rdma::Error(RI_EINVAL, what + ": route type " + std::to_string(r.type) + " cannot carry TCP");
    }
    char name[IF_NAMESIZE] = {};
    if (r.ifindex != 0 && ::if_indextoname(static_cast<unsigned>(r.ifindex), name) != nullptr) {
        r.ifname = name;
        r.loopback_device = is_loopback_device(name);
    }
    return r;
}

rdma::Expected<Route> lookup_route(std::string_view destination) {
    auto dst = krdma::parse_net_addr(destination);
    if (!dst) return dst.error();
    return lookup_route(RouteQuery{*dst, std::nullopt, 0});
}

rdma::Expected<Route> lookup_route_for(const RnicBinding &rnic, const ri_net_addr_t &destination) {
    bool has_addr = krdma::net_addr_len(rnic.address) != 0;
    if (!has_addr && rnic.netdev.empty()) {
        return rdma::Error(RI_EINVAL, "route: the RNIC binding names neither an address nor a netdev");
    }
    std::string netdev = rnic.netdev;
    if (netdev.empty()) {
        netdev = netdev_of(rnic.address);
        if (netdev.empty()) {
            return rdma::Error(RI_EADDRNOTAVAIL, "route: the RNIC's address " + krdma::to_text(rnic.address) +
                                                  " is not configured on this host");
        }
    }
    int ifindex = static_cast<int>(::if_nametoindex(netdev.c_str()));
    if (ifindex == 0) return rdma::Error(RI_ENOENT, "route: the RNIC's netdev \"" + netdev + "\" does not exist");

    // The socket will bind() the RNIC's address, so ask with it as the source (policy rules for it apply); never
    // with an output interface: for a destination not routed there, the kernel would assume it is on-link and
    // answer with that interface, hiding that a bound socket would leave elsewhere.
    RouteQuery q{destination, std::nullopt, 0};
    bool from_address = has_addr && rnic.address.family == destination.family;
    if (from_address) q.source = rnic.address;
    auto r = lookup_route(q);
    if (!r) {
        if (from_address && r.error().code() == RI_EINVAL) {
            // E.g. a loopback source towards a remote host: the kernel refuses the pair.
            return rdma::Error(RI_EADDRNOTAVAIL, "route: the RNIC's address " + krdma::to_text(rnic.address) +
                                                  " cannot reach " + krdma::to_text(destination) + " (" +
                                                  r.error().message() + ")");
        }
        return r.error();
    }
    if (r->ifindex == ifindex) return r;
    if (r->loopback_device && ((has_addr && krdma::is_loopback(rnic.address)) || r->local())) return r;
    return rdma::Error(RI_EADDRNOTAVAIL, "route: " + krdma::to_text(destination) + " is reached through " + r->ifname +
                                          ", not through the RNIC's netdev " + netdev);
}

rdma::Expected<ri_net_addr_t> source_for(const RnicBinding &rnic, const ri_net_addr_t &destination) {
    auto r = lookup_route_for(rnic, destination);
    if (!r) return r.error();
    if (krdma::net_addr_len(rnic.address) != 0 && rnic.address.family == destination.family) return rnic.address;
    if (r->preferred_source) return *r->preferred_source;
    return rdma::Error(RI_EADDRNOTAVAIL, "route: the RNIC's netdev has no " +
                                          std::string(destination.family == RI_AF_INET6 ? "IPv6" : "IPv4") +
                                          " source address for " + krdma::to_text(destination));
}

struct RouteCache::Impl {
    Socket monitor;  // subscribed to the change groups, non-blocking; null when it could not be opened
    mutable std::mutex mutex;
    std::map<std::string, Route> entries;
    uint64_t generation = 0;  // changes seen so far
    Stats stats;

    // Empties the cache when the tables changed since the last look. mutex held.
    void follow_changes() {
        if (!changed()) return;
        entries.clear();
        ++generation;
        ++stats.flushes;
    }

    // Reads every pending notification; true when there was any (or some were lost to an overflow).
    bool changed() {
        const int fd = nl_socket_get_fd(monitor.get());
        bool any = false;
        for (;;) {
            char buf[8192];
            const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
            if (n >= 0 || errno == ENOBUFS) {
                any = true;
                continue;
            }
            if (errno == EINTR) continue;
            return any;
        }
    }
};

namespace {

// The cache key: every byte the answer depends on.
std::string route_key(const RnicBinding &rnic, const ri_net_addr_t &destination) {
    std::string k(reinterpret_cast<const char *>(&rnic.address), sizeof rnic.address);
    k.append(reinterpret_cast<const char *>(&destination), sizeof destination);
    k.append(rnic.netdev);
    return k;
}

}  // namespace

RouteCache::RouteCache() : impl_(std::make_unique<Impl>()) {
    Socket sk(nl_socket_alloc());
    if (!sk) return;
    nl_socket_disable_seq_check(sk.get());
    if (nl_connect(sk.get(), NETLINK_ROUTE) < 0) return;
    if (nl_socket_add_memberships(sk.get(), RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR,
                                  RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE,
                                  0) < 0 ||
        nl_socket_set_nonblocking(sk.get()) < 0) {
        return;
    }
    impl_->monitor = std::move(sk);
}

RouteCache::~RouteCache() = default;

bool RouteCache::watching() const noexcept { return impl_->monitor != nullptr; }

RouteCache::Stats RouteCache::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->stats;
}

rdma::Expected<Route> RouteCache::route_for(const RnicBinding &rnic, const ri_net_addr_t &destination) {
    Impl &m = *impl_;
    if (!m.monitor) return lookup_route_for(rnic, destination);
    const std::string key = route_key(rnic, destination);
    uint64_t generation;
    {
        std::lock_guard lock(m.mutex);
        m.follow_changes();
        if (auto it = m.entries.find(key); it != m.entries.end()) {
            ++m.stats.hits;
            return it->second;
        }
        ++m.stats.misses;
        generation = m.generation;
    }
    // Looked up without the lock, so that one slow look-up holds up no other. The answer is kept only if no change
    // was announced meanwhile (read now, or already read by another caller): it may predate that change.
    auto r = lookup_route_for(rnic, destination);
    if (r) {
        std::lock_guard lock(m.mutex);
        m.follow_changes();
        if (m.generation == generation) {
            if (m.entries.size() >= kMaxEntries) m.entries.clear();
            m.entries.emplace(key, *r);
        }
    }
    return r;
}

rdma::Expected<std::optional<Neighbour>> lookup_neighbour(const Route &route) {
    if (route.local() || route.loopback_device || route.ifindex == 0) return std::optional<Neighbour>{};
    auto sk = open_rtnl();
    if (!sk) return sk.error();
    nl_cache *raw_cache = nullptr;
    if (int e = rtnl_neigh_alloc_cache(sk->get(), &raw_cache); e < 0) {
        return rdma::Error(RI_EIO, std::string("route: reading the neighbour table: ") + nl_geterror(e));
    }
    std::unique_ptr<nl_cache, CacheFree> cache(raw_cache);
    const ri_net_addr_t &hop = route.next_hop();
    std::unique_ptr<nl_addr, AddrPut> addr(nl_addr_build(af_of(hop), hop.addr, krdma::net_addr_len(hop)));
    if (!addr) return rdma::Error(RI_ENOMEM, "route: cannot allocate a netlink address");
    std::unique_ptr<rtnl_neigh, NeighPut> n(rtnl_neigh_get(cache.get(), route.ifindex, addr.get()));
    if (!n) return std::optional<Neighbour>{};
    Neighbour out;
    char buf[128] = {};
    if (nl_addr *ll = rtnl_neigh_get_lladdr(n.get()); ll != nullptr && nl_addr_get_len(ll) != 0) {
        out.lladdr = nl_addr2str(ll, buf, sizeof(buf));
    }
    out.state = rtnl_neigh_get_state(n.get());
    out.state_name = rtnl_neigh_state2str(out.state, buf, sizeof(buf));
    return std::optional<Neighbour>(std::move(out));
}

}  // namespace kal::llp
