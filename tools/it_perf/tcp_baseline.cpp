/** @file tcp_baseline.cpp @brief The raw TCP baseline: server loop, client measurements, header codec. */
#include "tcp_baseline.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "bench/tcp_baseline.hpp"
#include "page_buffer.hpp"

namespace it_perf {

namespace {

using Clock = std::chrono::steady_clock;

// Untimed round trips before a latency test's clock starts (connection warm, caches and branch predictors too).
constexpr uint64_t kWarmupIterations = 16;
// Largest message the server accepts from a header (the RDMA side's limit is the same).
constexpr uint64_t kMaxMessage = uint64_t{1} << 30;

void put16(uint8_t *p, uint16_t v) { v = htons(v); std::memcpy(p, &v, 2); }
void put32(uint8_t *p, uint32_t v) { v = htonl(v); std::memcpy(p, &v, 4); }
void put64(uint8_t *p, uint64_t v) { put32(p, static_cast<uint32_t>(v >> 32)); put32(p + 4, static_cast<uint32_t>(v)); }
uint16_t get16(const uint8_t *p) { uint16_t v; std::memcpy(&v, p, 2); return ntohs(v); }
uint32_t get32(const uint8_t *p) { uint32_t v; std::memcpy(&v, p, 4); return ntohl(v); }
uint64_t get64(const uint8_t *p) { return (uint64_t{get32(p)} << 32) | get32(p + 4); }

// Whole reads and writes; false on EOF or error (errno tells which when it is an error).
bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        const ssize_t r = ::write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

bool read_all(int fd, uint8_t *p, size_t n) {
    while (n > 0) {
        const ssize_t r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) errno = 0;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

struct Socket {
    int fd = -1;
    Socket() = default;
    explicit Socket(int f) : fd(f) {}
    Socket(Socket &&o) noexcept : fd(o.fd) { o.fd = -1; }
    Socket &operator=(Socket &&) = delete;
    Socket(const Socket &) = delete;
    ~Socket() {
        if (fd >= 0) ::close(fd);
    }
};

void no_delay(int fd) {
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

rdma::Expected<sockaddr_in> resolve_v4(const std::string &host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
        return rdma::Error(EINVAL, "TCP baseline: cannot resolve " + host + ": " + ::gai_strerror(rc));
    }
    sockaddr_in a{};
    std::memcpy(&a, res->ai_addr, sizeof a);
    ::freeaddrinfo(res);
    a.sin_port = htons(port);
    return a;
}

rdma::Expected<Socket> connect_to(const std::string &host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
        return rdma::Error(EINVAL, "TCP baseline: cannot resolve " + host + ": " + ::gai_strerror(rc));
    }
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int rc = s.fd < 0 ? -1 : ::connect(s.fd, res->ai_addr, res->ai_addrlen);
    const int err = errno;
    ::freeaddrinfo(res);
    if (rc != 0) {
        return rdma::Error(err, "TCP baseline: connect to " + host + ":" + service + " failed: " + std::strerror(err) +
                                    " (is the it_perf server running, and its TCP port open?)");
    }
    no_delay(s.fd);
    return s;
}

rdma::Error io_error(const char *what) {
    const int err = errno != 0 ? errno : ECONNRESET;
    return rdma::Error(err, std::string("TCP baseline: ") + what + ": " +
                                (errno != 0 ? std::strerror(errno) : "the server closed the connection"));
}

// Reads a connection's header; nothing (reported) when it is not one.
std::optional<TcpHeader> read_header(int fd) {
    uint8_t h[TcpHeader::kWireSize];
    if (!read_all(fd, h, sizeof h)) return std::nullopt;  // a client that connected and left (a port probe)
    auto header = TcpHeader::read(h, kMaxMessage);
    if (!header) {
        std::fprintf(stderr, "it_perf server: TCP baseline connection refused: %s\n",
                     header.error().to_string().c_str());
        return std::nullopt;
    }
    return *header;
}

// Takes the rest of a test's connections (@p h's streams; @p conns holds the first) as @p listener accepts them,
// within 10 s. Each joins @p conns once its header has been read and @p ours accepted it; false when one was not
// ours (or its header never came).
template <class Ours>
bool accept_rest(int listener, std::vector<Socket> &conns, const TcpHeader &h, Ours &&ours) {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (conns.size() < h.streams && Clock::now() < give_up) {
        pollfd p{listener, POLLIN, 0};
        if (::poll(&p, 1, 200) <= 0) continue;
        Socket c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
        if (c.fd < 0) continue;
        auto more = read_header(c.fd);
        if (!more) return false;
        conns.push_back(std::move(c));
        if (!ours(*more)) return false;
    }
    return true;
}

// The server of a bandwidth test of several streams: the first connection (@p first, header @p h) is here; the
// others come on @p listener within 10 s. Reads every stream to its end, then tells each how many bytes it read.
void serve_streams(int listener, Socket first, const TcpHeader &h) {
    std::vector<Socket> streams;
    streams.push_back(std::move(first));
    const bool all_ours = accept_rest(listener, streams, h, [&h](const TcpHeader &more) {
        return more.shape == TcpShape::stream && more.size == h.size && more.streams == h.streams;
    });
    if (!all_ours) {
        std::fprintf(stderr, "it_perf server: TCP baseline: a connection that is not one of the test's %u streams "
                             "came in\n",
                     h.streams);
        return;
    }
    if (streams.size() < h.streams) {
        std::fprintf(stderr, "it_perf server: TCP baseline: %zu of %u streams came\n", streams.size(), h.streams);
        return;
    }
    std::vector<pollfd> watch(streams.size());
    std::vector<uint64_t> total(streams.size(), 0);
    for (size_t i = 0; i < streams.size(); ++i) watch[i] = pollfd{streams[i].fd, POLLIN, 0};
    // One message's buffer, as bench::stream_receive() reads a single stream (and an RDMA receiver places a message).
    PageBuffer buf = PageBuffer::allocate(h.size);
    if (buf.data() == nullptr) return;
    for (size_t open = streams.size(); open > 0;) {
        if (::poll(watch.data(), watch.size(), -1) < 0 && errno != EINTR) return;
        for (size_t i = 0; i < watch.size(); ++i) {
            if (watch[i].fd < 0 || watch[i].revents == 0) continue;
            const ssize_t r = ::recv(watch[i].fd, buf.data(), buf.size(), MSG_DONTWAIT);
            if (r > 0) {
                total[i] += static_cast<uint64_t>(r);
            } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                watch[i].fd = -1;  // this stream ended (or broke): its count is final
                --open;
            }
        }
    }
    for (size_t i = 0; i < streams.size(); ++i) {
        uint8_t ack[8];
        put64(ack, total[i]);
        (void)write_all(streams[i].fd, ack, sizeof ack);
    }
}

// The server of a setup batch: answers the first connection (@p first, header @p h) and the others of the batch
// as @p listener accepts them, one byte each, then holds them until the client has closed them all (10 s at most).
void serve_setup(int listener, Socket first, const TcpHeader &h) {
    std::vector<Socket> conns;
    const uint8_t answer = 1;
    if (!write_all(first.fd, &answer, 1)) return;
    conns.push_back(std::move(first));
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    bool answered = true;
    const bool all_ours = accept_rest(listener, conns, h, [&](const TcpHeader &more) {
        if (more.shape != TcpShape::setup || more.streams != h.streams) return false;
        answered = write_all(conns.back().fd, &answer, 1);
        return answered;
    });
    if (!all_ours) {
        if (answered) std::fprintf(stderr, "it_perf server: TCP baseline: a connection that is not one of the setup batch came in\n");
        return;
    }
    std::vector<pollfd> watch(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) watch[i] = pollfd{conns[i].fd, POLLIN, 0};
    for (size_t open = conns.size(); open > 0 && Clock::now() < give_up + std::chrono::seconds(10);) {
        if (::poll(watch.data(), watch.size(), 200) < 0 && errno != EINTR) return;
        for (pollfd &w : watch) {
            if (w.fd < 0 || w.revents == 0) continue;
            uint8_t b;
            const ssize_t r = ::recv(w.fd, &b, 1, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                w.fd = -1;
                --open;
            }
        }
    }
}

// Serves one connection (and for a test of several streams, the others from @p listener) after its header; false
// when the header said bye.
bool serve_connection(int listener, Socket conn) {
    const int fd = conn.fd;
    auto header = read_header(fd);
    if (!header) return true;
    if (header->shape == TcpShape::bye) return false;
    no_delay(fd);
    if (header->shape == TcpShape::stream && header->streams > 1) {
        serve_streams(listener, std::move(conn), *header);
        return true;
    }
    if (header->shape == TcpShape::setup) {
        serve_setup(listener, std::move(conn), *header);
        return true;
    }
    const size_t size = header->size;
    switch (header->shape) {
        case TcpShape::stream: {
            // Every message read whole into a buffer of its size (the one stream baseline all tools share), then
            // say how many bytes arrived.
            PageBuffer buf = PageBuffer::allocate(size);
            if (buf.data() == nullptr) return true;  // the client hears the connection close
            const uint64_t total = bench::stream_receive(fd, buf.data(), size);
            uint8_t ack[8];
            put64(ack, total);
            (void)write_all(fd, ack, sizeof ack);
            break;
        }
        case TcpShape::pingpong: {
            PageBuffer buf = PageBuffer::allocate(size);
            if (buf.data() == nullptr) return true;  // the client hears the connection close
            while (bench::io_all(false, fd, buf.data(), size, MSG_DONTWAIT) && bench::io_all(true, fd, buf.data(), size)) {
            }
            break;
        }
        case TcpShape::request_response: {
            PageBuffer buf = PageBuffer::allocate(size);
            if (buf.data() == nullptr) return true;  // the client hears the connection close
            uint8_t req[8];
            while (bench::io_all(false, fd, req, sizeof req, MSG_DONTWAIT) && bench::io_all(true, fd, buf.data(), size)) {
            }
            break;
        }
        case TcpShape::setup:
        case TcpShape::bye: break;
    }
    return true;
}

bool more(const Budget &b, uint64_t done, Clock::time_point end) {
    return b.seconds > 0 ? Clock::now() < end : done < b.iterations;
}

}  // namespace

void TcpHeader::write(uint8_t *out) const {
    std::memset(out, 0, kWireSize);
    put32(out, kMagic);
    put16(out + 4, kVersion);
    put16(out + 6, static_cast<uint16_t>(shape));
    put64(out + 8, size);
    put16(out + 16, streams);
}

rdma::Expected<TcpHeader> TcpHeader::read(const uint8_t *in, uint64_t max_size) {
    if (get32(in) != kMagic) return rdma::Error(EPROTO, "not an it_perf TCP baseline header (wrong magic)");
    if (get16(in + 4) != kVersion) {
        return rdma::Error(EPROTO, "TCP baseline header version " + std::to_string(get16(in + 4)) + ", expected " +
                                       std::to_string(kVersion) + ": run the same it_perf on both hosts");
    }
    TcpHeader h;
    const uint16_t shape = get16(in + 6);
    switch (shape) {  // from the wire: anything unknown is refused
        case static_cast<uint16_t>(TcpShape::stream):
        case static_cast<uint16_t>(TcpShape::pingpong):
        case static_cast<uint16_t>(TcpShape::request_response):
        case static_cast<uint16_t>(TcpShape::setup):
        case static_cast<uint16_t>(TcpShape::bye): h.shape = static_cast<TcpShape>(shape); break;
        default: return rdma::Error(EPROTO, "unknown TCP baseline shape " + std::to_string(shape));
    }
    h.size = get64(in + 8);
    if (h.shape != TcpShape::bye && (h.size == 0 || h.size > max_size)) {
        return rdma::Error(EMSGSIZE, "TCP baseline message size " + std::to_string(h.size) + " out of range 1.." +
                                         std::to_string(max_size));
    }
    h.streams = get16(in + 16);
    const bool several_ok = h.shape == TcpShape::stream || h.shape == TcpShape::setup;
    if (h.streams == 0 || h.streams > kMaxStreams || (h.streams > 1 && !several_ok)) {
        return rdma::Error(EPROTO, "TCP baseline header asks for " + std::to_string(h.streams) +
                                       " streams (1 to " + std::to_string(kMaxStreams) + ", several only for bandwidth and setup)");
    }
    return h;
}

TcpShape tcp_shape_for(const TestCase &test) {
    if (test.kind == Kind::bw) return TcpShape::stream;
    return test.op == Op::read ? TcpShape::request_response : TcpShape::pingpong;
}

rdma::Expected<TcpServer> TcpServer::listen(const std::string &address, uint16_t port) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.fd < 0) return rdma::Error(errno, std::string("TCP baseline: socket: ") + std::strerror(errno));
    int one = 1;
    (void)::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (address.empty()) {
        a.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
        return rdma::Error(EINVAL, "TCP baseline: " + address + " is not an IPv4 address");
    }
    if (::bind(s.fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(s.fd, SOMAXCONN) != 0) {
        const int err = errno;
        return rdma::Error(err, "TCP baseline: cannot listen on " + (address.empty() ? "*" : address) + ":" +
                                    std::to_string(port) + ": " + std::strerror(err) +
                                    (err == EADDRINUSE ? " (choose another with --tcp-port)" : ""));
    }
    socklen_t len = sizeof a;
    (void)::getsockname(s.fd, reinterpret_cast<sockaddr *>(&a), &len);
    TcpServer server(s.fd, ntohs(a.sin_port));
    s.fd = -1;
    return server;
}

TcpServer::TcpServer(TcpServer &&other) noexcept : fd_(other.fd_), port_(other.port_) { other.fd_ = -1; }

TcpServer::~TcpServer() {
    if (fd_ >= 0) ::close(fd_);
}

void TcpServer::serve(const std::atomic<bool> &stop) {
    while (!stop.load(std::memory_order_relaxed)) {
        pollfd p{fd_, POLLIN, 0};
        const int n = ::poll(&p, 1, 200);
        if (n <= 0) continue;
        Socket c(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
        if (c.fd < 0) continue;
        if (!serve_connection(fd_, std::move(c))) return;
    }
}

namespace {

// A message of @p size bytes (0x5a) to send, page-aligned like the RDMA side's registered buffer.
rdma::Expected<PageBuffer> message_buffer(size_t size) {
    PageBuffer b = PageBuffer::allocate(size);
    if (b.data() == nullptr) {
        return rdma::Error(ENOMEM, "TCP baseline: no memory for a " + std::to_string(size) + "-byte message");
    }
    std::memset(b.data(), 0x5a, size);
    return b;
}

// Bandwidth over @p test.qps streams: each connection gets its header, then the messages go round-robin to whichever
// socket can take bytes (non-blocking, so one full socket never holds the others up), as the RDMA side posts to
// whichever QP has room in its window; timed until the server has counted every stream's bytes.
rdma::Expected<Measurement> run_tcp_streams(const std::string &host, uint16_t port, const TestCase &test) {
    TcpHeader h;
    h.shape = TcpShape::stream;
    h.size = test.size;
    h.streams = static_cast<uint16_t>(test.qps);
    uint8_t hb[TcpHeader::kWireSize];
    h.write(hb);
    std::vector<Socket> socks;
    for (uint32_t i = 0; i < test.qps; ++i) {
        auto s = connect_to(host, port);
        if (!s) return s.error();
        if (!write_all(s->fd, hb, sizeof hb)) return io_error("sending a stream's header");
        socks.push_back(std::move(*s));
    }
    const size_t size = test.size;
    auto message = message_buffer(size);
    if (!message) return message.error();
    PageBuffer buf = std::move(*message);
    std::vector<size_t> offset(socks.size(), 0);  // bytes of the current message already written, per stream
    std::vector<pollfd> watch(socks.size());
    for (size_t i = 0; i < socks.size(); ++i) watch[i] = pollfd{socks[i].fd, POLLOUT, 0};
    uint64_t sent = 0;  // whole messages started; each is finished before the end
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(test.budget.seconds));
    bool more_to_start = more(test.budget, sent, end);
    for (;;) {
        bool busy = false;
        for (size_t i = 0; i < socks.size(); ++i) {
            if (offset[i] == 0 && !more_to_start) {
                watch[i].fd = -1;  // done: its writability must not end the poll below
                continue;
            }
            busy = true;
            const ssize_t w = ::send(socks[i].fd, buf.data() + offset[i], size - offset[i], MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
                return io_error("streaming");
            }
            if (offset[i] == 0) ++sent;
            offset[i] += static_cast<size_t>(w);
            if (offset[i] == size) offset[i] = 0;
            more_to_start = more(test.budget, sent, end);
        }
        if (!busy) break;
        if (::poll(watch.data(), watch.size(), 1000) < 0 && errno != EINTR) return io_error("waiting to stream");
    }
    uint64_t read = 0;
    for (Socket &s : socks) ::shutdown(s.fd, SHUT_WR);
    for (Socket &s : socks) {
        uint8_t ack[8];
        if (!read_all(s.fd, ack, sizeof ack)) return io_error("waiting for the server's count");
        read += get64(ack);
    }
    const auto t1 = Clock::now();
    if (read != sent * size) {
        return rdma::Error(EIO, "TCP baseline: the server read " + std::to_string(read) + " bytes of " +
                                    std::to_string(sent * size) + " over " + std::to_string(socks.size()) + " streams");
    }
    Measurement m;
    m.iterations = sent;
    m.bytes = sent * size;
    m.seconds = std::chrono::duration<double>(t1 - t0).count();
    m.valid = true;
    return m;
}

}  // namespace

rdma::Expected<Measurement> run_tcp_test(const std::string &host, uint16_t port, const TestCase &test) {
    if (test.kind == Kind::bw && test.qps > 1) return run_tcp_streams(host, port, test);
    auto s = connect_to(host, port);
    if (!s) return s.error();
    const int fd = s->fd;
    TcpHeader h;
    h.shape = tcp_shape_for(test);
    h.size = test.size;
    uint8_t hb[TcpHeader::kWireSize];
    h.write(hb);
    if (!write_all(fd, hb, sizeof hb)) return io_error("sending the header");
    const size_t size = test.size;
    auto message = message_buffer(size);
    if (!message) return message.error();
    PageBuffer buf = std::move(*message);
    Measurement m;
    if (h.shape == TcpShape::stream) {
        const auto t0 = Clock::now();
        const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(test.budget.seconds));
        const int64_t messages =
            bench::stream_send(fd, buf.data(), size, [&](uint64_t sent) { return more(test.budget, sent, end); });
        if (messages < 0) return io_error("streaming");
        const auto sent = static_cast<uint64_t>(messages);
        ::shutdown(fd, SHUT_WR);
        uint8_t ack[8];
        if (!read_all(fd, ack, sizeof ack)) return io_error("waiting for the server's count");
        const auto t1 = Clock::now();
        if (get64(ack) != sent * size) {
            return rdma::Error(EIO, "TCP baseline: the server read " + std::to_string(get64(ack)) + " bytes of " +
                                        std::to_string(sent * size));
        }
        m.iterations = sent;
        m.bytes = sent * size;
        m.seconds = std::chrono::duration<double>(t1 - t0).count();
        m.valid = true;
        return m;
    }
    // Ping-pong or request/response: each iteration is one round trip, timed alone.
    const bool pingpong = h.shape == TcpShape::pingpong;
    uint8_t req[8] = {};
    auto round_trip = [&]() {
        if (pingpong) {
            return bench::io_all(true, fd, buf.data(), size) && bench::io_all(false, fd, buf.data(), size, MSG_DONTWAIT);
        }
        return bench::io_all(true, fd, req, sizeof req) && bench::io_all(false, fd, buf.data(), size, MSG_DONTWAIT);
    };
    for (uint64_t i = 0; i < kWarmupIterations; ++i) {
        if (!round_trip()) return io_error("warm-up round trip");
    }
    std::vector<uint64_t> samples;
    samples.reserve(test.budget.seconds > 0 ? size_t{1} << 20 : test.budget.iterations);
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(test.budget.seconds));
    while (more(test.budget, samples.size(), end)) {
        const auto t0 = Clock::now();
        if (!round_trip()) return io_error("round trip");
        samples.push_back(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
    }
    m.iterations = samples.size();
    m.latency = summarize_latency(samples, latency_divisor(test.op));
    m.valid = true;
    return m;
}

rdma::Expected<double> run_tcp_setup(const std::string &host, uint16_t port, uint32_t in_flight, uint64_t count) {
    if (in_flight == 0 || in_flight > TcpHeader::kMaxStreams || count == 0) {
        return rdma::Error(EINVAL, "TCP baseline: setup batches of 1 to " + std::to_string(TcpHeader::kMaxStreams));
    }
    auto addr = resolve_v4(host, port);
    if (!addr) return addr.error();
    double timed = 0;
    uint64_t done = 0;
    while (done < count) {
        const auto batch = static_cast<uint32_t>(std::min<uint64_t>(in_flight, count - done));
        TcpHeader h;
        h.shape = TcpShape::setup;
        h.size = 1;
        h.streams = static_cast<uint16_t>(batch);
        uint8_t hb[TcpHeader::kWireSize];
        h.write(hb);
        std::vector<Socket> socks;
        std::vector<pollfd> watch;
        socks.reserve(batch);
        const auto t0 = Clock::now();
        for (uint32_t k = 0; k < batch; ++k) {
            Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
            if (s.fd < 0) return io_error("socket");
            if (::connect(s.fd, reinterpret_cast<const sockaddr *>(&*addr), sizeof *addr) != 0 && errno != EINPROGRESS) {
                return io_error("connect (setup batch)");
            }
            no_delay(s.fd);
            watch.push_back(pollfd{s.fd, POLLOUT, 0});
            socks.push_back(std::move(s));
        }
        // Connected (writable): send the header; then the server's answer (readable) completes the connection.
        for (size_t open = batch; open > 0;) {
            if (::poll(watch.data(), watch.size(), 10000) <= 0) return rdma::Error(ETIMEDOUT, "TCP baseline: a setup batch stalled for 10 s");
            for (pollfd &w : watch) {
                if (w.fd < 0 || w.revents == 0) continue;
                if ((w.revents & (POLLERR | POLLHUP)) != 0) return rdma::Error(ECONNRESET, "TCP baseline: a setup connection failed");
                if (w.events == POLLOUT) {
                    if (!write_all(w.fd, hb, sizeof hb)) return io_error("sending a setup header");
                    w.events = POLLIN;
                } else {
                    uint8_t b;
                    const ssize_t r = ::recv(w.fd, &b, 1, MSG_DONTWAIT);
                    if (r == 1) {
                        w.fd = -1;
                        --open;
                    } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                        return io_error("reading the server's answer (setup)");
                    }
                }
                w.revents = 0;
            }
        }
        timed += std::chrono::duration<double>(Clock::now() - t0).count();
        done += batch;
    }
    return static_cast<double>(done) / timed;
}

rdma::Expected<void> send_tcp_bye(const std::string &host, uint16_t port) {
    auto s = connect_to(host, port);
    if (!s) return s.error();
    TcpHeader h;
    h.shape = TcpShape::bye;
    uint8_t hb[TcpHeader::kWireSize];
    h.write(hb);
    if (!write_all(s->fd, hb, sizeof hb)) return io_error("sending bye");
    return {};
}

}  // namespace it_perf
