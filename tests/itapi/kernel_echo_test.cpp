// A user IT-API process and a kernel IT-API consumer: krdmad loads the kernel_echo example module (C, over the
// kernel IT-API it exports), and this process connects to it through the user library and has messages echoed.
#include "itapi_fixture.hpp"

using namespace itapitest;

namespace {

class KernelEcho : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        testutil::KrdmadFixture::SetUp();
        device_ = dir_ / "krdma.sock";
        const std::string consumers = R"("consumers": [{"module": ")" + std::string(ECHO_MODULE) +
                                      R"(", "required": true, "args": {"rnic": "sr0", "port": 7471}}])";
        const pid_t pid =
            start({"--config", write_config(rdmatest::krdmad_config(device_, "sr0", "127.0.0.1", consumers)).string()});
        // Ready, not just serving: the device appears before the consumer modules start (they call into it), so
        // kernel_echo may not listen yet when the device's file exists.
        ASSERT_TRUE(wait_ready(pid)) << stderr_text();
        ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    }
    std::filesystem::path device_;
};

TEST_F(KernelEcho, UserProcessTalksToAKernelConsumer) {
    Side c;
    ASSERT_EQ(c.make("sr0"), IT_SUCCESS);
    it_path_t path = path_to("127.0.0.1");
    it_conn_qual_t q = port_qual(7471);
    ASSERT_EQ(it_ep_connect(c.ep, &path, nullptr, &q, IT_CONNECT_FLAG_TWO_WAY, nullptr, 0), IT_SUCCESS);
    it_event_t e = wait_event(c.cm);
    ASSERT_EQ(e.event_number, IT_CM_MSG_CONN_ESTABLISHED_EVENT) << describe(e) << stderr_text();
    for (int round = 0; round < 50; ++round) {
        const size_t len = 1 + static_cast<size_t>(round) * 61;
        it_lmr_triplet_t r = c.seg(8192, 4096);
        ASSERT_EQ(it_post_recv(c.ep, &r, 1, 100 + round, IT_COMPLETION_FLAG), IT_SUCCESS);
        for (size_t i = 0; i < len; ++i) c.buf[i] = static_cast<unsigned char>(i * 13 + round);
        it_lmr_triplet_t s = c.seg(0, len);
        ASSERT_EQ(it_post_send(c.ep, &s, 1, round, IT_COMPLETION_FLAG), IT_SUCCESS);
        bool sent = false, echoed = false;
        while (!sent || !echoed) {
            e = poll_dto(c.dto);
            ASSERT_NE(e.event_number, 0) << "no completion in round " << round << " (sent " << sent << ")\n"
                                         << stderr_text();
            ASSERT_EQ(e.dto_cmpl.dto_status, IT_DTO_SUCCESS);
            if (e.event_number == IT_DTO_SEND_CMPL_EVENT) sent = true;
            if (e.event_number == IT_DTO_RC_RECV_CMPL_EVENT) {
                echoed = true;
                ASSERT_EQ(e.dto_cmpl.transferred_length, len);
            }
        }
        ASSERT_EQ(std::memcmp(c.buf.data(), c.buf.data() + 8192, len), 0) << "round " << round;
    }
    // The kernel consumer's objects are krdmad's own: rdmactl lists them under krdmad's pid.
    ASSERT_EQ(it_ep_disconnect(c.ep, nullptr, 0), IT_SUCCESS);
    e = wait_event(c.cm);
    EXPECT_EQ(e.event_number, IT_CM_MSG_CONN_DISCONNECT_EVENT) << describe(e);
}

}  // namespace
