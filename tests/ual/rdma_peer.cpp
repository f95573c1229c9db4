// The passive peer of the connection tests: a second consumer process with its own uAL.
//   ual_rdma_peer DEVICE RNIC MODE [BUFFER_BYTES]
// It listens on a port the host chooses and prints "port N", then serves one connection request:
//   reject  rejects it with private data "go away";
//   accept  checks the request's private data, accepts with "welcome", tells the peer its buffer (a Send), and then
//           answers "V size seed" messages: verifies the RDMA Written bytes, refills them for an RDMA Read, and
//           replies "ok" or "bad"; "Q" ends the loop; it prints the connection event that ends the connection;
//   hold    accepts and waits to be killed.
// Exit status 0 when everything it checked held.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "rdma_util.hpp"

using namespace rdmatest;

namespace {

constexpr size_t kRdmaOffset = 4096;

int fail(const std::string &what) {
    std::fprintf(stderr, "peer: %s\n", what.c_str());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s DEVICE RNIC accept|reject|hold [BUFFER_BYTES]\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[3];
    const size_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 0) : (1u << 20);
    Side s;
    if (auto e = s.open(argv[1], argv[2], kRdmaOffset + bytes); !e.empty()) return fail(e);
    auto lp = s.adapter->listen(0, s.requests, 77);
    if (!lp) return fail("listen: " + lp.error().to_string());
    std::printf("port %u\n", (*lp)->port());
    std::fflush(stdout);

    auto req = next_cm(s.requests, 30s);
    if (!req || req->id != static_cast<uint32_t>(ual::CmEventId::connect_request) || !req->connection) {
        return fail("no connection request");
    }
    if (req->context != 77) return fail("wrong listen point context");
    if (text(req->connection->private_data) != "hello server") return fail("wrong request private data");
    if (mode == "reject") {
        if (auto st = s.adapter->reject(req->connection->request, bytes_of("go away")); !st.ok()) {
            return fail("reject: " + st.describe());
        }
        std::printf("rejected\n");
        std::fflush(stdout);
        ::sleep(1);  // the reply is on its way; the kAL closes the socket
        return 0;
    }

    auto ep = s.endpoint(5);
    if (!ep) return fail("create endpoint");
    for (uint64_t i = 0; i < 8; ++i) {
        if (!post_recv(s, *ep, i * 256, 256, 100 + i).ok()) return fail("post recv");
    }
    if (auto st = ep->accept(req->connection->request, bytes_of("welcome")); !st.ok()) {
        return fail("accept: " + st.describe());
    }
    auto est = next_cm(s.cm);
    if (!est || est->id != static_cast<uint32_t>(ual::CmEventId::established)) return fail("not established");
    std::printf("established\n");
    std::fflush(stdout);
    if (mode == "hold") {
        for (;;) ::pause();
    }

    BufferInfo info{reinterpret_cast<uint64_t>(s.buffer.data() + kRdmaOffset), s.mr->keys().rkey,
                    static_cast<uint32_t>(bytes)};
    std::memcpy(s.buffer.data() + 2048, &info, sizeof info);
    if (!post(s, *ep, RI_WR_SEND, 2048, sizeof info, 1).ok()) return fail("send buffer info");
    bool ok = true;
    for (bool done = false; !done;) {
        auto wc = s.completion(60s);
        if (!wc) return fail("no completion");
        if (wc->status != RI_WC_SUCCESS) return fail("completion status " + std::to_string(wc->status));
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
