// The lock under faults: replies lost between send and reply, a holder
// killed with SIGKILL.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "redis_server.hpp"
#include "reply_lost.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using dlock::test::lock_key;

namespace {

using dlock::support::cut_options;
using dlock::support::with_reply_lost;

long evalsha_calls(const dlock::support::RedisServer& server) { return server.command_calls("evalsha"); }

}  // namespace

TEST(LockFaults, AcquireWhoseReplyWasLostIsNotCountedTwice) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    auto warm = client.lock("warm-up");
    warm.lock();  // loads the scripts, so the paused call is an EVALSHA that runs
    warm.unlock();
    // A handle owns the hold: the acquire runs on another thread below.
    auto lock = client.lock("retried", {.ownership = dlock::Ownership::handle});
    auto before = evalsha_calls(server);
    bool ok = with_reply_lost(server, [&] { return lock.try_lock_for(5s); });
    ASSERT_TRUE(ok);
    EXPECT_GE(evalsha_calls(server) - before, 2) << "the acquire did not run twice: nothing was retried";
    EXPECT_EQ(lock.hold_count(), 1u);
    EXPECT_EQ(server.cli({"HGET", lock_key("retried"), "count"}), "1");
    // One token issued: the retry was answered from the first copy's record.
    EXPECT_EQ(std::to_string(lock.fencing_token()), server.cli({"HGET", lock_key("retried") + ":fence", "token"}));
    lock.unlock();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("retried")}), "0");
}

TEST(LockFaults, ReleaseWhoseReplyWasLostIsNotAppliedTwice) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), cut_options());
    auto lock = client.lock("twice", {.ownership = dlock::Ownership::handle});
    lock.lock();
    lock.lock();
    auto before = evalsha_calls(server);
    auto ec = with_reply_lost(server, [&] {
        std::error_code e;
        lock.unlock(e);
        return e;
    });
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_GE(evalsha_calls(server) - before, 2);
    EXPECT_EQ(server.cli({"HGET", lock_key("twice"), "count"}), "1") << "hold count decremented twice";
    EXPECT_EQ(lock.hold_count(), 1u);
    // The final release, retried, must not come back as "not owner".
    ec = with_reply_lost(server, [&] {
        std::error_code e;
        lock.unlock(e);
        return e;
    });
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("twice")}), "0");
    EXPECT_FALSE(lock.is_held());
}

TEST(LockFaults, HolderKilledByProcessSignalFreesTheLockWithinLeasePlus100ms) {
    dlock::support::RedisServer server;
    constexpr auto lease = 500ms;
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t holder = dlock::support::run_in_child([&] {
        dlock::Client client(server.uri());
        auto lock = client.lock("victim", {.lease = lease});
        lock.lock();
        char c = 'x';
        if (write(ready[1], &c, 1) != 1) return 1;
        for (;;) pause();
    });
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    dlock::Client client(server.uri());
    auto lock = client.lock("victim");
    auto acquired_at = std::async(std::launch::async, [&] {
        lock.lock();
        auto at = Clock::now();
        lock.unlock();
        return at;
    });
    std::this_thread::sleep_for(300ms);  // the holder renews meanwhile
    auto killed_at = Clock::now();
    kill(holder, SIGKILL);
    EXPECT_EQ(dlock::support::wait_child(holder), -SIGKILL);
    EXPECT_LE(acquired_at.get() - killed_at, lease + 100ms);
    close(ready[0]);
    close(ready[1]);
}
