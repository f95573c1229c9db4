/**
 * @file stream.hpp
 * @brief A TCP byte stream carried by an RDMA connection: the sockets layer's data path.
 *
 * A Stream takes a connected TCP socket, converts it into an RDMA connection on the same TCP connection (MPA on
 * it, Endpoint::convert) and then moves the application's bytes as RDMA Sends into receive buffers the peer
 * pre-registered and pre-posted, under credit-based flow control:
 *
 * - Every message starts with a MessageHeader that returns the credits of the receive buffers its sender reposted
 *   since its last message. A sender spends one credit per message and never spends its last one on data, so that a
 *   credit-only message can always go (two ends that fill each other's queues at once cannot deadlock).
 * - A small write with nothing queued goes inline (the RNIC copies it from the caller's buffer at post time) and takes
 *   no send slot.
 * - Bytes the application writes are copied into the send slots (the socket's send buffer). A slot goes as soon as
 *   a credit allows; while none does, later writes fill the same slot (coalescing without delay when credit is
 *   there).
 * - Received messages stay in their receive buffers until the application reads them (copied out once); a buffer
 *   read to its end is reposted and its credit returned with the next message, or alone once half are owed.
 *
 * On one host, when the kAL pairs the two ends, the bytes take a shorter way: the kAL hands both ends a same-host
 * channel of their own beside their QPs' (KRDMA_CONVERT_BYTE_CHANNEL), and send() and recv() copy straight into and
 * out of its rings (SMC-D's model): two copies per byte, as TCP loopback makes, and no system call while both ends
 * keep up. The QP stays for the extended interface and for the connection's end. The next connections between
 * the same two processes convert over a link (link.hpp) and have the byte channel only: no QP (over_link()).
 *
 * Waiting: a short busy poll of the completion queue, then sleep on its notification. One waiter polls the CQ; the
 * others wait on a condition variable (leader and followers). Readiness for poll/epoll is mirrored on a Mirror
 * (mirror.hpp) while the application watches the socket.
 */
#ifndef OPENRDMA_SOCKETS_STREAM_HPP
#define OPENRDMA_SOCKETS_STREAM_HPP

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "mirror.hpp"
#include "rnicpi/cpp/channel.hpp"
#include "rnicpi/cpp/status.hpp"
#include "ual/access_layer.hpp"

namespace openrdma::sockets {

class Device;
struct IovCursor;

/** @brief What the first bytes of every message carry. */
struct MessageHeader {
    uint32_t credits;  /**< Receive buffers the sender reposted since its previous message. */
    uint16_t flags;    /**< A set of MessageFlags. */
    uint16_t reserved; /**< Zero. */
};
static_assert(sizeof(MessageHeader) == 8);

/** @brief MessageHeader::flags. */
enum MessageFlags : uint16_t {
    kMsgFin = 1u << 0,    /**< The sender shut down its direction after this message's bytes. */
    kMsgCredit = 1u << 1, /**< No bytes: only credits. */
    kMsgAdvert = 1u << 2  /**< Not stream bytes: an advertised region (AdvertWire) for the extended interface. */
};

/** @brief An advertised region as it travels (xs_region_t's fields, fixed little-endian layout). */
struct AdvertWire {
    uint64_t addr;
    uint64_t length;
    uint32_t rkey;
    uint32_t access;
    uint64_t tag;
};
static_assert(sizeof(AdvertWire) == 32);

/** @brief A completion of the extended interface (xs_completion_t's fields). */
struct XsCompletion {
    uint64_t context;
    uint32_t op;
    int32_t status;
    uint64_t length;
};

/** @brief What both ends announce in their MPA private data (and check in the peer's). */
struct Hello {
    char magic[4];          /**< "ORSK". */
    uint16_t version;       /**< 1. */
    uint16_t reserved;      /**< Zero. */
    uint32_t recv_slots;    /**< Receive buffers this end posts: the peer's initial credits. */
    uint32_t recv_slot_len; /**< Bytes of each, header included: the largest message the peer may send. */
};
static_assert(sizeof(Hello) == 16);

/** @brief The sizes of a stream's buffers. */
struct StreamShape {
    uint32_t slot = 32 * 1024; /**< Payload bytes per message (send slot). */
    uint32_t send_slots = 8;   /**< Send slots: the socket's send buffer is send_slots * slot bytes. */
    uint32_t recv_slots = 8;   /**< Receive buffers posted (the peer's credits). */
    uint32_t spin_ns = 30000;  /**< Busy poll before sleeping. */
    bool direct = true;        /**< Same-host pairs move bytes on a channel of their own (OPENRDMA_SOCKETS_DIRECT). */
    /** @brief Bytes of one receive buffer. */
    [[nodiscard]] uint32_t recv_slot_len() const noexcept { return slot + 64; }
    /** @brief Bytes of registered memory the stream needs. */
    [[nodiscard]] size_t bytes() const noexcept {
        return static_cast<size_t>(recv_slots) * recv_slot_len() + static_cast<size_t>(send_slots) * slot + 4096;
    }
};

/** @brief Counters of one stream. */
struct StreamCounters {
    std::atomic<uint64_t> tx_bytes{0};    /**< Application bytes sent. */
    std::atomic<uint64_t> rx_bytes{0};    /**< Application bytes delivered. */
    std::atomic<uint64_t> tx_messages{0}; /**< Messages posted (data and credit-only). */
    std::atomic<uint64_t> tx_inline{0};   /**< Of them, small writes posted inline from the caller's buffer. */
    std::atomic<uint64_t> rx_messages{0}; /**< Messages received. */
    std::atomic<uint64_t> credit_stalls{0}; /**< Times a write found no credit. */
    std::atomic<uint64_t> sleeps{0};      /**< Times a caller slept on the completion queue. */
};

/** @brief One RDMA-mode stream. Thread-safe. */
class Stream : public std::enable_shared_from_this<Stream> {
public:
    /**
     * @brief Where the stream stands. declined: the peer answered the conversion with the layer's decline (MPA's
     *        reject carrying a Hello with no receive buffers): the connection goes on as TCP, on the same socket.
     */
    enum class State : uint8_t { converting, open, failed, closed, declined };
    /** @brief What send() and recv() answer once the stream is declined: the caller goes on with the TCP socket. */
    static constexpr ssize_t kDeclined = -100000;

    /**
     * @brief Makes a stream on @p device with what it needs before its connection (a QP and its CQ, registered
     *        memory with every receive posted); nothing is sent yet, so a failure here leaves the TCP connection
     *        untouched (the caller declines the conversion and stays TCP).
     */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<Stream>> prepare(const std::shared_ptr<Device> &device,
                                                                        const StreamShape &shape);
    /**
     * @brief Starts converting @p tcp (a connected TCP socket): MPA on it, with this end as the @p initiator or the
     *        responder. Returns once the conversion is under way.
     */
    [[nodiscard]] rdma::Expected<void> begin(int tcp, bool initiator);
    /**
     * @brief A stream of a connection converted over a link (link.hpp): open at once on byte channel end @p bell
     *        (owned, closed on failure too), with no QP: the extended interface refuses it.
     */
    [[nodiscard]] static rdma::Expected<std::shared_ptr<Stream>> over_link(const std::shared_ptr<Device> &device,
                                                                          const StreamShape &shape, int bell);

    /**
     * @brief The Hello an end sends in MPA private data: its @p recv_slots receive buffers of @p recv_slot_len bytes
     *        (none: the end declines the conversion).
     */
    [[nodiscard]] static Hello hello(uint32_t recv_slots = 0, uint32_t recv_slot_len = 0) noexcept;
    /** @brief True when @p pd (MPA private data) is a Hello that declines the conversion. */
    [[nodiscard]] static bool is_decline(std::span<const uint8_t> pd) noexcept;
    ~Stream();
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;

    /**
     * @brief Writes the bytes of @p iov (sendmsg semantics): the count accepted, or -errno (EAGAIN when nothing fit
     *        and @p nonblock, EPIPE after shutdown or the peer's reset, ECONNRESET for a broken connection).
     */
    ssize_t send(std::span<const iovec> iov, bool nonblock);
    /**
     * @brief Reads into @p iov (recvmsg semantics with MSG_PEEK and MSG_WAITALL in @p flags): the count read, 0 at
     *        end of stream, or -errno (EAGAIN, ECONNRESET).
     */
    ssize_t recv(std::span<const iovec> iov, int flags, bool nonblock);
    /** @brief Bytes readable now without waiting (FIONREAD). */
    [[nodiscard]] size_t readable_bytes();
    /** @brief shutdown(2): SHUT_WR sends the end of stream after the queued bytes; SHUT_RD drops what arrives. */
    int shutdown(int how);
    /**
     * @brief The application closed its last descriptor: queued bytes still go (in the background, for up to
     *        @p linger), then the connection ends in order; @p abortive resets it at once (SO_LINGER 0).
     */
    void close(bool abortive);
    /**
     * @brief After close(): waits up to @p limit until every byte and the end of stream went (or the connection
     *        ended). A process that exits right after closing would otherwise take its queued bytes with it.
     */
    void flush(std::chrono::milliseconds limit);
    /** @brief poll(2) events now (POLLIN, POLLOUT, POLLRDHUP, POLLHUP, POLLERR). */
    [[nodiscard]] uint32_t readiness();
    /** @brief Takes what the CQ holds and shows the readiness on the mirror; the readiness (epoll_wait's spin). */
    uint32_t refresh();
    /** @brief The pending error (SO_ERROR), cleared. */
    int take_error();

    /** @brief Keeps @p mirror up to date from now on (the socket is watched by poll or epoll). */
    void watch(Mirror *mirror);
    /** @brief Drives the stream from the background thread: completions, queued bytes, the mirror. */
    void background();
    /** @brief True while the background thread has work here (queued bytes, closing, watched). */
    [[nodiscard]] bool wants_background() const noexcept { return background_.load(std::memory_order_acquire); }
    /**
     * @brief True while a mirror is kept (the socket is in an epoll set): the background thread sleeps on the
     *        stream's notifications. Otherwise it looks at the stream on its short tick only, so that it never
     *        takes the completions an application thread is about to poll.
     */
    [[nodiscard]] bool prompt() const noexcept { return prompt_.load(std::memory_order_acquire); }
    /** @brief True while bytes or the end of stream wait to go, or a close to finish: the short tick. */
    [[nodiscard]] bool urgent() const noexcept { return urgent_.load(std::memory_order_acquire); }
    /**
     * @brief The descriptor that polls readable when the stream moves (once armed): the completion queue's
     *        notification, or on the byte channel its bell.
     */
    [[nodiscard]] int notify_fd() const noexcept;
    /** @brief Every descriptor the background thread sleeps on for this stream (-1 where none). */
    [[nodiscard]] std::array<int, 3> wake_fds() const noexcept;
    /** @brief The descriptor that polls readable when a connection event changed the stream (until arm()). */
    [[nodiscard]] int event_fd() const noexcept { return event_fd_; }
    /**
     * @brief Takes what the completion queue holds, arms its notification (notify_fd() polls readable at the next
     *        completion) and returns readiness() (poll and select sleep on it).
     */
    uint32_t arm();
    /** @brief A thread starts (@p asleep) or stops sleeping on notify_fd() and event_fd() in poll(2). */
    void sleeping(bool asleep) noexcept;
    /** @brief Closed and everything sent, or failed: the stream can go. */
    [[nodiscard]] bool finished();

    /** @brief The stream's state in words (for traces and rdmactl). */
    [[nodiscard]] std::string describe();
    /** @brief The state as a word: converting, open, failed, closed. */
    [[nodiscard]] const char *state_name() const noexcept;
    /** @brief The state. */
    [[nodiscard]] State state() const noexcept { return state_.load(std::memory_order_acquire); }
    /** @brief The counters. */
    [[nodiscard]] const StreamCounters &counters() const noexcept { return counters_; }
    /** @brief True when its QP, CQ and buffers served a connection before (Device::recycle()). */
    [[nodiscard]] bool kit_reused() const noexcept { return kit_reused_; }
    /** @brief True when the kAL paired the two ends on this host (the same-host channel). */
    [[nodiscard]] bool same_host() const noexcept { return same_host_.load(std::memory_order_relaxed); }
    /** @brief True when the bytes move on the byte channel (same host), not as Sends of the QP. */
    [[nodiscard]] bool direct() const noexcept { return direct_.load(std::memory_order_acquire); }
    /** @brief True when the connection has a QP (not one converted over a link, which has only its byte channel). */
    [[nodiscard]] bool has_qp() const noexcept { return static_cast<bool>(ep_); }
    // The extended interface (xsocket.h). Each returns 0 or -errno.
    /** @brief Sends @p a to the peer out of band (waits for a credit unless @p nonblock). */
    int advertise(const AdvertWire &a, bool nonblock);
    /** @brief The oldest region the peer advertised (waits unless @p nonblock). */
    int peer_region(AdvertWire &out, bool nonblock);
    /** @brief Posts an RDMA Write or Read (@p read) between @p local and the peer's @p rkey at @p remote (waits for
     *         the conversion to end unless @p nonblock). */
    int rdma(bool read, const ri_sge_t &local, uint64_t remote, uint32_t rkey, uint64_t context, bool nonblock);
    /** @brief Sends registered bytes @p local in the byte stream without a copy (waits unless @p nonblock). */
    int send_registered(const ri_sge_t &local, uint64_t context, bool nonblock);
    /** @brief Takes up to @p max completions of the extended interface. */
    size_t take_completions(XsCompletion *out, size_t max);
    /** @brief Polls readable while completions of the extended interface wait. */
    [[nodiscard]] int completion_fd();
    /** @brief The device (RNIC) the stream runs on. */
    [[nodiscard]] const std::shared_ptr<Device> &device() const noexcept { return device_; }

    /** @brief The endpoint (for the extended interface). */
    [[nodiscard]] const std::shared_ptr<ual::Endpoint> &endpoint() const noexcept { return ep_; }

private:
    struct Arrived {
        uint32_t slot;
        uint32_t begin;  // next unread byte within the slot
        uint32_t end;    // one past the last byte
    };
    Stream(std::shared_ptr<Device> device, const StreamShape &shape);
    rdma::Expected<void> setup();
    void on_connection(const ual::Event &e);

    // Everything below with _locked runs under mutex_.
    void handle_locked(const ri_wc_t &wc);
    bool poll_locked();                       // handles what the CQ holds; true if anything came
    void post_locked();                       // posts queued slots and owed credits as credit allows
    bool post_message_locked(uint32_t slot, uint32_t len, uint16_t flags);
    bool post_payload_locked(const ri_sge_t *payload, uint16_t flags, uint64_t wr_id);
    // Posts one signaled Send of @p sgl (a message whose header carries owed_) and counts it: credit spent, owed
    // credits returned, a send request more outstanding.
    bool post_send_locked(const ri_sge_t *sgl, uint32_t nsge, uint32_t send_flags, uint64_t wr_id);
    // A write of @p len bytes (at most the inline size) from @p from, posted inline; false (nothing moved) when it
    // cannot go now that way.
    bool post_inline_locked(IovCursor &from, size_t len);
    [[nodiscard]] uint8_t *tail() const noexcept;  // headers and advertisements, after the send slots
    void repost_locked(uint32_t slot);
    void fail_locked(int err);
    uint32_t readiness_locked() const;
    void mirror_locked();
    void update_background_locked();
    // Waits for progress: spins on the CQ, then sleeps on it (leader) or on cv_ (followers).
    void wait_locked(std::unique_lock<std::mutex> &lock);
    // Takes every completion, through the dispatcher so that its descriptor is quieted (and event_fd_), then posts
    // what credit allows; true when anything came.
    bool drain_locked();
    // drain_locked(), then arms the CQ and looks once more; true when anything came.
    bool arm_locked();
    [[nodiscard]] uint8_t *send_slot(uint32_t seq) const noexcept;
    // The byte channel's data path (direct_): the same answers as send() and recv().
    ssize_t send_direct_locked(std::unique_lock<std::mutex> &lock, std::span<const iovec> iov, bool nonblock);
    ssize_t recv_direct_locked(std::unique_lock<std::mutex> &lock, std::span<const iovec> iov, int flags,
                               bool nonblock);
    uint32_t readiness_direct_locked() const;
    // Waits for bytes (or room, @p for_write) on the byte channel: spins, then sleeps on its bell.
    void wait_direct_locked(std::unique_lock<std::mutex> &lock, bool for_write);
    // Asks the peer for the bell for what a sleeper watches (bytes; room when there is none) and reads the bell.
    void arm_direct_locked();
    [[nodiscard]] uint8_t *recv_slot(uint32_t idx) const noexcept;

    std::shared_ptr<Device> device_;
    const StreamShape shape_;
    std::shared_ptr<ual::SimpleDispatcher> dto_, cm_;
    std::shared_ptr<ual::CompletionQueue> cq_;
    std::shared_ptr<ual::Endpoint> ep_;
    uint8_t *mem_ = nullptr;   // the stream's registered memory (from the device's pool)
    uint32_t lkey_ = 0;
    size_t mem_index_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::atomic<State> state_{State::converting};
    int error_ = 0;             // the errno the connection ended with (reported once through SO_ERROR)
    int sticky_error_ = 0;      // what I/O says from now on
    bool leader_ = false;       // a waiter polls or sleeps on the CQ
    bool read_leader_ = false;  // on the byte channel: a waiter for bytes spins or sleeps on the bell
    bool write_leader_ = false; // on the byte channel: a waiter for room does
    bool cm_final_ = false;     // the connection's last event came (its kit can be reused)
    bool due_ = false;          // closed in order: counted by Device::expect_due() until ~Stream
    bool kit_reused_ = false;   // its QP served a connection before
    std::string link_peer_;     // begin() as the initiator: the peer's address, which finds the link again (link.hpp)
    std::chrono::steady_clock::time_point closed_seen_{};  // finished() first saw it closed without its last event
    uint32_t peer_slot_len_ = 0;

    // Sending. Slots are numbered by sequence: [done_, post_) posted, [post_, end_) holding bytes not yet posted
    // (the last of them takes more bytes until it is full or posted); slot_len_ has the bytes of each.
    uint32_t done_ = 0, post_ = 0, end_ = 0;
    std::vector<uint32_t> slot_len_;
    uint32_t credits_ = 0;      // messages the peer can take
    uint32_t owed_ = 0;         // credits to return
    uint32_t sq_used_ = 0;      // send requests outstanding
    uint32_t ctrl_seq_ = 0;     // credit-only messages posted (their headers' slots)
    bool fin_queued_ = false;   // shutdown(SHUT_WR): the end of stream goes after the queued bytes
    bool fin_sent_ = false;
    bool closing_ = false;      // the application closed: finish sending, then disconnect
    bool disconnecting_ = false;
    std::chrono::steady_clock::time_point closing_deadline_{};

    // Receiving: messages in arrival order.
    std::vector<Arrived> arrived_;  // ring of recv_slots entries
    uint32_t arr_head_ = 0, arr_count_ = 0;
    bool peer_fin_ = false;
    bool rd_shut_ = false;

    Mirror *mirror_ = nullptr;
    // The extended interface: operations posted (by slot), regions the peer advertised, completions to take.
    struct XsOp {
        uint64_t context = 0;
        uint32_t op = 0;
        uint64_t length = 0;
        bool busy = false;
    };
    int xs_post_locked(ri_send_wr_t &wr, uint32_t op, uint64_t context, uint64_t length);
    void xs_complete_locked(const ri_wc_t &wc);
    std::vector<XsOp> xs_ops_;
    std::vector<AdvertWire> peer_regions_;
    std::vector<XsCompletion> xs_done_;
    uint32_t advert_seq_ = 0;
    int xs_fd_ = -1;  // an eventfd, readable while xs_done_ holds completions (made on first request)
    int event_fd_ = -1;  // an eventfd raised by connection events and others' progress, for whoever sleeps
    std::atomic<int> pollers_{0};  // threads asleep on notify_fd() and event_fd_
    std::atomic<bool> background_{false};
    std::atomic<bool> prompt_{false};
    std::atomic<bool> urgent_{false};
    std::atomic<bool> same_host_{false};
    rdma::provider::Channel bytes_;      // the byte channel, once direct_
    std::atomic<bool> direct_{false};
    StreamCounters counters_;
};

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_STREAM_HPP
