// The semaphore across processes and under faults: a killed holder, a
// paused server (replies lost, requests resent), a restarted server.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <future>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "reply_lost.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using dlock::test::semaphore_key;

namespace {

using dlock::support::cut_options;
using dlock::support::with_reply_lost;

}  // namespace

// Every holder counts itself in and out on the server (INCR/DECR): the
// count it sees, never more than the limit, is the server's own.
TEST(SemaphoreProcesses, NeverMoreThanTheLimitAcrossProcesses) {
    dlock::support::RedisServer server;
    constexpr unsigned limit = 3;
    constexpr int processes = 4, threads = 3, rounds = 25;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(dlock::support::run_in_child([&] {
            dlock::Client client(server.uri());
            dlock::Semaphore sem(client, "pool", {.limit = limit});
            std::atomic<int> over{0};
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t)
                workers.emplace_back([&] {
                    for (int r = 0; r < rounds; ++r) {
                        auto permit = sem.acquire();
                        auto inside = client.command({"INCR", "inside"}).integer;
                        if (inside > static_cast<long long>(limit)) ++over;
                        client.command({"SADD", "seen", std::to_string(inside)});
                        client.command({"DECR", "inside"});
                        permit.release();
                    }
                });
            for (auto& w : workers) w.join();
            return over.load() == 0 ? 0 : 3;
        }));
    }
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0) << "more holders than the limit";
    EXPECT_EQ(server.cli({"GET", "inside"}), "0");
    EXPECT_EQ(server.cli({"SISMEMBER", "seen", std::to_string(limit + 1)}), "0");
    EXPECT_EQ(server.cli({"SISMEMBER", "seen", std::to_string(limit)}), "1") << "the limit was never used in full";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("pool")}), "0");
    EXPECT_EQ(server.cli({"HGET", semaphore_key("pool") + ":state", "used"}), "0");
}

TEST(SemaphoreProcesses, AKilledHoldersPermitsComeBackWithinALease) {
    dlock::support::RedisServer server;
    constexpr auto lease = 500ms;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t holder = dlock::support::run_in_child([&] {
        dlock::Client client(server.uri());
        dlock::Semaphore sem(client, "victim", {.limit = 2, .lease = lease});
        auto permit = sem.acquire(2);
        char c = 'x';
        if (write(ready[1], &c, 1) != 1) return 1;
        for (;;) pause();
    });
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "victim", {.limit = 2});
    // Bounded: a permit that never comes back fails the test instead of hanging it.
    auto acquired_at = std::async(std::launch::async, [&] {
        auto p = sem.try_acquire_for(10s, 2);
        return p ? Clock::now() : Clock::time_point::max();
    });
    std::this_thread::sleep_for(700ms);  // longer than a lease: the holder renews meanwhile
    ASSERT_EQ(acquired_at.wait_for(0s), std::future_status::timeout) << "granted while the holder was alive";
    // The permits key's expiry must not take the permit away without its
    // count: the key outlives the lease, and the waiter's prune gives it back.
    const auto killed_at = Clock::now();
    kill(holder, SIGKILL);
    EXPECT_EQ(dlock::support::wait_child(holder), -SIGKILL);
    EXPECT_LE(acquired_at.get() - killed_at, lease + 100ms);
    close(ready[0]);
    close(ready[1]);
}

TEST(SemaphoreFaults, AcquireWhoseReplyWasLostTakesPermitsOnce) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    dlock::Semaphore sem(client, "retried", {.limit = 3});
    sem.acquire().release();  // loads the script, so the paused call is an EVALSHA that runs
    const auto before = server.command_calls("evalsha");
    auto permit = with_reply_lost(server, [&] { return sem.try_acquire_for(5s, 2); });
    ASSERT_TRUE(permit);
    EXPECT_GE(server.command_calls("evalsha") - before, 2) << "nothing was resent";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("retried")}), "1");
    EXPECT_EQ(server.cli({"HGET", semaphore_key("retried") + ":state", "used"}), "2");
    permit.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("retried") + ":state", "used"}), "0");
}

TEST(SemaphoreFaults, ReleaseWhoseReplyWasLostGivesBackOnceAndSucceeds) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    dlock::Semaphore sem(client, "released", {.limit = 3});
    auto kept = sem.acquire();
    auto permit = sem.acquire(2);
    const auto before = server.command_calls("evalsha");
    auto ec = with_reply_lost(server, [&] {
        std::error_code e;
        permit.release(e);
        return e;
    });
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_GE(server.command_calls("evalsha") - before, 2) << "nothing was resent";
    EXPECT_EQ(server.cli({"HGET", semaphore_key("released") + ":state", "used"}), "1") << "given back twice";
    EXPECT_TRUE(kept.is_held());
}

TEST(SemaphoreFaults, AWaiterGivesUpAtItsDeadlineAgainstAPausedServer) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    dlock::Semaphore sem(client, "paused", {.limit = 1});
    auto held = sem.acquire();
    server.pause();
    const auto start = Clock::now();
    std::error_code ec;
    auto p = sem.try_acquire_until(Clock::now() + 200ms, 1, ec);
    const auto took = Clock::now() - start;
    server.resume();
    EXPECT_FALSE(p);
    EXPECT_LT(took, 600ms);
}

// The waiting thread reads its request's answer itself (the read baton),
// in ppoll on the socket: a stop must end that read as promptly as it ends
// a sleep, for a wait with a deadline and one without, while a paused server holds
// the answer back.
TEST(SemaphoreFaults, AStopEndsAnAcquireWhoseAnswerAPausedServerHoldsBack) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());  // a command timeout (5 s) far past the stop
    dlock::Semaphore sem(client, "paused-stop", {.limit = 1});
    auto held = sem.acquire();
    for (const bool bounded : {true, false}) {
        server.pause();
        std::stop_source stop;
        auto asked = std::async(std::launch::async, [&] {
            return bounded ? sem.try_acquire_until(Clock::now() + 10s, 1, stop.get_token())
                          : sem.acquire(1, stop.get_token());
        });
        std::this_thread::sleep_for(100ms);  // its request is sent, and unanswered
        const auto at = Clock::now();
        stop.request_stop();
        const auto ended = asked.wait_for(2s);
        const auto took = Clock::now() - at;
        server.resume();
        ASSERT_EQ(ended, std::future_status::ready) << (bounded ? "try_acquire_until" : "acquire") << " ignored its stop";
        EXPECT_FALSE(asked.get());
        EXPECT_LT(took, 500ms);
    }
    // Nothing of the two stopped calls stays: the permit comes back to the next one.
    held.release();
    EXPECT_TRUE(sem.try_acquire_for(3s));
}

TEST(SemaphoreFaults, ARestartWithoutDataLosesThePermitAndTheSemaphoreWorksAfter) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    std::promise<void> told;
    dlock::Semaphore sem(client, "restart",
                         {.limit = 1, .lease = 600ms, .on_lost = [&](std::string_view, std::error_code) { told.set_value(); }});
    auto p = sem.acquire();
    server.restart();
    auto f = told.get_future();
    EXPECT_EQ(f.wait_for(3s), std::future_status::ready);
    EXPECT_FALSE(p.is_held());
    auto again = sem.try_acquire_for(3s);
    EXPECT_TRUE(again);
}

// The caller walked away (its deadline) while its request sat in a paused
// server's buffer; the request then ran and granted. Nobody will use that
// permit: it must be given back, not held until its lease ends.
TEST(SemaphoreFaults, AGrantNobodyWaitsForAnyMoreIsGivenBack) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    dlock::Semaphore sem(client, "late", {.limit = 1});
    sem.acquire().release();  // loads the scripts
    server.pause();
    std::error_code ec;
    auto p = sem.try_acquire_until(Clock::now() + 100ms, 1, ec);
    EXPECT_FALSE(p);
    server.resume();
    EXPECT_TRUE(dlock::support::eventually(
        [&] { return server.cli({"ZCARD", semaphore_key("late")}) == "0" && server.command_calls("evalsha") >= 3; }, 5s));
    std::this_thread::sleep_for(500ms);  // any late copy has run by now
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("late")}), "0");
    EXPECT_EQ(server.cli({"HGET", semaphore_key("late") + ":state", "used"}), "0");
    EXPECT_TRUE(sem.try_acquire()) << "the permit nobody used was not given back";
}
