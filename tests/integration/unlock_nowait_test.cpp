// Lock::unlock_nowait: released locally at once, in order on the wire, and
// its failures reported on on_unlock_error.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

namespace {

std::string key_of(const std::string& name) { return "dlock:{" + name + "}"; }

}  // namespace

TEST(UnlockNowait, ReleasesAtOnceAndTheNextLockOfTheSameOwnerComesAfterIt) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("nowait");
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
        EXPECT_EQ(server.cli({"HGET", key_of("nowait"), "count"}), "1");
        lock.unlock_nowait();
    }
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", key_of("nowait")}) == "0"; }));
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
    EXPECT_TRUE(eventually([&] { return server.cli({"EXISTS", key_of("slow-answer")}) == "0"; }, 5s));
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
    ASSERT_EQ(server.cli({"DEL", key_of("gone-meanwhile")}), "1");
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
    EXPECT_EQ(server.cli({"HGET", key_of("nested"), "count"}), "1");
    lock.unlock_nowait();
    EXPECT_FALSE(lock.is_held());
    lock.unlock_nowait();  // nothing held: not_owner, reported at once
    EXPECT_EQ(not_owner.load(), 1);
}
