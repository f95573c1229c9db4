/**
 * @file status.hpp
 * @brief The project's error model in C++: Status on fast paths, Expected<T> with a message on slow paths.
 *
 * Both carry the RNIC-PI error vocabulary (positive errno values, ::ri_errno), so converting to and from the C ABI
 * is a copy of an int. Header-only and free of exceptions, so providers may use it on either side of the ABI.
 */
#ifndef RNICPI_CPP_STATUS_HPP
#define RNICPI_CPP_STATUS_HPP

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "rnicpi/ri_types.h"

namespace rdma {

/** @brief Symbolic name of an errno value ("EINVAL"), or "E?" for one outside the RNIC-PI vocabulary. */
constexpr std::string_view errno_name(int code) noexcept {
    switch (code) {
        case RI_OK: return "OK";
        case RI_EPERM: return "EPERM";
        case RI_ENOENT: return "ENOENT";
        case RI_EINTR: return "EINTR";
        case RI_EIO: return "EIO";
        case RI_ENOEXEC: return "ENOEXEC";
        case RI_EBADF: return "EBADF";
        case RI_EAGAIN: return "EAGAIN";
        case RI_ENOMEM: return "ENOMEM";
        case RI_EACCES: return "EACCES";
        case RI_EFAULT: return "EFAULT";
        case RI_EBUSY: return "EBUSY";
        case RI_EEXIST: return "EEXIST";
        case RI_ENODEV: return "ENODEV";
        case RI_EINVAL: return "EINVAL";
        case RI_ENOTTY: return "ENOTTY";
        case RI_ENOSPC: return "ENOSPC";
        case RI_ERANGE: return "ERANGE";
        case RI_ENAMETOOLONG: return "ENAMETOOLONG";
        case RI_ENOSYS: return "ENOSYS";
        case RI_EPROTO: return "EPROTO";
        case RI_EOVERFLOW: return "EOVERFLOW";
        case RI_ELIBBAD: return "ELIBBAD";
        case RI_EMSGSIZE: return "EMSGSIZE";
        case RI_EOPNOTSUPP: return "EOPNOTSUPP";
        case RI_EAFNOSUPPORT: return "EAFNOSUPPORT";
        case RI_EADDRINUSE: return "EADDRINUSE";
        case RI_EADDRNOTAVAIL: return "EADDRNOTAVAIL";
        case RI_ENETUNREACH: return "ENETUNREACH";
        case RI_ECONNABORTED: return "ECONNABORTED";
        case RI_ECONNRESET: return "ECONNRESET";
        case RI_EISCONN: return "EISCONN";
        case RI_ENOTCONN: return "ENOTCONN";
        case RI_ETIMEDOUT: return "ETIMEDOUT";
        case RI_ECONNREFUSED: return "ECONNREFUSED";
        case RI_EHOSTUNREACH: return "EHOSTUNREACH";
        case RI_ECANCELED: return "ECANCELED";
        default: return "E?";  // values come from other processes and modules: never trust them to be known
    }
}

/** @brief True when @p code is 0 or a member of the RNIC-PI error vocabulary (::ri_errno). */
constexpr bool in_vocabulary(int code) noexcept { return errno_name(code) != "E?"; }

/**
 * @brief The RNIC-PI status for the errno value @p e a failed system call (or a loaded module) gave: @p e itself
 *        when the vocabulary has it, the nearest member for the few others a socket or file call may set (an
 *        exhausted descriptor table is ::RI_ENOSPC, a broken pipe ::RI_ECONNRESET, a network that is down
 *        ::RI_ENETUNREACH), ::RI_EIO for anything else, and for 0, which a failure must not report as success.
 */
constexpr int from_errno(int e) noexcept {
    if (e != 0 && in_vocabulary(e)) return e;
    switch (e) {
        case EMFILE:
        case ENFILE: return RI_ENOSPC;
        case ENOBUFS: return RI_ENOMEM;
        case EPIPE: return RI_ECONNRESET;
        case ENETDOWN: return RI_ENETUNREACH;
        default: return RI_EIO;
    }
}

/**
 * @brief A cheap, must-use status for fast paths: 0 or a positive errno value, nothing else.
 */
class [[nodiscard]] Status {
public:
    /** @brief Success. */
    constexpr Status() noexcept = default;
    /** @brief A status from an errno value (0 is success). */
    constexpr explicit Status(int code) noexcept : code_(code) {}
    /** @brief True on success. */
    [[nodiscard]] constexpr bool ok() const noexcept { return code_ == 0; }
    /** @brief True on success. */
    constexpr explicit operator bool() const noexcept { return ok(); }
    /** @brief The errno value (0 on success), for the C ABI. */
    [[nodiscard]] constexpr int code() const noexcept { return code_; }
    /** @brief Symbolic name, e.g. "EAGAIN". */
    [[nodiscard]] constexpr std::string_view name() const noexcept { return errno_name(code_); }
    /** @brief Human-readable description from the C library. */
    [[nodiscard]] std::string describe() const { return std::strerror(code_); }
    /** @brief Equal when the codes are equal. */
    friend constexpr bool operator==(Status a, Status b) noexcept { return a.code_ == b.code_; }

private:
    int code_ = 0;
};

/**
 * @brief An error for slow paths: an errno value and a message that says what was wrong and what to do.
 */
class Error {
public:
    /** @brief An error with code @p code (nonzero) and message @p message. */
    Error(int code, std::string message) : code_(code), message_(std::move(message)) {}
    /**
     * @brief An error with a protocol-specific detail word, e.g. the iWARP Terminate code a failure must be
     *        reported to the peer with.
     */
    Error(int code, std::string message, uint32_t detail)
        : code_(code), message_(std::move(message)), detail_(detail) {}
    /** @brief The errno value. */
    [[nodiscard]] int code() const noexcept { return code_; }
    /** @brief The message, without the code. */
    [[nodiscard]] const std::string &message() const noexcept { return message_; }
    /** @brief The protocol-specific detail word (0 when none was given). */
    [[nodiscard]] uint32_t detail() const noexcept { return detail_; }
    /** @brief The status of this error, for fast-path callers and the C ABI. */
    [[nodiscard]] Status status() const noexcept { return Status(code_); }
    /** @brief "message (EINVAL)". */
    [[nodiscard]] std::string to_string() const {
        return message_ + " (" + std::string(errno_name(code_)) + ")";
    }

private:
    int code_;
    std::string message_;
    uint32_t detail_ = 0;
};

/**
 * @brief A value of type T or an Error. Must be used: dropping one silently loses an error.
 */
template <class T>
class [[nodiscard]] Expected {
public:
    /** @brief A value. */
    Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
    /** @brief An error. */
    Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(google-explicit-constructor)
    /** @brief True when a value is held. */
    [[nodiscard]] bool has_value() const noexcept { return v_.index() == 0; }
    /** @brief True when a value is held. */
    explicit operator bool() const noexcept { return has_value(); }
    /** @brief The value; only when has_value(). */
    [[nodiscard]] T &value() & { return std::get<0>(v_); }
    /** @brief The value; only when has_value(). */
    [[nodiscard]] const T &value() const & { return std::get<0>(v_); }
    /** @brief The value, moved out; only when has_value(). */
    [[nodiscard]] T &&value() && { return std::get<0>(std::move(v_)); }
    /** @brief The value; only when has_value(). */
    T *operator->() { return &value(); }
    /** @brief The value; only when has_value(). */
    const T *operator->() const { return &value(); }
    /** @brief The value; only when has_value(). */
    T &operator*() & { return value(); }
    /** @brief The value; only when has_value(). */
    const T &operator*() const & { return value(); }
    /** @brief The value, moved out; only when has_value(). */
    T &&operator*() && { return std::move(*this).value(); }
    /** @brief The error; only when !has_value(). */
    [[nodiscard]] const Error &error() const & { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

/** @brief Success or an Error, for slow-path operations without a result. */
template <>
class [[nodiscard]] Expected<void> {
public:
    /** @brief Success. */
    Expected() = default;
    /** @brief An error. */
    Expected(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT(google-explicit-constructor)
    /** @brief True on success. */
    [[nodiscard]] bool has_value() const noexcept { return !failed_; }
    /** @brief True on success. */
    explicit operator bool() const noexcept { return has_value(); }
    /** @brief The error; only when !has_value(). */
    [[nodiscard]] const Error &error() const & { return error_; }
    /** @brief True on success (as Status::ok(), so a Status-returning call can become this one). */
    [[nodiscard]] bool ok() const noexcept { return !failed_; }
    /** @brief 0 on success, else the error's code (as Status::code()). */
    [[nodiscard]] int code() const noexcept { return failed_ ? error_.code() : 0; }

private:
    Error error_{0, {}};
    bool failed_ = false;
};

}  // namespace rdma

#endif  // RNICPI_CPP_STATUS_HPP
