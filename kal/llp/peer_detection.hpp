/**
 * @file peer_detection.hpp
 * @brief The kAL's TCP peer detection: the sockops program of bpf/peer_marks.bpf.c, embedded in the kAL, loaded
 *        on first use and attached to the root of the host's cgroup v2 hierarchy, and its map, whose descriptor any
 *        process may have (KRDMA_CMD_PEER_MARKS). The sockets layer marks its sockets with it; the kAL marks its
 *        own LLP sockets of RNICs that speak RFC 7306, to learn whether the peer runs this stack too (and so may be
 *        offered RFC 7306 in MPA, iwarp::kMpaFlagRfc7306).
 */
#ifndef KAL_LLP_PEER_DETECTION_HPP
#define KAL_LLP_PEER_DETECTION_HPP

#include <mutex>
#include <string>

#include "rnicpi/cpp/status.hpp"

struct bpf_object;
struct bpf_link;

namespace kal::llp {

/** @brief The program and its map, once loaded. Thread-safe. */
class PeerDetection {
public:
    /** @brief @p enabled false (llp.peer_detection): every request is refused, saying so. */
    explicit PeerDetection(bool enabled) : enabled_(enabled) {}
    ~PeerDetection();
    PeerDetection(const PeerDetection &) = delete;
    PeerDetection &operator=(const PeerDetection &) = delete;
    /**
     * @brief The map's descriptor (owned here: the caller passes it on, it does not close it), loading and
     *        attaching the program on the first call. A failure (turned off, no privilege, no cgroup v2, no BPF)
     *        is kept with its reason and answered to every later call, and logged once: as a warning, or with
     *        @p quiet (the kAL's own first use, for RFC 7306) as information, since a krdmad or an embedded kAL
     *        without the privilege loses only RFC 7306 with other hosts.
     */
    [[nodiscard]] rdma::Expected<int> map_fd(bool quiet = false);
    /**
     * @brief Marks TCP socket @p fd (before connect() or listen(); an accepted socket inherits its listener's mark)
     *        so that its handshake says this end runs the stack, loading the program on first use. False when
     *        detection is off or unavailable: the socket is left as it was, and no option leaves with it.
     */
    bool mark(int fd);
    /**
     * @brief Whether established socket @p fd, marked, met a peer whose handshake said the same (the peer runs
     *        this stack). False for an unmarked socket, or when detection is unavailable.
     */
    [[nodiscard]] bool peer_marked(int fd);

private:
    rdma::Expected<void> load_locked();
    const bool enabled_;
    std::mutex mutex_;
    bool tried_ = false;
    std::string failure_;
    bpf_object *object_ = nullptr;
    bpf_link *link_ = nullptr;
    int map_fd_ = -1;
};

/** @brief Where the host's cgroup v2 hierarchy is mounted (from /proc/self/mountinfo); empty when nowhere. */
[[nodiscard]] std::string cgroup2_root();

}  // namespace kal::llp

#endif  // KAL_LLP_PEER_DETECTION_HPP
