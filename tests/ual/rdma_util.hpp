// Small helpers for the connection tests and their peer program: one consumer's objects (adapter, PZ, CQ,
// dispatchers, an endpoint, a registered buffer) and blocking waits with deadlines, so no test can hang.
#ifndef TESTS_UAL_RDMA_UTIL_HPP
#define TESTS_UAL_RDMA_UTIL_HPP

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "embedded_link.hpp"
#include "ual/access_layer.hpp"

namespace rdmatest {

using namespace std::chrono_literals;

/** @brief A consumer's objects on one RNIC. */
struct Side {
    std::shared_ptr<ual::AccessLayer> al;
    std::shared_ptr<ual::Adapter> adapter;
    std::shared_ptr<ual::ProtectionZone> pz;
    std::shared_ptr<ual::SimpleDispatcher> dto, requests, cm;
    std::shared_ptr<ual::SimpleDispatcher> async, unaffiliated;  // the adapter's asynchronous events
    std::shared_ptr<ual::CompletionQueue> cq;
    std::vector<uint8_t> buffer;
    std::shared_ptr<ual::MemoryRegion> mr;

    /**
     * @brief Opens the device (empty: embedded) and the RNIC, with a registered buffer of @p bytes and a completion
     *        queue of @p cq_depth entries.
     */
    std::string open(const std::string &device, const std::string &rnic, size_t bytes, uint32_t cq_depth = 1024) {
        ual::Options o;
        o.embedded_kal = &kal::start_embedded_link;
        if (!device.empty()) o.device = device;
        auto a = ual::AccessLayer::open(o);
        if (!a) return "open: " + a.error().to_string();
        al = *a;
        auto ad = al->open_adapter(rnic);
        if (!ad) return "open adapter: " + ad.error().to_string();
        adapter = *ad;
        auto p = adapter->create_pz();
        if (!p) return "create pz: " + p.error().to_string();
        pz = *p;
        dto = *ual::SimpleDispatcher::create(ual::EventStream::dto, 1024);
        requests = *ual::SimpleDispatcher::create(ual::EventStream::cm_request, 512);
        cm = *ual::SimpleDispatcher::create(ual::EventStream::cm_message, 1024);
        async = *ual::SimpleDispatcher::create(ual::EventStream::affiliated_async, 1024);
        unaffiliated = *ual::SimpleDispatcher::create(ual::EventStream::unaffiliated_async, 64);
        adapter->set_async_dispatchers(async, unaffiliated);
        auto c = adapter->create_cq(cq_depth, dto);
        if (!c) return "create cq: " + c.error().to_string();
        cq = *c;
        buffer.assign(bytes, 0);
        auto m = pz->register_memory(buffer.data(), buffer.size(),
                                     RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
        if (!m) return "register: " + m.error().to_string();
        mr = *m;
        return "";
    }

    /** @brief An endpoint whose connection events go to ::cm. */
    std::shared_ptr<ual::Endpoint> endpoint(uint64_t context = 0) {
        ual::EndpointAttributes ea;
        ea.sq_depth = 128;
        ea.rq_depth = 128;
        ea.context = context;
        auto ep = pz->create_endpoint(ea, cq, cq);
        if (!ep) return nullptr;
        (*ep)->set_connection_dispatcher(cm);
        return *ep;
    }

    /** @brief The next completion, polled up to @p timeout. */
    std::optional<ri_wc_t> completion(std::chrono::milliseconds timeout = 20s) {
        const auto end = std::chrono::steady_clock::now() + timeout;
        ri_wc_t wc{};
        while (std::chrono::steady_clock::now() < end) {
            auto n = cq->poll({&wc, 1});
            if (n && *n == 1) return wc;
            std::this_thread::yield();
        }
        return std::nullopt;
    }

    void close() {
        mr.reset();
        cq.reset();
        pz.reset();
        adapter.reset();
        al.reset();
    }
};

/** @brief The next connection event of @p d within @p timeout. */
inline std::optional<ual::Event> next_cm(const std::shared_ptr<ual::SimpleDispatcher> &d,
                                         std::chrono::milliseconds timeout = 20s) {
    auto e = d->wait(timeout);
    if (!e) return std::nullopt;
    return *e;
}

inline std::span<const uint8_t> bytes_of(const std::string &s) {
    return {reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

inline std::string text(const std::vector<uint8_t> &v) { return std::string(v.begin(), v.end()); }

/** @brief Byte @p i of the pattern with @p seed. */
inline uint8_t pattern(size_t i, uint32_t seed) { return static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12)) & 0xff); }

/** @brief Posts one receive of @p len bytes at @p off of the side's buffer. */
inline rdma::Status post_recv(Side &s, ual::Endpoint &ep, size_t off, uint32_t len, uint64_t id) {
    ri_sge_t sge{reinterpret_cast<uint64_t>(s.buffer.data() + off), len, s.mr->keys().lkey};
    ri_recv_wr_t wr{id, &sge, 1, 0};
    return ep.post_recv({&wr, 1});
}

/** @brief Posts one signaled operation on @p len bytes at @p off of the side's buffer, with more ::ri_send_flags. */
inline rdma::Status post(Side &s, ual::Endpoint &ep, uint32_t opcode, size_t off, uint32_t len, uint64_t id,
                         uint64_t remote_addr = 0, ri_stag_t rkey = 0, uint32_t flags = 0) {
    ri_sge_t sge{reinterpret_cast<uint64_t>(s.buffer.data() + off), len, s.mr->keys().lkey};
    ri_send_wr_t wr{};
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.flags = RI_SEND_SIGNALED | flags;
    wr.sgl = &sge;
    wr.num_sge = len > 0 ? 1 : 0;
    wr.u.rdma.remote_addr = remote_addr;
    wr.u.rdma.rkey = rkey;
    return ep.post_send({&wr, 1});
}

/** @brief What a peer tells the other about its buffer. */
struct BufferInfo {
    uint64_t addr;
    uint32_t rkey;
    uint32_t length;
};

/**
 * @brief Connects @p ep of @p s (receives posted from wr_id 100, 256 bytes each) to a peer program on @p address:@p
 *        port with private data "hello server" and returns the buffer the peer announces in its first Send; nothing
 *        when any step fails. The receive that took it (wr_id 100) is not posted again.
 */
inline std::optional<BufferInfo> connect_to_watcher(Side &s, ual::Endpoint &ep, const std::string &address,
                                                    uint16_t port) {
    if (!ep.connect(address, port, bytes_of("hello server")).ok()) return std::nullopt;
    auto est = next_cm(s.cm);
    if (!est || est->id != static_cast<uint32_t>(ual::CmEventId::established)) return std::nullopt;
    auto wc = s.completion();
    if (!wc || wc->status != RI_WC_SUCCESS || wc->opcode != RI_WC_RECV) return std::nullopt;
    BufferInfo info{};
    if (wc->byte_len != sizeof info) return std::nullopt;
    std::memcpy(&info, s.buffer.data() + (wc->wr_id - 100) * 256, sizeof info);
    return info;
}

}  // namespace rdmatest

#endif  // TESTS_UAL_RDMA_UTIL_HPP
