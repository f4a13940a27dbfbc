// wait_until_free (dlock/lock.hpp) while the name changes hands. Releases
// publish only when marked, so a hold the waiter finds but did not mark would
// tell nobody of its release, and the wait would last until the hold's lease
// ended. The waiter marks every hold and looks at the name in one atomic
// step (mark_waited.lua); here, against a real server, holds taken at every
// point of its wait are heard when they are released. The waiter's replies
// come 500 ms late (a proxy), so that the holds can be taken between its
// steps, placed by the scripts the server has run (INFO commandstats).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;

namespace {

// How many scripts the server has run (EVALSHA calls of every client); with
// at_least, once it has run that many, or when `within` ran out.
// `stats` asks: INFO is no script (a redis-cli run every 5 ms cost most of
// these tests' CPU).
long scripts_run_by(dlock::Client& stats, long at_least = 0, std::chrono::seconds within = 20s) {
    const auto run = [&] {
        const auto info = stats.command({"INFO", "commandstats"}).text;
        const auto at = info.find("cmdstat_evalsha:calls=");
        return at == std::string::npos ? 0L : std::stol(info.substr(at + 22));
    };
    const auto until = std::chrono::steady_clock::now() + within;
    while (run() < at_least && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    return run();
}

// A hold of some kind on the name: take() runs one script, so does release().
struct Holder {
    std::function<void()> take, release;
};
using MakeHolder = std::function<Holder(dlock::Client&, const std::string&)>;

Holder lock_holder(dlock::Client& client, const std::string& name) {
    auto lock = std::make_shared<dlock::Lock>(
        client.lock(name, {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle}));
    return {[lock] { lock->lock(); }, [lock] { lock->unlock(); }};
}

Holder writer_holder(dlock::Client& client, const std::string& name) {
    auto rw = std::make_shared<dlock::RwLock>(
        client.rw_lock(name, {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle}));
    return {[rw] { rw->lock(); }, [rw] { rw->unlock(); }};
}

Holder reader_holder(dlock::Client& client, const std::string& name) {
    auto rw = std::make_shared<dlock::RwLock>(
        client.rw_lock(name, {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle}));
    return {[rw] { rw->lock_shared(); }, [rw] { rw->unlock_shared(); }};
}

Holder permit_holder(dlock::Client& client, const std::string& name) {
    auto sem = std::make_shared<dlock::Semaphore>(client, name,
                                                  dlock::SemaphoreOptions{.limit = 2, .lease = 15s, .renew = false});
    auto permit = std::make_shared<dlock::Permit>();
    return {[sem, permit] { *permit = sem->acquire(); }, [permit] { permit->release(); }};
}

struct Waiter {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy{server.port()};
    dlock::Client waiting{proxy.uri(), slow()}, client{server.uri()}, stats{server.uri()};

    static dlock::ClientOptions slow() {
        dlock::ClientOptions options;
        options.command_timeout = 5s;
        return options;
    }
    long scripts_run() { return scripts_run_by(stats); }
    long run_at_least(long n, std::chrono::seconds within = 20s) { return scripts_run_by(stats, n, within); }
    // Once the server has run no script for 1.2 s (over two of the waiter's
    // round trips): the waiter sleeps, or has returned. How many it has run.
    long settled() {
        long seen = scripts_run();
        for (int i = 0; i < 20; ++i) {
            std::this_thread::sleep_for(1200ms);
            const long now = scripts_run();
            if (now == seen) break;
            seen = now;
        }
        return seen;
    }
    // The waiter's scripts loaded, and the holder's (taken and given back once).
    void warm_up(const std::string& name, Holder& holder) {
        ASSERT_TRUE(dlock::wait_until_free(waiting, name, std::chrono::steady_clock::now() + 10s));
        holder.take();
        holder.release();
    }
    std::future<bool> wait_free(const std::string& name) {
        proxy.delay_replies(500ms);
        return std::async(std::launch::async, [this, name] {
            return dlock::wait_until_free(waiting, name, std::chrono::steady_clock::now() + 40s);
        });
    }
};

// A Lock holds the name while the waiter sleeps; at its release another hold
// is taken at once, before the waiter (told 500 ms late) looks again: its look
// marks that hold, whose release then wakes it.
void expect_heard_after_a_hand_over(const std::string& name, const MakeHolder& make) {
    Waiter w;
    auto first = lock_holder(w.client, name);
    auto next = make(w.client, name);
    w.warm_up(name, first);
    w.warm_up(name, next);
    first.take();
    const long before = w.scripts_run();
    auto freed = w.wait_free(name);
    ASSERT_GE(w.run_at_least(before + 1), before + 1);
    const long asleep = w.settled();  // its subscriptions' confirmations may wake it once
    first.release();
    next.take();
    // It looks again after the release's message (500 ms late), then sleeps
    // on the hold it found, well before that hold's lease ends (15 s).
    ASSERT_GT(w.run_at_least(asleep + 3, 5s), asleep + 2) << "the waiter did not look again";
    w.settled();
    ASSERT_EQ(freed.wait_for(0s), std::future_status::timeout) << "the waiter returned while the name was held";
    const auto released_at = std::chrono::steady_clock::now();
    next.release();
    ASSERT_EQ(freed.wait_for(20s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_LT(dlock::test::seconds_since(released_at), 3.0) << "the waiter woke at the lease's end, not at the release";
}

// The name changes hands twice while the waiter works through one wake-up:
// taken right after the waiter's first script that follows a release, given
// back two of its scripts later, taken again one script after that. A waiter
// whose marks and look were separate steps found each hold after its marks,
// marked and looked once more, and then slept on an unmarked hold until its
// lease ended (15 s); one whose look is its marks finds the name free after
// the release, or marks what it finds. Either way: free, and told no later
// than 3 s after the last release. Each step waits for the waiter's scripts
// for 3 s at most: a waiter that returned runs none.
void expect_heard_after_two_hand_overs(const std::string& name, const MakeHolder& make) {
    Waiter w;
    auto a = make(w.client, name);
    auto b = make(w.client, name);
    w.warm_up(name, a);
    a.take();
    long own = w.scripts_run();  // every script run but the waiter's, from here: the holders' own
    auto freed = w.wait_free(name);
    ASSERT_GE(w.run_at_least(own + 1), own + 1);
    long waiter_scripts = w.settled() - own;  // asleep on a's hold
    const auto after_waiter_runs = [&](long n) {
        waiter_scripts = w.run_at_least(own + waiter_scripts + n, 3s) - own;
    };
    a.release();
    ++own;
    after_waiter_runs(1);
    b.take();
    ++own;
    after_waiter_runs(2);
    b.release();
    ++own;
    after_waiter_runs(1);
    a.take();
    ++own;
    after_waiter_runs(2);
    std::this_thread::sleep_for(700ms);
    const auto released_at = std::chrono::steady_clock::now();
    a.release();
    ASSERT_EQ(freed.wait_for(25s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_LT(dlock::test::seconds_since(released_at), 3.0) << "the waiter slept past the last release until a lease ended";
}

}  // namespace

TEST(WaitUntilFree, APermitTakenAtAHandOverIsHeard) { expect_heard_after_a_hand_over("hand-permit", permit_holder); }

TEST(WaitUntilFree, AReaderTakenAtAHandOverIsHeard) { expect_heard_after_a_hand_over("hand-reader", reader_holder); }

TEST(WaitUntilFree, AWriterTakenAtAHandOverIsHeard) { expect_heard_after_a_hand_over("hand-writer", writer_holder); }

TEST(WaitUntilFree, ALockTakenAtAHandOverIsHeard) { expect_heard_after_a_hand_over("hand-lock", lock_holder); }

TEST(WaitUntilFree, ALockThatChangesHandsTwiceInOneWakeUpIsHeard) {
    expect_heard_after_two_hand_overs("twice-lock", lock_holder);
}

TEST(WaitUntilFree, AWriteSideThatChangesHandsTwiceInOneWakeUpIsHeard) {
    expect_heard_after_two_hand_overs("twice-writer", writer_holder);
}

// A reader whose state hash was lost (evicted) while it read: wait_until_free
// cannot mark a state that is gone, so the reader's release, the last,
// publishes whenever the state it reads is missing. It was heard when the
// reader's lease ended (14 s after the release).
TEST(WaitUntilFree, AReaderWhoseStateWasLostIsHeardWhenItLeaves) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), waiting(server.uri());
    auto rw = client.rw_lock("lost-state", {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle});
    rw.lock_shared();
    ASSERT_EQ(server.cli({"DEL", dlock::test::lock_key("lost-state") + ":rstate"}), "1");
    auto freed = std::async(std::launch::async, [&] {
        return dlock::wait_until_free(waiting, "lost-state", std::chrono::steady_clock::now() + 30s);
    });
    std::this_thread::sleep_for(1s);
    ASSERT_EQ(freed.wait_for(0s), std::future_status::timeout) << "returned while a reader held the name";
    const auto released_at = std::chrono::steady_clock::now();
    rw.unlock_shared();
    ASSERT_EQ(freed.wait_for(20s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_LT(dlock::test::seconds_since(released_at), 3.0) << "slept past the release until the reader's lease ended";
}
