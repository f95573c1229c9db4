/**
 * @file engine.hpp
 * @brief The DDP/RDMAP protocol engine of one queue pair in RDMA mode: placement and validation of inbound
 *        segments, segmentation of outbound messages, RDMA Read responder and requester, Terminate.
 *
 * The engine owns no socket and no thread. Its owner (the softrnic uVP or kVP, the hwstub offload engine):
 * - feeds the inbound TCP stream through receiver() (Receiver::next_buffer()/advance() or feed());
 * - asks next_frame() for the next outbound FPDU as a gather list, writes it to the stream, and calls
 *   frame_sent() when all of it is written;
 * - answers the engine's questions through EngineOwner: what an STag maps to, which receive buffer is next,
 *   whether an STag may be invalidated; and receives completions and the peer's Terminate.
 *
 * Every queue is a fixed-capacity ring allocated when the engine is built: nothing is allocated per operation.
 * Any invalid inbound segment stops the receive side with the RFC Terminate code; next_frame() then yields the
 * Terminate message and nothing more, and failed() reports the reason.
 *
 * Foreign memory: a Region, ReceiveBuffer or WorkRequest marked `foreign` lives in another process (the hwstub
 * daemon runs the engine for a consumer's QP). Its addresses are never dereferenced; the engine reaches them only
 * through EngineOwner::dma_read()/dma_write(). Inbound payload for foreign memory is received and CRC-checked in a
 * bounce buffer (allocated only when EngineConfig::foreign_memory is set) and written out once the segment checked
 * out; outbound payload from foreign memory is read into the frame's snapshot.
 *
 * Placement order: the last byte of an RDMA Write or Read Response (the last octet of the last segment, L set)
 * becomes visible after every other byte of the message, as InfiniBand HCAs place it in practice and as consumers
 * that poll a buffer's last byte (ib_write_lat, `dtest -W -D`, MPI eager paths) rely on; the RFCs do not promise it.
 * The receiver is handed that byte as a placement target of its own, after a store fence (placement_fence()), so it
 * comes from the same read as the rest of the segment and is written by a separate store; foreign memory gets it
 * from the owner's dma_write(), which writes the last byte of each call last.
 */
#ifndef IWARP_ENGINE_HPP
#define IWARP_ENGINE_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "iwarp/framing.hpp"
#include "iwarp/mpa.hpp"
#include "iwarp/wire.hpp"
#include "rnicpi/cpp/status.hpp"
#include "rnicpi/ri_verbs.h"

namespace iwarp {

/** @brief Most scatter/gather elements per work request. */
inline constexpr uint32_t kMaxSge = 8;

/**
 * @brief A local buffer the owner has already resolved from an lkey to an address. No default member values: the
 *        lists of them in WorkRequest and ReceiveBuffer are read only up to their count, and a request made for
 *        every message should not zero 128 bytes of entries it never uses (`LocalSpan{}` still zeroes one).
 */
struct LocalSpan {
    uint8_t *addr; /**< First byte. */
    size_t len;    /**< Length. */
};

/** @brief What an STag names, as the owner's memory management resolves it. */
struct Region {
    uint8_t *base = nullptr; /**< Address of the byte at tagged offset Region::to_base. */
    uint64_t to_base = 0;    /**< Tagged offset of the first byte. */
    uint64_t length = 0;     /**< Length in bytes. */
    uint32_t access = 0;     /**< RI_ACCESS_* rights. */
    uint32_t pd = 0;         /**< Protection domain identifier. */
    /**
     * Region::base is an address in the owner's DMA address space, not dereferenceable here: the engine reaches
     * the region only through EngineOwner::dma_read()/dma_write().
     */
    bool foreign = false;
};

/** @brief A posted receive buffer. */
struct ReceiveBuffer {
    uint64_t wr_id = 0;        /**< Consumer identifier. */
    LocalSpan sge[kMaxSge];    /**< Scatter list. */
    uint32_t num_sge = 0;      /**< Entries used. */
    /**
     * The scatter list's addresses are in the owner's DMA address space, not dereferenceable here: the engine
     * writes to them only through EngineOwner::dma_write().
     */
    bool foreign = false;
};

/** @brief Outbound operations. */
enum class WorkType : uint8_t {
    send,        /**< Send. */
    send_se,     /**< Send with Solicited Event. */
    send_inv,    /**< Send with Invalidate of WorkRequest::inv_stag at the peer. */
    send_se_inv, /**< Send with Solicited Event and Invalidate. */
    write,       /**< RDMA Write of the gather list to remote_stag/remote_to. */
    read,        /**< RDMA Read of length bytes from remote_stag/remote_to into local_stag/local_to. */
    /**
     * RFC 7306 Atomic Request (EngineConfig::rfc7306): WorkRequest::atomic on the peer's 64-bit target at
     * remote_stag/remote_to; the original value is written to sge[0] (8 bytes) when the response arrives.
     */
    atomic,
    immediate,   /**< RFC 7306 Immediate Data: WorkRequest::immediate, in one of the peer's receives. */
    immediate_se /**< RFC 7306 Immediate Data with Solicited Event. */
};

/** @brief An outbound work request, with local buffers already resolved. */
struct WorkRequest {
    uint64_t wr_id = 0;        /**< Consumer identifier. */
    WorkType type = WorkType::send; /**< Operation. */
    LocalSpan sge[kMaxSge];    /**< Gather list (Send, Write). */
    uint32_t num_sge = 0;      /**< Entries used. */
    uint32_t remote_stag = 0;  /**< Write/Read: remote STag. */
    uint64_t remote_to = 0;    /**< Write/Read: remote tagged offset. */
    uint32_t inv_stag = 0;     /**< Send with Invalidate: the STag the peer invalidates. */
    uint32_t local_stag = 0;   /**< Read: the local sink STag (travels in the Read Request). */
    uint64_t local_to = 0;     /**< Read: the local sink tagged offset. */
    uint32_t length = 0;       /**< Read: bytes to read. */
    /** Atomic: the operation and its operands (request_id, stag and to are the engine's to fill in). */
    AtomicRequest atomic;
    uint64_t immediate = 0;    /**< Immediate Data: the eight bytes, sent big-endian. */
    /**
     * The gather list's addresses are in the owner's DMA address space, not dereferenceable here: the engine reads
     * them only through EngineOwner::dma_read().
     */
    bool foreign = false;
};

/** @brief A completed operation. */
struct Completion {
    /** @brief What completed. */
    enum class Kind : uint8_t { send, write, read, recv, atomic };
    uint64_t wr_id = 0;         /**< From the work request or receive buffer. */
    Kind kind = Kind::send;     /**< What completed. */
    uint32_t byte_len = 0;      /**< Bytes received (recv) or transferred. */
    bool solicited = false;     /**< recv: the Send carried a solicited event. */
    bool invalidated = false;   /**< recv: the Send invalidated Completion::inv_stag. */
    uint32_t inv_stag = 0;      /**< recv: the invalidated STag. */
    bool immediate = false;     /**< recv: RFC 7306 Immediate Data (byte_len 0), in Completion::imm_data. */
    uint64_t imm_data = 0;      /**< recv: the Immediate Data. */
};

/** @brief Questions the engine asks and events it reports; implemented by the provider. */
class EngineOwner {
public:
    virtual ~EngineOwner() = default;
    /** @brief Resolves @p stag; false when it is not a valid STag. */
    virtual bool resolve_stag(uint32_t stag, Region &out) = 0;
    /** @brief Takes the next posted receive buffer; false when none is posted. */
    virtual bool take_receive(ReceiveBuffer &out) = 0;
    /** @brief Invalidates @p stag on the peer's request; false when it cannot be (wrong PD, bound window...). */
    virtual bool invalidate_stag(uint32_t stag) = 0;
    /** @brief An operation completed. */
    virtual void completed(const Completion &c) = 0;
    /** @brief The peer sent a Terminate; the stream is over. */
    virtual void peer_terminated(const Terminate &t) = 0;
    /**
     * @brief Copies @p len bytes from foreign address @p src (a `foreign` Region, ReceiveBuffer or WorkRequest)
     *        into @p dst; false when they cannot be read, which stops the stream with a local catastrophic error.
     *        The default, for owners with no foreign memory, reads nothing.
     */
    virtual bool dma_read(uint64_t src, void *dst, size_t len) noexcept {
        (void)src, (void)dst, (void)len;
        return false;
    }
    /**
     * @brief Copies @p len bytes from @p src to foreign address @p dst; false when they cannot be written, which
     *        stops the stream with a local catastrophic error. The last byte must become visible after the others
     *        (a segment is one call, so a message's last byte is then placed last; see the file comment). The
     *        default writes nothing.
     */
    virtual bool dma_write(uint64_t dst, const void *src, size_t len) noexcept {
        (void)dst, (void)src, (void)len;
        return false;
    }
    /**
     * @brief RFC 7306 responder, foreign memory: applies @p r to the 64-bit target at foreign address @p target
     *        (8-byte aligned, checked against the STag) atomically with respect to every other atomic this owner's
     *        engines serve, and returns the value it held in @p original; false when the target cannot be reached,
     *        which stops the stream with a local catastrophic error. Targets in the engine's own address space are
     *        served by the engine itself (std::atomic_ref). The default reaches nothing.
     */
    virtual bool dma_atomic(uint64_t target, const AtomicRequest &r, uint64_t &original) noexcept {
        (void)target, (void)r, (void)original;
        return false;
    }
    /**
     * @brief Single copy, sender: whether the peer takes pulls now (EngineConfig::pull_min). Asked once per message
     *        of at least that size. The default: never.
     */
    virtual bool peer_takes_pulls() noexcept { return false; }
    /**
     * @brief Single copy, receiver (EngineConfig::accept_pull): copies the peer's bytes at @p remote (@p nremote
     *        ranges of the peer's memory, as its pull named them) into @p local (@p nlocal ranges of this side's,
     *        already checked), the last byte last; false when not every byte moved, which stops the stream with a
     *        local catastrophic error. The default moves nothing.
     */
    virtual bool pull(const iovec *local, size_t nlocal, const iovec *remote, size_t nremote) noexcept {
        (void)local, (void)nlocal, (void)remote, (void)nremote;
        return false;
    }
};

/**
 * @brief Single copy over a same-host channel (rnicpi/ri_channel.h): the bit of Header::ddp_reserved that marks a
 *        pull, whose payload is a pull descriptor, or (with opcode kPullAckOpcode) a pull's acknowledgement.
 */
inline constexpr uint8_t kDdpPull = 0x1;
/** @brief The RDMAP opcode, reserved by RFC 5040, of a pull's acknowledgement (Header::msn: pulls done so far). */
inline constexpr uint8_t kPullAckOpcode = 0xf;
/**
 * @brief A pull descriptor: the message's length (4), its count of ranges (4), then per range its address (8) and
 *        length (4) in the sender's memory; at most kMaxSge ranges.
 */
inline constexpr size_t kPullDescriptorMax = 8 + 12 * kMaxSge;

/** @brief Parameters of the engine, mostly from the MPA negotiation. */
struct EngineConfig {
    uint32_t pd = 0;          /**< Protection domain of the QP: STags of other PDs are refused. */
    FramingOptions rx;        /**< Inbound framing (CRC, markers expected). */
    FramingOptions tx;        /**< Outbound framing (CRC, markers inserted). */
    size_t mulpdu = 1454;     /**< Largest outbound ULPDU (see mulpdu()). */
    uint32_t ird = 1;         /**< Inbound RDMA Reads this side serves at once. */
    uint32_t ord = 1;         /**< Outbound RDMA Reads this side has outstanding at once. */
    uint32_t sq_depth = 64;   /**< Send queue capacity. */
    uint8_t rtr_send = 0;     /**< Peer-to-peer initiator: the RTR type (RtrBits) to send first. */
    /**
     * Peer-to-peer responder: the RTR type (RtrBits) agreed on. Nothing is sent before it arrives, and a first
     * message that is not that RTR is a Terminate ("no matching RTR option"), not a hang.
     */
    uint8_t rtr_expect = 0;
    /**
     * Inbound Writes, Read Responses or Sends may target foreign memory: the engine then allocates, once, a
     * bounce buffer of kMaxUlpduLen bytes to receive and CRC-check their payload in before dma_write(). Without
     * it, an inbound segment for foreign memory is a local catastrophic error.
     */
    bool foreign_memory = false;
    /**
     * Single copy, sender: a Send or RDMA Write from the owner's own memory of at least this many bytes goes as a
     * pull when EngineOwner::peer_takes_pulls() says the peer takes them (the stream is a same-host channel); 0:
     * never.
     */
    size_t pull_min = 0;
    /**
     * Single copy, receiver: pulls are taken (EngineOwner::pull() copies their bytes). Otherwise kDdpPull is a
     * reserved bit like any other, ignored as RFC 5041 asks.
     */
    bool accept_pull = false;
    /**
     * Both ends agreed to speak RFC 7306 (atomics and Immediate Data). Without it the engine neither sends them
     * (post() answers ::RI_EOPNOTSUPP) nor takes them (an unexpected opcode, as Linux siw answers).
     */
    bool rfc7306 = false;
};

/**
 * @brief The engine configuration for a stream with negotiated parameters @p llp (the RDMA-mode transition's
 *        ri_llp_params_t), protection domain @p pd and send queue capacity @p sq_depth: CRC and markers from
 *        ri_llp_params_t::mpa_flags (markers in both directions), IRD/ORD, the RTR role and type (peer-to-peer only),
 *        MULPDU from ri_llp_params_t::fpdu_max (else from the MSS, else the engine's default). Every provider that
 *        runs the engine on a stream starts from this.
 */
[[nodiscard]] EngineConfig engine_config(const ri_llp_params_t &llp, uint32_t pd, uint32_t sq_depth) noexcept;

/** @brief Counters of one engine. */
struct EngineStats {
    uint64_t tx_fpdus = 0;  /**< FPDUs built. */
    uint64_t tx_bytes = 0;  /**< Payload bytes sent. */
    uint64_t rx_fpdus = 0;  /**< FPDUs received. */
    uint64_t rx_bytes = 0;  /**< Payload bytes placed. */
    uint64_t tx_pulls = 0;  /**< Messages sent as pulls (single copy; their bytes count in tx_bytes). */
    uint64_t rx_pulls = 0;  /**< Pulls taken (single copy; their bytes count in rx_bytes). */
};

/** @brief The protocol engine of one queue pair. */
class Engine final : private FpduSink {
public:
    /** @brief Builds an engine; all rings are allocated here. */
    Engine(EngineOwner &owner, const EngineConfig &config);
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    /** @brief The receive side, to feed the inbound stream into. */
    [[nodiscard]] Receiver &receiver() noexcept { return rx_; }
    /**
     * @brief Queues an outbound work request. ::RI_EAGAIN when the send queue is full, ::RI_EINVAL for a request
     *        that cannot be sent (too many SGEs), ::RI_ECANCELED after the stream failed.
     */
    [[nodiscard]] rdma::Status post(const WorkRequest &wr) noexcept;
    /** @brief Builds the next outbound FPDU; false when there is nothing to send now. */
    [[nodiscard]] bool next_frame(TxFrame &frame) noexcept;
    /**
     * @brief next_frame(), and with @p defer_crc a Send, RDMA Write or Read Response segment of at least
     *        kDeferCrcMin payload bytes (a Send or Write from the owner's own memory) leaves its CRC to finish_crc()
     *        (TxFrame::crc_pending): its sender can write the payload to the stream first and the CRC after it.
     */
    [[nodiscard]] bool next_frame(TxFrame &frame, bool defer_crc) noexcept;
    /**
     * @brief False only when next_frame() would build nothing now: no queued request, Read Response, RTR, nudge or
     *        Terminate due. A check before a transmit pass that would only find that out (after every inbound
     *        Send or Write, say).
     */
    [[nodiscard]] bool has_frame() const noexcept {
        if (pull_ack_due()) return true;
        if (rx_.failed()) return !peer_terminated_ && !terminate_built_;
        if (rtr_pending_ != 0) return false;
        return rtr_to_send_ || nudge_to_send_ || irq_count_ > 0 || sq_count_ > 0;
    }
    /** @brief The oldest frame from next_frame() is now completely written to the stream. */
    void frame_sent() noexcept;
    /**
     * @brief The owner's own Terminate (the consumer moved the QP to TERMINATE): stops the stream like a local
     *        failure with @p code, and next_frame() yields a Terminate with @p code that copies no header. Ignored
     *        after a failure or the peer's Terminate.
     */
    void abort(TermCode code) noexcept;
    /** @brief True after a local validation failure or a Terminate from the peer. */
    [[nodiscard]] bool failed() const noexcept { return rx_.failed() || peer_terminated_; }
    /** @brief The Terminate code of a local failure. */
    [[nodiscard]] TermCode failure() const noexcept { return rx_.failure(); }
    /** @brief True once the Terminate for a local failure has been handed out by next_frame(). */
    [[nodiscard]] bool terminate_sent() const noexcept { return terminate_built_; }
    /** @brief Counters. */
    [[nodiscard]] const EngineStats &stats() const noexcept { return stats_; }
    /** @brief The largest outbound ULPDU now (EngineConfig::mulpdu, clamped, or as set_emss() left it). */
    [[nodiscard]] size_t mulpdu() const noexcept { return cfg_.mulpdu; }
    /**
     * @brief The stream's effective MSS is now @p emss: FPDUs built from now on carry up to mulpdu(emss) octets of
     *        ULPDU (RFC 5044 section 4.2 derives MULPDU from the current EMSS). A message partly framed goes on in
     *        FPDUs of the new size; each FPDU names its own offset, so the peer sees no difference.
     */
    void set_emss(size_t emss) noexcept;
    /**
     * @brief The receive buffer a partly received Send is being placed into, if any: after a failure the owner
     *        flushes it with the rest of its receive queue.
     */
    [[nodiscard]] const ReceiveBuffer *active_receive() const noexcept { return recv_active_ ? &recv_ : nullptr; }
    /** @brief Work requests queued and not yet completed. */
    [[nodiscard]] size_t outstanding() const noexcept { return sq_count_ + ord_count_; }
    /**
     * @brief Queues a nudge: a zero-length RDMA Write (STag 1, TO 0, the frame of the Write RTR) that next_frame()
     *        yields next. It names no memory, makes no completion on either side and changes no sequence number;
     *        it only puts new in-sequence bytes on the stream, which makes a peer that left earlier bytes unread
     *        in its socket read them (see docs/siw-interop.md). False, and nothing queued, when a frame could not
     *        go now without breaking a message in two (a Send, Write or Read Response partly framed), while the
     *        RTR is still to go, or after a failure.
     */
    [[nodiscard]] bool nudge() noexcept;

private:
    // FpduSink
    std::optional<TermCode> on_header(const Header &h, size_t payload_len) override;
    std::span<uint8_t> payload_target(size_t offset, size_t remaining) override;
    std::optional<TermCode> on_segment_end() override;

    std::optional<TermCode> check_tagged(const Header &h, size_t len, uint32_t need_access, bool read_response);
    struct ReadResponseJob;
    // The responder's checks of [to, to + len) of STag @p stag with rights @p need (RFC 5040 §7.2, in its order);
    // on success job.src is its first byte (a DMA address for foreign memory) and job.foreign says which.
    std::optional<TermCode> check_remote(uint32_t stag, uint64_t to, uint64_t len, uint32_t need, ReadResponseJob &job);
    std::optional<TermCode> check_read_request();
    std::optional<TermCode> check_atomic_request();
    std::optional<TermCode> take_atomic_response();
    bool build_atomic_response(TxFrame &frame) noexcept;
    std::optional<TermCode> start_send(const Header &h, size_t len);
    void build_terminate(TxFrame &frame) noexcept;
    bool build_read_response(TxFrame &frame) noexcept;
    bool build_request(TxFrame &frame) noexcept;
    bool build_message(TxFrame &frame) noexcept;
    bool place_foreign(size_t len) noexcept;
    void push_tx_event(uint64_t seq, uint64_t wr_id, Completion::Kind kind, uint32_t bytes, bool pulled = false,
                       uint32_t pull = 0) noexcept;
    void complete_tx_events() noexcept;
    // Pulls taken since the last acknowledgement, to a peer that has not terminated.
    [[nodiscard]] bool pull_ack_due() const noexcept { return pulls_taken_ != pulls_acked_out_ && !peer_terminated_; }
    std::optional<TermCode> end_segment(size_t len);
    std::optional<TermCode> on_pull_header(const Header &h, size_t len);
    std::optional<TermCode> take_pull(size_t len);
    bool build_pull(WorkRequest &wr, size_t total, TxFrame &frame) noexcept;

    // What the segment being received is.
    enum class RxKind : uint8_t {
        none, tagged, send, read_request, terminate, discard, pull, pull_ack, atomic_request, atomic_response, immediate
    };

    struct ReadResponseJob {  // an inbound Read Request being answered (IRD ring), or an Atomic Request
        ReadRequest req;
        const uint8_t *src = nullptr;
        uint32_t sent = 0;
        bool foreign = false;  // src is a DMA address of the owner
        bool atomic = false;   // an Atomic Request on the 8 bytes at src (executed when its turn to answer comes)
        AtomicRequest areq;
    };
    struct OutstandingRead {  // an outbound Read Request waiting for its response (ORD ring), or an Atomic Request
        uint64_t wr_id = 0;
        uint32_t sink_stag = 0;
        uint64_t sink_to = 0;
        uint32_t length = 0;
        uint32_t received = 0;
        bool internal = false;  // the RTR's zero-length Read: no completion
        bool atomic = false;    // an Atomic Request: its response lands in `result`
        uint32_t request_id = 0;
        LocalSpan result;       // atomic: where the original value goes (8 bytes)
        bool result_foreign = false;
    };
    struct TxEvent {  // a completion due when the frame with sequence number `seq` is sent
        uint64_t seq = 0;
        uint64_t wr_id = 0;
        Completion::Kind kind = Completion::Kind::send;
        uint32_t bytes = 0;
        bool internal = false;
        bool pulled = false;  // a pull: due only once the peer acknowledged `pull` pulls
        uint32_t pull = 0;
    };

    EngineOwner &owner_;
    EngineConfig cfg_;
    Receiver rx_;
    Transmitter tx_;
    EngineStats stats_;

    // Receive side.
    RxKind rx_kind_ = RxKind::none;
    Header rx_hdr_;
    uint8_t *rx_tagged_base_ = nullptr;  // tagged: address of the segment's first byte
    bool rx_foreign_ = false;            // the segment's payload goes to bounce_, then to foreign memory
    std::unique_ptr<uint8_t[]> bounce_;  // kMaxUlpduLen bytes, only with EngineConfig::foreign_memory
    uint32_t rx_msn_[kQueues] = {1, 1, 1, 1};  // next expected MSN per untagged queue
    bool recv_active_ = false;           // a Send is being placed into recv_
    ReceiveBuffer recv_;
    size_t recv_capacity_ = 0;
    size_t recv_placed_ = 0;
    // The payload of a Read Request, Atomic Request or Response, Immediate Data or Terminate.
    uint8_t control_[kTerminateMaxLen]{};
    static_assert(kTerminateMaxLen >= kAtomicRequestLen);
    uint8_t rtr_pending_;                  // responder: the RTR type still awaited, 0 once it arrived
    bool peer_terminated_ = false;
    bool aborted_ = false;  // the owner's Terminate: no offending header to copy
    // Single copy. Receiver: the pull descriptor being received, pulls taken so far and acknowledged so far.
    uint8_t pull_desc_[kPullDescriptorMax]{};
    uint32_t pulls_taken_ = 0;
    uint32_t pulls_acked_out_ = 0;
    // Sender: pulls sent so far, and acknowledged by the peer so far.
    uint32_t pulls_sent_ = 0;
    uint32_t pulls_acked_ = 0;

    // Rings.
    std::vector<WorkRequest> sq_;
    size_t sq_head_ = 0, sq_count_ = 0;
    uint32_t sq_sent_ = 0;  // bytes of the head request already framed
    std::vector<ReadResponseJob> irq_;
    size_t irq_head_ = 0, irq_count_ = 0;
    std::vector<OutstandingRead> orq_;
    size_t orq_head_ = 0, ord_count_ = 0;
    std::vector<TxEvent> events_;
    size_t ev_head_ = 0, ev_count_ = 0;

    // Transmit side.
    uint32_t tx_msn_[kQueues] = {1, 1, 1, 1};
    uint32_t next_atomic_id_ = 1;  // Request Identifier of the next Atomic Request
    uint64_t frames_built_ = 0, frames_sent_ = 0;
    bool rtr_to_send_;
    bool nudge_to_send_ = false;  // nudge(): a zero-length Write goes next
    bool terminate_built_ = false;
    bool prefer_response_ = false;  // alternate between read responses and new requests
    bool defer_crc_ = false;        // next_frame(frame, true) is building
};

/**
 * @brief When a stream's sender looks at its TCP MSS again, for Engine::set_emss(): once per kRecheckBytes sent.
 *
 * The MSS the kAL reads at the RDMA-mode transition is often half the path's: Linux bounds a new connection's MSS by
 * half the largest window the peer has offered yet (on loopback, 32 KiB of 64 KiB) and raises it as the window
 * opens. Linux siw sizes every work request by the socket's current MSS; a sender outside the kernel cannot read it
 * for free, so it looks now and then. The provider reads the MSS (iwarp makes no socket calls): sent() says when,
 * looked() applies what it read.
 */
class EmssWatch {
public:
    /** @brief Bytes sent between two looks: one getsockopt per MiB is well under 0.1% of the time the MiB takes. */
    static constexpr uint64_t kRecheckBytes = uint64_t{1} << 20;
    /** @brief @p bytes went on the stream; true when the MSS is due to be read now (then call looked()). */
    [[nodiscard]] bool sent(uint64_t bytes) noexcept {
        if (bytes < due_) {
            due_ -= bytes;
            return false;
        }
        return true;
    }
    /**
     * @brief The MSS read: @p mss > 0 sizes @p engine's next FPDUs for it and starts the count again; 0 (the socket
     *        has none: not TCP, a test's socket pair) keeps the size the stream has and stops looking.
     */
    void looked(Engine &engine, size_t mss) noexcept {
        if (mss == 0) {
            due_ = UINT64_MAX;
            return;
        }
        engine.set_emss(mss);
        due_ = kRecheckBytes;
    }

    /** @brief The host fixed the stream's FPDU size (::RI_LLP_FPDU_FIXED): the MSS is never read. */
    void keep() noexcept { due_ = UINT64_MAX; }

private:
    uint64_t due_ = kRecheckBytes;
};

}  // namespace iwarp

#endif  // IWARP_ENGINE_HPP
