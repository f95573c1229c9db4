// The kVP's half of the RDMA-mode transition, called the way the kAL calls it when MPA negotiation completes:
// modify_qp(STATE | LLP) with RTS and the negotiated parameters (fd -1: the stream lives in the consumer's
// process), then the QP state machine on the stream.
#include <fcntl.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "status_matchers.hpp"

namespace {

// The kAL's upcalls without page pinning (the kVP pins nothing it is not given a context for).
const ri_host_ops_t kKalHost{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

class KvpTransition : public ::testing::Test {
protected:
    void SetUp() override {
        loader_ = std::make_unique<rdma::rnicpi::ModuleLoader>(kKalHost, SOFTRNIC_PROVIDER_DIR);
        auto m = loader_->load("softrnic_kvp.so", RI_MODE_PRIVILEGED);
        ASSERT_OK(m) << m.error().to_string();
        kvp_ = *m;
        v_ = &kvp_->verbs();
        ri_attach_params_t ap{};
        std::strcpy(ap.name, "sr9");
        ap.options = R"({"max_ird": 16, "max_ord": 16})";
        ASSERT_RI_OK(kvp_->descriptor().attach(&ap, &instance_));
        ri_rnic_open_params_t op{};
        op.instance = instance_;
        ASSERT_RI_OK(v_->open_rnic(&op, &rnic_));
        ASSERT_RI_OK(v_->alloc_pd(rnic_, &pd_));
        ri_cq_attr_t ca{16, 0, 0};
        ASSERT_RI_OK(v_->create_cq(rnic_, &ca, &cq_));
        ri_qp_init_attr_t qa{};
        qa.type = RI_QPT_RC;
        qa.sq_depth = qa.rq_depth = 4;
        qa.sq_sge = qa.rq_sge = qa.rd_sge = 1;
        qa.ird = qa.ord = 2;
        ASSERT_RI_OK(v_->create_qp(pd_, cq_, cq_, nullptr, &qa, &qp_));
    }
    void TearDown() override {
        // Newest first; whatever SetUp made.
        if (qp_ != nullptr) {
            EXPECT_RI_OK(v_->destroy_qp(qp_));
        }
        if (cq_ != nullptr) {
            EXPECT_RI_OK(v_->destroy_cq(cq_));
        }
        if (pd_ != nullptr) {
            EXPECT_RI_OK(v_->dealloc_pd(pd_));
        }
        if (rnic_ != nullptr) {
            EXPECT_RI_OK(v_->close_rnic(rnic_));
        }
        if (instance_ != nullptr) {
            EXPECT_RI_OK(kvp_->descriptor().detach(instance_));
        }
    }
    static ri_llp_params_t negotiated() {
        ri_llp_params_t l{};
        l.fd = -1;
        l.mpa_revision = 2;
        l.mpa_flags = RI_MPA_CRC | RI_MPA_PEER2PEER | RI_MPA_INITIATOR;
        l.rtr_type = RI_RTR_WRITE;
        l.ird = 7;
        l.ord = 5;
        l.mss = 1460;
        l.fpdu_max = 1460;
        l.local_port = 4000;
        l.remote_port = 5000;
        return l;
    }
    ri_status_t to(uint32_t state, uint32_t mask = RI_QP_ATTR_STATE, const ri_llp_params_t &l = {}) {
        ri_qp_attr_t a{};
        a.state = state;
        a.llp = l;
        return v_->modify_qp(qp_, &a, mask);
    }
    ri_qp_attr_t query() {
        ri_qp_attr_t a{};
        EXPECT_RI_OK(v_->query_qp(qp_, &a));
        return a;
    }

    std::unique_ptr<rdma::rnicpi::ModuleLoader> loader_;
    rdma::rnicpi::ModuleRef kvp_;
    const ri_verbs_ops_t *v_ = nullptr;
    ri_instance_t instance_ = nullptr;
    ri_rnic_t rnic_ = nullptr;
    ri_pd_t pd_ = nullptr;
    ri_cq_t cq_ = nullptr;
    ri_qp_t qp_ = nullptr;
};

TEST_F(KvpTransition, RtsOnlyWithTheStreamAndItsParametersAreKept) {
    EXPECT_STATUS(to(RI_QPS_RTS), RI_ENOTCONN);  // no stream, nothing to send on
    ri_llp_params_t bad = negotiated();
    bad.mpa_revision = 3;
    EXPECT_STATUS(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, bad), RI_EINVAL);
    bad = negotiated();
    bad.ird = 17;  // over the instance's max_ird
    EXPECT_STATUS(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, bad), RI_ERANGE);
    bad = negotiated();
    bad.fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // a consumer hosted in the kAL gives a stream socket
    EXPECT_STATUS(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, bad), RI_EBADF);
    ::close(bad.fd);
    EXPECT_EQ(query().state, RI_QPS_IDLE);

    ASSERT_RI_OK(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, negotiated()));
    ri_qp_attr_t a = query();
    EXPECT_EQ(a.state, RI_QPS_RTS);
    EXPECT_EQ(a.ird, 7u);  // negotiated values replace the QP's own
    EXPECT_EQ(a.ord, 5u);
    EXPECT_EQ(a.llp.fd, -1);
    EXPECT_EQ(a.llp.mpa_flags, negotiated().mpa_flags);
    EXPECT_EQ(a.llp.rtr_type, uint32_t{RI_RTR_WRITE});
    EXPECT_EQ(a.llp.fpdu_max, 1460u);
    EXPECT_EQ(a.llp.remote_port, 5000u);
    // Once: the stream does not change under a QP in RTS, and attributes are frozen.
    EXPECT_STATUS(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, negotiated()), RI_EINVAL);
    EXPECT_STATUS(to(RI_QPS_IDLE), RI_EINVAL);
}

TEST_F(KvpTransition, StateMachineOnAStream) {
    ASSERT_RI_OK(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, negotiated()));
    ASSERT_RI_OK(to(RI_QPS_CLOSING));
    EXPECT_STATUS(to(RI_QPS_RTS), RI_EINVAL);
    EXPECT_STATUS(to(RI_QPS_TERMINATE), RI_EINVAL);
    EXPECT_STATUS(to(RI_QPS_IDLE), RI_EINVAL);
    ASSERT_RI_OK(to(RI_QPS_ERROR));
    EXPECT_STATUS(to(RI_QPS_RTS), RI_EINVAL);
    ASSERT_RI_OK(to(RI_QPS_IDLE));
    EXPECT_EQ(query().llp.mpa_revision, 0u);  // a reset QP is on no stream
    // RTS -> TERMINATE (with the consumer's code) -> ERROR.
    ASSERT_RI_OK(to(RI_QPS_RTS, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP, negotiated()));
    ri_qp_attr_t t{};
    t.state = RI_QPS_TERMINATE;
    t.term_layer_etype = 0x02;
    t.term_ecode = 0x06;
    ASSERT_RI_OK(v_->modify_qp(qp_, &t, RI_QP_ATTR_STATE | RI_QP_ATTR_TERM));
    EXPECT_STATUS(to(RI_QPS_CLOSING), RI_EINVAL);
    ASSERT_RI_OK(to(RI_QPS_ERROR));
    EXPECT_EQ(query().state, RI_QPS_ERROR);
}

// The data path's tunables are the instance's options: attach sets them, `rdmactl control` reads them with their
// help and changes them (whole or not at all) for what is made from now on.
TEST(KvpTunables, AttachOptionsAndControlSetThem) {
    rdma::rnicpi::ModuleLoader loader(kKalHost, SOFTRNIC_PROVIDER_DIR);
    auto m = loader.load("softrnic_kvp.so", RI_MODE_PRIVILEGED);
    ASSERT_OK(m) << m.error().to_string();
    const ri_module_t &d = (*m)->descriptor();
    ASSERT_NE(d.control, nullptr);
    ri_attach_params_t ap{};
    std::strcpy(ap.name, "sr8");
    for (const char *bad : {R"({"unsent_budget": -1})", R"({"unsent_budget": "4M"})", R"({"siw_nudge": 0})"}) {
        ri_instance_t i = nullptr;
        ap.options = bad;
        EXPECT_STATUS(d.attach(&ap, &i), RI_EINVAL) << bad;
    }
    ri_instance_t inst = nullptr;
    ap.options = R"({"unsent_budget": 1048576, "siw_nudge": false})";
    ASSERT_RI_OK(d.attach(&ap, &inst));
    char reply[2048];
    auto control = [&](const char *request) {
        reply[0] = '\0';
        return d.control(inst, request, reply, sizeof reply);
    };
    // Each tunable with its value, whether a control request changes it, and its help (rdmactl show -v).
    auto tunable = [&](const char *key) {
        const auto j = nlohmann::json::parse(reply, nullptr, false);
        return j.is_object() && j.contains("tunables") ? j["tunables"].value(key, nlohmann::json()) : nlohmann::json();
    };
    ASSERT_RI_OK(control("{}")) << reply;
    EXPECT_EQ(tunable("unsent_budget")["value"], 1048576) << reply;
    EXPECT_EQ(tunable("unsent_budget")["settable"], true) << reply;
    EXPECT_NE(tunable("unsent_budget")["help"].get<std::string>().find("TCP_NOTSENT_LOWAT"), std::string::npos)
        << "no help text: " << reply;
    EXPECT_EQ(tunable("siw_nudge")["value"], false) << reply;
    EXPECT_TRUE(tunable("siw_nudge")["help"].is_string()) << reply;
    ASSERT_RI_OK(control(R"({"unsent_budget": 0, "siw_nudge": true})")) << reply;
    EXPECT_EQ(tunable("unsent_budget")["value"], 0) << reply;
    EXPECT_EQ(tunable("siw_nudge")["value"], true) << reply;
    // A request with one bad part changes nothing.
    EXPECT_STATUS(control(R"({"unsent_budget": 5, "siw_nudge": "yes"})"), RI_EINVAL);
    EXPECT_NE(std::string(reply).find("siw_nudge"), std::string::npos) << reply;
    EXPECT_STATUS(control(R"({"speed": 1})"), RI_EINVAL);
    EXPECT_NE(std::string(reply).find("'speed'"), std::string::npos) << reply;
    ASSERT_RI_OK(control("{}")) << reply;
    EXPECT_EQ(tunable("unsent_budget")["value"], 0) << reply;
    EXPECT_LT(std::strlen(reply), 2047u) << "longer than the host passes on";
    EXPECT_RI_OK(d.detach(inst));
}

}  // namespace
