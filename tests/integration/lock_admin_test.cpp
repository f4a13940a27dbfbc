// The operator's calls: list_locks (SCAN) and wait_until_free.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "redis_server.hpp"

using dlock::support::RedisServer;

TEST(LockAdmin, ListLocksAndWaitUntilFree) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto a = client.lock("list-a", {.ownership = dlock::Ownership::handle});
    auto b = client.lock("list-b", {.ownership = dlock::Ownership::handle});
    a.lock();
    b.lock();
    auto locks = dlock::list_locks(client, "list-*");
    ASSERT_EQ(locks.size(), 2u);
    EXPECT_EQ(locks[0].first, "list-a");
    EXPECT_EQ(locks[1].first, "list-b");
    EXPECT_EQ(locks[0].second.holder.rfind("host=", 0), 0u) << locks[0].second.holder;
    EXPECT_EQ(locks[0].second.fencing_token, a.fencing_token());
    EXPECT_FALSE(dlock::wait_until_free(client, "list-a", std::chrono::steady_clock::now() + std::chrono::milliseconds(200)));
    b.unlock();
    EXPECT_TRUE(dlock::wait_until_free(client, "list-b", std::chrono::steady_clock::now() + std::chrono::seconds(1)));
    EXPECT_THROW(dlock::list_locks(client, ""), dlock::Error);
}
