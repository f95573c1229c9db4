/**
 * @file endpoint_fsm.hpp
 * @brief Endpoint management's state machine: the states of one QP's connection, the inputs that move it, and
 *        what each move asks its owner to do.
 *
 * Pure: no socket, no thread, no kVP. The owner (the kAL's Endpoint, kal/endpoint/endpoint.cpp) observes
 * the socket, the QP and the kVP, turns what it saw into one ::kal::EndpointInput with the facts that decide
 * between outcomes (::kal::EndpointFacts), and carries out the ::kal::EndpointStep it gets back: the connection
 * event to report, how to let go of the socket, whether to move the kVP's QP to ERROR, which LLP counter to count.
 * Every transition is decided in one function, endpoint_step(); an input that is not valid in the current state is
 * refused with ::RI_EINVAL and changes nothing, so an endpoint that already ended ignores a second report of the
 * same end (a consumer's Modify QP to ERROR after the kVP's own asynchronous error, say).
 */
#ifndef KAL_ENDPOINT_ENDPOINT_FSM_HPP
#define KAL_ENDPOINT_ENDPOINT_FSM_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "krdma/abi.h"
#include "rnicpi/ri_types.h"

namespace kal {

/** @brief Where a QP's connection stands. */
enum class EndpointState : uint8_t {
    idle,           /**< No connection (new, or its QP was reset to IDLE after an end). */
    connecting,     /**< TCP connect, MPA negotiation or the RDMA-mode transition in progress. */
    connected,      /**< In RDMA mode. */
    disconnecting,  /**< The consumer moved the QP to CLOSING: an orderly close is under way. */
    disconnected,   /**< Ended without error (orderly, by either side, or the consumer's abortive disconnect). */
    error,          /**< Setup failed, or the connection was reset, broken or terminated. */
};

/** @brief How many states there are (for tables indexed by state). */
inline constexpr size_t kEndpointStates = 6;

/** @brief What can happen to an endpoint. */
enum class EndpointInput : uint8_t {
    connect_started,      /**< CONNECT: the active side's TCP connect started. */
    accept_started,       /**< ACCEPT: a connection request became this QP's connection. */
    convert_started,      /**< CONVERT: a stream the consumer connected itself is being negotiated. */
    established,          /**< MPA negotiated and the kVP took the QP to RTS: the connection is in RDMA mode. */
    handoff_failed,       /**< The owner could not be given the established connection (its device is gone). */
    transition_refused,   /**< The kVP refused the RDMA-mode transition. */
    unreachable,          /**< The TCP connect failed (refused, no route). */
    setup_failed,         /**< MPA negotiation failed or was abandoned (bad frame, unservable reply...). */
    setup_timed_out,      /**< The setup did not finish before its deadline. */
    rejected,             /**< The peer rejected our MPA request. */
    qp_closing,           /**< The consumer moved the QP to CLOSING (an orderly disconnect). */
    qp_error,             /**< The consumer moved the QP to ERROR (an abortive disconnect). */
    qp_idle,              /**< The consumer moved the QP back to IDLE. */
    peer_fin,             /**< A stream the kVP runs: the peer closed its side in order. */
    socket_error,         /**< A stream the kVP runs: the connection was reset or failed. */
    kvp_qp_error,         /**< The kVP ended the QP on its own (a Terminate either way, a fatal or access error). */
    qp_destroyed,         /**< The QP is being destroyed (or its owner died): the connection goes with it. */
};

/** @brief How many inputs there are (for tables indexed by input). */
inline constexpr size_t kEndpointInputs = 17;

/** @brief What the owner saw besides the input; the parts an input does not need are ignored. */
struct EndpointFacts {
    int error = 0;             /**< The socket's (or the failed step's) errno value; 0: none. */
    bool peer_closed = false;  /**< The peer's FIN (or a reset) has arrived. */
    bool terminated = false;   /**< The data path sent or received a Terminate on this connection. */
};

/** @brief How the owner lets go of the kAL's reference to the socket. */
enum class SocketRelease : uint8_t {
    keep,   /**< Keep it. */
    close,  /**< Close it (what the peer has not read yet still reaches it, then FIN). */
    reset,  /**< Abortive: reset the connection once the bytes already written are acknowledged. */
};

/** @brief Which LLP management counter (kal::LlpCounters) a step counts. */
enum class LlpCount : uint8_t {
    none,              /**< None. */
    established,       /**< An RDMA-mode transition done. */
    failed,            /**< A setup that failed. */
    timeouts,          /**< A setup that ran out of time. */
    peer_rejected,     /**< A request the peer rejected. */
    peer_disconnects,  /**< A connection the peer closed in order. */
    resets,            /**< A connection reset or broken (by the peer or by us). */
};

/** @brief The outcome of one input: the next state and what the owner does, in this order. */
struct EndpointStep {
    int result = RI_OK;                          /**< ::RI_OK, or ::RI_EINVAL: refused, nothing changes. */
    EndpointState next = EndpointState::idle;    /**< The state after the step (the same one when refused). */
    uint32_t report = 0;                         /**< The ::krdma_cm_type to report to the owner; 0: none. */
    int status = 0;                              /**< The report's status (an errno value; 0 for success). */
    SocketRelease release = SocketRelease::keep; /**< What happens to the kAL's socket. */
    bool qp_to_error = false;                    /**< Move the kVP's QP to ERROR (if it is not there yet). */
    LlpCount count = LlpCount::none;             /**< What to count. */

    /** @brief Whether the input was valid in the state it came in. */
    [[nodiscard]] constexpr bool accepted() const noexcept { return result == RI_OK; }
    /** @brief Equal in every field (for tests). */
    friend constexpr bool operator==(const EndpointStep &, const EndpointStep &) = default;
};

/**
 * @brief The transition table: what @p input does to an endpoint in @p state, given @p facts. The one place that
 *        decides every endpoint transition.
 */
[[nodiscard]] EndpointStep endpoint_step(EndpointState state, EndpointInput input,
                                         const EndpointFacts &facts = {}) noexcept;

/** @brief @p state as the device protocol reports it (::krdma_ep_state, LIST_ENDPOINTS). */
[[nodiscard]] krdma_ep_state to_krdma(EndpointState state) noexcept;
/** @brief Whether an endpoint in @p state holds a connection or one being set up (its QP cannot take another). */
[[nodiscard]] bool holds_connection(EndpointState state) noexcept;
/** @brief The name of @p state, for logs. */
[[nodiscard]] std::string_view name_of(EndpointState state) noexcept;
/** @brief The name of @p input, for logs. */
[[nodiscard]] std::string_view name_of(EndpointInput input) noexcept;
/**
 * @brief The input a kVP's asynchronous QP event (::ri_async_event_id) is for endpoint management: ::kal::
 *        EndpointInput::kvp_qp_error for the events with which a kVP ends a QP on its own (Terminate sent or
 *        received, fatal, local or remote access error, protocol error, and the stream's end it met: LLP closed
 *        or reset); none for the others, including a value this build does not know.
 */
[[nodiscard]] std::optional<EndpointInput> input_of_async_event(uint32_t event_id) noexcept;

/** @brief One endpoint's state, moved only by endpoint_step(). */
class EndpointFsm {
public:
    /** @brief The current state. */
    [[nodiscard]] EndpointState state() const noexcept { return state_; }
    /** @brief Applies @p input with @p facts: the state moves when the step is accepted, never otherwise. */
    [[nodiscard]] EndpointStep apply(EndpointInput input, const EndpointFacts &facts = {}) noexcept {
        const EndpointStep s = endpoint_step(state_, input, facts);
        if (s.accepted()) state_ = s.next;
        return s;
    }

private:
    EndpointState state_ = EndpointState::idle;
};

}  // namespace kal

#endif  // KAL_ENDPOINT_ENDPOINT_FSM_HPP
