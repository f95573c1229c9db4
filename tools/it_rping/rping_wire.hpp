/**
 * @file rping_wire.hpp
 * @brief What it_rping shares with rdma-core's rping on the wire and in memory: the 16-byte buffer advertisement
 *        (struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; }) and the ping data pattern, so that
 *        it_rping talks to a real rping peer on an iWARP RNIC and its -V validation means the same.
 */
#ifndef IT_RPING_RPING_WIRE_HPP
#define IT_RPING_RPING_WIRE_HPP

#include <cstddef>
#include <cstdint>

namespace it_rping {

/** @brief rping's default port, message size and limits. */
constexpr uint16_t kDefaultPort = 7174;
constexpr uint32_t kDefaultSize = 64;
/** @brief RPING_MIN_BUFSIZE: room for "rdma-ping-%d: " with the largest int, as rping computes it. */
constexpr uint32_t kMinSize = sizeof("2147483647") + sizeof("rdma-ping-%d: ");
/** @brief rping accepts sizes below RPING_BUFSIZE (64 KiB). */
constexpr uint32_t kMaxSize = 64 * 1024 - 1;
/** @brief rping's send queue depth (RPING_SQ_DEPTH) and receive queue depth. */
constexpr uint32_t kSendDepth = 16;
constexpr uint32_t kReceiveDepth = 2;

/** @brief A buffer advertisement: where the peer may RDMA Read or Write, and how much. */
struct RdmaInfo {
    uint64_t buf = 0;  /**< Virtual address (absolute addressing). */
    uint32_t rkey = 0; /**< STag. */
    uint32_t size = 0; /**< Length in bytes. */

    static constexpr size_t kWireSize = 16;
    /** @brief Encodes in network byte order into @p out (kWireSize bytes). */
    void write(uint8_t *out) const;
    /** @brief Decodes kWireSize bytes. */
    static RdmaInfo read(const uint8_t *in);
};

/**
 * @brief The client's ping data for iteration @p ping, as rping_test_client writes it: "rdma-ping-N: " then
 *        letters 'A'..'z' cycling from @p start, and a NUL in the last byte. @p start is advanced as rping advances
 *        it (once per iteration, wrapping from 'z' back to 'A').
 */
void fill_ping(char *buf, uint32_t size, int ping, int &start);

}  // namespace it_rping

#endif  // IT_RPING_RPING_WIRE_HPP
