/**
 * @file event_handlers.hpp
 * @brief A provider's table of the event handlers set on one RNIC open (for kVPs and uVPs alike): one asynchronous
 *        event handler, identifier 1, and up to EventHandlers::kMaxCeh completion event handlers, identifiers 2 and
 *        up. Header only, never crosses the ABI.
 */
#ifndef RNICPI_CPP_EVENT_HANDLERS_HPP
#define RNICPI_CPP_EVENT_HANDLERS_HPP

#include <mutex>

#include "rnicpi/rnicpi.h"

namespace rdma::provider {

/** @brief One open's AEH and CEHs. Thread-safe. */
class EventHandlers {
public:
    /** @brief Completion event handlers one open may set (reported as ri_rnic_attr_t::max_ceh). */
    static constexpr uint32_t kMaxCeh = 16;
    /** @brief A completion event handler and its context. */
    struct Ceh {
        ri_ceh_fn fn = nullptr; /**< The handler, or null. */
        void *ctx = nullptr;    /**< Its context. */
    };
    /** @brief The asynchronous event handler and its context. */
    struct Aeh {
        ri_aeh_fn fn = nullptr; /**< The handler, or null. */
        void *ctx = nullptr;    /**< Its context. */
    };

    /** @brief Set AEH: replaces the one AEH; its identifier is 1. */
    ri_status_t set_aeh(ri_aeh_fn fn, void *ctx, uint32_t *id) {
        std::lock_guard lock(mutex_);
        aeh_ = Aeh{fn, ctx};
        *id = 1;
        return RI_OK;
    }
    /** @brief Set CEH: a new identifier (2 and up); ::RI_ENOSPC when all are taken. */
    ri_status_t set_ceh(ri_ceh_fn fn, void *ctx, uint32_t *id) {
        if (fn == nullptr) return RI_EINVAL;
        std::lock_guard lock(mutex_);
        for (uint32_t i = 0; i < kMaxCeh; ++i) {
            if (cehs_[i].fn == nullptr) {
                cehs_[i] = Ceh{fn, ctx};
                *id = i + 2;
                return RI_OK;
            }
        }
        return RI_ENOSPC;
    }
    /** @brief Clear Handler: ::RI_ENOENT for an identifier that names no handler. */
    ri_status_t clear(uint32_t id) {
        std::lock_guard lock(mutex_);
        if (id == 1) {
            aeh_ = Aeh{};
            return RI_OK;
        }
        if (id < 2 || id - 2 >= kMaxCeh || cehs_[id - 2].fn == nullptr) return RI_ENOENT;
        cehs_[id - 2] = Ceh{};
        return RI_OK;
    }
    /** @brief The CEH with identifier @p id (empty when none). */
    [[nodiscard]] Ceh ceh(uint32_t id) const {
        std::lock_guard lock(mutex_);
        return id >= 2 && id - 2 < kMaxCeh ? cehs_[id - 2] : Ceh{};
    }
    /** @brief The AEH (empty when none). */
    [[nodiscard]] Aeh aeh() const {
        std::lock_guard lock(mutex_);
        return aeh_;
    }

private:
    mutable std::mutex mutex_;
    Aeh aeh_;
    Ceh cehs_[kMaxCeh];
};

}  // namespace rdma::provider

#endif  // RNICPI_CPP_EVENT_HANDLERS_HPP
