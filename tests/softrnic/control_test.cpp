// The softrnic control path end to end: consumer -> uVP -> ri_syscall -> uAL -> device -> kAL -> kVP and back,
// with an embedded kAL serving softrnic_kvp.so and softrnic_uvp.so loaded in non-privileged mode.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "embedded_kal.hpp"
#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "softrnic_abi.h"
#include "syscall.hpp"
#include "status_matchers.hpp"

namespace {

const ri_host_ops_t kUalHost{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr,
                             &ual::device_syscall, nullptr, nullptr, &ual::device_syscall_post};

kal::Config config(const std::string &options = "") {
    kal::Config c;
    c.provider_dir = SOFTRNIC_PROVIDER_DIR;
    c.modules = {"softrnic_kvp.so"};
    c.rnics = {kal::AttachRequest{"softrnic", "sr0", "", "127.0.0.1", options}};
    return c;
}

class Softrnic : public ::testing::Test {
protected:
    void SetUp() override { start(""); }

    void start(const std::string &options) {
        auto k = kal::EmbeddedKal::start(config(options));
        ASSERT_OK(k) << k.error().to_string();
        kal_ = std::move(*k);
        client_ = connect();
        ASSERT_NE(client_, nullptr);
        // The uAL loads the uVP the kAL names for the RNIC.
        auto rnics = kal_->adapters().list();
        ASSERT_EQ(rnics.size(), 1u);
        loader_ = std::make_unique<rdma::rnicpi::ModuleLoader>(kUalHost, SOFTRNIC_PROVIDER_DIR);
        auto m = loader_->load(rnics[0].uvp_library, RI_MODE_NONPRIVILEGED);
        ASSERT_OK(m) << m.error().to_string();
        uvp_ = *m;
        v_ = &uvp_->verbs();
    }

    void TearDown() override {
        // Whatever a failed test left, newest first, then the connection, the uVP and the kAL.
        while (!cleanup_.empty()) {
            auto f = std::move(cleanup_.back().second);
            cleanup_.pop_back();
            f();
        }
        extra_.clear();
        client_.reset();
        uvp_.reset();
        loader_.reset();
        kal_.reset();
    }

    std::unique_ptr<ual::DeviceClient> connect() {
        auto fd = kal_->connect_local();
        EXPECT_OK(fd);
        if (!fd) return nullptr;
        auto c = ual::DeviceClient::adopt(std::move(*fd));
        EXPECT_OK(c);
        return c ? std::move(*c) : nullptr;
    }

    // Registers a destroy step for @p object; forget() drops it once the test destroyed the object itself.
    void track(void *object, std::function<void()> destroy) { cleanup_.emplace_back(object, std::move(destroy)); }
    void forget(void *object) {
        auto it = std::find_if(cleanup_.rbegin(), cleanup_.rend(), [&](auto &e) { return e.first == object; });
        if (it != cleanup_.rend()) cleanup_.erase(std::next(it).base());
    }

    ri_rnic_t open(ual::DeviceClient *c = nullptr) {
        ri_rnic_open_params_t p{};
        p.host_ctx = c != nullptr ? c : client_.get();
        std::strcpy(p.instance_name, "sr0");
        ri_rnic_t r = nullptr;
        EXPECT_RI_OK(v_->open_rnic(&p, &r));
        if (r != nullptr) track(r, [this, r] { (void)v_->close_rnic(r); });
        return r;
    }
    ri_pd_t pd(ri_rnic_t r) {
        ri_pd_t p = nullptr;
        EXPECT_RI_OK(v_->alloc_pd(r, &p));
        if (p != nullptr) track(p, [this, p] { (void)v_->dealloc_pd(p); });
        return p;
    }
    ri_cq_t cq(ri_rnic_t r, uint32_t cqe = 16, uint32_t ceh_id = 0) {
        ri_cq_attr_t a{cqe, ceh_id, 0};
        ri_cq_t c = nullptr;
        EXPECT_RI_OK(v_->create_cq(r, &a, &c));
        if (c != nullptr) track(c, [this, c] { (void)v_->destroy_cq(c); });
        return c;
    }
    static ri_qp_init_attr_t qp_attr(uint32_t depth = 4) {
        ri_qp_init_attr_t a{};
        a.type = RI_QPT_RC;
        a.sq_depth = a.rq_depth = depth;
        a.sq_sge = a.rq_sge = a.rd_sge = 2;
        a.max_inline = 64;
        a.ird = a.ord = 4;
        a.context = 0xc0ffee;
        return a;
    }
    ri_status_t create_qp(ri_pd_t p, ri_cq_t s, ri_cq_t rc, ri_srq_t srq, ri_qp_init_attr_t a, ri_qp_t *out) {
        *out = nullptr;
        ri_status_t st = v_->create_qp(p, s, rc, srq, &a, out);
        if (*out != nullptr) {
            ri_qp_t q = *out;
            track(q, [this, q] { (void)v_->destroy_qp(q); });
        }
        return st;
    }
    ri_qp_t qp(ri_pd_t p, ri_cq_t s, ri_cq_t rc, ri_qp_init_attr_t a = qp_attr()) {
        ri_qp_t q = nullptr;
        EXPECT_RI_OK(create_qp(p, s, rc, nullptr, a, &q));
        return q;
    }
    ri_status_t reg(ri_pd_t p, const void *addr, uint64_t len, uint32_t access, ri_mr_t *out, ri_mr_keys_t *keys,
                    bool zero_based = false) {
        ri_mr_reg_t r{reinterpret_cast<uintptr_t>(addr), len, zero_based ? 0 : reinterpret_cast<uintptr_t>(addr),
                      access | (zero_based ? uint32_t{RI_ACCESS_ZERO_BASED} : 0u), 0};
        *out = nullptr;
        ri_status_t st = v_->register_mr(p, &r, out, keys);
        if (*out != nullptr) {
            ri_mr_t m = *out;
            track(m, [this, m] { (void)v_->deregister_mr(m); });
        }
        return st;
    }
    ri_status_t modify_state(ri_qp_t q, uint32_t state) {
        ri_qp_attr_t a{};
        a.state = state;
        return v_->modify_qp(q, &a, RI_QP_ATTR_STATE);
    }
    uint32_t state_of(ri_qp_t q) {
        ri_qp_attr_t a{};
        EXPECT_RI_OK(v_->query_qp(q, &a));
        return a.state;
    }
    std::vector<ri_wc_t> poll(ri_cq_t c, uint32_t max = 64) {
        std::vector<ri_wc_t> wc(max);
        uint32_t n = 0;
        EXPECT_RI_OK(v_->poll_cq(c, max, wc.data(), &n));
        wc.resize(n);
        return wc;
    }
    // The kAL's view of the connections: (number of contexts, objects, pinned bytes of the first).
    struct Usage {
        uint32_t clients = 0;
        uint32_t objects = 0;
        uint64_t pinned = 0;
    };
    Usage usage() {
        auto admin = connect();
        Usage u;
        if (admin == nullptr) return u;
        krdma_list_clients q{};
        auto r = admin->call(KRDMA_CMD_LIST_CLIENTS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        EXPECT_OK(r);
        if (!r || r->status != 0) return u;
        std::memcpy(&q, r->payload.data(), sizeof q);
        u.clients = q.count;
        if (q.count > 0) {
            u.objects = q.info.total;
            u.pinned = q.info.pinned_bytes;
        }
        return u;
    }

    std::unique_ptr<kal::EmbeddedKal> kal_;
    std::unique_ptr<ual::DeviceClient> client_;
    std::vector<std::unique_ptr<ual::DeviceClient>> extra_;
    std::unique_ptr<rdma::rnicpi::ModuleLoader> loader_;
    rdma::rnicpi::ModuleRef uvp_;
    const ri_verbs_ops_t *v_ = nullptr;
    std::vector<std::pair<void *, std::function<void()>>> cleanup_;
};

TEST_F(Softrnic, ModulesDescribeThemselves) {
    EXPECT_EQ(uvp_->name(), "softrnic");
    EXPECT_EQ(uvp_->vendor(), "OpenRDMA");
    EXPECT_EQ(uvp_->mode(), RI_MODE_NONPRIVILEGED);
    EXPECT_NE(uvp_->flags() & RI_MODULE_SOFTWARE, 0u);
    EXPECT_TRUE(uvp_->implements("post_send"));
    EXPECT_FALSE(uvp_->implements("register_phys_mr"));  // privileged mode only
    auto rnics = kal_->adapters().list();
    EXPECT_EQ(rnics.at(0).provider, "softrnic");
    EXPECT_EQ(rnics.at(0).vendor, "OpenRDMA");
}

TEST_F(Softrnic, OpenQueryAndClose) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(kal_->adapters().list().at(0).opens, 1u);
    ri_rnic_attr_t a{};
    ASSERT_RI_OK(v_->query_rnic(r, &a));
    EXPECT_STREQ(a.name, "sr0");
    const uint32_t want = RI_CAP_SRQ | RI_CAP_MW_TYPE2 | RI_CAP_SEND_INV | RI_CAP_ZERO_BASED | RI_CAP_MPA_CRC |
                          RI_CAP_MPA_PEER2PEER | RI_CAP_FAST_REG | RI_CAP_RESIZE_CQ;
    EXPECT_EQ(a.caps & want, want);
    // RFC 7306, for peers that speak it too.
    EXPECT_EQ(a.caps & (RI_CAP_ATOMICS | RI_CAP_IMMEDIATE), uint32_t{RI_CAP_ATOMICS | RI_CAP_IMMEDIATE});
    // Nothing it cannot do: no markers, no type 1 windows (nothing would bind them).
    EXPECT_EQ(a.caps & (RI_CAP_MPA_MARKERS | RI_CAP_MW_TYPE1), 0u);
    EXPECT_EQ(a.max_private_data, 508u);
    EXPECT_GT(a.max_qp, 0u);
    EXPECT_GT(a.max_qp_wr, 0u);
    EXPECT_GT(a.max_mr, 0u);
    forget(r);
    ASSERT_RI_OK(v_->close_rnic(r));
    EXPECT_EQ(kal_->adapters().list().at(0).opens, 0u);
}

TEST_F(Softrnic, AttachOptionsSetLimitsAndPolicy) {
    TearDown();
    start(R"({"max_qp": 2, "max_cqe": 8, "mpa_markers": true, "mpa_crc": false})");
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_rnic_attr_t a{};
    ASSERT_RI_OK(v_->query_rnic(r, &a));
    EXPECT_EQ(a.max_qp, 2u);
    EXPECT_EQ(a.max_cqe, 8u);
    EXPECT_NE(a.caps & RI_CAP_MPA_MARKERS, 0u);
    EXPECT_EQ(a.caps & RI_CAP_MPA_CRC, 0u);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r, 8);
    ASSERT_NE(c, nullptr);
    ri_qp_t q1 = qp(p, c, c), q2 = qp(p, c, c), q3 = nullptr;
    ASSERT_NE(q1, nullptr);
    ASSERT_NE(q2, nullptr);
    // The instance is full: the kVP's ENOSPC reaches the consumer unchanged.
    EXPECT_STATUS(create_qp(p, c, c, nullptr, qp_attr(), &q3), RI_ENOSPC);
    EXPECT_EQ(q3, nullptr);
}

TEST_F(Softrnic, BadAttachOptionsAreRefused) {
    for (const char *bad : {R"({"max_qpp": 2})", R"({"max_qp": 0})", R"({"max_qp": "many"})", R"({"mpa_crc": 1})",
                            "[1, 2]", "{not json"}) {
        auto k = kal::EmbeddedKal::start(config(bad));
        ASSERT_FALSE(k) << bad;
        EXPECT_NE(k.error().message().find("sr0"), std::string::npos) << k.error().to_string();
    }
}

TEST_F(Softrnic, CompletionQueues) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_rnic_attr_t a{};
    ASSERT_RI_OK(v_->query_rnic(r, &a));
    ri_cq_t c = cq(r, 32);
    ASSERT_NE(c, nullptr);
    ri_cq_attr_t q{};
    ASSERT_RI_OK(v_->query_cq(c, &q));
    EXPECT_EQ(q.cqe, 32u);
    // Depths beyond the limits: the conformance suite (Verbs.LimitsAreRefusedCleanly).
    // Resize CQ: a new ring, pinned in place of the old one (512 entries take more pages than 32).
    EXPECT_NE(a.caps & RI_CAP_RESIZE_CQ, 0u) << "softrnic resizes CQs and must say so";
    const uint64_t small_pinned = usage().pinned;
    uint32_t actual = 0;
    ASSERT_RI_OK(v_->resize_cq(c, 512, &actual));
    EXPECT_EQ(actual, 512u);
    ASSERT_RI_OK(v_->query_cq(c, &q));
    EXPECT_EQ(q.cqe, 512u) << "the kVP does not know the new depth";
    EXPECT_GT(usage().pinned, small_pinned) << "the bigger ring is not what is pinned";
    EXPECT_STATUS(v_->resize_cq(c, 0, &actual), RI_EINVAL);
    EXPECT_STATUS(v_->resize_cq(c, a.max_cqe + 1, &actual), RI_ERANGE);
    ASSERT_RI_OK(v_->resize_cq(c, 32, &actual));
    EXPECT_EQ(usage().pinned, small_pinned) << "the old ring stayed pinned after a resize";
    EXPECT_STATUS(v_->request_cq_notify(c, 7), RI_EINVAL);
    EXPECT_RI_OK(v_->request_cq_notify(c, RI_CQ_NOTIFY_NEXT));
    EXPECT_TRUE(poll(c).empty());
    // The completion ring is pinned by the kVP for as long as the CQ lives.
    EXPECT_GT(usage().pinned, 0u);
    forget(c);
    ASSERT_RI_OK(v_->destroy_cq(c));
    EXPECT_EQ(usage().pinned, 0u);
}

TEST_F(Softrnic, QpStateMachineWithoutAStream) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r);
    ri_qp_t q = qp(p, c, c);
    ASSERT_NE(q, nullptr);
    ri_qp_attr_t a{};
    ASSERT_RI_OK(v_->query_qp(q, &a));
    EXPECT_EQ(a.state, RI_QPS_IDLE);
    EXPECT_NE(a.qp_num, 0u);
    EXPECT_EQ(a.init.sq_depth, 4u);
    EXPECT_EQ(a.init.context, 0xc0ffeeu);
    // IDLE -> RTS needs an LLP stream: refused with ENOTCONN until connections exist.
    EXPECT_STATUS(modify_state(q, RI_QPS_RTS), RI_ENOTCONN);
    EXPECT_STATUS(modify_state(q, RI_QPS_CLOSING), RI_EINVAL);
    EXPECT_STATUS(modify_state(q, RI_QPS_TERMINATE), RI_EINVAL);
    EXPECT_STATUS(modify_state(q, 99), RI_EINVAL);
    EXPECT_EQ(state_of(q), RI_QPS_IDLE);
    // Attributes change in IDLE, within the RNIC's limits.
    ri_qp_attr_t m{};
    m.ird = 2;
    m.ord = 3;
    m.access = RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE;
    ASSERT_RI_OK(v_->modify_qp(q, &m, RI_QP_ATTR_IRD | RI_QP_ATTR_ORD | RI_QP_ATTR_ACCESS));
    ASSERT_RI_OK(v_->query_qp(q, &a));
    EXPECT_EQ(a.ird, 2u);
    EXPECT_EQ(a.ord, 3u);
    EXPECT_EQ(a.access, uint32_t{RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE});
    m.ird = 100000;
    EXPECT_STATUS(v_->modify_qp(q, &m, RI_QP_ATTR_IRD), RI_ERANGE);
    m.access = RI_ACCESS_REMOTE_ATOMIC;  // RFC 7306 (RI_CAP_ATOMICS)
    EXPECT_RI_OK(v_->modify_qp(q, &m, RI_QP_ATTR_ACCESS));
    m.access = RI_ACCESS_MW_BIND;  // not a QP's right
    EXPECT_STATUS(v_->modify_qp(q, &m, RI_QP_ATTR_ACCESS), RI_EINVAL);
    EXPECT_STATUS(v_->modify_qp(q, &m, RI_QP_ATTR_SQ_DEPTH), RI_EOPNOTSUPP);
    EXPECT_STATUS(v_->modify_qp(q, &m, 1u << 20), RI_EINVAL);
    // The RDMA-mode transition belongs to the kAL's connection management.
    EXPECT_STATUS(v_->modify_qp(q, &m, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP), RI_EOPNOTSUPP);
    // IDLE -> ERROR -> IDLE; RTS is not reachable from ERROR; attributes are frozen in ERROR.
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_EQ(state_of(q), RI_QPS_ERROR);
    EXPECT_STATUS(modify_state(q, RI_QPS_RTS), RI_EINVAL);
    EXPECT_STATUS(modify_state(q, RI_QPS_CLOSING), RI_EINVAL);
    m.ird = 1;
    EXPECT_STATUS(v_->modify_qp(q, &m, RI_QP_ATTR_IRD), RI_EINVAL);
    EXPECT_RI_OK(modify_state(q, RI_QPS_ERROR));
    ASSERT_RI_OK(modify_state(q, RI_QPS_IDLE));
    EXPECT_EQ(state_of(q), RI_QPS_IDLE);
}

TEST_F(Softrnic, QpCreationChecksItsAttributes) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r);
    ASSERT_NE(c, nullptr);
    ri_qp_t q = nullptr;
    auto bad = [&](auto change) {
        ri_qp_init_attr_t a = qp_attr();
        change(a);
        ri_status_t st = create_qp(p, c, c, nullptr, a, &q);
        EXPECT_EQ(q, nullptr);
        return st;
    };
    // Depths, SGEs, inline and ORD beyond Query RNIC's limits: the conformance suite (Verbs.LimitsAreRefusedCleanly).
    EXPECT_STATUS(bad([](auto &a) { a.flags = 1u << 9; }), RI_EINVAL);
    EXPECT_STATUS(bad([](auto &a) { a.type = RI_QPT_UD; }), RI_EOPNOTSUPP);
    EXPECT_STATUS(bad([](auto &a) { a.flags = RI_QP_USE_SRQ; }), RI_EINVAL);  // no SRQ named
    // A CQ of another RNIC open is refused.
    ri_rnic_t r2 = open();
    ri_cq_t other = cq(r2);
    ASSERT_NE(other, nullptr);
    EXPECT_STATUS(create_qp(p, c, other, nullptr, qp_attr(), &q), RI_EINVAL);
    EXPECT_EQ(q, nullptr);
    EXPECT_EQ(usage().objects, 5u);  // 2 opens, PD, 2 CQs: nothing left behind by the refusals
}

TEST_F(Softrnic, ResetFromErrorTakesRequestsAgain) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t scq = cq(r), rcq = cq(r);
    ri_qp_t q = qp(p, scq, rcq);
    ASSERT_NE(q, nullptr);
    ri_qp_attr_t qa{};
    ASSERT_RI_OK(v_->query_qp(q, &qa));
    char buf[64] = "payload";
    // Local buffers are checked at post: they must lie in a region of the QP's PD.
    ri_mr_t mr = nullptr;
    ri_mr_keys_t keys{};
    ASSERT_RI_OK(reg(p, buf, sizeof buf, RI_ACCESS_LOCAL_WRITE, &mr, &keys));
    ri_sge_t sge{reinterpret_cast<uintptr_t>(buf), 8, keys.lkey};
    ri_send_wr_t s[3]{};
    s[0].wr_id = 1;
    s[0].opcode = RI_WR_SEND;
    s[0].flags = RI_SEND_SIGNALED;
    s[0].sgl = &sge;
    s[0].num_sge = 1;
    s[1] = s[0];
    s[1].wr_id = 2;
    s[1].opcode = RI_WR_RDMA_WRITE;
    s[1].flags = RI_SEND_INLINE;  // unsignaled: flushed all the same
    s[2] = s[0];
    s[2].wr_id = 3;
    s[2].opcode = RI_WR_RDMA_READ;
    uint32_t posted = 0;
    ASSERT_RI_OK(v_->post_send(q, s, 3, &posted));
    EXPECT_EQ(posted, 3u);
    ri_recv_wr_t rw[2]{{10, &sge, 1, 0}, {11, nullptr, 0, 0}};
    ASSERT_RI_OK(v_->post_recv(q, rw, 2, &posted));
    EXPECT_EQ(posted, 2u);
    EXPECT_TRUE(poll(scq).empty());  // queued, not executed: there is no stream
    EXPECT_TRUE(poll(rcq).empty());

    // Flushes in posting order, and posts in ERROR: the conformance suite (Verbs.ModifyToErrorFlushesEveryPostedRequest).
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_EQ(poll(scq).size(), 3u);
    EXPECT_EQ(poll(rcq).size(), 2u);

    // After a reset the queues take requests again and nothing completes.
    ASSERT_RI_OK(modify_state(q, RI_QPS_IDLE));
    ASSERT_RI_OK(v_->post_send(q, s, 1, &posted));
    EXPECT_TRUE(poll(scq).empty());
}

TEST_F(Softrnic, PostChecksEveryRequest) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r, 64);
    ri_qp_t q = qp(p, c, c);
    ASSERT_NE(q, nullptr);
    char buf[128] = {};
    ri_mr_t mr = nullptr;
    ri_mr_keys_t keys{};
    ASSERT_RI_OK(reg(p, buf, sizeof buf, RI_ACCESS_LOCAL_WRITE, &mr, &keys));
    const ri_stag_t k = keys.lkey;
    ri_sge_t sges[3] = {{reinterpret_cast<uintptr_t>(buf), 8, k}, {reinterpret_cast<uintptr_t>(buf), 8, k},
                        {reinterpret_cast<uintptr_t>(buf), 8, k}};
    ri_send_wr_t w{};
    w.opcode = RI_WR_SEND;
    w.sgl = sges;
    w.num_sge = 1;
    uint32_t posted = 99;
    auto post = [&](ri_send_wr_t x) { return v_->post_send(q, &x, 1, &posted); };
    ri_send_wr_t x = w;
    x.num_sge = 3;  // over sq_sge = 2
    EXPECT_STATUS(post(x), RI_ERANGE);
    EXPECT_EQ(posted, 0u);
    x = w;
    x.opcode = 77;
    EXPECT_STATUS(post(x), RI_EINVAL);
    // RFC 7306 atomics: one 8-byte sink, a 64-bit aligned target (the peer's agreement is the stream's, checked
    // once there is one).
    x.opcode = RI_WR_ATOMIC_FETCH_ADD;
    x.num_sge = 2;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x.num_sge = 1;
    x.u.atomic.remote_addr = 4;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x.opcode = RI_WR_ATOMIC_CMP_SWAP;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x = w;
    x.flags = RI_SEND_SOLICITED;  // only for Immediate Data
    EXPECT_STATUS(post(x), RI_EINVAL);
    x = w;
    x.opcode = RI_WR_IMMEDIATE;  // carries no payload
    EXPECT_STATUS(post(x), RI_ERANGE);
    x = w;
    x.flags = 1u << 7;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x = w;
    x.opcode = RI_WR_RDMA_READ;
    x.flags = RI_SEND_INLINE;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x = w;
    x.flags = RI_SEND_INLINE;
    sges[0].length = 65;  // over max_inline = 64
    EXPECT_STATUS(post(x), RI_ERANGE);
    sges[0].length = 8;
    x = w;
    x.sgl = nullptr;
    EXPECT_STATUS(post(x), RI_EINVAL);
    x = w;
    x.opcode = RI_WR_BIND_MW;  // names no window
    EXPECT_STATUS(post(x), RI_EINVAL);
    EXPECT_TRUE(poll(c).empty());
    // A batch stops at the first bad request; the ones before it are queued.
    ri_send_wr_t batch[3] = {w, w, w};
    batch[1].num_sge = 5;
    EXPECT_STATUS(v_->post_send(q, batch, 3, &posted), RI_ERANGE);
    EXPECT_EQ(posted, 1u);
    // A full send queue answers EAGAIN (back-pressure, retry later).
    ri_send_wr_t many[4] = {w, w, w, w};
    EXPECT_STATUS(v_->post_send(q, many, 4, &posted), RI_EAGAIN);
    EXPECT_EQ(posted, 3u);
    ri_recv_wr_t rw[5] = {};
    EXPECT_STATUS(v_->post_recv(q, rw, 5, &posted), RI_EAGAIN);
    EXPECT_EQ(posted, 4u);
    ri_recv_wr_t wide{1, sges, 3, 0};
    EXPECT_STATUS(v_->post_recv(q, &wide, 1, &posted), RI_ERANGE);
    // Everything queued is flushed, nothing refused was.
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_EQ(poll(c).size(), 4u + 4u);
}

void count_ceh(void *ctx, ri_rnic_t, ri_cq_t) { ++*static_cast<int *>(ctx); }

TEST_F(Softrnic, CompletionEventHandlerFiresOncePerArm) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    int calls = 0;
    uint32_t ceh = 0;
    ASSERT_RI_OK(v_->set_ceh(r, &count_ceh, &calls, &ceh));
    uint32_t aeh = 0;
    ASSERT_RI_OK(v_->set_aeh(r, nullptr, nullptr, &aeh));
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r, 16, ceh);
    ri_qp_t q = qp(p, c, c);
    ASSERT_NE(q, nullptr);
    ri_recv_wr_t rw[2] = {};
    uint32_t posted = 0;
    ASSERT_RI_OK(v_->post_recv(q, rw, 2, &posted));
    ASSERT_RI_OK(v_->request_cq_notify(c, RI_CQ_NOTIFY_SOLICITED));
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_EQ(calls, 1);  // error completions satisfy a solicited request; one call for the batch
    EXPECT_EQ(poll(c).size(), 2u);
    ASSERT_RI_OK(v_->post_recv(q, rw, 1, &posted));
    EXPECT_EQ(calls, 1);  // not armed any more
    ASSERT_RI_OK(v_->request_cq_notify(c, RI_CQ_NOTIFY_NEXT));
    ASSERT_RI_OK(v_->post_recv(q, rw, 1, &posted));
    EXPECT_EQ(calls, 2);
    EXPECT_RI_OK(v_->clear_handler(r, ceh));
    EXPECT_STATUS(v_->clear_handler(r, ceh), RI_ENOENT);
}

TEST_F(Softrnic, CqOverflowIsReported) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r, 2);
    ri_qp_t q = qp(p, c, c);
    ASSERT_NE(q, nullptr);
    ri_recv_wr_t rw[4] = {};
    uint32_t posted = 0;
    ASSERT_RI_OK(v_->post_recv(q, rw, 4, &posted));
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_EQ(poll(c).size(), 2u);
    ri_wc_t wc{};
    uint32_t n = 0;
    EXPECT_STATUS(v_->poll_cq(c, 1, &wc, &n), RI_EOVERFLOW);
    EXPECT_EQ(n, 0u);
}

TEST_F(Softrnic, SharedReceiveQueues) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r);
    ri_srq_attr_t a{4, 2, 0, 0, 7};
    ri_srq_t srq = nullptr;
    ASSERT_RI_OK(v_->create_srq(p, &a, &srq));
    ASSERT_NE(srq, nullptr);
    track(srq, [this, srq] { (void)v_->destroy_srq(srq); });
    ri_srq_attr_t got{};
    ASSERT_RI_OK(v_->query_srq(srq, &got));
    EXPECT_EQ(got.max_wr, 4u);
    EXPECT_EQ(got.max_sge, 2u);
    EXPECT_EQ(got.context, 7u);
    ri_srq_attr_t m{};
    m.limit = 3;
    ASSERT_RI_OK(v_->modify_srq(srq, &m, RI_SRQ_ATTR_LIMIT));
    ASSERT_RI_OK(v_->query_srq(srq, &got));
    EXPECT_EQ(got.limit, 3u);
    m.limit = 5;
    EXPECT_STATUS(v_->modify_srq(srq, &m, RI_SRQ_ATTR_LIMIT), RI_ERANGE);
    m.max_wr = 8;
    EXPECT_STATUS(v_->modify_srq(srq, &m, RI_SRQ_ATTR_MAX_WR), RI_EOPNOTSUPP);
    ri_rnic_attr_t lim{};
    ASSERT_RI_OK(v_->query_rnic(r, &lim));
    ri_srq_attr_t big{lim.max_srq_wr + 1, 1, 0, 0, 0}, none{0, 1, 0, 0, 0};
    ri_srq_t bad = nullptr;
    EXPECT_STATUS(v_->create_srq(p, &big, &bad), RI_ERANGE);
    EXPECT_STATUS(v_->create_srq(p, &none, &bad), RI_EINVAL);

    ri_qp_init_attr_t qa = qp_attr();
    qa.flags = RI_QP_USE_SRQ;
    qa.rq_depth = 0;
    ri_qp_t q = nullptr;
    ASSERT_RI_OK(create_qp(p, c, c, srq, qa, &q));
    ri_recv_wr_t rw[5] = {};
    uint32_t posted = 0;
    EXPECT_STATUS(v_->post_recv(q, rw, 1, &posted), RI_EINVAL);  // its receives come from the SRQ
    EXPECT_STATUS(v_->post_srq_recv(srq, rw, 5, &posted), RI_EAGAIN);
    EXPECT_EQ(posted, 4u);
    // The kAL keeps an SRQ while a QP uses it.
    EXPECT_STATUS(v_->destroy_srq(srq), RI_EBUSY);
    // A QP in error does not flush the SRQ's requests.
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    EXPECT_TRUE(poll(c).empty());
    forget(q);
    ASSERT_RI_OK(v_->destroy_qp(q));
    forget(srq);
    EXPECT_RI_OK(v_->destroy_srq(srq));
}

TEST_F(Softrnic, MemoryRegistration) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    std::vector<char> mem(5 * 4096);
    ri_mr_t mr = nullptr;
    ri_mr_keys_t k{};
    ASSERT_RI_OK(reg(p, mem.data(), 4096, RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE, &mr, &k));
    EXPECT_NE(k.lkey, 0u);
    EXPECT_EQ(k.lkey, k.rkey);  // iWARP: one STag
    ri_mr_attr_t a{};
    ASSERT_RI_OK(v_->query_mr(mr, &a));
    EXPECT_EQ(a.addr, reinterpret_cast<uintptr_t>(mem.data()));
    EXPECT_EQ(a.length, 4096u);
    EXPECT_EQ(a.state, RI_STAG_VALID);
    EXPECT_EQ(a.keys.lkey, k.lkey);
    EXPECT_NE(a.access & RI_ACCESS_LOCAL_READ, 0u);  // always granted
    EXPECT_GT(usage().pinned, 0u);

    // The verbs' rules for rights: remote writes and atomics need local write.
    ri_mr_t bad = nullptr;
    ri_mr_keys_t bk{};
    EXPECT_STATUS(reg(p, mem.data(), 4096, RI_ACCESS_REMOTE_WRITE, &bad, &bk), RI_EINVAL);
    EXPECT_STATUS(reg(p, mem.data(), 4096, RI_ACCESS_REMOTE_ATOMIC, &bad, &bk), RI_EINVAL);
    EXPECT_STATUS(reg(p, mem.data(), 4096, 1u << 12, &bad, &bk), RI_EINVAL);
    EXPECT_STATUS(reg(p, mem.data(), 0, RI_ACCESS_LOCAL_WRITE, &bad, &bk), RI_EINVAL);
    ri_mr_reg_t odd{reinterpret_cast<uintptr_t>(mem.data()), 4096, 12345, RI_ACCESS_LOCAL_WRITE, 0};
    EXPECT_STATUS(v_->register_mr(p, &odd, &bad, &bk), RI_EINVAL);  // tagged offset neither the address nor zero-based
    EXPECT_EQ(bad, nullptr);

    // Zero-based regions.
    ri_mr_t zb = nullptr;
    ri_mr_keys_t zk{};
    ASSERT_RI_OK(reg(p, mem.data() + 4096, 4096, RI_ACCESS_REMOTE_READ, &zb, &zk, true));
    ASSERT_RI_OK(v_->query_mr(zb, &a));
    EXPECT_EQ(a.iova, 0u);

    // Reregistration: new translation and rights, a new key on the same index.
    ri_mr_reg_t nr{reinterpret_cast<uintptr_t>(mem.data() + 2 * 4096), 8192,
                   reinterpret_cast<uintptr_t>(mem.data() + 2 * 4096), RI_ACCESS_REMOTE_READ, 0};
    ri_mr_keys_t k2{};
    ASSERT_RI_OK(v_->reregister_mr(mr, RI_REREG_TRANSLATION | RI_REREG_ACCESS, nullptr, &nr, &k2));
    EXPECT_NE(k2.lkey, k.lkey);
    EXPECT_EQ(k2.lkey >> 8, k.lkey >> 8);
    ASSERT_RI_OK(v_->query_mr(mr, &a));
    EXPECT_EQ(a.length, 8192u);
    EXPECT_EQ(a.keys.lkey, k2.lkey);
    EXPECT_NE(a.access & RI_ACCESS_REMOTE_READ, 0u);
    nr.access = RI_ACCESS_REMOTE_WRITE;  // without local write
    EXPECT_STATUS(v_->reregister_mr(mr, RI_REREG_ACCESS, nullptr, &nr, &k2), RI_EINVAL);
    EXPECT_STATUS(v_->reregister_mr(mr, RI_REREG_PD, p, &nr, &k2), RI_EOPNOTSUPP);

    // A shared region keeps the pages pinned after the original goes.
    ri_mr_t sh = nullptr;
    ri_mr_keys_t sk{};
    ASSERT_RI_OK(v_->register_shared_mr(mr, p, reinterpret_cast<uintptr_t>(mem.data() + 2 * 4096), RI_ACCESS_LOCAL_WRITE,
                                     &sh, &sk));
    track(sh, [this, sh] { (void)v_->deregister_mr(sh); });
    EXPECT_NE(sk.lkey, k2.lkey);
    const uint64_t before = usage().pinned;
    forget(mr);
    ASSERT_RI_OK(v_->deregister_mr(mr));
    EXPECT_EQ(usage().pinned, before);
    ASSERT_RI_OK(v_->query_mr(sh, &a));
    EXPECT_EQ(a.length, 8192u);
    forget(sh);
    ASSERT_RI_OK(v_->deregister_mr(sh));
    forget(zb);
    ASSERT_RI_OK(v_->deregister_mr(zb));
    EXPECT_EQ(usage().pinned, 0u);
}

TEST_F(Softrnic, StagsAndWindows) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_rnic_attr_t lim{};
    ASSERT_RI_OK(v_->query_rnic(r, &lim));
    ri_mr_t st = nullptr;
    ri_mr_keys_t k{};
    ASSERT_RI_OK(v_->alloc_stag(p, 16, &st, &k));
    track(st, [this, st] { (void)v_->deregister_mr(st); });
    ri_mr_attr_t a{};
    ASSERT_RI_OK(v_->query_mr(st, &a));
    EXPECT_EQ(a.state, RI_STAG_INVALID);
    EXPECT_EQ(a.max_pages, 16u);
    ri_mr_t bad = nullptr;
    EXPECT_STATUS(v_->alloc_stag(p, lim.max_fast_reg_pages + 1, &bad, &k), RI_ERANGE);
    EXPECT_STATUS(v_->alloc_stag(p, 0, &bad, &k), RI_EINVAL);
    ri_mr_reg_t nr{};
    ri_mr_keys_t k2{};
    EXPECT_STATUS(v_->reregister_mr(st, RI_REREG_ACCESS, nullptr, &nr, &k2), RI_EINVAL);

    std::set<ri_stag_t> stags{k.lkey};
    ri_mw_t mw[2] = {};
    for (ri_mw_t &w : mw) {
        ri_stag_t rkey = 0;
        ASSERT_RI_OK(v_->alloc_mw(p, RI_MW_TYPE_2, &w, &rkey));
        ri_mw_t h = w;
        track(h, [this, h] { (void)v_->dealloc_mw(h); });
        EXPECT_TRUE(stags.insert(rkey).second) << "windows and regions share one STag namespace";
    }
    ri_mw_t w3 = nullptr;
    ri_stag_t r3 = 0;
    EXPECT_STATUS(v_->alloc_mw(p, 3, &w3, &r3), RI_EINVAL);
    // Type 1 windows are not offered (no RI_CAP_MW_TYPE1): nothing would bind them.
    EXPECT_STATUS(v_->alloc_mw(p, RI_MW_TYPE_1, &w3, &r3), RI_EOPNOTSUPP);
    ri_cq_t c = cq(r);
    ri_qp_t q = qp(p, c, c);
    // A type 2 window binds by work request; flushed like any other request.
    std::vector<char> mem(4096);
    ri_mr_t mr = nullptr;
    ASSERT_RI_OK(reg(p, mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_MW_BIND, &mr, &k));
    ri_send_wr_t b{};
    b.wr_id = 5;
    b.opcode = RI_WR_BIND_MW;
    b.u.bind.mw = mw[1];
    b.u.bind.mr = mr;
    b.u.bind.length = 64;
    uint32_t posted = 0;
    ASSERT_RI_OK(v_->post_send(q, &b, 1, &posted));
    ASSERT_RI_OK(modify_state(q, RI_QPS_ERROR));
    auto wc = poll(c);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].opcode, RI_WC_BIND_MW);
    for (int i = 1; i >= 0; --i) {
        forget(mw[i]);
        EXPECT_RI_OK(v_->dealloc_mw(mw[i]));
    }
}

TEST_F(Softrnic, KvpRefusesAnotherPrivateAbi) {
    // A uVP of another softrnic release: its private data names another major version.
    ri_rnic_open_params_t p{};
    std::strcpy(p.instance_name, "sr0");
    softrnic_open_req req{};
    req.hdr.version = (SOFTRNIC_ABI_MAJOR + 1) << 16;
    req.hdr.size = sizeof req;
    softrnic_open_resp resp{};
    ri_syscall_t call{};
    call.size = sizeof call;
    call.op = RI_OPEN_RNIC;
    call.param = &p;
    call.param_len = sizeof p;
    call.priv_in = &req;
    call.priv_in_len = sizeof req;
    call.priv_out = &resp;
    call.priv_out_cap = sizeof resp;
    EXPECT_STATUS(ual::device_syscall(client_.get(), &call), RI_EPROTO);
    EXPECT_EQ(call.handle_out, 0u);
    EXPECT_EQ(kal_->adapters().list().at(0).opens, 0u);
}

// A uVP built against softrnic's private ABI 1.1 has room for the Open RNIC reply of 1.1 only (the 1.2 reply added
// the tunables): its request says 1.1, the kVP writes that much, and the open works; less room is still
// RI_EOVERFLOW.
TEST_F(Softrnic, KvpAnswersAnOlderMinorUvpInItsReplySize) {
    struct Resp11 {  // softrnic_open_resp as ABI 1.1 had it
        softrnic_priv_hdr hdr;
        uint32_t max_ceh, reserved, counter_slots, counter_slot_size;
    };
    static_assert(sizeof(Resp11) == SOFTRNIC_OPEN_RESP_SIZE_1_1);
    struct Open {
        ri_rnic_open_params_t p{};
        softrnic_open_req req{};
        uint8_t resp[sizeof(softrnic_open_resp) + 8];
        int32_t fds[RI_SYSCALL_MAX_FDS];
        ri_syscall_t call{};
        Open(uint32_t minor, uint32_t room) {
            std::memset(resp, 0xee, sizeof resp);
            std::strcpy(p.instance_name, "sr0");
            req.hdr.version = (SOFTRNIC_ABI_MAJOR << 16) | minor;
            req.hdr.size = sizeof req;
            call.size = sizeof call;
            call.op = RI_OPEN_RNIC;
            call.param = &p;
            call.param_len = sizeof p;
            call.priv_in = &req;
            call.priv_in_len = sizeof req;
            call.priv_out = resp;
            call.priv_out_cap = room;
            call.fds_out = fds;
            call.nfds_out_cap = RI_SYSCALL_MAX_FDS;
        }
        ~Open() {
            for (uint32_t i = 0; i < call.nfds_out; ++i) ::close(fds[i]);
        }
    };
    auto close_rnic = [this](uint64_t handle) {
        ri_syscall_t c{};
        c.size = sizeof c;
        c.op = RI_CLOSE_RNIC;
        c.object = handle;
        EXPECT_EQ(ual::device_syscall(client_.get(), &c), RI_OK);
    };

    Open old(1, sizeof(Resp11));
    ASSERT_EQ(ual::device_syscall(client_.get(), &old.call), RI_OK);
    EXPECT_NE(old.call.handle_out, 0u);
    ASSERT_EQ(old.call.priv_out_len, sizeof(Resp11));
    Resp11 r11;
    std::memcpy(&r11, old.resp, sizeof r11);
    EXPECT_EQ(r11.hdr.version >> 16, SOFTRNIC_ABI_MAJOR);
    EXPECT_EQ(r11.hdr.size, sizeof(Resp11));
    EXPECT_GT(r11.max_ceh, 0u);
    EXPECT_GT(r11.counter_slots, 0u);  // the counters region came with it
    EXPECT_EQ(r11.counter_slot_size, sizeof(softrnic_qp_counters));
    EXPECT_EQ(old.call.nfds_out, 1u);
    EXPECT_EQ(old.resp[sizeof(Resp11)], 0xee) << "written past the 1.1 uVP's room";
    EXPECT_EQ(kal_->adapters().list().at(0).opens, 1u);
    close_rnic(old.call.handle_out);

    // Today's uVP gets the whole reply, tunables included.
    Open now(SOFTRNIC_ABI_MINOR, sizeof(softrnic_open_resp));
    ASSERT_EQ(ual::device_syscall(client_.get(), &now.call), RI_OK);
    ASSERT_EQ(now.call.priv_out_len, sizeof(softrnic_open_resp));
    softrnic_open_resp full;
    std::memcpy(&full, now.resp, sizeof full);
    EXPECT_EQ(full.hdr.size, sizeof full);
    EXPECT_EQ(full.unsent_budget, 4u << 20);
    EXPECT_EQ(full.siw_nudge, 1u);
    close_rnic(now.call.handle_out);

    // Less room than the reply its version knows is still refused.
    Open tiny(1, SOFTRNIC_OPEN_RESP_SIZE_1_1 - 8);
    EXPECT_EQ(ual::device_syscall(client_.get(), &tiny.call), RI_EOVERFLOW);
    EXPECT_EQ(tiny.call.priv_out_len, 0u);
}

TEST_F(Softrnic, EverythingIsReleasedWhenTheConnectionCloses) {
    ri_rnic_t r = open();
    ASSERT_NE(r, nullptr);
    ri_pd_t p = pd(r);
    ri_cq_t c = cq(r);
    ri_qp_t q = qp(p, c, c);
    ASSERT_NE(q, nullptr);
    ri_srq_attr_t sa{4, 1, 0, 0, 0};
    ri_srq_t srq = nullptr;
    ASSERT_RI_OK(v_->create_srq(p, &sa, &srq));
    track(srq, [this, srq] { (void)v_->destroy_srq(srq); });
    std::vector<char> mem(3 * 4096);
    ri_mr_t mr = nullptr;
    ri_mr_keys_t k{};
    ASSERT_RI_OK(reg(p, mem.data(), mem.size(), RI_ACCESS_LOCAL_WRITE, &mr, &k));
    ri_mw_t mw = nullptr;
    ri_stag_t rkey = 0;
    ASSERT_RI_OK(v_->alloc_mw(p, RI_MW_TYPE_2, &mw, &rkey));
    track(mw, [this, mw] { (void)v_->dealloc_mw(mw); });
    Usage before = usage();
    EXPECT_EQ(before.clients, 1u);
    EXPECT_EQ(before.objects, 7u);  // open, PD, CQ, QP, SRQ, MR, MW
    EXPECT_GE(before.pinned, 3u * 4096 + 3 * 4096);  // the region and the CQ, SQ, RQ and SRQ rings

    // The consumer's connection goes away with everything in place (as when the process dies).
    ASSERT_EQ(::shutdown(client_->socket(), SHUT_RDWR), 0);
    Usage after;
    for (int i = 0; i < 400; ++i) {
        after = usage();
        if (after.clients == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(after.clients, 0u);
    EXPECT_EQ(after.pinned, 0u);
    EXPECT_EQ(kal_->adapters().list().at(0).opens, 0u);
    // The uVP lets the consumer release what the kAL already tore down.
    ASSERT_RI_OK(v_->dealloc_mw(mw));
    forget(mw);
}

}  // namespace
