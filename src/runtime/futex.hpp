// The two futex calls the library's own waits are made of (Linux only, as
// the library is): sleep while a 32-bit word holds a value, and wake the
// sleepers on it.
//
// Clock: deadlines are std::chrono::steady_clock time points, absolute
// (CLOCK_MONOTONIC): a sleep woken early and resumed keeps its deadline.
// Thread-safety: any thread, any time. A wake on a word nobody sleeps on
// does nothing; neither call touches the word's memory beyond the kernel's
// compare of a sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dlock::detail {

// Sleeps while `word` is `seen`, until woken or deadline (none: no
// deadline). Returns at once when the word is not `seen`. May return
// spuriously. False only when the deadline passed.
bool futex_sleep_while(std::atomic<std::uint32_t>& word, std::uint32_t seen,
                       const std::chrono::steady_clock::time_point* deadline) noexcept;

// Wakes up to `count` threads asleep on `word`.
void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept;

}  // namespace dlock::detail
