// Fixtures of the connection tests: one host (a krdmad on 127.0.0.1 on a private device path) and two hosts (a
// network namespace joined to this one by a veth pair, a krdmad in each), and the peer program (ual_rdma_peer)
// started in either. Every process runs in its own process group and is killed at teardown whatever happened; the
// namespace and the veth pair go with the test.
#ifndef TESTS_UAL_CONNECTION_FIXTURES_HPP
#define TESTS_UAL_CONNECTION_FIXTURES_HPP

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <utility>

#include "krdmad_fixture.hpp"

namespace rdmatest {

/** @brief The "port N" a peer printed to @p out, waited for up to 10 s; 0 when it never came. */
inline uint16_t wait_for_port(const std::filesystem::path &out) {
    for (int i = 0; i < 500; ++i) {
        std::smatch m;
        std::ifstream in(out);
        const std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (std::regex_search(t, m, std::regex("port (\\d+)"))) return static_cast<uint16_t>(std::stoi(m[1]));
        ::usleep(20000);
    }
    return 0;
}

/**
 * @brief A krdmad configuration with one RNIC @p name of @p provider (its kVP module PROVIDER_kvp.so, softrnic
 *        unless told) on @p address; @p extra is more top-level keys.
 */
inline std::string krdmad_config(const std::filesystem::path &device, const std::string &name,
                                 const std::string &address, const std::string &extra = "",
                                 const std::string &provider = "softrnic") {
    return R"({"device": ")" + device.string() + R"(", "provider_dir": ")" + std::string(SOFTRNIC_PROVIDER_DIR) +
           R"(", "modules": [")" + provider + R"(_kvp.so"], "rnics": [{"provider": ")" + provider + R"(", "name": ")" +
           name + R"(", "address": ")" + address + R"("}])" + (extra.empty() ? "" : ", " + extra) + "}";
}

/** @brief One host: a krdmad with RNIC "sr0" on 127.0.0.1; extra_config() adds keys to its configuration. */
class OneHost : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        krdmad_ = start({"--config",
                         write_config(krdmad_config(device_, "sr0", "127.0.0.1", extra_config(), provider())).string()});
        // Ready, not merely bound: the device file exists a moment before krdmad accepts on it (ECONNREFUSED).
        ASSERT_TRUE(wait_ready(krdmad_)) << stderr_text();
    }

    /** @brief More top-level configuration keys (JSON members without braces). */
    virtual std::string extra_config() { return ""; }
    /** @brief The provider of RNIC "sr0" (its kVP is the only module krdmad loads). */
    virtual std::string provider() { return "softrnic"; }

    /** @brief Starts the peer program; returns its pid and the port it listens on (0 on failure). */
    std::pair<pid_t, uint16_t> start_peer(const std::string &mode, size_t bytes = 1 << 20,
                                          std::vector<std::string> more = {}) {
        const auto out = dir_ / ("peer-" + mode + ".out");
        std::vector<std::string> args{device_.string(), "sr0", mode, std::to_string(bytes)};
        args.insert(args.end(), more.begin(), more.end());
        pid_t pid = spawn(PEER_PATH, std::move(args), out, dir_ / "peer.err");
        return {pid, wait_for_port(out)};
    }

    std::string peer_output(const std::string &mode) { return read_text(dir_ / ("peer-" + mode + ".out")); }

    std::filesystem::path device_;
    pid_t krdmad_ = 0;
};

/**
 * @brief Two hosts: a network namespace joined to this one by a veth pair, a krdmad in each bound to its own
 *        address (RNIC "hostA" here, "hostB" in the namespace; softrnic both, unless provider_a() or provider_b()
 *        say otherwise). Root only (CI runs as root): skipped otherwise.
 */
class TwoHosts : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
        testutil::KrdmadFixture::SetUp();
        // Each test process gets its own /30 in 10.231.0.0/16, chosen by its pid: two processes that ran at once
        // with pids equal modulo 200 used to put the same /24 on two veths, and krdmad then found the RNIC's address
        // on the other test's netdev (connect refused with EADDRNOTAVAIL). Pids of concurrent tests are never
        // 16384 apart in practice.
        const unsigned subnet = static_cast<unsigned>(::getpid()) % 16384;
        const std::string net = "10.231." + std::to_string(subnet / 64) + ".";
        ns_ = "ordma-t" + std::to_string(::getpid());
        veth_a_ = "orA" + std::to_string(::getpid() % 100000);
        veth_b_ = "orB" + std::to_string(::getpid() % 100000);
        addr_a_ = net + std::to_string(subnet % 64 * 4 + 1);
        addr_b_ = net + std::to_string(subnet % 64 * 4 + 2);
        ASSERT_EQ(sh("ip netns add " + ns_), 0);
        made_ = true;
        ASSERT_EQ(sh("ip link add " + veth_a_ + " type veth peer name " + veth_b_), 0);
        ASSERT_EQ(sh("ip link set " + veth_b_ + " netns " + ns_), 0);
        ASSERT_EQ(sh("ip addr add " + addr_a_ + "/30 dev " + veth_a_ + " && ip link set " + veth_a_ + " up"), 0);
        ASSERT_EQ(sh(in_ns("sh -c 'ip addr add " + addr_b_ + "/30 dev " + veth_b_ + " && ip link set " + veth_b_ +
                           " up && ip link set lo up'")),
                  0);
        dev_a_ = dir_ / "a.sock";
        dev_b_ = dir_ / "b.sock";
        const auto cfg = [&](const std::filesystem::path &dev, const std::string &addr, const std::string &name,
                             const std::string &provider) {
            std::filesystem::path p = dir_ / (name + ".json");
            std::ofstream(p) << krdmad_config(dev, name, addr, extra_config(), provider);
            return p;
        };
        krdmad_a_ = spawn(KRDMAD_PATH, {"--config", cfg(dev_a_, addr_a_, "hostA", provider_a()).string()},
                          dir_ / "a.out", dir_ / "a.err");
        // `ip netns exec` enters the namespace and execs krdmad: the pid is krdmad's.
        krdmad_b_ = spawn("/usr/sbin/ip", {"netns", "exec", ns_, KRDMAD_PATH, "--config",
                                           cfg(dev_b_, addr_b_, "hostB", provider_b()).string()},
                          dir_ / "b.out", dir_ / "b.err");
        // Ready, not merely bound: the device file exists a moment before krdmad accepts on it (ECONNREFUSED).
        const auto ready = [&](const char *out) {
            return read_text(dir_ / out).find("krdmad: ready on") != std::string::npos;
        };
        for (int i = 0; i < 500 && !(ready("a.out") && ready("b.out")); ++i) ::usleep(20000);
        ASSERT_TRUE(ready("a.out") && ready("b.out")) << read_text(dir_ / "a.err") << read_text(dir_ / "b.err");
    }

    void TearDown() override {
        testutil::KrdmadFixture::TearDown();  // every process first, then the namespace and its veth pair
        if (made_) {
            sh("ip netns del " + ns_);
            sh("ip link del " + veth_a_ + " 2>/dev/null");
        }
    }

    /** @brief More top-level configuration keys of both krdmads (JSON members without braces). */
    virtual std::string extra_config() { return ""; }

    /** @brief The provider of RNIC "hostA" (its kVP is the only module host A's krdmad loads). */
    virtual std::string provider_a() { return "softrnic"; }
    /** @brief The provider of RNIC "hostB" in the namespace. */
    virtual std::string provider_b() { return "softrnic"; }

    /** @brief @p cmd run in the namespace. */
    std::string in_ns(const std::string &cmd) const { return "ip netns exec " + ns_ + " " + cmd; }

    /** @brief Starts the peer program in the namespace on host B's krdmad; its pid and port (0 on failure). */
    std::pair<pid_t, uint16_t> start_peer_b(const std::string &mode, size_t bytes) {
        const auto out = dir_ / "peer.out";
        pid_t pid = spawn("/usr/sbin/ip", {"netns", "exec", ns_, PEER_PATH, dev_b_.string(), "hostB", mode,
                                           std::to_string(bytes)},
                          out, dir_ / "peer.err");
        return {pid, wait_for_port(out)};
    }

    static int sh(const std::string &cmd) {
        const int st = std::system((cmd + " >/dev/null 2>&1").c_str());
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }

    std::string ns_, veth_a_, veth_b_, addr_a_, addr_b_;
    std::filesystem::path dev_a_, dev_b_;
    pid_t krdmad_a_ = 0, krdmad_b_ = 0;
    bool made_ = false;
};

}  // namespace rdmatest

#endif  // TESTS_UAL_CONNECTION_FIXTURES_HPP
