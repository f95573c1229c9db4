/**
 * @file handles.hpp
 * @brief IT-API handles: opaque values that name objects through a table, so that every call can check a handle
 *        (stale, of the wrong type, or garbage) without dereferencing it.
 *
 * A handle is (slot + 1) << 32 | generation << 8 | type. Looking one up reads two atomics of its slot - no lock, no
 * system call - so the fast paths (post, dequeue) pay a few loads for the check. Slots live in chunks allocated
 * on first use and never freed while the library is loaded, so a lookup never touches freed memory.
 */
#ifndef ITAPI_HANDLES_HPP
#define ITAPI_HANDLES_HPP

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <it_api.h>

namespace itapi {

/** @brief The base of every object a handle names. */
struct Object {
    /** @brief An object of @p t. */
    explicit Object(it_handle_type_enum_t t) noexcept : type(t) {}
    Object(const Object &) = delete;
    Object &operator=(const Object &) = delete;
    virtual ~Object() = default;
    const it_handle_type_enum_t type; /**< What the handle names. */
    uint64_t handle = 0;              /**< Its handle value (0 until registered). */
    it_context_t context{};           /**< it_set_consumer_context / it_get_consumer_context. */
};

/** @brief The process's handle table. Thread-safe; lookups take no lock. */
class HandleTable {
public:
    /** @brief The table. */
    static HandleTable &instance() noexcept;
    /** @brief Gives @p o a handle (sets Object::handle); 0 when the table is full. */
    uint64_t insert(Object *o);
    /** @brief Retires @p o's handle: later lookups of it fail. */
    void erase(const Object *o);
    /** @brief The object named by @p h, of any type; null for a stale or invalid value. */
    [[nodiscard]] Object *find(uint64_t h) const noexcept;
    /** @brief The type encoded in @p h (unchecked). */
    static constexpr uint32_t type_of(uint64_t h) noexcept { return static_cast<uint32_t>(h & 0xffu); }

private:
    static constexpr size_t kChunk = 4096;
    static constexpr size_t kChunks = 1024;  // 4 Mi objects at most
    struct Slot {
        std::atomic<uint32_t> tag{0};  // generation << 8 | type of the live object; 0 when free
        std::atomic<Object *> obj{nullptr};
        uint32_t generation = 0;  // under mutex_
    };
    std::array<std::atomic<Slot *>, kChunks> chunks_{};
    std::mutex mutex_;
    std::vector<uint32_t> free_;
    uint32_t used_ = 0;  // slots handed out so far (the next fresh slot)
};

/** @brief The object of type @p T named by @p h, or null (wrong type, stale, garbage). */
template <class T>
T *lookup(const void *h) noexcept {
    const auto v = reinterpret_cast<uint64_t>(h);
    if (HandleTable::type_of(v) != static_cast<uint32_t>(T::kType)) return nullptr;
    return static_cast<T *>(HandleTable::instance().find(v));
}

/** @brief A handle value as the API's pointer type. */
template <class H>
H to_handle(const Object *o) noexcept {
    return o == nullptr ? nullptr : reinterpret_cast<H>(o->handle);
}

}  // namespace itapi

#endif  // ITAPI_HANDLES_HPP
