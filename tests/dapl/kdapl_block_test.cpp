// kDAPL: krdmad loads the blk_service consumer module (C, over the kDAPL it exports: upcall EVDs, kernel LMRs) and
// uDAPL clients (dapl_blk, through the distribution's DAT registry) write and read its volume with RDMA, verifying
// every byte; a client killed with SIGKILL mid-transfer leaves krdmad's resource counts as they were.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>

#include "connection_fixtures.hpp"

namespace {

class KdaplBlock : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        volume_ = dir_ / "volume.img";
        {
            std::ofstream v(volume_, std::ios::binary);
            v.seekp((8 << 20) - 1);
            v.put('\0');  // an 8 MiB file volume
        }
        const std::string consumers = R"("consumers": [{"module": ")" + std::string(BLK_MODULE) +
                                      R"(", "required": true, "args": {"rnic": "sr0", "port": 7480, "file": ")" +
                                      volume_.string() + R"("}}])";
        krdmad_ = start(
            {"--config", write_config(rdmatest::krdmad_config(device_, "sr0", "127.0.0.1", consumers)).string()});
        ASSERT_TRUE(wait_ready(krdmad_)) << stderr_text();
        std::ofstream(dir_ / "dat.conf") << "openrdma-sr0 u2.0 nonthreadsafe default " << DAPL_PROVIDER_LIBRARY
                                         << " dapl.2.0 \"sr0\" \"\"\n";
        ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
        ::setenv("DAT_OVERRIDE", (dir_ / "dat.conf").c_str(), 1);
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    }

    // Runs dapl_blk with @p args; its exit status, its output in @p out.
    int client(std::vector<std::string> args, std::string &out) {
        args.insert(args.begin(), {"-P", "openrdma-sr0"});
        const auto file = dir_ / "client.out";
        const int status = wait_exit(spawn(DAPL_BLK_PATH, std::move(args), file, file));
        out = read_text(file);
        return status;
    }

    // rdmactl resources, without the lines of processes other than krdmad.
    std::string krdmad_resources() {
        std::string out;
        EXPECT_EQ(rdmactl({"--device", device_.string(), "--json", "resources"}, out), 0) << out;
        return out;
    }

    std::filesystem::path device_, volume_;
    pid_t krdmad_ = -1;
};

TEST_F(KdaplBlock, ClientWritesReadsAndVerifiesAFileVolume) {
    std::string out;
    ASSERT_EQ(client({"-b", "65536", "-n", "64"}, out), 0) << out << stderr_text();
    EXPECT_NE(out.find("volume of 8388608 bytes"), std::string::npos) << out;
    EXPECT_NE(out.find("verified 4194304 bytes"), std::string::npos) << out;
    // The data is in the file: a second client only reads it back and verifies it.
    ASSERT_EQ(client({"-b", "65536", "-n", "64", "--read-only"}, out), 0) << out << stderr_text();
    EXPECT_NE(out.find("verified 4194304 bytes"), std::string::npos) << out;
    // Another seed's pattern does not match what is there.
    EXPECT_NE(client({"-b", "65536", "-n", "4", "--read-only", "--seed", "9"}, out), 0) << out;
    EXPECT_NE(out.find("FAILED"), std::string::npos) << out;
}

TEST_F(KdaplBlock, SeveralClientsAtOnceEachOnItsOwnRange) {
    std::vector<pid_t> pids;
    for (int i = 0; i < 4; ++i) {
        const auto file = dir_ / ("client" + std::to_string(i) + ".out");
        pids.push_back(spawn(DAPL_BLK_PATH,
                             {"-P", "openrdma-sr0", "-b", "16384", "-n", "128", "-o", std::to_string(i * 2097152),
                              "--seed", std::to_string(i + 3)},
                             file, file));
    }
    for (int i = 0; i < 4; ++i) {
        const std::string out = read_text(dir_ / ("client" + std::to_string(i) + ".out"));
        EXPECT_EQ(wait_exit(pids[static_cast<size_t>(i)]), 0) << i << ": " << out << stderr_text();
    }
    for (int i = 0; i < 4; ++i) {
        EXPECT_NE(read_text(dir_ / ("client" + std::to_string(i) + ".out")).find("verified 2097152 bytes"),
                  std::string::npos);
    }
}

TEST_F(KdaplBlock, KilledClientLeavesNothingBehind) {
    std::string out;
    ASSERT_EQ(client({"-b", "4096", "-n", "16"}, out), 0) << out << stderr_text();
    const std::string before = krdmad_resources();
    for (int round = 0; round < 3; ++round) {
        const auto file = dir_ / "victim.out";
        const pid_t victim =
            spawn(DAPL_BLK_PATH, {"-P", "openrdma-sr0", "-b", "512", "-n", "16384"}, file, file);
        // Kill it once it is moving data (its first line says it is connected).
        for (int i = 0; i < 500 && read_text(file).find("connected to") == std::string::npos; ++i) ::usleep(2000);
        // 32768 round trips: the whole run takes half a second or more, so it is killed mid-transfer.
        ::usleep(5000 * static_cast<useconds_t>(round + 1));
        ::kill(victim, SIGKILL);
        EXPECT_NE(wait_exit(victim), 0);
    }
    // krdmad tears the victims down, and the service frees their EPs on the broken connections.
    std::string after;
    for (int i = 0; i < 100; ++i) {
        after = krdmad_resources();
        if (after == before) break;
        ::usleep(50000);
    }
    EXPECT_EQ(after, before);
    // The service still serves.
    ASSERT_EQ(client({"-b", "4096", "-n", "16", "--seed", "5"}, out), 0) << out << stderr_text();
}

}  // namespace
