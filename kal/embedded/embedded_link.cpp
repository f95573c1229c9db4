// An embedded kAL behind the uAL's device link.
#include "embedded_link.hpp"

#include "embedded_kal.hpp"

namespace kal {

rdma::Expected<ual::EmbeddedDevice> start_embedded_link(const std::string &config) {
    auto cfg = load_config(config);
    if (!cfg) return cfg.error();
    auto k = EmbeddedKal::start(*cfg);
    if (!k) return rdma::Error(k.error().code(), "the embedded kAL did not start: " + k.error().message());
    std::shared_ptr<EmbeddedKal> running(std::move(*k));
    auto sock = running->connect_local();
    if (!sock) return sock.error();
    return ual::EmbeddedDevice{std::move(*sock), std::move(running)};
}

}  // namespace kal
