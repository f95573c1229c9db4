// The IT-API tests' fixture: a real krdmad with softrnic RNIC "sr0" on 127.0.0.1 on a private device path, which
// the IT-API library in this process reaches through $KRDMA_DEVICE, and helpers that make the usual objects.
#ifndef TESTS_ITAPI_ITAPI_FIXTURE_HPP
#define TESTS_ITAPI_ITAPI_FIXTURE_HPP

#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <it_api.h>

#ifndef ITAPI_KERNEL_SUITE
#include "connection_fixtures.hpp"
#else
#include <gtest/gtest.h>
#include <unistd.h>
#endif

namespace itapitest {

/** @brief An IT-API event of what stream and number, for messages. */
inline std::string describe(const it_event_t &e) {
    char b[64];
    std::snprintf(b, sizeof b, "event 0x%05x", static_cast<unsigned>(e.event_number));
    return b;
}

/** @brief Waits up to 5 s on @p evd; the event (event_number 0 when none came). */
inline it_event_t wait_event(it_evd_handle_t evd, uint64_t timeout_us = 5'000'000) {
    it_event_t e;
    std::memset(&e, 0, sizeof e);
    size_t more = 0;
    if (it_evd_wait(evd, timeout_us, &e, &more) != IT_SUCCESS) std::memset(&e, 0, sizeof e);
    return e;
}

/** @brief Polls DTO SEVD @p evd for up to 5 s; the completion (event_number 0 when none came). */
inline it_event_t poll_dto(it_evd_handle_t evd) {
    it_event_t e;
    std::memset(&e, 0, sizeof e);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
        if (it_evd_dequeue(evd, &e) == IT_SUCCESS) return e;
        if (i > 1000) ::usleep(10);
    }
    std::memset(&e, 0, sizeof e);
    return e;
}

/** @brief One consumer's objects: IA, PZ, SEVDs, an EP and a registered buffer. */
struct Side {
    it_ia_handle_t ia = nullptr;
    it_pz_handle_t pz = nullptr;
    it_evd_handle_t dto = nullptr;   // request and receive completions
    it_evd_handle_t cm = nullptr;    // connection events
    it_evd_handle_t req = nullptr;   // connection requests
    it_ep_handle_t ep = nullptr;
    std::vector<unsigned char> buf;
    it_lmr_handle_t lmr = nullptr;
    it_rmr_context_t rkey = 0;
    bool atomics = false;  /**< make(): the EP with atomics_enable, the LMR with IT_PRIV_ATOMIC. */

    /** @brief Makes everything on interface @p name with a @p bytes buffer; the first failure's status. */
    it_status_t make(const char *name, size_t bytes = 1 << 16) {
        it_status_t st;
        if ((st = it_ia_create(name, 2, 1, &ia)) != IT_SUCCESS) return st;
        if ((st = it_pz_create(ia, &pz)) != IT_SUCCESS) return st;
        if ((st = it_evd_create(ia, IT_DTO_EVENT_STREAM, static_cast<it_evd_flags_t>(0), 256, 0, nullptr, &dto,
                                nullptr)) != IT_SUCCESS) {
            return st;
        }
        if ((st = it_evd_create(ia, IT_CM_MSG_EVENT_STREAM, static_cast<it_evd_flags_t>(0), 16, 0, nullptr, &cm,
                                nullptr)) != IT_SUCCESS) {
            return st;
        }
        if ((st = it_evd_create(ia, IT_CM_REQ_EVENT_STREAM, static_cast<it_evd_flags_t>(0), 16, 0, nullptr, &req,
                                nullptr)) != IT_SUCCESS) {
            return st;
        }
        it_ep_attributes_t attr = attributes();
        if (atomics) attr.srv.rc.atomics_enable = IT_TRUE;
        if ((st = it_ep_rc_create(pz, dto, dto, cm, IT_EP_NO_FLAG, &attr, &ep)) != IT_SUCCESS) return st;
        buf.assign(bytes, 0);
        const unsigned privs = IT_PRIV_LOCAL | IT_PRIV_REMOTE | (atomics ? IT_PRIV_ATOMIC : 0);
        return it_lmr_create21(pz, buf.data(), nullptr, buf.size(), IT_ADDR_MODE_ABSOLUTE,
                               static_cast<it_mem_priv_t>(privs), IT_LMR_FLAG_NONE, 0, &lmr, &rkey);
    }

    /** @brief The RC attributes the tests use. */
    static const it_ep_attributes_t &attributes() {
        static const it_ep_attributes_t a = [] {
            it_ep_attributes_t x;
            std::memset(&x, 0, sizeof x);
            x.max_dto_payload_size = 1 << 20;
            x.max_request_dtos = 64;
            x.max_recv_dtos = 64;
            x.max_send_segments = 4;
            x.max_recv_segments = 4;
            x.srv.rc.rdma_read_enable = IT_TRUE;
            x.srv.rc.rdma_write_enable = IT_TRUE;
            x.srv.rc.max_rdma_read_segments = 4;
            x.srv.rc.max_rdma_write_segments = 4;
            x.srv.rc.rdma_read_ird = 8;
            x.srv.rc.rdma_read_ord = 8;
            return x;
        }();
        return a;
    }

    /** @brief A triplet over [off, off + len) of the buffer. */
    it_lmr_triplet_t seg(size_t off, size_t len) {
        it_lmr_triplet_t t;
        t.lmr = lmr;
        t.addr.abs = buf.data() + off;
        t.length = len;
        return t;
    }

    ~Side() {
        if (ia != nullptr) it_ia_free(ia);
    }
};

/** @brief A path to @p address (IPv4 text) on spigot 0. */
inline it_path_t path_to(const char *address) {
    it_path_t p;
    std::memset(&p, 0, sizeof p);
    p.spigot_id = 0;
    p.remote.iwarp.ip_vers = IT_IP_VERS_IPV4;
    ::inet_pton(AF_INET, address, &p.remote.iwarp.raddr.ipv4);
    return p;
}

/** @brief A connection qualifier of TCP port @p port. */
inline it_conn_qual_t port_qual(uint16_t port) {
    it_conn_qual_t q;
    std::memset(&q, 0, sizeof q);
    q.type = IT_IANA_PORT;
    q.conn_qual.port = htons(port);
    return q;
}

#ifndef ITAPI_KERNEL_SUITE
/** @brief The krdmad of rdmatest::OneHost, named to the IT-API library by $KRDMA_DEVICE. */
class ItApi : public rdmatest::OneHost {
protected:
    void SetUp() override {
        rdmatest::OneHost::SetUp();
        ::setenv("KRDMA_DEVICE", device_.c_str(), 1);
        ::unsetenv("OPENRDMA_EMBEDDED_CONFIG");
    }
};
#else
/**
 * @brief The kernel IT-API suite runs inside krdmad (kernel_suite_module.cpp), whose configuration has the RNIC
 *        "sr0" on 127.0.0.1: the same tests, against the kernel IT-API krdmad exports.
 */
class ItApi : public ::testing::Test {};
#endif

}  // namespace itapitest

#endif  // TESTS_ITAPI_ITAPI_FIXTURE_HPP
