/**
 * @file message.hpp
 * @brief Sending and receiving /dev/krdma messages on a SOCK_SEQPACKET socket, with descriptors.
 *
 * Shared by the kAL's device server and the uAL's device client. Received descriptors are owned by the Message
 * (closed when it is destroyed unless taken), so no descriptor leaks on any error path.
 */
#ifndef KRDMA_MESSAGE_HPP
#define KRDMA_MESSAGE_HPP

#include <sys/un.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "krdma/abi.h"
#include "rnicpi/cpp/status.hpp"

namespace krdma {

/** @brief An owned file descriptor. */
class UniqueFd {
public:
    UniqueFd() noexcept = default;
    /** @brief Takes ownership of @p fd. */
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    /** @brief Takes the descriptor of @p o. */
    UniqueFd(UniqueFd &&o) noexcept : fd_(o.release()) {}
    /** @brief Closes the held descriptor and takes the one of @p o. */
    UniqueFd &operator=(UniqueFd &&o) noexcept;
    UniqueFd(const UniqueFd &) = delete;
    UniqueFd &operator=(const UniqueFd &) = delete;
    /** @brief Closes the descriptor. */
    ~UniqueFd() { reset(); }
    /** @brief The descriptor, or -1. */
    [[nodiscard]] int get() const noexcept { return fd_; }
    /** @brief Gives up ownership. */
    int release() noexcept {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    /** @brief Closes the descriptor held, if any. */
    void reset(int fd = -1) noexcept;
    /** @brief True when a descriptor is held. */
    explicit operator bool() const noexcept { return fd_ >= 0; }

private:
    int fd_ = -1;
};

/** @brief One received or to-be-sent message: header, payload and descriptors. */
struct Message {
    krdma_msg_hdr hdr{};                           /**< Header. */
    std::array<uint8_t, KRDMA_MAX_MESSAGE> body{}; /**< Payload bytes (hdr.length - sizeof hdr of them). */
    std::array<UniqueFd, KRDMA_MAX_FDS> fds;       /**< Descriptors received or to send. */
    size_t nfds = 0;                               /**< Entries used in Message::fds. */
    /**
     * @brief The message is whole but the descriptors it carried did not all arrive (MSG_CTRUNC: the receiver is at
     *        its RLIMIT_NOFILE); none is kept. The receiver answers or reports that, rather than drop the message.
     */
    bool fds_lost = false;

    /** @brief Payload length. */
    [[nodiscard]] size_t payload_len() const noexcept { return hdr.length - sizeof(krdma_msg_hdr); }
    /** @brief The payload. */
    [[nodiscard]] std::span<const uint8_t> payload() const noexcept { return {body.data(), payload_len()}; }
};

/** @brief Result of receive(): a message, the peer closing, or a malformed message already answered. */
enum class RecvResult {
    message, /**< A well-formed message is in the Message. */
    closed,  /**< The peer closed the connection. */
    again,   /**< Nothing to read now (non-blocking socket). */
    invalid  /**< Malformed (truncated, too long, inconsistent length); hdr holds what could be read. */
};

/**
 * @brief Receives one message from @p fd into @p m. Descriptors are taken with MSG_CMSG_CLOEXEC; more than
 *        ::KRDMA_MAX_FDS, or descriptors in a malformed message, are closed. Never blocks unless @p wait, in which
 *        case a blocking socket waits for a message (or its SO_RCVTIMEO: RecvResult::again).
 */
[[nodiscard]] RecvResult receive(int fd, Message &m, bool wait = false) noexcept;

/**
 * @brief Sends header @p hdr (its length is set here) with @p payload and @p fds as one packet; without @p wait
 *        (MSG_DONTWAIT) a full socket answers EAGAIN even when it is a blocking one.
 * @return ::RI_EMSGSIZE for an oversized message, or the errno of sendmsg.
 */
[[nodiscard]] rdma::Status send(int fd, krdma_msg_hdr hdr, std::span<const uint8_t> payload,
                                std::span<const int> fds = {}, bool wait = true) noexcept;

/** @brief The socket address of device path @p path; false when the path does not fit a sockaddr_un. */
[[nodiscard]] bool unix_address(const std::filesystem::path &path, sockaddr_un &out) noexcept;

/** @brief The request struct size a command code announces (_IOC_SIZE). */
[[nodiscard]] constexpr size_t command_size(uint32_t cmd) noexcept { return _IOC_SIZE(cmd); }

/**
 * @brief Fills the private_data and private_data_len of @p record (a connection request, reply or event) with
 *        @p data, cut to the record's capacity (::KRDMA_MAX_PRIVATE_DATA).
 */
template <class Record>
void set_private_data(Record &record, std::span<const uint8_t> data) noexcept {
    const size_t n = std::min(data.size(), sizeof record.private_data);
    record.private_data_len = static_cast<uint16_t>(n);
    if (n > 0) std::memcpy(record.private_data, data.data(), n);
}

}  // namespace krdma

#endif  // KRDMA_MESSAGE_HPP
