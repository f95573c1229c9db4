// CRC32c: hardware (SSE4.2, three interleaved streams) with a slicing-by-8 fallback.
//
// Written by hand because no Debian-packaged, well-kept C++ library offers a fast CRC32c (Boost.CRC is bytewise and
// several times slower than the instruction; zlib's CRC is a different polynomial).
#include "iwarp/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace iwarp {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // Castagnoli polynomial, reflected

// Raw register state (no initial or final inversion) is what both implementations update.
struct SoftTables {
    std::array<std::array<uint32_t, 256>, 8> t{};
    constexpr SoftTables() {
        for (uint32_t n = 0; n < 256; ++n) {
            uint32_t c = n;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
            t[0][n] = c;
        }
        for (uint32_t n = 0; n < 256; ++n) {
            for (size_t k = 1; k < 8; ++k) t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xff];
        }
    }
};
constexpr SoftTables kSoft;

uint32_t update_soft(uint32_t crc, const uint8_t *p, size_t len) noexcept {
    while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
        crc = (crc >> 8) ^ kSoft.t[0][(crc ^ *p++) & 0xff];
        --len;
    }
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        w ^= crc;
        crc = kSoft.t[7][w & 0xff] ^ kSoft.t[6][(w >> 8) & 0xff] ^ kSoft.t[5][(w >> 16) & 0xff] ^
              kSoft.t[4][(w >> 24) & 0xff] ^ kSoft.t[3][(w >> 32) & 0xff] ^ kSoft.t[2][(w >> 40) & 0xff] ^
              kSoft.t[1][(w >> 48) & 0xff] ^ kSoft.t[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len-- > 0) crc = (crc >> 8) ^ kSoft.t[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)

// Block sizes of the interleaved loops: long blocks for big buffers, short ones for the rest.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;
constexpr size_t kTiny = 64;  // FPDUs of a 1460-byte MSS are mostly covered by short and tiny blocks

// Appending n zero bytes to a raw CRC state is linear in the state: a 32x32 matrix over GF(2), applied here as four
// byte-indexed tables. shift_long/shift_short move a stream's CRC past the two streams that follow it.
struct ShiftTable {
    std::array<std::array<uint32_t, 256>, 4> t{};
    uint32_t apply(uint32_t crc) const noexcept {
        return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
    }
};

__attribute__((target("sse4.2"))) uint32_t zeros_hw(uint32_t crc, size_t len) noexcept {
    uint64_t c = crc;
    for (size_t i = 0; i < len; i += 8) c = _mm_crc32_u64(c, 0);
    return static_cast<uint32_t>(c);
}

ShiftTable make_shift(size_t len) noexcept {
    ShiftTable s;
    for (size_t k = 0; k < 4; ++k) {
        for (uint32_t b = 0; b < 256; ++b) s.t[k][b] = zeros_hw(b << (8 * k), len);
    }
    return s;
}

struct HwTables {
    ShiftTable long_shift = make_shift(kLong);
    ShiftTable short_shift = make_shift(kShort);
    ShiftTable tiny_shift = make_shift(kTiny);
};

const HwTables &hw_tables() noexcept {
    static const HwTables tables;  // built once, on first use, about a million crc32 instructions
    return tables;
}

// Three streams of `block` bytes at a time: each crc32 has three cycles of latency, so three independent chains keep
// the unit busy; the first stream's CRC is then shifted past the other two and combined.
__attribute__((target("sse4.2"))) void interleave(uint64_t &c0, const uint8_t *&p, size_t &len, size_t block,
                                                  const ShiftTable &shift) noexcept {
    while (len >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + block;
        while (p < end) {
            uint64_t w0, w1, w2;
            std::memcpy(&w0, p, 8);
            std::memcpy(&w1, p + block, 8);
            std::memcpy(&w2, p + 2 * block, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        }
        c0 = shift.apply(static_cast<uint32_t>(c0)) ^ c1;
        c0 = shift.apply(static_cast<uint32_t>(c0)) ^ c2;
        p += 2 * block;
        len -= 3 * block;
    }
}

__attribute__((target("sse4.2"))) uint32_t update_hw(uint32_t crc, const uint8_t *p, size_t len) noexcept {
    uint64_t c0 = crc;
    while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
        c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
        --len;
    }
    if (len >= 3 * kTiny) {
        const HwTables &tables = hw_tables();
        interleave(c0, p, len, kLong, tables.long_shift);
        interleave(c0, p, len, kShort, tables.short_shift);
        interleave(c0, p, len, kTiny, tables.tiny_shift);
    }
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
        p += 8;
        len -= 8;
    }
    while (len-- > 0) c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    return static_cast<uint32_t>(c0);
}

bool detect_hw() noexcept { return __builtin_cpu_supports("sse4.2"); }

#else

bool detect_hw() noexcept { return false; }
uint32_t update_hw(uint32_t crc, const uint8_t *p, size_t len) noexcept { return update_soft(crc, p, len); }

#endif

}  // namespace

// __builtin_cpu_supports reads a word libgcc fills before main: cheaper than caching it in a static constructor.
bool crc32c_hardware() noexcept { return detect_hw(); }

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len) noexcept {
    const auto *p = static_cast<const uint8_t *>(data);
    return ~(detect_hw() ? update_hw(~crc, p, len) : update_soft(~crc, p, len));
}

namespace detail {
uint32_t crc32c_extend_soft(uint32_t crc, const void *data, size_t len) noexcept {
    return ~update_soft(~crc, static_cast<const uint8_t *>(data), len);
}
}  // namespace detail

}  // namespace iwarp
