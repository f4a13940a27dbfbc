// The semaphore against a real server, in one process.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/semaphore.hpp"
#include "lock/semaphore_scripts.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

static_assert(!std::is_copy_constructible_v<dlock::Permit>, "a permit is released once: it cannot be copied");
static_assert(std::is_nothrow_move_constructible_v<dlock::Permit>);
static_assert(std::is_nothrow_destructible_v<dlock::Permit>);

using dlock::test::semaphore_key;

namespace {

dlock::errc code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const dlock::Error& e) {
        return static_cast<dlock::errc>(e.code().value());
    }
    return dlock::errc{};
}

}  // namespace

TEST(SemaphoreScripts, EachLoadsIntoARealServerWithItsEmbeddedSha1) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    for (const dlock::Script* s :
         {&dlock::detail::semaphore_acquire_script(), &dlock::detail::semaphore_release_script(),
          &dlock::detail::semaphore_renew_script(), &dlock::detail::semaphore_set_limit_script(),
          &dlock::detail::semaphore_inspect_script()}) {
        EXPECT_EQ(client.command({"SCRIPT", "LOAD", s->text()}).text, s->sha1());
        EXPECT_EQ(s->sha1(), dlock::sha1_hex(s->text()));
    }
}

TEST(Semaphore, AtMostLimitPermitsAndEachReleaseGivesOneBack) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "pool", {.limit = 2});
    auto a = sem.acquire();
    auto b = sem.try_acquire();
    ASSERT_TRUE(a);
    ASSERT_TRUE(b);
    EXPECT_TRUE(a.is_held());
    EXPECT_EQ(a.count(), 1u);
    EXPECT_NE(a.id(), b.id());
    EXPECT_GT(a.valid_until(), Clock::now() + 29s);
    EXPECT_FALSE(sem.try_acquire());
    EXPECT_FALSE(sem.try_acquire_for(50ms));
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("pool")}), "2");
    EXPECT_EQ(server.cli({"HGET", semaphore_key("pool") + ":state", "limit"}), "2");
    a.release();
    EXPECT_FALSE(a.is_held());
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("pool")}), "1");
    auto c = sem.try_acquire();
    EXPECT_TRUE(c);
    const auto info = dlock::inspect_semaphore(client, "pool");
    EXPECT_EQ(info.limit, 2u);
    EXPECT_EQ(info.used, 2u);
    ASSERT_EQ(info.holders.size(), 2u);
    EXPECT_GT(info.holders[0].ttl, 29s);
}

TEST(Semaphore, ReleasingTwiceOrNothingIsNotOwnerAndNeverRaisesTheCount) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "twice", {.limit = 2});
    auto a = sem.acquire();
    auto b = sem.acquire();
    a.release();
    EXPECT_EQ(code_of([&] { a.release(); }), dlock::errc::not_owner);
    std::error_code ec;
    sem.release(a, ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
    dlock::Permit none;
    EXPECT_EQ(code_of([&] { none.release(); }), dlock::errc::not_owner);
    auto moved = std::move(b);
    EXPECT_EQ(code_of([&] { b.release(); }), dlock::errc::not_owner);  // NOLINT: moved-from holds nothing
    // A permit of another semaphore is not one of this one's.
    dlock::Semaphore other(client, "other", {.limit = 1});
    auto foreign = other.acquire();
    dlock::Semaphore same_name(client, "twice", {.limit = 2});
    EXPECT_EQ(server.cli({"HGET", semaphore_key("twice") + ":state", "used"}), "1");
    auto c = same_name.acquire();
    EXPECT_FALSE(same_name.try_acquire()) << "a double release raised the count";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("twice")}), "2");
}

TEST(Semaphore, BadInputIsATypedError) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    using dlock::errc;
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, "s", {.limit = 0}); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, "s", {.limit = dlock::max_semaphore_limit + 1}); }),
              errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, "", {.limit = 1}); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, std::string(dlock::max_lock_name_bytes + 1, 'x')); }),
              errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, "s", {.lease = 1ms}); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { dlock::Semaphore(client, "s", {.waiter_lease = 1ms}); }), errc::invalid_argument);
    dlock::Semaphore sem(client, "s", {.limit = 3});
    EXPECT_EQ(code_of([&] { (void)sem.acquire(0); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { (void)sem.acquire(4); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { (void)sem.acquire(dlock::max_semaphore_limit + 1); }), errc::invalid_argument);
    EXPECT_EQ(code_of([&] { sem.set_limit(0); }), errc::invalid_argument);
    std::error_code ec;
    EXPECT_FALSE(sem.try_acquire(0, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    // More permits than the limit.
    dlock::Semaphore small(client, "small", {.limit = 1});
    auto kept = small.try_acquire();
    EXPECT_TRUE(kept);
    EXPECT_EQ(code_of([&] { (void)small.acquire(2); }), errc::invalid_argument);
    // Another creator's limit is not taken silently: both are named.
    dlock::Semaphore large(client, "small", {.limit = 3});
    try {
        (void)large.acquire(2);
        ADD_FAILURE() << "a request with another limit was served";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), errc::limit_mismatch);
        EXPECT_NE(std::string(e.what()).find("limit is 1, not 3"), std::string::npos) << e.what();
    }
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("small")}), "1");
}

TEST(Semaphore, AWaiterIsWokenByTheReleaseNotByItsTimers) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "wake", {.limit = 1, .waiter_lease = 30s});
    auto held = sem.acquire();
    auto waited = std::async(std::launch::async, [&] {
        auto p = sem.acquire();
        return Clock::now();
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("wake") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(100ms);  // the waiter subscribes and asks again, then sleeps
    const auto released_at = Clock::now();
    held.release();
    EXPECT_LT(waited.get() - released_at, 1s) << "woken by a timer (refresh every 10 s), not by the release";
}

TEST(Semaphore, FirstInFirstOutSoALargeRequestIsNotStarved) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "fifo", {.limit = 2});
    auto a = sem.acquire();
    auto b = sem.acquire();
    std::atomic<int> order{0};
    std::atomic<int> large_at{0}, small_at{0};
    auto large = std::async(std::launch::async, [&] {
        auto p = sem.acquire(2);
        large_at = ++order;
        std::this_thread::sleep_for(100ms);
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("fifo") + ":queue"}) == "1"; }));
    auto small = std::async(std::launch::async, [&] {
        auto p = sem.acquire(1);
        small_at = ++order;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("fifo") + ":queue"}) == "2"; }));
    a.release();  // one free: the small request would fit, but the large one is ahead
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(small_at.load(), 0) << "the small request jumped the line";
    EXPECT_FALSE(sem.try_acquire()) << "try_acquire jumped the line";
    b.release();
    large.get();
    small.get();
    EXPECT_EQ(large_at.load(), 1);
    EXPECT_EQ(small_at.load(), 2);
}

TEST(Semaphore, RaisingTheLimitWakesWaiters) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "grow", {.limit = 1, .waiter_lease = 30s});
    auto held = sem.acquire();
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(5s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("grow") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    const auto raised_at = Clock::now();
    EXPECT_EQ(sem.set_limit(2), 1u);
    auto p = waited.get();
    EXPECT_TRUE(p);
    EXPECT_LT(Clock::now() - raised_at, 1s);
    EXPECT_EQ(server.cli({"HGET", semaphore_key("grow") + ":state", "limit"}), "2");
    EXPECT_EQ(dlock::inspect_semaphore(client, "grow").limit, 2u);
    // The new limit is the server's: this object, made with 1, may ask for more.
    held.release();
    p.release();
    EXPECT_TRUE(sem.try_acquire(2));
}

TEST(Semaphore, PermitsAreRenewedWhileHeld) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    // Three leases long, with a lease that a loaded machine's scheduling
    // cannot eat (a renewal is due every third of it).
    dlock::Semaphore sem(client, "renewed", {.limit = 1, .lease = 1s});
    auto p = sem.acquire();
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(p.is_held());
    EXPECT_FALSE(sem.try_acquire());
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("renewed")}), "1");
}

TEST(Semaphore, APermitGoneFromTheServerIsReportedLost) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::promise<std::error_code> told;
    dlock::Semaphore sem(client, "lost", {.limit = 1, .lease = 300ms,
                                          .on_lost = [&](std::string_view, std::error_code ec) { told.set_value(ec); }});
    auto p = sem.acquire();
    auto lost = p.lost_token();
    EXPECT_FALSE(lost.stop_requested());
    server.cli({"ZREM", semaphore_key("lost"), p.id()});
    auto f = told.get_future();
    ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
    EXPECT_EQ(f.get(), dlock::errc::lease_lost);
    EXPECT_TRUE(eventually([&] { return lost.stop_requested(); }));
    EXPECT_FALSE(p.is_held());
    // The reason's own code (== lease_lost as an error_code).
    EXPECT_EQ(code_of([&] { p.release(); }), dlock::errc::lock_taken_over);
    EXPECT_EQ(code_of([&] { p.release(); }), dlock::errc::not_owner);
}

TEST(Semaphore, ADeadWaiterHoldsUpTheLineAtMostItsWaiterLease) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "dead", {.limit = 1, .waiter_lease = 300ms});
    auto held = sem.acquire();
    // A waiter whose process died: first in line, its place refreshed by no
    // one, ending 300 ms from now on the server's clock.
    const auto place_ends = std::to_string(server.time_us() / 1000 + 300);
    server.cli({"ZADD", semaphore_key("dead") + ":queue", "1", "dead-client:s1#1"});
    server.cli({"ZADD", semaphore_key("dead") + ":waiters", place_ends, "dead-client:s1#1"});
    held.release();
    EXPECT_FALSE(sem.try_acquire()) << "jumped the line";
    const auto start = Clock::now();
    auto p = sem.try_acquire_for(3s);
    EXPECT_TRUE(p);
    EXPECT_LT(Clock::now() - start, 800ms);
    EXPECT_EQ(server.cli({"ZSCORE", semaphore_key("dead") + ":queue", "dead-client:s1#1"}), "");
}

TEST(Semaphore, NothingStaysWithoutAnExpiry) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "tidy", {.limit = 1, .lease = 200ms, .waiter_lease = 200ms, .retention = 1s});
    {
        auto p = sem.acquire();
        auto waiter = std::async(std::launch::async, [&] { return sem.try_acquire_for(100ms); });
        EXPECT_FALSE(waiter.get());
    }
    for (const auto& suffix : {"", ":state", ":queue", ":waiters", ":done"}) {
        const auto ttl = std::stoll(server.cli({"PTTL", semaphore_key("tidy") + suffix}));
        EXPECT_NE(ttl, -1) << suffix << " has no expiry";
    }
    EXPECT_TRUE(eventually([&] { return server.cli({"KEYS", "dlock:sem:*"}).empty(); }, 3s))
        << server.cli({"KEYS", "dlock:sem:*"});
}

TEST(Semaphore, StopTokenEndsAWait) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "stop", {.limit = 1});
    auto held = sem.acquire();
    std::stop_source stop;
    auto waited = std::async(std::launch::async, [&] { return sem.acquire(1, stop.get_token()); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("stop") + ":queue"}) == "1"; }));
    const auto at = Clock::now();
    stop.request_stop();
    EXPECT_FALSE(waited.get());
    EXPECT_LT(Clock::now() - at, 500ms);
    // It left the line: the next request is not held up by it.
    EXPECT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("stop") + ":queue"}) == "0"; }));
}

// The release's call goes out while the waiter's subscriber is down: the
// waiter must ask again once it is resubscribed, not sleep until its refresh.
TEST(Semaphore, AWaiterAsksAgainAfterItsSubscriberReconnects) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client holder_client(server.uri());
    dlock::Semaphore sem(client, "resub", {.limit = 1, .waiter_lease = 30s});
    dlock::Semaphore holder_sem(holder_client, "resub", {.limit = 1});
    auto held = holder_sem.acquire();
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(8s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("resub") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    server.cli({"CLIENT", "KILL", "TYPE", "pubsub"});
    const auto released_at = Clock::now();
    held.release();
    auto p = waited.get();
    EXPECT_TRUE(p);
    EXPECT_LT(Clock::now() - released_at, 3s) << "slept until its refresh (every 10 s)";
}

// Scripts that change a semaphore's state leave no key without an expiry,
// also when its state was gone while permits were held.
TEST(Semaphore, AReleaseAfterTheStateWasLostLeavesItWithAnExpiry) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "state", {.limit = 2});
    auto p = sem.acquire();
    server.cli({"DEL", semaphore_key("state") + ":state"});
    p.release();
    EXPECT_NE(server.cli({"PTTL", semaphore_key("state") + ":state"}), "-1");
}

// The state hash lost (evicted, or expired) while permits are held: the
// count is remade from the permits, and a release takes its permit off it
// once, so no more than the limit is ever granted.
TEST(Semaphore, AReleaseAfterTheStateWasLostCountsThePermitsStillHeld) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore one_each(client, "evicted", {.limit = 3});
    auto a = one_each.acquire(), b = one_each.acquire(), c = one_each.acquire();
    server.cli({"DEL", semaphore_key("evicted") + ":state"});
    a.release();  // b and c still held
    std::vector<dlock::Permit> more;
    for (int i = 0; i < 3; ++i)
        if (auto p = one_each.try_acquire()) more.push_back(std::move(p));
    EXPECT_EQ(more.size(), 1u) << "limit 3 with b and c held";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("evicted")}), "3");

    dlock::Semaphore two_each(client, "evicted2", {.limit = 4});
    auto d = two_each.acquire(2), e = two_each.acquire(2);
    server.cli({"DEL", semaphore_key("evicted2") + ":state"});
    d.release();  // e still holds 2
    EXPECT_FALSE(two_each.try_acquire(4)) << "all 4 permits granted while e holds 2";
    EXPECT_TRUE(two_each.try_acquire(2));
}

// Nothing stays longer than lease + retention after the last permit is
// gone, however long a waiter's place would have lasted.
TEST(Semaphore, AGrantThatNeverWaitedKeepsTheStateNoLongerThanLeasePlusRetention) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "linger", {.limit = 1, .lease = 1s, .waiter_lease = 1h, .retention = 1s});
    sem.acquire().release();
    EXPECT_LE(std::stoll(server.cli({"PTTL", semaphore_key("linger") + ":state"})), 2000);
}
