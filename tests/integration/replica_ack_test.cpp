// LockOptions::replica_ack (Redis WAIT) against a real master and replica.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::lock_key;

namespace {

struct MasterWithReplica {
    // Full sync at once, not after the default 5 s wait for more replicas.
    dlock::support::RedisServer master{{.extra_args = {"--repl-diskless-sync-delay", "0"}}};
    dlock::support::RedisServer replica{
        {.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}}};
    MasterWithReplica() {
        // In step once a write is confirmed by the replica within a short
        // WAIT ("online" alone comes before the replica answers GETACKs).
        dlock::Client probe(master.uri());
        bool synced = eventually(
            [&] {
                probe.command({"SET", "replica-probe", "1"});
                return probe.command({"WAIT", "1", "200"}).integer == 1;
            },
            20s);
        probe.command({"DEL", "replica-probe"});
        if (!synced) ADD_FAILURE() << "replica never acknowledged a write";
    }
};

}  // namespace

TEST(ReplicaAck, AcquiresWhenTheReplicaConfirms) {
    MasterWithReplica servers;
    dlock::Client client(servers.master.uri());
    auto lock = client.lock("replicated", {.replica_ack = {.replicas = 1, .timeout = 2s}});
    const long waits_before = servers.master.command_calls("wait");
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    // WAIT returned only once the replica had the write.
    EXPECT_EQ(servers.replica.cli({"HGET", lock_key("replicated"), "count"}), "1");
    EXPECT_TRUE(lock.try_lock());  // re-entry is acknowledged too
    lock.unlock();
    lock.unlock();
    EXPECT_EQ(servers.master.cli({"EXISTS", lock_key("replicated")}), "0");
    // One WAIT per acquisition (the first and the re-entry), none for releases.
    EXPECT_EQ(servers.master.command_calls("wait") - waits_before, 2);
}

TEST(ReplicaAck, AStoppedReplicaFailsWithinTheTimeoutAndLeavesNoLock) {
    MasterWithReplica servers;
    dlock::Client client(servers.master.uri());
    auto lock = client.lock("unconfirmed", {.replica_ack = {.replicas = 1, .timeout = 300ms}});
    servers.replica.pause();
    auto start = Clock::now();
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::replicas_not_acknowledged);
    EXPECT_GE(Clock::now() - start, 300ms);
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_FALSE(lock.is_held());
    // The grant too few replicas have is undone by a call nobody waits for
    // (sent before try_lock returns; its script may first be loaded): gone
    // soon after, not necessarily at once.
    const auto undone = [&] { return servers.master.cli({"EXISTS", lock_key("unconfirmed")}) == "0"; };
    EXPECT_TRUE(eventually(undone, 2s));
    EXPECT_THROW(lock.lock(), dlock::Error);
    EXPECT_TRUE(eventually(undone, 2s));
    // Other traffic on the shared connection did not wait behind the WAITs.
    auto ping_start = Clock::now();
    auto waiting = std::async(std::launch::async, [&] {
        std::error_code e;
        (void)lock.try_lock(e);
        return e;
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(client.command({"PING"}).text, "PONG");
    EXPECT_LT(Clock::now() - ping_start, 250ms);
    EXPECT_EQ(waiting.get(), dlock::errc::replicas_not_acknowledged);
    servers.replica.resume();
}

TEST(ReplicaAck, ARenewalTheReplicaDoesNotConfirmEndsInLost) {
    MasterWithReplica servers;
    dlock::Client client(servers.master.uri());
    std::promise<std::error_code> lost;
    // A WAIT timeout generous enough for a loaded machine, a third of the lease.
    auto lock = client.lock("renewed", {.lease = 3000ms,
                                        .on_lost = [&](auto, std::error_code ec) { lost.set_value(ec); },
                                        .replica_ack = {.replicas = 1, .timeout = 1000ms}});
    lock.lock();
    servers.replica.pause();
    auto reported = lost.get_future();
    ASSERT_EQ(reported.wait_for(15s), std::future_status::ready);
    // Renewals the replicas did not confirm are unconfirmed renewals: expired.
    EXPECT_EQ(reported.get(), dlock::errc::lease_expired);
    EXPECT_FALSE(lock.is_held());
    servers.replica.resume();
}

// A busy lock wrote nothing a replica must confirm: no WAIT, and the
// caller's deadline and stop hold (WAIT's timeout is far longer here, and
// there is no replica at all).
TEST(ReplicaAck, ABusyLockSendsNoWaitAndDeadlinesAndStopsHold) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), client(server.uri());
    auto holder = holder_client.lock("busy-acked");
    holder.lock();
    auto lock = client.lock("busy-acked", {.replica_ack = {.replicas = 1, .timeout = 5s}});
    const long waits_before = server.command_calls("wait");
    auto start = Clock::now();
    EXPECT_FALSE(lock.try_lock_for(50ms));
    EXPECT_LT(Clock::now() - start, 2s);
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_FALSE(ec) << ec.message();

    std::stop_source stop;
    std::thread stopper([&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    start = Clock::now();
    EXPECT_FALSE(lock.lock(stop.get_token()));
    EXPECT_LT(Clock::now() - start, 2s);
    stopper.join();
    EXPECT_EQ(server.command_calls("wait") - waits_before, 0);
    holder.unlock();
}

// A grant the replicas cannot confirm before the caller's deadline: the
// caller gets its answer by then, and the grant does not stay behind.
TEST(ReplicaAck, AnUnconfirmableGrantEndsAtTheCallersDeadlineAndIsUndone) {
    dlock::support::RedisServer server;  // no replica: WAIT 1 can only time out
    dlock::Client client(server.uri());
    auto lock = client.lock("deadline-acked", {.replica_ack = {.replicas = 1, .timeout = 5s}});
    auto start = Clock::now();
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock_until(Clock::now() + 200ms, ec));
    EXPECT_LT(Clock::now() - start, 2s);
    EXPECT_TRUE(ec == dlock::errc::replicas_not_acknowledged || ec == dlock::errc::command_timeout) << ec.message();
    EXPECT_FALSE(lock.is_held());
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("deadline-acked")}) == "0"; }, 5s));
    // The same owner can go on at once: nothing of that attempt is in the way.
    dlock::Client other(server.uri());
    auto plain = other.lock("deadline-acked");
    EXPECT_TRUE(plain.try_lock_for(2s));
    plain.unlock();
}

TEST(ReplicaAck, BadTimeoutIsATypedError) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    try {
        auto lock = client.lock("x", {.replica_ack = {.replicas = 1, .timeout = 0ms}});
        ADD_FAILURE() << "no error";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::invalid_argument);
    }
}
