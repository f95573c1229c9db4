// The same-host path as the uAL sees it (issue 40): two consumers (two access layers, two device connections) of one
// real krdmad, connected over real TCP on 127.0.0.1, each get RI_LLP_SAME_HOST in the parameters of their
// ESTABLISHED event, with neither CRC nor markers, and their QPs move Sends both ways; with the kAL's setting off
// both stay on the wire. (Until softrnic moves bytes over the channel, both run TCP without CRC.)
#include <gtest/gtest.h>

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

}  // namespace
