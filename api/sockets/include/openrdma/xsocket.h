/**
 * @file xsocket.h
 * @brief The extended sockets interface: iWARP's own features through a connected socket that the OpenRDMA sockets
 *        layer runs in RDMA mode - registered memory advertised to the peer, one-sided RDMA Write and Read into the
 *        peer's advertised memory, sends of registered memory without a copy, and completions learnt through a
 *        descriptor the program polls.
 *
 * Link with -lopenrdma_sockets (which also serves the program's sockets, as openrdma-run does). Every call takes the
 * socket's descriptor. On a socket that is not in RDMA mode (the peer does not run the layer, the policy left it to
 * TCP, or it is not a connected TCP socket) each call fails with errno EOPNOTSUPP, and xs_rdma_mode() says why.
 * Calls return 0 (or a count, or a handle) on success, -1 with errno set on failure.
 */
#ifndef OPENRDMA_XSOCKET_H
#define OPENRDMA_XSOCKET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Access rights of a registered region (xs_register()). */
enum xs_access {
    XS_LOCAL = 0,              /**< The program's own use: a source of xs_send() and xs_write(), a sink of xs_read(). */
    XS_REMOTE_READ = 1u << 0,  /**< The peer may read it (its xs_read()). */
    XS_REMOTE_WRITE = 1u << 1  /**< The peer may write it (its xs_write()). */
};

/** @brief A region as the peer addresses it: what xs_advertise() sends and xs_peer_region() returns. */
typedef struct xs_region {
    uint64_t addr;   /**< Its first byte, in the owner's address space (the tagged offset). */
    uint64_t length; /**< Its length in bytes. */
    uint32_t rkey;   /**< The STag that grants the peer its access. */
    uint32_t access; /**< A set of ::xs_access bits: what the peer may do. */
    uint64_t tag;    /**< The owner's own value, passed along (a buffer number, say). */
} xs_region_t;

/** @brief What completed (xs_poll()). */
typedef enum xs_op { XS_OP_WRITE = 1, XS_OP_READ = 2, XS_OP_SEND = 3 } xs_op_t;

/** @brief One completion. */
typedef struct xs_completion {
    uint64_t context; /**< The program's value given with the operation. */
    uint32_t op;      /**< One of ::xs_op. */
    int32_t status;   /**< 0, or the errno value it failed with (EACCES: the peer's region refused it). */
    uint64_t length;  /**< Bytes moved. */
} xs_completion_t;

/**
 * @brief 1 when @p fd is a connected socket in RDMA mode, 0 when it is not (then @p why, if not null, gets a short
 *        reason: "peer-plain", "policy", "no-rnic", "not-converted"...), -1 with errno EBADF for a bad descriptor.
 */
int xs_rdma_mode(int fd, const char **why);

/**
 * @brief Registers @p len bytes at @p addr for use on @p fd's connection with @p access (::xs_access bits) and fills
 *        @p region for xs_advertise(). Returns a handle (> 0) for the calls below, or -1.
 */
int64_t xs_register(int fd, void *addr, size_t len, unsigned access, xs_region_t *region);

/** @brief Deregisters @p handle. EBUSY while an operation on it is outstanding. */
int xs_deregister(int fd, int64_t handle);

/**
 * @brief Sends @p region to the peer, out of band of the byte stream (the peer's xs_peer_region() returns the
 *        regions in the order they were advertised). Blocks while the peer has no room, unless the socket is
 *        non-blocking (EAGAIN).
 */
int xs_advertise(int fd, const xs_region_t *region);

/**
 * @brief Takes the oldest region the peer advertised into @p region. Waits for one unless @p nonblock (EAGAIN);
 *        ECONNRESET or EPIPE once the connection ended.
 */
int xs_peer_region(int fd, xs_region_t *region, int nonblock);

/**
 * @brief RDMA Write: @p len bytes at offset @p offset of the program's region @p handle into the peer's region
 *        @p remote at offset @p remote_offset. Returns once posted; completes with @p context (xs_poll()).
 *        EINVAL when a range lies outside its region.
 */
int xs_write(int fd, int64_t handle, size_t offset, size_t len, const xs_region_t *remote, uint64_t remote_offset,
             uint64_t context);

/** @brief RDMA Read: the reverse of xs_write(), into the program's region @p handle. */
int xs_read(int fd, int64_t handle, size_t offset, size_t len, const xs_region_t *remote, uint64_t remote_offset,
            uint64_t context);

/**
 * @brief Sends @p len bytes of registered region @p handle at @p offset as part of the byte stream, in order with
 *        write(), without copying them: the peer reads them with read(). They must not change until the
 *        completion with @p context.
 */
int xs_send(int fd, int64_t handle, size_t offset, size_t len, uint64_t context);

/** @brief A descriptor that polls readable while completions of @p fd's operations wait to be taken. */
int xs_completion_fd(int fd);

/** @brief Takes up to @p max completions into @p out without waiting: their count (0 when none). */
int xs_poll(int fd, xs_completion_t *out, int max);

#ifdef __cplusplus
}
#endif

#endif /* OPENRDMA_XSOCKET_H */
