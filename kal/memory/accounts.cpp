// Memory accounting per process and per user.
#include "accounts.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <string>

namespace kal {

Accounts::Accounts(PinBudget &host, uint64_t per_process, uint64_t per_user)
    : host_(host), per_process_(per_process), per_user_(per_user) {}

uint64_t Accounts::per_user(uid_t uid) const noexcept {
    return uid == 0 || per_user_ == 0 ? host_.limit() : per_user_;
}

std::shared_ptr<ProcessAccount> Accounts::process(pid_t pid, uint64_t start_time, uid_t uid) {
    std::lock_guard lock(mutex_);
    // Forget what has gone (accounts are made once per connection, so this stays cheap).
    std::erase_if(processes_, [](const auto &p) { return p.second.expired(); });
    std::erase_if(users_, [](const auto &u) { return u.second.expired(); });
    auto &slot = processes_[{pid, start_time}];
    if (auto live = slot.lock()) return live;
    std::shared_ptr<PinBudget> user = users_[uid].lock();
    if (!user) {
        user = std::make_shared<PinBudget>(per_user(uid), &host_, "uid " + std::to_string(uid));
        users_[uid] = user;
    }
    auto account = std::make_shared<ProcessAccount>(std::move(user), per_process_);
    slot = account;
    return account;
}

uint64_t Accounts::used_by(uid_t uid) const {
    std::lock_guard lock(mutex_);
    auto it = users_.find(uid);
    if (it == users_.end()) return 0;
    auto user = it->second.lock();
    return user ? user->used() : 0;
}

rdma::Expected<void> check_mapped(pid_t pid, uint64_t addr, uint64_t length) {
    if (length == 0 || addr + length < addr) return rdma::Error(RI_EINVAL, "empty or wrapping memory range");
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t first = addr & ~(page - 1);
    const uint64_t end = addr + length;
    // One byte of every page, a batch of pages per call (IOV_MAX is 1024).
    constexpr size_t kBatch = 1024;
    std::array<uint8_t, kBatch> sink{};
    std::array<iovec, kBatch> remote{};
    iovec local{sink.data(), sink.size()};
    for (uint64_t at = first; at < end;) {
        size_t n = 0;
        for (uint64_t p = at; p < end && n < kBatch; p += page, ++n) {
            remote[n] = iovec{reinterpret_cast<void *>(static_cast<uintptr_t>(std::max(p, addr))), 1};
        }
        local.iov_len = n;
        const ssize_t got = ::process_vm_readv(pid, &local, 1, remote.data(), n, 0);
        if (got < 0 && (errno == EPERM || errno == ENOSYS)) return {};  // not ours to read: the owner's mlock checks
        if (got < 0 && errno == ESRCH) return rdma::Error(RI_EFAULT, "the process has gone");
        if (got < 0 || static_cast<size_t>(got) < n) {
            const size_t bad = got < 0 ? 0 : static_cast<size_t>(got);
            char where[64];
            std::snprintf(where, sizeof where, "%#llx",
                          static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(remote[bad].iov_base)));
            return rdma::Error(RI_EFAULT, std::string("the range is not mapped (readable) in the process at ") + where +
                                              ": only memory the process has mapped can be registered");
        }
        at += n * page;
    }
    return {};
}

}  // namespace kal
