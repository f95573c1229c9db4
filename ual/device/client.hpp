/**
 * @file client.hpp
 * @brief The uAL's side of /dev/krdma: connect, handshake, request/reply calls with descriptors, event records.
 */
#ifndef UAL_DEVICE_CLIENT_HPP
#define UAL_DEVICE_CLIENT_HPP

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <mutex>
#include <unordered_map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "krdma/message.hpp"
#include "rnicpi/cpp/status.hpp"

namespace ual {

/** @brief The answer to a call. */
struct CallReply {
    int status = 0;                       /**< 0 or the kAL's positive errno value. */
    std::vector<uint8_t> payload;         /**< The reply struct (empty on error). */
    std::vector<krdma::UniqueFd> fds;     /**< Descriptors the kAL passed back; the caller owns them. */
    std::string reason;                   /**< On error: why, in the kAL's words (empty when it gave none). */
};

/** @brief The answer to call_into(): the reply struct is in the caller's buffer. */
struct CallStatus {
    int status = 0;                                    /**< 0 or the kAL's positive errno value. */
    size_t payload_len = 0;                            /**< Bytes of the reply struct (0 on error). */
    std::array<krdma::UniqueFd, KRDMA_MAX_FDS> fds;    /**< Descriptors the kAL passed back; the caller owns them. */
    size_t nfds = 0;                                   /**< Entries used in CallStatus::fds. */
    std::array<char, KRDMA_MAX_REASON> reason;         /**< On error: the kAL's reason (reason_len bytes of it). */
    size_t reason_len = 0;                             /**< Bytes used in CallStatus::reason. */
    /** @brief The kAL's reason for an error, or empty. */
    [[nodiscard]] std::string_view why() const noexcept { return {reason.data(), reason_len}; }
};

/**
 * @brief The error of a refused call: code @p status, and as message the kAL's @p reason, or the C library's text
 *        for the code when the kAL gave none (a protocol 1.0 krdmad).
 */
[[nodiscard]] rdma::Error refusal(int status, std::string_view reason);

/** @brief A connection event record and the socket an ESTABLISHED record brings. */
struct CmRecord {
    krdma_cm_event event{};  /**< The record. */
    krdma::UniqueFd fd;      /**< ESTABLISHED: the connected socket (the receiver owns it); else empty. */
    krdma::UniqueFd channel; /**< ESTABLISHED on the same-host path: the channel's end (::RI_LLP_SAME_HOST). */
    krdma::UniqueFd byte_channel; /**< ESTABLISHED: the consumer's own channel (::KRDMA_CONVERT_BYTE_CHANNEL). */
    krdma::UniqueFd link;         /**< ESTABLISHED: the two processes' link (::KRDMA_CONVERT_LINK). */
};

/** @brief A connection to a kAL's device. */
class DeviceClient {
public:
    /** @brief How long connect() waits for a krdmad to take the connection and answer HELLO, unless told. */
    static constexpr std::chrono::milliseconds kOpenWait = std::chrono::seconds(30);

    /**
     * @brief Connects to the device at @p path and performs HELLO, waiting @p wait at most for each. ::RI_ENOENT /
     *        ::RI_ECONNREFUSED with a message that says krdmad is not running there; ENOTSOCK when @p path is
     *        not a socket ("not a krdmad device: PATH is a directory"); ::RI_ETIMEDOUT, naming the device and what
     *        to check, when nothing takes the connection or answers HELLO in time (a stopped or hung krdmad).
     */
    [[nodiscard]] static rdma::Expected<std::unique_ptr<DeviceClient>> connect(const std::filesystem::path &path,
                                                                               std::chrono::milliseconds wait = kOpenWait);
    /** @brief Uses an already connected device socket (an embedded kAL's) and performs HELLO. */
    [[nodiscard]] static rdma::Expected<std::unique_ptr<DeviceClient>> adopt(krdma::UniqueFd socket);

    /**
     * @brief Sends request @p cmd with @p request (its size must be the command's) and @p fds; waits for the reply
     *        up to @p timeout. Event records arriving meanwhile are queued for next_event(). ::RI_ENODEV when the kAL
     *        went away, ::RI_ETIMEDOUT when it does not answer.
     */
    [[nodiscard]] rdma::Expected<CallReply> call(uint32_t cmd, std::span<const uint8_t> request,
                                                 std::span<const int> fds = {},
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /**
     * @brief call(), with a refusal as the error: a reply with a nonzero status becomes refusal() of it, so the
     *        kAL's reason reaches the caller in the rdma::Error's message. For slow paths (administration, setup).
     */
    [[nodiscard]] rdma::Expected<CallReply> request(uint32_t cmd, std::span<const uint8_t> request,
                                                    std::span<const int> fds = {},
                                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /**
     * @brief call() without allocating: the reply struct is copied into @p reply (at most its size; the
     *        announced size is CallStatus::payload_len). An error reply leaves @p reply untouched and its reason in
     *        CallStatus::reason. For the per-verb path (ri_syscall).
     */
    [[nodiscard]] rdma::Expected<CallStatus> call_into(uint32_t cmd, std::span<const uint8_t> request,
                                                       std::span<uint8_t> reply, std::span<const int> fds = {},
                                                       std::chrono::milliseconds timeout = std::chrono::seconds(30));
    /** @brief PostedFailure::type of a request whose refusal is only logged (a posted ri_syscall_post). */
    static constexpr uint32_t kLogRefusal = 0;
    /** @brief What a posted request's refusal becomes: a connection event record about one object, or a log line. */
    struct PostedFailure {
        uint32_t type = KRDMA_CM_BROKEN; /**< The record's ::krdma_cm_event_type (its status is the refusal's), or
                                              kLogRefusal for none. */
        uint64_t object = 0;             /**< kAL handle of the object (the QP). */
        uint64_t context = 0;            /**< Its consumer context. */
        uint32_t cookie = 0;             /**< Its cookie, which routes the record. */
    };
    /**
     * @brief Sends request @p cmd without waiting for its reply: the caller makes no round trip (a server accepting
     *        many connections keeps going while the kAL works). A 1.3 kAL answers it only if it fails (a quiet
     *        request, ::KRDMA_MSG_QUIET); an older one's success reply is dropped when it arrives. A refusal becomes
     *        a connection event record as @p failure says, queued like the kAL's own records (its reason is
     *        logged). An error here only when the request could not be sent.
     */
    [[nodiscard]] rdma::Expected<void> post(uint32_t cmd, std::span<const uint8_t> request, const PostedFailure &failure);
    /** @brief The next event record, received now or queued during a call; nothing when none is waiting. */
    [[nodiscard]] std::optional<krdma_event> next_event();
    /** @brief The next connection event record (queued by next_event() or a call); nothing when none is waiting. */
    [[nodiscard]] std::optional<CmRecord> next_cm_event();
    /**
     * @brief The event thread's batch: every record waiting on the socket or queued by calls is appended to
     *        @p events and @p cm_events, in arrival order within each kind. One recvmsg per record plus one that
     *        finds the socket empty, and the queued_fd() announcement is read only when one was made, so a wake-up
     *        costs the system calls it needs and no more.
     */
    void take_events(std::vector<krdma_event> &events, std::vector<CmRecord> &cm_events);
    /**
     * @brief The event thread's descriptor to poll() for event records: readable when the kAL rings the doorbell
     *        (protocol 1.7: a record, or a quiet request's failure) or, with an older kAL, when the socket is except
     *        while a call reads it; never while a thread leads (lead_fd()). Events a call reads are queued and
     *        announced by queued_fd().
     */
    [[nodiscard]] int fd() const noexcept { return events_watch_.get(); }
    /**
     * @brief A leader's descriptor (a thread that reads the kAL in the event thread's stead, see ual::EventPump):
     *        readable when the doorbell rings or, with an older kAL, when the socket is except while a call reads
     *        it. Call lead(true) first.
     */
    [[nodiscard]] int lead_fd() const noexcept { return watch_.get(); }
    /** @brief A thread starts (@p on) or stops leading: fd() is muted meanwhile, lead_fd() is not. One epoll_ctl. */
    void lead(bool on) noexcept;
    /** @brief The device socket itself. */
    [[nodiscard]] int socket() const noexcept { return sock_.get(); }
    /**
     * @brief A descriptor that polls readable when a call queued event records that arrived during it (they are
     *        no longer on the socket); read them with next_event().
     */
    [[nodiscard]] int queued_fd() const noexcept { return queued_.get(); }
    /** @brief Whether next_event() found the kAL gone (the device connection closed). */
    [[nodiscard]] bool closed() const noexcept { return closed_; }
    /** @brief The HELLO reply: the kAL's view of this process (abi_version: the version word in use). */
    [[nodiscard]] const krdma_hello &hello() const noexcept { return hello_; }
    /** @brief The protocol minor version in use with this kAL (0: a 1.0 krdmad, whose errors carry no reason). */
    [[nodiscard]] uint32_t abi_minor() const noexcept { return KRDMA_ABI_MINOR_OF(hello_.abi_version); }

private:
    DeviceClient() = default;
    [[nodiscard]] rdma::Expected<void> handshake(const std::string &where, std::chrono::milliseconds wait = kOpenWait);
    // Sends the request and waits for its reply, which is then in message_. Called with mutex_ held.
    [[nodiscard]] rdma::Expected<void> exchange(uint32_t cmd, std::span<const uint8_t> request,
                                                std::span<const int> fds, std::chrono::milliseconds timeout);
    // Sends request @p cmd with @p fds and header @p flags under a new sequence number, which it returns. mutex_
    // held.
    [[nodiscard]] rdma::Expected<uint32_t> send_locked(uint32_t cmd, std::span<const uint8_t> request,
                                                       std::span<const int> fds, uint32_t flags);
    // Sends one message, blocking while the socket is full but reading (and queueing, announced) what the kAL
    // sends meanwhile: the kAL reads no more requests until its records are read. mutex_ held.
    [[nodiscard]] rdma::Status send_reading_locked(const krdma_msg_hdr &hdr, std::span<const uint8_t> request,
                                                   std::span<const int> fds);
    // Forgets the posted requests sent before @p seq, whose reply just came: they succeeded quietly. mutex_ held.
    void settle_posted_before(uint32_t seq);
    // An event record (true): queued (*queued set when given), or kept as the kAL's refusal. mutex_ held.
    bool take_event(krdma::Message &m, bool *queued = nullptr);
    // A reply to a posted request (it is then consumed): a refusal is queued as a connection record (*queued set)
    // or only logged. mutex_ held.
    bool take_posted_reply(krdma::Message &m, bool *queued = nullptr);
    // Reads the doorbell's rings (protocol 1.7), before reading the socket empty. mutex_ held.
    void drain_doorbell_locked();
    // After a call that read records besides its reply (in message_, kept): drains the doorbell and reads what
    // waits behind the reply. mutex_ held.
    void settle_doorbell_locked();
    // Reads every record on the socket into the queues, and the queued_ announcement if one was made. mutex_ held.
    void receive_all_locked();
    // Reads every message waiting on the socket without blocking: records into the queues (*queued set, when given,
    // if one was queued), posted requests' replies settled; each is received into @p into. mutex_ held.
    void read_waiting_locked(bool *queued, krdma::Message &into);
    // Announces records a call read (they are no longer on the socket) on queued_. mutex_ held.
    void announce_locked();
    // Reads the queued_ announcement, if one was made (takes queue_mutex_).
    void take_announcement();
    // The next record of @p queue, receiving what waits on the socket when it is empty (records of @p other's
    // kind read on the way are announced). Takes mutex_.
    template <class Record, class Other>
    std::optional<Record> next_of(std::deque<Record> &queue, const std::deque<Other> &other);

    krdma::UniqueFd sock_;
    krdma::UniqueFd queued_;  // eventfd raised when call() queues an event
    bool announced_ = false;  // queued_ was raised and not read since (under queue_mutex_)
    // Mutes the socket in watch_ while a call reads it (@p on), or unmutes it. mutex_ held: one call at a time.
    void mute(bool on) noexcept;
    krdma::UniqueFd doorbell_;      // minor 7: rings for each message nobody waits for (nothing to mute then)
    krdma::UniqueFd watch_;         // epoll set of the doorbell (or the socket, muted during calls): a leader polls it
    krdma::UniqueFd events_watch_;  // epoll set of watch_, muted while a thread leads: the event thread polls it
    krdma_hello hello_{};
    std::atomic<bool> closed_{false};
    void read_refusal();          // reads a KRDMA_EVENT_REFUSED record left after the kAL closed the connection
    [[nodiscard]] rdma::Error refused_error() const;  // what that record said, as the call's error
    int refused_ = 0;             // the status of a KRDMA_EVENT_REFUSED record (0: none)
    std::string refused_reason_;  // and its reason
    uint32_t next_seq_ = 1;
    std::chrono::milliseconds rcvtimeo_{0};  // the socket's SO_RCVTIMEO (0: none set)
    std::mutex mutex_;  // the socket's: one call at a time, and whoever reads records from it
    // The queues of records read and their announcement, apart from mutex_ so that the event thread can take
    // what a call queued while the call still waits for its reply. Taken after mutex_, never before.
    std::mutex queue_mutex_;
    std::deque<krdma_event> events_;
    std::deque<CmRecord> cm_events_;
    std::unordered_map<uint32_t, PostedFailure> posted_;  // requests sent by post(), by sequence number
    krdma::Message message_;
    krdma::Message spare_;  // what settle_doorbell_locked() reads into, message_ holding the call's reply
};

}  // namespace ual

#endif  // UAL_DEVICE_CLIENT_HPP
