/**
 * @file mpa.hpp
 * @brief MPA connection setup: request/reply frames (RFC 5044 §7) and the RFC 6581 enhanced setup (IRD/ORD,
 *        peer-to-peer mode, ready-to-receive message), as pure functions over bytes.
 *
 * Negotiation failures carry, in rdma::Error::detail(), the Terminate code (term_detail()) the caller reports to
 * the peer: a responder answers with a reject reply, an initiator sends a Terminate and closes.
 */
#ifndef IWARP_MPA_HPP
#define IWARP_MPA_HPP

#include <cstddef>
#include <cstdint>
#include <span>

#include "iwarp/wire.hpp"
#include "rnicpi/cpp/status.hpp"

namespace iwarp {

/** @brief Key, flags, revision and private data length. */
inline constexpr size_t kMpaFrameHeaderLen = 20;
/** @brief Largest private data an MPA frame may carry (including the RFC 6581 IRD/ORD words). */
inline constexpr size_t kMpaMaxPrivateData = 512;
/** @brief The RFC 6581 IRD/ORD words at the start of revision 2 private data. */
inline constexpr size_t kMpaIrdOrdLen = 4;
/** @brief Largest IRD or ORD value the RFC 6581 words can carry. */
inline constexpr uint16_t kMpaIrdOrdMax = 0x3fff;

/** @brief Request or reply. */
enum class MpaKind : uint8_t {
    request, /**< "MPA ID Req Frame", sent by the initiator. */
    reply    /**< "MPA ID Rep Frame", sent by the responder. */
};

/** @brief RFC 6581 ready-to-receive message types, as a bit set (an initiator may offer several). */
enum RtrBits : uint8_t {
    kRtrSend = 1u << 0,  /**< Zero-length Send. */
    kRtrWrite = 1u << 1, /**< Zero-length RDMA Write. */
    kRtrRead = 1u << 2   /**< Zero-length RDMA Read. */
};

/**
 * @brief The lowest of the MPA header's reserved flag bits, which this stack sets (MpaFrame::reserved) to offer, and
 *        in a reply to agree to, RFC 7306 (atomics, Immediate Data): MPA itself has no way to say so. Set only
 *        towards a peer known to run this stack (the kAL's TCP peer detection), so that a peer that does not, such
 *        as Linux siw, never receives it; a responder of this stack takes it in any request, and agrees only when
 *        it may (MpaConfig::rfc7306). Any other reserved bit is refused, as before.
 */
inline constexpr uint8_t kMpaFlagRfc7306 = 0x01;

/** @brief A decoded MPA request or reply. */
struct MpaFrame {
    MpaKind kind = MpaKind::request; /**< Request or reply. */
    bool markers = false;            /**< M: the sender wants to receive markers. */
    bool crc = false;                /**< C: the sender wants CRC. */
    bool reject = false;             /**< R: reply only, the connection is rejected. */
    bool enhanced = false;           /**< RFC 6581: IRD/ORD words lead the private data. */
    uint8_t reserved = 0;            /**< Reserved flag bits (must be zero). */
    uint8_t revision = 1;            /**< MPA revision. */
    uint16_t ird = 0;                /**< With MpaFrame::enhanced: inbound RDMA Read queue depth. */
    uint16_t ord = 0;                /**< With MpaFrame::enhanced: outbound RDMA Read queue depth. */
    bool peer2peer = false;          /**< With MpaFrame::enhanced: peer-to-peer mode (an RTR message follows). */
    uint8_t rtr = 0;                 /**< With MpaFrame::enhanced: a set of RtrBits. */
    std::span<const uint8_t> private_data; /**< The consumer's private data (after the IRD/ORD words). */

    /** @brief Encoded size. */
    [[nodiscard]] size_t size() const noexcept {
        return kMpaFrameHeaderLen + (enhanced ? kMpaIrdOrdLen : 0) + private_data.size();
    }
};

/** @brief Encodes @p f into @p out; ::RI_EMSGSIZE when the private data exceeds 512 bytes, ::RI_EOVERFLOW when
 *         @p out is too small. */
[[nodiscard]] rdma::Expected<size_t> encode_mpa(const MpaFrame &f, std::span<uint8_t> out);
/**
 * @brief Reads the 20-byte frame header and returns the private data length that follows, checking the key for
 *        @p kind, the reserved bits and the length limit; so a receiver knows how much more to read.
 */
[[nodiscard]] rdma::Expected<size_t> decode_mpa_header(std::span<const uint8_t> header, MpaKind kind);
/** @brief Decodes a whole frame; private_data points into @p frame. */
[[nodiscard]] rdma::Expected<MpaFrame> decode_mpa(std::span<const uint8_t> frame, MpaKind kind);

/** @brief What one side is willing to do during connection setup (per RNIC, configurable). */
struct MpaConfig {
    uint8_t revision = 2;          /**< Highest revision offered or accepted (1 or 2). */
    bool crc = true;               /**< Ask for CRC. A peer that asks for CRC always gets it. */
    bool markers_wanted = false;   /**< Ask the peer to send markers. */
    bool markers_allowed = false;  /**< Send markers when the peer asks; otherwise such a peer is refused. */
    bool peer2peer = true;         /**< Revision 2: use peer-to-peer mode with an RTR message. */
    uint8_t rtr = kRtrWrite | kRtrRead; /**< RtrBits this side can send (initiator) or accept (responder). */
    uint16_t ird = 16;             /**< Inbound RDMA Read depth this side offers. */
    uint16_t ord = 16;             /**< Outbound RDMA Read depth this side wants. */
    /**
     * Offer (initiator) or agree to (responder) RFC 7306 with kMpaFlagRfc7306: only when the RNIC speaks it and the
     * peer is known to run this stack.
     */
    bool rfc7306 = false;
};

/** @brief What both sides agreed on: the parameters of the RDMA-mode transition. */
struct MpaResult {
    uint8_t revision = 1;      /**< Revision in use. */
    bool crc = false;          /**< CRC on every FPDU, both directions. */
    bool markers_tx = false;   /**< This side inserts markers. */
    bool markers_rx = false;   /**< The peer inserts markers. */
    bool enhanced = false;     /**< RFC 6581 IRD/ORD exchange took place. */
    bool peer2peer = false;    /**< An RTR message is exchanged before the first ULP message. */
    uint8_t rtr = 0;           /**< The one RtrBits type in use, 0 without peer-to-peer. */
    uint16_t ird = 0;          /**< This side's inbound RDMA Read depth. */
    uint16_t ord = 0;          /**< This side's outbound RDMA Read depth. */
    bool rfc7306 = false;      /**< Both ends agreed to RFC 7306 (kMpaFlagRfc7306 in the request and the reply). */
};

/** @brief The request an initiator sends. */
[[nodiscard]] MpaFrame make_request(const MpaConfig &config, std::span<const uint8_t> private_data);

/** @brief A responder's answer to a request: the reply to send and, unless it rejects, the agreement. */
struct MpaResponse {
    MpaFrame reply;    /**< The reply frame (private data left empty for the consumer to fill). */
    MpaResult result;  /**< The agreement; meaningful when !reply.reject. */
};
/**
 * @brief Responder side: decides on a decoded request. A request this side cannot serve gets an Error whose detail
 *        is the Terminate code; the caller then sends reject_reply() and closes.
 */
[[nodiscard]] rdma::Expected<MpaResponse> respond(const MpaConfig &config, const MpaFrame &request);
/** @brief A reject reply carrying @p private_data, at the revision of @p request (or 1 when it was invalid). */
[[nodiscard]] MpaFrame reject_reply(const MpaFrame &request, std::span<const uint8_t> private_data);
/**
 * @brief Initiator side: checks the reply to @p request. ::RI_ECONNREFUSED for a reject; any other failure carries
 *        the Terminate code to send in its detail.
 */
[[nodiscard]] rdma::Expected<MpaResult> complete(const MpaConfig &config, const MpaFrame &request,
                                                 const MpaFrame &reply);

/** @brief Packs a Terminate code into an rdma::Error detail word. */
[[nodiscard]] constexpr uint32_t term_detail(TermCode c) noexcept {
    return 0x01000000u | static_cast<uint32_t>(c.layer) << 16 | static_cast<uint32_t>(c.etype) << 8 | c.code;
}
/** @brief Unpacks a Terminate code from an rdma::Error detail word; false when it holds none. */
[[nodiscard]] constexpr bool term_from_detail(uint32_t detail, TermCode &out) noexcept {
    if ((detail & 0xff000000u) != 0x01000000u) return false;
    out = TermCode{static_cast<uint8_t>(detail >> 16), static_cast<uint8_t>(detail >> 8),
                   static_cast<uint8_t>(detail)};
    return true;
}

/** @brief Builds the RFC 6581 zero-length RTR message of type @p rtr (one RtrBits bit) as an FPDU payload. */
struct RtrMessage {
    Header header;        /**< The DDP/RDMAP header. */
    ReadRequest read;     /**< For a zero-length Read: its Read Request header. */
    bool has_read = false; /**< True for the Read variant. */
};
/** @brief The RTR message siw and hardware RNICs send: Write to STag 1 at TO 0, or Read of 0 bytes from STag 1. */
[[nodiscard]] RtrMessage make_rtr(uint8_t rtr, uint32_t msn) noexcept;

}  // namespace iwarp

#endif  // IWARP_MPA_HPP
