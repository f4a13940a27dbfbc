// A semaphore's direct grant against a real server: a release (or a grant
// that leaves permits free, or a give-up) grants the first in line inside
// the script and tells it; the waiter returns holding its permits without
// asking again. The waiter's client goes through a TcpProxy, so that the
// tests can hold its requests back (it must not need them), lose its
// notice, or delay it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/metrics.hpp"
#include "dlock/semaphore.hpp"
#include "channel_log.hpp"
#include "eventually.hpp"
#include "lock/semaphore_keys.hpp"
#include "lock/semaphore_scripts.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "scripts_run.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::scripts_run;
using dlock::test::semaphore_key;

namespace {

// How long the server keeps permit `id` of semaphore `name` from now (its
// clock); -1 ms when it is not held.
std::chrono::milliseconds server_left(const dlock::support::RedisServer& server, const std::string& name,
                                      const std::string& id) {
    const auto score = server.cli({"ZSCORE", semaphore_key(name), id});
    if (score.empty()) return -1ms;
    return std::chrono::milliseconds(std::stoll(score) - static_cast<long long>(server.time_us() / 1000));
}

std::string first_in_line(const dlock::support::RedisServer& server, const std::string& name) {
    return server.cli({"ZRANGE", semaphore_key(name) + ":queue", "0", "0"});
}

// One waiter and one holder on `name`: the waiter's client through a proxy.
struct WaiterAndHolder {
    explicit WaiterAndHolder(const std::string& name, unsigned limit = 1)
        : holder_sem(holder_client, name, {.limit = limit}),
          waiter_sem(waiter_client, name, {.limit = limit, .lease = 30s, .waiter_lease = 6s}) {}

    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client holder_client{server.uri()};
    dlock::Client waiter_client{proxy.uri()};
    dlock::Semaphore holder_sem;
    dlock::Semaphore waiter_sem;

    // Waits until `n` stand in line, and a little more: the last one has
    // subscribed, asked again and sleeps (its next refresh is 2 s away).
    void until_in_line(const std::string& name, int n) {
        ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key(name) + ":queue"}) == std::to_string(n); }));
        std::this_thread::sleep_for(200ms);
    }
    // One waiter for up to 20 s, once it stands first in line and sleeps;
    // id: its permit id.
    std::future<dlock::Permit> first_waiter(const std::string& name, std::string& id) {
        auto waited = std::async(std::launch::async, [this] { return waiter_sem.try_acquire_for(20s); });
        until_in_line(name, 1);
        id = first_in_line(server, name);
        return waited;
    }
};

}  // namespace

TEST(SemaphoreDirectGrant, AReleaseGrantsTheFirstWaiterInsideItAndTheWaiterReturnsWithoutAskingAgain) {
    WaiterAndHolder s("direct");
    auto held = s.holder_sem.acquire();
    std::string id;
    auto waited = s.first_waiter("direct", id);
    s.proxy.hold_requests(true);  // from here no request of the waiter reaches the server
    held.release();
    // Granted by the release itself, before the waiter sent anything.
    EXPECT_GT(server_left(s.server, "direct", id), 0ms) << "the release did not grant the waiter";
    EXPECT_EQ(s.server.cli({"ZCARD", semaphore_key("direct") + ":queue"}), "0");
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready) << "the waiter needed a request to take its permit";
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_EQ(p.id(), id);
    EXPECT_TRUE(p.is_held());
    // Unconfirmed, it is trusted for waiter_lease from the last request that
    // kept its place, never longer than the server keeps it.
    const auto kept = server_left(s.server, "direct", id);
    EXPECT_LE(p.valid_until() - Clock::now(), kept);
    EXPECT_LE(p.valid_until(), Clock::now() + 6s);
    EXPECT_EQ(s.waiter_client.metrics().value("dlock_handoffs_total", {{"how", "direct"}}), 1);
    // Its first renewal (held back until now, due a third of the way into
    // that validity): the full lease from its send. No confirmation of its own.
    s.proxy.hold_requests(false);
    EXPECT_TRUE(eventually([&] { return p.valid_until() > Clock::now() + 25s; }, 8s));
    EXPECT_GT(server_left(s.server, "direct", id), 25s);
    EXPECT_GE(s.waiter_client.metrics().value("dlock_renewals_total", {{"result", "renewed"}}), 1);
    EXPECT_EQ(s.waiter_client.metrics().value("dlock_grant_confirmations_total", {{"result", "confirmed"}}), 0);
    p.release();
    EXPECT_EQ(s.server.cli({"ZCARD", semaphore_key("direct")}), "0");
    EXPECT_EQ(s.server.cli({"HGET", semaphore_key("direct") + ":state", "used"}), "0");
}

// A grant is told on the waiter's client inbox alone: the semaphore's
// channel, which every client waiting on the semaphore reads (and all but
// one would wake for nothing), carries no grant notice, and the waiter
// returns holding its permit without asking again.
TEST(SemaphoreDirectGrant, AGrantIsToldOnTheWaitersInboxNotOnTheSemaphoresChannel) {
    WaiterAndHolder s("inbox");
    auto held = s.holder_sem.acquire();
    // The waiter's client asks for notices on its inbox once that listens
    // (before, on the channel): the only inbox but the holder's, so far.
    const auto holder_inbox = "dlock:inbox:" + held.id().substr(0, held.id().find(':'));
    ASSERT_TRUE(eventually([&] {
        const auto inboxes = s.server.cli({"PUBSUB", "CHANNELS", "dlock:inbox:*"});
        return !inboxes.empty() && inboxes != holder_inbox;
    }));
    dlock::Client onlooker(s.server.uri());
    dlock::support::ChannelLog log(onlooker, "inbox");
    std::string id;
    auto waited = s.first_waiter("inbox", id);
    EXPECT_NE(id.find("!!#1"), std::string::npos) << "not marked as hearing grants on its inbox: " << id;
    s.proxy.hold_requests(true);  // it must not need a request to take its permit
    held.release();
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready) << "the waiter did not hear its grant";
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_EQ(p.id(), id);
    // Whatever the release published on the channel is read before this.
    const std::string marker = "marker";
    s.server.cli({"PUBLISH", dlock::detail::SemaphoreKeys("inbox").channel(), marker});
    ASSERT_TRUE(eventually([&] {
        const auto all = log.messages();
        return std::find(all.begin(), all.end(), marker) != all.end();
    }));
    for (const auto& message : log.messages())
        EXPECT_NE(message.rfind("granted", 0), 0u) << "a grant notice on the semaphore's channel: " << message;
    s.proxy.hold_requests(false);
    p.release();
    EXPECT_EQ(s.server.cli({"HGET", semaphore_key("inbox") + ":state", "used"}), "0");
}

// A client whose inbox the server's ACL refuses (it may use the semaphore's
// channel) asks to be told its grants on the channel: they reach it at
// once, not at its place's refresh (10 s here).
TEST(SemaphoreDirectGrant, AClientWhoseInboxIsRefusedIsToldItsGrantOnTheChannel) {
    dlock::support::RedisServer server(
        {.acl_users = {{"sem", "on", ">pw", "~*", "resetchannels", "&dlock:sem:*", "+@all"}}});
    const auto uri = "redis://sem:pw@127.0.0.1:" + std::to_string(server.port());
    dlock::Client holder_client(uri), waiter_client(uri);
    dlock::Semaphore holder(holder_client, "refused-inbox", {.limit = 1});
    dlock::Semaphore waiter(waiter_client, "refused-inbox", {.limit = 1, .waiter_lease = 30s});
    for (int round = 0; round < 2; ++round) {  // the client's first wait, and a later one
        auto held = holder.acquire();
        auto waited = std::async(std::launch::async, [&] { return waiter.try_acquire_for(25s); });
        ASSERT_TRUE(eventually([&] { return first_in_line(server, "refused-inbox") != ""; }));
        std::this_thread::sleep_for(200ms);
        const auto released_at = Clock::now();
        held.release();
        ASSERT_EQ(waited.wait_for(5s), std::future_status::ready) << "round " << round << ": the grant was not heard";
        auto p = waited.get();
        ASSERT_TRUE(p);
        EXPECT_LT(Clock::now() - released_at, 3s) << "round " << round << ": woken by its refresh, not by its grant";
        EXPECT_EQ(p.id().find("!!#"), std::string::npos) << "asked for notices on an inbox it cannot read: " << p.id();
        p.release();
    }
}

// Strict arrival order: the release grants the first in line while its k
// permits fit, and stops at the first whose k do not (the one behind it,
// which would fit, waits too).
TEST(SemaphoreDirectGrant, GrantsGoInArrivalOrderWhileTheFirstInLineFits) {
    WaiterAndHolder s("fifo", 3);
    auto all = s.holder_sem.acquire(3);
    const unsigned ks[] = {2, 1, 2, 1};
    std::vector<std::future<dlock::Permit>> waiters;
    std::vector<std::string> ids;
    for (unsigned k : ks) {
        waiters.push_back(std::async(std::launch::async, [&s, k] { return s.waiter_sem.try_acquire_for(20s, k); }));
        s.until_in_line("fifo", static_cast<int>(waiters.size()));
        ids.push_back(s.server.cli({"ZRANGE", semaphore_key("fifo") + ":queue", "-1", "-1"}));
    }
    s.proxy.hold_requests(true);
    all.release();  // 3 free: 2 + 1 granted; the next 2 do not fit, the 1 behind them waits
    EXPECT_GT(server_left(s.server, "fifo", ids[0]), 0ms);
    EXPECT_GT(server_left(s.server, "fifo", ids[1]), 0ms);
    EXPECT_EQ(server_left(s.server, "fifo", ids[2]), -1ms);
    EXPECT_EQ(server_left(s.server, "fifo", ids[3]), -1ms) << "the small request jumped the line";
    EXPECT_EQ(s.server.cli({"HGET", semaphore_key("fifo") + ":state", "used"}), "3");
    ASSERT_EQ(waiters[0].wait_for(5s), std::future_status::ready);
    ASSERT_EQ(waiters[1].wait_for(5s), std::future_status::ready);
    EXPECT_EQ(waiters[3].wait_for(300ms), std::future_status::timeout);
    s.proxy.hold_requests(false);
    auto p0 = waiters[0].get();
    auto p1 = waiters[1].get();
    ASSERT_TRUE(p0);
    ASSERT_TRUE(p1);
    EXPECT_EQ(p0.count(), 2u);
    p1.release();  // 1 free: the 2 first in line do not fit, the 1 behind them waits
    EXPECT_EQ(server_left(s.server, "fifo", ids[3]), -1ms) << "the small request jumped the line";
    EXPECT_EQ(waiters[3].wait_for(300ms), std::future_status::timeout);
    p0.release();  // 3 free: both granted inside this release
    EXPECT_GT(server_left(s.server, "fifo", ids[2]), 0ms);
    EXPECT_GT(server_left(s.server, "fifo", ids[3]), 0ms);
    auto p2 = waiters[2].get();
    auto p3 = waiters[3].get();
    EXPECT_TRUE(p2);
    EXPECT_TRUE(p3);
    EXPECT_EQ(s.server.cli({"ZCARD", semaphore_key("fifo") + ":queue"}), "0");
}

// The notice was lost (its subscriber reconnected): the waiter asks, finds
// its id granted, and counts the full lease from that request. The server
// must keep it that long (the grant itself was leased only until the
// waiter's place would have ended).
TEST(SemaphoreDirectGrant, AWaiterThatMissedItsNoticeFindsItsGrantAndTheServerKeepsTheLeaseItCounts) {
    WaiterAndHolder s("missed");
    auto held = s.holder_sem.acquire();
    std::string id;
    auto waited = s.first_waiter("missed", id);
    s.proxy.black_hole(true);  // the notice is kept from the waiter...
    held.release();
    const auto granted_for = server_left(s.server, "missed", id);
    EXPECT_GT(granted_for, 0ms);
    EXPECT_LE(granted_for, 6s) << "granted for what was left of its place";
    s.proxy.drop_connections();  // ...and lost: its client reconnects and asks
    s.proxy.black_hole(false);
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_EQ(p.id(), id);
    const auto kept = server_left(s.server, "missed", id);
    const auto counted = p.valid_until() - Clock::now();
    EXPECT_GT(counted, 20s) << "its lease counted from its request";
    EXPECT_LE(counted, kept) << "the client trusts the permit longer than the server keeps it";
}

// Stopped while the notice of its grant was on its way: the waiter does not
// take the permit, and gives it back.
TEST(SemaphoreDirectGrant, AWaiterThatGivesUpWhileItsGrantIsOnItsWayGivesThePermitBack) {
    WaiterAndHolder s("gaveup");
    auto held = s.holder_sem.acquire();
    std::stop_source stop;
    auto waited = std::async(std::launch::async, [&] {
        return s.waiter_sem.try_acquire_until(Clock::now() + 20s, 1, stop.get_token());
    });
    s.until_in_line("gaveup", 1);
    const auto id = first_in_line(s.server, "gaveup");
    s.proxy.delay_replies(1s);  // the notice arrives a second late
    held.release();
    EXPECT_GT(server_left(s.server, "gaveup", id), 0ms) << "the release did not grant the waiter";
    stop.request_stop();
    EXPECT_FALSE(waited.get());
    s.proxy.delay_replies(0ms);
    // Given back, not left to the end of its grant (what was left of a 6 s place).
    EXPECT_TRUE(eventually([&] { return s.server.cli({"ZCARD", semaphore_key("gaveup")}) == "0"; }, 2s))
        << "the permit of a waiter that gave up was not given back";
    EXPECT_EQ(s.server.cli({"HGET", semaphore_key("gaveup") + ":state", "used"}), "0");
    EXPECT_TRUE(s.holder_sem.try_acquire());
}

// A waiter that died once granted (its client never confirms) holds the
// permit no longer than what was left of its place, not a lease.
TEST(SemaphoreDirectGrant, AWaiterThatDiedOnceGrantedHoldsThePermitNoLongerThanItsPlace) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore sem(client, "died", {.limit = 1, .lease = 30s});
    auto held = sem.acquire();
    // In line as a client that takes direct grants asks ('!' before '#'),
    // with a place of 1 s, and then nothing more.
    const std::string dead = "deadclient:s1!#1";
    const dlock::detail::SemaphoreKeys keys("died");
    std::string_view k[] = {keys.all[0],         keys.all[1],         keys.all[2],        keys.all[3],   keys.all[4],
                            keys.all[5],         keys.other_kinds[0], keys.other_kinds[1], keys.other_kinds[2]};
    std::string_view a[] = {dead, "1", "30000", "1", "wait", "1000", "60000", ""};
    const auto answer = client.eval(dlock::detail::semaphore_acquire_script(), k, a);
    ASSERT_EQ(answer.elements.at(0).integer, 0);  // in line
    held.release();
    const auto granted_for = server_left(server, "died", dead);
    EXPECT_GT(granted_for, 0ms) << "the release did not grant the waiter";
    EXPECT_LE(granted_for, 1s);
    const auto start = Clock::now();
    auto p = sem.try_acquire_for(10s);
    EXPECT_TRUE(p);
    EXPECT_LT(Clock::now() - start, 3s) << "the dead waiter's permit came back later than its place would have ended";
    EXPECT_EQ(server_left(server, "died", dead), -1ms);
}

// A grant notice that reaches the client after the answer to the request the
// waiter makes right after subscribing, but before its first sleep, is kept
// for that sleep (ChannelWatch::expect, before the request leaves). When the
// watch knew a waiter only from its first sleep, the notice was dropped and
// the waiter, granted on the server, slept until its next refresh
// (waiter_lease/3: 10 s here) while its permit was held for nobody: 5 of 8
// runs, 9 of 28 in another count. Both reach the client at once here: the
// proxy delays replies, and lets go of the request's answer and the notice
// together (the race is timing-dependent: the test fails in about one run
// in three without the fix).
TEST(SemaphoreDirectGrantAttack, ANoticeThatComesBeforeTheFirstSleepIsNotLost) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client holder_client{server.uri()};
    dlock::Client waiter_client{proxy.uri()};
    dlock::Semaphore holder_sem(holder_client, "first", {.limit = 1, .lease = 60s});
    dlock::Semaphore waiter_sem(waiter_client, "first", {.limit = 1, .lease = 60s, .waiter_lease = 30s});
    auto held = holder_sem.acquire();
    proxy.delay_replies(400ms);
    auto waited = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(40s); });
    // Its first request puts it in line...
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("first") + ":queue"}) == "1"; }));
    const auto id = first_in_line(server, "first");
    const auto place = server.cli({"ZSCORE", semaphore_key("first") + ":waiters", id});
    // ...and the one after subscribing keeps its place: its answer is on its way.
    ASSERT_TRUE(eventually([&] { return server.cli({"ZSCORE", semaphore_key("first") + ":waiters", id}) != place; }, 10s));
    held.release();  // grants it: the notice waits in the proxy behind the answer
    ASSERT_GT(server_left(server, "first", id), 0ms) << "the release did not grant the waiter";
    std::this_thread::sleep_for(50ms);
    const auto start = Clock::now();
    proxy.delay_replies(0ms);  // the answer and the notice, together
    ASSERT_EQ(waited.wait_for(30s), std::future_status::ready);
    const auto took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_TRUE(waited.get());
    EXPECT_LT(took, 3.0) << "granted on the server, the waiter slept on " << took
                         << " s after its notice was delivered: the notice was dropped";
}

// A direct grant whose confirmation never reaches the server: the server
// keeps the permit until the waiter's place would have ended (3 s), then
// gives it to another. The waiter's client must have stopped trusting it by
// then, and tell its loss.
TEST(SemaphoreDirectGrantAttack, AnUnconfirmedDirectGrantIsNotTrustedPastTheServersLeaseAndItsLossIsTold) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client holder_client{server.uri()};
    dlock::Client waiter_client{proxy.uri()};
    std::atomic<int> lost{0};
    dlock::Semaphore holder_sem(holder_client, "unconfirmed", {.limit = 1, .lease = 30s});
    dlock::Semaphore waiter_sem(waiter_client, "unconfirmed",
                                {.limit = 1, .lease = 30s, .waiter_lease = 3s,
                                 .on_lost = [&](std::string_view, std::error_code) { ++lost; }});
    auto held = holder_sem.acquire();
    auto waited = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("unconfirmed") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
    const auto id = first_in_line(server, "unconfirmed");
    proxy.hold_requests(true);  // its confirmation never arrives
    held.release();
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready);
    auto p = waited.get();
    ASSERT_TRUE(p);
    ASSERT_TRUE(p.is_held());
    // The other takes it as soon as the server let it go.
    const auto start = Clock::now();
    dlock::Permit other;
    while (!other && Clock::now() - start < 10s) {
        other = holder_sem.try_acquire();
        if (!other) std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(other) << "the server never let the unconfirmed grant go";
    EXPECT_FALSE(p.is_held()) << "two hold the one permit";
    EXPECT_TRUE(eventually([&] { return lost.load() == 1; }, 5s)) << "the loss was not told";
    EXPECT_TRUE(p.lost_reason().has_value());
    EXPECT_EQ(server.cli({"HGET", semaphore_key("unconfirmed") + ":state", "used"}), "1") << "the count drifted";
    proxy.hold_requests(false);
    std::error_code ec;
    p.release(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
    other.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("unconfirmed") + ":state", "used"}), "0") << "the count drifted";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("unconfirmed")}), "0");
}

// A raised limit while three wait behind a holder: the two that now fit are
// granted (the first by its own request, the next inside it), in arrival
// order; the third waits, then is granted directly by the holder's release.
// Never more permits held than the limit.
TEST(SemaphoreDirectGrantAttack, ARaisedLimitGrantsWhatFitsInOrderAndNoMore) {
    dlock::support::RedisServer server;
    dlock::Client holder_client{server.uri()};
    dlock::Client waiter_client{server.uri()};
    dlock::Semaphore holder_sem(holder_client, "raised", {.limit = 1, .lease = 30s});
    dlock::Semaphore waiter_sem(waiter_client, "raised", {.limit = 1, .lease = 30s, .waiter_lease = 30s});
    auto held = holder_sem.acquire();
    std::vector<std::future<dlock::Permit>> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(20s); }));
        ASSERT_TRUE(eventually(
            [&] { return server.cli({"ZCARD", semaphore_key("raised") + ":queue"}) == std::to_string(i + 1); }));
    }
    std::this_thread::sleep_for(300ms);
    holder_sem.set_limit(3);
    ASSERT_EQ(waiters[0].wait_for(5s), std::future_status::ready);
    ASSERT_EQ(waiters[1].wait_for(5s), std::future_status::ready);
    EXPECT_EQ(waiters[2].wait_for(500ms), std::future_status::timeout) << "more than the limit";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("raised")}), "3");
    EXPECT_EQ(server.cli({"HGET", semaphore_key("raised") + ":state", "used"}), "3");
    held.release();
    ASSERT_EQ(waiters[2].wait_for(5s), std::future_status::ready) << "the last waiter was not granted";
    auto p0 = waiters[0].get(), p1 = waiters[1].get(), p2 = waiters[2].get();
    EXPECT_TRUE(p0 && p1 && p2);
    EXPECT_EQ(server.cli({"HGET", semaphore_key("raised") + ":state", "used"}), "3");
}

// An operator force-releases a permit granted directly whose confirmation
// has not reached the server: the holder is told at once (its inbox), the
// force release grants the next in line, and the late confirmation does not
// bring the permit back.
TEST(SemaphoreDirectGrantAttack, AForceReleasedUnconfirmedDirectGrantIsLostAndTheNextIsGranted) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client holder_client{server.uri()};
    dlock::Client waiter_client{proxy.uri()};
    dlock::Semaphore holder_sem(holder_client, "forced", {.limit = 1, .lease = 30s, .waiter_lease = 30s});
    dlock::Semaphore waiter_sem(waiter_client, "forced", {.limit = 1, .lease = 30s, .waiter_lease = 30s});
    auto held = holder_sem.acquire();
    auto first = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("forced") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
    auto second = std::async(std::launch::async, [&] { return holder_sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("forced") + ":queue"}) == "2"; }));
    std::this_thread::sleep_for(200ms);
    proxy.hold_requests(true);  // the first's confirmation waits
    held.release();
    ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
    auto p = first.get();
    ASSERT_TRUE(p);
    const auto broken = dlock::force_release(holder_client, "forced", {.holder = p.id()});
    ASSERT_EQ(broken.broken.size(), 1u);
    ASSERT_EQ(second.wait_for(5s), std::future_status::ready) << "the force release did not grant the next";
    auto q = second.get();
    ASSERT_TRUE(q);
    EXPECT_TRUE(eventually([&] { return !p.is_held(); }, 3s)) << "the revoked permit is still trusted";
    proxy.hold_requests(false);  // the late confirmation
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(p.is_held());
    EXPECT_EQ(server.cli({"ZSCORE", semaphore_key("forced"), p.id()}), "") << "the confirmation brought the permit back";
    EXPECT_EQ(server.cli({"HGET", semaphore_key("forced") + ":state", "used"}), "1");
}

namespace {

// `threads` threads on two clients, each acquiring `rounds` times and
// holding `hold`: how many held at once at most, and how many waits came
// anywhere near a refresh (waiter_lease/3 = 10 s) while permits go round
// every few milliseconds (a waiter that sleeps on while granted, its notice
// dropped, shows as such a wait).
void many_waiters(const std::string& name, unsigned limit, int threads, int rounds, std::chrono::microseconds hold) {
    dlock::support::RedisServer server;
    dlock::Client a{server.uri()}, b{server.uri()};
    const dlock::SemaphoreOptions options{.limit = limit, .lease = 30s, .waiter_lease = 30s};
    dlock::Semaphore sa(a, name, options), sb(b, name, options);
    std::atomic<int> holders{0}, most{0}, slow{0}, done{0};
    std::atomic<long long> longest_ms{0};
    std::vector<std::thread> all;
    for (int t = 0; t < threads; ++t)
        all.emplace_back([&, t] {
            auto& sem = t % 2 ? sa : sb;
            for (int i = 0; i < rounds; ++i) {
                const auto start = Clock::now();
                auto p = sem.try_acquire_for(60s);
                const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
                if (waited > longest_ms) longest_ms = waited;
                if (waited > 5000) ++slow;
                if (!p) continue;
                const int now = ++holders;
                for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
                }
                std::this_thread::sleep_for(hold);
                --holders;
                p.release();
                ++done;
            }
        });
    for (auto& thread : all) thread.join();
    std::printf("%d acquisitions, at most %d held at once, longest wait %lld ms, %d waits over 5 s\n", done.load(),
                most.load(), longest_ms.load(), slow.load());
    EXPECT_EQ(done.load(), threads * rounds);
    EXPECT_LE(most.load(), static_cast<int>(limit));
    EXPECT_EQ(slow.load(), 0) << "waiters slept through their grants";
}

}  // namespace

// Many waiters on two clients, no faults: never more holders than the limit,
// and none sleeps through its grant.
TEST(SemaphoreDirectGrantAttack, ManyWaitersNeverExceedTheLimitAndNoneSleepsThroughItsGrant) {
    many_waiters("many", 3, 24, 25, 2ms);
}

// The same with a short line on one permit: a waiter is often first in line
// right after it joined, and its grant comes as it goes to sleep the first time.
TEST(SemaphoreDirectGrantAttack, FewWaitersOnOnePermitNoneSleepsThroughItsGrant) {
    many_waiters("few", 1, 3, 300, 200us);
}

// A waiter that joins a line where another thread of its client waits
// already finds the client listening: known to its watch before its request
// leaves, it sleeps after that one request (a first waiter asks again once
// it listens, since a grant may have come before). Both are then granted in
// turn, each by a release.
TEST(SemaphoreDirectGrant, ASecondWaiterOfAClientThatListensAlreadyAsksOnceBeforeItSleeps) {
    dlock::support::RedisServer server;
    dlock::Client holder_client{server.uri()}, waiter_client{server.uri()};
    // Long leases: no renewal or place refresh falls in the counted window.
    dlock::Semaphore holder_sem(holder_client, "once", {.limit = 1, .lease = 60s});
    dlock::Semaphore waiter_sem(waiter_client, "once", {.limit = 1, .lease = 60s, .waiter_lease = 30s});
    auto held = holder_sem.acquire();
    const auto in_line = [&](int n) {
        return eventually([&] { return server.cli({"ZCARD", semaphore_key("once") + ":queue"}) == std::to_string(n); });
    };
    auto first = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(30s); });
    ASSERT_TRUE(in_line(1));
    std::this_thread::sleep_for(300ms);  // subscribed, asked again, asleep
    const long before = scripts_run(server);
    auto second = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(30s); });
    ASSERT_TRUE(in_line(2));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(scripts_run(server) - before, 1) << "the second waiter asked more than once before it slept";
    held.release();
    ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
    auto first_permit = first.get();
    ASSERT_TRUE(first_permit);
    EXPECT_EQ(second.wait_for(300ms), std::future_status::timeout) << "more holders than the limit";
    first_permit.release();
    ASSERT_EQ(second.wait_for(5s), std::future_status::ready);
    auto second_permit = second.get();
    ASSERT_TRUE(second_permit);
    EXPECT_TRUE(second_permit.is_held());
    second_permit.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("once") + ":state", "used"}), "0");
}

namespace {

// One waiter behind one holder on `name` (limit 1); the holder releases and
// the waiter returns with its direct grant. Scripts counted from just before
// that release.
struct GrantedWaiter {
    GrantedWaiter(const std::string& name, bool renew)
        : holder_sem(holder_client, name, {.limit = 1, .lease = 60s}),
          waiter_sem(waiter_client, name, waiter_options(renew)) {
        holder_sem.acquire().release();  // the server knows the release script: no NOSCRIPT detour below
        auto held = holder_sem.acquire();
        auto waited = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(30s); });
        in_line = eventually([&] { return server.cli({"ZCARD", semaphore_key(name) + ":queue"}) == "1"; });
        std::this_thread::sleep_for(300ms);  // subscribed, asked again, asleep
        before = scripts_run(server);
        held.release();
        if (waited.wait_for(5s) == std::future_status::ready) permit = waited.get();
    }
    static dlock::SemaphoreOptions waiter_options(bool renew) {
        // Long leases: no place refresh or renewal of the holder in the counted window.
        return {.limit = 1, .lease = 60s, .renew = renew, .waiter_lease = 30s};
    }

    dlock::support::RedisServer server;
    dlock::Client holder_client{server.uri()}, waiter_client{server.uri()};
    dlock::Semaphore holder_sem;
    dlock::Semaphore waiter_sem;
    bool in_line = false;
    long before = 0;
    dlock::Permit permit;
};

}  // namespace

// A permit granted directly and released before its first renewal is due
// costs the server the release that granted it and its own release: no
// confirmation of its own (it is the waiter's from the grant on; the lease
// keeper renews it a third of the way into its validity, like any permit).
TEST(SemaphoreDirectGrant, APermitGrantedDirectlyAndReleasedSoonCostsTheServerOnlyTheTwoReleases) {
    GrantedWaiter s("soon", true);
    ASSERT_TRUE(s.in_line);
    ASSERT_TRUE(s.permit);
    EXPECT_EQ(s.waiter_client.metrics().value("dlock_handoffs_total", {{"how", "direct"}}), 1);
    s.permit.release();
    EXPECT_EQ(scripts_run(s.server) - s.before, 2) << "a script besides the two releases";
    EXPECT_EQ(s.server.cli({"HGET", semaphore_key("soon") + ":state", "used"}), "0");
}

// A fixed lease (renew = false) is never renewed: its direct grant is
// confirmed at once to the full lease, which is then what it is trusted for.
TEST(SemaphoreDirectGrant, AFixedLeaseGrantedDirectlyIsConfirmedAtOnceToItsFullLease) {
    GrantedWaiter s("fixed", false);
    ASSERT_TRUE(s.in_line);
    ASSERT_TRUE(s.permit);
    EXPECT_TRUE(eventually([&] { return s.permit.valid_until() > Clock::now() + 50s; }));
    EXPECT_GT(server_left(s.server, "fixed", s.permit.id()), 50s);
    EXPECT_EQ(scripts_run(s.server) - s.before, 2) << "the release and the confirmation";
    EXPECT_EQ(s.waiter_client.metrics().value("dlock_grant_confirmations_total", {{"result", "confirmed"}}), 1);
    s.permit.release();
}

namespace {

// One round of a force release of a permit that a release has just granted
// directly, its notice still on its way to the waiter's client: the
// revocation (on that client's inbox) arrives right behind the notice,
// before the waiter has made its hold, and force_release has granted the
// one permit to the next in line. Returns whether both trusted the permit
// at once for 200 ms or more.
bool both_held_after_a_force_release_behind_the_notice() {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client holder_client{server.uri()}, admin{server.uri()}, second_client{server.uri()};
    dlock::Client first_client{proxy.uri()};
    std::atomic<int> lost{0};
    dlock::Semaphore holder_sem(holder_client, "behind", {.limit = 1});
    dlock::Semaphore first_sem(first_client, "behind",
                               {.limit = 1, .lease = 30s, .waiter_lease = 6s,
                                .on_lost = [&](std::string_view, std::error_code) { ++lost; }});
    dlock::Semaphore second_sem(second_client, "behind", {.limit = 1, .lease = 30s, .waiter_lease = 6s});
    auto held = holder_sem.acquire();
    auto first = std::async(std::launch::async, [&] { return first_sem.try_acquire_for(20s); });
    EXPECT_TRUE(eventually([&] { return first_in_line(server, "behind") != ""; }));
    std::this_thread::sleep_for(300ms);  // subscribed, asked again, asleep
    const auto first_id = first_in_line(server, "behind");
    auto second = std::async(std::launch::async, [&] { return second_sem.try_acquire_for(20s); });
    EXPECT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("behind") + ":queue"}) == "2"; }));
    std::this_thread::sleep_for(300ms);
    proxy.black_hole(true);  // the first's notice and revocation wait in the proxy
    held.release();          // grants the first directly
    const auto broken = dlock::force_release(admin, "behind", {.holder = first_id});
    EXPECT_EQ(broken.broken.size(), 1u);
    auto p2 = second.get();  // granted by the force release
    EXPECT_TRUE(p2);
    proxy.black_hole(false);  // notice and revocation arrive together
    EXPECT_EQ(first.wait_for(5s), std::future_status::ready);
    auto p1 = first.get();
    if (!p1 || !p2) return false;
    const auto taken = Clock::now();
    while (p1.is_held() && p2.is_held() && Clock::now() - taken < 2s) std::this_thread::sleep_for(1ms);
    const bool both = Clock::now() - taken >= 200ms;
    EXPECT_TRUE(eventually([&] { return lost.load() == 1; }, 5s)) << "the loss was not told";
    std::error_code ec;
    p1.release(ec);
    p2.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("behind") + ":state", "used"}), "0") << "the count drifted";
    return both;
}

}  // namespace

// A permit granted directly and force-released while its notice is on its
// way is lost for its waiter at once (force_release tells the holder within
// about a round trip), not at its first renewal: the next in line holds the
// semaphore's one permit. Several rounds, since the revocation may also
// come after the hold is made (found then among the holds).
TEST(SemaphoreDirectGrantAttack, AGrantForceReleasedWhileItsNoticeIsOnItsWayIsLostAtOnce) {
    int overlapped = 0;
    for (int round = 0; round < 6; ++round) overlapped += both_held_after_a_force_release_behind_the_notice();
    EXPECT_EQ(overlapped, 0) << "two held the one permit of a semaphore of limit 1";
}

// A short waiter_lease beside a long lease: a direct grant's first validity
// (waiter_lease from its place) ends before a third of the lease, and its
// loss is watched 20 ms before that (the margin of the lease). Its first
// renewal must leave before that watch: renewed, not lost.
TEST(SemaphoreDirectGrantAttack, ADirectGrantWithTheShortestWaiterLeaseIsRenewedNotLost) {
    dlock::support::RedisServer server;
    dlock::Client holder_client{server.uri()}, waiter_client{server.uri()};
    dlock::Semaphore holder_sem(holder_client, "short", {.limit = 1, .lease = 30s});
    dlock::Semaphore waiter_sem(waiter_client, "short", {.limit = 1, .lease = 30s, .waiter_lease = 30ms});
    int taken = 0, lost = 0;
    for (int round = 0; round < 8; ++round) {
        auto held = holder_sem.acquire();
        auto waited = std::async(std::launch::async, [&] { return waiter_sem.try_acquire_for(5s); });
        EXPECT_TRUE(eventually([&] { return first_in_line(server, "short") != ""; }, 2s));
        std::this_thread::sleep_for(std::chrono::milliseconds(100 + 17 * round));
        held.release();
        auto p = waited.get();
        if (!p) continue;
        ++taken;
        std::this_thread::sleep_for(300ms);
        lost += !p.is_held();
        std::error_code ec;
        p.release(ec);
    }
    EXPECT_GE(taken, 6);
    EXPECT_EQ(lost, 0) << "direct grants lost before their first renewal";
    // Direct grants (the path under test) among them, each renewed.
    const auto direct = waiter_client.metrics().value("dlock_handoffs_total", {{"how", "direct"}});
    EXPECT_GE(direct, 1);
    EXPECT_GE(waiter_client.metrics().value("dlock_renewals_total", {{"result", "renewed"}}), direct);
}
