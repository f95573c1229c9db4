/**
 * @file harness.hpp
 * @brief The conformance suite's fixture and helpers. Every test gets a krdmad of its own, started from the
 *        runner's settings on a private device path in a private temporary directory, with one RNIC of the provider
 *        under test attached to the runner's address. Tests are consumers of that RNIC through the uAL, as an
 *        application is: they open it, make objects, and connect two of its QPs to each other over real TCP on the
 *        RNIC's own address. krdmad and every child process run in process groups of their own and are killed at
 *        teardown whatever happened (and with the runner, should it die).
 *
 * Nothing here names a provider: capabilities come from Query RNIC, and an operation a provider does not offer must
 * answer ::RI_EOPNOTSUPP, after which the test is skipped (see require_capability()).
 */
#ifndef TESTS_CONFORMANCE_HARNESS_HPP
#define TESTS_CONFORMANCE_HARNESS_HPP

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "krdma/abi.h"
#include "settings.hpp"
#include "ual/access_layer.hpp"
#include "status_matchers.hpp"

namespace conformance {

using namespace std::chrono_literals;

/** @brief Remote access rights of the regions the suite's ends register. */
inline constexpr uint32_t kAllAccess = RI_ACCESS_LOCAL_WRITE | RI_ACCESS_REMOTE_WRITE | RI_ACCESS_REMOTE_READ;

/** @brief Byte @p i of the test pattern with @p seed (differs between neighbouring bytes and between seeds). */
inline uint8_t pattern(size_t i, uint32_t seed) {
    return static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12) + (i >> 9)) & 0xff);
}

/** @brief @p text as bytes (private data). */
inline std::span<const uint8_t> bytes_of(const std::string &text) {
    return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

/** @brief @p v as text. */
inline std::string text(const std::vector<uint8_t> &v) { return std::string(v.begin(), v.end()); }

/** @brief A connection event's name, for messages. */
std::string cm_name(uint32_t id);

/** @brief One process's view of the RNIC under test: its access layer, an open of the RNIC, its dispatchers. */
struct Consumer {
    std::shared_ptr<ual::AccessLayer> al;
    std::shared_ptr<ual::Adapter> adapter;
    std::shared_ptr<ual::SimpleDispatcher> requests;      /**< Connection requests of listen points. */
    std::shared_ptr<ual::SimpleDispatcher> async;         /**< Affiliated asynchronous events (QPs, CQs). */
    std::shared_ptr<ual::SimpleDispatcher> unaffiliated;  /**< The RNIC's own asynchronous events. */
    ri_rnic_attr_t attr{};                                /**< Query RNIC, at open. */

    /** @brief Opens the device @p device and the RNIC @p rnic (name or address); empty string or the error. */
    std::string open(const std::filesystem::path &device, const std::string &rnic);
    /** @brief Whether Query RNIC advertised ::ri_rnic_cap @p cap. */
    [[nodiscard]] bool has(uint32_t cap) const { return (attr.caps & cap) != 0; }
    std::vector<ual::Event> events;                       /**< Asynchronous events taken from ::async so far. */
    /**
     * @brief Waits up to @p timeout for asynchronous event @p id of QP @p qp_num (events of other resources are
     *        kept in ::events for later looks); its detail in @p detail. True when it came.
     */
    bool await_event(uint32_t qp_num, uint32_t id, uint32_t *detail = nullptr, std::chrono::milliseconds timeout = 10s);
    /** @brief Whether event @p id of QP @p qp_num is among ::events already (its detail in @p detail). */
    bool seen(uint32_t qp_num, uint32_t id, uint32_t *detail = nullptr) const;
    /** @brief ::events as text, for messages. */
    std::string events_text() const;
    /** @brief Releases everything, children first. */
    void close();
};

/** @brief Options of an End's queue pair. */
struct EndOptions {
    uint32_t depth = 64;        /**< Send and receive queue depth. */
    uint32_t cq_depth = 512;    /**< Its completion queue's depth. */
    uint32_t max_inline = 0;    /**< Inline bytes. */
    size_t bytes = 1 << 16;     /**< The registered buffer. */
    uint64_t context = 0;       /**< ri_qp_init_attr_t::context. */
    bool srq = false;           /**< Receives come from a shared receive queue. */
    std::shared_ptr<ual::SharedReceiveQueue> shared_srq; /**< That SRQ, made by the test (of ::pz); else the end's own. */
    std::shared_ptr<ual::ProtectionZone> pz; /**< The end's protection zone when another end's is shared; else its own. */
    uint32_t access = kAllAccess; /**< Rights of the registered buffer (remote atomics only for tests that need them). */
};

/** @brief One end of a connection: a protection zone, a completion queue, an endpoint, a registered buffer. */
struct End {
    std::vector<uint8_t> buf;  // first: freed last, after the QP that may still place data into it
    std::shared_ptr<ual::ProtectionZone> pz;
    std::shared_ptr<ual::SimpleDispatcher> dto, cm;
    std::shared_ptr<ual::CompletionQueue> cq;
    std::shared_ptr<ual::SharedReceiveQueue> srq;
    std::shared_ptr<ual::Endpoint> ep;
    std::shared_ptr<ual::MemoryRegion> mr;

    End() = default;
    End(const End &) = delete;
    End &operator=(const End &) = delete;
    ~End() { close(); }

    /** @brief Makes the objects on @p c's adapter; empty string or what failed. */
    std::string make(Consumer &c, const EndOptions &o);
    /** @brief An SGE over [@p off, @p off + @p len) of the buffer. */
    [[nodiscard]] ri_sge_t sge(size_t off, uint32_t len) const {
        return ri_sge_t{reinterpret_cast<uint64_t>(buf.data() + off), len, mr->keys().lkey};
    }
    /** @brief The remote address of @p off in the buffer. */
    [[nodiscard]] uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(buf.data() + off); }
    /** @brief The buffer's STag for peers. */
    [[nodiscard]] ri_stag_t rkey() const { return mr->keys().rkey; }
    /** @brief Posts one receive with scatter list @p sgl (to the SRQ when there is one). */
    rdma::Status recv(uint64_t id, std::vector<ri_sge_t> sgl);
    /** @brief Posts one send-queue request. */
    rdma::Status send(uint64_t id, uint32_t opcode, std::vector<ri_sge_t> sgl, uint32_t flags = RI_SEND_SIGNALED,
                      uint64_t remote_addr = 0, ri_stag_t rkey = 0, ri_stag_t inv_stag = 0);
    /** @brief The next completion within @p timeout. */
    std::optional<ri_wc_t> completion(std::chrono::milliseconds timeout = 20s);
    /** @brief @p n completions (fewer when the deadline passed: the test then fails on the count). */
    std::vector<ri_wc_t> completions(size_t n, std::chrono::milliseconds timeout = 20s);
    /** @brief No completion within @p quiet. */
    bool idle(std::chrono::milliseconds quiet = 200ms);
    /** @brief The QP's state (-1 when Query QP fails). */
    int state() const;
    /** @brief The next connection event within @p timeout. */
    std::optional<ual::Event> cm_event(std::chrono::milliseconds timeout = 20s);
    /** @brief Releases everything, children first. */
    void close();
};

/** @brief Two ends of one RNIC connected to each other over TCP on the RNIC's address: a is active, b passive. */
struct Pair {
    End a, b;
    std::shared_ptr<ual::ListenPoint> listen;
    /**
     * @brief Makes both ends on @p c and connects them (@p before runs between making and connecting: post
     *        receives there). Empty string or what failed.
     */
    std::string connect(Consumer &c, const EndOptions &ao = {}, const EndOptions &bo = {},
                        const std::function<void(Pair &)> &before = nullptr);
    /** @brief Releases both ends. */
    void close() {
        listen.reset();
        a.close();
        b.close();
    }
};

/**
 * @brief The fixture of every conformance test: a private directory, krdmad started in it with the provider under
 *        test, and the processes it started killed at teardown.
 */
class Conformance : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /** @brief krdmad's device. */
    [[nodiscard]] const std::filesystem::path &device() const { return device_; }
    /** @brief Opens @p rnic (default: the RNIC under test by name) as ::consumer_. */
    void open_consumer(const std::string &rnic = kRnicName);
    /** @brief A new pair, owned by the fixture (closed at teardown before the consumer). */
    Pair &pair();
    /** @brief Connects @p p on ::consumer_ (opened on first use). */
    void connect(Pair &p, const EndOptions &ao = {}, const EndOptions &bo = {},
                 const std::function<void(Pair &)> &before = nullptr);
    /**
     * @brief Starts @p program with @p args in a process group of its own (stdout and stderr to @p out), killed at
     *        teardown at the latest; its pid.
     */
    pid_t spawn(const std::filesystem::path &program, const std::vector<std::string> &args,
                const std::filesystem::path &out);
    /** @brief Waits up to @p timeout for @p pid to end; its exit status, or -1 (killed, or still running). */
    int wait_exit(pid_t pid, std::chrono::milliseconds timeout = 10s);
    /** @brief The consumers krdmad holds contexts for (LIST_CLIENTS). */
    std::vector<krdma_client_info> clients();
    /** @brief krdmad's entry for the RNIC under test (LIST_RNICS). */
    std::optional<krdma_rnic_info> rnic_info();
    /** @brief A file's text. */
    static std::string read_text(const std::filesystem::path &file);

    std::filesystem::path dir_, device_;
    pid_t krdmad_ = 0;
    std::vector<pid_t> groups_;
    Consumer consumer_;
    std::vector<std::unique_ptr<Pair>> pairs_;  // closed before the consumer
};

/**
 * @brief For an optional capability: when @p advertised, returns true; when not, checks that @p attempt (the
 *        operation) answered ::RI_EOPNOTSUPP and returns false, and the caller skips the test, naming @p what.
 */
#define CONFORMANCE_REQUIRE(advertised, attempt_status, what)                                                        \
    do {                                                                                                             \
        if (!(advertised)) {                                                                                         \
            const int conformance_rc_ = (attempt_status);                                                            \
            ASSERT_STATUS(conformance_rc_, RI_EOPNOTSUPP)                                                            \
                << (what) << " is not advertised, so the provider must answer RI_EOPNOTSUPP (" << std::strerror(RI_EOPNOTSUPP) \
                << "), not " << conformance_rc_ << " (" << std::strerror(conformance_rc_) << ")";                    \
            GTEST_SKIP() << settings().provider << " does not offer " << (what) << " (answers RI_EOPNOTSUPP)";       \
        }                                                                                                            \
    } while (0)

}  // namespace conformance

#endif  // TESTS_CONFORMANCE_HARNESS_HPP
