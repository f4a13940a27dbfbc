// Rolling upgrades: clients of two data layouts on one name. Layout 1 is the
// lock scripts as they were before the lock hash carried a layout version
// (kept as they were under tests/data/layout1/, run here exactly as that
// library sent them: its prelude in front of each script); layout 2 is
// this library's. Neither may grant a lock the other holds, fencing tokens
// keep increasing across them, and a lock hash of a layout this library does
// not know is refused with errc::layout_mismatch, changing nothing.
#include <gtest/gtest.h>

#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "hold/lock_keys.hpp"
#include "layout1_client.hpp"
#include "redis_server.hpp"

using dlock::support::Layout1Client;

namespace {

std::uint64_t granted_token(const dlock::Reply& reply) {
    EXPECT_EQ(reply.elements.size(), 3u);
    EXPECT_EQ(reply.elements.at(0).integer, 1) << "not granted";
    return static_cast<std::uint64_t>(reply.elements.at(1).integer);
}

class LayoutUpgrade : public ::testing::Test {
protected:
    dlock::support::RedisServer server;
    dlock::Client client{server.uri()};
    dlock::Client old_side{server.uri()};
};

TEST_F(LayoutUpgrade, NeitherLayoutGrantsALockTheOtherHoldsAndTokensKeepIncreasing) {
    Layout1Client old(old_side, "shared", "oldclient:1");
    dlock::Lock lock(client, "shared");

    const auto first = granted_token(old.acquire());
    EXPECT_FALSE(lock.try_lock()) << "layout 2 granted a lock layout 1 holds";
    EXPECT_EQ(old.release(), 0);

    ASSERT_TRUE(lock.try_lock());
    const auto second = lock.fencing_token();
    EXPECT_GT(second, first);
    const auto busy = old.acquire();
    ASSERT_EQ(busy.elements.size(), 2u);
    EXPECT_EQ(busy.elements[0].integer, 0) << "layout 1 granted a lock layout 2 holds";
    EXPECT_GT(busy.elements[1].integer, 0);  // the lease left
    lock.unlock();

    const auto third = granted_token(old.acquire());
    EXPECT_GT(third, second);
    // A layout-1 hold is re-entered and released by its own scripts only;
    // layout 2 keeps answering busy while it stands.
    EXPECT_FALSE(lock.try_lock());
    EXPECT_EQ(old.release(), 0);
    ASSERT_TRUE(lock.try_lock());
    EXPECT_GT(lock.fencing_token(), third);
    lock.unlock();
}

TEST_F(LayoutUpgrade, TheWriteSideOfAnRwLockExcludesALayout1Holder) {
    Layout1Client old(old_side, "rw", "oldclient:1");
    dlock::RwLock rw(client, "rw");
    granted_token(old.acquire());
    EXPECT_FALSE(rw.try_lock());
    EXPECT_EQ(old.release(), 0);
    EXPECT_TRUE(rw.try_lock());
    const auto busy = old.acquire();
    ASSERT_GE(busy.elements.size(), 1u);
    EXPECT_EQ(busy.elements[0].integer, 0);
    rw.unlock();
}

// A later library's hold (its lock hash says 'v' 3): this library cannot
// know what that holder expects, so it refuses, and names both layouts.
TEST_F(LayoutUpgrade, ALaterLayoutIsRefusedNamingBothLayouts) {
    const dlock::detail::LockKeys keys("later");
    for (bool held : {true, false}) {
        server.cli({"DEL", keys.lock});
        if (held) server.cli({"HSET", keys.lock, "owner", "newer:1", "count", "1", "seq", "7", "token", "5", "v", "3"});
        else server.cli({"HSET", keys.lock, "token", "5", "v", "3"});  // a free name's counter, say
        server.cli({"PEXPIRE", keys.lock, "60000"});
        const auto before = server.cli({"HGETALL", keys.lock});

        dlock::Lock lock(client, "later");
        try {
            (void)lock.try_lock();
            FAIL() << "a lock hash of layout 3 was not refused";
        } catch (const dlock::Error& e) {
            EXPECT_EQ(e.code(), dlock::errc::layout_mismatch);
            const std::string what = e.what();
            EXPECT_NE(what.find("layout 3"), std::string::npos) << what;
            EXPECT_NE(what.find("layouts 1 to 2"), std::string::npos) << what;
        }
        std::error_code ec;
        dlock::RwLock rw(client, "later");
        EXPECT_FALSE(rw.try_lock(ec));
        EXPECT_EQ(ec, dlock::errc::layout_mismatch);
        EXPECT_EQ(server.cli({"HGETALL", keys.lock}), before) << "the refusal changed the lock hash";
    }
}

}  // namespace
