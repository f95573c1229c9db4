// Issue 40, kill -9 of either end mid-transfer over the same-host channel: one consumer process streams 1 MiB RDMA
// Writes, each followed by a Send naming it, into four slots of the other's buffer (credits come back as Sends); the
// receiver checks each slot byte for byte when the Send that follows its Write completes (RFC 5040: the Write is then
// placed). The test kills one end with SIGKILL in the middle of the stream. The survivor's QP reports the error
// (error completions, no hang), every Write that a completion announced was whole, and once the survivor destroyed its
// QP no channel memory ("openrdma-channel") stays mapped in it, krdmad shows no endpoint and the survivor's objects
// and charged memory are what they were before it connected; once it exits, krdmad's counts are back at their
// baseline. The same runs with same_host false (the wire) for comparison.
#include <fstream>

#include "same_host_process_test.hpp"

namespace {

using namespace samehost;

constexpr size_t kSlot = 1 << 20;
constexpr int kSlots = 4;
constexpr size_t kData = 64 * 1024;
constexpr size_t kBuf = kData + kSlots * kSlot;
constexpr int kRecvs = 64;

// After the error: the rest of the completions of @p s (up to @p quiet without one); their statuses, and "" or why
// one is wrong (a success after the error is right only for work that finished before it).
std::string drain(Side &s, std::map<std::string, int> &statuses) {
    for (auto c = wc(s, 5s); c; c = wc(s, 500ms)) statuses[wc_status(c->status)]++;
    return "";
}

std::string summary(const std::map<std::string, int> &m) {
    std::string out;
    for (const auto &[k, v] : m) out += k + ":" + std::to_string(v) + ",";
    return out.empty() ? "none" : out;
}

// The survivor's end: destroys its QP, says so, and waits for the test to look before it exits.
std::string after_error(const Io &io, Side &s, std::shared_ptr<ual::Endpoint> &ep, const std::string &what) {
    std::map<std::string, int> rest;
    drain(s, rest);
    if (auto st = ep->close(); !st.ok()) return "destroy QP: " + why(st);
    ep.reset();
    io.say("survived " + what + " then=" + summary(rest));
    (void)io.expect("exit", 60s);
    return "";
}

// The receiver: four slots, a credit back per checked slot.
std::string receiver(const Io &io) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", kBuf); !e.empty()) return e;
    io.say("opened");
    (void)io.expect("connect");
    std::shared_ptr<ual::ListenPoint> lp;
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = accept_one(io, s, lp, ep, kRecvs); !e.empty()) return e;
    // It held no listener before it connected: none now either, so its account can be compared.
    if (auto st = lp->close(); !st.ok()) return "close listener: " + why(st);
    lp.reset();
    io.say(info_line(s));
    uint64_t checked = 0;
    for (;;) {
        auto c = wc(s, 30s);
        if (!c) return "no completion for 30 s (a hang) after " + std::to_string(checked) + " messages";
        if (c->status != RI_WC_SUCCESS)
            return after_error(io, s, ep, "error=" + wc_status(c->status) + " checked=" + std::to_string(checked));
        if (c->opcode != RI_WC_RECV) continue;  // a credit sent
        uint64_t seq = 0;
        std::memcpy(&seq, s.buffer.data() + (c->wr_id - 100) * 256, sizeof seq);
        const size_t slot = kData + (seq % kSlots) * kSlot;
        if (size_t at = first_wrong(s.buffer.data(), slot, kSlot, static_cast<uint32_t>(seq)); at != slot + kSlot)
            return "Write " + std::to_string(seq) + " announced by its Send is not whole: wrong at byte " +
                   std::to_string(at - slot);
        ++checked;
        if (checked == 20) io.say("streaming");
        auto st = post_recv(s, *ep, (c->wr_id - 100) * 256, 256, c->wr_id);
        std::memcpy(s.buffer.data() + 32768 + (seq % kSlots) * 64, &seq, sizeof seq);
        if (st.ok()) st = post(s, *ep, RI_WR_SEND, 32768 + (seq % kSlots) * 64, 8, 1000 + seq);
        if (!st.ok()) return after_error(io, s, ep, "post-error checked=" + std::to_string(checked));
    }
}

// The sender: Write then Send per message, at most kSlots unanswered.
std::string sender(const Io &io) {
    Side s;
    if (auto e = s.open(io.expect("device").at(1), "sr0", kBuf); !e.empty()) return e;
    io.say("opened");
    const auto l = io.expect("listen");
    if (l.size() < 2) return "no port";
    std::shared_ptr<ual::Endpoint> ep;
    if (auto e = connect_one(s, ep, static_cast<uint16_t>(std::stoi(l[1])), kRecvs); !e.empty()) return e;
    const BufferInfo peer = parse_info(io.expect("target"));
    if (peer.addr == 0) return "no target info";
    uint64_t next = 0, credits = kSlots;
    for (;;) {
        while (credits > 0) {
            const size_t slot = kData + (next % kSlots) * kSlot;
            fill(s.buffer.data(), slot, kSlot, static_cast<uint32_t>(next));
            std::memcpy(s.buffer.data() + 32768 + (next % kSlots) * 64, &next, sizeof next);
            auto st = post(s, *ep, RI_WR_RDMA_WRITE, slot, kSlot, 2 * next, peer.addr + slot, peer.rkey);
            if (st.ok()) st = post(s, *ep, RI_WR_SEND, 32768 + (next % kSlots) * 64, 8, 2 * next + 1);
            if (!st.ok()) return after_error(io, s, ep, "post-error sent=" + std::to_string(next));
            ++next;
            --credits;
        }
        auto c = wc(s, 30s);
        if (!c) return "no completion for 30 s (a hang) after " + std::to_string(next) + " messages";
        if (c->status != RI_WC_SUCCESS)
            return after_error(io, s, ep, "error=" + wc_status(c->status) + " sent=" + std::to_string(next));
        if (c->opcode == RI_WC_RECV) {
            ++credits;
            auto st = post_recv(s, *ep, (c->wr_id - 100) * 256, 256, c->wr_id);
            if (!st.ok()) return after_error(io, s, ep, "post-error sent=" + std::to_string(next));
        }
    }
}

// What of krdmad's counts the test compares: objects by type, endpoints, charged memory.
struct Counts {
    std::string resources, endpoints, limits;
    bool operator==(const Counts &) const = default;
};

std::ostream &operator<<(std::ostream &os, const Counts &c) {
    return os << "\n  resources: " << c.resources << "\n  endpoints: " << c.endpoints << "\n  limits: " << c.limits;
}

class KillMidTransfer : public SameHostProcesses, public ::testing::WithParamInterface<std::tuple<bool, bool>> {
protected:
    // The parts of `rdmactl resources`, `stats` and `limits` that count what krdmad holds; @p pid: only what the
    // process holds (0: all).
    Counts counts(pid_t pid = 0) {
        Counts c;
        if (pid != 0) {  // only what the process holds: its entry of `rdmactl resources`, its endpoints
            nlohmann::json r = ctl_json("resources");
            c.resources = filter(r.contains("processes") ? r["processes"] : nlohmann::json::array(), pid).dump();
            c.endpoints = filter(ctl_json("stats")["endpoints"], pid).dump();
            return c;
        }
        c.resources = filter(ctl_json("resources"), pid).dump();
        c.endpoints = filter(ctl_json("stats")["endpoints"], pid).dump();
        c.limits = filter(ctl_json("limits"), pid).dump();
        return c;
    }
    // Drops what changes without holding anything (counters of traffic, times, ids) and, with @p pid, other processes.
    static nlohmann::json filter(const nlohmann::json &j, pid_t pid) {
        if (j.is_array()) {
            nlohmann::json out = nlohmann::json::array();
            for (const auto &e : j) {
                if (pid != 0 && e.is_object() && e.contains("pid") && e["pid"] != pid) continue;
                out.push_back(filter(e, pid));
            }
            return out;
        }
        if (!j.is_object()) return j;
        nlohmann::json out = nlohmann::json::object();
        for (auto it = j.begin(); it != j.end(); ++it) {
            static const char *const volatile_keys[] = {"counters", "bytes_sent", "bytes_received", "uptime",
                                                        "uptime_s", "time", "since", "peak", "refused"};
            if (std::any_of(std::begin(volatile_keys), std::end(volatile_keys),
                            [&](const char *k) { return it.key() == k; }))
                continue;
            out[it.key()] = filter(it.value(), pid);
        }
        return out;
    }
    static bool maps_channel(pid_t pid) {
        std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
        std::string line;
        while (std::getline(in, line)) {
            if (line.find("openrdma-channel") != std::string::npos) return true;
        }
        return false;
    }
};

TEST_P(KillMidTransfer, TheSurvivorReportsTheErrorEveryAnnouncedWriteIsWholeAndNothingStays) {
    const bool kill_receiver = std::get<0>(GetParam());
    const bool channel = std::get<1>(GetParam());
    consumers_.reserve(4);
    start_krdmad("krdma", channel ? "" : R"({"same_host": false})");
    if (HasFatalFailure()) return;
    const Counts baseline = counts();
    Consumer &r = consumer("receiver", std::nullopt, receiver);
    Consumer &s = consumer("sender", std::nullopt, sender);
    put(r.to, "device " + device_.string());
    put(s.to, "device " + device_.string());
    ASSERT_FALSE(hear(r, "opened").empty());
    ASSERT_FALSE(hear(s, "opened").empty());
    Consumer &survivor = kill_receiver ? s : r;
    Consumer &victim = kill_receiver ? r : s;
    // What the survivor holds before it connects: its account to come back to.
    const Counts before = counts(survivor.pid);
    put(r.to, "connect");
    const auto port = hear(r, "listen");
    ASSERT_EQ(port.size(), 2u);
    put(s.to, "listen " + port[1]);
    const auto info = hear(r, "info");
    ASSERT_EQ(info.size(), 4u);
    put(s.to, "target " + info[1] + " " + info[2] + " " + info[3]);
    ASSERT_FALSE(hear(r, "streaming").empty()) << "the stream never got going";
    const std::vector<std::string> want(2, channel ? "same-host" : "wire");
    EXPECT_EQ(connected_paths(), want) << "the pair is not on the path under test";
    if (channel) {
        EXPECT_TRUE(maps_channel(r.pid)) << "the receiver maps no channel while paired (the check below would be void)";
        EXPECT_TRUE(maps_channel(s.pid)) << "the sender maps no channel while paired";
    }
    std::this_thread::sleep_for(30ms);
    ASSERT_EQ(::kill(victim.pid, SIGKILL), 0);
    EXPECT_EQ(finish(victim), -1) << victim.name << " was not killed";
    const auto said = hear(survivor, "survived", 60s);
    ASSERT_FALSE(said.empty()) << "the survivor (" << survivor.name << ") did not report the error";
    std::string line;
    for (const auto &w : said) line += w + " ";
    std::printf("%s killed on the %s: the %s says %s\n", victim.name.c_str(), channel ? "channel" : "wire",
                survivor.name.c_str(), line.c_str());
    std::fflush(stdout);  // before the next fork: a child would write the buffer out again
    // The first error: the QP's work flushed or the stream failed (not a protection error, not a success).
    EXPECT_TRUE(line.find("error=WR_FLUSH_ERR") != std::string::npos || line.find("error=LLP_ERR") != std::string::npos ||
                line.find("post-error") != std::string::npos)
        << "the survivor's first error is not a flush or an LLP error: " << line;
    for (const char *bad : {"REM_ACCESS_ERR", "LOC_PROT_ERR", "SUCCESS"}) {
        EXPECT_EQ(line.find(std::string("then=") + bad), std::string::npos) << line;
    }
    // The survivor destroyed its QP: no channel mapped, no endpoint, its account as before it connected.
    EXPECT_FALSE(maps_channel(survivor.pid)) << "channel memory stays mapped in the survivor after its QP is gone";
    Counts after;
    for (int i = 0; i < 100; ++i) {  // krdmad notices the death on its own time
        after = counts(survivor.pid);
        if (after == before) break;
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(after, before) << "krdmad's counts of the survivor did not come back to what it held before connecting";
    const nlohmann::json st = ctl_json("stats");
    EXPECT_TRUE(!st.contains("endpoints") || st["endpoints"].empty())
        << "endpoints remain after the survivor destroyed its QP: " << st["endpoints"].dump();
    put(survivor.to, "exit");
    EXPECT_EQ(finish(survivor), 0) << survivor.name << " failed; its log:\n" << log_of(survivor);
    Counts end;
    for (int i = 0; i < 100; ++i) {
        end = counts();
        if (end == baseline) break;
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(end, baseline) << "krdmad's counts did not return to their baseline once both consumers were gone";
}

INSTANTIATE_TEST_SUITE_P(Ends, KillMidTransfer,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>> &i) {
                             return std::string(std::get<0>(i.param) ? "KillTheReceiver" : "KillTheSender") +
                                    (std::get<1>(i.param) ? "OverTheChannel" : "OnTheWire");
                         });

}  // namespace
