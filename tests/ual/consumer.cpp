// A consumer process for crash-cleanup tests: opens an RNIC through the uAL and creates one object of every type
// (plus a pinned region of the size asked for), prints "ready" and the pinned size, then waits to be killed.
//   ual_test_consumer DEVICE RNIC REGION_BYTES
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "embedded_link.hpp"
#include "ual/access_layer.hpp"

namespace {

int fail(const char *what, const rdma::Error &e) {
    std::fprintf(stderr, "consumer: %s: %s\n", what, e.to_string().c_str());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s DEVICE RNIC REGION_BYTES\n", argv[0]);
        return 2;
    }
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    o.device = argv[1];
    auto al = ual::AccessLayer::open(o);
    if (!al) return fail("open", al.error());
    auto adapter = (*al)->open_adapter(argv[2]);
    if (!adapter) return fail("open adapter", adapter.error());
    auto pz = (*adapter)->create_pz();
    if (!pz) return fail("create PZ", pz.error());
    auto dto = ual::SimpleDispatcher::create(ual::EventStream::dto, 64);
    if (!dto) return fail("create dispatcher", dto.error());
    auto cq = (*adapter)->create_cq(64, *dto);
    if (!cq) return fail("create CQ", cq.error());
    auto srq = (*pz)->create_srq(32, 2);
    if (!srq) return fail("create SRQ", srq.error());
    ual::EndpointAttributes ea;
    auto ep = (*pz)->create_endpoint(ea, *cq, *cq);
    if (!ep) return fail("create endpoint", ep.error());
    auto ep_srq = (*pz)->create_endpoint(ea, *cq, *cq, *srq);
    if (!ep_srq) return fail("create endpoint with SRQ", ep_srq.error());
    const size_t bytes = std::strtoull(argv[3], nullptr, 0);
    std::vector<char> region(bytes + 4096);
    void *aligned = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(region.data()) + 4095) & ~uintptr_t{4095});
    auto mr = (*pz)->register_memory(aligned, bytes, RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
    if (!mr) return fail("register memory", mr.error());
    auto mw = (*pz)->allocate_window(RI_MW_TYPE_2);
    if (!mw) return fail("allocate window", mw.error());
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) ::pause();
}
