/**
 * @file blk_proto.h
 * @brief The wire messages of the RDMA block service: the kDAPL consumer module `blk_service` (in krdmad) and its
 *        uDAPL client `dapl_blk`. The client Sends requests; the service moves the data itself with RDMA (a READ
 *        is an RDMA Write into the client's buffer, a WRITE an RDMA Read from it) and then Sends the reply, so the
 *        data is placed before the reply arrives. Fields are little-endian (both ends are this host's build).
 */
#ifndef DAPL_BLK_PROTO_H
#define DAPL_BLK_PROTO_H

#include <stdint.h>

/** @brief Marks every message ("DBLK"). */
#define BLK_MAGIC 0x4b4c4244u
/** @brief The service's default TCP port (connection qualifier). */
#define BLK_DEFAULT_PORT 7480u
/** @brief Requests a connection may have outstanding (the service posts this many receives per connection). */
#define BLK_QUEUE_DEPTH 8u

/** @brief Request operations. */
enum blk_op {
    BLK_OP_HELLO = 1, /**< Asks for the volume's size and the largest transfer. */
    BLK_OP_READ = 2,  /**< Volume [offset, offset+length) to the client's buffer (RDMA Write by the service). */
    BLK_OP_WRITE = 3  /**< The client's buffer to volume [offset, offset+length) (RDMA Read by the service). */
};

/** @brief Reply statuses (positive errno values). */
enum blk_status {
    BLK_OK = 0,          /**< Done. */
    BLK_ERANGE = 34,     /**< Outside the volume, or longer than the largest transfer. */
    BLK_EINVAL = 22,     /**< Not a request (bad magic or operation). */
    BLK_EIO = 5          /**< The RDMA transfer failed. */
};

/** @brief A request (client to service, a Send). */
struct blk_request {
    uint32_t magic;       /**< ::BLK_MAGIC. */
    uint32_t op;          /**< ::blk_op. */
    uint64_t id;          /**< Echoed in the reply. */
    uint64_t offset;      /**< Byte offset in the volume. */
    uint32_t length;      /**< Bytes. */
    uint32_t rmr_context; /**< The client buffer's remote context (STag). */
    uint64_t address;     /**< The client buffer's address (its tagged offset). */
};

/** @brief A reply (service to client, a Send). */
struct blk_reply {
    uint32_t magic;       /**< ::BLK_MAGIC. */
    uint32_t status;      /**< ::blk_status. */
    uint64_t id;          /**< The request's. */
    uint64_t volume_size; /**< HELLO: the volume's size in bytes. */
    uint32_t max_io;      /**< HELLO: the largest transfer in bytes. */
    uint32_t reserved;    /**< Zero. */
};

#endif /* DAPL_BLK_PROTO_H */
