// Fuzz target for MPA connection setup (kal/llp/mpa_session.{hpp,cpp} over iwarp/src/mpa.cpp): the input's stream
// bytes are what the peer sends on a real socket pair, as an MPA Reply to an initiator session or as an MPA Request
// to a responder session, under a configuration the input chooses (MPA revision 1 or 2 with the RFC 6581 IRD/ORD
// words and peer-to-peer RTR types, CRC, markers, this side's private data up to and past its limit, the consumer's
// accept or reject and the IRD/ORD it accepts with, the stream in pieces or whole, the peer closing early).
//
// Checked on every input, against a model of RFC 5044 §7 and RFC 6581 written here independently of the codec:
// - the outcome: a complete, valid frame is taken (request_received, then established or rejected by the
//   consumer; an initiator's established or rejected-by-the-peer), an invalid one is refused with the error the
//   model expects (and, for a responder, a reject reply), an incomplete one waits, or fails once the peer closed;
// - the session reads exactly the bytes of the peer's frame and never one past it (the rest stays in the socket for
//   the provider), and at most the 20-byte header of a frame it refuses there;
// - peer_private_data() is the frame's consumer private data, within its limit (512 bytes, 508 after the IRD/ORD
//   words); peer_frame() encodes back to the bytes received;
// - what the session sent decodes as the request or reply it should be (our private data round-trips), the
//   agreement (result()) is what both frames say, to_llp_params() reports it, a Terminate FPDU is built exactly when
//   RFC 6581 wants one and parses back as the right Terminate;
// - the API refuses what it must (a second start, private data over the limit, accept/reject out of turn).
//
// Input: 6 bytes of choices, then the peer's stream.
//   byte 0: bit 0 responder (else initiator), bit 1 revision 2 (else 1), bit 2 CRC wanted, bit 3 markers wanted,
//           bit 4 markers allowed, bit 5 peer-to-peer, bit 6 the peer shuts down its side after its bytes, bit 7 the
//           peer closes its socket after its bytes
//   byte 1: bits 0-2 the RTR types this side offers or accepts; bits 3-7 piece size (0: the stream in one piece)
//   byte 2, 3: this side's IRD and ORD (0xfd..0xff: 0x4000, 0x3fff, 0xffff)
//   byte 4: this side's private data length (below 0xf0: twice the value; 0xf0..0xff: 500..515)
//   byte 5: responder: bit 0 accept (else reject), bits 1-3 and 4-6 the IRD and ORD caps of the accept (from
//           {0, 1, 2, 4, 16, 127, 0x3fff, 0xffff}), bit 7 with a closed peer: report its hang-up while the request
//           waits for a decision
//
// Built two ways: with libFuzzer (scripts/fuzz.sh mpa) the engine explores on its own; otherwise main() below is a
// seeded random-mutation driver over valid frames of every kind that CTest runs for a bounded number of inputs, and
// that replays saved inputs (the corpus in tests/fuzz/corpus/mpa) given as files or directories.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "iwarp/framing.hpp"
#include "iwarp/mpa.hpp"
#include "iwarp/wire.hpp"
#include "mpa_session.hpp"
#include "replay.hpp"

namespace {

using iwarp::MpaConfig;
using iwarp::MpaFrame;
using iwarp::MpaKind;
using kal::llp::MpaClock;
using kal::llp::MpaRole;
using kal::llp::MpaSession;
using kal::llp::MpaState;
using kal::llp::MpaTeardown;

[[noreturn]] void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "mpa_fuzz: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::abort();
}
#define CHECK(cond, ...)                \
    do {                                \
        if (!(cond)) fail(__VA_ARGS__); \
    } while (0)

constexpr size_t kHead = 6;
constexpr size_t kHeader = 20;  // key, flags, revision, private data length
constexpr size_t kPdMax = 512;
constexpr char kReqKey[] = "MPA ID Req Frame";
constexpr char kRepKey[] = "MPA ID Rep Frame";
constexpr uint16_t kCaps[8] = {0, 1, 2, 4, 16, 127, 0x3fff, 0xffff};

// How deep the inputs got, so the driver can show it explores more than the key.
struct Coverage {
    long inputs = 0, bad_key = 0, too_long = 0, waiting = 0, lost = 0, refused = 0, requests = 0, established = 0,
         rejected = 0, terminates = 0, api_refusals = 0;
} g_cov;

uint16_t depth(uint8_t b) {
    switch (b) {
        case 0xfd: return 0x4000;
        case 0xfe: return 0x3fff;
        case 0xff: return 0xffff;
        default: return b;
    }
}
uint16_t clamp14(uint16_t v) { return std::min<uint16_t>(v, 0x3fff); }
uint16_t be16(const uint8_t *p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint8_t pick_rtr(uint8_t offered) {
    for (uint8_t bit : {uint8_t{iwarp::kRtrWrite}, uint8_t{iwarp::kRtrRead}, uint8_t{iwarp::kRtrSend}}) {
        if ((offered & bit) != 0) return bit;
    }
    return 0;
}

struct Choices {
    bool responder = false, shut = false, close = false;
    MpaConfig cfg;
    size_t piece = 0;
    size_t pd_len = 0;
    bool accept = false, hangup = false;
    uint16_t cap_ird = 0, cap_ord = 0;
};

Choices choose(const uint8_t *h) {
    Choices c;
    c.responder = (h[0] & 1) != 0;
    c.cfg.revision = (h[0] & 2) != 0 ? 2 : 1;
    c.cfg.crc = (h[0] & 4) != 0;
    c.cfg.markers_wanted = (h[0] & 8) != 0;
    c.cfg.markers_allowed = (h[0] & 16) != 0;
    c.cfg.peer2peer = (h[0] & 32) != 0;
    c.shut = (h[0] & 64) != 0;
    c.close = (h[0] & 128) != 0;
    c.cfg.rtr = h[1] & 7;
    c.piece = h[1] >> 3;
    c.cfg.ird = depth(h[2]);
    c.cfg.ord = depth(h[3]);
    c.pd_len = h[4] < 0xf0 ? 2u * h[4] : 500u + (h[4] - 0xf0u);
    c.accept = (h[5] & 1) != 0;
    c.cap_ird = kCaps[(h[5] >> 1) & 7];
    c.cap_ord = kCaps[(h[5] >> 4) & 7];
    c.hangup = (h[5] & 128) != 0;
    return c;
}

// ---- The model: what the session must make of the peer's bytes, from RFC 5044 §7.1 and RFC 6581 alone.
enum class Outcome {
    waiting,       // the frame is not complete and the peer may still send it
    fail_close,    // refused: the caller closes (an initiator), or a session that failed with nothing to send
    reject_fail,   // a responder refusing the request: a reject reply is sent, then the session fails
    fail_terminate,  // an initiator that read a valid reply whose negotiation fails: Terminate, then close
    peer_rejected, // an initiator that read the responder's reject
    taken          // a responder holding a serviceable request, an initiator with an established connection
};

struct Expect {
    Outcome outcome = Outcome::waiting;
    int code = 0;                 // the error's code
    size_t frame_len = 0;         // the whole frame (header and private data), once the header is known
    bool have_frame = false;      // the frame decoded (peer_frame() exists)
    bool enhanced = false;        // RFC 6581 words lead its private data
    size_t max_consumed = 0;      // refused on the key: at most this much read
    // the frame's fields
    bool m = false, c = false, r = false, p2p = false;
    uint8_t reserved = 0, rev = 0, rtr = 0;
    uint16_t ird = 0, ord = 0;
    // responder: the revision and CRC of the reject the session sends when it refuses
    uint8_t reject_rev = 1;
    bool reject_crc = false;
    iwarp::TermCode term{};
};

Expect model(const Choices &ch, const uint8_t *s, size_t n, bool closed) {
    Expect e;
    const char *key = ch.responder ? kReqKey : kRepKey;
    const size_t k = std::min<size_t>(n, 16);
    if (std::memcmp(s, key, k) != 0) {
        size_t first_bad = 0;
        while (s[first_bad] == static_cast<uint8_t>(key[first_bad])) ++first_bad;
        e.outcome = Outcome::fail_close;
        e.code = RI_EPROTO;
        e.max_consumed = kHeader;
        e.frame_len = first_bad + 1;  // at least this much was read
        return e;
    }
    if (n < kHeader) {
        e.outcome = closed ? Outcome::fail_close : Outcome::waiting;
        e.code = RI_ECONNRESET;
        return e;
    }
    const size_t pd = be16(s + 18);
    e.rev = s[17];
    e.c = (s[16] & 0x40) != 0;
    if (pd > kPdMax) {
        e.frame_len = kHeader;
        e.code = RI_EMSGSIZE;
        if (ch.responder) {
            e.outcome = Outcome::reject_fail;
            e.reject_rev = e.rev == 1 || e.rev == 2 ? e.rev : 1;
            e.reject_crc = e.c;
        } else {
            e.outcome = Outcome::fail_close;
        }
        return e;
    }
    e.frame_len = kHeader + pd;
    if (n < e.frame_len) {
        e.outcome = closed ? Outcome::fail_close : Outcome::waiting;
        e.code = RI_ECONNRESET;
        return e;
    }
    const uint8_t flags = s[16];
    e.m = (flags & 0x80) != 0;
    e.r = (flags & 0x20) != 0;
    e.reserved = flags & 0x0f;
    e.enhanced = (flags & 0x10) != 0 && e.rev >= 2;  // the H bit means nothing before revision 2
    if (e.enhanced && pd < 4) {
        e.code = RI_EPROTO;
        if (ch.responder) {
            e.outcome = Outcome::reject_fail;  // a frame that does not decode: the reject of revision 1, no CRC
        } else {
            e.outcome = Outcome::fail_close;
        }
        return e;
    }
    e.have_frame = true;
    if (e.enhanced) {
        const uint16_t ird = be16(s + 20), ord = be16(s + 22);
        e.ird = ird & 0x3fff;
        e.ord = ord & 0x3fff;
        e.p2p = (ird & 0x8000) != 0;
        e.rtr = static_cast<uint8_t>(((ird & 0x4000) != 0 ? iwarp::kRtrSend : 0) |
                                     ((ord & 0x8000) != 0 ? iwarp::kRtrWrite : 0) |
                                     ((ord & 0x4000) != 0 ? iwarp::kRtrRead : 0));
    }
    const MpaConfig &cfg = ch.cfg;
    if (ch.responder) {
        e.reject_rev = e.rev == 1 || e.rev == 2 ? e.rev : 1;
        e.reject_crc = e.c;
        e.outcome = Outcome::reject_fail;
        // The lowest reserved bit is this stack's RFC 7306 offer (iwarp::kMpaFlagRfc7306), taken in any request;
        // the configurations here never agree to it, so replies keep every reserved bit clear.
        if (e.r || (e.reserved & ~iwarp::kMpaFlagRfc7306) != 0 || e.rev < 1 || e.rev > 2) {
            e.code = RI_EPROTO;
        } else if (e.m && !cfg.markers_allowed) {
            e.code = RI_EOPNOTSUPP;
        } else if (std::min(e.rev, cfg.revision) >= 2 && e.enhanced && e.p2p && pick_rtr(e.rtr & cfg.rtr) == 0) {
            e.code = RI_ECONNREFUSED;
            e.term = iwarp::term::kLlpNoMatchingRtr;
        } else {
            e.outcome = Outcome::taken;
            e.code = 0;
        }
        return e;
    }
    // Initiator: the reply to the request make_request() builds from cfg.
    const bool req_enhanced = cfg.revision >= 2;
    const uint8_t req_rtr = req_enhanced && cfg.peer2peer ? cfg.rtr : 0;
    if (e.r) {
        e.outcome = Outcome::peer_rejected;
        e.code = RI_ECONNREFUSED;
        return e;
    }
    e.outcome = Outcome::fail_close;
    e.code = RI_EPROTO;
    if (e.reserved != 0 || e.rev < 1 || e.rev > cfg.revision) return e;
    if (e.m && !cfg.markers_allowed) {
        e.code = RI_EOPNOTSUPP;
        return e;
    }
    if (e.rev >= 2) {  // then the request was of revision 2 too, with its IRD/ORD words
        if (!e.enhanced) return e;
        if (e.ord > clamp14(cfg.ird)) {
            e.outcome = Outcome::fail_terminate;
            e.code = RI_ERANGE;
            e.term = iwarp::term::kLlpInsufficientIrd;
            return e;
        }
        const bool req_p2p = cfg.peer2peer;
        const uint8_t chosen = e.p2p ? static_cast<uint8_t>(e.rtr & req_rtr) : 0;
        if ((req_p2p && (!e.p2p || chosen == 0 || (chosen & (chosen - 1)) != 0)) || (!req_p2p && e.p2p)) {
            e.outcome = Outcome::fail_terminate;
            e.term = iwarp::term::kLlpNoMatchingRtr;
            return e;
        }
    }
    e.outcome = Outcome::taken;
    e.code = 0;
    return e;
}

// ---- Sockets.
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(); }
    void reset() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

int unread(int fd) {
    int n = 0;
    CHECK(::ioctl(fd, FIONREAD, &n) == 0, "FIONREAD failed");
    return n;
}

// One loopback TCP connection for the life of the process: to_llp_params() of established sessions reads its
// options and addresses (the sessions themselves run on socket pairs, a few microseconds each).
int tcp_probe() {
    static int fd = [] {
        int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        CHECK(l >= 0 && ::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 && ::listen(l, 1) == 0 &&
                  ::getsockname(l, reinterpret_cast<sockaddr *>(&a), &len) == 0,
              "no loopback listener");
        int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(c >= 0 && ::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0, "no loopback connection");
        int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        CHECK(s >= 0, "accept failed");
        ::close(l);
        (void)s;  // kept open with c for the life of the process
        return c;
    }();
    return fd;
}

// ---- Checks of what the session sent.

// Our request, as the peer receives it.
void check_request(const Choices &ch, const std::vector<uint8_t> &got, std::span<const uint8_t> pd) {
    auto f = iwarp::decode_mpa(got, MpaKind::request);
    CHECK(f.has_value(), "our request does not decode: %s", f ? "" : f.error().message().c_str());
    const MpaConfig &c = ch.cfg;
    CHECK(f->revision == c.revision && f->crc == c.crc && f->markers == c.markers_wanted && !f->reject &&
              f->reserved == 0 && f->enhanced == (c.revision >= 2),
          "our request's flags or revision differ from the configuration");
    if (f->enhanced) {
        CHECK(f->ird == clamp14(c.ird) && f->ord == clamp14(c.ord) && f->peer2peer == c.peer2peer &&
                  f->rtr == (c.peer2peer ? c.rtr : 0),
              "our request's IRD/ORD words differ from the configuration");
    }
    CHECK(f->private_data.size() == pd.size() && std::equal(pd.begin(), pd.end(), f->private_data.begin()),
          "our request's private data does not round-trip");
}

// The responder's reply as the peer receives it: @p accepted, with @p pd.
MpaFrame check_reply(const std::vector<uint8_t> &got, bool reject, uint8_t rev, bool crc, std::span<const uint8_t> pd) {
    auto f = iwarp::decode_mpa(got, MpaKind::reply);
    CHECK(f.has_value(), "our reply does not decode: %s", f ? "" : f.error().message().c_str());
    CHECK(f->reject == reject, "our reply %s the R bit", reject ? "lacks" : "has");
    CHECK(f->revision == rev, "our reply has revision %u, not %u", f->revision, rev);
    CHECK(f->crc == crc, "our reply's C bit is %d, not %d", f->crc, crc);
    CHECK(f->reserved == 0, "our reply has reserved bits");
    CHECK(f->private_data.size() == pd.size() && std::equal(pd.begin(), pd.end(), f->private_data.begin()),
          "our reply's private data does not round-trip (%zu bytes, %zu given)", f->private_data.size(), pd.size());
    return *f;
}

// A Terminate FPDU as the responder, already in full operation, receives it.
struct TermSink : iwarp::FpduSink {
    iwarp::Header header;
    std::vector<uint8_t> payload;
    size_t segments = 0;
    std::optional<iwarp::TermCode> on_header(const iwarp::Header &h, size_t len) override {
        header = h;
        payload.assign(len, 0);
        return std::nullopt;
    }
    std::span<uint8_t> payload_target(size_t offset, size_t remaining) override {
        return {payload.data() + offset, remaining};
    }
    std::optional<iwarp::TermCode> on_segment_end() override {
        ++segments;
        return std::nullopt;
    }
};

void check_terminate(const MpaSession &s, const Expect &e, bool crc, bool markers) {
    const std::vector<uint8_t> t = s.terminate_fpdu();
    CHECK(!t.empty(), "no Terminate FPDU for a negotiation failure");
    TermSink sink;
    iwarp::Receiver rx(sink, iwarp::FramingOptions{crc, markers});
    const size_t used = rx.feed(t);
    CHECK(!rx.failed() && used == t.size() && sink.segments == 1, "the Terminate FPDU does not parse (%zu of %zu)",
          used, t.size());
    CHECK(sink.header.opcode == static_cast<uint8_t>(iwarp::Opcode::terminate) && !sink.header.tagged,
          "the Terminate FPDU carries opcode %u", sink.header.opcode);
    iwarp::Terminate term;
    CHECK(iwarp::decode_terminate(sink.payload, term) && term.code == e.term,
          "the Terminate FPDU carries another code");
}

// ---- One input.
int run_one(const uint8_t *data, size_t size) {
    if (size < kHead) return 0;
    const Choices ch = choose(data);
    const uint8_t *stream = data + kHead;
    const size_t n = size - kHead;
    ++g_cov.inputs;

    int sv[2];
    CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0, "socketpair failed");
    Fd ours(sv[0]), peer(sv[1]);
    std::vector<uint8_t> our_pd(ch.pd_len);
    for (size_t i = 0; i < our_pd.size(); ++i) our_pd[i] = static_cast<uint8_t>(i * 7 + 1);

    // The configuration refused when its revision is neither 1 nor 2, and a session starts once.
    {
        MpaSession bad(ours.fd);
        MpaConfig c = ch.cfg;
        c.revision = (data[1] & 8) != 0 ? 0 : 3;
        auto r = ch.responder ? bad.start_responder(c, MpaClock::now()) : bad.start_initiator(c, {}, MpaClock::now());
        CHECK(!r && r.error().code() == RI_EINVAL && bad.state() == MpaState::idle, "revision %u accepted", c.revision);
    }
    MpaSession s(ours.fd);
    const auto far = MpaClock::now() + std::chrono::hours(1);
    CHECK(!s.accept({}, 1, 1) && !s.reject({}), "accept or reject before any request");
    if (ch.responder) {
        CHECK(s.start_responder(ch.cfg, far).has_value(), "start_responder failed");
    } else {
        auto r = s.start_initiator(ch.cfg, our_pd, far);
        const bool fits = our_pd.size() + (ch.cfg.revision >= 2 ? 4 : 0) <= kPdMax;
        CHECK(r.has_value() == fits, "start_initiator with %zu bytes of private data: %s", our_pd.size(),
              r ? "accepted" : "refused");
        if (!r) {
            CHECK(r.error().code() == RI_EMSGSIZE && s.state() == MpaState::idle && s.poll_events() == 0,
                  "private data over the limit refused with %d", r.error().code());
            ++g_cov.api_refusals;
            return 0;
        }
    }
    {
        auto again = s.start_responder(ch.cfg, far);
        CHECK(!again && again.error().code() == RI_EINVAL, "a second start accepted");
    }
    CHECK(s.role() == (ch.responder ? MpaRole::responder : MpaRole::initiator) && s.fd() == ours.fd,
          "role or socket lost");

    std::vector<uint8_t> sent;  // what the session wrote, as the peer read it
    bool decided = false, decision_accept = false, hung_up = false, decided_alone = false;
    std::vector<uint8_t> decision_pd;
    size_t written = 0;
    bool peer_gone = false;  // the peer's socket is closed: nothing the session writes is read any more
    const size_t piece = ch.piece == 0 ? std::max<size_t>(n, 1) : ch.piece;

    auto collect = [&] {
        if (peer_gone) return;
        uint8_t buf[1024];
        for (;;) {
            const ssize_t r = ::recv(peer.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r < 0 && errno == EINTR) continue;  // libFuzzer's SIGALRM (-timeout)
            if (r <= 0) break;
            sent.insert(sent.end(), buf, buf + r);
        }
    };
    auto decide = [&] {
        if (s.state() != MpaState::request_received || decided) return;
        decided = true;
        decided_alone = peer_gone;  // then no reply can reach the peer
        CHECK(s.peer_frame().has_value(), "a request received without its frame");
        if (ch.hangup && peer_gone) {
            // The peer left while the consumer decides: the session learns it from poll's hang-up, without reading.
            s.on_events(POLLHUP);
            CHECK(s.state() == MpaState::failed && s.error() != nullptr && s.error()->code() == RI_ECONNRESET &&
                      s.teardown() == MpaTeardown::close,
                  "a hang-up during the decision: state %s", std::string(to_string(s.state())).c_str());
            hung_up = true;
            return;
        }
        CHECK(s.poll_events() == 0, "waiting for a decision yet polling for %d", s.poll_events());
        if (ch.accept) {
            auto r = s.accept(our_pd, ch.cap_ird, ch.cap_ord);
            const bool fits = our_pd.size() + (s.peer_frame()->enhanced && ch.cfg.revision >= 2 ? 4 : 0) <= kPdMax;
            CHECK(r.has_value() == fits, "accept with %zu bytes of private data: %s", our_pd.size(),
                  r ? "accepted" : "refused");
            if (r) {
                decision_accept = true;
                decision_pd = our_pd;
                return;
            }
            CHECK(r.error().code() == RI_EMSGSIZE && s.state() == MpaState::request_received,
                  "accept refused with %d, state %s", r.error().code(), std::string(to_string(s.state())).c_str());
            ++g_cov.api_refusals;
        }
        auto r = s.reject(our_pd);
        if (!r) {
            CHECK(our_pd.size() > kPdMax && r.error().code() == RI_EMSGSIZE &&
                      s.state() == MpaState::request_received,
                  "reject with %zu bytes of private data refused", our_pd.size());
            ++g_cov.api_refusals;
            CHECK(s.reject({}).has_value(), "reject without private data refused");
            decision_pd.clear();
        } else {
            decision_pd = our_pd;
        }
        CHECK(!s.accept({}, 1, 1) && !s.reject({}), "a second decision accepted");
    };
    auto drive = [&] {
        for (int round = 0; round < 64 && !s.done(); ++round) {
            decide();
            const short want = s.poll_events();
            if (want == 0) break;
            pollfd p{ours.fd, want, 0};
            int ready;
            while ((ready = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
                // libFuzzer's SIGALRM (-timeout) interrupts even a poll that does not wait: ask again
            }
            CHECK(ready >= 0, "poll failed: %s", std::strerror(errno));
            if (p.revents == 0) break;
            s.on_events(p.revents);
            collect();
        }
        decide();
        collect();
    };

    drive();  // an initiator writes its request before any byte of the peer's is there
    if (!ch.responder) {
        CHECK(s.state() == MpaState::awaiting_reply, "the initiator did not send its request: %s",
              std::string(to_string(s.state())).c_str());
        check_request(ch, sent, our_pd);
        CHECK(s.peer_private_data().empty() && !s.peer_frame(), "a peer frame before any byte");
        sent.clear();
    }
    while (written < n) {
        // Once the session is done it reads nothing more: the rest goes in one piece (a socket pair's buffer holds
        // a few hundred small pieces only).
        const size_t k = s.done() ? n - written : std::min(piece, n - written);
        ssize_t w;
        while ((w = ::send(peer.fd, stream + written, k, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
        }
        CHECK(w == static_cast<ssize_t>(k), "the socket pair took %zd of %zu bytes: %s", w, k, std::strerror(errno));
        written += k;
        if (written == n) {
            if (ch.close) {
                peer.reset();
                peer_gone = true;
            } else if (ch.shut) {
                ::shutdown(peer.fd, SHUT_WR);
            }
        }
        drive();
    }
    if (n == 0) {
        if (ch.close) {
            peer.reset();
            peer_gone = true;
        } else if (ch.shut) {
            ::shutdown(peer.fd, SHUT_WR);
        }
        drive();
    }
    const bool closed = ch.close || ch.shut;

    // ---- The outcome against the model.
    const Expect e = model(ch, stream, n, closed);
    const size_t consumed = n - static_cast<size_t>(unread(ours.fd));
    const std::string state(to_string(s.state()));
    const rdma::Error *err = s.error();
    switch (e.outcome) {
        case Outcome::waiting:
            CHECK(!s.done() && s.state() == (ch.responder ? MpaState::awaiting_request : MpaState::awaiting_reply),
                  "an incomplete frame (%zu bytes) left the session %s", n, state.c_str());
            CHECK(consumed == n, "read %zu of the %zu bytes of an incomplete frame", consumed, n);
            CHECK(s.poll_events() == POLLIN && s.poll_timeout_ms(MpaClock::now()) > 0 && !s.expired(MpaClock::now()),
                  "a waiting session that does not wait");
            CHECK(err == nullptr && s.teardown() == MpaTeardown::none && s.peer_private_data().empty(),
                  "a waiting session with an error or a frame");
            s.time_out();
            CHECK(s.state() == MpaState::failed && s.error() != nullptr && s.error()->code() == RI_ETIMEDOUT &&
                      s.teardown() == MpaTeardown::close && s.poll_timeout_ms(MpaClock::now()) == -1,
                  "time_out() left %s", std::string(to_string(s.state())).c_str());
            ++g_cov.waiting;
            break;
        case Outcome::fail_close:
            CHECK(s.state() == MpaState::failed && err != nullptr && err->code() == e.code &&
                      s.teardown() == MpaTeardown::close,
                  "expected a failure with %d and close, got %s with %d", e.code, state.c_str(),
                  err != nullptr ? err->code() : 0);
            CHECK(s.terminate_fpdu().empty() && s.term().has_value(), "a close without its Terminate code");
            if (e.max_consumed != 0) {
                CHECK(consumed <= e.max_consumed && consumed >= e.frame_len,
                      "read %zu bytes of a frame with a wrong key (wrong from byte %zu)", consumed, e.frame_len - 1);
                ++g_cov.bad_key;
            } else if (e.code == RI_ECONNRESET) {
                CHECK(consumed == n, "read %zu of the %zu bytes before the close", consumed, n);
                ++g_cov.lost;
            } else {
                CHECK(consumed == e.frame_len, "read %zu bytes of a refused frame of %zu", consumed, e.frame_len);
                if (e.code == RI_EMSGSIZE) ++g_cov.too_long; else ++g_cov.refused;
            }
            CHECK(sent.empty(), "the session sent %zu bytes more after failing without a reply", sent.size());
            break;
        case Outcome::reject_fail: {
            CHECK(ch.responder, "model");
            CHECK(s.state() == MpaState::failed && err != nullptr && s.teardown() == MpaTeardown::close,
                  "expected a refused request, got %s", state.c_str());
            // The reason, unless the reply could not be sent (the peer closed): then the reason still wins.
            CHECK(err->code() == e.code, "a refused request failed with %d, not %d", err->code(), e.code);
            CHECK(consumed == e.frame_len, "read %zu bytes of a refused request of %zu", consumed, e.frame_len);
            if (!(peer_gone && sent.empty())) check_reply(sent, true, e.reject_rev, e.reject_crc, {});
            if (e.code == RI_EMSGSIZE) ++g_cov.too_long; else ++g_cov.refused;
            break;
        }
        case Outcome::fail_terminate: {
            CHECK(!ch.responder, "model");
            CHECK(s.state() == MpaState::failed && err != nullptr && err->code() == e.code &&
                      s.teardown() == MpaTeardown::terminate && s.term() == e.term,
                  "expected a negotiation failure with %d and a Terminate, got %s with %d", e.code, state.c_str(),
                  err != nullptr ? err->code() : 0);
            CHECK(consumed == e.frame_len, "read %zu bytes of a reply of %zu", consumed, e.frame_len);
            check_terminate(s, e, ch.cfg.crc || e.c, e.m);
            ++g_cov.terminates;
            break;
        }
        case Outcome::peer_rejected:
            CHECK(s.state() == MpaState::rejected && err != nullptr && err->code() == RI_ECONNREFUSED &&
                      s.teardown() == MpaTeardown::close && s.terminate_fpdu().empty(),
                  "expected the peer's reject, got %s", state.c_str());
            CHECK(consumed == e.frame_len, "read %zu bytes of a reject of %zu", consumed, e.frame_len);
            ++g_cov.rejected;
            break;
        case Outcome::taken: {
            CHECK(consumed == e.frame_len, "read %zu bytes of a frame of %zu (%zu sent)", consumed, e.frame_len, n);
            if (ch.responder) {
                ++g_cov.requests;
                CHECK(decided, "a serviceable request was never offered to the consumer (state %s)", state.c_str());
                if (hung_up) break;
                if (decided_alone) {  // the reply could not be written
                    CHECK(s.state() == MpaState::failed && err != nullptr && err->code() == RI_ECONNRESET,
                          "a reply to a closed peer: %s", state.c_str());
                    break;
                }
                const uint8_t rev = std::min(e.rev, ch.cfg.revision);
                const bool crc = ch.cfg.crc || e.c;
                if (!decision_accept) {
                    CHECK(s.state() == MpaState::rejected && err != nullptr && err->code() == RI_ECONNREFUSED &&
                              s.teardown() == MpaTeardown::close,
                          "our reject ended in %s", state.c_str());
                    check_reply(sent, true, e.rev, e.c, decision_pd);
                    ++g_cov.rejected;
                    break;
                }
                CHECK(s.state() == MpaState::established && err == nullptr && s.teardown() == MpaTeardown::none,
                      "our accept ended in %s", state.c_str());
                const MpaFrame reply = check_reply(sent, false, rev, crc, decision_pd);
                const iwarp::MpaResult &res = s.result();
                const bool enh = rev >= 2 && e.enhanced;
                CHECK(res.revision == rev && res.crc == crc && res.markers_tx == e.m &&
                          res.markers_rx == ch.cfg.markers_wanted && reply.markers == ch.cfg.markers_wanted &&
                          res.enhanced == enh && reply.enhanced == enh,
                      "the agreement differs from the frames");
                const uint16_t ird = clamp14(std::min(ch.cfg.ird, ch.cap_ird));
                const uint16_t ord = clamp14(std::min(ch.cfg.ord, ch.cap_ord));
                if (enh) {
                    CHECK(res.ird == std::min(ird, e.ord) && res.ord == std::min(ord, e.ird) &&
                              reply.ird == res.ird && reply.ord == res.ord,
                          "IRD/ORD %u/%u agreed for a request of %u/%u with caps %u/%u", res.ird, res.ord, e.ird,
                          e.ord, ird, ord);
                    const uint8_t rtr = e.p2p ? pick_rtr(e.rtr & ch.cfg.rtr) : 0;
                    CHECK(res.peer2peer == e.p2p && res.rtr == rtr && reply.peer2peer == e.p2p &&
                              reply.rtr == rtr,
                          "RTR %u agreed, %u expected", res.rtr, rtr);
                } else {
                    CHECK(res.ird == ird && res.ord == ord && !res.peer2peer && res.rtr == 0,
                          "revision 1 agreement with IRD/ORD %u/%u", res.ird, res.ord);
                }
            } else {
                CHECK(s.state() == MpaState::established && err == nullptr && s.teardown() == MpaTeardown::none &&
                          s.terminate_fpdu().empty(),
                      "a valid reply left %s", state.c_str());
                CHECK(sent.empty(), "the initiator sent more than its request");
                const iwarp::MpaResult &res = s.result();
                const bool enh = e.rev >= 2;
                CHECK(res.revision == e.rev && res.crc == (ch.cfg.crc || e.c) && res.markers_tx == e.m &&
                          res.markers_rx == ch.cfg.markers_wanted && res.enhanced == enh,
                      "the agreement differs from the frames");
                if (enh) {
                    const uint8_t rtr = ch.cfg.peer2peer ? static_cast<uint8_t>(e.rtr & ch.cfg.rtr) : 0;
                    CHECK(res.ird == clamp14(ch.cfg.ird) && res.ord == std::min(clamp14(ch.cfg.ord), e.ird) &&
                              res.peer2peer == ch.cfg.peer2peer && res.rtr == rtr,
                          "IRD/ORD %u/%u RTR %u agreed", res.ird, res.ord, res.rtr);
                } else {
                    CHECK(res.ird == clamp14(ch.cfg.ird) && res.ord == clamp14(ch.cfg.ord) && !res.peer2peer,
                          "revision 1 agreement with IRD/ORD %u/%u", res.ird, res.ord);
                }
            }
            ++g_cov.established;
            // What the provider is told.
            if (s.state() == MpaState::established) {
                const iwarp::MpaResult &res = s.result();
                auto p = kal::llp::to_llp_params(res, !ch.responder, tcp_probe());
                CHECK(p.has_value(), "to_llp_params failed: %s", p ? "" : p.error().message().c_str());
                CHECK(((p->mpa_flags & RI_MPA_CRC) != 0) == res.crc &&
                          ((p->mpa_flags & RI_MPA_MARKERS) != 0) == (res.markers_tx || res.markers_rx) &&
                          ((p->mpa_flags & RI_MPA_PEER2PEER) != 0) == res.peer2peer &&
                          ((p->mpa_flags & RI_MPA_INITIATOR) != 0) == !ch.responder &&
                          p->mpa_revision == res.revision && p->ird == res.ird && p->ord == res.ord &&
                          (p->rtr_type == RI_RTR_NONE) == !res.peer2peer && p->mss > 0 && p->fpdu_max > 0 &&
                          p->fpdu_max <= p->mss,
                      "to_llp_params does not report the agreement");
            }
            break;
        }
    }
    // The peer's frame, once read: its private data within the limit, and it encodes back to the bytes received.
    if (e.have_frame) {
        const auto f = s.peer_frame();
        CHECK(f.has_value(), "no peer frame after reading it whole");
        const auto pd = s.peer_private_data();
        const size_t off = kHeader + (e.enhanced ? 4 : 0);
        CHECK(pd.size() == e.frame_len - off && pd.size() <= kPdMax - (e.enhanced ? 4 : 0) &&
                  std::equal(pd.begin(), pd.end(), stream + off) && f->private_data.data() == pd.data(),
              "peer private data of %zu bytes, %zu expected", pd.size(), e.frame_len - off);
        CHECK(f->enhanced == e.enhanced && f->revision == e.rev && f->reserved == e.reserved &&
                  (!e.enhanced || (f->ird == e.ird && f->ord == e.ord && f->peer2peer == e.p2p && f->rtr == e.rtr)),
              "the peer frame's fields differ from its bytes");
        std::array<uint8_t, kHeader + kPdMax> again{};
        auto len = iwarp::encode_mpa(*f, again);
        CHECK(len && *len == e.frame_len, "the peer frame does not encode back to its size");
        std::array<uint8_t, kHeader + kPdMax> want{};
        std::memcpy(want.data(), stream, e.frame_len);
        if (!e.enhanced) want[16] &= static_cast<uint8_t>(~0x10);  // the H bit of revision 1 is not kept
        CHECK(std::memcmp(again.data(), want.data(), e.frame_len) == 0, "the peer frame does not round-trip");
    } else {
        CHECK(s.peer_private_data().empty() && !s.peer_frame(), "a peer frame that was never read whole");
    }
    // Final states stay final and answer nothing more.
    if (s.done()) {
        const MpaState before = s.state();
        s.on_events(POLLIN | POLLOUT | POLLHUP);
        s.time_out();
        CHECK(s.state() == before && s.poll_events() == 0 && s.poll_timeout_ms(MpaClock::now()) == -1 &&
                  !s.expired(MpaClock::now()),
              "a final state moved");
        CHECK(!s.accept({}, 1, 1) && !s.reject({}), "a decision after the end");
        CHECK(static_cast<size_t>(unread(ours.fd)) == n - consumed, "bytes read after the end");
    }
    return 0;
}

// ---- The seeded driver's seeds: valid frames of each kind behind choice bytes that make them serviceable.
std::vector<std::vector<uint8_t>> make_seeds() {
    std::vector<std::vector<uint8_t>> seeds;
    const uint8_t pd_sizes[] = {0, 4, 0xf4};  // 0, 8 and 504 bytes of ours
    const uint8_t fpdu[] = {0x00, 0x12, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int responder = 0; responder < 2; ++responder) {
        for (int rev = 1; rev <= 2; ++rev) {
            for (int p2p = 0; p2p < 2; ++p2p) {
                for (size_t peer_pd : {size_t{0}, size_t{5}, size_t{508}}) {
                    for (uint8_t ours : pd_sizes) {
                        MpaFrame f;
                        f.kind = responder != 0 ? MpaKind::request : MpaKind::reply;
                        f.revision = static_cast<uint8_t>(rev);
                        f.crc = true;
                        if (rev == 2) {
                            f.enhanced = true;
                            f.ird = 8;
                            f.ord = 4;
                            f.peer2peer = p2p != 0;
                            f.rtr = p2p != 0 ? (responder != 0 ? iwarp::kRtrWrite | iwarp::kRtrRead : iwarp::kRtrRead) : 0;
                        }
                        std::vector<uint8_t> pd(peer_pd);
                        for (size_t i = 0; i < pd.size(); ++i) pd[i] = static_cast<uint8_t>('a' + i % 26);
                        f.private_data = pd;
                        std::vector<uint8_t> bytes(kHeader + kPdMax + 8);
                        auto len = iwarp::encode_mpa(f, bytes);
                        if (!len) continue;
                        bytes.resize(*len);
                        // Revision 2, CRC, peer-to-peer as the frame; accept with caps of 16.
                        const uint8_t mode = static_cast<uint8_t>(responder | 2 | 4 | (p2p != 0 ? 32 : 0));
                        std::vector<uint8_t> s = {mode, static_cast<uint8_t>(iwarp::kRtrWrite | iwarp::kRtrRead), 16,
                                                  16, ours, static_cast<uint8_t>(1 | 4 << 1 | 4 << 4)};
                        s.insert(s.end(), bytes.begin(), bytes.end());
                        if (peer_pd == 5) s.insert(s.end(), std::begin(fpdu), std::end(fpdu));  // trailing stream
                        seeds.push_back(std::move(s));
                    }
                }
            }
        }
    }
    return seeds;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return run_one(data, size); }

#ifndef OPENRDMA_LIBFUZZER
// Seeded random-mutation driver: kal_mpa_fuzz ITERATIONS [SEED]; or kal_mpa_fuzz PATH... replays saved inputs (files,
// or directories of them such as tests/fuzz/corpus/mpa).
int main(int argc, char **argv) {
    auto report = [](const char *what) {
        const Coverage &c = g_cov;
        std::printf("mpa_fuzz: %s: %ld bad keys, %ld frames too long, %ld other frames refused, %ld incomplete "
                    "(timed out), %ld connections lost, %ld requests taken, %ld connections established, %ld "
                    "rejected, %ld Terminates, %ld API refusals; every outcome as the model says, no byte read past a "
                    "frame, every frame round-trips\n",
                    what, c.bad_key, c.too_long, c.refused, c.waiting, c.lost, c.requests, c.established, c.rejected,
                    c.terminates, c.api_refusals);
    };
    if (fuzz_replay::wanted(argc, argv)) {
        const int rc = fuzz_replay::run(argc, argv, "mpa_fuzz", run_one);
        if (rc != 0) return rc;
        report("replay");
        // The corpus must still reach every outcome of connection setup, not only the refusals of its first bytes.
        const Coverage &c = g_cov;
        int shallow = 0;
        shallow += fuzz_replay::reached("mpa_fuzz", c.requests, "a request taken") ? 0 : 1;
        shallow += fuzz_replay::reached("mpa_fuzz", c.established, "an established connection") ? 0 : 1;
        shallow += fuzz_replay::reached("mpa_fuzz", c.rejected, "a rejection") ? 0 : 1;
        shallow += fuzz_replay::reached("mpa_fuzz", c.refused, "a refused frame") ? 0 : 1;
        shallow += fuzz_replay::reached("mpa_fuzz", c.terminates, "a Terminate") ? 0 : 1;
        return shallow == 0 ? 0 : 1;
    }
    const long iterations = argc > 1 ? std::atol(argv[1]) : 100000;
    const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atol(argv[2])) : 12345u;
    const std::vector<std::vector<uint8_t>> seeds = make_seeds();
    std::mt19937 rng(seed);
    for (long i = 0; i < iterations; ++i) {
        std::vector<uint8_t> input = seeds[static_cast<size_t>(i) % seeds.size()];
        // The seeds themselves first; then 1 to 6 mutations, often in the 24 bytes that matter most.
        const int mutations = i < static_cast<long>(seeds.size()) ? 0 : 1 + static_cast<int>(rng() % 6);
        if (mutations != 0) input = seeds[rng() % seeds.size()];
        for (int m = 0; m < mutations && !input.empty(); ++m) {
            // Anywhere, in the choices, or in the flags, revision, length and IRD/ORD words (the key seldom).
            size_t at = rng() % input.size();
            switch (rng() % 4) {
                case 0: break;
                case 1: at = rng() % std::min(input.size(), kHead); break;
                default:
                    if (input.size() > kHead + 16) at = kHead + 16 + rng() % std::min<size_t>(input.size() - kHead - 16, 8);
                    break;
            }
            switch (rng() % 7) {
                case 0: input[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                case 1: input[at] = static_cast<uint8_t>(rng()); break;
                case 2: input[at] = (rng() & 1) != 0 ? 0xff : 0x00; break;
                case 3:
                    input.erase(input.begin() + static_cast<long>(at),
                                input.begin() + static_cast<long>(std::min(input.size(), at + 1 + rng() % 16)));
                    break;
                case 4:
                    input.insert(input.begin() + static_cast<long>(at), 1 + rng() % 16, static_cast<uint8_t>(rng()));
                    break;
                case 5: input[rng() % std::min<size_t>(input.size(), kHead)] = static_cast<uint8_t>(rng()); break;
                default:
                    if (input.size() > kHead + 19) {  // another private data length
                        const uint16_t len = static_cast<uint16_t>(rng() % 600);
                        input[kHead + 18] = static_cast<uint8_t>(len >> 8);
                        input[kHead + 19] = static_cast<uint8_t>(len);
                    }
                    break;
            }
        }
        run_one(input.data(), input.size());
    }
    char what[96];
    std::snprintf(what, sizeof what, "%ld inputs, seed %u", g_cov.inputs, seed);
    report(what);
    return 0;
}
#endif
