/** @file rping_wire.cpp @brief rping's buffer advertisement and ping pattern. */
#include "rping_wire.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace it_rping {

void RdmaInfo::write(uint8_t *out) const {
    const uint32_t hi = htonl(static_cast<uint32_t>(buf >> 32));
    const uint32_t lo = htonl(static_cast<uint32_t>(buf));
    const uint32_t k = htonl(rkey);
    const uint32_t s = htonl(size);
    std::memcpy(out, &hi, 4);
    std::memcpy(out + 4, &lo, 4);
    std::memcpy(out + 8, &k, 4);
    std::memcpy(out + 12, &s, 4);
}

RdmaInfo RdmaInfo::read(const uint8_t *in) {
    uint32_t hi, lo, k, s;
    std::memcpy(&hi, in, 4);
    std::memcpy(&lo, in + 4, 4);
    std::memcpy(&k, in + 8, 4);
    std::memcpy(&s, in + 12, 4);
    RdmaInfo i;
    i.buf = (uint64_t{ntohl(hi)} << 32) | ntohl(lo);
    i.rkey = ntohl(k);
    i.size = ntohl(s);
    return i;
}

void fill_ping(char *buf, uint32_t size, int ping, int &start) {
    int cc = std::snprintf(buf, size, "rdma-ping-%d: ", ping);
    if (cc < 0) cc = 0;
    unsigned char c = static_cast<unsigned char>(start);
    for (uint32_t i = static_cast<uint32_t>(cc); i < size; ++i) {
        buf[i] = static_cast<char>(c);
        if (++c > 122) c = 65;
    }
    if (++start > 122) start = 65;
    buf[size - 1] = 0;
}

}  // namespace it_rping
