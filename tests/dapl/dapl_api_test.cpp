// The uDAPL provider through the distribution's libdat2, as an application calls it: a private dat.conf
// (DAT_OVERRIDE) names libdaplopenrdma for an embedded kAL with softrnic on 127.0.0.1 in this process; two IAs on it
// connect over real TCP. Bad handles and arguments get the DAT error codes; queries, events, CNOs, connections with
// private data, every data operation and what is not supported are checked.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

// Debian's libdat2 2.1.10 exports no wrapper for the DAT 2.0 calls below: an application reaches them through the
// provider's table, as libdat2's own wrappers do (for an IA, through the provider's handle of it).
extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

namespace {

DAT_IA_HANDLE provider_ia(DAT_IA_HANDLE ia) {
    DAT_IA_HANDLE p = DAT_HANDLE_NULL;
    EXPECT_EQ(dats_get_ia_handle(ia, &p), DAT_SUCCESS);
    return p;
}

DAT_RETURN type_of(DAT_RETURN r) { return static_cast<DAT_RETURN>(DAT_GET_TYPE(r)); }
DAT_UINT32 subtype_of(DAT_RETURN r) { return DAT_GET_SUBTYPE(r); }

// One side: an IA with a PZ, DTO/connection/CR EVDs, an EP and a registered buffer.
struct Side {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, req = DAT_HANDLE_NULL, rcv = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL,
                   cr = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lkey = 0;
    DAT_RMR_CONTEXT rkey = 0;
    std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);

    ~Side() {
        if (ia != DAT_HANDLE_NULL) (void)dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    }
    void make(const char *name = "openrdma-sr0") {
        ASSERT_EQ(dat_ia_open(const_cast<char *>(name), 16, &async, &ia), DAT_SUCCESS);
        ASSERT_EQ(dat_pz_create(ia, &pz), DAT_SUCCESS);
        ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, static_cast<DAT_EVD_FLAGS>(DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG), &req), DAT_SUCCESS);
        ASSERT_EQ(dat_evd_create(ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv), DAT_SUCCESS);
        ASSERT_EQ(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS);
        ASSERT_EQ(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), DAT_SUCCESS);
        ASSERT_EQ(dat_ep_create(ia, pz, rcv, req, conn, nullptr, &ep), DAT_SUCCESS);
        DAT_REGION_DESCRIPTION region;
        region.for_va = buf.data();
        DAT_VLEN len;
        DAT_VADDR addr;
        ASSERT_EQ(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, buf.size(), pz, DAT_MEM_PRIV_ALL_FLAG,
                                 DAT_VA_TYPE_VA, &lmr, &lkey, &rkey, &len, &addr),
                  DAT_SUCCESS);
    }
    DAT_LMR_TRIPLET at(size_t off, size_t len) const {
        return DAT_LMR_TRIPLET{reinterpret_cast<DAT_VADDR>(buf.data() + off), static_cast<DAT_SEG_LENGTH>(len), lkey};
    }
    DAT_RMR_TRIPLET remote(size_t off, size_t len) const {
        return DAT_RMR_TRIPLET{reinterpret_cast<DAT_VADDR>(buf.data() + off), static_cast<DAT_SEG_LENGTH>(len), rkey};
    }
};

DAT_EVENT wait_for(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want) {
    DAT_EVENT e{};
    DAT_COUNT more = 0;
    EXPECT_EQ(dat_evd_wait(evd, 10 * 1000 * 1000, 1, &e, &more), DAT_SUCCESS);
    EXPECT_EQ(e.event_number, want);
    return e;
}

DAT_DTO_COOKIE cookie(uint64_t v) {
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

sockaddr_in loopback() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

// Connects a to b (b listens on a PSP of any qualifier), both with 48 bytes of private data.
void connect(Side &a, Side &b) {
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL qual = 0;
    ASSERT_EQ(dat_psp_create_any(b.ia, &qual, b.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
    ASSERT_NE(qual, 0u);
    uint8_t pdata[48];
    for (int i = 0; i < 48; ++i) pdata[i] = static_cast<uint8_t>(i + 1);
    sockaddr_in to = loopback();
    ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), qual, 10 * 1000 * 1000, 48, pdata,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
    DAT_EVENT e = wait_for(b.cr, DAT_CONNECTION_REQUEST_EVENT);
    ASSERT_EQ(e.event_data.cr_arrival_event_data.sp_handle.psp_handle, psp);
    ASSERT_EQ(e.event_data.cr_arrival_event_data.conn_qual, qual);
    DAT_CR_HANDLE cr = e.event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM p{};
    ASSERT_EQ(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), DAT_SUCCESS);
    ASSERT_EQ(p.private_data_size, 48);
    ASSERT_EQ(std::memcmp(p.private_data, pdata, 48), 0);
    for (auto &v : pdata) ++v;
    ASSERT_EQ(dat_cr_accept(cr, b.ep, 48, pdata), DAT_SUCCESS);
    e = wait_for(a.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(e.event_data.connect_event_data.private_data_size, 48);
    ASSERT_EQ(std::memcmp(e.event_data.connect_event_data.private_data, pdata, 48), 0);
    wait_for(b.conn, DAT_CONNECTION_EVENT_ESTABLISHED);
    ASSERT_EQ(dat_psp_free(psp), DAT_SUCCESS);
}

TEST(DaplApi, QueriesReportTheRnicAndThePublicIaHandle) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    DAT_IA_ATTR ia{};
    DAT_PROVIDER_ATTR pr{};
    DAT_EVD_HANDLE async;
    ASSERT_EQ(dat_ia_query(s.ia, &async, DAT_IA_FIELD_ALL, &ia, DAT_PROVIDER_FIELD_ALL, &pr), DAT_SUCCESS);
    EXPECT_EQ(async, s.async);
    EXPECT_STREQ(ia.adapter_name, "sr0");
    ASSERT_NE(ia.ia_address_ptr, nullptr);
    ASSERT_EQ(ia.ia_address_ptr->sa_family, AF_INET);
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(ia.ia_address_ptr)->sin_addr, text, sizeof text);
    EXPECT_STREQ(text, "127.0.0.1");
    EXPECT_GT(ia.max_eps, 0);
    EXPECT_GT(ia.max_evd_qlen, 0);
    EXPECT_EQ(pr.dapl_version_major, 2u);
    EXPECT_EQ(pr.dapl_version_minor, 0u);
    EXPECT_EQ(pr.is_thread_safe, DAT_FALSE);
    EXPECT_GE(pr.max_private_data_size, 48);
    bool rdma_read = false;
    for (DAT_COUNT i = 0; i < pr.num_provider_specific_attr; ++i) {
        if (std::strcmp(pr.provider_specific_attr[i].name, "DAT_IB_RDMA_READ") == 0) {
            rdma_read = std::strcmp(pr.provider_specific_attr[i].value, "TRUE") == 0;
        }
    }
    EXPECT_TRUE(rdma_read);
    // Child objects name the IA by the handle the application has (libdat2's), not the provider's.
    DAT_PZ_PARAM pz{};
    ASSERT_EQ(dat_pz_query(s.pz, DAT_PZ_FIELD_ALL, &pz), DAT_SUCCESS);
    EXPECT_EQ(pz.ia_handle, s.ia);
    DAT_EVD_PARAM evd{};
    ASSERT_EQ(dat_evd_query(s.req, DAT_EVD_FIELD_ALL, &evd), DAT_SUCCESS);
    EXPECT_EQ(evd.ia_handle, s.ia);
    EXPECT_EQ(evd.evd_qlen, 64);
    DAT_EP_PARAM ep{};
    ASSERT_EQ(dat_ep_query(s.ep, DAT_EP_FIELD_ALL, &ep), DAT_SUCCESS);
    EXPECT_EQ(ep.ia_handle, s.ia);
    EXPECT_EQ(ep.ep_state, DAT_EP_STATE_UNCONNECTED);
    EXPECT_EQ(ep.recv_evd_handle, s.rcv);
    EXPECT_EQ(ep.request_evd_handle, s.req);
    DAT_HANDLE_TYPE t;
    ASSERT_EQ(dat_get_handle_type(s.lmr, &t), DAT_SUCCESS);
    EXPECT_EQ(t, DAT_HANDLE_TYPE_LMR);
}

TEST(DaplApi, AnRnicByAddressAndAnRnicNobodyServes) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make("openrdma-lo"));  // ia_params names the RNIC by its address
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    const DAT_RETURN r = dat_ia_open(const_cast<char *>("openrdma-nowhere"), 8, &async, &ia);
    EXPECT_EQ(type_of(r), DAT_PROVIDER_NOT_FOUND);
    EXPECT_EQ(ia, DAT_HANDLE_NULL);
}

TEST(DaplApi, FreedAndWrongTypeHandlesGetInvalidHandle) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    // Freed handles: the provider keeps their memory readable and knows them dead.
    DAT_PZ_HANDLE pz;
    ASSERT_EQ(dat_pz_create(s.ia, &pz), DAT_SUCCESS);
    ASSERT_EQ(dat_pz_free(pz), DAT_SUCCESS);
    DAT_PZ_PARAM pzp;
    DAT_RETURN r = dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pzp);
    EXPECT_EQ(type_of(r), DAT_INVALID_HANDLE);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_PZ);
    EXPECT_EQ(type_of(dat_pz_free(pz)), DAT_INVALID_HANDLE);
    DAT_EVD_HANDLE evd;
    ASSERT_EQ(dat_evd_create(s.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
    ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
    DAT_EVENT e;
    EXPECT_EQ(type_of(dat_evd_dequeue(evd, &e)), DAT_INVALID_HANDLE);
    DAT_LMR_HANDLE lmr;
    DAT_REGION_DESCRIPTION region;
    region.for_va = s.buf.data();
    DAT_LMR_CONTEXT lk;
    DAT_RMR_CONTEXT rk;
    DAT_VLEN len;
    DAT_VADDR addr;
    ASSERT_EQ(dat_lmr_create(s.ia, DAT_MEM_TYPE_VIRTUAL, region, 4096, s.pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                             &lmr, &lk, &rk, &len, &addr),
              DAT_SUCCESS);
    ASSERT_EQ(dat_lmr_free(lmr), DAT_SUCCESS);
    r = dat_lmr_free(lmr);
    EXPECT_EQ(type_of(r), DAT_INVALID_HANDLE);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_LMR);
    // Handles of another type.
    r = dat_ep_free(s.pz);
    EXPECT_EQ(type_of(r), DAT_INVALID_HANDLE);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_EP);
    DAT_PSP_PARAM pp;
    r = dat_psp_query(s.ep, DAT_PSP_FIELD_ALL, &pp);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_PSP);
    r = dat_ep_post_send(s.lmr, 1, nullptr, cookie(0), DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_EP);
    DAT_SRQ_PARAM sp;
    r = dat_srq_query(s.req, DAT_SRQ_FIELD_ALL, &sp);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_SRQ);
    DAT_RMR_PARAM rp;
    r = dat_rmr_query(s.lmr, DAT_RMR_FIELD_ALL, &rp);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_RMR);
    DAT_CR_PARAM cp;
    r = dat_cr_query(s.ep, DAT_CR_FIELD_ALL, &cp);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_CR);
    // An EP made with a PZ in the DTO EVD's place.
    DAT_EP_HANDLE ep;
    r = dat_ep_create(s.ia, s.pz, s.pz, s.req, s.conn, nullptr, &ep);
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_EVD_RECV);
    r = dat_ep_create(s.ia, s.pz, s.rcv, s.req, s.cr, nullptr, &ep);  // a CR EVD is no connection EVD
    EXPECT_EQ(subtype_of(r), DAT_INVALID_HANDLE_EVD_CONN);
}

TEST(DaplApi, BadArgumentsAndStatesGetTheirErrors) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    DAT_EVD_HANDLE evd;
    EXPECT_EQ(type_of(dat_evd_create(s.ia, 0, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd)), DAT_INVALID_PARAMETER);
    EXPECT_EQ(type_of(dat_evd_create(s.ia, 8, DAT_HANDLE_NULL, static_cast<DAT_EVD_FLAGS>(0x4000), &evd)),
              DAT_INVALID_PARAMETER);
    DAT_REGION_DESCRIPTION region;
    region.for_va = s.buf.data();
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lk;
    DAT_RMR_CONTEXT rk;
    DAT_VLEN len;
    DAT_VADDR addr;
    EXPECT_EQ(type_of(dat_lmr_create(s.ia, DAT_MEM_TYPE_VIRTUAL, region, 0, s.pz, DAT_MEM_PRIV_ALL_FLAG,
                                     DAT_VA_TYPE_VA, &lmr, &lk, &rk, &len, &addr)),
              DAT_LENGTH_ERROR);
    // Work on an EP that is not connected, and objects that others depend on.
    DAT_LMR_TRIPLET t = s.at(0, 64);
    DAT_RETURN r = dat_ep_post_send(s.ep, 1, &t, cookie(1), DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT_EQ(type_of(r), DAT_INVALID_STATE);
    EXPECT_EQ(type_of(dat_pz_free(s.pz)), DAT_INVALID_STATE);
    EXPECT_EQ(type_of(dat_evd_free(s.req)), DAT_INVALID_STATE);
    EXPECT_EQ(type_of(dat_ia_close(s.ia, DAT_CLOSE_GRACEFUL_FLAG)), DAT_INVALID_STATE);
    DAT_EP_STATE st;
    ASSERT_EQ(dat_ep_get_status(s.ep, &st, nullptr, nullptr), DAT_SUCCESS);
    EXPECT_EQ(st, DAT_EP_STATE_UNCONNECTED);
    // Connecting to a qualifier nobody listens on is refused by the network, not the call.
    sockaddr_in to = loopback();
    ASSERT_EQ(dat_ep_connect(s.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), 1, 5 * 1000 * 1000, 0, nullptr,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
    DAT_EVENT e{};
    DAT_COUNT more;
    ASSERT_EQ(dat_evd_wait(s.conn, 10 * 1000 * 1000, 1, &e, &more), DAT_SUCCESS);
    EXPECT_TRUE(e.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED ||
                e.event_number == DAT_CONNECTION_EVENT_UNREACHABLE)
        << std::hex << e.event_number;
}

// dat_ep_connect does not wait for the kAL: its refusal of a peer no route leads to (TEST-NET-1, from an RNIC on
// the loopback device) comes as DAT_CONNECTION_EVENT_UNREACHABLE; an address of another family than the IA's is
// still refused by the call.
TEST(DaplApi, AConnectTheKalRefusesIsAnUnreachableEvent) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_addr = in6addr_loopback;
    EXPECT_EQ(type_of(dat_ep_connect(s.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&v6), 4791, 5 * 1000 * 1000, 0,
                                     nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG)),
              DAT_INVALID_ADDRESS);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    ::inet_pton(AF_INET, "192.0.2.1", &to.sin_addr);
    ASSERT_EQ(dat_ep_connect(s.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), 4791, 5 * 1000 * 1000, 0, nullptr,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
    DAT_EVENT e{};
    DAT_COUNT more;
    ASSERT_EQ(dat_evd_wait(s.conn, 10 * 1000 * 1000, 1, &e, &more), DAT_SUCCESS);
    EXPECT_EQ(e.event_number, DAT_CONNECTION_EVENT_UNREACHABLE) << std::hex << e.event_number;
    EXPECT_EQ(e.event_data.connect_event_data.ep_handle, s.ep);
}

TEST(DaplApi, SoftwareEventsThresholdsTimeoutsAndUnwaitable) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    DAT_EVD_HANDLE evd;
    ASSERT_EQ(dat_evd_create(s.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
    DAT_EVENT e{}, got{};
    DAT_COUNT more = -1;
    EXPECT_EQ(type_of(dat_evd_wait(evd, 20 * 1000, 1, &got, &more)), DAT_TIMEOUT_EXPIRED);
    EXPECT_EQ(dat_evd_dequeue(evd, &got), DAT_QUEUE_EMPTY);
    int marks[3];
    for (int &m : marks) {
        e.event_number = DAT_SOFTWARE_EVENT;
        e.event_data.software_event_data.pointer = &m;
        ASSERT_EQ(dat_evd_post_se(evd, &e), DAT_SUCCESS);
    }
    ASSERT_EQ(dat_evd_wait(evd, 1000 * 1000, 3, &got, &more), DAT_SUCCESS);
    EXPECT_EQ(got.event_number, DAT_SOFTWARE_EVENT);
    EXPECT_EQ(got.event_data.software_event_data.pointer, &marks[0]);
    EXPECT_EQ(more, 2);
    ASSERT_EQ(dat_evd_dequeue(evd, &got), DAT_SUCCESS);
    EXPECT_EQ(got.event_data.software_event_data.pointer, &marks[1]);
    ASSERT_EQ(dat_evd_dequeue(evd, &got), DAT_SUCCESS);
    EXPECT_EQ(got.event_data.software_event_data.pointer, &marks[2]);
    // A DTO EVD takes no software events.
    EXPECT_EQ(type_of(dat_evd_post_se(s.rcv, &e)), DAT_INVALID_PARAMETER);
    // set_unwaitable wakes a waiter, which fails with INVALID_STATE; waits fail until clear_unwaitable.
    std::atomic<DAT_RETURN> waited{DAT_SUCCESS};
    std::thread waiter([&] {
        DAT_EVENT w;
        DAT_COUNT m;
        waited = dat_evd_wait(evd, DAT_TIMEOUT_INFINITE, 1, &w, &m);
    });
    ::usleep(50000);
    ASSERT_EQ(dat_evd_set_unwaitable(evd), DAT_SUCCESS);
    waiter.join();
    EXPECT_EQ(type_of(waited.load()), DAT_INVALID_STATE);
    EXPECT_EQ(type_of(dat_evd_wait(evd, 1000, 1, &got, &more)), DAT_INVALID_STATE);
    ASSERT_EQ(dat_evd_clear_unwaitable(evd), DAT_SUCCESS);
    EXPECT_EQ(type_of(dat_evd_wait(evd, 1000, 1, &got, &more)), DAT_TIMEOUT_EXPIRED);
    ASSERT_EQ(dat_evd_free(evd), DAT_SUCCESS);
}

TEST(DaplApi, CnoWithAPollableFd) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    DAT_FD fd = -1;
    DAT_CNO_HANDLE cno;
    ASSERT_EQ(DAT_CNO_FD_CREATE(provider_ia(s.ia), &fd, &cno), DAT_SUCCESS);
    ASSERT_GE(fd, 0);
    DAT_EVD_HANDLE evd;
    ASSERT_EQ(dat_evd_create(s.ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS);
    EXPECT_EQ(type_of(dat_cno_free(cno)), DAT_INVALID_STATE);  // an EVD is attached
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0);
    DAT_EVENT e{};
    e.event_number = DAT_SOFTWARE_EVENT;
    ASSERT_EQ(dat_evd_post_se(evd, &e), DAT_SUCCESS);
    EXPECT_EQ(::poll(&p, 1, 5000), 1);  // the notification runs on the uAL's worker pool
    DAT_EVD_HANDLE which = DAT_HANDLE_NULL;
    ASSERT_EQ(DAT_CNO_TRIGGER(cno, &which), DAT_SUCCESS);
    EXPECT_EQ(which, evd);
    DAT_CNO_PARAM cp{};
    ASSERT_EQ(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS);
    EXPECT_EQ(cp.proxy_type, DAT_PROXY_TYPE_FD);
    EXPECT_EQ(cp.proxy.fd, fd);
    ASSERT_EQ(dat_evd_modify_cno(evd, DAT_HANDLE_NULL), DAT_SUCCESS);
    ASSERT_EQ(dat_cno_free(cno), DAT_SUCCESS);
}

TEST(DaplApi, ConnectedPairMovesAndChecksData) {
    Side a, b;
    ASSERT_NO_FATAL_FAILURE(a.make());
    ASSERT_NO_FATAL_FAILURE(b.make());
    ASSERT_NO_FATAL_FAILURE(connect(a, b));
    DAT_EP_PARAM ep{};
    ASSERT_EQ(dat_ep_query(a.ep, DAT_EP_FIELD_ALL, &ep), DAT_SUCCESS);
    EXPECT_EQ(ep.ep_state, DAT_EP_STATE_CONNECTED);
    // Send of two segments into a receive of one.
    DAT_LMR_TRIPLET r = b.at(8192, 4096);
    ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r, cookie(7), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    for (int i = 0; i < 3000; ++i) a.buf[i] = static_cast<uint8_t>(i * 7);
    DAT_LMR_TRIPLET two[2] = {a.at(0, 1000), a.at(1000, 2000)};
    ASSERT_EQ(dat_ep_post_send(a.ep, 2, two, cookie(8), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    DAT_EVENT e = wait_for(a.req, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 8u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_SEND);
    EXPECT_EQ(e.event_data.dto_completion_event_data.ep_handle, a.ep);
    e = wait_for(b.rcv, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.user_cookie.as_64, 7u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 3000u);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE);
    EXPECT_EQ(std::memcmp(b.buf.data() + 8192, a.buf.data(), 3000), 0);
    // RDMA Write into b's region, then RDMA Read of it back into a.
    for (int i = 0; i < 4096; ++i) a.buf[i] = static_cast<uint8_t>(i * 3 + 1);
    DAT_LMR_TRIPLET w = a.at(0, 4096);
    DAT_RMR_TRIPLET to = b.remote(16384, 4096);
    ASSERT_EQ(dat_ep_post_rdma_write(a.ep, 1, &w, cookie(9), &to, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    e = wait_for(a.req, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RDMA_WRITE);
    EXPECT_EQ(e.event_data.dto_completion_event_data.transfered_length, 4096u);
    // (A Write's completion says the data left, not that it is placed; the Read after it on the stream does.)
    DAT_LMR_TRIPLET sink = a.at(32768, 4096);
    ASSERT_EQ(dat_ep_post_rdma_read(a.ep, 1, &sink, cookie(10), &to, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    e = wait_for(a.req, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RDMA_READ);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    EXPECT_EQ(std::memcmp(a.buf.data() + 32768, a.buf.data(), 4096), 0);
    EXPECT_EQ(std::memcmp(b.buf.data() + 16384, a.buf.data(), 4096), 0);
    // A suppressed send completes nowhere; the receive still does.
    ASSERT_EQ(dat_ep_post_recv(b.ep, 1, &r, cookie(11), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    DAT_LMR_TRIPLET one = a.at(0, 16);
    ASSERT_EQ(dat_ep_post_send(a.ep, 1, &one, cookie(12), DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS);
    wait_for(b.rcv, DAT_DTO_COMPLETION_EVENT);
    DAT_EVENT none;
    EXPECT_EQ(dat_evd_dequeue(a.req, &none), DAT_QUEUE_EMPTY);
    // An RMR bound on a's region: b writes through its context; the bind completes with its cookie.
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(a.pz, &rmr), DAT_SUCCESS);
    DAT_LMR_TRIPLET range = a.at(40960, 4096);
    DAT_RMR_COOKIE rc;
    rc.as_64 = 0x5151;
    DAT_RMR_CONTEXT rmr_ctx = 0;
    ASSERT_EQ(dat_rmr_bind(rmr, a.lmr, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, a.ep, rc,
                           DAT_COMPLETION_DEFAULT_FLAG, &rmr_ctx),
              DAT_SUCCESS);
    e = wait_for(a.req, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.rmr_handle, rmr);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.user_cookie.as_64, 0x5151u);
    EXPECT_EQ(e.event_data.rmr_completion_event_data.status, DAT_DTO_SUCCESS);
    std::memset(b.buf.data(), 0x6b, 512);
    DAT_LMR_TRIPLET bw = b.at(0, 512);
    DAT_RMR_TRIPLET via{reinterpret_cast<DAT_VADDR>(a.buf.data() + 40960), 512, rmr_ctx};
    ASSERT_EQ(dat_ep_post_rdma_write(b.ep, 1, &bw, cookie(13), &via, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    e = wait_for(b.req, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS);
    // Send with Invalidate of that RMR's context: the receiver learns which.
    DAT_LMR_TRIPLET ar = a.at(8192, 4096);
    ASSERT_EQ(dat_ep_post_recv(a.ep, 1, &ar, cookie(14), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    DAT_LMR_TRIPLET bs = b.at(0, 32);
    ASSERT_EQ(DAT_EP_POST_SEND_WITH_INVALIDATE(b.ep, 1, &bs, cookie(15), DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE,
                                               rmr_ctx),
              DAT_SUCCESS);
    e = wait_for(a.rcv, DAT_DTO_COMPLETION_EVENT);
    EXPECT_EQ(e.event_data.dto_completion_event_data.operation, DAT_DTO_RECEIVE_WITH_INVALIDATE);
    EXPECT_EQ(e.event_data.dto_completion_event_data.rmr_context, rmr_ctx);
    EXPECT_EQ(a.buf[40960], 0x6b);  // the Write through the window, placed before the Send after it
    EXPECT_EQ(a.buf[40960 + 511], 0x6b);
    EXPECT_EQ(a.buf[40960 + 512], 0);
    wait_for(b.req, DAT_DTO_COMPLETION_EVENT);
    // A graceful disconnect: exactly one DISCONNECTED on each side.
    ASSERT_EQ(dat_ep_disconnect(a.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
    wait_for(a.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    wait_for(b.conn, DAT_CONNECTION_EVENT_DISCONNECTED);
    ::usleep(100000);
    EXPECT_EQ(dat_evd_dequeue(a.conn, &none), DAT_QUEUE_EMPTY);
    EXPECT_EQ(dat_evd_dequeue(b.conn, &none), DAT_QUEUE_EMPTY);
    ASSERT_EQ(dat_ep_disconnect(b.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);  // already over: nothing to do
    ASSERT_EQ(dat_rmr_free(rmr), DAT_SUCCESS);
}

// An RMR grants its range only: a Write through its context that runs past it is refused before anything is placed,
// and the connection ends.
TEST(DaplApi, AnRmrGrantsItsRangeOnly) {
    Side a, b;
    ASSERT_NO_FATAL_FAILURE(a.make());
    ASSERT_NO_FATAL_FAILURE(b.make());
    ASSERT_NO_FATAL_FAILURE(connect(a, b));
    DAT_RMR_HANDLE rmr;
    ASSERT_EQ(dat_rmr_create(a.pz, &rmr), DAT_SUCCESS);
    DAT_LMR_TRIPLET range = a.at(8192, 512);
    DAT_RMR_COOKIE rc;
    rc.as_64 = 1;
    DAT_RMR_CONTEXT ctx = 0;
    ASSERT_EQ(dat_rmr_bind(rmr, a.lmr, &range, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, a.ep, rc,
                           DAT_COMPLETION_DEFAULT_FLAG, &ctx),
              DAT_SUCCESS);
    wait_for(a.req, DAT_RMR_BIND_COMPLETION_EVENT);
    EXPECT_NE(ctx, a.rkey);
    std::memset(b.buf.data(), 0x5a, 1024);
    DAT_LMR_TRIPLET w = b.at(0, 513);
    DAT_RMR_TRIPLET via{reinterpret_cast<DAT_VADDR>(a.buf.data() + 8192), 513, ctx};
    ASSERT_EQ(dat_ep_post_rdma_write(b.ep, 1, &w, cookie(1), &via, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    wait_for(b.req, DAT_DTO_COMPLETION_EVENT);  // the Write left: that is all its completion says
    // a's RNIC refuses it and terminates the stream: an asynchronous error on a's EP, and the connection's end on
    // both sides.
    DAT_EVENT e = wait_for(a.async, DAT_ASYNC_ERROR_EP_BROKEN);
    EXPECT_EQ(e.event_data.asynch_error_event_data.dat_handle, a.ep);
    for (Side *s : {&a, &b}) {
        DAT_EVENT c{};
        DAT_COUNT more = 0;
        ASSERT_EQ(dat_evd_wait(s->conn, 10 * 1000 * 1000, 1, &c, &more), DAT_SUCCESS);
        EXPECT_TRUE(c.event_number == DAT_CONNECTION_EVENT_BROKEN ||
                    c.event_number == DAT_CONNECTION_EVENT_DISCONNECTED) << std::hex << c.event_number;
    }
    EXPECT_EQ(a.buf[8192], 0);
    EXPECT_EQ(a.buf[8192 + 512], 0);
    ASSERT_EQ(dat_rmr_free(rmr), DAT_SUCCESS);
}

TEST(DaplApi, RejectCarriesPrivateDataToTheClient) {
    Side a, b;
    ASSERT_NO_FATAL_FAILURE(a.make());
    ASSERT_NO_FATAL_FAILURE(b.make());
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL qual = 0;
    ASSERT_EQ(dat_psp_create_any(b.ia, &qual, b.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
    sockaddr_in to = loopback();
    ASSERT_EQ(dat_ep_connect(a.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&to), qual, 10 * 1000 * 1000, 0, nullptr,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              DAT_SUCCESS);
    DAT_EVENT e = wait_for(b.cr, DAT_CONNECTION_REQUEST_EVENT);
    const char why[] = "not today";
    ASSERT_EQ(dat_cr_reject(e.event_data.cr_arrival_event_data.cr_handle, sizeof why, const_cast<char *>(why)),
              DAT_SUCCESS);
    e = wait_for(a.conn, DAT_CONNECTION_EVENT_PEER_REJECTED);
    ASSERT_EQ(e.event_data.connect_event_data.private_data_size, static_cast<DAT_COUNT>(sizeof why));
    EXPECT_STREQ(static_cast<const char *>(e.event_data.connect_event_data.private_data), why);
    // The CR is gone with the reject.
    DAT_CR_PARAM p;
    EXPECT_EQ(type_of(dat_cr_query(e.event_data.cr_arrival_event_data.cr_handle, DAT_CR_FIELD_ALL, &p)),
              DAT_INVALID_HANDLE);
    ASSERT_EQ(dat_psp_free(psp), DAT_SUCCESS);
}

TEST(DaplApi, WhatIsNotSupportedSaysSo) {
    Side s;
    ASSERT_NO_FATAL_FAILURE(s.make());
    DAT_RMR_TRIPLET t{};
    EXPECT_EQ(type_of(DAT_EP_POST_RDMA_READ_TO_RMR(s.ep, &t, cookie(0), &t, DAT_COMPLETION_DEFAULT_FLAG)),
              DAT_NOT_IMPLEMENTED);
    DAT_CSP_HANDLE csp;
    sockaddr_in a = loopback();
    EXPECT_EQ(type_of(DAT_CSP_CREATE(provider_ia(s.ia), nullptr, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&a), s.cr, &csp)),
              DAT_NOT_IMPLEMENTED);
    EXPECT_EQ(type_of(DAT_EP_COMMON_CONNECT(s.ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(&a), 1000, 0, nullptr)),
              DAT_NOT_IMPLEMENTED);
    DAT_REGION_DESCRIPTION region{};
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lk;
    DAT_RMR_CONTEXT rk;
    DAT_VLEN len;
    DAT_VADDR addr;
    EXPECT_EQ(type_of(dat_lmr_create(s.ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, 4096, s.pz, DAT_MEM_PRIV_ALL_FLAG,
                                     DAT_VA_TYPE_VA, &lmr, &lk, &rk, &len, &addr)),
              DAT_NOT_IMPLEMENTED);
}

}  // namespace

// libdat2 reads its registry when it is loaded, before main(): this program runs itself again with DAT_OVERRIDE (a
// dat.conf naming libdaplopenrdma for "openrdma-sr0" and "openrdma-lo", and "openrdma-nowhere" for an address no
// RNIC serves) and OPENRDMA_EMBEDDED_CONFIG (softrnic on 127.0.0.1 in this process), both written by CMake.
int main(int argc, char **argv) {
    if (std::getenv("DAT_OVERRIDE") == nullptr || std::getenv("OPENRDMA_EMBEDDED_CONFIG") == nullptr) {
        ::setenv("DAT_OVERRIDE", DAPL_API_DAT_CONF, 1);
        ::setenv("OPENRDMA_EMBEDDED_CONFIG", DAPL_API_EMBEDDED_CONFIG, 1);
        ::unsetenv("KRDMA_DEVICE");
        ::execv("/proc/self/exe", argv);
        std::perror("dapl_api_tests: execv /proc/self/exe");
        return 2;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
