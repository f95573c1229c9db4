// Waiting for a reply in the fuzz drivers, under libFuzzer: its -timeout arms a periodic SIGALRM, and a poll()
// that the signal interrupts returns -1/EINTR long before its time-out. Counting that as "no reply" made a healthy
// run abort with a false report of a 10 s hang (issue 18, item 6); the wait resumes with the time that is left.
#ifndef TESTS_KAL_FUZZ_WAIT_HPP
#define TESTS_KAL_FUZZ_WAIT_HPP

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <climits>

namespace fuzzwait {

/**
 * @brief Waits until @p fd is readable (or has an error or hang-up to report, which the next read shows) for at
 *        most @p timeout_ms milliseconds in all (negative: without limit), whatever signals arrive meanwhile.
 * @return True when poll() reported the descriptor, false when the time ran out (or poll() failed otherwise).
 */
inline bool wait_readable(int fd, int timeout_ms) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    int wait = timeout_ms;
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int n = ::poll(&p, 1, wait);
        if (n >= 0) return n == 1;
        if (errno != EINTR) return false;
        if (timeout_ms < 0) continue;
        // Interrupted: wait again for what is left of the time (rounded up, so a wait never ends early).
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        wait = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : static_cast<int>(left);
    }
}

}  // namespace fuzzwait

#endif  // TESTS_KAL_FUZZ_WAIT_HPP
