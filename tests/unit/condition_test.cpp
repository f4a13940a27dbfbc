// Condition (runtime/condition.hpp), a thread's wait: no wake-up is lost to
// a sleeper racing the notify (under the lock or after it), a stop request
// wakes a sleeper that has no deadline, and a timed wait ends at its
// deadline. Liveness bounds are generous: these are not timings.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <stop_token>
#include <thread>

#include "runtime/condition.hpp"

using namespace std::chrono_literals;
using dlock::detail::Condition;
using Clock = std::chrono::steady_clock;

namespace {

// Two threads take turns, each waking the other, `rounds` times; `after`:
// the notify comes after the lock is let go. Each wait may last 10 s: a
// lost wake-up fails the turn it was lost in.
void take_turns(bool after, int rounds) {
    std::mutex mutex;
    Condition changed;
    int turn = 0;  // even: the first thread's, odd: the second's
    auto play = [&](int parity) {
        for (int i = 0; i < rounds; ++i) {
            std::unique_lock lock(mutex);
            if (!changed.wait_until(lock, std::stop_token{}, Clock::now() + 10s, [&] { return turn % 2 == parity; }))
                return false;
            ++turn;
            if (after) lock.unlock();
            changed.notify_all();
        }
        return true;
    };
    auto second = std::async(std::launch::async, play, 1);
    EXPECT_TRUE(play(0)) << "a wake-up was lost";
    EXPECT_TRUE(second.get()) << "a wake-up was lost";
    EXPECT_EQ(turn, 2 * rounds);
}

}  // namespace

TEST(Condition, NoWakeUpIsLostWhenTheNotifyComesUnderTheLock) { take_turns(false, 20'000); }

TEST(Condition, NoWakeUpIsLostWhenTheNotifyComesAfterTheLock) { take_turns(true, 20'000); }

TEST(Condition, AStopRequestWakesASleeperWithNoDeadline) {
    std::mutex mutex;
    Condition never;
    std::stop_source stop;
    auto sleeper = std::async(std::launch::async, [&] {
        std::unique_lock lock(mutex);
        return never.wait(lock, stop.get_token(), [] { return false; });
    });
    std::this_thread::sleep_for(50ms);  // most likely asleep by now; either way it must wake
    stop.request_stop();
    ASSERT_EQ(sleeper.wait_for(10s), std::future_status::ready) << "the stop request did not wake the sleeper";
    EXPECT_FALSE(sleeper.get());
    // Stopped before the wait: no sleep at all.
    std::unique_lock lock(mutex);
    EXPECT_FALSE(never.wait_until(lock, stop.get_token(), Clock::now() + 10s, [] { return false; }));
}

TEST(Condition, ATimedWaitEndsAtItsDeadlineAndSaysWhetherItWasReady) {
    std::mutex mutex;
    Condition never;
    std::unique_lock lock(mutex);
    const auto deadline = Clock::now() + 50ms;
    EXPECT_FALSE(never.wait_until(lock, deadline, [] { return false; }));
    EXPECT_GE(Clock::now(), deadline);
    EXPECT_TRUE(never.wait_until(lock, Clock::now() - 1s, [] { return true; })) << "ready before the deadline is looked at";
    EXPECT_FALSE(never.wait_until(lock, Clock::time_point{}, [] { return false; })) << "the clock's epoch";
}
