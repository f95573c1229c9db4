// One attached softrnic RNIC instance: its limits and MPA policy (from the attach options), and the namespaces
// shared by every open of it in every process: QP numbers, STags (24-bit index + 8-bit key), object counts.
#ifndef SOFTRNIC_KVP_INSTANCE_HPP
#define SOFTRNIC_KVP_INSTANCE_HPP

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "index_pool.hpp"
#include "tunables.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"

namespace softrnic::kvp {

// Per-instance limits; attach options may lower (or raise, up to the hard maxima) each one.
struct Limits {
    // Two per connection on one host (both ends on this RNIC): 8,192 connections, as a host of many clients needs;
    // the counters region has a slot per QP but stays sparse until a QP uses it.
    uint32_t max_qp = 16384;
    uint32_t max_qp_wr = 4096;
    uint32_t max_sge = 8;
    uint32_t max_inline = 256;
    uint32_t max_cq = 1024;
    uint32_t max_cqe = 65536;
    uint32_t max_pd = 1024;
    uint32_t max_mr = 65536;
    uint32_t max_mw = 16384;
    uint32_t max_srq = 256;
    uint32_t max_srq_wr = 4096;
    uint32_t max_ird = 32;
    uint32_t max_ord = 32;
    uint32_t max_fast_reg_pages = 512;
    uint64_t max_mr_size = 1ull << 40;
};

// MPA policy of the instance: what connections on it will offer (the connection code of issue 5 reads it).
struct MpaPolicy {
    bool crc = true;
    bool markers = false;
    bool peer2peer = true;
};

// Object kinds counted against the instance's limits.
enum class Kind : uint8_t { pd, cq, qp, srq, mr, mw };
inline constexpr size_t kKinds = 6;

class Instance {
public:
    // Parses the attach options (a JSON object, or empty); unknown keys and bad values are EINVAL with a message.
    [[nodiscard]] static rdma::Expected<Instance *> create(const ri_attach_params_t &params);

    [[nodiscard]] const Limits &limits() const noexcept { return limits_; }
    [[nodiscard]] const MpaPolicy &mpa() const noexcept { return mpa_; }
    // The data path's tunables now: what opens (the uVP, from the Open RNIC reply) and QPs made from now on use.
    [[nodiscard]] datapath::Tunables tunables();
    // `rdmactl control`: {} answers the tunables with their help; {"unsent_budget": N, "siw_nudge": false} changes
    // them for opens and QPs made from now on. EINVAL with a message for an unknown key or a bad value.
    [[nodiscard]] rdma::Expected<std::string> control(const char *request);
    [[nodiscard]] const std::string &name() const noexcept { return name_; }
    [[nodiscard]] const std::string &netdev() const noexcept { return netdev_; }
    void fill_attr(ri_rnic_attr_t &attr) const;

    // Counts an object against its limit: RI_ENOSPC when the instance is full.
    [[nodiscard]] ri_status_t charge(Kind k);
    void uncharge(Kind k) noexcept;

    // QP numbers unique on the instance.
    [[nodiscard]] std::optional<uint32_t> alloc_qp_num();
    void free_qp_num(uint32_t n) noexcept;
    // A fresh STag (index from the instance's table, next key of that index); free_stag releases the index.
    [[nodiscard]] std::optional<ri_stag_t> alloc_stag();
    void free_stag(ri_stag_t stag) noexcept;
    // The same index with the next key: the old STag stops naming the object (reregistration).
    [[nodiscard]] ri_stag_t rekey(ri_stag_t stag);
    // CQ and SRQ identifiers (diagnostics and event records).
    [[nodiscard]] uint32_t next_object_id() noexcept;

private:
    Instance(const ri_attach_params_t &params, const Limits &limits, const MpaPolicy &mpa,
             const datapath::Tunables &tunables);

    std::string name_;
    std::string netdev_;
    Limits limits_;
    MpaPolicy mpa_;
    mutable std::mutex mutex_;  // also tunables_
    datapath::Tunables tunables_;
    std::array<uint32_t, kKinds> counts_{};
    IndexPool qp_nums_;
    IndexPool stag_indices_;
    std::vector<uint8_t> stag_keys_;  // per index: the key of its current (or last) STag
    uint32_t next_id_ = 1;
};

}  // namespace softrnic::kvp

#endif  // SOFTRNIC_KVP_INSTANCE_HPP
