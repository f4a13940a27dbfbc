#include "futex.hpp"

#include <cerrno>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#error "dlock's waits sleep on a Linux futex; this platform has none"
#endif

namespace dlock::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t), "a futex is a 32-bit word");

namespace {

std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) noexcept {
    return reinterpret_cast<std::uint32_t*>(&word);
}

}  // namespace

bool futex_sleep_while(std::atomic<std::uint32_t>& word, std::uint32_t seen,
                       const std::chrono::steady_clock::time_point* deadline) noexcept {
    timespec until{};
    if (deadline) {
        const auto since_epoch = deadline->time_since_epoch();
        if (since_epoch.count() < 0) return false;
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
        until.tv_sec = static_cast<time_t>(seconds.count());
        until.tv_nsec = static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count());
    }
    // FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC (FUTEX_WAIT
    // a relative one).
    const long result = syscall(SYS_futex, futex_word(word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen,
                                deadline ? &until : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
    return !(result == -1 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
    syscall(SYS_futex, futex_word(word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, nullptr, nullptr, 0);
}

}  // namespace dlock::detail
