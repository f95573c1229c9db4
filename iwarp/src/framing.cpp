// MPA framing: the receive state machine and the transmit gather-list builder.
#include "iwarp/framing.hpp"

#include <algorithm>
#include <cstring>

#include "iwarp/copy.hpp"
#include "iwarp/crc32c.hpp"

namespace iwarp {

size_t mulpdu(size_t emss, bool markers, size_t fpdu_max) noexcept {
    // RFC 5044 §4.2: MULPDU = EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4), the marker term only with markers.
    size_t overhead = kMpaLengthLen + kMpaCrcLen + emss % 4;
    if (markers) overhead += kMarkerLen * ((emss + kMarkerInterval - 1) / kMarkerInterval);
    size_t base = emss > overhead + kUntaggedHeaderLen ? emss - overhead : kUntaggedHeaderLen + 4;
    return std::min(std::max(base, fpdu_max), max_ulpdu(markers));
}

// ---------------------------------------------------------------------------------------------------------------
// Receiver

std::span<const uint8_t> Receiver::current_header() const noexcept {
    if (head_need_ <= 3 || (state_ == State::head && head_have_ < head_need_)) return {};
    return {head_ + kMpaLengthLen, head_need_ - kMpaLengthLen};
}

std::span<uint8_t> Receiver::next_buffer() noexcept {
    if (failure_) return {};
    size_t limit = SIZE_MAX;
    if (opts_.markers) {
        uint64_t in_interval = pos_ % kMarkerInterval;
        if (in_interval < kMarkerLen) {  // inside the marker at the start of this interval
            last_span_ = Span::marker;
            return {marker_ + marker_have_, kMarkerLen - marker_have_};
        }
        limit = kMarkerInterval - in_interval;
    }
    switch (state_) {
        case State::head:
            last_span_ = Span::head;
            return {head_ + head_have_, std::min(head_need_ - head_have_, limit)};
        case State::payload: {
            last_span_ = Span::payload;
            std::span<uint8_t> t = sink_.payload_target(payload_len_ - payload_left_, std::min(payload_left_, limit));
            if (t.empty()) {
                fail(term::kDdpLocalCatastrophic);  // the layer above has nowhere to put data: never spin
                return {};
            }
            t = t.first(std::min({t.size(), payload_left_, limit}));
            last_target_ = t.data();
            return t;
        }
        case State::trailer:
            last_span_ = Span::trailer;
            return {trailer_ + trailer_have_, std::min(trailer_need_ - trailer_have_, limit)};
    }
    return {};
}

void Receiver::advance(size_t n) noexcept {
    if (failure_ || n == 0) return;
    pos_ += n;
    switch (last_span_) {
        case Span::marker:
            marker_have_ += n;
            if (marker_have_ == kMarkerLen) on_marker();
            return;
        case Span::head:
            if (opts_.crc) crc_ = crc32c_extend(crc_, head_ + head_have_, n);
            head_have_ += n;
            if (head_have_ == head_need_) on_head_bytes();
            return;
        case Span::payload:
            if (opts_.crc) crc_ = crc32c_extend(crc_, last_target_, n);
            payload_left_ -= n;
            if (payload_left_ == 0) {
                state_ = State::trailer;
                trailer_have_ = 0;
                trailer_need_ = pad_len(head_need_ - kMpaLengthLen + payload_len_) + kMpaCrcLen;
            }
            return;
        case Span::trailer: {
            // The pad is covered by the CRC as it arrives: a marker may follow it before the CRC field.
            size_t pad = trailer_need_ - kMpaCrcLen;
            if (opts_.crc && trailer_have_ < pad) {
                crc_ = crc32c_extend(crc_, trailer_ + trailer_have_, std::min(n, pad - trailer_have_));
            }
            trailer_have_ += n;
            if (trailer_have_ < trailer_need_) return;
            if (opts_.crc) {
                if (get_crc32c(trailer_ + pad) != crc_) {
                    fail(term::kLlpCrcError);
                    return;
                }
            }
            if (auto t = sink_.on_segment_end()) {
                fail(*t);
                return;
            }
            ++fpdus_;
            state_ = State::head;
            head_have_ = 0;
            head_need_ = 3;
            fpdu_start_ = pos_;
            crc_ = 0;
            return;
        }
    }
}

void Receiver::on_marker() noexcept {
    marker_have_ = 0;
    uint64_t marker_pos = pos_ - kMarkerLen;
    // A marker at an FPDU boundary belongs to the FPDU it precedes.
    if (state_ == State::head && head_have_ == 0) fpdu_start_ = marker_pos;
    uint16_t fpduptr = be::get16(marker_ + 2);
    if (fpduptr != marker_pos - fpdu_start_) {
        fail(term::kLlpMarkerError);
        return;
    }
    if (opts_.crc) crc_ = crc32c_extend(crc_, marker_, kMarkerLen);
}

void Receiver::on_head_bytes() noexcept {
    size_t ulpdu_len = be::get16(head_);
    if (head_need_ == 3) {
        size_t hsize = header_size(head_[2]);
        if (ulpdu_len < hsize) {
            // Not even a DDP header fits: the stream cannot be parsed any further.
            fail(term::kRdmapCatastrophicStream);
            return;
        }
        head_need_ = kMpaLengthLen + hsize;
        return;  // the rest of the header follows
    }
    Header h = decode_header(head_ + kMpaLengthLen);
    payload_len_ = payload_left_ = ulpdu_len - h.size();
    if (auto t = sink_.on_header(h, payload_len_)) {
        fail(*t);
        return;
    }
    if (payload_left_ > 0) {
        state_ = State::payload;
    } else {
        state_ = State::trailer;
        trailer_have_ = 0;
        trailer_need_ = pad_len(ulpdu_len) + kMpaCrcLen;
    }
}

size_t Receiver::feed(std::span<const uint8_t> data) noexcept {
    size_t off = 0;
    while (off < data.size()) {
        // Fast path: a whole DDP header is in the input, so decode it from there in one step instead of staging
        // it in two (length and control byte, then the rest).
        if (state_ == State::head && head_have_ == 0 && !opts_.markers && !failure_ && data.size() - off >= 3) {
            const uint8_t *p = data.data() + off;
            const size_t need = kMpaLengthLen + header_size(p[2]);
            if (data.size() - off >= need) {
                std::memcpy(head_, p, kMpaLengthLen + kTaggedHeaderLen);  // kept for a Terminate's header copy
                if (need > kMpaLengthLen + kTaggedHeaderLen) {
                    std::memcpy(head_ + kMpaLengthLen + kTaggedHeaderLen, p + kMpaLengthLen + kTaggedHeaderLen,
                                kUntaggedHeaderLen - kTaggedHeaderLen);
                }
                if (opts_.crc) crc_ = crc32c_extend(crc_, p, need);
                pos_ += need;
                off += need;
                head_have_ = 3;
                head_need_ = 3;
                on_head_bytes();  // the length check, which sets head_need_ to the full header
                if (failure_) break;
                head_have_ = need;
                on_head_bytes();
                continue;
            }
        }
        // Fast path: the whole pad and CRC are in the input.
        if (state_ == State::trailer && trailer_have_ == 0 && !opts_.markers && !failure_ &&
            data.size() - off >= trailer_need_) {
            std::memcpy(trailer_, data.data() + off, trailer_need_);
            last_span_ = Span::trailer;
            off += trailer_need_;
            advance(trailer_need_);
            continue;
        }
        std::span<uint8_t> dst = next_buffer();
        if (dst.empty()) break;
        size_t n = std::min(dst.size(), data.size() - off);
        copy_payload(dst.data(), data.data() + off, n);
        advance(n);
        off += n;
    }
    return off;
}

// ---------------------------------------------------------------------------------------------------------------
// Transmitter

namespace {

// Appends pieces to a frame, splitting them at marker positions and keeping the running CRC.
struct Emitter {
    TxFrame &out;
    bool crc_on;
    bool markers_on;
    uint64_t pos;          // stream position of the next byte
    uint64_t fpdu_start;
    uint64_t next_marker;  // stream position of the next marker
    uint32_t crc = 0;
    size_t nmarkers = 0;

    void add(const uint8_t *p, size_t len, bool covered) noexcept {
        while (len > 0) {
            if (markers_on && pos == next_marker) {
                uint8_t *m = out.markers[nmarkers++];
                be::put16(m, 0);
                be::put16(m + 2, static_cast<uint16_t>(pos - fpdu_start));
                push(m, kMarkerLen, true);
                next_marker += kMarkerInterval;
                continue;
            }
            size_t chunk = markers_on ? std::min<uint64_t>(len, next_marker - pos) : len;
            push(p, chunk, covered);
            p += chunk;
            len -= chunk;
        }
    }
    void push(const uint8_t *p, size_t len, bool covered) noexcept {
        out.iov[out.iovcnt++] = iovec{const_cast<uint8_t *>(p), len};
        out.bytes += len;
        pos += len;
        if (crc_on && covered) crc = crc32c_extend(crc, p, len);
    }
};

}  // namespace

void finish_crc(TxFrame &frame) noexcept {
    if (!frame.crc_pending) return;
    uint32_t crc = 0;
    for (size_t i = 0; i + 1 < frame.iovcnt; ++i) crc = crc32c_extend(crc, frame.iov[i].iov_base, frame.iov[i].iov_len);
    put_crc32c(static_cast<uint8_t *>(frame.iov[frame.iovcnt - 1].iov_base), crc);
    frame.crc_pending = false;
}

void Transmitter::build(const Header &header, std::span<const uint8_t> control, std::span<const iovec> payload,
                        TxFrame &out, bool snapshot, bool defer_crc) noexcept {
    out.crc_pending = false;
    size_t payload_len = 0;
    for (const iovec &v : payload) payload_len += v.iov_len;
    size_t hsize = header.size();
    size_t ulpdu = hsize + control.size() + payload_len;
    be::put16(out.head, static_cast<uint16_t>(ulpdu));
    encode_header(header, out.head + kMpaLengthLen);
    if (!control.empty()) std::memcpy(out.head + kMpaLengthLen + hsize, control.data(), control.size());
    size_t pad = pad_len(ulpdu);
    std::memset(out.tail, 0, sizeof out.tail);

    out.iovcnt = 0;
    out.bytes = 0;
    const size_t head_len = kMpaLengthLen + hsize + control.size();
    if (!opts_.markers && payload_len <= kCompactPayloadMax) {
        // A small FPDU is laid out whole in the frame's own buffer: one gather entry instead of three (a system
        // call's gather list costs per entry) and one CRC pass. The payload is copied, so the CRC covers what is
        // sent whatever the source's owner does meanwhile, as a snapshot would (and a payload already in
        // TxFrame::snapshot, as a foreign Read Response's is, is copied from there).
        uint8_t *at = out.compact;
        std::memcpy(at, out.head, head_len);
        at += head_len;
        for (const iovec &v : payload) {
            if (v.iov_len != 0) std::memcpy(at, v.iov_base, v.iov_len);
            at += v.iov_len;
        }
        std::memset(at, 0, pad + kMpaCrcLen);
        at += pad;
        if (opts_.crc) put_crc32c(at, crc32c_extend(0, out.compact, static_cast<size_t>(at - out.compact)));
        at += kMpaCrcLen;
        const size_t total = static_cast<size_t>(at - out.compact);
        out.iov[0] = iovec{out.compact, total};
        out.iovcnt = 1;
        out.bytes = total;
        pos_ += total;
        return;
    }
    uint64_t first_marker = (pos_ + kMarkerInterval - 1) / kMarkerInterval * kMarkerInterval;
    // Deferred: the gather list ends in the CRC field (no marker can follow it), which finish_crc() fills.
    const bool defer = defer_crc && opts_.crc && !opts_.markers && payload_len >= kDeferCrcMin;
    Emitter e{out, opts_.crc && !defer, opts_.markers, pos_, pos_, first_marker};
    e.add(out.head, head_len, true);
    if (snapshot && opts_.crc && payload_len <= sizeof out.snapshot) {
        // The CRC is computed over the copy that is sent, not over memory that may change before sendmsg reads it.
        size_t at = 0;
        for (const iovec &v : payload) {
            copy_payload(out.snapshot + at, v.iov_base, v.iov_len);
            at += v.iov_len;
        }
        e.add(out.snapshot, payload_len, true);
    } else {
        for (const iovec &v : payload) e.add(static_cast<const uint8_t *>(v.iov_base), v.iov_len, true);
    }
    e.add(out.tail, pad, true);
    // The CRC field is 4-aligned like every marker position, so a marker never splits it.
    e.add(out.tail + pad, kMpaCrcLen, false);
    if (defer) {
        out.crc_pending = true;
    } else if (opts_.crc) {
        put_crc32c(out.tail + pad, e.crc);
    }
    pos_ = e.pos;
}

}  // namespace iwarp
