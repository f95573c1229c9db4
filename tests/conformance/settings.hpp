/**
 * @file settings.hpp
 * @brief What the conformance runner was told on its command line: the provider under test, where its modules and
 *        krdmad are, the address its RNIC serves. Filled once by main() before any test runs.
 */
#ifndef TESTS_CONFORMANCE_SETTINGS_HPP
#define TESTS_CONFORMANCE_SETTINGS_HPP

#include <filesystem>
#include <string>

namespace conformance {

/** @brief The runner's configuration (see `openrdma-conformance --help`). */
struct Settings {
    std::string provider;                /**< The provider (kVP module) name, e.g. "softrnic". */
    std::string module;                  /**< The kVP module file: a name in provider_dir or a path. */
    std::filesystem::path provider_dir;  /**< Where krdmad finds the kVP module and the uAL the uVP library. */
    std::string address = "127.0.0.1";   /**< The address the RNIC under test is attached to. */
    std::string options;                 /**< Provider attach options as a JSON object text, or empty. */
    std::filesystem::path krdmad;        /**< The krdmad binary the runner starts. */
    std::filesystem::path self;          /**< This program (started again as a consumer child process). */
};

/** @brief The runner's settings (one per process). */
Settings &settings();

/** @brief The name the runner gives the RNIC it attaches. */
inline constexpr const char *kRnicName = "conf0";

}  // namespace conformance

#endif  // TESTS_CONFORMANCE_SETTINGS_HPP
