// The offload engine on the same-host path (issue 40): two engine QPs whose streams move over a channel made by
// make_channel (rnicpi/cpp/channel.hpp), as the kAL pairs them, instead of their TCP connection. Every size of Send,
// Write and Read arrives whole and completes as on the wire, not one byte goes over TCP, and the connection's ends
// (an orderly close, a QP that goes away) reach the other side as they would over TCP.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "oe_harness.hpp"
#include "rnicpi/cpp/channel.hpp"
#include "status_matchers.hpp"

namespace hwstub_test {
uint64_t tcp_bytes_received(int fd);  // tcp_bytes.cpp
}

namespace {

using namespace std::chrono_literals;
using oe_harness::Adapter;
using oe_harness::Arena;
using oe_harness::Fd;
using oe_harness::HostCq;
using oe_harness::HostQp;
using oe_harness::wait_until;

constexpr uint32_t kQpA = 1, kQpB = 2;
constexpr uint32_t kCqA = 11, kCqB = 12;
// Each side's region: a source half and a sink half.
constexpr uint32_t kStagA = 0x100, kStagB = 0x200;
constexpr size_t kMax = 3u << 20;  // larger than the ring many times over
constexpr uint64_t kRing = 64 * 1024;
constexpr size_t kSlack = 4096;

uint64_t va(const uint8_t *p) { return reinterpret_cast<uintptr_t>(p); }

hwstub_send_wqe wqe(uint64_t wr_id, uint8_t opcode) {
    hwstub_send_wqe w{};
    w.wr_id = wr_id;
    w.opcode = opcode;
    w.flags = HWSTUB_WQE_SIGNALED;
    return w;
}

// Two QPs of one engine, paired by a channel; each also holds a TCP connection (the control channel), of which the
// test keeps its own references to read TCP_INFO.
class Paired : public ::testing::Test {
protected:
    Paired() : arena_(4 * (kMax + kSlack) + (1 << 20)), cq_a(kCqA, 256), cq_b(kCqB, 256) {}
    ~Paired() override { a.oe.reset(); }  // the engine's thread before the rings it reads

    void SetUp() override {
        ASSERT_TRUE(arena_.ok());
        // kSlack more than the largest message: room for the byte after it, and for a small receive buffer.
        src_a = arena_.carve(kMax + kSlack);
        dst_a = arena_.carve(kMax + kSlack);
        src_b = arena_.carve(kMax + kSlack);
        dst_b = arena_.carve(kMax + kSlack);
        ASSERT_NE(dst_b, nullptr);
        qp_a = std::make_unique<HostQp>(kQpA, 64, 128, kCqA);
        qp_b = std::make_unique<HostQp>(kQpB, 64, 128, kCqB);
        constexpr uint32_t all = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                 RI_ACCESS_REMOTE_WRITE;
        // One region per side covering its source and sink (carved one after the other, guards between).
        const size_t len_a = static_cast<size_t>(dst_a + kMax + kSlack - src_a);
        const size_t len_b = static_cast<size_t>(dst_b + kMax + kSlack - src_b);
        ASSERT_TRUE(a.start());
        a.oe->stags().add(kStagA, {va(src_a), len_a, va(src_a), all, 1, true});
        a.oe->stags().add(kStagB, {va(src_b), len_b, va(src_b), all, 1, true});
        ASSERT_RI_OK(a.oe->add_cq(cq_a.setup()));
        ASSERT_RI_OK(a.oe->add_cq(cq_b.setup()));
        ASSERT_RI_OK(a.oe->add_qp(qp_a->setup));
        ASSERT_RI_OK(a.oe->add_qp(qp_b->setup));
        Fd sa, sb;
        ASSERT_TRUE(oe_harness::stream_pair(sa, sb, true));
        tcp_a = Fd(::fcntl(sa.get(), F_DUPFD_CLOEXEC, 0));
        tcp_b = Fd(::fcntl(sb.get(), F_DUPFD_CLOEXEC, 0));
        int ends[2];
        ASSERT_EQ(rdma::provider::make_channel(kRing, ends), 0);
        ri_llp_params_t llp = oe_harness::llp_params(false, false);
        llp.mpa_flags |= RI_LLP_SAME_HOST;
        ri_llp_params_t init = llp;
        init.mpa_flags |= RI_MPA_INITIATOR;
        ASSERT_RI_OK(a.oe->start_stream(kQpA, sa.release(), init, ends[0]));
        ASSERT_RI_OK(a.oe->start_stream(kQpB, sb.release(), llp, ends[1]));
    }

    void post_recv(HostQp &qp, uint64_t wr_id, uint8_t *buf, size_t len, uint32_t stag) {
        ASSERT_TRUE(qp.put_recv(wr_id, 1, {hwstub_sge{va(buf), static_cast<uint32_t>(len), stag}}));
        a.publish(qp);
    }
    void post_send(HostQp &qp, hwstub_send_wqe w, const hwstub_sge &g) {
        w.num_sge = 1;
        ASSERT_TRUE(qp.put_send(w, {g}));
        a.publish(qp);
    }
    static std::optional<hwstub_cqe> one_cqe(HostCq &cq) {
        std::optional<hwstub_cqe> got;
        (void)wait_until(
            [&] {
                for (const auto &c : cq.drain()) got = c;
                return got.has_value();
            },
            20000ms);
        return got;
    }
    void fill(uint8_t *p, size_t len, uint32_t seed) {
        std::mt19937 rng(seed);
        for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(rng());
    }
    void no_tcp_bytes() {
        EXPECT_EQ(hwstub_test::tcp_bytes_received(tcp_a.get()), 0u) << "the stream went over TCP";
        EXPECT_EQ(hwstub_test::tcp_bytes_received(tcp_b.get()), 0u) << "the stream went over TCP";
    }

    Arena arena_;  // NOLINT: first, so that it outlives the engine
    Adapter a;
    HostCq cq_a, cq_b;
    std::unique_ptr<HostQp> qp_a, qp_b;
    uint8_t *src_a = nullptr, *dst_a = nullptr, *src_b = nullptr, *dst_b = nullptr;
    Fd tcp_a, tcp_b;
};

const size_t kSizes[] = {1, 7, 64, 1000, 4095, 4096, 4097, 65535, 65536, 65537, 131072, 200001, 1u << 20, kMax};

TEST_F(Paired, EverySizeOfSendArrivesWholeOverTheChannel) {
    uint64_t id = 0;
    for (size_t len : kSizes) {
        SCOPED_TRACE(len);
        fill(src_a, len, static_cast<uint32_t>(len));
        std::memset(dst_b, 0, len + 1);
        ++id;
        ASSERT_NO_FATAL_FAILURE(post_recv(*qp_b, id, dst_b, len, kStagB));
        ASSERT_NO_FATAL_FAILURE(post_send(*qp_a, wqe(id, HWSTUB_OP_SEND), {va(src_a), static_cast<uint32_t>(len), kStagA}));
        auto s = one_cqe(cq_a);
        auto r = one_cqe(cq_b);
        ASSERT_TRUE(s && r);
        EXPECT_EQ(s->status, RI_WC_SUCCESS);
        EXPECT_EQ(r->status, RI_WC_SUCCESS);
        EXPECT_EQ(r->opcode, HWSTUB_CQE_RECV);
        EXPECT_EQ(r->byte_len, len);
        EXPECT_EQ(std::memcmp(src_a, dst_b, len), 0);
        EXPECT_EQ(dst_b[len], 0) << "a byte beyond the message";
    }
    no_tcp_bytes();
    EXPECT_TRUE(arena_.intact());
}

TEST_F(Paired, EverySizeOfWriteAndReadArrivesWholeOverTheChannel) {
    uint64_t id = 0;
    for (size_t len : kSizes) {
        SCOPED_TRACE(len);
        // B writes into A's sink.
        fill(src_b, len, static_cast<uint32_t>(len) * 3);
        std::memset(dst_a, 0, len + 1);
        hwstub_send_wqe w = wqe(++id, HWSTUB_OP_WRITE);
        w.remote_stag = kStagA;
        w.remote_to = va(dst_a);
        ASSERT_NO_FATAL_FAILURE(post_send(*qp_b, w, {va(src_b), static_cast<uint32_t>(len), kStagB}));
        auto c = one_cqe(cq_b);
        ASSERT_TRUE(c);
        EXPECT_EQ(c->status, RI_WC_SUCCESS);
        EXPECT_EQ(c->opcode, HWSTUB_CQE_WRITE);
        // A Send after it: its arrival means the Write is placed (RFC 5040).
        ASSERT_NO_FATAL_FAILURE(post_recv(*qp_a, ++id, dst_a + kMax + 1024, 64, kStagA));
        ASSERT_NO_FATAL_FAILURE(post_send(*qp_b, wqe(id, HWSTUB_OP_SEND), {va(src_b), 8, kStagB}));
        ASSERT_TRUE(one_cqe(cq_b));
        ASSERT_TRUE(one_cqe(cq_a));
        EXPECT_EQ(std::memcmp(src_b, dst_a, len), 0);
        EXPECT_EQ(dst_a[len], 0) << "a byte beyond the Write";

        // A reads B's source into its sink.
        fill(src_b, len, static_cast<uint32_t>(len) * 5);
        std::memset(dst_a, 0, len + 1);
        hwstub_send_wqe rd = wqe(++id, HWSTUB_OP_READ);
        rd.remote_stag = kStagB;
        rd.remote_to = va(src_b);
        rd.length = static_cast<uint32_t>(len);
        ASSERT_NO_FATAL_FAILURE(post_send(*qp_a, rd, {va(dst_a), static_cast<uint32_t>(len), kStagA}));
        auto r = one_cqe(cq_a);
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, RI_WC_SUCCESS);
        EXPECT_EQ(r->opcode, HWSTUB_CQE_READ);
        EXPECT_EQ(r->byte_len, len);
        EXPECT_EQ(std::memcmp(src_b, dst_a, len), 0);
        EXPECT_EQ(dst_a[len], 0) << "a byte beyond the Read";
    }
    no_tcp_bytes();
    EXPECT_TRUE(arena_.intact());
}

TEST_F(Paired, AWriteToAForgedStagEndsInATerminateAsOnTheWire) {
    hwstub_send_wqe w = wqe(1, HWSTUB_OP_WRITE);
    w.remote_stag = 0x7777;
    w.remote_to = 0;
    ASSERT_NO_FATAL_FAILURE(post_send(*qp_a, w, {va(src_a), 16, kStagA}));
    // B refuses it and says why; A reads the Terminate before the end of the channel.
    EXPECT_TRUE(a.wait_event(RI_AE_QP_TERMINATE_SENT, kQpB));
    EXPECT_TRUE(a.wait_event(RI_AE_QP_TERMINATE_RECEIVED, kQpA));
    EXPECT_EQ(a.state(kQpA), static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_EQ(a.state(kQpB), static_cast<uint32_t>(RI_QPS_ERROR));
    no_tcp_bytes();
}

TEST_F(Paired, AnOrderlyCloseReachesThePeerAsAnOrderlyClose) {
    ASSERT_RI_OK(a.oe->close_qp(kQpA));
    // B reads the end of the ring after A's last byte: LLP_CLOSED, as a FIN would; it closes its ring in order too.
    EXPECT_TRUE(a.wait_event(RI_AE_QP_LLP_CLOSED, kQpB));
    EXPECT_TRUE(a.wait_event(RI_AE_QP_LLP_CLOSED, kQpA));
    EXPECT_EQ(a.count_events(RI_AE_QP_LLP_RESET), 0u);
    // The socket's FIN went too: the kAL judges the connection's end by it.
    char c;
    EXPECT_TRUE(wait_until([&] { return ::recv(tcp_b.get(), &c, 1, MSG_DONTWAIT) == 0; }));
    // Nothing but the FINs, which TCP_INFO counts as a byte each.
    EXPECT_LE(hwstub_test::tcp_bytes_received(tcp_a.get()), 1u);
    EXPECT_LE(hwstub_test::tcp_bytes_received(tcp_b.get()), 1u);
}

TEST_F(Paired, AQpThatGoesAwayIsAResetForItsPeer) {
    ASSERT_RI_OK(a.oe->set_qp_error(kQpA));
    EXPECT_TRUE(a.wait_event(RI_AE_QP_LLP_RESET, kQpB));
    EXPECT_EQ(a.state(kQpB), static_cast<uint32_t>(RI_QPS_ERROR));
}

TEST_F(Paired, WorkPostedWhileTheEngineSleepsWakesItThroughTheBell) {
    // The engine sleeps between messages: each Send must wake the receiving side (no lost wake-up).
    for (uint64_t id = 1; id <= 200; ++id) {
        ASSERT_NO_FATAL_FAILURE(post_recv(*qp_b, id, dst_b, 64, kStagB));
        if (id % 10 == 0) std::this_thread::sleep_for(1ms);
        ASSERT_NO_FATAL_FAILURE(post_send(*qp_a, wqe(id, HWSTUB_OP_SEND), {va(src_a), 64, kStagA}));
        ASSERT_TRUE(one_cqe(cq_b)) << id;
        ASSERT_TRUE(one_cqe(cq_a)) << id;
    }
    no_tcp_bytes();
}

TEST(HwstubSameHost, TheTransitionRefusesTheFlagWithoutAChannel) {
    // The rings first, so that they outlive the engine's thread (Adapter's destructor joins it).
    HostCq cq(1, 16);
    HostQp qp(1, 16, 128, 1);
    Adapter a;
    ASSERT_TRUE(a.start());
    ASSERT_RI_OK(a.oe->add_cq(cq.setup()));
    ASSERT_RI_OK(a.oe->add_qp(qp.setup));
    Fd s1, s2;
    ASSERT_TRUE(oe_harness::stream_pair(s1, s2, true));
    ri_llp_params_t llp = oe_harness::llp_params(false, false);
    llp.mpa_flags |= RI_LLP_SAME_HOST;
    EXPECT_EQ(a.oe->start_stream(1, s1.release(), llp, -1), RI_EBADF);
    // Not a channel's end: refused, and the QP stays IDLE.
    Fd s3, s4;
    ASSERT_TRUE(oe_harness::stream_pair(s3, s4, true));
    EXPECT_NE(a.oe->start_stream(1, s3.release(), llp, ::fcntl(s4.get(), F_DUPFD_CLOEXEC, 0)), RI_OK);
    EXPECT_EQ(a.state(1), static_cast<uint32_t>(RI_QPS_IDLE));
}

}  // namespace
