// krdmad processes a benchmark starts on private device paths, and the private directory they serve in: killed and
// removed on every way out (destructor, signal and exit handlers, PR_SET_PDEATHSIG).
#ifndef BENCH_KRDMAD_PROCESS_HPP
#define BENCH_KRDMAD_PROCESS_HPP

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <chrono>
#include <filesystem>
#include <memory>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ual/access_layer.hpp"

namespace bench {

// Process groups of the krdmads this bench started, for the signal and exit handlers (async-signal-safe reads).
inline volatile sig_atomic_t g_krdmads[2] = {0, 0};

/** @brief Kills every krdmad's process group (async-signal-safe: for signal and exit handlers). */
inline void kill_krdmads() {
    for (auto &g : g_krdmads) {
        if (g > 0) ::kill(-g, SIGKILL);
    }
}

/**
 * @brief One krdmad process in a process group of its own, serving @p config: killed (the whole group) and reaped
 *        when this goes; also by a signal handler, an atexit handler, and PR_SET_PDEATHSIG if this process is
 *        killed outright.
 */
class Krdmad {
public:
    /** @brief Starts @p program with `--config @p config`, its output to @p log, in slot @p slot (0 or 1). */
    Krdmad(int slot, const std::string &program, const std::filesystem::path &config, const std::filesystem::path &log)
        : slot_(slot), log_(log) {
        std::string c = config.string();
        char *argv[] = {const_cast<char *>(program.c_str()), const_cast<char *>("--config"), c.data(), nullptr};
        pid_ = ::fork();
        if (pid_ == 0) {
            // Only async-signal-safe calls between fork and exec.
            ::setpgid(0, 0);
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); fd >= 0) {
                ::dup2(fd, STDOUT_FILENO);
                ::dup2(fd, STDERR_FILENO);
            }
            ::execv(program.c_str(), argv);
            ::_exit(127);
        }
        if (pid_ > 0) {
            ::setpgid(pid_, pid_);  // here too: no window in which kill(-pid) would miss it
            g_krdmads[slot_] = pid_;
        }
    }
    ~Krdmad() {
        if (pid_ > 0) {
            ::kill(-pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        g_krdmads[slot_] = 0;
    }
    Krdmad(const Krdmad &) = delete;
    Krdmad &operator=(const Krdmad &) = delete;

    /** @brief The daemon's pid (<= 0 when fork failed). */
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    /** @brief Whether it still runs (false once it exited on its own). */
    [[nodiscard]] bool running() {
        if (pid_ <= 0) return false;
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            ::kill(-pid_, SIGKILL);  // whatever it left in its group
            pid_ = -1;
            g_krdmads[slot_] = 0;
            return false;
        }
        return true;
    }
    /** @brief What it wrote so far. */
    [[nodiscard]] std::string log() const {
        std::ifstream in(log_);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

private:
    int slot_;
    std::filesystem::path log_;
    pid_t pid_ = -1;
};

/** @brief A private directory in /tmp, removed with everything in it. */
class TempDir {
public:
    /** @brief Makes /tmp/PREFIX-XXXXXX. */
    explicit TempDir(const std::string &prefix) {
        std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
        if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    [[nodiscard]] const std::filesystem::path &path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

// The private directory and the files a bench makes in it, for a signal handler: unlink and rmdir are
// async-signal-safe, and TempDir's destructor does not run when a signal ends the program.
inline char g_dir[256] = "";
inline const char *const *g_dir_files = nullptr;

/** @brief Names @p dir and its files @p files (a list ending with nullptr, static) for remove_dir_files(). */
inline void remember_dir(const std::filesystem::path &dir, const char *const *files) {
    std::snprintf(g_dir, sizeof g_dir, "%s", dir.c_str());
    g_dir_files = files;
}

/** @brief Removes the files remember_dir() named and the directory (async-signal-safe: for signal handlers). */
inline void remove_dir_files() {
    if (g_dir[0] == '\0' || g_dir_files == nullptr) return;
    char path[512];
    for (const char *const *f = g_dir_files; *f != nullptr; ++f) {
        // Only async-signal-safe steps: a hand-made path join.
        size_t n = 0;
        for (const char *p = g_dir; *p != '\0' && n + 1 < sizeof path; ++p) path[n++] = *p;
        if (n + 1 < sizeof path) path[n++] = '/';
        for (const char *p = *f; *p != '\0' && n + 1 < sizeof path; ++p) path[n++] = *p;
        path[n] = '\0';
        ::unlink(path);
    }
    ::rmdir(g_dir);
}

/**
 * @brief Opens the access layer with @p options, trying every 10 ms, @p tries times at most, while krdmad starts
 *        serving its device (its socket appears only then) and, when @p daemon is given, still runs; null when it
 *        never served.
 */
inline std::shared_ptr<ual::AccessLayer> open_when_served(const ual::Options &options, Krdmad *daemon, int tries) {
    for (int i = 0; i < tries && (daemon == nullptr || daemon->running()); ++i) {
        if (auto r = ual::AccessLayer::open(options)) return std::move(*r);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return nullptr;
}

/**
 * @brief Waits up to @p seconds for child @p pid to exit (it was told to, e.g. its control socket closed), then
 *        kills and reaps it. True when it exited by itself with status 0; otherwise says so on standard error,
 *        naming it @p what, and returns false. Never waits forever.
 */
inline bool await_child(pid_t pid, int seconds, const char *what) {
    int status = 0;
    bool ended = false;
    for (int i = 0; i < seconds * 100 && !ended; ++i) {
        ended = ::waitpid(pid, &status, WNOHANG) == pid;
        if (!ended) ::usleep(10000);
    }
    if (!ended) {
        std::fprintf(stderr, "%s did not end within %d s: killed\n", what, seconds);
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return false;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "%s failed\n", what);
        return false;
    }
    return true;
}

}  // namespace bench

#endif  // BENCH_KRDMAD_PROCESS_HPP
