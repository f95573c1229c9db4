// RFC 7306 (atomics and Immediate Data): the codecs byte for byte, the atomic operations' arithmetic with masks, and
// two engines that agreed on the extensions moving them at every split of the stream; an engine that did not agree
// refuses them as Linux siw does, and every invalid request gets its Terminate.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <thread>

#include "engine_harness.hpp"
#include "iwarp/crc32c.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;
using harness::ForeignOwner;
using harness::Owner;
using harness::settle;

constexpr uint32_t kAtomicAccess = RI_ACCESS_REMOTE_ATOMIC | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE;

EngineConfig config(bool rfc7306) {
    EngineConfig c = harness::pair_config();
    c.rfc7306 = rfc7306;
    return c;
}

uint64_t load64(const std::vector<uint8_t> &buf, size_t off) {
    uint64_t v;
    std::memcpy(&v, buf.data() + off, sizeof v);
    return v;
}

void store64(std::vector<uint8_t> &buf, size_t off, uint64_t v) { std::memcpy(buf.data() + off, &v, sizeof v); }

// An atomic on the peer's STag 0x500 at tagged offset @p to, its original value into @p result.
WorkRequest atomic_wr(uint64_t id, AtomicOp op, uint64_t to, std::vector<uint8_t> &result, uint64_t add_swap,
                      uint64_t compare = 0, uint64_t swap_mask = 0, uint64_t compare_mask = ~0ull) {
    WorkRequest wr;
    wr.wr_id = id;
    wr.type = WorkType::atomic;
    wr.sge[0] = LocalSpan{result.data(), 8};
    wr.num_sge = 1;
    wr.remote_stag = 0x500;
    wr.remote_to = to;
    wr.atomic.op = static_cast<uint8_t>(op);
    wr.atomic.add_swap = add_swap;
    wr.atomic.add_swap_mask = op == AtomicOp::cmp_swap && swap_mask == 0 ? ~0ull : swap_mask;
    wr.atomic.compare = compare;
    wr.atomic.compare_mask = compare_mask;
    return wr;
}

TEST(Rfc7306Wire, AnAtomicRequestIsItsFieldsBigEndianAtTheRfcsOffsets) {
    AtomicRequest r;
    r.op = static_cast<uint8_t>(AtomicOp::cmp_swap);
    r.request_id = 0x01020304;
    r.stag = 0xa1b2c3d4;
    r.to = 0x1112131415161718;
    r.add_swap = 0x2122232425262728;
    r.add_swap_mask = 0x3132333435363738;
    r.compare = 0x4142434445464748;
    r.compare_mask = 0x5152535455565758;
    std::array<uint8_t, kAtomicRequestLen> b{};
    encode_atomic_request(r, b.data());
    const std::array<uint8_t, kAtomicRequestLen> want = {
        0x00, 0x00, 0x00, 0x02,                          // reserved (28 bits) | AOpCode
        0x01, 0x02, 0x03, 0x04,                          // Request Identifier
        0xa1, 0xb2, 0xc3, 0xd4,                          // Remote STag
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // Remote Tagged Offset
        0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,  // Add or Swap Data
        0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,  // Add or Swap Mask
        0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,  // Compare Data
        0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58}; // Compare Mask
    EXPECT_EQ(b, want);
    EXPECT_EQ(decode_atomic_request(b.data()), r);
    // The reserved bits are ignored on receipt, as the RFC asks.
    b[0] = 0xff;
    b[3] = 0xf0;
    EXPECT_EQ(decode_atomic_request(b.data()).op, static_cast<uint8_t>(AtomicOp::fetch_add));

    AtomicResponse a{0x0a0b0c0d, 0x8877665544332211};
    std::array<uint8_t, kAtomicResponseLen> rb{};
    encode_atomic_response(a, rb.data());
    const std::array<uint8_t, kAtomicResponseLen> rwant = {0x0a, 0x0b, 0x0c, 0x0d, 0x88, 0x77,
                                                           0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
    EXPECT_EQ(rb, rwant);
    EXPECT_EQ(decode_atomic_response(rb.data()), a);
}

TEST(Rfc7306Wire, TheOpcodeTableKnowsTheExtensionsAndNothingBeyond) {
    EXPECT_EQ(opcode_info(0x8).queue, Queue::send);
    EXPECT_FALSE(opcode_info(0x8).solicited);
    EXPECT_TRUE(opcode_info(0x9).solicited);
    EXPECT_EQ(opcode_info(0xa).queue, Queue::read_request);
    EXPECT_EQ(opcode_info(0xb).queue, Queue::atomic_response);
    for (uint8_t op = 0x8; op <= 0xb; ++op) {
        EXPECT_TRUE(opcode_info(op).valid && opcode_info(op).rfc7306 && !opcode_info(op).tagged) << int{op};
    }
    for (uint8_t op = 0; op < 8; ++op) EXPECT_FALSE(opcode_info(op).rfc7306) << int{op};
    for (uint8_t op = 0xc; op < 16; ++op) EXPECT_FALSE(opcode_info(op).valid) << int{op};
}

TEST(Rfc7306Wire, FetchAddAddsWithinTheFieldsTheMaskMarks) {
    AtomicRequest r;
    r.op = static_cast<uint8_t>(AtomicOp::fetch_add);
    r.add_swap = 5;
    EXPECT_EQ(atomic_result(r, 37), 42u);
    r.add_swap = 1;
    EXPECT_EQ(atomic_result(r, ~0ull), 0u) << "a 64-bit add wraps";
    // Two 32-bit fields: the mask marks the top bit of each; the low field's carry does not reach the high one.
    r.add_swap_mask = 0x8000000080000000ull;
    r.add_swap = 0x0000000100000001ull;
    EXPECT_EQ(atomic_result(r, 0x00000005ffffffffull), 0x0000000600000000ull);
    // Eight 8-bit fields.
    r.add_swap_mask = 0x8080808080808080ull;
    r.add_swap = 0x0101010101010101ull;
    EXPECT_EQ(atomic_result(r, 0xff00ff00ff00ff00ull), 0x0001000100010001ull);
    // With no bit marked the loop is the plain add.
    r.add_swap_mask = 0;
    r.add_swap = 0x00000000ffffffffull;
    EXPECT_EQ(atomic_result(r, 1), 0x0000000100000000ull);
}

TEST(Rfc7306Wire, CmpSwapSwapsTheMaskedBitsWhenTheComparedBitsMatch) {
    AtomicRequest r;
    r.op = static_cast<uint8_t>(AtomicOp::cmp_swap);
    r.compare = 7;
    r.add_swap = 9;
    r.add_swap_mask = ~0ull;
    EXPECT_EQ(atomic_result(r, 7), 9u);
    EXPECT_EQ(atomic_result(r, 8), 8u) << "no match: unchanged";
    // Compare the low byte only; swap the high half only.
    r.compare = 0x00000000000000aaull;
    r.compare_mask = 0xffull;
    r.add_swap = 0x1234567800000000ull;
    r.add_swap_mask = 0xffffffff00000000ull;
    EXPECT_EQ(atomic_result(r, 0x99999999555555aaull), 0x12345678555555aaull);
    EXPECT_EQ(atomic_result(r, 0x99999999555555abull), 0x99999999555555abull);
    // A compare mask of zero always matches: an unconditional (masked) swap.
    r.compare_mask = 0;
    EXPECT_EQ(atomic_result(r, 1), 0x1234567800000001ull);
}

class Rfc7306Pair : public ::testing::Test {
protected:
    void make(bool a_speaks, bool b_speaks) {
        a = std::make_unique<Engine>(oa, config(a_speaks));
        b = std::make_unique<Engine>(ob, config(b_speaks));
    }
    void SetUp() override {
        target.assign(64, 0);
        ob.add_region(0x500, target, kAtomicAccess, 1, 0x1000);
        make(true, true);
    }
    Owner oa, ob;
    std::unique_ptr<Engine> a, b;
    std::vector<uint8_t> target;
};

TEST_F(Rfc7306Pair, AtomicsReturnTheOriginalAndChangeTheTargetAtEverySplit) {
    for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7}, size_t{13}, size_t{29}, size_t{64},
                         SIZE_MAX}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        oa.completions.clear();
        store64(target, 8, 100);
        std::vector<uint8_t> r1(8, 0xee), r2(8, 0xee), r3(8, 0xee);
        ASSERT_OK(a->post(atomic_wr(1, AtomicOp::fetch_add, 0x1008, r1, 23)));
        ASSERT_OK(a->post(atomic_wr(2, AtomicOp::cmp_swap, 0x1008, r2, 7, /*compare=*/123)));
        ASSERT_OK(a->post(atomic_wr(3, AtomicOp::cmp_swap, 0x1008, r3, 9, /*compare=*/5)));  // no match
        settle(*a, *b, chunk);
        ASSERT_FALSE(a->failed()) << term_name(a->failure());
        ASSERT_FALSE(b->failed()) << term_name(b->failure());
        EXPECT_EQ(load64(r1, 0), 100u);
        EXPECT_EQ(load64(r2, 0), 123u);
        EXPECT_EQ(load64(r3, 0), 7u);
        EXPECT_EQ(load64(target, 8), 7u);
        ASSERT_EQ(oa.completions.size(), 3u);
        for (uint64_t i = 0; i < 3; ++i) {
            EXPECT_EQ(oa.completions[i].wr_id, i + 1);
            EXPECT_EQ(oa.completions[i].kind, Completion::Kind::atomic);
            EXPECT_EQ(oa.completions[i].byte_len, 8u);
        }
        EXPECT_TRUE(ob.completions.empty()) << "an atomic is not delivered to the responder's consumer";
    }
}

TEST_F(Rfc7306Pair, ReadsAndAtomicsAreServedInTheOrderTheyCame) {
    store64(target, 0, 1000);
    std::vector<uint8_t> before(8, 0), after(8, 0), original(8, 0);
    oa.add_region(0x61, before, RI_ACCESS_LOCAL_WRITE);
    oa.add_region(0x62, after, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r1 = harness::read_of(1, 0x500, 0x61, 8);
    r1.remote_to = 0x1000;
    WorkRequest r2 = harness::read_of(3, 0x500, 0x62, 8);
    r2.remote_to = 0x1000;
    ASSERT_OK(a->post(r1));
    ASSERT_OK(a->post(atomic_wr(2, AtomicOp::fetch_add, 0x1000, original, 1)));
    ASSERT_OK(a->post(r2));
    settle(*a, *b, 11);
    ASSERT_FALSE(a->failed()) << term_name(a->failure());
    EXPECT_EQ(load64(before, 0), 1000u) << "the Read posted before the atomic read what was there before it";
    EXPECT_EQ(load64(original, 0), 1000u);
    EXPECT_EQ(load64(after, 0), 1001u) << "the Read posted after the atomic read what it left";
    ASSERT_EQ(oa.completions.size(), 3u);
    EXPECT_EQ(oa.completions[0].kind, Completion::Kind::read);
    EXPECT_EQ(oa.completions[1].kind, Completion::Kind::atomic);
    EXPECT_EQ(oa.completions[2].kind, Completion::Kind::read);
}

TEST_F(Rfc7306Pair, ImmediateDataArrivesInAReceiveWithItsEightBytes) {
    for (size_t chunk : {size_t{1}, size_t{4}, size_t{9}, SIZE_MAX}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        oa.completions.clear();
        ob.completions.clear();
        std::vector<uint8_t> buf(64, 0xee), sent(16, 0x33);
        ob.post_receive(70, buf);
        ob.post_receive(71, buf);
        ob.post_receive(72, buf);
        WorkRequest imm;
        imm.wr_id = 5;
        imm.type = WorkType::immediate;
        imm.immediate = 0x0102030405060708ull;
        ASSERT_OK(a->post(imm));
        ASSERT_OK(a->post(harness::wr_over(6, WorkType::send, sent)));  // a Send after it, in the next receive
        imm.wr_id = 7;
        imm.type = WorkType::immediate_se;
        imm.immediate = 42;
        ASSERT_OK(a->post(imm));
        settle(*a, *b, chunk);
        ASSERT_FALSE(b->failed()) << term_name(b->failure());
        ASSERT_EQ(ob.completions.size(), 3u);
        EXPECT_EQ(ob.completions[0].wr_id, 70u);
        EXPECT_TRUE(ob.completions[0].immediate);
        EXPECT_EQ(ob.completions[0].imm_data, 0x0102030405060708ull);
        EXPECT_EQ(ob.completions[0].byte_len, 0u);
        EXPECT_FALSE(ob.completions[0].solicited);
        EXPECT_EQ(ob.completions[1].wr_id, 71u);
        EXPECT_FALSE(ob.completions[1].immediate);
        EXPECT_EQ(ob.completions[1].byte_len, 16u);
        EXPECT_EQ(ob.completions[2].wr_id, 72u);
        EXPECT_TRUE(ob.completions[2].immediate && ob.completions[2].solicited);
        EXPECT_EQ(ob.completions[2].imm_data, 42u);
        EXPECT_EQ(buf[0], 0x33) << "the Send's bytes";
        ASSERT_EQ(oa.completions.size(), 3u);
        EXPECT_EQ(oa.completions[0].kind, Completion::Kind::send);
    }
}

TEST_F(Rfc7306Pair, AnEngineThatDidNotAgreeRefusesThemAsSiwDoes) {
    // Not sent by an engine without the agreement: the consumer is told at post.
    make(false, true);
    std::vector<uint8_t> result(8, 0);
    EXPECT_STATUS(a->post(atomic_wr(1, AtomicOp::fetch_add, 0x1000, result, 1)), RI_EOPNOTSUPP);
    WorkRequest imm;
    imm.type = WorkType::immediate;
    EXPECT_STATUS(a->post(imm), RI_EOPNOTSUPP);
    // Received by one without it: "unexpected opcode" (RDMAP, remote operation, 0x06), no header copied.
    make(true, false);
    ASSERT_OK(a->post(atomic_wr(1, AtomicOp::fetch_add, 0x1000, result, 1)));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kRdmapUnexpectedOpcode) << term_name(b->failure());
    ASSERT_TRUE(oa.terminate.has_value());
    EXPECT_EQ(oa.terminate->code, term::kRdmapUnexpectedOpcode);
    EXPECT_EQ(load64(target, 0), 0u) << "the target changed";
}

struct BadAtomic {
    const char *what;
    uint32_t stag;
    uint64_t to;
    uint8_t op;
    TermCode code;
};

TEST_F(Rfc7306Pair, EveryInvalidAtomicIsATerminateAndChangesNothing) {
    std::vector<uint8_t> readonly(64, 0), misaligned(72, 0);
    ob.add_region(0x501, readonly, RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE);
    ob.add_region(0x502, target, kAtomicAccess, 2);  // another PD
    // A region whose tagged offsets are 8-aligned but whose memory is not (the RFC asks for aligned memory).
    ob.regions[0x503] = Owner::Entry{Region{misaligned.data() + 4, 0, 64, kAtomicAccess, 1}, true, true};
    const BadAtomic cases[] = {
        {"an unknown STag", 0x5ff, 0x1000, 0x0, term::kRdmapInvalidStag},
        {"no remote atomic right", 0x501, 0, 0x0, term::kRdmapAccessRights},
        {"another PD's STag", 0x502, 0x1000, 0x0, term::kRdmapStagNotAssociated},
        {"past the region's end", 0x500, 0x1000 + 64, 0x0, term::kRdmapBaseBounds},
        {"below the region", 0x500, 0x0ff8, 0x0, term::kRdmapBaseBounds},
        {"memory not 64-bit aligned", 0x503, 8, 0x0, term::kRdmapCatastrophicStream},
        {"a reserved AOpCode", 0x500, 0x1000, 0x1, term::kRdmapUnexpectedOpcode},
    };
    for (const BadAtomic &c : cases) {
        SCOPED_TRACE(c.what);
        oa = Owner{};
        make(true, true);
        std::vector<uint8_t> result(8, 0xee);
        WorkRequest wr = atomic_wr(1, AtomicOp::fetch_add, c.to, result, 1);
        wr.remote_stag = c.stag;
        // Built here the way a peer could send it: post() refuses a reserved AOpCode, so put it past the check.
        ASSERT_OK(a->post(wr));
        if (c.op != 0) {
            static TxFrame frame;
            ASSERT_TRUE(a->next_frame(frame));
            auto bytes = harness::bytes_of(frame);
            // AOpCode is the low nibble of the request's first word: after the length (2) and DDP header (18).
            bytes[kMpaLengthLen + kUntaggedHeaderLen + 3] = c.op;
            // The CRC covered the old byte: recompute it over everything before it.
            const size_t body = bytes.size() - kMpaCrcLen;
            put_crc32c(bytes.data() + body, crc32c(bytes.data(), body));
            b->receiver().feed(bytes);
            a->frame_sent();
        }
        settle(*a, *b);
        ASSERT_TRUE(b->failed()) << "accepted";
        EXPECT_EQ(b->failure(), c.code) << term_name(b->failure());
        ASSERT_TRUE(oa.terminate.has_value());
        EXPECT_EQ(oa.terminate->code, c.code);
        if (c.code != term::kRdmapUnexpectedOpcode) {
            EXPECT_EQ(oa.terminate->hdrct, kTermHdrM | kTermHdrD) << "the offending DDP header, no RDMAP header";
        }
        EXPECT_EQ(load64(result, 0), 0xeeeeeeeeeeeeeeeeull) << "a result came back";
        EXPECT_TRUE(oa.completions.empty());
    }
    EXPECT_EQ(load64(target, 0) | load64(target, 56), 0u);
    EXPECT_EQ(load64(misaligned, 8), 0u);
}

TEST_F(Rfc7306Pair, ImmediateDataWithNoReceivePostedIsANoBufferTerminate) {
    WorkRequest imm;
    imm.type = WorkType::immediate;
    ASSERT_OK(a->post(imm));
    settle(*a, *b);
    ASSERT_TRUE(b->failed());
    EXPECT_EQ(b->failure(), term::kDdpNoBuffer) << term_name(b->failure());
}

TEST_F(Rfc7306Pair, AResponderWithForeignMemoryServesAtomicsThroughItsOwner) {
    ForeignOwner fb;
    fb.add_foreign_region(0x500, 64, 64, kAtomicAccess, 1, 0x1000);
    const uint64_t start = 40;
    std::memcpy(fb.memory.data() + 64 + 16, &start, 8);
    EngineConfig cb = config(true);
    cb.foreign_memory = true;
    Engine fe(fb, cb);
    std::vector<uint8_t> result(8, 0);
    ASSERT_OK(a->post(atomic_wr(1, AtomicOp::fetch_add, 0x1010, result, 2)));
    settle(*a, fe, 5);
    ASSERT_FALSE(fe.failed()) << term_name(fe.failure());
    EXPECT_EQ(load64(result, 0), 40u);
    uint64_t now = 0;
    std::memcpy(&now, fb.memory.data() + 64 + 16, 8);
    EXPECT_EQ(now, 42u);
    EXPECT_EQ(fb.atomics, 1u);
    EXPECT_FALSE(fb.out_of_bounds);
}

// Several queue pairs of one responder on one counter: no increment is lost (each responder engine runs on a thread
// of its own, as each QP's stream does in a provider).
TEST(Rfc7306Atomicity, FetchAddsFromSeveralQueuePairsOnOneCounterLoseNothing) {
    constexpr int kPairs = 4;
    constexpr int kEach = 20000;
    std::vector<uint8_t> counter(8, 0);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int p = 0; p < kPairs; ++p) {
        threads.emplace_back([&counter, &failures] {
            Owner oa, ob;
            ob.add_region(0x500, counter, kAtomicAccess, 1, 0x1000);
            Engine a(oa, config(true)), b(ob, config(true));
            auto frame = std::make_unique<TxFrame>();
            auto pump = [&frame](Engine &from, Engine &to) {
                size_t n = 0;
                while (from.next_frame(*frame)) {
                    auto bytes = harness::bytes_of(*frame);
                    to.receiver().feed(bytes);
                    from.frame_sent();
                    ++n;
                }
                return n;
            };
            std::vector<uint8_t> result(8, 0);
            for (int i = 0; i < kEach; ++i) {
                if (!a.post(atomic_wr(static_cast<uint64_t>(i), AtomicOp::fetch_add, 0x1000, result, 1)).ok()) {
                    ++failures;
                    return;
                }
                while (pump(a, b) + pump(b, a) > 0) {
                }
            }
            if (a.failed() || b.failed() || oa.completions.size() != kEach) ++failures;
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(load64(counter, 0), uint64_t{kPairs} * kEach) << "an increment was lost";
}

}  // namespace
