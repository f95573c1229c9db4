// CRC32c: hardware (SSE4.2, three interleaved streams) with a slicing-by-8 fallback.
//
// Written by hand because no Debian-packaged, well-kept C++ library offers a fast CRC32c (Boost.CRC is bytewise and
// several times slower than the instruction; zlib's CRC is a different polynomial).
#include "iwarp/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
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
constexpr size_t kFoldMin = 256;  // smallest buffer handed to the folding path

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
    // No alignment prologue: unaligned 8-byte loads cost nothing extra on x86-64, and short pieces such as
    // 16-byte FPDU headers would otherwise spend most of their time in single-byte steps.
    uint64_t c0 = crc;
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

// ---- Carry-less multiplication folding (AVX-512 VPCLMULQDQ) -----------------------------------------------------
// The crc32 instruction tops out at 8 bytes per cycle. Folding 256 bytes at a time with carry-less multiplies runs
// on other execution units and goes several times faster on CPUs that have 512-bit VPCLMULQDQ. Folding a 128-bit
// lane forward by D bytes multiplies its low half by (x^(8D+32) mod P)' << 1 and its high half by
// (x^(8D-32) mod P)' << 1 (' = 32-bit reflection), as in Intel's "Fast CRC Computation Using PCLMULQDQ"; the test
// suite pins the convention with the well-known gzip constants. What remains after folding is 16 bytes whose CRC
// from a zero register equals the CRC so far, finished with the crc32 instruction.

constexpr uint64_t kPolyNormal = 0x11edc6f41ull;  // Castagnoli with its x^32 term

constexpr uint64_t fold_constant(unsigned exponent) {
    uint64_t r = 1;
    for (unsigned i = 0; i < exponent; ++i) {
        r <<= 1;
        if ((r & (1ull << 32)) != 0) r ^= kPolyNormal;
    }
    uint64_t reflected = 0;
    for (int b = 0; b < 32; ++b) reflected |= ((r >> b) & 1) << (31 - b);
    return reflected << 1;
}

struct FoldConstants {
    uint64_t lo, hi;
};
constexpr FoldConstants fold_by(unsigned bytes) { return {fold_constant(8 * bytes + 32), fold_constant(8 * bytes - 32)}; }
constexpr FoldConstants kFold256 = fold_by(256), kFold192 = fold_by(192), kFold128 = fold_by(128),
                        kFold64 = fold_by(64), kFold48 = fold_by(48), kFold32 = fold_by(32), kFold16 = fold_by(16);

__attribute__((target("avx512f"))) inline __m512i broadcast_fold(FoldConstants k) noexcept {
    return _mm512_set_epi64(static_cast<long long>(k.hi), static_cast<long long>(k.lo), static_cast<long long>(k.hi),
                            static_cast<long long>(k.lo), static_cast<long long>(k.hi), static_cast<long long>(k.lo),
                            static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}
inline __m128i fold_xmm(FoldConstants k) noexcept {
    return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) inline __m512i fold512(__m512i x, __m512i k) noexcept {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}

__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) inline __m128i fold128(__m128i x, __m128i k) noexcept {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// Needs len >= 256; returns the raw CRC state after `consumed` bytes, the rest is left to the caller.
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) uint32_t fold_vpclmul(uint32_t crc, const uint8_t *p,
                                                                                  size_t len,
                                                                                  size_t &consumed) noexcept {
    const __m512i k256 = broadcast_fold(kFold256);
    const __m512i k64 = broadcast_fold(kFold64);
    const __m128i k16 = fold_xmm(kFold16);
    __m512i x0 = _mm512_loadu_si512(p);
    __m512i x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    // The register's initial value is xored into the first four data bytes.
    x0 = _mm512_xor_si512(x0, _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128(static_cast<int>(crc)), 0));
    size_t off = 256;
    while (len - off >= 256) {
        x0 = _mm512_xor_si512(fold512(x0, k256), _mm512_loadu_si512(p + off));
        x1 = _mm512_xor_si512(fold512(x1, k256), _mm512_loadu_si512(p + off + 64));
        x2 = _mm512_xor_si512(fold512(x2, k256), _mm512_loadu_si512(p + off + 128));
        x3 = _mm512_xor_si512(fold512(x3, k256), _mm512_loadu_si512(p + off + 192));
        off += 256;
    }
    // The four accumulators fold in parallel (by 192, 128 and 64 bytes) rather than in a chain: short buffers such
    // as 1460-MSS FPDUs are dominated by this reduction's latency.
    x0 = _mm512_ternarylogic_epi64(fold512(x0, broadcast_fold(kFold192)), fold512(x1, broadcast_fold(kFold128)),
                                   _mm512_xor_si512(fold512(x2, k64), x3), 0x96);
    // Fold the tail in too, 64 and then 16 bytes at a time: cheaper than a serial crc32 chain over it.
    while (len - off >= 64) {
        x0 = _mm512_xor_si512(fold512(x0, k64), _mm512_loadu_si512(p + off));
        off += 64;
    }
    // Through memory rather than _mm512_extracti32x4_epi32, which trips a false -Wuninitialized in GCC 12's header.
    alignas(64) uint8_t lanes[64];
    _mm512_store_si512(lanes, x0);
    auto lane = [&lanes](int i) { return _mm_load_si128(reinterpret_cast<const __m128i *>(lanes + 16 * i)); };
    __m128i v = _mm_xor_si128(_mm_xor_si128(fold128(lane(0), fold_xmm(kFold48)), fold128(lane(1), fold_xmm(kFold32))),
                              _mm_xor_si128(fold128(lane(2), k16), lane(3)));
    while (len - off >= 16) {
        v = _mm_xor_si128(fold128(v, k16), _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + off)));
        off += 16;
    }
    uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(v)));
    c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(v, 1)));
    consumed = off;
    return static_cast<uint32_t>(c);
}

bool detect_vpclmul() noexcept {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
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
    uint32_t state = ~crc;
#if defined(__x86_64__)
    // Folding pays off from a few hundred bytes: below that the crc32 instruction alone is faster.
    if (len >= kFoldMin && detect_vpclmul()) {
        size_t consumed = 0;
        state = fold_vpclmul(state, p, len, consumed);
        p += consumed;
        len -= consumed;
    }
#endif
    return ~(detect_hw() ? update_hw(state, p, len) : update_soft(state, p, len));
}

namespace detail {
uint32_t crc32c_extend_instruction(uint32_t crc, const void *data, size_t len) noexcept {
    return ~(detect_hw() ? update_hw(~crc, static_cast<const uint8_t *>(data), len)
                         : update_soft(~crc, static_cast<const uint8_t *>(data), len));
}
bool crc32c_folding() noexcept {
#if defined(__x86_64__)
    return detect_vpclmul();
#else
    return false;
#endif
}
}  // namespace detail

namespace detail {
uint32_t crc32c_extend_soft(uint32_t crc, const void *data, size_t len) noexcept {
    return ~update_soft(~crc, static_cast<const uint8_t *>(data), len);
}
}  // namespace detail

}  // namespace iwarp
