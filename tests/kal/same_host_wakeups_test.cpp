// Issue 40, "a sleeping consumer (completions awaited with it_evd_wait) wakes at most once per completion it is told
// about": a consumer process sleeps in the uAL dispatcher's wait (the DTO dispatcher of its CQ, as it_evd_wait does)
// for each of N Sends that another consumer process sends one at a time, a few milliseconds apart, over the same-host
// channel. The waiting thread's own voluntary context switches (/proc/thread-self/status) over the N waits are at most
// one per completion, plus a little for stray lock waits; the whole process's (its progress thread moves the bytes,
// so at least one more per completion) is printed beside it, and the wire's too (same_host false), for comparison.
#include <sys/resource.h>

#include <fstream>

#include "same_host_process_test.hpp"

namespace {

using namespace samehost;

constexpr int kSends = 100;

// This thread's voluntary context switches so far.
long thread_switches() {
    std::ifstream in("/proc/thread-self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
    }
    return -1;
}

std::string sleeper(const Io &io) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", 1 << 16); !e.empty()) return e;
    std::shared_ptr<ual::ListenPoint> lp;
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = accept_one(io, s, lp, ep, kSends); !e.empty()) return e;
    io.say("up");
    (void)io.expect("go");
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    const long mine_before = thread_switches();
    io.say("waiting");
    for (int i = 0; i < kSends; ++i) {
        auto e = s.dto->wait(20s);
        if (!e) return "wait " + std::to_string(i) + ": " + e.error().to_string();
        if (e->wc.status != RI_WC_SUCCESS || e->wc.opcode != RI_WC_RECV)
            return "completion " + std::to_string(i) + ": " + wc_status(e->wc.status);
    }
    const long mine = thread_switches() - mine_before;
    ::getrusage(RUSAGE_SELF, &after);
    io.say("switches " + std::to_string(mine) + " " + std::to_string(after.ru_nvcsw - before.ru_nvcsw) + " " +
           std::to_string(after.ru_nivcsw - before.ru_nivcsw));
    (void)io.hear();
    return "";
}

std::string waker(const Io &io) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", 1 << 16); !e.empty()) return e;
    const auto l = io.expect("listen");
    if (l.size() < 2) return "no port";
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = connect_one(s, ep, static_cast<uint16_t>(std::stoi(l[1])), 4); !e.empty()) return e;
    io.say("up");
    (void)io.expect("go");
    for (int i = 0; i < kSends; ++i) {
        std::this_thread::sleep_for(3ms);  // the sleeper is asleep again by then
        if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, static_cast<uint64_t>(i)); !st.ok())
            return "post send: " + why(st);
        auto c = wc(s);
        if (!c || c->status != RI_WC_SUCCESS) return "Send " + std::to_string(i) + " failed";
    }
    io.say("sent");
    (void)io.hear();
    return "";
}

class SleepingConsumer : public SameHostProcesses, public ::testing::WithParamInterface<bool> {};

TEST_P(SleepingConsumer, WakesOncePerCompletion) {
    const bool channel = GetParam();
    consumers_.reserve(4);
    start_krdmad("krdma", channel ? "" : R"({"same_host": false})");
    if (HasFatalFailure()) return;
    Consumer &z = consumer("sleeper", std::nullopt, sleeper);
    Consumer &w = consumer("waker", std::nullopt, waker);
    put(z.to, "device " + device_.string());
    put(w.to, "device " + device_.string());
    const auto port = hear(z, "listen");
    ASSERT_EQ(port.size(), 2u);
    put(w.to, "listen " + port[1]);
    ASSERT_FALSE(hear(z, "up").empty());
    ASSERT_FALSE(hear(w, "up").empty());
    EXPECT_EQ(connected_paths(), std::vector<std::string>(2, channel ? "same-host" : "wire"))
        << "the pair is not on the path under test";
    put(z.to, "go");
    ASSERT_FALSE(hear(z, "waiting").empty());
    std::this_thread::sleep_for(20ms);
    put(w.to, "go");
    const auto sw = hear(z, "switches", 60s);
    ASSERT_EQ(sw.size(), 4u);
    const long voluntary = std::stol(sw[1]);
    std::printf("%s: the waiting thread switched voluntarily %ld times (%.2f per completion); the whole process %s "
                "(%s involuntary) over %d Sends\n",
                channel ? "same-host channel" : "wire", voluntary, double(voluntary) / kSends, sw[2].c_str(),
                sw[3].c_str(), kSends);
    EXPECT_LE(voluntary, kSends + kSends / 4) << "a consumer sleeping for completions woke more than once per "
                                                 "completion (" << voluntary << " over " << kSends << ")";
    EXPECT_GE(voluntary, kSends / 2) << "the sleeper hardly slept: the waits did not test sleeping";
    ASSERT_FALSE(hear(w, "sent").empty());
    put(z.to, "bye");
    put(w.to, "bye");
    EXPECT_EQ(finish(z), 0) << log_of(z);
    EXPECT_EQ(finish(w), 0) << log_of(w);
}

INSTANTIATE_TEST_SUITE_P(Paths, SleepingConsumer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &i) {
                             return std::string(i.param ? "OverTheChannel" : "OnTheWire");
                         });

}  // namespace
