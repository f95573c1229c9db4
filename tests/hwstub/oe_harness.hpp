// Test harness for hwstub's offload engine under bad input: registered memory framed by canary guards, the host's
// side of a QP and a CQ, the engine with its hooks recorded, connected stream sockets, and an iWARP peer running the
// shared iwarp::Engine on the far end of a QP's stream. Used by the scribble tests (GoogleTest) and by the
// receive-path fuzz target (libFuzzer or the seeded driver), so it depends on neither.
#ifndef TESTS_HWSTUB_OE_HARNESS_HPP
#define TESTS_HWSTUB_OE_HARNESS_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "hw_queues.hpp"
#include "iwarp/engine.hpp"
#include "offload_engine.hpp"

namespace oe_harness {

using namespace std::chrono_literals;

/** @brief The byte every guard area holds; a different byte there is a write outside registered memory. */
inline constexpr uint8_t kCanary = 0xc5;

/**
 * @brief Polls @p done until it holds or @p limit passed; its last answer. The first 200 microseconds between
 *        yields (the engine thread usually answers within a few, and a sleep costs more than that), then every
 *        100 microseconds.
 */
inline bool wait_until(const std::function<bool()> &done, std::chrono::milliseconds limit = 5000ms) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + limit;
    while (!done()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return done();
        if (now - start < 200us) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(100us);
        }
    }
    return true;
}

/**
 * @brief Memory that registered regions are carved from: one shared anonymous mapping (so a helper process forked
 *        after it sees the same pages at the same address, for the engine's process_vm_* path) between two
 *        inaccessible pages (a wild write far outside faults instead of landing in some other object). Every carved
 *        buffer has kGuard canary bytes before and after it; intact() says whether all of them survived.
 */
class Arena {
public:
    /** @brief Canary bytes on each side of every buffer. */
    static constexpr size_t kGuard = 256;

    /** @brief An arena of @p capacity usable bytes (guards included). */
    explicit Arena(size_t capacity) {
        const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
        cap_ = (capacity + page - 1) / page * page;
        map_len_ = cap_ + 2 * page;
        void *p = ::mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return;
        map_ = static_cast<uint8_t *>(p);
        if (::mprotect(map_, page, PROT_NONE) != 0 || ::mprotect(map_ + page + cap_, page, PROT_NONE) != 0) {
            ::munmap(map_, map_len_);
            map_ = nullptr;
            return;
        }
        base_ = map_ + page;
        std::memset(base_, kCanary, cap_);
    }
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;
    ~Arena() {
        if (map_ != nullptr) ::munmap(map_, map_len_);
    }

    /** @brief True when the mapping was made. */
    [[nodiscard]] bool ok() const noexcept { return base_ != nullptr; }
    /** @brief A buffer of @p len bytes (64-byte aligned) with guards on both sides; nullptr when the arena is full. */
    uint8_t *carve(size_t len) {
        const size_t start = (used_ + kGuard + 63) / 64 * 64;
        if (base_ == nullptr || start + len + kGuard > cap_) return nullptr;
        guards_.emplace_back(used_, start);
        used_ = start + len;
        guards_.emplace_back(used_, used_ + kGuard);
        used_ += kGuard;
        return base_ + start;
    }
    /** @brief Every byte of the arena (buffers too) back to the canary pattern. */
    void refill() noexcept {
        if (base_ != nullptr) std::memset(base_, kCanary, cap_);
    }
    /** @brief Offset of the first guard byte that changed, or -1 when every guard holds the canary. */
    [[nodiscard]] long damaged() const noexcept {
        for (const auto &[from, to] : guards_) {
            for (size_t i = from; i < to; ++i) {
                if (base_[i] != kCanary) return static_cast<long>(i);
            }
        }
        return -1;
    }
    /** @brief True when every guard holds the canary. */
    [[nodiscard]] bool intact() const noexcept { return damaged() < 0; }

private:
    uint8_t *map_ = nullptr;
    size_t map_len_ = 0;
    uint8_t *base_ = nullptr;
    size_t cap_ = 0;
    size_t used_ = 0;
    std::vector<std::pair<size_t, size_t>> guards_;  // [from, to) offsets
};

/**
 * @brief A process that does nothing but exist, forked after the arena was mapped: a QP owned by it makes the engine
 *        reach the arena with process_vm_readv/writev (the path of a consumer in another process) while the test
 *        still sees every byte. It dies with its parent (PR_SET_PDEATHSIG) and with this object.
 */
class IdleChild {
public:
    IdleChild() {
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(0);
            for (;;) ::pause();
        }
    }
    IdleChild(const IdleChild &) = delete;
    IdleChild &operator=(const IdleChild &) = delete;
    ~IdleChild() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    /** @brief Its pid, or -1 when fork failed. */
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }

private:
    pid_t pid_ = -1;
};

/** @brief A file descriptor closed when it goes out of scope. */
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd &operator=(Fd &&o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(); }
    /** @brief The descriptor (still owned). */
    [[nodiscard]] int get() const noexcept { return fd_; }
    /** @brief Gives the descriptor up (to the engine, which closes it). */
    int release() noexcept { return std::exchange(fd_, -1); }
    /** @brief Closes it now. */
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

/**
 * @brief Two connected stream sockets: a TCP connection over 127.0.0.1 when @p tcp (what the kAL hands the engine),
 *        else an AF_UNIX socket pair (cheaper, for the fuzz target). False when they cannot be made.
 */
inline bool stream_pair(Fd &a, Fd &b, bool tcp) {
    if (!tcp) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
        a = Fd(sv[0]);
        b = Fd(sv[1]);
        return true;
    }
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.get() < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
        ::listen(listener.get(), 1) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
        return false;
    }
    Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (client.get() < 0 || ::connect(client.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        return false;
    }
    Fd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (server.get() < 0) return false;
    const int one = 1;
    (void)::setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)::setsockopt(server.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    a = std::move(server);
    b = std::move(client);
    return true;
}

/** @brief The negotiated parameters of a stream: MPA revision 1 with @p crc and @p markers, IRD and ORD 4. */
inline ri_llp_params_t llp_params(bool crc, bool markers) {
    ri_llp_params_t llp{};
    llp.fd = -1;
    llp.mpa_revision = 1;
    llp.mpa_flags = (crc ? uint32_t{RI_MPA_CRC} : 0u) | (markers ? uint32_t{RI_MPA_MARKERS} : 0u);
    llp.ird = 4;
    llp.ord = 4;
    llp.mss = 1460;
    return llp;
}

/** @brief A completion queue as the host has it: ring, control block and reader, in ASan-watched heap memory. */
struct HostCq {
    /** @brief CQ @p id of @p depth CQEs (a power of two). */
    HostCq(uint32_t id_, uint32_t depth_)
        : id(id_), depth(depth_), ring(depth_), ctrl(std::make_unique<hwstub_cq_ctrl>()),
          reader(ring.data(), depth_, ctrl.get()) {}
    /** @brief What the engine is given. */
    [[nodiscard]] hwstub::CqSetup setup() { return hwstub::CqSetup{id, ring.data(), depth, ctrl.get()}; }
    /** @brief Every valid CQE now in the ring, consumed. */
    std::vector<hwstub_cqe> drain() {
        std::vector<hwstub_cqe> got;
        hwstub_cqe c{};
        while (reader.poll(c)) got.push_back(c);
        return got;
    }

    uint32_t id;
    uint32_t depth;
    std::vector<hwstub_cqe> ring;
    std::unique_ptr<hwstub_cq_ctrl> ctrl;
    hwstub::CqReader reader;
};

/** @brief A QP's work queues as the host has them (ASan-watched heap memory) and the engine's view of them. */
struct HostQp {
    /** @brief QP @p qp_num with rings of @p depth slots, send slots of @p sq_slot bytes, receive slots of 64. */
    HostQp(uint32_t qp_num, uint32_t depth, uint32_t sq_slot, uint32_t cq_id)
        : sq_mem(static_cast<size_t>(depth) * sq_slot / 8), rq_mem(static_cast<size_t>(depth) * 64 / 8),
          sq_ctrl(std::make_unique<hwstub_wq_ctrl>()), rq_ctrl(std::make_unique<hwstub_wq_ctrl>()) {
        setup.qp_num = qp_num;
        setup.sq = hwstub::RingGeometry{reinterpret_cast<uint8_t *>(sq_mem.data()), depth, sq_slot};
        setup.sq_ctrl = sq_ctrl.get();
        setup.rq = hwstub::RingGeometry{reinterpret_cast<uint8_t *>(rq_mem.data()), depth, 64};
        setup.rq_ctrl = rq_ctrl.get();
        setup.send_cq = cq_id;
        setup.recv_cq = cq_id;
        setup.max_send_sge = 2;
        setup.max_recv_sge = 2;
        setup.max_inline = 32;
        setup.owner = ::getpid();
        setup.pd = 1;
        setup.context = 0xc0de0000u + qp_num;
        sq = hwstub::WqProducer(setup.sq, sq_ctrl.get());
        rq = hwstub::WqProducer(setup.rq, rq_ctrl.get());
    }
    /** @brief Copies @p bytes (at most a slot) into the next send slot and counts it; false when the ring is full. */
    bool put_send(const void *bytes, size_t len) {
        uint8_t *slot = sq.next();
        if (slot == nullptr) return false;
        std::memset(slot, 0, setup.sq.slot_size);
        std::memcpy(slot, bytes, std::min<size_t>(len, setup.sq.slot_size));
        sq.advance();
        return true;
    }
    /** @brief A send WQE with its SGEs after the header. */
    bool put_send(const hwstub_send_wqe &w, std::initializer_list<hwstub_sge> sges = {}) {
        std::vector<uint8_t> bytes(sizeof w + sges.size() * sizeof(hwstub_sge));
        std::memcpy(bytes.data(), &w, sizeof w);
        size_t at = sizeof w;
        for (const auto &g : sges) {
            std::memcpy(bytes.data() + at, &g, sizeof g);
            at += sizeof g;
        }
        return put_send(bytes.data(), bytes.size());
    }
    /** @brief A receive WQE of @p num_sge SGEs (the count written as given; @p sges may hold fewer). */
    bool put_recv(uint64_t wr_id, uint32_t num_sge, std::initializer_list<hwstub_sge> sges) {
        uint8_t *slot = rq.next();
        if (slot == nullptr) return false;
        std::memset(slot, 0, setup.rq.slot_size);
        hwstub_recv_wqe w{};
        w.wr_id = wr_id;
        w.num_sge = num_sge;
        std::memcpy(slot, &w, sizeof w);
        size_t at = sizeof w;
        for (const auto &g : sges) {
            if (at + sizeof g > setup.rq.slot_size) break;
            std::memcpy(slot + at, &g, sizeof g);
            at += sizeof g;
        }
        rq.advance();
        return true;
    }

    std::vector<uint64_t> sq_mem;
    std::vector<uint64_t> rq_mem;
    std::unique_ptr<hwstub_wq_ctrl> sq_ctrl;
    std::unique_ptr<hwstub_wq_ctrl> rq_ctrl;
    hwstub::QpSetup setup;
    hwstub::WqProducer sq;
    hwstub::WqProducer rq;
};

/** @brief An offload engine on its own engine page, with every interrupt and asynchronous event it raised. */
class Adapter {
public:
    Adapter() : page_(std::make_unique<hwstub_engine_page>()) {
        hwstub::EngineHooks hooks;
        hooks.interrupt = [](uint32_t) {};
        hooks.async_event = [this](const ri_async_event_t &e) {
            std::lock_guard g(m_);
            events_.push_back(e);
            cv_.notify_all();
        };
        oe = std::make_unique<hwstub::OffloadEngine>(page_.get(), hooks);
        bell = hwstub::Doorbell(page_.get(), -1);
    }
    Adapter(const Adapter &) = delete;
    Adapter &operator=(const Adapter &) = delete;
    ~Adapter() { oe.reset(); }  // joins the engine thread before the page goes

    /** @brief Starts the thread; false when it cannot. */
    bool start() {
        if (!oe->start()) return false;
        bell = hwstub::Doorbell(page_.get(), oe->doorbell_fd());
        return true;
    }
    /** @brief Publishes what @p qp has put on its queues and rings the doorbell. */
    void publish(HostQp &qp) {
        qp.sq.publish();
        qp.rq.publish();
        bell.ring();
    }
    /** @brief Waits for an event @p event_id about resource @p resource_id (any resource with UINT64_MAX). */
    bool wait_event(uint32_t event_id, uint64_t resource_id = UINT64_MAX, std::chrono::milliseconds limit = 5000ms) {
        std::unique_lock l(m_);
        return cv_.wait_for(l, limit, [&] { return count_locked(event_id, resource_id) > 0; });
    }
    /** @brief Events @p event_id about @p resource_id (any with UINT64_MAX) so far. */
    size_t count_events(uint32_t event_id, uint64_t resource_id = UINT64_MAX) {
        std::lock_guard g(m_);
        return count_locked(event_id, resource_id);
    }
    /** @brief Every event so far. */
    std::vector<ri_async_event_t> events() {
        std::lock_guard g(m_);
        return events_;
    }
    /** @brief Forgets the events so far (a long fuzz run would keep them all). */
    void clear_events() {
        std::lock_guard g(m_);
        events_.clear();
    }
    /** @brief The QP's state as the engine has it (UINT32_MAX when it does not know the QP). */
    uint32_t state(uint32_t qp_num) {
        uint32_t s = UINT32_MAX;
        return oe->qp_state(qp_num, s) == RI_OK ? s : UINT32_MAX;
    }
    /** @brief The engine page (dead flag, sleeping flag). */
    [[nodiscard]] hwstub_engine_page &page() noexcept { return *page_; }

    std::unique_ptr<hwstub::OffloadEngine> oe;
    hwstub::Doorbell bell;

private:
    size_t count_locked(uint32_t event_id, uint64_t resource_id) const {
        size_t n = 0;
        for (const auto &e : events_) {
            n += e.event_id == event_id && (resource_id == UINT64_MAX || e.resource_id == resource_id) ? 1 : 0;
        }
        return n;
    }

    std::unique_ptr<hwstub_engine_page> page_;
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<ri_async_event_t> events_;
};

/**
 * @brief The far end of a QP's stream: the shared iwarp::Engine on a socket, pumped by a thread of its own, as a
 *        remote RNIC would run it. It has regions of its own (for the QP's Writes and Reads), an endless supply of
 *        64 KiB receive buffers (for the QP's Sends), and records how the stream ended: the QP's Terminate, parsed,
 *        or the end of the byte stream.
 */
class Peer final : public iwarp::EngineOwner {
public:
    /** @brief Runs the engine on @p fd (taken over) with parameters @p llp, protection domain 1. */
    Peer(Fd fd, const ri_llp_params_t &llp)
        : fd_(std::move(fd)), sink_(1 << 16), frame_(std::make_unique<iwarp::TxFrame>()),
          engine_(*this, iwarp::engine_config(llp, 1, 64)) {
        thread_ = std::thread([this] { run(); });
    }
    Peer(const Peer &) = delete;
    Peer &operator=(const Peer &) = delete;
    ~Peer() override {
        stop_.store(true);
        thread_.join();
    }

    /** @brief Registers @p len bytes of its own memory as @p stag (zero-based) with @p access. */
    void add_region(uint32_t stag, size_t len, uint32_t access) {
        std::lock_guard g(m_);
        auto &mem = memory_[stag];
        mem.assign(len, 0x11);
        regions_[stag] = iwarp::Region{mem.data(), 0, len, access, 1, false};
    }
    /** @brief A copy of region @p stag's bytes as they are now (empty for an unknown STag). */
    std::vector<uint8_t> region_bytes(uint32_t stag) {
        std::lock_guard g(m_);
        auto it = memory_.find(stag);
        return it == memory_.end() ? std::vector<uint8_t>{} : it->second;
    }
    /** @brief Queues @p wr (its gather list in this object's memory); false when the engine refuses it. */
    bool post(const iwarp::WorkRequest &wr) {
        std::lock_guard g(m_);
        return static_cast<bool>(engine_.post(wr));
    }
    /** @brief A Send of @p bytes (copied here), tagged @p wr_id. */
    bool send(const std::vector<uint8_t> &bytes, uint64_t wr_id) {
        std::lock_guard g(m_);
        auto &copy = sends_.emplace_back(bytes);
        iwarp::WorkRequest wr;
        wr.wr_id = wr_id;
        wr.type = iwarp::WorkType::send;
        if (!copy.empty()) {
            wr.sge[0] = iwarp::LocalSpan{copy.data(), copy.size()};
            wr.num_sge = 1;
        }
        return static_cast<bool>(engine_.post(wr));
    }
    /** @brief Stops (true) or resumes moving bytes: a paused peer leaves the QP's frames in the socket. */
    void pause(bool paused) { paused_.store(paused); }
    /** @brief The Terminate the QP sent, if one arrived. */
    std::optional<iwarp::Terminate> terminate() {
        std::lock_guard g(m_);
        return terminate_;
    }
    /** @brief True once the byte stream ended (FIN or reset). */
    bool ended() {
        std::lock_guard g(m_);
        return eof_;
    }
    /** @brief Sends received from the QP and their lengths. */
    std::vector<uint32_t> received() {
        std::lock_guard g(m_);
        return received_;
    }
    /** @brief Completions of this side's own work (Sends, Writes, Reads) by wr_id. */
    std::vector<uint64_t> completed_ids() {
        std::lock_guard g(m_);
        return completed_;
    }
    /** @brief This side's engine counters (what it received from the QP: rx_fpdus, rx_bytes). */
    iwarp::EngineStats stats() {
        std::lock_guard g(m_);
        return engine_.stats();
    }
    /** @brief True when this side's engine found the QP's stream invalid (and answered with a Terminate). */
    bool failed() {
        std::lock_guard g(m_);
        return engine_.failed() && !terminate_;
    }

    // iwarp::EngineOwner, called with m_ held (every engine call is made under it)
    bool resolve_stag(uint32_t stag, iwarp::Region &out) override {
        auto it = regions_.find(stag);
        if (it == regions_.end()) return false;
        out = it->second;
        return true;
    }
    bool take_receive(iwarp::ReceiveBuffer &out) override {
        out = iwarp::ReceiveBuffer{};
        out.wr_id = ++recv_ids_;
        out.sge[0] = iwarp::LocalSpan{sink_.data(), sink_.size()};
        out.num_sge = 1;
        return true;
    }
    bool invalidate_stag(uint32_t) override { return false; }
    void completed(const iwarp::Completion &c) override {
        if (c.kind == iwarp::Completion::Kind::recv) {
            received_.push_back(c.byte_len);
        } else {
            completed_.push_back(c.wr_id);
        }
    }
    void peer_terminated(const iwarp::Terminate &t) override { terminate_ = t; }

private:
    // Moves bytes both ways until stopped; every engine call under m_.
    void run() {
        std::vector<uint8_t> in(1 << 16);
        size_t piece = 0, offset = 0;  // progress in the frame being written
        bool have = false;
        while (!stop_.load()) {
            pollfd p{fd_.get(), static_cast<short>(POLLIN | (have ? POLLOUT : 0)), 0};
            (void)::poll(&p, 1, 2);
            if (paused_.load()) {
                std::this_thread::sleep_for(1ms);
                continue;
            }
            std::lock_guard g(m_);
            while (!eof_) {
                const ssize_t n = ::recv(fd_.get(), in.data(), in.size(), MSG_DONTWAIT);
                if (n > 0) {
                    (void)engine_.receiver().feed(std::span<const uint8_t>(in.data(), static_cast<size_t>(n)));
                    continue;
                }
                if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof_ = true;
                break;
            }
            for (;;) {
                if (!have) {
                    if (!engine_.next_frame(*frame_)) break;
                    have = true;
                    piece = offset = 0;
                }
                iovec iov[iwarp::kMaxFpduIov];
                size_t cnt = 0;
                for (size_t i = piece; i < frame_->iovcnt && cnt < 1024; ++i, ++cnt) {
                    iov[cnt] = frame_->iov[i];
                    if (i == piece) {
                        iov[cnt].iov_base = static_cast<uint8_t *>(iov[cnt].iov_base) + offset;
                        iov[cnt].iov_len -= offset;
                    }
                }
                msghdr m{};
                m.msg_iov = iov;
                m.msg_iovlen = cnt;
                const ssize_t n = ::sendmsg(fd_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n <= 0) {
                    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                        have = false;  // the stream is gone: drop the frame
                        eof_ = true;
                    }
                    break;
                }
                size_t left = static_cast<size_t>(n);
                while (left > 0 && piece < frame_->iovcnt) {
                    const size_t rest = frame_->iov[piece].iov_len - offset;
                    if (left < rest) {
                        offset += left;
                        left = 0;
                    } else {
                        left -= rest;
                        ++piece;
                        offset = 0;
                    }
                }
                if (piece == frame_->iovcnt) {
                    have = false;
                    engine_.frame_sent();
                }
            }
        }
    }

    Fd fd_;
    std::mutex m_;
    std::map<uint32_t, std::vector<uint8_t>> memory_;
    std::map<uint32_t, iwarp::Region> regions_;
    std::vector<uint8_t> sink_;
    std::deque<std::vector<uint8_t>> sends_;
    std::unique_ptr<iwarp::TxFrame> frame_;
    iwarp::Engine engine_;
    uint64_t recv_ids_ = 0;
    std::vector<uint32_t> received_;
    std::vector<uint64_t> completed_;
    std::optional<iwarp::Terminate> terminate_;
    bool eof_ = false;
    std::atomic<bool> stop_{false};
    std::atomic<bool> paused_{false};
    std::thread thread_;
};

}  // namespace oe_harness

#endif  // TESTS_HWSTUB_OE_HARNESS_HPP
