// Fuzz target for the receive path: any byte stream fed to an engine (MPA frame decode first, then full operation
// with CRC and markers chosen by the first byte) must end in either clean progress or a Terminate, never a crash,
// a hang or a byte placed outside registered memory (ASan watches the buffers; canaries check their edges).
//
// Built two ways: with libFuzzer (clang -fsanitize=fuzzer, see scripts/fuzz.sh) the engine explores on its own;
// otherwise main() below is a seeded random-mutation driver over the siw captures that CTest runs for a bounded
// number of iterations, under ASan/UBSan in the sanitizer build, and that replays saved inputs (the corpus in
// tests/fuzz/corpus/iwarp) given as files or directories.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine_harness.hpp"
#include "replay.hpp"
#include "vectors.hpp"
#include "iwarp/mpa.hpp"

namespace {

using namespace iwarp;

constexpr uint8_t kCanary = 0xc5;

// How deep the inputs got, so the driver can show it explores more than the first header.
struct Coverage {
    long completions = 0, terminated = 0, fpdus = 0;
} g_coverage;

// Registered memory with canary bytes on both sides that must survive any input.
struct Guarded {
    std::vector<uint8_t> storage;
    explicit Guarded(size_t n) : storage(n + 128, kCanary) {}
    uint8_t *data() { return storage.data() + 64; }
    size_t size() const { return storage.size() - 128; }
    bool intact() const {
        for (size_t i = 0; i < 64; ++i) {
            if (storage[i] != kCanary || storage[storage.size() - 1 - i] != kCanary) return false;
        }
        return true;
    }
};

int run_one(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    // Byte 0 chooses the mode (bit 4: RFC 7306 agreed, so atomics and Immediate Data are served); byte 1 the
    // chunking of the stream.
    const bool crc = (data[0] & 1) != 0, markers = (data[0] & 2) != 0, decode_mpa_first = (data[0] & 4) != 0;
    const bool rfc7306 = (data[0] & 0x10) != 0;
    const size_t chunk = 1 + data[1];
    data += 2;
    size -= 2;
    if (decode_mpa_first && size > 0) {
        auto f = decode_mpa(std::span<const uint8_t>(data, size), (data[0] & 8) != 0 ? MpaKind::reply : MpaKind::request);
        if (f) {
            MpaConfig cfg;
            (void)respond(cfg, *f);
            (void)complete(cfg, make_request(cfg, {}), *f);
        }
    }
    harness::Owner owner;
    Guarded window(4096), receive(2048);
    // STag 0x100 (zero-based) and the STags of the siw captures at their tagged offsets, so that valid placements
    // get deep into the engine.
    const std::pair<uint32_t, uint64_t> stags[] = {{0x100u, 0},
                                                   {0x494f5500u, 0x556d069ad130},
                                                   {0x8c182400u, 0x55b1a8ce1130},
                                                   {0x72c63b00u, 0x55b1a8ce4450},
                                                   {0x2e58d200u, 0x55c86211e130}};
    for (auto [stag, to_base] : stags) {
        owner.regions[stag] = harness::Owner::Entry{
            Region{window.data(), to_base, window.size(),
                   RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_ATOMIC, 1},
            true, true};
    }
    for (int i = 0; i < 4; ++i) {
        ReceiveBuffer r;
        r.wr_id = static_cast<uint64_t>(i);
        r.sge[0] = LocalSpan{receive.data() + 512 * i, 300};
        r.sge[1] = LocalSpan{receive.data() + 512 * i + 300, 212};
        r.num_sge = 2;
        owner.receives.push_back(r);
    }
    EngineConfig cfg;
    cfg.pd = 1;
    cfg.rx = FramingOptions{crc, markers};
    cfg.tx = FramingOptions{crc, false};
    cfg.ird = 2;
    cfg.rfc7306 = rfc7306;
    Engine engine(owner, cfg);
    for (size_t off = 0; off < size && !engine.failed(); off += chunk) {
        size_t n = std::min(chunk, size - off);
        engine.receiver().feed(std::span<const uint8_t>(data + off, n));
        static TxFrame frame;
        while (engine.next_frame(frame)) engine.frame_sent();  // answer reads, send the Terminate
    }
    g_coverage.completions += static_cast<long>(owner.completions.size());
    g_coverage.terminated += engine.failed() ? 1 : 0;
    g_coverage.fpdus += static_cast<long>(engine.stats().rx_fpdus);
    if (!window.intact() || !receive.intact()) {
        std::fprintf(stderr, "fuzz: a byte was placed outside registered memory\n");
        std::abort();
    }
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return run_one(data, size); }

#ifndef OPENRDMA_LIBFUZZER
// Seeded random-mutation driver: fuzz_receive ITERATIONS [SEED]; or fuzz_receive PATH... replays saved inputs (files,
// or directories of them such as tests/fuzz/corpus/iwarp).
int main(int argc, char **argv) {
    if (fuzz_replay::wanted(argc, argv)) {
        const int rc = fuzz_replay::run(argc, argv, "fuzz_receive", run_one);
        if (rc == 0) {
            std::printf("fuzz_receive: %ld FPDUs accepted, %ld completions, %ld streams terminated; no crash and "
                        "nothing placed outside registered memory\n",
                        g_coverage.fpdus, g_coverage.completions, g_coverage.terminated);
            // The corpus must still reach both ends of the receive path: placement up to a completion, and a
            // Terminate.
            int shallow = 0;
            shallow += fuzz_replay::reached("fuzz_receive", g_coverage.fpdus, "an accepted FPDU") ? 0 : 1;
            shallow += fuzz_replay::reached("fuzz_receive", g_coverage.completions, "a completion") ? 0 : 1;
            shallow += fuzz_replay::reached("fuzz_receive", g_coverage.terminated, "a Terminate") ? 0 : 1;
            if (shallow != 0) return 1;
        }
        return rc;
    }
    const long iterations = argc > 1 ? std::atol(argv[1]) : 2000;
    const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atol(argv[2])) : 12345u;
    std::vector<std::vector<uint8_t>> seeds;
    for (const char *name : {"duo.c2s.bin", "duo.s2c.bin", "duo-crc.c2s.bin", "duo-crc.s2c.bin"}) {
        std::vector<uint8_t> bytes;
        try {
            bytes = vectors::bin(name);
        } catch (const std::exception &) {
            continue;
        }
        if (bytes.size() <= 24) continue;
        for (uint8_t mode : {uint8_t{0}, uint8_t{1}, uint8_t{4}}) {
            std::vector<uint8_t> s = {mode, 40};
            s.insert(s.end(), bytes.begin() + (mode == 4 ? 0 : 24), bytes.end());
            seeds.push_back(std::move(s));
        }
    }
    if (seeds.empty()) {
        std::fprintf(stderr, "fuzz_receive: no seed captures found in %s\n", SIW_VECTORS_DIR);
        return 1;
    }
    std::mt19937 rng(seed);
    long runs = 0;
    for (long i = 0; i < iterations; ++i) {
        std::vector<uint8_t> input = seeds[rng() % seeds.size()];
        int mutations = 1 + static_cast<int>(rng() % 8);
        for (int m = 0; m < mutations && !input.empty(); ++m) {
            size_t at = rng() % input.size();
            switch (rng() % 6) {
                case 0: input[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                case 1: input[at] = static_cast<uint8_t>(rng()); break;
                case 2: input[at] = (rng() & 1) != 0 ? 0xff : 0x00; break;
                case 3: input.erase(input.begin() + static_cast<long>(at),
                                    input.begin() + static_cast<long>(std::min(input.size(), at + 1 + rng() % 16)));
                    break;
                case 4: input.insert(input.begin() + static_cast<long>(at), 1 + rng() % 16, static_cast<uint8_t>(rng()));
                    break;
                default: {  // splice a piece of another seed
                    const auto &other = seeds[rng() % seeds.size()];
                    size_t from = rng() % other.size();
                    size_t len = std::min<size_t>(other.size() - from, 1 + rng() % 64);
                    input.insert(input.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                                 other.begin() + static_cast<long>(from + len));
                }
            }
        }
        run_one(input.data(), input.size());
        ++runs;
    }
    std::printf("fuzz_receive: %ld inputs, seed %u: %ld FPDUs accepted, %ld completions, %ld streams terminated; "
                "no crash and nothing placed outside registered memory\n",
                runs, seed, g_coverage.fpdus, g_coverage.completions, g_coverage.terminated);
    return 0;
}
#endif
