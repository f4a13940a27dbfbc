// What Lock and Redlock answer about the caller's own hold, and how both
// report a failed unlock(): one definition for both lock kinds.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <system_error>

#include "hold.hpp"

namespace dlock::detail {

// Each takes the caller's hold, or null when it has none.
inline bool hold_is_held(const std::shared_ptr<Hold>& hold) {
    if (!hold) return false;
    std::lock_guard lock(hold->mutex);
    return hold->held_locked(LockClock::now());
}

inline unsigned hold_count_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return 0;
    std::lock_guard lock(hold->mutex);
    return hold->lost ? 0 : hold->count;
}

inline std::uint64_t fencing_token_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return 0;
    std::lock_guard lock(hold->mutex);
    return hold->count > 0 ? hold->token : 0;
}

inline std::stop_token lost_token_of(const std::shared_ptr<Hold>& hold) {
    return hold ? hold->lost_token() : std::stop_token{};
}

inline LockClock::time_point valid_until_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return {};
    std::lock_guard lock(hold->mutex);
    return hold->count > 0 ? hold->valid_until : LockClock::time_point{};
}

// unlock() never throws: a failure goes to on_unlock_error, whose own
// exceptions are swallowed.
inline void report_unlock_error(const LockIdentity& identity, std::error_code ec) noexcept {
    if (!ec || !identity.options.on_unlock_error) return;
    try {
        identity.options.on_unlock_error(identity.name, ec);
    } catch (...) {
        // A throwing callback must not turn unlock() into a throwing call.
    }
}

}  // namespace dlock::detail
