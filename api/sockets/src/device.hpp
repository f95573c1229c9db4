/**
 * @file device.hpp
 * @brief What the sockets layer keeps per RNIC in a process: the adapter, one protection zone, the registered
 *        memory its streams use (blocks carved from chunks registered once), and the background thread that drives
 *        streams nobody is calling.
 */
#ifndef OPENRDMA_SOCKETS_DEVICE_HPP
#define OPENRDMA_SOCKETS_DEVICE_HPP

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "stream.hpp"
#include "ual/access_layer.hpp"

namespace openrdma::sockets {

/** @brief One stream's registered memory. */
struct Block {
    uint8_t *addr = nullptr; /**< Its first byte. */
    uint32_t lkey = 0;       /**< The local STag of the region it lies in. */
    size_t index = 0;        /**< Its number, to give it back. */
};

/**
 * @brief The background thread: sleeps on the completion notifications of the streams that need it (queued bytes
 *        waiting for credit, a close finishing, a watched mirror) and drives them. Streams nobody needs in the
 *        background cost it nothing.
 */
class Watcher {
public:
    Watcher();
    ~Watcher();
    Watcher(const Watcher &) = delete;
    Watcher &operator=(const Watcher &) = delete;
    /** @brief Drives @p s until it no longer wants the background (and, once closed, until it finished). */
    void add(const std::shared_ptr<Stream> &s);
    /** @brief Refills @p d's kits from the background thread. */
    void refill(const std::weak_ptr<Device> &d);
    /** @brief Wakes the background thread for a turn over its streams now. */
    void poke() noexcept;
    /** @brief Streams held (closing ones included). */
    [[nodiscard]] size_t size() const;
    /** @brief Forgets everything without touching it (a forked child: the streams are the parent's). */
    void abandon() noexcept;

private:
    void run();
    mutable std::mutex mutex_;
    std::map<Stream *, std::shared_ptr<Stream>> streams_;
    std::set<int> registered_;
    std::vector<std::weak_ptr<Device>> refills_;
    int epfd_ = -1;
    int wake_ = -1;
    bool stop_ = false;
    std::thread thread_;
};

class Device;

/** @brief What a stream is made of before its connection: a QP and its CQ, and its registered block with every
 *         receive posted. The background thread keeps a few ready (Device::take_kit()). */
struct Kit {
    std::shared_ptr<ual::SimpleDispatcher> dto; /**< The CQ's dispatcher. */
    std::shared_ptr<ual::CompletionQueue> cq;   /**< Send and receive completions. */
    std::shared_ptr<ual::Endpoint> ep;          /**< The QP, IDLE. */
    Block block;                                /**< Its registered memory. */
    bool reused = false;                        /**< It served a connection before (Device::recycle()). */
};

/** @brief Makes a kit on @p device now (the round trips to the kAL: CQ and QP creation, maybe a registration). */
[[nodiscard]] rdma::Expected<Kit> make_kit(Device &device);
/** @brief Posts every receive buffer of @p k (receive i is buffer i, wr_id i): the peer's initial credits. */
[[nodiscard]] bool post_receives(const Kit &k, const StreamShape &shape);

/** @brief Kits made and kits reused in this process (the report's "kits"). */
struct KitCounts {
    uint64_t made = 0;   /**< Made: a QP, its CQ and a block. */
    uint64_t reused = 0; /**< Taken back after a connection ended, brought back to IDLE and used again. */
};
/** @brief The counts so far. */
[[nodiscard]] KitCounts kit_counts() noexcept;
/** @brief Counts a kit made (make_kit()). */
void count_kit_made() noexcept;

/** @brief An RNIC open in this process, for the sockets layer. Thread-safe. */
class Device {
public:
    /** @brief Opens the RNIC serving @p address through @p al; its streams have @p shape. */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<Device>> open(const std::shared_ptr<ual::AccessLayer> &al,
                                                                     const std::string &address,
                                                                     const StreamShape &shape, Watcher *watcher);
    ~Device();
    /** @brief The access layer. */
    [[nodiscard]] ual::AccessLayer &access_layer() const noexcept { return *al_; }
    /** @brief The adapter. */
    [[nodiscard]] ual::Adapter &adapter() const noexcept { return *adapter_; }
    /** @brief The protection zone of every stream of this process on this RNIC. */
    [[nodiscard]] ual::ProtectionZone &pz() const noexcept { return *pz_; }
    /** @brief The shape of its streams. */
    [[nodiscard]] const StreamShape &shape() const noexcept { return shape_; }
    /**
     * @brief Bytes a stream's QP carries inline (header included): what the RNIC offers, at most kInlineMax. A
     *        message this small goes from the application's buffer at post time, without a send slot.
     */
    [[nodiscard]] uint32_t max_inline() const noexcept { return max_inline_; }
    /** @brief The most inline bytes a stream asks for (more makes every send queue entry larger). */
    static constexpr uint32_t kInlineMax = 256;
    /** @brief A block of shape().bytes() registered bytes; registers another chunk when none is free. */
    [[nodiscard]] rdma::Expected<Block> take();
    /** @brief Gives block @p index back. */
    void give(size_t index) noexcept;
    /** @brief Hands @p s to the background thread. */
    void watch(const std::shared_ptr<Stream> &s) { watcher_->add(s); }
    /** @brief Wakes the background thread for a turn over its streams now (Watcher::poke()). */
    void poke() noexcept { watcher_->poke(); }
    /**
     * @brief A kit made ahead, if one is ready (the background thread makes the next), or else an ended connection's
     *        kit the background thread has not reset yet, reset here.
     */
    [[nodiscard]] std::optional<Kit> take_kit();
    /**
     * @brief Takes back the kit of a stream whose connection ended (its last connection event came, so no other
     *        reaches its QP): the background thread moves the QP to ERROR (flushing what is posted) and to IDLE,
     *        reposts its receives and keeps it for the next connection, or closes it when enough are kept. A
     *        connection then costs one round trip to the kAL here instead of the four of a QP and a CQ made and
     *        destroyed, and no memory mapped, locked and unmapped. @p due: the stream was counted by expect_due().
     */
    void recycle(Kit k, bool due);
    /**
     * @brief A stream closed in order holds a kit that comes back (recycle()) once its connection's last event
     *        came: refill() makes no new kit in its stead while one is ready, so that the next connection takes the
     *        QP of the ended one rather than a new one. Each call is matched by one of recycle(k, true) or
     *        forget_due().
     */
    void expect_due();
    /** @brief A kit counted by expect_due() will not come back (its stream failed, or its last event never came). */
    void forget_due();
    /** @brief Closes @p k's QP and CQ (those it has) and gives its block back (if it has one). */
    void close_kit(Kit &k) noexcept;
    /** @brief Brings back the kits given to recycle(), then makes kits until kKits are ready (the background
     *         thread). */
    void refill();
    /** @brief Kits kept ready (made ahead, or reused). */
    static constexpr size_t kKits = 2;
    /** @brief At most this many kits are kept: each holds a block of registered memory. */
    static constexpr size_t kKitsKept = 4;

private:
    struct Chunk {
        uint8_t *addr = nullptr;
        size_t bytes = 0;
        std::shared_ptr<ual::MemoryRegion> mr;
    };
    Device(std::shared_ptr<ual::AccessLayer> al, const StreamShape &shape, Watcher *watcher)
        : al_(std::move(al)), shape_(shape), watcher_(watcher) {}
    static constexpr size_t kBlocksPerChunk = 4;
    std::shared_ptr<ual::AccessLayer> al_;
    std::shared_ptr<ual::Adapter> adapter_;
    std::shared_ptr<ual::ProtectionZone> pz_;
    const StreamShape shape_;
    uint32_t max_inline_ = 0;
    Watcher *watcher_;
    std::mutex mutex_;
    std::vector<Chunk> chunks_;
    std::vector<size_t> free_;
    std::vector<Kit> kits_;
    std::vector<Kit> used_;  // given back by ended streams, not yet brought back to IDLE
    size_t due_ = 0;         // kits of streams closed in order, not yet given back (expect_due())
    std::weak_ptr<Device> self_;
    // The QP to ERROR and IDLE, the CQ and its dispatcher drained, the receives posted, the kit marked (and counted)
    // reused: false when any step failed.
    bool reset_kit(Kit &k);
};

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_DEVICE_HPP
