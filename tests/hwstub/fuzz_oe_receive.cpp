// Fuzz target for hwstub's offload engine receive path: any byte stream arriving on a QP's socket (after the MPA
// negotiation, in RDMA mode) must end with the QP still in RTS or in ERROR, never a crash, a hang, a dead engine, a
// byte placed outside registered memory or a CQE with a status that does not exist. The bytes go through the real
// OffloadEngine thread: its socket reads (staged and straight into the target), the shared iwarp::Engine's checks,
// its DMA channel (plain copies, or process_vm_writev into another process by the mode byte), its CQ writer.
//
// Same shape as tests/iwarp/fuzz_receive.cpp, and seeded from the same siw captures. Input: byte 0 is the mode
// (bit 0 CRC, bit 1 markers, bit 2 the QP's memory belongs to another process, bit 3 the consumer has an RDMA Read
// outstanding so Read Responses have a sink, bit 4 the consumer has a Send going out), byte 1 bit 0 closes the
// peer's side after the bytes (the engine then also meets the end of the stream); the rest is the stream.
//
// Built two ways: with libFuzzer (scripts/fuzz.sh hwstub) the engine explores on its own; otherwise main() below is
// a seeded random-mutation driver over the siw captures that CTest runs for a bounded number of inputs, and that
// replays saved inputs (the corpus in tests/fuzz/corpus/hwstub) given as files or directories.
#include <sys/ioctl.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "oe_harness.hpp"
#include "replay.hpp"
#include "vectors.hpp"

namespace {

using namespace std::chrono_literals;
using namespace oe_harness;

// How deep the inputs got, so the driver can show it explores more than the first header.
struct Coverage {
    long inputs = 0, fpdus = 0, bytes_placed = 0, cqes = 0, recv_ok = 0, errors = 0, terminates = 0;
} g_coverage;

[[noreturn]] void fail(const char *what) {
    std::fprintf(stderr, "fuzz_oe_receive: %s\n", what);
    std::abort();
}

constexpr uint32_t kQp = 5, kCq = 9, kProbeQp = 1, kProbeCq = 2;
constexpr size_t kWindow = 4096, kReceive = 2048;
constexpr uint32_t kRecvStag = 0x300;

/**
 * @brief What lives as long as the process: the arena (registered memory with canaries), the idle child that owns it
 *        in the "another process" mode, and one engine with a probe QP (IDLE; its NOPs prove the engine thread is
 *        alive and serving after every input). One engine for all inputs, as one adapter serves many connections.
 */
struct World {
    World()
        : arena(64 * 1024), window(arena.carve(kWindow)), receive(arena.carve(kReceive)), child(),
          probe_cq(kProbeCq, 16), probe(kProbeQp, 16, 128, kProbeCq) {
        if (!arena.ok() || window == nullptr || receive == nullptr || child.pid() <= 0) fail("no arena or child");
        if (!adapter.start() || adapter.oe->add_cq(probe_cq.setup()) != RI_OK ||
            adapter.oe->add_qp(probe.setup) != RI_OK) {
            fail("engine setup");
        }
    }
    Arena arena;
    uint8_t *window;
    uint8_t *receive;
    IdleChild child;  // forked before the engine thread exists
    Adapter adapter;
    HostCq probe_cq;
    HostQp probe;
    uint64_t probes = 0;
};

World &world() {
    static World *w = new World();  // never destroyed: the engine thread outlives any static destructor order
    return *w;
}

// Bytes queued on our end of the engine's socket (FIONREAD through a duplicate of the engine's descriptor).
int unread(int fd) {
    int n = 0;
    return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

// Reads and drops whatever the engine sent (Read Responses, its Terminate, the consumer's Read and Send).
void drain(int fd) {
    uint8_t buf[16384];
    while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}

int run_one(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    World &w = world();
    const bool crc = (data[0] & 1) != 0, markers = (data[0] & 2) != 0, foreign = (data[0] & 4) != 0;
    const bool post_read = (data[0] & 8) != 0, post_send = (data[0] & 16) != 0;
    const bool close_after = (data[1] & 1) != 0;
    data += 2;
    size -= 2;
    ++g_coverage.inputs;
    w.arena.refill();
    w.adapter.clear_events();

    // The STag table: the window under STag 0x100 (zero-based) and the STags of the siw captures at their tagged
    // offsets (as the iWARP harness registers them), so valid placements get deep; the receive buffers under 0x300.
    const uint32_t all = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE;
    const std::pair<uint32_t, uint64_t> stags[] = {{0x100u, 0},
                                                   {0x494f5500u, 0x556d069ad130},
                                                   {0x8c182400u, 0x55b1a8ce1130},
                                                   {0x72c63b00u, 0x55b1a8ce4450},
                                                   {0x2e58d200u, 0x55c86211e130}};
    hwstub::StagTable &table = w.adapter.oe->stags();
    for (auto [stag, to_base] : stags) table.add(stag, {reinterpret_cast<uintptr_t>(w.window), kWindow, to_base, all, 1, true});
    table.add(kRecvStag, {reinterpret_cast<uintptr_t>(w.receive), kReceive, 0, RI_ACCESS_LOCAL_WRITE, 1, true});

    HostCq cq(kCq, 64);
    HostQp qp(kQp, 16, 128, kCq);
    qp.setup.owner = foreign ? w.child.pid() : ::getpid();
    if (w.adapter.oe->add_cq(cq.setup()) != RI_OK || w.adapter.oe->add_qp(qp.setup) != RI_OK) fail("add QP");
    // Four receives of two SGEs each, as the iWARP harness posts them.
    std::set<uint64_t> posted;
    for (uint64_t i = 0; i < 4; ++i) {
        (void)qp.put_recv(100 + i, 2, {hwstub_sge{512 * i, 300, kRecvStag}, hwstub_sge{512 * i + 300, 212, kRecvStag}});
        posted.insert(100 + i);
    }
    if (post_read) {
        hwstub_send_wqe r{};
        r.wr_id = 7;
        r.opcode = HWSTUB_OP_READ;
        r.flags = HWSTUB_WQE_SIGNALED;
        r.num_sge = 1;
        r.remote_stag = 0x1234;
        r.length = 256;
        (void)qp.put_send(r, {hwstub_sge{1024, 256, 0x100}});
        posted.insert(7);
    }
    if (post_send) {
        hwstub_send_wqe s{};
        s.wr_id = 8;
        s.opcode = HWSTUB_OP_SEND;
        s.flags = HWSTUB_WQE_SIGNALED;
        s.num_sge = 1;
        (void)qp.put_send(s, {hwstub_sge{0, 200, 0x100}});
        posted.insert(8);
    }
    w.adapter.publish(qp);

    // The stream, with every fuzz byte already queued (so the engine's reads split it the same way every run), then
    // optionally the end of the stream.
    Fd engine_end, ours;
    if (!stream_pair(engine_end, ours, false)) fail("socketpair");
    size_t off = 0;
    while (off < size) {
        const ssize_t n = ::send(ours.get(), data + off, size - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;  // libFuzzer's SIGALRM (-timeout)
        if (n <= 0) break;  // larger than the socket buffer: the rest is not sent (inputs are 4 KiB at most)
        off += static_cast<size_t>(n);
    }
    if (close_after) ::shutdown(ours.get(), SHUT_WR);
    Fd watch(::dup(engine_end.get()));  // to see how much the engine has not read yet
    if (w.adapter.oe->start_stream(kQp, engine_end.release(), llp_params(crc, markers)) != RI_OK) fail("start_stream");

    // Wait until the engine read everything and went idle after it (or the QP ended).
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        if (std::chrono::steady_clock::now() > deadline) fail("the engine did not finish the input within 10 s");
        drain(ours.get());
        if (unread(watch.get()) != 0) {
            std::this_thread::yield();  // the engine is reading on its thread; a sleep would cost more than a read
            continue;
        }
        const uint64_t sleeps = w.adapter.oe->stats().sleeps.load();
        w.adapter.oe->kick();
        if (!wait_until([&] { return w.adapter.oe->stats().sleeps.load() > sleeps; }, 5000ms)) {
            fail("the engine never went idle");
        }
        if (unread(watch.get()) == 0) break;
    }
    drain(ours.get());

    uint32_t state = 0;
    if (w.adapter.oe->qp_state(kQp, state) != RI_OK) fail("the QP is gone");
    if (state != RI_QPS_RTS && state != RI_QPS_ERROR) fail("the QP is neither RTS nor ERROR");
    ri_qp_stats_t st{};
    (void)w.adapter.oe->qp_stats(kQp, st);
    g_coverage.fpdus += static_cast<long>(st.rx_fpdus);
    g_coverage.bytes_placed += static_cast<long>(st.rx_bytes);
    g_coverage.terminates += static_cast<long>(st.terminates_sent);
    g_coverage.errors += state == RI_QPS_ERROR ? 1 : 0;
    if (std::getenv("FUZZ_OE_VERBOSE") != nullptr) {
        // Why the input ended where it did: the QP's last event (its Terminate code in the detail) and its counters.
        ri_async_event_t last{};
        for (const auto &e : w.adapter.events()) {
            if (e.resource_type == RI_RES_QP && e.resource_id == kQp) last = e;
        }
        std::fprintf(stderr, "input %ld: mode %02x/%02x, %zu bytes: state %u, %lu FPDUs, %lu bytes placed, event %u "
                     "detail %06x\n", g_coverage.inputs, data[-2], data[-1], size, state,
                     static_cast<unsigned long>(st.rx_fpdus), static_cast<unsigned long>(st.rx_bytes), last.event_id,
                     last.detail);
    }
    if (w.adapter.oe->remove_qp(kQp) != RI_OK || w.adapter.oe->remove_cq(kCq) != RI_OK) fail("remove");

    // Every CQE names this QP, a request it was given, and a status and opcode that exist.
    for (const auto &c : cq.drain()) {
        ++g_coverage.cqes;
        if (c.qp_num != kQp) fail("a CQE for another QP");
        if (posted.count(c.wr_id) == 0) fail("a CQE for a request never posted");
        if (c.status > RI_WC_GENERAL_ERR) fail("a CQE status that does not exist");
        if (c.opcode < HWSTUB_CQE_SEND || c.opcode > HWSTUB_CQE_RECV) fail("a CQE opcode that does not exist");
        if ((c.flags & ~(HWSTUB_CQE_SOLICITED | HWSTUB_CQE_WITH_INV)) != 0) fail("CQE flags that do not exist");
        if (c.opcode == HWSTUB_CQE_RECV && c.status == RI_WC_SUCCESS) {
            ++g_coverage.recv_ok;
            if (c.byte_len > 512) fail("a receive longer than its buffer");
        }
    }
    if (!w.arena.intact()) fail("a byte was placed outside registered memory");
    if (w.adapter.oe->dead() || w.adapter.page().dead != 0) fail("the engine died");

    // The engine thread is alive and serves: a NOP on the probe QP completes.
    hwstub_send_wqe nop{};
    nop.wr_id = ++w.probes;
    nop.opcode = HWSTUB_OP_NOP;
    nop.flags = HWSTUB_WQE_SIGNALED;
    if (!w.probe.put_send(nop)) fail("probe ring full");
    w.adapter.publish(w.probe);
    hwstub_cqe c{};
    if (!wait_until([&] { return w.probe_cq.reader.poll(c); }, 5000ms)) fail("the engine stopped serving");
    if (c.wr_id != w.probes || c.status != RI_WC_SUCCESS) fail("the probe NOP failed");
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return run_one(data, size); }

#ifndef OPENRDMA_LIBFUZZER
// Seeded random-mutation driver: fuzz_oe_receive ITERATIONS [SEED [SECONDS]] (stops at whichever limit comes first);
// or fuzz_oe_receive PATH... replays saved inputs (files, or directories of them such as tests/fuzz/corpus/hwstub).
int main(int argc, char **argv) {
    if (fuzz_replay::wanted(argc, argv)) {
        const int rc = fuzz_replay::run(argc, argv, "fuzz_oe_receive", run_one);
        if (rc == 0) {
            const Coverage &c = g_coverage;
            std::printf("fuzz_oe_receive: %ld FPDUs received, %ld payload bytes placed, %ld CQEs (%ld receives "
                        "filled), %ld QPs ended in ERROR; engine alive, no crash, nothing placed outside registered "
                        "memory\n", c.fpdus, c.bytes_placed, c.cqes, c.recv_ok, c.errors);
            // The corpus must still get through the engine's checks to placement and completed receives, and to a
            // QP ended by what it received.
            int shallow = 0;
            shallow += fuzz_replay::reached("fuzz_oe_receive", c.fpdus, "a received FPDU") ? 0 : 1;
            shallow += fuzz_replay::reached("fuzz_oe_receive", c.bytes_placed, "a placed byte") ? 0 : 1;
            shallow += fuzz_replay::reached("fuzz_oe_receive", c.recv_ok, "a filled receive") ? 0 : 1;
            shallow += fuzz_replay::reached("fuzz_oe_receive", c.errors, "a QP in ERROR") ? 0 : 1;
            if (shallow != 0) return 1;
        }
        return rc;
    }
    const long iterations = argc > 1 ? std::atol(argv[1]) : 2000;
    const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atol(argv[2])) : 12345u;
    const double seconds = argc > 3 ? std::atof(argv[3]) : 1e9;
    std::vector<std::vector<uint8_t>> seeds;
    for (const char *name : {"duo.c2s.bin", "duo.s2c.bin", "duo-crc.c2s.bin", "duo-crc.s2c.bin"}) {
        std::vector<uint8_t> bytes;
        try {
            bytes = vectors::bin(name);
        } catch (const std::exception &) {
            continue;
        }
        if (bytes.size() <= 24) continue;
        const bool with_crc = std::string(name).find("crc") != std::string::npos;
        // The captures after their 24-byte MPA frame, with CRC as they were taken, in our memory or another
        // process's, with a Read or a Send of the consumer's outstanding.
        for (uint8_t mode : {uint8_t{0}, uint8_t{4}, uint8_t{8}, uint8_t{16}}) {
            const uint8_t m = static_cast<uint8_t>(with_crc ? (mode | 1) : mode);
            for (uint8_t flags : {uint8_t{0}, uint8_t{1}}) {
                std::vector<uint8_t> s = {m, flags};
                s.insert(s.end(), bytes.begin() + 24, bytes.end());
                seeds.push_back(std::move(s));
            }
        }
    }
    if (seeds.empty()) {
        std::fprintf(stderr, "fuzz_oe_receive: no seed captures found in %s\n", SIW_VECTORS_DIR);
        return 1;
    }
    const auto start = std::chrono::steady_clock::now();
    std::mt19937 rng(seed);
    long runs = 0;
    for (long i = 0; i < iterations; ++i) {
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
        std::vector<uint8_t> input = seeds[rng() % seeds.size()];
        // The first few inputs are the seeds themselves; then 1 to 8 mutations of the stream part.
        const int mutations = i < static_cast<long>(seeds.size()) ? 0 : 1 + static_cast<int>(rng() % 8);
        if (i < static_cast<long>(seeds.size())) input = seeds[static_cast<size_t>(i)];
        for (int m = 0; m < mutations && input.size() > 2; ++m) {
            const size_t at = 2 + rng() % (input.size() - 2);
            switch (rng() % 7) {
                case 0: input[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                case 1: input[at] = static_cast<uint8_t>(rng()); break;
                case 2: input[at] = (rng() & 1) != 0 ? 0xff : 0x00; break;
                case 3:
                    input.erase(input.begin() + static_cast<long>(at),
                                input.begin() + static_cast<long>(std::min(input.size(), at + 1 + rng() % 16)));
                    break;
                case 4:
                    input.insert(input.begin() + static_cast<long>(at), 1 + rng() % 16, static_cast<uint8_t>(rng()));
                    break;
                case 5: input[rng() % 2] = static_cast<uint8_t>(rng()); break;  // another mode
                default: {  // splice a piece of another seed
                    const auto &other = seeds[rng() % seeds.size()];
                    const size_t from = 2 + rng() % (other.size() - 2);
                    const size_t len = std::min<size_t>(other.size() - from, 1 + rng() % 64);
                    input.insert(input.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                                 other.begin() + static_cast<long>(from + len));
                }
            }
        }
        run_one(input.data(), input.size());
        ++runs;
    }
    const Coverage &c = g_coverage;
    std::printf("fuzz_oe_receive: %ld inputs, seed %u: %ld FPDUs received, %ld payload bytes placed, %ld CQEs "
                "(%ld receives filled), %ld QPs ended in ERROR, %ld Terminates sent; engine alive, no crash, nothing "
                "placed outside registered memory\n",
                runs, seed, c.fpdus, c.bytes_placed, c.cqes, c.recv_ok, c.errors, c.terminates);
    return 0;
}
#endif
