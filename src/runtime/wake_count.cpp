#include "wake_count.hpp"

#include <cerrno>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dlock::detail {

#if defined(__linux__)

namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t), "a futex is a 32-bit word");

std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) noexcept {
    return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while word is `seen`, until woken or deadline (absolute,
// CLOCK_MONOTONIC, which is steady_clock's on Linux; none: no deadline).
// False when the deadline passed.
bool sleep_while(std::atomic<std::uint32_t>& word, std::uint32_t seen,
                 const WakeCount::Clock::time_point* deadline) noexcept {
    timespec until{};
    if (deadline) {
        const auto since_epoch = deadline->time_since_epoch();
        if (since_epoch.count() < 0) return false;
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
        until.tv_sec = static_cast<time_t>(seconds.count());
        until.tv_nsec = static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count());
    }
    // FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC (FUTEX_WAIT
    // a relative one): a wait woken early and resumed keeps its deadline.
    const long result = syscall(SYS_futex, futex_word(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen,
                                deadline ? &until : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
    return !(result == -1 && errno == ETIMEDOUT);
}

}  // namespace

void WakeCount::release() noexcept {
    const auto before = word_.fetch_add(one, std::memory_order_release);
    if (before & sleepers)
        syscall(SYS_futex, futex_word(word_), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, nullptr, nullptr, 0);
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
        if (!sleep_while(word_, word, deadline)) break;
        word = word_.load(std::memory_order_acquire);
    }
    word_.fetch_sub(1, std::memory_order_relaxed);
    // A release may have come with the deadline.
    return try_acquire();
}

#else
#error "WakeCount sleeps on a Linux futex; this platform has none"
#endif

}  // namespace dlock::detail
