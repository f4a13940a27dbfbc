// One owner's hold on one lock, shared by the Lock that made it and the
// lease keeper that renews it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/lock.hpp"
#include "lock_keys.hpp"

namespace dlock::detail {

using LockClock = std::chrono::steady_clock;

// What every hold of one Lock shares; immutable.
struct LockIdentity {
    LockIdentity(std::string name_, LockOptions options_)
        : name(std::move(name_)), keys(name), options(std::move(options_)),
          lease_ms(std::to_string(options.lease.count())) {}

    std::string name;
    LockKeys keys;
    LockOptions options;
    std::string lease_ms;
};

// A Redlock's identity: every hold in a Masters' lease keeper has one.
struct RedlockIdentity : LockIdentity {
    RedlockIdentity(std::string name_, LockOptions options_, std::chrono::milliseconds node_timeout_)
        : LockIdentity(std::move(name_), std::move(options_)), node_timeout(node_timeout_) {}

    std::chrono::milliseconds node_timeout;  // how long one master may take to answer
};

struct Hold {
    Hold(std::shared_ptr<const LockIdentity> lock_, std::string owner_)
        : lock(std::move(lock_)), owner(std::move(owner_)) {}

    const std::shared_ptr<const LockIdentity> lock;
    const std::string owner;

    mutable std::mutex mutex;
    unsigned count = 0;
    std::uint64_t token = 0;
    LockClock::time_point valid_until{};
    LockClock::time_point slice_start{};  // when this process took the lock from the server (hand-offs)
    bool released = false;          // the final release has begun: never renew again
    bool lost = false;
    std::error_code lost_reason;
    std::error_code last_renew_error;
    // Made on the first lost_token(): most holders never ask, and its state
    // is an allocation per hold. Guarded by mutex.
    std::optional<std::stop_source> lost_source;

    // A token that is stop-requested once this hold is lost (at once if it
    // already is). Takes mutex.
    std::stop_token lost_token() {
        std::lock_guard lock(mutex);
        if (!lost_source) {
            lost_source.emplace();
            if (lost) lost_source->request_stop();
        }
        return lost_source->get_token();
    }

    // The renewal, formatted on first use: it never changes. I/O thread only.
    std::string renew_command;

    // The lease keeper's entry for this hold; guarded by the keeper's mutex.
    std::multimap<LockClock::time_point, std::weak_ptr<Hold>>::iterator schedule_entry;
    bool scheduled = false;

    // After the final release. Takes mutex.
    void mark_count_zero() {
        std::lock_guard lock(mutex);
        count = 0;
    }

    // Under mutex.
    bool held_locked(LockClock::time_point now) const {
        return count > 0 && !released && !lost && now < valid_until;
    }
};

// Marks a hold lost once: stop_token, callback. Takes the hold's mutex.
void mark_lost(const std::shared_ptr<Hold>& hold, std::error_code reason);

}  // namespace dlock::detail
