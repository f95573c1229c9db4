// Logging: leveled messages to a replaceable sink (stderr by default).
#include "rnicpi/host/log.hpp"

#include "rnicpi/host/printable.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace rdma::log {
namespace {

Level initial_level() noexcept {
    const char *env = std::getenv("OPENRDMA_LOG");
    if (env == nullptr) return Level::warn;
    auto parsed = parse_level(env);
    return parsed ? *parsed : Level::warn;
}

void stderr_sink(Level l, std::string_view component, std::string_view message) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm local{};
    localtime_r(&ts.tv_sec, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", &local);
    // One fprintf per line so concurrent writers do not interleave within a line.
    std::fprintf(stderr, "%s.%03ld %s[%d] %s: %.*s\n", stamp, ts.tv_nsec / 1000000, level_name(l).data(),
                 static_cast<int>(getpid()), std::string(component).c_str(), static_cast<int>(message.size()),
                 message.data());
}

struct State {
    std::atomic<int> level{static_cast<int>(initial_level())};
    std::mutex mutex;
    Sink sink;
};

State &state() {
    static State s;  // function-local: no static constructor runs before main
    return s;
}

}  // namespace

void set_level(Level l) noexcept { state().level.store(static_cast<int>(l), std::memory_order_relaxed); }

Level level() noexcept { return static_cast<Level>(state().level.load(std::memory_order_relaxed)); }

bool enabled(Level l) noexcept {
    return static_cast<int>(l) <= state().level.load(std::memory_order_relaxed);
}

Expected<Level> parse_level(std::string_view text) {
    if (text == "error") return Level::error;
    if (text == "warn" || text == "warning") return Level::warn;
    if (text == "info") return Level::info;
    if (text == "debug") return Level::debug;
    return Error(RI_EINVAL, "unknown log level '" + std::string(text) + "': use error, warn, info or debug");
}

std::string_view level_name(Level l) noexcept {
    switch (l) {
        case Level::error: return "error";
        case Level::warn: return "warn";
        case Level::info: return "info";
        case Level::debug: return "debug";
    }
    return "?";
}

Sink set_sink(Sink sink) {
    State &s = state();
    std::lock_guard lock(s.mutex);
    Sink previous = std::move(s.sink);
    s.sink = std::move(sink);
    return previous;
}

void write(Level l, std::string_view component, const char *format, ...) {
    if (!enabled(l)) return;
    char buffer[1024];
    va_list args;
    va_start(args, format);
    int n = std::vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    if (n < 0) return;
    std::string_view message(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
    // Names and reasons in a message may come from a client, a peer or a module: escaped here, once for every
    // caller, no message can split a log line or send the terminal that shows it a control sequence.
    std::string escaped_message, escaped_component;
    if (!is_printable(message)) message = escaped_message = printable(message);
    if (!is_printable(component)) component = escaped_component = printable(component);
    State &s = state();
    std::lock_guard lock(s.mutex);
    if (s.sink) {
        s.sink(l, component, message);
    } else {
        stderr_sink(l, component, message);
    }
}

bool RateLimit::admit(uint64_t &suppressed) noexcept {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    suppressed = 0;
    if (start_ == std::chrono::steady_clock::time_point{} || now - start_ >= interval_) {
        start_ = now;
        used_ = 0;
        suppressed = held_;
        held_ = 0;
    }
    if (used_ < burst_) {
        ++used_;
        return true;
    }
    ++held_;
    ++total_;
    return false;
}

uint64_t RateLimit::suppressed_total() const noexcept {
    std::lock_guard lock(mutex_);
    return total_;
}

void write_limited(RateLimit &limit, Level l, std::string_view component, const char *format, ...) {
    if (!enabled(l)) return;
    uint64_t held = 0;
    if (!limit.admit(held)) return;
    if (held > 0) {
        write(l, component, "%llu similar message(s) suppressed (at most 10 per 5 s are logged)",
              static_cast<unsigned long long>(held));
    }
    char buffer[1024];
    va_list args;
    va_start(args, format);
    const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    if (n < 0) return;
    write(l, component, "%s", buffer);
}

void host_log(uint32_t level, const char *module, const char *message) noexcept {
    // The level comes from a loaded module: clamp it instead of trusting it.
    Level l = level > RI_LOG_DEBUG ? Level::debug : static_cast<Level>(level);
    try {
        if (l <= Level::warn) {
            // What a provider reports as wrong is mostly a client's doing (malformed private data, a bad request).
            static RateLimit limit(20);
            write_limited(limit, l, module != nullptr ? module : "provider", "%s", message != nullptr ? message : "");
            return;
        }
        write(l, module != nullptr ? module : "provider", "%s", message != nullptr ? message : "");
    } catch (...) {
        // A failing sink must not unwind into provider code.
    }
}

}  // namespace rdma::log
