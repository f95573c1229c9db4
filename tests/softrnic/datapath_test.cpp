// The softrnic data path end to end over real TCP on 127.0.0.1: an embedded kAL with softrnic_kvp.so, the uVP
// loaded like the uAL loads it, two RNIC opens (two "hosts"), QPs put in RDMA mode on the two ends of a loopback
// connection the test makes itself. The kAL refuses the RDMA-mode transition from clients (its connection
// management owns it), so the kVP's QPs stay IDLE here and only the uVP's local half of the transition runs.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "rnicpi/cpp/channel.hpp"
#include <linux/tcp.h>  // tcp_info with the segment counters (glibc's copy stops before them)
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <climits>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "embedded_kal.hpp"
#include "iwarp/framing.hpp"
#include "iwarp/mpa.hpp"
#include "rnicpi/host/loader.hpp"
#include "rnicpi/host/log.hpp"
#include "syscall.hpp"
#include "test_util.hpp"
#include "status_matchers.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Requests to move a QP to ERROR that the uVP sends to the kAL, waited for or posted: each is a message krdmad
// reads, so a test can count them.
std::atomic<int> g_error_requests{0};

bool asks_for_error(const ri_syscall_t *c) {
    if (c->op != RI_MODIFY_QP || c->param == nullptr ||
        c->param_len < sizeof(ri_syscall_modify_t) + sizeof(uint32_t)) {
        return false;
    }
    ri_syscall_modify_t m{};
    uint32_t state = 0;
    std::memcpy(&m, c->param, sizeof m);
    std::memcpy(&state, static_cast<const uint8_t *>(c->param) + sizeof m, sizeof state);
    return (m.mask & RI_QP_ATTR_STATE) != 0 && state == RI_QPS_ERROR;
}

ri_status_t counting_syscall(void *ctx, ri_syscall_t *c) noexcept {
    if (asks_for_error(c)) g_error_requests.fetch_add(1);
    return ual::device_syscall(ctx, c);
}

ri_status_t counting_syscall_post(void *ctx, const ri_syscall_t *c) noexcept {
    if (asks_for_error(c)) g_error_requests.fetch_add(1);
    return ual::device_syscall_post(ctx, c);
}

// Receive and send calls the calling thread made while t_count_calls was set. The uVP makes them through syscall(2)
// (its stream reads and writes are no cancellation points), and its ::syscall comes here (the executable's definition
// comes first in symbol lookup), which counts them and goes on to the C library's.
thread_local bool t_count_calls = false;
thread_local int t_receives = 0;
thread_local int t_receives_with_data = 0;  // of t_receives, those that returned bytes
thread_local int t_sends = 0;

}  // namespace

extern "C" __attribute__((visibility("default"))) long syscall(long number, ...) noexcept {
    using Syscall = long (*)(long, ...);
    static const auto next = reinterpret_cast<Syscall>(::dlsym(RTLD_NEXT, "syscall"));
    // Six arguments, as many as any system call takes: the ones the caller did not pass are ignored by the kernel.
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (long &x : a) x = va_arg(ap, long);
    va_end(ap);
    const long r = next(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (t_count_calls) {
        if (number == SYS_recvfrom || number == SYS_recvmsg) {
            ++t_receives;
            if (r > 0) ++t_receives_with_data;
        } else if (number == SYS_sendmsg) {
            ++t_sends;
        }
    }
    return r;
}

namespace {

const ri_host_ops_t kUalHost{sizeof(ri_host_ops_t), RI_ABI_VERSION, &rdma::log::host_log, nullptr, nullptr,
                             &counting_syscall, nullptr, nullptr, &counting_syscall_post};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// A connected pair of TCP sockets on loopback: {connecting end, accepted end}.
std::pair<int, int> tcp_pair() {
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener, 1), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len);
    int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(server, 0);
    ::close(listener);
    return {client, server};
}

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

// The negotiated MPA mode of a connection.
struct Mode {
    uint32_t revision = 2;
    bool crc = true;
    bool markers = false;
    uint32_t rtr = RI_RTR_WRITE;  // peer-to-peer when not RI_RTR_NONE
    uint32_t fpdu_max = 16384;
    bool big = false;  // also the largest transfers (16 MiB Sends, 64 MiB Writes and Reads)
    uint64_t same_host_ring = 0;  // the stream moves over a same-host channel with rings this large (0: TCP)
    bool pull = false;  // on the channel, messages of 4 KiB and more go by single copy (the kAL names the peer)
    std::string name() const {
        static const char *rtrs[] = {"nortr", "rtrsend", "rtrwrite", "rtrread"};
        return "rev" + std::to_string(revision) + (crc ? "_crc" : "_nocrc") + (markers ? "_markers" : "") + "_" +
               rtrs[rtr] + "_fpdu" + std::to_string(fpdu_max) +
               (same_host_ring != 0 ? "_samehost" + std::to_string(same_host_ring >> 10) + "k" : "") +
               (pull ? "_pull" : "");
    }
};

// Asynchronous events of one open.
struct Events {
    std::mutex mutex;
    std::vector<ri_async_event_t> list;
    static void on_event(void *ctx, ri_rnic_t, const ri_async_event_t *e) {
        auto *self = static_cast<Events *>(ctx);
        std::lock_guard g(self->mutex);
        self->list.push_back(*e);
    }
    bool has(uint32_t qp_num, uint32_t id, uint32_t *detail = nullptr) {
        std::lock_guard g(mutex);
        for (const auto &e : list) {
            if (e.resource_id == qp_num && e.event_id == id) {
                if (detail != nullptr) *detail = e.detail;
                return true;
            }
        }
        return false;
    }
};

// One end of a connection: an open's PD, a QP and its CQs.
struct End {
    ri_rnic_t rnic = nullptr;
    ri_pd_t pd = nullptr;
    ri_cq_t scq = nullptr;
    ri_cq_t rcq = nullptr;
    ri_qp_t qp = nullptr;
    uint32_t qp_num = 0;
    Events *events = nullptr;
};

// A registered buffer. Its bytes belong to the fixture: they outlive the QPs (destroyed in TearDown), so an
// inbound operation still in flight when a test body ends never writes into freed memory.
struct Region {
    std::shared_ptr<std::vector<uint8_t>> buf = std::make_shared<std::vector<uint8_t>>();
    ri_mr_t mr = nullptr;
    ri_mr_keys_t keys{};
    std::vector<uint8_t> &bytes() const { return *buf; }
    uint64_t addr() const { return reinterpret_cast<uintptr_t>(buf->data()); }
    ri_sge_t sge(uint64_t off = 0, uint64_t len = UINT64_MAX) const {
        return ri_sge_t{addr() + off, static_cast<uint32_t>(std::min<uint64_t>(len, buf->size() - off)), keys.lkey};
    }
};

class Fixture : public ::testing::Test {
protected:
    // The RNIC's attach options (its tunables among them).
    virtual std::string attach_options() const { return ""; }

    void SetUp() override {
        // Large regions are locked in memory: lift the limit where this process may.
        rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
        (void)::setrlimit(RLIMIT_MEMLOCK, &unlimited);
        kal::Config c;
        c.provider_dir = SOFTRNIC_PROVIDER_DIR;
        c.modules = {"softrnic_kvp.so"};
        c.rnics = {kal::AttachRequest{"softrnic", "sr0", "", "127.0.0.1", attach_options()}};
        auto k = kal::EmbeddedKal::start(c);
        ASSERT_OK(k) << k.error().to_string();
        kal_ = std::move(*k);
        auto fd = kal_->connect_local();
        ASSERT_OK(fd);
        auto client = ual::DeviceClient::adopt(std::move(*fd));
        ASSERT_OK(client);
        client_ = std::move(*client);
        loader_ = std::make_unique<rdma::rnicpi::ModuleLoader>(kUalHost, SOFTRNIC_PROVIDER_DIR);
        auto m = loader_->load(kal_->adapters().list().at(0).uvp_library, RI_MODE_NONPRIVILEGED);
        ASSERT_OK(m) << m.error().to_string();
        uvp_ = *m;
        v_ = &uvp_->verbs();
        ra_ = open(&ev_a_);
        rb_ = open(&ev_b_);
        pa_ = pd(ra_);
        pb_ = pd(rb_);
    }

    void TearDown() override {
        while (!cleanup_.empty()) {
            auto f = std::move(cleanup_.back());
            cleanup_.pop_back();
            f();
        }
        keep_.clear();
        client_.reset();
        uvp_.reset();  // fini: the progress thread stops
        loader_.reset();
        kal_.reset();
    }

    ri_rnic_t open(Events *events) {
        ri_rnic_open_params_t p{};
        p.host_ctx = client_.get();
        std::strcpy(p.instance_name, "sr0");
        ri_rnic_t r = nullptr;
        EXPECT_RI_OK(v_->open_rnic(&p, &r));
        if (r == nullptr) return nullptr;
        cleanup_.push_back([this, r] { EXPECT_RI_OK(v_->close_rnic(r)); });
        uint32_t id = 0;
        EXPECT_RI_OK(v_->set_aeh(r, &Events::on_event, events, &id));
        return r;
    }
    ri_pd_t pd(ri_rnic_t r) {
        ri_pd_t p = nullptr;
        EXPECT_RI_OK(v_->alloc_pd(r, &p));
        if (p != nullptr) cleanup_.push_back([this, p] { EXPECT_RI_OK(v_->dealloc_pd(p)); });
        return p;
    }
    ri_cq_t cq(ri_rnic_t r, uint32_t cqe = 256, uint32_t ceh = 0) {
        ri_cq_attr_t a{cqe, ceh, 0};
        ri_cq_t c = nullptr;
        EXPECT_RI_OK(v_->create_cq(r, &a, &c));
        if (c != nullptr) cleanup_.push_back([this, c] { EXPECT_RI_OK(v_->destroy_cq(c)); });
        return c;
    }
    static ri_qp_init_attr_t qp_attr(uint32_t depth = 64) {
        ri_qp_init_attr_t a{};
        a.type = RI_QPT_RC;
        a.sq_depth = a.rq_depth = depth;
        a.sq_sge = a.rq_sge = a.rd_sge = 4;
        a.max_inline = 128;
        a.ird = a.ord = 8;
        a.context = 0xfeed;
        return a;
    }
    End end(ri_rnic_t r, ri_pd_t p, Events *events, ri_qp_init_attr_t a = qp_attr(), uint32_t ceh = 0,
            uint32_t cqe = 256) {
        End e;
        e.rnic = r;
        e.pd = p;
        e.events = events;
        e.scq = cq(r, cqe);
        e.rcq = cq(r, cqe, ceh);
        EXPECT_RI_OK(v_->create_qp(p, e.scq, e.rcq, nullptr, &a, &e.qp));
        if (e.qp != nullptr) {
            ri_qp_t q = e.qp;
            cleanup_.push_back([this, q] { EXPECT_RI_OK(v_->destroy_qp(q)); });
            ri_qp_attr_t qa{};
            EXPECT_RI_OK(v_->query_qp(q, &qa));
            e.qp_num = qa.qp_num;
        }
        return e;
    }
    // Queue pairs (a, b) in IDLE, as many as @p as holds, with send queues of @p depth: every a end uses CQ @p acq,
    // every b end CQ @p bcq. Each is destroyed at teardown, except pair @p own, which the test destroys itself.
    void shared_cq_pairs(std::vector<End> &as, std::vector<End> &bs, ri_cq_t acq, ri_cq_t bcq, uint32_t depth,
                         size_t own = SIZE_MAX) {
        for (size_t i = 0; i < as.size(); ++i) {
            for (auto [e, r, p, c] : {std::tuple{&as[i], ra_, pa_, acq}, std::tuple{&bs[i], rb_, pb_, bcq}}) {
                e->rnic = r;
                e->scq = e->rcq = c;
                ri_qp_init_attr_t x = qp_attr(depth);
                ASSERT_RI_OK(v_->create_qp(p, c, c, nullptr, &x, &e->qp));
                if (i != own) cleanup_.push_back([this, q = e->qp] { EXPECT_RI_OK(v_->destroy_qp(q)); });
            }
        }
    }
    Region region(ri_pd_t p, std::vector<uint8_t> data, uint32_t access, ri_status_t expect = RI_OK) {
        Region g;
        *g.buf = std::move(data);
        keep_.push_back(g.buf);
        ri_mr_reg_t r{g.addr(), g.bytes().size(), g.addr(), access, 0};
        EXPECT_EQ(v_->register_mr(p, &r, &g.mr, &g.keys), expect);
        if (g.mr != nullptr) {
            ri_mr_t m = g.mr;
            cleanup_.push_back([this, m] { EXPECT_RI_OK(v_->deregister_mr(m)); });
        }
        return g;
    }
    // A region that may not be lockable here (RLIMIT_MEMLOCK): false when it was refused for that.
    bool big_region(ri_pd_t p, std::vector<uint8_t> data, uint32_t access, Region &out) {
        Region g;
        *g.buf = std::move(data);
        keep_.push_back(g.buf);
        ri_mr_reg_t r{g.addr(), g.bytes().size(), g.addr(), access, 0};
        ri_status_t rc = v_->register_mr(p, &r, &g.mr, &g.keys);
        if (rc == RI_ENOMEM) return false;
        EXPECT_RI_OK(rc);
        ri_mr_t m = g.mr;
        cleanup_.push_back([this, m] { EXPECT_RI_OK(v_->deregister_mr(m)); });
        out = std::move(g);
        return true;
    }

    static ri_llp_params_t llp(const Mode &m, bool initiator, int fd) {
        ri_llp_params_t l{};
        l.fd = fd;
        l.mpa_revision = m.revision;
        if (m.crc) l.mpa_flags |= RI_MPA_CRC;
        if (m.markers) l.mpa_flags |= RI_MPA_MARKERS;
        if (m.rtr != RI_RTR_NONE) l.mpa_flags |= RI_MPA_PEER2PEER;
        if (initiator) l.mpa_flags |= RI_MPA_INITIATOR;
        l.rtr_type = m.rtr;
        l.ird = l.ord = 8;
        l.mss = 65483;
        l.fpdu_max = m.fpdu_max;
        return l;
    }
    // An initiator QP @p q on one end of a loopback connection whose other end the test reads and writes itself:
    // returns that end's socket (closed at teardown); @p own (when given) gets the QP's.
    int attach_initiator(ri_qp_t q, const Mode &m, int *own = nullptr) {
        auto [ca, cb] = tcp_pair();
        ri_qp_attr_t x{};
        x.state = RI_QPS_RTS;
        x.llp = llp(m, true, ca);
        EXPECT_RI_OK(v_->modify_qp(q, &x, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP));
        cleanup_.push_back([cb] { ::close(cb); });
        if (own != nullptr) *own = ca;
        return cb;
    }
    // Puts @p a (initiator) and @p b on the two ends of a new loopback connection. Returns the dup of b's socket
    // when @p keep_b is set (the caller closes it).
    int connect(End &a, End &b, const Mode &m, bool keep_b = false) {
        auto [ca, cb] = tcp_pair();
        int kept = keep_b ? ::dup(cb) : -1;
        int bells[2] = {-1, -1};
        if (m.same_host_ring != 0) {
            // What the kAL does when it holds both ends: a channel, one end per QP, and no CRC or markers.
            // With single copy both QPs' process is this one: pulls are plain copies.
            const int32_t pids[2] = {::getpid(), ::getpid()};
            const int e = rdma::provider::make_channel(m.same_host_ring, bells, m.pull ? pids : nullptr);
            EXPECT_EQ(e, 0) << "make_channel: " << std::strerror(e);
        }
        auto with_channel = [&](ri_llp_params_t l, int bell) {
            if (bell >= 0) {
                l.mpa_flags = (l.mpa_flags | RI_LLP_SAME_HOST) & ~static_cast<uint32_t>(RI_MPA_CRC | RI_MPA_MARKERS);
                l.channel = bell;
            }
            return l;
        };
        ri_qp_attr_t x{};
        x.state = RI_QPS_RTS;
        x.llp = with_channel(llp(m, true, ca), bells[0]);
        EXPECT_RI_OK(v_->modify_qp(a.qp, &x, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP));
        x.llp = with_channel(llp(m, false, cb), bells[1]);
        EXPECT_RI_OK(v_->modify_qp(b.qp, &x, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP));
        return kept;
    }

    ri_status_t send(ri_qp_t q, uint64_t id, uint32_t opcode, std::vector<ri_sge_t> sges, uint32_t flags = RI_SEND_SIGNALED,
                     uint64_t remote = 0, ri_stag_t rkey = 0, ri_stag_t inv = 0) {
        ri_send_wr_t w{};
        w.wr_id = id;
        w.opcode = opcode;
        w.flags = flags;
        w.sgl = sges.data();
        w.num_sge = static_cast<uint32_t>(sges.size());
        w.u.rdma.remote_addr = remote;
        w.u.rdma.rkey = rkey;
        w.inv_stag = inv;
        uint32_t posted = 0;
        ri_status_t rc = v_->post_send(q, &w, 1, &posted);
        EXPECT_EQ(posted, rc == RI_OK ? 1u : 0u);
        return rc;
    }
    ri_status_t recv(ri_qp_t q, uint64_t id, std::vector<ri_sge_t> sges) {
        ri_recv_wr_t w{id, sges.data(), static_cast<uint32_t>(sges.size()), 0};
        uint32_t posted = 0;
        return v_->post_recv(q, &w, 1, &posted);
    }
    // Polls @p c without a pause (empty polls, each an inline pass) long enough for the progress thread to park the
    // streams it drives. False when a poll failed; @p taken (when given) counts the completions the polls took.
    bool busy_poll(ri_cq_t c, uint32_t *taken = nullptr) {
        const auto until = Clock::now() + std::chrono::milliseconds(5);
        while (Clock::now() < until) {
            ri_wc_t wc[16];
            uint32_t got = 0;
            if (v_->poll_cq(c, 16, wc, &got) != RI_OK) return false;
            if (taken != nullptr) *taken += got;
        }
        return true;
    }
    // Busy-polls @p c until no epoll set of this process has the socket with inode @p ino (its stream parked and out
    // of the progress thread's set), checking between polls: a pause of a millisecond would let the thread's look
    // take the stream back. False when a poll failed or 10 s passed.
    bool poll_until_unwatched(ri_cq_t c, unsigned long ino) {
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (Clock::now() < until) {
            if (!busy_poll(c)) return false;
            if (testutil::epoll_watched_inodes().count(ino) == 0) return true;
        }
        return false;
    }
    // Polls @p c until @p n completions arrived (or the deadline passes: a failure, never a hang).
    std::vector<ri_wc_t> wait(ri_cq_t c, size_t n, int seconds = 20) {
        std::vector<ri_wc_t> out;
        const auto deadline = Clock::now() + std::chrono::seconds(seconds);
        while (out.size() < n) {
            ri_wc_t wc[16];
            uint32_t got = 0;
            EXPECT_RI_OK(v_->poll_cq(c, 16, wc, &got));
            out.insert(out.end(), wc, wc + got);
            if (got == 0) {
                if (Clock::now() > deadline) {
                    ADD_FAILURE() << "only " << out.size() << " of " << n << " completions within " << seconds << " s";
                    break;
                }
                std::this_thread::yield();
            }
        }
        return out;
    }
    // Waits for @p pred without polling anything (the progress thread does the work).
    static bool eventually(const std::function<bool()> &pred, int seconds = 20) {
        const auto deadline = Clock::now() + std::chrono::seconds(seconds);
        while (!pred()) {
            if (Clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return true;
    }
    uint32_t state_of(ri_qp_t q) {
        ri_qp_attr_t a{};
        EXPECT_RI_OK(v_->query_qp(q, &a));
        return a.state;
    }
    ri_status_t modify_state(ri_qp_t q, uint32_t state) {
        ri_qp_attr_t a{};
        a.state = state;
        return v_->modify_qp(q, &a, RI_QP_ATTR_STATE);
    }

    std::unique_ptr<kal::EmbeddedKal> kal_;
    std::unique_ptr<ual::DeviceClient> client_;
    std::unique_ptr<rdma::rnicpi::ModuleLoader> loader_;
    rdma::rnicpi::ModuleRef uvp_;
    const ri_verbs_ops_t *v_ = nullptr;
    Events ev_a_, ev_b_;
    ri_rnic_t ra_ = nullptr, rb_ = nullptr;
    ri_pd_t pa_ = nullptr, pb_ = nullptr;
    std::vector<std::function<void()>> cleanup_;
    std::vector<std::shared_ptr<std::vector<uint8_t>>> keep_;  // region bytes, freed after the QPs
};

// Every mode of the MPA negotiation.
class Datapath : public Fixture, public ::testing::WithParamInterface<Mode> {
protected:
    std::string attach_options() const override { return GetParam().pull ? R"({"pull_min": 4096})" : ""; }
};

constexpr uint32_t kRemote = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ;

TEST_P(Datapath, SendsOfEverySizeSpanManyFpdus) {
    const Mode m = GetParam();
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    std::vector<size_t> sizes = {1, 4095, 65536, 1u << 20};
    if (m.big) sizes.push_back(16u << 20);
    std::vector<Region> src, dst;
    for (size_t i = 0; i < sizes.size(); ++i) {
        src.push_back(region(pa_, pattern(sizes[i], static_cast<uint32_t>(i)), 0));
        dst.push_back(region(pb_, std::vector<uint8_t>(sizes[i] + 7), RI_ACCESS_LOCAL_WRITE));
        ASSERT_RI_OK(recv(b.qp, 100 + i, {dst[i].sge()}));
    }
    const int tcp_b = connect(a, b, m, true);
    ri_qp_attr_t qa{};
    ASSERT_RI_OK(v_->query_qp(a.qp, &qa));
    EXPECT_EQ(qa.state, RI_QPS_RTS);
    EXPECT_EQ(qa.llp.fpdu_max, m.fpdu_max);
    EXPECT_GE(qa.llp.fd, 0);
    for (size_t i = 0; i < sizes.size(); ++i) ASSERT_RI_OK(send(a.qp, i, RI_WR_SEND, {src[i].sge()}));
    auto rw = wait(b.rcq, sizes.size());
    auto sw = wait(a.scq, sizes.size());
    ASSERT_EQ(rw.size(), sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(rw[i].status, RI_WC_SUCCESS);
        EXPECT_EQ(rw[i].opcode, RI_WC_RECV);
        EXPECT_EQ(rw[i].wr_id, 100 + i);
        EXPECT_EQ(rw[i].byte_len, sizes[i]);
        EXPECT_EQ(rw[i].qp_num, b.qp_num);
        EXPECT_EQ(rw[i].qp_context, 0xfeedu);
        EXPECT_TRUE(std::equal(src[i].bytes().begin(), src[i].bytes().end(), dst[i].bytes().begin())) << "message " << i;
        EXPECT_EQ(sw.at(i).wr_id, i);
        EXPECT_EQ(sw[i].status, RI_WC_SUCCESS);
        EXPECT_EQ(sw[i].opcode, RI_WC_SEND);
        EXPECT_EQ(sw[i].byte_len, sizes[i]);
    }
    // Over a channel the TCP connection carries nothing: not a byte of the stream went on it.
    tcp_info ti{};
    socklen_t len = sizeof ti;
    ASSERT_EQ(::getsockopt(tcp_b, IPPROTO_TCP, TCP_INFO, &ti, &len), 0) << std::strerror(errno);
    if (m.same_host_ring != 0) {
        EXPECT_EQ(ti.tcpi_bytes_received, 0u) << "the stream moved over the same-host channel, not over TCP";
    } else {
        EXPECT_GT(ti.tcpi_bytes_received, 1u << 20) << "the stream moved over TCP";
    }
    ::close(tcp_b);
}

TEST_P(Datapath, WritesAndReadsEveryByte) {
    const Mode m = GetParam();
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, m);
    std::vector<size_t> sizes = {1, 4097, 1u << 20};
    if (m.big) sizes.push_back(64u << 20);
    for (size_t i = 0; i < sizes.size(); ++i) {
        const size_t n = sizes[i];
        Region src, remote, back;
        if (!big_region(pa_, pattern(n, 7 + static_cast<uint32_t>(i)), 0, src) ||
            !big_region(pb_, std::vector<uint8_t>(n), kRemote, remote) ||
            !big_region(pa_, std::vector<uint8_t>(n), RI_ACCESS_LOCAL_WRITE, back)) {
            GTEST_SKIP() << "this process may not lock " << n << " bytes (RLIMIT_MEMLOCK)";
        }
        ASSERT_RI_OK(send(a.qp, 1, RI_WR_RDMA_WRITE, {src.sge()}, RI_SEND_SIGNALED, remote.addr(), remote.keys.rkey));
        ASSERT_RI_OK(send(a.qp, 2, RI_WR_RDMA_READ, {back.sge()}, RI_SEND_SIGNALED, remote.addr(), remote.keys.rkey));
        auto wc = wait(a.scq, 2, 60);
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].opcode, RI_WC_RDMA_WRITE);
        EXPECT_EQ(wc[0].status, RI_WC_SUCCESS);
        EXPECT_EQ(wc[1].opcode, RI_WC_RDMA_READ);
        EXPECT_EQ(wc[1].status, RI_WC_SUCCESS);
        EXPECT_EQ(wc[1].byte_len, n);
        EXPECT_TRUE(remote.bytes() == src.bytes()) << n << " bytes written";
        EXPECT_TRUE(back.bytes() == src.bytes()) << n << " bytes read back";
    }
    EXPECT_TRUE(wait(b.scq, 0).empty());
}

INSTANTIATE_TEST_SUITE_P(Modes, Datapath,
                         ::testing::Values(Mode{1, false, false, RI_RTR_NONE, 0, false},
                                           Mode{1, true, true, RI_RTR_NONE, 16384, false},
                                           Mode{2, true, false, RI_RTR_WRITE, 65536, true},
                                           Mode{2, false, false, RI_RTR_READ, 16384, false},
                                           Mode{2, true, true, RI_RTR_SEND, 9000, false},
                                           // The same-host channel: a ring smaller than one FPDU, and a large one.
                                           Mode{2, false, false, RI_RTR_WRITE, 16384, true, 4096},
                                           Mode{1, false, false, RI_RTR_NONE, 0, true, 1u << 20},
                                           // Single copy over a small ring: every message of 4 KiB or more.
                                           Mode{2, false, false, RI_RTR_WRITE, 16384, true, 16384, true}),
                         [](const ::testing::TestParamInfo<Mode> &p) { return p.param.name(); });

// The rest run in one mode: CRC, revision 2, peer-to-peer with a zero-length Write RTR. (Scatter/gather lists,
// inline data, Send with Invalidate, unsignaled work and remote access violations moved to the provider conformance
// suite, tests/conformance/, which runs them against every provider through krdmad.)
class Stream : public Fixture {
protected:
    Mode mode() const { return Mode{}; }
};

std::atomic<int> g_ceh_calls{0};
void count_ceh(void *, ri_rnic_t, ri_cq_t) { ++g_ceh_calls; }

TEST_F(Stream, SolicitedEventsFireTheCompletionHandler) {
    uint32_t ceh = 0;
    ASSERT_RI_OK(v_->set_ceh(rb_, &count_ceh, nullptr, &ceh));
    g_ceh_calls = 0;
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_, qp_attr(), ceh);
    connect(a, b, mode());
    Region src = region(pa_, pattern(16, 2), 0);
    Region dst = region(pb_, std::vector<uint8_t>(64), RI_ACCESS_LOCAL_WRITE);
    for (uint64_t i = 0; i < 4; ++i) ASSERT_RI_OK(recv(b.qp, i, {dst.sge(16 * i, 16)}));
    ASSERT_RI_OK(v_->request_cq_notify(b.rcq, RI_CQ_NOTIFY_SOLICITED));
    ASSERT_RI_OK(send(a.qp, 1, RI_WR_SEND, {src.sge()}));
    ASSERT_EQ(wait(a.scq, 1).size(), 1u);
    // The plain Send is placed (the progress thread) but the armed-for-solicited CQ stays quiet.
    ASSERT_TRUE(eventually([&] { return dst.bytes()[15] == src.bytes()[15]; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(g_ceh_calls.load(), 0);
    ASSERT_RI_OK(send(a.qp, 2, RI_WR_SEND_SE, {src.sge()}));
    ASSERT_TRUE(eventually([&] { return g_ceh_calls.load() == 1; }));
    auto rw = wait(b.rcq, 2);
    ASSERT_EQ(rw.size(), 2u);
    EXPECT_EQ(rw[0].flags & RI_WC_SOLICITED, 0u);
    EXPECT_NE(rw[1].flags & RI_WC_SOLICITED, 0u);
    // "Next" fires on any completion, once per arming.
    ASSERT_RI_OK(v_->request_cq_notify(b.rcq, RI_CQ_NOTIFY_NEXT));
    ASSERT_RI_OK(send(a.qp, 3, RI_WR_SEND, {src.sge()}));
    ASSERT_RI_OK(send(a.qp, 4, RI_WR_SEND, {src.sge()}));
    EXPECT_EQ(wait(b.rcq, 2).size(), 2u);
    // The handler runs after the completion is in the ring, so a poll may see the completion first.
    EXPECT_TRUE(eventually([&] { return g_ceh_calls.load() == 2; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(g_ceh_calls.load(), 2);
    EXPECT_EQ(wait(a.scq, 3).size(), 3u);
}

// A handler that arms its CQ again, as consumers do, while the consumer busy-polls: the handler then runs inside
// the poll's inline progress (the stream is parked: the consumer moves it), and arming must not wait for the poll
// that called it.
std::atomic<int> g_rearm_calls{0};
void rearm_ceh(void *ctx, ri_rnic_t, ri_cq_t cq) {
    (void)static_cast<const ri_verbs_ops_t *>(ctx)->request_cq_notify(cq, RI_CQ_NOTIFY_NEXT);
    ++g_rearm_calls;  // after arming: a count the test sees is a CQ armed for the next completion
}

TEST_F(Stream, HandlerArmsItsCqFromInsideABusyPoll) {
    uint32_t ceh = 0;
    ASSERT_RI_OK(v_->set_ceh(rb_, &rearm_ceh, const_cast<ri_verbs_ops_t *>(v_), &ceh));
    g_rearm_calls = 0;
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_, qp_attr(), ceh);
    connect(a, b, mode());
    Region src = region(pa_, pattern(16, 5), 0);
    Region dst = region(pb_, std::vector<uint8_t>(16), RI_ACCESS_LOCAL_WRITE);
    ASSERT_RI_OK(v_->request_cq_notify(b.rcq, RI_CQ_NOTIFY_NEXT));
    constexpr int kRounds = 50;
    for (int i = 0; i < kRounds; ++i) {
        ASSERT_RI_OK(recv(b.qp, static_cast<uint64_t>(i), {dst.sge()}));
        ASSERT_RI_OK(send(a.qp, static_cast<uint64_t>(i), RI_WR_SEND, {src.sge()}));
        ASSERT_EQ(wait(b.rcq, 1, 10).size(), 1u) << "round " << i;  // busy-polls b's CQ (inline progress)
        ASSERT_EQ(wait(a.scq, 1, 10).size(), 1u) << "round " << i;
        // The handler may run just after the poll saw the completion: the next round starts once it has re-armed,
        // so every completion finds the CQ armed by the handler of the one before.
        ASSERT_TRUE(eventually([&] { return g_rearm_calls.load() == i + 1; })) << "round " << i;
    }
    EXPECT_EQ(g_rearm_calls.load(), kRounds);
}

// A stream its consumer busy-polls leaves the progress thread's epoll set: an entry on a socket's wait queue costs a
// wake-up call at every segment that arrives and every ACK that frees room, even an entry that wants no edge. What
// arrives while it is out is not lost: once the consumer stops polling, the thread's millisecond look puts the socket
// back, and the bytes waiting in it raise the edge the thread needs to place them.
TEST_F(Stream, ABusyPolledStreamLeavesTheEpollSetAndComesBackWhenPollsStop) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    const int kept = connect(a, b, mode(), true);
    ASSERT_GE(kept, 0);
    cleanup_.push_back([kept] { ::close(kept); });
    const unsigned long ino = testutil::inode_of(kept);  // b's socket (the dup shares its inode)
    ASSERT_NE(ino, 0u);
    EXPECT_EQ(testutil::epoll_watched_inodes().count(ino), 1u) << "a new stream is watched for input";
    Region src = region(pa_, pattern(16, 7), 0);
    Region dst = region(pb_, std::vector<uint8_t>(16), RI_ACCESS_LOCAL_WRITE);
    ASSERT_RI_OK(recv(b.qp, 1, {dst.sge()}));
    ASSERT_TRUE(poll_until_unwatched(b.rcq, ino)) << "b's socket stayed in the epoll set while its CQ was busy-polled";
    // b stops polling; a's Send reaches b's socket while it may still be out of the set.
    ASSERT_RI_OK(send(a.qp, 1, RI_WR_SEND, {src.sge()}));
    ASSERT_TRUE(eventually([&] { return dst.bytes() == src.bytes(); })) << "the thread never placed the Send";
    EXPECT_EQ(testutil::epoll_watched_inodes().count(ino), 1u) << "the stream came back to the thread";
    auto rw = wait(b.rcq, 1);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, RI_WC_SUCCESS);
    EXPECT_EQ(rw[0].byte_len, 16u);
    EXPECT_EQ(wait(a.scq, 1).size(), 1u);
}

// The peer's FIN reaches a stream while it is parked, its socket in no epoll set: once the consumer stops polling,
// the progress thread takes the stream back and meets the end itself (the QP to ERROR, LLP_CLOSED), nobody polling.
TEST_F(Stream, AParkedStreamMeetsThePeersEndOnceItsConsumerStopsPolling) {
    End b = end(rb_, pb_, &ev_b_);
    int own = -1;
    const int peer = attach_initiator(b.qp, mode(), &own);  // a plain socket at the far end, closed at teardown
    const unsigned long ino = testutil::inode_of(own);
    ASSERT_NE(ino, 0u);
    ASSERT_TRUE(poll_until_unwatched(b.rcq, ino)) << "b's socket stayed in the epoll set while its CQ was busy-polled";
    ASSERT_EQ(::shutdown(peer, SHUT_WR), 0);  // FIN, while b's socket is out of the set
    EXPECT_TRUE(eventually([&] { return ev_b_.has(b.qp_num, RI_AE_QP_LLP_CLOSED); }))
        << "nobody met the end of a stream whose consumer stopped polling";
    EXPECT_EQ(state_of(b.qp), RI_QPS_ERROR);
}

// On a same-host channel, a busy-polling consumer moves its own stream: what one post or poll could not move (a
// message beyond the poll's budget, a backlog behind a full ring) waits for its next poll, not for the progress
// thread. A consumer that then stops polling must not strand it: the thread's millisecond look takes the stream back
// and moves the rest, nobody polling on either side.
TEST_F(Stream, LargeMessagesOverAChannelGoOnWhenTheBusyPollingEndsStopPolling) {
    for (const uint64_t ring : {uint64_t{64} << 10, uint64_t{16} << 20}) {  // full ring; budget spent, ring not full
        SCOPED_TRACE("ring of " + std::to_string(ring >> 10) + " KiB");
        Mode m = mode();
        m.crc = false;
        m.same_host_ring = ring;
        End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
        connect(a, b, m);
        Region src = region(pa_, pattern(8u << 20, 21), 0);
        Region dst = region(pb_, std::vector<uint8_t>(8u << 20), kRemote);
        // Parked: small Writes, each awaited by polling, then empty polls.
        for (uint64_t i = 0; i < 32; ++i) {
            ASSERT_RI_OK(send(a.qp, i, RI_WR_RDMA_WRITE, {src.sge(0, 64)}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
            ASSERT_EQ(wait(a.scq, 1).size(), 1u);
        }
        ASSERT_TRUE(busy_poll(a.scq));
        ASSERT_RI_OK(send(a.qp, 100, RI_WR_RDMA_WRITE, {src.sge()}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
        // a stops polling now; b never polls.
        EXPECT_TRUE(eventually([&] { return dst.bytes() == src.bytes(); }))
            << "an 8 MiB Write stopped part way when its busy-polling sender stopped polling";
        auto sw = wait(a.scq, 1);
        ASSERT_EQ(sw.size(), 1u);
        EXPECT_EQ(sw[0].status, RI_WC_SUCCESS);
        // The other way: b busy-polls while 1 MiB Sends arrive, each pass of its polls ending at a completion,
        // and stops polling after the first: the rest are placed without it.
        for (uint64_t i = 0; i < 8; ++i) ASSERT_RI_OK(recv(b.qp, i, {dst.sge(i << 20, 1u << 20)}));
        ASSERT_TRUE(busy_poll(b.rcq));
        for (uint64_t i = 0; i < 8; ++i) ASSERT_RI_OK(send(a.qp, 200 + i, RI_WR_SEND, {src.sge(i << 20, 1u << 20)}));
        uint32_t first = 0;  // one completion taken, however many are there
        for (const auto until = Clock::now() + std::chrono::seconds(20); first == 0 && Clock::now() < until;) {
            ri_wc_t wc;
            ASSERT_RI_OK(v_->poll_cq(b.rcq, 1, &wc, &first));
        }
        ASSERT_EQ(first, 1u) << "the first Send did not complete at b within 20 s";
        EXPECT_EQ(wait(a.scq, 8).size(), 8u) << "Sends stopped part way when their busy-polling receiver stopped polling";
        EXPECT_TRUE(eventually([&] { return dst.bytes() == src.bytes(); })) << "the Sends' bytes did not all arrive";
        EXPECT_EQ(wait(b.rcq, 7).size(), 7u);
    }
}

// Both ends busy-poll and stream large Writes at each other through small rings: each fills its outbound ring and
// can go on only once the other reads. A poll that finds its ring full still reads the inbound one (try_service);
// one that did not left both ends waiting until the progress thread's look took the streams over.
TEST_F(Stream, BusyPollingEndsWritingAtEachOtherThroughFullChannelsBothFinish) {
    Mode m = mode();
    m.crc = false;
    m.same_host_ring = 64u << 10;
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, m);
    constexpr size_t kSize = 4u << 20;
    Region a_src = region(pa_, pattern(kSize, 31), 0), b_src = region(pb_, pattern(kSize, 32), 0);
    Region a_dst = region(pa_, std::vector<uint8_t>(kSize), kRemote), b_dst = region(pb_, std::vector<uint8_t>(kSize), kRemote);
    // Both parked: their consumer polls them without a pause (one thread here, both CQs in turn).
    auto poll_both = [&](size_t &done) {
        for (ri_cq_t c : {a.scq, b.scq}) {
            ri_wc_t wc[8];
            uint32_t got = 0;
            if (v_->poll_cq(c, 8, wc, &got) != RI_OK) return false;
            for (uint32_t k = 0; k < got; ++k) EXPECT_EQ(wc[k].status, RI_WC_SUCCESS);
            done += got;
        }
        return true;
    };
    size_t done = 0;
    for (const auto t = Clock::now() + std::chrono::milliseconds(20); Clock::now() < t;) ASSERT_TRUE(poll_both(done));
    for (uint64_t i = 0; i < 4; ++i) {
        const size_t off = i * (kSize / 4);
        ASSERT_RI_OK(send(a.qp, i, RI_WR_RDMA_WRITE, {a_src.sge(off, kSize / 4)}, RI_SEND_SIGNALED, b_dst.addr() + off,
                          b_dst.keys.rkey));
        ASSERT_RI_OK(send(b.qp, i, RI_WR_RDMA_WRITE, {b_src.sge(off, kSize / 4)}, RI_SEND_SIGNALED, a_dst.addr() + off,
                          a_dst.keys.rkey));
    }
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (done < 8 && Clock::now() < until) ASSERT_TRUE(poll_both(done));
    ASSERT_EQ(done, 8u) << "Writes each way through full rings, both ends polling: only " << done << " of 8 completed";
    EXPECT_TRUE(eventually([&] { return a_dst.bytes() == b_src.bytes() && b_dst.bytes() == a_src.bytes(); }))
        << "the bytes of the Writes each way differ at their targets";
}

// A consumer that alternates between busy-polling its CQ and sleeping on its notification (the sockets layer does
// that before every sleep): it polls until the stream is parked (the consumer moves it), arms the CQ, looks once
// more and sleeps on an eventfd its CEH raises. Whatever becomes due once it armed (input read or left for its
// polls, completions) must be completed and notified while it sleeps: nobody else polls its QP but a second thread
// of its own that now and then polls the same CQ (as the sockets layer's watcher does), which holds the CQ's lock
// when the consumer arms. The peer sends in bursts, each awaited, with pauses between them. A sleep that hears
// nothing within 5 s with Sends outstanding fails the test (never a hang); both the wire and a same-host channel.
void raise_eventfd(void *ctx, ri_rnic_t, ri_cq_t) {
    const uint64_t one = 1;
    (void)!::write(static_cast<int>(reinterpret_cast<intptr_t>(ctx)), &one, sizeof one);
}

class ArmedSleeper : public Fixture, public ::testing::WithParamInterface<bool> {};

TEST_P(ArmedSleeper, IsWokenForEveryBurstItsPeerSends) {
    const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ASSERT_GE(efd, 0);
    cleanup_.push_back([efd] { ::close(efd); });  // after the QPs and CQs (cleanups run last first)
    uint32_t ceh = 0;
    ASSERT_RI_OK(v_->set_ceh(rb_, &raise_eventfd, reinterpret_cast<void *>(static_cast<intptr_t>(efd)), &ceh));
    Mode m;
    if (GetParam()) {
        m.crc = false;
        m.same_host_ring = 256u << 10;
    }
    constexpr uint32_t kDepth = 64;
    End a = end(ra_, pa_, &ev_a_, qp_attr(kDepth)), b = end(rb_, pb_, &ev_b_, qp_attr(kDepth), ceh);
    connect(a, b, m);
    constexpr uint32_t kLen = 4096;
    Region src = region(pa_, pattern(kLen, 41), 0);
    Region dst = region(pb_, std::vector<uint8_t>(size_t{kLen} * kDepth), RI_ACCESS_LOCAL_WRITE);
    for (uint64_t i = 0; i < kDepth; ++i) ASSERT_RI_OK(recv(b.qp, i, {dst.sge(i * kLen, kLen)}));

    constexpr int kBursts = 150;
    constexpr uint32_t kBurst = 5;  // at most kDepth outstanding: each burst is awaited before the next
    std::atomic<uint64_t> received{0};
    std::atomic<bool> done{false};
    std::mutex repost;  // post_recv from both of b's pollers
    auto take = [&](ri_wc_t *wc, uint32_t got) {
        std::lock_guard g(repost);
        for (uint32_t k = 0; k < got; ++k) {
            EXPECT_EQ(wc[k].status, RI_WC_SUCCESS);
            EXPECT_EQ(recv(b.qp, wc[k].wr_id, {dst.sge(wc[k].wr_id * kLen, kLen)}), RI_OK);
        }
        received.fetch_add(got);
    };
    // b's second poller: an empty poll of the CQ now and then.
    std::thread watcher([&] {
        while (!done.load()) {
            ri_wc_t wc[8];
            uint32_t got = 0;
            if (v_->poll_cq(b.rcq, 8, wc, &got) == RI_OK && got > 0) take(wc, got);
            std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
    });
    // a: bursts of Sends, each completed at a before a pause and the next.
    std::thread sender([&] {
        for (int i = 0; i < kBursts && !done.load(); ++i) {
            for (uint32_t k = 0; k < kBurst; ++k) {
                EXPECT_EQ(send(a.qp, static_cast<uint64_t>(i) * kBurst + k, RI_WR_SEND, {src.sge()}), RI_OK);
            }
            if (wait(a.scq, kBurst, 10).size() != kBurst) break;
            const uint64_t want = static_cast<uint64_t>(i + 1) * kBurst;
            for (const auto until = Clock::now() + std::chrono::seconds(10); received.load() < want && !done.load() &&
                                                                              Clock::now() < until;) {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 4)));
        }
    });
    // b's consumer: busy-polls (parking the stream), arms, looks once more, sleeps on the eventfd.
    const uint64_t total = uint64_t{kBursts} * kBurst;
    int sleeps = 0;
    std::string failure;
    while (received.load() < total) {
        ri_wc_t wc[16];
        uint32_t got = 0;
        for (const auto until = Clock::now() + std::chrono::microseconds(300); Clock::now() < until;) {
            ASSERT_RI_OK(v_->poll_cq(b.rcq, 16, wc, &got));
            if (got > 0) {
                take(wc, got);
                break;
            }
        }
        if (got > 0) continue;
        ASSERT_RI_OK(v_->request_cq_notify(b.rcq, RI_CQ_NOTIFY_NEXT));
        ASSERT_RI_OK(v_->poll_cq(b.rcq, 16, wc, &got));
        if (got > 0) {
            take(wc, got);
            continue;
        }
        const uint64_t before = received.load();
        pollfd p{efd, POLLIN, 0};
        ++sleeps;
        if (::poll(&p, 1, 5000) != 1) {
            // The peer may simply have finished a burst and paused: a sleep without news is a failure only when
            // Sends were outstanding (completed at a) all along.
            if (received.load() == before && received.load() < total) {
                failure = "asleep 5 s on an armed CQ with " + std::to_string(received.load()) + " of " +
                          std::to_string(total) + " Sends received";
                break;
            }
            continue;
        }
        uint64_t n = 0;
        (void)!::read(efd, &n, sizeof n);
    }
    done.store(true);
    sender.join();
    watcher.join();
    EXPECT_TRUE(failure.empty()) << failure;
    EXPECT_EQ(received.load(), total);
    EXPECT_GT(sleeps, 0) << "the consumer never slept: the test did not test the sleep";
}

INSTANTIATE_TEST_SUITE_P(Paths, ArmedSleeper, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &i) { return i.param ? "SameHostChannel" : "Wire"; });

TEST_F(Stream, PeerSocketClosedMidTransferFlushesWithoutHanging) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    int kept = connect(a, b, mode(), true);
    ASSERT_GE(kept, 0);
    Region src = region(pa_, pattern(8u << 20, 6), RI_ACCESS_LOCAL_WRITE);
    Region dst = region(pb_, std::vector<uint8_t>(8u << 20), kRemote);
    for (uint64_t i = 0; i < 8; ++i) {
        ASSERT_RI_OK(send(a.qp, i, RI_WR_RDMA_WRITE, {src.sge()}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
    }
    ASSERT_RI_OK(recv(a.qp, 50, {src.sge(0, 16)}));
    // The connection breaks under both QPs (as when the peer's host goes away).
    ASSERT_EQ(::shutdown(kept, SHUT_RDWR), 0);
    ::close(kept);
    auto sw = wait(a.scq, 8);
    ASSERT_EQ(sw.size(), 8u);
    size_t failed = 0;
    for (auto &w : sw) {
        EXPECT_TRUE(w.status == RI_WC_SUCCESS || w.status == RI_WC_LLP_ERR || w.status == RI_WC_WR_FLUSH_ERR)
            << w.status;
        failed += w.status != RI_WC_SUCCESS;
    }
    EXPECT_GT(failed, 0u);  // 64 MiB do not fit in the socket buffers
    EXPECT_EQ(wait(a.rcq, 1).size(), 1u);
    EXPECT_TRUE(eventually([&] {
        return ev_a_.has(a.qp_num, RI_AE_QP_LLP_CLOSED) || ev_a_.has(a.qp_num, RI_AE_QP_LLP_RESET);
    }));
    EXPECT_TRUE(eventually([&] {
        return ev_b_.has(b.qp_num, RI_AE_QP_LLP_CLOSED) || ev_b_.has(b.qp_num, RI_AE_QP_LLP_RESET);
    }));
    EXPECT_EQ(state_of(a.qp), RI_QPS_ERROR);
    EXPECT_TRUE(eventually([&] { return state_of(b.qp) == RI_QPS_ERROR; }));
}

// The kVP hears of a QP's move to ERROR once. A broken stream makes each end's data path report it; the uAL's
// Modify QP to ERROR when the kAL's record of the end arrives (called here as the uAL calls it) then sends nothing
// more. A QP moved out of ERROR and back is reported again.
TEST_F(Stream, TheKvpHearsOfAMoveToErrorOnce) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    int kept = connect(a, b, mode(), true);
    ASSERT_GE(kept, 0);
    const int before = g_error_requests.load();
    ASSERT_EQ(::shutdown(kept, SHUT_RDWR), 0);
    ::close(kept);
    ASSERT_TRUE(eventually([&] { return g_error_requests.load() - before == 2; }))
        << g_error_requests.load() - before << " reports of the broken stream";
    EXPECT_EQ(state_of(a.qp), RI_QPS_ERROR);
    EXPECT_EQ(state_of(b.qp), RI_QPS_ERROR);
    EXPECT_RI_OK(modify_state(a.qp, RI_QPS_ERROR));
    EXPECT_RI_OK(modify_state(b.qp, RI_QPS_ERROR));
    EXPECT_EQ(g_error_requests.load() - before, 2);
    EXPECT_RI_OK(modify_state(a.qp, RI_QPS_IDLE));
    EXPECT_RI_OK(modify_state(a.qp, RI_QPS_ERROR));
    EXPECT_EQ(g_error_requests.load() - before, 3);
    EXPECT_EQ(state_of(a.qp), RI_QPS_ERROR);
}

TEST_F(Stream, OrderlyCloseSendsFinAfterOutstandingWork) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    Region src = region(pa_, pattern(4u << 20, 8), RI_ACCESS_LOCAL_WRITE);
    Region dst = region(pb_, std::vector<uint8_t>(4u << 20), RI_ACCESS_LOCAL_WRITE);
    ASSERT_RI_OK(recv(b.qp, 1, {dst.sge()}));
    ASSERT_RI_OK(recv(b.qp, 2, {dst.sge(0, 8)}));
    ASSERT_RI_OK(recv(a.qp, 3, {src.sge(0, 8)}));
    ASSERT_RI_OK(send(a.qp, 1, RI_WR_SEND, {src.sge()}));
    ASSERT_RI_OK(modify_state(a.qp, RI_QPS_CLOSING));
    // No new work while closing. The Send may have drained, the FIN gone and the peer's come back before this post
    // (the Modify QP is two kAL round trips here): then the QP is in ERROR, which takes the work and flushes it.
    const ri_status_t late = send(a.qp, 2, RI_WR_SEND, {src.sge(0, 8)});
    if (late == RI_OK) {
        EXPECT_EQ(state_of(a.qp), RI_QPS_ERROR) << "a post accepted in CLOSING";
    } else {
        EXPECT_STATUS(late, RI_EINVAL);
    }
    auto sw = wait(a.scq, late == RI_OK ? 2 : 1);
    ASSERT_EQ(sw.size(), late == RI_OK ? 2u : 1u);
    EXPECT_EQ(sw[0].status, RI_WC_SUCCESS);  // the outstanding Send went out before the FIN
    if (late == RI_OK) {
        EXPECT_EQ(sw[1].status, RI_WC_WR_FLUSH_ERR);
    }
    auto rw = wait(b.rcq, 2);
    ASSERT_EQ(rw.size(), 2u);
    EXPECT_EQ(rw[0].status, RI_WC_SUCCESS);
    EXPECT_TRUE(dst.bytes() == src.bytes());
    EXPECT_EQ(rw[1].status, RI_WC_WR_FLUSH_ERR);  // the peer's FIN: b flushes and goes to ERROR
    EXPECT_TRUE(ev_a_.has(a.qp_num, RI_AE_QP_SQ_DRAINED));
    EXPECT_TRUE(eventually([&] { return ev_b_.has(b.qp_num, RI_AE_QP_LLP_CLOSED); }));
    // b's close is a's FIN: a's close completes in ERROR.
    auto ar = wait(a.rcq, 1);
    ASSERT_EQ(ar.size(), 1u);
    EXPECT_EQ(ar[0].status, RI_WC_WR_FLUSH_ERR);
    EXPECT_EQ(state_of(a.qp), RI_QPS_ERROR);
    EXPECT_EQ(state_of(b.qp), RI_QPS_ERROR);
    // ERROR -> IDLE: the QP can take a new stream.
    ASSERT_RI_OK(modify_state(a.qp, RI_QPS_IDLE));
    EXPECT_EQ(state_of(a.qp), RI_QPS_IDLE);
}

// The stream starts with the FPDU size the transition gave and then follows the socket's MSS, which Linux raises as
// the peer's window opens (README, "FPDU size follows the MSS"). The peer here is a raw socket: the test reads the
// FPDUs off the wire.
TEST_F(Stream, FpdusGrowWithTheConnectionsMss) {
    End a = end(ra_, pa_, &ev_a_);
    auto [ca, cb] = tcp_pair();
    const int probe = ::dup(ca);  // a's socket, to read its MSS once the QP owns it
    ASSERT_GE(probe, 0);
    cleanup_.push_back([probe, cb] {
        ::close(probe);
        ::close(cb);
    });
    Mode m;
    m.rtr = RI_RTR_NONE;  // no RTR: every frame is a Write (or a zero-length nudge)
    ri_qp_attr_t x{};
    x.state = RI_QPS_RTS;
    x.llp = llp(m, true, ca);
    ASSERT_RI_OK(v_->modify_qp(a.qp, &x, RI_QP_ATTR_STATE | RI_QP_ATTR_LLP));
    constexpr size_t kMessage = 1u << 20;
    constexpr int kMessages = 4;
    Region src = region(pa_, pattern(kMessage, 11), RI_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < kMessages; ++i) {
        ASSERT_RI_OK(send(a.qp, static_cast<uint64_t>(i), RI_WR_RDMA_WRITE, {src.sge()}, RI_SEND_SIGNALED,
                       static_cast<uint64_t>(i) * kMessage, 0x1234));
    }
    // Walk the FPDUs by their ULPDU_Length fields; keep each Write's payload length in stream order.
    std::vector<size_t> payloads;
    size_t received = 0;
    std::vector<uint8_t> buf;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (received < kMessage * kMessages && Clock::now() < deadline) {
        pollfd p{cb, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        uint8_t chunk[65536];
        const ssize_t n = ::recv(cb, chunk, sizeof chunk, 0);
        ASSERT_GT(n, 0);
        buf.insert(buf.end(), chunk, chunk + n);
        size_t off = 0;
        while (buf.size() - off >= 2) {
            const size_t ulpdu = (size_t{buf[off]} << 8) | buf[off + 1];
            const size_t whole = iwarp::kMpaLengthLen + ulpdu + iwarp::pad_len(ulpdu) + iwarp::kMpaCrcLen;
            if (buf.size() - off < whole) break;
            ASSERT_NE(buf[off + 2] & 0x80, 0) << "an untagged frame";
            ASSERT_GE(ulpdu, iwarp::kTaggedHeaderLen);
            if (ulpdu > iwarp::kTaggedHeaderLen) payloads.push_back(ulpdu - iwarp::kTaggedHeaderLen);
            received += ulpdu - iwarp::kTaggedHeaderLen;
            off += whole;
        }
        buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(off));
    }
    ASSERT_EQ(received, kMessage * kMessages);
    EXPECT_EQ(wait(a.scq, kMessages).size(), size_t{kMessages});
    int mss = 0;
    socklen_t len = sizeof mss;
    ASSERT_EQ(::getsockopt(probe, IPPROTO_TCP, TCP_MAXSEG, &mss, &len), 0);
    // On loopback the MSS starts at 32 KiB at least, twice the 16 KiB this stream starts with.
    if (static_cast<size_t>(mss) < 2 * size_t{m.fpdu_max}) GTEST_SKIP() << "this loopback's MSS is " << mss;

    const size_t first = size_t{m.fpdu_max} - iwarp::kMpaCrcLen - iwarp::kMpaLengthLen - iwarp::kTaggedHeaderLen;
    const size_t largest = *std::max_element(payloads.begin(), payloads.end());
    EXPECT_EQ(payloads.front(), first);  // 16384: CRC, length field and header leave 16364 octets
    size_t sent = 0, i = 0;
    for (; sent < kMessage / 2; ++i) {  // the first look is after 1 MiB on the wire
        EXPECT_LE(payloads[i], first) << "FPDU " << i;
        sent += payloads[i];
    }
    EXPECT_GT(largest, first) << "the FPDUs never grew";
    EXPECT_LE(largest, iwarp::mulpdu(static_cast<size_t>(mss), false) - iwarp::kTaggedHeaderLen);
    // Fewer frames than at the first size, in the same bytes.
    EXPECT_LT(payloads.size(), (kMessage * kMessages + first - 1) / first);
}

TEST_F(Stream, ConsumerTerminateReachesThePeer) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    Region inbox = region(pb_, std::vector<uint8_t>(64), RI_ACCESS_LOCAL_WRITE);
    ASSERT_RI_OK(recv(b.qp, 1, {inbox.sge()}));
    ri_qp_attr_t t{};
    t.state = RI_QPS_TERMINATE;
    t.term_layer_etype = 0x02;  // RDMAP, remote operation error
    t.term_ecode = 0x07;        // catastrophic, this stream
    ASSERT_RI_OK(v_->modify_qp(a.qp, &t, RI_QP_ATTR_STATE | RI_QP_ATTR_TERM));
    uint32_t detail = 0;
    ASSERT_TRUE(eventually([&] { return ev_b_.has(b.qp_num, RI_AE_QP_TERMINATE_RECEIVED, &detail); }));
    EXPECT_EQ(detail, 0x0207u);
    auto br = wait(b.rcq, 1);
    ASSERT_EQ(br.size(), 1u);
    EXPECT_EQ(br[0].status, RI_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(eventually([&] { return state_of(a.qp) == RI_QPS_ERROR; }));
    EXPECT_FALSE(ev_a_.has(a.qp_num, RI_AE_QP_TERMINATE_SENT));  // the consumer asked for it: no event
}

TEST_F(Stream, IncomingReadsAndWritesProgressWhileTheConsumerDoesNotPoll) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    Region theirs = region(pb_, pattern(4u << 20, 10), kRemote);
    Region mine = region(pa_, std::vector<uint8_t>(4u << 20), RI_ACCESS_LOCAL_WRITE);
    Region src = region(pa_, pattern(2u << 20, 11), 0);
    // b never polls or posts: its progress thread answers the Read and places the Write.
    ASSERT_RI_OK(send(a.qp, 1, RI_WR_RDMA_READ, {mine.sge()}, RI_SEND_SIGNALED, theirs.addr(), theirs.keys.rkey));
    auto sw = wait(a.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, RI_WC_SUCCESS);
    EXPECT_TRUE(mine.bytes() == theirs.bytes());
    ASSERT_RI_OK(send(a.qp, 2, RI_WR_RDMA_WRITE, {src.sge()}, 0, theirs.addr(), theirs.keys.rkey));
    EXPECT_TRUE(eventually([&] {
        return std::equal(src.bytes().begin(), src.bytes().end(), theirs.bytes().begin());
    }));
}

// An answer's large segment with more of its batch behind it (a 64 KiB Write's or Read Response's first FPDU and its
// tail) leaves its CRC for a second sendmsg, worked out once the payload is in the socket. The peer checks that CRC
// like any other: every Write and Read arrives whole, and neither end hears of a Terminate.
TEST_F(Stream, AnAnswersLargeSegmentSendsItsCrcAfterItsPayload) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    Mode m = mode();
    m.fpdu_max = 65535;  // FPDUs as large as loopback's MSS makes them
    connect(a, b, m);
    constexpr size_t kSize = 65536;
    constexpr int kRounds = 8;
    Region src = region(pa_, pattern(kSize, 33), kRemote);
    Region dst = region(pb_, std::vector<uint8_t>(kSize), kRemote);
    Region back = region(pb_, std::vector<uint8_t>(kSize), RI_ACCESS_LOCAL_WRITE);
    Region ping = region(pb_, std::vector<uint8_t>(8), 0);
    Region pinged = region(pa_, std::vector<uint8_t>(8), kRemote);
    uint64_t id = 0;
    int split = 0;  // answers that went in two sendmsg calls
    for (uint8_t round = 1; round <= kRounds; ++round) {
        ping.bytes()[0] = round;
        ASSERT_RI_OK(send(b.qp, ++id, RI_WR_RDMA_WRITE, {ping.sge()}, RI_SEND_SIGNALED, pinged.addr(), pinged.keys.rkey));
        ASSERT_EQ(wait(b.scq, 1).size(), 1u);
        ASSERT_TRUE(eventually([&] { return pinged.bytes()[0] == round; }, 5)) << "a never heard from b";
        for (size_t i = 0; i < kSize; i += 61) src.bytes()[i] ^= round;  // every round's payload and CRC differ
        t_sends = 0;
        t_count_calls = true;
        ASSERT_RI_OK(send(a.qp, ++id, RI_WR_RDMA_WRITE, {src.sge(0, kSize)}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
        auto wc = wait(a.scq, 1);
        t_count_calls = false;
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, RI_WC_SUCCESS);
        if (t_sends == 2) ++split;
        EXPECT_TRUE(eventually([&] { return std::equal(src.bytes().begin(), src.bytes().end(), dst.bytes().begin()); }, 5))
            << "round " << int{round};
        // b reads the same bytes back: a's Read Response answers b's request, with its CRC after its payload too.
        std::fill(back.bytes().begin(), back.bytes().end(), 0);
        ASSERT_RI_OK(send(b.qp, ++id, RI_WR_RDMA_READ, {back.sge()}, RI_SEND_SIGNALED, src.addr(), src.keys.rkey));
        auto read = wait(b.scq, 1);
        ASSERT_EQ(read.size(), 1u);
        EXPECT_EQ(read[0].status, RI_WC_SUCCESS);
        EXPECT_EQ(back.bytes(), src.bytes()) << "round " << int{round};
    }
    EXPECT_GT(split, 0) << "no answer sent its CRC after its payload";
    // One more exchange each way: a Terminate over a CRC would have ended both QPs.
    ASSERT_RI_OK(send(b.qp, ++id, RI_WR_RDMA_WRITE, {ping.sge()}, RI_SEND_SIGNALED, pinged.addr(), pinged.keys.rkey));
    auto last = wait(b.scq, 1);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].status, RI_WC_SUCCESS);
    for (Events *e : {&ev_a_, &ev_b_}) {
        std::lock_guard g(e->mutex);
        EXPECT_TRUE(e->list.empty()) << "an asynchronous event (" << e->list.front().event_id << ") on a healthy stream";
    }
}

// A request/response exchange: each of a's Writes follows bytes from b, so a's transmit stages the payload the
// kernel would copy with the slow `rep movsb` at a page offset of its own (realign()). Every byte must still arrive,
// from sources at every page offset that matters (the aliased ones behind a 16-byte header, and the others), and
// from a source the consumer changes between posts.
TEST_F(Stream, WritesAnsweringThePeerArriveWholeFromEverySourceAlignment) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    constexpr size_t kSpan = 160u << 10;
    Region src = region(pa_, pattern(kSpan, 21), 0);
    Region dst = region(pb_, std::vector<uint8_t>(kSpan), kRemote);
    Region ping = region(pb_, std::vector<uint8_t>(8), 0);
    Region pinged = region(pa_, std::vector<uint8_t>(8), kRemote);
    uint64_t id = 0;
    uint8_t round = 0;
    for (size_t page_offset : {0, 1, 16, 20, 4080, 4095}) {
        for (size_t n : {1024, 4096, 32768, 65536, 100000}) {
            ++round;
            ping.bytes()[0] = round;
            ASSERT_RI_OK(send(b.qp, ++id, RI_WR_RDMA_WRITE, {ping.sge()}, RI_SEND_SIGNALED, pinged.addr(), pinged.keys.rkey));
            ASSERT_EQ(wait(b.scq, 1).size(), 1u);
            ASSERT_TRUE(eventually([&] { return pinged.bytes()[0] == round; }, 5)) << "a never heard from b";
            const size_t off = (page_offset - static_cast<size_t>(src.addr())) & 4095u;
            std::fill(dst.bytes().begin(), dst.bytes().end(), 0);
            ASSERT_RI_OK(send(a.qp, ++id, RI_WR_RDMA_WRITE, {src.sge(off, n)}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
            auto wc = wait(a.scq, 1);
            ASSERT_EQ(wc.size(), 1u);
            EXPECT_EQ(wc[0].status, RI_WC_SUCCESS);
            const auto from = src.bytes().begin() + static_cast<std::ptrdiff_t>(off);
            EXPECT_TRUE(eventually([&] { return std::equal(from, from + static_cast<std::ptrdiff_t>(n), dst.bytes().begin()); }, 5))
                << n << " bytes from page offset " << page_offset;
            // The next round's source differs, so a stale staged copy would show.
            for (size_t i = 0; i < n; i += 97) src.bytes()[off + i] ^= round;
        }
    }
}

// Autocorking: a consumer that busy-polls its CQ polls again within microseconds, so after the first post since a
// poll the next ones wait for that poll or for a full batch, and leave in one sendmsg (one TCP segment for small
// Writes, where each post was a segment of its own before). Requests held when the consumer stops polling are sent
// by the progress thread's next look, without any poll.
TEST_F(Stream, ABusyPollingSendersSmallWritesLeaveInBatchesAndNoneIsHeld) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    const int kept = connect(a, b, mode(), true);  // b's socket: b is the sender here
    ASSERT_GE(kept, 0);
    constexpr size_t kSize = 64;
    constexpr int kBatch = 9;   // the first goes alone, the next eight together
    constexpr int kRounds = 20;  // a round that started before the thread parked b's stream is tried again
    Region src = region(pb_, pattern(kSize * (kBatch * kRounds + 2), 12), 0);
    Region dst = region(pa_, std::vector<uint8_t>(src.bytes().size()), kRemote);
    auto data_segments = [&] {
        tcp_info i{};
        socklen_t len = sizeof i;
        EXPECT_EQ(::getsockopt(kept, IPPROTO_TCP, TCP_INFO, &i, &len), 0);
        return i.tcpi_data_segs_out;
    };
    auto arrived = [&](size_t from, size_t to) {
        return std::equal(src.bytes().begin() + static_cast<long>(from), src.bytes().begin() + static_cast<long>(to),
                          dst.bytes().begin() + static_cast<long>(from));
    };
    auto write = [&](size_t i) {
        return send(b.qp, i, RI_WR_RDMA_WRITE, {src.sge(kSize * i, kSize)}, RI_SEND_SIGNALED, dst.addr() + kSize * i,
                    dst.keys.rkey);
    };
    uint32_t best = UINT32_MAX;
    size_t next = 0;
    for (int round = 0; round < kRounds && best > 2; ++round) {
        ASSERT_TRUE(busy_poll(b.scq));  // long enough for the thread to park b's stream
        const uint32_t before = data_segments();
        for (int k = 0; k < kBatch; ++k) ASSERT_RI_OK(write(next + static_cast<size_t>(k)));
        ASSERT_TRUE(eventually([&] { return arrived(kSize * next, kSize * (next + kBatch)); }, 5)) << "round " << round;
        best = std::min(best, data_segments() - before);
        next += kBatch;
        EXPECT_EQ(wait(b.scq, kBatch).size(), static_cast<size_t>(kBatch));
    }
    EXPECT_LE(best, 2u) << "nine 64-byte Writes posted back to back never left in fewer than " << best
                        << " TCP segments";
    // Two more without a poll since: the second is held; nobody polls; it arrives anyway.
    ASSERT_RI_OK(write(next));
    ASSERT_RI_OK(write(next + 1));
    EXPECT_TRUE(eventually([&] { return arrived(kSize * next, kSize * (next + 2)); }, 5))
        << "a held Write was not sent once its consumer stopped polling";
    EXPECT_EQ(wait(b.scq, 2).size(), 2u);
    ::close(kept);
}

// Autocorking merges mid-size messages too: eight 8 KiB Writes posted back to back to a parked stream leave in two
// sendmsg calls (the first at once, the other seven with the next poll), where a 32 KiB limit on held payload made
// it three.
TEST_F(Stream, ABusyPollingSendersMidSizeWritesLeaveTogether) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    constexpr size_t kSize = 8192;
    constexpr int kBatch = 8;
    constexpr int kRounds = 20;  // a round that started before the thread parked b's stream is tried again
    Region src = region(pb_, pattern(kSize * kBatch * kRounds, 25), 0);
    Region dst = region(pa_, std::vector<uint8_t>(src.bytes().size()), kRemote);
    int best = INT_MAX;
    size_t next = 0;
    for (int round = 0; round < kRounds && best > 2; ++round) {
        ASSERT_TRUE(busy_poll(b.scq));  // long enough for the thread to park b's stream
        t_sends = 0;
        t_count_calls = true;
        for (int k = 0; k < kBatch; ++k) {
            const size_t i = next + static_cast<size_t>(k);
            ASSERT_RI_OK(send(b.qp, i, RI_WR_RDMA_WRITE, {src.sge(kSize * i, kSize)}, RI_SEND_SIGNALED,
                           dst.addr() + kSize * i, dst.keys.rkey));
        }
        const auto done = wait(b.scq, kBatch);
        t_count_calls = false;
        ASSERT_EQ(done.size(), static_cast<size_t>(kBatch));
        for (const ri_wc_t &c : done) EXPECT_EQ(c.status, static_cast<uint32_t>(RI_WC_SUCCESS));
        best = std::min(best, t_sends);
        next += kBatch;
    }
    EXPECT_LE(best, 2) << "eight 8 KiB Writes posted back to back never left in fewer than " << best << " sendmsg calls";
    // A Write completes once sent; its bytes are placed at the peer a little later.
    const auto sent = static_cast<long>(kSize * next);
    EXPECT_TRUE(eventually(
        [&] { return std::equal(src.bytes().begin(), src.bytes().begin() + sent, dst.bytes().begin()); }, 5));
}

// Streams whose sockets are full share a budget of unsent bytes (4 MiB unless the RNIC's unsent_budget option says
// otherwise): the k-th to fill may leave the largest power of two up to 4 MiB / k unsent in its socket
// (TCP_NOTSENT_LOWAT); a stream full alone is not limited. A new stream starts at 256 KiB. A stream leaves the count
// The uVP learns the RNIC's tunables from the Open RNIC reply: with the unsent budget off, a new stream's socket
// keeps the system's TCP_NOTSENT_LOWAT instead of starting at 256 KiB.
class UnlimitedStream : public Stream {
protected:
    std::string attach_options() const override { return R"({"unsent_budget": 0})"; }
};

TEST_F(UnlimitedStream, TheRnicsUnsentBudgetReachesTheUvp) {
    ri_cq_t c = cq(ra_, 16);
    ri_qp_init_attr_t x = qp_attr(8);
    ri_qp_t q = nullptr;
    ASSERT_RI_OK(v_->create_qp(pa_, c, c, nullptr, &x, &q));
    cleanup_.push_back([this, q] { EXPECT_RI_OK(v_->destroy_qp(q)); });
    int own = -1;
    (void)attach_initiator(q, mode(), &own);
    int v = -1;
    socklen_t len = sizeof v;
    ASSERT_EQ(::getsockopt(own, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len), 0);
    EXPECT_NE(v, 256 << 10) << "the first limit was set although the RNIC's unsent_budget is 0";
}

// when its socket took everything or the stream ends: later streams get the larger share again.
TEST_F(Stream, FullStreamsShareABudgetOfUnsentBytes) {
    constexpr size_t kQps = 32;
    constexpr size_t kMsg = 1 << 20;
    constexpr uint64_t kPosts = 6;  // 6 MiB per QP: a socket whose peer does not read takes about 2
    ri_cq_t c = cq(ra_, 1024);
    Region src = region(pa_, pattern(kMsg, 26), 0);
    // The QPs, each on a loopback connection whose far end is a plain socket the test reads (or not) itself.
    auto qps = std::make_shared<std::vector<ri_qp_t>>();
    cleanup_.push_back([this, qps] {
        for (ri_qp_t q : *qps) {
            if (q != nullptr) {
                EXPECT_RI_OK(v_->destroy_qp(q));
            }
        }
    });
    std::vector<int> fds, peers;
    auto attach = [&]() {
        ri_qp_init_attr_t x = qp_attr(8);
        ri_qp_t q = nullptr;
        EXPECT_RI_OK(v_->create_qp(pa_, c, c, nullptr, &x, &q));
        qps->push_back(q);
        int own = -1;
        peers.push_back(attach_initiator(q, mode(), &own));
        fds.push_back(own);
    };
    auto post = [&](size_t i) {
        for (uint64_t k = 0; k < kPosts; ++k) {
            ASSERT_RI_OK(send((*qps)[i], i * kPosts + k, RI_WR_RDMA_WRITE, {src.sge()}, RI_SEND_SIGNALED, 0x10000, 0x99));
        }
    };
    auto limit = [&](size_t i) {
        int v = -1;
        socklen_t len = sizeof v;
        EXPECT_EQ(::getsockopt(fds[i], IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len), 0);
        return v;
    };
    // The smallest limit set on sockets [from, to) (INT_MAX: none set).
    auto smallest = [&](size_t from, size_t to) {
        int m = INT_MAX;
        for (size_t i = from; i < to; ++i) {
            if (const int v = limit(i); v > 0) m = std::min(m, v);
        }
        return m;
    };
    for (size_t i = 0; i < kQps; ++i) attach();
    if (HasFailure()) return;
    EXPECT_EQ(limit(0), 256 << 10) << "a new stream's first limit";
    for (size_t i = 0; i < kQps; ++i) post(i);
    if (HasFatalFailure()) return;
    // The last of the 32 to fill gets 4 MiB / 32; none gets less.
    EXPECT_TRUE(eventually([&] { return smallest(0, kQps) == 128 << 10; }, 10)) << "smallest limit " << smallest(0, kQps);
    EXPECT_GE(smallest(0, kQps), 128 << 10);

    // The first half's peers read everything: their Writes complete and the streams leave the count. The second
    // half's QPs are destroyed while full.
    std::vector<uint8_t> sink(1 << 20);
    size_t done = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (done < kQps / 2 * kPosts && Clock::now() < deadline) {
        for (size_t i = 0; i < kQps / 2; ++i) (void)::recv(peers[i], sink.data(), sink.size(), MSG_DONTWAIT);
        ri_wc_t wc[16];
        uint32_t got = 0;
        ASSERT_RI_OK(v_->poll_cq(c, 16, wc, &got));
        for (uint32_t k = 0; k < got; ++k) {
            EXPECT_EQ(wc[k].status, static_cast<uint32_t>(RI_WC_SUCCESS));
            if (wc[k].wr_id < kQps / 2 * kPosts) ++done;  // (the others' first Writes fit in their sockets)
        }
    }
    ASSERT_EQ(done, kQps / 2 * kPosts) << "the drained QPs' Writes did not all complete";
    for (size_t i = kQps / 2; i < kQps; ++i) {
        EXPECT_RI_OK(v_->destroy_qp((*qps)[i]));
        (*qps)[i] = nullptr;
    }
    // Two new full streams: shares of two (4 MiB / 2 = 2 MiB for the second, none for the first). Had either way
    // of leaving the count been missed, they would count 18 or more and get 128 KiB at most.
    attach();
    attach();
    post(kQps);
    post(kQps + 1);
    if (HasFatalFailure()) return;
    EXPECT_TRUE(eventually([&] { return smallest(kQps, kQps + 2) == 2 << 20; }, 10))
        << "smallest limit of the two new streams " << smallest(kQps, kQps + 2);
}

// The engine queues a few requests at a time (fewer than a send queue holds): requests posted beyond its room wait
// in the send queue and are handed to it as the earlier ones leave. A consumer that posts more than that and then
// neither polls nor posts again (it waits on something else) still gets every one sent.
TEST_F(Stream, RequestsBeyondTheEnginesRoomLeaveWithoutAPoll) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    constexpr size_t kSize = 4096;
    constexpr uint32_t kCount = 40;  // five times the engine's room, in one call
    Region src = region(pa_, pattern(kSize * kCount, 13), 0);
    Region dst = region(pb_, std::vector<uint8_t>(src.bytes().size()), kRemote);
    std::vector<ri_sge_t> sges(kCount);
    std::vector<ri_send_wr_t> wrs(kCount);
    for (uint32_t i = 0; i < kCount; ++i) {
        sges[i] = src.sge(kSize * i, kSize);
        wrs[i].wr_id = i;
        wrs[i].opcode = RI_WR_RDMA_WRITE;
        wrs[i].flags = RI_SEND_SIGNALED;
        wrs[i].sgl = &sges[i];
        wrs[i].num_sge = 1;
        wrs[i].u.rdma.remote_addr = dst.addr() + kSize * i;
        wrs[i].u.rdma.rkey = dst.keys.rkey;
    }
    uint32_t posted = 0;
    ASSERT_RI_OK(v_->post_send(a.qp, wrs.data(), kCount, &posted));
    ASSERT_EQ(posted, kCount);
    // Nobody polls a's CQ until everything arrived.
    EXPECT_TRUE(eventually([&] { return dst.bytes() == src.bytes(); }, 5))
        << "requests posted beyond the engine's room waited for a poll that never came";
    EXPECT_EQ(wait(a.scq, kCount).size(), static_cast<size_t>(kCount));
}

TEST_F(Stream, SharedReceiveQueueFeedsQpsAndRaisesItsLimit) {
    ri_srq_attr_t sa{16, 2, 0, 0, 0x5151};
    ri_srq_t srq = nullptr;
    ASSERT_RI_OK(v_->create_srq(pb_, &sa, &srq));
    cleanup_.push_back([this, srq] { EXPECT_RI_OK(v_->destroy_srq(srq)); });
    End a = end(ra_, pa_, &ev_a_);
    End b;
    b.rnic = rb_;
    b.scq = cq(rb_);
    b.rcq = cq(rb_);
    ri_qp_init_attr_t qa = qp_attr();
    qa.flags = RI_QP_USE_SRQ;
    qa.rq_depth = 0;
    ASSERT_RI_OK(v_->create_qp(pb_, b.scq, b.rcq, srq, &qa, &b.qp));
    cleanup_.push_back([this, q = b.qp] { EXPECT_RI_OK(v_->destroy_qp(q)); });
    connect(a, b, mode());
    Region dst = region(pb_, std::vector<uint8_t>(16 * 32), RI_ACCESS_LOCAL_WRITE);
    for (uint64_t i = 0; i < 6; ++i) {
        ri_sge_t s = dst.sge(32 * i, 32);
        ri_recv_wr_t w{i, &s, 1, 0};
        uint32_t posted = 0;
        ASSERT_RI_OK(v_->post_srq_recv(srq, &w, 1, &posted));
    }
    ri_srq_attr_t lim{};
    lim.limit = 4;
    ASSERT_RI_OK(v_->modify_srq(srq, &lim, RI_SRQ_ATTR_LIMIT));
    Region src = region(pa_, pattern(32, 12), 0);
    for (uint64_t i = 0; i < 3; ++i) ASSERT_RI_OK(send(a.qp, i, RI_WR_SEND, {src.sge()}));
    auto rw = wait(b.rcq, 3);
    ASSERT_EQ(rw.size(), 3u);
    for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(rw[i].wr_id, i);
    ASSERT_TRUE(eventually([&] {
        std::lock_guard g(ev_b_.mutex);
        return std::any_of(ev_b_.list.begin(), ev_b_.list.end(), [](const ri_async_event_t &e) {
            return e.event_id == RI_AE_SRQ_LIMIT_REACHED && e.resource_type == RI_RES_SRQ && e.context == 0x5151;
        });
    }));
    EXPECT_EQ(wait(a.scq, 3).size(), 3u);
}

TEST_F(Stream, TwoHundredFiftySixQpsTransferAtOnce) {
    constexpr size_t kQps = 256;
    constexpr size_t kMsg = 8192;
    ri_cq_t acq = cq(ra_, 4096), bcq = cq(rb_, 4096);
    std::vector<End> as(kQps), bs(kQps);
    shared_cq_pairs(as, bs, acq, bcq, 4);
    if (HasFatalFailure()) return;
    Region src = region(pa_, pattern(kQps * kMsg, 13), 0);
    Region dst = region(pb_, std::vector<uint8_t>(kQps * kMsg), kRemote);
    Region wdst = region(pb_, std::vector<uint8_t>(kQps * kMsg), kRemote);
    // The memory an idle connected QP holds besides its rings: engine state made at RTS.
    malloc_trim(0);
    const size_t before = mallinfo2().uordblks;
    for (size_t i = 0; i < kQps; ++i) connect(as[i], bs[i], mode());
    const size_t after = mallinfo2().uordblks;
    const double per_qp = static_cast<double>(after - before) / (2 * kQps);
    RecordProperty("bytes_per_connected_qp", std::to_string(per_qp));
    std::printf("heap per idle connected QP (engine, sq_depth 4): %.0f bytes\n", per_qp);
    if (!kSanitized) {
        EXPECT_LT(per_qp, 16384.0);
    }
    for (size_t i = 0; i < kQps; ++i) {
        ASSERT_RI_OK(recv(bs[i].qp, i, {dst.sge(i * kMsg, kMsg)}));
        ASSERT_RI_OK(send(as[i].qp, i, RI_WR_SEND, {src.sge(i * kMsg, kMsg)}));
        ASSERT_RI_OK(send(as[i].qp, kQps + i, RI_WR_RDMA_WRITE, {src.sge(i * kMsg, kMsg)}, RI_SEND_SIGNALED,
                       wdst.addr() + i * kMsg, wdst.keys.rkey));
    }
    EXPECT_EQ(wait(bcq, kQps, 30).size(), kQps);
    EXPECT_EQ(wait(acq, 2 * kQps, 30).size(), 2 * kQps);
    EXPECT_TRUE(dst.bytes() == src.bytes());
    // A Write completes when sent; its placement at the peer follows.
    EXPECT_TRUE(eventually([&] { return wdst.bytes() == src.bytes(); }));
}

// More QPs on a CQ than one empty poll drives: the consumer's poll serves the QP that moved bytes last first, then
// the others in turn. That QP may be destroyed while others go on (the CQ forgets it), and the others' transfers
// complete with every byte.
TEST_F(Stream, ManyQpsOnACqTheBusiestFirstAndItMayGo) {
    constexpr size_t kQps = 8;
    constexpr size_t kMsg = 4096;
    ri_cq_t acq = cq(ra_, 1024), bcq = cq(rb_, 1024);
    std::vector<End> as(kQps), bs(kQps);
    shared_cq_pairs(as, bs, acq, bcq, 8, 0);  // pair 0 is destroyed by the test itself
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < kQps; ++i) connect(as[i], bs[i], mode());
    Region src = region(pa_, pattern(kQps * kMsg, 21), RI_ACCESS_LOCAL_WRITE);
    Region dst = region(pb_, pattern(kQps * kMsg, 22), kRemote);
    // Pair 0 moves bytes: Reads, each waited for by polling the shared CQ (the poll drives the streams).
    for (uint64_t i = 0; i < 16; ++i) {
        ASSERT_RI_OK(send(as[0].qp, i, RI_WR_RDMA_READ, {src.sge(0, kMsg)}, RI_SEND_SIGNALED, dst.addr(),
                       dst.keys.rkey));
        auto w = wait(acq, 1);
        ASSERT_EQ(w.size(), 1u);
        EXPECT_EQ(w[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
    }
    EXPECT_TRUE(std::equal(dst.bytes().begin(), dst.bytes().begin() + kMsg, src.bytes().begin()));
    // The busiest pair goes; the CQ must not serve it again.
    EXPECT_RI_OK(v_->destroy_qp(as[0].qp));
    EXPECT_RI_OK(v_->destroy_qp(bs[0].qp));
    for (size_t i = 1; i < kQps; ++i) {
        ASSERT_RI_OK(send(as[i].qp, i, RI_WR_RDMA_READ, {src.sge(i * kMsg, kMsg)}, RI_SEND_SIGNALED,
                       dst.addr() + i * kMsg, dst.keys.rkey));
    }
    auto w = wait(acq, kQps - 1);
    ASSERT_EQ(w.size(), kQps - 1);
    for (const ri_wc_t &c : w) EXPECT_EQ(c.status, static_cast<uint32_t>(RI_WC_SUCCESS));
    EXPECT_TRUE(std::equal(dst.bytes().begin() + kMsg, dst.bytes().end(), src.bytes().begin() + kMsg));
}

TEST_F(Stream, APollReadsOnlyStreamsThatHaveWorkOrAreItsOwn) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    // Connected and quiet, and not yet busy-polled (the progress thread parks a stream after 8 close polls): its
    // input is the thread's, which an arriving byte wakes. An empty poll has nothing to read for it.
    t_receives = 0;
    t_count_calls = true;
    for (int i = 0; i < 6; ++i) {
        ri_wc_t wc[4];
        uint32_t got = 0;
        EXPECT_RI_OK(v_->poll_cq(a.scq, 4, wc, &got));
        EXPECT_EQ(got, 0u);
    }
    t_count_calls = false;
    EXPECT_EQ(t_receives, 0) << "empty polls read a quiet stream the progress thread serves";
    // With a Read in flight, polls move the stream themselves (the counter sees them). On a busy machine the
    // progress thread may take every response of a round while the polling thread waits for a CPU: up to five
    // rounds of 16 Reads, of which at least one must have been read by a poll.
    Region src = region(pa_, pattern(64, 23), RI_ACCESS_LOCAL_WRITE);
    Region dst = region(pb_, pattern(64, 24), kRemote);
    t_receives = 0;
    for (int round = 0; round < 5 && t_receives == 0; ++round) {
        t_count_calls = true;
        for (uint64_t i = 0; i < 16; ++i) {
            ASSERT_RI_OK(send(a.qp, i, RI_WR_RDMA_READ, {src.sge(0, 64)}, RI_SEND_SIGNALED, dst.addr(), dst.keys.rkey));
            auto w = wait(a.scq, 1);
            ASSERT_EQ(w.size(), 1u);
            EXPECT_EQ(w[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        }
        t_count_calls = false;
    }
    EXPECT_GT(t_receives, 0) << "no poll read the stream while its Reads were in flight (80 Reads)";
    EXPECT_EQ(src.bytes(), dst.bytes());
}

// A stream of mid-size messages reads each FPDU (header, payload, CRC) in one call: an 8 KiB read took all but the
// last bytes of an 8 KiB Send and a second recv the rest.
TEST_F(Stream, AMidSizeFpduIsReadInOneCall) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    constexpr size_t kSize = 8192;
    constexpr int kRounds = 20;  // a message the progress thread read (b's stream not yet parked) is tried again
    Region src = region(pa_, pattern(kSize, 26), 0);
    Region dst = region(pb_, std::vector<uint8_t>(kSize), RI_ACCESS_LOCAL_WRITE);
    int best = INT_MAX;
    for (int round = 0; round < kRounds && best > 1; ++round) {
        ASSERT_RI_OK(recv(b.qp, static_cast<uint64_t>(round), {dst.sge()}));
        uint32_t early = 0;
        ASSERT_TRUE(busy_poll(b.rcq, &early));  // long enough for the thread to park b's stream
        ASSERT_EQ(early, 0u);
        t_receives_with_data = 0;
        t_count_calls = true;
        ASSERT_RI_OK(send(a.qp, static_cast<uint64_t>(round), RI_WR_SEND, {src.sge()}));
        const auto got = wait(b.rcq, 1);
        t_count_calls = false;
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].status, static_cast<uint32_t>(RI_WC_SUCCESS));
        EXPECT_EQ(got[0].byte_len, kSize);
        EXPECT_EQ(dst.bytes(), src.bytes());
        EXPECT_EQ(wait(a.scq, 1).size(), 1u);
        // The first message sets the stream's size; from the second on each must come in one call.
        if (round > 0 && t_receives_with_data > 0) best = std::min(best, t_receives_with_data);
        std::fill(dst.bytes().begin(), dst.bytes().end(), 0);
    }
    EXPECT_EQ(best, 1) << "an 8 KiB Send never arrived in fewer than " << best << " receive calls";
}

// Runs @p body on a thread whose stack holds @p bytes; false when no such thread could be made.
bool run_with_stack(size_t bytes, std::function<void()> body) {
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) != 0) return false;
    const bool sized = ::pthread_attr_setstacksize(&attr, bytes) == 0;
    pthread_t t;
    auto run = [](void *f) -> void * {
        (*static_cast<std::function<void()> *>(f))();
        return nullptr;
    };
    const bool made = sized && ::pthread_create(&t, &attr, run, &body) == 0;
    ::pthread_attr_destroy(&attr);
    if (made) ::pthread_join(t, nullptr);
    return made;
}

// A consumer's thread may have a small stack (dapltest's do): polling on one, with the mid-size FPDUs read through
// the staging buffer, must not run out of it.
TEST_F(Stream, APollOnASmallStackReadsMidSizeFpdus) {
    End a = end(ra_, pa_, &ev_a_), b = end(rb_, pb_, &ev_b_);
    connect(a, b, mode());
    constexpr size_t kSize = 16384;
    Region src = region(pa_, pattern(kSize, 27), 0);
    Region dst = region(pb_, std::vector<uint8_t>(kSize), RI_ACCESS_LOCAL_WRITE);
    size_t received = 0;
    const bool ran = run_with_stack(40u << 10, [&] {
        for (uint64_t i = 0; i < 4; ++i) {
            if (recv(b.qp, i, {dst.sge()}) != RI_OK) return;
            // Busy-polled first, so the stream is this thread's to read (parked), not the progress thread's.
            uint32_t early = 0;
            if (!busy_poll(b.rcq, &early) || early != 0) return;
            if (send(a.qp, i, RI_WR_SEND, {src.sge()}) != RI_OK) return;
            const auto give_up = Clock::now() + std::chrono::seconds(10);
            uint32_t got = 0;
            ri_wc_t wc[4];
            while (got == 0 && Clock::now() < give_up) {
                if (v_->poll_cq(b.rcq, 4, wc, &got) != RI_OK) return;
            }
            if (got != 1 || wc[0].status != RI_WC_SUCCESS || wc[0].byte_len != kSize) return;
            ++received;
        }
    });
    ASSERT_TRUE(ran);
    EXPECT_EQ(received, 4u);
    EXPECT_EQ(dst.bytes(), src.bytes());
    EXPECT_EQ(wait(a.scq, 4).size(), 4u);
}

// ---------------------------------------------------------------------------------------------------------------
// The nudge (docs/siw-interop.md): an initiator whose first FPDUs met silence sends a zero-length Write after 25 ms,
// and a second 200 ms later, so that a peer which left those FPDUs unread in its socket (Linux siw, when they
// arrive before it handed the socket to its QP) reads them. A peer that answers never sees one.

// One FPDU read off a raw socket: when it was complete, and its bytes (length, ULPDU, pad, CRC; no markers).
struct RawFrame {
    Clock::time_point at;
    std::vector<uint8_t> bytes;
    uint8_t opcode() const { return bytes[3] & 0x0f; }
    bool tagged() const { return (bytes[2] & 0x80) != 0; }
    size_t ulpdu() const { return (size_t{bytes[0]} << 8) | bytes[1]; }
};

// Reads whole FPDUs from @p fd until @p quiet passed without a byte, or @p limit passed in all.
std::vector<RawFrame> read_frames(int fd, std::chrono::milliseconds quiet, std::chrono::seconds limit) {
    std::vector<RawFrame> out;
    std::vector<uint8_t> buf;
    const auto end = Clock::now() + limit;
    auto last = Clock::now();
    while (Clock::now() < end && Clock::now() - last < quiet) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5) <= 0) continue;
        uint8_t chunk[4096];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n <= 0) break;
        last = Clock::now();
        buf.insert(buf.end(), chunk, chunk + n);
        for (;;) {
            if (buf.size() < 2) break;
            const size_t ulpdu = (size_t{buf[0]} << 8) | buf[1];
            const size_t whole = (2 + ulpdu + 3) / 4 * 4 + 4;  // padded to 4, then the CRC
            if (buf.size() < whole) break;
            out.push_back(RawFrame{last, std::vector<uint8_t>(buf.begin(), buf.begin() + static_cast<long>(whole))});
            buf.erase(buf.begin(), buf.begin() + static_cast<long>(whole));
        }
    }
    return out;
}

// A nudge is a zero-length tagged RDMA Write with STag 1 and TO 0: the Write RTR's frame.
void expect_nudge(const RawFrame &f) {
    EXPECT_EQ(f.ulpdu(), 14u);  // the tagged DDP/RDMAP header only
    EXPECT_TRUE(f.tagged());
    EXPECT_NE(f.bytes[2] & 0x40, 0) << "Last flag";
    EXPECT_EQ(f.opcode(), 0u) << "RDMA Write";
    const std::vector<uint8_t> stag_to{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_TRUE(std::equal(stag_to.begin(), stag_to.end(), f.bytes.begin() + 4));
}

class Nudge : public Fixture, public ::testing::WithParamInterface<Mode> {
protected:
    // attach_initiator(), then a 16-byte Send from the initiator; returns the raw peer's socket.
    int initiator_sends(End &a, const Mode &m, uint32_t seed) {
        a = end(ra_, pa_, &ev_a_);
        const int peer = attach_initiator(a.qp, m);
        Region src = region(pa_, pattern(16, seed), 0);
        EXPECT_RI_OK(send(a.qp, 1, RI_WR_SEND, {src.sge()}));
        return peer;
    }
};

TEST_P(Nudge, ASilentPeerGetsTwoNudgesAfterTheInitiatorsFirstMessage) {
    const Mode m = GetParam();
    End a;
    // Before the Send: the nudges' deadlines count from its sendmsg, which comes later.
    const auto before = Clock::now();
    const int peer = initiator_sends(a, m, 40);
    // Two nudges come within 25 + 200 ms of the Send, then nothing: 600 ms of quiet ends the read.
    auto frames = read_frames(peer, std::chrono::milliseconds(600), std::chrono::seconds(10));
    const size_t first = m.rtr == RI_RTR_WRITE ? 1 : 0;  // peer-to-peer: the Write RTR comes first
    ASSERT_EQ(frames.size(), first + 3) << "the RTR (peer-to-peer), the Send, two nudges and no more";
    EXPECT_EQ(frames[first].opcode(), 3u) << "Send";
    expect_nudge(frames[first + 1]);
    expect_nudge(frames[first + 2]);
    if (first == 1) {
        EXPECT_TRUE(frames[0].bytes == frames[2].bytes) << "a nudge is the Write RTR's frame";
    }
    // Lower bounds from a time before the Send only: a loaded host may send or read a nudge late, never early. (The
    // gap between the two as read is no bound: reading the first one late shortens it.)
    EXPECT_GE(frames[first + 1].at - before, std::chrono::milliseconds(25));
    EXPECT_GE(frames[first + 2].at - before, std::chrono::milliseconds(25 + 200));
    // The nudges completed nothing and broke nothing: the Send completed once, the QP is still in RTS.
    auto sw = wait(a.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, RI_WC_SUCCESS);
    ri_wc_t extra[4];
    uint32_t got = 0;
    EXPECT_RI_OK(v_->poll_cq(a.scq, 4, extra, &got));
    EXPECT_EQ(got, 0u);
    EXPECT_EQ(state_of(a.qp), RI_QPS_RTS);
}

TEST_P(Nudge, APeerThatAnswersGetsNone) {
    const Mode m = GetParam();
    End a;
    const int peer = initiator_sends(a, m, 41);
    // The peer answers what it got with a zero-length Write of its own (it names no memory: a discards it).
    auto first = read_frames(peer, std::chrono::milliseconds(10), std::chrono::seconds(5));
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(first.back().opcode(), 3u) << "Send";
    RawFrame answer;
    iwarp::FramingOptions opts;
    opts.crc = m.crc;
    iwarp::Transmitter tx(opts);
    iwarp::TxFrame frame;
    tx.build(iwarp::make_rtr(iwarp::kRtrWrite, 0).header, {}, {}, frame);
    for (size_t i = 0; i < frame.iovcnt; ++i) {
        const auto *b = static_cast<const uint8_t *>(frame.iov[i].iov_base);
        answer.bytes.insert(answer.bytes.end(), b, b + frame.iov[i].iov_len);
    }
    ASSERT_EQ(::send(peer, answer.bytes.data(), answer.bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(answer.bytes.size()));
    // Well past both nudges' times: nothing more comes.
    auto later = read_frames(peer, std::chrono::milliseconds(600), std::chrono::seconds(5));
    EXPECT_TRUE(later.empty()) << later.size() << " frames after the peer answered";
    EXPECT_EQ(state_of(a.qp), RI_QPS_RTS) << "the peer's zero-length Write was taken";
    EXPECT_EQ(wait(a.scq, 1).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, Nudge,
                         ::testing::Values(Mode{2, true, false, RI_RTR_WRITE, 16384, false},
                                           Mode{2, false, false, RI_RTR_NONE, 16384, false},
                                           Mode{1, true, false, RI_RTR_NONE, 16384, false}),
                         [](const ::testing::TestParamInfo<Mode> &p) { return p.param.name(); });

// A peer that asked for a Read or Send RTR may not take a zero-length Write: no nudge, however silent it is.
TEST_F(Nudge, NoneWhenThePeerChoseAReadOrSendRtr) {
    for (uint32_t rtr : {uint32_t{RI_RTR_READ}, uint32_t{RI_RTR_SEND}}) {
        End a;
        const int peer = initiator_sends(a, Mode{2, true, false, rtr, 16384, false}, 42);
        auto frames = read_frames(peer, std::chrono::milliseconds(600), std::chrono::seconds(10));
        ASSERT_EQ(frames.size(), 2u) << "the RTR and the Send only (RTR " << rtr << ")";
        EXPECT_EQ(frames[0].opcode(), rtr == RI_RTR_READ ? 1u : 3u) << "the RTR";
        EXPECT_EQ(frames[1].opcode(), 3u) << "the Send";
    }
}


// The RNIC's siw_nudge option off: a silent peer gets the Send and nothing more.
class NudgeOff : public Nudge {
protected:
    std::string attach_options() const override { return R"({"siw_nudge": false})"; }
};

TEST_F(NudgeOff, ASilentPeerGetsNoNudge) {
    End a;
    const int peer = initiator_sends(a, Mode{2, true, false, RI_RTR_NONE, 16384, false}, 43);
    auto frames = read_frames(peer, std::chrono::milliseconds(600), std::chrono::seconds(10));
    ASSERT_EQ(frames.size(), 1u) << "the Send only";
    EXPECT_EQ(frames[0].opcode(), 3u) << "the Send";
}

}  // namespace
