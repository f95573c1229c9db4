/**
 * @file policy.hpp
 * @brief Which connections the sockets layer accelerates: the administrator's file (/etc/krdma/sockets.json), the
 *        user's environment (OPENRDMA_SOCKETS, OPENRDMA_SOCKETS_POLICY), first matching rule wins.
 *
 * @code{.json}
 * {
 *   "enabled": true,
 *   "programs": {"exclude": ["sshd"]},
 *   "rules": [
 *     {"action": "tcp", "ports": "22"},
 *     {"action": "rdma", "addresses": "10.0.0.0/8", "ports": "1024-65535"}
 *   ],
 *   "default": "rdma"
 * }
 * @endcode
 * A client's rules match the address and port it connects to; a server's, the address and port it listens on.
 */
#ifndef OPENRDMA_SOCKETS_POLICY_HPP
#define OPENRDMA_SOCKETS_POLICY_HPP

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rnicpi/cpp/status.hpp"

namespace openrdma::sockets {

/** @brief The default policy file. */
inline constexpr const char *kPolicyFile = "/etc/krdma/sockets.json";

/** @brief The parsed policy. */
class Policy {
public:
    /** @brief One rule. */
    struct Rule {
        bool rdma = true;                 /**< The action: accelerate, or leave as TCP. */
        bool any_address = true;          /**< No "addresses": every address. */
        int family = 0;                   /**< AF_INET or AF_INET6 of the prefix. */
        std::array<uint8_t, 16> net{};    /**< The prefix's address bytes. */
        unsigned prefix = 0;              /**< Its length in bits. */
        std::vector<std::pair<uint16_t, uint16_t>> ports; /**< Port ranges; empty: every port. */
        std::string text;                 /**< As written, for the reasons the layer reports. */
    };

    /** @brief Parses @p json (the file's text); the error names what is wrong. */
    [[nodiscard]] static rdma::Expected<Policy> parse(const std::string &json);
    /**
     * @brief The policy of this process: OPENRDMA_SOCKETS=off (or 0) turns the layer off; OPENRDMA_SOCKETS_POLICY is a
     *        file, or the JSON itself when it starts with '{'; else kPolicyFile; else everything is accelerated.
     */
    [[nodiscard]] static rdma::Expected<Policy> load();

    /** @brief False when the layer is off for this process (the switch, or the program is excluded). */
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }
    /** @brief Whether a connection to (or listener on) @p addr is accelerated; @p why gets the deciding rule. */
    [[nodiscard]] bool accelerate(const sockaddr *addr, socklen_t len, std::string *why = nullptr) const;

private:
    bool enabled_ = true;
    bool default_rdma_ = true;
    std::vector<Rule> rules_;
    std::vector<std::string> include_, exclude_;
};

/** @brief The name this process runs as (the executable's base name). */
[[nodiscard]] std::string program_name();

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_POLICY_HPP
