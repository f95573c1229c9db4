// MPA framing cost: encode + decode of 64 KiB messages into 1460-byte-MSS and 16 KiB FPDUs with CRC32c on, next to
// memcpy and to a loopback TCP stream measured in the same run.
// Target (issue 3): framing and CRC together cost less than 10% of what the loopback TCP stream costs per byte.
// Run: build/bench/bench_framing [--seconds S] [--json FILE]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "tcp_baseline.hpp"
#include "iwarp/framing.hpp"

namespace {

using namespace iwarp;

constexpr size_t kMessage = 64 * 1024;

// Places each segment's payload into one 64 KiB destination, as an RDMA Write would.
class PlacingSink : public FpduSink {
public:
    explicit PlacingSink(uint8_t *dst) : dst_(dst) {}
    std::optional<TermCode> on_header(const Header &h, size_t) override {
        base_ = dst_ + (h.to % kMessage);
        return std::nullopt;
    }
    std::span<uint8_t> payload_target(size_t offset, size_t remaining) override { return {base_ + offset, remaining}; }
    std::optional<TermCode> on_segment_end() override { return std::nullopt; }

private:
    uint8_t *dst_;
    uint8_t *base_ = nullptr;
};

// Encodes one 64 KiB message into FPDUs and feeds every piece of every gather list to the receiver.
double framing_bps(double seconds, size_t ulpdu, bool crc, std::span<const uint8_t> src, std::span<uint8_t> dst) {
    Transmitter tx(FramingOptions{crc, false});
    PlacingSink sink(dst.data());
    Receiver rx(sink, FramingOptions{crc, false});
    static TxFrame frame;
    uint64_t to = 0;
    const size_t chunk = ulpdu - kTaggedHeaderLen;
    return bench::bytes_per_second(seconds, kMessage, [&] {
        for (size_t off = 0; off < kMessage; off += chunk) {
            Header h;
            h.tagged = true;
            h.stag = 1;
            h.to = to + off;
            size_t n = std::min(chunk, kMessage - off);
            h.last = off + n == kMessage;
            iovec v{const_cast<uint8_t *>(src.data()) + off, n};
            tx.build(h, {}, std::span<const iovec>(&v, 1), frame);
            for (size_t i = 0; i < frame.iovcnt; ++i) {
                rx.feed(std::span<const uint8_t>(static_cast<const uint8_t *>(frame.iov[i].iov_base),
                                                 frame.iov[i].iov_len));
            }
        }
        bench::keep(dst[kMessage - 1]);
    });
}

double process_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct TcpResult {
    double bps;                // wall-clock throughput
    double cpu_per_byte;       // sender and receiver CPU time per byte (both threads of this process)
};

// A TCP stream over 127.0.0.1, measured as every tool measures one (bench/tcp_baseline.hpp): one thread sends
// 64 KiB messages, this one reads them whole, timed per message here.
TcpResult tcp_stream(double seconds) {
    bench::Fd c, s;
    if (!bench::tcp_pair(c, s)) return TcpResult{0, 0};
    std::atomic<bool> stop{false};
    std::thread writer([&, fd = c.fd] {
        std::vector<uint8_t> buf(kMessage, 0x5a);
        (void)bench::stream_send(fd, buf.data(), kMessage,
                                 [&](uint64_t) { return !stop.load(std::memory_order_relaxed); });
        ::shutdown(fd, SHUT_WR);
    });
    std::vector<uint8_t> buf(kMessage);
    uint64_t bytes = 0;
    double cpu0 = process_cpu_seconds();
    double bps = bench::bytes_per_second(seconds, kMessage, [&] {
        bytes += kMessage;
        (void)bench::io_all(false, s.fd, buf.data(), kMessage);
    });
    double cpu = process_cpu_seconds() - cpu0;
    stop = true;
    // The writer may be blocked in a send: read to the end of its stream so it sees the stop and finishes.
    (void)bench::stream_receive(s.fd, buf.data(), kMessage);
    writer.join();
    return TcpResult{bps, cpu / static_cast<double>(bytes)};
}

}  // namespace

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_framing", argc, argv);
    // Page-aligned, so the source and the destination sit at the same offset in their pages: glibc's memcpy of a
    // destination 1-31 bytes after its source (modulo 4 KiB) takes the slow `rep movsb` case of some AMD CPUs
    // (iwarp/copy.hpp), which would make the memcpy baseline and the placement copy many times slower than memory.
    struct Page {
        alignas(4096) uint8_t b[kMessage];
    };
    auto src_page = std::make_unique<Page>(), dst_page = std::make_unique<Page>();
    std::span<uint8_t> src(src_page->b, kMessage), dst(dst_page->b, kMessage);
    for (size_t i = 0; i < kMessage; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);

    double memcpy_bps = bench::bytes_per_second(seconds, kMessage, [&] {
        std::memcpy(dst.data(), src.data(), kMessage);
        bench::keep(dst[kMessage / 2]);
    });
    TcpResult tcp = tcp_stream(seconds);
    std::printf("64 KiB messages; baselines: memcpy %.2f GB/s, loopback TCP stream %.2f GB/s using %.3f ns of CPU "
                "per byte (sender + receiver)\n",
                memcpy_bps / 1e9, tcp.bps / 1e9, tcp.cpu_per_byte * 1e9);
    figures.add("memcpy 64 KiB (page-aligned)", memcpy_bps / 1e9, "GB/s");
    figures.add("loopback TCP stream 64 KiB", tcp.bps / 1e9, "GB/s");
    std::printf("%-34s %9s %9s %14s %14s\n", "encode+decode, one thread", "GB/s", "x memcpy", "CPU/TCP CPU",
                "w/o the copy");
    bool met = true;
    for (size_t mss : {size_t{1460}, size_t{16384}}) {
        for (bool crc : {true, false}) {
            size_t ulpdu = mss == 1460 ? mulpdu(1460, false) : mss;
            double bps = framing_bps(seconds, ulpdu, crc, src, dst);
            // The placement copy moves each FPDU's payload separately: measure memcpy at that granularity.
            const size_t piece = ulpdu - kTaggedHeaderLen;
            double piece_copy_bps = bench::bytes_per_second(seconds, kMessage, [&] {
                for (size_t off = 0; off < kMessage; off += piece) {
                    std::memcpy(dst.data() + off, src.data() + off, std::min(piece, kMessage - off));
                }
                bench::keep(dst[kMessage - 1]);
            });
            // CPU per byte (the framing runs in one thread, so its wall time is its CPU time). The placement copy is
            // the one recv() makes anyway when receiving into the target, so the framing's own cost is what remains
            // beyond that copy, done in the same per-FPDU pieces.
            double cost = 1.0 / bps, tcp_cost = tcp.cpu_per_byte, copy_cost = 1.0 / piece_copy_bps;
            double own = std::max(cost - copy_cost, 0.0) / tcp_cost;
            char name[64];
            std::snprintf(name, sizeof name, "%s FPDUs, CRC %s", mss == 1460 ? "1460-MSS" : "16 KiB", crc ? "on" : "off");
            std::printf("%-34s %9.2f %9.3f %14.3f %14.3f\n", name, bps / 1e9, bps / memcpy_bps, cost / tcp_cost, own);
            if (crc) met = met && own < 0.10;
            figures.add(std::string("MPA encode+decode 64 KiB, ") + name, bps / 1e9, "GB/s", "memcpy", memcpy_bps / 1e9);
            figures.add(std::string("framing CPU beyond the copy / TCP CPU, ") + name, own, "ratio", {}, 0, 0,
                        crc ? "< 0.10" : "", crc ? (own < 0.10) : -1);
        }
    }
    std::printf("target: framing+CRC (both ends) beyond the placement copy < 10%% of the loopback TCP stream's CPU "
                "per byte -> %s\n",
                met ? "met" : "NOT met on this machine");
    return 0;
}
