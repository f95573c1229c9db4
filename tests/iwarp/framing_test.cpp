// MPA framing: every FPDU of the siw captures decodes and its CRC checks; our transmitter reproduces the captured
// bytes; every split of a stream gives the same result; markers round-trip and a bad one is caught.
#include <memory>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "iwarp/crc32c.hpp"
#include "iwarp/framing.hpp"
#include "iwarp/mpa.hpp"
#include "vectors.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;

// A sink that accepts everything and records each segment's header and payload.
class RecordingSink : public FpduSink {
public:
    struct Segment {
        Header header;
        std::vector<uint8_t> payload;
    };
    std::optional<TermCode> on_header(const Header &h, size_t payload_len) override {
        segments.push_back({h, std::vector<uint8_t>(payload_len)});
        return std::nullopt;
    }
    std::span<uint8_t> payload_target(size_t offset, size_t remaining) override {
        auto &p = segments.back().payload;
        // Hand out at most 7 bytes at a time so placement in pieces is exercised too.
        return std::span<uint8_t>(p.data() + offset, std::min<size_t>(remaining, 7));
    }
    std::optional<TermCode> on_segment_end() override {
        ++completed;
        return std::nullopt;
    }
    std::vector<Segment> segments;
    size_t completed = 0;
};

size_t annotated_frames(const std::string &hex) {
    std::ifstream in(vectors::path(hex));
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) n += line.rfind("# @", 0) == 0 ? 1 : 0;
    return n;
}

struct Capture {
    std::string name;
    bool crc;
    MpaKind first;
};
const Capture kCaptures[] = {{"duo.c2s", false, MpaKind::request},
                             {"duo.s2c", false, MpaKind::reply},
                             {"duo-crc.c2s", true, MpaKind::request},
                             {"duo-crc.s2c", true, MpaKind::reply}};

// The stream after the MPA frame that opens it.
std::vector<uint8_t> fpdu_stream(const Capture &c) {
    auto bytes = vectors::bin(c.name + ".bin");
    auto pd = decode_mpa_header(bytes, c.first);
    EXPECT_OK(pd);
    return std::vector<uint8_t>(bytes.begin() + static_cast<long>(kMpaFrameHeaderLen + *pd), bytes.end());
}

std::vector<uint8_t> reencode(const std::vector<RecordingSink::Segment> &segments, FramingOptions opts) {
    Transmitter tx(opts);
    std::vector<uint8_t> out;
    TxFrame frame;
    for (const auto &s : segments) {
        iovec v{const_cast<uint8_t *>(s.payload.data()), s.payload.size()};
        tx.build(s.header, {}, std::span<const iovec>(&v, s.payload.empty() ? 0 : 1), frame);
        for (size_t i = 0; i < frame.iovcnt; ++i) {
            auto *p = static_cast<const uint8_t *>(frame.iov[i].iov_base);
            out.insert(out.end(), p, p + frame.iov[i].iov_len);
        }
    }
    return out;
}

// The bytes a frame's gather list sends.
std::vector<uint8_t> wire_of(const TxFrame &f) {
    std::vector<uint8_t> w;
    for (size_t i = 0; i < f.iovcnt; ++i) {
        auto *p = static_cast<const uint8_t *>(f.iov[i].iov_base);
        w.insert(w.end(), p, p + f.iov[i].iov_len);
    }
    return w;
}

// The one segment a receiver with @p opts takes from @p wire, which must be one whole, valid FPDU.
RecordingSink::Segment one_segment(const std::vector<uint8_t> &wire, FramingOptions opts) {
    RecordingSink sink;
    Receiver rx(sink, opts);
    EXPECT_EQ(rx.feed(wire), wire.size());
    EXPECT_FALSE(rx.failed()) << term_name(rx.failure());
    EXPECT_EQ(sink.segments.size(), 1u);
    return sink.segments.empty() ? RecordingSink::Segment{} : sink.segments[0];
}

TEST(Framing, SiwCapturesDecodeCheckAndReencode) {
    for (const auto &c : kCaptures) {
        SCOPED_TRACE(c.name);
        auto stream = fpdu_stream(c);
        RecordingSink sink;
        Receiver rx(sink, FramingOptions{c.crc, false});
        EXPECT_EQ(rx.feed(stream), stream.size());
        ASSERT_FALSE(rx.failed()) << term_name(rx.failure());
        EXPECT_EQ(sink.completed, annotated_frames(c.name + ".hex"));
        EXPECT_EQ(rx.fpdus(), sink.completed);
        // Same operations and parameters give the same bytes, CRCs included.
        EXPECT_EQ(reencode(sink.segments, FramingOptions{c.crc, false}), stream);
    }
}

TEST(Framing, SiwCaptureFieldsAreRight) {
    RecordingSink sink;
    Receiver rx(sink, FramingOptions{true, false});
    auto stream = fpdu_stream(kCaptures[3]);  // duo-crc.s2c
    rx.feed(stream);
    ASSERT_GE(sink.segments.size(), 3u);
    const auto &rr = sink.segments[0];
    EXPECT_EQ(rr.header.op(), Opcode::read_request);
    EXPECT_EQ(rr.header.qn, 1u);
    EXPECT_EQ(rr.header.msn, 1u);
    ASSERT_EQ(rr.payload.size(), kReadRequestLen);
    EXPECT_EQ(decode_read_request(rr.payload.data()).size, 64u);
    EXPECT_EQ(sink.segments[1].header.op(), Opcode::send);
    EXPECT_EQ(sink.segments[2].header.op(), Opcode::rdma_write);
    EXPECT_EQ(sink.segments[2].header.stag, 0x8c182400u);
    EXPECT_EQ(std::string(sink.segments[2].payload.begin(), sink.segments[2].payload.begin() + 11), "rdma-ping-0");
}

TEST(Framing, EverySplitPointGivesTheSameResult) {
    for (const auto &c : kCaptures) {
        SCOPED_TRACE(c.name);
        auto stream = fpdu_stream(c);
        RecordingSink whole;
        Receiver rx_whole(whole, FramingOptions{c.crc, false});
        rx_whole.feed(stream);
        for (size_t split = 0; split <= stream.size(); ++split) {
            RecordingSink sink;
            Receiver rx(sink, FramingOptions{c.crc, false});
            rx.feed(std::span<const uint8_t>(stream.data(), split));
            rx.feed(std::span<const uint8_t>(stream.data() + split, stream.size() - split));
            ASSERT_FALSE(rx.failed()) << "split " << split;
            ASSERT_EQ(sink.completed, whole.completed) << "split " << split;
            for (size_t i = 0; i < sink.segments.size(); ++i) {
                ASSERT_EQ(sink.segments[i].header, whole.segments[i].header);
                ASSERT_EQ(sink.segments[i].payload, whole.segments[i].payload);
            }
        }
        RecordingSink bytewise;
        Receiver rx_bytes(bytewise, FramingOptions{c.crc, false});
        for (uint8_t b : stream) rx_bytes.feed(std::span<const uint8_t>(&b, 1));
        EXPECT_EQ(bytewise.completed, whole.completed);
    }
}

TEST(Framing, CorruptedByteIsACrcError) {
    auto stream = fpdu_stream(kCaptures[2]);
    for (size_t at : {size_t{0} + 5, size_t{50}, stream.size() - 1}) {
        auto bad = stream;
        bad[at] ^= 0x10;
        RecordingSink sink;
        Receiver rx(sink, FramingOptions{true, false});
        rx.feed(bad);
        ASSERT_TRUE(rx.failed()) << at;
        EXPECT_EQ(rx.failure(), term::kLlpCrcError) << at;
    }
}

// A Read Response's source is the responder's memory, which its owner may write while the frame waits for the
// socket: with a snapshot, the bytes sent are the bytes the CRC covers (dtest rewrites the buffer its peer reads).
TEST(Framing, SnapshotKeepsTheCrcTrueWhenTheSourceChanges) {
    for (bool snapshot : {true, false}) {
        std::vector<uint8_t> src(4096, 0x5a);
        Header h;
        h.tagged = true;
        h.opcode = static_cast<uint8_t>(Opcode::read_response);
        h.stag = 0x1234;
        h.to = 0;
        h.last = true;
        Transmitter tx(FramingOptions{true, false});
        auto frame = std::make_unique<TxFrame>();
        iovec v{src.data(), src.size()};
        tx.build(h, {}, std::span<const iovec>(&v, 1), *frame, snapshot);
        std::fill(src.begin(), src.end(), 0xa5);  // the owner writes the buffer before the socket takes the frame
        const std::vector<uint8_t> wire = wire_of(*frame);
        RecordingSink sink;
        Receiver rx(sink, FramingOptions{true, false});
        rx.feed(wire);
        EXPECT_EQ(rx.failed(), !snapshot) << "snapshot " << snapshot;
        if (snapshot) {
            ASSERT_EQ(sink.segments.size(), 1u);
            EXPECT_EQ(sink.segments[0].payload, std::vector<uint8_t>(4096, 0x5a));  // what was read when framed
        }
    }
}

// A small FPDU (payload up to kCompactPayloadMax, no markers) is one gather entry in the frame's own memory, with
// the bytes a gather list over the payload would send: the receiver reads the same header and payload and its CRC
// checks. Its payload is a copy, so the source may change once it is framed. A larger one, or one with markers,
// keeps the gather list over the payload.
TEST(Framing, SmallFpdusAreFramedWholeInOnePiece) {
    for (bool crc : {true, false}) {
        for (bool markers : {false, true}) {
            for (size_t len : {size_t{0}, size_t{1}, size_t{8}, size_t{511}, kCompactPayloadMax,
                               kCompactPayloadMax + 1, size_t{4096}}) {
                SCOPED_TRACE("crc " + std::to_string(crc) + " markers " + std::to_string(markers) + " payload " +
                             std::to_string(len));
                std::vector<uint8_t> src(len);
                for (size_t i = 0; i < len; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
                const std::vector<uint8_t> original = src;
                Header h;  // a Send, in three pieces when it has three bytes
                h.opcode = static_cast<uint8_t>(Opcode::send);
                h.qn = 0;
                h.msn = 5;
                std::vector<iovec> pieces;
                const size_t a = len / 3, b = len / 3;
                if (a > 0) pieces.push_back(iovec{src.data(), a});
                if (b > 0) pieces.push_back(iovec{src.data() + a, b});
                if (len - a - b > 0) pieces.push_back(iovec{src.data() + a + b, len - a - b});
                Transmitter tx(FramingOptions{crc, markers});
                auto frame = std::make_unique<TxFrame>();
                tx.build(h, {}, pieces, *frame);
                const bool whole = !markers && len <= kCompactPayloadMax;
                if (whole) {
                    ASSERT_EQ(frame->iovcnt, 1u);
                    EXPECT_EQ(frame->iov[0].iov_base, static_cast<void *>(frame->compact));
                    std::fill(src.begin(), src.end(), 0xee);  // the source changes after framing
                } else {
                    EXPECT_GT(frame->iovcnt, 1u);
                }
                const std::vector<uint8_t> wire = wire_of(*frame);
                EXPECT_EQ(wire.size(), frame->bytes);
                EXPECT_EQ(wire.size() % 4, 0u);
                EXPECT_EQ(tx.position(), frame->bytes);
                const RecordingSink::Segment got = one_segment(wire, FramingOptions{crc, markers});
                EXPECT_EQ(got.header, h);
                EXPECT_EQ(got.payload, original);
            }
        }
    }
}

// A frame built with its CRC deferred is the same frame once finish_crc() has run: byte for byte what build()
// without the deferral gives, and the receiver checks its CRC. Only a payload of kDeferCrcMin bytes or more, with
// CRC on and no markers, is deferred (a snapshot's CRC then covers the copy); for the rest the flag changes nothing.
TEST(Framing, ADeferredCrcIsTheCrcBuildWouldHaveWritten) {
    for (bool crc : {true, false}) {
        for (bool markers : {false, true}) {
            for (bool snapshot : {false, true}) {
                for (size_t len : {size_t{600}, kDeferCrcMin - 1, kDeferCrcMin, size_t{65000}}) {
                    SCOPED_TRACE("crc " + std::to_string(crc) + " markers " + std::to_string(markers) + " snapshot " +
                                 std::to_string(snapshot) + " payload " + std::to_string(len));
                    if (markers && len > max_ulpdu(true) - kTaggedHeaderLen) continue;
                    std::vector<uint8_t> src(len);
                    for (size_t i = 0; i < len; ++i) src[i] = static_cast<uint8_t>(i * 13 + (i >> 9));
                    Header h;
                    h.tagged = true;
                    h.opcode = static_cast<uint8_t>(Opcode::rdma_write);
                    h.stag = 0x77;
                    h.to = 0x1000;
                    iovec v{src.data(), len};
                    Transmitter now(FramingOptions{crc, markers}), later(FramingOptions{crc, markers});
                    auto plain = std::make_unique<TxFrame>(), deferred = std::make_unique<TxFrame>();
                    now.build(h, {}, std::span<const iovec>(&v, 1), *plain, snapshot);
                    later.build(h, {}, std::span<const iovec>(&v, 1), *deferred, snapshot, true);
                    EXPECT_FALSE(plain->crc_pending);
                    const bool deferrable = crc && !markers && len >= kDeferCrcMin;
                    EXPECT_EQ(deferred->crc_pending, deferrable);
                    if (deferrable) {
                        // The CRC field is the last gather entry, and it is not written yet.
                        EXPECT_EQ(deferred->iov[deferred->iovcnt - 1].iov_len, kMpaCrcLen);
                        EXPECT_NE(wire_of(*deferred), wire_of(*plain));
                    }
                    finish_crc(*deferred);
                    EXPECT_FALSE(deferred->crc_pending);
                    const std::vector<uint8_t> wire = wire_of(*deferred);
                    EXPECT_EQ(wire, wire_of(*plain));
                    EXPECT_EQ(later.position(), now.position());
                    EXPECT_EQ(one_segment(wire, FramingOptions{crc, markers}).payload, src);
                }
            }
        }
    }
}

TEST(Framing, UlpduShorterThanItsHeaderFails) {
    std::vector<uint8_t> bad = {0x00, 0x08, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0};
    RecordingSink sink;
    Receiver rx(sink, FramingOptions{false, false});
    rx.feed(bad);
    ASSERT_TRUE(rx.failed());
    EXPECT_EQ(rx.failure(), term::kRdmapCatastrophicStream);
    EXPECT_TRUE(sink.segments.empty());
}

TEST(Framing, SinkVerdictStopsTheStream) {
    struct Refusing : RecordingSink {
        std::optional<TermCode> on_header(const Header &, size_t) override { return term::kDdpInvalidQn; }
    } sink;
    Receiver rx(sink, FramingOptions{false, false});
    auto stream = fpdu_stream(kCaptures[0]);
    size_t used = rx.feed(stream);
    EXPECT_TRUE(rx.failed());
    EXPECT_EQ(rx.failure(), term::kDdpInvalidQn);
    EXPECT_LT(used, stream.size());
    EXPECT_EQ(rx.current_header().size(), kUntaggedHeaderLen);
    EXPECT_TRUE(rx.next_buffer().empty());
}

TEST(Framing, MulpduFollowsRfc5044) {
    EXPECT_EQ(mulpdu(1460, false), 1454u);
    EXPECT_EQ(mulpdu(1460, true), 1442u);
    EXPECT_EQ(mulpdu(1448, false), 1442u);
    EXPECT_EQ(mulpdu(1460, false, 16384), 16384u);
    EXPECT_EQ(mulpdu(1460, false, 1 << 20), kMaxUlpduLen);
    EXPECT_EQ(mulpdu(1460, true, 1 << 20), max_ulpdu(true));
    EXPECT_LT(max_ulpdu(true), kMaxUlpduLen);
}

// Random segments through transmitter and receiver with every combination of CRC and markers, fed in random chunks.
TEST(Framing, RoundTripWithMarkersAndCrc) {
    std::mt19937 rng(42);
    for (bool crc : {false, true}) {
        for (bool markers : {false, true}) {
            SCOPED_TRACE(std::string("crc=") + (crc ? "on" : "off") + " markers=" + (markers ? "on" : "off"));
            FramingOptions opts{crc, markers};
            std::vector<RecordingSink::Segment> sent;
            for (int i = 0; i < 60; ++i) {
                RecordingSink::Segment s;
                s.header.tagged = (i % 3) == 0;
                s.header.opcode = static_cast<uint8_t>(s.header.tagged ? Opcode::rdma_write : Opcode::send);
                if (s.header.tagged) {
                    s.header.stag = 0x100u + static_cast<uint32_t>(i);
                    s.header.to = 4096ull * static_cast<uint64_t>(i);
                } else {
                    s.header.msn = static_cast<uint32_t>(i + 1);
                    s.header.mo = 16u * static_cast<uint32_t>(i);
                }
                size_t len = i == 7 ? max_ulpdu(markers) - s.header.size() : std::uniform_int_distribution<size_t>(0, 3000)(rng);
                s.payload.resize(len);
                for (auto &b : s.payload) b = static_cast<uint8_t>(rng());
                sent.push_back(std::move(s));
            }
            auto stream = reencode(sent, opts);
            if (markers) {
                // Markers really are there: one at offset 0 pointing at the first FPDU.
                ASSERT_GE(stream.size(), 4u);
                EXPECT_EQ(be::get32(stream.data()), 0u);
            }
            RecordingSink sink;
            Receiver rx(sink, opts);
            size_t off = 0;
            while (off < stream.size()) {
                size_t n = std::min(stream.size() - off, std::uniform_int_distribution<size_t>(1, 1500)(rng));
                ASSERT_EQ(rx.feed(std::span<const uint8_t>(stream.data() + off, n)), n) << term_name(rx.failure());
                off += n;
            }
            ASSERT_EQ(sink.segments.size(), sent.size());
            for (size_t i = 0; i < sent.size(); ++i) {
                EXPECT_EQ(sink.segments[i].header, sent[i].header);
                EXPECT_EQ(sink.segments[i].payload, sent[i].payload);
            }
        }
    }
}

TEST(Framing, BadMarkerIsAMarkerError) {
    RecordingSink::Segment s;
    s.header.opcode = static_cast<uint8_t>(Opcode::send);
    s.payload.assign(2000, 0xab);
    auto stream = reencode({s}, FramingOptions{false, true});
    // The marker at stream offset 512 must point back 512 bytes to the FPDU start.
    ASSERT_EQ(be::get16(&stream[512 + 2]), 512);
    stream[512 + 3] ^= 0x04;
    RecordingSink sink;
    Receiver rx(sink, FramingOptions{false, true});
    rx.feed(stream);
    ASSERT_TRUE(rx.failed());
    EXPECT_EQ(rx.failure(), term::kLlpMarkerError);
}

}  // namespace
