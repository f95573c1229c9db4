/**
 * @file itapi_session.hpp
 * @brief What it_perf's IT-API client and server share: the interface and its objects (IA, PZ, SEVDs, one LMR
 *        over every buffer), the session's wire messages (connect/accept private data and control Sends, encoded
 *        explicitly in network byte order), work request cookies, and the completion reaper.
 *
 * Internal to it_perf; only itapi_runner.cpp includes it.
 */
#ifndef IT_PERF_ITAPI_SESSION_HPP
#define IT_PERF_ITAPI_SESSION_HPP

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "it_api.h"
#include "itapi_names.hpp"
#include "page_buffer.hpp"
#include "rnicpi/cpp/status.hpp"
#include "test_case.hpp"

namespace it_perf::session {

using Clock = std::chrono::steady_clock;

/** @brief A test that makes no progress for this long fails instead of hanging. */
constexpr auto kStallTimeout = std::chrono::seconds(30);
/** @brief Connection setup and teardown steps wait this long. */
constexpr auto kConnectTimeout = std::chrono::seconds(15);
/** @brief RDMA Read depth (IRD and ORD) each endpoint asks for. */
constexpr uint32_t kReadDepth = 16;
/** @brief Receives the control endpoint keeps posted. */
constexpr uint32_t kControlReceives = 8;
/** @brief Size of a control message and of each control buffer. */
constexpr size_t kControlSize = 64;
/** @brief Untimed round trips before a latency test's clock starts. */
constexpr uint64_t kWarmupIterations = 16;

// ---------------------------------------------------------------------------------------------------------------
// Wire messages

/**
 * @brief Connect private data: which endpoint this is and, for the control endpoint, the session's shape. A probe
 *        belongs to no session: the setup-rate test's connection, accepted and otherwise left alone by the server.
 */
struct ConnectData {
    enum class Role : uint8_t { control = 1, data = 2, probe = 3 };
    Role role = Role::control;
    uint32_t qps = 1;      /**< Data endpoints that follow (control). */
    uint32_t window = 64;  /**< Outstanding operations per data endpoint (control). */
    uint64_t max_size = 0; /**< Largest message of the session (control). */
    uint32_t index = 0;    /**< Which data endpoint (data). */
    uint64_t address = 0;     /**< The client's region for this data endpoint (data): address, */
    uint64_t length = 0;      /**< length (source half, then sink half), */
    uint64_t rmr_context = 0; /**< and STag, for the server's RDMA Writes of the Write latency test. */

    static constexpr size_t kWireSize = 56;
    void write(uint8_t *out) const;
    static rdma::Expected<ConnectData> read(const uint8_t *in, size_t len);
};

/** @brief Accept private data: the server's buffer for this data endpoint and its receive queue's shape. */
struct AcceptData {
    uint64_t address = 0;       /**< The region's virtual address (absolute addressing). */
    uint64_t length = 0;        /**< The region's length: source half, then sink half. */
    uint64_t rmr_context = 0;   /**< The region's STag. */
    uint32_t receive_depth = 0; /**< Receives the server keeps posted (the client's initial Send credits). */
    uint32_t credit_batch = 0;  /**< Receives each credit message returns. */

    static constexpr size_t kWireSize = 40;
    void write(uint8_t *out) const;
    static rdma::Expected<AcceptData> read(const uint8_t *in, size_t len);
};

/** @brief A control Send between client and server. */
struct ControlMessage {
    enum class Type : uint32_t { request = 1, ready = 2, end = 3, end_ack = 4, bye = 5 };
    Type type = Type::request;
    Op op = Op::write;
    Kind kind = Kind::bw;
    uint64_t size = 0;  /**< Message size (request). */
    uint64_t count = 0; /**< Sends made (end), credit messages sent (end_ack). */

    void write(uint8_t *out) const;
    static rdma::Expected<ControlMessage> read(const uint8_t *in, size_t len);
};

// ---------------------------------------------------------------------------------------------------------------
// Cookies: what a completion is about, and on which data endpoint.

enum class WorkKind : uint64_t { op = 1, receive = 2, fence = 3, credit = 4, echo = 5, control_send = 6, control_receive = 7 };

inline it_dto_cookie_t cookie(WorkKind kind, uint32_t qp) { return (static_cast<uint64_t>(kind) << 32) | qp; }
inline WorkKind cookie_kind(it_dto_cookie_t c) { return static_cast<WorkKind>(c >> 32); }
inline uint32_t cookie_qp(it_dto_cookie_t c) { return static_cast<uint32_t>(c); }

// ---------------------------------------------------------------------------------------------------------------
// Objects

/** @brief The registered buffer's memory: page-aligned, as the TCP baseline's (page_buffer.hpp). */
using Buffer = PageBuffer;

/**
 * @brief An IA with its protection zone and event dispatchers; frees everything it made, endpoints first, when
 *        destroyed.
 */
class Interface {
public:
    /** @brief Opens @p name (an interface name or address; empty: the first it_interface_list reports). */
    static rdma::Expected<std::unique_ptr<Interface>> open(const std::string &name);
    ~Interface();
    Interface(const Interface &) = delete;
    Interface &operator=(const Interface &) = delete;

    /** @brief A simple EVD for @p stream with room for @p queue events. */
    rdma::Expected<it_evd_handle_t> create_evd(it_event_type_t stream, size_t queue);
    /** @brief An RC endpoint on this PZ, its completions on @p dto, its connection events on @p cm. */
    rdma::Expected<it_ep_handle_t> create_ep(it_evd_handle_t dto, it_evd_handle_t cm, size_t request_dtos,
                                             size_t receive_dtos, uint64_t max_payload);
    /** @brief Registers @p buf for local and remote access; its handle and STag. */
    rdma::Expected<std::pair<it_lmr_handle_t, it_rmr_context_t>> register_memory(const Buffer &buf);
    /** @brief Disconnects and frees @p ep (errors ignored: teardown). */
    void free_ep(it_ep_handle_t ep);
    /** @brief Frees @p lmr. */
    void free_lmr(it_lmr_handle_t lmr);
    /** @brief Frees @p evd. */
    void free_evd(it_evd_handle_t evd);

    /**
     * @brief Why the RNIC stopped serving, when it said so on the IA's unaffiliated event stream (krdmad stopped or
     *        died, the link went down), waiting up to @p wait for the notice; empty when it did not. For the
     *        message of a run cut short.
     */
    [[nodiscard]] std::string offline_reason(std::chrono::milliseconds wait = std::chrono::milliseconds(500));

    [[nodiscard]] it_ia_handle_t ia() const { return ia_; }
    [[nodiscard]] it_pz_handle_t pz() const { return pz_; }
    [[nodiscard]] const std::string &name() const { return name_; }

private:
    Interface() = default;
    it_ia_handle_t ia_ = nullptr;
    it_pz_handle_t pz_ = nullptr;
    it_evd_handle_t async_ = nullptr;  // the unaffiliated stream: the RNIC going offline
    std::string name_;
    std::vector<it_evd_handle_t> evds_;
    std::vector<it_ep_handle_t> eps_;
    std::vector<it_lmr_handle_t> lmrs_;
};

/**
 * @brief Takes the next event of an EVD: it_evd_dequeue (poll), or it_evd_wait for at most a millisecond
 *        (event mode). Returns IT_SUCCESS with the event, or IT_ERR_QUEUE_EMPTY when there is none yet.
 */
inline it_status_t next_event(it_evd_handle_t evd, bool wait, it_event_t &event) {
    if (!wait) return it_evd_dequeue(evd, &event);
    size_t more = 0;
    const it_status_t s = it_evd_wait(evd, 1000, &event, &more);
    return s == IT_ERR_TIMEOUT_EXPIRED ? IT_ERR_QUEUE_EMPTY : s;
}

/** @brief Waits up to @p timeout for an event of @p evd (it_evd_wait). */
rdma::Expected<it_event_t> wait_event(it_evd_handle_t evd, std::chrono::milliseconds timeout, const char *what);

/** @brief The error of a completion that did not succeed. */
rdma::Error completion_error(const it_event_t &event, const char *what);

/** @brief The IPv4 address of @p host (a name or a dotted address). */
rdma::Expected<in_addr> resolve_ipv4(const std::string &host);

/** @brief Posts a receive of @p length bytes at @p addr. */
inline it_status_t post_receive(it_ep_handle_t ep, it_lmr_handle_t lmr, void *addr, size_t length,
                                it_dto_cookie_t c) {
    it_lmr_triplet_t t{};
    t.lmr = lmr;
    t.addr.abs = addr;
    t.length = length;
    return it_post_recv(ep, &t, 1, c, IT_COMPLETION_FLAG);
}

/** @brief Posts a Send of @p length bytes at @p addr. */
inline it_status_t post_send(it_ep_handle_t ep, it_lmr_handle_t lmr, void *addr, size_t length, it_dto_cookie_t c) {
    it_lmr_triplet_t t{};
    t.lmr = lmr;
    t.addr.abs = addr;
    t.length = length;
    return it_post_send(ep, &t, 1, c, IT_COMPLETION_FLAG);
}

}  // namespace it_perf::session

#endif  // IT_PERF_ITAPI_SESSION_HPP
