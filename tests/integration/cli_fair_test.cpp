// dlock run --fair and hold --fair: one fair lock across processes, served
// in the order its waiters first found it taken.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using namespace dlock::test::cli;
using dlock::support::eventually;

namespace {
std::string line_of(const std::string& name) { return "dlock:{" + name + "}:line"; }
}  // namespace

// Five runs queue one after another behind a holder; they run in the order
// they arrived, not in the order the server happens to wake them.
TEST(CliFair, RunsAreServedInArrivalOrderAcrossProcesses) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto holder = client.lock("turns");
    holder.lock();
    const auto order = temp_path("order");
    std::vector<Running> runs;
    for (int i = 1; i <= 5; ++i) {
        runs.push_back(start({"--url", server.uri(), "run", "--fair", "--wait", "60s", "turns", "--", "sh", "-c",
                              "echo " + std::to_string(i) + " >> " + order + "; sleep 0.05"}));
        // The next one starts only once this one stands in the line.
        ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", line_of("turns")}) == std::to_string(i); }, 20s))
            << "run " << i << " never took its place";
    }
    holder.unlock();
    for (auto& run : runs) {
        auto finished = finish(run);
        EXPECT_EQ(finished.code, 0) << finished.err;
    }
    EXPECT_EQ(read_file(order), "1\n2\n3\n4\n5\n");
    EXPECT_EQ(server.cli({"EXISTS", line_of("turns")}), "0") << "an empty line is removed";
}

// A fair run and a plain run of one key are one lock: they never overlap.
TEST(CliFair, AFairRunExcludesAPlainRunOfTheSameKey) {
    dlock::support::RedisServer server;
    const auto log = temp_path("log");
    const std::string body = "echo in >> " + log + "; sleep 0.2; echo out >> " + log;
    std::vector<Running> runs;
    for (int i = 0; i < 6; ++i) {
        std::vector<std::string> args{"--url", server.uri(), "run"};
        if (i % 2 == 0) args.push_back("--fair");
        for (std::string word : {"--wait", "60s", "shared-key", "--", "sh", "-c"}) args.push_back(word);
        args.push_back(body);
        runs.push_back(start(args));
    }
    for (auto& run : runs) {
        auto finished = finish(run);
        EXPECT_EQ(finished.code, 0) << finished.err;
    }
    std::string expected;
    for (int i = 0; i < 6; ++i) expected += "in\nout\n";
    EXPECT_EQ(read_file(log), expected) << "two runs overlapped";
}

TEST(CliFair, HoldFairPrintsATokenAndReleasesAtTheEndOfStdin) {
    dlock::support::RedisServer server;
    auto hold = start_with_stdin_open({"--url", server.uri(), "hold", "--fair", "held-fairly"});
    ASSERT_TRUE(eventually([&] { return !read_file(hold.out_path).empty(); }, 20s));
    EXPECT_GT(std::stoull(read_file(hold.out_path)), 0u);
    auto busy = dlock_cli({"--url", server.uri(), "run", "--fair", "--no-wait", "held-fairly", "--", "true"});
    EXPECT_EQ(busy.code, 75) << busy.err;
    auto finished = finish(hold);  // closes stdin
    EXPECT_EQ(finished.code, 0) << finished.err;
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "--fair", "--no-wait", "held-fairly", "--", "true"}).code, 0);
}

TEST(CliFair, FairWithSharedPermitsSeveralKeysOrSeveralServersIsAUsageError) {
    dlock::support::RedisServer server;
    const std::vector<std::vector<std::string>> misuses = {
        {"--url", server.uri(), "run", "--fair", "--shared", "k", "--", "true"},
        {"--url", server.uri(), "run", "--fair", "--permits", "3", "k", "--", "true"},
        {"--url", server.uri(), "run", "--fair", "a", "b", "--", "true"},
        {"--url", server.uri(), "--url", server.uri(), "--url", server.uri(), "run", "--fair", "k", "--", "true"},
    };
    for (const auto& args : misuses) {
        auto finished = dlock_cli(args);
        EXPECT_EQ(finished.code, 64) << finished.err;
        EXPECT_NE(finished.err.find("--fair"), std::string::npos) << finished.err;
    }
    EXPECT_EQ(server.cli({"DBSIZE"}), "0") << "a refused run leaves nothing in Redis";
}
