// The read-write lock against a real server, in one process (and a few
// forked children where a holder must die).
#include <gtest/gtest.h>

#include <atomic>
#include <concepts>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <unistd.h>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/rw_lock.hpp"
#include "eventually.hpp"
#include "lockable.hpp"
#include "lock/lock_scripts.hpp"
#include "held_reader.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// std::unique_lock for the write side, std::shared_lock for the read side.
static_assert(dlock::support::Lockable<dlock::RwLock>);
static_assert(dlock::support::TimedLockable<dlock::RwLock>);
static_assert(dlock::support::SharedLockable<dlock::RwLock>);
static_assert(dlock::support::SharedTimedLockable<dlock::RwLock>);
static_assert(noexcept(std::declval<dlock::RwLock&>().unlock()));
static_assert(noexcept(std::declval<dlock::RwLock&>().unlock_shared()));
static_assert(std::is_nothrow_move_constructible_v<dlock::RwLock>);

using dlock::test::lock_key;

namespace {

using dlock::support::eventually;

// The readers in Redis, by the server's own answer.
long reader_members(const dlock::support::RedisServer& server, const std::string& name) {
    return std::stol(server.cli({"ZCARD", lock_key(name) + ":readers"}));
}

using Reader = dlock::support::HeldReader;

}  // namespace

TEST(RwLockScripts, EachLoadsIntoARealServerWithItsEmbeddedSha1) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    for (const dlock::Script* s :
         {&dlock::detail::rw_write_acquire_script(), &dlock::detail::rw_write_withdraw_script(),
          &dlock::detail::rw_read_acquire_script(), &dlock::detail::rw_read_release_script(),
          &dlock::detail::rw_read_renew_script()}) {
        EXPECT_EQ(client.command({"SCRIPT", "LOAD", s->text()}).text, s->sha1());
        EXPECT_EQ(s->sha1(), dlock::sha1_hex(s->text()));
    }
}

TEST(RwLock, BadInputIsATypedError) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto code_of = [&](auto make) {
        try {
            make();
        } catch (const dlock::Error& e) {
            return e.code();
        }
        return std::error_code();
    };
    EXPECT_EQ(code_of([&] { dlock::RwLock l(client, ""); }), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::RwLock l(client, "x", {.lease = 1ms}); }), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::RwLock l(client, "x", {.retention = 10ms}); }), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::RwLock l(client, std::string(dlock::max_lock_name_bytes + 1, 'n')); }),
              dlock::errc::invalid_argument);
    dlock::RwLock lock = client.rw_lock("x");
    std::error_code ec;
    lock.unlock_shared(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(RwLock, ReadersShareAndAWriterWaitsForAllOfThem) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    {
        std::shared_lock mine(lock);
        Reader other(lock);
        EXPECT_EQ(reader_members(server, "doc"), 2);
        std::atomic<bool> wrote{false};
        std::thread writer([&] {
            std::unique_lock guard(lock);
            wrote = true;
            EXPECT_EQ(reader_members(server, "doc"), 0);
        });
        std::this_thread::sleep_for(200ms);
        EXPECT_FALSE(wrote);
        other.release();
        std::this_thread::sleep_for(100ms);
        EXPECT_FALSE(wrote) << "one reader is still in";
        mine.unlock();
        writer.join();
        EXPECT_TRUE(wrote);
    }
}

TEST(RwLock, AWriterExcludesReadersWhoWakeByPushOnItsRelease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");  // 30 s lease: a wake-up by timeout would take that long
    lock.lock();
    const auto token = lock.fencing_token();
    std::atomic<bool> read{false};
    std::uint64_t reader_token = 0;
    std::thread reader([&] {
        EXPECT_FALSE(lock.try_lock_shared());
        lock.lock_shared();
        read = true;
        reader_token = lock.shared_fencing_token();
        lock.unlock_shared();
    });
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(read);
    const auto released = Clock::now();
    lock.unlock();
    reader.join();
    EXPECT_LT(Clock::now() - released, 2s);
    EXPECT_EQ(reader_token, token) << "a reader gets the token of the last write it follows";
    lock.lock();
    EXPECT_GT(lock.fencing_token(), token);
    lock.unlock();
}

TEST(RwLock, WriteReentryCountsAndNeverGrowsTheExpiryPastOneLease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("deep", {.lease = 2s});
    lock.lock();
    const auto token = lock.fencing_token();
    for (int i = 1; i < 50; ++i) lock.lock();
    EXPECT_EQ(lock.hold_count(), 50u);
    EXPECT_EQ(lock.fencing_token(), token);
    EXPECT_LE(std::stoll(server.cli({"PTTL", lock_key("deep")})), 2000);
    for (int i = 0; i < 49; ++i) lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("deep")}), "1");
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("deep")}), "0");
}

TEST(RwLock, ReadReentryIsCountedInOneFieldNotAKeyPerEntry) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 2s});
    for (int i = 0; i < 20; ++i) lock.lock_shared();
    EXPECT_EQ(lock.shared_hold_count(), 20u);
    EXPECT_EQ(reader_members(server, "doc"), 1);
    // The readers, their state, the fence: no key per re-entry.
    EXPECT_EQ(server.cli({"DBSIZE"}), "3");
    EXPECT_LE(std::stoll(server.cli({"PTTL", lock_key("doc") + ":readers"})), 2000);
    for (int i = 0; i < 19; ++i) lock.unlock_shared();
    EXPECT_EQ(reader_members(server, "doc"), 1);
    lock.unlock_shared();
    EXPECT_EQ(reader_members(server, "doc"), 0);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":rstate"}), "0");
}

TEST(RwLock, ReadLeasesAreRenewedByTheLeaseKeeper) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 300ms});
    lock.lock_shared();
    const auto first_deadline = server.cli({"ZRANGE", lock_key("doc") + ":readers", "0", "0", "WITHSCORES"});
    std::this_thread::sleep_for(1200ms);  // four leases
    EXPECT_TRUE(lock.is_held_shared());
    EXPECT_EQ(reader_members(server, "doc"), 1);
    EXPECT_NE(server.cli({"ZRANGE", lock_key("doc") + ":readers", "0", "0", "WITHSCORES"}), first_deadline);
    std::thread writer([&] { EXPECT_FALSE(lock.try_lock()); });
    writer.join();
    lock.unlock_shared();
}

TEST(RwLock, DowngradeKeepsARenewedReadHold) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 300ms});
    lock.lock();
    const auto token = lock.fencing_token();
    lock.lock_shared();  // granted at once: the writer itself
    EXPECT_EQ(lock.shared_fencing_token(), token);
    lock.unlock();
    EXPECT_FALSE(lock.is_held());
    std::this_thread::sleep_for(1200ms);
    EXPECT_TRUE(lock.is_held_shared()) << "the read hold after a downgrade must be renewed";
    std::thread others([&] {
        EXPECT_TRUE(lock.try_lock_shared()) << "other readers join a downgraded writer";
        lock.unlock_shared();
        EXPECT_FALSE(lock.try_lock());
    });
    others.join();
    lock.unlock_shared();
    EXPECT_EQ(reader_members(server, "doc"), 0);
}

TEST(RwLock, UpgradeIsOnlyATryThatFailsFast) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    lock.lock_shared();
    {
        Reader other(lock);
        const auto start = Clock::now();
        EXPECT_FALSE(lock.try_lock_for(5s)) << "another reader is in";
        EXPECT_LT(Clock::now() - start, 1s) << "an upgrade never waits";
        try {
            lock.lock();
            ADD_FAILURE() << "lock() while reading must not wait";
        } catch (const dlock::Error& e) {
            EXPECT_EQ(e.code(), std::errc::resource_deadlock_would_occur);
        }
        // The failed upgrade left no waiting mark: readers still come in.
        std::thread third([&] {
            EXPECT_TRUE(lock.try_lock_shared());
            lock.unlock_shared();
        });
        third.join();
    }
    EXPECT_TRUE(lock.try_lock()) << "the only reader may upgrade";
    EXPECT_TRUE(lock.is_held());
    EXPECT_TRUE(lock.is_held_shared());
    lock.unlock();
    lock.unlock_shared();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc")}), "0");
}

TEST(RwLock, AWaitingWriterQueuesNewReadersBehindIt) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    Reader first(lock);
    std::atomic<bool> wrote{false};
    std::thread writer([&] {
        lock.lock();
        wrote = true;
        lock.unlock();
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("doc") + ":wwait"}) == "1"; }));
    std::thread late_reader([&] { EXPECT_FALSE(lock.try_lock_shared()) << "behind the waiting writer"; });
    late_reader.join();
    first.release();
    writer.join();
    EXPECT_TRUE(wrote);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":wwait"}), "0");
}

TEST(RwLock, ReaderPreferenceLetsReadersPastAWaitingWriter) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    auto eager = client.rw_lock("doc", {.prefer_readers = true});
    Reader first(lock);
    std::thread writer([&] {
        // Gets in once the first reader leaves, whoever else read meanwhile.
        EXPECT_TRUE(lock.try_lock_for(5s));
        lock.unlock();
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("doc") + ":wwait"}) == "1"; }));
    std::thread reader([&] {
        EXPECT_TRUE(eager.try_lock_shared());
        eager.unlock_shared();
    });
    reader.join();
    first.release();
    writer.join();
}

TEST(RwLock, AWriterThatStopsWaitingLetsReadersInAtOnce) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");  // a 30 s mark if it were left behind
    Reader first(lock);
    std::thread writer([&] { EXPECT_FALSE(lock.try_lock_for(300ms)); });
    writer.join();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":wwait"}), "0");
    std::thread reader([&] {
        EXPECT_TRUE(lock.try_lock_shared());
        lock.unlock_shared();
    });
    reader.join();
}

TEST(RwLock, NoWriterStarvesUnderASteadyStreamOfReaders) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("hot");
    std::atomic<bool> stop{false};
    std::atomic<long> reads{0};
    std::vector<std::thread> readers;
    // Four readers whose holds overlap: the read side is never free while
    // they run, unless new readers queue behind the writer.
    for (int i = 0; i < 4; ++i)
        readers.emplace_back([&, i] {
            std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
            while (!stop) {
                std::shared_lock guard(lock);
                ++reads;
                std::this_thread::sleep_for(40ms);
            }
        });
    ASSERT_TRUE(eventually([&] { return reads > 20; }));
    const auto start = Clock::now();
    const bool wrote = lock.try_lock_for(10s);
    const auto waited = Clock::now() - start;
    if (wrote) lock.unlock();
    stop = true;
    for (auto& r : readers) r.join();
    EXPECT_TRUE(wrote);
    EXPECT_LT(waited, 2s) << "a writer waits for the readers already in, not for the stream";
}

TEST(RwLock, ACrashedReaderProcessFreesItsShareWithinALease) {
    dlock::support::RedisServer server;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = dlock::support::run_in_child([&] {
        dlock::Client client(server.uri());
        auto lock = client.rw_lock("doc", {.lease = 500ms});
        lock.lock_shared();
        char byte = 1;
        (void)!write(ready[1], &byte, 1);
        sleep(60);  // killed long before
        return 0;
    });
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    close(ready[1]);
    std::this_thread::sleep_for(600ms);  // renewed meanwhile: still a reader
    EXPECT_EQ(reader_members(server, "doc"), 1);
    kill(child, SIGKILL);
    dlock::support::wait_child(child);
    const auto killed = Clock::now();
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    EXPECT_TRUE(lock.try_lock_for(5s));
    EXPECT_LT(Clock::now() - killed, 500ms + 300ms);
    lock.unlock();
}

TEST(RwLock, ADeadWaitingWriterProcessHoldsReadersBackForAtMostALease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    Reader first(lock);
    const pid_t child = dlock::support::run_in_child([&] {
        dlock::Client own(server.uri());
        auto writer = own.rw_lock("doc", {.lease = 500ms});
        writer.lock();
        return 0;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("doc") + ":wwait"}) == "1"; }));
    kill(child, SIGKILL);
    dlock::support::wait_child(child);
    const auto killed = Clock::now();
    std::thread reader([&] {
        EXPECT_TRUE(lock.try_lock_shared_for(5s));
        EXPECT_LT(Clock::now() - killed, 500ms + 300ms);
        lock.unlock_shared();
    });
    reader.join();
}

TEST(RwLock, APausedServerLosesTheReadHoldNoLaterThanItsValidity) {
    dlock::support::RedisServer server;
    std::atomic<int> lost{0};
    dlock::Client client(server.uri(), {.command_timeout = 200ms});
    auto lock = client.rw_lock("doc", {.lease = 400ms, .on_lost = [&](std::string_view, std::error_code) { ++lost; }});
    lock.lock_shared();
    const auto valid_until = lock.shared_valid_until();
    std::stop_token token = lock.shared_lost_token();
    server.pause();
    EXPECT_TRUE(eventually([&] { return token.stop_requested(); }, 2s));
    EXPECT_LE(Clock::now(), valid_until + 50ms);
    server.resume();
    EXPECT_FALSE(lock.is_held_shared());
    std::error_code ec;
    lock.unlock_shared(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
    EXPECT_TRUE(eventually([&] { return lost.load() == 1; }));
}

TEST(RwLock, ARestartWithoutDataEndsBothSidesAsLost) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 600ms});
    lock.lock();
    lock.lock_shared();
    auto write_lost = lock.lost_token();
    auto read_lost = lock.shared_lost_token();
    server.restart();
    EXPECT_TRUE(eventually([&] { return write_lost.stop_requested() && read_lost.stop_requested(); }, 3s));
    std::error_code ec;
    lock.unlock_shared(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
    // The lock works again afterwards.
    EXPECT_TRUE(lock.try_lock_shared());
    lock.unlock_shared();
}

TEST(RwLock, NothingStaysPastTheRetentionAndEveryKeyCarriesTheHashTag) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("a b{c", {.lease = 500ms, .retention = 1s});
    lock.lock();
    lock.lock_shared();
    lock.unlock();
    std::thread writer([&] { EXPECT_FALSE(lock.try_lock_for(200ms)); });  // a mark, withdrawn
    writer.join();
    lock.unlock_shared();
    const auto keys = server.cli({"--scan"});
    EXPECT_FALSE(keys.empty());
    std::size_t from = 0;
    while (from < keys.size()) {
        auto end = keys.find('\n', from);
        if (end == std::string::npos) end = keys.size();
        const auto key = keys.substr(from, end - from);
        EXPECT_EQ(key.rfind("dlock:{a b{c}", 0), 0u) << key;
        from = end + 1;
    }
    EXPECT_TRUE(eventually([&] { return server.cli({"DBSIZE"}) == "0"; }, 3s));
}

TEST(RwLock, HandleOwnershipLetsAnotherThreadUnlockEitherSide) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.ownership = dlock::Ownership::handle});
    lock.lock_shared();
    std::thread other([&] {
        EXPECT_TRUE(lock.is_held_shared());
        lock.unlock_shared();
        lock.lock();
    });
    other.join();
    EXPECT_TRUE(lock.is_held());
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc")}), "0");
    EXPECT_EQ(reader_members(server, "doc"), 0);
}

TEST(RwLock, DestroyingTheObjectReleasesWhatItHeld) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    {
        auto lock = client.rw_lock("doc");
        lock.lock_shared();
        lock.lock_shared();
    }
    EXPECT_EQ(reader_members(server, "doc"), 0);
    auto lock = client.rw_lock("doc");
    EXPECT_TRUE(lock.try_lock());
    lock.unlock();
}

namespace {

// Fills the server past its maxmemory: from then on Redis refuses writes
// that could grow memory (an OOM error), and lets those that free it through.
void exhaust_memory(const dlock::support::RedisServer& server, dlock::Client& client) {
    server.cli({"CONFIG", "SET", "maxmemory", "0"});
    client.command({"SET", "filler", std::string(2 << 20, 'x')});
    server.cli({"CONFIG", "SET", "maxmemory", "1mb"});
}

}  // namespace

TEST(RwLock, OutOfMemoryRefusesBothSidesWithRedisText) {
    dlock::support::RedisServer server({.extra_args = {"--maxmemory-policy", "noeviction"}});
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    // Each script's bookkeeping that frees memory (the writer's mark taken
    // off, expired readers and marks pruned) must come after the grant's
    // writes: a script's first write decides whether it may write at all.
    exhaust_memory(server, client);
    for (bool shared : {false, true}) {
        std::error_code ec;
        const bool acquired = shared ? lock.try_lock_shared(ec) : lock.try_lock(ec);
        EXPECT_FALSE(acquired) << (shared ? "read" : "write");
        EXPECT_EQ(ec, dlock::errc::server_error) << ec.message();
        EXPECT_NE(dlock::last_server_error().find("OOM"), std::string::npos) << dlock::last_server_error();
    }
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc")}), "0");
}

TEST(RwLock, ReadLeasesAreStillRenewedWhenRedisIsOutOfMemory) {
    dlock::support::RedisServer server({.extra_args = {"--maxmemory-policy", "noeviction"}});
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 300ms});
    lock.lock();         // the write side, renewed by renew.lua
    lock.lock_shared();  // and the read side (the writer may read)
    exhaust_memory(server, client);
    std::this_thread::sleep_for(1200ms);  // four leases
    EXPECT_TRUE(lock.is_held_shared()) << "a renewal refused for want of memory loses the read hold";
    EXPECT_TRUE(lock.is_held());
    lock.unlock();
    lock.unlock_shared();
}

TEST(RwLock, AWaiterChecksOnceAfterTheSubscriberReconnects) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");  // 30 s lease: only a check at once finds it free in time
    lock.lock();
    std::atomic<bool> read{false};
    std::thread reader([&] {
        lock.lock_shared();
        read = true;
        lock.unlock_shared();
    });
    // Waiting, and subscribed to the lock's channel.
    ASSERT_TRUE(eventually([&] { return server.cli({"PUBSUB", "NUMSUB", lock_key("doc") + ":ch"}).find("\n1") !=
                                        std::string::npos; }));
    std::this_thread::sleep_for(100ms);
    // The writer's hash goes without a release message (as after a restart
    // that kept nothing), and the subscriber's connection drops: only the
    // check after the resubscription can tell the reader.
    server.cli({"DEL", lock_key("doc")});
    const auto dropped = Clock::now();
    server.cli({"CLIENT", "KILL", "TYPE", "pubsub"});
    EXPECT_TRUE(eventually([&] { return read.load(); }, 5s));
    EXPECT_LT(Clock::now() - dropped, 5s);
    reader.join();
    std::error_code ec;
    lock.unlock(ec);  // its hash was deleted behind its back
}

TEST(RwLock, DeadlinesAndStopRequestsEndAWaitOnEitherSide) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc");
    lock.lock();
    std::thread others([&] {
        auto start = Clock::now();
        EXPECT_FALSE(lock.try_lock_shared_for(300ms));
        EXPECT_GE(Clock::now() - start, 300ms);
        EXPECT_LT(Clock::now() - start, 1s);
        start = Clock::now();
        EXPECT_FALSE(lock.try_lock_until(std::chrono::system_clock::now() + 300ms));
        EXPECT_LT(Clock::now() - start, 1s);
        std::stop_source stop;
        std::thread stopper([&] {
            std::this_thread::sleep_for(200ms);
            stop.request_stop();
        });
        start = Clock::now();
        EXPECT_FALSE(lock.lock_shared(stop.get_token()));
        EXPECT_LT(Clock::now() - start, 1s);
        stopper.join();
    });
    others.join();
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":wwait"}), "0") << "the stopped writer's mark is gone";
}
