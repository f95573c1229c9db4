// System call management: RNIC listing for uALs and rdmactl.
#include "admin_commands.hpp"

#include <cstring>

namespace kal {
namespace {

template <size_t N>
void copy_text(char (&dst)[N], const std::string &src) {
    size_t n = std::min(src.size(), N - 1);
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

}  // namespace

void register_admin_commands(DeviceServer &server, AdapterManager &adapters) {
    server.on(KRDMA_CMD_LIST_RNICS, [&adapters](Connection &, const Request &req, Reply &rep) {
        krdma_list_rnics q;
        std::memcpy(&q, req.payload.data(), sizeof q);
        std::vector<RnicInfo> list = adapters.list();
        krdma_list_rnics a{};
        a.index = q.index;
        a.count = static_cast<uint32_t>(list.size());
        if (q.index < list.size()) {
            const RnicInfo &r = list[q.index];
            copy_text(a.info.name, r.name);
            copy_text(a.info.provider, r.provider);
            copy_text(a.info.vendor, r.vendor);
            copy_text(a.info.netdev, r.netdev);
            copy_text(a.info.address, r.address);
            copy_text(a.info.uvp_library, r.uvp_library);
            a.info.opens = r.opens;
            a.info.state = KRDMA_RNIC_ATTACHED;
        }
        std::memcpy(rep.payload.data(), &a, sizeof a);
        return RI_OK;
    });
}

}  // namespace kal
