// The dlock tool in the shell, cron and systemd: URLs, option placement,
// credentials, durations, -c, hold, wait-free, list, status --exit-status,
// the waiting line, JSON for any key bytes. Through the
// binary, against real servers.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using namespace dlock::test::cli;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

long count_lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

// The number after "name": in a flat JSON object.
long long json_number(const std::string& json, const std::string& name) {
    const auto at = json.find("\"" + name + "\": ");
    if (at == std::string::npos) return -1;
    return std::stoll(json.substr(at + name.size() + 4));
}

}  // namespace

TEST(CliConventions, AnEmptyUrlOrListElementIsAUsageErrorNotTheDefaultServer) {
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"--url", "", "run", "k", "--", "true"},
             {"--url", ",", "status", "k"},
             {"--url", "redis://127.0.0.1:1,,redis://127.0.0.1:2", "status", "k"},
             {"--url", "redis://127.0.0.1:1,", "status", "k"}}) {
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[1] << ": " << f.err;
        EXPECT_NE(f.err.find("empty"), std::string::npos) << f.err;
        EXPECT_EQ(count_lines(f.err), 1) << f.err;
    }
    auto f = dlock_cli({"status", "k"}, {{"DLOCK_URL", "redis://127.0.0.1:1,"}});
    EXPECT_EQ(f.code, 64) << f.err;
    // Set but empty, as "DLOCK_URL=$UNSET" leaves it: an empty URL, not the default server.
    f = dlock_cli({"run", "--no-wait", "nightly", "--", "true"}, {{"DLOCK_URL", ""}});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("empty"), std::string::npos) << f.err;
    f = dlock_cli({"status", "k"}, {{"REDIS_URL", ""}});
    EXPECT_EQ(f.code, 64) << f.err;
}

// "--wait $UNSET" in a crontab: an empty value given is a usage error, never
// the default (which for --wait and --timeout is "forever").
TEST(CliConventions, AnEmptyDurationOrPasswordFileIsAUsageError) {
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"--url", "redis://127.0.0.1:1", "run", "--wait", "", "k", "--", "true"},
             {"--url", "redis://127.0.0.1:1", "hold", "--wait", "", "k"},
             {"--url", "redis://127.0.0.1:1", "wait-free", "--timeout", "", "k"},
             {"--url", "redis://127.0.0.1:1", "--password-file", "", "status", "k"}}) {
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[2] << " " << args[3] << ": " << f.err;
    }
}

TEST(CliConventions, ARedlocksStatusNeverShowsThePassword) {
    const std::string urls = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
    for (bool json : {false, true}) {
        std::vector<std::string> args{"--url", urls, "--connect-timeout", "200ms", "status", "k"};
        if (json) args.push_back("--json");
        auto f = dlock_cli(args, {{"DLOCK_PASSWORD", "TOPSECRET"}});
        EXPECT_EQ(f.out.find("TOPSECRET"), std::string::npos) << f.out;
        EXPECT_EQ(f.err.find("TOPSECRET"), std::string::npos) << f.err;
        EXPECT_NE(f.out.find("***"), std::string::npos) << f.out;
    }
    auto f = dlock_cli({"--url", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:1", "status", "k"},
                       {{"DLOCK_PASSWORD", "TOPSECRET"}});
    EXPECT_EQ(f.err.find("TOPSECRET"), std::string::npos) << f.err;
}

TEST(CliConventions, GlobalOptionsMayComeAfterTheCommand) {
    RedisServer server;
    auto f = dlock_cli({"run", "k", "--url", server.uri(), "--connect-timeout", "1s", "--", "sh", "-c",
                        "echo $DLOCK_KEY"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out, "k\n");
    f = dlock_cli({"status", "k", "--json", "--url", server.uri()});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out.rfind("{\"key\": \"k\"", 0), 0u) << f.out;
    // Unexpected arguments are named in the order given.
    f = dlock_cli({"--url", server.uri(), "status", "k", "one", "two"});
    EXPECT_EQ(f.code, 64);
    EXPECT_NE(f.err.find("one two"), std::string::npos) << f.err;
}

TEST(CliConventions, AMasterRepeatedInOneUrlIsNamedAsSuch) {
    // No server is needed: the URL is refused before any connection.
    auto f = dlock_cli({"--url", "redis://127.0.0.1:7,127.0.0.1:7", "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("the master 127.0.0.1:7 is named twice"), std::string::npos) << f.err;
    EXPECT_EQ(f.err.find("IPv6"), std::string::npos) << f.err;
    f = dlock_cli({"--url", "redis://127.0.0.1:7,127.0.0.1:8", "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("redis://127.0.0.1:7,redis://127.0.0.1:8"), std::string::npos) << f.err;
}

TEST(CliConventions, DashHIsHelpButAHostAfterItIsAUsageError) {
    for (const char* host : {"localhost", "redis.internal", "10.0.0.7", "6379", "127.0.0.1:6379", "redis", "redis1"}) {
        auto f = dlock_cli({"-h", host, "run", "k", "--", "true"});
        EXPECT_EQ(f.code, 64) << host << ": " << f.err;
        EXPECT_NE(f.err.find("--url redis://"), std::string::npos) << f.err;
        EXPECT_TRUE(f.out.empty()) << "no help printed";
    }
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"--help", "myredis", "status", "k"}, {"status", "-h", "myredis"}}) {
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[0] << " " << args[1] << ": " << f.err;
    }
    auto help = dlock_cli({"-h"});
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("Exit status"), std::string::npos);
    EXPECT_EQ(dlock_cli({"-h", "run"}).code, 0);  // help for a command
    // What follows -- is the command's own: its -h is not dlock's.
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "k", "--", "sh", "-c", "exit 0", "-h", "myhost"});
    EXPECT_EQ(f.code, 0) << f.err;
}

TEST(CliConventions, EveryCommandHasHelpWithExitCodesAndExamples) {
    for (const char* command : {"run", "hold", "status", "wait-free", "list", "release", "demo"}) {
        auto f = dlock_cli({command, "--help"});
        EXPECT_EQ(f.code, 0) << command;
        EXPECT_NE(f.out.find("Exit status"), std::string::npos) << command << "\n" << f.out;
        EXPECT_NE(f.out.find("Example"), std::string::npos) << command << "\n" << f.out;
    }
}

TEST(CliConventions, TheManPageAndCompletionsKnowEveryCommandAndOption) {
    const auto man = read_file(DLOCK_TOOL_SOURCES "/dlock.1");
    const auto bash = read_file(DLOCK_TOOL_SOURCES "/completion/dlock.bash");
    const auto zsh = read_file(DLOCK_TOOL_SOURCES "/completion/_dlock");
    // Every option --help lists, for the tool and each command.
    std::vector<std::string> helps{dlock_cli({"--help"}).out};
    for (const char* command : {"run", "hold", "status", "wait-free", "list", "release", "demo"}) {
        EXPECT_NE(man.find(".B dlock " + std::string(command == std::string("wait-free") ? "wait\\-free" : command)),
                  std::string::npos)
            << command;
        EXPECT_NE(bash.find(command), std::string::npos) << command;
        EXPECT_NE(zsh.find(std::string("'") + command + ":"), std::string::npos) << command;
        helps.push_back(dlock_cli({command, "--help"}).out);
    }
    for (const auto& help : helps) {
        for (std::size_t at = help.find("  --"); at != std::string::npos; at = help.find("  --", at + 1)) {
            const auto end = help.find_first_of(" ,=\n", at + 2);
            const std::string option = help.substr(at + 2, end - at - 2);
            if (option == "--help" || option == "--version") continue;
            std::string escaped;
            for (char c : option) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
            EXPECT_NE(man.find(escaped), std::string::npos) << option << " is not in dlock.1";
            EXPECT_NE(bash.find(option), std::string::npos) << option << " is not in the bash completion";
            EXPECT_NE(zsh.find(option), std::string::npos) << option << " is not in the zsh completion";
        }
    }
    for (const char* code : {"\n.B 64\n", "\n.B 69\n", "\n.B 75\n", "\n.B 79\n"})
        EXPECT_NE(man.find(code), std::string::npos) << code;
}

TEST(CliConventions, PasswordAndUserFromAFileOrTheEnvironment) {
    RedisServer server({.password = "s3cret:@/x",
                        .acl_users = {{"worker", "on", ">w0rker", "~*", "&*", "+@all"}}});
    const std::string plain = "redis://127.0.0.1:" + std::to_string(server.port());
    const auto file = temp_path("password");
    std::ofstream(file) << "s3cret:@/x\n";
    auto f = dlock_cli({"--url", plain, "--password-file", file, "status", "k"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(dlock_cli({"--url", plain, "status", "k"}, {{"DLOCK_PASSWORD", "s3cret:@/x"}}).code, 0);
    EXPECT_EQ(dlock_cli({"--url", plain, "status", "k"}, {{"REDISCLI_AUTH", "s3cret:@/x"}}).code, 0);
    f = dlock_cli({"--url", plain, "status", "k"}, {{"REDISCLI_AUTH", "wrong"}});
    EXPECT_EQ(f.code, 69);
    EXPECT_NE(f.err.find("authentication"), std::string::npos) << f.err;
    f = dlock_cli({"--url", plain, "--user", "worker", "run", "k", "--", "true"}, {{"DLOCK_PASSWORD", "w0rker"}});
    EXPECT_EQ(f.code, 0) << f.err;
    f = dlock_cli({"--url", plain, "run", "k", "--", "true"}, {{"DLOCK_USER", "worker"}, {"DLOCK_PASSWORD", "w0rker"}});
    EXPECT_EQ(f.code, 0) << f.err;
    f = dlock_cli({"--url", plain, "status", "k"}, {{"DLOCK_USER", "worker"}, {"DLOCK_PASSWORD", "s3cret:@/x"}});
    EXPECT_EQ(f.code, 69) << "the user is used: " << f.err;
    // Mistakes are usage errors.
    EXPECT_EQ(dlock_cli({"--url", plain, "--user", "worker", "status", "k"}).code, 64);
    EXPECT_EQ(dlock_cli({"--url", plain, "--password-file", "/no/such/file", "status", "k"}).code, 64);
    const auto empty = temp_path("empty");
    std::ofstream(empty) << "\n";
    EXPECT_EQ(dlock_cli({"--url", plain, "--password-file", empty, "status", "k"}).code, 64);
}

TEST(CliConventions, DurationsWithDecimalsAndCompoundForms) {
    RedisServer server;
    for (auto [text, ms] : std::vector<std::pair<std::string, long long>>{
             {"1.5s", 1500}, {"1m30s", 90'000}, {"2h45m", 9'900'000}, {"1d", 86'400'000}, {"0.25", 250}}) {
        // Closing its stdin (a pipe) lets go.
        auto f = finish(start_with_stdin_open({"--url", server.uri(), "hold", "--json", "--ttl", text, "k"}));
        EXPECT_EQ(f.code, 0) << text << ": " << f.err;
        EXPECT_EQ(json_number(f.out, "lease_ms"), ms) << text << ": " << f.out;
    }
    for (const char* bad : {"1e100", "1.5x", "30s1m", "1m30"}) {
        auto f = dlock_cli({"--url", server.uri(), "run", "--ttl", bad, "k", "--", "true"});
        EXPECT_EQ(f.code, 64) << bad;
        EXPECT_NE(f.err.find("1m30s, 2h45m, 1d"), std::string::npos) << "names the accepted forms: " << f.err;
    }
}

TEST(CliConventions, DashCRunsTheStringThroughBinSh) {
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "job", "-c", "echo $((1 + 2)) \"$DLOCK_KEY\"; exit 5"});
    EXPECT_EQ(f.code, 5) << f.err;
    EXPECT_EQ(f.out, "3 job\n");
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "job", "-c", "true", "--", "true"}).code, 64);
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "job", "-c", ""}).code, 64);
}

TEST(CliConventions, HoldAsACoprocessReleasesWhenItsStdinCloses) {
    RedisServer server;
    // A script as a user writes it: read the token, work, close dlock's stdin.
    const std::string script =
        "coproc LOCK { \"$DLOCK\" --url \"$URL\" hold migrations; }\n"
        "read -r token <&\"${LOCK[0]}\" || exit 75\n"
        "echo \"token=$token held=$(redis-cli -u \"$URL\" EXISTS 'dlock:{migrations}')\"\n"
        "pid=$LOCK_PID\n"
        "exec {LOCK[1]}>&-\n"
        "wait \"$pid\"; echo \"exit=$?\"\n";
    auto f = dlock_cli_script(script, {{"DLOCK", DLOCK_CLI}, {"URL", server.uri()}});
    EXPECT_EQ(f.code, 0) << f.err;
    const auto token_at = f.out.find("token=");
    ASSERT_NE(token_at, std::string::npos) << f.out << f.err;
    EXPECT_GT(std::stoull(f.out.substr(token_at + 6)), 0u) << f.out;
    EXPECT_NE(f.out.find("held=1"), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("exit=0"), std::string::npos) << f.out << f.err;
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{migrations}"}), "0") << "released";
}

TEST(CliConventions, HoldReleasesOnSigtermAndReportsALostLease) {
    RedisServer server;
    auto holding = start_with_stdin_open({"--url", server.uri(), "hold", "--ttl", "600ms", "k"});
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", "dlock:{k}"}) == "1"; }));
    std::this_thread::sleep_for(900ms);  // longer than the lease: it is renewed
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{k}"}), "1");
    kill(holding.pid, SIGTERM);
    auto f = finish(holding);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{k}"}), "0");

    holding = start_with_stdin_open({"--url", server.uri(), "hold", "k"});
    ASSERT_TRUE(eventually([&] { return server.cli({"EXISTS", "dlock:{k}"}) == "1"; }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "k"}).code, 0);
    f = finish(holding);
    EXPECT_EQ(f.code, 79) << f.err;
    // Heard from the revocation ("was lost: ") or, when stdin closed first
    // on a loaded machine, from the release ("was lost before the end: ").
    EXPECT_NE(f.err.find("the lock on k was lost"), std::string::npos) << f.err;
}

TEST(CliConventions, WaitFreeWaitsWithoutTakingTheLock) {
    RedisServer server;
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "wait-free", "k"}).code, 0);
    dlock::Client client(server.uri());
    auto lock = client.lock("k");
    lock.lock();
    auto f = dlock_cli({"--url", server.uri(), "wait-free", "--timeout", "300ms", "k"});
    EXPECT_EQ(f.code, 1);
    EXPECT_GE(f.took, 300ms);
    EXPECT_NE(f.err.find("still held"), std::string::npos) << f.err;
    auto waiting = start({"--url", server.uri(), "wait-free", "--timeout", "10s", "k"});
    std::this_thread::sleep_for(300ms);
    const auto released = Clock::now();
    lock.unlock();
    f = finish(waiting);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_LT(Clock::now() - released, 1s) << "woken by the release, not by a timer";
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{k}"}), "0") << "not taken";
}

TEST(CliConventions, StatusExitStatusForProbes) {
    RedisServer server;
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "status", "--exit-status", "k"}).code, 1);
    dlock::Client client(server.uri());
    auto lock = client.lock("k");
    lock.lock();
    auto f = dlock_cli({"--url", server.uri(), "status", "--exit-status", "k"});
    EXPECT_EQ(f.code, 0);
    // The holder is someone an operator can find.
    EXPECT_NE(f.out.find("pid=" + std::to_string(getpid())), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("host="), std::string::npos) << f.out;
    EXPECT_NE(f.out.find("thread="), std::string::npos) << f.out;
    lock.unlock();
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "status", "--exit-status", "k"}).code, 1);
}

TEST(CliConventions, ListShowsTenThousandLocksThroughScan) {
    RedisServer server;
    dlock::Client client(server.uri());
    // One hold taken through the library, copied 9,999 times by the server
    // (COPY keeps its expiry): 10,000 holds taken one by one, each with its
    // renewal, cost more than the rest of this program's tests together.
    auto first = client.lock("job-0", {.lease = 120s, .ownership = dlock::Ownership::handle});
    ASSERT_TRUE(first.try_lock());
    client.command({"EVAL", "for i = 1, 9999 do redis.call('COPY', KEYS[1], 'dlock:{job-' .. i .. '}') end",
                    "1", dlock::test::lock_key("job-0")});
    auto other = client.lock("other");
    other.lock();
    auto free_lock = client.lock("freed");
    free_lock.lock();
    free_lock.unlock();
    auto f = dlock_cli({"--url", server.uri(), "list", "--json"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(count_lines(f.out), 10'001) << "every held lock, and no free one";
    EXPECT_EQ(f.out.find("\"freed\""), std::string::npos);
    EXPECT_NE(f.out.find("{\"key\": \"job-9999\", \"held\": true"), std::string::npos);
    f = dlock_cli({"--url", server.uri(), "list", "job-1*"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(count_lines(f.out), 1'111) << "job-1, job-10..19, job-100..199, job-1000..1999";
    EXPECT_EQ(f.out.rfind("job-1: held by host=", 0), 0u) << f.out.substr(0, 200);
    EXPECT_EQ(server.command_calls("keys"), 0);
    EXPECT_GT(server.command_calls("scan"), 1);
}

TEST(CliConventions, TheWaitingLineAppearsOnATerminalOnly) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy", {.ownership = dlock::Ownership::handle});
    lock.lock();
    // Released well after the one second of waiting that brings the line,
    // however slowly a loaded machine starts dlock.
    std::thread releaser([&] {
        std::this_thread::sleep_for(3s);
        lock.unlock();
    });
    auto quiet = dlock_cli({"--url", server.uri(), "run", "--wait", "20s", "busy", "--", "true"});
    releaser.join();
    EXPECT_EQ(quiet.code, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "") << "no noise when stderr is not a terminal";

    lock.lock();
    std::thread releaser2([&] {
        std::this_thread::sleep_for(3s);
        lock.unlock();
    });
    // script(1) gives dlock a pseudo-terminal and copies what it writes.
    auto tty = dlock_cli_script("script -qec \"$DLOCK --url $URL run --wait 20s busy -- true\" /dev/null",
                                {{"DLOCK", DLOCK_CLI}, {"URL", server.uri()}});
    releaser2.join();
    EXPECT_EQ(tty.code, 0) << tty.err;
    EXPECT_NE(tty.out.find("dlock: waiting for busy, held by host="), std::string::npos) << tty.out;
}

TEST(CliConventions, StatusJsonIsValidForAnyKeyBytes) {
    RedisServer server;
    const std::string key = std::string("a\x01\"\\\xff") + "\xc3\xa9" + "\xed\xa0\x80" + "z";
    auto f = dlock_cli({"--url", server.uri(), "status", "--json", key});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out.rfind("{\"key\": \"a\\u0001\\\"\\\\\\u00ff\xc3\xa9\\u00ed\\u00a0\\u0080z\",", 0), 0u) << f.out;
}

// A name that begins with '-' is given with --key (or after -- where that
// does not start a command); as a word it is never taken for help and exit 0.
TEST(CliConventions, LockNamesThatBeginWithADash) {
    RedisServer server;
    const auto url = server.uri();
    auto holding = start_with_stdin_open({"--url", url, "hold", "--key=-weird"});
    ASSERT_TRUE(eventually([&] { return held(server, "-weird"); }));
    auto f = dlock_cli({"--url", url, "status", "--", "-weird"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out.rfind("-weird: held by ", 0), 0u) << f.out;
    f = dlock_cli({"--url", url, "list", "--pattern=-w*"});
    EXPECT_EQ(f.out.rfind("-weird: held by ", 0), 0u) << f.out << f.err;
    EXPECT_EQ(finish(holding).code, 0);
    f = dlock_cli({"--url", url, "run", "--key", "-weird", "--", "sh", "-c", "echo \"$DLOCK_KEY\""});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out, "-weird\n");
    EXPECT_EQ(dlock_cli({"--url", url, "wait-free", "--key=-weird"}).code, 0);
    EXPECT_EQ(dlock_cli({"--url", url, "status", "--exit-status", "--key=-h"}).code, 1) << "free, not help";

    // Help where a name was meant would skip the job (or hand a script the
    // help as its token) with exit 0.
    const auto marker = temp_path("ran");
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"run", "-h", "--", "sh", "-c", "echo ran > " + marker},
             {"run", "--help", "-c", "echo ran > " + marker},
             {"run", "--version", "--", "sh", "-c", "echo ran > " + marker},
             {"release", "--force", "-h"},
             {"status", "--exit-status", "--help"},
             {"hold", "--no-wait", "-h"}}) {
        args.insert(args.begin(), {"--url", url});
        f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[3] << " " << args[4] << ": " << f.out << f.err;
        EXPECT_NE(f.err.find("--key="), std::string::npos) << f.err;
    }
    EXPECT_EQ(read_file(marker), "");
    EXPECT_EQ(dlock_cli({"status", "--help"}).code, 0) << "alone it is help";
}

// Plain output is one line per lock whatever bytes its name or its holder's
// label holds: a newline cannot forge a second entry.
TEST(CliConventions, PlainListAndStatusEscapeControlBytes) {
    RedisServer server;
    dlock::Client client(server.uri());
    const std::string name = "two\nlines: held by nobody\x01\\";
    auto lock = client.lock(name);
    lock.lock();
    client.command({"HSET", "dlock:{" + name + "}", "holder", "host=evil\nforged"});
    const std::string shown = "two\\u000alines: held by nobody\\u0001\\\\: held by host=evil\\u000aforged owner=";
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{{"list"}, {"status", "--key=" + name}}) {
        args.insert(args.begin(), {"--url", server.uri()});
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 0) << f.err;
        EXPECT_EQ(count_lines(f.out), 1) << args[2] << ": " << f.out;
        EXPECT_EQ(f.out.rfind(shown, 0), 0u) << args[2] << ": " << f.out;
    }
    auto f = dlock_cli({"--url", server.uri(), "release", "--force", "--key=" + name});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(count_lines(f.out), 1) << f.out;
}

namespace {

// The man page's entry for an option, on one line: from its .TP heading to
// the next heading or section; empty when it has none.
std::string man_entry(const std::string& man, const std::string& option) {
    std::string escaped;
    for (char c : option) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    for (auto at = man.find("\n.TP\n"); at != std::string::npos; at = man.find("\n.TP\n", at + 1)) {
        const auto heading = man.substr(at + 5, man.find('\n', at + 5) - at - 5);
        const auto named = heading.find(escaped);
        const auto after = named + escaped.size();
        if (named == std::string::npos || (after < heading.size() && heading[after] == '\\')) continue;
        auto entry = man.substr(at + 5, std::min(man.find("\n.TP\n", at + 5), man.find("\n.SH ", at + 5)) - at - 5);
        std::replace(entry.begin(), entry.end(), '\n', ' ');  // sentences wrap anywhere
        return entry;
    }
    return {};
}

}  // namespace

// Each option of run and hold has an entry in dlock.1 with its default, the
// same as --help's; --version and the exit status on a signal are there too.
TEST(CliConventions, TheManPageGivesEveryRunAndHoldOptionItsMeaningAndDefault) {
    const auto man = read_file(DLOCK_TOOL_SOURCES "/dlock.1");
    for (const char* command : {"run", "hold"}) {
        const auto help = dlock_cli({command, "--help"}).out;
        std::istringstream lines(help.substr(help.find("\nOptions:")));
        std::string option;  // the option of the line before, for descriptions on a line of their own
        std::getline(lines, option);  // the empty rest of the line before "Options:"
        option.clear();
        for (std::string line; std::getline(lines, line) && !line.empty();) {
            if (line.rfind("  -", 0) == 0) {
                option = line.substr(2, line.find_first_of(" \n", 2) - 2);
                option = option.substr(option.rfind(',') + 1);  // the long name
            }
            if (option.empty() || option == "--help") continue;
            const auto entry = man_entry(man, option);
            ASSERT_FALSE(entry.empty()) << option << " has no entry in dlock.1";
            if (option != "--key") {
                EXPECT_NE(entry.find("Default: "), std::string::npos) << option << ":\n" << entry;
            }
            for (const char* said : {"(default ", "(default: "}) {
                const auto at = line.find(said);
                if (at == std::string::npos) continue;
                const auto start = at + std::strlen(said);
                const auto value = line.substr(start, line.find(')', start) - start);
                EXPECT_NE(entry.find("Default: " + value + "."), std::string::npos) << option << ": " << entry;
            }
            if (const auto at = line.find("between "); at != std::string::npos) {
                EXPECT_NE(entry.find(line.substr(at, line.find(" (", at) - at)), std::string::npos) << entry;
            }
        }
    }
    EXPECT_NE(man_entry(man, "--version").find("exit 0"), std::string::npos) << "--version";
    const auto exit_status = man.substr(man.find(".SH EXIT STATUS"));
    EXPECT_NE(exit_status.find("128 + \" N\nrun and hold:"), std::string::npos) << exit_status;
    for (const char* command : {"run", "hold"})
        EXPECT_NE(dlock_cli({command, "--help"}).out.find("128 + N when signal N ended the wait"), std::string::npos)
            << command;
}

TEST(CliConventions, HoldInterruptedWhileWaitingExits128PlusTheSignal) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy");
    lock.lock();
    auto holding = start_with_stdin_open({"--url", server.uri(), "hold", "busy"});
    std::this_thread::sleep_for(300ms);
    kill(holding.pid, SIGINT);
    auto f = finish(holding);
    EXPECT_EQ(f.code, 128 + SIGINT) << f.err;
    EXPECT_EQ(f.out, "") << "no token: not acquired";
    EXPECT_TRUE(lock.is_held());
}
