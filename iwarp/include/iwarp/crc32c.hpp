/**
 * @file crc32c.hpp
 * @brief CRC32c (Castagnoli), as MPA (RFC 5044) and iSCSI (RFC 3720) use it.
 *
 * Uses carry-less multiplication folding (AVX-512 VPCLMULQDQ) for buffers of 512 bytes and more when the CPU has
 * it, the SSE4.2 crc32 instruction over three interleaved streams for the rest (one instruction has a latency of
 * three cycles and a throughput of one per cycle, so three independent streams keep the unit busy), and a
 * slicing-by-8 table on CPUs without either. The value is the standard one (reflected, initial value and final xor 0xffffffff);
 * MPA carries it on the wire least significant byte first (see put_crc32c()).
 */
#ifndef IWARP_CRC32C_HPP
#define IWARP_CRC32C_HPP

#include <cstddef>
#include <cstdint>

namespace iwarp {

/**
 * @brief Continues a CRC32c over @p len bytes at @p data.
 * @param crc  A value returned by crc32c() or crc32c_extend() for the bytes before; 0 to start.
 * @param data The next bytes.
 * @param len  How many.
 * @return The CRC32c of everything so far.
 */
[[nodiscard]] uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len) noexcept;

/** @brief The CRC32c of @p len bytes at @p data. */
[[nodiscard]] inline uint32_t crc32c(const void *data, size_t len) noexcept { return crc32c_extend(0, data, len); }

/** @brief True when the hardware instruction is used. */
[[nodiscard]] bool crc32c_hardware() noexcept;

namespace detail {
/** @brief The table-driven implementation alone, so tests can check it on machines with the instruction. */
[[nodiscard]] uint32_t crc32c_extend_soft(uint32_t crc, const void *data, size_t len) noexcept;
/** @brief The crc32-instruction path alone (table path without SSE4.2), without carry-less folding. */
[[nodiscard]] uint32_t crc32c_extend_instruction(uint32_t crc, const void *data, size_t len) noexcept;
/** @brief True when large buffers are folded with AVX-512 VPCLMULQDQ. */
[[nodiscard]] bool crc32c_folding() noexcept;
}  // namespace detail

/** @brief Writes a CRC32c in MPA's wire order (least significant byte first, as Linux siw and iSCSI do). */
inline void put_crc32c(uint8_t *p, uint32_t crc) noexcept {
    p[0] = static_cast<uint8_t>(crc);
    p[1] = static_cast<uint8_t>(crc >> 8);
    p[2] = static_cast<uint8_t>(crc >> 16);
    p[3] = static_cast<uint8_t>(crc >> 24);
}

/** @brief Reads a CRC32c in MPA's wire order. */
[[nodiscard]] inline uint32_t get_crc32c(const uint8_t *p) noexcept {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace iwarp

#endif  // IWARP_CRC32C_HPP
