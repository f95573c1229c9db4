// it_rping between two consumer processes through one real krdmad, and between two hosts (network namespaces joined
// by veth, a krdmad in each; root only): 20 validated iterations of the rping exchange (the client advertises its
// buffer, the server RDMA-reads it, writes it back, both verify).
#include <string>
#include <vector>

#include "connection_fixtures.hpp"

namespace {

// Waits for "listening on port" in @p out (10 s at most).
bool wait_listening(const std::filesystem::path &out) {
    for (int i = 0; i < 500; ++i) {
        std::ifstream in(out);
        const std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (t.find("listening on port") != std::string::npos) return true;
        ::usleep(20000);
    }
    return false;
}

// Checks a client's output: every ping came back validated.
void expect_pings(const std::string &client, int count) {
    int seen = 0;
    for (size_t at = 0; (at = client.find("ping data: rdma-ping-", at)) != std::string::npos; ++at) ++seen;
    EXPECT_EQ(seen, count) << client;
}

class RpingOneHost : public rdmatest::OneHost {};

TEST_F(RpingOneHost, TwoProcessesThroughKrdmad) {
    ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const auto sout = dir_ / "server.out";
    spawn(IT_RPING_PATH, {"-s", "-d", "-a", "127.0.0.1", "-p", "17174", "-S", "4096"}, sout, sout);
    ASSERT_TRUE(wait_listening(sout)) << read_text(sout) << stderr_text();
    const auto cout = dir_ / "client.out";
    const pid_t client = spawn(IT_RPING_PATH, {"-c", "-a", "127.0.0.1", "-p", "17174", "-S", "4096", "-C", "20", "-V",
                                               "-v"},
                               cout, cout);
    int status = -1;
    for (int i = 0; i < 6 && status == -1; ++i) status = wait_exit(client);
    EXPECT_EQ(status, 0) << read_text(cout) << read_text(sout);
    expect_pings(read_text(cout), 20);
}

class RpingTwoHosts : public rdmatest::TwoHosts {};

TEST_F(RpingTwoHosts, AcrossNamespaces) {
    // The server in host B's namespace on B's krdmad, the client here on host A's.
    const auto sout = dir_ / "server.out";
    spawn("/usr/sbin/ip", {"netns", "exec", ns_, "env", "KRDMA_DEVICE=" + dev_b_.string(), "OPENRDMA_EMBEDDED_CONFIG=",
                           IT_RPING_PATH, "-s", "-d", "-a", addr_b_, "-p", "7174", "-S", "65535"},
          sout, sout);
    ASSERT_TRUE(wait_listening(sout)) << read_text(sout) << read_text(dir_ / "b.err");
    ::setenv("KRDMA_DEVICE", dev_a_.c_str(), 1);
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const auto cout = dir_ / "client.out";
    const pid_t client = spawn(IT_RPING_PATH, {"-c", "-a", addr_b_, "-p", "7174", "-S", "65535", "-C", "20", "-V", "-v"},
                               cout, cout);
    int status = -1;
    for (int i = 0; i < 6 && status == -1; ++i) status = wait_exit(client);
    EXPECT_EQ(status, 0) << read_text(cout) << read_text(sout);
    expect_pings(read_text(cout), 20);
}

}  // namespace
