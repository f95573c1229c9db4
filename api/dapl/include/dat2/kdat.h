/**
 * @file kdat.h
 * @brief The kernel DAT API (kDAPL 2.0) for consumer modules krdmad hosts: OpenRDMA's own header,
 *        source-compatible with the DAT collaboration's kdat.h (the same names, values, types and prototypes), since
 *        the distribution installs only the user headers.
 *
 * It is built on the distribution's <dat2/dat.h> and <dat2/dat_platform_specific.h>, exactly as <dat2/udat.h> is:
 * the kernel-only types are declared first (dat.h refers to them), then dat.h, then what follows it. A translation
 * unit includes kdat.h or udat.h, never both.
 *
 * Where it differs from the original, and why:
 * - krdmad is a user-space process playing the kernel's part: `__KERNEL__` is not defined, so the platform types are
 *   the user ones (the DAT_SOCK_ADDR of <sys/socket.h>). A "physical" address (DAT_PADDR) is an address of krdmad's
 *   own memory, the only memory a consumer module has.
 * - The original's `EXPORT_SYMBOL_NOVERS` (a Linux kernel macro) is left out: krdmad exports the dat_* entry points
 *   by its dynamic symbol list.
 * - The dat_* calls are functions krdmad exports (declared in dat.h and below); a module links nothing.
 */
#ifndef _KDAT_H_
#define _KDAT_H_

#include <dat2/kdat_config.h>

#include <dat2/dat_platform_specific.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Memory types of dat_lmr_kcreate (and, as a union of bits, of the provider's lmr_mem_types_supported). */
typedef enum dat_mem_type {
    /* Shared between udat and kdat */
    DAT_MEM_TYPE_VIRTUAL = 0x00,           /**< A range of the consumer's virtual memory. */
    DAT_MEM_TYPE_LMR = 0x01,               /**< The memory of another LMR. */
    /* kdat specific */
    DAT_MEM_TYPE_PHYSICAL = 0x10,          /**< An array of physical pages of one size. */
    DAT_MEM_TYPE_PLATFORM = 0x20,          /**< A platform-specific description. */
    DAT_MEM_TYPE_IA = 0x40,                /**< Memory of the interface adapter. */
    DAT_MEM_TYPE_BYPASS = 0x80,            /**< Memory that bypasses translation. */
    DAT_MEM_TYPE_PHYSICAL_VAR_PAGES = 0x100 /**< Physical pages of a given size. */
} DAT_MEM_TYPE;

/** @brief Handle types (kDAT has no CNO, so its numbering differs from udat's after RSP). */
typedef enum dat_handle_type {
    DAT_HANDLE_TYPE_CR,
    DAT_HANDLE_TYPE_EP,
    DAT_HANDLE_TYPE_EVD,
    DAT_HANDLE_TYPE_IA,
    DAT_HANDLE_TYPE_LMR,
    DAT_HANDLE_TYPE_PSP,
    DAT_HANDLE_TYPE_PZ,
    DAT_HANDLE_TYPE_RMR,
    DAT_HANDLE_TYPE_RSP,
    DAT_HANDLE_TYPE_SRQ,
    DAT_HANDLE_TYPE_CSP
#ifdef DAT_EXTENSIONS
    ,
    DAT_HANDLE_TYPE_EXTENSION_BASE
#endif
} DAT_HANDLE_TYPE;

/** @brief Fields of dat_evd_kquery. */
typedef enum dat_evd_param_mask {
    DAT_EVD_FIELD_IA_HANDLE = 0x01,
    DAT_EVD_FIELD_EVD_QLEN = 0x02,
    DAT_EVD_FIELD_UPCALL_POLICY = 0x04,
    DAT_EVD_FIELD_UPCALL = 0x08,
    DAT_EVD_FIELD_EVD_FLAGS = 0x10,
    DAT_EVD_FIELD_ALL = 0x1F
} DAT_EVD_PARAM_MASK;

/** @brief Fields of the provider attributes (dat_ia_query). */
typedef DAT_UINT64 DAT_PROVIDER_ATTR_MASK;

/** @brief Fields of dat_lmr_query. */
enum dat_lmr_param_mask {
    DAT_LMR_FIELD_IA_HANDLE = 0x001,
    DAT_LMR_FIELD_MEM_TYPE = 0x002,
    DAT_LMR_FIELD_REGION_DESC = 0x004,
    DAT_LMR_FIELD_LENGTH = 0x008,
    DAT_LMR_FIELD_PZ_HANDLE = 0x010,
    DAT_LMR_FIELD_MEM_PRIV = 0x020,
    DAT_LMR_FIELD_VA_TYPE = 0x040,
    DAT_LMR_FIELD_LMR_CONTEXT = 0x080,
    DAT_LMR_FIELD_RMR_CONTEXT = 0x100,
    DAT_LMR_FIELD_REGISTERED_SIZE = 0x200,
    DAT_LMR_FIELD_REGISTERED_ADDRESS = 0x400,
    DAT_LMR_FIELD_LMR_STATE = 0x800,
    DAT_LMR_FIELD_ALL = 0xFFF
};

#ifdef __cplusplus
}
#endif

#include <dat2/dat.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A consumer's cookie of an LMR operation. */
typedef DAT_CONTEXT DAT_LMR_COOKIE;

/** @brief When an EVD's upcall runs. */
typedef enum dat_upcall_policy {
    DAT_UPCALL_DISABLE = 0,          /**< Never: the consumer dequeues. */
    DAT_UPCALL_SINGLE_INSTANCE = 1,  /**< For every event, at most one upcall of the EVD at a time. */
    DAT_UPCALL_MANY = 100,           /**< For every event; upcalls of the EVD may overlap. */
    DAT_UPCALL_TEARDOWN = -1,        /**< Never again; the call returns once upcalls in progress have returned. */
    DAT_UPCALL_NORIFY = 2            /**< One upcall as a notification only (the original's spelling). */
} DAT_UPCALL_POLICY;

/** @brief An upcall: the consumer's instance data, the event, and whether more events are waiting. */
typedef void (*DAT_UPCALL_FUNC)(DAT_PVOID, const DAT_EVENT *, DAT_BOOLEAN);

/** @brief An upcall and its instance data. */
typedef struct dat_upcall_object {
    DAT_PVOID instance_data;     /**< Passed to the upcall. */
    DAT_UPCALL_FUNC upcall_func; /**< The upcall. */
} DAT_UPCALL_OBJECT;

/** @brief No upcall. */
#define DAT_UPCALL_NULL ((DAT_UPCALL_OBJECT){(DAT_PVOID)NULL, (DAT_UPCALL_FUNC)NULL})

/** @brief dat_evd_modify_upcall: keep the EVD's upcall object. */
#define DAT_UPCALL_SAME ((DAT_UPCALL_OBJECT *)NULL)

/** @brief Which events an upcall enabled by dat_evd_modify_upcall is invoked for. */
typedef enum dat_upcall_flag {
    DAT_UPCALL_INVOC_NEW = 0, /**< Events that arrive from now on. */
    DAT_UPCALL_INVOC_ANY = 1  /**< Every event on the EVD, those already queued too. */
} DAT_UPCALL_FLAG;

/** @brief What dat_evd_kquery reports. */
struct dat_evd_param {
    DAT_IA_HANDLE ia_handle;         /**< The IA. */
    DAT_COUNT evd_qlen;              /**< Queue length. */
    DAT_UPCALL_POLICY upcall_policy; /**< Upcall policy. */
    DAT_UPCALL_OBJECT upcall;        /**< Upcall. */
    DAT_EVD_FLAGS evd_flags;         /**< Event streams. */
};

/** @brief The original's short name of DAT_MEM_OPTIMIZE_FLAGS. */
#define DAT_MEM_OPT DAT_MEM_OPTIMIZE_FLAGS

/** @brief What a registration should optimise for. */
typedef enum dat_mem_optimize_flags {
    DAT_MEM_OPTIMIZE_DONT_CARE = 0x00,
    DAT_MEM_OPTIMIZE_IA = 0x01,
    DAT_MEM_OPTIMIZE_MIN_EXPOSURE = 0x02,
    DAT_MEM_OPTIMIZE_EXACT_EXPOSURE = 0x04
} DAT_MEM_OPTIMIZE_FLAGS;

/** @brief Physical pages of one given size (DAT_MEM_TYPE_PHYSICAL_VAR_PAGES). */
typedef struct dat_physical_var_pages {
    DAT_VLEN page_size; /**< Bytes per page. */
    void *pages;        /**< The page addresses. */
} DAT_PHYSICAL_VAR_PAGES;

/** @brief What an LMR is made of, by memory type. */
typedef union dat_region_description {
    DAT_PVOID for_va;                 /**< DAT_MEM_TYPE_VIRTUAL. */
    DAT_LMR_HANDLE for_lmr_handle;    /**< DAT_MEM_TYPE_LMR. */
    void *for_platform;               /**< DAT_MEM_TYPE_PLATFORM and DAT_MEM_TYPE_BYPASS. */
    DAT_PHYSICAL_VAR_PAGES for_array; /**< DAT_MEM_TYPE_PHYSICAL_VAR_PAGES. */
    DAT_PADDR *for_physical;          /**< DAT_MEM_TYPE_PHYSICAL: physical pages of the system page size. */
    DAT_PADDR for_ia;                 /**< DAT_MEM_TYPE_IA. */
} DAT_REGION_DESCRIPTION;

/** @brief An LMR's fast-registration state. */
typedef struct dat_lmr_state {
    DAT_BOOLEAN fmr_support; /**< Made by dat_lmr_allocate. */
    DAT_BOOLEAN bound;       /**< Memory is registered under it. */
} DAT_LMR_STATE;

/** @brief What dat_lmr_query reports. */
struct dat_lmr_param {
    DAT_IA_HANDLE ia_handle;
    DAT_MEM_TYPE mem_type;
    DAT_REGION_DESCRIPTION region_desc;
    DAT_VLEN length;
    DAT_PZ_HANDLE pz_handle;
    DAT_MEM_PRIV_FLAGS mem_priv;
    DAT_VA_TYPE va_type;
    DAT_LMR_CONTEXT lmr_context;
    DAT_RMR_CONTEXT rmr_context;
    DAT_VLEN registered_size;
    DAT_VADDR registered_address;
    DAT_LMR_STATE lmr_state; /**< kDAPL only. */
};

/** @brief The protection scope of an LMR made for fast registration. */
typedef enum dat_lmr_scope { DAT_LMR_SCOPE_EP, DAT_LMR_SCOPE_PZ, DAT_LMR_SCOPE_ANY } DAT_LMR_SCOPE;

/** @brief What dat_ia_query reports of the IA. */
struct dat_ia_attr {
    char adapter_name[DAT_NAME_MAX_LENGTH];
    char vendor_name[DAT_NAME_MAX_LENGTH];
    DAT_UINT32 hardware_version_major;
    DAT_UINT32 hardware_version_minor;
    DAT_UINT32 firmware_version_major;
    DAT_UINT32 firmware_version_minor;
    DAT_IA_ADDRESS_PTR ia_address_ptr;
    DAT_COUNT max_eps;
    DAT_COUNT max_dto_per_ep;
    DAT_COUNT max_rdma_read_per_ep_in;
    DAT_COUNT max_rdma_read_per_ep_out;
    DAT_COUNT max_evds;
    DAT_COUNT max_evd_qlen;
    DAT_COUNT max_iov_segments_per_dto;
    DAT_COUNT max_lmrs;
    DAT_SEG_LENGTH max_lmr_block_size;
    DAT_VADDR max_lmr_virtual_address;
    DAT_COUNT max_pzs;
    DAT_SEG_LENGTH max_message_size;
    DAT_SEG_LENGTH max_rdma_size;
    DAT_COUNT max_rmrs;
    DAT_VADDR max_rmr_target_address;
    DAT_COUNT max_srqs;
    DAT_COUNT max_ep_per_srq;
    DAT_COUNT max_recv_per_srq;
    DAT_COUNT max_iov_segments_per_rdma_read;
    DAT_COUNT max_iov_segments_per_rdma_write;
    DAT_COUNT max_rdma_read_in;
    DAT_COUNT max_rdma_read_out;
    DAT_BOOLEAN max_rdma_read_per_ep_in_guaranteed;
    DAT_BOOLEAN max_rdma_read_per_ep_out_guaranteed;
    DAT_BOOLEAN zb_supported;
    DAT_BOOLEAN reserved_lmr_supported; /**< kDAPL only. */
#ifdef DAT_EXTENSIONS
    DAT_EXTENSION extension_supported;
    DAT_COUNT extension_version;
#endif
    DAT_COUNT num_transport_attr;
    DAT_NAMED_ATTR *transport_attr;
    DAT_COUNT num_vendor_attr;
    DAT_NAMED_ATTR *vendor_attr;
};

#define DAT_IA_FIELD_IA_RESERVED_LMR_SUPPORTED UINT64_C(0x100000000)
#ifdef DAT_EXTENSIONS
#define DAT_IA_FIELD_IA_EXTENSION UINT64_C(0x200000000)
#define DAT_IA_FIELD_IA_EXTENSION_VERSION UINT64_C(0x400000000)
#endif
#define DAT_IA_FIELD_IA_NUM_TRANSPORT_ATTR UINT64_C(0x800000000)
#define DAT_IA_FIELD_IA_TRANSPORT_ATTR UINT64_C(0x1000000000)
#define DAT_IA_FIELD_IA_NUM_VENDOR_ATTR UINT64_C(0x2000000000)
#define DAT_IA_FIELD_IA_VENDOR_ATTR UINT64_C(0x4000000000)
#define DAT_IA_FIELD_ALL UINT64_C(0x7FFFFFFFFF)

#include <dat2/kdat_vendor_specific.h>

/** @brief What dat_ia_query reports of the provider (kDAT's variant: upcalls, interrupt safety, FMR). */
struct dat_provider_attr {
    char provider_name[DAT_NAME_MAX_LENGTH];
    DAT_UINT32 provider_version_major;
    DAT_UINT32 provider_version_minor;
    DAT_UINT32 dapl_version_major;
    DAT_UINT32 dapl_version_minor;
    DAT_MEM_TYPE lmr_mem_types_supported;
    DAT_IOV_OWNERSHIP iov_ownership_on_return;
    DAT_QOS dat_qos_supported;
    DAT_COMPLETION_FLAGS completion_flags_supported;
    DAT_BOOLEAN is_thread_safe;
    DAT_COUNT max_private_data_size;
    DAT_BOOLEAN supports_multipath;
    DAT_EP_CREATOR_FOR_PSP ep_creator;
    DAT_UPCALL_POLICY upcall_policy;
    DAT_UINT32 optimal_buffer_alignment;
    const DAT_BOOLEAN evd_stream_merging_supported[6][6];
    DAT_BOOLEAN srq_supported;
    DAT_COUNT srq_watermarks_supported;
    DAT_BOOLEAN srq_ep_pz_difference_supported;
    DAT_COUNT srq_info_supported;
    DAT_COUNT ep_recv_info_supported;
    DAT_BOOLEAN lmr_sync_req;
    DAT_BOOLEAN dto_async_return_guaranteed;
    DAT_BOOLEAN rdma_write_for_rdma_read_req;
    DAT_BOOLEAN rdma_read_lmr_rmr_context_exposure;
    DAT_RMR_SCOPE rmr_scope_supported;
    DAT_BOOLEAN is_interrupt_safe;
    DAT_BOOLEAN fmr_supported;
    DAT_LMR_SCOPE lmr_for_fmr_scope_supported;
    DAT_BOOLEAN ha_supported;
    DAT_HA_LB ha_loadbalancing;
    DAT_COUNT num_provider_specific_attr;
    DAT_NAMED_ATTR *provider_specific_attr;
};

#define DAT_PROVIDER_FIELD_PROVIDER_NAME UINT64_C(0x000000001)
#define DAT_PROVIDER_FIELD_PROVIDER_VERSION_MAJOR UINT64_C(0x000000002)
#define DAT_PROVIDER_FIELD_PROVIDER_VERSION_MINOR UINT64_C(0x000000004)
#define DAT_PROVIDER_FIELD_DAPL_VERSION_MAJOR UINT64_C(0x000000008)
#define DAT_PROVIDER_FIELD_DAPL_VERSION_MINOR UINT64_C(0x000000010)
#define DAT_PROVIDER_FIELD_LMR_MEM_TYPE_SUPPORTED UINT64_C(0x000000020)
#define DAT_PROVIDER_FIELD_IOV_OWNERSHIP UINT64_C(0x000000040)
#define DAT_PROVIDER_FIELD_DAT_QOS_SUPPORTED UINT64_C(0x000000080)
#define DAT_PROVIDER_FIELD_COMPLETION_FLAGS_SUPPORTED UINT64_C(0x000000100)
#define DAT_PROVIDER_FIELD_IS_THREAD_SAFE UINT64_C(0x000000200)
#define DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE UINT64_C(0x000000400)
#define DAT_PROVIDER_FIELD_SUPPORTS_MULTIPATH UINT64_C(0x000000800)
#define DAT_PROVIDER_FIELD_EP_CREATOR UINT64_C(0x000001000)
#define DAT_PROVIDER_FIELD_UPCALL_POLICY UINT64_C(0x000002000)
#define DAT_PROVIDER_FIELD_OPTIMAL_BUFFER_ALIGNMENT UINT64_C(0x000004000)
#define DAT_PROVIDER_FIELD_EVD_STREAM_MERGING_SUPPORTED UINT64_C(0x000008000)
#define DAT_PROVIDER_FIELD_SRQ_SUPPORTED UINT64_C(0x000010000)
#define DAT_PROVIDER_FIELD_SRQ_WATERMARKS_SUPPORTED UINT64_C(0x000020000)
#define DAT_PROVIDER_FIELD_SRQ_EP_PZ_DIFFERENCE_SUPPORTED UINT64_C(0x000040000)
#define DAT_PROVIDER_FIELD_SRQ_INFO_SUPPORTED UINT64_C(0x000080000)
#define DAT_PROVIDER_FIELD_EP_RECV_INFO_SUPPORTED UINT64_C(0x000100000)
#define DAT_PROVIDER_FIELD_LMR_SYNC_REQ UINT64_C(0x000200000)
#define DAT_PROVIDER_FIELD_DTO_ASYNC_RETURN_GUARANTEED UINT64_C(0x000400000)
#define DAT_PROVIDER_FIELD_RDMA_WRITE_FOR_RDMA_READ_REQ UINT64_C(0x000800000)
#define DAT_PROVIDER_FIELD_RDMA_READ_LMR_RMR_CONTEXT_EXPOSURE UINT64_C(0x001000000)
#define DAT_PROVIDER_FIELD_RMR_SCOPE_SUPPORTED UINT64_C(0x002000000)
#define DAT_PROVIDER_FIELD_IS_INTERRUPT_SAFE UINT64_C(0x004000000)
#define DAT_PROVIDER_FIELD_FMR_SUPPORTED UINT64_C(0x008000000)
#define DAT_PROVIDER_FIELD_LMR_FOR_FMR_SCOPE UINT64_C(0x010000000)
#define DAT_PROVIDER_FIELD_HA_SUPPORTED UINT64_C(0x020000000)
#define DAT_PROVIDER_FIELD_HA_LB UINT64_C(0x040000000)
#define DAT_PROVIDER_FIELD_NUM_PROVIDER_SPECIFIC_ATTR UINT64_C(0x080000000)
#define DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR UINT64_C(0x100000000)
#define DAT_PROVIDER_FIELD_ALL UINT64_C(0x1FFFFFFFF)
#define DAT_PROVIDER_FIELD_NONE UINT64_C(0x0)

/* The kernel-only calls. */

/** @brief Registers memory of any kernel memory type. */
extern DAT_RETURN DAT_API dat_lmr_kcreate(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN,
                                          DAT_PZ_HANDLE, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_MEM_OPTIMIZE_FLAGS,
                                          DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *, DAT_RMR_CONTEXT *, DAT_VLEN *,
                                          DAT_VADDR *);
/** @brief The length and alignment that register best for a memory type. */
extern DAT_RETURN DAT_API dat_ia_memtype_hint(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_VLEN, DAT_MEM_OPTIMIZE_FLAGS,
                                              DAT_VLEN *, DAT_VADDR *);
/** @brief An LMR's parameters. */
extern DAT_RETURN DAT_API dat_lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, DAT_LMR_PARAM *);
/** @brief An LMR for fast registration of up to N pages. */
extern DAT_RETURN DAT_API dat_lmr_allocate(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_COUNT, DAT_LMR_SCOPE, DAT_LMR_HANDLE *);
/** @brief Fast registration of pages under an allocated LMR, posted on an EP. */
extern DAT_RETURN DAT_API dat_lmr_fmr(DAT_LMR_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN,
                                      DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_EP_HANDLE, DAT_LMR_COOKIE,
                                      DAT_COMPLETION_FLAGS, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT);
/** @brief Invalidation of a fast-registered LMR, posted on an EP. */
extern DAT_RETURN DAT_API dat_lmr_invalidate(DAT_LMR_HANDLE, DAT_EP_HANDLE, DAT_LMR_COOKIE, DAT_COMPLETION_FLAGS);
/** @brief The IA's reserved LMR (all of memory). */
extern DAT_RETURN DAT_API dat_ia_reserved_lmr(DAT_IA_HANDLE, DAT_LMR_HANDLE *, DAT_LMR_CONTEXT *);
/** @brief Creates an EVD whose events reach an upcall (or, DAT_UPCALL_DISABLE, dat_evd_dequeue). */
extern DAT_RETURN DAT_API dat_evd_kcreate(DAT_IA_HANDLE, DAT_COUNT, DAT_UPCALL_POLICY, const DAT_UPCALL_OBJECT *,
                                          DAT_EVD_FLAGS, DAT_EVD_HANDLE *);
/** @brief Changes an EVD's upcall policy and upcall (DAT_UPCALL_SAME keeps it). */
extern DAT_RETURN DAT_API dat_evd_modify_upcall(DAT_EVD_HANDLE, DAT_UPCALL_POLICY, const DAT_UPCALL_OBJECT *,
                                                DAT_UPCALL_FLAG);

#ifdef __cplusplus
}
#endif

#endif /* _KDAT_H_ */
