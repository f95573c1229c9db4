/**
 * @file hwstub_abi.h
 * @brief The private data hwstub's uVP and kVP exchange inside ri_syscall requests (the seed's `hdm_data`): how
 *        the kVP tells the uVP where the "hardware" queues are.
 *
 * Every queue lives in memory the kVP makes (a memfd per object) and passes back as a descriptor; the uVP maps it
 * shared. So the consumer never names an address the engine would have to trust for its queues: the engine reads
 * WQEs and writes CQEs in its own mapping. Layouts:
 * - Open RNIC: one descriptor, the open's engine page (::hwstub_engine_page, one page), and one eventfd, the
 *   engine's doorbell.
 * - Create CQ: one descriptor: a ::hwstub_cq_ctrl at offset 0, the CQE ring at ::hwstub_create_cq_resp::ring_offset.
 * - Create QP: one descriptor: the send queue's ::hwstub_wq_ctrl at 0, the receive queue's at
 *   ::hwstub_create_qp_resp::rq_ctrl_offset, the rings at their offsets. A QP of an SRQ has a receive ring of one
 *   slot that the OE never reads (its receives come from the SRQ).
 * - Create SRQ: one descriptor: the SRQ's ::hwstub_wq_ctrl at 0, its ring at ::hwstub_create_srq_resp::ring_offset.
 *
 * Each block starts with ::hwstub_priv_hdr; a kVP refuses a uVP of another major version (RI_EPROTO).
 */
#ifndef HWSTUB_ABI_H
#define HWSTUB_ABI_H

#include <stdint.h>

#include "hwstub_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Version of the private data (the major version of the hardware formats it describes). */
#define HWSTUB_ABI_VERSION HWSTUB_HW_VERSION

/** @brief First member of every private block. */
struct hwstub_priv_hdr {
    uint32_t version; /**< ::HWSTUB_ABI_VERSION of the writer. */
    uint32_t size;    /**< sizeof the whole block. */
};

/** @brief Open RNIC request. */
struct hwstub_open_req {
    struct hwstub_priv_hdr hdr; /**< Header. */
};

/** @brief Open RNIC reply (fds: the engine page, the doorbell eventfd). */
struct hwstub_open_resp {
    struct hwstub_priv_hdr hdr; /**< Header. */
    uint32_t page_size;         /**< Bytes to map of the engine page's descriptor. */
    uint32_t max_qp;            /**< QP numbers are below this (the uVP's table of QP contexts). */
};

/** @brief Create CQ request (the attributes travel as the verb's parameter). */
struct hwstub_create_cq_req {
    struct hwstub_priv_hdr hdr; /**< Header. */
};

/** @brief Create CQ reply (fd: the CQ's memory). */
struct hwstub_create_cq_resp {
    struct hwstub_priv_hdr hdr; /**< Header. */
    uint32_t cq_id;             /**< The CQ's identifier. */
    uint32_t depth;             /**< CQEs in the ring (a power of two, at least what was asked). */
    uint32_t ring_offset;       /**< Offset of the ring in the mapping. */
    uint32_t map_size;          /**< Bytes to map. */
};

/** @brief Resize CQ request (the parameter is the entries wanted). */
struct hwstub_resize_cq_req {
    struct hwstub_priv_hdr hdr; /**< Header. */
};

/**
 * @brief Resize CQ reply (fd: the CQ's new memory, control block and ring, laid out as at create). The adapter has
 *        moved the CQEs not consumed yet to the new ring and writes there from now on; the old memory is the
 *        uVP's to unmap.
 */
struct hwstub_resize_cq_resp {
    struct hwstub_priv_hdr hdr; /**< Header. */
    uint32_t depth;             /**< CQEs in the new ring (a power of two, at least what was asked). */
    uint32_t ring_offset;       /**< Offset of the ring in the mapping. */
    uint32_t map_size;          /**< Bytes to map. */
    uint32_t reserved;          /**< Zero. */
};

/** @brief Create QP request. */
struct hwstub_create_qp_req {
    struct hwstub_priv_hdr hdr; /**< Header. */
};

/** @brief Create QP reply (fd: the QP's memory). */
struct hwstub_create_qp_resp {
    struct hwstub_priv_hdr hdr; /**< Header. */
    uint32_t qp_num;            /**< QP number. */
    uint32_t sq_depth;          /**< Send ring slots (a power of two). */
    uint32_t sq_slot;           /**< Send slot bytes. */
    uint32_t rq_depth;          /**< Receive ring slots (a power of two). */
    uint32_t rq_slot;           /**< Receive slot bytes. */
    uint32_t rq_ctrl_offset;    /**< Offset of the receive queue's control block. */
    uint32_t sq_offset;         /**< Offset of the send ring. */
    uint32_t rq_offset;         /**< Offset of the receive ring. */
    uint32_t map_size;          /**< Bytes to map. */
    uint32_t reserved;          /**< Zero. */
};

/** @brief Create SRQ request (the attributes travel as the verb's parameter; hardware minor 1). */
struct hwstub_create_srq_req {
    struct hwstub_priv_hdr hdr; /**< Header. */
};

/** @brief Create SRQ reply (fd: the SRQ's memory). */
struct hwstub_create_srq_resp {
    struct hwstub_priv_hdr hdr; /**< Header. */
    uint32_t srq_id;            /**< The SRQ's identifier (its asynchronous events name it). */
    uint32_t depth;             /**< Receive WQE slots (a power of two, at least what was asked). */
    uint32_t slot;              /**< Slot bytes. */
    uint32_t ring_offset;       /**< Offset of the ring in the mapping. */
    uint32_t map_size;          /**< Bytes to map. */
    uint32_t reserved;          /**< Zero. */
};

#ifdef __cplusplus
}  // extern "C"
#endif

#endif /* HWSTUB_ABI_H */
