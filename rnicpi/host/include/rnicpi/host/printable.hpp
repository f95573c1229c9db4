/**
 * @file printable.hpp
 * @brief Text that came from outside (a client, a peer, a module, /proc) made safe to print: one line, no terminal
 *        control sequence.
 *
 * Every string a daemon or tool did not write itself passes through printable() before it reaches a log line or a
 * terminal: a name with an ESC could recolour or rewrite an administrator's terminal, a newline could forge a log
 * line. Valid UTF-8 text is kept as it is; control characters (C0, DEL and the C1 range U+0080 to U+009F, which
 * some terminals obey in UTF-8) and bytes that are not well-formed UTF-8 become C-style `\xNN`, one per byte.
 */
#ifndef RNICPI_HOST_PRINTABLE_HPP
#define RNICPI_HOST_PRINTABLE_HPP

#include <string>
#include <string_view>

namespace rdma {

/** @brief True when printable() would return @p text unchanged (no control character, well-formed UTF-8). */
[[nodiscard]] bool is_printable(std::string_view text) noexcept;

/** @brief @p text with each control byte and each byte outside well-formed UTF-8 written as `\xNN`. */
[[nodiscard]] std::string printable(std::string_view text);

}  // namespace rdma

#endif  // RNICPI_HOST_PRINTABLE_HPP
