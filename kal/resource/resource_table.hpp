/**
 * @file resource_table.hpp
 * @brief Resource management (the Privileged Resource Manager): one handle table per device connection, with the
 *        ownership tree and the references between objects that decide what may be destroyed and in which order.
 *
 * A handle is a slot index and a generation, so a handle from another table, a stale one (its object destroyed,
 * its slot reused) or a made-up one never reaches an object it does not name. Every object has a parent (RNIC
 * open -> PD -> QP...), and may hold references to siblings (a QP to its CQs and SRQ, a window to its region).
 * Destroying an object with children or referrers is refused with ::RI_EBUSY, as the verbs require; tearing a
 * subtree down (a process died) destroys in dependency order instead. Quotas bound every table, so nothing a
 * client sends makes the kAL allocate without bound.
 */
#ifndef KAL_RESOURCE_RESOURCE_TABLE_HPP
#define KAL_RESOURCE_RESOURCE_TABLE_HPP

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rnicpi/cpp/status.hpp"

namespace kal {

/** @brief Kinds of objects the kAL tracks, in the order a teardown destroys them. */
enum class ResourceType : uint8_t {
    endpoint,  /**< A connection endpoint (LLP socket and its state). */
    listener,  /**< A listen point. */
    mw,        /**< A memory window. */
    qp,        /**< A queue pair. */
    srq,       /**< A shared receive queue. */
    mr,        /**< A memory region or allocated STag. */
    cq,        /**< A completion queue. */
    pd,        /**< A protection domain. */
    rnic,      /**< An RNIC open. */
};
/** @brief Number of resource types. */
inline constexpr size_t kResourceTypes = 9;

/** @brief The lower-case name of a type ("qp"). */
[[nodiscard]] std::string_view resource_name(ResourceType t) noexcept;

/** @brief A generic kAL handle: generation (high 32 bits) and slot (low 32 bits); 0 is never valid. */
using Handle = uint64_t;

/** @brief An object the table owns; its destructor releases the provider object (and its pins). */
class Resource {
public:
    virtual ~Resource() = default;
};

/** @brief Limits of a table or an ObjectBudget. */
struct Quotas {
    std::array<uint32_t, kResourceTypes> per_type{};  /**< Most objects of each type (0 = use ::total). */
    uint32_t total = 4096;                              /**< Most objects of all types together. */
    bool operator==(const Quotas &) const = default;
};

/**
 * @brief Objects counted across tables: one process's (every device connection of it) or one user's (every
 *        process of the uid), each charging its parent too, as the memory accounts do. Thread-safe.
 */
class ObjectBudget {
public:
    /**
     * @brief A budget of @p limits named @p name in refusals ("process 1234", "uid 1000"), within @p parent (null:
     *        none); @p refused (optional, outliving the budget) counts the refusals this budget makes.
     */
    ObjectBudget(const Quotas &limits, std::shared_ptr<ObjectBudget> parent, std::string name,
                 std::atomic<uint64_t> *refused = nullptr);
    ObjectBudget(const ObjectBudget &) = delete;
    ObjectBudget &operator=(const ObjectBudget &) = delete;
    ~ObjectBudget();
    /** @brief Counts one more object of @p type here and in every parent; ::RI_ENOSPC, naming who refused, over a limit. */
    [[nodiscard]] rdma::Expected<void> take(ResourceType type);
    /** @brief Gives back one object of @p type taken with take(). */
    void give(ResourceType type) noexcept;
    /** @brief Live objects of all types counted here. */
    [[nodiscard]] uint32_t total() const;
    /** @brief The limits. */
    [[nodiscard]] const Quotas &limits() const noexcept { return limits_; }

private:
    rdma::Expected<void> take_here(ResourceType type);
    void give_here(ResourceType type) noexcept;

    const Quotas limits_;
    const std::shared_ptr<ObjectBudget> parent_;
    const std::string name_;
    std::atomic<uint64_t> *refused_;
    mutable std::mutex mutex_;
    std::array<uint32_t, kResourceTypes> counts_{};
    uint32_t live_ = 0;
};

/** @brief One connection's handle table and ownership tree. */
class ResourceTable {
public:
    /**
     * @brief An empty table with @p quotas of its own; with @p shared (the process's budget), the shared budget
     *        limits instead, so a process gets its quotas once whatever number of device connections it opens.
     */
    explicit ResourceTable(const Quotas &quotas, std::shared_ptr<ObjectBudget> shared = nullptr);
    ResourceTable(const ResourceTable &) = delete;
    ResourceTable &operator=(const ResourceTable &) = delete;
    /** @brief Tears everything down in dependency order. */
    ~ResourceTable();

    /**
     * @brief Adds @p object of type @p type under @p parent (0 for a root such as an RNIC open) holding references
     *        to @p refs (which must exist and stay until the object goes). ::RI_ENOSPC over a quota.
     */
    [[nodiscard]] rdma::Expected<Handle> add(ResourceType type, Handle parent, std::span<const Handle> refs,
                                             std::unique_ptr<Resource> object);
    /**
     * @brief The object @p handle names if it is of type @p type: ::RI_EBADF for a handle this table never issued
     *        or whose object is gone, ::RI_EINVAL for one of another type.
     */
    [[nodiscard]] rdma::Expected<Resource *> get(Handle handle, ResourceType type) const;
    /** @brief The parent of @p handle (0 for a root). */
    [[nodiscard]] Handle parent(Handle handle) const noexcept;
    /** @brief Destroys @p handle; ::RI_EBUSY while it has children or is referenced. */
    [[nodiscard]] rdma::Expected<void> destroy(Handle handle);
    /** @brief Destroys @p handle and everything below it, in dependency order (for teardown). */
    void destroy_tree(Handle handle);
    /** @brief Destroys everything, in dependency order. */
    void clear();

    /** @brief Live objects of type @p type. */
    [[nodiscard]] uint32_t count(ResourceType type) const noexcept { return counts_[static_cast<size_t>(type)]; }
    /** @brief Live objects of all types. */
    [[nodiscard]] uint32_t total() const noexcept { return live_; }

private:
    struct Slot {
        uint32_t generation = 1;
        bool used = false;
        ResourceType type = ResourceType::rnic;
        uint32_t parent = UINT32_MAX;      // slot index, UINT32_MAX for a root
        uint32_t children = 0;
        uint32_t referrers = 0;
        std::vector<uint32_t> refs;        // slots this one references (bounded by the caller: a few per object)
        std::unique_ptr<Resource> object;
    };
    [[nodiscard]] const Slot *lookup(Handle h) const noexcept;
    void release(uint32_t index);
    // Destroys, in dependency order, every live object for which `in_scope(index)` holds.
    template <class Pred>
    void teardown(Pred in_scope);

    std::shared_ptr<ObjectBudget> budget_;  // the process's, or this table's own
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_;
    std::array<uint32_t, kResourceTypes> counts_{};
    uint32_t live_ = 0;
};

}  // namespace kal

#endif  // KAL_RESOURCE_RESOURCE_TABLE_HPP
