/**
 * @file provider.hpp
 * @brief Header-only adapter that turns a C++ provider class into the RNIC-PI C tables.
 *
 * A provider writes one class P with:
 * - `static constexpr` metadata: `name`, `vendor`, `version` (C strings), `mode` (::ri_mode_t), optionally
 *   `flags` and `uvp_library`;
 * - nested object types `Rnic`, `Pd`, `Cq`, `Qp`, `Mr`, and `Srq`, `Mw` (alias rdma::provider::Unsupported for
 *   object types it does not support);
 * - static functions `open_rnic` and, for a kVP, `attach` and `detach`, optionally `init(const ri_host_ops_t&)`,
 *   `fini()`, `syscall(ri_kvp_syscall_t *)` (a uVP's whole request, ABI 1.1) and, for a kVP,
 *   `control(ri_instance_t, const char *, char *, size_t)` (run-time administration, ABI 1.4);
 * - member functions on the object types, named after the verb without its object (`Rnic::alloc_pd`,
 *   `Cq::poll`, `Qp::post_send`, `Pd::register_mr`...; see make_verbs()). Each takes the C arguments that follow
 *   the object handle in ri_verbs_ops_t and returns ::ri_status_t.
 *
 * Objects are made with `new` by the provider and freed by the adapter: when a destroy method (`Rnic::close`,
 * `Pd::dealloc`, `Cq::destroy`, `Qp::destroy`, `Srq::destroy`, `Mr::deregister`, `Mw::dealloc`) returns ::RI_OK,
 * the adapter deletes the object after the method has returned; on any other status the object stays alive and
 * usable, and the consumer may try again. A destroy method releases what the object holds outside itself (the
 * kVP's object, a pin, a charge) and reports whether it did; it never deletes the object itself.
 *
 * A method that is absent leaves its table entry NULL, and the host's loader answers ::RI_EOPNOTSUPP for it. Every
 * call goes through a `noexcept` thunk that turns an escaping exception into an errno value (std::bad_alloc into
 * ::RI_ENOMEM, anything else into ::RI_EIO): nothing C++ crosses the ABI. Then `RI_PROVIDER_MODULE(P)` in one
 * source file defines the module's single exported entry symbol.
 */
#ifndef RNICPI_CPP_PROVIDER_HPP
#define RNICPI_CPP_PROVIDER_HPP

#include <functional>
#include <new>
#include <type_traits>

#include "rnicpi/rnicpi.h"

namespace rdma::provider {

/** @brief Object type alias for objects a provider does not support (e.g. `using Srq = Unsupported;`). */
struct Unsupported {};

/** @brief The opaque C handle for a provider object. */
template <class H, class T>
H to_handle(T *object) noexcept {
    static_assert(std::is_pointer_v<H>, "RNIC-PI handles are opaque pointers");
    return reinterpret_cast<H>(object);
}

/** @brief The provider object behind an opaque C handle. */
template <class T, class H>
T *from_handle(H handle) noexcept {
    static_assert(std::is_pointer_v<H>, "RNIC-PI handles are opaque pointers");
    return reinterpret_cast<T *>(handle);
}

namespace detail {

/** @brief Maps the exception in flight to an errno value; only called from a catch block. */
inline ri_status_t status_of_current_exception() noexcept {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        return RI_ENOMEM;
    } catch (...) {
        return RI_EIO;
    }
}

/** @brief The class a member function pointer belongs to. */
template <class M>
struct ClassOf;
/** @brief ClassOf for any member pointer type. */
template <class C, class T>
struct ClassOf<T C::*> {
    using type = C; /**< The class. */
};

/** @brief C thunk of a member function: the first C argument is the object's handle. */
template <auto M, class Fn>
struct MethodThunk;
/** @brief MethodThunk for a C function type with a handle first argument. */
template <auto M, class H, class... A>
struct MethodThunk<M, ri_status_t (*)(H, A...)> {
    /** @brief The C entry point stored in the table. */
    static ri_status_t call(H handle, A... args) noexcept {
        using C = typename ClassOf<decltype(M)>::type;
        if (handle == nullptr) return RI_EINVAL;
        try {
            return std::invoke(M, *from_handle<C>(handle), args...);
        } catch (...) {
            return status_of_current_exception();
        }
    }
};

/**
 * @brief C thunk of a destroy method: calls it, then frees the object when it reports ::RI_OK. The adapter owns
 *        the deletion so that a destroy that fails leaves the object untouched and one that succeeds frees it once.
 */
template <auto M, class Fn>
struct DestroyThunk;
/** @brief DestroyThunk for a C function type whose only argument is the object's handle. */
template <auto M, class H>
struct DestroyThunk<M, ri_status_t (*)(H)> {
    /** @brief The C entry point stored in the table. */
    static ri_status_t call(H handle) noexcept {
        using C = typename ClassOf<decltype(M)>::type;
        if (handle == nullptr) return RI_EINVAL;
        C *object = from_handle<C>(handle);
        ri_status_t rc;
        try {
            rc = std::invoke(M, *object);
        } catch (...) {
            return status_of_current_exception();
        }
        if (rc == RI_OK) delete object;
        return rc;
    }
};

/** @brief C thunk of a static function. */
template <auto F, class Fn>
struct StaticThunk;
/** @brief StaticThunk for a C function type. */
template <auto F, class R, class... A>
struct StaticThunk<F, R (*)(A...)> {
    /** @brief The C entry point stored in the table. */
    static R call(A... args) noexcept {
        try {
            return F(args...);
        } catch (...) {
            if constexpr (std::is_void_v<R>) {
                return;
            } else {
                return status_of_current_exception();
            }
        }
    }
};

}  // namespace detail

/// @cond INTERNAL
// Fills table field `field` from `Type::method` when the provider defines it. A macro because C++20 cannot pass a
// member name as a template argument; it is used only inside this header.
#define RDMA_RI_METHOD(table, field, Type, method)                                                                \
    if constexpr (requires { &Type::method; }) {                                                                  \
        table.field = &::rdma::provider::detail::MethodThunk<&Type::method, decltype(table.field)>::call;        \
    }
#define RDMA_RI_DESTROY(table, field, Type, method)                                                               \
    if constexpr (requires { &Type::method; }) {                                                                  \
        table.field = &::rdma::provider::detail::DestroyThunk<&Type::method, decltype(table.field)>::call;       \
    }
#define RDMA_RI_STATIC(table, field, Type, function)                                                              \
    if constexpr (requires { &Type::function; }) {                                                                \
        table.field = &::rdma::provider::detail::StaticThunk<&Type::function, decltype(table.field)>::call;      \
    }
/// @endcond

/** @brief Builds the verbs table of provider class @p P at compile time. */
template <class P>
constexpr ri_verbs_ops_t make_verbs() {
    using Rnic = typename P::Rnic;
    using Pd = typename P::Pd;
    using Cq = typename P::Cq;
    using Qp = typename P::Qp;
    using Srq = typename P::Srq;
    using Mr = typename P::Mr;
    using Mw = typename P::Mw;
    ri_verbs_ops_t t{};
    t.size = sizeof(ri_verbs_ops_t);
    t.abi_version = RI_ABI_VERSION;
    RDMA_RI_STATIC(t, open_rnic, P, open_rnic)
    RDMA_RI_DESTROY(t, close_rnic, Rnic, close)
    RDMA_RI_METHOD(t, query_rnic, Rnic, query)
    RDMA_RI_METHOD(t, set_aeh, Rnic, set_aeh)
    RDMA_RI_METHOD(t, set_ceh, Rnic, set_ceh)
    RDMA_RI_METHOD(t, clear_handler, Rnic, clear_handler)
    RDMA_RI_METHOD(t, alloc_pd, Rnic, alloc_pd)
    RDMA_RI_METHOD(t, create_cq, Rnic, create_cq)
    RDMA_RI_DESTROY(t, dealloc_pd, Pd, dealloc)
    RDMA_RI_METHOD(t, create_qp, Pd, create_qp)
    RDMA_RI_METHOD(t, create_srq, Pd, create_srq)
    RDMA_RI_METHOD(t, register_mr, Pd, register_mr)
    RDMA_RI_METHOD(t, register_phys_mr, Pd, register_phys_mr)
    RDMA_RI_METHOD(t, alloc_stag, Pd, alloc_stag)
    RDMA_RI_METHOD(t, alloc_mw, Pd, alloc_mw)
    RDMA_RI_METHOD(t, query_cq, Cq, query)
    RDMA_RI_METHOD(t, resize_cq, Cq, resize)
    RDMA_RI_DESTROY(t, destroy_cq, Cq, destroy)
    RDMA_RI_METHOD(t, poll_cq, Cq, poll)
    RDMA_RI_METHOD(t, request_cq_notify, Cq, request_notify)
    RDMA_RI_METHOD(t, query_qp, Qp, query)
    RDMA_RI_METHOD(t, modify_qp, Qp, modify)
    RDMA_RI_DESTROY(t, destroy_qp, Qp, destroy)
    RDMA_RI_METHOD(t, post_send, Qp, post_send)
    RDMA_RI_METHOD(t, post_recv, Qp, post_recv)
    RDMA_RI_METHOD(t, bind_mw, Qp, bind_mw)
    RDMA_RI_METHOD(t, query_qp_stats, Qp, query_stats)
    RDMA_RI_METHOD(t, query_srq, Srq, query)
    RDMA_RI_METHOD(t, modify_srq, Srq, modify)
    RDMA_RI_DESTROY(t, destroy_srq, Srq, destroy)
    RDMA_RI_METHOD(t, post_srq_recv, Srq, post_recv)
    RDMA_RI_METHOD(t, register_shared_mr, Mr, register_shared)
    RDMA_RI_METHOD(t, reregister_mr, Mr, reregister)
    RDMA_RI_METHOD(t, query_mr, Mr, query)
    RDMA_RI_DESTROY(t, deregister_mr, Mr, deregister)
    RDMA_RI_DESTROY(t, dealloc_mw, Mw, dealloc)
    RDMA_RI_STATIC(t, syscall, P, syscall)
    return t;
}

/** @brief The module tables of provider class @p P and its entry function. */
template <class P>
class Module {
public:
    /** @brief The verbs table, built at compile time. */
    static constexpr ri_verbs_ops_t verbs = make_verbs<P>();

    /** @brief The module description returned to the host. */
    static constexpr ri_module_t module = [] {
        ri_module_t m{};
        m.size = sizeof(ri_module_t);
        m.abi_version = RI_ABI_VERSION;
        m.mode = static_cast<uint32_t>(P::mode);
        if constexpr (requires { P::flags; }) m.flags = P::flags;
        m.name = P::name;
        m.vendor = P::vendor;
        m.version = P::version;
        if constexpr (requires { P::uvp_library; }) m.uvp_library = P::uvp_library;
        m.verbs = &verbs;
        RDMA_RI_STATIC(m, attach, P, attach)
        RDMA_RI_STATIC(m, detach, P, detach)
        RDMA_RI_STATIC(m, fini, P, fini)
        RDMA_RI_STATIC(m, control, P, control)
        return m;
    }();

    /** @brief The host's upcalls, valid after entry() until fini. */
    static const ri_host_ops_t &host() noexcept { return *host_; }

    /** @brief Implementation of the exported entry symbol. */
    static ri_status_t entry(const ri_host_ops_t *host, const ri_module_t **out) noexcept {
        if (host == nullptr || out == nullptr) return RI_EINVAL;
        host_ = host;
        if constexpr (requires { P::init(*host); }) {
            try {
                ri_status_t rc = P::init(*host);
                if (rc != RI_OK) return rc;
            } catch (...) {
                return detail::status_of_current_exception();
            }
        }
        *out = &module;
        return RI_OK;
    }

private:
    // The one piece of module-wide state: the C ABI gives module-level upcalls no per-call context.
    static inline const ri_host_ops_t *host_ = nullptr;
};

}  // namespace rdma::provider

/// @cond INTERNAL
#undef RDMA_RI_METHOD
#undef RDMA_RI_DESTROY
#undef RDMA_RI_STATIC
/// @endcond

/** @brief Defines the exported entry symbol ::RI_MODULE_ENTRY_SYMBOL of the module implemented by class @p P. */
#define RI_PROVIDER_MODULE(P)                                                                                     \
    extern "C" __attribute__((visibility("default"))) ri_status_t ri_module_entry(const ri_host_ops_t *host,   \
                                                                                   const ri_module_t **module) { \
        return ::rdma::provider::Module<P>::entry(host, module);                                                  \
    }

#endif  // RNICPI_CPP_PROVIDER_HPP
