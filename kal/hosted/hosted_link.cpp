// The hosted link: ual::KalLink over kal::HostedConsumer.
#include "hosted_link.hpp"

#include <cstring>

#include "hosted_consumer.hpp"

namespace kal {
namespace {

ResourceType type_of(ual::ObjectKind kind) noexcept {
    switch (kind) {
        case ual::ObjectKind::rnic: return ResourceType::rnic;
        case ual::ObjectKind::pd: return ResourceType::pd;
        case ual::ObjectKind::cq: return ResourceType::cq;
        case ual::ObjectKind::qp: return ResourceType::qp;
        case ual::ObjectKind::srq: return ResourceType::srq;
        case ual::ObjectKind::mr: return ResourceType::mr;
        case ual::ObjectKind::mw: return ResourceType::mw;
        case ual::ObjectKind::listener: return ResourceType::listener;
    }
    return ResourceType::rnic;
}

HostedObject object_of(const ual::ObjectRef &r, ResourceType type) noexcept {
    return HostedObject{r.kal, type, r.provider, r.verbs};
}

ual::ObjectRef ref_of(const HostedObject &o) noexcept { return ual::ObjectRef{o.handle, o.kvp, o.verbs}; }

rdma::Expected<ual::ObjectRef> ref_of(const rdma::Expected<HostedObject> &o) {
    if (!o) return o.error();
    return ref_of(*o);
}

class HostedLink final : public ual::KalLink {
public:
    HostedLink(ConsumerHost &host, std::string name) : host_(host), name_(std::move(name)) {}

    ~HostedLink() override { consumer_.reset(); }  // everything left is destroyed, as for a process that exits

    rdma::Expected<void> start(std::weak_ptr<ual::LinkEvents> sink) override {
        // The kAL calls back on its serving thread (connection events) and the kVP's threads (asynchronous and
        // completion events); a callback in flight may outlive the access layer, hence the weak reference.
        HostedCallbacks cb;
        cb.cm = [sink](const krdma_cm_event &e) {
            if (auto s = sink.lock()) s->connection(e, krdma::UniqueFd(), krdma::UniqueFd(), krdma::UniqueFd(), krdma::UniqueFd());
        };
        cb.async = [sink](const krdma_event &e) {
            const ri_async_event_t a{e.resource_type, e.event_id, e.resource_id, e.context,
                                     static_cast<uint32_t>(e.detail), 0};
            if (auto s = sink.lock()) s->async_event(e.cookie, a);
        };
        cb.completion = [sink](Handle, uint32_t cookie) {
            if (auto s = sink.lock()) s->completion(cookie);
        };
        consumer_ = host_.host_consumer(std::move(cb), name_);
        if (!consumer_) return rdma::Error(RI_ENODEV, "the kAL refused to host consumer '" + name_ + "'");
        return {};
    }

    std::string_view kind() const noexcept override { return "hosted"; }
    uint32_t client_id() const noexcept override { return consumer_ ? consumer_->client_id() : 0; }
    bool can_convert_sockets() const noexcept override { return false; }

    rdma::Expected<std::vector<ual::RnicDescription>> rnics() override {
        std::vector<ual::RnicDescription> out;
        for (const RnicInfo &r : host_.rnics()) {
            out.push_back(ual::RnicDescription{r.name, r.provider, r.vendor, r.netdev, r.address, r.uvp_library});
        }
        return out;
    }

    rdma::Expected<ual::ObjectRef> open_rnic(const ual::RnicDescription &rnic, uint32_t cookie) override {
        return ref_of(consumer_->open_rnic(rnic.name, cookie));
    }

    rdma::Expected<ual::ObjectRef> alloc_pd(const ual::ObjectRef &rnic) override {
        return ref_of(consumer_->alloc_pd(object_of(rnic, ResourceType::rnic)));
    }

    rdma::Expected<ual::ObjectRef> create_cq(const ual::ObjectRef &rnic, uint32_t cookie, uint32_t &depth) override {
        auto o = consumer_->create_cq(object_of(rnic, ResourceType::rnic), depth, cookie);
        if (!o) return o.error();
        ri_cq_attr_t q{};
        if (o->verbs->query_cq(static_cast<ri_cq_t>(o->kvp), &q) == RI_OK) depth = q.cqe;
        return ref_of(*o);
    }

    rdma::Expected<ual::ObjectRef> create_qp(const ual::ObjectRef &pd, const ual::ObjectRef &send,
                                             const ual::ObjectRef &recv, const ual::ObjectRef *srq,
                                             ri_qp_init_attr_t &attr, uint32_t cookie) override {
        const HostedObject s = srq != nullptr ? object_of(*srq, ResourceType::srq) : HostedObject{};
        return ref_of(consumer_->create_qp(object_of(pd, ResourceType::pd), object_of(send, ResourceType::cq),
                                           object_of(recv, ResourceType::cq), attr, srq != nullptr ? &s : nullptr,
                                           cookie));
    }

    rdma::Expected<ual::ObjectRef> create_srq(const ual::ObjectRef &pd, ri_srq_attr_t &attr) override {
        return ref_of(consumer_->create_srq(object_of(pd, ResourceType::pd), attr));
    }

    rdma::Expected<ual::ObjectRef> register_mr(const ual::ObjectRef &pd, void *addr, uint64_t length, uint32_t access,
                                               ri_mr_keys_t &keys) override {
        return ref_of(consumer_->register_mr(object_of(pd, ResourceType::pd), addr, length, access, keys));
    }

    rdma::Expected<ual::ObjectRef> alloc_mw(const ual::ObjectRef &pd, uint32_t type, ri_stag_t &rkey) override {
        return ref_of(consumer_->alloc_mw(object_of(pd, ResourceType::pd), type, rkey));
    }

    rdma::Expected<void> destroy(ual::ObjectKind kind, const ual::ObjectRef &o) override {
        return consumer_->destroy(object_of(o, type_of(kind)));
    }

    rdma::Expected<void> modify_qp(const ual::ObjectRef &qp, const ri_qp_attr_t &attr, uint32_t mask) override {
        // Through the kAL: a state change also moves the QP's connection (the kVP runs the stream).
        return consumer_->modify_qp(object_of(qp, ResourceType::qp), attr, mask);
    }

    rdma::Expected<void> modify_srq(const ual::ObjectRef &srq, const ri_srq_attr_t &attr, uint32_t mask) override {
        return consumer_->modify_srq(object_of(srq, ResourceType::srq), attr, mask);
    }

    rdma::Expected<ual::ListenResult> listen(const ual::ObjectRef &rnic, uint16_t port, uint16_t backlog,
                                             uint64_t context, uint32_t cookie) override {
        auto r = consumer_->listen(object_of(rnic, ResourceType::rnic), port, context, cookie, backlog);
        if (!r) return r.error();
        return ual::ListenResult{r->first, r->second};
    }

    rdma::Expected<void> connect(const ual::ObjectRef &qp, const ri_net_addr_t &remote, uint16_t port,
                                 std::span<const uint8_t> private_data, uint64_t context, uint32_t timeout_ms) override {
        return consumer_->connect(object_of(qp, ResourceType::qp), remote, port, private_data, context, timeout_ms);
    }

    rdma::Expected<void> accept(uint64_t request, const ual::ObjectRef &qp, std::span<const uint8_t> private_data,
                                uint64_t context) override {
        return consumer_->accept(request, object_of(qp, ResourceType::qp), private_data, context);
    }

    rdma::Expected<void> reject(uint64_t request, std::span<const uint8_t> private_data) override {
        return consumer_->reject(request, private_data);
    }

    rdma::Expected<void> convert(const ual::ObjectRef &, int, std::span<const uint8_t>, uint32_t, uint32_t,
                                 uint64_t, uint32_t) override {
        return rdma::Error(RI_EOPNOTSUPP, "a consumer hosted in the kAL has no sockets of its own to convert");
    }

    // The kAL handed the stream to the kVP at ESTABLISHED, and moves the kVP's QP itself at the connection's end.
    rdma::Expected<void> take_stream(const ual::ObjectRef &, const ri_llp_params_t &, krdma::UniqueFd,
                                     krdma::UniqueFd) override {
        return {};
    }
    void stream_ended(const ual::ObjectRef &) noexcept override {}

private:
    ConsumerHost &host_;
    std::string name_;
    std::unique_ptr<HostedConsumer> consumer_;
};

}  // namespace

std::unique_ptr<ual::KalLink> hosted_link(ConsumerHost &host, std::string name) {
    return std::make_unique<HostedLink>(host, std::move(name));
}

}  // namespace kal
