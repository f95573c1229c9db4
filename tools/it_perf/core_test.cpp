// White-box tests of it_perf's parts that need no RDMA: statistics, the TCP baseline's header codec, the report's
// ratios and formats, and the gnuplot script.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <numeric>
#include <thread>

#include "plot.hpp"
#include "process_counters.hpp"
#include "report.hpp"
#include "stats.hpp"
#include "tcp_baseline.hpp"

namespace it_perf {
namespace {

TEST(ItPerfStats, LatencyOfKnownSamples) {
    std::vector<uint64_t> ns(1000);
    std::iota(ns.begin(), ns.end(), 1);  // 1..1000 ns, shuffled order does not matter
    std::reverse(ns.begin(), ns.end());
    const LatencyStats s = summarize_latency(ns, 1);
    EXPECT_DOUBLE_EQ(s.min_us, 0.001);
    EXPECT_DOUBLE_EQ(s.max_us, 1.0);
    EXPECT_DOUBLE_EQ(s.typical_us, 0.5005);  // mean of the 500th and 501st
    EXPECT_DOUBLE_EQ(s.avg_us, 0.5005);
    EXPECT_DOUBLE_EQ(s.p99_us, 0.99);   // nearest rank 990
    EXPECT_DOUBLE_EQ(s.p999_us, 0.999); // nearest rank 999
}

TEST(ItPerfStats, PingPongIsHalfARoundTrip) {
    std::vector<uint64_t> ns{4000, 4000, 4000};
    const LatencyStats s = summarize_latency(ns, 2);
    EXPECT_DOUBLE_EQ(s.typical_us, 2.0);
    EXPECT_DOUBLE_EQ(s.stdev_us, 0.0);
}

TEST(ItPerfStats, EmptyIsZero) {
    std::vector<uint64_t> ns;
    EXPECT_EQ(summarize_latency(ns, 2).max_us, 0.0);
}

TEST(ItPerfStats, BetterRound) {
    Measurement slow, fast, invalid;
    slow.valid = fast.valid = true;
    slow.bytes = 100;
    fast.bytes = 200;
    slow.seconds = fast.seconds = 1;
    EXPECT_TRUE(better(fast, slow, false));
    EXPECT_FALSE(better(invalid, slow, false));
    EXPECT_TRUE(better(slow, invalid, false));
    slow.latency.typical_us = 5;
    fast.latency.typical_us = 3;
    EXPECT_TRUE(better(fast, slow, true));
}

TEST(ItPerfTcpHeader, RoundTrip) {
    TcpHeader h;
    h.shape = TcpShape::pingpong;
    h.size = 4096;
    uint8_t b[TcpHeader::kWireSize];
    h.write(b);
    auto back = TcpHeader::read(b, 1 << 20);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->shape, TcpShape::pingpong);
    EXPECT_EQ(back->size, 4096u);
}

TEST(ItPerfTcpHeader, RefusesWhatIsNotOurs) {
    TcpHeader h;
    h.size = 8;
    uint8_t b[TcpHeader::kWireSize];
    h.write(b);
    b[0] ^= 1;
    EXPECT_FALSE(TcpHeader::read(b, 1 << 20));
    h.write(b);
    b[7] = 99;  // unknown shape
    EXPECT_FALSE(TcpHeader::read(b, 1 << 20));
    h.size = 2 << 20;
    h.write(b);
    auto big = TcpHeader::read(b, 1 << 20);
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error().code(), EMSGSIZE);
}

TEST(ItPerfTcpHeader, CarriesTheStreamsOfABandwidthTest) {
    TcpHeader h;
    h.shape = TcpShape::stream;
    h.size = 65536;
    h.streams = 64;
    uint8_t b[TcpHeader::kWireSize];
    h.write(b);
    auto back = TcpHeader::read(b, 1 << 20);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->streams, 64u);
    // Several streams only for bandwidth, never none, never more than it_perf's QPs.
    h.shape = TcpShape::pingpong;
    h.write(b);
    EXPECT_FALSE(TcpHeader::read(b, 1 << 20));
    for (uint16_t bad : {uint16_t{0}, uint16_t{TcpHeader::kMaxStreams + 1}}) {
        h.shape = TcpShape::stream;
        h.streams = bad;
        h.write(b);
        EXPECT_FALSE(TcpHeader::read(b, 1 << 20)) << bad;
    }
}

TEST(ItPerfTcpHeader, ShapeFollowsTheTest) {
    TestCase t;
    t.kind = Kind::bw;
    EXPECT_EQ(tcp_shape_for(t), TcpShape::stream);
    t.kind = Kind::lat;
    t.op = Op::write;
    EXPECT_EQ(tcp_shape_for(t), TcpShape::pingpong);
    t.op = Op::read;
    EXPECT_EQ(tcp_shape_for(t), TcpShape::request_response);
}

Row bw_row(double rdma_bps, double tcp_bps) {
    Row r;
    r.test.kind = Kind::bw;
    r.test.size = 65536;
    r.rdma.valid = r.tcp.valid = true;
    r.rdma.seconds = r.tcp.seconds = 1;
    r.rdma.bytes = static_cast<uint64_t>(rdma_bps);
    r.tcp.bytes = static_cast<uint64_t>(tcp_bps);
    r.rdma.iterations = r.tcp.iterations = 10;
    return r;
}

TEST(ItPerfReport, RatiosAndTargets) {
    EXPECT_DOUBLE_EQ(bw_row(960, 1000).ratio(), 0.96);
    EXPECT_TRUE(meets_target(bw_row(960, 1000)));
    EXPECT_FALSE(meets_target(bw_row(900, 1000)));
    Row lat;
    lat.test.kind = Kind::lat;
    lat.rdma.valid = lat.tcp.valid = true;
    lat.rdma.latency.typical_us = 11;
    lat.tcp.latency.typical_us = 10;
    EXPECT_DOUBLE_EQ(lat.ratio(), 1.1);
    EXPECT_TRUE(meets_target(lat));
    lat.rdma.valid = false;
    EXPECT_EQ(lat.ratio(), 0.0);
    EXPECT_FALSE(meets_target(lat));
}

TEST(ItPerfReport, JsonAndCsv) {
    std::vector<Row> rows{bw_row(2e9, 1e9)};
    RunInfo info;
    info.mode = "loopback";
    const auto j = to_json(info, rows);
    ASSERT_EQ(j["results"].size(), 1u);
    EXPECT_EQ(j["results"][0]["test"], "write");
    EXPECT_DOUBLE_EQ(j["results"][0]["ratio"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(j["results"][0]["rdma"]["bw_gbit_per_second"].get<double>(), 16.0);
    const std::string csv = to_csv(rows);
    EXPECT_EQ(csv.substr(0, csv.find(',')), "test");
    EXPECT_NE(csv.find("\nwrite,bw,65536,1,64,1,10,16,"), std::string::npos) << csv;
}

TEST(ItPerfPlot, ScriptHasBothPanelsAndATerminalFallback) {
    Row lat;
    lat.test.kind = Kind::lat;
    lat.test.size = 8;
    lat.rdma.valid = lat.tcp.valid = true;
    lat.rdma.latency.typical_us = 11;
    lat.tcp.latency.typical_us = 10;
    const std::string s = plot_script("/tmp/x.png", {bw_row(2e9, 1e9), lat});
    EXPECT_NE(s.find("pngcairo"), std::string::npos);
    EXPECT_NE(s.find("set terminal png "), std::string::npos);
    EXPECT_NE(s.find("multiplot"), std::string::npos);
    EXPECT_NE(s.find("$bw_write_rdma << EOD\n65536 2\nEOD"), std::string::npos) << s;
    EXPECT_NE(s.find("$lat_write_tcp << EOD\n8 10\nEOD"), std::string::npos) << s;
    EXPECT_NE(s.find("set logscale x 2"), std::string::npos);
}

// The setup test's counters: every thread's system calls, those of a thread started after the counters opened
// included.
TEST(ItPerfProcessCounters, CountTheSystemCallsOfEveryThread) {
    std::string why;
    const ProcessCounters c = ProcessCounters::open(0, &why);
    EXPECT_EQ(c.pid(), ::getpid());
    const ProcessReading before = c.read();
    std::thread t([] {
        for (int i = 0; i < 1000; ++i) (void)::syscall(SYS_getppid);
    });
    t.join();
    const ProcessReading after = c.read();
    if (!before.syscalls) GTEST_SKIP() << "system calls cannot be counted here: " << why;
    ASSERT_TRUE(after.syscalls.has_value()) << "a counter that read once must read again";
    EXPECT_GE(*after.syscalls - *before.syscalls, 1000u) << "the 1,000 getppid calls of a thread started after the "
                                                            "counters opened were not all counted";
    EXPECT_LT(*after.syscalls - *before.syscalls, 100000u) << "counted far more than this test made";
}

TEST(ItPerfProcessCounters, SwitchesOfALiveThreadAndTheServerOfASocket) {
    const ProcessCounters c = ProcessCounters::open(0);
    const uint64_t before = c.read().switches;
    for (int i = 0; i < 20; ++i) ::usleep(100);
    EXPECT_GE(c.read().switches - before, 20u) << "20 sleeps of this thread are 20 voluntary switches at least";
    EXPECT_EQ(server_of_socket("/nonexistent/krdma.sock"), 0) << "no socket there: no server";
}

}  // namespace
}  // namespace it_perf
