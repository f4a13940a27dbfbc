// A counting semaphore for the one wait every blocking call makes: a caller
// thread sleeps until the I/O thread (or a stop request) releases it.
//
// Why not std::counting_semaphore: libstdc++ 12's try_acquire() on a count of
// zero spins and calls sched_yield() four times before it says no (about
// 2.6 µs of CPU and four system calls, measured), and its timed wait does the
// same before it sleeps. A call path that asks "is it there yet?" a few
// times per lock+unlock paid more for the asking than for the lock. Here
// try_acquire() is one atomic load (and a compare-exchange when the count is
// above zero), and a wait sleeps at once on a futex (Linux only, as the
// library is).
//
// Clock: deadlines are std::chrono::steady_clock time points (CLOCK_MONOTONIC).
// Thread-safety: every member may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dlock::detail {

class WakeCount {
public:
    using Clock = std::chrono::steady_clock;

    WakeCount() = default;
    WakeCount(const WakeCount&) = delete;
    WakeCount& operator=(const WakeCount&) = delete;

    // Adds one and wakes a sleeping acquirer, if there is one. The object
    // may be destroyed by an acquirer as soon as the count is up: release()
    // reads nothing of it after that (the wake-up is a system call on its
    // address, harmless if it is gone).
    void release() noexcept;
    // Takes one if the count is above zero. Never blocks, never yields.
    bool try_acquire() noexcept {
        auto word = word_.load(std::memory_order_acquire);
        while (word >= one)
            if (word_.compare_exchange_weak(word, word - one, std::memory_order_acquire, std::memory_order_relaxed))
                return true;
        return false;
    }
    // Takes one, sleeping until there is one.
    void acquire() noexcept { (void)acquire_until(nullptr); }
    // Takes one, sleeping until there is one or deadline passed (false).
    bool try_acquire_until(Clock::time_point deadline) noexcept { return acquire_until(&deadline); }

private:
    bool acquire_until(const Clock::time_point* deadline) noexcept;

    // One word, so that a release is one atomic add and a sleeper's wait
    // compares all of it: the count in the upper half, the acquirers that
    // may be asleep in the lower.
    static constexpr std::uint32_t one = std::uint32_t{1} << 16;
    static constexpr std::uint32_t sleepers = one - 1;
    std::atomic<std::uint32_t> word_{0};
};

}  // namespace dlock::detail
