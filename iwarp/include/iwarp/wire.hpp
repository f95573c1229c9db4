/**
 * @file wire.hpp
 * @brief iWARP wire formats: DDP (RFC 5041) and RDMAP (RFC 5040) headers, the RDMA Read Request, the RFC 7306
 *        extensions (Atomic Request and Response, Immediate Data), the Terminate message and its error codes (IANA
 *        "rddp" registry, RFC 6580).
 *
 * Headers are decoded into host-order values with explicit reads and encoded with explicit writes; no struct is
 * ever overlaid on a buffer. Values are kept raw (a reserved field or unknown opcode decodes without error) so that
 * validation is one place, framing.cpp and the engine, and produces the right Terminate code.
 */
#ifndef IWARP_WIRE_HPP
#define IWARP_WIRE_HPP

#include <cstddef>
#include <cstdint>
#include <span>

namespace iwarp {

/** @brief Big-endian (network order) field access. */
namespace be {
/** @brief Reads 16 bits. */
inline uint16_t get16(const uint8_t *p) noexcept { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
/** @brief Reads 32 bits. */
inline uint32_t get32(const uint8_t *p) noexcept {
    return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 |
           p[3];
}
/** @brief Reads 64 bits. */
inline uint64_t get64(const uint8_t *p) noexcept { return static_cast<uint64_t>(get32(p)) << 32 | get32(p + 4); }
/** @brief Writes 16 bits. */
inline void put16(uint8_t *p, uint16_t v) noexcept {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
/** @brief Writes 32 bits. */
inline void put32(uint8_t *p, uint32_t v) noexcept {
    put16(p, static_cast<uint16_t>(v >> 16));
    put16(p + 2, static_cast<uint16_t>(v));
}
/** @brief Writes 64 bits. */
inline void put64(uint8_t *p, uint64_t v) noexcept {
    put32(p, static_cast<uint32_t>(v >> 32));
    put32(p + 4, static_cast<uint32_t>(v));
}
}  // namespace be

/** @brief MPA ULPDU_Length field size. */
inline constexpr size_t kMpaLengthLen = 2;
/** @brief MPA CRC field size (present even when CRC is not negotiated, then zero). */
inline constexpr size_t kMpaCrcLen = 4;
/** @brief DDP tagged header with the RDMAP control byte: control(2) STag(4) TO(8). */
inline constexpr size_t kTaggedHeaderLen = 14;
/** @brief DDP untagged header with the RDMAP control byte: control(2) RsvdULP/Inv STag(4) QN(4) MSN(4) MO(4). */
inline constexpr size_t kUntaggedHeaderLen = 18;
/** @brief RDMA Read Request header: sink STag(4) sink TO(8) size(4) source STag(4) source TO(8). */
inline constexpr size_t kReadRequestLen = 28;
/**
 * @brief RFC 7306 Atomic Request header (§5.2.1): AOpCode(4, low bits) Request Identifier(4) Remote STag(4)
 *        Remote Tagged Offset(8) Add or Swap Data(8) Add or Swap Mask(8) Compare Data(8) Compare Mask(8).
 */
inline constexpr size_t kAtomicRequestLen = 52;
/** @brief RFC 7306 Atomic Response header (§5.2.2, Fig. 6): Original Request Identifier(4) Original Value(8). */
inline constexpr size_t kAtomicResponseLen = 12;
/** @brief RFC 7306 Immediate Data (§6.2): exactly eight bytes. */
inline constexpr size_t kImmediateDataLen = 8;
/** @brief Terminate control word. */
inline constexpr size_t kTerminateControlLen = 4;
/** @brief Largest Terminate payload: control(4) segment length(2) DDP header(18) Read Request header(28). */
inline constexpr size_t kTerminateMaxLen = kTerminateControlLen + 2 + kUntaggedHeaderLen + kReadRequestLen;
/** @brief DDP version this engine speaks (DV field). */
inline constexpr uint8_t kDdpVersion = 1;
/** @brief RDMAP version this engine speaks (RV field). */
inline constexpr uint8_t kRdmapVersion = 1;

/** @brief RDMAP opcodes (RFC 5040 §4.3). */
enum class Opcode : uint8_t {
    rdma_write = 0x0,     /**< RDMA Write (tagged). */
    read_request = 0x1,   /**< RDMA Read Request (untagged, QN 1). */
    read_response = 0x2,  /**< RDMA Read Response (tagged). */
    send = 0x3,           /**< Send (untagged, QN 0). */
    send_inv = 0x4,       /**< Send with Invalidate. */
    send_se = 0x5,        /**< Send with Solicited Event. */
    send_se_inv = 0x6,    /**< Send with Solicited Event and Invalidate. */
    terminate = 0x7,      /**< Terminate (untagged, QN 2). */
    immediate = 0x8,      /**< RFC 7306 Immediate Data (untagged, QN 0, consumes a receive). */
    immediate_se = 0x9,   /**< RFC 7306 Immediate Data with Solicited Event. */
    atomic_request = 0xa, /**< RFC 7306 Atomic Request (untagged, QN 1, with the Read Requests). */
    atomic_response = 0xb /**< RFC 7306 Atomic Response (untagged, QN 3). */
};

/** @brief Untagged DDP queue numbers used by RDMAP. */
enum class Queue : uint32_t {
    send = 0,            /**< Send variants and Immediate Data. */
    read_request = 1,    /**< RDMA Read Requests and Atomic Requests. */
    terminate = 2,       /**< Terminate. */
    atomic_response = 3  /**< RFC 7306 Atomic Responses. */
};
/** @brief Untagged queues an engine numbers messages on (QN 0 to 3). */
inline constexpr size_t kQueues = 4;

/** @brief What the RFCs say about one RDMAP opcode; one table drives validation (receive) and framing (send). */
struct OpcodeInfo {
    const char *name = "reserved"; /**< Name for logs and errors. */
    bool valid = false;            /**< Defined by RFC 5040 (and implemented here). */
    bool tagged = false;           /**< Carried in tagged DDP segments. */
    Queue queue = Queue::send;     /**< Untagged queue number, for untagged opcodes. */
    bool send = false;             /**< A Send variant: consumes a posted receive. */
    bool solicited = false;        /**< Carries a solicited event. */
    bool invalidate = false;       /**< Invalidates the STag in the header's RsvdULP field. */
    /**
     * Defined by RFC 7306: sent and served only where both ends agreed to speak it (EngineConfig::rfc7306); to any
     * other engine it is an unexpected opcode, as it is to Linux siw.
     */
    bool rfc7306 = false;
};

/** @brief The opcode table, indexed by the 4-bit opcode value. */
inline constexpr OpcodeInfo kOpcodes[16] = {
    {"RDMA Write", true, true, Queue::send, false, false, false},
    {"RDMA Read Request", true, false, Queue::read_request, false, false, false},
    {"RDMA Read Response", true, true, Queue::send, false, false, false},
    {"Send", true, false, Queue::send, true, false, false},
    {"Send with Invalidate", true, false, Queue::send, true, false, true},
    {"Send with Solicited Event", true, false, Queue::send, true, true, false},
    {"Send with Solicited Event and Invalidate", true, false, Queue::send, true, true, true},
    {"Terminate", true, false, Queue::terminate, false, false, false},
    {"Immediate Data", true, false, Queue::send, false, false, false, true},
    {"Immediate Data with Solicited Event", true, false, Queue::send, false, true, false, true},
    {"Atomic Request", true, false, Queue::read_request, false, false, false, true},
    {"Atomic Response", true, false, Queue::atomic_response, false, false, false, true},
    // 0xc-0xf: reserved ("unexpected opcode")
};

/** @brief The table entry of a (raw, possibly invalid) opcode value. */
[[nodiscard]] constexpr const OpcodeInfo &opcode_info(uint8_t opcode) noexcept { return kOpcodes[opcode & 0xf]; }

/** @brief A DDP segment header with its RDMAP control byte, decoded to host order. */
struct Header {
    bool tagged = false;         /**< T flag. */
    bool last = true;            /**< L flag: last segment of the DDP message. */
    uint8_t ddp_version = kDdpVersion;   /**< DV field (2 bits). */
    uint8_t ddp_reserved = 0;    /**< Reserved bits of the DDP control byte (must be zero). */
    uint8_t rdmap_version = kRdmapVersion; /**< RV field (2 bits). */
    uint8_t rdmap_reserved = 0;  /**< Reserved bits of the RDMAP control byte (must be zero). */
    uint8_t opcode = 0;          /**< Raw 4-bit opcode (see Opcode). */
    uint32_t stag = 0;           /**< Tagged: data sink STag. */
    uint64_t to = 0;             /**< Tagged: data sink tagged offset. */
    uint32_t inv_stag = 0;       /**< Untagged: RsvdULP, the STag to invalidate for Send with Invalidate. */
    uint32_t qn = 0;             /**< Untagged: queue number. */
    uint32_t msn = 0;            /**< Untagged: message sequence number. */
    uint32_t mo = 0;             /**< Untagged: message offset. */

    /** @brief Encoded size: 14 bytes tagged, 18 untagged. */
    [[nodiscard]] size_t size() const noexcept { return tagged ? kTaggedHeaderLen : kUntaggedHeaderLen; }
    /** @brief The opcode as the enum (meaningful only for values 0..0xb). */
    [[nodiscard]] Opcode op() const noexcept { return static_cast<Opcode>(opcode); }
    /** @brief Field-wise equality. */
    friend bool operator==(const Header &, const Header &) = default;
};

/** @brief Header size announced by a DDP control byte (its T flag). */
[[nodiscard]] inline size_t header_size(uint8_t ddp_control) noexcept {
    return (ddp_control & 0x80) != 0 ? kTaggedHeaderLen : kUntaggedHeaderLen;
}
/** @brief Writes @p h (h.size() bytes) at @p out. */
void encode_header(const Header &h, uint8_t *out) noexcept;
/** @brief Reads a header at @p in; header_size(in[0]) bytes must be readable. */
[[nodiscard]] Header decode_header(const uint8_t *in) noexcept;

/** @brief The RDMA Read Request header (the payload of a Read Request message). */
struct ReadRequest {
    uint32_t sink_stag = 0; /**< Where the Read Response data goes (requester's STag). */
    uint64_t sink_to = 0;   /**< Tagged offset in the sink. */
    uint32_t size = 0;      /**< RDMA Read message size in bytes. */
    uint32_t src_stag = 0;  /**< Data source STag at the responder. */
    uint64_t src_to = 0;    /**< Tagged offset in the source. */
    /** @brief Field-wise equality. */
    friend bool operator==(const ReadRequest &, const ReadRequest &) = default;
};
/** @brief Writes @p r (28 bytes). */
void encode_read_request(const ReadRequest &r, uint8_t *out) noexcept;
/** @brief Reads 28 bytes. */
[[nodiscard]] ReadRequest decode_read_request(const uint8_t *in) noexcept;

/** @brief RFC 7306 atomic operation codes (AOpCode, §5.1; 0x1 and 0x3-0xf are reserved). */
enum class AtomicOp : uint8_t {
    fetch_add = 0x0, /**< FetchAdd: add, in the fields the Add Mask marks, and return the original value. */
    cmp_swap = 0x2   /**< CmpSwap: where the Compare Mask's bits compare equal, swap the Swap Mask's bits. */
};

/** @brief The RFC 7306 Atomic Request header (the payload of an Atomic Request message). */
struct AtomicRequest {
    uint8_t op = 0;                 /**< Raw AOpCode (4 bits; see AtomicOp). */
    uint32_t request_id = 0;        /**< Chosen by the requester, echoed in the response. */
    uint32_t stag = 0;              /**< Remote STag. */
    uint64_t to = 0;                /**< Remote tagged offset of the 64-bit target (8-byte aligned). */
    uint64_t add_swap = 0;          /**< Add Data (FetchAdd) or Swap Data (CmpSwap). */
    uint64_t add_swap_mask = 0;     /**< Add Mask (field boundaries; 0: one 64-bit add) or Swap Mask. */
    uint64_t compare = 0;           /**< Compare Data (CmpSwap; 0 for FetchAdd). */
    uint64_t compare_mask = ~0ull;  /**< Compare Mask (CmpSwap; all ones for FetchAdd, ignored). */
    /** @brief Field-wise equality. */
    friend bool operator==(const AtomicRequest &, const AtomicRequest &) = default;
};
/** @brief Writes @p r (kAtomicRequestLen bytes, big-endian; the reserved bits zero). */
void encode_atomic_request(const AtomicRequest &r, uint8_t *out) noexcept;
/** @brief Reads kAtomicRequestLen bytes (the reserved bits ignored, as the RFC says). */
[[nodiscard]] AtomicRequest decode_atomic_request(const uint8_t *in) noexcept;
/**
 * @brief What an atomic request leaves in a target that held @p original (RFC 7306 §5.1): FetchAdd adds within the
 *        fields whose most significant bits the Add Mask marks (a carry out of a marked bit is dropped); CmpSwap
 *        swaps in the Swap Mask's bits of Swap Data when the Compare Mask's bits of Compare Data equal the
 *        original's. The caller checks the opcode first.
 */
[[nodiscard]] uint64_t atomic_result(const AtomicRequest &r, uint64_t original) noexcept;
/** @brief Whether @p op is an AOpCode this engine executes. */
[[nodiscard]] constexpr bool atomic_op_known(uint8_t op) noexcept {
    return op == static_cast<uint8_t>(AtomicOp::fetch_add) || op == static_cast<uint8_t>(AtomicOp::cmp_swap);
}

/**
 * @brief The RNIC-PI's layout of RFC 7306's 8-byte Immediate Data (the RFC leaves its meaning to the ULP), a
 *        big-endian integer: the verbs' 32-bit immediate value in the low half, and in the high half the length of
 *        the RDMA Write it follows (RI_WR_RDMA_WRITE_IMM; 0 alone), which the receive completion reports as
 *        InfiniBand's RDMA Write with Immediate does.
 */
[[nodiscard]] constexpr uint64_t immediate_field(uint32_t imm, uint32_t write_len) noexcept {
    return (uint64_t{write_len} << 32) | imm;
}
/** @brief The immediate value of Immediate Data @p field (immediate_field()). */
[[nodiscard]] constexpr uint32_t immediate_value(uint64_t field) noexcept { return static_cast<uint32_t>(field); }
/** @brief The Write length of Immediate Data @p field (immediate_field()). */
[[nodiscard]] constexpr uint32_t immediate_write_len(uint64_t field) noexcept {
    return static_cast<uint32_t>(field >> 32);
}

/** @brief The RFC 7306 Atomic Response header. */
struct AtomicResponse {
    uint32_t request_id = 0; /**< The request's identifier. */
    uint64_t original = 0;   /**< The target's value before the operation. */
    /** @brief Field-wise equality. */
    friend bool operator==(const AtomicResponse &, const AtomicResponse &) = default;
};
/** @brief Writes @p r (kAtomicResponseLen bytes). */
void encode_atomic_response(const AtomicResponse &r, uint8_t *out) noexcept;
/** @brief Reads kAtomicResponseLen bytes. */
[[nodiscard]] AtomicResponse decode_atomic_response(const uint8_t *in) noexcept;

/** @brief Terminate layers. */
enum class Layer : uint8_t {
    rdmap = 0x0, /**< RDMAP. */
    ddp = 0x1,   /**< DDP. */
    llp = 0x2    /**< The lower layer: MPA over TCP. */
};

/** @brief A Terminate error: layer, error type and error code (RFC 5040 §5, RFC 5041 §7, RFC 5044 §8). */
struct TermCode {
    uint8_t layer = 0; /**< Layer (4 bits). */
    uint8_t etype = 0; /**< Error type (4 bits). */
    uint8_t code = 0;  /**< Error code. */
    /** @brief Field-wise equality. */
    friend constexpr bool operator==(const TermCode &, const TermCode &) = default;
    /** @brief The first byte of the Terminate control word: layer and etype. */
    [[nodiscard]] constexpr uint8_t layer_etype() const noexcept {
        return static_cast<uint8_t>(layer << 4 | (etype & 0xf));
    }
};

/** @brief The Terminate codes this engine sends or recognises (IANA rddp registry). */
namespace term {
// RDMAP (layer 0)
inline constexpr TermCode kRdmapLocalCatastrophic{0x0, 0x0, 0x00};  /**< RDMAP local catastrophic error. */
inline constexpr TermCode kRdmapInvalidStag{0x0, 0x1, 0x00};        /**< Remote protection: invalid STag. */
inline constexpr TermCode kRdmapBaseBounds{0x0, 0x1, 0x01};         /**< Remote protection: base or bounds. */
inline constexpr TermCode kRdmapAccessRights{0x0, 0x1, 0x02};       /**< Remote protection: access rights. */
inline constexpr TermCode kRdmapStagNotAssociated{0x0, 0x1, 0x03};  /**< Remote protection: STag not in stream's PD. */
inline constexpr TermCode kRdmapToWrap{0x0, 0x1, 0x04};             /**< Remote protection: tagged offset wrap. */
inline constexpr TermCode kRdmapCannotInvalidate{0x0, 0x1, 0x09};   /**< Remote protection: STag cannot be invalidated. */
inline constexpr TermCode kRdmapInvalidVersion{0x0, 0x2, 0x05};     /**< Remote operation: invalid RDMAP version. */
inline constexpr TermCode kRdmapUnexpectedOpcode{0x0, 0x2, 0x06};   /**< Remote operation: unexpected opcode. */
inline constexpr TermCode kRdmapCatastrophicStream{0x0, 0x2, 0x07}; /**< Remote operation: catastrophic, this stream. */
// DDP (layer 1)
inline constexpr TermCode kDdpLocalCatastrophic{0x1, 0x0, 0x00};    /**< DDP local catastrophic error. */
inline constexpr TermCode kDdpTaggedInvalidStag{0x1, 0x1, 0x00};    /**< Tagged buffer: invalid STag. */
inline constexpr TermCode kDdpTaggedBaseBounds{0x1, 0x1, 0x01};     /**< Tagged buffer: base or bounds violation. */
inline constexpr TermCode kDdpTaggedStagNotAssociated{0x1, 0x1, 0x02}; /**< Tagged buffer: STag not in stream's PD. */
inline constexpr TermCode kDdpTaggedToWrap{0x1, 0x1, 0x03};         /**< Tagged buffer: tagged offset wrap. */
inline constexpr TermCode kDdpTaggedInvalidVersion{0x1, 0x1, 0x04}; /**< Tagged buffer: invalid DDP version. */
inline constexpr TermCode kDdpInvalidQn{0x1, 0x2, 0x01};            /**< Untagged buffer: invalid QN. */
inline constexpr TermCode kDdpNoBuffer{0x1, 0x2, 0x02};             /**< Untagged buffer: invalid MSN, no buffer. */
inline constexpr TermCode kDdpMsnRange{0x1, 0x2, 0x03};             /**< Untagged buffer: MSN out of range. */
inline constexpr TermCode kDdpInvalidMo{0x1, 0x2, 0x04};            /**< Untagged buffer: invalid MO. */
inline constexpr TermCode kDdpMessageTooLong{0x1, 0x2, 0x05};       /**< Untagged buffer: message too long. */
inline constexpr TermCode kDdpUntaggedInvalidVersion{0x1, 0x2, 0x06}; /**< Untagged buffer: invalid DDP version. */
// LLP: MPA (layer 2, etype 0)
inline constexpr TermCode kLlpConnectionLost{0x2, 0x0, 0x01};       /**< TCP connection closed, terminated or lost. */
inline constexpr TermCode kLlpCrcError{0x2, 0x0, 0x02};             /**< MPA CRC error. */
inline constexpr TermCode kLlpMarkerError{0x2, 0x0, 0x03};          /**< MPA marker and ULPDU length mismatch. */
inline constexpr TermCode kLlpInvalidMpaFrame{0x2, 0x0, 0x04};      /**< Invalid MPA request or reply frame. */
inline constexpr TermCode kLlpLocalCatastrophic{0x2, 0x0, 0x05};    /**< Local catastrophic error (RFC 6581). */
inline constexpr TermCode kLlpInsufficientIrd{0x2, 0x0, 0x06};      /**< Insufficient IRD resources (RFC 6581). */
inline constexpr TermCode kLlpNoMatchingRtr{0x2, 0x0, 0x07};        /**< No matching RTR option (RFC 6581). */
}  // namespace term

/** @brief A human-readable name of a Terminate code, e.g. "DDP untagged buffer error: invalid MSN, no buffer". */
[[nodiscard]] const char *term_name(TermCode code) noexcept;

/** @brief Terminate header control bits (Hdrct). */
enum TermHdrct : uint8_t {
    kTermHdrM = 0x80, /**< M: the DDP Segment Length field is valid. */
    kTermHdrD = 0x40, /**< D: the terminated DDP header is included. */
    kTermHdrR = 0x20  /**< R: the terminated RDMAP (Read Request) header is included. */
};

/** @brief The payload of a Terminate message. */
struct Terminate {
    TermCode code;                        /**< What went wrong. */
    uint8_t hdrct = 0;                    /**< A set of TermHdrct bits. */
    uint16_t ddp_segment_length = 0;      /**< Length of the offending segment's payload (valid with M). */
    uint8_t ddp_header[kUntaggedHeaderLen]{}; /**< Copy of the offending DDP header (with D). */
    uint8_t rdmap_header[kReadRequestLen]{};  /**< Copy of the offending Read Request header (with R). */
    /** @brief Size of the copied DDP header: 14 or 18 by its T flag, 0 without D. */
    [[nodiscard]] size_t ddp_header_len() const noexcept {
        return (hdrct & kTermHdrD) != 0 ? header_size(ddp_header[0]) : 0;
    }
    /** @brief Encoded size of this payload. */
    [[nodiscard]] size_t size() const noexcept;
};
/** @brief Writes the Terminate payload (t.size() bytes, at most kTerminateMaxLen). */
size_t encode_terminate(const Terminate &t, uint8_t *out) noexcept;
/** @brief Reads a Terminate payload; false when @p in is too short for what its Hdrct announces. */
[[nodiscard]] bool decode_terminate(std::span<const uint8_t> in, Terminate &out) noexcept;

}  // namespace iwarp

#endif  // IWARP_WIRE_HPP
