/**
 * @file embedded_link.hpp
 * @brief The device of a kAL embedded in this process: starts an EmbeddedKal from a krdmad configuration file and
 *        gives the uAL one end of a socket pair it serves, so that the uAL talks to it through the device protocol
 *        exactly as to krdmad.
 */
#ifndef KAL_EMBEDDED_EMBEDDED_LINK_HPP
#define KAL_EMBEDDED_EMBEDDED_LINK_HPP

#include <memory>
#include <string>

#include "krdma/kal_link.hpp"

namespace kal {

/**
 * @brief Loads krdmad configuration @p config, starts an embedded kAL with it and returns a device connection to it
 *        (its keep-alive keeps the kAL running). Fits ual::Options::embedded_kal.
 */
[[nodiscard]] rdma::Expected<ual::EmbeddedDevice> start_embedded_link(const std::string &config);

}  // namespace kal

#endif  // KAL_EMBEDDED_EMBEDDED_LINK_HPP
