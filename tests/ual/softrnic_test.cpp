// The access layer over the softrnic provider pair, through real kALs:
// - the object model end to end (embedded kAL): zones, CQs with DTO dispatchers, endpoints, SRQs, regions,
//   windows (flushes and destroy order are in the provider conformance suite, tests/conformance/);
// - OpenRDMA Figure 4, literally: the order of the steps of a QP creation across consumer, uAL, uVP, device, kAL
//   and kVP, recorded from every layer's log;
// - kill -9 of real consumer processes holding every object type: krdmad reclaims all of it and all pins, and
//   rdmactl's counts return to their baseline (repeated).
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>

#include "krdmad_fixture.hpp"
#include "rnicpi/host/log.hpp"
#include "embedded_link.hpp"
#include "ual/access_layer.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;

std::string softrnic_config(const std::string &device) {
    return std::string(R"({"device": ")") + device + R"(", "provider_dir": ")" SOFTRNIC_PROVIDER_DIR R"(",
        "modules": ["softrnic_kvp.so"],
        "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]})";
}

class SoftrnicAccessLayer : public testutil::KrdmadFixture {
protected:
    std::shared_ptr<ual::AccessLayer> embedded() {
        ual::Options o;
        o.embedded_kal = &kal::start_embedded_link;
        o.embedded_config = write_config(softrnic_config((dir_ / "unused").string()));
        auto al = ual::AccessLayer::open(o);
        EXPECT_OK(al) << (al ? "" : al.error().to_string());
        return al ? *al : nullptr;
    }
};

template <class T>
std::shared_ptr<T> ok(rdma::Expected<std::shared_ptr<T>> r) {
    EXPECT_OK(r) << (r ? "" : r.error().to_string());
    return r ? *r : nullptr;
}

TEST_F(SoftrnicAccessLayer, ObjectModelEndToEnd) {
    auto al = embedded();
    ASSERT_NE(al, nullptr);
    auto adapter = ok((*al).open_adapter("127.0.0.1"));
    ASSERT_NE(adapter, nullptr);
    auto attr = adapter->query();
    ASSERT_OK(attr);
    EXPECT_NE(attr->caps & RI_CAP_SRQ, 0u);
    EXPECT_EQ(attr->max_private_data, 508u);
    auto pz = ok(adapter->create_pz());
    auto dto = ok(ual::SimpleDispatcher::create(ual::EventStream::dto, 64));
    auto cq = ok(adapter->create_cq(64, dto));
    ASSERT_TRUE(pz && cq);
    EXPECT_GE(cq->depth(), 64u);
    EXPECT_STATUS(adapter->create_cq(8, dto), RI_EBUSY);  // one CQ per DTO dispatcher
    ual::EndpointAttributes ea;
    ea.context = 0xc0ffee;
    auto ep = ok(pz->create_endpoint(ea, cq, cq));
    ASSERT_NE(ep, nullptr);
    EXPECT_NE(ep->qp_num(), 0u);
    auto srq = ok(pz->create_srq(16, 2, 4));
    auto ep2 = ok(pz->create_endpoint(ea, cq, cq, srq));
    ASSERT_TRUE(srq && ep2);
    EXPECT_NE(ep2->qp_num(), ep->qp_num());
    std::vector<char> buf(64 * 1024);
    auto mr = ok(pz->register_memory(buf.data(), buf.size(), RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE));
    ASSERT_NE(mr, nullptr);
    EXPECT_NE(mr->keys().lkey, 0u);
    auto mw1 = ok(pz->allocate_window(RI_MW_TYPE_2));
    auto mw2 = ok(pz->allocate_window(RI_MW_TYPE_2));
    ASSERT_TRUE(mw1 && mw2);
    EXPECT_NE(mw1->rkey(), mw2->rkey());
    EXPECT_NE(mw1->rkey(), mr->keys().rkey);  // one STag namespace
    // Flushes reaching a waiting consumer, and parents refusing to close while children exist, are provider
    // behaviour: the conformance suite (Verbs.ModifyToErrorFlushesEveryPostedRequest, Verbs.ParentsInUseRefuseToClose).
    // Everything closes in order.
    EXPECT_OK(ep->close());
    EXPECT_OK(ep2->close());
    EXPECT_OK(srq->close());
    EXPECT_OK(mw1->close());
    EXPECT_OK(mw2->close());
    EXPECT_OK(mr->close());
    EXPECT_OK(cq->close());
    EXPECT_OK(pz->close());
    EXPECT_OK(adapter->close());
}

// Quotas and pin limits of the kAL's configuration reach the consumer as ENOSPC, and a refused object leaves
// nothing behind (the kVP's object is released, no page stays locked).
TEST_F(SoftrnicAccessLayer, QuotasAndPinLimitsAreEnforced) {
    ual::Options o;
    o.embedded_kal = &kal::start_embedded_link;
    std::string cfg = softrnic_config((dir_ / "unused").string());
    cfg.insert(cfg.rfind('}'), R"(, "limits": {"pin_bytes_per_process": 1048576, "per_type": {"qp": 1}})");
    o.embedded_config = write_config(cfg);
    auto al = ual::AccessLayer::open(o);
    ASSERT_OK(al) << al.error().to_string();
    auto adapter = ok((*al)->open_adapter("sr0"));
    auto pz = ok(adapter->create_pz());
    auto dto = ok(ual::SimpleDispatcher::create(ual::EventStream::dto, 16));
    auto cq = ok(adapter->create_cq(16, dto));
    ASSERT_TRUE(pz && cq);
    auto ep = ok(pz->create_endpoint(ual::EndpointAttributes{}, cq, cq));
    ASSERT_NE(ep, nullptr);
    auto second = pz->create_endpoint(ual::EndpointAttributes{}, cq, cq);
    ASSERT_FALSE(second);
    EXPECT_STATUS(second, RI_ENOSPC);
    ASSERT_OK(ep->close());
    EXPECT_OK(pz->create_endpoint(ual::EndpointAttributes{}, cq, cq));  // the quota counts live objects
    std::vector<char> big(2 << 20);
    auto too_much = pz->register_memory(big.data(), big.size(), RI_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(too_much);
    EXPECT_STATUS(too_much, RI_ENOSPC);
    auto fits = pz->register_memory(big.data(), 256 << 10, RI_ACCESS_LOCAL_WRITE);
    EXPECT_OK(fits) << fits.error().to_string();
}

// OpenRDMA Figure 4: consumer -> uAL ri_qp_create -> uVP -> ri_syscall(RI_CREATE_QP, hdm_data) -> uAL -> device
// -> kAL -> kVP (ri_vm_pin_range for the queue memory) -> kAL generic endpoint handle -> back through every layer.
TEST_F(SoftrnicAccessLayer, Figure4SequenceOfAQpCreation) {
    auto al = embedded();
    ASSERT_NE(al, nullptr);
    auto adapter = ok(al->open_adapter("sr0"));
    auto pz = ok(adapter->create_pz());
    auto dto = ok(ual::SimpleDispatcher::create(ual::EventStream::dto, 16));
    auto cq = ok(adapter->create_cq(16, dto));
    ASSERT_TRUE(pz && cq);

    std::mutex m;
    std::vector<std::string> steps;
    const auto old_level = rdma::log::level();
    rdma::log::set_level(rdma::log::Level::debug);
    auto old_sink = rdma::log::set_sink([&](rdma::log::Level, std::string_view component, std::string_view msg) {
        std::lock_guard lock(m);
        steps.push_back(std::string(component) + ": " + std::string(msg));
    });
    steps.push_back("consumer: create endpoint");
    auto ep = pz->create_endpoint(ual::EndpointAttributes{}, cq, cq);
    steps.push_back("consumer: endpoint created");
    rdma::log::set_sink(std::move(old_sink));
    rdma::log::set_level(old_level);
    ASSERT_OK(ep) << ep.error().to_string();

    // The expected steps, in order (other lines may come between them).
    const std::vector<std::string> expected = {
        "consumer: create endpoint",
        "ual: create endpoint: create_qp",
        "softrnic-uvp: create_qp: ri_syscall RI_CREATE_QP",
        "ual: ri_syscall op 9: to the kAL",
        "syscall: client ",          // the kAL receives it from the device ...
        "op 9 on the kVP",           // ... and hands the whole request to the kVP
        "softrnic: create_qp: pinning the QP's rings with ri_vm_pin_range",
        "syscall: client ",          // the kAL accounts the pin ...
        "pinned ",
        "op 9 made qp handle",       // ... and records the kVP's QP under a generic handle
        "ual: ri_syscall op 9: kAL answered 0, handle",
        "ual: create endpoint: QP",  // the uVP returned; the uAL has the endpoint
        "consumer: endpoint created",
    };
    size_t at = 0;
    for (const auto &line : steps) {
        if (at < expected.size() && line.find(expected[at]) != std::string::npos) {
            ++at;
            // Two expectations may be met by one line (component prefix and message of the same kAL step).
            while (at < expected.size() && expected[at].rfind("syscall: client ", 0) != 0 &&
                   line.find(expected[at]) != std::string::npos) {
                ++at;
            }
        }
    }
    std::string trace;
    for (const auto &l : steps) trace += l + "\n";
    EXPECT_EQ(at, expected.size()) << "stopped before: " << (at < expected.size() ? expected[at] : "") << "\n"
                                   << trace;
}

class CrashCleanup : public testutil::KrdmadFixture {
protected:
    nlohmann::json snapshot(const std::filesystem::path &device) {
        std::string out;
        EXPECT_EQ(rdmactl({"--json", "--device", device.string(), "resources"}, out), 0) << out;
        return nlohmann::json::parse(out, nullptr, false);
    }
};

TEST_F(CrashCleanup, KillNineReclaimsEverythingAndRdmactlShowsTheBaseline) {
    const auto device = dir_ / "krdma.sock";
    pid_t daemon = start({"--config", write_config(softrnic_config(device.string()))});
    ASSERT_NE(connect(device), nullptr) << stderr_text();
    const nlohmann::json baseline = snapshot(device);
    ASSERT_TRUE(baseline.is_object()) << baseline.dump();
    ASSERT_TRUE(baseline["processes"].empty());
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        const auto out = dir_ / ("consumer" + std::to_string(round) + ".out");
        pid_t consumer = spawn(CONSUMER_PATH, {device.string(), "sr0", "1048576"}, out, out);
        bool ready = false;
        for (int i = 0; i < 1000 && !ready; ++i) {
            ready = read_text(out).find("ready") != std::string::npos;
            if (!ready) std::this_thread::sleep_for(10ms);
        }
        ASSERT_TRUE(ready) << read_text(out);
        nlohmann::json held = snapshot(device);
        ASSERT_EQ(held["processes"].size(), 1u) << held.dump();
        const auto &p = held["processes"][0];
        EXPECT_EQ(p["pid"].get<int>(), consumer);
        const auto &o = p["objects"];
        EXPECT_EQ(o["rnic"], 1);
        EXPECT_EQ(o["pd"], 1);
        EXPECT_EQ(o["cq"], 1);
        EXPECT_EQ(o["srq"], 1);
        EXPECT_EQ(o["qp"], 2);
        EXPECT_EQ(o["mr"], 1);
        EXPECT_EQ(o["mw"], 1);
        EXPECT_GE(p["pinned_bytes"].get<uint64_t>(), 1048576u);  // the region and the queue rings
        EXPECT_EQ(held["rnics"][0]["objects"], o);                // the RNIC's view agrees
        EXPECT_EQ(held["rnics"][0]["opens"], 1);

        ASSERT_EQ(::kill(consumer, SIGKILL), 0);
        wait_exit(consumer);
        nlohmann::json after;
        for (int i = 0; i < 500; ++i) {
            after = snapshot(device);
            if (after["processes"].empty() && after["rnics"][0]["opens"] == 0) break;
            std::this_thread::sleep_for(10ms);
        }
        EXPECT_EQ(after, baseline) << after.dump(2);
    }
    ASSERT_EQ(::kill(daemon, SIGTERM), 0);
    EXPECT_EQ(wait_exit(daemon), 0) << stderr_text();
}

}  // namespace
