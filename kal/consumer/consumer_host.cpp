// The kAL as hosted C++ code sees it: new HostedConsumer objects, the RNIC list, and the process's current kAL.
#include "kal/consumer_host.hpp"

#include <atomic>

namespace kal {
namespace {

// The one process-wide pointer of the kAL: C APIs such as it_ia_create(name, ...) take no host argument, as a
// kernel's take none because the kernel is one. The first kAL made in a process claims it.
std::atomic<ConsumerHost *> g_current{nullptr};

}  // namespace

ConsumerHost::ConsumerHost(VerbCommands &verbs, ConnectionCommands &connections, AdapterManager &adapters,
                           std::string device)
    : verbs_(verbs), connections_(connections), adapters_(adapters), device_(std::move(device)) {
    ConsumerHost *none = nullptr;
    g_current.compare_exchange_strong(none, this);
}

ConsumerHost::~ConsumerHost() {
    ConsumerHost *self = this;
    g_current.compare_exchange_strong(self, nullptr);
}

std::unique_ptr<HostedConsumer> ConsumerHost::host_consumer(HostedCallbacks callbacks, std::string name) {
    return std::make_unique<HostedConsumer>(verbs_, connections_, std::move(callbacks), std::move(name));
}

std::vector<RnicInfo> ConsumerHost::rnics() const { return adapters_.list(); }

ConsumerHost *ConsumerHost::current() noexcept { return g_current.load(std::memory_order_acquire); }

}  // namespace kal
