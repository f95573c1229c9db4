// DDP/RDMAP headers, Read Request and Terminate: byte-exact against bytes taken from the siw captures.
#include <gtest/gtest.h>

#include <vector>

#include "iwarp/wire.hpp"

namespace {

using namespace iwarp;

std::vector<uint8_t> encoded(const Header &h) {
    std::vector<uint8_t> b(h.size());
    encode_header(h, b.data());
    return b;
}

TEST(Wire, UntaggedSendMatchesSiw) {
    // duo.c2s @0 after the MPA length: Send, last, QN 0, MSN 1, MO 0.
    const std::vector<uint8_t> siw = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
    Header h;
    h.opcode = static_cast<uint8_t>(Opcode::send);
    h.qn = 0;
    h.msn = 1;
    EXPECT_EQ(encoded(h), siw);
    Header d = decode_header(siw.data());
    EXPECT_EQ(d, h);
    EXPECT_EQ(header_size(siw[0]), kUntaggedHeaderLen);
}

TEST(Wire, TaggedReadResponseMatchesSiw) {
    // duo-crc.c2s @40: Read Response to STag 0x494f5500, TO 0x556d069ad130.
    const std::vector<uint8_t> siw = {0xc1, 0x42, 0x49, 0x4f, 0x55, 0x00, 0x00, 0x00,
                                      0x55, 0x6d, 0x06, 0x9a, 0xd1, 0x30};
    Header h = decode_header(siw.data());
    EXPECT_TRUE(h.tagged);
    EXPECT_TRUE(h.last);
    EXPECT_EQ(h.ddp_version, 1);
    EXPECT_EQ(h.rdmap_version, 1);
    EXPECT_EQ(h.op(), Opcode::read_response);
    EXPECT_EQ(h.stag, 0x494f5500u);
    EXPECT_EQ(h.to, 0x556d069ad130u);
    EXPECT_EQ(encoded(h), siw);
}

TEST(Wire, ReservedAndVersionFieldsRoundTrip) {
    Header h;
    h.tagged = true;
    h.last = false;
    h.ddp_version = 2;
    h.ddp_reserved = 0x5;
    h.rdmap_version = 3;
    h.rdmap_reserved = 2;
    h.opcode = 0xf;
    h.stag = 0xdeadbeef;
    h.to = 0x0123456789abcdefull;
    auto b = encoded(h);
    EXPECT_EQ(b[0], 0x80 | 0x14 | 0x2);
    EXPECT_EQ(b[1], 0xc0 | 0x20 | 0xf);
    EXPECT_EQ(decode_header(b.data()), h);
}

TEST(Wire, ReadRequestMatchesSiw) {
    // duo-crc.s2c @0 payload.
    const std::vector<uint8_t> siw = {0x49, 0x4f, 0x55, 0x00, 0x00, 0x00, 0x55, 0x6d, 0x06, 0x9a,
                                      0xd1, 0x30, 0x00, 0x00, 0x00, 0x40, 0x72, 0xc6, 0x3b, 0x00,
                                      0x00, 0x00, 0x55, 0xb1, 0xa8, 0xce, 0x44, 0x50};
    ReadRequest r = decode_read_request(siw.data());
    EXPECT_EQ(r, (ReadRequest{0x494f5500, 0x556d069ad130, 64, 0x72c63b00, 0x55b1a8ce4450}));
    std::vector<uint8_t> out(kReadRequestLen);
    encode_read_request(r, out.data());
    EXPECT_EQ(out, siw);
}

TEST(Wire, TerminateWithHeaders) {
    Terminate t;
    t.code = term::kRdmapBaseBounds;
    t.hdrct = kTermHdrM | kTermHdrD | kTermHdrR;
    t.ddp_segment_length = 28;
    Header offending;
    offending.opcode = static_cast<uint8_t>(Opcode::read_request);
    offending.qn = 1;
    offending.msn = 3;
    encode_header(offending, t.ddp_header);
    encode_read_request(ReadRequest{1, 2, 3, 4, 5}, t.rdmap_header);
    std::vector<uint8_t> b(kTerminateMaxLen);
    ASSERT_EQ(encode_terminate(t, b.data()), t.size());
    EXPECT_EQ(t.size(), kTerminateMaxLen);
    EXPECT_EQ(b[0], 0x01);  // layer 0, etype 1
    EXPECT_EQ(b[1], 0x01);  // base or bounds
    EXPECT_EQ(b[2], 0xe0);
    EXPECT_EQ(b[3], 0x00);
    Terminate d;
    ASSERT_TRUE(decode_terminate(b, d));
    EXPECT_EQ(d.code, term::kRdmapBaseBounds);
    EXPECT_EQ(d.ddp_segment_length, 28);
    EXPECT_EQ(decode_header(d.ddp_header), offending);
    EXPECT_EQ(decode_read_request(d.rdmap_header), (ReadRequest{1, 2, 3, 4, 5}));
}

TEST(Wire, TerminateControlOnly) {
    Terminate t;
    t.code = term::kLlpCrcError;
    std::vector<uint8_t> b(kTerminateMaxLen);
    ASSERT_EQ(encode_terminate(t, b.data()), 4u);
    EXPECT_EQ(be::get32(b.data()), 0x20020000u);
    EXPECT_STREQ(term_name(t.code), "MPA error: CRC error");
}

TEST(Wire, TruncatedTerminateIsRefused) {
    Terminate t;
    t.code = term::kDdpTaggedBaseBounds;
    t.hdrct = kTermHdrM | kTermHdrD;
    Header h;
    h.tagged = true;
    encode_header(h, t.ddp_header);
    std::vector<uint8_t> b(kTerminateMaxLen);
    size_t n = encode_terminate(t, b.data());
    ASSERT_EQ(n, 4u + 2u + 14u);
    Terminate d;
    for (size_t cut = 0; cut < n; ++cut) {
        EXPECT_FALSE(decode_terminate(std::span<const uint8_t>(b.data(), cut), d)) << cut;
    }
    EXPECT_TRUE(decode_terminate(std::span<const uint8_t>(b.data(), n), d));
}

TEST(Wire, EveryTermCodeHasAName) {
    for (TermCode c : {term::kRdmapInvalidStag, term::kDdpNoBuffer, term::kDdpMsnRange, term::kLlpNoMatchingRtr,
                       term::kLlpInsufficientIrd, term::kDdpUntaggedInvalidVersion}) {
        EXPECT_STRNE(term_name(c), "unknown Terminate code");
    }
    EXPECT_STREQ(term_name(TermCode{9, 9, 9}), "unknown Terminate code");
}

}  // namespace
