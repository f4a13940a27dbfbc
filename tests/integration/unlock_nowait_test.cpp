// Lock::unlock_nowait: released locally at once, in order on the wire, and
// its failures reported on on_unlock_error.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "lock/lock_scripts.hpp"
#include "tcp_proxy.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::lock_key;

namespace {

// What on_unlock_error reported, from any thread.
class UnlockErrors {
public:
    dlock::LockOptions options() {
        return {.on_unlock_error = [this](std::string_view, std::error_code ec) {
            std::lock_guard g(mutex_);
            text_ += ec.message() + "; ";
        }};
    }
    std::string text() {
        std::lock_guard g(mutex_);
        return text_;
    }

private:
    std::mutex mutex_;
    std::string text_;
};

}  // namespace

TEST(UnlockNowait, ReleasesAtOnceAndTheNextLockOfTheSameOwnerComesAfterIt) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("nowait");
    dlock::Client observer(server.uri());  // reads the hash (a redis-cli run per round cost most of the test)
    for (int i = 0; i < 200; ++i) {
        lock.lock();
        const auto token = lock.fencing_token();
        lock.unlock_nowait();
        EXPECT_FALSE(lock.is_held());
        // The next acquisition goes out behind the release: a fresh grant
        // with a new token, never a re-entry of the old hold.
        lock.lock();
        EXPECT_EQ(lock.hold_count(), 1u);
        EXPECT_GT(lock.fencing_token(), token);
        EXPECT_EQ(observer.command({"HGET", lock_key("nowait"), "count"}).text, "1");
        lock.unlock_nowait();
    }
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("nowait")}) == "0"; }));
    dlock::Client other(server.uri());
    auto theirs = other.lock("nowait");
    EXPECT_TRUE(theirs.try_lock_for(2s));
    theirs.unlock();
}

TEST(UnlockNowait, ReturnsWithoutWaitingForTheAnswer) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), {.command_timeout = 5s});
    auto lock = client.lock("slow-answer");
    lock.lock();
    proxy.delay_replies(1500ms);
    const auto start = Clock::now();
    lock.unlock_nowait();
    EXPECT_LT(Clock::now() - start, 700ms) << "unlock_nowait waited for the release's answer";
    EXPECT_FALSE(lock.is_held());
    proxy.delay_replies(0ms);
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", lock_key("slow-answer")}) == "0"; }, 5s));
}

TEST(UnlockNowait, ARefusedReleaseGoesToOnUnlockError) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::mutex mutex;
    std::vector<std::error_code> errors;
    auto lock = client.lock("gone-meanwhile", {.on_unlock_error = [&](std::string_view, std::error_code ec) {
                                                   std::lock_guard guard(mutex);
                                                   errors.push_back(ec);
                                               }});
    lock.lock();
    // Gone behind the client's back (no notice): only the release finds out.
    ASSERT_EQ(server.cli({"DEL", lock_key("gone-meanwhile")}), "1");
    lock.unlock_nowait();
    EXPECT_FALSE(lock.is_held());
    ASSERT_TRUE(eventually([&] {
        std::lock_guard guard(mutex);
        return !errors.empty();
    }));
    std::lock_guard guard(mutex);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], dlock::errc::lease_lost);
}

TEST(UnlockNowait, AReenteredHoldIsReleasedOneLevelAndWithoutAHoldItIsNotOwner) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::atomic<int> not_owner{0};
    auto lock = client.lock("nested", {.on_unlock_error = [&](std::string_view, std::error_code ec) {
                                           if (ec == dlock::errc::not_owner) ++not_owner;
                                       }});
    lock.lock();
    lock.lock();
    lock.unlock_nowait();
    EXPECT_TRUE(lock.is_held());
    EXPECT_EQ(lock.hold_count(), 1u);
    EXPECT_EQ(server.cli({"HGET", lock_key("nested"), "count"}), "1");
    lock.unlock_nowait();
    EXPECT_FALSE(lock.is_held());
    lock.unlock_nowait();  // nothing held: not_owner, reported at once
    EXPECT_EQ(not_owner.load(), 1);
}

// On a server that has not run the release script yet (a new server, a
// restart, a failover) an EVALSHA is answered NOSCRIPT, and its EVAL went out
// only then: behind the next request this client had sent meanwhile. The
// next owner's try_lock found the lock still held.
TEST(UnlockNowait, OnAServerThatHasNotSeenTheReleaseScriptTheNextRequestStillComesAfterIt) {
    dlock::support::RedisServer server;
    UnlockErrors unlock_errors;
    const auto options = unlock_errors.options();
    dlock::Client client(server.uri());
    dlock::Lock mine(client, "nowait-first", options);
    auto other_options = options;
    other_options.ownership = dlock::Ownership::handle;  // another owner on the same client
    dlock::Lock theirs(client, "nowait-first", other_options);
    mine.lock();
    mine.unlock_nowait();
    EXPECT_TRUE(theirs.try_lock()) << "the release had not run when the client's next request did";
    if (theirs.is_held()) theirs.unlock();
    // After a restart the server has forgotten every script again.
    server.restart();
    // Until the client has reconnected, an attempt fails (ec) and is tried again.
    ASSERT_TRUE(eventually([&] {
        std::error_code ec;
        return mine.try_lock_until(Clock::now() + 1s, ec);
    }, 10s));
    mine.unlock_nowait();
    EXPECT_TRUE(theirs.try_lock()) << "after a restart the release fell behind the next request";
    if (theirs.is_held()) theirs.unlock();
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(unlock_errors.text(), "");
}

// The same reordering let a FairLock holder's unlock_nowait() then lock()
// take the lock again past the waiter first in line, and reported the
// holder's good re-acquisition as lease_lost.
TEST(UnlockNowait, UnlockNowaitThenLockWaitsItsTurnInAFairLine) {
    dlock::support::RedisServer server;
    UnlockErrors unlock_errors;
    const auto options = unlock_errors.options();
    dlock::Client client(server.uri()), waiter_client(server.uri());
    dlock::FairLock mine(client, "fair-nowait", options);
    mine.lock();
    std::atomic<bool> waiter_got{false};
    std::thread waiter([&] {
        dlock::FairLock w(waiter_client, "fair-nowait");
        if (w.try_lock_for(10s)) {
            waiter_got = true;
            w.unlock();
        }
    });
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", lock_key("fair-nowait") + ":line"}) == "1"; }));
    mine.unlock_nowait();
    mine.lock();  // it arrives after the waiter: it must wait for it
    EXPECT_TRUE(waiter_got.load()) << "the holder's next lock() jumped the fair line";
    mine.unlock();
    waiter.join();
    EXPECT_EQ(unlock_errors.text(), "");
}

// While the connection reconnects (the server behind it may have restarted
// or failed over with an empty script cache), nothing counts as known: the
// release goes as EVAL. It used to trust the session before the drop, was
// answered NOSCRIPT, and ran after the client's next request.
TEST(UnlockNowait, DuringAReconnectTheReleaseScriptIsNotTakenAsKnown) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), {.connect_timeout = 5s});
    UnlockErrors unlock_errors;
    dlock::Lock mine(client, "reconnecting", unlock_errors.options());
    mine.lock();
    mine.unlock();  // the release script ran on this session
    mine.lock();
    proxy.black_hole(true);
    proxy.drop_connections();
    server.cli({"SCRIPT", "FLUSH"});  // as a restart with its data, or a failover, would leave it
    std::this_thread::sleep_for(300ms);  // reconnecting: requests wait for the handshake
    mine.unlock_nowait();
    std::thread heal([&] {
        std::this_thread::sleep_for(300ms);
        proxy.black_hole(false);
    });
    const auto exists = client.command({"EXISTS", lock_key("reconnecting")});
    heal.join();
    EXPECT_EQ(exists.integer, 0) << "the release ran after the client's next request";
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(unlock_errors.text(), "");
}

// An error the server answers without looking the script up (BUSY while
// another script runs, LOADING) does not make it known.
TEST(UnlockNowait, ABusyAnswerDoesNotMakeTheReleaseScriptKnown) {
    dlock::support::RedisServer server;
    server.cli({"CONFIG", "SET", "busy-reply-threshold", "50"});
    dlock::Client client(server.uri());
    dlock::Lock first(client, "busy-a"), second(client, "busy-b");
    first.lock();  // the acquire script is cached; the release script never ran here
    std::thread busy([&] {
        dlock::Client other(server.uri());
        std::error_code ec;
        const std::string_view args[] = {
            "EVAL", "local s = redis.call('TIME')[1] while redis.call('TIME')[1] - s < 2 do end return 1", "0"};
        (void)other.command(args, ec);
    });
    std::this_thread::sleep_for(400ms);
    std::error_code ec;
    first.unlock(ec);  // answered BUSY
    busy.join();
    ASSERT_EQ(server.cli({"SCRIPT", "EXISTS", dlock::detail::release_script().sha1()}), "0");
    second.lock();
    second.unlock_nowait();
    EXPECT_EQ(client.command({"EXISTS", lock_key("busy-b")}).integer, 0)
        << "the release went as EVALSHA, was answered NOSCRIPT and ran after the next request";
}
