// The DDP/RDMAP engine between two instances connected in memory: every operation with every byte checked, and
// every invalid inbound case with the Terminate it must produce.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "engine_harness.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;
using harness::Owner;
using harness::settle;
using harness::wr_over;

using harness::pattern;

class EnginePair : public ::testing::Test {
protected:
    EngineConfig config(bool crc = true) {
        return harness::pair_config(crc);
    }
    void make(const EngineConfig &ca, const EngineConfig &cb) {
        a = std::make_unique<Engine>(oa, ca);
        b = std::make_unique<Engine>(ob, cb);
    }
    void SetUp() override { make(config(), config()); }

    Owner oa, ob;
    std::unique_ptr<Engine> a, b;
};

TEST_F(EnginePair, SendSingleAndMultiSegment) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{1436}, size_t{1437}, size_t{100000}}) {
        SCOPED_TRACE(size);
        oa.completions.clear();
        ob.completions.clear();
        auto src = pattern(size, 3);
        std::vector<uint8_t> dst(size + 64, 0xee);
        ob.post_receive(77, dst, size > 100 ? 3 : 1);
        ASSERT_OK(a->post(wr_over(5, WorkType::send, src)));
        settle(*a, *b);
        ASSERT_FALSE(b->failed()) << term_name(b->failure());
        ASSERT_EQ(ob.completions.size(), 1u);
        EXPECT_EQ(ob.completions[0].wr_id, 77u);
        EXPECT_EQ(ob.completions[0].kind, Completion::Kind::recv);
        EXPECT_EQ(ob.completions[0].byte_len, size);
        EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
        EXPECT_EQ(dst[size], 0xee);  // nothing past the message
        ASSERT_EQ(oa.completions.size(), 1u);
        EXPECT_EQ(oa.completions[0].wr_id, 5u);
        EXPECT_EQ(oa.completions[0].kind, Completion::Kind::send);
    }
}

TEST_F(EnginePair, WriteThenReadBackMultiSegment) {
    auto src = pattern(300000, 9);
    std::vector<uint8_t> target(400000, 0);
    ob.add_region(0x1200, target, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE, 1, 0x10000);
    WorkRequest w = wr_over(1, WorkType::write, src);
    w.remote_stag = 0x1200;
    w.remote_to = 0x10000 + 1000;
    ASSERT_OK(a->post(w));
    settle(*a, *b, 999);  // odd chunk sizes: segments arrive split anywhere
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_TRUE(std::equal(src.begin(), src.end(), target.begin() + 1000));
    EXPECT_EQ(target[999], 0);
    EXPECT_TRUE(ob.completions.empty());  // a Write completes only at the writer
    ASSERT_EQ(oa.completions.size(), 1u);
    EXPECT_EQ(oa.completions[0].kind, Completion::Kind::write);

    std::vector<uint8_t> back(300000, 0);
    oa.add_region(0x3400, back, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r;
    r.wr_id = 2;
    r.type = WorkType::read;
    r.remote_stag = 0x1200;
    r.remote_to = 0x10000 + 1000;
    r.local_stag = 0x3400;
    r.local_to = 0;
    r.length = 300000;
    ASSERT_OK(a->post(r));
    settle(*a, *b);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    EXPECT_EQ(back, src);
    ASSERT_EQ(oa.completions.size(), 2u);
    EXPECT_EQ(oa.completions[1].kind, Completion::Kind::read);
    EXPECT_EQ(oa.completions[1].byte_len, 300000u);
}

// The sender follows a growing MSS in the middle of a message: the FPDUs after set_emss() are larger, the receiver
// places every byte, and a Send and a Read Response framed afterwards use the new size too.
TEST_F(EnginePair, FpdusFollowTheEmssMidMessage) {
    EXPECT_EQ(a->mulpdu(), 1454u);
    auto src = pattern(200000, 5);
    std::vector<uint8_t> target(200000, 0);
    ob.add_region(0x77, target, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE);
    WorkRequest w = wr_over(1, WorkType::write, src);
    w.remote_stag = 0x77;
    static TxFrame frame;
    std::vector<size_t> sizes;
    auto move_one = [&] {
        if (!a->next_frame(frame)) return false;
        auto bytes = harness::bytes_of(frame);
        sizes.push_back(bytes.size());
        b->receiver().feed(bytes);
        a->frame_sent();
        return true;
    };
    ASSERT_OK(a->post(w));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(move_one());
    a->set_emss(32768);
    EXPECT_EQ(a->mulpdu(), mulpdu(32768, false));
    while (move_one()) {
    }
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(target, src);
    ASSERT_GE(sizes.size(), 5u);
    EXPECT_EQ(sizes[0], 1460u);  // length field, 1454 octets of ULPDU, CRC (no pad)
    EXPECT_EQ(sizes[3], kMpaLengthLen + a->mulpdu() + pad_len(a->mulpdu()) + kMpaCrcLen);
    EXPECT_EQ(sizes.size(), 3 + (200000 - 3 * (1454 - kTaggedHeaderLen) + a->mulpdu() - kTaggedHeaderLen - 1) /
                                    (a->mulpdu() - kTaggedHeaderLen));

    // Both limits hold whatever the MSS says: at least one payload octet, at most what the length field carries.
    a->set_emss(1);
    EXPECT_EQ(a->mulpdu(), kUntaggedHeaderLen + 4);
    a->set_emss(1u << 20);
    EXPECT_EQ(a->mulpdu(), kMaxUlpduLen);

    // b answers a Read in FPDUs for its own MSS; a's Send goes in the largest.
    b->set_emss(9000);
    std::vector<uint8_t> back(200000, 0);
    oa.add_region(0x88, back, RI_ACCESS_LOCAL_WRITE);
    ASSERT_OK(a->post(harness::read_of(2, 0x77, 0x88, 200000)));
    std::vector<uint8_t> dst(200000, 0);
    ob.post_receive(3, dst);
    ASSERT_OK(a->post(wr_over(4, WorkType::send, src)));
    const uint64_t b_frames = b->stats().tx_fpdus, a_frames = a->stats().tx_fpdus;
    settle(*a, *b);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(back, src);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(b->stats().tx_fpdus - b_frames, (200000 + mulpdu(9000, false) - kTaggedHeaderLen - 1) /
                                                  (mulpdu(9000, false) - kTaggedHeaderLen));
    EXPECT_EQ(a->stats().tx_fpdus - a_frames, 1 + 4u);  // the Read Request, then 200000 octets in 4 Send FPDUs
}

TEST_F(EnginePair, OrdLimitsOutstandingReadsAndAllComplete) {
    std::vector<uint8_t> remote = pattern(4096, 1);
    ob.add_region(7, remote, RI_ACCESS_REMOTE_READ);
    std::vector<std::vector<uint8_t>> sinks(10, std::vector<uint8_t>(512));
    for (size_t i = 0; i < sinks.size(); ++i) {
        oa.add_region(static_cast<uint32_t>(100 + i), sinks[i], RI_ACCESS_LOCAL_WRITE);
        WorkRequest r;
        r.wr_id = i;
        r.type = WorkType::read;
        r.remote_stag = 7;
        r.remote_to = i * 256;
        r.local_stag = static_cast<uint32_t>(100 + i);
        r.length = 512;
        ASSERT_OK(a->post(r));
    }
    settle(*a, *b);
    ASSERT_FALSE(a->failed());
    ASSERT_FALSE(b->failed());
    ASSERT_EQ(oa.completions.size(), 10u);
    for (size_t i = 0; i < sinks.size(); ++i) {
        EXPECT_EQ(oa.completions[i].wr_id, i);  // in order
        EXPECT_TRUE(std::equal(sinks[i].begin(), sinks[i].end(), remote.begin() + static_cast<long>(i * 256)));
    }
}

TEST_F(EnginePair, SendWithInvalidateAndSolicited) {
    std::vector<uint8_t> mem(64);
    ob.add_region(0x55, mem, RI_ACCESS_REMOTE_WRITE);
    auto src = pattern(32, 1);
    std::vector<uint8_t> dst(32);
    ob.post_receive(1, dst);
    ob.post_receive(2, dst);
    WorkRequest s = wr_over(9, WorkType::send_se_inv, src);
    s.inv_stag = 0x55;
    ASSERT_OK(a->post(s));
    ASSERT_OK(a->post(wr_over(10, WorkType::send_se, src)));
    settle(*a, *b);
    ASSERT_EQ(ob.completions.size(), 2u);
    EXPECT_TRUE(ob.completions[0].invalidated);
    EXPECT_EQ(ob.completions[0].inv_stag, 0x55u);
    EXPECT_TRUE(ob.completions[0].solicited);
    EXPECT_FALSE(ob.completions[1].invalidated);
    EXPECT_TRUE(ob.completions[1].solicited);
    EXPECT_FALSE(ob.regions[0x55].valid);
}

TEST_F(EnginePair, SendQueueBackPressure) {
    auto src = pattern(8, 1);
    for (int i = 0; i < 16; ++i) ASSERT_OK(a->post(wr_over(static_cast<uint64_t>(i), WorkType::send, src)));
    EXPECT_STATUS(a->post(wr_over(99, WorkType::send, src)), RI_EAGAIN);
    WorkRequest too_many = wr_over(1, WorkType::send, src);
    too_many.num_sge = kMaxSge + 1;
    EXPECT_STATUS(a->post(too_many), RI_EINVAL);
}

TEST_F(EnginePair, PeerToPeerWriteRtrHoldsResponderUntilItArrives) {
    EngineConfig ini = config(), res = config();
    ini.rtr_send = kRtrWrite;
    res.rtr_expect = ini.rtr_send;
    make(ini, res);
    auto src = pattern(10, 2);
    std::vector<uint8_t> dst(10);
    oa.post_receive(1, dst);
    ASSERT_OK(b->post(wr_over(3, WorkType::send, src)));
    TxFrame frame;
    EXPECT_FALSE(b->next_frame(frame));  // the responder may not send yet
    settle(*a, *b);
    ASSERT_FALSE(a->failed());
    ASSERT_FALSE(b->failed());
    ASSERT_EQ(oa.completions.size(), 1u);
    EXPECT_EQ(dst, src);
    EXPECT_TRUE(ob.completions.size() == 1u && ob.completions[0].kind == Completion::Kind::send);
    // The initiator's own first Send after its RTR carries MSN 1.
    std::vector<uint8_t> dst2(10);
    ob.post_receive(2, dst2);
    ASSERT_OK(a->post(wr_over(4, WorkType::send, src)));
    settle(*a, *b);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(dst2, src);
}

TEST_F(EnginePair, PeerToPeerSendRtrConsumesNoReceive) {
    EngineConfig ini = config(), res = config();
    ini.rtr_send = kRtrSend;
    res.rtr_expect = ini.rtr_send;
    make(ini, res);
    auto src = pattern(7, 2);
    std::vector<uint8_t> dst(7);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(3, WorkType::send, src)));
    settle(*a, *b);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    ASSERT_EQ(ob.completions.size(), 1u);
    EXPECT_EQ(ob.completions[0].byte_len, 7u);
    EXPECT_EQ(dst, src);
}

TEST_F(EnginePair, PeerToPeerReadRtrIsAnswered) {
    EngineConfig ini = config(), res = config();
    ini.rtr_send = kRtrRead;
    res.rtr_expect = ini.rtr_send;
    make(ini, res);
    settle(*a, *b);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_TRUE(oa.completions.empty());  // the RTR completes nothing visible
    EXPECT_EQ(a->outstanding(), 0u);
    // And the stream works afterwards.
    auto src = pattern(5, 1);
    std::vector<uint8_t> dst(5);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(1, WorkType::send, src)));
    settle(*a, *b);
    EXPECT_EQ(dst, src);
}

// has_frame() is the owner's check before a transmit pass: false must mean next_frame() builds nothing, and every
// kind of frame that may be due (a request, a Read Response, the RTR, a nudge, a Terminate) makes it true.
TEST_F(EnginePair, HasFrameIsFalseOnlyWhenThereIsNothingToBuild) {
    static TxFrame f;  // large: keep it off the stack
    const auto nothing = [](Engine &e) { return !e.has_frame() && !e.next_frame(f); };
    EXPECT_TRUE(nothing(*a));
    EXPECT_TRUE(nothing(*b));

    // A Send: due at the sender; the receiver has nothing to answer.
    auto src = pattern(3000, 4);
    std::vector<uint8_t> dst(3000);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(1, WorkType::send, src)));
    EXPECT_TRUE(a->has_frame());
    ASSERT_GT(harness::pump(*a, *b), 1u);  // several segments
    EXPECT_TRUE(nothing(*a));
    EXPECT_TRUE(nothing(*b));
    ASSERT_EQ(ob.completions.size(), 1u);

    // A Read: the request at the reader, then the response at the responder.
    std::vector<uint8_t> theirs = pattern(5000, 6), mine(5000);
    ob.add_region(0x55, theirs, RI_ACCESS_REMOTE_READ);
    oa.add_region(0x66, mine, RI_ACCESS_LOCAL_WRITE);
    ASSERT_OK(a->post(harness::read_of(2, 0x55, 0x66, 5000)));
    EXPECT_TRUE(a->has_frame());
    ASSERT_EQ(harness::pump(*a, *b), 1u);
    EXPECT_TRUE(nothing(*a));
    EXPECT_TRUE(b->has_frame()) << "a Read Response is due";
    ASSERT_GT(harness::pump(*b, *a), 1u);
    EXPECT_TRUE(nothing(*b));
    EXPECT_EQ(mine, theirs);

    // A nudge.
    ASSERT_TRUE(a->nudge());
    EXPECT_TRUE(a->has_frame());
    ASSERT_EQ(harness::pump(*a, *b), 1u);
    EXPECT_TRUE(nothing(*a));

    // A Send with no receive posted: the receiver fails, and its Terminate is due until it is built.
    ASSERT_OK(a->post(wr_over(3, WorkType::send, src)));
    (void)harness::pump(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_TRUE(b->has_frame()) << "the Terminate is due";
    ASSERT_EQ(harness::pump(*b, *a), 1u);
    EXPECT_TRUE(b->terminate_sent());
    EXPECT_TRUE(nothing(*b));
}

// next_frame(frame, true) leaves the CRC of a Send, Write or Read Response segment of kDeferCrcMin bytes or more to
// finish_crc(), and of nothing else (a short tail segment, a Read Request): with every CRC finished, the peer takes
// each message whole.
TEST_F(EnginePair, ADeferredCrcIsLeftOnlyOnLargeSendWriteAndReadResponseSegments) {
    EngineConfig big = config();
    big.mulpdu = 65535;
    make(big, big);
    auto src = pattern(70000, 8);
    std::vector<uint8_t> target(70000), dst(70000), back(70000);
    ob.add_region(0x91, target, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
    oa.add_region(0x92, back, RI_ACCESS_LOCAL_WRITE);
    ob.post_receive(7, dst);
    WorkRequest w = wr_over(1, WorkType::write, src);
    w.remote_stag = 0x91;
    ASSERT_OK(a->post(w));
    ASSERT_OK(a->post(wr_over(2, WorkType::send, src)));
    ASSERT_OK(a->post(harness::read_of(3, 0x91, 0x92, 70000)));
    static TxFrame f;  // large: keep it off the stack
    std::vector<std::pair<size_t, bool>> seen;  // payload-carrying frames: bytes, CRC left pending
    const auto move = [&](Engine &from, Engine &to, bool defer) {
        while (from.next_frame(f, defer)) {
            seen.emplace_back(f.bytes, f.crc_pending);
            finish_crc(f);
            to.receiver().feed(harness::bytes_of(f));
            from.frame_sent();
        }
    };
    move(*a, *b, true);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    // The Write and the Send: a large first segment each (pending), a short second (not); then the Read Request.
    ASSERT_EQ(seen.size(), 5u);
    EXPECT_TRUE(seen[0].second);
    EXPECT_FALSE(seen[1].second);
    EXPECT_TRUE(seen[2].second);
    EXPECT_FALSE(seen[3].second);
    EXPECT_FALSE(seen[4].second);
    seen.clear();
    move(*b, *a, true);  // the Read Response: a large copy (pending), then a short one
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_TRUE(seen[0].second);
    EXPECT_FALSE(seen[1].second);
    EXPECT_EQ(target, src);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(back, src);
    ASSERT_EQ(ob.completions.size(), 1u);
    EXPECT_EQ(ob.completions[0].wr_id, 7u);
    ASSERT_EQ(oa.completions.size(), 3u);
}

// The RTR: due at the initiator from the start; the responder sends nothing before it arrives, even with work queued.
TEST_F(EnginePair, HasFrameFollowsTheRtr) {
    EngineConfig ini = config(), res = config();
    ini.rtr_send = kRtrWrite;
    res.rtr_expect = kRtrWrite;
    make(ini, res);
    static TxFrame f;
    EXPECT_TRUE(a->has_frame()) << "the RTR is due";
    auto src = pattern(100, 2);
    std::vector<uint8_t> dst(100);
    oa.post_receive(1, dst);
    ASSERT_OK(b->post(wr_over(1, WorkType::send, src)));
    EXPECT_FALSE(b->has_frame()) << "the responder waits for the RTR";
    EXPECT_FALSE(b->next_frame(f));
    ASSERT_EQ(harness::pump(*a, *b), 1u);
    EXPECT_FALSE(a->has_frame());
    EXPECT_TRUE(b->has_frame()) << "the RTR came: the queued Send goes";
    ASSERT_EQ(harness::pump(*b, *a), 1u);
    EXPECT_EQ(dst, src);
}

TEST_F(EnginePair, WrongRtrIsATerminateNotAHang) {
    EngineConfig ini = config(), res = config();
    ini.rtr_send = kRtrRead;   // the initiator sends a zero-length Read...
    res.rtr_expect = kRtrWrite;  // ...but a Write was agreed
    make(ini, res);
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kLlpNoMatchingRtr);
    EXPECT_TRUE(b->terminate_sent());
    ASSERT_TRUE(oa.terminate.has_value());  // the initiator got the Terminate
    EXPECT_EQ(oa.terminate->code, term::kLlpNoMatchingRtr);
}

TEST_F(EnginePair, AbortSendsTheOwnersTerminateWithoutHeaders) {
    // Half of a multi-segment Send is out when the owner terminates: the Terminate follows, then nothing.
    auto src = pattern(4000, 1);
    std::vector<uint8_t> dst(4000);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(7, WorkType::send, src)));
    static TxFrame frame;
    ASSERT_TRUE(a->next_frame(frame));
    a->frame_sent();
    a->abort(term::kRdmapLocalCatastrophic);
    EXPECT_TRUE(a->failed());
    EXPECT_EQ(a->failure(), term::kRdmapLocalCatastrophic);
    EXPECT_FALSE(a->post(wr_over(8, WorkType::send, src)).ok());
    settle(*a, *b);
    EXPECT_TRUE(a->terminate_sent());
    ASSERT_TRUE(ob.terminate.has_value());
    EXPECT_EQ(ob.terminate->code, term::kRdmapLocalCatastrophic);
    EXPECT_EQ(ob.terminate->hdrct, 0);
    EXPECT_TRUE(oa.completions.empty());  // the Send never completed
    a->abort(term::kLlpCrcError);          // no second Terminate
    EXPECT_EQ(a->failure(), term::kRdmapLocalCatastrophic);
    EXPECT_FALSE(a->next_frame(frame));
}

TEST_F(EnginePair, SendBeforeRtrIsATerminate) {
    EngineConfig ini = config(), res = config();
    res.rtr_expect = kRtrWrite;  // the initiator forgets its RTR and sends at once
    make(ini, res);
    auto src = pattern(4, 1);
    std::vector<uint8_t> dst(4);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(1, WorkType::send, src)));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kLlpNoMatchingRtr);
    EXPECT_TRUE(ob.completions.empty());
}

// What a consumer polling the last byte of a buffer would have seen while place_watched() placed a message into it.
struct Watch {
    std::vector<size_t> copies;  // the length of every copy that wrote into the buffer, in order
    bool seen = false;           // the last byte took its new value
    bool tail_alone = false;     // ... in a copy of that one byte
    bool whole_when_seen = false;  // ... when every byte before it already held its new value
};

// Moves every frame @p from has into @p to as a provider's reads would: through next_buffer() and advance(), at most
// @p chunk stream bytes a read, each placement span written by a copy of its own. After each copy it looks at
// @p watched as a consumer polling its last byte for @p want's would.
Watch place_watched(Engine &from, Engine &to, const std::vector<uint8_t> &watched, const std::vector<uint8_t> &want,
                    size_t chunk = SIZE_MAX) {
    static TxFrame frame;  // large: keep it off the stack
    Watch w;
    const uint8_t *lo = watched.data(), *hi = watched.data() + watched.size();
    while (from.next_frame(frame)) {
        const auto bytes = harness::bytes_of(frame);
        size_t off = 0;
        while (off < bytes.size()) {
            std::span<uint8_t> dst = to.receiver().next_buffer();
            if (dst.empty()) return w;  // failed: the caller's checks say so
            const size_t n = std::min({dst.size(), bytes.size() - off, chunk});
            const bool before = watched.back() == want.back();
            std::memcpy(dst.data(), bytes.data() + off, n);
            if (dst.data() >= lo && dst.data() < hi) w.copies.push_back(n);
            if (!before && !w.seen && watched.back() == want.back()) {
                w.seen = true;
                w.tail_alone = n == 1 && dst.data() == &watched.back();
                w.whole_when_seen = std::equal(want.begin(), want.end() - 1, watched.begin());
            }
            to.receiver().advance(n);
            off += n;
        }
        from.frame_sent();
    }
    return w;
}

// A Write's last byte is placed by a copy of its own after every other byte of the Write (the engine hands it out
// as a target of its own, after a store fence), whatever the sizes, segmentation, markers and read sizes; only the
// last segment is split, and only once.
TEST_F(EnginePair, AWritesLastByteIsPlacedAloneAfterAllTheOthers) {
    for (const bool markers : {false, true}) {
        for (const size_t size : {size_t{1}, size_t{2}, size_t{8}, size_t{1438}, size_t{1439}, size_t{65536},
                                  size_t{300001}}) {
            for (const size_t chunk : {SIZE_MAX, size_t{999}, size_t{7}}) {
                if (chunk == 7 && size > 70000) continue;  // byte-sized reads of a large Write add nothing
                SCOPED_TRACE(testing::Message() << "markers " << markers << ", " << size << " B, reads of " << chunk);
                EngineConfig c = config();
                c.rx.markers = c.tx.markers = markers;
                make(c, c);
                auto src = pattern(size, 11);
                src[size - 1] = 0xa5;
                std::vector<uint8_t> target(size, 0);
                ob.add_region(0x42, target, RI_ACCESS_REMOTE_WRITE);
                WorkRequest w = wr_over(1, WorkType::write, src);
                w.remote_stag = 0x42;
                ASSERT_OK(a->post(w));
                const Watch seen = place_watched(*a, *b, target, src, chunk);
                ASSERT_FALSE(b->failed()) << term_name(b->failure());
                EXPECT_EQ(target, src);
                EXPECT_TRUE(seen.seen);
                EXPECT_TRUE(seen.tail_alone);
                EXPECT_TRUE(seen.whole_when_seen);
                ASSERT_FALSE(seen.copies.empty());
                EXPECT_EQ(seen.copies.back(), 1u);
                if (chunk == SIZE_MAX && !markers) {
                    // Unsplit reads: one copy per segment, and one more for the last byte unless the last segment
                    // carries that byte alone.
                    const size_t per = a->mulpdu() - kTaggedHeaderLen;
                    const size_t segments = (size + per - 1) / per;
                    const size_t last_segment = size - (segments - 1) * per;
                    EXPECT_EQ(seen.copies.size(), segments + (last_segment > 1 ? 1 : 0));
                }
            }
        }
    }
}

// The same for a Read Response at the requester; a Send's payload is not split (its receiver learns of it from a
// completion, which comes after the whole message).
TEST_F(EnginePair, AReadResponsesLastByteIsPlacedLastAndASendIsNotSplit) {
    auto src = pattern(5000, 3);
    src.back() = 0x5a;
    ob.add_region(0x10, src, RI_ACCESS_REMOTE_READ);
    std::vector<uint8_t> sink(5000, 0);
    oa.add_region(0x20, sink, RI_ACCESS_LOCAL_WRITE);
    ASSERT_OK(a->post(harness::read_of(1, 0x10, 0x20, 5000)));
    ASSERT_EQ(harness::pump(*a, *b), 1u);  // the Read Request
    const Watch seen = place_watched(*b, *a, sink, src);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    EXPECT_EQ(sink, src);
    EXPECT_TRUE(seen.tail_alone);
    EXPECT_TRUE(seen.whole_when_seen);
    ASSERT_EQ(oa.completions.size(), 1u);
    EXPECT_EQ(oa.completions[0].kind, Completion::Kind::read);

    auto msg = pattern(8, 4);
    msg.back() = 0x77;
    std::vector<uint8_t> dst(8, 0);
    ob.post_receive(9, dst);
    ASSERT_OK(a->post(wr_over(2, WorkType::send, msg)));
    const Watch sent = place_watched(*a, *b, dst, msg);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(dst, msg);
    EXPECT_EQ(sent.copies, std::vector<size_t>{8});
}

TEST(Opcodes, TableMatchesRfc5040) {
    EXPECT_TRUE(opcode_info(0x0).tagged);
    EXPECT_TRUE(opcode_info(0x2).tagged);
    EXPECT_EQ(opcode_info(0x1).queue, Queue::read_request);
    EXPECT_EQ(opcode_info(0x7).queue, Queue::terminate);
    EXPECT_TRUE(opcode_info(0x6).send && opcode_info(0x6).solicited && opcode_info(0x6).invalidate);
    EXPECT_FALSE(opcode_info(0x4).solicited);
    for (uint8_t op = 8; op < 12; ++op) EXPECT_TRUE(opcode_info(op).rfc7306);  // rfc7306_test.cpp
    for (uint8_t op = 12; op < 16; ++op) EXPECT_FALSE(opcode_info(op).valid);
}

TEST_F(EnginePair, NoMarkersOneWayMarkersOtherWay) {
    EngineConfig ca = config(), cb = config();
    ca.tx.markers = true;  // a sends markers, b expects them
    cb.rx.markers = true;
    make(ca, cb);
    auto src = pattern(50000, 4);
    std::vector<uint8_t> dst(50000);
    ob.post_receive(1, dst);
    ASSERT_OK(a->post(wr_over(1, WorkType::send, src)));
    settle(*a, *b, 700);
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_EQ(dst, src);
}

// ---------------------------------------------------------------------------------------------------------------
// Invalid inbound segments: a raw transmitter plays a misbehaving peer; the engine under test must stop with the
// right code and send a Terminate carrying the right headers, placing nothing outside registered memory.

class BadPeer : public ::testing::Test {
protected:
    void SetUp() override {
        EngineConfig c;
        c.pd = 1;
        c.rx.crc = c.tx.crc = true;
        c.ird = 2;
        c.ord = 2;
        engine = std::make_unique<Engine>(owner, c);
        owner.add_region(0x100, mem, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE);
        owner.add_region(0x200, ro, RI_ACCESS_REMOTE_READ);
        owner.add_region(0x300, other_pd, RI_ACCESS_REMOTE_WRITE, /*pd=*/2);
    }
    // Sends one segment from the bad peer.
    void inject(const Header &h, std::span<const uint8_t> control = {}, size_t payload = 0) {
        std::vector<uint8_t> data(payload, 0x5a);
        iovec v{data.data(), data.size()};
        static TxFrame frame;
        peer.build(h, control, std::span<const iovec>(&v, payload > 0 ? 1 : 0), frame);
        auto b = harness::bytes_of(frame);
        engine->receiver().feed(b);
    }
    // The Terminate the engine sends back, decoded.
    Terminate terminate_sent() {
        static TxFrame frame;
        EXPECT_TRUE(engine->next_frame(frame));
        auto bytes = harness::bytes_of(frame);
        EXPECT_FALSE(engine->next_frame(frame));  // nothing after the Terminate
        Header h = decode_header(bytes.data() + kMpaLengthLen);
        EXPECT_EQ(h.op(), Opcode::terminate);
        EXPECT_EQ(h.qn, 2u);
        EXPECT_EQ(h.msn, 1u);
        size_t ulpdu = be::get16(bytes.data());
        Terminate t;
        EXPECT_TRUE(decode_terminate(
            std::span<const uint8_t>(bytes.data() + kMpaLengthLen + kUntaggedHeaderLen, ulpdu - kUntaggedHeaderLen),
            t));
        return t;
    }
    void expect_terminate(TermCode code, uint8_t hdrct) {
        ASSERT_TRUE(engine->failed());
        EXPECT_EQ(engine->failure(), code) << term_name(engine->failure()) << " instead of " << term_name(code);
        Terminate t = terminate_sent();
        EXPECT_EQ(t.code, code);
        EXPECT_EQ(t.hdrct, hdrct);
        EXPECT_TRUE(engine->terminate_sent());
        EXPECT_STATUS(engine->post(WorkRequest{}), RI_ECANCELED);
    }
    static Header write_to(uint32_t stag, uint64_t to) {
        Header h;
        h.tagged = true;
        h.opcode = static_cast<uint8_t>(Opcode::rdma_write);
        h.stag = stag;
        h.to = to;
        return h;
    }
    static Header send_msn(uint32_t msn, uint32_t mo = 0, bool last = true) {
        Header h;
        h.opcode = static_cast<uint8_t>(Opcode::send);
        h.msn = msn;
        h.mo = mo;
        h.last = last;
        return h;
    }

    Owner owner;
    std::vector<uint8_t> mem = std::vector<uint8_t>(4096, 0);
    std::vector<uint8_t> ro = std::vector<uint8_t>(4096, 0);
    std::vector<uint8_t> other_pd = std::vector<uint8_t>(4096, 0);
    std::unique_ptr<Engine> engine;
    Transmitter peer{FramingOptions{true, false}};
};

TEST_F(BadPeer, InvalidStag) {
    inject(write_to(0x999, 0), {}, 8);
    expect_terminate(term::kDdpTaggedInvalidStag, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, InvalidatedStag) {
    owner.regions[0x100].valid = false;
    inject(write_to(0x100, 0), {}, 8);
    expect_terminate(term::kDdpTaggedInvalidStag, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, BaseAndBoundsViolation) {
    inject(write_to(0x100, 4090), {}, 8);
    expect_terminate(term::kDdpTaggedBaseBounds, kTermHdrM | kTermHdrD);
    EXPECT_EQ(std::count(mem.begin(), mem.end(), 0x5a), 0);  // nothing placed
}

TEST_F(BadPeer, TaggedOffsetWrap) {
    inject(write_to(0x100, UINT64_MAX - 2), {}, 8);
    expect_terminate(term::kDdpTaggedToWrap, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, AccessRightsViolation) {
    inject(write_to(0x200, 0), {}, 8);
    expect_terminate(term::kRdmapAccessRights, kTermHdrM | kTermHdrD);
    EXPECT_EQ(std::count(ro.begin(), ro.end(), 0x5a), 0);
}

TEST_F(BadPeer, StagOfAnotherProtectionDomain) {
    inject(write_to(0x300, 0), {}, 8);
    expect_terminate(term::kDdpTaggedStagNotAssociated, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, InvalidMsn) {
    std::vector<uint8_t> buf(64);
    owner.post_receive(1, buf);
    inject(send_msn(5), {}, 8);
    expect_terminate(term::kDdpMsnRange, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, InvalidMo) {
    std::vector<uint8_t> buf(64);
    owner.post_receive(1, buf);
    EXPECT_EQ(engine->active_receive(), nullptr);
    inject(send_msn(1, 0, false), {}, 8);
    ASSERT_NE(engine->active_receive(), nullptr);  // taken, partly filled: the owner must flush it on failure
    EXPECT_EQ(engine->active_receive()->wr_id, 1u);
    inject(send_msn(1, 16), {}, 8);  // a gap: the second segment must start at 8
    expect_terminate(term::kDdpInvalidMo, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, NoReceiveBuffer) {
    inject(send_msn(1), {}, 8);
    expect_terminate(term::kDdpNoBuffer, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, MessageTooLong) {
    std::vector<uint8_t> buf(16, 0);
    std::vector<uint8_t> after(16, 0);
    owner.post_receive(1, buf);
    inject(send_msn(1), {}, 17);
    expect_terminate(term::kDdpMessageTooLong, kTermHdrM | kTermHdrD);
    EXPECT_EQ(std::count(buf.begin(), buf.end(), 0x5a), 0);
}

TEST_F(BadPeer, InvalidDdpVersion) {
    Header h = write_to(0x100, 0);
    h.ddp_version = 2;
    inject(h, {}, 8);
    expect_terminate(term::kDdpTaggedInvalidVersion, 0);
    Header u = send_msn(1);
    u.ddp_version = 0;
    SetUp();
    inject(u, {}, 8);
    expect_terminate(term::kDdpUntaggedInvalidVersion, 0);
}

TEST_F(BadPeer, InvalidRdmapVersion) {
    Header h = send_msn(1);
    h.rdmap_version = 2;
    inject(h, {}, 8);
    expect_terminate(term::kRdmapInvalidVersion, 0);
}

TEST_F(BadPeer, InvalidOpcode) {
    Header h = send_msn(1);
    h.opcode = 0xc;
    inject(h, {}, 8);
    expect_terminate(term::kRdmapUnexpectedOpcode, 0);
}

TEST_F(BadPeer, TaggedSendIsUnexpected) {
    Header h = write_to(0x100, 0);
    h.opcode = static_cast<uint8_t>(Opcode::send);
    inject(h, {}, 8);
    expect_terminate(term::kRdmapUnexpectedOpcode, 0);
}

TEST_F(BadPeer, UnsolicitedReadResponse) {
    Header h = write_to(0x100, 0);
    h.opcode = static_cast<uint8_t>(Opcode::read_response);
    inject(h, {}, 8);
    expect_terminate(term::kRdmapUnexpectedOpcode, 0);
}

TEST_F(BadPeer, InvalidQueueNumber) {
    Header h = send_msn(1);
    h.qn = 3;
    inject(h, {}, 8);
    expect_terminate(term::kDdpInvalidQn, kTermHdrM | kTermHdrD);
}

Header read_request(uint32_t msn) {
    Header h;
    h.opcode = static_cast<uint8_t>(Opcode::read_request);
    h.qn = 1;
    h.msn = msn;
    return h;
}

TEST_F(BadPeer, TooManyOutstandingReads) {
    uint8_t rr[kReadRequestLen];
    encode_read_request(ReadRequest{1, 0, 16, 0x100, 0}, rr);
    inject(read_request(1), rr);
    inject(read_request(2), rr);
    EXPECT_FALSE(engine->failed());
    inject(read_request(3), rr);  // IRD is 2 and nothing was answered yet
    expect_terminate(term::kDdpMsnRange, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, ReadRequestOfInvalidSourceCopiesTheRequest) {
    uint8_t rr[kReadRequestLen];
    encode_read_request(ReadRequest{1, 0, 16, 0x777, 0}, rr);
    inject(read_request(1), rr);
    ASSERT_TRUE(engine->failed());
    EXPECT_EQ(engine->failure(), term::kRdmapInvalidStag);
    Terminate t = terminate_sent();
    EXPECT_EQ(t.code, term::kRdmapInvalidStag);
    EXPECT_EQ(t.hdrct, kTermHdrM | kTermHdrD | kTermHdrR);
    EXPECT_EQ(decode_read_request(t.rdmap_header).src_stag, 0x777u);
    EXPECT_EQ(decode_header(t.ddp_header).msn, 1u);
    EXPECT_EQ(t.ddp_segment_length, kReadRequestLen);
}

TEST_F(BadPeer, ReadRequestBeyondTheSourceRegion) {
    uint8_t rr[kReadRequestLen];
    encode_read_request(ReadRequest{1, 0, 4097, 0x100, 0}, rr);
    inject(read_request(1), rr);
    expect_terminate(term::kRdmapBaseBounds, kTermHdrM | kTermHdrD | kTermHdrR);
}

TEST_F(BadPeer, ReadRequestWithoutReadRights) {
    owner.add_region(0x400, mem, RI_ACCESS_REMOTE_WRITE);
    uint8_t rr[kReadRequestLen];
    encode_read_request(ReadRequest{1, 0, 8, 0x400, 0}, rr);
    inject(read_request(1), rr);
    expect_terminate(term::kRdmapAccessRights, kTermHdrM | kTermHdrD | kTermHdrR);
}

TEST_F(BadPeer, SendWithInvalidateOfForeignStag) {
    std::vector<uint8_t> buf(64);
    owner.post_receive(1, buf);
    owner.regions[0x100].invalidatable = false;
    Header h = send_msn(1);
    h.opcode = static_cast<uint8_t>(Opcode::send_inv);
    h.inv_stag = 0x100;
    inject(h, {}, 8);
    expect_terminate(term::kRdmapCannotInvalidate, kTermHdrM | kTermHdrD);
}

TEST_F(BadPeer, CrcError) {
    Header h = write_to(0x100, 0);
    std::vector<uint8_t> data(8, 1);
    iovec v{data.data(), data.size()};
    static TxFrame frame;
    peer.build(h, {}, std::span<const iovec>(&v, 1), frame);
    auto b = harness::bytes_of(frame);
    b[b.size() - 1] ^= 1;
    engine->receiver().feed(b);
    expect_terminate(term::kLlpCrcError, 0);
}

TEST_F(BadPeer, PeerTerminateIsReportedAndNotAnswered) {
    Terminate t;
    t.code = term::kRdmapAccessRights;
    uint8_t payload[kTerminateMaxLen];
    size_t n = encode_terminate(t, payload);
    Header h;
    h.opcode = static_cast<uint8_t>(Opcode::terminate);
    h.qn = 2;
    h.msn = 1;
    inject(h, std::span<const uint8_t>(payload, n));
    ASSERT_TRUE(engine->failed());
    ASSERT_TRUE(owner.terminate.has_value());
    EXPECT_EQ(owner.terminate->code, term::kRdmapAccessRights);
    static TxFrame frame;
    EXPECT_FALSE(engine->next_frame(frame));
}

}  // namespace
