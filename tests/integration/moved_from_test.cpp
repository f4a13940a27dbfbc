// What every lock kind's moved-from object does: each call of the public
// surface gives errc::invalid_argument (thrown, or in ec), the queries say
// "nothing held", unlock() reports nothing and nothing crashes; assigning a
// live object to it makes it usable again.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <system_error>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;

namespace {

template <typename F>
std::error_code thrown_by(F&& call) {
    try {
        call();
    } catch (const dlock::Error& e) {
        return e.code();
    }
    return {};
}

// The exclusive surface shared by Lock, FairLock, RwLock (write side), Redlock and MultiLock.
template <typename L>
void expect_moved_from_exclusive(L& moved, L& live, const char* kind) {
    SCOPED_TRACE(kind);
    std::error_code ec;
    EXPECT_FALSE(moved.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    ec.clear();
    EXPECT_FALSE(moved.try_lock_until(std::chrono::steady_clock::now() + 10ms, ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { moved.lock(); }), dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { (void)moved.lock(std::stop_token{}); }), dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { (void)moved.try_lock(); }), dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { (void)moved.try_lock_for(10ms); }), dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { (void)moved.try_lock_until(std::chrono::system_clock::now() + 10ms); }),
              dlock::errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] {
                  (void)moved.try_lock_until(std::chrono::steady_clock::now() + 10ms, std::stop_token{});
              }),
              dlock::errc::invalid_argument);
    ec.clear();
    moved.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    moved.unlock();
    EXPECT_FALSE(moved.is_held());
    EXPECT_EQ(moved.hold_count(), 0u);
    EXPECT_FALSE(moved.lost_token().stop_requested());
    EXPECT_FALSE(moved.lost_reason().has_value());
    EXPECT_EQ(moved.valid_until(), std::chrono::steady_clock::time_point{});
    // Usable again once a live object is assigned to it.
    moved = std::move(live);
    EXPECT_TRUE(moved.try_lock());
    EXPECT_TRUE(moved.is_held());
    moved.unlock();
}

}  // namespace

TEST(EveryKind, AMovedFromObjectGivesATypedErrorAndNeverCrashes) {
    dlock::support::RedisServer a, b, c;
    dlock::Client client(a.uri());
    {
        auto live = client.lock("moved-lock");
        auto moved = client.lock("moved-lock");
        auto target = std::move(moved);
        expect_moved_from_exclusive(moved, live, "Lock");  // NOLINT(bugprone-use-after-move)
        EXPECT_EQ(moved.fencing_token(), 0u);
    }
    {
        dlock::FairLock live(client, "moved-fair"), moved(client, "moved-fair");
        auto target = std::move(moved);
        expect_moved_from_exclusive(moved, live, "FairLock");  // NOLINT(bugprone-use-after-move)
    }
    {
        dlock::RwLock live(client, "moved-rw"), moved(client, "moved-rw");
        auto target = std::move(moved);
        std::error_code ec;
        EXPECT_FALSE(moved.try_lock_shared(ec));  // NOLINT(bugprone-use-after-move)
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { moved.lock_shared(); }), dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { (void)moved.try_lock_shared_for(10ms); }), dlock::errc::invalid_argument);
        ec.clear();
        EXPECT_FALSE(moved.try_lock_shared_until(std::chrono::steady_clock::now() + 10ms, ec));
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
        ec.clear();
        moved.unlock_shared(ec);
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
        moved.unlock_shared();
        EXPECT_FALSE(moved.is_held_shared());
        EXPECT_EQ(moved.shared_hold_count(), 0u);
        EXPECT_FALSE(moved.shared_lost_reason().has_value());
        expect_moved_from_exclusive(moved, live, "RwLock");
    }
    {
        dlock::Masters masters({a.uri(), b.uri(), c.uri()});
        dlock::Redlock live(masters, "moved-redlock"), moved(masters, "moved-redlock");
        auto target = std::move(moved);
        EXPECT_TRUE(moved.last_outcomes().empty());  // NOLINT(bugprone-use-after-move)
        expect_moved_from_exclusive(moved, live, "Redlock");
        EXPECT_EQ(moved.fencing_token(), 0u);
    }
    {
        dlock::MultiLock live(client, {"moved-m1", "moved-m2"}), moved(client, {"moved-m1", "moved-m2"});
        auto target = std::move(moved);
        expect_moved_from_exclusive(moved, live, "MultiLock");  // NOLINT(bugprone-use-after-move)
    }
    {
        dlock::Semaphore live(client, "moved-sem", {.limit = 1}), moved(client, "moved-sem", {.limit = 1});
        auto target = std::move(moved);
        std::error_code ec;
        EXPECT_FALSE(moved.try_acquire(1, ec).is_held());  // NOLINT(bugprone-use-after-move)
        EXPECT_EQ(ec, dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { (void)moved.acquire(); }), dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { (void)moved.try_acquire(); }), dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { (void)moved.try_acquire_for(10ms); }), dlock::errc::invalid_argument);
        EXPECT_EQ(thrown_by([&] { (void)moved.set_limit(2); }), dlock::errc::invalid_argument);
        moved = std::move(live);
        auto permit = moved.try_acquire();
        EXPECT_TRUE(permit.is_held());
    }
}
