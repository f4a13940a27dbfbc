#include "wake_count.hpp"

#include "futex.hpp"

namespace dlock::detail {

void WakeCount::release() noexcept {
    const auto before = word_.fetch_add(one, std::memory_order_release);
    assert(before / one < max_pending && "more releases pending than a WakeCount counts");
    if (before & sleepers) futex_wake(word_, 1);
}

bool WakeCount::acquire_until(const Clock::time_point* deadline) noexcept {
    if (try_acquire()) return true;
    // Counted among the sleepers before looking again: a release from now on
    // sees it and wakes it, and one before changed the word its sleep compares.
    auto word = word_.fetch_add(1, std::memory_order_acquire) + 1;
    for (;;) {
        if (word >= one) {
            // Takes one and leaves the sleepers in one step.
            if (word_.compare_exchange_weak(word, word - one - 1, std::memory_order_acquire,
                                            std::memory_order_relaxed))
                return true;
            continue;
        }
        if (deadline && Clock::now() >= *deadline) break;
        if (!futex_sleep_while(word_, word, deadline)) break;
        word = word_.load(std::memory_order_acquire);
    }
    word_.fetch_sub(1, std::memory_order_relaxed);
    // A release may have come with the deadline.
    return try_acquire();
}

}  // namespace dlock::detail
