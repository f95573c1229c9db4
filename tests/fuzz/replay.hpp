// Replaying saved inputs through a fuzz target in the seeded (non-libFuzzer) build of its driver: the corpus kept in
// tests/fuzz/corpus/<target>/ and any crash input libFuzzer wrote, as `driver PATH...` (like a libFuzzer binary given
// files). CTest runs each corpus this way, so what the long libFuzzer runs found stays checked in CI.
#ifndef TESTS_FUZZ_REPLAY_HPP
#define TESTS_FUZZ_REPLAY_HPP

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace fuzz_replay {

/**
 * @brief True when the driver's first argument is not a number (the seeded mode's count of inputs): it names files
 *        or directories to replay.
 */
inline bool wanted(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '\0') return false;
    const std::string a = argv[1];
    return a.find_first_not_of("0123456789") != std::string::npos;
}

/**
 * @brief Runs @p one on every file named in argv[1..] (a directory: its regular files, recursively, in path order),
 *        each once. A crash or a failed check aborts inside @p one; set FUZZ_REPLAY_VERBOSE=1 to have each file
 *        named before it runs (the last name printed is then the culprit).
 * @return 0 after at least one file, 1 when a path does not exist or no file was found (an empty corpus is an error,
 *         not a pass).
 */
template <class One>
int run(int argc, char **argv, const char *driver, One &&one) {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i) {
        std::error_code ec;
        const fs::path p(argv[i]);
        if (fs::is_directory(p, ec)) {
            for (const auto &e : fs::recursive_directory_iterator(p, ec)) {
                if (e.is_regular_file()) files.push_back(e.path());
            }
        } else if (fs::is_regular_file(p, ec)) {
            files.push_back(p);
        } else {
            std::fprintf(stderr, "%s: %s: no such file or directory\n", driver, argv[i]);
            return 1;
        }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        std::fprintf(stderr, "%s: no input to replay\n", driver);
        return 1;
    }
    const bool verbose = std::getenv("FUZZ_REPLAY_VERBOSE") != nullptr;
    size_t bytes = 0;
    std::vector<uint8_t> data;
    for (const auto &f : files) {
        std::ifstream in(f, std::ios::binary);
        data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) {
            std::fprintf(stderr, "%s: cannot read %s\n", driver, f.c_str());
            return 1;
        }
        if (verbose) std::fprintf(stderr, "%s: replaying %s (%zu bytes)\n", driver, f.c_str(), data.size());
        bytes += data.size();
        one(data.data(), data.size());
    }
    std::printf("%s: replayed %zu inputs (%zu bytes)\n", driver, files.size(), bytes);
    return 0;
}

/**
 * @brief The replay's check that the corpus still gets deep into the code under test: false (with a message naming
 *        @p what) when @p count is zero, e.g. when no input of the corpus completes a receive any more because the
 *        code under test now refuses what it used to take, or because the corpus lost the inputs that did.
 */
inline bool reached(const char *driver, long count, const char *what) {
    if (count > 0) return true;
    std::fprintf(stderr, "%s: no input of the corpus reached %s\n", driver, what);
    return false;
}

}  // namespace fuzz_replay

#endif  // TESTS_FUZZ_REPLAY_HPP
