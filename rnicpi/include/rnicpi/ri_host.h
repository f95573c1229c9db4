/**
 * @file ri_host.h
 * @brief Upcalls the access layers give to providers: logging, memory pinning (kAL) and ri_syscall (uAL).
 *
 * The host passes one ri_host_ops_t to the module's entry function. Upcalls made on behalf of an opened RNIC take
 * the ri_rnic_open_params_t::host_ctx of that open as their first argument, which tells the host whose address
 * space, quota and device connection the call is for.
 */
#ifndef RNICPI_RI_HOST_H
#define RNICPI_RI_HOST_H

#include <stddef.h>

#include "rnicpi/ri_syscall.h"
#include "rnicpi/ri_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Flags of ri_host_ops_t::vm_pin_range. */
enum ri_pin_flags {
    RI_PIN_WRITE = 1u << 0  /**< The RNIC will write to the range (receive buffers, remote-writable regions). */
};

/** @brief A pinned range, the result of ri_host_ops_t::vm_pin_range. */
typedef struct ri_pin {
    uint64_t pin_id;    /**< Host handle of the pin; pass to ri_host_ops_t::vm_unpin_range. */
    uint64_t addr;      /**< Page-aligned start of the pinned range. */
    uint64_t length;    /**< Page-aligned length of the pinned range. */
    uint32_t page_size; /**< Page size in bytes. */
    uint32_t reserved;  /**< Zero. */
} ri_pin_t;

/**
 * @brief The host's upcall table.
 *
 * Starts with its size and ABI version. In privileged mode the kAL fills ri_host_ops_t::vm_pin_range and ri_host_ops_t::vm_unpin_range and
 * leaves ri_host_ops_t::syscall NULL; in non-privileged mode the uAL fills ri_host_ops_t::syscall and leaves the pin upcalls NULL (a uVP pins
 * through the kAL by registering memory with ri_syscall).
 */
typedef struct ri_host_ops {
    uint32_t size;        /**< sizeof(ri_host_ops_t) as the host was built. */
    uint32_t abi_version; /**< ::RI_ABI_VERSION of the host. */
    /**
     * @brief Log a message through the host's logger.
     * @param level   One of ::ri_log_level.
     * @param module  Name of the calling module.
     * @param message NUL-terminated text without a trailing newline.
     */
    void (*log)(uint32_t level, const char *module, const char *message);
    /**
     * @brief ri_vm_pin_range (kPI): pin @p length bytes at @p addr in the address space of the opener.
     *
     * Overlapping pins by several RNICs pin once and unpin last; the pin counts against the opener's and the host's
     * limits (::RI_ENOSPC when exceeded, ::RI_EFAULT when the range is not mapped).
     */
    ri_status_t (*vm_pin_range)(void *host_ctx, uint64_t addr, uint64_t length, uint32_t flags, ri_pin_t *pin);
    /** @brief ri_vm_unpin_range (kPI): release a pin made by ri_host_ops_t::vm_pin_range. */
    ri_status_t (*vm_unpin_range)(void *host_ctx, uint64_t pin_id);
    /**
     * @brief ri_syscall (uPI): have a privileged verb executed by the kVP of the same RNIC.
     * @param host_ctx The uAL context given in ri_rnic_open_params_t::host_ctx (also for ::RI_OPEN_RNIC itself).
     * @param call     The request; its out fields are filled on return.
     * @return The kVP's status, or the host's own error (::RI_EPERM for a handle the caller does not own,
     *         ::RI_ENODEV when the kAL is gone).
     */
    ri_status_t (*syscall)(void *host_ctx, ri_syscall_t *call);
    /**
     * @brief ri_mem_charge (kPI): account @p bytes of memory the kVP allocates itself for the opener (the queue rings
     *        of a data path it runs on the opener's behalf), against the same limits as its pinned memory, so that
     *        no client makes the kAL hold memory charged to no one. ::RI_ENOSPC over a limit: allocate nothing.
     *
     * Added in ABI 1.5: a host built before has a smaller ri_host_ops_t::size, and a module must check the size
     * (RI_HOST_HAS(host, mem_charge)) before it calls it; a NULL entry means the host does not account.
     */
    ri_status_t (*mem_charge)(void *host_ctx, uint64_t bytes);
    /** @brief Releases @p bytes charged with ri_host_ops_t::mem_charge. */
    void (*mem_uncharge)(void *host_ctx, uint64_t bytes);
    /**
     * @brief ri_syscall without waiting (uPI): send a privileged request whose answer the uVP does not need, and
     *        return once it is on its way.
     *
     * For reports the data path makes from any thread, such as "this stream failed: move the kVP's QP to ERROR"
     * from a progress thread that must not sleep for a round trip. The kAL executes one host context's requests
     * in order, so a later ri_host_ops_t::syscall sees its effect. A refusal is logged by the host and changes
     * nothing else. Only ::RI_MODIFY_QP may be posted (the answer to a create, destroy, resize or reregistration
     * can carry memory for the process to lock or unlock), and it must ask for nothing back and pass no
     * descriptor: ri_syscall_t::result_cap, ri_syscall_t::priv_out_cap, ri_syscall_t::nfds_out_cap and
     * ri_syscall_t::nfds_in zero; ::RI_EINVAL otherwise. ::RI_ENODEV when the kAL is gone.
     *
     * Added in ABI 1.6: check RI_HOST_HAS(host, syscall_post) and use ri_host_ops_t::syscall without it.
     */
    ri_status_t (*syscall_post)(void *host_ctx, const ri_syscall_t *call);
} ri_host_ops_t;

/** @brief Whether host operations @p ops (a pointer) are new enough to have member @p field and it is set. */
#define RI_HOST_HAS(ops, field)                                                                                   \
    ((ops)->size >= offsetof(ri_host_ops_t, field) + sizeof((ops)->field) && (ops)->field != NULL)

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_HOST_H */
