// The sockets layer's data path: a byte stream over RDMA Sends with credit-based flow control.
#include "stream.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "device.hpp"
#include "krdma/abi.h"
#include "libc.hpp"
#include "link.hpp"
#include "rnicpi/host/log.hpp"

namespace openrdma::sockets {
namespace {

constexpr const char *kComponent = "sockets";
// Send wr_ids have kSendBit (an error completion's opcode is not defined: the wr_id tells sends from receives, whose
// wr_id is the receive buffer's index); kCtrlBit marks a message with no slot (credits or the end of stream alone).
constexpr uint64_t kSendBit = 1ull << 62;
constexpr uint64_t kCtrlBit = 1ull << 63;
constexpr uint64_t kXsBit = 1ull << 61;     // an operation of the extended interface (its slot in the low bits)
constexpr uint32_t kXsSlots = 16;           // extended operations outstanding at once
constexpr uint32_t kAdverts = 8;            // advertisement buffers (ring) in the block's tail
constexpr size_t kPeerRegionsMax = 1024;    // regions advertised and not yet taken
constexpr uint32_t kCtrlSlack = 4;         // send requests beyond the data slots (credit and end-of-stream messages)
constexpr uint32_t kSqExtra = 4 + 16;      // kCtrlSlack + kXsSlots: the send queue beyond the data slots

inline void cpu_relax() noexcept { __builtin_ia32_pause(); }

}  // namespace

// A position in a program's gather or scatter list, moved along as bytes are copied to or from it.
struct IovCursor {
    std::span<const iovec> iov;
    size_t vi = 0, voff = 0;
    // Copies up to @p n bytes between @p buf and the list (@p into_iov: from buf into the list); the count moved.
    size_t copy(uint8_t *buf, size_t n, bool into_iov) noexcept {
        size_t moved = 0;
        while (moved < n && vi < iov.size()) {
            const size_t k = std::min(n - moved, iov[vi].iov_len - voff);
            uint8_t *at = static_cast<uint8_t *>(iov[vi].iov_base) + voff;
            if (into_iov) {
                std::memcpy(at, buf + moved, k);
            } else {
                std::memcpy(buf + moved, at, k);
            }
            moved += k;
            voff += k;
            if (voff == iov[vi].iov_len) {
                ++vi;
                voff = 0;
            }
        }
        return moved;
    }
    // Up to @p max pieces of what is left, in @p out (empty pieces left out); their count.
    size_t rest(iovec *out, size_t max) const noexcept {
        size_t k = 0;
        for (size_t i = vi, off = voff; i < iov.size() && k < max; ++i, off = 0) {
            if (iov[i].iov_len > off) out[k++] = iovec{static_cast<uint8_t *>(iov[i].iov_base) + off, iov[i].iov_len - off};
        }
        return k;
    }
    // Moves past @p n bytes.
    void skip(size_t n) noexcept {
        while (n > 0 && vi < iov.size()) {
            const size_t k = std::min(n, iov[vi].iov_len - voff);
            n -= k;
            voff += k;
            if (voff == iov[vi].iov_len) {
                ++vi;
                voff = 0;
            }
        }
    }
};

// What a read asks for: the bytes its scatter list holds, and recv(2)'s MSG_PEEK and MSG_WAITALL.
struct RecvAsk {
    size_t want;
    bool peek, all;
    static RecvAsk of(std::span<const iovec> iov, int flags) noexcept {
        size_t want = 0;
        for (const auto &v : iov) want += v.iov_len;
        const bool peek = (flags & MSG_PEEK) != 0;
        return {want, peek, (flags & MSG_WAITALL) != 0 && !peek};
    }
};

rdma::Expected<Kit> make_kit(Device &device) {
    const StreamShape &shape = device.shape();
    Kit k;
    auto dto = ual::SimpleDispatcher::create(ual::EventStream::dto, 64);
    if (!dto) return dto.error();
    k.dto = *dto;
    const uint32_t depth = shape.recv_slots + shape.send_slots + kSqExtra + kCtrlSlack;
    auto cq = device.adapter().create_cq(depth, k.dto);
    if (!cq) return cq.error();
    k.cq = *cq;
    ual::EndpointAttributes a;
    a.sq_depth = shape.send_slots + kSqExtra;
    a.rq_depth = shape.recv_slots;
    a.sq_sge = 2;
    a.rq_sge = 1;
    a.rd_sge = 1;
    a.max_inline = device.max_inline();
    // The extended interface's one-sided operations: the regions' own rights decide what the peer may touch.
    a.ird = 4;
    a.ord = 4;
    a.access = RI_ACCESS_REMOTE_READ | RI_ACCESS_REMOTE_WRITE;
    auto ep = device.pz().create_endpoint(a, k.cq, k.cq);
    if (!ep) return ep.error();
    k.ep = *ep;
    auto block = device.take();
    if (!block) return block.error();
    k.block = *block;
    // Every receive buffer posted: the peer's initial credits (receive i is buffer i, wr_id i).
    if (!post_receives(k, shape)) {
        device.give(k.block.index);
        return rdma::Error(RI_ENOMEM, "sockets: cannot post the receive buffers");
    }
    count_kit_made();
    return k;
}

bool post_receives(const Kit &k, const StreamShape &shape) {
    for (uint32_t i = 0; i < shape.recv_slots; ++i) {
        ri_sge_t sge{reinterpret_cast<uint64_t>(k.block.addr) + static_cast<uint64_t>(i) * shape.recv_slot_len(),
                     shape.recv_slot_len(), k.block.lkey};
        ri_recv_wr_t wr{};
        wr.wr_id = i;
        wr.sgl = &sge;
        wr.num_sge = 1;
        if (!k.ep->post_recv(std::span<const ri_recv_wr_t>(&wr, 1))) return false;
    }
    return true;
}

Stream::Stream(std::shared_ptr<Device> device, const StreamShape &shape)
    : device_(std::move(device)), shape_(shape), slot_len_(shape.send_slots), arrived_(shape.recv_slots),
      xs_ops_(kXsSlots) {}

Stream::~Stream() {
    if (event_fd_ >= 0) real().close(event_fd_);
    if (xs_fd_ >= 0) real().close(xs_fd_);
    Kit k{dto_, cq_, ep_, Block{mem_, lkey_, mem_index_}};
    if (cm_final_ && ep_ && cq_ && dto_ && mem_ != nullptr) {
        // The connection's last event came: nothing more reaches the QP, which can serve the next connection.
        device_->recycle(std::move(k), due_);
    } else {
        if (due_) {
            RDMA_LOG_INFO(kComponent, "a QP closed in order is not kept for the next connection: %s",
                          cm_final_ ? "it lost part of its kit" : "its connection's last event did not come within 1 s");
            device_->forget_due();
        }
        device_->close_kit(k);
    }
}

rdma::Expected<std::shared_ptr<Stream>> Stream::prepare(const std::shared_ptr<Device> &device,
                                                       const StreamShape &shape) {
    std::shared_ptr<Stream> s(new Stream(device, shape));
    if (auto ok = s->setup(); !ok) return ok.error();
    return s;
}

Hello Stream::hello(uint32_t recv_slots, uint32_t recv_slot_len) noexcept {
    Hello h{};
    std::memcpy(h.magic, "ORSK", 4);
    h.version = 1;
    h.recv_slots = recv_slots;
    h.recv_slot_len = recv_slot_len;
    return h;
}

bool Stream::is_decline(std::span<const uint8_t> pd) noexcept {
    Hello h{};
    if (pd.size() < sizeof h) return false;
    std::memcpy(&h, pd.data(), sizeof h);
    return std::memcmp(h.magic, "ORSK", 4) == 0 && h.version == 1 && h.recv_slots == 0;
}

rdma::Expected<void> Stream::setup() {
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) return rdma::Error(rdma::from_errno(errno), "sockets: eventfd");
    // A kit made ahead by the background thread, or one made now: the QP and CQ creation are the setup's
    // round trips to the kAL that need not wait for the connection.
    std::optional<Kit> kit = device_->take_kit();
    if (!kit) {
        auto made = make_kit(*device_);
        if (!made) return made.error();
        kit = std::move(*made);
    }
    dto_ = kit->dto;
    cq_ = kit->cq;
    ep_ = kit->ep;
    mem_ = kit->block.addr;
    lkey_ = kit->block.lkey;
    mem_index_ = kit->block.index;
    kit_reused_ = kit->reused;
    return {};
}

rdma::Expected<void> Stream::begin(int tcp, bool initiator) {
    auto cm = ual::SimpleDispatcher::create(ual::EventStream::cm_message, 16);
    if (!cm) return cm.error();
    cm_ = *cm;
    std::weak_ptr<Stream> weak = weak_from_this();
    cm_->set_callback(
        [weak](const ual::Event &e) {
            if (auto self = weak.lock()) self->on_connection(e);
        },
        device_->access_layer().executor());
    ep_->set_connection_dispatcher(cm_);
    const Hello h = hello(shape_.recv_slots, shape_.recv_slot_len());
    const auto *p = reinterpret_cast<const uint8_t *>(&h);
    uint32_t flags = 0;
    if (shape_.direct) {
        flags = KRDMA_CONVERT_BYTE_CHANNEL;
        if (Links::get().enabled()) {
            flags |= KRDMA_CONVERT_LINK;
            if (initiator) link_peer_ = peer_key(tcp);
        }
    }
    return ep_->convert(tcp, std::span<const uint8_t>(p, sizeof h),
                        initiator ? KRDMA_CONVERT_INITIATOR : KRDMA_CONVERT_RESPONDER, std::chrono::milliseconds(0),
                        flags);
}

rdma::Expected<std::shared_ptr<Stream>> Stream::over_link(const std::shared_ptr<Device> &device,
                                                         const StreamShape &shape, int bell) {
    std::shared_ptr<Stream> s(new Stream(device, shape));
    s->event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->event_fd_ < 0) {
        real().close(bell);
        return rdma::Error(rdma::from_errno(errno), "sockets: eventfd");
    }
    if (const ri_status_t rc = s->bytes_.open(bell); rc != RI_OK) {
        return rdma::Error(rc, std::string("sockets: the link's byte channel cannot be opened: ") + std::strerror(rc));
    }
    // No connection events will come: its end is the channel's (closed, hung up, or its peer gone).
    s->cm_final_ = true;
    s->same_host_.store(true, std::memory_order_relaxed);
    s->direct_.store(true, std::memory_order_release);
    s->state_.store(State::open, std::memory_order_release);
    return s;
}

void Stream::on_connection(const ual::Event &e) {
    std::unique_lock lock(mutex_);
    if (std::getenv("OPENRDMA_SOCKETS_TRACE") != nullptr) {
        std::fprintf(stderr, "connection event %u (status %d) in state %s: credits %u arrived %u peer_fin %d%s\n", e.id,
                     e.connection ? e.connection->status : 0, state_name(), credits_, arr_count_, peer_fin_,
                     e.connection && e.connection->byte_channel && *e.connection->byte_channel ? " byte channel" : "");
    }
    switch (static_cast<ual::CmEventId>(e.id)) {
        case ual::CmEventId::established: {
            Hello h{};
            const auto &pd = e.connection ? e.connection->private_data : std::vector<uint8_t>{};
            if (pd.size() < sizeof h) {
                RDMA_LOG_WARN(kComponent, "the peer's MPA private data has %zu bytes, not a hello", pd.size());
                fail_locked(EPROTO);
                break;
            }
            std::memcpy(&h, pd.data(), sizeof h);
            if (std::memcmp(h.magic, "ORSK", 4) != 0 || h.version != 1 || h.recv_slots == 0 ||
                h.recv_slot_len <= sizeof(MessageHeader)) {
                RDMA_LOG_WARN(kComponent, "the peer's hello is not one this layer speaks");
                fail_locked(EPROTO);
                break;
            }
            peer_slot_len_ = h.recv_slot_len;
            credits_ = h.recv_slots;
            same_host_.store((e.connection->llp.mpa_flags & RI_LLP_SAME_HOST) != 0, std::memory_order_relaxed);
            if (const auto &bc = e.connection->byte_channel; bc && *bc) {
                // The kAL gave both ends the byte channel or neither: an end that cannot use it ends the connection
                // rather than send on the QP to a peer that reads the channel.
                if (const ri_status_t rc = bytes_.open(bc->release()); rc != RI_OK) {
                    RDMA_LOG_WARN(kComponent, "the byte channel cannot be opened: %s", std::strerror(rc));
                    fail_locked(ECONNRESET);
                    break;
                }
                direct_.store(true, std::memory_order_release);
                background_.store(false, std::memory_order_relaxed);  // the watcher learns the bell (wake_fds)
                if (const auto &l = e.connection->link; l && *l) {
                    Links::get().adopt(l->release(), link_peer_, bytes_.ring_size());
                }
            }
            if (state_.load() == State::converting) state_.store(State::open, std::memory_order_release);
            post_locked();
            break;
        }
        case ual::CmEventId::rejected:
            cm_final_ = true;
            // The peer's layer declined (it has not the memory or the QP for one more stream): nothing was sent
            // but the two MPA frames, so the connection goes on as TCP. Any other refusal ends it.
            if (e.connection && is_decline(e.connection->private_data) && state_.load() == State::converting) {
                state_.store(State::declined, std::memory_order_release);
            } else {
                fail_locked(ECONNREFUSED);
            }
            break;
        case ual::CmEventId::unreachable:
        case ual::CmEventId::timeout:
            cm_final_ = true;
            fail_locked(e.connection && e.connection->status != 0 ? e.connection->status : ETIMEDOUT);
            break;
        case ual::CmEventId::broken:
            cm_final_ = true;
            (void)poll_locked();
            if (peer_fin_) {  // the peer ended its stream first (and exited): an end, not a reset
                if (state_.load() != State::failed) state_.store(State::closed, std::memory_order_release);
            } else {
                fail_locked(ECONNRESET);
            }
            break;
        case ual::CmEventId::peer_disconnect:
            // A connection's end is reported once (peer_disconnect, broken or disconnected): this is its last event.
            cm_final_ = true;
            // In order: every message the peer sent came before it. What the CQ still holds is read first.
            (void)poll_locked();
            peer_fin_ = true;
            break;
        case ual::CmEventId::disconnected:
            cm_final_ = true;
            (void)poll_locked();
            if (state_.load() != State::failed) state_.store(State::closed, std::memory_order_release);
            break;
        default:
            break;
    }
    mirror_locked();
    update_background_locked();
    cv_.notify_all();
    const uint64_t one = 1;
    (void)real().write(event_fd_, &one, sizeof one);
    // A closed stream's last event: the background thread finishes it and gives its kit back now, for a connection
    // that may be waiting to take one, rather than on its next tick.
    if (closing_ && cm_final_) device_->poke();
}

uint8_t *Stream::send_slot(uint32_t seq) const noexcept {
    return mem_ + static_cast<size_t>(shape_.recv_slots) * shape_.recv_slot_len() +
           static_cast<size_t>(seq % shape_.send_slots) * shape_.slot;
}

uint8_t *Stream::recv_slot(uint32_t idx) const noexcept {
    return mem_ + static_cast<size_t>(idx) * shape_.recv_slot_len();
}

void Stream::repost_locked(uint32_t slot) {
    ri_sge_t sge{reinterpret_cast<uint64_t>(recv_slot(slot)), shape_.recv_slot_len(), lkey_};
    ri_recv_wr_t wr{};
    wr.wr_id = slot;
    wr.sgl = &sge;
    wr.num_sge = 1;
    if (!ep_->post_recv(std::span<const ri_recv_wr_t>(&wr, 1))) {
        if (sticky_error_ == 0) sticky_error_ = ENOMEM;
        return;
    }
    ++owed_;
}

uint8_t *Stream::tail() const noexcept {
    return send_slot(0) + static_cast<size_t>(shape_.send_slots) * shape_.slot;
}

bool Stream::post_payload_locked(const ri_sge_t *payload, uint16_t flags, uint64_t wr_id) {
    // The header goes from its own small buffer in the block's tail: one per send request the queue can hold, so
    // the ring never reaches one still outstanding.
    auto *hdrs = reinterpret_cast<MessageHeader *>(tail());
    const uint32_t h = ctrl_seq_++ % (shape_.send_slots + kSqExtra);
    hdrs[h] = MessageHeader{owed_, flags, 0};
    ri_sge_t sge[2] = {{reinterpret_cast<uint64_t>(&hdrs[h]), sizeof(MessageHeader), lkey_}, {}};
    if (payload != nullptr) sge[1] = *payload;
    return post_send_locked(sge, payload != nullptr ? 2 : 1, 0, wr_id);
}

bool Stream::post_send_locked(const ri_sge_t *sgl, uint32_t nsge, uint32_t send_flags, uint64_t wr_id) {
    ri_send_wr_t wr{};
    wr.wr_id = wr_id;
    wr.opcode = RI_WR_SEND;
    wr.flags = RI_SEND_SIGNALED | send_flags;
    wr.sgl = sgl;
    wr.num_sge = nsge;
    if (!ep_->post_send(std::span<const ri_send_wr_t>(&wr, 1))) return false;
    owed_ = 0;  // the message's header returned them
    --credits_;
    ++sq_used_;
    counters_.tx_messages.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool Stream::post_inline_locked(IovCursor &from, size_t len) {
    if (len + sizeof(MessageHeader) > device_->max_inline() || len > peer_slot_len_ - sizeof(MessageHeader) ||
        credits_ <= 1 || sq_used_ >= shape_.send_slots + kCtrlSlack) {
        return false;
    }
    alignas(8) uint8_t buf[Device::kInlineMax];
    const MessageHeader h{owed_, 0, 0};
    std::memcpy(buf, &h, sizeof h);
    IovCursor at = from;  // moved only once the message went
    (void)at.copy(buf + sizeof h, len, false);
    const ri_sge_t sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(sizeof h + len), 0};  // no lkey
    // No slot to free at its completion: kCtrlBit.
    if (!post_send_locked(&sge, 1, RI_SEND_INLINE, kSendBit | kCtrlBit)) return false;
    from = at;
    counters_.tx_inline.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool Stream::post_message_locked(uint32_t slot, uint32_t len, uint16_t flags) {
    if (len == 0) return post_payload_locked(nullptr, flags, kSendBit | kCtrlBit);
    const ri_sge_t data{reinterpret_cast<uint64_t>(send_slot(slot)), len, lkey_};
    return post_payload_locked(&data, flags, kSendBit | slot);
}

int Stream::xs_post_locked(ri_send_wr_t &wr, uint32_t op, uint64_t context, uint64_t length) {
    uint32_t i = 0;
    while (i < kXsSlots && xs_ops_[i].busy) ++i;
    if (i == kXsSlots) return -EAGAIN;  // as many operations outstanding as the queue takes
    wr.wr_id = kSendBit | kXsBit | i;
    if (!ep_->post_send(std::span<const ri_send_wr_t>(&wr, 1))) return -EIO;
    xs_ops_[i] = XsOp{context, op, length, true};
    ++sq_used_;
    return 0;
}

void Stream::xs_complete_locked(const ri_wc_t &wc) {
    --sq_used_;
    const uint32_t i = static_cast<uint32_t>(wc.wr_id & 0xffff);
    if (i >= kXsSlots || !xs_ops_[i].busy) return;
    XsOp &o = xs_ops_[i];
    int status = 0;
    switch (wc.status) {
        case RI_WC_SUCCESS: break;
        case RI_WC_REM_ACCESS_ERR:
        case RI_WC_LOC_PROT_ERR:
        case RI_WC_LOC_ACCESS_ERR: status = EACCES; break;
        case RI_WC_WR_FLUSH_ERR: status = ECANCELED; break;
        default: status = EIO; break;
    }
    xs_done_.push_back(XsCompletion{o.context, o.op, status, status == 0 ? o.length : 0});
    o.busy = false;
    const uint64_t one = 1;
    if (xs_fd_ >= 0) (void)real().write(xs_fd_, &one, sizeof one);
}

int Stream::advertise(const AdvertWire &a, bool nonblock) {
    std::unique_lock lock(mutex_);
    for (;;) {
        const State st = state_.load();
        if (st == State::declined) return -EOPNOTSUPP;  // TCP after all: not in RDMA mode
        if (st == State::failed || st == State::closed) return -EPIPE;
        if (st == State::open) {
            (void)poll_locked();
            if (credits_ > 1 && sq_used_ < shape_.send_slots + kCtrlSlack) {
                // Its buffer: one of a small ring after the headers (the queue never holds more of them).
                auto *ring = reinterpret_cast<AdvertWire *>(tail() + 64 * ((8 * (shape_.send_slots + kSqExtra) + 63) / 64));
                AdvertWire &slot = ring[advert_seq_++ % kAdverts];
                slot = a;
                const ri_sge_t sge{reinterpret_cast<uint64_t>(&slot), sizeof slot, lkey_};
                return post_payload_locked(&sge, kMsgAdvert, kSendBit | kCtrlBit) ? 0 : -EIO;
            }
        }
        if (nonblock) return -EAGAIN;
        wait_locked(lock);
    }
}

int Stream::peer_region(AdvertWire &out, bool nonblock) {
    std::unique_lock lock(mutex_);
    for (;;) {
        (void)poll_locked();
        if (!peer_regions_.empty()) {
            out = peer_regions_.front();
            peer_regions_.erase(peer_regions_.begin());
            return 0;
        }
        const State st = state_.load();
        if (st == State::declined) return -EOPNOTSUPP;
        if (st == State::failed) return -(sticky_error_ != 0 ? sticky_error_ : ECONNRESET);
        if (st == State::closed || peer_fin_) return -EPIPE;
        if (nonblock) return -EAGAIN;
        wait_locked(lock);
    }
}

int Stream::rdma(bool read, const ri_sge_t &local, uint64_t remote, uint32_t rkey, uint64_t context,
                 bool nonblock) {
    std::unique_lock lock(mutex_);
    // The peer's messages (its advertisement) can come before this end has handled its ESTABLISHED event.
    while (state_.load() == State::converting) {
        if (nonblock) return -EAGAIN;
        wait_locked(lock);
    }
    if (state_.load() == State::declined) return -EOPNOTSUPP;
    if (state_.load() != State::open) return -EPIPE;
    (void)poll_locked();
    ri_send_wr_t wr{};
    wr.opcode = read ? RI_WR_RDMA_READ : RI_WR_RDMA_WRITE;
    wr.flags = RI_SEND_SIGNALED;
    wr.sgl = &local;
    wr.num_sge = 1;
    wr.u.rdma.remote_addr = remote;
    wr.u.rdma.rkey = rkey;
    return xs_post_locked(wr, read ? 2 : 1, context, local.length);
}

int Stream::send_registered(const ri_sge_t &local, uint64_t context, bool nonblock) {
    std::unique_lock lock(mutex_);
    auto direct = [&]() -> int {
        // On the byte channel the bytes are copied once, into the ring the peer reads from: the region is free again
        // at once, and its completion comes now. Without waiting, it goes whole or not at all.
        if (nonblock && local.length <= bytes_.ring_size() && bytes_.writable() < local.length) return -EAGAIN;
        const iovec v{reinterpret_cast<void *>(local.addr), local.length};
        const ssize_t n = send_direct_locked(lock, std::span<const iovec>(&v, 1), false);
        if (n < 0) return static_cast<int>(n);
        xs_done_.push_back(XsCompletion{context, 3, 0, local.length});
        const uint64_t one = 1;
        if (xs_fd_ >= 0) (void)real().write(xs_fd_, &one, sizeof one);
        return 0;
    };
    uint64_t done = 0;
    for (;;) {
        // Also after waiting for the conversion: the peer then reads the byte channel, not the QP's messages.
        if (done == 0 && direct_.load(std::memory_order_relaxed)) return direct();
        const uint32_t max_payload_of_peer = peer_slot_len_ - static_cast<uint32_t>(sizeof(MessageHeader));
        const State st = state_.load();
        if (st == State::declined) return -EOPNOTSUPP;
        if (st == State::failed || st == State::closed || fin_queued_) return -EPIPE;
        if (st == State::open) {
            (void)poll_locked();
            // In order with write(): every byte copied before goes first.
            post_locked();
            while (post_ == end_ && credits_ > 1 && sq_used_ < shape_.send_slots + kCtrlSlack && done < local.length) {
                const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(std::min(shape_.slot, max_payload_of_peer),
                                                                            local.length - done));
                const ri_sge_t piece{local.addr + done, n, local.lkey};
                const bool last = done + n == local.length;
                if (last) {
                    uint32_t i = 0;
                    while (i < kXsSlots && xs_ops_[i].busy) ++i;
                    if (i == kXsSlots) break;
                    if (!post_payload_locked(&piece, 0, kSendBit | kXsBit | i)) return -EIO;
                    xs_ops_[i] = XsOp{context, 3, local.length, true};
                } else if (!post_payload_locked(&piece, 0, kSendBit | kCtrlBit)) {
                    return -EIO;
                }
                done += n;
                counters_.tx_bytes.fetch_add(n, std::memory_order_relaxed);
            }
            if (done == local.length) return 0;
        }
        if (nonblock && done == 0) return -EAGAIN;
        wait_locked(lock);
    }
}

int Stream::completion_fd() {
    std::lock_guard lock(mutex_);
    if (xs_fd_ < 0) {
        // Made on first request: a connection that never uses the extended interface costs no descriptor.
        xs_fd_ = ::eventfd(xs_done_.empty() ? 0 : 1, EFD_CLOEXEC | EFD_NONBLOCK);
    }
    return xs_fd_;
}

size_t Stream::take_completions(XsCompletion *out, size_t max) {
    std::lock_guard lock(mutex_);
    (void)poll_locked();
    const size_t n = std::min(max, xs_done_.size());
    std::copy(xs_done_.begin(), xs_done_.begin() + static_cast<std::ptrdiff_t>(n), out);
    xs_done_.erase(xs_done_.begin(), xs_done_.begin() + static_cast<std::ptrdiff_t>(n));
    if (xs_done_.empty()) {
        uint64_t v;
        if (xs_fd_ >= 0) (void)real().read(xs_fd_, &v, sizeof v);
    }
    return n;
}

void Stream::post_locked() {
    if (state_.load(std::memory_order_relaxed) != State::open) return;
    const uint32_t sq_max = shape_.send_slots + kCtrlSlack;  // the extended operations have their own share
    const uint32_t max_payload = std::min<uint32_t>(shape_.slot, peer_slot_len_ - sizeof(MessageHeader));
    while (post_ != end_ && sq_used_ < sq_max) {
        if (credits_ <= 1) {  // the last credit is kept for a credit-only message
            counters_.credit_stalls.fetch_add(1, std::memory_order_relaxed);
            break;
        }
        const uint32_t len = std::min(slot_len_[post_ % shape_.send_slots], max_payload);
        const bool last = post_ + 1 == end_;
        const uint16_t flags = last && fin_queued_ && !fin_sent_ ? kMsgFin : 0;
        if (!post_message_locked(post_, len, flags)) break;
        if (flags != 0) fin_sent_ = true;
        ++post_;
    }
    if (fin_queued_ && !fin_sent_ && post_ == end_ && credits_ > 1 && sq_used_ < sq_max) {
        if (post_message_locked(0, 0, kMsgFin)) fin_sent_ = true;
    }
    // Credits owed: alone once half the buffers are owed (messages with bytes carry them otherwise).
    if (owed_ >= std::max<uint32_t>(1, shape_.recv_slots / 2) && credits_ >= 1 && sq_used_ < sq_max) {
        (void)post_message_locked(0, 0, kMsgCredit);
    }
}

void Stream::handle_locked(const ri_wc_t &wc) {
    const bool is_send = (wc.wr_id & kSendBit) != 0;
    if (is_send && (wc.wr_id & kXsBit) != 0) {
        xs_complete_locked(wc);
        if (wc.status == RI_WC_SUCCESS || wc.status == RI_WC_WR_FLUSH_ERR) return;
        fail_locked(ECONNRESET);  // an iWARP error on one operation ends the connection (a Terminate)
        return;
    }
    if (wc.status != RI_WC_SUCCESS) {
        if (is_send) {
            --sq_used_;
            if ((wc.wr_id & kCtrlBit) == 0) ++done_;
        }
        // A flush after an orderly end is the connection closing; anything else ends it.
        if (wc.status == RI_WC_WR_FLUSH_ERR && (peer_fin_ || fin_sent_ || state_.load() == State::closed)) {
            if (state_.load() == State::open) state_.store(State::closed, std::memory_order_release);
            return;
        }
        fail_locked(ECONNRESET);
        return;
    }
    if (!is_send) {
        const uint32_t slot = static_cast<uint32_t>(wc.wr_id);
        counters_.rx_messages.fetch_add(1, std::memory_order_relaxed);
        if (slot >= shape_.recv_slots || wc.byte_len < sizeof(MessageHeader)) {
            RDMA_LOG_WARN(kComponent, "a message of %u bytes into receive buffer %u: not the layer's", wc.byte_len, slot);
            fail_locked(EPROTO);
            return;
        }
        MessageHeader h;
        std::memcpy(&h, recv_slot(slot), sizeof h);
        credits_ += h.credits;
        if ((h.flags & kMsgFin) != 0) peer_fin_ = true;
        if ((h.flags & kMsgAdvert) != 0) {
            if (wc.byte_len < sizeof(MessageHeader) + sizeof(AdvertWire) || peer_regions_.size() >= kPeerRegionsMax) {
                RDMA_LOG_WARN(kComponent, "a region advertisement that is short, or one too many: the connection ends");
                fail_locked(EPROTO);
                return;
            }
            AdvertWire a;
            std::memcpy(&a, recv_slot(slot) + sizeof(MessageHeader), sizeof a);
            peer_regions_.push_back(a);
            repost_locked(slot);
            return;
        }
        if (wc.byte_len == sizeof(MessageHeader) || rd_shut_) {
            repost_locked(slot);
            return;
        }
        arrived_[(arr_head_ + arr_count_) % shape_.recv_slots] = Arrived{slot, sizeof(MessageHeader), wc.byte_len};
        ++arr_count_;
        return;
    }
    --sq_used_;
    if ((wc.wr_id & kCtrlBit) == 0) ++done_;  // completions come in order: the oldest posted slot is free
}

bool Stream::poll_locked() {
    if (!cq_) return false;
    ri_wc_t wc[16];
    bool any = false;
    for (;;) {
        auto n = cq_->poll(std::span<ri_wc_t>(wc, 16));
        if (!n || *n == 0) break;
        for (size_t i = 0; i < *n; ++i) handle_locked(wc[i]);
        any = true;
        if (*n < 16) break;
    }
    if (any) {
        post_locked();
        cv_.notify_all();
        // A thread asleep on this stream's descriptors may have been woken by the completions just taken, and
        // found nothing: it looks again.
        if (pollers_.load(std::memory_order_acquire) > 0) {
            const uint64_t one = 1;
            (void)real().write(event_fd_, &one, sizeof one);
        }
    }
    return any;
}

void Stream::fail_locked(int err) {
    if (state_.load() == State::failed) return;
    state_.store(State::failed, std::memory_order_release);
    error_ = err;
    sticky_error_ = err;
    cv_.notify_all();
}

uint32_t Stream::readiness_locked() const {
    if (direct_.load(std::memory_order_relaxed)) return readiness_direct_locked();
    const State st = state_.load(std::memory_order_relaxed);
    if (st == State::failed) return POLLIN | POLLOUT | POLLERR | POLLHUP;
    if (st == State::declined) return POLLIN | POLLOUT;  // the caller's next call goes on with the TCP socket
    if (st == State::converting) return 0;
    uint32_t ev = 0;
    if (arr_count_ > 0 || peer_fin_ || rd_shut_) ev |= POLLIN;
    if (peer_fin_) ev |= POLLRDHUP;
    const bool room = end_ - done_ < shape_.send_slots ||
                      (end_ != post_ && slot_len_[(end_ - 1) % shape_.send_slots] < shape_.slot);
    if (!fin_queued_ && room && st == State::open) ev |= POLLOUT;
    if (st == State::closed || (fin_queued_ && peer_fin_)) ev |= POLLHUP;
    return ev;
}

uint32_t Stream::refresh() {
    std::lock_guard lock(mutex_);
    (void)poll_locked();
    mirror_locked();
    return readiness_locked();
}

uint32_t Stream::readiness() {
    std::lock_guard lock(mutex_);
    (void)poll_locked();
    return readiness_locked();
}

void Stream::mirror_locked() {
    if (mirror_ != nullptr) (void)mirror_->show(readiness_locked());
}

void Stream::update_background_locked() {
    const bool urgent = post_ != end_ || (fin_queued_ && !fin_sent_) || closing_;
    const bool want = urgent || mirror_ != nullptr;
    urgent_.store(urgent, std::memory_order_release);
    const bool was_prompt = prompt_.exchange(mirror_ != nullptr, std::memory_order_acq_rel);
    if (mirror_ != nullptr && !was_prompt) background_.store(false, std::memory_order_relaxed);  // registers it
    if (want && !background_.load(std::memory_order_relaxed)) {
        background_.store(true, std::memory_order_release);
        device_->watch(shared_from_this());
    } else if (!want) {
        background_.store(false, std::memory_order_release);
    }
}

void Stream::wait_locked(std::unique_lock<std::mutex> &lock) {
    if (leader_ || !dto_) {  // (a stream with no QP has no completions to wait for: its waits are the channel's)
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        return;
    }
    leader_ = true;
    // Spin first: the answer to a small message comes in microseconds, a sleep and a wake-up cost more.
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(shape_.spin_ns);
    bool got = false;
    while (!got && std::chrono::steady_clock::now() < until) {
        got = poll_locked();
        if (got || state_.load(std::memory_order_relaxed) != State::open) break;
        lock.unlock();
        for (int i = 0; i < 32; ++i) cpu_relax();
        lock.lock();
    }
    if (!got && state_.load(std::memory_order_relaxed) != State::failed && !arm_locked()) {
        counters_.sleeps.fetch_add(1, std::memory_order_relaxed);
        // Armed and still nothing: sleep until the CQ notifies or another thread moved the stream (event_fd_).
        // The bound is only a backstop: every way progress comes raises one of the two.
        pollers_.fetch_add(1, std::memory_order_acq_rel);
        lock.unlock();
        pollfd p[2] = {{dto_->fd(), POLLIN, 0}, {event_fd_, POLLIN, 0}};
        (void)real().poll(p, 2, 100);
        lock.lock();
        pollers_.fetch_sub(1, std::memory_order_acq_rel);
        (void)arm_locked();  // takes what came and quiets the descriptors
    }
    leader_ = false;
    cv_.notify_all();
}

bool Stream::drain_locked() {
    uint64_t v;
    (void)real().read(event_fd_, &v, sizeof v);
    bool any = false;
    for (; dto_;) {  // through the dispatcher: a dequeue that finds nothing quiets the notification descriptor
        auto e = dto_->dequeue();
        if (!e || !*e) break;
        handle_locked((*e)->wc);
        any = true;
    }
    any = poll_locked() || any;
    post_locked();
    if (any) cv_.notify_all();
    return any;
}

bool Stream::arm_locked() {
    bool any = drain_locked();
    if (cq_ && state_.load() != State::failed) {
        // Armed, then looked at once more: a completion between the last poll and the arming would be missed.
        (void)cq_->request_notify(RI_CQ_NOTIFY_NEXT);
        any = poll_locked() || any;
    }
    return any;
}

ssize_t Stream::send(std::span<const iovec> iov, bool nonblock) {
    std::unique_lock lock(mutex_);
    size_t want = 0;
    for (const auto &v : iov) want += v.iov_len;
    size_t total = 0;
    IovCursor from{iov};
    for (;;) {
        // A call that waited for the conversion goes on where it ended: on the byte channel (nothing was queued).
        if (total == 0 && direct_.load(std::memory_order_relaxed)) return send_direct_locked(lock, iov, nonblock);
        const State st = state_.load(std::memory_order_relaxed);
        if (st == State::failed) {
            const int e = sticky_error_;
            sticky_error_ = EPIPE;  // reported once, then as TCP: a broken pipe
            return total > 0 ? static_cast<ssize_t>(total) : -e;
        }
        if (st == State::declined) return kDeclined;
        if (fin_queued_ || st == State::closed) return total > 0 ? static_cast<ssize_t>(total) : -EPIPE;
        if (st == State::open) {
            (void)poll_locked();
            // A small write with nothing queued goes inline, from the caller's buffer at post time: no send slot,
            // so a ping-pong never waits for a slot's completion. Larger ones fill the open slot, then new ones.
            if (total == 0 && want > 0 && post_ == end_ && post_inline_locked(from, want)) total = want;
            while (total < want) {
                const bool open_slot = end_ != post_ && slot_len_[(end_ - 1) % shape_.send_slots] < shape_.slot;
                if (!open_slot) {
                    if (end_ - done_ >= shape_.send_slots) break;  // every slot holds bytes: no room
                    slot_len_[end_ % shape_.send_slots] = 0;
                    ++end_;
                }
                uint32_t &len = slot_len_[(end_ - 1) % shape_.send_slots];
                const size_t n = from.copy(send_slot(end_ - 1) + len, shape_.slot - len, false);
                len += static_cast<uint32_t>(n);
                total += n;
            }
            post_locked();
            if (total == want) break;
            if (nonblock && total > 0) break;
        }
        if (nonblock) {
            if (st == State::open) counters_.credit_stalls.fetch_add(1, std::memory_order_relaxed);
            mirror_locked();
            update_background_locked();
            return total > 0 ? static_cast<ssize_t>(total) : -EAGAIN;
        }
        wait_locked(lock);
    }
    counters_.tx_bytes.fetch_add(total, std::memory_order_relaxed);
    mirror_locked();
    update_background_locked();
    return static_cast<ssize_t>(total);
}

ssize_t Stream::recv(std::span<const iovec> iov, int flags, bool nonblock) {
    std::unique_lock lock(mutex_);
    const auto [want, peek, all] = RecvAsk::of(iov, flags);
    size_t total = 0;
    IovCursor to{iov};
    for (;;) {
        if (direct_.load(std::memory_order_relaxed)) return recv_direct_locked(lock, iov, flags, nonblock);
        const State st = state_.load(std::memory_order_relaxed);
        if (st == State::declined) return kDeclined;
        if (st != State::converting) {
            if (arr_count_ == 0) (void)poll_locked();
            uint32_t k = 0;  // messages looked at (peek)
            while (total < want && k < arr_count_) {
                Arrived &a = arrived_[(arr_head_ + k) % shape_.recv_slots];
                const size_t n = to.copy(recv_slot(a.slot) + a.begin, a.end - a.begin, true);
                const uint32_t begin = a.begin + static_cast<uint32_t>(n);
                total += n;
                if (peek) {
                    ++k;
                    continue;
                }
                a.begin = begin;
                if (a.begin == a.end) {
                    repost_locked(a.slot);
                    arr_head_ = (arr_head_ + 1) % shape_.recv_slots;
                    --arr_count_;
                } else {
                    break;
                }
            }
            if (!peek && total > 0) post_locked();  // credits owed go back
            if (total > 0 && (!all || total == want)) break;
            if (arr_count_ == 0 && (peer_fin_ || rd_shut_)) break;  // end of stream: what was read, or 0
            if (st == State::failed) {
                if (total > 0) break;
                const int e = sticky_error_;
                return e == EPIPE ? 0 : -e;
            }
            if (st == State::closed && arr_count_ == 0) break;
        }
        if (nonblock) {
            if (total > 0) break;
            mirror_locked();
            update_background_locked();
            return -EAGAIN;
        }
        wait_locked(lock);
    }
    if (!peek) counters_.rx_bytes.fetch_add(total, std::memory_order_relaxed);
    mirror_locked();
    update_background_locked();
    return static_cast<ssize_t>(total);
}

size_t Stream::readable_bytes() {
    std::lock_guard lock(mutex_);
    if (direct_.load(std::memory_order_relaxed)) return static_cast<size_t>(bytes_.readable());
    (void)poll_locked();
    size_t n = 0;
    for (uint32_t k = 0; k < arr_count_; ++k) {
        const Arrived &a = arrived_[(arr_head_ + k) % shape_.recv_slots];
        n += a.end - a.begin;
    }
    return n;
}

int Stream::shutdown(int how) {
    std::lock_guard lock(mutex_);
    if (how == SHUT_RD || how == SHUT_RDWR) {
        rd_shut_ = true;
        while (arr_count_ > 0) {  // what waits is dropped; later messages are dropped on arrival
            repost_locked(arrived_[arr_head_].slot);
            arr_head_ = (arr_head_ + 1) % shape_.recv_slots;
            --arr_count_;
        }
    }
    if (how == SHUT_WR || how == SHUT_RDWR) {
        fin_queued_ = true;
        if (direct_.load(std::memory_order_relaxed) && !fin_sent_) {
            bytes_.close_write();  // after every byte written: the peer reads its end there
            fin_sent_ = true;
        }
        post_locked();
    }
    mirror_locked();
    update_background_locked();
    cv_.notify_all();
    return 0;
}

void Stream::close(bool abortive) {
    bool reset = false;
    {
        std::lock_guard lock(mutex_);
        closing_ = true;
        mirror_ = nullptr;  // the application's descriptor is gone
        if (state_.load() == State::declined) {
            // A TCP connection: its end is the kernel's, at the close of its last descriptor.
        } else if (abortive || state_.load() == State::failed) {
            reset = state_.load() != State::failed;
            fail_locked(ECONNRESET);
            if (direct_.load(std::memory_order_relaxed)) bytes_.hang_up();  // the peer reads a reset after the bytes
        } else {
            fin_queued_ = true;
            if (!due_ && ep_ && mem_ != nullptr) {
                due_ = true;  // its kit is likely to serve another connection soon (Device::expect_due())
                device_->expect_due();
            }
            if (direct_.load(std::memory_order_relaxed) && !fin_sent_) {
                // The bytes are in the shared ring already: they outlive this process, and the end follows them.
                bytes_.close_write();
                fin_sent_ = true;
            }
            post_locked();
        }
        closing_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        update_background_locked();
    }
    if (reset && ep_) (void)ep_->disconnect(true);
}

void Stream::flush(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    const auto until = std::chrono::steady_clock::now() + limit;
    while (state_.load() == State::open && !(fin_sent_ && done_ == end_ && sq_used_ == 0) &&
           std::chrono::steady_clock::now() < until) {
        (void)poll_locked();
        post_locked();
        if (fin_sent_ && done_ == end_ && sq_used_ == 0) break;
        wait_locked(lock);
    }
}

int Stream::take_error() {
    std::lock_guard lock(mutex_);
    (void)poll_locked();
    const int e = error_;
    error_ = 0;
    return e;
}

void Stream::watch(Mirror *mirror) {
    std::lock_guard lock(mutex_);
    mirror_ = mirror;
    (void)poll_locked();
    mirror_locked();
    update_background_locked();
}

int Stream::notify_fd() const noexcept {
    if (direct_.load(std::memory_order_acquire)) return bytes_.bell();
    return dto_ ? dto_->fd() : -1;
}

std::array<int, 3> Stream::wake_fds() const noexcept {
    return {dto_ ? dto_->fd() : -1, event_fd_, direct_.load(std::memory_order_acquire) ? bytes_.bell() : -1};
}

void Stream::background() {
    bool disconnect = false, abort = false;
    // An application thread asleep on this stream moves it itself: the background thread taking its completions
    // would only leave it asleep over them.
    if (pollers_.load(std::memory_order_acquire) > 0) return;
    {
        std::lock_guard lock(mutex_);
        (void)drain_locked();
        if (closing_ && state_.load() == State::open) {
            const bool sent = fin_sent_ && done_ == end_ && sq_used_ == 0;
            if (sent && cm_final_) {
                // The peer ended first and the kAL reported the connection's end (once a connection): a disconnect
                // of ours would be refused and no event would follow. Everything went: closed. (Before, the stream
                // and its QP waited out the close's 60 s deadline.)
                state_.store(State::closed, std::memory_order_release);
            } else if (sent && !disconnecting_) {
                disconnecting_ = true;
                disconnect = true;
            } else if (std::chrono::steady_clock::now() > closing_deadline_) {
                abort = true;
                fail_locked(ETIMEDOUT);
            }
        }
        mirror_locked();
        update_background_locked();
        if (prompt_.load(std::memory_order_relaxed) && state_.load() != State::failed) {
            // A watched mirror: armed, then looked at once more (a completion between the last poll and the
            // arming would be missed).
            if (cq_) (void)cq_->request_notify(RI_CQ_NOTIFY_NEXT);
            if (poll_locked()) {
                mirror_locked();
                update_background_locked();
            }
            if (direct_.load(std::memory_order_relaxed)) {
                arm_direct_locked();  // the bell rings for the next bytes or room; what came meanwhile is shown
                mirror_locked();
            }
        }
    }
    if (disconnect && ep_) (void)ep_->disconnect(false);
    if (abort && ep_) (void)ep_->disconnect(true);
}

uint32_t Stream::arm() {
    std::lock_guard lock(mutex_);
    (void)arm_locked();
    if (direct_.load(std::memory_order_relaxed)) arm_direct_locked();
    return readiness_locked();
}

void Stream::sleeping(bool asleep) noexcept {
    if (asleep) {
        counters_.sleeps.fetch_add(1, std::memory_order_relaxed);
        pollers_.fetch_add(1, std::memory_order_acq_rel);
    } else {
        pollers_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

const char *Stream::state_name() const noexcept {
    switch (state_.load(std::memory_order_relaxed)) {
        case State::converting: return "converting";
        case State::open: return "open";
        case State::failed: return "failed";
        case State::closed: return "closed";
        case State::declined: return "declined";
    }
    return "?";
}

std::string Stream::describe() {
    std::lock_guard lock(mutex_);
    char b[256];
    std::snprintf(b, sizeof b,
                  "state %d credits %u owed %u sq %u slots done %u posted %u end %u arrived %u peer_fin %d fin %d/%d "
                  "error %d tx %lu rx %lu",
                  static_cast<int>(state_.load()), credits_, owed_, sq_used_, done_, post_, end_, arr_count_, peer_fin_,
                  fin_queued_, fin_sent_, sticky_error_, static_cast<unsigned long>(counters_.tx_messages.load()),
                  static_cast<unsigned long>(counters_.rx_messages.load()));
    std::string d = b;
    if (direct_.load(std::memory_order_relaxed)) {
        std::snprintf(b, sizeof b, " byte channel: readable %lu writable %lu peer_closed %d peer_gone %d",
                      static_cast<unsigned long>(bytes_.readable()), static_cast<unsigned long>(bytes_.writable()),
                      bytes_.peer_closed(), bytes_.peer_gone());
        d += b;
    }
    return d;
}

bool Stream::finished() {
    std::lock_guard lock(mutex_);
    if (!closing_) return false;
    const State st = state_.load();
    if (st == State::closed && !cm_final_) {
        // Ended in order (the flushes came), its last connection event not yet: held a little longer, so that its
        // QP can serve another connection once no event of this one can reach it (Device::recycle()).
        const auto now = std::chrono::steady_clock::now();
        if (closed_seen_ == std::chrono::steady_clock::time_point{}) closed_seen_ = now;
        return now - closed_seen_ > std::chrono::seconds(1);
    }
    return st == State::failed || st == State::closed || st == State::declined ||
           (disconnecting_ && std::chrono::steady_clock::now() > closing_deadline_);
}


// ---------------------------------------------------------------------------------------------------------------
// The byte channel (same host): send() and recv() copy into and out of the shared rings themselves.

uint32_t Stream::readiness_direct_locked() const {
    const State st = state_.load(std::memory_order_relaxed);
    if (st == State::converting) return 0;
    const uint64_t waiting = bytes_.readable();
    const bool ended = bytes_.peer_closed();
    const bool gone = bytes_.peer_gone();
    // A broken connection shows its error only once the bytes sent before it are read, as TCP's do.
    if (st == State::failed && waiting == 0) return POLLIN | POLLOUT | POLLERR | POLLHUP;
    uint32_t ev = 0;
    if (waiting > 0 || ended || gone || rd_shut_) ev |= POLLIN;
    if (ended) ev |= POLLRDHUP;
    if (!fin_queued_ && st == State::open && (bytes_.writable() > 0 || gone)) ev |= POLLOUT;
    if ((fin_queued_ && ended) || (gone && waiting == 0)) ev |= POLLHUP;
    return ev;
}

void Stream::arm_direct_locked() {
    uint64_t v;
    (void)real().read(event_fd_, &v, sizeof v);
    (void)bytes_.drain_bell();  // learns whether the peer's end went
    (void)bytes_.arm_read();
    if (!fin_queued_ && bytes_.writable() == 0) (void)bytes_.arm_write();
}

void Stream::wait_direct_locked(std::unique_lock<std::mutex> &lock, bool for_write) {
    // One leader per direction: a thread that waits for room must not queue behind one that waits for bytes (the
    // ring has a reader and a writer side; the lock is free while either sleeps).
    bool &leader = for_write ? write_leader_ : read_leader_;
    if (leader) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        return;
    }
    leader = true;
    const State was = state_.load(std::memory_order_relaxed);
    auto ready = [&] {
        if (state_.load(std::memory_order_relaxed) != was || bytes_.peer_gone()) return true;
        return for_write ? bytes_.writable() > 0 : bytes_.readable() > 0 || bytes_.peer_closed();
    };
    // Spin first, as on the QP: the peer's next bytes or room come in microseconds on this host.
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(shape_.spin_ns);
    bool got = ready();
    while (!got && std::chrono::steady_clock::now() < until) {
        lock.unlock();
        for (int i = 0; i < 32; ++i) cpu_relax();
        lock.lock();
        got = ready();
    }
    if (!got) {
        // Asked for the bell, then looked once more: bytes or room that came between would ring nobody.
        const bool armed = for_write ? bytes_.arm_write() : bytes_.arm_read();
        if (armed && state_.load(std::memory_order_relaxed) == was) {
            counters_.sleeps.fetch_add(1, std::memory_order_relaxed);
            pollers_.fetch_add(1, std::memory_order_acq_rel);
            lock.unlock();
            // The bound is a backstop: the peer rings, or a connection event raises event_fd_.
            pollfd p[2] = {{bytes_.bell(), POLLIN, 0}, {event_fd_, POLLIN, 0}};
            (void)real().poll(p, 2, 100);
            lock.lock();
            pollers_.fetch_sub(1, std::memory_order_acq_rel);
            uint64_t v;
            (void)real().read(event_fd_, &v, sizeof v);
        }
        (void)bytes_.drain_bell();
        if (for_write) {
            bytes_.disarm_write();
        } else {
            bytes_.disarm_read();
        }
        // The bell is one for both directions: what it rang may have been for a thread asleep on the other, which
        // looks again.
        if (pollers_.load(std::memory_order_acquire) > 0) {
            const uint64_t one = 1;
            (void)real().write(event_fd_, &one, sizeof one);
        }
    }
    (void)poll_locked();  // the QP's own messages: advertisements, the extended interface's completions
    leader = false;
    cv_.notify_all();
}

ssize_t Stream::send_direct_locked(std::unique_lock<std::mutex> &lock, std::span<const iovec> iov, bool nonblock) {
    size_t want = 0;
    for (const auto &v : iov) want += v.iov_len;
    size_t total = 0;
    IovCursor from{iov};
    for (;;) {
        const State st = state_.load(std::memory_order_relaxed);
        if (st == State::failed) {
            const int e = sticky_error_;
            sticky_error_ = EPIPE;  // reported once, then as TCP: a broken pipe
            return total > 0 ? static_cast<ssize_t>(total) : -e;
        }
        if (fin_queued_ || st == State::closed) return total > 0 ? static_cast<ssize_t>(total) : -EPIPE;
        while (total < want) {
            iovec v[16];
            const size_t k = from.rest(v, 16);
            const ssize_t n = bytes_.write(v, k);
            if (n > 0) {
                from.skip(static_cast<size_t>(n));
                total += static_cast<size_t>(n);
                continue;
            }
            if (n < 0 && errno != EAGAIN) fail_locked(ECONNRESET);  // the peer's end went, or broke the ring
            break;
        }
        if (total == want || (nonblock && total > 0)) break;
        if (state_.load(std::memory_order_relaxed) == State::failed) continue;
        if (nonblock) {
            counters_.credit_stalls.fetch_add(1, std::memory_order_relaxed);
            mirror_locked();
            update_background_locked();
            return -EAGAIN;
        }
        wait_direct_locked(lock, true);
    }
    counters_.tx_bytes.fetch_add(total, std::memory_order_relaxed);
    mirror_locked();
    update_background_locked();
    return static_cast<ssize_t>(total);
}

ssize_t Stream::recv_direct_locked(std::unique_lock<std::mutex> &lock, std::span<const iovec> iov, int flags,
                                   bool nonblock) {
    const auto [want, peek, all] = RecvAsk::of(iov, flags);
    size_t total = 0;
    IovCursor to{iov};
    for (;;) {
        if (rd_shut_) break;  // shut down for reading: the end
        bool end = false;
        while (total < want) {
            iovec v[16];
            const size_t k = to.rest(v, 16);
            const ssize_t n = peek ? bytes_.peekv(v, k) : bytes_.readv(v, k);
            if (n > 0) {
                to.skip(static_cast<size_t>(n));
                total += static_cast<size_t>(n);
                if (peek) break;  // a peek looks at what waits once
                continue;
            }
            if (n == 0) {
                end = true;  // the peer's end, after its last byte
            } else if (errno != EAGAIN) {
                fail_locked(ECONNRESET);  // the peer went without its end (killed), or broke the ring
            }
            break;
        }
        if (end || want == 0 || (total > 0 && (!all || total == want))) break;
        const State st = state_.load(std::memory_order_relaxed);
        if (st == State::failed) {
            if (total > 0) break;
            const int e = sticky_error_;
            return e == EPIPE ? 0 : -e;
        }
        if (nonblock) {
            if (total > 0) break;
            mirror_locked();
            update_background_locked();
            return -EAGAIN;
        }
        wait_direct_locked(lock, false);
    }
    if (!peek) counters_.rx_bytes.fetch_add(total, std::memory_order_relaxed);
    mirror_locked();
    update_background_locked();
    return static_cast<ssize_t>(total);
}

}  // namespace openrdma::sockets
