// One QP's counter slot in a counters region shared between the kVP and the process that runs the QP's data path
// (softrnic_qp_counters in softrnic_abi.h): the data path writes it with relaxed stores under the QP's lock (one
// writer at a time, no read-modify-write atomics, no system call); the kVP reads it with relaxed loads.
#ifndef SOFTRNIC_DATAPATH_COUNTERS_HPP
#define SOFTRNIC_DATAPATH_COUNTERS_HPP

#include <atomic>
#include <cstdint>

#include "iwarp/engine.hpp"
#include "rnicpi/ri_verbs.h"
#include "softrnic_abi.h"

namespace softrnic::datapath {

/** @brief The writer's and the reader's view of one softrnic_qp_counters slot. */
class CounterSlot {
public:
    CounterSlot() = default;
    /** @brief The slot at @p slot (null: counting goes nowhere). */
    explicit CounterSlot(softrnic_qp_counters *slot) noexcept : slot_(slot) {}

    /** @brief True when the slot is backed by memory. */
    [[nodiscard]] explicit operator bool() const noexcept { return slot_ != nullptr; }
    /** @brief Publishes the engine's traffic counters, plus @p carried from earlier streams of the QP. */
    void publish(const iwarp::EngineStats &carried, const iwarp::EngineStats &now) noexcept {
        if (slot_ == nullptr) return;
        store(slot_->tx_bytes, carried.tx_bytes + now.tx_bytes);
        store(slot_->tx_fpdus, carried.tx_fpdus + now.tx_fpdus);
        store(slot_->rx_bytes, carried.rx_bytes + now.rx_bytes);
        store(slot_->rx_fpdus, carried.rx_fpdus + now.rx_fpdus);
    }
    /** @brief Counts one inbound FPDU with a bad CRC. */
    void crc_error() noexcept { bump(&softrnic_qp_counters::crc_errors); }
    /** @brief Counts one Terminate sent. */
    void terminate_sent() noexcept { bump(&softrnic_qp_counters::terminates_sent); }
    /** @brief Counts one Terminate received. */
    void terminate_received() noexcept { bump(&softrnic_qp_counters::terminates_received); }
    /** @brief Counts one nudge sent. */
    void nudge() noexcept { bump(&softrnic_qp_counters::nudges); }

    /** @brief The reader's snapshot (each counter read atomically; the set is not one snapshot). */
    [[nodiscard]] static ri_qp_stats_t read(const softrnic_qp_counters &s) noexcept {
        ri_qp_stats_t r{};
        r.tx_bytes = load(s.tx_bytes);
        r.tx_fpdus = load(s.tx_fpdus);
        r.rx_bytes = load(s.rx_bytes);
        r.rx_fpdus = load(s.rx_fpdus);
        r.crc_errors = load(s.crc_errors);
        r.terminates_sent = load(s.terminates_sent);
        r.terminates_received = load(s.terminates_received);
        r.nudges = load(s.nudges);
        return r;
    }

private:
    static void store(uint64_t &field, uint64_t v) noexcept {
        std::atomic_ref<uint64_t>(field).store(v, std::memory_order_relaxed);
    }
    static uint64_t load(const uint64_t &field) noexcept {
        return std::atomic_ref<uint64_t>(const_cast<uint64_t &>(field)).load(std::memory_order_relaxed);
    }
    void bump(uint64_t softrnic_qp_counters::*field) noexcept {
        if (slot_ == nullptr) return;
        uint64_t &f = slot_->*field;
        store(f, load(f) + 1);  // the only writer: no read-modify-write atomic needed
    }

    softrnic_qp_counters *slot_ = nullptr;
};

}  // namespace softrnic::datapath

#endif  // SOFTRNIC_DATAPATH_COUNTERS_HPP
