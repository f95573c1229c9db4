/**
 * @file ri_syscall.h
 * @brief The RNIC-PI syscall extension: how a uVP obtains privileged support for a verb.
 *
 * In non-privileged mode (uPI) a uVP implements privileged verbs (creating resources, registering memory) by
 * building an ri_syscall_t and calling the ri_host_ops_t::syscall upcall that the uAL gives it. The uAL forwards
 * the request unchanged to the kAL (the device /dev/krdma), which reconstructs the verb as a privileged call on the
 * kVP of the same RNIC: the kVP receives the same parameters and the uVP's opaque private data (the seed's
 * `hdm_data`), and its reply (private data, descriptors, the created object's handle) travels back the same way.
 *
 * Object references inside a request are the kAL's generic handles (::ri_syscall_t::object and ri_syscall_t::refs), never
 * pointers: the kAL checks that each one belongs to the calling process before it calls the kVP.
 *
 * | op                   | object   | refs                              | param                | result          |
 * |----------------------|----------|-----------------------------------|----------------------|-----------------|
 * | ::RI_OPEN_RNIC        | 0        | -                                 | ri_rnic_open_params_t (host_ctx ignored) | -     |
 * | ::RI_CLOSE_RNIC       | RNIC     | -                                 | -                    | -               |
 * | ::RI_QUERY_RNIC       | RNIC     | -                                 | -                    | ri_rnic_attr_t  |
 * | ::RI_ALLOC_PD         | RNIC     | -                                 | -                    | -               |
 * | ::RI_DEALLOC_PD       | PD       | -                                 | -                    | -               |
 * | ::RI_CREATE_CQ        | RNIC     | -                                 | ri_cq_attr_t         | ri_cq_attr_t    |
 * | ::RI_RESIZE_CQ        | CQ       | -                                 | uint32_t cqe         | uint32_t actual |
 * | ::RI_DESTROY_CQ       | CQ       | -                                 | -                    | -               |
 * | ::RI_CREATE_QP        | PD       | send CQ, receive CQ, SRQ or 0     | ri_qp_init_attr_t    | ri_qp_init_attr_t |
 * | ::RI_QUERY_QP         | QP       | -                                 | -                    | ri_qp_attr_t    |
 * | ::RI_MODIFY_QP        | QP       | -                                 | ri_syscall_modify_t + ri_qp_attr_t | -  |
 * | ::RI_DESTROY_QP       | QP       | -                                 | -                    | -               |
 * | ::RI_CREATE_SRQ       | PD       | -                                 | ri_srq_attr_t        | ri_srq_attr_t   |
 * | ::RI_MODIFY_SRQ       | SRQ      | -                                 | ri_syscall_modify_t + ri_srq_attr_t | - |
 * | ::RI_DESTROY_SRQ      | SRQ      | -                                 | -                    | -               |
 * | ::RI_REGISTER_MR      | PD       | -                                 | ri_mr_reg_t          | ri_mr_keys_t    |
 * | ::RI_REGISTER_SHARED_MR | MR     | PD                                | ri_mr_reg_t (iova, access) | ri_mr_keys_t |
 * | ::RI_ALLOC_STAG       | PD       | -                                 | uint32_t max_pages   | ri_mr_keys_t    |
 * | ::RI_REREGISTER_MR    | MR       | new PD or 0                       | ri_syscall_modify_t + ri_mr_reg_t | ri_mr_keys_t |
 * | ::RI_QUERY_MR         | MR       | -                                 | -                    | ri_mr_attr_t    |
 * | ::RI_DEREGISTER_MR    | MR       | -                                 | -                    | -               |
 * | ::RI_ALLOC_MW         | PD       | -                                 | uint32_t type        | ri_stag_t       |
 * | ::RI_DEALLOC_MW       | MW       | -                                 | -                    | -               |
 * | ::RI_SET_CEH          | RNIC     | -                                 | -                    | uint32_t ceh_id |
 * | ::RI_SET_AEH          | RNIC     | -                                 | -                    | uint32_t aeh_id |
 * | ::RI_QUERY_SRQ (1.1)  | SRQ      | -                                 | -                    | ri_srq_attr_t   |
 * | ::RI_QUERY_CQ (1.1)   | CQ       | -                                 | -                    | ri_cq_attr_t    |
 *
 * A create verb returns the kAL's handle for the new object in ::ri_syscall_t::handle_out (for a QP: the generic
 * endpoint handle of OpenRDMA Figure 4). ::RI_MODIFY_QP with ::RI_QP_ATTR_LLP is never a syscall: the RDMA-mode
 * transition is the kAL's. When MPA negotiation completes the kAL calls the kVP's modify_qp (RTS, ::RI_QP_ATTR_LLP,
 * ri_llp_params_t::fd = -1: the stream lives in the consumer's process) and sends the socket to the owner; the uAL
 * then calls the uVP's modify_qp with the same mask and the socket in ri_llp_params_t::fd, which in non-privileged
 * mode is local: the uVP takes the socket over and starts its data path without a kAL round trip.
 * Verbs on the fast path (post, poll, notify) never use this extension.
 *
 * On the kAL's side (ABI 1.1) a kVP that provides ri_verbs_ops_t::syscall receives each request whole, as an
 * ri_kvp_syscall_t in which the kAL has replaced its handles by the kVP's own objects: so the uVP's private data
 * and descriptors reach the kVP, and the kVP's private reply and descriptors reach the uVP (OpenRDMA Figure 4).
 * A kVP without it (ABI 1.0), or one that answers ::RI_ENOSYS for an op, gets the plain privileged verb instead.
 * Destroy verbs always arrive as plain verbs, because the kAL also destroys objects on its own (a process died).
 */
#ifndef RNICPI_RI_SYSCALL_H
#define RNICPI_RI_SYSCALL_H

#include "rnicpi/ri_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Operation codes of ri_syscall: one per privileged verb (values are part of the ABI). */
typedef enum ri_syscall_op {
    RI_OPEN_RNIC = 1,          /**< Open RNIC. */
    RI_CLOSE_RNIC = 2,         /**< Close RNIC. */
    RI_QUERY_RNIC = 3,         /**< Query RNIC. */
    RI_ALLOC_PD = 4,           /**< Allocate Protection Domain. */
    RI_DEALLOC_PD = 5,         /**< Deallocate Protection Domain. */
    RI_CREATE_CQ = 6,          /**< Create CQ. */
    RI_RESIZE_CQ = 7,          /**< Resize CQ. */
    RI_DESTROY_CQ = 8,         /**< Destroy CQ. */
    RI_CREATE_QP = 9,          /**< Create QP. */
    RI_QUERY_QP = 10,          /**< Query QP. */
    RI_MODIFY_QP = 11,         /**< Modify QP. */
    RI_DESTROY_QP = 12,        /**< Destroy QP. */
    RI_CREATE_SRQ = 13,        /**< Create SRQ. */
    RI_MODIFY_SRQ = 14,        /**< Modify SRQ. */
    RI_DESTROY_SRQ = 15,       /**< Destroy SRQ. */
    RI_REGISTER_MR = 16,       /**< Register Memory Region (virtual address). */
    RI_REGISTER_SHARED_MR = 17, /**< Register Shared Memory Region. */
    RI_ALLOC_STAG = 18,        /**< Allocate STag. */
    RI_REREGISTER_MR = 19,     /**< Reregister Memory Region. */
    RI_QUERY_MR = 20,          /**< Query Memory Region. */
    RI_DEREGISTER_MR = 21,     /**< Deregister Memory Region. */
    RI_ALLOC_MW = 22,          /**< Allocate Memory Window. */
    RI_DEALLOC_MW = 23,        /**< Deallocate Memory Window. */
    RI_SET_CEH = 24,           /**< Learn a completion event handler identifier. */
    RI_SET_AEH = 25,           /**< Learn the asynchronous event handler identifier. */
    RI_QUERY_SRQ = 26,         /**< Query SRQ (ABI 1.1). */
    RI_QUERY_CQ = 27           /**< Query CQ (ABI 1.1). */
} ri_syscall_op_t;

/** @brief Number of object references a request may carry besides its main object. */
#define RI_SYSCALL_MAX_REFS 4u
/** @brief Largest provider private data, each direction, in bytes. */
#define RI_SYSCALL_MAX_PRIV 1024u
/** @brief Largest verb parameter or result block in bytes. */
#define RI_SYSCALL_MAX_PARAM 512u
/** @brief Most descriptors passed in each direction. */
#define RI_SYSCALL_MAX_FDS 4u

/** @brief Prefix of the parameter block of modify-type operations: which fields apply. */
typedef struct ri_syscall_modify {
    uint32_t mask;     /**< The verb's mask (::ri_qp_attr_mask, ::ri_srq_attr_mask or ::ri_rereg_mask). */
    uint32_t reserved; /**< Zero. */
} ri_syscall_modify_t;

/**
 * @brief One privileged request of a uVP and, after the call, its reply.
 *
 * Buffers belong to the caller; the host reads the "in" parts and writes the "out" parts up to their capacity.
 */
typedef struct ri_syscall {
    uint32_t size;                      /**< sizeof(ri_syscall_t) as the caller was built. */
    uint32_t op;                        /**< One of ::ri_syscall_op. */
    uint64_t object;                    /**< kAL handle of the object the verb acts on (see the table). */
    uint64_t refs[RI_SYSCALL_MAX_REFS]; /**< kAL handles of further objects the verb names, 0 when absent. */
    const void *param;                  /**< The verb's parameter block (pointer-free attribute struct). */
    uint32_t param_len;                 /**< Bytes in ri_syscall_t::param, at most ::RI_SYSCALL_MAX_PARAM. */
    uint32_t priv_in_len;               /**< Bytes in ri_syscall_t::priv_in, at most ::RI_SYSCALL_MAX_PRIV. */
    const void *priv_in;                /**< uVP private data for the kVP, passed through untouched. */
    void *priv_out;                     /**< Buffer for the kVP's private reply. */
    uint32_t priv_out_cap;              /**< Capacity of ri_syscall_t::priv_out. */
    uint32_t priv_out_len;              /**< Out: bytes the kVP returned in ri_syscall_t::priv_out. */
    void *result;                       /**< Buffer for the verb's result block (see the table). */
    uint32_t result_cap;                /**< Capacity of ri_syscall_t::result. */
    uint32_t result_len;                /**< Out: bytes written to ri_syscall_t::result. */
    const int32_t *fds_in;              /**< Descriptors the request passes to the kVP. */
    uint32_t nfds_in;                   /**< Entries in ri_syscall_t::fds_in, at most ::RI_SYSCALL_MAX_FDS. */
    uint32_t nfds_out_cap;              /**< Capacity of ri_syscall_t::fds_out. */
    int32_t *fds_out;                   /**< Out: descriptors the kVP returns; the caller owns them. */
    uint32_t nfds_out;                  /**< Out: entries written to ri_syscall_t::fds_out. */
    uint32_t reserved;                  /**< Zero. */
    uint64_t handle_out;                /**< Out: kAL handle of the object a create verb made. */
} ri_syscall_t;

/**
 * @brief A uVP's request as the kAL hands it to a kVP's ri_verbs_ops_t::syscall (privileged mode, ABI 1.1).
 *
 * The kAL has checked every handle of the request against the caller's own objects and replaced them by the kVP's
 * handles; the kVP must not use ri_syscall_t::object, ri_syscall_t::refs or ri_syscall_t::handle_out of
 * ri_kvp_syscall_t::call. The parameter block is the kAL's copy: for ::RI_OPEN_RNIC the kAL has filled
 * ri_rnic_open_params_t::instance and ri_rnic_open_params_t::host_ctx in it. Descriptors in
 * ri_syscall_t::fds_in stay the kAL's (the kVP duplicates what it keeps). The kVP writes the verb's result block,
 * its private reply and the descriptors it passes back (which become the kAL's, to send to the uVP) into the call's
 * out fields, within their capacities; for a create verb it sets ri_kvp_syscall_t::created.
 */
typedef struct ri_kvp_syscall {
    uint32_t size;                   /**< sizeof(ri_kvp_syscall_t) as the kAL was built. */
    uint32_t reserved;               /**< Zero. */
    ri_syscall_t *call;              /**< The request and its reply buffers. */
    void *object;                    /**< kVP handle of the main object (ri_instance_t for ::RI_OPEN_RNIC). */
    void *refs[RI_SYSCALL_MAX_REFS]; /**< kVP handles of the further objects, NULL when absent. */
    void *created;                   /**< Out: kVP handle of the object a create verb made (ri_rnic_t, ri_pd_t...). */
} ri_kvp_syscall_t;

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_SYSCALL_H */
