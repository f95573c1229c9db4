// The offload engine's injected faults (FaultPlan): frames the wire loses, corrupts or delays, and corrupted reads.
#include "oe_inside.hpp"

namespace hwstub {

bool OffloadEngine::faults_armed_for(const Qp &qp) const noexcept {
    return (faults_.tx_drop.load(std::memory_order_relaxed) | faults_.tx_corrupt.load(std::memory_order_relaxed) |
            faults_.tx_delay_ms.load(std::memory_order_relaxed)) != 0 &&
           faults_.aims_at(qp.setup.qp_num);
}

// The wire's faults on the frame just built in @p slot: lost, corrupted (the DDP version's low bit: with CRC the
// peer's CRC check fails, without it the version check), or held back.
void OffloadEngine::outbound_faults(Qp &qp, size_t slot) {
    Stream &s = *qp.stream;
    if (FaultPlan::take(faults_.tx_drop)) {
        s.lost[slot] = 1;
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
    } else if (FaultPlan::take(faults_.tx_corrupt)) {
        iwarp::TxFrame &f = s.frames[slot];
        const iovec &last = f.iov[f.iovcnt - 1];
        const bool whole = last.iov_base == static_cast<void *>(f.compact);  // a small FPDU, framed in one piece
        if (s.crc && (whole || (last.iov_base >= static_cast<void *>(f.tail) &&
                                last.iov_base < static_cast<void *>(f.tail + sizeof f.tail)))) {
            static_cast<uint8_t *>(last.iov_base)[last.iov_len - 1] ^= 0x10;  // the CRC's last byte
        } else {
            (whole ? f.compact : f.head)[iwarp::kMpaLengthLen] ^= 0x01;  // the DDP version
        }
        stats_.faults.fetch_add(1, std::memory_order_relaxed);
    }
    if (const uint32_t ms = faults_.tx_delay_ms.load(std::memory_order_relaxed); ms != 0) {
        s.due[slot] = steady_ns() + static_cast<int64_t>(ms) * 1'000'000;
    }
}

// An inbound fault: one bit of @p last (the last byte a read brought) flipped. With CRC the FPDU it belongs to
// fails its check; reads end where the peer's writes did, so that is almost always a CRC byte.
void OffloadEngine::corrupt_inbound(const Qp &qp, uint8_t &last) {
    if (faults_.rx_corrupt.load(std::memory_order_relaxed) == 0 || !faults_.aims_at(qp.setup.qp_num)) return;
    if (!FaultPlan::take(faults_.rx_corrupt)) return;
    last ^= 0x10;
    stats_.faults.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace hwstub
