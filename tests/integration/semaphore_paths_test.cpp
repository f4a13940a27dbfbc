// The semaphore scripts' common paths (a grant when permits are free and
// nobody is in line, a busy answer of a try, a release nobody waits on, a
// renewal) prune nothing: a permit whose lease ended stays counted until a
// call that needs the count exact prunes it. Here, against a real server:
// no more than the limit is ever granted, an expired permit never comes back
// (renewal, release, a late copy of its request), a busy answer is never
// given for a permit that is free, and clients of the previous scripts
// (tests/data/semaphore2/, which prune on every call) mix with these.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/subscription.hpp"
#include "lock/semaphore_keys.hpp"
#include "lock/lock_scripts.hpp"
#include "lock/semaphore_scripts.hpp"
#include "old_semaphore_client.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using dlock::support::OldSemaphoreClient;
using dlock::test::semaphore_key;

namespace {

// This version's scripts, sent as a client does, with a lease of our choice.
OldSemaphoreClient current(dlock::Client& client, const std::string& name, std::string lease = "30000") {
    return OldSemaphoreClient(client, name, dlock::detail::semaphore_acquire_script(),
                              dlock::detail::semaphore_release_script(), dlock::detail::semaphore_renew_script(),
                              std::move(lease));
}

// The error an acquire is refused with; none when answered.
dlock::errc refusal(OldSemaphoreClient& sem, const std::string& id, const char* limit) {
    try {
        sem.acquire(id, "try", limit);
    } catch (const dlock::Error& e) {
        return static_cast<dlock::errc>(e.code().value());
    }
    return dlock::errc{};
}

long long answer(const dlock::Reply& reply) {
    return reply.is_array() && !reply.elements.empty() ? reply.elements[0].integer : -100;
}

}  // namespace

// A permit whose lease ended is not pruned by a grant that fits beside it,
// and still counts: the limit holds. The busy answer that would follow looks
// at the leases, prunes it and grants instead. The expired permit's renewal,
// release and a late copy of its request all find it gone.
TEST(SemaphorePaths, AnExpiredPermitCountsUntilACallNeedsTheExactCount) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto brief = current(client, "lazy", "100");
    auto sem = current(client, "lazy");
    const auto used = [&] { return server.cli({"HGET", semaphore_key("lazy") + ":state", "used"}); };
    ASSERT_EQ(answer(brief.acquire("c:brief!#1", "try", "2")), 1);
    std::this_thread::sleep_for(250ms);  // its lease ends
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "2")), 1);
    EXPECT_NE(server.cli({"ZSCORE", semaphore_key("lazy"), "c:brief!#1"}), "") << "the grant pruned (not a common path?)";
    EXPECT_EQ(used(), "2");
    // Full by the count, one permit free by the leases: granted, the expired one pruned.
    ASSERT_EQ(answer(sem.acquire("c:b!#1", "try", "2")), 1);
    EXPECT_EQ(server.cli({"ZSCORE", semaphore_key("lazy"), "c:brief!#1"}), "");
    EXPECT_EQ(used(), "2");
    EXPECT_EQ(answer(sem.acquire("c:c!#1", "try", "2")), 0) << "more than the limit";
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("lazy")}), "2");
    EXPECT_EQ(brief.renew("c:brief!#1"), 0);
    EXPECT_EQ(brief.release("c:brief!#1"), -1);
    EXPECT_EQ(answer(brief.acquire("c:brief!#1", "try", "2")), -2) << "a late copy of an expired request granted";
    EXPECT_EQ(used(), "2");
}

// The same, with the expired permit met first by its own holder's calls:
// each finds its lease over (not only absent) and answers as for a pruned one.
TEST(SemaphorePaths, AnUnprunedExpiredPermitIsNeitherRenewedNorReleasedNorGrantedAgain) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto brief = current(client, "unpruned", "100");
    ASSERT_EQ(answer(brief.acquire("c:x!#1", "try", "3")), 1);
    std::this_thread::sleep_for(250ms);
    EXPECT_NE(server.cli({"ZSCORE", semaphore_key("unpruned"), "c:x!#1"}), "");
    EXPECT_EQ(answer(brief.acquire("c:x!#1", "try", "3")), -2);
    ASSERT_EQ(answer(brief.acquire("c:y!#1", "try", "3")), 1);
    std::this_thread::sleep_for(250ms);
    EXPECT_EQ(brief.renew("c:y!#1"), 0);
    ASSERT_EQ(answer(brief.acquire("c:z!#1", "try", "3")), 1);
    std::this_thread::sleep_for(250ms);
    EXPECT_EQ(brief.release("c:z!#1"), -1);
    EXPECT_EQ(server.cli({"HGET", semaphore_key("unpruned") + ":state", "used"}), "0");
}

// The counter is trusted only while the permits key exists (the rule of
// used_count): a counter left behind by permits that expired with their key
// is 0 to a grant, and a lost counter is recounted from the permits.
TEST(SemaphorePaths, AStaleOrLostCounterIsNotTrusted) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "count");
    const auto state = semaphore_key("count") + ":state";
    server.cli({"HSET", state, "limit", "3", "used", "2"});
    server.cli({"PEXPIRE", state, "60000"});
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "3")), 1);
    EXPECT_EQ(server.cli({"HGET", state, "used"}), "1") << "a counter with no permits key was trusted";
    ASSERT_EQ(answer(sem.acquire("c:b!#1", "try", "3")), 1);
    server.cli({"DEL", state});
    ASSERT_EQ(answer(sem.acquire("c:c!#1", "try", "3")), 1);
    EXPECT_EQ(server.cli({"HGET", state, "used"}), "3") << "a lost counter was not recounted";
    EXPECT_EQ(answer(sem.acquire("c:d!#1", "try", "3")), 0) << "more than the limit";
    EXPECT_EQ(sem.release("c:a!#1"), 1);
    EXPECT_EQ(server.cli({"HGET", state, "used"}), "2");
    EXPECT_NE(server.cli({"PTTL", state}), "-1") << "the state hash was left with no expiry";
}

// A counter remade from the permits (the state hash was lost: evicted while
// permits were held) by a call that then writes no expiry of its own (a
// renewal that finds its permit gone, a force release) expires with the
// permits it counts: the common paths after it only lengthen an expiry
// ('PEXPIRE ... GT'), which leaves a key with none as it is, so a state hash
// made with no expiry outlived the name's last permit for good.
TEST(SemaphorePaths, ACounterRemadeFromThePermitsExpires) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "remade");
    auto brief = current(client, "remade", "100");
    const auto state = semaphore_key("remade") + ":state";
    ASSERT_EQ(answer(brief.acquire("c:x!#1", "try", "2")), 1);
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "2")), 1);
    server.cli({"DEL", state});
    std::this_thread::sleep_for(250ms);  // c:x's lease ends
    EXPECT_EQ(brief.renew("c:x!#1"), 0);
    EXPECT_EQ(server.cli({"HGET", state, "used"}), "1");
    EXPECT_NE(server.cli({"PTTL", state}), "-1") << "the remade counter has no expiry";
    EXPECT_EQ(sem.renew("c:a!#1"), 1);
    EXPECT_EQ(sem.release("c:a!#1"), 1);
    EXPECT_EQ(server.cli({"EXISTS", semaphore_key("remade")}), "0");
    const auto ttl = std::stoll(server.cli({"PTTL", state}));
    EXPECT_GT(ttl, 0) << "the state hash outlives the name's last permit for good";
    EXPECT_LE(ttl, 90'000);
}

// Every key a common path makes or extends expires: a semaphore's keys
// outlive nothing by more than lease + retention.
TEST(SemaphorePaths, EveryKeyTheCommonPathsWriteExpires) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "expires");
    const auto key = semaphore_key("expires");
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "1")), 1);
    ASSERT_EQ(answer(sem.acquire("c:b!#1", "try", "1")), 0);
    EXPECT_EQ(sem.renew("c:a!#1"), 1);
    EXPECT_EQ(sem.release("c:a!#1"), 1);
    ASSERT_EQ(answer(sem.acquire("c:c!#1", "try", "1")), 1);
    EXPECT_EQ(sem.release("c:c!#1"), 1);
    for (const auto& k : {key + ":state", key + ":done"}) {
        const auto ttl = std::stoll(server.cli({"PTTL", k}));
        EXPECT_GT(ttl, 0) << k;
        EXPECT_LE(ttl, 90'000) << k;
    }
    EXPECT_EQ(server.cli({"EXISTS", key}), "0");
    EXPECT_EQ(server.cli({"ZCARD", key + ":done"}), "2");
}

// A Lock's or an RwLock's keys under the name, or someone in line, send a
// grant to the general code: the name-kind check and strict arrival order.
TEST(SemaphorePaths, AnotherKindOrALineIsNeverPassedBy) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "kinds");
    dlock::Lock lock(client, "kinds");
    lock.lock();
    EXPECT_EQ(refusal(sem, "c:a!#1", "2"), dlock::errc::kind_mismatch);
    lock.unlock();
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "2")), 1);
    ASSERT_EQ(answer(sem.acquire("c:w!#2", "wait", "2")), 0);  // 2 do not fit: in line
    EXPECT_EQ(answer(sem.acquire("c:b!#1", "try", "2")), 0) << "a try jumped the line";
    EXPECT_EQ(refusal(sem, "c:d!#1", "3"), dlock::errc::limit_mismatch);
}

// The release of the last permit publishes 'free' only while someone waits
// for the semaphore to be free (wait_until_free marks the state hash); the
// mark goes with the publish.
TEST(SemaphorePaths, TheLastReleasePublishesFreeOnlyWhenSomeoneWaitsForIt) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), admin(server.uri());
    std::mutex mutex;
    std::vector<std::string> heard;
    auto subscription = admin.subscribe(dlock::detail::SemaphoreKeys("told").channel(),
                                        [&](dlock::Subscription::Event event, std::string_view payload) {
                                            if (event != dlock::Subscription::Event::message) return;
                                            std::lock_guard lock(mutex);
                                            heard.emplace_back(payload);
                                        });
    ASSERT_TRUE(subscription.wait_active(std::chrono::steady_clock::now() + 5s));
    const auto messages = [&] {
        std::lock_guard lock(mutex);
        return heard.size();
    };
    dlock::Semaphore sem(client, "told", {.limit = 2, .lease = 30s});
    const auto state = semaphore_key("told") + ":state";
    sem.acquire().release();
    sem.acquire().release();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(messages(), 0u) << "a release nobody waited on published";
    auto held = sem.acquire();
    auto freed = std::async(std::launch::async, [&] {
        return dlock::wait_until_free(admin, "told", std::chrono::steady_clock::now() + 20s);
    });
    for (int i = 0; i < 250 && server.cli({"HGET", state, "w"}).empty(); ++i) std::this_thread::sleep_for(20ms);
    EXPECT_NE(server.cli({"HGET", state, "w"}), "");
    std::this_thread::sleep_for(200ms);  // past its look at the semaphore: it sleeps
    held.release();
    ASSERT_EQ(freed.wait_for(5s), std::future_status::ready) << "the waiter slept past the release";
    EXPECT_TRUE(freed.get());
    EXPECT_GE(messages(), 1u);
    // Its wait marked the semaphore once more before it saw it free: the next
    // release publishes and takes the mark away; the one after is silent.
    sem.acquire().release();
    EXPECT_EQ(server.cli({"HGET", state, "w"}), "") << "the mark outlived the publish";
    std::this_thread::sleep_for(300ms);
    const auto told = messages();
    sem.acquire().release();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(messages(), told);
}

// A client of the previous scripts (tests/data/semaphore2/) beside this
// version's: each one's grants, releases, expiries and renewals keep the
// count the sum of the live permits, and neither grants past the limit.
// The brief permits' 400 ms leases outlast the few calls that count on them
// on a loaded machine (100 ms did not, once, beside the whole suite).
TEST(SemaphorePaths, ThePreviousScriptsAndTheseKeepOneCount) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), old_side(server.uri());
    OldSemaphoreClient old(old_side, "mixed2", "semaphore2");
    OldSemaphoreClient old_brief(old_side, "mixed2", "semaphore2", "400");
    auto sem = current(client, "mixed2");
    auto brief = current(client, "mixed2", "400");
    const auto used = [&] { return server.cli({"HGET", semaphore_key("mixed2") + ":state", "used"}); };
    ASSERT_EQ(answer(old.acquire("o:a!#1", "try", "3")), 1);
    ASSERT_EQ(answer(sem.acquire("n:a!#1", "try", "3")), 1);
    ASSERT_EQ(answer(brief.acquire("n:brief!#1", "try", "3")), 1);
    EXPECT_EQ(used(), "3");
    EXPECT_EQ(answer(old.acquire("o:b!#1", "try", "3")), 0);
    std::this_thread::sleep_for(550ms);  // n:brief's lease ends, unpruned
    // The previous scripts prune it on their next call, and count it back.
    ASSERT_EQ(answer(old.acquire("o:b!#1", "try", "3")), 1);
    EXPECT_EQ(used(), "3");
    EXPECT_EQ(brief.release("n:brief!#1"), -1);
    EXPECT_EQ(old.renew("o:a!#1"), 1);
    EXPECT_EQ(sem.renew("n:a!#1"), 1);
    EXPECT_EQ(sem.release("o:a!#1"), 1);  // a permit of the old client, released by these scripts
    EXPECT_EQ(used(), "2");
    ASSERT_EQ(answer(old_brief.acquire("o:brief!#1", "try", "3")), 1);
    std::this_thread::sleep_for(550ms);
    // These scripts' grant does not fit beside the expired old permit by the count: they prune it.
    ASSERT_EQ(answer(sem.acquire("n:b!#1", "try", "3")), 1);
    EXPECT_EQ(used(), "3");
    EXPECT_EQ(answer(sem.acquire("n:c!#1", "try", "3")), 0);
    EXPECT_EQ(old.release("n:a!#1"), 1);
    EXPECT_EQ(sem.release("o:b!#1"), 1);
    EXPECT_EQ(old.release("n:b!#1"), 1);
    EXPECT_EQ(used(), "0");
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("mixed2")}), "0");
    EXPECT_EQ(answer(old.acquire("n:a!#1", "try", "3")), -2) << "a released id granted again";
    EXPECT_EQ(answer(sem.acquire("o:a!#1", "try", "3")), -2) << "a released id granted again";
}

TEST(SemaphorePaths, TheMarkScriptLoadsWithItsEmbeddedSha1) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const auto& s = dlock::detail::mark_waited_script();
    EXPECT_EQ(client.command({"SCRIPT", "LOAD", s.text()}).text, s.sha1());
}

// With someone in line, a new waiter joins the line's end and a release
// hands its permit to the first in line (their common paths); a release
// after which more permits are free than the head takes serves the line on
// (the general code). Arrival order throughout, and every key expires.
TEST(SemaphorePaths, ALineIsJoinedAtItsEndAndServedInArrivalOrder) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "line");
    const auto key = semaphore_key("line");
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "2")), 1);
    ASSERT_EQ(answer(sem.acquire("c:w!#2", "wait", "2")), 0);  // 2 do not fit beside a: in line
    const auto joined = sem.acquire("c:j!#1", "wait", "2");
    ASSERT_EQ(answer(joined), 0) << "a new waiter went before the line";
    EXPECT_GT(joined.elements[1].integer, 1'000) << "woken before any lease or place ends";
    EXPECT_EQ(server.cli({"ZRANGE", key + ":queue", "0", "-1"}), "c:w!#2\nc:j!#1");
    for (const auto& k : {key + ":state", key + ":queue", key + ":waiters"})
        EXPECT_GT(std::stoll(server.cli({"PTTL", k})), 0) << k;
    EXPECT_EQ(sem.release("c:a!#1"), 1);  // the head's 2 fill the limit: it is granted
    EXPECT_NE(server.cli({"ZSCORE", key, "c:w!#2"}), "") << "the first in line was not granted";
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "2");
    EXPECT_EQ(server.cli({"ZRANGE", key + ":queue", "0", "-1"}), "c:j!#1");
    EXPECT_EQ(sem.release("c:w!#2"), 1);  // 2 free, the head takes 1
    EXPECT_NE(server.cli({"ZSCORE", key, "c:j!#1"}), "") << "the line was not served on";
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "1");
    EXPECT_EQ(server.cli({"EXISTS", key + ":queue", key + ":waiters"}), "0");
    EXPECT_EQ(sem.release("c:j!#1"), 1);
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "0");
}

// A first in line whose place ended (its waiter died) is passed over: the
// release prunes it and grants the next live waiter, not the dead one.
TEST(SemaphorePaths, AReleaseGrantsTheFirstLiveWaiterNotOneWhosePlaceEnded) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "dead-head");
    const auto key = semaphore_key("dead-head");
    ASSERT_EQ(answer(sem.acquire("c:a!#1", "try", "1")), 1);
    sem.set_waiter_lease("300");
    ASSERT_EQ(answer(sem.acquire("c:dead!#1", "wait", "1")), 0);
    sem.set_waiter_lease("30000");
    ASSERT_EQ(answer(sem.acquire("c:live!#1", "wait", "1")), 0);
    std::this_thread::sleep_for(500ms);  // the first waiter's place ends
    EXPECT_EQ(sem.release("c:a!#1"), 1);
    EXPECT_EQ(server.cli({"ZSCORE", key, "c:dead!#1"}), "") << "a waiter whose place ended was granted";
    EXPECT_NE(server.cli({"ZSCORE", key, "c:live!#1"}), "") << "the live waiter was not granted";
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "1");
}

// A new waiter that finds a place or a lease ended goes through the general
// code, which prunes them: the dead waiter leaves the line, the expired
// permit its count, and the wake-up asked for is not one already past.
TEST(SemaphorePaths, ANewWaiterBehindAnEndedPlaceOrLeasePrunesThem) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "ended");
    auto short_lease = current(client, "ended", "300");
    const auto key = semaphore_key("ended");
    ASSERT_EQ(answer(short_lease.acquire("c:a!#1", "try", "1")), 1);
    sem.set_waiter_lease("300");
    ASSERT_EQ(answer(sem.acquire("c:dead!#1", "wait", "1")), 0);
    sem.set_waiter_lease("30000");
    ASSERT_EQ(answer(sem.acquire("c:live!#1", "wait", "1")), 0);  // keeps the line 30 s
    std::this_thread::sleep_for(500ms);  // the lease and the first place end
    const auto joined = sem.acquire("c:new!#1", "wait", "1");
    ASSERT_EQ(answer(joined), 0);
    EXPECT_GT(joined.elements[1].integer, 1'000) << "asked to wake at a place that had ended";
    EXPECT_EQ(server.cli({"ZSCORE", key, "c:a!#1"}), "") << "the expired permit was not pruned";
    EXPECT_EQ(server.cli({"ZRANGE", key + ":queue", "0", "-1"}), "c:live!#1\nc:new!#1");
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "0");
}

// A release that would hand its permit to the first in line finds another
// permit's lease ended (its holder died, nobody pruned it yet): that permit is
// free too, so the general code prunes it and serves the line on. Handing
// over only, the one behind the head waited for its next refresh (a third of
// its waiter lease) with a permit free for it.
TEST(SemaphorePaths, AReleaseBesideAnEndedLeaseServesEveryWaiterThatFits) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto sem = current(client, "ended-beside");
    auto short_lease = current(client, "ended-beside", "300");
    const auto key = semaphore_key("ended-beside");
    ASSERT_EQ(answer(sem.acquire("c:b!#1", "try", "2")), 1);
    ASSERT_EQ(answer(short_lease.acquire("c:dies!#1", "try", "2")), 1);
    ASSERT_EQ(answer(sem.acquire("c:h!#1", "wait", "2")), 0);
    ASSERT_EQ(answer(sem.acquire("c:w!#1", "wait", "2")), 0);
    std::this_thread::sleep_for(500ms);  // the short lease ends
    EXPECT_EQ(sem.release("c:b!#1"), 1);
    EXPECT_NE(server.cli({"ZSCORE", key, "c:h!#1"}), "") << "the first in line was not granted";
    EXPECT_NE(server.cli({"ZSCORE", key, "c:w!#1"}), "") << "the second in line waits with a permit free for it";
    EXPECT_EQ(server.cli({"ZSCORE", key, "c:dies!#1"}), "") << "the ended lease was not pruned";
    EXPECT_EQ(server.cli({"HGET", key + ":state", "used"}), "2");
    EXPECT_EQ(server.cli({"EXISTS", key + ":queue"}), "0");
}
