// The Redis keys of one semaphore. All carry the hash tag {<tag>}
// (lock_keys.hpp: key_tag), so they
// live in one cluster slot, and every semaphore script is given all of them
// in one order (src/scripts/semaphore_prelude.lua).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "hold/lock_keys.hpp"

namespace dlock::detail {

struct SemaphoreKeys {
    explicit SemaphoreKeys(std::string_view name)
        : permits("dlock:sem:{" + key_tag(name) + "}"),
          all{permits, permits + ":state", permits + ":queue", permits + ":waiters", permits + ":done",
              permits + ":ch"},
          other_kinds{other_kinds_of(LockKeys(name))} {}

    std::string permits;  // zset permit id -> server-time end of its lease
    // KEYS[1..6] of every semaphore script: permits, state, queue, waiter
    // deadlines, done, channel.
    std::array<std::string, 6> all;
    const std::string& channel() const noexcept { return all[5]; }
    // KEYS[7..9] of semaphore_acquire.lua: the lock hash, the readers and
    // the fair line's places of a Lock or RwLock of this name (LockKeys),
    // which it must not be at once.
    std::array<std::string, 3> other_kinds;

private:
    static std::array<std::string, 3> other_kinds_of(const LockKeys& lock) {
        return {lock.lock, std::string(lock.readers()), std::string(lock.places())};
    }
};

}  // namespace dlock::detail
