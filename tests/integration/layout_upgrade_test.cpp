// Rolling upgrades: clients of two data layouts on one name. Layout 1 is the
// lock scripts as they were before the lock hash carried a layout version
// (kept as they were under tests/data/layout1/, run here exactly as that
// library sent them: its prelude in front of each script); layout 2 is
// this library's. Neither may grant a lock the other holds, fencing tokens
// keep increasing across them, and a lock hash of a layout this library does
// not know is refused with errc::layout_mismatch, changing nothing.
// The read side of an RwLock meets the previous version's read scripts
// (tests/data/rw1/) the same way: its readers share a name with this
// version's, the last reader of either tells whoever waits, and what this
// version adds (wait_until_free's mark in the reader state) the previous
// scripts pass by.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "eventually.hpp"
#include "hold/lock_keys.hpp"
#include "layout1_client.hpp"
#include "read_side_client.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using dlock::support::Layout1Client;
using dlock::support::ReadSideClient;

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

std::int64_t read_granted(const dlock::Reply& reply, long long count) {
    EXPECT_EQ(reply.elements.size(), 3u);
    EXPECT_EQ(reply.elements.at(0).integer, 1) << "not granted";
    EXPECT_EQ(reply.elements.at(2).integer, count);
    return reply.elements.at(1).integer;
}

// The previous version's scripts are the very ones it loaded.
TEST_F(LayoutUpgrade, ThePreviousReadScriptsAreThoseThePreviousLibrarySent) {
    EXPECT_EQ(dlock::support::rw1_script("rw_read_acquire").sha1(), "a5a6a631109462a8611d712c5939ec95337e983a");
    EXPECT_EQ(dlock::support::rw1_script("rw_read_release").sha1(), "d3e5eaabfd2c52f73b1776712f08c1933ec5b337");
    EXPECT_EQ(dlock::support::rw1_script("rw_read_renew").sha1(), "708ec1ada506ae939e44e86936c7d11d3147b50c");
}

// Resent copies, late copies of older operations, undone operations: the
// read scripts of both versions answer the same sequence the same way,
// beside another reader and alone (the common paths and the general code).
TEST_F(LayoutUpgrade, TheReadScriptsAnswerEveryCopyAsThePreviousOnesDid) {
    using Version = ReadSideClient::Version;
    const auto answers = [&](Version version, const std::string& name, bool beside) {
        ReadSideClient other(old_side, name, "other:1", version);
        if (beside) read_granted(other.acquire(), 1);
        ReadSideClient r(client, name, "reader:1", version);
        std::vector<long long> out;
        std::int64_t token = 0;
        const auto acquire = [&](const char* op, const char* mode) {
            const auto reply = r.acquire_with(op, mode);
            out.push_back(reply.elements.at(0).integer);
            if (reply.elements.size() == 3) {
                if (token == 0) token = reply.elements[1].integer;
                EXPECT_EQ(reply.elements[1].integer, token) << op;
                out.push_back(reply.elements[2].integer);
            }
        };
        const auto release = [&](const char* op, const char* how_many, const char* undoing = "") {
            out.push_back(r.release_with(op, how_many, undoing));
        };
        acquire("5", "fresh");
        acquire("5", "fresh");    // resent
        acquire("3", "fresh");    // a late copy of an older one
        acquire("6", "reenter");
        acquire("6", "reenter");  // resent
        release("7", "1");
        release("7", "1");        // resent
        release("6", "1");        // a late copy of an older one
        release("9", "1", "8");   // undoing re-entry 8, which never applied
        acquire("8", "reenter");  // its late copy
        acquire("10", "reenter");
        release("11", "1", "10"); // undoing re-entry 10, which applied
        release("12", "all");
        release("12", "all");     // resent
        release("13", "1");       // not a reader any more
        acquire("12", "fresh");   // late copies once it left
        acquire("11", "reenter");
        acquire("14", "reenter");
        acquire("15", "fresh");
        release("16", "1");
        if (beside) {
            EXPECT_EQ(other.release(), 0);
        }
        return out;
    };
    for (const bool beside : {false, true}) {
        const auto previous = answers(Version::previous, beside ? "copies-a" : "copies-b", beside);
        const auto current = answers(Version::current, beside ? "copies-c" : "copies-d", beside);
        EXPECT_EQ(current, previous) << (beside ? "beside another reader" : "alone");
        EXPECT_EQ(previous, (std::vector<long long>{1, 1, 1, 1, -2, 1, 2, 1, 2, 1, 1, -2, -3, -2, 1, 2, 1, 0, 0, -1,
                                                   -2, -2, -1, 1, 1, 0}));
    }
}

// Readers of both versions hold one name together (one token, each its own
// count), exclude a writer together, and whichever leaves last tells the
// writer that waits (60 s leases: a writer that slept would retry 20 s later).
TEST_F(LayoutUpgrade, ReadersOfBothVersionsShareANameAndTheLastTellsAWaitingWriter) {
    for (const bool previous_last : {true, false}) {
        const std::string name = previous_last ? "read-a" : "read-b";
        const dlock::detail::LockKeys keys(name);
        ReadSideClient previous(old_side, name, "oldclient:1", ReadSideClient::Version::previous, "60000");
        ReadSideClient current(client, name, "newclient:1", ReadSideClient::Version::current, "60000");
        auto& first = previous_last ? current : previous;
        auto& last = previous_last ? previous : current;
        const auto token = read_granted(first.acquire(), 1);
        EXPECT_EQ(read_granted(last.acquire(), 1), token);
        EXPECT_EQ(read_granted(first.acquire("reenter"), 2), token);
        EXPECT_EQ(read_granted(last.acquire("reenter"), 2), token);
        EXPECT_EQ(first.renew(), 1);
        EXPECT_EQ(last.renew(), 1);
        EXPECT_EQ(server.cli({"ZCARD", std::string(keys.readers())}), "2");
        std::atomic<bool> wrote{false};
        std::thread writer([&] {
            dlock::RwLock rw(client, name, {.lease = 60s});
            rw.lock();
            wrote = true;
            rw.unlock();
        });
        std::this_thread::sleep_for(300ms);
        EXPECT_EQ(first.release(), 1);
        EXPECT_EQ(last.release(), 1);
        EXPECT_EQ(first.release(), 0);
        std::this_thread::sleep_for(200ms);
        EXPECT_FALSE(wrote) << "a reader still holds";
        const auto released = std::chrono::steady_clock::now();
        EXPECT_EQ(last.release(), 0);
        writer.join();
        EXPECT_LT(std::chrono::steady_clock::now() - released, 5s) << "the writer slept past the last reader's release";
        EXPECT_EQ(server.cli({"EXISTS", std::string(keys.readers()), keys.reader_state()}), "0");
    }
}

// wait_until_free marks the reader state ('w'): the previous scripts never
// read it and keep answering as before; their last reader always published,
// so the caller wakes; the mark left behind ends with the state hash's
// lease, or with this version's last reader (which then publishes once more).
TEST_F(LayoutUpgrade, ThePreviousReadScriptsPassByTheMarkOfAWaitUntilFree) {
    const dlock::detail::LockKeys keys("read-c");
    ReadSideClient previous(old_side, "read-c", "oldclient:1", ReadSideClient::Version::previous, "60000");
    ReadSideClient other(old_side, "read-c", "oldclient:2", ReadSideClient::Version::previous, "60000");
    read_granted(previous.acquire(), 1);
    dlock::Client admin(server.uri());
    auto freed = std::async(std::launch::async, [&] {
        return dlock::wait_until_free(admin, "read-c", std::chrono::steady_clock::now() + 40s);
    });
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"HGET", keys.reader_state(), "w"}) == "1"; }, 5s));
    read_granted(other.acquire(), 1);
    EXPECT_EQ(other.release(), 0);
    read_granted(previous.acquire("reenter"), 2);
    EXPECT_EQ(previous.renew(), 1);
    EXPECT_EQ(previous.release(), 1);
    EXPECT_EQ(freed.wait_for(200ms), std::future_status::timeout) << "a reader still holds";
    EXPECT_EQ(previous.release(), 0);
    ASSERT_EQ(freed.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    // The mark is all that is left of the readers, and goes with the lease.
    EXPECT_EQ(server.cli({"HKEYS", keys.reader_state()}), "w");
    const auto left = std::stol(server.cli({"PTTL", keys.reader_state()}));
    EXPECT_GT(left, 0);
    EXPECT_LE(left, 60'000);
    ReadSideClient current(client, "read-c", "newclient:1", ReadSideClient::Version::current);
    read_granted(current.acquire(), 1);
    EXPECT_EQ(current.release(), 0);
    EXPECT_EQ(server.cli({"EXISTS", std::string(keys.readers()), keys.reader_state()}), "0");
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
