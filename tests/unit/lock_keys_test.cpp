// LockKeys (hold/lock_keys.hpp) for names with odd bytes, and its copies
// and moves: every key name as the scripts expect it, "<prefix>{<tag>}<suffix>".
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "hold/lock_keys.hpp"
#include "lock/semaphore_keys.hpp"

using dlock::detail::LockKeys;

namespace {

void expect_keys(const LockKeys& keys, const std::string& name) {
    const std::string lock = "dlock:{" + dlock::detail::key_tag(name) + "}";
    EXPECT_EQ(keys.lock, lock);
    EXPECT_EQ(keys.fence(), lock + ":fence");
    EXPECT_EQ(keys.channel(), lock + ":ch");
    EXPECT_EQ(keys.line(), lock + ":line");
    EXPECT_EQ(keys.places(), lock + ":places");
    EXPECT_EQ(keys.readers(), lock + ":readers");
    EXPECT_EQ(keys.tombstone("o"), lock + ":done:o");
    EXPECT_EQ(keys.read_tombstone("o"), lock + ":rdone:o");
    dlock::detail::SemaphoreKeys sem(name);
    EXPECT_EQ(keys.semaphore_permits(), sem.permits);
    EXPECT_EQ(keys.semaphore_waiters(), sem.all[3]);
}

}  // namespace

TEST(LockKeys, OddNamesGiveEveryKeyItsName) {
    for (std::string name : {std::string(), std::string("a"), std::string("}"), std::string("{"), std::string("%}{%7D"),
                             std::string("a\0b", 3), std::string("\xff\xfe\x80", 3), std::string(100000, 'x'),
                             std::string(5, '\0')}) {
        LockKeys keys(name);
        expect_keys(keys, name);
        LockKeys copy = keys;
        expect_keys(copy, name);
        LockKeys assigned("other");
        assigned = keys;
        expect_keys(assigned, name);
        LockKeys moved = std::move(copy);
        expect_keys(moved, name);
    }
}

// A moved-from LockKeys: its buffer is gone (empty), its offsets stay, so
// reading a key name throws std::out_of_range from substr. Shows a hazard
// (fails): see the commit message.
TEST(LockKeys, AMovedFromLockKeysReadsWithoutThrowing) {
    LockKeys keys("name");
    LockKeys moved = std::move(keys);
    expect_keys(moved, "name");
    EXPECT_NO_THROW((void)keys.fence());
    EXPECT_NO_THROW((void)keys.semaphore_waiters());
}
