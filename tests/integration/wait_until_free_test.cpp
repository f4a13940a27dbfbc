// wait_until_free (dlock/lock.hpp) against a hold granted inside its window:
// after its marks ran (nothing to mark then: the name was free) and before
// its look at the name. Releases publish only when marked, so such a hold's
// release would tell nobody, and the wait would last until the hold's lease
// ended; the waiter marks and looks once more when it finds a hold its marks
// did not take.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "hold/lock_keys.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;

namespace {

// How many scripts the server has run (EVALSHA calls of every client); with
// at_least, once it has run that many, or when `within` ran out.
long scripts_run_by(const dlock::support::RedisServer& server, long at_least = 0, std::chrono::seconds within = 20s) {
    const auto run = [&] {
        const auto info = server.cli({"INFO", "commandstats"});
        const auto at = info.find("cmdstat_evalsha:calls=");
        return at == std::string::npos ? 0L : std::stol(info.substr(at + 22));
    };
    const auto until = std::chrono::steady_clock::now() + within;
    while (run() < at_least && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    return run();
}

// take(client) holds the name as some kind and returns what releases it.
using Take = std::function<std::function<void()>(dlock::Client&)>;

// The waiter's replies come 500 ms late (a proxy), and the hold is taken as
// soon as the server has run the waiter's marks: inside the window. The name
// is a Lock's first, so that when the window comes the waiter has slept and
// been woken by the lock's release (its first sleep ends at once: its
// subscriptions' confirmations wake it). Scripts run are counted on the
// server (INFO commandstats): the waiter's marks are two, its look one.
void expect_heard_when_taken_in_the_window(const std::string& name, const Take& take) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::ClientOptions slow_options;
    slow_options.command_timeout = 5s;
    dlock::Client waiter(proxy.uri(), slow_options), client(server.uri());
    ASSERT_TRUE(dlock::wait_until_free(waiter, name, std::chrono::steady_clock::now() + 10s));  // scripts loaded
    const auto scripts_run = [&] { return scripts_run_by(server); };
    const auto run_at_least = [&](long n, std::chrono::seconds within = 20s) { return scripts_run_by(server, n, within); };
    auto lock = client.lock(name, {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle});
    lock.lock();
    const long before = scripts_run();
    proxy.delay_replies(500ms);
    auto freed = std::async(std::launch::async, [&] {
        return dlock::wait_until_free(waiter, name, std::chrono::steady_clock::now() + 30s);
    });
    // Two passes (marks, look), then it sleeps until the lock's release.
    ASSERT_EQ(run_at_least(before + 6), before + 6);
    std::this_thread::sleep_for(700ms);
    ASSERT_EQ(scripts_run(), before + 6);
    lock.unlock();
    // Woken: its marks run (nothing to mark), then the hold is taken.
    ASSERT_EQ(run_at_least(before + 9), before + 9);
    const auto release = take(client);
    const long taken = scripts_run();
    // Its look, and once it found the hold unmarked, its second marks and look:
    // three round trips of 500 ms, well before the hold's lease ends (15 s).
    EXPECT_EQ(run_at_least(taken + 4, 5s), taken + 4) << "the waiter slept after one look";
    std::this_thread::sleep_for(300ms);
    const auto released_at = std::chrono::steady_clock::now();
    release();
    ASSERT_EQ(freed.wait_for(20s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_LT(dlock::test::seconds_since(released_at), 3.0) << "the waiter woke at the lease's end, not at the release";
}

}  // namespace

TEST(WaitUntilFree, APermitGrantedBetweenTheMarksAndTheLookIsHeard) {
    expect_heard_when_taken_in_the_window("window-permit", [](dlock::Client& client) {
        auto sem = std::make_shared<dlock::Semaphore>(client, "window-permit",
                                                      dlock::SemaphoreOptions{.limit = 2, .lease = 15s, .renew = false});
        auto permit = std::make_shared<dlock::Permit>(sem->acquire());
        return std::function<void()>([sem, permit] { permit->release(); });
    });
}

TEST(WaitUntilFree, AReaderGrantedBetweenTheMarksAndTheLookIsHeard) {
    expect_heard_when_taken_in_the_window("window-reader", [](dlock::Client& client) {
        auto rw = std::make_shared<dlock::RwLock>(client, "window-reader", dlock::RwLockOptions{.lease = 15s, .renew = false});
        rw->lock_shared();
        return std::function<void()>([rw] { rw->unlock_shared(); });
    });
}

// wait_until_free's mark of a name held exclusively marks the lock hash
// only, and covers no reader: when the writer's lease ends between the marks
// and the look (a writer that died: nothing is published) and a reader comes
// in, the look finds a reader its marks did not mark, so it marks and looks
// once more. Counted as a mark of the readers, that reader's release, the
// last, published nothing and the waiter slept until the reader's lease
// ended. The waiter's replies come
// 500 ms late (a proxy); a message on the lock's channel wakes it for the
// pass whose mark meets the writer.
TEST(WaitUntilFree, AReaderAfterAWritersLeaseEndedBetweenTheMarksAndTheLookIsHeard) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::ClientOptions slow_options;
    slow_options.command_timeout = 5s;
    dlock::Client waiter(proxy.uri(), slow_options), client(server.uri());
    ASSERT_TRUE(dlock::wait_until_free(waiter, "gap", std::chrono::steady_clock::now() + 10s));  // scripts loaded
    {
        auto warm = client.rw_lock("gap-warm", {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle});
        warm.lock_shared();
        warm.unlock_shared();
    }
    const auto scripts_run = [&] { return scripts_run_by(server); };
    const auto run_at_least = [&](long n) { return scripts_run_by(server, n); };
    const dlock::detail::LockKeys keys("gap");
    auto writer = client.rw_lock("gap", {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle});
    writer.lock();
    const long before = scripts_run();
    proxy.delay_replies(500ms);
    auto freed = std::async(std::launch::async, [&] {
        return dlock::wait_until_free(waiter, "gap", std::chrono::steady_clock::now() + 30s);
    });
    // Two passes (marks, look), then it sleeps until the writer's release.
    ASSERT_EQ(run_at_least(before + 6), before + 6);
    std::this_thread::sleep_for(700ms);
    ASSERT_EQ(scripts_run(), before + 6);
    server.cli({"PUBLISH", std::string(keys.channel()), "wake"});
    // Its mark of the lock hash ran; the writer's lease ends (the hash lives
    // exactly its lease) and a reader comes in before its look.
    ASSERT_EQ(run_at_least(before + 7), before + 7);
    server.cli({"PEXPIRE", keys.lock, "1"});
    std::this_thread::sleep_for(20ms);
    auto reader = client.rw_lock("gap", {.lease = 15s, .renew = false, .ownership = dlock::Ownership::handle});
    reader.lock_shared();
    // The reader's grant, the waiter's mark of the semaphore and its look.
    ASSERT_GE(run_at_least(before + 10), before + 10);
    std::this_thread::sleep_for(2s);
    const auto released_at = std::chrono::steady_clock::now();
    reader.unlock_shared();
    ASSERT_EQ(freed.wait_for(20s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_LT(dlock::test::seconds_since(released_at), 3.0) << "the waiter woke at the reader's lease end, not at its release";
}
