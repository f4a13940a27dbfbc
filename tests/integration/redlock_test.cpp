// Redlock against five real, independent redis-server masters: majorities
// with masters stopped, restarted and pre-empted, fencing tokens, waiting,
// and bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/redlock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"
#include "quick_options.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

static_assert(std::is_same_v<decltype(std::declval<dlock::Redlock&>().try_lock()), bool>);
// std::scoped_lock needs Lockable; std::unique_lock::try_lock_for needs TimedLockable.
static_assert(requires(dlock::Redlock& l) {
    l.lock();
    l.unlock();
    { l.try_lock_for(1ms) } -> std::same_as<bool>;
    { l.try_lock_until(Clock::now()) } -> std::same_as<bool>;
});

using dlock::test::lock_key;

using dlock::test::quick_options;

namespace {

struct FiveMasters {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    FiveMasters() {
        for (int i = 0; i < 5; ++i) servers.push_back(std::make_unique<dlock::support::RedisServer>());
    }
    std::vector<std::string> urls() const {
        std::vector<std::string> out;
        for (const auto& s : servers) out.push_back(s->uri());
        return out;
    }
    dlock::support::RedisServer& operator[](std::size_t i) { return *servers[i]; }
    // How many masters hold the lock's key.
    int holding(const std::string& name) {
        int n = 0;
        for (auto& s : servers) n += s->cli({"EXISTS", lock_key(name)}) == "1";
        return n;
    }
};

std::size_t count_votes(const std::vector<dlock::MasterOutcome>& outcomes, dlock::Vote vote) {
    return static_cast<std::size_t>(
        std::count_if(outcomes.begin(), outcomes.end(), [&](const auto& o) { return o.vote == vote; }));
}

// The threads of this process now.
std::size_t thread_count() {
    std::size_t n = 0;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) n += task.is_directory();
    return n;
}

}  // namespace

TEST(Redlock, AcquiresOnEveryMasterAndReleasesEverywhere) {
    FiveMasters m;
    dlock::Masters masters(m.urls());
    EXPECT_EQ(masters.size(), 5u);
    EXPECT_EQ(masters.quorum(), 3u);
    dlock::Redlock lock(masters, "invoice:7");
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_GT(lock.fencing_token(), 0u);
    EXPECT_GT(lock.valid_until(), Clock::now() + 25s);
    // Every master granted it (the rest of the fan-out may land just after the majority).
    EXPECT_TRUE(eventually([&] { return m.holding("invoice:7") == 5; }));
    lock.unlock();
    EXPECT_FALSE(lock.is_held());
    EXPECT_TRUE(eventually([&] { return m.holding("invoice:7") == 0; }));
}

TEST(Redlock, ReentryIsCountedWithoutAnotherGrant) {
    FiveMasters m;
    dlock::Masters masters(m.urls());
    dlock::Redlock lock(masters, "reentrant");
    lock.lock();
    auto token = lock.fencing_token();
    EXPECT_TRUE(lock.try_lock());
    EXPECT_EQ(lock.hold_count(), 2u);
    EXPECT_EQ(lock.fencing_token(), token);
    lock.unlock();
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(m.holding("reentrant"), 5);
    {
        std::scoped_lock again(lock);
        EXPECT_EQ(lock.hold_count(), 2u);
    }
    lock.unlock();
    EXPECT_TRUE(eventually([&] { return m.holding("reentrant") == 0; }));
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
}

TEST(Redlock, TwoMastersStoppedStillAcquiresWithinTheDeadline) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "two-down", {.node_timeout = 200ms});
    m[1].pause();
    m[3].pause();
    auto start = Clock::now();
    EXPECT_TRUE(lock.try_lock_for(3s));
    EXPECT_LT(Clock::now() - start, 3s);
    EXPECT_GE(count_votes(lock.last_outcomes(), dlock::Vote::granted), 3u);
    EXPECT_EQ(count_votes(lock.last_outcomes(), dlock::Vote::held_by_another), 0u);
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    m[1].resume();
    m[3].resume();
}

TEST(Redlock, ThreeMastersStoppedFailsAtTheDeadlineSayingWhatEachAnswered) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "three-down", {.lease = 2s, .node_timeout = 100ms});
    m[0].pause();
    m[2].pause();
    m[4].pause();
    auto start = Clock::now();
    try {
        (void)lock.try_lock_for(1s);
        ADD_FAILURE() << "acquired with three of five masters stopped";
    } catch (const dlock::QuorumError& e) {
        EXPECT_EQ(e.code(), dlock::errc::no_quorum);
        const auto& outcomes = e.outcomes();
        ASSERT_EQ(outcomes.size(), 5u);
        EXPECT_EQ(outcomes[1].vote, dlock::Vote::granted);
        EXPECT_EQ(outcomes[3].vote, dlock::Vote::granted);
        for (int i : {0, 2, 4}) {
            EXPECT_TRUE(outcomes[i].vote == dlock::Vote::timed_out || outcomes[i].vote == dlock::Vote::failed)
                << i << " " << to_string(outcomes[i].vote);
            EXPECT_TRUE(outcomes[i].error) << i;
            EXPECT_EQ(outcomes[i].master, m[i].uri());
        }
        EXPECT_NE(std::string(e.what()).find("granted"), std::string::npos) << e.what();
    }
    auto elapsed = Clock::now() - start;
    EXPECT_GE(elapsed, 1s);
    EXPECT_LT(elapsed, 1s + 1s);  // the deadline, plus at most one attempt in flight
    EXPECT_FALSE(lock.is_held());
    // The two that answered gave their grants back.
    EXPECT_TRUE(eventually([&] { return m[1].cli({"EXISTS", lock_key("three-down")}) == "0"; }));
    EXPECT_TRUE(eventually([&] { return m[3].cli({"EXISTS", lock_key("three-down")}) == "0"; }));
    for (int i : {0, 2, 4}) m[i].resume();
    // Requests that sat in a stopped master's socket may still run on resume;
    // the lease bounds them.
    EXPECT_TRUE(eventually([&] { return m.holding("three-down") == 0; }, 5s));
}

TEST(Redlock, UnreachableMastersFailAtOnceWithTheirErrors) {
    std::vector<std::string> urls;
    for (int i = 0; i < 3; ++i) urls.push_back("redis://127.0.0.1:" + std::to_string(dlock::support::free_port()));
    dlock::Masters masters(urls, quick_options());
    dlock::Redlock lock(masters, "nowhere");
    std::error_code ec;
    auto start = Clock::now();
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::no_quorum);
    EXPECT_LT(Clock::now() - start, 3s);
    auto outcomes = lock.last_outcomes();
    ASSERT_EQ(outcomes.size(), 3u);
    for (const auto& o : outcomes) {
        EXPECT_EQ(o.vote, dlock::Vote::failed);
        EXPECT_TRUE(o.error == dlock::errc::connection_refused || o.error == dlock::errc::not_connected)
            << o.error.message();
    }
    // lock() without a deadline gives up after connect + command timeout.
    start = Clock::now();
    EXPECT_THROW(lock.lock(), dlock::QuorumError);
    EXPECT_LT(Clock::now() - start, 5s);
}

TEST(Redlock, KeyHeldByAnotherOnThreeMastersIsNotAcquiredAndNothingIsLeftOnTheOtherTwo) {
    FiveMasters m;
    for (int i : {0, 1, 2})
        m[i].cli({"HSET", lock_key("taken"), "owner", "someone-else", "count", "1", "seq", "1", "token", "1"});
    for (int i : {0, 1, 2}) m[i].cli({"PEXPIRE", lock_key("taken"), "60000"});
    dlock::Masters masters(m.urls());
    dlock::Redlock lock(masters, "taken");
    EXPECT_FALSE(lock.try_lock());
    EXPECT_GE(count_votes(lock.last_outcomes(), dlock::Vote::held_by_another), 3u);
    EXPECT_FALSE(lock.is_held());
    EXPECT_TRUE(eventually([&] {
        return m[3].cli({"EXISTS", lock_key("taken")}) == "0" && m[4].cli({"EXISTS", lock_key("taken")}) == "0";
    }));
    for (int i : {0, 1, 2}) EXPECT_EQ(m[i].cli({"HGET", lock_key("taken"), "owner"}), "someone-else");
    // Waiting until the deadline is contention, not an error.
    EXPECT_FALSE(lock.try_lock_for(300ms));
}

TEST(Redlock, WatchdogKeepsTheMajorityThroughAMasterRestart) {
    FiveMasters m;
    std::atomic<int> lost{0};
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "long-job",
                        {.lease = 900ms, .node_timeout = 150ms, .on_lost = [&](auto, auto) { ++lost; }});
    lock.lock();
    m[0].kill();  // without persistence: its copy of the lock is gone
    m[0].start();
    m[2].restart();
    auto until = Clock::now() + 3s;  // more than three leases
    while (Clock::now() < until) {
        EXPECT_TRUE(lock.is_held());
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(lost.load(), 0);
    // The renewals took the restarted masters back, restoring all five.
    EXPECT_TRUE(eventually([&] { return m.holding("long-job") == 5; }));
    lock.unlock();
    EXPECT_TRUE(eventually([&] { return m.holding("long-job") == 0; }));
}

namespace {

// Holds `name` over five masters, lets `take_away` break it on some of them,
// and expects the hold to be reported lost within a few renewals.
template <typename TakeAway>
void expect_lost_after(FiveMasters& m, const std::string& name, TakeAway take_away) {
    std::promise<std::error_code> lost;
    dlock::Masters masters(m.urls());
    dlock::Redlock lock(masters, name, {.lease = 600ms, .on_lost = [&](auto, std::error_code ec) {
                                            lost.set_value(ec);
                                        }});
    lock.lock();
    auto token = lock.lost_token();
    ASSERT_TRUE(eventually([&] { return m.holding(name) == 5; }));
    take_away(masters);
    auto reported = lost.get_future();
    ASSERT_EQ(reported.wait_for(3s), std::future_status::ready);
    EXPECT_EQ(reported.get(), dlock::errc::lease_lost);
    EXPECT_TRUE(token.stop_requested());
    EXPECT_FALSE(lock.is_held());
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost);
}

}  // namespace

TEST(Redlock, LosingTheMajorityIsReportedAsLost) {
    FiveMasters m;
    expect_lost_after(m, "fragile", [&](dlock::Masters&) {
        for (int i : {0, 1, 2}) m[i].cli({"HSET", lock_key("fragile"), "owner", "intruder"});
    });
}

TEST(Redlock, ForceReleasedOnAMajorityIsLostNotTakenBack) {
    FiveMasters m;
    expect_lost_after(m, "broken", [&](dlock::Masters& masters) {
        for (int i : {0, 1, 2}) EXPECT_TRUE(dlock::force_release(masters.client(i), "broken").has_value());
    });
    // Renewals only take back a master that forgot the lock entirely (restart).
    for (int i : {0, 1, 2}) EXPECT_EQ(m[i].cli({"EXISTS", lock_key("broken")}), "0");
}

TEST(Redlock, AWaiterIsWokenByTheReleaseNotByTheLease) {
    FiveMasters m;
    dlock::Masters masters(m.urls());
    dlock::Redlock holder(masters, "handoff", {.lease = 60s, .ownership = dlock::Ownership::handle});
    dlock::Redlock waiter(masters, "handoff", {.lease = 60s});
    holder.lock();
    auto released_at = std::async(std::launch::async, [&] {
        std::this_thread::sleep_for(300ms);
        holder.unlock();
        return Clock::now();
    });
    auto acquired = std::async(std::launch::async, [&] {
        bool ok = waiter.try_lock_for(20s);
        auto at = Clock::now();
        if (ok) waiter.unlock();
        return std::make_pair(ok, at);
    });
    auto [ok, at] = acquired.get();
    EXPECT_TRUE(ok);
    EXPECT_LT(at - released_at.get(), 5s);  // the lease was 60 s
}

TEST(Redlock, FencingTokensGrowAndLaggingCountersAreRaised) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "fenced", {.node_timeout = 200ms});
    lock.lock();
    auto first = lock.fencing_token();
    lock.unlock();
    // One master's counter far ahead, and a majority that must include it
    // (two others away): the token is its count, and masters 1 and 2 are
    // raised to it before lock() returns.
    const auto ahead = first + 1'000'000'000;  // far past any master's clock-floored counter
    m[0].cli({"HSET", lock_key("fenced") + ":fence", "token", std::to_string(ahead)});
    m[3].pause();
    m[4].pause();
    lock.lock();
    EXPECT_EQ(lock.fencing_token(), ahead + 1);
    lock.unlock();
    m[3].resume();
    m[4].resume();
    // Without master 0, every majority of the other four includes master 1
    // or 2, so the next token still counts past it.
    m[0].pause();
    lock.lock();
    EXPECT_GT(lock.fencing_token(), ahead + 1);
    lock.unlock();
    m[0].resume();
}

TEST(Redlock, EveryLaggingGranterIsRaisedNotOnlyAMajority) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "laggard", {.node_timeout = 200ms});
    lock.lock();
    const auto first = lock.fencing_token();
    lock.unlock();
    // Master 0 is behind (it came back from an old snapshot); the four
    // others agree, a majority on their own, and answer first (master 0 is
    // slow this once). The token is theirs, and master 0 must be raised to it
    // too, or a later majority that includes it and two masters that miss a
    // grant could count from its old value.
    for (int i : {1, 2, 3, 4})
        m[i].cli({"HSET", lock_key("laggard") + ":fence", "token", std::to_string(first + 1'000'000'000)});
    m[0].pause();
    std::thread wake([&] {
        std::this_thread::sleep_for(50ms);
        m[0].resume();
    });
    lock.lock();
    const auto token = lock.fencing_token();
    wake.join();
    lock.unlock();
    EXPECT_GT(token, first);
    EXPECT_TRUE(eventually([&] {
        return std::stoull(m[0].cli({"HGET", lock_key("laggard") + ":fence", "token"})) >= token;
    }, 2s)) << "master 0 was left behind at " << m[0].cli({"HGET", lock_key("laggard") + ":fence", "token"});
}

// The caller reads the masters' answers itself and returns at the majority;
// an answer that comes later is left on its connection for whoever reads
// next. With no next call, the I/O thread reads it at its tick: the late
// granter is still raised, while the lock is held and nothing else is sent.
TEST(Redlock, ALateGrantersAnswerIsReadWithNoFurtherCall) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "unread", {.node_timeout = 1s});
    std::uint64_t behind = 0;
    for (int i = 0; i < 3; ++i) {  // the connections now left to the caller between votes
        lock.lock();
        behind = lock.fencing_token();
        lock.unlock();
    }
    for (int i : {1, 2, 3, 4})
        m[i].cli({"HSET", lock_key("unread") + ":fence", "token", std::to_string(behind + 1'000'000'000)});
    m[0].pause();
    std::thread wake([&] {
        std::this_thread::sleep_for(100ms);
        m[0].resume();
    });
    lock.lock();
    const auto token = lock.fencing_token();
    wake.join();
    EXPECT_GT(token, behind + 1'000'000'000);
    EXPECT_TRUE(eventually([&] {
        return std::stoull(m[0].cli({"HGET", lock_key("unread") + ":fence", "token"})) >= token;
    }, 2s)) << "master 0 was left behind at " << m[0].cli({"HGET", lock_key("unread") + ":fence", "token"});
    lock.unlock();
}

TEST(Redlock, FencingTokenKeepsGrowingWhenAWholeMajorityLostItsCounters) {
    FiveMasters m;
    dlock::Masters masters(m.urls(), quick_options());
    dlock::Redlock lock(masters, "amnesia", {.node_timeout = 200ms});
    for (int i = 0; i < 3; ++i) {
        lock.lock();
        lock.unlock();
    }
    lock.lock();
    auto before = lock.fencing_token();
    lock.unlock();
    // Two masters forget: every majority still has a master that remembers.
    m[0].cli({"FLUSHALL"});
    m[1].cli({"FLUSHALL"});
    lock.lock();
    EXPECT_GT(lock.fencing_token(), before);
    before = lock.fencing_token();
    lock.unlock();
    // Three forget and the other two are away: this majority remembers
    // nothing, and its counters start again from the masters' clocks, past
    // every token issued before (redlock.hpp).
    for (int i : {0, 1, 2}) m[i].cli({"FLUSHALL"});
    m[3].pause();
    m[4].pause();
    lock.lock();
    EXPECT_GT(lock.fencing_token(), before);
    lock.unlock();
    m[3].resume();
    m[4].resume();
}

// Settling disagreeing fencing counters is one more round trip, and it is
// kept within the caller's deadline as well (it once had a node timeout of
// its own past it): a granter slow to confirm cuts the attempt at the
// deadline, and its grants are undone.
TEST(Redlock, SettlingTheTokenKeepsTheCallersDeadline) {
    dlock::support::RedisServer fast, slow, stopped;
    dlock::support::TcpProxy slow_link(slow.port());
    dlock::Masters masters({fast.uri(), slow_link.uri(), stopped.uri()});
    dlock::Redlock lock(masters, "settle", {.node_timeout = 3s});
    lock.lock();  // every connection is up before the slow link slows down
    lock.unlock();
    // The fast master's counter is far ahead: the slow one must be raised to it.
    fast.cli({"HSET", "dlock:{settle}:fence", "token", "5000000000000000"});
    stopped.pause();  // the fast and the slow master make the majority
    slow_link.delay_replies(500ms);
    const auto start = Clock::now();
    std::error_code ec;
    // Granted by both at about 500 ms; settling would take until about 1 s.
    const bool got = lock.try_lock_until(Clock::now() + 600ms, ec);
    const auto took = Clock::now() - start;
    EXPECT_FALSE(got);
    EXPECT_LT(took, 850ms) << "the 600 ms deadline was not kept";
    slow_link.delay_replies(0ms);
    stopped.resume();
    // Nothing of the attempt stays behind.
    EXPECT_TRUE(eventually([&] { return fast.cli({"EXISTS", "dlock:{settle}"}) == "0"; }, 5s));
    EXPECT_TRUE(eventually([&] { return slow.cli({"EXISTS", "dlock:{settle}"}) == "0"; }, 5s));
}

TEST(Redlock, BadInputIsATypedError) {
    FiveMasters m;
    auto urls = m.urls();
    auto expect_code = [](auto make, dlock::errc code) {
        try {
            make();
            ADD_FAILURE() << "no error";
        } catch (const dlock::Error& e) {
            EXPECT_EQ(e.code(), code) << e.what();
        }
    };
    expect_code([&] { dlock::Masters x({urls[0], urls[1]}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Masters x({urls[0], urls[1], urls[2], urls[3]}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Masters x({}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Masters x({urls[0], urls[1], urls[0]}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Masters x({urls[0], urls[1], "redis://host:notaport"}); }, dlock::errc::invalid_uri);
    dlock::Masters masters(urls);
    expect_code([&] { dlock::Redlock x(masters, ""); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Redlock x(masters, "n", {.lease = 0ms}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Redlock x(masters, "n", {.lease = 25h}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Redlock x(masters, "n", {.lease = 1s, .node_timeout = 1s}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Redlock x(masters, "n", {.node_timeout = -1ms}); }, dlock::errc::invalid_argument);
    expect_code([&] { dlock::Redlock x(masters, "n", {.retry_delay = 0ms}); }, dlock::errc::invalid_argument);
    expect_code([&] { (void)masters.client(5); }, dlock::errc::invalid_argument);
    // A key that holds something else on a majority.
    for (int i : {0, 1, 2}) m[i].cli({"SET", lock_key("not-a-lock"), "x"});
    dlock::Redlock wrong(masters, "not-a-lock");
    std::error_code ec;
    EXPECT_FALSE(wrong.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::wrong_type);
    EXPECT_TRUE(eventually([&] { return m[3].cli({"EXISTS", lock_key("not-a-lock")}) == "0"; }));
}

TEST(Redlock, MastersClosingReleasesWhatIsHeld) {
    FiveMasters m;
    auto masters = std::make_unique<dlock::Masters>(m.urls());
    dlock::Redlock lock(*masters, "closing");
    lock.lock();
    EXPECT_TRUE(eventually([&] { return m.holding("closing") == 5; }));
    masters.reset();
    EXPECT_EQ(m.holding("closing"), 0);
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::client_closed);
}

TEST(Redlock, ReleasesStillInFlightFinishBeforeMastersClose) {
    FiveMasters m;
    auto masters = std::make_unique<dlock::Masters>(m.urls());
    dlock::Redlock lock(*masters, "exit-right-after");
    lock.lock();
    ASSERT_TRUE(eventually([&] { return m.holding("exit-right-after") == 5; }));
    m[4].pause();
    std::thread resume([&] {
        std::this_thread::sleep_for(300ms);
        m[4].resume();
    });
    lock.unlock();  // returns once the four others confirmed
    auto closing = Clock::now();
    masters.reset();  // waits for master 4's answer (node timeout 600 ms) instead of cutting it off
    auto waited = Clock::now() - closing;
    resume.join();
    EXPECT_GE(waited, 200ms);
    EXPECT_LT(waited, 2s);
    EXPECT_EQ(m.holding("exit-right-after"), 0);
}

TEST(Redlock, EveryMasterIsServedByOneIoThread) {
    FiveMasters m;
    // A thread made and ended first: a runtime's own threads started at the
    // first thread made (ThreadSanitizer's background thread) are then
    // counted in `before`, not taken for the client's.
    std::thread([] {}).join();
    const auto before = thread_count();
    {
        dlock::Masters masters(m.urls());
        for (std::size_t i = 0; i < masters.size(); ++i) masters.client(i).wait_connected();
        // One I/O thread for the five masters, and beside it Asio's one
        // resolver thread (a thread per master made ten).
        EXPECT_LE(thread_count(), before + 2);
        dlock::Redlock lock(masters, "one-loop");
        lock.lock();
        EXPECT_TRUE(lock.is_held());
        EXPECT_TRUE(eventually([&] { return m.holding("one-loop") == 5; }));
        lock.unlock();
        EXPECT_TRUE(eventually([&] { return m.holding("one-loop") == 0; }));
        EXPECT_LE(thread_count(), before + 2);
    }
    // Closing the masters ends their thread.
    EXPECT_TRUE(eventually([&] { return thread_count() <= before; }));
}

TEST(Redlock, AMasterThatStopsAnsweringHoldsUpNoOtherMastersAnswers) {
    FiveMasters m;
    auto options = quick_options();
    options.command_timeout = 5s;
    dlock::Masters masters(m.urls(), options);
    for (std::size_t i = 0; i < masters.size(); ++i) masters.client(i).wait_connected();
    m[0].pause();
    // A command waits on the silent master, on the thread every master shares...
    std::promise<std::error_code> answered;
    auto silent = answered.get_future();
    const std::string_view ping[] = {"PING"};
    masters.client(0).submit(ping, [&](std::error_code ec, dlock::Reply&&) { answered.set_value(ec); });
    // ...while the others answer as their replies come: their own commands,
    for (std::size_t i = 1; i < masters.size(); ++i) EXPECT_EQ(masters.client(i).command({"PING"}).text, "PONG");
    // and a vote, decided by them without waiting for the silent master's
    // answer or its node timeout.
    dlock::Redlock lock(masters, "one-silent", {.node_timeout = 2s});
    lock.lock();
    EXPECT_TRUE(lock.is_held());
    const auto outcomes = lock.last_outcomes();
    ASSERT_EQ(outcomes.size(), 5u);
    EXPECT_EQ(outcomes[0].vote, dlock::Vote::not_counted);
    EXPECT_GE(count_votes(outcomes, dlock::Vote::granted), 3u);
    std::error_code ec;
    lock.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    // All of it before the silent master's command timed out (command_timeout 5 s).
    EXPECT_EQ(silent.wait_for(0s), std::future_status::timeout);
    m[0].resume();
    EXPECT_FALSE(silent.get());
    EXPECT_TRUE(eventually([&] { return m.holding("one-silent") == 0; }));
}

TEST(Redlock, WhatAForkedChildDestroysLeavesTheParentsMastersAtWork) {
    FiveMasters m;
    auto masters = std::make_unique<dlock::Masters>(m.urls());
    auto lock = std::make_unique<dlock::Redlock>(*masters, "forked");
    lock->lock();
    ASSERT_TRUE(eventually([&] { return m.holding("forked") == 5; }));
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // The child lets go of what it inherited, destructors and all: no
        // release reaches the masters, and the parent's thread is not waited for.
        std::error_code ec;
        dlock::Redlock other(*masters, "forked-too");
        int code = other.try_lock(ec) || ec != dlock::errc::forked_child ? 1 : 0;
        if (code) std::fprintf(stderr, "child: %s\n", ec.message().c_str());
        lock.reset();
        masters.reset();
        // _exit: no exit-time leak check in the child, which keeps what it
        // inherited of the parent's clients on purpose (it must not close
        // the parent's sockets or join the parent's thread).
        _exit(code);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(m.holding("forked"), 5);
    EXPECT_TRUE(lock->is_held());
    std::error_code ec;
    lock->unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(eventually([&] { return m.holding("forked") == 0; }));
    EXPECT_TRUE(lock->try_lock());
    lock->unlock();
}
