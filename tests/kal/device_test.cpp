// The /dev/krdma transport: a real device server on a private path, the uAL client and raw sockets playing a
// misbehaving client. Every malformed request gets an error reply and the connection stays usable.
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "client.hpp"
#include "krdma/reason.hpp"
#include "test_util.hpp"
#include "server.hpp"
#include "status_matchers.hpp"

namespace {

namespace fs = std::filesystem;

class Device : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/krdma-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        server_ = std::make_unique<kal::DeviceServer>(dir_ / "krdma");
        auto ok = server_->listen();
        ASSERT_OK(ok) << ok.error().to_string();
        thread_ = std::thread([this] { server_->run(); });
    }
    void TearDown() override {
        stop_server();
        fs::remove_all(dir_);
    }
    void stop_server() {
        if (thread_.joinable()) {
            server_->stop();
            thread_.join();
        }
        server_.reset();
    }
    std::unique_ptr<ual::DeviceClient> client() {
        auto c = ual::DeviceClient::connect(dir_ / "krdma");
        EXPECT_OK(c) << c.error().to_string();
        return c ? std::move(*c) : nullptr;
    }
    // A raw client socket, to send what the uAL client never would.
    krdma::UniqueFd raw() {
        krdma::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        sockaddr_un addr;
        EXPECT_TRUE(krdma::unix_address(dir_ / "krdma", addr));
        EXPECT_EQ(::connect(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
        return s;
    }
    // HELLO with version word @p word on a raw socket: the reply's status and the version word it agreed on.
    static std::pair<int, uint32_t> raw_hello(int fd, uint32_t word) {
        krdma_msg_hdr hdr{};
        hdr.cmd = KRDMA_CMD_HELLO;
        hdr.seq = 7;
        krdma_hello h{};
        h.abi_version = word;
        EXPECT_OK(krdma::send(fd, hdr, {reinterpret_cast<const uint8_t *>(&h), sizeof h}));
        krdma::Message m;
        EXPECT_EQ(krdma::receive(fd, m, true), krdma::RecvResult::message);
        if (m.hdr.status != 0 || m.payload_len() != sizeof h) return {m.hdr.status, 0};
        std::memcpy(&h, m.body.data(), sizeof h);
        return {0, h.abi_version};
    }
    // Sends request @p cmd with sequence @p seq and header @p flags, a krdma_echo's worth of zeros as its body.
    static void raw_request(int fd, uint32_t cmd, uint32_t seq, uint32_t flags) {
        krdma_msg_hdr hdr{};
        hdr.cmd = cmd;
        hdr.seq = seq;
        hdr.flags = flags;
        krdma_echo e{};
        EXPECT_OK(krdma::send(fd, hdr, {reinterpret_cast<const uint8_t *>(&e), sizeof e}));
    }
    // Reads one reply from a raw socket.
    krdma_msg_hdr raw_reply(int fd) {
        krdma_msg_hdr hdr{};
        EXPECT_GE(::recv(fd, &hdr, sizeof hdr, 0), static_cast<ssize_t>(sizeof hdr));
        return hdr;
    }

    fs::path dir_;
    std::unique_ptr<kal::DeviceServer> server_;
    std::thread thread_;
};

TEST_F(Device, HelloReportsPeerCredentials) {
    auto c = client();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->hello().abi_version, KRDMA_ABI_WORD(KRDMA_ABI_VERSION, KRDMA_ABI_MINOR));
    EXPECT_EQ(c->abi_minor(), KRDMA_ABI_MINOR);
    EXPECT_EQ(c->hello().pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(c->hello().uid, ::getuid());
    EXPECT_EQ(c->hello().max_message, KRDMA_MAX_MESSAGE);
    EXPECT_GT(c->hello().client_id, 0u);
    auto c2 = client();
    EXPECT_NE(c2->hello().client_id, c->hello().client_id);
}

TEST_F(Device, EchoPassesPayloadAndDescriptors) {
    auto c = client();
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    krdma_echo e{};
    e.cookie = 0x1122334455667788ull;
    std::strcpy(reinterpret_cast<char *>(e.data), "hello kAL");
    int fds[1] = {p[1]};
    auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, fds);
    ASSERT_OK(r) << r.error().to_string();
    ASSERT_EQ(r->status, 0);
    krdma_echo back;
    ASSERT_EQ(r->payload.size(), sizeof back);
    std::memcpy(&back, r->payload.data(), sizeof back);
    EXPECT_EQ(back.cookie, e.cookie);
    EXPECT_STREQ(reinterpret_cast<char *>(back.data), "hello kAL");
    // The descriptor that came back is the same pipe.
    ASSERT_EQ(r->fds.size(), 1u);
    ASSERT_EQ(::write(r->fds[0].get(), "x", 1), 1);
    char ch = 0;
    ASSERT_EQ(::read(p[0], &ch, 1), 1);
    EXPECT_EQ(ch, 'x');
    ::close(p[0]);
    ::close(p[1]);
}

// call_into(): the same exchange, the reply struct written into the caller's buffer (in place of the request).
TEST_F(Device, CallIntoWritesTheReplyInPlace) {
    auto c = client();
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    krdma_echo e{};
    e.cookie = 42;
    int fds[1] = {p[1]};
    auto r = c->call_into(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e},
                          {reinterpret_cast<uint8_t *>(&e), sizeof e}, fds);
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->status, 0);
    EXPECT_EQ(r->payload_len, sizeof e);
    EXPECT_EQ(e.cookie, 42u);
    ASSERT_EQ(r->nfds, 1u);
    ASSERT_EQ(::write(r->fds[0].get(), "x", 1), 1);
    char ch = 0;
    ASSERT_EQ(::read(p[0], &ch, 1), 1);
    // A smaller buffer gets what fits and the announced size; an error reply writes nothing.
    uint8_t small[4] = {};
    r = c->call_into(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, small);
    ASSERT_OK(r);
    EXPECT_EQ(r->payload_len, sizeof e);
    EXPECT_EQ(small[0], 42u);
    r = c->call_into(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e - 1}, {});
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_EINVAL);
    EXPECT_EQ(r->payload_len, 0u);
    ::close(p[0]);
    ::close(p[1]);
}

// A reply later than the call's timeout is ETIMEDOUT; the next call (another timeout) skips the stale reply.
TEST_F(Device, LateReplyTimesOutAndIsSkippedByTheNextCall) {
    constexpr uint32_t kSlow = _IOWR(KRDMA_IOC_MAGIC, 0x7e, struct krdma_echo);
    kal::DeviceServer slow(dir_ / "slow");
    slow.on(kSlow, [](kal::Connection &, const kal::Request &, kal::Reply &) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return 0;
    });
    ASSERT_OK(slow.listen());
    std::thread t([&] { slow.run(); });
    {
        auto c = ual::DeviceClient::connect(dir_ / "slow");
        ASSERT_OK(c) << c.error().to_string();
        krdma_echo e{};
        const auto start = std::chrono::steady_clock::now();
        auto r = (*c)->call(kSlow, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, {},
                            std::chrono::milliseconds(50));
        const auto took = std::chrono::steady_clock::now() - start;
        ASSERT_FALSE(r);
        EXPECT_STATUS(r, RI_ETIMEDOUT);
        EXPECT_GE(took, std::chrono::milliseconds(50));
        EXPECT_LT(took, std::chrono::milliseconds(250));
        e.cookie = 7;
        r = (*c)->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e});
        ASSERT_OK(r) << r.error().to_string();
        EXPECT_EQ(r->status, 0);
        krdma_echo back{};
        ASSERT_EQ(r->payload.size(), sizeof back);
        std::memcpy(&back, r->payload.data(), sizeof back);
        EXPECT_EQ(back.cookie, 7u);
    }
    slow.stop();
    t.join();
}

TEST_F(Device, UnknownCommandIsENOTTY) {
    auto c = client();
    uint8_t buf[8]{};
    auto r = c->call(_IOWR(KRDMA_IOC_MAGIC, 0x7f, uint64_t), buf);
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_ENOTTY);
    EXPECT_TRUE(r->payload.empty());
    EXPECT_NE(r->reason.find("unknown command 0xc008527f"), std::string::npos) << r->reason;
    // request() turns the refusal into an error whose message is the kAL's reason.
    auto e = c->request(_IOWR(KRDMA_IOC_MAGIC, 0x7f, uint64_t), buf);
    ASSERT_FALSE(e);
    EXPECT_STATUS(e, RI_ENOTTY);
    EXPECT_EQ(e.error().message(), r->reason);
}

TEST_F(Device, WrongSizeIsEINVALAndTheConnectionStaysUsable) {
    auto c = client();
    uint8_t small[4]{};
    auto r = c->call(KRDMA_CMD_ECHO, small);
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_EINVAL);
    EXPECT_NE(r->reason.find("takes 64 bytes, the request has 4"), std::string::npos) << r->reason;
    krdma_echo e{};
    auto ok = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e});
    ASSERT_OK(ok);
    EXPECT_EQ(ok->status, 0);
}

TEST_F(Device, MalformedPacketsGetErrorReplies) {
    krdma::UniqueFd s = raw();
    // An empty packet (which SOCK_SEQPACKET reports like an end of stream) is malformed, not a hang-up.
    ASSERT_EQ(::send(s.get(), "", 0, 0), 0);
    EXPECT_STATUS(raw_reply(s.get()).status, RI_EMSGSIZE);
    // Shorter than a header.
    uint8_t junk[3] = {1, 2, 3};
    ASSERT_EQ(::send(s.get(), junk, sizeof junk, 0), 3);
    EXPECT_STATUS(raw_reply(s.get()).status, RI_EMSGSIZE);
    // A header whose length field lies.
    krdma_msg_hdr h{};
    h.cmd = KRDMA_CMD_ECHO;
    h.seq = 7;
    h.length = 9999;
    ASSERT_EQ(::send(s.get(), &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    krdma_msg_hdr rep = raw_reply(s.get());
    EXPECT_STATUS(rep.status, RI_EMSGSIZE);
    EXPECT_EQ(rep.seq, 7u);
    // Larger than any message may be.
    std::vector<uint8_t> huge(KRDMA_MAX_MESSAGE + 100, 0);
    krdma_msg_hdr big{};
    big.cmd = KRDMA_CMD_ECHO;
    big.seq = 8;
    big.length = static_cast<uint32_t>(huge.size());
    std::memcpy(huge.data(), &big, sizeof big);
    ASSERT_EQ(::send(s.get(), huge.data(), huge.size(), 0), static_cast<ssize_t>(huge.size()));
    EXPECT_STATUS(raw_reply(s.get()).status, RI_EMSGSIZE);
    // Flags a request must not carry.
    krdma_msg_hdr flagged{};
    flagged.cmd = KRDMA_CMD_ECHO;
    flagged.seq = 9;
    flagged.flags = KRDMA_MSG_REPLY;
    krdma_echo e{};
    uint8_t pkt[sizeof flagged + sizeof e];
    flagged.length = sizeof pkt;
    std::memcpy(pkt, &flagged, sizeof flagged);
    std::memcpy(pkt + sizeof flagged, &e, sizeof e);
    ASSERT_EQ(::send(s.get(), pkt, sizeof pkt, 0), static_cast<ssize_t>(sizeof pkt));
    EXPECT_STATUS(raw_reply(s.get()).status, RI_EINVAL);
    // And after all that, a proper request on the same connection works.
    flagged.flags = 0;
    std::memcpy(pkt, &flagged, sizeof flagged);
    ASSERT_EQ(::send(s.get(), pkt, sizeof pkt, 0), static_cast<ssize_t>(sizeof pkt));
    EXPECT_EQ(raw_reply(s.get()).status, 0);
}

TEST_F(Device, TooManyDescriptorsAreClosedNotLeaked) {
    size_t before = testutil::open_fds();
    {
        auto c = client();
        int p[2];
        ASSERT_EQ(::pipe(p), 0);
        int fds[KRDMA_MAX_FDS + 2];
        for (auto &f : fds) f = p[0];
        krdma_echo e{};
        // The client refuses to send more than the limit itself...
        auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, fds);
        EXPECT_FALSE(r);
        // ...so send them raw: the server closes every one and answers.
        krdma::UniqueFd s = raw();
        krdma_msg_hdr h{};
        h.cmd = KRDMA_CMD_ECHO;
        h.length = sizeof h + sizeof e;
        uint8_t pkt[sizeof h + sizeof e]{};
        std::memcpy(pkt, &h, sizeof h);
        iovec iov{pkt, sizeof pkt};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof fds);
        std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
        ASSERT_EQ(::sendmsg(s.get(), &msg, 0), static_cast<ssize_t>(sizeof pkt));
        EXPECT_STATUS(raw_reply(s.get()).status, RI_EMSGSIZE);
        ::close(p[0]);
        ::close(p[1]);
    }
    // Give the server a moment to notice the closed connections, then nothing may be left open.
    for (int i = 0; i < 100 && server_->connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(server_->connections(), 0u);
    EXPECT_EQ(testutil::open_fds(), before);
}

TEST_F(Device, EventsReachTheClient) {
    auto c = client();
    EXPECT_FALSE(c->next_event().has_value());
    krdma_event ev{};
    ev.event = KRDMA_EVENT_SHUTDOWN;
    ev.detail = 42;
    server_->broadcast(ev);
    std::optional<krdma_event> got;
    for (int i = 0; i < 200 && !got; ++i) {
        got = c->next_event();
        if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->event, static_cast<uint32_t>(KRDMA_EVENT_SHUTDOWN));
    EXPECT_EQ(got->detail, 42u);
}

// A client that leaves its events unread fills its receive queue; the reply to its next request must still
// arrive (held by the server until the client reads), never be dropped.
TEST_F(Device, ReplyWaitsBehindUnreadEventsInsteadOfBeingLost) {
    auto c = client();
    krdma_event ev{};
    ev.event = KRDMA_EVENT_SHUTDOWN;
    for (int i = 0; i < 5000; ++i) server_->broadcast(ev);  // far more than the queue holds: the rest are dropped
    krdma_echo e{};
    e.cookie = 0x5eed;
    auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, {}, std::chrono::seconds(5));
    ASSERT_OK(r) << r.error().to_string();
    ASSERT_EQ(r->status, 0);
    krdma_echo back;
    std::memcpy(&back, r->payload.data(), sizeof back);
    EXPECT_EQ(back.cookie, 0x5eedu);
    size_t events = 0;
    while (c->next_event()) ++events;
    EXPECT_GT(events, 0u);  // the events that fitted were kept for the client
    // And the connection keeps working normally.
    auto again = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, {}, std::chrono::seconds(5));
    ASSERT_OK(again);
    EXPECT_EQ(again->status, 0);
}

// Records for one client (its connection events in a burst of setups) beyond what its receive queue holds are
// held in order until it reads, up to DeviceServer::kMaxHeld; only records beyond that are refused, and a reply
// comes behind the held records.
TEST_F(Device, RecordsBeyondTheQueueAreHeldInOrderUpToTheBound) {
    auto c = client();
    const uint32_t id = c->hello().client_id;
    size_t sent = 0;
    size_t refused = 0;
    for (uint32_t i = 0; i < kal::DeviceServer::kMaxHeld + 4000; ++i) {
        krdma_event ev{};
        ev.event = KRDMA_EVENT_ASYNC;
        ev.detail = sent;
        if (server_->send_event(id, ev).ok()) {
            ++sent;
        } else {
            ++refused;
        }
    }
    EXPECT_GE(sent, kal::DeviceServer::kMaxHeld) << "the queue and the bound hold at least kMaxHeld";
    EXPECT_GT(refused, 0u) << "records beyond the bound are refused, not held without end";
    krdma_echo e{};
    e.cookie = 0x5eed;
    auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}, {}, std::chrono::seconds(10));
    ASSERT_OK(r) << r.error().to_string();
    EXPECT_EQ(r->status, 0);
    size_t got = 0;
    bool in_order = true;
    while (auto ev = c->next_event()) {
        in_order = in_order && ev->detail == got;
        ++got;
    }
    EXPECT_EQ(got, sent) << "every record that was accepted arrives";
    EXPECT_TRUE(in_order);
}

// fd() is what an event poller waits on: replies never leave it readable, event records do, and a hang-up too.
TEST_F(Device, PollDescriptorSignalsEventsNotReplies) {
    auto c = client();
    auto readable = [](int fd, int ms) {
        pollfd p{fd, POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    };
    krdma_echo e{};
    for (int i = 0; i < 20; ++i) {
        auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e});
        ASSERT_OK(r);
        EXPECT_FALSE(readable(c->fd(), 0));
    }
    krdma_event ev{};
    ev.event = KRDMA_EVENT_SHUTDOWN;
    server_->broadcast(ev);
    EXPECT_TRUE(readable(c->fd(), 2000));
    ASSERT_TRUE(c->next_event().has_value());
    EXPECT_FALSE(readable(c->fd(), 0));
    // An event read by a call is queued and announced on queued_fd(), not left on fd().
    server_->broadcast(ev);
    EXPECT_TRUE(readable(c->fd(), 2000));
    ASSERT_OK(c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e}));
    EXPECT_FALSE(readable(c->fd(), 0));
    EXPECT_TRUE(readable(c->queued_fd(), 0));
    ASSERT_TRUE(c->next_event().has_value());
    stop_server();
    EXPECT_TRUE(readable(c->fd(), 2000));
    EXPECT_FALSE(c->next_event().has_value());
    EXPECT_TRUE(c->closed());
}

TEST_F(Device, DisconnectIsNoticedAndReported) {
    std::atomic<int> gone{0};
    server_->on_disconnect([&](kal::Connection &) { ++gone; });
    {
        auto c = client();
        EXPECT_EQ(server_->connections(), 1u);
    }
    for (int i = 0; i < 200 && gone.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(gone.load(), 1);
    EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(Device, StoppedServerMeansENODEV) {
    auto c = client();
    stop_server();
    krdma_echo e{};
    auto r = c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e});
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_ENODEV);
    auto again = ual::DeviceClient::connect(dir_ / "krdma");
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message().find("is krdmad running"), std::string::npos) << again.error().message();
}

// The version handshake (krdma/abi.h, "Versions"): a 1.0 client, which sends the word 1, gets 1.0 replies, error
// replies without a reason among them; a client of a later minor gets this server's; another major is refused.
TEST_F(Device, HelloAgreesOnTheLowerMinorVersion) {
    krdma::UniqueFd s = raw();
    auto hello = [&s](uint32_t word) { return raw_hello(s.get(), word); };
    // The length of the reply to an unknown command: the header alone, or the header and the reason.
    auto refusal_length = [&s] {
        krdma_msg_hdr hdr{};
        hdr.cmd = _IOWR(KRDMA_IOC_MAGIC, 0x7e, uint64_t);
        uint64_t body = 0;
        EXPECT_OK(krdma::send(s.get(), hdr, {reinterpret_cast<const uint8_t *>(&body), sizeof body}));
        krdma::Message m;
        EXPECT_EQ(krdma::receive(s.get(), m, true), krdma::RecvResult::message);
        EXPECT_STATUS(m.hdr.status, RI_ENOTTY);
        return m.hdr.length;
    };
    EXPECT_EQ(refusal_length(), sizeof(krdma_msg_hdr));  // no HELLO yet: 1.0 replies
    EXPECT_EQ(hello(KRDMA_ABI_VERSION), std::make_pair(0, uint32_t{KRDMA_ABI_VERSION}));
    EXPECT_EQ(refusal_length(), sizeof(krdma_msg_hdr));
    EXPECT_EQ(hello(KRDMA_ABI_WORD(1, 9)), std::make_pair(0, KRDMA_ABI_WORD(1, KRDMA_ABI_MINOR)));
    EXPECT_GT(refusal_length(), sizeof(krdma_msg_hdr));
    EXPECT_STATUS(hello(KRDMA_ABI_WORD(2, 0)).first, RI_EPROTO);
}

// Protocol 1.3: a quiet request is answered only when it fails; below 1.3 the flag is refused like any other.
TEST_F(Device, QuietRequestsAreAnsweredOnlyWhenTheyFail) {
    krdma::UniqueFd s = raw();
    auto hello = [&s](uint32_t minor) {
        EXPECT_EQ(raw_hello(s.get(), KRDMA_ABI_WORD(KRDMA_ABI_VERSION, minor)),
                  std::make_pair(0, KRDMA_ABI_WORD(KRDMA_ABI_VERSION, minor)));
    };
    auto send = [&s](uint32_t cmd, uint32_t seq, uint32_t flags) { raw_request(s.get(), cmd, seq, flags); };
    const uint32_t unknown = _IOWR(KRDMA_IOC_MAGIC, 0x7e, krdma_echo);
    hello(2);
    send(KRDMA_CMD_ECHO, 10, KRDMA_MSG_QUIET);
    krdma_msg_hdr rep = raw_reply(s.get());
    EXPECT_EQ(rep.seq, 10u);
    EXPECT_STATUS(rep.status, RI_EINVAL) << "a 1.2 connection takes no request flag";
    hello(3);
    send(KRDMA_CMD_ECHO, 11, KRDMA_MSG_QUIET);  // succeeds: no reply
    send(unknown, 12, KRDMA_MSG_QUIET);          // fails: answered
    send(KRDMA_CMD_ECHO, 13, 0);                 // an ordinary request: answered
    send(KRDMA_CMD_ECHO, 14, KRDMA_MSG_QUIET | KRDMA_MSG_REPLY);  // other flags stay refused
    rep = raw_reply(s.get());
    EXPECT_EQ(rep.seq, 12u);
    EXPECT_STATUS(rep.status, RI_ENOTTY);
    rep = raw_reply(s.get());
    EXPECT_EQ(rep.seq, 13u);
    EXPECT_EQ(rep.status, 0);
    rep = raw_reply(s.get());
    EXPECT_EQ(rep.seq, 14u);
    EXPECT_STATUS(rep.status, RI_EINVAL);
    pollfd p{s.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 50), 0) << "a reply to the quiet request that succeeded";
}

// Protocol 1.7: HELLO's reply carries the doorbell, which rings for what nobody waits for (a record, a quiet
// request's failure) and never for the reply to a request that waits; a 1.6 client gets no doorbell.
TEST_F(Device, TheDoorbellRingsForRecordsAndQuietFailuresNotForReplies) {
    auto hello = [](int fd, uint32_t minor) {
        krdma_msg_hdr hdr{};
        hdr.cmd = KRDMA_CMD_HELLO;
        hdr.seq = 1;
        krdma_hello h{};
        h.abi_version = KRDMA_ABI_WORD(KRDMA_ABI_VERSION, minor);
        EXPECT_OK(krdma::send(fd, hdr, {reinterpret_cast<const uint8_t *>(&h), sizeof h}));
        krdma::Message m;
        EXPECT_EQ(krdma::receive(fd, m, true), krdma::RecvResult::message);
        EXPECT_EQ(m.hdr.status, 0);
        return m.nfds == 0 ? krdma::UniqueFd() : std::move(m.fds[0]);
    };
    krdma::UniqueFd old_client = raw();
    EXPECT_FALSE(hello(old_client.get(), 6)) << "a 1.6 client must get HELLO's reply as 1.6 made it";
    krdma::UniqueFd s = raw();
    krdma::UniqueFd bell = hello(s.get(), 7);
    ASSERT_TRUE(bell) << "a 1.7 HELLO reply carries the doorbell";
    auto rang = [&bell](int ms) {
        pollfd p{bell.get(), POLLIN, 0};
        if (::poll(&p, 1, ms) != 1) return 0;
        char rings[64];
        const ssize_t n = ::recv(bell.get(), rings, sizeof rings, MSG_DONTWAIT);
        return n > 0 ? static_cast<int>(n) : 0;
    };
    auto send = [&s](uint32_t cmd, uint32_t seq, uint32_t flags) { raw_request(s.get(), cmd, seq, flags); };
    send(KRDMA_CMD_ECHO, 2, 0);
    EXPECT_EQ(raw_reply(s.get()).seq, 2u);
    send(KRDMA_CMD_ECHO, 3, KRDMA_MSG_QUIET);  // succeeds quietly: nothing is sent, nothing rings
    send(KRDMA_CMD_ECHO, 4, 0);
    EXPECT_EQ(raw_reply(s.get()).seq, 4u);
    EXPECT_EQ(rang(100), 0) << "replies to requests that wait, and a quiet success, must not ring the doorbell";
    send(_IOWR(KRDMA_IOC_MAGIC, 0x7e, krdma_echo), 5, KRDMA_MSG_QUIET);
    EXPECT_EQ(raw_reply(s.get()).seq, 5u);
    EXPECT_EQ(rang(2000), 1) << "a quiet request's failure, which nobody waits for, must ring once";
    krdma_event ev{};
    ev.event = KRDMA_EVENT_SHUTDOWN;
    server_->broadcast(ev);
    server_->broadcast(ev);
    krdma::Message m;
    EXPECT_EQ(krdma::receive(s.get(), m, true), krdma::RecvResult::message);
    EXPECT_EQ(krdma::receive(s.get(), m, true), krdma::RecvResult::message);
    EXPECT_EQ(m.hdr.flags, uint32_t{KRDMA_MSG_EVENT});
    EXPECT_EQ(rang(2000), 2) << "each record rings, and one read takes every ring";
}

// The doorbell loses no wake-up: records sent while another thread makes calls (which read some of them, and take
// their rings) all reach a poller that sleeps on fd() and queued_fd() as the event thread does. A record whose ring
// was taken by a thread that left the record unread would leave the poller asleep until its deadline. The races it
// looks for are timing-dependent: a run that passes proves nothing was lost in that run, not that nothing can be.
TEST_F(Device, RecordsAmidCallsAllWakeTheEventPoller) {
    auto c = client();
    constexpr int kRecords = 20000;
    std::atomic<bool> calls_done{false};
    std::atomic<int> sent{0};
    std::atomic<int> seen{0};
    std::atomic<int> stalls{0};  // polls that timed out with records still missing
    std::thread poller([&] {
        std::vector<krdma_event> events;
        std::vector<ual::CmRecord> cm;
        while (seen.load() < kRecords) {
            pollfd p[2] = {{c->fd(), POLLIN, 0}, {c->queued_fd(), POLLIN, 0}};
            const int before = sent.load();
            if (::poll(p, 2, 2000) == 0) {
                // Records sent before the wait began and still not seen: nothing woke the poller for them.
                if (seen.load() < before && ++stalls > 2) return;  // give up: the test reports what was missing
                continue;
            }
            c->take_events(events, cm);
            seen.fetch_add(static_cast<int>(events.size()));
            events.clear();
        }
    });
    std::thread caller([&] {
        krdma_echo e{};
        while (!calls_done.load()) {
            if (!c->call(KRDMA_CMD_ECHO, {reinterpret_cast<const uint8_t *>(&e), sizeof e})) break;
        }
    });
    krdma_event ev{};
    ev.event = KRDMA_EVENT_SHUTDOWN;
    for (int i = 0; i < kRecords; ++i) {
        // In bursts that a socket holds whole (a broadcast to a full socket drops the record: a busy machine's slow
        // poller, not a lost ring), each sent while the calls go on.
        if (i % 128 == 0) {
            while (seen.load() < i && stalls.load() == 0) std::this_thread::yield();
        }
        server_->broadcast(ev);
        sent.fetch_add(1);
    }
    poller.join();
    calls_done = true;
    caller.join();
    EXPECT_EQ(seen.load(), kRecords) << "records broadcast during calls that the event poller never woke for";
    EXPECT_EQ(stalls.load(), 0) << "the poller slept through records waiting for it (a lost doorbell ring)";
}

// A 1.1 client and a 1.0 server: the server refuses the word of 1.1 as 1.0 did (EPROTO, no reason), the client
// says HELLO again as 1.0 and works on; the server's refusals come without a reason, and request() falls back to
// the C library's words for them.
TEST(DeviceVersions, ANewClientSpeaksTheOldProtocolWithAnOldServer) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    krdma::UniqueFd ours(sv[0]), theirs(sv[1]);
    std::vector<uint32_t> words;  // the HELLO words the old server saw
    std::thread old_server([&theirs, &words] {
        krdma::Message m;
        while (krdma::receive(theirs.get(), m, true) == krdma::RecvResult::message) {
            krdma_msg_hdr hdr{};
            hdr.cmd = m.hdr.cmd;
            hdr.seq = m.hdr.seq;
            hdr.flags = KRDMA_MSG_REPLY;
            if (m.hdr.cmd != KRDMA_CMD_HELLO) {
                hdr.status = RI_ENOTTY;
                (void)krdma::send(theirs.get(), hdr, {});
                continue;
            }
            krdma_hello h;
            std::memcpy(&h, m.body.data(), sizeof h);
            words.push_back(h.abi_version);
            if (h.abi_version != 1) {  // 1.0's check, word for word
                hdr.status = RI_EPROTO;
                (void)krdma::send(theirs.get(), hdr, {});
                continue;
            }
            h.max_message = KRDMA_MAX_MESSAGE;
            h.client_id = 1;
            (void)krdma::send(theirs.get(), hdr, {reinterpret_cast<const uint8_t *>(&h), sizeof h});
        }
    });
    {
        auto c = ual::DeviceClient::adopt(std::move(ours));
        ASSERT_OK(c) << c.error().to_string();
        EXPECT_EQ((*c)->abi_minor(), 0u);
        EXPECT_EQ((*c)->hello().abi_version, 1u);
        uint64_t body = 0;
        auto r = (*c)->request(_IOWR(KRDMA_IOC_MAGIC, 0x7f, uint64_t), {reinterpret_cast<const uint8_t *>(&body),
                                                                          sizeof body});
        ASSERT_FALSE(r);
        EXPECT_STATUS(r, RI_ENOTTY);
        EXPECT_EQ(r.error().message(), std::strerror(ENOTTY));
    }  // the client closes its end: the old server's loop ends
    old_server.join();
    EXPECT_EQ(words, (std::vector<uint32_t>{KRDMA_ABI_WORD(1, KRDMA_ABI_MINOR), 1u}));
}

// A device server of this test's own, with test handlers registered before it serves.
class DeviceHandlers : public Device {
protected:
    void SetUp() override {
        Device::SetUp();
        stop_server();
        server_ = std::make_unique<kal::DeviceServer>(dir_ / "krdma");
        server_->on(kLong, [](kal::Connection &, const kal::Request &, kal::Reply &rep) {
            // 300 bytes: 'x', then a stray continuation byte, a control character, and a run of 3-byte code
            // points that crosses the 256-byte bound.
            std::string why = "x\x80\x1b[31m";
            while (why.size() < 300) why += "\xE2\x82\xAC";  // U+20AC
            return rep.fail(RI_EINVAL, why);
        });
        server_->on(kForeign, [](kal::Connection &, const kal::Request &, kal::Reply &rep) {
            return rep.fail(4242, "a status no vocabulary has");
        });
        ASSERT_OK(server_->listen());
        thread_ = std::thread([this] { server_->run(); });
    }
    static constexpr uint32_t kLong = _IOWR(KRDMA_IOC_MAGIC, 0x70, uint64_t);
    static constexpr uint32_t kForeign = _IOWR(KRDMA_IOC_MAGIC, 0x71, uint64_t);
};

TEST_F(DeviceHandlers, AReasonArrivesBoundedValidAndPrintable) {
    auto c = client();
    ASSERT_NE(c, nullptr);
    uint64_t body = 0;
    auto r = c->call(kLong, {reinterpret_cast<const uint8_t *>(&body), sizeof body});
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_EINVAL);
    ASSERT_LE(r->reason.size(), KRDMA_MAX_REASON);
    // 'x', U+FFFD for the stray byte and for ESC, "[31m", then whole euro signs only.
    const std::string head = "x\xEF\xBF\xBD\xEF\xBF\xBD[31m";
    ASSERT_EQ(r->reason.compare(0, head.size(), head), 0) << r->reason;
    const size_t euros = (KRDMA_MAX_REASON - head.size()) / 3;
    EXPECT_EQ(r->reason.size(), head.size() + 3 * euros);
    for (size_t i = head.size(); i < r->reason.size(); i += 3) EXPECT_EQ(r->reason.substr(i, 3), "\xE2\x82\xAC");
    // call_into() keeps it too, and leaves the caller's buffer alone.
    uint64_t out = 0x5a5a;
    auto into = c->call_into(kLong, {reinterpret_cast<const uint8_t *>(&body), sizeof body},
                             {reinterpret_cast<uint8_t *>(&out), sizeof out});
    ASSERT_OK(into);
    EXPECT_STATUS(into->status, RI_EINVAL);
    EXPECT_EQ(into->payload_len, 0u);
    EXPECT_EQ(out, 0x5a5au);
    EXPECT_EQ(into->why(), r->reason);
}

TEST_F(DeviceHandlers, AStatusOutsideTheVocabularyBecomesEIOWithItsReason) {
    auto c = client();
    ASSERT_NE(c, nullptr);
    uint64_t body = 0;
    auto r = c->call(kForeign, {reinterpret_cast<const uint8_t *>(&body), sizeof body});
    ASSERT_OK(r);
    EXPECT_STATUS(r->status, RI_EIO);
    EXPECT_EQ(r->reason, "a status no vocabulary has (error 4242)");
}

TEST(Reason, CutsOnACodePointAndReplacesWhatIsNotPrintableUtf8) {
    char out[8];
    auto text = [&out](std::string_view in, size_t cap) { return std::string(out, krdma::reason_text(in, {out, cap})); };
    EXPECT_EQ(text("plain", 8), "plain");
    EXPECT_EQ(text("abcdefghij", 8), "abcdefgh");
    EXPECT_EQ(text("ab\xC3\xA9z", 8), "ab\xC3\xA9z");     // U+00E9 kept whole
    EXPECT_EQ(text("abcdefg\xC3\xA9", 8), "abcdefg");       // ...or left out whole
    EXPECT_EQ(text("a\tb\nc\r", 8), "a b c ");
    EXPECT_EQ(text("\xC0\xAF", 8), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an overlong '/' is two bad bytes
    EXPECT_EQ(text("\xED\xA0\x80", 3), "\xEF\xBF\xBD");    // a surrogate, cut to the first replacement
    EXPECT_EQ(text("\xC2\x9B", 8), "\xEF\xBF\xBD");         // C1 CSI
    EXPECT_EQ(text("\x7F", 2), "");                          // a replacement that does not fit is left out
    EXPECT_EQ(text(std::string_view("a\0b", 3), 8), "a\xEF\xBF\xBD" "b");
    EXPECT_EQ(text("\xF0\x9F\x98\x80", 8), "\xF0\x9F\x98\x80");  // U+1F600
    EXPECT_EQ(text("\xF4\x90\x80\x80", 8).substr(0, 3), "\xEF\xBF\xBD");  // above U+10FFFF
}

// A server driven from its caller's own loop (run_once(), as the kal fuzz driver runs it): requests are served only
// when the caller turns the loop, call_on_loop() from another thread waits for that turn, and after stop() the loop
// says so and later calls run inline.
TEST(DeviceRunOnce, ServesWhenTurnedAndStopsLikeRun) {
    kal::DeviceServer server("/nonexistent/krdma-run-once");  // connect_local only
    auto s = server.connect_local();
    ASSERT_OK(s) << s.error().to_string();
    krdma_msg_hdr h{};
    h.cmd = KRDMA_CMD_ECHO;
    h.seq = 3;
    krdma_echo e{};
    e.cookie = 42;
    uint8_t pkt[sizeof h + sizeof e];
    h.length = sizeof pkt;
    std::memcpy(pkt, &h, sizeof h);
    std::memcpy(pkt + sizeof h, &e, sizeof e);
    ASSERT_EQ(::send(s->get(), pkt, sizeof pkt, 0), static_cast<ssize_t>(sizeof pkt));
    pollfd p{s->get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 50), 0) << "a reply before anyone turned the loop";
    EXPECT_TRUE(server.run_once(1000));
    ASSERT_EQ(::poll(&p, 1, 0), 1);
    uint8_t back[sizeof pkt];
    ASSERT_EQ(::recv(s->get(), back, sizeof back, 0), static_cast<ssize_t>(sizeof back));
    krdma_msg_hdr rep;
    std::memcpy(&rep, back, sizeof rep);
    EXPECT_EQ(rep.seq, 3u);
    EXPECT_EQ(rep.status, 0);
    EXPECT_EQ(rep.flags, static_cast<uint32_t>(KRDMA_MSG_REPLY));
    // Nothing to serve: the turn waits out its time and returns.
    EXPECT_TRUE(server.run_once(0));
    // Another thread's call runs on this thread, at the next turn.
    const auto here = std::this_thread::get_id();
    std::atomic<bool> ran_here{false};
    std::thread other([&] { server.call_on_loop([&] { ran_here = std::this_thread::get_id() == here; return 0; }); });
    for (int i = 0; i < 200 && !ran_here; ++i) EXPECT_TRUE(server.run_once(10));
    other.join();
    EXPECT_TRUE(ran_here);
    // Stopped: the turn says so, and later calls from other threads run inline instead of waiting forever.
    server.stop();
    EXPECT_FALSE(server.run_once(1000));
    EXPECT_FALSE(server.run_once(1000));
    std::thread late([&] { EXPECT_EQ(server.call_on_loop([] { return 7; }), 7); });
    late.join();
}

TEST_F(Device, PathInUseIsRefusedStaleSocketIsReplaced) {
    kal::DeviceServer second(dir_ / "krdma");
    auto busy = second.listen();
    ASSERT_FALSE(busy);
    EXPECT_STATUS(busy, RI_EEXIST);
    EXPECT_NE(busy.error().message().find("in use"), std::string::npos);
    stop_server();
    // A socket file left behind by a dead server: bind one and close it without unlinking.
    {
        krdma::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET, 0));
        sockaddr_un addr;
        ASSERT_TRUE(krdma::unix_address(dir_ / "stale", addr));
        ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    }
    ASSERT_TRUE(fs::exists(dir_ / "stale"));
    kal::DeviceServer fresh(dir_ / "stale");
    auto ok = fresh.listen();
    EXPECT_OK(ok) << ok.error().to_string();
}

}  // namespace
