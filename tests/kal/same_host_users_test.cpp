// Issue 40, same host, two users: two consumer processes of one real krdmad running as two different users (65534
// and 65533) are paired (`rdmactl stats` shows both endpoints on the same-host path), move data both ways (Write,
// Send, Read, checked byte for byte), and a forged STag, a Write or Read beyond the region, a deregistered STag and an
// STag invalidated by the peer's Send with Invalidate each end the QP with the same Terminate, the same asynchronous
// events, the same completion statuses and the same QP states as on the wire: every case runs twice, over the
// channel and with sr0's option same_host false, and both outcomes are compared (and checked against RFC 5040/5041).
#include "same_host_process_test.hpp"

namespace {

using namespace samehost;

constexpr size_t kBuf = 1 << 20;           // each side's registered buffer
constexpr size_t kData = 64 * 1024;        // its data areas start here
constexpr size_t kChunk = 256 * 1024;      // each area's size
constexpr int kRecvs = 16;

struct Case {
    const char *name;
    uint32_t term;  // the Terminate code both ends report (layer/type << 8 | code), 0 for none
};

const Case kCases[] = {
    {"DataBothWays", 0},
    {"ForgedStagWrite", 0x1100},         // DDP, tagged buffer, invalid STag (RFC 5041 §7.2)
    {"WriteBeyondTheRegion", 0x1101},    // DDP, tagged buffer, base or bounds violation
    {"ReadBeyondTheRegion", 0x0101},     // RDMAP, remote protection, base or bounds (RFC 5040 §7.2)
    {"ForgedStagRead", 0x0100},          // RDMAP, remote protection, invalid STag
    {"DeregisteredStagWrite", 0x1100},   // the target deregistered the region
    {"RemotelyInvalidatedStagWrite", 0x1100},  // the initiator's own Send with Invalidate revoked it
};

[[maybe_unused]] void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::string hex(uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%#x", v);
    return b;
}

// The target (user A): a buffer, plus a 4 KiB second region (revoked in the last two cases).
std::string target_script(const Io &io, const std::string &mode) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", kBuf); !e.empty()) return e;
    std::vector<uint8_t> second(4096, 0xee);
    auto m2 = s.pz->register_memory(second.data(), second.size(),
                                    RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
    if (!m2) return "register: " + m2.error().to_string();
    std::shared_ptr<ual::MemoryRegion> mr2 = *m2;
    std::shared_ptr<ual::ListenPoint> lp;
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = accept_one(io, s, lp, ep, kRecvs); !e.empty()) return e;
    io.say(info_line(s) + " " + std::to_string(reinterpret_cast<uint64_t>(second.data())) + " " +
           std::to_string(mr2->keys().rkey));
    const BufferInfo peer = parse_info(io.expect("peer"));
    if (peer.addr == 0) return "no peer info";
    uint8_t *b = s.buffer.data();
    // 1. The initiator's Write into [kData, +kChunk) then its Send: the Write is placed.
    auto r = wc(s);
    if (!r || r->status != RI_WC_SUCCESS || r->opcode != RI_WC_RECV)
        return "first Send: " + (r ? wc_status(r->status) : std::string("none"));
    if (size_t at = first_wrong(b, kData, kChunk, 3); at != kData + kChunk)
        return "the initiator's Write is wrong at offset " + std::to_string(at - kData);
    // 2. This side's Write into the initiator's second area, its Send, and a Read of the initiator's first area.
    fill(b, kData + kChunk, kChunk, 5);
    if (auto st = post(s, *ep, RI_WR_RDMA_WRITE, kData + kChunk, kChunk, 1, peer.addr + kData + kChunk, peer.rkey); !st.ok())
        return "post write: " + why(st);
    if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, 2); !st.ok()) return "post send: " + why(st);
    if (auto st = post(s, *ep, RI_WR_RDMA_READ, kData + 2 * kChunk, kChunk, 3, peer.addr + kData, peer.rkey); !st.ok())
        return "post read: " + why(st);
    for (int i = 0; i < 3; ++i) {
        auto c = wc(s);
        if (!c) return "no completion of this side's Write/Send/Read";
        if (c->status != RI_WC_SUCCESS) return "wr " + std::to_string(c->wr_id) + ": " + wc_status(c->status);
    }
    if (size_t at = first_wrong(b, kData + 2 * kChunk, kChunk, 3); at != kData + 3 * kChunk)
        return "the Read brought wrong data at offset " + std::to_string(at - kData - 2 * kChunk);
    io.say("data ok");
    if (mode == "DataBothWays") {
        (void)io.hear();  // until the test is done looking
        return "";
    }
    if (mode == "DeregisteredStagWrite") {
        // Revoked by deregistration, then the initiator is told to use it.
        if (auto st = mr2->close(); !st.ok()) return "deregister: " + why(st);
        mr2.reset();
        if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, 4); !st.ok()) return "post send: " + why(st);
        auto c = wc(s);
        if (!c || c->status != RI_WC_SUCCESS) return "the Send after deregistration failed";
    }
    if (mode == "RemotelyInvalidatedStagWrite") {
        auto c = wc(s);
        if (!c || c->status != RI_WC_SUCCESS || c->opcode != RI_WC_RECV) return "no Send with Invalidate";
        if ((c->flags & RI_WC_WITH_INV) == 0 || c->invalidated_stag != mr2->keys().rkey)
            return "the Send did not invalidate the second region's STag";
        if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, 4); !st.ok()) return "post send: " + why(st);
        auto d = wc(s);
        if (!d || d->status != RI_WC_SUCCESS) return "the Send after the invalidation failed";
    }
    // The violation: this side's RNIC sends the Terminate.
    auto t = async_event(s, RI_AE_QP_TERMINATE_SENT);
    if (!t) return "no TERMINATE_SENT event";
    // Its receives still posted are flushed.
    std::string flushed;
    for (auto c = wc(s, 5s); c; c = wc(s, 300ms)) {
        if (c->opcode == RI_WC_RECV) flushed = wc_status(c->status);
    }
    auto q = ep->query();
    const bool untouched = std::all_of(b + kBuf - 100, b + kBuf, [](uint8_t x) { return x == 0; }) &&
                           std::all_of(second.begin(), second.end(), [](uint8_t x) { return x == 0xee; });
    io.say("result target-ae=TERMINATE_SENT detail=" + hex(t->detail) + " recv=" + flushed + " state=" +
           (q ? std::to_string(q->state) : "?") + " untouched=" + (untouched ? "yes" : "no"));
    (void)io.hear();
    return "";
}

// The initiator (user B).
std::string initiator_script(const Io &io, const std::string &mode) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", kBuf); !e.empty()) return e;
    const auto l = io.expect("listen");
    if (l.size() < 2) return "no port";
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = connect_one(s, ep, static_cast<uint16_t>(std::stoi(l[1])), kRecvs); !e.empty()) return e;
    io.say(info_line(s));
    const auto tw = io.expect("target");
    const BufferInfo peer = parse_info(tw);
    if (peer.addr == 0 || tw.size() < 6) return "no target info";
    const uint64_t addr2 = std::stoull(tw[4]);
    const uint32_t rkey2 = static_cast<uint32_t>(std::stoul(tw[5]));
    uint8_t *b = s.buffer.data();
    fill(b, kData, kChunk, 3);
    if (auto st = post(s, *ep, RI_WR_RDMA_WRITE, kData, kChunk, 1, peer.addr + kData, peer.rkey); !st.ok())
        return "post write: " + why(st);
    if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, 2); !st.ok()) return "post send: " + why(st);
    for (int i = 0; i < 2; ++i) {
        auto c = wc(s);
        if (!c || c->status != RI_WC_SUCCESS) return "Write/Send: " + (c ? wc_status(c->status) : std::string("none"));
        if (c->wr_id != 1 && c->wr_id != 2) return "not the Write's or the Send's completion: wr " + std::to_string(c->wr_id);
    }
    // The target's Write then Send: placed.
    auto r = wc(s);
    if (!r || r->status != RI_WC_SUCCESS || r->opcode != RI_WC_RECV) return "no Send from the target";
    if (size_t at = first_wrong(b, kData + kChunk, kChunk, 5); at != kData + 2 * kChunk)
        return "the target's Write is wrong at offset " + std::to_string(at - kData - kChunk);
    // This side's Read of the target's second area.
    if (auto st = post(s, *ep, RI_WR_RDMA_READ, kData + 2 * kChunk, kChunk, 3, peer.addr + kData + kChunk, peer.rkey);
        !st.ok())
        return "post read: " + why(st);
    // The target goes on as soon as its own data checked out: in DeregisteredStagWrite its Send (the word of the
    // deregistration) can complete a receive here before this Read completes. Kept for below, not taken for the Read.
    std::optional<ri_wc_t> early;
    auto rd = wc(s);
    if (rd && rd->opcode == RI_WC_RECV) {
        early = rd;
        rd = wc(s);
    }
    if (!rd || rd->status != RI_WC_SUCCESS) return "Read: " + (rd ? wc_status(rd->status) : std::string("none"));
    if (rd->wr_id != 3 || rd->opcode != RI_WC_RDMA_READ)
        return "not the Read's completion: wr " + std::to_string(rd->wr_id) + ", opcode " + std::to_string(rd->opcode);
    if (size_t at = first_wrong(b, kData + 2 * kChunk, kChunk, 5); at != kData + 3 * kChunk)
        return "the Read brought wrong data at offset " + std::to_string(at - kData - 2 * kChunk);
    if (early && mode != "DeregisteredStagWrite") return "a Send from the target before the Read completed";
    io.say("data ok");
    (void)io.expect("go");
    if (mode == "DataBothWays") {
        (void)io.hear();
        return "";
    }
    uint32_t op = RI_WR_RDMA_WRITE;
    uint64_t addr = peer.addr + kData;
    uint32_t rkey = peer.rkey;
    if (mode == "ForgedStagWrite" || mode == "ForgedStagRead") rkey ^= 0xffu;  // another key of the same index
    if (mode == "WriteBeyondTheRegion" || mode == "ReadBeyondTheRegion") addr = peer.addr + peer.length - 100;
    if (mode == "ReadBeyondTheRegion" || mode == "ForgedStagRead") op = RI_WR_RDMA_READ;
    if (mode == "DeregisteredStagWrite") {
        auto c = early ? early : wc(s);
        if (!c || c->status != RI_WC_SUCCESS || c->opcode != RI_WC_RECV) return "no word of the deregistration";
        addr = addr2;
        rkey = rkey2;
    }
    if (mode == "RemotelyInvalidatedStagWrite") {
        ri_sge_t sge{reinterpret_cast<uint64_t>(b + 8192), 8, s.mr->keys().lkey};
        ri_send_wr_t wr{};
        wr.wr_id = 9;
        wr.opcode = RI_WR_SEND_INV;
        wr.flags = RI_SEND_SIGNALED;
        wr.sgl = &sge;
        wr.num_sge = 1;
        wr.inv_stag = rkey2;
        if (auto st = ep->post_send({&wr, 1}); !st.ok()) return "post Send with Invalidate: " + why(st);
        for (int i = 0; i < 2; ++i) {  // its completion and the target's answer
            auto c = wc(s);
            if (!c || c->status != RI_WC_SUCCESS) return "Send with Invalidate or its answer failed";
        }
        addr = addr2;
        rkey = rkey2;
    }
    if (auto st = post(s, *ep, op, kData + 3 * kChunk, 4096, 10, addr, rkey); !st.ok())
        return "post the violation: " + why(st);
    if (auto st = post(s, *ep, RI_WR_SEND, 8192, 8, 11, 0, 0, RI_SEND_READ_FENCE); !st.ok())
        return "post the fenced Send: " + why(st);
    auto t = async_event(s, RI_AE_QP_TERMINATE_RECEIVED);
    if (!t) return "no TERMINATE_RECEIVED event";
    std::map<uint64_t, uint32_t> st;
    std::string flushed;
    for (auto c = wc(s, 5s); c; c = wc(s, 300ms)) {
        if (c->opcode == RI_WC_RECV) {
            flushed = wc_status(c->status);
        } else {
            st[c->wr_id] = c->status;
        }
    }
    if (!st.count(10) || !st.count(11)) return "the violation or the Send behind it never completed";
    // A Write completes when its data left, or the Terminate fails it: either is right, on either path.
    std::string bad = wc_status(st[10]);
    if (op == RI_WR_RDMA_WRITE && (st[10] == RI_WC_SUCCESS || st[10] == RI_WC_REM_ACCESS_ERR)) bad = "SENT";
    auto q = ep->query();
    io.say("result initiator-ae=TERMINATE_RECEIVED detail=" + hex(t->detail) + " op=" + bad +
           " fenced=" + wc_status(st[11]) + " recv=" + flushed + " state=" + (q ? std::to_string(q->state) : "?"));
    (void)io.hear();
    return "";
}

class TwoUsers : public SameHostProcesses, public ::testing::WithParamInterface<Case> {
protected:
    void SetUp() override {
        SameHostProcesses::SetUp();
        if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the consumers as two other users";
    }

    // One run on krdmad @p label (sr0's @p options); the two result lines (target's, initiator's), the path
    // `rdmactl stats` showed for both endpoints.
    // @p one_user: both consumers run as this test's own user (root), which may read both: softrnic's pull_min
    // then moves their large messages by single copy.
    std::pair<std::string, std::string> run(const std::string &label, const std::string &options,
                                            std::vector<std::string> &paths, bool one_user = false) {
        start_krdmad(label, options);
        if (HasFatalFailure()) return {};
        const std::string mode = GetParam().name;
        const std::optional<testutil::Credentials> a = one_user ? std::nullopt : std::optional(user_a());
        const std::optional<testutil::Credentials> b = one_user ? std::nullopt : std::optional(user_b());
        Consumer &t = consumer(label + "-target", a, [mode](const Io &io) { return target_script(io, mode); });
        Consumer &i = consumer(label + "-initiator", b, [mode](const Io &io) { return initiator_script(io, mode); });
        // References into consumers_ stay valid: it does not grow below.
        put(t.to, "device " + device_.string());
        put(i.to, "device " + device_.string());
        const auto port = hear(t, "listen");
        if (port.size() < 2) return {};
        put(i.to, "listen " + port[1]);
        const auto tinfo = hear(t, "info");
        const auto iinfo = hear(i, "info");
        if (tinfo.empty() || iinfo.empty()) return {};
        std::string line = "target";
        for (size_t k = 1; k < tinfo.size(); ++k) line += " " + tinfo[k];
        put(i.to, line);
        put(t.to, "peer " + iinfo[1] + " " + iinfo[2] + " " + iinfo[3]);
        if (hear(t, "data").empty() || hear(i, "data").empty()) return {};
        paths = connected_paths();
        put(i.to, "go");
        std::pair<std::string, std::string> out;
        if (mode != "DataBothWays") {
            const auto tr = hear(t, "result");
            const auto ir = hear(i, "result");
            for (size_t k = 1; k < tr.size(); ++k) out.first += tr[k] + " ";
            for (size_t k = 1; k < ir.size(); ++k) out.second += ir[k] + " ";
        }
        put(t.to, "bye");
        put(i.to, "bye");
        EXPECT_EQ(finish(t), 0) << "the target failed; its log:\n" << log_of(t);
        EXPECT_EQ(finish(i), 0) << "the initiator failed; its log:\n" << log_of(i);
        return out;
    }
    // Case GetParam() ran over the channel (@p shm) and on the wire (@p wire): the same outcome, the RFCs' own.
    void expect_same_outcome(const std::pair<std::string, std::string> &shm,
                             const std::pair<std::string, std::string> &wire);
};

TEST_P(TwoUsers, SameOutcomeOverTheChannelAsOnTheWire) {
    consumers_.reserve(8);
    std::vector<std::string> shm_paths, wire_paths;
    const auto shm = run("channel", "", shm_paths);
    if (HasFatalFailure()) return;
    EXPECT_EQ(shm_paths, (std::vector<std::string>{"same-host", "same-host"}))
        << "consumers of uids 65534 and 65533 on one krdmad were not paired";
    const auto wire = run("wire", R"({"same_host": false})", wire_paths);
    EXPECT_EQ(wire_paths, (std::vector<std::string>{"wire", "wire"})) << "same_host false did not keep the wire";
    expect_same_outcome(shm, wire);
}

// Single copy (softrnic's pull_min): two consumers of one user, whose Writes of 4 KiB and more the receiver copies
// straight from the sender after its checks, meet every violation with the wire's outcome too (a pull that fails
// its checks is acknowledged, so its Write completes at the sender as on the wire, and then terminated).
TEST_P(TwoUsers, OneUserBySingleCopyGetsTheWiresOutcome) {
    consumers_.reserve(8);
    std::vector<std::string> shm_paths, wire_paths;
    const auto shm = run("pull", R"({"pull_min": 4096})", shm_paths, true);
    if (HasFatalFailure()) return;
    EXPECT_EQ(shm_paths, (std::vector<std::string>{"same-host", "same-host"})) << "the two consumers were not paired";
    const auto wire = run("wire", R"({"same_host": false})", wire_paths, true);
    EXPECT_EQ(wire_paths, (std::vector<std::string>{"wire", "wire"})) << "same_host false did not keep the wire";
    expect_same_outcome(shm, wire);
}

void TwoUsers::expect_same_outcome(const std::pair<std::string, std::string> &shm,
                                   const std::pair<std::string, std::string> &wire) {
    const Case &c = GetParam();
    std::printf("%s channel: target %s| initiator %s\n", c.name, shm.first.c_str(), shm.second.c_str());
    std::fflush(stdout);
    std::printf("%s wire:    target %s| initiator %s\n", c.name, wire.first.c_str(), wire.second.c_str());
    std::fflush(stdout);
    if (c.term == 0) return;
    // Behind a failed Write, the fenced Send's status is a matter of timing on either path: it went out before the
    // Terminate came back (SUCCESS), was still queued (WR_FLUSH_ERR), or was the oldest unfinished request when it
    // came (REM_ACCESS_ERR). Those are compared for what they may be, the rest of the outcome as it is.
    const bool read_case = std::string(c.name).find("Read") != std::string::npos;
    auto without_fenced = [read_case](std::string o) {
        const size_t at = o.find(" fenced=");
        if (read_case || at == std::string::npos) return o;
        const size_t end = o.find(' ', at + 1);
        const std::string status = o.substr(at + 8, end - at - 8);
        EXPECT_TRUE(status == "SUCCESS" || status == "WR_FLUSH_ERR" || status == "REM_ACCESS_ERR")
            << "the Send fenced behind the failed Write completed with " << status;
        return o.erase(at, end - at);
    };
    EXPECT_EQ(shm.first, wire.first) << "the target's outcome differs between the channel and the wire";
    EXPECT_EQ(without_fenced(shm.second), without_fenced(wire.second))
        << "the initiator's outcome differs between the channel and the wire";
    const std::string detail = "detail=" + hex(c.term) + " ";
    const std::string error = "state=" + std::to_string(RI_QPS_ERROR) + " ";
    for (const auto *r : {&shm, &wire}) {
        EXPECT_NE(r->first.find(detail), std::string::npos) << "the target's Terminate is not " << hex(c.term);
        EXPECT_NE(r->second.find(detail), std::string::npos) << "the initiator's Terminate is not " << hex(c.term);
        EXPECT_NE(r->first.find("recv=WR_FLUSH_ERR"), std::string::npos) << "the target's receives were not flushed";
        EXPECT_NE(r->second.find("recv=WR_FLUSH_ERR"), std::string::npos)
            << "the initiator's receives were not flushed";
        EXPECT_NE(r->first.find(error), std::string::npos) << "the target's QP is not in ERROR";
        EXPECT_NE(r->second.find(error), std::string::npos) << "the initiator's QP is not in ERROR";
        EXPECT_NE(r->first.find("untouched=yes"), std::string::npos)
            << "the violation placed bytes (beyond the region, or into the revoked region)";
    }
    if (read_case) {
        EXPECT_NE(shm.second.find("op=REM_ACCESS_ERR"), std::string::npos)
            << "the failed Read did not complete with REM_ACCESS_ERR";
        // Read-fenced behind the Read: still queued when the Terminate came. (Behind a Write, a Send goes out before
        // the Terminate comes back and completes, on either path.)
        EXPECT_NE(shm.second.find("fenced=WR_FLUSH_ERR"), std::string::npos)
            << "the Send fenced behind the failed Read was not flushed";
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, TwoUsers, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &i) { return std::string(i.param.name); });

}  // namespace
