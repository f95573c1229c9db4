/**
 * @file server.hpp
 * @brief The kAL's system call management transport: the /dev/krdma device server.
 *
 * Listens on a Unix SOCK_SEQPACKET path, learns each caller's identity from SO_PEERCRED, decodes and checks every
 * request (flags, reserved fields, the command's announced size against the payload) before a handler sees it,
 * and answers every request, valid or not, with a reply carrying its sequence number. A malformed request costs
 * the caller an error reply, never its connection, and the server never allocates per request.
 */
#ifndef KAL_DEVICE_SERVER_HPP
#define KAL_DEVICE_SERVER_HPP

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "krdma/message.hpp"
#include "rnicpi/cpp/status.hpp"

namespace kal {

/** @brief Who is on the other end of a connection, from SO_PEERCRED. */
struct Peer {
    pid_t pid = 0;          /**< Process id. */
    uid_t uid = 0;          /**< User id. */
    gid_t gid = 0;          /**< Group id. */
    uint32_t client_id = 0; /**< The kAL's identifier of the connection. */
    uint64_t start_time = 0; /**< When process ::pid started (kal::process_start_time(); 0: unknown). */
    /** @brief Whether ::pid is in krdmad's own pid namespace (kal::in_own_pid_namespace(), read once at connect). */
    bool own_pid_namespace = false;
};

/** @brief One connected client. */
class Connection {
public:
    /** @brief A connection the server accepted (made by the server only). */
    Connection() = default;
    /**
     * @brief A connection with no socket, for a consumer hosted in the kAL process (kal::HostedConsumer): the
     *        kAL's blocks serve its requests like a client's, and its events go to a callback instead of a socket.
     */
    explicit Connection(const Peer &peer) : peer_(peer) {}
    /** @brief The caller's identity. */
    [[nodiscard]] const Peer &peer() const noexcept { return peer_; }
    /** @brief The connection's socket. */
    [[nodiscard]] int fd() const noexcept { return sock_.get(); }
    /** @brief The protocol minor version in use (what HELLO agreed on; 0 before HELLO): 1 adds reasons to errors. */
    [[nodiscard]] uint32_t abi_minor() const noexcept { return abi_minor_; }
    /** @brief Sends an unsolicited event record. */
    [[nodiscard]] rdma::Status send_event(const krdma_event &event) noexcept;

private:
    friend class DeviceServer;
    // Replies and records the client's full receive queue could not take yet (it has not read its events), in
    // order: kept until the socket is writable, and no further request of this client is read meanwhile, so a
    // client that falls behind a burst of connection events loses neither them nor a reply. Bounded by
    // DeviceServer::kMaxHeld (under DeviceServer::mutex_: records come from any thread).
    struct Held {
        krdma_msg_hdr hdr{};
        bool unawaited = false;  // rings the doorbell when sent
        std::vector<uint8_t> payload;
        std::vector<krdma::UniqueFd> fds;
    };
    // Rings the doorbell (minor 7): a message nobody waits for was sent or held for this client.
    void ring() const noexcept;
    krdma::UniqueFd sock_;
    krdma::UniqueFd doorbell_;  // the kAL's end of the client's doorbell pair (minor 7), or empty
    Peer peer_;
    uint32_t abi_minor_ = 0;
    std::deque<Held> held_;
};

/** @brief A request as a handler sees it: already checked for size and form. */
struct Request {
    uint32_t cmd = 0;                   /**< Command code. */
    std::span<const uint8_t> payload;   /**< Exactly command_size(cmd) bytes. */
    krdma::Message *message = nullptr;  /**< The received message, to take its descriptors from. */

    /**
     * @brief The payload as the command's struct @p T, copied out (the payload's bytes need not be aligned for it).
     *        The server checked that the payload is command_size(cmd) bytes, which is sizeof(T) for its command.
     */
    template <class T>
    [[nodiscard]] T as() const noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "device commands are plain C structs");
        T q;
        std::memcpy(&q, payload.data(), sizeof q);
        return q;
    }
};

/** @brief What a handler answers besides its status. */
struct Reply {
    std::span<uint8_t> payload;  /**< command_size(cmd) bytes, initially a copy of the request. */
    int fds[KRDMA_MAX_FDS]{};    /**< Descriptors to pass back (not owned: they must stay open until the reply is sent). */
    size_t nfds = 0;             /**< Entries used in ::fds. */
    /** Descriptors the handler hands over for the reply: closed once the reply is sent (or failed). */
    krdma::UniqueFd owned[KRDMA_MAX_FDS];

    /**
     * @brief Records @p why as the reason of a refusal and returns @p code, so a handler refuses in one statement:
     *        `return rep.fail(RI_EINVAL, "...")`. The text says what was wrong and, where it can, what to do; it
     *        goes to the client with the error (protocol minor 1), cut and cleaned by krdma::reason_text().
     */
    int fail(int code, std::string_view why) noexcept;
    /** @brief fail() with @p error's code and message. */
    int fail(const rdma::Error &error) noexcept { return fail(error.code(), error.message()); }
    /** @brief The reason recorded by fail(), or empty. */
    [[nodiscard]] std::string_view why() const noexcept { return {reason_, reason_len_}; }

private:
    char reason_[KRDMA_MAX_REASON];  // not cleared per request: only reason_len_ bytes are ever read
    size_t reason_len_ = 0;
};

/**
 * @brief Handles one command; returns 0 or a positive errno value of the RNIC-PI vocabulary (::ri_errno) for the
 *        reply, with its reason recorded by Reply::fail() where the handler knows one.
 */
using Handler = std::function<int(Connection &, const Request &, Reply &)>;

/** @brief The device server. */
class DeviceServer {
public:
    /** @brief Root may go this many connections beyond the limit, so the administrator's rdmactl always gets in. */
    static constexpr size_t kRootReserve = 32;
    /**
     * @brief Most messages held for one client whose receive queue is full (a burst of connection events it has
     *        not read yet): beyond this, a record is dropped (the caller hears EAGAIN) rather than held.
     */
    static constexpr size_t kMaxHeld = 8192;
    /**
     * @brief A server for device path @p path, accepting at most @p max_connections clients (root: ::kRootReserve
     *        more) and at most @p per_user of one non-root uid (0: no limit of its own).
     */
    explicit DeviceServer(std::filesystem::path path, size_t max_connections = 1024, size_t per_user = 0);
    DeviceServer(const DeviceServer &) = delete;
    DeviceServer &operator=(const DeviceServer &) = delete;
    /** @brief Closes every connection and removes the device path. */
    ~DeviceServer();

    /** @brief Registers the handler of @p cmd (HELLO and ECHO are built in). */
    void on(uint32_t cmd, Handler handler);
    /** @brief Removes the handler of @p cmd (with the server stopped, or from the serving thread). */
    void off(uint32_t cmd);
    /** @brief Called when a client disconnects (or the server stops), before its socket closes; empty = none. */
    void on_disconnect(std::function<void(Connection &)> callback);

    /**
     * @brief Creates the device: ::RI_EEXIST when a live server already serves the path; a stale socket file left
     *        by a dead server is replaced.
     */
    [[nodiscard]] rdma::Expected<void> listen();
    /**
     * @brief Connects a client inside this process (the embedded kAL): returns the client's end of a
     *        SOCK_SEQPACKET socket pair whose other end this server serves like any accepted connection.
     *        Works with or without listen().
     */
    [[nodiscard]] rdma::Expected<krdma::UniqueFd> connect_local();
    /** @brief Serves until stop(). */
    void run();
    /**
     * @brief Serves what is ready, waiting at most @p timeout_ms (negative: until something is) and less when an
     *        on_tick() deadline comes first; false once stop() was called. For a caller that drives the server from
     *        a loop of its own instead of a thread in run(): the calling thread is then the serving thread (handlers,
     *        watches and call_on_loop() run on it), and work queued by other threads waits for its next call.
     */
    [[nodiscard]] bool run_once(int timeout_ms);
    /** @brief Makes run() return; callable from any thread or a signal handler. */
    void stop() noexcept;
    /** @brief Sends @p event to every client. */
    void broadcast(const krdma_event &event);
    /**
     * @brief Sends @p event to client @p client_id, from any thread (event management). ::RI_ENOENT when the client is
     *        gone, ::RI_EAGAIN when its socket buffer is full (the event is dropped: a client that does not read its
     *        events cannot make the kAL queue without bound).
     */
    [[nodiscard]] rdma::Status send_event(uint32_t client_id, const krdma_event &event);
    /**
     * @brief Sends a variable-size event record (header cmd @p code) with descriptors @p fds to client
     *        @p client_id, from any thread; the same errors as send_event().
     */
    [[nodiscard]] rdma::Status send_record(uint32_t client_id, uint32_t code, std::span<const uint8_t> record,
                                           std::span<const int> fds = {});
    /** @brief What a watched descriptor's owner is told: the poll() revents. */
    using WatchFn = std::function<void(short revents)>;
    /**
     * @brief Polls @p fd for @p events in the serving loop and calls @p fn on the serving thread when any occur
     *        (the other blocks of the kAL, e.g. LLP management, share the device's loop and need no locks of their
     *        own). Replaces an earlier watch of @p fd. Call from the serving thread (a handler or a callback).
     */
    void watch(int fd, short events, WatchFn fn);
    /** @brief Stops polling @p fd (before it is closed); from the serving thread. */
    void unwatch(int fd);
    /**
     * @brief Called once per loop turn on the serving thread; returns how long the loop may sleep at most
     *        (negative: no limit). For the deadlines of other blocks (connection setup timeouts).
     */
    void on_tick(std::function<int()> fn) { tick_ = std::move(fn); }
    /**
     * @brief Runs @p fn on the serving thread and returns its result: the way code on another thread (a consumer
     *        hosted in the kAL) uses blocks that live on the serving thread. Before run() the call waits for it; on
     *        the serving thread, or once run() has returned, @p fn runs at once in the caller's thread (serialized
     *        with other such calls).
     */
    int call_on_loop(const std::function<int()> &fn);
    /**
     * @brief Queues @p fn to run on the serving thread and returns at once, without waiting for it: for threads that
     *        must never block on the serving thread (a kVP's event threads, which the serving thread may itself be
     *        waiting for inside a verb). Queued calls run in order with call_on_loop()'s. Before run() @p fn waits
     *        for it; once run() has returned, @p fn is dropped without running and the result is false.
     */
    bool post(std::function<void()> fn);
    /** @brief Connected clients. */
    [[nodiscard]] size_t connections() const;
    /** @brief The host-wide connection limit. */
    [[nodiscard]] size_t max_connections() const noexcept { return max_connections_; }
    /** @brief The per-user connection limit (0: none). */
    [[nodiscard]] size_t connections_per_user() const noexcept { return per_user_; }
    /** @brief Connections refused so far: over the host-wide limit, and over a user's limit. */
    struct Refusals {
        uint64_t host = 0;  /**< Over max_connections. */
        uint64_t user = 0;  /**< Over the per-user limit. */
    };
    /** @brief Connections refused since start. */
    [[nodiscard]] Refusals refusals() const;
    /** @brief Connections of @p uid. */
    [[nodiscard]] size_t connections_of(uid_t uid) const;
    /** @brief The device path. */
    [[nodiscard]] const std::filesystem::path &path() const noexcept { return path_; }

private:
    void accept_clients();
    void adopt(krdma::UniqueFd sock);
    bool turn(int timeout_ms);  // one wait and what it found; false when stopped
    void end_loop();  // the loop stopped: run waiting tasks; later call_on_loop() calls run inline
    bool serve(Connection &c);  // false when the connection is gone
    // Answers the message just received (its header, as far as it was read) with @p status and reason @p why.
    void refuse_message(Connection &c, int status, std::string_view why);
    bool flush_held(Connection &c);  // false when the connection is gone
    bool has_held(const Connection &c) const {
        std::lock_guard lock(mutex_);
        return !c.held_.empty();
    }
    // Sends to @p c, or holds the message behind what is held already (with copies of @p fds) when the client's
    // queue is full: EAGAIN only for a record beyond kMaxHeld. A message nobody waits for (a record, or a reply
    // that is not @p awaited: a quiet request's failure) rings the client's doorbell. mutex_ held.
    rdma::Status send_or_hold(Connection &c, const krdma_msg_hdr &hdr, std::span<const uint8_t> payload,
                              std::span<const int> fds, bool awaited = true);
    void dispatch(Connection &c, krdma::Message &m);
    void drop(uint32_t client_id);

    std::filesystem::path path_;
    size_t max_connections_;
    size_t per_user_;
    std::map<uid_t, size_t> per_uid_;  // connections of each uid (guarded by mutex_)
    Refusals refusals_;                // guarded by mutex_
    krdma::UniqueFd listener_;
    krdma::UniqueFd stop_fd_;  // eventfd
    krdma::UniqueFd wake_fd_;  // eventfd: wakes run() to look at work queued from other threads
    krdma::UniqueFd epoll_;    // every descriptor run() serves: stop, listener, wake, clients, watches
    std::map<uint32_t, Handler> handlers_;
    struct Watch {
        short events = 0;
        uint64_t generation = 0;  // tells a watch from a later one of the same descriptor number
        WatchFn fn;
    };
    std::map<int, Watch> watches_;
    uint64_t next_watch_ = 1;
    std::function<int()> tick_;
    std::function<void(Connection &)> on_disconnect_;
    struct Task;
    void run_tasks();
    std::mutex tasks_mutex_;  // guards tasks_ and loop_state_
    std::condition_variable tasks_done_;
    std::vector<std::variant<Task *, std::function<void()>>> tasks_;  // call_on_loop's (waited for) and post()'s
    enum class LoopState : uint8_t { idle, running, stopped };
    LoopState loop_state_ = LoopState::idle;
    std::atomic<std::thread::id> loop_thread_{};
    std::recursive_mutex inline_mutex_;  // call_on_loop() after the server stopped
    mutable std::mutex mutex_;  // guards clients_ against broadcast()/connections() from other threads
    std::map<uint32_t, std::unique_ptr<Connection>> clients_;
    uint32_t next_client_id_ = 1;
    krdma::Message message_;  // reused for every request: nothing is allocated per request
    std::array<uint8_t, KRDMA_MAX_MESSAGE> reply_buf_{};
};

}  // namespace kal

#endif  // KAL_DEVICE_SERVER_HPP
