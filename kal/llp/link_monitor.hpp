/**
 * @file link_monitor.hpp
 * @brief LLP management: the operational state of the host's network devices, from rtnetlink link notifications,
 *        so the kAL can tell consumers when an RNIC's link goes down or comes back (RI_AE_RNIC_LINK_DOWN/UP).
 */
#ifndef KAL_LLP_LINK_MONITOR_HPP
#define KAL_LLP_LINK_MONITOR_HPP

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rnicpi/cpp/status.hpp"

namespace kal::llp {

/** @brief A network device whose link went down or came up. */
struct LinkChange {
    std::string netdev; /**< Its name. */
    bool up = false;    /**< Up now: administratively up and with carrier (IFF_UP and IFF_RUNNING). */
};

/**
 * @brief Watches the network devices of the caller's network namespace (an RTMGRP_LINK rtnetlink socket).
 *        Move-only; not thread-safe (the kAL reads it on its device server's thread).
 */
class LinkMonitor {
public:
    /** @brief Subscribes to link notifications and records every device's state now. */
    [[nodiscard]] static rdma::Expected<LinkMonitor> open();
    LinkMonitor(LinkMonitor &&o) noexcept;
    LinkMonitor &operator=(LinkMonitor &&o) noexcept;
    LinkMonitor(const LinkMonitor &) = delete;
    LinkMonitor &operator=(const LinkMonitor &) = delete;
    ~LinkMonitor();

    /** @brief A descriptor that polls readable when notifications are pending. */
    [[nodiscard]] int fd() const noexcept { return fd_; }
    /**
     * @brief Reads the pending notifications without blocking: the devices whose state changed since it was last
     *        known. A device seen for the first time (created after open()) is recorded, not reported.
     */
    [[nodiscard]] std::vector<LinkChange> changes();
    /** @brief Whether @p netdev is up now (IFF_UP and IFF_RUNNING); nothing for a device that does not exist. */
    [[nodiscard]] static std::optional<bool> is_up(const std::string &netdev);

private:
    explicit LinkMonitor(int fd) noexcept : fd_(fd) {}
    int fd_ = -1;
    std::map<int, bool> up_;  // by interface index
};

}  // namespace kal::llp

#endif  // KAL_LLP_LINK_MONITOR_HPP
