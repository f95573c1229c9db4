// Running Debian's unmodified dapl2-utils (dtest, dtestcm, dtestsrq, dtestx, dapltest) over libdaplopenrdma: a private
// dat.conf named by $DAT_OVERRIDE, processes in their own process groups that die with the test (killed at teardown;
// should the test process itself die, the programs by PR_SET_PDEATHSIG and krdmad by a guard process), waits with
// deadlines, and the outputs (and a hung program's stacks) for failure messages.
//
// The programs exit 0 from most failures (dtest prints "DAPL Test Complete. FAILED" and returns 0; dapltest returns a
// DAT_RETURN, whose low byte is 0 for most errors), so every test checks what they print as well as their status.
#ifndef TESTS_DAPL_DAPL_UTILS_FIXTURE_HPP
#define TESTS_DAPL_DAPL_UTILS_FIXTURE_HPP

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "connection_fixtures.hpp"
#include "proc_net_tcp.hpp"

extern char **environ;

namespace daplutils {

/**
 * @brief The dat.conf entry every test names. The clients of dtest, dtestcm and dtestx open the provider name the
 *        server sends them over the side channel, so the client's dat.conf must hold the server's name.
 */
inline constexpr const char *kIaName = "openrdma";
/** @brief dtest, dtestcm and dtestx: the TCP side channel (CONN_PORT) on which the server sends its address; fixed. */
inline constexpr uint16_t kSideChannelPort = 15828;
/** @brief dtest's connection qualifier (fixed), dtestcm's and dtestsrq's default (-p). */
inline constexpr uint16_t kDtestConnQual = 45248;
/**
 * @brief dapltest's server port (-n), its test threads' above it; its default, 62000, is left to runs by hand. Below
 *        the kernel's ephemeral range (32768-60999 by default): at 51000 a test running beside it once took 51005 as
 *        a client socket's local port, and dapltest's server could not listen on it (EADDRINUSE, then a hang).
 */
inline constexpr uint16_t kDapltestPort = 21000;

/** @brief How a process ended, or that it had not by the deadline. */
struct Ending {
    bool finished = false;  /**< Reaped before the deadline. */
    bool exited = false;    /**< Ended by exit (not by a signal). */
    int code = -1;          /**< Exit status when @ref exited. */
    int signal = 0;         /**< Terminating signal otherwise. */

    /** @brief Exited with status @p want. */
    bool exited_with(int want) const { return finished && exited && code == want; }
};

inline std::ostream &operator<<(std::ostream &os, const Ending &e) {
    if (!e.finished) return os << "still running at the deadline (killed at teardown)";
    if (e.exited) return os << "exit status " << e.code;
    return os << "killed by signal " << e.signal << " (" << ::strsignal(e.signal) << ")";
}

/** @brief How often @p needle occurs in @p text. */
inline size_t count(const std::string &text, const std::string &needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
    return n;
}

/** @brief True when @p text contains @p needle. */
inline bool has(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

/**
 * @brief True when a TCP socket in @p pid's network namespace (0: this process's) has local port @p port: listening
 *        only when @p listen_only, else in any state (a connection, or its TIME_WAIT).
 */
inline bool bound(pid_t pid, uint16_t port, bool listen_only = false) {
    const std::string base = pid == 0 ? std::string("/proc/self/net/") : "/proc/" + std::to_string(pid) + "/net/";
    for (const char *file : {"tcp", "tcp6"}) {
        for (const rdmatest::TcpSocket &s : rdmatest::tcp_sockets(base + file)) {
            if ((s.state == "0A" || !listen_only) && rdmatest::has_port(s.local, port)) return true;
        }
    }
    return false;
}

/**
 * @brief Waits up to @p seconds until no TCP socket here (a listener, a connection, a TIME_WAIT) has a local port in
 *        [@p first, @p first + @p count); true once none does. dapl2-utils use fixed connection qualifiers, which
 *        are TCP ports in the ephemeral range: a stray connection of another program on one of them (or its
 *        TIME_WAIT, for a minute) makes that listen fail with DAT_CONN_QUAL_IN_USE, rightly.
 */
inline bool ports_free(uint16_t first, uint16_t count, double seconds) {
    const auto taken = [&] {
        for (uint32_t p = first; p < uint32_t{first} + count; ++p) {
            if (bound(0, static_cast<uint16_t>(p))) return true;
        }
        return false;
    };
    // One look decides each round: looking again after the loop could find a port that another test's connection
    // took for a moment just then, and fail at once what the loop would have waited out.
    bool busy = taken();
    for (int i = 0; i < static_cast<int>(seconds * 4) && busy; ++i) {
        ::usleep(250 * 1000);
        busy = taken();
    }
    return !busy;
}

/**
 * @brief True when a TCP socket listens on @p port in the network namespace of process @p pid (0: this process's):
 *        /proc/PID/net/tcp and tcp6 show the sockets of that process's namespace.
 */
inline bool listening(pid_t pid, uint16_t port) { return bound(pid, port, true); }

/**
 * @brief The dapl2-utils test fixture over @p Hosts (rdmatest::OneHost or rdmatest::TwoHosts, which start krdmad):
 *        starts the programs, each with its output in DIR/LABEL.out, and waits for them with deadlines.
 */
template <typename Hosts>
class DaplUtilsTest : public Hosts {
protected:
    void SetUp() override {
        Hosts::SetUp();
        if (this->IsSkipped() || this->HasFatalFailure()) return;
        // The programs come from dapl2-utils (scripts/setup-deps.sh installs it): without them there is nothing to run.
        for (const char *program : {DTEST_PATH, DTESTCM_PATH, DTESTSRQ_PATH, DTESTX_PATH, DAPLTEST_PATH}) {
            if (::access(program, X_OK) != 0) {
                GTEST_SKIP() << "dapl2-utils is not installed (" << program
                             << " missing); scripts/setup-deps.sh installs it";
            }
        }
        // A sanitizer build's provider needs the sanitizer's runtime first in these uninstrumented programs.
        if (std::strlen(DAPL_UTILS_SANITIZER) != 0 && std::strlen(DAPL_UTILS_PRELOAD) == 0) {
            GTEST_SKIP() << "no " << DAPL_UTILS_SANITIZER
                         << " runtime found to preload into the dapl2-utils programs in this sanitizer build";
        }
        start_guard();
    }

    /** @brief The network namespace the fixture made, deleted by the guard if this process dies; "" for none. */
    virtual std::string guard_netns() const { return ""; }

    /**
     * @brief The processes the host fixture started (krdmad) must not outlive this process either: a guard process,
     *        told by the kernel when this one dies (even by SIGKILL, PR_SET_PDEATHSIG), kills their process groups and
     *        deletes guard_netns(). At teardown it is killed with the rest.
     */
    void start_guard() {
        const std::vector<pid_t> groups = this->groups_;
        const std::string netns = guard_netns();
        const pid_t parent = ::getpid();
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigset_t old;
        ::pthread_sigmask(SIG_BLOCK, &term, &old);  // blocked before the fork: the guard cannot miss it
        const pid_t guard = ::fork();
        if (guard == 0) {
            ::setpgid(0, 0);
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);
            int sig = 0;
            if (::getppid() == parent) ::sigwait(&term, &sig);
            for (pid_t g : groups) ::kill(-g, SIGKILL);
            if (!netns.empty()) ::execl("/usr/sbin/ip", "ip", "netns", "del", netns.c_str(), nullptr);
            ::_exit(0);
        }
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (guard > 0) {
            ::setpgid(guard, guard);
            this->groups_.push_back(guard);
        }
    }

    void TearDown() override {
        // Checks name what failed in a line; what the programs printed comes once, before teardown removes it, with
        // the threads' stacks of any program still running (a hang), when gdb is at hand.
        if (this->HasFailure()) std::cout << outputs() << stacks() << std::endl;
        Hosts::TearDown();
    }

    /** @brief Writes DIR/@p file: one dat.conf entry (kIaName) for libdaplopenrdma with @p ia_params (the RNIC). */
    std::filesystem::path write_dat_conf(const std::string &file, const std::string &ia_params) {
        const std::filesystem::path p = this->dir_ / file;
        std::ofstream(p) << "# The dapl2-utils tests' registry, named by $DAT_OVERRIDE\n"
                         << kIaName << " u2.0 nonthreadsafe default " << DAPL_PROVIDER_LIBRARY << " dapl.2.0 \""
                         << ia_params << "\" \"\"\n";
        return p;
    }

    /**
     * @brief Starts @p program with @p args, labelled @p label: stdout and stderr line-buffered (stdbuf) into
     *        DIR/LABEL.out, $DAT_OVERRIDE = @p dat_conf, $KRDMA_DEVICE = @p device (no embedded kAL), in network
     *        namespace @p netns when given. The process leads its own group, killed at teardown, and gets SIGKILL
     *        when this process dies. Returns its pid (also the program's: `ip netns exec` and stdbuf exec it).
     */
    pid_t launch(const std::string &label, const char *program, const std::vector<std::string> &args,
                 const std::filesystem::path &dat_conf, const std::filesystem::path &device,
                 const std::string &netns = "") {
        std::vector<std::string> argv;
        if (!netns.empty()) argv.insert(argv.end(), {"/usr/sbin/ip", "netns", "exec", netns});
        if (::access("/usr/bin/stdbuf", X_OK) == 0) argv.insert(argv.end(), {"/usr/bin/stdbuf", "-oL", "-eL"});
        argv.emplace_back(program);
        argv.insert(argv.end(), args.begin(), args.end());

        const bool preload = std::strlen(DAPL_UTILS_PRELOAD) != 0;
        std::vector<std::string> env;
        for (char **e = environ; *e != nullptr; ++e) {
            const std::string kv = *e;
            const std::string key = kv.substr(0, kv.find('='));
            if (key == "DAT_OVERRIDE" || key == "KRDMA_DEVICE" || key == "OPENRDMA_EMBEDDED_CONFIG") continue;
            if (preload && (key == "LD_PRELOAD" || key == "ASAN_OPTIONS")) continue;
            env.push_back(kv);
        }
        env.push_back("DAT_OVERRIDE=" + dat_conf.string());
        env.push_back("KRDMA_DEVICE=" + device.string());
        if (preload) {
            env.push_back(std::string("LD_PRELOAD=") + DAPL_UTILS_PRELOAD);
            // The programs leak by design (never-freed buffers): leak reports would only change their exit status.
            const char *asan = ::getenv("ASAN_OPTIONS");
            env.push_back(std::string("ASAN_OPTIONS=") + (asan != nullptr ? std::string(asan) + ":" : "") +
                          "detect_leaks=0");
        }

        // Everything the child needs is built before fork: after it, only async-signal-safe calls.
        std::vector<char *> cargv, cenv;
        for (auto &a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        for (auto &e : env) cenv.push_back(e.data());
        cenv.push_back(nullptr);
        const std::filesystem::path out = this->dir_ / (label + ".out");
        const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            ADD_FAILURE() << "cannot create " << out << ": " << std::strerror(errno);
            return -1;
        }
        const pid_t parent = ::getpid();
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::setpgid(0, 0);
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(125);  // the test died before prctl: do not outlive it
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
            ::execve(cargv[0], cargv.data(), cenv.data());
            ::_exit(127);
        }
        ::close(fd);
        if (pid < 0) {
            ADD_FAILURE() << "fork: " << std::strerror(errno);
            return -1;
        }
        ::setpgid(pid, pid);
        this->groups_.push_back(pid);
        labels_.emplace_back(pid, label);
        return pid;
    }

    /** @brief Waits up to @p seconds for @p pid to end and reaps it. */
    Ending await_exit(pid_t pid, double seconds) {
        Ending e;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        for (;;) {
            int status = 0;
            const pid_t r = ::waitpid(pid, &status, WNOHANG);
            if (r == pid) {
                e.finished = true;
                e.exited = WIFEXITED(status);
                e.code = e.exited ? WEXITSTATUS(status) : -1;
                e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
                auto &g = this->groups_;
                g.erase(std::remove(g.begin(), g.end(), pid), g.end());
                return e;
            }
            if (r < 0 || std::chrono::steady_clock::now() >= deadline) return e;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

    /** @brief True while @p pid has not ended (it is not reaped here). */
    static bool alive(pid_t pid) {
        siginfo_t info{};
        return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
    }

    /** @brief Waits up to @p seconds for @p times @p needle in @p label's output; false if @p pid ends first. */
    bool await_text(pid_t pid, const std::string &label, const std::string &needle, double seconds,
                    size_t times = 1) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < deadline) {
            if (count(output(label), needle) >= times) return true;
            if (!alive(pid)) return count(output(label), needle) >= times;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    /** @brief Waits up to @p seconds for a TCP listener on @p port in @p pid's network namespace; false if it ends. */
    bool await_listen(pid_t pid, uint16_t port, double seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < deadline) {
            if (!alive(pid)) return false;
            if (listening(pid, port)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    /** @brief What the process labelled @p label printed so far. */
    std::string output(const std::string &label) const { return this->read_text(this->dir_ / (label + ".out")); }

    /**
     * @brief @p text without the lines that repeat per iteration or per operation (dapltest -d, dtest -v), so that a
     *        failure message keeps what matters.
     */
    static std::string quiet(const std::string &text) {
        static const std::regex noise(
            "iteration: [0-9]+|Test\\[[0-9a-f]+\\]: (FILL|VALIDATE) Buffers Iteration [0-9]+|"
            "Test\\[[0-9a-f]+\\]: (RdmaWrite|RdmaRead|postsend|RecvWait and Re-Post) \\[[0-9]+\\] ?|"
            "[0-9]+ rdma_write # [0-9]+ (SUPPRESS|SIGNAL|completed)");
        std::string kept;
        size_t dropped = 0;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            if (std::regex_match(line, noise)) {
                ++dropped;
            } else {
                kept += line + "\n";
            }
        }
        if (dropped != 0) kept += "[" + std::to_string(dropped) + " per-iteration lines left out]\n";
        return kept;
    }

    /** @brief Every started program's output (the end of each, when long) and krdmad's, for failure messages. */
    std::string outputs() const {
        std::string all;
        const auto add = [&all](const std::string &title, const std::string &raw) {
            constexpr size_t kKeep = 16000;
            const std::string text = quiet(raw);
            all += "\n----- " + title + " -----\n";
            all += text.size() > kKeep ? "[... " + std::to_string(text.size() - kKeep) + " bytes ...]\n" +
                                             text.substr(text.size() - kKeep)
                                       : text;
        };
        for (const auto &[pid, label] : labels_) add(label + " (pid " + std::to_string(pid) + ")", output(label));
        for (const char *f : {"stderr", "a.err", "b.err"}) {
            const std::string t = this->read_text(this->dir_ / f);
            if (!t.empty()) add(std::string("krdmad ") + f, t);
        }
        return all;
    }

    /** @brief The threads' stacks (gdb, if installed) of every started program still running; "" when none. */
    std::string stacks() const {
        if (::access("/usr/bin/gdb", X_OK) != 0) return "";
        std::string all;
        for (const auto &[pid, label] : labels_) {
            if (!alive(pid)) continue;
            const std::string cmd = "timeout 15 /usr/bin/gdb -nx -batch -p " + std::to_string(pid) +
                                    " -ex 'thread apply all bt' 2>&1";
            std::string text;
            if (FILE *p = ::popen(cmd.c_str(), "r")) {
                char buf[4096];
                for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
                ::pclose(p);
            }
            all += "\n----- stacks of " + label + " (pid " + std::to_string(pid) + "), still running -----\n" + text;
        }
        return all;
    }

private:
    std::vector<std::pair<pid_t, std::string>> labels_;
};

}  // namespace daplutils

#endif  // TESTS_DAPL_DAPL_UTILS_FIXTURE_HPP
