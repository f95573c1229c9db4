// The reason text of an error reply: bounded, valid, printable UTF-8 (see krdma/reason.hpp).
#include "krdma/reason.hpp"

#include <cstdint>
#include <cstring>

namespace krdma {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at the start of @p s (Unicode, table 3-7), or 0 when there is none.
size_t sequence_length(std::string_view s) noexcept {
    const auto b = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
    const auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
        return i < s.size() && b(i) >= lo && b(i) <= hi;
    };
    const uint8_t c = b(0);
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
    if (c >= 0xE1 && c <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;  // a continuation byte, C0, C1 or F5..FF
}

}  // namespace

size_t reason_text(std::string_view text, std::span<char> out) noexcept {
    size_t n = 0;
    for (size_t i = 0; i < text.size();) {
        const size_t len = sequence_length(text.substr(i));
        const auto c = static_cast<uint8_t>(text[i]);
        const char *emit = text.data() + i;
        size_t emit_len = len;
        if (len == 0) {
            emit = kReplacement;
            emit_len = 3;
        } else if (c == '\t' || c == '\n' || c == '\r') {
            emit = " ";
            emit_len = 1;
        } else if (c < 0x20 || c == 0x7F || (c == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0)) {
            emit = kReplacement;  // C0 controls, DEL, and C1 controls (U+0080..U+009F, which some terminals obey)
            emit_len = 3;
        }
        if (emit_len > out.size() - n) break;
        std::memcpy(out.data() + n, emit, emit_len);
        n += emit_len;
        i += len != 0 ? len : 1;
    }
    return n;
}

}  // namespace krdma
