// What a user meets when something is wrong, with real krdmad, rdmactl and it_rping processes on real sockets:
// a run cut short exits non-zero and says why; text from a client or a peer reaches neither a log nor a terminal
// raw; a device path that is not a socket, and a krdmad that never answers, are named as such, in bounded time.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <fstream>
#include <string>

#include "krdmad_fixture.hpp"
#include "proc_net_tcp.hpp"
#include "rnicpi/host/printable.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class Mends : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        KrdmadFixture::SetUp();
        device_ = (dir_ / "krdma").string();
    }
    // Starts krdmad on device_ with softrnic's sr0 on 127.0.0.1, and waits until it serves.
    pid_t start_krdmad() {
        const pid_t pid = start({"--config", write_config(R"({"device": ")" + device_ + R"(", "provider_dir": ")"
                                                          SOFTRNIC_PROVIDER_DIR R"(", "modules": ["softrnic_kvp.so"],
                                                          "rnics": [{"provider": "softrnic", "name": "sr0",
                                                                     "address": "127.0.0.1"}], "log_level": "warn"})")
                                             .string()});
        EXPECT_TRUE(wait_ready(pid)) << stderr_text();
        return pid;
    }
    // rdmactl on @p device with @p args; its exit status, its output (stdout and stderr) in @p out.
    int ctl_at(const std::string &device, std::vector<std::string> args, std::string &out) {
        args.insert(args.begin(), {"--device", device});
        return rdmactl(std::move(args), out);
    }
    // Waits for @p pid to exit, up to @p limit; its exit status, or -1.
    int wait_exit_within(pid_t pid, std::chrono::seconds limit) {
        int status = -1;
        for (auto end = Clock::now() + limit; status == -1 && Clock::now() < end;) status = wait_exit(pid);
        return status;
    }
    std::string device_;
};

// ---------------------------------------------------------------------------------------------------------------
// The escaping function

TEST(Printable, KeepsUtf8AndEscapesControlAndInvalidBytes) {
    EXPECT_EQ(rdma::printable("sr0 on 127.0.0.1"), "sr0 on 127.0.0.1");
    EXPECT_EQ(rdma::printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(rdma::printable("a\x1b[31mb\nc\td\x7f"), "a\\x1b[31mb\\x0ac\\x09d\\x7f");
    EXPECT_EQ(rdma::printable(std::string_view("x\0y", 3)), "x\\x00y");
    // C1 controls (CSI is U+009B), overlong forms, surrogates, truncated sequences, bytes that never start one.
    EXPECT_EQ(rdma::printable("\xc2\x9b"), "\\xc2\\x9b");
    EXPECT_EQ(rdma::printable("\xc0\xaf"), "\\xc0\\xaf");
    EXPECT_EQ(rdma::printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
    EXPECT_EQ(rdma::printable("\xe2\x82"), "\\xe2\\x82");
    EXPECT_EQ(rdma::printable("\xff\xfe"), "\\xff\\xfe");
    EXPECT_EQ(rdma::printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
    EXPECT_TRUE(rdma::is_printable("caf\xc3\xa9"));
    EXPECT_FALSE(rdma::is_printable("a\nb"));
}

// ---------------------------------------------------------------------------------------------------------------
// Escaping what comes from outside

TEST_F(Mends, KrdmadLogsAClientsNameEscapedOnOneLine) {
    start_krdmad();
    std::string out;
    const std::string evil = "ev\x1b[2Jil\nkrdmad: forged line";
    EXPECT_NE(ctl_at(device_, {"detach", evil}, out), 0) << out;
    // The refusal reaches rdmactl's terminal on one line with no control character (krdmad's reason is cleaned
    // by the device protocol, krdma::reason_text(), before rdmactl escapes what is left).
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_NE(out.find("rdmactl: detach failed: no RNIC named ev"), std::string::npos) << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
    std::string log;
    for (int i = 0; i < 200 && log.find("forged") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        log = stderr_text();
    }
    EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
    EXPECT_NE(log.find("detach ev\\x1b[2Jil\\x0akrdmad: forged line for client"), std::string::npos) << log;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        EXPECT_NE(line.rfind("krdmad: forged", 0), 0u) << "a client's newline split the log: " << log;
    }
}

TEST_F(Mends, RdmactlEchoesAnUnknownCommandEscaped) {
    std::string out;
    EXPECT_EQ(ctl_at(device_, {"li\x1b]0;owned\x07st\nx"}, out), 2) << out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_NE(out.find("unknown command 'li\\x1b]0;owned\\x07st\\x0ax'"), std::string::npos) << out;
}

// ---------------------------------------------------------------------------------------------------------------
// Misleading errors

TEST_F(Mends, KrdmadRefusesADevicePathThatIsARegularFileAndKeepsIt) {
    std::ofstream(device_) << "an administrator's file\n";
    const pid_t pid = start({"--config", write_config(R"({"device": ")" + device_ +
                                                      R"(", "modules": [], "rnics": [], "log_level": "warn"})")
                                             .string()});
    const int status = wait_exit_within(pid, std::chrono::seconds(20));
    EXPECT_NE(status, 0);
    const std::string err = stderr_text();
    EXPECT_NE(err.find("device path " + device_ + " is a regular file"), std::string::npos) << err;
    EXPECT_NE(err.find("krdmad removes only a socket there"), std::string::npos) << err;
    EXPECT_EQ(err.find("Address already in use"), std::string::npos) << err;
    EXPECT_TRUE(fs::is_regular_file(device_));
    EXPECT_EQ(read_text(device_), "an administrator's file\n");
}

TEST_F(Mends, RdmactlPointedAtADirectoryOrARegularFileSaysItIsNoDevice) {
    std::string out;
    EXPECT_EQ(ctl_at(dir_.string(), {"list"}, out), 1) << out;
    EXPECT_NE(out.find("not a krdmad device: " + dir_.string() + " is a directory"), std::string::npos) << out;
    EXPECT_EQ(out.find("Connection refused"), std::string::npos) << out;
    std::ofstream(device_) << "x";
    EXPECT_EQ(ctl_at(device_, {"list"}, out), 1) << out;
    EXPECT_NE(out.find("not a krdmad device: " + device_ + " is a regular file"), std::string::npos) << out;
    EXPECT_EQ(out.find("Connection refused"), std::string::npos) << out;
}

TEST_F(Mends, RdmactlGivesUpOnADeviceNobodyAnswersInItsTimeout) {
    // A listening socket that never accepts: connect() succeeds into its backlog and HELLO is never answered.
    krdma::UniqueFd l(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, device_.c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0) << std::strerror(errno);
    ASSERT_EQ(::listen(l.get(), 4), 0);
    std::string out;
    const auto t0 = Clock::now();
    EXPECT_EQ(ctl_at(device_, {"--timeout", "1", "list"}, out), 1) << out;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));
    EXPECT_NE(out.find("krdmad at " + device_ + " did not answer within 1 s"), std::string::npos) << out;
    EXPECT_NE(out.find("stopped"), std::string::npos) << out;
}

TEST_F(Mends, RdmactlGivesUpOnADeviceWhoseBacklogIsFull) {
    // A listener that accepts nothing and whose backlog is full: connect() itself blocks (the send timeout bounds it).
    krdma::UniqueFd l(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, device_.c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr *>(&a), sizeof a), 0) << std::strerror(errno);
    ASSERT_EQ(::listen(l.get(), 0), 0);
    std::vector<krdma::UniqueFd> queued;
    for (int i = 0; i < 64; ++i) {
        krdma::UniqueFd c(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (::connect(c.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) break;
        queued.push_back(std::move(c));
    }
    ASSERT_LT(queued.size(), 64u) << "the backlog never filled";
    std::string out;
    const auto t0 = Clock::now();
    EXPECT_EQ(ctl_at(device_, {"--timeout", "1", "list"}, out), 1) << out;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));
    EXPECT_NE(out.find("krdmad at " + device_ + " took no connection within 1 s: is it stopped"), std::string::npos)
        << out;
}

TEST_F(Mends, RdmactlGivesUpOnAStoppedKrdmad) {
    const pid_t k = start_krdmad();
    ASSERT_EQ(::kill(k, SIGSTOP), 0);
    std::string out;
    const auto t0 = Clock::now();
    EXPECT_EQ(ctl_at(device_, {"--timeout", "1", "list"}, out), 1) << out;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));
    EXPECT_NE(out.find("krdmad at " + device_ + " did not answer within 1 s: is it stopped"), std::string::npos)
        << out;
    ::kill(k, SIGCONT);
    EXPECT_EQ(ctl_at(device_, {"list"}, out), 0) << out;
}

// ---------------------------------------------------------------------------------------------------------------
// A run cut short says so

// Waits for @p text in @p file (20 s at most).
bool wait_for_text(const fs::path &file, const std::string &text) {
    for (int i = 0; i < 1000; ++i) {
        if (testutil::read_text(file).find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// A listening port for this test process, below the kernel's ephemeral range (32768-60999 by default): a port in
// that range can be the local end of any other test's connection at the moment the server binds it, and bind then
// fails with EADDRINUSE.
std::string test_port(int salt) { return std::to_string(21000 + (::getpid() + salt) % 10000); }

// Whether a TCP socket on @p port is in @p state (/proc/net/tcp: "01" established, "0A" listening; 20 s at most):
// neither side's output says so without -d, which prints every iteration.
bool tcp_state(const std::string &port, const std::string &wanted) {
    const auto p = static_cast<uint16_t>(std::stoul(port));
    for (int i = 0; i < 1000; ++i) {
        for (const rdmatest::TcpSocket &s : rdmatest::tcp_sockets("/proc/net/tcp")) {
            if (s.state == wanted && (rdmatest::has_port(s.local, p) || rdmatest::has_port(s.remote, p))) return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

TEST_F(Mends, RpingKilledKrdmadMidRunFailsBothSides) {
    const pid_t k = start_krdmad();
    ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const auto sout = dir_ / "server.out";
    const auto cout = dir_ / "client.out";
    const std::string port = test_port(0);
    // Many more iterations than fit in the time before the kill.
    const pid_t server = spawn(IT_RPING_PATH, {"-s", "-a", "127.0.0.1", "-p", port, "-C", "100000000"}, sout, sout);
    ASSERT_TRUE(tcp_state(port, "0A")) << read_text(sout) << stderr_text();
    const pid_t client = spawn(IT_RPING_PATH, {"-c", "-a", "127.0.0.1", "-p", port, "-C", "100000000"}, cout, cout);
    ASSERT_TRUE(tcp_state(port, "01")) << read_text(cout) << read_text(sout);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-run
    ASSERT_EQ(::kill(k, SIGKILL), 0);
    const int client_status = wait_exit_within(client, std::chrono::seconds(60));
    const int server_status = wait_exit_within(server, std::chrono::seconds(60));
    const std::string c = read_text(cout), s = read_text(sout);
    EXPECT_NE(client_status, 0) << c;
    EXPECT_NE(client_status, -1) << "the client did not exit\n" << c;
    EXPECT_NE(server_status, 0) << s;
    EXPECT_NE(server_status, -1) << "the server did not exit\n" << s;
    for (const std::string *out : {&c, &s}) {
        EXPECT_NE(out->find("the connection broke after "), std::string::npos) << *out;
        EXPECT_NE(out->find("krdmad stopped or died"), std::string::npos) << *out;
    }
}

TEST_F(Mends, ItPerfKilledKrdmadMidRunFailsAndSaysWhy) {
    const pid_t k = start_krdmad();
    ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const auto out = dir_ / "it_perf.out";
    const pid_t perf =
        spawn(IT_PERF_PATH, {"--loopback", "-t", "write", "--bw", "--size", "65536", "-D", "2", "--rounds", "2"}, out,
              out);
    // The session is up once krdmad serves its endpoints: wait for the data to flow, then kill krdmad.
    std::string stats;
    for (int i = 0; i < 500 && stats.find("connected") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        (void)ctl_at(device_, {"stats"}, stats);
    }
    ASSERT_NE(stats.find("connected"), std::string::npos) << stats << read_text(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ASSERT_EQ(::kill(k, SIGKILL), 0);
    const int status = wait_exit_within(perf, std::chrono::seconds(90));
    const std::string text = read_text(out);
    EXPECT_EQ(status, 1) << text;
    EXPECT_NE(text.find("it_perf: write bw 64KiB: the RNIC went offline (krdmad stopped or died"), std::string::npos)
        << text;
}

// The client ends an unbounded run between iterations: the server's normal end, exit 0; a server told to expect
// more iterations than the client made fails and says how many it made.
TEST_F(Mends, RpingServerCountsTheIterationsItWasAskedFor) {
    start_krdmad();
    ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const std::string port = test_port(7);
    for (const auto &[server_count, expect] : {std::pair<std::string, int>{"5", 0}, {"8", 1}}) {
        const auto sout = dir_ / ("server" + server_count + ".out");
        const auto cout = dir_ / ("client" + server_count + ".out");
        const pid_t server = spawn(IT_RPING_PATH, {"-s", "-d", "-a", "127.0.0.1", "-p", port, "-C", server_count},
                                   sout, sout);
        ASSERT_TRUE(wait_for_text(sout, "listening on port")) << read_text(sout) << stderr_text();
        const pid_t client = spawn(IT_RPING_PATH, {"-c", "-a", "127.0.0.1", "-p", port, "-C", "5"}, cout, cout);
        EXPECT_EQ(wait_exit_within(client, std::chrono::seconds(60)), 0) << read_text(cout);
        EXPECT_EQ(wait_exit_within(server, std::chrono::seconds(60)), expect) << read_text(sout);
        if (expect != 0) {
            EXPECT_NE(read_text(sout).find("the client disconnected after 5 of 8 iterations"), std::string::npos)
                << read_text(sout);
        }
    }
}

}  // namespace
