// openrdma-conformance: the provider conformance suite's runner. It starts its own krdmad on a private device path
// with one RNIC of the named provider, and runs every test of the suite against it as a consumer through the uAL.
//
//   openrdma-conformance --provider NAME [--module FILE] [--provider-dir DIR] [--address A] [--options JSON]
//                        [--krdmad PATH] [GoogleTest flags]
#include <unistd.h>

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness.hpp"
#include "settings.hpp"

namespace conformance {

Settings &settings() {
    static Settings s;
    return s;
}

/** @brief The consumer child of the cleanup tests (cleanup_test.cpp). */
int consumer_child(int argc, char **argv);

}  // namespace conformance

namespace {

namespace fs = std::filesystem;
using conformance::settings;

fs::path self_path() {
    std::error_code ec;
    fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : p;
}

bool is_executable(const fs::path &p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

// Whether this binary is the one the build tree made (then the build tree's modules and krdmad are the defaults).
bool in_build_tree(const fs::path &self) {
    std::error_code ec;
    return fs::equivalent(self.parent_path(), fs::path(CONFORMANCE_BUILD_DIR), ec) && !ec;
}

fs::path default_provider_dir(const fs::path &self) {
    if (in_build_tree(self)) return OPENRDMA_BUILD_PROVIDER_DIR;
    if (const char *env = std::getenv("OPENRDMA_PROVIDER_DIR"); env != nullptr && *env != '\0') return env;
    return OPENRDMA_PROVIDER_DIR;
}

fs::path default_krdmad(const fs::path &self) {
    if (in_build_tree(self) && is_executable(CONFORMANCE_BUILD_KRDMAD)) return CONFORMANCE_BUILD_KRDMAD;
    // Installed: krdmad next to the runner, in the installed sbin directory, or in ../sbin of the runner's prefix.
    for (const fs::path &p : {self.parent_path() / "krdmad", fs::path(OPENRDMA_INSTALL_SBINDIR) / "krdmad",
                              self.parent_path().parent_path() / "sbin" / "krdmad"}) {
        if (is_executable(p)) return p;
    }
    return fs::path(OPENRDMA_INSTALL_SBINDIR) / "krdmad";
}

const char *const kDescription =
    "The OpenRDMA provider conformance suite: verbs, connection, data-path, error and cleanup tests written once\n"
    "against the RNIC-PI and run against one provider. The runner starts its own krdmad on a private device path\n"
    "in a private temporary directory (never /dev/krdma), attaches one RNIC of the provider to --address, and runs\n"
    "every test as a consumer of that RNIC through the uAL; two QPs of the RNIC connect to each other over TCP on\n"
    "its address. It needs no root: a free loopback address is enough. A test of an optional capability the\n"
    "provider does not advertise (Query RNIC caps) checks that the operation answers RI_EOPNOTSUPP and is then\n"
    "SKIPPED, naming the capability. GoogleTest flags (--gtest_filter=..., --gtest_list_tests, --gtest_repeat=N,\n"
    "--gtest_output=xml:FILE, ...) are accepted too.";

void describe(CLI::App &app, std::string &module, std::string &provider_dir, std::string &krdmad) {
    app.add_option("--provider", settings().provider, "Provider (kVP module) name to test, e.g. softrnic or hwstub");
    app.add_option("--module", module, "kVP module file: a name in the provider directory or a path (default NAME_kvp.so)");
    app.add_option("--provider-dir", provider_dir,
                   "Directory of the kVP module and uVP library (default: the build tree's when run from it, else "
                   "$OPENRDMA_PROVIDER_DIR or " OPENRDMA_PROVIDER_DIR ")");
    app.add_option("--address", settings().address, "Address the RNIC is attached to (default 127.0.0.1)");
    app.add_option("--options", settings().options, "Provider attach options, a JSON object (e.g. '{\"max_qp\": 64}')");
    app.add_option("--krdmad", krdmad, "krdmad binary (default: the build tree's, next to the runner, or " OPENRDMA_INSTALL_SBINDIR "/krdmad)");
}

}  // namespace

int main(int argc, char **argv) {
    // The cleanup tests start this program again as a consumer process of their krdmad.
    if (argc > 1 && std::strcmp(argv[1], "--conformance-consumer") == 0) return conformance::consumer_child(argc - 2, argv + 2);

    std::string module, provider_dir, krdmad;
    CLI::App app{kDescription, "openrdma-conformance"};
    describe(app, module, provider_dir, krdmad);
    // Our help first: GoogleTest would print only its own.
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::printf("%s\n", app.help().c_str());
            return 0;
        }
    }
    ::testing::InitGoogleTest(&argc, argv);  // removes the gtest flags; ours remain
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    const bool listing = ::testing::GTEST_FLAG(list_tests);
    if (settings().provider.empty() && !listing) {
        std::fprintf(stderr, "openrdma-conformance: --provider NAME is required (try --help)\n");
        return 2;
    }
    if (!settings().options.empty()) {
        auto j = nlohmann::json::parse(settings().options, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            std::fprintf(stderr, "openrdma-conformance: --options must be a JSON object, not '%s'\n",
                         settings().options.c_str());
            return 2;
        }
    }
    // The suite's consumers reach the runner's own krdmad, never an embedded kAL a caller's environment names.
    ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    const fs::path self = self_path();
    settings().self = self;
    settings().module = module.empty() ? settings().provider + "_kvp.so" : module;
    settings().provider_dir = provider_dir.empty() ? default_provider_dir(self) : fs::path(provider_dir);
    settings().krdmad = krdmad.empty() ? default_krdmad(self) : fs::path(krdmad);
    if (!listing) {
        if (!is_executable(settings().krdmad)) {
            std::fprintf(stderr, "openrdma-conformance: no krdmad at %s (give --krdmad PATH)\n",
                         settings().krdmad.c_str());
            return 2;
        }
        std::printf("openrdma-conformance: provider %s, module %s in %s, RNIC %s on %s, krdmad %s\n",
                    settings().provider.c_str(), settings().module.c_str(), settings().provider_dir.c_str(),
                    conformance::kRnicName, settings().address.c_str(), settings().krdmad.c_str());
    }
    return RUN_ALL_TESTS();
}
