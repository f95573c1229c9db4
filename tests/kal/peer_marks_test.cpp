// The sockets layer's peer detection, from a real krdmad: PEER_MARKS hands out the map; over real loopback TCP, two
// marked ends learn that the other runs the layer, a marked end facing an unmarked one learns that it does not (and
// the unmarked end is never told anything), an unprivileged process marks and reads its own sockets through the
// descriptor it was given; a kAL with detection turned off says so; bad input is refused.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "krdma/abi.h"
#include "krdma/peer_marks.hpp"
#include "krdmad_fixture.hpp"
#include "status_matchers.hpp"

namespace {

using krdma::PeerKind;

class PeerMarks : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        KrdmadFixture::SetUp();
        if (::geteuid() != 0) GTEST_SKIP() << "krdmad loads a BPF program only as root";
        device_ = dir_ / "krdma";
    }
    void start_krdmad(bool detection) {
        start({"--config", write_config(R"({"device": ")" + device_.string() + R"(", "provider_dir": ")"
                                        SOFTRNIC_PROVIDER_DIR R"(", "modules": ["softrnic_kvp.so"], "rnics": [)"
                                        R"({"name": "sr0", "provider": "softrnic", "address": "127.0.0.1"}], )"
                                        R"("llp": {"peer_detection": )" + std::string(detection ? "true" : "false") +
                                        R"(}, "log_level": "warn"})")});
        client_ = connect(device_);
        ASSERT_NE(client_, nullptr) << stderr_text();
    }
    // PEER_MARKS through the device: the map, or the kAL's refusal.
    rdma::Expected<krdma::PeerMarks> marks() {
        krdma_peer_marks q{};
        auto r = client_->request(KRDMA_CMD_PEER_MARKS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
        if (!r) return r.error();
        if (r->fds.size() != 1) return rdma::Error(RI_EPROTO, "the reply carried no descriptor");
        return krdma::PeerMarks(std::move(r->fds.front()));
    }
    // A connected pair over 127.0.0.1: the client's socket (marked first if @p mark_client) and the accepted one
    // (from a listener marked first if @p mark_server).
    void pair(const krdma::PeerMarks &m, bool mark_client, bool mark_server, int &c, int &s) {
        const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        if (mark_server) {
            ASSERT_OK(m.mark(l));
        }
        ASSERT_EQ(::listen(l, 1), 0);
        ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr *>(&a), &len), 0);
        c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (mark_client) {
            ASSERT_OK(m.mark(c));
        }
        ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        ASSERT_GE(s, 0);
        ::close(l);
    }
    static PeerKind kind(const krdma::PeerMarks &m, int fd) {
        auto k = m.peer(fd);
        EXPECT_TRUE(k) << k.error().to_string();
        return k ? *k : PeerKind::undecided;
    }
    std::filesystem::path device_;
    std::unique_ptr<ual::DeviceClient> client_;
};

TEST_F(PeerMarks, MarkedEndsLearnWhetherTheirPeerIsMarkedAndUnmarkedEndsLearnNothing) {
    ASSERT_NO_FATAL_FAILURE(start_krdmad(true));
    auto m = marks();
    ASSERT_OK(m) << m.error().to_string() << "\n" << stderr_text();
    struct Case {
        bool client, server;
        PeerKind client_sees, server_sees;
    };
    for (const Case k : {Case{true, true, PeerKind::layer, PeerKind::layer},
                         Case{true, false, PeerKind::plain, PeerKind::undecided},
                         Case{false, true, PeerKind::undecided, PeerKind::plain},
                         Case{false, false, PeerKind::undecided, PeerKind::undecided}}) {
        SCOPED_TRACE("client marked " + std::to_string(k.client) + ", listener marked " + std::to_string(k.server));
        int c = -1, s = -1;
        ASSERT_NO_FATAL_FAILURE(pair(*m, k.client, k.server, c, s));
        EXPECT_EQ(kind(*m, c), k.client_sees) << "the client's view of its peer";
        EXPECT_EQ(kind(*m, s), k.server_sees) << "the accepted socket's view of its peer";
        // A marked end also records which end it is (a program executed with the socket learns it from the map).
        auto lc = m->look(c), ls = m->look(s);
        ASSERT_OK(lc);
        ASSERT_OK(ls);
        EXPECT_EQ(lc->role, k.client ? 1 : 0) << "a marked client records that it connected";
        EXPECT_EQ(ls->role, k.server ? 2 : 0) << "a marked listener's accepted socket records that it was accepted";
        // The option costs no payload byte: what one end writes is exactly what the other reads.
        ASSERT_EQ(::write(c, "ping", 4), 4);
        char buf[8] = {};
        EXPECT_EQ(::recv(s, buf, sizeof buf, 0), 4) << "the connection carried a byte nobody wrote";
        ::close(c);
        ::close(s);
    }
}

TEST_F(PeerMarks, AnUnprivilegedProcessMarksAndReadsItsOwnSocketsThroughTheDescriptor) {
    ASSERT_NO_FATAL_FAILURE(start_krdmad(true));
    auto m = marks();
    ASSERT_OK(m) << m.error().to_string();
    const pid_t child = ::fork();
    if (child == 0) {
        // nobody: no capability at all; the map's descriptor is all it has.
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
        int c = -1, s = -1;
        pair(*m, true, true, c, s);
        if (c < 0 || s < 0) ::_exit(4);
        auto k = m->peer(c);
        ::_exit(k && *k == PeerKind::layer ? 0 : 5);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "uid 65534 could not mark its sockets or read their peers (3: setuid, "
                                         "4: no connection, 5: the peer was not seen)";
}

TEST_F(PeerMarks, BadDescriptorsAreRefusedNotCrashed) {
    ASSERT_NO_FATAL_FAILURE(start_krdmad(true));
    auto m = marks();
    ASSERT_OK(m) << m.error().to_string();
    EXPECT_FALSE(m->mark(-1).ok());
    EXPECT_FALSE(m->peer(-1));
    // A UDP socket may carry a mark, which means nothing: it has no handshake, its peer stays undecided.
    const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    (void)m->mark(udp);
    EXPECT_EQ(kind(*m, udp), PeerKind::undecided);
    ::close(udp);
    const int notsock = ::dup(1);
    EXPECT_FALSE(m->mark(notsock).ok()) << "a descriptor that is no socket";
    ::close(notsock);
    // krdmad still serves.
    EXPECT_OK(marks());
}

TEST_F(PeerMarks, AKalWithDetectionOffSaysSo) {
    ASSERT_NO_FATAL_FAILURE(start_krdmad(false));
    krdma_peer_marks q{};
    auto r = client_->request(KRDMA_CMD_PEER_MARKS, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), RI_EOPNOTSUPP);
    EXPECT_NE(r.error().message().find("llp.peer_detection"), std::string::npos) << r.error().message();
}

}  // namespace
