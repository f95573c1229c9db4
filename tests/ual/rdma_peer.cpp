// The passive peer of the connection tests: a second consumer process with its own uAL.
//   ual_rdma_peer DEVICE RNIC MODE [BUFFER_BYTES [COUNT]]
// It listens on a port the host chooses and prints "port N", then serves:
//   reject  one request: rejects it with private data "go away";
//   accept  one request: checks its private data, accepts with "welcome", tells the peer its buffer (a Send), and
//           then answers "V size seed" messages: verifies the RDMA Written bytes, refills them for an RDMA Read, and
//           replies "ok" or "bad"; "Q" ends the loop; it prints the connection event that ends the connection;
//   hold    one request: accepts and waits to be killed;
//   watch   one request: accepts with 8 receives posted, tells the peer its buffer, and then only watches until the
//           connection ends (up to 60 s): it prints every connection event ("cm ID STATUS MS", MS on the monotonic
//           clock), asynchronous event ("ae ID DETAIL", "uae ID" unaffiliated) and completion ("wc OPCODE STATUS"),
//           the status of a receive posted afterwards ("late STATUS", or "late refused ERRNO" when the post fails),
//           the QP's state ("state N") and "done";
//   many    COUNT requests (see serve_many): all connected at once, then each checks and answers the other side's
//           RDMA Write of BUFFER_BYTES + index bytes and its Send, and RDMA Writes a pattern back;
//   features one request: receives into two-element scatter lists and answers every Send with
//           "R LEN SOLICITED INVALIDATED STAG HASH" (the flags of its completion, the STag it invalidated, an FNV-1a
//           hash of the bytes); "Q" or the connection's end (its receives flushed) ends it.
// Exit status 0 when everything it checked held.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "rdma_util.hpp"

using namespace rdmatest;

namespace {

constexpr size_t kRdmaOffset = 4096;

int fail(const std::string &what) {
    std::fprintf(stderr, "peer: %s\n", what.c_str());
    return 1;
}

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void say(const std::string &line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
}

// "watch": the connection is the other side's to break; everything this side sees on the way is printed.
int watch(Side &s, const std::shared_ptr<ual::Endpoint> &ep) {
    constexpr int kReceives = 8;
    BufferInfo info{reinterpret_cast<uint64_t>(s.buffer.data() + kRdmaOffset), s.mr->keys().rkey,
                    static_cast<uint32_t>(s.buffer.size() - kRdmaOffset)};
    std::memcpy(s.buffer.data() + 2048, &info, sizeof info);
    if (!post(s, *ep, RI_WR_SEND, 2048, sizeof info, 1).ok()) return fail("send buffer info");
    auto end = next_cm(s.cm, 60s);
    if (!end) return fail("the connection did not end");
    const int status = end->connection ? end->connection->status : 0;
    say("cm " + std::to_string(end->id) + " " + std::to_string(status) + " " + std::to_string(now_ms()));
    // Every receive completes (flushed), the Send before them too; a receive posted now completes at once.
    int receives = 0;
    for (int seen = 0; receives < kReceives && seen < kReceives + 1;) {
        auto wc = s.completion(10s);
        if (!wc) return fail("a posted request never completed");
        ++seen;
        if (wc->opcode == RI_WC_RECV) ++receives;
        say("wc " + std::to_string(wc->opcode) + " " + std::to_string(wc->status));
    }
    if (receives != kReceives) return fail("missing receive completions");
    if (const rdma::Status st = post_recv(s, *ep, 0, 256, 999); !st.ok()) {
        say("late refused " + std::to_string(st.code()));  // a dead adapter takes nothing more
    } else {
        auto late = s.completion(5s);
        if (!late) return fail("a receive posted in ERROR never completed");
        say("late " + std::to_string(late->status));
    }
    // The events came before the connection event or with it; a short grace for the last of them.
    for (auto e = s.async->wait(500ms); e; e = s.async->wait(200ms)) {
        char line[64];
        std::snprintf(line, sizeof line, "ae %u %#x", e->id, e->detail);
        say(line);
    }
    while (auto e = s.unaffiliated->dequeue()) {
        if (!*e) break;
        say("uae " + std::to_string((*e)->id));
    }
    auto qa = ep->query();
    say("state " + (qa ? std::to_string(qa->state) : std::string("-1")));  // -1: the kVP cannot be asked
    say("done");
    return 0;
}

// "many": the messages of the 256-QP test, one per Send.
struct Message {
    uint32_t kind;   // 1: this side's region (info), 2: "check what I wrote" (info: where to write back), 3: ok, 4: bad
    uint32_t index;  // the QP's index
    BufferInfo info;
};

int serve_many(Side &s, size_t count, size_t bytes) {
    // Layout: receive slots (2 per QP, 64 bytes), send slots (1 per QP), then each QP's region of bytes + count.
    const size_t slot = bytes + count;
    const size_t control = count * 3 * 64;
    auto recv_off = [&](size_t i, size_t j) { return (i * 2 + j) * 64; };
    auto send_off = [&](size_t i) { return count * 2 * 64 + i * 64; };
    auto region = [&](size_t i) { return control + i * slot; };
    auto back = [&](size_t i) { return control + (count + i) * slot; };
    std::vector<std::shared_ptr<ual::Endpoint>> eps(count);
    for (size_t n = 0; n < count; ++n) {
        auto req = next_cm(s.requests, 30s);
        if (!req || req->id != static_cast<uint32_t>(ual::CmEventId::connect_request)) return fail("no request");
        unsigned i = 0;
        if (std::sscanf(text(req->connection->private_data).c_str(), "qp %u", &i) != 1 || i >= count || eps[i]) {
            return fail("bad request private data");
        }
        eps[i] = s.endpoint(i);
        if (!eps[i]) return fail("create endpoint");
        for (uint64_t j = 0; j < 2; ++j) {
            if (!post_recv(s, *eps[i], recv_off(i, j), 64, i * 2 + j).ok()) return fail("post recv");
        }
        if (auto st = eps[i]->accept(req->connection->request, bytes_of("ok " + std::to_string(i))); !st.ok()) {
            return fail("accept: " + st.error().to_string());
        }
    }
    for (size_t n = 0; n < count; ++n) {
        auto e = next_cm(s.cm, 30s);
        if (!e || e->id != static_cast<uint32_t>(ual::CmEventId::established)) return fail("not established");
    }
    say("established " + std::to_string(count));
    // Every connection is up: each tells the other side its region.
    for (size_t i = 0; i < count; ++i) {
        Message m{1, static_cast<uint32_t>(i),
                  {reinterpret_cast<uint64_t>(s.buffer.data() + region(i)), s.mr->keys().rkey,
                   static_cast<uint32_t>(bytes + i)}};
        std::memcpy(s.buffer.data() + send_off(i), &m, sizeof m);
        if (!post(s, *eps[i], RI_WR_SEND, send_off(i), sizeof m, 1).ok()) return fail("send info");
    }
    size_t answered = 0, good = 0;
    while (answered < count) {
        auto wc = s.completion(30s);
        if (!wc) return fail("no completion");
        if (wc->status != RI_WC_SUCCESS) return fail("completion status " + std::to_string(wc->status));
        if (wc->opcode != RI_WC_RECV) continue;
        Message m{};
        std::memcpy(&m, s.buffer.data() + recv_off(wc->wr_id / 2, wc->wr_id % 2), sizeof m);
        const size_t i = wc->wr_id / 2;
        if (m.kind != 2 || m.index != i) return fail("unexpected message on QP " + std::to_string(i));
        // The RDMA Write came before this Send on the same stream: every byte is in place.
        const uint8_t *got = s.buffer.data() + region(i);
        bool ok = true;
        for (size_t k = 0; k < bytes + i; ++k) ok = ok && got[k] == pattern(k, static_cast<uint32_t>(i));
        good += ok ? 1 : 0;
        uint8_t *out = s.buffer.data() + back(i);
        for (size_t k = 0; k < m.info.length; ++k) out[k] = pattern(k, static_cast<uint32_t>(i + 1000));
        if (m.info.length > slot) return fail("write-back too long");
        if (!post(s, *eps[i], RI_WR_RDMA_WRITE, back(i), m.info.length, 2, m.info.addr, m.info.rkey).ok()) {
            return fail("write back");
        }
        Message r{ok ? 3u : 4u, static_cast<uint32_t>(i), {}};
        std::memcpy(s.buffer.data() + send_off(i), &r, sizeof r);
        if (!post(s, *eps[i], RI_WR_SEND, send_off(i), sizeof r, 3).ok()) return fail("send answer");
        ++answered;
    }
    say("verified " + std::to_string(good));
    // The other side disconnects every QP once it has checked what came back.
    size_t ended = 0;
    while (ended < count) {
        auto e = next_cm(s.cm, 30s);
        if (!e) return fail("only " + std::to_string(ended) + " connections ended");
        if (e->id == static_cast<uint32_t>(ual::CmEventId::peer_disconnect) ||
            e->id == static_cast<uint32_t>(ual::CmEventId::disconnected)) {
            ++ended;
        } else {
            const int status = e->connection ? e->connection->status : 0;
            const uint32_t term = e->connection ? e->connection->term : 0;
            return fail("connection event " + std::to_string(e->id) + " of QP " + std::to_string(e->context) +
                        " after " + std::to_string(ended) + " ended (status " + std::to_string(status) + " " +
                        std::strerror(status) + ", term " + std::to_string(term) + ")");
        }
    }
    say("ended " + std::to_string(ended));
    return good == count ? 0 : 1;
}

// The hash the features mode reports: FNV-1a over the received bytes.
uint32_t fnv(const uint8_t *p, size_t n, uint32_t h = 2166136261u) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
    return h;
}

// Receive slot i of the features mode: 40 bytes at i * 256, the rest at 4096 + i * 256 (a scatter list of two).
rdma::Status post_scatter(Side &s, ual::Endpoint &ep, uint64_t i) {
    ri_sge_t sge[2] = {{reinterpret_cast<uint64_t>(s.buffer.data() + i * 256), 40, s.mr->keys().lkey},
                       {reinterpret_cast<uint64_t>(s.buffer.data() + 4096 + i * 256), 216, s.mr->keys().lkey}};
    ri_recv_wr_t wr{100 + i, sge, 2, 0};
    return ep.post_recv({&wr, 1});
}

int features(Side &s, const std::shared_ptr<ual::Endpoint> &ep, size_t bytes) {
    // The remote area has a region of its own: a Send with Invalidate of its STag leaves the receive buffers' alone.
    auto remote = s.pz->register_memory(s.buffer.data() + kRdmaOffset, bytes,
                                        RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ);
    if (!remote) return fail("register the remote area: " + remote.error().to_string());
    BufferInfo info{reinterpret_cast<uint64_t>(s.buffer.data() + kRdmaOffset), (*remote)->keys().rkey,
                    static_cast<uint32_t>(bytes)};
    std::memcpy(s.buffer.data() + 2048, &info, sizeof info);
    if (!post(s, *ep, RI_WR_SEND, 2048, sizeof info, 1).ok()) return fail("send buffer info");
    for (;;) {
        auto wc = s.completion(60s);
        if (!wc) return fail("no completion");
        if (wc->status == RI_WC_WR_FLUSH_ERR) break;  // the connection ended (the peer's last step)
        if (wc->status != RI_WC_SUCCESS) return fail("completion status " + std::to_string(wc->status));
        if (wc->opcode != RI_WC_RECV) continue;
        const uint64_t slot = wc->wr_id - 100;
        std::vector<uint8_t> got(s.buffer.data() + slot * 256, s.buffer.data() + slot * 256 + std::min<size_t>(40, wc->byte_len));
        if (wc->byte_len > 40) {
            const uint8_t *rest = s.buffer.data() + 4096 + slot * 256;
            got.insert(got.end(), rest, rest + (wc->byte_len - 40));
        }
        if (got.size() == 1 && got[0] == 'Q') break;
        if (!post_scatter(s, *ep, slot).ok()) return fail("repost recv");
        const std::string reply = "R " + std::to_string(wc->byte_len) + " " +
                                  std::to_string((wc->flags & RI_WC_SOLICITED) != 0 ? 1 : 0) + " " +
                                  std::to_string((wc->flags & RI_WC_WITH_INV) != 0 ? 1 : 0) + " " +
                                  std::to_string((wc->flags & RI_WC_WITH_INV) != 0 ? wc->invalidated_stag : 0) + " " +
                                  std::to_string(fnv(got.data(), got.size()));
        std::memcpy(s.buffer.data() + 3072, reply.data(), reply.size());
        if (!post(s, *ep, RI_WR_SEND, 3072, static_cast<uint32_t>(reply.size()), 2).ok()) return fail("send reply");
    }
    std::printf("features done\n");
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s DEVICE RNIC accept|reject|hold|watch|many|features [BUFFER_BYTES [COUNT]]\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[3];
    const size_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 0) : (1u << 20);
    const size_t count = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 256;
    Side s;
    if (mode == "many") {
        const size_t total = count * 3 * 64 + 2 * count * (bytes + count);
        if (auto e = s.open(argv[1], argv[2], total, static_cast<uint32_t>(count * 8)); !e.empty()) return fail(e);
    } else if (auto e = s.open(argv[1], argv[2], kRdmaOffset + bytes); !e.empty()) {
        return fail(e);
    }
    auto lp = s.adapter->listen(0, s.requests, 77, mode == "many" ? static_cast<uint16_t>(count * 2) : 0);
    if (!lp) return fail("listen: " + lp.error().to_string());
    std::printf("port %u\n", (*lp)->port());
    std::fflush(stdout);
    if (mode == "many") return serve_many(s, count, bytes);

    auto req = next_cm(s.requests, 30s);
    if (!req || req->id != static_cast<uint32_t>(ual::CmEventId::connect_request) || !req->connection) {
        return fail("no connection request");
    }
    if (req->context != 77) return fail("wrong listen point context");
    if (text(req->connection->private_data) != "hello server") return fail("wrong request private data");
    if (mode == "reject") {
        if (auto st = s.adapter->reject(req->connection->request, bytes_of("go away")); !st.ok()) {
            return fail("reject: " + st.error().to_string());
        }
        std::printf("rejected\n");
        std::fflush(stdout);
        ::sleep(1);  // the reply is on its way; the kAL closes the socket
        return 0;
    }

    auto ep = s.endpoint(5);
    if (!ep) return fail("create endpoint");
    for (uint64_t i = 0; i < 8; ++i) {
        if (!(mode == "features" ? post_scatter(s, *ep, i) : post_recv(s, *ep, i * 256, 256, 100 + i)).ok()) {
            return fail("post recv");
        }
    }
    if (auto st = ep->accept(req->connection->request, bytes_of("welcome")); !st.ok()) {
        return fail("accept: " + st.error().to_string());
    }
    auto est = next_cm(s.cm);
    if (!est || est->id != static_cast<uint32_t>(ual::CmEventId::established)) return fail("not established");
    std::printf("established\n");
    std::fflush(stdout);
    if (mode == "hold") {
        for (;;) ::pause();
    }
    if (mode == "watch") return watch(s, ep);
    if (mode == "features") return features(s, ep, bytes);

    BufferInfo info{reinterpret_cast<uint64_t>(s.buffer.data() + kRdmaOffset), s.mr->keys().rkey,
                    static_cast<uint32_t>(bytes)};
    std::memcpy(s.buffer.data() + 2048, &info, sizeof info);
    if (!post(s, *ep, RI_WR_SEND, 2048, sizeof info, 1).ok()) return fail("send buffer info");
    bool ok = true;
    for (bool done = false; !done;) {
        auto wc = s.completion(60s);
        if (!wc) return fail("no completion");
        if (wc->status != RI_WC_SUCCESS) {
            return fail("completion status " + std::to_string(wc->status) + " (opcode " + std::to_string(wc->opcode) +
                        ", wr_id " + std::to_string(wc->wr_id) + ")");
        }
        if (wc->opcode != RI_WC_RECV) continue;
        const size_t slot = wc->wr_id - 100;
        const std::string msg(reinterpret_cast<const char *>(s.buffer.data() + slot * 256), wc->byte_len);
        if (msg == "Q") {
            done = true;
            break;
        }
        size_t size = 0;
        unsigned seed = 0;
        if (std::sscanf(msg.c_str(), "V %zu %u", &size, &seed) != 2 || size > bytes) return fail("bad message " + msg);
        bool good = true;
        uint8_t *area = s.buffer.data() + kRdmaOffset;
        for (size_t i = 0; i < size; ++i) {
            if (area[i] != pattern(i, seed)) {
                good = false;
                break;
            }
        }
        for (size_t i = 0; i < size; ++i) area[i] = pattern(i, seed + 1);
        ok = ok && good;
        if (!post_recv(s, *ep, slot * 256, 256, wc->wr_id).ok()) return fail("repost recv");
        const std::string reply = good ? "ok" : "bad";
        std::memcpy(s.buffer.data() + 3072, reply.data(), reply.size());
        if (!post(s, *ep, RI_WR_SEND, 3072, static_cast<uint32_t>(reply.size()), 2).ok()) return fail("send reply");
    }
    auto end = next_cm(s.cm);
    std::printf("end %u\n", end ? end->id : 0u);
    std::fflush(stdout);
    return ok ? 0 : 1;
}
