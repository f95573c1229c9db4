// Text from outside made safe to print (see printable.hpp).
#include "rnicpi/host/printable.hpp"

#include <cstdint>

namespace rdma {
namespace {

// The length of the well-formed, printable UTF-8 sequence at @p i of @p s (RFC 3629's table: no overlong form, no
// surrogate, nothing above U+10FFFF), or 0 when the byte there must be escaped.
size_t printable_length(std::string_view s, size_t i) noexcept {
    const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t b = byte(i);
    if (b < 0x20 || b == 0x7f) return 0;
    if (b < 0x80) return 1;
    const size_t left = s.size() - i;
    const auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xbf) {
        return k < left && byte(i + k) >= lo && byte(i + k) <= hi;
    };
    if (b >= 0xc2 && b <= 0xdf) {
        // U+0080 to U+009F are the C1 controls (CSI is U+009B).
        if (b == 0xc2 && cont(1, 0x80, 0x9f)) return 0;
        return cont(1) ? 2 : 0;
    }
    if (b == 0xe0) return cont(1, 0xa0, 0xbf) && cont(2) ? 3 : 0;
    if (b == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
    if (b >= 0xe1 && b <= 0xef) return cont(1) && cont(2) ? 3 : 0;
    if (b == 0xf0) return cont(1, 0x90, 0xbf) && cont(2) && cont(3) ? 4 : 0;
    if (b >= 0xf1 && b <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (b == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

}  // namespace

bool is_printable(std::string_view text) noexcept {
    for (size_t i = 0; i < text.size();) {
        const size_t n = printable_length(text, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string printable(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (const size_t n = printable_length(text, i); n > 0) {
            out.append(text.substr(i, n));
            i += n;
            continue;
        }
        const auto b = static_cast<uint8_t>(text[i++]);
        out += "\\x";
        out += kHex[b >> 4];
        out += kHex[b & 0xf];
    }
    return out;
}

}  // namespace rdma
