/**
 * @file link.hpp
 * @brief Links: the next connections between two processes of one host, without the kAL (SMC-D's link group).
 *
 * The first connection between two processes of this host converts as every connection does, through the kAL
 * (MPA, the QPs, the byte channel). When both ends asked (KRDMA_CONVERT_LINK), the kAL also gives the two
 * processes a link: a Unix SOCK_SEQPACKET socket pair whose two ends only these two processes hold, and a token
 * (64 random bits) only they know. Their next connection converts in one exchange on its own TCP connection:
 *
 *   initiator -> responder (TCP)   LinkHello: the token and a nonce of this connection
 *   responder -> initiator (link)  LinkGift: the nonce and, by SCM_RIGHTS, one end of a byte channel it made
 *   responder -> initiator (TCP)   LinkAnswer: ok (the channel went on the link), or "no such link"
 *
 * A responder that holds no link with that token (another process accepted, a forked child, a link gone) answers
 * "no such link" and both ends go on with the kAL's conversion on the same connection: one round trip more.
 *
 * Why it is safe: only the two processes hold the link, so a gift on it comes from the peer process the kAL
 * vouched for; only the two know the token, so only the initiator can ask the responder for a channel on it; and the
 * nonce names the initiator's connection, so a gift nobody asked for is closed unread. The channel carries only the
 * stream's bytes, as the kAL's byte channel does, in memory the two processes made themselves (no registration,
 * nothing of the kAL's or an RNIC's). A stream that came this way has no QP: the extended interface refuses it
 * ("byte-channel-only"), so programs linked to the layer for that interface ask for no link (Links::enabled()).
 */
#ifndef OPENRDMA_SOCKETS_LINK_HPP
#define OPENRDMA_SOCKETS_LINK_HPP

#include <chrono>
#include <cstdint>
#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>

namespace openrdma::sockets {

/** @brief What finds an initiator's link again: the address of TCP socket @p tcp's peer (empty if it has none). */
[[nodiscard]] std::string peer_key(int tcp);

/** @brief The initiator's first bytes on a TCP connection it converts over a link. */
struct LinkHello {
    char magic[4];     /**< "ORSL". */
    uint16_t version;  /**< 1. */
    uint16_t reserved; /**< Zero. */
    uint64_t token;    /**< The link's token (krdma_link_hello). */
    uint64_t nonce;    /**< Names this connection in the responder's gift. */
};
static_assert(sizeof(LinkHello) == 24);

/** @brief The responder's answer on the TCP connection. */
struct LinkAnswer {
    char magic[4];    /**< "ORSL". */
    uint16_t version; /**< 1. */
    uint16_t status;  /**< kLinkOk, or kLinkUnknown: go on with the kAL's conversion. */
};
static_assert(sizeof(LinkAnswer) == 8);
/** @brief LinkAnswer::status: the byte channel is on the link. */
inline constexpr uint16_t kLinkOk = 0;
/** @brief LinkAnswer::status: no link with that token here; MPA follows on the same connection. */
inline constexpr uint16_t kLinkUnknown = 1;

/** @brief One link: this process's end, its token and the ring size of the channels made on it. */
class Link {
public:
    /** @brief Takes @p fd (owned). */
    Link(int fd, uint64_t token, uint64_t ring) : fd_(fd), token_(token), ring_(ring) {}
    ~Link();
    Link(const Link &) = delete;
    Link &operator=(const Link &) = delete;
    /** @brief The token both processes know. */
    [[nodiscard]] uint64_t token() const noexcept { return token_; }
    /** @brief Bytes of each ring of the channels made for it (those of the kAL's first byte channel). */
    [[nodiscard]] uint64_t ring() const noexcept { return ring_; }
    /** @brief False once the peer process closed its end (it exited, or forgot the link). */
    [[nodiscard]] bool alive() const noexcept;
    /** @brief Sends channel end @p channel for the peer's connection @p nonce; false if the link cannot take it. */
    [[nodiscard]] bool give(uint64_t nonce, int channel) noexcept;
    /**
     * @brief The channel end the peer gave for @p nonce (owned by the caller), waiting until @p until; -1 if none,
     *        and a gift for @p nonce that comes later is closed unread (its peer's stream sees this end gone).
     */
    [[nodiscard]] int take(uint64_t nonce, std::chrono::steady_clock::time_point until);
    /** @brief A nonce for this process's next connection over the link: unique on it, not secret. */
    [[nodiscard]] uint64_t next_nonce() noexcept { return nonces_.fetch_add(1, std::memory_order_relaxed); }
    /** @brief Most gifts kept for nonces nobody took yet; beyond, the oldest is closed. */
    static constexpr size_t kGiftsKept = 64;

private:
    void read_all_locked();
    int take_locked(uint64_t nonce);  // the gift for @p nonce, if it came (-1 if not)
    const int fd_;
    const uint64_t token_;
    const uint64_t ring_;
    std::mutex mutex_;
    std::map<uint64_t, int> gifts_;   // channels given for nonces nobody has taken yet
    std::set<uint64_t> abandoned_;    // nonces whose wait ended without their gift: closed when it comes
    std::atomic<uint64_t> nonces_{1};
};

/** @brief How an exchange over a link ended. */
enum class LinkOutcome {
    channel, /**< The byte channel came: the connection is converted. */
    unknown, /**< Not over a link (no hello came, or the responder knows no such link): MPA follows. */
    failed   /**< The connection broke, or the peer broke the exchange's rules: the caller resets it. */
};

/**
 * @brief The initiator's side on TCP socket @p tcp over link @p link: the hello, then the answer (until @p until),
 *        then the channel from the link: its end in @p bell.
 */
[[nodiscard]] LinkOutcome link_initiate(int tcp, Link &link, int &bell, std::chrono::steady_clock::time_point until,
                                        std::string &why);
/**
 * @brief The responder's side on TCP socket @p tcp: waits until @p until for the first bytes; when they are a
 *        hello, takes it and answers it (a channel made and given on the link it names: its other end in @p bell;
 *        or "unknown"). Anything else is left unread for MPA.
 */
[[nodiscard]] LinkOutcome link_respond(int tcp, int &bell, std::chrono::steady_clock::time_point until,
                                       std::string &why);

/** @brief This process's links. Thread-safe. */
class Links {
public:
    /** @brief The process's links. */
    static Links &get();
    /**
     * @brief Whether this process asks for links: not when OPENRDMA_SOCKETS_LINKS=0, nor in a program linked to the
     *        layer itself (one that uses the extended interface, which needs every stream's QP).
     */
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }
    /**
     * @brief Takes link end @p fd (owned) that the kAL gave with a connection whose byte channel has rings of
     *        @p ring bytes; an initiator's is found again by @p peer (its peer's address), a responder's by token.
     */
    void adopt(int fd, const std::string &peer, uint64_t ring);
    /** @brief The live link to the process at @p peer, or null. */
    [[nodiscard]] std::shared_ptr<Link> to(const std::string &peer);
    /** @brief The live link with @p token, or null. */
    [[nodiscard]] std::shared_ptr<Link> with(uint64_t token);
    /** @brief Links held (live or not yet found dead). */
    [[nodiscard]] size_t count();
    /** @brief Forgets every link (a forked child: they are the parent's). */
    void forget() noexcept;
    /** @brief forget() on the process's links if it has any (pthread_atfork's child handler). */
    static void forget_in_child() noexcept;

private:
    Links();
    bool enabled_ = false;
    std::mutex mutex_;
    std::map<uint64_t, std::shared_ptr<Link>> by_token_;
    std::map<std::string, uint64_t> by_peer_;
};

}  // namespace openrdma::sockets

#endif  // OPENRDMA_SOCKETS_LINK_HPP
