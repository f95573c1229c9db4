/**
 * @file accounts.hpp
 * @brief Memory accounting per process and per user: who may pin (or have the RNIC hold) how much.
 *
 * One account per consumer process, whatever number of device connections it opens: its pins and the queue memory
 * kVPs hold for it share one PinMap (so one page registered over two connections is pinned once and unlocked last),
 * limited by the per-process limit (krdmad.json limits.pin_bytes_per_process) and, unless the process holds
 * CAP_IPC_LOCK, by its own RLIMIT_MEMLOCK, as Linux's ib_umem limits a process's pinned pages. Every account of one
 * uid charges that user's budget (limits.pin_bytes_per_user; root's is the host's), and every user budget the host's
 * (limits.pin_bytes_total): one user can exhaust neither the host nor another user.
 */
#ifndef KAL_MEMORY_ACCOUNTS_HPP
#define KAL_MEMORY_ACCOUNTS_HPP

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "pin_map.hpp"
#include "resource_table.hpp"

namespace kal {

/** @brief One process's account: its pins and charges, within its user's budget. */
struct ProcessAccount {
    /**
     * @brief An account charging @p budget (its user's), limited to @p limit bytes, of process @p pid, whose objects
     *        @p object_budget counts (null: each connection's table limits itself).
     */
    ProcessAccount(std::shared_ptr<PinBudget> budget, uint64_t limit, pid_t pid = 0,
                   std::shared_ptr<ObjectBudget> object_budget = nullptr)
        : user(std::move(budget)), pins(*user, limit), objects(std::move(object_budget)), pid_(pid) {}
    ~ProcessAccount();
    ProcessAccount(const ProcessAccount &) = delete;
    ProcessAccount &operator=(const ProcessAccount &) = delete;
    /**
     * @brief A pidfd of the process, for check_mapped(): opened at the first call, while a connection of the process
     *        is live (a process that never pins holds none); -1 when none could be had.
     */
    [[nodiscard]] int pidfd();
    std::shared_ptr<PinBudget> user;  /**< The budget of the process's uid (kept alive by its accounts). */
    PinMap pins;                      /**< What the process has pinned and charged. */
    /** The process's objects over all its device connections (null: each connection's table limits itself). */
    std::shared_ptr<ObjectBudget> objects;
    /** When the limit was last taken from the process's rights (never: the epoch). */
    std::chrono::steady_clock::time_point rights_read{};

private:
    pid_t pid_;
    std::once_flag pidfd_once_;
    int pidfd_ = -1;
};

/** @brief Refusals counted for `rdmactl limits` (any thread). */
struct LimitRefusals {
    std::atomic<uint64_t> pin_process{0};      /**< Over a process's limit (RLIMIT_MEMLOCK or the per-process one). */
    std::atomic<uint64_t> pin_user{0};         /**< Over a user's budget. */
    std::atomic<uint64_t> pin_host{0};         /**< Over the host's budget. */
    std::atomic<uint64_t> pin_unmapped{0};     /**< Ranges the process has not mapped. */
    std::atomic<uint64_t> privileged_port{0};  /**< Listens on a privileged port without CAP_NET_BIND_SERVICE. */
    std::atomic<uint64_t> objects_process{0};  /**< Objects over a process's quotas (limits.objects_per_process). */
    std::atomic<uint64_t> objects_user{0};     /**< Objects over a user's (limits.objects_per_user). */
};

/** @brief The accounts of every process and user. Thread-safe. */
class Accounts {
public:
    /**
     * @brief Accounts charging @p host, each process limited to @p per_process bytes, each non-root user to
     *        @p per_user bytes (0: the host's limit).
     */
    Accounts(PinBudget &host, uint64_t per_process, uint64_t per_user);
    /**
     * @brief The same, with objects limited per process by @p objects (over all its device connections) and per
     *        non-root user by @p objects_per_user in all (0: no per-user limit).
     */
    Accounts(PinBudget &host, uint64_t per_process, uint64_t per_user, const Quotas &objects,
             uint32_t objects_per_user);
    Accounts(const Accounts &) = delete;
    Accounts &operator=(const Accounts &) = delete;

    /**
     * @brief The account of process @p pid (started at @p start_time) of user @p uid: the same one for every
     *        connection of that process while any holds it.
     */
    [[nodiscard]] std::shared_ptr<ProcessAccount> process(pid_t pid, uint64_t start_time, uid_t uid);
    /** @brief The per-process limit of the configuration. */
    [[nodiscard]] uint64_t per_process() const noexcept { return per_process_; }
    /** @brief The per-user limit of the configuration (the host's for root, and when 0). */
    [[nodiscard]] uint64_t per_user(uid_t uid) const noexcept;
    /** @brief The per-user limit of any non-root user. */
    [[nodiscard]] uint64_t per_user() const noexcept { return per_user(1); }
    /** @brief The host's budget. */
    [[nodiscard]] const PinBudget &host() const noexcept { return host_; }
    /** @brief Bytes pinned or charged by user @p uid now. */
    [[nodiscard]] uint64_t used_by(uid_t uid) const;
    /** @brief The objects limit of each process (its total; null when objects are limited per connection). */
    [[nodiscard]] const std::optional<Quotas> &object_quotas() const noexcept { return objects_; }
    /** @brief The objects limit of each non-root user (0: none). */
    [[nodiscard]] uint32_t objects_per_user() const noexcept { return objects_per_user_; }
    /** @brief Objects user @p uid holds now over all its processes. */
    [[nodiscard]] uint32_t objects_of(uid_t uid) const;
    /** @brief Refusal counters. */
    [[nodiscard]] LimitRefusals &refusals() noexcept { return refusals_; }

private:
    PinBudget &host_;
    uint64_t per_process_;
    uint64_t per_user_;
    mutable std::mutex mutex_;
    std::map<std::pair<pid_t, uint64_t>, std::weak_ptr<ProcessAccount>> processes_;
    std::map<uid_t, std::weak_ptr<PinBudget>> users_;
    std::optional<Quotas> objects_;
    uint32_t objects_per_user_ = 0;
    std::map<uid_t, std::weak_ptr<ObjectBudget>> user_objects_;
    LimitRefusals refusals_;
};

/**
 * @brief Whether every page of [@p addr, @p addr + @p length) is mapped in process @p pid, whose pidfd is @p pidfd
 *        (-1: none). With a pidfd, process_madvise(MADV_WILLNEED) over the range walks the process's mappings and
 *        faults nothing in (about 1.5 us up to 1 MiB); a range with a hole (to name the page), a kernel that cannot
 *        answer and a caller without a pidfd have one byte of each page read with process_vm_readv() instead (0.3 us
 *        a page), which also needs the page readable. RI_EFAULT names the first page that is not mapped; where the kAL
 *        may not read the process (no ptrace access), the range is accepted and the owner's own mlock() remains the
 *        check.
 */
[[nodiscard]] rdma::Expected<void> check_mapped(int pidfd, pid_t pid, uint64_t addr, uint64_t length);

}  // namespace kal

#endif  // KAL_MEMORY_ACCOUNTS_HPP
