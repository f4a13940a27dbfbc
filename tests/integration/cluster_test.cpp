// Locks on a Redis Cluster of three masters with a replica each
// (support/cluster_deployment.hpp): names across slots from threads and
// processes, names with braces, MOVED, ASK and TRYAGAIN, a held and
// contended lock whose slot migrates, failovers, and the typed errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "acquirable.hpp"
#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/semaphore.hpp"
#include "cluster_deployment.hpp"
#include "scripted_server.hpp"
#include "tcp_proxy.hpp"
#include "eventually.hpp"
#include "hold/lock_keys.hpp"
#include "redis/client_core.hpp"
#include "redis/cluster_slots.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::ClusterDeployment;
using dlock::support::ScriptedServer;
using dlock::support::eventually;

using dlock::test::seconds_since;

namespace {

std::string key_of(const std::string& name) { return dlock::detail::LockKeys(name).lock; }

// One cluster for the tests that leave it as they found it.
ClusterDeployment& shared_cluster() {
    static ClusterDeployment cluster;
    return cluster;
}

// A master other than `not_this`.
std::uint16_t another_master(ClusterDeployment& cluster, std::uint16_t not_this) {
    for (int slot : {0, 8000, 16000}) {
        auto port = cluster.master_for_slot(slot);
        if (port != not_this) return port;
    }
    throw std::runtime_error("no other master");
}

// Begins migrating the slot of name's lock from `from` to `to` and moves
// only its fence: a lock script naming the fence and the (absent) lock key
// together gets TRYAGAIN while the slot's keys are split. Another key stays
// behind, so that keys remain on both sides.
void split_slot(ClusterDeployment& cluster, const std::string& name, std::uint16_t from, std::uint16_t to) {
    const int slot = cluster.key_slot(key_of(name));
    cluster.begin_migration(slot, from, to);
    cluster.node_on_port(from).cli({"MIGRATE", "127.0.0.1", std::to_string(to), key_of(name) + ":fence", "0", "5000"});
    cluster.node_on_port(from).cli({"SET", key_of(name) + ":other", "x"});
}

void end_split(ClusterDeployment& cluster, const std::string& name, std::uint16_t from, std::uint16_t to) {
    const int slot = cluster.key_slot(key_of(name));
    cluster.move_keys(slot, from, to);
    cluster.finish_migration(slot, from, to);
}

// Splits the slot of name's lock now (towards another master) and ends the
// split `lasting` later, on the thread returned (the caller joins it).
std::thread split_for(ClusterDeployment& cluster, const std::string& name, std::chrono::milliseconds lasting) {
    const auto from = cluster.master_for_slot(cluster.key_slot(key_of(name))), to = another_master(cluster, from);
    split_slot(cluster, name, from, to);
    return std::thread([&cluster, name, from, to, lasting] {
        std::this_thread::sleep_for(lasting);
        end_split(cluster, name, from, to);
    });
}

// try_lock_for, with what it threw (if anything) in `failure`.
bool try_lock_noting(dlock::Lock& lock, std::chrono::milliseconds timeout, std::string& failure) {
    try {
        return lock.try_lock_for(timeout);
    } catch (const dlock::Error& e) {
        failure = e.what();
        return false;
    }
}

// One node that serves every slot, named on port.
std::string slots_reply(std::uint16_t port) {
    return ScriptedServer::array({ScriptedServer::array(
        {":0\r\n", ":16383\r\n",
         ScriptedServer::array({ScriptedServer::bulk("127.0.0.1"), ":" + std::to_string(port) + "\r\n",
                                ScriptedServer::bulk("id")})})});
}

bool has(const std::vector<std::string>& command, const std::string& word) {
    return std::find(command.begin(), command.end(), word) != command.end();
}

}  // namespace

TEST(Cluster, ManyNamesAcrossSlotsFromThreadsAndProcessesKeepExactCounters) {
    auto& cluster = shared_cluster();
    constexpr int names = 100, threads = 4, rounds = 3, processes = 2;
    // Each process adds to a counter per name in Redis by read-modify-write
    // under the lock: a lost update shows as a count short.
    auto work = [&] {
        dlock::Client client(cluster.uri());
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) {
            workers.emplace_back([&, t] {
                for (int r = 0; r < rounds; ++r) {
                    for (int n = 0; n < names; ++n) {
                        const auto name = "counter-" + std::to_string((n + t * 7) % names);
                        auto lock = client.lock(name);
                        lock.lock();
                        const std::string counter = "count:{" + name + "}";
                        auto value = client.command({"GET", counter});
                        const long next = (value.is_nil() ? 0 : std::stol(value.text)) + 1;
                        client.command({"SET", counter, std::to_string(next)});
                        lock.unlock();
                    }
                }
            });
        }
        for (auto& worker : workers) worker.join();
        return 0;
    };
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) children.push_back(dlock::support::run_in_child(work));
    for (auto child : children) EXPECT_EQ(dlock::support::wait_child(child), 0);
    dlock::Client client(cluster.uri());
    std::map<std::uint16_t, int> per_master;
    for (int n = 0; n < names; ++n) {
        const auto name = "counter-" + std::to_string(n);
        const std::string counter = "count:{" + name + "}";
        EXPECT_EQ(client.command({"GET", counter}).text, std::to_string(processes * threads * rounds)) << name;
        client.command({"DEL", counter});
        ++per_master[cluster.master_for_slot(cluster.key_slot(key_of(name)))];
    }
    EXPECT_EQ(per_master.size(), 3u) << "the names should spread over every master";
}

TEST(Cluster, NamesWithBracesKeepEveryKeyInOneSlot) {
    auto& cluster = shared_cluster();
    dlock::Client a(cluster.uri()), b(cluster.uri());
    for (std::string name : {"}", "x{}y", "{a}", "}{", "50%}"}) {
        auto held = a.lock(name);
        held.lock();
        // Every key the lock made is in the lock key's slot (the server
        // would have refused a script touching two slots anyway).
        const int slot = cluster.key_slot(key_of(name));
        EXPECT_EQ(cluster.key_slot(key_of(name) + ":fence"), slot) << name;
        // Listed by its own name, read back from its key on that slot's master.
        bool listed = false;
        for (const auto& [listed_name, info] : dlock::list_locks(a, "*")) listed |= listed_name == name && info.held;
        EXPECT_TRUE(listed) << name;
        auto rival = b.lock(name);
        EXPECT_FALSE(rival.try_lock()) << name;
        std::promise<bool> got;
        std::thread waiting([&] { got.set_value(rival.try_lock_for(10s)); });
        std::this_thread::sleep_for(100ms);
        held.unlock();
        EXPECT_TRUE(got.get_future().get()) << name;
        waiting.join();
        EXPECT_EQ(dlock::inspect_lock(a, name).slot, slot) << name;
        rival.unlock();
    }
}

TEST(Cluster, MovedAfterAMigrationIsFollowed) {
    ClusterDeployment cluster;
    // No refresh but the ones a MOVED asks for.
    dlock::Client client(cluster.uri(), {.cluster_refresh_interval = std::chrono::hours(1)});
    const std::string name = "moving";
    auto lock = client.lock(name);
    lock.lock();  // the client has its map now
    lock.unlock();
    const int slot = cluster.key_slot(key_of(name));
    const auto from = cluster.master_for_slot(slot), to = another_master(cluster, from);
    cluster.migrate_slot(slot, from, to);
    // MOVED, or the refresh that the moved channel of its inbox asked for:
    // either way the lock is taken on the new owner.
    ASSERT_TRUE(lock.try_lock_for(5s));
    EXPECT_EQ(cluster.node_on_port(to).cli({"EXISTS", key_of(name)}), "1");
    lock.unlock();
    // A plain key in a slot where this client listens on no channel (whose
    // server would push SUNSUBSCRIBE, and the client refresh its map): the
    // map goes stale, and the next command meets MOVED.
    const std::string probe = "moved-probe";
    const int probe_slot = cluster.key_slot(probe);
    ASSERT_NE(probe_slot, slot);
    client.command({"SET", probe, "v"});
    const auto probe_from = cluster.master_for_slot(probe_slot), probe_to = another_master(cluster, probe_from);
    cluster.migrate_slot(probe_slot, probe_from, probe_to);
    const auto moved_before = client.core()->cluster()->counts().moved;
    EXPECT_EQ(client.command({"GET", probe}).text, "v");
    EXPECT_EQ(client.core()->cluster()->counts().moved, moved_before + 1);
}

// Mid-migration the source answers ASK for a key it no longer has, and
// the target serves it after ASKING. A lock script's keys are then split
// or missing, which Redis answers TRYAGAIN until the migration ends: the
// acquisition waits for that, within its deadline, and never fails for it.
TEST(Cluster, AskDuringAMigrationIsFollowed) {
    ClusterDeployment cluster;
    dlock::Client client(cluster.uri());
    const std::string name = "asked";
    auto lock = client.lock(name);
    lock.lock();
    lock.unlock();  // leaves the fence behind, on the source
    const std::string plain = key_of(name) + ":plain";
    client.command({"SET", plain, "here"});
    const int slot = cluster.key_slot(key_of(name));
    const auto from = cluster.master_for_slot(slot), to = another_master(cluster, from);
    const auto token_before = dlock::inspect_lock(client, name).last_fencing_token;
    cluster.begin_migration(slot, from, to);
    cluster.move_keys(slot, from, to);
    const auto asks_before = cluster.node_on_port(to).command_calls("asking");
    const auto counted_before = client.core()->cluster()->counts().asked;
    EXPECT_EQ(client.command({"GET", plain}).text, "here");  // ASK, then ASKING + GET on the target
    EXPECT_EQ(cluster.node_on_port(to).command_calls("asking"), asks_before + 1);
    EXPECT_EQ(client.core()->cluster()->counts().asked, counted_before + 1);
    std::thread finisher([&] {
        std::this_thread::sleep_for(500ms);
        cluster.finish_migration(slot, from, to);
    });
    ASSERT_TRUE(lock.try_lock_for(10s));
    EXPECT_GT(lock.fencing_token(), token_before);  // the fence moved with the slot
    EXPECT_EQ(cluster.node_on_port(to).cli({"EXISTS", key_of(name)}), "1");
    finisher.join();
    lock.unlock();
}

TEST(Cluster, TryAgainIsRetriedUntilTheMigrationEnds) {
    ClusterDeployment cluster;
    dlock::Client client(cluster.uri());
    const std::string name = "split";
    auto lock = client.lock(name);
    lock.lock();
    lock.unlock();
    auto finisher = split_for(cluster, name, 500ms);
    const auto started = Clock::now();
    const auto retried_before = client.core()->cluster()->counts().retried;
    EXPECT_TRUE(lock.try_lock_for(10s));
    EXPECT_GE(seconds_since(started), 0.4);  // it waited for the migration, it did not fail
    EXPECT_GT(client.core()->cluster()->counts().retried, retried_before);
    finisher.join();
    lock.unlock();
}

// A migration that keeps the keys split for longer than a command timeout
// and the whole retry window: the acquisition is sent again for as long as
// its caller waits, instead of failing with the cluster's TRYAGAIN.
TEST(Cluster, TryAgainLongerThanTheRetryWindowIsWaitedOutWithinTheCallersDeadline) {
    ClusterDeployment cluster;
    dlock::ClientOptions options;
    options.connect_timeout = 500ms;
    options.command_timeout = 500ms;
    dlock::Client client(cluster.uri(), options);
    const std::string name = "long-split";
    auto lock = client.lock(name);
    lock.lock();
    lock.unlock();
    const auto from = cluster.master_for_slot(cluster.key_slot(key_of(name))), to = another_master(cluster, from);
    auto finisher = split_for(cluster, name, 3s);  // three times connect + command timeout
    const auto started = Clock::now();
    std::string failure;
    const bool acquired = try_lock_noting(lock, 30s, failure);
    finisher.join();
    EXPECT_TRUE(failure.empty()) << "failed before its deadline: " << failure;
    EXPECT_TRUE(acquired);
    EXPECT_GE(seconds_since(started), 2.5);  // it waited the migration out
    if (acquired) lock.unlock();

    // With a deadline inside the migration, the caller hears at its
    // deadline, not before: no attempt was answered, so as with a server
    // that does not answer, command_timeout. Nothing is left held.
    split_slot(cluster, name, to, from);
    const auto short_start = Clock::now();
    std::error_code short_ec;
    const bool short_acquired = lock.try_lock_until(Clock::now() + 1500ms, short_ec);
    const double waited = seconds_since(short_start);
    end_split(cluster, name, to, from);
    EXPECT_FALSE(short_acquired);
    EXPECT_EQ(short_ec, dlock::errc::command_timeout) << short_ec.message();
    EXPECT_GE(waited, 1.4);
    EXPECT_LT(waited, 10.0);
    EXPECT_TRUE(lock.try_lock_for(10s));  // nothing was left held by the walked-away call
    lock.unlock();
}

TEST(Cluster, AHeldContendedLockFollowsItsSlotMigration) {
    ClusterDeployment cluster;
    dlock::Client holder_client(cluster.uri()), waiter_client(cluster.uri());
    const std::string name = "migrating-held";
    std::atomic<int> losses{0};
    auto held = holder_client.lock(name, {.lease = 1500ms, .on_lost = [&](auto, auto) { ++losses; }});
    held.lock();
    const auto token = held.fencing_token();
    auto waiter = waiter_client.lock(name, {.lease = 1500ms});
    std::promise<std::uint64_t> got;
    std::thread waiting([&] { got.set_value(waiter.try_lock_for(30s) ? waiter.fencing_token() : 0); });
    std::this_thread::sleep_for(300ms);  // in line
    const int slot = cluster.key_slot(key_of(name));
    const auto from = cluster.master_for_slot(slot), to = another_master(cluster, from);
    cluster.migrate_slot(slot, from, to);
    // Renewed on the new owner for several leases.
    std::this_thread::sleep_for(2500ms);
    EXPECT_TRUE(held.is_held());
    EXPECT_EQ(losses.load(), 0);
    EXPECT_EQ(cluster.node_on_port(to).cli({"HGET", key_of(name), "token"}), std::to_string(token));
    auto future = got.get_future();
    EXPECT_EQ(future.wait_for(0s), std::future_status::timeout) << "granted while held";
    held.unlock();
    // The waiter hears of the release on the new owner (its subscription moved).
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready) << "the waiter was not served after the migration";
    EXPECT_GT(future.get(), token);
    waiting.join();
    waiter.unlock();
}

TEST(Cluster, AFailedOverMasterKeepsItsReplicatedHolds) {
    ClusterDeployment cluster;
    dlock::Client client(cluster.uri()), other(cluster.uri());
    const std::string name = "failing-over";
    std::atomic<int> losses{0};
    auto held = client.lock(name, {.lease = 1500ms, .on_lost = [&](auto, auto) { ++losses; }});
    held.lock();
    const int slot = cluster.key_slot(key_of(name));
    const auto old_master = cluster.master_for_slot(slot);
    std::this_thread::sleep_for(200ms);  // replicated
    const auto new_master = cluster.failover_replica_of(old_master);
    std::this_thread::sleep_for(2500ms);
    EXPECT_TRUE(held.is_held());
    EXPECT_EQ(losses.load(), 0);
    EXPECT_EQ(dlock::inspect_lock(other, name).server, "127.0.0.1:" + std::to_string(new_master));
    auto rival = other.lock(name);
    EXPECT_FALSE(rival.try_lock());
    held.unlock();
    EXPECT_TRUE(rival.try_lock_for(5s));
    rival.unlock();
}

TEST(Cluster, AKilledMasterIsReplacedAndAcquisitionsResume) {
    ClusterDeployment cluster;
    dlock::Client client(cluster.uri(), {.connect_timeout = 500ms, .command_timeout = 1000ms});
    const std::string name = "killed";
    auto lock = client.lock(name);
    lock.lock();
    lock.unlock();
    const int slot = cluster.key_slot(key_of(name));
    const auto old_master = cluster.master_for_slot(slot);
    const auto started = Clock::now();
    cluster.kill_node(old_master);
    const double resumed = dlock::support::seconds_until_acquirable(client, name, started);
    ASSERT_GE(resumed, 0) << "no acquisition for 30 s after the kill";
    std::printf("[ figure ] kill -9 of a cluster master: acquisitions on its slots succeeded again after %.2f s\n",
                resumed);
    EXPECT_NE(dlock::inspect_lock(client, name).server, "127.0.0.1:" + std::to_string(old_master));
}

TEST(Cluster, ErrorsAreTyped) {
    // A server that is not a cluster: its own words, typed.
    dlock::support::RedisServer plain;
    dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(plain.port()),
                         {.connect_timeout = 500ms, .command_timeout = 1000ms});
    try {
        client.command({"PING"});
        ADD_FAILURE() << "no error";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::server_error);
        EXPECT_NE(std::string(e.what()).find("cluster support disabled"), std::string::npos) << e.what();
    }
    const auto closed = std::to_string(dlock::support::free_port());
    dlock::Client nobody("redis-cluster://127.0.0.1:" + closed, {.connect_timeout = 500ms, .command_timeout = 1000ms});
    std::error_code ec;
    nobody.wait_connected(ec);
    EXPECT_EQ(ec, dlock::errc::connection_refused);
}

// A cluster is one master of a Redlock like any server: its URL is enough.
// Before any slot map is in, a command waits for one, but never past its
// own deadline, however many silent seeds are asked in turn.
TEST(Cluster, ACommandWaitingForTheFirstSlotMapEndsAtItsDeadline) {
    // Seeds that accept and then say nothing: each is asked for the map in
    // turn, for up to a command timeout each.
    dlock::support::RedisServer plain;
    std::vector<std::unique_ptr<dlock::support::TcpProxy>> silent;
    std::string uri = "redis-cluster://";
    for (int i = 0; i < 6; ++i) {
        silent.push_back(std::make_unique<dlock::support::TcpProxy>(plain.port()));
        silent.back()->black_hole(true);
        uri += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(silent.back()->port());
    }
    dlock::Client client(uri, {.connect_timeout = 1000ms, .command_timeout = 1000ms});
    // Its completion, not just the caller's wait: a lock call whose caller
    // walked away keeps its owner's next call waiting until it completes.
    std::promise<std::pair<std::error_code, double>> completed;
    const auto started = Clock::now();
    const std::string_view ping[] = {"PING"};
    client.core()->submit(ping, [&](std::error_code ec, dlock::Reply&&) {
        completed.set_value({ec, seconds_since(started)});
    });
    auto future = completed.get_future();
    ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
    const auto [ec, after] = future.get();
    EXPECT_EQ(ec, dlock::errc::command_timeout) << ec.message();
    EXPECT_LT(after, 3.0);  // its deadline (1 s), not the six seeds' turns (6 s)
}

TEST(Cluster, IsARedlockMasterByItsUrl) {
    auto& cluster = shared_cluster();
    dlock::support::RedisServer a, b;
    dlock::Masters masters({cluster.uri(), a.uri(), b.uri()});
    dlock::Redlock lock(masters, "redlock-over-a-cluster");
    ASSERT_TRUE(lock.try_lock_for(5s));
    EXPECT_TRUE(lock.is_held());
    dlock::Client client(cluster.uri());
    // The call returns once a majority granted; the cluster's grant may come just after.
    EXPECT_TRUE(eventually([&] { return dlock::inspect_lock(client, "redlock-over-a-cluster").held; }, 5s));
    lock.unlock();
    // Likewise the release: unlock() returns once a majority released it.
    EXPECT_TRUE(eventually([&] { return !dlock::inspect_lock(client, "redlock-over-a-cluster").held; }, 5s));
}

// Every lock kind works on a cluster with the URL alone, waiters included:
// the fair lock's direct grants, the read-write lock's sides, a semaphore's
// permits, and a multi-lock whose names live in different slots.
TEST(Cluster, EveryLockKindWorksOnACluster) {
    auto& cluster = shared_cluster();
    dlock::Client a(cluster.uri()), b(cluster.uri());
    auto served = [](auto& holder_unlock, auto take) {
        std::promise<bool> got;
        std::thread waiting([&] { got.set_value(take()); });
        std::this_thread::sleep_for(200ms);
        holder_unlock();
        const bool ok = got.get_future().get();
        waiting.join();
        return ok;
    };
    {
        dlock::FairLock held(a, "kind-fair"), waiter(b, "kind-fair");
        held.lock();
        auto release = [&] { held.unlock(); };
        EXPECT_TRUE(served(release, [&] { return waiter.try_lock_for(10s); }));
        waiter.unlock();
    }
    {
        auto writer = a.rw_lock("kind-rw");
        auto reader = b.rw_lock("kind-rw");
        writer.lock();
        auto release = [&] { writer.unlock(); };
        EXPECT_TRUE(served(release, [&] { return reader.try_lock_shared_for(10s); }));
        reader.unlock_shared();
    }
    {
        dlock::Semaphore first(a, "kind-sem", {.limit = 1}), second(b, "kind-sem", {.limit = 1});
        auto permit = first.acquire();
        ASSERT_TRUE(permit);
        auto release = [&] { permit.release(); };
        EXPECT_TRUE(served(release, [&] { return static_cast<bool>(second.try_acquire_for(10s)); }));
    }
    {
        std::vector<std::string> names{"kind-multi-a", "kind-multi-b", "kind-multi-c"};
        std::set<int> slots;
        for (const auto& name : names) slots.insert(cluster.key_slot(key_of(name)));
        EXPECT_GT(slots.size(), 1u);
        dlock::MultiLock held(a, names), waiter(b, {names.rbegin(), names.rend()});
        held.lock();
        auto release = [&] { held.unlock(); };
        EXPECT_TRUE(served(release, [&] { return waiter.try_lock_for(10s); }));
        waiter.unlock();
    }
}

// A release is not an acquisition: while a slot's keys stay split (a
// resharding that stalled), unlock() and ~Lock still end within the retry
// window rather than wait for the migration.
TEST(Cluster, UnlockIsBoundedByTheRetryWindowWhileASlotStaysSplit) {
    ClusterDeployment cluster;
    dlock::ClientOptions options;
    options.connect_timeout = 500ms;
    options.command_timeout = 500ms;
    dlock::Client client(cluster.uri(), options);
    const std::string name = "stuck-unlock";
    // Owned by the handle: the unlocking thread is not the locking one.
    auto lock = client.lock(name, {.ownership = dlock::Ownership::handle});
    lock.lock();
    const auto from = cluster.master_for_slot(cluster.key_slot(key_of(name))), to = another_master(cluster, from);
    split_slot(cluster, name, from, to);
    std::promise<std::pair<double, std::error_code>> unlocked;
    const auto started = Clock::now();
    std::thread unlocker([&] {
        std::error_code ec;
        lock.unlock(ec);
        unlocked.set_value({seconds_since(started), ec});
    });
    auto future = unlocked.get_future();
    const bool returned_in_time = future.wait_for(8s) == std::future_status::ready;
    // Bounded test: end the migration so the stuck unlock() can return.
    end_split(cluster, name, from, to);
    unlocker.join();
    const auto [after, ec] = future.get();
    EXPECT_TRUE(returned_in_time) << "unlock() was still blocked after 8 s (retry window 1 s); it returned "
                                  << after << " s after the call, only once the migration was ended; ec="
                                  << ec.message();

    // The same for a Lock destroyed while held (release_outstanding()).
    const std::string other = "stuck-dtor";
    auto doomed = std::make_unique<dlock::Lock>(client.lock(other, {.ownership = dlock::Ownership::handle}));
    doomed->lock();
    const auto from2 = cluster.master_for_slot(cluster.key_slot(key_of(other))), to2 = another_master(cluster, from2);
    split_slot(cluster, other, from2, to2);
    std::promise<double> destroyed;
    const auto destroy_start = Clock::now();
    std::thread destroyer([&] {
        doomed.reset();
        destroyed.set_value(seconds_since(destroy_start));
    });
    auto destroyed_future = destroyed.get_future();
    const bool destroyed_in_time = destroyed_future.wait_for(6s) == std::future_status::ready;
    end_split(cluster, other, from2, to2);
    destroyer.join();
    const double destroy_after = destroyed_future.get();
    EXPECT_TRUE(destroyed_in_time) << "~Lock was still blocked after 6 s; it returned after " << destroy_after << " s";
}

// A replica_ack acquisition (its own connection, which cannot follow ASK)
// waits a migration out within its caller's deadline too.
TEST(Cluster, ReplicaAckAcquisitionWaitsOutAMigrationWithinTheCallersDeadline) {
    ClusterDeployment cluster;
    dlock::ClientOptions options;
    options.connect_timeout = 500ms;
    options.command_timeout = 500ms;
    dlock::Client client(cluster.uri(), options);
    const std::string name = "ack-split";
    dlock::LockOptions lock_options;
    lock_options.replica_ack.replicas = 1;
    lock_options.replica_ack.timeout = 500ms;
    auto lock = client.lock(name, lock_options);
    // The slot map first, so that the first lock() meets no migration.
    ASSERT_TRUE(eventually([&] { return client.core()->cluster()->master_for_slot(0).has_value(); }, 10s));
    lock.lock();
    lock.unlock();
    auto finisher = split_for(cluster, name, 4s);
    const auto started = Clock::now();
    std::string failure;
    const bool acquired = try_lock_noting(lock, 20s, failure);
    const double after = seconds_since(started);
    finisher.join();
    EXPECT_TRUE(failure.empty()) << "try_lock_for(20s) threw after " << after << " s: " << failure;
    EXPECT_TRUE(acquired);
    if (acquired) lock.unlock();
}

namespace {

// An acquisition's first copy times out (it may have run and granted) and
// its caller walks away; the later copies are answered TRYAGAIN (or, with
// try_again false, time out too). Returns how many releases (the undo) the
// node saw.
int undo_count_after_walk_away(bool try_again) {
    std::mutex mutex;
    std::string acquire_sha;
    int acquires = 0, others = 0;
    std::atomic<std::uint16_t> port{0};
    ScriptedServer node([&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] == "CLUSTER") return slots_reply(port);
        if (command[0] == "EVALSHA" || command[0] == "EVAL") {
            std::lock_guard lock(mutex);
            if (has(command, "fresh")) {
                acquire_sha = command[1];
                // The first copy: no answer within the command timeout (it
                // may have run). Later copies: TRYAGAIN (or too slow as well,
                // for the control). (A stall, not a skipped reply: replies
                // must stay in order on the connection.)
                if (acquires++ == 0 || !try_again) {
                    std::this_thread::sleep_for(450ms);
                    return "+OK\r\n";
                }
                return "-TRYAGAIN Multiple keys request during rehashing of slot\r\n";
            }
            ++others;  // the undo (a release)
            return ":1\r\n";
        }
        return "-ERR unknown command\r\n";
    });
    port = node.port();
    dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(node.port()),
                         {.connect_timeout = 300ms, .command_timeout = 300ms});
    // The slot map first: on a busy machine, connecting could otherwise take
    // the attempt's whole deadline, and an acquire never sent needs no undo.
    auto router = client.core()->cluster();
    EXPECT_TRUE(eventually([&] { auto m = router->master_for_slot(0); return m && m->port == port; }, 10s));
    auto lock = client.lock("orphan");
    std::error_code ec;
    const bool acquired = lock.try_lock_until(Clock::now() + 700ms, ec);
    EXPECT_FALSE(acquired);
    // The retry window is 0.6 s (1.2 s once re-opened); a generous bound for a busy machine.
    eventually([&] { std::lock_guard lock_guard(mutex); return others >= 1; }, 10s);
    std::lock_guard lock_guard(mutex);
    EXPECT_GE(acquires, 1) << "the attempt sent its acquire";
    return others;
}
}  // namespace

TEST(Cluster, AGrantThatMayHaveRunIsUndoneWhenLaterCopiesTimeOutToo) {
    EXPECT_GE(undo_count_after_walk_away(false), 1) << "control: timeouts only";
}

TEST(Cluster, AGrantThatMayHaveRunIsUndoneEvenIfLaterCopiesGetTryAgain) {
    EXPECT_GE(undo_count_after_walk_away(true), 1)
        << "the first copy timed out (may have granted), later copies got TRYAGAIN: no undo was sent";
}

// A pool of WAIT connections busy when its node left the map is let go once
// its conversation ends, without waiting for another map change.
TEST(Cluster, APoolBusyAtTheMapChangeIsLetGoOnceItsConversationEnds) {
    std::atomic<int> current{1};
    std::atomic<std::uint16_t> port_a{0}, port_b{0};
    auto map_reply = [&] { return slots_reply(current == 1 ? port_a : port_b); };
    auto common = [&](const std::vector<std::string>& command) -> std::string {
        if (command.empty()) return "-ERR empty\r\n";
        if (command[0] == "PING") return "+PONG\r\n";
        if (command[0] == "CLIENT") return "+OK\r\n";
        if (command[0] == "CLUSTER") return map_reply();
        return {};
    };
    ScriptedServer b([&](const std::vector<std::string>& command) -> std::string {
        auto answer = common(command);
        return answer.empty() ? "$-1\r\n" : answer;
    });
    ScriptedServer a([&](const std::vector<std::string>& command) -> std::string {
        auto answer = common(command);
        if (!answer.empty()) return answer;
        // The conversation's command: answered slowly, after the map changed.
        current = 2;
        std::this_thread::sleep_for(1500ms);
        return "$-1\r\n";
    });
    port_a = a.port();
    port_b = b.port();
    dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(a.port()) + ",127.0.0.1:" +
                             std::to_string(b.port()),
                         {.connect_timeout = 300ms, .command_timeout = 300ms, .cluster_refresh_interval = 100ms});
    auto core = client.core();
    auto router = core->cluster();
    ASSERT_TRUE(eventually([&] { auto m = router->master_for_slot(0); return m && m->port == port_a; }, 10s));
    std::promise<std::error_code> done;
    core->submit_dedicated(
        "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", {},
        [&](std::error_code ec, std::vector<dlock::Reply>&&) { done.set_value(ec); }, Clock::now() + 5s);
    auto future = done.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    EXPECT_FALSE(future.get()) << "the conversation ended in step";
    ASSERT_TRUE(eventually([&] { auto m = router->master_for_slot(0); return m && m->port == port_b; }, 10s));
    std::this_thread::sleep_for(3s);  // many periodic refreshes (100 ms), no further change
    EXPECT_EQ(core->cluster_footprint().node_pools, 0u)
        << "the pool of a node the map no longer names is kept (with its idle connection)";
}

// A replica_ack lock made right after its client waits for the first slot map.
TEST(Cluster, AReplicaAckLockRightAfterTheClientIsMadeWaitsForTheSlotMap) {
    ClusterDeployment cluster;
    dlock::Client client(cluster.uri());
    dlock::LockOptions lock_options;
    lock_options.replica_ack.replicas = 1;
    auto lock = client.lock("ack-first", lock_options);
    const auto started = Clock::now();
    std::string failure;
    try {
        lock.lock();
        lock.unlock();
    } catch (const dlock::Error& e) {
        failure = e.what();
    }
    EXPECT_TRUE(failure.empty()) << "lock() threw after " << seconds_since(started) << " s: " << failure;
}

// In a cluster every kind's holder hears a force-release at once on the
// inbox in its name's slot (inbox_of in publish.lua), the permits of a
// Semaphore too: before, a permit's holder learnt of it only at its next
// renewal (a third of its 30 s lease here).
// A waiter in line on a cluster hears of its grant by the releasing
// script's sharded notice, as it listens, not at its next refresh: a
// waiter lease of 60 s refreshes every 20 s, so the grant reaches it within
// 5 s of the release only by the notice. Each client of a cluster sends the
// scripts' cluster text (Script::for_cluster), and the one of a single
// server the plain one (ServerWork.LinePaths: no CLUSTER MYID, no error).
TEST(Cluster, AWaiterIsToldOfItsGrantByTheReleasesNotice) {
    auto& cluster = shared_cluster();
    dlock::Client a(cluster.uri()), b(cluster.uri());
    const dlock::LockOptions options{.waiter_lease = 60s};
    dlock::FairLock held(a, "told-grant", options), waiter(b, "told-grant", options);
    held.lock();
    std::atomic<bool> got{false};
    std::atomic<std::int64_t> got_at_ns{0};
    std::thread waiting([&] {
        got = waiter.try_lock_for(30s);
        got_at_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    });
    std::this_thread::sleep_for(500ms);  // in line: its first refresh is 20 s away
    const auto released_at = std::chrono::steady_clock::now();
    held.unlock();
    waiting.join();
    ASSERT_TRUE(got);
    const auto told_after = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(got_at_ns.load())) -
                            released_at;
    EXPECT_LT(told_after, 5s) << "the grant came at a refresh, not by the notice";
    waiter.unlock();
}

TEST(Cluster, AForceReleaseIsToldAtOnceToEveryKindsHolder) {
    auto& cluster = shared_cluster();
    dlock::Client client(cluster.uri()), admin(cluster.uri());
    auto told_within = [](std::promise<std::error_code>& told) {
        auto future = told.get_future();
        if (future.wait_for(5s) != std::future_status::ready) return std::error_code{};
        return future.get();
    };
    {
        std::promise<std::error_code> told;
        dlock::Semaphore pool(client, "revoked-pool",
                              {.limit = 2, .lease = 30s, .on_lost = [&](std::string_view, std::error_code ec) {
                                   told.set_value(ec);
                               }});
        auto permit = pool.acquire();
        ASSERT_EQ(dlock::force_release(admin, "revoked-pool", {}).broken.size(), 1u);
        EXPECT_EQ(told_within(told), dlock::errc::lock_revoked);
    }
    {
        std::promise<std::error_code> told;
        auto lock = client.lock("revoked-lock", {.lease = 30s, .on_lost = [&](std::string_view, std::error_code ec) {
                                                     told.set_value(ec);
                                                 }});
        lock.lock();
        ASSERT_EQ(dlock::force_release(admin, "revoked-lock", {}).broken.size(), 1u);
        EXPECT_EQ(told_within(told), dlock::errc::lock_revoked);
    }
}
