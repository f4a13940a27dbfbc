// The multi-lock against a real server: canonical order, all or nothing, one
// deadline, re-entry, one loss for the whole, push wake-ups.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/multi_lock.hpp"
#include "eventually.hpp"
#include "lockable.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

static_assert(dlock::support::Lockable<dlock::MultiLock>);
static_assert(dlock::support::TimedLockable<dlock::MultiLock>);
static_assert(noexcept(std::declval<dlock::MultiLock&>().unlock()), "unlock() must not throw out of a lock_guard");
static_assert(std::is_nothrow_move_constructible_v<dlock::MultiLock>);
static_assert(std::is_nothrow_move_assignable_v<dlock::MultiLock>);

using dlock::test::lock_key;

namespace {

using dlock::support::eventually;
using Tokens = std::vector<std::pair<std::string, std::uint64_t>>;

}  // namespace

TEST(MultiLockInput, NamesAreSortedBytewiseAndDuplicatesCollapse) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock lock(client, {"b", "\xff", "a", "B", "b", "a"});
    EXPECT_EQ(lock.names(), (std::vector<std::string>{"B", "a", "b", "\xff"}));
}

TEST(MultiLockInput, EmptyListsEmptyNamesAndLongNamesAreInvalidArguments) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto code_of = [&](std::vector<std::string> names, dlock::LockOptions options = {}) {
        try {
            dlock::MultiLock lock(client, std::move(names), std::move(options));
        } catch (const dlock::Error& e) {
            return e.code();
        }
        return std::error_code{};
    };
    EXPECT_EQ(code_of({}), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of({"a", ""}), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of({"a", std::string(dlock::max_lock_name_bytes + 1, 'x')}), dlock::errc::invalid_argument);
    EXPECT_EQ(code_of({"a"}, {.lease = 1ms}), dlock::errc::invalid_argument);
    EXPECT_FALSE(code_of({"a", "b"}));

    dlock::MultiLock moved(client, {"a", "b"});
    dlock::MultiLock target = std::move(moved);
    std::error_code ec;
    EXPECT_FALSE(moved.try_lock(ec));  // NOLINT(bugprone-use-after-move): what a moved-from object does
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    EXPECT_THROW(moved.lock(), dlock::Error);
    moved.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    EXPECT_FALSE(moved.is_held());
    EXPECT_TRUE(moved.names().empty());
}

TEST(MultiLock, LocksEveryNameWithItsOwnFencingToken) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock lock(client, {"c", "a", "b"});
    EXPECT_FALSE(lock.is_held());
    EXPECT_EQ(lock.valid_until(), Clock::time_point{});
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(lock.hold_count(), 1u);
    const Tokens tokens = lock.fencing_tokens();
    ASSERT_EQ(tokens.size(), 3u);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        EXPECT_EQ(tokens[i].first, std::string(1, static_cast<char>('a' + i)));
        EXPECT_GT(tokens[i].second, 0u);
        EXPECT_EQ(dlock::inspect_lock(client, tokens[i].first).fencing_token, tokens[i].second);
        EXPECT_EQ(lock.fencing_token(tokens[i].first), tokens[i].second);
    }
    EXPECT_EQ(lock.fencing_token("d"), 0u);
    EXPECT_GT(lock.valid_until(), Clock::now() + 29s);
    EXPECT_LE(lock.valid_until(), Clock::now() + 30s);
    lock.unlock();
    EXPECT_FALSE(lock.is_held());
    for (const auto& name : {"a", "b", "c"}) EXPECT_EQ(server.cli({"EXISTS", lock_key(name)}), "0") << name;
    EXPECT_EQ(lock.fencing_token("a"), 0u);
    lock.lock();
    EXPECT_GT(lock.fencing_token("a"), tokens[0].second);
    lock.unlock();
}

TEST(MultiLock, AllOrNothingWhenOneNameIsBusy) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto blocker = b.lock("m");
    blocker.lock();
    dlock::MultiLock lock(a, {"z", "m", "a"});
    EXPECT_FALSE(lock.try_lock());
    EXPECT_FALSE(lock.is_held());
    // "a" came before the busy "m" and was given back; "z" was never asked for.
    EXPECT_EQ(server.cli({"EXISTS", lock_key("a")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("z")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("z") + ":fence"}), "0");
    EXPECT_EQ(blocker.hold_count(), 1u);

    auto start = Clock::now();
    EXPECT_FALSE(lock.try_lock_for(300ms));
    auto elapsed = Clock::now() - start;
    EXPECT_GE(elapsed, 300ms) << "one deadline for the whole call";
    EXPECT_LT(elapsed, 300ms + 60ms);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("a")}), "0");
    EXPECT_EQ(lock.lost_token().stop_possible(), false) << "nothing held, nothing to lose";
    blocker.unlock();
    EXPECT_TRUE(lock.try_lock_for(1s));
    lock.unlock();
}

TEST(MultiLock, WaitsForTheBlockingNameByPushNotByPolling) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto blocker = b.lock("q");
    blocker.lock();  // 30 s lease: only the release message can wake the waiter in time
    // Its place in the line is refreshed once a minute: nothing else may be sent.
    dlock::MultiLock lock(a, {"q", "p", "r"}, {.waiter_lease = std::chrono::minutes(1)});
    auto waiter = std::async(std::launch::async, [&] {
        lock.lock();
        const auto at = Clock::now();
        const bool held = lock.is_held();
        lock.unlock();
        return std::pair(at, held);
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("p")}) == "1"; }));
    // While it waits it holds "p" (the name before "q"), and sends nothing.
    const auto calls_before = server.command_calls("evalsha") + server.command_calls("eval");
    std::this_thread::sleep_for(1s);
    const auto calls_during = server.command_calls("evalsha") + server.command_calls("eval") - calls_before;
    EXPECT_LE(calls_during, 2) << "a waiter must not poll";
    EXPECT_EQ(server.cli({"EXISTS", lock_key("r")}), "0");
    const auto released_at = Clock::now();
    blocker.unlock();
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    auto [acquired_at, held] = waiter.get();
    EXPECT_TRUE(held);
    EXPECT_LT(acquired_at - released_at, 250ms) << "woken by the release message, not the 30 s lease";
}

TEST(MultiLock, ReentrantPerNameAndTokensKept) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock lock(client, {"x", "y"});
    lock.lock();
    const auto tokens = lock.fencing_tokens();
    const auto lost = lock.lost_token();
    ASSERT_TRUE(lock.try_lock());
    lock.lock();
    EXPECT_EQ(lock.hold_count(), 3u);
    EXPECT_EQ(lock.fencing_tokens(), tokens) << "re-entry issues no token";
    EXPECT_TRUE(lock.lost_token() == lost) << "one multi-hold, one lost token";
    EXPECT_EQ(dlock::inspect_lock(client, "x").hold_count, 3u);
    EXPECT_EQ(dlock::inspect_lock(client, "y").hold_count, 3u);
    lock.unlock();
    lock.unlock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(server.cli({"HGET", lock_key("y"), "count"}), "1");
    lock.unlock();
    EXPECT_FALSE(lock.is_held());
    EXPECT_EQ(server.cli({"EXISTS", lock_key("x")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("y")}), "0");
}

TEST(MultiLock, ANameTheThreadAlreadyHoldsIsReenteredNotWaitedFor) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto single = client.lock("shared");
    single.lock();
    dlock::MultiLock lock(client, {"shared", "own"});
    ASSERT_TRUE(lock.try_lock_for(1s));
    EXPECT_EQ(single.hold_count(), 2u);
    lock.unlock();
    EXPECT_TRUE(single.is_held()) << "the multi-lock gave back only its own hold";
    EXPECT_EQ(server.cli({"EXISTS", lock_key("own")}), "0");
    single.unlock();
}

TEST(MultiLock, AnotherThreadIsAnotherOwnerAndHandleOwnershipCrossesThreads) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock by_thread(client, {"t1", "t2"});
    by_thread.lock();
    std::thread([&] {
        EXPECT_FALSE(by_thread.try_lock());
        EXPECT_FALSE(by_thread.is_held());
        std::error_code ec;
        by_thread.unlock(ec);
        EXPECT_EQ(ec, dlock::errc::not_owner);
    }).join();
    EXPECT_TRUE(by_thread.is_held());
    by_thread.unlock();

    dlock::MultiLock by_handle(client, {"h1", "h2"}, {.ownership = dlock::Ownership::handle});
    by_handle.lock();
    const auto lost = by_handle.lost_token();
    std::thread([&] {
        EXPECT_TRUE(by_handle.is_held());
        EXPECT_TRUE(by_handle.lost_token() == lost);
        std::error_code ec;
        by_handle.unlock(ec);
        EXPECT_FALSE(ec);
    }).join();
    EXPECT_FALSE(by_handle.is_held());
    EXPECT_EQ(server.cli({"EXISTS", lock_key("h1")}), "0");
}

TEST(MultiLock, LosingAnyNameLosesTheWholeHold) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::mutex mutex;
    std::vector<std::string> lost_names;
    dlock::MultiLock lock(client, {"l1", "l2", "l3"},
                          {.lease = 300ms, .on_lost = [&](std::string_view name, std::error_code) {
                               std::lock_guard guard(mutex);
                               lost_names.emplace_back(name);
                           }});
    lock.lock();
    auto lost = lock.lost_token();
    std::atomic<bool> told{false};
    std::stop_callback on_stop(lost, [&] { told = true; });
    EXPECT_FALSE(lost.stop_requested());
    server.cli({"DEL", lock_key("l2")});
    ASSERT_TRUE(eventually([&] { return told.load(); }, 1s)) << "within the lease";
    EXPECT_FALSE(lock.is_held());
    EXPECT_EQ(lock.valid_until(), Clock::time_point{});
    EXPECT_EQ(lock.fencing_token("l2"), 0u);
    // The token is requested first, then on_lost runs, both on the I/O thread.
    EXPECT_TRUE(eventually([&] {
        std::lock_guard guard(mutex);
        return !lost_names.empty();
    }, 1s));
    {
        std::lock_guard guard(mutex);
        EXPECT_EQ(lost_names, std::vector<std::string>{"l2"});
    }
    // The other names are still renewed until the caller unlocks: they go then.
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("l1")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("l3")}), "0");
    EXPECT_FALSE(lock.lost_token().stop_possible());
    // A new multi-hold has a new lost token.
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_FALSE(lock.lost_token().stop_requested());
    lock.unlock();
}

TEST(MultiLock, EveryNameIsRenewedByTheLeaseKeeper) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock lock(client, {"k1", "k2", "k3"}, {.lease = 200ms});
    lock.lock();
    const auto tokens = lock.fencing_tokens();
    std::this_thread::sleep_for(1s);
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(lock.fencing_tokens(), tokens);
    for (const auto& [name, token] : tokens) EXPECT_EQ(dlock::inspect_lock(client, name).fencing_token, token);
    EXPECT_GT(lock.valid_until(), Clock::now());
    lock.unlock();
}

TEST(MultiLock, AStopRequestEndsTheWaitAndGivesBackWhatWasTaken) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto blocker = b.lock("s2");
    blocker.lock();
    dlock::MultiLock lock(a, {"s1", "s2"});
    std::stop_source stop;
    auto result = std::async(std::launch::async, [&] { return lock.lock(stop.get_token()); });
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("s1")}) == "1"; }));
    const auto start = Clock::now();
    stop.request_stop();
    EXPECT_FALSE(result.get());
    EXPECT_LT(Clock::now() - start, 200ms);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("s1")}), "0");
    EXPECT_FALSE(lock.is_held());
    auto timed = std::async(std::launch::async, [&] {
        std::stop_source never;
        return lock.try_lock_until(Clock::now() + 200ms, never.get_token());
    });
    EXPECT_FALSE(timed.get());
    blocker.unlock();
}

TEST(MultiLock, AFailingNameIsReportedAfterTheOthersAreGivenBack) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    server.cli({"SET", lock_key("w2"), "not a lock"});
    dlock::MultiLock lock(client, {"w1", "w2", "w3"});
    try {
        lock.lock();
        ADD_FAILURE() << "lock() over a key of another type must throw";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::wrong_type);
        EXPECT_NE(std::string(e.what()).find(lock_key("w2")), std::string::npos) << e.what();
    }
    EXPECT_EQ(server.cli({"EXISTS", lock_key("w1")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("w3")}), "0");
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock_until(Clock::now() + 1s, ec));
    EXPECT_EQ(ec, dlock::errc::wrong_type);
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::wrong_type);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("w1")}), "0");
}

TEST(MultiLock, ServerTextSurvivesTheRollback) {
    dlock::support::RedisServer server({.acl_users = {{"limited", "on", ">pw", "~dlock:{ok}*", "&*", "+@all"}}});
    const auto uri = "redis://limited:pw@127.0.0.1:" + std::to_string(server.port());
    dlock::Client client(uri);
    dlock::MultiLock lock(client, {"ok", "zz-forbidden"});
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::permission_denied);
    EXPECT_NE(dlock::last_server_error().find("NOPERM"), std::string::npos) << dlock::last_server_error();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("ok")}), "0");
}

TEST(MultiLock, UnlockNeverThrowsAndReportsEachName) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::vector<std::pair<std::string, std::error_code>> reported;
    dlock::MultiLock lock(client, {"u2", "u1"}, {.on_unlock_error = [&](std::string_view name, std::error_code ec) {
                                                     reported.emplace_back(name, ec);
                                                     throw std::runtime_error("a callback that throws");
                                                 }});
    lock.unlock();
    ASSERT_EQ(reported.size(), 2u);
    EXPECT_EQ(reported[0].first, "u2") << "released in reverse canonical order";
    EXPECT_EQ(reported[1].first, "u1");
    EXPECT_EQ(reported[0].second, dlock::errc::not_owner);
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(MultiLock, StdScopedLockAndUniqueLockWork) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock first(client, {"g1", "g2"});
    auto other = client.lock("g3");
    {
        std::scoped_lock both(first, other);
        EXPECT_TRUE(first.is_held());
        EXPECT_TRUE(other.is_held());
    }
    EXPECT_FALSE(first.is_held());
    {
        std::unique_lock guard(first, 1s);
        EXPECT_TRUE(guard.owns_lock());
    }
    EXPECT_EQ(server.cli({"EXISTS", lock_key("g1")}), "0");
}

TEST(MultiLock, NothingIsLeftInRedisAfterTheRetention) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::MultiLock lock(client, {"r1", "r2", "r3"}, {.retention = 1s});
    for (int i = 0; i < 3; ++i) {
        lock.lock();
        lock.unlock();
    }
    EXPECT_NE(server.cli({"DBSIZE"}), "0");
    EXPECT_TRUE(eventually([&] { return server.cli({"DBSIZE"}) == "0"; }, 3s));
}

// Threads of one process taking overlapping name sets given in opposite
// orders: none may deadlock, and no two may be inside at once.
TEST(MultiLock, OppositeOrdersFromManyThreadsNeverDeadlockNorOverlap) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const std::vector<std::vector<std::string>> orders = {
        {"n1", "n2", "n3"}, {"n3", "n2", "n1"}, {"n2", "n3", "n1"}, {"n3", "n1"}};
    std::vector<dlock::MultiLock> locks;
    for (const auto& names : orders) locks.emplace_back(client, names);
    constexpr int threads = 8, rounds = 40;
    std::atomic<int> inside{0}, overlaps{0}, timeouts{0};
    // Guarded by n1 and n3, which every set holds; read and written apart,
    // so that two threads inside at once would lose an update.
    std::atomic<long> counter{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            auto& lock = locks[static_cast<std::size_t>(t) % locks.size()];
            for (int i = 0; i < rounds; ++i) {
                // Bounded: a deadlock shows as a timeout, not a hung test.
                if (!lock.try_lock_for(20s)) {
                    ++timeouts;
                    return;
                }
                if (inside.fetch_add(1) != 0) ++overlaps;
                const long seen = counter.load(std::memory_order_relaxed);
                std::this_thread::yield();
                counter.store(seen + 1, std::memory_order_relaxed);
                inside.fetch_sub(1);
                lock.unlock();
            }
        });
    }
    for (auto& w : workers) w.join();
    EXPECT_EQ(timeouts.load(), 0);
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(counter.load(), threads * rounds);
}

// Processes x threads, each process listing the names in its own order (and
// one taking only two of them): a non-atomic read-modify-write of a counter
// in Redis loses no update, a marker shows nobody else inside, and every
// acquisition comes within its bound (a deadlock would not).
TEST(MultiLockProcesses, OppositeOrdersAcrossProcessesNeverDeadlockNorOverlap) {
    dlock::support::RedisServer server;
    const std::vector<std::vector<std::string>> orders = {
        {"x", "y", "z"}, {"z", "y", "x"}, {"y", "z", "x", "y"}, {"z", "x"}};
    constexpr int threads = 4, rounds = 30;
    std::vector<pid_t> children;
    for (const auto& names : orders) {
        children.push_back(dlock::support::run_in_child([&] {
            dlock::Client client(server.uri());
            dlock::MultiLock lock(client, names);
            std::atomic<int> failures{0};
            std::vector<std::thread> workers;
            for (int t = 0; t < threads; ++t) {
                workers.emplace_back([&] {
                    for (int i = 0; i < rounds; ++i) {
                        if (!lock.try_lock_for(30s)) {
                            ++failures;
                            return;
                        }
                        if (client.command({"INCR", "inside"}).integer != 1) ++failures;
                        auto value = client.command({"GET", "counter"});
                        const long n = value.is_nil() ? 0 : std::stol(value.text);
                        client.command({"SET", "counter", std::to_string(n + 1)});
                        client.command({"DECR", "inside"});
                        lock.unlock();
                    }
                });
            }
            for (auto& w : workers) w.join();
            return failures.load() == 0 ? 0 : 1;
        }));
    }
    for (auto pid : children) EXPECT_EQ(dlock::support::wait_child(pid), 0);
    EXPECT_EQ(server.cli({"GET", "counter"}), std::to_string(orders.size() * threads * rounds));
    for (const auto& name : {"x", "y", "z"}) EXPECT_EQ(server.cli({"EXISTS", lock_key(name)}), "0") << name;
}

// A failed call gives back what it took within its deadline, also when the
// server stops answering: the releases go on without the caller (the lease
// ends them if they never land), and the names are not held by the caller.
TEST(MultiLock, TheRollBackOfAFailedCallKeepsItsDeadlineAgainstASilentServer) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri());  // default timeouts: a retry window of seconds
    dlock::Client other(server.uri());
    dlock::Lock busy(other, "m4", {.ownership = dlock::Ownership::handle});
    busy.lock();
    dlock::MultiLock multi(client, {"m1", "m2", "m3", "m4"});
    auto result = std::async(std::launch::async, [&] {
        const auto start = Clock::now();
        std::error_code ec;
        const bool got = multi.try_lock_until(start + 1000ms, ec);
        return std::pair{got, Clock::now() - start};
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("m3")}) == "1"; }, 5s));
    std::this_thread::sleep_for(300ms);
    proxy.black_hole(true);  // silent while the call waits for m4, and while it rolls back
    auto [got, took] = result.get();
    EXPECT_FALSE(got);
    EXPECT_LT(took, 1500ms) << "a deadline of 1 s";
    EXPECT_FALSE(multi.is_held());
    EXPECT_EQ(multi.fencing_token("m1"), 0u);
    proxy.black_hole(false);
}

// One round trip for the whole roll-back after the deadline, not one per
// name: a slow link (200 ms a reply), seven names taken, the eighth busy.
TEST(MultiLock, TheRollBackAfterTheDeadlineWaitsAtMostAMoment) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri());
    dlock::Client other(server.uri());
    std::vector<std::string> names;
    for (int i = 0; i < 8; ++i) names.push_back("r" + std::to_string(i));
    dlock::Lock busy(other, "r7", {.ownership = dlock::Ownership::handle});
    busy.lock();
    dlock::MultiLock multi(client, names);
    proxy.delay_replies(200ms);
    const auto deadline = Clock::now() + 2500ms;  // seven names in about 1.4 s, then the wait for r7
    std::error_code ec;
    EXPECT_FALSE(multi.try_lock_until(deadline, ec));
    // One round trip is 200 ms, one per name 1.4 s: the bound tells them
    // apart with room for a loaded machine under a sanitizer (534 ms seen).
    EXPECT_LT(Clock::now() - deadline, 1000ms);
    proxy.delay_replies(0ms);
    // Every release lands once the link is fast again: nothing stays held.
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("r0")}) == "0"; }, 10s));
}

// "Returns holding every name": a name lost while the call waited for a
// later one is taken again (or the call fails), never handed over lost.
TEST(MultiLock, ANameLostWhileTheCallWaitedIsTakenAgain) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client other(server.uri());
    dlock::Lock busy(other, "z", {.ownership = dlock::Ownership::handle});
    busy.lock();
    // Handle ownership: the test looks at the hold the other thread makes.
    dlock::MultiLock multi(client, {"a", "z"}, {.lease = 300ms, .ownership = dlock::Ownership::handle});
    auto done = std::async(std::launch::async, [&] {
        multi.lock();
        return std::pair{multi.is_held(), multi.lost_token().stop_requested()};
    });
    ASSERT_TRUE(eventually([&] { return multi.fencing_token("a") != 0; }, 5s));
    server.cli({"DEL", lock_key("a")});  // a is lost while the call waits for z
    ASSERT_TRUE(eventually([&] { return multi.fencing_token("a") == 0; }, 5s));
    busy.unlock();
    auto [held, lost] = done.get();
    EXPECT_TRUE(held);
    EXPECT_FALSE(lost);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("a")}), "1");
    multi.unlock();
}
