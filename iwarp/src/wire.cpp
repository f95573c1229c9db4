// DDP/RDMAP header, Read Request and Terminate codecs.
#include "iwarp/wire.hpp"

#include <cstring>

namespace iwarp {

void encode_header(const Header &h, uint8_t *out) noexcept {
    out[0] = static_cast<uint8_t>((h.tagged ? 0x80 : 0) | (h.last ? 0x40 : 0) | (h.ddp_reserved & 0xf) << 2 |
                                  (h.ddp_version & 0x3));
    out[1] = static_cast<uint8_t>((h.rdmap_version & 0x3) << 6 | (h.rdmap_reserved & 0x3) << 4 | (h.opcode & 0xf));
    if (h.tagged) {
        be::put32(out + 2, h.stag);
        be::put64(out + 6, h.to);
    } else {
        be::put32(out + 2, h.inv_stag);
        be::put32(out + 6, h.qn);
        be::put32(out + 10, h.msn);
        be::put32(out + 14, h.mo);
    }
}

Header decode_header(const uint8_t *in) noexcept {
    Header h;
    h.tagged = (in[0] & 0x80) != 0;
    h.last = (in[0] & 0x40) != 0;
    h.ddp_reserved = static_cast<uint8_t>((in[0] >> 2) & 0xf);
    h.ddp_version = static_cast<uint8_t>(in[0] & 0x3);
    h.rdmap_version = static_cast<uint8_t>(in[1] >> 6);
    h.rdmap_reserved = static_cast<uint8_t>((in[1] >> 4) & 0x3);
    h.opcode = static_cast<uint8_t>(in[1] & 0xf);
    if (h.tagged) {
        h.stag = be::get32(in + 2);
        h.to = be::get64(in + 6);
    } else {
        h.inv_stag = be::get32(in + 2);
        h.qn = be::get32(in + 6);
        h.msn = be::get32(in + 10);
        h.mo = be::get32(in + 14);
    }
    return h;
}

void encode_read_request(const ReadRequest &r, uint8_t *out) noexcept {
    be::put32(out, r.sink_stag);
    be::put64(out + 4, r.sink_to);
    be::put32(out + 12, r.size);
    be::put32(out + 16, r.src_stag);
    be::put64(out + 20, r.src_to);
}

ReadRequest decode_read_request(const uint8_t *in) noexcept {
    return ReadRequest{be::get32(in), be::get64(in + 4), be::get32(in + 12), be::get32(in + 16),
                       be::get64(in + 20)};
}

void encode_atomic_request(const AtomicRequest &r, uint8_t *out) noexcept {
    be::put32(out, r.op & 0xfu);
    be::put32(out + 4, r.request_id);
    be::put32(out + 8, r.stag);
    be::put64(out + 12, r.to);
    be::put64(out + 20, r.add_swap);
    be::put64(out + 28, r.add_swap_mask);
    be::put64(out + 36, r.compare);
    be::put64(out + 44, r.compare_mask);
}

AtomicRequest decode_atomic_request(const uint8_t *in) noexcept {
    AtomicRequest r;
    r.op = static_cast<uint8_t>(be::get32(in) & 0xfu);
    r.request_id = be::get32(in + 4);
    r.stag = be::get32(in + 8);
    r.to = be::get64(in + 12);
    r.add_swap = be::get64(in + 20);
    r.add_swap_mask = be::get64(in + 28);
    r.compare = be::get64(in + 36);
    r.compare_mask = be::get64(in + 44);
    return r;
}

uint64_t atomic_result(const AtomicRequest &r, uint64_t original) noexcept {
    if (r.op == static_cast<uint8_t>(AtomicOp::cmp_swap)) {
        if (((r.compare ^ original) & r.compare_mask) != 0) return original;
        return (original & ~r.add_swap_mask) | (r.add_swap & r.add_swap_mask);
    }
    // FetchAdd: a bit-serial add whose carry stops at every bit the Add Mask marks (the top bit of a field).
    if (r.add_swap_mask == 0) return original + r.add_swap;
    uint64_t sum = 0;
    bool carry = false;
    for (unsigned i = 0; i < 64; ++i) {
        const uint64_t bit = uint64_t{1} << i;
        const bool a = (original & bit) != 0, b = (r.add_swap & bit) != 0;
        if (a != b ? !carry : carry) sum |= bit;
        carry = (a && b) || (carry && (a || b));
        carry = carry && (r.add_swap_mask & bit) == 0;
    }
    return sum;
}

void encode_atomic_response(const AtomicResponse &r, uint8_t *out) noexcept {
    be::put32(out, r.request_id);
    be::put64(out + 4, r.original);
}

AtomicResponse decode_atomic_response(const uint8_t *in) noexcept {
    return AtomicResponse{be::get32(in), be::get64(in + 4)};
}

size_t Terminate::size() const noexcept {
    size_t n = kTerminateControlLen;
    if ((hdrct & (kTermHdrM | kTermHdrD)) != 0) n += 2 + ddp_header_len();
    if ((hdrct & kTermHdrR) != 0) n += kReadRequestLen;
    return n;
}

// Layout as Linux siw sends it: the 16-bit segment length travels whenever M or D is set, directly followed by the
// copied DDP header, then the copied Read Request header.
size_t encode_terminate(const Terminate &t, uint8_t *out) noexcept {
    out[0] = t.code.layer_etype();
    out[1] = t.code.code;
    out[2] = static_cast<uint8_t>(t.hdrct & (kTermHdrM | kTermHdrD | kTermHdrR));
    out[3] = 0;
    size_t n = kTerminateControlLen;
    if ((t.hdrct & (kTermHdrM | kTermHdrD)) != 0) {
        be::put16(out + n, (t.hdrct & kTermHdrM) != 0 ? t.ddp_segment_length : 0);
        n += 2;
        size_t h = t.ddp_header_len();
        std::memcpy(out + n, t.ddp_header, h);
        n += h;
    }
    if ((t.hdrct & kTermHdrR) != 0) {
        std::memcpy(out + n, t.rdmap_header, kReadRequestLen);
        n += kReadRequestLen;
    }
    return n;
}

bool decode_terminate(std::span<const uint8_t> in, Terminate &out) noexcept {
    out = Terminate{};
    if (in.size() < kTerminateControlLen) return false;
    out.code = TermCode{static_cast<uint8_t>(in[0] >> 4), static_cast<uint8_t>(in[0] & 0xf), in[1]};
    out.hdrct = static_cast<uint8_t>(in[2] & (kTermHdrM | kTermHdrD | kTermHdrR));
    size_t n = kTerminateControlLen;
    if ((out.hdrct & (kTermHdrM | kTermHdrD)) != 0) {
        if (in.size() < n + 2) return false;
        out.ddp_segment_length = be::get16(&in[n]);
        n += 2;
        if ((out.hdrct & kTermHdrD) != 0) {
            if (in.size() < n + 1) return false;
            size_t h = header_size(in[n]);
            if (in.size() < n + h) return false;
            std::memcpy(out.ddp_header, &in[n], h);
            n += h;
        }
    }
    if ((out.hdrct & kTermHdrR) != 0) {
        if (in.size() < n + kReadRequestLen) return false;
        std::memcpy(out.rdmap_header, &in[n], kReadRequestLen);
    }
    return true;
}

const char *term_name(TermCode c) noexcept {
    struct Entry {
        TermCode code;
        const char *name;
    };
    static constexpr Entry kNames[] = {
        {term::kRdmapLocalCatastrophic, "RDMAP local catastrophic error"},
        {term::kRdmapInvalidStag, "RDMAP remote protection error: invalid STag"},
        {term::kRdmapBaseBounds, "RDMAP remote protection error: base or bounds violation"},
        {term::kRdmapAccessRights, "RDMAP remote protection error: access rights violation"},
        {term::kRdmapStagNotAssociated, "RDMAP remote protection error: STag not associated with RDMAP stream"},
        {term::kRdmapToWrap, "RDMAP remote protection error: tagged offset wrap"},
        {term::kRdmapCannotInvalidate, "RDMAP remote protection error: STag cannot be invalidated"},
        {term::kRdmapInvalidVersion, "RDMAP remote operation error: invalid RDMAP version"},
        {term::kRdmapUnexpectedOpcode, "RDMAP remote operation error: unexpected opcode"},
        {term::kRdmapCatastrophicStream, "RDMAP remote operation error: catastrophic error, localized to stream"},
        {term::kDdpLocalCatastrophic, "DDP local catastrophic error"},
        {term::kDdpTaggedInvalidStag, "DDP tagged buffer error: invalid STag"},
        {term::kDdpTaggedBaseBounds, "DDP tagged buffer error: base or bounds violation"},
        {term::kDdpTaggedStagNotAssociated, "DDP tagged buffer error: STag not associated with DDP stream"},
        {term::kDdpTaggedToWrap, "DDP tagged buffer error: tagged offset wrap"},
        {term::kDdpTaggedInvalidVersion, "DDP tagged buffer error: invalid DDP version"},
        {term::kDdpInvalidQn, "DDP untagged buffer error: invalid QN"},
        {term::kDdpNoBuffer, "DDP untagged buffer error: invalid MSN, no buffer available"},
        {term::kDdpMsnRange, "DDP untagged buffer error: invalid MSN, MSN range is not valid"},
        {term::kDdpInvalidMo, "DDP untagged buffer error: invalid MO"},
        {term::kDdpMessageTooLong, "DDP untagged buffer error: message too long for available buffer"},
        {term::kDdpUntaggedInvalidVersion, "DDP untagged buffer error: invalid DDP version"},
        {term::kLlpConnectionLost, "MPA error: TCP connection closed, terminated or lost"},
        {term::kLlpCrcError, "MPA error: CRC error"},
        {term::kLlpMarkerError, "MPA error: marker and ULPDU length mismatch"},
        {term::kLlpInvalidMpaFrame, "MPA error: invalid MPA request or reply frame"},
        {term::kLlpLocalCatastrophic, "MPA error: local catastrophic error"},
        {term::kLlpInsufficientIrd, "MPA error: insufficient IRD resources"},
        {term::kLlpNoMatchingRtr, "MPA error: no matching RTR option"},
    };
    for (const auto &e : kNames) {
        if (e.code == c) return e.name;
    }
    return "unknown Terminate code";
}

}  // namespace iwarp
