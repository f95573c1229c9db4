// Connections through a real krdmad on a private device path and real TCP on 127.0.0.1: listen, connect, accept
// and reject with private data, RDMA between two processes with their own uALs (the passive side is the
// ual_rdma_peer program), and the faults of connection setup: nobody listening, a peer that never speaks MPA,
// garbage on a listen point, a peer process killed while connected.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>


#include <nlohmann/json.hpp>

#include "connection_fixtures.hpp"
#include "iwarp/mpa.hpp"
#include "iwarp/wire.hpp"
#include "exchange.hpp"
#include "rdma_util.hpp"
#include "test_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;

using Connections = OneHost;

// A plain TCP listener on 127.0.0.1 at a port the host picks (in @p a): a peer that speaks no MPA, or speaks it by
// hand.
krdma::UniqueFd raw_listener(sockaddr_in &a) {
    krdma::UniqueFd l(::socket(AF_INET, SOCK_STREAM, 0));
    a = sockaddr_in{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(l.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(l.get(), 4) != 0 ||
        ::getsockname(l.get(), reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        return krdma::UniqueFd();
    }
    return l;
}

// Connects @p client to @p server, two endpoints of side @p s, through a listen point of its own (kept in @p lp for
// the connection's life), and waits until both ends are established. Empty when every step worked, else what failed.
std::string connect_within(Side &s, ual::Endpoint &client, ual::Endpoint &server,
                           std::shared_ptr<ual::ListenPoint> &lp) {
    auto l = s.adapter->listen(0, s.requests, 3);
    if (!l) return "listen: " + l.error().to_string();
    lp = *l;
    if (!client.connect("127.0.0.1", lp->port()).ok()) return "connect failed";
    auto req = next_cm(s.requests);
    if (!req || !req->connection) return "no connection request";
    if (!server.accept(req->connection->request).ok()) return "accept failed";
    for (int i = 0; i < 2; ++i) {
        auto e = next_cm(s.cm);
        if (!e) return "no connection event";
        if (e->id != static_cast<uint32_t>(CmEventId::established)) {
            return "event " + std::to_string(e->id) + " status " + std::to_string(e->detail) + " instead of ESTABLISHED";
        }
    }
    return "";
}

// What wait_for_post() saw: the wait's result and how long it took.
struct Waited {
    rdma::Expected<ual::Event> event;
    std::chrono::steady_clock::duration took;
};

// Runs @p wait (a wait of 60 s) while another thread, as a provider's handler would, posts a connection event of
// context @p context to @p d 100 ms in.
template <class Wait>
Waited wait_for_post(const std::shared_ptr<ual::SimpleDispatcher> &d, uint64_t context, Wait &&wait) {
    std::thread poster([d, context] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ual::Event e;
        e.stream = ual::EventStream::cm_message;
        e.context = context;
        d->post(e);
    });
    const auto t0 = std::chrono::steady_clock::now();
    Waited w{wait(), {}};
    w.took = std::chrono::steady_clock::now() - t0;
    poster.join();
    return w;
}

// Leader/follower (ual::EventPump): a thread waiting for connection events reads the kAL's records itself. An event
// that reaches its dispatcher from another thread wakes it at once (it sleeps in the pump, not on the dispatcher);
// a second thread waiting on another dispatcher, while the first leads, gets what the leader delivers for it.
TEST_F(Connections, WaitersReadTheKalThemselvesAndAnotherThreadsPostWakesThem) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto client = s.endpoint(1);  // binds s.cm to the link's pump
    auto server = s.endpoint(2);
    ASSERT_TRUE(client && server);

    const Waited posted = wait_for_post(s.cm, 77, [&] { return s.cm->wait(std::chrono::seconds(60)); });
    ASSERT_TRUE(posted.event) << posted.event.error().to_string();
    EXPECT_EQ(posted.event->context, 77u);
    EXPECT_LT(posted.took, std::chrono::seconds(30)) << "another thread's post did not wake the waiter reading the "
                                                        "kAL: it slept toward its 60 s deadline";

    // One thread waits for both ESTABLISHED events (and leads), this one for the request, then accepts it.
    auto l = s.adapter->listen(0, s.requests, 3);
    ASSERT_TRUE(l) << l.error().to_string();
    std::vector<ual::Event> established;
    std::thread waiter([&] {
        for (int i = 0; i < 2; ++i) {
            auto e = next_cm(s.cm);
            if (!e) return;
            established.push_back(*e);
        }
    });
    ASSERT_OK(client->connect("127.0.0.1", (*l)->port()));
    auto req = next_cm(s.requests);
    if (!req || !req->connection) {
        waiter.join();
        FAIL() << "the request never reached its waiter while another thread read the kAL";
    }
    ASSERT_OK(server->accept(req->connection->request));
    waiter.join();
    ASSERT_EQ(established.size(), 2u) << "an ESTABLISHED event was lost between the leader and the event thread";
    std::set<uint64_t> contexts;
    for (const ual::Event &e : established) {
        EXPECT_EQ(e.id, static_cast<uint32_t>(CmEventId::established)) << "status " << e.detail;
        contexts.insert(e.context);
    }
    EXPECT_EQ(contexts, (std::set<uint64_t>{1, 2}));
    {
        // Both ends were krdmad's: every setup step of the connection is timed (rdmactl stats, protocol 1.5).
        std::string out;
        ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "stats"}, out), 0) << out;
        const auto setup = nlohmann::json::parse(out)["setup_us"];
        for (const char *step : {"tcp_connect", "mpa_active", "request", "decision", "accept"}) {
            EXPECT_GT(setup[step].get<double>(), 0.0) << "setup step " << step << " was not timed: " << out;
        }
    }

    // An aggregate's waiter leads through its member's pump as well; a member's post from another thread wakes it.
    auto agg = ual::AggregateDispatcher::create();
    ASSERT_TRUE(agg) << agg.error().to_string();
    ASSERT_TRUE((*agg)->add(s.cm)) << "the connection dispatcher could not join an aggregate";
    const Waited via = wait_for_post(s.cm, 78, [&] { return (*agg)->wait(std::chrono::seconds(60)); });
    ASSERT_TRUE(via.event) << via.event.error().to_string();
    EXPECT_EQ(via.event->context, 78u);
    EXPECT_LT(via.took, std::chrono::seconds(30)) << "a member's post did not wake the aggregate's waiter reading the "
                                                     "kAL: it slept toward its 60 s deadline";
    (*agg)->remove(s.cm);
}

// A process at its descriptor limit when its connections' sockets arrive (the kernel cuts them from the ESTABLISHED
// records, MSG_CTRUNC) hears that both connections broke, with EMFILE, instead of waiting for ever.
TEST_F(Connections, SocketsThatCannotArriveBreakTheConnectionWithEmfile) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto client = s.endpoint(1);
    auto server = s.endpoint(2);
    ASSERT_TRUE(client && server);
    auto l = s.adapter->listen(0, s.requests, 3);
    ASSERT_TRUE(l) << l.error().to_string();
    ASSERT_OK(client->connect("127.0.0.1", (*l)->port()));
    auto req = next_cm(s.requests);
    ASSERT_TRUE(req && req->connection) << "no connection request";
    rlimit before{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
    // The limit just above the highest descriptor open, and every free number below it taken: no descriptor can be
    // installed from here on, so the records' sockets are cut (poll() still takes a few descriptors: nfds must not
    // exceed the limit).
    int highest = 0;
    for (const auto &f : std::filesystem::directory_iterator("/proc/self/fd")) {
        highest = std::max(highest, std::atoi(f.path().filename().c_str()));
    }
    rlimit full = before;
    full.rlim_cur = static_cast<rlim_t>(highest) + 1;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &full), 0);
    std::vector<krdma::UniqueFd> fillers;
    for (;;) {
        krdma::UniqueFd f(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!f) break;
        fillers.push_back(std::move(f));
    }
    const auto accepted = server->accept(req->connection->request);
    std::vector<ual::Event> got;
    for (int i = 0; i < 2; ++i) {
        auto e = next_cm(s.cm);
        if (!e) break;
        got.push_back(*e);
    }
    fillers.clear();
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
    ASSERT_OK(accepted);
    ASSERT_EQ(got.size(), 2u) << "a connection whose socket could not arrive was never reported";
    for (const ual::Event &e : got) {
        EXPECT_EQ(e.id, static_cast<uint32_t>(CmEventId::broken)) << "context " << e.context;
        EXPECT_EQ(e.detail, static_cast<uint32_t>(EMFILE)) << "context " << e.context;
    }

    // Below even the event thread's own three descriptors its poll() fails (EINVAL): a request's record wakes it
    // meanwhile, and nobody waits (no thread reads the kAL in its stead). Once the limit is back, it must still
    // deliver: the two ESTABLISHED events of the accepted connection arrive with nobody waiting for them either.
    auto client2 = s.endpoint(3);
    auto server2 = s.endpoint(4);
    ASSERT_TRUE(client2 && server2);
    full.rlim_cur = 0;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &full), 0);
    const bool posted = client2->connect("127.0.0.1", (*l)->port()).ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
    ASSERT_TRUE(posted);
    // Dequeue, not wait: a waiter would read the kAL itself and hide a dead event thread.
    auto poll_for = [](const std::shared_ptr<ual::SimpleDispatcher> &d, size_t n) {
        std::vector<ual::Event> out;
        for (int i = 0; i < 2000 && out.size() < n; ++i) {
            auto e = d->dequeue();
            if (e && *e) {
                out.push_back(**e);
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        return out;
    };
    const auto reqs = poll_for(s.requests, 1);
    ASSERT_EQ(reqs.size(), 1u) << "the request's record was not delivered";
    ASSERT_TRUE(reqs[0].connection);
    ASSERT_OK(server2->accept(reqs[0].connection->request));
    const auto est = poll_for(s.cm, 2);
    ASSERT_EQ(est.size(), 2u) << "the event thread delivered nothing after its poll failed for a while";
    for (const ual::Event &e : est) EXPECT_EQ(e.id, static_cast<uint32_t>(CmEventId::established)) << e.detail;
}

TEST_F(Connections, TwoProcessesConnectWithPrivateDataAndMoveEveryByte) {
    const size_t kBytes = 64u << 20;
    auto [pid, port] = start_peer("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", kRdmaOffset + kBytes), "");
    auto ep = s.endpoint(9);
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    ASSERT_OK(ep->connect("127.0.0.1", port, bytes_of("hello server")));
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established)) << "status " << est->detail;
    ASSERT_TRUE(est->connection);
    EXPECT_EQ(text(est->connection->private_data), "welcome");
    EXPECT_EQ(est->context, 9u);
    EXPECT_EQ(est->connection->llp.remote_port, port);
    EXPECT_NE(est->connection->llp.mpa_flags & RI_MPA_INITIATOR, 0u);
    auto qa = ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_RTS));
    {
        // Both ends' endpoints are counted for the RNIC and for each process (rdmactl resources).
        std::string out;
        ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "resources"}, out), 0) << out;
        auto j = nlohmann::json::parse(out);
        ASSERT_EQ(j["rnics"].size(), 1u) << out;
        EXPECT_EQ(j["rnics"][0]["objects"]["endpoint"].get<unsigned>(), 2u) << out;
        unsigned per_process = 0;
        for (const auto &p : j["processes"]) per_process += p["objects"]["endpoint"].get<unsigned>();
        EXPECT_EQ(per_process, 2u) << out;
    }

    exchange(s, *ep, {size_t{1}, size_t{4099}, size_t{1} << 20, size_t{16} << 20, kBytes}, kBytes);
    if (HasFatalFailure()) return;
    ASSERT_OK(ep->disconnect());
    auto end = next_cm(s.cm);
    ASSERT_TRUE(end.has_value());
    EXPECT_TRUE(end->id == static_cast<uint32_t>(CmEventId::disconnected) ||
                end->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
        << end->id;
    EXPECT_EQ(wait_exit(pid), 0) << peer_output("accept") << read_text(dir_ / "peer.err");
}

// Gather and scatter lists, solicited events and Send with Invalidate between two processes: the peer receives
// into two-element scatter lists and reports each Send's bytes (a hash) and its completion's flags.
TEST_F(Connections, GatherScatterSolicitedAndInvalidateBetweenProcesses) {
    constexpr size_t kBytes = 1 << 16;
    auto [pid, port] = start_peer("features", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", kRdmaOffset + kBytes), "");
    auto ep = s.endpoint(9);
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    auto announced = connect_to_watcher(s, *ep, "127.0.0.1", port);
    ASSERT_TRUE(announced.has_value()) << read_text(dir_ / "peer.err");
    const BufferInfo info = *announced;
    ASSERT_OK(post_recv(s, *ep, 0, 256, 100));  // the receive that took it, again

    const auto fnv = [](const std::vector<uint8_t> &b) {
        uint32_t h = 2166136261u;
        for (uint8_t c : b) h = (h ^ c) * 16777619u;
        return h;
    };
    // Sends one request and returns the peer's report of it (its own Send's completion is consumed on the way).
    const auto send = [&](ri_send_wr_t &wr) -> std::string {
        if (!ep->post_send({&wr, 1}).ok()) return "post failed";
        std::string reply;
        for (int got = 0; got < 2;) {
            auto c = s.completion(20s);
            if (!c) return "no completion";
            if (c->status != RI_WC_SUCCESS) return "status " + std::to_string(c->status);
            ++got;
            if (c->opcode == RI_WC_RECV) {
                reply.assign(reinterpret_cast<const char *>(s.buffer.data() + (c->wr_id - 100) * 256), c->byte_len);
                (void)post_recv(s, *ep, (c->wr_id - 100) * 256, 256, c->wr_id);
            }
        }
        return reply;
    };
    uint8_t *b = s.buffer.data();
    const uint32_t lkey = s.mr->keys().lkey;
    for (size_t i = 0; i < 4096; ++i) b[kRdmaOffset + i] = pattern(i, 3);

    // A Send gathered from three pieces lands in the peer's two-piece scatter list, every byte in order.
    ri_sge_t g3[3] = {{reinterpret_cast<uint64_t>(b + kRdmaOffset), 10, lkey},
                      {reinterpret_cast<uint64_t>(b + kRdmaOffset + 1000), 100, lkey},
                      {reinterpret_cast<uint64_t>(b + kRdmaOffset + 3000), 50, lkey}};
    std::vector<uint8_t> sent(b + kRdmaOffset, b + kRdmaOffset + 10);
    sent.insert(sent.end(), b + kRdmaOffset + 1000, b + kRdmaOffset + 1100);
    sent.insert(sent.end(), b + kRdmaOffset + 3000, b + kRdmaOffset + 3050);
    ri_send_wr_t wr{};
    wr.wr_id = 1;
    wr.opcode = RI_WR_SEND;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = g3;
    wr.num_sge = 3;
    EXPECT_EQ(send(wr), "R 160 0 0 0 " + std::to_string(fnv(sent)));

    // Send with Solicited Event: the peer's completion says so.
    wr.opcode = RI_WR_SEND_SE;
    wr.num_sge = 1;
    EXPECT_EQ(send(wr), "R 10 1 0 0 " + std::to_string(fnv({sent.begin(), sent.begin() + 10})));

    // An RDMA Write gathered from three pieces, read back into a scatter list of two elsewhere: the same bytes.
    ri_send_wr_t w{};
    w.wr_id = 2;
    w.opcode = RI_WR_RDMA_WRITE;
    w.flags = RI_SEND_SIGNALED;
    w.sgl = g3;
    w.num_sge = 3;
    w.u.rdma.remote_addr = info.addr;
    w.u.rdma.rkey = info.rkey;
    ASSERT_OK(ep->post_send({&w, 1}));
    ri_sge_t s2[2] = {{reinterpret_cast<uint64_t>(b + kRdmaOffset + 8192), 60, lkey},
                      {reinterpret_cast<uint64_t>(b + kRdmaOffset + 12288), 100, lkey}};
    ri_send_wr_t r{};
    r.wr_id = 3;
    r.opcode = RI_WR_RDMA_READ;
    r.flags = RI_SEND_SIGNALED;
    r.sgl = s2;
    r.num_sge = 2;
    r.u.rdma.remote_addr = info.addr;
    r.u.rdma.rkey = info.rkey;
    ASSERT_OK(ep->post_send({&r, 1}));
    for (uint64_t want : {2u, 3u}) {
        auto c = s.completion(20s);
        ASSERT_TRUE(c.has_value());
        EXPECT_EQ(c->wr_id, want);
        EXPECT_EQ(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    }
    std::vector<uint8_t> back(b + kRdmaOffset + 8192, b + kRdmaOffset + 8192 + 60);
    back.insert(back.end(), b + kRdmaOffset + 12288, b + kRdmaOffset + 12388);
    EXPECT_EQ(back, sent);

    // Send with Invalidate: the peer's completion names its STag, which then no longer admits a Write: the
    // peer's RNIC answers with a Terminate (remote protection) and both QPs end.
    wr.opcode = RI_WR_SEND_INV;
    wr.inv_stag = info.rkey;
    EXPECT_EQ(send(wr), "R 10 0 1 " + std::to_string(info.rkey) + " " +
                            std::to_string(fnv({sent.begin(), sent.begin() + 10})));
    w.wr_id = 4;
    w.num_sge = 1;
    ASSERT_OK(ep->post_send({&w, 1}));
    auto c = s.completion(20s);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->wr_id, 4u);
    // A Write completes once its data left; the Terminate then fails the QP (later work flushes).
    if (c->status == RI_WC_SUCCESS) {
        ri_send_wr_t probe = r;
        probe.wr_id = 5;
        (void)ep->post_send({&probe, 1});
        c = s.completion(20s);
        ASSERT_TRUE(c.has_value());
    }
    EXPECT_NE(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    auto end = next_cm(s.cm, 10s);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->id, static_cast<uint32_t>(CmEventId::broken)) << end->id;
    EXPECT_EQ(wait_exit(pid), 0) << peer_output("features") << read_text(dir_ / "peer.err");
}

TEST_F(Connections, RejectCarriesPrivateDataBack) {
    auto [pid, port] = start_peer("reject");
    ASSERT_NE(port, 0);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    ASSERT_OK(ep->connect("127.0.0.1", port, bytes_of("hello server")));
    auto e = next_cm(s.cm);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->id, static_cast<uint32_t>(CmEventId::rejected));
    EXPECT_EQ(text(e->connection->private_data), "go away");
    EXPECT_EQ(wait_exit(pid), 0);
    // The QP is still IDLE and can try again.
    auto qa = ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_IDLE));

    // The administrator sees it: LLP counters and the host's TCP MIB in one view.
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "stats"}, out), 0) << out;
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["llp"]["ActiveOpens"].get<uint64_t>(), 1u);
    EXPECT_EQ(j["llp"]["PassiveOpens"].get<uint64_t>(), 1u);
    EXPECT_EQ(j["llp"]["Rejected"].get<uint64_t>(), 1u);
    EXPECT_EQ(j["llp"]["PeerRejected"].get<uint64_t>(), 1u);
    EXPECT_EQ(j["llp"]["Established"].get<uint64_t>(), 0u);
    EXPECT_TRUE(j["host_tcp"].contains("ActiveOpens"));
    EXPECT_TRUE(j["endpoints"].is_array());
}

// A port nobody listens on: the TCP connection is refused.
TEST_F(Connections, NobodyListeningIsUnreachable) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    krdma::UniqueFd probe(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(probe.get(), reinterpret_cast<sockaddr *>(&a), &len);
    // Bound but not listening: a connection is refused, and no other test can take the port meanwhile (as it
    // could once the probe closed).
    auto ep = s.endpoint();
    ASSERT_OK(ep->connect("127.0.0.1", ntohs(a.sin_port)));
    auto e = next_cm(s.cm);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, static_cast<uint32_t>(CmEventId::unreachable));
    EXPECT_EQ(e->connection->status, ECONNREFUSED);
}

// A TCP listener that never answers the MPA request: the setup times out.
TEST_F(Connections, SilentPeerTimesOut) {
    sockaddr_in a{};
    krdma::UniqueFd l = raw_listener(a);
    ASSERT_TRUE(l);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto ep = s.endpoint();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_OK(ep->connect("127.0.0.1", ntohs(a.sin_port), {}, 300ms));
    auto e = next_cm(s.cm, 10s);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, static_cast<uint32_t>(CmEventId::timeout));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
}

// The kAL visits its setups only when the earliest deadline is due: a setup armed later with an earlier deadline
// than one already waiting still times out on its own time.
TEST_F(Connections, ALaterSetupWithAnEarlierDeadlineTimesOutFirst) {
    sockaddr_in a{};
    krdma::UniqueFd l = raw_listener(a);
    ASSERT_TRUE(l);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto slow = s.endpoint();
    ASSERT_OK(slow->connect("127.0.0.1", ntohs(a.sin_port), {}, 20s));
    auto e = next_cm(s.cm, 200ms);
    EXPECT_FALSE(e.has_value());  // the first setup just waits
    auto quick = s.endpoint();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_OK(quick->connect("127.0.0.1", ntohs(a.sin_port), {}, 300ms));
    e = next_cm(s.cm, 10s);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, static_cast<uint32_t>(CmEventId::timeout));
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 5s) << "the 300 ms setup waited for the 20 s one's deadline";
}

// RFC 6581: a valid reply whose IRD/ORD this side cannot serve. The responder is already in full operation, so the
// kAL sends it a Terminate FPDU with the reason, then closes in order; the consumer sees the connection broken.
TEST_F(Connections, UnservableReplyGetsATerminateThenAnOrderlyClose) {
    sockaddr_in a{};
    krdma::UniqueFd l = raw_listener(a);
    ASSERT_TRUE(l);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto ep = s.endpoint();
    ASSERT_OK(ep->connect("127.0.0.1", ntohs(a.sin_port)));
    krdma::UniqueFd peer(::accept(l.get(), nullptr, nullptr));
    ASSERT_TRUE(peer);
    timeval tv{5, 0};
    ::setsockopt(peer.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    auto read_n = [&](size_t n) {
        std::vector<uint8_t> b(n);
        size_t got = 0;
        while (got < n) {
            ssize_t r = ::read(peer.get(), b.data() + got, n - got);
            if (r <= 0) break;
            got += static_cast<size_t>(r);
        }
        b.resize(got);
        return b;
    };
    std::vector<uint8_t> req = read_n(iwarp::kMpaFrameHeaderLen);
    ASSERT_EQ(req.size(), iwarp::kMpaFrameHeaderLen);
    auto pd_len = iwarp::decode_mpa_header(req, iwarp::MpaKind::request);
    ASSERT_OK(pd_len) << pd_len.error().to_string();
    std::vector<uint8_t> pd = read_n(*pd_len);
    req.insert(req.end(), pd.begin(), pd.end());
    auto request = iwarp::decode_mpa(req, iwarp::MpaKind::request);
    ASSERT_OK(request) << request.error().to_string();
    ASSERT_TRUE(request->enhanced) << "the kAL's default policy asks for revision 2 with IRD/ORD";
    auto response = iwarp::respond(iwarp::MpaConfig{}, *request);
    ASSERT_OK(response);
    iwarp::MpaFrame reply = response->reply;
    reply.ord = static_cast<uint16_t>(request->ird + 100);  // more Reads in flight than the initiator accepts
    std::vector<uint8_t> wire(iwarp::kMpaFrameHeaderLen + iwarp::kMpaMaxPrivateData);
    auto n = iwarp::encode_mpa(reply, wire);
    ASSERT_OK(n);
    ASSERT_EQ(::write(peer.get(), wire.data(), *n), static_cast<ssize_t>(*n));

    // The Terminate FPDU (CRC on, as both sides asked), then end of stream, never a reset.
    std::vector<uint8_t> fpdu = read_n(2);
    ASSERT_EQ(fpdu.size(), 2u);
    const size_t ulpdu = static_cast<size_t>(fpdu[0]) << 8 | fpdu[1];
    std::vector<uint8_t> rest = read_n((2 + ulpdu + 3) / 4 * 4 + 4 - 2);
    fpdu.insert(fpdu.end(), rest.begin(), rest.end());
    ASSERT_EQ(fpdu.size(), (2 + ulpdu + 3) / 4 * 4 + 4);
    EXPECT_EQ(iwarp::decode_header(fpdu.data() + 2).op(), iwarp::Opcode::terminate);
    iwarp::Terminate t;
    ASSERT_TRUE(iwarp::decode_terminate(
        std::span<const uint8_t>(fpdu.data() + 2 + iwarp::kUntaggedHeaderLen, ulpdu - iwarp::kUntaggedHeaderLen), t));
    EXPECT_EQ(t.code, iwarp::term::kLlpInsufficientIrd);
    uint8_t c;
    errno = 0;
    EXPECT_EQ(::read(peer.get(), &c, 1), 0) << "an orderly close: " << std::strerror(errno);

    auto e = next_cm(s.cm);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, static_cast<uint32_t>(CmEventId::broken));
    EXPECT_EQ(e->connection->term, iwarp::term_detail(iwarp::term::kLlpInsufficientIrd) & 0xffffffu);
}

// Garbage on a listen point costs that connection only: no request reaches the consumer, and a real request
// afterwards is served.
TEST_F(Connections, GarbageOnAListenPointIsRefusedAndTheListenerServesOn) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto lp = s.adapter->listen(0, s.requests, 3);
    ASSERT_OK(lp) << lp.error().to_string();
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((*lp)->port());
    krdma::UniqueFd g(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::connect(g.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::write(g.get(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    char buf[64];
    timeval tv{5, 0};
    ::setsockopt(g.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    // The kAL answers garbage by closing (RFC 5044: not a valid MPA request); never with a request event.
    ssize_t n;
    while ((n = ::read(g.get(), buf, sizeof buf)) > 0) {
    }
    EXPECT_TRUE(n == 0 || errno == ECONNRESET) << "the kAL closes the connection";
    EXPECT_EQ(s.requests->pending(), 0u);

    auto server = s.endpoint();
    auto client = s.endpoint();
    ASSERT_OK(client->connect("127.0.0.1", (*lp)->port(), bytes_of("again")));
    auto req = next_cm(s.requests);
    ASSERT_TRUE(req.has_value());
    EXPECT_EQ(req->context, 3u);
    EXPECT_EQ(text(req->connection->private_data), "again");
}

// The addresses and ports each record carries are the sockets' own. The kAL takes them from accept4() and the
// listen point (passive side) and from CONNECT's target and one getsockname() (active side) instead of asking
// each socket twice: the two ends' views must mirror each other, and the passive side's remote port must be the
// port the active side's socket really has.
TEST_F(Connections, EveryRecordCarriesTheSocketsOwnAddressesAndPorts) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto lp = s.adapter->listen(0, s.requests, 3);
    ASSERT_OK(lp) << lp.error().to_string();
    const uint16_t port = (*lp)->port();
    auto server = s.endpoint(21);
    auto client = s.endpoint(22);
    ASSERT_OK(client->connect("127.0.0.1", port));
    auto req = next_cm(s.requests);
    ASSERT_TRUE(req.has_value() && req->connection);
    const ri_llp_params_t asked = req->connection->llp;
    const uint8_t loopback[4] = {127, 0, 0, 1};
    const auto is_loopback = [&](const ri_net_addr_t &a) {
        return a.family == RI_AF_INET && std::memcmp(a.addr, loopback, 4) == 0;
    };
    EXPECT_TRUE(is_loopback(asked.local));
    EXPECT_TRUE(is_loopback(asked.remote));
    EXPECT_EQ(asked.local_port, port);
    EXPECT_NE(asked.remote_port, 0u);
    EXPECT_NE(asked.remote_port, port);
    ASSERT_OK(server->accept(req->connection->request));
    std::map<uint64_t, ri_llp_params_t> est;
    for (int i = 0; i < 2; ++i) {
        auto e = next_cm(s.cm);
        ASSERT_TRUE(e.has_value() && e->connection);
        ASSERT_EQ(e->id, static_cast<uint32_t>(CmEventId::established)) << "status " << e->detail;
        est[e->context] = e->connection->llp;
    }
    ASSERT_EQ(est.count(21), 1u);
    ASSERT_EQ(est.count(22), 1u);
    const ri_llp_params_t &passive = est[21], &active = est[22];
    EXPECT_TRUE(is_loopback(passive.local) && is_loopback(passive.remote));
    EXPECT_TRUE(is_loopback(active.local) && is_loopback(active.remote));
    EXPECT_EQ(passive.local_port, port);
    EXPECT_EQ(passive.remote_port, asked.remote_port);
    EXPECT_EQ(active.remote_port, port);
    EXPECT_EQ(active.local_port, asked.remote_port) << "the active socket's port, as its peer saw it at accept";
    EXPECT_NE(active.mpa_flags & RI_MPA_INITIATOR, 0u);
    EXPECT_EQ(passive.mpa_flags & RI_MPA_INITIATOR, 0u);
}

// Moving a QP to ERROR (here by an abortive disconnect; the uAL does the same when the kAL reports that a
// connection ended) makes no round trip through krdmad: the request is posted. The call returns while krdmad is
// stopped, the local queues flush at once, and once krdmad runs again it carries the request out in order: the
// connection is torn down and the peer hears of it.
// Once a connection's socket is the uVP's, krdmad keeps no epoll entry on it: the uVP meets the stream's end and
// reports it, and an entry on a socket's wait queue costs a wake-up call at every segment in and every ACK (both ends
// of a small ping-pong pay it, bench/README). The two streams of a connection inside this process must not be among
// what krdmad's epoll sets watch.
TEST_F(Connections, KrdmadWatchesNoSocketItHandedToAConsumer) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto server = s.endpoint(41);
    auto client = s.endpoint(42);
    std::shared_ptr<ual::ListenPoint> lp;
    ASSERT_EQ(connect_within(s, *client, *server, lp), "");
    const std::set<unsigned long> mine = testutil::tcp_socket_inodes();
    ASSERT_GE(mine.size(), 2u) << "both ends' sockets were handed to this process";
    const std::set<unsigned long> watched = testutil::epoll_watched_inodes(krdmad_);
    ASSERT_FALSE(watched.empty()) << "krdmad's epoll sets could not be read";  // its device socket at least
    for (unsigned long ino : mine) EXPECT_EQ(watched.count(ino), 0u) << "krdmad watches socket inode " << ino;
    // The streams work: the client's Send reaches the server's receive.
    ASSERT_OK(post_recv(s, *server, 0, 64, 5));
    ASSERT_OK(post(s, *client, RI_WR_SEND, 64, 16, 6));
    bool got_recv = false;
    for (int i = 0; i < 2; ++i) {
        auto c = s.completion(5s);
        ASSERT_TRUE(c.has_value());
        EXPECT_EQ(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        if (c->wr_id == 5) got_recv = true;
    }
    EXPECT_TRUE(got_recv);
}

TEST_F(Connections, AMoveToErrorIsPostedAndCarriedOutInOrder) {
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto server = s.endpoint(31);
    auto client = s.endpoint(32);
    ASSERT_OK(post_recv(s, *client, 0, 256, 7));
    std::shared_ptr<ual::ListenPoint> lp;
    ASSERT_EQ(connect_within(s, *client, *server, lp), "");

    // krdmad stopped; a watchdog resumes it after 5 s (so a call that waits for it cannot hang the test), or when
    // told, and the guard resumes it however the test ends.
    struct Resume {
        pid_t pid;
        ~Resume() { ::kill(pid, SIGCONT); }
    } resume{krdmad_};
    ASSERT_EQ(::kill(krdmad_, SIGSTOP), 0);
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::atomic<bool> resumed{false};
    std::thread watchdog([&] {
        std::unique_lock lock(m);
        cv.wait_for(lock, 5s, [&] { return go; });
        resumed = true;
        ::kill(krdmad_, SIGCONT);
    });
    const rdma::Status st = client->disconnect(true);
    const bool returned_first = !resumed.load();
    auto flushed = s.completion(3s);  // the data path's own flush needs no kAL
    {
        std::lock_guard lock(m);
        go = true;
    }
    cv.notify_all();
    watchdog.join();
    EXPECT_OK(st) << st.describe();
    EXPECT_TRUE(returned_first) << "the move to ERROR waited for krdmad";
    ASSERT_TRUE(flushed.has_value());
    EXPECT_EQ(flushed->wr_id, 7u);
    EXPECT_EQ(flushed->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));

    // krdmad runs again and carries the request out: the server's end of the connection ends.
    bool server_ended = false;
    for (int i = 0; i < 4 && !server_ended; ++i) {
        auto e = next_cm(s.cm);
        if (!e) break;
        if (e->context != 31) continue;
        EXPECT_TRUE(e->id == static_cast<uint32_t>(CmEventId::broken) ||
                    e->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
            << e->id;
        server_ended = true;
    }
    EXPECT_TRUE(server_ended) << "the server's endpoint never heard that the connection ended";
    auto qa = client->query();
    ASSERT_OK(qa) << qa.error().to_string();
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
}

// A connected peer process killed: the survivor's endpoint learns that the connection ended.
TEST_F(Connections, KilledPeerProcessEndsTheConnection) {
    auto [pid, port] = start_peer("hold");
    ASSERT_NE(port, 0);
    Side s;
    ASSERT_EQ(s.open(device_.string(), "sr0", 4096), "");
    auto ep = s.endpoint();
    ASSERT_OK(post_recv(s, *ep, 0, 256, 1));
    ASSERT_OK(ep->connect("127.0.0.1", port, bytes_of("hello server")));
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
    ::kill(-pid, SIGKILL);
    auto e = next_cm(s.cm);
    ASSERT_TRUE(e.has_value());
    EXPECT_TRUE(e->id == static_cast<uint32_t>(CmEventId::broken) ||
                e->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
        << e->id;
    // The posted receive completes, flushed, and nothing hangs.
    auto wc = s.completion(10s);
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
}

}  // namespace

namespace {

// Host A's consumer (device @p dev, its RNIC chosen by its address @p addr_a) connects to the "accept" peer at
// @p addr_b : @p port, hands the connection's negotiated parameters to @p established, moves 1 byte, 65,537 bytes and
// @p bytes through it (exchange()) and disconnects.
void rdma_to_peer(const std::filesystem::path &dev, const std::string &addr_a, const std::string &addr_b, uint16_t port,
                  size_t bytes, const std::function<void(const ri_llp_params_t &)> &established) {
    Side s;
    ASSERT_EQ(s.open(dev.string(), addr_a, kRdmaOffset + bytes), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    ASSERT_OK(ep->connect(addr_b, port, bytes_of("hello server")));
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established)) << "status " << est->detail;
    ASSERT_TRUE(est->connection);
    established(est->connection->llp);
    exchange(s, *ep, {size_t{1}, size_t{65537}, bytes}, bytes);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_OK(ep->disconnect());
    EXPECT_TRUE(next_cm(s.cm).has_value());
}

// Two hosts (connection_fixtures.hpp): the passive peer runs inside the namespace on its own krdmad. Each kAL's
// handshake says it runs this stack (the TCP peer detection), so the two agree RFC 7306 in MPA for their softrnics
// and send each other FPDUs larger than a segment; the exchange's 4 MiB arrive intact.
TEST_F(TwoHosts, RdmaBetweenNamespacesThroughTheirOwnKrdmads) {
    const size_t kBytes = 4u << 20;
    auto [pid, port] = start_peer_b("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    rdma_to_peer(dev_a_, addr_a_, addr_b_, port, kBytes, [&](const ri_llp_params_t &llp) {
        EXPECT_EQ(llp.mpa_flags & RI_LLP_SAME_HOST, 0u) << "two krdmads without a rendezvous paired";
        EXPECT_NE(llp.mpa_flags & RI_MPA_RFC7306, 0u)
            << "two kALs that detected each other did not agree RFC 7306\n" << read_text(dir_ / "a.err")
            << read_text(dir_ / "b.err");
        // The veth path's segments carry 1448 bytes; a peer of this stack gets FPDUs of about 16 KiB.
        EXPECT_NE(llp.mpa_flags & RI_LLP_FPDU_FIXED, 0u) << "FPDUs of one segment to a peer of this stack";
        EXPECT_GT(llp.fpdu_max, 16000u);
    });
    if (HasFatalFailure()) return;
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
}

// Two hosts that are two network namespaces of one host (containers joined by a veth pair), each with its own
// krdmad, both of which meet in one rendezvous directory (llp.same_host.rendezvous): the responder's kAL offers the
// connection, the initiator's proves by the sequence numbers that it holds the other end, and the two QPs move their
// bytes over a same-host channel. Without the directory they stay on the wire (the test above).
class TwoNamespacesOneHost : public TwoHosts {
protected:
    std::string extra_config() override {
        return R"("llp": {"same_host": {"rendezvous": ")" + (dir_ / "rendezvous").string() + R"("}})";
    }
    // The paths of host A's connected endpoints, as `rdmactl stats` shows them.
    std::vector<std::string> paths_a() {
        std::string out;
        EXPECT_EQ(rdmactl({"--device", dev_a_.string(), "--json", "stats"}, out), 0) << out;
        std::vector<std::string> paths;
        auto j = nlohmann::json::parse(out, nullptr, false);
        if (j.is_discarded()) return paths;
        for (const auto &e : j["endpoints"]) {
            if (e["state"] == "connected") paths.push_back(e["path"].get<std::string>());
        }
        return paths;
    }
};

TEST_F(TwoNamespacesOneHost, TheirKrdmadsPairTheConnectionOverASameHostChannel) {
    const size_t kBytes = 4u << 20;
    auto [pid, port] = start_peer_b("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    rdma_to_peer(dev_a_, addr_a_, addr_b_, port, kBytes, [&](const ri_llp_params_t &llp) {
        EXPECT_NE(llp.mpa_flags & RI_LLP_SAME_HOST, 0u)
            << "the two krdmads did not pair the connection\n" << read_text(dir_ / "a.err") << read_text(dir_ / "b.err");
        EXPECT_EQ(paths_a(), std::vector<std::string>{"same-host"});
    });
    if (HasFatalFailure()) return;
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
}

// An address of no RNIC's network: CONNECT is refused at once with the route's error.
TEST_F(TwoHosts, UnroutedPeerIsRefusedByTheRouteLookup) {
    Side s;
    ASSERT_EQ(s.open(dev_a_.string(), addr_a_, 4096), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    // TEST-NET-1 leaves by the host's default route (another netdev than the RNIC's veth), or has no route.
    auto st = ep->connect("192.0.2.1", 9);
    EXPECT_FALSE(st.ok());
    EXPECT_TRUE(st.code() == EADDRNOTAVAIL || st.code() == ENETUNREACH) << st.error().to_string();
    EXPECT_NE(st.error().message().find("192.0.2.1"), std::string::npos)
        << "the kAL's reason names the peer: " << st.error().message();
}

// The same refusal of a connect that does not wait for the kAL (quiet CONNECT, protocol 1.3): it arrives as the
// endpoint's unreachable event with the route's error, and the endpoint connects again afterwards.
TEST_F(TwoHosts, UnroutedPeerOfAnAsynchronousConnectIsAnUnreachableEvent) {
    Side s;
    ASSERT_EQ(s.open(dev_a_.string(), addr_a_, 4096), "");
    auto ep = s.endpoint();
    ASSERT_NE(ep, nullptr);
    ASSERT_OK(ep->connect_async("192.0.2.1", 9));
    auto e = next_cm(s.cm);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->id, static_cast<uint32_t>(CmEventId::unreachable));
    EXPECT_TRUE(e->connection->status == EADDRNOTAVAIL || e->connection->status == ENETUNREACH)
        << "status " << e->connection->status;
    auto again = ep->connect("192.0.2.1", 9);
    EXPECT_FALSE(again.ok()) << "the endpoint is still IDLE: the same refusal, at once";
    EXPECT_TRUE(again.code() == EADDRNOTAVAIL || again.code() == ENETUNREACH) << again.error().to_string();
}

}  // namespace
