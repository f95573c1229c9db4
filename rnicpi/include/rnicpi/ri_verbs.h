/**
 * @file ri_verbs.h
 * @brief RNIC-PI verbs: attribute structs, work requests, work completions, event handlers and the verbs table.
 *
 * One table (ri_verbs_ops_t) serves both modes. In privileged mode (kPI) the kAL calls a kVP's table; in
 * non-privileged mode (uPI) the uAL calls a uVP's table, and the uVP completes privileged verbs (resource creation,
 * memory registration) through the ri_syscall upcall. Attribute structs hold no pointers to objects, so the same
 * struct travels unchanged inside an ri_syscall request; objects are named by handle arguments instead.
 *
 * Every function returns ::ri_status_t (0 or a positive errno value). Operations a provider does not implement are
 * filled by the loader with stubs that return ::RI_EOPNOTSUPP, so callers never test for NULL.
 */
#ifndef RNICPI_RI_VERBS_H
#define RNICPI_RI_VERBS_H

#include "rnicpi/ri_syscall.h"
#include "rnicpi/ri_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief RNIC capability bits reported in ri_rnic_attr_t::caps. */
enum ri_rnic_cap {
    RI_CAP_SRQ = 1u << 0,            /**< Shared receive queues. */
    RI_CAP_ZERO_BASED = 1u << 1,     /**< Zero-based virtual addressing of regions. */
    RI_CAP_MW_TYPE1 = 1u << 2,       /**< Type 1 memory windows (bound by verb). */
    RI_CAP_MW_TYPE2 = 1u << 3,       /**< Type 2 memory windows (bound by work request, QP-associated). */
    RI_CAP_FAST_REG = 1u << 4,       /**< Fast registration and local invalidate work requests. */
    RI_CAP_SEND_INV = 1u << 5,       /**< Send with Invalidate (RFC 5040). */
    RI_CAP_PHYS_MR = 1u << 6,        /**< Physical page list registration (privileged mode only). */
    RI_CAP_ATOMICS = 1u << 7,        /**< RFC 7306 atomic operations. */
    RI_CAP_MPA_CRC = 1u << 8,        /**< MPA CRC32c. */
    RI_CAP_MPA_MARKERS = 1u << 9,    /**< MPA markers. */
    RI_CAP_MPA_PEER2PEER = 1u << 10, /**< RFC 6581 enhanced connection setup. */
    RI_CAP_RESIZE_CQ = 1u << 11,     /**< Resize CQ. */
    RI_CAP_SHARED_MR = 1u << 12,     /**< Register Shared Memory Region. */
    RI_CAP_SAME_HOST = 1u << 13,     /**< Takes a same-host channel at the RDMA-mode transition (ri_channel.h). */
    /** Reads a version 2 channel hello and may move large messages by single copy (ri_channel.h); ABI 1.8. */
    RI_CAP_CHANNEL_PULL = 1u << 14,
    /**
     * RFC 7306 Immediate Data: ::RI_WR_RDMA_WRITE_IMM and ::RI_WR_IMMEDIATE, and their receive completions
     * (::RI_WC_RECV_RDMA_IMM); ABI 1.9. Like ::RI_CAP_ATOMICS, usable on a QP only where the host found that the
     * peer speaks RFC 7306 too (::RI_MPA_RFC7306); elsewhere a post answers ::RI_EOPNOTSUPP.
     */
    RI_CAP_IMMEDIATE = 1u << 15
};

/** @brief RNIC attributes, the result of Query RNIC. */
typedef struct ri_rnic_attr {
    char name[RI_NAME_MAX];     /**< Instance name, e.g. "softrnic0". */
    char netdev[RI_NETDEV_MAX]; /**< Network device the instance is attached to, or empty. */
    uint32_t vendor_id;         /**< IEEE OUI of the vendor. */
    uint32_t vendor_part_id;    /**< Vendor's part number. */
    uint32_t hw_version;        /**< Hardware revision. */
    uint32_t caps;              /**< Capabilities, a set of ::ri_rnic_cap bits. */
    uint64_t fw_version;        /**< Firmware (or software) version, vendor-encoded. */
    uint64_t max_mr_size;       /**< Largest registrable region in bytes. */
    uint64_t page_size_cap;     /**< Supported page sizes, one bit per power of two. */
    uint32_t max_qp;            /**< Queue pairs per RNIC. */
    uint32_t max_qp_wr;         /**< Work requests per send or receive queue. */
    uint32_t max_sge;           /**< Scatter/gather elements per send or receive work request. */
    uint32_t max_sge_rd;        /**< Scatter/gather elements per RDMA Read work request. */
    uint32_t max_inline;        /**< Largest inline payload in bytes. */
    uint32_t max_cq;            /**< Completion queues per RNIC. */
    uint32_t max_cqe;           /**< Entries per completion queue. */
    uint32_t max_pd;            /**< Protection domains per RNIC. */
    uint32_t max_mr;            /**< Memory regions (STags) per RNIC. */
    uint32_t max_mw;            /**< Memory windows per RNIC. */
    uint32_t max_srq;           /**< Shared receive queues per RNIC. */
    uint32_t max_srq_wr;        /**< Work requests per shared receive queue. */
    uint32_t max_srq_sge;       /**< Scatter/gather elements per SRQ work request. */
    uint32_t max_ird;           /**< Inbound RDMA Read queue depth per QP. */
    uint32_t max_ord;           /**< Outbound RDMA Read queue depth per QP. */
    uint32_t max_ceh;           /**< Completion event handlers that may be set (Query RNIC, OpenRDMA §4.2). */
    uint32_t max_fast_reg_pages; /**< Pages per fast registration work request. */
    uint32_t max_private_data;  /**< Connection private data in bytes (MPA revision 2 with RFC 6581: 508). */
} ri_rnic_attr_t;

/** @brief Parameters of Open RNIC. */
typedef struct ri_rnic_open_params {
    /** kPI: the attached instance to open. uPI: NULL (the uVP names the instance by ri_rnic_open_params_t::instance_name). */
    ri_instance_t instance;
    /**
     * Host context of the opener, passed back unchanged as the first argument of every upcall made on behalf of
     * this open (kPI: the kAL's per-process context for ri_host_ops_t::vm_pin_range; uPI: the uAL's context for
     * ri_host_ops_t::syscall).
     */
    void *host_ctx;
    char instance_name[RI_NAME_MAX]; /**< Name of the RNIC instance (both modes). */
    uint32_t flags;                  /**< Zero; reserved for open options. */
    /**
     * kPI (ABI 1.3): the opener's process id as the kAL verified it (SO_PEERCRED), whose address space the
     * addresses of this open's work requests and regions name; 0 for a consumer in the kAL's own process. An
     * offloading kVP moves data into that process; a uVP leaves it zero (the kAL fills it in).
     */
    uint32_t owner_pid;
} ri_rnic_open_params_t;

/** @brief Family values of ri_net_addr_t. */
enum ri_addr_family {
    RI_AF_NONE = 0,   /**< No address. */
    RI_AF_INET = 2,   /**< IPv4 (same value as AF_INET). */
    RI_AF_INET6 = 10  /**< IPv6 (same value as AF_INET6). */
};

/** @brief A network address of an RNIC instance. */
typedef struct ri_net_addr {
    uint16_t family;   /**< One of ::ri_addr_family. */
    uint16_t reserved; /**< Zero. */
    uint32_t scope_id; /**< IPv6 scope (interface index), else zero. */
    uint8_t addr[16];  /**< Address in network byte order; IPv4 uses the first four bytes. */
} ri_net_addr_t;

/** @brief Parameters of instance attach (privileged mode): bind a new RNIC instance to an address or netdev. */
typedef struct ri_attach_params {
    char name[RI_NAME_MAX];     /**< Instance name chosen by the administrator, unique per host. */
    char netdev[RI_NETDEV_MAX]; /**< Network device to attach to, or empty when ri_attach_params_t::addr selects it. */
    ri_net_addr_t addr;         /**< Network address the instance serves (the consumer selects RNICs by it). */
    /** Provider-specific options as a JSON object text (tunables with the provider's own names), or NULL. */
    const char *options;
} ri_attach_params_t;

/** @brief Completion queue attributes (create, query). */
typedef struct ri_cq_attr {
    uint32_t cqe;     /**< Create: entries requested. Query: entries provided (may be larger). */
    uint32_t ceh_id;  /**< Completion event handler to call on notification, from Set CEH. */
    uint64_t context; /**< Consumer context reported with completion events. */
} ri_cq_attr_t;

/** @brief Request Notification types (ri_verbs_ops_t::request_cq_notify). */
enum ri_cq_notify {
    RI_CQ_NOTIFY_NEXT = 1,      /**< Call the CEH on the next completion. */
    RI_CQ_NOTIFY_SOLICITED = 2  /**< Call the CEH on the next solicited or error completion. */
};

/** @brief QP creation flags (ri_qp_init_attr_t::flags). */
enum ri_qp_flags {
    RI_QP_SIGNAL_ALL = 1u << 0,  /**< Every send work request generates a completion. */
    RI_QP_USE_SRQ = 1u << 1,     /**< Receives come from the SRQ named at create time. */
    /**
     * Inbound RDMA Writes enabled from creation: ri_qp_attr_t::access starts with ::RI_ACCESS_REMOTE_WRITE (as RDMAC
     * verbs' Create QP takes the remote access rights), which saves the Modify QP that would set it. A provider
     * older than these two flags refuses them with ::RI_EINVAL; the uAL then creates without them and modifies.
     */
    RI_QP_REMOTE_WRITE = 1u << 2,
    RI_QP_REMOTE_READ = 1u << 3 /**< Inbound RDMA Reads enabled from creation (::RI_ACCESS_REMOTE_READ). */
};

/** @brief The ::ri_qp_flags that create a QP with the remote rights of ::ri_access set @p access (others ignored). */
static inline uint32_t ri_qp_access_flags(uint32_t access) {
    return ((access & RI_ACCESS_REMOTE_WRITE) != 0 ? (uint32_t)RI_QP_REMOTE_WRITE : 0u) |
           ((access & RI_ACCESS_REMOTE_READ) != 0 ? (uint32_t)RI_QP_REMOTE_READ : 0u);
}

/** @brief The remote access (ri_qp_attr_t::access) a QP created with ::ri_qp_flags @p flags starts with. */
static inline uint32_t ri_qp_initial_access(uint32_t flags) {
    return ((flags & RI_QP_REMOTE_WRITE) != 0 ? (uint32_t)RI_ACCESS_REMOTE_WRITE : 0u) |
           ((flags & RI_QP_REMOTE_READ) != 0 ? (uint32_t)RI_ACCESS_REMOTE_READ : 0u);
}

/** @brief QP service types. */
typedef enum ri_qp_type {
    RI_QPT_RC = 1, /**< Reliable connected (the iWARP service). */
    RI_QPT_UD = 2  /**< Unreliable datagram (RFC 7306 datagram iWARP; optional). */
} ri_qp_type_t;

/** @brief Queue pair attributes fixed at creation. */
typedef struct ri_qp_init_attr {
    uint32_t type;       /**< One of ::ri_qp_type. */
    uint32_t flags;      /**< A set of ::ri_qp_flags. */
    uint32_t sq_depth;   /**< Send queue work requests. */
    uint32_t rq_depth;   /**< Receive queue work requests (0 with an SRQ). */
    uint32_t sq_sge;     /**< Scatter/gather elements per send work request. */
    uint32_t rq_sge;     /**< Scatter/gather elements per receive work request. */
    uint32_t rd_sge;     /**< Scatter/gather elements per RDMA Read work request. */
    uint32_t max_inline; /**< Inline payload bytes. */
    uint32_t ird;        /**< Inbound RDMA Read queue depth. */
    uint32_t ord;        /**< Outbound RDMA Read queue depth. */
    uint64_t context;    /**< Consumer context reported in completions and events. */
} ri_qp_init_attr_t;

/** @brief MPA options negotiated for an LLP stream (ri_llp_params_t::mpa_flags). */
enum ri_mpa_flags {
    RI_MPA_CRC = 1u << 0,       /**< CRC32c on every FPDU. */
    RI_MPA_MARKERS = 1u << 1,   /**< Markers every 512 octets. */
    RI_MPA_PEER2PEER = 1u << 2, /**< RFC 6581 enhanced connection setup was used. */
    RI_MPA_INITIATOR = 1u << 3, /**< This side sent the MPA request. */
    /**
     * Not an MPA option: the stream's bytes move over the same-host channel ri_llp_params_t::channel (ri_channel.h)
     * instead of the TCP socket, which stays the connection's control channel (its end, orderly or abortive).
     */
    RI_LLP_SAME_HOST = 1u << 4,
    /**
     * Not an MPA option (ABI 1.9): the host knows that the peer's end speaks RFC 7306 (atomics, Immediate Data) as
     * this one does, so the QP may send and must take those messages. MPA has no way to say so: the host learns it
     * outside the stream (the same-host path, or the kAL's TCP option; docs/architecture.md, "RFC 7306"), and
     * never sets it for a peer it knows nothing of, such as Linux siw, which answers those opcodes with a Terminate.
     */
    RI_MPA_RFC7306 = 1u << 5,
    /**
     * Not an MPA option (ABI 1.10): ri_llp_params_t::fpdu_max is the size the host chose for this stream, larger than
     * one TCP segment, because the peer's end runs this stack, whose receivers take FPDUs that span segments (as Linux
     * siw's do with its GSO sizing). The provider keeps it and does not follow the MSS. The host never sets it for a
     * peer it knows nothing of, whose stream keeps FPDUs of one segment (RFC 5044 section 4.2).
     */
    RI_LLP_FPDU_FIXED = 1u << 6
};

/** @brief RFC 6581 ready-to-receive message types. */
enum ri_rtr_type {
    RI_RTR_NONE = 0,       /**< No RTR message (revision 1). */
    RI_RTR_SEND = 1,       /**< Zero-length Send. */
    RI_RTR_WRITE = 2,      /**< Zero-length RDMA Write. */
    RI_RTR_READ = 3        /**< Zero-length RDMA Read. */
};

/**
 * @brief The RDMA-mode transition: an established LLP stream and its negotiated parameters, handed to the QP.
 *
 * For a software RNIC the stream is the connected TCP socket ri_llp_params_t::fd (in the receiving process); an offload RNIC
 * migrates the connection using the TCP sequence state.
 */
typedef struct ri_llp_params {
    int32_t fd;              /**< Connected TCP socket owned by the QP after the transition, or -1. */
    uint32_t mpa_revision;   /**< 1 or 2. */
    uint32_t mpa_flags;      /**< A set of ::ri_mpa_flags. */
    uint32_t rtr_type;       /**< One of ::ri_rtr_type. */
    uint32_t ird;            /**< Negotiated inbound RDMA Read depth. */
    uint32_t ord;            /**< Negotiated outbound RDMA Read depth. */
    uint32_t mss;            /**< Path MSS of the stream. */
    uint32_t fpdu_max;       /**< Largest FPDU this side sends at first (MULPDU plus framing); a provider may follow the stream's MSS later (softrnic and hwstub do), unless ::RI_LLP_FPDU_FIXED. */
    uint32_t tcp_snd_nxt;    /**< TCP send sequence state at the transition (offload RNICs). */
    uint32_t tcp_rcv_nxt;    /**< TCP receive sequence state at the transition (offload RNICs). */
    ri_net_addr_t local;     /**< Local address of the stream. */
    ri_net_addr_t remote;    /**< Remote address of the stream. */
    uint16_t local_port;     /**< Local TCP port, host byte order. */
    uint16_t remote_port;    /**< Remote TCP port, host byte order. */
    /**
     * With ::RI_LLP_SAME_HOST in mpa_flags: the end of the same-host channel's bell (ri_channel.h), owned by the QP
     * after the transition as fd is. Otherwise zero, and not a descriptor.
     */
    int32_t channel;
} ri_llp_params_t;

/** @brief Bits of the Modify QP mask: which fields of ri_qp_attr_t apply. */
enum ri_qp_attr_mask {
    RI_QP_ATTR_STATE = 1u << 0,   /**< ri_qp_attr_t::state. */
    RI_QP_ATTR_IRD = 1u << 1,     /**< ri_qp_attr_t::ird. */
    RI_QP_ATTR_ORD = 1u << 2,     /**< ri_qp_attr_t::ord. */
    RI_QP_ATTR_ACCESS = 1u << 3,  /**< ri_qp_attr_t::access. */
    RI_QP_ATTR_LLP = 1u << 4,     /**< ri_qp_attr_t::llp (with the move to RTS: the RDMA-mode transition). */
    RI_QP_ATTR_TERM = 1u << 5,    /**< ri_qp_attr_t::term_layer_etype and term_ecode (move to TERMINATE). */
    RI_QP_ATTR_SQ_DEPTH = 1u << 6, /**< ri_qp_attr_t::init sq_depth (resize send queue). */
    RI_QP_ATTR_RQ_DEPTH = 1u << 7  /**< ri_qp_attr_t::init rq_depth (resize receive queue). */
};

/** @brief Queue pair attributes (query; modify with a mask of ::ri_qp_attr_mask). */
typedef struct ri_qp_attr {
    uint32_t state;            /**< One of ::ri_qp_state. */
    uint32_t qp_num;           /**< QP number, unique per RNIC. */
    uint32_t ird;              /**< Inbound RDMA Read depth in effect. */
    uint32_t ord;              /**< Outbound RDMA Read depth in effect. */
    uint32_t access;           /**< Remote access enabled on the QP, a set of ::ri_access bits. */
    uint8_t term_layer_etype;  /**< Terminate: RFC 5040 layer (high nibble) and error type (low nibble). */
    uint8_t sq_draining;       /**< Query: nonzero while the send queue drains in CLOSING. */
    uint16_t term_ecode;       /**< Terminate: RFC 5040 error code. */
    ri_qp_init_attr_t init;    /**< Creation attributes in effect (depths may be rounded up). */
    ri_llp_params_t llp;       /**< LLP stream and negotiated parameters. */
} ri_qp_attr_t;

/**
 * @brief Per-QP data-path counters (ABI 1.2, ri_verbs_ops_t::query_qp_stats): what the RNIC moved on the QP's
 *        stream since it was created. A provider fills what it counts and leaves the rest zero.
 */
typedef struct ri_qp_stats {
    uint64_t tx_bytes;            /**< Payload bytes sent (Send, Write, Read Response data). */
    uint64_t tx_fpdus;            /**< FPDUs (MPA frames) sent. */
    uint64_t rx_bytes;            /**< Payload bytes received and placed. */
    uint64_t rx_fpdus;            /**< FPDUs received. */
    uint64_t crc_errors;          /**< Inbound FPDUs whose MPA CRC did not match. */
    uint64_t terminates_sent;     /**< Terminate messages sent. */
    uint64_t terminates_received; /**< Terminate messages received. */
    /**
     * Zero-length RDMA Writes the provider sent on its own to wake a peer that left our bytes unread in its socket
     * (softrnic's nudge, docs/siw-interop.md). ABI 1.5; before, a reserved zero.
     */
    uint64_t nudges;
} ri_qp_stats_t;

/** @brief Shared receive queue attributes. */
typedef struct ri_srq_attr {
    uint32_t max_wr;   /**< Work requests. */
    uint32_t max_sge;  /**< Scatter/gather elements per work request. */
    uint32_t limit;    /**< Armed limit: ::RI_AE_SRQ_LIMIT_REACHED when fewer remain (0 = disarmed). */
    uint32_t reserved; /**< Zero. */
    uint64_t context;  /**< Consumer context reported in events. */
} ri_srq_attr_t;

/** @brief Bits of the Modify SRQ mask. */
enum ri_srq_attr_mask {
    RI_SRQ_ATTR_MAX_WR = 1u << 0, /**< Resize to ri_srq_attr_t::max_wr. */
    RI_SRQ_ATTR_LIMIT = 1u << 1   /**< Arm ri_srq_attr_t::limit. */
};

/** @brief A scatter/gather element: a local buffer named by its region's STag. */
typedef struct ri_sge {
    uint64_t addr;   /**< Address (tagged offset for zero-based regions). */
    uint32_t length; /**< Length in bytes. */
    ri_stag_t lkey;  /**< Local STag of the region containing the buffer. */
} ri_sge_t;

/** @brief Memory registration by virtual address (Register Memory Region). */
typedef struct ri_mr_reg {
    uint64_t addr;     /**< Start address in the owner's address space. */
    uint64_t length;   /**< Length in bytes. */
    uint64_t iova;     /**< Tagged offset of the first byte (equals ri_mr_reg_t::addr unless zero-based). */
    uint32_t access;   /**< A set of ::ri_access bits. */
    uint32_t reserved; /**< Zero. */
} ri_mr_reg_t;

/** @brief Memory registration by physical page list (privileged mode only). */
typedef struct ri_phys_mr_reg {
    const uint64_t *pages;      /**< Physical (bus) addresses of the pages. */
    uint32_t num_pages;         /**< Entries in ri_phys_mr_reg_t::pages. */
    uint32_t page_shift;        /**< log2 of the page size. */
    uint64_t first_byte_offset; /**< Offset of the region's first byte in the first page. */
    uint64_t length;            /**< Length in bytes. */
    uint64_t iova;              /**< Tagged offset of the first byte. */
    uint32_t access;            /**< A set of ::ri_access bits. */
    uint32_t reserved;          /**< Zero. */
} ri_phys_mr_reg_t;

/** @brief STags of a registered region. iWARP uses one STag for both; InfiniBand distinguishes them. */
typedef struct ri_mr_keys {
    ri_stag_t lkey; /**< Local STag, for scatter/gather elements. */
    ri_stag_t rkey; /**< Remote STag, advertised to the peer. */
} ri_mr_keys_t;

/** @brief States of an STag. */
enum ri_stag_state {
    RI_STAG_INVALID = 0, /**< Allocated but not (or no longer) valid for access. */
    RI_STAG_VALID = 1,   /**< Valid: accesses within bounds and rights succeed. */
    RI_STAG_FREE = 2     /**< Not allocated. */
};

/** @brief Memory region attributes, the result of Query Memory Region. */
typedef struct ri_mr_attr {
    uint64_t addr;      /**< Start address. */
    uint64_t length;    /**< Length in bytes. */
    uint64_t iova;      /**< Tagged offset of the first byte. */
    uint32_t access;    /**< A set of ::ri_access bits. */
    uint32_t state;     /**< One of ::ri_stag_state. */
    ri_mr_keys_t keys;  /**< STags. */
    uint32_t max_pages; /**< For an allocated STag: pages a fast registration may map. */
    uint32_t reserved;  /**< Zero. */
} ri_mr_attr_t;

/** @brief Bits of the Reregister mask. */
enum ri_rereg_mask {
    RI_REREG_TRANSLATION = 1u << 0, /**< New address and length. */
    RI_REREG_PD = 1u << 1,          /**< New protection domain. */
    RI_REREG_ACCESS = 1u << 2       /**< New access rights. */
};

/** @brief Memory window types. */
enum ri_mw_type {
    RI_MW_TYPE_1 = 1, /**< Bound by verb, associated with a PD. */
    RI_MW_TYPE_2 = 2  /**< Bound by work request, associated with a QP. */
};

/** @brief Send queue work request opcodes. */
typedef enum ri_wr_opcode {
    RI_WR_SEND = 0,              /**< Send. */
    RI_WR_SEND_SE = 1,           /**< Send with Solicited Event. */
    RI_WR_SEND_INV = 2,          /**< Send with Invalidate of ri_send_wr_t::inv_stag. */
    RI_WR_SEND_SE_INV = 3,       /**< Send with Solicited Event and Invalidate. */
    RI_WR_RDMA_WRITE = 4,        /**< RDMA Write to ri_send_wr_t::rdma. */
    RI_WR_RDMA_READ = 5,         /**< RDMA Read from ri_send_wr_t::rdma into the scatter list. */
    RI_WR_RDMA_READ_INV = 6,     /**< RDMA Read, then invalidate the local sink STag (IB verbs extensions). */
    RI_WR_BIND_MW = 7,           /**< Bind a memory window (ri_send_wr_t::bind). */
    RI_WR_FAST_REG = 8,          /**< Fast-register an allocated STag (ri_send_wr_t::fast_reg). */
    RI_WR_LOCAL_INV = 9,         /**< Invalidate a local STag (ri_send_wr_t::inv_stag). */
    RI_WR_ATOMIC_FETCH_ADD = 10, /**< RFC 7306 Fetch and Add (ri_send_wr_t::atomic). */
    RI_WR_ATOMIC_CMP_SWAP = 11,  /**< RFC 7306 Compare and Swap (ri_send_wr_t::atomic). */
    /**
     * RDMA Write to ri_send_wr_t::rdma, then RFC 7306 Immediate Data carrying ri_send_wr_t::rdma::imm_data, which
     * takes one of the peer's receives (ABI 1.9, ::RI_CAP_IMMEDIATE); completes as ::RI_WC_RDMA_WRITE once both
     * went.
     */
    RI_WR_RDMA_WRITE_IMM = 12,
    /** RFC 7306 Immediate Data alone: ri_send_wr_t::rdma::imm_data into one of the peer's receives (ABI 1.9). */
    RI_WR_IMMEDIATE = 13
} ri_wr_opcode_t;

/** @brief Send work request flags. */
enum ri_send_flags {
    RI_SEND_SIGNALED = 1u << 0,   /**< Generate a completion (always with ::RI_QP_SIGNAL_ALL). */
    RI_SEND_READ_FENCE = 1u << 1, /**< Wait for prior RDMA Reads to complete before this request. */
    RI_SEND_LOCAL_FENCE = 1u << 2, /**< Wait for all prior requests to complete before this request. */
    RI_SEND_INLINE = 1u << 3,     /**< Copy the payload at post time; lkeys are ignored. */
    /** The Immediate Data of ::RI_WR_RDMA_WRITE_IMM or ::RI_WR_IMMEDIATE carries a solicited event (ABI 1.9). */
    RI_SEND_SOLICITED = 1u << 4
};

/** @brief A send queue work request. */
typedef struct ri_send_wr {
    uint64_t wr_id;        /**< Consumer identifier returned in the completion. */
    uint32_t opcode;       /**< One of ::ri_wr_opcode. */
    uint32_t flags;        /**< A set of ::ri_send_flags. */
    const ri_sge_t *sgl;   /**< Gather list (scatter list for RDMA Read). */
    uint32_t num_sge;      /**< Entries in ri_send_wr_t::sgl. */
    ri_stag_t inv_stag;    /**< STag to invalidate (Send with Invalidate, Local Invalidate). */
    /** Operation-specific part, chosen by ri_send_wr_t::opcode. */
    union {
        /** RDMA Write and RDMA Read: the remote buffer; Immediate Data: its value. */
        struct {
            uint64_t remote_addr; /**< Remote tagged offset. */
            ri_stag_t rkey;       /**< Remote STag. */
            /**
             * ::RI_WR_RDMA_WRITE_IMM and ::RI_WR_IMMEDIATE: the 32-bit immediate value, in host order (ABI 1.9;
             * zero before). On the wire it is RFC 7306's 8-byte Immediate Data field as a big-endian integer.
             */
            uint32_t imm_data;
        } rdma;
        /** Bind Memory Window. */
        struct {
            ri_mw_t mw;       /**< Window to bind. */
            ri_mr_t mr;       /**< Region the window lies in. */
            uint64_t addr;    /**< Start of the window. */
            uint64_t length;  /**< Length of the window (0 unbinds). */
            uint32_t access;  /**< Remote rights of the window. */
            uint32_t reserved; /**< Zero. */
        } bind;
        /** Fast registration of an allocated STag. */
        struct {
            ri_mr_t mr;             /**< Region from Allocate STag. */
            const uint64_t *pages;  /**< Page addresses. */
            uint32_t num_pages;     /**< Entries in the page list. */
            uint32_t page_shift;    /**< log2 of the page size. */
            uint64_t iova;          /**< Tagged offset of the first byte. */
            uint64_t length;        /**< Length in bytes. */
            uint32_t access;        /**< Access rights. */
            ri_stag_t stag;         /**< New STag (consumer key may change). */
        } fast_reg;
        /** RFC 7306 atomics. */
        struct {
            uint64_t remote_addr; /**< Remote tagged offset (8-byte aligned). */
            ri_stag_t rkey;       /**< Remote STag. */
            uint32_t reserved;    /**< Zero. */
            uint64_t compare_add; /**< Compare value (swap) or addend (fetch-add). */
            uint64_t swap;        /**< Swap value. */
        } atomic;
    } u;
} ri_send_wr_t;

/** @brief A receive queue (or SRQ) work request. */
typedef struct ri_recv_wr {
    uint64_t wr_id;      /**< Consumer identifier returned in the completion. */
    const ri_sge_t *sgl; /**< Scatter list. */
    uint32_t num_sge;    /**< Entries in ri_recv_wr_t::sgl. */
    uint32_t reserved;   /**< Zero. */
} ri_recv_wr_t;

/** @brief Work completion status codes. */
typedef enum ri_wc_status {
    RI_WC_SUCCESS = 0,          /**< Completed successfully. */
    RI_WC_LOC_LEN_ERR = 1,      /**< Inbound message longer than the receive buffer. */
    RI_WC_LOC_QP_OP_ERR = 2,    /**< Local QP operation error (invalid request). */
    RI_WC_LOC_PROT_ERR = 3,     /**< Local protection error (bad lkey, bounds, rights, PD). */
    RI_WC_WR_FLUSH_ERR = 4,     /**< Flushed: the QP was in error. */
    RI_WC_MW_BIND_ERR = 5,      /**< Memory window bind failed. */
    RI_WC_LOC_ACCESS_ERR = 6,   /**< Local access error on an inbound operation. */
    RI_WC_REM_ACCESS_ERR = 7,   /**< The peer reported an access violation (Terminate). */
    RI_WC_REM_OP_ERR = 8,       /**< The peer reported an operation error (Terminate). */
    RI_WC_REM_INV_REQ_ERR = 9,  /**< The peer reported an invalid request (Terminate). */
    RI_WC_BAD_RESP_ERR = 10,    /**< Unexpected response from the peer. */
    RI_WC_LLP_ERR = 11,         /**< The LLP stream failed. */
    RI_WC_FATAL_ERR = 12,       /**< RNIC fatal error. */
    RI_WC_GENERAL_ERR = 13      /**< Any other error; see ri_wc_t::vendor_err. */
} ri_wc_status_t;

/** @brief Work completion types. */
typedef enum ri_wc_opcode {
    RI_WC_SEND = 0,       /**< A Send variant completed. */
    RI_WC_RDMA_WRITE = 1, /**< An RDMA Write completed. */
    RI_WC_RDMA_READ = 2,  /**< An RDMA Read completed. */
    RI_WC_BIND_MW = 3,    /**< A window bind completed. */
    RI_WC_FAST_REG = 4,   /**< A fast registration completed. */
    RI_WC_LOCAL_INV = 5,  /**< A local invalidate completed. */
    RI_WC_ATOMIC = 6,     /**< An RFC 7306 Fetch and Add completed (its original value is in the sink). */
    RI_WC_ATOMIC_CMP_SWAP = 7, /**< An RFC 7306 Compare and Swap completed (ABI 1.9; before, ::RI_WC_ATOMIC). */
    RI_WC_RECV = 128,     /**< A receive completed (bit 7 marks receive-side completions). */
    /**
     * A receive took RFC 7306 Immediate Data (ABI 1.9): ri_wc_t::imm_data with ::RI_WC_WITH_IMM, byte_len 0. iWARP
     * cannot tell whether a Write came before it, so every Immediate Data completes so.
     */
    RI_WC_RECV_RDMA_IMM = 129
} ri_wc_opcode_t;

/** @brief Work completion flags. */
enum ri_wc_flags {
    RI_WC_WITH_INV = 1u << 0,   /**< The inbound Send invalidated ri_wc_t::invalidated_stag. */
    RI_WC_SOLICITED = 1u << 1,  /**< The inbound Send carried a solicited event. */
    /**
     * A receive: ri_wc_t::imm_data holds the peer's immediate value. A send-side completion: the request was
     * ::RI_WR_RDMA_WRITE_IMM or ::RI_WR_IMMEDIATE (ABI 1.9).
     */
    RI_WC_WITH_IMM = 1u << 2
};

/** @brief A work completion, as returned by Poll CQ. */
typedef struct ri_wc {
    uint64_t wr_id;             /**< From the work request. */
    uint64_t qp_context;        /**< ri_qp_init_attr_t::context of the QP. */
    uint32_t status;            /**< One of ::ri_wc_status. */
    uint32_t opcode;            /**< One of ::ri_wc_opcode. */
    uint32_t byte_len;          /**< Bytes received (receive completions) or transferred. */
    uint32_t flags;             /**< A set of ::ri_wc_flags. */
    uint32_t qp_num;            /**< QP the request was posted to. */
    ri_stag_t invalidated_stag; /**< STag invalidated by a Send with Invalidate. */
    uint32_t vendor_err;        /**< Provider detail for errors (e.g. the Terminate code). */
    /**
     * With ::RI_WC_WITH_IMM: the immediate value, host order (the low 32 bits of RFC 7306's 8-byte field; ABI 1.9).
     * Zero otherwise.
     */
    uint32_t imm_data;
} ri_wc_t;

/**
 * @brief An asynchronous event record (OpenRDMA §4.2.1): resource type, resource identifier and event identifier.
 */
typedef struct ri_async_event {
    uint32_t resource_type; /**< One of ::ri_resource_type. */
    uint32_t event_id;      /**< One of ::ri_event_id. */
    uint64_t resource_id;   /**< QP number, CQ/SRQ identifier or STag; 0 for the RNIC. */
    uint64_t context;       /**< Consumer context of the resource (from its create attributes). */
    uint32_t detail;        /**< Event detail, e.g. the Terminate layer/etype/ecode word. */
    uint32_t reserved;      /**< Zero. */
} ri_async_event_t;

/**
 * @brief Asynchronous Event Handler (AEH): one per RNIC, called with each event record.
 * @param ctx    Context given to Set AEH.
 * @param rnic   RNIC the event belongs to.
 * @param event  The event record; valid only during the call.
 */
typedef void (*ri_aeh_fn)(void *ctx, ri_rnic_t rnic, const ri_async_event_t *event);

/**
 * @brief Completion Event Handler (CEH): called with the RNIC handle and the CQ handle when a notification fires.
 * @param ctx   Context given to Set CEH.
 * @param rnic  RNIC of the CQ.
 * @param cq    CQ with a new completion; the consumer polls it.
 */
typedef void (*ri_ceh_fn)(void *ctx, ri_rnic_t rnic, ri_cq_t cq);

/**
 * @brief The verbs table of a provider, for either mode.
 *
 * Starts with its size and ABI version so it can grow by appending operations. Entries a provider leaves NULL
 * are replaced by the loader with stubs returning ::RI_EOPNOTSUPP; the mandatory ones (see ri_module.h) must be
 * present or the module is refused.
 */
typedef struct ri_verbs_ops {
    uint32_t size;        /**< sizeof(ri_verbs_ops_t) as the provider was built. */
    uint32_t abi_version; /**< ::RI_ABI_VERSION the provider was built with. */

    /* RNIC */
    /** Open RNIC: create a per-opener context of an RNIC instance. */
    ri_status_t (*open_rnic)(const ri_rnic_open_params_t *params, ri_rnic_t *rnic);
    /** Close RNIC: destroys the open context; every resource must already be destroyed. */
    ri_status_t (*close_rnic)(ri_rnic_t rnic);
    /** Query RNIC: capabilities and limits. */
    ri_status_t (*query_rnic)(ri_rnic_t rnic, ri_rnic_attr_t *attr);
    /** Set Asynchronous Event Handler: returns the AEH identifier (one AEH per RNIC). */
    ri_status_t (*set_aeh)(ri_rnic_t rnic, ri_aeh_fn fn, void *ctx, uint32_t *aeh_id);
    /** Set Completion Event Handler: returns a CEH identifier for ri_cq_attr_t::ceh_id. */
    ri_status_t (*set_ceh)(ri_rnic_t rnic, ri_ceh_fn fn, void *ctx, uint32_t *ceh_id);
    /** Clear an event handler set by Set AEH or Set CEH. */
    ri_status_t (*clear_handler)(ri_rnic_t rnic, uint32_t handler_id);

    /* Protection domain */
    /** Allocate Protection Domain. */
    ri_status_t (*alloc_pd)(ri_rnic_t rnic, ri_pd_t *pd);
    /** Deallocate Protection Domain. */
    ri_status_t (*dealloc_pd)(ri_pd_t pd);

    /* Completion queue */
    /** Create CQ; @p attr is updated with the provided depth. */
    ri_status_t (*create_cq)(ri_rnic_t rnic, ri_cq_attr_t *attr, ri_cq_t *cq);
    /** Query CQ. */
    ri_status_t (*query_cq)(ri_cq_t cq, ri_cq_attr_t *attr);
    /** Resize CQ to at least @p cqe entries; @p actual receives the provided depth. */
    ri_status_t (*resize_cq)(ri_cq_t cq, uint32_t cqe, uint32_t *actual);
    /** Destroy CQ; no QP may still use it. */
    ri_status_t (*destroy_cq)(ri_cq_t cq);
    /** Poll CQ (fast path): up to @p max completions into @p wc, count in @p polled (0 is success). */
    ri_status_t (*poll_cq)(ri_cq_t cq, uint32_t max, ri_wc_t *wc, uint32_t *polled);
    /** Request Completion Notification: one of ::ri_cq_notify. */
    ri_status_t (*request_cq_notify)(ri_cq_t cq, uint32_t type);

    /* Queue pair */
    /** Create QP in @p pd; @p srq is NULL unless ::RI_QP_USE_SRQ; @p attr is updated with provided depths. */
    ri_status_t (*create_qp)(ri_pd_t pd, ri_cq_t send_cq, ri_cq_t recv_cq, ri_srq_t srq, ri_qp_init_attr_t *attr,
                             ri_qp_t *qp);
    /** Query QP. */
    ri_status_t (*query_qp)(ri_qp_t qp, ri_qp_attr_t *attr);
    /** Modify QP: apply the fields of @p attr selected by @p mask (::ri_qp_attr_mask). */
    ri_status_t (*modify_qp)(ri_qp_t qp, const ri_qp_attr_t *attr, uint32_t mask);
    /** Destroy QP. */
    ri_status_t (*destroy_qp)(ri_qp_t qp);
    /** Post Send (fast path): @p count requests; @p posted receives how many were queued. */
    ri_status_t (*post_send)(ri_qp_t qp, const ri_send_wr_t *wr, uint32_t count, uint32_t *posted);
    /** Post Receive (fast path): @p count requests; @p posted receives how many were queued. */
    ri_status_t (*post_recv)(ri_qp_t qp, const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);

    /* Shared receive queue */
    /** Create SRQ; @p attr is updated with the provided depth. */
    ri_status_t (*create_srq)(ri_pd_t pd, ri_srq_attr_t *attr, ri_srq_t *srq);
    /** Query SRQ. */
    ri_status_t (*query_srq)(ri_srq_t srq, ri_srq_attr_t *attr);
    /** Modify SRQ with a mask of ::ri_srq_attr_mask. */
    ri_status_t (*modify_srq)(ri_srq_t srq, const ri_srq_attr_t *attr, uint32_t mask);
    /** Destroy SRQ; no QP may still use it. */
    ri_status_t (*destroy_srq)(ri_srq_t srq);
    /** Post Receive to an SRQ (fast path). */
    ri_status_t (*post_srq_recv)(ri_srq_t srq, const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);

    /* Memory */
    /** Register Memory Region by virtual address (pins through the host upcall). */
    ri_status_t (*register_mr)(ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
    /** Register Memory Region by physical page list (privileged mode only). */
    ri_status_t (*register_phys_mr)(ri_pd_t pd, const ri_phys_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
    /** Register Shared Memory Region: a new STag over the pages of @p existing. */
    ri_status_t (*register_shared_mr)(ri_mr_t existing, ri_pd_t pd, uint64_t iova, uint32_t access, ri_mr_t *mr,
                                      ri_mr_keys_t *keys);
    /** Allocate STag (non-shared, for fast registration) able to map @p max_pages pages. */
    ri_status_t (*alloc_stag)(ri_pd_t pd, uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
    /** Reregister Memory Region: change what @p mask (::ri_rereg_mask) selects; @p pd used with ::RI_REREG_PD. */
    ri_status_t (*reregister_mr)(ri_mr_t mr, uint32_t mask, ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_keys_t *keys);
    /** Query Memory Region. */
    ri_status_t (*query_mr)(ri_mr_t mr, ri_mr_attr_t *attr);
    /** Deregister Memory Region (or deallocate STag); fails with ::RI_EBUSY while windows are bound. */
    ri_status_t (*deregister_mr)(ri_mr_t mr);

    /* Memory windows */
    /** Allocate Memory Window of type ::ri_mw_type. */
    ri_status_t (*alloc_mw)(ri_pd_t pd, uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    /** Bind a type 1 window by verb (type 2 windows bind with ::RI_WR_BIND_MW on a QP). */
    ri_status_t (*bind_mw)(ri_qp_t qp, ri_mw_t mw, ri_mr_t mr, uint64_t addr, uint64_t length, uint32_t access,
                           ri_stag_t *rkey);
    /** Deallocate Memory Window. */
    ri_status_t (*dealloc_mw)(ri_mw_t mw);

    /* Since ABI 1.1 */
    /**
     * kPI only: execute a uVP's privileged request with its private data and descriptors (see ri_kvp_syscall_t).
     * Returns ::RI_ENOSYS for an op the kVP leaves to the plain verb (the loader's stub does the same).
     */
    ri_status_t (*syscall)(ri_kvp_syscall_t *request);

    /* Since ABI 1.2 */
    /**
     * kPI: read the QP's data-path counters (also of a QP whose data path runs in a consumer's process: a provider
     * keeps them where the privileged side can read them, like a hardware RNIC's counter registers).
     */
    ri_status_t (*query_qp_stats)(ri_qp_t qp, ri_qp_stats_t *stats);
} ri_verbs_ops_t;

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_VERBS_H */
