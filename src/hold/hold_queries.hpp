// What Lock and Redlock answer about the caller's own hold, how both report
// a failed unlock(), and their error_code twins: one definition for both.
// A hold that is lost or released describes nothing: count 0, token 0,
// valid_until time_point{}.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>

#include "dlock/error.hpp"
#include "hold.hpp"

namespace dlock::detail {

inline bool describes_a_hold(const Hold::View& view) {
    return view.state == HoldState::held || view.state == HoldState::releasing;
}

// Each takes the caller's hold, or null when it has none.
inline bool hold_is_held(const std::shared_ptr<Hold>& hold) { return hold && hold->trusted(LockClock::now()); }

inline unsigned hold_count_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return 0;
    auto view = hold->view();
    return describes_a_hold(view) ? view.count : 0;
}

inline std::uint64_t fencing_token_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return 0;
    auto view = hold->view();
    return describes_a_hold(view) ? view.token : 0;
}

inline std::stop_token lost_token_of(const std::shared_ptr<Hold>& hold) {
    return hold ? hold->lost_token() : std::stop_token{};
}

// Why it was lost; nothing for a hold that is not lost (or no hold).
inline std::optional<LostReason> loss_of(const std::shared_ptr<Hold>& hold) {
    return hold ? hold->loss() : std::nullopt;
}

inline LockClock::time_point valid_until_of(const std::shared_ptr<Hold>& hold) {
    if (!hold) return {};
    auto view = hold->view();
    return describes_a_hold(view) ? view.valid_until : LockClock::time_point{};
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

// unlock(ec) of a hold an asynchronous acquisition made: nothing escapes.
template <typename Core>
void release_noexcept(Core& core, std::error_code& ec) noexcept {
    try {
        core.release(ec);
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
}

}  // namespace dlock::detail
