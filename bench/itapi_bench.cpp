// What IT-API adds over the uAL it maps onto (issue 6: less than 5%). One connected pair of IT-API endpoints (two
// IAs on the embedded kAL's softrnic, real TCP on 127.0.0.1), measured two ways in alternating rounds on the very
// same queue pairs: through the IT-API calls (it_post_rdma_write, it_evd_dequeue), and through the uAL objects
// underneath them (ual::Endpoint::post_send, ual::CompletionQueue::poll). The difference is the API layer alone:
// handle checks, triplet translation, completion conversion.
//   bench_itapi [--seconds S] [--json FILE]
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <it_api.h>

#include "harness.hpp"
#include "objects.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr size_t kBuf = 4u << 20;

struct Side {
    it_ia_handle_t ia = nullptr;
    it_pz_handle_t pz = nullptr;
    it_evd_handle_t dto = nullptr, cm = nullptr, req = nullptr;
    it_ep_handle_t ep = nullptr;
    it_lmr_handle_t lmr = nullptr;
    it_rmr_context_t rkey = 0;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
    // The same objects as the uAL sees them.
    std::shared_ptr<ual::Endpoint> uep;
    std::shared_ptr<ual::CompletionQueue> ucq;
    ri_stag_t lkey = 0;

    Side() = default;
    Side(const Side &) = delete;
    Side &operator=(const Side &) = delete;
    ~Side() {
        uep.reset();
        ucq.reset();
        if (ia != nullptr) (void)it_ia_free(ia);
    }

    bool make() {
        const auto none = static_cast<it_evd_flags_t>(0);
        it_ep_attributes_t a;
        std::memset(&a, 0, sizeof a);
        a.max_request_dtos = 64;
        a.max_recv_dtos = 8;
        a.max_send_segments = 1;
        a.max_recv_segments = 1;
        a.srv.rc.rdma_read_enable = IT_TRUE;
        a.srv.rc.rdma_write_enable = IT_TRUE;
        a.srv.rc.max_rdma_read_segments = 1;
        a.srv.rc.rdma_read_ird = 8;
        a.srv.rc.rdma_read_ord = 8;
        if (it_ia_create("sr0", 2, 1, &ia) != IT_SUCCESS || it_pz_create(ia, &pz) != IT_SUCCESS ||
            it_evd_create(ia, IT_DTO_EVENT_STREAM, none, 256, 0, nullptr, &dto, nullptr) != IT_SUCCESS ||
            it_evd_create(ia, IT_CM_MSG_EVENT_STREAM, none, 16, 0, nullptr, &cm, nullptr) != IT_SUCCESS ||
            it_evd_create(ia, IT_CM_REQ_EVENT_STREAM, none, 16, 0, nullptr, &req, nullptr) != IT_SUCCESS ||
            it_ep_rc_create(pz, dto, dto, cm, IT_EP_NO_FLAG, &a, &ep) != IT_SUCCESS ||
            it_lmr_create21(pz, buf.data(), nullptr, buf.size(), IT_ADDR_MODE_ABSOLUTE,
                            static_cast<it_mem_priv_t>(IT_PRIV_LOCAL | IT_PRIV_REMOTE), IT_LMR_FLAG_NONE, 0, &lmr,
                            &rkey) != IT_SUCCESS) {
            return false;
        }
        uep = itapi::lookup<itapi::Ep>(ep)->ep;
        ucq = itapi::lookup<itapi::Evd>(dto)->cq;
        lkey = itapi::lookup<itapi::Lmr>(lmr)->lkey;
        return true;
    }
};

bool wait_event(it_evd_handle_t evd, it_event_type_t want) {
    it_event_t e;
    return it_evd_wait(evd, 10'000'000, &e, nullptr) == IT_SUCCESS && e.event_number == want;
}

// The two ways of posting a signalled-or-not RDMA Write of @p len bytes at @p off to @p raddr and of reaping.
struct Api {
    std::function<bool(Side &, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled)> write;
    std::function<int(Side &)> reap;  // completions reaped (0 when none), -1 on an error completion
};

Api itapi_api() {
    return {[](Side &s, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled) {
                it_lmr_triplet_t t;
                t.lmr = s.lmr;
                t.addr.abs = s.buf.data() + off;
                t.length = len;
                return it_post_rdma_write(s.ep, &t, 1, 0, signaled ? IT_COMPLETION_FLAG : static_cast<it_dto_flags_t>(0),
                                          raddr, rkey) == IT_SUCCESS;
            },
            [](Side &s) {
                it_event_t e;
                int n = 0;
                while (it_evd_dequeue(s.dto, &e) == IT_SUCCESS) {
                    if (e.dto_cmpl.dto_status != IT_DTO_SUCCESS) return -1;
                    ++n;
                }
                return n;
            }};
}

Api ual_api() {
    return {[](Side &s, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, bool signaled) {
                ri_sge_t sge{reinterpret_cast<uint64_t>(s.buf.data() + off), len, s.lkey};
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

// 8-byte RDMA Write ping-pong between a and b (each polls its memory and reaps, driving inline progress): seconds
// per half round trip.
double pingpong(const Api &api, Side &a, Side &b, double seconds) {
    return bench::write_pingpong(
        seconds, a.buf.data() + 64, b.buf.data() + 64,
        [&](uint8_t v) {
            a.buf[0] = v;
            return api.write(a, 0, 8, reinterpret_cast<uint64_t>(b.buf.data() + 64), b.rkey, false);
        },
        [&](uint8_t v) {
            b.buf[0] = v;
            return api.write(b, 0, 8, reinterpret_cast<uint64_t>(a.buf.data() + 64), a.rkey, false);
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
        while (outstanding < window && api.write(a, 0, static_cast<uint32_t>(size), raddr, b.rkey, true)) {
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
    bench::Figures figures("bench_itapi", argc, argv);
    char dir[] = "/tmp/bench-itapi-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return 1;
    const std::string config = std::string(dir) + "/embedded.json";
    std::ofstream(config) << R"({"provider_dir": ")" << BENCH_PROVIDER_DIR
                          << R"(", "log_level": "warn", "modules": ["softrnic_kvp.so"], "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]})";
    ::setenv("OPENRDMA_EMBEDDED_CONFIG", config.c_str(), 1);
    int rc = 1;
    {
        Side a, b;
        it_listen_handle_t listen = nullptr;
        it_conn_qual_t q;
        std::memset(&q, 0, sizeof q);
        q.type = IT_IANA_PORT;
        it_path_t path;
        std::memset(&path, 0, sizeof path);
        path.remote.iwarp.ip_vers = IT_IP_VERS_IPV4;
        ::inet_pton(AF_INET, "127.0.0.1", &path.remote.iwarp.raddr.ipv4);
        it_event_t r;
        if (a.make() && b.make() && it_listen_create(b.ia, 0, b.req, IT_LISTEN_NO_FLAG, &q, &listen) == IT_SUCCESS &&
            it_ep_connect(a.ep, &path, nullptr, &q, IT_CONNECT_FLAG_TWO_WAY, nullptr, 0) == IT_SUCCESS &&
            it_evd_wait(b.req, 10'000'000, &r, nullptr) == IT_SUCCESS &&
            it_ep_accept(b.ep, r.conn_req.cn_est_id, nullptr, 0) == IT_SUCCESS &&
            wait_event(a.cm, IT_CM_MSG_CONN_ESTABLISHED_EVENT) && wait_event(b.cm, IT_CM_MSG_CONN_ESTABLISHED_EVENT)) {
            std::printf("IT-API over the uAL it maps onto: the same connected QPs (softrnic, 127.0.0.1), %.2f s per "
                        "figure in 5 alternating rounds (best of each); ratio = IT-API / uAL\n",
                        seconds);
            const Api it = itapi_api(), ul = ual_api();
            for (size_t size : {size_t{64} << 10, size_t{1} << 20}) {
                double best_it = 0, best_ul = 0;
                for (int round = 0; round < 5; ++round) {
                    best_ul = std::max(best_ul, bandwidth(ul, a, b, size, seconds));
                    best_it = std::max(best_it, bandwidth(it, a, b, size, seconds));
                }
                std::printf("RDMA Write %4zu KiB bandwidth   IT-API %6.2f GB/s   uAL %6.2f GB/s   ratio %.3f "
                            "(target >= 0.95)\n",
                            size >> 10, best_it / 1e9, best_ul / 1e9, best_ul > 0 ? best_it / best_ul : 0);
                const double ratio = best_ul > 0 ? best_it / best_ul : 0;
                figures.add("IT-API RDMA Write " + std::to_string(size >> 10) + " KiB", best_it / 1e9, "GB/s", "uAL",
                            best_ul / 1e9, ratio, ">= 0.95x", ratio >= 0.95);
            }
            double best_it = 1e9, best_ul = 1e9;
            for (int round = 0; round < 5; ++round) {
                if (double t = pingpong(ul, a, b, seconds); t > 0) best_ul = std::min(best_ul, t);
                if (double t = pingpong(it, a, b, seconds); t > 0) best_it = std::min(best_it, t);
            }
            std::printf("8 B RDMA Write half round trip  IT-API %6.2f us     uAL %6.2f us     ratio %.3f "
                        "(target <= 1.05)\n",
                        best_it * 1e6, best_ul * 1e6, best_it / best_ul);
            figures.add("IT-API 8 B RDMA Write half round trip", best_it * 1e6, "us", "uAL", best_ul * 1e6, best_it / best_ul,
                        "<= 1.05x", best_it / best_ul <= 1.05);
            rc = 0;
        } else {
            std::fprintf(stderr, "bench_itapi: could not set up the connected pair\n");
        }
    }  // the IAs go (their destructors free them)
    std::remove(config.c_str());
    ::rmdir(dir);
    return rc;
}
