/**
 * @file framing.hpp
 * @brief MPA framing (RFC 5044 §4-6): FPDUs with ULPDU length, pad, CRC32c and markers, in both directions.
 *
 * Receiver is a resumable state machine over the TCP byte stream: it tells its owner where the next bytes go
 * (next_buffer(): a staging area for headers, markers and trailers, or the placement target itself for payload,
 * so payload is written once, straight where it belongs) and accepts the stream split at any byte. The layer above
 * (FpduSink) validates each DDP header and supplies placement targets.
 *
 * Transmitter turns one DDP segment (header, optional control payload, payload pieces straight from the source
 * buffers) into a gather list: nothing is copied but headers, markers, pad and CRC.
 *
 * Markers: every 512 octets of the stream, counted from the first octet of the first FPDU, a 4-byte marker
 * (16 reserved bits, 16-bit FPDUPTR) is inserted. FPDUPTR is the distance back to the start of the FPDU the marker
 * lies in; a marker at an FPDU boundary belongs to the FPDU it precedes (FPDUPTR 0). Markers are covered by the
 * CRC and not counted in ULPDU_Length.
 */
#ifndef IWARP_FRAMING_HPP
#define IWARP_FRAMING_HPP

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "iwarp/wire.hpp"

namespace iwarp {

/** @brief Marker spacing in octets of the TCP stream. */
inline constexpr size_t kMarkerInterval = 512;
/** @brief Marker size. */
inline constexpr size_t kMarkerLen = 4;
/** @brief Largest ULPDU_Length the 16-bit field can carry. */
inline constexpr size_t kMaxUlpduLen = 0xffff;

/**
 * @brief Largest ULPDU a stream can carry: 65535, less with markers so that every marker's FPDUPTR (a 16-bit
 *        distance from the FPDU start, markers included) still fits.
 */
[[nodiscard]] constexpr size_t max_ulpdu(bool markers) noexcept {
    return markers ? kMaxUlpduLen - kMarkerLen * (kMaxUlpduLen / kMarkerInterval + 2) - 8 : kMaxUlpduLen;
}

/** @brief Options of one direction of an MPA stream, from the negotiation. */
struct FramingOptions {
    bool crc = false;     /**< Compute (transmit) or verify (receive) the CRC32c. */
    bool markers = false; /**< Insert (transmit) or expect (receive) markers. */
};

/**
 * @brief The largest ULPDU (DDP header plus payload) that fits one TCP segment: RFC 5044's MULPDU for an
 *        effective MSS @p emss, or @p fpdu_max when that is configured larger (0 = none).
 */
[[nodiscard]] size_t mulpdu(size_t emss, bool markers, size_t fpdu_max = 0) noexcept;

/** @brief Pad octets after a ULPDU of @p ulpdu_len so that the FPDU is a multiple of 4. */
[[nodiscard]] constexpr size_t pad_len(size_t ulpdu_len) noexcept { return (4 - (kMpaLengthLen + ulpdu_len) % 4) % 4; }

/** @brief What the layer above the framing provides to a Receiver. */
class FpduSink {
public:
    virtual ~FpduSink() = default;
    /**
     * @brief A DDP segment header arrived. Validate it (version, opcode, queue, STag, bounds, rights...) and
     *        prepare placement of @p payload_len bytes; return the Terminate code to stop with, or nothing.
     */
    virtual std::optional<TermCode> on_header(const Header &header, size_t payload_len) = 0;
    /**
     * @brief Where the payload bytes starting at @p offset (from the start of this segment's payload) go: at least
     *        one byte and at most @p remaining. The receiver may fill less than it was given and ask again.
     */
    virtual std::span<uint8_t> payload_target(size_t offset, size_t remaining) = 0;
    /** @brief The segment's trailer checked out (CRC good): the segment is complete. */
    virtual std::optional<TermCode> on_segment_end() = 0;
};

/** @brief The receive state machine of one MPA stream in full operation. */
class Receiver {
public:
    /** @brief A receiver delivering to @p sink. */
    Receiver(FpduSink &sink, FramingOptions options) noexcept : sink_(sink), opts_(options) {}

    /** @brief Where the next bytes of the stream must be written; empty once the stream has failed. */
    [[nodiscard]] std::span<uint8_t> next_buffer() noexcept;
    /** @brief @p n bytes were written to the start of the span next_buffer() returned. */
    void advance(size_t n) noexcept;
    /** @brief Copies @p data through next_buffer()/advance(); returns the bytes consumed (less after a failure). */
    size_t feed(std::span<const uint8_t> data) noexcept;

    /**
     * @brief Stops the stream as a failure with @p code would (no-op after a failure): nothing more is accepted and
     *        failure() reports @p code.
     */
    void abort(TermCode code) noexcept {
        if (!failure_) failure_ = code;
    }
    /** @brief True after a framing or validation failure; the stream must be terminated. */
    [[nodiscard]] bool failed() const noexcept { return failure_.has_value(); }
    /** @brief The Terminate code of the failure. */
    [[nodiscard]] TermCode failure() const noexcept { return failure_.value_or(TermCode{}); }
    /** @brief The DDP header bytes of the segment being received (for the Terminate's copy), 0 if none yet. */
    [[nodiscard]] std::span<const uint8_t> current_header() const noexcept;
    /** @brief Payload length of the segment being received. */
    [[nodiscard]] size_t current_payload_len() const noexcept { return payload_len_; }
    /** @brief Bytes of the stream consumed so far. */
    [[nodiscard]] uint64_t position() const noexcept { return pos_; }
    /** @brief Complete FPDUs received. */
    [[nodiscard]] uint64_t fpdus() const noexcept { return fpdus_; }

private:
    enum class State { head, payload, trailer };
    void fail(TermCode code) noexcept { failure_ = code; }
    void on_head_bytes() noexcept;
    void on_marker() noexcept;

    FpduSink &sink_;
    FramingOptions opts_;
    State state_ = State::head;
    std::optional<TermCode> failure_;
    uint64_t pos_ = 0;          // stream octets consumed, markers included
    uint64_t fpdu_start_ = 0;   // stream position where the current FPDU began (its marker, if one leads it)
    uint64_t fpdus_ = 0;
    uint32_t crc_ = 0;
    // head: ULPDU_Length and DDP header; trailer: pad and CRC; marker: one marker.
    uint8_t head_[kMpaLengthLen + kUntaggedHeaderLen]{};
    size_t head_have_ = 0, head_need_ = 3;  // 3 = the length and the DDP control byte, which tells the header size
    uint8_t trailer_[3 + kMpaCrcLen]{};
    size_t trailer_have_ = 0, trailer_need_ = 0;
    uint8_t marker_[kMarkerLen]{};
    size_t marker_have_ = 0;
    size_t payload_len_ = 0, payload_left_ = 0;
    uint8_t *last_target_ = nullptr;  // payload span handed out, for the CRC over what was placed
    enum class Span { head, payload, trailer, marker } last_span_ = Span::head;
};

/** @brief Most iovec entries one FPDU's gather list can need (payload pieces, markers and their splits). */
inline constexpr size_t kMaxFpduIov = 2 * (kMaxUlpduLen / kMarkerInterval + 2) + 40;

/**
 * @brief Payloads up to this many bytes are framed whole in TxFrame::snapshot, as one gather entry, when markers are
 *        off: copying them costs less than the system call's handling of two more entries.
 */
inline constexpr size_t kCompactPayloadMax = 512;

/**
 * @brief Payloads from this many bytes may have their CRC left for later (Transmitter::build() with defer_crc): its
 *        sender can hand the payload to the socket first and work out the CRC while the peer reads it.
 */
inline constexpr size_t kDeferCrcMin = 16384;

/** @brief A built FPDU: a gather list over the caller's payload buffers and the frame's own small buffers. */
struct TxFrame {
    iovec iov[kMaxFpduIov];  /**< The gather list, in stream order. */
    size_t iovcnt = 0;       /**< Entries used. */
    size_t bytes = 0;        /**< Total bytes. */
    /**
     * The CRC is not written yet (Transmitter::build() with defer_crc): the last gather entry is the CRC field, and
     * finish_crc() must fill it before that entry is written to the stream.
     */
    bool crc_pending = false;
    uint8_t head[kMpaLengthLen + kUntaggedHeaderLen + kTerminateMaxLen]{}; /**< Length, header, control payload. */
    uint8_t tail[3 + kMpaCrcLen]{};  /**< Pad and CRC. */
    uint8_t markers[kMaxUlpduLen / kMarkerInterval + 2][kMarkerLen]{}; /**< Markers of this FPDU. */
    /**
     * The payload, copied, when build() was asked to snapshot it: the CRC then covers exactly the bytes that are
     * sent, even if the memory they came from changes before the socket takes them.
     */
    uint8_t snapshot[kMaxUlpduLen];
    /**
     * A small FPDU without markers (payload up to kCompactPayloadMax), whole: length, header, control, payload, pad
     * and CRC. It is then the only gather entry.
     */
    uint8_t compact[sizeof head + kCompactPayloadMax + 3 + kMpaCrcLen];
};

/**
 * @brief Writes the CRC of a frame built with its CRC deferred (TxFrame::crc_pending) into its last gather entry;
 *        nothing for any other frame. The payload must still hold what the gather list was built over.
 */
void finish_crc(TxFrame &frame) noexcept;

/** @brief The transmit side of one MPA stream in full operation. */
class Transmitter {
public:
    /** @brief A transmitter with the negotiated options. */
    explicit Transmitter(FramingOptions options) noexcept : opts_(options) {}
    /**
     * @brief Builds the FPDU for one DDP segment into @p out: @p header, then @p control (a Read Request or
     *        Terminate payload, copied), then the payload pieces @p payload (not copied; they must stay unchanged
     *        until sent, unless @p snapshot: with CRC on, the payload is then copied into the frame first, for
     *        memory its owner may write meanwhile, as a Read Response's source). The ULPDU must not exceed
     *        max_ulpdu(). Advances the stream position by out.bytes. With @p defer_crc, a payload of at least
     *        kDeferCrcMin bytes framed with CRC on and without markers leaves the CRC to finish_crc()
     *        (TxFrame::crc_pending; a snapshot is taken now, and the CRC later covers the copy); otherwise the flag
     *        changes nothing.
     */
    void build(const Header &header, std::span<const uint8_t> control, std::span<const iovec> payload,
               TxFrame &out, bool snapshot = false, bool defer_crc = false) noexcept;
    /** @brief Bytes of the stream produced so far. */
    [[nodiscard]] uint64_t position() const noexcept { return pos_; }

private:
    FramingOptions opts_;
    uint64_t pos_ = 0;
};

}  // namespace iwarp

#endif  // IWARP_FRAMING_HPP
