// An example kernel consumer module (krdma/consumer_module.h) in C++: on start it becomes a consumer hosted in the
// kAL that loaded it (kal::consumer_host(env)->host_consumer), opens an RNIC, allocates a PD and a CQ and registers
// a buffer, logs what it made and keeps it all until stop. A storage target would listen on the RNIC here.
//
// args (all optional): {"rnic": "name" (default: the first attached), "buffer_bytes": 65536,
//                       "marker": "/path" (a file that gets a line "started ..." and, at stop, "stopped")}
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kal/consumer_host.hpp"
#include "krdma/consumer_module.h"

namespace {

struct Example {
    const krdma_consumer_env_t *env = nullptr;
    std::unique_ptr<kal::HostedConsumer> consumer;
    kal::HostedObject rnic, pd, cq, mr;
    std::vector<uint8_t> buffer;
    std::string marker;
};

void mark(const std::string &file, const std::string &line) {
    if (!file.empty()) std::ofstream(file, std::ios::app) << line << "\n";
}

// Makes the objects; on failure logs why and returns the errno (the consumer's destruction releases what was made).
int make_objects(Example &e, kal::ConsumerHost &host, const std::string &wanted) {
    std::string name = wanted;
    if (name.empty()) {
        const auto rnics = host.rnics();
        if (rnics.empty()) {
            e.env->log(e.env, KRDMA_CONSUMER_LOG_ERROR, "no RNIC is attached to %s", e.env->device);
            return ENODEV;
        }
        name = rnics.front().name;
    }
    e.consumer = host.host_consumer({}, e.env->module_name);
    auto fail = [&e](const char *what, const rdma::Error &err) {
        e.env->log(e.env, KRDMA_CONSUMER_LOG_ERROR, "%s failed: %s", what, err.to_string().c_str());
        return err.code() > 0 ? err.code() : EIO;
    };
    auto rnic = e.consumer->open_rnic(name);
    if (!rnic) return fail("open_rnic", rnic.error());
    e.rnic = *rnic;
    auto pd = e.consumer->alloc_pd(e.rnic);
    if (!pd) return fail("alloc_pd", pd.error());
    e.pd = *pd;
    auto cq = e.consumer->create_cq(e.rnic, 64);
    if (!cq) return fail("create_cq", cq.error());
    e.cq = *cq;
    ri_mr_keys_t keys{};
    auto mr = e.consumer->register_mr(e.pd, e.buffer.data(), e.buffer.size(),
                                      RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ, keys);
    if (!mr) return fail("register_mr", mr.error());
    e.mr = *mr;
    e.env->log(e.env, KRDMA_CONSUMER_LOG_INFO,
               "example consumer ready on %s: RNIC %s opened, PD, CQ and a %zu-byte MR (stag 0x%x) as client %u%s",
               e.env->device, name.c_str(), e.buffer.size(), keys.lkey, e.consumer->client_id(),
               kal::ConsumerHost::current() == &host ? ", the process's current kAL" : "");
    mark(e.marker, "started client " + std::to_string(e.consumer->client_id()) + " rnic " + name);
    return 0;
}

int example_start(const krdma_consumer_env_t *env, const char *args_json, void **state) {
    kal::ConsumerHost *host = kal::consumer_host(env);
    if (host == nullptr) {
        env->log(env, KRDMA_CONSUMER_LOG_ERROR, "built for another krdmad (host build '%s'); rebuild the module",
                 env->host_build != nullptr ? env->host_build : "?");
        return ENOEXEC;
    }
    auto e = std::make_unique<Example>();
    e->env = env;
    std::string rnic;
    try {
        const auto args = nlohmann::json::parse(args_json);
        e->marker = args.value("marker", std::string());
        rnic = args.value("rnic", std::string());
        e->buffer.assign(args.value("buffer_bytes", size_t{65536}), 0);
    } catch (const std::exception &x) {
        env->log(env, KRDMA_CONSUMER_LOG_ERROR, "bad args %s: %s", args_json, x.what());
        return EINVAL;
    }
    if (int rc = make_objects(*e, *host, rnic); rc != 0) return rc;  // e's consumer takes its objects with it
    *state = e.release();
    return 0;
}

void example_stop(void *state) {
    std::unique_ptr<Example> e(static_cast<Example *>(state));
    const krdma_consumer_env_t *env = e->env;
    const uint32_t client = e->consumer->client_id();
    // Children before parents, as the verbs want; destroying the consumer would do the same.
    for (const kal::HostedObject *o : {&e->mr, &e->cq, &e->pd, &e->rnic}) {
        if (auto r = e->consumer->destroy(*o); !r) {
            env->log(env, KRDMA_CONSUMER_LOG_WARN, "destroy failed: %s", r.error().to_string().c_str());
        }
    }
    e->consumer.reset();
    env->log(env, KRDMA_CONSUMER_LOG_INFO, "example consumer stopped (client %u released everything)", client);
    mark(e->marker, "stopped");
}

}  // namespace

extern "C" {
/** @brief The module's entry symbol. */
KRDMA_CONSUMER_MODULE_EXPORT extern const krdma_consumer_module_t krdma_consumer_module_v1;
const krdma_consumer_module_t krdma_consumer_module_v1 = {
    sizeof(krdma_consumer_module_t),
    KRDMA_CONSUMER_ABI_VERSION,
    "example",
    "example kernel consumer: a PD, a CQ and a registered buffer on an RNIC",
    &example_start,
    &example_stop,
};
}
