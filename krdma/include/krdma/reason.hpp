/**
 * @file reason.hpp
 * @brief The reason text of a /dev/krdma error reply (protocol minor version 1): bounded, valid UTF-8, printable.
 *
 * The kAL writes it and the uAL reads it with the same function, so what reaches a terminal or a log is never
 * longer than ::KRDMA_MAX_REASON bytes, never invalid UTF-8 and never a control sequence, whoever sent it.
 */
#ifndef KRDMA_REASON_HPP
#define KRDMA_REASON_HPP

#include <cstddef>
#include <span>
#include <string_view>

namespace krdma {

/**
 * @brief Copies @p text into @p out as reason text and returns the bytes written (at most out.size()).
 *
 * Well-formed UTF-8 is copied, cut before the first code point that would not fit whole. Each byte that does not
 * begin a well-formed sequence (a stray continuation byte, an overlong form, a surrogate, a truncated sequence,
 * anything above U+10FFFF) becomes U+FFFD; tab, newline and carriage return become a space, and every other C0 or
 * C1 control character and DEL becomes U+FFFD, so the text cannot move a cursor or start an escape sequence.
 */
[[nodiscard]] size_t reason_text(std::string_view text, std::span<char> out) noexcept;

}  // namespace krdma

#endif  // KRDMA_REASON_HPP
