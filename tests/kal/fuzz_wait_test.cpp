// The fuzz drivers' wait for a reply under signals (issue 18, item 6): libFuzzer's -timeout arms a periodic SIGALRM,
// and a wait it interrupts must go on for the rest of its time instead of reporting a hang. Each test fails with a
// wait that gives up on EINTR (the wait_readable() syscall_fuzz.cpp had before).
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fuzz_wait.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_signals{0};
void on_signal(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

// A handler for @p sig without SA_RESTART (poll() is never restarted anyway), the old one back at the end.
class Handler {
public:
    explicit Handler(int sig) : sig_(sig) {
        struct sigaction sa{};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        EXPECT_EQ(::sigaction(sig_, &sa, &old_), 0);
        g_signals = 0;
    }
    ~Handler() { ::sigaction(sig_, &old_, nullptr); }
    Handler(const Handler &) = delete;
    Handler &operator=(const Handler &) = delete;

private:
    int sig_;
    struct sigaction old_{};
};

struct Pair {
    int fd[2] = {-1, -1};
    Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
    ~Pair() {
        ::close(fd[0]);
        ::close(fd[1]);
    }
    Pair(const Pair &) = delete;
    Pair &operator=(const Pair &) = delete;
};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A signal lands on the waiting thread before the reply comes: the wait goes on and sees the reply.
TEST(Wait, ASignalBeforeTheReplyDoesNotEndTheWait) {
    Handler h(SIGALRM);
    Pair p;
    const pthread_t waiter = ::pthread_self();
    std::thread peer([&] {
        std::this_thread::sleep_for(50ms);
        ::pthread_kill(waiter, SIGALRM);
        std::this_thread::sleep_for(150ms);
        ::pthread_kill(waiter, SIGALRM);
        std::this_thread::sleep_for(50ms);
        ASSERT_EQ(::write(p.fd[1], "r", 1), 1);
    });
    const auto start = Clock::now();
    const bool readable = fuzzwait::wait_readable(p.fd[0], 5000);
    const double waited = ms_since(start);
    peer.join();
    EXPECT_TRUE(readable) << "the wait ended after " << waited << " ms without the reply";
    EXPECT_GE(waited, 240.0);
    EXPECT_EQ(g_signals.load(), 2);
}

// Signals every 20 ms while nothing comes: the wait still lasts its whole time, not longer, and reports nothing.
TEST(Wait, SignalsDuringAWaitWithoutReplyKeepItsTimeout) {
    Handler h(SIGALRM);
    Pair p;
    const pthread_t waiter = ::pthread_self();
    std::atomic<bool> stop{false};
    std::thread pest([&] {
        while (!stop) {
            std::this_thread::sleep_for(20ms);
            ::pthread_kill(waiter, SIGALRM);
        }
    });
    const auto start = Clock::now();
    const bool readable = fuzzwait::wait_readable(p.fd[0], 300);
    const double waited = ms_since(start);
    stop = true;
    pest.join();
    EXPECT_FALSE(readable);
    EXPECT_GE(waited, 299.0);
    EXPECT_LT(waited, 2000.0);
    EXPECT_GE(g_signals.load(), 5);
}

// As libFuzzer does it: a periodic process timer (ITIMER_REAL, SIGALRM to the process), the helper thread blocking
// SIGALRM so that every signal interrupts the wait.
TEST(Wait, APeriodicAlarmLikeLibFuzzersDoesNotEndTheWait) {
    Handler h(SIGALRM);
    Pair p;
    sigset_t alarm, old;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &alarm, &old), 0);
    std::thread peer([&] {  // inherits the blocked SIGALRM
        std::this_thread::sleep_for(300ms);
        ASSERT_EQ(::write(p.fd[1], "r", 1), 1);
    });
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
    itimerval every{{0, 30000}, {0, 30000}};
    ASSERT_EQ(::setitimer(ITIMER_REAL, &every, nullptr), 0);
    const auto start = Clock::now();
    const bool readable = fuzzwait::wait_readable(p.fd[0], 5000);
    const double waited = ms_since(start);
    itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    peer.join();
    EXPECT_TRUE(readable) << "the wait ended after " << waited << " ms without the reply";
    EXPECT_GE(g_signals.load(), 3);
}

// A zero time-out (the drain after a run) polls once and reports what is there.
TEST(Wait, AZeroTimeoutReportsWhatIsThere) {
    Pair p;
    EXPECT_FALSE(fuzzwait::wait_readable(p.fd[0], 0));
    ASSERT_EQ(::write(p.fd[1], "r", 1), 1);
    EXPECT_TRUE(fuzzwait::wait_readable(p.fd[0], 0));
}

}  // namespace
