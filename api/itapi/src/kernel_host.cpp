// The kernel IT-API's access layer: a consumer hosted in the kAL of this process (krdmad), whose verbs are the
// kVP's and whose objects the kAL keeps as a hosted client's. Everything above this function is the user library's
// code, compiled once more.
#include "common.hpp"
#include "hosted_link.hpp"
#include "kal/consumer_host.hpp"

namespace itapi {

rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer() {
    static std::mutex mutex;
    static std::weak_ptr<ual::AccessLayer> shared;
    std::lock_guard lock(mutex);
    if (auto al = shared.lock()) return al;
    kal::ConsumerHost *host = kal::ConsumerHost::current();
    if (host == nullptr) {
        return rdma::Error(RI_ENODEV, "no kAL serves in this process: the kernel IT-API is for consumers krdmad hosts");
    }
    auto al = ual::AccessLayer::open(kal::hosted_link(*host, "kernel IT-API"));
    if (!al) return al.error();
    shared = *al;
    return *al;
}

}  // namespace itapi
