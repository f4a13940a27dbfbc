// Force releases a client has heard of (its inbox), kept a while for holds
// it has not made yet.
//
// A grant's answer (or a direct grant's notice) and the revocation of that
// grant come on different connections, or are read by different threads: a
// revocation can be read before its hold exists, when looking among the
// holds finds nothing. So every revocation is noted here first, then the
// holds are looked at; a hold checks here once it is made and findable. In
// either order one of the two sees the other.
//
// A hold is named by what the notice says of it: an exclusive hold's (name,
// owner, fencing token) — every exclusive grant takes a new token, so a
// later grant never matches — or a permit's id, never reused. Not a
// reader's: readers of one name may share a token. Each entry is kept for
// keep_for, and at most max_kept of them (the oldest go first): a grant read
// later than that after its revocation is lost at its next renewal instead,
// as before. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "hold.hpp"

namespace dlock::detail {

class RecentRevocations {
public:
    static constexpr std::size_t max_kept = 1024;
    static constexpr std::chrono::seconds keep_for{60};

    static std::string hold(std::string_view name, std::string_view owner, std::uint64_t token);
    static std::string permit(std::string_view id);

    void note(std::string key);
    // Whether a revocation of `hold` (a permit's when `permit`, else a
    // lock's, named by its fencing token) was noted within keep_for and not
    // pushed out since. With none kept, one atomic load: no key is made.
    bool heard_of(const Hold& hold, bool permit);

private:
    void forget_old_locked(LockClock::time_point now);

    // How many are kept: written under mutex_, read without it. The hold
    // side's ordering comes from the lock it took to make the hold findable
    // (the keeper's, the owner slot's), which the inbox's look takes too.
    std::atomic<std::size_t> kept_count_{0};
    std::mutex mutex_;
    std::deque<std::pair<LockClock::time_point, std::string>> order_;  // oldest first
    std::unordered_set<std::string> kept_;
};

}  // namespace dlock::detail
