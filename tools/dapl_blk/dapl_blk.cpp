// dapl_blk: the uDAPL client of the RDMA block service krdmad hosts (the kDAPL consumer module blk_service).
// It writes a pattern to the volume block by block (the service RDMA-Reads each block from this process), reads
// it back (the service RDMA-Writes each block here), verifies every byte, and prints what it moved.
#include <arpa/inet.h>
#include <netdb.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <dat2/udat.h>

#include "blk_proto.h"

namespace {

struct Options {
    std::string provider;                  // the dat.conf IA name
    std::string server = "127.0.0.1";      // the service's address
    uint16_t port = BLK_DEFAULT_PORT;      // its port (connection qualifier)
    uint32_t block = 64 * 1024;            // bytes per request
    uint32_t blocks = 64;                  // requests per pass
    uint64_t offset = 0;                   // first byte of the volume
    uint32_t seed = 1;                     // pattern seed
    bool read_only = false;                // verify what an earlier run wrote
    bool verbose = false;
};

const char *text(DAT_RETURN r) {
    static thread_local char buf[256];
    const char *major = "", *minor = "";
    dat_strerror(r, &major, &minor);
    std::snprintf(buf, sizeof buf, "%s %s", major, minor);
    return buf;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        DAT_RETURN r_ = (call);                                                       \
        if (r_ != DAT_SUCCESS) {                                                      \
            std::fprintf(stderr, "dapl_blk: %s failed: %s\n", #call, text(r_));       \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

uint8_t pattern(uint32_t seed, uint64_t volume_offset) {
    return static_cast<uint8_t>((volume_offset * 2654435761u >> 13) ^ seed ^ (volume_offset >> 16));
}

// Waits for one event on @p evd (10 s); false (and says why) when none came or it is not @p expected.
bool wait_event(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER expected, DAT_EVENT &ev, const char *what) {
    DAT_COUNT more = 0;
    DAT_RETURN r = dat_evd_wait(evd, 10 * 1000 * 1000, 1, &ev, &more);
    if (r != DAT_SUCCESS) {
        std::fprintf(stderr, "dapl_blk: waiting for %s: %s\n", what, text(r));
        return false;
    }
    if (ev.event_number != expected) {
        std::fprintf(stderr, "dapl_blk: waiting for %s: got event 0x%x\n", what, ev.event_number);
        return false;
    }
    if (expected == DAT_DTO_COMPLETION_EVENT && ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
        std::fprintf(stderr, "dapl_blk: %s completed with DTO status %d\n", what,
                     ev.event_data.dto_completion_event_data.status);
        return false;
    }
    return true;
}

int run(const Options &o) {
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    CHECK(dat_ia_open(const_cast<char *>(o.provider.c_str()), 8, &async, &ia));  // DAT_NAME_PTR is not const
    DAT_PZ_HANDLE pz;
    CHECK(dat_pz_create(ia, &pz));
    DAT_EVD_HANDLE req, rcv, conn;
    CHECK(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req));
    CHECK(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &rcv));
    CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    DAT_EP_ATTR attr{};
    attr.service_type = DAT_SERVICE_TYPE_RC;
    attr.max_message_size = sizeof(blk_request);
    attr.max_rdma_size = o.block;
    attr.max_recv_dtos = 4;
    attr.max_request_dtos = 4;
    attr.max_recv_iov = 1;
    attr.max_request_iov = 1;
    attr.max_rdma_read_in = 4;
    attr.max_rdma_read_out = 0;
    attr.max_rdma_read_iov = 1;
    attr.max_rdma_write_iov = 1;
    DAT_EP_HANDLE ep;
    CHECK(dat_ep_create(ia, pz, rcv, req, conn, &attr, &ep));

    // One data buffer the service reads and writes remotely, and one request and one reply slot.
    std::vector<uint8_t> data(o.block);
    blk_request request{};
    blk_reply reply{};
    DAT_REGION_DESCRIPTION region;
    DAT_LMR_HANDLE data_lmr, req_lmr, rep_lmr;
    DAT_LMR_CONTEXT data_lkey, req_lkey, rep_lkey;
    DAT_RMR_CONTEXT data_rkey, unused;
    DAT_VLEN size;
    DAT_VADDR addr;
    region.for_va = data.data();
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, o.block, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                         &data_lmr, &data_lkey, &data_rkey, &size, &addr));
    region.for_va = &request;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof request, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG,
                         DAT_VA_TYPE_VA, &req_lmr, &req_lkey, &unused, &size, &addr));
    region.for_va = &reply;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof reply, pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                         DAT_VA_TYPE_VA, &rep_lmr, &rep_lkey, &unused, &size, &addr));

    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(o.server.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
        std::fprintf(stderr, "dapl_blk: cannot resolve %s\n", o.server.c_str());
        return 1;
    }
    const DAT_RETURN cr = dat_ep_connect(ep, reinterpret_cast<DAT_IA_ADDRESS_PTR>(res->ai_addr), o.port,
                                         10 * 1000 * 1000, 0, nullptr, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    freeaddrinfo(res);
    CHECK(cr);
    DAT_EVENT ev;
    if (!wait_event(conn, DAT_CONNECTION_EVENT_ESTABLISHED, ev, "the connection")) return 1;

    uint64_t next_id = 1;
    // One request/reply exchange: post the reply's receive, Send the request, wait for both completions.
    auto exchange = [&](uint32_t op, uint64_t offset, uint32_t length, bool quiet = false) -> bool {
        DAT_LMR_TRIPLET r{reinterpret_cast<DAT_VADDR>(&reply), sizeof reply, rep_lkey};
        DAT_DTO_COOKIE cookie;
        cookie.as_64 = 1;
        if (dat_ep_post_recv(ep, 1, &r, cookie, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) return false;
        request = blk_request{BLK_MAGIC, op, next_id++, offset, length, data_rkey,
                              reinterpret_cast<uint64_t>(data.data())};
        DAT_LMR_TRIPLET s{reinterpret_cast<DAT_VADDR>(&request), sizeof request, req_lkey};
        cookie.as_64 = 2;
        if (dat_ep_post_send(ep, 1, &s, cookie, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) return false;
        DAT_EVENT e;
        if (!wait_event(req, DAT_DTO_COMPLETION_EVENT, e, "the request's Send")) return false;
        if (!wait_event(rcv, DAT_DTO_COMPLETION_EVENT, e, "the reply")) return false;
        if (reply.magic != BLK_MAGIC || reply.id != request.id) {
            std::fprintf(stderr, "dapl_blk: a reply that is not the request's\n");
            return false;
        }
        if (reply.status != BLK_OK) {
            if (quiet) return false;
            std::fprintf(stderr, "dapl_blk: the service refused op %u at %llu+%u: status %u\n", op,
                         static_cast<unsigned long long>(offset), length, reply.status);
            return false;
        }
        return true;
    };

    if (!exchange(BLK_OP_HELLO, 0, 0)) return 1;
    const uint64_t volume = reply.volume_size;
    std::printf("dapl_blk: connected to %s:%u over %s: volume of %llu bytes, transfers up to %u bytes\n",
                o.server.c_str(), o.port, o.provider.c_str(), static_cast<unsigned long long>(volume), reply.max_io);
    if (o.block > reply.max_io || o.offset + uint64_t{o.block} * o.blocks > volume) {
        std::fprintf(stderr, "dapl_blk: %u blocks of %u bytes from %llu do not fit the volume\n", o.blocks, o.block,
                     static_cast<unsigned long long>(o.offset));
        return 1;
    }
    const double mib = static_cast<double>(uint64_t{o.block} * o.blocks) / (1024.0 * 1024.0);
    if (!o.read_only) {
        const auto t0 = std::chrono::steady_clock::now();
        for (uint32_t b = 0; b < o.blocks; ++b) {
            const uint64_t at = o.offset + uint64_t{b} * o.block;
            for (uint32_t i = 0; i < o.block; ++i) data[i] = pattern(o.seed, at + i);
            if (!exchange(BLK_OP_WRITE, at, o.block)) return 1;
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("dapl_blk: wrote %u blocks of %u bytes (service RDMA Read): %.1f MiB/s\n", o.blocks, o.block,
                    mib / s);
    }
    const auto t1 = std::chrono::steady_clock::now();
    uint64_t bad = 0;
    for (uint32_t b = 0; b < o.blocks; ++b) {
        const uint64_t at = o.offset + uint64_t{b} * o.block;
        std::memset(data.data(), 0, o.block);
        if (!exchange(BLK_OP_READ, at, o.block)) return 1;
        for (uint32_t i = 0; i < o.block; ++i) {
            if (data[i] != pattern(o.seed, at + i) && bad++ < 4) {
                std::fprintf(stderr, "dapl_blk: byte %llu is 0x%02x, expected 0x%02x\n",
                             static_cast<unsigned long long>(at + i), data[i], pattern(o.seed, at + i));
            }
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("dapl_blk: read %u blocks of %u bytes (service RDMA Write): %.1f MiB/s\n", o.blocks, o.block, mib / s);
    // The out-of-range request is refused with a status, not a broken connection.
    if (!o.read_only && exchange(BLK_OP_READ, volume, o.block, true)) {
        std::fprintf(stderr, "dapl_blk: a read past the volume's end was not refused\n");
        return 1;
    }
    if (!o.read_only && reply.status != BLK_ERANGE) {
        std::fprintf(stderr, "dapl_blk: a read past the volume's end got status %u, not ERANGE\n", reply.status);
        return 1;
    }
    if (bad != 0) {
        std::printf("dapl_blk: FAILED: %llu bytes differ\n", static_cast<unsigned long long>(bad));
        return 1;
    }
    std::printf("dapl_blk: verified %llu bytes\n", static_cast<unsigned long long>(uint64_t{o.block} * o.blocks));

    CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
    (void)wait_event(conn, DAT_CONNECTION_EVENT_DISCONNECTED, ev, "the disconnect");
    CHECK(dat_ep_free(ep));
    CHECK(dat_lmr_free(data_lmr));
    CHECK(dat_lmr_free(req_lmr));
    CHECK(dat_lmr_free(rep_lmr));
    CHECK(dat_evd_free(conn));
    CHECK(dat_evd_free(rcv));
    CHECK(dat_evd_free(req));
    CHECK(dat_pz_free(pz));
    CHECK(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG));
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options o;
    CLI::App app{"dapl_blk: write, read back and verify blocks of krdmad's RDMA block service over uDAPL"};
    app.add_option("-P,--provider", o.provider, "The interface adapter: a dat.conf IA name (e.g. openrdma-sr0)")
        ->required();
    app.add_option("-s,--server", o.server, "The service's address (default 127.0.0.1)");
    app.add_option("-p,--port", o.port, "The service's port (default 7480)");
    app.add_option("-b,--block", o.block, "Bytes per request (default 65536)")->check(CLI::Range(1u, 1u << 30));
    app.add_option("-n,--blocks", o.blocks, "Requests per pass (default 64)")->check(CLI::Range(1u, 1u << 24));
    app.add_option("-o,--offset", o.offset, "First byte of the volume to use (default 0)");
    app.add_option("--seed", o.seed, "Pattern seed (default 1)");
    app.add_flag("--read-only", o.read_only, "Only read back and verify what an earlier run with this seed wrote");
    app.set_version_flag("--version", std::string("dapl_blk (OpenRDMA) ") + OPENRDMA_VERSION);
    CLI11_PARSE(app, argc, argv);
    return run(o);
}
