// Privileged verbs over the device: a uVP's ri_syscall (through the uAL's upcall) reaches the kVP through a real
// device server and comes back; handles are checked against the caller's own table; a closed connection has its
// objects destroyed in order and its RNIC opens released.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <thread>

#include "adapter_manager.hpp"
#include "rnicpi/host/log.hpp"
#include "krdma/pins.hpp"
#include "rnic_calls.hpp"
#include "syscall.hpp"
#include "verb_commands.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;
using testutil::sys;  // one ri_syscall as a uVP would make it

// Whether mlock() really locks here: the sanitizers replace it with a no-op, so VmLck cannot be checked.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kMlockWorks = false;
#else
constexpr bool kMlockWorks = true;
#endif

// Bytes this process has locked in memory (VmLck of /proc/self/status).
uint64_t locked_bytes() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return 0;
    char line[256];
    uint64_t kib = 0;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::sscanf(line, "VmLck: %lu kB", &kib) == 1) break;
    }
    std::fclose(f);
    return kib * 1024;
}

// The parameters of a registration of [@p addr, @p addr + @p len) at iova @p addr with @p access.
ri_mr_reg_t mr_reg(uint64_t addr, uint64_t len, uint32_t access) {
    ri_mr_reg_t r{};
    r.addr = addr;
    r.length = len;
    r.iova = addr;
    r.access = access;
    return r;
}

class Syscall : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/krdma-sys-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        ASSERT_OK(adapters_.load("test_cpp_kvp.so"));
        auto a = adapters_.attach(kal::AttachRequest{"cppkvp", "cpp0", "", "127.0.0.1", ""});
        ASSERT_OK(a) << a.error().to_string();
        server_ = std::make_unique<kal::DeviceServer>(dir_ / "krdma");
        verbs_ = std::make_unique<kal::VerbCommands>(*server_, adapters_, kal::Quotas{}, budget_, kPinLimit);
        ASSERT_OK(server_->listen());
        thread_ = std::thread([this] { server_->run(); });
    }
    void TearDown() override {
        server_->stop();
        thread_.join();
        verbs_.reset();
        server_.reset();
        fs::remove_all(dir_);
    }
    std::unique_ptr<ual::DeviceClient> client() {
        auto c = ual::DeviceClient::connect(dir_ / "krdma");
        EXPECT_OK(c);
        return c ? std::move(*c) : nullptr;
    }
    uint64_t open_rnic(ual::DeviceClient &c) {
        ri_rnic_open_params_t p{};
        std::strcpy(p.instance_name, "cpp0");
        uint64_t h = 0;
        EXPECT_RI_OK(sys(c, RI_OPEN_RNIC, 0, &p, sizeof p, nullptr, 0, &h));
        return h;
    }
    uint32_t opens() { return adapters_.list().at(0).opens; }
    // A Create QP request on @p pd with send and receive CQs @p scq and @p rcq, attributes @p qa in, the ones in
    // effect written back to @p qa_out.
    static ri_syscall_t create_qp_call(uint64_t pd, uint64_t scq, uint64_t rcq, const ri_qp_init_attr_t &qa,
                                       ri_qp_init_attr_t &qa_out) {
        ri_syscall_t call{};
        call.size = sizeof call;
        call.op = RI_CREATE_QP;
        call.object = pd;
        call.refs[0] = scq;
        call.refs[1] = rcq;
        call.param = &qa;
        call.param_len = sizeof qa;
        call.result = &qa_out;
        call.result_cap = sizeof qa_out;
        return call;
    }
    // A PD and a CQ of 16 entries on RNIC open @p rnic, and a QP of depth 8 on them (0s when one fails).
    struct QpSet {
        uint64_t pd = 0, cq = 0, qp = 0;
        ri_qp_init_attr_t attr{};  // what the QP was asked for
    };
    static QpSet make_qp(ual::DeviceClient &c, uint64_t rnic) {
        QpSet q;
        EXPECT_RI_OK(sys(c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &q.pd));
        ri_cq_attr_t cqa{};
        cqa.cqe = 16;
        ri_cq_attr_t cq_out{};
        EXPECT_RI_OK(sys(c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, &cq_out, sizeof cq_out, &q.cq));
        q.attr.type = RI_QPT_RC;
        q.attr.sq_depth = q.attr.rq_depth = 8;
        ri_qp_init_attr_t qa_out{};
        ri_syscall_t call = create_qp_call(q.pd, q.cq, q.cq, q.attr, qa_out);
        EXPECT_RI_OK(ual::device_syscall(&c, &call));
        q.qp = call.handle_out;
        return q;
    }
    // The parameter block of a Modify QP that changes only the state.
    struct ModifyQp {
        ri_syscall_modify_t m;
        ri_qp_attr_t attr;
    };
    static ModifyQp to_state(uint32_t state) {
        ModifyQp mod{};
        mod.m.mask = RI_QP_ATTR_STATE;
        mod.attr.state = state;
        return mod;
    }

    fs::path dir_;
    static constexpr uint64_t kPinLimit = 64 * 4096;
    kal::PinBudget budget_{1 << 30};
    rdma::rnicpi::ModuleLoader loader_{kal::kal_host_ops(), TEST_PROVIDER_DIR};
    kal::AdapterManager adapters_{loader_};
    std::unique_ptr<kal::DeviceServer> server_;
    std::unique_ptr<kal::VerbCommands> verbs_;
    std::thread thread_;
};

TEST_F(Syscall, ControlPathThroughTheKvp) {
    auto c = client();
    uint64_t rnic = open_rnic(*c);
    ASSERT_NE(rnic, 0u);
    EXPECT_EQ(opens(), 1u);
    ri_rnic_attr_t attr{};
    ASSERT_RI_OK(sys(*c, RI_QUERY_RNIC, rnic, nullptr, 0, &attr, sizeof attr));
    EXPECT_STREQ(attr.name, "cppkvp0");  // answered by the kVP
    EXPECT_EQ(attr.max_qp, 64u);
    uint64_t pd = 0, cq = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    ri_cq_attr_t cqa{};
    cqa.cqe = 128;
    ri_cq_attr_t cq_out{};
    ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, &cq_out, sizeof cq_out, &cq));
    EXPECT_EQ(cq_out.cqe, 128u);
    // The RNIC counts what consumers hold on it (rdmactl resources shows it per RNIC).
    auto objects = [&] { return adapters_.list().at(0).objects; };
    EXPECT_EQ(objects()[static_cast<size_t>(kal::ResourceType::rnic)], 1u);
    EXPECT_EQ(objects()[static_cast<size_t>(kal::ResourceType::pd)], 1u);
    EXPECT_EQ(objects()[static_cast<size_t>(kal::ResourceType::cq)], 1u);
    EXPECT_STATUS(sys(*c, RI_CLOSE_RNIC, rnic, nullptr, 0), RI_EBUSY);  // the verbs' rule: children first
    EXPECT_RI_OK(sys(*c, RI_DEALLOC_PD, pd, nullptr, 0));
    EXPECT_RI_OK(sys(*c, RI_DESTROY_CQ, cq, nullptr, 0));
    EXPECT_RI_OK(sys(*c, RI_CLOSE_RNIC, rnic, nullptr, 0));
    EXPECT_EQ(opens(), 0u);
    for (uint32_t n : objects()) EXPECT_EQ(n, 0u);
}

TEST_F(Syscall, QueuePairsHoldTheirCompletionQueues) {
    auto c = client();
    const auto [pd, cq, qp, qa] = make_qp(*c, open_rnic(*c));
    ASSERT_NE(qp, 0u);
    EXPECT_STATUS(sys(*c, RI_DESTROY_CQ, cq, nullptr, 0), RI_EBUSY);  // the QP still uses it
    // Modify to ERROR and read it back through the kVP.
    ModifyQp mod = to_state(RI_QPS_ERROR);
    ASSERT_RI_OK(sys(*c, RI_MODIFY_QP, qp, &mod, sizeof mod));
    ri_qp_attr_t q{};
    ASSERT_RI_OK(sys(*c, RI_QUERY_QP, qp, nullptr, 0, &q, sizeof q));
    EXPECT_EQ(q.state, static_cast<uint32_t>(RI_QPS_ERROR));
    mod.m.mask = RI_QP_ATTR_LLP;
    EXPECT_STATUS(sys(*c, RI_MODIFY_QP, qp, &mod, sizeof mod), RI_EOPNOTSUPP);
    // A QP needs CQs of its own caller, of the right type.
    ri_qp_init_attr_t qa_out{};
    ri_syscall_t call = create_qp_call(pd, pd, cq, qa, qa_out);
    EXPECT_STATUS(ual::device_syscall(c.get(), &call), RI_EINVAL);
    EXPECT_RI_OK(sys(*c, RI_DESTROY_QP, qp, nullptr, 0));
    EXPECT_RI_OK(sys(*c, RI_DESTROY_CQ, cq, nullptr, 0));
}

// ri_syscall_post (ABI 1.6): a modify sent without waiting takes effect before the caller's next request, a refusal
// of one is only logged (no event, no reply left over), and only a modify that asks for nothing back may be posted.
TEST_F(Syscall, PostedModifyIsNotWaitedForAndTakesEffectInOrder) {
    auto c = client();
    const QpSet set = make_qp(*c, open_rnic(*c));
    const uint64_t qp = set.qp, cq = set.cq;
    ASSERT_NE(qp, 0u);

    ModifyQp mod = to_state(RI_QPS_ERROR);
    ri_syscall_t post{};
    post.size = sizeof post;
    post.op = RI_MODIFY_QP;
    post.object = qp;
    post.param = &mod;
    post.param_len = sizeof mod;
    ASSERT_RI_OK(ual::device_syscall_post(c.get(), &post));
    ri_qp_attr_t q{};
    ASSERT_RI_OK(sys(*c, RI_QUERY_QP, qp, nullptr, 0, &q, sizeof q));
    EXPECT_EQ(q.state, static_cast<uint32_t>(RI_QPS_ERROR));
    // This test kVP raises a fatal event for a QP entering ERROR, as an RNIC would: it came from the posted modify.
    bool fatal = false;
    while (auto e = c->next_event()) fatal |= e->event == KRDMA_EVENT_ASYNC && e->event_id == RI_AE_QP_FATAL;
    EXPECT_TRUE(fatal);

    // The kVP refuses this one (the RDMA-mode transition is the kAL's): sent all the same, and the refusal reply is
    // taken by the next call without confusing it or becoming an event.
    ModifyQp llp = to_state(RI_QPS_RTS);
    llp.m.mask = RI_QP_ATTR_LLP;
    post.param = &llp;
    EXPECT_RI_OK(ual::device_syscall_post(c.get(), &post));
    post.object = qp + 1000;  // no such object of this caller: the kAL refuses
    EXPECT_RI_OK(ual::device_syscall_post(c.get(), &post));
    q = {};
    ASSERT_RI_OK(sys(*c, RI_QUERY_QP, qp, nullptr, 0, &q, sizeof q));
    EXPECT_EQ(q.state, static_cast<uint32_t>(RI_QPS_ERROR));
    EXPECT_FALSE(c->next_cm_event().has_value());
    EXPECT_FALSE(c->next_event().has_value());

    // What cannot be posted: anything but a modify, a call that asks for a result back, one that passes a descriptor.
    post.object = qp;
    post.op = RI_DESTROY_QP;
    post.param = nullptr;
    post.param_len = 0;
    EXPECT_STATUS(ual::device_syscall_post(c.get(), &post), RI_EINVAL);
    post.op = RI_MODIFY_QP;
    post.param = &mod;
    post.param_len = sizeof mod;
    ri_qp_attr_t out{};
    post.result = &out;
    post.result_cap = sizeof out;
    EXPECT_STATUS(ual::device_syscall_post(c.get(), &post), RI_EINVAL);
    post.result = nullptr;
    post.result_cap = 0;
    const int32_t fd = 0;
    post.fds_in = &fd;
    post.nfds_in = 1;
    EXPECT_STATUS(ual::device_syscall_post(c.get(), &post), RI_EINVAL);
    post.nfds_in = 0;
    post.size = sizeof post - 8;
    EXPECT_STATUS(ual::device_syscall_post(c.get(), &post), RI_EINVAL);
    EXPECT_STATUS(ual::device_syscall_post(nullptr, &post), RI_EINVAL);
    // The QP was left as it was by every refused post; it is destroyed in order after them.
    EXPECT_RI_OK(sys(*c, RI_DESTROY_QP, qp, nullptr, 0));
    EXPECT_RI_OK(sys(*c, RI_DESTROY_CQ, cq, nullptr, 0));
}

// OpenRDMA Figure 4 through the kAL: the uVP's private data reaches the kVP's whole-request op (ABI 1.1), the kVP
// pins the queue memory it names, and its private reply and a descriptor come back to the uVP.
TEST_F(Syscall, PrivateDataAndDescriptorsPassThroughBothWays) {
    auto c = client();
    uint64_t rnic = open_rnic(*c);
    uint64_t pd = 0, cq = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    ri_cq_attr_t cqa{};
    cqa.cqe = 16;
    ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, &cqa, sizeof cqa, &cq));
    std::vector<uint8_t> queues(5 * 4096);
    struct {
        uint64_t addr, length;
    } mem{(reinterpret_cast<uint64_t>(queues.data()) + 4095) & ~uint64_t{4095}, 4 * 4096};
    ri_qp_init_attr_t qa{};
    qa.type = RI_QPT_RC;
    qa.context = 77;
    ri_qp_init_attr_t qa_out{};
    struct {
        uint32_t qp_num, magic;
    } priv_out{};
    int32_t fds[2] = {-1, -1};
    ri_syscall_t call = create_qp_call(pd, cq, cq, qa, qa_out);
    call.priv_in = &mem;
    call.priv_in_len = sizeof mem;
    call.priv_out = &priv_out;
    call.priv_out_cap = sizeof priv_out;
    call.fds_out = fds;
    call.nfds_out_cap = 2;
    const uint64_t locked = locked_bytes();
    ASSERT_RI_OK(ual::device_syscall(c.get(), &call));
    EXPECT_NE(call.handle_out, 0u);
    EXPECT_EQ(call.priv_out_len, sizeof priv_out);
    EXPECT_EQ(priv_out.magic, 0x6b767031u);  // written by the kVP
    ri_qp_attr_t q{};
    ASSERT_RI_OK(sys(*c, RI_QUERY_QP, call.handle_out, nullptr, 0, &q, sizeof q));
    EXPECT_EQ(q.qp_num, priv_out.qp_num);
    ASSERT_EQ(call.nfds_out, 1u);
    uint64_t one = 1;
    EXPECT_EQ(::write(fds[0], &one, sizeof one), static_cast<ssize_t>(sizeof one));  // a live eventfd
    ::close(fds[0]);
    if (kMlockWorks) {
        EXPECT_EQ(locked_bytes() - locked, 4u * 4096);  // the queue memory is pinned and locked
    }
    EXPECT_RI_OK(sys(*c, RI_DESTROY_QP, call.handle_out, nullptr, 0));
    if (kMlockWorks) {
        EXPECT_EQ(locked_bytes(), locked);
    }
    // Private data the kVP does not accept comes back as its error, unchanged.
    call.priv_in_len = 3;
    EXPECT_STATUS(ual::device_syscall(c.get(), &call), RI_EINVAL);
}

// Event management: the kAL registers its handlers with the kVP and routes the kVP's events to the owner.
TEST_F(Syscall, KvpEventsReachTheOwningProcess) {
    auto c = client();
    auto other = client();
    (void)open_rnic(*other);
    uint64_t rnic = open_rnic(*c);
    uint32_t ceh = 0, aeh = 0;
    ASSERT_RI_OK(sys(*c, RI_SET_CEH, rnic, nullptr, 0, &ceh, sizeof ceh));
    ASSERT_RI_OK(sys(*c, RI_SET_AEH, rnic, nullptr, 0, &aeh, sizeof aeh));
    EXPECT_EQ(ceh, 2u);
    EXPECT_EQ(aeh, 1u);
    uint64_t pd = 0, cq = 0, qp = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    ri_cq_attr_t cqa{};
    cqa.cqe = 16;
    cqa.ceh_id = ceh;
    ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, &cqa, sizeof cqa, &cq));
    ri_qp_init_attr_t qa{}, qa_out{};
    qa.context = 0xfeed;
    ri_syscall_t call = create_qp_call(pd, cq, cq, qa, qa_out);
    ASSERT_RI_OK(ual::device_syscall(c.get(), &call));
    qp = call.handle_out;
    ModifyQp mod = to_state(RI_QPS_ERROR);
    ASSERT_RI_OK(sys(*c, RI_MODIFY_QP, qp, &mod, sizeof mod));
    std::vector<krdma_event> got;
    for (int i = 0; i < 200 && got.size() < 2; ++i) {
        if (auto e = c->next_event()) {
            got.push_back(*e);
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].event, static_cast<uint32_t>(KRDMA_EVENT_ASYNC));
    EXPECT_EQ(got[0].object, rnic);
    EXPECT_EQ(got[0].resource_type, static_cast<uint32_t>(RI_RES_QP));
    EXPECT_EQ(got[0].event_id, static_cast<uint32_t>(RI_AE_QP_FATAL));
    EXPECT_EQ(got[0].context, 0xfeedu);
    EXPECT_EQ(got[1].event, static_cast<uint32_t>(KRDMA_EVENT_COMPLETION));
    EXPECT_EQ(got[1].object, cq);  // the kAL's handle, not the kVP's pointer
    EXPECT_FALSE(other->next_event());  // nothing for a process that does not own the resource
    EXPECT_EQ(verbs_->event_counts().first, 2u);
}

TEST_F(Syscall, RegistrationsPinThroughTheKalAndShareOverlaps) {
    auto c = client();
    uint64_t rnic = open_rnic(*c);
    uint64_t pd = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    std::vector<uint8_t> buf(40 * 4096);
    uint64_t base = (reinterpret_cast<uint64_t>(buf.data()) + 4095) & ~uint64_t{4095};
    auto reg = [&](uint64_t addr, uint64_t len, uint64_t *mr) {
        const ri_mr_reg_t r = mr_reg(addr, len, RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE);
        ri_mr_keys_t keys{};
        return sys(*c, RI_REGISTER_MR, pd, &r, sizeof r, &keys, sizeof keys, mr);
    };
    uint64_t a = 0, b = 0, big = 0;
    const uint64_t locked = locked_bytes();
    ASSERT_RI_OK(reg(base, 8 * 4096, &a));
    ASSERT_RI_OK(reg(base + 4 * 4096, 8 * 4096, &b));  // overlaps the first by 4 pages
    auto pinned = [&] {
        auto admin = client();
        krdma_list_clients q{};
        auto r = admin->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        EXPECT_OK(r);
        std::memcpy(&q, r->payload.data(), sizeof q);
        return q.count > 0 ? q.info.pinned_bytes : 0;
    };
    EXPECT_EQ(pinned(), 12u * 4096);  // each page once
    EXPECT_EQ(budget_.used(), 12u * 4096);
    // The owner process locked exactly the pinned pages on the kAL's instruction.
    if (kMlockWorks) {
        EXPECT_EQ(locked_bytes() - locked, 12u * 4096);
    }
    // Over the per-process limit: the kVP's registration fails with the kAL's ENOSPC, unchanged.
    EXPECT_STATUS(reg(base + 100 * 4096, 60 * 4096, &big), RI_ENOSPC);
    EXPECT_EQ(pinned(), 12u * 4096);
    ASSERT_RI_OK(sys(*c, RI_DEREGISTER_MR, a, nullptr, 0));
    EXPECT_EQ(pinned(), 8u * 4096);
    if (kMlockWorks) {
        EXPECT_EQ(locked_bytes() - locked, 8u * 4096);  // the pages only the first region held were unlocked
    }
    c.reset();  // exits holding the second region: its pin goes with the connection
    // The context leaves the list before its objects are torn down (outside the lock): wait for the pins too.
    for (int i = 0; i < 1000 && (verbs_->contexts() != 0 || budget_.used() != 0); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(budget_.used(), 0u);
    (void)b;
}

// A registration whose every page another registration pinned already costs its owner no lock, nor its
// deregistration an unlock: the kAL's reply carries no instruction for them. One that adds pages locks its range.
TEST_F(Syscall, ARegistrationInsidePinnedPagesLocksNothing) {
    auto c = client();
    uint64_t rnic = open_rnic(*c);
    uint64_t pd = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    std::vector<uint8_t> buf(20 * 4096);
    const uint64_t base = (reinterpret_cast<uint64_t>(buf.data()) + 4095) & ~uint64_t{4095};
    auto mr_of = [](uint64_t addr, uint64_t len) { return mr_reg(addr, len, RI_ACCESS_LOCAL_WRITE); };
    const ri_mr_reg_t pool = mr_of(base, 8 * 4096);
    uint64_t whole = 0;
    ri_mr_keys_t keys{};
    ASSERT_RI_OK(sys(*c, RI_REGISTER_MR, pd, &pool, sizeof pool, &keys, sizeof keys, &whole));
    // The raw request, to see the kAL's pin instructions (device_syscall carries them out and keeps them).
    auto raw = [&](uint32_t op, uint64_t object, const void *param, uint32_t len, krdma_syscall &s) {
        s = krdma_syscall{};
        s.op = op;
        s.object = object;
        s.param_len = len;
        if (len > 0) std::memcpy(s.param, param, len);
        auto r = c->call_into(KRDMA_CMD_SYSCALL, {reinterpret_cast<const uint8_t *>(&s), sizeof s},
                              {reinterpret_cast<uint8_t *>(&s), sizeof s});
        return r && r->status == 0;
    };
    krdma_syscall s{};
    const ri_mr_reg_t inside = mr_of(base + 4096 + 100, 3 * 4096);
    ASSERT_TRUE(raw(RI_REGISTER_MR, pd, &inside, sizeof inside, s));
    EXPECT_EQ(s.npins, 0u) << "a registration inside pinned pages asked for a lock";
    const uint64_t inner = s.handle_out;
    ASSERT_TRUE(raw(RI_DEREGISTER_MR, inner, nullptr, 0, s));
    EXPECT_EQ(s.npins, 0u) << "its deregistration asked for an unlock while the pool still pins the pages";
    // Two new pages past the pool: the lock covers the registration's whole range.
    const ri_mr_reg_t past = mr_of(base + 6 * 4096, 4 * 4096);
    ASSERT_TRUE(raw(RI_REGISTER_MR, pd, &past, sizeof past, s));
    ASSERT_EQ(s.npins, 1u);
    EXPECT_EQ(s.pins[0].op, static_cast<uint32_t>(KRDMA_PIN_LOCK));
    EXPECT_EQ(s.pins[0].addr, base + 6 * 4096);
    EXPECT_EQ(s.pins[0].length, 4u * 4096);
    EXPECT_EQ(krdma::apply_pins({s.pins, s.npins}), 0);  // as the uAL would: the owner holds what the kAL counts
    ASSERT_TRUE(raw(RI_DEREGISTER_MR, s.handle_out, nullptr, 0, s));
    ASSERT_EQ(s.npins, 1u) << "the pages only the second registration held were not unlocked";
    EXPECT_EQ(s.pins[0].op, static_cast<uint32_t>(KRDMA_PIN_UNLOCK));
    EXPECT_EQ(s.pins[0].addr, base + 8 * 4096);
    EXPECT_EQ(s.pins[0].length, 2u * 4096);
    EXPECT_EQ(krdma::apply_pins({s.pins, s.npins}), 0);
    ASSERT_RI_OK(sys(*c, RI_DEREGISTER_MR, whole, nullptr, 0));
}

TEST_F(Syscall, HandlesAreCheckedAgainstTheCallersOwnTable) {
    auto a = client(), b = client();
    uint64_t rnic_a = open_rnic(*a);
    uint64_t pd_a = 0;
    ASSERT_RI_OK(sys(*a, RI_ALLOC_PD, rnic_a, nullptr, 0, nullptr, 0, &pd_a));
    ri_rnic_attr_t attr{};
    // Another process's handle, a made-up one, and a handle of the wrong type.
    EXPECT_STATUS(sys(*b, RI_QUERY_RNIC, rnic_a, nullptr, 0, &attr, sizeof attr), RI_EBADF);
    EXPECT_STATUS(sys(*b, RI_DEALLOC_PD, pd_a, nullptr, 0), RI_EBADF);
    EXPECT_STATUS(sys(*a, RI_QUERY_RNIC, 0xdeadbeefcafeull, nullptr, 0, &attr, sizeof attr), RI_EBADF);
    EXPECT_STATUS(sys(*a, RI_QUERY_RNIC, pd_a, nullptr, 0, &attr, sizeof attr), RI_EINVAL);
    EXPECT_STATUS(sys(*a, RI_ALLOC_PD, pd_a, nullptr, 0), RI_EINVAL);
    // And the owner still can.
    EXPECT_RI_OK(sys(*a, RI_QUERY_RNIC, rnic_a, nullptr, 0, &attr, sizeof attr));
}

// A reference must name an object of the RNIC open the verb runs on: that open's kVP (of another module, maybe)
// would take an object of another open for one of its own.
TEST_F(Syscall, ReferencesToAnotherRnicOpenAreRefused) {
    auto c = client();
    uint64_t rnic1 = open_rnic(*c), rnic2 = open_rnic(*c);
    uint64_t pd1 = 0, pd2 = 0, cq1 = 0, cq2 = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic1, nullptr, 0, nullptr, 0, &pd1));
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic2, nullptr, 0, nullptr, 0, &pd2));
    ri_cq_attr_t cqa{};
    cqa.cqe = 16;
    ri_cq_attr_t cq_out{};
    ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic1, &cqa, sizeof cqa, &cq_out, sizeof cq_out, &cq1));
    ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic2, &cqa, sizeof cqa, &cq_out, sizeof cq_out, &cq2));
    ri_qp_init_attr_t qa{}, qa_out{};
    qa.type = RI_QPT_RC;
    ri_syscall_t call = create_qp_call(pd1, cq1, cq2, qa, qa_out);
    EXPECT_STATUS(ual::device_syscall(c.get(), &call), RI_EINVAL);
    call.refs[0] = call.refs[1] = cq2;
    EXPECT_STATUS(ual::device_syscall(c.get(), &call), RI_EINVAL);
    // The same through the kVP's whole-request op (ABI 1.1).
    std::vector<uint8_t> queues(2 * 4096);
    struct {
        uint64_t addr, length;
    } mem{(reinterpret_cast<uint64_t>(queues.data()) + 4095) & ~uint64_t{4095}, 4096};
    call.priv_in = &mem;
    call.priv_in_len = sizeof mem;
    EXPECT_STATUS(ual::device_syscall(c.get(), &call), RI_EINVAL);
    EXPECT_EQ(budget_.used(), 0u);
    // A shared region in a PD of another open.
    ri_mr_reg_t reg{};
    reg.addr = mem.addr;
    reg.length = 4096;
    reg.access = RI_ACCESS_LOCAL_WRITE;
    uint64_t mr1 = 0;
    ri_mr_keys_t keys{};
    ASSERT_RI_OK(sys(*c, RI_REGISTER_MR, pd1, &reg, sizeof reg, &keys, sizeof keys, &mr1));
    ri_syscall_t shared{};
    shared.size = sizeof shared;
    shared.op = RI_REGISTER_SHARED_MR;
    shared.object = mr1;
    shared.refs[0] = pd2;
    shared.param = &reg;
    shared.param_len = sizeof reg;
    shared.result = &keys;
    shared.result_cap = sizeof keys;
    EXPECT_STATUS(ual::device_syscall(c.get(), &shared), RI_EINVAL);
    // References of the same open still work.
    call.refs[0] = call.refs[1] = cq1;
    call.priv_in = nullptr;
    call.priv_in_len = 0;
    ASSERT_RI_OK(ual::device_syscall(c.get(), &call));
    EXPECT_RI_OK(sys(*c, RI_DESTROY_QP, call.handle_out, nullptr, 0));
    EXPECT_RI_OK(sys(*c, RI_DEREGISTER_MR, mr1, nullptr, 0));
}

TEST_F(Syscall, MalformedCallsAreRefused) {
    auto c = client();
    ri_rnic_open_params_t p{};
    std::memset(p.instance_name, 'x', sizeof p.instance_name);  // no terminating NUL
    EXPECT_STATUS(sys(*c, RI_OPEN_RNIC, 0, &p, sizeof p), RI_EINVAL);
    std::strcpy(p.instance_name, "cpp0");
    EXPECT_STATUS(sys(*c, RI_OPEN_RNIC, 0, &p, sizeof p - 1), RI_EINVAL);
    std::strcpy(p.instance_name, "nosuch0");
    EXPECT_STATUS(sys(*c, RI_OPEN_RNIC, 0, &p, sizeof p), RI_ENODEV);
    EXPECT_STATUS(sys(*c, 9999, 0, nullptr, 0), RI_EOPNOTSUPP);
    std::vector<uint8_t> big(RI_SYSCALL_MAX_PARAM + 1);
    EXPECT_STATUS(sys(*c, RI_CREATE_CQ, 0, big.data(), static_cast<uint32_t>(big.size())), RI_EMSGSIZE);
    // A result buffer too small for the reply.
    uint64_t rnic = open_rnic(*c);
    ri_rnic_attr_t attr{};
    EXPECT_STATUS(sys(*c, RI_QUERY_RNIC, rnic, nullptr, 0, &attr, 8), RI_EOVERFLOW);
}

TEST_F(Syscall, ResourcesArePerProcessAndVisible) {
    auto c = client();
    uint64_t rnic = open_rnic(*c);
    uint64_t pd = 0;
    ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
    auto admin = client();
    krdma_list_clients q{};
    auto r = admin->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    ASSERT_OK(r);
    ASSERT_EQ(r->status, 0);
    std::memcpy(&q, r->payload.data(), sizeof q);
    ASSERT_EQ(q.count, 1u);  // only connections that created something have a context
    EXPECT_EQ(q.info.client_id, c->hello().client_id);
    EXPECT_EQ(q.info.pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(q.info.total, 2u);
    EXPECT_EQ(q.info.counts[static_cast<size_t>(kal::ResourceType::rnic)], 1u);
    EXPECT_EQ(q.info.counts[static_cast<size_t>(kal::ResourceType::pd)], 1u);
    c.reset();  // the consumer goes away: its entry and objects go with it
    for (int i = 0; i < 200 && verbs_->contexts() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    q = krdma_list_clients{};
    r = admin->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    ASSERT_OK(r);
    std::memcpy(&q, r->payload.data(), sizeof q);
    EXPECT_EQ(q.count, 0u);
}

TEST_F(Syscall, ClosedConnectionIsCleanedUp) {
    for (int round = 0; round < 3; ++round) {
        {
            auto c = client();
            uint64_t rnic = open_rnic(*c);
            uint64_t pd = 0, cq = 0;
            ASSERT_RI_OK(sys(*c, RI_ALLOC_PD, rnic, nullptr, 0, nullptr, 0, &pd));
            ri_cq_attr_t cqa{};
            cqa.cqe = 4;
            ASSERT_STATUS(sys(*c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, nullptr, 0, &cq), RI_EOVERFLOW);
            ri_cq_attr_t out{};
            ASSERT_RI_OK(sys(*c, RI_CREATE_CQ, rnic, &cqa, sizeof cqa, &out, sizeof out, &cq));
            EXPECT_EQ(opens(), 1u);
        }  // the process "exits" with an RNIC open, a PD and CQs
        for (int i = 0; i < 200 && (opens() != 0 || verbs_->contexts() != 0); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_EQ(opens(), 0u) << "round " << round;
        EXPECT_EQ(verbs_->contexts(), 0u);
    }
    EXPECT_OK(adapters_.detach("cpp0"));  // nothing holds it any more
}

}  // namespace
