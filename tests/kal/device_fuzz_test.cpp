// A bounded fuzz run of the device request decoder: random and mutated packets (sizes 0 to beyond the limit,
// random headers, real command codes with wrong sizes, stray descriptors) from a raw client. Every packet must get
// exactly one reply, the server must stay up and leak no descriptor, and a valid call must work afterwards.
// Under ASan/UBSan in the sanitizer build.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "client.hpp"
#include "test_util.hpp"
#include "server.hpp"

namespace {

namespace fs = std::filesystem;

TEST(DeviceFuzz, EveryPacketGetsOneReplyAndNothingLeaks) {
    char tmpl[] = "/tmp/krdma-fuzz-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    fs::path dir = tmpl;
    const size_t fds_before = testutil::open_fds();
    {
        kal::DeviceServer server(dir / "krdma");
        ASSERT_TRUE(server.listen());
        std::thread thread([&] { server.run(); });
        struct Stop {
            kal::DeviceServer &s;
            std::thread &t;
            ~Stop() {
                s.stop();
                t.join();
            }
        } stop{server, thread};

        krdma::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        sockaddr_un addr;
        ASSERT_TRUE(krdma::unix_address(dir / "krdma", addr));
        ASSERT_EQ(::connect(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
        int pipefd[2];
        ASSERT_EQ(::pipe(pipefd), 0);

        std::mt19937 rng(2024);
        const uint32_t cmds[] = {KRDMA_CMD_HELLO, KRDMA_CMD_ECHO, 0, 0xffffffffu,
                                 _IOWR(KRDMA_IOC_MAGIC, 0x55, uint32_t)};
        std::vector<uint8_t> pkt(KRDMA_MAX_MESSAGE + 512);
        constexpr int kIterations = 5000;
        for (int i = 0; i < kIterations; ++i) {
            size_t len;
            switch (rng() % 4) {
                case 0: len = rng() % sizeof(krdma_msg_hdr); break;            // shorter than a header
                case 1: len = sizeof(krdma_msg_hdr) + rng() % 128; break;      // around real sizes
                case 2: len = rng() % pkt.size(); break;                        // anything, also too long
                default: len = sizeof(krdma_msg_hdr) + sizeof(krdma_echo); break;
            }
            for (size_t b = 0; b < len; ++b) pkt[b] = static_cast<uint8_t>(rng());
            if (len >= sizeof(krdma_msg_hdr) && rng() % 2 == 0) {
                krdma_msg_hdr h{};
                h.cmd = cmds[rng() % std::size(cmds)];
                h.seq = static_cast<uint32_t>(i);
                h.length = rng() % 4 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(len);
                h.flags = rng() % 4 == 0 ? static_cast<uint32_t>(rng()) : 0;
                std::memcpy(pkt.data(), &h, sizeof h);
            }
            iovec iov{pkt.data(), len};
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 6)];
            int nfds = rng() % 5 == 0 ? static_cast<int>(rng() % 7) : 0;
            if (nfds > 0) {
                msg.msg_control = control;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(nfds));
                cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(nfds));
                for (int k = 0; k < nfds; ++k) std::memcpy(CMSG_DATA(c) + k * sizeof(int), &pipefd[k % 2], sizeof(int));
            }
            ASSERT_EQ(::sendmsg(s.get(), &msg, 0), static_cast<ssize_t>(len)) << "iteration " << i;
            // Exactly one reply, and the connection stays open.
            pollfd p{s.get(), POLLIN, 0};
            ASSERT_EQ(::poll(&p, 1, 5000), 1) << "no reply to iteration " << i << " (" << len << " bytes)";
            krdma::Message reply;
            ASSERT_EQ(krdma::receive(s.get(), reply), krdma::RecvResult::message) << "iteration " << i;
            EXPECT_NE(reply.hdr.flags & KRDMA_MSG_REPLY, 0u);
        }
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        // A proper client still gets served.
        auto client = ual::DeviceClient::connect(dir / "krdma");
        ASSERT_TRUE(client) << client.error().to_string();
        EXPECT_EQ(server.connections(), 2u);
    }
    fs::remove_all(dir);
    EXPECT_EQ(testutil::open_fds(), fds_before);
}

}  // namespace
