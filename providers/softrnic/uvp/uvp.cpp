// The softrnic uVP: the consumer-side half of the software RNIC, loaded by the uAL into the consumer's process.
// Every privileged verb goes to the kVP through the host's ri_syscall upcall, naming objects by the kAL's handles;
// the uVP maps its own queue rings at create and names them to the kVP in the private data (softrnic_abi.h). The
// data path (softrnic_datapath) runs here, in the consumer's process: post and poll work on those rings, and once the
// kAL hands a QP's socket over, the iWARP engine runs on it with no system call but the socket's own I/O.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "completion_queue.hpp"
#include "counters.hpp"
#include "progress.hpp"
#include "queue_pair.hpp"
#include "receive_queue.hpp"
#include "ring.hpp"
#include "rnicpi/cpp/event_handlers.hpp"
#include "rnicpi/cpp/provider.hpp"
#include "rnicpi/cpp/syscall_request.hpp"
#include "softrnic_abi.h"
#include "stag_table.hpp"

namespace softrnic::uvp {
namespace {

using datapath::Mapping;
using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Uvp;
const ri_host_ops_t &host() { return rdma::provider::Module<Uvp>::host(); }

static_assert(sizeof(ri_send_wr_t::u) == sizeof(softrnic_sq_wqe::op), "the send ring slot holds the WR's union");

using Call = rdma::provider::SyscallRequest<Uvp>;
using Forwarded = rdma::provider::Forwarded<Uvp>;

template <class T>
T hdr_init() {
    T t{};
    t.hdr.version = SOFTRNIC_ABI_VERSION;
    t.hdr.size = sizeof(T);
    return t;
}

// A private reply is usable when it is whole and of our major version.
template <class T>
bool priv_ok(const Call &c, const T &reply) {
    return c.priv_len() >= sizeof(T) && (reply.hdr.version >> 16) == SOFTRNIC_ABI_MAJOR;
}

struct Uvp {
    static constexpr ri_mode_t mode = RI_MODE_NONPRIVILEGED;
    static constexpr uint32_t flags = RI_MODULE_SOFTWARE;
    static constexpr const char *name = SOFTRNIC_PROVIDER_NAME;
    static constexpr const char *vendor = SOFTRNIC_VENDOR;
    static constexpr const char *version = SOFTRNIC_VERSION;

    // The progress thread goes with the module.
    static void fini() { datapath::Progress::shutdown(); }

    struct Pd;
    struct Cq;
    struct Mr;

    struct Rnic : Forwarded {
        ri_rnic_attr_t attr{};  // limits, cached at open for the fast path's checks
        std::mutex mutex;
        rdma::provider::EventHandlers handlers;
        // The local STag table for the data path: every live region of this open by STag.
        datapath::StagTable stags;
        std::atomic<uint32_t> next_pd{1};  // protection domain identifiers of the data path
        // Small QPs' rings, several to a page (shared: a QP the consumer leaks past close keeps its block valid).
        std::shared_ptr<datapath::RingArena> rings = std::make_shared<datapath::RingArena>();
        // The open's counters region, shared with the kVP (softrnic_qp_counters slots); unmapped at close.
        uint8_t *counters = nullptr;
        size_t counters_len = 0;
        uint32_t counter_slots = 0;
        uint32_t counter_slot_size = 0;
        datapath::Tunables tunables;  // the RNIC's, from the Open RNIC reply
        // The frames its QPs' sockets took in part, recycled (shared: a QP the consumer leaks past close keeps it).
        std::shared_ptr<datapath::FramePool> frames = datapath::make_frame_pool();

        ~Rnic() {
            if (counters != nullptr) ::munmap(counters, counters_len);
        }
        // The slot the kVP gave a QP, if it is inside the region.
        datapath::CounterSlot counter_slot(uint32_t slot) const noexcept {
            if (counters == nullptr || slot >= counter_slots) return {};
            return datapath::CounterSlot(
                reinterpret_cast<softrnic_qp_counters *>(counters + static_cast<size_t>(slot) * counter_slot_size));
        }

        ri_status_t close() { return forward_destroy(RI_CLOSE_RNIC); }
        ri_status_t query(ri_rnic_attr_t *out) { return forward_query(RI_QUERY_RNIC, out); }
        // Event handlers live in this process: completions of this process's rings are noticed here.
        ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) { return handlers.set_aeh(fn, ctx, id); }
        ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) { return handlers.set_ceh(fn, ctx, id); }
        ri_status_t clear_handler(uint32_t id) { return handlers.clear(id); }
        void raise(const ri_async_event_t &e) {
            rdma::provider::EventHandlers::Aeh h = handlers.aeh();
            if (h.fn != nullptr) h.fn(h.ctx, to_handle<ri_rnic_t>(this), &e);
        }
        ri_status_t alloc_pd(ri_pd_t *pd);
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq);
    };

    struct Cq : Forwarded {
        Rnic *rnic = nullptr;
        ri_cq_attr_t attr{};
        std::mutex resize_mutex;  // one resize at a time (its ring swap is the data path's, under the ring's lock)
        Mapping memory;
        std::unique_ptr<datapath::CompletionQueue> dp;  // on `memory`

        static void notify(void *self) {
            auto *cq = static_cast<Cq *>(self);
            rdma::provider::EventHandlers::Ceh h = cq->rnic->handlers.ceh(cq->attr.ceh_id);
            if (h.fn != nullptr) h.fn(h.ctx, to_handle<ri_rnic_t>(cq->rnic), to_handle<ri_cq_t>(cq));
        }

        ri_status_t destroy() { return forward_destroy(RI_DESTROY_CQ); }
        ri_status_t query(ri_cq_attr_t *out) { return forward_query(RI_QUERY_CQ, out); }
        ri_status_t resize(uint32_t cqe, uint32_t *actual);
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) { return dp->poll(max, wc, polled); }
        ri_status_t request_notify(uint32_t type) { return dp->request_notify(type); }
    };

    struct Srq : Forwarded {
        Pd *pd = nullptr;
        uint32_t id = 0;
        Mapping memory;
        datapath::ReceiveQueue rq;  // on `memory`
        ri_srq_attr_t attr{};

        ri_status_t destroy();
        ri_status_t query(ri_srq_attr_t *out);
        ri_status_t modify(const ri_srq_attr_t *in, uint32_t mask);
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);
    };

    struct Qp final : datapath::QpOwner, Forwarded {
        Pd *pd = nullptr;
        uint32_t qp_num = 0;
        Srq *srq = nullptr;
        ri_qp_init_attr_t init{};
        // Both rings in one block (the receive ring after the send ring, cache-line aligned); a small QP's share a
        // page with others'.
        datapath::RingMemory memory;
        uint8_t *sq_ring = nullptr;
        uint8_t *rq_ring = nullptr;
        datapath::ReceiveQueue rq;                 // on rq_ring, unless the QP uses an SRQ
        // The progress thread's report to the kVP never uses the kAL's handle once destroy has released it (the
        // kAL may have given the number to a new object by then).
        std::mutex report_mutex;
        bool destroying = false;
        // The kVP was told to move this QP to ERROR and nothing moved it since: a second report (the data path's
        // and the uAL's at the same connection's end) would be a message to krdmad that changes nothing.
        bool kvp_told_error = false;
        std::unique_ptr<datapath::QueuePair> dp;  // goes first: it uses everything above

        ~Qp() override { dp.reset(); }
        ri_status_t destroy();
        ri_status_t query(ri_qp_attr_t *out);
        ri_status_t modify(const ri_qp_attr_t *in, uint32_t mask);
        ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
            return dp->post_send(wr, count, posted);
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            return dp->post_recv(wr, count, posted);
        }
        // No bind_mw: Type 1 window binds are not executed by the data path yet (the loader's stub answers
        // RI_EOPNOTSUPP, and modinfo says so).

        // datapath::QpOwner
        void async_event(const ri_async_event_t &event) noexcept override;
        void entered_error() noexcept override;
        ri_status_t check_memory_op(const ri_send_wr_t &wr, softrnic_bind_op *bind,
                                    softrnic_fast_reg_op *fast_reg) noexcept override;
        // The kVP's modify; @p wait false posts it (ri_syscall_post) and answers only whether it was sent.
        ri_status_t kvp_modify(const ri_qp_attr_t &in, uint32_t mask, bool wait = true);
    };

    struct Pd : Forwarded {
        Rnic *rnic = nullptr;
        uint32_t id = 0;  // the data path's protection domain identifier

        ri_status_t dealloc() { return forward_destroy(RI_DEALLOC_PD); }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *qp);
        ri_status_t create_srq(ri_srq_attr_t *attr, ri_srq_t *srq);
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_stag(uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_mw(uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    };

    struct Mr : Forwarded {
        Pd *pd = nullptr;
        ri_mr_keys_t keys{};
        uint64_t addr = 0;
        uint64_t length = 0;
        uint64_t iova = 0;
        uint32_t access = 0;
        uint32_t max_pages = 0;

        // Makes the region resolvable by the data path (an allocated STag is not, until fast registration).
        void publish() {
            if (max_pages != 0) return;
            pd->rnic->stags.add(keys.lkey, datapath::StagEntry::region(addr, length, iova, access, pd->id));
        }
        ri_status_t deregister() {
            if (ri_status_t rc = forward_destroy(RI_DEREGISTER_MR); rc != RI_OK) return rc;
            pd->rnic->stags.remove(keys.lkey);
            return RI_OK;
        }
        ri_status_t query(ri_mr_attr_t *out) {
            if (ri_status_t rc = forward_query(RI_QUERY_MR, out); rc != RI_OK || max_pages == 0) return rc;
            // Fast registration happens in this process's data path: the kVP does not see it.
            pd->rnic->stags.fast_reg_attr(keys.lkey, *out);
            return RI_OK;
        }
        ri_status_t register_shared(ri_pd_t pd, uint64_t iova, uint32_t access, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t reregister(uint32_t mask, ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_keys_t *keys);
    };

    struct Mw : Forwarded {
        Pd *pd = nullptr;
        uint32_t type = RI_MW_TYPE_1;
        ri_stag_t stag = 0;
        ri_status_t dealloc() {
            if (ri_status_t rc = forward_destroy(RI_DEALLOC_MW); rc != RI_OK) return rc;
            if (type == RI_MW_TYPE_2) pd->rnic->stags.remove(stag);  // bound by this process's data path
            return RI_OK;
        }
    };

    static ri_status_t open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *out);
};

ri_status_t Uvp::open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *out) {
    if (params == nullptr || out == nullptr || params->host_ctx == nullptr) return RI_EINVAL;
    auto r = std::make_unique<Rnic>();
    r->host_ctx = params->host_ctx;
    ri_rnic_open_params_t p = *params;
    p.host_ctx = nullptr;  // the kAL fills in its own
    p.instance = nullptr;
    auto req = hdr_init<softrnic_open_req>();
    softrnic_open_resp resp{};
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_OPEN_RNIC, 0);
    c.param(p).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    if (ri_status_t rc = c.run(r->host_ctx); rc != RI_OK) return rc;
    r->bind(r->host_ctx, c.handle());
    // A kVP of another softrnic major release is refused; one of 1.1 answers without the tunables (the defaults
    // then).
    ri_status_t rc = c.priv_len() >= SOFTRNIC_OPEN_RESP_SIZE_1_1 && (resp.hdr.version >> 16) == SOFTRNIC_ABI_MAJOR
                         ? RI_OK
                         : RI_EPROTO;
    if (rc == RI_OK && c.nfds_out() >= 1 && resp.counter_slots > 0 &&
        resp.counter_slot_size >= sizeof(softrnic_qp_counters) && resp.counter_slot_size % 8 == 0) {
        // The counters region: mapped shared, like a doorbell page; the descriptor is not needed after that.
        const size_t len = static_cast<size_t>(resp.counter_slots) * resp.counter_slot_size;
        void *m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        if (m != MAP_FAILED) {
            r->counters = static_cast<uint8_t *>(m);
            r->counters_len = len;
            r->counter_slots = resp.counter_slots;
            r->counter_slot_size = resp.counter_slot_size;
        }
    }
    for (uint32_t i = 0; i < c.nfds_out(); ++i) ::close(fds[i]);
    if (c.priv_len() >= sizeof resp) {
        r->tunables.unsent_budget = resp.unsent_budget;
        r->tunables.nudge = resp.siw_nudge != 0;
        r->tunables.pull_min = resp.pull_min;  // 0 from a 1.2 kVP: no single copy
    }
    if (rc == RI_OK) rc = r->query(&r->attr);
    if (rc != RI_OK) {
        (void)Call(RI_CLOSE_RNIC, r->handle).run(r->host_ctx);
        return rc;
    }
    *out = to_handle<ri_rnic_t>(r.release());
    return RI_OK;
}

ri_status_t Uvp::Rnic::alloc_pd(ri_pd_t *out) {
    Call c(RI_ALLOC_PD, handle);
    if (ri_status_t rc = c.run(host_ctx); rc != RI_OK) return rc;
    auto *pd = new Pd;
    pd->rnic = this;
    pd->bind(host_ctx, c.handle());
    pd->id = next_pd.fetch_add(1);
    *out = to_handle<ri_pd_t>(pd);
    return RI_OK;
}

ri_status_t Uvp::Rnic::create_cq(ri_cq_attr_t *want, ri_cq_t *out) {
    if (want == nullptr) return RI_EINVAL;
    if (want->cqe == 0) return RI_EINVAL;
    if (want->cqe > attr.max_cqe) return RI_ERANGE;
    auto cq = std::make_unique<Cq>();
    cq->rnic = this;
    cq->memory = Mapping(want->cqe * softrnic_cq_slot_size());
    if (!cq->memory.ok()) return RI_ENOMEM;
    auto req = hdr_init<softrnic_create_cq_req>();
    req.ring = softrnic_ring{cq->memory.address(), cq->memory.size()};
    softrnic_create_cq_resp resp{};
    ri_cq_attr_t provided{};
    Call c(RI_CREATE_CQ, handle);
    c.param(*want).result(&provided).priv(req, &resp);
    if (ri_status_t rc = c.run(host_ctx); rc != RI_OK) return rc;
    cq->bind(host_ctx, c.handle());
    if (!priv_ok(c, resp) || resp.cqe < want->cqe) {
        (void)Call(RI_DESTROY_CQ, cq->handle).run(host_ctx);
        return RI_EPROTO;
    }
    cq->attr = *want;
    cq->dp = std::make_unique<datapath::CompletionQueue>(cq->memory.data(), want->cqe, &Cq::notify, cq.get());
    *out = to_handle<ri_cq_t>(cq.release());
    return RI_OK;
}

ri_status_t Uvp::Cq::resize(uint32_t cqe, uint32_t *actual) {
    if (actual == nullptr || cqe == 0) return RI_EINVAL;
    if (cqe > rnic->attr.max_cqe) return RI_ERANGE;
    if ((rnic->attr.caps & RI_CAP_RESIZE_CQ) == 0) return RI_EOPNOTSUPP;  // a kVP of an older minor
    // Cheap refusal first: a ring too small for what waits (checked again, under the ring's lock, at the move).
    if (dp->pending() > cqe) return RI_EINVAL;
    std::lock_guard g(resize_mutex);
    Mapping fresh(static_cast<size_t>(cqe) * softrnic_cq_slot_size());
    if (!fresh.ok()) return RI_ENOMEM;
    // The kVP pins the new ring in place of the old; then the completions move to it.
    auto tell = [this](uint32_t entries, const Mapping &ring) -> ri_status_t {
        auto req = hdr_init<softrnic_resize_cq_req>();
        req.ring = softrnic_ring{ring.address(), ring.size()};
        softrnic_resize_cq_resp resp{};
        uint32_t provided = 0;
        Call c(RI_RESIZE_CQ, handle);
        c.param(entries).result(&provided).priv(req, &resp);
        if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
        return priv_ok(c, resp) && provided >= entries ? RI_OK : RI_EPROTO;
    };
    if (ri_status_t rc = tell(cqe, fresh); rc != RI_OK) return rc;
    if (ri_status_t rc = dp->resize(fresh.data(), cqe); rc != RI_OK) {
        // More completions arrived than the new ring holds: the old ring stays, pinned again.
        (void)tell(attr.cqe, memory);
        return rc;
    }
    memory = std::move(fresh);
    attr.cqe = cqe;
    *actual = cqe;
    return RI_OK;
}

ri_status_t Uvp::Pd::create_qp(ri_cq_t scq_h, ri_cq_t rcq_h, ri_srq_t srq_h, ri_qp_init_attr_t *attr,
                                ri_qp_t *out) {
    Cq *scq = from_handle<Cq>(scq_h);
    Cq *rcq = from_handle<Cq>(rcq_h);
    Srq *srq = from_handle<Srq>(srq_h);
    if (scq == nullptr || rcq == nullptr || attr == nullptr) return RI_EINVAL;
    const ri_rnic_attr_t &lim = rnic->attr;
    // Checked here too, so an absurd depth never sizes a mapping; the kVP applies the same rules.
    if (attr->sq_depth > lim.max_qp_wr || attr->rq_depth > lim.max_qp_wr || attr->sq_sge > lim.max_sge ||
        attr->rq_sge > lim.max_sge || attr->max_inline > lim.max_inline) {
        return RI_ERANGE;
    }
    const bool use_srq = (attr->flags & RI_QP_USE_SRQ) != 0;
    if (use_srq != (srq != nullptr)) return RI_EINVAL;
    const uint32_t rq_sge = use_srq ? 0 : attr->rq_sge;
    const auto sq_slot = static_cast<uint32_t>(softrnic_sq_slot_size(attr->sq_sge, attr->max_inline));
    const auto rq_slot = static_cast<uint32_t>(softrnic_rq_slot_size(rq_sge));
    auto qp = std::make_unique<Qp>();
    qp->pd = this;
    qp->srq = srq;
    auto req = hdr_init<softrnic_create_qp_req>();
    const size_t sq_bytes = static_cast<size_t>(attr->sq_depth) * sq_slot;
    const size_t rq_offset = (sq_bytes + 63) & ~size_t{63};
    const size_t rq_bytes = use_srq ? 0 : static_cast<size_t>(attr->rq_depth) * rq_slot;
    if (sq_bytes + rq_bytes > 0) {
        qp->memory = datapath::RingMemory(rnic->rings, rq_offset + rq_bytes);
        if (!qp->memory.ok()) return RI_ENOMEM;
    }
    if (sq_bytes > 0) {
        qp->sq_ring = qp->memory.data();
        req.sq = softrnic_ring{qp->memory.address(), sq_bytes};
    }
    if (rq_bytes > 0) {
        qp->rq_ring = qp->memory.data() + rq_offset;
        req.rq = softrnic_ring{qp->memory.address() + rq_offset, rq_bytes};
    }
    softrnic_create_qp_resp resp{};
    ri_qp_init_attr_t provided{};
    if (host().log != nullptr) host().log(RI_LOG_DEBUG, "softrnic-uvp", "create_qp: ri_syscall RI_CREATE_QP, rings in the private data");
    Call c(RI_CREATE_QP, handle);
    c.param(*attr).result(&provided).priv(req, &resp).ref(0, scq->handle).ref(1, rcq->handle);
    if (srq != nullptr) c.ref(2, srq->handle);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    qp->bind(rnic->host_ctx, c.handle());
    if (!priv_ok(c, resp) || c.result_len() < sizeof provided || provided.sq_depth != attr->sq_depth ||
        provided.rq_depth != attr->rq_depth) {
        (void)Call(RI_DESTROY_QP, qp->handle).run(rnic->host_ctx);
        return RI_EPROTO;  // the rings are sized for what was asked
    }
    qp->qp_num = resp.qp_num;
    qp->init = provided;
    if (!use_srq) qp->rq.init(qp->rq_ring, provided.rq_depth, provided.rq_sge);
    datapath::QpSetup setup;
    setup.qp_num = qp->qp_num;
    setup.pd = id;
    setup.init = provided;
    setup.tunables = rnic->tunables;
    setup.frames = rnic->frames;
    qp->dp = std::make_unique<datapath::QueuePair>(setup, qp->sq_ring, use_srq ? srq->rq : qp->rq, use_srq,
                                                   *scq->dp, *rcq->dp, rnic->stags, *qp);
    qp->dp->set_counters(rnic->counter_slot(resp.counter_slot));
    *attr = provided;
    *out = to_handle<ri_qp_t>(qp.release());
    return RI_OK;
}

ri_status_t Uvp::Qp::destroy() {
    std::unique_lock g(report_mutex);
    destroying = true;
    if (ri_status_t rc = forward_destroy(RI_DESTROY_QP); rc != RI_OK) {
        destroying = false;
        return rc;
    }
    // The adapter deletes the QP once this returns (and `g` has unlocked), which stops the stream: no report is
    // made after that.
    return RI_OK;
}

ri_status_t Uvp::Qp::query(ri_qp_attr_t *out) {
    if (out == nullptr) return RI_EINVAL;
    Call c(RI_QUERY_QP, handle);
    c.result(out);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    // The stream lives here: its parameters (with the socket) are ours. The data path learns first that a stream
    // failed or closed; the kVP learns first that the kAL saw the connection break, so its ERROR wins.
    ri_llp_params_t llp;
    if (dp->llp(llp)) {
        out->llp = llp;
        out->ird = llp.ird;
        out->ord = llp.ord;
    }
    const uint32_t local = dp->state();
    if (out->state != RI_QPS_ERROR && local != RI_QPS_IDLE) out->state = local;
    return RI_OK;
}

ri_status_t Uvp::Qp::kvp_modify(const ri_qp_attr_t &in, uint32_t mask, bool wait) {
    struct {
        ri_syscall_modify_t m;
        ri_qp_attr_t a;
    } param{{mask, 0}, in};
    static_assert(sizeof param == sizeof(ri_syscall_modify_t) + sizeof(ri_qp_attr_t));
    Call c(RI_MODIFY_QP, handle);
    c.param(&param, sizeof param);
    return wait ? c.run(pd->rnic->host_ctx) : c.post(pd->rnic->host_ctx);
}

ri_status_t Uvp::Qp::modify(const ri_qp_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    constexpr uint32_t kTransition = RI_QP_ATTR_STATE | RI_QP_ATTR_LLP;
    if ((mask & kTransition) == kTransition && in->state == RI_QPS_RTS && in->llp.fd >= 0) {
        // The consumer's half of the RDMA-mode transition: the kAL has moved the kVP's QP to RTS and handed the
        // socket over; the stream starts here, with no system call. The socket is ours from now on.
        if (mask != kTransition) {
            ::close(in->llp.fd);
            return RI_EINVAL;
        }
        return dp->attach(in->llp.fd, in->llp);
    }
    // Every other change goes to the kVP's state machine first; the data path follows what it accepted. A move
    // to ERROR alone is posted, not waited for: every state may move to ERROR, so the kVP's answer could only be
    // that the kAL is gone (which post() reports too), and the kAL runs this process's requests in order, so a
    // later query, destroy or reconnect sees the QP in ERROR. It is the uAL's step when the kAL reports that a
    // connection ended (once on every connection), and an abortive disconnect's: neither waits a round trip now.
    const bool to_error = mask == RI_QP_ATTR_STATE && in->state == RI_QPS_ERROR;
    ri_status_t rc = RI_OK;
    if (to_error) {
        std::lock_guard g(report_mutex);
        if (!kvp_told_error) rc = kvp_modify(*in, mask, false);
        kvp_told_error = rc == RI_OK;
    } else {
        rc = kvp_modify(*in, mask);
        if (rc == RI_OK && (mask & RI_QP_ATTR_STATE) != 0) {
            std::lock_guard g(report_mutex);
            kvp_told_error = false;  // the kVP's QP is in the state asked for now, not ERROR
        }
    }
    if ((mask & RI_QP_ATTR_STATE) == 0) return rc;
    if (rc == RI_EINVAL && (in->state == RI_QPS_CLOSING || in->state == RI_QPS_TERMINATE) && dp->attached()) {
        // A stream the kVP never saw attached (it says IDLE: the RDMA-mode transition was made here alone, as a
        // consumer that connects its own sockets does) closes or terminates here alone.
        ri_qp_attr_t a{};
        Call c(RI_QUERY_QP, handle);
        c.result(&a);
        if (c.run(pd->rnic->host_ctx) == RI_OK && a.state == RI_QPS_IDLE) rc = RI_OK;
    }
    // A kAL that is gone took the kVP's QP with it: the data path still flushes what was posted.
    if (rc == RI_ENODEV && in->state == RI_QPS_ERROR) dp->change_state(RI_QPS_ERROR);
    if (rc != RI_OK) return rc;
    iwarp::TermCode term = iwarp::term::kRdmapLocalCatastrophic;
    if ((mask & RI_QP_ATTR_TERM) != 0) {
        term = iwarp::TermCode{static_cast<uint8_t>(in->term_layer_etype >> 4),
                               static_cast<uint8_t>(in->term_layer_etype & 0xf),
                               static_cast<uint8_t>(in->term_ecode)};
    }
    dp->change_state(in->state, term);
    return RI_OK;
}

void Uvp::Qp::async_event(const ri_async_event_t &event) noexcept { pd->rnic->raise(event); }

void Uvp::Qp::entered_error() noexcept {
    // The stream failed here: the kVP's QP follows. RI_ENODEV (the kAL is gone) and a refusal change nothing, so
    // the report is posted, not waited for: the progress thread (which meets the peer's FIN at every connection's
    // end) would otherwise sleep out a round trip through krdmad with the stream's work behind it. The kAL runs
    // this process's requests in order, so a later query or destroy sees the QP in ERROR.
    ri_qp_attr_t a{};
    a.state = RI_QPS_ERROR;
    std::lock_guard g(report_mutex);
    if (!destroying && !kvp_told_error) kvp_told_error = kvp_modify(a, RI_QP_ATTR_STATE, false) == RI_OK;
}

ri_status_t Uvp::Qp::check_memory_op(const ri_send_wr_t &w, softrnic_bind_op *bind,
                                     softrnic_fast_reg_op *fast_reg) noexcept {
    if (w.opcode != RI_WR_BIND_MW) {
        const Mr *mr = from_handle<Mr>(w.u.fast_reg.mr);
        if (ri_status_t rc = datapath::check_memory_op(w, static_cast<const Mw *>(nullptr), mr); rc != RI_OK) return rc;
        softrnic_fast_reg_op op{};
        return datapath::fast_reg_op(w, mr->keys.lkey, mr->pd->id, fast_reg != nullptr ? *fast_reg : op);
    }
    const Mw *mw = from_handle<Mw>(w.u.bind.mw);
    const Mr *mr = from_handle<Mr>(w.u.bind.mr);
    if (ri_status_t rc = datapath::check_memory_op(w, mw, mr); rc != RI_OK) return rc;
    if (bind != nullptr) *bind = datapath::bind_op(w, mw->stag, mw->pd->id, mr != nullptr ? mr->keys.lkey : 0);
    return RI_OK;
}

ri_status_t Uvp::Pd::create_srq(ri_srq_attr_t *attr, ri_srq_t *out) {
    if (attr == nullptr) return RI_EINVAL;
    if (attr->max_wr > rnic->attr.max_srq_wr || attr->max_sge > rnic->attr.max_srq_sge) return RI_ERANGE;
    const auto slot = static_cast<uint32_t>(softrnic_rq_slot_size(attr->max_sge));
    auto srq = std::make_unique<Srq>();
    srq->pd = this;
    auto req = hdr_init<softrnic_create_srq_req>();
    if (attr->max_wr > 0) {
        srq->memory = Mapping(static_cast<size_t>(attr->max_wr) * slot);
        if (!srq->memory.ok()) return RI_ENOMEM;
        req.ring = softrnic_ring{srq->memory.address(), srq->memory.size()};
    }
    softrnic_create_srq_resp resp{};
    ri_srq_attr_t provided{};
    Call c(RI_CREATE_SRQ, handle);
    c.param(*attr).result(&provided).priv(req, &resp);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    srq->bind(rnic->host_ctx, c.handle());
    if (!priv_ok(c, resp) || provided.max_wr != attr->max_wr) {
        (void)Call(RI_DESTROY_SRQ, srq->handle).run(rnic->host_ctx);
        return RI_EPROTO;
    }
    srq->id = resp.srq_id;
    srq->attr = provided;
    srq->rq.init(srq->memory.data(), provided.max_wr, provided.max_sge);
    srq->rq.id = srq->id;
    srq->rq.context = provided.context;
    srq->rq.set_limit(provided.limit);
    *attr = provided;
    *out = to_handle<ri_srq_t>(srq.release());
    return RI_OK;
}

ri_status_t Uvp::Srq::destroy() { return forward_destroy(RI_DESTROY_SRQ); }

ri_status_t Uvp::Srq::query(ri_srq_attr_t *out) {
    Call c(RI_QUERY_SRQ, handle);
    c.result(out);
    return c.run(pd->rnic->host_ctx);
}

ri_status_t Uvp::Srq::modify(const ri_srq_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    if (ri_status_t rc = forward_modify(RI_MODIFY_SRQ, *in, mask); rc != RI_OK) return rc;
    if ((mask & RI_SRQ_ATTR_LIMIT) != 0) {
        attr.limit = in->limit;
        rq.set_limit(in->limit);  // armed for the data path's limit event
    }
    return RI_OK;
}

ri_status_t Uvp::Srq::post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
    return datapath::post_receives(rq, wr, count, attr.max_sge, pd->rnic->stags, pd->id, posted);
}

ri_status_t Uvp::Pd::register_mr(const ri_mr_reg_t *reg, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (reg == nullptr || keys == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    Call c(RI_REGISTER_MR, handle);
    c.param(*reg).result(&mr->keys);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mr->bind(rnic->host_ctx, c.handle());
    mr->addr = reg->addr;
    mr->length = reg->length;
    mr->iova = reg->iova;
    mr->access = reg->access;
    *keys = mr->keys;
    mr->publish();
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::alloc_stag(uint32_t max_pages, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (keys == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    Call c(RI_ALLOC_STAG, handle);
    c.param(max_pages).result(&mr->keys);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mr->bind(rnic->host_ctx, c.handle());
    mr->max_pages = max_pages;
    rnic->stags.add_allocated(mr->keys.lkey, id, max_pages);  // the data path maps it at fast registration
    *keys = mr->keys;
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::alloc_mw(uint32_t type, ri_mw_t *out, ri_stag_t *rkey) {
    if (rkey == nullptr) return RI_EINVAL;
    auto mw = std::make_unique<Mw>();
    mw->pd = this;
    mw->type = type;
    Call c(RI_ALLOC_MW, handle);
    c.param(type).result(&mw->stag);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mw->bind(rnic->host_ctx, c.handle());
    *rkey = mw->stag;
    *out = to_handle<ri_mw_t>(mw.release());
    return RI_OK;
}

ri_status_t Uvp::Mr::register_shared(ri_pd_t pd_h, uint64_t new_iova, uint32_t new_access, ri_mr_t *out,
                                      ri_mr_keys_t *keys_out) {
    Pd *to = from_handle<Pd>(pd_h);
    if (to == nullptr || keys_out == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = to;
    ri_mr_reg_t reg{addr, length, new_iova, new_access, 0};
    Call c(RI_REGISTER_SHARED_MR, handle);
    c.param(reg).result(&mr->keys).ref(0, to->handle);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    mr->bind(pd->rnic->host_ctx, c.handle());
    mr->addr = addr;
    mr->length = length;
    mr->iova = new_iova;
    mr->access = new_access;
    *keys_out = mr->keys;
    mr->publish();
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Uvp::Mr::reregister(uint32_t mask, ri_pd_t pd_h, const ri_mr_reg_t *reg, ri_mr_keys_t *keys_out) {
    if (reg == nullptr || keys_out == nullptr) return RI_EINVAL;
    Pd *to = from_handle<Pd>(pd_h);
    struct {
        ri_syscall_modify_t m;
        ri_mr_reg_t r;
    } param{{mask, 0}, *reg};
    ri_mr_keys_t fresh{};
    Call c(RI_REREGISTER_MR, handle);
    c.param(&param, sizeof param).result(&fresh);
    if (to != nullptr) c.ref(0, to->handle);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    pd->rnic->stags.remove(keys.lkey);
    keys = fresh;
    if ((mask & RI_REREG_TRANSLATION) != 0) {
        addr = reg->addr;
        length = reg->length;
        iova = reg->iova;
    }
    if ((mask & RI_REREG_ACCESS) != 0) access = reg->access;
    // Without a new translation the kVP recomputes the offset base from the access (zero-based or not).
    if ((mask & RI_REREG_TRANSLATION) == 0) iova = (access & RI_ACCESS_ZERO_BASED) != 0 ? 0 : addr;
    publish();  // valid again, under the new STag
    *keys_out = keys;
    return RI_OK;
}

}  // namespace
}  // namespace softrnic::uvp

RI_PROVIDER_MODULE(softrnic::uvp::Uvp)
