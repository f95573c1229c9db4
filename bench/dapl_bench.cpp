// What uDAPL adds over the uAL it maps onto (issue 14: less than 5%). One connected pair of DAT endpoints (two IAs
// on the embedded kAL's softrnic, real TCP on 127.0.0.1), measured two ways in alternating rounds on the very same
// queue pairs: through the DAT calls as libdat2 dispatches them (the handle's DAT_PROVIDER table: dat_ep_post_*,
// dat_evd_dequeue), and through the uAL objects underneath (ual::Endpoint::post_send, ual::CompletionQueue::poll).
// The difference is the API layer alone: handle checks, triplet translation, completion conversion.
//   bench_dapl [--seconds S] [--json FILE]
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dapl.hpp"
#include "harness.hpp"

extern "C" void dat_provider_init(const DAT_PROVIDER_INFO *, const char *);

namespace {

using clock_type = std::chrono::steady_clock;
constexpr size_t kBuf = 4u << 20;

struct Side {
    DAT_IA_HANDLE ia = nullptr;
    DAT_PZ_HANDLE pz = nullptr;
    DAT_EVD_HANDLE dto = nullptr, conn = nullptr, cr = nullptr, async = nullptr;
    DAT_EP_HANDLE ep = nullptr;
    DAT_LMR_HANDLE lmr = nullptr;
    DAT_LMR_CONTEXT lkey = 0;
    DAT_RMR_CONTEXT rkey = 0;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
    // The same objects as the uAL sees them.
    std::shared_ptr<ual::Endpoint> uep;
    std::shared_ptr<ual::CompletionQueue> ucq;

    Side() = default;
    Side(const Side &) = delete;
    Side &operator=(const Side &) = delete;
    ~Side() {
        uep.reset();
        ucq.reset();
        if (ia != nullptr) (void)dapl::ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);  // libdat2 has no macro for it
    }

    bool make() {
        if (dapl::ia_open(const_cast<char *>("openrdma-bench"), 8, &async, &ia) != DAT_SUCCESS) return false;
        DAT_EP_ATTR a{};
        a.service_type = DAT_SERVICE_TYPE_RC;
        a.max_message_size = kBuf;
        a.max_rdma_size = kBuf;
        a.max_recv_dtos = 8;
        a.max_request_dtos = 64;
        a.max_recv_iov = 1;
        a.max_request_iov = 1;
        a.max_rdma_read_in = 8;
        a.max_rdma_read_out = 8;
        a.max_rdma_read_iov = 1;
        a.max_rdma_write_iov = 1;
        DAT_REGION_DESCRIPTION region;
        region.for_va = buf.data();
        DAT_VLEN len;
        DAT_VADDR addr;
        if (DAT_PZ_CREATE(ia, &pz) != DAT_SUCCESS ||
            DAT_EVD_CREATE(ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto) != DAT_SUCCESS ||
            DAT_EVD_CREATE(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn) != DAT_SUCCESS ||
            DAT_EVD_CREATE(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr) != DAT_SUCCESS ||
            DAT_EP_CREATE(ia, pz, dto, dto, conn, &a, &ep) != DAT_SUCCESS ||
            DAT_LMR_CREATE(ia, DAT_MEM_TYPE_VIRTUAL, region, buf.size(), pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr,
                           &lkey, &rkey, &len, &addr) != DAT_SUCCESS) {
            return false;
        }
        uep = dapl::lookup<dapl::Ep>(ep)->ep;
        ucq = dapl::lookup<dapl::Evd>(dto)->cq;
        return true;
    }
};

bool wait_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *out = nullptr) {
    DAT_EVENT e;
    DAT_COUNT more;
    if (DAT_EVD_WAIT(evd, 10'000'000, 1, &e, &more) != DAT_SUCCESS || e.event_number != want) return false;
    if (out != nullptr) *out = e;
    return true;
}

// The two ways of posting a signalled-or-not RDMA Write of @p len bytes to @p raddr and of reaping.
struct Api {
    std::function<bool(Side &, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled)> write;
    std::function<int(Side &)> reap;  // completions reaped (0 when none), -1 on an error completion
};

Api dapl_api() {
    return {[](Side &s, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled) {
                DAT_LMR_TRIPLET l{reinterpret_cast<DAT_VADDR>(s.buf.data()), len, s.lkey};
                DAT_RMR_TRIPLET r{raddr, len, rkey};
                DAT_DTO_COOKIE c;
                c.as_64 = 0;
                return DAT_EP_POST_RDMA_WRITE(s.ep, 1, &l, c, &r,
                                              signaled ? DAT_COMPLETION_DEFAULT_FLAG : DAT_COMPLETION_SUPPRESS_FLAG) ==
                       DAT_SUCCESS;
            },
            [](Side &s) {
                DAT_EVENT e;
                int n = 0;
                while (DAT_EVD_DEQUEUE(s.dto, &e) == DAT_SUCCESS) {
                    if (e.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) return -1;
                    ++n;
                }
                return n;
            }};
}

Api ual_api() {
    return {[](Side &s, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled) {
                ri_sge_t sge{reinterpret_cast<uint64_t>(s.buf.data()), len, s.lkey};
                ri_send_wr_t wr{};
                wr.opcode = RI_WR_RDMA_WRITE;
                wr.flags = signaled ? RI_SEND_SIGNALED : 0;
                wr.sgl = &sge;
                wr.num_sge = 1;
                wr.u.rdma.remote_addr = raddr;
                wr.u.rdma.rkey = rkey;
                return s.uep->post_send({&wr, 1}).ok();
            },
            [](Side &s) {
                ri_wc_t wc;
                int n = 0;
                for (;;) {
                    auto r = s.ucq->poll({&wc, 1});
                    if (!r || *r == 0) return n;
                    if (wc.status != RI_WC_SUCCESS) return -1;
                    ++n;
                }
            }};
}

// 8-byte RDMA Write ping-pong between a and b (each polls its memory and reaps): seconds per half round trip.
double pingpong(const Api &api, Side &a, Side &b, double seconds) {
    return bench::write_pingpong(
        seconds, a.buf.data() + 64, b.buf.data() + 64,
        [&](uint8_t v) {
            a.buf[0] = v;
            return api.write(a, 8, reinterpret_cast<uint64_t>(b.buf.data() + 64), b.rkey, false);
        },
        [&](uint8_t v) {
            b.buf[0] = v;
            return api.write(b, 8, reinterpret_cast<uint64_t>(a.buf.data() + 64), a.rkey, false);
        },
        [&] { (void)api.reap(a); }, [&] { (void)api.reap(b); });
}

// RDMA Write bandwidth of @p size messages from a into b's buffer, a window of 16 signalled Writes: bytes/s.
double bandwidth(const Api &api, Side &a, Side &b, size_t size, double seconds) {
    const int window = 16;
    int outstanding = 0;
    size_t sent = 0;
    const auto t0 = clock_type::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    const auto raddr = reinterpret_cast<uint64_t>(b.buf.data());
    while (clock_type::now() < end) {
        while (outstanding < window && api.write(a, static_cast<uint32_t>(size), raddr, b.rkey, true)) {
            ++outstanding;
            sent += size;
        }
        const int r = api.reap(a);
        if (r < 0) return 0;
        outstanding -= r;
    }
    for (auto give_up = clock_type::now() + std::chrono::seconds(5); outstanding > 0 && clock_type::now() < give_up;) {
        const int r = api.reap(a);
        if (r < 0) return 0;
        outstanding -= r;
    }
    return static_cast<double>(sent) / std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char **argv) {
    const double seconds = bench::budget_from_args(argc, argv);
    bench::Figures figures("bench_dapl", argc, argv);
    char dir[] = "/tmp/bench-dapl-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return 1;
    const std::string config = std::string(dir) + "/embedded.json";
    std::ofstream(config) << R"({"provider_dir": ")" << BENCH_PROVIDER_DIR
                          << R"(", "log_level": "warn", "modules": ["softrnic_kvp.so"], "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]})";
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", config.c_str(), 1);
    // The entry a dat.conf line would make: libdat2 calls this for it; the bench calls the provider the same way.
    DAT_PROVIDER_INFO info{};
    std::strcpy(info.ia_name, "openrdma-bench");
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = DAT_FALSE;
    dat_provider_init(&info, "sr0");
    int rc = 1;
    {
        Side a, b;
        DAT_PSP_HANDLE psp = nullptr;
        DAT_CONN_QUAL qual = 0;
        sockaddr_in to{};
        to.sin_family = AF_INET;
        ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
        DAT_EVENT req;
        if (a.make() && b.make() && DAT_PSP_CREATE_ANY(b.ia, &qual, b.cr, DAT_PSP_CONSUMER_FLAG, &psp) == DAT_SUCCESS &&
            DAT_EP_CONNECT(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), qual, 10'000'000, 0, nullptr,
                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG) == DAT_SUCCESS &&
            wait_event(b.cr, DAT_CONNECTION_REQUEST_EVENT, &req) &&
            DAT_CR_ACCEPT(req.event_data.cr_arrival_event_data.cr_handle, b.ep, 0, nullptr) == DAT_SUCCESS &&
            wait_event(a.conn, DAT_CONNECTION_EVENT_ESTABLISHED) && wait_event(b.conn, DAT_CONNECTION_EVENT_ESTABLISHED)) {
            std::printf("uDAPL over the uAL it maps onto: the same connected QPs (softrnic, 127.0.0.1), %.2f s per "
                        "figure in 5 alternating rounds (best of each); ratio = DAPL / uAL\n",
                        seconds);
            const Api dat = dapl_api(), ul = ual_api();
            for (size_t size : {size_t{64} << 10, size_t{1} << 20}) {
                double best_dat = 0, best_ul = 0;
                for (int round = 0; round < 5; ++round) {
                    best_ul = std::max(best_ul, bandwidth(ul, a, b, size, seconds));
                    best_dat = std::max(best_dat, bandwidth(dat, a, b, size, seconds));
                }
                std::printf("RDMA Write %4zu KiB bandwidth   DAPL %6.2f GB/s   uAL %6.2f GB/s   ratio %.3f "
                            "(target >= 0.95)\n",
                            size >> 10, best_dat / 1e9, best_ul / 1e9, best_ul > 0 ? best_dat / best_ul : 0);
                const double ratio = best_ul > 0 ? best_dat / best_ul : 0;
                figures.add("uDAPL RDMA Write " + std::to_string(size >> 10) + " KiB", best_dat / 1e9, "GB/s", "uAL",
                            best_ul / 1e9, ratio, ">= 0.95x", ratio >= 0.95);
            }
            double best_dat = 1e9, best_ul = 1e9;
            for (int round = 0; round < 5; ++round) {
                if (double t = pingpong(ul, a, b, seconds); t > 0) best_ul = std::min(best_ul, t);
                if (double t = pingpong(dat, a, b, seconds); t > 0) best_dat = std::min(best_dat, t);
            }
            std::printf("8 B RDMA Write half round trip  DAPL %6.2f us     uAL %6.2f us     ratio %.3f "
                        "(target <= 1.05)\n",
                        best_dat * 1e6, best_ul * 1e6, best_dat / best_ul);
            figures.add("uDAPL 8 B RDMA Write half round trip", best_dat * 1e6, "us", "uAL", best_ul * 1e6, best_dat / best_ul,
                        "<= 1.05x", best_dat / best_ul <= 1.05);
            rc = 0;
        } else {
            std::fprintf(stderr, "bench_dapl: could not set up the connected pair\n");
        }
    }
    std::remove(config.c_str());
    ::rmdir(dir);
    return rc;
}
