/**
 * @file ri_channel.h
 * @brief The same-host channel: what a QP's stream moves over when both ends of its connection are QPs of this
 *        stack on one host, in place of the TCP byte stream (ri_llp_params_t::channel with ::RI_LLP_SAME_HOST).
 *
 * The kAL makes a channel when it holds both ends of one TCP connection (it accepted one and connected the other),
 * so the pairing is the kAL's proof, not a claim of either end. A channel is
 *
 * - one sealed shared-memory file (memfd: it cannot shrink or grow) holding a ri_channel_header_t and two byte
 *   rings, one per direction: side @c s writes ring @c s and reads ring <tt>1 - s</tt>;
 * - a connected pair of Unix sequenced-packet sockets, one end per QP: the "bell". A side that waits (for bytes or
 *   for room) says so in the ring (ri_channel_ring_t::reader_waiting, ri_channel_ring_t::writer_waiting) and sleeps on its end; the
 *   other side writes one byte to its own end after it moved the ring's index and saw the flag. The bell's end of
 *   file is the peer's end: its QP went away (closed, destroyed, or its process died).
 *
 * The kAL writes one ri_channel_hello_t, with the memory file as an SCM_RIGHTS descriptor, into each end before
 * it hands the end out; the provider reads it at the RDMA-mode transition (see rnicpi/cpp/channel.hpp). A channel
 * is handed out fresh: both rings empty, and both readers marked waiting (ri_channel_ring_t::reader_waiting), so
 * that the first bytes either way ring the bell of a QP that has not looked at its rings yet.
 *
 * The rings carry exactly the bytes the TCP stream would (MPA FPDUs, without CRC and markers: the kAL clears
 * ::RI_MPA_CRC and ::RI_MPA_MARKERS for both ends), so every check of the receiving side (STags, protection
 * domains, access rights, Terminate) is the one the wire gets: a peer reaches nothing it could not reach over TCP.
 * Each side treats the ring it reads, and the indices the other side writes, as untrusted input.
 *
 * Single copy (hello version 2, ::RI_CHANNEL_HELLO_PULL): when the kAL vouches for the peer's process (the same
 * user, in the kAL's pid namespace, or the kAL's own process), the hello names it (ri_channel_hello_t::peer_pid).
 * A reader that may read that process's memory (process_vm_readv(2), which the kernel allows only to a process that
 * could ptrace it) says so in ri_channel_ring_t::reader_pulls; its peer may then send a large Send or RDMA Write as
 * a pull: the message's own DDP header with the reserved DDP bit ::RI_CHANNEL_DDP_PULL set and, for payload, where
 * the bytes lie in the sender's memory. The reader checks the header exactly as for the bytes themselves (STag,
 * protection domain, access, bounds, receive buffer), copies the bytes straight from the sender into the target,
 * and acknowledges the pull (opcode ::RI_CHANNEL_PULL_ACK), after which the sender completes the request. A peer
 * reaches only what it could over TCP; the reader reads only where the sender pointed, in a process it could read
 * anyway.
 */
#ifndef RNICPI_RI_CHANNEL_H
#define RNICPI_RI_CHANNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief ri_channel_header_t::magic and ri_channel_hello_t::magic: "RICH". */
#define RI_CHANNEL_MAGIC 0x48434952u
/** @brief The layout version of this header, and of the longest hello (version 1 hellos are read too). */
#define RI_CHANNEL_VERSION 2u
/** @brief ri_channel_hello_t::flags: ri_channel_hello_t::peer_pid names the peer's process (single copy). */
#define RI_CHANNEL_HELLO_PULL 1u
/** @brief The reserved bit of the DDP control byte's reserved field that marks a pull (single copy). */
#define RI_CHANNEL_DDP_PULL 1u
/** @brief The RDMAP opcode (reserved by RFC 5040) of a pull's acknowledgement, sent with ::RI_CHANNEL_DDP_PULL. */
#define RI_CHANNEL_PULL_ACK 0xfu

/**
 * @brief One direction of a channel. Its indices count bytes from the start and never wrap (64 bits); a byte at
 *        index @c i lies at data offset <tt>i & (ring_size - 1)</tt>. The writer's and the reader's words are on
 *        cache lines of their own.
 */
typedef struct ri_channel_ring {
    uint64_t tail;           /**< Writer: bytes written so far (release). */
    uint32_t closed;         /**< Writer: nonzero once it writes no more (the stream's FIN, after the last byte). */
    uint32_t writer_waiting; /**< Writer: nonzero while it waits for room (the reader rings after it moves head). */
    uint8_t pad0[48];        /**< Zero: the reader's words start a cache line. */
    uint64_t head;           /**< Reader: bytes consumed so far (release). */
    uint32_t reader_waiting; /**< Reader: nonzero while it waits for bytes (the writer rings after it moves tail). */
    uint32_t reader_pulls;   /**< Reader: nonzero once it takes pulls in this ring (single copy); zero before. */
    uint8_t pad1[48];        /**< Zero. */
} ri_channel_ring_t;

/** @brief The start of a channel's memory file. */
typedef struct ri_channel_header {
    uint32_t magic;          /**< ::RI_CHANNEL_MAGIC. */
    uint32_t version;        /**< ::RI_CHANNEL_VERSION. */
    uint64_t ring_size;      /**< Bytes of each ring's data: a power of two, at least 4096. */
    uint64_t data_offset[2]; /**< Where ring 0's and ring 1's data start in the file (page-aligned). */
    uint64_t file_size;      /**< The file's size. */
    uint8_t pad[24];         /**< Zero: the rings start a cache line. */
    ri_channel_ring_t ring[2]; /**< Ring 0 is written by side 0, ring 1 by side 1. */
} ri_channel_header_t;

/** @brief The first message on each end of a channel's bell, with the memory file as its one descriptor. */
typedef struct ri_channel_hello {
    uint32_t magic;   /**< ::RI_CHANNEL_MAGIC. */
    uint32_t version; /**< ::RI_CHANNEL_VERSION. */
    uint32_t side;    /**< 0 or 1: the ring this end writes. */
    /**
     * log2 of ri_channel_header_t::ring_size. With it an end knows the file's layout (the header's page, then ring 0,
     * then ring 1) without reading the header: a paired QP that moves no data touches none of the channel's pages.
     */
    uint32_t ring_log2;
    /** Version 2: a set of ::RI_CHANNEL_HELLO_PULL. (A version 1 hello ends before this field.) */
    uint32_t flags;
    /** Version 2, with ::RI_CHANNEL_HELLO_PULL: the peer QP's process, in the receiving end's pid namespace. */
    int32_t peer_pid;
} ri_channel_hello_t;

/** @brief The size of a version 1 hello (no flags, no peer). */
#define RI_CHANNEL_HELLO_V1_SIZE 16u

#ifdef __cplusplus
}
#endif

#endif /* RNICPI_RI_CHANNEL_H */
