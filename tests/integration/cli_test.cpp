// The dlock command-line tool, end to end: the real binary against real servers.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using namespace dlock::test::cli;
using dlock::support::eventually;

TEST(Cli, SixteenConcurrentRunsLoseNoUpdateAndTokensIncreaseInWriteOrder) {
    dlock::support::RedisServer server;
    auto counter = temp_path("counter"), tokens = temp_path("tokens");
    std::ofstream(counter) << "0\n";
    std::string script = "n=$(cat " + counter + "); sleep 0.05; echo $((n+1)) > " + counter +
                         "; echo \"$DLOCK_FENCING_TOKEN\" >> " + tokens;
    std::vector<Running> runs;
    for (int i = 0; i < 16; ++i)
        runs.push_back(start({"--url", server.uri(), "run", "shared-file", "--", "sh", "-c", script}));
    for (auto& r : runs) {
        auto f = finish(r);
        EXPECT_EQ(f.code, 0) << f.err;
    }
    EXPECT_EQ(read_file(counter), "16\n");
    std::istringstream lines(read_file(tokens));
    long last = 0, count = 0;
    for (long token; lines >> token; ++count) {
        EXPECT_GT(token, last) << "fencing tokens out of write order";
        last = token;
    }
    EXPECT_EQ(count, 16);
}

TEST(Cli, ExitsWithTheCommandsStatusAndPassesKeyAndToken) {
    dlock::support::RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "job", "--", "sh", "-c",
                        "echo \"$DLOCK_KEY $DLOCK_FENCING_TOKEN\"; exit 3"});
    EXPECT_EQ(f.code, 3);
    ASSERT_EQ(f.out.rfind("job ", 0), 0u) << f.out;
    EXPECT_GT(std::stoull(f.out.substr(4)), 0u) << f.out;
    EXPECT_FALSE(held(server, "job")) << "released after the command";
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "job", "--", "true"}).code, 0);
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "job", "--", "sh", "-c", "kill -TERM $$"}).code, 128 + SIGTERM);
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "run", "job", "--", "/no/such/command"}).code, 127);
}

TEST(Cli, NotAcquiredInTimeIsTheConflictExitCode) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy");
    lock.lock();
    auto f = dlock_cli({"--url", server.uri(), "run", "--no-wait", "busy", "--", "true"});
    EXPECT_EQ(f.code, 75);
    // A liveness bound (a run that waited would wait as long as the holder
    // holds: all of this test): the start and a busy machine are not what it tests.
    EXPECT_LT(f.took, 3s + start_cost());
    // A lost race under --no-wait is silent, as flock -n is (cron mails
    // nothing); -v says it, and --json-events reports it as an event.
    EXPECT_EQ(f.err, "");
    f = dlock_cli({"--url", server.uri(), "-v", "run", "--no-wait", "busy", "--", "true"});
    EXPECT_EQ(f.code, 75);
    EXPECT_NE(f.err.find("busy is held by another owner; not acquired without waiting"), std::string::npos) << f.err;
    f = dlock_cli({"--url", server.uri(), "run", "--no-wait", "--json-events", "busy", "--", "true"});
    EXPECT_EQ(f.code, 75);
    EXPECT_NE(f.err.find("\"event\": \"not_acquired\", \"key\": \"busy\""), std::string::npos) << f.err;
    // A wait that runs out is no race: it is said. (Long enough for the
    // attempt's answer on a busy machine: with 100 ms, an answer not back
    // by the deadline made it a timeout under AddressSanitizer beside other
    // work, exit 69.)
    f = dlock_cli({"--url", server.uri(), "run", "--wait", "2s", "busy", "--", "true"});
    EXPECT_EQ(f.code, 75);
    EXPECT_NE(f.err.find("busy is held by another owner; not acquired within 2000 ms"), std::string::npos) << f.err;
    f = dlock_cli({"--url", server.uri(), "run", "--wait", "300ms", "--conflict-exit-code", "5", "busy", "--", "true"});
    EXPECT_EQ(f.code, 5);
    EXPECT_GE(f.took, 300ms);
    EXPECT_LT(f.took, 3s + start_cost());
    // A lock freed while waiting is taken.
    auto waiting = start({"--url", server.uri(), "run", "--wait", "5s", "busy", "--", "true"});
    std::this_thread::sleep_for(200ms);
    lock.unlock();
    EXPECT_EQ(finish(waiting).code, 0);
}

// --no-wait makes one attempt: on a busy lock it ends about as soon as the
// same run on a free lock (both connect, make one attempt and end), however
// long starting the binary takes here. The fastest of three busy runs against
// the slowest free one: a --no-wait that waited makes every busy run slow,
// a busy machine only some runs. (The liveness bound above, 3 s plus a start,
// lets a --no-wait that waits 2 s pass.)
TEST(Cli, NoWaitOnABusyLockEndsAsSoonAsARunOnAFreeOne) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy-now");
    lock.lock();
    Clock::duration fastest_busy = Clock::duration::max(), slowest_free{};
    for (int round = 0; round < 3; ++round) {
        const auto free = dlock_cli({"--url", server.uri(), "run", "--no-wait", "free-now", "--", "true"});
        ASSERT_EQ(free.code, 0) << free.err;
        const auto busy = dlock_cli({"--url", server.uri(), "run", "--no-wait", "busy-now", "--", "true"});
        ASSERT_EQ(busy.code, 75) << busy.err;
        slowest_free = std::max(slowest_free, free.took);
        fastest_busy = std::min(fastest_busy, busy.took);
    }
    EXPECT_LT(fastest_busy, slowest_free + 1s)
        << "busy: " << std::chrono::duration<double>(fastest_busy).count()
        << " s at the fastest; free: " << std::chrono::duration<double>(slowest_free).count() << " s at the slowest";
}

// --wait D on a busy lock gives up at D: about D later than the same run
// with --no-wait, whatever starting the binary and connecting cost here
// (the fastest of three waits against the slowest of three no-waits, half a
// second of margin). The bounds above (3 s plus a start) and the suite as a
// whole pass a run that gives up a second after its deadline.
TEST(Cli, AWaitOnABusyLockEndsAtItsDeadline) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy-wait");
    lock.lock();
    Clock::duration fastest_wait = Clock::duration::max(), slowest_no_wait{};
    for (int round = 0; round < 3; ++round) {
        const auto no_wait = dlock_cli({"--url", server.uri(), "run", "--no-wait", "busy-wait", "--", "true"});
        ASSERT_EQ(no_wait.code, 75) << no_wait.err;
        const auto waited = dlock_cli({"--url", server.uri(), "run", "--wait", "500ms", "busy-wait", "--", "true"});
        ASSERT_EQ(waited.code, 75) << waited.err;
        EXPECT_GE(waited.took, 500ms);
        slowest_no_wait = std::max(slowest_no_wait, no_wait.took);
        fastest_wait = std::min(fastest_wait, waited.took);
    }
    EXPECT_LT(fastest_wait, slowest_no_wait + 500ms + 500ms)
        << "--wait 500ms: " << std::chrono::duration<double>(fastest_wait).count()
        << " s at the fastest; --no-wait: " << std::chrono::duration<double>(slowest_no_wait).count()
        << " s at the slowest";
}

TEST(Cli, UsageErrorsExit64WithOneLine) {
    dlock::support::RedisServer server;
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"run", "--ttl", "5x", "k", "--", "true"},
             {"run", "--ttl", "0", "k", "--", "true"},
             {"run", "--wait", "-1s", "k", "--", "true"},
             {"run", "", "--", "true"},
             {"run", "k"},
             {"run", "k", "--"},
             {"--bogus", "status", "k"},
             {"run", "--on-lost", "maybe", "k", "--", "true"},
             {"release", "k"},
             {"status"},
             {"--url", "http://nope", "status", "k"},
             {}}) {
        args.insert(args.begin(), {"--url", server.uri()});
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[2] << " " << f.err;
        EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
    }
}

TEST(Cli, UnixSocketPathTooLongIsAUsageErrorNotACrash) {
    auto f = dlock_cli({"--url", "unix:///" + std::string(200, 'a'), "status", "x"});
    EXPECT_EQ(f.code, 64) << f.err;
    EXPECT_NE(f.err.find("the limit is 107"), std::string::npos) << f.err;
    EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
}

TEST(Cli, RedisDownExits69WithinTheConnectTimeout) {
    auto url = "redis://127.0.0.1:" + std::to_string(dlock::support::free_port());
    auto f = dlock_cli({"--url", url, "--connect-timeout", "500ms", "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69);
    EXPECT_LT(f.took, 1500ms + start_cost());
    // A server that accepts but never answers.
    dlock::support::RedisServer server;
    server.pause();
    f = dlock_cli({"--url", server.uri(), "--connect-timeout", "500ms", "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69);
    EXPECT_LT(f.took, 1500ms + start_cost());
    f = dlock_cli({"--url", server.uri(), "--connect-timeout", "500ms", "status", "k"});
    EXPECT_EQ(f.code, 69);
    server.resume();
    dlock::support::RedisServer secured({.password = "right"});
    f = dlock_cli({"--url", "redis://:wrong@127.0.0.1:" + std::to_string(secured.port()), "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69);
    EXPECT_NE(f.err.find("authentication"), std::string::npos) << f.err;
}

TEST(Cli, ForceReleaseWhileRunningTerminatesTheCommandAndExits79) {
    dlock::support::RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--ttl", "3s", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    auto release = dlock_cli({"--url", server.uri(), "release", "--force", "victim"});
    EXPECT_EQ(release.code, 0);
    EXPECT_NE(release.out.find("released victim"), std::string::npos) << release.out;
    auto f = finish(run);
    EXPECT_EQ(f.code, 79);
    EXPECT_NE(f.err.find("the lock on victim was lost: "), std::string::npos) << f.err;
    EXPECT_LT(f.took, 10s) << "the watchdog notices within ttl/3 and the child ends at SIGTERM";
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 1);
}

TEST(Cli, LostLeaseWithIgnoreLetsTheCommandFinishStillExits79) {
    dlock::support::RedisServer server;
    auto marker = temp_path("finished");
    auto run = start({"--url", server.uri(), "run", "--ttl", "600ms", "--on-lost", "ignore", "victim", "--", "sh",
                      "-c", "sleep 1; echo done > " + marker});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    auto f = finish(run);
    EXPECT_EQ(f.code, 79);
    EXPECT_EQ(read_file(marker), "done\n");
}

TEST(Cli, LostLeaseWithAStubbornCommandIsKilledAfterTheGrace) {
    dlock::support::RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--ttl", "600ms", "--grace", "300ms", "victim", "--", "sh", "-c",
                      "trap '' TERM; sleep 30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    // From when the release is done (its process's start is not dlock run's).
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    const auto released_at = Clock::now();
    auto f = finish(run);
    EXPECT_EQ(f.code, 79);
    EXPECT_LT(Clock::now() - released_at, 200ms + 300ms + 1s);
    // --on-lost kill does not wait at all.
    run = start({"--url", server.uri(), "run", "--ttl", "600ms", "--on-lost", "kill", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    EXPECT_EQ(finish(run).code, 79);
}

TEST(Cli, SignalsSentToDlockReachTheCommand) {
    dlock::support::RedisServer server;
    auto marker = temp_path("signal");
    auto run = start({"--url", server.uri(), "run", "job", "--", "sh", "-c",
                      "trap 'echo got > " + marker + "; exit 7' TERM; while true; do sleep 0.05; done"});
    ASSERT_TRUE(eventually([&] { return held(server, "job"); }));
    std::this_thread::sleep_for(200ms);  // the shell has set its trap
    kill(run.pid, SIGTERM);
    auto f = finish(run);
    EXPECT_EQ(f.code, 7);
    EXPECT_EQ(read_file(marker), "got\n");
    EXPECT_FALSE(held(server, "job"));
}

namespace {

// Starts `dlock run ARGS -- <a shell that execs sleep 60>` on server, SIGKILLs
// dlock once the command runs, and returns the command's pid.
pid_t kill_dlock_under_running_command(const dlock::support::RedisServer& server, std::vector<std::string> args) {
    auto pid_file = temp_path("pid");
    std::vector<std::string> all{"--url", server.uri(), "run"};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"orphan", "--", "sh", "-c", "echo $$ > " + pid_file + "; exec sleep 60"});
    auto run = start(all);
    EXPECT_TRUE(eventually([&] { return read_file(pid_file).find('\n') != std::string::npos; }));
    const pid_t command = std::stoi("0" + read_file(pid_file));
    EXPECT_TRUE(command > 0 && alive(command));
    kill(run.pid, SIGKILL);
    EXPECT_EQ(finish(run).code, 128 + SIGKILL);
    return command;
}

}  // namespace

TEST(Cli, CommandDoesNotOutliveDlockKilledWithSigkill) {
    // Nobody renews the lease after dlock is gone: a command left running
    // would run unprotected once it expires.
    dlock::support::RedisServer server;
    const pid_t command = kill_dlock_under_running_command(server, {"--ttl", "5s"});
    ASSERT_GT(command, 0);
    const bool ended = eventually([&] { return !alive(command); }, 2s);
    if (!ended) kill(command, SIGKILL);  // started by this test: not left behind
    EXPECT_TRUE(ended) << "the command outlived dlock";
}

TEST(Cli, CommandWithOnLostIgnoreOutlivesDlockKilledWithSigkill) {
    // --on-lost ignore lets the command finish after the lease is lost, and
    // dlock's death loses it.
    dlock::support::RedisServer server;
    const pid_t command = kill_dlock_under_running_command(server, {"--ttl", "5s", "--on-lost", "ignore"});
    ASSERT_GT(command, 0);
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(alive(command));
    kill(command, SIGKILL);  // started by this test: not left behind
}

TEST(Cli, CommandInheritsNoSocketBesidesStdio) {
    dlock::support::RedisServer server;
    // The command's own shell lists its descriptors as "<fd> <target>".
    auto f = dlock_cli({"--url", server.uri(), "run", "fds", "--", "sh", "-c",
                        "for f in /proc/$$/fd/*; do echo \"${f##*/} $(readlink \"$f\")\"; done"});
    ASSERT_EQ(f.code, 0) << f.err;
    std::istringstream lines(f.out);
    int listed = 0;
    std::string leaked;
    for (std::string line; std::getline(lines, line); ++listed) {
        auto space = line.find(' ');
        ASSERT_NE(space, std::string::npos) << line;
        if (std::stoi(line.substr(0, space)) > 2 && line.compare(space + 1, 7, "socket:") == 0) leaked += line + "\n";
    }
    EXPECT_GE(listed, 3) << f.out;
    EXPECT_EQ(leaked, "") << "sockets inherited across exec";
}

TEST(Cli, InterruptWhileWaitingForTheLockEndsTheWait) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("busy");
    lock.lock();
    auto marker = temp_path("never");
    auto run = start({"--url", server.uri(), "run", "busy", "--", "sh", "-c", "echo ran > " + marker});
    std::this_thread::sleep_for(300ms);
    kill(run.pid, SIGINT);
    auto f = finish(run);
    EXPECT_EQ(f.code, 128 + SIGINT);
    EXPECT_EQ(read_file(marker), "") << "the command must not run";
    EXPECT_TRUE(lock.is_held());
}

TEST(Cli, StatusJsonBeforeDuringAndAfterARun) {
    dlock::support::RedisServer server;
    auto status = [&] { return dlock_cli({"--url", server.uri(), "status", "--json", "report"}); };
    auto before = status();
    EXPECT_EQ(before.code, 0);
    EXPECT_EQ(before.out, "{\"key\": \"report\", \"held\": false, \"owner\": null, \"holder\": null, "
                          "\"holder_host\": null, \"holder_pid\": null, \"holder_thread\": null, \"hold_count\": null, "
                          "\"ttl_ms\": null, \"fencing_token\": null, \"kind\": \"free\", \"readers\": 0, "
                          "\"waiting\": 0, \"holders\": []}\n");
    Gate gate;
    auto run = start(gated({"--url", server.uri(), "run", "report"}, gate));
    ASSERT_TRUE(eventually([&] { return held(server, "report"); }));
    auto during = status();
    EXPECT_EQ(during.code, 0);
    EXPECT_NE(during.out.find("\"held\": true"), std::string::npos) << during.out;
    EXPECT_NE(during.out.find("\"hold_count\": 1"), std::string::npos) << during.out;
    const std::string token_field = "\"fencing_token\": ";
    auto token_at = during.out.find(token_field);
    ASSERT_NE(token_at, std::string::npos) << during.out;
    const auto token = std::stoull(during.out.substr(token_at + token_field.size()));
    EXPECT_GT(token, 0u);
    EXPECT_NE(during.out.find("\"owner\": \""), std::string::npos) << during.out;
    EXPECT_NE(during.out.find("\"kind\": \"exclusive\""), std::string::npos) << during.out;
    EXPECT_NE(during.out.find("\"side\": \"exclusive\"}]"), std::string::npos) << during.out;
    gate.open();
    EXPECT_EQ(finish(run).code, 0);
    auto after = status();
    EXPECT_EQ(after.out, "{\"key\": \"report\", \"held\": false, \"owner\": null, \"holder\": null, "
                         "\"holder_host\": null, \"holder_pid\": null, \"holder_thread\": null, \"hold_count\": null, "
                         "\"ttl_ms\": null, \"fencing_token\": " + std::to_string(token) +
                         ", \"kind\": \"free\", \"readers\": 0, \"waiting\": 0, \"holders\": []}\n");
}

TEST(Cli, DemoStartsItsOwnServerAndAwardsExactlyTheBonuses) {
    auto f = dlock_cli({"demo", "--processes", "3", "--threads", "8", "--json"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.out.find("\"clients\": 24, \"processes\": 3, \"threads\": 8, \"bonuses\": 10, \"awarded\": 10, "
                         "\"overdrawn\": 0, \"fencing_tokens_increasing\": true"),
              std::string::npos)
        << f.out;
    EXPECT_NE(f.out.find("\"unlocked_awarded\": "), std::string::npos);
    // Fewer clients than bonuses: every client wins one, and that is a success.
    f = dlock_cli({"demo", "--processes", "2", "--threads", "3", "--bonuses", "10", "--json"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.out.find("\"awarded\": 6, \"overdrawn\": 0"), std::string::npos) << f.out;
}

// The server the demo started goes with it: killed by pid, its directory
// removed (the tool starts it itself, tools/dlock/demo_server.cpp).
TEST(Cli, DemoStopsTheServerItStarted) {
    auto f = dlock_cli({"demo", "--processes", "1", "--threads", "2", "--bonuses", "1"});
    ASSERT_EQ(f.code, 0) << f.err;
    const auto at = f.out.find("(pid ");
    ASSERT_NE(at, std::string::npos) << f.out;
    const pid_t pid = std::stoi(f.out.substr(at + 5));
    EXPECT_NE(::kill(pid, 0), 0) << "redis-server " << pid << " outlived the demo";
    EXPECT_EQ(errno, ESRCH);
}

// The demo's own --url takes the password from the environment like every
// other command's URL.
TEST(Cli, DemoUrlTakesThePasswordFromTheEnvironment) {
    dlock::support::RedisServer server({.password = "demo-secret"});
    auto f = dlock_cli({"demo", "--url", "redis://127.0.0.1:" + std::to_string(server.port()), "--processes", "1",
                        "--threads", "2", "--bonuses", "2", "--json"},
                       {{"DLOCK_PASSWORD", "demo-secret"}});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.out.find("\"overdrawn\": 0"), std::string::npos) << f.out;
}

TEST(Cli, HelpAndVersion) {
    auto help = dlock_cli({"--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_NE(help.out.find("run"), std::string::npos);
    EXPECT_NE(help.out.find("crontab"), std::string::npos);
    auto version = dlock_cli({"--version"});
    EXPECT_EQ(version.code, 0);
    EXPECT_EQ(version.out.rfind("dlock ", 0), 0u);
}

TEST(Cli, ThreeUrlsMeanARedlockForRunStatusAndRelease) {
    dlock::support::RedisServer a, b, c;
    const std::string list = a.uri() + "," + b.uri() + "," + c.uri();
    auto f = dlock_cli({"--url", a.uri(), "--url", b.uri(), "--url", c.uri(), "run", "report", "--", "sh", "-c",
                        "echo \"$DLOCK_FENCING_TOKEN\""});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_GT(std::stoull(f.out), 0u) << f.out;
    auto running = start({"--url", list, "run", "--ttl", "1500ms", "report", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(a, "report") && held(b, "report") && held(c, "report"); }, 10s));
    auto status = dlock_cli({"--url", list, "status", "report"});
    EXPECT_EQ(status.code, 0) << status.err;
    EXPECT_NE(status.out.find("on 3 of 3 masters"), std::string::npos) << status.out;
    auto json = dlock_cli({"--url", list, "status", "--json", "report"});
    EXPECT_NE(json.out.find("\"held\": true"), std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"masters\": [{\"url\": \"" + a.uri()), std::string::npos) << json.out;
    auto conflict = dlock_cli({"--url", list, "run", "--no-wait", "report", "--", "true"});
    EXPECT_EQ(conflict.code, 75);
    // Breaking it on every master ends the holder's majority: the command is stopped.
    auto released = dlock_cli({"--url", list, "release", "--force", "report"});
    EXPECT_EQ(released.code, 0) << released.err;
    auto ended = finish(running);
    EXPECT_EQ(ended.code, 79) << ended.err;
    EXPECT_FALSE(held(a, "report") || held(b, "report") || held(c, "report"));
}

TEST(Cli, RedlockUrlsThatCannotWorkAreUsageOrUnavailable) {
    dlock::support::RedisServer a;
    auto two = dlock_cli({"--url", a.uri() + ",redis://127.0.0.1:1", "run", "k", "--", "true"});
    EXPECT_EQ(two.code, 64);
    EXPECT_NE(two.err.find("odd number"), std::string::npos) << two.err;
    auto down = "redis://127.0.0.1:" + std::to_string(dlock::support::free_port());
    auto down2 = "redis://127.0.0.1:" + std::to_string(dlock::support::free_port());
    auto unavailable = dlock_cli({"--connect-timeout", "500ms", "--url", a.uri() + "," + down + "," + down2, "run",
                                  "k", "--", "true"});
    EXPECT_EQ(unavailable.code, 69);
    EXPECT_NE(unavailable.err.find("only 1 of 3 masters reachable"), std::string::npos) << unavailable.err;
    EXPECT_FALSE(held(a, "k"));
}

// The bound the error states is the one the library enforces.
TEST(Cli, ATtlOutOfRangeNamesTheRealBounds) {
    dlock::support::RedisServer server;
    const std::string bounds = "between " + std::to_string(dlock::min_lease.count()) + "ms and 24h";
    for (const char* ttl : {"0", "1ms", "9ms", "25h"}) {
        auto f = dlock_cli({"--url", server.uri(), "run", "--ttl", ttl, "k", "--", "true"});
        EXPECT_EQ(f.code, 64) << ttl << ": " << f.err;
        EXPECT_NE(f.err.find(bounds), std::string::npos) << ttl << ": " << f.err;
    }
    EXPECT_NE(dlock_cli({"run", "--help"}).out.find(bounds), std::string::npos) << "--help says it too";
    auto f = dlock_cli({"--url", server.uri(), "run", "--ttl", "10ms", "--on-lost", "ignore", "k", "--", "true"});
    EXPECT_NE(f.code, 64) << "the minimum itself is a lease: " << f.err;
}

TEST(Cli, SharedRunsGoTogetherAndARunWithoutItGoesAlone) {
    dlock::support::RedisServer server;
    const auto url = server.uri();
    auto a = temp_path("reader-a"), b = temp_path("reader-b");
    // Each reader marks itself, then waits (at most 5 s) to see the other:
    // both exit 0 only if they held the read side at the same time. They
    // hold on until the writer has tried.
    Gate gate;
    auto reader = [&](const std::string& mine, const std::string& other) {
        return start({"--url", url, "run", "--shared", "catalog", "--", "sh", "-c",
                      "touch " + mine + "; i=0; while [ ! -e " + other + " ] && [ $i -lt 100 ]; do sleep 0.05; " +
                          "i=$((i+1)); done; [ -e " + other + " ] && " + gate.wait_in_shell()});
    };
    auto first = reader(a, b), second = reader(b, a);
    ASSERT_TRUE(eventually([&] { return std::ifstream(a).good(); }));
    ASSERT_TRUE(eventually([&] { return std::ifstream(b).good(); }));
    auto writer = dlock_cli({"--url", url, "run", "--no-wait", "catalog", "--", "true"});
    EXPECT_EQ(writer.code, 75) << "a run without --shared goes alone";
    gate.open();
    EXPECT_EQ(finish(first).code, 0) << "the --shared runs did not run together";
    EXPECT_EQ(finish(second).code, 0);

    auto write = dlock_cli({"--url", url, "run", "catalog", "--", "sh", "-c", "echo $DLOCK_FENCING_TOKEN"});
    ASSERT_EQ(write.code, 0) << write.err;
    auto read = dlock_cli({"--url", url, "run", "--shared", "catalog", "--", "sh", "-c", "echo $DLOCK_FENCING_TOKEN"});
    ASSERT_EQ(read.code, 0) << read.err;
    EXPECT_EQ(read.out, write.out) << "a reader's token is the last write's";
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{catalog}:readers"}), "0");

    // A Lock on the same name is the write side.
    dlock::Client client(url);
    auto lock = client.lock("catalog");
    lock.lock();
    EXPECT_EQ(dlock_cli({"--url", url, "run", "--shared", "--no-wait", "catalog", "--", "true"}).code, 75);
    lock.unlock();
}

TEST(Cli, SharedNeedsOneServer) {
    auto f = dlock_cli({"--url", "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3", "run", "--shared",
                        "k", "--", "true"});
    EXPECT_EQ(f.code, 64);
    EXPECT_NE(f.err.find("--shared"), std::string::npos) << f.err;
}

TEST(Cli, SharedTakesOneKeyAndNoPermits) {
    dlock::support::RedisServer server;
    for (auto args : {std::vector<std::string>{"--shared", "a", "b"}, {"--shared", "--permits", "2", "a"}}) {
        std::vector<std::string> argv{"--url", server.uri(), "run"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--", "true"});
        auto refused = dlock_cli(argv);
        EXPECT_EQ(refused.code, 64) << refused.err;
        EXPECT_NE(refused.err.find("--shared takes one key"), std::string::npos) << refused.err;
    }
    EXPECT_EQ(server.cli({"DBSIZE"}), "0");
}
