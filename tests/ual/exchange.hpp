// The data exchange of the connection tests against a peer program in "accept" mode (ual_rdma_peer): RDMA Write,
// Send, the peer's check and refill, RDMA Read back, every byte compared. Shared by the tests of every provider.
#ifndef TESTS_UAL_EXCHANGE_HPP
#define TESTS_UAL_EXCHANGE_HPP

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>

#include "rdma_util.hpp"
#include "status_matchers.hpp"

namespace rdmatest {

/** @brief Where the exchange's RDMA area starts in a side's buffer (below it: receive and send slots). */
inline constexpr size_t kRdmaOffset = 4096;

// Against a peer in "accept" mode: learns its buffer, then for each size RDMA Writes a pattern, has the peer check
// it and refill it, and RDMA Reads it back; every byte is compared. Ends with "Q".
inline void exchange(Side &s, ual::Endpoint &endpoint, std::initializer_list<size_t> sizes, size_t kBytes) {
    ual::Endpoint *ep = &endpoint;
    // The peer's buffer arrives in a Send.
    auto wc = s.completion();
    ASSERT_TRUE(wc.has_value());
    ASSERT_EQ(wc->status, static_cast<uint32_t>(RI_WC_SUCCESS));
    ASSERT_EQ(wc->opcode, static_cast<uint32_t>(RI_WC_RECV));
    BufferInfo info{};
    ASSERT_EQ(wc->byte_len, sizeof info);
    std::memcpy(&info, s.buffer.data() + (wc->wr_id - 100) * 256, sizeof info);
    ASSERT_OK(post_recv(s, *ep, (wc->wr_id - 100) * 256, 256, wc->wr_id));
    ASSERT_EQ(info.length, kBytes);

    uint32_t seed = 1;
    for (size_t size : sizes) {
        SCOPED_TRACE("size " + std::to_string(size));
        uint8_t *area = s.buffer.data() + kRdmaOffset;
        for (size_t i = 0; i < size; ++i) area[i] = pattern(i, seed);
        ASSERT_OK(post(s, *ep, RI_WR_RDMA_WRITE, kRdmaOffset, static_cast<uint32_t>(size), 1, info.addr, info.rkey));
        const std::string v = "V " + std::to_string(size) + " " + std::to_string(seed);
        std::memcpy(s.buffer.data() + 2048, v.data(), v.size());
        ASSERT_OK(post(s, *ep, RI_WR_SEND, 2048, static_cast<uint32_t>(v.size()), 2));
        // Write, Send, then the peer's reply.
        std::string reply;
        for (int got = 0; got < 3;) {
            auto c = s.completion(60s);
            ASSERT_TRUE(c.has_value());
            ASSERT_EQ(c->status, static_cast<uint32_t>(RI_WC_SUCCESS));
            ++got;
            if (c->opcode == RI_WC_RECV) {
                reply.assign(reinterpret_cast<const char *>(s.buffer.data() + (c->wr_id - 100) * 256), c->byte_len);
                ASSERT_OK(post_recv(s, *ep, (c->wr_id - 100) * 256, 256, c->wr_id));
            }
        }
        ASSERT_EQ(reply, "ok");
        // Read back what the peer refilled.
        std::memset(area, 0, size);
        ASSERT_OK(post(s, *ep, RI_WR_RDMA_READ, kRdmaOffset, static_cast<uint32_t>(size), 3, info.addr, info.rkey));
        auto r = s.completion(60s);
        ASSERT_TRUE(r.has_value());
        ASSERT_EQ(r->status, static_cast<uint32_t>(RI_WC_SUCCESS));
        ASSERT_EQ(r->opcode, static_cast<uint32_t>(RI_WC_RDMA_READ));
        size_t bad = size;
        for (size_t i = 0; i < size; ++i) {
            if (area[i] != pattern(i, seed + 1)) {
                bad = i;
                break;
            }
        }
        ASSERT_EQ(bad, size) << "first wrong byte";
        seed += 2;
    }
    std::memcpy(s.buffer.data() + 2048, "Q", 1);
    ASSERT_OK(post(s, *ep, RI_WR_SEND, 2048, 1, 4));
    auto q = s.completion();
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->status, static_cast<uint32_t>(RI_WC_SUCCESS));
}

/**
 * @brief Opens RNIC @p rnic (name or address) through @p device with room for an exchange of @p bytes, connects an
 *        endpoint to a peer program in "accept" mode at @p address:@p port (receives posted from wr_id 100) and
 *        asserts it is established. The endpoint, or nullptr after a fatal failure.
 */
inline std::shared_ptr<ual::Endpoint> connect_to_acceptor(Side &s, const std::string &device, const std::string &rnic,
                                                          const std::string &address, uint16_t port, size_t bytes) {
    std::shared_ptr<ual::Endpoint> out;
    [&] {
        ASSERT_EQ(s.open(device, rnic, kRdmaOffset + bytes), "");
        auto ep = s.endpoint(5);
        ASSERT_NE(ep, nullptr);
        for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(post_recv(s, *ep, i * 256, 256, 100 + i));
        ASSERT_OK(ep->connect(address, port, bytes_of("hello server")));
        auto est = next_cm(s.cm);
        ASSERT_TRUE(est.has_value());
        ASSERT_EQ(est->id, static_cast<uint32_t>(ual::CmEventId::established)) << "status " << est->detail;
        out = ep;
    }();
    return out;
}

}  // namespace rdmatest

#endif  // TESTS_UAL_EXCHANGE_HPP
