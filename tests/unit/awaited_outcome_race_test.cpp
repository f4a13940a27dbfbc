// AwaitedOutcome (hold/awaited_outcome.hpp) on WakeCount, its
// delivery racing a stop request and a deadline, reused through reset():
// every outcome goes once, to the waiter or to its handler, and no release
// is left over for the next use (a wait after reset() with nothing delivered
// sleeps to its deadline).
// As the library is built (CMakeLists.txt): this header reaches asio.
#define ASIO_NO_DEPRECATED
#define ASIO_STANDALONE
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <thread>

#include "hold/awaited_outcome.hpp"

using namespace std::chrono_literals;
using dlock::detail::AwaitedOutcome;

TEST(AwaitedOutcomeRace, DeliveryStopAndDeadlineRacingLoseNothingAndLeaveNothing) {
    AwaitedOutcome<int> outcome;
    using Clock = std::chrono::steady_clock;
    int to_waiter = 0, to_handler = 0, stale = 0;
    constexpr int rounds = 4000;
    for (int round = 0; round < rounds; ++round) {
        outcome.reset();
        std::atomic<int> handled{0};
        std::stop_source stop;
        std::thread deliverer([&] {
            if (round % 3 == 0) std::this_thread::yield();
            outcome.deliver(round + 1);
        });
        std::thread stopper([&] {
            if (round % 2 == 0) stop.request_stop();
        });
        int out = 0;
        const auto deadline = Clock::now() + std::chrono::microseconds(round % 5 == 0 ? 0 : 200);
        const bool got = outcome.wait(deadline, stop.get_token(), out, [&] {
            return AwaitedOutcome<int>::Handler([&](int&& late) {
                EXPECT_EQ(late, round + 1);
                ++handled;
            });
        });
        deliverer.join();
        stopper.join();
        if (got) {
            EXPECT_EQ(out, round + 1);
            EXPECT_EQ(handled.load(), 0);
            ++to_waiter;
        } else {
            EXPECT_EQ(handled.load(), 1) << "round " << round << ": the outcome went nowhere";
            ++to_handler;
        }
        // Nothing left over: a fresh use with nothing delivered waits to its deadline.
        if (round % 100 == 0) {
            outcome.reset();
            int none = 0;
            const auto asked = Clock::now();
            const bool early = outcome.wait(asked + 5ms, {}, none, [] { return AwaitedOutcome<int>::Handler(); });
            if (early || Clock::now() - asked < 5ms) ++stale;
            outcome.deliver(0);  // to the (empty) handler
        }
    }
    std::printf("to the waiter %d, to the handler %d\n", to_waiter, to_handler);
    EXPECT_EQ(to_waiter + to_handler, rounds);
    EXPECT_EQ(stale, 0);
}
