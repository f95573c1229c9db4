// A kVP written as a C++ class through rnicpi/cpp/provider.hpp: proves the adapter builds a valid C module, that
// absent methods become "not supported", and that exceptions never cross the ABI.
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

    struct Mr {
        void *host_ctx = nullptr;
        uint64_t pin_id = 0;
        ri_status_t deregister() {
            if (pin_id != 0) (void)host().vm_unpin_range(host_ctx, pin_id);
            delete this;
            return RI_OK;
        }
    };
    struct Cq {
        uint32_t depth = 0;
        ri_status_t destroy() {
            delete this;
            return RI_OK;
        }
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
        ri_status_t destroy() {
            delete this;
            return RI_OK;
        }
        ri_status_t query(ri_qp_attr_t *attr) {
            std::memset(attr, 0, sizeof *attr);
            attr->state = state;
            return RI_OK;
        }
        ri_status_t modify(const ri_qp_attr_t *attr, uint32_t mask) {
            if ((mask & RI_QP_ATTR_STATE) != 0) state = static_cast<ri_qp_state_t>(attr->state);
            return RI_OK;
        }
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
        ri_status_t dealloc() {
            delete this;
            return RI_OK;
        }
        ri_status_t create_qp(ri_cq_t, ri_cq_t, ri_srq_t, ri_qp_init_attr_t *, ri_qp_t *qp) {
            *qp = to_handle<ri_qp_t>(new Qp);
            return RI_OK;
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
        ri_status_t close() {
            delete this;
            return RI_OK;
        }
        ri_status_t query(ri_rnic_attr_t *attr) {
            std::memset(attr, 0, sizeof *attr);
            std::strcpy(attr->name, "cppkvp0");
            attr->max_qp = 64;
            return RI_OK;
        }
        ri_status_t set_aeh(ri_aeh_fn, void *, uint32_t *id) {
            *id = 1;
            return RI_OK;
        }
        ri_status_t set_ceh(ri_ceh_fn, void *, uint32_t *id) {
            *id = 2;
            return RI_OK;
        }
        ri_status_t alloc_pd(ri_pd_t *pd) {
            auto *p = new Pd;
            p->host_ctx = host_ctx;
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

}  // namespace

RI_PROVIDER_MODULE(CppKvp)
