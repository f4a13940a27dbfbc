// How the semaphore reads its scripts' replies (src/lock/semaphore_replies.hpp),
// on the answers the scripts give and on answers no script gives.
#include "lock/semaphore_replies.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <initializer_list>

#include "dlock/error.hpp"
#include "reply_builders.hpp"

using namespace dlock;
using namespace dlock::detail;
using namespace std::chrono_literals;

using dlock::support::array;
using dlock::support::integer;
using dlock::support::text;

TEST(SemaphoreReplies, AcquireAnswersOfTheScript) {
    const auto granted = read_semaphore_acquire(array({integer(1), integer(4)}));
    EXPECT_EQ(granted.kind, SemaphoreAcquire::Kind::granted);
    EXPECT_EQ(granted.limit, 4u);
    EXPECT_TRUE(is_semaphore_grant(array({integer(1), integer(4)})));

    const auto queued = read_semaphore_acquire(array({integer(0), integer(250)}));
    EXPECT_EQ(queued.kind, SemaphoreAcquire::Kind::not_granted);
    EXPECT_EQ(queued.wake, 250ms);
    EXPECT_EQ(read_semaphore_acquire(array({integer(-2)})).kind, SemaphoreAcquire::Kind::stale);
    const auto over = read_semaphore_acquire(array({integer(-3), integer(2)}));
    EXPECT_EQ(over.kind, SemaphoreAcquire::Kind::over_limit);
    EXPECT_EQ(over.limit, 2u);
}

TEST(SemaphoreReplies, HostileAcquireAnswersAreMalformedNeverAGrant) {
    for (const auto& reply :
         {array({integer(1)}), array({integer(1), integer(0)}), array({integer(1), integer(LLONG_MAX)}),
          array({integer(1), integer(-4)}), array({integer(1), integer(4), integer(9)}), array({integer(2), integer(4)}),
          array({text("1"), integer(4)}), array({integer(1), text("4")}), array({integer(0)}),
          array({integer(-2), integer(1)}), array({integer(-3)}), array({integer(-3), integer(0)}), array({}),
          integer(1), text("OK"), Reply{}}) {
        EXPECT_EQ(read_semaphore_acquire(reply).kind, SemaphoreAcquire::Kind::malformed);
        EXPECT_FALSE(is_semaphore_grant(reply));
    }
}

TEST(SemaphoreReplies, WakeHintIsClampedToALease) {
    EXPECT_EQ(read_semaphore_acquire(array({integer(0), integer(LLONG_MAX)})).wake, max_lease);
    EXPECT_EQ(read_semaphore_acquire(array({integer(0), integer(LLONG_MIN)})).wake, 0ms);
}

TEST(SemaphoreReplies, ReleaseAnswers) {
    EXPECT_EQ(read_semaphore_release(integer(1)), SemaphoreRelease::released);
    EXPECT_EQ(read_semaphore_release(integer(0)), SemaphoreRelease::released);
    EXPECT_EQ(read_semaphore_release(integer(-1)), SemaphoreRelease::not_held);
    for (const auto& reply : {integer(2), integer(-2), integer(LLONG_MIN), text("1"), array({integer(1)}), Reply{}})
        EXPECT_EQ(read_semaphore_release(reply), SemaphoreRelease::malformed);
}

TEST(SemaphoreReplies, SetLimitAnswers) {
    EXPECT_EQ(read_semaphore_set_limit(integer(0)), 0u);
    EXPECT_EQ(read_semaphore_set_limit(integer(7)), 7u);
    for (const auto& reply : {integer(-1), integer(LLONG_MAX), text("7"), Reply{}})
        EXPECT_THROW(read_semaphore_set_limit(reply), Error);
}

TEST(SemaphoreReplies, InspectAnswers) {
    const auto info = read_semaphore_inspect(
        array({integer(4), integer(3), integer(1), array({text("abc:s7#2"), integer(900), text("def:s9#1"), integer(5)})}));
    EXPECT_EQ(info.limit, 4u);
    EXPECT_EQ(info.used, 3u);
    EXPECT_EQ(info.waiting, 1u);
    ASSERT_EQ(info.holders.size(), 2u);
    EXPECT_EQ(info.holders[0].permit, "abc:s7#2");
    EXPECT_EQ(info.holders[0].count, 2u);
    EXPECT_EQ(info.holders[0].ttl, 900ms);
    EXPECT_EQ(info.holders[1].count, 1u);
    // A permit id without '#k' (or with junk after it) counts 0: it is shown, not trusted.
    const auto odd = read_semaphore_inspect(array({integer(1), integer(0), integer(0),
                                                   array({text("x#"), integer(LLONG_MAX), text("y#9z"), integer(-5)})}));
    EXPECT_EQ(odd.holders[0].count, 0u);
    EXPECT_EQ(odd.holders[0].ttl, max_lease);
    EXPECT_EQ(odd.holders[1].count, 0u);
    EXPECT_EQ(odd.holders[1].ttl, 0ms);
}

TEST(SemaphoreReplies, HostileInspectAnswersThrowProtocolError) {
    for (const auto& reply :
         {array({integer(1), integer(0), integer(0)}), array({integer(-1), integer(0), integer(0), array({})}),
          array({integer(1), integer(LLONG_MAX), integer(0), array({})}),
          array({integer(1), integer(0), integer(0), array({text("a")})}),
          array({integer(1), integer(0), integer(0), array({integer(1), integer(1)})}),
          array({integer(1), integer(0), integer(0), integer(3)}), integer(1), Reply{}}) {
        try {
            read_semaphore_inspect(reply);
            ADD_FAILURE() << "read as a semaphore's state";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), errc::protocol_error);
        }
    }
}
