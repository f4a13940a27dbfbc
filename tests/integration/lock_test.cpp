// The lock against a real server, in one process.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "hold/lock_keys.hpp"
#include "lock/lock_scripts.hpp"
#include "eventually.hpp"
#include "lockable.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

static_assert(dlock::support::Lockable<dlock::Lock>);
static_assert(dlock::support::TimedLockable<dlock::Lock>);
static_assert(noexcept(std::declval<dlock::Lock&>().unlock()), "unlock() must not throw out of a lock_guard");
static_assert(std::is_nothrow_move_constructible_v<dlock::Lock>);

using dlock::test::lock_key;

namespace {

using dlock::support::eventually;

}  // namespace

TEST(LockScripts, EachLoadsIntoARealServerWithItsEmbeddedSha1) {
    dlock::support::RedisServer server;
    for (const dlock::Script* s : {&dlock::detail::acquire_script(), &dlock::detail::release_script(),
                                   &dlock::detail::renew_script(), &dlock::detail::force_release_script(),
                                   &dlock::detail::inspect_script(), &dlock::detail::raise_fence_script(),
                                   &dlock::detail::hand_off_script(), &dlock::detail::line_refresh_script(),
                                   &dlock::detail::line_leave_script(), &dlock::detail::confirm_grant_script()}) {
        dlock::Client client(server.uri());
        EXPECT_EQ(client.command({"SCRIPT", "LOAD", s->text()}).text, s->sha1());
        EXPECT_EQ(s->sha1(), dlock::sha1_hex(s->text()));
    }
}

TEST(Lock, LockAndUnlockWithAFencingToken) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("orders:42");
    EXPECT_FALSE(lock.is_held());
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(lock.hold_count(), 1u);
    // Tokens are floored at the server's clock in microseconds.
    const auto first = lock.fencing_token();
    EXPECT_GE(first, server.time_us() - 60'000'000);
    EXPECT_LE(first, server.time_us());
    EXPECT_GT(lock.valid_until(), Clock::now() + 29s);
    EXPECT_EQ(server.cli({"HGET", lock_key("orders:42"), "count"}), "1");
    auto ttl = std::stoll(server.cli({"PTTL", lock_key("orders:42")}));
    EXPECT_GT(ttl, 29'000);
    EXPECT_LE(ttl, 30'000);
    lock.unlock();
    EXPECT_FALSE(lock.is_held());
    EXPECT_EQ(server.cli({"EXISTS", lock_key("orders:42")}), "0");
    lock.lock();
    EXPECT_GT(lock.fencing_token(), first);
    lock.unlock();
}

TEST(Lock, ReentrantToDepthOneHundred) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("deep");
    lock.lock();
    const auto token = lock.fencing_token();
    for (int i = 1; i < 100; ++i) lock.lock();
    EXPECT_EQ(lock.hold_count(), 100u);
    EXPECT_EQ(lock.fencing_token(), token) << "reentry must not issue a token";
    EXPECT_EQ(dlock::inspect_lock(client, "deep").hold_count, 100u);
    for (int i = 0; i < 99; ++i) {
        lock.unlock();
        ASSERT_EQ(server.cli({"EXISTS", lock_key("deep")}), "1") << "freed after " << i + 1 << " unlocks";
    }
    EXPECT_EQ(lock.hold_count(), 1u);
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("deep")}), "0");
}

TEST(Lock, AnotherThreadIsAnotherOwnerAndWaits) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("shared");
    lock.lock();
    const auto first = lock.fencing_token();
    std::atomic<bool> acquired{false};
    std::thread other([&] {
        EXPECT_FALSE(lock.try_lock());
        lock.lock();
        acquired = true;
        EXPECT_GT(lock.fencing_token(), first);
        lock.unlock();
    });
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(acquired);
    lock.unlock();
    other.join();
    EXPECT_TRUE(acquired);
}

TEST(Lock, UnlockByAThreadThatDoesNotHoldItIsNotOwner) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("mine");
    lock.lock();
    std::error_code ec;
    std::thread([&] { lock.unlock(ec); }).join();
    EXPECT_EQ(ec, dlock::errc::not_owner);
    EXPECT_TRUE(lock.is_held());
    lock.unlock(ec);
    EXPECT_FALSE(ec);
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(Lock, HandleOwnershipMovesBetweenThreads) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("async-job", {.ownership = dlock::Ownership::handle});
    std::thread([&] { lock.lock(); }).join();
    EXPECT_TRUE(lock.is_held());
    std::error_code ec;
    std::thread([&] { lock.unlock(ec); }).join();
    EXPECT_FALSE(ec);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("async-job")}), "0");
    // Two handles on one name are two owners, even on one thread.
    auto first = client.lock("h", {.ownership = dlock::Ownership::handle});
    auto second = client.lock("h", {.ownership = dlock::Ownership::handle});
    first.lock();
    EXPECT_FALSE(second.try_lock());
    first.unlock();
    EXPECT_TRUE(second.try_lock());
    second.unlock();
}

TEST(Lock, StdScopedLockOverTwoLocks) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto a = client.lock("account:1");
    auto b = client.lock("account:2");
    std::atomic<int> inside{0}, max_inside{0};
    auto transfer = [&](dlock::Lock& x, dlock::Lock& y) {
        for (int i = 0; i < 20; ++i) {
            std::scoped_lock both(x, y);
            int now = ++inside;
            max_inside = std::max(max_inside.load(), now);
            --inside;
        }
    };
    std::thread t1([&] { transfer(a, b); });
    std::thread t2([&] { transfer(b, a); });  // opposite order: scoped_lock avoids the deadlock
    t1.join();
    t2.join();
    EXPECT_EQ(max_inside.load(), 1);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("account:1"), lock_key("account:2")}), "0");
}

TEST(Lock, HandoffThroughPubSubIsFarFasterThanTheLease) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    auto held = holder_client.lock("handoff");  // 30 s lease
    held.lock();
    auto waiting = waiter_client.lock("handoff");
    auto waiter = std::async(std::launch::async, [&] {
        waiting.lock();
        auto at = Clock::now();
        waiting.unlock();
        return at;
    });
    std::this_thread::sleep_for(200ms);
    auto released_at = Clock::now();
    held.unlock();
    auto acquired_at = waiter.get();
    EXPECT_LT(acquired_at - released_at, 1s);
}

TEST(Lock, TryLockForReturnsNearItsDeadline) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto held = a.lock("busy");
    held.lock();
    auto contender = b.lock("busy");
    for (auto timeout : {0ms, -5ms}) {
        auto start = Clock::now();
        EXPECT_FALSE(contender.try_lock_for(timeout));
        EXPECT_LT(Clock::now() - start, 100ms) << "zero or negative is a single attempt";
    }
    auto start = Clock::now();
    EXPECT_FALSE(contender.try_lock_for(300ms));
    auto elapsed = Clock::now() - start;
    EXPECT_GE(elapsed, 300ms);
    EXPECT_LT(elapsed, 300ms + 10ms + 50ms);  // 10 ms + a round trip, with room for a loaded machine
    EXPECT_FALSE(contender.try_lock_until(std::chrono::system_clock::now() + 50ms));
    held.unlock();
    EXPECT_TRUE(contender.try_lock_for(1s));
    contender.unlock();
}

TEST(Lock, BlockingLockCanBeCancelled) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto held = a.lock("cancel-me");
    held.lock();
    auto contender = b.lock("cancel-me");
    std::stop_source stop;
    auto result = std::async(std::launch::async, [&] { return contender.lock(stop.get_token()); });
    std::this_thread::sleep_for(100ms);
    auto start = Clock::now();
    stop.request_stop();
    EXPECT_FALSE(result.get());
    EXPECT_LT(Clock::now() - start, 200ms);
    EXPECT_FALSE(contender.is_held());
}

TEST(Lock, WatchdogKeepsTheLockFivefoldPastItsLease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("kept", {.lease = 200ms});
    lock.lock();
    std::this_thread::sleep_for(1s);
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(server.cli({"EXISTS", lock_key("kept")}), "1");
    EXPECT_FALSE(lock.lost_token().stop_requested());
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("kept")}), "0");
}

TEST(Lock, FixedLeaseExpiresAndIsReportedLost) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::atomic<int> lost_calls{0};
    auto lock = client.lock("fixed", {.lease = 200ms, .renew = false,
                                      .on_lost = [&](std::string_view, std::error_code) { ++lost_calls; }});
    lock.lock();
    auto lost = lock.lost_token();
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("fixed")}) == "0"; }, 1s));
    EXPECT_TRUE(eventually([&] { return lost.stop_requested(); }, 1s));
    EXPECT_FALSE(lock.is_held());
    EXPECT_TRUE(lock.lost_token().stop_requested()) << "a token asked for after the loss starts stopped";
    EXPECT_EQ(lost_calls.load(), 1);
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
}

TEST(Lock, KeyDeletedBehindTheHolderIsLostWithinAThirdOfTheLease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::promise<std::error_code> reason;
    auto lock = client.lock("stolen", {.lease = 600ms, .on_lost = [&](std::string_view name, std::error_code ec) {
                                           EXPECT_EQ(name, "stolen");
                                           reason.set_value(ec);
                                       }});
    lock.lock();
    auto lost = lock.lost_token();
    std::atomic<bool> callback_ran{false};
    std::stop_callback on_stop(lost, [&] { callback_ran = true; });
    auto deleted_at = Clock::now();
    server.cli({"DEL", lock_key("stolen")});
    auto f = reason.get_future();
    ASSERT_EQ(f.wait_for(200ms + 300ms), std::future_status::ready);
    EXPECT_LT(Clock::now() - deleted_at, 200ms + 300ms);
    EXPECT_EQ(f.get(), dlock::errc::lease_lost);
    EXPECT_TRUE(callback_ran);
    EXPECT_FALSE(lock.is_held());
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
}

TEST(Lock, ServerRestartedWithoutPersistenceWhileHeldIsLost) {
    dlock::support::RedisServer server;
    dlock::ClientOptions options;
    options.reconnect_backoff_max = 100ms;
    dlock::Client client(server.uri(), options);
    auto lock = client.lock("volatile", {.lease = 900ms});
    lock.lock();
    server.restart();
    auto lost = lock.lost_token();
    EXPECT_TRUE(eventually([&] { return lost.stop_requested(); }, 2s));
    EXPECT_FALSE(lock.is_held());
}

TEST(Lock, ScriptFlushWhileHeldDoesNotBreakRenewOrRelease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("flushed", {.lease = 300ms});
    lock.lock();
    server.cli({"SCRIPT", "FLUSH"});
    std::this_thread::sleep_for(700ms);  // two renewals at least
    EXPECT_TRUE(lock.is_held());
    server.cli({"SCRIPT", "FLUSH"});
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("flushed")}), "0");
}

TEST(Lock, AThousandLocksHeldRenewedAndReleased) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::vector<dlock::Lock> locks;
    for (int i = 0; i < 1000; ++i) locks.push_back(client.lock("many:" + std::to_string(i), {.lease = 300ms}));
    for (auto& l : locks) l.lock();
    std::this_thread::sleep_for(1s);
    int held = 0;
    for (auto& l : locks) held += l.is_held();
    EXPECT_EQ(held, 1000);
    EXPECT_EQ(server.cli({"DBSIZE"}), "2000");  // lock + fence hash each
    for (auto& l : locks) l.unlock();
    EXPECT_EQ(server.cli({"EVAL", "return #redis.call(\"KEYS\", \"dlock:{many:*}\")", "0"}), "0");
}

TEST(Lock, DestroyingTheClientReleasesWhatItHolds) {
    dlock::support::RedisServer server;
    auto client = std::make_unique<dlock::Client>(server.uri());
    auto lock = client->lock("until-exit");
    lock.lock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("until-exit")}), "1");
    client.reset();  // the Lock outlives its Client
    EXPECT_EQ(server.cli({"EXISTS", lock_key("until-exit")}), "0");
    EXPECT_FALSE(lock.is_held());
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::client_closed);
}

TEST(Lock, ForceReleaseWakesWaitersAndTheHolderHearsOfIt) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto held = a.lock("broken", {.lease = 600ms});
    held.lock();
    auto waiter = b.lock("broken");
    auto got = std::async(std::launch::async, [&] {
        waiter.lock();
        waiter.unlock();
        return true;
    });
    std::this_thread::sleep_for(100ms);
    auto info = dlock::inspect_lock(b, "broken");
    EXPECT_TRUE(info.held);
    EXPECT_EQ(info.hold_count, 1u);
    EXPECT_EQ(info.fencing_token, held.fencing_token());
    auto previous = dlock::force_release(b, "broken");
    ASSERT_TRUE(previous.has_value());
    EXPECT_EQ(*previous, info.owner);
    EXPECT_EQ(got.wait_for(1s), std::future_status::ready);
    auto lost = held.lost_token();
    EXPECT_TRUE(eventually([&] { return lost.stop_requested(); }, 1s));
    EXPECT_FALSE(dlock::force_release(b, "broken").has_value());
    auto after = dlock::inspect_lock(b, "broken");
    EXPECT_FALSE(after.held);
    EXPECT_GT(after.last_fencing_token, info.fencing_token);
}

TEST(Lock, FencingTokensStrictlyIncreaseAcrossClients) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri());
    auto la = a.lock("fenced");
    auto lb = b.lock("fenced");
    std::uint64_t last = 0;
    for (int i = 0; i < 20; ++i) {
        auto& l = i % 2 ? la : lb;
        l.lock();
        EXPECT_GT(l.fencing_token(), last);
        last = l.fencing_token();
        l.unlock();
    }
    // The counter lasts the retention period once the lock is free, no longer.
    auto pttl = std::stoll(server.cli({"PTTL", lock_key("fenced") + ":fence"}));
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, std::chrono::milliseconds(dlock::default_retention).count());
}

TEST(LockInput, BadNamesAndLeasesAreInvalidArguments) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto expect_invalid = [&](std::string name, dlock::LockOptions options) {
        try {
            dlock::Lock lock(client, name, options);
            ADD_FAILURE() << "accepted name of " << name.size() << " bytes, lease " << options.lease.count();
        } catch (const dlock::Error& e) {
            EXPECT_EQ(e.code(), dlock::errc::invalid_argument);
        }
    };
    expect_invalid("", {});
    expect_invalid(std::string(dlock::max_lock_name_bytes + 1, 'x'), {});
    expect_invalid("ok", {.lease = 0ms});
    expect_invalid("ok", {.lease = -1ms});
    expect_invalid("ok", {.lease = dlock::max_lease + 1ms});
    EXPECT_NO_THROW(dlock::Lock(client, std::string(dlock::max_lock_name_bytes, 'x')));
    EXPECT_THROW(dlock::inspect_lock(client, ""), dlock::Error);
    EXPECT_EQ(server.cli({"DBSIZE"}), "0") << "no key may leak from rejected input";
}

TEST(LockInput, KeyHoldingOtherDataIsAWrongTypeErrorNamingTheKey) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    server.cli({"SET", lock_key("taken"), "not a lock"});
    auto lock = client.lock("taken");
    try {
        lock.lock();
        FAIL() << "no exception";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::wrong_type);
        EXPECT_NE(std::string(e.what()).find(lock_key("taken")), std::string::npos) << e.what();
    }
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::wrong_type);
    EXPECT_EQ(server.cli({"GET", lock_key("taken")}), "not a lock");
}

TEST(LockInput, UnreachableServerFailsWithinTheTimeout) {
    dlock::ClientOptions options;
    options.connect_timeout = 200ms;
    options.command_timeout = 300ms;
    dlock::Client client("redis://127.0.0.1:" + std::to_string(dlock::support::free_port()), options);
    auto lock = client.lock("nowhere");
    auto start = Clock::now();
    try {
        lock.lock();
        FAIL() << "no exception";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::connection_refused);
    }
    EXPECT_LT(Clock::now() - start, options.connect_timeout + options.command_timeout + 300ms);
}

TEST(LockInput, UnlockFromALockGuardNeverThrowsButIsReported) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::error_code reported;
    auto lock = client.lock("guarded", {.lease = 300ms, .renew = false,
                                        .on_unlock_error = [&](std::string_view, std::error_code ec) { reported = ec; }});
    {
        std::lock_guard guard(lock);
        std::this_thread::sleep_for(500ms);  // the fixed lease runs out inside
    }
    EXPECT_EQ(reported, dlock::errc::lease_lost);
    {
        std::unique_lock guard(lock);
        server.cli({"DEL", lock_key("guarded")});
    }
    EXPECT_EQ(reported, dlock::errc::lease_lost);
}

TEST(Lock, UnreachableServerLosesTheLockWhenItsLeaseRunsOut) {
    dlock::support::RedisServer server;
    dlock::ClientOptions options;
    options.connect_timeout = 100ms;
    options.command_timeout = 100ms;
    dlock::Client client(server.uri(), options);
    std::promise<std::error_code> reason;
    std::atomic<Clock::rep> noticed{0};
    constexpr auto lease = 600ms;
    auto lock = client.lock("cut-off", {.lease = lease, .on_lost = [&](std::string_view, std::error_code ec) {
                                            noticed = Clock::now().time_since_epoch().count();
                                            reason.set_value(ec);
                                        }});
    lock.lock();
    auto valid_until = lock.valid_until();
    server.kill();
    auto f = reason.get_future();
    ASSERT_EQ(f.wait_for(lease + 500ms), std::future_status::ready);
    // Renewal kept trying until the validity's end, and the loss was told by then.
    const Clock::time_point at{Clock::duration(noticed.load())};
    EXPECT_GE(at, valid_until - 10ms);
    EXPECT_LE(at, valid_until + 5ms) << "told " << (at - valid_until) / 1us << " us after the validity ended";
    auto ec = f.get();
    EXPECT_EQ(ec, dlock::errc::lease_expired) << ec.message();
    EXPECT_FALSE(lock.is_held());
}

TEST(Lock, NoRenewalIsSentAfterRelease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("quiet", {.lease = 150ms});
    lock.lock();
    std::this_thread::sleep_for(200ms);  // renewals run while held
    lock.unlock();
    auto after_release = server.command_calls("evalsha");
    std::this_thread::sleep_for(400ms);  // several renewal intervals
    EXPECT_EQ(server.command_calls("evalsha"), after_release);
}

TEST(LockHandOff, AWaiterOfTheSameProcessIsHandedTheLockWithoutARelease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("handed", {.ownership = dlock::Ownership::thread, .handoff_slice = 10s});
    lock.lock();
    const auto first = lock.fencing_token();
    std::promise<std::uint64_t> waiter_token;
    std::thread waiter([&] {
        if (!lock.try_lock_for(10s)) return waiter_token.set_value(0);
        waiter_token.set_value(lock.fencing_token());
        lock.unlock();
    });
    // The waiter queues, tries once, takes its place in the server's line
    // and sleeps as the head.
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("handed") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    lock.unlock();
    auto token = waiter_token.get_future().get();
    waiter.join();
    EXPECT_GT(token, first);  // a fresh fencing token for the new holder
    // Handed over, not released: the only release message is the waiter's own final one.
    EXPECT_EQ(server.command_calls("publish"), 1);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("handed")}), "0");
}

TEST(LockHandOff, AZeroSliceAlwaysReleases) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("released", {.handoff_slice = 0s});
    lock.lock();
    std::thread waiter([&] {
        if (lock.try_lock_for(10s)) lock.unlock();
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("released") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    lock.unlock();
    waiter.join();
    // The release granted the lock to the waiter in line (one notice on its
    // inbox), and the waiter's release told the lock's channel.
    EXPECT_EQ(server.command_calls("publish"), 2);
    EXPECT_THROW(client.lock("x", {.handoff_slice = -1us}), dlock::Error);
}

namespace {

// Scripts the server ran so far (EVALSHA and EVAL).
long long scripts_so_far(const dlock::support::RedisServer& server) {
    return server.command_calls("evalsha") + server.command_calls("eval");
}

// Three threads of one process on one lock with a long hand-off slice: the
// caller holds it; `head` waits first (it takes its place in the server's
// line and sleeps as the local queue's head), `behind` after it (asleep in
// the local queue, nothing sent). Each holds until told to let go.
struct ThreeThreads {
    explicit ThreeThreads(const std::string& name, std::chrono::milliseconds slice = 10'000ms,
                          std::chrono::milliseconds behind_waits = 10'000ms)
        : client(server.uri()),
          // Places refreshed every 10 s: no refresh within the test's counts.
          lock(client.lock(name, {.ownership = dlock::Ownership::thread, .handoff_slice = slice, .waiter_lease = 30s})),
          line_key(lock_key(name) + ":line") {
        // Known to the server before anything is counted: no NOSCRIPT detour.
        for (const auto* script : {&dlock::detail::hand_off_script(), &dlock::detail::release_script(),
                                   &dlock::detail::acquire_script(), &dlock::detail::line_leave_script()})
            client.command({"SCRIPT", "LOAD", std::string(script->text())});
        lock.lock();
        head = std::thread([this] { hold(head_holds, head_lets_go); });
        EXPECT_TRUE(eventually([&] { return server.cli({"ZCARD", line_key}) == "1"; }));
        std::this_thread::sleep_for(100ms);  // answered busy, listening, asleep as head
        behind = std::thread([this, behind_waits] {
            if (lock.try_lock_for(behind_waits)) {
                behind_held = true;
                lock.unlock();
            }
        });
        std::this_thread::sleep_for(200ms);  // queued behind the head
    }
    ~ThreeThreads() {
        let_go();
        if (head.joinable()) head.join();
        if (behind.joinable()) behind.join();
    }
    void let_go() {
        if (!let_go_told.exchange(true)) head_lets_go.set_value();
    }
    void hold(std::promise<void>& holds, std::promise<void>& lets_go) {
        auto go = lets_go.get_future();
        if (!lock.try_lock_for(10s)) return;
        holds.set_value();
        go.wait();
        lock.unlock();
    }

    dlock::support::RedisServer server;
    dlock::Client client;
    dlock::Lock lock;
    const std::string line_key;
    std::promise<void> head_holds, head_lets_go;
    std::atomic<bool> let_go_told{false};
    std::atomic<bool> behind_held{false};
    std::thread head, behind;
};

}  // namespace

// The hand-off that gives the lock to the queue's head also places the
// waiter behind it in the server's line (one script for both): when its turn
// in the process comes it sleeps at once, and is handed the lock in turn.
// Three holders, three scripts: two hand-offs and the last one's release
// (four before: the waiter behind asked for its place itself).
TEST(LockHandOff, TheHandOffPlacesTheWaiterBehindTheHeadInLine) {
    ThreeThreads t("seated");
    const auto before = scripts_so_far(t.server);
    t.lock.unlock();
    ASSERT_EQ(t.head_holds.get_future().wait_for(10s), std::future_status::ready);
    std::this_thread::sleep_for(300ms);  // the waiter behind is the head now, asleep with its seat
    EXPECT_EQ(t.server.cli({"ZCARD", t.line_key}), "1") << "the waiter behind the head is not in line";
    EXPECT_EQ(scripts_so_far(t.server) - before, 1) << "the waiter behind the head asked for its place itself";
    t.let_go();
    t.head.join();
    t.behind.join();
    EXPECT_TRUE(t.behind_held.load());
    EXPECT_EQ(scripts_so_far(t.server) - before, 3) << "two hand-offs and a release";
    EXPECT_EQ(t.client.metrics().value("dlock_handoffs_total", {{"how", "local"}}), 2);
    EXPECT_EQ(t.server.cli({"EXISTS", lock_key("seated"), t.line_key, lock_key("seated") + ":places"}), "0");
}

// A waiter placed by a hand-off that gives up before its turn in the
// process comes gives its place in the server's line back: nobody waits
// behind a place that nobody will use.
TEST(LockHandOff, AWaiterPlacedByAHandOffThatGivesUpLeavesTheLine) {
    ThreeThreads t("seated-gives-up", 10'000ms, 800ms);
    t.lock.unlock();
    ASSERT_EQ(t.head_holds.get_future().wait_for(10s), std::future_status::ready);
    EXPECT_EQ(t.server.cli({"ZCARD", t.line_key}), "1") << "the waiter behind the head is not in line";
    t.behind.join();  // its 800 ms run out while the head holds
    EXPECT_FALSE(t.behind_held.load());
    EXPECT_TRUE(eventually([&] { return t.server.cli({"ZCARD", t.line_key}) == "0"; }, 3s))
        << "the place the hand-off took was not given back";
    t.let_go();
    t.head.join();
    EXPECT_TRUE(eventually([&] { return t.server.cli({"EXISTS", lock_key("seated-gives-up")}) == "0"; }));
}

// A waiter placed by a hand-off is granted the lock by the server's line
// once the slice has ended (the head's release, not a hand-off): it hears
// the grant notice on its place and wakes holding the lock, long before its
// first own attempt would be due (a lease).
TEST(LockHandOff, AWaiterPlacedByAHandOffHearsItsGrantFromTheLine) {
    ThreeThreads t("seated-granted", 1'000ms);
    t.lock.unlock();  // within the slice: handed to the head, the one behind placed
    ASSERT_EQ(t.head_holds.get_future().wait_for(10s), std::future_status::ready);
    std::this_thread::sleep_for(1'200ms);  // the slice is over
    const auto released_at = Clock::now();
    t.let_go();
    t.head.join();
    t.behind.join();
    EXPECT_TRUE(t.behind_held.load());
    EXPECT_LT(Clock::now() - released_at, 3s) << "woken by a timer, not by its grant";
    EXPECT_EQ(t.client.metrics().value("dlock_handoffs_total", {{"how", "local"}}), 1);
    EXPECT_EQ(t.client.metrics().value("dlock_handoffs_total", {{"how", "direct"}}), 1);
    EXPECT_EQ(t.server.cli({"EXISTS", lock_key("seated-granted"), t.line_key}), "0");
}

// A server out of memory (noeviction) refuses a hand-off before it writes
// anything: the fence's HSET comes first, which Redis refuses then. A ZREM
// (which frees memory, so Redis lets it through) first let every later write
// of the script through as well: the lock changed hands, a place was taken
// and the fence written, past maxmemory.
TEST(LockHandOff, AServerOutOfMemoryRefusesItBeforeAnyWrite) {
    dlock::support::RedisServer server({.extra_args = {"--maxmemory-policy", "noeviction"}});
    dlock::Client client(server.uri());
    client.wait_connected();
    const dlock::detail::LockKeys keys("oom-hand-off");
    const std::string fence(keys.fence()), line(keys.line()), places(keys.places());
    const std::string giver_tombstone = keys.tombstone("giver:1"), next_tombstone = keys.tombstone("next:1");
    // A hold of giver:1, with next:1 in line as a waiter of its process.
    client.command({"HSET", keys.lock, "owner", "giver:1", "count", "1", "seq", "5", "token", "10", "u", "0", "v", "2"});
    client.command({"PEXPIRE", keys.lock, "30000"});
    client.command({"HSET", fence, "token", "10", "arrival", "1"});
    client.command({"ZADD", line, "1", "next:1"});
    client.command({"ZADD", places, "99999999999999", "next:1"});
    server.cli({"CONFIG", "SET", "maxmemory", "0"});
    client.command({"SET", "filler", std::string(2 << 20, 'x')});
    server.cli({"CONFIG", "SET", "maxmemory", "1mb"});
    std::error_code refused;
    std::string_view probe[] = {"HSET", "probe", "a", "b"};
    (void)client.command(probe, refused);
    ASSERT_TRUE(refused) << "the server is not out of memory";
    std::string_view k[] = {keys.lock, fence, giver_tombstone, line, places, next_tombstone};
    for (const bool placing : {true, false}) {
        std::string_view a[] = {"giver:1", "next:1", "30000", "6", "600000", "", placing ? "after:1" : "",
                                placing ? "3000" : ""};
        std::error_code ec;
        const auto answer = client.eval(dlock::detail::hand_off_script(), k, a, ec);
        EXPECT_EQ(ec, dlock::errc::server_error) << (placing ? "placing: " : "") << ec.message();
        EXPECT_NE(answer.text.find("OOM"), std::string::npos) << answer.text;
        EXPECT_EQ(client.command({"HGET", keys.lock, "owner"}).text, "giver:1");
        EXPECT_EQ(client.command({"ZSCORE", line, "next:1"}).text, "1") << "the next owner left the line";
        EXPECT_TRUE(client.command({"ZSCORE", line, "after:1"}).is_nil());
        EXPECT_EQ(client.command({"HGET", fence, "token"}).text, "10");
        EXPECT_EQ(client.command({"EXISTS", giver_tombstone}).integer, 0);
    }
}

