/**
 * @file embedded_link.hpp
 * @brief The uAL's link to a kAL embedded in this process: starts an EmbeddedKal from a krdmad configuration file
 *        and talks to it through the device protocol over a socket pair, exactly as to krdmad.
 */
#ifndef KAL_EMBEDDED_EMBEDDED_LINK_HPP
#define KAL_EMBEDDED_EMBEDDED_LINK_HPP

#include <memory>
#include <string>

#include "ual/kal_link.hpp"

namespace kal {

/**
 * @brief Loads krdmad configuration @p config, starts an embedded kAL with it and returns a device link to it (the
 *        link keeps the kAL running). Fits ual::Options::embedded_kal.
 */
[[nodiscard]] rdma::Expected<std::unique_ptr<ual::KalLink>> start_embedded_link(const std::string &config);

}  // namespace kal

#endif  // KAL_EMBEDDED_EMBEDDED_LINK_HPP
