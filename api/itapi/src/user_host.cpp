// The user library's access layer: the process's uAL, reaching krdmad's device (or an embedded kAL).
#include "common.hpp"
#include "embedded_link.hpp"

namespace itapi {

rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer() {
    static std::mutex mutex;
    static std::weak_ptr<ual::AccessLayer> shared;  // alive while an IA holds it
    std::lock_guard lock(mutex);
    if (auto al = shared.lock()) return al;
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;  // $OPENRDMA_EMBEDDED_CONFIG runs a kAL in this process
    auto al = ual::AccessLayer::open(o);
    if (!al) return al.error();
    shared = *al;
    return *al;
}

}  // namespace itapi
