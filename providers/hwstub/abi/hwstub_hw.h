/**
 * @file hwstub_hw.h
 * @brief The "hardware" interface of hwstub: the formats a hardware RNIC's driver and its adapter agree on, here
 *        between the hwstub uVP (the consumer's fast-path shim) and the offload engine (OE) in the kVP.
 *
 * This is the part of a provider a vendor replaces with its own chip's formats. Everything lives in shared memory
 * (a memfd mapped by both sides), exactly as a PCI RNIC's queues live in host memory the adapter reaches by DMA:
 *
 * - **Work queues** (a QP's send and receive queues, an SRQ): a ring of fixed-size WQE slots (a power of two, at
 *   least 64 bytes) and a ::hwstub_wq_ctrl block. The host writes a WQE into slot `producer % depth`, then
 *   publishes `producer + 1` with a release store (the doorbell record). The OE reads slots up to the producer
 *   index (acquire) and publishes how far it has got in `consumer`: for a send queue that is the cumulative count
 *   of requests done (the OE's mirror of "requests completed", as TOAD mirrors bytes sent), which is what frees
 *   slots, signalled or not. Indexes are free-running 32-bit counters; `producer - consumer` is the occupancy.
 * - **Shared receive queues** (minor 1): a ring of receive WQE slots and a ::hwstub_wq_ctrl, as a receive queue's.
 *   The OE takes a WQE only when a message of one of the SRQ's QPs needs it, copies it into that QP's context and
 *   moves `consumer` on at once (so `consumer` counts WQEs taken, and frees their slots, long before they complete);
 *   the receive then completes on the taking QP's receive CQ with that QP's number. Posting to an SRQ rings no
 *   doorbell: the OE reads its producer index when it needs a receive. A WQE taken by a QP that goes to ERROR is
 *   flushed with that QP; the WQEs no QP took stay in the SRQ for the others.
 * - **Completion queues**: a ring of ::hwstub_cqe and a ::hwstub_cq_ctrl block. The OE writes a CQE whole and
 *   sets its `owner` byte last (release); the owner bit of pass n over the ring is `(n & 1) ^ 1`, so a zeroed ring
 *   holds no valid CQE and the host never has to clear one. The host polls the slot at its consumer index, reads
 *   the CQE after the owner byte (acquire), and publishes its consumer index so the OE can tell a full CQ (then it
 *   raises a CQ overflow instead of writing).
 * - **Doorbell**: after publishing a producer index the host looks at ::hwstub_engine_page::sleeping (after a full
 *   fence); only if the OE said it is going to sleep (1) does it write to the engine's eventfd, and only the poster
 *   that swaps 1 for 2 writes it: later posters of the same sleep find 2 and make no system call. The OE sets `sleeping`,
 *   fences, and looks at every producer index once more before it waits, so a post is never missed and a busy OE
 *   costs the poster no system call.
 * - **Interrupts**: the host arms a CQ by incrementing `arm_seq` (after writing `arm_solicited`); when the OE writes
 *   a CQE that matches an arm it has not answered yet, it stores `arm_seq` into `notified_seq` and raises the
 *   completion event through the kAL's completion event handler path (the "interrupt").
 *
 * Plain C, fixed-width fields, no implicit padding, little-endian as the host.
 */
#ifndef HWSTUB_HW_H
#define HWSTUB_HW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Provider name of both halves. */
#define HWSTUB_PROVIDER_NAME "hwstub"
/** @brief Vendor of both halves. */
#define HWSTUB_VENDOR "OpenRDMA"

/** @brief Major version of these formats: a uVP and an OE of different majors refuse each other at Open RNIC. */
#define HWSTUB_HW_MAJOR 1u
/** @brief Minor version: grows when fields are appended (1: shared receive queues; 2: fast registration). */
#define HWSTUB_HW_MINOR 2u
/** @brief Version word. */
#define HWSTUB_HW_VERSION ((HWSTUB_HW_MAJOR << 16) | HWSTUB_HW_MINOR)

/** @brief Bytes of a cache line: control words each side writes live on lines of their own. */
#define HWSTUB_CACHE_LINE 64u

/** @brief A scatter/gather element of a WQE: a range of registered memory named by its lkey. */
struct hwstub_sge {
    uint64_t addr;   /**< Address in the consumer's address space. */
    uint32_t length; /**< Bytes. */
    uint32_t lkey;   /**< Local STag of the region holding the range. */
};

/** @brief Send WQE opcodes (::hwstub_send_wqe::opcode). */
enum hwstub_send_opcode {
    HWSTUB_OP_SEND = 1,          /**< Send. */
    HWSTUB_OP_SEND_INV = 2,      /**< Send with Invalidate of ::hwstub_send_wqe::inv_stag at the peer. */
    HWSTUB_OP_WRITE = 3,         /**< RDMA Write to remote_stag/remote_to. */
    HWSTUB_OP_READ = 4,          /**< RDMA Read of the remote range into the scatter list. */
    HWSTUB_OP_LOCAL_INV = 5,     /**< Invalidate the local STag ::hwstub_send_wqe::inv_stag. */
    HWSTUB_OP_NOP = 6,           /**< Nothing (completes when reached; fences apply). */
    /**
     * Bind the type 2 window remote_stag to this QP over bind_length bytes at tagged offset remote_to of the region
     * inv_stag, with the remote rights bind_access (bind_length 0 unbinds it). In send queue order, in IDLE too.
     */
    HWSTUB_OP_BIND_MW = 7,
    /**
     * RFC 7306 Fetch and Add on the 64-bit target at remote_stag/remote_to (8-byte aligned) of operand[0]; the
     * original value goes to the one 8-byte SGE. Counted with the Reads (IRD/ORD, read fence).
     */
    HWSTUB_OP_ATOMIC_FADD = 8,
    /** RFC 7306 Compare and Swap: operand[1] replaces the target if it equals operand[0]; as ::HWSTUB_OP_ATOMIC_FADD. */
    HWSTUB_OP_ATOMIC_CSWAP = 9,
    /** RDMA Write as ::HWSTUB_OP_WRITE, then RFC 7306 Immediate Data of the low 32 bits of operand[0]. */
    HWSTUB_OP_WRITE_IMM = 10,
    /** RFC 7306 Immediate Data alone (the low 32 bits of operand[0]); ::HWSTUB_WQE_SOLICITED for its SE form. */
    HWSTUB_OP_IMMEDIATE = 11,
    /**
     * Fast registration (minor 2), in send queue order, in IDLE too: the STag allocated as inv_stag (its index)
     * becomes remote_stag over bind_length bytes at address operand[0] of the consumer's memory, tagged offsets from
     * remote_to, with the rights bind_access, mapping operand[1] pages of 4 KiB. The adapter maps it only inside a
     * valid registered region of the QP's PD (the host reduced the page list to that one range).
     */
    HWSTUB_OP_FAST_REG = 12
};

/** @brief Send WQE flags (::hwstub_send_wqe::flags). */
enum hwstub_send_flags {
    HWSTUB_WQE_SIGNALED = 1u << 0,   /**< Write a CQE when done (errors always write one). */
    HWSTUB_WQE_SOLICITED = 1u << 1,  /**< Send with Solicited Event. */
    HWSTUB_WQE_FENCE = 1u << 2,      /**< Start after every earlier request completed. */
    HWSTUB_WQE_READ_FENCE = 1u << 3, /**< Start after every earlier RDMA Read completed. */
    HWSTUB_WQE_INLINE = 1u << 4      /**< The payload follows the header (inline_len bytes), no SGEs. */
};

/**
 * @brief The header of a send WQE (64 bytes), followed in its slot by num_sge ::hwstub_sge or by inline_len bytes
 *        of payload. The OE checks every field: an unknown opcode or flag, too many SGEs, an inline length over the
 *        QP's limit or a length over the slot complete the WQE with an error and move the QP to ERROR.
 */
struct hwstub_send_wqe {
    uint64_t wr_id;       /**< The consumer's identifier, returned in the CQE. */
    uint8_t opcode;       /**< ::hwstub_send_opcode. */
    uint8_t flags;        /**< ::hwstub_send_flags. */
    uint8_t num_sge;      /**< SGEs that follow (0 with ::HWSTUB_WQE_INLINE). */
    uint8_t reserved0;    /**< Zero. */
    uint32_t inline_len;  /**< Inline payload bytes. */
    uint32_t remote_stag; /**< Write/Read: the remote STag. Bind MW: the window. */
    uint32_t inv_stag;    /**< Send with Invalidate, Local Invalidate: the STag. Bind MW: the region. Fast Reg: the allocated STag. */
    uint64_t remote_to;   /**< Write/Read: the remote tagged offset. Bind MW: the window's first tagged offset. */
    uint32_t length;      /**< Read: bytes to read (the scatter list covers it). */
    uint32_t bind_access; /**< Bind MW: the window's remote rights (RI_ACCESS_REMOTE_READ/WRITE); Fast Reg: the rights; else zero. */
    uint64_t bind_length; /**< Bind MW: the window's length (0 unbinds it); Fast Reg: the length; else zero. */
    /**
     * Atomics: [0] the addend or the compare value, [1] the swap value. Immediate Data: [0] the value. Else zero
     * (before RFC 7306: reserved, zero).
     */
    uint64_t operand[2];
};

/** @brief A receive WQE's header (16 bytes), followed in its slot by num_sge ::hwstub_sge. */
struct hwstub_recv_wqe {
    uint64_t wr_id;    /**< The consumer's identifier. */
    uint32_t num_sge;  /**< SGEs that follow. */
    uint32_t reserved; /**< Zero. */
};

/** @brief CQE opcodes (::hwstub_cqe::opcode). */
enum hwstub_cqe_opcode {
    HWSTUB_CQE_SEND = 1,      /**< A Send (or Send with Invalidate) completed. */
    HWSTUB_CQE_WRITE = 2,     /**< An RDMA Write completed. */
    HWSTUB_CQE_READ = 3,      /**< An RDMA Read completed. */
    HWSTUB_CQE_LOCAL_INV = 4, /**< A Local Invalidate completed. */
    HWSTUB_CQE_NOP = 5,       /**< A NOP completed. */
    HWSTUB_CQE_RECV = 6,      /**< A receive was filled. */
    HWSTUB_CQE_BIND_MW = 7,   /**< A window bind completed. */
    HWSTUB_CQE_ATOMIC = 8,    /**< A Fetch and Add completed; its original value is in the WQE's sink. */
    HWSTUB_CQE_RECV_IMM = 9,  /**< A receive took Immediate Data (::hwstub_cqe::imm_data, byte_len 0). */
    HWSTUB_CQE_CMP_SWAP = 10, /**< A Compare and Swap completed; its original value is in the WQE's sink. */
    HWSTUB_CQE_WRITE_IMM = 11, /**< An RDMA Write with Immediate Data completed (both of its messages went). */
    HWSTUB_CQE_IMMEDIATE = 12, /**< An Immediate Data completed. */
    HWSTUB_CQE_FAST_REG = 13   /**< A fast registration completed (minor 2). */
};

/** @brief CQE flags (::hwstub_cqe::flags). */
enum hwstub_cqe_flags {
    HWSTUB_CQE_SOLICITED = 1u << 0, /**< recv: the Send asked for a solicited event. */
    HWSTUB_CQE_WITH_INV = 1u << 1   /**< recv: the Send invalidated ::hwstub_cqe::inv_stag. */
};

/** @brief A completion queue entry (32 bytes). Valid when ::hwstub_cqe::owner is the pass's owner bit. */
struct hwstub_cqe {
    uint64_t wr_id;      /**< From the WQE. */
    uint32_t qp_num;     /**< The QP the WQE was posted to. */
    uint32_t byte_len;   /**< Bytes received or transferred. */
    uint32_t inv_stag;   /**< recv with ::HWSTUB_CQE_WITH_INV: the invalidated STag. */
    uint32_t vendor_err; /**< Error detail (the Terminate's layer/etype << 8 | code, or the OE's own code). */
    uint8_t opcode;      /**< ::hwstub_cqe_opcode. */
    uint8_t status;      /**< An ::ri_wc_status value (0: success). */
    uint8_t flags;       /**< ::hwstub_cqe_flags. */
    uint8_t owner;       /**< Owner bit, written last by the OE. */
    uint32_t imm_data;   /**< ::HWSTUB_CQE_RECV_IMM: the immediate value; else zero. */
};

/** @brief The control block of a work queue: one cache line per writer. */
struct hwstub_wq_ctrl {
    uint32_t producer;                               /**< Host: WQEs posted (free-running; the doorbell record). */
    uint32_t pad0[HWSTUB_CACHE_LINE / 4 - 1];        /**< Keeps the OE's line apart. */
    uint32_t consumer;                               /**< OE: WQEs done (free-running). */
    uint32_t error;                                  /**< OE: nonzero once the queue's QP is in ERROR. */
    uint32_t pad1[HWSTUB_CACHE_LINE / 4 - 2];        /**< Pad to two lines. */
};

/** @brief The control block of a completion queue: one cache line per writer. */
struct hwstub_cq_ctrl {
    uint32_t consumer;                        /**< Host: CQEs consumed (free-running). */
    uint32_t arm_seq;                         /**< Host: incremented to request a notification. */
    uint32_t arm_solicited;                   /**< Host: nonzero if the pending arm is for solicited CQEs only. */
    uint32_t pad0[HWSTUB_CACHE_LINE / 4 - 3]; /**< Keeps the OE's line apart. */
    uint32_t producer;                        /**< OE: CQEs written (free-running). */
    uint32_t notified_seq;                    /**< OE: the last arm_seq it raised a notification for. */
    uint32_t overflow;                        /**< OE: nonzero once a CQE was lost to a full CQ. */
    uint32_t pad1[HWSTUB_CACHE_LINE / 4 - 3]; /**< Pad to two lines. */
};

/** @brief The engine page of one RNIC instance: what a poster reads to decide whether to ring. */
struct hwstub_engine_page {
    uint32_t sleeping;                        /**< OE: 1 while it waits (or is about to), 0 awake; host: 2 once rung. */
    uint32_t dead;                            /**< OE: nonzero after a catastrophic adapter error. */
    uint32_t pad0[HWSTUB_CACHE_LINE / 4 - 2]; /**< One line. */
    uint64_t doorbells;                       /**< Host: eventfd writes made (statistics, relaxed). */
    uint64_t wakeups;                         /**< OE: times it woke from a wait (statistics). */
    uint64_t pad1[HWSTUB_CACHE_LINE / 8 - 2]; /**< One line. */
};

/** @brief Bytes of the slot of a send WQE with @p sge SGEs or @p inline_bytes of inline data (a power of two). */
static inline uint32_t hwstub_sq_slot_size(uint32_t sge, uint32_t inline_bytes) {
    uint32_t need = (uint32_t)sizeof(struct hwstub_send_wqe);
    uint32_t body = sge * (uint32_t)sizeof(struct hwstub_sge);
    need += body > inline_bytes ? body : inline_bytes;
    uint32_t size = 64;
    while (size < need) size <<= 1;
    return size;
}

/** @brief Bytes of the slot of a receive WQE with @p sge SGEs (a power of two). */
static inline uint32_t hwstub_rq_slot_size(uint32_t sge) {
    uint32_t need = (uint32_t)sizeof(struct hwstub_recv_wqe) + sge * (uint32_t)sizeof(struct hwstub_sge);
    uint32_t size = 64;
    while (size < need) size <<= 1;
    return size;
}

#ifdef __cplusplus
}  // extern "C"

static_assert(sizeof(hwstub_sge) == 16, "hwstub_sge is 16 bytes");
static_assert(sizeof(hwstub_send_wqe) == 64, "a send WQE header is 64 bytes");
static_assert(sizeof(hwstub_recv_wqe) == 16, "a receive WQE header is 16 bytes");
static_assert(sizeof(hwstub_cqe) == 32, "a CQE is 32 bytes");
static_assert(sizeof(hwstub_wq_ctrl) == 2 * HWSTUB_CACHE_LINE, "two lines");
static_assert(sizeof(hwstub_cq_ctrl) == 2 * HWSTUB_CACHE_LINE, "two lines");
static_assert(sizeof(hwstub_engine_page) == 2 * HWSTUB_CACHE_LINE, "two lines");
#endif

#endif /* HWSTUB_HW_H */
