// Attach options, limits and the per-instance namespaces.
#include "instance.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace softrnic::kvp {
namespace {

// Hard maxima: what the 24-bit STag index and our ring layout can address.
constexpr uint32_t kStagIndexMax = (1u << 24) - 1;
constexpr uint32_t kQpNumMax = 1u << 20;
constexpr uint32_t kWrMax = 1u << 16;
constexpr uint32_t kSgeMax = 32;
constexpr uint32_t kInlineMax = 4096;
constexpr uint32_t kCqeMax = 1u << 20;
constexpr uint32_t kCountMax = 1u << 20;
constexpr uint32_t kReadDepthMax = 128;
constexpr uint32_t kFastRegPagesMax = 4096;

struct LimitKey {
    const char *key;
    uint32_t Limits::*field;
    uint32_t hard_max;
};

constexpr LimitKey kLimitKeys[] = {
    {"max_qp", &Limits::max_qp, kQpNumMax},
    {"max_qp_wr", &Limits::max_qp_wr, kWrMax},
    {"max_sge", &Limits::max_sge, kSgeMax},
    {"max_inline", &Limits::max_inline, kInlineMax},
    {"max_cq", &Limits::max_cq, kCountMax},
    {"max_cqe", &Limits::max_cqe, kCqeMax},
    {"max_pd", &Limits::max_pd, kCountMax},
    {"max_mr", &Limits::max_mr, kStagIndexMax / 2},
    {"max_mw", &Limits::max_mw, kStagIndexMax / 2},
    {"max_srq", &Limits::max_srq, kCountMax},
    {"max_srq_wr", &Limits::max_srq_wr, kWrMax},
    {"max_ird", &Limits::max_ird, kReadDepthMax},
    {"max_ord", &Limits::max_ord, kReadDepthMax},
    {"max_fast_reg_pages", &Limits::max_fast_reg_pages, kFastRegPagesMax},
};

// The data path's tunables, with the help `rdmactl show -v` and `rdmactl control <rnic> '{}'` show.
struct TunableKey {
    const char *key;
    const char *help;
};
constexpr TunableKey kTunableKeys[] = {
    {"unsent_budget",
     "bytes the streams of a process whose sockets are full may leave unsent in them, shared among them "
     "(TCP_NOTSENT_LOWAT; at least 64 KiB each); 0: no limit. Default 4194304"},
    {"siw_nudge",
     "an initiator whose first FPDUs met only silence sends a zero-length Write, for a Linux siw peer that had not "
     "yet taken its socket (docs/siw-interop.md). Default true"},
    {"same_host",
     "two QPs of this stack on one host whose connection the kAL holds both ends of move their bytes over a "
     "shared-memory channel instead of TCP (docs/performance.md); false: always TCP. New connections follow a "
     "change. Default true"},
    {"pull_min",
     "on a same-host channel between two processes of one user, Sends and RDMA Writes of at least this many bytes "
     "move by a single copy: the receiver copies them straight from the sender's registered memory "
     "(process_vm_readv) after its own checks; 0: always through the channel's rings. It halves the bytes copied, "
     "but the one copy runs on the receiver's core alone: measure with bench_samehost --pull-min before turning it "
     "on. New connections follow a change. Default 0"},
};

// Sets tunable @p key to @p v; false (and @p error) for a bad value, nothing when @p key is not a tunable.
std::optional<bool> set_tunable(const std::string &key, const nlohmann::json &v, datapath::Tunables &t,
                                std::string &error) {
    if (key == "unsent_budget") {
        if (!v.is_number_unsigned()) {
            error = "softrnic option unsent_budget must be a number of bytes (0: no limit)";
            return false;
        }
        t.unsent_budget = v.get<uint64_t>();
        return true;
    }
    if (key == "siw_nudge") {
        if (!v.is_boolean()) {
            error = "softrnic option siw_nudge must be true or false";
            return false;
        }
        t.nudge = v.get<bool>();
        return true;
    }
    if (key == "same_host") {
        if (!v.is_boolean()) {
            error = "softrnic option same_host must be true or false";
            return false;
        }
        t.same_host = v.get<bool>();
        return true;
    }
    if (key == "pull_min") {
        if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
            error = "softrnic option pull_min must be a number of bytes below 4 GiB (0: never)";
            return false;
        }
        t.pull_min = v.get<uint32_t>();
        return true;
    }
    return std::nullopt;
}

// The reply to every control request (RNIC-PI ri_module_t::control): the tunables, each with its value and help.
nlohmann::json tunables_json(const datapath::Tunables &t) {
    nlohmann::json all = nlohmann::json::object();
    for (const TunableKey &k : kTunableKeys) {
        const std::string key = k.key;
        nlohmann::json value = key == "unsent_budget" ? nlohmann::json(t.unsent_budget)
                               : key == "siw_nudge"   ? nlohmann::json(t.nudge)
                               : key == "pull_min"    ? nlohmann::json(t.pull_min)
                                                      : nlohmann::json(t.same_host);
        all[key] = {{"value", value}, {"settable", true}, {"help", k.help}};
    }
    return {{"tunables", all}};
}

rdma::Expected<void> parse_options(const char *text, Limits &limits, MpaPolicy &mpa, datapath::Tunables &tunables) {
    if (text == nullptr || *text == '\0') return {};
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return rdma::Error(RI_EINVAL, "softrnic options must be a JSON object, e.g. {\"max_qp\": 64}");
    }
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string &key = it.key();
        const nlohmann::json &v = it.value();
        bool known = false;
        for (const LimitKey &lk : kLimitKeys) {
            if (key != lk.key) continue;
            known = true;
            if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > lk.hard_max) {
                return rdma::Error(RI_EINVAL, "softrnic option " + key + " must be an integer from 1 to " +
                                                  std::to_string(lk.hard_max));
            }
            limits.*lk.field = v.get<uint32_t>();
        }
        if (key == "mpa_crc" || key == "mpa_markers" || key == "mpa_peer2peer") {
            known = true;
            if (!v.is_boolean()) return rdma::Error(RI_EINVAL, "softrnic option " + key + " must be true or false");
            (key == "mpa_crc" ? mpa.crc : key == "mpa_markers" ? mpa.markers : mpa.peer2peer) = v.get<bool>();
        }
        std::string error;
        if (auto set = set_tunable(key, v, tunables, error)) {
            if (!*set) return rdma::Error(RI_EINVAL, error);
            known = true;
        }
        if (!known) {
            return rdma::Error(RI_EINVAL, "unknown softrnic option '" + key +
                                              "' (known: max_qp, max_qp_wr, max_sge, max_inline, max_cq, max_cqe, "
                                              "max_pd, max_mr, max_mw, max_srq, max_srq_wr, max_ird, max_ord, "
                                              "max_fast_reg_pages, mpa_crc, mpa_markers, mpa_peer2peer, unsent_budget, siw_nudge, same_host, pull_min)");
        }
    }
    return {};
}

}  // namespace

rdma::Expected<Instance *> Instance::create(const ri_attach_params_t &params) {
    Limits limits;
    MpaPolicy mpa;
    datapath::Tunables tunables;
    if (auto r = parse_options(params.options, limits, mpa, tunables); !r) return r.error();
    return new Instance(params, limits, mpa, tunables);
}

Instance::Instance(const ri_attach_params_t &params, const Limits &limits, const MpaPolicy &mpa,
                   const datapath::Tunables &tunables)
    : name_(params.name, strnlen(params.name, sizeof params.name)),
      netdev_(params.netdev, strnlen(params.netdev, sizeof params.netdev)),
      limits_(limits),
      mpa_(mpa),
      tunables_(tunables),
      qp_nums_(1, limits.max_qp),
      // Index 0 is never issued, so STag 0 never names a region.
      stag_indices_(1, limits.max_mr + limits.max_mw),
      stag_keys_(static_cast<size_t>(limits.max_mr) + limits.max_mw + 1, 0) {
    // Keys start at different values per index so neighbouring STags differ in their key too.
    for (size_t i = 0; i < stag_keys_.size(); ++i) stag_keys_[i] = static_cast<uint8_t>(i * 37u);
}

datapath::Tunables Instance::tunables() {
    std::lock_guard g(mutex_);
    return tunables_;
}

rdma::Expected<std::string> Instance::control(const char *request) {
    const nlohmann::json j = nlohmann::json::parse(request != nullptr ? request : "", nullptr, false);
    if (!j.is_object()) {
        return rdma::Error(RI_EINVAL, "the request must be a JSON object, e.g. {} or {\"unsent_budget\": 0}");
    }
    std::lock_guard g(mutex_);
    datapath::Tunables next = tunables_;
    for (auto it = j.begin(); it != j.end(); ++it) {
        std::string error;
        auto set = set_tunable(it.key(), it.value(), next, error);
        if (!set) {
            return rdma::Error(RI_EINVAL, "'" + it.key() + "' is not a softrnic control request (known: "
                                          "unsent_budget, siw_nudge, same_host, pull_min)");
        }
        if (!*set) return rdma::Error(RI_EINVAL, error);
    }
    tunables_ = next;  // whole or not at all
    return tunables_json(tunables_).dump();
}

void Instance::fill_attr(ri_rnic_attr_t &a) const {
    std::memset(&a, 0, sizeof a);
    std::strncpy(a.name, name_.c_str(), sizeof a.name - 1);
    std::strncpy(a.netdev, netdev_.c_str(), sizeof a.netdev - 1);
    a.vendor_id = 0;
    a.vendor_part_id = 0x5352;  // "SR"
    a.hw_version = 1;
    // No RI_CAP_MW_TYPE1: a type 1 window is bound by the Bind Memory Window verb, which softrnic does not execute,
    // so it allocates none (an allocated window nothing can bind would be a promise it cannot keep).
    a.caps = RI_CAP_SRQ | RI_CAP_ZERO_BASED | RI_CAP_MW_TYPE2 | RI_CAP_SEND_INV |
             RI_CAP_FAST_REG | RI_CAP_SHARED_MR | RI_CAP_RESIZE_CQ | RI_CAP_ATOMICS | RI_CAP_IMMEDIATE;
    if (mpa_.crc) a.caps |= RI_CAP_MPA_CRC;
    if (mpa_.markers) a.caps |= RI_CAP_MPA_MARKERS;
    if (mpa_.peer2peer) a.caps |= RI_CAP_MPA_PEER2PEER;
    {
        std::lock_guard g(mutex_);
        // Every channel this RNIC takes it reads with a version 2 hello: it may move large messages by single copy.
        if (tunables_.same_host) a.caps |= RI_CAP_SAME_HOST | RI_CAP_CHANNEL_PULL;
    }
    a.fw_version = 1;
    a.max_mr_size = limits_.max_mr_size;
    a.page_size_cap = 4096;
    a.max_qp = limits_.max_qp;
    a.max_qp_wr = limits_.max_qp_wr;
    a.max_sge = limits_.max_sge;
    a.max_sge_rd = limits_.max_sge;
    a.max_inline = limits_.max_inline;
    a.max_cq = limits_.max_cq;
    a.max_cqe = limits_.max_cqe;
    a.max_pd = limits_.max_pd;
    a.max_mr = limits_.max_mr;
    a.max_mw = limits_.max_mw;
    a.max_srq = limits_.max_srq;
    a.max_srq_wr = limits_.max_srq_wr;
    a.max_srq_sge = limits_.max_sge;
    a.max_ird = limits_.max_ird;
    a.max_ord = limits_.max_ord;
    a.max_ceh = 16;
    a.max_fast_reg_pages = limits_.max_fast_reg_pages;
    a.max_private_data = 508;  // MPA carries 512 bytes; RFC 6581 (revision 2) takes 4 for IRD and ORD
}

ri_status_t Instance::charge(Kind k) {
    const uint32_t limit = [&] {
        switch (k) {
            case Kind::pd: return limits_.max_pd;
            case Kind::cq: return limits_.max_cq;
            case Kind::qp: return limits_.max_qp;
            case Kind::srq: return limits_.max_srq;
            case Kind::mr: return limits_.max_mr;
            case Kind::mw: return limits_.max_mw;
        }
        return 0u;
    }();
    std::lock_guard lock(mutex_);
    uint32_t &n = counts_[static_cast<size_t>(k)];
    if (n >= limit) return RI_ENOSPC;
    ++n;
    return RI_OK;
}

void Instance::uncharge(Kind k) noexcept {
    std::lock_guard lock(mutex_);
    uint32_t &n = counts_[static_cast<size_t>(k)];
    if (n > 0) --n;
}

std::optional<uint32_t> Instance::alloc_qp_num() {
    std::lock_guard lock(mutex_);
    return qp_nums_.allocate();
}

void Instance::free_qp_num(uint32_t n) noexcept {
    std::lock_guard lock(mutex_);
    qp_nums_.release(n);
}

std::optional<ri_stag_t> Instance::alloc_stag() {
    std::lock_guard lock(mutex_);
    auto index = stag_indices_.allocate();
    if (!index) return std::nullopt;
    const uint8_t key = ++stag_keys_[*index];
    return (*index << 8) | key;
}

void Instance::free_stag(ri_stag_t stag) noexcept {
    std::lock_guard lock(mutex_);
    stag_indices_.release(stag >> 8);
}

ri_stag_t Instance::rekey(ri_stag_t stag) {
    std::lock_guard lock(mutex_);
    const uint32_t index = stag >> 8;
    const uint8_t key = ++stag_keys_.at(index);
    return (index << 8) | key;
}

uint32_t Instance::next_object_id() noexcept {
    std::lock_guard lock(mutex_);
    return next_id_++;
}

}  // namespace softrnic::kvp
