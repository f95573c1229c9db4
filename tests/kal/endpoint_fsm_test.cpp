// Endpoint management's state machine, white box: every state against every input compared with the table written
// out below, the outcomes that depend on what the owner saw (EndpointFacts), refusals that change nothing, and the
// kVP events that end a QP.
#include <gtest/gtest.h>

#include <array>
#include <initializer_list>
#include <cerrno>
#include <set>
#include <string>

#include "endpoint_fsm.hpp"
#include "status_matchers.hpp"

namespace {

using kal::EndpointFacts;
using kal::EndpointFsm;
using kal::EndpointInput;
using kal::EndpointState;
using kal::EndpointStep;
using kal::LlpCount;
using kal::SocketRelease;
using S = EndpointState;
using I = EndpointInput;
using R = SocketRelease;
using C = LlpCount;

constexpr std::array<S, kal::kEndpointStates> kStates{S::idle,          S::connecting,   S::connected,
                                                      S::disconnecting, S::disconnected, S::error};
constexpr std::array<I, kal::kEndpointInputs> kInputs{
    I::connect_started, I::accept_started, I::convert_started, I::established,  I::handoff_failed,
    I::transition_refused, I::unreachable, I::setup_failed,   I::setup_timed_out, I::rejected,
    I::qp_closing,      I::qp_error,       I::qp_idle,         I::peer_fin,      I::socket_error,
    I::kvp_qp_error,    I::qp_destroyed};

// One cell of the expected table: refused (in any state, the state stays), or accepted with this step.
struct Cell {
    bool accepted;
    EndpointStep step;
};

constexpr Cell no() { return Cell{false, {}}; }
constexpr Cell ok(S next, uint32_t report = 0, int status = 0, R release = R::keep, bool qp_to_error = false,
                  C count = C::none) {
    return Cell{true, EndpointStep{RI_OK, next, report, status, release, qp_to_error, count}};
}

// The whole table with no facts (no socket error, the peer has not closed, no Terminate), in the order of kStates
// (rows) and kInputs (columns).
// clang-format off
const std::array<std::array<Cell, kal::kEndpointInputs>, kal::kEndpointStates> kTable{{
    // idle
    {ok(S::connecting), ok(S::connecting), ok(S::connecting), no(), no(),
     no(), no(), no(), no(), no(),
     no(), no(), ok(S::idle), no(), no(),
     no(), ok(S::idle)},
    // connecting
    {no(), no(), no(), ok(S::connected, KRDMA_CM_ESTABLISHED, 0, R::keep, false, C::established), no(),
     ok(S::error, KRDMA_CM_BROKEN, EIO, R::reset, false, C::failed),
     ok(S::error, KRDMA_CM_UNREACHABLE, ECONNREFUSED, R::close, false, C::failed),
     ok(S::error, KRDMA_CM_BROKEN, EPROTO, R::close, false, C::failed),
     ok(S::error, KRDMA_CM_TIMEOUT, ETIMEDOUT, R::close, false, C::timeouts),
     ok(S::error, KRDMA_CM_REJECTED, ECONNREFUSED, R::close, false, C::peer_rejected),
     no(), ok(S::error, KRDMA_CM_BROKEN, ECONNABORTED, R::close), no(), no(), no(),
     no(), ok(S::error, 0, 0, R::reset)},
    // connected
    {no(), no(), no(), no(), ok(S::error, 0, 0, R::reset, true, C::failed),
     no(), no(), no(), no(), no(),
     ok(S::disconnecting),
     ok(S::disconnected, KRDMA_CM_DISCONNECTED, 0, R::reset, false, C::resets),
     no(),
     ok(S::disconnected, KRDMA_CM_PEER_DISCONNECT, 0, R::close, true, C::peer_disconnects),
     ok(S::error, KRDMA_CM_BROKEN, ECONNRESET, R::close, true, C::resets),
     ok(S::disconnected, KRDMA_CM_DISCONNECTED, 0, R::reset, true, C::resets),
     ok(S::error, 0, 0, R::reset, false, C::resets)},
    // disconnecting
    {no(), no(), no(), no(), no(),
     no(), no(), no(), no(), no(),
     no(),
     ok(S::disconnected, KRDMA_CM_DISCONNECTED, 0, R::reset, false, C::resets),
     no(),
     ok(S::disconnected, KRDMA_CM_DISCONNECTED, 0, R::close, true),
     ok(S::error, KRDMA_CM_BROKEN, ECONNRESET, R::close, true, C::resets),
     ok(S::disconnected, KRDMA_CM_DISCONNECTED, 0, R::reset, true, C::resets),
     ok(S::error, 0, 0, R::reset, false, C::resets)},
    // disconnected
    {no(), no(), no(), no(), no(),
     no(), no(), no(), no(), no(),
     no(), no(), ok(S::idle), no(), no(),
     no(), ok(S::disconnected)},
    // error
    {no(), no(), no(), no(), no(),
     no(), no(), no(), no(), no(),
     no(), no(), ok(S::idle), no(), no(),
     no(), ok(S::error)},
}};
// clang-format on

std::string where(S s, I i) {
    return std::string(kal::name_of(s)) + " + " + std::string(kal::name_of(i));
}

// An endpoint brought to @p s by legal inputs.
EndpointFsm in_state(S s) {
    EndpointFsm fsm;
    auto feed = [&fsm](std::initializer_list<I> path) {
        for (const I in : path) EXPECT_TRUE(fsm.apply(in).accepted()) << kal::name_of(in);
    };
    switch (s) {
        case S::idle: break;
        case S::connecting: feed({I::connect_started}); break;
        case S::connected: feed({I::connect_started, I::established}); break;
        case S::disconnecting: feed({I::connect_started, I::established, I::qp_closing}); break;
        case S::disconnected: feed({I::connect_started, I::established, I::qp_error}); break;
        case S::error: feed({I::connect_started, I::setup_timed_out}); break;
    }
    return fsm;
}

TEST(EndpointFsm, EveryStateAgainstEveryInputMatchesTheTable) {
    int accepted = 0;
    for (size_t si = 0; si < kStates.size(); ++si) {
        for (size_t ii = 0; ii < kInputs.size(); ++ii) {
            const S s = kStates[si];
            const I in = kInputs[ii];
            SCOPED_TRACE(where(s, in));
            const Cell &want = kTable[si][ii];
            const EndpointStep got = kal::endpoint_step(s, in);
            if (want.accepted) {
                ++accepted;
                EXPECT_TRUE(got.accepted());
                EXPECT_EQ(got, want.step) << "next " << kal::name_of(got.next) << ", report " << got.report
                                          << ", status " << got.status;
            } else {
                // A refusal is RI_EINVAL with the state unchanged and nothing to do.
                EXPECT_FALSE(got.accepted());
                EXPECT_EQ(got, (EndpointStep{RI_EINVAL, s}));
            }
            // The class moves exactly as the function says, and only when the step is accepted.
            EndpointFsm fsm = in_state(s);
            ASSERT_EQ(fsm.state(), s);
            const EndpointStep applied = fsm.apply(in);
            EXPECT_EQ(applied, got);
            EXPECT_EQ(fsm.state(), want.accepted ? want.step.next : s);
        }
    }
    EXPECT_EQ(accepted, 29);  // the table's legal transitions, counted by hand
}

// The end of a connection in RDMA mode through its QP (the consumer's Modify QP to ERROR, or the kVP ending it):
// every combination of what the socket says.
TEST(EndpointFsm, TheEndOfAQpInRdmaModeFollowsTheSocket) {
    struct Case {
        S state;
        int error;
        bool peer_closed;
        bool terminated;
        S next;
        uint32_t report;
        int status;
        R release;
        C count;
    };
    constexpr int E = ETIMEDOUT;  // a failed socket's error
    // clang-format off
    const Case cases[] = {
        // Our abortive disconnect: reset once the bytes in flight are acknowledged.
        {S::connected,     0, false, false, S::disconnected, KRDMA_CM_DISCONNECTED,    0,            R::reset, C::resets},
        // A Terminate either way broke the connection, FIN or not.
        {S::connected,     0, false, true,  S::error,        KRDMA_CM_BROKEN,          ECONNABORTED, R::reset, C::resets},
        {S::connected,     0, true,  true,  S::error,        KRDMA_CM_BROKEN,          ECONNABORTED, R::close, C::resets},
        // The peer closed first: its orderly disconnect (or the answer to ours).
        {S::connected,     0, true,  false, S::disconnected, KRDMA_CM_PEER_DISCONNECT, 0,            R::close, C::peer_disconnects},
        {S::disconnecting, 0, true,  false, S::disconnected, KRDMA_CM_DISCONNECTED,    0,            R::close, C::none},
        {S::disconnecting, 0, false, false, S::disconnected, KRDMA_CM_DISCONNECTED,    0,            R::reset, C::resets},
        {S::disconnecting, 0, false, true,  S::error,        KRDMA_CM_BROKEN,          ECONNABORTED, R::reset, C::resets},
        {S::disconnecting, 0, true,  true,  S::error,        KRDMA_CM_BROKEN,          ECONNABORTED, R::close, C::resets},
        // A failed socket: its error, and no reset (TCP ended it).
        {S::connected,     E, false, false, S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
        {S::connected,     E, false, true,  S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
        {S::connected,     E, true,  false, S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
        {S::connected,     E, true,  true,  S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
        {S::disconnecting, E, false, false, S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
        {S::disconnecting, E, true,  true,  S::error,        KRDMA_CM_BROKEN,          E,            R::close, C::resets},
    };
    // clang-format on
    for (const Case &c : cases) {
        for (const I in : {I::qp_error, I::kvp_qp_error}) {
            SCOPED_TRACE(where(c.state, in) + " error " + std::to_string(c.error) + " closed " +
                         std::to_string(c.peer_closed) + " terminated " + std::to_string(c.terminated));
            const EndpointStep got = kal::endpoint_step(c.state, in, EndpointFacts{c.error, c.peer_closed, c.terminated});
            // Only the kVP's own end asks for the QP's move: the consumer's Modify QP made it already.
            EXPECT_EQ(got, (EndpointStep{RI_OK, c.next, c.report, c.status, c.release, in == I::kvp_qp_error, c.count}));
        }
    }
}

TEST(EndpointFsm, TheEndOfAStreamTheKvpRunsFollowsTheSocket) {
    // The peer's FIN after a Terminate: broken, whatever the FIN says.
    for (const S s : {S::connected, S::disconnecting}) {
        EXPECT_EQ(kal::endpoint_step(s, I::peer_fin, EndpointFacts{0, true, true}),
                  (EndpointStep{RI_OK, S::error, KRDMA_CM_BROKEN, ECONNABORTED, R::close, true, C::resets}))
            << kal::name_of(s);
        // A reset: the socket's error; with none to read, ECONNABORTED after a Terminate, ECONNRESET otherwise.
        EXPECT_EQ(kal::endpoint_step(s, I::socket_error, EndpointFacts{EPIPE, true, true}),
                  (EndpointStep{RI_OK, S::error, KRDMA_CM_BROKEN, EPIPE, R::close, true, C::resets}));
        EXPECT_EQ(kal::endpoint_step(s, I::socket_error, EndpointFacts{0, true, true}),
                  (EndpointStep{RI_OK, S::error, KRDMA_CM_BROKEN, ECONNABORTED, R::close, true, C::resets}));
        EXPECT_EQ(kal::endpoint_step(s, I::socket_error, EndpointFacts{0, true, false}),
                  (EndpointStep{RI_OK, S::error, KRDMA_CM_BROKEN, ECONNRESET, R::close, true, C::resets}));
    }
}

TEST(EndpointFsm, SetupFailuresReportTheErrorTheOwnerSaw) {
    const EndpointFacts f{EHOSTUNREACH, false, false};
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::unreachable, f).status, EHOSTUNREACH);
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::setup_failed, f).status, EHOSTUNREACH);
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::transition_refused, f).status, EHOSTUNREACH);
    // Those whose cause is the input itself keep their own.
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::setup_timed_out, f).status, ETIMEDOUT);
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::rejected, f).status, ECONNREFUSED);
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::qp_error, f).status, ECONNABORTED);
    // A setup abandoned by the QP's end ignores the socket: there is no stream yet.
    EXPECT_EQ(kal::endpoint_step(S::connecting, I::qp_error, EndpointFacts{0, true, true}),
              (EndpointStep{RI_OK, S::error, KRDMA_CM_BROKEN, ECONNABORTED, R::close, false, C::none}));
}

// The kAL hears a kVP's end of a hosted consumer's QP first-hand, and the uAL (for now) moves the QP to ERROR as
// well: whichever comes second finds the endpoint ended and changes nothing, in either order.
TEST(EndpointFsm, AnEndedEndpointIgnoresASecondReportOfItsEnd) {
    for (const auto &[first, second] : {std::pair{I::kvp_qp_error, I::qp_error}, std::pair{I::qp_error, I::kvp_qp_error},
                                        std::pair{I::peer_fin, I::kvp_qp_error}, std::pair{I::kvp_qp_error, I::peer_fin},
                                        std::pair{I::socket_error, I::qp_error}}) {
        SCOPED_TRACE(std::string(kal::name_of(first)) + " then " + std::string(kal::name_of(second)));
        EndpointFsm fsm;
        ASSERT_TRUE(fsm.apply(I::connect_started).accepted());
        ASSERT_TRUE(fsm.apply(I::established).accepted());
        const EndpointStep end = fsm.apply(first, EndpointFacts{0, false, true});
        ASSERT_TRUE(end.accepted());
        EXPECT_EQ(end.report, uint32_t{KRDMA_CM_BROKEN});
        const S after = fsm.state();
        const EndpointStep again = fsm.apply(second, EndpointFacts{0, false, true});
        EXPECT_FALSE(again.accepted());
        EXPECT_STATUS(again.result, RI_EINVAL);
        EXPECT_EQ(again.report, 0u);
        EXPECT_EQ(fsm.state(), after);
        // Then the QP can be reset and connect again.
        EXPECT_TRUE(fsm.apply(I::qp_idle).accepted());
        EXPECT_EQ(fsm.state(), S::idle);
        EXPECT_TRUE(fsm.apply(I::connect_started).accepted());
    }
}

TEST(EndpointFsm, KvpEventsThatEndAQp) {
    const std::set<uint32_t> ending{RI_AE_QP_FATAL,
                                    RI_AE_QP_TERMINATE_RECEIVED,
                                    RI_AE_QP_TERMINATE_SENT,
                                    RI_AE_QP_LOCAL_ACCESS_ERROR,
                                    RI_AE_QP_REMOTE_ACCESS_ERROR,
                                    RI_AE_QP_PROTOCOL_ERROR,
                                    // The stream's end, as the kVP that read up to it met it.
                                    RI_AE_QP_LLP_CLOSED,
                                    RI_AE_QP_LLP_RESET};
    // Every event this build knows, and some it does not (a newer kVP's).
    for (uint32_t id = 0; id <= RI_AE_RNIC_LINK_UP + 3; ++id) {
        const auto in = kal::input_of_async_event(id);
        if (ending.contains(id)) {
            ASSERT_TRUE(in.has_value()) << id;
            EXPECT_EQ(*in, I::kvp_qp_error);
        } else {
            EXPECT_FALSE(in.has_value()) << id;
        }
    }
    EXPECT_FALSE(kal::input_of_async_event(0xffffffffu).has_value());
}

TEST(EndpointFsm, StatesAsTheDeviceReportsThemAndNames) {
    EXPECT_EQ(kal::to_krdma(S::idle), KRDMA_EP_IDLE);
    EXPECT_EQ(kal::to_krdma(S::connecting), KRDMA_EP_CONNECTING);
    EXPECT_EQ(kal::to_krdma(S::connected), KRDMA_EP_CONNECTED);
    EXPECT_EQ(kal::to_krdma(S::disconnecting), KRDMA_EP_DISCONNECTING);
    EXPECT_EQ(kal::to_krdma(S::disconnected), KRDMA_EP_DISCONNECTED);
    EXPECT_EQ(kal::to_krdma(S::error), KRDMA_EP_ERROR);
    std::set<std::string> names;
    for (const S s : kStates) {
        names.emplace(kal::name_of(s));
        EXPECT_EQ(kal::holds_connection(s), s == S::connecting || s == S::connected || s == S::disconnecting);
    }
    for (const I i : kInputs) names.emplace(kal::name_of(i));
    EXPECT_EQ(names.size(), kStates.size() + kInputs.size());  // every one named, no two alike
    EXPECT_EQ(names.count("?"), 0u);
}

}  // namespace
