// Per-RNIC state of the sockets layer, and the background thread.
#include "device.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "libc.hpp"
#include "rnicpi/host/log.hpp"

namespace openrdma::sockets {

namespace {
constexpr const char *kComponent = "sockets";
}  // namespace

Watcher::Watcher() {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    (void)real().epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_, &ev);
    thread_ = std::thread([this] { run(); });
}

Watcher::~Watcher() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    poke();
    if (thread_.joinable()) thread_.join();
    std::map<Stream *, std::shared_ptr<Stream>> left;
    {
        std::lock_guard lock(mutex_);
        left.swap(streams_);
    }
    left.clear();
    real().close(epfd_);
    real().close(wake_);
}

void Watcher::abandon() noexcept {
    // The child of a fork has no thread here and the streams are its parent's: forget them without a destructor.
    new std::map<Stream *, std::shared_ptr<Stream>>(std::move(streams_));
    streams_.clear();
    if (thread_.joinable()) thread_.detach();
    stop_ = true;
}

void Watcher::add(const std::shared_ptr<Stream> &s) {
    {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        streams_.emplace(s.get(), s);
        if (!s->prompt()) return;  // looked at on the tick (see Stream::prompt)
        for (const int fd : s->wake_fds()) {
            if (fd >= 0 && registered_.insert(fd).second) {
                epoll_event ev{};
                // Edge-triggered: a stream whose application thread is asleep on it leaves the descriptor raised for
                // that thread, and the background thread must not spin on it meanwhile.
                ev.events = EPOLLIN | EPOLLET;
                ev.data.ptr = s.get();
                (void)real().epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
            }
        }
    }
    poke();
}

void Watcher::refill(const std::weak_ptr<Device> &d) {
    {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        refills_.push_back(d);
    }
    poke();
}

void Watcher::poke() noexcept {
    const uint64_t one = 1;
    (void)real().write(wake_, &one, sizeof one);
}

size_t Watcher::size() const {
    std::lock_guard lock(mutex_);
    return streams_.size();
}

void Watcher::run() {
    epoll_event evs[64];
    for (;;) {
        // A short tick while bytes wait to go or a close to finish, a long one otherwise.
        int tick = 100;
        {
            std::lock_guard lock(mutex_);
            for (auto &[p, s] : streams_) {
                if (s->urgent()) tick = 2;
            }
        }
        const int n = ::epoll_wait(epfd_, evs, 64, tick);
        std::vector<std::shared_ptr<Stream>> work;
        std::vector<std::weak_ptr<Device>> refills;
        {
            std::lock_guard lock(mutex_);
            if (stop_) return;
            refills.swap(refills_);
            // Every held stream, notified or not: the ones just added, and the time-outs of closing ones.
            work.reserve(streams_.size());
            for (auto &[p, s] : streams_) work.push_back(s);
        }
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.ptr == nullptr) {
                uint64_t v;
                (void)real().read(wake_, &v, sizeof v);
            }
        }
        for (auto &w : refills) {
            if (auto d = w.lock()) d->refill();
        }
        for (auto &s : work) {
            s->background();
            // Nothing left to drive (the application's calls do the rest), or closed by the application and done:
            // the watcher lets go (for a closed stream, the last reference: the QP goes with it, here, unlocked).
            if (!s->wants_background() || s->finished()) {
                std::lock_guard lock(mutex_);
                // Looked at again under the lock: a stream that wants the thread again re-adds itself under it.
                if (s->wants_background() && !s->finished()) continue;
                for (const int fd : s->wake_fds()) {
                    if (fd >= 0 && registered_.erase(fd) > 0) (void)real().epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
                }
                streams_.erase(s.get());
            }
        }
    }
}

rdma::Expected<std::shared_ptr<Device>> Device::open(const std::shared_ptr<ual::AccessLayer> &al,
                                                     const std::string &address, const StreamShape &shape,
                                                     Watcher *watcher) {
    std::shared_ptr<Device> d(new Device(al, shape, watcher));
    auto a = al->open_adapter(address);
    if (!a) return a.error();
    d->adapter_ = *a;
    if (auto attr = d->adapter_->query(); attr) d->max_inline_ = std::min(attr->max_inline, kInlineMax);
    auto pz = d->adapter_->create_pz();
    if (!pz) return pz.error();
    d->pz_ = *pz;
    d->self_ = d;
    watcher->refill(d);  // kits ready before the first connection needs one
    return d;
}

namespace {
std::atomic<uint64_t> g_kits_made{0};
std::atomic<uint64_t> g_kits_reused{0};
}  // namespace

std::optional<Kit> Device::take_kit() {
    std::optional<Kit> k;
    std::optional<Kit> used;
    {
        std::lock_guard lock(mutex_);
        if (!kits_.empty()) {
            k = std::move(kits_.back());
            kits_.pop_back();
        } else if (!used_.empty()) {
            used = std::move(used_.back());
            used_.pop_back();
        }
    }
    if (used) {
        // An ended connection's kit the background thread has not reset yet (a busy machine, or connections closer
        // together than its turns): reset here. Two round trips to the kAL, where a new kit costs its creation, and
        // the QP is reused whatever the background thread's pace.
        if (reset_kit(*used)) {
            k = std::move(*used);
        } else {
            close_kit(*used);
        }
    }
    watcher_->refill(self_);
    return k;
}

void count_kit_made() noexcept { g_kits_made.fetch_add(1, std::memory_order_relaxed); }

KitCounts kit_counts() noexcept {
    return KitCounts{g_kits_made.load(std::memory_order_relaxed), g_kits_reused.load(std::memory_order_relaxed)};
}

void Device::expect_due() {
    std::lock_guard lock(mutex_);
    ++due_;
}

void Device::recycle(Kit k, bool due) {
    {
        std::lock_guard lock(mutex_);
        used_.push_back(std::move(k));
        if (due && due_ > 0) --due_;
    }
    watcher_->refill(self_);
}

void Device::forget_due() {
    {
        std::lock_guard lock(mutex_);
        if (due_ > 0) --due_;
    }
    watcher_->refill(self_);  // the kit made in its stead, if one is missing
}

void Device::close_kit(Kit &k) noexcept {
    if (k.ep) (void)k.ep->close();
    if (k.cq) (void)k.cq->close();
    if (k.block.addr != nullptr) give(k.block.index);
    k = Kit{};
}

bool Device::reset_kit(Kit &k) {
    // ERROR first: whatever is still posted (the receives of a connection that never reached RDMA mode, sends a
    // failure left) is flushed. Then IDLE, where the QP takes a new stream.
    auto failed = [](const char *step, const std::string &why) {
        RDMA_LOG_INFO(kComponent, "an ended connection's QP is closed, not reused: %s failed (%s)", step, why.c_str());
        return false;
    };
    ri_qp_attr_t a{};
    a.state = RI_QPS_ERROR;
    if (auto ok = k.ep->modify(a, RI_QP_ATTR_STATE); !ok) return failed("the move to ERROR", ok.describe());
    a.state = RI_QPS_IDLE;
    if (auto ok = k.ep->modify(a, RI_QP_ATTR_STATE); !ok) return failed("the move to IDLE", ok.describe());
    ri_wc_t wc[16];
    for (;;) {
        auto n = k.cq->poll(std::span<ri_wc_t>(wc, 16));
        if (!n) return failed("the CQ's poll", n.error().message());
        if (*n == 0) break;
    }
    for (;;) {  // notifications the last connection left
        auto e = k.dto->dequeue();
        if (!e || !*e) break;
    }
    if (!post_receives(k, shape_)) {
        RDMA_LOG_INFO(kComponent, "an ended connection's QP is closed, not reused: its receives could not be posted");
        return false;
    }
    g_kits_reused.fetch_add(1, std::memory_order_relaxed);
    k.reused = true;
    return true;
}

void Device::refill() {
    std::vector<Kit> used;
    {
        std::lock_guard lock(mutex_);
        used.swap(used_);
    }
    for (auto &k : used) {
        bool keep;
        {
            std::lock_guard lock(mutex_);
            keep = kits_.size() < kKitsKept;
        }
        if (keep && reset_kit(k)) {
            std::lock_guard lock(mutex_);
            kits_.push_back(std::move(k));
        } else {
            close_kit(k);
        }
    }
    for (;;) {
        {
            // A kit due back counts as ready, but one kit is always ready at once: a connection that comes before
            // the due one is back takes that, and the due one is ready for the next. Making a new kit for every
            // connection that came first would leave the ended QPs unused (closed at kKitsKept) whenever
            // connections follow each other closer than a connection's last event takes.
            std::lock_guard lock(mutex_);
            if (kits_.size() + std::min(due_, kKits - 1) >= kKits) return;
        }
        auto k = make_kit(*this);
        if (!k) return;  // a limit: connections make their own, and say why if they cannot
        std::lock_guard lock(mutex_);
        kits_.push_back(std::move(*k));
    }
}

Device::~Device() {
    for (auto *v : {&kits_, &used_}) {
        for (auto &k : *v) close_kit(k);
        v->clear();
    }
    for (auto &c : chunks_) {
        if (c.mr) (void)c.mr->close();
        c.mr.reset();
        ::munmap(c.addr, c.bytes);
    }
    chunks_.clear();
    if (pz_) (void)pz_->close();
    if (adapter_) (void)adapter_->close();
}

rdma::Expected<Block> Device::take() {
    std::lock_guard lock(mutex_);
    const size_t block = (shape_.bytes() + 4095) & ~size_t{4095};
    if (free_.empty()) {
        const size_t bytes = block * kBlocksPerChunk;
        void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return rdma::Error(RI_ENOMEM, "sockets: no memory for a stream's buffers");
        // A forked child must not share the parent's copy of registered memory (copy-on-write would move it).
        (void)::madvise(p, bytes, MADV_DONTFORK);
        auto mr = pz_->register_memory(p, bytes, RI_ACCESS_LOCAL_READ | RI_ACCESS_LOCAL_WRITE);
        if (!mr) {
            ::munmap(p, bytes);
            return mr.error();
        }
        const size_t first = chunks_.size() * kBlocksPerChunk;
        chunks_.push_back(Chunk{static_cast<uint8_t *>(p), bytes, *mr});
        for (size_t i = kBlocksPerChunk; i-- > 0;) free_.push_back(first + i);
    }
    const size_t index = free_.back();
    free_.pop_back();
    const Chunk &c = chunks_[index / kBlocksPerChunk];
    return Block{c.addr + (index % kBlocksPerChunk) * block, c.mr->keys().lkey, index};
}

void Device::give(size_t index) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(index);
}

}  // namespace openrdma::sockets
