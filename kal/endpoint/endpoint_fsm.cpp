// Endpoint management's state machine: every transition of a QP's connection, decided in endpoint_step().
#include "endpoint_fsm.hpp"

#include <cerrno>

namespace kal {
namespace {

using S = EndpointState;
using I = EndpointInput;

static_assert(static_cast<size_t>(S::error) + 1 == kEndpointStates, "kEndpointStates counts every state");
static_assert(static_cast<size_t>(I::qp_destroyed) + 1 == kEndpointInputs, "kEndpointInputs counts every input");

// A connection in RDMA mode (its stream is live, or closing in order).
bool in_rdma_mode(EndpointState s) noexcept {
    switch (s) {
        case S::connected:
        case S::disconnecting: return true;
        case S::idle:
        case S::connecting:
        case S::disconnected:
        case S::error: return false;
    }
    return false;
}

// Over: nothing more can happen to the connection but a reset of the QP to IDLE.
bool ended(EndpointState s) noexcept {
    switch (s) {
        case S::disconnected:
        case S::error: return true;
        case S::idle:
        case S::connecting:
        case S::connected:
        case S::disconnecting: return false;
    }
    return false;
}

constexpr EndpointStep to(EndpointState next, uint32_t report = 0, int status = 0,
                          SocketRelease release = SocketRelease::keep, bool qp_to_error = false,
                          LlpCount count = LlpCount::none) noexcept {
    return EndpointStep{RI_OK, next, report, status, release, qp_to_error, count};
}

// A connection in RDMA mode whose QP went to ERROR: moved there by the consumer (qp_error) or by the kVP on its own
// (kvp_qp_error, which also asks for the move, in case the kVP reported it first). Which end it was depends on the
// socket: a failed one broke; a Terminate sent or received broke it, FIN or not; a peer that closed first ended it
// in order; otherwise it is our abortive disconnect. Only the last resets the stream (once the bytes still in it,
// a Terminate say, are acknowledged): a peer that closed or failed needs no reset.
EndpointStep qp_ended(EndpointState s, const EndpointFacts &f, bool move_qp) noexcept {
    const SocketRelease release = !f.peer_closed && f.error == 0 ? SocketRelease::reset : SocketRelease::close;
    const int err = f.error != 0 ? f.error : (f.terminated ? ECONNABORTED : 0);
    if (err != 0) return to(S::error, KRDMA_CM_BROKEN, err, release, move_qp, LlpCount::resets);
    if (!f.peer_closed) return to(S::disconnected, KRDMA_CM_DISCONNECTED, 0, release, move_qp, LlpCount::resets);
    if (s == S::connected) {
        return to(S::disconnected, KRDMA_CM_PEER_DISCONNECT, 0, release, move_qp, LlpCount::peer_disconnects);
    }
    return to(S::disconnected, KRDMA_CM_DISCONNECTED, 0, release, move_qp);  // the peer answered our FIN
}

}  // namespace

EndpointStep endpoint_step(EndpointState s, EndpointInput in, const EndpointFacts &f) noexcept {
    const EndpointStep refused{RI_EINVAL, s};
    switch (in) {
        // A new connection: the endpoint is made for it, so it starts from idle.
        case I::connect_started:
        case I::accept_started:
        case I::convert_started:
            if (s != S::idle) return refused;
            return to(S::connecting);

        // Setup: its end, one way or another.
        case I::established:
            if (s != S::connecting) return refused;
            return to(S::connected, KRDMA_CM_ESTABLISHED, 0, SocketRelease::keep, false, LlpCount::established);
        case I::handoff_failed:
            // Nobody can use a connection its owner cannot be given: it goes, and the kVP's QP with it.
            if (s != S::connected) return refused;
            return to(S::error, 0, 0, SocketRelease::reset, true, LlpCount::failed);
        case I::transition_refused:
            // MPA is done, the peer in full operation: it must not take our silence for an orderly close.
            if (s != S::connecting) return refused;
            return to(S::error, KRDMA_CM_BROKEN, f.error != 0 ? f.error : EIO, SocketRelease::reset, false,
                      LlpCount::failed);
        case I::unreachable:
            if (s != S::connecting) return refused;
            return to(S::error, KRDMA_CM_UNREACHABLE, f.error != 0 ? f.error : ECONNREFUSED, SocketRelease::close,
                      false, LlpCount::failed);
        case I::setup_failed:
            if (s != S::connecting) return refused;
            return to(S::error, KRDMA_CM_BROKEN, f.error != 0 ? f.error : EPROTO, SocketRelease::close, false,
                      LlpCount::failed);
        case I::setup_timed_out:
            if (s != S::connecting) return refused;
            return to(S::error, KRDMA_CM_TIMEOUT, ETIMEDOUT, SocketRelease::close, false, LlpCount::timeouts);
        case I::rejected:
            if (s != S::connecting) return refused;
            return to(S::error, KRDMA_CM_REJECTED, ECONNREFUSED, SocketRelease::close, false, LlpCount::peer_rejected);

        // The consumer moves its QP.
        case I::qp_closing:
            // The data path sends FIN once the send queue drained; the end comes as peer_fin or qp_error.
            if (s != S::connected) return refused;
            return to(S::disconnecting);
        case I::qp_error:
            // Before the transition the kVP's QP is IDLE and holds no stream: the setup is abandoned.
            if (s == S::connecting) return to(S::error, KRDMA_CM_BROKEN, ECONNABORTED, SocketRelease::close);
            if (!in_rdma_mode(s)) return refused;
            return qp_ended(s, f, false);
        case I::qp_idle:
            // A reset QP can connect again; a QP with a connection cannot be reset (the kVP refuses it too).
            if (s != S::idle && !ended(s)) return refused;
            return to(S::idle);

        // A stream the kVP runs ends.
        case I::peer_fin:
            if (!in_rdma_mode(s)) return refused;
            if (f.terminated) {
                // A peer that sent a Terminate closes right after it: the connection broke, whatever the FIN says.
                return to(S::error, KRDMA_CM_BROKEN, ECONNABORTED, SocketRelease::close, true, LlpCount::resets);
            }
            if (s == S::connected) {
                return to(S::disconnected, KRDMA_CM_PEER_DISCONNECT, 0, SocketRelease::close, true,
                          LlpCount::peer_disconnects);
            }
            return to(S::disconnected, KRDMA_CM_DISCONNECTED, 0, SocketRelease::close, true);
        case I::socket_error:
            if (!in_rdma_mode(s)) return refused;
            return to(S::error, KRDMA_CM_BROKEN, f.error != 0 ? f.error : (f.terminated ? ECONNABORTED : ECONNRESET),
                      SocketRelease::close, true, LlpCount::resets);
        case I::kvp_qp_error:
            // Only a QP in RDMA mode has a stream for the kVP to end; anything else is news of an older connection.
            if (!in_rdma_mode(s)) return refused;
            return qp_ended(s, f, true);

        case I::qp_destroyed:
            // Nobody is left to tell; a live connection is reset.
            if (s == S::connecting) return to(S::error, 0, 0, SocketRelease::reset);
            if (in_rdma_mode(s)) return to(S::error, 0, 0, SocketRelease::reset, false, LlpCount::resets);
            return to(s);
    }
    return refused;  // not reached: every input is handled above
}

krdma_ep_state to_krdma(EndpointState s) noexcept {
    switch (s) {
        case S::idle: return KRDMA_EP_IDLE;
        case S::connecting: return KRDMA_EP_CONNECTING;
        case S::connected: return KRDMA_EP_CONNECTED;
        case S::disconnecting: return KRDMA_EP_DISCONNECTING;
        case S::disconnected: return KRDMA_EP_DISCONNECTED;
        case S::error: return KRDMA_EP_ERROR;
    }
    return KRDMA_EP_ERROR;
}

bool holds_connection(EndpointState s) noexcept { return s == S::connecting || in_rdma_mode(s); }

std::string_view name_of(EndpointState s) noexcept {
    switch (s) {
        case S::idle: return "idle";
        case S::connecting: return "connecting";
        case S::connected: return "connected";
        case S::disconnecting: return "disconnecting";
        case S::disconnected: return "disconnected";
        case S::error: return "error";
    }
    return "?";
}

std::string_view name_of(EndpointInput in) noexcept {
    switch (in) {
        case I::connect_started: return "connect started";
        case I::accept_started: return "accept started";
        case I::convert_started: return "convert started";
        case I::established: return "established";
        case I::handoff_failed: return "handoff failed";
        case I::transition_refused: return "transition refused";
        case I::unreachable: return "unreachable";
        case I::setup_failed: return "setup failed";
        case I::setup_timed_out: return "setup timed out";
        case I::rejected: return "rejected";
        case I::qp_closing: return "QP to CLOSING";
        case I::qp_error: return "QP to ERROR";
        case I::qp_idle: return "QP to IDLE";
        case I::peer_fin: return "peer FIN";
        case I::socket_error: return "socket error";
        case I::kvp_qp_error: return "kVP ended the QP";
        case I::qp_destroyed: return "QP destroyed";
    }
    return "?";
}

std::optional<EndpointInput> input_of_async_event(uint32_t event_id) noexcept {
    switch (event_id) {  // a value from a loaded module
        case RI_AE_QP_FATAL:
        case RI_AE_QP_TERMINATE_RECEIVED:
        case RI_AE_QP_TERMINATE_SENT:
        case RI_AE_QP_LOCAL_ACCESS_ERROR:
        case RI_AE_QP_REMOTE_ACCESS_ERROR:
        case RI_AE_QP_PROTOCOL_ERROR:
        // The kVP read the stream up to its end: only now is everything before the FIN or reset placed.
        case RI_AE_QP_LLP_CLOSED:
        case RI_AE_QP_LLP_RESET: return I::kvp_qp_error;
        default: return std::nullopt;
    }
}

}  // namespace kal
