/**
 * @file softrnic_abi.h
 * @brief The private contract between the softrnic kVP (softrnic_kvp.so, in the kAL) and the softrnic uVP
 *        (softrnic_uvp.so, in the consumer): the private data exchanged through ri_syscall and the layout of the
 *        queue rings the uVP allocates and the kVP pins.
 *
 * Every private block starts with ::softrnic_priv_hdr; the kVP refuses a request whose major version differs from
 * its own (::RI_EPROTO), so a uVP and a kVP of different releases fail at Open RNIC, never later. The generic
 * layers never look inside these blocks (OpenRDMA's opaque hdm_data). Plain C, fixed-width fields, no padding.
 */
#ifndef SOFTRNIC_ABI_H
#define SOFTRNIC_ABI_H

#include <stdint.h>

#include "rnicpi/ri_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Provider name of both halves (ri_module_t::name must be the same for a kVP and its uVP). */
#define SOFTRNIC_PROVIDER_NAME "softrnic"
/** @brief Vendor of both halves. */
#define SOFTRNIC_VENDOR "OpenRDMA"
/** @brief Version text of both halves, which are always built and installed together. */
#define SOFTRNIC_VERSION "0.1.0"

/** @brief Major version: a different major is refused. */
#define SOFTRNIC_ABI_MAJOR 1u
/** @brief Minor version: grows when fields or requests are appended (4: Resize CQ with a new ring). */
#define SOFTRNIC_ABI_MINOR 4u
/** @brief Version word of this header. */
#define SOFTRNIC_ABI_VERSION ((SOFTRNIC_ABI_MAJOR << 16) | SOFTRNIC_ABI_MINOR)

/** @brief First member of every private block: version and total size of the block. */
struct softrnic_priv_hdr {
    uint32_t version; /**< ::SOFTRNIC_ABI_VERSION of the sender. */
    uint32_t size;    /**< sizeof the whole block as the sender was built. */
};

/** @brief A ring of queue memory in the consumer's address space, pinned by the kVP. */
struct softrnic_ring {
    uint64_t addr;   /**< Start address (the uVP maps rings page-aligned). */
    uint64_t length; /**< Bytes; at least entries * slot size of the ring. */
};

/** @brief Open RNIC request (uVP -> kVP). */
struct softrnic_open_req {
    struct softrnic_priv_hdr hdr; /**< Version. */
};

/** @brief Open RNIC reply (kVP -> uVP). With it comes one descriptor: the open's counters region (a memfd). */
struct softrnic_open_resp {
    struct softrnic_priv_hdr hdr; /**< The kVP's version. */
    uint32_t max_ceh;             /**< Completion event handlers the uVP may keep. */
    uint32_t reserved;            /**< Zero. */
    uint32_t counter_slots;       /**< Slots in the counters region (0: no region, no descriptor). (1.1) */
    uint32_t counter_slot_size;   /**< Bytes per slot: sizeof(struct softrnic_qp_counters). (1.1) */
    uint64_t unsent_budget;       /**< The RNIC's `unsent_budget` option: bytes full sockets share; 0: no limit. (1.2) */
    uint32_t siw_nudge;           /**< The RNIC's `siw_nudge` option: 1 on, 0 off. (1.2) */
    /**
     * The RNIC's `pull_min` option: Sends and RDMA Writes of at least this many bytes to a peer that takes pulls on
     * a same-host channel move by a single copy (rnicpi/ri_channel.h); 0: never. (1.3; a 1.2 kVP writes 0 here.)
     */
    uint32_t pull_min;
};

/**
 * @brief Bytes of the Open RNIC reply of ABI 1.1 (up to counter_slot_size): to a request of a 1.1 uVP the kVP
 *        writes these alone (hdr.size says so); a 1.2 uVP that gets them uses the default tunables.
 */
#define SOFTRNIC_OPEN_RESP_SIZE_1_1 24u

/**
 * @brief One QP's counters in the open's counters region, a shared mapping of the descriptor the Open RNIC reply
 *        carries (like a hardware RNIC's counter page): the data path that runs the QP's stream is the only
 *        writer (plain relaxed 64-bit stores, no lock, no system call); the kVP reads it for ri_verbs_ops_t::query_qp_stats.
 *        Slot n lives at offset n * counter_slot_size; a slot is zeroed by the kVP before it is handed out.
 */
struct softrnic_qp_counters {
    uint64_t tx_bytes;            /**< Payload bytes sent. */
    uint64_t tx_fpdus;            /**< FPDUs sent. */
    uint64_t rx_bytes;            /**< Payload bytes placed. */
    uint64_t rx_fpdus;            /**< FPDUs received. */
    uint64_t crc_errors;          /**< Inbound FPDUs with a bad MPA CRC. */
    uint64_t terminates_sent;     /**< Terminates sent. */
    uint64_t terminates_received; /**< Terminates received. */
    uint64_t nudges;              /**< Zero-length Writes sent to wake a silent peer (ri_qp_stats_t::nudges). */
};

/** @brief softrnic_create_qp_resp::counter_slot of a QP without a counter slot. */
#define SOFTRNIC_NO_COUNTER_SLOT 0xffffffffu

/** @brief Create CQ request: the completion ring (::softrnic_cq_slot_size() per entry). */
struct softrnic_create_cq_req {
    struct softrnic_priv_hdr hdr; /**< Version. */
    struct softrnic_ring ring;    /**< Completion entries. */
};

/** @brief Create CQ reply. */
struct softrnic_create_cq_resp {
    struct softrnic_priv_hdr hdr; /**< Version. */
    uint32_t cq_id;               /**< The kVP's identifier of the CQ (per RNIC instance). */
    uint32_t cqe;                 /**< Entries provided. */
};

/**
 * @brief Resize CQ request (minor 4): the new completion ring (::softrnic_cq_slot_size() per entry), which the
 *        kVP pins in place of the old one; the parameter is the entries wanted. A kVP of an older minor answers
 *        ::RI_EOPNOTSUPP (and does not advertise ::RI_CAP_RESIZE_CQ).
 */
struct softrnic_resize_cq_req {
    struct softrnic_priv_hdr hdr; /**< Version. */
    struct softrnic_ring ring;    /**< The new ring. */
};

/** @brief Resize CQ reply. */
struct softrnic_resize_cq_resp {
    struct softrnic_priv_hdr hdr; /**< Version. */
    uint32_t cqe;                 /**< Entries provided. */
    uint32_t reserved;            /**< Zero. */
};

/** @brief Create QP request: the send and receive rings (the receive ring is empty with an SRQ). */
struct softrnic_create_qp_req {
    struct softrnic_priv_hdr hdr; /**< Version. */
    struct softrnic_ring sq;      /**< Send work requests, ::softrnic_sq_slot_size() each. */
    struct softrnic_ring rq;      /**< Receive work requests, ::softrnic_rq_slot_size() each. */
};

/** @brief Create QP reply. */
struct softrnic_create_qp_resp {
    struct softrnic_priv_hdr hdr; /**< Version. */
    uint32_t qp_num;              /**< QP number, unique per RNIC instance. */
    uint32_t counter_slot;        /**< The QP's slot in the counters region, or ::SOFTRNIC_NO_COUNTER_SLOT. (1.1) */
};

/** @brief Create SRQ request: the receive ring. */
struct softrnic_create_srq_req {
    struct softrnic_priv_hdr hdr; /**< Version. */
    struct softrnic_ring ring;    /**< Receive work requests, ::softrnic_rq_slot_size() each. */
};

/** @brief Create SRQ reply. */
struct softrnic_create_srq_resp {
    struct softrnic_priv_hdr hdr; /**< Version. */
    uint32_t srq_id;              /**< The kVP's identifier of the SRQ (per RNIC instance). */
    uint32_t reserved;            /**< Zero. */
};

/**
 * @brief Head of a send ring slot; followed by `sq_sge` ri_sge_t and `max_inline` payload bytes.
 *
 * The operation-specific part is the work request's union, copied as posted.
 */
struct softrnic_sq_wqe {
    uint64_t wr_id;      /**< Consumer identifier. */
    uint32_t opcode;     /**< ::ri_wr_opcode. */
    uint32_t flags;      /**< ::ri_send_flags. */
    uint32_t num_sge;    /**< Entries of the gather list that follows. */
    uint32_t inline_len; /**< Payload bytes copied after the gather list (::RI_SEND_INLINE). */
    ri_stag_t inv_stag;  /**< STag to invalidate. */
    uint32_t reserved;   /**< Zero. */
    uint8_t op[48];      /**< ri_send_wr_t::u as posted; a ::softrnic_bind_op for ::RI_WR_BIND_MW. */
};

/**
 * @brief A type 2 window bind as its send slot holds it: the STags resolved from the posted handles, so that the
 *        engine executing the slot needs no provider object (the window or region may be gone by then).
 */
struct softrnic_bind_op {
    ri_stag_t window;   /**< The window's STag (its rkey). */
    ri_stag_t region;   /**< The region bound into (0 to unbind). */
    uint64_t addr;      /**< First byte: a tagged offset of the region, and the window's own. */
    uint64_t length;    /**< Bytes; 0 unbinds. */
    uint32_t access;    /**< RI_ACCESS_REMOTE_* rights of the window. */
    uint32_t window_pd; /**< The data path's identifier of the window's protection domain. */
};

/**
 * @brief A fast registration as its send slot holds it: the page list reduced at post to the range it maps (softrnic
 *        takes a page list only when its pages follow each other in the consumer's address space), so that the slot
 *        holds no pointer the consumer may free.
 */
struct softrnic_fast_reg_op {
    ri_stag_t allocated; /**< The STag Allocate STag gave (its index names the entry). */
    ri_stag_t stag;      /**< The STag it becomes (same index; the consumer key may change). */
    uint64_t addr;       /**< First byte mapped, in the consumer's address space. */
    uint64_t length;     /**< Bytes. */
    uint64_t iova;       /**< Tagged offset of the first byte. */
    uint32_t access;     /**< RI_ACCESS_* rights. */
    uint32_t pd;         /**< The data path's identifier of the STag's protection domain. */
    uint32_t pages;      /**< Pages of the list. */
    uint32_t reserved;   /**< Zero. */
};

/** @brief Head of a receive ring slot; followed by `rq_sge` ri_sge_t. */
struct softrnic_rq_wqe {
    uint64_t wr_id;   /**< Consumer identifier. */
    uint32_t num_sge; /**< Entries of the scatter list that follows. */
    uint32_t reserved; /**< Zero. */
};

/** @brief Bytes of one completion ring slot. */
static inline uint64_t softrnic_cq_slot_size(void) { return sizeof(ri_wc_t); }
/** @brief Bytes of one send ring slot for @p sge gather elements and @p max_inline inline bytes, 8-aligned. */
static inline uint64_t softrnic_sq_slot_size(uint32_t sge, uint32_t max_inline) {
    return (sizeof(struct softrnic_sq_wqe) + (uint64_t)sge * sizeof(ri_sge_t) + max_inline + 7u) & ~(uint64_t)7u;
}
/** @brief Bytes of one receive ring slot for @p sge scatter elements. */
static inline uint64_t softrnic_rq_slot_size(uint32_t sge) {
    return sizeof(struct softrnic_rq_wqe) + (uint64_t)sge * sizeof(ri_sge_t);
}

#ifdef __cplusplus
}
#endif

#endif /* SOFTRNIC_ABI_H */
