// Route and next-hop look-ups against the real host tables and, as root, against a pair of private network
// namespaces joined by a veth pair, with routes, a policy rule and a static neighbour made for the test.
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "route.hpp"
#include "status_matchers.hpp"

namespace {

using kal::llp::lookup_neighbour;
using kal::llp::lookup_route;
using kal::llp::lookup_route_for;
using krdma::parse_net_addr;
using kal::llp::RnicBinding;
using kal::llp::Route;
using kal::llp::RouteQuery;
using kal::llp::source_for;
using krdma::to_text;

ri_net_addr_t addr(const char *text) {
    auto a = krdma::parse_net_addr(text);
    EXPECT_OK(a) << text;
    return a ? *a : ri_net_addr_t{};
}

std::string text_of(const std::optional<ri_net_addr_t> &a) { return a ? krdma::to_text(*a) : "(none)"; }

// The host's default IPv4 route from /proc/net/route, read without netlink: device and gateway.
struct DefaultRoute {
    std::string dev;
    std::string gateway;
};
std::optional<DefaultRoute> proc_default_route() {
    std::ifstream in("/proc/net/route");
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string dev, dst, gw;
        f >> dev >> dst >> gw;
        if (dst != "00000000") continue;
        uint32_t g = static_cast<uint32_t>(std::stoul(gw, nullptr, 16));  // network order, printed as host word
        ri_net_addr_t a{};
        a.family = RI_AF_INET;
        std::memcpy(a.addr, &g, 4);
        return DefaultRoute{dev, krdma::to_text(a)};
    }
    return std::nullopt;
}

// A non-loopback IPv4 address of this host, if it has one.
std::optional<std::string> host_ipv4() {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) return std::nullopt;
    std::optional<std::string> out;
    for (ifaddrs *i = list; i != nullptr && !out; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        sockaddr_storage ss{};
        std::memcpy(&ss, i->ifa_addr, sizeof(sockaddr_in));
        auto a = krdma::net_addr_from_sockaddr(ss);
        if (a && !krdma::is_loopback(*a)) out = krdma::to_text(*a);
    }
    ::freeifaddrs(list);
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Address helpers

TEST(LlpNetAddr, ParsesAndPrintsBothFamilies) {
    auto v4 = krdma::parse_net_addr("192.0.2.17");
    ASSERT_OK(v4);
    EXPECT_EQ(v4->family, RI_AF_INET);
    EXPECT_EQ(v4->addr[3], 17);
    EXPECT_EQ(krdma::to_text(*v4), "192.0.2.17");
    auto v6 = krdma::parse_net_addr("2001:db8::5");
    ASSERT_OK(v6);
    EXPECT_EQ(v6->family, RI_AF_INET6);
    EXPECT_EQ(krdma::to_text(*v6), "2001:db8::5");
    auto scoped = krdma::parse_net_addr("fe80::1%lo");
    ASSERT_OK(scoped);
    EXPECT_NE(scoped->scope_id, 0u);
    EXPECT_STATUS(krdma::parse_net_addr("fe80::1%nosuchdev0"), RI_ENOENT);
    EXPECT_STATUS(krdma::parse_net_addr("192.0.2.1%lo"), RI_EINVAL);  // IPv4 has no scope
    EXPECT_STATUS(krdma::parse_net_addr("GET / HTTP/1.1"), RI_EINVAL);
    EXPECT_STATUS(krdma::parse_net_addr(""), RI_EINVAL);
    EXPECT_TRUE(krdma::is_loopback(addr("127.3.2.1")));
    EXPECT_TRUE(krdma::is_loopback(addr("::1")));
    EXPECT_TRUE(krdma::is_loopback(addr("::ffff:127.0.0.1")));
    EXPECT_FALSE(krdma::is_loopback(addr("192.0.2.1")));
    EXPECT_TRUE(krdma::same_net_addr(addr("192.0.2.1"), addr("192.0.2.1")));
    EXPECT_FALSE(krdma::same_net_addr(addr("192.0.2.1"), addr("192.0.2.2")));
    // Through a socket address and back, with the port.
    sockaddr_storage ss = krdma::to_sockaddr(*v6, 4791);
    EXPECT_EQ(ss.ss_family, AF_INET6);
    EXPECT_EQ(krdma::sockaddr_len(*v6), sizeof(sockaddr_in6));
    uint16_t port = 0;
    auto back = krdma::net_addr_from_sockaddr(ss, &port);
    ASSERT_OK(back);
    EXPECT_TRUE(krdma::same_net_addr(*back, *v6));
    EXPECT_EQ(port, 4791);
    sockaddr_storage unix_addr{};
    unix_addr.ss_family = AF_UNIX;
    EXPECT_FALSE(krdma::net_addr_from_sockaddr(unix_addr));
    // A dual-stack socket's IPv4 connection (an IPv4-mapped IPv6 address) is the IPv4 address it maps: RNICs and
    // peers know it by that.
    sockaddr_storage mapped = krdma::to_sockaddr(addr("::ffff:127.0.0.1"), 5201);
    ASSERT_EQ(mapped.ss_family, AF_INET6);
    auto mapped_back = krdma::net_addr_from_sockaddr(mapped, &port);
    ASSERT_OK(mapped_back);
    EXPECT_EQ(mapped_back->family, RI_AF_INET) << "an IPv4-mapped address must come back as IPv4";
    EXPECT_TRUE(krdma::same_net_addr(*mapped_back, addr("127.0.0.1"))) << krdma::to_text(*mapped_back);
    EXPECT_EQ(port, 5201);
}

// ---------------------------------------------------------------------------------------------------------------
// The host's own tables

TEST(LlpRoute, LoopbackGoesThroughLo) {
    auto r = lookup_route("127.0.0.1");
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, "lo");
    EXPECT_TRUE(r->loopback_device);
    EXPECT_TRUE(r->local());
    EXPECT_EQ(r->type, RTN_LOCAL);
    EXPECT_FALSE(r->gateway.has_value());
    EXPECT_EQ(text_of(r->preferred_source), "127.0.0.1");
    EXPECT_EQ(krdma::to_text(r->next_hop()), "127.0.0.1");
    auto n = lookup_neighbour(*r);
    ASSERT_OK(n);
    EXPECT_FALSE(n->has_value());  // local traffic has no neighbour
}

TEST(LlpRoute, Ipv6LoopbackGoesThroughLo) {
    std::ifstream if6("/proc/net/if_inet6");
    if (!if6) GTEST_SKIP() << "IPv6 is disabled on this host";
    auto r = lookup_route("::1");
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, "lo");
    EXPECT_TRUE(r->local());
}

TEST(LlpRoute, OwnAddressIsLocal) {
    auto mine = host_ipv4();
    if (!mine) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
    auto r = lookup_route(*mine);
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_TRUE(r->local());
    EXPECT_TRUE(r->loopback_device);
}

TEST(LlpRoute, DefaultRouteMatchesProcNetRoute) {
    auto def = proc_default_route();
    if (!def) GTEST_SKIP() << "this host has no default IPv4 route";
    auto r = lookup_route("198.51.100.7");  // TEST-NET-2: only a default route reaches it
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, def->dev);
    EXPECT_EQ(text_of(r->gateway), def->gateway);
    EXPECT_EQ(r->type, RTN_UNICAST);
    EXPECT_FALSE(r->loopback_device);
    EXPECT_TRUE(r->preferred_source.has_value());
}

TEST(LlpRoute, UnroutableWithoutDefaultRoute) {
    if (proc_default_route()) GTEST_SKIP() << "this host has a default route: every address is routable here "
                                              "(the namespace tests cover the unroutable case)";
    auto r = lookup_route("203.0.113.1");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ENETUNREACH);
}

TEST(LlpRoute, BadQueriesAreRefused) {
    EXPECT_STATUS(lookup_route("not.an.address"), RI_EINVAL);
    EXPECT_STATUS(lookup_route(RouteQuery{}), RI_EINVAL);
    RouteQuery mixed{addr("127.0.0.1"), addr("::1"), 0};
    EXPECT_STATUS(lookup_route(mixed), RI_EINVAL);
    RouteQuery foreign_source{addr("127.0.0.1"), addr("203.0.113.9"), 0};  // not an address of this host
    auto r = lookup_route(foreign_source);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().code() == ENETUNREACH || r.error().code() == RI_EINVAL) << r.error().to_string();
    // A loopback source towards a remote host is refused by the kernel.
    if (proc_default_route()) {
        auto lo_out = lookup_route(RouteQuery{addr("198.51.100.7"), addr("127.0.0.1"), 0});
        ASSERT_FALSE(lo_out);
        EXPECT_STATUS(lo_out, RI_EINVAL) << lo_out.error().to_string();
    }
}

TEST(LlpRoute, RnicOnLoopback) {
    RnicBinding lo{addr("127.0.0.1"), "lo"};
    auto r = lookup_route_for(lo, addr("127.0.0.1"));
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, "lo");
    auto src = source_for(lo, addr("127.0.0.2"));
    ASSERT_OK(src) << src.error().to_string();
    EXPECT_EQ(krdma::to_text(*src), "127.0.0.1");
    // Bound by netdev only: the route's preferred source.
    RnicBinding lo_dev{ri_net_addr_t{}, "lo"};
    auto src2 = source_for(lo_dev, addr("127.0.0.5"));
    ASSERT_OK(src2) << src2.error().to_string();
    EXPECT_EQ(krdma::to_text(*src2), "127.0.0.1");
    // Bound by address only: the netdev is found from the address.
    RnicBinding lo_addr{addr("127.0.0.1"), ""};
    EXPECT_OK(lookup_route_for(lo_addr, addr("127.0.0.1")));
    // A loopback RNIC cannot reach the outside world.
    if (proc_default_route()) {
        auto out = lookup_route_for(lo, addr("198.51.100.7"));
        ASSERT_FALSE(out);
        EXPECT_EQ(out.error().code(), EADDRNOTAVAIL) << out.error().to_string();
        EXPECT_EQ(source_for(lo, addr("198.51.100.7")).error().code(), EADDRNOTAVAIL);
    }
}

TEST(LlpRoute, RnicOnAnotherNetdevMayReachLocalAddresses) {
    auto mine = host_ipv4();
    if (!mine) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
    RnicBinding rnic{addr(mine->c_str()), ""};
    // 127.0.0.1 is an address of this host: through lo is fine even for an RNIC on a real netdev.
    auto r = lookup_route_for(rnic, addr("127.0.0.1"));
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_TRUE(r->local());
    auto src = source_for(rnic, addr("127.0.0.1"));
    ASSERT_OK(src);
    EXPECT_EQ(krdma::to_text(*src), *mine);
}

TEST(LlpRoute, BadBindingsAreRefused) {
    EXPECT_STATUS(lookup_route_for(RnicBinding{}, addr("127.0.0.1")), RI_EINVAL);
    EXPECT_STATUS(lookup_route_for(RnicBinding{ri_net_addr_t{}, "nosuchdev0"}, addr("127.0.0.1")), RI_ENOENT);
    // 198.18.0.0/15 is benchmarking space that no test host is given.
    auto absent = addr("198.18.255.254");
    EXPECT_EQ(lookup_route_for(RnicBinding{absent, ""}, addr("127.0.0.1")).error().code(), EADDRNOTAVAIL);
}

TEST(LlpRouteCache, KeepsAnAnswerAndRefusalsAreAskedAgain) {
    kal::llp::RouteCache cache;
    ASSERT_TRUE(cache.watching());
    RnicBinding lo{addr("127.0.0.1"), "lo"};
    auto first = cache.route_for(lo, addr("127.0.0.1"));
    ASSERT_OK(first) << first.error().to_string();
    auto second = cache.route_for(lo, addr("127.0.0.1"));
    ASSERT_OK(second) << second.error().to_string();
    EXPECT_EQ(second->ifname, first->ifname);
    EXPECT_EQ(second->type, first->type);
    auto s = cache.stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.hits, 1u);
    // A refusal is not kept: the binding may become valid (its address configured) without a route change.
    auto absent = addr("198.18.255.254");
    EXPECT_EQ(cache.route_for(RnicBinding{absent, ""}, addr("127.0.0.1")).error().code(), EADDRNOTAVAIL);
    EXPECT_EQ(cache.route_for(RnicBinding{absent, ""}, addr("127.0.0.1")).error().code(), EADDRNOTAVAIL);
    EXPECT_EQ(cache.stats().misses, 3u);
}

// ---------------------------------------------------------------------------------------------------------------
// Private namespaces (root only)

int sh(const std::string &cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// Runs f() on a thread that has entered network namespace @p ns; netlink sockets f() opens live there.
template <class F>
auto in_netns(const std::string &ns, F f) -> decltype(f()) {
    std::optional<decltype(f())> out;
    std::string why;
    std::thread t([&] {
        int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
            why = std::strerror(errno);
            if (fd >= 0) ::close(fd);
            return;
        }
        ::close(fd);
        out.emplace(f());
    });
    t.join();
    if (!out) return rdma::Error(RI_EIO, "cannot enter namespace " + ns + ": " + why);
    return std::move(*out);
}

// Two namespaces, A (10.77.0.1 on veth va) and B (10.77.0.2 on vb). A has:
//   10.88.0.0/24 via 10.77.0.2;  10.55.0.0/24 via 10.77.0.2 mtu 1400;  unreachable 10.66.0.0/24;
//   rule "from 10.77.0.1 lookup 100" with 10.44.0.0/24 via 10.77.0.2 in table 100;
//   a permanent neighbour entry for 10.77.0.2.
// No default route. Names carry the pid so that parallel runs do not collide; TearDown always deletes both
// namespaces (which deletes the veth pair with them), also after a failed SetUp.
class LlpRouteNetns : public ::testing::Test {
protected:
    void SetUp() override {
        if (::geteuid() != 0) {
            GTEST_SKIP() << "network namespaces need root";
        }
        if (sh("ip -V") != 0) {
            GTEST_SKIP() << "iproute2 is not installed";
        }
        std::string pid = std::to_string(::getpid());
        ns_a_ = "llprouteA" + pid;
        ns_b_ = "llprouteB" + pid;
        va_ = "llpa" + pid;  // at most 4 + 7 characters: inside IFNAMSIZ
        vb_ = "llpb" + pid;
        ASSERT_EQ(sh("ip netns add " + ns_a_), 0);
        created_a_ = true;
        ASSERT_EQ(sh("ip netns add " + ns_b_), 0);
        created_b_ = true;
        const std::string a = "ip -n " + ns_a_ + " ", b = "ip -n " + ns_b_ + " ";
        for (const std::string &cmd : {
                 "ip link add " + va_ + " netns " + ns_a_ + " type veth peer name " + vb_ + " netns " + ns_b_,
                 a + "link set lo up", b + "link set lo up",
                 a + "addr add 10.77.0.1/24 dev " + va_, b + "addr add 10.77.0.2/24 dev " + vb_,
                 a + "link set " + va_ + " up", b + "link set " + vb_ + " up",
                 a + "route add 10.88.0.0/24 via 10.77.0.2",
                 a + "route add 10.55.0.0/24 via 10.77.0.2 mtu 1400",
                 a + "route add unreachable 10.66.0.0/24",
                 a + "route add 10.44.0.0/24 via 10.77.0.2 table 100",
                 a + "rule add from 10.77.0.1 lookup 100",
                 a + "neigh replace 10.77.0.2 lladdr 02:00:00:00:77:02 dev " + va_ + " nud permanent"}) {
            ASSERT_EQ(sh(cmd), 0) << cmd;
        }
    }
    void TearDown() override {
        if (created_a_) {
            EXPECT_EQ(sh("ip netns del " + ns_a_), 0);
        }
        if (created_b_) {
            EXPECT_EQ(sh("ip netns del " + ns_b_), 0);
        }
    }

    std::string ns_a_, ns_b_, va_, vb_;
    bool created_a_ = false, created_b_ = false;
};

TEST_F(LlpRouteNetns, OnLinkDestinationHasNoGateway) {
    auto r = in_netns(ns_a_, [] { return lookup_route("10.77.0.2"); });
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, va_);
    EXPECT_FALSE(r->gateway.has_value());
    EXPECT_EQ(text_of(r->preferred_source), "10.77.0.1");
    EXPECT_EQ(r->type, RTN_UNICAST);
    EXPECT_FALSE(r->loopback_device);
}

TEST_F(LlpRouteNetns, GatewayAndItsNeighbour) {
    auto r = in_netns(ns_a_, [] { return lookup_route("10.88.0.5"); });
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->ifname, va_);
    EXPECT_EQ(text_of(r->gateway), "10.77.0.2");
    EXPECT_EQ(krdma::to_text(r->next_hop()), "10.77.0.2");
    EXPECT_EQ(r->mtu, 0u);
    Route route = *r;
    auto n = in_netns(ns_a_, [&] { return lookup_neighbour(route); });
    ASSERT_OK(n) << n.error().to_string();
    ASSERT_TRUE(n->has_value());
    EXPECT_EQ((*n)->lladdr, "02:00:00:00:77:02");
    EXPECT_EQ((*n)->state_name, "permanent");
}

TEST_F(LlpRouteNetns, RouteMtu) {
    auto r = in_netns(ns_a_, [] { return lookup_route("10.55.0.9"); });
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->mtu, 1400u);
    EXPECT_EQ(text_of(r->gateway), "10.77.0.2");
}

TEST_F(LlpRouteNetns, NoRouteAndUnreachableRoute) {
    auto none = in_netns(ns_a_, [] { return lookup_route("203.0.113.1"); });
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code(), ENETUNREACH) << none.error().to_string();
    auto unreachable = in_netns(ns_a_, [] { return lookup_route("10.66.0.1"); });
    ASSERT_FALSE(unreachable);
    EXPECT_EQ(unreachable.error().code(), EHOSTUNREACH) << unreachable.error().to_string();
}

TEST_F(LlpRouteNetns, PolicyRoutingFollowsTheSource) {
    // Only the rule for source 10.77.0.1 leads to table 100: the kernel's own look-up applies it.
    auto plain = in_netns(ns_a_, [] { return lookup_route("10.44.0.1"); });
    ASSERT_FALSE(plain);
    EXPECT_EQ(plain.error().code(), ENETUNREACH);
    auto from = in_netns(ns_a_, [] { return lookup_route(RouteQuery{addr("10.44.0.1"), addr("10.77.0.1"), 0}); });
    ASSERT_OK(from) << from.error().to_string();
    EXPECT_EQ(text_of(from->gateway), "10.77.0.2");
    EXPECT_EQ(from->table, 100u);
    // An RNIC on 10.77.0.1 gets there, because its address is the source of the query.
    RnicBinding rnic{addr("10.77.0.1"), ""};
    auto r = in_netns(ns_a_, [&] { return lookup_route_for(rnic, addr("10.44.0.1")); });
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->table, 100u);
}

TEST_F(LlpRouteNetns, RnicNetdevIsEnforced) {
    RnicBinding veth{addr("10.77.0.1"), ""};
    auto ok = in_netns(ns_a_, [&] { return lookup_route_for(veth, addr("10.88.0.5")); });
    ASSERT_OK(ok) << ok.error().to_string();
    EXPECT_EQ(ok->ifname, va_);
    auto src = in_netns(ns_a_, [&] { return source_for(veth, addr("10.88.0.5")); });
    ASSERT_OK(src);
    EXPECT_EQ(krdma::to_text(*src), "10.77.0.1");
    // Bound by netdev only: the source is the route's preferred one.
    RnicBinding by_dev{ri_net_addr_t{}, va_};
    auto src2 = in_netns(ns_a_, [&] { return source_for(by_dev, addr("10.88.0.5")); });
    ASSERT_OK(src2) << src2.error().to_string();
    EXPECT_EQ(krdma::to_text(*src2), "10.77.0.1");
    // An RNIC on lo does not reach the veth's networks.
    RnicBinding lo{addr("127.0.0.1"), "lo"};
    auto bad = in_netns(ns_a_, [&] { return lookup_route_for(lo, addr("10.88.0.5")); });
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code(), EADDRNOTAVAIL);
    RnicBinding lo_dev{ri_net_addr_t{}, "lo"};
    auto bad2 = in_netns(ns_a_, [&] { return lookup_route_for(lo_dev, addr("10.77.0.2")); });
    ASSERT_FALSE(bad2);
    EXPECT_EQ(bad2.error().code(), EADDRNOTAVAIL) << bad2.error().to_string();
    // The veth RNIC may still reach this host's own addresses through lo.
    auto local = in_netns(ns_a_, [&] { return lookup_route_for(veth, addr("127.0.0.1")); });
    ASSERT_OK(local) << local.error().to_string();
    EXPECT_TRUE(local->local());
}

// The cache answers as a fresh look-up would right after the tables change: the route deleted, then added back.
TEST_F(LlpRouteNetns, TheRouteCacheFollowsEveryChange) {
    std::unique_ptr<kal::llp::RouteCache> cache;
    ASSERT_OK(in_netns(ns_a_, [&]() -> rdma::Expected<void> {
        cache = std::make_unique<kal::llp::RouteCache>();
        return {};
    }));
    ASSERT_TRUE(cache->watching());
    RnicBinding veth{addr("10.77.0.1"), ""};
    auto ask = [&] { return in_netns(ns_a_, [&] { return cache->route_for(veth, addr("10.88.0.5")); }); };
    auto r = ask();
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(text_of(r->gateway), "10.77.0.2");
    ASSERT_OK(ask());
    EXPECT_EQ(cache->stats().hits, 1u);
    const std::string a = "ip -n " + ns_a_ + " ";
    ASSERT_EQ(sh(a + "route del 10.88.0.0/24"), 0);
    auto gone = ask();
    ASSERT_FALSE(gone) << "a kept answer outlived its route";
    EXPECT_EQ(gone.error().code(), ENETUNREACH) << gone.error().to_string();
    EXPECT_GE(cache->stats().flushes, 1u);
    ASSERT_EQ(sh(a + "route add 10.88.0.0/24 via 10.77.0.2"), 0);
    auto back = ask();
    ASSERT_OK(back) << back.error().to_string();
    // A new address is a change too: a kept answer is asked again after it.
    const auto misses = cache->stats().misses;
    ASSERT_EQ(sh(a + "addr add 10.77.0.9/24 dev " + va_), 0);
    ASSERT_OK(ask());
    EXPECT_EQ(cache->stats().misses, misses + 1);
}

TEST_F(LlpRouteNetns, TheOtherNamespaceSeesItsOwnTables) {
    // B has no route to 10.88.0.0/24: the look-up really runs in the calling thread's namespace.
    auto r = in_netns(ns_b_, [] { return lookup_route("10.88.0.5"); });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ENETUNREACH);
    auto back = in_netns(ns_b_, [] { return lookup_route("10.77.0.1"); });
    ASSERT_OK(back) << back.error().to_string();
    EXPECT_EQ(back->ifname, vb_);
}

}  // namespace
