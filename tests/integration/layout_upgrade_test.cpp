// Rolling upgrades: clients of two data layouts on one name. Layout 1 is the
// lock scripts as they were before the lock hash carried a layout version
// (kept as they were under tests/data/layout1/, run here exactly as that
// library sent them: its prelude in front of each script); layout 2 is
// this library's. Neither may grant a lock the other holds, fencing tokens
// keep increasing across them, and a lock hash of a layout this library does
// not know is refused with errc::layout_mismatch, changing nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "hold/lock_keys.hpp"
#include "redis_server.hpp"

namespace {

std::string layout1_text(const std::string& script) {
    std::string text;
    for (const auto* part : {"publish", "prelude"}) {
        std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/layout1/") + part + ".lua");
        std::stringstream s;
        s << in.rdbuf();
        text += s.str();
    }
    std::ifstream in(std::string(DLOCK_SOURCE_DIR "/tests/data/layout1/") + script + ".lua");
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << script;
    return text + s.str();
}

// A client of layout 1 on one name, with the keys and arguments that
// library sent (acquire: try_lock's, no place in line; release: all holds).
class Layout1Client {
public:
    Layout1Client(dlock::Client& client, const std::string& name, std::string owner)
        : client_(client), keys_(name), owner_(std::move(owner)), tombstone_(keys_.tombstone(owner_)) {}

    // {1, token, count}, {0, pttl}, {-1}, {-2}
    dlock::Reply acquire() {
        const auto op = std::to_string(++op_);
        std::string_view k[] = {keys_.lock,         keys_.fence(), tombstone_, keys_.readers(),
                                keys_.semaphore_permits(), keys_.semaphore_waiters(), keys_.line(), keys_.places()};
        std::string_view a[] = {owner_, "30000", op, "fresh", "600000", "1", "old host", "", "9000", ""};
        return client_.eval(acquire_, k, a);
    }
    long long release() {
        const auto op = std::to_string(++op_);
        std::string_view k[] = {keys_.lock, keys_.fence(), keys_.channel(), tombstone_, keys_.line(), keys_.places()};
        std::string_view a[] = {owner_, "30000", op, "all", "600000", "", "9000"};
        return client_.eval(release_, k, a).integer;
    }

private:
    dlock::Client& client_;
    dlock::detail::LockKeys keys_;
    std::string owner_, tombstone_;
    long op_ = 0;
    const dlock::Script acquire_{layout1_text("acquire")};
    const dlock::Script release_{layout1_text("release")};
};

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
