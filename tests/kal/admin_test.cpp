// The administrator's commands against a real krdmad on a private device path, through real rdmactl processes:
// load, attach two RNICs of two providers, list, detach, unload; busy refusals while an RNIC is attached or open;
// root-or-admin-group permission checks made as another uid in a forked child; malformed requests answered with
// errors on a connection that stays usable.
#include <ifaddrs.h>
#include <netdb.h>
#include <pwd.h>

#include <cstring>

#include "krdmad_fixture.hpp"
#include "rnic_calls.hpp"
#include "syscall.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;
using testutil::Credentials;

// A configured address of this host other than 127.0.0.1 (::1 first), for a second RNIC.
std::optional<std::string> second_address() {
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0) return std::nullopt;
    std::vector<std::string> found;
    for (ifaddrs *i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
            continue;
        }
        char host[NI_MAXHOST];
        socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        if (::getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) continue;
        std::string text = host;
        if (text != "127.0.0.1" && text.find('%') == std::string::npos) found.push_back(text);
    }
    ::freeifaddrs(list);
    if (found.empty()) return std::nullopt;
    auto loopback6 = std::find(found.begin(), found.end(), "::1");
    return loopback6 != found.end() ? *loopback6 : found.front();
}

std::optional<gid_t> group_id(const char *name) {
    const group *g = ::getgrnam(name);
    return g != nullptr ? std::optional<gid_t>(g->gr_gid) : std::nullopt;
}

class Admin : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        KrdmadFixture::SetUp();
        device_ = (dir_ / "krdma").string();
    }
    // Starts krdmad with @p modules loaded, cppkvp's RNIC cpp0 on 127.0.0.1 if @p with_rnic, @p admin_group.
    void start_krdmad(const std::string &modules, bool with_rnic, const std::string &admin_group = "") {
        std::string rnics = with_rnic ? R"([{"name": "cpp0", "provider": "cppkvp", "address": "127.0.0.1"}])" : "[]";
        start({"--config", write_config(R"({"device": ")" + device_ + R"(", "provider_dir": ")" TEST_PROVIDER_DIR
                                        R"(", "modules": )" + modules + R"(, "rnics": )" + rnics +
                                        R"(, "admin_group": ")" + admin_group + R"(", "log_level": "warn"})")});
        ASSERT_NE(connect(device_), nullptr) << stderr_text();
    }
    // rdmactl on this test's device.
    int ctl(std::vector<std::string> args, std::string &out, const std::optional<Credentials> &as = std::nullopt) {
        args.insert(args.begin(), {"--device", device_});
        return rdmactl(std::move(args), out, as);
    }
    std::string ctl_ok(std::vector<std::string> args) {
        std::string out;
        EXPECT_EQ(ctl(args, out), 0) << out;
        return out;
    }
    // One raw request as this process; the reply status.
    template <typename T>
    static int call(ual::DeviceClient &c, uint32_t cmd, const T &q) {
        auto r = c.call(cmd, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        return r ? r->status : -1;
    }
    // nobody, with primary group @p gid (its own by default) and no supplementary groups but that one.
    static std::optional<Credentials> nobody(std::optional<gid_t> gid = std::nullopt) {
        const passwd *pw = ::getpwnam("nobody");
        if (pw == nullptr) return std::nullopt;
        gid_t g = gid.value_or(pw->pw_gid);
        return Credentials{pw->pw_uid, g, {g}};
    }

    std::string device_;
};

TEST_F(Admin, LoadAttachTwoProvidersListDetachUnload) {
    auto other = second_address();
    if (!other) GTEST_SKIP() << "this host has no address besides 127.0.0.1 for a second RNIC";
    start_krdmad("[]", false);
    std::string out = ctl_ok({"load", "test_cpp_kvp.so"});
    EXPECT_NE(out.find("loaded cppkvp"), std::string::npos) << out;
    out = ctl_ok({"--json", "load", std::string(TEST_PROVIDER_DIR) + "/test_good_kvp.so"});
    EXPECT_NE(out.find("\"provider\": \"goodtest\""), std::string::npos) << out;
    out = ctl_ok({"attach", "--provider", "cppkvp", "--name", "cpp0", "--address", "127.0.0.1"});
    EXPECT_NE(out.find("attached cpp0 (cppkvp) to 127.0.0.1"), std::string::npos) << out;
    out = ctl_ok({"--json", "attach", "--provider", "goodtest", "--name", "good0", "--address", *other, "--options",
                  R"({"note": "second"})"});
    EXPECT_NE(out.find("\"address\": \"" + *other + "\""), std::string::npos) << out;

    out = ctl_ok({"list"});
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;
    EXPECT_NE(out.find("good0"), std::string::npos) << out;
    out = ctl_ok({"modules"});
    EXPECT_NE(out.find("cppkvp"), std::string::npos) << out;
    EXPECT_NE(out.find("goodtest"), std::string::npos) << out;
    out = ctl_ok({"--json", "modules"});
    EXPECT_NE(out.find("\"rnics\": 1"), std::string::npos) << out;
    EXPECT_NE(out.find("test_good_uvp.so"), std::string::npos) << out;

    // A provider that serves an RNIC stays.
    EXPECT_EQ(ctl({"unload", "cppkvp"}, out), 1);
    EXPECT_EQ(out, "rdmactl: unload failed: provider 'cppkvp' still serves RNIC cpp0; detach it first (EBUSY)\n");
    EXPECT_NE(ctl_ok({"modules"}).find("cppkvp"), std::string::npos);

    out = ctl_ok({"detach", "127.0.0.1"});  // by an address it serves, as rdmactl names RNICs everywhere
    EXPECT_NE(out.find("detached cpp0"), std::string::npos) << out;
    ctl_ok({"unload", "cppkvp"});
    out = ctl_ok({"--json", "detach", "good0"});
    EXPECT_NE(out.find("\"detached\": \"good0\""), std::string::npos) << out;
    ctl_ok({"--json", "unload", "goodtest"});
    EXPECT_EQ(ctl_ok({"--json", "list"}).find("cpp0"), std::string::npos);
    EXPECT_NE(ctl_ok({"--json", "modules"}).find("[]"), std::string::npos);

    // What is gone is reported as gone.
    EXPECT_EQ(ctl({"detach", "cpp0"}, out), 1);
    EXPECT_EQ(out, "rdmactl: detach failed: no RNIC named cpp0 (ENODEV)\n");
    EXPECT_EQ(ctl({"attach", "--provider", "cppkvp", "--name", "cpp0", "--address", "127.0.0.1"}, out), 1);
    EXPECT_EQ(out, "rdmactl: attach failed: no kVP 'cppkvp' is loaded; load its module first (ENOENT)\n");
}

TEST_F(Admin, AnOpenRnicIsBusyUntilItsConsumerLeaves) {
    start_krdmad(R"(["test_cpp_kvp.so"])", true);
    auto consumer = connect(device_);
    ASSERT_NE(consumer, nullptr);
    ASSERT_RI_OK(testutil::open_rnic(*consumer, "cpp0"));

    std::string out;
    EXPECT_EQ(ctl({"detach", "cpp0"}, out), 1);
    EXPECT_EQ(out, "rdmactl: detach failed: RNIC cpp0 is open 1 time(s); its consumers must close it first (EBUSY)\n");
    EXPECT_NE(ctl_ok({"--json", "list"}).find("\"opens\": 1"), std::string::npos);

    consumer.reset();  // the kAL closes what a departed consumer held
    int rc = 1;
    for (int i = 0; i < 200 && rc != 0; ++i) {
        if (i != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        rc = ctl({"detach", "cpp0"}, out);
    }
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(ctl_ok({"list"}).find("cpp0"), std::string::npos);
}

TEST_F(Admin, OthersAreRefusedAndNothingChanges) {
    auto as = nobody();
    if (::geteuid() != 0 || !as || !group_id("staff")) {
        GTEST_SKIP() << "needs root, a 'nobody' user to act as another uid and a 'staff' group";
    }
    start_krdmad(R"(["test_cpp_kvp.so"])", true, "staff");
    std::string out;
    // krdmad says who may, and who the caller is.
    const std::string why = " needs root or membership in krdmad's admin group (gid " +
                            std::to_string(*group_id("staff")) + "); uid " + std::to_string(as->uid) +
                            " is neither (EPERM)\n";
    EXPECT_EQ(ctl({"detach", "cpp0"}, out, as), 1);
    EXPECT_EQ(out, "rdmactl: detach failed: permission denied: detach" + why);
    EXPECT_EQ(ctl({"unload", "cppkvp"}, out, as), 1);
    EXPECT_EQ(out, "rdmactl: unload failed: permission denied: unload" + why);
    EXPECT_EQ(ctl({"load", "test_good_kvp.so"}, out, as), 1);
    EXPECT_EQ(out, "rdmactl: load failed: permission denied: load" + why);
    EXPECT_EQ(ctl({"attach", "--provider", "cppkvp", "--name", "x0", "--netdev", "lo"}, out, as), 1);
    EXPECT_EQ(out, "rdmactl: attach failed: permission denied: attach" + why);
    EXPECT_EQ(ctl({"control", "cpp0", R"({"speed": 1})"}, out, as), 1);
    EXPECT_NE(out.find("permission denied: control" + why), std::string::npos) << out;
    // The empty control request changes nothing and is open to everyone, as `rdmactl show` that sends it: this
    // provider has no control operation, which is what the caller hears.
    EXPECT_EQ(ctl({"control", "cpp0", "{}"}, out, as), 1);
    EXPECT_EQ(out.find("permission denied"), std::string::npos) << out;
    EXPECT_NE(out.find("no run-time control operation"), std::string::npos) << out;
    EXPECT_EQ(ctl({"show", "cpp0"}, out, as), 0) << out;
    EXPECT_NE(out.find("tunables:      none"), std::string::npos) << out;
    // Listing stays open to everyone.
    EXPECT_EQ(ctl({"list"}, out, as), 0) << out;
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;
    EXPECT_EQ(ctl({"modules"}, out, as), 0) << out;

    // The exact status of each command, from a raw client in a child running as nobody: exit 0 when all are EPERM.
    const fs::path log = dir_ / "child.out";
    pid_t child = fork_child(log, log, as, [this] {
        auto c = ual::DeviceClient::connect(device_);
        if (!c) return 2;
        krdma_detach_rnic d{};
        std::strcpy(d.name, "cpp0");
        krdma_unload_module u{};
        std::strcpy(u.provider, "cppkvp");
        krdma_load_module l{};
        std::strcpy(l.file, "test_good_kvp.so");
        krdma_attach_rnic a{};
        std::strcpy(a.provider, "cppkvp");
        std::strcpy(a.name, "x0");
        std::strcpy(a.netdev, "lo");
        bool all = call(**c, KRDMA_CMD_DETACH_RNIC, d) == RI_EPERM && call(**c, KRDMA_CMD_UNLOAD_MODULE, u) == RI_EPERM &&
                   call(**c, KRDMA_CMD_LOAD_MODULE, l) == RI_EPERM && call(**c, KRDMA_CMD_ATTACH_RNIC, a) == RI_EPERM;
        return all ? 0 : 1;
    });
    EXPECT_EQ(wait_exit(child), 0) << read_text(log);

    // Nothing changed.
    out = ctl_ok({"--json", "list"});
    EXPECT_NE(out.find("\"name\": \"cpp0\""), std::string::npos) << out;
    EXPECT_EQ(out.find("x0"), std::string::npos) << out;
    out = ctl_ok({"modules"});
    EXPECT_NE(out.find("cppkvp"), std::string::npos) << out;
    EXPECT_EQ(out.find("goodtest"), std::string::npos) << out;
}

// Every refusal of an administration command reaches the administrator in krdmad's own words, with the status name:
// the reason krdmad logs is the reason rdmactl prints.
TEST_F(Admin, EveryFailurePrintsKrdmadsReason) {
    start_krdmad(R"(["test_cpp_kvp.so"])", true);
    struct Case {
        std::vector<std::string> args;
        std::string line;  // what rdmactl prints (a prefix when the reason ends in something host-specific)
        bool whole;
    };
    const std::string dir = TEST_PROVIDER_DIR;
    const Case cases[] = {
        {{"attach", "--provider", "cppkvp", "--name", "x0", "--address", "127.0.0.1"},
         "rdmactl: attach failed: address 127.0.0.1 is already served by RNIC cpp0 (EEXIST)\n", true},
        {{"attach", "--provider", "cppkvp", "--name", "cpp0", "--address", "127.0.0.1"},
         "rdmactl: attach failed: an RNIC named cpp0 exists (EEXIST)\n", true},
        {{"attach", "--provider", "nosuchkvp", "--name", "x0", "--address", "127.0.0.1"},
         "rdmactl: attach failed: no kVP 'nosuchkvp' is loaded; load its module first (ENOENT)\n", true},
        {{"attach", "--provider", "cppkvp", "--name", "x0", "--netdev", "nosuchnet0"},
         "rdmactl: attach failed: no network device 'nosuchnet0' on this host (ENOENT)\n", true},
        {{"attach", "--provider", "cppkvp", "--name", "x0", "--address", "not-an-address"},
         "rdmactl: attach failed: 'not-an-address' is not an IPv4 or IPv6 address (EINVAL)\n", true},
        {{"detach", "nosuch0"}, "rdmactl: detach failed: no RNIC named nosuch0 (ENODEV)\n", true},
        {{"load", "no_such_kvp.so"},
         "rdmactl: load failed: provider module " + dir + "/no_such_kvp.so: no such file (provider directory is " +
             dir + ") (ENOENT)\n",
         true},
        {{"load", "test_missing_op.so"},
         "rdmactl: load failed: provider module " + dir + "/test_missing_op.so: implements non-privileged mode (uVP) "
         "but privileged mode (kVP) was expected (ELIBBAD)\n",
         true},
        {{"load", "not_a_module.so"}, "rdmactl: load failed: provider module " + dir + "/not_a_module.so: ", false},
        {{"unload", "nosuchkvp"}, "rdmactl: unload failed: no provider 'nosuchkvp' is loaded", false},
        {{"unload", "cppkvp"},
         "rdmactl: unload failed: provider 'cppkvp' still serves RNIC cpp0; detach it first (EBUSY)\n", true},
    };
    for (const Case &c : cases) {
        std::string out;
        EXPECT_EQ(ctl(c.args, out), 1) << c.args[0] << ": " << out;
        if (c.whole) {
            EXPECT_EQ(out, c.line);
        } else {
            EXPECT_EQ(out.compare(0, c.line.size(), c.line), 0) << out;
            EXPECT_EQ(out.find("(E?)"), std::string::npos) << out;
            EXPECT_EQ(out.back(), '\n');
            EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // one line
        }
    }
    // krdmad logged the same reasons it sent.
    EXPECT_NE(stderr_text().find("address 127.0.0.1 is already served by RNIC cpp0 (EEXIST)"), std::string::npos)
        << stderr_text();
    // Nothing changed.
    const std::string list = ctl_ok({"--json", "list"});
    EXPECT_NE(list.find("\"name\": \"cpp0\""), std::string::npos) << list;
    EXPECT_EQ(list.find("x0"), std::string::npos) << list;
}

TEST_F(Admin, TheAdminGroupAdmitsItsMembersByPrimaryGroup) {
    auto staff = group_id("staff");
    auto as = nobody(staff);
    if (::geteuid() != 0 || !as || !staff) GTEST_SKIP() << "needs root, a 'nobody' user and a 'staff' group";
    start_krdmad(R"(["test_cpp_kvp.so"])", true, "staff");
    std::string out;
    EXPECT_EQ(ctl({"detach", "cpp0"}, out, as), 0) << out;
    EXPECT_EQ(ctl({"load", "test_good_kvp.so"}, out, as), 0) << out;
    EXPECT_NE(ctl_ok({"modules"}).find("goodtest"), std::string::npos);
    EXPECT_EQ(ctl_ok({"list"}).find("cpp0"), std::string::npos);
}

TEST_F(Admin, TheAdminGroupAdmitsItsMembersByTheirPasswdGroups) {
    // nobody's passwd entry names nogroup; the process itself runs with another primary group.
    const passwd *pw = ::getpwnam("nobody");
    auto nogroup = group_id("nogroup");
    if (::geteuid() != 0 || pw == nullptr || !nogroup || pw->pw_gid != *nogroup) {
        GTEST_SKIP() << "needs root and a 'nobody' user whose login group is 'nogroup'";
    }
    auto as = nobody(*nogroup - 1);
    start_krdmad(R"(["test_cpp_kvp.so"])", true, "nogroup");
    std::string out;
    EXPECT_EQ(ctl({"detach", "cpp0"}, out, as), 0) << out;
    EXPECT_EQ(ctl_ok({"list"}).find("cpp0"), std::string::npos);
}

TEST_F(Admin, AnUnknownAdminGroupIsABadConfiguration) {
    start({"--check", "--config", write_config(R"({"device": ")" + device_ +
                                               R"(", "admin_group": "no-such-group-for-krdmad"})")});
    int status = wait_exit(groups_.back());
    EXPECT_EQ(status, 2);
    EXPECT_NE(stderr_text().find("admin group 'no-such-group-for-krdmad' does not exist"), std::string::npos)
        << stderr_text();
}

TEST_F(Admin, MalformedRequestsGetErrorsAndTheConnectionStaysUsable) {
    start_krdmad(R"(["test_cpp_kvp.so"])", true);
    auto c = connect(device_);
    ASSERT_NE(c, nullptr);

    krdma_attach_rnic a{};
    std::memset(a.provider, 'x', sizeof a.provider);  // no NUL
    std::strcpy(a.name, "x0");
    std::strcpy(a.address, "127.0.0.1");
    EXPECT_STATUS(call(*c, KRDMA_CMD_ATTACH_RNIC, a), RI_EINVAL);
    std::strcpy(a.provider, "cppkvp");
    std::memset(a.options, '{', sizeof a.options);
    EXPECT_STATUS(call(*c, KRDMA_CMD_ATTACH_RNIC, a), RI_EINVAL);
    a = krdma_attach_rnic{};
    std::strcpy(a.provider, "nosuchprovider");
    std::strcpy(a.name, "x0");
    std::strcpy(a.address, "127.0.0.1");
    EXPECT_STATUS(call(*c, KRDMA_CMD_ATTACH_RNIC, a), RI_ENOENT);
    std::strcpy(a.provider, "cppkvp");
    EXPECT_STATUS(call(*c, KRDMA_CMD_ATTACH_RNIC, a), RI_EEXIST);  // 127.0.0.1 is cpp0's

    krdma_detach_rnic d;
    std::memset(d.name, 'n', sizeof d.name);
    EXPECT_STATUS(call(*c, KRDMA_CMD_DETACH_RNIC, d), RI_EINVAL);
    krdma_load_module l{};
    std::memset(l.file, 'f', sizeof l.file);
    EXPECT_STATUS(call(*c, KRDMA_CMD_LOAD_MODULE, l), RI_EINVAL);
    l = krdma_load_module{};
    EXPECT_STATUS(call(*c, KRDMA_CMD_LOAD_MODULE, l), RI_EINVAL);  // no file named
    std::strcpy(l.file, "no_such_kvp.so");
    EXPECT_STATUS(call(*c, KRDMA_CMD_LOAD_MODULE, l), RI_ENOENT);
    krdma_unload_module u;
    std::memset(u.provider, 'p', sizeof u.provider);
    EXPECT_STATUS(call(*c, KRDMA_CMD_UNLOAD_MODULE, u), RI_EINVAL);
    std::strcpy(u.provider, "nosuchprovider");
    EXPECT_NE(call(*c, KRDMA_CMD_UNLOAD_MODULE, u), RI_OK);
    // A request of the wrong size for its command.
    uint8_t small[8] = {};
    auto r = c->call(KRDMA_CMD_DETACH_RNIC, small);
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_EINVAL);

    // Still usable, and nothing changed.
    krdma_list_modules m{};
    auto listed = c->call(KRDMA_CMD_LIST_MODULES, {reinterpret_cast<const uint8_t *>(&m), sizeof m});
    ASSERT_OK(listed);
    ASSERT_RI_OK(listed->status);
    ASSERT_EQ(listed->payload.size(), sizeof m);
    std::memcpy(&m, listed->payload.data(), sizeof m);
    EXPECT_EQ(m.count, 1u);
    EXPECT_STREQ(m.info.provider, "cppkvp");
    EXPECT_EQ(m.info.rnics, 1u);
    krdma_list_rnics q{};
    auto rnics = c->call(KRDMA_CMD_LIST_RNICS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    ASSERT_OK(rnics);
    std::memcpy(&q, rnics->payload.data(), sizeof q);
    EXPECT_EQ(q.count, 1u);
    EXPECT_STREQ(q.info.name, "cpp0");
}

}  // namespace
