// A consumer hosted in the kAL (kal::HostedConsumer on an embedded kAL in this process): its QP is made with the
// kVP's plain verbs, so softrnic runs its data path in the kVP; it connects through the kAL's LLP management to a
// uAL consumer in another process (the ual_rdma_peer program on a real krdmad) over real TCP on 127.0.0.1, and
// moves Sends, RDMA Writes and RDMA Reads that both sides verify byte by byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <regex>
#include <thread>

#include "embedded_kal.hpp"
#include "iwarp/framing.hpp"
#include "krdmad_fixture.hpp"
#include "raw_mpa_peer.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr size_t kRdmaOffset = 4096;

uint8_t pattern(size_t i, uint32_t seed) { return static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12)) & 0xff); }

// The peer program's buffer description (rdma_util.hpp's BufferInfo).
struct BufferInfo {
    uint64_t addr;
    uint32_t rkey;
    uint32_t length;
};

// The hosted consumer's objects and what its callbacks saw.
struct Hosted {
    std::unique_ptr<kal::EmbeddedKal> kal;
    std::unique_ptr<kal::HostedConsumer> consumer;
    kal::HostedObject rnic, pd, cq, qp, mr;
    ri_mr_keys_t keys{};
    std::vector<uint8_t> buffer;

    std::mutex mutex;
    std::condition_variable changed;
    std::deque<krdma_cm_event> cm;
    int completions = 0;  // CEH calls for our CQ

    std::string start(size_t bytes) {
        kal::Config c;
        c.provider_dir = SOFTRNIC_PROVIDER_DIR;
        c.modules = {"softrnic_kvp.so"};
        c.rnics = {kal::AttachRequest{"softrnic", "hk0", "", "127.0.0.1", ""}};
        auto k = kal::EmbeddedKal::start(c);
        if (!k) return "embedded kAL: " + k.error().to_string();
        kal = std::move(*k);
        kal::HostedCallbacks cb;
        cb.cm = [this](const krdma_cm_event &e) {
            std::lock_guard g(mutex);
            cm.push_back(e);
            changed.notify_all();
        };
        cb.completion = [this](kal::Handle h, uint32_t) {
            std::lock_guard g(mutex);
            if (h == cq.handle) ++completions;
            changed.notify_all();
        };
        consumer = kal->host_consumer(std::move(cb), "test-target");
        auto r = consumer->open_rnic("hk0");
        if (!r) return "open: " + r.error().to_string();
        rnic = *r;
        auto p = consumer->alloc_pd(rnic);
        if (!p) return "pd: " + p.error().to_string();
        pd = *p;
        auto q = consumer->create_cq(rnic, 256);
        if (!q) return "cq: " + q.error().to_string();
        cq = *q;
        ri_qp_init_attr_t a{};
        a.type = RI_QPT_RC;
        a.sq_depth = a.rq_depth = 64;
        a.sq_sge = a.rq_sge = a.rd_sge = 1;
        a.ird = a.ord = 8;
        a.context = 9;
        auto qq = consumer->create_qp(pd, cq, cq, a);
        if (!qq) return "qp: " + qq.error().to_string();
        qp = *qq;
        buffer.assign(kRdmaOffset + bytes, 0);
        auto m = consumer->register_mr(pd, buffer.data(), buffer.size(),
                                       RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ, keys);
        if (!m) return "mr: " + m.error().to_string();
        mr = *m;
        return "";
    }

    void stop() {
        consumer.reset();  // everything it made goes, connections abortively
        kal.reset();
    }

    std::optional<krdma_cm_event> next_cm(std::chrono::milliseconds timeout = 20s) {
        std::unique_lock g(mutex);
        if (!changed.wait_for(g, timeout, [this] { return !cm.empty(); })) return std::nullopt;
        krdma_cm_event e = cm.front();
        cm.pop_front();
        return e;
    }

    // The kVP's fast path, straight from this thread.
    ri_status_t post_recv(size_t off, uint32_t len, uint64_t id) {
        ri_sge_t sge{reinterpret_cast<uint64_t>(buffer.data() + off), len, keys.lkey};
        ri_recv_wr_t wr{id, &sge, 1, 0};
        uint32_t posted = 0;
        return qp.verbs->post_recv(static_cast<ri_qp_t>(qp.kvp), &wr, 1, &posted);
    }
    ri_status_t post(uint32_t opcode, size_t off, uint32_t len, uint64_t id, uint64_t raddr = 0, uint32_t rkey = 0) {
        ri_sge_t sge{reinterpret_cast<uint64_t>(buffer.data() + off), len, keys.lkey};
        ri_send_wr_t wr{};
        wr.wr_id = id;
        wr.opcode = opcode;
        wr.flags = RI_SEND_SIGNALED;
        wr.sgl = &sge;
        wr.num_sge = len > 0 ? 1 : 0;
        wr.u.rdma.remote_addr = raddr;
        wr.u.rdma.rkey = rkey;
        uint32_t posted = 0;
        return qp.verbs->post_send(static_cast<ri_qp_t>(qp.kvp), &wr, 1, &posted);
    }
    std::optional<ri_wc_t> completion(std::chrono::milliseconds timeout = 20s) {
        const auto end = Clock::now() + timeout;
        ri_wc_t wc{};
        while (Clock::now() < end) {
            uint32_t n = 0;
            if (cq.verbs->poll_cq(static_cast<ri_cq_t>(cq.kvp), 1, &wc, &n) == RI_OK && n == 1) return wc;
            std::this_thread::yield();
        }
        return std::nullopt;
    }
};

class HostedConsumerTest : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        const auto cfg = write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                      std::string(SOFTRNIC_PROVIDER_DIR) +
                                      R"(", "modules": ["softrnic_kvp.so"], "rnics": [{"provider": "softrnic",
                                      "name": "sr0", "address": "127.0.0.1"}]})");
        // Ready, not only bound: the device file exists a moment before krdmad listens on it (a peer that connects
        // then is refused).
        ASSERT_TRUE(wait_ready(start({"--config", cfg.string()}))) << "krdmad did not get ready: " << stderr_text();
    }
    void TearDown() override {
        hosted_.stop();
        testutil::KrdmadFixture::TearDown();
    }

    // Starts the peer program in @p mode; its pid and listening port (0 on failure).
    std::pair<pid_t, uint16_t> start_peer(const std::string &mode, size_t bytes) {
        const auto out = dir_ / "peer.out";
        pid_t pid = spawn(PEER_PATH, {device_.string(), "sr0", mode, std::to_string(bytes)}, out, dir_ / "peer.err");
        for (int i = 0; i < 500; ++i) {
            std::smatch m;
            const std::string text = read_text(out);
            if (std::regex_search(text, m, std::regex("port (\\d+)"))) return {pid, static_cast<uint16_t>(std::stoi(m[1]))};
            ::usleep(20000);
        }
        return {pid, 0};
    }

    std::filesystem::path device_;
    Hosted hosted_;
};

TEST_F(HostedConsumerTest, ConnectsToAUalConsumerAndMovesVerifiedSendsWritesAndReads) {
    const size_t kBytes = 4u << 20;
    auto [pid, port] = start_peer("accept", kBytes);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    ASSERT_EQ(hosted_.start(kBytes), "");
    Hosted &h = hosted_;
    for (uint64_t i = 0; i < 8; ++i) ASSERT_RI_OK(h.post_recv(i * 256, 256, 100 + i));
    // Before the connection the QP has no stream: the kVP queues receives but refuses nothing.
    ASSERT_RI_OK(h.cq.verbs->request_cq_notify(static_cast<ri_cq_t>(h.cq.kvp), RI_CQ_NOTIFY_NEXT));
    const std::string hello = "hello server";
    ASSERT_OK(h.consumer->connect(h.qp, "127.0.0.1", port,
                                    {reinterpret_cast<const uint8_t *>(hello.data()), hello.size()}, 9));
    auto est = h.next_cm();
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->type, uint32_t{KRDMA_CM_ESTABLISHED}) << "status " << est->status;
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(est->private_data), est->private_data_len), "welcome");
    EXPECT_EQ(est->context, 9u);
    EXPECT_EQ(est->object, h.qp.handle);
    auto qa = h.consumer->query_qp(h.qp);
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, uint32_t{RI_QPS_RTS});

    // The peer's buffer arrives in a Send; the armed CQ's notification reaches the consumer through the kAL.
    auto wc = h.completion();
    ASSERT_TRUE(wc.has_value());
    ASSERT_EQ(wc->status, uint32_t{RI_WC_SUCCESS});
    ASSERT_EQ(wc->opcode, uint32_t{RI_WC_RECV});
    BufferInfo info{};
    ASSERT_EQ(wc->byte_len, sizeof info);
    std::memcpy(&info, h.buffer.data() + (wc->wr_id - 100) * 256, sizeof info);
    ASSERT_RI_OK(h.post_recv((wc->wr_id - 100) * 256, 256, wc->wr_id));
    ASSERT_EQ(info.length, kBytes);
    {
        std::unique_lock g(h.mutex);
        EXPECT_TRUE(h.changed.wait_for(g, 5s, [&h] { return h.completions > 0; })) << "no completion event";
    }

    // Resize CQ on the kVP's own data path, between transfers: what follows completes on the new ring.
    uint32_t actual = 0;
    ASSERT_RI_OK(h.cq.verbs->resize_cq(static_cast<ri_cq_t>(h.cq.kvp), 1024, &actual));
    EXPECT_EQ(actual, 1024u);
    EXPECT_STATUS(h.cq.verbs->resize_cq(static_cast<ri_cq_t>(h.cq.kvp), 0, &actual), RI_EINVAL);
    uint32_t seed = 1;
    for (size_t size : {size_t{1}, size_t{4099}, size_t{1} << 20, kBytes}) {
        SCOPED_TRACE("size " + std::to_string(size));
        uint8_t *area = h.buffer.data() + kRdmaOffset;
        for (size_t i = 0; i < size; ++i) area[i] = pattern(i, seed);
        ASSERT_RI_OK(h.post(RI_WR_RDMA_WRITE, kRdmaOffset, static_cast<uint32_t>(size), 1, info.addr, info.rkey));
        const std::string v = "V " + std::to_string(size) + " " + std::to_string(seed);
        std::memcpy(h.buffer.data() + 2048, v.data(), v.size());
        ASSERT_RI_OK(h.post(RI_WR_SEND, 2048, static_cast<uint32_t>(v.size()), 2));
        std::string reply;
        for (int got = 0; got < 3;) {  // the Write, the Send, the peer's verdict
            auto c = h.completion(60s);
            ASSERT_TRUE(c.has_value());
            ASSERT_EQ(c->status, uint32_t{RI_WC_SUCCESS});
            ++got;
            if (c->opcode == RI_WC_RECV) {
                reply.assign(reinterpret_cast<const char *>(h.buffer.data() + (c->wr_id - 100) * 256), c->byte_len);
                ASSERT_RI_OK(h.post_recv((c->wr_id - 100) * 256, 256, c->wr_id));
            }
        }
        ASSERT_EQ(reply, "ok");
        // The peer refilled its buffer: read it back.
        std::memset(area, 0, size);
        ASSERT_RI_OK(h.post(RI_WR_RDMA_READ, kRdmaOffset, static_cast<uint32_t>(size), 3, info.addr, info.rkey));
        auto r = h.completion(60s);
        ASSERT_TRUE(r.has_value());
        ASSERT_EQ(r->status, uint32_t{RI_WC_SUCCESS});
        ASSERT_EQ(r->opcode, uint32_t{RI_WC_RDMA_READ});
        size_t bad = size;
        for (size_t i = 0; i < size; ++i) {
            if (area[i] != pattern(i, seed + 1)) {
                bad = i;
                break;
            }
        }
        ASSERT_EQ(bad, size) << "first wrong byte";
        seed += 2;
    }
    // The kVP counted the traffic in the QP's counter slot.
    ri_qp_stats_t st{};
    ASSERT_RI_OK(h.qp.verbs->query_qp_stats(static_cast<ri_qp_t>(h.qp.kvp), &st));
    EXPECT_GE(st.tx_bytes, (size_t{1} << 20) + kBytes);
    EXPECT_GE(st.rx_bytes, (size_t{1} << 20) + kBytes);  // the Read Responses
    EXPECT_GT(st.tx_fpdus, 0u);
    EXPECT_GT(st.rx_fpdus, 0u);
    EXPECT_EQ(st.crc_errors, 0u);

    std::memcpy(h.buffer.data() + 2048, "Q", 1);
    ASSERT_RI_OK(h.post(RI_WR_SEND, 2048, 1, 4));
    auto q = h.completion();
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->status, uint32_t{RI_WC_SUCCESS});
    // An orderly disconnect: the kVP's data path sends the FIN, the kAL reports the end.
    ri_qp_attr_t closing{};
    closing.state = RI_QPS_CLOSING;
    ASSERT_OK(h.consumer->modify_qp(h.qp, closing, RI_QP_ATTR_STATE));
    auto end = h.next_cm();
    ASSERT_TRUE(end.has_value());
    EXPECT_TRUE(end->type == KRDMA_CM_DISCONNECTED || end->type == KRDMA_CM_PEER_DISCONNECT) << end->type;
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "peer.out") << read_text(dir_ / "peer.err");
}

TEST_F(HostedConsumerTest, KilledPeerFlushesTheHostedQpAndTeardownReleasesEverything) {
    auto [pid, port] = start_peer("hold", 1 << 16);
    ASSERT_NE(port, 0) << read_text(dir_ / "peer.err");
    ASSERT_EQ(hosted_.start(1 << 16), "");
    Hosted &h = hosted_;
    for (uint64_t i = 0; i < 4; ++i) ASSERT_RI_OK(h.post_recv(i * 256, 256, 100 + i));
    const std::string hello = "hello server";
    ASSERT_OK(h.consumer->connect(h.qp, "127.0.0.1", port,
                                    {reinterpret_cast<const uint8_t *>(hello.data()), hello.size()}, 9));
    auto est = h.next_cm();
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->type, uint32_t{KRDMA_CM_ESTABLISHED}) << "status " << est->status;
    ::kill(pid, SIGKILL);
    (void)wait_exit(pid);
    // The peer's kernel closes its socket: the kAL reports it and the kVP's data path flushes every receive.
    auto end = h.next_cm();
    ASSERT_TRUE(end.has_value());
    EXPECT_TRUE(end->type == KRDMA_CM_PEER_DISCONNECT || end->type == KRDMA_CM_BROKEN) << end->type;
    int flushed = 0;
    while (auto wc = h.completion(5s)) {
        EXPECT_EQ(wc->opcode, uint32_t{RI_WC_RECV});
        if (wc->status == RI_WC_WR_FLUSH_ERR || wc->status == RI_WC_LLP_ERR) ++flushed;
        if (flushed == 4) break;
    }
    EXPECT_EQ(flushed, 4);
    auto qa = h.consumer->query_qp(h.qp);
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, uint32_t{RI_QPS_ERROR});
    // A request posted now completes at once, flushed.
    ASSERT_RI_OK(h.post(RI_WR_SEND, 0, 8, 7));
    auto f = h.completion(5s);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->status, uint32_t{RI_WC_WR_FLUSH_ERR});
    // The verbs' order holds for a hosted consumer too: an open with objects under it stays.
    auto busy = h.consumer->destroy(h.rnic);
    ASSERT_FALSE(busy.has_value());
    EXPECT_STATUS(busy, RI_EBUSY);
    for (const kal::HostedObject *o : {&h.qp, &h.mr, &h.cq, &h.pd, &h.rnic}) {
        ASSERT_OK(h.consumer->destroy(*o)) << static_cast<int>(o->type);
    }
    EXPECT_FALSE(h.consumer->alloc_pd(h.rnic).has_value());  // a stale handle
}

// The kVP running a hosted consumer's stream ends its QP on a Terminate from the peer, which keeps the TCP connection
// open: the kAL hears it from the kVP's asynchronous event itself (no uAL here moves the QP to ERROR for it), ends the
// endpoint, reports it broken and closes its socket; a later Modify QP to ERROR (as the uAL still sends) changes
// nothing. The peer is a raw MPA responder in this process.
TEST(HostedConsumerEnd, ATerminateFromThePeerEndsTheEndpointWithoutTheUal) {
    testutil::RawMpaPeer peer;
    ASSERT_TRUE(peer.listening()) << std::strerror(errno);

    Hosted h;
    struct Stop {
        Hosted &h;
        ~Stop() { h.stop(); }
    } stop{h};
    ASSERT_EQ(h.start(1 << 16), "");
    for (uint64_t i = 0; i < 4; ++i) ASSERT_RI_OK(h.post_recv(i * 256, 256, 100 + i));
    const std::string hello = "hello";
    ASSERT_OK(h.consumer->connect(h.qp, "127.0.0.1", peer.port(),
                                    {reinterpret_cast<const uint8_t *>(hello.data()), hello.size()}, 9));

    ASSERT_EQ(peer.accept_and_negotiate(), "");
    const int fd = peer.fd();
    auto est = h.next_cm();
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->type, uint32_t{KRDMA_CM_ESTABLISHED}) << "status " << est->status;

    // The peer's RNIC reports a remote protection error in a Terminate (the Terminate queue's first message), and
    // says nothing more: its TCP connection stays open.
    iwarp::Terminate t;
    t.code = iwarp::term::kRdmapInvalidStag;
    uint8_t payload[iwarp::kTerminateMaxLen];
    const size_t n = iwarp::encode_terminate(t, payload);
    iwarp::Header hdr;
    hdr.opcode = static_cast<uint8_t>(iwarp::Opcode::terminate);
    hdr.qn = static_cast<uint32_t>(iwarp::Queue::terminate);
    hdr.msn = 1;
    iwarp::Transmitter tx(iwarp::FramingOptions{peer.mpa().result().crc, peer.mpa().result().markers_tx});
    auto frame = std::make_unique<iwarp::TxFrame>();
    tx.build(hdr, std::span<const uint8_t>(payload, n), {}, *frame);
    ASSERT_EQ(::writev(fd, frame->iov, static_cast<int>(frame->iovcnt)), static_cast<ssize_t>(frame->bytes));

    // The kAL ends the endpoint on the kVP's word: broken by a Terminate.
    auto end = h.next_cm(10s);
    ASSERT_TRUE(end.has_value()) << "the endpoint did not end";
    EXPECT_EQ(end->type, uint32_t{KRDMA_CM_BROKEN});
    EXPECT_EQ(end->status, ECONNABORTED);
    EXPECT_EQ(end->object, h.qp.handle);
    auto qa = h.consumer->query_qp(h.qp);
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, uint32_t{RI_QPS_ERROR});
    int flushed = 0;
    while (auto wc = h.completion(5s)) {
        EXPECT_NE(wc->status, uint32_t{RI_WC_SUCCESS});
        if (++flushed == 4) break;
    }
    EXPECT_EQ(flushed, 4);
    // The kAL let go of the connection: the peer sees its end (FIN or reset) after whatever came before it.
    bool ended = false;
    for (int i = 0; i < 250 && !ended; ++i) {
        uint8_t buf[512];
        const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ended = true;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) ::usleep(20000);
    }
    EXPECT_TRUE(ended) << "the peer's connection is still open";

    // What the uAL does on the same event, later: harmless, and no second report.
    ri_qp_attr_t err{};
    err.state = RI_QPS_ERROR;
    EXPECT_OK(h.consumer->modify_qp(h.qp, err, RI_QP_ATTR_STATE));
    EXPECT_FALSE(h.next_cm(300ms).has_value());
    // The ended QP resets and its endpoint with it.
    ri_qp_attr_t idle{};
    idle.state = RI_QPS_IDLE;
    EXPECT_OK(h.consumer->modify_qp(h.qp, idle, RI_QP_ATTR_STATE));
}

}  // namespace
