/**
 * @file itapi_names.hpp
 * @brief Names of IT-API values for the tools' messages (it_perf, it_rping): status codes, event numbers and DTO
 *        completion statuses, and an rdma::Error that names the failing call, its arguments and its status.
 */
#ifndef IT_TOOLS_ITAPI_NAMES_HPP
#define IT_TOOLS_ITAPI_NAMES_HPP

#include <string>

#include "it_api.h"
#include "rnicpi/cpp/status.hpp"

namespace it_tools {

/** @brief "IT_ERR_QUEUE_EMPTY"; "it_status_t N" for a value the header does not name. */
std::string status_name(it_status_t status);
/** @brief "IT_CM_MSG_CONN_ESTABLISHED_EVENT"; "event 0xN" for others. */
std::string event_name(it_event_type_t event);
/** @brief "IT_DTO_ERR_FLUSHED"; "it_dto_status_t N" for others. */
std::string dto_status_name(it_dto_status_t status);

/**
 * @brief Why IT-API call @p call, which just failed on this thread, failed, in the library's words
 *        (openrdma_it_last_error: "krdmad is not running at ..."), or "" when the library knows no more than the
 *        status.
 */
std::string failure_reason(const char *call);

/**
 * @brief The error of a failed IT-API call: "@p call(@p args) failed: IT_ERR_... (N)", and the library's reason
 *        when it gave one (failure_reason()). @p args says which arguments mattered (an interface name, a size).
 */
rdma::Error call_error(const char *call, const std::string &args, it_status_t status);

/**
 * @brief The interface to use when none is named, to reach a peer of address type @p type (::IT_IPV4, ::IT_IPV6):
 *        the first of the @p count interfaces in @p list with an address of that type, else the first listed (an
 *        IPv6 RNIC listed before an IPv4 one must not take an IPv4 peer's connection, which it cannot make).
 */
std::string default_interface(const it_interface_t *list, size_t count, it_net_addr_type_t type);

}  // namespace it_tools

#endif  // IT_TOOLS_ITAPI_NAMES_HPP
