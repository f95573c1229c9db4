// Every refusal of every command handler, over a real device connection to a real krdmad: malformed sizes, bad
// handles, bad strings, a caller without the privilege, names and addresses already taken, unknown modules, verbs
// the kVP refuses, connection setup that cannot be done. Each reply's status must be a named member of the RNIC-PI
// vocabulary (errno_name gives a real name, never "E?") and come with krdmad's reason; where the refusal has one
// right status, that status. krdmad must never have had to map a status of a handler into the vocabulary itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "krdmad_fixture.hpp"
#include "status_matchers.hpp"

namespace {

using testutil::Credentials;

// Every command the device knows, for the malformed-size walk.
constexpr uint32_t kCommands[] = {
    KRDMA_CMD_HELLO,          KRDMA_CMD_ECHO,          KRDMA_CMD_SYSCALL,         KRDMA_CMD_LIST_CLIENTS,
    KRDMA_CMD_LIST_RNICS,     KRDMA_CMD_ATTACH_RNIC,   KRDMA_CMD_DETACH_RNIC,     KRDMA_CMD_LOAD_MODULE,
    KRDMA_CMD_UNLOAD_MODULE,  KRDMA_CMD_LIST_MODULES,  KRDMA_CMD_LIST_CONSUMERS,  KRDMA_CMD_LISTEN,
    KRDMA_CMD_CONNECT,        KRDMA_CMD_ACCEPT,        KRDMA_CMD_REJECT,          KRDMA_CMD_DESTROY_LISTEN,
    KRDMA_CMD_LIST_ENDPOINTS, KRDMA_CMD_LLP_COUNTERS,  KRDMA_CMD_CONVERT};

class Vocabulary : public testutil::KrdmadFixture {
protected:
    void SetUp() override {
        KrdmadFixture::SetUp();
        device_ = (dir_ / "krdma").string();
        start({"--config", write_config(R"({"device": ")" + device_ + R"(", "provider_dir": ")" TEST_PROVIDER_DIR
                                        R"(", "modules": ["test_cpp_kvp.so"], "admin_group": "",)"
                                        R"( "rnics": [{"name": "cpp0", "provider": "cppkvp", "address": "127.0.0.1"}]})")});
        client_ = connect(device_);
        ASSERT_NE(client_, nullptr) << stderr_text();
        ASSERT_EQ(client_->abi_minor(), KRDMA_ABI_MINOR);
    }
    void TearDown() override {
        // krdmad never had to turn a handler's status into EIO because it was outside the vocabulary.
        EXPECT_EQ(stderr_text().find("outside the RNIC-PI vocabulary"), std::string::npos) << stderr_text();
        EXPECT_GT(refusals_, 0u);
        client_.reset();
        KrdmadFixture::TearDown();
    }

    // Sends @p cmd with @p payload (and @p fds) and returns the reply.
    ual::CallReply ask_raw(uint32_t cmd, std::span<const uint8_t> payload, std::span<const int> fds = {}) {
        auto r = client_->call(cmd, payload, fds);
        EXPECT_OK(r) << r.error().to_string();
        return r ? std::move(*r) : ual::CallReply{RI_EIO, {}, {}, "no reply"};
    }
    template <class T>
    ual::CallReply ask(uint32_t cmd, const T &q, std::span<const int> fds = {}) {
        return ask_raw(cmd, {reinterpret_cast<const uint8_t *>(&q), sizeof q}, fds);
    }
    // Checks that @p r is a refusal in the vocabulary with a reason, and of status @p expected when given.
    void refused(const ual::CallReply &r, const std::string &what, std::optional<int> expected = std::nullopt) {
        ++refusals_;
        EXPECT_NE(r.status, RI_OK) << what;
        EXPECT_NE(rdma::errno_name(r.status), "E?") << what << ": status " << r.status;
        EXPECT_FALSE(r.reason.empty()) << what << ": " << rdma::errno_name(r.status) << " without a reason";
        if (expected) {
            EXPECT_EQ(r.status, *expected) << what << ": " << rdma::errno_name(r.status) << ": " << r.reason;
        }
    }

    // SYSCALL @p op on @p object with parameter block @p param.
    template <class P>
    ual::CallReply sys(uint32_t op, uint64_t object, const P *param, std::array<uint64_t, 4> refs = {},
                       uint32_t param_len = sizeof(P)) {
        krdma_syscall s{};
        s.op = op;
        s.object = object;
        for (size_t i = 0; i < refs.size(); ++i) s.refs[i] = refs[i];
        s.param_len = param_len;
        if (param != nullptr) std::memcpy(s.param, param, std::min<size_t>(sizeof(P), sizeof s.param));
        return ask(KRDMA_CMD_SYSCALL, s);
    }
    ual::CallReply sys(uint32_t op, uint64_t object) { return sys<uint8_t>(op, object, nullptr, {}, 0); }
    // The handle a successful create verb made.
    static uint64_t made(const ual::CallReply &r) {
        krdma_syscall s{};
        EXPECT_RI_OK(r.status) << r.reason;
        if (r.payload.size() == sizeof s) std::memcpy(&s, r.payload.data(), sizeof s);
        return s.handle_out;
    }

    // An RNIC open, PD, CQ and IDLE QP of this client, for the commands that need them.
    struct Objects {
        uint64_t rnic = 0, pd = 0, cq = 0, qp = 0;
    };
    Objects make_objects() {
        Objects o;
        ri_rnic_open_params_t open{};
        std::strcpy(open.instance_name, "cpp0");
        o.rnic = made(sys(RI_OPEN_RNIC, 0, &open));
        o.pd = made(sys(RI_ALLOC_PD, o.rnic));
        ri_cq_attr_t cq{};
        cq.cqe = 16;
        o.cq = made(sys(RI_CREATE_CQ, o.rnic, &cq));
        ri_qp_init_attr_t qa{};
        qa.sq_depth = qa.rq_depth = 4;
        qa.sq_sge = qa.rq_sge = 1;
        o.qp = made(sys(RI_CREATE_QP, o.pd, &qa, {o.cq, o.cq, 0, 0}));
        return o;
    }

    std::string device_;
    std::unique_ptr<ual::DeviceClient> client_;
    size_t refusals_ = 0;
};

TEST_F(Vocabulary, TheDeviceRefusesMalformedRequests) {
    uint8_t byte = 0;
    for (uint32_t cmd : kCommands) {
        refused(ask_raw(cmd, {&byte, 1}), "one byte for command " + std::to_string(cmd), RI_EINVAL);
    }
    uint64_t body = 0;
    refused(ask(_IOWR(KRDMA_IOC_MAGIC, 0x7f, uint64_t), body), "unknown command", RI_ENOTTY);
    krdma_hello h{};
    h.abi_version = KRDMA_ABI_WORD(2, 0);
    refused(ask(KRDMA_CMD_HELLO, h), "HELLO of another major version", RI_EPROTO);
}

// Protocol 1.2: a create's reply names the new QP by its number (refs[0]), the number QUERY_QP reports, and every
// other ref is zero; other objects have no number there.
TEST_F(Vocabulary, ACreatedQpsNumberComesWithItsReply) {
    const Objects o = make_objects();
    ri_qp_init_attr_t qa{};
    qa.sq_depth = qa.rq_depth = 4;
    qa.sq_sge = qa.rq_sge = 1;
    const ual::CallReply r = sys(RI_CREATE_QP, o.pd, &qa, {o.cq, o.cq, 0, 0});
    ASSERT_RI_OK(r.status) << r.reason;
    krdma_syscall s{};
    ASSERT_EQ(r.payload.size(), sizeof s);
    std::memcpy(&s, r.payload.data(), sizeof s);
    ASSERT_NE(s.refs[0], 0u) << "no QP number in the create reply";
    EXPECT_EQ(s.refs[1], 0u);
    EXPECT_EQ(s.refs[2], 0u);
    EXPECT_EQ(s.refs[3], 0u);
    const ual::CallReply q = sys(RI_QUERY_QP, s.handle_out);
    ASSERT_RI_OK(q.status) << q.reason;
    krdma_syscall qs{};
    std::memcpy(&qs, q.payload.data(), sizeof qs);
    ri_qp_attr_t attr{};
    std::memcpy(&attr, qs.result, sizeof attr);
    EXPECT_EQ(s.refs[0], attr.qp_num);
    ri_cq_attr_t cq{};
    cq.cqe = 16;
    const ual::CallReply c = sys(RI_CREATE_CQ, o.rnic, &cq);
    ASSERT_RI_OK(c.status) << c.reason;
    std::memcpy(&s, c.payload.data(), sizeof s);
    EXPECT_EQ(s.refs[0], 0u) << "a CQ has no number in the reply";
    // A refused create is a bare refusal: no struct, so no number either.
    const ual::CallReply bad = sys(RI_CREATE_QP, o.pd, &qa, {0, o.cq, 0, 0});
    refused(bad, "create QP: no send CQ", RI_EINVAL);
    EXPECT_TRUE(bad.payload.empty());
}

TEST_F(Vocabulary, AdministrationRefusals) {
    auto unterminated = [](auto &field) { std::memset(field, 'x', sizeof field); };
    krdma_attach_rnic a{};
    auto attach = [&](const char *provider, const char *name, const char *netdev, const char *address) {
        a = krdma_attach_rnic{};
        std::strcpy(a.provider, provider);
        std::strcpy(a.name, name);
        std::strcpy(a.netdev, netdev);
        std::strcpy(a.address, address);
    };
    attach("cppkvp", "x0", "", "127.0.0.1");
    unterminated(a.provider);
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: provider without NUL", RI_EINVAL);
    attach("cppkvp", "x0", "", "127.0.0.1");
    unterminated(a.name);
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: name without NUL", RI_EINVAL);
    attach("cppkvp", "x0", "", "127.0.0.1");
    unterminated(a.netdev);
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: netdev without NUL", RI_EINVAL);
    attach("cppkvp", "x0", "", "127.0.0.1");
    unterminated(a.address);
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: address without NUL", RI_EINVAL);
    attach("cppkvp", "x0", "", "127.0.0.1");
    unterminated(a.options);
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: options without NUL", RI_EINVAL);
    attach("nosuchkvp", "x0", "", "127.0.0.1");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: unknown provider", RI_ENOENT);
    attach("cppkvp", "x0", "", "127.0.0.1");
    auto taken = ask(KRDMA_CMD_ATTACH_RNIC, a);
    refused(taken, "attach: address taken", RI_EEXIST);
    EXPECT_EQ(taken.reason, "address 127.0.0.1 is already served by RNIC cpp0");
    attach("cppkvp", "cpp0", "", "127.0.0.1");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: name taken", RI_EEXIST);
    attach("cppkvp", "x0", "", "not-an-address");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: not an address", RI_EINVAL);
    attach("cppkvp", "x0", "", "192.0.2.77");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: an address this host does not have", RI_ENODEV);
    attach("cppkvp", "x0", "nosuchnet0", "");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: unknown netdev", RI_ENOENT);
    attach("cppkvp", "", "", "::1");
    refused(ask(KRDMA_CMD_ATTACH_RNIC, a), "attach: empty name", RI_EINVAL);

    krdma_detach_rnic d{};
    unterminated(d.name);
    refused(ask(KRDMA_CMD_DETACH_RNIC, d), "detach: name without NUL", RI_EINVAL);
    d = krdma_detach_rnic{};
    std::strcpy(d.name, "nosuch0");
    refused(ask(KRDMA_CMD_DETACH_RNIC, d), "detach: unknown RNIC", RI_ENODEV);
    const Objects o = make_objects();  // cpp0 is open now
    ASSERT_NE(o.qp, 0u);
    std::strcpy(d.name, "cpp0");
    refused(ask(KRDMA_CMD_DETACH_RNIC, d), "detach: open RNIC", RI_EBUSY);

    krdma_load_module l{};
    unterminated(l.file);
    refused(ask(KRDMA_CMD_LOAD_MODULE, l), "load: file without NUL", RI_EINVAL);
    l = krdma_load_module{};
    refused(ask(KRDMA_CMD_LOAD_MODULE, l), "load: no file", RI_EINVAL);
    for (const char *file : {"no_such_kvp.so", "not_a_module.so", "test_no_entry.so", "test_entry_fails.so",
                             "test_wrong_abi.so", "test_missing_op.so", "test_no_attach.so"}) {
        l = krdma_load_module{};
        std::strcpy(l.file, file);
        refused(ask(KRDMA_CMD_LOAD_MODULE, l), std::string("load: ") + file);
    }

    krdma_unload_module u{};
    unterminated(u.provider);
    refused(ask(KRDMA_CMD_UNLOAD_MODULE, u), "unload: provider without NUL", RI_EINVAL);
    u = krdma_unload_module{};
    std::strcpy(u.provider, "nosuchkvp");
    refused(ask(KRDMA_CMD_UNLOAD_MODULE, u), "unload: unknown provider", RI_ENOENT);
    std::strcpy(u.provider, "cppkvp");
    refused(ask(KRDMA_CMD_UNLOAD_MODULE, u), "unload: provider with an RNIC", RI_EBUSY);
}

TEST_F(Vocabulary, OnlyRootOrTheAdminGroupAdministers) {
    const passwd *pw = ::getpwnam("nobody");
    if (::geteuid() != 0 || pw == nullptr) GTEST_SKIP() << "needs root and a 'nobody' user to act as another uid";
    ++refusals_;
    const Credentials as{pw->pw_uid, pw->pw_gid, {pw->pw_gid}};
    // In a child running as nobody: exit 0 when every command is refused with EPERM and a reason.
    const auto log = dir_ / "child.out";
    pid_t child = fork_child(log, log, as, [this] {
        auto c = ual::DeviceClient::connect(device_);
        if (!c) return 2;
        int bad = 0;
        auto check = [&](uint32_t cmd, const auto &q) {
            auto r = (*c)->call(cmd, {reinterpret_cast<const uint8_t *>(&q), sizeof q});
            if (!r || r->status != RI_EPERM || r->reason.find("permission denied") == std::string::npos) {
                std::printf("command %#x: %d %s\n", cmd, r ? r->status : -1, r ? r->reason.c_str() : "");
                ++bad;
            }
        };
        krdma_attach_rnic a{};
        std::strcpy(a.provider, "cppkvp");
        std::strcpy(a.name, "x0");
        std::strcpy(a.netdev, "lo");
        check(KRDMA_CMD_ATTACH_RNIC, a);
        krdma_detach_rnic d{};
        std::strcpy(d.name, "cpp0");
        check(KRDMA_CMD_DETACH_RNIC, d);
        krdma_load_module l{};
        std::strcpy(l.file, "test_good_kvp.so");
        check(KRDMA_CMD_LOAD_MODULE, l);
        krdma_unload_module u{};
        std::strcpy(u.provider, "cppkvp");
        check(KRDMA_CMD_UNLOAD_MODULE, u);
        return bad == 0 ? 0 : 1;
    });
    EXPECT_EQ(wait_exit(child), 0) << read_text(log);
}

TEST_F(Vocabulary, VerbRefusals) {
    const Objects o = make_objects();
    ASSERT_NE(o.qp, 0u);
    krdma_syscall s{};
    s.op = RI_ALLOC_PD;
    s.object = o.rnic;
    s.param_len = sizeof s.param + 1;
    refused(ask(KRDMA_CMD_SYSCALL, s), "param_len beyond the block", RI_EINVAL);
    s.param_len = 0;
    s.priv_len = sizeof s.priv + 1;
    refused(ask(KRDMA_CMD_SYSCALL, s), "priv_len beyond the block", RI_EINVAL);
    s.priv_len = 0;
    refused(sys(999, o.rnic), "unknown op", RI_EOPNOTSUPP);
    refused(sys<uint32_t>(RI_ALLOC_PD, o.rnic, nullptr, {}, 4), "parameter block of the wrong size", RI_EINVAL);
    refused(sys(RI_ALLOC_PD, 0x7777), "a handle that names nothing", RI_EBADF);
    refused(sys(RI_ALLOC_PD, o.pd), "a handle of the wrong type", RI_EINVAL);
    ri_qp_init_attr_t qa{};
    qa.sq_depth = qa.rq_depth = 4;
    refused(sys(RI_CREATE_QP, o.pd, &qa, {0, o.cq, 0, 0}), "a missing reference", RI_EINVAL);
    refused(sys(RI_CREATE_QP, o.pd, &qa, {o.cq, o.cq, 0, o.cq}), "a reference where none goes", RI_EINVAL);
    ri_rnic_open_params_t open{};
    std::memset(open.instance_name, 'r', sizeof open.instance_name);
    refused(sys(RI_OPEN_RNIC, 0, &open), "an RNIC name without NUL", RI_EINVAL);
    std::strcpy(open.instance_name, "nosuch0");
    refused(sys(RI_OPEN_RNIC, 0, &open), "an unknown RNIC", RI_ENODEV);
    struct {
        ri_syscall_modify_t m;
        ri_qp_attr_t a;
    } mod{};
    mod.m.mask = RI_QP_ATTR_LLP;
    refused(sys(RI_MODIFY_QP, o.qp, &mod), "the LLP attributes by the consumer", RI_EOPNOTSUPP);
    mod.m.mask = RI_QP_ATTR_STATE;
    mod.a.state = 99;
    refused(sys(RI_MODIFY_QP, o.qp, &mod), "a state the kVP refuses", RI_EINVAL);
    ri_srq_attr_t srq{};
    srq.max_wr = 4;
    refused(sys(RI_CREATE_SRQ, o.pd, &srq), "a verb the kVP does not support", RI_EOPNOTSUPP);
    ri_mr_reg_t reg{};
    reg.addr = 0x10000;
    refused(sys(RI_REGISTER_MR, o.pd, &reg), "an empty region");
    reg.length = 1ull << 44;
    refused(sys(RI_REGISTER_MR, o.pd, &reg), "a region beyond the pin limit");
    refused(sys(RI_DEALLOC_PD, o.pd), "a PD that still has a QP", RI_EBUSY);
}

TEST_F(Vocabulary, ConnectionRefusals) {
    const Objects o = make_objects();
    ASSERT_NE(o.qp, 0u);

    krdma_listen ls{};
    ls.rnic = o.rnic;
    ls.rnic = 0x7777;
    refused(ask(KRDMA_CMD_LISTEN, ls), "listen: a handle that names nothing", RI_EBADF);
    ls.rnic = o.pd;
    refused(ask(KRDMA_CMD_LISTEN, ls), "listen: not an RNIC open", RI_EINVAL);
    ls.rnic = o.rnic;
    auto first = ask(KRDMA_CMD_LISTEN, ls);
    ASSERT_RI_OK(first.status) << first.reason;
    krdma_listen bound{};
    std::memcpy(&bound, first.payload.data(), sizeof bound);
    ls.port = bound.port;
    refused(ask(KRDMA_CMD_LISTEN, ls), "listen: a port in use", RI_EADDRINUSE);

    krdma_destroy_listen dl{};
    dl.handle = 0x7777;
    refused(ask(KRDMA_CMD_DESTROY_LISTEN, dl), "destroy listen: a handle that names nothing", RI_EBADF);
    dl.handle = o.pd;
    refused(ask(KRDMA_CMD_DESTROY_LISTEN, dl), "destroy listen: not a listen point", RI_EINVAL);

    krdma_connect cn{};
    cn.qp = o.qp;
    cn.port = 1;
    cn.remote.family = RI_AF_INET;
    const in_addr_t loopback = htonl(INADDR_LOOPBACK);
    std::memcpy(cn.remote.addr, &loopback, 4);
    cn.private_data_len = KRDMA_MAX_PRIVATE_DATA + 1;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: too much private data", RI_EINVAL);
    cn.private_data_len = 0;
    cn.port = 0;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: port 0", RI_EINVAL);
    cn.port = 1;
    cn.qp = 0x7777;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: a QP handle that names nothing", RI_EBADF);
    cn.qp = o.cq;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: not a QP", RI_EINVAL);
    cn.qp = o.qp;
    cn.remote.family = RI_AF_NONE;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: no address family", RI_EAFNOSUPPORT);
    cn.remote = ri_net_addr_t{};
    cn.remote.family = RI_AF_INET6;
    cn.remote.addr[15] = 1;  // ::1, of another family than cpp0's 127.0.0.1
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: another address family", RI_EAFNOSUPPORT);
    cn.remote = ri_net_addr_t{};
    cn.remote.family = RI_AF_INET;
    const in_addr_t remote = inet_addr("192.0.2.1");  // TEST-NET-1: not through cpp0's loopback device
    std::memcpy(cn.remote.addr, &remote, 4);
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: no route from the RNIC");

    // A QP whose connection is being set up takes no other: the peer here accepts TCP and never answers MPA.
    krdma::UniqueFd peer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = loopback;
    socklen_t sl = sizeof sa;
    ASSERT_EQ(::bind(peer.get(), reinterpret_cast<sockaddr *>(&sa), sizeof sa), 0);
    ASSERT_EQ(::listen(peer.get(), 4), 0);
    ASSERT_EQ(::getsockname(peer.get(), reinterpret_cast<sockaddr *>(&sa), &sl), 0);
    std::memcpy(cn.remote.addr, &loopback, 4);
    cn.port = ntohs(sa.sin_port);
    cn.timeout_ms = 30000;
    auto connecting = ask(KRDMA_CMD_CONNECT, cn);
    ASSERT_RI_OK(connecting.status) << connecting.reason;
    refused(ask(KRDMA_CMD_CONNECT, cn), "connect: a QP already connecting", RI_EISCONN);

    krdma_accept ac{};
    ac.request = 4242;
    ac.qp = o.qp;
    ac.private_data_len = KRDMA_MAX_PRIVATE_DATA + 1;
    refused(ask(KRDMA_CMD_ACCEPT, ac), "accept: too much private data", RI_EINVAL);
    ac.private_data_len = 0;
    ac.reserved = 1;
    refused(ask(KRDMA_CMD_ACCEPT, ac), "accept: reserved word set", RI_EINVAL);
    ac.reserved = 0;
    refused(ask(KRDMA_CMD_ACCEPT, ac), "accept: an unknown request", RI_ENOENT);
    krdma_reject rj{};
    rj.request = 4242;
    rj.private_data_len = KRDMA_MAX_PRIVATE_DATA + 1;
    refused(ask(KRDMA_CMD_REJECT, rj), "reject: too much private data", RI_EINVAL);
    rj.private_data_len = 0;
    rj.reserved2 = 1;
    refused(ask(KRDMA_CMD_REJECT, rj), "reject: reserved word set", RI_EINVAL);
    rj.reserved2 = 0;
    refused(ask(KRDMA_CMD_REJECT, rj), "reject: an unknown request", RI_ENOENT);

    // CONVERT, with a second IDLE QP.
    ri_qp_init_attr_t qa{};
    qa.sq_depth = qa.rq_depth = 4;
    const uint64_t qp2 = made(sys(RI_CREATE_QP, o.pd, &qa, {o.cq, o.cq, 0, 0}));
    krdma_convert cv{};
    cv.qp = qp2;
    cv.role = 7;
    refused(ask(KRDMA_CMD_CONVERT, cv), "convert: an unknown role", RI_EINVAL);
    cv.role = KRDMA_CONVERT_AUTO;
    cv.flags = 0x8000;
    refused(ask(KRDMA_CMD_CONVERT, cv), "convert: unknown flags", RI_EINVAL);
    cv.flags = KRDMA_CONVERT_BYTE_CHANNEL;
    refused(ask(KRDMA_CMD_CONVERT, cv), "convert: no socket", RI_EBADF);
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    refused(ask(KRDMA_CMD_CONVERT, cv, std::span<const int>(pipe_fds, 1)), "convert: a pipe", RI_EBADF);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    krdma::UniqueFd unconnected(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one_fd[1] = {unconnected.get()};
    refused(ask(KRDMA_CMD_CONVERT, cv, one_fd), "convert: an unconnected socket", RI_ENOTCONN);
    // A connected stream from 127.0.0.2, which is not cpp0's address.
    krdma::UniqueFd other(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = inet_addr("127.0.0.2");
    ASSERT_EQ(::bind(other.get(), reinterpret_cast<sockaddr *>(&from), sizeof from), 0);
    ASSERT_EQ(::connect(other.get(), reinterpret_cast<sockaddr *>(&sa), sizeof sa), 0);
    const int other_fd[1] = {other.get()};
    refused(ask(KRDMA_CMD_CONVERT, cv, other_fd), "convert: a stream of another address", RI_EADDRNOTAVAIL);
    cv.qp = o.qp;
    krdma::UniqueFd again(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(again.get(), reinterpret_cast<sockaddr *>(&sa), sizeof sa), 0);
    const int again_fd[1] = {again.get()};
    refused(ask(KRDMA_CMD_CONVERT, cv, again_fd), "convert: a QP already connecting", RI_EISCONN);
}

}  // namespace
