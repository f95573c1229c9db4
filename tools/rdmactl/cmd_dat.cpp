// rdmactl dat-conf: the DAT registry entries (dat.conf lines) that make krdmad's RNICs uDAPL interfaces, and a
// checker for a dat.conf file that names each malformed line by its number.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"

namespace rdmactl {
namespace {

// The fields of a dat.conf line as libdat2 reads them: seven words, the last two quoted ("" when empty).
struct DatLine {
    std::string ia_name, api, safety, dflt, library, provider_version, ia_params, platform_params;
};

// Splits @p line into dat.conf fields; empty reason when it is well formed.
std::string parse_dat_line(const std::string &line, DatLine &out) {
    std::vector<std::string> words;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        if (i >= line.size()) break;
        if (line[i] == '"') {
            const size_t end = line.find('"', i + 1);
            if (end == std::string::npos) return "a quoted field is not closed";
            words.push_back(line.substr(i + 1, end - i - 1));
            i = end + 1;
        } else {
            size_t end = i;
            while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
            words.push_back(line.substr(i, end - i));
            i = end;
        }
    }
    if (words.size() < 8) return "has " + std::to_string(words.size()) + " fields, a DAT entry has 8";
    out = DatLine{words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7]};
    if (out.api.size() < 2 || (out.api[0] != 'u' && out.api[0] != 'k')) {
        return "API version \"" + out.api + "\" is not uN.M or kN.M";
    }
    if (out.safety != "threadsafe" && out.safety != "nonthreadsafe") {
        return "thread safety \"" + out.safety + "\" is not threadsafe or nonthreadsafe";
    }
    if (out.dflt != "default" && out.dflt != "nondefault") return "\"" + out.dflt + "\" is not default or nondefault";
    if (out.provider_version.find('.') == std::string::npos) {
        return "provider version \"" + out.provider_version + "\" is not NAME.MAJOR.MINOR";
    }
    return {};
}

std::string entry(const std::string &selector, const std::string &library) {
    return "openrdma-" + selector + " u2.0 nonthreadsafe default " + library + " dapl.2.0 \"" + selector + "\" \"\"";
}

}  // namespace

void add_dat_command(CLI::App &app, const GlobalOptions &global, int &exit_code) {
    struct Options {
        std::string library = OPENRDMA_DAPL_LIBRARY;
        bool by_address = false;
        std::string check;
    };
    auto opts = std::make_shared<Options>();
    CLI::App *cmd = app.add_subcommand(
        "dat-conf", "Print the dat.conf entry that makes each attached RNIC a uDAPL interface (or --check a file)");
    cmd->add_option("--library", opts->library, "The provider library the entries name (default: " OPENRDMA_DAPL_LIBRARY ")");
    cmd->add_flag("--by-address", opts->by_address, "Name each RNIC by its address in ia_params instead of its name");
    cmd->add_option("--check", opts->check, "Check FILE (a dat.conf) and name each malformed line");
    cmd->callback([&global, &exit_code, opts] {
        if (!opts->check.empty()) {
            std::ifstream in(opts->check);
            if (!in) {
                std::fprintf(stderr, "rdmactl: cannot read %s\n", opts->check.c_str());
                exit_code = 1;
                return;
            }
            std::string line;
            int number = 0, bad = 0, ours = 0;
            nlohmann::json problems = nlohmann::json::array();
            while (std::getline(in, line)) {
                ++number;
                const size_t first = line.find_first_not_of(" \t");
                if (first == std::string::npos || line[first] == '#') continue;
                DatLine d;
                const std::string why = parse_dat_line(line, d);
                if (!why.empty()) {
                    ++bad;
                    problems.push_back({{"line", number}, {"problem", why}});
                    if (!global.json) std::printf("%s:%d: %s\n", opts->check.c_str(), number, why.c_str());
                    continue;
                }
                if (d.library.find("libdaplopenrdma") != std::string::npos) ++ours;
            }
            if (global.json) {
                std::cout << nlohmann::json{{"file", opts->check}, {"malformed", problems}, {"openrdma_entries", ours}}
                                 .dump(2)
                          << "\n";
            } else if (bad == 0) {
                std::printf("%s: %d lines, every entry well formed (%d name OpenRDMA's provider)\n", opts->check.c_str(),
                            number, ours);
            }
            exit_code = bad == 0 ? 0 : 1;
            return;
        }
        auto rnics = fetch_rnics(global);
        if (!rnics) {
            exit_code = 1;
            return;
        }
        nlohmann::json out = nlohmann::json::array();
        for (const krdma_rnic_info &info : *rnics) {
            const std::string selector = opts->by_address ? info.address : info.name;
            const std::string line = entry(selector, opts->library);
            if (global.json) {
                out.push_back({{"rnic", info.name}, {"address", info.address}, {"ia_name", "openrdma-" + selector},
                               {"entry", line}});
            } else {
                std::printf("%s\n", line.c_str());
            }
        }
        if (global.json) std::cout << out.dump(2) << "\n";
    });
}

}  // namespace rdmactl
