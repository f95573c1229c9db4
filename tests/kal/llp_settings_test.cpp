// LLP settings: krdmad's "llp" configuration section (values, defaults, strictness) and the liveness options the
// kAL sets on a real loopback connection before handing it to a consumer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>

#include <gtest/gtest.h>

#include "config.hpp"
#include "llp_settings.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;

int option(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    EXPECT_EQ(::getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

// A connected loopback TCP socket (the listener and the accepted end close with it). @p configure gets the listening
// socket before it listens.
struct Loopback {
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int server = -1;
    explicit Loopback(const std::function<void(int)> &configure = {}) {
        if (configure) configure(listener);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        EXPECT_EQ(::listen(listener, 1), 0);
        EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr *>(&a), &len), 0);
        EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    }
    ~Loopback() {
        for (int fd : {server, client, listener}) {
            if (fd >= 0) ::close(fd);
        }
    }
};

TEST(LlpSettings, ConfigurationSectionSetsEveryValue) {
    auto c = kal::parse_config(R"({"llp": {"connect_timeout_ms": 1500, "request_timeout_ms": 700,
        "accept_timeout_ms": 900, "max_pending_requests": 16, "user_timeout_ms": 2500, "keepalive_idle_s": 3,
        "keepalive_interval_s": 2, "keepalive_count": 4}})");
    ASSERT_OK(c) << c.error().message();
    EXPECT_EQ(c->llp.connect_timeout, 1500ms);
    EXPECT_EQ(c->llp.request_timeout, 700ms);
    EXPECT_EQ(c->llp.accept_timeout, 900ms);
    EXPECT_EQ(c->llp.max_pending, 16u);
    EXPECT_EQ(c->llp.user_timeout, 2500ms);
    EXPECT_EQ(c->llp.keepalive_idle, 3s);
    EXPECT_EQ(c->llp.keepalive_interval, 2s);
    EXPECT_EQ(c->llp.keepalive_count, 4u);
}

TEST(LlpSettings, DefaultsDetectADeadPeerInMinutesNotTcpsQuarterHour) {
    auto c = kal::parse_config("{}");
    ASSERT_OK(c);
    EXPECT_EQ(c->llp.user_timeout, 60s);
    EXPECT_EQ(c->llp.keepalive_idle, 60s);
    EXPECT_GT(c->llp.keepalive_interval.count(), 0);
    EXPECT_GT(c->llp.keepalive_count, 0u);
}

TEST(LlpSettings, TheSameHostPathIsOnByDefaultWithHalfAMebibyteRings) {
    auto d = kal::parse_config("{}");
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_TRUE(d->llp.same_host.enabled);
    EXPECT_EQ(d->llp.same_host.ring_bytes, 524288u);
    auto c = kal::parse_config(R"({"llp": {"same_host": {"enabled": false, "ring_bytes": 4096}}})");
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_FALSE(c->llp.same_host.enabled);
    EXPECT_EQ(c->llp.same_host.ring_bytes, 4096u);
    auto only_size = kal::parse_config(R"({"llp": {"same_host": {"ring_bytes": 1048576}}})");
    ASSERT_TRUE(only_size) << only_size.error().message();
    EXPECT_TRUE(only_size->llp.same_host.enabled);
    EXPECT_EQ(only_size->llp.same_host.ring_bytes, 1048576u);
    EXPECT_TRUE(d->llp.same_host.rendezvous.empty()) << "other kALs of the host are met only where configured";
    auto meet = kal::parse_config(R"({"llp": {"same_host": {"rendezvous": "/run/krdma/same-host"}}})");
    ASSERT_TRUE(meet) << meet.error().message();
    EXPECT_EQ(meet->llp.same_host.rendezvous, "/run/krdma/same-host");
}

TEST(LlpSettings, BadValuesNameTheKey) {
    struct Case {
        const char *json;
        const char *message;
    } cases[] = {
        {R"({"llp": {"user_timeout": 5}})", "unknown key config.llp.user_timeout"},
        {R"({"llp": {"user_timeout_ms": -1}})", "config.llp.user_timeout_ms must be a non-negative integer"},
        {R"({"llp": {"keepalive_count": 1000}})", "config.llp.keepalive_count must be at most 127"},
        {R"({"llp": {"keepalive_idle_s": 5, "keepalive_interval_s": 0}})", "keepalive needs"},
        {R"({"llp": {"connect_timeout_ms": 0}})", "setup timeouts must be positive"},
        {R"({"llp": 3})", "config.llp must be an object"},
        {R"({"llp": {"same_host": true}})", "config.llp.same_host must be an object"},
        {R"({"llp": {"same_host": {"ring": 4096}}})", "unknown key config.llp.same_host.ring"},
        {R"({"llp": {"same_host": {"enabled": 1}}})", "config.llp.same_host.enabled must be true or false"},
        {R"({"llp": {"same_host": {"ring_bytes": 100000}}})", "config.llp.same_host.ring_bytes must be a power of two"},
        {R"({"llp": {"same_host": {"ring_bytes": 2048}}})", "config.llp.same_host.ring_bytes must be a power of two"},
        {R"({"llp": {"same_host": {"ring_bytes": 2147483648}}})", "from 4096 to 1073741824"},
        {R"({"llp": {"same_host": {"rendezvous": "run/krdma"}}})", "rendezvous must be an absolute directory path"},
        {R"({"llp": {"same_host": {"rendezvous": 1}}})", "config.llp.same_host.rendezvous"},
    };
    for (const Case &k : cases) {
        auto c = kal::parse_config(k.json);
        ASSERT_FALSE(c) << k.json;
        EXPECT_NE(c.error().message().find(k.message), std::string::npos) << c.error().message();
    }
}

// Liveness settings unlike the defaults (a 2.5 s user timeout, keepalive after 3 s, every 2 s, 4 probes), so that
// the options read back prove they were set.
kal::LlpSettings short_liveness() {
    kal::LlpSettings s;
    s.user_timeout = 2500ms;
    s.keepalive_idle = 3s;
    s.keepalive_interval = 2s;
    s.keepalive_count = 4;
    return s;
}

TEST(LlpSettings, LivenessOptionsLandOnTheSocket) {
    Loopback l;
    ASSERT_GE(l.server, 0);
    const kal::LlpSettings s = short_liveness();
    ASSERT_OK(kal::llp::set_liveness(l.client, s));
    EXPECT_EQ(option(l.client, IPPROTO_TCP, TCP_USER_TIMEOUT), 2500);
    EXPECT_EQ(option(l.client, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(l.client, IPPROTO_TCP, TCP_KEEPIDLE), 3);
    EXPECT_EQ(option(l.client, IPPROTO_TCP, TCP_KEEPINTVL), 2);
    EXPECT_EQ(option(l.client, IPPROTO_TCP, TCP_KEEPCNT), 4);
    // A descriptor of the same socket in another process sees them too: dup() stands in for SCM_RIGHTS.
    const int other = ::dup(l.client);
    EXPECT_EQ(option(other, IPPROTO_TCP, TCP_USER_TIMEOUT), 2500);
    ::close(other);

    // Keepalive off, the host's user timeout.
    kal::LlpSettings off;
    off.user_timeout = 0ms;
    off.keepalive_idle = 0s;
    ASSERT_OK(kal::llp::set_liveness(l.server, off));
    EXPECT_EQ(option(l.server, SOL_SOCKET, SO_KEEPALIVE), 0);
    EXPECT_EQ(option(l.server, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
    // Not a TCP socket: a clear error, no crash.
    EXPECT_FALSE(kal::llp::set_liveness(-1, s));
}

// krdmad sets TCP_NODELAY and the liveness options once on a listening socket and relies on the kernel copying them
// to every connection it accepts: check that it does.
TEST(LlpSettings, AcceptedSocketsInheritTheListenersOptions) {
    const kal::LlpSettings s = short_liveness();
    Loopback l([&s](int listener) {
        int one = 1;
        EXPECT_EQ(::setsockopt(listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
        EXPECT_OK(kal::llp::set_liveness(listener, s));
    });
    const int server = l.server, client = l.client;
    ASSERT_GE(server, 0);
    EXPECT_EQ(option(server, IPPROTO_TCP, TCP_NODELAY), 1);
    EXPECT_EQ(option(server, IPPROTO_TCP, TCP_USER_TIMEOUT), 2500);
    EXPECT_EQ(option(server, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(server, IPPROTO_TCP, TCP_KEEPIDLE), 3);
    EXPECT_EQ(option(server, IPPROTO_TCP, TCP_KEEPINTVL), 2);
    EXPECT_EQ(option(server, IPPROTO_TCP, TCP_KEEPCNT), 4);
    // The connecting end has none of them: the kAL sets them on an active connection itself.
    EXPECT_EQ(option(client, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
    EXPECT_EQ(option(client, SOL_SOCKET, SO_KEEPALIVE), 0);
}

}  // namespace
