// status, wait-free, release --force and list see every kind a name can be
// held as (a lock, readers, permits), and one name is one resource: a run of
// another kind is refused with exit 65, through the binary.
#include <gtest/gtest.h>

#include <thread>

#include "cli_runner.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using namespace std::chrono_literals;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A holder whose lease (30 s) is far longer than the test waits for it.
Running hold_for_long(const std::string& url, std::vector<std::string> how, const std::string& key) {
    std::vector<std::string> args{"--url", url, "run"};
    args.insert(args.end(), how.begin(), how.end());
    args.insert(args.end(), {"--ttl", "30s", key, "--", "sleep", "60"});
    return start(args);
}

bool status_held(const std::string& url, const std::string& key) {
    return dlock_cli({"--url", url, "status", "--exit-status", key}).code == 0;
}

}  // namespace

TEST(CliKinds, OperatorCommandsSeeAReadersHold) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto reader = hold_for_long(url, {"--shared"}, "rw2");
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"EXISTS", "dlock:{rw2}:readers"}) == "1"; }));
    auto status = dlock_cli({"--url", url, "status", "--exit-status", "rw2"});
    EXPECT_EQ(status.code, 0) << status.out;
    EXPECT_TRUE(has(status.out, "rw2: read-shared by 1 reader")) << status.out;
    EXPECT_TRUE(has(status.out, "  reader ")) << status.out;
    auto json = dlock_cli({"--url", url, "status", "--json", "rw2"});
    EXPECT_TRUE(has(json.out, "\"held\": true")) << json.out;
    EXPECT_TRUE(has(json.out, "\"kind\": \"shared\"")) << json.out;
    EXPECT_TRUE(has(json.out, "\"side\": \"reader\"")) << json.out;
    auto list = dlock_cli({"--url", url, "list", "--json"});
    EXPECT_TRUE(has(list.out, "{\"key\": \"rw2\", \"held\": true")) << list.out;
    auto wait = dlock_cli({"--url", url, "wait-free", "--timeout", "500ms", "rw2"});
    EXPECT_EQ(wait.code, 1) << wait.err;
    // Broken, and the reader hears at once: its run ends with the lost
    // status long before its 30 s lease would have run out.
    auto release = dlock_cli({"--url", url, "release", "--force", "rw2"});
    EXPECT_EQ(release.code, 0) << release.out << release.err;
    EXPECT_TRUE(has(release.out, "held by reader ")) << release.out;
    auto ended = finish(reader);
    EXPECT_EQ(ended.code, 79) << ended.err;
    EXPECT_LT(ended.took, 15s);
    EXPECT_EQ(dlock_cli({"--url", url, "status", "--exit-status", "rw2"}).code, 1);
}

TEST(CliKinds, OperatorCommandsSeeAPermitAndItsHolderHearsTheRelease) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto holder = hold_for_long(url, {"--permits", "1"}, "s1");
    ASSERT_TRUE(dlock::support::eventually([&] { return status_held(url, "s1"); }));
    auto list = dlock_cli({"--url", url, "list"});
    EXPECT_TRUE(has(list.out, "s1: semaphore, 1 of 1 permit held")) << list.out;
    auto wait = dlock_cli({"--url", url, "wait-free", "--timeout", "500ms", "s1"});
    EXPECT_EQ(wait.code, 1) << wait.err;
    // wait-free hears the release (a permit's release is not a lock's).
    auto waiter = start({"--url", url, "wait-free", "--timeout", "20s", "s1"});
    std::this_thread::sleep_for(300ms);  // to be waiting when the release comes
    auto release = dlock_cli({"--url", url, "release", "--force", "s1"});
    EXPECT_EQ(release.code, 0) << release.out << release.err;
    EXPECT_TRUE(has(release.out, "held by permit ")) << release.out;
    auto ended = finish(holder);
    EXPECT_EQ(ended.code, 79) << ended.err;
    EXPECT_LT(ended.took, 15s);
    auto freed = finish(waiter);
    EXPECT_EQ(freed.code, 0) << freed.err;
    EXPECT_LT(freed.took, 15s);
}

TEST(CliKinds, BreakingSeveralHoldsNeedsAllOrOneHolder) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto first = hold_for_long(url, {"--permits", "2"}, "pool");
    auto second = hold_for_long(url, {"--permits", "2"}, "pool");
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"ZCARD", "dlock:sem:{pool}"}) == "2"; }));
    auto refused = dlock_cli({"--url", url, "release", "--force", "pool"});
    EXPECT_EQ(refused.code, 64) << refused.err;
    EXPECT_TRUE(has(refused.err, "pool has 2 holds")) << refused.err;
    EXPECT_TRUE(has(refused.err, "--all")) << refused.err;
    EXPECT_EQ(server.cli({"ZCARD", "dlock:sem:{pool}"}), "2") << "a refused release broke something";
    auto all = dlock_cli({"--url", url, "release", "--force", "--all", "pool"});
    EXPECT_EQ(all.code, 0) << all.err;
    EXPECT_EQ(finish(first).code, 79);
    EXPECT_EQ(finish(second).code, 79);
    EXPECT_EQ(dlock_cli({"--url", url, "release", "--force", "--all", "--holder", "x", "pool"}).code, 64);
}

TEST(CliKinds, ALockRunOnASemaphoreIsRefusedWithWhatTheNameIs) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto holder = hold_for_long(url, {"--permits", "1"}, "s1");
    ASSERT_TRUE(dlock::support::eventually([&] { return status_held(url, "s1"); }));
    auto lock = dlock_cli({"--url", url, "run", "--no-wait", "s1", "--", "true"});
    EXPECT_EQ(lock.code, 65) << lock.err;
    EXPECT_TRUE(has(lock.err, "s1 is a semaphore with 1 permit; use --permits or another name")) << lock.err;
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--wait", "5s", "--shared", "s1", "--", "true"}).code, 65);
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--no-wait", "--fair", "s1", "--", "true"}).code, 65);
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--no-wait", "s1", "other", "--", "true"}).code, 65);
    // The other way round: a semaphore on a name held as a lock.
    auto locked = hold_for_long(url, {}, "l1");
    ASSERT_TRUE(dlock::support::eventually([&] { return status_held(url, "l1"); }));
    auto permits = dlock_cli({"--url", url, "run", "--no-wait", "--permits", "1", "l1", "--", "true"});
    EXPECT_EQ(permits.code, 65) << permits.err;
    EXPECT_TRUE(has(permits.err, "l1 is a lock, held by ")) << permits.err;
    // Readers: a fair lock does not wait for them.
    auto reader = hold_for_long(url, {"--shared"}, "r1");
    ASSERT_TRUE(dlock::support::eventually([&] { return status_held(url, "r1"); }));
    auto fair = dlock_cli({"--url", url, "run", "--no-wait", "--fair", "r1", "--", "true"});
    EXPECT_EQ(fair.code, 65) << fair.err;
    EXPECT_TRUE(has(fair.err, "r1 is read-shared by 1 reader")) << fair.err;
    // The write side waits for them, as ever.
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--no-wait", "r1", "--", "true"}).code, 75);
    for (auto* run : {&holder, &locked, &reader}) kill(run->pid, SIGTERM);
    for (auto* run : {&holder, &locked, &reader}) finish(*run);
}

TEST(CliKinds, APermitsRunWithAnotherLimitIsRefusedUnlessItSetsTheLimit) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto holder = hold_for_long(url, {"--permits", "1"}, "s1");
    ASSERT_TRUE(dlock::support::eventually([&] { return status_held(url, "s1"); }));
    auto other = dlock_cli({"--url", url, "run", "--no-wait", "--permits", "2", "s1", "--", "true"});
    EXPECT_EQ(other.code, 65) << other.err;
    EXPECT_TRUE(has(other.err, "s1 is a semaphore with 1 permit, not 2; use --permits 1, or --set-limit")) << other.err;
    auto set = dlock_cli({"--url", url, "run", "--no-wait", "--permits", "2", "--set-limit", "s1", "--", "true"});
    EXPECT_EQ(set.code, 0) << set.err;
    EXPECT_EQ(server.cli({"HGET", "dlock:sem:{s1}:state", "limit"}), "2");
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--set-limit", "s1", "--", "true"}).code, 64);
    kill(holder.pid, SIGTERM);
    finish(holder);
}
