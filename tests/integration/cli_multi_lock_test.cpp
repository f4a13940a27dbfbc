// `dlock run KEY1 KEY2 ... -- COMMAND`: a multi-lock from the command line,
// end to end through the binary against a real server.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

using namespace dlock::test::cli;
using dlock::support::eventually;

namespace {

// "NAME=VALUE" lines into a map.
std::map<std::string, std::string> variables(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
}

std::string last_token(const dlock::support::RedisServer& server, const std::string& key) {
    return server.cli({"HGET", "dlock:{" + key + "}:fence", "token"});
}

}  // namespace

TEST(CliMultiLock, EveryKeyAndItsTokenReachTheCommandInTheOrderGiven) {
    dlock::support::RedisServer server;
    // Left by an outer `dlock run`: none of it may reach the command.
    const Environment outer = {{"DLOCK_KEY", "outer"}, {"DLOCK_FENCING_TOKEN", "1"}, {"DLOCK_KEY_9", "stale"},
                               {"DLOCK_FENCING_TOKEN_9", "2"}, {"DLOCK_KEY_COUNT", "9"}};
    auto f = dlock_cli({"--url", server.uri(), "run", "beta", "alpha", "--key", "gamma", "--key", "alpha", "--", "sh",
                        "-c", "env | grep '^DLOCK_'; echo \"single=${DLOCK_KEY-unset}/${DLOCK_FENCING_TOKEN-unset}\""},
                       outer);
    ASSERT_EQ(f.code, 0) << f.err;
    auto env = variables(f.out);
    EXPECT_EQ(env["DLOCK_KEY_COUNT"], "3") << f.out;
    EXPECT_EQ(env["DLOCK_KEY_1"], "beta");
    EXPECT_EQ(env["DLOCK_KEY_2"], "alpha");
    EXPECT_EQ(env["DLOCK_KEY_3"], "gamma");
    EXPECT_EQ(env["DLOCK_FENCING_TOKEN_1"], last_token(server, "beta"));
    EXPECT_EQ(env["DLOCK_FENCING_TOKEN_2"], last_token(server, "alpha"));
    EXPECT_EQ(env["DLOCK_FENCING_TOKEN_3"], last_token(server, "gamma"));
    EXPECT_EQ(env.count("DLOCK_KEY_9"), 0u);
    EXPECT_EQ(env.count("DLOCK_FENCING_TOKEN_9"), 0u);
    EXPECT_EQ(env["single"], "unset/unset") << "one key's variables are not set for several keys";
    for (const auto& key : {"alpha", "beta", "gamma"}) EXPECT_FALSE(held(server, key)) << key;

    // One key: the single-key variables as before, and the indexed ones too.
    f = dlock_cli({"--url", server.uri(), "run", "--key", "solo", "--", "sh", "-c", "env | grep '^DLOCK_'"}, outer);
    ASSERT_EQ(f.code, 0) << f.err;
    env = variables(f.out);
    EXPECT_EQ(env["DLOCK_KEY"], "solo");
    EXPECT_EQ(env["DLOCK_FENCING_TOKEN"], last_token(server, "solo"));
    EXPECT_EQ(env["DLOCK_KEY_COUNT"], "1");
    EXPECT_EQ(env["DLOCK_FENCING_TOKEN_1"], env["DLOCK_FENCING_TOKEN"]);
}

TEST(CliMultiLock, AllKeysAreHeldWhileTheCommandRunsAndFreedAfter) {
    dlock::support::RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--json-events", "k2", "k1", "k3", "--", "sleep", "0.5"});
    EXPECT_TRUE(eventually([&] { return held(server, "k1") && held(server, "k2") && held(server, "k3"); }));
    auto f = finish(run);
    EXPECT_EQ(f.code, 0) << f.err;
    for (const auto& key : {"k1", "k2", "k3"}) EXPECT_FALSE(held(server, key)) << key;
    EXPECT_NE(f.err.find("\"event\": \"acquired\", \"keys\": [\"k2\", \"k1\", \"k3\"], \"fencing_tokens\": {\"k1\": "),
              std::string::npos)
        << f.err;
    EXPECT_NE(f.err.find("\"event\": \"released\""), std::string::npos) << f.err;
}

TEST(CliMultiLock, OneBusyKeyMeansNoneIsTaken) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto busy = client.lock("m");
    busy.lock();
    auto f = dlock_cli({"--url", server.uri(), "-v", "run", "--no-wait", "z", "m", "a", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    EXPECT_NE(f.err.find("z, m, a are not all free"), std::string::npos) << f.err;
    EXPECT_FALSE(held(server, "a"));
    EXPECT_FALSE(held(server, "z"));
    f = dlock_cli({"--url", server.uri(), "run", "--wait", "300ms", "a", "m", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    EXPECT_GE(f.took, 300ms);
    EXPECT_LT(f.took, 3s + start_cost());
    EXPECT_FALSE(held(server, "a"));
    // Freed while waiting: the whole set is taken.
    auto waiting = start({"--url", server.uri(), "run", "--wait", "5s", "a", "m", "--", "true"});
    EXPECT_TRUE(eventually([&] { return held(server, "a"); })) << "holds a while it waits for m";
    busy.unlock();
    EXPECT_EQ(finish(waiting).code, 0);
}

// Runs listing the keys in opposite orders, each doing an unlocked
// read-modify-write on a file guarded by both keys: none deadlocks, none
// overlaps, no update is lost.
TEST(CliMultiLock, OppositeOrdersNeverDeadlockNorOverlap) {
    dlock::support::RedisServer server;
    auto counter = temp_path("counter"), inside = temp_path("inside");
    std::ofstream(counter) << "0\n";
    // The marker file exists only while someone is inside; finding it is an overlap.
    std::string script = "[ -e " + inside + " ] && echo overlap >&2; touch " + inside + "; n=$(cat " + counter +
                         "); sleep 0.02; echo $((n+1)) > " + counter + "; rm " + inside;
    std::vector<Running> runs;
    for (int i = 0; i < 12; ++i) {
        std::vector<std::string> keys = i % 3 == 0 ? std::vector<std::string>{"left", "right"}
                                        : i % 3 == 1 ? std::vector<std::string>{"right", "left"}
                                                     : std::vector<std::string>{"right", "middle", "left"};
        std::vector<std::string> args{"--url", server.uri(), "run", "--wait", "60s"};
        args.insert(args.end(), keys.begin(), keys.end());
        args.insert(args.end(), {"--", "sh", "-c", script});
        runs.push_back(start(args));
    }
    for (auto& r : runs) {
        auto f = finish(r);
        EXPECT_EQ(f.code, 0) << f.err;
        EXPECT_EQ(f.err.find("overlap"), std::string::npos) << f.err;
    }
    EXPECT_EQ(read_file(counter), "12\n");
}

TEST(CliMultiLock, LosingOneKeyStopsTheCommandAndReleasesTheRest) {
    dlock::support::RedisServer server;
    auto run = start({"--url", server.uri(), "run", "p", "q", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "p") && held(server, "q"); }));
    dlock::Client client(server.uri());
    ASSERT_TRUE(dlock::force_release(client, "q").has_value());
    auto f = finish(run);
    EXPECT_EQ(f.code, 79) << f.err;
    EXPECT_LT(f.took, 10s);
    EXPECT_NE(f.err.find("the lock on p, q was lost: "), std::string::npos) << f.err;
    EXPECT_FALSE(held(server, "p")) << "the key still held is released at the end";
}

TEST(CliMultiLock, UsageErrors) {
    dlock::support::RedisServer server;
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"run", "a", "", "--", "true"},
             {"run", "a", "--key", "", "--", "true"},
             {"run", "--", "true"},
             {"hold", "a", "b"},
             {"--url", server.uri(), "--url", server.uri(), "run", "a", "b", "--", "true"}}) {
        args.insert(args.begin(), {"--url", server.uri()});
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << f.err;
        EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
    }
    auto f = dlock_cli({"--url", server.uri(), "hold", "a", "b"});
    EXPECT_NE(f.err.find("one KEY only"), std::string::npos) << f.err;
    // Three URLs with one URL from the loop above would be three masters: the
    // refusal names the multi-lock, not the number of masters.
    f = dlock_cli({"--url", server.uri(), "--url", server.uri(), "--url", server.uri(), "run", "a", "b", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_NE(f.err.find("multi-lock"), std::string::npos) << f.err;
}
