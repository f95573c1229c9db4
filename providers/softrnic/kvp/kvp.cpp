// The softrnic kVP: the privileged half of the software RNIC, loaded by the kAL. It owns the per-instance namespaces
// (QP numbers, STags), checks every resource request against the instance's limits and the verbs' rules, keeps the
// QP state machine, and pins the queue memory the uVP names in its private data (OpenRDMA Figure 4). A consumer's
// data path runs in its uVP; the data path of consumers hosted in the kAL itself (objects made with the plain verbs,
// with no uVP) runs here, on the same softrnic_datapath with this module's own progress thread. Every open has a
// counters region shared with whichever side runs its QPs' data path, read here for query_qp_stats.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "completion_queue.hpp"
#include "counter_region.hpp"
#include "instance.hpp"
#include "progress.hpp"
#include "queue_pair.hpp"
#include "receive_queue.hpp"
#include "ring.hpp"
#include "stag_table.hpp"
#include "rnicpi/cpp/event_handlers.hpp"
#include "rnicpi/cpp/provider.hpp"
#include "rnicpi/cpp/syscall_reply.hpp"
#include "softrnic_abi.h"

namespace softrnic::kvp {
namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Kvp;
const ri_host_ops_t &host() { return rdma::provider::Module<Kvp>::host(); }

void say(uint32_t level, const std::string &text) {
    if (host().log != nullptr) host().log(level, "softrnic", text.c_str());
}

// Memory this kVP allocates for an opener (the rings of a data path it runs for it), charged to the opener through
// ri_host_ops_t::mem_charge so that the kAL's limits cover it as they cover pinned memory.
class Charge {
public:
    Charge() = default;
    Charge(const Charge &) = delete;
    Charge &operator=(const Charge &) = delete;
    ~Charge() { release(); }
    // Exchanges what this and @p o charge (a resized ring's charge takes the old one's place).
    void swap(Charge &o) noexcept {
        std::swap(host_ctx_, o.host_ctx_);
        std::swap(bytes_, o.bytes_);
    }
    // Charges @p bytes more to @p host_ctx (nothing when the host does not account).
    ri_status_t add(void *host_ctx, uint64_t bytes) {
        if (host_ctx == nullptr || bytes == 0 || !RI_HOST_HAS(&host(), mem_charge)) return RI_OK;
        if (ri_status_t rc = host().mem_charge(host_ctx, bytes); rc != RI_OK) return rc;
        host_ctx_ = host_ctx;
        bytes_ += bytes;
        return RI_OK;
    }

private:
    void release() noexcept {
        if (bytes_ != 0 && RI_HOST_HAS(&host(), mem_uncharge)) host().mem_uncharge(host_ctx_, bytes_);
        bytes_ = 0;
    }
    void *host_ctx_ = nullptr;
    uint64_t bytes_ = 0;
};

// A pinned range of an opener's memory, released when the last owner lets go (a region and the regions shared
// from it hold one together).
class Pin {
public:
    static ri_status_t make(void *host_ctx, uint64_t addr, uint64_t length, bool write, std::shared_ptr<Pin> *out) {
        if (length == 0 || addr + length < addr) return RI_EINVAL;
        auto p = std::shared_ptr<Pin>(new Pin(host_ctx, addr, length));
        if (host_ctx != nullptr && host().vm_pin_range != nullptr) {
            ri_pin_t pin{};
            if (ri_status_t rc = host().vm_pin_range(host_ctx, addr, length, write ? RI_PIN_WRITE : 0, &pin);
                rc != RI_OK) {
                return rc;
            }
            p->pin_id_ = pin.pin_id;
        }
        *out = std::move(p);
        return RI_OK;
    }
    Pin(const Pin &) = delete;
    Pin &operator=(const Pin &) = delete;
    ~Pin() {
        if (pin_id_ != 0) (void)host().vm_unpin_range(host_ctx_, pin_id_);
    }
    uint64_t addr() const noexcept { return addr_; }
    uint64_t length() const noexcept { return length_; }

private:
    Pin(void *ctx, uint64_t addr, uint64_t length) : host_ctx_(ctx), addr_(addr), length_(length) {}
    void *host_ctx_;
    uint64_t addr_;
    uint64_t length_;
    uint64_t pin_id_ = 0;
};

using Reply = rdma::provider::SyscallReply<Kvp>;

// A create request: its private data and its attribute parameter, once the reply buffers are known to hold the
// private reply @p Resp and the attributes in effect.
template <class Resp, class Req, class Attr>
ri_status_t read_create(const Reply &reply, Req *req, Attr *attr) {
    if (ri_status_t rc = reply.read_priv(req); rc != RI_OK) return rc;
    if (ri_status_t rc = reply.check_room(sizeof(Resp), sizeof(Attr), 0); rc != RI_OK) return rc;
    return reply.read_param(attr);
}

constexpr uint32_t kAccessKnown = RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_READ |
                                  RI_ACCESS_REMOTE_WRITE | RI_ACCESS_MW_BIND | RI_ACCESS_ZERO_BASED |
                                  RI_ACCESS_REMOTE_ATOMIC;

// The verbs' rules for region rights: remote write and remote atomics need local write (an atomic writes the
// target).
ri_status_t check_access(uint32_t access) {
    if ((access & ~kAccessKnown) != 0) return RI_EINVAL;
    if ((access & (RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC)) != 0 && (access & RI_ACCESS_LOCAL_WRITE) == 0) {
        return RI_EINVAL;
    }
    return RI_OK;
}

bool pin_for_write(uint32_t access) { return (access & (RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE)) != 0; }

struct Kvp {
    static constexpr ri_mode_t mode = RI_MODE_PRIVILEGED;
    static constexpr uint32_t flags = RI_MODULE_SOFTWARE;
    static constexpr const char *name = SOFTRNIC_PROVIDER_NAME;
    static constexpr const char *vendor = SOFTRNIC_VENDOR;
    static constexpr const char *version = SOFTRNIC_VERSION;
    static constexpr const char *uvp_library = "softrnic_uvp.so";
    static constexpr uint32_t private_abi_version = SOFTRNIC_ABI_VERSION;  // of softrnic_abi.h's blocks

    // The progress thread of the kAL-hosted consumers' data path goes with the module.
    static void fini() { datapath::Progress::shutdown(); }

    struct Rnic;
    struct Pd;
    struct Cq;
    struct Srq;
    struct Mr;
    struct Mw;

    // An object counted against its instance's limit for as long as it lives.
    struct Charged {
        Instance *instance = nullptr;
        Kind kind = Kind::pd;
        Charged(Instance *i, Kind k) : instance(i), kind(k) {}
        Charged(const Charged &) = delete;
        Charged &operator=(const Charged &) = delete;
        ~Charged() { instance->uncharge(kind); }
    };

    struct Rnic {
        Instance *instance = nullptr;
        void *host_ctx = nullptr;
        rdma::provider::EventHandlers handlers;
        // The open's counters region (null if it could not be made: the QPs then count nothing).
        std::unique_ptr<CounterRegion> counters;
        // Objects made with the plain verbs run their data path here (a consumer hosted in the kAL); an open made
        // for a uVP (the whole-request Open RNIC) leaves its data path to the uVP.
        bool local_datapath = true;
        datapath::StagTable stags;             // local data path: every live region by STag
        std::atomic<uint32_t> next_pd{1};      // local data path: protection domain identifiers
        // Local data path: the frames its QPs' sockets took in part, recycled (shared: a QP keeps it).
        std::shared_ptr<datapath::FramePool> frames = datapath::make_frame_pool();
        void raise(const ri_async_event_t &e) {
            rdma::provider::EventHandlers::Aeh h = handlers.aeh();
            if (h.fn != nullptr) h.fn(h.ctx, to_handle<ri_rnic_t>(this), &e);
        }

        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t close() { return RI_OK; }
        ri_status_t query(ri_rnic_attr_t *attr) {
            instance->fill_attr(*attr);
            return RI_OK;
        }
        ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) { return handlers.set_aeh(fn, ctx, id); }
        ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) { return handlers.set_ceh(fn, ctx, id); }
        ri_status_t clear_handler(uint32_t id) { return handlers.clear(id); }
        ri_status_t alloc_pd(ri_pd_t *pd);
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq) { return make_cq(attr, nullptr, cq); }
        ri_status_t make_cq(ri_cq_attr_t *attr, const softrnic_ring *ring, ri_cq_t *cq);
    };

    struct Pd {
        Rnic *rnic = nullptr;
        Charged charge;
        uint32_t dp_id = 0;  // the local data path's protection domain identifier
        explicit Pd(Rnic *r) : rnic(r), charge(r->instance, Kind::pd), dp_id(r->next_pd.fetch_add(1)) {}
        Instance &instance() const { return *rnic->instance; }

        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t dealloc() { return RI_OK; }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *qp) {
            return make_qp(from_handle<Cq>(scq), from_handle<Cq>(rcq), from_handle<Srq>(srq), attr, nullptr, qp,
                           nullptr);
        }
        ri_status_t make_qp(Cq *scq, Cq *rcq, Srq *srq, ri_qp_init_attr_t *attr, const softrnic_create_qp_req *req,
                            ri_qp_t *qp, uint32_t *qp_num);
        ri_status_t create_srq(ri_srq_attr_t *attr, ri_srq_t *srq) { return make_srq(attr, nullptr, srq); }
        ri_status_t make_srq(ri_srq_attr_t *attr, const softrnic_ring *ring, ri_srq_t *srq);
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_stag(uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_mw(uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    };

    struct Cq {
        Rnic *rnic = nullptr;
        Charged charge;
        uint32_t id = 0;
        ri_cq_attr_t attr{};
        std::shared_ptr<Pin> ring;
        // Local data path: the completion ring in this process and the CQ on it.
        Charge memory_charge;
        datapath::Mapping memory;
        std::unique_ptr<datapath::CompletionQueue> dp;
        explicit Cq(Rnic *r) : rnic(r), charge(r->instance, Kind::cq) {}
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t destroy() { return RI_OK; }
        ri_status_t query(ri_cq_attr_t *out) {
            *out = attr;
            return RI_OK;
        }
        // Resize CQ of the local data path (a consumer hosted in the kAL); a uVP's CQ is resized with its new ring
        // (RI_RESIZE_CQ's private block, resize_to()).
        ri_status_t resize(uint32_t cqe, uint32_t *actual) { return resize_to(cqe, nullptr, actual); }
        ri_status_t resize_to(uint32_t cqe, const softrnic_ring *new_ring, uint32_t *actual);
        // A uVP's CQ is polled in its process: here it is always empty.
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) {
            if (dp) return dp->poll(max, wc, polled);
            *polled = 0;
            return RI_OK;
        }
        ri_status_t request_notify(uint32_t type) {
            if (dp) return dp->request_notify(type);
            return type == RI_CQ_NOTIFY_NEXT || type == RI_CQ_NOTIFY_SOLICITED ? RI_OK : RI_EINVAL;
        }
        // The local data path's notification: the CEH the kAL set for this CQ (its event management).
        static void notify(void *self) {
            auto *cq = static_cast<Cq *>(self);
            rdma::provider::EventHandlers::Ceh h = cq->rnic->handlers.ceh(cq->attr.ceh_id);
            if (h.fn != nullptr) h.fn(h.ctx, to_handle<ri_rnic_t>(cq->rnic), to_handle<ri_cq_t>(cq));
        }
    };

    struct Srq {
        Pd *pd = nullptr;
        Charged charge;
        uint32_t id = 0;
        std::mutex mutex;
        ri_srq_attr_t attr{};
        std::shared_ptr<Pin> ring;
        explicit Srq(Pd *p) : pd(p), charge(&p->instance(), Kind::srq) {}
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t destroy() { return RI_OK; }
        ri_status_t query(ri_srq_attr_t *out) {
            std::lock_guard lock(mutex);
            *out = attr;
            return RI_OK;
        }
        ri_status_t modify(const ri_srq_attr_t *in, uint32_t mask) {
            if ((mask & ~(RI_SRQ_ATTR_MAX_WR | RI_SRQ_ATTR_LIMIT)) != 0) return RI_EINVAL;
            // The ring is fixed at create; a resize would need a new ring from the uVP.
            if ((mask & RI_SRQ_ATTR_MAX_WR) != 0) return RI_EOPNOTSUPP;
            std::lock_guard lock(mutex);
            if ((mask & RI_SRQ_ATTR_LIMIT) != 0) {
                if (in->limit > attr.max_wr) return RI_ERANGE;
                attr.limit = in->limit;
                if (rq) rq->set_limit(in->limit);  // armed for the local data path's limit event
            }
            return RI_OK;
        }
        // Local data path: the receive ring in this process.
        Charge memory_charge;
        datapath::Mapping memory;
        std::unique_ptr<datapath::ReceiveQueue> rq;
        // A uVP's SRQ is posted to in its process.
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);
    };

    struct Qp final : datapath::QpOwner {
        Pd *pd = nullptr;
        Charged charge;
        uint32_t qp_num = 0;
        uint32_t counter_slot = SOFTRNIC_NO_COUNTER_SLOT;
        std::mutex mutex;
        ri_qp_attr_t attr{};
        std::shared_ptr<Pin> sq_ring;
        std::shared_ptr<Pin> rq_ring;
        // Local data path (a QP of a consumer hosted in the kAL): its rings here, its queue pair.
        Charge memory_charge;
        datapath::Mapping sq_memory;
        datapath::Mapping rq_memory;
        datapath::ReceiveQueue rq;
        std::unique_ptr<datapath::QueuePair> dp;
        explicit Qp(Pd *p) : pd(p), charge(&p->instance(), Kind::qp) {}
        ~Qp() override {
            dp.reset();  // stops the stream before anything it uses goes
            if (counter_slot != SOFTRNIC_NO_COUNTER_SLOT) pd->rnic->counters->release(counter_slot);
            if (qp_num != 0) pd->instance().free_qp_num(qp_num);
        }
        // Cannot fail; the destructor releases what the object holds once the adapter deletes it.
        ri_status_t destroy() { return RI_OK; }
        ri_status_t query(ri_qp_attr_t *out) {
            std::lock_guard lock(mutex);
            *out = attr;
            return RI_OK;
        }
        ri_status_t query_stats(ri_qp_stats_t *out) {
            if (out == nullptr) return RI_EINVAL;
            *out = counter_slot != SOFTRNIC_NO_COUNTER_SLOT ? pd->rnic->counters->read(counter_slot) : ri_qp_stats_t{};
            return RI_OK;
        }
        ri_status_t modify(const ri_qp_attr_t *in, uint32_t mask);
        ri_status_t check_modify(const ri_qp_attr_t *in, uint32_t mask);
        // A uVP's QP is posted to in its process.
        ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
            if (dp) return dp->post_send(wr, count, posted);
            *posted = 0;
            return RI_EOPNOTSUPP;
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            if (dp) return dp->post_recv(wr, count, posted);
            *posted = 0;
            return RI_EOPNOTSUPP;
        }

        // datapath::QpOwner (local data path)
        void async_event(const ri_async_event_t &event) noexcept override { pd->rnic->raise(event); }
        void entered_error() noexcept override {
            // The stream failed here: the QP's state follows (the data path already flushed it).
            std::lock_guard lock(mutex);
            attr.state = RI_QPS_ERROR;
        }
        ri_status_t check_memory_op(const ri_send_wr_t &wr, softrnic_bind_op *bind,
                                    softrnic_fast_reg_op *fast_reg) noexcept override;
    };

    struct Mr {
        Pd *pd = nullptr;
        Charged charge;
        std::mutex mutex;
        ri_stag_t stag = 0;
        std::shared_ptr<Pin> pages;  // NULL for an allocated STag
        uint64_t addr = 0;
        uint64_t length = 0;
        uint64_t iova = 0;
        uint32_t access = 0;
        uint32_t max_pages = 0;
        uint32_t state = RI_STAG_VALID;
        explicit Mr(Pd *p) : pd(p), charge(&p->instance(), Kind::mr) {}
        ~Mr() {
            if (stag != 0) pd->instance().free_stag(stag);
        }
        ri_mr_keys_t keys() const { return ri_mr_keys_t{stag, stag}; }
        // Local data path: makes the region resolvable by this open's queue pairs (under the STag in effect).
        void publish() {
            if (!pd->rnic->local_datapath || pages == nullptr) return;
            pd->rnic->stags.add(stag, datapath::StagEntry::region(addr, length, iova, access, pd->dp_id));
        }
        ri_status_t deregister() {
            if (pd->rnic->local_datapath) pd->rnic->stags.remove(stag);
            return RI_OK;
        }
        ri_status_t query(ri_mr_attr_t *out) {
            std::lock_guard lock(mutex);
            std::memset(out, 0, sizeof *out);
            out->addr = addr;
            out->length = length;
            out->iova = iova;
            out->access = access;
            out->state = state;
            out->keys = keys();
            // A hosted consumer's fast registration happens in the data path here.
            if (max_pages != 0 && pd->rnic->local_datapath) pd->rnic->stags.fast_reg_attr(stag, *out);
            out->max_pages = max_pages;
            return RI_OK;
        }
        ri_status_t register_shared(ri_pd_t pd, uint64_t iova, uint32_t access, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t reregister(uint32_t mask, ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_keys_t *keys);
    };

    struct Mw {
        Pd *pd = nullptr;
        Charged charge;
        uint32_t type = RI_MW_TYPE_1;
        ri_stag_t stag = 0;
        explicit Mw(Pd *p) : pd(p), charge(&p->instance(), Kind::mw) {}
        ~Mw() {
            if (stag != 0) pd->instance().free_stag(stag);
        }
        ri_status_t dealloc() {
            if (type == RI_MW_TYPE_2 && pd->rnic->local_datapath) pd->rnic->stags.remove(stag);
            return RI_OK;
        }
    };

    static ri_status_t open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *rnic) {
        return make_rnic(params, nullptr, rnic);
    }
    // An open; with @p counters_fd the counters region's descriptor goes to the caller (for the uVP).
    static ri_status_t make_rnic(const ri_rnic_open_params_t *params, int *counters_fd, ri_rnic_t *rnic) {
        if (params == nullptr || params->instance == nullptr) return RI_EINVAL;
        auto r = std::make_unique<Rnic>();
        r->instance = from_handle<Instance>(params->instance);
        r->host_ctx = params->host_ctx;
        r->counters = CounterRegion::create(r->instance->limits().max_qp, counters_fd);
        if (r->counters == nullptr) say(RI_LOG_WARN, "no counters region for an open: its QPs count nothing");
        *rnic = to_handle<ri_rnic_t>(r.release());
        return RI_OK;
    }

    static ri_status_t attach(const ri_attach_params_t *params, ri_instance_t *instance) {
        if (params == nullptr || instance == nullptr) return RI_EINVAL;
        auto i = Instance::create(*params);
        if (!i) {
            say(RI_LOG_ERROR, "cannot attach " + std::string(params->name) + ": " + i.error().message());
            return i.error().code();
        }
        *instance = to_handle<ri_instance_t>(*i);
        return RI_OK;
    }
    static ri_status_t detach(ri_instance_t instance) {
        delete from_handle<Instance>(instance);
        return RI_OK;
    }
    // Run-time administration: the data path's tunables (Instance::control).
    static ri_status_t control(ri_instance_t instance, const char *request, char *reply, size_t reply_size) {
        auto *inst = from_handle<Instance>(instance);
        if (inst == nullptr || request == nullptr || reply == nullptr || reply_size == 0) return RI_EINVAL;
        auto answer = inst->control(request);
        std::snprintf(reply, reply_size, "%s", answer ? answer->c_str() : answer.error().message().c_str());
        if (!answer) return answer.error().code();
        if (std::strcmp(request, "{}") != 0) say(RI_LOG_INFO, "instance " + inst->name() + ": control " + request);
        return RI_OK;
    }

    // ABI 1.1: the uVP's whole request. The creates that name uVP queue memory take it from the private data and
    // pin it; every other op is the plain verb.
    static ri_status_t syscall(ri_kvp_syscall_t *k);
};

ri_status_t Kvp::Rnic::alloc_pd(ri_pd_t *pd) {
    if (ri_status_t rc = instance->charge(Kind::pd); rc != RI_OK) return rc;
    *pd = to_handle<ri_pd_t>(new Pd(this));
    return RI_OK;
}

ri_status_t Kvp::Rnic::make_cq(ri_cq_attr_t *attr, const softrnic_ring *ring, ri_cq_t *out) {
    if (attr->cqe == 0) return RI_EINVAL;
    if (attr->cqe > instance->limits().max_cqe) return RI_ERANGE;
    if (ring != nullptr && ring->length < attr->cqe * softrnic_cq_slot_size()) return RI_EINVAL;
    if (ri_status_t rc = instance->charge(Kind::cq); rc != RI_OK) return rc;
    auto cq = std::make_unique<Cq>(this);
    if (ring != nullptr) {
        if (ri_status_t rc = Pin::make(host_ctx, ring->addr, ring->length, true, &cq->ring); rc != RI_OK) return rc;
    }
    cq->id = instance->next_object_id();
    cq->attr = *attr;
    if (ring == nullptr && local_datapath) {
        // A consumer hosted in the kAL: the completion ring lives here.
        const size_t bytes = static_cast<size_t>(attr->cqe) * softrnic_cq_slot_size();
        if (ri_status_t rc = cq->memory_charge.add(host_ctx, bytes); rc != RI_OK) return rc;
        cq->memory = datapath::Mapping(bytes);
        if (!cq->memory.ok()) return RI_ENOMEM;
        cq->dp = std::make_unique<datapath::CompletionQueue>(cq->memory.data(), attr->cqe, &Cq::notify, cq.get());
    }
    *out = to_handle<ri_cq_t>(cq.release());
    return RI_OK;
}

ri_status_t Kvp::Cq::resize_to(uint32_t cqe, const softrnic_ring *new_ring, uint32_t *actual) {
    if (actual == nullptr || cqe == 0) return RI_EINVAL;
    if (cqe > rnic->instance->limits().max_cqe) return RI_ERANGE;
    const size_t bytes = static_cast<size_t>(cqe) * softrnic_cq_slot_size();
    if (new_ring != nullptr) {
        // A uVP's CQ: the uVP moves its completions to the new ring once this succeeds; the new ring's pages are
        // pinned in place of the old ring's (which the uVP still holds until then, unpinned).
        if (!ring) return RI_EINVAL;  // a CQ of the local data path has no ring of a uVP
        if (new_ring->length < bytes) return RI_EINVAL;
        std::shared_ptr<Pin> fresh;
        if (ri_status_t rc = Pin::make(rnic->host_ctx, new_ring->addr, new_ring->length, true, &fresh); rc != RI_OK) {
            return rc;
        }
        ring = std::move(fresh);
    } else if (dp) {
        Charge fresh_charge;
        if (ri_status_t rc = fresh_charge.add(rnic->host_ctx, bytes); rc != RI_OK) return rc;
        datapath::Mapping fresh(bytes);
        if (!fresh.ok()) return RI_ENOMEM;
        if (ri_status_t rc = dp->resize(fresh.data(), cqe); rc != RI_OK) return rc;  // more completions waiting
        memory = std::move(fresh);
        memory_charge.swap(fresh_charge);  // the old ring's charge goes with `fresh_charge`
    } else {
        return RI_EINVAL;  // a uVP's CQ, resized without its new ring
    }
    attr.cqe = cqe;
    *actual = cqe;
    return RI_OK;
}

ri_status_t Kvp::Pd::make_qp(Cq *scq, Cq *rcq, Srq *srq, ri_qp_init_attr_t *a, const softrnic_create_qp_req *req,
                              ri_qp_t *out, uint32_t *qp_num) {
    const Limits &lim = instance().limits();
    if (scq == nullptr || rcq == nullptr) return RI_EINVAL;
    if (scq->rnic != rnic || rcq->rnic != rnic) return RI_EINVAL;  // CQs of another open or RNIC
    if (a->type == RI_QPT_UD) return RI_EOPNOTSUPP;
    if (a->type != RI_QPT_RC) return RI_EINVAL;
    if ((a->flags & ~(RI_QP_SIGNAL_ALL | RI_QP_USE_SRQ | RI_QP_REMOTE_WRITE | RI_QP_REMOTE_READ)) != 0) return RI_EINVAL;
    const bool use_srq = (a->flags & RI_QP_USE_SRQ) != 0;
    if (use_srq != (srq != nullptr)) return RI_EINVAL;
    if (srq != nullptr && srq->pd != this) return RI_EINVAL;  // an SRQ serves the QPs of its own PD
    if (a->sq_depth == 0 || (!use_srq && a->rq_depth == 0) || (use_srq && a->rq_depth != 0)) return RI_EINVAL;
    if (a->sq_depth > lim.max_qp_wr || a->rq_depth > lim.max_qp_wr) return RI_ERANGE;
    if (a->sq_sge > lim.max_sge || a->rq_sge > lim.max_sge || a->rd_sge > lim.max_sge) return RI_ERANGE;
    if (a->max_inline > lim.max_inline || a->ird > lim.max_ird || a->ord > lim.max_ord) return RI_ERANGE;
    if (use_srq) a->rq_sge = 0;
    if (req != nullptr) {
        if (req->sq.length < a->sq_depth * softrnic_sq_slot_size(a->sq_sge, a->max_inline)) return RI_EINVAL;
        if (req->rq.length < a->rq_depth * softrnic_rq_slot_size(a->rq_sge)) return RI_EINVAL;
    }
    if (ri_status_t rc = instance().charge(Kind::qp); rc != RI_OK) return rc;
    auto qp = std::make_unique<Qp>(this);
    auto num = instance().alloc_qp_num();
    if (!num) return RI_ENOSPC;
    qp->qp_num = *num;
    if (rnic->counters != nullptr) {
        if (auto slot = rnic->counters->allocate()) qp->counter_slot = *slot;
    }
    if (req != nullptr) {
        say(RI_LOG_DEBUG, "create_qp: pinning the QP's rings with ri_vm_pin_range");
        // The uVP lays both rings in one mapping: when their pages meet, one pin holds both (one check that the
        // pages are mapped, one lock in the owner) and covers no page that neither ring is on.
        const uint64_t page = 4096;
        const uint64_t sq_end = req->sq.addr + req->sq.length;
        const uint64_t rq_end = req->rq.addr + req->rq.length;
        const bool meet = req->rq.length > 0 && sq_end >= req->sq.addr && rq_end >= req->rq.addr &&
                          req->rq.addr / page <= (sq_end + page - 1) / page &&
                          req->sq.addr / page <= (rq_end + page - 1) / page;
        const uint64_t first = meet ? std::min(req->sq.addr, req->rq.addr) : req->sq.addr;
        const uint64_t length = meet ? std::max(sq_end, rq_end) - first : req->sq.length;
        if (ri_status_t rc = Pin::make(rnic->host_ctx, first, length, true, &qp->sq_ring); rc != RI_OK) {
            return rc;
        }
        if (req->rq.length > 0 && !meet) {
            if (ri_status_t rc = Pin::make(rnic->host_ctx, req->rq.addr, req->rq.length, true, &qp->rq_ring);
                rc != RI_OK) {
                return rc;
            }
        }
    }
    qp->attr.state = RI_QPS_IDLE;
    qp->attr.qp_num = qp->qp_num;
    qp->attr.access = ri_qp_initial_access(a->flags);
    qp->attr.ird = a->ird;
    qp->attr.ord = a->ord;
    qp->attr.init = *a;
    qp->attr.llp.fd = -1;
    if (req == nullptr && rnic->local_datapath) {
        // A consumer hosted in the kAL: the rings and the queue pair live here.
        const size_t sq_slot = softrnic_sq_slot_size(a->sq_sge, a->max_inline);
        const size_t rq_bytes = use_srq ? 0 : a->rq_depth * softrnic_rq_slot_size(a->rq_sge);
        if (ri_status_t rc = qp->memory_charge.add(rnic->host_ctx, a->sq_depth * sq_slot + rq_bytes); rc != RI_OK) return rc;
        qp->sq_memory = datapath::Mapping(a->sq_depth * sq_slot);
        if (!qp->sq_memory.ok()) return RI_ENOMEM;
        if (!use_srq) {
            qp->rq_memory = datapath::Mapping(a->rq_depth * softrnic_rq_slot_size(a->rq_sge));
            if (!qp->rq_memory.ok()) return RI_ENOMEM;
            qp->rq.init(qp->rq_memory.data(), a->rq_depth, a->rq_sge);
        }
        if (srq != nullptr && !srq->rq) return RI_EINVAL;  // an SRQ of a uVP cannot serve a local QP
        datapath::QpSetup setup;
        setup.qp_num = qp->qp_num;
        setup.pd = dp_id;
        setup.init = *a;
        setup.tunables = instance().tunables();
        setup.frames = rnic->frames;
        if (scq->dp == nullptr || rcq->dp == nullptr) return RI_EINVAL;
        qp->dp = std::make_unique<datapath::QueuePair>(setup, qp->sq_memory.data(), use_srq ? *srq->rq : qp->rq,
                                                       use_srq, *scq->dp, *rcq->dp, rnic->stags, *qp);
        if (qp->counter_slot != SOFTRNIC_NO_COUNTER_SLOT) {
            qp->dp->set_counters(datapath::CounterSlot(rnic->counters->slot(qp->counter_slot)));
        }
    }
    if (qp_num != nullptr) *qp_num = qp->qp_num;
    *out = to_handle<ri_qp_t>(qp.release());
    return RI_OK;
}

// A QP of the local data path follows what the state machine accepted, with no lock of ours held (its error path
// calls entered_error()): the RDMA-mode transition with a descriptor hands a duplicate of the stream to the queue
// pair (the kAL keeps its own reference, as it does for a uVP's stream); other changes act on the stream.
ri_status_t Kvp::Qp::modify(const ri_qp_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    if (ri_status_t rc = check_modify(in, mask); rc != RI_OK || !dp || (mask & RI_QP_ATTR_STATE) == 0) return rc;
    if ((mask & RI_QP_ATTR_LLP) != 0) {
        if (in->llp.fd < 0) return RI_OK;  // no stream to run (the state machine alone, as the control tests do)
        const int fd = ::fcntl(in->llp.fd, F_DUPFD_CLOEXEC, 0);
        // The same-host path: the queue pair takes its own reference to the channel's end too (the kAL closes its
        // copy after the call), as it does the socket.
        const bool same_host = (in->llp.mpa_flags & RI_LLP_SAME_HOST) != 0;
        ri_llp_params_t llp = in->llp;
        if (same_host) llp.channel = llp.channel >= 0 ? ::fcntl(llp.channel, F_DUPFD_CLOEXEC, 0) : -1;
        ri_status_t rc = RI_EBADF;
        if (fd >= 0) {
            rc = dp->attach(fd, llp);  // attach closes both on failure (and refuses the path without its channel)
        } else if (same_host && llp.channel >= 0) {
            ::close(llp.channel);
        }
        if (rc != RI_OK) {
            std::lock_guard lock(mutex);
            attr.state = RI_QPS_IDLE;  // the transition did not happen
            attr.llp = ri_llp_params_t{};
            attr.llp.fd = -1;
        }
        return rc;
    }
    iwarp::TermCode term = iwarp::term::kRdmapLocalCatastrophic;
    if ((mask & RI_QP_ATTR_TERM) != 0) {
        term = iwarp::TermCode{static_cast<uint8_t>(in->term_layer_etype >> 4),
                               static_cast<uint8_t>(in->term_layer_etype & 0xf), static_cast<uint8_t>(in->term_ecode)};
    }
    dp->change_state(in->state, term);
    return RI_OK;
}

// The RDMAC verbs' QP state machine: IDLE -> RTS only with the LLP stream (the kAL's RDMA-mode transition), then
// RTS -> CLOSING | TERMINATE | ERROR, CLOSING | TERMINATE -> ERROR, ERROR -> IDLE; any state -> ERROR. Attributes
// (IRD, ORD, remote access) change in IDLE only; the transition applies the negotiated IRD and ORD.
ri_status_t Kvp::Qp::check_modify(const ri_qp_attr_t *in, uint32_t mask) {
    constexpr uint32_t kSupported = RI_QP_ATTR_STATE | RI_QP_ATTR_IRD | RI_QP_ATTR_ORD | RI_QP_ATTR_ACCESS;
    constexpr uint32_t kKnown = kSupported | RI_QP_ATTR_LLP | RI_QP_ATTR_TERM | RI_QP_ATTR_SQ_DEPTH |
                                RI_QP_ATTR_RQ_DEPTH;
    if ((mask & ~kKnown) != 0) return RI_EINVAL;
    // Queue rings are fixed at create.
    if ((mask & (RI_QP_ATTR_SQ_DEPTH | RI_QP_ATTR_RQ_DEPTH)) != 0) return RI_EOPNOTSUPP;
    std::lock_guard lock(mutex);
    const auto from = static_cast<ri_qp_state_t>(attr.state);
    auto to = from;
    if ((mask & RI_QP_ATTR_STATE) != 0) {
        if (in->state > RI_QPS_ERROR) return RI_EINVAL;
        to = static_cast<ri_qp_state_t>(in->state);
    }
    switch (to) {
        case RI_QPS_IDLE:
            if (from != RI_QPS_IDLE && from != RI_QPS_ERROR) return RI_EINVAL;
            break;
        case RI_QPS_RTS:
            if (from == RI_QPS_IDLE) {
                // The RDMA-mode transition carries the negotiated stream; without it there is nothing to send on.
                if ((mask & RI_QP_ATTR_LLP) == 0) return RI_ENOTCONN;
                break;
            }
            if (from != RI_QPS_RTS || (mask & RI_QP_ATTR_LLP) != 0) return RI_EINVAL;
            break;
        case RI_QPS_CLOSING:
        case RI_QPS_TERMINATE:
            // Only a QP in RTS (on a stream) closes or terminates.
            if (from != RI_QPS_RTS && from != to) return RI_EINVAL;
            break;
        case RI_QPS_ERROR: break;  // every state may move to ERROR
    }
    if ((mask & RI_QP_ATTR_TERM) != 0 && to != RI_QPS_TERMINATE) return RI_EINVAL;
    const bool transition = from == RI_QPS_IDLE && to == RI_QPS_RTS;
    if ((mask & RI_QP_ATTR_LLP) != 0) {
        if (!transition) return RI_EINVAL;  // the LLP stream comes with the move to RTS, once
        const ri_llp_params_t &l = in->llp;
        const Limits &lim = pd->instance().limits();
        if ((l.mpa_revision != 1 && l.mpa_revision != 2) || l.rtr_type > RI_RTR_READ) return RI_EINVAL;
        if (l.ird > lim.max_ird || l.ord > lim.max_ord) return RI_ERANGE;
        // A uVP's stream (fd -1) lives in its process, where the uVP takes the socket; only a QP of the local data
        // path (a consumer hosted in the kAL) takes a descriptor here.
        if (l.fd >= 0 && !dp) return RI_EOPNOTSUPP;
    }
    const uint32_t attrs = mask & (RI_QP_ATTR_IRD | RI_QP_ATTR_ORD | RI_QP_ATTR_ACCESS);
    if (attrs != 0) {
        if (from != RI_QPS_IDLE || to != RI_QPS_IDLE) return RI_EINVAL;
        const Limits &lim = pd->instance().limits();
        if ((mask & RI_QP_ATTR_IRD) != 0 && in->ird > lim.max_ird) return RI_ERANGE;
        if ((mask & RI_QP_ATTR_ORD) != 0 && in->ord > lim.max_ord) return RI_ERANGE;
        if ((mask & RI_QP_ATTR_ACCESS) != 0) {
            constexpr uint32_t kQpAccess = RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_ATOMIC;
            if ((in->access & ~kQpAccess) != 0) return RI_EINVAL;
        }
    }
    if ((mask & RI_QP_ATTR_IRD) != 0) attr.ird = in->ird;
    if ((mask & RI_QP_ATTR_ORD) != 0) attr.ord = in->ord;
    if ((mask & RI_QP_ATTR_ACCESS) != 0) attr.access = in->access;
    if (transition) {
        attr.llp = in->llp;
        if (in->llp.mpa_revision == 2 || in->llp.ird != 0 || in->llp.ord != 0) {
            attr.ird = in->llp.ird;  // negotiated (revision 1 negotiates none: the QP's own stay)
            attr.ord = in->llp.ord;
        }
        say(RI_LOG_DEBUG, "QP " + std::to_string(qp_num) + ": RDMA mode (MPA revision " +
                              std::to_string(in->llp.mpa_revision) + ", IRD " + std::to_string(attr.ird) + ", ORD " +
                              std::to_string(attr.ord) + ")");
    }
    if (to == RI_QPS_IDLE && from == RI_QPS_ERROR) {
        attr.llp = ri_llp_params_t{};  // a reset QP is on no stream
        attr.llp.fd = -1;
    }
    attr.state = to;
    return RI_OK;
}

ri_status_t Kvp::Pd::make_srq(ri_srq_attr_t *a, const softrnic_ring *ring, ri_srq_t *out) {
    const Limits &lim = instance().limits();
    if (a->max_wr == 0) return RI_EINVAL;
    if (a->max_wr > lim.max_srq_wr || a->max_sge > lim.max_sge) return RI_ERANGE;
    if (a->limit > a->max_wr) return RI_ERANGE;
    if (ring != nullptr && ring->length < a->max_wr * softrnic_rq_slot_size(a->max_sge)) return RI_EINVAL;
    if (ri_status_t rc = instance().charge(Kind::srq); rc != RI_OK) return rc;
    auto srq = std::make_unique<Srq>(this);
    if (ring != nullptr) {
        if (ri_status_t rc = Pin::make(rnic->host_ctx, ring->addr, ring->length, true, &srq->ring); rc != RI_OK) {
            return rc;
        }
    }
    srq->id = instance().next_object_id();
    a->reserved = 0;
    srq->attr = *a;
    if (ring == nullptr && rnic->local_datapath) {
        const size_t bytes = a->max_wr * softrnic_rq_slot_size(a->max_sge);
        if (ri_status_t rc = srq->memory_charge.add(rnic->host_ctx, bytes); rc != RI_OK) return rc;
        srq->memory = datapath::Mapping(bytes);
        if (!srq->memory.ok()) return RI_ENOMEM;
        srq->rq = std::make_unique<datapath::ReceiveQueue>();
        srq->rq->init(srq->memory.data(), a->max_wr, a->max_sge);
        srq->rq->id = srq->id;
        srq->rq->context = a->context;
        srq->rq->set_limit(a->limit);
    }
    *out = to_handle<ri_srq_t>(srq.release());
    return RI_OK;
}

ri_status_t Kvp::Srq::post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (!rq) return RI_EOPNOTSUPP;  // a uVP's SRQ is posted to in its process
    return datapath::post_receives(*rq, wr, count, attr.max_sge, pd->rnic->stags, pd->dp_id, posted);
}

ri_status_t Kvp::Qp::check_memory_op(const ri_send_wr_t &w, softrnic_bind_op *bind,
                                     softrnic_fast_reg_op *fast_reg) noexcept {
    if (w.opcode != RI_WR_BIND_MW) {
        const Mr *mr = from_handle<Mr>(w.u.fast_reg.mr);
        if (ri_status_t rc = datapath::check_memory_op(w, static_cast<const Mw *>(nullptr), mr); rc != RI_OK) return rc;
        softrnic_fast_reg_op op{};
        return datapath::fast_reg_op(w, mr->stag, mr->pd->dp_id, fast_reg != nullptr ? *fast_reg : op);
    }
    const Mw *mw = from_handle<Mw>(w.u.bind.mw);
    const Mr *mr = from_handle<Mr>(w.u.bind.mr);
    if (ri_status_t rc = datapath::check_memory_op(w, mw, mr); rc != RI_OK) return rc;
    if (bind != nullptr) *bind = datapath::bind_op(w, mw->stag, mw->pd->dp_id, mr != nullptr ? mr->stag : 0);
    return RI_OK;
}

// Checks a virtual-address registration: rights, length, and the tagged offset (0 for zero-based regions, the
// address otherwise).
ri_status_t check_registration(const Instance &instance, uint64_t addr, uint64_t length, uint64_t iova,
                               uint32_t access) {
    if (ri_status_t rc = check_access(access); rc != RI_OK) return rc;
    if (length == 0 || addr + length < addr) return RI_EINVAL;
    if (length > instance.limits().max_mr_size) return RI_ERANGE;
    const bool zero_based = (access & RI_ACCESS_ZERO_BASED) != 0;
    if (zero_based ? iova != 0 : iova != addr) return RI_EINVAL;
    return RI_OK;
}

ri_status_t Kvp::Pd::register_mr(const ri_mr_reg_t *reg, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (ri_status_t rc = check_registration(instance(), reg->addr, reg->length, reg->iova, reg->access); rc != RI_OK) {
        return rc;
    }
    if (ri_status_t rc = instance().charge(Kind::mr); rc != RI_OK) return rc;
    auto mr = std::make_unique<Mr>(this);
    auto stag = instance().alloc_stag();
    if (!stag) return RI_ENOSPC;
    mr->stag = *stag;
    if (ri_status_t rc = Pin::make(rnic->host_ctx, reg->addr, reg->length, pin_for_write(reg->access), &mr->pages);
        rc != RI_OK) {
        return rc;
    }
    mr->addr = reg->addr;
    mr->length = reg->length;
    mr->iova = reg->iova;
    mr->access = reg->access | RI_ACCESS_LOCAL_READ;
    *keys = mr->keys();
    mr->publish();
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Kvp::Pd::alloc_stag(uint32_t max_pages, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (max_pages == 0) return RI_EINVAL;
    if (max_pages > instance().limits().max_fast_reg_pages) return RI_ERANGE;
    if (ri_status_t rc = instance().charge(Kind::mr); rc != RI_OK) return rc;
    auto mr = std::make_unique<Mr>(this);
    auto stag = instance().alloc_stag();
    if (!stag) return RI_ENOSPC;
    mr->stag = *stag;
    mr->max_pages = max_pages;
    mr->state = RI_STAG_INVALID;  // valid once a fast registration maps it
    // A hosted consumer's data path maps it at fast registration (a uVP's enters it in its own table).
    if (rnic->local_datapath) rnic->stags.add_allocated(mr->stag, dp_id, max_pages);
    *keys = mr->keys();
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Kvp::Pd::alloc_mw(uint32_t type, ri_mw_t *out, ri_stag_t *rkey) {
    if (type != RI_MW_TYPE_1 && type != RI_MW_TYPE_2) return RI_EINVAL;
    if (type == RI_MW_TYPE_1) return RI_EOPNOTSUPP;  // not advertised: nothing here could bind one (see caps)
    if (ri_status_t rc = instance().charge(Kind::mw); rc != RI_OK) return rc;
    auto mw = std::make_unique<Mw>(this);
    auto stag = instance().alloc_stag();
    if (!stag) return RI_ENOSPC;
    mw->stag = *stag;
    mw->type = type;
    *rkey = mw->stag;
    *out = to_handle<ri_mw_t>(mw.release());
    return RI_OK;
}

ri_status_t Kvp::Mr::register_shared(ri_pd_t pd_handle, uint64_t new_iova, uint32_t new_access, ri_mr_t *out,
                                      ri_mr_keys_t *out_keys) {
    Pd *to = from_handle<Pd>(pd_handle);
    if (to == nullptr || to->rnic->instance != pd->rnic->instance) return RI_EINVAL;
    std::shared_ptr<Pin> shared;
    uint64_t a = 0, len = 0;
    {
        std::lock_guard lock(mutex);
        if (pages == nullptr) return RI_EINVAL;  // an allocated STag has no pages to share
        shared = pages;
        a = addr;
        len = length;
    }
    if (ri_status_t rc = check_registration(to->instance(), a, len, new_iova, new_access); rc != RI_OK) return rc;
    if (ri_status_t rc = to->instance().charge(Kind::mr); rc != RI_OK) return rc;
    auto mr = std::make_unique<Mr>(to);
    auto new_stag = to->instance().alloc_stag();
    if (!new_stag) return RI_ENOSPC;
    mr->stag = *new_stag;
    mr->pages = std::move(shared);  // the pages stay pinned while either region lives
    mr->addr = a;
    mr->length = len;
    mr->iova = new_iova;
    mr->access = new_access | RI_ACCESS_LOCAL_READ;
    *out_keys = mr->keys();
    mr->publish();
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Kvp::Mr::reregister(uint32_t mask, ri_pd_t, const ri_mr_reg_t *reg, ri_mr_keys_t *out_keys) {
    if ((mask & ~(RI_REREG_TRANSLATION | RI_REREG_PD | RI_REREG_ACCESS)) != 0 || mask == 0) return RI_EINVAL;
    // Moving a region to another PD would move it in the kAL's ownership tree; the kAL refuses it before us.
    if ((mask & RI_REREG_PD) != 0) return RI_EOPNOTSUPP;
    std::lock_guard lock(mutex);
    if (pages == nullptr) return RI_EINVAL;  // an allocated STag is mapped by fast registration, not reregistered
    const bool translation = (mask & RI_REREG_TRANSLATION) != 0;
    const uint64_t new_addr = translation ? reg->addr : addr;
    const uint64_t new_length = translation ? reg->length : length;
    const uint32_t new_access = (mask & RI_REREG_ACCESS) != 0 ? reg->access : (access & ~RI_ACCESS_LOCAL_READ);
    const uint64_t new_iova = translation ? reg->iova
                              : (new_access & RI_ACCESS_ZERO_BASED) != 0 ? 0
                                                                         : addr;
    if (ri_status_t rc = check_registration(pd->instance(), new_addr, new_length, new_iova, new_access); rc != RI_OK) {
        return rc;
    }
    // Pin the new translation before the old one goes, so pages both cover stay pinned throughout.
    if (translation || pin_for_write(new_access) != pin_for_write(access)) {
        std::shared_ptr<Pin> fresh;
        if (ri_status_t rc = Pin::make(pd->rnic->host_ctx, new_addr, new_length, pin_for_write(new_access), &fresh);
            rc != RI_OK) {
            return rc;
        }
        pages = std::move(fresh);
    }
    addr = new_addr;
    length = new_length;
    iova = new_iova;
    access = new_access | RI_ACCESS_LOCAL_READ;
    if (pd->rnic->local_datapath) pd->rnic->stags.remove(stag);
    stag = pd->instance().rekey(stag);  // STags advertised for the old registration stop working
    publish();
    *out_keys = keys();
    return RI_OK;
}

static_assert(offsetof(softrnic_open_resp, unsent_budget) == SOFTRNIC_OPEN_RESP_SIZE_1_1,
              "the 1.1 Open RNIC reply ends where the 1.2 fields start");

ri_status_t Kvp::syscall(ri_kvp_syscall_t *k) {
    ri_syscall_t &call = *k->call;
    Reply reply(call);
    switch (call.op) {
        case RI_OPEN_RNIC: {
            if (!reply.has_priv()) return RI_ENOSYS;  // a caller without the softrnic uVP
            softrnic_open_req req;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            ri_rnic_open_params_t p;
            if (ri_status_t rc = reply.read_param(&p); rc != RI_OK) return rc;
            softrnic_open_resp resp{};
            resp.max_ceh = rdma::provider::EventHandlers::kMaxCeh;
            // A uVP of 1.1 (its request says so) knows, and has room for, the reply up to the counters region
            // only: it gets that part, not the 1.2 tunables.
            const size_t resp_size = (req.hdr.version & 0xffffu) >= 2 ? sizeof resp : SOFTRNIC_OPEN_RESP_SIZE_1_1;
            if (ri_status_t rc = reply.check_room(resp_size, 0, 0); rc != RI_OK) return rc;
            ri_rnic_t r = nullptr;
            int fd = -1;
            // A caller with no room for a descriptor gets no counters region (its QPs count nothing).
            if (ri_status_t rc = make_rnic(&p, reply.fd_room(1) ? &fd : nullptr, &r); rc != RI_OK) return rc;
            Rnic *open = from_handle<Rnic>(r);
            open->local_datapath = false;  // the uVP runs this open's data path
            k->created = r;
            const datapath::Tunables t = open->instance->tunables();
            resp.unsent_budget = t.unsent_budget;
            resp.siw_nudge = t.nudge ? 1 : 0;
            resp.pull_min = t.pull_min;
            if (fd >= 0) {
                // The counters region goes to the uVP like a doorbell page: it maps it and writes its QPs' slots.
                resp.counter_slots = open->counters->slots();
                resp.counter_slot_size = sizeof(softrnic_qp_counters);
                (void)reply.pass_fd(fd);  // cannot fail: fd_room(1) held
            }
            return reply.write_priv_prefix(resp, resp_size);  // cannot fail: the room was checked
        }
        case RI_CREATE_CQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            softrnic_create_cq_req req;
            ri_cq_attr_t attr;
            if (ri_status_t rc = read_create<softrnic_create_cq_resp>(reply, &req, &attr); rc != RI_OK) return rc;
            ri_cq_t cq = nullptr;
            if (ri_status_t rc = from_handle<Rnic>(k->object)->make_cq(&attr, &req.ring, &cq); rc != RI_OK) return rc;
            k->created = cq;
            softrnic_create_cq_resp resp{};
            resp.cq_id = from_handle<Cq>(cq)->id;
            resp.cqe = attr.cqe;
            (void)reply.write_result(attr);  // cannot fail: read_create checked the room
            return reply.write_priv(resp);
        }
        case RI_RESIZE_CQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            softrnic_resize_cq_req req;
            uint32_t cqe = 0;
            if (ri_status_t rc = reply.read_priv(&req); rc != RI_OK) return rc;
            if (ri_status_t rc = reply.read_param(&cqe); rc != RI_OK) return rc;
            if (ri_status_t rc = reply.check_room(sizeof(softrnic_resize_cq_resp), sizeof(uint32_t), 0); rc != RI_OK) {
                return rc;
            }
            softrnic_resize_cq_resp resp{};
            if (ri_status_t rc = from_handle<Cq>(k->object)->resize_to(cqe, &req.ring, &resp.cqe); rc != RI_OK) return rc;
            (void)reply.write_result(resp.cqe);  // cannot fail: the room was checked
            return reply.write_priv(resp);
        }
        case RI_CREATE_QP: {
            if (!reply.has_priv()) return RI_ENOSYS;
            softrnic_create_qp_req req;
            ri_qp_init_attr_t attr;
            if (ri_status_t rc = read_create<softrnic_create_qp_resp>(reply, &req, &attr); rc != RI_OK) return rc;
            ri_qp_t qp = nullptr;
            softrnic_create_qp_resp resp{};
            auto *pd = from_handle<Pd>(k->object);
            if (ri_status_t rc = pd->make_qp(from_handle<Cq>(k->refs[0]), from_handle<Cq>(k->refs[1]),
                                             from_handle<Srq>(k->refs[2]), &attr, &req, &qp, &resp.qp_num);
                rc != RI_OK) {
                return rc;
            }
            k->created = qp;
            resp.counter_slot = from_handle<Qp>(qp)->counter_slot;
            (void)reply.write_result(attr);  // cannot fail: read_create checked the room
            return reply.write_priv(resp);
        }
        case RI_CREATE_SRQ: {
            if (!reply.has_priv()) return RI_ENOSYS;
            softrnic_create_srq_req req;
            ri_srq_attr_t attr;
            if (ri_status_t rc = read_create<softrnic_create_srq_resp>(reply, &req, &attr); rc != RI_OK) return rc;
            ri_srq_t srq = nullptr;
            if (ri_status_t rc = from_handle<Pd>(k->object)->make_srq(&attr, &req.ring, &srq); rc != RI_OK) return rc;
            k->created = srq;
            softrnic_create_srq_resp resp{};
            resp.srq_id = from_handle<Srq>(srq)->id;
            (void)reply.write_result(attr);  // cannot fail: read_create checked the room
            return reply.write_priv(resp);
        }
        default: return RI_ENOSYS;
    }
}

}  // namespace
}  // namespace softrnic::kvp

RI_PROVIDER_MODULE(softrnic::kvp::Kvp)
