// Receive queues: checks at post, resolution at take, the SRQ limit.
#include "receive_queue.hpp"

#include <mutex>

#include <algorithm>
#include <cstring>

namespace softrnic::datapath {

ri_status_t check_receive(const ri_recv_wr_t &w, uint32_t max_sge, const StagTable &stags, uint32_t pd) {
    if (w.num_sge > 0 && w.sgl == nullptr) return RI_EINVAL;
    if (w.num_sge > max_sge || w.num_sge > iwarp::kMaxSge) return RI_ERANGE;
    for (uint32_t i = 0; i < w.num_sge; ++i) {
        const ri_sge_t &s = w.sgl[i];
        if (s.length == 0) continue;
        StagEntry e;
        if (!stags.find(s.lkey, e) || !e.valid || e.pd != pd || !e.map(s.addr, s.length)) return RI_EINVAL;
        if ((e.access & RI_ACCESS_LOCAL_WRITE) == 0) return RI_EACCES;
    }
    return RI_OK;
}

ri_status_t post_receives(ReceiveQueue &rq, const ri_recv_wr_t *wr, uint32_t count, uint32_t max_sge,
                          const StagTable &stags, uint32_t pd, uint32_t *posted) {
    if (posted == nullptr) return RI_EINVAL;
    *posted = 0;
    if (wr == nullptr && count > 0) return RI_EINVAL;
    ri_status_t rc = RI_OK;
    uint32_t good = 0;
    for (; good < count; ++good) {
        rc = check_receive(wr[good], max_sge, stags, pd);
        if (rc != RI_OK) break;
    }
    std::lock_guard g(rq.lock());
    for (uint32_t i = 0; i < good; ++i) {
        if (!rq.push(wr[i])) return RI_EAGAIN;
        ++*posted;
    }
    return rc;
}

bool ReceiveQueue::push(const ri_recv_wr_t &w) noexcept {
    if (ring_.full()) return false;
    softrnic_rq_wqe h{};
    h.wr_id = w.wr_id;
    h.num_sge = w.num_sge;
    uint8_t *slot = ring_.next();
    std::memcpy(slot, &h, sizeof h);
    if (w.num_sge > 0) std::memcpy(slot + sizeof h, w.sgl, w.num_sge * sizeof(ri_sge_t));
    ring_.push();
    return true;
}

bool ReceiveQueue::pop(uint64_t &wr_id) noexcept {
    if (ring_.empty()) return false;
    softrnic_rq_wqe h;
    std::memcpy(&h, ring_.front(), sizeof h);
    ring_.pop();
    wr_id = h.wr_id;
    return true;
}

ReceiveQueue::Take ReceiveQueue::take(iwarp::ReceiveBuffer &out, const StagTable &stags, uint32_t pd,
                                      bool &limit_reached, StagCache &cache) {
    softrnic_rq_wqe h;
    ri_sge_t sge[iwarp::kMaxSge];
    {
        std::lock_guard g(lock_);
        if (ring_.empty()) return Take::empty;
        const uint8_t *slot = ring_.front();
        std::memcpy(&h, slot, sizeof h);
        h.num_sge = std::min<uint32_t>(h.num_sge, iwarp::kMaxSge);  // checked at post; the ring is ours
        std::memcpy(sge, slot + sizeof h, h.num_sge * sizeof(ri_sge_t));
        ring_.pop();
        if (limit_ != 0 && ring_.count() < limit_) {
            limit_ = 0;  // one event per arming
            limit_reached = true;
        }
    }
    // Resolved outside the ring's lock: the table has its own.
    out.wr_id = h.wr_id;
    out.num_sge = 0;
    for (uint32_t i = 0; i < h.num_sge; ++i) {
        if (sge[i].length == 0) continue;
        StagEntry e;
        if (!stags.find(sge[i].lkey, e, cache) || !e.valid || e.pd != pd || (e.access & RI_ACCESS_LOCAL_WRITE) == 0) {
            return Take::invalid;
        }
        auto p = e.map(sge[i].addr, sge[i].length);
        if (!p) return Take::invalid;
        out.sge[out.num_sge++] = iwarp::LocalSpan{*p, sge[i].length};
    }
    return Take::ok;
}

}  // namespace softrnic::datapath
