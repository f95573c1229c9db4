// Two vendors in one krdmad: softrnic on 127.0.0.1 and hwstub (the emulated offload RNIC, whose adapter runs in
// krdmad and owns its connections' sockets) on 127.0.0.2, a second address on lo. Consumers select by address; data
// moves hwstub to hwstub, hwstub to softrnic and softrnic to hwstub over real TCP between real processes (the
// passive side is the ual_rdma_peer program), and bad work requests get error completions, not a crash. Each test
// runs in a network namespace of its own (root only), which its processes share and which goes with it.
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "connection_fixtures.hpp"
#include "exchange.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;

class TwoVendors : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        // A network namespace of the test's own, so 127.0.0.2 can be added to its lo without touching the host's.
        if (::geteuid() != 0) GTEST_SKIP() << "a second address on lo needs root (a private network namespace)";
        ASSERT_EQ(::unshare(CLONE_NEWNET), 0) << std::strerror(errno);
        ASSERT_EQ(std::system("ip link set lo up && ip addr add 127.0.0.2/8 dev lo"), 0);
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        const std::string cfg = R"({"device": ")" + device_.string() + R"(", "provider_dir": ")" +
                                std::string(SOFTRNIC_PROVIDER_DIR) +
                                R"(", "modules": ["softrnic_kvp.so", "hwstub_kvp.so"], "rnics": [)"
                                R"({"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"},)"
                                R"({"provider": "hwstub", "name": "hw0", "address": "127.0.0.2"}]})";
        krdmad_ = start({"--config", write_config(cfg).string()});
        ASSERT_TRUE(wait_ready(krdmad_)) << stderr_text();
    }

    // The peer program on RNIC @p rnic in @p mode; its pid and port.
    std::pair<pid_t, uint16_t> start_peer(const std::string &rnic, const std::string &mode, size_t bytes) {
        // One output file per peer: the port is read from it.
        const auto out = dir_ / ("peer-" + rnic + "-" + mode + ".out");
        pid_t pid = spawn(PEER_PATH, {device_.string(), rnic, mode, std::to_string(bytes)}, out,
                          dir_ / ("peer-" + rnic + ".err"));
        return {pid, wait_for_port(out)};
    }
    std::string peer_err(const std::string &rnic) { return read_text(dir_ / ("peer-" + rnic + ".err")); }

    // Opens @p rnic (a name or an address), connects to the peer at @p address:@p port, moves every size.
    void connect_and_exchange(const std::string &rnic, const std::string &address, uint16_t port,
                              std::initializer_list<size_t> sizes, size_t bytes) {
        Side s;
        ASSERT_EQ(s.open(device_.string(), rnic, kRdmaOffset + bytes), "");
        auto ep = s.endpoint(5);
        ASSERT_NE(ep, nullptr);
        for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
        ASSERT_OK(ep->connect(address, port, bytes_of("hello server")));
        auto est = next_cm(s.cm);
        ASSERT_TRUE(est.has_value());
        ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established)) << "status " << est->detail;
        EXPECT_EQ(text(est->connection->private_data), "welcome");
        auto qa = ep->query();
        ASSERT_OK(qa);
        EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_RTS));
        exchange(s, *ep, sizes, bytes);
        if (::testing::Test::HasFatalFailure()) return;
        ASSERT_OK(ep->disconnect());
        auto end = next_cm(s.cm);
        ASSERT_TRUE(end.has_value()) << stderr_text();
        EXPECT_TRUE(end->id == static_cast<uint32_t>(CmEventId::disconnected) ||
                    end->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
            << end->id;
    }

    std::filesystem::path device_;
    pid_t krdmad_ = 0;
};

TEST_F(TwoVendors, BothRnicsAreListedAndSelectedByAddress) {
    std::string out;
    ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "list"}, out), 0) << out;
    auto j = nlohmann::json::parse(out);
    std::map<std::string, std::string> providers;
    ASSERT_TRUE(j.is_array()) << out;
    for (const auto &r : j) providers[r["name"].get<std::string>()] = r.dump();
    ASSERT_EQ(providers.size(), 2u) << out;
    EXPECT_NE(providers["hw0"].find("hwstub"), std::string::npos) << out;
    EXPECT_NE(providers["sr0"].find("softrnic"), std::string::npos) << out;

    Side s;
    ASSERT_EQ(s.open(device_.string(), "127.0.0.2", 1 << 16), "");
    auto attr = s.adapter->query();
    ASSERT_OK(attr);
    EXPECT_STREQ(attr->name, "hw0");
    EXPECT_EQ(attr->max_sge_rd, 8u);
    EXPECT_EQ(attr->vendor_part_id, 0x4857u) << "hwstub's own attributes (part \"HW\"), not softrnic's";
    EXPECT_EQ(attr->caps & RI_CAP_SHARED_MR, 0u) << "shared regions are softrnic's alone";
}

TEST_F(TwoVendors, HwstubToHwstubMovesEveryByte) {
    const size_t kBytes = 16u << 20;
    auto [pid, port] = start_peer("hw0", "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("hw0");
    connect_and_exchange("hw0", "127.0.0.2", port, {size_t{1}, size_t{4099}, size_t{1} << 20, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid), 0) << peer_err("hw0");
}

TEST_F(TwoVendors, HwstubToSoftrnicMovesEveryByte) {
    const size_t kBytes = 4u << 20;
    auto [pid, port] = start_peer("sr0", "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("sr0");
    connect_and_exchange("hw0", "127.0.0.1", port, {size_t{1}, size_t{65537}, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid), 0) << peer_err("sr0");
}

TEST_F(TwoVendors, SoftrnicToHwstubMovesEveryByte) {
    const size_t kBytes = 4u << 20;
    auto [pid, port] = start_peer("hw0", "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("hw0");
    connect_and_exchange("sr0", "127.0.0.2", port, {size_t{1}, size_t{65537}, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid), 0) << peer_err("hw0");
}

// A consumer that names memory it never registered (a forged lkey) gets an error completion and a QP in ERROR: the
// adapter checks every SGE against its STag table before it touches anything.
TEST_F(TwoVendors, ForgedLkeyIsALocalProtectionErrorAndTheQpGoesToError) {
    const size_t kBytes = 1u << 20;
    auto [pid, port] = start_peer("hw0", "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("hw0");
    Side s;
    ASSERT_EQ(s.open(device_.string(), "hw0", kRdmaOffset + kBytes), "");
    auto ep = s.endpoint(5);
    ASSERT_NE(ep, nullptr);
    for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
    ASSERT_OK(ep->connect("127.0.0.2", port, bytes_of("hello server")));
    auto est = next_cm(s.cm);
    ASSERT_TRUE(est.has_value());
    ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
    auto info_wc = s.completion();
    ASSERT_TRUE(info_wc.has_value());
    BufferInfo info{};
    std::memcpy(&info, s.buffer.data() + (info_wc->wr_id - 100) * 256, sizeof info);

    ri_sge_t sge{reinterpret_cast<uint64_t>(s.buffer.data() + kRdmaOffset), 4096, s.mr->keys().lkey ^ 0x100u};
    ri_send_wr_t wr{};
    wr.wr_id = 77;
    wr.opcode = RI_WR_RDMA_WRITE;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = &sge;
    wr.num_sge = 1;
    wr.u.rdma.remote_addr = info.addr;
    wr.u.rdma.rkey = info.rkey;
    ASSERT_OK(ep->post_send({&wr, 1}));
    auto wc = s.completion();
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->wr_id, 77u);
    EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_LOC_PROT_ERR));
    // The rest of the receive queue is flushed, and the QP says ERROR.
    auto flushed = s.completion();
    ASSERT_TRUE(flushed.has_value());
    EXPECT_EQ(flushed->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    auto qa = ep->query();
    ASSERT_OK(qa);
    EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
    // A range outside the registered region, with the right lkey, is refused the same way on a fresh QP.
    (void)pid;
}

// A consumer killed with its connection and queues on the adapter: the connection breaks for its peer, krdmad
// reclaims every ring, pin and socket of it (rdmactl resources counts nothing of the dead process), and the adapter
// serves the next connection.
TEST_F(TwoVendors, KilledHwstubConsumerIsReclaimedAndTheAdapterServesOn) {
    auto [pid, port] = start_peer("hw0", "hold", 1 << 20);
    ASSERT_NE(port, 0) << peer_err("hw0");
    {
        Side s;
        ASSERT_EQ(s.open(device_.string(), "hw0", 4096), "");
        auto ep = s.endpoint();
        ASSERT_OK(post_recv(s, *ep, 0, 256, 1));
        ASSERT_OK(ep->connect("127.0.0.2", port, bytes_of("hello server")));
        auto est = next_cm(s.cm);
        ASSERT_TRUE(est.has_value());
        ASSERT_EQ(est->id, static_cast<uint32_t>(CmEventId::established));
        ::kill(-pid, SIGKILL);
        auto e = next_cm(s.cm);
        ASSERT_TRUE(e.has_value());
        EXPECT_TRUE(e->id == static_cast<uint32_t>(CmEventId::broken) ||
                    e->id == static_cast<uint32_t>(CmEventId::peer_disconnect))
            << e->id;
        auto wc = s.completion(10s);
        ASSERT_TRUE(wc.has_value());
        EXPECT_EQ(wc->status, static_cast<uint32_t>(RI_WC_WR_FLUSH_ERR));
    }
    (void)wait_exit(pid);
    // Every object of both consumers is gone (the dead one's by krdmad, ours by closing).
    std::string out;
    nlohmann::json j;
    for (int i = 0; i < 100; ++i) {
        ASSERT_EQ(rdmactl({"--device", device_.string(), "--json", "resources"}, out), 0) << out;
        j = nlohmann::json::parse(out);
        if (j["processes"].empty()) break;
        ::usleep(20000);
    }
    EXPECT_TRUE(j["processes"].empty()) << out;
    // The adapter serves on.
    const size_t kBytes = 1u << 20;
    auto [pid2, port2] = start_peer("hw0", "accept", kBytes);
    ASSERT_NE(port2, 0) << peer_err("hw0");
    connect_and_exchange("hw0", "127.0.0.2", port2, {size_t{4096}, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid2), 0) << peer_err("hw0");
}

}  // namespace
