/**
 * @file main.cpp
 * @brief it_rping: rdma-core's rping over IT-API v2.1, with rping's options, message layout and exchange, so that it
 *        talks to a real rping peer on an iWARP RNIC.
 *
 * Each iteration (rping's "ping/pong" loop):
 *   client sends its source buffer (struct rping_rdma_info: __be64 buf, __be32 rkey, __be32 size)
 *   server RDMA-Reads the ping data from it, then sends a go-ahead
 *   client sends its sink buffer
 *   server RDMA-Writes the ping data into it (strlen + 1 bytes), then sends a go-ahead
 *   client compares source and sink (every iteration; -V as rping's, a mismatch fails the run)
 *
 *   it_rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]
 *   it_rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
 *
 * -a on the server and -I on the client name the local RNIC by address (it_ia_create accepts an address); --ia names
 * it directly; otherwise the first interface it_interface_list reports. -q and -t are accepted for rping's command
 * lines and change nothing: IT-API always creates and moves the endpoint's QP itself.
 * Exit status: 0 when every iteration completed and its data matched (client) or the client ended the connection
 * with an orderly disconnect after a clean run, of -C iterations when -C is given (server); 1 otherwise, with a
 * message saying what ended the run and after how many iterations (a connection broken, krdmad gone); 2 for a
 * usage error.
 */
#include <CLI/CLI.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "it_api.h"
#include "itapi_names.hpp"
#include "rnicpi/host/printable.hpp"
#include "rping_wire.hpp"

namespace {

using namespace it_rping;
using Clock = std::chrono::steady_clock;
using it_tools::call_error;

struct Options {
    bool server = false;
    bool client = false;
    std::string addr;
    std::string source;
    std::string ia;
    uint16_t port = kDefaultPort;
    int count = 0;
    uint32_t size = kDefaultSize;
    int verbose = 0;
    int validate = 0;
    int debug = 0;
    bool persistent = false;
    bool self_qp = false;
    int tos = -1;
    int timeout_s = 30;
};

int g_debug = 0;

#define DEBUG_LOG(...)                        \
    do {                                      \
        if (g_debug) std::printf(__VA_ARGS__); \
    } while (0)

rdma::Expected<in_addr> resolve(const std::string &host) {
    in_addr a{};
    if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return a;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo *res = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || res == nullptr) {
        return rdma::Error(EINVAL, "getaddrinfo failed (" + std::string(::gai_strerror(rc)) +
                                       ") - invalid hostname or IP address: " + host);
    }
    a = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
    return a;
}

/**
 * @brief One side's IT-API objects: IA, PZ, SEVDs, one registered buffer (receive and send messages, the RDMA
 *        buffer, and the client's start buffer), and the endpoint. Freed in reverse order.
 */
class Rping {
public:
    explicit Rping(const Options &o) : o_(o) {}
    ~Rping() { teardown(); }
    Rping(const Rping &) = delete;
    Rping &operator=(const Rping &) = delete;

    rdma::Expected<void> open(const std::string &ia_name);
    rdma::Expected<void> listen();
    rdma::Expected<void> accept_one();
    rdma::Expected<void> connect();
    rdma::Expected<void> run_server();
    rdma::Expected<void> run_client();
    void disconnect();
    void free_endpoint();

private:
    enum Cookie : it_dto_cookie_t { kRecv = 1, kSend = 2, kRdma = 3 };

    rdma::Expected<void> create_endpoint();
    rdma::Expected<void> post_recv();
    rdma::Expected<void> post_send_info(const RdmaInfo *info);
    rdma::Expected<it_event_t> next_completion(const char *what);
    rdma::Expected<RdmaInfo> wait_recv(const char *what);
    rdma::Expected<void> wait_rdma(const char *what);
    rdma::Error ended(const rdma::Error &e, const char *what);
    void take_cm_end(const it_event_t &cm);
    std::string offline_reason();
    void teardown();

    uint8_t *recv_buf() { return buf_; }
    uint8_t *send_buf() { return buf_ + 16; }
    char *rdma_buf() { return reinterpret_cast<char *>(buf_ + 64); }
    char *start_buf() { return reinterpret_cast<char *>(buf_ + 64 + o_.size); }

    const Options &o_;
    it_ia_handle_t ia_ = nullptr;
    it_pz_handle_t pz_ = nullptr;
    it_evd_handle_t dto_ = nullptr, cm_ = nullptr, req_ = nullptr, async_ = nullptr;
    it_listen_handle_t listen_ = nullptr;
    it_ep_handle_t ep_ = nullptr;
    it_lmr_handle_t lmr_ = nullptr;
    it_rmr_context_t rkey_ = 0;
    uint8_t *buf_ = nullptr;
    size_t buf_size_ = 0;
    bool disconnected_ = false;  // the connection ended: flushed, or a disconnect or broken event arrived
    bool orderly_ = false;       // it ended with the peer's orderly disconnect (not broken, not krdmad gone)
    uint64_t iterations_ = 0;    // iterations completed on this connection
};

void Rping::teardown() {
    free_endpoint();
    if (listen_ != nullptr) (void)it_listen_free(listen_);
    if (lmr_ != nullptr) (void)it_lmr_free(lmr_);
    for (it_evd_handle_t e : {dto_, cm_, req_, async_}) {
        if (e != nullptr) (void)it_evd_free(e);
    }
    if (pz_ != nullptr) (void)it_pz_free(pz_);
    if (ia_ != nullptr) (void)it_ia_free(ia_);
    std::free(buf_);
    listen_ = nullptr;
    lmr_ = nullptr;
    dto_ = cm_ = req_ = async_ = nullptr;
    pz_ = nullptr;
    ia_ = nullptr;
    buf_ = nullptr;
}

rdma::Expected<void> Rping::open(const std::string &ia_name) {
    std::string name = ia_name;
    if (name.empty()) {
        it_interface_t list[16];
        size_t n = 16, total = 0;
        it_interface_list(list, &n, &total);
        if (n == 0) {
            // The library's reason when it has one (no krdmad, a bad configuration); else krdmad serves no RNIC.
            const std::string why = it_tools::failure_reason("it_interface_list");
            return rdma::Error(ENODEV, "it_interface_list found no IT-API interface: " +
                                           (why.empty() ? std::string("krdmad serves no RNIC (rdmactl list shows "
                                                                      "what it serves)")
                                                        : why));
        }
        // The client's peer is an IPv4 address (resolve()); a server listens on its -a, which names its IA.
        name = it_tools::default_interface(list, n, IT_IPV4);
    }
    if (const it_status_t s = it_ia_create(name.c_str(), 2, 1, &ia_); s != IT_SUCCESS) {
        return call_error("it_ia_create", "\"" + name + "\", 2, 1", s);
    }
    DEBUG_LOG("opened IT-API interface %s\n", name.c_str());
    if (const it_status_t s = it_pz_create(ia_, &pz_); s != IT_SUCCESS) return call_error("it_pz_create", name, s);
    const auto flags = static_cast<it_evd_flags_t>(0);
    if (const it_status_t s = it_evd_create(ia_, IT_DTO_EVENT_STREAM, flags, 2 * (kSendDepth + kReceiveDepth), 1,
                                            nullptr, &dto_, nullptr);
        s != IT_SUCCESS) {
        return call_error("it_evd_create", "IT_DTO_EVENT_STREAM", s);
    }
    if (const it_status_t s = it_evd_create(ia_, IT_CM_MSG_EVENT_STREAM, flags, 16, 1, nullptr, &cm_, nullptr);
        s != IT_SUCCESS) {
        return call_error("it_evd_create", "IT_CM_MSG_EVENT_STREAM", s);
    }
    // The unaffiliated stream says why a connection broke when the RNIC itself went away (krdmad gone, link down).
    if (const it_status_t s = it_evd_create(ia_, IT_ASYNC_UNAFF_EVENT_STREAM, flags, 16, 1, nullptr, &async_, nullptr);
        s != IT_SUCCESS) {
        return call_error("it_evd_create", "IT_ASYNC_UNAFF_EVENT_STREAM", s);
    }
    // recv_buf (16) | send_buf (16) | pad to 64 | rdma_buf (size) | start_buf (size, client)
    buf_size_ = 64 + 2 * static_cast<size_t>(o_.size);
    if (::posix_memalign(reinterpret_cast<void **>(&buf_), 4096, buf_size_) != 0) {
        buf_ = nullptr;
        return rdma::Error(ENOMEM, "cannot allocate " + std::to_string(buf_size_) + " bytes");
    }
    std::memset(buf_, 0, buf_size_);
    if (const it_status_t s = it_lmr_create20(pz_, buf_, buf_size_, IT_ADDR_MODE_ABSOLUTE,
                                              static_cast<it_mem_priv_t>(IT_PRIV_LOCAL | IT_PRIV_REMOTE),
                                              IT_LMR_FLAG_NONE, 0, &lmr_, &rkey_);
        s != IT_SUCCESS) {
        return call_error("it_lmr_create20", std::to_string(buf_size_) + " bytes, IT_PRIV_LOCAL | IT_PRIV_REMOTE", s);
    }
    if (rkey_ > UINT32_MAX) {
        return rdma::Error(ERANGE, "the LMR's RMR context " + std::to_string(rkey_) +
                                       " does not fit rping's 32-bit rkey");
    }
    DEBUG_LOG("registered %zu bytes, rkey %#x\n", buf_size_, static_cast<unsigned>(rkey_));
    return {};
}

rdma::Expected<void> Rping::create_endpoint() {
    it_ep_attributes_t attr{};
    attr.max_dto_payload_size = o_.size;
    attr.max_request_dtos = kSendDepth;
    attr.max_recv_dtos = kReceiveDepth;
    attr.max_send_segments = 1;
    attr.max_recv_segments = 1;
    attr.srv.rc.rdma_read_enable = IT_TRUE;
    attr.srv.rc.rdma_write_enable = IT_TRUE;
    attr.srv.rc.max_rdma_read_segments = 1;
    attr.srv.rc.max_rdma_write_segments = 1;
    attr.srv.rc.rdma_read_ird = 1;  // rping's responder_resources and initiator_depth
    attr.srv.rc.rdma_read_ord = 1;
    attr.srv.rc.soft_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    attr.srv.rc.hard_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    if (const it_status_t s = it_ep_rc_create(pz_, dto_, dto_, cm_, IT_EP_NO_FLAG, &attr, &ep_); s != IT_SUCCESS) {
        return call_error("it_ep_rc_create", "send depth 16, receive depth 2, IRD/ORD 1", s);
    }
    disconnected_ = false;
    orderly_ = false;
    iterations_ = 0;
    DEBUG_LOG("created endpoint\n");
    return post_recv();
}

rdma::Expected<void> Rping::post_recv() {
    it_lmr_triplet_t t{};
    t.lmr = lmr_;
    t.addr.abs = recv_buf();
    t.length = RdmaInfo::kWireSize;
    if (const it_status_t s = it_post_recv(ep_, &t, 1, kRecv, IT_COMPLETION_FLAG); s != IT_SUCCESS) {
        return call_error("it_post_recv", "16 bytes", s);
    }
    return {};
}

rdma::Expected<void> Rping::post_send_info(const RdmaInfo *info) {
    // The server's go-ahead is its send buffer as rping leaves it (never formatted: zeros); only its length counts.
    if (info != nullptr) {
        info->write(send_buf());
        DEBUG_LOG("RDMA addr %llx rkey %x len %u\n", static_cast<unsigned long long>(info->buf), info->rkey, info->size);
    }
    it_lmr_triplet_t t{};
    t.lmr = lmr_;
    t.addr.abs = send_buf();
    t.length = RdmaInfo::kWireSize;
    if (const it_status_t s = it_post_send(ep_, &t, 1, kSend, IT_COMPLETION_FLAG); s != IT_SUCCESS) {
        return call_error("it_post_send", "16 bytes", s);
    }
    return {};
}

rdma::Expected<it_event_t> Rping::next_completion(const char *what) {
    // Two streams are watched, the DTO SEVD and the CM SEVD (the peer's disconnect ends the wait), so dequeue both
    // with naps growing from 1 us rather than block in it_evd_wait on one; --timeout bounds the whole wait.
    const auto give_up = Clock::now() + std::chrono::seconds(o_.timeout_s);
    auto nap = std::chrono::microseconds(1);
    for (;;) {
        it_event_t ev{};
        const it_status_t s = it_evd_dequeue(dto_, &ev);
        if (s == IT_SUCCESS) {
            if (ev.dto_cmpl.dto_status == IT_DTO_SUCCESS) return ev;
            const rdma::Error e(EIO, std::string("cq completion failed while waiting for ") + what + ": " +
                                         it_tools::dto_status_name(ev.dto_cmpl.dto_status));
            // A failed completion (a flush, or a transport error when the peer's side failed first) comes with
            // the end of the connection: whether that was the peer's orderly disconnect or a break (krdmad gone,
            // the peer killed) is the connection event's to say, which comes next.
            size_t more = 0;
            it_event_t cm{};
            const bool cm_event = it_evd_wait(cm_, 2000000, &cm, &more) == IT_SUCCESS &&
                                  (cm.event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT ||
                                   cm.event_number == IT_CM_MSG_CONN_BROKEN_EVENT);
            if (cm_event) take_cm_end(cm);
            if (!cm_event && ev.dto_cmpl.dto_status != IT_DTO_ERR_FLUSHED) return e;
            disconnected_ = true;
            return ended(e, what);
        }
        if (s != IT_ERR_QUEUE_EMPTY) return call_error("it_evd_dequeue", "DTO SEVD", s);
        // The peer's disconnect ends the wait (the server's normal end).
        it_event_t cm{};
        if (it_evd_dequeue(cm_, &cm) == IT_SUCCESS &&
            (cm.event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT || cm.event_number == IT_CM_MSG_CONN_BROKEN_EVENT)) {
            disconnected_ = true;
            take_cm_end(cm);
            return ended(rdma::Error(ENOTCONN, it_tools::event_name(cm.event_number) + " while waiting for " + what),
                         what);
        }
        if (Clock::now() > give_up) {
            return rdma::Error(ETIMEDOUT, std::string("no completion within ") + std::to_string(o_.timeout_s) +
                                              " s while waiting for " + what);
        }
        std::this_thread::sleep_for(nap);
        nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::microseconds(500));
    }
}

void Rping::take_cm_end(const it_event_t &cm) {
    if (cm.event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT) orderly_ = true;
}

std::string Rping::offline_reason() {
    // The RNIC's own notice comes before the connection's end, but through another stream: give it a moment.
    for (;;) {
        it_event_t ev{};
        size_t more = 0;
        if (async_ == nullptr || it_evd_wait(async_, 500000, &ev, &more) != IT_SUCCESS) return {};
        if (ev.event_number == IT_ASYNC_UNAFF_SPIGOT_OFFLINE) {
            return "the RNIC went offline (krdmad stopped or died, or the link went down)";
        }
    }
}

rdma::Error Rping::ended(const rdma::Error &e, const char *what) {
    if (orderly_) {
        return rdma::Error(ENOTCONN, "the peer disconnected after " + std::to_string(iterations_) +
                                         " iteration(s) while waiting for " + what);
    }
    const std::string offline = offline_reason();
    return rdma::Error(ECONNRESET, "the connection broke after " + std::to_string(iterations_) + " iteration(s)" +
                                       (offline.empty() ? "" : ": " + offline) + " (" + e.message() + ")");
}

rdma::Expected<RdmaInfo> Rping::wait_recv(const char *what) {
    for (;;) {
        auto ev = next_completion(what);
        if (!ev) return ev.error();
        const it_dto_cmpl_event_t &c = ev->dto_cmpl;
        if (c.cookie == kSend) {
            DEBUG_LOG("send completion\n");
            continue;
        }
        if (c.cookie != kRecv) return rdma::Error(EPROTO, std::string("unexpected completion while waiting for ") + what);
        DEBUG_LOG("recv completion\n");
        if (c.transferred_length != RdmaInfo::kWireSize) {
            return rdma::Error(EPROTO, "Received bogus data, size " + std::to_string(c.transferred_length));
        }
        const RdmaInfo info = RdmaInfo::read(recv_buf());
        if (auto r = post_recv(); !r) return r.error();
        return info;
    }
}

rdma::Expected<void> Rping::wait_rdma(const char *what) {
    for (;;) {
        auto ev = next_completion(what);
        if (!ev) return ev.error();
        const it_dto_cmpl_event_t &c = ev->dto_cmpl;
        if (c.cookie == kSend) {
            DEBUG_LOG("send completion\n");
            continue;
        }
        if (c.cookie != kRdma) return rdma::Error(EPROTO, std::string("unexpected completion while waiting for ") + what);
        return {};
    }
}

rdma::Expected<void> Rping::listen() {
    const auto flags = static_cast<it_evd_flags_t>(0);
    if (const it_status_t s = it_evd_create(ia_, IT_CM_REQ_EVENT_STREAM, flags, 16, 1, nullptr, &req_, nullptr);
        s != IT_SUCCESS) {
        return call_error("it_evd_create", "IT_CM_REQ_EVENT_STREAM", s);
    }
    it_conn_qual_t q{};
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(o_.port);
    if (const it_status_t s = it_listen_create(ia_, 0, req_, IT_LISTEN_CONN_QUAL_INPUT, &q, &listen_);
        s != IT_SUCCESS) {
        return call_error("it_listen_create", "port " + std::to_string(o_.port), s);
    }
    DEBUG_LOG("listening on port %u\n", o_.port);
    std::fflush(stdout);
    return {};
}

rdma::Expected<void> Rping::accept_one() {
    it_event_t ev{};
    for (;;) {
        size_t more = 0;
        // A CM request SEVD has no CQ behind it: it_evd_wait is safe here.
        const it_status_t s = it_evd_wait(req_, IT_TIMEOUT_INFINITE, &ev, &more);
        if (s != IT_SUCCESS) return call_error("it_evd_wait", "connection request SEVD", s);
        if (ev.event_number == IT_CM_REQ_CONN_REQUEST_EVENT) break;
    }
    DEBUG_LOG("connection request\n");
    if (auto r = create_endpoint(); !r) {
        (void)it_reject(ev.conn_req.cn_est_id, nullptr, 0);
        return r;
    }
    if (const it_status_t s = it_ep_accept(ep_, ev.conn_req.cn_est_id, nullptr, 0); s != IT_SUCCESS) {
        return call_error("it_ep_accept", "no private data", s);
    }
    DEBUG_LOG("accepting client connection request\n");
    for (;;) {
        size_t more = 0;
        it_event_t c{};
        const it_status_t s = it_evd_wait(cm_, static_cast<uint64_t>(o_.timeout_s) * 1000000, &c, &more);
        if (s != IT_SUCCESS) return call_error("it_evd_wait", "waiting for IT_CM_MSG_CONN_ESTABLISHED_EVENT", s);
        if (c.event_number == IT_CM_MSG_CONN_ESTABLISHED_EVENT) break;
        return rdma::Error(ECONNRESET, "wait for CONNECTED state: " + it_tools::event_name(c.event_number));
    }
    DEBUG_LOG("ESTABLISHED\n");
    return {};
}

rdma::Expected<void> Rping::connect() {
    auto dst = resolve(o_.addr);
    if (!dst) return dst.error();
    it_net_addr_t na{};
    na.addr_type = IT_IPV4;
    na.addr.ipv4 = *dst;
    it_path_t path{};
    size_t num = 1, total = 0;
    if (const it_status_t s = it_get_pathinfo(ia_, 0, &na, &num, &total, &path); s != IT_SUCCESS || num == 0) {
        return call_error("it_get_pathinfo", "spigot 0, " + o_.addr, s == IT_SUCCESS ? IT_ERR_INVALID_NETADDR : s);
    }
    if (auto r = create_endpoint(); !r) return r;
    it_conn_qual_t q{};
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(o_.port);
    if (const it_status_t s = it_ep_connect(ep_, &path, nullptr, &q, IT_CONNECT_FLAG_TWO_WAY, nullptr, 0);
        s != IT_SUCCESS) {
        return call_error("it_ep_connect", o_.addr + " port " + std::to_string(o_.port), s);
    }
    size_t more = 0;
    it_event_t c{};
    const it_status_t s = it_evd_wait(cm_, static_cast<uint64_t>(o_.timeout_s) * 1000000, &c, &more);
    if (s != IT_SUCCESS) return call_error("it_evd_wait", "waiting for IT_CM_MSG_CONN_ESTABLISHED_EVENT", s);
    if (c.event_number != IT_CM_MSG_CONN_ESTABLISHED_EVENT) {
        return rdma::Error(ECONNREFUSED, "cma event " + it_tools::event_name(c.event_number) + " connecting to " +
                                             o_.addr + ":" + std::to_string(o_.port) + " (is a server listening?)");
    }
    DEBUG_LOG("rdma_connect successful\n");
    return {};
}

rdma::Expected<void> Rping::run_server() {
    for (;;) {
        // Wait for the client's source buffer.
        auto src = wait_recv("the client's source buffer (RDMA_READ_ADV)");
        if (!src) {
            // The client's orderly disconnect between iterations is rping's normal end, once -C's count is done.
            if (orderly_ && (o_.count == 0 || iterations_ >= static_cast<uint64_t>(o_.count))) return {};
            if (orderly_) {
                return rdma::Error(ENOTCONN, "the client disconnected after " + std::to_string(iterations_) +
                                                 " of " + std::to_string(o_.count) + " iterations (-C)");
            }
            return src.error();
        }
        DEBUG_LOG("Received rkey %x addr %llx len %u from peer\n", src->rkey, static_cast<unsigned long long>(src->buf),
                  src->size);
        if (src->size > o_.size) {
            return rdma::Error(EMSGSIZE, "the client's buffer of " + std::to_string(src->size) +
                                             " bytes is larger than -S " + std::to_string(o_.size));
        }
        it_lmr_triplet_t t{};
        t.lmr = lmr_;
        t.addr.abs = rdma_buf();
        t.length = src->size;
        if (const it_status_t s = it_post_rdma_read(ep_, &t, 1, kRdma, IT_COMPLETION_FLAG, src->buf, src->rkey);
            s != IT_SUCCESS) {
            return call_error("it_post_rdma_read", std::to_string(src->size) + " bytes", s);
        }
        DEBUG_LOG("server posted rdma read req \n");
        if (auto r = wait_rdma("RDMA_READ_COMPLETE"); !r) return r;
        DEBUG_LOG("server received read complete\n");
        rdma_buf()[o_.size - 1] = 0;  // the client's data may lack its NUL; printing and strlen stay inside
        // The peer's bytes, shown as text: escaped, so a peer cannot drive this terminal.
        if (o_.verbose) std::printf("server ping data: %s\n", rdma::printable(rdma_buf()).c_str());
        if (auto r = post_send_info(nullptr); !r) return r;
        DEBUG_LOG("server posted go ahead\n");

        auto sink = wait_recv("the client's sink buffer (RDMA_WRITE_ADV)");
        if (!sink) return sink.error();
        DEBUG_LOG("server received sink adv\n");
        const uint32_t len = static_cast<uint32_t>(std::strlen(rdma_buf()) + 1);
        if (len > sink->size) {
            return rdma::Error(EMSGSIZE, "the client's sink of " + std::to_string(sink->size) + " bytes is too small");
        }
        t.length = len;
        if (const it_status_t s = it_post_rdma_write(ep_, &t, 1, kRdma, IT_COMPLETION_FLAG, sink->buf, sink->rkey);
            s != IT_SUCCESS) {
            return call_error("it_post_rdma_write", std::to_string(len) + " bytes", s);
        }
        DEBUG_LOG("rdma write from lkey %x laddr %p len %u\n", static_cast<unsigned>(rkey_),
                  static_cast<void *>(rdma_buf()), len);
        if (auto r = wait_rdma("RDMA_WRITE_COMPLETE"); !r) return r;
        DEBUG_LOG("server rdma write complete \n");
        if (auto r = post_send_info(nullptr); !r) return r;
        DEBUG_LOG("server posted go ahead\n");
        ++iterations_;
    }
}

rdma::Expected<void> Rping::run_client() {
    int start = 65;
    for (int ping = 0; o_.count == 0 || ping < o_.count; ++ping) {
        fill_ping(start_buf(), o_.size, ping, start);
        RdmaInfo info{reinterpret_cast<uint64_t>(start_buf()), static_cast<uint32_t>(rkey_), o_.size};
        if (auto r = post_send_info(&info); !r) return r;
        if (auto r = wait_recv("the server's go-ahead after its RDMA Read (RDMA_WRITE_ADV)"); !r) return r.error();
        info = RdmaInfo{reinterpret_cast<uint64_t>(rdma_buf()), static_cast<uint32_t>(rkey_), o_.size};
        if (auto r = post_send_info(&info); !r) return r;
        if (auto r = wait_recv("the server's go-ahead after its RDMA Write (RDMA_WRITE_COMPLETE)"); !r) return r.error();
        if (std::memcmp(start_buf(), rdma_buf(), o_.size) != 0) {
            return rdma::Error(EIO, "data mismatch! (iteration " + std::to_string(ping) + ")");
        }
        if (o_.verbose) std::printf("ping data: %s\n", rdma::printable(rdma_buf()).c_str());
        std::memset(rdma_buf(), 0, o_.size);  // the next iteration's match must come from the next write
        ++iterations_;
    }
    return {};
}

void Rping::disconnect() {
    if (ep_ == nullptr) return;
    if (it_ep_disconnect(ep_, nullptr, 0) != IT_SUCCESS) return;
    if (disconnected_) return;
    // Wait briefly for the disconnect to finish so the peer sees an orderly close.
    size_t more = 0;
    it_event_t c{};
    (void)it_evd_wait(cm_, 2000000, &c, &more);
}

void Rping::free_endpoint() {
    if (ep_ != nullptr) (void)it_ep_free(ep_);
    ep_ = nullptr;
    // Completions and connection events of the endpoint just freed must not reach the next one.
    it_event_t ev{};
    while (dto_ != nullptr && it_evd_dequeue(dto_, &ev) == IT_SUCCESS) {
    }
    while (cm_ != nullptr && it_evd_dequeue(cm_, &ev) == IT_SUCCESS) {
    }
}

int fail(const rdma::Error &e) {
    std::fprintf(stderr, "it_rping: %s\n", e.to_string().c_str());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"it_rping: rdma-core's rping over IT-API (same options, messages and exchange)"};
    Options o;
    app.add_flag("-s", o.server, "server side");
    app.add_flag("-c", o.client, "client side");
    app.add_option("-a", o.addr, "address (client: the server's; server: the local RNIC's)");
    app.add_option("-I", o.source, "Source address to bind to for client (the local RNIC's address)");
    app.add_option("-p", o.port, "port (default 7174)");
    app.add_option("-C", o.count, "ping count times (default 0: forever)")->check(CLI::NonNegativeNumber);
    app.add_option("-S", o.size, "ping data size (default 64)")->check(CLI::Range(kMinSize, kMaxSize));
    app.add_flag("-v", o.verbose, "display ping data to stdout");
    app.add_flag("-V", o.validate, "validate ping data (it_rping always compares; -V is accepted for rping's sake)");
    app.add_flag("-d", o.debug, "debug printfs");
    app.add_flag("-P", o.persistent, "persistent server mode allowing multiple connections (one after another)");
    app.add_flag("-q", o.self_qp, "use self-created, self-modified QP (no effect: IT-API manages the QP)");
    app.add_option("-t", o.tos, "type of service (accepted, no effect)");
    app.add_option("--ia", o.ia, "IT-API interface name or address (default: -a/-I, else the first listed)");
    app.add_option("--timeout", o.timeout_s, "Seconds to wait for any one step (default 30)")->check(CLI::Range(1, 3600));
    app.set_version_flag("--version", std::string("it_rping (OpenRDMA) ") + OPENRDMA_VERSION);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help is a success, anything else a usage error
    }
    g_debug = o.debug;
    if (o.server == o.client) {
        std::fprintf(stderr, "it_rping: give exactly one of -s (server) and -c (client)\n%s", app.help().c_str());
        return 2;
    }
    if (o.client && o.addr.empty()) {
        std::fprintf(stderr, "it_rping: the client needs the server's address: -a addr\n");
        return 2;
    }
    std::string ia = o.ia;
    if (ia.empty()) ia = o.server ? o.addr : o.source;

    Rping r(o);
    if (auto e = r.open(ia); !e) return fail(e.error());
    if (o.server) {
        if (auto e = r.listen(); !e) return fail(e.error());
        do {
            if (auto e = r.accept_one(); !e) return fail(e.error());
            auto run = r.run_server();
            r.disconnect();
            r.free_endpoint();
            if (!run) {
                std::fprintf(stderr, "it_rping: rping server failed: %s\n", run.error().to_string().c_str());
                if (!o.persistent) return 1;
            } else {
                DEBUG_LOG("server DISCONNECT EVENT...\n");
            }
        } while (o.persistent);
        return 0;
    }
    if (auto e = r.connect(); !e) return fail(e.error());
    auto run = r.run_client();
    r.disconnect();
    if (!run) {
        std::fprintf(stderr, "it_rping: rping client failed: %s\n", run.error().to_string().c_str());
        return 1;
    }
    return 0;
}
