// The dlock tool as shell users expect it, through its binary: mistakes told
// as what is wrong and what to do (the nearest option or command, --key= for
// a name that begins with '-', the --help to read), flock's short options,
// usage lines that say what each command takes, connection errors that name
// the server and the fix, and status --json's holder as fields.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "dlock/rw_lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using dlock::support::RedisServer;
using dlock::support::eventually;
using namespace std::chrono_literals;

namespace {

bool says(const Finished& f, const std::string& text) { return f.err.find(text) != std::string::npos; }

}  // namespace

TEST(CliUsage, AnUnknownOptionNamesTheNearestAndTheHelp) {
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "--nowait", "k", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unrecognised option '--nowait'; did you mean '--no-wait'? See 'dlock run --help'")) << f.err;
    f = dlock_cli({"--url", server.uri(), "status", "--jsno", "k"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "did you mean '--json'? See 'dlock status --help'")) << f.err;
    f = dlock_cli({"-V"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unrecognised option '-V'; did you mean '--version'? See 'dlock --help'")) << f.err;
    // A global option's typo, before the command.
    f = dlock_cli({"--ulr", server.uri(), "status", "k"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unrecognised option '--ulr'; did you mean '--url'?")) << f.err;
}

TEST(CliUsage, AnUnknownCommandNamesTheNearest) {
    auto f = dlock_cli({"rn", "k", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unknown command 'rn'; did you mean 'run'? See 'dlock --help'")) << f.err;
    f = dlock_cli({"frobnicate"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unknown command 'frobnicate'; the commands are run, hold, status")) << f.err;
    f = dlock_cli({});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "a command is required")) << f.err;
}

TEST(CliUsage, ANameThatBeginsWithADashIsPointedToKeyEquals) {
    RedisServer server;
    const auto marker = temp_path("ran");
    for (const char* name : {"-weird", "-nightly", "-sh"}) {
        auto f = dlock_cli({"--url", server.uri(), "run", name, "--", "sh", "-c", "echo ran > " + marker});
        EXPECT_EQ(f.code, 64) << name << ": " << f.out << f.err;
        EXPECT_TRUE(says(f, std::string("--key=") + name)) << name << ": " << f.err;
    }
    auto f = dlock_cli({"--url", server.uri(), "status", "-weird"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unrecognised option '-weird'; a lock name that begins with '-' goes in --key=-weird. "
                        "See 'dlock status --help'"))
        << f.err;
    EXPECT_EQ(read_file(marker), "") << "a name read as options ran the command";
}

TEST(CliUsage, FlocksShortOptionsMeanWhatTheyMeanToFlock) {
    RedisServer server;
    const auto url = server.uri();
    dlock::Client holder(url);
    auto lock = holder.rw_lock("cron");
    lock.lock();
    // -n: one attempt, exit 75 when held; -E CODE: that status instead.
    auto f = dlock_cli({"--url", url, "run", "-n", "cron", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    f = dlock_cli({"--url", url, "run", "-n", "-E", "0", "cron", "--", "true"});
    EXPECT_EQ(f.code, 0) << f.err;
    f = dlock_cli({"--url", url, "hold", "-n", "-E", "3", "cron"});
    EXPECT_EQ(f.code, 3) << f.err;
    // -w SECONDS, a number as flock takes it (with a fraction too).
    f = dlock_cli({"--url", url, "run", "-w", "0.4", "cron", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    EXPECT_GE(f.took, 350ms);
    f = dlock_cli({"--url", url, "run", "-w", "soon", "cron", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "-w takes SECONDS")) << f.err;
    EXPECT_EQ(dlock_cli({"--url", url, "run", "-w", "1", "--wait", "1s", "cron", "--", "true"}).code, 64);
    lock.unlock();
    // -s: the read side, beside another reader.
    lock.lock_shared();
    f = dlock_cli({"--url", url, "run", "-s", "-n", "cron", "--", "true"});
    EXPECT_EQ(f.code, 0) << f.err;
    f = dlock_cli({"--url", url, "run", "-n", "cron", "--", "true"});
    EXPECT_EQ(f.code, 75) << "without -s it waits for the reader";
    lock.unlock_shared();
    // -ns: short flags together.
    EXPECT_EQ(dlock_cli({"--url", url, "run", "-ns", "cron", "--", "true"}).code, 0);
}

TEST(CliUsage, UsageLinesSayWhatEachCommandTakes) {
    auto f = dlock_cli({"run", "--help"});
    EXPECT_NE(f.out.find("Usage: dlock run [OPTIONS] KEY... (-- COMMAND [ARG...] | -c 'SHELL COMMAND')"),
              std::string::npos)
        << f.out;
    f = dlock_cli({"hold", "--help"});
    EXPECT_NE(f.out.find("Usage: dlock hold [OPTIONS] KEY\n"), std::string::npos) << f.out;
    for (const char* command : {"run", "hold", "status", "wait-free", "release"}) {
        f = dlock_cli({command, "--help"});
        EXPECT_EQ(f.out.find("[key...]"), std::string::npos) << command << ":\n" << f.out;
        EXPECT_NE(f.out.find(std::string("Usage: dlock ") + command), std::string::npos) << f.out;
    }
    // The README's synopsis has every option of run and demo.
    const auto readme = read_file(DLOCK_TOOL_SOURCES "/../../README.md");
    for (const char* option : {"--metrics-file", "--metrics-job", "demo [--processes N] [--threads N] [--bonuses N] "
                                                                  "[--json] [--metrics]"})
        EXPECT_NE(readme.find(option), std::string::npos) << option;
}

TEST(CliUsage, APortOutOfRangeIsSaidSo) {
    auto f = dlock_cli({"--url", "redis://127.0.0.1:99999", "status", "k"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "port 99999 is out of range (1 to 65535)")) << f.err;
    EXPECT_FALSE(says(f, "not a number")) << f.err;
    f = dlock_cli({"--url", "redis://127.0.0.1:65536", "status", "k"});
    EXPECT_TRUE(says(f, "port 65536 is out of range")) << f.err;
}

TEST(CliUsage, ConnectionErrorsNameTheServerAndTheFix) {
    const auto port = std::to_string(dlock::support::free_port());
    auto f = dlock_cli({"--url", "redis://127.0.0.1:" + port, "--connect-timeout", "300ms", "status", "k"});
    EXPECT_EQ(f.code, 69);
    EXPECT_TRUE(says(f, "127.0.0.1:" + port)) << f.err;
    EXPECT_TRUE(says(f, "connection refused")) << f.err;
    EXPECT_TRUE(says(f, "is redis-server running")) << f.err;
    EXPECT_FALSE(says(f, "Connection refused: connection refused")) << f.err;
    f = dlock_cli({"--url", "redis://127.0.0.1:" + port, "--connect-timeout", "300ms", "run", "-n", "k", "--",
                   "true"});
    EXPECT_EQ(f.code, 69);
    EXPECT_TRUE(says(f, "127.0.0.1:" + port)) << f.err;

    // A server that wants a password, given none: not "wrong password".
    RedisServer server({.password = "s3cret"});
    const auto bare = "redis://127.0.0.1:" + std::to_string(server.port());
    f = dlock_cli({"--url", bare, "status", "k"});
    EXPECT_EQ(f.code, 69);
    EXPECT_TRUE(says(f, "127.0.0.1:" + std::to_string(server.port()))) << f.err;
    EXPECT_TRUE(says(f, "requires a password and none was given")) << f.err;
    EXPECT_TRUE(says(f, "--password-file")) << f.err;
    EXPECT_FALSE(says(f, "wrong password")) << f.err;
    // Given but wrong: that is what it says.
    f = dlock_cli({"--url", bare, "status", "k"}, {{"DLOCK_PASSWORD", "nope"}});
    EXPECT_EQ(f.code, 69);
    EXPECT_TRUE(says(f, "wrong password")) << f.err;
}

TEST(CliUsage, StatusJsonGivesTheHoldersHostPidAndThreadAsFields) {
    RedisServer server;
    auto holding = start_with_stdin_open({"--url", server.uri(), "hold", "fields"});
    ASSERT_TRUE(eventually([&] { return held(server, "fields"); }));
    auto f = dlock_cli({"--url", server.uri(), "status", "--json", "fields"});
    EXPECT_EQ(f.code, 0) << f.err;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    EXPECT_NE(f.out.find("\"holder_host\": \"" + std::string(host) + "\""), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("\"holder_pid\": " + std::to_string(holding.pid) + ","), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("\"holder_thread\": "), std::string::npos) << f.out;
    EXPECT_EQ(f.out.find("\"holder_thread\": null"), std::string::npos) << f.out;
    // The label stays as it was, for those who read it.
    EXPECT_NE(f.out.find("\"holder\": \"host=" + std::string(host) + " pid="), std::string::npos) << f.out;
    EXPECT_EQ(finish(holding).code, 0);
    f = dlock_cli({"--url", server.uri(), "status", "--json", "fields"});
    EXPECT_NE(f.out.find("\"holder_host\": null, \"holder_pid\": null, \"holder_thread\": null"), std::string::npos)
        << f.out;
}

TEST(CliUsage, ValuesThatOnlyLookLikeNumbersOrNamesAreRefusedPlainly) {
    RedisServer server;
    const auto url = server.uri();
    // -w SECONDS is decimal digits: hex, exponents, inf and nan are refused,
    // and the --key= hint is for words that begin with '-' only.
    for (const char* value : {"0x10", "1e99", "nan", "inf"}) {
        auto f = dlock_cli({"--url", url, "run", "-w", value, "k", "--", "true"});
        EXPECT_EQ(f.code, 64) << value << ": " << f.err;
        EXPECT_TRUE(says(f, "-w takes SECONDS")) << value << ": " << f.err;
        EXPECT_FALSE(says(f, "--key=")) << value << ": " << f.err;
    }
    // A single unknown letter gets no guess (-x is not a typo of -h).
    auto f = dlock_cli({"--url", url, "run", "-x", "k", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_TRUE(says(f, "unrecognised option '-x'")) << f.err;
    EXPECT_FALSE(says(f, "did you mean")) << f.err;
    // An empty --metrics-file is a mistake, not "no file".
    f = dlock_cli({"--url", url, "run", "--metrics-file", "", "k", "--", "true"});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_TRUE(says(f, "--metrics-file")) << f.err;
}

TEST(CliUsage, MetricsLabelsAreUtf8WhateverBytesTheNameHolds) {
    RedisServer server;
    const auto file = temp_path("job.prom");
    auto f = dlock_cli({"--url", server.uri(), "run", "--metrics-file", file, "--metrics-job", "bad\xff\xfe",
                        "k\xc3", "--", "true"});
    ASSERT_EQ(f.code, 0) << f.err;
    const auto text = read_file(file);
    EXPECT_NE(text.find("job=\"bad\xEF\xBF\xBD\xEF\xBF\xBD\""), std::string::npos) << text;
    EXPECT_NE(text.find("key=\"k\xEF\xBF\xBD\""), std::string::npos) << text;
    EXPECT_EQ(text.find('\xff'), std::string::npos) << text;
}
