// The hwstub uVP: the consumer-side shim of the emulated offload RNIC, as small as a hardware RNIC's user library.
// Privileged verbs go to the kVP through the host's ri_syscall upcall; the kVP answers with descriptors of the
// queue memory it made (hwstub_abi.h), which this library maps. The fast path is format WQE, ring the doorbell,
// poll CQE (common/host_queues.hpp): no protocol code, no socket, no thread. Completion notifications and
// asynchronous events arrive through the kAL (the adapter's interrupts), so this library sets no handler of its own
// beyond learning the kAL's completion event handler identifier for its CQs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>

#include "host_queues.hpp"
#include "hwstub_abi.h"
#include "rnicpi/cpp/provider.hpp"
#include "rnicpi/cpp/syscall_request.hpp"

namespace hwstub::uvp {
namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

struct Uvp;

using Call = rdma::provider::SyscallRequest<Uvp>;
using Forwarded = rdma::provider::Forwarded<Uvp>;

template <class T>
T hdr_init() {
    T t{};
    t.hdr.version = HWSTUB_ABI_VERSION;
    t.hdr.size = sizeof(T);
    return t;
}

template <class T>
bool priv_ok(const Call &c, const T &reply) {
    return c.priv_len() >= sizeof(T) && (reply.hdr.version >> 16) == HWSTUB_HW_MAJOR;
}

// Whether the Create or Resize CQ reply @p r of call @p c describes CQ memory this uVP can map and read, of at least
// @p want CQEs: a descriptor, a power-of-two depth, the ring after the control block and inside the mapping.
template <class Resp>
bool cq_memory_ok(const Call &c, const Resp &r, uint32_t want) {
    return priv_ok(c, r) && c.nfds_out() >= 1 && r.depth >= want && (r.depth & (r.depth - 1)) == 0 &&
           r.ring_offset >= sizeof(hwstub_cq_ctrl) &&
           static_cast<uint64_t>(r.ring_offset) + uint64_t{r.depth} * sizeof(hwstub_cqe) <= r.map_size;
}

// A shared mapping of memory the kVP made; the descriptor is closed once mapped.
class Mapping {
public:
    Mapping() = default;
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() {
        if (base_ != nullptr) ::munmap(base_, size_);
    }
    [[nodiscard]] bool map(int fd, size_t size) {
        void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED) return false;
        base_ = static_cast<uint8_t *>(p);
        size_ = size;
        return true;
    }
    [[nodiscard]] uint8_t *data() const noexcept { return base_; }
    // Exchanges the mappings (a resized CQ's new memory takes the old one's place).
    void swap(Mapping &o) noexcept {
        std::swap(base_, o.base_);
        std::swap(size_, o.size_);
    }

private:
    uint8_t *base_ = nullptr;
    size_t size_ = 0;
};

void close_all(const int32_t *fds, uint32_t n, uint32_t from = 0) {
    for (uint32_t i = from; i < n; ++i) ::close(fds[i]);
}

struct Uvp {
    static constexpr ri_mode_t mode = RI_MODE_NONPRIVILEGED;
    static constexpr const char *name = HWSTUB_PROVIDER_NAME;
    static constexpr const char *vendor = HWSTUB_VENDOR;
    static constexpr const char *version = "1.0";

    struct Srq;
    struct Mw;
    struct Pd;
    struct Cq;
    struct Qp;
    struct Mr;

    struct Rnic : Forwarded {
        ri_rnic_attr_t attr{};
        Mapping page;
        int doorbell = -1;
        std::unique_ptr<QpContexts> contexts;
        ~Rnic() {
            if (doorbell >= 0) ::close(doorbell);
        }
        [[nodiscard]] Doorbell bell() const {
            return Doorbell(reinterpret_cast<hwstub_engine_page *>(page.data()), doorbell);
        }
        ri_status_t close() { return forward_destroy(RI_CLOSE_RNIC); }
        ri_status_t query(ri_rnic_attr_t *out) { return forward_query(RI_QUERY_RNIC, out); }
        // Events are the adapter's interrupts, which reach the consumer through the kAL: the identifiers are the
        // kAL's handlers on the kVP.
        ri_status_t set_aeh(ri_aeh_fn, void *, uint32_t *id) {
            Call c(RI_SET_AEH, handle);
            c.result(id);
            return c.run(host_ctx);
        }
        ri_status_t set_ceh(ri_ceh_fn, void *, uint32_t *id) {
            Call c(RI_SET_CEH, handle);
            c.result(id);
            return c.run(host_ctx);
        }
        ri_status_t clear_handler(uint32_t) { return RI_OK; }
        ri_status_t alloc_pd(ri_pd_t *pd);
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq);
    };

    struct Pd : Forwarded {
        Rnic *rnic = nullptr;
        ri_status_t dealloc() { return forward_destroy(RI_DEALLOC_PD); }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t rcq, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *qp);
        ri_status_t create_srq(ri_srq_attr_t *attr, ri_srq_t *srq);
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_stag(uint32_t max_pages, ri_mr_t *mr, ri_mr_keys_t *keys);
        ri_status_t alloc_mw(uint32_t type, ri_mw_t *mw, ri_stag_t *rkey);
    };

    // A shared receive queue: posted to here, read by the adapter (no doorbell, hwstub_hw.h).
    struct Srq : Forwarded {
        Pd *pd = nullptr;
        Mapping memory;
        std::unique_ptr<HostSrq> queue;
        ri_status_t destroy() { return forward_destroy(RI_DESTROY_SRQ); }
        ri_status_t query(ri_srq_attr_t *out) { return forward_query(RI_QUERY_SRQ, out); }
        ri_status_t modify(const ri_srq_attr_t *in, uint32_t mask) {
            return in == nullptr ? RI_EINVAL : forward_modify(RI_MODIFY_SRQ, *in, mask);
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            return queue->post_recv(wr, count, posted);
        }
    };

    struct Cq : Forwarded {
        Rnic *rnic = nullptr;
        Mapping memory;
        std::unique_ptr<HostCq> queue;
        ri_status_t destroy() { return forward_destroy(RI_DESTROY_CQ); }
        ri_status_t query(ri_cq_attr_t *out) { return forward_query(RI_QUERY_CQ, out); }
        ri_status_t resize(uint32_t cqe, uint32_t *actual);
        ri_status_t poll(uint32_t max, ri_wc_t *wc, uint32_t *polled) { return queue->poll(max, wc, polled); }
        ri_status_t request_notify(uint32_t type) { return queue->request_notify(type); }
    };

    struct Qp : Forwarded {
        Pd *pd = nullptr;
        uint32_t qp_num = 0;
        Mapping memory;
        std::unique_ptr<HostQp> queues;
        ri_status_t destroy() { return forward_destroy(RI_DESTROY_QP); }
        ri_status_t query(ri_qp_attr_t *out) { return forward_query(RI_QUERY_QP, out); }
        ri_status_t modify(const ri_qp_attr_t *in, uint32_t mask) {
            if (in == nullptr) return RI_EINVAL;
            constexpr uint32_t kTransition = RI_QP_ATTR_STATE | RI_QP_ATTR_LLP;
            if ((mask & kTransition) == kTransition && in->state == RI_QPS_RTS) {
                // The consumer's half of the RDMA-mode transition: the adapter already runs the stream; a socket
                // offered here is not ours to keep.
                if (in->llp.fd >= 0) ::close(in->llp.fd);
                if (mask != kTransition) return RI_EINVAL;
                queues->set_peer_rfc7306((in->llp.mpa_flags & RI_MPA_RFC7306) != 0);
                return RI_OK;
            }
            return forward_modify(RI_MODIFY_QP, *in, mask);
        }
        ri_status_t post_send(const ri_send_wr_t *wr, uint32_t count, uint32_t *posted) {
            return queues->post_send(wr, count, posted);
        }
        ri_status_t post_recv(const ri_recv_wr_t *wr, uint32_t count, uint32_t *posted) {
            return queues->post_recv(wr, count, posted);
        }
    };

    struct Mr : Forwarded {
        Pd *pd = nullptr;
        ri_stag_t stag = 0;  // the adapter's STag of the region, lkey and rkey alike (a window bind names it)
        uint32_t max_pages = 0;  // allocated for fast registration: pages it may map
        ri_status_t deregister() { return forward_destroy(RI_DEREGISTER_MR); }
        ri_status_t query(ri_mr_attr_t *out) { return forward_query(RI_QUERY_MR, out); }
    };

    // A memory window: its STag is the adapter's; it is bound by a Bind MW on a send queue (type 2 only).
    struct Mw : Forwarded {
        Pd *pd = nullptr;
        uint32_t type = RI_MW_TYPE_2;
        ri_stag_t stag = 0;
        ri_status_t dealloc() { return forward_destroy(RI_DEALLOC_MW); }
    };

    // A Bind MW's handles, as the adapter's STags (HostQp formats the WQE with them).
    static bool resolve_bind(void *ctx, const ri_send_wr_t &wr, BindStags &out) {
        if (wr.opcode == RI_WR_FAST_REG) return fast_reg_stags(static_cast<const Qp *>(ctx)->pd, from_handle<Mr>(wr.u.fast_reg.mr), out);
        return bind_stags(static_cast<const Qp *>(ctx)->pd, from_handle<Mw>(wr.u.bind.mw),
                          from_handle<Mr>(wr.u.bind.mr), out);
    }

    static ri_status_t open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *out);
};

ri_status_t Uvp::open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *out) {
    if (params == nullptr || out == nullptr || params->host_ctx == nullptr) return RI_EINVAL;
    auto r = std::make_unique<Rnic>();
    r->host_ctx = params->host_ctx;
    ri_rnic_open_params_t p = *params;
    p.host_ctx = nullptr;  // the kAL fills in its own, and the owner's pid
    p.instance = nullptr;
    p.owner_pid = 0;
    auto req = hdr_init<hwstub_open_req>();
    hwstub_open_resp resp{};
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_OPEN_RNIC, 0);
    c.param(p).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    if (ri_status_t rc = c.run(r->host_ctx); rc != RI_OK) return rc;
    r->bind(r->host_ctx, c.handle());
    ri_status_t rc = RI_OK;
    if (!priv_ok(c, resp) || c.nfds_out() < 2 || resp.page_size < sizeof(hwstub_engine_page)) {
        close_all(fds, c.nfds_out());
        rc = RI_EPROTO;  // a kVP of another hwstub release
    } else {
        r->doorbell = fds[1];
        close_all(fds, c.nfds_out(), 2);
        if (!r->page.map(fds[0], resp.page_size)) rc = RI_ENOMEM;
        r->contexts = std::make_unique<QpContexts>(resp.max_qp);
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
    *out = to_handle<ri_pd_t>(pd);
    return RI_OK;
}

ri_status_t Uvp::Rnic::create_cq(ri_cq_attr_t *want, ri_cq_t *out) {
    if (want == nullptr || out == nullptr) return RI_EINVAL;
    auto cq = std::make_unique<Cq>();
    cq->rnic = this;
    auto req = hdr_init<hwstub_create_cq_req>();
    hwstub_create_cq_resp resp{};
    ri_cq_attr_t provided{};
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_CREATE_CQ, handle);
    c.param(*want).result(&provided).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    if (ri_status_t rc = c.run(host_ctx); rc != RI_OK) return rc;
    cq->bind(host_ctx, c.handle());
    const bool ok = cq_memory_ok(c, resp, want->cqe);
    if (!ok || !cq->memory.map(fds[0], resp.map_size)) {
        close_all(fds, c.nfds_out(), ok ? 1 : 0);
        (void)Call(RI_DESTROY_CQ, cq->handle).run(host_ctx);
        return ok ? RI_ENOMEM : RI_EPROTO;
    }
    close_all(fds, c.nfds_out(), 1);
    cq->queue = std::make_unique<HostCq>(reinterpret_cast<hwstub_cqe *>(cq->memory.data() + resp.ring_offset),
                                         resp.depth, reinterpret_cast<hwstub_cq_ctrl *>(cq->memory.data()),
                                         *contexts);
    want->cqe = resp.depth;
    *out = to_handle<ri_cq_t>(cq.release());
    return RI_OK;
}

ri_status_t Uvp::Cq::resize(uint32_t cqe, uint32_t *actual) {
    if (actual == nullptr || cqe == 0) return RI_EINVAL;
    // No poll or arm of this CQ while the adapter moves it to the new memory (it copies what is not consumed).
    auto hold = queue->hold();
    auto req = hdr_init<hwstub_resize_cq_req>();
    hwstub_resize_cq_resp resp{};
    uint32_t provided = 0;
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_RESIZE_CQ, handle);
    c.param(cqe).result(&provided).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    const bool ok = cq_memory_ok(c, resp, cqe) && provided == resp.depth;
    Mapping fresh;
    if (!ok || !fresh.map(fds[0], resp.map_size)) {
        // The adapter writes to memory this process cannot read: the CQ is lost to it.
        close_all(fds, c.nfds_out(), ok ? 1 : 0);
        return ok ? RI_ENOMEM : RI_EPROTO;
    }
    close_all(fds, c.nfds_out(), 1);
    queue->switch_to(reinterpret_cast<hwstub_cqe *>(fresh.data() + resp.ring_offset), resp.depth,
                     reinterpret_cast<hwstub_cq_ctrl *>(fresh.data()));
    memory.swap(fresh);  // the old memory is unmapped with `fresh`
    *actual = resp.depth;
    return RI_OK;
}

ri_status_t Uvp::Pd::create_qp(ri_cq_t scq_h, ri_cq_t rcq_h, ri_srq_t srq, ri_qp_init_attr_t *attr, ri_qp_t *out) {
    Cq *scq = from_handle<Cq>(scq_h);
    Cq *rcq = from_handle<Cq>(rcq_h);
    const Srq *shared = from_handle<Srq>(srq);
    if (scq == nullptr || rcq == nullptr || attr == nullptr || out == nullptr) return RI_EINVAL;
    if (((attr->flags & RI_QP_USE_SRQ) != 0) != (shared != nullptr)) return RI_EINVAL;
    auto qp = std::make_unique<Qp>();
    qp->pd = this;
    auto req = hdr_init<hwstub_create_qp_req>();
    hwstub_create_qp_resp resp{};
    ri_qp_init_attr_t provided{};
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_CREATE_QP, handle);
    c.param(*attr).result(&provided).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    c.ref(0, scq->handle).ref(1, rcq->handle);
    if (shared != nullptr) c.ref(2, shared->handle);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    qp->bind(rnic->host_ctx, c.handle());
    auto ring_ok = [&](uint32_t off, uint32_t depth, uint32_t slot) {
        return depth != 0 && (depth & (depth - 1)) == 0 && slot >= 16 && (slot & (slot - 1)) == 0 &&
               static_cast<uint64_t>(off) + uint64_t{depth} * slot <= resp.map_size;
    };
    const bool ok = priv_ok(c, resp) && c.nfds_out() >= 1 && c.result_len() >= sizeof provided &&
                    ring_ok(resp.sq_offset, resp.sq_depth, resp.sq_slot) &&
                    ring_ok(resp.rq_offset, resp.rq_depth, resp.rq_slot) &&
                    resp.rq_ctrl_offset + sizeof(hwstub_wq_ctrl) <= resp.sq_offset;
    if (!ok || !qp->memory.map(fds[0], resp.map_size)) {
        close_all(fds, c.nfds_out(), ok ? 1 : 0);
        (void)Call(RI_DESTROY_QP, qp->handle).run(rnic->host_ctx);
        return ok ? RI_ENOMEM : RI_EPROTO;
    }
    close_all(fds, c.nfds_out(), 1);
    uint8_t *m = qp->memory.data();
    qp->qp_num = resp.qp_num;
    qp->queues = std::make_unique<HostQp>(
        RingGeometry{m + resp.sq_offset, resp.sq_depth, resp.sq_slot}, reinterpret_cast<hwstub_wq_ctrl *>(m),
        RingGeometry{m + resp.rq_offset, resp.rq_depth, resp.rq_slot},
        reinterpret_cast<hwstub_wq_ctrl *>(m + resp.rq_ctrl_offset), rnic->bell(), provided.max_inline,
        provided.sq_sge, provided.rq_sge);
    qp->queues->set_bind_resolver(&resolve_bind, qp.get());
    if (shared != nullptr) qp->queues->set_uses_srq();
    rnic->contexts->set(resp.qp_num, provided.context);
    *attr = provided;
    *out = to_handle<ri_qp_t>(qp.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::create_srq(ri_srq_attr_t *want, ri_srq_t *out) {
    if (want == nullptr || out == nullptr) return RI_EINVAL;
    auto srq = std::make_unique<Srq>();
    srq->pd = this;
    auto req = hdr_init<hwstub_create_srq_req>();
    hwstub_create_srq_resp resp{};
    ri_srq_attr_t provided{};
    int32_t fds[RI_SYSCALL_MAX_FDS];
    Call c(RI_CREATE_SRQ, handle);
    c.param(*want).result(&provided).priv(req, &resp).fds_out(fds, RI_SYSCALL_MAX_FDS);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    srq->bind(rnic->host_ctx, c.handle());
    const bool ok = priv_ok(c, resp) && c.nfds_out() >= 1 && c.result_len() >= sizeof provided &&
                    resp.depth >= want->max_wr && (resp.depth & (resp.depth - 1)) == 0 &&
                    resp.slot >= hwstub_rq_slot_size(provided.max_sge) && (resp.slot & (resp.slot - 1)) == 0 &&
                    resp.ring_offset >= sizeof(hwstub_wq_ctrl) &&
                    static_cast<uint64_t>(resp.ring_offset) + uint64_t{resp.depth} * resp.slot <= resp.map_size;
    if (!ok || !srq->memory.map(fds[0], resp.map_size)) {
        close_all(fds, c.nfds_out(), ok ? 1 : 0);
        (void)Call(RI_DESTROY_SRQ, srq->handle).run(rnic->host_ctx);
        return ok ? RI_ENOMEM : RI_EPROTO;
    }
    close_all(fds, c.nfds_out(), 1);
    uint8_t *m = srq->memory.data();
    srq->queue = std::make_unique<HostSrq>(RingGeometry{m + resp.ring_offset, resp.depth, resp.slot},
                                           reinterpret_cast<hwstub_wq_ctrl *>(m), rnic->bell(), provided.max_sge);
    *want = provided;
    *out = to_handle<ri_srq_t>(srq.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::register_mr(const ri_mr_reg_t *reg, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (reg == nullptr || keys == nullptr || out == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    Call c(RI_REGISTER_MR, handle);
    c.param(*reg).result(keys);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mr->bind(rnic->host_ctx, c.handle());
    mr->stag = keys->lkey;
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::alloc_stag(uint32_t max_pages, ri_mr_t *out, ri_mr_keys_t *keys) {
    if (keys == nullptr || out == nullptr) return RI_EINVAL;
    auto mr = std::make_unique<Mr>();
    mr->pd = this;
    Call c(RI_ALLOC_STAG, handle);
    c.param(max_pages).result(keys);
    if (ri_status_t rc = c.run(rnic->host_ctx); rc != RI_OK) return rc;
    mr->bind(rnic->host_ctx, c.handle());
    mr->stag = keys->lkey;
    mr->max_pages = max_pages;
    *out = to_handle<ri_mr_t>(mr.release());
    return RI_OK;
}

ri_status_t Uvp::Pd::alloc_mw(uint32_t type, ri_mw_t *out, ri_stag_t *rkey) {
    if (out == nullptr || rkey == nullptr) return RI_EINVAL;
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

}  // namespace
}  // namespace hwstub::uvp

RI_PROVIDER_MODULE(hwstub::uvp::Uvp)
