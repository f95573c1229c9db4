// The data path's tunables of one RNIC: what its attach options and `rdmactl control` set.
#ifndef SOFTRNIC_DATAPATH_TUNABLES_HPP
#define SOFTRNIC_DATAPATH_TUNABLES_HPP

#include <cstdint>

namespace softrnic::datapath {

/** @brief Unsent bytes a process lets wait in its full sockets by default (the `unsent_budget` option). */
inline constexpr uint64_t kDefaultUnsentBudget = 4u << 20;

/**
 * @brief The smallest message a same-host channel moves by single copy, by default (the `pull_min` option): none.
 *        On the 2-core VM docs/performance.md comes from, the rings' two copies (one on each side's core) moved
 *        24 GB/s where process_vm_readv's one moved 14 GB/s (bench_samehost --pull-min). A reader whose RNIC
 *        leaves it at 0 takes no pulls: single copy needs it at both ends.
 */
inline constexpr uint32_t kDefaultPullMin = 0;

/**
 * @brief The data path's tunables of one RNIC, its attach options (`rdmactl attach --options`, `rdmactl control`):
 *        the kVP keeps them, the uVP learns them from the Open RNIC reply.
 */
struct Tunables {
    /**
     * @brief Unsent bytes the streams whose sockets are full share (TCP_NOTSENT_LOWAT); 0: no limit (each socket
     *        queues what its buffer holds).
     */
    uint64_t unsent_budget = kDefaultUnsentBudget;
    /** @brief Whether an initiator met by silence sends the siw nudge (docs/siw-interop.md). */
    bool nudge = true;
    /**
     * @brief Whether the RNIC takes a same-host channel (rnicpi/ri_channel.h) when the kAL pairs two of its QPs on
     *        this host; false keeps every stream on TCP.
     */
    bool same_host = true;
    /**
     * @brief On a same-host channel whose peer takes pulls (rnicpi/ri_channel.h), Sends and RDMA Writes of at least
     *        this many bytes move by a single copy (the peer copies them out of this process's memory); 0: always
     *        through the channel's rings.
     */
    uint32_t pull_min = kDefaultPullMin;
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_TUNABLES_HPP
