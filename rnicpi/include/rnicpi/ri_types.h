/**
 * @file ri_types.h
 * @brief RNIC-PI basic types: ABI version, status codes, handles and enumerations.
 *
 * The RNIC Programming Interface (RNIC-PI) is the only contract between the generic access layers (kAL, uAL) and
 * vendor code (kVP modules, uVP libraries). It is a C ABI: plain structs with fixed-width fields, `ri_` names,
 * function tables that start with their size and ABI version. Two modes exist, as in the OpenRDMA architecture:
 * - **privileged mode (kPI)**: implemented by a kernel verbs provider (kVP) and called by the kAL;
 * - **non-privileged mode (uPI)**: implemented by a user verbs provider (uVP) and called by the uAL.
 *
 * Both modes share one verbs table (ri_verbs.h); a uVP completes privileged verbs through the ri_syscall upcall
 * (ri_syscall.h).
 */
#ifndef RNICPI_RI_TYPES_H
#define RNICPI_RI_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Major ABI version: a provider built for another major version is refused. */
#define RI_ABI_VERSION_MAJOR 1u
/** @brief Minor ABI version: grows when fields or operations are appended; older minors stay loadable. */
#define RI_ABI_VERSION_MINOR 10u
/** @brief Builds an ABI version word from a major and a minor version. */
#define RI_ABI_VERSION_MAKE(major, minor) ((uint32_t)(((major) << 16) | (minor)))
/** @brief The ABI version word this header describes. */
#define RI_ABI_VERSION RI_ABI_VERSION_MAKE(RI_ABI_VERSION_MAJOR, RI_ABI_VERSION_MINOR)
/** @brief Extracts the major version from an ABI version word. */
#define RI_ABI_MAJOR(v) ((uint32_t)(v) >> 16)
/** @brief Extracts the minor version from an ABI version word. */
#define RI_ABI_MINOR(v) ((uint32_t)(v)&0xffffu)

/** @brief Longest name (RNIC instance, module, vendor) including the terminating NUL. */
#define RI_NAME_MAX 64u
/** @brief Longest network device name including the terminating NUL (the kernel's IFNAMSIZ). */
#define RI_NETDEV_MAX 16u

/**
 * @brief Status returned by every RNIC-PI call: 0 on success, otherwise a positive errno value.
 *
 * One vocabulary for every layer: the values are the Linux errno numbers, so `strerror()` describes them.
 */
typedef int ri_status_t;

/** @brief The error vocabulary of the RNIC-PI: positive Linux errno values. */
enum ri_errno {
    RI_OK = 0,               /**< Success. */
    RI_EPERM = 1,            /**< Operation not permitted (caller lacks the privilege). */
    RI_ENOENT = 2,           /**< No such object (unknown handle, name or file). */
    RI_EINTR = 4,            /**< Interrupted; the caller may retry. */
    RI_EIO = 5,              /**< Input/output or device failure. */
    RI_ENOEXEC = 8,          /**< Not a loadable module (bad file format). */
    RI_EBADF = 9,            /**< Bad file descriptor handed over. */
    RI_EAGAIN = 11,          /**< Resource temporarily unavailable: a queue is full; retry later. */
    RI_ENOMEM = 12,          /**< Out of memory. */
    RI_EACCES = 13,          /**< Access rights do not allow the operation. */
    RI_EFAULT = 14,          /**< Bad address (memory not mapped or not pinnable). */
    RI_EBUSY = 16,           /**< Object in use (children exist, module has users). */
    RI_EEXIST = 17,          /**< Object already exists. */
    RI_ENODEV = 19,          /**< No such RNIC. */
    RI_EINVAL = 22,          /**< Invalid argument. */
    RI_ENOTTY = 25,          /**< Unknown command (what ioctl() answers for a request the device does not know). */
    RI_ENOSPC = 28,          /**< Quota or table exhausted. */
    RI_ERANGE = 34,          /**< Value out of the supported range (depth, size, count). */
    RI_ENAMETOOLONG = 36,    /**< A name or path is too long. */
    RI_ENOSYS = 38,          /**< Function not implemented by this ABI version. */
    RI_EPROTO = 71,          /**< Protocol error (malformed message or frame). */
    RI_EOVERFLOW = 75,       /**< Value too large for the destination (buffer, queue). */
    RI_ELIBBAD = 80,         /**< Module is corrupted or violates the ABI contract. */
    RI_EMSGSIZE = 90,        /**< Message too long. */
    RI_EOPNOTSUPP = 95,      /**< Operation not supported by this provider or RNIC. */
    RI_EAFNOSUPPORT = 97,    /**< Address family not supported (an address of another family than the RNIC's). */
    RI_EADDRINUSE = 98,      /**< Address (and port) already in use by another listener or connection. */
    RI_EADDRNOTAVAIL = 99,   /**< Address not available: not the RNIC's, or not reachable through its netdev. */
    RI_ENETUNREACH = 101,    /**< No route to the network (or the route discards the traffic). */
    RI_ECONNABORTED = 103,   /**< Connection aborted on this side (a Terminate, or the QP went to ERROR). */
    RI_ECONNRESET = 104,     /**< Connection reset by the peer. */
    RI_EISCONN = 106,        /**< Already connected (or a connection is being set up). */
    RI_ENOTCONN = 107,       /**< Not connected. */
    RI_ETIMEDOUT = 110,      /**< Operation timed out. */
    RI_ECONNREFUSED = 111,   /**< Connection refused or rejected by the peer. */
    RI_EHOSTUNREACH = 113,   /**< No route to the host (an unreachable route, or no neighbour answers). */
    RI_ECANCELED = 125       /**< Operation canceled (flushed). */
};

/** @brief The two RNIC-PI modes of the OpenRDMA architecture. */
typedef enum ri_mode {
    RI_MODE_PRIVILEGED = 1,    /**< kPI: implemented by a kVP module, called by the kAL. */
    RI_MODE_NONPRIVILEGED = 2  /**< uPI: implemented by a uVP library, called by the uAL. */
} ri_mode_t;

/** @brief Opaque handle of an RNIC instance attached by a kVP (privileged mode only). */
typedef struct ri_instance *ri_instance_t;
/** @brief Opaque handle of an opened RNIC (the result of Open RNIC). */
typedef struct ri_rnic *ri_rnic_t;
/** @brief Opaque handle of a protection domain. */
typedef struct ri_pd *ri_pd_t;
/** @brief Opaque handle of a completion queue. */
typedef struct ri_cq *ri_cq_t;
/** @brief Opaque handle of a queue pair. */
typedef struct ri_qp *ri_qp_t;
/** @brief Opaque handle of a shared receive queue. */
typedef struct ri_srq *ri_srq_t;
/** @brief Opaque handle of a memory region (or an allocated, not yet registered, STag). */
typedef struct ri_mr *ri_mr_t;
/** @brief Opaque handle of a memory window. */
typedef struct ri_mw *ri_mw_t;

/** @brief A steering tag: 24-bit index plus 8-bit consumer key, as on the wire (RFC 5040). */
typedef uint32_t ri_stag_t;

/** @brief iWARP queue pair states (RDMAC verbs). */
typedef enum ri_qp_state {
    RI_QPS_IDLE = 0,       /**< Created or reset; not yet bound to an LLP stream. */
    RI_QPS_RTS = 1,        /**< Ready to send: in RDMA mode on a stream; all operations allowed. */
    RI_QPS_CLOSING = 2,    /**< Orderly close in progress: outstanding work completes, no new work. */
    RI_QPS_TERMINATE = 3,  /**< A Terminate message is being sent; the QP goes to error afterwards. */
    RI_QPS_ERROR = 4       /**< Error: posted and new work completes with flush errors. */
} ri_qp_state_t;

/** @brief Memory access rights of regions, windows and QPs (bit set). */
enum ri_access {
    RI_ACCESS_LOCAL_READ = 1u << 0,    /**< Local read (always granted for regions). */
    RI_ACCESS_LOCAL_WRITE = 1u << 1,   /**< Local write (receive buffers, RDMA Read sinks). */
    RI_ACCESS_REMOTE_READ = 1u << 2,   /**< Remote peer may RDMA Read. */
    RI_ACCESS_REMOTE_WRITE = 1u << 3,  /**< Remote peer may RDMA Write. */
    RI_ACCESS_MW_BIND = 1u << 4,       /**< Memory windows may be bound to the region. */
    RI_ACCESS_ZERO_BASED = 1u << 5,    /**< Tagged offsets start at zero (IB verbs extensions). */
    RI_ACCESS_REMOTE_ATOMIC = 1u << 6  /**< Remote atomic operations (RFC 7306). */
};

/** @brief Resource types named in asynchronous event records. */
typedef enum ri_resource_type {
    RI_RES_RNIC = 1,  /**< The RNIC itself (unaffiliated event). */
    RI_RES_QP = 2,    /**< A queue pair (affiliated event). */
    RI_RES_CQ = 3,    /**< A completion queue. */
    RI_RES_SRQ = 4,   /**< A shared receive queue. */
    RI_RES_MR = 5     /**< A memory region or STag. */
} ri_resource_type_t;

/** @brief Asynchronous event identifiers (the reason of an event record). */
typedef enum ri_event_id {
    RI_AE_QP_FATAL = 1,                /**< Unrecoverable QP error; QP moved to error. */
    RI_AE_QP_TERMINATE_RECEIVED = 2,   /**< The peer sent a Terminate message. */
    RI_AE_QP_TERMINATE_SENT = 3,       /**< A local error sent a Terminate message to the peer. */
    RI_AE_QP_LLP_CLOSED = 4,           /**< The LLP stream closed in order (peer FIN). */
    RI_AE_QP_LLP_RESET = 5,            /**< The LLP stream was reset or broken. */
    RI_AE_QP_LOCAL_ACCESS_ERROR = 6,   /**< An inbound operation violated local access rights. */
    RI_AE_QP_REMOTE_ACCESS_ERROR = 7,  /**< The peer reported an access violation. */
    RI_AE_QP_PROTOCOL_ERROR = 8,       /**< The peer sent a malformed frame. */
    RI_AE_QP_SQ_DRAINED = 9,           /**< The send queue drained during closing. */
    RI_AE_QP_LAST_WQE_REACHED = 10,    /**< Last receive of an SRQ-attached QP in error. */
    RI_AE_CQ_OVERFLOW = 11,            /**< A completion could not be queued; CQ in error. */
    RI_AE_SRQ_LIMIT_REACHED = 12,      /**< SRQ fell below its armed limit. */
    RI_AE_SRQ_ERROR = 13,              /**< SRQ in error. */
    RI_AE_RNIC_FATAL = 14,             /**< The RNIC failed; every resource is in error. */
    RI_AE_RNIC_LINK_DOWN = 15,         /**< The network link of the RNIC went down. */
    RI_AE_RNIC_LINK_UP = 16            /**< The network link of the RNIC came up. */
} ri_event_id_t;

/** @brief Log levels for the host's log upcall. */
typedef enum ri_log_level {
    RI_LOG_ERROR = 0,  /**< An operation failed. */
    RI_LOG_WARN = 1,   /**< Something unexpected that was handled. */
    RI_LOG_INFO = 2,   /**< Lifecycle events (load, attach, open). */
    RI_LOG_DEBUG = 3   /**< Per-object detail for troubleshooting. */
} ri_log_level_t;

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_TYPES_H */
