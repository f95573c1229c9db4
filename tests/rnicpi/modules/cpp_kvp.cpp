// A kVP written as a C++ class through rnicpi/cpp/provider.hpp: proves the adapter builds a valid C module, that
// absent methods become "not supported", and that exceptions never cross the ABI.
#include <sys/eventfd.h>

#include <cstring>
#include <new>
#include <stdexcept>

#include "rnicpi/cpp/provider.hpp"

namespace {

using rdma::provider::to_handle;

struct CppKvp {
    static constexpr ri_mode_t mode = RI_MODE_PRIVILEGED;
    static constexpr uint32_t flags = RI_MODULE_SOFTWARE;
    static constexpr const char *name = "cppkvp";
    static constexpr const char *vendor = "OpenRDMA tests";
    static constexpr const char *version = "2.0-test";
    static constexpr const char *uvp_library = "test_good_uvp.so";

    // Like a real kVP, a region pins its memory through the host's ri_vm_pin_range upcall when the host offers
    // one (the kAL does; the loader tests' host does not).
    static const ri_host_ops_t &host() { return rdma::provider::Module<CppKvp>::host(); }

    struct Rnic;
    struct Mr {
        void *host_ctx = nullptr;
        uint64_t pin_id = 0;
        ri_status_t deregister() {
            if (pin_id != 0) (void)host().vm_unpin_range(host_ctx, pin_id);
            return RI_OK;
        }
    };
    struct Cq {
        uint32_t depth = 0;
        ri_status_t destroy() { return RI_OK; }
        ri_status_t poll(uint32_t, ri_wc_t *, uint32_t *polled) {
            *polled = 0;
            return RI_OK;
        }
        ri_status_t request_notify(uint32_t type) {
            return type == RI_CQ_NOTIFY_NEXT || type == RI_CQ_NOTIFY_SOLICITED ? RI_OK : RI_EINVAL;
        }
        // Simulates an allocation failure deep inside the provider.
        ri_status_t resize(uint32_t, uint32_t *) { throw std::bad_alloc(); }
        // Simulates a provider bug that throws something else.
        ri_status_t query(ri_cq_attr_t *) { throw std::logic_error("bug"); }
    };
    struct Qp {
        ri_qp_state_t state = RI_QPS_IDLE;
        Rnic *rnic = nullptr;
        ri_cq_t send_cq = nullptr;
        uint64_t context = 0;
        uint32_t qp_num = 0;
        void *host_ctx = nullptr;
        uint64_t queue_pin = 0;  // queue memory pinned at create (ABI 1.1 path)
        ri_status_t destroy() {
            if (queue_pin != 0) (void)host().vm_unpin_range(host_ctx, queue_pin);
            return RI_OK;
        }
        ri_status_t query(ri_qp_attr_t *attr) {
            std::memset(attr, 0, sizeof *attr);
            attr->state = state;
            attr->qp_num = qp_num;
            return RI_OK;
        }
        // Moving to ERROR raises what a real RNIC would: a fatal async event and a completion notification (the
        // flushed work requests).
        ri_status_t modify(const ri_qp_attr_t *attr, uint32_t mask);
        ri_status_t post_send(const ri_send_wr_t *, uint32_t count, uint32_t *posted) {
            *posted = count;
            return RI_OK;
        }
        ri_status_t post_recv(const ri_recv_wr_t *, uint32_t count, uint32_t *posted) {
            *posted = count;
            return RI_OK;
        }
    };
    struct Pd {
        void *host_ctx = nullptr;
        Rnic *rnic = nullptr;
        ri_status_t dealloc() { return RI_OK; }
        ri_status_t create_qp(ri_cq_t scq, ri_cq_t, ri_srq_t, ri_qp_init_attr_t *attr, ri_qp_t *qp) {
            *qp = to_handle<ri_qp_t>(make_qp(scq, attr));
            return RI_OK;
        }
        Qp *make_qp(ri_cq_t scq, const ri_qp_init_attr_t *attr) {
            static uint32_t next_qp_num = 1;
            auto *q = new Qp;
            q->rnic = rnic;
            q->send_cq = scq;
            q->context = attr->context;
            q->qp_num = next_qp_num++;
            q->host_ctx = host_ctx;
            return q;
        }
        ri_status_t register_mr(const ri_mr_reg_t *reg, ri_mr_t *mr, ri_mr_keys_t *keys) {
            if (reg->length == 0) return RI_EINVAL;
            auto *m = new Mr;
            m->host_ctx = host_ctx;
            if (host_ctx != nullptr && host().vm_pin_range != nullptr) {
                ri_pin_t pin{};
                uint32_t flags = (reg->access & (RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE)) != 0 ? RI_PIN_WRITE : 0;
                if (ri_status_t rc = host().vm_pin_range(host_ctx, reg->addr, reg->length, flags, &pin); rc != RI_OK) {
                    delete m;
                    return rc;
                }
                m->pin_id = pin.pin_id;
            }
            *mr = to_handle<ri_mr_t>(m);
            keys->lkey = keys->rkey = 0x1234;
            return RI_OK;
        }
    };
    struct Rnic {
        void *host_ctx = nullptr;
        ri_aeh_fn aeh = nullptr;
        void *aeh_ctx = nullptr;
        ri_ceh_fn ceh = nullptr;
        void *ceh_ctx = nullptr;
        ri_status_t close() { return RI_OK; }
        ri_status_t query(ri_rnic_attr_t *attr) {
            std::memset(attr, 0, sizeof *attr);
            std::strcpy(attr->name, "cppkvp0");
            attr->max_qp = 64;
            return RI_OK;
        }
        ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) {
            aeh = fn;
            aeh_ctx = ctx;
            *id = 1;
            return RI_OK;
        }
        ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) {
            ceh = fn;
            ceh_ctx = ctx;
            *id = 2;
            return RI_OK;
        }
        ri_status_t alloc_pd(ri_pd_t *pd) {
            auto *p = new Pd;
            p->host_ctx = host_ctx;
            p->rnic = this;
            *pd = to_handle<ri_pd_t>(p);
            return RI_OK;
        }
        ri_status_t create_cq(ri_cq_attr_t *attr, ri_cq_t *cq) {
            auto *c = new Cq;
            c->depth = attr->cqe;
            *cq = to_handle<ri_cq_t>(c);
            return RI_OK;
        }
    };
    using Srq = rdma::provider::Unsupported;
    using Mw = rdma::provider::Unsupported;

    struct Instance {};

    static ri_status_t open_rnic(const ri_rnic_open_params_t *params, ri_rnic_t *rnic) {
        if (params == nullptr || params->instance == nullptr) return RI_EINVAL;
        auto *r = new Rnic;
        r->host_ctx = params->host_ctx;
        *rnic = to_handle<ri_rnic_t>(r);
        return RI_OK;
    }
    // ABI 1.1: the whole request of a uVP. Create QP takes the queue memory to pin from the private data (as in
    // OpenRDMA Figure 4) and answers with private data and a descriptor; every other op is left to the plain verb.
    struct QueueMemory {
        uint64_t addr;
        uint64_t length;
    };
    struct QpReply {
        uint32_t qp_num;
        uint32_t magic;
    };
    static constexpr uint32_t kReplyMagic = 0x6b767031;  // "kvp1"
    static ri_status_t syscall(ri_kvp_syscall_t *k) {
        ri_syscall_t *call = k->call;
        if (call->op != RI_CREATE_QP || call->priv_in_len == 0) return RI_ENOSYS;
        if (call->priv_in_len != sizeof(QueueMemory) || call->param_len != sizeof(ri_qp_init_attr_t)) return RI_EINVAL;
        if (call->priv_out_cap < sizeof(QpReply) || call->nfds_out_cap < 1) return RI_EOVERFLOW;
        QueueMemory mem;
        std::memcpy(&mem, call->priv_in, sizeof mem);
        ri_qp_init_attr_t attr;
        std::memcpy(&attr, call->param, sizeof attr);
        auto *pd = rdma::provider::from_handle<Pd>(k->object);
        Qp *q = pd->make_qp(static_cast<ri_cq_t>(k->refs[0]), &attr);
        ri_pin_t pin{};
        if (ri_status_t rc = host().vm_pin_range(pd->host_ctx, mem.addr, mem.length, RI_PIN_WRITE, &pin); rc != RI_OK) {
            delete q;
            return rc;
        }
        q->queue_pin = pin.pin_id;
        int fd = ::eventfd(0, EFD_CLOEXEC);
        if (fd < 0) {
            (void)q->destroy();
            delete q;  // not yet handed to the kAL: the adapter never saw it
            return RI_ENOMEM;
        }
        QpReply reply{q->qp_num, kReplyMagic};
        std::memcpy(call->priv_out, &reply, sizeof reply);
        call->priv_out_len = sizeof reply;
        call->fds_out[0] = fd;
        call->nfds_out = 1;
        std::memcpy(call->result, &attr, sizeof attr);
        call->result_len = sizeof attr;
        k->created = to_handle<ri_qp_t>(q);
        return RI_OK;
    }

    static ri_status_t attach(const ri_attach_params_t *, ri_instance_t *instance) {
        *instance = to_handle<ri_instance_t>(new Instance);
        return RI_OK;
    }
    static ri_status_t detach(ri_instance_t instance) {
        delete rdma::provider::from_handle<Instance>(instance);
        return RI_OK;
    }
    static ri_status_t init(const ri_host_ops_t &host) {
        if (host.log != nullptr) host.log(RI_LOG_INFO, name, "init");
        return RI_OK;
    }
    static void fini() {
        const ri_host_ops_t &host = rdma::provider::Module<CppKvp>::host();
        if (host.log != nullptr) host.log(RI_LOG_INFO, name, "fini");
    }
};

ri_status_t CppKvp::Qp::modify(const ri_qp_attr_t *attr, uint32_t mask) {
    if ((mask & RI_QP_ATTR_STATE) == 0) return RI_OK;
    if (attr->state > RI_QPS_ERROR) return RI_EINVAL;  // from a client: checked before it becomes an enum
    state = static_cast<ri_qp_state_t>(attr->state);
    if (state == RI_QPS_ERROR) {
        if (rnic->aeh != nullptr) {
            ri_async_event_t e{RI_RES_QP, RI_AE_QP_FATAL, qp_num, context, 0, 0};
            rnic->aeh(rnic->aeh_ctx, to_handle<ri_rnic_t>(rnic), &e);
        }
        if (rnic->ceh != nullptr && send_cq != nullptr) rnic->ceh(rnic->ceh_ctx, to_handle<ri_rnic_t>(rnic), send_cq);
    }
    return RI_OK;
}

}  // namespace

RI_PROVIDER_MODULE(CppKvp)
