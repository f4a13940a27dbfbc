// What a destroyed lock object gives back: exactly the holds made through
// it, whichever thread made them and whichever thread destroys it, and
// nothing of a hold made through another object.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/redlock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "warm_up.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::support::warm_up;

using dlock::test::lock_key;

namespace {

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

// ~Redlock releases every hold made through the object, whichever thread
// made it and whichever destroys it (with Ownership::thread each thread is
// its own owner): a hold left behind would be renewed for as long as the
// Masters lives, and nobody could take the lock again.
TEST(Destruction, ARedlockDestroyedOnAnotherThreadReleasesWhatItsWorkerHeld) {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> servers;
    std::vector<std::string> urls;
    for (int i = 0; i < 3; ++i) {
        servers.push_back(std::make_unique<dlock::support::RedisServer>());
        urls.push_back(servers.back()->uri());
    }
    dlock::Masters masters(urls);
    dlock::RedlockOptions o;
    o.lease = 1s;
    {
        dlock::Redlock lock(masters, "rl-thread", o);  // a 1 s lease
        std::thread worker([&] { lock.lock(); });  // made through `lock`, never unlocked
        worker.join();
    }  // destroyed here, on another thread than the one that locked
    dlock::Redlock other(masters, "rl-thread", o);
    const auto start = Clock::now();
    // The destructor promises a release, so it is free at once; even left to
    // expire, a 1 s lease would be over well within 3 s (unless renewed).
    bool got = other.try_lock_for(3s);
    EXPECT_TRUE(got) << "still held " << ms_since(start) << " ms after the Redlock that held it was destroyed; "
                     << "PTTL on master 0: " << servers[0]->cli({"PTTL", lock_key("rl-thread")});
    if (got) other.unlock();
}

// The same for dlock::Lock.
TEST(Destruction, ALockDestroyedOnAnotherThreadReleasesWhatItsWorkerHeld) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    {
        dlock::Lock lock(client, "l-thread");
        std::thread worker([&] { lock.lock(); });
        worker.join();
    }
    dlock::Client other_client(server.uri());
    dlock::Lock other(other_client, "l-thread");
    EXPECT_TRUE(other.try_lock_for(2s));
    other.unlock();
}

// A destroyed Lock releases only the holds made through it, counted on the
// hold itself: a lost hold that a fresh lock() replaced takes the object's
// share with it. (Counted per object instead, the stale share once released
// another object's hold, silently, while its owner was inside its critical
// section, and a rival client took the lock.)
TEST(Destruction, DestroyingALockLeavesAHoldMadeThroughAnotherObjectAlone) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), admin(server.uri()), rival_client(server.uri());
    warm_up(client);
    std::atomic<int> lost_calls{0};
    dlock::LockOptions lo;
    lo.on_lost = [&](std::string_view, std::error_code) { ++lost_calls; };
    auto x = std::make_unique<dlock::Lock>(client, "ownercount", lo);
    dlock::Lock y(client, "ownercount", lo);

    x->lock();
    ASSERT_TRUE(dlock::force_release(admin, "ownercount").has_value());
    ASSERT_TRUE(eventually([&] { return !x->is_held(); }));
    lost_calls = 0;
    x->lock();    // a fresh acquisition replaces the lost hold
    x->unlock();  // and is released: x holds nothing now
    ASSERT_FALSE(x->is_held());

    y.lock();  // a hold made through y
    auto y_stop = y.lost_token();
    x.reset();  // destroying x must release only what x holds: nothing

    EXPECT_TRUE(y.is_held()) << "y's hold was released by destroying x";
    dlock::Lock rival(rival_client, "ownercount");
    const bool rival_got = rival.try_lock();
    EXPECT_FALSE(rival_got) << "a second holder: another client took the lock y still believes it holds"
                            << " (y lost_token stop_requested=" << y_stop.stop_requested()
                            << ", on_lost calls=" << lost_calls.load() << ")";
    if (rival_got) rival.unlock();
    y.unlock();
}

// Two Lock objects of one owner share one count: y unlocks what x locked,
// y locks again, and destroying x gives back nothing of y's new hold.
TEST(Destruction, DestroyingALockAfterAnotherObjectUnlockedItsHoldLeavesTheNextHoldAlone) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), rival_client(server.uri());
    auto x = std::make_unique<dlock::Lock>(client, "shared-owner");
    dlock::Lock y(client, "shared-owner");
    x->lock();
    y.unlock();  // one owner, one count: this frees the hold made through x
    ASSERT_FALSE(x->is_held());
    y.lock();
    x.reset();
    EXPECT_TRUE(y.is_held()) << "y's hold was released by destroying x";
    dlock::Lock rival(rival_client, "shared-owner");
    const bool rival_got = rival.try_lock();
    EXPECT_FALSE(rival_got);
    if (rival_got) rival.unlock();
    y.unlock();
}

// A Client closed while another thread waits in lock() (no deadline) for a
// lock held elsewhere: the waiter hears client_closed at once, rather than
// at its next wake-up, and never waits for ever (its next call used to go
// to an I/O thread that had ended).
TEST(Destruction, AWaiterHearsItsClientCloseAtOnce) {
    dlock::support::RedisServer server;
    dlock::Client holder_client(server.uri());
    auto holder = holder_client.lock("closed-under", {.lease = 10'000ms});
    holder.lock();
    auto client = std::make_unique<dlock::Client>(server.uri());
    auto& metrics = client->metrics();
    auto keep_metrics = client->options().metrics;  // outlives the client
    // Made here: the waiter thread touches only the Lock, never `client`.
    auto lock = client->lock("closed-under");
    std::atomic<bool> done{false};
    std::error_code heard;
    std::thread waiter([&] {
        try {
            lock.lock();
        } catch (const dlock::Error& e) {
            heard = e.code();
        }
        done = true;
    });
    EXPECT_TRUE(dlock::support::eventually(
        [&] { return metrics.value("dlock_waiting_callers", {{"kind", "lock"}}) == 1; }));
    const auto closing = std::chrono::steady_clock::now();
    client.reset();
    const bool in_time = dlock::support::eventually([&] { return done.load(); }, std::chrono::milliseconds(3000));
    if (!in_time) holder.unlock();  // lets a waiter stuck until the lease's end come back, so the test can end
    waiter.join();
    EXPECT_TRUE(in_time) << "the waiter returned "
                         << std::chrono::duration<double>(std::chrono::steady_clock::now() - closing).count()
                         << " s after the close";
    EXPECT_EQ(heard, dlock::errc::client_closed) << heard.message();
    if (in_time) holder.unlock();
}
