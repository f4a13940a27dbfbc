// Redis's own words survive into the lock's errors: what() of the exception,
// and dlock::last_server_error() after an error_code twin.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "redis_server.hpp"

using dlock::support::RedisServer;

TEST(ServerErrorText, ReachesWhatAndTheErrorCodePath) {
    RedisServer primary;
    RedisServer replica({.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary.port())}});
    dlock::Client client(replica.uri());
    auto lock = client.lock("k");
    try {
        lock.lock();
        FAIL() << "a replica granted a lock";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::server_error);
        EXPECT_NE(std::string(e.what()).find("READONLY You can't write against a read only replica"),
                  std::string::npos)
            << e.what();
    }
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::server_error);
    EXPECT_EQ(dlock::last_server_error().rfind("READONLY", 0), 0u) << dlock::last_server_error();
    // A failure of another kind leaves no stale text behind.
    primary.stop();
    replica.stop();
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_TRUE(ec);
    EXPECT_EQ(dlock::last_server_error(), "");
}
