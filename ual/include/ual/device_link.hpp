/**
 * @file device_link.hpp
 * @brief The uAL's link to a kAL through its device: krdmad's /dev/krdma, or an embedded kAL's socket pair. The
 *        verbs are the uVP's (loaded on first use of one of its RNICs); its privileged steps go as ri_syscall over
 *        the device, and an event thread reads the kAL's event records.
 */
#ifndef UAL_DEVICE_LINK_HPP
#define UAL_DEVICE_LINK_HPP

#include <filesystem>
#include <memory>

#include "krdma/kal_link.hpp"

namespace ual {

/**
 * @brief Connects to krdmad's device at @p device; ::RI_ENOENT / ::RI_ECONNREFUSED with a message that says how to
 *        start krdmad or use an embedded kAL when nobody serves there.
 */
[[nodiscard]] rdma::Expected<std::unique_ptr<KalLink>> connect_device_link(const std::filesystem::path &device);

/**
 * @brief A link over @p socket, a connected device socket of an embedded kAL, which @p keep_alive keeps serving
 *        (released after the link's last use of it).
 */
[[nodiscard]] rdma::Expected<std::unique_ptr<KalLink>> adopt_device_link(krdma::UniqueFd socket,
                                                                         std::shared_ptr<void> keep_alive);

}  // namespace ual

#endif  // UAL_DEVICE_LINK_HPP
