// The handle table (see handles.hpp).
#include "handles.hpp"

namespace itapi {

HandleTable &HandleTable::instance() noexcept {
    // Never destroyed: a consumer thread may look a handle up while the process exits.
    static auto *table = new HandleTable();
    return *table;
}

uint64_t HandleTable::insert(Object *o) {
    std::lock_guard lock(mutex_);
    uint32_t index;
    if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
    } else {
        if (used_ == kChunk * kChunks) return 0;
        index = used_++;
        auto &chunk = chunks_[index / kChunk];
        if (chunk.load(std::memory_order_relaxed) == nullptr) {
            chunk.store(new Slot[kChunk], std::memory_order_release);  // kept for the life of the process
        }
    }
    Slot &s = chunks_[index / kChunk].load(std::memory_order_relaxed)[index % kChunk];
    s.generation = (s.generation + 1) & 0xffffffu;
    if (s.generation == 0) s.generation = 1;
    const uint32_t tag = s.generation << 8 | (static_cast<uint32_t>(o->type) & 0xffu);
    s.obj.store(o, std::memory_order_relaxed);
    s.tag.store(tag, std::memory_order_release);
    o->handle = (static_cast<uint64_t>(index) + 1) << 32 | tag;
    return o->handle;
}

void HandleTable::erase(const Object *o) {
    if (o->handle == 0) return;
    const uint64_t index = (o->handle >> 32) - 1;
    std::lock_guard lock(mutex_);
    Slot &s = chunks_[index / kChunk].load(std::memory_order_relaxed)[index % kChunk];
    s.tag.store(0, std::memory_order_release);
    s.obj.store(nullptr, std::memory_order_release);
    free_.push_back(static_cast<uint32_t>(index));
}

Object *HandleTable::find(uint64_t h) const noexcept {
    const uint64_t hi = h >> 32;
    if (hi == 0 || hi > kChunk * kChunks) return nullptr;
    const uint64_t index = hi - 1;
    const Slot *chunk = chunks_[index / kChunk].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    const Slot &s = chunk[index % kChunk];
    const uint32_t tag = static_cast<uint32_t>(h);
    if (tag == 0 || s.tag.load(std::memory_order_acquire) != tag) return nullptr;
    return s.obj.load(std::memory_order_acquire);
}

}  // namespace itapi
