// The DDP/RDMAP engine of one queue pair: inbound validation and placement, outbound segmentation, RDMA Read
// responder/requester, Terminate. RFC 5040 §7 and RFC 5041 §7 decide every check and its Terminate code.
#include "iwarp/engine.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "iwarp/copy.hpp"
#include "rnicpi/ri_types.h"

namespace iwarp {
namespace {

Opcode work_opcode(WorkType t) noexcept {
    switch (t) {
        case WorkType::send: return Opcode::send;
        case WorkType::send_se: return Opcode::send_se;
        case WorkType::send_inv: return Opcode::send_inv;
        case WorkType::send_se_inv: return Opcode::send_se_inv;
        case WorkType::write: return Opcode::rdma_write;
        case WorkType::read: return Opcode::read_request;
        case WorkType::atomic: return Opcode::atomic_request;
        case WorkType::immediate: return Opcode::immediate;
        case WorkType::immediate_se: return Opcode::immediate_se;
    }
    return Opcode::send;
}

size_t total_length(const LocalSpan *sge, uint32_t n) noexcept {
    size_t total = 0;
    for (uint32_t i = 0; i < n; ++i) total += sge[i].len;
    return total;
}

// The part [offset, offset + len) of a gather list, as iovecs; returns the count.
size_t gather(const LocalSpan *sge, uint32_t n, size_t offset, size_t len, iovec *out) noexcept {
    size_t count = 0;
    for (uint32_t i = 0; i < n && len > 0; ++i) {
        if (offset >= sge[i].len) {
            offset -= sge[i].len;
            continue;
        }
        size_t take = std::min(sge[i].len - offset, len);
        out[count++] = iovec{sge[i].addr + offset, take};
        len -= take;
        offset = 0;
    }
    return count;
}

// The integer a foreign address was stored from (it is never dereferenced).
uint64_t dma_address(const void *p) noexcept { return reinterpret_cast<uintptr_t>(p); }

// Copies the part [offset, offset + len) of a foreign gather list into dst through the owner's DMA.
bool dma_gather(EngineOwner &owner, const LocalSpan *sge, uint32_t n, size_t offset, size_t len,
                uint8_t *dst) noexcept {
    iovec iov[kMaxSge];
    size_t count = gather(sge, n, offset, len, iov);
    for (size_t i = 0; i < count; ++i) {
        if (!owner.dma_read(dma_address(iov[i].iov_base), dst, iov[i].iov_len)) return false;
        dst += iov[i].iov_len;
    }
    return true;
}

// Which headers a Terminate carries, as Linux siw sends them.
uint8_t terminate_hdrct(TermCode c, bool read_request) noexcept {
    if (c.layer == static_cast<uint8_t>(Layer::llp)) return 0;
    if (c == term::kDdpTaggedInvalidVersion || c == term::kDdpUntaggedInvalidVersion ||
        c == term::kRdmapInvalidVersion || c == term::kRdmapUnexpectedOpcode) {
        return 0;  // the header that failed cannot be trusted to be a header
    }
    uint8_t hdrct = kTermHdrM | kTermHdrD;
    if (c.layer == static_cast<uint8_t>(Layer::rdmap) && c.etype == 0x1 && read_request) hdrct |= kTermHdrR;
    return hdrct;
}

// The RTR bits of an ri_rtr_type value.
uint8_t rtr_bits(uint32_t type) {
    switch (type) {
        case RI_RTR_SEND: return kRtrSend;
        case RI_RTR_WRITE: return kRtrWrite;
        case RI_RTR_READ: return kRtrRead;
        default: return 0;
    }
}

}  // namespace

EngineConfig engine_config(const ri_llp_params_t &llp, uint32_t pd, uint32_t sq_depth) noexcept {
    EngineConfig c;
    c.pd = pd;
    const bool crc = (llp.mpa_flags & RI_MPA_CRC) != 0;
    // RI_MPA_MARKERS is the negotiated result for both directions (RFC 5044 lets them differ; the LLP parameters
    // carry one bit).
    const bool markers = (llp.mpa_flags & RI_MPA_MARKERS) != 0;
    c.rx = FramingOptions{crc, markers};
    c.tx = FramingOptions{crc, markers};
    if (llp.fpdu_max > 0) {
        // FPDU = ULPDU_Length(2) + ULPDU + pad to 4 + CRC(4), plus one marker per 512 octets it spans.
        size_t room = llp.fpdu_max;
        if (markers) room -= std::min(room, kMarkerLen * (room / kMarkerInterval + 1));
        room = room >= kMpaCrcLen ? (room - kMpaCrcLen) & ~size_t{3} : 0;
        c.mulpdu = room >= kMpaLengthLen ? room - kMpaLengthLen : 0;  // the engine clamps it
    } else if (llp.mss > 0) {
        c.mulpdu = mulpdu(llp.mss, markers);
    }
    c.ird = llp.ird;
    c.ord = llp.ord;
    c.sq_depth = sq_depth;
    c.rfc7306 = (llp.mpa_flags & RI_MPA_RFC7306) != 0;
    if ((llp.mpa_flags & RI_MPA_PEER2PEER) != 0) {
        if ((llp.mpa_flags & RI_MPA_INITIATOR) != 0) {
            c.rtr_send = rtr_bits(llp.rtr_type);
        } else {
            c.rtr_expect = rtr_bits(llp.rtr_type);
        }
    }
    return c;
}

Engine::Engine(EngineOwner &owner, const EngineConfig &config)
    : owner_(owner),
      cfg_(config),
      rx_(*this, config.rx),
      tx_(config.tx),
      rtr_pending_(config.rtr_expect),
      sq_(std::max<uint32_t>(config.sq_depth, 1)),
      irq_(std::max<uint32_t>(config.ird, 1)),
      orq_(std::max<uint32_t>(config.ord, 1) + 1),  // one more for the RTR's zero-length Read
      events_(std::max<uint32_t>(config.sq_depth, 1)),
      rtr_to_send_(config.rtr_send != 0) {
    // Every frame must carry at least one payload byte besides the largest header.
    cfg_.mulpdu = std::clamp<size_t>(cfg_.mulpdu, kUntaggedHeaderLen + 4, max_ulpdu(cfg_.tx.markers));
    if (cfg_.foreign_memory) bounce_ = std::make_unique_for_overwrite<uint8_t[]>(kMaxUlpduLen);
}

void Engine::set_emss(size_t emss) noexcept {
    const bool markers = cfg_.tx.markers;
    cfg_.mulpdu = std::clamp<size_t>(iwarp::mulpdu(emss, markers), kUntaggedHeaderLen + 4, max_ulpdu(markers));
}

// ---------------------------------------------------------------------------------------------------------------
// Receive side

std::optional<TermCode> Engine::on_header(const Header &h, size_t len) {
    rx_kind_ = RxKind::none;
    rx_foreign_ = false;
    if (h.ddp_version != kDdpVersion) {
        return h.tagged ? term::kDdpTaggedInvalidVersion : term::kDdpUntaggedInvalidVersion;
    }
    if (h.rdmap_version != kRdmapVersion) return term::kRdmapInvalidVersion;
    // Single copy on a same-host channel: a pull (to a side that takes them) or a pull's acknowledgement (to a side
    // that sent some). Elsewhere the bit is reserved and ignored.
    if ((h.ddp_reserved & kDdpPull) != 0 && (cfg_.accept_pull || pulls_sent_ != 0)) {
        rx_hdr_ = h;
        return on_pull_header(h, len);
    }
    const OpcodeInfo &info = opcode_info(h.opcode);
    // RFC 7306's messages where the ends did not agree on it: what Linux siw answers them with.
    if (!info.valid || (info.rfc7306 && !cfg_.rfc7306) || h.tagged != info.tagged) return term::kRdmapUnexpectedOpcode;
    if (!info.tagged && h.qn != static_cast<uint32_t>(info.queue)) return term::kDdpInvalidQn;
    const Opcode op = h.op();
    rx_hdr_ = h;
    if (rtr_pending_ != 0) {
        // RFC 6581: the initiator's first message is the agreed zero-length RTR; anything else is a mismatch.
        bool is_rtr = (rtr_pending_ == kRtrWrite && op == Opcode::rdma_write && len == 0 && h.last) ||
                      (rtr_pending_ == kRtrRead && op == Opcode::read_request) ||
                      (rtr_pending_ == kRtrSend && op == Opcode::send && len == 0 && h.last);
        if (!is_rtr) return term::kLlpNoMatchingRtr;
    }
    switch (op) {
        case Opcode::rdma_write:
            if (len == 0 && h.last) {
                rx_kind_ = RxKind::discard;  // a zero-length Write (e.g. the RTR) names no memory: nothing to check
                return std::nullopt;
            }
            return check_tagged(h, len, RI_ACCESS_REMOTE_WRITE, false);
        case Opcode::read_response:
            return check_tagged(h, len, RI_ACCESS_LOCAL_WRITE, true);
        case Opcode::send:
        case Opcode::send_inv:
        case Opcode::send_se:
        case Opcode::send_se_inv:
            return start_send(h, len);
        case Opcode::read_request:
            // More Read Requests than the IRD we granted, or one out of sequence.
            if (h.msn != rx_msn_[1] || irq_count_ >= cfg_.ird) return term::kDdpMsnRange;
            if (h.mo != 0) return term::kDdpInvalidMo;
            if (len != kReadRequestLen || !h.last) return term::kRdmapCatastrophicStream;
            rx_kind_ = RxKind::read_request;
            return std::nullopt;
        case Opcode::terminate:
            if (h.mo != 0) return term::kDdpInvalidMo;
            if (len > kTerminateMaxLen || !h.last) return term::kDdpMessageTooLong;
            rx_kind_ = RxKind::terminate;
            return std::nullopt;
        case Opcode::immediate:
        case Opcode::immediate_se:
            // RFC 7306 §6: a message of its own on the Send queue, exactly eight bytes, in one of the receives.
            if (h.msn != rx_msn_[0] || recv_active_) return term::kDdpMsnRange;
            if (h.mo != 0) return term::kDdpInvalidMo;
            if (len != kImmediateDataLen || !h.last) return term::kRdmapCatastrophicStream;
            if (!owner_.take_receive(recv_)) return term::kDdpNoBuffer;
            recv_active_ = true;  // flushed with the receive queue if the stream fails before the segment ends
            rx_kind_ = RxKind::immediate;
            return std::nullopt;
        case Opcode::atomic_request:
            // RFC 7306 §5.2: on the Read Request queue, numbered with the Read Requests and counted in the IRD.
            if (h.msn != rx_msn_[1] || irq_count_ >= cfg_.ird) return term::kDdpMsnRange;
            if (h.mo != 0) return term::kDdpInvalidMo;
            if (len != kAtomicRequestLen || !h.last) return term::kRdmapCatastrophicStream;
            rx_kind_ = RxKind::atomic_request;
            return std::nullopt;
        case Opcode::atomic_response:
            if (h.msn != rx_msn_[3]) return term::kDdpMsnRange;
            if (h.mo != 0) return term::kDdpInvalidMo;
            if (len != kAtomicResponseLen || !h.last) return term::kRdmapCatastrophicStream;
            // A response nobody asked for, or not the one due (responses come in the order of the requests).
            if (ord_count_ == 0 || !orq_[orq_head_].atomic) return term::kRdmapUnexpectedOpcode;
            rx_kind_ = RxKind::atomic_response;
            return std::nullopt;
    }
    return term::kRdmapUnexpectedOpcode;
}

std::optional<TermCode> Engine::on_pull_header(const Header &h, size_t len) {
    if (rtr_pending_ != 0) return term::kLlpNoMatchingRtr;  // the RTR comes first, and it is never a pull
    if (h.opcode == kPullAckOpcode && !h.tagged) {
        // Cumulative: the pulls of this side the peer has done, more than it said before and no more than were sent.
        const uint32_t ahead = h.msn - pulls_acked_;
        if (len != 0 || !h.last || ahead == 0 || ahead > pulls_sent_ - pulls_acked_) {
            return term::kRdmapUnexpectedOpcode;
        }
        rx_kind_ = RxKind::pull_ack;
        return std::nullopt;
    }
    if (!cfg_.accept_pull) return term::kRdmapUnexpectedOpcode;
    const OpcodeInfo &info = opcode_info(h.opcode);
    if (!info.valid || h.tagged != info.tagged || (h.op() != Opcode::rdma_write && !info.send)) {
        return term::kRdmapUnexpectedOpcode;
    }
    // Acknowledged whatever its checks find: as on the wire, where a Send or Write completes at its sender once sent
    // and the peer's Terminate follows, the sender completes it before it meets the Terminate.
    ++pulls_taken_;
    if (!info.tagged) {
        if (h.qn != static_cast<uint32_t>(Queue::send)) return term::kDdpInvalidQn;
        if (h.msn != rx_msn_[0]) return term::kDdpMsnRange;
        if (h.mo != 0 || recv_active_) return term::kDdpInvalidMo;
    }
    // A pull is one whole message; its payload, the descriptor, is checked once it is in.
    if (!h.last || len < 8 || len > kPullDescriptorMax) return term::kRdmapCatastrophicStream;
    rx_kind_ = RxKind::pull;
    return std::nullopt;
}

std::optional<TermCode> Engine::take_pull(size_t len) {
    rx_kind_ = RxKind::none;
    const uint32_t total = be::get32(pull_desc_);
    const uint32_t n = be::get32(pull_desc_ + 4);
    if (n == 0 || n > kMaxSge || len != 8 + 12 * size_t{n}) return term::kRdmapCatastrophicStream;
    iovec remote[kMaxSge];
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t *p = pull_desc_ + 8 + 12 * size_t{i};
        remote[i] = iovec{reinterpret_cast<void *>(static_cast<uintptr_t>(be::get64(p))), be::get32(p + 8)};
        sum += remote[i].iov_len;
    }
    if (sum != total || total == 0) return term::kRdmapCatastrophicStream;
    // The checks the message's bytes would meet on the wire, for all of them at once.
    iovec local[kMaxSge];
    size_t nlocal = 1;
    if (rx_hdr_.tagged) {
        if (auto t = check_tagged(rx_hdr_, total, RI_ACCESS_REMOTE_WRITE, false)) return t;
        local[0] = iovec{rx_tagged_base_, total};
    } else {
        if (auto t = start_send(rx_hdr_, total)) return t;
        nlocal = gather(recv_.sge, recv_.num_sge, 0, total, local);
    }
    if (rx_foreign_) {
        rx_foreign_ = false;
        return term::kRdmapLocalCatastrophic;  // the owner's memory is elsewhere: it should not take pulls
    }
    if (!owner_.pull(local, nlocal, remote, n)) return term::kRdmapLocalCatastrophic;
    ++stats_.rx_fpdus;
    ++stats_.rx_pulls;
    stats_.rx_bytes += total;
    return end_segment(total);
}

std::optional<TermCode> Engine::check_tagged(const Header &h, size_t len, uint32_t need, bool read_response) {
    if (read_response) {
        // A response nobody asked for, or where an Atomic Response is due.
        if (ord_count_ == 0 || orq_[orq_head_].atomic) return term::kRdmapUnexpectedOpcode;
        const OutstandingRead &r = orq_[orq_head_];
        if (h.stag != r.sink_stag) return term::kDdpTaggedInvalidStag;
        if (h.to != r.sink_to + r.received || len > r.length - r.received) return term::kDdpTaggedBaseBounds;
        if (len == 0) {
            rx_kind_ = RxKind::tagged;
            rx_tagged_base_ = nullptr;
            return std::nullopt;
        }
    }
    if (h.to + len < h.to) return term::kDdpTaggedToWrap;
    Region reg;
    if (!owner_.resolve_stag(h.stag, reg)) return term::kDdpTaggedInvalidStag;
    if (reg.pd != cfg_.pd) return term::kDdpTaggedStagNotAssociated;
    if ((reg.access & need) != need) return term::kRdmapAccessRights;
    if (h.to < reg.to_base || h.to - reg.to_base > reg.length || len > reg.length - (h.to - reg.to_base)) {
        return term::kDdpTaggedBaseBounds;
    }
    if (reg.foreign) {
        if (!bounce_) return term::kRdmapLocalCatastrophic;  // nowhere to stage the payload: never touch base
        rx_tagged_base_ = reinterpret_cast<uint8_t *>(dma_address(reg.base) + (h.to - reg.to_base));
        rx_foreign_ = true;
    } else {
        rx_tagged_base_ = reg.base + (h.to - reg.to_base);
    }
    rx_kind_ = RxKind::tagged;
    return std::nullopt;
}

std::optional<TermCode> Engine::start_send(const Header &h, size_t len) {
    if (h.msn != rx_msn_[0]) return term::kDdpMsnRange;
    if (rtr_pending_ == kRtrSend) {
        rx_kind_ = RxKind::discard;  // the zero-length Send RTR consumes no receive buffer
        return std::nullopt;
    }
    if (!recv_active_) {
        if (h.mo != 0) return term::kDdpInvalidMo;
        if (!owner_.take_receive(recv_)) return term::kDdpNoBuffer;
        recv_active_ = true;
        recv_placed_ = 0;
        recv_capacity_ = total_length(recv_.sge, recv_.num_sge);
    }
    if (h.mo != recv_placed_) return term::kDdpInvalidMo;
    if (len > recv_capacity_ - recv_placed_) return term::kDdpMessageTooLong;
    if (recv_.foreign) {
        if (!bounce_) return term::kRdmapLocalCatastrophic;  // nowhere to stage the payload: never touch the SGEs
        rx_foreign_ = true;
    }
    rx_kind_ = RxKind::send;
    return std::nullopt;
}

std::span<uint8_t> Engine::payload_target(size_t offset, size_t remaining) {
    // Foreign payload is staged at its offset in the segment; on_segment_end() places it once the CRC checked out.
    if (rx_foreign_) return {bounce_.get() + offset, remaining};
    switch (rx_kind_) {
        case RxKind::tagged: {
            if (!rx_hdr_.last) return {rx_tagged_base_ + offset, remaining};
            // The last segment of a Write or Read Response: its last byte is placed alone, after every other byte
            // of the message and a store fence, so that a consumer polling it finds the whole message (see
            // placement_fence()). The receiver asks again for it; the bytes come from the same read as the rest.
            const size_t last = rx_.current_payload_len() - 1;
            if (offset < last) return {rx_tagged_base_ + offset, std::min(remaining, last - offset)};
            placement_fence();
            return {rx_tagged_base_ + offset, remaining};
        }
        case RxKind::send: {
            size_t pos = rx_hdr_.mo + offset;
            for (uint32_t i = 0; i < recv_.num_sge; ++i) {
                if (pos < recv_.sge[i].len) {
                    return {recv_.sge[i].addr + pos, std::min(remaining, recv_.sge[i].len - pos)};
                }
                pos -= recv_.sge[i].len;
            }
            return {};
        }
        case RxKind::read_request:
        case RxKind::terminate:
        case RxKind::atomic_request:
        case RxKind::atomic_response:
        case RxKind::immediate:
            return {control_ + offset, std::min(remaining, sizeof control_ - offset)};
        case RxKind::pull:
            return {pull_desc_ + offset, std::min(remaining, sizeof pull_desc_ - offset)};
        case RxKind::none:
        case RxKind::discard:
        case RxKind::pull_ack:
            return {};
    }
    return {};
}

std::optional<TermCode> Engine::check_remote(uint32_t stag, uint64_t to, uint64_t len, uint32_t need,
                                             ReadResponseJob &job) {
    if (to + len < to) return term::kRdmapToWrap;
    Region reg;
    if (!owner_.resolve_stag(stag, reg)) return term::kRdmapInvalidStag;
    if (reg.pd != cfg_.pd) return term::kRdmapStagNotAssociated;
    if ((reg.access & need) != need) return term::kRdmapAccessRights;
    if (to < reg.to_base || to - reg.to_base > reg.length || len > reg.length - (to - reg.to_base)) {
        return term::kRdmapBaseBounds;
    }
    job.foreign = reg.foreign;
    job.src = reinterpret_cast<const uint8_t *>(dma_address(reg.base) + (to - reg.to_base));
    return std::nullopt;
}

std::optional<TermCode> Engine::check_read_request() {
    ReadRequest r = decode_read_request(control_);
    ReadResponseJob &job = irq_[(irq_head_ + irq_count_) % irq_.size()];
    job = ReadResponseJob{};
    job.req = r;
    if (r.size > 0) {
        if (auto t = check_remote(r.src_stag, r.src_to, r.size, RI_ACCESS_REMOTE_READ, job)) return t;
    }
    ++irq_count_;
    return std::nullopt;
}

std::optional<TermCode> Engine::check_atomic_request() {
    const AtomicRequest r = decode_atomic_request(control_);
    if (!atomic_op_known(r.op)) return term::kRdmapUnexpectedOpcode;  // a reserved AOpCode
    ReadResponseJob &job = irq_[(irq_head_ + irq_count_) % irq_.size()];
    job = ReadResponseJob{};
    if (auto t = check_remote(r.stag, r.to, 8, RI_ACCESS_REMOTE_ATOMIC, job)) return t;
    if ((dma_address(job.src) & 7) != 0) return term::kRdmapCatastrophicStream;  // RFC 7306 §8.2: not aligned
    job.atomic = true;
    job.areq = r;
    ++irq_count_;
    return std::nullopt;
}

std::optional<TermCode> Engine::take_atomic_response() {
    const AtomicResponse a = decode_atomic_response(control_);
    const OutstandingRead &r = orq_[orq_head_];
    if (a.request_id != r.request_id) return term::kRdmapCatastrophicStream;
    // The original value, as the 64-bit integer it is in this side's memory.
    uint8_t value[8];
    std::memcpy(value, &a.original, sizeof value);
    if (r.result_foreign) {
        if (!owner_.dma_write(dma_address(r.result.addr), value, sizeof value)) return term::kRdmapLocalCatastrophic;
    } else if (r.result.addr != nullptr) {
        std::memcpy(r.result.addr, value, sizeof value);
    }
    owner_.completed(Completion{r.wr_id, Completion::Kind::atomic, sizeof value});
    orq_head_ = (orq_head_ + 1) % orq_.size();
    --ord_count_;
    return std::nullopt;
}

bool Engine::place_foreign(size_t len) noexcept {
    if (rx_kind_ == RxKind::tagged) {
        return len == 0 || owner_.dma_write(dma_address(rx_tagged_base_), bounce_.get(), len);
    }
    // A Send: scattered over the receive buffer from the segment's message offset.
    iovec iov[kMaxSge];
    size_t count = gather(recv_.sge, recv_.num_sge, rx_hdr_.mo, len, iov);
    const uint8_t *src = bounce_.get();
    for (size_t i = 0; i < count; ++i) {
        if (!owner_.dma_write(dma_address(iov[i].iov_base), src, iov[i].iov_len)) return false;
        src += iov[i].iov_len;
    }
    return true;
}

std::optional<TermCode> Engine::on_segment_end() {
    const size_t len = rx_.current_payload_len();
    if (rx_kind_ == RxKind::pull) return take_pull(len);
    if (rx_kind_ == RxKind::pull_ack) {
        rx_kind_ = RxKind::none;
        pulls_acked_ = rx_hdr_.msn;
        complete_tx_events();
        return std::nullopt;
    }
    if (rx_foreign_) {
        rx_foreign_ = false;
        if (!place_foreign(len)) return term::kRdmapLocalCatastrophic;
    }
    ++stats_.rx_fpdus;
    stats_.rx_bytes += len;
    return end_segment(len);
}

std::optional<TermCode> Engine::end_segment(size_t len) {
    const RxKind kind = rx_kind_;
    rx_kind_ = RxKind::none;
    switch (kind) {
        case RxKind::tagged:
            if (rx_hdr_.op() == Opcode::read_response) {
                OutstandingRead &r = orq_[orq_head_];
                r.received += static_cast<uint32_t>(len);
                if (rx_hdr_.last) {
                    if (r.received != r.length) return term::kDdpTaggedBaseBounds;
                    if (!r.internal) owner_.completed(Completion{r.wr_id, Completion::Kind::read, r.length});
                    orq_head_ = (orq_head_ + 1) % orq_.size();
                    --ord_count_;
                }
            }
            break;
        case RxKind::send:
            recv_placed_ += len;
            if (rx_hdr_.last) {
                ++rx_msn_[0];
                recv_active_ = false;
                const OpcodeInfo &info = opcode_info(rx_hdr_.opcode);
                Completion c{recv_.wr_id, Completion::Kind::recv, static_cast<uint32_t>(recv_placed_)};
                c.solicited = info.solicited;
                if (info.invalidate) {
                    if (!owner_.invalidate_stag(rx_hdr_.inv_stag)) return term::kRdmapCannotInvalidate;
                    c.invalidated = true;
                    c.inv_stag = rx_hdr_.inv_stag;
                }
                owner_.completed(c);
            }
            break;
        case RxKind::discard:
            if (opcode_info(rx_hdr_.opcode).send) ++rx_msn_[0];
            break;
        case RxKind::immediate: {
            ++rx_msn_[0];
            recv_active_ = false;
            Completion c{recv_.wr_id, Completion::Kind::recv, 0};
            c.solicited = opcode_info(rx_hdr_.opcode).solicited;
            c.immediate = true;
            c.imm_data = be::get64(control_);
            owner_.completed(c);
            break;
        }
        case RxKind::atomic_request:
            ++rx_msn_[1];
            if (auto t = check_atomic_request()) return t;
            break;
        case RxKind::atomic_response:
            ++rx_msn_[3];
            if (auto t = take_atomic_response()) return t;
            break;
        case RxKind::read_request:
            ++rx_msn_[1];
            if (rtr_pending_ == kRtrRead && decode_read_request(control_).size != 0) return term::kLlpNoMatchingRtr;
            if (auto t = check_read_request()) return t;
            break;
        case RxKind::terminate: {
            Terminate t;
            if (!decode_terminate(std::span<const uint8_t>(control_, len), t)) t.code = term::kRdmapCatastrophicStream;
            peer_terminated_ = true;
            owner_.peer_terminated(t);
            return t.code;  // stops the receive side; no Terminate goes back
        }
        case RxKind::none:
        case RxKind::pull:
        case RxKind::pull_ack:
            return term::kDdpLocalCatastrophic;
    }
    rtr_pending_ = 0;  // the RTR arrived: this side may send now
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Transmit side

rdma::Status Engine::post(const WorkRequest &wr) noexcept {
    if (failed()) return rdma::Status(RI_ECANCELED);
    if (wr.num_sge > kMaxSge) return rdma::Status(RI_EINVAL);
    const bool extension = wr.type == WorkType::atomic || wr.type == WorkType::immediate ||
                           wr.type == WorkType::immediate_se;
    if (extension && !cfg_.rfc7306) return rdma::Status(RI_EOPNOTSUPP);  // the peer did not agree to RFC 7306
    if (wr.type == WorkType::atomic &&
        (wr.num_sge != 1 || wr.sge[0].len < 8 || !atomic_op_known(wr.atomic.op) || (wr.remote_to & 7) != 0)) {
        return rdma::Status(RI_EINVAL);
    }
    if (wr.type != WorkType::read && total_length(wr.sge, wr.num_sge) > UINT32_MAX) return rdma::Status(RI_EMSGSIZE);
    // A request holds its slot until it completes: queued, or framed and waiting for its last frame to be sent.
    if (sq_count_ + ev_count_ >= sq_.size()) return rdma::Status(RI_EAGAIN);
    sq_[(sq_head_ + sq_count_) % sq_.size()] = wr;
    ++sq_count_;
    return {};
}

void Engine::abort(TermCode code) noexcept {
    if (failed()) return;
    aborted_ = true;
    rx_.abort(code);
}

void Engine::push_tx_event(uint64_t seq, uint64_t wr_id, Completion::Kind kind, uint32_t bytes, bool pulled,
                           uint32_t pull) noexcept {
    // A request keeps its send queue slot until this event completes it (see post()), so this never overflows.
    events_[(ev_head_ + ev_count_) % events_.size()] = TxEvent{seq, wr_id, kind, bytes, false, pulled, pull};
    ++ev_count_;
}

void Engine::frame_sent() noexcept {
    ++frames_sent_;
    complete_tx_events();
}

void Engine::complete_tx_events() noexcept {
    // In order: a request sent after a pull completes after it, as a send queue's completions must.
    while (ev_count_ > 0 && events_[ev_head_].seq <= frames_sent_) {
        const TxEvent &e = events_[ev_head_];
        if (e.pulled && static_cast<int32_t>(pulls_acked_ - e.pull) < 0) break;
        if (!e.internal) owner_.completed(Completion{e.wr_id, e.kind, e.bytes});
        ev_head_ = (ev_head_ + 1) % events_.size();
        --ev_count_;
    }
}

void Engine::build_terminate(TxFrame &frame) noexcept {
    Terminate t;
    t.code = rx_.failure();
    bool read_request = rx_hdr_.op() == Opcode::read_request && !rx_hdr_.tagged;
    std::span<const uint8_t> offending = rx_.current_header();
    t.hdrct = offending.empty() || aborted_ ? 0 : terminate_hdrct(t.code, read_request);
    if ((t.hdrct & kTermHdrD) != 0) {
        std::memcpy(t.ddp_header, offending.data(), offending.size());
        t.ddp_segment_length = static_cast<uint16_t>(rx_.current_payload_len());
    }
    if ((t.hdrct & kTermHdrR) != 0) std::memcpy(t.rdmap_header, control_, kReadRequestLen);
    uint8_t payload[kTerminateMaxLen];
    size_t n = encode_terminate(t, payload);
    Header h;
    h.opcode = static_cast<uint8_t>(Opcode::terminate);
    h.qn = static_cast<uint32_t>(Queue::terminate);
    h.msn = tx_msn_[2]++;
    tx_.build(h, std::span<const uint8_t>(payload, n), {}, frame);
}

bool Engine::build_atomic_response(TxFrame &frame) noexcept {
    ReadResponseJob &job = irq_[irq_head_];
    // Executed now, in the order the requests came with the Read Requests, so that a Read before it reads what was
    // there before and a Read after it what it left (RFC 7306 §7).
    uint64_t original = 0;
    if (job.foreign) {
        if (!owner_.dma_atomic(dma_address(job.src), job.areq, original)) {
            abort(term::kRdmapLocalCatastrophic);
            return false;
        }
    } else {
        std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t *>(const_cast<uint8_t *>(job.src)));
        original = target.load(std::memory_order_relaxed);
        while (!target.compare_exchange_weak(original, atomic_result(job.areq, original), std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
        }
    }
    uint8_t payload[kAtomicResponseLen];
    encode_atomic_response(AtomicResponse{job.areq.request_id, original}, payload);
    Header h;
    h.opcode = static_cast<uint8_t>(Opcode::atomic_response);
    h.qn = static_cast<uint32_t>(Queue::atomic_response);
    h.msn = tx_msn_[3]++;
    tx_.build(h, payload, {}, frame);
    irq_head_ = (irq_head_ + 1) % irq_.size();
    --irq_count_;
    return true;
}

bool Engine::build_read_response(TxFrame &frame) noexcept {
    if (irq_count_ == 0) return false;
    ReadResponseJob &job = irq_[irq_head_];
    if (job.atomic) return build_atomic_response(frame);
    size_t chunk = std::min<size_t>(job.req.size - job.sent, cfg_.mulpdu - kTaggedHeaderLen);
    Header h;
    h.tagged = true;
    h.opcode = static_cast<uint8_t>(Opcode::read_response);
    h.stag = job.req.sink_stag;
    h.to = job.req.sink_to + job.sent;
    h.last = job.sent + chunk == job.req.size;
    iovec v{const_cast<uint8_t *>(job.src) + job.sent, chunk};
    if (job.foreign && chunk > 0) {
        if (!owner_.dma_read(dma_address(v.iov_base), frame.snapshot, chunk)) {
            abort(term::kRdmapLocalCatastrophic);  // nothing of this chunk goes out; the Terminate does
            return false;
        }
        v.iov_base = frame.snapshot;
    }
    // The source is the responder's memory, which its owner may write while the peer reads it (a race of data,
    // not of protocol): the frame carries a copy, so the CRC matches what is sent. A foreign chunk already is one.
    tx_.build(h, {}, std::span<const iovec>(&v, chunk > 0 ? 1 : 0), frame, !job.foreign, defer_crc_);
    job.sent += static_cast<uint32_t>(chunk);
    stats_.tx_bytes += chunk;
    if (h.last) {
        irq_head_ = (irq_head_ + 1) % irq_.size();
        --irq_count_;
    }
    return true;
}

bool Engine::build_request(TxFrame &frame) noexcept {
    if (sq_count_ == 0) return false;
    WorkRequest &wr = sq_[sq_head_];
    Header h;
    if (wr.type == WorkType::read) {
        if (ord_count_ >= cfg_.ord) return false;  // wait until a response frees an ORD slot
        h.opcode = static_cast<uint8_t>(Opcode::read_request);
        h.qn = static_cast<uint32_t>(Queue::read_request);
        h.msn = tx_msn_[1]++;
        uint8_t req[kReadRequestLen];
        encode_read_request(ReadRequest{wr.local_stag, wr.local_to, wr.length, wr.remote_stag, wr.remote_to}, req);
        tx_.build(h, req, {}, frame);
        OutstandingRead o;
        o.wr_id = wr.wr_id;
        o.sink_stag = wr.local_stag;
        o.sink_to = wr.local_to;
        o.length = wr.length;
        orq_[(orq_head_ + ord_count_) % orq_.size()] = o;
        ++ord_count_;
    } else if (wr.type == WorkType::atomic) {
        if (ord_count_ >= cfg_.ord) return false;  // atomics share the ORD with the Reads (RFC 7306 §5.2)
        h.opcode = static_cast<uint8_t>(Opcode::atomic_request);
        h.qn = static_cast<uint32_t>(Queue::read_request);
        h.msn = tx_msn_[1]++;
        AtomicRequest a = wr.atomic;
        a.request_id = next_atomic_id_++;
        a.stag = wr.remote_stag;
        a.to = wr.remote_to;
        uint8_t req[kAtomicRequestLen];
        encode_atomic_request(a, req);
        tx_.build(h, req, {}, frame);
        OutstandingRead o;
        o.wr_id = wr.wr_id;
        o.atomic = true;
        o.request_id = a.request_id;
        o.result = wr.sge[0];
        o.result_foreign = wr.foreign;
        orq_[(orq_head_ + ord_count_) % orq_.size()] = o;
        ++ord_count_;
    } else if (wr.type == WorkType::immediate || wr.type == WorkType::immediate_se) {
        h.opcode = static_cast<uint8_t>(work_opcode(wr.type));
        h.qn = static_cast<uint32_t>(Queue::send);
        h.msn = tx_msn_[0]++;
        uint8_t imm[kImmediateDataLen];
        be::put64(imm, wr.immediate);
        tx_.build(h, imm, {}, frame);
        push_tx_event(frames_built_ + 1, wr.wr_id, Completion::Kind::send, 0);
    } else {
        const size_t total = total_length(wr.sge, wr.num_sge);
        if (sq_sent_ == 0 && cfg_.pull_min != 0 && total >= cfg_.pull_min && !wr.foreign &&
            owner_.peer_takes_pulls() && build_pull(wr, total, frame)) {
            return true;
        }
        const bool write = wr.type == WorkType::write;
        h.opcode = static_cast<uint8_t>(work_opcode(wr.type));
        h.tagged = opcode_info(h.opcode).tagged;
        const size_t chunk = std::min(total - sq_sent_, cfg_.mulpdu - h.size());
        if (write) {
            h.stag = wr.remote_stag;
            h.to = wr.remote_to + sq_sent_;
        } else {
            h.qn = static_cast<uint32_t>(Queue::send);
            h.msn = tx_msn_[0];
            h.mo = sq_sent_;
            if (opcode_info(h.opcode).invalidate) h.inv_stag = wr.inv_stag;
        }
        h.last = sq_sent_ + chunk == total;
        iovec iov[kMaxSge];
        size_t n = 0;
        if (wr.foreign) {
            if (!dma_gather(owner_, wr.sge, wr.num_sge, sq_sent_, chunk, frame.snapshot)) {
                abort(term::kRdmapLocalCatastrophic);  // the request never completes; the owner flushes it
                return false;
            }
            iov[0] = iovec{frame.snapshot, chunk};
            n = chunk > 0 ? 1 : 0;
        } else {
            n = gather(wr.sge, wr.num_sge, sq_sent_, chunk, iov);
        }
        tx_.build(h, {}, std::span<const iovec>(iov, n), frame, false, defer_crc_ && !wr.foreign);
        sq_sent_ += static_cast<uint32_t>(chunk);
        stats_.tx_bytes += chunk;
        if (!h.last) return true;
        if (!write) ++tx_msn_[0];
        // The completion belongs to this frame, whose sequence number next_frame() assigns after we return.
        push_tx_event(frames_built_ + 1, wr.wr_id, write ? Completion::Kind::write : Completion::Kind::send,
                      static_cast<uint32_t>(total));
        sq_sent_ = 0;
    }
    sq_head_ = (sq_head_ + 1) % sq_.size();
    --sq_count_;
    return true;
}

bool Engine::build_pull(WorkRequest &wr, size_t total, TxFrame &frame) noexcept {
    // The message's own header, whole (L set), with the pull bit; its payload says where the bytes lie here.
    Header h;
    h.opcode = static_cast<uint8_t>(work_opcode(wr.type));
    h.tagged = opcode_info(h.opcode).tagged;
    h.ddp_reserved = kDdpPull;
    const bool write = wr.type == WorkType::write;
    if (write) {
        h.stag = wr.remote_stag;
        h.to = wr.remote_to;
    } else {
        h.qn = static_cast<uint32_t>(Queue::send);
        h.msn = tx_msn_[0];
        if (opcode_info(h.opcode).invalidate) h.inv_stag = wr.inv_stag;
    }
    uint8_t *d = frame.snapshot;
    uint32_t n = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
        if (wr.sge[i].len == 0) continue;
        uint8_t *p = d + 8 + 12 * size_t{n};
        be::put64(p, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(wr.sge[i].addr)));
        be::put32(p + 8, static_cast<uint32_t>(wr.sge[i].len));
        ++n;
    }
    const size_t dlen = 8 + 12 * size_t{n};
    if (h.size() + dlen > cfg_.mulpdu) return false;  // frames too small to carry it: the bytes go themselves
    be::put32(d, static_cast<uint32_t>(total));
    be::put32(d + 4, n);
    const iovec v{d, dlen};
    tx_.build(h, {}, std::span<const iovec>(&v, 1), frame);
    if (!write) ++tx_msn_[0];
    ++pulls_sent_;
    ++stats_.tx_pulls;
    stats_.tx_bytes += total;
    // Done once this frame is sent and the peer says it copied the bytes (the buffer is then the consumer's again).
    push_tx_event(frames_built_ + 1, wr.wr_id, write ? Completion::Kind::write : Completion::Kind::send,
                  static_cast<uint32_t>(total), true, pulls_sent_);
    sq_head_ = (sq_head_ + 1) % sq_.size();
    --sq_count_;
    return true;
}

bool Engine::build_message(TxFrame &frame) noexcept {
    if (rtr_pending_) return false;  // peer-to-peer responder: nothing goes out before the initiator's RTR
    if (rtr_to_send_) {
        rtr_to_send_ = false;
        // A zero-length Read uses the Read Request queue's MSN, a zero-length Send the Send queue's; a Write none.
        uint32_t msn = 0;
        if (cfg_.rtr_send == kRtrRead) msn = tx_msn_[1]++;
        if (cfg_.rtr_send == kRtrSend) msn = tx_msn_[0]++;
        RtrMessage m = make_rtr(cfg_.rtr_send, msn);
        uint8_t req[kReadRequestLen];
        if (m.has_read) {
            encode_read_request(m.read, req);
            OutstandingRead rtr;
            rtr.internal = true;
            orq_[(orq_head_ + ord_count_) % orq_.size()] = rtr;
            ++ord_count_;
        }
        tx_.build(m.header, std::span<const uint8_t>(req, m.has_read ? kReadRequestLen : 0), {}, frame);
        return true;
    }
    if (nudge_to_send_) {
        nudge_to_send_ = false;
        tx_.build(make_rtr(kRtrWrite, 0).header, {}, {}, frame);
        return true;
    }
    // Alternate between answering the peer's reads and our own requests so neither starves. A builder that hit an
    // unreadable foreign source has stopped the stream instead: then nothing else may be built.
    const bool response_first = prefer_response_;
    prefer_response_ = !prefer_response_;
    if (response_first && build_read_response(frame)) return true;
    if (!rx_.failed() && build_request(frame)) return true;
    return !response_first && !rx_.failed() && build_read_response(frame);
}

bool Engine::nudge() noexcept {
    // A zero-length Write between two segments of one Write would end that message early at the peer (DDP's Last
    // flag); between segments of a Send or a Read Response it would be legal, but nothing gains from it.
    const bool partial = sq_sent_ != 0 || (irq_count_ > 0 && irq_[irq_head_].sent != 0);
    if (failed() || rtr_to_send_ || rtr_pending_ != 0 || partial) return false;
    nudge_to_send_ = true;
    return true;
}

bool Engine::next_frame(TxFrame &frame, bool defer_crc) noexcept {
    defer_crc_ = defer_crc;
    const bool built = next_frame(frame);
    defer_crc_ = false;
    return built;
}

bool Engine::next_frame(TxFrame &frame) noexcept {
    bool built = false;
    if (pull_ack_due()) {
        // Pulls done (or refused): acknowledged before anything else, a Terminate included.
        Header h;
        h.ddp_reserved = kDdpPull;
        h.opcode = kPullAckOpcode;
        h.msn = pulls_taken_;
        tx_.build(h, {}, {}, frame);
        pulls_acked_out_ = pulls_taken_;
        built = true;
    } else {
        built = !rx_.failed() && build_message(frame);
        // After a failure, including one build_message() just hit, the Terminate is the last frame.
        if (!built && rx_.failed()) {
            if (peer_terminated_ || terminate_built_) return false;
            build_terminate(frame);
            terminate_built_ = true;
            built = true;
        }
    }
    if (built) {
        ++frames_built_;
        ++stats_.tx_fpdus;
    }
    return built;
}

}  // namespace iwarp
