/**
 * @file syscall_reply.hpp
 * @brief The kVP's side of a uVP's privileged request (ri_syscall_t): its private data read into a typed struct,
 *        private data, results and descriptors written back. Header only, for kVPs written with provider.hpp;
 *        nothing of it crosses the ABI. The uVP's side is syscall_request.hpp.
 *
 * Every private block of provider class @p P starts with a header `{uint32_t version; uint32_t size;}` named
 * `hdr`, and @p P declares `static constexpr uint32_t private_abi_version` (major in the upper 16 bits). A block
 * from a uVP of another major version is refused with ::RI_EPROTO and a log line that says what to install.
 * Sizes are checked before anything is copied: a block too short to read or a buffer too small to hold a reply
 * is an error, never a truncated copy.
 */
#ifndef RNICPI_CPP_SYSCALL_REPLY_HPP
#define RNICPI_CPP_SYSCALL_REPLY_HPP

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "rnicpi/cpp/provider.hpp"

namespace rdma::provider {

/** @brief The kVP's reply to one ri_syscall of the provider implemented by class @p P; the call stays the kAL's. */
template <class P>
class SyscallReply {
public:
    /** @brief The reply to @p call. */
    explicit SyscallReply(ri_syscall_t &call) noexcept : c_(call) {}

    /** @brief The request came with private data: it comes from this provider's uVP, not a generic caller. */
    [[nodiscard]] bool has_priv() const noexcept { return c_.priv_in_len != 0; }

    /**
     * @brief Reads the request's private block into @p out. ::RI_EINVAL when it is shorter than @p T,
     *        ::RI_EPROTO (and a log line) when the uVP's major version is not ours. A longer block is a uVP of a
     *        newer minor version: its extension is after the part this kVP knows, which is what it reads.
     */
    template <class T>
    [[nodiscard]] ri_status_t read_priv(T *out) const {
        static_assert(std::is_trivially_copyable_v<T>, "private blocks are plain C structs");
        if (c_.priv_in == nullptr || c_.priv_in_len < sizeof(T)) return RI_EINVAL;
        std::memcpy(out, c_.priv_in, sizeof(T));
        if ((out->hdr.version >> 16) != kMajor) {
            say_mismatch(out->hdr.version >> 16);
            return RI_EPROTO;
        }
        return RI_OK;
    }

    /** @brief Reads the verb's parameter block into @p out; ::RI_EINVAL when it is shorter than @p T. */
    template <class T>
    [[nodiscard]] ri_status_t read_param(T *out) const noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "parameter blocks are plain C structs");
        if (c_.param == nullptr || c_.param_len < sizeof(T)) return RI_EINVAL;
        std::memcpy(out, c_.param, sizeof(T));
        return RI_OK;
    }

    /**
     * @brief ::RI_EOVERFLOW unless the caller's buffers hold a private reply of @p priv_bytes, a result of
     *        @p result_bytes and @p fds descriptors. A create verb checks this before it creates, so that an object
     *        is never made whose reply cannot be delivered.
     */
    [[nodiscard]] ri_status_t check_room(size_t priv_bytes, size_t result_bytes, uint32_t fds) const noexcept {
        if (c_.priv_out_cap < priv_bytes || c_.result_cap < result_bytes || c_.nfds_out_cap < fds) {
            return RI_EOVERFLOW;
        }
        return RI_OK;
    }

    /** @brief Room for @p n more descriptors. */
    [[nodiscard]] bool fd_room(uint32_t n) const noexcept {
        return c_.nfds_out <= c_.nfds_out_cap && c_.nfds_out_cap - c_.nfds_out >= n;
    }

    /** @brief Writes @p reply as the private reply, stamped with our version and size; ::RI_EOVERFLOW if no room. */
    template <class T>
    [[nodiscard]] ri_status_t write_priv(T reply) noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "private blocks are plain C structs");
        if (c_.priv_out == nullptr || c_.priv_out_cap < sizeof(T)) return RI_EOVERFLOW;
        reply.hdr.version = P::private_abi_version;
        reply.hdr.size = sizeof(T);
        std::memcpy(c_.priv_out, &reply, sizeof(T));
        c_.priv_out_len = sizeof(T);
        return RI_OK;
    }

    /**
     * @brief write_priv() for a reply that grew with minor versions: a uVP of an older minor version knows (and has
     *        room for) its first @p bytes only, so only those are written, and hdr.size says how many (the uVP's
     *        room does not reach the kVP through the kAL; its request's version says which reply it knows).
     *        ::RI_EOVERFLOW when the caller's buffer cannot hold them.
     */
    template <class T>
    [[nodiscard]] ri_status_t write_priv_prefix(T reply, size_t bytes) noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "private blocks are plain C structs");
        const size_t n = bytes < sizeof(T) ? bytes : sizeof(T);
        if (c_.priv_out == nullptr || c_.priv_out_cap < n || n < sizeof reply.hdr) return RI_EOVERFLOW;
        reply.hdr.version = P::private_abi_version;
        reply.hdr.size = static_cast<uint32_t>(n);
        std::memcpy(c_.priv_out, &reply, n);
        c_.priv_out_len = static_cast<uint32_t>(n);
        return RI_OK;
    }

    /** @brief Writes @p value as the verb's result block; ::RI_EOVERFLOW if the caller's buffer cannot hold it. */
    template <class T>
    [[nodiscard]] ri_status_t write_result(const T &value) noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "result blocks are plain C structs");
        if (c_.result == nullptr || c_.result_cap < sizeof(T)) return RI_EOVERFLOW;
        std::memcpy(c_.result, &value, sizeof(T));
        c_.result_len = sizeof(T);
        return RI_OK;
    }

    /**
     * @brief Passes descriptor @p fd to the uVP: the kAL sends it and closes it. ::RI_EOVERFLOW when there is no
     *        room, and then @p fd stays the caller's.
     */
    [[nodiscard]] ri_status_t pass_fd(int fd) noexcept {
        if (c_.fds_out == nullptr || !fd_room(1)) return RI_EOVERFLOW;
        c_.fds_out[c_.nfds_out++] = fd;
        return RI_OK;
    }

    /**
     * @brief Passes a duplicate of @p fd, which stays the caller's: for memory the kVP keeps using. ::RI_EOVERFLOW
     *        when there is no room, ::RI_ENOSPC when no duplicate can be made (the descriptor table is full).
     */
    [[nodiscard]] ri_status_t pass_dup(int fd) noexcept {
        if (c_.fds_out == nullptr || !fd_room(1)) return RI_EOVERFLOW;
        const int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (d < 0) return RI_ENOSPC;
        c_.fds_out[c_.nfds_out++] = d;
        return RI_OK;
    }

    /** @brief Closes the descriptors passed so far: the reply is abandoned and the kAL will send none of them. */
    void drop_fds() noexcept {
        for (uint32_t i = 0; i < c_.nfds_out; ++i) ::close(c_.fds_out[i]);
        c_.nfds_out = 0;
    }

private:
    static constexpr uint32_t kMajor = P::private_abi_version >> 16;

    static void say_mismatch(uint32_t theirs) {
        const ri_host_ops_t &h = Module<P>::host();
        if (h.log == nullptr) return;
        const std::string name = P::name;
        const std::string text = name + " uVP private ABI " + std::to_string(theirs) + " does not match the kVP's " +
                                 std::to_string(kMajor) + ": install matching " + name + "_kvp.so and " + name +
                                 "_uvp.so";
        h.log(RI_LOG_ERROR, P::name, text.c_str());
    }

    ri_syscall_t &c_;
};

}  // namespace rdma::provider

#endif  // RNICPI_CPP_SYSCALL_REPLY_HPP
