// What the dlock tool says when Redis refuses: Redis's own text, never a bare
// "server error"; a release refused reported as what happened; TLS failures
// with their reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using dlock::support::RedisServer;
using dlock::support::RedisServerOptions;

namespace {

// A server past its memory limit: it refuses every write with OOM.
RedisServerOptions out_of_memory(std::string password = {}) {
    return {.password = std::move(password), .extra_args = {"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}};
}

void fill_past_its_limit(const RedisServer& server) {
    server.cli({"CONFIG", "SET", "maxmemory", "0"});
    dlock::Client client(server.uri());
    client.command({"SET", "filler", std::string(2 << 20, 'x')});
    server.cli({"CONFIG", "SET", "maxmemory", "1mb"});
}

}  // namespace

TEST(CliErrors, OutOfMemoryKeepsRedisText) {
    RedisServer server(out_of_memory());
    fill_past_its_limit(server);
    auto f = dlock_cli({"--url", server.uri(), "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("OOM command not allowed"), std::string::npos) << f.err;
    EXPECT_EQ(std::count(f.err.begin(), f.err.end(), '\n'), 1) << f.err;
}

// A log that reads only the events learns why the command never ran.
TEST(CliErrors, AnAcquisitionRefusedIsAJsonErrorEventWithRedisText) {
    RedisServer server(out_of_memory());
    fill_past_its_limit(server);
    auto f = dlock_cli({"--url", server.uri(), "run", "--json-events", "k", "--", "true"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("\"event\": \"error\", \"key\": \"k\", \"error\": \""), std::string::npos) << f.err;
    const auto event = f.err.find("\"event\": \"error\"");
    ASSERT_NE(event, std::string::npos) << f.err;
    EXPECT_NE(f.err.find("OOM command not allowed", event), std::string::npos) << "Redis's own words: " << f.err;
}

TEST(CliErrors, ReadOnlyReplicaKeepsRedisText) {
    RedisServer primary;
    RedisServer replica({.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary.port())}});
    auto f = dlock_cli({"--url", replica.uri(), "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("READONLY You can't write against a read only replica"), std::string::npos) << f.err;
}

TEST(CliErrors, BadDatabaseIndexKeepsRedisText) {
    RedisServer server;
    auto f = dlock_cli({"--url", server.uri() + "/99", "--connect-timeout", "1s", "run", "k", "--", "true"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("DB index is out of range"), std::string::npos) << f.err;
}

TEST(CliErrors, AReleaseWhoseNoticeIsRefusedStillReleasesCleanly) {
    // May lock and unlock but not PUBLISH: the release's notice to waiters is
    // best effort (a waiter finds out when it tries again), so the release
    // itself succeeds and nothing is reported as refused.
    RedisServer server({.acl_users = {{"worker", "on", ">pw", "~*", "&*", "+@all", "-publish"}}});
    const std::string url = "redis://worker:pw@127.0.0.1:" + std::to_string(server.port());
    auto f = dlock_cli({"--url", url, "run", "k", "--", "sh", "-c", "echo ran"});
    EXPECT_EQ(f.out, "ran\n");
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.err.find("releasing k"), std::string::npos) << f.err;
    EXPECT_EQ(f.err.find("server error"), std::string::npos) << f.err;
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{k}"}), "0");
}

TEST(CliErrors, PlainToTlsAndTlsToPlainSaySo) {
    RedisServer tls({.tls = true});
    auto f = dlock_cli({"--url", "redis://127.0.0.1:" + std::to_string(tls.port()), "--connect-timeout", "1s",
                        "status", "k"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("rediss://"), std::string::npos) << "says the server wants TLS: " << f.err;
    RedisServer plain;
    f = dlock_cli({"--url", "rediss://127.0.0.1:" + std::to_string(plain.port()), "--connect-timeout", "1s",
                   "status", "k"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("does not speak TLS"), std::string::npos) << f.err;
}

TEST(CliErrors, TlsErrorsCarryTheOpenSslReason) {
    RedisServer tls({.tls = true});
    const auto& files = dlock::support::TlsFiles::get();
    auto f = dlock_cli({"--url", "rediss://127.0.0.1:" + std::to_string(tls.port()), "--tls-ca", files.other_ca_cert,
                        "status", "k"});
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_NE(f.err.find("certificate verify failed"), std::string::npos) << f.err;
}

namespace {

// The lines of text that mention a port of ports more than once, or say the password.
std::string lines_naming_a_master_twice(const std::string& text, const std::vector<std::uint16_t>& ports,
                                        const std::string& password) {
    std::istringstream in(text);
    std::string found;
    for (std::string line; std::getline(in, line);) {
        bool twice = line.find(password) != std::string::npos;
        for (auto port : ports) {
            const auto address = "127.0.0.1:" + std::to_string(port);
            const auto first = line.find(address);
            twice |= first != std::string::npos && line.find(address, first + 1) != std::string::npos;
        }
        if (twice) found += line + "\n";
    }
    return found;
}

}  // namespace

// A Redlock's errors come per master: each line names its master once, as
// an operator can find it, and never with its password.
TEST(CliErrors, EachRedlockErrorNamesItsMasterOnceWithoutThePassword) {
    const std::string password = "TOPSECRET9";
    RedisServer good({.password = password}), full(out_of_memory(password)), full2(out_of_memory(password));
    fill_past_its_limit(full);
    fill_past_its_limit(full2);
    const dlock::test::cli::Environment env{{"DLOCK_PASSWORD", password}};
    auto plain = [](const RedisServer& server) { return "redis://127.0.0.1:" + std::to_string(server.port()); };
    // Two masters refuse with OOM: no majority.
    auto f = dlock_cli({"--url", plain(good) + "," + plain(full) + "," + plain(full2), "run", "k", "--", "true"}, env);
    EXPECT_EQ(f.code, 69) << f.err;
    EXPECT_EQ(lines_naming_a_master_twice(f.err, {good.port(), full.port(), full2.port()}, password), "") << f.err;
    for (auto port : {full.port(), full2.port()})
        EXPECT_NE(f.err.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << f.err;

    // One master that takes connections and never answers, one that is not there.
    RedisServer paused({.password = password});
    paused.pause();
    const auto down = dlock::support::free_port();
    const std::vector<std::uint16_t> ports{good.port(), paused.port(), down};
    const auto urls = plain(good) + ",redis://127.0.0.1:" + std::to_string(down) + "," + plain(paused);
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"status", "k"}, {"release", "--force", "k"}, {"wait-free", "k"}}) {
        args.insert(args.begin(), {"--url", urls, "--connect-timeout", "300ms"});
        f = dlock_cli(args, env);
        EXPECT_NE(f.code, 0) << args[4];
        EXPECT_EQ(lines_naming_a_master_twice(f.out + f.err, ports, password), "")
            << args[4] << ":\n" << f.out << f.err;
        EXPECT_NE((f.out + f.err).find("127.0.0.1:" + std::to_string(down) + ": "), std::string::npos)
            << args[4] << ": the failing master is named\n" << f.out << f.err;
    }
    paused.resume();
}

// A server that does not answer lock scripts (CLIENT PAUSE WRITE): `run
// --wait D` gives up at D plus the client's short close (Client::
// max_close_wait), not a command timeout later, and says that the server
// did not answer (69), never that someone holds the lock (75).
TEST(CliErrors, WaitOnAServerThatDoesNotAnswerEndsAtTheDeadline) {
    RedisServer server;
    struct Case {
        std::vector<std::string> args;
        double wait;  // seconds
    };
    // Before the close was bounded: 2.2 s, 2.5 s, 2.5 s and 4.0 s (a command
    // timeout, 2 s here, after the wait).
    const std::vector<Case> cases = {
        {{"run", "--wait", "200ms", "paused", "--", "true"}, 0.2},
        {{"run", "--fair", "--wait", "500ms", "paused-fair", "--", "true"}, 0.5},
        {{"run", "--shared", "--wait", "500ms", "paused-shared", "--", "true"}, 0.5},
        {{"run", "--wait", "1s", "paused-long", "--", "true"}, 1.0},
    };
    // The wait, the client's close, what starting the binary costs, and a
    // generous second for connecting on a busy machine.
    const double slack = std::chrono::duration<double>(dlock::Client::max_close_wait + start_cost()).count() + 1.2;
    for (const auto& c : cases) {
        server.cli({"CLIENT", "PAUSE", "6000", "WRITE"});
        std::vector<std::string> args = {"--url", server.uri()};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const auto f = dlock_cli(args);
        server.cli({"CLIENT", "UNPAUSE"});
        const double took = std::chrono::duration<double>(f.took).count();
        EXPECT_EQ(f.code, 69) << c.args[2] << " " << c.args[3] << ": " << f.err;
        EXPECT_NE(f.err.find("timed out"), std::string::npos) << f.err;
        EXPECT_LT(took, c.wait + slack) << c.args[1] << " " << c.args[2] << " " << c.args[3] << " took " << took << " s";
    }
}

// A server that answers no command at all (stopped: it takes connections
// into its backlog and answers nothing) also stalls the new connection's
// handshake: `run --wait D` still ends at D plus the client's close, not at
// the connect timeout (5 s here; before, the run took the whole connect
// timeout), and says the server did not answer (69). (Not CLIENT PAUSE ALL:
// it holds back CLIENT UNPAUSE too, so each case sat out the whole pause.)
TEST(CliErrors, WaitEndsAtTheDeadlineAlsoWhileTheConnectionIsBeingMade) {
    RedisServer server;
    const double slack = std::chrono::duration<double>(dlock::Client::max_close_wait + start_cost()).count() + 1.2;
    for (const std::string how : {"", "--shared", "--permits=2"}) {
        server.pause();
        std::vector<std::string> args = {"--url", server.uri(), "--connect-timeout", "5s", "run", "--wait", "500ms"};
        if (!how.empty()) args.push_back(how);
        args.insert(args.end(), {"paused-all", "--", "true"});
        const auto f = dlock_cli(args);
        server.resume();
        const double took = std::chrono::duration<double>(f.took).count();
        EXPECT_EQ(f.code, 69) << how << ": " << f.err;
        EXPECT_NE(f.err.find("did not answer"), std::string::npos) << how << ": " << f.err;
        EXPECT_LT(took, 0.5 + slack) << how << " took " << took << " s";
    }
}

// A --wait of 0 (or a few ms) still connects and makes one attempt, as
// flock -w 0 does: a free lock is taken (before, connecting counted against
// the wait and the run ended with 69, "the server did not answer").
TEST(CliErrors, AWaitOfZeroStillTakesAFreeLock) {
    RedisServer server;
    const std::vector<std::vector<std::string>> waits = {{"--wait", "0"}, {"-w", "0"}, {"--wait", "1ms"}};
    for (const auto& wait : waits) {
        std::vector<std::string> args = {"--url", server.uri(), "run"};
        args.insert(args.end(), wait.begin(), wait.end());
        args.insert(args.end(), {"free-now", "--", "true"});
        const auto f = dlock_cli(args);
        EXPECT_EQ(f.code, 0) << wait[0] << " " << wait[1] << ": " << f.err;
    }
}
