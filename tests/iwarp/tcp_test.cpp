// Two engines over a real TCP connection on 127.0.0.1: MPA negotiation on the socket, then Sends, RDMA Writes and
// RDMA Reads from 1 byte to 16 MiB, CRC on and off, markers on and off, revision 1 and 2, every byte verified.
// Inbound payload is received straight into its placement target (recv into Receiver::next_buffer()).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "engine_harness.hpp"
#include "iwarp/mpa.hpp"
#include "status_matchers.hpp"

namespace {

using namespace iwarp;
using harness::Owner;

struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
    Fd &operator=(Fd &&o) noexcept {
        std::swap(fd, o.fd);
        return *this;
    }
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// A connected pair of TCP sockets on loopback.
std::pair<Fd, Fd> tcp_pair() {
    Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener.fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener.fd, 1), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener.fd, reinterpret_cast<sockaddr *>(&addr), &len);
    Fd client(::socket(AF_INET, SOCK_STREAM, 0));
    EXPECT_EQ(::connect(client.fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    Fd server(::accept(listener.fd, nullptr, nullptr));
    EXPECT_GE(server.fd, 0);
    return {std::move(client), std::move(server)};
}

void write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        ASSERT_GT(w, 0);
        p += w;
        n -= static_cast<size_t>(w);
    }
}

void read_all(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t r = ::read(fd, p, n);
        ASSERT_GT(r, 0);
        p += r;
        n -= static_cast<size_t>(r);
    }
}

void send_mpa(int fd, const MpaFrame &f) {
    uint8_t buf[kMpaFrameHeaderLen + kMpaMaxPrivateData];
    auto n = encode_mpa(f, buf);
    ASSERT_OK(n);
    write_all(fd, buf, *n);
}

// Reads one MPA frame into @p storage and decodes it.
MpaFrame recv_mpa(int fd, MpaKind kind, std::vector<uint8_t> &storage) {
    storage.resize(kMpaFrameHeaderLen);
    read_all(fd, storage.data(), kMpaFrameHeaderLen);
    auto pd = decode_mpa_header(storage, kind);
    EXPECT_OK(pd);
    storage.resize(kMpaFrameHeaderLen + (pd ? *pd : 0));
    read_all(fd, storage.data() + kMpaFrameHeaderLen, storage.size() - kMpaFrameHeaderLen);
    auto f = decode_mpa(storage, kind);
    EXPECT_OK(f);
    return f ? *f : MpaFrame{};
}

// One side of the connection: its socket, owner and engine, and the frame being written.
struct Side {
    Fd sock;
    Owner owner;
    std::unique_ptr<Engine> engine;
    TxFrame frame;
    bool frame_pending = false;
    size_t frame_off = 0;
    uint64_t recv_calls = 0;

    // Moves what it can without blocking; returns true if anything moved.
    bool service() {
        bool moved = false;
        // Transmit: finish the pending frame, then build more.
        for (;;) {
            if (!frame_pending) {
                if (!engine->next_frame(frame)) break;
                frame_pending = true;
                frame_off = 0;
            }
            iovec iov[kMaxFpduIov];
            size_t cnt = 0, skip = frame_off;
            for (size_t i = 0; i < frame.iovcnt; ++i) {
                if (skip >= frame.iov[i].iov_len) {
                    skip -= frame.iov[i].iov_len;
                    continue;
                }
                iov[cnt++] = iovec{static_cast<uint8_t *>(frame.iov[i].iov_base) + skip, frame.iov[i].iov_len - skip};
                skip = 0;
            }
            ssize_t w = ::writev(sock.fd, iov, static_cast<int>(std::min<size_t>(cnt, IOV_MAX)));
            if (w <= 0) break;
            moved = true;
            frame_off += static_cast<size_t>(w);
            if (frame_off == frame.bytes) {
                frame_pending = false;
                engine->frame_sent();
            }
        }
        // Receive straight into the engine's placement targets.
        for (;;) {
            std::span<uint8_t> dst = engine->receiver().next_buffer();
            if (dst.empty()) break;
            ssize_t r = ::recv(sock.fd, dst.data(), dst.size(), MSG_DONTWAIT);
            ++recv_calls;
            if (r <= 0) break;
            moved = true;
            engine->receiver().advance(static_cast<size_t>(r));
        }
        return moved;
    }
};

struct Params {
    uint8_t revision;
    bool crc;
    bool markers;
    size_t fpdu_max;
    std::string name() const {
        return "rev" + std::to_string(revision) + (crc ? "_crc" : "_nocrc") + (markers ? "_markers" : "_nomarkers") +
               "_fpdu" + std::to_string(fpdu_max);
    }
};

class TcpEngines : public ::testing::TestWithParam<Params> {
protected:
    void SetUp() override {
        const Params p = GetParam();
        auto [c, s] = tcp_pair();
        ini.sock = std::move(c);
        res.sock = std::move(s);
        MpaConfig cfg;
        cfg.revision = p.revision;
        cfg.crc = p.crc;
        cfg.markers_wanted = p.markers;
        cfg.markers_allowed = true;
        cfg.ird = cfg.ord = 8;
        // MPA negotiation on the real socket, blocking, before full operation.
        const std::vector<uint8_t> pd = {'h', 'i'};
        MpaFrame request = make_request(cfg, pd);
        send_mpa(ini.sock.fd, request);
        std::vector<uint8_t> req_storage, rep_storage;
        MpaFrame got_req = recv_mpa(res.sock.fd, MpaKind::request, req_storage);
        ASSERT_EQ(std::vector<uint8_t>(got_req.private_data.begin(), got_req.private_data.end()), pd);
        auto response = respond(cfg, got_req);
        ASSERT_OK(response) << response.error().to_string();
        send_mpa(res.sock.fd, response->reply);
        MpaFrame got_rep = recv_mpa(ini.sock.fd, MpaKind::reply, rep_storage);
        auto agreed = complete(cfg, request, got_rep);
        ASSERT_OK(agreed) << agreed.error().to_string();
        EXPECT_EQ(agreed->crc, p.crc);
        EXPECT_EQ(agreed->revision, p.revision);

        int mss = 0;
        socklen_t len = sizeof mss;
        ::getsockopt(ini.sock.fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len);
        auto make_cfg = [&](const MpaResult &r, bool initiator) {
            EngineConfig e;
            e.pd = 1;
            e.rx = FramingOptions{r.crc, r.markers_rx};
            e.tx = FramingOptions{r.crc, r.markers_tx};
            e.mulpdu = mulpdu(1460, r.markers_tx, p.fpdu_max);
            e.ird = r.ird;
            e.ord = r.ord;
            e.sq_depth = 64;
            if (r.peer2peer) {
                if (initiator) e.rtr_send = r.rtr;
                else e.rtr_expect = r.rtr;
            }
            return e;
        };
        ini.engine = std::make_unique<Engine>(ini.owner, make_cfg(*agreed, true));
        res.engine = std::make_unique<Engine>(res.owner, make_cfg(response->result, false));
        for (Side *side : {&ini, &res}) {
            ::fcntl(side->sock.fd, F_SETFL, ::fcntl(side->sock.fd, F_GETFL) | O_NONBLOCK);
        }
    }

    // Services both sides until done() or a 30 s deadline.
    void run_until(const std::function<bool()> &done) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done()) {
            ASSERT_FALSE(ini.engine->failed()) << term_name(ini.engine->failure());
            ASSERT_FALSE(res.engine->failed()) << term_name(res.engine->failure());
            ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "transfer did not finish";
            bool moved = ini.service();
            moved = res.service() || moved;
            if (!moved) {
                pollfd fds[2] = {{ini.sock.fd, POLLIN, 0}, {res.sock.fd, POLLIN, 0}};
                if (ini.frame_pending) fds[0].events |= POLLOUT;
                if (res.frame_pending) fds[1].events |= POLLOUT;
                ::poll(fds, 2, 10);
            }
        }
    }

    Side ini, res;
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (auto &b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x);
    }
    return v;
}

TEST_P(TcpEngines, SendsOfEverySize) {
    const std::vector<size_t> sizes = {1, 4095, 65536, 1u << 20};
    std::vector<std::vector<uint8_t>> src, dst;
    for (size_t i = 0; i < sizes.size(); ++i) {
        src.push_back(pattern(sizes[i], static_cast<uint32_t>(i)));
        dst.emplace_back(sizes[i], 0);
    }
    for (size_t i = 0; i < sizes.size(); ++i) res.owner.post_receive(i, dst[i], i == 3 ? 4 : 1);
    for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_OK(ini.engine->post(harness::wr_over(i, WorkType::send, src[i])));
    }
    run_until([&] { return res.owner.completions.size() == sizes.size() && ini.owner.completions.size() == sizes.size(); });
    for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(res.owner.completions[i].byte_len, sizes[i]);
        EXPECT_TRUE(dst[i] == src[i]) << "message " << i;
    }
}

TEST_P(TcpEngines, WriteAndRead16MiB) {
    constexpr size_t kSize = 16u << 20;
    auto src = pattern(kSize, 99);
    std::vector<uint8_t> remote(kSize, 0), back(kSize, 0);
    res.owner.add_region(0x77, remote, RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ | RI_ACCESS_LOCAL_WRITE);
    ini.owner.add_region(0x88, back, RI_ACCESS_LOCAL_WRITE);
    WorkRequest w = harness::wr_over(1, WorkType::write, src);
    w.remote_stag = 0x77;
    ASSERT_OK(ini.engine->post(w));
    WorkRequest r;
    r.wr_id = 2;
    r.type = WorkType::read;
    r.remote_stag = 0x77;
    r.local_stag = 0x88;
    r.length = static_cast<uint32_t>(kSize);
    ASSERT_OK(ini.engine->post(r));
    run_until([&] { return ini.owner.completions.size() == 2; });
    EXPECT_EQ(ini.owner.completions[0].kind, Completion::Kind::write);
    EXPECT_EQ(ini.owner.completions[1].kind, Completion::Kind::read);
    EXPECT_TRUE(remote == src);
    EXPECT_TRUE(back == src);
    // Reads run both ways at once: the responder reads from the initiator too.
    std::vector<uint8_t> small = pattern(3000, 5), small_back(3000, 0);
    ini.owner.add_region(0x99, small, RI_ACCESS_REMOTE_READ);
    res.owner.add_region(0xaa, small_back, RI_ACCESS_LOCAL_WRITE);
    WorkRequest r2;
    r2.wr_id = 3;
    r2.type = WorkType::read;
    r2.remote_stag = 0x99;
    r2.local_stag = 0xaa;
    r2.length = 3000;
    ASSERT_OK(res.engine->post(r2));
    run_until([&] { return res.owner.completions.size() == 1; });
    EXPECT_TRUE(small_back == small);
}

INSTANTIATE_TEST_SUITE_P(Modes, TcpEngines,
                         ::testing::Values(Params{1, false, false, 0}, Params{1, true, false, 0},
                                           Params{1, true, true, 0}, Params{2, false, false, 0},
                                           Params{2, true, false, 16384}, Params{2, false, true, 0},
                                           Params{2, true, true, 16384}),
                         [](const ::testing::TestParamInfo<Params> &param) { return param.param.name(); });

}  // namespace
