/** @file itapi_runner.cpp @brief it_perf's IT-API client and server: session setup, the tests, teardown. */
#include "itapi_runner.hpp"

#include "it_api_openrdma.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <unordered_set>

#include "itapi_session.hpp"

namespace it_perf {

using namespace session;
using it_tools::call_error;

namespace {

// While a latency test spins on memory, completions are reaped (and the provider's inline progress driven) once
// every this many + 1 spins; reaping on every spin measured no different.
constexpr uint32_t kReapEvery = 63;

/** @brief Where everything lives in a side's one registered buffer. */
struct Layout {
    uint32_t qps = 1;
    uint64_t max = 0;   // the largest message, rounded up to 64 bytes
    uint64_t slot = 0;  // per data endpoint: source half, then sink half
    size_t control = 0; // control send buffer, then the control receive buffers

    Layout(uint32_t n, uint64_t max_size) : qps(n), max((std::max<uint64_t>(max_size, 64) + 63) & ~uint64_t{63}) {
        slot = 2 * max;
        control = static_cast<size_t>(slot) * qps;
    }
    [[nodiscard]] size_t total() const { return control + (kControlReceives + 1) * kControlSize; }
    [[nodiscard]] uint8_t *src(uint8_t *base, uint32_t q) const { return base + slot * q; }
    [[nodiscard]] uint8_t *sink(uint8_t *base, uint32_t q) const { return base + slot * q + max; }
    [[nodiscard]] uint8_t *control_send(uint8_t *base) const { return base + control; }
    [[nodiscard]] uint8_t *control_receive(uint8_t *base, uint32_t i) const {
        return base + control + (1 + i) * kControlSize;
    }
};

/** @brief The value ib_write_lat-style polling waits for next: 1..255, never the 0 a test starts from. */
inline uint8_t next_seq(uint32_t &seq) {
    seq = seq % 255 + 1;
    return static_cast<uint8_t>(seq);
}

/**
 * @brief The control endpoint: small Sends in both directions, one outstanding Send at a time, receives reposted
 *        as they complete. Receive completions found while reaping a Send are kept for receive().
 */
class Control {
public:
    Control() = default;
    void attach(it_ep_handle_t ep, it_evd_handle_t evd, it_lmr_handle_t lmr, uint8_t *send_buf, const Layout *layout,
                uint8_t *base) {
        ep_ = ep;
        evd_ = evd;
        lmr_ = lmr;
        send_buf_ = send_buf;
        layout_ = layout;
        base_ = base;
    }

    rdma::Expected<void> post_receives() {
        for (uint32_t i = 0; i < kControlReceives; ++i) {
            if (const it_status_t s = post_receive(ep_, lmr_, layout_->control_receive(base_, i), kControlSize,
                                                   cookie(WorkKind::control_receive, i));
                s != IT_SUCCESS) {
                return call_error("it_post_recv", "control endpoint, 64 bytes", s);
            }
        }
        return {};
    }

    rdma::Expected<void> send(const ControlMessage &m) {
        if (auto f = flush(); !f) return f.error();
        m.write(send_buf_);
        if (const it_status_t s = post_send(ep_, lmr_, send_buf_, kControlSize, cookie(WorkKind::control_send, 0));
            s != IT_SUCCESS) {
            return call_error("it_post_send", "control message, 64 bytes", s);
        }
        ++sends_outstanding_;
        return {};
    }

    /** @brief Waits until every Send posted so far has completed. */
    rdma::Expected<void> flush() {
        const auto end = Clock::now() + kConnectTimeout;
        while (sends_outstanding_ > 0) {
            if (auto r = reap(std::chrono::milliseconds(100), true); !r) return r.error();
            if (Clock::now() > end) return rdma::Error(ETIMEDOUT, "control endpoint: a Send did not complete");
        }
        return {};
    }

    /** @brief A received message if one is there (or arrives within @p wait when it is nonzero). */
    rdma::Expected<std::optional<ControlMessage>> poll(std::chrono::milliseconds wait) {
        if (pending_count_ == 0) {
            if (auto r = reap(wait, wait.count() > 0); !r) return r.error();
        }
        if (pending_count_ == 0) return std::optional<ControlMessage>{};
        ControlMessage m = pending_[pending_head_];
        pending_head_ = (pending_head_ + 1) % pending_.size();
        --pending_count_;
        return std::optional<ControlMessage>{m};
    }

    /** @brief The next message, of type @p want; an error for another type or after @p timeout. */
    rdma::Expected<ControlMessage> expect(ControlMessage::Type want, std::chrono::milliseconds timeout,
                                          const char *what) {
        const auto end = Clock::now() + timeout;
        for (;;) {
            auto m = poll(std::chrono::milliseconds(100));
            if (!m) return m.error();
            if (m->has_value()) {
                if ((*m)->type != want) {
                    return rdma::Error(EPROTO, std::string("control endpoint: unexpected message type ") +
                                                   std::to_string(static_cast<uint32_t>((*m)->type)) + " while waiting for " +
                                                   what);
                }
                return **m;
            }
            if (Clock::now() > end) {
                return rdma::Error(ETIMEDOUT, std::string("control endpoint: no ") + what + " within " +
                                                  std::to_string(timeout.count() / 1000) + " s");
            }
        }
    }

private:
    // Takes completions until one arrived (or none within @p wait); Sends are counted, receives decoded and
    // reposted.
    rdma::Expected<void> reap(std::chrono::milliseconds wait, bool block) {
        it_event_t ev{};
        // Blocking is it_evd_dequeue and short sleeps (20 us doubling to 1 ms), not it_evd_wait: the control path
        // is not timed, and a poll now and then is all it needs while the data endpoints are measured.
        it_status_t s = it_evd_dequeue(evd_, &ev);
        if (block) {
            const auto end = Clock::now() + wait;
            auto nap = std::chrono::microseconds(20);
            while (s == IT_ERR_QUEUE_EMPTY && Clock::now() < end) {
                std::this_thread::sleep_for(nap);
                nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::microseconds(1000));
                s = it_evd_dequeue(evd_, &ev);
            }
        }
        if (s == IT_ERR_QUEUE_EMPTY) return {};
        if (s != IT_SUCCESS) return call_error("it_evd_dequeue", "control SEVD", s);
        const it_dto_cmpl_event_t &c = ev.dto_cmpl;
        if (c.dto_status != IT_DTO_SUCCESS) return completion_error(ev, "control endpoint");
        if (cookie_kind(c.cookie) == WorkKind::control_send) {
            --sends_outstanding_;
            return {};
        }
        if (cookie_kind(c.cookie) != WorkKind::control_receive) {
            return rdma::Error(EPROTO, "control endpoint: completion with a foreign cookie");
        }
        const uint32_t i = cookie_qp(c.cookie);
        uint8_t *buf = layout_->control_receive(base_, i);
        auto m = ControlMessage::read(buf, c.transferred_length);
        if (!m) return m.error();
        if (const it_status_t r = post_receive(ep_, lmr_, buf, kControlSize, cookie(WorkKind::control_receive, i));
            r != IT_SUCCESS) {
            return call_error("it_post_recv", "control endpoint, 64 bytes", r);
        }
        if (pending_count_ == pending_.size()) return rdma::Error(EOVERFLOW, "control endpoint: too many messages");
        pending_[(pending_head_ + pending_count_) % pending_.size()] = *m;
        ++pending_count_;
        return {};
    }

    it_ep_handle_t ep_ = nullptr;
    it_evd_handle_t evd_ = nullptr;
    it_lmr_handle_t lmr_ = nullptr;
    uint8_t *send_buf_ = nullptr;
    const Layout *layout_ = nullptr;
    uint8_t *base_ = nullptr;
    uint32_t sends_outstanding_ = 0;
    std::array<ControlMessage, kControlReceives> pending_{};
    size_t pending_head_ = 0;
    size_t pending_count_ = 0;
};

it_conn_qual_t iana_port(uint16_t port) {
    it_conn_qual_t q{};
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(port);
    return q;
}

// The path from @p itf's spigot 0 to @p host (it_get_pathinfo).
rdma::Expected<it_path_t> path_to(Interface &itf, const std::string &host) {
    auto addr = resolve_ipv4(host);
    if (!addr) return addr.error();
    it_net_addr_t na{};
    na.addr_type = IT_IPV4;
    na.addr.ipv4 = *addr;
    it_path_t path{};
    size_t num_paths = 1, total_paths = 0;
    if (const it_status_t s = it_get_pathinfo(itf.ia(), 0, &na, &num_paths, &total_paths, &path);
        s != IT_SUCCESS || num_paths == 0) {
        return call_error("it_get_pathinfo", "spigot 0, " + host, s == IT_SUCCESS ? IT_ERR_INVALID_NETADDR : s);
    }
    return path;
}

// Receives each data endpoint keeps posted, and how many each credit message returns (Send bandwidth).
uint32_t server_receive_depth(uint32_t window) { return std::max<uint32_t>(window, 16); }
uint32_t credit_batch(uint32_t depth) { return std::max<uint32_t>(1, depth / 4); }
uint32_t client_receive_depth(uint32_t depth, uint32_t batch) { return depth / batch + 8; }

}  // namespace

std::vector<std::string> itapi_interfaces() {
    it_interface_t list[64];
    size_t count = 64, total = 0;
    it_interface_list(list, &count, &total);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) names.emplace_back(list[i].name);
    return names;
}

// =================================================================================================================
// Client

struct ItapiClient::Impl {
    ItapiClientConfig config;
    Layout layout{1, 64};
    Buffer buf;                      // declared before itf: the region is deregistered before it is freed
    std::unique_ptr<Interface> itf;
    it_rmr_context_t rmr = 0;
    it_lmr_handle_t lmr = nullptr;
    it_evd_handle_t cm = nullptr, control_evd = nullptr, dto = nullptr;
    it_ep_handle_t control_ep = nullptr;
    std::vector<it_ep_handle_t> eps;
    std::vector<AcceptData> remote;
    Control control;
    uint32_t client_depth = 0;
    // Per data endpoint, preallocated so that the tests' loops allocate nothing.
    std::vector<uint32_t> outstanding, credits, seq;
    std::vector<uint64_t> samples;
    uint64_t credit_msgs_seen = 0;  // credit messages reaped during the last Send bandwidth test
    bool closed = false;

    rdma::Expected<void> connect(const std::string &host, uint16_t port);
    rdma::Expected<void> connect_one(it_ep_handle_t ep, const it_path_t &path, uint16_t port, const ConnectData &cd,
                                     AcceptData *accepted);
    rdma::Expected<void> bandwidth(const TestCase &t, Measurement &m, uint64_t &sends);
    rdma::Expected<void> latency(const TestCase &t, Measurement &m, uint64_t &sends);
    rdma::Expected<void> drain_credits(uint64_t expected);
    rdma::Expected<void> handle_data_event(const it_event_t &ev, uint64_t &completed, uint64_t &receives,
                                           uint32_t &fences);
    rdma::Expected<void> post_op(Op op, uint32_t q, uint64_t size, WorkKind kind);
};

rdma::Expected<void> ItapiClient::Impl::post_op(Op op, uint32_t q, uint64_t size, WorkKind kind) {
    it_lmr_triplet_t t{};
    t.lmr = lmr;
    t.length = size;
    const AcceptData &r = remote[q];
    it_status_t s = IT_SUCCESS;
    switch (op) {
        case Op::send:
            t.addr.abs = layout.src(buf.data(), q);
            s = it_post_send(eps[q], &t, 1, cookie(kind, q), IT_COMPLETION_FLAG);
            break;
        case Op::write:
            t.addr.abs = layout.src(buf.data(), q);
            s = it_post_rdma_write(eps[q], &t, 1, cookie(kind, q), IT_COMPLETION_FLAG, r.address + r.length / 2,
                                   r.rmr_context);
            break;
        case Op::read:
            t.addr.abs = layout.sink(buf.data(), q);
            s = it_post_rdma_read(eps[q], &t, 1, cookie(kind, q), IT_COMPLETION_FLAG, r.address, r.rmr_context);
            break;
    }
    if (s == IT_SUCCESS) return {};
    static const char *const calls[] = {"", "it_post_send", "it_post_rdma_write", "it_post_rdma_read"};
    return call_error(calls[static_cast<int>(op)], "data endpoint " + std::to_string(q) + ", " + std::to_string(size) + " bytes", s);
}

rdma::Expected<void> ItapiClient::Impl::connect_one(it_ep_handle_t ep, const it_path_t &path, uint16_t port,
                                                    const ConnectData &cd, AcceptData *accepted) {
    uint8_t pd[ConnectData::kWireSize];
    cd.write(pd);
    const it_conn_qual_t q = iana_port(port);
    if (const it_status_t s = it_ep_connect(ep, &path, nullptr, &q, IT_CONNECT_FLAG_TWO_WAY, pd, sizeof pd);
        s != IT_SUCCESS) {
        return call_error("it_ep_connect", "port " + std::to_string(port) + ", 32 bytes of private data", s);
    }
    for (;;) {
        auto ev = wait_event(cm, std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout),
                             "IT_CM_MSG_CONN_ESTABLISHED_EVENT");
        if (!ev) return ev.error();
        const it_connection_event_t &c = ev->conn;
        if (c.ep != ep) continue;  // cannot happen: endpoints connect one at a time
        if (ev->event_number == IT_CM_MSG_CONN_ESTABLISHED_EVENT) {
            if (accepted == nullptr) return {};
            if (c.private_data_present != IT_TRUE) {
                return rdma::Error(EPROTO, "IT_CM_MSG_CONN_ESTABLISHED_EVENT carried no private data: the server "
                                           "did not say where its buffer is (is it an it_perf server?)");
            }
            auto a = AcceptData::read(c.private_data, IT_MAX_PRIV_DATA);
            if (!a) return a.error();
            *accepted = *a;
            return {};
        }
        std::string why = it_tools::event_name(ev->event_number);
        if (ev->event_number == IT_CM_MSG_CONN_PEER_REJECT_EVENT ||
            ev->event_number == IT_CM_MSG_CONN_NONPEER_REJECT_EVENT) {
            why += " (reason " + std::to_string(static_cast<int>(c.reject_reason_code)) + ")";
        }
        return rdma::Error(ECONNREFUSED, "it_ep_connect to port " + std::to_string(port) + ": " + why +
                                             " (is an it_perf server listening there?)");
    }
}

rdma::Expected<void> ItapiClient::Impl::connect(const std::string &host, uint16_t port) {
    auto i = Interface::open(config.ia);
    if (!i) return i.error();
    itf = std::move(*i);
    const uint32_t n = config.qps;
    layout = Layout(n, config.max_size);
    buf = Buffer::allocate(layout.total());
    if (buf.data() == nullptr) {
        return rdma::Error(ENOMEM, "cannot allocate " + std::to_string(layout.total()) + " bytes of buffers");
    }
    auto reg = itf->register_memory(buf);
    if (!reg) return reg.error();
    lmr = reg->first;
    rmr = reg->second;
    // Every data endpoint can have its window of requests, a fence and its receives completing at once.
    const uint32_t server_depth = server_receive_depth(config.window);
    client_depth = client_receive_depth(server_depth, credit_batch(server_depth));
    auto c = itf->create_evd(IT_CM_MSG_EVENT_STREAM, 4 * (n + 1) + 16);
    auto ce = itf->create_evd(IT_DTO_EVENT_STREAM, 2 * kControlReceives + 8);
    auto d = itf->create_evd(IT_DTO_EVENT_STREAM, static_cast<size_t>(n) * (config.window + client_depth + 8) + 64);
    if (!c) return c.error();
    if (!ce) return ce.error();
    if (!d) return d.error();
    cm = *c;
    control_evd = *ce;
    dto = *d;

    auto path_found = path_to(*itf, host);
    if (!path_found) return path_found.error();
    const it_path_t path = *path_found;

    auto ctl = itf->create_ep(control_evd, cm, 4, kControlReceives, kControlSize);
    if (!ctl) return ctl.error();
    control_ep = *ctl;
    control.attach(control_ep, control_evd, lmr, layout.control_send(buf.data()), &layout, buf.data());
    if (auto r = control.post_receives(); !r) return r.error();
    ConnectData cd;
    cd.role = ConnectData::Role::control;
    cd.qps = n;
    cd.window = config.window;
    cd.max_size = layout.max;
    if (auto r = connect_one(control_ep, path, port, cd, nullptr); !r) return r.error();

    remote.resize(n);
    for (uint32_t q = 0; q < n; ++q) {
        auto ep = itf->create_ep(dto, cm, config.window + 8, client_depth, layout.max);
        if (!ep) return ep.error();
        eps.push_back(*ep);
        for (uint32_t k = 0; k < client_depth; ++k) {
            if (const it_status_t s = post_receive(*ep, lmr, layout.sink(buf.data(), q), layout.max,
                                                   cookie(WorkKind::receive, q));
                s != IT_SUCCESS) {
                return call_error("it_post_recv", "data endpoint " + std::to_string(q), s);
            }
        }
        ConnectData dd;
        dd.role = ConnectData::Role::data;
        dd.index = q;
        dd.address = reinterpret_cast<uint64_t>(layout.src(buf.data(), q));
        dd.length = layout.slot;
        dd.rmr_context = rmr;
        if (auto r = connect_one(*ep, path, port, dd, &remote[q]); !r) return r.error();
        if (remote[q].length < 2 * layout.max) {
            return rdma::Error(EPROTO, "the server's buffer for data endpoint " + std::to_string(q) + " has " +
                                           std::to_string(remote[q].length) + " bytes, too few");
        }
    }
    outstanding.assign(n, 0);
    credits.assign(n, 0);
    seq.assign(n, 0);
    return {};
}

// A completion on a data endpoint: an operation, a receive (a credit message in Send bandwidth, an echo in Send
// latency; it is reposted at once) or a fence.
rdma::Expected<void> ItapiClient::Impl::handle_data_event(const it_event_t &ev, uint64_t &completed,
                                                          uint64_t &receives, uint32_t &fences) {
    const it_dto_cmpl_event_t &c = ev.dto_cmpl;
    if (c.dto_status != IT_DTO_SUCCESS) return completion_error(ev, "data endpoint");
    const uint32_t q = cookie_qp(c.cookie);
    if (q >= eps.size()) return rdma::Error(EPROTO, "a completion with a foreign cookie");
    switch (cookie_kind(c.cookie)) {
        case WorkKind::op:
            --outstanding[q];
            ++completed;
            break;
        case WorkKind::receive: {
            ++receives;
            credits[q] += remote[q].credit_batch;
            if (const it_status_t s = post_receive(eps[q], lmr, layout.sink(buf.data(), q), layout.max,
                                                   cookie(WorkKind::receive, q));
                s != IT_SUCCESS) {
                return call_error("it_post_recv", "data endpoint " + std::to_string(q), s);
            }
            break;
        }
        case WorkKind::fence: ++fences; break;
        default: return rdma::Error(EPROTO, "a completion with a foreign cookie");
    }
    return {};
}

rdma::Expected<void> ItapiClient::Impl::bandwidth(const TestCase &t, Measurement &m, uint64_t &sends) {
    const uint32_t n = config.qps;
    // A Read needs the peer's IRD: more outstanding than that would only queue in the RNIC.
    const uint32_t window = t.op == Op::read ? std::min(config.window, kReadDepth) : config.window;
    for (uint32_t q = 0; q < n; ++q) {
        outstanding[q] = 0;
        credits[q] = remote[q].receive_depth;
    }
    uint64_t target = t.budget.seconds > 0 ? UINT64_MAX : t.budget.iterations;
    uint64_t posted = 0, completed = 0, credit_msgs = 0;
    uint32_t fences = 0, rr = 0;
    it_event_t ev;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t.budget.seconds));
    auto idle_since = t0;
    uint64_t spins = 0;
    while (completed < target) {
        bool posted_some = false;
        for (uint32_t k = 0; k < n && posted < target; ++k) {
            const uint32_t q = rr;
            rr = rr + 1 == n ? 0 : rr + 1;
            while (outstanding[q] < window && posted < target && (t.op != Op::send || credits[q] > 0)) {
                if (auto r = post_op(t.op, q, t.size, WorkKind::op); !r) return r;
                ++outstanding[q];
                ++posted;
                if (t.op == Op::send) --credits[q];
                posted_some = true;
            }
        }
        bool wait = config.event_mode && !posted_some;
        bool progressed = false;
        for (;;) {
            const it_status_t s = next_event(dto, wait, ev);
            wait = false;
            if (s == IT_ERR_QUEUE_EMPTY) break;
            if (s != IT_SUCCESS) return call_error(config.event_mode ? "it_evd_wait" : "it_evd_dequeue", "data SEVD", s);
            if (auto r = handle_data_event(ev, completed, credit_msgs, fences); !r) return r;
            progressed = true;
        }
        if (t.budget.seconds > 0 && target == UINT64_MAX && Clock::now() >= end) target = posted;
        // A stall fails the test instead of hanging it: the clock is read only after a long idle stretch.
        if (progressed || posted_some) {
            spins = 0;
        } else if ((++spins & 0xfff) == 0) {
            const auto now = Clock::now();
            if (spins == 0x1000) idle_since = now;
            if (now - idle_since > kStallTimeout) {
                return rdma::Error(ETIMEDOUT, "no completion for 30 s with " + std::to_string(posted - completed) +
                                                  " operations outstanding");
            }
        }
    }
    // Everything sent has been placed at the peer once a Read posted after it on each endpoint returns.
    if (t.op != Op::read) {
        it_lmr_triplet_t tr{};
        tr.lmr = lmr;
        tr.length = 1;
        for (uint32_t q = 0; q < n; ++q) {
            tr.addr.abs = layout.sink(buf.data(), q);
            if (const it_status_t s = it_post_rdma_read(eps[q], &tr, 1, cookie(WorkKind::fence, q), IT_COMPLETION_FLAG,
                                                        remote[q].address, remote[q].rmr_context);
                s != IT_SUCCESS) {
                return call_error("it_post_rdma_read", "1-byte fence on data endpoint " + std::to_string(q), s);
            }
        }
        const auto give_up = Clock::now() + kStallTimeout;
        while (fences < n) {
            const it_status_t s = next_event(dto, config.event_mode, ev);
            if (s == IT_ERR_QUEUE_EMPTY) {
                if (Clock::now() > give_up) return rdma::Error(ETIMEDOUT, "the closing RDMA Reads did not complete");
                continue;
            }
            if (s != IT_SUCCESS) return call_error("it_evd_dequeue", "data SEVD", s);
            if (auto r = handle_data_event(ev, completed, credit_msgs, fences); !r) return r;
        }
    }
    const auto t1 = Clock::now();
    m.iterations = completed;
    m.bytes = completed * t.size;
    m.seconds = std::chrono::duration<double>(t1 - t0).count();
    m.valid = true;
    sends = t.op == Op::send ? completed : 0;
    credit_msgs_seen = credit_msgs;  // drain_credits() waits for the rest
    return {};
}

rdma::Expected<void> ItapiClient::Impl::latency(const TestCase &t, Measurement &m, uint64_t &sends) {
    const uint32_t n = config.qps;
    const size_t last = t.size - 1;
    for (uint32_t q = 0; q < n; ++q) {
        seq[q] = 0;
        outstanding[q] = 0;
    }
    samples.clear();
    samples.reserve(t.budget.seconds > 0 ? size_t{1} << 20 : t.budget.iterations);
    uint64_t completed = 0, receives = 0;
    uint32_t fences = 0;
    it_event_t ev;
    // Takes one event if there is one (or waits a little in event mode). One, not all: the loops below call again
    // until what they wait for has come, and then post at once, as ib_read_lat and the TCP side do. Taking events
    // until the queue says empty put one more poll (an empty one, with its read of the socket) between the awaited
    // completion and the next post: about a microsecond of every Read and Send round trip.
    auto reap = [&](bool wait) -> rdma::Expected<void> {
        const it_status_t s = next_event(dto, wait, ev);
        if (s == IT_ERR_QUEUE_EMPTY) return {};
        if (s != IT_SUCCESS) return call_error(config.event_mode ? "it_evd_wait" : "it_evd_dequeue", "data SEVD", s);
        return handle_data_event(ev, completed, receives, fences);
    };
    const uint64_t total = kWarmupIterations + t.budget.iterations;
    Clock::time_point end{};
    uint32_t q = 0;
    for (uint64_t i = 0;; ++i) {
        if (t.budget.seconds > 0) {
            if (i == kWarmupIterations) {
                end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t.budget.seconds));
            }
            if (i > kWarmupIterations && Clock::now() >= end) break;
        } else if (i >= total) {
            break;
        }
        // The send queue never fills: completions of earlier iterations are taken first.
        while (outstanding[q] >= config.window) {
            if (auto r = reap(config.event_mode); !r) return r;
        }
        const auto t0 = Clock::now();
        const auto give_up = t0 + kStallTimeout;
        uint32_t spins = 0;
        switch (t.op) {
            case Op::write: {
                // ib_write_lat: the peer's answer is seen in memory, its last byte turning to this round's value.
                const uint8_t v = next_seq(seq[q]);
                layout.src(buf.data(), q)[last] = v;
                if (auto r = post_op(Op::write, q, t.size, WorkKind::op); !r) return r;
                ++outstanding[q];
                const volatile uint8_t *answer = layout.sink(buf.data(), q) + last;
                while (*answer != v) {
                    if ((++spins & kReapEvery) == 0) {
                        if (auto r = reap(false); !r) return r;
                        if ((spins & 0xfffff) == 0 && Clock::now() > give_up) {
                            return rdma::Error(ETIMEDOUT, "write latency: no answer from the server for 30 s");
                        }
                    }
                }
                break;
            }
            case Op::send: {
                const uint64_t before = receives;
                if (auto r = post_op(Op::send, q, t.size, WorkKind::op); !r) return r;
                ++outstanding[q];
                while (receives == before) {
                    if (auto r = reap(config.event_mode); !r) return r;
                    if ((++spins & 0xffff) == 0 && Clock::now() > give_up) {
                        return rdma::Error(ETIMEDOUT, "send latency: no echo from the server for 30 s");
                    }
                }
                break;
            }
            case Op::read: {
                const uint64_t before = completed;
                if (auto r = post_op(Op::read, q, t.size, WorkKind::op); !r) return r;
                ++outstanding[q];
                while (completed == before) {
                    if (auto r = reap(config.event_mode); !r) return r;
                    if ((++spins & 0xffff) == 0 && Clock::now() > give_up) {
                        return rdma::Error(ETIMEDOUT, "read latency: the RDMA Read did not complete in 30 s");
                    }
                }
                break;
            }
        }
        const auto t1 = Clock::now();
        if (i >= kWarmupIterations) {
            samples.push_back(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        }
        q = q + 1 == n ? 0 : q + 1;
    }
    // Completions of the last operations (Write and Send latency do not wait for their own).
    const auto give_up = Clock::now() + kStallTimeout;
    for (uint32_t k = 0; k < n; ++k) {
        while (outstanding[k] > 0) {
            if (auto r = reap(config.event_mode); !r) return r;
            if (Clock::now() > give_up) return rdma::Error(ETIMEDOUT, "latency test: operations never completed");
        }
    }
    sends = t.op == Op::send ? kWarmupIterations + samples.size() : 0;
    m.iterations = samples.size();
    m.latency = summarize_latency(samples, latency_divisor(t.op));
    m.valid = true;
    return {};
}

rdma::Expected<void> ItapiClient::Impl::drain_credits(uint64_t expected) {
    uint64_t completed = 0;
    uint32_t fences = 0;
    it_event_t ev;
    const auto give_up = Clock::now() + kStallTimeout;
    while (credit_msgs_seen < expected) {
        const it_status_t s = next_event(dto, config.event_mode, ev);
        if (s == IT_ERR_QUEUE_EMPTY) {
            if (Clock::now() > give_up) {
                return rdma::Error(ETIMEDOUT, "send bandwidth: " + std::to_string(expected - credit_msgs_seen) +
                                                  " credit messages never arrived");
            }
            continue;
        }
        if (s != IT_SUCCESS) return call_error("it_evd_dequeue", "data SEVD", s);
        if (auto r = handle_data_event(ev, completed, credit_msgs_seen, fences); !r) return r;
    }
    return {};
}

namespace {

// Adds what each process of @p counted did since @p before (read then) to @p into.
void add_costs(const std::vector<const ProcessCounters *> &counted, const std::vector<ProcessReading> &before,
               std::vector<ProcessCosts> &into) {
    into.resize(counted.size());
    for (size_t i = 0; i < counted.size() && i < before.size(); ++i) {
        const ProcessReading now = counted[i]->read();
        if (now.syscalls && before[i].syscalls) {
            into[i].syscalls = into[i].syscalls.value_or(0) + (*now.syscalls - *before[i].syscalls);
        }
        into[i].switches += now.switches - std::min(now.switches, before[i].switches);
    }
}

std::vector<ProcessReading> read_all(const std::vector<const ProcessCounters *> &counted) {
    std::vector<ProcessReading> r;
    r.reserve(counted.size());
    for (const ProcessCounters *c : counted) r.push_back(c->read());
    return r;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

rdma::Expected<double> run_itapi_setup(const std::string &ia, const std::string &host, uint16_t port,
                                       uint32_t in_flight, uint64_t count, SetupSteps *steps,
                                       const std::vector<const ProcessCounters *> &counted) {
    if (in_flight == 0 || count == 0) return rdma::Error(EINVAL, "the setup test needs endpoints to connect");
    SetupSteps scratch;
    SetupSteps &st = steps != nullptr ? *steps : scratch;
    st = SetupSteps{};
    auto i = Interface::open(ia);
    if (!i) return i.error();
    Interface &itf = **i;
    auto cm = itf.create_evd(IT_CM_MSG_EVENT_STREAM, 4 * static_cast<size_t>(in_flight) + 64);
    if (!cm) return cm.error();
    auto dto = itf.create_evd(IT_DTO_EVENT_STREAM, 64);
    if (!dto) return dto.error();
    auto path = path_to(itf, host);
    if (!path) return path.error();
    ConnectData cd;
    cd.role = ConnectData::Role::probe;
    uint8_t pd[ConnectData::kWireSize];
    cd.write(pd);
    const it_conn_qual_t q = iana_port(port);
    double timed = 0;
    uint64_t done = 0;
    std::vector<it_ep_handle_t> eps;
    std::vector<std::pair<it_ep_handle_t, Clock::time_point>> connect_at;  // when each endpoint's connect was posted
    // Disconnects a batch and waits (untimed, bounded) until every end is gone, so the next batch starts on an
    // idle host and the server has freed its endpoints.
    auto tear_down = [&]() -> rdma::Expected<void> {
        size_t pending = 0;
        const auto t_disconnect = Clock::now();
        for (it_ep_handle_t ep : eps) {
            if (it_ep_disconnect(ep, nullptr, 0) == IT_SUCCESS) ++pending;
        }
        const auto give_up = Clock::now() + kConnectTimeout;
        while (pending > 0 && Clock::now() < give_up) {
            auto ev = wait_event(*cm, std::chrono::milliseconds(200), "a probe's disconnect");
            if (ev && (ev->event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT ||
                       ev->event_number == IT_CM_MSG_CONN_BROKEN_EVENT)) {
                --pending;
            }
        }
        st.disconnect += seconds_since(t_disconnect);
        const auto t_destroy = Clock::now();
        for (it_ep_handle_t ep : eps) itf.free_ep(ep);
        st.destroy += seconds_since(t_destroy);
        eps.clear();
        if (pending > 0) return rdma::Error(ETIMEDOUT, "setup test: probes still connected 15 s after it_ep_disconnect");
        return {};
    };
    while (done < count) {
        const auto batch = static_cast<uint32_t>(std::min<uint64_t>(in_flight, count - done));
        const std::vector<ProcessReading> life_before = read_all(counted);
        const auto t_create = Clock::now();
        for (uint32_t k = 0; k < batch; ++k) {
            auto ep = itf.create_ep(*dto, *cm, 1, 1, kControlSize);
            if (!ep) {
                (void)tear_down();
                return ep.error();
            }
            eps.push_back(*ep);
        }
        st.create += seconds_since(t_create);
        const std::vector<ProcessReading> setup_before = read_all(counted);
        const auto t0 = Clock::now();
        connect_at.clear();
        for (it_ep_handle_t ep : eps) {
            const auto t_connect = Clock::now();
            if (const it_status_t s = it_ep_connect(ep, &*path, nullptr, &q, IT_CONNECT_FLAG_TWO_WAY, pd, sizeof pd);
                s != IT_SUCCESS) {
                (void)tear_down();
                return call_error("it_ep_connect", "setup probe to port " + std::to_string(port), s);
            }
            connect_at.emplace_back(ep, t_connect);
        }
        st.connect += seconds_since(t0);
        for (uint32_t up = 0; up < batch;) {
            auto ev = wait_event(*cm, std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout),
                                 "IT_CM_MSG_CONN_ESTABLISHED_EVENT of a setup probe");
            if (!ev) {
                (void)tear_down();
                return ev.error();
            }
            if (ev->event_number != IT_CM_MSG_CONN_ESTABLISHED_EVENT) {
                (void)tear_down();
                return rdma::Error(ECONNREFUSED, "setup probe: " + it_tools::event_name(ev->event_number) +
                                                     " (is an it_perf server listening on port " +
                                                     std::to_string(port) + "?)");
            }
            const auto at = std::find_if(connect_at.begin(), connect_at.end(),
                                         [&](const auto &c) { return c.first == ev->conn.ep; });
            if (at != connect_at.end()) st.established += seconds_since(at->second);
            ++up;
        }
        timed += seconds_since(t0);
        add_costs(counted, setup_before, st.setup);
        done += batch;
        if (auto t = tear_down(); !t) return t.error();
        add_costs(counted, life_before, st.life);
    }
    st.connections = done;
    st.timed = timed;
    return static_cast<double>(done) / timed;
}

ItapiClient::ItapiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ItapiClient::~ItapiClient() {
    if (impl_ && !impl_->closed && impl_->itf) (void)close();
}

rdma::Expected<std::unique_ptr<ItapiClient>> ItapiClient::connect(const ItapiClientConfig &config,
                                                                   const std::string &host, uint16_t port) {
    auto impl = std::make_unique<Impl>();
    impl->config = config;
    if (auto r = impl->connect(host, port); !r) {
        impl->closed = true;  // nothing to say goodbye on
        return r.error();
    }
    return std::unique_ptr<ItapiClient>(new ItapiClient(std::move(impl)));
}

std::string ItapiClient::ia_name() const { return impl_->itf ? impl_->itf->name() : std::string(); }

std::string ItapiClient::path() const {
    return impl_->eps.empty() ? std::string() : std::string(openrdma_it_ep_path(impl_->eps.front()));
}

rdma::Expected<Measurement> ItapiClient::run(const TestCase &t) {
    auto m = run_test(t);
    if (m || impl_->closed) return m;
    // A run cut short by the RNIC going away says so, not only which completion or message failed.
    const std::string offline = impl_->itf->offline_reason();
    if (offline.empty()) return m;
    return rdma::Error(m.error().code(), offline + ": " + m.error().message());
}

rdma::Expected<Measurement> ItapiClient::run_test(const TestCase &t) {
    Impl &s = *impl_;
    if (s.closed) return rdma::Error(ENOTCONN, "the IT-API session is closed");
    if (t.size == 0 || t.size > s.layout.max || t.qps != s.config.qps || t.window != s.config.window) {
        return rdma::Error(EINVAL, "test " + t.label() + " does not fit the session (largest message " +
                                       std::to_string(s.layout.max) + ", " + std::to_string(s.config.qps) + " QPs)");
    }
    for (uint32_t q = 0; q < s.config.qps; ++q) {
        s.layout.sink(s.buf.data(), q)[t.size - 1] = 0;
        s.layout.src(s.buf.data(), q)[t.size - 1] = 0;
    }
    ControlMessage req;
    req.type = ControlMessage::Type::request;
    req.op = t.op;
    req.kind = t.kind;
    req.size = t.size;
    if (auto r = s.control.send(req); !r) return r.error();
    auto ready = s.control.expect(ControlMessage::Type::ready, kConnectTimeout, "the server's ready");
    if (!ready) return ready.error();
    Measurement m;
    uint64_t sends = 0;
    s.credit_msgs_seen = 0;
    auto r = t.kind == Kind::bw ? s.bandwidth(t, m, sends) : s.latency(t, m, sends);
    if (!r) return r.error();
    ControlMessage end;
    end.type = ControlMessage::Type::end;
    end.op = t.op;
    end.kind = t.kind;
    end.count = sends;
    if (auto e = s.control.send(end); !e) return e.error();
    auto ack = s.control.expect(ControlMessage::Type::end_ack, kStallTimeout, "the server's end of test");
    if (!ack) return ack.error();
    if (t.op == Op::send && t.kind == Kind::bw) {
        if (auto d = s.drain_credits(ack->count); !d) return d.error();
    }
    return m;
}

rdma::Expected<void> ItapiClient::close() {
    Impl &s = *impl_;
    if (s.closed) return {};
    s.closed = true;
    ControlMessage bye;
    bye.type = ControlMessage::Type::bye;
    auto sent = s.control.send(bye);
    if (sent) sent = s.control.flush();
    // Orderly teardown: every endpoint disconnects and its disconnect event arrives (or the wait gives up).
    std::vector<it_ep_handle_t> all = s.eps;
    all.push_back(s.control_ep);
    size_t pending = 0;
    for (it_ep_handle_t ep : all) {
        if (ep != nullptr && it_ep_disconnect(ep, nullptr, 0) == IT_SUCCESS) ++pending;
    }
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (pending > 0 && Clock::now() < give_up) {
        auto ev = wait_event(s.cm, std::chrono::milliseconds(500), "IT_CM_MSG_CONN_DISCONNECT_EVENT");
        if (!ev) continue;
        if (ev->event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT || ev->event_number == IT_CM_MSG_CONN_BROKEN_EVENT) {
            --pending;
        }
    }
    if (!sent) return sent.error();
    if (pending > 0) {
        return rdma::Error(ETIMEDOUT, std::to_string(pending) + " endpoints got no IT_CM_MSG_CONN_DISCONNECT_EVENT "
                                                               "within 5 s of it_ep_disconnect");
    }
    return {};
}

// =================================================================================================================
// Server

namespace {

/** @brief One client session on the server: its buffers, endpoints and event dispatchers. */
class ServerSession {
public:
    ServerSession(Interface &itf, it_evd_handle_t req, it_evd_handle_t cm, bool event_mode)
        : itf_(itf), req_(req), cm_(cm), event_mode_(event_mode) {}
    ~ServerSession() {
        // Endpoints, the region and the dispatchers go before the buffer they point into.
        for (it_ep_handle_t ep : eps_) itf_.free_ep(ep);
        if (control_ep_ != nullptr) itf_.free_ep(control_ep_);
        if (lmr_ != nullptr) itf_.free_lmr(lmr_);
        if (dto_ != nullptr) itf_.free_evd(dto_);
        if (control_evd_ != nullptr) itf_.free_evd(control_evd_);
    }
    ServerSession(const ServerSession &) = delete;
    ServerSession &operator=(const ServerSession &) = delete;

    /** @brief Accepts the control endpoint of @p request and then the data endpoints it announced. */
    rdma::Expected<void> establish(const it_conn_request_event_t &request, const ConnectData &cd);
    /** @brief Serves tests until the client says bye (or @p stop is set, or the session breaks). */
    rdma::Expected<void> run(const std::atomic<bool> &stop);

private:
    rdma::Expected<void> wait_established(it_ep_handle_t ep);
    rdma::Expected<ControlMessage> wait_control(const std::atomic<bool> &stop);
    rdma::Expected<void> serve_test(const ControlMessage &req, const std::atomic<bool> &stop);
    rdma::Expected<void> check_connections();
    rdma::Expected<void> post_send_back(uint32_t q, Op op, uint64_t size, WorkKind kind);

    Interface &itf_;
    it_evd_handle_t req_, cm_;
    bool event_mode_;
    uint32_t window_ = 64;
    uint32_t depth_ = 16;
    uint32_t batch_ = 4;
    Layout layout_{1, 64};
    Buffer buf_;
    it_lmr_handle_t lmr_ = nullptr;
    it_rmr_context_t rmr_ = 0;
    it_evd_handle_t control_evd_ = nullptr, dto_ = nullptr;
    it_ep_handle_t control_ep_ = nullptr;
    std::vector<it_ep_handle_t> eps_;
    std::vector<ConnectData> peer_;  // the client's region per data endpoint
    Control control_;
    std::vector<uint32_t> seq_, since_credit_, outstanding_;
    size_t disconnects_seen_ = 0;  // by check_connections(), before the bye that preceded them was read
};

rdma::Expected<void> ServerSession::wait_established(it_ep_handle_t ep) {
    for (;;) {
        auto ev = wait_event(cm_, std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout),
                             "IT_CM_MSG_CONN_ESTABLISHED_EVENT");
        if (!ev) return ev.error();
        if (ev->conn.ep != ep) continue;
        if (ev->event_number == IT_CM_MSG_CONN_ESTABLISHED_EVENT) return {};
        return rdma::Error(ECONNRESET, "it_ep_accept: the connection ended with " + it_tools::event_name(ev->event_number));
    }
}

rdma::Expected<void> ServerSession::establish(const it_conn_request_event_t &request, const ConnectData &cd) {
    if (cd.qps == 0 || cd.qps > 1024 || cd.window == 0 || cd.window > 4096 || cd.max_size == 0 ||
        cd.max_size > (uint64_t{1} << 30)) {
        (void)it_reject(request.cn_est_id, nullptr, 0);
        return rdma::Error(EINVAL, "refused a session of " + std::to_string(cd.qps) + " QPs, window " +
                                       std::to_string(cd.window) + ", largest message " + std::to_string(cd.max_size));
    }
    const uint32_t n = cd.qps;
    window_ = cd.window;
    depth_ = server_receive_depth(window_);
    batch_ = credit_batch(depth_);
    layout_ = Layout(n, cd.max_size);
    buf_ = Buffer::allocate(layout_.total());
    if (buf_.data() == nullptr) {
        (void)it_reject(request.cn_est_id, nullptr, 0);
        return rdma::Error(ENOMEM, "cannot allocate " + std::to_string(layout_.total()) + " bytes of buffers");
    }
    auto reject_on = [&](rdma::Error e) {
        (void)it_reject(request.cn_est_id, nullptr, 0);
        return e;
    };
    auto reg = itf_.register_memory(buf_);
    if (!reg) return reject_on(reg.error());
    lmr_ = reg->first;
    rmr_ = reg->second;
    auto ce = itf_.create_evd(IT_DTO_EVENT_STREAM, 2 * kControlReceives + 8);
    if (!ce) return reject_on(ce.error());
    control_evd_ = *ce;
    auto d = itf_.create_evd(IT_DTO_EVENT_STREAM, static_cast<size_t>(n) * (2 * depth_ + window_ + 16) + 64);
    if (!d) return reject_on(d.error());
    dto_ = *d;
    auto ctl = itf_.create_ep(control_evd_, cm_, 4, kControlReceives, kControlSize);
    if (!ctl) return reject_on(ctl.error());
    control_ep_ = *ctl;
    control_.attach(control_ep_, control_evd_, lmr_, layout_.control_send(buf_.data()), &layout_, buf_.data());
    if (auto r = control_.post_receives(); !r) return reject_on(r.error());
    if (const it_status_t s = it_ep_accept(control_ep_, request.cn_est_id, nullptr, 0); s != IT_SUCCESS) {
        return call_error("it_ep_accept", "control endpoint", s);
    }
    if (auto r = wait_established(control_ep_); !r) return r;

    peer_.resize(n);
    for (uint32_t q = 0; q < n; ++q) {
        auto ev = wait_event(req_, std::chrono::duration_cast<std::chrono::milliseconds>(kConnectTimeout),
                             "the client's data endpoint");
        if (!ev) return ev.error();
        if (ev->event_number != IT_CM_REQ_CONN_REQUEST_EVENT) {
            return rdma::Error(EPROTO, "unexpected " + it_tools::event_name(ev->event_number));
        }
        const it_conn_request_event_t &r = ev->conn_req;
        auto dd = ConnectData::read(r.private_data, r.private_data_present == IT_TRUE ? IT_MAX_PRIV_DATA : 0);
        if (!dd || dd->role != ConnectData::Role::data || dd->index != q || dd->length < 2 * layout_.max) {
            (void)it_reject(r.cn_est_id, nullptr, 0);
            return rdma::Error(EPROTO, "expected data endpoint " + std::to_string(q) + " of the session: " +
                                           (dd ? std::string("got another request") : dd.error().to_string()));
        }
        peer_[q] = *dd;
        auto ep = itf_.create_ep(dto_, cm_, window_ + depth_ / batch_ + 8, depth_, layout_.max);
        if (!ep) {
            (void)it_reject(r.cn_est_id, nullptr, 0);
            return ep.error();
        }
        eps_.push_back(*ep);
        for (uint32_t k = 0; k < depth_; ++k) {
            if (const it_status_t s = post_receive(*ep, lmr_, layout_.sink(buf_.data(), q), layout_.max,
                                                   cookie(WorkKind::receive, q));
                s != IT_SUCCESS) {
                (void)it_reject(r.cn_est_id, nullptr, 0);
                return call_error("it_post_recv", "data endpoint " + std::to_string(q), s);
            }
        }
        AcceptData a;
        a.address = reinterpret_cast<uint64_t>(layout_.src(buf_.data(), q));
        a.length = layout_.slot;
        a.rmr_context = rmr_;
        a.receive_depth = depth_;
        a.credit_batch = batch_;
        uint8_t pd[AcceptData::kWireSize];
        a.write(pd);
        if (const it_status_t s = it_ep_accept(*ep, r.cn_est_id, pd, sizeof pd); s != IT_SUCCESS) {
            return call_error("it_ep_accept", "data endpoint " + std::to_string(q) + ", 40 bytes of private data", s);
        }
        if (auto e = wait_established(*ep); !e) return e;
    }
    seq_.assign(n, 0);
    since_credit_.assign(n, 0);
    outstanding_.assign(n, 0);
    return {};
}

rdma::Expected<void> ServerSession::check_connections() {
    it_event_t ev;
    while (it_evd_dequeue(cm_, &ev) == IT_SUCCESS) {
        if (ev.event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT || ev.event_number == IT_CM_MSG_CONN_BROKEN_EVENT) {
            ++disconnects_seen_;
            return rdma::Error(ECONNRESET, "the client's connection ended (" + it_tools::event_name(ev.event_number) + ")");
        }
    }
    return {};
}

rdma::Expected<ControlMessage> ServerSession::wait_control(const std::atomic<bool> &stop) {
    for (;;) {
        auto m = control_.poll(std::chrono::milliseconds(200));
        if (!m) return m.error();
        if (m->has_value()) return **m;
        if (stop.load(std::memory_order_relaxed)) return rdma::Error(ECANCELED, "the server is stopping");
        if (auto c = check_connections(); !c) {
            // A message sent before the disconnect (the client's bye) still counts.
            auto last = control_.poll(std::chrono::milliseconds(0));
            if (last && last->has_value()) return **last;
            return c.error();
        }
    }
}

rdma::Expected<void> ServerSession::post_send_back(uint32_t q, Op op, uint64_t size, WorkKind kind) {
    it_lmr_triplet_t t{};
    t.lmr = lmr_;
    t.addr.abs = layout_.src(buf_.data(), q);
    t.length = size;
    const it_status_t s =
        op == Op::write ? it_post_rdma_write(eps_[q], &t, 1, cookie(kind, q), IT_COMPLETION_FLAG,
                                             peer_[q].address + peer_[q].length / 2, peer_[q].rmr_context)
                        : it_post_send(eps_[q], &t, 1, cookie(kind, q), IT_COMPLETION_FLAG);
    if (s != IT_SUCCESS) {
        return call_error(op == Op::write ? "it_post_rdma_write" : "it_post_send",
                          "data endpoint " + std::to_string(q) + ", " + std::to_string(size) + " bytes", s);
    }
    ++outstanding_[q];
    return {};
}

rdma::Expected<void> ServerSession::serve_test(const ControlMessage &req, const std::atomic<bool> &stop) {
    const uint32_t n = static_cast<uint32_t>(eps_.size());
    if (req.size == 0 || req.size > layout_.max) {
        return rdma::Error(EPROTO, "the client asked for " + std::to_string(req.size) + "-byte messages, above the "
                                   "session's " + std::to_string(layout_.max));
    }
    const size_t last = req.size - 1;
    for (uint32_t q = 0; q < n; ++q) {
        layout_.sink(buf_.data(), q)[last] = 0;
        layout_.src(buf_.data(), q)[last] = 0;
        seq_[q] = 0;
        since_credit_[q] = 0;
    }
    ControlMessage ready;
    ready.type = ControlMessage::Type::ready;
    ready.op = req.op;
    ready.kind = req.kind;
    if (auto r = control_.send(ready); !r) return r;

    uint64_t received = 0, credit_msgs = 0;
    std::optional<uint64_t> end_count;
    it_event_t ev;
    // One completion of a data endpoint: a receive is reposted and answered (a credit message every batch_
    // receives in Send bandwidth, an echo of the same length in Send latency); Sends and Writes are counted.
    auto handle = [&](const it_event_t &e) -> rdma::Expected<void> {
        const it_dto_cmpl_event_t &c = e.dto_cmpl;
        if (c.dto_status != IT_DTO_SUCCESS) return completion_error(e, "data endpoint");
        const uint32_t q = cookie_qp(c.cookie);
        if (q >= n) return rdma::Error(EPROTO, "a completion with a foreign cookie");
        if (cookie_kind(c.cookie) != WorkKind::receive) {
            --outstanding_[q];
            return {};
        }
        ++received;
        if (const it_status_t s = post_receive(eps_[q], lmr_, layout_.sink(buf_.data(), q), layout_.max,
                                               cookie(WorkKind::receive, q));
            s != IT_SUCCESS) {
            return call_error("it_post_recv", "data endpoint " + std::to_string(q), s);
        }
        if (req.kind == Kind::lat) return post_send_back(q, Op::send, c.transferred_length, WorkKind::echo);
        if (++since_credit_[q] == batch_) {
            since_credit_[q] = 0;
            ++credit_msgs;
            return post_send_back(q, Op::send, 4, WorkKind::credit);
        }
        return {};
    };
    auto reap = [&](bool wait) -> rdma::Expected<bool> {
        bool any = false;
        for (;;) {
            const it_status_t s = next_event(dto_, wait, ev);
            wait = false;
            if (s == IT_ERR_QUEUE_EMPTY) return any;
            if (s != IT_SUCCESS) return call_error(event_mode_ ? "it_evd_wait" : "it_evd_dequeue", "data SEVD", s);
            if (auto r = handle(ev); !r) return r.error();
            any = true;
        }
    };
    // Between polls of the data SEVD, the control endpoint is looked at now and then for the client's end.
    auto poll_end = [&]() -> rdma::Expected<void> {
        auto m = control_.poll(std::chrono::milliseconds(0));
        if (!m) return m.error();
        if (!m->has_value()) return {};
        if ((*m)->type != ControlMessage::Type::end) {
            return rdma::Error(EPROTO, "control endpoint: unexpected message during a test");
        }
        end_count = (*m)->count;
        return {};
    };

    // Read latency with polling is compared with a TCP responder that spins on its socket: like for like, this
    // responder spins on its CQ (whose inline progress answers the Read Requests) instead of leaving them to the
    // progress thread's wake-ups.
    const bool spin_for_reads = req.op == Op::read && req.kind == Kind::lat && !event_mode_;
    const bool passive = (req.op == Op::read && !spin_for_reads) || (req.op == Op::write && req.kind == Kind::bw);
    if (spin_for_reads) {
        for (uint32_t idle = 0; !end_count;) {
            if (auto r = reap(false); !r) return r.error();
            if ((++idle & 63) == 0) {
                if (auto p = poll_end(); !p) return p;
                if ((idle & 0xffff) == 0) {
                    if (stop.load(std::memory_order_relaxed)) return rdma::Error(ECANCELED, "the server is stopping");
                    if (auto c = check_connections(); !c) return c;
                }
            }
        }
    } else if (passive) {
        // RDMA Write and Read need nothing of the server's CPU: it sleeps until the client's end of test.
        auto m = wait_control(stop);
        if (!m) return m.error();
        if (m->type != ControlMessage::Type::end) return rdma::Error(EPROTO, "control endpoint: expected end of test");
    } else if (req.op == Op::send) {
        uint32_t idle = 0;
        while (!end_count || received < *end_count) {
            auto r = reap(event_mode_);
            if (!r) return r.error();
            if (*r) {
                idle = 0;
            } else if ((++idle & 63) == 0 && !end_count) {
                if (auto p = poll_end(); !p) return p;
                if ((idle & 0xffff) == 0) {
                    if (stop.load(std::memory_order_relaxed)) return rdma::Error(ECANCELED, "the server is stopping");
                    if (auto c = check_connections(); !c) return c;
                }
            }
        }
    } else {
        // Write latency (ib_write_lat): wait for this round's value in the last byte, then write it back.
        uint32_t q = 0;
        while (!end_count) {
            uint8_t v = next_seq(seq_[q]);
            const volatile uint8_t *in = layout_.sink(buf_.data(), q) + last;
            uint32_t spins = 0;
            while (*in != v) {
                if ((++spins & kReapEvery) == 0) {
                    if (auto r = reap(false); !r) return r.error();
                    if ((spins & 1023) == 0) {
                        if (auto p = poll_end(); !p) return p;
                        if (end_count) break;
                        if ((spins & 0xfffff) == 0) {
                            if (stop.load(std::memory_order_relaxed)) return rdma::Error(ECANCELED, "the server is stopping");
                            if (auto c = check_connections(); !c) return c;
                        }
                    }
                }
            }
            if (end_count) break;
            while (outstanding_[q] >= window_) {
                if (auto r = reap(false); !r) return r.error();
            }
            layout_.src(buf_.data(), q)[last] = v;
            if (auto r = post_send_back(q, Op::write, req.size, WorkKind::echo); !r) return r;
            q = q + 1 == n ? 0 : q + 1;
        }
    }
    // Completions of what the server sent, so that none is left for the next test.
    const auto give_up = Clock::now() + kStallTimeout;
    for (uint32_t q = 0; q < n; ++q) {
        while (outstanding_[q] > 0) {
            auto r = reap(event_mode_);
            if (!r) return r.error();
            if (Clock::now() > give_up) return rdma::Error(ETIMEDOUT, "the server's Sends never completed");
        }
    }
    ControlMessage ack;
    ack.type = ControlMessage::Type::end_ack;
    ack.op = req.op;
    ack.kind = req.kind;
    ack.count = credit_msgs;
    return control_.send(ack);
}

rdma::Expected<void> ServerSession::run(const std::atomic<bool> &stop) {
    for (;;) {
        auto m = wait_control(stop);
        if (!m) return m.error();
        switch (m->type) {
            case ControlMessage::Type::request:
                if (auto r = serve_test(*m, stop); !r) return r;
                break;
            case ControlMessage::Type::bye: {
                // The client disconnects every endpoint; their disconnect events end the session.
                size_t pending = eps_.size() + 1 - std::min(disconnects_seen_, eps_.size() + 1);
                const auto give_up = Clock::now() + std::chrono::seconds(5);
                while (pending > 0 && Clock::now() < give_up) {
                    auto ev = wait_event(cm_, std::chrono::milliseconds(200), "the client's disconnect");
                    if (!ev) continue;
                    if (ev->event_number == IT_CM_MSG_CONN_DISCONNECT_EVENT ||
                        ev->event_number == IT_CM_MSG_CONN_BROKEN_EVENT) {
                        --pending;
                    }
                }
                return {};
            }
            case ControlMessage::Type::ready:
            case ControlMessage::Type::end:
            case ControlMessage::Type::end_ack:
                return rdma::Error(EPROTO, "control endpoint: unexpected message between tests");
        }
    }
}

}  // namespace

struct ItapiServer::Impl {
    std::unique_ptr<Interface> itf;
    bool event_mode = false;
    uint16_t port = 0;
    it_evd_handle_t req = nullptr, cm = nullptr;
    it_listen_handle_t listen = nullptr;
    // Setup-rate probes: accepted endpoints, freed when their connection ends.
    it_evd_handle_t probe_cm = nullptr, probe_dto = nullptr;
    std::unordered_set<it_ep_handle_t> probes;

    ~Impl() {
        if (listen != nullptr) (void)it_listen_free(listen);
    }
    rdma::Expected<void> open_listen(uint16_t wanted);
    void accept_probe(const it_conn_request_event_t &r);
    void reap_probes();
};

void ItapiServer::Impl::accept_probe(const it_conn_request_event_t &r) {
    // Probes have dispatchers of their own, so a session's connection checks never see their events.
    if (probe_cm == nullptr) {
        auto c = itf->create_evd(IT_CM_MSG_EVENT_STREAM, 4 * 1024 + 64);
        auto d = c ? itf->create_evd(IT_DTO_EVENT_STREAM, 64) : rdma::Expected<it_evd_handle_t>(c.error());
        if (!c || !d) {
            std::fprintf(stderr, "it_perf server: refused a setup probe: %s\n",
                         (c ? d.error() : c.error()).to_string().c_str());
            (void)it_reject(r.cn_est_id, nullptr, 0);
            return;
        }
        probe_cm = *c;
        probe_dto = *d;
    }
    auto ep = itf->create_ep(probe_dto, probe_cm, 1, 1, kControlSize);
    if (!ep) {
        std::fprintf(stderr, "it_perf server: refused a setup probe: %s\n", ep.error().to_string().c_str());
        (void)it_reject(r.cn_est_id, nullptr, 0);
        return;
    }
    if (it_ep_accept(*ep, r.cn_est_id, nullptr, 0) != IT_SUCCESS) {
        itf->free_ep(*ep);
        return;
    }
    probes.insert(*ep);
}

void ItapiServer::Impl::reap_probes() {
    if (probe_cm == nullptr) return;
    it_event_t ev;
    while (it_evd_dequeue(probe_cm, &ev) == IT_SUCCESS) {
        // Anything but the establishment (a disconnect, a broken connection) ends the probe.
        if (ev.event_number == IT_CM_MSG_CONN_ESTABLISHED_EVENT || probes.erase(ev.conn.ep) == 0) continue;
        itf->free_ep(ev.conn.ep);
    }
}

rdma::Expected<void> ItapiServer::Impl::open_listen(uint16_t wanted) {
    if (wanted != 0) {
        it_conn_qual_t q = iana_port(wanted);
        const it_status_t s = it_listen_create(itf->ia(), 0, req, IT_LISTEN_CONN_QUAL_INPUT, &q, &listen);
        if (s != IT_SUCCESS) {
            rdma::Error e = call_error("it_listen_create", "port " + std::to_string(wanted) + ", IT_LISTEN_CONN_QUAL_INPUT", s);
            return rdma::Error(e.code(), e.message() + (s == IT_ERR_CONN_QUAL_BUSY ? ": choose another with --port" : ""));
        }
        port = wanted;
        return {};
    }
    // Any free port: the library's choice when it makes one, else random ports until one is free.
    it_conn_qual_t q = iana_port(0);
    if (it_listen_create(itf->ia(), 0, req, IT_LISTEN_NO_FLAG, &q, &listen) == IT_SUCCESS) {
        port = ntohs(q.conn_qual.port);
        if (port != 0) return {};
        (void)it_listen_free(listen);
        listen = nullptr;
    }
    uint32_t x = static_cast<uint32_t>(Clock::now().time_since_epoch().count()) ^ (static_cast<uint32_t>(::getpid()) << 16);
    it_status_t last = IT_SUCCESS;
    for (int attempt = 0; attempt < 64; ++attempt) {
        x = x * 1664525u + 1013904223u;
        const auto p = static_cast<uint16_t>(20000 + (x >> 8) % 30000);
        q = iana_port(p);
        last = it_listen_create(itf->ia(), 0, req, IT_LISTEN_CONN_QUAL_INPUT, &q, &listen);
        if (last == IT_SUCCESS) {
            port = p;
            return {};
        }
        if (last != IT_ERR_CONN_QUAL_BUSY) break;
    }
    return call_error("it_listen_create", "a free port, IT_LISTEN_CONN_QUAL_INPUT", last);
}

ItapiServer::ItapiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ItapiServer::~ItapiServer() = default;

rdma::Expected<std::unique_ptr<ItapiServer>> ItapiServer::open(const std::string &ia, uint16_t port, bool event_mode) {
    auto impl = std::make_unique<Impl>();
    impl->event_mode = event_mode;
    auto i = Interface::open(ia);
    if (!i) return i.error();
    impl->itf = std::move(*i);
    auto r = impl->itf->create_evd(IT_CM_REQ_EVENT_STREAM, 1024 + 64);
    if (!r) return r.error();
    impl->req = *r;
    auto c = impl->itf->create_evd(IT_CM_MSG_EVENT_STREAM, 4 * 1024 + 64);
    if (!c) return c.error();
    impl->cm = *c;
    if (auto l = impl->open_listen(port); !l) return l.error();
    return std::unique_ptr<ItapiServer>(new ItapiServer(std::move(impl)));
}

uint16_t ItapiServer::port() const { return impl_->port; }
std::string ItapiServer::ia_name() const { return impl_->itf->name(); }

rdma::Expected<void> ItapiServer::serve(const std::atomic<bool> &stop) {
    Impl &s = *impl_;
    while (!stop.load(std::memory_order_relaxed)) {
        it_event_t ev{};
        size_t more = 0;
        const it_status_t st = it_evd_wait(s.req, 200 * 1000, &ev, &more);
        s.reap_probes();
        if (st == IT_ERR_TIMEOUT_EXPIRED) continue;
        if (st != IT_SUCCESS) return call_error("it_evd_wait", "connection request SEVD", st);
        if (ev.event_number != IT_CM_REQ_CONN_REQUEST_EVENT) continue;
        const it_conn_request_event_t &r = ev.conn_req;
        auto cd = ConnectData::read(r.private_data, r.private_data_present == IT_TRUE ? IT_MAX_PRIV_DATA : 0);
        if (cd && cd->role == ConnectData::Role::probe) {
            s.accept_probe(r);
            continue;
        }
        if (!cd || cd->role != ConnectData::Role::control) {
            std::fprintf(stderr, "it_perf server: refused a connection: %s\n",
                         cd ? "a data endpoint outside a session" : cd.error().to_string().c_str());
            (void)it_reject(r.cn_est_id, nullptr, 0);
            continue;
        }
        // Drop connection events a previous session left behind.
        it_event_t stale;
        while (it_evd_dequeue(s.cm, &stale) == IT_SUCCESS) {
        }
        ServerSession session(*s.itf, s.req, s.cm, s.event_mode);
        auto e = session.establish(r, *cd);
        if (e) e = session.run(stop);
        if (!e && e.error().code() != ECANCELED) {
            const std::string offline = s.itf->offline_reason();
            std::fprintf(stderr, "it_perf server: session ended: %s%s\n", offline.empty() ? "" : (offline + ": ").c_str(),
                         e.error().to_string().c_str());
        }
    }
    return {};
}

}  // namespace it_perf
