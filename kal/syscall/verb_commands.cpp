// System call management for the verbs: decode a SYSCALL, check every handle against the caller's table, call the
// kVP (with the whole request when it takes it), record what was created, reply with the pin instructions; and the
// delivery of event management's records (kal/event routes a kVP's events here) to the owning process.
#include "verb_commands.hpp"

#include "endpoint_fsm.hpp"
#include "event_route.hpp"
#include "kvp_object.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>

#include "rights.hpp"
#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "syscall";

// What an op names, creates and expects, so every op is checked the same way before the kVP sees it.
enum class Ref : uint8_t { none, cq, srq_or_none, pd, pd_or_none };
struct OpSpec {
    std::optional<ResourceType> object;  // the main object's type; nullopt: no object (Open RNIC)
    std::array<Ref, RI_SYSCALL_MAX_REFS> refs{};
    std::optional<ResourceType> creates;
    bool destroys = false;
    uint32_t param_len = 0;
};

constexpr uint32_t kModify = sizeof(ri_syscall_modify_t);

// The verb's name for a refusal's reason; nullptr for an op this kAL does not know.
const char *op_name(uint32_t op) {
    switch (op) {
        case RI_OPEN_RNIC: return "open RNIC";
        case RI_CLOSE_RNIC: return "close RNIC";
        case RI_QUERY_RNIC: return "query RNIC";
        case RI_SET_AEH: return "set AEH";
        case RI_SET_CEH: return "set CEH";
        case RI_ALLOC_PD: return "alloc PD";
        case RI_DEALLOC_PD: return "dealloc PD";
        case RI_CREATE_CQ: return "create CQ";
        case RI_QUERY_CQ: return "query CQ";
        case RI_RESIZE_CQ: return "resize CQ";
        case RI_DESTROY_CQ: return "destroy CQ";
        case RI_CREATE_QP: return "create QP";
        case RI_QUERY_QP: return "query QP";
        case RI_MODIFY_QP: return "modify QP";
        case RI_DESTROY_QP: return "destroy QP";
        case RI_CREATE_SRQ: return "create SRQ";
        case RI_QUERY_SRQ: return "query SRQ";
        case RI_MODIFY_SRQ: return "modify SRQ";
        case RI_DESTROY_SRQ: return "destroy SRQ";
        case RI_REGISTER_MR: return "register MR";
        case RI_REGISTER_SHARED_MR: return "register shared MR";
        case RI_ALLOC_STAG: return "alloc STag";
        case RI_REREGISTER_MR: return "reregister MR";
        case RI_QUERY_MR: return "query MR";
        case RI_DEREGISTER_MR: return "deregister MR";
        case RI_ALLOC_MW: return "alloc MW";
        case RI_DEALLOC_MW: return "dealloc MW";
        default: return nullptr;  // a value from a client
    }
}

std::optional<OpSpec> spec_of(uint32_t op) {
    using T = ResourceType;
    switch (op) {
        case RI_OPEN_RNIC: return OpSpec{std::nullopt, {}, T::rnic, false, sizeof(ri_rnic_open_params_t)};
        case RI_CLOSE_RNIC: return OpSpec{T::rnic, {}, std::nullopt, true, 0};
        case RI_QUERY_RNIC: return OpSpec{T::rnic, {}, std::nullopt, false, 0};
        case RI_SET_AEH: return OpSpec{T::rnic, {}, std::nullopt, false, 0};
        case RI_SET_CEH: return OpSpec{T::rnic, {}, std::nullopt, false, 0};
        case RI_ALLOC_PD: return OpSpec{T::rnic, {}, T::pd, false, 0};
        case RI_DEALLOC_PD: return OpSpec{T::pd, {}, std::nullopt, true, 0};
        case RI_CREATE_CQ: return OpSpec{T::rnic, {}, T::cq, false, sizeof(ri_cq_attr_t)};
        case RI_QUERY_CQ: return OpSpec{T::cq, {}, std::nullopt, false, 0};
        case RI_RESIZE_CQ: return OpSpec{T::cq, {}, std::nullopt, false, sizeof(uint32_t)};
        case RI_DESTROY_CQ: return OpSpec{T::cq, {}, std::nullopt, true, 0};
        case RI_CREATE_QP:
            return OpSpec{T::pd, {Ref::cq, Ref::cq, Ref::srq_or_none, Ref::none}, T::qp, false,
                          sizeof(ri_qp_init_attr_t)};
        case RI_QUERY_QP: return OpSpec{T::qp, {}, std::nullopt, false, 0};
        case RI_MODIFY_QP: return OpSpec{T::qp, {}, std::nullopt, false, kModify + sizeof(ri_qp_attr_t)};
        case RI_DESTROY_QP: return OpSpec{T::qp, {}, std::nullopt, true, 0};
        case RI_CREATE_SRQ: return OpSpec{T::pd, {}, T::srq, false, sizeof(ri_srq_attr_t)};
        case RI_QUERY_SRQ: return OpSpec{T::srq, {}, std::nullopt, false, 0};
        case RI_MODIFY_SRQ: return OpSpec{T::srq, {}, std::nullopt, false, kModify + sizeof(ri_srq_attr_t)};
        case RI_DESTROY_SRQ: return OpSpec{T::srq, {}, std::nullopt, true, 0};
        case RI_REGISTER_MR: return OpSpec{T::pd, {}, T::mr, false, sizeof(ri_mr_reg_t)};
        case RI_REGISTER_SHARED_MR:
            return OpSpec{T::mr, {Ref::pd, Ref::none, Ref::none, Ref::none}, T::mr, false, sizeof(ri_mr_reg_t)};
        case RI_ALLOC_STAG: return OpSpec{T::pd, {}, T::mr, false, sizeof(uint32_t)};
        case RI_REREGISTER_MR:
            return OpSpec{T::mr, {Ref::pd_or_none, Ref::none, Ref::none, Ref::none}, std::nullopt, false,
                          kModify + sizeof(ri_mr_reg_t)};
        case RI_QUERY_MR: return OpSpec{T::mr, {}, std::nullopt, false, 0};
        case RI_DEREGISTER_MR: return OpSpec{T::mr, {}, std::nullopt, true, 0};
        case RI_ALLOC_MW: return OpSpec{T::pd, {}, T::mw, false, sizeof(uint32_t)};
        case RI_DEALLOC_MW: return OpSpec{T::mw, {}, std::nullopt, true, 0};
        default: return std::nullopt;
    }
}

// The objects a request names, resolved and type-checked; every reference must belong to the RNIC open of the main
// object, because the kVP of that open receives them as its own objects.
struct Resolved {
    KvpObject *object = nullptr;
    std::array<KvpObject *, RI_SYSCALL_MAX_REFS> refs{};
};

rdma::Expected<Resolved> resolve(const ResourceTable &table, const krdma_syscall &s, const OpSpec &spec) {
    Resolved out;
    if (spec.object) {
        auto o = object_of(table, s.object, *spec.object);
        if (!o) return o.error();
        out.object = *o;
    } else if (s.object != 0) {
        return rdma::Error(RI_EINVAL, "this op names no object");
    }
    for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) {
        const Ref kind = spec.refs[i];
        const Handle h = s.refs[i];
        if (h == 0) {
            if (kind == Ref::cq || kind == Ref::pd) return rdma::Error(RI_EINVAL, "a required reference is missing");
            continue;
        }
        ResourceType type;
        switch (kind) {
            case Ref::none: return rdma::Error(RI_EINVAL, "this op takes no reference in that position");
            case Ref::cq: type = ResourceType::cq; break;
            case Ref::srq_or_none: type = ResourceType::srq; break;
            default: type = ResourceType::pd; break;
        }
        auto r = object_of(table, h, type);
        if (!r) return r.error();
        if (spec.object && open_of(table, h) != open_of(table, s.object)) {
            return rdma::Error(RI_EINVAL, "a reference names an object of another RNIC open");
        }
        out.refs[i] = *r;
    }
    return out;
}

template <class T>
T param_as(const void *param, size_t offset = 0) {
    T v;
    std::memcpy(&v, static_cast<const uint8_t *>(param) + offset, sizeof v);
    return v;
}

// The plain privileged verb (ABI 1.0 kVPs, and ops a 1.1 kVP leaves to it). Fills @p result and @p created.
ri_status_t plain_verb(const ri_verbs_ops_t &v, const Resolved &o, ri_syscall_t &call, void **created) {
    auto result = [&call](const auto &value) {
        std::memcpy(call.result, &value, sizeof value);
        call.result_len = sizeof value;
    };
    void *obj = o.object != nullptr ? o.object->handle : nullptr;
    auto ref = [&o](size_t i) { return o.refs[i] != nullptr ? o.refs[i]->handle : nullptr; };
    ri_status_t rc = RI_OK;
    switch (call.op) {
        case RI_OPEN_RNIC: {
            auto p = param_as<ri_rnic_open_params_t>(call.param);  // the kAL's patched copy (instance, host context)
            ri_rnic_t r = nullptr;
            rc = v.open_rnic(&p, &r);
            *created = r;
            return rc;
        }
        case RI_QUERY_RNIC: {
            ri_rnic_attr_t a{};
            if ((rc = v.query_rnic(static_cast<ri_rnic_t>(obj), &a)) == RI_OK) result(a);
            return rc;
        }
        case RI_ALLOC_PD: {
            ri_pd_t pd = nullptr;
            rc = v.alloc_pd(static_cast<ri_rnic_t>(obj), &pd);
            *created = pd;
            return rc;
        }
        case RI_CREATE_CQ: {
            auto a = param_as<ri_cq_attr_t>(call.param);
            ri_cq_t cq = nullptr;
            if ((rc = v.create_cq(static_cast<ri_rnic_t>(obj), &a, &cq)) == RI_OK) result(a);
            *created = cq;
            return rc;
        }
        case RI_QUERY_CQ: {
            ri_cq_attr_t a{};
            if ((rc = v.query_cq(static_cast<ri_cq_t>(obj), &a)) == RI_OK) result(a);
            return rc;
        }
        case RI_RESIZE_CQ: {
            uint32_t actual = 0;
            if ((rc = v.resize_cq(static_cast<ri_cq_t>(obj), param_as<uint32_t>(call.param), &actual)) == RI_OK) result(actual);
            return rc;
        }
        case RI_CREATE_QP: {
            auto a = param_as<ri_qp_init_attr_t>(call.param);
            if (((a.flags & RI_QP_USE_SRQ) != 0) != (ref(2) != nullptr)) return RI_EINVAL;
            ri_qp_t qp = nullptr;
            rc = v.create_qp(static_cast<ri_pd_t>(obj), static_cast<ri_cq_t>(ref(0)), static_cast<ri_cq_t>(ref(1)),
                             static_cast<ri_srq_t>(ref(2)), &a, &qp);
            if (rc == RI_OK) result(a);
            *created = qp;
            return rc;
        }
        case RI_QUERY_QP: {
            ri_qp_attr_t a{};
            if ((rc = v.query_qp(static_cast<ri_qp_t>(obj), &a)) == RI_OK) result(a);
            return rc;
        }
        case RI_MODIFY_QP: {
            auto m = param_as<ri_syscall_modify_t>(call.param);
            auto a = param_as<ri_qp_attr_t>(call.param, kModify);
            return v.modify_qp(static_cast<ri_qp_t>(obj), &a, m.mask);
        }
        case RI_CREATE_SRQ: {
            auto a = param_as<ri_srq_attr_t>(call.param);
            ri_srq_t srq = nullptr;
            if ((rc = v.create_srq(static_cast<ri_pd_t>(obj), &a, &srq)) == RI_OK) result(a);
            *created = srq;
            return rc;
        }
        case RI_QUERY_SRQ: {
            ri_srq_attr_t a{};
            if ((rc = v.query_srq(static_cast<ri_srq_t>(obj), &a)) == RI_OK) result(a);
            return rc;
        }
        case RI_MODIFY_SRQ: {
            auto m = param_as<ri_syscall_modify_t>(call.param);
            auto a = param_as<ri_srq_attr_t>(call.param, kModify);
            return v.modify_srq(static_cast<ri_srq_t>(obj), &a, m.mask);
        }
        case RI_REGISTER_MR: {
            auto reg = param_as<ri_mr_reg_t>(call.param);
            ri_mr_t mr = nullptr;
            ri_mr_keys_t keys{};
            if ((rc = v.register_mr(static_cast<ri_pd_t>(obj), &reg, &mr, &keys)) == RI_OK) result(keys);
            *created = mr;
            return rc;
        }
        case RI_REGISTER_SHARED_MR: {
            auto reg = param_as<ri_mr_reg_t>(call.param);
            ri_mr_t mr = nullptr;
            ri_mr_keys_t keys{};
            rc = v.register_shared_mr(static_cast<ri_mr_t>(obj), static_cast<ri_pd_t>(ref(0)), reg.iova, reg.access,
                                      &mr, &keys);
            if (rc == RI_OK) result(keys);
            *created = mr;
            return rc;
        }
        case RI_ALLOC_STAG: {
            ri_mr_t mr = nullptr;
            ri_mr_keys_t keys{};
            if ((rc = v.alloc_stag(static_cast<ri_pd_t>(obj), param_as<uint32_t>(call.param), &mr, &keys)) == RI_OK) result(keys);
            *created = mr;
            return rc;
        }
        case RI_REREGISTER_MR: {
            auto m = param_as<ri_syscall_modify_t>(call.param);
            auto reg = param_as<ri_mr_reg_t>(call.param, kModify);
            ri_mr_keys_t keys{};
            rc = v.reregister_mr(static_cast<ri_mr_t>(obj), m.mask, static_cast<ri_pd_t>(ref(0)), &reg, &keys);
            if (rc == RI_OK) result(keys);
            return rc;
        }
        case RI_QUERY_MR: {
            ri_mr_attr_t a{};
            if ((rc = v.query_mr(static_cast<ri_mr_t>(obj), &a)) == RI_OK) result(a);
            return rc;
        }
        case RI_ALLOC_MW: {
            ri_mw_t mw = nullptr;
            ri_stag_t rkey = 0;
            if ((rc = v.alloc_mw(static_cast<ri_pd_t>(obj), param_as<uint32_t>(call.param), &mw, &rkey)) == RI_OK) result(rkey);
            *created = mw;
            return rc;
        }
        default: return RI_EOPNOTSUPP;
    }
}

// Records the object a create verb made under its parent, with the references it holds, and wires it into event
// management (an RNIC open gets the kAL's AEH; a CQ becomes known to its open's CEH route).
int record_created(VerbCommands &self, Context &ctx, krdma_syscall &s, const OpSpec &spec, const Resolved &o,
                   std::unique_ptr<KvpObject> made, Reply &rep) {
    Handle parent = s.object;
    std::array<Handle, 3> held{};
    size_t nheld = 0;
    if (s.op == RI_OPEN_RNIC) {
        parent = 0;
        made->route = std::make_shared<EventRoute>();
        made->route->commands = &self;
        made->route->client_id = ctx.peer.client_id;
        made->route->netdev = made->ref.netdev();
        made->offload = (made->ref.module()->flags() & RI_MODULE_OFFLOAD) != 0;
        made->route->kvp_streams = VerbCommands::kvp_runs_streams(ctx.peer.client_id, made->offload);
        if (ri_status_t rc = made->v->set_aeh(static_cast<ri_rnic_t>(made->handle), &route_async, made->route.get(),
                                              &made->aeh_id);
            rc != RI_OK) {
            RDMA_LOG_WARN(kComponent, "kVP refused the kAL's asynchronous event handler: %s", std::strerror(rc));
            return rep.fail(rdma::from_errno(rc), std::string("the kVP refused the kAL's asynchronous event handler: ") +
                                                      std::strerror(rc));
        }
    } else if (s.op == RI_REGISTER_SHARED_MR) {
        parent = s.refs[0];  // the new region lives in the PD it names
    } else if (s.op == RI_CREATE_QP) {
        for (size_t i = 0; i < 3; ++i) {
            if (s.refs[i] != 0) held[nheld++] = s.refs[i];  // a QP holds its CQs and SRQ
        }
    } else if (s.op == RI_CREATE_CQ) {
        made->route = o.object->route;
    }
    if (s.op != RI_OPEN_RNIC) made->offload = o.object->offload;
    void *const provider = made->handle;
    std::shared_ptr<EventRoute> route = made->route;
    RnicObjectCounts *counts = s.op == RI_OPEN_RNIC ? &made->ref.counts() : o.object->counts;
    KvpObject *obj = made.get();
    auto h = ctx.table.add(*spec.creates, parent, std::span<const Handle>(held.data(), nheld), std::move(made));
    if (!h) return rep.fail(h.error());  // the object's destructor releases the kVP object
    obj->counts = counts;
    obj->cookie = s.cookie;
    counts->by_type[static_cast<size_t>(*spec.creates)].fetch_add(1, std::memory_order_relaxed);
    if (route) {
        std::lock_guard lock(route->mutex);
        if (s.op == RI_OPEN_RNIC) {
            route->rnic = *h;
            route->rnic_cookie = s.cookie;
        }
        if (s.op == RI_CREATE_CQ) route->cqs[provider] = EventRoute::Cq{*h, s.cookie};
    }
    if (s.op == RI_OPEN_RNIC) self.track_open(route);
    s.handle_out = *h;
    RDMA_LOG_DEBUG(kComponent, "client %u: op %u made %s handle %#lx", ctx.peer.client_id, s.op,
                   std::string(resource_name(*spec.creates)).c_str(), static_cast<unsigned long>(*h));
    return RI_OK;
}

}  // namespace

KvpObject::~KvpObject() {
    link.reset();  // the connection goes first (abortive teardown), while the QP still exists
    if (handle == nullptr) return;  // the kVP never made it
    if (counts != nullptr) counts->by_type[static_cast<size_t>(type)].fetch_sub(1, std::memory_order_relaxed);
    ri_status_t rc = RI_OK;
    switch (type) {
        case ResourceType::rnic: rc = v->close_rnic(static_cast<ri_rnic_t>(handle)); break;
        case ResourceType::pd: rc = v->dealloc_pd(static_cast<ri_pd_t>(handle)); break;
        case ResourceType::cq:
            if (route) {
                std::lock_guard lock(route->mutex);
                route->cqs.erase(handle);
            }
            rc = v->destroy_cq(static_cast<ri_cq_t>(handle));
            break;
        case ResourceType::qp: rc = v->destroy_qp(static_cast<ri_qp_t>(handle)); break;
        case ResourceType::srq: rc = v->destroy_srq(static_cast<ri_srq_t>(handle)); break;
        case ResourceType::mr: rc = v->deregister_mr(static_cast<ri_mr_t>(handle)); break;
        case ResourceType::mw: rc = v->dealloc_mw(static_cast<ri_mw_t>(handle)); break;
        default: break;
    }
    if (rc != RI_OK) {
        RDMA_LOG_WARN(kComponent, "kVP failed to destroy a %s: %s", std::string(resource_name(type)).c_str(),
                      std::strerror(rc));
    }
}

VerbCommands::VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, PinBudget &budget,
                           uint64_t pin_limit)
    : server_(server),
      adapters_(adapters),
      quotas_(quotas),
      own_accounts_(std::make_unique<Accounts>(budget, pin_limit, 0)),
      accounts_(*own_accounts_) {
    serve();
}

VerbCommands::VerbCommands(DeviceServer &server, AdapterManager &adapters, const Quotas &quotas, Accounts &accounts)
    : server_(server), adapters_(adapters), quotas_(quotas), accounts_(accounts) {
    serve();
}

void VerbCommands::serve() {
    DeviceServer &server = server_;
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
            if (endpoint_count_) {
                const uint32_t eps = endpoint_count_(ctx.peer.client_id);
                a.info.counts[static_cast<size_t>(ResourceType::endpoint)] += eps;
                a.info.total += eps;
            }
            a.info.pinned_bytes = ctx.pins.pinned_bytes();
        }
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
    server.on(KRDMA_CMD_LIMITS, [this](Connection &c, const Request &, Reply &rep) {
        krdma_limits a{};
        a.max_connections = server_.max_connections();
        a.connections_per_user = server_.connections_per_user();
        a.connections = server_.connections();
        a.connections_of_caller = server_.connections_of(c.peer().uid);
        a.pin_bytes_total = accounts_.host().limit();
        a.pin_bytes_per_user = accounts_.per_user();
        a.pin_bytes_per_process = accounts_.per_process();
        a.pinned_total = accounts_.host().used();
        a.pinned_by_caller = accounts_.used_by(c.peer().uid);
        const DeviceServer::Refusals conns = server_.refusals();
        a.refused_connections_host = conns.host;
        a.refused_connections_user = conns.user;
        LimitRefusals &n = accounts_.refusals();
        a.refused_pins_process = n.pin_process.load(std::memory_order_relaxed);
        a.refused_pins_user = n.pin_user.load(std::memory_order_relaxed);
        a.refused_pins_host = n.pin_host.load(std::memory_order_relaxed);
        a.refused_pins_unmapped = n.pin_unmapped.load(std::memory_order_relaxed);
        a.refused_privileged_ports = n.privileged_port.load(std::memory_order_relaxed);
        a.objects_per_process = accounts_.object_quotas() ? accounts_.object_quotas()->total : quotas_.total;
        a.objects_per_user = accounts_.objects_per_user();
        a.objects_of_caller = accounts_.objects_of(c.peer().uid);
        a.refused_objects_process = n.objects_process.load(std::memory_order_relaxed);
        a.refused_objects_user = n.objects_user.load(std::memory_order_relaxed);
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
    server_.off(KRDMA_CMD_LIMITS);
    server_.on_disconnect(nullptr);
}

size_t VerbCommands::contexts() const {
    std::lock_guard lock(mutex_);
    return contexts_.size();
}

Context &VerbCommands::context_of(const Connection &c) {
    std::lock_guard lock(mutex_);
    auto &slot = contexts_[c.peer().client_id];
    if (!slot) {
        slot = std::make_unique<Context>(c.peer(), quotas_, accounts_,
                                         accounts_.process(c.peer().pid, c.peer().start_time, c.peer().uid));
    }
    return *slot;
}

void VerbCommands::track_open(const std::shared_ptr<EventRoute> &route) {
    std::lock_guard lock(mutex_);
    // Routes of closed opens go here rather than at close: opens are few and this runs once per open.
    std::erase_if(opens_, [](const std::weak_ptr<EventRoute> &w) { return w.expired(); });
    opens_.push_back(route);
}

void VerbCommands::raise_rnic_event(const std::string &netdev, uint32_t event_id) {
    std::vector<std::shared_ptr<EventRoute>> routes;
    {
        std::lock_guard lock(mutex_);
        for (const auto &w : opens_) {
            if (auto r = w.lock(); r && r->netdev == netdev) routes.push_back(std::move(r));
        }
    }
    const ri_async_event_t e{RI_RES_RNIC, event_id, 0, 0, 0, 0};
    for (const auto &r : routes) route_async(r.get(), nullptr, &e);
}

void VerbCommands::kvp_ended_qp(uint32_t client_id, Handle rnic, uint32_t qp_num, uint32_t event_id) noexcept {
    bool queued = false;
    try {  // a kVP's thread: nothing may escape into the provider
        queued = server_.post([this, client_id, rnic, qp_num, event_id] {
            if (qp_ended_) qp_ended_(client_id, rnic, qp_num, event_id);
        });
    } catch (...) {
        RDMA_LOG_WARN(kComponent, "client %#x: QP %u ended by the kVP, but endpoint management cannot be told",
                      client_id, qp_num);
        return;
    }
    if (!queued) {
        RDMA_LOG_DEBUG(kComponent, "client %#x: QP %u ended by the kVP (event %u) after the kAL stopped serving",
                       client_id, qp_num, event_id);
    }
}

void VerbCommands::deliver(uint32_t client_id, const krdma_event &event) noexcept {
    (void)deliver_record(client_id, event.event, {reinterpret_cast<const uint8_t *>(&event), sizeof event});
}

bool VerbCommands::deliver_record(uint32_t client_id, uint32_t code, std::span<const uint8_t> record,
                                  std::span<const int> fds) noexcept {
    if (hosted(client_id)) {
        // A consumer hosted in the kAL hears its events by callback (descriptors stay with the kAL).
        std::shared_ptr<HostedSink> sink;
        {
            std::lock_guard lock(hosted_mutex_);
            auto it = hosted_.find(client_id);
            if (it != hosted_.end()) sink = it->second;
        }
        if (!sink) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        try {
            (*sink)(code, record);
        } catch (...) {
            RDMA_LOG_WARN(kComponent, "hosted consumer %#x: event callback threw", client_id);
        }
        delivered_.fetch_add(1, std::memory_order_relaxed);
        return true;
    }
    try {
        if (rdma::Status st = server_.send_record(client_id, code, record, fds); !st.ok()) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            RDMA_LOG_WARN(kComponent, "event %u for client %u dropped: %s", code, client_id, st.describe().c_str());
            return false;
        }
        delivered_.fetch_add(1, std::memory_order_relaxed);
        return true;
    } catch (...) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
}

uint32_t VerbCommands::host(HostedSink sink) {
    std::lock_guard lock(hosted_mutex_);
    const uint32_t id = next_hosted_++;
    hosted_[id] = std::make_shared<HostedSink>(std::move(sink));
    return id;
}

void VerbCommands::unhost(uint32_t client_id) {
    std::unique_ptr<Context> gone;
    {
        std::lock_guard lock(mutex_);
        auto it = contexts_.find(client_id);
        if (it != contexts_.end()) {
            gone = std::move(it->second);
            contexts_.erase(it);
        }
    }
    gone.reset();  // its objects go in dependency order; their last events may still reach the sink
    std::lock_guard lock(hosted_mutex_);
    hosted_.erase(client_id);
}

int VerbCommands::execute(Connection &c, krdma_syscall &s, std::string *why) {
    Request req;
    req.cmd = KRDMA_CMD_SYSCALL;
    req.payload = {reinterpret_cast<const uint8_t *>(&s), sizeof s};
    alignas(8) krdma_syscall out = s;
    Reply rep;
    rep.payload = {reinterpret_cast<uint8_t *>(&out), sizeof out};
    const int rc = handle(c, req, rep);
    if (rc == 0) s = out;
    if (rc != 0 && why != nullptr) *why = rep.why();
    // Descriptors a kVP passes back have no socket to travel on here.
    return rc;
}

Context *VerbCommands::find_context(uint32_t client_id) {
    std::lock_guard lock(mutex_);
    auto it = contexts_.find(client_id);
    return it == contexts_.end() ? nullptr : it->second.get();
}

std::pair<uint64_t, uint64_t> VerbCommands::event_counts() const noexcept {
    return {delivered_.load(std::memory_order_relaxed), dropped_.load(std::memory_order_relaxed)};
}

int VerbCommands::handle(Connection &c, const Request &req, Reply &rep) {
    krdma_syscall s;
    std::memcpy(&s, req.payload.data(), sizeof s);
    // Named only when refused: a string built here would be an allocation per request.
    const auto op = [&s] {
        const char *name = op_name(s.op);
        return name != nullptr ? std::string(name) : "verb op " + std::to_string(s.op);
    };
    if (s.param_len > sizeof s.param) {
        return rep.fail(RI_EINVAL, op() + ": param_len " + std::to_string(s.param_len) + " exceeds " +
                                       std::to_string(sizeof s.param) + " bytes");
    }
    if (s.priv_len > sizeof s.priv) {
        return rep.fail(RI_EINVAL, op() + ": priv_len " + std::to_string(s.priv_len) + " exceeds " +
                                       std::to_string(sizeof s.priv) + " bytes");
    }
    auto spec = spec_of(s.op);
    if (!spec) return rep.fail(RI_EOPNOTSUPP, op() + " is not a privileged verb this kAL knows");
    if (s.param_len != spec->param_len) {
        return rep.fail(RI_EINVAL, op() + " takes a parameter block of " + std::to_string(spec->param_len) +
                                       " bytes, not " + std::to_string(s.param_len));
    }
    Context &ctx = context_of(c);
    ResourceTable &table = ctx.table;
    ctx.pin_ops.clear();
    ctx.pin_refusal.clear();
    auto resolved = resolve(table, s, *spec);
    if (!resolved) return rep.fail(resolved.error().code(), op() + ": " + resolved.error().message());
    const Resolved &o = *resolved;

    // Checks that need the parameters, the same for both ways of calling the kVP.
    if (s.op == RI_MODIFY_QP && (param_as<ri_syscall_modify_t>(s.param).mask & RI_QP_ATTR_LLP) != 0) {
        // The RDMA-mode transition belongs to the kAL's LLP management.
        return rep.fail(RI_EOPNOTSUPP, "modify QP: the LLP attributes are set by the kAL's connection setup "
                                       "(CONNECT, ACCEPT, CONVERT), not by the consumer");
    }
    if (s.op == RI_REREGISTER_MR && (param_as<ri_syscall_modify_t>(s.param).mask & RI_REREG_PD) != 0) {
        // It would move a live object to another branch of the ownership tree.
        return rep.fail(RI_EOPNOTSUPP, "reregister MR: moving a region to another PD is not supported; "
                                       "register it anew in that PD");
    }

    if (spec->destroys) {
        // Destroy verbs are plain: the table calls the kVP (the same path as a teardown).
        if (auto d = table.destroy(s.object); !d) return rep.fail(d.error().code(), op() + ": " + d.error().message());
        s.result_len = s.priv_len = s.npins = 0;
        s.handle_out = 0;
    } else {
        // The module and RNIC open the op runs on.
        const ri_verbs_ops_t *v = o.object != nullptr ? o.object->v : nullptr;
        std::unique_ptr<KvpObject> made;
        RnicRef ref;
        alignas(8) uint8_t param[sizeof s.param];
        std::memcpy(param, s.param, s.param_len);
        void *object = o.object != nullptr ? o.object->handle : nullptr;
        if (s.op == RI_OPEN_RNIC) {
            ri_rnic_open_params_t p;
            std::memcpy(&p, param, sizeof p);
            if (strnlen(p.instance_name, sizeof p.instance_name) == sizeof p.instance_name) {
                return rep.fail(RI_EINVAL, "open RNIC: the instance name is not NUL-terminated within its " +
                                               std::to_string(sizeof p.instance_name) + " bytes");
            }
            auto r = adapters_.open(p.instance_name);
            if (!r) return rep.fail(r.error());
            ref = std::move(*r);
            v = &ref.module()->verbs();
            p.instance = ref.instance();
            p.host_ctx = &ctx;
            // Whose memory the open's addresses name: what SO_PEERCRED said, never what the caller wrote.
            p.owner_pid = hosted(ctx.peer.client_id) ? 0u : static_cast<uint32_t>(ctx.peer.pid);
            std::memcpy(param, &p, sizeof p);
            object = p.instance;
        }
        alignas(8) uint8_t priv_out[sizeof s.priv];
        alignas(8) uint8_t result[sizeof s.result];
        int fds_in[KRDMA_MAX_FDS];
        int fds_out[KRDMA_MAX_FDS];
        const size_t nfds_in = req.message != nullptr ? req.message->nfds : 0;
        for (size_t i = 0; i < nfds_in; ++i) fds_in[i] = req.message->fds[i].get();
        ri_syscall_t call{};
        call.size = sizeof call;
        call.op = s.op;
        call.param = param;
        call.param_len = s.param_len;
        call.priv_in = s.priv;
        call.priv_in_len = s.priv_len;
        call.priv_out = priv_out;
        call.priv_out_cap = sizeof priv_out;
        call.result = result;
        call.result_cap = sizeof result;
        call.fds_in = fds_in;
        call.nfds_in = static_cast<uint32_t>(nfds_in);
        call.fds_out = fds_out;
        call.nfds_out_cap = KRDMA_MAX_FDS;

        ri_kvp_syscall_t k{};
        k.size = sizeof k;
        k.call = &call;
        k.object = object;
        for (size_t i = 0; i < RI_SYSCALL_MAX_REFS; ++i) k.refs[i] = o.refs[i] != nullptr ? o.refs[i]->handle : nullptr;
        ri_status_t status = RI_OK;
        if (s.op == RI_SET_AEH) {
            // Event handlers are the kAL's: the uVP learns the identifiers of the kAL's own registrations.
            std::memcpy(result, &o.object->aeh_id, sizeof(uint32_t));
            call.result_len = sizeof(uint32_t);
        } else if (s.op == RI_SET_CEH) {
            uint32_t id = 0;
            status = v->set_ceh(static_cast<ri_rnic_t>(object), &route_completion, o.object->route.get(), &id);
            std::memcpy(result, &id, sizeof id);
            call.result_len = sizeof id;
        } else {
            RDMA_LOG_DEBUG(kComponent, "client %u: op %u on the kVP", c.peer().client_id, s.op);
            status = v->syscall(&k);
            if (status == RI_ENOSYS) {
                call.result_len = call.priv_out_len = call.nfds_out = 0;
                k.created = nullptr;
                status = plain_verb(*v, o, call, &k.created);
            }
        }
        // Descriptors the kVP passed back are the kAL's until the reply has carried them.
        const uint32_t nfds_out = std::min<uint32_t>(call.nfds_out, KRDMA_MAX_FDS);
        for (uint32_t i = 0; i < nfds_out; ++i) rep.owned[i] = krdma::UniqueFd(fds_out[i]);
        if (spec->creates && k.created != nullptr) {
            made = std::make_unique<KvpObject>(*spec->creates, v);
            made->handle = k.created;
            made->ref = std::move(ref);
        }
        if (status == RI_OK && s.op == RI_MODIFY_QP && o.object->link &&
            (param_as<ri_syscall_modify_t>(s.param).mask & RI_QP_ATTR_STATE) != 0) {
            // Endpoint management keeps the connection in step with the QP (CLOSING: orderly; ERROR: abortive).
            o.object->link->qp_state_changed(param_as<ri_qp_attr_t>(s.param, kModify).state);
        }
        if (status != RI_OK) {
            if (made) RDMA_LOG_WARN(kComponent, "kVP failed op %u but made an object: destroying it", s.op);
            // `made` releases anything the kVP made anyway. A module's value is checked like any foreign input.
            return rep.fail(rdma::from_errno(status), op() + ": the kVP refused it: " +
                                                          (ctx.pin_refusal.empty() ? std::strerror(status)
                                                                                   : ctx.pin_refusal));
        }
        if (call.result_len > sizeof result || call.priv_out_len > sizeof priv_out || call.nfds_out > KRDMA_MAX_FDS) {
            RDMA_LOG_ERROR(kComponent, "kVP overran the reply buffers of op %u", s.op);
            return rep.fail(RI_EIO, op() + ": the kVP overran the reply buffers (a provider bug)");
        }
        if (spec->creates) {
            if (!made) {
                RDMA_LOG_ERROR(kComponent, "kVP reported success for op %u but made no object", s.op);
                return rep.fail(RI_EIO, op() + ": the kVP reported success but made no object (a provider bug)");
            }
            void *const handle = made->handle;
            if (int e = record_created(*this, ctx, s, *spec, o, std::move(made), rep); e != RI_OK) return e;
            if (c.abi_minor() >= 2) {
                // The new object's number (minor 2): a QP's saves its consumer a QUERY_QP round trip.
                std::memset(s.refs, 0, sizeof s.refs);
                ri_qp_attr_t qa{};
                if (*spec->creates == ResourceType::qp && v->query_qp(static_cast<ri_qp_t>(handle), &qa) == RI_OK) {
                    s.refs[0] = qa.qp_num;
                }
            }
        }
        s.result_len = call.result_len;
        std::memcpy(s.result, result, call.result_len);
        s.priv_len = call.priv_out_len;
        std::memcpy(s.priv, priv_out, call.priv_out_len);
        for (uint32_t i = 0; i < nfds_out; ++i) rep.fds[rep.nfds++] = rep.owned[i].get();
        if (!spec->creates) s.handle_out = 0;
    }
    // Tell the owner what to lock and unlock, in the order the pins happened.
    if (ctx.pin_ops.size() > KRDMA_SYSCALL_MAX_PINS) {
        RDMA_LOG_WARN(kComponent, "client %u: %zu pin changes in one call, reporting the first %u", c.peer().client_id,
                      ctx.pin_ops.size(), KRDMA_SYSCALL_MAX_PINS);
    }
    s.npins = static_cast<uint32_t>(std::min<size_t>(ctx.pin_ops.size(), KRDMA_SYSCALL_MAX_PINS));
    if (s.npins > 0) std::memcpy(s.pins, ctx.pin_ops.data(), s.npins * sizeof(krdma_pin_op));  // data() may be null
    ctx.pin_ops.clear();
    std::memcpy(rep.payload.data(), &s, sizeof s);
    return RI_OK;
}

}  // namespace kal
