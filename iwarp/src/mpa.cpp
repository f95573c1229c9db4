// MPA request/reply codec and the RFC 5044 / RFC 6581 negotiation rules.
#include "iwarp/mpa.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace iwarp {
namespace {

constexpr char kRequestKey[] = "MPA ID Req Frame";
constexpr char kReplyKey[] = "MPA ID Rep Frame";
constexpr size_t kKeyLen = 16;
static_assert(sizeof(kRequestKey) == kKeyLen + 1 && sizeof(kReplyKey) == kKeyLen + 1);

constexpr uint8_t kFlagM = 0x80, kFlagC = 0x40, kFlagR = 0x20, kFlagH = 0x10, kFlagReserved = 0x0f;
constexpr uint16_t kIrdP2P = 0x8000, kIrdSendRtr = 0x4000, kOrdWriteRtr = 0x8000, kOrdReadRtr = 0x4000;

rdma::Error mpa_error(int code, const std::string &why, TermCode term = term::kLlpInvalidMpaFrame) {
    return rdma::Error(code, "MPA: " + why, term_detail(term));
}

// Preference when a responder picks one of several offered RTR types: Write costs nothing at the receiver,
// Read needs one IRD slot, Send consumes a posted receive.
uint8_t pick_rtr(uint8_t offered) noexcept {
    for (uint8_t bit : {uint8_t{kRtrWrite}, uint8_t{kRtrRead}, uint8_t{kRtrSend}}) {
        if ((offered & bit) != 0) return bit;
    }
    return 0;
}

uint16_t clamp_ird_ord(uint16_t v) noexcept { return std::min(v, kMpaIrdOrdMax); }

}  // namespace

rdma::Expected<size_t> encode_mpa(const MpaFrame &f, std::span<uint8_t> out) {
    size_t pd_len = (f.enhanced ? kMpaIrdOrdLen : 0) + f.private_data.size();
    if (pd_len > kMpaMaxPrivateData) {
        return mpa_error(RI_EMSGSIZE, "private data of " + std::to_string(pd_len) + " bytes exceeds the limit of " +
                                          std::to_string(kMpaMaxPrivateData));
    }
    if (out.size() < kMpaFrameHeaderLen + pd_len) return mpa_error(RI_EOVERFLOW, "output buffer too small");
    uint8_t *p = out.data();
    std::memcpy(p, f.kind == MpaKind::request ? kRequestKey : kReplyKey, kKeyLen);
    p[16] = static_cast<uint8_t>((f.markers ? kFlagM : 0) | (f.crc ? kFlagC : 0) | (f.reject ? kFlagR : 0) |
                                 (f.enhanced ? kFlagH : 0) | (f.reserved & kFlagReserved));
    p[17] = f.revision;
    be::put16(p + 18, static_cast<uint16_t>(pd_len));
    size_t n = kMpaFrameHeaderLen;
    if (f.enhanced) {
        uint16_t ird = static_cast<uint16_t>(clamp_ird_ord(f.ird) | (f.peer2peer ? kIrdP2P : 0) |
                                             ((f.rtr & kRtrSend) != 0 ? kIrdSendRtr : 0));
        uint16_t ord = static_cast<uint16_t>(clamp_ird_ord(f.ord) | ((f.rtr & kRtrWrite) != 0 ? kOrdWriteRtr : 0) |
                                             ((f.rtr & kRtrRead) != 0 ? kOrdReadRtr : 0));
        be::put16(p + n, ird);
        be::put16(p + n + 2, ord);
        n += kMpaIrdOrdLen;
    }
    if (!f.private_data.empty()) std::memcpy(p + n, f.private_data.data(), f.private_data.size());
    return n + f.private_data.size();
}

rdma::Expected<size_t> decode_mpa_header(std::span<const uint8_t> header, MpaKind kind) {
    if (header.size() < kMpaFrameHeaderLen) return mpa_error(RI_EPROTO, "frame shorter than its 20-byte header");
    const char *key = kind == MpaKind::request ? kRequestKey : kReplyKey;
    if (std::memcmp(header.data(), key, kKeyLen) != 0) {
        return mpa_error(RI_EPROTO, std::string("wrong key, expected \"") + key + "\"");
    }
    size_t pd_len = be::get16(&header[18]);
    if (pd_len > kMpaMaxPrivateData) {
        return mpa_error(RI_EMSGSIZE, "private data length " + std::to_string(pd_len) + " exceeds the limit of " +
                                          std::to_string(kMpaMaxPrivateData));
    }
    return pd_len;
}

rdma::Expected<MpaFrame> decode_mpa(std::span<const uint8_t> frame, MpaKind kind) {
    auto pd_len = decode_mpa_header(frame, kind);
    if (!pd_len) return pd_len.error();
    if (frame.size() != kMpaFrameHeaderLen + *pd_len) {
        return mpa_error(RI_EPROTO, "frame length does not match its private data length");
    }
    MpaFrame f;
    f.kind = kind;
    uint8_t flags = frame[16];
    f.markers = (flags & kFlagM) != 0;
    f.crc = (flags & kFlagC) != 0;
    f.reject = (flags & kFlagR) != 0;
    f.enhanced = (flags & kFlagH) != 0;
    f.reserved = flags & kFlagReserved;
    f.revision = frame[17];
    size_t off = kMpaFrameHeaderLen;
    if (f.enhanced && f.revision >= 2) {
        if (*pd_len < kMpaIrdOrdLen) return mpa_error(RI_EPROTO, "enhanced frame without IRD/ORD private data");
        uint16_t ird = be::get16(&frame[off]);
        uint16_t ord = be::get16(&frame[off + 2]);
        f.ird = ird & kMpaIrdOrdMax;
        f.ord = ord & kMpaIrdOrdMax;
        f.peer2peer = (ird & kIrdP2P) != 0;
        f.rtr = static_cast<uint8_t>(((ird & kIrdSendRtr) != 0 ? kRtrSend : 0) |
                                     ((ord & kOrdWriteRtr) != 0 ? kRtrWrite : 0) |
                                     ((ord & kOrdReadRtr) != 0 ? kRtrRead : 0));
        off += kMpaIrdOrdLen;
    } else {
        f.enhanced = false;  // revision 1 has no IRD/ORD words, whatever the bit says
    }
    f.private_data = frame.subspan(off);
    return f;
}

MpaFrame make_request(const MpaConfig &config, std::span<const uint8_t> private_data) {
    MpaFrame f;
    f.kind = MpaKind::request;
    f.markers = config.markers_wanted;
    f.crc = config.crc;
    f.revision = config.revision;
    if (config.revision >= 2) {
        f.enhanced = true;
        f.ird = clamp_ird_ord(config.ird);
        f.ord = clamp_ird_ord(config.ord);
        f.peer2peer = config.peer2peer;
        f.rtr = config.peer2peer ? config.rtr : 0;
    }
    if (config.rfc7306) f.reserved = kMpaFlagRfc7306;
    f.private_data = private_data;
    return f;
}

MpaFrame reject_reply(const MpaFrame &request, std::span<const uint8_t> private_data) {
    MpaFrame f;
    f.kind = MpaKind::reply;
    f.reject = true;
    f.revision = request.revision == 1 || request.revision == 2 ? request.revision : 1;
    f.crc = request.crc;
    f.private_data = private_data;
    return f;
}

rdma::Expected<MpaResponse> respond(const MpaConfig &config, const MpaFrame &request) {
    if (request.kind != MpaKind::request || request.reject) return mpa_error(RI_EPROTO, "request has the R bit set");
    if ((request.reserved & ~kMpaFlagRfc7306) != 0) return mpa_error(RI_EPROTO, "request has reserved flag bits set");
    if (request.revision < 1 || request.revision > 2) {
        return mpa_error(RI_EPROTO, "unsupported revision " + std::to_string(request.revision));
    }
    if (request.markers && !config.markers_allowed) {
        return mpa_error(RI_EOPNOTSUPP, "peer asks for markers, which this RNIC is configured not to send");
    }
    MpaResponse r;
    MpaFrame &reply = r.reply;
    MpaResult &res = r.result;
    reply.kind = MpaKind::reply;
    res.revision = reply.revision = std::min(request.revision, config.revision);
    // RFC 5044: CRC is used when either side asks for it.
    reply.crc = config.crc || request.crc;
    res.crc = reply.crc;
    reply.markers = config.markers_wanted;
    res.markers_tx = request.markers;
    res.markers_rx = reply.markers;
    if ((request.reserved & kMpaFlagRfc7306) != 0 && config.rfc7306) {
        reply.reserved = kMpaFlagRfc7306;
        res.rfc7306 = true;
    }
    if (res.revision >= 2 && request.enhanced) {
        reply.enhanced = res.enhanced = true;
        // Our inbound reads are the peer's outbound ones and the other way round.
        res.ird = reply.ird = std::min(clamp_ird_ord(config.ird), request.ord);
        res.ord = reply.ord = std::min(clamp_ird_ord(config.ord), request.ird);
        if (request.peer2peer) {
            uint8_t chosen = pick_rtr(request.rtr & config.rtr);
            if (chosen == 0) {
                return mpa_error(RI_ECONNREFUSED, "no RTR type offered by the peer is acceptable here",
                                 term::kLlpNoMatchingRtr);
            }
            reply.peer2peer = res.peer2peer = true;
            reply.rtr = res.rtr = chosen;
        }
    } else {
        res.ird = clamp_ird_ord(config.ird);
        res.ord = clamp_ird_ord(config.ord);
    }
    return r;
}

rdma::Expected<MpaResult> complete(const MpaConfig &config, const MpaFrame &request, const MpaFrame &reply) {
    if (reply.kind != MpaKind::reply) return mpa_error(RI_EPROTO, "expected a reply frame");
    if (reply.reject) {
        return rdma::Error(RI_ECONNREFUSED, "MPA: the peer rejected the connection",
                           term_detail(term::kLlpInvalidMpaFrame));
    }
    // A reply may agree to what the request offered, nothing else.
    if ((reply.reserved & ~(request.reserved & kMpaFlagRfc7306)) != 0) {
        return mpa_error(RI_EPROTO, "reply has reserved flag bits set");
    }
    if (reply.revision < 1 || reply.revision > request.revision) {
        return mpa_error(RI_EPROTO, "reply revision " + std::to_string(reply.revision) +
                                        " is not one the request offered");
    }
    if (reply.markers && !config.markers_allowed) {
        return mpa_error(RI_EOPNOTSUPP, "peer asks for markers, which this RNIC is configured not to send");
    }
    MpaResult res;
    res.revision = reply.revision;
    res.crc = request.crc || reply.crc;
    res.rfc7306 = (reply.reserved & kMpaFlagRfc7306) != 0;
    res.markers_tx = reply.markers;
    res.markers_rx = request.markers;
    if (reply.revision >= 2 && request.enhanced) {
        if (!reply.enhanced) return mpa_error(RI_EPROTO, "revision 2 reply without IRD/ORD");
        res.enhanced = true;
        if (reply.ord > request.ird) {
            return mpa_error(RI_ERANGE,
                             "peer wants ORD " + std::to_string(reply.ord) + " but this side offered IRD " +
                                 std::to_string(request.ird),
                             term::kLlpInsufficientIrd);
        }
        res.ird = request.ird;
        res.ord = std::min(request.ord, reply.ird);
        if (request.peer2peer) {
            uint8_t chosen = reply.peer2peer ? static_cast<uint8_t>(reply.rtr & request.rtr) : 0;
            if (!reply.peer2peer || chosen == 0 || (chosen & (chosen - 1)) != 0) {
                return mpa_error(RI_EPROTO, "reply does not choose exactly one of the offered RTR types",
                                 term::kLlpNoMatchingRtr);
            }
            res.peer2peer = true;
            res.rtr = chosen;
        } else if (reply.peer2peer) {
            return mpa_error(RI_EPROTO, "reply asks for peer-to-peer mode the request did not offer",
                             term::kLlpNoMatchingRtr);
        }
    } else {
        res.ird = clamp_ird_ord(config.ird);
        res.ord = clamp_ird_ord(config.ord);
    }
    return res;
}

RtrMessage make_rtr(uint8_t rtr, uint32_t msn) noexcept {
    RtrMessage m;
    Header &h = m.header;
    h.last = true;
    switch (rtr) {
        case kRtrWrite:
            // siw uses STag 1: some hardware treats STag 0 specially, and a zero-length Write is never validated.
            h.tagged = true;
            h.opcode = static_cast<uint8_t>(Opcode::rdma_write);
            h.stag = 1;
            h.to = 0;
            break;
        case kRtrRead:
            h.opcode = static_cast<uint8_t>(Opcode::read_request);
            h.qn = static_cast<uint32_t>(Queue::read_request);
            h.msn = msn;
            m.has_read = true;
            m.read = ReadRequest{0, 0, 0, 1, 0};
            break;
        default:
            h.opcode = static_cast<uint8_t>(Opcode::send);
            h.qn = static_cast<uint32_t>(Queue::send);
            h.msn = msn;
            break;
    }
    return m;
}

}  // namespace iwarp
