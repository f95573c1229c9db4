// Resource management: handle tables, ownership tree, references, quotas, ordered teardown.
#include "resource_table.hpp"

#include <string>

namespace kal {
namespace {

constexpr uint32_t kNoParent = UINT32_MAX;

uint32_t slot_of(Handle h) noexcept { return static_cast<uint32_t>(h); }
uint32_t generation_of(Handle h) noexcept { return static_cast<uint32_t>(h >> 32); }
Handle make_handle(uint32_t generation, uint32_t slot) noexcept {
    return static_cast<Handle>(generation) << 32 | slot;
}

// The ownership tree the verbs define: RNIC open -> PD -> QP/SRQ/MR/MW; CQs under the RNIC open (or a PD);
// endpoints and listeners under an RNIC open (or, for a passive endpoint, its listener).
bool allowed_parent(ResourceType child, const ResourceType *parent) noexcept {
    switch (child) {
        case ResourceType::rnic: return parent == nullptr;
        case ResourceType::pd: return parent != nullptr && *parent == ResourceType::rnic;
        case ResourceType::cq:
            return parent != nullptr && (*parent == ResourceType::rnic || *parent == ResourceType::pd);
        case ResourceType::qp:
        case ResourceType::srq:
        case ResourceType::mr:
        case ResourceType::mw: return parent != nullptr && *parent == ResourceType::pd;
        case ResourceType::listener: return parent != nullptr && *parent == ResourceType::rnic;
        case ResourceType::endpoint:
            return parent != nullptr && (*parent == ResourceType::rnic || *parent == ResourceType::listener);
    }
    return false;
}

}  // namespace

std::string_view resource_name(ResourceType t) noexcept {
    switch (t) {
        case ResourceType::endpoint: return "endpoint";
        case ResourceType::listener: return "listener";
        case ResourceType::mw: return "mw";
        case ResourceType::qp: return "qp";
        case ResourceType::srq: return "srq";
        case ResourceType::mr: return "mr";
        case ResourceType::cq: return "cq";
        case ResourceType::pd: return "pd";
        case ResourceType::rnic: return "rnic";
    }
    return "?";
}

ObjectBudget::ObjectBudget(const Quotas &limits, std::shared_ptr<ObjectBudget> parent, std::string name,
                           std::atomic<uint64_t> *refused)
    : limits_(limits), parent_(std::move(parent)), name_(std::move(name)), refused_(refused) {}

ObjectBudget::~ObjectBudget() {
    // Whatever is still counted (a table outliving its budget cannot: it holds it) goes back to the parent.
    if (parent_ == nullptr) return;
    for (size_t t = 0; t < kResourceTypes; ++t) {
        for (uint32_t n = counts_[t]; n > 0; --n) parent_->give(static_cast<ResourceType>(t));
    }
}

rdma::Expected<void> ObjectBudget::take_here(ResourceType type) {
    const size_t t = static_cast<size_t>(type);
    std::lock_guard lock(mutex_);
    const uint32_t limit = limits_.per_type[t] != 0 ? limits_.per_type[t] : limits_.total;
    if (counts_[t] >= limit || live_ >= limits_.total) {
        if (refused_ != nullptr) refused_->fetch_add(1, std::memory_order_relaxed);
        return rdma::Error(RI_ENOSPC, "quota reached: " + name_ + " holds " + std::to_string(counts_[t]) + " " +
                                          std::string(resource_name(type)) + " objects, " + std::to_string(live_) +
                                          " in all; free some or raise the limit in the krdmad configuration");
    }
    ++counts_[t];
    ++live_;
    return {};
}

void ObjectBudget::give_here(ResourceType type) noexcept {
    const size_t t = static_cast<size_t>(type);
    std::lock_guard lock(mutex_);
    if (counts_[t] == 0) return;
    --counts_[t];
    --live_;
}

rdma::Expected<void> ObjectBudget::take(ResourceType type) {
    if (auto r = take_here(type); !r) return r;
    if (parent_ != nullptr) {
        if (auto r = parent_->take(type); !r) {
            give_here(type);
            return r;
        }
    }
    return {};
}

void ObjectBudget::give(ResourceType type) noexcept {
    give_here(type);
    if (parent_ != nullptr) parent_->give(type);
}

uint32_t ObjectBudget::total() const {
    std::lock_guard lock(mutex_);
    return live_;
}

ResourceTable::ResourceTable(const Quotas &quotas, std::shared_ptr<ObjectBudget> shared)
    : budget_(shared != nullptr ? std::move(shared) : std::make_shared<ObjectBudget>(quotas, nullptr, "this connection")) {}

ResourceTable::~ResourceTable() { clear(); }

const ResourceTable::Slot *ResourceTable::lookup(Handle h) const noexcept {
    uint32_t index = slot_of(h);
    if (h == 0 || index >= slots_.size()) return nullptr;
    const Slot &s = slots_[index];
    return s.used && s.generation == generation_of(h) ? &s : nullptr;
}

rdma::Expected<Handle> ResourceTable::add(ResourceType type, Handle parent, std::span<const Handle> refs,
                                          std::unique_ptr<Resource> object) {
    const size_t t = static_cast<size_t>(type);
    if (parent != 0 && lookup(parent) == nullptr) {
        return rdma::Error(RI_EBADF, "the parent object of a new " + std::string(resource_name(type)) +
                                         " is not a live object of this process");
    }
    const Slot *p = parent != 0 ? lookup(parent) : nullptr;
    if (!allowed_parent(type, p != nullptr ? &p->type : nullptr)) {
        return rdma::Error(RI_EINVAL, "a " + std::string(resource_name(type)) + " cannot belong to " +
                                          (p != nullptr ? "a " + std::string(resource_name(p->type)) : "nothing"));
    }
    for (Handle r : refs) {
        if (lookup(r) == nullptr) {
            return rdma::Error(RI_EBADF, "a " + std::string(resource_name(type)) +
                                             " refers to an object that is not a live object of this process");
        }
    }
    uint32_t index;
    if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
    } else {
        index = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    // Taken once the slot exists and has room for its references, so that nothing below can fail with the object
    // counted.
    slots_[index].refs.clear();
    slots_[index].refs.reserve(refs.size());
    if (auto r = budget_->take(type); !r) {
        free_.push_back(index);
        return r.error();
    }
    Slot &s = slots_[index];
    s.used = true;
    s.type = type;
    s.parent = parent != 0 ? slot_of(parent) : kNoParent;
    s.children = 0;
    s.referrers = 0;
    s.refs.clear();
    for (Handle r : refs) {
        s.refs.push_back(slot_of(r));
        ++slots_[slot_of(r)].referrers;
    }
    s.object = std::move(object);
    if (s.parent != kNoParent) ++slots_[s.parent].children;
    ++counts_[t];
    ++live_;
    return make_handle(s.generation, index);
}

rdma::Expected<Resource *> ResourceTable::get(Handle handle, ResourceType type) const {
    const Slot *s = lookup(handle);
    if (s == nullptr) return rdma::Error(RI_EBADF, "not a live object of this process");
    if (s->type != type) {
        return rdma::Error(RI_EINVAL, "handle names a " + std::string(resource_name(s->type)) + ", not a " +
                                          std::string(resource_name(type)));
    }
    return s->object.get();
}

Handle ResourceTable::parent(Handle handle) const noexcept {
    const Slot *s = lookup(handle);
    if (s == nullptr || s->parent == kNoParent) return 0;
    return make_handle(slots_[s->parent].generation, s->parent);
}

rdma::Expected<void> ResourceTable::destroy(Handle handle) {
    const Slot *s = lookup(handle);
    if (s == nullptr) return rdma::Error(RI_EBADF, "not a live object of this process");
    if (s->children != 0) {
        return rdma::Error(RI_EBUSY, std::string(resource_name(s->type)) + " still owns " +
                                         std::to_string(s->children) + " object(s); destroy them first");
    }
    if (s->referrers != 0) {
        return rdma::Error(RI_EBUSY, std::string(resource_name(s->type)) + " is still used by " +
                                         std::to_string(s->referrers) + " object(s); destroy them first");
    }
    release(slot_of(handle));
    return {};
}

void ResourceTable::release(uint32_t index) {
    Slot &s = slots_[index];
    s.object.reset();  // the provider object goes first, while what it refers to still exists
    if (s.parent != kNoParent) --slots_[s.parent].children;
    for (uint32_t r : s.refs) --slots_[r].referrers;
    s.refs.clear();
    s.used = false;
    s.generation = s.generation == UINT32_MAX ? 1 : s.generation + 1;  // stale handles stay stale
    --counts_[static_cast<size_t>(s.type)];
    --live_;
    budget_->give(s.type);
    free_.push_back(index);
}

template <class Pred>
void ResourceTable::teardown(Pred in_scope) {
    // Types are declared in teardown order: every reference points from an earlier type to a later one.
    for (size_t t = 0; t < kResourceTypes; ++t) {
        for (uint32_t i = 0; i < slots_.size(); ++i) {
            if (slots_[i].used && static_cast<size_t>(slots_[i].type) == t && in_scope(i)) release(i);
        }
    }
}

void ResourceTable::destroy_tree(Handle handle) {
    if (lookup(handle) == nullptr) return;
    const uint32_t root = slot_of(handle);
    teardown([this, root](uint32_t i) {
        for (uint32_t at = i; at != kNoParent; at = slots_[at].parent) {
            if (at == root) return true;
        }
        return false;
    });
}

void ResourceTable::clear() {
    teardown([](uint32_t) { return true; });
}

}  // namespace kal
