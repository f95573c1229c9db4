// The real krdmad binary in its own process group on a private device path: it starts from a configuration with
// two providers and an RNIC, answers a client, tells it when it shuts down on SIGTERM, and refuses a bad
// configuration, a missing module and a device path in use with distinct exit codes and clear messages.
#include "krdmad_fixture.hpp"

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
    pid_t second = start({"--device", device.string()});
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
    EXPECT_NE(out.find("no RNIC serves 10.9.9.9"), std::string::npos) << out;
}

TEST_F(Krdmad, RdmactlSaysWhenKrdmadIsNotRunning) {
    std::string out;
    EXPECT_EQ(rdmactl({"--device", (dir_ / "nobody").string(), "list"}, out), 1);
    EXPECT_NE(out.find("is krdmad running"), std::string::npos) << out;
}

TEST_F(Krdmad, CheckValidatesWithoutServing) {
    pid_t pid = start({"--check", "--config", write_config(good_config((dir_ / "krdma").string()))});
    EXPECT_EQ(wait_exit(pid), 0);
    EXPECT_FALSE(fs::exists(dir_ / "krdma"));
}

}  // namespace
