/** @file kal_steps.cpp @brief krdmad's LLP counters over a device connection of it_perf's own. */
#include "kal_steps.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <memory>

namespace it_perf {

std::optional<KalCounters> KalCounters::open(const std::string &device) {
    sockaddr_un a{};
    if (!krdma::unix_address(device, a)) return std::nullopt;
    krdma::UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s || ::connect(s.get(), reinterpret_cast<const sockaddr *>(&a), sizeof a) != 0) return std::nullopt;
    // A reply never takes long; a krdmad that does not answer in 5 s is not waited for.
    const timeval tv{5, 0};
    (void)::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    KalCounters k(std::move(s));
    krdma_hello h{};
    h.abi_version = KRDMA_ABI_WORD(KRDMA_ABI_VERSION, KRDMA_ABI_MINOR);
    krdma_hello reply{};
    if (!k.ask(KRDMA_CMD_HELLO, &h, sizeof h, &reply)) return std::nullopt;
    return k;
}

std::optional<krdma_llp_counters> KalCounters::read() {
    krdma_llp_counters q{}, c{};
    if (!ask(KRDMA_CMD_LLP_COUNTERS, &q, sizeof q, &c)) return std::nullopt;
    return c;
}

bool KalCounters::ask(uint32_t cmd, const void *request, size_t size, void *out) {
    krdma_msg_hdr hdr{};
    hdr.cmd = cmd;
    hdr.seq = seq_++;
    if (!krdma::send(sock_.get(), hdr, {static_cast<const uint8_t *>(request), size}).ok()) return false;
    auto m = std::make_unique<krdma::Message>();
    // Event records are for consumers: this connection makes no object, but skip any that comes.
    for (int i = 0; i < 16; ++i) {
        if (krdma::receive(sock_.get(), *m, true) != krdma::RecvResult::message) return false;
        if ((m->hdr.flags & KRDMA_MSG_REPLY) == 0 || m->hdr.seq != hdr.seq) continue;
        if (m->hdr.status != 0 || m->payload_len() != size) return false;
        std::memcpy(out, m->body.data(), size);
        return true;
    }
    return false;
}

}  // namespace it_perf
