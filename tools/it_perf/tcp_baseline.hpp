/**
 * @file tcp_baseline.hpp
 * @brief it_perf's baseline: the same measurement as each RDMA test over a raw TCP socket, in the same run and the
 *        same process shapes (the server process serving, the client process timing), so that every RDMA figure
 *        has a ratio against what the host's TCP does on the same path at the same moment.
 *
 * Bandwidth is one stream per QP of the test writing messages of the test's size from client to server (several
 * streams written round-robin without blocking, as the RDMA side spreads its work over its QPs), timed until the
 * server has read every byte and acknowledged it. Latency is a ping-pong of the message size (Send and Write, reported as
 * half a round trip), or for Read an 8-byte request answered by a message of the size (a full round trip, as a
 * Read is). Every connection starts with a 32-byte header saying which; TCP_NODELAY on both ends.
 */
#ifndef IT_PERF_TCP_BASELINE_HPP
#define IT_PERF_TCP_BASELINE_HPP

#include <atomic>
#include <cstdint>
#include <string>

#include "rnicpi/cpp/status.hpp"
#include "stats.hpp"
#include "test_case.hpp"

namespace it_perf {

/** @brief What a baseline connection does after its header. */
enum class TcpShape : uint16_t { stream = 1, pingpong = 2, request_response = 3, bye = 4, setup = 5 };

/** @brief The header that opens every baseline connection. */
struct TcpHeader {
    TcpShape shape = TcpShape::stream;
    uint64_t size = 0; /**< Message size. */
    /**
     * Streams of one bandwidth test (its QPs): the server takes this many connections, each with this header, and
     * reads them all at once; for a setup batch, the connections in flight; 1 for every other shape.
     */
    uint16_t streams = 1;

    static constexpr uint32_t kMagic = 0x49545054; /**< "ITPT" */
    static constexpr uint16_t kVersion = 2;
    /** @brief Most streams of one test (it_perf's limit on QPs). */
    static constexpr uint16_t kMaxStreams = 1024;
    static constexpr size_t kWireSize = 32;

    /** @brief Encodes into @p out (kWireSize bytes, network byte order). */
    void write(uint8_t *out) const;
    /** @brief Decodes @p in; an error for a wrong magic, version, shape or a size above @p max_size. */
    static rdma::Expected<TcpHeader> read(const uint8_t *in, uint64_t max_size);
};

/** @brief The baseline shape that matches a test: a stream for bandwidth, else ping-pong or request/response. */
TcpShape tcp_shape_for(const TestCase &test);

/** @brief The server end of the baseline: one connection at a time, until a client says bye. */
class TcpServer {
public:
    /**
     * @brief Listens on @p address (dotted IPv4; empty: every address) and @p port (0: one the host picks).
     */
    static rdma::Expected<TcpServer> listen(const std::string &address, uint16_t port);
    TcpServer(TcpServer &&other) noexcept;
    TcpServer &operator=(TcpServer &&other) = delete;
    TcpServer(const TcpServer &) = delete;
    ~TcpServer();

    /** @brief The port listened on. */
    [[nodiscard]] uint16_t port() const { return port_; }

    /**
     * @brief Serves tests one at a time (a bandwidth test of several streams takes all its connections at once)
     *        until a bye header arrives or @p stop is set (checked every 200 ms). A connection that fails is
     *        reported on standard error and closed; serving goes on.
     */
    void serve(const std::atomic<bool> &stop);

private:
    explicit TcpServer(int fd, uint16_t port) : fd_(fd), port_(port) {}
    int fd_ = -1;
    uint16_t port_ = 0;
};

/**
 * @brief Runs the baseline of @p test against the server at @p host : @p port and returns what it measured.
 *        Bandwidth: bytes, seconds, messages. Latency: the distribution over the timed iterations (16 untimed
 *        iterations first).
 */
rdma::Expected<Measurement> run_tcp_test(const std::string &host, uint16_t port, const TestCase &test);

/** @brief Tells the server at @p host : @p port to stop serving. */
/**
 * @brief The setup-rate baseline: @p count connections to the server, @p in_flight at once. Each connects, sends its
 *        header (as an MPA Request carries private data) and waits for the server's one-byte answer, written after
 *        accept (as the MPA Reply follows the passive side's accept); the clock runs from a batch's first connect
 *        until every connection of it has its answer; closing is not timed. Connections per second.
 */
rdma::Expected<double> run_tcp_setup(const std::string &host, uint16_t port, uint32_t in_flight, uint64_t count);

rdma::Expected<void> send_tcp_bye(const std::string &host, uint16_t port);

}  // namespace it_perf

#endif  // IT_PERF_TCP_BASELINE_HPP
