/**
 * @file verb_error.hpp
 * @brief The uAL's error for a verb a provider refused with a status alone (internal to the uAL).
 */
#ifndef UAL_CORE_VERB_ERROR_HPP
#define UAL_CORE_VERB_ERROR_HPP

#include <cstring>
#include <string>

#include "rnicpi/cpp/status.hpp"
#include "rnicpi/rnicpi.h"

namespace ual {

/** @brief "VERB failed: the status's text", with code @p rc. */
inline rdma::Error verb_error(ri_status_t rc, const char *verb) {
    return rdma::Error(rc, std::string(verb) + " failed: " + std::strerror(rc));
}

}  // namespace ual

#endif  // UAL_CORE_VERB_ERROR_HPP
