// The module loader against real shared objects built by this tree: good modules (C and C++ adapter), and every
// way a module can be refused, each with its errno and a message naming the file and the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;
using rdma::rnicpi::ModuleLoader;
using rdma::rnicpi::ModuleRef;

const fs::path kDir = TEST_PROVIDER_DIR;

// Upcalls of a host that only logs; the log lines let tests see init/fini calls made by modules.
std::mutex g_log_mutex;
std::vector<std::string> g_log;
void test_log(uint32_t, const char *module, const char *message) {
    std::lock_guard lock(g_log_mutex);
    g_log.push_back(std::string(module) + ":" + message);
}
const ri_host_ops_t kHost{sizeof(ri_host_ops_t), RI_ABI_VERSION, &test_log, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

bool logged(const std::string &line) {
    std::lock_guard lock(g_log_mutex);
    for (const auto &l : g_log) {
        if (l == line) return true;
    }
    return false;
}

class LoaderTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::lock_guard lock(g_log_mutex);
        g_log.clear();
    }
    // Loads a module that must be refused and returns the error.
    rdma::Error refused(const fs::path &file, ri_mode_t mode) {
        auto r = loader_.load(file, mode);
        EXPECT_FALSE(r.has_value()) << file;
        return r ? rdma::Error(0, "") : r.error();
    }
    ModuleLoader loader_{kHost, kDir};
};

TEST_F(LoaderTest, LoadsGoodUvpWrittenInC) {
    auto m = loader_.load("test_good_uvp.so", RI_MODE_NONPRIVILEGED);
    ASSERT_OK(m) << m.error().to_string();
    const auto &mod = **m;
    EXPECT_EQ(mod.name(), "goodtest");
    EXPECT_EQ(mod.vendor(), "OpenRDMA tests");
    EXPECT_EQ(mod.version(), "1.0-test");
    EXPECT_EQ(mod.mode(), RI_MODE_NONPRIVILEGED);
    EXPECT_EQ(mod.abi_version(), RI_ABI_VERSION);
    EXPECT_EQ(mod.path(), fs::canonical(kDir / "test_good_uvp.so"));
    EXPECT_FALSE(mod.uvp_library().has_value());
    EXPECT_TRUE(mod.implements("poll_cq"));
    EXPECT_FALSE(mod.implements("create_srq"));
}

TEST_F(LoaderTest, MissingOperationsAnswerNotSupported) {
    auto m = loader_.load("test_good_uvp.so", RI_MODE_NONPRIVILEGED);
    ASSERT_OK(m);
    const ri_verbs_ops_t &v = (*m)->verbs();
    EXPECT_EQ(v.size, sizeof(ri_verbs_ops_t));
    ri_srq_attr_t srq_attr{};
    ri_srq_t srq = nullptr;
    EXPECT_STATUS(v.create_srq(nullptr, &srq_attr, &srq), RI_EOPNOTSUPP);
    EXPECT_STATUS(v.dealloc_mw(nullptr), RI_EOPNOTSUPP);
    EXPECT_STATUS(v.register_phys_mr(nullptr, nullptr, nullptr, nullptr), RI_EOPNOTSUPP);
    // Implemented operations go to the provider.
    ri_rnic_open_params_t params{};
    ri_rnic_t rnic = nullptr;
    ASSERT_RI_OK(v.open_rnic(&params, &rnic));
    ri_rnic_attr_t attr{};
    ASSERT_RI_OK(v.query_rnic(rnic, &attr));
    EXPECT_STREQ(attr.name, "goodtest0");
    EXPECT_RI_OK(v.close_rnic(rnic));
}

TEST_F(LoaderTest, LoadsKvpWrittenWithTheCppAdapter) {
    auto m = loader_.load(kDir / "test_cpp_kvp.so", RI_MODE_PRIVILEGED);
    ASSERT_OK(m) << m.error().to_string();
    EXPECT_TRUE(logged("cppkvp:init"));
    const auto &mod = **m;
    EXPECT_EQ(mod.name(), "cppkvp");
    EXPECT_EQ(mod.version(), "2.0-test");
    ASSERT_TRUE(mod.uvp_library().has_value());
    EXPECT_EQ(*mod.uvp_library(), kDir / "test_good_uvp.so");
    const ri_verbs_ops_t &v = mod.verbs();
    const ri_module_t &d = mod.descriptor();

    ri_attach_params_t ap{};
    ri_instance_t inst = nullptr;
    ASSERT_RI_OK(d.attach(&ap, &inst));
    ri_rnic_open_params_t op{};
    op.instance = inst;
    ri_rnic_t rnic = nullptr;
    ASSERT_RI_OK(v.open_rnic(&op, &rnic));
    ri_pd_t pd = nullptr;
    ASSERT_RI_OK(v.alloc_pd(rnic, &pd));
    ri_cq_attr_t cqa{};
    cqa.cqe = 16;
    ri_cq_t cq = nullptr;
    ASSERT_RI_OK(v.create_cq(rnic, &cqa, &cq));
    ri_qp_init_attr_t qpa{};
    ri_qp_t qp = nullptr;
    ASSERT_RI_OK(v.create_qp(pd, cq, cq, nullptr, &qpa, &qp));
    ri_qp_attr_t mod_attr{};
    mod_attr.state = RI_QPS_ERROR;
    ASSERT_RI_OK(v.modify_qp(qp, &mod_attr, RI_QP_ATTR_STATE));
    ri_qp_attr_t q{};
    ASSERT_RI_OK(v.query_qp(qp, &q));
    EXPECT_EQ(q.state, static_cast<uint32_t>(RI_QPS_ERROR));
    ri_mr_reg_t reg{};
    ri_mr_t mr = nullptr;
    ri_mr_keys_t keys{};
    EXPECT_STATUS(v.register_mr(pd, &reg, &mr, &keys), RI_EINVAL);  // zero length refused by the provider
    reg.length = 4096;
    ASSERT_RI_OK(v.register_mr(pd, &reg, &mr, &keys));
    EXPECT_EQ(keys.rkey, 0x1234u);
    // Exceptions inside the provider arrive as errno values, not as unwinding through C.
    uint32_t actual = 0;
    EXPECT_STATUS(v.resize_cq(cq, 64, &actual), RI_ENOMEM);
    EXPECT_STATUS(v.query_cq(cq, &cqa), RI_EIO);
    // Unsupported object types have no operations.
    EXPECT_STATUS(v.alloc_mw(pd, RI_MW_TYPE_1, nullptr, nullptr), RI_EOPNOTSUPP);
    EXPECT_FALSE(mod.implements("create_srq"));
    EXPECT_RI_OK(v.deregister_mr(mr));
    EXPECT_RI_OK(v.destroy_qp(qp));
    EXPECT_RI_OK(v.destroy_cq(cq));
    EXPECT_RI_OK(v.dealloc_pd(pd));
    EXPECT_RI_OK(v.close_rnic(rnic));
    EXPECT_RI_OK(d.detach(inst));
}

TEST_F(LoaderTest, SameFileLoadsOnce) {
    auto a = loader_.load("test_good_uvp.so", RI_MODE_NONPRIVILEGED);
    auto b = loader_.load(kDir / "test_good_uvp.so", RI_MODE_NONPRIVILEGED);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->get(), b->get());
    EXPECT_EQ(loader_.modules().size(), 1u);
    EXPECT_EQ(loader_.find("goodtest", RI_MODE_NONPRIVILEGED), *a);
    EXPECT_EQ(loader_.find("goodtest", RI_MODE_PRIVILEGED), nullptr);
}

TEST_F(LoaderTest, SameProviderNameFromAnotherFileIsRefused) {
    ASSERT_OK(loader_.load("test_good_uvp.so", RI_MODE_NONPRIVILEGED));
    fs::path copy = fs::temp_directory_path() / ("openrdma_copy_" + std::to_string(getpid()) + ".so");
    fs::copy_file(kDir / "test_good_uvp.so", copy, fs::copy_options::overwrite_existing);
    auto e = refused(copy, RI_MODE_NONPRIVILEGED);
    fs::remove(copy);
    EXPECT_STATUS(e, RI_EEXIST);
    EXPECT_NE(e.message().find("already loaded"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, UnloadOnlyWhenUnused) {
    auto m = loader_.load("test_cpp_kvp.so", RI_MODE_PRIVILEGED);
    ASSERT_OK(m);
    ModuleRef user = *m;  // e.g. an attached RNIC instance
    auto busy = loader_.unload("cppkvp", RI_MODE_PRIVILEGED);
    ASSERT_FALSE(busy);
    EXPECT_STATUS(busy, RI_EBUSY);
    EXPECT_NE(busy.error().message().find("in use"), std::string::npos);
    EXPECT_FALSE(logged("cppkvp:fini"));
    // The module's code stays mapped while a user holds it.
    ri_rnic_attr_t attr{};
    EXPECT_STATUS(user->verbs().query_rnic(nullptr, &attr), RI_EINVAL);
    user.reset();
    m = rdma::Expected<ModuleRef>(ModuleRef());
    ASSERT_OK(loader_.unload("cppkvp", RI_MODE_PRIVILEGED));
    EXPECT_TRUE(logged("cppkvp:fini"));
    EXPECT_EQ(loader_.find("cppkvp", RI_MODE_PRIVILEGED), nullptr);
    auto again = loader_.unload("cppkvp", RI_MODE_PRIVILEGED);
    ASSERT_FALSE(again);
    EXPECT_STATUS(again, RI_ENOENT);
}

TEST_F(LoaderTest, LastUserUnloadsAfterLoaderIsGone) {
    ModuleRef survivor;
    {
        ModuleLoader loader(kHost, kDir);
        auto m = loader.load("test_good_uvp.so", RI_MODE_NONPRIVILEGED);
        ASSERT_OK(m);
        survivor = *m;
    }
    EXPECT_FALSE(logged("goodtest:fini"));
    ri_rnic_open_params_t params{};
    ri_rnic_t rnic = nullptr;
    ASSERT_RI_OK(survivor->verbs().open_rnic(&params, &rnic));
    EXPECT_RI_OK(survivor->verbs().close_rnic(rnic));
    survivor.reset();
    EXPECT_TRUE(logged("goodtest:fini"));
}

TEST_F(LoaderTest, RefusesWrongMajorAbiVersion) {
    auto e = refused("test_wrong_abi.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("test_wrong_abi.so"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("built for RNIC-PI ABI 2.0"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesNewerMinorAbiVersion) {
    auto e = refused("test_newer_minor.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("needs RNIC-PI ABI 1.99"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesMissingMandatoryOperation) {
    auto e = refused("test_missing_op.so", RI_MODE_NONPRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("test_missing_op.so"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("mandatory operation missing: poll_cq"), std::string::npos) << e.message();
    EXPECT_TRUE(logged("missingop:fini"));  // the refused module was allowed to clean up
}

TEST_F(LoaderTest, KvpMustProvideAttachAndDetach) {
    auto e = refused("test_no_attach.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("mandatory operation missing: attach, detach"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, KvpMustNameItsUvp) {
    auto e = refused("test_no_uvp.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("names no uVP library"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesWrongMode) {
    auto e = refused("test_good_uvp.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("implements non-privileged mode (uVP) but privileged mode (kVP) was expected"),
              std::string::npos)
        << e.message();
}

TEST_F(LoaderTest, RefusesMissingEntrySymbol) {
    auto e = refused("test_no_entry.so", RI_MODE_NONPRIVILEGED);
    EXPECT_STATUS(e, RI_ELIBBAD);
    EXPECT_NE(e.message().find("does not export the entry symbol ri_module_entry"), std::string::npos)
        << e.message();
}

TEST_F(LoaderTest, RefusesWhenEntryFails) {
    auto e = refused("test_entry_fails.so", RI_MODE_NONPRIVILEGED);
    EXPECT_STATUS(e, RI_ENOMEM);
    EXPECT_NE(e.message().find("entry function failed: ENOMEM"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesFileThatIsNotASharedObject) {
    auto e = refused("not_a_module.so", RI_MODE_NONPRIVILEGED);
    EXPECT_STATUS(e, RI_ENOEXEC);
    EXPECT_NE(e.message().find("not_a_module.so"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("not a loadable shared object"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesMissingFile) {
    auto e = refused("no_such_provider.so", RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ENOENT);
    EXPECT_NE(e.message().find((kDir / "no_such_provider.so").string()), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("no such file"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, RefusesDirectory) {
    auto e = refused(kDir, RI_MODE_PRIVILEGED);
    EXPECT_STATUS(e, RI_ENOEXEC);
    EXPECT_NE(e.message().find("not a regular file"), std::string::npos) << e.message();
}

TEST_F(LoaderTest, ProviderDirectoryFromEnvironment) {
    ::setenv("OPENRDMA_PROVIDER_DIR", "/opt/vendor/providers", 1);
    EXPECT_EQ(rdma::rnicpi::default_provider_dir(), fs::path("/opt/vendor/providers"));
    ::unsetenv("OPENRDMA_PROVIDER_DIR");
    EXPECT_NE(rdma::rnicpi::default_provider_dir(), fs::path("/opt/vendor/providers"));
}

}  // namespace
