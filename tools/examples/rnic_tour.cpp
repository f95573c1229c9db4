// rnic_tour: a consumer's first steps with the access layer. Opens an RNIC by network address (through krdmad,
// or an embedded kAL when OPENRDMA_EMBEDDED_CONFIG names a krdmad configuration), creates one object of every kind,
// shows what the provider answered, and moves an endpoint to error to show its flushed work arriving through an
// event dispatcher. With --hold it keeps everything until killed, so `rdmactl resources` can show it.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "embedded_link.hpp"
#include "ual/access_layer.hpp"

namespace {

template <class T>
T must(rdma::Expected<T> r, const char *what) {
    if (!r) {
        std::fprintf(stderr, "rnic_tour: %s: %s\n", what, r.error().to_string().c_str());
        std::exit(1);
    }
    return std::move(*r);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"rnic_tour: open an RNIC through the OpenRDMA access layer and create one object of every kind"};
    std::string address = "127.0.0.1";
    std::string device;
    bool hold = false;
    app.add_option("address", address, "Network address (or name) of the RNIC (default 127.0.0.1)");
    app.add_option("--device", device, "krdmad's device (default: $KRDMA_DEVICE or /run/krdma/krdma.sock)");
    app.add_flag("--hold", hold, "Keep everything until killed");
    CLI11_PARSE(app, argc, argv);

    ual::Options options;

    options.embedded_kal = &kal::start_embedded_link;
    options.device = device;
    auto al = must(ual::AccessLayer::open(options), "opening the access layer");
    std::printf("access layer: %s kAL\n", al->embedded() ? "embedded" : "krdmad's");
    for (const auto &r : must(al->rnics(), "listing RNICs")) {
        std::printf("  RNIC %-10s provider %-10s address %-16s uVP %s\n", r.name.c_str(), r.provider.c_str(),
                    r.address.c_str(), r.uvp_library.c_str());
    }
    auto adapter = must(al->open_adapter(address), "opening the RNIC");
    const ri_rnic_attr_t attr = must(adapter->query(), "querying the RNIC");
    std::printf("opened %s (serving %s): up to %u QPs, %u WRs per queue, %u SGEs, IRD/ORD %u/%u, caps %#x\n",
                adapter->description().name.c_str(), address.c_str(), attr.max_qp, attr.max_qp_wr, attr.max_sge,
                attr.max_ird, attr.max_ord, attr.caps);

    auto pz = must(adapter->create_pz(), "creating a protection zone");
    auto dto = must(ual::SimpleDispatcher::create(ual::EventStream::dto, 256), "creating a DTO dispatcher");
    auto cq = must(adapter->create_cq(256, dto), "creating a CQ");
    auto srq = must(pz->create_srq(64, 2), "creating an SRQ");
    auto ep = must(pz->create_endpoint(ual::EndpointAttributes{}, cq, cq), "creating an endpoint");
    auto ep_srq = must(pz->create_endpoint(ual::EndpointAttributes{}, cq, cq, srq), "creating an endpoint on the SRQ");
    std::vector<char> buffer(1 << 20);
    auto mr = must(pz->register_memory(buffer.data(), buffer.size(),
                                       RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ),
                   "registering 1 MiB");
    auto mw = must(pz->allocate_window(RI_MW_TYPE_2), "allocating a window");
    std::printf("CQ of %u entries; QPs %u and %u (the second on an SRQ); 1 MiB region STag %#x; window STag %#x\n",
                cq->depth(), ep->qp_num(), ep_srq->qp_num(), mr->keys().rkey, mw->rkey());

    ri_sge_t sge{reinterpret_cast<uint64_t>(buffer.data()), 4096, mr->keys().lkey};
    ri_recv_wr_t recv{1, &sge, 1, 0};
    if (!ep->post_recv({&recv, 1}).ok()) return 1;
    ri_qp_attr_t to_error{};
    to_error.state = RI_QPS_ERROR;
    if (!ep->modify(to_error, RI_QP_ATTR_STATE).ok()) return 1;
    auto e = must(dto->wait(std::chrono::seconds(5)), "waiting for the flushed receive");
    std::printf("QP %u moved to error: receive %lu completed with status %u (flushed), delivered by the dispatcher\n",
                e.wc.qp_num, static_cast<unsigned long>(e.wc.wr_id), e.wc.status);
    if (hold) {
        std::printf("holding everything (pid %d) until killed\n", static_cast<int>(::getpid()));
        std::fflush(stdout);
        for (;;) ::pause();
    }
    return 0;
}
