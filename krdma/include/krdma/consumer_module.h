/**
 * @file consumer_module.h
 * @brief The C ABI of kernel consumer modules: shared objects krdmad loads from its configuration and starts in
 *        its own process, as an OS kernel loads a kernel RDMA consumer (a storage target, a kernel IT-API or kDAPL
 *        program).
 *
 * A module exports exactly one symbol, ::KRDMA_CONSUMER_MODULE_ENTRY_SYMBOL, a `const krdma_consumer_module_t`
 * defined with ::KRDMA_CONSUMER_MODULE_EXPORT (and, in C++, extern "C").
 * krdmad loads the file (RTLD_NOW), checks the descriptor (size, ABI major version, name, start and stop), then
 * calls `start` once its RNICs are attached and its device serves, in the order of the configuration. `stop`
 * runs in reverse order when krdmad shuts down (SIGTERM), while the kAL still serves, and must release everything
 * the module made. Both run on krdmad's control thread, never on the device's serving thread, so a module may
 * call the kAL (which runs its requests on the serving thread) and wait for the answers.
 *
 * Everything here is C: a module may be built by any compiler. A module written in C++ that wants the kAL itself
 * (kal::HostedConsumer) uses the C++ accessor of `kal/consumer_host.hpp`, which is tied to krdmad's own build.
 *
 * Errors are positive errno values (0 is success), as everywhere at the project's C boundaries.
 */
#ifndef KRDMA_CONSUMER_MODULE_H
#define KRDMA_CONSUMER_MODULE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Builds an ABI version word from @p major and @p minor. */
#define KRDMA_CONSUMER_ABI(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
/** @brief Major part of an ABI version word: a host accepts only its own major version. */
#define KRDMA_CONSUMER_ABI_MAJOR(v) ((uint32_t)(v) >> 16)
/** @brief Minor part of an ABI version word: a host accepts modules of its own minor version or older. */
#define KRDMA_CONSUMER_ABI_MINOR(v) ((uint32_t)(v) & 0xffffu)
/** @brief The ABI version this header describes. */
#define KRDMA_CONSUMER_ABI_VERSION KRDMA_CONSUMER_ABI(1, 0)

/** @brief Name of the one symbol a consumer module exports (a const ::krdma_consumer_module_t). */
#define KRDMA_CONSUMER_MODULE_ENTRY_SYMBOL "krdma_consumer_module_v1"

/**
 * @brief Put on the definition of the entry symbol: builds with hidden visibility (this project's) would otherwise
 *        keep it from krdmad.
 */
#if defined(__GNUC__)
#define KRDMA_CONSUMER_MODULE_EXPORT __attribute__((visibility("default")))
#else
#define KRDMA_CONSUMER_MODULE_EXPORT
#endif

/** @brief Longest module name, including the terminating NUL (a longer name is refused). */
#define KRDMA_CONSUMER_NAME_MAX 64u

/** @brief Message severities of krdma_consumer_env::log, from most to least severe (the RNIC-PI's values). */
enum krdma_consumer_log_level {
    KRDMA_CONSUMER_LOG_ERROR = 0, /**< An operation failed. */
    KRDMA_CONSUMER_LOG_WARN = 1,  /**< Something unexpected that was handled. */
    KRDMA_CONSUMER_LOG_INFO = 2,  /**< Lifecycle events. */
    KRDMA_CONSUMER_LOG_DEBUG = 3  /**< Detail for troubleshooting. */
};

/**
 * @brief What krdmad gives a module: logging, its identity and the kAL. Valid from `start` until `stop` returns;
 *        a module may keep the pointer for that long. New members are added at the end and announced by `size`.
 */
typedef struct krdma_consumer_env {
    uint32_t size;        /**< sizeof(krdma_consumer_env_t) of the host: members past it are absent. */
    uint32_t abi_version; /**< ::KRDMA_CONSUMER_ABI_VERSION of the host. */
    /** @brief This krdmad's device path (the instance's identity, e.g. "/run/krdma/krdma.sock"). */
    const char *device;
    /** @brief The module's name, as its descriptor gives it; log lines carry it. */
    const char *module_name;
    /**
     * @brief Logs a printf-style message at @p level (::krdma_consumer_log_level) under the module's name, into
     *        krdmad's log (stderr, the journal). Disabled levels cost a comparison. Callable from any thread.
     */
    void (*log)(const struct krdma_consumer_env *env, int level, const char *format, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /** @brief True (non-zero) when messages of @p level are written: skip building costly messages otherwise. */
    int (*log_enabled)(const struct krdma_consumer_env *env, int level);
    /**
     * @brief The kAL, opaque to C. C++ code built with krdmad reaches it through `kal::consumer_host(env)`
     *        (kal/consumer_host.hpp), which checks krdma_consumer_env::host_build first.
     */
    void *kal;
    /** @brief Identity of the host's C++ build (see kal/consumer_host.hpp); C modules ignore it. */
    const char *host_build;
} krdma_consumer_env_t;

/** @brief A consumer module's description: the object its entry symbol names. */
typedef struct krdma_consumer_module {
    uint32_t size;           /**< sizeof(krdma_consumer_module_t) the module was built with. */
    uint32_t abi_version;    /**< ::KRDMA_CONSUMER_ABI_VERSION the module was built with. */
    const char *name;        /**< Unique among a krdmad's consumer modules; shorter than ::KRDMA_CONSUMER_NAME_MAX. */
    const char *description; /**< One line for `rdmactl consumers`; may be NULL. */
    /**
     * @brief Starts the consumer. @p args_json is the configuration's "args" value as JSON text ("{}" when there
     *        is none); @p state receives the module's own state, passed back to `stop`. Returns 0, or a positive
     *        errno value after logging why through @p env: the module is then not started and `stop` not called,
     *        so it must release what it made before returning.
     */
    int (*start)(const krdma_consumer_env_t *env, const char *args_json, void **state);
    /** @brief Stops the consumer: destroys every object and connection it made (the kAL goes after it). */
    void (*stop)(void *state);
} krdma_consumer_module_t;

#ifdef __cplusplus
}
#endif

#endif /* KRDMA_CONSUMER_MODULE_H */
