// Memory accounting per process and per user.
#include "accounts.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>

namespace kal {

Accounts::Accounts(PinBudget &host, uint64_t per_process, uint64_t per_user)
    : host_(host), per_process_(per_process), per_user_(per_user) {}

Accounts::Accounts(PinBudget &host, uint64_t per_process, uint64_t per_user, const Quotas &objects,
                   uint32_t objects_per_user)
    : host_(host), per_process_(per_process), per_user_(per_user), objects_(objects),
      objects_per_user_(objects_per_user) {}

uint64_t Accounts::per_user(uid_t uid) const noexcept {
    return uid == 0 || per_user_ == 0 ? host_.limit() : per_user_;
}

ProcessAccount::~ProcessAccount() {
    if (pidfd_ >= 0) ::close(pidfd_);
}

int ProcessAccount::pidfd() {
#ifdef SYS_pidfd_open
    std::call_once(pidfd_once_, [this] {
        if (pid_ > 0) pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    });
#endif
    return pidfd_;
}

std::shared_ptr<ProcessAccount> Accounts::process(pid_t pid, uint64_t start_time, uid_t uid) {
    std::lock_guard lock(mutex_);
    // Forget what has gone (accounts are made once per connection, so this stays cheap).
    std::erase_if(processes_, [](const auto &p) { return p.second.expired(); });
    std::erase_if(users_, [](const auto &u) { return u.second.expired(); });
    std::erase_if(user_objects_, [](const auto &u) { return u.second.expired(); });
    auto &slot = processes_[{pid, start_time}];
    if (auto live = slot.lock()) return live;
    std::shared_ptr<PinBudget> user = users_[uid].lock();
    if (!user) {
        user = std::make_shared<PinBudget>(per_user(uid), &host_, "uid " + std::to_string(uid));
        users_[uid] = user;
    }
    std::shared_ptr<ObjectBudget> objects;
    if (objects_) {
        // Every user has one, to count; root's and, with objects_per_user 0, everyone's limits nothing.
        std::shared_ptr<ObjectBudget> of_user = user_objects_[uid].lock();
        if (!of_user) {
            Quotas q;
            q.total = uid == 0 || objects_per_user_ == 0 ? UINT32_MAX : objects_per_user_;
            of_user = std::make_shared<ObjectBudget>(q, nullptr, "uid " + std::to_string(uid) + " (limits.objects_per_user)",
                                                     &refusals_.objects_user);
            user_objects_[uid] = of_user;
        }
        objects = std::make_shared<ObjectBudget>(*objects_, std::move(of_user),
                                                 "process " + std::to_string(pid) + " (limits.objects_per_process)",
                                                 &refusals_.objects_process);
    }
    auto account = std::make_shared<ProcessAccount>(std::move(user), per_process_, pid, std::move(objects));
    slot = account;
    return account;
}

uint32_t Accounts::objects_of(uid_t uid) const {
    std::lock_guard lock(mutex_);
    if (auto it = user_objects_.find(uid); it != user_objects_.end()) {
        if (auto user = it->second.lock()) return user->total();
    }
    return 0;
}

uint64_t Accounts::used_by(uid_t uid) const {
    std::lock_guard lock(mutex_);
    auto it = users_.find(uid);
    if (it == users_.end()) return 0;
    auto user = it->second.lock();
    return user ? user->used() : 0;
}

namespace {

// process_madvise(MADV_WILLNEED) over the whole range: the kernel walks the process's mappings and answers ENOMEM
// when the range has a hole, without faulting a page in or pinning one (anonymous memory: a swap-in walk that finds
// nothing to do; files: read-ahead of pages about to be pinned anyway). std::nullopt when the kernel cannot answer
// (older than 5.10, no CAP_SYS_NICE, a seccomp filter): the caller then reads the pages.
std::optional<bool> mapped_by_madvise(int pidfd, uint64_t addr, uint64_t length) {
#ifdef SYS_process_madvise
    iovec range{reinterpret_cast<void *>(static_cast<uintptr_t>(addr)), static_cast<size_t>(length)};
    const long r = ::syscall(SYS_process_madvise, pidfd, &range, 1, MADV_WILLNEED, 0);
    if (r == static_cast<long>(length)) return true;
    if (r < 0 && errno == ENOMEM) return false;
#else
    (void)pidfd, (void)addr, (void)length;
#endif
    return std::nullopt;
}

}  // namespace

rdma::Expected<void> check_mapped(int pidfd, pid_t pid, uint64_t addr, uint64_t length) {
    if (length == 0 || addr + length < addr) return rdma::Error(RI_EINVAL, "empty or wrapping memory range");
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    // A hole madvise found is looked for page by page below, to name it.
    if (pidfd >= 0 && length <= SSIZE_MAX) {
        if (auto whole = mapped_by_madvise(pidfd, addr, length); whole && *whole) return {};
    }
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
