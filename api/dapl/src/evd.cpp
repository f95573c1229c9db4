// DAT event dispatchers over the access layer's: an EVD that carries DTO or RMR-bind completions owns a completion
// queue (dequeued straight from the provider's CQ, no lock), and every EVD has one queue for all other events
// (connection requests, connection events, asynchronous errors, software events); an aggregate over both is what a
// waiter sleeps on. Converted events wait in the EVD's ring only when a threshold wait or a CNO looked ahead.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "dapl.hpp"
#include "rnicpi/host/log.hpp"

namespace dapl {
namespace {

constexpr uint32_t kAllEvdFlags = DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG |
                                  DAT_EVD_CONNECTION_FLAG | DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG;

DAT_DTO_COMPLETION_STATUS dto_status_of(uint32_t s) noexcept {
    switch (s) {
        case RI_WC_SUCCESS: return DAT_DTO_SUCCESS;
        case RI_WC_LOC_LEN_ERR: return DAT_DTO_ERR_LOCAL_LENGTH;
        case RI_WC_LOC_QP_OP_ERR: return DAT_DTO_ERR_LOCAL_EP;
        case RI_WC_LOC_PROT_ERR:
        case RI_WC_LOC_ACCESS_ERR: return DAT_DTO_ERR_LOCAL_PROTECTION;
        case RI_WC_WR_FLUSH_ERR: return DAT_DTO_ERR_FLUSHED;
        case RI_WC_MW_BIND_ERR: return DAT_RMR_OPERATION_FAILED;
        case RI_WC_REM_ACCESS_ERR: return DAT_DTO_ERR_REMOTE_ACCESS;
        case RI_WC_REM_OP_ERR:
        case RI_WC_REM_INV_REQ_ERR: return DAT_DTO_ERR_REMOTE_RESPONDER;
        case RI_WC_BAD_RESP_ERR: return DAT_DTO_ERR_BAD_RESPONSE;
        case RI_WC_LLP_ERR:
        case RI_WC_FATAL_ERR:
        case RI_WC_GENERAL_ERR:
        default: return DAT_DTO_ERR_TRANSPORT;
    }
}

DAT_DTOS operation_of(const ri_wc_t &wc) noexcept {
    switch (wc.opcode) {
        case RI_WC_SEND: return DAT_DTO_SEND;
        case RI_WC_RDMA_WRITE: return DAT_DTO_RDMA_WRITE;
        case RI_WC_RDMA_READ: return DAT_DTO_RDMA_READ;
        case RI_WC_BIND_MW: return DAT_DTO_BIND_MW;
        case RI_WC_RECV: return (wc.flags & RI_WC_WITH_INV) ? DAT_DTO_RECEIVE_WITH_INVALIDATE : DAT_DTO_RECEIVE;
        default: return DAT_DTO_SEND;
    }
}

// The DTO completion event of @p wc, on @p evd.
void dto_event(const Evd *evd, const ri_wc_t &wc, DAT_EVENT &out) noexcept {
    if (wc.opcode == RI_WC_BIND_MW) {
        // An RMR bind: its record says which RMR and whose cookie.
        out.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
        out.evd_handle = evd->dat<DAT_EVD_HANDLE>();
        DAT_RMR_BIND_COMPLETION_EVENT_DATA &r = out.event_data.rmr_completion_event_data;
        r.rmr_handle = DAT_HANDLE_NULL;
        r.user_cookie.as_64 = 0;
        r.status = dto_status_of(wc.status);
        if (Ep *ep = lookup<Ep>(reinterpret_cast<void *>(wc.qp_context))) {
            std::lock_guard lock(ep->bind_mutex);
            if (auto it = ep->binds.find(wc.wr_id); it != ep->binds.end()) {
                r.rmr_handle = it->second.first;
                r.user_cookie.as_64 = it->second.second;
                ep->binds.erase(it);
            }
        }
        return;
    }
    if (wc.status != RI_WC_SUCCESS) {
        RDMA_LOG_DEBUG("dapl", "QP %u: work request %#llx (opcode %u) completed with status %u, vendor error %#x",
                       wc.qp_num, static_cast<unsigned long long>(wc.wr_id), wc.opcode, wc.status, wc.vendor_err);
    }
    out.event_number = DAT_DTO_COMPLETION_EVENT;
    out.evd_handle = evd->dat<DAT_EVD_HANDLE>();
    DAT_DTO_COMPLETION_EVENT_DATA &d = out.event_data.dto_completion_event_data;
    d.ep_handle = reinterpret_cast<DAT_EP_HANDLE>(wc.qp_context);
    d.user_cookie.as_64 = wc.wr_id;
    d.status = dto_status_of(wc.status);
    d.transfered_length = wc.byte_len;
    d.operation = operation_of(wc);
    d.rmr_context = (wc.flags & RI_WC_WITH_INV) ? wc.invalidated_stag : 0;
#if defined(DAT_EXTENSIONS) && !defined(OPENRDMA_KDAPL)
    ib_dto_event(wc, out);  // atomics and immediate data: OFED's extended event
#endif
    if ((wc.opcode & RI_WC_RECV) != 0) {
        // A receive left its queue: dat_ep_recv_query and dat_srq_query count what is still posted.
        if (Ep *ep = lookup<Ep>(d.ep_handle)) {
            if (ep->srq != nullptr) {
                ep->srq->posted.fetch_sub(1, std::memory_order_relaxed);
            } else {
                ep->recv_posted.fetch_sub(1, std::memory_order_relaxed);
            }
        }
    }
}

// The DAT event of queued access-layer event @p e on @p evd; false when it carries none (a wake-up, a request
// that could not become a CR, a repeated disconnect).
bool queued_event(Evd *evd, const ual::Event &e, DAT_EVENT &out) {
    std::memset(&out, 0, sizeof out);
    out.evd_handle = evd->dat<DAT_EVD_HANDLE>();
    switch (e.stream) {
        case ual::EventStream::dto:
            dto_event(evd, e.wc, out);
            return true;
        case ual::EventStream::software:
            if (e.id == kConsumerEvent) {
                out.event_number = DAT_SOFTWARE_EVENT;
                out.event_data.software_event_data.pointer = e.software;
                return true;
            }
            if (e.id == kRmrBind) {
                out.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
                DAT_RMR_BIND_COMPLETION_EVENT_DATA &r = out.event_data.rmr_completion_event_data;
                r.rmr_handle = reinterpret_cast<DAT_RMR_HANDLE>(e.context);
                r.user_cookie.as_64 = e.resource_id;
                r.status = static_cast<DAT_RMR_BIND_COMPLETION_STATUS>(e.detail);
                return true;
            }
            return false;  // kWake
        case ual::EventStream::cm_request: {
            std::lock_guard lock(evd->ia->mutex);
            Cr *cr = make_cr(evd->ia, e);
            if (cr == nullptr) return false;
            out.event_number = DAT_CONNECTION_REQUEST_EVENT;
            DAT_CR_ARRIVAL_EVENT_DATA &c = out.event_data.cr_arrival_event_data;
            if (cr->sp != nullptr) c.sp_handle.psp_handle = cr->sp->dat<DAT_PSP_HANDLE>();
            c.local_ia_address_ptr = reinterpret_cast<DAT_IA_ADDRESS_PTR>(&evd->ia->address);
            c.conn_qual = cr->conn_qual;
            c.cr_handle = cr->dat<DAT_CR_HANDLE>();
            c.truncate_flag = DAT_FALSE;
            return true;
        }
        case ual::EventStream::cm_message: {
            Ep *ep = lookup<Ep>(reinterpret_cast<void *>(e.context));
            if (ep == nullptr) return false;  // freed since
            if (!connection_event(ep, e, out)) return false;
            out.evd_handle = evd->dat<DAT_EVD_HANDLE>();
            return true;
        }
        case ual::EventStream::affiliated_async: {
            DAT_ASYNCH_ERROR_EVENT_DATA &a = out.event_data.asynch_error_event_data;
            a.dat_handle = reinterpret_cast<DAT_HANDLE>(e.context);
            switch (e.id) {
                case RI_AE_QP_FATAL:
                case RI_AE_QP_TERMINATE_RECEIVED:
                case RI_AE_QP_TERMINATE_SENT:
                case RI_AE_QP_LOCAL_ACCESS_ERROR:
                case RI_AE_QP_REMOTE_ACCESS_ERROR:
                case RI_AE_QP_PROTOCOL_ERROR:
                    out.event_number = DAT_ASYNC_ERROR_EP_BROKEN;
                    a.reason = DAT_EP_TRANSFER_TO_ERROR;
                    return true;
                case RI_AE_QP_LAST_WQE_REACHED:
                    // An EP on an SRQ takes no more of its receives: OFA's providers report IB's "last WQE
                    // reached" this way, and SRQ consumers wait for it before they free the EP.
                    out.event_number = DAT_ASYNC_ERROR_EP_BROKEN;
                    a.reason = DAT_EP_OTHER_ERROR;
                    return true;
                case RI_AE_CQ_OVERFLOW:
                    out.event_number = DAT_ASYNC_ERROR_EVD_OVERFLOW;
                    a.reason = DAT_EVD_OVERFLOW_ERROR;
                    return true;
                case RI_AE_SRQ_LIMIT_REACHED:
                    out.event_number = DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR;
                    a.reason = DAT_SRQ_LOW_WATERMARK_EVENT;
                    return true;
                case RI_AE_SRQ_ERROR:
                    out.event_number = DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR;
                    a.reason = DAT_SRQ_TRANSFER_TO_ERROR;
                    return true;
                default:
                    // The stream's orderly end, a reset, a drained send queue: connection events report those.
                    return false;
            }
        }
        case ual::EventStream::unaffiliated_async:
            if (e.id == RI_AE_RNIC_LINK_DOWN || e.id == RI_AE_RNIC_LINK_UP) return false;  // DAT has no link events
            out.event_number = DAT_ASYNC_ERROR_IA_CATASTROPHIC;
            out.event_data.asynch_error_event_data.dat_handle = public_ia(evd->ia);
            out.event_data.asynch_error_event_data.reason = DAT_IA_CATASTROPHIC_ERROR;
            return true;
    }
    return false;
}

void ring_push(Evd *evd, const DAT_EVENT &e) noexcept {
    evd->ring[(evd->head + evd->count) % evd->ring.size()] = e;
    ++evd->count;
}

DAT_EVENT ring_pop(Evd *evd) noexcept {
    DAT_EVENT e = evd->ring[evd->head];
    evd->head = (evd->head + 1) % evd->ring.size();
    --evd->count;
    return e;
}

// Moves what is available into the ring, up to its capacity (threshold waits, CNO look-ahead).
[[maybe_unused]] void fill(Evd *evd) {
    while (evd->count < evd->ring.size() && evd->has_cq()) {
        ri_wc_t wc[16];
        uint32_t n = 0;
        const auto room = static_cast<uint32_t>(std::min<size_t>(16, evd->ring.size() - evd->count));
        if (evd->verbs->poll_cq(evd->cq_handle, room, wc, &n) != RI_OK || n == 0) break;
        for (uint32_t i = 0; i < n; ++i) {
            DAT_EVENT e;
            std::memset(&e, 0, sizeof e);
            dto_event(evd, wc[i], e);
            ring_push(evd, e);
        }
    }
    for (auto *q : {evd->requests.get(), evd->queue.get()}) {
        while (q != nullptr && evd->count < evd->ring.size()) {
            auto r = q->dequeue();
            if (!r) continue;  // an overflow was reported once; look again
            if (!*r) break;
            DAT_EVENT e;
            if (queued_event(evd, **r, e)) ring_push(evd, e);
        }
    }
}

constexpr std::chrono::milliseconds kLookAgain{20};

[[maybe_unused]] std::chrono::milliseconds to_ms(uint64_t us) { return std::chrono::milliseconds((us + 999) / 1000); }

DAT_RETURN bad_evd() noexcept { return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST); }

}  // namespace

#ifndef OPENRDMA_KDAPL
// --- CNO cores ---------------------------------------------------------------------------------------------------

CnoCore::~CnoCore() {
    if (fd >= 0) ::close(fd);
}

void CnoCore::trigger(DAT_EVD_HANDLE evd) {
    DAT_OS_WAIT_PROXY_AGENT a;
    {
        std::lock_guard lock(mutex);
        if (std::find(triggered.begin(), triggered.end(), evd) == triggered.end()) triggered.push_back(evd);
        a = agent;
        if (fd >= 0) {
            uint64_t one = 1;
            (void)!::write(fd, &one, sizeof one);
        }
    }
    cv.notify_all();
    if (a.proxy_agent_func != nullptr) a.proxy_agent_func(a.instance_data, evd);
}

#endif  // !OPENRDMA_KDAPL

// --- EVD internals shared with ep.cpp and mem.cpp ----------------------------------------------------------------

bool post_event(Evd *evd, const ual::Event &e) noexcept { return evd->queue->post(e); }

#ifndef OPENRDMA_KDAPL

void attach_cno(Evd *evd, Cno *cno) {
    if (evd->cno != nullptr) {
        std::erase(evd->cno->evds, evd);
        if (evd->dto) evd->dto->set_notifier({});
        if (evd->requests) evd->requests->set_notifier({});
        evd->queue->set_notifier({});
    }
    evd->cno = cno;
    if (cno == nullptr) return;
    cno->evds.push_back(evd);
    auto fn = [core = cno->core, enabled = evd->enabled, handle = evd->dat<DAT_EVD_HANDLE>()] {
        if (enabled->load(std::memory_order_acquire)) core->trigger(handle);
    };
    // Notifiers run on the uAL's worker pool: never inside a provider's poll or under a dispatcher's lock.
    if (evd->dto) evd->dto->set_notifier(fn, evd->ia->al->executor());
    if (evd->requests) evd->requests->set_notifier(fn, evd->ia->al->executor());
    evd->queue->set_notifier(fn, evd->ia->al->executor());
}

#endif  // !OPENRDMA_KDAPL

void release_evd(Evd *evd) noexcept {
#ifdef OPENRDMA_KDAPL
    stop_upcalls(evd);
#else
    if (evd->cno != nullptr) attach_cno(evd, nullptr);
#endif
    if (evd->ia->async_evd == evd) {
        evd->ia->adapter->set_async_dispatchers(nullptr, nullptr);
        evd->ia->async_evd = nullptr;
    }
    if (evd->agg) {
        if (evd->dto) evd->agg->remove(evd->dto);
        if (evd->requests) evd->agg->remove(evd->requests);
        evd->agg->remove(evd->queue);
    }
}

DAT_RETURN create_evd(Ia *ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags, Evd **out) {
    if (qlen <= 0 || static_cast<uint64_t>(qlen) > ia->attr.max_cqe) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    if (flags == 0 || (flags & ~kAllEvdFlags) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if ((flags & DAT_EVD_ASYNC_FLAG) && ia->async_evd != nullptr) {
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_ASYNC);  // one async EVD per IA
    }
    Evd *evd = make_child<Evd>(ia);
    if (evd == nullptr) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    auto fail = [&](const char *what, const rdma::Error &err, DAT_RETURN st) {
        release_evd(evd);
        destroy_child(ia, evd);
        return failed(what, err, st);
    };
    evd->flags = flags;
    evd->qlen = qlen;
    try {
        evd->ring.resize(static_cast<size_t>(qlen));
    } catch (...) {
        destroy_child(ia, evd);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    // The queue also carries this layer's own events (bind completions, wake-ups): room beyond qlen for them.
    // An async EVD also receives every QP's teardown events from the uAL (which it then drops): room for many.
    const DAT_COUNT room = (flags & DAT_EVD_ASYNC_FLAG) ? std::max<DAT_COUNT>(qlen, 4096) : std::max<DAT_COUNT>(qlen, 64);
    auto queue = ual::SimpleDispatcher::create(ual::EventStream::software, static_cast<uint32_t>(room) + 16, 1);
    if (!queue) return fail("dat_evd_create", queue.error(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
    evd->queue = std::move(*queue);
    evd->queue->set_tag(reinterpret_cast<uint64_t>(evd->handle));
    auto agg = ual::AggregateDispatcher::create();
    if (!agg) return fail("dat_evd_create", agg.error(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
    evd->agg = std::move(*agg);
    if (flags & (DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG)) {
        auto dto = ual::SimpleDispatcher::create(ual::EventStream::dto, static_cast<uint32_t>(qlen), 1);
        if (!dto) return fail("dat_evd_create", dto.error(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
        auto cq = ia->adapter->create_cq(static_cast<uint32_t>(qlen), *dto);
        if (!cq) {
            return fail("dat_evd_create", cq.error(),
                        from_ri(cq.error().code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD)));
        }
        evd->dto = std::move(*dto);
        evd->cq = std::move(*cq);
        evd->verbs = &ia->adapter->verbs();
        evd->cq_handle = evd->cq->handle();
        (void)evd->agg->add(evd->dto);
    }
    if (flags & DAT_EVD_CR_FLAG) {
        auto requests = ual::SimpleDispatcher::create(ual::EventStream::cm_request,
                                                      static_cast<uint32_t>(std::max<DAT_COUNT>(qlen, 64)), 1);
        if (!requests) {
            return fail("dat_evd_create", requests.error(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD));
        }
        evd->requests = std::move(*requests);
        (void)evd->agg->add(evd->requests);
    }
    (void)evd->agg->add(evd->queue);
    // A thread waiting for connection or asynchronous events reads the kAL itself (one wake-up, not two).
    if (flags & (DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG | DAT_EVD_ASYNC_FLAG)) ia->adapter->share_event_pump(*evd->queue);
    if (flags & DAT_EVD_ASYNC_FLAG) {
        ia->async_evd = evd;
        ia->adapter->set_async_dispatchers(evd->queue, evd->queue);
    }
    *out = evd;
    return DAT_SUCCESS;
}

DAT_RETURN next_event(Evd *evd, DAT_EVENT *event) {
    if (evd->count > 0) {
        *event = ring_pop(evd);
        return DAT_SUCCESS;
    }
    if (evd->has_cq()) {
        ri_wc_t wc;
        uint32_t n = 0;
        if (evd->verbs->poll_cq(evd->cq_handle, 1, &wc, &n) == RI_OK && n == 1) {
            dto_event(evd, wc, *event);
            return DAT_SUCCESS;
        }
    }
    for (auto *q : {evd->requests.get(), evd->queue.get()}) {
        while (q != nullptr) {
            auto r = q->dequeue();
            if (!r) continue;  // an overflow was reported once; the next look finds what is left
            if (!*r) break;
            if (queued_event(evd, **r, *event)) return DAT_SUCCESS;
        }
    }
    return DAT_QUEUE_EMPTY;  // plain, as OFA returns it: consumers compare with DAT_QUEUE_EMPTY itself
}

// --- DAT calls -----------------------------------------------------------------------------------------------------

#ifndef OPENRDMA_KDAPL
DAT_RETURN evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT qlen, DAT_CNO_HANDLE cno_handle, DAT_EVD_FLAGS flags,
                      DAT_EVD_HANDLE *evd_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (evd_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    Cno *cno = nullptr;
    if (cno_handle != DAT_HANDLE_NULL) {
        cno = lookup<Cno>(cno_handle);
        if (cno == nullptr || cno->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    }
    std::lock_guard lock(ia->mutex);
    Evd *evd = nullptr;
    if (DAT_RETURN st = create_evd(ia, qlen, flags, &evd); st != DAT_SUCCESS) return st;
    if (cno != nullptr) attach_cno(evd, cno);
    *evd_handle = evd->dat<DAT_EVD_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    if (param == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_EVD_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(evd->ia->mutex);
    param->ia_handle = public_ia(evd->ia);
    param->evd_qlen = evd->qlen;
    param->evd_state = evd->enabled->load() ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED;
    param->cno_handle = evd->cno != nullptr ? evd->cno->dat<DAT_CNO_HANDLE>() : DAT_HANDLE_NULL;
    param->evd_flags = evd->flags;
    return DAT_SUCCESS;
}

DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE evd_handle, DAT_CNO_HANDLE cno_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    Cno *cno = nullptr;
    if (cno_handle != DAT_HANDLE_NULL) {
        cno = lookup<Cno>(cno_handle);
        if (cno == nullptr || cno->ia != evd->ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    }
    std::lock_guard lock(evd->ia->mutex);
    attach_cno(evd, cno);
    return DAT_SUCCESS;
}

DAT_RETURN evd_enable(DAT_EVD_HANDLE evd_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    evd->enabled->store(true, std::memory_order_release);
    return DAT_SUCCESS;
}

DAT_RETURN evd_disable(DAT_EVD_HANDLE evd_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    evd->enabled->store(false, std::memory_order_release);
    return DAT_SUCCESS;
}

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE evd_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    evd->waitable.store(false, std::memory_order_release);
    ual::Event wake;
    wake.stream = ual::EventStream::software;
    wake.id = kWake;
    (void)evd->queue->post(wake);  // a waiter wakes and sees it may wait no longer
    return DAT_SUCCESS;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE evd_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    evd->waitable.store(true, std::memory_order_release);
    return DAT_SUCCESS;
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE evd_handle, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *event,
                    DAT_COUNT *nmore) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    if (event == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (nmore == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (threshold <= 0 || threshold > evd->qlen) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (!evd->waitable.load(std::memory_order_acquire)) {
        return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    }
    if (evd->waiting.exchange(true)) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    const bool forever = timeout == DAT_TIMEOUT_INFINITE;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(forever ? 0 : timeout);
    DAT_RETURN st = DAT_SUCCESS;
    for (;;) {
        fill(evd);
        if (evd->count >= static_cast<size_t>(threshold)) break;
        if (!evd->waitable.load(std::memory_order_acquire)) {
            st = DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
            break;
        }
        auto left = std::chrono::milliseconds(24L * 3600 * 1000);
        if (!forever) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) {
                st = DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0);
                break;
            }
            left = std::max(std::chrono::milliseconds(1), to_ms(std::chrono::duration_cast<std::chrono::microseconds>(
                                                                      deadline - now).count()));
        }
        // A sleeper looks at its CQ at least every kLookAgain: a provider whose progress stalls while nobody polls
        // (softrnic's, under bidirectional streams of unsignalled requests) moves on when it is polled again.
        auto got = evd->agg->wait(std::min(left, kLookAgain));
        if (!got) continue;  // timed out (checked above) or an overflow report
        DAT_EVENT e;
        const bool have = got->stream == ual::EventStream::dto ? (std::memset(&e, 0, sizeof e), dto_event(evd, got->wc, e), true)
                                                               : queued_event(evd, *got, e);
        if (have) {
            if (evd->count < evd->ring.size()) {
                ring_push(evd, e);
            } else {
                // Cannot happen: the ring holds qlen and the threshold is at most qlen; keep the event first.
                *event = e;
                *nmore = static_cast<DAT_COUNT>(evd->count);
                evd->waiting.store(false);
                return DAT_SUCCESS;
            }
        }
    }
    if (st == DAT_SUCCESS) *event = ring_pop(evd);
    *nmore = static_cast<DAT_COUNT>(evd->count);
    evd->waiting.store(false);
    return st;
}

#endif  // !OPENRDMA_KDAPL

DAT_RETURN evd_resize(DAT_EVD_HANDLE evd_handle, DAT_COUNT qlen) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    std::lock_guard lock(evd->ia->mutex);
    if (qlen <= 0 || static_cast<uint64_t>(qlen) > evd->ia->attr.max_cqe) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    if (static_cast<size_t>(qlen) < evd->count) return DAT_ERROR(DAT_INVALID_STATE, 0);
    if (evd->waiting.load()) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    if (static_cast<uint32_t>(qlen) + 16 > evd->queue->capacity() + 0u && static_cast<uint32_t>(qlen) > 64) {
        // The event queue was sized at creation; growing it past that would lose what it holds.
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    if (evd->has_cq() && static_cast<uint32_t>(qlen) > evd->cq->depth()) {
        auto r = evd->cq->resize(static_cast<uint32_t>(qlen));
        if (!r) return failed("dat_evd_resize", r.error(), from_ri(r.error().code(), DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD)));
    }
    std::vector<DAT_EVENT> ring;
    try {
        ring.resize(static_cast<size_t>(qlen));
    } catch (...) {
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    size_t n = 0;
    while (evd->count > 0) ring[n++] = ring_pop(evd);
    evd->ring = std::move(ring);
    evd->head = 0;
    evd->count = n;
    evd->qlen = qlen;
    return DAT_SUCCESS;
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE evd_handle, const DAT_EVENT *event) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    if (event == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG)) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (event->event_number != DAT_SOFTWARE_EVENT) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    ual::Event e;
    e.stream = ual::EventStream::software;
    e.id = kConsumerEvent;
    e.software = event->event_data.software_event_data.pointer;
    if (!evd->queue->post(e)) return DAT_ERROR(DAT_QUEUE_FULL, 0);
    return DAT_SUCCESS;
}

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE evd_handle, DAT_EVENT *event) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    if (event == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    return next_event(evd, event);
}

DAT_RETURN evd_free(DAT_EVD_HANDLE evd_handle) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return bad_evd();
    Ia *ia = evd->ia;
    std::lock_guard lock(ia->mutex);
    if (evd->users != 0) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    if (evd->waiting.load()) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    if (ia->async_evd == evd) ia->own_async = false;
    release_evd(evd);
    destroy_child(ia, evd);
    return DAT_SUCCESS;
}

#ifndef OPENRDMA_KDAPL
// --- CNO -----------------------------------------------------------------------------------------------------------

DAT_RETURN cno_create(DAT_IA_HANDLE ia_handle, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (cno_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::lock_guard lock(ia->mutex);
    Cno *cno = make_child<Cno>(ia);
    if (cno == nullptr || !cno->core) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    cno->core->agent = agent;
    *cno_handle = cno->dat<DAT_CNO_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN cno_fd_create(DAT_IA_HANDLE ia_handle, DAT_FD *fd, DAT_CNO_HANDLE *cno_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (fd == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (cno_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    std::lock_guard lock(ia->mutex);
    Cno *cno = make_child<Cno>(ia);
    if (cno == nullptr) {
        ::close(efd);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    cno->core->fd = efd;
    cno->fd_cno = true;
    *fd = efd;
    *cno_handle = cno->dat<DAT_CNO_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE cno_handle, DAT_OS_WAIT_PROXY_AGENT agent) {
    Cno *cno = lookup<Cno>(cno_handle);
    if (cno == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    std::lock_guard lock(cno->core->mutex);
    cno->core->agent = agent;
    return DAT_SUCCESS;
}

DAT_RETURN cno_query(DAT_CNO_HANDLE cno_handle, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param) {
    Cno *cno = lookup<Cno>(cno_handle);
    if (cno == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (param == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    (void)mask;  // DAT_CNO_PARAM_MASK's values overlap (FIELD_PROXY is 3, FIELD_ALL is 4): every field is filled
    std::lock_guard lock(cno->core->mutex);
    param->ia_handle = public_ia(cno->ia);
    if (cno->fd_cno) {
        param->proxy_type = DAT_PROXY_TYPE_FD;
        param->proxy.fd = cno->core->fd;
    } else if (cno->core->agent.proxy_agent_func != nullptr) {
        param->proxy_type = DAT_PROXY_TYPE_AGENT;
        param->proxy.agent = cno->core->agent;
    } else {
        param->proxy_type = DAT_PROXY_TYPE_NONE;
        param->proxy.none = nullptr;
    }
    return DAT_SUCCESS;
}

DAT_RETURN cno_free(DAT_CNO_HANDLE cno_handle) {
    Cno *cno = lookup<Cno>(cno_handle);
    if (cno == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    Ia *ia = cno->ia;
    std::lock_guard lock(ia->mutex);
    if (!cno->evds.empty()) return DAT_ERROR(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    destroy_child(ia, cno);
    return DAT_SUCCESS;
}

DAT_RETURN cno_wait(DAT_CNO_HANDLE cno_handle, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd_handle) {
    Cno *cno = lookup<Cno>(cno_handle);
    if (cno == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (evd_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::shared_ptr<CnoCore> core = cno->core;
    const bool forever = timeout == DAT_TIMEOUT_INFINITE;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(forever ? 0 : timeout);
    for (;;) {
        // Events already waiting in an attached, enabled EVD satisfy the wait at once (looked at again every
        // kLookAgain, as dat_evd_wait does, for a provider that progresses only when polled).
        {
            std::lock_guard lock(cno->ia->mutex);
            for (Evd *evd : cno->evds) {
                if (!evd->enabled->load()) continue;
                if (evd->count == 0) fill(evd);
                if (evd->count > 0) {
                    std::lock_guard c(core->mutex);
                    std::erase(core->triggered, evd->dat<DAT_EVD_HANDLE>());
                    *evd_handle = evd->dat<DAT_EVD_HANDLE>();
                    return DAT_SUCCESS;
                }
            }
        }
        std::unique_lock lock(core->mutex);
        auto slice = kLookAgain;
        if (!forever) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) return DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0);
            slice = std::min(slice, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                                        std::chrono::milliseconds(1));
        }
        if (core->cv.wait_for(lock, slice, [&] { return !core->triggered.empty(); })) {
            *evd_handle = core->triggered.front();
            core->triggered.erase(core->triggered.begin());
            if (core->triggered.empty() && core->fd >= 0) {
                uint64_t n;
                (void)!::read(core->fd, &n, sizeof n);
            }
            return DAT_SUCCESS;
        }
    }
}

DAT_RETURN cno_trigger(DAT_CNO_HANDLE cno_handle, DAT_EVD_HANDLE *evd_handle) {
    Cno *cno = lookup<Cno>(cno_handle);
    if (cno == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (evd_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(cno->core->mutex);
    if (cno->core->triggered.empty()) {
        *evd_handle = DAT_HANDLE_NULL;
        return DAT_QUEUE_EMPTY;  // plain, as OFA returns it: consumers compare with DAT_QUEUE_EMPTY itself
    }
    *evd_handle = cno->core->triggered.front();
    cno->core->triggered.erase(cno->core->triggered.begin());
    if (cno->core->triggered.empty() && cno->core->fd >= 0) {
        uint64_t n;
        (void)!::read(cno->core->fd, &n, sizeof n);
    }
    return DAT_SUCCESS;
}

#endif  // !OPENRDMA_KDAPL

}  // namespace dapl
