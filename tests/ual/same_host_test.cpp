// The same-host path as the uAL sees it (issue 40): two consumers (two access layers, two device connections) of one
// real krdmad, connected over real TCP on 127.0.0.1, each get RI_LLP_SAME_HOST in the parameters of their
// ESTABLISHED event, with neither CRC nor markers, and their QPs move Sends both ways; with the kAL's setting off
// both stay on the wire. Two converted ends that both ask (KRDMA_CONVERT_BYTE_CHANNEL) get a second channel of their
// own, or neither does.
#include <gtest/gtest.h>

#include <vector>

#include "krdma/abi.h"
#include "rnicpi/cpp/channel.hpp"
#include "tcp_connection.hpp"

#include "connection_fixtures.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;

// Two consumers of the fixture's krdmad; connect() pairs an endpoint of each and returns both ESTABLISHED
// parameters.
class SameHostPair {
public:
    explicit SameHostPair(const std::filesystem::path &device) {
        EXPECT_EQ(server.open(device.string(), "sr0", 1 << 16), "");
        EXPECT_EQ(client.open(device.string(), "sr0", 1 << 16), "");
    }

    std::pair<ri_llp_params_t, ri_llp_params_t> connect() {
        auto lp = server.adapter->listen(0, server.requests, 1);
        EXPECT_TRUE(lp);
        if (!lp) return {};
        listener = *lp;
        client_ep = client.endpoint(2);
        server_ep = server.endpoint(3);
        EXPECT_NE(client_ep, nullptr);
        EXPECT_NE(server_ep, nullptr);
        if (client_ep == nullptr || server_ep == nullptr) return {};
        for (uint64_t i = 0; i < 4; ++i) {
            EXPECT_OK(post_recv(client, *client_ep, i * 256, 256, 100 + i));
            EXPECT_OK(post_recv(server, *server_ep, i * 256, 256, 100 + i));
        }
        EXPECT_OK(client_ep->connect("127.0.0.1", listener->port(), bytes_of("hello")));
        auto req = next_cm(server.requests);
        EXPECT_TRUE(req && req->connection);
        if (!req || !req->connection) return {};
        EXPECT_OK(server_ep->accept(req->connection->request, bytes_of("welcome")));
        auto s = next_cm(server.cm);
        auto c = next_cm(client.cm);
        EXPECT_TRUE(s && s->id == static_cast<uint32_t>(CmEventId::established) && s->connection);
        EXPECT_TRUE(c && c->id == static_cast<uint32_t>(CmEventId::established) && c->connection);
        if (!s || !c || !s->connection || !c->connection) return {};
        return {s->connection->llp, c->connection->llp};
    }

    // A Send from @p from's endpoint arrives at @p to's with its bytes.
    static void send_arrives(Side &from, ual::Endpoint &from_ep, Side &to, const std::string &what) {
        std::memcpy(from.buffer.data() + 4096, what.data(), what.size());
        ASSERT_OK(post(from, from_ep, RI_WR_SEND, 4096, static_cast<uint32_t>(what.size()), 9));
        auto sent = from.completion();
        ASSERT_TRUE(sent.has_value());
        EXPECT_EQ(sent->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        auto got = to.completion();
        ASSERT_TRUE(got.has_value());
        ASSERT_EQ(got->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        ASSERT_EQ(got->opcode, static_cast<uint32_t>(RI_WC_RECV));
        EXPECT_EQ(std::string(reinterpret_cast<const char *>(to.buffer.data() + (got->wr_id - 100) * 256),
                              got->byte_len),
                  what);
    }

    void exchange() {
        send_arrives(client, *client_ep, server, "to the server");
        if (::testing::Test::HasFatalFailure()) return;
        send_arrives(server, *server_ep, client, "to the client");
    }

    Side server, client;
    std::shared_ptr<ual::ListenPoint> listener;
    std::shared_ptr<ual::Endpoint> client_ep, server_ep;
};

using SameHostUal = OneHost;

TEST_F(SameHostUal, BothConsumersGetTheSameHostPathWithoutCrcOrMarkersAndMoveSends) {
    SameHostPair p(device_);
    const auto [server, client] = p.connect();
    if (HasFailure()) return;
    EXPECT_NE(server.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_NE(client.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_EQ(server.mpa_flags & (RI_MPA_CRC | RI_MPA_MARKERS), 0u);
    EXPECT_EQ(client.mpa_flags & (RI_MPA_CRC | RI_MPA_MARKERS), 0u);
    EXPECT_NE(client.mpa_flags & RI_MPA_INITIATOR, 0u);
    EXPECT_EQ(server.mpa_flags & RI_MPA_INITIATOR, 0u);
    p.exchange();
}

class SameHostOff : public OneHost {
protected:
    std::string extra_config() override { return R"("llp": {"same_host": {"enabled": false}})"; }
};

TEST_F(SameHostOff, WithTheKalSettingOffBothConsumersStayOnTheWire) {
    SameHostPair p(device_);
    const auto [server, client] = p.connect();
    if (HasFailure()) return;
    EXPECT_EQ(server.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_EQ(client.mpa_flags & RI_LLP_SAME_HOST, 0u);
    p.exchange();
}

// Both ends of one TCP connection converted (the client initiates), each CONVERT with @p client_flags and
// @p server_flags; the two ESTABLISHED events' data (client's first), empty on failure.
std::pair<std::shared_ptr<const ual::ConnectionData>, std::shared_ptr<const ual::ConnectionData>>
convert_both(SameHostPair &p, uint32_t client_flags, uint32_t server_flags) {
    p.client_ep = p.client.endpoint(2);
    p.server_ep = p.server.endpoint(3);
    const auto [c, s] = tcp_connection();
    EXPECT_GE(c, 0) << "a TCP connection over 127.0.0.1";
    if (c < 0 || p.client_ep == nullptr || p.server_ep == nullptr) return {};
    for (uint64_t i = 0; i < 4; ++i) {
        EXPECT_OK(post_recv(p.client, *p.client_ep, i * 256, 256, 100 + i));
        EXPECT_OK(post_recv(p.server, *p.server_ep, i * 256, 256, 100 + i));
    }
    EXPECT_OK(p.client_ep->convert(c, bytes_of("c"), KRDMA_CONVERT_INITIATOR, {}, client_flags));
    EXPECT_OK(p.server_ep->convert(s, bytes_of("s"), KRDMA_CONVERT_RESPONDER, {}, server_flags));
    ::close(c);
    ::close(s);
    auto ce = next_cm(p.client.cm);
    auto se = next_cm(p.server.cm);
    EXPECT_TRUE(ce && ce->id == static_cast<uint32_t>(CmEventId::established) && ce->connection);
    EXPECT_TRUE(se && se->id == static_cast<uint32_t>(CmEventId::established) && se->connection);
    if (!ce || !se || !ce->connection || !se->connection) return {};
    return {ce->connection, se->connection};
}

bool has_byte_channel(const ual::ConnectionData &d) { return d.byte_channel && *d.byte_channel; }

TEST_F(SameHostUal, ConvertedEndsThatBothAskGetAByteChannelOfTheirOwnThatCarriesBytesBothWays) {
    SameHostPair p(device_);
    const auto [c, s] = convert_both(p, KRDMA_CONVERT_BYTE_CHANNEL, KRDMA_CONVERT_BYTE_CHANNEL);
    if (HasFailure()) return;
    EXPECT_NE(c->llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
    ASSERT_TRUE(has_byte_channel(*c)) << "the client asked and the kAL paired the ends: its byte channel";
    ASSERT_TRUE(has_byte_channel(*s)) << "the server asked and the kAL paired the ends: its byte channel";
    rdma::provider::Channel cc, sc;
    ASSERT_EQ(cc.open(c->byte_channel->release()), RI_OK) << "the client's end is a channel's";
    ASSERT_EQ(sc.open(s->byte_channel->release()), RI_OK) << "the server's end is a channel's";
    const std::string there = "to the server", back = "and back";
    ASSERT_EQ(cc.write(std::vector<iovec>{{const_cast<char *>(there.data()), there.size()}}.data(), 1),
              static_cast<ssize_t>(there.size()));
    char buf[64] = {};
    ASSERT_EQ(sc.read(buf, sizeof buf), static_cast<ssize_t>(there.size())) << "the server reads the client's bytes";
    EXPECT_EQ(std::string(buf, there.size()), there);
    ASSERT_EQ(sc.write(std::vector<iovec>{{const_cast<char *>(back.data()), back.size()}}.data(), 1),
              static_cast<ssize_t>(back.size()));
    ASSERT_EQ(cc.read(buf, sizeof buf), static_cast<ssize_t>(back.size())) << "the client reads the server's bytes";
    EXPECT_EQ(std::string(buf, back.size()), back);
    p.exchange();  // the QPs still move their own Sends on their own channel
}

TEST_F(SameHostUal, AByteChannelGoesToBothEndsOrToNeither) {
    SameHostPair p(device_);
    const auto [c, s] = convert_both(p, KRDMA_CONVERT_BYTE_CHANNEL, 0);
    if (HasFailure()) return;
    EXPECT_NE(c->llp.mpa_flags & RI_LLP_SAME_HOST, 0u) << "paired on this host all the same";
    EXPECT_FALSE(has_byte_channel(*c)) << "the server did not ask: the client's end would read nobody's bytes";
    EXPECT_FALSE(has_byte_channel(*s));
    p.exchange();
}

bool has_link(const ual::ConnectionData &d) { return d.link && *d.link; }

TEST_F(SameHostUal, EndsThatBothAskForALinkGetTwoEndsOfOneSocketPairWithOneToken) {
    SameHostPair p(device_);
    constexpr uint32_t kLinked = KRDMA_CONVERT_BYTE_CHANNEL | KRDMA_CONVERT_LINK;
    const auto [c, s] = convert_both(p, kLinked, kLinked);
    if (HasFailure()) return;
    ASSERT_TRUE(has_byte_channel(*c) && has_byte_channel(*s)) << "a link comes only with the byte channels";
    ASSERT_TRUE(has_link(*c)) << "both asked: the client's end of the link";
    ASSERT_TRUE(has_link(*s)) << "both asked: the server's end of the link";
    krdma_link_hello hc{}, hs{};
    ASSERT_EQ(::recv(c->link->get(), &hc, sizeof hc, MSG_DONTWAIT), static_cast<ssize_t>(sizeof hc))
        << "the client's first message on the link: its hello";
    ASSERT_EQ(::recv(s->link->get(), &hs, sizeof hs, MSG_DONTWAIT), static_cast<ssize_t>(sizeof hs));
    EXPECT_EQ(hc.magic, KRDMA_LINK_MAGIC);
    EXPECT_EQ(hc.version, 1u);
    EXPECT_EQ(hc.token, hs.token) << "one token, known to both ends";
    EXPECT_NE(hc.token, 0u) << "random, not left zero";
    // The two ends are one pair: what one process sends, the other reads.
    ASSERT_EQ(::send(s->link->get(), "gift", 4, MSG_DONTWAIT), 4);
    char buf[8] = {};
    EXPECT_EQ(::recv(c->link->get(), buf, sizeof buf, MSG_DONTWAIT), 4) << "the server's message reached the client";
    p.exchange();
}

TEST_F(SameHostUal, ALinkGoesToBothEndsOrToNeither) {
    SameHostPair p(device_);
    const auto [c, s] = convert_both(p, KRDMA_CONVERT_BYTE_CHANNEL | KRDMA_CONVERT_LINK, KRDMA_CONVERT_BYTE_CHANNEL);
    if (HasFailure()) return;
    EXPECT_TRUE(has_byte_channel(*c) && has_byte_channel(*s)) << "both asked for the byte channel";
    EXPECT_FALSE(has_link(*c)) << "the server did not ask: a link with nobody at its other end";
    EXPECT_FALSE(has_link(*s));
    p.exchange();
}

TEST_F(SameHostUal, ALinkWithoutTheByteChannelIsRefused) {
    SameHostPair p(device_);
    p.client_ep = p.client.endpoint(2);
    const auto [c, s] = tcp_connection();
    ASSERT_GE(c, 0);
    auto r = p.client_ep->convert(c, bytes_of("c"), KRDMA_CONVERT_INITIATOR, {}, KRDMA_CONVERT_LINK);
    ::close(c);
    ::close(s);
    ASSERT_FALSE(r) << "KRDMA_CONVERT_LINK alone asks for a link beside a channel nobody gets";
    EXPECT_EQ(r.error().code(), RI_EINVAL) << r.error().message();
}

TEST_F(SameHostOff, AConversionThatAsksForAByteChannelStaysOnTheWireWithout) {
    SameHostPair p(device_);
    const auto [c, s] = convert_both(p, KRDMA_CONVERT_BYTE_CHANNEL, KRDMA_CONVERT_BYTE_CHANNEL);
    if (HasFailure()) return;
    EXPECT_EQ(c->llp.mpa_flags & RI_LLP_SAME_HOST, 0u);
    EXPECT_FALSE(has_byte_channel(*c));
    EXPECT_FALSE(has_byte_channel(*s));
    p.exchange();
}

}  // namespace
