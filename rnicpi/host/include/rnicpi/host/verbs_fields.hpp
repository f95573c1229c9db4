/**
 * @file verbs_fields.hpp
 * @brief The list of ri_verbs_ops_t operations, for code that must visit every one (loader, tests).
 */
#ifndef RNICPI_HOST_VERBS_FIELDS_HPP
#define RNICPI_HOST_VERBS_FIELDS_HPP

/**
 * @brief Calls X(field, mandatory) for every operation of ri_verbs_ops_t, in table order.
 *
 * `mandatory` is true for the operations every provider must implement (see ri_module.h).
 */
#define RDMA_RI_VERBS_FIELDS(X)   \
    X(open_rnic, true)            \
    X(close_rnic, true)           \
    X(query_rnic, true)           \
    X(set_aeh, true)              \
    X(set_ceh, true)              \
    X(clear_handler, false)       \
    X(alloc_pd, true)             \
    X(dealloc_pd, true)           \
    X(create_cq, true)            \
    X(query_cq, false)            \
    X(resize_cq, false)           \
    X(destroy_cq, true)           \
    X(poll_cq, true)              \
    X(request_cq_notify, true)    \
    X(create_qp, true)            \
    X(query_qp, true)             \
    X(modify_qp, true)            \
    X(destroy_qp, true)           \
    X(post_send, true)            \
    X(post_recv, true)            \
    X(create_srq, false)          \
    X(query_srq, false)           \
    X(modify_srq, false)          \
    X(destroy_srq, false)         \
    X(post_srq_recv, false)       \
    X(register_mr, true)          \
    X(register_phys_mr, false)    \
    X(register_shared_mr, false)  \
    X(alloc_stag, false)          \
    X(reregister_mr, false)       \
    X(query_mr, false)            \
    X(deregister_mr, true)        \
    X(alloc_mw, false)            \
    X(bind_mw, false)             \
    X(dealloc_mw, false)          \
    X(syscall, false)             \
    X(query_qp_stats, false)

#endif  // RNICPI_HOST_VERBS_FIELDS_HPP
