// The engine on foreign memory (the hwstub daemon's case): memory it reaches only through the owner's DMA. Every
// placement is checked byte for byte against the whole foreign memory, so a byte written where it does not belong
// fails the test; outbound frames are compared with the frames a local request produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "engine_harness.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;
using harness::ForeignOwner;
using harness::settle;

constexpr uint8_t kFill = 0xee;

using harness::pattern;

// Foreign memory as it must look: all kFill but @p data at @p offset.
std::vector<uint8_t> expected_memory(size_t size, size_t offset, std::span<const uint8_t> data) {
    std::vector<uint8_t> m(size, kFill);
    std::copy(data.begin(), data.end(), m.begin() + static_cast<long>(offset));
    return m;
}

// Every frame @p e has now, each marked sent.
std::vector<std::vector<uint8_t>> drain(Engine &e) {
    static TxFrame frame;  // large: keep it off the stack
    std::vector<std::vector<uint8_t>> out;
    while (e.next_frame(frame)) {
        out.push_back(harness::bytes_of(frame));
        e.frame_sent();
    }
    return out;
}

void feed_all(Engine &to, const std::vector<std::vector<uint8_t>> &frames) {
    for (const auto &f : frames) to.receiver().feed(f);
}

// The Terminate in frame bytes @p f (which must be one).
Terminate terminate_in(const std::vector<uint8_t> &f) {
    Header h = decode_header(f.data() + kMpaLengthLen);
    EXPECT_EQ(h.op(), Opcode::terminate);
    size_t ulpdu = be::get16(f.data());
    Terminate t;
    EXPECT_TRUE(decode_terminate(
        std::span<const uint8_t>(f.data() + kMpaLengthLen + kUntaggedHeaderLen, ulpdu - kUntaggedHeaderLen), t));
    return t;
}

EngineConfig config(bool crc = true, bool markers = false, bool foreign = false) {
    EngineConfig c = harness::pair_config(crc);
    c.rx.markers = c.tx.markers = markers;
    c.foreign_memory = foreign;
    return c;
}

class ForeignPair : public ::testing::Test {
protected:
    // a is the consumer-facing local side, b the engine whose memory is foreign.
    void make(const EngineConfig &ca, const EngineConfig &cb) {
        oa = std::make_unique<ForeignOwner>();
        ob = std::make_unique<ForeignOwner>();
        a = std::make_unique<Engine>(*oa, ca);
        b = std::make_unique<Engine>(*ob, cb);
    }
    void SetUp() override { make(config(), config(true, false, true)); }
    void TearDown() override {
        EXPECT_FALSE(oa->out_of_bounds);
        EXPECT_FALSE(ob->out_of_bounds);
    }

    std::unique_ptr<ForeignOwner> oa, ob;
    std::unique_ptr<Engine> a, b;
};

TEST_F(ForeignPair, WriteIntoForeignRegionIsPlacedByteExact) {
    struct Mode {
        bool crc, markers;
        size_t chunk, size;
    };
    const Mode modes[] = {{true, false, SIZE_MAX, 100000}, {false, false, SIZE_MAX, 100000},
                          {true, false, 1, 3000},          {true, true, 999, 100000},
                          {true, true, 1, 3000},           {false, true, 1, 3000}};
    for (const Mode &m : modes) {
        SCOPED_TRACE(testing::Message() << "crc " << m.crc << " markers " << m.markers << " chunk " << m.chunk
                                        << " size " << m.size);
        make(config(m.crc, m.markers), config(m.crc, m.markers, true));
        const size_t region_at = 4096, to_base = 0x10000;
        ob->add_foreign_region(0x1200, region_at, m.size + 2000, RI_ACCESS_REMOTE_WRITE, 1, to_base);
        auto src = pattern(m.size, 9);
        WorkRequest w = harness::wr_over(1, WorkType::write, src);
        w.remote_stag = 0x1200;
        w.remote_to = to_base + 1000;
        ASSERT_OK(a->post(w));
        settle(*a, *b, m.chunk);
        ASSERT_FALSE(b->failed()) << term_name(b->failure());
        EXPECT_EQ(ob->memory, expected_memory(ob->memory.size(), region_at + 1000, src));
        EXPECT_GT(b->stats().rx_fpdus, 2u);
        EXPECT_EQ(ob->writes, b->stats().rx_fpdus);  // one DMA per segment, after its CRC
        EXPECT_EQ(b->stats().rx_bytes, m.size);
        ASSERT_EQ(oa->completions.size(), 1u);
        EXPECT_EQ(oa->completions[0].kind, Completion::Kind::write);
        EXPECT_TRUE(ob->completions.empty());
    }
}

TEST_F(ForeignPair, SendIntoForeignReceiveOverThreeSges) {
    for (size_t chunk : {SIZE_MAX, size_t{1}, size_t{333}}) {
        SCOPED_TRACE(chunk);
        make(config(), config(true, false, true));
        // Three SGEs with gaps between them; the 5000-byte message ends inside the third.
        ob->post_foreign_receive(42, {{100, 700}, {2000, 1500}, {5000, 4000}});
        auto src = pattern(5000, 4);
        ASSERT_OK(a->post(harness::wr_over(7, WorkType::send, src)));
        settle(*a, *b, chunk);
        ASSERT_FALSE(b->failed()) << term_name(b->failure());
        std::vector<uint8_t> want(ob->memory.size(), kFill);
        std::copy_n(src.begin(), 700, want.begin() + 100);
        std::copy_n(src.begin() + 700, 1500, want.begin() + 2000);
        std::copy_n(src.begin() + 2200, 2800, want.begin() + 5000);
        EXPECT_EQ(ob->memory, want);
        ASSERT_EQ(ob->completions.size(), 1u);
        EXPECT_EQ(ob->completions[0].wr_id, 42u);
        EXPECT_EQ(ob->completions[0].kind, Completion::Kind::recv);
        EXPECT_EQ(ob->completions[0].byte_len, 5000u);
        EXPECT_EQ(b->active_receive(), nullptr);
        ASSERT_EQ(oa->completions.size(), 1u);
        EXPECT_EQ(oa->completions[0].wr_id, 7u);
    }
}

TEST_F(ForeignPair, CorruptSegmentNeverReachesForeignMemory) {
    // The point of the bounce buffer: a segment whose CRC fails is not placed at all.
    ob->add_foreign_region(0x55, 0, 4096, RI_ACCESS_REMOTE_WRITE);
    auto src = pattern(1000, 1);
    WorkRequest w = harness::wr_over(1, WorkType::write, src);
    w.remote_stag = 0x55;
    ASSERT_OK(a->post(w));
    auto frames = drain(*a);
    ASSERT_EQ(frames.size(), 1u);
    frames[0][kMpaLengthLen + kTaggedHeaderLen + 10] ^= 0x40;  // one payload bit
    feed_all(*b, frames);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kLlpCrcError);
    EXPECT_EQ(ob->writes, 0u);
    EXPECT_EQ(ob->memory, std::vector<uint8_t>(ob->memory.size(), kFill));
}

// Outbound: a foreign request must put on the wire exactly what a local request with the same bytes does.
class ForeignOutbound : public ::testing::TestWithParam<std::tuple<WorkType, bool, bool>> {};

TEST_P(ForeignOutbound, FramesMatchALocalRequest) {
    const auto [type, crc, markers] = GetParam();
    const EngineConfig cfg = config(crc, markers);
    ForeignOwner local_owner, foreign_owner, peer_owner;
    Engine local(local_owner, cfg), foreign(foreign_owner, cfg), peer(peer_owner, config(crc, markers));

    // 10000 bytes over three SGEs: contiguous in the local request, scattered in foreign memory.
    const auto src = pattern(10000, 7);
    const std::pair<size_t, size_t> pieces[] = {{300, 1000}, {6000, 4000}, {20000, 5000}};
    size_t at = 0;
    for (auto [offset, len] : pieces) {
        std::copy_n(src.begin() + static_cast<long>(at), len,
                    foreign_owner.memory.begin() + static_cast<long>(offset));
        at += len;
    }
    auto src_copy = src;
    WorkRequest lw;
    lw.wr_id = 5;
    lw.type = type;
    lw.sge[0] = LocalSpan{src_copy.data(), 1000};
    lw.sge[1] = LocalSpan{src_copy.data() + 1000, 4000};
    lw.sge[2] = LocalSpan{src_copy.data() + 5000, 5000};
    lw.num_sge = 3;
    WorkRequest fw = ForeignOwner::foreign_wr(5, type, {pieces[0], pieces[1], pieces[2]});
    for (WorkRequest *w : {&lw, &fw}) {
        w->remote_stag = 0x99;
        w->remote_to = 64;
    }
    ASSERT_OK(local.post(lw));
    ASSERT_OK(foreign.post(fw));

    static TxFrame lf, ff;
    std::vector<std::vector<uint8_t>> sent;
    while (local.next_frame(lf)) {
        ASSERT_TRUE(foreign.next_frame(ff));
        // The foreign payload is sent from the frame's own snapshot: every piece lies inside the frame.
        for (size_t i = 0; i < ff.iovcnt; ++i) {
            auto *p = static_cast<const uint8_t *>(ff.iov[i].iov_base);
            EXPECT_TRUE(p >= reinterpret_cast<const uint8_t *>(&ff) &&
                        p + ff.iov[i].iov_len <= reinterpret_cast<const uint8_t *>(&ff) + sizeof ff);
        }
        sent.push_back(harness::bytes_of(ff));
        EXPECT_EQ(sent.back(), harness::bytes_of(lf));
        local.frame_sent();
        foreign.frame_sent();
    }
    EXPECT_FALSE(foreign.next_frame(ff));
    EXPECT_EQ(sent.size(), 7u);  // 10000 bytes in 1440- or 1436-byte pieces
    EXPECT_EQ(foreign_owner.writes, 0u);
    ASSERT_EQ(foreign_owner.completions.size(), 1u);
    EXPECT_EQ(foreign_owner.completions[0].wr_id, 5u);
    EXPECT_EQ(foreign_owner.completions[0].byte_len, 10000u);

    // And a second engine decodes them into the same bytes.
    std::vector<uint8_t> sink(10064, 0);
    peer_owner.add_region(0x99, sink, RI_ACCESS_REMOTE_WRITE);
    std::vector<uint8_t> recv(10000, 0);
    peer_owner.post_receive(1, recv);
    feed_all(peer, sent);
    ASSERT_FALSE(peer.failed()) << term_name(peer.failure());
    if (type == WorkType::write) {
        EXPECT_TRUE(std::equal(src.begin(), src.end(), sink.begin() + 64));
    } else {
        EXPECT_EQ(recv, src);
        ASSERT_EQ(peer_owner.completions.size(), 1u);
        EXPECT_EQ(peer_owner.completions[0].byte_len, 10000u);
    }
}

INSTANTIATE_TEST_SUITE_P(Modes, ForeignOutbound,
                         ::testing::Combine(::testing::Values(WorkType::write, WorkType::send),
                                            ::testing::Bool(), ::testing::Bool()));

TEST_F(ForeignPair, ReadResponseSourcedFromForeignMemory) {
    // The responder needs no bounce buffer for this: its config leaves foreign_memory off.
    make(config(), config());
    auto data = pattern(50000, 3);
    std::copy(data.begin(), data.end(), ob->memory.begin() + 1000);
    ob->add_foreign_region(0x77, 1000, 50000, RI_ACCESS_REMOTE_READ);
    std::vector<uint8_t> sink(40000, 0);
    oa->add_region(0x3400, sink, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r;
    r.wr_id = 2;
    r.type = WorkType::read;
    r.remote_stag = 0x77;
    r.remote_to = 500;
    r.local_stag = 0x3400;
    r.length = 40000;
    ASSERT_OK(a->post(r));
    settle(*a, *b, 777);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    ASSERT_FALSE(b->failed()) << term_name(b->failure());
    EXPECT_TRUE(std::equal(sink.begin(), sink.end(), data.begin() + 500));
    ASSERT_EQ(oa->completions.size(), 1u);
    EXPECT_EQ(oa->completions[0].kind, Completion::Kind::read);
    EXPECT_EQ(oa->completions[0].byte_len, 40000u);
    EXPECT_EQ(ob->reads, 28u);  // one per Read Response segment: 40000 bytes in 1440-byte pieces
    EXPECT_EQ(ob->writes, 0u);
}

TEST_F(ForeignPair, ReadIntoForeignSink) {
    make(config(true, false, true), config());
    auto data = pattern(30000, 5);
    ob->add_region(0x1200, data, RI_ACCESS_REMOTE_READ);
    oa->add_foreign_region(0x3400, 8192, 30000, RI_ACCESS_LOCAL_WRITE, 1, 0x500);
    WorkRequest r;
    r.wr_id = 9;
    r.type = WorkType::read;
    r.remote_stag = 0x1200;
    r.local_stag = 0x3400;
    r.local_to = 0x500;
    r.length = 30000;
    ASSERT_OK(a->post(r));
    settle(*a, *b, 1000);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    EXPECT_EQ(oa->memory, expected_memory(oa->memory.size(), 8192, data));
    ASSERT_EQ(oa->completions.size(), 1u);
    EXPECT_EQ(oa->completions[0].wr_id, 9u);
    EXPECT_EQ(oa->completions[0].byte_len, 30000u);
}

TEST_F(ForeignPair, DmaWriteFailureTerminatesAndPlacesNothingMore) {
    ob->add_foreign_region(0x1200, 0, 8192, RI_ACCESS_REMOTE_WRITE);
    ob->fail_writes_after = 1;  // the first segment lands, the second cannot
    auto src = pattern(5000, 2);
    WorkRequest w = harness::wr_over(1, WorkType::write, src);
    w.remote_stag = 0x1200;
    ASSERT_OK(a->post(w));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kRdmapLocalCatastrophic);
    EXPECT_TRUE(b->terminate_sent());
    ASSERT_TRUE(oa->terminate.has_value());
    EXPECT_EQ(oa->terminate->code, term::kRdmapLocalCatastrophic);
    EXPECT_EQ(ob->writes, 2u);  // nothing tried after the failure
    const size_t first = 1454 - kTaggedHeaderLen;
    EXPECT_EQ(ob->memory, expected_memory(ob->memory.size(), 0, std::span<const uint8_t>(src.data(), first)));
}

TEST_F(ForeignPair, DmaWriteFailureOfASendCompletesNothing) {
    ob->post_foreign_receive(3, {{0, 600}, {1000, 600}});
    ob->fail_writes_after = 1;  // the first SGE's piece lands, the second's cannot
    auto src = pattern(1000, 2);
    ASSERT_OK(a->post(harness::wr_over(1, WorkType::send, src)));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kRdmapLocalCatastrophic);
    ASSERT_TRUE(oa->terminate.has_value());
    EXPECT_EQ(oa->terminate->code, term::kRdmapLocalCatastrophic);
    EXPECT_TRUE(ob->completions.empty());
    ASSERT_NE(b->active_receive(), nullptr);  // left for the owner to flush
    EXPECT_EQ(b->active_receive()->wr_id, 3u);
    EXPECT_EQ(ob->memory, expected_memory(ob->memory.size(), 0, std::span<const uint8_t>(src.data(), 600)));
}

TEST_F(ForeignPair, DmaReadFailureOnOutboundWriteSendsTerminateNotGarbage) {
    std::vector<uint8_t> target(8192, 0);
    ob->add_region(0x1200, target, RI_ACCESS_REMOTE_WRITE);
    std::vector<uint8_t> dst(16, 0);
    ob->post_receive(1, dst);
    auto small = pattern(16, 1);
    ASSERT_OK(a->post(harness::wr_over(10, WorkType::send, small)));  // local: completes as usual
    auto data = pattern(5000, 8);
    std::copy(data.begin(), data.end(), oa->memory.begin());
    WorkRequest w = ForeignOwner::foreign_wr(11, WorkType::write, {{0, 5000}});
    w.remote_stag = 0x1200;
    ASSERT_OK(a->post(w));
    oa->fail_reads_after = 1;  // the Write's first frame is read, its second is not

    auto frames = drain(*a);
    ASSERT_EQ(frames.size(), 3u);  // the Send, the Write's first segment, the Terminate
    EXPECT_EQ(decode_header(frames[1].data() + kMpaLengthLen).op(), Opcode::rdma_write);
    Terminate t = terminate_in(frames[2]);
    EXPECT_EQ(t.code, term::kRdmapLocalCatastrophic);
    EXPECT_EQ(t.hdrct, 0);  // a local failure: no offending header to copy
    EXPECT_TRUE(a->failed());
    EXPECT_EQ(a->failure(), term::kRdmapLocalCatastrophic);
    EXPECT_EQ(oa->reads, 2u);
    ASSERT_EQ(oa->completions.size(), 1u);  // the Send only
    EXPECT_EQ(oa->completions[0].wr_id, 10u);
    EXPECT_EQ(a->outstanding(), 1u);  // the Write, for the owner to flush

    feed_all(*b, frames);
    ASSERT_TRUE(ob->terminate.has_value());
    EXPECT_EQ(ob->terminate->code, term::kRdmapLocalCatastrophic);
    EXPECT_EQ(dst, small);
    const size_t first = 1454 - kTaggedHeaderLen;
    EXPECT_TRUE(std::equal(data.begin(), data.begin() + first, target.begin()));
    EXPECT_EQ(std::count(target.begin() + first, target.end(), 0), static_cast<long>(target.size() - first));
}

TEST_F(ForeignPair, DmaReadFailureOfFirstFrameSendsOnlyTheTerminate) {
    WorkRequest s = ForeignOwner::foreign_wr(4, WorkType::send, {{0, 100}, {500, 100}});
    ASSERT_OK(a->post(s));
    oa->fail_reads_after = 1;  // the first SGE reads, the second does not: the half-built frame is dropped
    auto frames = drain(*a);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(terminate_in(frames[0]).code, term::kRdmapLocalCatastrophic);
    EXPECT_TRUE(oa->completions.empty());
    EXPECT_EQ(a->stats().tx_bytes, 0u);
}

TEST_F(ForeignPair, DmaReadFailureStopsAPendingReadResponseToo) {
    // b owes a a Read Response when its own foreign Write cannot be read: the Terminate is all that goes out.
    auto data = pattern(100, 1);
    ob->add_region(0x1200, data, RI_ACCESS_REMOTE_READ);
    std::vector<uint8_t> sink(100, 0);
    oa->add_region(0x3400, sink, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r;
    r.wr_id = 1;
    r.type = WorkType::read;
    r.remote_stag = 0x1200;
    r.local_stag = 0x3400;
    r.length = 100;
    ASSERT_OK(a->post(r));
    harness::pump(*a, *b);  // the Read Request is now queued at b
    WorkRequest w = ForeignOwner::foreign_wr(2, WorkType::write, {{0, 100}});
    w.remote_stag = 0x3400;
    ASSERT_OK(b->post(w));
    ob->fail_reads_after = 0;
    auto frames = drain(*b);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(terminate_in(frames[0]).code, term::kRdmapLocalCatastrophic);
    EXPECT_EQ(ob->reads, 1u);
}

TEST_F(ForeignPair, DmaReadFailureOfReadResponseTerminates) {
    make(config(), config());
    ob->add_foreign_region(0x77, 0, 4096, RI_ACCESS_REMOTE_READ);
    ob->fail_reads_after = 0;
    std::vector<uint8_t> sink(4096, 0);
    oa->add_region(0x3400, sink, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r;
    r.wr_id = 2;
    r.type = WorkType::read;
    r.remote_stag = 0x77;
    r.local_stag = 0x3400;
    r.length = 4096;
    ASSERT_OK(a->post(r));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kRdmapLocalCatastrophic);
    ASSERT_TRUE(oa->terminate.has_value());
    EXPECT_EQ(oa->terminate->code, term::kRdmapLocalCatastrophic);
    EXPECT_TRUE(oa->completions.empty());
    EXPECT_EQ(std::count(sink.begin(), sink.end(), 0), 4096);
}

// ---------------------------------------------------------------------------------------------------------------
// Invalid inbound segments for foreign memory: the usual Terminate codes, and not a single DMA.

class ForeignBadPeer : public ::testing::Test {
protected:
    void start(bool bounce) {
        owner = std::make_unique<ForeignOwner>();
        EngineConfig c = config(true, false, bounce);
        c.ird = 2;
        engine = std::make_unique<Engine>(*owner, c);
        owner->add_foreign_region(0x100, 0, 4096, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
        owner->add_foreign_region(0x200, 8192, 4096, RI_ACCESS_REMOTE_READ);
        owner->add_foreign_region(0x300, 16384, 4096, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ, 2);
        owner->add_foreign_region(0x400, 24576, 4096, RI_ACCESS_REMOTE_WRITE);
        owner->post_foreign_receive(1, {{32768, 16}, {40000, 16}});
        peer = Transmitter(FramingOptions{true, false});
    }
    void inject(const Header &h, std::span<const uint8_t> control = {}, size_t payload = 0) {
        std::vector<uint8_t> data(payload, 0x5a);
        iovec v{data.data(), data.size()};
        static TxFrame frame;
        peer.build(h, control, std::span<const iovec>(&v, payload > 0 ? 1 : 0), frame);
        engine->receiver().feed(harness::bytes_of(frame));
    }
    void expect(TermCode code) {
        ASSERT_TRUE(engine->failed());
        EXPECT_EQ(engine->failure(), code) << term_name(engine->failure()) << " instead of " << term_name(code);
        auto frames = drain(*engine);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_EQ(terminate_in(frames[0]).code, code);
        EXPECT_EQ(owner->reads, 0u);
        EXPECT_EQ(owner->writes, 0u);
        EXPECT_FALSE(owner->out_of_bounds);
        EXPECT_EQ(owner->memory, std::vector<uint8_t>(owner->memory.size(), kFill));
    }
    static Header write_to(uint32_t stag, uint64_t to) {
        Header h;
        h.tagged = true;
        h.opcode = static_cast<uint8_t>(Opcode::rdma_write);
        h.stag = stag;
        h.to = to;
        return h;
    }
    static Header send1() {
        Header h;
        h.opcode = static_cast<uint8_t>(Opcode::send);
        h.msn = 1;
        return h;
    }
    void read_request(uint32_t stag, uint64_t to, uint32_t size) {
        uint8_t rr[kReadRequestLen];
        encode_read_request(ReadRequest{1, 0, size, stag, to}, rr);
        Header h;
        h.opcode = static_cast<uint8_t>(Opcode::read_request);
        h.qn = 1;
        h.msn = 1;
        inject(h, rr);
    }

    std::unique_ptr<ForeignOwner> owner;
    std::unique_ptr<Engine> engine;
    Transmitter peer{FramingOptions{true, false}};
};

TEST_F(ForeignBadPeer, ChecksKeepTheirCodesAndMakeNoDma) {
    struct Case {
        const char *name;
        TermCode code;
        bool bounce;  // the engine has foreign_memory on
        std::function<void()> send;
    };
    const Case cases[] = {
        {"invalid stag", term::kDdpTaggedInvalidStag, true, [this] { inject(write_to(0x999, 0), {}, 8); }},
        {"base and bounds", term::kDdpTaggedBaseBounds, true, [this] { inject(write_to(0x100, 4090), {}, 8); }},
        {"to wrap", term::kDdpTaggedToWrap, true, [this] { inject(write_to(0x100, UINT64_MAX - 2), {}, 8); }},
        {"write rights", term::kRdmapAccessRights, true, [this] { inject(write_to(0x200, 0), {}, 8); }},
        {"other pd", term::kDdpTaggedStagNotAssociated, true, [this] { inject(write_to(0x300, 0), {}, 8); }},
        {"send too long", term::kDdpMessageTooLong, true, [this] { inject(send1(), {}, 33); }},
        {"read beyond region", term::kRdmapBaseBounds, true, [this] { read_request(0x100, 0, 4097); }},
        {"read rights", term::kRdmapAccessRights, true, [this] { read_request(0x400, 0, 8); }},
        {"read of other pd", term::kRdmapStagNotAssociated, true, [this] { read_request(0x300, 0, 8); }},
        // Without a bounce buffer foreign memory cannot be received into: a local error, never a dereference.
        {"write without bounce", term::kRdmapLocalCatastrophic, false, [this] { inject(write_to(0x100, 0), {}, 8); }},
        {"send without bounce", term::kRdmapLocalCatastrophic, false, [this] { inject(send1(), {}, 8); }},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        start(c.bounce);
        c.send();
        expect(c.code);
    }
}

TEST_F(ForeignBadPeer, ValidSegmentsStillPlaceAfterTheSameSetup) {
    // The counterpart of the cases above, so they fail for the reason they name and not for the setup.
    start(true);
    inject(write_to(0x100, 4088), {}, 8);
    inject(send1(), {}, 32);
    ASSERT_FALSE(engine->failed()) << term_name(engine->failure());
    EXPECT_EQ(owner->writes, 3u);  // the Write, and the Send over its two SGEs
    auto placed = [&](size_t from, size_t len) {
        return std::count(owner->memory.begin() + static_cast<long>(from),
                          owner->memory.begin() + static_cast<long>(from + len), 0x5a) == static_cast<long>(len);
    };
    EXPECT_TRUE(placed(4088, 8));
    EXPECT_TRUE(placed(32768, 16));
    EXPECT_TRUE(placed(40000, 16));
    EXPECT_EQ(std::count(owner->memory.begin(), owner->memory.end(), 0x5a), 40);  // and nowhere else
    ASSERT_EQ(owner->completions.size(), 1u);
    EXPECT_EQ(owner->completions[0].byte_len, 32u);
}

}  // namespace
