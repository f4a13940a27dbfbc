// `dlock run --json-events`: the events a log shipper reads on stderr, one
// JSON object per line. Through the binary, against real servers.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using namespace dlock::test::cli;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The "event" of each line that is an event, in order.
std::vector<std::string> event_names(const std::string& err) {
    std::vector<std::string> events;
    for (const auto& line : lines_of(err)) {
        const auto at = line.find("\"event\": \"");
        if (line.empty() || line.front() != '{' || at == std::string::npos) continue;
        events.push_back(line.substr(at + 10, line.find('"', at + 10) - at - 10));
    }
    return events;
}

// The lines that are not one JSON object each.
std::string non_json_lines(const std::string& err) {
    std::string found;
    for (const auto& line : lines_of(err))
        if (line.empty() || line.front() != '{' || line.back() != '}') found += line + "\n";
    return found;
}

// A run that lost its lease: exit 79, every line JSON, and one "lost"
// between acquired and exited (renewals aside).
void expect_one_loss(const Finished& f) {
    EXPECT_EQ(f.code, 79) << f.err;
    EXPECT_EQ(non_json_lines(f.err), "") << f.err;
    auto events = event_names(f.err);
    std::erase(events, "renewed");
    EXPECT_EQ(events, (std::vector<std::string>{"acquired", "lost", "exited"})) << f.err;
}

}  // namespace

TEST(CliEvents, OneLinePerEvent) {
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri(), "run", "--json-events", "job", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(f.code, 3);
    EXPECT_EQ(non_json_lines(f.err), "");
    for (const auto& line : lines_of(f.err)) EXPECT_NE(line.find("\"key\": \"job\""), std::string::npos) << line;
    EXPECT_EQ(event_names(f.err), (std::vector<std::string>{"acquired", "exited", "released"})) << f.err;
    EXPECT_NE(f.err.find("\"fencing_token\": "), std::string::npos);
    EXPECT_NE(f.err.find("\"exit_code\": 3"), std::string::npos);

    // Renewals of a 300 ms lease during a one-second command.
    f = dlock_cli({"--url", server.uri(), "run", "--json-events", "--ttl", "300ms", "job", "--", "sleep", "1"});
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_GE(lines_of(f.err).size(), 3u + 2u) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"renewed\", \"key\": \"job\", \"valid_for_ms\": "), std::string::npos) << f.err;

    dlock::Client client(server.uri());
    auto lock = client.lock("job");
    lock.lock();
    auto running = start({"--url", server.uri(), "run", "--json-events", "--wait", "5s", "job", "--", "true"});
    std::this_thread::sleep_for(1500ms);
    lock.unlock();
    f = finish(running);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"waiting\", \"key\": \"job\", \"holder\": \"held by host="), std::string::npos)
        << f.err;
}

// The loop sees the loss first; the release at the end fails with the same
// loss. One hold, one "lost".
TEST(CliEvents, ALostLeaseIsOneLostEvent) {
    RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--json-events", "--ttl", "3s", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    auto f = finish(run);
    expect_one_loss(f);
    EXPECT_NE(f.err.find("\"event\": \"lost\", \"key\": \"victim\", \"reason\": \"revoked\""), std::string::npos)
        << f.err;
}

// A shipper parses each line of the stream as JSON: what dlock would say to
// people (a lost lease, a conflict, an error, a warning, -v) is an event too.
TEST(CliEvents, EveryLineDlockWritesIsAJsonObject) {
    RedisServer server;
    const auto down = "redis://127.0.0.1:" + std::to_string(dlock::support::free_port());
    const auto down2 = "redis://127.0.0.1:" + std::to_string(dlock::support::free_port());
    auto run = start({"--url", server.uri(), "run", "--json-events", "-v", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    dlock::Client client(server.uri());
    auto busy = client.lock("busy");
    busy.lock();
    std::vector<Finished> finished{
        dlock_cli({"--url", server.uri(), "run", "--json-events", "--no-wait", "busy", "--", "true"}),
        dlock_cli({"--url", down, "--connect-timeout", "300ms", "run", "--json-events", "k", "--", "true"}),
        dlock_cli({"--url", server.uri() + "," + down + "," + down2, "--connect-timeout", "300ms", "run",
                   "--json-events", "k", "--", "true"}),
        dlock_cli({"--url", server.uri(), "run", "--json-events", "--ttl", "5x", "k", "--", "true"}),
        dlock_cli({"--url", server.uri(), "run", "--json-events", "k", "--", "/no/such/command"}),
    };
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    finished.push_back(finish(run));
    const std::vector<int> codes{75, 69, 69, 64, 127, 79};
    for (std::size_t i = 0; i < finished.size(); ++i) {
        const auto& f = finished[i];
        EXPECT_EQ(f.code, codes[i]) << i << ": " << f.err;
        EXPECT_FALSE(f.err.empty()) << i;
        EXPECT_EQ(non_json_lines(f.err), "") << i << ": " << f.err;
    }
    EXPECT_NE(finished[1].err.find("\"event\": \"error\", \"key\": \"k\", \"error\": "), std::string::npos)
        << finished[1].err;
    EXPECT_NE(finished[3].err.find("\"event\": \"error\", \"key\": \"k\", \"error\": \"--ttl"), std::string::npos)
        << finished[3].err;
    EXPECT_NE(finished[4].err.find("/no/such/command: No such file"), std::string::npos) << finished[4].err;
}

// The multi-lock, the semaphore and the read side speak in events as a lock
// does: their usage errors, a conflict and a lost lease (once).
TEST(CliEvents, SeveralKeysPermitsAndSharedAreEventsToo) {
    RedisServer server;
    const auto url = server.uri();
    const auto masters = url + "," + url + "," + url;
    std::vector<std::vector<std::string>> refused{
        {"--url", url, "run", "--json-events", "--permits", "2", "a", "b", "--", "true"},
        {"--url", url, "run", "--json-events", "--shared", "a", "b", "--", "true"},
        {"--url", url, "run", "--json-events", "--shared", "--permits", "2", "a", "--", "true"},
        {"--url", masters, "run", "--json-events", "--shared", "a", "--", "true"},
        {"--url", masters, "run", "--json-events", "a", "b", "--", "true"},
    };
    for (const auto& args : refused) {
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 64) << args[4] << ": " << f.err;
        EXPECT_EQ(non_json_lines(f.err), "") << args[4] << ": " << f.err;
        EXPECT_EQ(event_names(f.err), std::vector<std::string>{"error"}) << args[4] << ": " << f.err;
    }
    EXPECT_EQ(server.cli({"DBSIZE"}), "0");

    // Not acquired: a permit, the read side.
    dlock::Client client(url);
    dlock::Semaphore semaphore(client, "pool", {.limit = 1});
    auto permit = semaphore.try_acquire();
    ASSERT_TRUE(permit);
    auto writer = client.lock("catalog");
    writer.lock();
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--url", url, "run", "--json-events", "--no-wait", "--permits", "1", "pool", "--", "true"},
             {"--url", url, "run", "--json-events", "--no-wait", "--shared", "catalog", "--", "true"}}) {
        auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 75) << args[5] << ": " << f.err;
        EXPECT_EQ(non_json_lines(f.err), "") << args[5] << ": " << f.err;
        EXPECT_EQ(event_names(f.err), std::vector<std::string>{"not_acquired"}) << args[5] << ": " << f.err;
    }
    writer.unlock();

    // One key of several lost: one "lost", and every line names both keys.
    auto run = start({"--url", url, "run", "--json-events", "--ttl", "3s", "k1", "k2", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "k1") && held(server, "k2"); }));
    EXPECT_EQ(dlock_cli({"--url", url, "release", "--force", "k2"}).code, 0);
    auto f = finish(run);
    expect_one_loss(f);
    for (const auto& line : lines_of(f.err))
        EXPECT_NE(line.find("\"keys\": [\"k1\", \"k2\"]"), std::string::npos) << line;

    // A lost permit: one "lost" too.
    run = start(
        {"--url", url, "run", "--json-events", "--permits", "1", "--ttl", "300ms", "gone", "--", "sleep", "10"});
    ASSERT_TRUE(eventually([&] { return server.cli({"ZCARD", "dlock:sem:{gone}"}) == "1"; }));
    server.cli({"DEL", "dlock:sem:{gone}"});
    f = finish(run);
    expect_one_loss(f);
}

namespace {

// The "lost" line of a finished run.
std::string lost_line(const std::string& err) {
    for (const auto& line : lines_of(err))
        if (line.find("\"event\": \"lost\"") != std::string::npos) return line;
    return {};
}

}  // namespace

// The "lost" event says why (a LostReason's name) and in words: each reason
// produced for real against redis-server.
TEST(CliEvents, TheLostEventSaysWhy) {
    RedisServer server({.acl_users = {{"locker", "on", ">pw", "~*", "&*", "+@all"}}});
    const auto url = server.uri();
    const auto as_locker = "redis://locker:pw@127.0.0.1:" + std::to_string(server.port());
    auto run_until_lost = [&](const std::string& key, const std::string& client_url, auto cause, auto after) {
        auto run = start({"--url", client_url, "--connect-timeout", "300ms", "run", "--json-events", "--ttl", "900ms",
                          "--grace", "100ms", key, "--", "sleep", "30"});
        EXPECT_TRUE(eventually([&] { return held(server, key); }));
        cause();
        EXPECT_TRUE(eventually([&] { return !lost_line(read_file(run.err_path)).empty(); }, 5s))
            << read_file(run.err_path);
        after();
        auto f = finish(run);
        expect_one_loss(f);
        return lost_line(f.err);
    };
    auto nothing = [] {};

    auto line = run_until_lost(
        "revoked", url, [&] { EXPECT_EQ(dlock_cli({"--url", url, "release", "--force", "revoked"}).code, 0); },
        nothing);
    EXPECT_NE(line.find("\"reason\": \"revoked\", \"message\": \"the lock was revoked"), std::string::npos) << line;

    line = run_until_lost("deleted", url, [&] { server.cli({"DEL", "dlock:{deleted}"}); }, nothing);
    EXPECT_NE(line.find("\"reason\": \"taken_over\""), std::string::npos) << line;

    line = run_until_lost(
        "forbidden", as_locker, [&] { server.cli({"ACL", "SETUSER", "locker", "-evalsha", "-eval"}); },
        [&] { server.cli({"ACL", "SETUSER", "locker", "+@all"}); });
    EXPECT_NE(line.find("\"reason\": \"renewal_refused\""), std::string::npos) << line;

    // A server that answers nothing: no renewal is confirmed in time.
    line = run_until_lost("stalled", url, [&] { server.pause(); }, [&] { server.resume(); });
    EXPECT_NE(line.find("\"reason\": \"expired\", \"message\": \"the lock's lease expired"), std::string::npos)
        << line;
}

// Without events the line for people names the reason too.
TEST(CliEvents, TheLostMessageForPeopleNamesTheReason) {
    RedisServer server;
    auto run = start({"--url", server.uri(), "run", "--ttl", "3s", "victim", "--", "sleep", "30"});
    ASSERT_TRUE(eventually([&] { return held(server, "victim"); }));
    EXPECT_EQ(dlock_cli({"--url", server.uri(), "release", "--force", "victim"}).code, 0);
    auto f = finish(run);
    EXPECT_EQ(f.code, 79) << f.err;
    EXPECT_NE(f.err.find("the lock on victim was lost: revoked by `dlock release --force`"), std::string::npos)
        << f.err;
}

// A log shipper sees every wait: "waiting" as soon as the first attempt is
// answered busy, not only after a second (the rule for a terminal's line):
// also a wait that ends in well under a second.
TEST(CliEvents, WaitingIsToldAtTheFirstBusyAnswer) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.lock("short-wait");
    lock.lock();
    auto f = dlock_cli({"--url", server.uri(), "run", "--json-events", "--wait", "300ms", "short-wait", "--", "true"});
    EXPECT_EQ(f.code, 75) << f.err;
    EXPECT_EQ(event_names(f.err), (std::vector<std::string>{"waiting", "not_acquired"})) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"waiting\", \"key\": \"short-wait\", \"holder\": \"held by host="),
              std::string::npos)
        << f.err;
    // Freed while waiting: waiting, then acquired.
    auto running = start({"--url", server.uri(), "run", "--json-events", "--wait", "5s", "short-wait", "--", "true"});
    EXPECT_TRUE(eventually([&] { return read_file(running.err_path).find("\"waiting\"") != std::string::npos; }));
    lock.unlock();
    f = finish(running);
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(event_names(f.err), (std::vector<std::string>{"waiting", "acquired", "exited", "released"})) << f.err;
    // Free at the first attempt: no "waiting".
    f = dlock_cli({"--url", server.uri(), "run", "--json-events", "--wait", "5s", "short-wait", "--", "true"});
    EXPECT_EQ(event_names(f.err), (std::vector<std::string>{"acquired", "exited", "released"})) << f.err;
}
