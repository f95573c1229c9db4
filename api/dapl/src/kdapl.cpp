// kDAPL: the DAT 2.0 kernel API for consumer modules krdmad hosts (krdma/consumer_module.h). The object code is
// the uDAPL provider's, compiled once more with OPENRDMA_KDAPL over a uAL hosted in the kAL (the kernel IT-API's
// hosted link); this file adds what the kernel model has and the user one has not: the registry a kernel module
// opens IAs through, upcall EVDs instead of CNOs and waiting, and kernel memory types.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <list>
#include <thread>

#include "dapl.hpp"
#include "hosted_link.hpp"
#include "kal/consumer_host.hpp"
#include "rnicpi/host/log.hpp"

namespace dapl {

/** @brief An EVD's upcall: the policy and object, and who is delivering (shared with queued notifications). */
struct Upcalls {
    std::mutex mutex;                                /**< Guards what follows. */
    std::condition_variable idle;                    /**< Signalled when the last delivery ends. */
    DAT_UPCALL_POLICY policy = DAT_UPCALL_DISABLE;   /**< When upcalls run. */
    DAT_UPCALL_OBJECT object{};                      /**< What runs. */
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;            /**< The EVD (its handle memory outlives it). */
    bool delivering = false;                         /**< A worker is draining the EVD into upcalls. */
    bool again = false;                              /**< A notification came while it was draining. */
    std::thread::id deliverer;                       /**< That worker (an upcall may free its own EVD). */
};

namespace {

bool active(DAT_UPCALL_POLICY p) noexcept { return p != DAT_UPCALL_DISABLE && p != DAT_UPCALL_TEARDOWN; }

// Hands every event @p u's EVD holds to its upcall; how many. Stops when the policy stops being active (a
// TEARDOWN, or the upcall freeing its own EVD).
size_t drain(const std::shared_ptr<Upcalls> &u) {
    DAT_UPCALL_OBJECT object;
    {
        std::lock_guard lock(u->mutex);
        if (!active(u->policy)) return 0;
        object = u->object;
    }
    Evd *evd = lookup<Evd>(u->evd);  // live: stop_upcalls() waits for this delivery before the EVD goes
    if (evd == nullptr) return 0;
    size_t n = 0;
    DAT_EVENT ev, next;
    bool have = next_event(evd, &ev) == DAT_SUCCESS;
    while (have) {
        const bool more = next_event(evd, &next) == DAT_SUCCESS;
        object.upcall_func(object.instance_data, &ev, more ? DAT_TRUE : DAT_FALSE);
        ++n;
        {
            std::lock_guard lock(u->mutex);
            if (!active(u->policy)) return n;
            object = u->object;
        }
        if ((evd = lookup<Evd>(u->evd)) == nullptr) return n;
        ev = next;
        have = more;
    }
    return n;
}

// Drains the EVD into its upcall, one worker at a time: a notification that arrives meanwhile makes the worker
// look again instead of starting a second one (per EVD, upcalls never run concurrently: SINGLE_INSTANCE exactly,
// and MANY as the special case the specification allows).
void deliver(const std::shared_ptr<Upcalls> &u) {
    {
        std::lock_guard lock(u->mutex);
        if (!active(u->policy)) return;
        if (u->delivering) {
            u->again = true;
            return;
        }
        u->delivering = true;
        u->deliverer = std::this_thread::get_id();
    }
    for (;;) {
        (void)drain(u);
        // Completions that came between the last poll and the CQ's re-arming notify nobody: arm, then look again.
        {
            std::lock_guard lock(u->mutex);
            if (active(u->policy)) {
                if (Evd *evd = lookup<Evd>(u->evd); evd != nullptr && evd->cq) {
                    (void)evd->cq->request_notify(RI_CQ_NOTIFY_NEXT);
                }
            }
        }
        const size_t late = drain(u);
        std::lock_guard lock(u->mutex);
        if (late == 0 && !(u->again && active(u->policy))) {
            u->delivering = false;
            u->deliverer = std::thread::id();
            u->idle.notify_all();
            return;
        }
        u->again = false;
    }
}

void attach_upcalls(Evd *evd) {
    auto fn = [u = evd->upcalls] { deliver(u); };
    const auto run = evd->ia->al->executor();  // never on the kAL's or a provider's thread
    if (evd->dto) evd->dto->set_notifier(fn, run);
    if (evd->requests) evd->requests->set_notifier(fn, run);
    evd->queue->set_notifier(fn, run);
}

void detach_upcalls(Evd *evd) {
    if (evd->dto) evd->dto->set_notifier({});
    if (evd->requests) evd->requests->set_notifier({});
    evd->queue->set_notifier({});
}

DAT_RETURN check_upcall(DAT_UPCALL_POLICY policy, const DAT_UPCALL_OBJECT *upcall, int arg) {
    switch (policy) {
        case DAT_UPCALL_DISABLE:
        case DAT_UPCALL_TEARDOWN: return DAT_SUCCESS;
        case DAT_UPCALL_SINGLE_INSTANCE:
        case DAT_UPCALL_MANY:
            if (upcall == nullptr || upcall->upcall_func == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, arg);
            return DAT_SUCCESS;
        default: return DAT_ERROR(DAT_INVALID_PARAMETER, arg - 1);  // NOTIFY-only and unknown policies
    }
}

}  // namespace

void stop_upcalls(Evd *evd) noexcept {
    if (!evd->upcalls) return;
    Upcalls &u = *evd->upcalls;
    {
        std::unique_lock lock(u.mutex);
        u.policy = DAT_UPCALL_TEARDOWN;
        // An upcall may free its own EVD: it cannot wait for itself.
        if (u.deliverer != std::this_thread::get_id()) u.idle.wait(lock, [&] { return !u.delivering; });
    }
    detach_upcalls(evd);
}

rdma::Expected<std::shared_ptr<ual::AccessLayer>> access_layer() {
    static std::mutex mutex;
    static std::weak_ptr<ual::AccessLayer> shared;
    std::lock_guard lock(mutex);
    if (auto al = shared.lock()) return al;
    kal::ConsumerHost *host = kal::ConsumerHost::current();
    if (host == nullptr) {
        return rdma::Error(RI_ENODEV, "no kAL serves in this process: kDAPL is for consumers krdmad hosts");
    }
    auto al = ual::AccessLayer::open(kal::hosted_link(*host, "kDAPL"));
    if (!al) return al.error();
    shared = *al;
    return *al;
}

DAT_IA_HANDLE public_ia(const Ia *ia) noexcept { return ia->dat<DAT_IA_HANDLE>(); }  // no registry in between

// --- upcall EVDs ---------------------------------------------------------------------------------------------------

DAT_RETURN evd_kcreate(DAT_IA_HANDLE ia_handle, DAT_COUNT qlen, DAT_UPCALL_POLICY policy,
                       const DAT_UPCALL_OBJECT *upcall, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd_handle) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (evd_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    if (DAT_RETURN st = check_upcall(policy, upcall, DAT_INVALID_ARG4); st != DAT_SUCCESS) return st;
    std::lock_guard lock(ia->mutex);
    Evd *evd = nullptr;
    if (DAT_RETURN st = create_evd(ia, qlen, flags, &evd); st != DAT_SUCCESS) return st;
    try {
        evd->upcalls = std::make_shared<Upcalls>();
    } catch (...) {
        release_evd(evd);
        destroy_child(ia, evd);
        return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    evd->upcalls->evd = evd->dat<DAT_EVD_HANDLE>();
    evd->upcalls->policy = policy;
    if (upcall != nullptr) evd->upcalls->object = *upcall;
    attach_upcalls(evd);
    *evd_handle = evd->dat<DAT_EVD_HANDLE>();
    return DAT_SUCCESS;
}

DAT_RETURN evd_modify_upcall(DAT_EVD_HANDLE evd_handle, DAT_UPCALL_POLICY policy, const DAT_UPCALL_OBJECT *upcall,
                             DAT_UPCALL_FLAG flag) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr || !evd->upcalls) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (flag != DAT_UPCALL_INVOC_NEW && flag != DAT_UPCALL_INVOC_ANY) {
        return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    }
    std::shared_ptr<Upcalls> u = evd->upcalls;
    {
        std::unique_lock lock(u->mutex);
        // DAT_UPCALL_SAME (null) keeps the object.
        const DAT_UPCALL_OBJECT next = upcall != nullptr ? *upcall : u->object;
        if (DAT_RETURN st = check_upcall(policy, &next, DAT_INVALID_ARG3); st != DAT_SUCCESS) return st;
        if (u->policy == DAT_UPCALL_TEARDOWN && active(policy)) return DAT_ERROR(DAT_INVALID_STATE, 0);
        u->policy = policy;
        u->object = next;
        if (policy == DAT_UPCALL_TEARDOWN && u->deliverer != std::this_thread::get_id()) {
            // TEARDOWN returns once the upcalls in progress have returned.
            u->idle.wait(lock, [&] { return !u->delivering; });
        }
    }
    // INVOC_ANY: events already queued get their upcall now; INVOC_NEW waits for the next one.
    if (active(policy) && flag == DAT_UPCALL_INVOC_ANY) evd->ia->al->executor()([u] { deliver(u); });
    return DAT_SUCCESS;
}

DAT_RETURN evd_kquery(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param) {
    Evd *evd = lookup<Evd>(evd_handle);
    if (evd == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (param == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_EVD_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(evd->ia->mutex);
    param->ia_handle = public_ia(evd->ia);
    param->evd_qlen = evd->qlen;
    param->evd_flags = evd->flags;
    if (evd->upcalls) {
        std::lock_guard u(evd->upcalls->mutex);
        param->upcall_policy = evd->upcalls->policy;
        param->upcall = evd->upcalls->object;
    } else {
        param->upcall_policy = DAT_UPCALL_DISABLE;
        param->upcall = DAT_UPCALL_OBJECT{nullptr, nullptr};
    }
    return DAT_SUCCESS;
}

// --- kernel memory ----------------------------------------------------------------------------------------------

namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// The start of a "physical" page list that is one contiguous range, or null. In krdmad, a kernel consumer's
// physical addresses are addresses of krdmad's own memory (there is no other physical memory it can name).
void *contiguous(const DAT_PADDR *pages, DAT_VLEN length) {
    if (pages == nullptr) return nullptr;
    const size_t n = (length + kPage - 1) / kPage;
    for (size_t i = 1; i < n; ++i) {
        if (static_cast<uint64_t>(pages[i]) != static_cast<uint64_t>(pages[0]) + i * kPage) return nullptr;
    }
    return reinterpret_cast<void *>(static_cast<uintptr_t>(pages[0]));
}

}  // namespace

DAT_RETURN lmr_kcreate(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region, DAT_VLEN length,
                       DAT_PZ_HANDLE pz_handle, DAT_MEM_PRIV_FLAGS privs, DAT_VA_TYPE va_type, DAT_MEM_OPT optimization,
                       DAT_LMR_HANDLE *lmr_handle, DAT_LMR_CONTEXT *lmr_context, DAT_RMR_CONTEXT *rmr_context,
                       DAT_VLEN *registered_length, DAT_VADDR *registered_address) {
    Ia *ia = lookup<Ia>(ia_handle);
    if (ia == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    Pz *pz = lookup<Pz>(pz_handle);
    if (pz == nullptr || pz->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
    if (lmr_handle == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG9);
    (void)optimization;  // every registration is exact: no rounding to offer
    if (length == 0) return DAT_ERROR(DAT_LENGTH_ERROR, 0);
    void *addr = nullptr;
    switch (type) {
        case DAT_MEM_TYPE_VIRTUAL:
            addr = region.for_va;
            if (addr == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
            break;
        case DAT_MEM_TYPE_LMR: {
            Lmr *other = lookup<Lmr>(region.for_lmr_handle);
            if (other == nullptr || other->ia != ia) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
            addr = other->addr;
            length = other->length;
            break;
        }
        case DAT_MEM_TYPE_PHYSICAL:
            addr = contiguous(region.for_physical, length);
            if (addr == nullptr) {
                // softrnic has no physical registration: a scattered page list cannot be one region.
                RDMA_LOG_WARN("kdapl", "dat_lmr_kcreate: the physical page list is not contiguous (not supported)");
                return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
            }
            break;
        default: return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);  // platform, IA, bypass, variable-size pages
    }
    std::lock_guard lock(ia->mutex);
    Lmr *l = nullptr;
    if (DAT_RETURN st = register_lmr(ia, pz, type, region, addr, length, privs, va_type, &l); st != DAT_SUCCESS) {
        return st;
    }
    *lmr_handle = l->dat<DAT_LMR_HANDLE>();
    if (lmr_context != nullptr) *lmr_context = l->lmr_context;
    if (rmr_context != nullptr) *rmr_context = l->rmr_context;
    if (registered_length != nullptr) *registered_length = l->length;
    if (registered_address != nullptr) *registered_address = va_type == DAT_VA_TYPE_ZB ? 0 : reinterpret_cast<DAT_VADDR>(addr);
    return DAT_SUCCESS;
}

DAT_RETURN lmr_kquery(DAT_LMR_HANDLE lmr_handle, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *p) {
    Lmr *l = lookup<Lmr>(lmr_handle);
    if (l == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_LMR);
    if (p == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if ((mask & ~static_cast<uint32_t>(DAT_LMR_FIELD_ALL)) != 0) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    std::lock_guard lock(l->ia->mutex);
    query_lmr(l, mask, p);
    p->lmr_state.fmr_support = DAT_FALSE;
    p->lmr_state.bound = DAT_TRUE;
    return DAT_SUCCESS;
}

DAT_RETURN ia_memtype_hint(DAT_IA_HANDLE ia_handle, DAT_MEM_TYPE type, DAT_VLEN length, DAT_MEM_OPT optimization,
                           DAT_VLEN *suggested_length, DAT_VADDR *suggested_alignment) {
    if (lookup<Ia>(ia_handle) == nullptr) return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    if (suggested_length == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
    if (suggested_alignment == nullptr) return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG6);
    (void)optimization;
    if (type != DAT_MEM_TYPE_VIRTUAL && type != DAT_MEM_TYPE_LMR && type != DAT_MEM_TYPE_PHYSICAL) {
        return DAT_ERROR(DAT_NOT_IMPLEMENTED, 0);
    }
    // Regions are pinned and translated by pages: whole, page-aligned pages cost nothing extra.
    *suggested_length = (length + kPage - 1) / kPage * kPage;
    *suggested_alignment = kPage;
    return DAT_SUCCESS;
}

}  // namespace dapl
