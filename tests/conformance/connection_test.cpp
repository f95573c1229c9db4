// Conformance: connection management through the kAL with the provider's QPs. Connect and accept with private data
// both ways (up to MPA's 512 bytes), reject with private data, a connect to a port nobody listens on, orderly and
// abortive disconnects seen by both sides, and the QPs' states and flushes that go with them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.hpp"
#include "status_matchers.hpp"

namespace conformance {
namespace {

using Connection = Conformance;
using ual::CmEventId;

constexpr uint32_t id_of(CmEventId e) { return static_cast<uint32_t>(e); }

TEST_F(Connection, ConnectAndAcceptCarryPrivateDataBothWays) {
    open_consumer();
    Pair &p = pair();
    ASSERT_EQ(p.a.make(consumer_, {}), "");
    ASSERT_EQ(p.b.make(consumer_, {}), "");
    auto lp = consumer_.adapter->listen(0, consumer_.requests, 0x77);
    ASSERT_OK(lp) << lp.error().to_string();
    ASSERT_NE((*lp)->port(), 0u);
    // The most private data MPA revision 2 leaves the consumer (RFC 6581 takes 4 of the 512 bytes for IRD/ORD),
    // each way, every byte distinct from its neighbours.
    constexpr size_t kMost = 508;
    std::string request(kMost, '\0'), reply(kMost, '\0');
    for (size_t i = 0; i < kMost; ++i) {
        request[i] = static_cast<char>(pattern(i, 1));
        reply[i] = static_cast<char>(pattern(i, 2));
    }
    ASSERT_OK(p.a.ep->connect(settings().address, (*lp)->port(), bytes_of(request)));
    auto req = consumer_.requests->wait(20s);
    ASSERT_OK(req) << req.error().to_string();
    ASSERT_EQ(req->id, id_of(CmEventId::connect_request)) << cm_name(req->id);
    EXPECT_EQ(req->context, 0x77u) << "the listen point's context";
    ASSERT_TRUE(req->connection);
    EXPECT_EQ(text(req->connection->private_data), request);
    ASSERT_OK(p.b.ep->accept(req->connection->request, bytes_of(reply)));
    auto est_a = p.a.cm_event();
    ASSERT_TRUE(est_a.has_value());
    ASSERT_EQ(est_a->id, id_of(CmEventId::established)) << cm_name(est_a->id);
    EXPECT_EQ(text(est_a->connection->private_data), reply);
    auto est_b = p.b.cm_event();
    ASSERT_TRUE(est_b.has_value());
    ASSERT_EQ(est_b->id, id_of(CmEventId::established)) << cm_name(est_b->id);
    EXPECT_EQ(p.a.state(), RI_QPS_RTS);
    EXPECT_EQ(p.b.state(), RI_QPS_RTS);
    // More private data than MPA carries is refused before anything goes on the wire.
    End third;
    ASSERT_EQ(third.make(consumer_, {}), "");
    auto big = third.ep->connect(settings().address, (*lp)->port(), bytes_of(std::string(513, 'x')));
    if (big.ok()) {
        // Refused once the kAL built the MPA request: the endpoint hears it, the listener hears nothing.
        auto e = third.cm_event();
        ASSERT_TRUE(e.has_value()) << "513 bytes of private data: no connection event";
        EXPECT_NE(e->id, id_of(CmEventId::established)) << "513 bytes of private data were sent";
        EXPECT_FALSE(consumer_.requests->wait(200ms)) << "a request with 513 bytes of private data arrived";
    }
    third.close();
    EXPECT_OK((*lp)->close());
}

// A reject reaches the requester with the rejecter's private data; the requester's QP never reaches RTS.
TEST_F(Connection, RejectCarriesPrivateData) {
    open_consumer();
    End a;
    ASSERT_EQ(a.make(consumer_, {}), "");
    ASSERT_OK(a.recv(1, {a.sge(0, 64)}));
    auto lp = consumer_.adapter->listen(0, consumer_.requests, 3);
    ASSERT_OK(lp) << lp.error().to_string();
    ASSERT_OK(a.ep->connect(settings().address, (*lp)->port(), bytes_of("may I")));
    auto req = consumer_.requests->wait(20s);
    ASSERT_OK(req) << req.error().to_string();
    ASSERT_EQ(req->id, id_of(CmEventId::connect_request));
    EXPECT_EQ(text(req->connection->private_data), "may I");
    ASSERT_OK(consumer_.adapter->reject(req->connection->request, bytes_of("go away")));
    auto e = a.cm_event();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, id_of(CmEventId::rejected)) << cm_name(e->id);
    ASSERT_TRUE(e->connection);
    EXPECT_EQ(text(e->connection->private_data), "go away");
    EXPECT_NE(a.state(), RI_QPS_RTS);
    // A closed listen point takes no more requests: a connect to it fails, it does not hang.
    ASSERT_OK((*lp)->close());
    End b;
    ASSERT_EQ(b.make(consumer_, {}), "");
    ASSERT_OK(b.ep->connect(settings().address, (*lp)->port()));
    auto f = b.cm_event();
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->id, id_of(CmEventId::established)) << cm_name(f->id);
}

// A port nobody listens on: TCP refuses, and the endpoint hears "unreachable" with ECONNREFUSED.
TEST_F(Connection, ConnectToAPortNobodyListensOnIsUnreachable) {
    // A socket bound to a port but not listening holds it: nobody else can listen there, and SYNs to it get RST.
    int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(holder, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ASSERT_EQ(::inet_pton(AF_INET, settings().address.c_str(), &sa.sin_addr), 1) << "an IPv4 --address";
    ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr *>(&sa), sizeof sa), 0) << std::strerror(errno);
    socklen_t len = sizeof sa;
    ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr *>(&sa), &len), 0);
    const uint16_t port = ntohs(sa.sin_port);
    open_consumer();
    End a;
    ASSERT_EQ(a.make(consumer_, {}), "");
    ASSERT_OK(a.recv(1, {a.sge(0, 64)}));
    ASSERT_OK(a.ep->connect(settings().address, port, bytes_of("anyone?")));
    auto e = a.cm_event();
    ::close(holder);
    ASSERT_TRUE(e.has_value()) << "no connection event";
    EXPECT_EQ(e->id, id_of(CmEventId::unreachable)) << cm_name(e->id);
    ASSERT_TRUE(e->connection);
    EXPECT_EQ(e->connection->status, ECONNREFUSED) << std::strerror(e->connection->status);
    EXPECT_NE(a.state(), RI_QPS_RTS);
}

// An orderly disconnect: the side that asked hears "disconnected", the peer "peer_disconnect"; both QPs leave RTS
// and flush what they still had posted.
TEST_F(Connection, OrderlyDisconnectIsSeenByBothSides) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        for (uint64_t i = 0; i < 4; ++i) {
            ASSERT_OK(x.a.recv(10 + i, {x.a.sge(i * 64, 64)}));
            ASSERT_OK(x.b.recv(20 + i, {x.b.sge(i * 64, 64)}));
        }
    });
    // One message first, so the stream has carried data before it closes.
    std::memcpy(p.a.buf.data() + 4096, "last words", 10);
    ASSERT_OK(p.a.send(1, RI_WR_SEND, {p.a.sge(4096, 10)}));
    ASSERT_OK(p.a.ep->disconnect());
    auto ea = p.a.cm_event();
    auto eb = p.b.cm_event();
    ASSERT_TRUE(ea.has_value()) << "the active side heard nothing";
    ASSERT_TRUE(eb.has_value()) << "the passive side heard nothing";
    EXPECT_EQ(ea->id, id_of(CmEventId::disconnected)) << cm_name(ea->id);
    EXPECT_EQ(eb->id, id_of(CmEventId::peer_disconnect)) << cm_name(eb->id);
    // The Send posted before the disconnect went out before the FIN.
    auto bw = p.b.completions(4);
    ASSERT_EQ(bw.size(), 4u);
    EXPECT_EQ(bw[0].wr_id, 20u);
    EXPECT_EQ(bw[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_EQ(std::string(reinterpret_cast<char *>(p.b.buf.data()), 10), "last words");
    for (size_t i = 1; i < 4; ++i) EXPECT_EQ(bw[i].status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR)) << i;
    auto aw = p.a.completions(5);
    ASSERT_EQ(aw.size(), 5u);
    size_t flushed = 0;
    for (const auto &w : aw) {
        if (w.wr_id == 1) {
            EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_SUCCESS));
        } else {
            flushed += w.status == RI_WC_WR_FLUSH_ERR;
        }
    }
    EXPECT_EQ(flushed, 4u);
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
}

// An abortive disconnect: this side's work is flushed at once, the peer's connection ends and its work is flushed.
TEST_F(Connection, AbortiveDisconnectBreaksThePeer) {
    Pair &p = pair();
    connect(p, {}, {}, [](Pair &x) {
        for (uint64_t i = 0; i < 2; ++i) {
            ASSERT_OK(x.a.recv(10 + i, {x.a.sge(i * 64, 64)}));
            ASSERT_OK(x.b.recv(20 + i, {x.b.sge(i * 64, 64)}));
        }
    });
    ASSERT_OK(p.a.ep->disconnect(true));
    auto aw = p.a.completions(2, 5s);
    ASSERT_EQ(aw.size(), 2u);
    for (const auto &w : aw) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    EXPECT_EQ(p.a.state(), RI_QPS_ERROR);
    auto eb = p.b.cm_event();
    ASSERT_TRUE(eb.has_value()) << "the peer heard nothing";
    // A reset ("broken") is what an abortive close sends; an LLP that closed in order instead still ends it.
    EXPECT_TRUE(eb->id == id_of(CmEventId::broken) || eb->id == id_of(CmEventId::peer_disconnect)) << cm_name(eb->id);
    std::printf("the peer of an abortive disconnect heard: %s\n", cm_name(eb->id).c_str());
    auto bw = p.b.completions(2, 5s);
    ASSERT_EQ(bw.size(), 2u);
    for (const auto &w : bw) EXPECT_EQ(w.status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    EXPECT_EQ(p.b.state(), RI_QPS_ERROR);
}

}  // namespace
}  // namespace conformance
