// Rolling upgrades of the semaphore: clients from before direct grant (the
// scripts under tests/data/semaphore1/, kept as they were, run as that
// library sent them: publish.lua and semaphore_prelude.lua in front of each)
// and this library's on one semaphore. A release of this library must call
// an old client's waiter, never grant it (the old client would not take the
// notice, and its acquire would answer "granted" without extending the
// lease it trusts); an old client's release calls this library's waiters,
// who then ask.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/metrics.hpp"
#include "dlock/script.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/subscription.hpp"
#include "eventually.hpp"
#include "lock/semaphore_keys.hpp"
#include "channel_log.hpp"
#include "old_semaphore_client.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::support::ChannelLog;
using dlock::support::OldSemaphoreClient;
using dlock::test::semaphore_key;

namespace {

bool contains(const std::vector<std::string>& all, const std::string& one) {
    return std::find(all.begin(), all.end(), one) != all.end();
}

}  // namespace

// An old client's waiter first in line, one of this library behind it: a
// release of this library calls the old one by its id (what that version
// understands) and grants nobody, not the new waiter behind it either
// (strict arrival order). The old waiter asks and is granted as before, and
// its grant (old scripts) calls the new waiter, which asks and is granted.
TEST(SemaphoreUpgrade, ANewReleaseCallsAnOldClientsWaiterAndNeverGrantsIt) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client old_side(server.uri());
    dlock::Semaphore sem(client, "mixed", {.limit = 1, .waiter_lease = 30s});
    OldSemaphoreClient old(old_side, "mixed");
    ChannelLog log(old_side, "mixed");

    auto held = sem.acquire();
    const std::string old_id = "oldclient:s1#1";
    ASSERT_EQ(old.acquire(old_id, "wait", "1").elements.at(0).integer, 0);
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("mixed") + ":queue"}) == "2"; }));
    std::this_thread::sleep_for(200ms);
    held.release();
    EXPECT_EQ(server.cli({"ZSCORE", semaphore_key("mixed"), old_id}), "") << "an old client's waiter was granted directly";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("mixed")}), "0");
    EXPECT_TRUE(eventually([&] { return contains(log.messages(), old_id); })) << "the old waiter was not called";
    EXPECT_EQ(waited.wait_for(300ms), std::future_status::timeout) << "the new waiter jumped the line";

    const auto granted = old.acquire(old_id, "wait", "1");
    ASSERT_EQ(granted.elements.at(0).integer, 1);
    // The old acquire's grant left no permit free: nobody else is served.
    EXPECT_EQ(waited.wait_for(300ms), std::future_status::timeout);
    EXPECT_EQ(old.release(old_id), 1);  // an old release: calls the new waiter, which asks
    auto p = waited.get();
    ASSERT_TRUE(p);
    for (const auto& message : log.messages())
        EXPECT_NE(message.rfind("granted ", 0), 0u) << "a grant notice went out, where only calls were due: " << message;
}

// This library's waiters under an old client's releases: called by their
// ids (the old scripts know nothing else), they ask and are granted, and
// the permit they hold is leased from their own request.
TEST(SemaphoreUpgrade, AnOldReleaseCallsANewWaiterWhichAsksAndIsGranted) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client old_side(server.uri());
    dlock::Semaphore sem(client, "oldrelease", {.limit = 1, .lease = 30s, .waiter_lease = 30s});
    OldSemaphoreClient old(old_side, "oldrelease");
    const std::string old_id = "oldclient:s1#1";
    ASSERT_EQ(old.acquire(old_id, "try", "1").elements.at(0).integer, 1);
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("oldrelease") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
    const auto released_at = Clock::now();
    EXPECT_EQ(old.release(old_id), 1);
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready) << "the new waiter did not hear the old release's call";
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_LT(Clock::now() - released_at, 3s) << "woken by its refresh (every 10 s), not by the call";
    const auto left = std::stoll(server.cli({"ZSCORE", semaphore_key("oldrelease"), p.id()})) -
                      static_cast<long long>(server.time_us() / 1000);
    EXPECT_GT(left, 25'000);
    // Its id marks it as a client that takes direct grants; the old
    // scripts read its weight as before.
    EXPECT_NE(p.id().find("!#1"), std::string::npos);
    EXPECT_EQ(server.cli({"HGET", semaphore_key("oldrelease") + ":state", "used"}), "1");
    p.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("oldrelease") + ":state", "used"}), "0");
}

// Old and new waiters and holders mixed, with weights: a new release grants
// the new waiter first in line (2 permits) directly and calls nobody behind
// it that does not fit; an old release then calls the old waiter, whose old
// acquire grants it. The count of permits in use is the sum of the weights
// held at every step.
TEST(SemaphoreUpgrade, AMixedLineWithWeightsKeepsItsCount) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client old_side(server.uri());
    dlock::Semaphore sem(client, "mixcount", {.limit = 3, .lease = 30s, .waiter_lease = 30s});
    OldSemaphoreClient old(old_side, "mixcount");
    const auto used = [&] { return server.cli({"HGET", semaphore_key("mixcount") + ":state", "used"}); };
    ASSERT_EQ(old.acquire("oldclient:s1#1", "try", "3").elements.at(0).integer, 1);
    auto two = sem.acquire(2);
    EXPECT_EQ(used(), "3");
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(20s, 2); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("mixcount") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
    ASSERT_EQ(old.acquire("oldclient:s2#1", "wait", "3").elements.at(0).integer, 0);
    two.release();  // the new waiter's 2 fit: granted inside the release; the old one behind does not fit
    EXPECT_EQ(used(), "3");
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready);
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_EQ(server.cli({"ZSCORE", semaphore_key("mixcount"), "oldclient:s2#1"}), "");
    EXPECT_EQ(old.release("oldclient:s1#1"), 1);  // old release: calls the old waiter
    EXPECT_EQ(used(), "2");
    ASSERT_EQ(old.acquire("oldclient:s2#1", "wait", "3").elements.at(0).integer, 1);
    EXPECT_EQ(used(), "3");
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("mixcount")}), "2");
    EXPECT_FALSE(sem.try_acquire()) << "more than the limit";
    p.release();
    EXPECT_EQ(used(), "1");
    EXPECT_EQ(old.release("oldclient:s2#1"), 1);
    EXPECT_EQ(used(), "0");
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("mixcount") + ":queue"}), "0");
}

// The previous version's scripts (tests/data/semaphore2/) tell a direct
// grant on the semaphore's channel: a waiter of this version, whose id they
// read as one that takes direct grants, hears it there and returns holding
// its permit, long before its next refresh.
TEST(SemaphoreUpgrade, APreviousReleaseTellsThisVersionsWaiterOnTheChannel) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client old_side(server.uri());
    dlock::Semaphore sem(client, "prevrelease", {.limit = 1, .lease = 30s, .waiter_lease = 30s});
    OldSemaphoreClient old(old_side, "prevrelease", "semaphore2");
    ChannelLog log(old_side, "prevrelease");
    ASSERT_EQ(old.acquire("o:a!#1", "try", "1").elements.at(0).integer, 1);
    auto waited = std::async(std::launch::async, [&] { return sem.try_acquire_for(20s); });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", semaphore_key("prevrelease") + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
    const auto id = server.cli({"ZRANGE", semaphore_key("prevrelease") + ":queue", "0", "0"});
    const auto released_at = Clock::now();
    EXPECT_EQ(old.release("o:a!#1"), 1);
    ASSERT_EQ(waited.wait_for(5s), std::future_status::ready) << "the waiter did not hear its grant on the channel";
    auto p = waited.get();
    ASSERT_TRUE(p);
    EXPECT_EQ(p.id(), id);
    EXPECT_LT(Clock::now() - released_at, 3s) << "woken by its refresh (every 10 s), not by the notice";
    EXPECT_TRUE(eventually([&] { return contains(log.messages(), "granted " + id); }));
    EXPECT_EQ(client.metrics().value("dlock_handoffs_total", {{"how", "direct"}}), 1);
    p.release();
    EXPECT_EQ(server.cli({"HGET", semaphore_key("prevrelease") + ":state", "used"}), "0");
}

// This version's release tells a waiter of the previous version (its id
// ends '!#k': it reads grants on the semaphore's channel only) there, not
// on an inbox it does not read.
TEST(SemaphoreUpgrade, ThisReleaseTellsAPreviousVersionsWaiterOnTheChannel) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    dlock::Client old_side(server.uri());
    dlock::Semaphore sem(client, "prevwaiter", {.limit = 1, .waiter_lease = 30s});
    OldSemaphoreClient old(old_side, "prevwaiter", "semaphore2");
    ChannelLog log(old_side, "prevwaiter");
    auto held = sem.acquire();
    ASSERT_EQ(old.acquire("o:w!#1", "wait", "1").elements.at(0).integer, 0);
    held.release();
    EXPECT_TRUE(eventually([&] { return contains(log.messages(), "granted o:w!#1"); }))
        << "the previous version's waiter was not told on the channel";
    EXPECT_NE(server.cli({"ZSCORE", semaphore_key("prevwaiter"), "o:w!#1"}), "") << "not granted directly";
    EXPECT_EQ(old.release("o:w!#1"), 1);
    EXPECT_EQ(server.cli({"HGET", semaphore_key("prevwaiter") + ":state", "used"}), "0");
}
