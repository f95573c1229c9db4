// The softrnic uVP: the consumer-side half of the software RNIC, loaded by the uAL into the consumer's process.
// Every privileged verb goes to the kVP through the host's ri_syscall upcall, naming objects by the kAL's handles;
// the uVP maps its own queue rings at create and names them to the kVP in the private data (softrnic_abi.h). The
// fast path (post, poll, notify) runs on those rings here, with no system call. Until the iWARP engine runs on a
// QP's stream (issue 5) the observable data-path behaviour is the flush: a QP moved to ERROR completes every
// posted work request with RI_WC_WR_FLUSH_ERR, and a request posted to a QP in ERROR completes at once.
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "event_handlers.hpp"
#include "ring.hpp"
#include "rnicpi/cpp/provider.hpp"
#include "softrnic_abi.h"

namespace softrnic::uvp {
namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Uvp;
const ri_host_ops_t &host() { return rdma::provider::Module<Uvp>::host(); }

static_assert(sizeof(ri_send_wr_t::u) == sizeof(softrnic_sq_wqe::op), "the send ring slot holds the WR's union");

// One ri_syscall, built field by field.
class Call {
public:
    Call(uint32_t op, uint64_t object) {
        c_.size = sizeof c_;
        c_.op = op;
        c_.object = object;
    }
    template <class T>
    Call &param(const T &p) {
        c_.param = &p;
        c_.param_len = sizeof p;
        return *this;
    }
    Call &param(const void *p, uint32_t len) {
        c_.param = p;
        c_.param_len = len;
        return *this;
    }
    template <class T>
    Call &result(T *r) {
        c_.result = r;
        c_.result_cap = sizeof *r;
        return *this;
    }
    template <class In, class Out>
    Call &priv(const In &in, Out *out) {
        c_.priv_in = &in;
        c_.priv_in_len = sizeof in;
        c_.priv_out = out;
        c_.priv_out_cap = sizeof *out;
        return *this;
    }
    Call &ref(size_t i, uint64_t h) {
        c_.refs[i] = h;
        return *this;
    }
    [[nodiscard]] ri_status_t run(void *host_ctx) {
        if (host().syscall == nullptr) return RI_EOPNOTSUPP;  // a host without the uAL's upcall
        return host().syscall(host_ctx, &c_);
    }
    [[nodiscard]] uint64_t handle() const noexcept { return c_.handle_out; }
    [[nodiscard]] uint32_t result_len() const noexcept { return c_.result_len; }
    [[nodiscard]] uint32_t priv_len() const noexcept { return c_.priv_out_len; }

private:
    ri_syscall_t c_{};
};

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

// A destroy verb released the kAL's object: it did, or the kAL is gone and took every object of ours with it (as
// a verbs library lets a consumer destroy what a removed device held).
bool released(ri_status_t rc) { return rc == RI_OK || rc == RI_ENODEV; }

ri_wc_opcode_t wc_opcode_of(uint32_t wr_opcode) {
    switch (wr_opcode) {
        case RI_WR_RDMA_WRITE: return RI_WC_RDMA_WRITE;
        case RI_WR_RDMA_READ:
        case RI_WR_RDMA_READ_INV: return RI_WC_RDMA_READ;
        case RI_WR_BIND_MW: return RI_WC_BIND_MW;
        case RI_WR_FAST_REG: return RI_WC_FAST_REG;
        case RI_WR_LOCAL_INV: return RI_WC_LOCAL_INV;
        case RI_WR_ATOMIC_FETCH_ADD:
        case RI_WR_ATOMIC_CMP_SWAP: return RI_WC_ATOMIC;
        default: return RI_WC_SEND;
    }
}

struct Uvp {
    static constexpr ri_mode_t mode = RI_MODE_NONPRIVILEGED;
    static constexpr uint32_t flags = RI_MODULE_SOFTWARE;
    static constexpr const char *name = SOFTRNIC_PROVIDER_NAME;
    static constexpr const char *vendor = SOFTRNIC_VENDOR;
    static constexpr const char *version = SOFTRNIC_VERSION;

    struct Pd;
    struct Cq;
    struct Mr;

    struct Rnic {
        void *host_ctx = nullptr;
        uint64_t handle = 0;
        ri_rnic_attr_t attr{};  // limits, cached at open for the fast path's checks
        std::mutex mutex;
        softrnic::EventHandlers handlers;
        // The local STag table for the data path: every live region and window of this open by STag.
        std::shared_mutex stag_mutex;
        std::unordered_map<ri_stag_t, void *> stags;

        ri_status_t close() {
            if (ri_status_t rc = Call(RI_CLOSE_RNIC, handle).run(host_ctx); !released(rc)) return rc;
            delete this;
            return RI_OK;
        }
        ri_status_t query(ri_rnic_attr_t *out) {
            Call c(RI_QUERY_RNIC, handle);
            c.result(out);
            return c.run(host_ctx);
        }
        // Event handlers live in this process: completions of this process's rings are noticed here.
        ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) { return handlers.set_aeh(fn, ctx, id); }
        ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) { return handlers.set_ceh(fn, ctx, id); }
        ri_status_t clear_handler(uint32_t id) { return handlers.clear(id); }
        void add_stag(ri_stag_t stag, void *object) {
            std::unique_lock lock(stag_mutex);
            stags[stag] = object;
        }
        void remove_stag(ri_stag_t stag) {
            std::unique_lock lock(stag_mutex);
            stags.erase(stag);
        }
        ri_status_t alloc_pd(ri_pd_t *pd);
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq);
    };

    struct Cq {
        Rnic *rnic = nullptr;
        uint64_t handle = 0;
        ri_cq_attr_t attr{};
        Mapping memory;
        SpinLock lock;
        SlotRing ring;
        uint32_t armed = 0;     // 0 or the ::ri_cq_notify type requested
        bool overflow = false;  // a completion was lost: the CQ is in error

        // Adds a completion; returns true when the CEH must be called (after the caller drops its locks).
        bool add(const ri_wc_t &wc) {
            std::lock_guard g(lock);
            if (ring.full()) {
                overflow = true;
                return false;
            }
            std::memcpy(ring.next(), &wc, sizeof wc);
            ring.push();
            const bool fire = armed == RI_CQ_NOTIFY_NEXT ||
                              (armed == RI_CQ_NOTIFY_SOLICITED &&
                               ((wc.flags & RI_WC_SOLICITED) != 0 || wc.status != RI_WC_SUCCESS));
            if (fire) armed = 0;
            return fire;
        }
        void notify() {
            softrnic::EventHandlers::Ceh h = rnic->handlers.ceh(attr.ceh_id);
            if (h.fn != nullptr) h.fn(h.ctx, to_handle<ri_rnic_t>(rnic), to_handle<ri_cq_t>(this));
        }

        ri_status_t destroy() {
            if (ri_status_t rc = Call(RI_DESTROY_CQ, handle).run(rnic->host_ctx); !released(rc)) return rc;
            delete this;
            return RI_OK;
        }
        ri_status_t query(ri_cq_attr_t *out) {
            Call c(RI_QUERY_CQ, handle);
            c.result(out);
            return c.run(rnic->host_ctx);
        }
        // The ring is mapped once at create; no RESIZE_CQ capability.
        ri_status_t resize(uint32_t, uint32_t *) { return RI_EOPNOTSUPP; }
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) {
            if (polled == nullptr || (wc == nullptr && max > 0)) return RI_EINVAL;
            std::lock_guard g(lock);
            uint32_t n = 0;
            while (n < max && !ring.empty()) {
                std::memcpy(&wc[n++], ring.front(), sizeof(ri_wc_t));
                ring.pop();
            }
            *polled = n;
            // Once the consumer has everything that fitted, it learns that completions were lost.
            return n == 0 && overflow ? RI_EOVERFLOW : RI_OK;
        }
        ri_status_t request_notify(uint32_t type) {
            if (type != RI_CQ_NOTIFY_NEXT && type != RI_CQ_NOTIFY_SOLICITED) return RI_EINVAL;
            std::lock_guard g(lock);
            // A solicited request does not weaken an armed "next".
            if (armed != RI_CQ_NOTIFY_NEXT) armed = type;
            return RI_OK;
        }
    };

    struct Srq {
        Pd *pd = nullptr;
        uint64_t handle = 0;
        uint32_t id = 0;
        Mapping memory;
        SpinLock lock;
        SlotRing ring;
        ri_srq_attr_t attr{};

        ri_status_t destroy();
        ri_status_t query(ri_srq_attr_t *out);
        ri_status_t modify(const ri_srq_attr_t *in, uint32_t mask);
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);
    };

    struct Qp {
        Pd *pd = nullptr;
        uint64_t handle = 0;
        uint32_t qp_num = 0;
        Cq *scq = nullptr;
        Cq *rcq = nullptr;
        Srq *srq = nullptr;
        ri_qp_init_attr_t init{};
        Mapping sq_memory;
        Mapping rq_memory;
        SpinLock sq_lock;  // order: sq_lock, then rq_lock, then a CQ's lock
        SpinLock rq_lock;
        SlotRing sq;
        SlotRing rq;
        uint32_t state = RI_QPS_IDLE;  // changed under both queue locks

        ri_status_t destroy();
        ri_status_t query(ri_qp_attr_t *out);
        ri_status_t modify(const ri_qp_attr_t *in, uint32_t mask);
        ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted);
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted);
        // Type 1 window binds need the data path's STag checks on a stream (issue 5).
        ri_status_t bind_mw(ri_mw_t, ri_mr_t, uint64_t, uint64_t, uint32_t, ri_stag_t *) { return RI_EOPNOTSUPP; }

        ri_wc_t flush_wc(uint64_t wr_id, ri_wc_opcode_t opcode) const {
            ri_wc_t wc{};
            wc.wr_id = wr_id;
            wc.qp_context = init.context;
            wc.status = RI_WC_WR_FLUSH_ERR;
            wc.opcode = opcode;
            wc.qp_num = qp_num;
            return wc;
        }
        // Completes every queued request with a flush error (the QP entered ERROR).
        void flush(bool &notify_s, bool &notify_r);
    };

    struct Pd {
        Rnic *rnic = nullptr;
        uint64_t handle = 0;

        ri_status_t dealloc() {
            if (ri_status_t rc = Call(RI_DEALLOC_PD, handle).run(rnic->host_ctx); !released(rc)) return rc;
            delete this;
            return RI_OK;
        }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *qp);
        ri_status_t create_srq(ri_srq_attr_t *attr, ri_srq_t *srq);
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_stag(uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_mw(uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    };

    struct Mr {
        Pd *pd = nullptr;
        uint64_t handle = 0;
        ri_mr_keys_t keys{};
        uint64_t addr = 0;
        uint64_t length = 0;
        uint32_t max_pages = 0;

        ri_status_t deregister() {
            if (ri_status_t rc = Call(RI_DEREGISTER_MR, handle).run(pd->rnic->host_ctx); !released(rc)) return rc;
            pd->rnic->remove_stag(keys.lkey);
            delete this;
            return RI_OK;
        }
        ri_status_t query(ri_mr_attr_t *out) {
            Call c(RI_QUERY_MR, handle);
            c.result(out);
            return c.run(pd->rnic->host_ctx);
        }
        ri_status_t register_shared(ri_pd_t pd, uint64_t iova, uint32_t access, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t reregister(uint32_t mask, ri_pd_t pd, const ri_mr_reg_t *reg, ri_mr_keys_t *keys);
    };

    struct Mw {
        Pd *pd = nullptr;
        uint64_t handle = 0;
        uint32_t type = RI_MW_TYPE_1;
        ri_stag_t stag = 0;
        ri_status_t dealloc() {
            if (ri_status_t rc = Call(RI_DEALLOC_MW, handle).run(pd->rnic->host_ctx); !released(rc)) return rc;
            pd->rnic->remove_stag(stag);
            delete this;
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
    Call c(RI_OPEN_RNIC, 0);
    c.param(p).priv(req, &resp);
    if (ri_status_t rc = c.run(r->host_ctx); rc != RI_OK) return rc;
    r->handle = c.handle();
    ri_status_t rc = priv_ok(c, resp) ? RI_OK : RI_EPROTO;  // a kVP of another softrnic release
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
    pd->handle = c.handle();
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
    cq->handle = c.handle();
    if (!priv_ok(c, resp) || resp.cqe < want->cqe) {
        (void)Call(RI_DESTROY_CQ, cq->handle).run(host_ctx);
        return RI_EPROTO;
    }
    cq->attr = *want;
    cq->ring = SlotRing(cq->memory.data(), want->cqe, static_cast<uint32_t>(softrnic_cq_slot_size()));
    *out = to_handle<ri_cq_t>(cq.release());
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
    const uint32_t rq_sge = use_srq ? 0 : attr->rq_sge;
    const auto sq_slot = static_cast<uint32_t>(softrnic_sq_slot_size(attr->sq_sge, attr->max_inline));
    const auto rq_slot = static_cast<uint32_t>(softrnic_rq_slot_size(rq_sge));
    auto qp = std::make_unique<Qp>();
    qp->pd = this;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->srq = srq;
    auto req = hdr_init<softrnic_create_qp_req>();
    if (attr->sq_depth > 0) {
        qp->sq_memory = Mapping(static_cast<size_t>(attr->sq_depth) * sq_slot);
        if (!qp->sq_memory.ok()) return RI_ENOMEM;
        req.sq = softrnic_ring{qp->sq_memory.address(), qp->sq_memory.size()};
    }
    if (attr->rq_depth > 0 && !use_srq) {
        qp->rq_memory = Mapping(static_cast<size_t>(attr->rq_depth) * rq_slot);
        if (!qp->rq_memory.ok()) return RI_ENOMEM;
        req.rq = softrnic_ring{qp->rq_memory.address(), qp->rq_memory.size()};
    }
    softrnic_create_qp_resp resp{};
    ri_qp_init_attr_t provided{};
    if (host().log != nullptr) host().log(RI_LOG_DEBUG, "softrnic-uvp", "create_qp: ri_syscall RI_CREATE_QP, rings in the private data");
    Call c(RI_CREATE_QP, handle);
    c.param(*attr).result(&provided).priv(req, &resp).ref(0, scq->handle).ref(1, rcq->handle);
    if (srq != nullptr) c.ref(2, srq->handle);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    qp->handle = c.handle();
    if (!priv_ok(c, resp) || c.result_len() < sizeof provided || provided.sq_depth != attr->sq_depth ||
        provided.rq_depth != attr->rq_depth) {
        (void)Call(RI_DESTROY_QP, qp->handle).run(rnic->host_ctx);
        return RI_EPROTO;  // the rings are sized for what was asked
    }
    qp->qp_num = resp.qp_num;
    qp->init = provided;
    qp->sq = SlotRing(qp->sq_memory.data(), provided.sq_depth, sq_slot);
    if (!use_srq) qp->rq = SlotRing(qp->rq_memory.data(), provided.rq_depth, rq_slot);
    *attr = provided;
    *out = to_handle<ri_qp_t>(qp.release());
    return RI_OK;
}

ri_status_t Uvp::Qp::destroy() {
    if (ri_status_t rc = Call(RI_DESTROY_QP, handle).run(pd->rnic->host_ctx); !released(rc)) return rc;
    delete this;
    return RI_OK;
}

ri_status_t Uvp::Qp::query(ri_qp_attr_t *out) {
    Call c(RI_QUERY_QP, handle);
    c.result(out);
    return c.run(pd->rnic->host_ctx);
}

void Uvp::Qp::flush(bool &notify_s, bool &notify_r) {
    while (!sq.empty()) {
        softrnic_sq_wqe w;
        std::memcpy(&w, sq.front(), sizeof w);
        sq.pop();
        notify_s |= scq->add(flush_wc(w.wr_id, wc_opcode_of(w.opcode)));
    }
    // Receives posted to an SRQ belong to the SRQ and stay there.
    while (srq == nullptr && !rq.empty()) {
        softrnic_rq_wqe w;
        std::memcpy(&w, rq.front(), sizeof w);
        rq.pop();
        notify_r |= rcq->add(flush_wc(w.wr_id, RI_WC_RECV));
    }
}

ri_status_t Uvp::Qp::modify(const ri_qp_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    // The kVP owns the state machine; the local state follows what it accepted.
    struct {
        ri_syscall_modify_t m;
        ri_qp_attr_t a;
    } param{{mask, 0}, *in};
    static_assert(sizeof param == sizeof(ri_syscall_modify_t) + sizeof(ri_qp_attr_t));
    Call c(RI_MODIFY_QP, handle);
    c.param(&param, sizeof param);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    if ((mask & RI_QP_ATTR_STATE) == 0) return RI_OK;
    bool notify_s = false, notify_r = false;
    {
        std::lock_guard s(sq_lock);
        std::lock_guard r(rq_lock);
        state = in->state;
        if (state == RI_QPS_ERROR) flush(notify_s, notify_r);
    }
    if (notify_s) scq->notify();
    if (notify_r && !(rcq == scq && notify_s)) rcq->notify();  // one call per CQ
    return RI_OK;
}

ri_status_t Uvp::Qp::post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (wr == nullptr && count > 0) return RI_EINVAL;
    constexpr uint32_t kFlags = RI_SEND_SIGNALED | RI_SEND_READ_FENCE | RI_SEND_LOCAL_FENCE | RI_SEND_INLINE;
    ri_status_t rc = RI_OK;
    bool notify = false;
    {
        std::lock_guard g(sq_lock);
        for (uint32_t i = 0; i < count; ++i) {
            const ri_send_wr_t &w = wr[i];
            if ((w.flags & ~kFlags) != 0 || (w.num_sge > 0 && w.sgl == nullptr)) {
                rc = RI_EINVAL;
                break;
            }
            uint32_t sge_limit = init.sq_sge;
            bool may_inline = false;
            switch (w.opcode) {
                case RI_WR_SEND:
                case RI_WR_SEND_SE:
                case RI_WR_SEND_INV:
                case RI_WR_SEND_SE_INV:
                case RI_WR_RDMA_WRITE: may_inline = true; break;
                case RI_WR_RDMA_READ: sge_limit = init.rd_sge; break;
                case RI_WR_BIND_MW: {
                    auto *mw = from_handle<Mw>(w.u.bind.mw);
                    // Type 2 windows bind by work request; type 1 windows by the bind verb.
                    if (mw == nullptr || w.u.bind.mr == nullptr || mw->type != RI_MW_TYPE_2) rc = RI_EINVAL;
                    sge_limit = 0;
                    break;
                }
                case RI_WR_FAST_REG: {
                    auto *mr = from_handle<Mr>(w.u.fast_reg.mr);
                    if (mr == nullptr || mr->max_pages == 0 || (w.u.fast_reg.num_pages > 0 && w.u.fast_reg.pages == nullptr)) {
                        rc = RI_EINVAL;
                    } else if (w.u.fast_reg.num_pages > mr->max_pages) {
                        rc = RI_ERANGE;
                    }
                    sge_limit = 0;
                    break;
                }
                case RI_WR_LOCAL_INV: sge_limit = 0; break;
                case RI_WR_RDMA_READ_INV:  // an InfiniBand extension softrnic does not offer
                case RI_WR_ATOMIC_FETCH_ADD:
                case RI_WR_ATOMIC_CMP_SWAP: rc = RI_EOPNOTSUPP; break;
                default: rc = RI_EINVAL; break;
            }
            if (rc != RI_OK) break;
            const bool inl = (w.flags & RI_SEND_INLINE) != 0;
            if (inl && !may_inline) {
                rc = RI_EINVAL;
                break;
            }
            if (w.num_sge > sge_limit) {
                rc = RI_ERANGE;
                break;
            }
            uint64_t inline_len = 0;
            if (inl) {
                for (uint32_t s = 0; s < w.num_sge; ++s) inline_len += w.sgl[s].length;
                if (inline_len > init.max_inline) {
                    rc = RI_ERANGE;
                    break;
                }
            }
            if (state == RI_QPS_ERROR) {
                // RDMAC verbs: a request posted to a QP in ERROR completes at once, flushed.
                notify |= scq->add(flush_wc(w.wr_id, wc_opcode_of(w.opcode)));
                ++*posted;
                continue;
            }
            if (sq.full()) {
                rc = RI_EAGAIN;
                break;
            }
            uint8_t *slot = sq.next();
            softrnic_sq_wqe h{};
            h.wr_id = w.wr_id;
            h.opcode = w.opcode;
            h.flags = w.flags | ((init.flags & RI_QP_SIGNAL_ALL) != 0 ? uint32_t{RI_SEND_SIGNALED} : 0u);
            h.num_sge = inl ? 0 : w.num_sge;
            h.inline_len = static_cast<uint32_t>(inline_len);
            h.inv_stag = w.inv_stag;
            std::memcpy(h.op, &w.u, sizeof h.op);
            std::memcpy(slot, &h, sizeof h);
            uint8_t *p = slot + sizeof h;
            if (inl) {
                // Inline payload is copied now: the consumer may reuse its buffer when post returns.
                uint8_t *data = p + static_cast<size_t>(init.sq_sge) * sizeof(ri_sge_t);
                for (uint32_t s = 0; s < w.num_sge; ++s) {
                    std::memcpy(data, reinterpret_cast<const void *>(static_cast<uintptr_t>(w.sgl[s].addr)),
                                w.sgl[s].length);
                    data += w.sgl[s].length;
                }
            } else if (w.num_sge > 0) {
                std::memcpy(p, w.sgl, w.num_sge * sizeof(ri_sge_t));
            }
            sq.push();
            ++*posted;
        }
    }
    if (notify) scq->notify();
    return rc;
}

// Queues receive requests on @p ring (a QP's or an SRQ's), or completes them at once, flushed, for @p flush_qp in
// ERROR.
ri_status_t post_receives(SlotRing &ring, uint32_t sge_limit, const ri_recv_wr_t *wr, uint32_t count,
                          uint32_t *posted, const Uvp::Qp *flush_qp, bool &notify) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (wr == nullptr && count > 0) return RI_EINVAL;
    for (uint32_t i = 0; i < count; ++i) {
        const ri_recv_wr_t &w = wr[i];
        if (w.num_sge > 0 && w.sgl == nullptr) return RI_EINVAL;
        if (w.num_sge > sge_limit) return RI_ERANGE;
        if (flush_qp != nullptr) {
            notify |= flush_qp->rcq->add(flush_qp->flush_wc(w.wr_id, RI_WC_RECV));
            ++*posted;
            continue;
        }
        if (ring.full()) return RI_EAGAIN;
        softrnic_rq_wqe h{};
        h.wr_id = w.wr_id;
        h.num_sge = w.num_sge;
        uint8_t *slot = ring.next();
        std::memcpy(slot, &h, sizeof h);
        if (w.num_sge > 0) std::memcpy(slot + sizeof h, w.sgl, w.num_sge * sizeof(ri_sge_t));
        ring.push();
        ++*posted;
    }
    return RI_OK;
}

ri_status_t Uvp::Qp::post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
    if (srq != nullptr) {
        if (posted != nullptr) *posted = 0;
        return RI_EINVAL;  // receives of this QP come from its SRQ
    }
    bool notify = false;
    ri_status_t rc;
    {
        std::lock_guard g(rq_lock);
        rc = post_receives(rq, init.rq_sge, wr, count, posted, state == RI_QPS_ERROR ? this : static_cast<const Qp *>(nullptr), notify);
    }
    if (notify) rcq->notify();
    return rc;
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
    srq->handle = c.handle();
    if (!priv_ok(c, resp) || provided.max_wr != attr->max_wr) {
        (void)Call(RI_DESTROY_SRQ, srq->handle).run(rnic->host_ctx);
        return RI_EPROTO;
    }
    srq->id = resp.srq_id;
    srq->attr = provided;
    srq->ring = SlotRing(srq->memory.data(), provided.max_wr, slot);
    *attr = provided;
    *out = to_handle<ri_srq_t>(srq.release());
    return RI_OK;
}

ri_status_t Uvp::Srq::destroy() {
    if (ri_status_t rc = Call(RI_DESTROY_SRQ, handle).run(pd->rnic->host_ctx); !released(rc)) return rc;
    delete this;
    return RI_OK;
}

ri_status_t Uvp::Srq::query(ri_srq_attr_t *out) {
    Call c(RI_QUERY_SRQ, handle);
    c.result(out);
    return c.run(pd->rnic->host_ctx);
}

ri_status_t Uvp::Srq::modify(const ri_srq_attr_t *in, uint32_t mask) {
    if (in == nullptr) return RI_EINVAL;
    struct {
        ri_syscall_modify_t m;
        ri_srq_attr_t a;
    } param{{mask, 0}, *in};
    Call c(RI_MODIFY_SRQ, handle);
    c.param(&param, sizeof param);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    std::lock_guard g(lock);
    if ((mask & RI_SRQ_ATTR_LIMIT) != 0) attr.limit = in->limit;  // armed for the data path's limit event
    return RI_OK;
}

ri_status_t Uvp::Srq::post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
    bool notify = false;
    std::lock_guard g(lock);
    return post_receives(ring, attr.max_sge, wr, count, posted, nullptr, notify);
}

ri_status_t Uvp::Pd::register_mr(const ri_mr_reg_t *reg, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (reg == nullptr || keys == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    Call c(RI_REGISTER_MR, handle);
    c.param(*reg).result(&mr->keys);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mr->handle = c.handle();
    mr->addr = reg->addr;
    mr->length = reg->length;
    *keys = mr->keys;
    rnic->add_stag(mr->keys.lkey, mr.get());
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
    mr->handle = c.handle();
    mr->max_pages = max_pages;
    *keys = mr->keys;
    rnic->add_stag(mr->keys.lkey, mr.get());
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
    mw->handle = c.handle();
    *rkey = mw->stag;
    rnic->add_stag(mw->stag, mw.get());
    *out = to_handle<ri_mw_t>(mw.release());
    return RI_OK;
}

ri_status_t Uvp::Mr::register_shared(ri_pd_t pd_h, uint64_t iova, uint32_t access, ri_mr_t *out,
                                      ri_mr_keys_t *keys_out) {
    Pd *to = from_handle<Pd>(pd_h);
    if (to == nullptr || keys_out == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = to;
    ri_mr_reg_t reg{addr, length, iova, access, 0};
    Call c(RI_REGISTER_SHARED_MR, handle);
    c.param(reg).result(&mr->keys).ref(0, to->handle);
    if (ri_status_t rc = c.run(pd->rnic->host_ctx); rc != RI_OK) return rc;
    mr->handle = c.handle();
    mr->addr = addr;
    mr->length = length;
    *keys_out = mr->keys;
    to->rnic->add_stag(mr->keys.lkey, mr.get());
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
    pd->rnic->remove_stag(keys.lkey);
    keys = fresh;
    if ((mask & RI_REREG_TRANSLATION) != 0) {
        addr = reg->addr;
        length = reg->length;
    }
    pd->rnic->add_stag(keys.lkey, this);
    *keys_out = keys;
    return RI_OK;
}

}  // namespace
}  // namespace softrnic::uvp

RI_PROVIDER_MODULE(softrnic::uvp::Uvp)
