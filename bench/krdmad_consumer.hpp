// A consumer process of a krdmad a benchmark started: the access layer, the RNIC open, a PZ, a registered buffer and
// one CQ its endpoints share (bench_scale, bench_samehost).
#ifndef BENCH_KRDMAD_CONSUMER_HPP
#define BENCH_KRDMAD_CONSUMER_HPP

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "endpoint_attributes.hpp"
#include "krdmad_process.hpp"
#include "ual/access_layer.hpp"

namespace bench {

/** @brief The passive consumer process of a two-process bench (0: none): killed when the bench ends or is killed. */
inline volatile sig_atomic_t g_passive = 0;
/** @brief The files a two-process bench makes in its private directory, for remember_dir(). */
inline constexpr const char *kKrdmadDirFiles[] = {"krdmad.json", "krdma.sock", "krdmad.log", nullptr};

/// @cond INTERNAL
namespace consumer_detail {
inline void kill_passive_and_krdmads() {
    if (g_passive > 0) ::kill(g_passive, SIGKILL);
    kill_krdmads();
}
inline void die(int sig) {
    kill_passive_and_krdmads();
    remove_dir_files();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}
}  // namespace consumer_detail
/// @endcond

/**
 * @brief Whether the bench exits or a fatal signal ends it, g_passive and every krdmad it started are killed (and,
 *        on a signal, the files remember_dir() named removed): nothing outlives a two-process bench.
 */
inline void kill_children_at_exit() {
    std::atexit(&consumer_detail::kill_passive_and_krdmads);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT}) ::signal(sig, &consumer_detail::die);
}

/** @brief One consumer process's objects: the access layer, the RNIC open, a PZ, a registered buffer, one CQ. */
struct KrdmadConsumer {
    std::shared_ptr<ual::AccessLayer> al;
    std::shared_ptr<ual::Adapter> adapter;
    std::shared_ptr<ual::ProtectionZone> pz;
    std::shared_ptr<ual::SimpleDispatcher> dto, cm;
    std::shared_ptr<ual::CompletionQueue> cq;
    std::vector<uint8_t> buf;
    std::shared_ptr<ual::MemoryRegion> mr;

    /**
     * @brief Opens RNIC @p rnic through @p device (waiting up to 10 s for krdmad to serve), a CQ of @p cq_depth,
     *        room for @p cm_events connection events queued until read, and a buffer of @p buffer_bytes (each byte
     *        1) registered for local and remote access; empty, or why not.
     */
    std::string open(const std::filesystem::path &device, size_t buffer_bytes, size_t cm_events,
                     uint32_t cq_depth = 4096, const std::string &rnic = "sr0") {
        ual::Options o;
        o.device = device;
        al = open_when_served(o, nullptr, 1000);
        if (!al) return "krdmad did not serve " + device.string();
        auto ad = al->open_adapter(rnic);
        if (!ad) return "open_adapter: " + ad.error().to_string();
        adapter = *ad;
        pz = *adapter->create_pz();
        dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 4096);
        cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, cm_events);
        auto c = adapter->create_cq(cq_depth, dto);
        if (!c) return "create_cq: " + c.error().to_string();
        cq = *c;
        buf.assign(buffer_bytes, 1);
        uint32_t access = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ;
        // Remote atomic rights where the RNIC has RFC 7306 (bench_samehost's fetch-and-add round trip).
        if (auto a = adapter->query(); a && (a->caps & RI_CAP_ATOMICS) != 0) access |= RI_ACCESS_REMOTE_ATOMIC;
        auto m = pz->register_memory(buf.data(), buf.size(), access);
        if (!m) return "register_memory: " + m.error().to_string();
        mr = *m;
        return "";
    }

    /** @brief An endpoint of depth @p depth on the CQ whose connection events carry @p context. */
    std::shared_ptr<ual::Endpoint> endpoint(uint32_t depth, uint64_t context) {
        auto e = pz->create_endpoint(endpoint_attributes(depth, context), cq, cq);
        if (!e) {
            std::fprintf(stderr, "creating endpoint %llu: %s\n", static_cast<unsigned long long>(context),
                         e.error().to_string().c_str());
            return nullptr;
        }
        (*e)->set_connection_dispatcher(cm);
        return *e;
    }

    /** @brief The address of byte @p off of the buffer, as a work request names it. */
    [[nodiscard]] uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(buf.data() + off); }
};

}  // namespace bench

#endif  // BENCH_KRDMAD_CONSUMER_HPP
