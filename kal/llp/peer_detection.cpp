// The kAL's TCP peer detection: the embedded sockops program, loaded with libbpf on first use.
#include "peer_detection.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "krdma/peer_marks.hpp"
#include "rnicpi/host/log.hpp"

// The object file clang built from bpf/peer_marks.bpf.c, in the library (peer_marks_object.S).
extern "C" const unsigned char openrdma_peer_marks_object[];
extern "C" const unsigned char openrdma_peer_marks_object_end[];

namespace kal::llp {
namespace {

constexpr const char *kComponent = "llp";

int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list args) {
    // libbpf's own chatter goes to the debug log; its warnings reach the failure's reason through errno.
    if (level == LIBBPF_DEBUG) return 0;
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, args);
    RDMA_LOG_DEBUG(kComponent, "libbpf: %s", line);
    return 0;
}

}  // namespace

std::string cgroup2_root() {
    std::ifstream in("/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);) {
        // ... MOUNT_POINT ... - FSTYPE SOURCE OPTIONS
        const auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream after(line.substr(dash + 3));
        std::string fstype;
        after >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream before(line.substr(0, dash));
        std::string id, parent, devno, root, mount;
        before >> id >> parent >> devno >> root >> mount;
        if (root == "/") return mount;  // the hierarchy's root, not a container's view of a sub-tree
    }
    return {};
}

PeerDetection::~PeerDetection() {
    if (link_ != nullptr) bpf_link__destroy(link_);  // detaches the program
    if (object_ != nullptr) bpf_object__close(object_);
}

rdma::Expected<int> PeerDetection::map_fd(bool quiet) {
    std::lock_guard lock(mutex_);
    if (!tried_) {
        tried_ = true;
        if (auto ok = load_locked(); !ok) {
            failure_ = ok.error().message();
            if (quiet) {
                RDMA_LOG_INFO(kComponent, "TCP peer detection is unavailable (the sockets layer and RFC 7306 with "
                              "other hosts are off): %s", failure_.c_str());
            } else {
                RDMA_LOG_WARN(kComponent, "peer detection for the sockets layer is unavailable: %s", failure_.c_str());
            }
        }
    }
    if (map_fd_ < 0) return rdma::Error(RI_EOPNOTSUPP, "peer detection is unavailable: " + failure_);
    return map_fd_;
}

bool PeerDetection::mark(int fd) {
    auto map = map_fd(true);
    if (!map) return false;
    krdma::PeerMark m;
    m.marked = 1;
    return bpf_map_update_elem(*map, &fd, &m, BPF_ANY) == 0;
}

bool PeerDetection::peer_marked(int fd) {
    int map = -1;
    {
        std::lock_guard lock(mutex_);
        map = map_fd_;
    }
    krdma::PeerMark m;
    return map >= 0 && bpf_map_lookup_elem(map, &fd, &m) == 0 && m.marked != 0 && m.peer == 1;
}

rdma::Expected<void> PeerDetection::load_locked() {
    if (!enabled_) return rdma::Error(RI_EOPNOTSUPP, "turned off (llp.peer_detection is false)");
    std::string root = cgroup2_root();
    std::string mounted;  // a private mount of the hierarchy, when none is visible here
    if (root.empty()) {
        // None in this mount namespace (`ip netns exec` gives its command a fresh /sys): mount the hierarchy for a
        // moment; the program's link keeps the cgroup, not the mount.
        char tmpl[] = "/tmp/krdmad-cgroup2-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) return rdma::Error(rdma::from_errno(errno), "no cgroup v2 hierarchy is mounted");
        if (::mount("none", tmpl, "cgroup2", 0, nullptr) != 0) {
            const int e = errno;
            ::rmdir(tmpl);
            return rdma::Error(rdma::from_errno(e), std::string("no cgroup v2 hierarchy is mounted, and mounting one "
                                                                "failed: ") + std::strerror(e));
        }
        root = mounted = tmpl;
    }
    struct Unmount {
        const std::string &dir;
        ~Unmount() {
            if (!dir.empty()) {
                (void)::umount2(dir.c_str(), MNT_DETACH);
                (void)::rmdir(dir.c_str());
            }
        }
    } unmount{mounted};
    libbpf_set_print(&quiet_libbpf);
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "openrdma_peer_marks");
    const size_t size = static_cast<size_t>(openrdma_peer_marks_object_end - openrdma_peer_marks_object);
    object_ = bpf_object__open_mem(openrdma_peer_marks_object, size, &opts);
    if (object_ == nullptr) {
        return rdma::Error(rdma::from_errno(errno), std::string("the embedded program does not open: ") + std::strerror(errno));
    }
    if (bpf_object__load(object_) != 0) {
        const int e = errno;
        return rdma::Error(rdma::from_errno(e), std::string("loading the sockops program: ") + std::strerror(e) +
                                                    (e == EPERM ? " (krdmad needs CAP_BPF and CAP_NET_ADMIN, or root)" : ""));
    }
    bpf_program *prog = bpf_object__find_program_by_name(object_, "openrdma_peer_marks");
    bpf_map *map = bpf_object__find_map_by_name(object_, "peer_marks");
    if (prog == nullptr || map == nullptr) return rdma::Error(RI_EINVAL, "the embedded object lacks its program or map");
    const int cg = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg < 0) return rdma::Error(rdma::from_errno(errno), "cannot open " + root + ": " + std::strerror(errno));
    link_ = bpf_program__attach_cgroup(prog, cg);
    const int e = errno;
    ::close(cg);
    if (link_ == nullptr) {
        return rdma::Error(rdma::from_errno(e), "attaching the sockops program to " + root + ": " + std::strerror(e));
    }
    map_fd_ = bpf_map__fd(map);
    RDMA_LOG_INFO(kComponent, "peer detection for the sockets layer: sockops program attached to %s", root.c_str());
    return {};
}

}  // namespace kal::llp
