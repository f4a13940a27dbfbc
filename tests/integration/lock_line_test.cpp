// Waiting in the server's line: the cases a review of direct grant found broken,
// each failing before its fix.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "lock/lock_scripts.hpp"
#include "redis_server.hpp"
#include "scripts_run.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::lock_key;
using dlock::test::scripts_run;
using dlock::test::seconds;

// A FairLock waiter sleeps on a local queue of one; it used to sleep on an
// empty one (undefined behaviour: the process crashed).
TEST(LockLine, AFairLockThatMustWaitSleepsInLine) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri()), waiter(server.uri());
    dlock::Lock held(holder, "fair-busy");
    held.lock();
    dlock::FairLock fair(waiter, "fair-busy");
    EXPECT_FALSE(fair.try_lock_for(300ms));  // crashed: it slept on an empty local queue
    auto got = std::async(std::launch::async, [&] {
        const bool ok = fair.try_lock_for(10s);
        if (ok) fair.unlock();
        return ok;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("fair-busy") + ":line"}) == "1"; }));
    held.unlock();
    EXPECT_TRUE(got.get());
}

// A waiter that joins a client's refresh timer with a shorter waiter_lease
// than the others re-arms it: before, its first refresh came at the old
// (long) tick, its place ended first, the release found nobody in line, and
// the waiter slept until that tick.
TEST(LockLine, AShortWaiterLeaseJoiningALongOneKeepsItsPlace) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri());
    dlock::Client waiter(server.uri());
    dlock::Lock a(holder, "long-a", {.lease = 30s});
    dlock::Lock b(holder, "short-b", {.lease = 30s});
    a.lock();
    b.lock();

    // A waiter with a long waiter_lease starts the client's refresh timer (tick every 10 s).
    std::thread long_waiter([&] {
        dlock::Lock fa(waiter, "long-a", {.waiter_lease = 30s});
        if (fa.try_lock_for(25s)) fa.unlock();
    });
    std::this_thread::sleep_for(300ms);

    std::promise<double> got;
    std::thread short_waiter([&] {
        dlock::Lock fb(waiter, "short-b", {.waiter_lease = 100ms});
        const bool ok = fb.try_lock_for(25s);
        const auto at = Clock::now();
        got.set_value(ok ? seconds(at.time_since_epoch()) : -1.0);
        if (ok) fb.unlock();
    });
    std::this_thread::sleep_for(1s);
    // Its place should be refreshed every ~33 ms; it is not.
    const auto places = server.cli({"ZCARD", lock_key("short-b") + ":places"});
    const auto released_at = Clock::now();
    b.unlock();
    auto future = got.get_future();
    const double at = future.get();
    ASSERT_GT(at, 0) << "never acquired";
    const double waited = at - seconds(released_at.time_since_epoch());
    EXPECT_LT(waited, 1.0) << "acquired " << waited << " s after the release (places in line at release: "
                           << places << ")";
    short_waiter.join();
    a.unlock();
    long_waiter.join();
}

// A direct grant lasts at least what was left of the waiter's place (its own
// waiter_lease): leased only for the releasing client's, a waiter whose
// confirmation takes longer found the lock granted to the next in line, went
// to the end of the line, and never got the lock while others took it.
TEST(LockLine, AWaiterSlowerThanTheReleasersWaiterLeaseIsGrantedForItsOwn) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client slow(proxy.uri(), {.command_timeout = 3s});
    slow.wait_connected();
    dlock::Client fast1(server.uri()), fast2(server.uri());
    const dlock::LockOptions quick{.lease = 5s, .waiter_lease = 100ms};
    std::atomic<bool> stop{false};
    std::atomic<int> cycles{0};
    dlock::Lock f1(fast1, "starve", quick);
    f1.lock();
    auto churn = [&](dlock::Client& c) {
        dlock::Lock l(c, "starve", quick);
        while (!stop) {
            if (l.try_lock_for(1s)) {
                ++cycles;
                std::this_thread::sleep_for(20ms);
                l.unlock();
            }
        }
    };
    // The slow waiter arrives first (replies reach it 300 ms late).
    proxy.delay_replies(300ms);
    std::promise<bool> got;
    std::thread slow_waiter([&] {
        dlock::Lock s(slow, "starve", {.lease = 5s});
        const bool ok = s.try_lock_for(6s);
        got.set_value(ok);
        if (ok) s.unlock();
    });
    std::this_thread::sleep_for(500ms);  // its busy attempt took its place, first in line
    std::thread t2([&] { churn(fast2); });
    std::thread t1([&] { churn(fast1); });
    std::this_thread::sleep_for(100ms);
    f1.unlock();  // granted to the slow waiter, leased 100 ms
    const bool ok = got.get_future().get();
    stop = true;
    t1.join();
    t2.join();
    slow_waiter.join();
    EXPECT_TRUE(ok) << "first in line, never got the lock in 6 s while others took it " << cycles.load()
                    << " times";
}

// With the subscriber down (its connections refused while the command
// connection stays up), a free lock is taken at once, and a waiter honours
// its stop request: the wait for the inbox comes after the first busy
// answer, in slices. It used to come first, for up to command_timeout.
TEST(LockLine, WithTheSubscriberDownAFreeLockIsTakenAndStopIsHonoured) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), {.command_timeout = 3s});
    client.wait_connected();
    // The command connection is up; the subscriber (opened with the first
    // lock of this client) cannot connect: its inbox never becomes active.
    proxy.refuse_new(true);
    dlock::FairLock fair(client, "free-one");
    const auto start = Clock::now();
    bool got = false;
    std::string error;
    try {
        got = fair.try_lock_for(1s);
    } catch (const dlock::Error& e) {
        error = e.what();
    }
    const double took = seconds(Clock::now() - start);
    EXPECT_TRUE(got) << "a free FairLock, try_lock_for(1s): not acquired after " << took << " s (" << error
                     << "); EXISTS=" << server.cli({"EXISTS", lock_key("free-one")});
    EXPECT_LT(took, 0.5) << "a free FairLock took " << took << " s to acquire";
    if (got) fair.unlock();

    // lock(stop): the lock is held elsewhere, stop is requested at 100 ms.
    dlock::Client other(server.uri());
    dlock::Lock held(other, "held-one");
    held.lock();
    dlock::Lock waiting(client, "held-one");
    std::stop_source stop;
    std::thread stopper([&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    const auto start2 = Clock::now();
    bool got2 = false;
    try {
        got2 = waiting.lock(stop.get_token());
    } catch (const dlock::Error& e) {
        std::cerr << "lock(stop) threw " << e.what() << "\n";
    }
    const double took2 = seconds(Clock::now() - start2);
    stopper.join();
    EXPECT_FALSE(got2);
    EXPECT_LT(took2, 0.5) << "lock(stop) returned " << took2 << " s after the call, stop requested at 0.1 s";
    proxy.refuse_new(false);
    held.unlock();
}

// A waiter's place is kept by its client's refreshes, not by asking for the
// lock again: the refresh script used to be sent by EVALSHA only, so a
// server that had not loaded it answered NOSCRIPT every time, and the waiter
// was woken to try the lock every tick (its tombstone, the id of its last
// busy attempt, rose with each).
TEST(LockLine, AWaitersPlaceIsRefreshedWithoutAskingForTheLockAgain) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri()), waiting(server.uri());
    dlock::Lock held(holder, "kept-place");
    held.lock();
    dlock::FairLock fair(waiting, "kept-place", {.waiter_lease = 300ms});
    auto got = std::async(std::launch::async, [&] {
        const bool ok = fair.try_lock_for(10s);
        if (ok) fair.unlock();
        return ok;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("kept-place") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    const auto owner = server.cli({"ZRANGE", lock_key("kept-place") + ":line", "0", "0"});
    const auto tombstone = lock_key("kept-place") + ":done:" + owner;
    const auto last_attempt = server.cli({"GET", tombstone});
    const auto place_end = std::stoll(server.cli({"ZSCORE", lock_key("kept-place") + ":places", owner}));
    std::this_thread::sleep_for(1s);  // about ten refreshes
    EXPECT_EQ(server.cli({"GET", tombstone}), last_attempt) << "the waiter asked for the lock again while it waited";
    EXPECT_GT(std::stoll(server.cli({"ZSCORE", lock_key("kept-place") + ":places", owner})), place_end + 500)
        << "its place was not refreshed";
    held.unlock();
    EXPECT_TRUE(got.get());
}

namespace {
// A private server where owner c1:t1 was granted `name` from the line (seq
// '0', 'granted' = its wait's arrival), and the owner's calls on it, each
// naming a grant by `arrival` ('' for none, as every call before the wait).
// No tombstone of the owner's is left: a copy can come later than retention.
struct GrantFromTheLine {
    explicit GrantFromTheLine(const std::string& name)
        : key(lock_key(name)), fence(key + ":fence"), channel(key + ":ch"), tombstone(key + ":done:" + owner),
          line(key + ":line"), places(key + ":places") {}
    void grant(const std::string& token, const std::string& arrival) {
        server.cli({"HSET", key, "owner", owner, "count", "1", "seq", "0", "token", token, "granted", arrival});
        server.cli({"PEXPIRE", key, "10000"});
    }
    dlock::Reply release(std::string_view op, std::string_view how_many, std::string_view arrival) {
        std::string_view keys[] = {key, fence, channel, tombstone, line, places};
        std::string_view argv[] = {owner, "30000", op, how_many, "600000", "", "1500", arrival};
        return client.eval(dlock::detail::release_script(), keys, argv);
    }
    dlock::Reply hand_off(std::string_view op, std::string_view arrival) {
        std::string_view keys[] = {key, fence, tombstone, line, places};
        std::string_view argv[] = {owner, "c1:t2", "30000", op, "600000", arrival};
        return client.eval(dlock::detail::hand_off_script(), keys, argv);
    }
    // acquire.lua in `mode` ('reenter' or 'fresh', the latter as an attempt in line).
    dlock::Reply acquire(std::string_view op, std::string_view mode, std::string_view arrival) {
        // The other kinds' keys: looked at only for a free name.
        std::string_view keys[] = {key, fence, tombstone, "r", "p", "w", line, places};
        std::string_view argv[] = {owner, "30000", op, mode, "600000", "1", "", "1500", "1500", "", arrival};
        return client.eval(dlock::detail::acquire_script(), keys, argv);
    }
    dlock::Reply reenter(std::string_view op, std::string_view arrival) { return acquire(op, "reenter", arrival); }
    // An RwLock's write side of the same owner id, in `mode` ('try' or 'reenter').
    dlock::Reply write_side(std::string_view op, std::string_view mode) {
        std::string_view keys[] = {key, fence, tombstone, "r", "rs", "ww", "p", "w"};
        std::string_view argv[] = {owner, "30000", op, mode, "600000", ""};
        return client.eval(dlock::detail::rw_write_acquire_script(), keys, argv);
    }
    std::string field(const std::string& name) { return server.cli({"HGET", key, name}); }

    dlock::support::RedisServer server;
    dlock::Client client{server.uri()};
    const std::string owner = "c1:t1";
    const std::string key, fence, channel, tombstone, line, places;
};
}  // namespace

// A lock granted from the line carries no operation id of its new owner's
// (seq '0'): a late copy of that owner's older release, hand-off or re-entry
// (one that sat in a paused server's buffer, however long: its tombstone may
// have expired) must leave it alone. The owner's calls on the grant name it by
// its wait's arrival; a call sent before the wait, or for another wait, cannot.
TEST(LockLine, LateCopiesOfAReleaseOrHandOffLeaveAGrantFromTheLineAlone) {
    GrantFromTheLine s("granted-late");
    s.grant("5", "1795000000000002");
    for (const std::string other : {"", "1795000000000001"}) {
        EXPECT_EQ(s.release("7", "1", other).integer, -2) << "arrival '" << other << "': answered as a late copy";
        auto handed = s.hand_off("8", other);
        ASSERT_TRUE(handed.is_array());
        EXPECT_EQ(handed.elements.at(0).integer, 0) << "arrival '" << other << "': handed on";
        auto reentered = s.reenter("9", other);
        ASSERT_TRUE(reentered.is_array());
        EXPECT_EQ(reentered.elements.at(0).integer, -2) << "arrival '" << other << "': a late re-entry applied";
        // A fresh acquisition (a waiter that missed its notice confirms the
        // grant with one) must name it too: a late copy of one would write its
        // old operation id, past which older copies would apply.
        auto fresh = s.acquire("6", "fresh", other);
        ASSERT_TRUE(fresh.is_array());
        EXPECT_NE(fresh.elements.at(0).integer, 1) << "arrival '" << other << "': a late acquisition confirmed the grant";
        EXPECT_EQ(s.server.cli({"EXISTS", s.line}), "0") << "arrival '" << other << "': it took a place in line";
        for (const std::string mode : {"try", "reenter"}) {
            auto written = s.write_side("5", mode);
            ASSERT_TRUE(written.is_array());
            EXPECT_NE(written.elements.at(0).integer, 1) << "an RwLock write side's late '" << mode << "' took the grant";
        }
    }
    EXPECT_EQ(s.field("seq"), "0");
    // A late copy of one of the wait's own attempts (naming it) and then of
    // that attempt's undo (release.lua ARGV[6], naming no wait), as a client
    // sends for an attempt whose answer it never got and then waits on: the
    // attempt may answer the grant, but writes no operation id the undo
    // could match, so the undo cannot free what the client holds.
    auto attempt = s.acquire("20", "fresh", "1795000000000002");
    ASSERT_TRUE(attempt.is_array());
    std::string_view keys[] = {s.key, s.fence, s.channel, s.tombstone, s.line, s.places};
    std::string_view undo[] = {s.owner, "30000", "21", "all", "600000", "20", "1500"};
    EXPECT_LT(s.client.eval(dlock::detail::release_script(), keys, undo).integer, 0) << "the late undo freed the grant";
    EXPECT_EQ(s.field("owner"), s.owner);
    EXPECT_EQ(s.field("count"), "1");
    EXPECT_EQ(s.field("granted"), "1795000000000002");
    EXPECT_EQ(s.field("token"), "5");
}

// What the owner sends once it holds a grant from the line (naming it)
// applies without any confirmation: a re-entry and a release of it give the
// hold their operation ids, a final release frees the lock, and a resent copy
// of that release answers as the first did.
TEST(LockLine, TheOwnersNewOperationsApplyToAGrantFromTheLine) {
    GrantFromTheLine s("granted-new");
    s.grant("5", "1");
    auto reentered = s.reenter("10", "1");
    ASSERT_TRUE(reentered.is_array());
    EXPECT_EQ(reentered.elements.at(0).integer, 1);
    EXPECT_EQ(reentered.elements.at(2).integer, 2) << "not re-entered";
    EXPECT_EQ(s.field("granted"), "");
    EXPECT_EQ(s.field("seq"), "10");
    EXPECT_EQ(s.release("11", "all", "1").integer, 0);
    EXPECT_EQ(s.server.cli({"EXISTS", s.key}), "0");
    EXPECT_EQ(s.release("11", "all", "1").integer, 0) << "a resent copy";

    // A release of one of two holds, a final release straight on the grant,
    // and a hand-off of another.
    s.grant("6", "2");
    s.server.cli({"HSET", s.key, "count", "2"});
    EXPECT_EQ(s.release("12", "1", "2").integer, 1);
    EXPECT_EQ(s.field("granted"), "");
    EXPECT_EQ(s.release("12", "1", "2").integer, 1) << "a resent copy";
    EXPECT_EQ(s.release("13", "1", "2").integer, 0);
    EXPECT_EQ(s.server.cli({"EXISTS", s.key}), "0") << "the grant's own release was refused";
    s.grant("7", "3");
    auto handed = s.hand_off("14", "3");
    ASSERT_TRUE(handed.is_array());
    EXPECT_EQ(handed.elements.at(0).integer, 1) << "not handed on";
    EXPECT_EQ(s.field("owner"), "c1:t2");
    EXPECT_EQ(s.field("granted"), "") << "the next owner's hold kept the grant's mark";

    // A waiter that missed its notice asks again, naming its wait: granted,
    // and the grant stays named by its wait (its calls on it name it too).
    s.server.cli({"DEL", s.key});
    s.grant("8", "4");
    auto confirmed = s.acquire("15", "fresh", "4");
    ASSERT_TRUE(confirmed.is_array());
    EXPECT_EQ(confirmed.elements.at(0).integer, 1);
    EXPECT_EQ(confirmed.elements.at(1).integer, 8) << "the grant's token";
    EXPECT_EQ(s.field("granted"), "4");
    EXPECT_EQ(s.field("seq"), "0");
    EXPECT_GT(std::stol(s.server.cli({"PTTL", s.key})), 20000) << "not leased in full";
    EXPECT_EQ(s.release("16", "1", "4").integer, 0);
    EXPECT_EQ(s.server.cli({"EXISTS", s.key}), "0");
}

// Places that ended together (a crowd of waiters cut off at once) are pruned
// in slices: one ZREM of them all exceeded what Lua unpacks, so every script
// of the name failed — and a release deleted the lock before failing,
// granting nobody.
TEST(LockLine, ACrowdOfEndedPlacesIsPrunedAndTheLockStillChangesHands) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Lock holder(client, "crowd", {.ownership = dlock::Ownership::handle});
    holder.lock();
    const auto ended = std::to_string(server.time_us() / 1000 - 1);
    server.cli({"EVAL",
                // (double quotes: RedisServer::cli quotes each argument with single ones)
                "for i = 1, 9000 do redis.call(\"ZADD\", KEYS[1], i, \"gone\" .. i .. \":t1\") "
                "redis.call(\"ZADD\", KEYS[2], ARGV[1], \"gone\" .. i .. \":t1\") end "
                "redis.call(\"PEXPIRE\", KEYS[1], 60000) redis.call(\"PEXPIRE\", KEYS[2], 60000) "
                // as the crowd's busy answers would have marked the hold: someone waits
                "redis.call(\"HSET\", KEYS[3], \"w\", \"1\")",
                "3", lock_key("crowd") + ":line", lock_key("crowd") + ":places", lock_key("crowd"), ended});
    ASSERT_EQ(server.cli({"ZCARD", lock_key("crowd") + ":line"}), "9000");
    std::error_code ec;
    holder.unlock(ec);
    EXPECT_FALSE(ec) << ec.message() << ": " << dlock::last_server_error();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("crowd") + ":line"}), "0") << "the ended places were not pruned";
    dlock::Client other_client(server.uri());
    dlock::Lock other(other_client, "crowd");
    std::error_code ec2;
    EXPECT_TRUE(other.try_lock_until(Clock::now() + 2s, ec2)) << ec2.message() << ": " << dlock::last_server_error();
    if (other.is_held()) other.unlock();
}

namespace {
// The owner standing first in `name`'s line, and its arrival number.
std::pair<std::string, std::string> first_waiter(dlock::support::RedisServer& server, const std::string& name) {
    const auto scored = server.cli({"ZRANGE", lock_key(name) + ":line", "0", "0", "WITHSCORES"});
    const auto newline = scored.find('\n');
    return {scored.substr(0, newline), newline == std::string::npos ? "" : scored.substr(newline + 1)};
}
}  // namespace

// The waiter the release grants the lock to wakes holding it: no acquire
// round trip. Its client's replies (grant notice included) come 500 ms
// late, so waking holding returns about 500 ms after the release; asking
// again would take another 500 ms. No confirmation follows: its first
// renewal, a third of the way into its waiter_lease, gives it the full
// lease and its label, and its unlock frees it.
TEST(LockLine, TheWaiterGrantedDirectlyWakesHoldingTheLock) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client holder_client(server.uri());
    dlock::Client waiter_client(proxy.uri(), {.command_timeout = 5s});
    waiter_client.wait_connected();
    dlock::FairLock holder(holder_client, "woken");
    holder.lock();
    dlock::FairLock waiter(waiter_client, "woken", {.ownership = dlock::Ownership::handle, .waiter_lease = 3s});
    // Its inbox subscribes with its first lock object: listening before the
    // replies slow down (each step of a connection's handshake would wait).
    std::this_thread::sleep_for(500ms);
    proxy.delay_replies(500ms);
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("woken") + ":line"}) == "1"; }, 10s));
    std::this_thread::sleep_for(700ms);  // its busy answer (and so its arrival) has reached it
    const auto released = Clock::now();
    holder.unlock();
    waiting.join();
    const double took = seconds(Clock::now() - released);
    ASSERT_TRUE(got.load());
    EXPECT_LT(took, 0.9) << "the waiter asked again after its grant notice";
    EXPECT_TRUE(waiter.is_held());
    EXPECT_EQ(std::to_string(waiter.fencing_token()), server.cli({"HGET", lock_key("woken"), "token"}));
    // Renewed: the validity counts the full lease, and the holder is named.
    EXPECT_TRUE(eventually([&] { return waiter.valid_until() > Clock::now() + 20s; }, 5s));
    EXPECT_NE(server.cli({"HGET", lock_key("woken"), "holder"}), "");
    proxy.delay_replies(0ms);
    waiter.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("woken")}), "0") << "its release was taken for a late copy";
}

namespace {
// How many scripts the server runs from a holder's unlock that grants the
// lock to a waiter asleep in line to that waiter's unlock, with `renew` for
// the waiter's lease; the waiter's client's metrics after it.
struct DirectGrantCost {
    long scripts = 0;
    double direct = 0, confirmations = 0;
    bool held = false;
};
DirectGrantCost direct_grant_cost(bool renew) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    dlock::FairLock holder(holder_client, "cost");
    dlock::FairLock waiter(waiter_client, "cost",
                           {.renew = renew, .ownership = dlock::Ownership::handle, .waiter_lease = 6s});
    // Every script this path runs is known to the server (no NOSCRIPT detour counted).
    waiter.lock();
    waiter.unlock();
    holder.lock();
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(10s); });
    EXPECT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("cost") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(300ms);  // answered busy, listening, asleep (its place is refreshed every 2 s)
    const auto before = scripts_run(server);
    holder.unlock();
    waiting.join();
    DirectGrantCost cost;
    cost.held = got.load() && waiter.is_held();
    if (!renew) (void)eventually([&] { return waiter.valid_until() > Clock::now() + 20s; });
    if (waiter.is_held()) waiter.unlock();
    cost.scripts = scripts_run(server) - before;
    cost.direct = waiter_client.metrics().value("dlock_handoffs_total", {{"how", "direct"}});
    cost.confirmations = waiter_client.metrics().value("dlock_grant_confirmations_total", {{"result", "confirmed"}});
    EXPECT_EQ(server.cli({"EXISTS", lock_key("cost")}), "0") << "the waiter's unlock did not free the lock";
    return cost;
}
}  // namespace

// A lock granted directly and given back before its first renewal is due
// costs the server the release that granted it and its own release: no
// confirmation of its own (its renewals give it the full lease; the owner's
// tombstone tells its release from a late copy of an older one).
TEST(LockLine, ALockGrantedDirectlyAndReleasedSoonCostsTheServerOnlyTheTwoReleases) {
    const auto cost = direct_grant_cost(true);
    ASSERT_TRUE(cost.held);
    EXPECT_EQ(cost.direct, 1);
    EXPECT_EQ(cost.scripts, 2) << "a script besides the two releases";
    EXPECT_EQ(cost.confirmations, 0);
}

// A fixed lease (renew = false) is never renewed: its direct grant is
// confirmed at once to the full lease.
TEST(LockLine, AFixedLeaseGrantedDirectlyIsConfirmedAtOnce) {
    const auto cost = direct_grant_cost(false);
    ASSERT_TRUE(cost.held);
    EXPECT_EQ(cost.direct, 1);
    EXPECT_EQ(cost.scripts, 3) << "the two releases and the confirmation";
    EXPECT_EQ(cost.confirmations, 1);
}

// A grant notice for another wait of the same owner (an earlier one, given
// up) does not make the waiter a holder: it names its wait by its arrival.
TEST(LockLine, ANoticeForAnotherWaitIsNotTakenAsAGrant) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    dlock::FairLock holder(holder_client, "stale-notice");
    holder.lock();
    dlock::FairLock waiter(waiter_client, "stale-notice", {.ownership = dlock::Ownership::handle});
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(10s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("stale-notice") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    const auto [owner, arrival] = first_waiter(server, "stale-notice");
    const auto client_id = owner.substr(0, owner.find(':'));
    const auto earlier = std::to_string(std::stoull(arrival) - 1);
    server.cli({"PUBLISH", "dlock:inbox:" + client_id,
                "granted " + owner + " 999999 " + earlier + " " + lock_key("stale-notice")});
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(got.load()) << "a notice for an earlier wait was taken as a grant";
    EXPECT_TRUE(holder.is_held());
    holder.unlock();
    waiting.join();
    ASSERT_TRUE(got.load());
    EXPECT_NE(waiter.fencing_token(), 999999u);
    EXPECT_EQ(std::to_string(waiter.fencing_token()), server.cli({"HGET", lock_key("stale-notice"), "token"}));
    waiter.unlock();
}

// line_leave.lua ends one wait: a copy arriving late, once its owner waits
// again and was granted the lock for that later wait, leaves that grant
// alone (the owner's client may hold it from the notice already).
TEST(LockLine, ALateLeaveOfAnEarlierWaitLeavesTheNextWaitsGrantAlone) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const auto key = lock_key("late-leave");
    const std::string owner = "c1:t1";
    const std::string fence = key + ":fence", line = key + ":line", places = key + ":places", channel = key + ":ch";
    std::string_view keys[] = {key, fence, line, places, channel};
    for (const std::string ended : {"1795000000000001", ""}) {
        server.cli({"HSET", key, "owner", owner, "count", "1", "seq", "0", "token", "7", "granted", "1795000000000002"});
        server.cli({"PEXPIRE", key, "10000"});
        std::string_view argv[] = {owner, "1500", "600000", ended};
        auto left = client.eval(dlock::detail::line_leave_script(), keys, argv);
        EXPECT_EQ(left.integer, 0) << "arrival '" << ended << "': a grant of another wait was given back";
        EXPECT_EQ(server.cli({"HGET", key, "owner"}), owner);
        EXPECT_EQ(server.cli({"HGET", key, "granted"}), "1795000000000002");
    }
    std::string_view argv[] = {owner, "1500", "600000", "1795000000000002"};
    EXPECT_EQ(client.eval(dlock::detail::line_leave_script(), keys, argv).integer, 1) << "its own wait's grant";
    EXPECT_EQ(server.cli({"EXISTS", key}), "0");
}

// A grant taken from its notice: a late copy of an older release of its
// owner (sent before it waited, so naming no grant) is refused, and the lock
// stays held.
TEST(LockLine, ALateCopyOfAnOlderReleaseCannotEndAGrantTakenFromItsNotice) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    dlock::FairLock holder(holder_client, "old-release");
    holder.lock();
    dlock::FairLock waiter(waiter_client, "old-release", {.ownership = dlock::Ownership::handle});
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(10s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("old-release") + ":line"}) == "1"; }));
    const auto owner = first_waiter(server, "old-release").first;
    holder.unlock();
    waiting.join();
    ASSERT_TRUE(got.load());
    ASSERT_EQ(server.cli({"HEXISTS", lock_key("old-release"), "granted"}), "1") << "not a grant from the line";
    const auto key = lock_key("old-release");
    const std::string fence = key + ":fence", channel = key + ":ch", tombstone = key + ":done:" + owner,
                      line = key + ":line", places = key + ":places";
    std::string_view keys[] = {key, fence, channel, tombstone, line, places};
    std::string_view argv[] = {owner, "30000", "1", "1", "600000", "", "1500"};  // operation 1: its oldest
    EXPECT_EQ(waiter_client.eval(dlock::detail::release_script(), keys, argv).integer, -2) << "applied as if new";
    EXPECT_EQ(server.cli({"HGET", key, "owner"}), owner);
    EXPECT_TRUE(waiter.is_held());
    waiter.unlock();
}

// The same once the wait outlived retention (1 s here, a wait of 1.5 s): the
// owner's tombstone, which its busy answer raised, is gone when the grant
// comes, and late copies of the acquisition, release and undo it sent before
// the wait must still leave the grant alone (another client would take the
// lock beside it).
TEST(LockLine, ALateCopyOfAnOlderReleaseCannotEndAGrantWhoseWaitOutlivedRetention) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri()), other_client(server.uri());
    const std::string name = "long-wait";
    dlock::FairLock holder(holder_client, name);
    dlock::FairLock waiter(waiter_client, name, {.ownership = dlock::Ownership::handle, .retention = 1s});
    dlock::FairLock other(other_client, name);
    waiter.lock();    // the client's operation 1
    waiter.unlock();  // operation 2: the release a late copy of which comes below
    holder.lock();
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(10s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key(name) + ":line"}) == "1"; }));
    const auto owner = first_waiter(server, name).first;
    const auto key = lock_key(name);
    const std::string fence = key + ":fence", channel = key + ":ch", tombstone = key + ":done:" + owner,
                      line = key + ":line", places = key + ":places";
    std::this_thread::sleep_for(1500ms);
    ASSERT_EQ(server.cli({"EXISTS", tombstone}), "0") << "the tombstone outlived retention: the case is not made";
    holder.unlock();
    waiting.join();
    ASSERT_TRUE(got.load());
    // Late copies of operation 1 (as it was sent: a fresh acquisition, no
    // wait) and of operation 2 (the release), and of an undo of operation 1
    // (what the client sends for an acquisition whose answer it never got).
    std::string_view acquire_keys[] = {key, fence, tombstone, "r", "p", "w", line, places};
    std::string_view acquire_argv[] = {owner, "30000", "1", "fresh", "1000", "1", "", "", "1500", ""};
    auto acquired = holder_client.eval(dlock::detail::acquire_script(), acquire_keys, acquire_argv);
    ASSERT_TRUE(acquired.is_array());
    EXPECT_NE(acquired.elements.at(0).integer, 1) << "a late acquisition confirmed the grant";
    EXPECT_EQ(server.cli({"HGET", key, "seq"}), "0");
    std::string_view keys[] = {key, fence, channel, tombstone, line, places};
    std::string_view argv[] = {owner, "30000", "2", "1", "600000", "", "1500"};
    EXPECT_EQ(holder_client.eval(dlock::detail::release_script(), keys, argv).integer, -2) << "applied as if new";
    std::string_view undo_argv[] = {owner, "30000", "3", "all", "600000", "1", "1500"};
    EXPECT_LT(holder_client.eval(dlock::detail::release_script(), keys, undo_argv).integer, 0) << "the undo applied";
    const bool other_got = other.try_lock();
    EXPECT_FALSE(other_got) << "another client took the lock its waiter holds";
    if (other_got) other.unlock();
    std::error_code ec;
    waiter.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server.cli({"EXISTS", key}), "0");
}

// A waiter_lease longer than the lease: the woken holder's validity counts
// the waiter_lease from its place, and its first renewal must not cut the
// key's expiry below that (a confirmation that set the bare lease let the
// fault suite's holder-pause class find two holders in the gap).
TEST(LockLine, TheFirstRenewalNeverShortensTheLockBelowTheWokenHoldersValidity) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri());
    dlock::FairLock holder(holder_client, "long-place");
    holder.lock();
    dlock::FairLock waiter(waiter_client, "long-place",
                           {.lease = 1s, .ownership = dlock::Ownership::handle, .waiter_lease = 4s});
    std::atomic<bool> got{false};
    std::thread waiting([&] { got = waiter.try_lock_for(10s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("long-place") + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);
    holder.unlock();
    waiting.join();
    ASSERT_TRUE(got.load());
    // Its first renewal names the holder (a third of the way into the 1 s lease).
    ASSERT_TRUE(eventually([&] { return server.cli({"HGET", lock_key("long-place"), "holder"}) != ""; }, 5s));
    // The server's first, then the client's: what the client believes can
    // only shrink meanwhile (read the other way round, the time redis-cli
    // takes to start on a busy machine counted against the server).
    const auto on_server = std::stoll(server.cli({"PTTL", lock_key("long-place")}));
    const auto believed = std::chrono::duration_cast<std::chrono::milliseconds>(waiter.valid_until() - Clock::now());
    EXPECT_GE(on_server, believed.count()) << "the holder believes it holds the lock past the key's expiry";
    waiter.unlock();
}

// An owner that gives up and waits again at once, before its line_leave
// reached the server (its EVALSHA answered NOSCRIPT, the EVAL a round trip
// later): the new wait gets a new arrival, so the late line_leave cannot
// give back the new wait's grant — which its client takes as held from the
// notice. It used to keep the old place's arrival: two holders.
TEST(LockLine, ALateLeaveOfTheWaitJustGivenUpCannotFreeTheNextWaitsGrant) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client holder_client(server.uri()), other_client(server.uri());
    dlock::Client waiter_client(proxy.uri(), {.command_timeout = 5s});
    waiter_client.wait_connected();
    const std::string name = "leave-race";
    dlock::FairLock holder(holder_client, name);
    holder.lock();
    dlock::FairLock waiter(waiter_client, name, {.ownership = dlock::Ownership::handle, .waiter_lease = 5s});
    dlock::FairLock other(other_client, name);
    std::this_thread::sleep_for(300ms);  // the inbox listens
    const auto start = Clock::now();
    std::atomic<bool> second{false}, returned{false};
    std::thread waiting([&] {
        (void)waiter.try_lock_for(1s);     // gives up: line_leave goes (EVALSHA, NOSCRIPT, then EVAL)
        second = waiter.try_lock_for(20s);  // waits again at once
        returned = true;
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key(name) + ":line"}) == "1"; }));
    std::this_thread::sleep_for(300ms);
    proxy.delay_replies(600ms);  // its replies and notices come 600 ms late
    std::this_thread::sleep_until(start + 1200ms);
    holder.unlock();  // granted to the waiter's place
    bool other_got = false;
    const auto until = Clock::now() + 3s;
    while (Clock::now() < until && !(other_got = other.try_lock())) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(eventually([&] { return returned.load(); }, 10s));
    EXPECT_FALSE(other_got && second.load() && waiter.is_held() && other.is_held())
        << "two holders of one lock, both leases valid";
    waiting.join();
    proxy.delay_replies(0ms);
    if (waiter.is_held()) waiter.unlock();
    if (other.is_held()) other.unlock();
}

// A force-release that comes between a direct grant and its waiter making
// the hold (both notices arrive together): the waiter does not hold it.
TEST(LockLine, AForceReleaseRightBehindTheGrantNoticeIsNotMissed) {
    for (int round = 0; round < 3; ++round) {
        dlock::support::RedisServer server;
        dlock::support::TcpProxy proxy(server.port());
        dlock::Client holder_client(server.uri()), other_client(server.uri());
        dlock::Client waiter_client(proxy.uri(), {.command_timeout = 5s});
        waiter_client.wait_connected();
        dlock::FairLock holder(holder_client, "forced");
        holder.lock();
        dlock::FairLock waiter(waiter_client, "forced", {.ownership = dlock::Ownership::handle, .waiter_lease = 3s});
        dlock::FairLock other(other_client, "forced");
        std::this_thread::sleep_for(300ms);
        std::atomic<bool> returned{false};
        std::thread waiting([&] {
            (void)waiter.try_lock_for(20s);
            returned = true;
        });
        ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("forced") + ":line"}) == "1"; }));
        std::this_thread::sleep_for(200ms);
        proxy.hold_requests(true);  // its confirmation stays held
        proxy.black_hole(true);     // its notices wait, to come together
        holder.unlock();            // granted to the waiter
        ASSERT_TRUE(dlock::force_release(holder_client, "forced"));
        ASSERT_TRUE(other.try_lock());
        std::this_thread::sleep_for(50ms);
        proxy.black_hole(false);
        std::this_thread::sleep_for(300ms);
        EXPECT_FALSE(waiter.is_held() && other.is_held()) << "round " << round << ": two holders";
        proxy.hold_requests(false);
        other.unlock();  // a waiter still in line gets it now
        ASSERT_TRUE(eventually([&] { return returned.load(); }, 25s));
        waiting.join();
        if (waiter.is_held()) waiter.unlock();
    }
}
