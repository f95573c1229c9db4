// What krdmad, running as root, does for callers that are not: each test runs consumers as real unprivileged users
// (forked children that take another uid) against a real krdmad on a private device path, and checks that
// krdmad grants them nothing they could not do themselves (a privileged port), and that its limits are per user and
// per process (device connections, pinned memory), so that one user exhausts neither the host nor another user.
// Each test needs root and the 'nobody' and 'daemon' users, and skips without them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "krdmad_fixture.hpp"
#include "rnic_calls.hpp"
#include "syscall.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;
using testutil::Credentials;

std::optional<Credentials> user(const char *name) {
    const passwd *pw = ::getpwnam(name);
    if (pw == nullptr || pw->pw_uid == 0) return std::nullopt;
    return Credentials{pw->pw_uid, pw->pw_gid, {pw->pw_gid}};
}

using testutil::sys;

// A connection with cpp0 open and a PD on it.
struct Consumer {
    std::unique_ptr<ual::DeviceClient> client;
    uint64_t pd = 0;
    uint64_t rnic = 0;
    static std::optional<Consumer> open(const fs::path &device) {
        auto c = ual::DeviceClient::connect(device);
        if (!c) return std::nullopt;
        Consumer out{std::move(*c)};
        if (testutil::open_rnic(*out.client, "cpp0", &out.rnic) != RI_OK) return std::nullopt;
        if (sys(*out.client, RI_ALLOC_PD, out.rnic, nullptr, 0, nullptr, 0, &out.pd) != RI_OK) return std::nullopt;
        return out;
    }
    // One more PD on the connection's RNIC open.
    ri_status_t another_pd() {
        uint64_t h = 0;
        return sys(*client, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &h);
    }
    ri_status_t reg(uint64_t addr, uint64_t length) {
        ri_mr_reg_t r{};
        r.addr = addr;
        r.length = length;
        r.iova = addr;
        r.access = RI_ACCESS_LOCAL_WRITE;
        ri_mr_keys_t keys{};
        uint64_t mr = 0;
        return sys(*client, RI_REGISTER_MR, pd, &r, sizeof r, &keys, sizeof keys, &mr);
    }
};

// Anonymous memory, touched.
uint64_t mapped(size_t bytes) {
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    std::memset(p, 1, bytes);
    return reinterpret_cast<uint64_t>(p);
}

class Limits : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        KrdmadFixture::SetUp();
        nobody_ = user("nobody");
        daemon_ = user("daemon");
        if (::geteuid() != 0 || !nobody_ || !daemon_) GTEST_SKIP() << "needs root and the users nobody and daemon";
        device_ = dir_ / "krdma";
        // Where the children (other users) and the test tell each other what they reached.
        flags_ = dir_ / "flags";
        fs::create_directory(flags_);
        ::chmod(flags_.c_str(), 0777);
    }
    void start_krdmad(const std::string &limits) {
        start({"--config", write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")"
                                        TEST_PROVIDER_DIR R"(", "modules": ["test_cpp_kvp.so"], "rnics": [{"name": )"
                                        R"("cpp0", "provider": "cppkvp", "address": "127.0.0.1"}], "limits": )" +
                                        limits + R"(, "log_level": "warn"})")});
        ASSERT_NE(connect(device_), nullptr) << stderr_text();
    }
    // `rdmactl --json limits` as root, parsed.
    nlohmann::json limits() {
        std::string out;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "--json", "limits"}, out), 0) << out;
        return nlohmann::json::parse(out, nullptr, false);
    }
    // Waits (10 s at most) for @p file to exist.
    static bool wait_file(const fs::path &file) {
        for (int i = 0; i < 1000 && !fs::exists(file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return fs::exists(file);
    }
    // A child body's wait for the test to say it is done with it (or 20 s).
    static void hold_until(const fs::path &file) {
        for (int i = 0; i < 2000 && !fs::exists(file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    std::optional<Credentials> nobody_, daemon_;
    fs::path device_;
    fs::path flags_;
};

// A free port below 1024 (root binds it to find out).
uint16_t free_privileged_port() {
    for (uint16_t port = 990; port > 600; --port) {
        krdma::UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(s.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) return port;
    }
    return 0;
}

TEST_F(Limits, AnUnprivilegedCallerGetsNoPrivilegedPortThroughKrdmad) {
    start_krdmad("{}");
    const uint16_t port = free_privileged_port();
    ASSERT_NE(port, 0);
    const fs::path log = dir_ / "child.out";
    // As nobody: its own bind() of the port fails with EACCES, and so does krdmad's on its behalf (with the reason);
    // a port above the privileged range works. Exit 0 when all of that held, else the step that failed.
    pid_t child = fork_child(log, log, nobody_, [&] {
        krdma::UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(s.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 || errno != EACCES) return 10;
        auto c = ual::DeviceClient::connect(device_);
        if (!c) return 11;
        uint64_t rnic = 0;
        if (testutil::open_rnic(**c, "cpp0", &rnic) != RI_OK) return 12;
        krdma_listen q{};
        q.rnic = rnic;
        q.port = port;
        auto r = (*c)->call(KRDMA_CMD_LISTEN, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r) return 13;
        std::printf("status %d: %s\n", r->status, r->reason.c_str());
        if (r->status != RI_EACCES || r->reason.find("CAP_NET_BIND_SERVICE") == std::string::npos) return 14;
        q.port = 0;
        r = (*c)->call(KRDMA_CMD_LISTEN, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r || r->status != 0) return 15;
        return 0;
    });
    EXPECT_EQ(wait_exit(child), 0) << read_text(log);
    // Root may: the same port through krdmad.
    auto c = connect(device_);
    ASSERT_NE(c, nullptr);
    uint64_t rnic = 0;
    ASSERT_RI_OK(testutil::open_rnic(*c, "cpp0", &rnic));
    krdma_listen q{};
    q.rnic = rnic;
    q.port = port;
    auto r = c->call(KRDMA_CMD_LISTEN, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    ASSERT_OK(r);
    EXPECT_EQ(r->status, 0) << r->reason;
    EXPECT_EQ(limits()["refused"]["privileged_ports"], 1);
}

TEST_F(Limits, DeviceConnectionsArePerUserAndRootAlwaysGetsIn) {
    start_krdmad(R"({"max_connections": 6, "connections_per_user": 3})");
    const fs::path log = dir_ / "nobody.out", done = flags_ / "done", ready = flags_ / "ready";
    // nobody takes its 3 and is refused a 4th with the reason; it holds its 3 until the test is done.
    pid_t hog = fork_child(log, log, nobody_, [&] {
        std::vector<std::unique_ptr<ual::DeviceClient>> held;
        for (int i = 0; i < 3; ++i) {
            auto c = ual::DeviceClient::connect(device_);
            if (!c) return 10 + i;
            held.push_back(std::move(*c));
        }
        auto fourth = ual::DeviceClient::connect(device_);
        if (fourth) return 20;
        std::printf("%s (%d)\n", fourth.error().message().c_str(), fourth.error().code());
        std::fflush(stdout);
        if (fourth.error().code() != RI_ENOSPC || fourth.error().message().find("per-user limit") == std::string::npos) {
            return 21;
        }
        std::ofstream(ready.string()) << "ready";
        hold_until(done);
        return 0;
    });
    ASSERT_TRUE(wait_file(ready)) << read_text(log);
    // Another user still gets its connections, up to the host's limit: 3 more make 6.
    const fs::path other = dir_ / "daemon.out";
    pid_t second = fork_child(other, other, daemon_, [&] {
        std::vector<std::unique_ptr<ual::DeviceClient>> held;
        for (int i = 0; i < 3; ++i) {
            auto c = ual::DeviceClient::connect(device_);
            if (!c) return 10 + i;
            held.push_back(std::move(*c));
        }
        // The host is full for users now.
        auto more = ual::DeviceClient::connect(device_);
        if (more) return 20;
        std::printf("%s\n", more.error().message().c_str());
        if (more.error().message().find("limits.max_connections") == std::string::npos) return 21;
        return 0;
    });
    EXPECT_EQ(wait_exit(second), 0) << read_text(other);
    // Root gets in however full it is, and sees the refusals counted.
    std::string out;
    EXPECT_EQ(rdmactl({"--device", device_.string(), "list"}, out), 0) << out;
    auto j = limits();
    EXPECT_EQ(j["refused"]["connections_user"], 1) << j.dump();
    EXPECT_EQ(j["refused"]["connections_host"], 1) << j.dump();
    EXPECT_EQ(j["connections"]["per_user"], 3);
    std::ofstream(done.string()) << "done";
    EXPECT_EQ(wait_exit(hog), 0) << read_text(log);
}

TEST_F(Limits, PinsArePerProcessWithinItsMemlockAndPerUser) {
    // Each user may pin 1.5 MiB; nobody's processes 1 MiB each (their RLIMIT_MEMLOCK).
    start_krdmad(R"({"pin_bytes_per_user": 1572864})");
    const fs::path log = dir_ / "first.out", ready = flags_ / "ready", done = flags_ / "done";
    constexpr uint64_t KiB = 1024;
    const auto lower_memlock = [] {
        rlimit l{1024 * KiB, 1024 * KiB};
        return ::setrlimit(RLIMIT_MEMLOCK, &l) == 0;
    };
    // First nobody process: two connections share one account, so 768 KiB on one leaves 256 KiB for the other
    // (per process, not per connection); memory it never mapped is refused; it holds 1 MiB until the test is done.
    pid_t first = fork_child(log, log, nobody_, [&] {
        if (!lower_memlock()) return 9;
        auto a = Consumer::open(device_);
        auto b = Consumer::open(device_);
        if (!a || !b) return 10;
        const uint64_t mem = mapped(2048 * KiB);
        if (mem == 0) return 11;
        if (a->reg(mem, 768 * KiB) != RI_OK) return 12;
        if (b->reg(mem + 1024 * KiB, 512 * KiB) != RI_ENOSPC) return 13;  // 768 + 512 > 1024
        // Never mapped: a hole, within the limit (over it the limit answers first, as Linux's pin does).
        void *hole = ::mmap(nullptr, 64 * KiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ::munmap(hole, 64 * KiB);
        if (b->reg(reinterpret_cast<uint64_t>(hole), 4 * KiB) != RI_EFAULT) return 15;
        if (b->reg(mem + 1024 * KiB, 256 * KiB) != RI_OK) return 14;       // 768 + 256 = 1024
        std::ofstream(ready.string()) << "ready";
        hold_until(done);
        return 0;
    });
    ASSERT_TRUE(wait_file(ready)) << read_text(log);
    // A second nobody process: within its own 1 MiB, but nobody's budget has 512 KiB left.
    const fs::path log2 = dir_ / "second.out";
    pid_t second = fork_child(log2, log2, nobody_, [&] {
        if (!lower_memlock()) return 9;
        auto c = Consumer::open(device_);
        if (!c) return 10;
        const uint64_t mem = mapped(1024 * KiB);
        if (c->reg(mem, 768 * KiB) != RI_ENOSPC) return 11;
        if (c->reg(mem, 512 * KiB) != RI_OK) return 12;
        return 0;
    });
    EXPECT_EQ(wait_exit(second), 0) << read_text(log2);
    // Another user is not affected by nobody's use.
    const fs::path log3 = dir_ / "daemon.out";
    pid_t other = fork_child(log3, log3, daemon_, [&] {
        if (!lower_memlock()) return 9;
        auto c = Consumer::open(device_);
        if (!c) return 10;
        const uint64_t mem = mapped(1024 * KiB);
        return c->reg(mem, 1024 * KiB) == RI_OK ? 0 : 11;
    });
    EXPECT_EQ(wait_exit(other), 0) << read_text(log3);
    // The children's pins go when krdmad has seen their connections close.
    auto j = limits();
    for (int i = 0; i < 200 && j["pinned_bytes"]["in_use"] != 1024 * KiB; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        j = limits();
    }
    EXPECT_EQ(j["refused"]["pins_process"], 1) << j.dump();
    EXPECT_EQ(j["refused"]["pins_user"], 1) << j.dump();
    EXPECT_EQ(j["refused"]["pins_unmapped"], 1) << j.dump();
    EXPECT_EQ(j["pinned_bytes"]["in_use"], 1024 * KiB) << j.dump();  // the first process's, still held
    // Root, with CAP_IPC_LOCK, is limited by the per-process limit, not by its RLIMIT_MEMLOCK.
    auto root = Consumer::open(device_);
    ASSERT_TRUE(root);
    const uint64_t mem = mapped(4096 * KiB);
    EXPECT_RI_OK(root->reg(mem, 4096 * KiB));
    std::ofstream(done.string()) << "done";
    EXPECT_EQ(wait_exit(first), 0) << read_text(log);
}

// Queue rings a kVP allocates itself (a consumer's plain create CQ runs softrnic's local data path inside krdmad)
// are charged to the consumer's process like pinned memory: over its limit they are refused, and they count in use.
TEST_F(Limits, QueueMemoryAKvpHoldsIsChargedToItsOwner) {
    start({"--config", write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                    std::string(SOFTRNIC_PROVIDER_DIR) + R"(", "modules": ["softrnic_kvp.so"], )"
                                    R"("rnics": [{"name": "sr0", "provider": "softrnic", "address": "127.0.0.1"}], )"
                                    R"("limits": {"pin_bytes_per_process": 1048576}, "log_level": "warn"})")});
    auto c = connect(device_);
    ASSERT_NE(c, nullptr) << stderr_text();
    uint64_t rnic = 0;
    ASSERT_RI_OK(testutil::open_rnic(*c, "sr0", &rnic));
    const auto create_cq = [&](uint32_t entries) {
        ri_cq_attr_t a{};
        a.cqe = entries;
        uint64_t cq = 0;
        return sys(*c, RI_CREATE_CQ, rnic, &a, sizeof a, &a, sizeof a, &cq);
    };
    EXPECT_STATUS(create_cq(65536), RI_ENOSPC);  // 65536 completions of 64 bytes and more: over 1 MiB
    ASSERT_RI_OK(create_cq(1024));
    auto j = limits();
    EXPECT_GE(j["pinned_bytes"]["in_use"].get<uint64_t>(), 1024u * sizeof(ri_wc_t)) << j.dump();
    EXPECT_EQ(j["refused"]["pins_process"], 1) << j.dump();
    // Gone with its owner.
    c.reset();
    for (int i = 0; i < 200 && limits()["pinned_bytes"]["in_use"] != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(limits()["pinned_bytes"]["in_use"], 0);
}

// Objects (RNIC opens, PDs...) are limited per process over all its device connections, and per user over all its
// processes: another connection no longer brings a process a new quota, and another user keeps its own.
TEST_F(Limits, ObjectsArePerProcessOverItsConnectionsAndPerUser) {
    start_krdmad(R"({"objects_per_process": 6, "objects_per_user": 10})");
    const fs::path log = dir_ / "first.out", ready = flags_ / "ready", done = flags_ / "done";
    // Each Consumer is an RNIC open and a PD: two objects.
    pid_t first = fork_child(log, log, nobody_, [&] {
        auto a = Consumer::open(device_);
        auto b = Consumer::open(device_);
        if (!a || !b) return 10;
        if (a->another_pd() != RI_OK || a->another_pd() != RI_OK) return 11;  // 6
        if (b->another_pd() != RI_ENOSPC) return 12;                          // the process's 7th, on its 2nd connection
        std::ofstream(ready.string()) << "ready";
        hold_until(done);
        return 0;
    });
    ASSERT_TRUE(wait_file(ready)) << read_text(log);
    // A second nobody process has room of its own (2 + 2 of 6) until nobody's 10 are reached.
    const fs::path log2 = dir_ / "second.out";
    pid_t second = fork_child(log2, log2, nobody_, [&] {
        auto c = Consumer::open(device_);
        if (!c) return 10;
        if (c->another_pd() != RI_OK || c->another_pd() != RI_OK) return 11;  // nobody: 10
        return c->another_pd() == RI_ENOSPC ? 0 : 12;
    });
    EXPECT_EQ(wait_exit(second), 0) << read_text(log2);
    // Another user is not affected.
    const fs::path log3 = dir_ / "daemon.out";
    pid_t other = fork_child(log3, log3, daemon_, [&] {
        auto d = Consumer::open(device_);
        if (!d) return 10;
        for (int i = 0; i < 4; ++i) {
            if (d->another_pd() != RI_OK) return 11 + i;
        }
        return 0;
    });
    EXPECT_EQ(wait_exit(other), 0) << read_text(log3);
    auto j = limits();
    EXPECT_EQ(j["objects"]["per_process"], 6) << j.dump();
    EXPECT_EQ(j["objects"]["per_user"], 10) << j.dump();
    EXPECT_EQ(j["refused"]["objects_process"], 1) << j.dump();
    EXPECT_EQ(j["refused"]["objects_user"], 1) << j.dump();
    std::ofstream(done.string()) << "done";
    EXPECT_EQ(wait_exit(first), 0) << read_text(log);
}

}  // namespace
