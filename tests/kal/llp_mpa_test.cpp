// MPA connection setup over real TCP sockets on 127.0.0.1: session against session, and session against a raw peer
// that sends exactly the bytes a test needs (malformed frames, garbage, early close, silence, trailing stream bytes).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "iwarp/crc32c.hpp"
#include "iwarp/wire.hpp"
#include "mpa_session.hpp"
#include "status_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using iwarp::MpaConfig;
using iwarp::MpaFrame;
using iwarp::MpaKind;
using kal::llp::MpaClock;
using kal::llp::MpaSession;
using kal::llp::MpaState;
using kal::llp::MpaTeardown;
using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------------------------------------------------------
// Sockets

class Fd {
public:
    explicit Fd(int fd = -1) noexcept : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(o.release()) {}
    Fd &operator=(Fd &&o) noexcept {
        reset(o.release());
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(); }
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

void set_nonblocking(int fd) { ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0); }

// A connected, non-blocking TCP pair on loopback: [0] connected actively, [1] accepted.
struct TcpPair {
    Fd client, server;
};

TcpPair tcp_pair() {
    TcpPair p;
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_GE(listener.get(), 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listener.get(), 1), 0);
    EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr *>(&a), &len), 0);
    p.client.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(p.client.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);  // loopback: immediate
    p.server.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_GE(p.server.get(), 0);
    set_nonblocking(p.client.get());
    set_nonblocking(p.server.get());
    return p;
}

// Bytes waiting unread in a socket's receive queue.
int unread(int fd) {
    int n = -1;
    EXPECT_EQ(::ioctl(fd, FIONREAD, &n), 0);
    return n;
}

void send_all(int fd, std::span<const uint8_t> b) {
    size_t off = 0;
    auto until = MpaClock::now() + 2s;
    while (off < b.size() && MpaClock::now() < until) {
        ssize_t n = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += static_cast<size_t>(n);
        } else {
            pollfd p{fd, POLLOUT, 0};
            ::poll(&p, 1, 100);
        }
    }
    ASSERT_EQ(off, b.size());
}

void send_text(int fd, std::string_view s) {
    send_all(fd, std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(s.data()), s.size()));
}

// Reads exactly n bytes within 2 s (fewer if the peer closes or nothing comes).
Bytes read_exact(int fd, size_t n) {
    Bytes b(n);
    size_t off = 0;
    auto until = MpaClock::now() + 2s;
    while (off < n && MpaClock::now() < until) {
        ssize_t r = ::recv(fd, b.data() + off, n - off, 0);
        if (r > 0) {
            off += static_cast<size_t>(r);
        } else if (r == 0) {
            break;
        } else {
            pollfd p{fd, POLLIN, 0};
            ::poll(&p, 1, 100);
        }
    }
    b.resize(off);
    return b;
}

// Reads one MPA frame of kind k from a raw peer.
Bytes read_frame(int fd) {
    Bytes head = read_exact(fd, iwarp::kMpaFrameHeaderLen);
    if (head.size() < iwarp::kMpaFrameHeaderLen) return head;
    size_t pd = static_cast<size_t>(head[18]) << 8 | head[19];
    Bytes rest = read_exact(fd, pd);
    head.insert(head.end(), rest.begin(), rest.end());
    return head;
}

Bytes encode(const MpaFrame &f) {
    Bytes b(iwarp::kMpaFrameHeaderLen + iwarp::kMpaMaxPrivateData);
    auto n = iwarp::encode_mpa(f, b);
    EXPECT_OK(n) << n.error().to_string();
    b.resize(n ? *n : 0);
    return b;
}

Bytes bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
Bytes pattern(size_t n, uint8_t seed) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
    return b;
}
Bytes span_bytes(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

// ---------------------------------------------------------------------------------------------------------------
// Driving sessions

using Decide = std::function<void(MpaSession &)>;

const Decide kAcceptEmpty = [](MpaSession &s) { ASSERT_OK(s.accept({}, 0x3fff, 0x3fff)); };

// Polls every session to a final state, at most 5 s; a responder holding a request is handed to decide. A session
// past its own deadline is timed out, as the connection manager would. False if the 5 s ran out first.
bool drive(std::vector<MpaSession *> sessions, const Decide &decide = kAcceptEmpty) {
    auto hard_stop = MpaClock::now() + 5s;
    while (MpaClock::now() < hard_stop) {
        bool all_done = true;
        std::vector<pollfd> fds;
        int timeout = 50;
        for (MpaSession *s : sessions) {
            if (s->state() == MpaState::request_received && decide) decide(*s);
            all_done = all_done && s->done();
            fds.push_back(pollfd{s->fd(), s->poll_events(), 0});
            int t = s->poll_timeout_ms(MpaClock::now());
            if (t >= 0) timeout = std::min(timeout, t);
        }
        if (all_done) return true;
        ::poll(fds.data(), fds.size(), timeout);
        for (size_t i = 0; i < sessions.size(); ++i) {
            MpaSession &s = *sessions[i];
            if (s.expired(MpaClock::now())) {
                s.time_out();
            } else if (fds[i].revents != 0) {
                s.on_events(fds[i].revents);
            }
        }
    }
    return false;
}

// Drives sessions until one of them, @p watched, reaches @p until (or a final state), at most 5 s.
bool drive_until(std::vector<MpaSession *> sessions, MpaSession &watched, MpaState until) {
    auto hard_stop = MpaClock::now() + 5s;
    while (MpaClock::now() < hard_stop && watched.state() != until && !watched.done()) {
        std::vector<pollfd> fds;
        for (MpaSession *s : sessions) fds.push_back(pollfd{s->fd(), s->poll_events(), 0});
        ::poll(fds.data(), fds.size(), 50);
        for (size_t i = 0; i < sessions.size(); ++i) {
            MpaSession &s = *sessions[i];
            if (s.expired(MpaClock::now())) {
                s.time_out();
            } else if (fds[i].revents != 0 && !s.done()) {
                s.on_events(fds[i].revents);
            }
        }
    }
    return watched.state() == until;
}

bool drive_until(MpaSession &s, MpaState until) { return drive_until({&s}, s, until); }

iwarp::TermCode term_of(const MpaSession &s) {
    auto t = s.term();
    EXPECT_TRUE(t.has_value()) << (s.error() ? s.error()->to_string() : "no error");
    return t.value_or(iwarp::TermCode{});
}

int code_of(const MpaSession &s) { return s.error() ? s.error()->code() : 0; }

MpaClock::time_point soon() { return MpaClock::now() + 3s; }

// A connected pair of sessions, started with the given configurations and initiator private data.
struct SessionPair {
    TcpPair tcp = tcp_pair();
    MpaSession ini{tcp.client.get()};
    MpaSession res{tcp.server.get()};
    SessionPair(const MpaConfig &ci, const MpaConfig &cr, std::span<const uint8_t> pd = {}) {
        auto a = ini.start_initiator(ci, pd, soon());
        EXPECT_OK(a) << a.error().to_string();
        auto b = res.start_responder(cr, soon());
        EXPECT_OK(b) << b.error().to_string();
    }
};

// ---------------------------------------------------------------------------------------------------------------
// Session against session

TEST(LlpMpa, Revision2DefaultsExchangePrivateDataBothWays) {
    MpaConfig cfg;  // revision 2, CRC, peer-to-peer with Write or Read
    const Bytes hello = bytes("hello from the initiator");
    const Bytes world = bytes("and hello back");
    SessionPair p(cfg, cfg, hello);
    EXPECT_EQ(p.ini.state(), MpaState::sending_request);
    EXPECT_EQ(p.res.state(), MpaState::awaiting_request);
    bool decided = false;
    ASSERT_TRUE(drive({&p.ini, &p.res}, [&](MpaSession &s) {
        EXPECT_EQ(span_bytes(s.peer_private_data()), hello);
        auto req = s.peer_frame();
        ASSERT_TRUE(req.has_value());
        EXPECT_EQ(req->revision, 2);
        EXPECT_TRUE(req->peer2peer);
        decided = true;
        ASSERT_TRUE(s.accept(world, 16, 16));
    }));
    EXPECT_TRUE(decided);
    ASSERT_EQ(p.ini.state(), MpaState::established) << p.ini.error()->to_string();
    ASSERT_EQ(p.res.state(), MpaState::established) << p.res.error()->to_string();
    EXPECT_EQ(span_bytes(p.ini.peer_private_data()), world);
    EXPECT_EQ(span_bytes(p.res.peer_private_data()), hello);
    for (const MpaSession *s : {&p.ini, &p.res}) {
        EXPECT_EQ(s->result().revision, 2);
        EXPECT_TRUE(s->result().crc);
        EXPECT_TRUE(s->result().enhanced);
        EXPECT_TRUE(s->result().peer2peer);
        EXPECT_EQ(s->result().rtr, iwarp::kRtrWrite);  // the responder prefers Write
        EXPECT_EQ(s->error(), nullptr);
        EXPECT_EQ(s->teardown(), MpaTeardown::none);
        EXPECT_EQ(s->poll_timeout_ms(MpaClock::now()), -1);
    }
    EXPECT_EQ(p.ini.role(), kal::llp::MpaRole::initiator);
    EXPECT_EQ(p.res.role(), kal::llp::MpaRole::responder);
}

// RFC 7306 rides on the lowest reserved MPA flag bit between two ends of this stack that know each other
// (MpaConfig::rfc7306, set by the kAL only then): agreed when both may, never when either may not, and a request
// that does not offer it is byte for byte what it was before the bit existed.
TEST(LlpMpa, Rfc7306IsAgreedOnlyWhenBothSidesMay) {
    for (const bool offer : {false, true}) {
        for (const bool agree : {false, true}) {
            SCOPED_TRACE(std::string("initiator ") + (offer ? "offers" : "does not offer") + ", responder " +
                         (agree ? "may agree" : "may not"));
            MpaConfig ci, cr;
            ci.rfc7306 = offer;
            cr.rfc7306 = agree;
            SessionPair p(ci, cr);
            ASSERT_TRUE(drive({&p.ini, &p.res}, [&](MpaSession &s) {
                const auto req = s.peer_frame();
                ASSERT_TRUE(req.has_value());
                EXPECT_EQ(req->reserved, offer ? iwarp::kMpaFlagRfc7306 : 0);
                ASSERT_TRUE(s.accept({}, 16, 16));
            }));
            ASSERT_EQ(p.ini.state(), MpaState::established) << p.ini.error()->to_string();
            ASSERT_EQ(p.res.state(), MpaState::established) << p.res.error()->to_string();
            EXPECT_EQ(p.ini.result().rfc7306, offer && agree);
            EXPECT_EQ(p.res.result().rfc7306, offer && agree);
            auto llp = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd(), nullptr);
            ASSERT_OK(llp);
            EXPECT_EQ((llp->mpa_flags & RI_MPA_RFC7306) != 0, offer && agree);
        }
    }
    MpaConfig plain, with;
    with.rfc7306 = false;
    EXPECT_EQ(encode(iwarp::make_request(with, {})), encode(iwarp::make_request(plain, {})))
        << "a request that offers nothing must be what every other peer has always received";
}

TEST(LlpMpa, FpdusToAPeerOfThisStackSpanSegmentsWithoutMarkersOnly) {
    // A 1500-byte path: one segment carries about 1.4 KiB; a peer of this stack gets FPDUs of about 16 KiB, fixed.
    ri_llp_params_t p{};
    p.mss = 1448;
    p.fpdu_max = 1448;
    kal::llp::widen_fpdus(p);
    EXPECT_NE(p.mpa_flags & RI_LLP_FPDU_FIXED, 0u) << "the provider must keep the size, not follow the MSS";
    EXPECT_GT(p.fpdu_max, 16000u);
    EXPECT_LE(p.fpdu_max, kal::llp::kPeerStackEmss) << "an FPDU of the effective MSS's MULPDU and its framing";
    EXPECT_EQ(p.fpdu_max % 4, 0u);
    // With markers their places follow the segments: nothing changes.
    ri_llp_params_t m{};
    m.mpa_flags = RI_MPA_MARKERS;
    m.fpdu_max = 1448;
    kal::llp::widen_fpdus(m);
    EXPECT_EQ(m.fpdu_max, 1448u);
    EXPECT_EQ(m.mpa_flags, uint32_t{RI_MPA_MARKERS});
    // A path whose segments carry more already (loopback's 64 KiB) keeps following its MSS.
    ri_llp_params_t lo{};
    lo.fpdu_max = 65480;
    kal::llp::widen_fpdus(lo);
    EXPECT_EQ(lo.fpdu_max, 65480u);
    EXPECT_EQ(lo.mpa_flags & RI_LLP_FPDU_FIXED, 0u);
}

TEST(LlpMpa, RevisionsOneAndTwoBothWays) {
    for (uint8_t ri : {1, 2}) {
        for (uint8_t rr : {1, 2}) {
            SCOPED_TRACE("initiator rev " + std::to_string(ri) + ", responder rev " + std::to_string(rr));
            MpaConfig ci, cr;
            ci.revision = ri;
            cr.revision = rr;
            SessionPair p(ci, cr);
            ASSERT_TRUE(drive({&p.ini, &p.res}));
            ASSERT_EQ(p.ini.state(), MpaState::established) << p.ini.error()->to_string();
            ASSERT_EQ(p.res.state(), MpaState::established) << p.res.error()->to_string();
            uint8_t want = std::min(ri, rr);
            EXPECT_EQ(p.ini.result().revision, want);
            EXPECT_EQ(p.res.result().revision, want);
            EXPECT_EQ(p.ini.result().enhanced, want == 2);
            EXPECT_EQ(p.res.result().peer2peer, want == 2);
            auto pi = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd());
            ASSERT_OK(pi);
            EXPECT_EQ(pi->mpa_revision, want);
            EXPECT_EQ(pi->rtr_type, want == 2 ? uint32_t{RI_RTR_WRITE} : uint32_t{RI_RTR_NONE});
        }
    }
}

TEST(LlpMpa, CrcIsUsedWhenEitherSideAsks) {
    for (bool ci_crc : {false, true}) {
        for (bool cr_crc : {false, true}) {
            MpaConfig ci, cr;
            ci.crc = ci_crc;
            cr.crc = cr_crc;
            SessionPair p(ci, cr);
            ASSERT_TRUE(drive({&p.ini, &p.res}));
            ASSERT_EQ(p.ini.state(), MpaState::established);
            ASSERT_EQ(p.res.state(), MpaState::established);
            EXPECT_EQ(p.ini.result().crc, ci_crc || cr_crc);
            EXPECT_EQ(p.res.result().crc, ci_crc || cr_crc);
            auto pr = kal::llp::to_llp_params(p.res.result(), false, p.res.fd());
            ASSERT_OK(pr);
            EXPECT_EQ((pr->mpa_flags & RI_MPA_CRC) != 0, ci_crc || cr_crc);
        }
    }
}

TEST(LlpMpa, MarkersNeedTheSendersConsent) {
    MpaConfig wants;
    wants.markers_wanted = true;
    MpaConfig refuses;  // markers_allowed = false
    {
        SessionPair p(wants, refuses);
        ASSERT_TRUE(drive({&p.ini, &p.res}));
        EXPECT_EQ(p.res.state(), MpaState::failed);
        EXPECT_STATUS(code_of(p.res), RI_EOPNOTSUPP);
        EXPECT_EQ(term_of(p.res), iwarp::term::kLlpInvalidMpaFrame);
        EXPECT_EQ(p.res.teardown(), MpaTeardown::close);
        EXPECT_EQ(p.ini.state(), MpaState::rejected);  // the responder answered with a reject reply
        EXPECT_STATUS(code_of(p.ini), RI_ECONNREFUSED);
    }
    MpaConfig allows;
    allows.markers_allowed = true;
    SessionPair p(wants, allows);
    ASSERT_TRUE(drive({&p.ini, &p.res}));
    ASSERT_EQ(p.ini.state(), MpaState::established);
    ASSERT_EQ(p.res.state(), MpaState::established);
    EXPECT_TRUE(p.ini.result().markers_rx);
    EXPECT_FALSE(p.ini.result().markers_tx);
    EXPECT_TRUE(p.res.result().markers_tx);
    auto pi = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd());
    auto pr = kal::llp::to_llp_params(p.res.result(), false, p.res.fd());
    ASSERT_OK(pi);
    ASSERT_OK(pr);
    EXPECT_NE(pi->mpa_flags & RI_MPA_MARKERS, 0u);  // either direction sets the one ABI bit
    EXPECT_NE(pr->mpa_flags & RI_MPA_MARKERS, 0u);
    EXPECT_LE(pr->fpdu_max, pr->mss);  // the markers this side inserts still fit the segment
}

TEST(LlpMpa, PeerToPeerRtrPolicies) {
    struct Case {
        uint8_t offered, accepted, chosen;
        uint32_t ri;
    };
    for (const Case &c : {Case{iwarp::kRtrRead, iwarp::kRtrWrite | iwarp::kRtrRead, iwarp::kRtrRead, RI_RTR_READ},
                          Case{iwarp::kRtrSend, iwarp::kRtrSend, iwarp::kRtrSend, RI_RTR_SEND},
                          Case{iwarp::kRtrSend | iwarp::kRtrWrite, iwarp::kRtrSend | iwarp::kRtrWrite,
                               iwarp::kRtrWrite, RI_RTR_WRITE}}) {
        MpaConfig ci, cr;
        ci.rtr = c.offered;
        cr.rtr = c.accepted;
        SessionPair p(ci, cr);
        ASSERT_TRUE(drive({&p.ini, &p.res}));
        ASSERT_EQ(p.ini.state(), MpaState::established);
        EXPECT_EQ(p.ini.result().rtr, c.chosen);
        EXPECT_EQ(p.res.result().rtr, c.chosen);
        auto pi = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd());
        auto pr = kal::llp::to_llp_params(p.res.result(), false, p.res.fd());
        ASSERT_OK(pi);
        ASSERT_OK(pr);
        EXPECT_EQ(pi->rtr_type, c.ri);
        EXPECT_EQ(pr->rtr_type, c.ri);
        EXPECT_EQ(pi->mpa_flags & (RI_MPA_PEER2PEER | RI_MPA_INITIATOR), RI_MPA_PEER2PEER | RI_MPA_INITIATOR);
        EXPECT_EQ(pr->mpa_flags & (RI_MPA_PEER2PEER | RI_MPA_INITIATOR), uint32_t{RI_MPA_PEER2PEER});
    }
    // Nothing in common: the responder refuses with a reject reply and reports No Matching RTR.
    MpaConfig ci, cr;
    ci.rtr = iwarp::kRtrSend;
    cr.rtr = iwarp::kRtrWrite | iwarp::kRtrRead;
    SessionPair p(ci, cr);
    ASSERT_TRUE(drive({&p.ini, &p.res}));
    EXPECT_EQ(p.res.state(), MpaState::failed);
    EXPECT_EQ(term_of(p.res), iwarp::term::kLlpNoMatchingRtr);
    EXPECT_EQ(p.ini.state(), MpaState::rejected);
    // Without peer-to-peer on the initiator: no RTR at all.
    MpaConfig plain;
    plain.peer2peer = false;
    SessionPair q(plain, MpaConfig{});
    ASSERT_TRUE(drive({&q.ini, &q.res}));
    ASSERT_EQ(q.res.state(), MpaState::established);
    EXPECT_FALSE(q.res.result().peer2peer);
    auto pq = kal::llp::to_llp_params(q.res.result(), false, q.res.fd());
    ASSERT_OK(pq);
    EXPECT_EQ(pq->rtr_type, uint32_t{RI_RTR_NONE});
    EXPECT_EQ(pq->mpa_flags & RI_MPA_PEER2PEER, 0u);
}

TEST(LlpMpa, IrdOrdAreExchangedAndCappedByTheConsumer) {
    MpaConfig ci, cr;
    ci.ird = 3;
    ci.ord = 7;
    cr.ird = 5;
    cr.ord = 2;
    SessionPair p(ci, cr);
    ASSERT_TRUE(drive({&p.ini, &p.res}, [](MpaSession &s) { ASSERT_TRUE(s.accept({}, 4, 8)); }));
    ASSERT_EQ(p.ini.state(), MpaState::established);
    ASSERT_EQ(p.res.state(), MpaState::established);
    EXPECT_EQ(p.res.result().ird, 4);  // min(config 5, consumer 4, peer's ORD 7)
    EXPECT_EQ(p.res.result().ord, 2);  // min(config 2, consumer 8, peer's IRD 3)
    EXPECT_EQ(p.ini.result().ird, 3);
    EXPECT_EQ(p.ini.result().ord, 4);  // lowered to what the responder can take
    auto pi = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd());
    auto pr = kal::llp::to_llp_params(p.res.result(), false, p.res.fd());
    ASSERT_OK(pi);
    ASSERT_OK(pr);
    EXPECT_EQ(pi->ord, pr->ird);
    EXPECT_GE(pi->ird, pr->ord);
}

TEST(LlpMpa, LargestPrivateDataBothWays) {
    // The frame's private data is at most 512 bytes: all of it for revision 1, 508 after revision 2's IRD/ORD words.
    for (uint8_t rev : {1, 2}) {
        SCOPED_TRACE("revision " + std::to_string(rev));
        size_t max = iwarp::kMpaMaxPrivateData - (rev == 2 ? iwarp::kMpaIrdOrdLen : 0);
        MpaConfig cfg;
        cfg.revision = rev;
        const Bytes req_pd = pattern(max, 1), rep_pd = pattern(max, 9);
        SessionPair p(cfg, cfg, req_pd);
        ASSERT_TRUE(drive({&p.ini, &p.res}, [&](MpaSession &s) { ASSERT_TRUE(s.accept(rep_pd, 16, 16)); }));
        ASSERT_EQ(p.ini.state(), MpaState::established);
        ASSERT_EQ(p.res.state(), MpaState::established);
        EXPECT_EQ(span_bytes(p.res.peer_private_data()), req_pd);
        EXPECT_EQ(span_bytes(p.ini.peer_private_data()), rep_pd);

        // One byte more is refused before anything is sent.
        TcpPair t = tcp_pair();
        MpaSession ini(t.client.get());
        const Bytes too_big = pattern(max + 1, 3);
        auto r = ini.start_initiator(cfg, too_big, soon());
        ASSERT_FALSE(r);
        EXPECT_STATUS(r, RI_EMSGSIZE);
        EXPECT_EQ(ini.state(), MpaState::idle);
    }
}

TEST(LlpMpa, EmptyPrivateDataBothWays) {
    for (uint8_t rev : {1, 2}) {
        MpaConfig cfg;
        cfg.revision = rev;
        SessionPair p(cfg, cfg);
        ASSERT_TRUE(drive({&p.ini, &p.res}));
        ASSERT_EQ(p.ini.state(), MpaState::established);
        EXPECT_TRUE(p.ini.peer_private_data().empty());
        EXPECT_TRUE(p.res.peer_private_data().empty());
    }
}

TEST(LlpMpa, ConsumerRejectCarriesPrivateData) {
    const Bytes why = bytes("no listener for this service");
    SessionPair p(MpaConfig{}, MpaConfig{}, bytes("service 7"));
    ASSERT_TRUE(drive({&p.ini, &p.res}, [&](MpaSession &s) { ASSERT_TRUE(s.reject(why)); }));
    EXPECT_EQ(p.ini.state(), MpaState::rejected);
    EXPECT_STATUS(code_of(p.ini), RI_ECONNREFUSED);
    EXPECT_EQ(span_bytes(p.ini.peer_private_data()), why);
    EXPECT_TRUE(p.ini.peer_frame()->reject);
    EXPECT_EQ(p.ini.teardown(), MpaTeardown::close);
    EXPECT_EQ(p.res.state(), MpaState::rejected);
    EXPECT_STATUS(code_of(p.res), RI_ECONNREFUSED);
    EXPECT_FALSE(p.ini.term().has_value());  // a reject is not a protocol error
}

TEST(LlpMpa, ConsumerReplyTooLargeCanBeRetried) {
    SessionPair p(MpaConfig{}, MpaConfig{});
    ASSERT_TRUE(drive_until({&p.ini, &p.res}, p.res, MpaState::request_received));
    const Bytes big = pattern(iwarp::kMpaMaxPrivateData, 5);  // 512 + the IRD/ORD words: too much
    auto r = p.res.accept(big, 16, 16);
    ASSERT_FALSE(r);
    EXPECT_STATUS(r, RI_EMSGSIZE);
    EXPECT_EQ(p.res.state(), MpaState::request_received);
    ASSERT_OK(p.res.accept({}, 16, 16));
    ASSERT_TRUE(drive({&p.ini, &p.res}));
    EXPECT_EQ(p.ini.state(), MpaState::established);
}

TEST(LlpMpa, CallsOutOfOrderAreRefused) {
    TcpPair t = tcp_pair();
    MpaSession s(t.server.get());
    EXPECT_EQ(s.poll_events(), 0);
    EXPECT_STATUS(s.accept({}, 1, 1), RI_EINVAL);
    EXPECT_STATUS(s.reject({}), RI_EINVAL);
    MpaConfig bad;
    bad.revision = 3;
    EXPECT_STATUS(s.start_responder(bad, soon()), RI_EINVAL);
    EXPECT_STATUS(s.start_initiator(bad, {}, soon()), RI_EINVAL);
    ASSERT_OK(s.start_responder(MpaConfig{}, soon()));
    EXPECT_EQ(s.poll_events(), POLLIN);
    EXPECT_STATUS(s.start_responder(MpaConfig{}, soon()), RI_EINVAL);
    EXPECT_STATUS(s.start_initiator(MpaConfig{}, {}, soon()), RI_EINVAL);
    EXPECT_STATUS(s.accept({}, 1, 1), RI_EINVAL);  // no request yet
    EXPECT_FALSE(s.peer_frame().has_value());
}

TEST(LlpMpa, LlpParamsDescribeTheStream) {
    SessionPair p(MpaConfig{}, MpaConfig{});
    ASSERT_TRUE(drive({&p.ini, &p.res}));
    ASSERT_EQ(p.ini.state(), MpaState::established);
    auto pi = kal::llp::to_llp_params(p.ini.result(), true, p.ini.fd());
    auto pr = kal::llp::to_llp_params(p.res.result(), false, p.res.fd());
    ASSERT_OK(pi) << pi.error().to_string();
    ASSERT_OK(pr) << pr.error().to_string();
    EXPECT_EQ(pi->fd, p.ini.fd());
    EXPECT_EQ(pi->local.family, RI_AF_INET);
    const uint8_t loopback[4] = {127, 0, 0, 1};
    EXPECT_EQ(std::memcmp(pi->local.addr, loopback, 4), 0);
    EXPECT_EQ(std::memcmp(pi->remote.addr, loopback, 4), 0);
    EXPECT_EQ(pi->local_port, pr->remote_port);
    EXPECT_EQ(pi->remote_port, pr->local_port);
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ASSERT_EQ(::getsockname(p.ini.fd(), reinterpret_cast<sockaddr *>(&a), &len), 0);
    EXPECT_EQ(pi->local_port, ntohs(a.sin_port));
    EXPECT_GT(pi->mss, 0u);
    // One FPDU fits one segment, and is a whole number of 4-byte words.
    EXPECT_GT(pi->fpdu_max, 64u);
    EXPECT_LE(pi->fpdu_max, pi->mss);
    EXPECT_EQ(pi->fpdu_max % 4, 0u);
    EXPECT_EQ(pi->tcp_snd_nxt, 0u);
    EXPECT_EQ(pi->ird, 16u);
    EXPECT_EQ(pi->ord, 16u);
    EXPECT_EQ(pi->mpa_flags, uint32_t{RI_MPA_CRC | RI_MPA_PEER2PEER | RI_MPA_INITIATOR});
    EXPECT_EQ(pr->mpa_flags, uint32_t{RI_MPA_CRC | RI_MPA_PEER2PEER});
    // A socket that is not a stream any more.
    EXPECT_FALSE(kal::llp::to_llp_params(p.ini.result(), true, -1));
}

// ---------------------------------------------------------------------------------------------------------------
// Responder against a raw initiator

struct RawInitiator {
    TcpPair tcp = tcp_pair();
    MpaSession res{tcp.server.get()};
    int peer() const { return tcp.client.get(); }
    explicit RawInitiator(const MpaConfig &cfg = MpaConfig{}, MpaClock::time_point deadline = soon()) {
        EXPECT_OK(res.start_responder(cfg, deadline));
    }
};

// A frame whose header announces more private data than 512 bytes is refused without reading the private data.
TEST(LlpMpaResponder, OversizedPrivateDataIsRejectedUnread) {
    RawInitiator r;
    Bytes frame = encode(iwarp::make_request(MpaConfig{}, {}));
    frame.resize(iwarp::kMpaFrameHeaderLen);
    frame[18] = 0x02;  // 513
    frame[19] = 0x01;
    Bytes pd = pattern(513, 2);
    frame.insert(frame.end(), pd.begin(), pd.end());
    send_all(r.peer(), frame);
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_EMSGSIZE);
    EXPECT_EQ(term_of(r.res), iwarp::term::kLlpInvalidMpaFrame);
    EXPECT_EQ(r.res.teardown(), MpaTeardown::close);
    EXPECT_EQ(unread(r.res.fd()), 513);  // the announced bytes were never read
    Bytes reply = read_frame(r.peer());
    auto f = iwarp::decode_mpa(reply, MpaKind::reply);
    ASSERT_OK(f) << f.error().to_string();
    EXPECT_TRUE(f->reject);
    EXPECT_EQ(f->revision, 2);
}

TEST(LlpMpaResponder, WrongKeyGetsNoReply) {
    RawInitiator r;
    MpaFrame f = iwarp::make_request(MpaConfig{}, {});
    f.kind = MpaKind::reply;  // "MPA ID Rep Frame" where a request belongs
    send_all(r.peer(), encode(f));
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_EPROTO);
    EXPECT_EQ(term_of(r.res), iwarp::term::kLlpInvalidMpaFrame);
    EXPECT_EQ(r.res.teardown(), MpaTeardown::close);
    EXPECT_EQ(unread(r.peer()), 0);  // not an MPA peer: nothing is sent back
}

TEST(LlpMpaResponder, UnsupportedRevisionIsRejected) {
    RawInitiator r;
    MpaFrame f = iwarp::make_request(MpaConfig{}, {});
    f.revision = 3;
    f.enhanced = false;
    const Bytes pd = bytes("rev3");
    f.private_data = pd;
    send_all(r.peer(), encode(f));
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_EPROTO);
    EXPECT_EQ(term_of(r.res), iwarp::term::kLlpInvalidMpaFrame);
    EXPECT_EQ(unread(r.res.fd()), 0);  // the whole frame was read, so closing does not reset the reply away
    auto reply = iwarp::decode_mpa(read_frame(r.peer()), MpaKind::reply);
    ASSERT_OK(reply);
    EXPECT_TRUE(reply->reject);
    EXPECT_EQ(reply->revision, 1);  // the reject speaks a revision we know
}

TEST(LlpMpaResponder, ReservedBitsAreRejected) {
    RawInitiator r;
    MpaFrame f = iwarp::make_request(MpaConfig{}, {});
    f.reserved = 0x02;  // 0x01 is this stack's RFC 7306 offer (kMpaFlagRfc7306), tested below
    send_all(r.peer(), encode(f));
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_EQ(term_of(r.res), iwarp::term::kLlpInvalidMpaFrame);
    auto reply = iwarp::decode_mpa(read_frame(r.peer()), MpaKind::reply);
    ASSERT_OK(reply);
    EXPECT_TRUE(reply->reject);
}

TEST(LlpMpaResponder, HttpRequestFailsAtTheFirstWrongByteAndReadsNoMore) {
    RawInitiator r;
    const std::string http = "GET / HTTP/1.1\r\nHost: rnic.example\r\nUser-Agent: curl\r\n\r\n";
    send_text(r.peer(), http);
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_EPROTO);
    EXPECT_EQ(term_of(r.res), iwarp::term::kLlpInvalidMpaFrame);
    // At most one header's worth was read.
    EXPECT_GE(unread(r.res.fd()), static_cast<int>(http.size() - iwarp::kMpaFrameHeaderLen));
    EXPECT_EQ(unread(r.peer()), 0);

    // Three bytes of garbage are enough: no waiting for the rest of a header that will never match.
    RawInitiator s(MpaConfig{}, MpaClock::now() + 4s);
    auto t0 = MpaClock::now();
    send_text(s.peer(), "GET");
    ASSERT_TRUE(drive({&s.res}));
    EXPECT_EQ(s.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(s.res), RI_EPROTO);
    EXPECT_LT(MpaClock::now() - t0, 2s);
}

TEST(LlpMpaResponder, PeerClosingMidFrameIsAConnectionLoss) {
    // Mid-header.
    {
        RawInitiator r;
        Bytes frame = encode(iwarp::make_request(MpaConfig{}, {}));
        send_all(r.peer(), std::span<const uint8_t>(frame.data(), 10));
        r.tcp.client.reset();
        ASSERT_TRUE(drive({&r.res}));
        EXPECT_EQ(r.res.state(), MpaState::failed);
        EXPECT_STATUS(code_of(r.res), RI_ECONNRESET);
        EXPECT_EQ(term_of(r.res), iwarp::term::kLlpConnectionLost);
    }
    // Mid-private data.
    RawInitiator r;
    const Bytes pd = pattern(100, 4);
    Bytes frame = encode(iwarp::make_request(MpaConfig{}, pd));
    send_all(r.peer(), std::span<const uint8_t>(frame.data(), frame.size() - 50));
    r.tcp.client.reset();  // TCP delivers the 74 bytes, then the FIN
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_ECONNRESET);
    EXPECT_NE(r.res.error()->message().find("of 124 bytes"), std::string::npos) << r.res.error()->message();
}

TEST(LlpMpaResponder, SilentPeerTimesOut) {
    const auto t0 = MpaClock::now();  // before the deadline is set from it: time out no earlier than 200 ms on
    RawInitiator r(MpaConfig{}, t0 + 200ms);
    EXPECT_GT(r.res.poll_timeout_ms(t0), 0);
    EXPECT_FALSE(r.res.expired(t0));
    ASSERT_TRUE(drive({&r.res}));
    EXPECT_EQ(r.res.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.res), RI_ETIMEDOUT);
    EXPECT_FALSE(r.res.term().has_value());
    EXPECT_EQ(r.res.teardown(), MpaTeardown::close);
    EXPECT_GE(MpaClock::now() - t0, 200ms);
    EXPECT_LT(MpaClock::now() - t0, 10s);  // generous: a loaded CI machine stalls threads
}

TEST(LlpMpaResponder, ByteByByteRequestAndTrailingStreamBytesStayUnread) {
    RawInitiator r;
    const Bytes pd = bytes("split at every byte");
    Bytes frame = encode(iwarp::make_request(MpaConfig{}, pd));
    for (size_t i = 0; i + 1 < frame.size(); ++i) {
        send_all(r.peer(), std::span<const uint8_t>(&frame[i], 1));
        pollfd p{r.res.fd(), POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 1000), 1);
        r.res.on_events(p.revents);
        ASSERT_EQ(r.res.state(), MpaState::awaiting_request) << "after byte " << i;
    }
    // The last byte of the frame arrives together with the first bytes of the RDMA stream.
    const Bytes stream = bytes("FPDU");
    Bytes tail{frame.back()};
    tail.insert(tail.end(), stream.begin(), stream.end());
    send_all(r.peer(), tail);
    ASSERT_TRUE(drive_until(r.res, MpaState::request_received));
    EXPECT_EQ(span_bytes(r.res.peer_private_data()), pd);
    EXPECT_EQ(unread(r.res.fd()), static_cast<int>(stream.size()));
    ASSERT_OK(r.res.accept({}, 8, 8));
    ASSERT_TRUE(drive({&r.res}));
    ASSERT_EQ(r.res.state(), MpaState::established);
    EXPECT_EQ(read_exact(r.res.fd(), stream.size()), stream);
    auto reply = iwarp::decode_mpa(read_frame(r.peer()), MpaKind::reply);
    ASSERT_OK(reply);
    EXPECT_FALSE(reply->reject);
}

// ---------------------------------------------------------------------------------------------------------------
// Initiator against a raw responder

struct RawResponder {
    TcpPair tcp = tcp_pair();
    MpaSession ini{tcp.client.get()};
    MpaFrame request;  // what the initiator sent, decoded
    Bytes request_bytes;
    int peer() const { return tcp.server.get(); }
    explicit RawResponder(const MpaConfig &cfg = MpaConfig{}, MpaClock::time_point deadline = soon()) {
        EXPECT_OK(ini.start_initiator(cfg, {}, deadline));
        EXPECT_TRUE(drive_until(ini, MpaState::awaiting_reply));
        request_bytes = read_frame(peer());
        auto f = iwarp::decode_mpa(request_bytes, MpaKind::request);
        EXPECT_OK(f);
        if (f) request = *f;
        request.private_data = {};
    }
    MpaFrame good_reply() const {
        auto r = iwarp::respond(MpaConfig{}, request);
        EXPECT_OK(r);
        return r ? r->reply : MpaFrame{};
    }
};

TEST(LlpMpaInitiator, ReplyAndTrailingStreamBytesAreReadExactly) {
    RawResponder r;
    Bytes wire = encode(r.good_reply());
    const Bytes rtr = bytes("RTR-FPDU-AND-MORE");
    wire.insert(wire.end(), rtr.begin(), rtr.end());
    send_all(r.peer(), wire);  // one write: the reply and the stream's first bytes arrive together
    ASSERT_TRUE(drive({&r.ini}));
    ASSERT_EQ(r.ini.state(), MpaState::established);
    EXPECT_EQ(unread(r.ini.fd()), static_cast<int>(rtr.size()));
    EXPECT_EQ(read_exact(r.ini.fd(), rtr.size()), rtr);
}

TEST(LlpMpaInitiator, InvalidRepliesCloseWithoutTerminate) {
    struct Case {
        const char *name;
        std::function<Bytes(const RawResponder &)> make;
        int code;
    };
    const std::vector<Case> cases = {
        {"wrong key",
         [](const RawResponder &r) {
             MpaFrame f = r.good_reply();
             f.kind = MpaKind::request;
             return encode(f);
         },
         RI_EPROTO},
        {"revision 3",
         [](const RawResponder &r) {
             MpaFrame f = r.good_reply();
             f.revision = 3;
             return encode(f);
         },
         RI_EPROTO},
        {"reserved bits",
         [](const RawResponder &r) {
             MpaFrame f = r.good_reply();
             f.reserved = 0x04;
             return encode(f);
         },
         RI_EPROTO},
        {"RFC 7306 agreed though the request did not offer it",
         [](const RawResponder &r) {
             MpaFrame f = r.good_reply();
             f.reserved = iwarp::kMpaFlagRfc7306;
             return encode(f);
         },
         RI_EPROTO},
        {"513 bytes of private data",
         [](const RawResponder &r) {
             Bytes b = encode(r.good_reply());
             b.resize(iwarp::kMpaFrameHeaderLen);
             b[18] = 0x02;
             b[19] = 0x01;
             return b;
         },
         RI_EMSGSIZE},
        {"an HTTP answer", [](const RawResponder &) { return bytes("HTTP/1.1 400 Bad Request\r\n\r\n"); },
         RI_EPROTO},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.name);
        RawResponder r;
        send_all(r.peer(), c.make(r));
        ASSERT_TRUE(drive({&r.ini}));
        EXPECT_EQ(r.ini.state(), MpaState::failed);
        EXPECT_EQ(code_of(r.ini), c.code) << r.ini.error()->to_string();
        EXPECT_EQ(term_of(r.ini), iwarp::term::kLlpInvalidMpaFrame);
        // RFC 5044 §8: an invalid frame closes the connection; no FPDU (so no Terminate) is sent.
        EXPECT_EQ(r.ini.teardown(), MpaTeardown::close);
        EXPECT_EQ(unread(r.peer()), 0);
    }
}

TEST(LlpMpaInitiator, NegotiationFailuresAskForATerminate) {
    {
        RawResponder r;  // offers Write and Read
        MpaFrame f = r.good_reply();
        f.rtr = iwarp::kRtrSend;  // not offered
        send_all(r.peer(), encode(f));
        ASSERT_TRUE(drive({&r.ini}));
        EXPECT_EQ(r.ini.state(), MpaState::failed);
        EXPECT_EQ(term_of(r.ini), iwarp::term::kLlpNoMatchingRtr);
        EXPECT_EQ(r.ini.teardown(), MpaTeardown::terminate);
    }
    RawResponder r;  // IRD 16
    MpaFrame f = r.good_reply();
    f.ord = 40;  // the responder wants more reads than the initiator can serve
    send_all(r.peer(), encode(f));
    ASSERT_TRUE(drive({&r.ini}));
    EXPECT_EQ(r.ini.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.ini), RI_ERANGE);
    EXPECT_EQ(term_of(r.ini), iwarp::term::kLlpInsufficientIrd);
    EXPECT_EQ(r.ini.teardown(), MpaTeardown::terminate);

    // The Terminate the kAL sends before it closes: one FPDU, CRC on (the default policy asks for it), the
    // Terminate queue's first message carrying the code.
    const std::vector<uint8_t> t = r.ini.terminate_fpdu();
    ASSERT_GE(t.size(), 2u + iwarp::kUntaggedHeaderLen + 4u + 4u);
    const size_t ulpdu = static_cast<size_t>(t[0]) << 8 | t[1];
    EXPECT_EQ(t.size(), (2 + ulpdu + 3) / 4 * 4 + 4) << "length, ULPDU, pad to 4, CRC";
    const iwarp::Header h = iwarp::decode_header(t.data() + 2);
    EXPECT_EQ(h.op(), iwarp::Opcode::terminate);
    EXPECT_EQ(h.qn, static_cast<uint32_t>(iwarp::Queue::terminate));
    EXPECT_EQ(h.msn, 1u);
    iwarp::Terminate got;
    ASSERT_TRUE(iwarp::decode_terminate(
        std::span<const uint8_t>(t.data() + 2 + iwarp::kUntaggedHeaderLen, ulpdu - iwarp::kUntaggedHeaderLen), got));
    EXPECT_EQ(got.code, iwarp::term::kLlpInsufficientIrd);
    uint8_t crc[4];
    iwarp::put_crc32c(crc, iwarp::crc32c(t.data(), t.size() - 4));
    EXPECT_EQ(std::memcmp(crc, t.data() + t.size() - 4, 4), 0);
    // A session that closes instead has no Terminate to send.
    RawResponder ok;
    send_all(ok.peer(), encode(ok.good_reply()));
    ASSERT_TRUE(drive({&ok.ini}));
    EXPECT_TRUE(ok.ini.terminate_fpdu().empty());
}

TEST(LlpMpaInitiator, PeerClosingMidReplyIsAConnectionLoss) {
    RawResponder r;
    const Bytes pd = pattern(64, 6);
    MpaFrame f = r.good_reply();
    f.private_data = pd;
    Bytes wire = encode(f);
    send_all(r.peer(), std::span<const uint8_t>(wire.data(), wire.size() - 1));
    r.tcp.server.reset();
    ASSERT_TRUE(drive({&r.ini}));
    EXPECT_EQ(r.ini.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.ini), RI_ECONNRESET);
    EXPECT_EQ(term_of(r.ini), iwarp::term::kLlpConnectionLost);
}

TEST(LlpMpaInitiator, SilentResponderTimesOut) {
    RawResponder r(MpaConfig{}, MpaClock::now() + 300ms);
    EXPECT_EQ(r.ini.state(), MpaState::awaiting_reply);
    EXPECT_EQ(r.request_bytes.size(), iwarp::kMpaFrameHeaderLen + iwarp::kMpaIrdOrdLen);
    ASSERT_TRUE(drive({&r.ini}));
    EXPECT_EQ(r.ini.state(), MpaState::failed);
    EXPECT_STATUS(code_of(r.ini), RI_ETIMEDOUT);
    EXPECT_NE(r.ini.error()->message().find("awaiting_reply"), std::string::npos);
}

TEST(LlpMpaInitiator, ResetWhileWaitingForTheConsumerFails) {
    SessionPair p(MpaConfig{}, MpaConfig{});
    ASSERT_TRUE(drive_until({&p.ini, &p.res}, p.res, MpaState::request_received));
    // The initiator aborts (RST): the responder learns it from poll() without reading stream bytes.
    linger lg{1, 0};
    ASSERT_EQ(::setsockopt(p.ini.fd(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    p.tcp.client.reset();
    pollfd pf{p.res.fd(), p.res.poll_events(), 0};
    ASSERT_EQ(::poll(&pf, 1, 2000), 1);
    EXPECT_EQ(p.res.on_events(pf.revents), MpaState::failed);
    EXPECT_STATUS(code_of(p.res), RI_ECONNRESET);
}

}  // namespace
