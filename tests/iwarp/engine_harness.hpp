// Test harness for the iWARP engine: an owner with an STag table and a receive queue, and helpers that move
// frames between engines.
#ifndef TESTS_IWARP_ENGINE_HARNESS_HPP
#define TESTS_IWARP_ENGINE_HARNESS_HPP

#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <optional>
#include <vector>

#include "iwarp/engine.hpp"
#include "rnicpi/ri_types.h"

namespace harness {

using namespace iwarp;

/** @brief An EngineOwner backed by plain containers. */
class Owner : public EngineOwner {
public:
    bool resolve_stag(uint32_t stag, Region &out) override {
        auto it = regions.find(stag);
        if (it == regions.end() || !it->second.valid) return false;
        out = it->second.region;
        return true;
    }
    bool take_receive(ReceiveBuffer &out) override {
        if (receives.empty()) return false;
        out = receives.front();
        receives.pop_front();
        return true;
    }
    bool invalidate_stag(uint32_t stag) override {
        auto it = regions.find(stag);
        if (it == regions.end() || !it->second.invalidatable) return false;
        it->second.valid = false;
        return true;
    }
    void completed(const Completion &c) override { completions.push_back(c); }
    void peer_terminated(const Terminate &t) override { terminate = t; }

    /** @brief Registers @p buf as STag @p stag with @p access in PD @p pd, zero-based when @p to_base is 0. */
    void add_region(uint32_t stag, std::vector<uint8_t> &buf, uint32_t access, uint32_t pd = 1,
                    uint64_t to_base = 0) {
        regions[stag] = Entry{Region{buf.data(), to_base, buf.size(), access, pd}, true, true};
    }
    /** @brief Posts a receive of @p buf split into @p pieces SGEs. */
    void post_receive(uint64_t wr_id, std::vector<uint8_t> &buf, uint32_t pieces = 1) {
        ReceiveBuffer r;
        r.wr_id = wr_id;
        size_t step = buf.size() / pieces;
        for (uint32_t i = 0; i < pieces; ++i) {
            size_t len = i + 1 == pieces ? buf.size() - step * i : step;
            r.sge[i] = LocalSpan{buf.data() + step * i, len};
        }
        r.num_sge = pieces;
        receives.push_back(r);
    }

    struct Entry {
        Region region;
        bool valid = true;
        bool invalidatable = true;
    };
    std::map<uint32_t, Entry> regions;
    std::deque<ReceiveBuffer> receives;
    std::vector<Completion> completions;
    std::optional<Terminate> terminate;
};

/**
 * @brief An Owner that also has "foreign" memory, as the hwstub daemon reaches a consumer's: a separate vector
 *        addressed by fake DMA addresses from kBase, reachable only through dma_read()/dma_write(), which
 *        bounds-check every access, count it and can be told to fail.
 */
class ForeignOwner : public Owner {
public:
    /** @brief DMA address of ForeignOwner::memory[0]; nothing is mapped there in this process. */
    static constexpr uint64_t kBase = 0x10000000;

    /** @brief @p size bytes of foreign memory, all @p fill. */
    explicit ForeignOwner(size_t size = 1 << 20, uint8_t fill = 0xee) : memory(size, fill) {}

    bool dma_read(uint64_t src, void *dst, size_t len) noexcept override {
        ++reads;
        if (!admit(src, len, fail_reads_after)) return false;
        std::memcpy(dst, memory.data() + (src - kBase), len);
        return true;
    }
    bool dma_write(uint64_t dst, const void *src, size_t len) noexcept override {
        ++writes;
        if (!admit(dst, len, fail_writes_after)) return false;
        std::memcpy(memory.data() + (dst - kBase), src, len);
        return true;
    }
    bool dma_atomic(uint64_t target, const AtomicRequest &r, uint64_t &original) noexcept override {
        ++atomics;
        if (!admit(target, 8, fail_writes_after)) return false;
        std::memcpy(&original, memory.data() + (target - kBase), 8);
        const uint64_t after = atomic_result(r, original);
        std::memcpy(memory.data() + (target - kBase), &after, 8);
        return true;
    }

    /** @brief The (fake, not dereferenceable) address of foreign byte @p offset, as the engine is given it. */
    static uint8_t *address(size_t offset) { return reinterpret_cast<uint8_t *>(kBase + offset); }
    /** @brief Registers foreign bytes [offset, offset + len) as STag @p stag. */
    void add_foreign_region(uint32_t stag, size_t offset, size_t len, uint32_t access, uint32_t pd = 1,
                            uint64_t to_base = 0) {
        regions[stag] = Entry{Region{address(offset), to_base, len, access, pd, true}, true, true};
    }
    /** @brief Posts a foreign receive whose SGEs are the (offset, length) pairs @p sges. */
    void post_foreign_receive(uint64_t wr_id, std::initializer_list<std::pair<size_t, size_t>> sges) {
        ReceiveBuffer r;
        r.wr_id = wr_id;
        r.foreign = true;
        for (auto [offset, len] : sges) r.sge[r.num_sge++] = LocalSpan{address(offset), len};
        receives.push_back(r);
    }
    /** @brief A foreign work request whose gather list is the (offset, length) pairs @p sges. */
    static WorkRequest foreign_wr(uint64_t id, WorkType type, std::initializer_list<std::pair<size_t, size_t>> sges) {
        WorkRequest wr;
        wr.wr_id = id;
        wr.type = type;
        wr.foreign = true;
        for (auto [offset, len] : sges) wr.sge[wr.num_sge++] = LocalSpan{address(offset), len};
        return wr;
    }

    std::vector<uint8_t> memory;  /**< The foreign memory. */
    long fail_reads_after = -1;   /**< dma_read() calls that succeed before all later ones fail; -1: never fail. */
    long fail_writes_after = -1;  /**< The same for dma_write(). */
    size_t reads = 0;             /**< dma_read() calls. */
    size_t writes = 0;            /**< dma_write() calls. */
    size_t atomics = 0;           /**< dma_atomic() calls. */
    bool out_of_bounds = false;   /**< The engine asked for bytes outside ForeignOwner::memory. */

private:
    bool admit(uint64_t addr, size_t len, long &fail_after) noexcept {
        if (addr < kBase || addr - kBase > memory.size() || len > memory.size() - (addr - kBase)) {
            out_of_bounds = true;
            return false;
        }
        if (fail_after == 0) return false;
        if (fail_after > 0) --fail_after;
        return true;
    }
};

/** @brief @p n bytes of a pattern that differs with @p seed and does not repeat within a page. */
inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 8));
    return v;
}

/** @brief Flattens a frame's gather list. */
inline std::vector<uint8_t> bytes_of(const TxFrame &f) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < f.iovcnt; ++i) {
        auto *p = static_cast<const uint8_t *>(f.iov[i].iov_base);
        out.insert(out.end(), p, p + f.iov[i].iov_len);
    }
    return out;
}

/** @brief Moves every frame @p from has into @p to (in @p chunk-byte pieces); returns the frames moved. */
inline size_t pump(Engine &from, Engine &to, size_t chunk = SIZE_MAX) {
    static TxFrame frame;  // large: keep it off the stack
    size_t n = 0;
    while (from.next_frame(frame)) {
        auto b = bytes_of(frame);
        for (size_t off = 0; off < b.size(); off += chunk) {
            size_t len = std::min(chunk, b.size() - off);
            to.receiver().feed(std::span<const uint8_t>(b.data() + off, len));
        }
        from.frame_sent();
        ++n;
    }
    return n;
}

/** @brief Pumps both directions until neither has anything to send. */
inline void settle(Engine &a, Engine &b, size_t chunk = SIZE_MAX) {
    while (pump(a, b, chunk) + pump(b, a, chunk) > 0) {
    }
}

/** @brief The configuration of the engine pairs the tests connect in memory: PD 1, CRC as @p crc, an MULPDU of 1454,
 *         IRD and ORD 4, 16 send queue slots. */
inline EngineConfig pair_config(bool crc = true) {
    EngineConfig c;
    c.pd = 1;
    c.rx.crc = c.tx.crc = crc;
    c.mulpdu = 1454;
    c.ird = 4;
    c.ord = 4;
    c.sq_depth = 16;
    return c;
}

/** @brief A work request over one local buffer. */
inline WorkRequest wr_over(uint64_t id, WorkType type, std::vector<uint8_t> &buf) {
    WorkRequest wr;
    wr.wr_id = id;
    wr.type = type;
    wr.sge[0] = LocalSpan{buf.data(), buf.size()};
    wr.num_sge = 1;
    return wr;
}

/** @brief An RDMA Read of @p length bytes from the peer's @p remote_stag (offset 0) into local @p local_stag (offset 0). */
inline WorkRequest read_of(uint64_t id, uint32_t remote_stag, uint32_t local_stag, uint32_t length) {
    WorkRequest wr;
    wr.wr_id = id;
    wr.type = WorkType::read;
    wr.remote_stag = remote_stag;
    wr.local_stag = local_stag;
    wr.length = length;
    return wr;
}

}  // namespace harness

#endif  // TESTS_IWARP_ENGINE_HARNESS_HPP
