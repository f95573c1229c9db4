// Why an IT-API call failed: kept per thread for openrdma_it_last_error(), and logged (see failure.hpp).
#include "failure.hpp"

#include <string>

#include "rnicpi/host/log.hpp"

namespace itapi {
namespace {

// Per thread, like errno: the calls of one thread cannot overwrite another's reason.
struct Record {
    std::string call;
    std::string reason;
};
thread_local Record t_record;

}  // namespace

void forget_failure() noexcept {
    t_record.call.clear();  // clear() keeps the capacity: nothing is freed or allocated on the way in
    t_record.reason.clear();
}

it_status_t failed(const char *call, const rdma::Error &error, it_status_t status) {
    RDMA_LOG_WARN("itapi", "%s: %s", call, error.to_string().c_str());
    try {
        t_record.call = call;
        t_record.reason = error.to_string();
    } catch (...) {
        forget_failure();  // out of memory: no reason rather than a wrong one
    }
    return status;
}

const char *last_failure(const char **call) noexcept {
    if (call != nullptr) *call = t_record.call.c_str();
    return t_record.reason.c_str();
}

}  // namespace itapi
