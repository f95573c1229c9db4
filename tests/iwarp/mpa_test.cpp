// MPA frames and negotiation, byte-exact against the siw captures and against the RFC 5044/6581 rules.
#include <gtest/gtest.h>

#include <vector>

#include "iwarp/mpa.hpp"
#include "vectors.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;

std::vector<uint8_t> encode(const MpaFrame &f) {
    std::vector<uint8_t> b(kMpaFrameHeaderLen + kMpaMaxPrivateData + 8);
    auto n = encode_mpa(f, b);
    EXPECT_OK(n) << n.error().to_string();
    b.resize(n ? *n : 0);
    return b;
}

TermCode term_of(const rdma::Error &e) {
    TermCode t;
    EXPECT_TRUE(term_from_detail(e.detail(), t)) << e.to_string();
    return t;
}

MpaConfig siw_like() {
    MpaConfig c;
    c.crc = false;
    c.peer2peer = false;
    c.ird = 1;
    c.ord = 1;
    return c;
}

TEST(Mpa, DecodesSiwDefaultRequest) {
    auto bytes = vectors::bin("cli1.mpa-req.bin");
    ASSERT_EQ(bytes.size(), 24u);
    auto f = decode_mpa(bytes, MpaKind::request);
    ASSERT_OK(f) << f.error().to_string();
    EXPECT_EQ(f->revision, 2);
    EXPECT_TRUE(f->enhanced);
    EXPECT_FALSE(f->crc);
    EXPECT_FALSE(f->markers);
    EXPECT_FALSE(f->peer2peer);
    EXPECT_EQ(f->ird, 1);
    EXPECT_EQ(f->ord, 1);
    EXPECT_TRUE(f->private_data.empty());
    // The same request from our encoder, configured like siw's defaults.
    EXPECT_EQ(encode(make_request(siw_like(), {})), bytes);
}

TEST(Mpa, PeerToPeerExchangeMatchesSiw) {
    auto req_bytes = vectors::hex_frames("p2p.mpa-req.hex").at(0);
    auto rep_bytes = vectors::hex_frames("p2p.mpa-rep.hex").at(0);
    auto req = decode_mpa(req_bytes, MpaKind::request);
    ASSERT_OK(req);
    EXPECT_TRUE(req->peer2peer);
    EXPECT_TRUE(req->crc);
    EXPECT_EQ(req->rtr, kRtrWrite | kRtrRead);

    MpaConfig cfg = siw_like();
    cfg.crc = true;
    cfg.peer2peer = true;
    EXPECT_EQ(encode(make_request(cfg, {})), req_bytes);

    auto resp = respond(cfg, *req);
    ASSERT_OK(resp) << resp.error().to_string();
    EXPECT_EQ(encode(resp->reply), rep_bytes);  // we choose Write, as siw does
    EXPECT_TRUE(resp->result.peer2peer);
    EXPECT_EQ(resp->result.rtr, kRtrWrite);
    EXPECT_TRUE(resp->result.crc);

    auto rep = decode_mpa(rep_bytes, MpaKind::reply);
    ASSERT_OK(rep);
    auto done = complete(cfg, *req, *rep);
    ASSERT_OK(done) << done.error().to_string();
    EXPECT_EQ(done->rtr, kRtrWrite);
    EXPECT_EQ(done->ird, 1);
    EXPECT_EQ(done->ord, 1);
}

TEST(Mpa, Revision1WithPrivateData) {
    MpaConfig cfg;
    cfg.revision = 1;
    const std::vector<uint8_t> pd = {'h', 'e', 'l', 'l', 'o'};
    MpaFrame req = make_request(cfg, pd);
    auto bytes = encode(req);
    ASSERT_EQ(bytes.size(), 25u);
    EXPECT_EQ(bytes[16], 0x40);  // C only
    EXPECT_EQ(bytes[17], 1);
    EXPECT_EQ(be::get16(&bytes[18]), 5);
    auto d = decode_mpa(bytes, MpaKind::request);
    ASSERT_OK(d);
    EXPECT_FALSE(d->enhanced);
    EXPECT_EQ(std::vector<uint8_t>(d->private_data.begin(), d->private_data.end()), pd);
}

TEST(Mpa, PrivateDataLimit) {
    std::vector<uint8_t> pd(kMpaMaxPrivateData - kMpaIrdOrdLen);
    MpaConfig cfg;
    MpaFrame ok = make_request(cfg, pd);
    std::vector<uint8_t> b(kMpaFrameHeaderLen + kMpaMaxPrivateData);
    EXPECT_OK(encode_mpa(ok, b));
    std::vector<uint8_t> big(kMpaMaxPrivateData - kMpaIrdOrdLen + 1);
    auto too_big = encode_mpa(make_request(cfg, big), b);
    ASSERT_FALSE(too_big);
    EXPECT_STATUS(too_big, RI_EMSGSIZE);
    // A received header announcing more than 512 bytes is refused before reading them.
    b[18] = 0x02;
    b[19] = 0x01;
    auto hdr = decode_mpa_header(b, MpaKind::request);
    ASSERT_FALSE(hdr);
    EXPECT_STATUS(hdr, RI_EMSGSIZE);
}

TEST(Mpa, WrongKeyIsRefused) {
    auto bytes = vectors::bin("cli1.mpa-req.bin");
    auto as_reply = decode_mpa(bytes, MpaKind::reply);
    ASSERT_FALSE(as_reply);
    EXPECT_STATUS(as_reply, RI_EPROTO);
    EXPECT_EQ(term_of(as_reply.error()), term::kLlpInvalidMpaFrame);
    bytes[0] = 'X';
    EXPECT_FALSE(decode_mpa(bytes, MpaKind::request));
    auto truncated = decode_mpa(std::span<const uint8_t>(bytes.data(), 10), MpaKind::request);
    EXPECT_FALSE(truncated);
}

TEST(Mpa, UnsupportedRevisionIsRejected) {
    auto bytes = vectors::bin("cli1.mpa-req.bin");
    bytes[17] = 7;
    auto req = decode_mpa(bytes, MpaKind::request);
    ASSERT_OK(req);
    auto r = respond(MpaConfig{}, *req);
    ASSERT_FALSE(r);
    EXPECT_EQ(term_of(r.error()), term::kLlpInvalidMpaFrame);
    MpaFrame rej = reject_reply(*req, {});
    EXPECT_TRUE(rej.reject);
    EXPECT_EQ(rej.revision, 1);
}

TEST(Mpa, NewerRevisionOfferedOlderAnswered) {
    MpaConfig initiator;  // revision 2
    MpaConfig responder;
    responder.revision = 1;
    MpaFrame req = make_request(initiator, {});
    auto resp = respond(responder, req);
    ASSERT_OK(resp);
    EXPECT_EQ(resp->reply.revision, 1);
    EXPECT_FALSE(resp->reply.enhanced);
    auto rep_bytes = encode(resp->reply);
    auto rep = decode_mpa(rep_bytes, MpaKind::reply);
    ASSERT_OK(rep);
    auto done = complete(initiator, req, *rep);
    ASSERT_OK(done) << done.error().to_string();
    EXPECT_EQ(done->revision, 1);
    EXPECT_FALSE(done->peer2peer);
}

TEST(Mpa, CrcWhenEitherSideAsks) {
    for (bool ini : {false, true}) {
        for (bool res : {false, true}) {
            MpaConfig a, b;
            a.crc = ini;
            b.crc = res;
            MpaFrame req = make_request(a, {});
            auto resp = respond(b, req);
            ASSERT_OK(resp);
            auto done = complete(a, req, resp->reply);
            ASSERT_OK(done);
            EXPECT_EQ(resp->result.crc, ini || res);
            EXPECT_EQ(done->crc, ini || res);
        }
    }
}

TEST(Mpa, MarkersOnlyWhenAllowed) {
    MpaConfig wants;
    wants.markers_wanted = true;
    MpaFrame req = make_request(wants, {});
    MpaConfig refuses;
    auto r = respond(refuses, req);
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_EOPNOTSUPP);
    MpaConfig allows;
    allows.markers_allowed = true;
    auto ok = respond(allows, req);
    ASSERT_OK(ok);
    EXPECT_TRUE(ok->result.markers_tx);
    EXPECT_FALSE(ok->result.markers_rx);
    auto done = complete(wants, req, ok->reply);
    ASSERT_OK(done);
    EXPECT_TRUE(done->markers_rx);
    EXPECT_FALSE(done->markers_tx);
}

TEST(Mpa, NoMatchingRtrIsATerminate) {
    MpaConfig ini;
    ini.rtr = kRtrSend;
    MpaConfig res;
    res.rtr = kRtrWrite | kRtrRead;
    auto r = respond(res, make_request(ini, {}));
    ASSERT_FALSE(r);
    EXPECT_EQ(term_of(r.error()), term::kLlpNoMatchingRtr);

    // An initiator that gets an RTR type it did not offer sends a Terminate too.
    MpaFrame req = make_request(ini, {});
    MpaFrame bad_reply;
    bad_reply.kind = MpaKind::reply;
    bad_reply.revision = 2;
    bad_reply.enhanced = true;
    bad_reply.peer2peer = true;
    bad_reply.rtr = kRtrRead;
    auto c = complete(ini, req, bad_reply);
    ASSERT_FALSE(c);
    EXPECT_EQ(term_of(c.error()), term::kLlpNoMatchingRtr);
}

TEST(Mpa, InsufficientIrdIsATerminate) {
    MpaConfig ini;
    ini.ird = 2;
    MpaFrame req = make_request(ini, {});
    MpaFrame reply;
    reply.kind = MpaKind::reply;
    reply.revision = 2;
    reply.enhanced = true;
    reply.ird = 4;
    reply.ord = 8;  // more reads than the initiator can serve
    reply.peer2peer = true;
    reply.rtr = kRtrWrite;
    auto c = complete(ini, req, reply);
    ASSERT_FALSE(c);
    EXPECT_EQ(term_of(c.error()), term::kLlpInsufficientIrd);
}

TEST(Mpa, IrdOrdAreCrossedAndClamped) {
    MpaConfig ini;
    ini.ird = 3;
    ini.ord = 7;
    MpaConfig res;
    res.ird = 5;
    res.ord = 2;
    MpaFrame req = make_request(ini, {});
    auto r = respond(res, req);
    ASSERT_OK(r);
    EXPECT_EQ(r->result.ird, 5);  // min(own 5, peer ORD 7)
    EXPECT_EQ(r->result.ord, 2);  // min(own 2, peer IRD 3)
    auto c = complete(ini, req, r->reply);
    ASSERT_OK(c);
    EXPECT_EQ(c->ird, 3);
    EXPECT_EQ(c->ord, 5);  // min(own 7, peer IRD 5)
}

TEST(Mpa, RejectCarriesPrivateData) {
    const std::vector<uint8_t> why = {'b', 'u', 's', 'y'};
    MpaFrame req = make_request(MpaConfig{}, {});
    auto bytes = encode(reject_reply(req, why));
    EXPECT_EQ(bytes[16] & 0x20, 0x20);
    auto rep = decode_mpa(bytes, MpaKind::reply);
    ASSERT_OK(rep);
    EXPECT_TRUE(rep->reject);
    auto c = complete(MpaConfig{}, req, *rep);
    ASSERT_FALSE(c);
    EXPECT_STATUS(c, RI_ECONNREFUSED);
}

TEST(Mpa, RtrMessagesAreWhatSiwSends) {
    // p2p.after-rep.hex: the zero-length Write RTR, 00 0e c1 40 00 00 00 01 00 ... 00 + CRC.
    auto frames = vectors::hex_frames("p2p.after-rep.hex");
    ASSERT_FALSE(frames.empty());
    RtrMessage w = make_rtr(kRtrWrite, 1);
    std::vector<uint8_t> hdr(w.header.size());
    encode_header(w.header, hdr.data());
    EXPECT_EQ(std::vector<uint8_t>(frames[0].begin() + 2, frames[0].begin() + 16), hdr);
    RtrMessage r = make_rtr(kRtrRead, 1);
    EXPECT_TRUE(r.has_read);
    EXPECT_EQ(r.header.qn, 1u);
    EXPECT_EQ(r.read.size, 0u);
    EXPECT_EQ(r.read.src_stag, 1u);
}

}  // namespace
