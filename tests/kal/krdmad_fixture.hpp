// The fixture of the tests that start real krdmad and rdmactl processes on private device paths.
#ifndef TESTS_KAL_KRDMAD_FIXTURE_HPP
#define TESTS_KAL_KRDMAD_FIXTURE_HPP

#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client.hpp"

namespace testutil {

/** @brief Who a spawned process runs as, when not as the test itself (which must then be root). */
struct Credentials {
    uid_t uid = 0;              /**< User id. */
    gid_t gid = 0;              /**< Primary group id. */
    std::vector<gid_t> groups;  /**< Supplementary groups. */
};

/** @brief The whole of @p file ("" when it cannot be read). */
inline std::string read_text(const std::filesystem::path &file) {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/**
 * @brief A private directory (searchable by every user, so a process dropped to another uid reaches the device)
 *        and child processes in their own process groups, all killed and reaped at teardown whatever happened.
 */
class KrdmadFixture : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/krdmad-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        ::chmod(dir_.c_str(), 0755);
    }
    void TearDown() override {
        // Whatever happened, no daemon outlives the test.
        for (pid_t pg : groups_) ::kill(-pg, SIGKILL);
        for (pid_t pg : groups_) ::waitpid(pg, nullptr, 0);
        std::filesystem::remove_all(dir_);
    }
    std::filesystem::path write_config(const std::string &json) {
        std::filesystem::path p = dir_ / "krdmad.json";
        std::ofstream(p) << json;
        return p;
    }
    // Forks a child in a new process group (killed at teardown whatever happens), stdout to @p out and stderr to
    // @p err (the same file when they are equal), running as @p as if given; the child runs @p body and exits
    // with what it returns (126 when the credentials cannot be taken, 125 when the test is already gone).
    //
    // A test binary killed by a signal never reaches TearDown, so the kernel ends the children instead: each asks for
    // SIGKILL when its parent thread ends (PR_SET_PDEATHSIG, kept across exec). That thread is the test's own (no
    // test spawns from a thread of its own), and the request comes after the credentials change, which clears it.
    template <typename Body>
    pid_t fork_child(const std::filesystem::path &out, const std::filesystem::path &err,
                     const std::optional<Credentials> &as, Body body) {
        const pid_t parent = ::getpid();
        pid_t pid = ::fork();
        if (pid == 0) {
            ::setpgid(0, 0);
            std::freopen(out.c_str(), "w", stdout);
            if (err == out) {
                ::dup2(STDOUT_FILENO, STDERR_FILENO);
            } else {
                std::freopen(err.c_str(), "w", stderr);
            }
            if (as && (::setgroups(as->groups.size(), as->groups.data()) != 0 || ::setgid(as->gid) != 0 ||
                       ::setuid(as->uid) != 0)) {
                ::_exit(126);
            }
            // The parent may have died before the request: then nobody would send the signal.
            if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(125);
            ::_exit(body());
        }
        ::setpgid(pid, pid);
        groups_.push_back(pid);
        return pid;
    }
    // Starts @p program with @p args like fork_child().
    pid_t spawn(const char *program, std::vector<std::string> args, const std::filesystem::path &out,
                const std::filesystem::path &err, const std::optional<Credentials> &as = std::nullopt) {
        return fork_child(out, err, as, [&] {
            std::vector<char *> argv;
            argv.push_back(const_cast<char *>(program));
            for (auto &a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(program, argv.data());
            return 127;
        });
    }
    // Runs rdmactl with @p args to completion (as @p as if given); returns its exit status, its output in @p out.
    int rdmactl(std::vector<std::string> args, std::string &out, const std::optional<Credentials> &as = std::nullopt) {
        const std::filesystem::path file = dir_ / "rdmactl.out";
        int status = wait_exit(spawn(RDMACTL_PATH, std::move(args), file, file, as));
        out = read_text(file);
        return status;
    }
    // Starts krdmad with @p args, output to files.
    pid_t start(std::vector<std::string> args) {
        return spawn(KRDMAD_PATH, std::move(args), dir_ / "stdout", dir_ / "stderr");
    }
    // Waits until krdmad @p pid says it is ready (it has served its device and started its consumer modules; 10 s at
    // most); false when it exited or never said so.
    bool wait_ready(pid_t pid) {
        for (int i = 0; i < 1000; ++i) {
            if (read_text(dir_ / "stdout").find("krdmad: ready on") != std::string::npos) return true;
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    // Waits for the process to exit (10 s at most) and returns its exit status, or -1.
    int wait_exit(pid_t pid) {
        for (int i = 0; i < 1000; ++i) {
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) {
                groups_.erase(std::remove(groups_.begin(), groups_.end(), pid), groups_.end());
                return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return -1;
    }
    std::unique_ptr<ual::DeviceClient> connect(const std::filesystem::path &device) {
        for (int i = 0; i < 500; ++i) {
            auto c = ual::DeviceClient::connect(device);
            if (c) return std::move(*c);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return nullptr;
    }
    static std::string read_text(const std::filesystem::path &file) { return testutil::read_text(file); }
    std::string stderr_text() { return read_text(dir_ / "stderr"); }

    std::filesystem::path dir_;
    std::vector<pid_t> groups_;
};

}  // namespace testutil

#endif  // TESTS_KAL_KRDMAD_FIXTURE_HPP
