/** @file itapi_session.cpp @brief it_perf's IT-API objects, wire messages and event helpers. */
#include "itapi_session.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace it_perf::session {

using it_tools::call_error;

namespace {

constexpr uint32_t kMagic = 0x49545046;  // "ITPF"
constexpr uint16_t kVersion = 1;

void put16(uint8_t *p, uint16_t v) { v = htons(v); std::memcpy(p, &v, 2); }
void put32(uint8_t *p, uint32_t v) { v = htonl(v); std::memcpy(p, &v, 4); }
void put64(uint8_t *p, uint64_t v) { put32(p, static_cast<uint32_t>(v >> 32)); put32(p + 4, static_cast<uint32_t>(v)); }
uint16_t get16(const uint8_t *p) { uint16_t v; std::memcpy(&v, p, 2); return ntohs(v); }
uint32_t get32(const uint8_t *p) { uint32_t v; std::memcpy(&v, p, 4); return ntohl(v); }
uint64_t get64(const uint8_t *p) { return (uint64_t{get32(p)} << 32) | get32(p + 4); }

rdma::Expected<void> check_header(const uint8_t *in, size_t len, size_t need, const char *what) {
    if (len < need) {
        return rdma::Error(EPROTO, std::string(what) + " of " + std::to_string(len) + " bytes, expected " +
                                       std::to_string(need) + ": the peer is not an it_perf of this version");
    }
    if (get32(in) != kMagic) return rdma::Error(EPROTO, std::string(what) + " is not it_perf's (wrong magic)");
    if (get16(in + 4) != kVersion) {
        return rdma::Error(EPROTO, std::string(what) + " of it_perf protocol version " + std::to_string(get16(in + 4)) +
                                       ", expected " + std::to_string(kVersion) + ": run the same it_perf on both hosts");
    }
    return {};
}

}  // namespace

void ConnectData::write(uint8_t *out) const {
    std::memset(out, 0, kWireSize);
    put32(out, kMagic);
    put16(out + 4, kVersion);
    out[6] = static_cast<uint8_t>(role);
    put32(out + 8, qps);
    put32(out + 12, window);
    put64(out + 16, max_size);
    put32(out + 24, index);
    put64(out + 32, address);
    put64(out + 40, length);
    put64(out + 48, rmr_context);
}

rdma::Expected<ConnectData> ConnectData::read(const uint8_t *in, size_t len) {
    if (auto h = check_header(in, len, kWireSize, "connect private data"); !h) return h.error();
    ConnectData d;
    switch (in[6]) {  // from the wire
        case static_cast<uint8_t>(Role::control): d.role = Role::control; break;
        case static_cast<uint8_t>(Role::data): d.role = Role::data; break;
        case static_cast<uint8_t>(Role::probe): d.role = Role::probe; break;
        default: return rdma::Error(EPROTO, "connect private data with unknown role " + std::to_string(in[6]));
    }
    d.qps = get32(in + 8);
    d.window = get32(in + 12);
    d.max_size = get64(in + 16);
    d.index = get32(in + 24);
    d.address = get64(in + 32);
    d.length = get64(in + 40);
    d.rmr_context = get64(in + 48);
    return d;
}

void AcceptData::write(uint8_t *out) const {
    std::memset(out, 0, kWireSize);
    put32(out, kMagic);
    put16(out + 4, kVersion);
    put64(out + 8, address);
    put64(out + 16, length);
    put64(out + 24, rmr_context);
    put32(out + 32, receive_depth);
    put32(out + 36, credit_batch);
}

rdma::Expected<AcceptData> AcceptData::read(const uint8_t *in, size_t len) {
    if (auto h = check_header(in, len, kWireSize, "accept private data"); !h) return h.error();
    AcceptData d;
    d.address = get64(in + 8);
    d.length = get64(in + 16);
    d.rmr_context = get64(in + 24);
    d.receive_depth = get32(in + 32);
    d.credit_batch = get32(in + 36);
    if (d.receive_depth == 0 || d.credit_batch == 0 || d.credit_batch > d.receive_depth) {
        return rdma::Error(EPROTO, "accept private data with receive depth " + std::to_string(d.receive_depth) +
                                       " and credit batch " + std::to_string(d.credit_batch));
    }
    return d;
}

void ControlMessage::write(uint8_t *out) const {
    std::memset(out, 0, kControlSize);
    put32(out, kMagic);
    put16(out + 4, kVersion);
    put32(out + 8, static_cast<uint32_t>(type));
    out[12] = static_cast<uint8_t>(op);
    out[13] = static_cast<uint8_t>(kind);
    put64(out + 16, size);
    put64(out + 24, count);
}

rdma::Expected<ControlMessage> ControlMessage::read(const uint8_t *in, size_t len) {
    if (auto h = check_header(in, len, 32, "control message"); !h) return h.error();
    ControlMessage m;
    const uint32_t type = get32(in + 8);
    if (type < static_cast<uint32_t>(Type::request) || type > static_cast<uint32_t>(Type::bye)) {
        return rdma::Error(EPROTO, "control message of unknown type " + std::to_string(type));
    }
    m.type = static_cast<Type>(type);
    if (in[12] < static_cast<uint8_t>(Op::send) || in[12] > static_cast<uint8_t>(Op::read) ||
        in[13] < static_cast<uint8_t>(Kind::bw) || in[13] > static_cast<uint8_t>(Kind::lat)) {
        return rdma::Error(EPROTO, "control message with unknown test " + std::to_string(in[12]) + "/" +
                                       std::to_string(in[13]));
    }
    m.op = static_cast<Op>(in[12]);
    m.kind = static_cast<Kind>(in[13]);
    m.size = get64(in + 16);
    m.count = get64(in + 24);
    return m;
}

rdma::Expected<std::unique_ptr<Interface>> Interface::open(const std::string &name) {
    std::unique_ptr<Interface> itf(new Interface());
    itf->name_ = name;
    if (itf->name_.empty()) {
        it_interface_t list[16];
        size_t count = 16, total = 0;
        it_interface_list(list, &count, &total);
        if (count == 0) {
            // The library's reason when it has one (no krdmad, a bad configuration); else krdmad serves no RNIC.
            const std::string why = it_tools::failure_reason("it_interface_list");
            return rdma::Error(ENODEV, "it_interface_list found no IT-API interface: " +
                                           (why.empty() ? std::string("krdmad serves no RNIC (rdmactl list shows "
                                                                      "what it serves)")
                                                        : why));
        }
        // it_perf's peers are IPv4 addresses: an IPv6 RNIC listed first could not reach them.
        itf->name_ = it_tools::default_interface(list, count, IT_IPV4);
    }
    if (const it_status_t s = it_ia_create(itf->name_.c_str(), 2, 1, &itf->ia_); s != IT_SUCCESS) {
        rdma::Error e = call_error("it_ia_create", "\"" + itf->name_ + "\", 2, 1", s);
        return rdma::Error(e.code(), e.message() + ": is it an RNIC name or address that it_perf --list shows?");
    }
    if (const it_status_t s = it_pz_create(itf->ia_, &itf->pz_); s != IT_SUCCESS) {
        return call_error("it_pz_create", itf->name_, s);
    }
    auto async = itf->create_evd(IT_ASYNC_UNAFF_EVENT_STREAM, 16);
    if (!async) return async.error();
    itf->async_ = *async;
    return itf;
}

std::string Interface::offline_reason(std::chrono::milliseconds wait) {
    // The RNIC's notice comes before its connections end, but through another stream: give it a moment.
    for (;;) {
        it_event_t ev{};
        size_t more = 0;
        const auto us = static_cast<uint64_t>(wait.count()) * 1000;
        if (async_ == nullptr || it_evd_wait(async_, us, &ev, &more) != IT_SUCCESS) return {};
        if (ev.event_number == IT_ASYNC_UNAFF_SPIGOT_OFFLINE) {
            return "the RNIC went offline (krdmad stopped or died, or the link went down)";
        }
    }
}

Interface::~Interface() {
    for (it_ep_handle_t ep : eps_) (void)it_ep_free(ep);
    for (it_lmr_handle_t l : lmrs_) (void)it_lmr_free(l);
    for (it_evd_handle_t e : evds_) (void)it_evd_free(e);
    if (pz_ != nullptr) (void)it_pz_free(pz_);
    if (ia_ != nullptr) (void)it_ia_free(ia_);
}

rdma::Expected<it_evd_handle_t> Interface::create_evd(it_event_type_t stream, size_t queue) {
    it_evd_handle_t evd = nullptr;
    const it_status_t s = it_evd_create(ia_, stream, static_cast<it_evd_flags_t>(0), queue, 1, nullptr, &evd, nullptr);
    if (s != IT_SUCCESS) {
        return call_error("it_evd_create", it_tools::event_name(stream) + ", queue " + std::to_string(queue), s);
    }
    evds_.push_back(evd);
    return evd;
}

rdma::Expected<it_ep_handle_t> Interface::create_ep(it_evd_handle_t dto, it_evd_handle_t cm, size_t request_dtos,
                                                    size_t receive_dtos, uint64_t max_payload) {
    it_ep_attributes_t attr{};
    attr.max_dto_payload_size = max_payload;
    attr.max_request_dtos = request_dtos;
    attr.max_recv_dtos = receive_dtos;
    attr.max_send_segments = 1;
    attr.max_recv_segments = 1;
    attr.srv.rc.rdma_read_enable = IT_TRUE;
    attr.srv.rc.rdma_write_enable = IT_TRUE;
    attr.srv.rc.max_rdma_read_segments = 1;
    attr.srv.rc.max_rdma_write_segments = 1;
    attr.srv.rc.rdma_read_ird = kReadDepth;
    attr.srv.rc.rdma_read_ord = kReadDepth;
    attr.srv.rc.srq = nullptr;
    attr.srv.rc.soft_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    attr.srv.rc.hard_hi_watermark = IT_HARD_HI_WATERMARK_DISABLE;
    attr.srv.rc.atomics_enable = IT_FALSE;
    attr.priv_ops_enable = IT_FALSE;
    it_ep_handle_t ep = nullptr;
    const it_status_t s = it_ep_rc_create(pz_, dto, dto, cm, IT_EP_NO_FLAG, &attr, &ep);
    if (s != IT_SUCCESS) {
        return call_error("it_ep_rc_create",
                          "request DTOs " + std::to_string(request_dtos) + ", receive DTOs " +
                              std::to_string(receive_dtos) + ", IRD/ORD " + std::to_string(kReadDepth),
                          s);
    }
    eps_.push_back(ep);
    return ep;
}

rdma::Expected<std::pair<it_lmr_handle_t, it_rmr_context_t>> Interface::register_memory(const Buffer &buf) {
    it_lmr_handle_t lmr = nullptr;
    it_rmr_context_t rmr = 0;
    const it_status_t s = it_lmr_create20(pz_, buf.data(), buf.size(), IT_ADDR_MODE_ABSOLUTE,
                                          static_cast<it_mem_priv_t>(IT_PRIV_LOCAL | IT_PRIV_REMOTE), IT_LMR_FLAG_NONE,
                                          0, &lmr, &rmr);
    if (s != IT_SUCCESS) {
        return call_error("it_lmr_create20", std::to_string(buf.size()) + " bytes, IT_PRIV_LOCAL | IT_PRIV_REMOTE", s);
    }
    lmrs_.push_back(lmr);
    return std::make_pair(lmr, rmr);
}

void Interface::free_ep(it_ep_handle_t ep) {
    for (auto it = eps_.begin(); it != eps_.end(); ++it) {
        if (*it == ep) {
            eps_.erase(it);
            (void)it_ep_free(ep);
            return;
        }
    }
}

void Interface::free_lmr(it_lmr_handle_t lmr) {
    for (auto it = lmrs_.begin(); it != lmrs_.end(); ++it) {
        if (*it == lmr) {
            lmrs_.erase(it);
            (void)it_lmr_free(lmr);
            return;
        }
    }
}

void Interface::free_evd(it_evd_handle_t evd) {
    for (auto it = evds_.begin(); it != evds_.end(); ++it) {
        if (*it == evd) {
            evds_.erase(it);
            (void)it_evd_free(evd);
            return;
        }
    }
}

rdma::Expected<it_event_t> wait_event(it_evd_handle_t evd, std::chrono::milliseconds timeout, const char *what) {
    it_event_t ev{};
    size_t more = 0;
    const it_status_t s = it_evd_wait(evd, static_cast<uint64_t>(timeout.count()) * 1000, &ev, &more);
    if (s == IT_ERR_TIMEOUT_EXPIRED) {
        return rdma::Error(ETIMEDOUT, std::string("no event within ") + std::to_string(timeout.count()) +
                                          " ms while waiting for " + what + " (it_evd_wait: IT_ERR_TIMEOUT_EXPIRED)");
    }
    if (s != IT_SUCCESS) return call_error("it_evd_wait", std::string("waiting for ") + what, s);
    return ev;
}

rdma::Error completion_error(const it_event_t &event, const char *what) {
    const it_dto_cmpl_event_t &c = event.dto_cmpl;
    return rdma::Error(EIO, std::string(what) + ": " + it_tools::event_name(event.event_number) + " completed with " +
                                it_tools::dto_status_name(c.dto_status) + " (" +
                                std::to_string(static_cast<int>(c.dto_status)) + ")");
}

rdma::Expected<in_addr> resolve_ipv4(const std::string &host) {
    in_addr a{};
    if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return a;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo *res = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || res == nullptr) {
        return rdma::Error(EINVAL, "cannot resolve " + host + ": " + ::gai_strerror(rc));
    }
    a = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
    return a;
}

}  // namespace it_perf::session
