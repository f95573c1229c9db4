/**
 * @file rendezvous.hpp
 * @brief The same-host path between kALs of one host (one per network namespace): where they meet, and the offer
 *        one makes the others for a connection whose other end it may not hold.
 *
 * Each kAL with `llp.same_host.rendezvous` set listens on a Unix socket in that directory (kal-PID.sock; the
 * directory is root's, 0700, and each answer checks that the caller is of the kAL's own user). A kAL about to answer
 * an MPA request offers the connection to the others, its TCP socket attached: a kAL that holds the other end, in
 * setup, proves with both sockets' sequence numbers that they are one connection (llp::one_connection), makes the
 * channel, keeps one end for its endpoint and answers with the other. The offer is made before the MPA reply is
 * written, so the initiator's kAL still holds its end in setup, waiting for that reply.
 *
 * One thread (the device server's); an offer waits for each answer at most a budget, and serves other kALs' offers
 * meanwhile, so that two kALs offering to each other at once do not wait on each other.
 */
#ifndef KAL_ENDPOINT_RENDEZVOUS_HPP
#define KAL_ENDPOINT_RENDEZVOUS_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>

#include "krdma/message.hpp"
#include "server.hpp"
#include "socket_ends.hpp"

namespace kal {

/** @brief A connection one kAL offers the others (fixed layout; kALs of one host run one build). */
struct RendezvousOffer {
    uint32_t magic = 0;             /**< kRendezvousMagic. */
    uint32_t version = 0;           /**< kRendezvousVersion. */
    llp::StreamEnd local;           /**< The offering end of the connection. */
    llp::StreamEnd remote;          /**< The other end. */
    uint32_t vendor_id = 0;         /**< The offering QP's RNIC: only one of the same provider pairs with it. */
    uint32_t vendor_part_id = 0;    /**< Likewise. */
    uint64_t ring_bytes = 0;        /**< Each direction's ring. */
};

static_assert(std::is_trivially_copyable_v<RendezvousOffer>, "an offer travels as its bytes");

/** @brief The answer: paired (the channel's end attached) or not. */
struct RendezvousAnswer {
    uint32_t magic = 0;   /**< kRendezvousMagic. */
    uint32_t paired = 0;  /**< 1: a channel end is attached. */
};

inline constexpr uint32_t kRendezvousMagic = 0x6b72647a;  // "krdz"
inline constexpr uint32_t kRendezvousVersion = 1;

/** @brief This kAL's place in the rendezvous directory, and its offers to the others. */
class Rendezvous {
public:
    /**
     * @brief What answers an offer: given the offer and the offering kAL's socket (borrowed), the channel end to send
     *        back (its endpoint kept the other), or an empty descriptor.
     */
    using Answer = std::function<krdma::UniqueFd(const RendezvousOffer &, int tcp)>;

    /** @brief Listens in @p dir (made 0700 when missing; refused when another user may write it). */
    Rendezvous(DeviceServer &server, std::string dir, Answer answer);
    ~Rendezvous();
    Rendezvous(const Rendezvous &) = delete;
    Rendezvous &operator=(const Rendezvous &) = delete;

    /** @brief Whether it listens (else the reason was logged, and offers find nobody). */
    [[nodiscard]] bool listening() const noexcept { return static_cast<bool>(listener_); }

    /**
     * @brief Offers connection @p o (TCP socket @p tcp) to every other kAL of the directory, in turn, until one
     *        pairs it; waits at most @p wait for each answer. A kAL that did not answer in time is left out of the
     *        offers for kQuietFor (a stopped or hung kAL would otherwise hold up every connection this one
     *        accepts). The channel end the pairing kAL sent, or empty.
     */
    [[nodiscard]] krdma::UniqueFd offer(const RendezvousOffer &o, int tcp, std::chrono::milliseconds wait);

    /** @brief How long a kAL that did not answer an offer in time is offered nothing. */
    static constexpr std::chrono::seconds kQuietFor{10};

private:
    void on_listener();
    // Reads the offer on connection @p fd (at most @p wait for it to come), answers it, and closes it.
    void serve(int fd, int wait_ms);

    DeviceServer &server_;
    std::string dir_;
    std::string path_;  // our socket's
    Answer answer_;
    krdma::UniqueFd listener_;
    std::map<int, krdma::UniqueFd> waiting_;  // accepted connections whose offer has not come yet
    std::map<std::string, std::chrono::steady_clock::time_point> quiet_;  // kALs left out until then
};

}  // namespace kal

#endif  // KAL_ENDPOINT_RENDEZVOUS_HPP
