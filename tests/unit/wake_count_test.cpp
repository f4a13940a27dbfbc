// WakeCount (runtime/wake_count.hpp): releases are counted, none is lost to a
// sleeper racing it, and a timed wait ends at its deadline. Liveness bounds
// are generous: these are not timings.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>
#include <thread>

#include "runtime/wake_count.hpp"

using namespace std::chrono_literals;
using dlock::detail::WakeCount;
using Clock = WakeCount::Clock;

TEST(WakeCount, ReleasesAreCountedAndTakenOneByOne) {
    WakeCount count;
    EXPECT_FALSE(count.try_acquire());
    count.release();
    count.release();
    EXPECT_TRUE(count.try_acquire());
    EXPECT_TRUE(count.try_acquire_until(Clock::now()));
    EXPECT_FALSE(count.try_acquire());
}

TEST(WakeCount, ATimedWaitEndsAtItsDeadline) {
    WakeCount count;
    const auto deadline = Clock::now() + 50ms;
    EXPECT_FALSE(count.try_acquire_until(deadline));
    EXPECT_GE(Clock::now(), deadline);
    EXPECT_FALSE(count.try_acquire_until(Clock::now() - 1s)) << "a deadline in the past: no wait";
    EXPECT_FALSE(count.try_acquire_until(Clock::time_point{})) << "the clock's epoch";
}

TEST(WakeCount, ASleeperIsWokenByAReleaseFromAnotherThread) {
    WakeCount count;
    auto sleeper = std::async(std::launch::async, [&] { return count.try_acquire_until(Clock::now() + 30s); });
    std::this_thread::sleep_for(50ms);  // most likely asleep by now; either way it must wake
    count.release();
    ASSERT_EQ(sleeper.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(sleeper.get());
    EXPECT_FALSE(count.try_acquire()) << "the release was taken once";
}

TEST(WakeCount, AnUntimedAcquireReturnsOnRelease) {
    WakeCount count;
    auto sleeper = std::async(std::launch::async, [&] { count.acquire(); });
    count.release();
    ASSERT_EQ(sleeper.wait_for(10s), std::future_status::ready);
}

// Two threads hand a turn back and forth: a release that lands between a
// sleeper's last look and its sleep must still wake it.
TEST(WakeCount, NoWakeUpIsLostInAPingPong) {
    WakeCount ping, pong;
    constexpr int turns = 20000;
    std::atomic<int> missed{0};
    auto other = std::async(std::launch::async, [&] {
        for (int i = 0; i < turns; ++i) {
            if (!ping.try_acquire_until(Clock::now() + 10s)) ++missed;
            pong.release();
        }
    });
    for (int i = 0; i < turns; ++i) {
        ping.release();
        if (!pong.try_acquire_until(Clock::now() + 10s)) ++missed;
    }
    ASSERT_EQ(other.wait_for(30s), std::future_status::ready);
    EXPECT_EQ(missed.load(), 0);
}

// Many releasers and takers at once: every release is taken exactly once.
TEST(WakeCount, EveryReleaseIsTakenOnceUnderContention) {
    WakeCount count;
    constexpr int threads = 4, each = 5000;
    std::atomic<int> taken{0};
    std::vector<std::future<void>> work;
    for (int t = 0; t < threads; ++t) {
        work.push_back(std::async(std::launch::async, [&] {
            for (int i = 0; i < each; ++i) count.release();
        }));
        work.push_back(std::async(std::launch::async, [&] {
            for (int i = 0; i < each; ++i)
                if (count.try_acquire_until(Clock::now() + 10s)) taken.fetch_add(1);
        }));
    }
    for (auto& w : work) ASSERT_EQ(w.wait_for(60s), std::future_status::ready);
    EXPECT_EQ(taken.load(), threads * each);
    EXPECT_FALSE(count.try_acquire());
}
