// DAT handles: never returned to the heap, so a freed or stale handle stays readable and says it is dead. libdat2
// reads a handle's first word (the provider table) before it calls us, so a freed handle's memory must keep it.
#include <deque>
#include <mutex>
#include <new>

#include "dapl.hpp"

namespace dapl {
namespace {

// Freed handles wait this many frees before their memory carries another object, so a handle used shortly after
// it was freed still finds "dead" rather than an unrelated object.
constexpr size_t kQuarantine = 4096;

std::mutex g_mutex;
// Never destroyed: a static deque would free its storage at exit, and the retired handles it held would then be
// reachable from nowhere (LeakSanitizer reports each as a leak). A deque on the heap, never freed, keeps them reachable.
std::deque<Handle *> &g_free = *new std::deque<Handle *>;  // oldest first

}  // namespace

Handle *make_handle(const ProviderTable *provider, Kind kind, Body *body) noexcept {
    Handle *h = nullptr;
    {
        std::lock_guard lock(g_mutex);
        if (g_free.size() > kQuarantine) {
            h = g_free.front();
            g_free.pop_front();
        }
    }
    if (h == nullptr) {
        h = new (std::nothrow) Handle;
        if (h == nullptr) return nullptr;
    }
    h->provider = provider;
    h->kind = kind;
    h->body = body;
    h->magic.store(kLive, std::memory_order_release);
    return h;
}

void retire_handle(Handle *h) noexcept {
    if (h == nullptr) return;
    h->magic.store(kDead, std::memory_order_release);
    h->body = nullptr;  // the provider pointer stays: libdat2 dispatches a stale handle through it
    std::lock_guard lock(g_mutex);
    try {
        g_free.push_back(h);
    } catch (...) {
        // Out of memory: the handle is simply never reused.
    }
}

}  // namespace dapl
