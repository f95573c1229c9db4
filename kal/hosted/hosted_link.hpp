/**
 * @file hosted_link.hpp
 * @brief The uAL's link for a consumer hosted in the kAL process (kernel IT-API, kDAPL, a storage target): the
 *        verbs are the kVP's, privileged steps and connection commands run through kal::HostedConsumer on the kAL's
 *        serving thread, and events come back by its callbacks, named by the cookies the access layer gave.
 */
#ifndef KAL_HOSTED_HOSTED_LINK_HPP
#define KAL_HOSTED_HOSTED_LINK_HPP

#include <memory>
#include <string>

#include "kal/consumer_host.hpp"
#include "krdma/kal_link.hpp"

namespace kal {

/** @brief A link for a new consumer of @p host's kAL, named @p name in logs and in rdmactl. */
[[nodiscard]] std::unique_ptr<ual::KalLink> hosted_link(ConsumerHost &host, std::string name);

}  // namespace kal

#endif  // KAL_HOSTED_HOSTED_LINK_HPP
