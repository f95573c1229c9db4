// What the real-process tests of the same-host path (issue 40) share: a krdmad with softrnic RNIC sr0 on 127.0.0.1
// on a private device path, consumer processes forked from the test (each a uAL consumer of that krdmad, as any
// user), line pipes between the test and each consumer, and `rdmactl --json` looks at the daemon.
//
// A consumer process runs a script (a function returning "" when all went well, else why not); the test relays the
// lines the consumers need from each other (a listen port, a buffer's address and key) and checks what they report.
#ifndef TESTS_KAL_SAME_HOST_PROCESS_TEST_HPP
#define TESTS_KAL_SAME_HOST_PROCESS_TEST_HPP

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "krdmad_fixture.hpp"
#include "rdma_util.hpp"

namespace samehost {

using namespace rdmatest;
using namespace std::chrono_literals;
using ual::CmEventId;

/** @brief Writes @p line and a newline to @p fd; false when it cannot. */
inline bool put(int fd, const std::string &line) {
    const std::string s = line + "\n";
    size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

/** @brief The next line of @p fd within @p timeout (without its newline); nothing at end of file or timeout. */
inline std::optional<std::string> get(int fd, std::chrono::milliseconds timeout = 30s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string line;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char c = 0;
        const ssize_t n = ::read(fd, &c, 1);
        if (n <= 0) return std::nullopt;
        if (c == '\n') return line;
        line.push_back(c);
    }
}

/** @brief The words of @p line. */
inline std::vector<std::string> words(const std::string &line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

/** @brief The first offset in [@p off, @p off + @p len) of @p p that does not hold pattern @p seed; @p off + @p len if none. */
inline size_t first_wrong(const uint8_t *p, size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) {
        if (p[off + i] != pattern(i, seed)) return off + i;
    }
    return off + len;
}

inline void fill(uint8_t *p, size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) p[off + i] = pattern(i, seed);
}

/** @brief The name of completion status @p s, for messages. */
inline std::string wc_status(uint32_t s) {
    static const char *const names[] = {"SUCCESS",     "LOC_LEN_ERR",    "LOC_QP_OP_ERR", "LOC_PROT_ERR",
                                        "WR_FLUSH_ERR", "MW_BIND_ERR",   "LOC_ACCESS_ERR", "REM_ACCESS_ERR",
                                        "REM_OP_ERR",   "REM_INV_REQ_ERR", "BAD_RESP_ERR", "LLP_ERR",
                                        "FATAL_ERR",    "GENERAL_ERR"};
    return s < std::size(names) ? names[s] : "status " + std::to_string(s);
}

/** @brief What failed, in words. */
inline std::string why(const rdma::Status &s) { return std::string(s.name()) + " (" + s.describe() + ")"; }
inline std::string why(const rdma::Expected<void> &e) { return e ? std::string("ok") : e.error().to_string(); }

/** @brief A consumer process: its pid and its two pipes (the test writes @ref to, reads @ref from). */
struct Consumer {
    pid_t pid = -1;
    int to = -1;    // the test's end of the consumer's input
    int from = -1;  // the test's end of the consumer's output
    std::string name;
};

/** @brief What a consumer script gets: its input and output lines. */
struct Io {
    int in = -1, out = -1;
    bool say(const std::string &line) const { return put(out, line); }
    std::optional<std::string> hear(std::chrono::milliseconds timeout = 30s) const { return get(in, timeout); }
    /** @brief Waits for a line starting with @p word; its words (empty when it did not come). */
    std::vector<std::string> expect(const std::string &word, std::chrono::milliseconds timeout = 30s) const {
        auto l = hear(timeout);
        if (!l) return {};
        auto w = words(*l);
        if (w.empty() || w[0] != word) return {};
        return w;
    }
};

/** @brief Fixture: the krdmad, the consumers and the relays. */
class SameHostProcesses : public testutil::KrdmadFixture {
protected:
    void TearDown() override {
        for (auto &c : consumers_) {
            if (c.to >= 0) ::close(c.to);
            if (c.from >= 0) ::close(c.from);
        }
        KrdmadFixture::TearDown();
    }

    /**
     * @brief Starts krdmad on a fresh device path (named @p label) with RNIC sr0; @p options: sr0's options object,
     *        if any. A krdmad started before is stopped first.
     */
    void start_krdmad(const std::string &label, const std::string &options = "") {
        if (krdmad_ > 0) {
            ::kill(-krdmad_, SIGKILL);
            wait_exit(krdmad_);
            // wait_ready() reads DIR/stdout: the last daemon's "ready" must not count for this one.
            std::filesystem::remove(dir_ / "stdout");
        }
        device_ = dir_ / (label + ".sock");
        const auto cfg = write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                      std::string(SOFTRNIC_PROVIDER_DIR) +
                                      R"(", "modules": ["softrnic_kvp.so"], "log_level": "warn", "rnics": [{"provider": "softrnic",
                                      "name": "sr0", "address": "127.0.0.1")" +
                                      (options.empty() ? "" : ", \"options\": " + options) + "}]}");
        krdmad_ = start({"--config", cfg.string()});
        ASSERT_TRUE(wait_ready(krdmad_)) << "krdmad did not start: " << stderr_text();
    }

    /**
     * @brief Forks a consumer named @p name running @p script as @p as (when given); its output in DIR/NAME.log.
     *        The script returns "" on success, else why it failed (printed to its log; exit status 1).
     */
    Consumer &consumer(const std::string &name, const std::optional<testutil::Credentials> &as,
                       std::function<std::string(const Io &)> script) {
        int down[2], up[2];
        EXPECT_EQ(::pipe2(down, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(up, O_CLOEXEC), 0);
        const auto log = dir_ / (name + ".log");
        std::vector<int> others;
        for (auto &c : consumers_) others.insert(others.end(), {c.to, c.from});
        const pid_t pid = fork_child(log, log, as, [&]() -> int {
            for (int fd : others) ::close(fd);
            ::close(down[1]);
            ::close(up[0]);
            const std::string why = script(Io{down[0], up[1]});
            if (!why.empty()) {
                std::printf("%s: FAILED: %s\n", name.c_str(), why.c_str());
                std::fflush(stdout);
                put(up[1], "failed " + why);
                return 1;
            }
            return 0;
        });
        ::close(down[0]);
        ::close(up[1]);
        consumers_.push_back(Consumer{pid, down[1], up[0], name});
        return consumers_.back();
    }

    /** @brief The next line of consumer @p c; fails the test, saying what the consumer logged, when none came. */
    std::vector<std::string> hear(const Consumer &c, const std::string &word, std::chrono::milliseconds t = 30s) {
        auto l = get(c.from, t);
        if (!l) {
            ADD_FAILURE() << c.name << " said nothing (waiting for \"" << word << "\"); its log:\n" << log_of(c);
            return {};
        }
        auto w = words(*l);
        if (w.empty() || w[0] != word) {
            ADD_FAILURE() << c.name << " said \"" << *l << "\", not \"" << word << " ...\"; its log:\n" << log_of(c);
            return {};
        }
        return w;
    }

    std::string log_of(const Consumer &c) { return read_text(dir_ / (c.name + ".log")); }

    /** @brief Waits for consumer @p c to exit; its exit status (-1 when killed or still running after 10 s). */
    int finish(Consumer &c) {
        const int status = wait_exit(c.pid);
        return status;
    }

    nlohmann::json ctl_json(const std::string &command) {
        std::string out;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "--json", command}, out), 0) << out;
        auto j = nlohmann::json::parse(out, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "rdmactl " << command << " printed no JSON: " << out;
        return j;
    }

    /** @brief The paths of the connected endpoints as `rdmactl stats` shows them, sorted. */
    std::vector<std::string> connected_paths() {
        const nlohmann::json j = ctl_json("stats");
        std::vector<std::string> out;
        if (!j.contains("endpoints")) return out;
        for (const auto &e : j["endpoints"]) {
            if (e.value("state", "") == "connected") out.push_back(e.value("path", "?"));
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    std::filesystem::path device_;
    pid_t krdmad_ = -1;
    std::vector<Consumer> consumers_;
};

/** @brief Two users that exist nowhere else: "nobody" (65534) and 65533. */
inline testutil::Credentials user_a() { return {65534, 65534, {65534}}; }
inline testutil::Credentials user_b() { return {65533, 65533, {65533}}; }

/** @brief The line a side says about its region: "info ADDR RKEY LEN". */
inline std::string info_line(const Side &s) {
    return "info " + std::to_string(reinterpret_cast<uint64_t>(s.buffer.data())) + " " +
           std::to_string(s.mr->keys().rkey) + " " + std::to_string(s.buffer.size());
}

inline BufferInfo parse_info(const std::vector<std::string> &w, size_t at = 1) {
    BufferInfo b{};
    if (w.size() < at + 3) return b;
    b.addr = std::stoull(w[at]);
    b.rkey = static_cast<uint32_t>(std::stoul(w[at + 1]));
    b.length = static_cast<uint32_t>(std::stoul(w[at + 2]));
    return b;
}

/** @brief The next completion of @p s within @p t, or nothing. */
inline std::optional<ri_wc_t> wc(Side &s, std::chrono::milliseconds t = 20s) { return s.completion(t); }

/** @brief The next affiliated asynchronous event of @p s within @p t with id @p id (others skipped). */
inline std::optional<ual::Event> async_event(Side &s, uint32_t id, std::chrono::milliseconds t = 20s) {
    const auto end = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < end) {
        auto e = s.async->wait(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()));
        if (!e) return std::nullopt;
        if (e->id == id) return *e;
    }
    return std::nullopt;
}

/**
 * @brief The passive side's setup: listens, says "listen PORT", accepts the connection it is asked for and waits
 *        until it is established (receives 100.. posted first, @p recvs of 256 bytes at 0, 256...); "" or why not.
 */
inline std::string accept_one(const Io &io, Side &s, std::shared_ptr<ual::ListenPoint> &lp,
                              std::shared_ptr<ual::Endpoint> &ep, int recvs) {
    auto l = s.adapter->listen(0, s.requests, 4);
    if (!l) return "listen: " + l.error().to_string();
    lp = *l;
    ep = s.endpoint(3);
    if (!ep) return "no endpoint";
    for (int i = 0; i < recvs; ++i) {
        auto st = post_recv(s, *ep, static_cast<size_t>(i) * 256, 256, 100 + static_cast<uint64_t>(i));
        if (!st.ok()) return "post recv: " + why(st);
    }
    io.say("listen " + std::to_string(lp->port()));
    auto req = next_cm(s.requests, 30s);
    if (!req || !req->connection) return "no connection request";
    auto a = ep->accept(req->connection->request, bytes_of("welcome"));
    if (!a) return "accept: " + a.error().to_string();
    auto est = next_cm(s.cm);
    if (!est || est->id != static_cast<uint32_t>(CmEventId::established)) return "not established (passive)";
    return "";
}

/** @brief The active side's setup: connects to @p port and waits until established; "" or why not. */
inline std::string connect_one(Side &s, std::shared_ptr<ual::Endpoint> &ep, uint16_t port, int recvs) {
    ep = s.endpoint(2);
    if (!ep) return "no endpoint";
    for (int i = 0; i < recvs; ++i) {
        auto st = post_recv(s, *ep, static_cast<size_t>(i) * 256, 256, 100 + static_cast<uint64_t>(i));
        if (!st.ok()) return "post recv: " + why(st);
    }
    auto c = ep->connect("127.0.0.1", port, bytes_of("hello"));
    if (!c.ok()) return "connect: " + why(c);
    auto est = next_cm(s.cm);
    if (!est || est->id != static_cast<uint32_t>(CmEventId::established)) return "not established (active)";
    return "";
}

}  // namespace samehost

#endif  // TESTS_KAL_SAME_HOST_PROCESS_TEST_HPP
