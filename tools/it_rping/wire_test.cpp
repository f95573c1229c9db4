// rping's wire format and ping pattern, byte for byte as rdma-core's rping makes them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "rping_wire.hpp"

namespace it_rping {
namespace {

TEST(RpingWire, InfoIsBigEndianBufRkeySize) {
    RdmaInfo i{0x0102030405060708ull, 0x0a0b0c0d, 64};
    uint8_t b[RdmaInfo::kWireSize];
    i.write(b);
    const uint8_t expect[16] = {1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64};
    EXPECT_EQ(std::memcmp(b, expect, 16), 0);
    const RdmaInfo back = RdmaInfo::read(b);
    EXPECT_EQ(back.buf, i.buf);
    EXPECT_EQ(back.rkey, i.rkey);
    EXPECT_EQ(back.size, i.size);
}

TEST(RpingWire, SizeLimitsAreRpings) {
    EXPECT_EQ(kMinSize, 26u);  // sizeof("2147483647") + sizeof("rdma-ping-%d: ")
    EXPECT_EQ(kMaxSize, 65535u);
    EXPECT_EQ(kDefaultPort, 7174);
}

TEST(RpingWire, PingPattern) {
    char buf[40];
    int start = 65;
    fill_ping(buf, sizeof buf, 0, start);
    EXPECT_EQ(std::string(buf), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    EXPECT_EQ(start, 66);
    fill_ping(buf, sizeof buf, 1, start);
    EXPECT_EQ(std::string(buf), "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[");  // 65..122 takes in [ \\ ] ^ _ `
    start = 122;
    fill_ping(buf, sizeof buf, 2, start);
    EXPECT_EQ(std::string(buf).substr(0, 16), "rdma-ping-2: zAB");
    EXPECT_EQ(start, 65);  // wraps from 'z' back to 'A'
}

TEST(RpingWire, LettersWrapInsideOneBuffer) {
    char buf[100];
    int start = 120;
    fill_ping(buf, sizeof buf, 7, start);
    EXPECT_EQ(std::string(buf).substr(13, 5), "xyzAB");
    EXPECT_EQ(buf[99], '\0');
}

}  // namespace
}  // namespace it_rping
