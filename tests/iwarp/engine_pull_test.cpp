// Single copy on a same-host channel (rnicpi/ri_channel.h): large Sends and RDMA Writes go as pulls, whose bytes
// the receiver copies straight from the sender's memory after the checks the bytes would meet on the wire, and
// which the sender completes only when the receiver acknowledged them. Two engines in memory; the owner's pull()
// is a plain copy, as between two QPs of one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "engine_harness.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;
using harness::Owner;
using harness::pump;
using harness::settle;
using harness::wr_over;

using harness::pattern;

// An owner whose peer takes pulls (when told so) and who pulls by plain copies, counting them.
class PullOwner : public Owner {
public:
    bool peer_takes_pulls() noexcept override { return takes; }
    bool pull(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept override {
        ++pulls;
        if (fail) return false;
        std::vector<uint8_t> bytes;
        for (size_t i = 0; i < nremote; ++i) {
            auto *p = static_cast<const uint8_t *>(remote[i].iov_base);
            bytes.insert(bytes.end(), p, p + remote[i].iov_len);
        }
        size_t at = 0;
        for (size_t i = 0; i < nlocal; ++i) {
            if (at + local[i].iov_len > bytes.size()) return false;
            std::memcpy(local[i].iov_base, bytes.data() + at, local[i].iov_len);
            at += local[i].iov_len;
        }
        return at == bytes.size();
    }
    bool takes = true;
    bool fail = false;
    size_t pulls = 0;
};

constexpr uint32_t kStag = 0x100;
constexpr size_t kPullMin = 8192;

class Pulls : public ::testing::Test {
protected:
    EngineConfig config() {
        EngineConfig c;
        c.pd = 1;
        c.mulpdu = 65000;
        c.ird = c.ord = 4;
        c.sq_depth = 16;
        c.pull_min = kPullMin;
        c.accept_pull = true;
        return c;
    }
    void SetUp() override {
        a = std::make_unique<Engine>(oa, config());
        b = std::make_unique<Engine>(ob, config());
        ob.add_region(kStag, sink, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_LOCAL_WRITE);
    }
    WorkRequest write_of(uint64_t id, std::vector<uint8_t> &src, uint64_t to = 0, uint32_t stag = kStag) {
        WorkRequest wr = wr_over(id, WorkType::write, src);
        wr.remote_stag = stag;
        wr.remote_to = to;
        return wr;
    }
    // The first frame @p e builds, as bytes.
    std::vector<uint8_t> next_bytes(Engine &e) {
        static TxFrame frame;
        EXPECT_TRUE(e.next_frame(frame));
        auto bytes = harness::bytes_of(frame);
        e.frame_sent();
        return bytes;
    }

    PullOwner oa, ob;
    std::unique_ptr<Engine> a, b;
    std::vector<uint8_t> sink = std::vector<uint8_t>(1 << 20, 0xee);
};

TEST_F(Pulls, ALargeWriteIsOneFrameAndCompletesOnlyOnceThePeerCopiedIt) {
    auto src = pattern(300000, 3);
    WorkRequest wr = write_of(7, src, 1000);
    // Three pieces: the descriptor names each.
    wr.sge[0] = LocalSpan{src.data(), 1000};
    wr.sge[1] = LocalSpan{src.data() + 1000, 0};
    wr.sge[2] = LocalSpan{src.data() + 1000, src.size() - 1000};
    wr.num_sge = 3;
    ASSERT_OK(a->post(wr));
    EXPECT_EQ(pump(*a, *b), 1u) << "a pull is one frame, whatever the message's size";
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(ob.pulls, 1u);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), sink.begin() + 1000)) << "the peer copied every byte in place";
    EXPECT_EQ(sink[999], 0xee) << "nothing before the target";
    EXPECT_EQ(sink[1000 + src.size()], 0xee) << "nothing after it";
    EXPECT_TRUE(oa.completions.empty()) << "the Write may not complete before the peer copied it (its buffer)";
    EXPECT_TRUE(b->has_frame()) << "the acknowledgement is due";
    EXPECT_EQ(pump(*b, *a), 1u);
    ASSERT_EQ(oa.completions.size(), 1u) << "the acknowledgement completes the Write";
    EXPECT_EQ(oa.completions[0].wr_id, 7u);
    EXPECT_EQ(oa.completions[0].kind, Completion::Kind::write);
    EXPECT_EQ(oa.completions[0].byte_len, src.size());
    EXPECT_EQ(a->stats().tx_pulls, 1u);
    EXPECT_EQ(b->stats().rx_pulls, 1u);
    EXPECT_EQ(b->stats().rx_bytes, src.size());
    EXPECT_FALSE(a->failed());
}

TEST_F(Pulls, ALargeSendFillsTheReceiveAndCompletesBothEndsAsOnTheWire) {
    auto src = pattern(50000, 5);
    std::vector<uint8_t> dst(60000, 0xee);
    ob.post_receive(42, dst, 3);
    WorkRequest wr = wr_over(9, WorkType::send_se_inv, src);
    wr.inv_stag = kStag;
    ASSERT_OK(a->post(wr));
    settle(*a, *b);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(ob.pulls, 1u);
    ASSERT_EQ(ob.completions.size(), 1u);
    EXPECT_EQ(ob.completions[0].wr_id, 42u);
    EXPECT_EQ(ob.completions[0].byte_len, src.size());
    EXPECT_TRUE(ob.completions[0].solicited);
    EXPECT_TRUE(ob.completions[0].invalidated) << "Send with Invalidate keeps its invalidation as a pull";
    EXPECT_FALSE(ob.regions[kStag].valid);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
    EXPECT_EQ(dst[src.size()], 0xee);
    ASSERT_EQ(oa.completions.size(), 1u);
    EXPECT_EQ(oa.completions[0].kind, Completion::Kind::send);
    // The next Send's MSN follows the pulled one: a small Send after it is taken in order.
    auto small = pattern(100, 1);
    std::vector<uint8_t> dst2(100, 0);
    ob.post_receive(43, dst2);
    ASSERT_OK(a->post(wr_over(10, WorkType::send, small)));
    settle(*a, *b);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(dst2, small);
}

TEST_F(Pulls, CompletionsStayInOrderBehindAPull) {
    auto big = pattern(100000, 2);
    auto small = pattern(64, 4);
    std::vector<uint8_t> dst(64, 0);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(write_of(100, big)));
    ASSERT_OK(a->post(wr_over(101, WorkType::send, small)));
    EXPECT_EQ(pump(*a, *b), 2u);
    EXPECT_EQ(ob.completions.size(), 1u) << "the Send arrived after the pulled Write was placed";
    EXPECT_TRUE(oa.completions.empty()) << "the small Send, sent, waits for the Write before it";
    pump(*b, *a);
    ASSERT_EQ(oa.completions.size(), 2u);
    EXPECT_EQ(oa.completions[0].wr_id, 100u);
    EXPECT_EQ(oa.completions[1].wr_id, 101u);
}

TEST_F(Pulls, SmallMessagesAndPeersThatTakeNoPullsGetTheBytesThemselves) {
    auto small = pattern(kPullMin - 1, 6);
    ASSERT_OK(a->post(write_of(1, small)));
    settle(*a, *b);
    EXPECT_EQ(ob.pulls, 0u) << "below pull_min the bytes go through the stream";
    oa.takes = false;
    auto big = pattern(200000, 8);
    ASSERT_OK(a->post(write_of(2, big)));
    settle(*a, *b);
    EXPECT_EQ(ob.pulls, 0u) << "a peer that takes no pulls gets none";
    EXPECT_TRUE(std::equal(big.begin(), big.end(), sink.begin()));
    EXPECT_EQ(oa.completions.size(), 2u);
    EXPECT_EQ(a->stats().tx_pulls, 0u);
}

// What a pull's receiver finds wrong: the Terminate the same message's bytes would have met, after the
// acknowledgement, so that the sender completes its request as it would on the wire and then meets the Terminate.
class BadPull : public Pulls {
protected:
    void expect_acked_then_terminate(TermCode code) {
        ASSERT_TRUE(b->failed());
        EXPECT_EQ(b->failure(), code) << term_name(b->failure()) << " instead of " << term_name(code);
        auto ack = next_bytes(*b);
        const Header h = decode_header(ack.data() + kMpaLengthLen);
        EXPECT_EQ(h.opcode, kPullAckOpcode) << "the acknowledgement goes before the Terminate";
        EXPECT_EQ(h.ddp_reserved, kDdpPull);
        a->receiver().feed(ack);
        auto term = next_bytes(*b);
        EXPECT_EQ(decode_header(term.data() + kMpaLengthLen).op(), Opcode::terminate);
        a->receiver().feed(term);
        ASSERT_TRUE(oa.terminate.has_value()) << "the sender meets the Terminate";
        EXPECT_EQ(oa.terminate->code, code);
        EXPECT_FALSE(b->has_frame()) << "nothing after the Terminate";
    }
    // Sends one pull with the descriptor @p desc (the header of a Write to STag @p stag at 0).
    void inject_pull(const std::vector<uint8_t> &desc, uint32_t stag = kStag) {
        Header h;
        h.tagged = true;
        h.opcode = static_cast<uint8_t>(Opcode::rdma_write);
        h.stag = stag;
        h.ddp_reserved = kDdpPull;
        iovec v{const_cast<uint8_t *>(desc.data()), desc.size()};
        static TxFrame frame;
        peer.build(h, {}, std::span<const iovec>(&v, 1), frame);
        b->receiver().feed(harness::bytes_of(frame));
    }
    std::vector<uint8_t> descriptor(uint32_t total, std::initializer_list<std::pair<const void *, uint32_t>> pieces,
                                    uint32_t count = UINT32_MAX) {
        std::vector<uint8_t> d(8 + 12 * pieces.size());
        be::put32(d.data(), total);
        be::put32(d.data() + 4, count == UINT32_MAX ? static_cast<uint32_t>(pieces.size()) : count);
        size_t i = 0;
        for (auto [p, len] : pieces) {
            be::put64(d.data() + 8 + 12 * i, reinterpret_cast<uintptr_t>(p));
            be::put32(d.data() + 16 + 12 * i, len);
            ++i;
        }
        return d;
    }
    Transmitter peer{FramingOptions{false, false}};
};

TEST_F(BadPull, AForgedStagIsTheWiresInvalidStag) {
    auto src = pattern(100000, 1);
    ASSERT_OK(a->post(write_of(3, src, 0, 0x999)));
    pump(*a, *b);
    EXPECT_EQ(ob.pulls, 0u) << "nothing is copied for a message that fails its checks";
    expect_acked_then_terminate(term::kDdpTaggedInvalidStag);
    ASSERT_EQ(oa.completions.size(), 1u) << "the Write completes at its sender, as on the wire";
}

TEST_F(BadPull, AWriteBeyondTheRegionIsTheWiresBaseAndBounds) {
    auto src = pattern(100000, 1);
    ASSERT_OK(a->post(write_of(3, src, sink.size() - src.size() + 1)));
    pump(*a, *b);
    EXPECT_EQ(ob.pulls, 0u);
    expect_acked_then_terminate(term::kDdpTaggedBaseBounds);
    EXPECT_TRUE(std::all_of(sink.begin(), sink.end(), [](uint8_t x) { return x == 0xee; })) << "nothing placed";
}

TEST_F(BadPull, ASendLargerThanTheReceiveIsTheWiresMessageTooLong) {
    auto src = pattern(100000, 1);
    std::vector<uint8_t> dst(99999, 0);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(4, WorkType::send, src)));
    pump(*a, *b);
    expect_acked_then_terminate(term::kDdpMessageTooLong);
}

TEST_F(BadPull, ASendWithNoReceivePostedIsTheWiresNoBuffer) {
    auto src = pattern(100000, 1);
    ASSERT_OK(a->post(wr_over(4, WorkType::send, src)));
    pump(*a, *b);
    expect_acked_then_terminate(term::kDdpNoBuffer);
}

TEST_F(BadPull, DescriptorsThatDoNotAddUpAreACatastrophicStreamError) {
    auto src = pattern(100, 1);
    const std::vector<std::vector<uint8_t>> bad = {
        descriptor(100, {{src.data(), 99}}),                   // the pieces hold less than the message
        descriptor(0, {}),                                      // no pieces
        descriptor(100, {{src.data(), 100}}, 2),                // a count beyond the descriptor
        descriptor(900, {{src.data(), 100}, {src.data(), 100}, {src.data(), 100}, {src.data(), 100},
                         {src.data(), 100}, {src.data(), 100}, {src.data(), 100}, {src.data(), 100},
                         {src.data(), 100}}),                   // more pieces than a request may have
    };
    for (size_t i = 0; i < bad.size(); ++i) {
        SCOPED_TRACE(i);
        SetUp();
        a = std::make_unique<Engine>(oa, config());  // a sent nothing: it takes the acknowledgement as unexpected
        inject_pull(bad[i]);
        ASSERT_TRUE(b->failed());
        EXPECT_EQ(b->failure(), term::kRdmapCatastrophicStream) << term_name(b->failure());
        EXPECT_EQ(ob.pulls, 0u);
    }
}

TEST_F(BadPull, APullThatCannotBeCopiedIsALocalCatastrophicError) {
    auto src = pattern(100000, 1);
    ob.fail = true;  // the sender's memory is gone (its process died, or it unmapped the buffer)
    ASSERT_OK(a->post(write_of(3, src)));
    pump(*a, *b);
    expect_acked_then_terminate(term::kRdmapLocalCatastrophic);
}

TEST_F(BadPull, AnAcknowledgementOfPullsNeverSentIsATerminate) {
    // b sent no pull: an acknowledgement to it is not one it asked for. (A side that sent none and takes none treats
    // the bit as reserved and meets the opcode as unexpected anyway.)
    Header h;
    h.ddp_reserved = kDdpPull;
    h.opcode = kPullAckOpcode;
    h.msn = 1;
    static TxFrame frame;
    peer.build(h, {}, {}, frame);
    b->receiver().feed(harness::bytes_of(frame));
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kRdmapUnexpectedOpcode) << term_name(b->failure());
}

TEST_F(BadPull, ASideThatTakesNoPullsRefusesOne) {
    EngineConfig c = config();
    c.accept_pull = false;
    b = std::make_unique<Engine>(ob, c);
    ob.add_region(kStag, sink, RI_ACCESS_REMOTE_WRITE);
    auto src = pattern(100, 1);
    // As a plain Write the descriptor would be 20 bytes of payload; a side that takes no pulls reads the bit as
    // reserved (RFC 5041 asks it to ignore it) and places those bytes within the region's bounds, nothing more.
    inject_pull(descriptor(100, {{src.data(), 100}}));
    EXPECT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(ob.pulls, 0u) << "nothing is read from the sender";
    EXPECT_EQ(sink[20], 0xee) << "no more than the segment's own bytes are placed";
}

}  // namespace
