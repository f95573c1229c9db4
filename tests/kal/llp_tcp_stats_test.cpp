// TCP statistics: TCP_INFO of real loopback connections, the procfs MIB parser on sample and broken texts, and the
// live host counters moving when this test opens a connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tcp_stats.hpp"
#include "status_matchers.hpp"

namespace {

using kal::llp::MibCounter;
using kal::llp::parse_tcp_counters;
using kal::llp::tcp_info_of;

class Fd {
public:
    explicit Fd(int fd = -1) noexcept : fd_(fd) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    [[nodiscard]] int get() const noexcept { return fd_; }
    void reset(int fd) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

// A listener on 127.0.0.1 and a connection to it, accepted.
struct Loopback {
    Fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    Fd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    Fd server;
    Loopback() {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(a);
        EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
        EXPECT_EQ(::listen(listener.get(), 1), 0);
        EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr *>(&a), &len), 0);
        EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
        server.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        EXPECT_GE(server.get(), 0);
    }
};

const char kSnmp[] =
    "Ip: Forwarding DefaultTTL InReceives\n"
    "Ip: 1 64 12345\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs "
    "OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
    "Tcp: 1 200 120000 -1 41 17 3 2 5 987654321 876543210 77 1 9 0\n"
    "Udp: InDatagrams NoPorts\n"
    "Udp: 10 0\n";
const char kNetstat[] =
    "TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes TCPFastRetrans TCPAbortOnData\n"
    "TcpExt: 0 12 4 6 1\n"
    "IpExt: InNoRoutes InTruncatedPkts\n"
    "IpExt: 0 0\n";

TEST(LlpTcpStats, ParsesTheRfc4022GroupInOrder) {
    auto c = parse_tcp_counters(kSnmp, kNetstat);
    ASSERT_OK(c) << c.error().to_string();
    const std::vector<MibCounter> want = {
        {"ActiveOpens", 41}, {"PassiveOpens", 17}, {"AttemptFails", 3},      {"EstabResets", 2},
        {"CurrEstab", 5},    {"InSegs", 987654321}, {"OutSegs", 876543210}, {"RetransSegs", 77},
        {"InErrs", 1},       {"OutRsts", 9},        {"TCPTimeouts", 12},    {"TCPLossProbes", 4},
        {"TCPFastRetrans", 6}, {"TCPAbortOnData", 1}};  // TcpExt counters the kernel lacks are left out
    EXPECT_EQ(*c, want);
}

TEST(LlpTcpStats, NetstatIsOptionalAndLargeValuesFit) {
    std::string snmp = kSnmp;
    snmp.replace(snmp.find("987654321"), 9, "18446744073709551");  // more than 32 bits
    auto c = parse_tcp_counters(snmp, "");
    ASSERT_OK(c) << c.error().to_string();
    ASSERT_EQ(c->size(), 10u);
    EXPECT_EQ((*c)[5].value, 18446744073709551);
    // Without a trailing newline, and with runs of spaces.
    auto d = parse_tcp_counters("Tcp:  ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs "
                                "RetransSegs InErrs OutRsts\nTcp: 1 2 3 4 5 6 7 8 9  10",
                                "");
    ASSERT_OK(d) << d.error().to_string();
    EXPECT_EQ(d->back(), (MibCounter{"OutRsts", 10}));
}

TEST(LlpTcpStats, MalformedTextIsRefused) {
    const std::string head = "Tcp: ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs "
                             "RetransSegs InErrs OutRsts\n";
    struct Case {
        const char *why;
        std::string snmp;
        std::string netstat;
    };
    const std::vector<Case> cases = {
        {"no Tcp section", "Ip: Forwarding\nIp: 1\n", ""},
        {"header without values", head, ""},
        {"values do not follow the header", head + "Udp: InDatagrams\nTcp: 1 2 3 4 5 6 7 8 9 10\n", ""},
        {"one value short", head + "Tcp: 1 2 3 4 5 6 7 8 9\n", ""},
        {"one value too many", head + "Tcp: 1 2 3 4 5 6 7 8 9 10 11\n", ""},
        {"not a number", head + "Tcp: 1 2 3 4 5 6 7 8 9 1O\n", ""},
        {"a fraction", head + "Tcp: 1 2 3 4 5 6 7 8 9 1.5\n", ""},
        {"out of range", head + "Tcp: 1 2 3 4 5 6 7 8 9 99999999999999999999\n", ""},
        {"section twice", head + "Tcp: 1 2 3 4 5 6 7 8 9 10\n" + head + "Tcp: 1 2 3 4 5 6 7 8 9 10\n", ""},
        {"a required counter missing",
         "Tcp: ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs\n"
         "Tcp: 1 2 3 4 5 6 7 8 9\n",
         ""},
        {"a counter twice",
         "Tcp: ActiveOpens ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs "
         "InErrs OutRsts\nTcp: 1 1 2 3 4 5 6 7 8 9 10\n",
         ""},
        {"broken TcpExt", head + "Tcp: 1 2 3 4 5 6 7 8 9 10\n", "TcpExt: TCPTimeouts TCPLossProbes\nTcpExt: 1\n"},
    };
    for (const Case &c : cases) {
        auto r = parse_tcp_counters(c.snmp, c.netstat);
        ASSERT_FALSE(r) << c.why;
        EXPECT_STATUS(r, RI_EPROTO) << c.why;
    }
    auto ok = parse_tcp_counters(head + "Tcp: 1 2 3 4 5 6 7 8 9 10\n", "");
    EXPECT_OK(ok);  // the same text, well formed, passes
}

TEST(LlpTcpStats, LiveCountersMoveWithARealConnection) {
    auto before = kal::llp::host_tcp_counters();
    ASSERT_OK(before) << before.error().to_string();
    ASSERT_GE(before->size(), 10u);
    EXPECT_EQ((*before)[0].name, "ActiveOpens");
    EXPECT_EQ((*before)[9].name, "OutRsts");
    int64_t opens = (*before)[0].value;
    int64_t passive = (*before)[1].value;
    Loopback c;
    auto after = kal::llp::host_tcp_counters();
    ASSERT_OK(after) << after.error().to_string();
    EXPECT_GE((*after)[0].value, opens + 1);    // our connect()
    EXPECT_GE((*after)[1].value, passive + 1);  // our accept()
    EXPECT_GE((*after)[4].value, 2);            // CurrEstab: both ends of ours at least
    bool timeouts = false;
    for (const MibCounter &m : *after) timeouts = timeouts || m.name == "TCPTimeouts";
    EXPECT_TRUE(timeouts);  // every supported kernel has it
}

TEST(LlpTcpStats, TcpInfoOfAnEstablishedConnection) {
    Loopback c;
    const std::string payload(100000, 'x');
    size_t sent = 0, got = 0;
    std::vector<char> buf(65536);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((sent < payload.size() || got < payload.size()) && std::chrono::steady_clock::now() < until) {
        if (sent < payload.size()) {
            ssize_t n = ::send(c.client.get(), payload.data() + sent, payload.size() - sent, MSG_DONTWAIT);
            if (n > 0) sent += static_cast<size_t>(n);
        }
        ssize_t n = ::recv(c.server.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0) got += static_cast<size_t>(n);
    }
    ASSERT_EQ(got, payload.size());
    // Loopback acknowledges at once, but give the ACK a moment to be processed.
    kal::llp::TcpInfo ti;
    for (int i = 0; i < 100; ++i) {
        auto t = tcp_info_of(c.client.get());
        ASSERT_OK(t) << t.error().to_string();
        ti = *t;
        if (ti.bytes_acked >= payload.size()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(kal::llp::tcp_state_name(ti.state), "ESTABLISHED");
    EXPECT_GE(ti.bytes_acked, payload.size());
    EXPECT_GE(ti.bytes_sent, payload.size());
    EXPECT_GT(ti.segs_out, 1u);
    EXPECT_GT(ti.data_segs_out, 0u);
    EXPECT_GT(ti.snd_mss, 0u);
    EXPECT_GT(ti.snd_cwnd, 0u);
    EXPECT_GT(ti.rto_us, 0u);
    EXPECT_GT(ti.rtt_us, 0u);
    EXPECT_GT(ti.delivered, 0u);
    auto rx = tcp_info_of(c.server.get());
    ASSERT_OK(rx);
    EXPECT_EQ(rx->bytes_received, payload.size());
    EXPECT_GT(rx->data_segs_in, 0u);
    EXPECT_EQ(rx->bytes_acked, 0u);  // it sent nothing
}

TEST(LlpTcpStats, TcpInfoStatesAndErrors) {
    Loopback c;
    auto l = tcp_info_of(c.listener.get());
    ASSERT_OK(l);
    EXPECT_EQ(kal::llp::tcp_state_name(l->state), "LISTEN");
    auto bad = tcp_info_of(-1);
    ASSERT_FALSE(bad);
    EXPECT_STATUS(bad, RI_EBADF);
    Fd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    auto not_tcp = tcp_info_of(udp.get());
    ASSERT_FALSE(not_tcp);
    EXPECT_NE(not_tcp.error().code(), 0);
    EXPECT_EQ(kal::llp::tcp_state_name(200), "UNKNOWN");
    // After the peer closes, the state follows.
    ::shutdown(c.server.get(), SHUT_WR);
    pollfd p{c.client.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 2000), 1);
    auto cw = tcp_info_of(c.client.get());
    ASSERT_OK(cw);
    EXPECT_EQ(kal::llp::tcp_state_name(cw->state), "CLOSE_WAIT");
}

}  // namespace
