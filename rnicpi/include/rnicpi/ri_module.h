/**
 * @file ri_module.h
 * @brief Module registration: how a kVP module or uVP library presents itself to the access layers.
 *
 * A provider module is a shared object that exports exactly one symbol, ::RI_MODULE_ENTRY_SYMBOL, of type
 * ::ri_module_entry_fn. The host (kAL for a kVP, uAL for a uVP) calls it once after loading, passing its upcalls;
 * the module answers with a ri_module_t describing itself. The host refuses the module, naming the file and the
 * reason, when the entry symbol is missing, the major ABI version differs, the mode is not the one expected, or a
 * mandatory operation is NULL:
 * - both modes: open_rnic, close_rnic, query_rnic, alloc_pd, dealloc_pd, create_cq, destroy_cq, poll_cq,
 *   request_cq_notify, create_qp, query_qp, modify_qp, destroy_qp, post_send, post_recv, register_mr,
 *   deregister_mr, set_aeh, set_ceh;
 * - privileged mode (kVP) in addition: ri_module_t::attach and ri_module_t::detach.
 *
 * A module built for an older minor version has a shorter ri_module_t (its ri_module_t::size says so): the host
 * reads an operation appended later only when the size covers it, and treats it as absent otherwise.
 *
 * A kVP names its matching uVP library (ri_module_t::uvp_library); the kAL tells each uAL that path so the uAL can
 * load the uVP on demand when a consumer first uses the RNIC (OpenRDMA §3.4).
 */
#ifndef RNICPI_RI_MODULE_H
#define RNICPI_RI_MODULE_H

#include "rnicpi/ri_host.h"
#include "rnicpi/ri_types.h"
#include "rnicpi/ri_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Name of the one symbol every provider module exports. */
#define RI_MODULE_ENTRY_SYMBOL "ri_module_entry"

/** @brief Module flags (ri_module_t::flags). */
enum ri_module_flags {
    RI_MODULE_SOFTWARE = 1u << 0,  /**< The RNIC is implemented in software on the host stack. */
    RI_MODULE_NO_UVP = 1u << 1,    /**< Privileged mode only: consumers reach this RNIC through the kAL alone. */
    /**
     * An offloading RNIC (ABI 1.3): the kVP runs every QP's stream, as an adapter owns its connections. At the
     * RDMA-mode transition the kAL hands the socket to the kVP (ri_llp_params_t::fd) even for a consumer with a uVP,
     * never to the consumer, and it learns how each stream ended from the kVP's asynchronous events.
     */
    RI_MODULE_OFFLOAD = 1u << 2
};

/** @brief A provider module's self-description, returned by its entry function. */
typedef struct ri_module {
    uint32_t size;           /**< sizeof(ri_module_t) as the module was built. */
    uint32_t abi_version;    /**< ::RI_ABI_VERSION the module was built with. */
    uint32_t mode;           /**< One of ::ri_mode: a kVP is privileged, a uVP non-privileged. */
    uint32_t flags;          /**< A set of ::ri_module_flags. */
    const char *name;        /**< Provider name, e.g. "softrnic": the same for its kVP and uVP. */
    const char *vendor;      /**< Vendor name. */
    const char *version;     /**< Provider's own version text. */
    /**
     * kVP: file name (resolved in the host's provider directory) or absolute path of the matching uVP library;
     * NULL with ::RI_MODULE_NO_UVP. uVP: NULL.
     */
    const char *uvp_library;
    const ri_verbs_ops_t *verbs; /**< The verbs table; constant for the module's lifetime. */
    /**
     * @brief kVP: attach a new RNIC instance to a network address or netdev.
     * @param params Instance name, netdev or address, provider options.
     * @param instance Out: the instance handle used in ri_rnic_open_params_t::instance.
     */
    ri_status_t (*attach)(const ri_attach_params_t *params, ri_instance_t *instance);
    /** @brief kVP: detach an instance; the host has closed every open of it. */
    ri_status_t (*detach)(ri_instance_t instance);
    /** @brief Release module-wide state before the host unloads the module (may be NULL). */
    void (*fini)(void);
    /**
     * @brief kVP (ABI 1.4, may be NULL): run-time administration of one instance, as an adapter's management
     *        interface (devlink, ethtool private flags) is for a NIC. The kAL calls it for an administrator only
     *        (`rdmactl inject`, `rdmactl control`), never on a consumer's behalf, on a thread that may run verbs
     *        concurrently.
     * @param instance   An instance this module attached.
     * @param request    A JSON object text in the provider's own vocabulary, NUL-terminated.
     * @param reply      Out: a JSON object text (the state after the request), NUL-terminated; or why the request
     *                   was refused, in words, when the return is not 0.
     * @param reply_size Bytes at @p reply (at least 1024).
     * @return 0; ::RI_EINVAL for a request it does not understand; ::RI_EOPNOTSUPP for one it understands and does
     *         not implement.
     *
     * The empty request `{}` changes nothing and answers the instance's state: the host sends it for any caller,
     * not only an administrator (`rdmactl show`). Tunables (the attach options a provider reads at run time) are
     * listed in that reply's member `"tunables"`, an object with one member per option:
     * `{"NAME": {"value": V, "settable": true|false, "help": "TEXT"}}`; `settable` says whether the request
     * `{"NAME": V}` changes it at run time (otherwise only the attach options set it). A reply fits in 2047 bytes
     * (what the host passes on to rdmactl).
     */
    ri_status_t (*control)(ri_instance_t instance, const char *request, char *reply, size_t reply_size);
} ri_module_t;

/**
 * @brief Type of the entry symbol.
 * @param host   The host's upcalls; valid until ri_module_t::fini returns.
 * @param module Out: the module's description; must stay valid until the module is unloaded.
 * @return 0, or a status that makes the host refuse the module.
 */
typedef ri_status_t (*ri_module_entry_fn)(const ri_host_ops_t *host, const ri_module_t **module);

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_MODULE_H */
