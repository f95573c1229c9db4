// The private-ABI kit beside the C++ adapter: who frees a provider object (the adapter, once its destroy succeeded),
// the kVP's side of a ri_syscall (sizes refused, never truncated) and the uVP objects that forward to the kVP.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "rnicpi/cpp/provider.hpp"
#include "test_provider.hpp"
#include "rnicpi/cpp/syscall_reply.hpp"
#include "rnicpi/cpp/syscall_request.hpp"
#include "status_matchers.hpp"

namespace {

using rdma::provider::from_handle;
using rdma::provider::to_handle;

// --- Who frees an object ------------------------------------------------------------------------------------------

// Objects that count their destructions and answer their destroy with a status the test sets.
struct Owned : rdmatest::TestProvider<> {
    static constexpr const char *name = "owned";

    static inline int destructions = 0;

    struct Cq {
        ri_status_t answer = RI_OK;
        bool throws = false;
        int polls = 0;
        ~Cq() { ++destructions; }
        ri_status_t destroy() {
            if (throws) throw std::runtime_error("provider bug");
            return answer;
        }
        ri_status_t poll(uint32_t, ri_wc_t *, uint32_t *polled) {
            ++polls;
            *polled = 0;
            return RI_OK;
        }
    };
    struct Rnic {
        ri_status_t answer = RI_OK;
        ~Rnic() { ++destructions; }
        ri_status_t close() { return answer; }
    };
};

constexpr ri_verbs_ops_t kOwned = rdma::provider::make_verbs<Owned>();

TEST(ProviderOwnership, SuccessfulDestroyFreesExactlyOnce) {
    Owned::destructions = 0;
    ri_cq_t cq = to_handle<ri_cq_t>(new Owned::Cq);
    EXPECT_RI_OK(kOwned.destroy_cq(cq));
    EXPECT_EQ(Owned::destructions, 1);  // ASan reports a leak if it were 0 and a double free if the provider freed
    ri_rnic_t rnic = to_handle<ri_rnic_t>(new Owned::Rnic);
    EXPECT_RI_OK(kOwned.close_rnic(rnic));
    EXPECT_EQ(Owned::destructions, 2);
}

TEST(ProviderOwnership, FailedDestroyFreesNothingAndTheObjectStaysUsable) {
    Owned::destructions = 0;
    auto *object = new Owned::Cq;
    object->answer = RI_EBUSY;
    ri_cq_t cq = to_handle<ri_cq_t>(object);
    EXPECT_STATUS(kOwned.destroy_cq(cq), RI_EBUSY);
    EXPECT_EQ(Owned::destructions, 0);
    uint32_t polled = 1;
    EXPECT_RI_OK(kOwned.poll_cq(cq, 1, nullptr, &polled));  // ASan: a use after free if the adapter freed it
    EXPECT_EQ(object->polls, 1);
    object->answer = RI_OK;  // the consumer tries again once what held it is gone
    EXPECT_RI_OK(kOwned.destroy_cq(cq));
    EXPECT_EQ(Owned::destructions, 1);
}

TEST(ProviderOwnership, DestroyThatThrowsFreesNothing) {
    Owned::destructions = 0;
    auto *object = new Owned::Cq;
    object->throws = true;
    ri_cq_t cq = to_handle<ri_cq_t>(object);
    EXPECT_STATUS(kOwned.destroy_cq(cq), RI_EIO);
    EXPECT_EQ(Owned::destructions, 0);
    object->throws = false;
    EXPECT_RI_OK(kOwned.destroy_cq(cq));
    EXPECT_EQ(Owned::destructions, 1);
}

TEST(ProviderOwnership, NullHandleFreesNothing) {
    Owned::destructions = 0;
    EXPECT_STATUS(kOwned.destroy_cq(nullptr), RI_EINVAL);
    EXPECT_EQ(Owned::destructions, 0);
}

// --- The kVP's reply ----------------------------------------------------------------------------------------------

std::vector<std::string> g_log;

void record_log(uint32_t, const char *module, const char *message) {
    g_log.push_back(std::string(module) + ": " + message);
}

// A provider whose private blocks are version 3.2.
struct Kit : rdmatest::TestProvider<RI_MODE_PRIVILEGED> {
    static constexpr const char *name = "kit";
    static constexpr uint32_t private_abi_version = (3u << 16) | 2u;
};

struct Hdr {
    uint32_t version;
    uint32_t size;
};
struct Req {
    Hdr hdr;
    uint32_t value;
    uint32_t pad;
};
struct Resp {
    Hdr hdr;
    uint64_t answer;
};

class SyscallReplyTest : public ::testing::Test {
protected:
    void SetUp() override {
        host_.size = sizeof host_;
        host_.abi_version = RI_ABI_VERSION;
        host_.log = &record_log;
        const ri_module_t *out = nullptr;
        ASSERT_RI_OK(rdma::provider::Module<Kit>::entry(&host_, &out));
        g_log.clear();
    }
    ri_host_ops_t host_{};
};

TEST_F(SyscallReplyTest, ReadsAWholeBlockOfOurMajor) {
    Req in{{(3u << 16) | 7u, sizeof(Req)}, 42, 0};  // a newer minor is fine
    ri_syscall_t call{};
    call.priv_in = &in;
    call.priv_in_len = sizeof in;
    rdma::provider::SyscallReply<Kit> reply(call);
    EXPECT_TRUE(reply.has_priv());
    Req got{};
    ASSERT_RI_OK(reply.read_priv(&got));
    EXPECT_EQ(got.value, 42u);
    EXPECT_TRUE(g_log.empty());
}

TEST_F(SyscallReplyTest, RefusesAShortBlock) {
    Req in{{3u << 16, sizeof(Req)}, 42, 0};
    ri_syscall_t call{};
    call.priv_in = &in;
    call.priv_in_len = sizeof in - 1;
    rdma::provider::SyscallReply<Kit> reply(call);
    Req got{};
    got.value = 9;
    EXPECT_STATUS(reply.read_priv(&got), RI_EINVAL);
    EXPECT_EQ(got.value, 9u);  // nothing copied
    ri_syscall_t none{};
    EXPECT_FALSE(rdma::provider::SyscallReply<Kit>(none).has_priv());
    EXPECT_STATUS(rdma::provider::SyscallReply<Kit>(none).read_priv(&got), RI_EINVAL);
}

TEST_F(SyscallReplyTest, RefusesAnotherMajorAndSaysWhatToInstall) {
    Req in{{4u << 16, sizeof(Req)}, 42, 0};
    ri_syscall_t call{};
    call.priv_in = &in;
    call.priv_in_len = sizeof in;
    Req got{};
    EXPECT_STATUS(rdma::provider::SyscallReply<Kit>(call).read_priv(&got), RI_EPROTO);
    ASSERT_EQ(g_log.size(), 1u);
    EXPECT_NE(g_log[0].find("uVP private ABI 4 does not match the kVP's 3"), std::string::npos) << g_log[0];
    EXPECT_NE(g_log[0].find("kit_kvp.so and kit_uvp.so"), std::string::npos) << g_log[0];
}

TEST_F(SyscallReplyTest, ReadsTheParameterBlockOnlyWhole) {
    uint64_t param = 77;
    ri_syscall_t call{};
    call.param = &param;
    call.param_len = sizeof param;
    uint64_t got = 0;
    EXPECT_RI_OK(rdma::provider::SyscallReply<Kit>(call).read_param(&got));
    EXPECT_EQ(got, 77u);
    call.param_len = sizeof param - 1;
    got = 0;
    EXPECT_STATUS(rdma::provider::SyscallReply<Kit>(call).read_param(&got), RI_EINVAL);
    EXPECT_EQ(got, 0u);
}

TEST_F(SyscallReplyTest, WritesAStampedPrivateReply) {
    Resp out{};
    ri_syscall_t call{};
    call.priv_out = &out;
    call.priv_out_cap = sizeof out;
    rdma::provider::SyscallReply<Kit> reply(call);
    Resp r{};
    r.answer = 5;
    ASSERT_RI_OK(reply.write_priv(r));
    EXPECT_EQ(out.hdr.version, Kit::private_abi_version);
    EXPECT_EQ(out.hdr.size, sizeof(Resp));
    EXPECT_EQ(out.answer, 5u);
    EXPECT_EQ(call.priv_out_len, sizeof(Resp));
}

TEST_F(SyscallReplyTest, PrivateReplyTooBigIsAnOverflowNotATruncation) {
    unsigned char out[sizeof(Resp)];
    std::memset(out, 0xab, sizeof out);
    ri_syscall_t call{};
    call.priv_out = out;
    call.priv_out_cap = sizeof(Resp) - 1;
    rdma::provider::SyscallReply<Kit> reply(call);
    EXPECT_STATUS(reply.write_priv(Resp{}), RI_EOVERFLOW);
    EXPECT_EQ(call.priv_out_len, 0u);
    for (unsigned char b : out) EXPECT_EQ(b, 0xab);  // not a byte written
}

TEST_F(SyscallReplyTest, ResultTooBigIsAnOverflowNotATruncation) {
    uint64_t out = 1;
    ri_syscall_t call{};
    call.result = &out;
    call.result_cap = sizeof(uint32_t);
    rdma::provider::SyscallReply<Kit> reply(call);
    EXPECT_STATUS(reply.write_result(uint64_t{99}), RI_EOVERFLOW);
    EXPECT_EQ(call.result_len, 0u);
    EXPECT_EQ(out, 1u);
    call.result_cap = sizeof out;
    EXPECT_RI_OK(reply.write_result(uint64_t{99}));
    EXPECT_EQ(out, 99u);
    EXPECT_EQ(call.result_len, sizeof out);
}

TEST_F(SyscallReplyTest, CheckRoomNamesEveryBuffer) {
    int32_t fds[2];
    ri_syscall_t call{};
    call.priv_out_cap = 16;
    call.result_cap = 8;
    call.fds_out = fds;
    call.nfds_out_cap = 2;
    rdma::provider::SyscallReply<Kit> reply(call);
    EXPECT_RI_OK(reply.check_room(16, 8, 2));
    EXPECT_STATUS(reply.check_room(17, 8, 2), RI_EOVERFLOW);
    EXPECT_STATUS(reply.check_room(16, 9, 2), RI_EOVERFLOW);
    EXPECT_STATUS(reply.check_room(16, 8, 3), RI_EOVERFLOW);
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

TEST_F(SyscallReplyTest, PassesDescriptorsWithinTheRoom) {
    int32_t fds[2] = {-1, -1};
    ri_syscall_t call{};
    call.fds_out = fds;
    call.nfds_out_cap = 2;
    rdma::provider::SyscallReply<Kit> reply(call);
    const int kept = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int given = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(kept, 0);
    ASSERT_GE(given, 0);
    ASSERT_RI_OK(reply.pass_dup(kept));
    EXPECT_NE(fds[0], kept);  // a duplicate: the kVP keeps its own
    ASSERT_RI_OK(reply.pass_fd(given));
    EXPECT_EQ(fds[1], given);
    EXPECT_EQ(call.nfds_out, 2u);
    EXPECT_FALSE(reply.fd_room(1));
    const int extra = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_STATUS(reply.pass_fd(extra), RI_EOVERFLOW);  // and `extra` stays ours
    EXPECT_STATUS(reply.pass_dup(kept), RI_EOVERFLOW);
    EXPECT_EQ(call.nfds_out, 2u);
    const int dup = fds[0];
    reply.drop_fds();  // the reply is abandoned: what was passed is closed
    EXPECT_EQ(call.nfds_out, 0u);
    EXPECT_FALSE(is_open(dup));
    EXPECT_FALSE(is_open(given));
    EXPECT_TRUE(is_open(kept));
    EXPECT_TRUE(is_open(extra));
    ::close(kept);
    ::close(extra);
}

// --- uVP objects that forward to the kVP ------------------------------------------------------------------------

struct Seen {
    void *host_ctx = nullptr;
    uint32_t op = 0;
    uint64_t object = 0;
};
std::vector<Seen> g_calls;
ri_status_t g_answer = RI_OK;

ri_status_t record_syscall(void *host_ctx, ri_syscall_t *call) {
    g_calls.push_back({host_ctx, call->op, call->object});
    if (call->result != nullptr && call->result_cap >= sizeof(ri_cq_attr_t)) {
        ri_cq_attr_t attr{};
        attr.cqe = 321;
        std::memcpy(call->result, &attr, sizeof attr);
        call->result_len = sizeof attr;
    }
    return g_answer;
}

struct Fwd : rdmatest::TestProvider<> {
    static constexpr const char *name = "fwd";

    static inline int destructions = 0;

    struct Cq : rdma::provider::Forwarded<Fwd> {
        ~Cq() { ++destructions; }
        ri_status_t destroy() { return forward_destroy(RI_DESTROY_CQ); }
        ri_status_t query(ri_cq_attr_t *out) { return forward_query(RI_QUERY_CQ, out); }
    };
};

constexpr ri_verbs_ops_t kFwd = rdma::provider::make_verbs<Fwd>();

class ForwardedTest : public ::testing::Test {
protected:
    void SetUp() override {
        host_.size = sizeof host_;
        host_.abi_version = RI_ABI_VERSION;
        host_.syscall = &record_syscall;
        const ri_module_t *out = nullptr;
        ASSERT_RI_OK(rdma::provider::Module<Fwd>::entry(&host_, &out));
        g_calls.clear();
        g_answer = RI_OK;
        Fwd::destructions = 0;
    }
    ri_host_ops_t host_{};
    int ctx_ = 0;
};

TEST_F(ForwardedTest, QueryGoesToTheKvpWithTheHandleAndContext) {
    auto *cq = new Fwd::Cq;
    cq->bind(&ctx_, 17);
    ri_cq_attr_t attr{};
    ASSERT_RI_OK(kFwd.query_cq(to_handle<ri_cq_t>(cq), &attr));
    EXPECT_EQ(attr.cqe, 321u);
    ASSERT_EQ(g_calls.size(), 1u);
    EXPECT_EQ(g_calls[0].host_ctx, &ctx_);
    EXPECT_EQ(g_calls[0].op, static_cast<uint32_t>(RI_QUERY_CQ));
    EXPECT_EQ(g_calls[0].object, 17u);
    EXPECT_RI_OK(kFwd.destroy_cq(to_handle<ri_cq_t>(cq)));
}

TEST_F(ForwardedTest, RefusedDestroyKeepsTheObject) {
    auto *cq = new Fwd::Cq;
    cq->bind(&ctx_, 17);
    g_answer = RI_EBUSY;
    EXPECT_STATUS(kFwd.destroy_cq(to_handle<ri_cq_t>(cq)), RI_EBUSY);
    EXPECT_EQ(Fwd::destructions, 0);
    g_answer = RI_OK;
    ri_cq_attr_t attr{};
    EXPECT_RI_OK(kFwd.query_cq(to_handle<ri_cq_t>(cq), &attr));  // still usable
    EXPECT_RI_OK(kFwd.destroy_cq(to_handle<ri_cq_t>(cq)));
    EXPECT_EQ(Fwd::destructions, 1);
    ASSERT_EQ(g_calls.size(), 3u);
    EXPECT_EQ(g_calls[2].op, static_cast<uint32_t>(RI_DESTROY_CQ));
}

TEST_F(ForwardedTest, DestroyAfterTheKalIsGoneStillFreesOnce) {
    auto *cq = new Fwd::Cq;
    cq->bind(&ctx_, 17);
    g_answer = RI_ENODEV;  // the kAL went away and took its objects with it
    EXPECT_RI_OK(kFwd.destroy_cq(to_handle<ri_cq_t>(cq)));
    EXPECT_EQ(Fwd::destructions, 1);
}

}  // namespace
