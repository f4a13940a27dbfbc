// Why a hold was lost (dlock::LostReason), told to its holder three ways:
// on_lost's code, lost_reason() beside lost_token(), and unlock(ec)'s code.
// Each reason is produced for real against redis-server: a network that
// stalls renewals (expired), a force-release (revoked), a restart without
// persistence or a deleted key (taken_over), an ACL that forbids the
// renewal's script (renewal_refused).
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "warnings.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::LostReason;
using dlock::support::eventually;
using dlock::support::RedisServer;

using dlock::test::lock_key;

namespace {

// What on_lost heard, once.
struct Told {
    std::promise<std::error_code> promise;
    std::future<std::error_code> future = promise.get_future();
    std::atomic<Clock::rep> at{0};
    auto callback() {
        return [this](std::string_view, std::error_code ec) {
            at = Clock::now().time_since_epoch().count();
            promise.set_value(ec);
        };
    }
    std::error_code get(std::chrono::milliseconds within = 5s) {
        if (future.wait_for(within) != std::future_status::ready) return {};
        return future.get();
    }
    Clock::time_point when() const { return Clock::time_point{Clock::duration(at.load())}; }
};

void delete_matching(RedisServer& server, const std::string& pattern) {
    std::istringstream keys(server.cli({"KEYS", pattern}));
    for (std::string key; std::getline(keys, key);)
        if (!key.empty()) server.cli({"DEL", key});
}

dlock::errc errc_for(LostReason reason) {
    switch (reason) {
        case LostReason::expired: return dlock::errc::lease_expired;
        case LostReason::revoked: return dlock::errc::lock_revoked;
        case LostReason::taken_over: return dlock::errc::lock_taken_over;
        case LostReason::renewal_refused: return dlock::errc::renewal_refused;
    }
    return dlock::errc::lease_lost;
}

// The three ways a holder hears of a loss all say `reason`: on_lost's code
// (which is also lease_lost, and names the reason), the query, and the
// code of the unlock that follows.
template <typename AnyLock>
void expect_told(Told& told, AnyLock& lock, LostReason reason) {
    const auto ec = told.get();
    ASSERT_TRUE(ec) << "on_lost was not called";
    EXPECT_EQ(ec, errc_for(reason)) << ec.message();
    EXPECT_EQ(ec, dlock::errc::lease_lost) << "the reason's code must compare equal to lease_lost";
    EXPECT_EQ(dlock::lost_reason_of(ec), reason) << ec.message();
    EXPECT_TRUE(eventually([&] { return lock.lost_token().stop_requested(); }));
    EXPECT_EQ(lock.lost_reason(), reason);
    std::error_code unlocked;
    lock.unlock(unlocked);
    EXPECT_EQ(unlocked, errc_for(reason)) << unlocked.message();
    EXPECT_EQ(unlocked, dlock::errc::lease_lost);
    EXPECT_NE(unlocked.message().find(reason == LostReason::taken_over ? "taken over"
                                      : reason == LostReason::renewal_refused
                                          ? "refused"
                                          : std::string(dlock::to_string(reason))),
              std::string::npos)
        << unlocked.message();
    // Once the lost hold is unlocked, nothing is left to ask about.
    EXPECT_EQ(lock.lost_reason(), std::nullopt);
}

}  // namespace

TEST(LostReason, NamesAndCodes) {
    EXPECT_EQ(dlock::to_string(LostReason::expired), "expired");
    EXPECT_EQ(dlock::to_string(LostReason::revoked), "revoked");
    EXPECT_EQ(dlock::to_string(LostReason::taken_over), "taken_over");
    EXPECT_EQ(dlock::to_string(LostReason::renewal_refused), "renewal_refused");
    for (auto reason : {LostReason::expired, LostReason::revoked, LostReason::taken_over, LostReason::renewal_refused}) {
        const auto ec = dlock::make_error_code(reason);
        EXPECT_EQ(ec, dlock::errc::lease_lost);
        EXPECT_TRUE(dlock::errc::lease_lost == ec);
        EXPECT_FALSE(ec != dlock::errc::lease_lost);
        EXPECT_NE(ec, dlock::errc::not_owner);
        EXPECT_EQ(dlock::lost_reason_of(ec), reason);
        EXPECT_NE(ec.message(), dlock::make_error_code(dlock::errc::lease_lost).message());
    }
    // The generic code is not one of them, and matches only itself.
    EXPECT_EQ(dlock::lost_reason_of(dlock::errc::lease_lost), std::nullopt);
    EXPECT_NE(dlock::make_error_code(dlock::errc::lease_lost), dlock::errc::lease_expired);
    EXPECT_EQ(dlock::lost_reason_of(std::make_error_code(std::errc::timed_out)), std::nullopt);
}

// The network stalls every renewal: validity runs out unconfirmed.
TEST(LostReason, ExpiredWhenRenewalsAreNotConfirmed) {
    RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::ClientOptions options;
    options.command_timeout = 200ms;
    options.connect_timeout = 200ms;
    dlock::Client client(proxy.uri(), options);
    Told told;
    auto lock = client.lock("stalled", {.lease = 600ms, .on_lost = told.callback()});
    lock.lock();
    const auto valid_until = lock.valid_until();
    proxy.black_hole(true);
    expect_told(told, lock, LostReason::expired);
    EXPECT_GE(told.when(), valid_until - 50ms) << "told before its validity could have ended";
}

TEST(LostReason, RevokedByForceRelease) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client admin(server.uri());
    Told told;
    auto lock = client.lock("revoked", {.lease = 30s, .on_lost = told.callback()});
    lock.lock();
    ASSERT_TRUE(dlock::force_release(admin, "revoked"));
    expect_told(told, lock, LostReason::revoked);
}

// A restart without persistence forgets the lock: the next renewal (the
// resubscription after the reconnect asks for one at once) finds it gone.
TEST(LostReason, TakenOverAfterARestartWithoutPersistence) {
    RedisServer server;
    dlock::ClientOptions options;
    options.reconnect_backoff_max = 50ms;
    dlock::Client client(server.uri(), options);
    Told told;
    auto lock = client.lock("restarted", {.lease = 10s, .on_lost = told.callback()});
    lock.lock();
    server.restart();
    ASSERT_EQ(server.cli({"EXISTS", lock_key("restarted")}), "0");
    expect_told(told, lock, LostReason::taken_over);
}

TEST(LostReason, TakenOverWhenTheKeyIsDeleted) {
    RedisServer server;
    dlock::Client client(server.uri());
    Told told;
    auto lock = client.lock("deleted", {.lease = 600ms, .on_lost = told.callback()});
    lock.lock();
    const auto valid_until = lock.valid_until();
    server.cli({"DEL", lock_key("deleted")});
    expect_told(told, lock, LostReason::taken_over);
    EXPECT_LT(told.when(), valid_until) << "the renewal's answer, not the validity's end, told it";
}

// An ACL that no longer lets the holder run the renewal's script: the
// server answers NOPERM, which no retry mends. The hold is given up at that
// answer, before its validity ends.
TEST(LostReason, RenewalRefusedByAnAcl) {
    RedisServer server({.acl_users = {{"locker", "on", ">pw", "~*", "&*", "+@all"}}});
    dlock::Client client("redis://locker:pw@127.0.0.1:" + std::to_string(server.port()));
    Told told;
    auto lock = client.lock("forbidden", {.lease = 900ms, .on_lost = told.callback()});
    lock.lock();
    const auto valid_until = lock.valid_until();
    server.cli({"ACL", "SETUSER", "locker", "-evalsha", "-eval"});
    expect_told(told, lock, LostReason::renewal_refused);
    EXPECT_LT(told.when(), valid_until - 100ms) << "the refusal, not the validity's end, told it";
    EXPECT_EQ(server.cli({"EXISTS", lock_key("forbidden")}), "1") << "the key is left to its lease";
}

// Every kind's hold carries the reason: the read and write sides of a
// read-write lock, a semaphore's permit, a Redlock and a multi-lock.
TEST(LostReason, EveryKindTellsIt) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client admin(server.uri());
    {
        Told told;
        dlock::RwLock rw(client, "rw", {.lease = 600ms, .on_lost = told.callback()});
        rw.lock();
        ASSERT_TRUE(dlock::force_release(admin, "rw"));
        expect_told(told, rw, LostReason::revoked);
    }
    {
        Told told;
        dlock::RwLock rw(client, "rw-read", {.lease = 600ms, .on_lost = told.callback()});
        rw.lock_shared();
        const auto valid_until = rw.shared_valid_until();
        // The readers' leases: gone with their keys.
        delete_matching(server, "*{rw-read}*");
        ASSERT_NE(told.get(), std::error_code{});
        EXPECT_TRUE(told.when() < valid_until);
        EXPECT_EQ(rw.shared_lost_reason(), LostReason::taken_over);
        std::error_code ec;
        rw.unlock_shared(ec);
        EXPECT_EQ(ec, dlock::errc::lock_taken_over) << ec.message();
    }
    {
        Told told;
        dlock::Semaphore semaphore(client, "pool", {.limit = 2, .lease = 600ms, .on_lost = told.callback()});
        auto permit = semaphore.acquire();
        delete_matching(server, "*{pool}*");
        EXPECT_EQ(told.get(), dlock::errc::lock_taken_over);
        EXPECT_EQ(permit.lost_reason(), LostReason::taken_over);
        std::error_code ec;
        permit.release(ec);
        EXPECT_EQ(ec, dlock::errc::lock_taken_over) << ec.message();
    }
    {
        Told told;
        dlock::MultiLock multi(client, {"m1", "m2"}, {.lease = 30s, .on_lost = told.callback()});
        multi.lock();
        ASSERT_TRUE(dlock::force_release(admin, "m2"));
        expect_told(told, multi, LostReason::revoked);
    }
    {
        RedisServer second, third;
        dlock::Masters masters({server.uri(), second.uri(), third.uri()});
        Told told;
        dlock::Redlock redlock(masters, "red", {.lease = 600ms, .on_lost = told.callback()});
        redlock.lock();
        for (auto* master : {&server, &second, &third}) master->cli({"DEL", lock_key("red")});
        expect_told(told, redlock, LostReason::taken_over);
    }
}

// A client's first hold, revoked before the client's inbox (where revocations
// are told) is confirmed, is still told at once as revoked: the first
// acquisition of a client waits for its inbox to listen. The proxy delays
// every reply, and the client's name costs its new subscriber connection one
// more round trip (CLIENT SETNAME) than the lock script, which the server
// already has: without that wait, the grant arrives before the inbox listens
// and the revocation is heard only at the next renewal, a third of 30 s later.
TEST(LostReason, RevokedRightAfterAClientsFirstGrant) {
    RedisServer server;
    dlock::Client admin(server.uri());
    {  // The server caches each kind's scripts.
        admin.lock("warm").lock();
        admin.lock("warm").unlock();
        dlock::RwLock warm(admin, "warm-rw");
        warm.lock_shared();
        warm.unlock_shared();
        dlock::Semaphore pool(admin, "warm-pool", {.limit = 1});
        pool.acquire().release();
    }
    dlock::support::TcpProxy proxy(server.port());
    dlock::ClientOptions options;
    options.client_name = "first-grant";
    options.command_timeout = 3s;
    for (const std::string kind : {"lock", "read", "permit"}) {
        SCOPED_TRACE(kind);
        dlock::Client client(proxy.uri(), options);
        client.wait_connected();
        proxy.delay_replies(300ms);
        Told told;
        const std::string name = "first-" + kind;
        if (kind == "lock") {
            auto lock = client.lock(name, {.lease = 30s, .on_lost = told.callback()});
            lock.lock();
            ASSERT_EQ(dlock::force_release(admin, name, {}).broken.size(), 1u);
            expect_told(told, lock, LostReason::revoked);
        } else if (kind == "read") {
            dlock::RwLock rw(client, name, {.lease = 30s, .on_lost = told.callback()});
            rw.lock_shared();
            ASSERT_EQ(dlock::force_release(admin, name, {}).broken.size(), 1u);
            EXPECT_EQ(told.get(), dlock::errc::lock_revoked);
            EXPECT_EQ(rw.shared_lost_reason(), LostReason::revoked);
        } else {
            dlock::Semaphore pool(client, name, {.limit = 1, .lease = 30s, .on_lost = told.callback()});
            auto permit = pool.acquire();
            ASSERT_EQ(dlock::force_release(admin, name, {}).broken.size(), 1u);
            EXPECT_EQ(told.get(), dlock::errc::lock_revoked);
            EXPECT_EQ(permit.lost_reason(), LostReason::revoked);
        }
        proxy.delay_replies(0ms);
    }
}

// A server that refuses this client's SUBSCRIBE (an ACL user without
// channels, Redis 7's default for a new user): the inbox never listens. The
// client is warned, with the server's error; no acquisition waits for the
// inbox (the server's refusal is known at once), and a waiter whose wake-up
// channel is refused still gets the lock once it is released, by trying again.
TEST(LostReason, ARefusedInboxIsWarnedOfAndDelaysNoAcquisition) {
    RedisServer server({.acl_users = {{"nochannels", "on", ">pw", "~*", "resetchannels", "+@all"}}});
    dlock::support::Warnings told;
    dlock::ClientOptions options;
    options.command_timeout = 4s;
    options.on_warning = told.hook();
    dlock::Client client("redis://nochannels:pw@127.0.0.1:" + std::to_string(server.port()), options);
    client.wait_connected();
    for (int i = 0; i <= 3; ++i) {
        auto lock = client.lock("unheard-" + std::to_string(i));
        const auto started = Clock::now();
        lock.lock();
        const auto took = Clock::now() - started;
        EXPECT_LT(took, options.command_timeout / 2) << "a free lock, call " << i;
        EXPECT_TRUE(lock.try_lock_for(0ms)) << "re-entry";
        lock.unlock();
        lock.unlock();
    }
    const auto warnings = told.told();
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("dlock:inbox:"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("NOPERM"), std::string::npos) << warnings[0];
    dlock::Client other("redis://nochannels:pw@127.0.0.1:" + std::to_string(server.port()), options);
    auto held = other.lock("unheard-busy", {.lease = 1s});
    held.lock();
    auto waiter = client.lock("unheard-busy", {.lease = 1s});
    auto got = std::async(std::launch::async, [&] {
        const auto started = Clock::now();
        EXPECT_TRUE(waiter.try_lock_for(20s));
        waiter.unlock();
        return Clock::now() - started;
    });
    std::this_thread::sleep_for(300ms);
    held.unlock();
    const auto waited = got.get();
    EXPECT_LT(waited, 300ms + options.command_timeout) << "the waiter waited for its refused channel";
}

namespace {

// How long `wait` (which takes the lock and gives it back) takes when
// `release` lets it go 300 ms after it began; fails the test past 3.3 s.
void expect_woken_soon(const std::function<bool()>& wait, const std::function<void()>& release) {
    auto got = std::async(std::launch::async, [&] {
        const auto started = Clock::now();
        EXPECT_TRUE(wait());
        return Clock::now() - started;
    });
    std::this_thread::sleep_for(300ms);
    release();
    const auto waited = got.get();
    EXPECT_LT(waited, 300ms + 3s) << "the waiter slept "
                                  << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                                  << " ms for a release 300 ms after it began to wait";
}

std::string no_channels_uri(const RedisServer& server) {
    return "redis://nochannels:pw@127.0.0.1:" + std::to_string(server.port());
}

// A server whose user "nochannels" has no pub/sub rights, and two clients of that user.
struct NoChannels {
    RedisServer server{{.acl_users = {{"nochannels", "on", ">pw", "~*", "resetchannels", "+@all"}}}};
    dlock::Client client{no_channels_uri(server)};
    dlock::Client other{no_channels_uri(server)};
};

}  // namespace

// The same refused client, waiting as a reader behind a writer that holds a
// lease of the default length, and as a semaphore's waiter: the documented
// cost of a refused channel is that the waiter notices the release "when it
// tries again". It must try again soon (as a Lock's waiter does, within its
// place's refresh), not sleep the rest of the holder's 30 s lease.
TEST(LostReason, WaitersWhoseChannelIsRefusedNoticeAReleaseSoon) {
    NoChannels setup;
    auto& client = setup.client;
    auto& other = setup.other;
    auto writer = other.rw_lock("unheard-rw");
    writer.lock();
    auto reader = client.rw_lock("unheard-rw");
    expect_woken_soon([&] { return reader.try_lock_shared_for(40s) && (reader.unlock_shared(), true); },
                      [&] { writer.unlock(); });
    dlock::Semaphore held(other, "unheard-s", {.limit = 1});
    auto permit = held.acquire();
    dlock::Semaphore waiting(client, "unheard-s", {.limit = 1});
    expect_woken_soon([&] { return static_cast<bool>(waiting.try_acquire_for(40s)); }, [&] {
        std::error_code ec;
        permit.release(ec);  // fails with "can't publish" (ASemaphoreReleaseWorksForAnAclUserWithoutChannels)
    });
}

// An ACL user without channel rights (Redis 7's default for a new user) is
// documented as costing only notices (ClientOptions::on_warning). But the
// release scripts PUBLISH, which the same ACL refuses inside a script: a
// semaphore's last permit back publishes 'free': the release must still succeed (notices are best effort).
TEST(LostReason, ASemaphoreReleaseWorksForAnAclUserWithoutChannels) {
    RedisServer server({.acl_users = {{"nochannels", "on", ">pw", "~*", "resetchannels", "+@all"}}});
    dlock::Client client(no_channels_uri(server));
    dlock::Semaphore pool(client, "unheard-pool", {.limit = 1});
    auto permit = pool.acquire();
    std::error_code ec;
    permit.release(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(pool.try_acquire_for(0ms) ? false : true) << "the permit was not given back";
}

// The same user releasing a Lock someone waits for: release.lua grants the
// lock to the waiter, then its PUBLISH of the grant notice is refused: the release still succeeds.
TEST(LostReason, ALockReleaseWithAWaiterWorksForAnAclUserWithoutChannels) {
    NoChannels setup;
    auto& client = setup.client;
    auto& other = setup.other;
    std::mutex mutex;
    std::vector<std::string> unlock_errors;
    auto held = other.lock("unheard-lock", {.on_unlock_error = [&](std::string_view, std::error_code ec) {
                                                std::lock_guard lock(mutex);
                                                unlock_errors.push_back(ec.message());
                                            }});
    held.lock();
    auto waiter = client.lock("unheard-lock");
    expect_woken_soon([&] { return waiter.try_lock_for(40s) && (waiter.unlock(), true); }, [&] {
        std::error_code ec;
        held.unlock(ec);
        EXPECT_FALSE(ec) << ec.message();
    });
    std::lock_guard lock(mutex);
    for (const auto& e : unlock_errors) ADD_FAILURE() << "on_unlock_error: " << e;
}

// A client whose inbox SUBSCRIBE met a script running past
// busy-reply-threshold (-BUSY: a passing state, the user has every right):
// once the script is killed, a force-release of its hold must still be told
// within about a round trip, not at the next renewal (a third of the lease).
TEST(LostReason, AnInboxSubscribedWhileAScriptRanStillHearsARevocation) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client admin(server.uri());
    // The subscriber connection is up (its first channel confirmed) before the script runs.
    auto warm = client.subscribe("warm", [](dlock::Subscription::Event, std::string_view) {});
    ASSERT_TRUE(warm.wait_active(Clock::now() + 5s));
    ASSERT_EQ(server.cli({"CONFIG", "SET", "busy-reply-threshold", "100"}), "OK");
    auto script = std::async(std::launch::async, [&] { return server.cli({"EVAL", "while true do end", "0"}); });
    ASSERT_TRUE(eventually([&] { return server.cli({"PING"}).find("BUSY") != std::string::npos; }));
    Told told;
    auto lock = client.lock("busy-inbox", {.on_lost = told.callback()});  // the client's first lock: its inbox subscribes
    std::this_thread::sleep_for(300ms);
    server.cli({"SCRIPT", "KILL"});
    script.get();
    ASSERT_EQ(server.cli({"PING"}), "PONG");
    lock.lock();
    std::this_thread::sleep_for(200ms);
    const auto revoked_at = Clock::now();
    ASSERT_TRUE(dlock::force_release(admin, "busy-inbox"));
    // Another client takes the name; a second later the first must no longer believe it holds it.
    auto taker = admin.lock("busy-inbox");
    ASSERT_TRUE(taker.try_lock());
    std::this_thread::sleep_for(1s);
    EXPECT_FALSE(lock.is_held()) << "two holders believe they hold busy-inbox, 1 s after the force-release";
    const auto ec = told.get(15s);
    ASSERT_TRUE(ec) << "on_lost was not called within 15 s";
    EXPECT_LT(told.when() - revoked_at, 2s)
        << "told " << std::chrono::duration_cast<std::chrono::milliseconds>(told.when() - revoked_at).count()
        << " ms after the force-release, as " << ec.message();
    EXPECT_EQ(dlock::lost_reason_of(ec), LostReason::revoked) << ec.message();
}

// Waits with a deadline on a client whose channels are all refused, each
// kind, on names held elsewhere: each gives up by its deadline plus a round
// trip or so, not after a command timeout spent waiting for a channel.
TEST(LostReason, DeadlinesHoldWhenEveryChannelIsRefused) {
    RedisServer server({.acl_users = {{"nochannels", "on", ">pw", "~*", "resetchannels", "+@all"}}});
    dlock::ClientOptions options;
    options.command_timeout = 4s;
    dlock::Client other(no_channels_uri(server), options);
    auto l = other.lock("dl-lock");
    dlock::FairLock f(other, "dl-fair");
    auto w = other.rw_lock("dl-rw");
    dlock::Semaphore s(other, "dl-sem", {.limit = 1});
    l.lock();
    f.lock();
    w.lock();
    auto permit = s.acquire();
    dlock::Client client(no_channels_uri(server), options);
    auto l2 = client.lock("dl-lock");
    dlock::FairLock f2(client, "dl-fair");
    auto r2 = client.rw_lock("dl-rw");
    auto w2 = client.rw_lock("dl-rw");
    dlock::Semaphore s2(client, "dl-sem", {.limit = 1});
    const std::vector<std::pair<std::string, std::function<bool()>>> tries{
        {"Lock", [&] { return l2.try_lock_for(300ms); }},
        {"FairLock", [&] { return f2.try_lock_for(300ms); }},
        {"RwLock read", [&] { return r2.try_lock_shared_for(300ms); }},
        {"RwLock write", [&] { return w2.try_lock_for(300ms); }},
        {"Semaphore", [&] { return static_cast<bool>(s2.try_acquire_for(300ms)); }},
    };
    for (int round = 0; round < 2; ++round) {
        for (const auto& [kind, bounded_try] : tries) {
            const auto started = Clock::now();
            EXPECT_FALSE(bounded_try()) << kind;
            const auto took = Clock::now() - started;
            EXPECT_LT(took, 300ms + 700ms)
                << kind << " (round " << round << ") took "
                << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
        }
    }
}

// The same user as an operator: force_release removes the hold, and its
// refused PUBLISH of the revocation (best effort) does not fail the call.
TEST(LostReason, AForceReleaseWorksForAnAclUserWithoutChannels) {
    NoChannels setup;
    auto& client = setup.client;
    auto& admin = setup.other;
    auto held = client.lock("unheard-force");
    held.lock();
    std::string error;
    try {
        EXPECT_TRUE(dlock::force_release(admin, "unheard-force"));
    } catch (const dlock::Error& e) {
        error = e.what();
    }
    EXPECT_EQ(error, "") << "force_release threw";
    EXPECT_EQ(setup.server.cli({"EXISTS", lock_key("unheard-force")}), "0") << "the hold was not removed";
}
