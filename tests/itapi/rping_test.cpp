// it_rping between two consumer processes through one real krdmad, and between two hosts (network namespaces joined
// by veth, a krdmad in each; root only): 20 validated iterations of the rping exchange (the client advertises its
// buffer, the server RDMA-reads it, writes it back, both verify).
#include <netinet/in.h>
#include <sys/socket.h>

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

// An IPv6 RNIC listed before the IPv4 one (names sort "a6" first): a client given no interface takes one that can
// reach its IPv4 peer, and one told to use the IPv6 RNIC hears that the address family is wrong, not "EIO".
class RpingTwoFamilies : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma";
        krdma::UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_loopback;
        if (!probe || ::bind(probe.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
            GTEST_SKIP() << "this host has no ::1";
        }
        const std::string config = R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                   std::string(SOFTRNIC_PROVIDER_DIR) + R"(", "modules": ["softrnic_kvp.so"], )"
                                   R"("rnics": [{"provider": "softrnic", "name": "a6", "address": "::1"}, )"
                                   R"({"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]})";
        ASSERT_TRUE(wait_ready(start({"--config", write_config(config).string()}))) << stderr_text();
        ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    }
    std::filesystem::path device_;
};

TEST_F(RpingTwoFamilies, TheDefaultInterfaceHasThePeersAddressFamily) {
    const auto sout = dir_ / "server.out";
    spawn(IT_RPING_PATH, {"-s", "-d", "-a", "127.0.0.1", "-p", "17175", "-S", "4096"}, sout, sout);
    ASSERT_TRUE(wait_listening(sout)) << read_text(sout) << stderr_text();
    const auto cout = dir_ / "client.out";
    const pid_t client =
        spawn(IT_RPING_PATH, {"-c", "-a", "127.0.0.1", "-p", "17175", "-S", "4096", "-C", "5", "-v"}, cout, cout);
    EXPECT_EQ(wait_exit(client), 0) << read_text(cout) << read_text(sout);
    expect_pings(read_text(cout), 5);

    const auto wrong = dir_ / "wrong.out";
    const pid_t w = spawn(IT_RPING_PATH, {"-c", "--ia", "a6", "-a", "127.0.0.1", "-p", "17175", "-C", "1"}, wrong,
                          wrong);
    EXPECT_NE(wait_exit(w), 0);
    const std::string text = read_text(wrong);
    EXPECT_NE(text.find("IT_ERR_INVALID_NETADDR"), std::string::npos) << text;
    EXPECT_NE(text.find("(EAFNOSUPPORT)"), std::string::npos) << text;
    EXPECT_EQ(text.find("(EIO)"), std::string::npos) << text;
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
