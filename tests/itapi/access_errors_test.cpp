// IT-API without an access layer: no krdmad at the device path, or an embedded kAL configuration that is missing or
// malformed. it_ia_create returns IT_ERR_RESOURCES (never IT_ERR_INVALID_NAME: the name was never looked at), and
// the reason, which names the device path or the file and the place in it, is logged at warn level and kept for
// openrdma_it_last_error().
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <it_api.h>
#include <it_api_openrdma.h>

namespace {

namespace fs = std::filesystem;

// Runs @p fn with this process's stderr going to a file; returns what was written.
template <class Fn>
std::string stderr_of(Fn fn) {
    char path[] = "/tmp/itapi-stderr-XXXXXX";
    const int file = ::mkstemp(path);
    EXPECT_GE(file, 0);
    std::fflush(stderr);
    const int saved = ::dup(STDERR_FILENO);
    ::dup2(file, STDERR_FILENO);
    fn();
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    ::close(file);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    ::unlink(path);
    return ss.str();
}

class NoAccessLayer : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/itapi-noal-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
        ::unsetenv("OPENRDMA_LOG");  // the default level, warn
        ::setenv("KRDMA_DEVICE", (dir_ / "krdma.sock").c_str(), 1);
    }
    void TearDown() override {
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
        ::unsetenv("KRDMA_DEVICE");
        fs::remove_all(dir_);
    }
    // it_ia_create of "sr0"; its status, with the reason and the warn log in @p reason and @p log.
    it_status_t create(std::string &reason, std::string &log) {
        it_ia_handle_t ia = nullptr;
        it_status_t st = IT_SUCCESS;
        log = stderr_of([&] { st = it_ia_create("sr0", 2, 1, &ia); });
        EXPECT_EQ(ia, nullptr);
        const char *call = nullptr;
        reason = openrdma_it_last_error(&call);
        EXPECT_STREQ(call, "it_ia_create");
        return st;
    }

    fs::path dir_;
};

TEST_F(NoAccessLayer, NoKrdmadIsResourcesAndSaysHowToStartIt) {
    std::string reason, log;
    EXPECT_EQ(create(reason, log), IT_ERR_RESOURCES);
    const std::string device = (dir_ / "krdma.sock").string();
    EXPECT_NE(reason.find("krdmad is not running at " + device), std::string::npos) << reason;
    EXPECT_NE(reason.find("start it"), std::string::npos) << reason;
    EXPECT_NE(reason.find("$OPENRDMA_EMBEDDED_CONFIG"), std::string::npos) << reason;
    EXPECT_NE(reason.find("(ENOENT)"), std::string::npos) << reason;
    // Logged at warn, the default level, with the call that failed.
    EXPECT_NE(log.find("it_ia_create: krdmad is not running at " + device), std::string::npos) << log;
    // A later failure of the call without a reason leaves none behind.
    it_ia_handle_t ia = nullptr;
    EXPECT_EQ(it_ia_create("", 2, 1, &ia), IT_ERR_INVALID_NAME);
    const char *call = nullptr;
    EXPECT_STREQ(openrdma_it_last_error(&call), "");
    EXPECT_STREQ(call, "");
}

TEST_F(NoAccessLayer, AMalformedEmbeddedConfigurationNamesTheFileAndTheLine) {
    const fs::path file = dir_ / "embedded.json";
    std::ofstream(file) << "{\n  \"modules\": [\"softrnic_kvp.so\"]\n  \"rnics\": []\n}\n";  // no comma on line 2
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", file.c_str(), 1);
    std::string reason, log;
    EXPECT_EQ(create(reason, log), IT_ERR_RESOURCES);
    EXPECT_EQ(reason.rfind(file.string() + ":3:", 0), 0u) << reason;  // the string after it is on line 3
    EXPECT_NE(reason.find("not valid JSON"), std::string::npos) << reason;
    EXPECT_NE(reason.find("$OPENRDMA_EMBEDDED_CONFIG"), std::string::npos) << reason;
    EXPECT_NE(log.find(file.string() + ":3:"), std::string::npos) << log;
    // it_interface_list has no status to return: its reason says why it lists nothing.
    it_interface_t list[4];
    size_t n = 4, total = 7;
    it_interface_list(list, &n, &total);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(total, 0u);
    const char *call = nullptr;
    EXPECT_EQ(std::string(openrdma_it_last_error(&call)).rfind(file.string() + ":3:", 0), 0u);
    EXPECT_STREQ(call, "it_interface_list");
}

TEST_F(NoAccessLayer, AMissingEmbeddedConfigurationNamesTheFile) {
    const fs::path file = dir_ / "missing.json";
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", file.c_str(), 1);
    std::string reason, log;
    EXPECT_EQ(create(reason, log), IT_ERR_RESOURCES);
    EXPECT_EQ(reason.rfind(file.string() + ": cannot read the configuration: ", 0), 0u) << reason;
    EXPECT_NE(reason.find("(ENOENT)"), std::string::npos) << reason;
}

TEST_F(NoAccessLayer, AWellFormedConfigurationThatIsNotOneNamesTheKey) {
    const fs::path file = dir_ / "embedded.json";
    std::ofstream(file) << R"({"modulez": []})";
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", file.c_str(), 1);
    std::string reason, log;
    EXPECT_EQ(create(reason, log), IT_ERR_RESOURCES);
    EXPECT_EQ(reason.rfind(file.string() + ": configuration error: unknown key config.modulez", 0), 0u) << reason;
}

}  // namespace
