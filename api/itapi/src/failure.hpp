/**
 * @file failure.hpp
 * @brief Why an IT-API call failed, kept for openrdma_it_last_error() and logged at warn: the layers below say it in
 *        their rdma::Error, IT-API can only return a status.
 */
#ifndef ITAPI_FAILURE_HPP
#define ITAPI_FAILURE_HPP

#include <it_api.h>

#include "rnicpi/cpp/status.hpp"

namespace itapi {

/**
 * @brief Forgets this thread's record of a failure. A call that may record one calls this first, so that a later
 *        failure of the same call without a known reason never shows an earlier reason.
 */
void forget_failure() noexcept;

/**
 * @brief Records @p error's message as the reason IT-API call @p call failed, logs it at warn level, and returns
 *        @p status, so a call fails in one statement: `return failed("it_ia_create", al.error(), IT_ERR_RESOURCES)`.
 */
it_status_t failed(const char *call, const rdma::Error &error, it_status_t status);

/** @brief This thread's recorded reason ("" when none), and the name of its call in @p call when not null. */
const char *last_failure(const char **call) noexcept;

}  // namespace itapi

#endif  // ITAPI_FAILURE_HPP
