// The user library's access layer: the process's uAL, reaching krdmad's device (or an embedded kAL).
#include "common.hpp"

namespace itapi {

rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer() {
    static std::mutex mutex;
    static std::weak_ptr<ual::AccessLayer> shared;  // alive while an IA holds it
    std::lock_guard lock(mutex);
    if (auto al = shared.lock()) return al;
    auto al = ual::AccessLayer::open();
    if (!al) return al.error();
    shared = *al;
    return *al;
}

}  // namespace itapi
