// The embedded kAL: krdmad's blocks on a thread of the consumer's process.
#include "embedded_kal.hpp"

namespace kal {

EmbeddedKal::EmbeddedKal(const Config &config, AdminPolicy policy)
    : loader_(kal_host_ops(), config.provider_dir.value_or(rdma::rnicpi::default_provider_dir())),
      adapters_(loader_),
      budget_(config.pin_bytes_total),
      accounts_(budget_, config.pin_bytes_per_process, config.pin_bytes_per_user, config.quotas, config.objects_per_user),
      server_(config.device, config.max_connections, config.connections_per_user),
      verbs_(server_, adapters_, config.quotas, accounts_),
      connections_(verbs_, config.llp),
      host_(verbs_, connections_, adapters_, config.device.string()),
      consumers_(host_, loader_.provider_dir()) {
    register_admin_commands(server_, adapters_, policy);
    consumers_.register_commands(server_);
}

rdma::Expected<std::unique_ptr<EmbeddedKal>> EmbeddedKal::start(const Config &config) {
    auto policy = resolve_admin_policy(config.admin_group);
    if (!policy) return policy.error();
    std::unique_ptr<EmbeddedKal> k(new EmbeddedKal(config, *policy));
    for (const auto &m : config.modules) {
        if (auto r = k->adapters_.load(m); !r) return r.error();
    }
    for (const auto &a : config.rnics) {
        if (auto r = k->adapters_.attach(a); !r) {
            return rdma::Error(r.error().code(), "cannot attach RNIC " + a.name + ": " + r.error().message());
        }
    }
    k->thread_ = std::thread([kal = k.get()] { kal->server_.run(); });
    // As in krdmad: once the kAL serves (a module's calls run on the serving thread), in order.
    if (auto r = k->consumers_.start(config.consumers); !r) return r.error();
    return k;
}

EmbeddedKal::~EmbeddedKal() {
    consumers_.stop();  // while the kAL serves, as krdmad does
    server_.stop();
    if (thread_.joinable()) thread_.join();
    // Members go in reverse order: the verbs' contexts (and their objects) first, then the server, the budget,
    // the RNICs and the modules.
}

}  // namespace kal
