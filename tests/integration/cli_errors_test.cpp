// What the dlock tool says when Redis refuses: Redis's own text, never a bare
// "server error"; a release refused reported as what happened; TLS failures
// with their reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_runner.hpp"
#include "dlock/client.hpp"
#include "redis_server.hpp"

using namespace dlock::test::cli;
using dlock::support::RedisServer;
using dlock::support::RedisServerOptions;

namespace {

// A server past its memory limit: it refuses every write with OOM.
RedisServerOptions out_of_memory() {
    return {.extra_args = {"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}};
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

TEST(CliErrors, AReleaseRefusedIsReportedAsWhatHappened) {
    // May lock and unlock (DEL) but not PUBLISH: Redis runs the release
    // script up to the PUBLISH, so the lock is gone but waiters were not told.
    RedisServer server({.acl_users = {{"worker", "on", ">pw", "~*", "&*", "+@all", "-publish"}}});
    const std::string url = "redis://worker:pw@127.0.0.1:" + std::to_string(server.port());
    auto f = dlock_cli({"--url", url, "run", "k", "--", "sh", "-c", "echo ran"});
    EXPECT_EQ(f.out, "ran\n");
    EXPECT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.err.find("releasing k: Redis refused: "), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("can't run this command"), std::string::npos) << "Redis's own words: " << f.err;
    EXPECT_NE(f.err.find("the lock is no longer held"), std::string::npos) << f.err;
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
