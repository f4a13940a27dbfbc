// FairLock against real servers: arrival order across processes and threads,
// and what a dead or departing waiter costs the line. Tests that fork say
// Process in their names (the ThreadSanitizer run leaves them out).
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/fair_lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::lock_key;
using dlock::test::seconds;

namespace {

std::string line_of(const std::string& name) { return lock_key(name) + ":line"; }

std::string in_line(dlock::support::RedisServer& server, const std::string& name) {
    return server.cli({"ZCARD", line_of(name)});
}

// Blocks (bounded) until `name`'s line holds `count` waiters, asked through client.
bool wait_for_line(dlock::Client& client, const std::string& name, long long count) {
    const auto until = Clock::now() + 30s;
    while (Clock::now() < until) {
        if (client.command({"ZCARD", line_of(name)}).integer == count) return true;
        std::this_thread::sleep_for(2ms);
    }
    return false;
}

// A child process that waits for `name` in a FairLock and holds it once
// granted until killed; it writes nothing.
pid_t waiter_in_child(const std::string& uri, const std::string& name, dlock::LockOptions options) {
    return dlock::support::run_in_child([uri, name, options] {
        dlock::Client client(uri);
        dlock::FairLock lock(client, name, options);
        if (!lock.try_lock_for(60s)) return 1;
        std::this_thread::sleep_for(60s);
        return 0;
    });
}

}  // namespace

// Three processes with two threads each join the line in an interleaved
// order (P0, P1, P2, then their second threads); the lock goes to them in
// exactly that order, each with a larger fencing token than the one before.
TEST(FairLockProcesses, ArrivalOrderAcrossProcessesAndThreadsWithGrowingTokens) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri());
    dlock::FairLock holder(holder_client, "turns");
    holder.lock();
    constexpr int processes = 3, threads = 2;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(dlock::support::run_in_child([&, p] {
            dlock::Client client(server.uri());
            dlock::FairLock lock(client, "turns");
            std::atomic<int> failures{0};
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t) {
                workers.emplace_back([&, t] {
                    // Its turn to arrive: everyone ahead of it stands in line.
                    if (!wait_for_line(client, "turns", t * processes + p)) return ++failures, void();
                    if (!lock.try_lock_for(60s)) return ++failures, void();
                    client.command({"RPUSH", "order", std::to_string(p) + "." + std::to_string(t)});
                    client.command({"RPUSH", "tokens", std::to_string(lock.fencing_token())});
                    lock.unlock();
                });
            }
            for (auto& w : workers) w.join();
            return failures.load();
        }));
    }
    ASSERT_TRUE(wait_for_line(holder_client, "turns", processes * threads));
    const auto first_token = holder.fencing_token();
    holder.unlock();
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0);
    EXPECT_EQ(server.cli({"LRANGE", "order", "0", "-1"}), "0.0\n1.0\n2.0\n0.1\n1.1\n2.1");
    std::uint64_t last = first_token;
    for (int i = 0; i < processes * threads; ++i) {
        const auto token = std::stoull(server.cli({"LINDEX", "tokens", std::to_string(i)}));
        EXPECT_GT(token, last) << "grant " << i;
        last = token;
    }
    EXPECT_EQ(server.cli({"EXISTS", line_of("turns")}), "0");
}

// A waiter killed -9 while it stands first in line leaves it within its
// waiter_lease (its place is no longer refreshed), with the lock still held:
// the release then goes straight to the next waiter.
TEST(FairLockProcesses, AWaiterKilledInLineLeavesItWithinItsWaiterLease) {
    dlock::support::RedisServer server;
    const dlock::LockOptions options{.ownership = dlock::Ownership::handle, .waiter_lease = 600ms};
    dlock::Client holder_client(server.uri());
    dlock::FairLock holder(holder_client, "dead-waiter", options);
    holder.lock();
    const pid_t dead = waiter_in_child(server.uri(), "dead-waiter", options);
    ASSERT_TRUE(eventually([&] { return in_line(server, "dead-waiter") == "1"; }, 20s));
    dlock::Client next_client(server.uri());
    dlock::FairLock next(next_client, "dead-waiter", options);
    auto got = std::async(std::launch::async, [&] { return next.try_lock_for(30s); });
    ASSERT_TRUE(eventually([&] { return in_line(server, "dead-waiter") == "2"; }, 20s));
    kill(dead, SIGKILL);
    const auto killed = Clock::now();
    // Pruned by the next waiter's refresh once the dead one's place ran out.
    EXPECT_TRUE(eventually([&] { return in_line(server, "dead-waiter") == "1"; }, 5s));
    EXPECT_LT(seconds(Clock::now() - killed), 0.6 + 0.2 + 1.0) << "a dead waiter stayed in line past its waiter_lease";
    const auto released = Clock::now();
    holder.unlock();
    ASSERT_TRUE(got.get());
    EXPECT_LT(seconds(Clock::now() - released), 1.0) << "the release did not go straight to the live waiter";
    next.unlock();
    dlock::support::wait_child(dead);
}

// A waiter that stops (SIGSTOP) just before the release is granted the lock
// it can no longer confirm, and is then killed: the grant's short lease (the
// longer of the releaser's waiter_lease and the rest of its place), not the
// 30 s lease, is what the next waiter pays.
TEST(FairLockProcesses, AWaiterThatDiesRightAfterItsGrantCostsOnlyTheShortGrantLease) {
    dlock::support::RedisServer server;
    const dlock::LockOptions options{.ownership = dlock::Ownership::handle, .waiter_lease = 600ms};
    dlock::Client holder_client(server.uri());
    dlock::FairLock holder(holder_client, "granted-dead", options);
    holder.lock();
    const pid_t doomed = waiter_in_child(server.uri(), "granted-dead", options);
    ASSERT_TRUE(eventually([&] { return in_line(server, "granted-dead") == "1"; }, 20s));
    dlock::Client next_client(server.uri());
    dlock::FairLock next(next_client, "granted-dead", options);
    auto got = std::async(std::launch::async, [&] { return next.try_lock_for(30s); });
    ASSERT_TRUE(eventually([&] { return in_line(server, "granted-dead") == "2"; }, 20s));
    kill(doomed, SIGSTOP);
    const auto before_token = holder.fencing_token();
    holder.unlock();
    // Granted to the stopped waiter, unconfirmed, on a short lease.
    ASSERT_NE(server.cli({"HGET", lock_key("granted-dead"), "granted"}), "") << "not an unconfirmed grant";
    const auto pttl = std::stoll(server.cli({"PTTL", lock_key("granted-dead")}));
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 600) << "an unconfirmed grant leased for more than a waiter_lease";
    kill(doomed, SIGKILL);
    const auto killed = Clock::now();
    ASSERT_TRUE(got.get());
    EXPECT_LT(seconds(Clock::now() - killed), 0.6 + 0.2 + 1.0);
    EXPECT_GT(next.fencing_token(), before_token + 1) << "the dead waiter's grant had a token of its own";
    next.unlock();
    dlock::support::wait_child(doomed);
}

// A holder whose process stops (no renewal, no release) lets its lease run
// out, which publishes nothing: the first waiter's refresh finds the lock
// free and takes it, within about a third of its waiter_lease.
TEST(FairLockProcesses, AHolderWhoseLeaseRunsOutHandsOverToTheFirstInLine) {
    dlock::support::RedisServer server;
    const dlock::LockOptions options{.lease = 1s, .ownership = dlock::Ownership::handle, .waiter_lease = 600ms};
    const pid_t holder = dlock::support::run_in_child([&] {
        dlock::Client client(server.uri());
        dlock::FairLock lock(client, "expiring", options);
        lock.lock();
        std::this_thread::sleep_for(60s);
        return 0;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("expiring")}) == "1"; }, 20s));
    dlock::Client client(server.uri());
    dlock::FairLock waiter(client, "expiring", options);
    auto got = std::async(std::launch::async, [&] { return waiter.try_lock_for(30s); });
    ASSERT_TRUE(eventually([&] { return in_line(server, "expiring") == "1"; }, 20s));
    kill(holder, SIGSTOP);
    const auto stopped = Clock::now();
    ASSERT_TRUE(got.get());
    EXPECT_LT(seconds(Clock::now() - stopped), 1.0 + 0.2 + 1.0) << "the line waited past the lease";
    waiter.unlock();
    kill(holder, SIGKILL);
    dlock::support::wait_child(holder);
}

// A waiter's deadline or stop request that races the release's grant: the
// call returns false with nothing held by it and nobody left in line, or
// true with the lock; never a grant that nobody uses.
TEST(FairLock, GivingUpWhileBeingGrantedLeavesNothingHeld) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    dlock::FairLock holder(holder_client, "race");
    // Its own owner whichever thread calls: the attempt runs on another.
    dlock::FairLock waiter(waiter_client, "race", {.ownership = dlock::Ownership::handle});
    int granted = 0, gave_up = 0;
    for (int round = 0; round < 40; ++round) {
        holder.lock();
        std::stop_source stop;
        const auto deadline = Clock::now() + 100ms;
        auto attempt = std::async(std::launch::async, [&] {
            return round % 2 == 0 ? waiter.try_lock_until(deadline) : waiter.lock(stop.get_token());
        });
        // In line; or, on a machine slow enough that the waiter's 100 ms ran
        // out before this looked, already given up (the round then checks
        // only that nothing is left).
        ASSERT_TRUE(eventually(
            [&] { return in_line(server, "race") == "1" || attempt.wait_for(0s) == std::future_status::ready; }, 10s));
        // Release at, just before or just after the moment the waiter gives up.
        std::this_thread::sleep_until(deadline - 2ms + std::chrono::microseconds(round * 100));
        if (round % 2 == 1) stop.request_stop();
        holder.unlock();
        if (attempt.get()) {
            ++granted;
            waiter.unlock();
        } else {
            ++gave_up;
        }
        ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("race")}) == "0"; }, 3s))
            << "round " << round << ": held by " << server.cli({"HGET", lock_key("race"), "owner"})
            << " after the waiter " << (granted ? "unlocked" : "gave up");
        EXPECT_EQ(in_line(server, "race"), "0") << "round " << round;
    }
    EXPECT_EQ(granted + gave_up, 40);
}

// The grant notice to a waiter is lost with its connections (held by a silent
// network, then dropped): once its subscriber is back it checks at once and finds
// the lock granted to it, instead of sleeping until its next refresh.
TEST(FairLock, AGrantMissedWhileTheSubscriberWasAwayIsFoundOnReconnect) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    // A long waiter_lease: its refresh (every 4 s) would be the slow way.
    const dlock::LockOptions options{.ownership = dlock::Ownership::handle, .waiter_lease = 12s};
    dlock::Client holder_client(server.uri());
    dlock::FairLock holder(holder_client, "missed", options);
    holder.lock();
    dlock::Client waiter_client(proxy.uri());
    dlock::FairLock waiter(waiter_client, "missed", options);
    auto got = std::async(std::launch::async, [&] { return waiter.try_lock_for(30s); });
    ASSERT_TRUE(eventually([&] { return in_line(server, "missed") == "1"; }, 20s));
    proxy.black_hole(true);
    holder.unlock();  // granted to the waiter; its notice is held in the proxy
    ASSERT_NE(server.cli({"HGET", lock_key("missed"), "granted"}), "") << "not an unconfirmed grant";
    std::this_thread::sleep_for(200ms);
    // The notice is thrown away with the connections; new ones are served.
    const auto back = Clock::now();
    proxy.drop_connections();
    proxy.black_hole(false);
    ASSERT_TRUE(got.get());
    EXPECT_LT(seconds(Clock::now() - back), 2.0) << "the waiter slept on after its subscriber came back";
    waiter.unlock();
}
