// System call management for the verbs: decode a SYSCALL, check every handle against the caller's table, call the
// kVP, record what was created, reply.
#include "verb_commands.hpp"

#include <cstring>

#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "syscall";

// Resource wrappers: each releases its provider object when the table destroys it.
struct RnicOpen : Resource {
    RnicRef ref;
    const ri_verbs_ops_t *v = nullptr;
    ri_rnic_t rnic = nullptr;
    ~RnicOpen() override {
        if (rnic == nullptr) return;  // the kVP never opened it
        if (ri_status_t rc = v->close_rnic(rnic); rc != RI_OK) {
            RDMA_LOG_WARN(kComponent, "kVP failed to close an RNIC open: %s", std::strerror(rc));
        }
    }
};
struct PdRes : Resource {
    const ri_verbs_ops_t *v = nullptr;
    ri_pd_t pd = nullptr;
    ~PdRes() override {
        if (pd != nullptr) (void)v->dealloc_pd(pd);
    }
};
struct CqRes : Resource {
    const ri_verbs_ops_t *v = nullptr;
    ri_cq_t cq = nullptr;
    ~CqRes() override {
        if (cq != nullptr) (void)v->destroy_cq(cq);
    }
};

struct MrRes : Resource {
    const ri_verbs_ops_t *v = nullptr;
    ri_mr_t mr = nullptr;
    ~MrRes() override {
        if (mr != nullptr) (void)v->deregister_mr(mr);
    }
};

ri_status_t pin_range(void *host_ctx, uint64_t addr, uint64_t length, uint32_t, ri_pin_t *out) {
    if (host_ctx == nullptr || out == nullptr) return RI_EINVAL;
    auto *ctx = static_cast<Context *>(host_ctx);
    try {
        auto r = ctx->pins.pin(addr, length);
        if (!r) {
            RDMA_LOG_WARN(kComponent, "client %u: %s", ctx->peer.client_id, r.error().message().c_str());
            return r.error().code();
        }
        *out = ri_pin_t{r->pin_id, r->range.start, r->range.bytes(), 4096, 0};
        return RI_OK;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    }
}

ri_status_t unpin_range(void *host_ctx, uint64_t pin_id) {
    if (host_ctx == nullptr) return RI_EINVAL;
    try {
        auto r = static_cast<Context *>(host_ctx)->pins.unpin(pin_id);
        return r ? RI_OK : r.error().code();
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    }
}

const ri_host_ops_t kHostOps{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, &pin_range, &unpin_range,
                             nullptr};

struct QpRes : Resource {
    const ri_verbs_ops_t *v = nullptr;
    ri_qp_t qp = nullptr;
    ~QpRes() override {
        if (qp != nullptr) (void)v->destroy_qp(qp);
    }
};

// The provider object behind @p h if it is a live @p type of this table: one lookup, its error as the status.
template <class T>
rdma::Expected<T *> object_of(const ResourceTable &table, Handle h, ResourceType type) {
    auto r = table.get(h, type);
    if (!r) return r.error();
    return static_cast<T *>(*r);
}

template <class T>
bool read_param(const krdma_syscall &s, T &out) {
    if (s.param_len != sizeof(T)) return false;
    std::memcpy(&out, s.param, sizeof(T));
    return true;
}

template <class T>
void write_result(krdma_syscall &s, const T &v) {
    static_assert(sizeof(T) <= sizeof s.result);
    std::memcpy(s.result, &v, sizeof(T));
    s.result_len = sizeof(T);
}

}  // namespace

const ri_host_ops_t &kal_host_ops() noexcept { return kHostOps; }

VerbCommands::VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, PinBudget &budget,
                           uint64_t pin_limit)
    : server_(server), adapters_(adapters), quotas_(quotas), budget_(budget), pin_limit_(pin_limit) {
    server.on(KRDMA_CMD_SYSCALL, [this](Connection &c, const Request &req, Reply &rep) { return handle(c, req, rep); });
    server.on(KRDMA_CMD_LIST_CLIENTS, [this](Connection &, const Request &req, Reply &rep) {
        krdma_list_clients q;
        std::memcpy(&q, req.payload.data(), sizeof q);
        krdma_list_clients a{};
        a.index = q.index;
        std::lock_guard lock(mutex_);
        a.count = static_cast<uint32_t>(contexts_.size());
        if (q.index < contexts_.size()) {
            auto it = std::next(contexts_.begin(), static_cast<long>(q.index));
            const Context &ctx = *it->second;
            a.info.client_id = ctx.peer.client_id;
            a.info.pid = static_cast<uint32_t>(ctx.peer.pid);
            a.info.uid = ctx.peer.uid;
            a.info.total = ctx.table.total();
            for (size_t t = 0; t < kResourceTypes; ++t) a.info.counts[t] = ctx.table.count(static_cast<ResourceType>(t));
            a.info.pinned_bytes = ctx.pins.pinned_bytes();
        }
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
    server.on_disconnect([this](Connection &c) {
        std::unique_ptr<Context> gone;
        {
            std::lock_guard lock(mutex_);
            auto it = contexts_.find(c.peer().client_id);
            if (it == contexts_.end()) return;
            gone = std::move(it->second);
            contexts_.erase(it);
        }
        if (gone->table.total() > 0) {
            RDMA_LOG_INFO(kComponent, "client %u (pid %d) left %u object(s): destroying them", c.peer().client_id,
                          static_cast<int>(c.peer().pid), gone->table.total());
        }
        // The table's destructor tears everything down in dependency order.
    });
}

VerbCommands::~VerbCommands() {
    server_.off(KRDMA_CMD_SYSCALL);
    server_.off(KRDMA_CMD_LIST_CLIENTS);
    server_.on_disconnect(nullptr);
}

size_t VerbCommands::contexts() const {
    std::lock_guard lock(mutex_);
    return contexts_.size();
}

Context &VerbCommands::context_of(const Connection &c) {
    std::lock_guard lock(mutex_);
    auto &slot = contexts_[c.peer().client_id];
    if (!slot) slot = std::make_unique<Context>(c.peer(), quotas_, budget_, pin_limit_);
    return *slot;
}

int VerbCommands::handle(Connection &c, const Request &req, Reply &rep) {
    krdma_syscall s;
    std::memcpy(&s, req.payload.data(), sizeof s);
    if (s.param_len > sizeof s.param || s.priv_len > sizeof s.priv) return RI_EINVAL;
    Context &ctx = context_of(c);
    ResourceTable &table = ctx.table;
    s.result_len = 0;
    s.handle_out = 0;
    // The kPI verbs take no provider private data, so none is passed to the kVP and none comes back yet.
    s.priv_len = 0;
    int status = RI_OK;
    // Records a created object under @p parent and puts its handle in the reply.
    auto record = [&](ResourceType type, Handle parent, std::span<const Handle> refs,
                      std::unique_ptr<Resource> obj) -> int {
        auto h = table.add(type, parent, refs, std::move(obj));
        if (!h) return h.error().code();  // the object's destructor releases the provider object
        s.handle_out = *h;
        return RI_OK;
    };

    switch (s.op) {
        case RI_OPEN_RNIC: {
            ri_rnic_open_params_t p;
            if (!read_param(s, p)) return RI_EINVAL;
            if (strnlen(p.instance_name, sizeof p.instance_name) == sizeof p.instance_name) return RI_EINVAL;
            auto ref = adapters_.open(p.instance_name);
            if (!ref) return ref.error().code();
            auto obj = std::make_unique<RnicOpen>();
            obj->v = &ref->module()->verbs();
            p.instance = ref->instance();
            p.host_ctx = &ctx;
            status = obj->v->open_rnic(&p, &obj->rnic);
            if (status != RI_OK) return status;
            obj->ref = std::move(*ref);
            if (int e = record(ResourceType::rnic, 0, {}, std::move(obj)); e != RI_OK) return e;
            break;
        }
        case RI_QUERY_RNIC: {
            auto r = object_of<RnicOpen>(table, s.object, ResourceType::rnic);
            if (!r) return r.error().code();
            ri_rnic_attr_t attr{};
            status = (*r)->v->query_rnic((*r)->rnic, &attr);
            if (status == RI_OK) write_result(s, attr);
            break;
        }
        case RI_CLOSE_RNIC:
        case RI_DEALLOC_PD:
        case RI_DESTROY_CQ:
        case RI_DESTROY_QP:
        case RI_DEREGISTER_MR: {
            const ResourceType type = s.op == RI_CLOSE_RNIC   ? ResourceType::rnic
                                      : s.op == RI_DEALLOC_PD ? ResourceType::pd
                                      : s.op == RI_DESTROY_CQ ? ResourceType::cq
                                      : s.op == RI_DESTROY_QP ? ResourceType::qp
                                                              : ResourceType::mr;
            if (auto r = table.get(s.object, type); !r) return r.error().code();
            auto d = table.destroy(s.object);
            if (!d) return d.error().code();
            break;
        }
        case RI_ALLOC_PD: {
            auto r = object_of<RnicOpen>(table, s.object, ResourceType::rnic);
            if (!r) return r.error().code();
            auto obj = std::make_unique<PdRes>();
            obj->v = (*r)->v;
            status = (*r)->v->alloc_pd((*r)->rnic, &obj->pd);
            if (status != RI_OK) return status;
            if (int e = record(ResourceType::pd, s.object, {}, std::move(obj)); e != RI_OK) return e;
            break;
        }
        case RI_CREATE_CQ: {
            auto r = object_of<RnicOpen>(table, s.object, ResourceType::rnic);
            if (!r) return r.error().code();
            ri_cq_attr_t attr;
            if (!read_param(s, attr)) return RI_EINVAL;
            auto obj = std::make_unique<CqRes>();
            obj->v = (*r)->v;
            status = (*r)->v->create_cq((*r)->rnic, &attr, &obj->cq);
            if (status != RI_OK) return status;
            if (int e = record(ResourceType::cq, s.object, {}, std::move(obj)); e != RI_OK) return e;
            write_result(s, attr);
            break;
        }
        case RI_CREATE_QP: {
            // object: the PD; refs: send CQ, receive CQ, SRQ or 0.
            auto pd = object_of<PdRes>(table, s.object, ResourceType::pd);
            if (!pd) return pd.error().code();
            auto scq = object_of<CqRes>(table, s.refs[0], ResourceType::cq);
            if (!scq) return scq.error().code();
            auto rcq = object_of<CqRes>(table, s.refs[1], ResourceType::cq);
            if (!rcq) return rcq.error().code();
            if (s.refs[2] != 0) return RI_EOPNOTSUPP;  // SRQs are not served over the device yet
            ri_qp_init_attr_t attr;
            if (!read_param(s, attr)) return RI_EINVAL;
            auto obj = std::make_unique<QpRes>();
            obj->v = (*pd)->v;
            status = (*pd)->v->create_qp((*pd)->pd, (*scq)->cq, (*rcq)->cq, nullptr, &attr, &obj->qp);
            if (status != RI_OK) return status;
            // The QP holds its CQs: they cannot be destroyed before it.
            const Handle refs[] = {s.refs[0], s.refs[1]};
            if (int e = record(ResourceType::qp, s.object, refs, std::move(obj)); e != RI_OK) return e;
            write_result(s, attr);
            break;
        }
        case RI_REGISTER_MR: {
            auto pd = object_of<PdRes>(table, s.object, ResourceType::pd);
            if (!pd) return pd.error().code();
            ri_mr_reg_t reg;
            if (!read_param(s, reg)) return RI_EINVAL;
            auto obj = std::make_unique<MrRes>();
            obj->v = (*pd)->v;
            ri_mr_keys_t keys{};
            status = (*pd)->v->register_mr((*pd)->pd, &reg, &obj->mr, &keys);  // the kVP pins through kal_host_ops()
            if (status != RI_OK) return status;
            if (int e = record(ResourceType::mr, s.object, {}, std::move(obj)); e != RI_OK) return e;
            write_result(s, keys);
            break;
        }
        case RI_QUERY_QP: {
            auto qp = object_of<QpRes>(table, s.object, ResourceType::qp);
            if (!qp) return qp.error().code();
            ri_qp_attr_t attr{};
            status = (*qp)->v->query_qp((*qp)->qp, &attr);
            if (status == RI_OK) write_result(s, attr);
            break;
        }
        case RI_MODIFY_QP: {
            auto qp = object_of<QpRes>(table, s.object, ResourceType::qp);
            if (!qp) return qp.error().code();
            if (s.param_len != sizeof(ri_syscall_modify_t) + sizeof(ri_qp_attr_t)) return RI_EINVAL;
            ri_syscall_modify_t m;
            ri_qp_attr_t attr;
            std::memcpy(&m, s.param, sizeof m);
            std::memcpy(&attr, s.param + sizeof m, sizeof attr);
            if ((m.mask & RI_QP_ATTR_LLP) != 0) return RI_EOPNOTSUPP;  // the RDMA-mode transition is issue 5
            status = (*qp)->v->modify_qp((*qp)->qp, &attr, m.mask);
            break;
        }
        default:
            return RI_EOPNOTSUPP;  // not served over the device yet
    }
    std::memcpy(rep.payload.data(), &s, sizeof s);
    return status;
}

}  // namespace kal
