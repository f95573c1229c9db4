// Debian's unmodified dapl2-utils (dtest, dtestcm, dtestsrq, dtestx, dapltest) over libdaplopenrdma, loaded by the
// distribution's DAT registry (libdat2) from a private dat.conf ($DAT_OVERRIDE), against a real krdmad on a private
// device path; one dtest between two hosts (network namespaces joined by veth, a krdmad in each; root only). Server and
// client are separate processes; each test checks their exit status and what they print that proves data moved.
//
// What the programs do and print (dapl 2.1.10, the source of Debian's dapl2-utils):
//  - dtest: the server binds TCP port 15828 (a side channel, fixed) and sends the client its IA address and its
//    provider name (the client opens that name); it listens on connection qualifier 45248 (fixed). Both exchange
//    48 bytes of private data, then: `burst` (-B, 1000) bidirectional RDMA Writes of buf_len (-b, 4 MiB) into the
//    peer's buffer, 4 RDMA Reads of the peer's buffer (only when the provider attribute DAT_IB_RDMA_READ is "TRUE"),
//    and 100 messages each way; "DAPL Test Complete. PASSED" or "FAILED", exit status 0 either way.
//  - dtestcm: the server creates its PSP(s) (-m: one per burst, ports 45248...), then the side channel; -c
//    connections in bursts of -b; "ALL N CONNECTED on Client!/Server!", "DAPL Connection Test Complete.".
//  - dtestsrq: no side channel; the client connects to -h; a shared receive queue (-S 1) or one per EP (-S 0);
//    -b bytes per message, else the provider attribute DAT_IB_TRANSPORT_MTU; "DAPL RC SRQ Test Complete.".
//  - dtestx: InfiniBand extensions (RDMA Write with immediate data, atomics); exits 1 when the IA does not report
//    DAT_EXTENSION_IB.
//  - dapltest: a server loop (-T S) reusing one control EP for every client (dat_ep_reset after each), transaction
//    (-T T), performance (-T P), limit (-T L, no server) and function (-T F) tests; its exit status is a DAT_RETURN
//    truncated to a byte (0 for most errors), so only what it prints tells.
#include <algorithm>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "dapl_utils_fixture.hpp"

namespace {

using daplutils::count;
using daplutils::Ending;
using daplutils::has;
using daplutils::kDapltestPort;
using daplutils::kDtestConnQual;
using daplutils::kIaName;
using daplutils::kSideChannelPort;

const std::string kPort = std::to_string(kDapltestPort);

/** @brief The rest of the first line of @p text after @p prefix; "<no line: PREFIX>" when there is none. */
std::string after(const std::string &text, const std::string &prefix) {
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return "<no line: " + prefix + ">";
    const size_t from = at + prefix.size();
    return text.substr(from, text.find('\n', from) - from);
}

/** @brief True when @p value is one of @p choices. */
bool one_of(const std::string &value, const std::vector<std::string> &choices) {
    return std::find(choices.begin(), choices.end(), value) != choices.end();
}

/** @brief The number after "NAME ... :" in dapltest's statistics (-1 when missing). */
double stat_value(const std::string &text, const std::string &name) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(name + "\\s*:\\s*([0-9.]+)"))) return -1;
    return std::stod(m[1]);
}

/** @brief What dtest prints that proves data moved, on each side. */
struct DtestExpect {
    int buf_len = 4 << 20;  // -b
    int burst = 1000;       // -B
    // After the peer's RDMA Writes, the buffer holds the peer's text (its first buf_len bytes over "blah, blah...").
    std::string client_written = "server RDMA write data...";
    std::string server_written = "client RDMA write data...";
    // After the RDMA Reads, the peer's buffer: its "... RDMA read data..." text, or what this side wrote into it when
    // the read overtook the peer's strcpy (dtest does not synchronise the two).
    std::vector<std::string> client_read = {"server RDMA read data...", "client RDMA write data..."};
    std::vector<std::string> server_read = {"client RDMA read data...", "server RDMA write data..."};
};

/** @brief Checks both dtest outputs of a full run (RDMA Write, RDMA Read, ping-pong messages). */
void expect_dtest(const std::string &client, const std::string &server, const DtestExpect &x) {
    for (const auto &[side, out] : {std::pair{"client", client}, std::pair{"server", server}}) {
        SCOPED_TRACE(side);
        EXPECT_EQ(count(out, "DAPL Test Complete. PASSED"), 1u);
        EXPECT_FALSE(has(out, "FAILED"));
        EXPECT_TRUE(has(out, "CONNECTED!"));
        // 100 messages of buf_len each way, and the bidirectional RDMA Writes (burst each way).
        EXPECT_TRUE(has(out, "Message PingPong: (100 x " + std::to_string(x.buf_len) + ")"));
        EXPECT_TRUE(has(after(out, "RDMA write (bi-direction): "),
                        ", " + std::to_string(2 * x.burst) + " x " + std::to_string(x.buf_len) + ","));
    }
    EXPECT_EQ(after(client, "CLIENT: RDMA write buffer contains: "), x.client_written);
    EXPECT_EQ(after(server, "SERVER: RDMA write buffer contains: "), x.server_written);
    // Without DAT_IB_RDMA_READ = "TRUE" among the provider attributes dtest skips the RDMA Read and ping-pong phases.
    EXPECT_TRUE(has(client, "RDMA READ DATA with SEND MSG")) << "no RDMA Read phase: is DAT_IB_RDMA_READ advertised?";
    const std::string client_read = after(client, "CLIENT: RCV RDMA read buffer contains: ");
    const std::string server_read = after(server, "SERVER: RCV RDMA read buffer contains: ");
    EXPECT_TRUE(one_of(client_read, x.client_read)) << "client read back: " << client_read;
    EXPECT_TRUE(one_of(server_read, x.server_read)) << "server read back: " << server_read;
}

/** @brief One host: krdmad with RNIC sr0 on 127.0.0.1, a dat.conf naming it by address. */
class DaplOneHost : public daplutils::DaplUtilsTest<rdmatest::OneHost> {
protected:
    using Base = daplutils::DaplUtilsTest<rdmatest::OneHost>;

    void SetUp() override {
        Base::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        dat_conf_ = write_dat_conf("dat.conf", "127.0.0.1");
    }

    pid_t launch_here(const std::string &label, const char *program, const std::vector<std::string> &args) {
        return launch(label, program, args, dat_conf_, device_);
    }

    /**
     * @brief A server (`-P NAME -s SERVER_ARGS`), then, once it is ready, its client (`-P NAME -h 127.0.0.1
     *        CLIENT_ARGS`), waited for up to @p client_seconds; then the server, 20 s more (5 s after a failed
     *        client). Ready: listening on the side channel, or @p ready_text in the server's output when given
     *        (dtestsrq has no side channel).
     */
    void run_pair(const char *program, const std::vector<std::string> &server_args,
                  const std::vector<std::string> &client_args, double client_seconds,
                  const std::string &ready_text = "") {
        // Fixed ports: another dapl2-utils server (a run by hand) would answer our client.
        ASSERT_FALSE(daplutils::listening(0, kSideChannelPort)) << "TCP port 15828 is taken (another dtest?)";
        ASSERT_FALSE(daplutils::listening(0, kDtestConnQual)) << "TCP port 45248 is taken (another dtest?)";
        // dtestcm -m listens on one qualifier per burst slot (up to 20 here).
        ASSERT_TRUE(daplutils::ports_free(kDtestConnQual, 20, 75)) << "TCP ports 45248-45267 stay in use";
        std::vector<std::string> s{"-P", kIaName, "-s"};
        s.insert(s.end(), server_args.begin(), server_args.end());
        std::vector<std::string> c{"-P", kIaName, "-h", "127.0.0.1"};
        c.insert(c.end(), client_args.begin(), client_args.end());
        server_ = launch_here("server", program, s);
        ASSERT_GT(server_, 0);
        if (ready_text.empty()) {
            // dtest registers its buffers (2 x 412 MiB by default) before it listens.
            ASSERT_TRUE(await_listen(server_, kSideChannelPort, 60)) << "the server never listened on port 15828";
        } else {
            ASSERT_TRUE(await_text(server_, "server", ready_text, 60)) << "the server never printed " << ready_text;
        }
        const pid_t client = launch_here("client", program, c);
        ASSERT_GT(client, 0);
        client_end_ = await_exit(client, client_seconds);
        // A server whose client failed may wait for it forever (dtest spins on memory in -W): a short wait then.
        const bool client_ok = client_end_.exited_with(0) && !has(output("client"), "FAILED");
        server_end_ = await_exit(server_, client_end_.finished ? (client_ok ? 20 : 5) : 0);
    }

    /** @brief run_pair() with the same arguments on both sides. */
    void run_pair(const char *program, const std::vector<std::string> &args, double client_seconds,
                  const std::string &ready_text = "") {
        run_pair(program, args, args, client_seconds, ready_text);
    }

    /** @brief Both ended (else nothing more is worth checking), with exit status 0. */
    void expect_both_exit_0() {
        ASSERT_TRUE(client_end_.finished) << "client: " << client_end_;
        EXPECT_TRUE(client_end_.exited_with(0)) << "client: " << client_end_;
        EXPECT_TRUE(server_end_.exited_with(0)) << "server: " << server_end_;
    }

    std::filesystem::path dat_conf_;
    pid_t server_ = 0;
    Ending server_end_, client_end_;
};

// ---------------------------------------------------------------------------------------------------------------
// dtest

class Dtest : public DaplOneHost {
protected:
    // -W -D with 4 KiB buffers (see WritePingPongDataCheck below).
    void write_ping_pong_data_check() {
        ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-W", "-D", "-b", "4096"}, 45));
        ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
        for (const std::string label : {"client", "server"}) {
            SCOPED_TRACE(label);
            const std::string out = output(label);
            EXPECT_TRUE(has(out, "RDMA WRITE PINGPONG with DATA CHECK"));
            EXPECT_TRUE(has(out, "RDMA write PingPong: (1000 x 4096)"));
            EXPECT_FALSE(has(out, "ERR:"));
            EXPECT_EQ(count(out, "DAPL Test Complete. PASSED"), 1u);
        }
    }
};

// dtest as people run it: 4 MiB buffers (2 x 103 of them registered on each side), 1000 RDMA Writes each way.
TEST_F(Dtest, Defaults) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {}, 70));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    expect_dtest(output("client"), output("server"), DtestExpect{});
}

// -p: every completion and the connection events polled with dat_evd_dequeue instead of waited for.
TEST_F(Dtest, Polling) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-p", "-b", "4096", "-B", "200"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    EXPECT_TRUE(has(output("client"), "Polling"));
    expect_dtest(output("client"), output("server"), {.buf_len = 4096, .burst = 200});
}

// -c: the DTO EVDs feed a CNO; dtest waits on the CNO (1 s timeouts, retried) and then dequeues the EVD it wants.
TEST_F(Dtest, CnoWait) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-c", "-b", "4096", "-B", "200"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    EXPECT_TRUE(has(output("client"), "Creating CNO for DTO EVD's"));
    expect_dtest(output("client"), output("server"), {.buf_len = 4096, .burst = 200});
}

// -b 65536 -S 1: writes of max_rdma_size (the EP's 0x10000), every one signaled.
TEST_F(Dtest, Buffers64KiBEveryWriteSignaled) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-b", "65536", "-B", "300", "-S", "1"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    expect_dtest(output("client"), output("server"), {.buf_len = 65536, .burst = 300});
}

// -B 5000 -S 100: a long burst of writes with 99 of each 100 unsignaled (the send queue holds 107).
TEST_F(Dtest, LongBurstMostlyUnsignaled) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-b", "4096", "-B", "5000", "-S", "100"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    expect_dtest(output("client"), output("server"), {.buf_len = 4096, .burst = 5000});
}

// -b 1: one-byte writes, reads and messages. Each buffer starts as "blah, blah, blah": exactly its first byte changes.
TEST_F(Dtest, OneByteBuffers) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-b", "1", "-B", "10"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    expect_dtest(output("client"), output("server"),
                 {.buf_len = 1,
                  .burst = 10,
                  .client_written = "slah, blah, blah",
                  .server_written = "clah, blah, blah",
                  .client_read = {"slah, blah, blah", "clah, blah, blah"},
                  .server_read = {"clah, blah, blah", "slah, blah, blah"}});
}

// -w -u: RDMA Writes one way only (the client's), then one message each way; no read or ping-pong phase. With
// DAT_EXTENSION_IB (RFC 7306, agreed between the two QPs krdmad pairs on this host) the client's last write is a
// write with immediate data, whose text ("rdma writes completed == 1000") follows the first write's in the server's
// buffer.
TEST_F(Dtest, WriteOnlyOneWay) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTEST_PATH, {"-w", "-u", "-b", "65536", "-B", "1000"}, 45));
    ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
    const std::string c = output("client"), s = output("server");
    EXPECT_EQ(count(c, "DAPL Test Complete. PASSED"), 1u);
    EXPECT_EQ(count(s, "DAPL Test Complete. PASSED"), 1u);
    EXPECT_TRUE(has(c, "RDMA WRITE IMM DATA with SEND MSG"));
    const std::string written = after(s, "SERVER: RDMA write buffer contains: ");
    EXPECT_EQ(written.rfind("client RDMA write data...", 0), 0u) << written;
    EXPECT_TRUE(has(written, "rdma writes completed == 1000")) << written;
    EXPECT_TRUE(has(after(c, "RDMA write (uni-direction): "), ", 1000 x 65536,"));
}

// -W -D: RDMA Write ping-pong, 1000 round trips; each side spins on the last byte of its buffer for the peer's
// write, then (server) echoes the buffer or (client) checks it against the pattern it sent. This relies on a write's
// last byte being placed after the bytes before it, which InfiniBand HCAs give in practice and MPI libraries over
// uDAPL rely on for their eager RDMA paths (the iWARP RFCs do not promise it); the engine places it so, alone and
// after a store fence (iwarp/include/iwarp/engine.hpp, "Placement order"), on the wire and on the same-host channel.
TEST_F(Dtest, WritePingPongDataCheck) { write_ping_pong_data_check(); }

// The same on the wire: krdmad's same-host path off, so each Write is placed from the TCP stream by recvmsg.
class DtestWire : public Dtest {
protected:
    std::string extra_config() override { return R"("llp": {"same_host": {"enabled": false}})"; }
};

TEST_F(DtestWire, WritePingPongDataCheck) { write_ping_pong_data_check(); }

// ---------------------------------------------------------------------------------------------------------------
// dtestcm: many connections, set up in bursts and torn down; every EP matched with its disconnect event.

class Dtestcm : public DaplOneHost {
protected:
    void expect_connected(int n) {
        ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
        const std::string c = output("client"), s = output("server");
        EXPECT_TRUE(has(c, "ALL " + std::to_string(n) + " CONNECTED on Client!"));
        EXPECT_TRUE(has(s, "ALL " + std::to_string(n) + " CONNECTED on Server!"));
        EXPECT_TRUE(has(c, "Num=" + std::to_string(n)));
        EXPECT_EQ(count(c, "DAPL Connection Test Complete."), 1u);
        EXPECT_EQ(count(s, "DAPL Connection Test Complete."), 1u);
    }
};

// -c 100 -b 20 -w: 100 connections in bursts of 20, waiting on the EVDs. (-c must be a multiple of -b: dtestcm's
// client indexes its EP array past -c otherwise.)
TEST_F(Dtestcm, HundredConnectionsWaiting) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTESTCM_PATH, {"-c", "100", "-b", "20", "-w"}, 45));
    expect_connected(100);
}

// -m -c 60 -b 20: one PSP per burst slot (ports 45248-45267), each connection to its slot's port; polling (default).
TEST_F(Dtestcm, SixtyConnectionsMultiListenPolling) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTESTCM_PATH, {"-m", "-c", "60", "-b", "20"}, 45));
    expect_connected(60);
}

// -m -c 1000 -b 20 (issue 42): a thousand connections, 2,000 QPs on one RNIC. The client posts a thousand disconnects
// in a row while their events come back: the device socket filled both ways, and a client that waited for room
// without reading hung with krdmad waiting for it to read (20 to 30% of runs before the fix).
TEST_F(Dtestcm, ThousandConnectionsMultiListenPolling) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTESTCM_PATH, {"-m", "-c", "1000", "-b", "20"}, 90));
    expect_connected(1000);
}

// ---------------------------------------------------------------------------------------------------------------
// dtestsrq: ping (0x55) from the client on every EP, pong (0xAA) back; receives checked for order and header.

class Dtestsrq : public DaplOneHost {
protected:
    void expect_complete(int n, const std::string &kind) {
        ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
        const std::string c = output("client"), s = output("server");
        EXPECT_TRUE(has(c, "ALL " + std::to_string(n) + " CONNECTED on client!"));
        EXPECT_TRUE(has(s, "ALL " + std::to_string(n) + " CONNECTED on server!"));
        EXPECT_EQ(count(c, "DAPL RC " + kind + " Test Complete."), 1u);
        EXPECT_EQ(count(s, "DAPL RC " + kind + " Test Complete."), 1u);
        EXPECT_FALSE(has(c, " ERR"));
        EXPECT_FALSE(has(s, " ERR"));
    }
};

// -c 10 -B 10 -t 5 -b 4096: 10 EPs sharing one SRQ on each side, 5 bursts of 10 messages per EP.
TEST_F(Dtestsrq, SharedReceiveQueue) {
    ASSERT_NO_FATAL_FAILURE(
        run_pair(DTESTSRQ_PATH, {"-c", "10", "-B", "10", "-t", "5", "-b", "4096"}, 45, "server ready on port"));
    expect_complete(10, "SRQ");
}

// The same on hwstub, whose adapter serves the SRQ (its engine takes a receive when a message of one of the ten EPs
// needs it).
class DtestsrqHwstub : public Dtestsrq {
protected:
    std::string provider() override { return "hwstub"; }
};

TEST_F(DtestsrqHwstub, SharedReceiveQueue) {
    ASSERT_NO_FATAL_FAILURE(
        run_pair(DTESTSRQ_PATH, {"-c", "10", "-B", "10", "-t", "5", "-b", "4096"}, 45, "server ready on port"));
    expect_complete(10, "SRQ");
}

// -S 0 without -b: a receive queue per EP, and messages the size of the provider attribute DAT_IB_TRANSPORT_MTU.
TEST_F(Dtestsrq, PerEndpointQueuesProviderMtu) {
    ASSERT_NO_FATAL_FAILURE(run_pair(DTESTSRQ_PATH, {"-S", "0", "-c", "4", "-B", "4", "-t", "3"}, 45,
                                     "server ready on port"));
    expect_complete(4, "none SRQ");
}

// ---------------------------------------------------------------------------------------------------------------
// dtestx: OFED's InfiniBand extensions. In RC mode (no -u) it runs RDMA Write with immediate data both ways, then a
// compare-and-swap and two fetch-and-adds each way, checking every event's extended type, the immediate values, the
// originals returned and the targets left; the atomics run only where the provider's attributes DAT_IB_CMP_AND_SWAP
// and DAT_IB_FETCH_AND_ADD say TRUE (it skips them silently otherwise, so the test checks that they ran). Over
// RFC 7306 on the same-host path, where the kAL knows both ends speak it. Once per provider.

class Dtestx : public DaplOneHost {
protected:
    void write_immediate_and_atomics() {
        ASSERT_NO_FATAL_FAILURE(run_pair(DTESTX_PATH, {}, 60));
        ASSERT_NO_FATAL_FAILURE(expect_both_exit_0());
        for (const std::string label : {"client", "server"}) {
            SCOPED_TRACE(label);
            const std::string out = output(label);
            EXPECT_TRUE(has(out, "RDMA_WRITE_WITH_IMMEDIATE_DATA test - PASSED"));
            EXPECT_TRUE(has(out, "CMP_SWAP test - PASSED")) << "skipped: is DAT_IB_CMP_AND_SWAP advertised?";
            EXPECT_TRUE(has(out, "FETCH_ADD test - PASSED")) << "skipped: is DAT_IB_FETCH_AND_ADD advertised?";
            EXPECT_TRUE(has(out, "IB extension test - immed/atomic test PASSED"));
            EXPECT_FALSE(has(out, "ERROR"));
        }
    }
};

TEST_F(Dtestx, WriteImmediateCompareSwapFetchAdd) { write_immediate_and_atomics(); }

class DtestxHwstub : public Dtestx {
protected:
    std::string provider() override { return "hwstub"; }
};

TEST_F(DtestxHwstub, WriteImmediateCompareSwapFetchAdd) { write_immediate_and_atomics(); }

// -q: dat_ib_open_query, an extension call libdat2 hands to the provider's extension entry with the IA *name* where
// a handle would be. Output seen: "dat_ib_open_query returned DAT_INVALID_HANDLE :", exit status 1.
TEST_F(Dtestx, QueryOnlyFailsCleanly) {
    const pid_t q = launch_here("query", DTESTX_PATH, {"-P", kIaName, "-q"});
    const Ending e = await_exit(q, 20);
    EXPECT_TRUE(e.exited_with(1)) << "dtestx -q: " << e;
    EXPECT_TRUE(has(output("query"), "dat_ib_open_query returned"));
}

// ---------------------------------------------------------------------------------------------------------------
// dapltest against its server (-T S): each test runs its clients one after the other, then asks the server to quit
// (-T Q) and checks that it exits; so every test has the server reuse its control EP (dat_ep_reset) at least once.

class Dapltest : public DaplOneHost {
protected:
    void SetUp() override {
        DaplOneHost::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        ASSERT_FALSE(daplutils::listening(0, kDapltestPort)) << "TCP port " << kPort << " is taken";
        server_ = launch_here("server", DAPLTEST_PATH, {"-T", "S", "-D", kIaName, "-n", kPort});
        ASSERT_GT(server_, 0);
        ASSERT_TRUE(await_text(server_, "server", "Dapltest: Service Point Ready", 30)) << "the server never got ready";
    }

    /**
     * @brief Runs `dapltest -T TYPE -s 127.0.0.1 -D NAME -n PORT ARGS` labelled @p label to its end (up to
     *        @p seconds), once the server says it is ready for one more client.
     */
    Ending client(const std::string &label, const std::string &type, const std::vector<std::string> &args,
                  double seconds = 60) {
        ++clients_;
        EXPECT_TRUE(await_text(server_, "server", "Dapltest: Service Point Ready", 30, clients_))
            << "the server is not ready for client " << clients_;
        std::vector<std::string> a{"-T", type, "-s", "127.0.0.1", "-D", kIaName, "-n", kPort};
        a.insert(a.end(), args.begin(), args.end());
        const pid_t pid = launch_here(label, DAPLTEST_PATH, a);
        if (pid <= 0) return {};
        return await_exit(pid, seconds);
    }

    /** @brief -T Q; the server must then exit, status 0, saying so. */
    void quit_server() {
        const Ending q = client("quit", "Q", {}, 30);
        EXPECT_TRUE(q.exited_with(0)) << "dapltest -T Q: " << q;
        server_end_ = await_exit(server_, 30);
        EXPECT_TRUE(server_end_.exited_with(0)) << "server: " << server_end_;
        EXPECT_TRUE(has(output("server"), "Exiting."));
    }

    /**
     * @brief A validated (-V) transaction test of @p ops, @p threads threads of @p eps EPs, @p iterations each, with
     *        -d so that each thread says it ended well; then the quit. Returns the client's output.
     */
    std::string transaction(const std::vector<std::string> &ops, int threads, int eps, int iterations,
                            const std::vector<std::string> &flags = {}) {
        std::vector<std::string> a{"-i", std::to_string(iterations), "-t", std::to_string(threads), "-w",
                                   std::to_string(eps), "-V", "-d"};
        a.insert(a.end(), flags.begin(), flags.end());
        a.insert(a.end(), ops.begin(), ops.end());
        const Ending e = client("client", "T", a, 60);
        const std::string out = output("client");
        if (!e.finished) {
            ADD_FAILURE() << "client: " << e;
            return out;
        }
        EXPECT_TRUE(e.exited_with(0)) << "client: " << e;
        // Each client thread that finished every iteration (and the final sync) says so; a failed one only stops.
        EXPECT_EQ(count(out, "]: End Successfully"), static_cast<size_t>(threads));
        EXPECT_TRUE(has(out, "----- Stats ---- : " + std::to_string(threads) + " threads, " + std::to_string(eps) +
                                 " EPs"));
        for (const char *bad : {"Validation Error", "bad disconnect event", "bad connection event", "Cannot ",
                                "error:", "FAIL"}) {
            EXPECT_FALSE(has(out, bad)) << "client printed \"" << bad << "\"";
        }
        quit_server();
        const std::string srv = output("server");
        EXPECT_EQ(count(srv, "Server: Transaction Test Finished for this client"), 1u);
        EXPECT_FALSE(has(srv, "Validation Error"));
        return out;
    }

    /** @brief A performance test of @p op (RW or RR); checks the statistics dapltest prints only after success. */
    void performance(const std::vector<std::string> &args, const std::string &op, int iterations, int seg_size,
                     int segs) {
        std::vector<std::string> a{"-i", std::to_string(iterations)};
        a.insert(a.end(), args.begin(), args.end());
        a.insert(a.end(), {op, std::to_string(seg_size), std::to_string(segs)});
        const Ending e = client("client", "P", a, 45);
        const std::string out = output("client");
        ASSERT_TRUE(e.finished) << "client: " << e;
        EXPECT_TRUE(e.exited_with(0)) << "client: " << e;
        EXPECT_TRUE(has(out, "------------------------- Statistics -------------------------"));
        EXPECT_EQ(after(out, "Operation Type       : "), op);
        EXPECT_EQ(after(out, "Number of Operations : "), std::to_string(iterations));
        EXPECT_EQ(after(out, "Segment Size         : "), std::to_string(seg_size));
        EXPECT_EQ(after(out, "Number of Segments   : "), std::to_string(segs) + " ");
        quit_server();
    }

    size_t clients_ = 0;
};

// Send/receive, validated: 2 threads x 2 EPs x 100 iterations of a 4 KiB message each way (plus -V's three syncs).
TEST_F(Dapltest, TransactionSendRecv) {
    const std::string out = transaction({"client", "SR", "4096", "server", "SR", "4096"}, 2, 2, 100);
    EXPECT_GT(stat_value(out, "Total Send"), 0);
    EXPECT_GT(stat_value(out, "Total Recv"), 0);
}

// RDMA Write both ways (one and several segments), validated.
TEST_F(Dapltest, TransactionRdmaWrite) {
    const std::string out = transaction({"client", "RW", "4096", "1", "server", "RW", "2048", "4", "client", "SR",
                                         "1024", "4", "server", "SR", "4096", "2"},
                                        2, 2, 100);
    EXPECT_GT(stat_value(out, "Total RDMA Write"), 0);
}

// RDMA Read both ways, validated.
TEST_F(Dapltest, TransactionRdmaRead) {
    const std::string out = transaction({"client", "RR", "4096", "2", "server", "RR", "8192", "1", "client", "SR",
                                         "256", "server", "SR", "256"},
                                        2, 2, 100);
    EXPECT_GT(stat_value(out, "Total RDMA Read"), 0);
}

// OFA's "transmet" mix (RW, RR and SR with -f: a send's completion reaped with the next receive), 2 threads x 4 EPs,
// completions polled (-P), validated.
TEST_F(Dapltest, TransactionMixedPolling) {
    const std::string out = transaction({"client", "RW", "4096", "1", "server", "RW", "2048", "4", "server", "RR",
                                         "1024", "1", "client", "RR", "2048", "1", "client", "SR", "1024", "3", "-f",
                                         "server", "SR", "256", "3", "-f"},
                                        2, 4, 200, {"-P"});
    EXPECT_GT(stat_value(out, "Total RDMA Write"), 0);
    EXPECT_GT(stat_value(out, "Total RDMA Read"), 0);
}

// Two transaction clients one after the other on the same server, then the quit: the control EP reused twice.
TEST_F(Dapltest, ServerServesClientsInTurn) {
    for (const std::string label : {"first", "second"}) {
        const Ending e = client(label, "T", {"-i", "50", "-t", "1", "-w", "1", "-d", "client", "SR", "256", "server",
                                             "SR", "256"});
        EXPECT_TRUE(e.exited_with(0)) << label << ": " << e;
        EXPECT_EQ(count(output(label), "]: End Successfully"), 1u) << label;
    }
    quit_server();
    EXPECT_EQ(count(output("server"), "Server: Transaction Test Finished for this client"), 2u);
}

// Performance: RDMA Write bandwidth, 1000 writes of 2 x 4 KiB, 16 in flight, blocking on the EVD.
TEST_F(Dapltest, PerformanceRdmaWrite) { performance({"-p", "16", "-m", "b"}, "RW", 1000, 4096, 2); }

// Performance: RDMA Read, 1000 reads of 32 KiB (pipeline: the provider's maximum).
TEST_F(Dapltest, PerformanceRdmaRead) { performance({}, "RR", 1000, 32768, 1); }

// Performance: 4-byte RDMA Write latency, one at a time, polling.
TEST_F(Dapltest, PerformanceLatencyPolling) { performance({"-p", "1", "-m", "p"}, "RW", 2000, 4, 1); }

// ---------------------------------------------------------------------------------------------------------------
// dapltest without a server: limit tests (-T L) and function tests (-T F).

class DapltestLocal : public DaplOneHost {
protected:
    /** @brief `dapltest ARGS` to its end; its output. */
    std::string run(const std::vector<std::string> &args, double seconds = 60) {
        const pid_t pid = launch_here("dapltest", DAPLTEST_PATH, args);
        if (pid <= 0) return {};
        const Ending e = await_exit(pid, seconds);
        EXPECT_TRUE(e.exited_with(0)) << "dapltest: " << e;
        return output("dapltest");
    }

    /**
     * @brief -T L with width @p width and at most @p most of each object in @p tests: every limit reached (each test
     *        prints "LimitTest: <line> @p most" for its line in @p lines), no error.
     */
    void limits(int width, int most, const std::vector<std::string> &tests, const std::vector<std::string> &lines) {
        std::vector<std::string> a{"-T", "L", "-D", kIaName, "-n", kPort, "-w", std::to_string(width), "-m",
                                   std::to_string(most)};
        a.insert(a.end(), tests.begin(), tests.end());
        const std::string out = run(a);
        EXPECT_FALSE(has(out, "error occurs, can not continue with limit test"));
        for (const std::string &line : lines) {
            EXPECT_TRUE(has(out, "LimitTest: " + line + " " + std::to_string(most))) << line;
        }
    }

    const std::vector<std::string> kObjectTests{"limit_ia", "limit_pz", "limit_cno", "limit_evd", "limit_ep",
                                                "limit_lmr"};
    const std::vector<std::string> kObjectLines{"IAs opened:", "PZs created:", "CNOs created:", "EVDs created:",
                                                "EPs created:", "LMRs created:"};

    /** @brief -T F -f @p feature with @p cases (all when empty): @p expected results printed, none FAIL. */
    void fft(const std::string &feature, size_t expected, const std::vector<std::string> &cases = {}) {
        std::vector<std::string> a{"-T", "F", "-D", kIaName, "-s", "127.0.0.1", "-n", kPort, "-f", feature};
        a.insert(a.end(), cases.begin(), cases.end());
        const std::string out = run(a);
        EXPECT_EQ(count(out, "Result: "), expected);
        EXPECT_EQ(count(out, "Result: FAIL"), 0u);
        // The function tests print "Result: PASS" even after some failed checks; a failed check prints this.
        EXPECT_EQ(count(out, " failed in file "), 0u);
    }
};

// One object set (-w 1): up to 100 IAs, PZs, CNOs, EVDs, EPs and LMRs.
TEST_F(DapltestLocal, LimitsOneObjectSet) { limits(1, 100, kObjectTests, kObjectLines); }

// OFA's own limit runs (test/dapltest/scripts/cl.sh "lim") use -w 8: eight IAs, and every EP, whatever its IA, gets
// the connection EVD created on the first IA; OFA's providers accept that.
TEST_F(DapltestLocal, LimitsEightObjectSets) { limits(8, 100, kObjectTests, kObjectLines); }

// RSPs and PSPs: dapltest's connection qualifiers are 0xAffab1e + i, which this stack truncates to TCP ports 43806 +
// i, in the ephemeral range: any local TCP connection using one of them (or its TIME_WAIT, for a minute, when not
// made reusable) makes that listen fail with DAT_CONN_QUAL_IN_USE, which is right. So the test first waits until no
// socket on this host uses the range, and 16 of each keeps the range small.
TEST_F(DapltestLocal, LimitListeners) {
    constexpr uint16_t kFirst = 0xAffab1e & 0xffff, kCount = 16;
    ASSERT_TRUE(daplutils::ports_free(kFirst, kCount, 75))
        << "TCP ports " << kFirst << "-" << kFirst + kCount - 1 << " stay in use";
    limits(1, kCount, {"limit_rsp", "limit_psp"}, {"RSPs created:", "PSPs created:"});
}

// Receive buffers posted on one EP: 15 at most (-m), each 4 KiB.
TEST_F(DapltestLocal, LimitReceivePosts) {
    const std::string out = run({"-T", "L", "-D", kIaName, "-n", kPort, "-w", "1", "-m", "15", "limit_rpost"});
    EXPECT_FALSE(has(out, "error occurs, can not continue with limit test"));
    EXPECT_TRUE(has(out, "LimitTest: recv buffers posted per EP: 15"));
}

// The largest LMR: doubling from 4 KiB until registration fails (at krdmad's 1 GiB pinned-memory limit per process),
// which it must do with an error, not a crash.
TEST_F(DapltestLocal, LimitLmrSize) {
    const std::string out = run({"-T", "L", "-D", kIaName, "-n", kPort, "limit_size_lmr"});
    EXPECT_FALSE(has(out, "error occurs, can not continue with limit test"));
    EXPECT_TRUE(has(out, "LimitTest: Largest LMR was 0x"));
}

TEST_F(DapltestLocal, FunctionHardwareConnection) { fft("hwconn", 4); }
TEST_F(DapltestLocal, FunctionEndpoint) { fft("endpoint", 3); }
TEST_F(DapltestLocal, FunctionProtectionZone) { fft("pz", 3); }
TEST_F(DapltestLocal, FunctionMemory) { fft("mem", 5); }
TEST_F(DapltestLocal, FunctionConnectionManagement) { fft("connmgt", 2); }

// Queries of every object, good and bad. Cases 13 and 15 are left out: they pass an IA handle (libdat2's small
// integer) as a CNO or EVD handle, which libdat2 itself dereferences (SIGSEGV in dat_cno_query/dat_evd_query
// before any provider is called). Case 5 (CR) answers "UNSUPP": dapltest tests it elsewhere.
TEST_F(DapltestLocal, FunctionQueryInfo) {
    fft("queryinfo", 16,
        {"case0", "case1", "case2", "case3", "case4", "case5", "case6", "case7", "case8", "case9", "case10", "case11",
         "case12", "case14", "case16", "case17"});
}

// ---------------------------------------------------------------------------------------------------------------
// dtest between two hosts: the server in host B's namespace on B's krdmad, the client here on A's; each dat.conf
// names its own host's RNIC by address under the same entry name (the client opens the name the server sends).

class DtestTwoHosts : public daplutils::DaplUtilsTest<rdmatest::TwoHosts> {
protected:
    std::string guard_netns() const override { return ns_; }
};

TEST_F(DtestTwoHosts, AcrossNamespaces) {
    const auto conf_a = write_dat_conf("dat-a.conf", addr_a_);
    const auto conf_b = write_dat_conf("dat-b.conf", addr_b_);
    const std::vector<std::string> opts{"-b", "65536", "-B", "200"};
    std::vector<std::string> s{"-P", kIaName, "-s"}, c{"-P", kIaName, "-h", addr_b_};
    s.insert(s.end(), opts.begin(), opts.end());
    c.insert(c.end(), opts.begin(), opts.end());
    const pid_t server = launch("server", DTEST_PATH, s, conf_b, dev_b_, ns_);
    ASSERT_GT(server, 0);
    ASSERT_TRUE(await_listen(server, kSideChannelPort, 60)) << "the server never listened on port 15828";
    const pid_t client = launch("client", DTEST_PATH, c, conf_a, dev_a_);
    ASSERT_GT(client, 0);
    const Ending ce = await_exit(client, 45);
    const Ending se = await_exit(server, ce.exited_with(0) && !has(output("client"), "FAILED") ? 20 : 5);
    ASSERT_TRUE(ce.finished) << "client: " << ce;
    EXPECT_TRUE(ce.exited_with(0)) << "client: " << ce;
    EXPECT_TRUE(se.exited_with(0)) << "server: " << se;
    const std::string co = output("client"), so = output("server");
    expect_dtest(co, so, {.buf_len = 65536, .burst = 200});
    // The connection really is between the two hosts' addresses.
    EXPECT_TRUE(has(after(co, "Query EP: REMOTE addr "), addr_b_));
    EXPECT_TRUE(has(after(so, "Query EP: REMOTE addr "), addr_a_));
}

}  // namespace
