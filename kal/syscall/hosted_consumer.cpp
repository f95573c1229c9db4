// A consumer hosted in the kAL: its requests run the device commands' code on the serving thread with a Connection
// of its own, and its event records come back by callback.
#include "hosted_consumer.hpp"


#include <cerrno>
#include <cstring>

#include "krdma/pins.hpp"
#include "kvp_object.hpp"
#include "krdma/net_addr.hpp"
#include "rnicpi/host/log.hpp"

namespace kal {
namespace {

constexpr const char *kComponent = "hosted";

template <class T>
void set_param(krdma_syscall &s, const T &p) {
    static_assert(sizeof(T) <= sizeof s.param);
    std::memcpy(s.param, &p, sizeof p);
    s.param_len = sizeof p;
}

krdma_syscall call(uint32_t op, Handle object) {
    krdma_syscall s{};
    s.op = op;
    s.object = object;
    return s;
}

rdma::Error failed(int rc, const char *what) { return rdma::Error(rc, what); }

// A refusal of the kAL's blocks: what was asked and, when they said, why.
rdma::Error failed(int rc, const char *what, const std::string &why) {
    return rdma::Error(rc, why.empty() ? std::string(what) : std::string(what) + ": " + why);
}

}  // namespace

// The callbacks, shared with the sink the kAL calls (which may outlive the consumer by an event in flight).
struct HostedConsumer::Sink {
    explicit Sink(HostedCallbacks c) : cb(std::move(c)) {}
    HostedCallbacks cb;
    void operator()(uint32_t code, std::span<const uint8_t> record) const {
        if (code == KRDMA_EVENT_CM && record.size() >= sizeof(krdma_cm_event)) {
            krdma_cm_event e;
            std::memcpy(&e, record.data(), sizeof e);
            if (cb.cm) cb.cm(e);
        } else if (record.size() >= sizeof(krdma_event)) {
            krdma_event e;
            std::memcpy(&e, record.data(), sizeof e);
            if (code == KRDMA_EVENT_COMPLETION && cb.completion) cb.completion(e.object, e.cookie);
            if (code == KRDMA_EVENT_ASYNC && cb.async) cb.async(e);
        }
    }
};

HostedConsumer::HostedConsumer(VerbCommands &verbs, ConnectionCommands &connections, HostedCallbacks callbacks,
                               std::string name)
    : verbs_(verbs),
      connections_(connections),
      sink_(std::make_shared<Sink>(std::move(callbacks))),
      conn_(Peer{::getpid(), ::getuid(), ::getgid(),
                 verbs.host([sink = sink_](uint32_t code, std::span<const uint8_t> r) { (*sink)(code, r); }),
                 0, true}),
      name_(std::move(name)) {
    RDMA_LOG_INFO(kComponent, "consumer '%s' hosted in the kAL as client %#x", name_.c_str(), client_id());
}

HostedConsumer::~HostedConsumer() {
    // On the serving thread: the connections of its QPs are the serving thread's.
    (void)verbs_.server().call_on_loop([this] {
        verbs_.unhost(client_id());
        return 0;
    });
}

rdma::Expected<HostedObject> HostedConsumer::object(Handle h, ResourceType type) {
    HostedObject o;
    const int rc = verbs_.server().call_on_loop([&] {
        auto k = object_of(verbs_.context_of(conn_).table, h, type);
        if (!k) return k.error().code();
        o = HostedObject{h, type, (*k)->handle, (*k)->v};
        return 0;
    });
    if (rc != 0) return failed(rc, "no such object");
    return o;
}

rdma::Expected<HostedObject> HostedConsumer::syscall(krdma_syscall &s, ResourceType made, uint32_t cookie) {
    s.cookie = cookie;
    std::string why;
    const int rc = verbs_.server().call_on_loop([&] { return verbs_.execute(conn_, s, &why); });
    if (rc != 0) return failed(rc, "verb refused", why);
    auto o = object(s.handle_out, made);
    if (o && krdma::apply_pins({s.pins, std::min<size_t>(s.npins, KRDMA_SYSCALL_MAX_PINS)}) != 0) {
        // Pages the kAL pinned cannot be locked (RLIMIT_MEMLOCK): undo, as a process's uAL would.
        (void)destroy(*o);
        return failed(RI_ENOMEM, "cannot lock the region's pages");
    }
    return o;
}

rdma::Expected<HostedObject> HostedConsumer::open_rnic(const std::string &rnic, uint32_t cookie) {
    ri_rnic_open_params_t p{};
    if (rnic.size() >= sizeof p.instance_name) return failed(RI_EINVAL, "RNIC name too long");
    std::memcpy(p.instance_name, rnic.data(), rnic.size());
    krdma_syscall s = call(RI_OPEN_RNIC, 0);
    set_param(s, p);
    auto o = syscall(s, ResourceType::rnic, cookie);
    if (!o) return o;
    // The consumer's completion event handler: the kAL's route, which calls HostedCallbacks::completion.
    krdma_syscall c = call(RI_SET_CEH, o->handle);
    if (int rc = verbs_.server().call_on_loop([&] { return verbs_.execute(conn_, c); }); rc != 0) {
        (void)destroy(*o);
        return failed(rc, "set CEH");
    }
    uint32_t id = 0;
    std::memcpy(&id, c.result, sizeof id);
    std::lock_guard g(mutex_);
    cehs_[o->handle] = id;
    return o;
}

rdma::Expected<HostedObject> HostedConsumer::alloc_pd(const HostedObject &rnic) {
    krdma_syscall s = call(RI_ALLOC_PD, rnic.handle);
    return syscall(s, ResourceType::pd);
}

rdma::Expected<HostedObject> HostedConsumer::create_cq(const HostedObject &rnic, uint32_t cqe, uint32_t cookie) {
    ri_cq_attr_t a{};
    a.cqe = cqe;
    a.context = cookie;
    {
        std::lock_guard g(mutex_);
        auto it = cehs_.find(rnic.handle);
        if (it == cehs_.end()) return failed(RI_EINVAL, "not an RNIC open of this consumer");
        a.ceh_id = it->second;
    }
    krdma_syscall s = call(RI_CREATE_CQ, rnic.handle);
    set_param(s, a);
    return syscall(s, ResourceType::cq, cookie);
}

rdma::Expected<HostedObject> HostedConsumer::create_qp(const HostedObject &pd, const HostedObject &send_cq,
                                                       const HostedObject &recv_cq, ri_qp_init_attr_t &attr,
                                                       const HostedObject *srq, uint32_t cookie) {
    krdma_syscall s = call(RI_CREATE_QP, pd.handle);
    s.refs[0] = send_cq.handle;
    s.refs[1] = recv_cq.handle;
    s.refs[2] = srq != nullptr ? srq->handle : 0;
    set_param(s, attr);
    auto o = syscall(s, ResourceType::qp, cookie);
    if (o && s.result_len >= sizeof attr) std::memcpy(&attr, s.result, sizeof attr);
    return o;
}

rdma::Expected<HostedObject> HostedConsumer::create_srq(const HostedObject &pd, ri_srq_attr_t &attr) {
    krdma_syscall s = call(RI_CREATE_SRQ, pd.handle);
    set_param(s, attr);
    auto o = syscall(s, ResourceType::srq);
    if (o && s.result_len >= sizeof attr) std::memcpy(&attr, s.result, sizeof attr);
    return o;
}

rdma::Expected<void> HostedConsumer::modify_srq(const HostedObject &srq, const ri_srq_attr_t &attr, uint32_t mask) {
    struct {
        ri_syscall_modify_t m;
        ri_srq_attr_t a;
    } p{{mask, 0}, attr};
    krdma_syscall s = call(RI_MODIFY_SRQ, srq.handle);
    set_param(s, p);
    if (int rc = verbs_.server().call_on_loop([&] { return verbs_.execute(conn_, s); }); rc != 0) {
        return failed(rc, "modify SRQ");
    }
    return {};
}

rdma::Expected<HostedObject> HostedConsumer::alloc_mw(const HostedObject &pd, uint32_t type, ri_stag_t &rkey) {
    krdma_syscall s = call(RI_ALLOC_MW, pd.handle);
    set_param(s, type);
    auto o = syscall(s, ResourceType::mw);
    if (o && s.result_len >= sizeof rkey) std::memcpy(&rkey, s.result, sizeof rkey);
    return o;
}

rdma::Expected<HostedObject> HostedConsumer::register_mr(const HostedObject &pd, void *addr, uint64_t length,
                                                         uint32_t access, ri_mr_keys_t &keys) {
    const auto a = reinterpret_cast<uint64_t>(addr);
    // A hosted consumer's memory is the kAL's own: a region over unmapped pages would take krdmad down at the first
    // placement, so it is refused up front.
    if (!krdma::mapped(a, length)) return failed(RI_EFAULT, "the region is not mapped in this process");
    ri_mr_reg_t r{a, length, (access & RI_ACCESS_ZERO_BASED) != 0 ? 0 : a, access, 0};
    krdma_syscall s = call(RI_REGISTER_MR, pd.handle);
    set_param(s, r);
    auto o = syscall(s, ResourceType::mr);
    if (o) std::memcpy(&keys, s.result, sizeof keys);
    return o;
}

rdma::Expected<void> HostedConsumer::modify_qp(const HostedObject &qp, const ri_qp_attr_t &attr, uint32_t mask) {
    struct {
        ri_syscall_modify_t m;
        ri_qp_attr_t a;
    } p{{mask, 0}, attr};
    krdma_syscall s = call(RI_MODIFY_QP, qp.handle);
    set_param(s, p);
    if (int rc = verbs_.server().call_on_loop([&] { return verbs_.execute(conn_, s); }); rc != 0) {
        return failed(rc, "modify QP");
    }
    return {};
}

rdma::Expected<ri_qp_attr_t> HostedConsumer::query_qp(const HostedObject &qp) {
    ri_qp_attr_t a{};
    if (ri_status_t rc = qp.verbs->query_qp(static_cast<ri_qp_t>(qp.kvp), &a); rc != RI_OK) {
        return failed(rc, "query QP");
    }
    return a;
}

rdma::Expected<void> HostedConsumer::destroy(const HostedObject &o) {
    const int rc = verbs_.server().call_on_loop([&] {
        Context &ctx = verbs_.context_of(conn_);
        if (auto r = ctx.table.get(o.handle, o.type); !r) return r.error().code();
        ctx.pin_ops.clear();
        if (auto d = ctx.table.destroy(o.handle); !d) return d.error().code();
        (void)krdma::apply_pins(ctx.pin_ops);  // the unlocks of what the kAL unpinned
        ctx.pin_ops.clear();
        return 0;
    });
    if (rc != 0) return failed(rc, "destroy");
    if (o.type == ResourceType::rnic) {
        std::lock_guard g(mutex_);
        cehs_.erase(o.handle);
    }
    return {};
}

template <class T>
rdma::Expected<void> HostedConsumer::command(int (ConnectionCommands::*handler)(Connection &, const Request &, Reply &),
                                             uint32_t cmd, const T &q, T *out, const char *what) {
    std::string why;
    const int rc = verbs_.server().call_on_loop([&] {
        Request req;
        req.cmd = cmd;
        req.payload = {reinterpret_cast<const uint8_t *>(&q), sizeof q};
        Reply rep;
        if (out != nullptr) rep.payload = {reinterpret_cast<uint8_t *>(out), sizeof *out};
        const int r = (connections_.*handler)(conn_, req, rep);
        if (r != 0) why = rep.why();
        return r;
    });
    if (rc != 0) return failed(rc, what, why);
    return {};
}

rdma::Expected<std::pair<Handle, uint16_t>> HostedConsumer::listen(const HostedObject &rnic, uint16_t port,
                                                                   uint64_t context, uint32_t cookie,
                                                                   uint16_t backlog) {
    krdma_listen q{};
    q.rnic = rnic.handle;
    q.context = context;
    q.port = port;
    q.backlog = backlog;
    q.cookie = cookie;
    krdma_listen out = q;
    if (auto r = command(&ConnectionCommands::listen, KRDMA_CMD_LISTEN, q, &out, "listen"); !r) return r.error();
    return std::pair<Handle, uint16_t>{out.handle, out.port};
}

rdma::Expected<void> HostedConsumer::connect(const HostedObject &qp, const std::string &address, uint16_t port,
                                             std::span<const uint8_t> private_data, uint64_t context,
                                             uint32_t timeout_ms) {
    auto remote = krdma::parse_net_addr(address);
    if (!remote) return remote.error();
    return connect(qp, *remote, port, private_data, context, timeout_ms);
}

rdma::Expected<void> HostedConsumer::connect(const HostedObject &qp, const ri_net_addr_t &remote, uint16_t port,
                                             std::span<const uint8_t> private_data, uint64_t context,
                                             uint32_t timeout_ms) {
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return failed(RI_EINVAL, "private data too long");
    krdma_connect q{};
    q.qp = qp.handle;
    q.context = context;
    q.remote = remote;
    q.port = port;
    q.timeout_ms = timeout_ms;
    krdma::set_private_data(q, private_data);
    return command<krdma_connect>(&ConnectionCommands::connect, KRDMA_CMD_CONNECT, q, nullptr, "connect");
}

rdma::Expected<void> HostedConsumer::accept(uint64_t request, const HostedObject &qp,
                                            std::span<const uint8_t> private_data, uint64_t context) {
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return failed(RI_EINVAL, "private data too long");
    krdma_accept q{};
    q.request = request;
    q.qp = qp.handle;
    q.context = context;
    krdma::set_private_data(q, private_data);
    return command<krdma_accept>(&ConnectionCommands::accept, KRDMA_CMD_ACCEPT, q, nullptr, "accept");
}

rdma::Expected<void> HostedConsumer::reject(uint64_t request, std::span<const uint8_t> private_data) {
    if (private_data.size() > KRDMA_MAX_PRIVATE_DATA) return failed(RI_EINVAL, "private data too long");
    krdma_reject q{};
    q.request = request;
    krdma::set_private_data(q, private_data);
    return command<krdma_reject>(&ConnectionCommands::reject, KRDMA_CMD_REJECT, q, nullptr, "reject");
}

}  // namespace kal
