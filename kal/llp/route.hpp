/**
 * @file route.hpp
 * @brief LLP management: route and next-hop look-ups in the host's tables, through an RTM_GETROUTE query to the
 *        kernel (libnl-route), so that policy routing, source routing and cached path MTUs count exactly as they do
 *        for the TCP connection itself.
 *
 * Each call is one synchronous netlink round trip to the kernel of the calling thread's network namespace (no
 * network I/O; microseconds). The functions cache nothing; RouteCache keeps answers until the kernel announces a
 * change, for the kAL's connection setup.
 */
#ifndef KAL_LLP_ROUTE_HPP
#define KAL_LLP_ROUTE_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "krdma/net_addr.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/ri_verbs.h"

namespace kal::llp {

/** @brief What a route look-up asks the kernel. */
struct RouteQuery {
    ri_net_addr_t destination{};         /**< Where to (IPv4 or IPv6; an IPv6 scope selects the interface). */
    std::optional<ri_net_addr_t> source; /**< Require this local source address (it selects policy rules too). */
    int ifindex = 0;                     /**< Require this output interface (0: any). */
};

/** @brief The route the kernel would use. */
struct Route {
    ri_net_addr_t destination{};                   /**< The destination asked for. */
    int ifindex = 0;                               /**< Output interface. */
    std::string ifname;                            /**< Its name ("eth0", "lo"). */
    bool loopback_device = false;                  /**< The output interface is a loopback device. */
    std::optional<ri_net_addr_t> gateway;          /**< Next hop; none when the destination is on-link or local. */
    std::optional<ri_net_addr_t> preferred_source; /**< The source address the kernel would pick. */
    uint32_t mtu = 0;                              /**< The route's MTU (its metric or a learnt path MTU), 0 if none. */
    uint32_t table = 0;                            /**< Routing table that matched. */
    uint8_t type = 0;                              /**< RTN_UNICAST, RTN_LOCAL, ... */
    /** @brief The destination is an address of this host. */
    [[nodiscard]] bool local() const noexcept;
    /** @brief The next hop: the gateway, or the destination itself when on-link. */
    [[nodiscard]] const ri_net_addr_t &next_hop() const noexcept { return gateway ? *gateway : destination; }
};

/** @brief What an RNIC instance is bound to (ri_attach_params_t): an address, a netdev, or both. */
struct RnicBinding {
    ri_net_addr_t address{}; /**< The RNIC's address, ::RI_AF_NONE when bound by netdev only. */
    std::string netdev;      /**< The RNIC's netdev, empty to take the one that holds @ref address. */
};

/**
 * @brief The route to @p query's destination, as the kernel answers RTM_GETROUTE. ::RI_ENETUNREACH when no route
 *        matches, ::RI_EHOSTUNREACH for an unreachable route; otherwise the kernel's own errno (::RI_EACCES for a
 *        prohibit route, ::RI_EINVAL for a blackhole route or a source it refuses, such as a loopback source
 *        towards a remote destination; a source address the host does not have reads as unroutable); ::RI_EINVAL
 *        for an empty destination or a broadcast/multicast one, ::RI_EIO when netlink itself fails.
 *
 * The kernel's errno values outside the RNIC-PI vocabulary become its nearest member (rdma::from_errno).
 */
[[nodiscard]] rdma::Expected<Route> lookup_route(const RouteQuery &query);
/** @brief lookup_route() to a destination given as text ("192.0.2.1", "2001:db8::1", "fe80::1%eth0"). */
[[nodiscard]] rdma::Expected<Route> lookup_route(std::string_view destination);

/**
 * @brief The route a connection of RNIC @p rnic to @p destination takes: asked with the RNIC's address as the
 *        source when it has one of the destination's family (so policy rules for that source apply), else as the
 *        host would route it, and checked against the RNIC's netdev.
 *        ::RI_EADDRNOTAVAIL when the route leaves through a netdev other than the RNIC's; a route through the loopback
 *        device is accepted when the RNIC's address is a loopback address or the destination is an address of this
 *        host. ::RI_EINVAL for a binding with neither address nor netdev, ::RI_ENOENT for an unknown netdev, and the
 *        errors of lookup_route().
 */
[[nodiscard]] rdma::Expected<Route> lookup_route_for(const RnicBinding &rnic, const ri_net_addr_t &destination);

/**
 * @brief The local address to bind() before connect() so that a connection to @p destination leaves from RNIC
 *        @p rnic: its own address when it has one of the destination's family, else the preferred source of the
 *        route through its netdev. Errors as lookup_route_for(); ::RI_EADDRNOTAVAIL when no source address fits.
 */
[[nodiscard]] rdma::Expected<ri_net_addr_t> source_for(const RnicBinding &rnic, const ri_net_addr_t &destination);

/**
 * @brief lookup_route_for() with its answers kept for the connections that follow: a look-up costs an address dump,
 *        a netlink socket and a handful of ioctls, a kept answer one recv() that finds nothing.
 *
 * An rtnetlink socket subscribed to every change that can alter an answer (links, IPv4 and IPv6 addresses, routes
 * and policy rules) is read before each use; any notification on it, or its overflow, empties the cache. The kernel
 * queues a notification before the request that made the change returns, so the next look-up after a change sees
 * it as one without the cache would. Only successful answers are kept (a refusal is asked again each time), and at
 * most kMaxEntries. A learnt path MTU notifies nobody: Route::mtu of a kept answer may be older than the kernel's
 * (connection setup does not use it). Without a monitor socket (watching() false) every call looks up.
 *
 * Thread-safe. It answers for the network namespace of the thread that created it; call it from that namespace.
 */
class RouteCache {
public:
    /** @brief Answers kept at most; a full cache is emptied. */
    static constexpr size_t kMaxEntries = 4096;
    /** @brief Counters. */
    struct Stats {
        uint64_t hits = 0;    /**< Answers served from the cache. */
        uint64_t misses = 0;  /**< Look-ups made. */
        uint64_t flushes = 0; /**< Times a change notification emptied it. */
    };

    /** @brief Subscribes to the change notifications of the calling thread's network namespace. */
    RouteCache();
    ~RouteCache();
    RouteCache(const RouteCache &) = delete;
    RouteCache &operator=(const RouteCache &) = delete;

    /** @brief lookup_route_for(@p rnic, @p destination), answered from the cache when the tables have not changed. */
    [[nodiscard]] rdma::Expected<Route> route_for(const RnicBinding &rnic, const ri_net_addr_t &destination);
    /** @brief The counters so far. */
    [[nodiscard]] Stats stats() const;
    /** @brief False when no monitor socket could be opened: nothing is kept then. */
    [[nodiscard]] bool watching() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/** @brief The kernel's neighbour entry of a next hop. */
struct Neighbour {
    std::string lladdr; /**< Link-layer address as text ("02:00:00:00:00:02"), empty while unresolved. */
    int state = 0;      /**< NUD_* state bits. */
    std::string state_name; /**< The state as iproute2 names it ("reachable", "permanent", "stale"...). */
};
/**
 * @brief The neighbour entry of @p route's next hop, for reporting (no resolution is triggered); nothing when the
 *        kernel has none. ::RI_EIO when netlink fails.
 */
[[nodiscard]] rdma::Expected<std::optional<Neighbour>> lookup_neighbour(const Route &route);

}  // namespace kal::llp

#endif  // KAL_LLP_ROUTE_HPP
