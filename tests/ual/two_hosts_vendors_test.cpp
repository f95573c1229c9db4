// Two vendors across two hosts (issue 15): host A is this network namespace, host B a namespace of the test's own,
// joined by a veth pair, a krdmad in each (the TwoHosts fixture), each krdmad serving one RNIC of its own provider.
// hwstub (the emulated offload RNIC: its engine runs in krdmad and owns the TCP sockets) talks to hwstub, to softrnic
// and softrnic to it, over a real link between two TCP stacks; consumers on each host select their RNIC by address
// and `rdmactl list` on each host names the right provider; the link going down under an hwstub transfer ends both
// sides' connections in seconds, krdmad reclaims everything once the consumers close, and the RNIC serves again once
// the link is back. The active side is this test on host A; the passive side the ual_rdma_peer program on host B.
// Root only (network namespaces): skipped otherwise. The fixture kills every process and removes the namespace and
// the veth pair whatever happened.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <ostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <tuple>

#include "connection_fixtures.hpp"
#include "exchange.hpp"
#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace {

using namespace rdmatest;
using ual::CmEventId;
using Clock = std::chrono::steady_clock;

long long ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

// Milliseconds on the monotonic clock, as the peer prints them (both namespaces share the clock).
long long at_ms(Clock::time_point t) { return ms_between(Clock::time_point{}, t); }

bool is_end(uint32_t id) {
    return id == static_cast<uint32_t>(CmEventId::disconnected) ||
           id == static_cast<uint32_t>(CmEventId::peer_disconnect);
}

/**
 * @brief TwoHosts with a provider chosen per host, and what every test here does on host B: the peer program on
 *        host B's krdmad and rdmactl run inside the namespace.
 */
class TwoHostsVendorsBase : public TwoHosts {
protected:
    /**
     * @brief Starts the peer program in the namespace on RNIC @p rnic (a name or an address) of host B's krdmad;
     *        its pid and port (0 on failure). @p tag names its output files (peer-TAG.out, peer-TAG.err).
     */
    std::pair<pid_t, uint16_t> start_peer_on_b(const std::string &tag, const std::string &rnic,
                                               const std::string &mode, size_t bytes) {
        const auto out = dir_ / ("peer-" + tag + ".out");
        pid_t pid = spawn("/usr/sbin/ip", {"netns", "exec", ns_, PEER_PATH, dev_b_.string(), rnic, mode,
                                           std::to_string(bytes)},
                          out, dir_ / ("peer-" + tag + ".err"));
        return {pid, wait_for_port(out)};
    }
    std::string peer_out(const std::string &tag) { return read_text(dir_ / ("peer-" + tag + ".out")); }
    std::string peer_err(const std::string &tag) { return read_text(dir_ / ("peer-" + tag + ".err")); }

    /** @brief rdmactl @p args against host A's krdmad (true) or, inside the namespace, host B's; exit status. */
    int rdmactl_on(bool host_a, std::vector<std::string> args, std::string &out) {
        if (host_a) {
            args.insert(args.begin(), {"--device", dev_a_.string()});
            return rdmactl(std::move(args), out);
        }
        std::vector<std::string> all{"netns", "exec", ns_, RDMACTL_PATH, "--device", dev_b_.string()};
        all.insert(all.end(), args.begin(), args.end());
        const std::filesystem::path file = dir_ / "rdmactl-b.out";
        const int status = wait_exit(spawn("/usr/sbin/ip", std::move(all), file, file));
        out = read_text(file);
        return status;
    }

    /**
     * @brief Waits (up to 5 s) until the krdmad of host A (true) or B holds nothing: no consumer process with an
     *        object, and no object or open on its RNIC. Returns the last `rdmactl resources` seen when it never did.
     */
    std::string wait_reclaimed(bool host_a) {
        std::string out;
        for (int i = 0; i < 250; ++i) {
            if (rdmactl_on(host_a, {"--json", "resources"}, out) == 0) {
                const auto j = nlohmann::json::parse(out, nullptr, false);
                bool empty = !j.is_discarded() && j.contains("processes") && j["processes"].empty();
                if (empty) {
                    for (const auto &r : j["rnics"]) {
                        empty = empty && r["opens"].get<unsigned>() == 0;
                        for (const auto &count : r["objects"]) empty = empty && count.get<unsigned>() == 0;
                    }
                }
                if (empty) return "";
            }
            ::usleep(20000);
        }
        return out.empty() ? "no output" : out;
    }

    /**
     * @brief Opens host A's RNIC by its address, connects to the "accept" peer on host B at @p port, moves every
     *        size of @p sizes both ways (exchange()) and disconnects; the disconnect is seen here. The peer's side of
     *        it is in its output ("end ID"), checked by the caller.
     */
    void connect_exchange_disconnect(uint16_t port, std::initializer_list<size_t> sizes, size_t bytes) {
        Side s;
        ASSERT_EQ(s.open(dev_a_.string(), addr_a_, kRdmaOffset + bytes), "");
        auto ep = s.endpoint(5);
        ASSERT_NE(ep, nullptr);
        for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
        ASSERT_OK(ep->connect(addr_b_, port, bytes_of("hello server")));
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
        auto end = next_cm(s.cm, 10s);
        ASSERT_TRUE(end.has_value()) << "no end of the connection on host A";
        EXPECT_TRUE(is_end(end->id)) << end->id;
        ASSERT_OK(ep->close());
    }

    /** @brief The connection event an "accept" peer printed at the end ("end ID"), or -1. */
    static long peer_end(const std::string &out) {
        std::smatch m;
        return std::regex_search(out, m, std::regex("end (\\d+)")) ? std::stol(m[1]) : -1;
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Data between the vendors, one krdmad per host

/** @brief The providers of host A and host B, and the name the case goes by. */
struct Pairing {
    std::string a, b, name;
};

// How GoogleTest names a pairing (in ctest's list too) instead of dumping its bytes.
void PrintTo(const Pairing &p, std::ostream *os) { *os << p.a << " on host A, " << p.b << " on host B"; }

class TwoHostsVendors : public TwoHostsVendorsBase, public ::testing::WithParamInterface<Pairing> {
protected:
    std::string provider_a() override { return GetParam().a; }
    std::string provider_b() override { return GetParam().b; }
};

// hwstub both ways (item 1), hwstub to softrnic and softrnic to hwstub (item 2).
INSTANTIATE_TEST_SUITE_P(Pairs, TwoHostsVendors,
                         ::testing::Values(Pairing{"hwstub", "hwstub", "HwstubToHwstub"},
                                           Pairing{"hwstub", "softrnic", "HwstubToSoftrnic"},
                                           Pairing{"softrnic", "hwstub", "SoftrnicToHwstub"}),
                         [](const ::testing::TestParamInfo<Pairing> &p) { return p.param.name; });

// Connect, move every byte (1 B, a size that is no multiple of anything, 1 MiB, 8 MiB: segmented into many FPDUs on
// the veth's 1500-byte MTU), disconnect, and both sides see the connection end in order.
TEST_P(TwoHostsVendors, ConnectMoveEveryByteAndDisconnect) {
    constexpr size_t kBytes = 8u << 20;
    auto [pid, port] = start_peer_on_b("accept", addr_b_, "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("accept") << read_text(dir_ / "b.err");
    const auto t0 = Clock::now();
    connect_exchange_disconnect(port, {size_t{1}, size_t{4099}, size_t{1} << 20, kBytes}, kBytes);
    const long long ms = ms_between(t0, Clock::now());
    EXPECT_EQ(wait_exit(pid), 0) << peer_out("accept") << peer_err("accept");
    const long end = peer_end(peer_out("accept"));
    EXPECT_TRUE(end >= 0 && is_end(static_cast<uint32_t>(end))) << "host B saw " << peer_out("accept");
    std::printf("%s -> %s: connected, moved and disconnected in %lld ms\n", GetParam().a.c_str(),
                GetParam().b.c_str(), ms);
    std::fflush(stdout);  // before the next fork: a child would write the buffer again
}

// Item 4: on each host the consumers find the RNIC by its address, `rdmactl list` shows the host's own provider on
// its own address, and neither host answers for the other's address.
TEST_P(TwoHostsVendors, EachHostSelectsItsRnicByAddressAndListsItsProvider) {
    const std::pair<bool, std::tuple<std::string, std::string, std::string>> hosts[] = {
        {true, {"hostA", addr_a_, GetParam().a}}, {false, {"hostB", addr_b_, GetParam().b}}};
    for (const auto &[host_a, want] : hosts) {
        const auto &[name, address, provider] = want;
        SCOPED_TRACE(name);
        std::string out;
        ASSERT_EQ(rdmactl_on(host_a, {"--json", "list"}, out), 0) << out;
        const auto j = nlohmann::json::parse(out, nullptr, false);
        ASSERT_TRUE(j.is_array()) << out;
        ASSERT_EQ(j.size(), 1u) << out;
        EXPECT_EQ(j[0]["name"], name) << out;
        EXPECT_EQ(j[0]["provider"], provider) << out;
        EXPECT_EQ(j[0]["address"], address) << out;
        // The host's netdev is its end of the veth pair: the kAL found it from the address.
        EXPECT_EQ(j[0]["netdev"], host_a ? veth_a_ : veth_b_) << out;
        // `rdmactl show ADDRESS` selects by address too; the other host's address is not this host's RNIC.
        ASSERT_EQ(rdmactl_on(host_a, {"--json", "show", address}, out), 0) << out;
        EXPECT_NE(out.find(name), std::string::npos) << out;
        EXPECT_NE(rdmactl_on(host_a, {"--json", "show", host_a ? addr_b_ : addr_a_}, out), 0) << out;
    }

    // Host A's consumer (this process) by address: the adapter is hostA and its provider's uVP is loaded.
    {
        Side s;
        ASSERT_EQ(s.open(dev_a_.string(), addr_a_, 1 << 16), "");
        auto attr = s.adapter->query();
        ASSERT_OK(attr);
        EXPECT_STREQ(attr->name, "hostA");
        // Host B's address is no RNIC of host A's krdmad.
        EXPECT_FALSE(s.al->open_adapter(addr_b_)) << "host A answered for host B's address";
    }
    // Host B's consumer (the peer program in the namespace) by address, with data moving: it opened hostB.
    constexpr size_t kBytes = 1u << 20;
    auto [pid, port] = start_peer_on_b("accept", addr_b_, "accept", kBytes);
    ASSERT_NE(port, 0) << peer_err("accept");
    connect_exchange_disconnect(port, {size_t{4099}, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid), 0) << peer_out("accept") << peer_err("accept");
    // A consumer on host B naming host A's address finds nothing (it fails before it listens: no port to wait for).
    const pid_t bad = spawn("/usr/sbin/ip", {"netns", "exec", ns_, PEER_PATH, dev_b_.string(), addr_a_, "accept",
                                             std::to_string(kBytes)},
                            dir_ / "peer-wrong.out", dir_ / "peer-wrong.err");
    EXPECT_EQ(wait_exit(bad), 1) << peer_out("wrong");
    EXPECT_NE(peer_err("wrong").find("open adapter"), std::string::npos) << peer_err("wrong");
    // While both consumers held their RNICs, each krdmad counted the open; now both hold nothing.
    EXPECT_EQ(wait_reclaimed(true), "");
    EXPECT_EQ(wait_reclaimed(false), "");
}

// ---------------------------------------------------------------------------------------------------------------
// The link goes down under an hwstub transfer (item 3)

/** @brief hwstub on both hosts, with short liveness settings so a dead path is noticed in seconds. */
class TwoHostsHwstubLink : public TwoHostsVendorsBase {
protected:
    std::string provider_a() override { return "hwstub"; }
    std::string provider_b() override { return "hwstub"; }
    std::string extra_config() override {
        return R"("llp": {"user_timeout_ms": 2000, "keepalive_idle_s": 1, "keepalive_interval_s": 1,
                          "keepalive_count": 2})";
    }

    /** @brief What the active side saw of the fault. */
    struct Transfer {
        size_t before = 0;         // RDMA Writes completed before the fault
        size_t posted = 0;         // RDMA Writes posted in all
        size_t succeeded = 0;      // ... completed successfully
        size_t flushed = 0;        // ... flushed
        uint32_t first_error = 0;  // the status of the first one that failed
        size_t receives_flushed = 0;
        Clock::time_point fault{}, error{};
        bool errored = false;
    };

    // Keeps 8 RDMA Writes of 256 KiB in flight to @p info, runs @p fault once 300 ms and some Writes went by, keeps
    // writing until one fails, then collects every completion still owed (the Writes and @p receives receives),
    // for at most @p limit after the fault.
    Transfer transfer_through(Side &s, ual::Endpoint &ep, const BufferInfo &info, size_t receives,
                              const std::function<void()> &fault, std::chrono::milliseconds limit) {
        constexpr uint32_t kChunk = 256 * 1024;
        constexpr size_t kDepth = 8;
        Transfer t;
        const auto start = Clock::now();
        bool faulted = false;
        size_t done = 0, receives_done = 0;
        Clock::time_point deadline = start + 20s;
        while (Clock::now() < deadline) {
            if (!faulted && Clock::now() - start > 300ms && t.succeeded > 0) {
                t.before = t.succeeded;
                fault();
                t.fault = Clock::now();
                faulted = true;
                deadline = t.fault + limit;
            }
            while (!t.errored && t.posted - done < kDepth) {
                const size_t off = (t.posted % 4) * kChunk;
                if (!post(s, ep, RI_WR_RDMA_WRITE, kRdmaOffset + off, kChunk, t.posted, info.addr + off, info.rkey)
                         .ok()) {
                    ADD_FAILURE() << "post_send failed";
                    return t;
                }
                ++t.posted;
            }
            ri_wc_t wc[16];
            auto n = s.cq->poll(wc);
            for (uint32_t i = 0; n && i < *n; ++i) {
                if (wc[i].opcode == RI_WC_RECV) {
                    ++receives_done;
                    if (wc[i].status == RI_WC_WR_FLUSH_ERR) ++t.receives_flushed;
                    continue;
                }
                ++done;
                if (wc[i].status == RI_WC_SUCCESS) {
                    ++t.succeeded;
                } else {
                    if (wc[i].status == RI_WC_WR_FLUSH_ERR) ++t.flushed;
                    if (!t.errored) {
                        t.errored = true;
                        t.first_error = wc[i].status;
                        t.error = Clock::now();
                    }
                }
            }
            if (t.errored && done == t.posted && receives_done == receives) break;
            if (!n || *n == 0) std::this_thread::sleep_for(200us);
        }
        EXPECT_TRUE(faulted) << "no Write completed in 20 s: the fault never ran";
        EXPECT_EQ(done, t.posted) << "Writes never completed";
        EXPECT_EQ(receives_done, receives) << "receives never completed";
        return t;
    }

    /** @brief Waits up to 5 s for host A's end of the veth pair to have its carrier again. */
    bool wait_carrier_a() {
        for (int i = 0; i < 250; ++i) {
            if (read_text("/sys/class/net/" + veth_a_ + "/carrier").starts_with("1")) return true;
            ::usleep(20000);
        }
        return false;
    }
};

// A "watch" peer's report (rdma_peer.cpp): the connection event, unaffiliated events, receive statuses, the QP state.
struct Report {
    uint32_t cm_id = 0;
    int cm_status = 0;
    long long cm_at = 0;
    std::vector<uint32_t> unaffiliated;
    std::map<uint32_t, int> receive_status;
    int late = -1;
    int state = -1;
    bool done = false;
};

Report parse_report(const std::string &text) {
    Report r;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        std::string word;
        l >> word;
        if (word == "cm") {
            l >> r.cm_id >> r.cm_status >> r.cm_at;
        } else if (word == "uae") {
            uint32_t id = 0;
            l >> id;
            r.unaffiliated.push_back(id);
        } else if (word == "wc") {
            uint32_t opcode = 0, status = 0;
            l >> opcode >> status;
            if (opcode == RI_WC_RECV) ++r.receive_status[status];
        } else if (word == "late") {
            l >> r.late;
        } else if (word == "state") {
            l >> r.state;
        } else if (word == "done") {
            r.done = true;
        }
    }
    return r;
}

// Host A's end of the link goes down while hwstub on host A streams RDMA Writes to hwstub on host B. The engine's
// socket on host A loses its route and its data goes unacknowledged; host B's only receives and hears nothing. The
// kAL's TCP_USER_TIMEOUT and keepalive settings, applied to the sockets hwstub's engine owns, end both connections
// in seconds (TCP alone: minutes): broken on both sides, every request completed (failed or flushed), link-down
// events on both hosts. Once both consumers close, neither krdmad holds anything of them, and after the link comes
// back the adapter connects and moves data again.
TEST_F(TwoHostsHwstubLink, LinkDownMidTransferEndsBothSidesAndTheRnicServesAgain) {
    constexpr size_t kBytes = 1 << 20;
    auto [pid, port] = start_peer_on_b("watch", addr_b_, "watch", kBytes);
    ASSERT_NE(port, 0) << peer_err("watch") << read_text(dir_ / "b.err");
    {
        Side s;
        ASSERT_EQ(s.open(dev_a_.string(), addr_a_, kRdmaOffset + kBytes), "");
        auto ep = s.endpoint();
        ASSERT_NE(ep, nullptr);
        for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
        auto info = connect_to_watcher(s, *ep, addr_b_, port);
        ASSERT_TRUE(info.has_value()) << peer_err("watch");

        const Transfer t = transfer_through(
            s, *ep, *info, 3, [&] { ASSERT_EQ(sh("ip link set " + veth_a_ + " down"), 0); }, 15s);
        EXPECT_GT(t.before, 0u) << "the transfer was under way";
        ASSERT_TRUE(t.errored) << "the QP never failed: " << t.succeeded << " Writes completed";
        // Within the user timeout (2 s) and then some; not at once: nothing told host A's TCP the path was gone
        // for good (a missing route is a soft error).
        EXPECT_LT(ms_between(t.fault, t.error), 8000);
        EXPECT_TRUE(t.first_error == RI_WC_LLP_ERR || t.first_error == RI_WC_WR_FLUSH_ERR) << t.first_error;
        EXPECT_EQ(t.receives_flushed, 3u);
        auto qa = ep->query();
        ASSERT_OK(qa);
        EXPECT_EQ(qa->state, static_cast<uint32_t>(RI_QPS_ERROR));
        auto end = next_cm(s.cm, 10s);
        ASSERT_TRUE(end.has_value()) << "host A never heard that its connection ended";
        EXPECT_EQ(end->id, static_cast<uint32_t>(CmEventId::broken)) << end->id;
        EXPECT_NE(end->connection->status, 0);
        EXPECT_LT(ms_between(t.fault, Clock::now()), 12000);
        // The kAL watches the RNIC's netdev: host A's end of the veth pair went down.
        auto link = s.unaffiliated->wait(5s);
        ASSERT_OK(link) << "no link event on host A";
        EXPECT_EQ(link->id, static_cast<uint32_t>(RI_AE_RNIC_LINK_DOWN));
        EXPECT_EQ(link->resource_type, static_cast<uint32_t>(RI_RES_RNIC));

        // Host B only received: keepalive with the user timeout ends its side too, and its QP (whose state lives in
        // host B's kVP, which lives on) is in ERROR.
        EXPECT_EQ(wait_exit(pid), 0) << peer_out("watch") << peer_err("watch");
        const std::string out = peer_out("watch");
        const Report r = parse_report(out);
        ASSERT_TRUE(r.done) << out;
        EXPECT_EQ(r.cm_id, static_cast<uint32_t>(CmEventId::broken)) << out;
        EXPECT_NE(r.cm_status, 0) << out;
        const long long b_after_fault = r.cm_at - at_ms(t.fault);
        EXPECT_LT(b_after_fault, 8000) << out;
        EXPECT_NE(std::find(r.unaffiliated.begin(), r.unaffiliated.end(), RI_AE_RNIC_LINK_DOWN),
                  r.unaffiliated.end())
            << out;
        EXPECT_EQ(r.receive_status.count(RI_WC_WR_FLUSH_ERR) ? r.receive_status.at(RI_WC_WR_FLUSH_ERR) : 0, 8)
            << out;
        EXPECT_EQ(r.late, RI_WC_WR_FLUSH_ERR) << out;
        EXPECT_EQ(r.state, RI_QPS_ERROR) << out;
        std::printf("hwstub link down: host A failed after %lld ms, host B after %lld ms\n",
                    ms_between(t.fault, t.error), b_after_fault);
        std::fflush(stdout);  // before the next fork: a child would write the buffer again

        const auto closing = Clock::now();
        ASSERT_OK(ep->close());
        s.close();
        EXPECT_LT(ms_between(closing, Clock::now()), 5000);
    }
    // Both consumers are gone: neither krdmad holds a ring, pin, socket or object of them.
    EXPECT_EQ(wait_reclaimed(true), "");
    EXPECT_EQ(wait_reclaimed(false), "");

    // The link comes back; the adapters connect and move data again.
    ASSERT_EQ(sh("ip link set " + veth_a_ + " up"), 0);
    ASSERT_TRUE(wait_carrier_a()) << "host A's end of the veth pair never got its carrier back";
    auto [pid2, port2] = start_peer_on_b("again", addr_b_, "accept", kBytes);
    ASSERT_NE(port2, 0) << peer_err("again");
    connect_exchange_disconnect(port2, {size_t{4099}, kBytes}, kBytes);
    EXPECT_EQ(wait_exit(pid2), 0) << peer_out("again") << peer_err("again");
    EXPECT_EQ(wait_reclaimed(true), "");
    EXPECT_EQ(wait_reclaimed(false), "");
}

}  // namespace
