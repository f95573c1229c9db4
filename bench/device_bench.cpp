// /dev/krdma round trips, next to a bare SOCK_SEQPACKET ping-pong between two threads in the same run: an ECHO call
// through the uAL client and the kAL device server (request checks, dispatch, reply with sequence matching), and a
// privileged verb (a query through ri_syscall, the kAL and the kVP). Issue 4's target for the privileged round
// trip: <= 1.5x the bare round trip.
// Run: build/bench/bench_device [--seconds S] [--json FILE]
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "adapter_manager.hpp"
#include "client.hpp"
#include "harness.hpp"
#include "server.hpp"
#include "syscall.hpp"
#include "verb_commands.hpp"

namespace {

double seconds_per_call(double seconds, const std::function<void()> &body) {
    // bytes_per_second with 1 "byte" per call gives calls per second.
    return 1.0 / bench::bytes_per_second(seconds, 1, body);
}

}  // namespace

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_device", argc, argv);

    // Baseline: the same message size bounced between two threads over a bare seqpacket pair.
    int sv[2];
    ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
    std::thread echo([fd = sv[1]] {
        uint8_t buf[256];
        for (;;) {
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0 || ::send(fd, buf, static_cast<size_t>(n), 0) != n) return;
        }
    });
    uint8_t msg[sizeof(krdma_msg_hdr) + sizeof(krdma_echo)]{};
    double bare = seconds_per_call(seconds, [&] {
        (void)::send(sv[0], msg, sizeof msg, 0);
        (void)::recv(sv[0], msg, sizeof msg, 0);
    });
    ::shutdown(sv[0], SHUT_RDWR);
    echo.join();
    ::close(sv[0]);
    ::close(sv[1]);

    // The device: a real server thread on a private path, the uAL client.
    char tmpl[] = "/tmp/krdma-bench-XXXXXX";
    std::filesystem::path dir = ::mkdtemp(tmpl);
    double device = 0, privileged = 0;
    {
        // A privileged verb needs a kVP: until softrnic's exists, the test kVP of the build tree serves.
        rdma::rnicpi::ModuleLoader loader(kal::kal_host_ops(), BENCH_PROVIDER_DIR);
        kal::AdapterManager adapters(loader);
        bool have_kvp = adapters.load("test_cpp_kvp.so") &&
                        adapters.attach(kal::AttachRequest{"cppkvp", "cpp0", "", "127.0.0.1", ""});
        kal::PinBudget budget(1 << 30);
        kal::DeviceServer server(dir / "krdma");
        kal::VerbCommands verbs(server, adapters, kal::Quotas{}, budget, 1 << 30);
        if (!server.listen()) return 1;
        std::thread t([&] { server.run(); });
        auto client = ual::DeviceClient::connect(dir / "krdma");
        if (client) {
            krdma_echo e{};
            device = seconds_per_call(seconds, [&] {
                auto r = (*client)->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e});
                bench::keep(r.has_value());
            });
            if (have_kvp) {
                ri_rnic_open_params_t p{};
                std::strcpy(p.instance_name, "cpp0");
                ri_syscall_t open{};
                open.size = sizeof open;
                open.op = RI_OPEN_RNIC;
                open.param = &p;
                open.param_len = sizeof p;
                if (ual::device_syscall(client->get(), &open) == RI_OK) {
                    ri_rnic_attr_t attr{};
                    ri_syscall_t q{};
                    q.size = sizeof q;
                    q.op = RI_QUERY_RNIC;
                    q.object = open.handle_out;
                    q.result = &attr;
                    q.result_cap = sizeof attr;
                    privileged = seconds_per_call(seconds, [&] { bench::keep(ual::device_syscall(client->get(), &q)); });
                }
            }
        }
        if (client) client->reset();  // close the connection before the server goes
        server.stop();
        t.join();
    }
    std::filesystem::remove_all(dir);
    std::printf("round trip, %zu-byte request and reply\n", sizeof msg);
    std::printf("%-40s %8.2f us\n", "bare SOCK_SEQPACKET ping-pong", bare * 1e6);
    std::printf("%-40s %8.2f us   ratio %5.2f\n", "/dev/krdma ECHO (uAL client -> kAL)", device * 1e6, device / bare);
    figures.add("/dev/krdma ECHO round trip", device * 1e6, "us", "bare SOCK_SEQPACKET ping-pong", bare * 1e6);
    if (privileged > 0) {
        figures.add("privileged query round trip (ri_syscall -> kAL -> kVP)", privileged * 1e6, "us",
                    "bare SOCK_SEQPACKET ping-pong", bare * 1e6, privileged / bare, "<= 1.5x", privileged / bare <= 1.5);
        std::printf("%-40s %8.2f us   ratio %5.2f   (target <= 1.5)\n", "privileged query (ri_syscall -> kAL -> kVP)",
                    privileged * 1e6, privileged / bare);
    } else {
        std::printf("privileged query: skipped (no kVP module in %s)\n", BENCH_PROVIDER_DIR);
    }
    return 0;
}
