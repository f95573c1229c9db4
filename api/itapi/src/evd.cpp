// IT-API event dispatchers: SEVDs over the access layer's simple dispatchers (a DTO SEVD is a completion queue),
// AEVDs over its aggregate dispatchers, callbacks over its notification mode.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

#include "common.hpp"
#include "failure.hpp"
#include "requests.hpp"

namespace itapi {
namespace {

constexpr uint32_t kAllEvdFlags = IT_EVD_DEQUEUE_NOTIFICATIONS | IT_EVD_CREATE_FD | IT_EVD_OVERFLOW_DEFAULT |
                                  IT_EVD_OVERFLOW_NOTIFY | IT_EVD_OVERFLOW_AUTO_RESET;

std::chrono::milliseconds to_ms(uint64_t timeout_us) {
    if (timeout_us == IT_TIMEOUT_INFINITE) return std::chrono::hours(24 * 365 * 10);
    return std::chrono::milliseconds((timeout_us + 999) / 1000);
}

// The handle of the LMR or RMR whose remote STag @p stag an inbound Send with Invalidate invalidated.
it_handle_t invalidated(const ri_wc_t &wc) {
    Ep *ep = lookup<Ep>(reinterpret_cast<void *>(wc.qp_context));
    if (ep == nullptr) return IT_NULL_HANDLE;
    std::lock_guard lock(ep->ia->mutex);
    auto it = ep->ia->stags.find(wc.invalidated_stag);
    return it == ep->ia->stags.end() ? IT_NULL_HANDLE : reinterpret_cast<it_handle_t>(it->second);
}

// Arms the CQ of every DTO SEVD feeding AEVD @p aevd, so their next completion wakes the AEVD's descriptor.
void arm_members(Evd *aevd) {
    std::vector<std::shared_ptr<ual::CompletionQueue>> cqs;
    {
        std::lock_guard lock(aevd->ia->mutex);
        for (auto &[o, owned] : aevd->ia->objects) {
            if (o->type != IT_HANDLE_TYPE_EVD) continue;
            auto *m = static_cast<Evd *>(o);
            if (m->aevd == aevd && m->cq) cqs.push_back(m->cq);
        }
    }
    for (auto &cq : cqs) (void)cq->request_notify(RI_CQ_NOTIFY_NEXT);
}

// The fast path of a DTO SEVD: one completion straight from the provider's CQ, no lock; false when there is none.
bool poll_one(const Evd *e, it_evd_handle_t evd, it_event_t &out) {
    ri_wc_t wc;
    uint32_t n = 0;
    if (e->verbs->poll_cq(e->cq_handle, 1, &wc, &n) != RI_OK || n != 1) return false;
    dto_event(wc, evd, out);
    if (wc.flags & RI_WC_WITH_INV) out.dto_cmpl.unlinked_mr_handle = invalidated(wc);
    return true;
}

// Sets (or with an empty @p fn clears) the notifier of every SEVD that feeds AEVD @p aevd (the IA's mutex held).
void notify_members(Evd *aevd, const std::function<void()> &fn) {
    for (auto &[o, owned] : aevd->ia->objects) {
        if (o->type != IT_HANDLE_TYPE_EVD) continue;
        auto *m = static_cast<Evd *>(o);
        if (m->aevd == aevd) m->sd->set_notifier(fn, fn ? aevd->ia->al->executor() : ual::SimpleDispatcher::Executor{});
    }
}

// An event the AEVD @p aevd took from its SEVD @p member: the event itself, or - when the SEVD was created with
// IT_EVD_DEQUEUE_NOTIFICATIONS - a notification naming the SEVD, the event waiting there for it_evd_dequeue.
void from_member(Evd *aevd, Evd *member, const ual::Event &ev, it_event_t &out);

// The oldest event an AEVD announced for @p e, converted into @p out; false when none waits.
bool take_stashed(Evd *e, it_event_t &out);

}  // namespace

/** @brief The IT-API event of access-layer event @p e delivered on SEVD @p sevd. */
void to_it_event(const ual::Event &e, const Evd &sevd, it_event_t &out) {
    const auto evd = to_handle<it_evd_handle_t>(&sevd);
    switch (e.stream) {
        case ual::EventStream::dto:
            dto_event(e.wc, evd, out);
            if (e.wc.flags & RI_WC_WITH_INV) out.dto_cmpl.unlinked_mr_handle = invalidated(e.wc);
            return;
        case ual::EventStream::cm_request:
            conn_request_event(e, evd, out);
            remember_request(e, sevd.ia);
            return;
        case ual::EventStream::cm_message: connection_event(e, evd, out); return;
        case ual::EventStream::affiliated_async: {
            std::memset(&out, 0, sizeof out);
            it_affiliated_event_t &a = out.aff_async;
            a.event_number = affiliated_event_of(e.id);
            a.evd = evd;
            if (e.resource_type == RI_RES_QP) {
                a.cause.ep = reinterpret_cast<it_ep_handle_t>(e.context);
            } else if (e.resource_type == RI_RES_SRQ) {
                a.cause.srq = reinterpret_cast<it_srq_handle_t>(e.context);
            } else if (e.resource_type == RI_RES_CQ) {
                a.cause.sevd = reinterpret_cast<it_evd_handle_t>(e.context);
            }
            return;
        }
        case ual::EventStream::unaffiliated_async:
            std::memset(&out, 0, sizeof out);
            out.unaff_async.event_number = unaffiliated_event_of(e.id);
            out.unaff_async.evd = evd;
            out.unaff_async.ia = to_handle<it_ia_handle_t>(sevd.ia);
            out.unaff_async.spigot_id = 0;
            return;
        case ual::EventStream::software:
            std::memset(&out, 0, sizeof out);
            out.sw.event_number = IT_SOFTWARE_EVENT;
            out.sw.evd = evd;
            out.sw.data = e.software;
            return;
    }
}

namespace {

void from_member(Evd *aevd, Evd *member, const ual::Event &ev, it_event_t &out) {
    if (!(member->flags & IT_EVD_DEQUEUE_NOTIFICATIONS)) {
        to_it_event(ev, *member, out);
        return;
    }
    {
        std::lock_guard lock(member->stash_mutex);
        member->stash.push_back(ev);
        member->stashed.store(true, std::memory_order_release);
    }
    std::memset(&out, 0, sizeof out);
    out.aevd_notify.event_number = IT_AEVD_NOTIFICATION_EVENT;
    out.aevd_notify.aevd = to_handle<it_evd_handle_t>(aevd);
    out.aevd_notify.sevd = to_handle<it_evd_handle_t>(member);
}

bool take_stashed(Evd *e, it_event_t &out) {
    if (!e->stashed.load(std::memory_order_acquire)) return false;
    ual::Event ev;
    {
        std::lock_guard lock(e->stash_mutex);
        if (e->stash.empty()) return false;
        ev = std::move(e->stash.front());
        e->stash.pop_front();
        e->stashed.store(!e->stash.empty(), std::memory_order_release);
    }
    to_it_event(ev, *e, out);
    return true;
}

}  // namespace
}  // namespace itapi

using namespace itapi;

ITAPI_EXPORT it_status_t it_evd_create(it_ia_handle_t ia_handle, it_event_type_t event_number, it_evd_flags_t evd_flag,
                                       size_t sevd_queue_size, size_t sevd_threshold, it_evd_handle_t aevd_handle,
                                       it_evd_handle_t *evd_handle, int *fd) {
    forget_failure();
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return IT_ERR_INVALID_IA;
    if (evd_handle == nullptr) return IT_ERR_FAULT;
    if ((evd_flag & ~kAllEvdFlags) != 0) return IT_ERR_INVALID_FLAGS;
    if ((evd_flag & IT_EVD_CREATE_FD) && fd == nullptr) return IT_ERR_FAULT;
    const bool aggregate = event_number == IT_AEVD_NOTIFICATION_EVENT_STREAM;
    ual::EventStream stream{};
    if (!aggregate && !ual_stream_of(event_number, stream)) return IT_ERR_INVALID_EVD_TYPE;
    if (!aggregate) {
        if (sevd_queue_size == 0 || sevd_queue_size > (1u << 20)) return IT_ERR_INVALID_QUEUE_SIZE;
        if (sevd_threshold > sevd_queue_size) return IT_ERR_INVALID_THRESHOLD;
        if (stream == ual::EventStream::dto && sevd_queue_size > ia->attr.max_cqe) return IT_ERR_RESOURCE_QUEUE_SIZE;
    }
    std::lock_guard lock(ia->mutex);
    Evd *parent = nullptr;
    if (aevd_handle != nullptr) {
        parent = lookup<Evd>(aevd_handle);
        if (parent == nullptr || !parent->aggregate() || parent->ia != ia || aggregate) return IT_ERR_INVALID_AEVD;
    }
    if (stream == ual::EventStream::affiliated_async && !aggregate && ia->affiliated != nullptr) {
        return IT_ERR_ASYNC_AFF_EVD_EXISTS;
    }
    if (stream == ual::EventStream::unaffiliated_async && !aggregate && ia->unaffiliated != nullptr) {
        return IT_ERR_ASYNC_UNAFF_EVD_EXISTS;
    }
    Evd *e = make_child<Evd>(ia);
    if (e == nullptr) return IT_ERR_RESOURCES;
    e->stream = event_number;
    e->flags = evd_flag;
    e->queue_size = sevd_queue_size;
    e->threshold = sevd_threshold;
    if (aggregate) {
        auto agg = ual::AggregateDispatcher::create();
        if (!agg) {
            destroy_child(ia, e);
            return failed("it_evd_create", agg.error(), from_ri(agg.error().code(), IT_ERR_RESOURCES));
        }
        e->agg = std::move(*agg);
        if ((evd_flag & IT_EVD_CREATE_FD) && e->agg->fd() < 0) {
            const int err = errno;
            destroy_child(ia, e);
            return failed("it_evd_create", rdma::Error(err, "eventfd failed"), IT_ERR_RESOURCES);
        }
    } else {
        const auto threshold = static_cast<uint32_t>(sevd_threshold == IT_THRESHOLD_DISABLE ? 1 : sevd_threshold);
        auto sd = ual::SimpleDispatcher::create(stream, static_cast<uint32_t>(sevd_queue_size), threshold);
        if (!sd) {
            destroy_child(ia, e);
            return failed("it_evd_create", sd.error(), from_ri(sd.error().code(), IT_ERR_RESOURCES));
        }
        e->sd = std::move(*sd);
        e->sd->set_tag(e->handle);
        if ((evd_flag & IT_EVD_CREATE_FD) && e->sd->fd() < 0) {
            const int err = errno;
            destroy_child(ia, e);
            return failed("it_evd_create", rdma::Error(err, "eventfd failed"), IT_ERR_RESOURCES);
        }
        // A thread waiting for connection or asynchronous events reads the kAL itself (one wake-up, not two).
        if (stream != ual::EventStream::dto && stream != ual::EventStream::software) {
            ia->adapter->share_event_pump(*e->sd);
        }
        if (stream == ual::EventStream::dto) {
            auto cq = ia->adapter->create_cq(static_cast<uint32_t>(sevd_queue_size), e->sd);
            if (!cq) {
                destroy_child(ia, e);
                return failed("it_evd_create", cq.error(), from_ri(cq.error().code(), IT_ERR_RESOURCE_QUEUE_SIZE));
            }
            e->cq = std::move(*cq);
            e->verbs = &ia->adapter->verbs();
            e->cq_handle = e->cq->handle();
            // A descriptor (its own or its AEVD's) is raised by CQ notifications: arm for the first completion.
            if ((evd_flag & IT_EVD_CREATE_FD) || parent != nullptr) (void)e->cq->request_notify(RI_CQ_NOTIFY_NEXT);
        }
        if (parent != nullptr) {
            if (auto r = parent->agg->add(e->sd); !r) {
                destroy_child(ia, e);
                return IT_ERR_INVALID_AEVD;
            }
            e->aevd = parent;
            ++parent->users;
            if (parent->callback != nullptr) {
                auto cb = parent->callback;
                auto arg = parent->callback_arg;
                auto h = to_handle<it_evd_handle_t>(parent);
                e->sd->set_notifier([cb, arg, h] { cb(h, arg); }, ia->al->executor());
            }
        }
        if (stream == ual::EventStream::affiliated_async) {
            ia->affiliated = e;
            ia->adapter->set_async_dispatchers(e->sd, ia->unaffiliated ? ia->unaffiliated->sd : nullptr);
        } else if (stream == ual::EventStream::unaffiliated_async) {
            ia->unaffiliated = e;
            ia->adapter->set_async_dispatchers(ia->affiliated ? ia->affiliated->sd : nullptr, e->sd);
        }
    }
    if (evd_flag & IT_EVD_CREATE_FD) *fd = aggregate ? e->agg->fd() : e->sd->fd();
    *evd_handle = to_handle<it_evd_handle_t>(e);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_free(it_evd_handle_t evd_handle) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    Ia *ia = e->ia;
    std::lock_guard lock(ia->mutex);
    if (e->users != 0) return IT_ERR_EVD_BUSY;
    if (e == ia->affiliated || e == ia->unaffiliated) {
        if (e == ia->affiliated) ia->affiliated = nullptr;
        if (e == ia->unaffiliated) ia->unaffiliated = nullptr;
        ia->adapter->set_async_dispatchers(ia->affiliated ? ia->affiliated->sd : nullptr,
                                           ia->unaffiliated ? ia->unaffiliated->sd : nullptr);
    }
    if (e->sd) e->sd->set_notifier({});
    if (e->aevd != nullptr) {
        e->aevd->agg->remove(e->sd);
        --e->aevd->users;
    }
    if (e->cq) {
        if (rdma::Status st = e->cq->close(); !st.ok() && st.code() == RI_EBUSY) return IT_ERR_EVD_BUSY;
    }
    destroy_child(ia, e);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_dequeue(it_evd_handle_t evd_handle, it_event_t *event) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (event == nullptr) return IT_ERR_FAULT;
    if (take_stashed(e, *event)) return IT_SUCCESS;  // one atomic load when nothing was announced
    if (e->cq_handle != nullptr) {
        if (poll_one(e, evd_handle, *event)) return IT_SUCCESS;
        // Nothing. A consumer that sleeps on the descriptor needs it cleared now and raised by the next completion.
        if (!(e->flags & IT_EVD_CREATE_FD)) return IT_ERR_QUEUE_EMPTY;
        (void)e->sd->dequeue();
        (void)e->cq->request_notify(RI_CQ_NOTIFY_NEXT);
        // A completion between the poll and the arming raised nothing: look once more.
        return poll_one(e, evd_handle, *event) ? IT_SUCCESS : IT_ERR_QUEUE_EMPTY;
    }
    if (e->aggregate()) {
        uint64_t tag = 0;
        auto r = e->agg->dequeue(&tag);
        if (!r) return r.error().code() == RI_EOVERFLOW ? IT_ERR_EVD_QUEUE_FULL : IT_ERR_ABORT;
        if (!*r) {
            // The AEVD's descriptor wakes for a DTO member only when that member's CQ is armed.
            if (e->flags & IT_EVD_CREATE_FD) arm_members(e);
            return IT_ERR_QUEUE_EMPTY;
        }
        Evd *member = lookup<Evd>(reinterpret_cast<void *>(tag));
        if (member == nullptr) return IT_ERR_QUEUE_EMPTY;
        from_member(e, member, **r, *event);
        return IT_SUCCESS;
    }
    auto r = e->sd->dequeue();
    if (!r) return r.error().code() == RI_EOVERFLOW ? IT_ERR_EVD_QUEUE_FULL : IT_ERR_ABORT;
    if (!*r) return IT_ERR_QUEUE_EMPTY;
    to_it_event(**r, *e, *event);
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_wait(it_evd_handle_t evd_handle, uint64_t timeout, it_event_t *event, size_t *nmore) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (event == nullptr) return IT_ERR_FAULT;
    if (e->callback != nullptr) return IT_ERR_CALLBACK_EXISTS;
    if (e->aevd != nullptr) return IT_ERR_INVALID_EVD_STATE;  // its events are waited for on its AEVD
    if (e->aggregate()) {
        uint64_t tag = 0;
        auto r = e->agg->wait(to_ms(timeout), &tag);
        if (!r) {
            const int c = r.error().code();
            return c == RI_ETIMEDOUT ? IT_ERR_TIMEOUT_EXPIRED : c == RI_EOVERFLOW ? IT_ERR_EVD_QUEUE_FULL : IT_ERR_ABORT;
        }
        Evd *member = lookup<Evd>(reinterpret_cast<void *>(tag));
        if (member == nullptr) return IT_ERR_ABORT;
        from_member(e, member, *r, *event);
        if (nmore != nullptr) *nmore = member->sd ? member->sd->pending() : 0;
        return IT_SUCCESS;
    }
    if (e->cq_handle != nullptr && poll_one(e, evd_handle, *event)) {
        if (nmore != nullptr) *nmore = 0;
        return IT_SUCCESS;
    }
    auto r = e->sd->wait(to_ms(timeout));
    if (!r) {
        const int c = r.error().code();
        return c == RI_ETIMEDOUT ? IT_ERR_TIMEOUT_EXPIRED : c == RI_EOVERFLOW ? IT_ERR_EVD_QUEUE_FULL : IT_ERR_ABORT;
    }
    to_it_event(*r, *e, *event);
    if (nmore != nullptr) *nmore = e->sd->pending();
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_post_se(it_evd_handle_t evd_handle, const void *event) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (e->stream != IT_SOFTWARE_EVENT_STREAM) return IT_ERR_INVALID_EVD_TYPE;
    ual::Event ev;
    ev.stream = ual::EventStream::software;
    ev.software = const_cast<void *>(event);
    return e->sd->post(ev) ? IT_SUCCESS : IT_ERR_EVD_QUEUE_FULL;
}

ITAPI_EXPORT it_status_t it_evd_callback_attach(it_evd_handle_t evd_handle, it_evd_callback_rtn_t callback, void *arg) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (callback == nullptr) return IT_ERR_FAULT;
    Ia *ia = e->ia;
    std::lock_guard lock(ia->mutex);
    if (e->callback != nullptr) return IT_ERR_CALLBACK_EXISTS;
    if (e->aevd != nullptr) return IT_ERR_INVALID_EVD_STATE;
    e->callback = callback;
    e->callback_arg = arg;
    auto notify = [callback, arg, evd_handle] { callback(evd_handle, arg); };
    if (e->aggregate()) {
        notify_members(e, notify);  // an AEVD's callback runs when any of its SEVDs gets an event
    } else {
        e->sd->set_notifier(notify, ia->al->executor());
    }
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_callback_detach(it_evd_handle_t evd_handle) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    Ia *ia = e->ia;
    std::lock_guard lock(ia->mutex);
    if (e->callback == nullptr) return IT_ERR_INVALID_EVD_STATE;
    e->callback = nullptr;
    e->callback_arg = nullptr;
    if (e->aggregate()) {
        notify_members(e, {});
    } else {
        e->sd->set_notifier({});
    }
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_query(it_evd_handle_t evd_handle, it_evd_param_mask_t mask, it_evd_param_t *params) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (params == nullptr) return IT_ERR_FAULT;
    if ((mask & ~0xfffu) != 0) return IT_ERR_INVALID_MASK;
    std::lock_guard lock(e->ia->mutex);
    params->ia = to_handle<it_ia_handle_t>(e->ia);
    params->event_number = e->stream;
    params->evd_flag = e->flags;
    params->sevd_queue_size = e->queue_size;
    params->sevd_threshold = e->threshold;
    params->aevd = to_handle<it_evd_handle_t>(e->aevd);
    params->fd = (e->flags & IT_EVD_CREATE_FD) ? (e->aggregate() ? e->agg->fd() : e->sd->fd()) : -1;
    params->evd_bound = e->users != 0 ? IT_TRUE : IT_FALSE;
    params->evd_enabled = IT_TRUE;
    params->evd_overflowed = (e->sd && e->sd->overflows() != 0) ? IT_TRUE : IT_FALSE;
    params->evd_callback = e->callback != nullptr ? IT_TRUE : IT_FALSE;
    return IT_SUCCESS;
}

ITAPI_EXPORT it_status_t it_evd_modify(it_evd_handle_t evd_handle, it_evd_param_mask_t mask,
                                       const it_evd_param_t *params) {
    Evd *e = lookup<Evd>(evd_handle);
    if (e == nullptr) return IT_ERR_INVALID_EVD;
    if (params == nullptr) return IT_ERR_FAULT;
    // What can change after creation: enabling, and which AEVD an SEVD feeds. Queue size and threshold are fixed
    // (the access layer's dispatchers are sized once; a DTO SEVD's queue is its CQ).
    if ((mask & ~static_cast<uint32_t>(IT_EVD_PARAM_ENABLED | IT_EVD_PARAM_AEVD_HANDLE)) != 0) return IT_ERR_INVALID_MASK;
    // Disabling an EVD is not supported (its events would have to be held back from waiters, descriptors and
    // callbacks); enabling one that is enabled is.
    if ((mask & IT_EVD_PARAM_ENABLED) && params->evd_enabled != IT_TRUE) return IT_ERR_OP_NOT_SUPPORTED;
    Ia *ia = e->ia;
    std::lock_guard lock(ia->mutex);
    if (mask & IT_EVD_PARAM_AEVD_HANDLE) {
        if (e->aggregate()) return IT_ERR_INVALID_AEVD;
        Evd *to = nullptr;
        if (params->aevd != nullptr) {
            to = lookup<Evd>(params->aevd);
            if (to == nullptr || !to->aggregate() || to->ia != ia) return IT_ERR_INVALID_AEVD;
        }
        if (e->aevd != nullptr) {
            e->aevd->agg->remove(e->sd);
            --e->aevd->users;
            e->aevd = nullptr;
        }
        if (to != nullptr) {
            if (auto r = to->agg->add(e->sd); !r) return IT_ERR_INVALID_AEVD;
            e->aevd = to;
            ++to->users;
        }
    }
    return IT_SUCCESS;
}
