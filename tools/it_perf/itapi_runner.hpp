/**
 * @file itapi_runner.hpp
 * @brief it_perf's RDMA side over IT-API v2.1: the server (a listen point, one client session at a time) and the
 *        client (connects a control endpoint and N data endpoints, then runs tests on them).
 *
 * Session. The client connects a control endpoint first, its private data saying how many data endpoints follow
 * and the largest message; the server registers a buffer of that size per data endpoint and accepts each data
 * endpoint with that buffer's address, STag (RMR context) and length as private data. Tests are then driven by
 * small Sends on the control endpoint: the client asks (operation, shape, size), the server readies itself and
 * answers, the client times the test on the data endpoints, and tells the server it is over. Data endpoints keep
 * their receive queues full at all times; Send bandwidth is flow-controlled by credits the server returns (an iWARP
 * Send that finds no receive posted breaks the connection). The fast path allocates nothing and makes no call but
 * IT-API's own: work requests are built in place from preallocated state, completions are reaped with
 * it_evd_dequeue in a poll loop (or it_evd_wait with --event).
 *
 * The IT-API header stays out of this interface: main and the rest of it_perf do not depend on it.
 */
#ifndef IT_PERF_ITAPI_RUNNER_HPP
#define IT_PERF_ITAPI_RUNNER_HPP

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process_counters.hpp"
#include "rnicpi/cpp/status.hpp"
#include "stats.hpp"
#include "test_case.hpp"

namespace it_perf {

/** @brief The IT-API interfaces it_interface_list() reports, by name. */
std::vector<std::string> itapi_interfaces();

/** @brief How the client sets up its session. */
struct ItapiClientConfig {
    std::string ia;          /**< Interface name or address for it_ia_create; empty: the first listed. */
    uint32_t qps = 1;        /**< Data endpoints. */
    uint32_t window = 64;    /**< Outstanding operations per data endpoint (bandwidth tests). */
    uint64_t max_size = 0;   /**< The largest message any test will use. */
    bool event_mode = false; /**< Wait for completions with it_evd_wait instead of polling. */
};

/** @brief The server: a listen point on an interface. */
class ItapiServer {
public:
    /**
     * @brief Opens interface @p ia (empty: the first listed) and listens on @p port (0: a free port, chosen by
     *        the library or, if it cannot, tried at random).
     */
    static rdma::Expected<std::unique_ptr<ItapiServer>> open(const std::string &ia, uint16_t port, bool event_mode);
    ~ItapiServer();
    ItapiServer(const ItapiServer &) = delete;
    ItapiServer &operator=(const ItapiServer &) = delete;

    /** @brief The port (connection qualifier) listened on. */
    [[nodiscard]] uint16_t port() const;
    /** @brief The interface's name. */
    [[nodiscard]] std::string ia_name() const;
    /** @brief The path the data endpoints' bytes take: "same-host", "wire" (openrdma_it_ep_path), or "" before any. */
    [[nodiscard]] std::string path() const;

    /**
     * @brief Serves client sessions one after another until @p stop is set. A session that fails is reported on
     *        standard error and torn down; serving goes on. Returns an error only when the server itself fails.
     */
    rdma::Expected<void> serve(const std::atomic<bool> &stop);

    struct Impl;

private:
    explicit ItapiServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

/** @brief What the processes of a setup test did: the change of their counters (process_counters.hpp). */
struct ProcessCosts {
    std::optional<uint64_t> syscalls; /**< System calls; nullopt when they cannot be counted. */
    uint64_t switches = 0;            /**< Context switches. */
};

/**
 * @brief Where the setup test's time and work went, summed over its connections: each step a connection passes on
 *        the client, and the work of each process counted (the client, its server, krdmad).
 */
struct SetupSteps {
    uint64_t connections = 0; /**< Connections made. */
    double create = 0;        /**< Seconds in it_ep_rc_create (before the clock starts). */
    double connect = 0;       /**< Seconds in it_ep_connect (the call, not the connection). */
    double established = 0;   /**< Sum over connections of it_ep_connect to IT_CM_MSG_CONN_ESTABLISHED_EVENT. */
    double disconnect = 0;    /**< Seconds from a batch's first it_ep_disconnect to its last disconnect event. */
    double destroy = 0;       /**< Seconds in it_ep_free. */
    double timed = 0;         /**< The clock's seconds: each batch's first it_ep_connect to its last establishment. */
    /** @brief Per process counted, in the order given: its work while the clock ran (connect to established). */
    std::vector<ProcessCosts> setup;
    /** @brief Per process counted: its work over the connections' whole lives (create to destroy). */
    std::vector<ProcessCosts> life;
};

/**
 * @brief The setup-rate test: connects @p count endpoints to the server at @p host : @p port (outside any session),
 *        @p in_flight at once. The clock runs from the first it_ep_connect of a batch until every endpoint of it is
 *        established (connect, MPA and the RDMA-mode transition at both ends, the server's accept included); the
 *        batch's teardown is not timed. Connections per second. With @p steps, also where the time went and what
 *        each process of @p counted did (see SetupSteps).
 */
rdma::Expected<double> run_itapi_setup(const std::string &ia, const std::string &host, uint16_t port,
                                       uint32_t in_flight, uint64_t count, SetupSteps *steps = nullptr,
                                       const std::vector<const ProcessCounters *> &counted = {});

/** @brief The client: one session with a server. */

class ItapiClient {
public:
    /** @brief Opens the interface, connects the control and data endpoints to @p host : @p port. */
    static rdma::Expected<std::unique_ptr<ItapiClient>> connect(const ItapiClientConfig &config, const std::string &host,
                                                                 uint16_t port);
    ~ItapiClient();
    ItapiClient(const ItapiClient &) = delete;
    ItapiClient &operator=(const ItapiClient &) = delete;

    /** @brief The interface's name. */
    [[nodiscard]] std::string ia_name() const;
    /** @brief The path the data endpoints' bytes take: "same-host", "wire" (openrdma_it_ep_path), or "" before any. */
    [[nodiscard]] std::string path() const;

    /**
     * @brief Runs @p test (its qps and window must be the session's) and returns what it measured; an error that
     *        says the RNIC went offline (krdmad stopped or died) when that cut the run short.
     */
    rdma::Expected<Measurement> run(const TestCase &test);

    /** @brief Tells the server the session is over and disconnects every endpoint. */
    rdma::Expected<void> close();

    struct Impl;

private:
    rdma::Expected<Measurement> run_test(const TestCase &test);
    explicit ItapiClient(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace it_perf

#endif  // IT_PERF_ITAPI_RUNNER_HPP
