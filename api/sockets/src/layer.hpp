/**
 * @file layer.hpp
 * @brief The sockets layer of one process: its policy, its peer detection, the access layer it opens on first need,
 *        the RNICs its streams use, and the count of every decision it made with its reason.
 */
#ifndef OPENRDMA_SOCKETS_LAYER_HPP
#define OPENRDMA_SOCKETS_LAYER_HPP

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "device.hpp"
#include "krdma/peer_marks.hpp"
#include "policy.hpp"

namespace openrdma::sockets {

/** @brief Why a connection went the way it went. */
enum class Reason : uint8_t {
    rdma,           /**< Accelerated. */
    policy,         /**< The policy said TCP for this address and port. */
    no_detection,   /**< The layer cannot learn whether peers run it (no kAL, or the kAL cannot detect). */
    peer_plain,     /**< The peer does not run the layer. */
    no_rnic,        /**< No RNIC serves the connection's local address. */
    convert_failed, /**< The peer runs the layer but the conversion failed (the connection is reset). */
    declined,       /**< This end could not convert (no memory or QP left, no RNIC) and declined: both stay TCP. */
    peer_declined,  /**< The peer's layer declined the conversion: both stay TCP. */
    count
};

/** @brief The name of @p r, as reported. */
[[nodiscard]] const char *reason_name(Reason r) noexcept;

/** @brief What detection says of a connection's peer. */
enum class Peer : uint8_t { undecided, layer, plain };

/** @brief Where each process's layer reports its decisions and connections, for rdmactl: DIR/openrdma-sockets.PID. */
inline constexpr const char *kReportDir = "/dev/shm";

/** @brief The process's sockets layer. Thread-safe. */
class Layer {
public:
    /** @brief The layer, made on first use; null when it is off for this process (then it never comes back). */
    [[nodiscard]] static Layer *get() noexcept;
    /** @brief The policy. */
    [[nodiscard]] const Policy &policy() const noexcept { return policy_; }
    /**
     * @brief Marks TCP socket @p fd (before connect or listen) so that the handshake tells the peer this end runs
     *        the layer; false with @p why when it cannot.
     */
    bool mark(int fd, Reason *why);
    /** @brief What the marked, established socket @p fd learned of its peer. */
    [[nodiscard]] Peer peer(int fd);
    /**
     * @brief The detection map's whole value for socket @p fd (all zero when none, or when there is no map): how a
     *        socket this process inherited across exec was left (marked, its peer, its role).
     */
    [[nodiscard]] krdma::PeerMark look(int fd);
    /** @brief The RNIC serving the local address of socket @p fd, opened on first use. */
    [[nodiscard]] rdma::Expected<std::shared_ptr<Device>> device_for(int fd);
    /** @brief Counts a decision (and publishes the report from now on, so that rdmactl sees this process). */
    void count(Reason r) noexcept {
        decisions_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
        if (!reported_.load(std::memory_order_relaxed)) start_report();
    }
    /**
     * @brief Counts the decision @p r about connected socket @p fd (@p server: accepted) and remembers it for the report
     *        (the last few decisions, and every converted stream @p stream while it lives).
     */
    void note(int fd, Reason r, bool server, const std::shared_ptr<Stream> &stream = nullptr, int sock = -1);
    /**
     * @brief A connection noted converting (@p stream) went another way after all (@p r: the peer declined): its
     *        decision is counted again under @p r.
     */
    void revise(const Stream *stream, Reason r);
    /** @brief Removes this process's report (at exit). */
    void unpublish() noexcept;
    /** @brief Decisions with reason @p r so far. */
    [[nodiscard]] uint64_t decisions(Reason r) const noexcept {
        return decisions_[static_cast<size_t>(r)].load(std::memory_order_relaxed);
    }
    /** @brief The stream shape of this process ($OPENRDMA_SOCKETS_SLOT, _SLOTS). */
    [[nodiscard]] const StreamShape &shape() const noexcept { return shape_; }
    /** @brief In a forked child: forget the parent's access layer, devices and thread without touching them. */
    void forked_child() noexcept;

private:
    Layer() = default;
    rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer_locked();
    // The kAL's detection map, fetched on first need (null, and marks_error_ says why, when there is none).
    const krdma::PeerMarks *marks();
    std::unique_ptr<krdma::PeerMarks> marks_;
    std::string marks_error_;
    Policy policy_;
    StreamShape shape_;
    std::mutex mutex_;
    std::shared_ptr<ual::AccessLayer> al_;
    std::string al_error_;
    std::unique_ptr<Watcher> watcher_;
    std::map<std::string, std::shared_ptr<Device>> devices_;
    std::map<std::string, std::string> no_device_;  // address -> why it has none
    std::array<std::atomic<uint64_t>, static_cast<size_t>(Reason::count)> decisions_{};

    // The report: what rdmactl shows. Written by its own thread, at most every half second while something changed.
    struct Noted {
        int fd;
        Reason reason;
        bool server;
        std::string local, remote;
        std::weak_ptr<Stream> stream;
        int64_t when;  // seconds since the epoch
    };
    void publish();
    void report_loop();
    void start_report() noexcept;
    std::atomic<bool> reported_{false};  // the report thread runs
    std::mutex report_mutex_;
    std::vector<Noted> noted_;  // converted streams while they live, then the last decisions
    bool dirty_ = false;
    KitCounts kits_published_;
    bool reporting_ = false;
    std::string report_path_;
};

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_LAYER_HPP
