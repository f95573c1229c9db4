/**
 * @file syscall_request.hpp
 * @brief A uVP's privileged request (ri_syscall_t) built field by field and run through the host's syscall upcall,
 *        and the base of uVP objects that forward their destroy and query to the kVP. Header only, for uVPs
 *        written with provider.hpp; nothing of it crosses the ABI. The kVP's side is syscall_reply.hpp.
 */
#ifndef RNICPI_CPP_SYSCALL_REQUEST_HPP
#define RNICPI_CPP_SYSCALL_REQUEST_HPP

#include <cstddef>
#include <cstdint>

#include "rnicpi/cpp/provider.hpp"

namespace rdma::provider {

/**
 * @brief One ri_syscall of the uVP implemented by class @p P: `SyscallRequest<P>(RI_CREATE_CQ, rnic_handle)
 *        .param(attr).result(&provided).priv(req, &resp).run(host_ctx)`. The buffers named stay the caller's.
 */
template <class P>
class SyscallRequest {
public:
    /** @brief Operation @p op (::ri_syscall_op) on the object with kAL handle @p object (0 for none). */
    SyscallRequest(uint32_t op, uint64_t object) noexcept {
        c_.size = sizeof c_;
        c_.op = op;
        c_.object = object;
    }
    /** @brief The verb's parameter block: @p p itself. */
    template <class T>
    SyscallRequest &param(const T &p) noexcept {
        c_.param = &p;
        c_.param_len = sizeof p;
        return *this;
    }
    /** @brief The verb's parameter block: @p len bytes at @p p. */
    SyscallRequest &param(const void *p, uint32_t len) noexcept {
        c_.param = p;
        c_.param_len = len;
        return *this;
    }
    /** @brief Where the verb's result block goes. */
    template <class T>
    SyscallRequest &result(T *r) noexcept {
        c_.result = r;
        c_.result_cap = sizeof *r;
        return *this;
    }
    /** @brief The private data for the kVP, and where its private reply goes. */
    template <class In, class Out>
    SyscallRequest &priv(const In &in, Out *out) noexcept {
        c_.priv_in = &in;
        c_.priv_in_len = sizeof in;
        c_.priv_out = out;
        c_.priv_out_cap = sizeof *out;
        return *this;
    }
    /** @brief Room for @p cap descriptors the kVP passes back; the caller owns what arrives. */
    SyscallRequest &fds_out(int32_t *fds, uint32_t cap) noexcept {
        c_.fds_out = fds;
        c_.nfds_out_cap = cap;
        return *this;
    }
    /** @brief Further object @p i (::RI_SYSCALL_MAX_REFS at most) by its kAL handle. */
    SyscallRequest &ref(size_t i, uint64_t h) noexcept {
        c_.refs[i] = h;
        return *this;
    }
    /** @brief Runs the request with the host context of the RNIC open; ::RI_EOPNOTSUPP for a host without it. */
    [[nodiscard]] ri_status_t run(void *host_ctx) {
        const ri_host_ops_t &h = Module<P>::host();
        if (h.syscall == nullptr) return RI_EOPNOTSUPP;
        return h.syscall(host_ctx, &c_);
    }
    /**
     * @brief Sends the request without waiting for its answer (ri_host_ops_t::syscall_post, ABI 1.6), for a
     *        report whose result the caller does not use; a host without it runs the request as run() does.
     */
    ri_status_t post(void *host_ctx) {
        const ri_host_ops_t &h = Module<P>::host();
        if (RI_HOST_HAS(&h, syscall_post)) return h.syscall_post(host_ctx, &c_);
        return run(host_ctx);
    }
    /** @brief The kAL's handle of the object a create verb made. */
    [[nodiscard]] uint64_t handle() const noexcept { return c_.handle_out; }
    /** @brief Descriptors the kVP passed back. */
    [[nodiscard]] uint32_t nfds_out() const noexcept { return c_.nfds_out; }
    /** @brief Bytes of the result block written. */
    [[nodiscard]] uint32_t result_len() const noexcept { return c_.result_len; }
    /** @brief Bytes of the private reply written. */
    [[nodiscard]] uint32_t priv_len() const noexcept { return c_.priv_out_len; }

private:
    ri_syscall_t c_{};
};

/**
 * @brief A destroy verb released the kAL's object: it did, or the kAL is gone and took every object of the process
 *        with it (as a verbs library lets a consumer destroy what a removed device held).
 */
[[nodiscard]] inline bool released(ri_status_t rc) noexcept { return rc == RI_OK || rc == RI_ENODEV; }

/**
 * @brief Base of an object of the uVP implemented by class @p P that the kAL holds too (made by a create request):
 *        its kAL handle, the host context of the RNIC open its requests go through, and the destroy and query that
 *        only forward. A destroy method returns forward_destroy()'s status (after its own clean-up on ::RI_OK) and
 *        the adapter (provider.hpp) frees the object when it is ::RI_OK.
 */
template <class P>
class Forwarded {
public:
    void *host_ctx = nullptr; /**< Host context of the RNIC open (ri_rnic_open_params_t::host_ctx). */
    uint64_t handle = 0;      /**< The kAL's handle of the object. */

    /** @brief Binds the object to the kAL object with handle @p h that a create request under @p ctx made. */
    void bind(void *ctx, uint64_t h) noexcept {
        host_ctx = ctx;
        handle = h;
    }

    /**
     * @brief Asks the kVP to destroy its object with destroy verb @p op (::ri_syscall_op). ::RI_OK when the kAL's
     *        object is gone (see released()); any other status leaves both objects alive, and the caller's too.
     */
    [[nodiscard]] ri_status_t forward_destroy(uint32_t op) {
        const ri_status_t rc = SyscallRequest<P>(op, handle).run(host_ctx);
        return released(rc) ? RI_OK : rc;
    }

    /**
     * @brief Asks the kVP to modify its object with modify verb @p op: the parameter block is
     *        ::ri_syscall_modify_t with @p mask, then @p in.
     */
    template <class Attr>
    [[nodiscard]] ri_status_t forward_modify(uint32_t op, const Attr &in, uint32_t mask) {
        struct {
            ri_syscall_modify_t m;
            Attr a;
        } param{{mask, 0}, in};
        static_assert(sizeof param == sizeof(ri_syscall_modify_t) + sizeof(Attr), "no padding in the block");
        SyscallRequest<P> c(op, handle);
        c.param(&param, sizeof param);
        return c.run(host_ctx);
    }

    /** @brief Asks the kVP for the attributes of its object with query verb @p op, written to @p out. */
    template <class Attr>
    [[nodiscard]] ri_status_t forward_query(uint32_t op, Attr *out) {
        SyscallRequest<P> c(op, handle);
        c.result(out);
        return c.run(host_ctx);
    }
};

}  // namespace rdma::provider

#endif  // RNICPI_CPP_SYSCALL_REQUEST_HPP
