// Loads the Linux siw wire captures in tests/vectors/siw (raw .bin streams and hexdump .hex files). A missing or
// empty capture throws, so a test fails with the file's name instead of reading past an empty buffer.
#ifndef TESTS_IWARP_VECTORS_HPP
#define TESTS_IWARP_VECTORS_HPP

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vectors {

inline std::string path(const std::string &name) { return std::string(SIW_VECTORS_DIR) + "/" + name; }

/** @brief The bytes of a .bin capture. */
inline std::vector<uint8_t> bin(const std::string &name) {
    std::ifstream in(path(name), std::ios::binary);
    std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (bytes.empty()) throw std::runtime_error("capture " + path(name) + " is missing or empty");
    return bytes;
}

/**
 * @brief The frames of a .hex capture: each run of `OFFSET  xx xx ...  |ascii|` lines that restarts at offset 0 is
 *        one frame; `#` lines are comments.
 */
inline std::vector<std::vector<uint8_t>> hex_frames(const std::string &name) {
    std::ifstream in(path(name));
    if (!in) throw std::runtime_error("capture " + path(name) + " is missing");
    std::vector<std::vector<uint8_t>> frames;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string offset;
        ls >> offset;
        if (offset == "00000000" || frames.empty()) frames.emplace_back();
        std::string tok;
        while (ls >> tok && tok[0] != '|') {
            if (tok.size() != 2) break;
            frames.back().push_back(static_cast<uint8_t>(std::stoul(tok, nullptr, 16)));
        }
    }
    if (frames.empty()) throw std::runtime_error("capture " + path(name) + " holds no frame");
    return frames;
}

}  // namespace vectors

#endif  // TESTS_IWARP_VECTORS_HPP
