// `dlock run --permits N` and `dlock status` on a semaphore, through the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace dlock::test::cli;
using namespace std::chrono_literals;

using dlock::test::semaphore_key;

TEST(CliSemaphore, RunHoldsOneOfNPermitsWhileTheCommandRuns) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    Gate gate;
    auto first = start(gated({"--url", url, "run", "--permits", "2", "jobs"}, gate));
    auto second = start(gated({"--url", url, "run", "--permits", "2", "jobs"}, gate));
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"ZCARD", semaphore_key("jobs")}) == "2"; }));
    // The third finds both permits taken.
    auto third = dlock_cli({"--url", url, "run", "--permits", "2", "--no-wait", "jobs", "--", "true"});
    EXPECT_EQ(third.code, 75) << third.err;
    auto status = dlock_cli({"--url", url, "status", "jobs"});
    EXPECT_EQ(status.code, 0) << status.err;
    EXPECT_NE(status.out.find("semaphore, 2 of 2 permits held"), std::string::npos) << status.out;
    auto json = dlock_cli({"--url", url, "status", "--json", "jobs"});
    EXPECT_NE(json.out.find("\"limit\": 2"), std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"holders\": [{\"permit\": "), std::string::npos) << json.out;
    gate.open();
    EXPECT_EQ(finish(first).code, 0);
    EXPECT_EQ(finish(second).code, 0);
    EXPECT_EQ(server.cli({"ZCARD", semaphore_key("jobs")}), "0");
    // The command's exit status is dlock's.
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--permits", "2", "jobs", "--", "sh", "-c", "exit 3"}).code, 3);
    auto free = dlock_cli({"--url", url, "status", "--exit-status", "jobs"});
    EXPECT_EQ(free.code, 1) << free.out << free.err;
}

TEST(CliSemaphore, ABadPermitCountIsAUsageError) {
    dlock::support::RedisServer server;
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "--permits", "0", "jobs", "--", "true"}).code, 64);
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "--permits", "100001", "jobs", "--", "true"}).code, 64);
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "--permits", "-1", "jobs", "--", "true"}).code, 64);
}

TEST(CliSemaphore, PermitsOfSeveralKeysAreAUsageErrorAndTakeNothing) {
    dlock::support::RedisServer server;
    auto several = dlock_cli({"--url", server.uri(), "run", "--permits", "2", "jobs", "other", "--", "true"});
    EXPECT_EQ(several.code, 64) << several.err;
    EXPECT_NE(several.err.find("--permits takes one key"), std::string::npos) << several.err;
    EXPECT_EQ(server.cli({"DBSIZE"}), "0");
}

TEST(CliSemaphore, ALostPermitEndsTheCommandWithTheLostStatus) {
    dlock::support::RedisServer server;
    auto running = start({"--url", server.uri(), "run", "--permits", "1", "--ttl", "300ms", "lost", "--", "sleep", "10"});
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"ZCARD", semaphore_key("lost")}) == "1"; }));
    server.cli({"DEL", semaphore_key("lost")});
    auto done = finish(running);
    EXPECT_EQ(done.code, 79) << done.err;  // exit_lost, as for a lock
    EXPECT_LT(done.took, 5s);
}

// Plain status is one line per holder whatever bytes the semaphore's name or
// a permit id holds: a newline cannot forge another holder.
TEST(CliSemaphore, PlainStatusEscapesControlBytesInTheNameAndPermitIds) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const std::string name = "two\nlines";
    dlock::Semaphore semaphore(client, name, {.limit = 3});
    auto permit = semaphore.try_acquire();
    ASSERT_TRUE(permit);
    client.command({"ZADD", semaphore_key(name), "99999999999999", "evil\n  forged: 1 permit#1"});
    auto f = dlock_cli({"--url", server.uri(), "status", "--key=" + name});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(std::count(f.out.begin(), f.out.end(), '\n'), 3) << f.out;  // the semaphore, then its 2 holders
    EXPECT_EQ(f.out.rfind("two\\u000alines: semaphore, 2 of 3 permits held", 0), 0u) << f.out;
    EXPECT_NE(f.out.find("  evil\\u000a  forged: 1 permit#1: 1 permit, lease "), std::string::npos) << f.out;
}
