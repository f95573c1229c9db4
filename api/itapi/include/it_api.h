/**
 * @file it_api.h
 * @brief OpenRDMA's own IT-API header, source-compatible with the Open Group Interconnect Transport API (IT-API)
 *        version 2.1.
 *
 * A program written for IT-API v2.1 (or for v1.0/v2.0 through the binding macros below) compiles against this header
 * unchanged: every type, enumerator value, structure member, macro and function of the standard header is declared
 * here with the same name and meaning. The header is plain C99 and can be included from C++.
 *
 * Version bindings. The Open Group header keeps IT-API v1.0 signatures by default. A consumer selects the newer
 * forms by defining one macro before the first include:
 *  - nothing: ITAPI_ENABLE_V10_BINDINGS is defined here; it_lmr_create, it_rmr_create and it_rmr_bind mean the v1.0
 *    calls it_lmr_create10, it_rmr_create10 and it_rmr_bind10, and it_rmr_param_t has the member @c bound.
 *  - ITAPI_ENABLE_V20_BINDINGS: it_lmr_create means it_lmr_create20, it_rmr_create it_rmr_create20 and it_rmr_bind
 *    it_rmr_link; it_rmr_param_t has the member @c linked.
 *  - ITAPI_ENABLE_V21_BINDINGS: as v2.0, except that it_lmr_create means it_lmr_create21 (I/O buffer lists).
 * The explicitly versioned entry points are declared in every mode.
 *
 * Byte order. Port numbers and InfiniBand service IDs in it_conn_qual_t are in network byte order unless the
 * consumer defines ITAPI_IANA_PORT_HOST_BYTE_ORDER / ITAPI_SERVICE_ID_HOST_BYTE_ORDER (the layout is the same either
 * way; the macros only change how an implementation interprets the value). Define IT_32BIT on a platform whose
 * it_length_t is 32 bits wide.
 */
#ifndef OPENRDMA_IT_API_H
#define OPENRDMA_IT_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <netinet/in.h>

#include "it_api_os_specific.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===============================================================================================================
 * Version bindings and legacy name mappings
 * ============================================================================================================= */

/** @brief Selects the v1.0 forms; defined unless ITAPI_ENABLE_V20_BINDINGS or ITAPI_ENABLE_V21_BINDINGS is. */
#define ITAPI_ENABLE_V10_BINDINGS
#if defined(ITAPI_ENABLE_V20_BINDINGS) || defined(ITAPI_ENABLE_V21_BINDINGS)
#undef ITAPI_ENABLE_V10_BINDINGS
#endif

/** @brief Marks an input parameter (expands to nothing). */
#ifndef IN
#define IN
#endif
/** @brief Marks an output parameter (expands to nothing). */
#ifndef OUT
#define OUT
#endif

/** @brief v1.0 name of it_rc_only_attributes_t::rdma_read_ird. */
#define rdma_read_inflight_incoming rdma_read_ird
/** @brief v1.0 name of it_rc_only_attributes_t::rdma_read_ord. */
#define rdma_read_inflight_outgoing rdma_read_ord
/** @brief v1.0 name of it_ia_info_t::ird_ord_ia_support. */
#define ird_support ird_ord_ia_support
/** @brief v1.0 name of it_ia_info_t::ird_ord_ia_support. */
#define ord_support ird_ord_ia_support

/** @brief v1.0 name of it_make_rdma_addr_absolute. */
#define it_make_rdma_addr it_make_rdma_addr_absolute
/** @brief v1.0 name of it_lmr_flush_to_mem. */
#define it_lmr_sync_rdma_read it_lmr_flush_to_mem
/** @brief v1.0 name of it_lmr_refresh_from_mem. */
#define it_lmr_sync_rdma_write it_lmr_refresh_from_mem
/** @brief v1.0 name of it_rmr_unlink. */
#define it_rmr_unbind it_rmr_unlink

/* Functions whose signature changed between versions: the unversioned name maps to the selected version. */
#if defined(ITAPI_ENABLE_V10_BINDINGS)
/** @brief Register memory as an LMR: it_lmr_create10 under v1.0 bindings. */
#define it_lmr_create it_lmr_create10
/** @brief Create an RMR: it_rmr_create10 under v1.0 bindings. */
#define it_rmr_create it_rmr_create10
/** @brief Bind an RMR: it_rmr_bind10 under v1.0 bindings. */
#define it_rmr_bind it_rmr_bind10
#elif defined(ITAPI_ENABLE_V20_BINDINGS)
/** @brief Register memory as an LMR: it_lmr_create20 under v2.0 bindings. */
#define it_lmr_create it_lmr_create20
/** @brief Create an RMR: it_rmr_create20 under v2.0 bindings. */
#define it_rmr_create it_rmr_create20
/** @brief Link an RMR: it_rmr_link under v2.0 bindings. */
#define it_rmr_bind it_rmr_link
#elif defined(ITAPI_ENABLE_V21_BINDINGS)
/** @brief Register memory or an I/O buffer list as an LMR: it_lmr_create21 under v2.1 bindings. */
#define it_lmr_create it_lmr_create21
/** @brief Create an RMR: it_rmr_create20 under v2.1 bindings. */
#define it_rmr_create it_rmr_create20
/** @brief Link an RMR: it_rmr_link under v2.1 bindings. */
#define it_rmr_bind it_rmr_link
#endif

/**
 * @brief The enum-base of every enumeration below: nothing in C, @c : @c int in C++.
 *
 * In C an enumeration holds any int, and a C caller may pass a value no enumerator names (a bad flag, say), which the
 * library must reject with the specified status. Without a fixed underlying type, C++ only defines the values that
 * fit the enumerators' bits, so a C++ caller or the library reading such a value would be undefined behaviour. A
 * fixed @c int base makes every int a valid value in C++ too; the size and the enumerator values stay those of C.
 */
#ifdef __cplusplus
#define IT_ENUM_BASE : int
#else
#define IT_ENUM_BASE
#endif

/* ===============================================================================================================
 * Status codes
 * ============================================================================================================= */

/** @brief Result of every IT-API call that can fail (IT_SUCCESS is 0, the errors follow in alphabetical order). */
typedef enum IT_ENUM_BASE {
    IT_SUCCESS = 0,
    IT_ERR_ABORT,                    /* 1 */
    IT_ERR_ACCESS,
    IT_ERR_ADDRESS,
    IT_ERR_AEVD_NOT_ALLOWED,
    IT_ERR_ASYNC_AFF_EVD_EXISTS,     /* 5 */
    IT_ERR_ASYNC_UNAFF_EVD_EXISTS,
    IT_ERR_CALLBACK_EXISTS,
    IT_ERR_CANNOT_RESET,
    IT_ERR_CONN_QUAL_BUSY,
    IT_ERR_EP_BUSY,                  /* 10 */
    IT_ERR_EP_TIMEWAIT,
    IT_ERR_EVD_BUSY,
    IT_ERR_EVD_WAIT,
    IT_ERR_EVD_QUEUE_FULL,
    IT_ERR_FAULT,                    /* 15 */
    IT_ERR_HARD_HI_WATERMARK,
    IT_ERR_IA_CATASTROPHE,
    IT_ERR_INTERRUPT,
    IT_ERR_INVALID_ADDR_MODE,
    IT_ERR_INVALID_ADDRESS,          /* 20 */
    IT_ERR_INVALID_AEVD,
    IT_ERR_INVALID_AH,
    IT_ERR_INVALID_ATIMEOUT,
    IT_ERR_INVALID_ATOMIC_OP,
    IT_ERR_INVALID_CM_RETRY,         /* 25 */
    IT_ERR_INVALID_CN_EST_FLAGS,
    IT_ERR_INVALID_CN_EST_ID,
    IT_ERR_INVALID_CONN_EVD,
    IT_ERR_INVALID_CONN_QUAL,
    IT_ERR_INVALID_CONVERSION,       /* 30 */
    IT_ERR_INVALID_DTO_FLAGS,
    IT_ERR_INVALID_EP,
    IT_ERR_INVALID_EP_ATTR,
    IT_ERR_INVALID_EP_KEY,
    IT_ERR_INVALID_EP_STATE,         /* 35 */
    IT_ERR_INVALID_EP_TYPE,
    IT_ERR_INVALID_EVD,
    IT_ERR_INVALID_EVD_STATE,
    IT_ERR_INVALID_EVD_TYPE,
    IT_ERR_INVALID_FLAGS,            /* 40 */
    IT_ERR_INVALID_HANDLE,
    IT_ERR_INVALID_IA,
    IT_ERR_INVALID_IOBL,
    IT_ERR_INVALID_LENGTH,
    IT_ERR_INVALID_LISTEN,           /* 45 */
    IT_ERR_INVALID_LMR,
    IT_ERR_INVALID_LTIMEOUT,
    IT_ERR_INVALID_MAJOR_VERSION,
    IT_ERR_INVALID_MASK,
    IT_ERR_INVALID_MINOR_VERSION,    /* 50 */
    IT_ERR_INVALID_NAME,
    IT_ERR_INVALID_NETADDR,
    IT_ERR_INVALID_NUM_SEGMENTS,
    IT_ERR_INVALID_PDATA_LENGTH,
    IT_ERR_INVALID_PRIVS,            /* 55 */
    IT_ERR_INVALID_PZ,
    IT_ERR_INVALID_QUEUE_SIZE,
    IT_ERR_INVALID_RECV_DTO,
    IT_ERR_INVALID_RECV_EVD,
    IT_ERR_INVALID_RECV_EVD_STATE,   /* 60 */
    IT_ERR_INVALID_REQ_EVD,
    IT_ERR_INVALID_REQ_EVD_STATE,
    IT_ERR_INVALID_RETRY,
    IT_ERR_INVALID_RMR,
    IT_ERR_INVALID_RNR_RETRY,        /* 65 */
    IT_ERR_INVALID_RMR_TYPE,
    IT_ERR_INVALID_RTIMEOUT,
    IT_ERR_INVALID_SOFT_EVD,
    IT_ERR_INVALID_SOURCE_PATH,
    IT_ERR_INVALID_SPIGOT,           /* 70 */
    IT_ERR_INVALID_SRQ,
    IT_ERR_INVALID_SRQ_SIZE,
    IT_ERR_INVALID_THRESHOLD,
    IT_ERR_INVALID_UD_STATUS,
    IT_ERR_INVALID_UD_SVC,           /* 75 */
    IT_ERR_INVALID_UD_SVC_REQ_ID,
    IT_ERR_INVALID_WATERMARK,
    IT_ERR_LMR_BUSY,
    IT_ERR_MISMATCH_FD,
    IT_ERR_NO_CONTEXT,               /* 80 */
    IT_ERR_NO_PERMISSION,
    IT_ERR_OP_NOT_SUPPORTED,
    IT_ERR_PAYLOAD_SIZE,
    IT_ERR_PDATA_NOT_SUPPORTED,
    IT_ERR_PRIV_OPS_UNAVAILABLE,     /* 85 */
    IT_ERR_PZ_BUSY,
    IT_ERR_QUEUE_EMPTY,
    IT_ERR_RANGE,
    IT_ERR_RESOURCES,
    IT_ERR_RESOURCE_IRD,             /* 90 */
    IT_ERR_RESOURCE_LMR_LENGTH,
    IT_ERR_RESOURCE_ORD,
    IT_ERR_RESOURCE_QUEUE_SIZE,
    IT_ERR_RESOURCE_RECV_DTO,
    IT_ERR_RESOURCE_REQ_DTO,         /* 95 */
    IT_ERR_RESOURCE_RRSEG,
    IT_ERR_RESOURCE_RSEG,
    IT_ERR_RESOURCE_RWSEG,
    IT_ERR_RESOURCE_SSEG,
    IT_ERR_SOFT_HI_WATERMARK,        /* 100 */
    IT_ERR_SRQ_BUSY,
    IT_ERR_SRQ_LOW_WATERMARK,
    IT_ERR_SRQ_NOT_SUPPORTED,
    IT_ERR_TIMEOUT_EXPIRED,
    IT_ERR_TOO_MANY_POSTS,           /* 105 */
    IT_ERR_WAITER_LIMIT
} it_status_t;

/* ===============================================================================================================
 * Basic types, memory privileges and handles
 * ============================================================================================================= */

/** @brief Steering tag (STag / R_Key) a peer uses to address an LMR or RMR remotely. */
typedef uint64_t it_rmr_context_t;

/** @brief Length of a memory region or segment. */
#ifdef IT_32BIT
typedef uint32_t it_length_t;
#else
typedef uint64_t it_length_t;
#endif

/** @brief Access rights of a memory region (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_PRIV_NONE = 0x0000,          /**< No access (kept for v1.0 programs). */
    IT_PRIV_LOCAL_READ = 0x0001,
    IT_PRIV_LOCAL_WRITE = 0x0002,
    IT_PRIV_LOCAL = 0x0003,         /**< Local read and write. */
    IT_PRIV_DEFAULT = 0x0003,       /**< Deprecated name of IT_PRIV_LOCAL. */
    IT_PRIV_REMOTE_READ = 0x0004,
    IT_PRIV_REMOTE_WRITE = 0x0008,
    IT_PRIV_REMOTE = 0x000c,        /**< Remote read and write. */
    IT_PRIV_ATOMIC = 0x0010,
    IT_PRIV_ALL = 0x001f
} it_mem_priv_t;

/** @brief Creation flags of an LMR (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_LMR_FLAG_NONE = 0x0001,
    IT_LMR_FLAG_SHARED = 0x0002,
    IT_LMR_FLAG_NONCOHERENT = 0x0004,
    IT_LMR_FLAG_NON_SHAREABLE = 0x0008
} it_lmr_flag_t;

/** @brief Type of an RMR (memory window): narrow windows are tied to one EP, wide ones to a PZ. */
typedef enum IT_ENUM_BASE {
    IT_RMR_TYPE_DEFAULT = 0,
    IT_RMR_TYPE_NARROW = 1,
    IT_RMR_TYPE_WIDE = 2
} it_rmr_type_t;

/** @brief Whether a region is addressed by virtual address or by offset from its start. */
typedef enum IT_ENUM_BASE {
    IT_ADDR_MODE_ABSOLUTE = 0,
    IT_ADDR_MODE_RELATIVE = 1
} it_addr_mode_t;

/** @brief Identifies an incoming UD service request (from IT_CM_REQ_UD_SERVICE_REQUEST_EVENT). */
typedef uint64_t it_ud_svc_req_identifier_t;

/** @brief Identifies an incoming connection request (from IT_CM_REQ_CONN_REQUEST_EVENT). */
typedef uint64_t it_cn_est_identifier_t;

/** @brief IT-API boolean. */
typedef enum IT_ENUM_BASE {
    IT_FALSE = 0,
    IT_TRUE = 1
} it_boolean_t;

/** @brief Kind of object a generic it_handle_t refers to (see it_get_handle_type). */
typedef enum IT_ENUM_BASE {
    IT_HANDLE_TYPE_ADDR,
    IT_HANDLE_TYPE_EP,
    IT_HANDLE_TYPE_EVD,
    IT_HANDLE_TYPE_IA,
    IT_HANDLE_TYPE_LISTEN,
    IT_HANDLE_TYPE_LMR,
    IT_HANDLE_TYPE_PZ,
    IT_HANDLE_TYPE_RMR,
    IT_HANDLE_TYPE_UD_SVC_REQ,
    IT_HANDLE_TYPE_SRQ
} it_handle_type_enum_t;

/** @brief Handle of any IT-API object. */
typedef void *it_handle_t;

/** @brief The handle that refers to no object. */
#define IT_NULL_HANDLE ((it_handle_t)NULL)

/** @brief Address Handle (UD destination). */
typedef struct it_addr_handle_s *it_addr_handle_t;
/** @brief Endpoint. */
typedef struct it_ep_handle_s *it_ep_handle_t;
/** @brief Event Dispatcher (simple or aggregate). */
typedef struct it_evd_handle_s *it_evd_handle_t;
/** @brief Interface Adapter. */
typedef struct it_ia_handle_s *it_ia_handle_t;
/** @brief Listen point. */
typedef struct it_listen_handle_s *it_listen_handle_t;
/** @brief Local Memory Region. */
typedef struct it_lmr_handle_s *it_lmr_handle_t;
/** @brief Protection Zone. */
typedef struct it_pz_handle_s *it_pz_handle_t;
/** @brief Remote Memory Region (memory window). */
typedef struct it_rmr_handle_s *it_rmr_handle_t;
/** @brief UD service request. */
typedef struct it_ud_svc_req_handle_s *it_ud_svc_req_handle_t;
/** @brief Shared Receive Queue. */
typedef struct it_srq_handle_s *it_srq_handle_t;

/** @brief Consumer context attached to a handle (see it_set_consumer_context). */
typedef union {
    void *ptr;       /**< Context as a pointer. */
    uint64_t index;  /**< Context as an integer. */
} it_context_t;

/** @brief Consumer value returned unchanged in the completion event of a work request. */
typedef uint64_t it_dto_cookie_t;

/* ===============================================================================================================
 * Connection qualifiers
 * ============================================================================================================= */

/** @brief Kind of connection qualifier (bit values, also used as masks in it_spigot_info_t). */
typedef enum IT_ENUM_BASE {
    IT_IANA_PORT = 0x01,          /**< TCP/UDP port. */
    IT_IB_SERVICEID = 0x02,       /**< InfiniBand Service ID. */
    IT_VIA_DISCRIMINATOR = 0x04,  /**< VIA connection discriminator. */
    IT_IANA_LR_PORT = 0x08        /**< iWARP local and remote port pair. */
} it_conn_qual_type_t;

/** @brief Size of it_via_discriminator_t::discriminator. */
#define IT_MAX_VIA_DISC_LEN 64

/** @brief VIA connection discriminator. */
typedef struct {
    uint16_t len;                                      /**< Significant bytes in discriminator. */
    unsigned char discriminator[IT_MAX_VIA_DISC_LEN];  /**< Discriminator bytes. */
} it_via_discriminator_t;

/** @brief InfiniBand Service ID. */
typedef uint64_t it_ib_serviceid_t;

/** @brief Local and remote TCP port of an iWARP connection. */
typedef struct {
    uint16_t local;   /**< Local port. */
    uint16_t remote;  /**< Remote port. */
} it_iana_lr_port_t;

/** @brief Connection qualifier: where a connection or UD service request is addressed. */
typedef struct {
    it_conn_qual_type_t type;  /**< Selects the member of conn_qual. */
    union {
        uint16_t port;                         /**< IT_IANA_PORT (network order by default). */
        it_ib_serviceid_t serviceid;           /**< IT_IB_SERVICEID (network order by default). */
        it_via_discriminator_t discriminator;  /**< IT_VIA_DISCRIMINATOR. */
        it_iana_lr_port_t lr_port;             /**< IT_IANA_LR_PORT (network order by default). */
    } conn_qual;                               /**< The qualifier, selected by type. */
} it_conn_qual_t;

/* ===============================================================================================================
 * Work request flags and completion status
 * ============================================================================================================= */

/** @brief Completion status of a work request. */
typedef enum IT_ENUM_BASE {
    IT_DTO_SUCCESS = 0,
    IT_DTO_ERR_LOCAL_LENGTH = 1,
    IT_DTO_ERR_LOCAL_EP = 2,
    IT_DTO_ERR_LOCAL_PROTECTION = 3,
    IT_DTO_ERR_FLUSHED = 4,
    IT_RMR_OPERATION_FAILED = 5,
    IT_DTO_ERR_BAD_RESPONSE = 6,
    IT_DTO_ERR_REMOTE_ACCESS = 7,
    IT_DTO_ERR_REMOTE_RESPONDER = 8,
    IT_DTO_ERR_TRANSPORT = 9,
    IT_DTO_ERR_RECEIVER_NOT_READY = 10,
    IT_DTO_ERR_PARTIAL_PACKET = 11,
    IT_DTO_ERR_LOCAL_MM_OPERATION = 12
} it_dto_status_t;

/** @brief Flags of a posted work request (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_COMPLETION_FLAG = 0x01,      /**< Generate a completion event. */
    IT_NOTIFY_FLAG = 0x02,          /**< The completion notifies a waiter. */
    IT_SOLICITED_WAIT_FLAG = 0x04,  /**< The receive completion at the peer notifies a waiter there. */
    IT_BARRIER_FENCE_FLAG = 0x08,   /**< Start only after earlier RDMA Reads completed. */
    IT_UNLINK_FENCE_FLAG = 0x10,    /**< Unlink starts only after earlier send-queue work completed. */
    IT_UNLINK_LOCAL_SINK = 0x20,    /**< Unlink the local data sink when the work request completes. */
    IT_COALESCE_WR_FLAG = 0x40      /**< The work request may be held back and handed to the RNIC later. */
} it_dto_flags_t;

/* ===============================================================================================================
 * Network addresses, transports and spigots
 * ============================================================================================================= */

/** @brief Kind of network address. */
typedef enum IT_ENUM_BASE {
    IT_IPV4 = 0x1,
    IT_IPV6 = 0x2,
    IT_IB_GID = 0x3,
    IT_VIA_HOSTADDR = 0x4
} it_net_addr_type_t;

/** @brief Size of it_via_net_addr_t::hostaddr. */
#define IT_MAX_VIA_ADDR_LEN 64

/** @brief VIA host address. */
typedef struct {
    uint16_t len;                                 /**< Significant bytes in hostaddr. */
    unsigned char hostaddr[IT_MAX_VIA_ADDR_LEN];  /**< Host address bytes. */
} it_via_net_addr_t;

/** @brief InfiniBand GID (network byte order). */
typedef struct in6_addr it_ib_gid_t;

/** @brief A network address of any supported kind. */
typedef struct {
    it_net_addr_type_t addr_type;  /**< Selects the member of addr. */
    union {
        struct in_addr ipv4;
        struct in6_addr ipv6;
        it_ib_gid_t gid;
        it_via_net_addr_t via;  /**< VIA variant. */
    } addr;                     /**< The address, selected by addr_type. */
} it_net_addr_t;

/** @brief Transport an Interface Adapter uses. */
typedef enum IT_ENUM_BASE {
    IT_IB_TRANSPORT = 1,
    IT_VIA_IP_TRANSPORT = 2,
    IT_VIA_FC_TRANSPORT = 3,
    IT_IWARP_TCP_TRANSPORT = 4,
    IT_VENDOR_TRANSPORT = 1000
} it_transport_type_t;

/** @brief Transport service type (bit values). */
typedef enum IT_ENUM_BASE {
    IT_RC_SERVICE = 0x1,  /**< Reliable Connected. */
    IT_UD_SERVICE = 0x2   /**< Unreliable Datagram. */
} it_transport_service_type_t;

/** @brief Description of one spigot (port) of an Interface Adapter. */
typedef struct {
    size_t spigot_id;                            /**< Local spigot. */
    size_t max_rc_send_len;                      /**< Largest RC Send. */
    size_t max_rc_rdma_len;                      /**< Largest RC RDMA Read or Write. */
    size_t max_ud_send_len;                      /**< Largest UD Send. */
    it_boolean_t spigot_online;                  /**< Whether the spigot is online. */
    it_conn_qual_type_t active_side_conn_qual;   /**< Qualifier kinds accepted by it_ep_connect (mask). */
    it_conn_qual_type_t passive_side_conn_qual;  /**< Qualifier kinds accepted by it_listen_create (mask). */
    size_t num_net_addr;                         /**< Entries in net_addr. */
    it_net_addr_t *net_addr;                     /**< Network addresses of the spigot (num_net_addr entries). */
} it_spigot_info_t;

/** @brief InfiniBand vendor identification (NodeInfo). */
typedef struct {
    uint32_t vendor : 24;  /**< Vendor identification. */
    uint16_t device;       /**< NodeInfo:DeviceID. */
    uint32_t revision;     /**< NodeInfo:Revision. */
} it_vendor_ib_t;

/** @brief VIA vendor identification (VIP_NIC_ATTRIBUTES). */
typedef struct {
    char name[64];           /**< Name member of VIP_NIC_ATTRIBUTES. */
    unsigned long hardware;  /**< HardwareVersion. */
    unsigned long provider;  /**< ProviderVersion. */
} it_vendor_via_t;

/** @brief iWARP vendor identification. */
typedef struct {
    it_boolean_t valid_vid;  /**< Whether vid holds data. */
    unsigned char vid[64];   /**< Vendor-specific identification. */
} it_vendor_iwarp_tcp_t;

/* ===============================================================================================================
 * I/O buffer lists (privileged consumers)
 * ============================================================================================================= */

/** @brief Bus or physical I/O address (opaque, OS-dependent). */
typedef struct it_io_addr_s *it_io_addr_t;

/** @brief Kind of I/O buffer list (bit values). */
typedef enum IT_ENUM_BASE {
    IT_IOBL_PAGE_LIST = 0x0001,
    IT_IOBL_BLOCK_LIST = 0x0002,
    IT_IOBL_VE_PAGE_LIST = 0x0004
} it_iobl_type_t;

/** @brief Element of a variable-element-length I/O buffer list. */
typedef struct {
    it_io_addr_t io_addr;  /**< I/O address of the element. */
    it_length_t elt_len;   /**< Element length. */
} it_iobl_ve_elt_t;

/** @brief I/O buffer list describing the memory of an LMR. */
typedef struct {
    it_iobl_type_t iobl_type;  /**< Selects the member of list. */
    union {
        struct {
            it_io_addr_t *list_elt;  /**< First element. */
            it_length_t elt_len;     /**< Length of every element. */
        } ce_list;                   /**< Constant-element-length list. */
        struct {
            it_iobl_ve_elt_t *list_elt;  /**< First element. */
        } ve_list;                       /**< Variable-element-length list. */
    } list;                              /**< The list elements. */
    size_t num_elts;                     /**< Elements in the list. */
    it_length_t fbo;                     /**< First-byte offset. */
} it_iobl_t;

/* ===============================================================================================================
 * Interface Adapter attributes
 * ============================================================================================================= */

/** @brief Attributes of an Interface Adapter, returned by it_ia_query and released with it_ia_info_free. */
typedef struct {
    char *ia_name;               /**< Name the IA was opened with. */
    uint32_t api_major_version;  /**< Latest IT-API version the IA supports. */
    uint32_t api_minor_version;  /**< Latest IT-API minor version supported. */
    uint32_t sw_major_version;   /**< IA software version (IA-defined meaning). */
    uint32_t sw_minor_version;   /**< IA software minor version. */
    union {
        it_vendor_ib_t ib;                                /**< InfiniBand variant. */
        it_vendor_via_t via;                              /**< VIA variant. */
        it_vendor_iwarp_tcp_t iwarp;                      /**< iWARP variant. */
    } vendor;                                             /**< Selected by transport_type. */
    uint32_t dto_alignment_hint;                          /**< Best buffer alignment in bytes (a hint). */
    it_transport_type_t transport_type;                   /**< Transport of the Interface or IA. */
    it_transport_service_type_t supported_service_types;  /**< Mask of supported transport service types. */
    it_boolean_t ep_work_queues_resizable;                /**< Whether EP work queues can be resized. */
    it_boolean_t three_way_handshake_support;             /**< Whether a three-way handshake is available. */
    it_boolean_t private_data_support;                    /**< Whether connection/UD setup carries private data. */
    it_boolean_t max_message_size_support;                /**< Whether conn_req max_message_size is valid. */
    it_boolean_t ird_ord_ia_support;                      /**< IRD/ORD support (v1.0: ird_support, ord_support). */
    it_boolean_t ird_ord_suppressible;                    /**< Whether IRD/ORD exchange can be suppressed. */
    it_boolean_t spigot_online_support;                   /**< Whether SPIGOT_ONLINE events are generated. */
    it_boolean_t spigot_offline_support;                  /**< Whether SPIGOT_OFFLINE events are generated. */
    size_t connect_private_data_len;                      /**< At most IT_MAX_PRIV_DATA. */
    size_t accept_private_data_len;                       /**< At most IT_MAX_PRIV_DATA. */
    size_t reject_private_data_len;                       /**< At most IT_MAX_PRIV_DATA. */
    size_t disconnect_private_data_len;                   /**< At most IT_MAX_PRIV_DATA. */
    size_t ud_req_private_data_len;                       /**< At most IT_MAX_PRIV_DATA. */
    size_t ud_rep_private_data_len;                       /**< At most IT_MAX_PRIV_DATA. */
    size_t num_spigots;                                   /**< Entries in spigot_info. */
    it_spigot_info_t *spigot_info;                        /**< num_spigots entries. */
    it_evd_handle_t affiliated_err_evd;                   /**< EVD of affiliated async events, or IT_NULL_HANDLE. */
    it_evd_handle_t unaffiliated_err_evd;                 /**< EVD of unaffiliated async events, or IT_NULL_HANDLE. */
    it_boolean_t srq_support;                             /**< Whether Shared Receive Queues are supported. */
    it_boolean_t hard_hi_watermark_support;               /**< Whether the EP hard high watermark is supported. */
    it_boolean_t soft_hi_watermark_support;               /**< Whether the EP soft high watermark is supported. */
    it_boolean_t srq_resizable;                           /**< Whether an SRQ can be resized. */
    it_boolean_t extended_iwarp_qp_states;                /**< Whether extended iWARP QP states are supported. */
    it_boolean_t socket_conversion_support;               /**< Whether it_socket_convert is supported (iWARP only). */
    it_boolean_t rdma_read_ord_increasable;               /**< Whether ORD can be increased after creation. */
    it_boolean_t rdma_read_ird_modifiable;                /**< Whether IRD can be changed after creation. */
    it_rmr_type_t rmr_types_supported;                    /**< Mask of IT_RMR_TYPE_NARROW and IT_RMR_TYPE_WIDE. */
    it_boolean_t addr_mode_relative_support;              /**< Whether relative addressing is supported. */
    it_boolean_t rdma_read_requires_remote_write;         /**< Whether RDMA Read sinks need write access. */
    it_boolean_t ep_rdma_enables_modifiable;              /**< Whether RDMA enables can change after creation. */
    it_boolean_t rdma_read_local_extensions;              /**< it_post_rdma_read_to_rmr and IT_UNLINK_LOCAL_SINK. */
    it_boolean_t dto_evd_overflow_detection;              /**< Whether DTO EVD overflow is detected. */
    it_boolean_t atomic_support;                          /**< Whether the IA implements atomic operations. */
    it_boolean_t lmr_link_support;                        /**< Whether privileged consumers can use it_lmr_link. */
    it_boolean_t direct_lmr_handle_support;               /**< Whether the Direct LMR Handle is available. */
    it_lmr_handle_t direct_lmr_handle;                    /**< The Direct LMR Handle, or IT_NULL_HANDLE. */
    it_boolean_t post_send_unlink_remote_support;         /**< Whether it_post_send_and_unlink is supported. */
    it_boolean_t narrow_rmr_unlink_support;               /**< Whether narrow RMRs can be unlinked. */
    it_boolean_t wide_rmr_unlink_support;                 /**< Whether wide RMRs can be unlinked. */
    it_boolean_t unlink_fence_support;                    /**< Whether IT_UNLINK_FENCE_FLAG is supported. */
    it_iobl_type_t iobl_types_supported;                  /**< Mask of supported I/O buffer list types. */
} it_ia_info_t;

/* ===============================================================================================================
 * Memory segments
 * ============================================================================================================= */

/** @brief A local data segment: part of an LMR. */
typedef struct {
    it_lmr_handle_t lmr;  /**< LMR holding the segment. */
    union {
        void *abs;        /**< IT_ADDR_MODE_ABSOLUTE. */
        it_length_t rel;  /**< IT_ADDR_MODE_RELATIVE. */
        it_io_addr_t io;  /**< LMR created from an I/O buffer list. */
    } addr;               /**< Start of the segment, in the addressing mode of the region. */
    it_length_t length;   /**< Length in bytes. */
} it_lmr_triplet_t;

/** @brief A local data segment in an RMR (it_post_rdma_read_to_rmr). */
typedef struct {
    it_rmr_handle_t rmr;  /**< RMR holding the segment. */
    union {
        void *abs;
        it_length_t rel;
    } addr;              /**< Start of the segment, in the addressing mode of the region. */
    it_length_t length;  /**< Length in bytes. */
} it_rmr_triplet_t;

/** @brief Address of remote memory in an RDMA or atomic operation. */
typedef uint64_t it_rdma_addr_t;

/* ===============================================================================================================
 * Paths
 * ============================================================================================================= */

/*
 * The IB path uses unsigned int bit-fields where the Open Group header uses uint8_t ones: ISO C allows only
 * int-sized bit-field types, so this keeps the header warning-free under -Wpedantic. Names and widths are the same.
 */
/** @brief InfiniBand path (fields of the IB CM REQ message). */
typedef struct {
    uint16_t partition_key;            /**< Partition Key. */
    unsigned int path_mtu : 4;         /**< Path MTU. */
    unsigned int packet_lifetime : 6;  /**< PacketLifeTime. */
    uint16_t local_port_lid;           /**< Local port LID (source path bits). */
    uint16_t remote_port_lid;          /**< Remote port LID (destination LID). */
    it_ib_gid_t local_port_gid;        /**< Local port GID. */
    it_ib_gid_t remote_port_gid;       /**< Remote port GID (destination GID). */
    unsigned int packet_rate : 6;      /**< Packet Rate (static rate). */
    unsigned int sl : 4;               /**< Service Level. */
    unsigned int subnet_local : 1;     /**< Subnet Local bit (no GRH). */
    uint32_t flow_label : 20;          /**< Flow Label (if not subnet_local). */
    uint8_t traffic_class;             /**< Traffic Class (if not subnet_local). */
    uint8_t hop_limit;                 /**< Hop Limit (if not subnet_local). */
} it_ib_net_endpoint_t;

/** @brief VIA path. */
typedef it_via_net_addr_t it_via_net_endpoint_t;

/** @brief IP version of an iWARP path. */
typedef enum IT_ENUM_BASE {
    IT_IP_VERS_IPV4 = 0x1,
    IT_IP_VERS_IPV6 = 0x2
} it_ip_vers_t;

/** @brief iWARP path: local and remote IP address. */
typedef struct {
    it_ip_vers_t ip_vers;  /**< Selects the member of laddr and raddr. */
    union {
        struct in_addr ipv4;
        struct in6_addr ipv6;
    } laddr;  /**< Local IP address. */
    union {
        struct in_addr ipv4;
        struct in6_addr ipv6;
    } raddr;  /**< Remote IP address. */
} it_iwarp_net_endpoint_t;

/** @brief A path between a local spigot and a remote node. */
typedef struct {
    size_t spigot_id;  /**< Local spigot. */
    uint64_t timeout;  /**< Connection establishment timeout in microseconds (active side). */
    union {
        it_ib_net_endpoint_t ib;        /**< InfiniBand variant. */
        it_via_net_endpoint_t via;      /**< VIA variant. */
        it_iwarp_net_endpoint_t iwarp;  /**< iWARP variant. */
    } remote;                           /**< Selected by the IA's transport. */
} it_path_t;

/* ===============================================================================================================
 * Endpoint attributes
 * ============================================================================================================= */

/** @brief UD Endpoint identifier (IB QP number). */
typedef uint32_t it_ud_ep_id_t;
/** @brief UD Endpoint key (IB Q_Key). */
typedef uint32_t it_ud_ep_key_t;

/** @brief Selects the it_ep_param_t members of it_ep_query and it_ep_modify (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_EP_PARAM_ALL = 0x00000001,
    IT_EP_PARAM_IA = 0x00000002,
    IT_EP_PARAM_SPIGOT = 0x00000004,
    IT_EP_PARAM_STATE = 0x00000008,
    IT_EP_PARAM_SERV_TYPE = 0x00000010,
    IT_EP_PARAM_PATH = 0x00000020,
    IT_EP_PARAM_PZ = 0x00000040,
    IT_EP_PARAM_REQ_SEVD = 0x00000080,
    IT_EP_PARAM_RECV_SEVD = 0x00000100,
    IT_EP_PARAM_CONN_SEVD = 0x00000200,
    IT_EP_PARAM_RDMA_RD_ENABLE = 0x00000400,
    IT_EP_PARAM_RDMA_WR_ENABLE = 0x00000800,
    IT_EP_PARAM_MAX_RDMA_READ_SEG = 0x00001000,
    IT_EP_PARAM_MAX_RDMA_WRITE_SEG = 0x00002000,
    IT_EP_PARAM_MAX_IRD = 0x00004000,
    IT_EP_PARAM_MAX_ORD = 0x00008000,
    IT_EP_PARAM_EP_ID = 0x00010000,
    IT_EP_PARAM_EP_KEY = 0x00020000,
    IT_EP_PARAM_MAX_PAYLOAD = 0x00040000,
    IT_EP_PARAM_MAX_REQ_DTO = 0x00080000,
    IT_EP_PARAM_MAX_RECV_DTO = 0x00100000,
    IT_EP_PARAM_MAX_SEND_SEG = 0x00200000,
    IT_EP_PARAM_MAX_RECV_SEG = 0x00400000,
    IT_EP_PARAM_SRQ = 0x00800000,
    IT_EP_PARAM_SOFT_HI_WATERMARK = 0x01000000,
    IT_EP_PARAM_HARD_HI_WATERMARK = 0x02000000,
    IT_EP_PARAM_ATOMICS_ENABLE = 0x04000000,
    IT_EP_PARAM_PRIV_OPS_ENABLE = 0x08000000
} it_ep_param_mask_t;

/** @brief Attributes only Reliable Connected Endpoints have. */
typedef struct {
    it_boolean_t rdma_read_enable;   /**< IT_EP_PARAM_RDMA_RD_ENABLE */
    it_boolean_t rdma_write_enable;  /**< IT_EP_PARAM_RDMA_WR_ENABLE */
    size_t max_rdma_read_segments;   /**< IT_EP_PARAM_MAX_RDMA_READ_SEG */
    size_t max_rdma_write_segments;  /**< IT_EP_PARAM_MAX_RDMA_WRITE_SEG */
    uint32_t rdma_read_ird;          /**< IT_EP_PARAM_MAX_IRD */
    uint32_t rdma_read_ord;          /**< IT_EP_PARAM_MAX_ORD */
    it_srq_handle_t srq;             /**< IT_EP_PARAM_SRQ */
    size_t soft_hi_watermark;        /**< IT_EP_PARAM_SOFT_HI_WATERMARK */
    size_t hard_hi_watermark;        /**< IT_EP_PARAM_HARD_HI_WATERMARK */
    it_boolean_t atomics_enable;     /**< IT_EP_PARAM_ATOMICS_ENABLE */
} it_rc_only_attributes_t;

/** @brief it_rc_only_attributes_t::hard_hi_watermark value that disables the hard high watermark. */
#define IT_HARD_HI_WATERMARK_DISABLE ((size_t)-1)

/** @brief Identification of a remote UD Endpoint. */
typedef struct {
    it_ud_ep_id_t ud_ep_id;    /**< IT_EP_PARAM_EP_ID */
    it_ud_ep_key_t ud_ep_key;  /**< IT_EP_PARAM_EP_KEY */
} it_remote_ep_info_t;

/** @brief Attributes only Unreliable Datagram Endpoints have. */
typedef struct {
    it_remote_ep_info_t ep_info;  /**< Remote UD Endpoint identification. */
} it_ud_only_attributes_t;

/** @brief Service-specific Endpoint attributes. */
typedef union {
    it_rc_only_attributes_t rc;  /**< Reliable Connected variant. */
    it_ud_only_attributes_t ud;  /**< Unreliable Datagram variant. */
} it_service_attributes_t;

/** @brief Endpoint attributes given at creation and changed with it_ep_modify. */
typedef struct {
    size_t max_dto_payload_size;   /**< IT_EP_PARAM_MAX_PAYLOAD */
    size_t max_request_dtos;       /**< IT_EP_PARAM_MAX_REQ_DTO */
    size_t max_recv_dtos;          /**< IT_EP_PARAM_MAX_RECV_DTO */
    size_t max_send_segments;      /**< IT_EP_PARAM_MAX_SEND_SEG */
    size_t max_recv_segments;      /**< IT_EP_PARAM_MAX_RECV_SEG */
    it_service_attributes_t srv;   /**< Service-specific attributes. */
    it_boolean_t priv_ops_enable;  /**< IT_EP_PARAM_PRIV_OPS_ENABLE */
} it_ep_attributes_t;

/* ===============================================================================================================
 * Events
 * ============================================================================================================= */

/** @brief Mask that extracts the event stream from an it_event_type_t value. */
#define IT_EVENT_STREAM_MASK 0xff000

/** @brief it_evd_wait timeout that never expires. */
#define IT_TIMEOUT_INFINITE ((uint64_t)(-1L))

/** @brief Event numbers; the bits under IT_EVENT_STREAM_MASK name the event stream. */
typedef enum IT_ENUM_BASE {
    /* Work request completions */
    IT_DTO_EVENT_STREAM = 0x00000,
    IT_DTO_SEND_CMPL_EVENT = 0x00001,
    IT_DTO_RC_RECV_CMPL_EVENT = 0x00002,
    IT_DTO_UD_RECV_CMPL_EVENT = 0x00003,
    IT_DTO_RDMA_WRITE_CMPL_EVENT = 0x00004,
    IT_DTO_RDMA_READ_CMPL_EVENT = 0x00005,
    IT_RMR_BIND_CMPL_EVENT = 0x00006,        /**< v1.0 name of IT_RMR_LINK_CMPL_EVENT. */
    IT_RMR_LINK_CMPL_EVENT = 0x00006,
    IT_DTO_FETCH_ADD_CMPL_EVENT = 0x00007,
    IT_DTO_CMP_SWAP_CMPL_EVENT = 0x00008,
    IT_LMR_LINK_CMPL_EVENT = 0x00009,

    /* Communication management requests */
    IT_CM_REQ_EVENT_STREAM = 0x01000,
    IT_CM_REQ_CONN_REQUEST_EVENT = 0x01001,
    IT_CM_REQ_UD_SERVICE_REQUEST_EVENT = 0x01002,

    /* Communication management messages */
    IT_CM_MSG_EVENT_STREAM = 0x02000,
    IT_CM_MSG_CONN_ACCEPT_ARRIVAL_EVENT = 0x02001,
    IT_CM_MSG_CONN_ESTABLISHED_EVENT = 0x02002,
    IT_CM_MSG_CONN_DISCONNECT_EVENT = 0x02003,
    IT_CM_MSG_CONN_PEER_REJECT_EVENT = 0x02004,
    IT_CM_MSG_CONN_NONPEER_REJECT_EVENT = 0x02005,
    IT_CM_MSG_CONN_BROKEN_EVENT = 0x02006,
    IT_CM_MSG_UD_SERVICE_REPLY_EVENT = 0x02007,

    /* Affiliated asynchronous events */
    IT_ASYNC_AFF_EVENT_STREAM = 0x04000,
    IT_ASYNC_AFF_SEVD_ENQUEUE_FAILURE = 0x04001,
    IT_ASYNC_AFF_EP_FAILURE = 0x04002,
    IT_ASYNC_AFF_EP_BAD_TRANSPORT_OPCODE = 0x04003,
    IT_ASYNC_AFF_EP_REQ_DROPPED = 0x04005,
    IT_ASYNC_AFF_EP_RDMAW_ACCESS_VIOLATION = 0x04006,
    IT_ASYNC_AFF_EP_RDMAW_CORRUPT_DATA = 0x04007,
    IT_ASYNC_AFF_EP_RDMAR_ACCESS_VIOLATION = 0x04008,
    IT_ASYNC_AFF_EP_LOCAL_ACCESS_VIOLATION = 0x04020,
    IT_ASYNC_AFF_EP_L_ACCESS_VIOLATION = 0x04020,
    IT_ASYNC_AFF_EP_L_RECV_ACCESS_VIOLATION = 0x04021,
    IT_ASYNC_AFF_EP_L_IRRQ_ACCESS_VIOLATION = 0x04022,
    IT_ASYNC_AFF_EP_L_TRANSPORT_ERROR = 0x04023,
    IT_ASYNC_AFF_EP_L_LLP_ERROR = 0x04024,
    IT_ASYNC_AFF_EP_R_ERROR = 0x04040,
    IT_ASYNC_AFF_EP_R_ACCESS_VIOLATION = 0x04041,
    IT_ASYNC_AFF_EP_R_RECV_ACCESS_VIOLATION = 0x04042,
    IT_ASYNC_AFF_EP_R_RECV_LENGTH_ERROR = 0x04043,
    IT_ASYNC_AFF_EP_SOFT_HI_WATERMARK = 0x04060,
    IT_ASYNC_AFF_EP_SRQ_ERROR = 0x04061,
    IT_ASYNC_AFF_SRQ_LOW_WATERMARK = 0x04100,

    /* Unaffiliated asynchronous events (0x08001 is deprecated) */
    IT_ASYNC_UNAFF_EVENT_STREAM = 0x08000,
    IT_ASYNC_UNAFF_SPIGOT_ONLINE = 0x08002,
    IT_ASYNC_UNAFF_SPIGOT_OFFLINE = 0x08003,
    IT_ASYNC_UNAFF_SEVD_ENQUEUE_FAILURE = 0x08004,

    /* Software events (it_evd_post_se) */
    IT_SOFTWARE_EVENT_STREAM = 0x10000,
    IT_SOFTWARE_EVENT = 0x10001,

    /* Aggregate EVD notifications */
    IT_AEVD_NOTIFICATION_EVENT_STREAM = 0x20000,
    IT_AEVD_NOTIFICATION_EVENT = 0x20001
} it_event_type_t;

/** @brief Event in an AEVD: an attached SEVD has events. */
typedef struct {
    it_event_type_t event_number;  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t aevd;          /**< AEVD the notification is queued on. */
    it_evd_handle_t sevd;          /**< SEVD that has events. */
} it_aevd_notification_event_t;

/** @brief Affiliated asynchronous event: an error tied to one SEVD, EP or SRQ. */
typedef struct {
    it_event_type_t event_number;  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;           /**< EVD the event was dequeued from. */
    union {
        it_evd_handle_t sevd;  /**< Simple EVD concerned. */
        it_ep_handle_t ep;     /**< Endpoint concerned. */
        it_srq_handle_t srq;
    } cause;  /**< Object the event concerns. */
} it_affiliated_event_t;

/*
 * IT_MAX_PRIV_DATA is left to the implementation. OpenRDMA is an iWARP stack: an MPA Request or Reply frame carries
 * at most 512 bytes of private data (RFC 5044), the same bound as KRDMA_MAX_PRIVATE_DATA in the kAL ABI, so every
 * private data an MPA peer may send fits into the event buffers. When MPA enhanced connection setup (RFC 6581) uses
 * part of that space for IRD/ORD, the IA reports the smaller usable lengths in it_ia_info_t (connect/accept/reject
 * _private_data_len). iWARP has no disconnect or UD private data; those lengths are reported as 0.
 */
/** @brief Size of the private data buffers in events and in it_ud_svc_req_param_t (the MPA maximum). */
#define IT_MAX_PRIV_DATA 512

/** @brief Reason code of a rejected connection. */
typedef enum IT_ENUM_BASE {
    IT_CN_REJ_OTHER = 0,
    IT_CN_REJ_TIMEOUT = 1,
    IT_CN_REJ_BAD_PATH = 2,
    IT_CN_REJ_STALE_CONN = 3,
    IT_CN_REJ_BAD_ORD = 4,
    IT_CN_REJ_RESOURCES = 5,
    IT_CN_REJ_BAD_CONN_PARMS = 6
} it_conn_reject_code_t;

/** @brief Connection event on the active or passive side (IT_CM_MSG_CONN_*). */
typedef struct {
    it_event_type_t event_number;                  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;                           /**< EVD the event was dequeued from. */
    it_cn_est_identifier_t cn_est_id;              /**< Identifier for it_ep_accept or it_reject. */
    it_ep_handle_t ep;                             /**< Endpoint of the connection. */
    uint32_t rdma_read_ird;                        /**< RDMA Read inbound depth (IRD). */
    uint32_t rdma_read_ord;                        /**< RDMA Read outbound depth (ORD). */
    it_path_t dst_path;                            /**< Path to the remote node. */
    it_conn_reject_code_t reject_reason_code;      /**< Why the connection was rejected (reject events). */
    unsigned char private_data[IT_MAX_PRIV_DATA];  /**< Private data of the peer (valid when private_data_present). */
    it_boolean_t private_data_present;             /**< Whether the peer sent private data. */
} it_connection_event_t;

/** @brief Outcome of a UD service request. */
typedef enum IT_ENUM_BASE {
    IT_UD_SVC_EP_INFO_VALID = 0,
    IT_UD_SVC_ID_NOT_SUPPORTED = 1,
    IT_UD_SVC_REQ_REJECTED = 2,
    IT_UD_NO_EP_AVAILABLE = 3,
    IT_UD_REQ_REDIRECTED = 4
} it_ud_svc_req_status_t;

/** @brief Reply to a UD service request (IT_CM_MSG_UD_SERVICE_REPLY_EVENT). */
typedef struct {
    it_event_type_t event_number;                  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;                           /**< EVD the event was dequeued from. */
    it_ud_svc_req_handle_t ud_svc;                 /**< UD service request handle the reply answers. */
    it_ud_svc_req_status_t status;                 /**< Outcome of the request. */
    it_remote_ep_info_t ep_info;                   /**< Remote UD Endpoint identification. */
    it_path_t dst_path;                            /**< Path to the remote node. */
    unsigned char private_data[IT_MAX_PRIV_DATA];  /**< Private data of the peer (valid when private_data_present). */
    it_boolean_t private_data_present;             /**< Whether the peer sent private data. */
} it_ud_svc_reply_event_t;

/** @brief Incoming connection request (IT_CM_REQ_CONN_REQUEST_EVENT). */
typedef struct {
    it_event_type_t event_number;                  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;                           /**< EVD the event was dequeued from. */
    it_cn_est_identifier_t cn_est_id;              /**< Identifier for it_ep_accept or it_reject. */
    it_conn_qual_t conn_qual;                      /**< Connection qualifier the request was addressed to. */
    it_net_addr_t source_addr;                     /**< Network address of the requester. */
    size_t spigot_id;                              /**< Local spigot. */
    uint32_t max_message_size;                     /**< Largest message the requester can receive. */
    uint32_t rdma_read_ird;                        /**< RDMA Read inbound depth (IRD). */
    uint32_t rdma_read_ord;                        /**< RDMA Read outbound depth (ORD). */
    unsigned char private_data[IT_MAX_PRIV_DATA];  /**< Private data of the peer (valid when private_data_present). */
    it_boolean_t private_data_present;             /**< Whether the peer sent private data. */
} it_conn_request_event_t;

/** @brief Incoming UD service request (IT_CM_REQ_UD_SERVICE_REQUEST_EVENT). */
typedef struct {
    it_event_type_t event_number;                  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;                           /**< EVD the event was dequeued from. */
    it_ud_svc_req_identifier_t ud_svc_req_id;      /**< Identifier for it_ud_service_reply. */
    it_conn_qual_t conn_qual;                      /**< Connection qualifier the request was addressed to. */
    it_net_addr_t source_addr;                     /**< Network address of the requester. */
    size_t spigot_id;                              /**< Local spigot. */
    unsigned char private_data[IT_MAX_PRIV_DATA];  /**< Private data of the peer (valid when private_data_present). */
    it_boolean_t private_data_present;             /**< Whether the peer sent private data. */
} it_ud_svc_request_event_t;

/** @brief Flags of a UD receive completion. */
typedef enum IT_ENUM_BASE {
    IT_UD_IB_GRH_PRESENT = 0x01
} it_dto_ud_flags_t;

/** @brief Completion of a work request other than a UD receive. */
typedef struct {
    it_event_type_t event_number;    /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;             /**< EVD the event was dequeued from. */
    it_ep_handle_t ep;               /**< Endpoint concerned. */
    it_dto_cookie_t cookie;          /**< Cookie given when the work request was posted. */
    it_dto_status_t dto_status;      /**< Completion status. */
    uint32_t transferred_length;     /**< Bytes transferred (receives and RDMA Reads). */
    it_handle_t unlinked_mr_handle;  /**< LMR or RMR unlinked by the peer or by IT_UNLINK_LOCAL_SINK. */
} it_dto_cmpl_event_t;

/** @brief Completion of any work request, including UD receives. */
typedef struct {
    it_event_type_t event_number;    /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;             /**< EVD the event was dequeued from. */
    it_ep_handle_t ep;               /**< Endpoint concerned. */
    it_dto_cookie_t cookie;          /**< Cookie given when the work request was posted. */
    it_dto_status_t dto_status;      /**< Completion status. */
    uint32_t transferred_length;     /**< Bytes transferred (receives and RDMA Reads). */
    it_handle_t unlinked_mr_handle;  /**< LMR or RMR unlinked by the peer or by IT_UNLINK_LOCAL_SINK. */
    it_dto_ud_flags_t flags;         /**< UD receive flags. */
    it_ud_ep_id_t ud_ep_id;          /**< Identifier of the sending UD Endpoint. */
    it_path_t src_path;              /**< Path to the sender (UD receives). */
} it_all_dto_cmpl_event_t;

/** @brief Software event posted with it_evd_post_se. */
typedef struct {
    it_event_type_t event_number;  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;           /**< EVD the event was dequeued from. */
    void *data;                    /**< Consumer data of the software event. */
} it_software_event_t;

/** @brief Unaffiliated asynchronous event: concerns an IA or one of its spigots. */
typedef struct {
    it_event_type_t event_number;  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;           /**< EVD the event was dequeued from. */
    it_ia_handle_t ia;             /**< IA the event concerns. */
    size_t spigot_id;              /**< Local spigot. */
} it_unaffiliated_event_t;

/** @brief The members every event starts with. */
typedef struct {
    it_event_type_t event_number;  /**< Event number (selects the it_event_t member). */
    it_evd_handle_t evd;           /**< EVD the event was dequeued from. */
} it_any_event_t;

/** @brief Any event; event_number selects the member. */
typedef union {
    it_event_type_t event_number;              /**< Event number (selects the it_event_t member). */
    it_any_event_t any;                        /**< Members common to all events. */
    it_dto_cmpl_event_t dto_cmpl;              /**< IT_DTO_EVENT_STREAM except UD receives. */
    it_all_dto_cmpl_event_t all_dto_cmpl;      /**< IT_DTO_EVENT_STREAM. */
    it_conn_request_event_t conn_req;          /**< IT_CM_REQ_CONN_REQUEST_EVENT. */
    it_ud_svc_request_event_t ud_svc_request;  /**< IT_CM_REQ_UD_SERVICE_REQUEST_EVENT. */
    it_connection_event_t conn;                /**< IT_CM_MSG_CONN_* events. */
    it_ud_svc_reply_event_t ud_svc_reply;      /**< IT_CM_MSG_UD_SERVICE_REPLY_EVENT. */
    it_affiliated_event_t aff_async;           /**< IT_ASYNC_AFF_EVENT_STREAM. */
    it_unaffiliated_event_t unaff_async;       /**< IT_ASYNC_UNAFF_EVENT_STREAM. */
    it_software_event_t sw;                    /**< IT_SOFTWARE_EVENT_STREAM. */
    it_aevd_notification_event_t aevd_notify;  /**< IT_AEVD_NOTIFICATION_EVENT_STREAM. */
} it_event_t;

/* ===============================================================================================================
 * Endpoint state, datagram addressing and Address Handles
 * ============================================================================================================= */

/** @brief State of a Reliable Connected Endpoint. */
typedef enum IT_ENUM_BASE {
    IT_EP_STATE_UNCONNECTED = 0,
    IT_EP_STATE_ACTIVE1_CONNECTION_PENDING = 1,
    IT_EP_STATE_ACTIVE2_CONNECTION_PENDING = 2,
    IT_EP_STATE_PASSIVE_CONNECTION_PENDING = 3,
    IT_EP_STATE_CONNECTED = 4,
    IT_EP_STATE_NONOPERATIONAL = 5,
    IT_EP_STATE_PASSIVE_WAIT_RDMA_TRANS_REQ = 6  /**< Converted socket waiting for the peer's MPA request. */
} it_ep_state_rc_t;

/** @brief State of an Unreliable Datagram Endpoint. */
typedef enum IT_ENUM_BASE {
    IT_EP_STATE_UD_NONOPERATIONAL = 0,
    IT_EP_STATE_UD_OPERATIONAL = 1
} it_ep_state_ud_t;

/** @brief State of an Endpoint of either service type. */
typedef union {
    it_ep_state_rc_t rc;  /**< Reliable Connected variant. */
    it_ep_state_ud_t ud;  /**< Unreliable Datagram variant. */
} it_ep_state_t;

/** @brief InfiniBand UD destination. */
typedef struct {
    it_addr_handle_t addr;        /**< Address Handle of the destination. */
    it_remote_ep_info_t ep_info;  /**< Remote UD Endpoint identification. */
} it_ib_ud_addr_t;

/** @brief Kind of datagram destination. */
typedef enum IT_ENUM_BASE {
    IT_DG_TYPE_IB_UD
} it_dg_type_t;

/** @brief Destination of it_post_sendto. */
typedef struct {
    it_dg_type_t type;  /**< Selects the member of addr. */
    union {
        it_ib_ud_addr_t ud;  /**< Unreliable Datagram variant. */
    } addr;                  /**< The destination, selected by type. */
} it_dg_remote_ep_addr_t;

/** @brief Flags of it_address_handle_create. */
typedef enum IT_ENUM_BASE {
    IT_AH_PATH_COMPLETE = 0x1
} it_ah_flags_t;

/** @brief Selects the it_addr_param_t members of it_address_handle_query and _modify (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_ADDR_PARAM_ALL = 0x0001,
    IT_ADDR_PARAM_IA = 0x0002,
    IT_ADDR_PARAM_PZ = 0x0004,
    IT_ADDR_PARAM_PATH = 0x0008
} it_addr_param_mask_t;

/** @brief Parameters of an Address Handle. */
typedef struct {
    it_ia_handle_t ia;  /**< IT_ADDR_PARAM_IA */
    it_pz_handle_t pz;  /**< IT_ADDR_PARAM_PZ */
    it_path_t path;     /**< IT_ADDR_PARAM_PATH */
} it_addr_param_t;

/* ===============================================================================================================
 * Connection establishment parameters
 * ============================================================================================================= */

/** @brief InfiniBand connection attributes (fields of the IB CM REQ message); unsigned int bit-fields as above. */
typedef struct {
    unsigned int remote_cm_timeout : 5;  /**< Remote CM Response Timeout. */
    unsigned int local_cm_timeout : 5;   /**< Local CM Response Timeout. */
    unsigned int retry_count : 3;        /**< Retry Count. */
    unsigned int rnr_retry_count : 3;    /**< RNR Retry Count. */
    unsigned int max_cm_retries : 4;     /**< Max CM Retries. */
    unsigned int local_ack_timeout : 5;  /**< Local ACK Timeout. */
} it_ib_conn_attributes_t;

/** @brief VIA connection attributes (none; the member only keeps the struct non-empty). */
typedef struct {
    void *unused;  /**< Unused; keeps the structure non-empty. */
} it_via_conn_attributes_t;

/** @brief iWARP connection attributes (none; the member only keeps the struct non-empty). */
typedef struct {
    void *unused;  /**< Unused; keeps the structure non-empty. */
} it_iwarp_conn_attributes_t;

/** @brief Transport-specific connection attributes of it_ep_connect. */
typedef union {
    it_ib_conn_attributes_t ib;        /**< InfiniBand variant. */
    it_via_conn_attributes_t via;      /**< VIA variant. */
    it_iwarp_conn_attributes_t iwarp;  /**< iWARP variant. */
} it_conn_attributes_t;

/** @brief Flags of it_ep_connect. */
typedef enum IT_ENUM_BASE {
    IT_CONNECT_FLAG_TWO_WAY = 0x0001,
    IT_CONNECT_FLAG_THREE_WAY = 0x0002,
    IT_CONNECT_SUPPRESS_IRD_ORD = 0x0004
} it_cn_est_flags_t;

/** @brief Parameters of an Endpoint (it_ep_query). */
typedef struct {
    it_ia_handle_t ia;                         /**< IT_EP_PARAM_IA */
    size_t spigot_id;                          /**< IT_EP_PARAM_SPIGOT */
    it_ep_state_t ep_state;                    /**< IT_EP_PARAM_STATE */
    it_transport_service_type_t service_type;  /**< IT_EP_PARAM_SERV_TYPE */
    it_path_t dst_path;                        /**< IT_EP_PARAM_PATH */
    it_pz_handle_t pz;                         /**< IT_EP_PARAM_PZ */
    it_evd_handle_t request_sevd;              /**< IT_EP_PARAM_REQ_SEVD */
    it_evd_handle_t recv_sevd;                 /**< IT_EP_PARAM_RECV_SEVD */
    it_evd_handle_t connect_sevd;              /**< IT_EP_PARAM_CONN_SEVD */
    it_ep_attributes_t attr;                   /**< Masks as documented in it_ep_attributes_t. */
} it_ep_param_t;

/** @brief Flags of it_ep_rc_create. */
typedef enum IT_ENUM_BASE {
    IT_EP_NO_FLAG = 0x00,
    IT_EP_REUSEADDR = 0x01,
    IT_EP_SRQ = 0x02
} it_ep_rc_creation_flags_t;

/* ===============================================================================================================
 * Event Dispatchers
 * ============================================================================================================= */

/** @brief it_evd_create threshold value that disables threshold notification. */
#define IT_THRESHOLD_DISABLE 0

/** @brief Flags of it_evd_create (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_EVD_DEQUEUE_NOTIFICATIONS = 0x01,
    IT_EVD_CREATE_FD = 0x02,
    IT_EVD_OVERFLOW_DEFAULT = 0x04,
    IT_EVD_OVERFLOW_NOTIFY = 0x08,
    IT_EVD_OVERFLOW_AUTO_RESET = 0x10
} it_evd_flags_t;

/** @brief Selects the it_evd_param_t members of it_evd_query and it_evd_modify (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_EVD_PARAM_ALL = 0x000001,
    IT_EVD_PARAM_IA = 0x000002,
    IT_EVD_PARAM_EVENT_NUMBER = 0x000004,
    IT_EVD_PARAM_FLAG = 0x000008,
    IT_EVD_PARAM_QUEUE_SIZE = 0x000010,
    IT_EVD_PARAM_THRESHOLD = 0x000020,
    IT_EVD_PARAM_AEVD_HANDLE = 0x000040,
    IT_EVD_PARAM_FD = 0x000080,
    IT_EVD_PARAM_BOUND = 0x000100,
    IT_EVD_PARAM_ENABLED = 0x000200,
    IT_EVD_PARAM_OVERFLOWED = 0x000400,
    IT_EVD_PARAM_CALLBACK = 0x000800
} it_evd_param_mask_t;

/** @brief Parameters of an Event Dispatcher. */
typedef struct {
    it_ia_handle_t ia;             /**< IT_EVD_PARAM_IA */
    it_event_type_t event_number;  /**< IT_EVD_PARAM_EVENT_NUMBER */
    it_evd_flags_t evd_flag;       /**< IT_EVD_PARAM_FLAG */
    size_t sevd_queue_size;        /**< IT_EVD_PARAM_QUEUE_SIZE */
    size_t sevd_threshold;         /**< IT_EVD_PARAM_THRESHOLD */
    it_evd_handle_t aevd;          /**< IT_EVD_PARAM_AEVD_HANDLE */
    int fd;                        /**< IT_EVD_PARAM_FD */
    it_boolean_t evd_bound;        /**< IT_EVD_PARAM_BOUND */
    it_boolean_t evd_enabled;      /**< IT_EVD_PARAM_ENABLED */
    it_boolean_t evd_overflowed;   /**< IT_EVD_PARAM_OVERFLOWED */
    it_boolean_t evd_callback;     /**< IT_EVD_PARAM_CALLBACK */
} it_evd_param_t;

/** @brief Callback attached to an EVD with it_evd_callback_attach. */
typedef void (*it_evd_callback_rtn_t)(IN it_evd_handle_t evd, IN void *arg);

/* ===============================================================================================================
 * Interfaces, listen points, protection zones, memory regions, SRQs and UD service requests
 * ============================================================================================================= */

/** @brief An Interface the implementation offers (it_interface_list). */
typedef struct {
    uint32_t major_version;              /**< Latest IT-API version the Interface supports. */
    uint32_t minor_version;              /**< Latest IT-API minor version supported. */
    it_transport_type_t transport_type;  /**< Transport of the Interface or IA. */
    char name[IT_INTERFACE_NAME_SIZE];   /**< NUL-terminated name for it_ia_create. */
} it_interface_t;

/** @brief Flags of it_listen_create. */
typedef enum IT_ENUM_BASE {
    IT_LISTEN_NO_FLAG = 0x0000,
    IT_LISTEN_CONN_QUAL_INPUT = 0x0001,   /**< Listen on the given qualifier instead of choosing one. */
    IT_LISTEN_SUPPRESS_IRD_ORD = 0x0002
} it_listen_flags_t;

/** @brief Selects the it_listen_param_t members of it_listen_query (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_LISTEN_PARAM_ALL = 0x0001,
    IT_LISTEN_PARAM_IA_HANDLE = 0x0002,
    IT_LISTEN_PARAM_SPIGOT_ID = 0x0004,
    IT_LISTEN_PARAM_CONNECT_EVD = 0x0008,
    IT_LISTEN_PARAM_CONN_QUAL = 0x0010
} it_listen_param_mask_t;

/** @brief Parameters of a listen point. */
typedef struct {
    it_ia_handle_t ia_handle;     /**< IT_LISTEN_PARAM_IA_HANDLE */
    size_t spigot_id;             /**< IT_LISTEN_PARAM_SPIGOT_ID */
    it_evd_handle_t connect_evd;  /**< IT_LISTEN_PARAM_CONNECT_EVD */
    it_conn_qual_t connect_qual;  /**< IT_LISTEN_PARAM_CONN_QUAL */
} it_listen_param_t;

/** @brief Selects the it_lmr_param_t members of it_lmr_query and it_lmr_modify (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_LMR_PARAM_ALL = 0x000001,
    IT_LMR_PARAM_IA = 0x000002,
    IT_LMR_PARAM_PZ = 0x000004,
    IT_LMR_PARAM_ADDR = 0x000008,
    IT_LMR_PARAM_LENGTH = 0x000010,
    IT_LMR_PARAM_MEM_PRIV = 0x000020,
    IT_LMR_PARAM_FLAG = 0x000040,
    IT_LMR_PARAM_SHARED_ID = 0x000080,
    IT_LMR_PARAM_RMR_CONTEXT = 0x000100,
    IT_LMR_PARAM_ACTUAL_ADDR = 0x000200,
    IT_LMR_PARAM_ACTUAL_LENGTH = 0x000400,
    IT_LMR_PARAM_ADDR_MODE = 0x000800,
    IT_LMR_PARAM_LINKED = 0x001000,
    IT_LMR_PARAM_IOBL_NUM_ELTS = 0x002000,
    IT_LMR_PARAM_IOBL_TYPE = 0x004000
} it_lmr_param_mask_t;

/** @brief Parameters of a Local Memory Region. */
typedef struct {
    it_ia_handle_t ia;             /**< IT_LMR_PARAM_IA */
    it_pz_handle_t pz;             /**< IT_LMR_PARAM_PZ */
    void *addr;                    /**< IT_LMR_PARAM_ADDR */
    it_length_t length;            /**< IT_LMR_PARAM_LENGTH */
    it_mem_priv_t privs;           /**< IT_LMR_PARAM_MEM_PRIV */
    it_lmr_flag_t flags;           /**< IT_LMR_PARAM_FLAG */
    uint32_t shared_id;            /**< IT_LMR_PARAM_SHARED_ID */
    it_rmr_context_t rmr_context;  /**< IT_LMR_PARAM_RMR_CONTEXT */
    void *actual_addr;             /**< IT_LMR_PARAM_ACTUAL_ADDR */
    it_length_t actual_length;     /**< IT_LMR_PARAM_ACTUAL_LENGTH */
    it_addr_mode_t addr_mode;      /**< IT_LMR_PARAM_ADDR_MODE */
    it_boolean_t linked;           /**< IT_LMR_PARAM_LINKED */
    size_t iobl_num_elts;          /**< IT_LMR_PARAM_IOBL_NUM_ELTS */
    it_iobl_type_t iobl_type;      /**< IT_LMR_PARAM_IOBL_TYPE */
} it_lmr_param_t;

/** @brief Selects the it_pz_param_t members of it_pz_query (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_PZ_PARAM_ALL = 0x01,
    IT_PZ_PARAM_IA = 0x02
} it_pz_param_mask_t;

/** @brief Parameters of a Protection Zone. */
typedef struct {
    it_ia_handle_t ia;  /**< IT_PZ_PARAM_IA */
} it_pz_param_t;

/** @brief Selects the it_rmr_param_t members of it_rmr_query (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_RMR_PARAM_ALL = 0x000001,
    IT_RMR_PARAM_IA = 0x000002,
    IT_RMR_PARAM_PZ = 0x000004,
    IT_RMR_PARAM_LINKED = 0x000008,
    IT_RMR_PARAM_BOUND = 0x000008,   /**< v1.0 name of IT_RMR_PARAM_LINKED. */
    IT_RMR_PARAM_LMR = 0x000010,
    IT_RMR_PARAM_ADDR = 0x000020,
    IT_RMR_PARAM_LENGTH = 0x000040,
    IT_RMR_PARAM_MEM_PRIV = 0x000080,
    IT_RMR_PARAM_RMR_CONTEXT = 0x000100,
    IT_RMR_PARAM_TYPE = 0x000200,
    IT_RMR_PARAM_ADDR_MODE = 0x000400
} it_rmr_param_mask_t;

/** @brief Parameters of a Remote Memory Region; the third member is @c bound under v1.0 bindings, else @c linked. */
typedef struct {
    it_ia_handle_t ia;  /**< IT_RMR_PARAM_IA */
    it_pz_handle_t pz;  /**< IT_RMR_PARAM_PZ */
#ifdef ITAPI_ENABLE_V10_BINDINGS
    it_boolean_t bound;  /**< IT_RMR_PARAM_BOUND */
#else
    it_boolean_t linked;  /**< IT_RMR_PARAM_LINKED */
#endif
    it_lmr_handle_t lmr;           /**< IT_RMR_PARAM_LMR */
    void *addr;                    /**< IT_RMR_PARAM_ADDR */
    it_length_t length;            /**< IT_RMR_PARAM_LENGTH */
    it_mem_priv_t privs;           /**< IT_RMR_PARAM_MEM_PRIV */
    it_rmr_context_t rmr_context;  /**< IT_RMR_PARAM_RMR_CONTEXT */
    it_rmr_type_t type;            /**< IT_RMR_PARAM_TYPE */
    it_addr_mode_t addr_mode;      /**< IT_RMR_PARAM_ADDR_MODE */
} it_rmr_param_t;

/** @brief Flags of it_socket_convert. */
typedef enum IT_ENUM_BASE {
    IT_SC_DEFAULT = 0x0000,
    IT_SC_NO_REQ_REP = 0x0001  /**< The peers skip the MPA request/reply exchange. */
} it_sc_flags_t;

/** @brief Selects the it_srq_param_t members of it_srq_query and it_srq_modify (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_SRQ_PARAM_ALL = 0x000001,
    IT_SRQ_PARAM_IA = 0x000002,
    IT_SRQ_PARAM_PZ = 0x000004,
    IT_SRQ_PARAM_MAX_RECV_DTO = 0x000008,
    IT_SRQ_PARAM_MAX_RECV_SEG = 0x000010,
    IT_SRQ_PARAM_LOW_WATERMARK = 0x000020
} it_srq_param_mask_t;

/** @brief Parameters of a Shared Receive Queue. */
typedef struct {
    it_ia_handle_t ia;     /**< IT_SRQ_PARAM_IA */
    it_pz_handle_t pz;     /**< IT_SRQ_PARAM_PZ */
    size_t max_recv_dtos;  /**< IT_SRQ_PARAM_MAX_RECV_DTO */
    size_t max_recv_segs;  /**< IT_SRQ_PARAM_MAX_RECV_SEG */
    size_t low_watermark;  /**< IT_SRQ_PARAM_LOW_WATERMARK */
} it_srq_param_t;

/** @brief Selects the it_ud_svc_req_param_t members of it_ud_service_request_handle_query (bit mask). */
typedef enum IT_ENUM_BASE {
    IT_UD_PARAM_ALL = 0x00000001,
    IT_UD_PARAM_IA_HANDLE = 0x00000002,
    IT_UD_PARAM_REQ_ID = 0x00000004,
    IT_UD_PARAM_REPLY_EVD = 0x00000008,
    IT_UD_PARAM_CONN_QUAL = 0x00000010,
    IT_UD_PARAM_DEST_PATH = 0x00000020,
    IT_UD_PARAM_PRIV_DATA = 0x00000040,
    IT_UD_PARAM_PRIV_DATA_LENGTH = 0x00000080
} it_ud_svc_req_param_mask_t;

/** @brief Parameters of a UD service request handle. */
typedef struct {
    it_ia_handle_t ia;                             /**< IT_UD_PARAM_IA_HANDLE */
    uint32_t request_id;                           /**< IT_UD_PARAM_REQ_ID */
    it_evd_handle_t reply_evd;                     /**< IT_UD_PARAM_REPLY_EVD */
    it_conn_qual_t conn_qual;                      /**< IT_UD_PARAM_CONN_QUAL */
    it_path_t destination_path;                    /**< IT_UD_PARAM_DEST_PATH */
    unsigned char private_data[IT_MAX_PRIV_DATA];  /**< IT_UD_PARAM_PRIV_DATA */
    size_t private_data_length;                    /**< IT_UD_PARAM_PRIV_DATA_LENGTH */
} it_ud_svc_req_param_t;

/** @brief Atomic operation of it_post_atomic. */
typedef enum IT_ENUM_BASE {
    IT_COMPARE_AND_SWAP,
    IT_FETCH_AND_ADD
} it_atomic_op_t;

/* ===============================================================================================================
 * Functions: Interfaces and Interface Adapters
 * ============================================================================================================= */

/** @brief List the Interfaces the implementation offers. */
void it_interface_list(OUT it_interface_t *interfaces, IN OUT size_t *num_interfaces,
                       IN OUT size_t *total_interfaces);

/** @brief Open an Interface Adapter by name, asking for an IT-API version. */
it_status_t it_ia_create(IN const char *name, IN uint32_t major_version, IN uint32_t minor_version,
                         OUT it_ia_handle_t *ia_handle);

/** @brief Close an Interface Adapter. */
it_status_t it_ia_free(IN it_ia_handle_t ia_handle);

/** @brief Return the attributes of an Interface Adapter (release with it_ia_info_free). */
it_status_t it_ia_query(IN it_ia_handle_t ia_handle, OUT it_ia_info_t **ia_info);

/** @brief Release attributes returned by it_ia_query. */
void it_ia_info_free(IN it_ia_info_t *ia_info);

/* ===============================================================================================================
 * Functions: handles and consumer contexts
 * ============================================================================================================= */

/** @brief Tell which kind of object a handle refers to. */
it_status_t it_get_handle_type(IN it_handle_t handle, OUT it_handle_type_enum_t *type_of_handle);

/** @brief Read the consumer context attached to a handle. */
it_status_t it_get_consumer_context(IN it_handle_t handle, OUT it_context_t *context);

/** @brief Attach a consumer context to a handle. */
it_status_t it_set_consumer_context(IN it_handle_t handle, IN it_context_t context);

/* ===============================================================================================================
 * Functions: addresses, paths and byte order
 * ============================================================================================================= */

/** @brief Find the paths from a local spigot to a remote network address. */
it_status_t it_get_pathinfo(IN it_ia_handle_t ia_handle, IN size_t spigot_id, IN const it_net_addr_t *net_addr,
                            IN OUT size_t *num_paths, OUT size_t *total_paths, OUT it_path_t *paths);

/** @brief Convert a network address to another address type. */
it_status_t it_convert_net_addr(IN const it_net_addr_t *source_addr, IN it_net_addr_type_t addr_type,
                                OUT it_net_addr_t *destination_addr);

/** @brief Convert a 64-bit value from host to network (big-endian) byte order. */
uint64_t it_hton64(uint64_t hostint);

/** @brief Convert a 64-bit value from network (big-endian) to host byte order. */
uint64_t it_ntoh64(uint64_t netint);

/** @brief Make the remote address of a byte in an absolutely addressed region. */
it_rdma_addr_t it_make_rdma_addr_absolute(void *addr);

/** @brief Make the remote address of a byte in a relatively addressed region. */
it_rdma_addr_t it_make_rdma_addr_relative(it_length_t offset);

/* ===============================================================================================================
 * Functions: Address Handles
 * ============================================================================================================= */

/** @brief Create an Address Handle for a UD destination. */
it_status_t it_address_handle_create(IN it_pz_handle_t pz_handle, IN const it_path_t *destination_path,
                                     IN it_ah_flags_t ah_flags, OUT it_addr_handle_t *addr_handle);

/** @brief Destroy an Address Handle. */
it_status_t it_address_handle_free(IN it_addr_handle_t addr_handle);

/** @brief Change parameters of an Address Handle. */
it_status_t it_address_handle_modify(IN it_addr_handle_t addr_handle, IN it_addr_param_mask_t mask,
                                     IN const it_addr_param_t *params);

/** @brief Read parameters of an Address Handle. */
it_status_t it_address_handle_query(IN it_addr_handle_t addr_handle, IN it_addr_param_mask_t mask,
                                    OUT it_addr_param_t *params);

/* ===============================================================================================================
 * Functions: Protection Zones
 * ============================================================================================================= */

/** @brief Create a Protection Zone. */
it_status_t it_pz_create(IN it_ia_handle_t ia_handle, OUT it_pz_handle_t *pz_handle);

/** @brief Destroy a Protection Zone. */
it_status_t it_pz_free(IN it_pz_handle_t pz_handle);

/** @brief Read parameters of a Protection Zone. */
it_status_t it_pz_query(IN it_pz_handle_t pz_handle, IN it_pz_param_mask_t mask, OUT it_pz_param_t *params);

/* ===============================================================================================================
 * Functions: Event Dispatchers
 * ============================================================================================================= */

/** @brief Create a simple EVD for one event stream, or an aggregate EVD (IT_AEVD_NOTIFICATION_EVENT_STREAM). */
it_status_t it_evd_create(IN it_ia_handle_t ia_handle, IN it_event_type_t event_number, IN it_evd_flags_t evd_flag,
                          IN size_t sevd_queue_size, IN size_t sevd_threshold, IN it_evd_handle_t aevd_handle,
                          OUT it_evd_handle_t *evd_handle, OUT int *fd);

/** @brief Destroy an EVD. */
it_status_t it_evd_free(IN it_evd_handle_t evd_handle);

/** @brief Change parameters of an EVD. */
it_status_t it_evd_modify(IN it_evd_handle_t evd_handle, IN it_evd_param_mask_t mask,
                          IN const it_evd_param_t *params);

/** @brief Read parameters of an EVD. */
it_status_t it_evd_query(IN it_evd_handle_t evd_handle, IN it_evd_param_mask_t mask, OUT it_evd_param_t *params);

/** @brief Take the next event from an EVD without waiting (IT_ERR_QUEUE_EMPTY when there is none). */
it_status_t it_evd_dequeue(IN it_evd_handle_t evd_handle, OUT it_event_t *event);

/** @brief Wait up to timeout microseconds for the next event of an EVD. */
it_status_t it_evd_wait(IN it_evd_handle_t evd_handle, IN uint64_t timeout, OUT it_event_t *event,
                        OUT size_t *nmore);

/** @brief Post a software event to an EVD. */
it_status_t it_evd_post_se(IN it_evd_handle_t evd_handle, IN const void *event);

/** @brief Have a function called when an EVD has events. */
it_status_t it_evd_callback_attach(IN it_evd_handle_t evd_handle, IN it_evd_callback_rtn_t callback, IN void *arg);

/** @brief Remove the callback of an EVD. */
it_status_t it_evd_callback_detach(IN it_evd_handle_t evd_handle);

/* ===============================================================================================================
 * Functions: Endpoints
 * ============================================================================================================= */

/** @brief Create a Reliable Connected Endpoint. */
it_status_t it_ep_rc_create(IN it_pz_handle_t pz_handle, IN it_evd_handle_t request_sevd_handle,
                            IN it_evd_handle_t recv_sevd_handle, IN it_evd_handle_t connect_sevd_handle,
                            IN it_ep_rc_creation_flags_t flags, IN const it_ep_attributes_t *ep_attr,
                            OUT it_ep_handle_t *ep_handle);

/** @brief Create an Unreliable Datagram Endpoint. */
it_status_t it_ep_ud_create(IN it_pz_handle_t pz_handle, IN it_evd_handle_t request_sevd_handle,
                            IN it_evd_handle_t recv_sevd_handle, IN const it_ep_attributes_t *ep_attr,
                            IN size_t spigot_id, OUT it_ep_handle_t *ep_handle);

/** @brief Destroy an Endpoint. */
it_status_t it_ep_free(IN it_ep_handle_t ep_handle);

/** @brief Change attributes of an Endpoint. */
it_status_t it_ep_modify(IN it_ep_handle_t ep_handle, IN it_ep_param_mask_t mask,
                         IN const it_ep_attributes_t *ep_attr);

/** @brief Read parameters of an Endpoint. */
it_status_t it_ep_query(IN it_ep_handle_t ep_handle, IN it_ep_param_mask_t mask, OUT it_ep_param_t *params);

/** @brief Return a nonoperational Endpoint to the unconnected state. */
it_status_t it_ep_reset(IN it_ep_handle_t ep_handle);

/* ===============================================================================================================
 * Functions: connection management
 * ============================================================================================================= */

/** @brief Listen for connection and UD service requests on a connection qualifier. */
it_status_t it_listen_create(IN it_ia_handle_t ia_handle, IN size_t spigot_id, IN it_evd_handle_t connect_evd,
                             IN it_listen_flags_t flags, IN OUT it_conn_qual_t *conn_qual,
                             OUT it_listen_handle_t *listen_handle);

/** @brief Stop listening. */
it_status_t it_listen_free(IN it_listen_handle_t listen_handle);

/** @brief Read parameters of a listen point. */
it_status_t it_listen_query(IN it_listen_handle_t listen_handle, IN it_listen_param_mask_t mask,
                            OUT it_listen_param_t *params);

/** @brief Connect an RC Endpoint to a remote listener (active side). */
it_status_t it_ep_connect(IN it_ep_handle_t ep_handle, IN const it_path_t *path,
                          IN const it_conn_attributes_t *conn_attr, IN const it_conn_qual_t *connect_qual,
                          IN it_cn_est_flags_t cn_est_flags, IN const unsigned char *private_data,
                          IN size_t private_data_length);

/** @brief Accept a connection request on an RC Endpoint (passive side), or accept the reply (three-way). */
it_status_t it_ep_accept(IN it_ep_handle_t ep_handle, IN it_cn_est_identifier_t cn_est_id,
                         IN const unsigned char *private_data, IN size_t private_data_length);

/** @brief Reject a connection request or a connection reply. */
it_status_t it_reject(IN it_cn_est_identifier_t cn_est_id, IN const unsigned char *private_data,
                      IN size_t private_data_length);

/** @brief Disconnect an RC Endpoint, or abort its connection establishment. */
it_status_t it_ep_disconnect(IN it_ep_handle_t ep_handle, IN const unsigned char *private_data,
                             IN size_t private_data_length);

/** @brief Hand a connection request over to the listener of another connection qualifier. */
it_status_t it_handoff(IN const it_conn_qual_t *conn_qual, IN size_t spigot_id, IN it_cn_est_identifier_t cn_est_id);

/** @brief Convert a connected TCP socket into an iWARP RC connection on an Endpoint. */
it_status_t it_socket_convert(IN int sd, IN it_ep_handle_t ep_handle, IN it_sc_flags_t flags,
                              IN const unsigned char *msg, IN size_t len);

/* ===============================================================================================================
 * Functions: UD service resolution
 * ============================================================================================================= */

/** @brief Create a request for the UD Endpoint serving a connection qualifier. */
it_status_t it_ud_service_request_handle_create(IN const it_conn_qual_t *conn_qual, IN it_evd_handle_t reply_evd,
                                                IN const it_path_t *destination_path,
                                                IN const unsigned char *private_data,
                                                IN size_t private_data_length,
                                                OUT it_ud_svc_req_handle_t *ud_svc_handle);

/** @brief Destroy a UD service request handle. */
it_status_t it_ud_service_request_handle_free(IN it_ud_svc_req_handle_t ud_svc_handle);

/** @brief Read parameters of a UD service request handle. */
it_status_t it_ud_service_request_handle_query(IN it_ud_svc_req_handle_t ud_svc_handle,
                                               IN it_ud_svc_req_param_mask_t mask,
                                               OUT it_ud_svc_req_param_t *ud_svc_handle_info);

/** @brief Send a UD service request. */
it_status_t it_ud_service_request(IN it_ud_svc_req_handle_t ud_svc_handle);

/** @brief Answer an incoming UD service request. */
it_status_t it_ud_service_reply(IN it_ud_svc_req_identifier_t ud_svc_req_id, IN it_ud_svc_req_status_t status,
                                IN it_remote_ep_info_t ep_info, IN const unsigned char *private_data,
                                IN size_t private_data_length);

/* ===============================================================================================================
 * Functions: Shared Receive Queues
 * ============================================================================================================= */

/** @brief Create a Shared Receive Queue. */
it_status_t it_srq_create(IN it_pz_handle_t pz_handle, IN size_t max_recv_segments, IN size_t max_recv_dtos,
                          OUT it_srq_handle_t *srq_handle);

/** @brief Destroy a Shared Receive Queue. */
it_status_t it_srq_free(IN it_srq_handle_t srq_handle);

/** @brief Change parameters of a Shared Receive Queue. */
it_status_t it_srq_modify(IN it_srq_handle_t srq_handle, IN it_srq_param_mask_t mask,
                          IN const it_srq_param_t *params);

/** @brief Read parameters of a Shared Receive Queue. */
it_status_t it_srq_query(IN it_srq_handle_t srq_handle, IN it_srq_param_mask_t mask, OUT it_srq_param_t *params);

/* ===============================================================================================================
 * Functions: Local Memory Regions
 * ============================================================================================================= */

/** @brief Register memory as an LMR (v1.0 form; it_lmr_create under v1.0 bindings). */
it_status_t it_lmr_create10(IN it_pz_handle_t pz_handle, IN void *addr, IN it_length_t length,
                            IN it_mem_priv_t privs, IN it_lmr_flag_t flags, IN uint32_t shared_id,
                            OUT it_lmr_handle_t *lmr_handle, IN OUT it_rmr_context_t *rmr_context);

/** @brief Register memory as an LMR with an addressing mode (v2.0 form; it_lmr_create under v2.0 bindings). */
it_status_t it_lmr_create20(IN it_pz_handle_t pz_handle, IN void *addr, IN it_length_t length,
                            IN it_addr_mode_t addr_mode, IN it_mem_priv_t privs, IN it_lmr_flag_t flags,
                            IN uint32_t shared_id, OUT it_lmr_handle_t *lmr_handle,
                            IN OUT it_rmr_context_t *rmr_context);

/** @brief Register memory or an I/O buffer list as an LMR (v2.1 form; it_lmr_create under v2.1 bindings). */
it_status_t it_lmr_create21(IN it_pz_handle_t pz_handle, IN void *addr, IN it_iobl_t *iobl, IN it_length_t length,
                            IN it_addr_mode_t addr_mode, IN it_mem_priv_t privs, IN it_lmr_flag_t flags,
                            IN uint32_t shared_id, OUT it_lmr_handle_t *lmr_handle,
                            IN OUT it_rmr_context_t *rmr_context);

/** @brief Create an LMR without memory, to be linked later with it_lmr_link. */
it_status_t it_lmr_create_unlinked(IN it_pz_handle_t pz_handle, IN size_t iobl_num_elts, IN it_lmr_flag_t flags,
                                   IN uint32_t shared_id, OUT it_lmr_handle_t *lmr_handle);

/** @brief Destroy an LMR. */
it_status_t it_lmr_free(IN it_lmr_handle_t lmr_handle);

/** @brief Change parameters of an LMR. */
it_status_t it_lmr_modify(IN it_lmr_handle_t lmr_handle, IN it_lmr_param_mask_t mask,
                          IN const it_lmr_param_t *params);

/** @brief Read parameters of an LMR. */
it_status_t it_lmr_query(IN it_lmr_handle_t lmr_handle, IN it_lmr_param_mask_t mask, OUT it_lmr_param_t *params);

/** @brief Post a work request linking memory to an unlinked LMR. */
it_status_t it_lmr_link(IN it_lmr_handle_t lmr_handle, IN const void *addr, IN const it_iobl_t *iobl,
                        IN it_length_t length, IN it_addr_mode_t addr_mode, IN it_mem_priv_t privs,
                        IN it_ep_handle_t ep_handle, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                        OUT it_rmr_context_t *rmr_context);

/** @brief Post a work request unlinking the memory of an LMR. */
it_status_t it_lmr_unlink(IN it_lmr_handle_t lmr_handle, IN it_ep_handle_t ep_handle, IN it_dto_cookie_t cookie,
                          IN it_dto_flags_t dto_flags);

/** @brief Make data written by RDMA Reads visible to the CPU (v1.0 name it_lmr_sync_rdma_read). */
it_status_t it_lmr_flush_to_mem(IN const it_lmr_triplet_t *local_segments, IN size_t num_segments);

/** @brief Make CPU writes visible to RDMA (v1.0 name it_lmr_sync_rdma_write). */
it_status_t it_lmr_refresh_from_mem(IN const it_lmr_triplet_t *local_segments, IN size_t num_segments);

/** @brief Map virtual memory to I/O addresses for an I/O buffer list (privileged consumers). */
it_status_t it_mem_map(IN it_ia_handle_t ia_handle, IN void *vaddr, IN uint64_t aspace_id, IN size_t len,
                       OUT it_io_addr_t *io_addr, OUT size_t *mapped_len);

/** @brief Undo it_mem_map. */
it_status_t it_mem_unmap(IN it_ia_handle_t ia_handle, IN it_io_addr_t io_addr, IN size_t mapped_len);

/* ===============================================================================================================
 * Functions: Remote Memory Regions (memory windows)
 * ============================================================================================================= */

/** @brief Create an RMR (v1.0 form; it_rmr_create under v1.0 bindings). */
it_status_t it_rmr_create10(IN it_pz_handle_t pz_handle, OUT it_rmr_handle_t *rmr_handle);

/** @brief Create an RMR of a type (v2.0 form; it_rmr_create under v2.0 and v2.1 bindings). */
it_status_t it_rmr_create20(IN it_pz_handle_t pz_handle, IN it_rmr_type_t rmr_type, OUT it_rmr_handle_t *rmr_handle);

/** @brief Destroy an RMR. */
it_status_t it_rmr_free(IN it_rmr_handle_t rmr_handle);

/** @brief Read parameters of an RMR. */
it_status_t it_rmr_query(IN it_rmr_handle_t rmr_handle, IN it_rmr_param_mask_t mask, OUT it_rmr_param_t *params);

/** @brief Post a work request binding an RMR to part of an LMR (v1.0 form; it_rmr_bind under v1.0 bindings). */
it_status_t it_rmr_bind10(IN it_rmr_handle_t rmr_handle, IN it_lmr_handle_t lmr_handle, IN void *addr,
                          IN it_length_t length, IN it_mem_priv_t privs, IN it_ep_handle_t ep_handle,
                          IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags, OUT it_rmr_context_t *rmr_context);

/** @brief Post a work request linking an RMR to part of an LMR (it_rmr_bind under v2.0 and v2.1 bindings). */
it_status_t it_rmr_link(IN it_rmr_handle_t rmr_handle, IN it_lmr_handle_t lmr_handle, IN void *addr,
                        IN it_length_t length, IN it_addr_mode_t addr_mode, IN it_mem_priv_t privs,
                        IN it_ep_handle_t ep_handle, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                        OUT it_rmr_context_t *rmr_context);

/** @brief Post a work request unlinking an RMR (v1.0 name it_rmr_unbind). */
it_status_t it_rmr_unlink(IN it_rmr_handle_t rmr_handle, IN it_ep_handle_t ep_handle, IN it_dto_cookie_t cookie,
                          IN it_dto_flags_t dto_flags);

/* ===============================================================================================================
 * Functions: data transfer operations
 * ============================================================================================================= */

/** @brief Post a Send on a connected Endpoint. */
it_status_t it_post_send(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                         IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags);

/** @brief Post a Send that also invalidates a remote steering tag (Send with Invalidate). */
it_status_t it_post_send_and_unlink(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                                    IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                                    IN it_rmr_context_t rmr_context);

/** @brief Post a Send on a UD Endpoint to a datagram destination. */
it_status_t it_post_sendto(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                           IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                           IN const it_dg_remote_ep_addr_t *remote_ep_addr);

/** @brief Post a Receive on an RC Endpoint or a Shared Receive Queue. */
it_status_t it_post_recv(IN it_handle_t handle, IN const it_lmr_triplet_t *local_segments, IN size_t num_segments,
                         IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags);

/** @brief Post a Receive on a UD Endpoint. */
it_status_t it_post_recvfrom(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                             IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags);

/** @brief Post an RDMA Read into local LMR segments. */
it_status_t it_post_rdma_read(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                              IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                              IN it_rdma_addr_t rdma_addr, IN it_rmr_context_t rmr_context);

/** @brief Post an RDMA Read into local RMR segments. */
it_status_t it_post_rdma_read_to_rmr(IN it_ep_handle_t ep_handle, IN const it_rmr_triplet_t *local_segments,
                                     IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                                     IN it_rdma_addr_t rdma_addr, IN it_rmr_context_t rmr_context);

/** @brief Post an RDMA Write from local LMR segments. */
it_status_t it_post_rdma_write(IN it_ep_handle_t ep_handle, IN const it_lmr_triplet_t *local_segments,
                               IN size_t num_segments, IN it_dto_cookie_t cookie, IN it_dto_flags_t dto_flags,
                               IN it_rdma_addr_t rdma_addr, IN it_rmr_context_t rmr_context);

/** @brief Post an atomic Compare-and-Swap or Fetch-and-Add. */
it_status_t it_post_atomic(IN it_ep_handle_t ep_handle, IN it_atomic_op_t op, IN uint64_t swap_or_add,
                           IN uint64_t compare, IN const it_lmr_triplet_t *result, IN it_dto_cookie_t cookie,
                           IN it_dto_flags_t dto_flags, IN it_rdma_addr_t rdma_addr,
                           IN it_rmr_context_t rmr_context);

#ifdef __cplusplus
}
#endif

#endif /* OPENRDMA_IT_API_H */
