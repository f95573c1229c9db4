// LLP management: link state of the host's network devices from rtnetlink (RTMGRP_LINK notifications).
#include "link_monitor.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kal::llp {
namespace {

bool running(unsigned flags) { return (flags & IFF_UP) != 0 && (flags & IFF_RUNNING) != 0; }

}  // namespace

rdma::Expected<LinkMonitor> LinkMonitor::open() {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return rdma::Error(errno, std::string("rtnetlink socket: ") + std::strerror(errno));
    LinkMonitor m(fd);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
        return rdma::Error(errno, std::string("rtnetlink bind: ") + std::strerror(errno));
    }
    // Subscribed first, then the states now: a change in between shows as a notification, never as a gap.
    if (struct if_nameindex *all = ::if_nameindex()) {
        for (struct if_nameindex *i = all; i->if_index != 0; ++i) {
            if (auto up = is_up(i->if_name)) m.up_[static_cast<int>(i->if_index)] = *up;
        }
        ::if_freenameindex(all);
    }
    return m;
}

LinkMonitor::LinkMonitor(LinkMonitor &&o) noexcept : fd_(std::exchange(o.fd_, -1)), up_(std::move(o.up_)) {}

LinkMonitor &LinkMonitor::operator=(LinkMonitor &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
        up_ = std::move(o.up_);
    }
    return *this;
}

LinkMonitor::~LinkMonitor() {
    if (fd_ >= 0) ::close(fd_);
}

std::vector<LinkChange> LinkMonitor::changes() {
    std::vector<LinkChange> out;
    alignas(nlmsghdr) char buf[16384];
    for (;;) {
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == ENOBUFS) continue;  // ENOBUFS: some were lost; the next ones still tell
            break;
        }
        if (n == 0) break;
        size_t left = static_cast<size_t>(n);
        for (auto *h = reinterpret_cast<nlmsghdr *>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
            if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) continue;
            const auto *ifi = static_cast<const ifinfomsg *>(NLMSG_DATA(h));
            std::string name;
            int rlen = static_cast<int>(IFLA_PAYLOAD(h));
            for (auto *a = IFLA_RTA(ifi); RTA_OK(a, rlen); a = RTA_NEXT(a, rlen)) {
                if (a->rta_type == IFLA_IFNAME) {
                    const auto *text = static_cast<const char *>(RTA_DATA(a));
                    name.assign(text, ::strnlen(text, RTA_PAYLOAD(a)));
                }
            }
            const bool up = h->nlmsg_type == RTM_NEWLINK && running(ifi->ifi_flags);
            auto it = up_.find(ifi->ifi_index);
            if (h->nlmsg_type == RTM_DELLINK) {
                if (it != up_.end() && it->second) out.push_back({name, false});
                if (it != up_.end()) up_.erase(it);
                continue;
            }
            if (it == up_.end()) {
                up_[ifi->ifi_index] = up;
            } else if (it->second != up) {
                it->second = up;
                out.push_back({name, up});
            }
        }
    }
    return out;
}

std::optional<bool> LinkMonitor::is_up(const std::string &netdev) {
    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return std::nullopt;
    ifreq r{};
    std::strncpy(r.ifr_name, netdev.c_str(), IFNAMSIZ - 1);
    const int rc = ::ioctl(s, SIOCGIFFLAGS, &r);
    ::close(s);
    if (rc != 0) return std::nullopt;
    return running(static_cast<unsigned>(r.ifr_flags));
}

}  // namespace kal::llp
