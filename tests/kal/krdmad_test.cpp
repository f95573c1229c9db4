// The real krdmad binary in its own process group on a private device path: it starts from a configuration with
// two providers and an RNIC, answers a client, tells it when it shuts down on SIGTERM, and refuses a bad
// configuration, a missing module and a device path in use with distinct exit codes and clear messages.
#include "krdmad_fixture.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <nlohmann/json.hpp>

#include "rnic_calls.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;

class Krdmad : public testutil::KrdmadFixture {
protected:
    std::string good_config(const std::string &device) {
        return R"({"device": ")" + device + R"(", "provider_dir": ")" TEST_PROVIDER_DIR R"(",
                   "modules": ["test_cpp_kvp.so", "test_good_kvp.so"],
                   "rnics": [{"name": "cpp0", "provider": "cppkvp", "address": "127.0.0.1"}],
                   "log_level": "warn"})";
    }
};

TEST_F(Krdmad, ServesAndShutsDownCleanlyTellingClients) {
    fs::path device = dir_ / "run" / "krdma";
    pid_t pid = start({"--config", write_config(good_config(device.string()))});
    auto client = connect(device);
    ASSERT_NE(client, nullptr) << stderr_text();
    EXPECT_EQ(client->hello().pid, static_cast<uint32_t>(::getpid()));
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    std::optional<krdma_event> ev;
    for (int i = 0; i < 500 && !ev; ++i) {
        ev = client->next_event();
        if (!ev) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(ev.has_value());
    EXPECT_EQ(ev->event, static_cast<uint32_t>(KRDMA_EVENT_SHUTDOWN));
    EXPECT_EQ(wait_exit(pid), 0) << stderr_text();
    EXPECT_FALSE(fs::exists(device));  // the device is removed on the way out
}

// Run only by the test below (DISABLED_, so a plain run skips it): starts krdmad, writes its pid where
// $KRDMAD_TEST_PID_FILE says, and waits to be killed.
TEST_F(Krdmad, DISABLED_HelperStartsKrdmadAndWaitsToBeKilled) {
    const char *pid_file = std::getenv("KRDMAD_TEST_PID_FILE");
    ASSERT_NE(pid_file, nullptr);
    fs::path device = dir_ / "krdma";
    const pid_t pid = start({"--config", write_config(good_config(device.string()))});
    ASSERT_TRUE(wait_ready(pid)) << stderr_text();
    std::ofstream(std::string(pid_file) + ".tmp") << pid << "\n" << dir_.string() << "\n";
    fs::rename(std::string(pid_file) + ".tmp", pid_file);
    std::this_thread::sleep_for(std::chrono::seconds(30));
}

// A test binary killed by a signal skips its TearDown: the krdmad it started must not outlive it.
TEST_F(Krdmad, AKilledTestBinaryLeavesNoKrdmadBehind) {
    const fs::path pid_file = dir_ / "krdmad.pid";
    ::setenv("KRDMAD_TEST_PID_FILE", pid_file.c_str(), 1);
    const pid_t helper = spawn("/proc/self/exe",
                               {"--gtest_filter=Krdmad.DISABLED_HelperStartsKrdmadAndWaitsToBeKilled",
                                "--gtest_also_run_disabled_tests"},
                               dir_ / "helper.out", dir_ / "helper.out");
    ::unsetenv("KRDMAD_TEST_PID_FILE");
    pid_t daemon = 0;
    std::string helper_dir;  // the helper's own private directory, which its killed TearDown cannot remove
    for (int i = 0; i < 1000 && daemon == 0; ++i) {
        std::ifstream in(pid_file);
        in >> daemon >> helper_dir;
        if (daemon == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(daemon, 0) << read_text(dir_ / "helper.out");
    struct RemoveDir {
        std::string path;
        ~RemoveDir() {
            if (path.rfind("/tmp/krdmad-test-", 0) == 0) fs::remove_all(path);
        }
    } remove_helper_dir{helper_dir};
    ASSERT_EQ(::kill(daemon, 0), 0) << "krdmad runs";
    ASSERT_EQ(::kill(helper, SIGKILL), 0);
    EXPECT_EQ(wait_exit(helper), -1) << "killed, not exited";
    // The daemon was the helper's child: reparented, killed by its parent-death signal, reaped by its new parent.
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {
        const std::string stat = read_text("/proc/" + std::to_string(daemon) + "/stat");
        gone = stat.empty() || stat.find(") Z ") != std::string::npos;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(gone) << "krdmad " << daemon << " outlived the test binary that started it";
    if (!gone) ::kill(daemon, SIGKILL);
}

TEST_F(Krdmad, BadConfigurationIsExitTwoWithTheKey) {
    pid_t pid = start({"--config", write_config(R"({"device": "/tmp/x", "modulez": []})")});
    EXPECT_EQ(wait_exit(pid), 2);
    EXPECT_NE(stderr_text().find("unknown key config.modulez"), std::string::npos) << stderr_text();
    // A syntax error is placed as an editor counts: the file, the line, the column.
    const fs::path config = write_config("{\n  \"device\": \"/tmp/x\",\n  oops\n}\n");
    pid = start({"--config", config.string()});
    EXPECT_EQ(wait_exit(pid), 2);
    EXPECT_NE(stderr_text().find("krdmad: " + config.string() + ":3:3: not valid JSON: syntax error"),
              std::string::npos)
        << stderr_text();
    pid = start({"--config", (dir_ / "missing.json").string()});
    EXPECT_EQ(wait_exit(pid), 2);
    EXPECT_NE(stderr_text().find("krdmad: " + (dir_ / "missing.json").string() +
                                 ": cannot read the configuration: No such file or directory"),
              std::string::npos)
        << stderr_text();
}

TEST_F(Krdmad, MissingModuleIsExitThree) {
    std::string cfg = R"({"device": ")" + (dir_ / "krdma").string() + R"(", "provider_dir": ")" TEST_PROVIDER_DIR
                      R"(", "modules": ["no_such_kvp.so"]})";
    pid_t pid = start({"--config", write_config(cfg)});
    EXPECT_EQ(wait_exit(pid), 3);
    EXPECT_NE(stderr_text().find("no_such_kvp.so: no such file"), std::string::npos) << stderr_text();
}

TEST_F(Krdmad, DevicePathInUseIsExitFour) {
    fs::path device = dir_ / "krdma";
    start({"--config", write_config(good_config(device.string()))});
    ASSERT_NE(connect(device), nullptr) << stderr_text();
    // Its own configuration file, so that a default one installed on the host cannot change what it does.
    pid_t second = start({"--config", write_config(R"({"provider_dir": ")" TEST_PROVIDER_DIR R"("})").string(),
                          "--device", device.string()});
    EXPECT_EQ(wait_exit(second), 4);
    EXPECT_NE(stderr_text().find("in use by a running krdmad"), std::string::npos) << stderr_text();
}

TEST_F(Krdmad, RdmactlListsAndSelectsRnicsByAddress) {
    fs::path device = dir_ / "krdma";
    start({"--config", write_config(good_config(device.string()))});
    ASSERT_NE(connect(device), nullptr) << stderr_text();
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "list"}, out), 0) << out;
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;
    EXPECT_NE(out.find("127.0.0.1"), std::string::npos) << out;
    EXPECT_NE(out.find("test_good_uvp.so"), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--json", "--device", device.string(), "list"}, out), 0) << out;
    EXPECT_NE(out.find("\"provider\": \"cppkvp\""), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "show", "127.0.0.1"}, out), 0) << out;
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "resources"}, out), 0) << out;
    EXPECT_NE(out.find("PINNED"), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--json", "--device", device.string(), "resources"}, out), 0) << out;
    EXPECT_NE(out.find("\"processes\": []"), std::string::npos) << out;  // no consumer holds anything
    EXPECT_NE(out.find("\"opens\": 0"), std::string::npos) << out;
    EXPECT_EQ(rdmactl({"--device", device.string(), "show", "10.9.9.9"}, out), 1);
    EXPECT_NE(out.find("no RNIC named or serving 10.9.9.9"), std::string::npos) << out;
}

// rdmactl show, as ibv_devinfo -v: by name or address, with the provider's version and ABI, the netdev's link, the
// limits and capabilities a consumer's query gives, and the counters; stats lists every attached RNIC (an idle one
// with zeros); resources and stats take filters.
TEST_F(Krdmad, RdmactlShowsAnRnicWholeAndFiltersWhatItLists) {
    fs::path device = dir_ / "krdma";
    start({"--config", write_config(good_config(device.string()))});
    auto consumer = connect(device);
    ASSERT_NE(consumer, nullptr) << stderr_text();
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "show", "cpp0"}, out), 0) << out;
    EXPECT_NE(out.find("provider:      cppkvp (OpenRDMA tests), version 2.0-test, RNIC-PI ABI 1."), std::string::npos)
        << out;
    EXPECT_NE(out.find("netdev:        lo (link "), std::string::npos) << out;
    EXPECT_NE(out.find("limits:"), std::string::npos) << out;
    EXPECT_NE(out.find("counters:      endpoints 0"), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "show", "127.0.0.1", "--json"}, out), 0) << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["name"], "cpp0");
    EXPECT_TRUE(j["limits"].contains("max_qp")) << out;
    EXPECT_TRUE(j["link"].contains("mtu")) << out;
    EXPECT_TRUE(j["module"].contains("abi_version")) << out;
    EXPECT_TRUE(j["capabilities"].is_array()) << out;

    // The attached RNIC is in stats with zeros (it used to give "rnics": {} until an endpoint existed).
    ASSERT_EQ(rdmactl({"--device", device.string(), "stats", "--json"}, out), 0) << out;
    const auto stats = nlohmann::json::parse(out);
    ASSERT_TRUE(stats["rnics"].is_array()) << out;
    ASSERT_EQ(stats["rnics"].size(), 1u) << out;
    EXPECT_EQ(stats["rnics"][0]["name"], "cpp0");
    EXPECT_EQ(stats["rnics"][0]["endpoints"], 0);
    ASSERT_EQ(rdmactl({"--device", device.string(), "stats", "--pid", "1", "--json"}, out), 0) << out;
    EXPECT_TRUE(nlohmann::json::parse(out)["endpoints"].empty()) << out;
    EXPECT_EQ(rdmactl({"--device", device.string(), "stats", "--rnic", "nosuch"}, out), 1);
    EXPECT_NE(out.find("no RNIC named or serving nosuch"), std::string::npos) << out;

    // resources: by process, by object type, by RNIC.
    ASSERT_RI_OK(testutil::open_rnic(*consumer, "cpp0"));
    const std::string me = std::to_string(::getpid());
    ASSERT_EQ(rdmactl({"--device", device.string(), "resources", "--pid", me, "--json"}, out), 0) << out;
    auto res = nlohmann::json::parse(out);
    ASSERT_EQ(res["processes"].size(), 1u) << out;
    EXPECT_EQ(res["processes"][0]["pid"], ::getpid());
    EXPECT_EQ(res["processes"][0]["objects"]["rnic"], 1);
    ASSERT_EQ(rdmactl({"--device", device.string(), "resources", "--type", "qp", "--json"}, out), 0) << out;
    EXPECT_TRUE(nlohmann::json::parse(out)["processes"].empty()) << out;  // nobody holds a QP
    ASSERT_EQ(rdmactl({"--device", device.string(), "resources", "--type", "rnic", "--rnic", "127.0.0.1", "--json"},
                      out),
              0)
        << out;
    res = nlohmann::json::parse(out);
    EXPECT_EQ(res["processes"].size(), 1u) << out;
    ASSERT_EQ(res["rnics"].size(), 1u) << out;
    EXPECT_EQ(res["rnics"][0]["opens"], 1);
}

TEST_F(Krdmad, RdmactlSaysWhenKrdmadIsNotRunning) {
    std::string out;
    EXPECT_EQ(rdmactl({"--device", (dir_ / "nobody").string(), "list"}, out), 1);
    EXPECT_NE(out.find("is krdmad running"), std::string::npos) << out;
}

TEST_F(Krdmad, CheckValidatesWithoutServing) {
    const fs::path config = write_config(good_config((dir_ / "krdma").string()));
    pid_t pid = start({"--check", "--config", config.string()});
    EXPECT_EQ(wait_exit(pid), 0);
    EXPECT_FALSE(fs::exists(dir_ / "krdma"));
    const std::string out = read_text(dir_ / "stdout");
    EXPECT_NE(out.find("krdmad: checking " + config.string()), std::string::npos) << out;  // which file it read
    EXPECT_NE(out.find("RNIC cpp0: cppkvp on 127.0.0.1"), std::string::npos) << out;  // attached, then detached
    EXPECT_NE(out.find("configuration is valid"), std::string::npos) << out;
}

// --check does what a start would short of serving, so it refuses what a start would, every problem with its reason
// and the status a start would have exited with.
TEST_F(Krdmad, CheckRefusesWhatAStartWouldEachWithItsReason) {
    auto check = [&](const std::string &json) {
        const int status = wait_exit(start({"--check", "--config", write_config(json).string()}));
        return std::make_pair(status, read_text(dir_ / "stdout") + read_text(dir_ / "stderr"));
    };
    const std::string device = R"("device": ")" + (dir_ / "run" / "krdma").string() + R"(", )";
    // A misspelled module, an address this host lacks, an option the provider does not know: exit 3, all reported.
    auto [status, out] = check("{" + device + R"("provider_dir": ")" OPENRDMA_BUILD_PROVIDER_DIR R"(",
        "modules": ["softrnic_kvp.so", "sofrtnic_kvp.so"],
        "rnics": [{"name": "sr0", "provider": "softrnic", "address": "192.0.2.77"},
                  {"name": "sr1", "provider": "softrnic", "address": "127.0.0.1", "options": {"max_qps": 4}}]})");
    EXPECT_EQ(status, 3) << out;
    EXPECT_NE(out.find("sofrtnic_kvp.so: no such file"), std::string::npos) << out;
    EXPECT_NE(out.find("RNIC sr0: address 192.0.2.77 is not configured on this host"), std::string::npos) << out;
    EXPECT_NE(out.find("unknown softrnic option 'max_qps'"), std::string::npos) << out;
    EXPECT_NE(out.find("configuration is not valid"), std::string::npos) << out;
    // A provider directory that is not there: exit 2.
    std::tie(status, out) = check("{" + device + R"("provider_dir": ")" + (dir_ / "nowhere").string() + R"("})");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("provider_dir " + (dir_ / "nowhere").string() + " is not a directory"), std::string::npos) << out;
    // Two RNICs with one name: the configuration itself is wrong, exit 2.
    std::tie(status, out) = check("{" + device + R"("provider_dir": ")" TEST_PROVIDER_DIR R"(", "modules": ["test_cpp_kvp.so"],
        "rnics": [{"name": "cpp0", "provider": "cppkvp", "address": "127.0.0.1"},
                  {"name": "cpp0", "provider": "cppkvp", "netdev": "lo"}]})");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("config.rnics[1].name: another RNIC is already named cpp0"), std::string::npos) << out;
    // A device path under a file, not a directory.
    std::ofstream(dir_ / "plain") << "x";
    std::tie(status, out) = check(R"({"device": ")" + (dir_ / "plain" / "krdma").string() + R"(", "provider_dir": ")" TEST_PROVIDER_DIR R"("})");
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find("is not a directory"), std::string::npos) << out;
}

TEST_F(Krdmad, ConfigurationMayCarryComments) {
    const std::string text = "// krdmad.json with comments\n{\n  /* the device */ \"device\": \"" + (dir_ / "krdma").string() +
                             "\",\n  \"provider_dir\": \"" TEST_PROVIDER_DIR "\" // trailing\n}\n";
    EXPECT_EQ(wait_exit(start({"--check", "--config", write_config(text).string()})), 0) << read_text(dir_ / "stdout");
}

// The installed unit: systemd-analyze verify accepts it (with the build's krdmad in ExecStart, as the installed one
// is not there), it is Type=notify and reloads with SIGHUP, and the default configuration it names passes --check.
TEST_F(Krdmad, InstalledUnitVerifiesAndItsDefaultConfigurationChecks) {
    const std::string unit = read_text(KRDMAD_SERVICE_PATH);
    ASSERT_FALSE(unit.empty()) << KRDMAD_SERVICE_PATH;
    EXPECT_NE(unit.find("\nType=notify\n"), std::string::npos) << unit;
    EXPECT_NE(unit.find("\nExecReload=/bin/kill -HUP $MAINPID\n"), std::string::npos) << unit;
    const std::string exec = "ExecStart=";
    const size_t at = unit.find("\n" + exec);
    ASSERT_NE(at, std::string::npos);
    const size_t binary_end = unit.find(' ', at);
    const std::string installed_config = unit.substr(unit.find("--config ", at) + 9, unit.find('\n', at + 1) - unit.find("--config ", at) - 9);
    EXPECT_EQ(fs::path(installed_config).filename(), "krdmad.json") << unit;
    const std::string local = unit.substr(0, at + 1) + exec + KRDMAD_PATH + unit.substr(binary_end);
    const fs::path copy = dir_ / "krdmad.service";
    std::ofstream(copy) << local;
    if (::access("/usr/bin/systemd-analyze", X_OK) != 0) GTEST_SKIP() << "systemd-analyze is not installed";
    const pid_t pid = spawn("/usr/bin/systemd-analyze", {"verify", "--man=no", copy.string()}, dir_ / "verify.out",
                            dir_ / "verify.out");
    EXPECT_EQ(wait_exit(pid), 0) << read_text(dir_ / "verify.out");
    EXPECT_EQ(read_text(dir_ / "verify.out"), "") << "systemd-analyze found something to say";

    // The default configuration (comments and all) checks, given where this build's providers are.
    std::string text = read_text(KRDMAD_DEFAULT_CONFIG);
    const size_t brace = text.find("\n{");
    ASSERT_NE(brace, std::string::npos);
    text.insert(brace + 2, "\n  \"provider_dir\": \"" OPENRDMA_BUILD_PROVIDER_DIR "\", \"device\": \"" +
                               (dir_ / "run" / "krdma.sock").string() + "\",");
    EXPECT_EQ(wait_exit(start({"--check", "--config", write_config(text).string()})), 0) << read_text(dir_ / "stdout");
    EXPECT_NE(read_text(dir_ / "stdout").find("module softrnic_kvp.so: provider softrnic"), std::string::npos);
}

TEST_F(Krdmad, VersionNamesTheReleaseAndTheDeviceProtocol) {
    EXPECT_EQ(wait_exit(start({"--version"})), 0);
    const std::string out = read_text(dir_ / "stdout");
    EXPECT_NE(out.find("krdmad (OpenRDMA) " OPENRDMA_VERSION ", device protocol 1."), std::string::npos) << out;
}

// What systemd's notify socket receives (Type=notify): a datagram socket at a path of the test's, as systemd makes.
class NotifySocket {
public:
    explicit NotifySocket(const fs::path &path) : path_(path) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
    }
    ~NotifySocket() {
        if (fd_ >= 0) ::close(fd_);
    }
    NotifySocket(const NotifySocket &) = delete;
    NotifySocket &operator=(const NotifySocket &) = delete;
    [[nodiscard]] bool ok() const { return ok_; }
    // The next message containing @p what (10 s at most); the messages before it are skipped. Empty: none came.
    std::string wait_for(const std::string &what) {
        for (int i = 0; i < 1000; ++i) {
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                std::string m(buf, static_cast<size_t>(n));
                if (m.find(what) != std::string::npos) return m;
                continue;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return {};
    }

private:
    fs::path path_;
    int fd_ = -1;
    bool ok_ = false;
};

// SIGHUP (systemctl reload): the file is read again and applied live as far as no consumer loses anything. An open
// RNIC stays, a free one goes, a module goes once nothing uses it, a new one is loaded and its RNIC attached; what
// is read at start only is named; a broken file changes nothing. systemd hears READY, RELOADING, READY, STOPPING.
TEST_F(Krdmad, SighupReloadsWhatCanChangeLiveAndRefusesTheRest) {
    const fs::path device = dir_ / "krdma";
    const std::string head = R"({"device": ")" + device.string() + R"(", "provider_dir": ")" TEST_PROVIDER_DIR R"(", )";
    const fs::path config = write_config(head + R"("modules": ["test_cpp_kvp.so", "test_good_kvp.so"],
        "rnics": [{"name": "cpp0", "provider": "cppkvp", "address": "127.0.0.1"}], "log_level": "info"})");
    NotifySocket notify(dir_ / "notify");
    ASSERT_TRUE(notify.ok());
    ::setenv("NOTIFY_SOCKET", (dir_ / "notify").c_str(), 1);
    const pid_t pid = start({"--config", config.string()});
    ::unsetenv("NOTIFY_SOCKET");
    const std::string ready = notify.wait_for("READY=1");
    ASSERT_NE(ready, "") << stderr_text();
    EXPECT_NE(ready.find("STATUS=serving " + device.string() + " with 1 RNIC(s)"), std::string::npos) << ready;
    auto consumer = connect(device);
    ASSERT_NE(consumer, nullptr);
    ASSERT_RI_OK(testutil::open_rnic(*consumer, "cpp0"));
    auto reload = [&] {
        EXPECT_EQ(::kill(pid, SIGHUP), 0);
        EXPECT_NE(notify.wait_for("RELOADING=1"), "");
        return notify.wait_for("READY=1");
    };
    std::string out;

    // cpp0 is dropped from the file while a consumer holds it open: it stays. A limit changes: named, not applied.
    write_config(head + R"("modules": ["test_cpp_kvp.so", "test_good_kvp.so"], "rnics": [],
        "limits": {"max_connections": 7}, "log_level": "info"})");
    EXPECT_NE(reload().find("with 1 RNIC(s)"), std::string::npos);
    EXPECT_NE(stderr_text().find("RNIC cpp0 (cppkvp, 127.0.0.1) kept as it is: RNIC cpp0 is open 1 time(s)"),
              std::string::npos) << stderr_text();
    EXPECT_NE(stderr_text().find("limits changed: read at start only; restart krdmad to apply it"), std::string::npos)
        << stderr_text();
    ASSERT_EQ(rdmactl({"--device", device.string(), "list"}, out), 0) << out;
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;

    // A file that does not parse changes nothing.
    write_config(head + R"("modules": [)");
    reload();
    EXPECT_NE(stderr_text().find("reload refused, nothing changed"), std::string::npos) << stderr_text();
    ASSERT_EQ(rdmactl({"--device", device.string(), "list"}, out), 0) << out;
    EXPECT_NE(out.find("cpp0"), std::string::npos) << out;

    // The consumer leaves; cpp0 and its module go, the other provider's RNIC takes the address.
    consumer.reset();
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(rdmactl({"--json", "--device", device.string(), "list"}, out), 0) << out;
        if (out.find("\"opens\": 0") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    write_config(head + R"("modules": ["test_good_kvp.so"],
        "rnics": [{"name": "good0", "provider": "goodtest", "address": "127.0.0.1"}], "log_level": "info"})");
    EXPECT_NE(reload().find("with 1 RNIC(s)"), std::string::npos);
    const std::string log = stderr_text();
    EXPECT_NE(log.find("reload: detached RNIC cpp0"), std::string::npos) << log;
    EXPECT_NE(log.find("reload: unloaded module test_cpp_kvp.so (provider cppkvp)"), std::string::npos) << log;
    EXPECT_NE(log.find("reload: attached RNIC good0 (goodtest, 127.0.0.1)"), std::string::npos) << log;
    ASSERT_EQ(rdmactl({"--device", device.string(), "list"}, out), 0) << out;
    EXPECT_NE(out.find("good0"), std::string::npos) << out;
    EXPECT_EQ(out.find("cpp0"), std::string::npos) << out;
    ASSERT_EQ(rdmactl({"--device", device.string(), "modules"}, out), 0) << out;
    EXPECT_EQ(out.find("cppkvp"), std::string::npos) << out;

    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    EXPECT_NE(notify.wait_for("STOPPING=1"), "");
    EXPECT_EQ(wait_exit(pid), 0) << stderr_text();
}

}  // namespace
