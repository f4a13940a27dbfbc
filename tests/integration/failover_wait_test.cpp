// Waiters ride through a failover: a holder and waiters on a Sentinel URL or
// a Redis Cluster, kill -9 of the master under them, and every waiter takes
// its lock on the new master before its deadline (outage.hpp), instead of
// failing with the dead master's "connection refused".
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <thread>

#include "dlock/async.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/semaphore.hpp"
#include "cluster_deployment.hpp"
#include "sentinel_deployment.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using dlock::test::seconds_since;

namespace {

// A waiter on its own thread: whether it acquired, or its error.
struct Outcome {
    bool acquired = false;
    std::error_code ec;
    std::string what;
};

template <typename Acquire>
std::future<Outcome> wait_in_background(Acquire acquire) {
    return std::async(std::launch::async, [acquire]() mutable {
        Outcome outcome;
        try {
            outcome.acquired = acquire();
        } catch (const dlock::Error& e) {
            outcome.ec = e.code();
            outcome.what = e.what();
        }
        return outcome;
    });
}

void expect_acquired(std::future<Outcome>& waiter, const std::string& kind, Clock::time_point killed) {
    ASSERT_EQ(waiter.wait_for(40s), std::future_status::ready) << kind << ": no outcome 40 s after the kill";
    const auto outcome = waiter.get();
    EXPECT_TRUE(outcome.acquired) << kind << ": " << outcome.what;
    EXPECT_FALSE(outcome.ec) << kind << ": " << outcome.what;
    if (outcome.acquired)
        std::printf("[ figure ] %s: the waiter acquired %.2f s after the kill -9 of the master\n", kind.c_str(),
                seconds_since(killed));
}

}  // namespace

TEST(FailoverWait, WaitersOnASentinelUrlRideThroughAKilledMaster) {
    dlock::support::SentinelDeployment deployment;
    dlock::Client holder(deployment.uri()), waiting(deployment.uri());
    // Short leases: the waiters wake (at the holder's lease end) during the outage.
    const dlock::LockOptions short_lease{.lease = 1000ms};
    dlock::Lock held(holder, "ha:kill", short_lease);
    dlock::FairLock held_fair(holder, "ha:fair", short_lease);
    dlock::Semaphore held_sem(holder, "ha:sem", {.limit = 1, .lease = 1000ms});
    held.lock();
    held_fair.lock();
    auto permit = held_sem.acquire();

    dlock::Lock lock(waiting, "ha:kill", {.lease = 3s});
    dlock::FairLock fair(waiting, "ha:fair", {.lease = 3s});
    dlock::Semaphore sem(waiting, "ha:sem", {.limit = 1, .lease = 3s});
    // Held (and checked) by the waiting thread, its owner.
    std::string owner_on_new_master;
    auto lock_waiter = wait_in_background([&] {
        if (!lock.try_lock_for(45s)) return false;
        const bool held_now = lock.is_held();
        // The node that is master now, not what the first sentinel says: the
        // client may have reached the new master before every sentinel named it.
        if (auto* master = deployment.running_master())
            owner_on_new_master = master->cli({"HGET", "dlock:{ha:kill}", "owner"});
        lock.unlock();
        return held_now;
    });
    auto sem_waiter = wait_in_background([&] { return static_cast<bool>(sem.try_acquire_for(45s)); });
    // The asynchronous form, on the client's fiber thread.
    auto fair_hold = dlock::async_try_lock_for(fair, 45s, asio::use_future);
    std::this_thread::sleep_for(500ms);  // all in line
    deployment.wait_replicated();
    const auto killed = Clock::now();
    const auto old_port = deployment.kill_master();
    deployment.wait_for_new_master(old_port);
    std::printf("[ figure ] the sentinels named a new master %.2f s after the kill\n", seconds_since(killed));
    // The holders let go (their holds may have run out during the outage).
    std::error_code ignored;
    held.unlock(ignored);
    held_fair.unlock(ignored);
    permit.release(ignored);

    expect_acquired(lock_waiter, "Lock", killed);
    expect_acquired(sem_waiter, "Semaphore", killed);
    ASSERT_EQ(fair_hold.wait_for(40s), std::future_status::ready) << "FairLock (async): no outcome";
    try {
        auto hold = fair_hold.get();
        EXPECT_TRUE(hold.is_held()) << "FairLock (async)";
    } catch (const std::system_error& e) {
        ADD_FAILURE() << "FairLock (async): " << e.what();
    }
    EXPECT_NE(owner_on_new_master, "") << "not taken on the new master";
}

TEST(FailoverWait, AWaiterOnAClusterRidesThroughAKilledMaster) {
    dlock::support::ClusterDeployment cluster;
    dlock::Client holder(cluster.uri()), waiting(cluster.uri());
    const std::string name = "ha:cluster";
    const int slot = cluster.key_slot("dlock:{" + name + "}");
    const auto old_master = cluster.master_for_slot(slot);
    dlock::Lock held(holder, name, {.lease = 1000ms});
    held.lock();
    dlock::Lock lock(waiting, name, {.lease = 3s});
    auto waiter = wait_in_background([&] {
        if (!lock.try_lock_for(45s)) return false;
        const bool held_now = lock.is_held();
        lock.unlock();
        return held_now;
    });
    std::this_thread::sleep_for(500ms);  // in line
    const auto killed = Clock::now();
    cluster.kill_node(old_master);
    cluster.wait_cluster_ok(std::chrono::seconds(30), slot, old_master);
    std::printf("[ figure ] the cluster served the slot again %.2f s after the kill\n", seconds_since(killed));
    std::error_code ignored;
    held.unlock(ignored);
    expect_acquired(waiter, "Lock (cluster)", killed);
}
