/**
 * @file log.hpp
 * @brief Logging for the access layers, daemons and tools: leveled, printf-style, one replaceable sink.
 *
 * The level comes from the environment variable OPENRDMA_LOG (error, warn, info, debug) or from set_level();
 * disabled levels cost one relaxed atomic load. The default sink writes one line per message to stderr, which
 * systemd's journal collects for krdmad. Providers log through the ri_host_ops_t::log upcall, which host_log()
 * implements.
 */
#ifndef RNICPI_HOST_LOG_HPP
#define RNICPI_HOST_LOG_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "rnicpi/cpp/status.hpp"

namespace rdma::log {

/** @brief Message severity, from most to least severe. */
enum class Level : int {
    error = RI_LOG_ERROR, /**< An operation failed. */
    warn = RI_LOG_WARN,   /**< Something unexpected that was handled. */
    info = RI_LOG_INFO,   /**< Lifecycle events. */
    debug = RI_LOG_DEBUG  /**< Detail for troubleshooting. */
};

/**
 * @brief Receives every enabled message: level, component and the formatted text, both escaped by
 *        rdma::printable() (one line, no control character).
 */
using Sink = std::function<void(Level, std::string_view component, std::string_view message)>;

/** @brief Sets the most verbose level that is written. */
void set_level(Level level) noexcept;
/** @brief The most verbose level that is written (initially from OPENRDMA_LOG, else warn). */
[[nodiscard]] Level level() noexcept;
/** @brief True when messages of @p l are written. */
[[nodiscard]] bool enabled(Level l) noexcept;
/** @brief Parses "error", "warn", "info" or "debug". */
[[nodiscard]] Expected<Level> parse_level(std::string_view text);
/** @brief The lower-case name of a level. */
[[nodiscard]] std::string_view level_name(Level l) noexcept;
/** @brief Replaces the sink; an empty function restores the stderr sink. Returns the previous sink. */
Sink set_sink(Sink sink);
/** @brief Formats and writes a message if @p l is enabled, escaped by rdma::printable(). */
void write(Level l, std::string_view component, const char *format, ...) __attribute__((format(printf, 3, 4)));
/**
 * @brief Implementation of ri_host_ops_t::log for hosts that load providers. Warnings and errors are rate-limited
 *        (one RateLimit for all modules): a provider reports what a client did wrong through it, and a client must
 *        not be able to flood the host's log.
 */
void host_log(uint32_t level, const char *module, const char *message) noexcept;

/**
 * @brief At most @p burst messages per @p interval, as the kernel's printk_ratelimited(): the log of a daemon stays
 *        readable (and its disk unfilled) whatever a client sends. Thread-safe; costs a lock only when a message
 *        is about to be written.
 */
class RateLimit {
public:
    /** @brief Linux's defaults: 10 messages per 5 seconds. */
    explicit RateLimit(unsigned burst = 10, std::chrono::milliseconds interval = std::chrono::seconds(5)) noexcept
        : burst_(burst), interval_(interval) {}
    /**
     * @brief Whether a message may be written now. When a new interval starts after messages were held back,
     *        @p suppressed receives their number (to be reported), else 0.
     */
    [[nodiscard]] bool admit(uint64_t &suppressed) noexcept;
    /** @brief Messages held back since start. */
    [[nodiscard]] uint64_t suppressed_total() const noexcept;

private:
    mutable std::mutex mutex_;
    unsigned burst_;
    std::chrono::milliseconds interval_;
    std::chrono::steady_clock::time_point start_{};
    unsigned used_ = 0;
    uint64_t held_ = 0;   // in the current interval
    uint64_t total_ = 0;  // since start
};

/** @brief write() through @p limit: reports held-back messages once the next one is admitted. */
void write_limited(RateLimit &limit, Level l, std::string_view component, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace rdma::log

/** @brief Logs at error level: component, printf format, arguments. */
#define RDMA_LOG_ERROR(component, ...) ::rdma::log::write(::rdma::log::Level::error, component, __VA_ARGS__)
/** @brief Logs at warn level if enabled. */
#define RDMA_LOG_WARN(component, ...)                                                                            \
    do {                                                                                                         \
        if (::rdma::log::enabled(::rdma::log::Level::warn))                                                      \
            ::rdma::log::write(::rdma::log::Level::warn, component, __VA_ARGS__);                                \
    } while (0)
/** @brief Logs at info level if enabled. */
#define RDMA_LOG_INFO(component, ...)                                                                            \
    do {                                                                                                         \
        if (::rdma::log::enabled(::rdma::log::Level::info))                                                      \
            ::rdma::log::write(::rdma::log::Level::info, component, __VA_ARGS__);                                \
    } while (0)
/** @brief Logs at debug level if enabled. */
#define RDMA_LOG_DEBUG(component, ...)                                                                           \
    do {                                                                                                         \
        if (::rdma::log::enabled(::rdma::log::Level::debug))                                                     \
            ::rdma::log::write(::rdma::log::Level::debug, component, __VA_ARGS__);                               \
    } while (0)

/**
 * @brief Logs a message a client caused (a malformed request, a refusal) at @p level (warn, info, ...), at most 10
 *        per 5 seconds from this line of code, as printk_ratelimited() does: a misbehaving client cannot flood the
 *        log, and the number held back is reported with the next message written.
 */
#define RDMA_LOG_CLIENT(level, component, ...)                                                                   \
    do {                                                                                                         \
        if (::rdma::log::enabled(::rdma::log::Level::level)) {                                                   \
            static ::rdma::log::RateLimit rdma_log_limit_;                                                       \
            ::rdma::log::write_limited(rdma_log_limit_, ::rdma::log::Level::level, component, __VA_ARGS__);      \
        }                                                                                                        \
    } while (0)

#endif  // RNICPI_HOST_LOG_HPP
