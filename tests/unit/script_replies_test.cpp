// How the lock kinds read their scripts' replies (src/lock/script_replies.hpp),
// on the answers the scripts give and on answers no script gives.
#include "lock/script_replies.hpp"
#include "hold/lock_keys.hpp"
#include "lock/semaphore_keys.hpp"
#include "redis/cluster_slots.hpp"
#include "redis/command_format.hpp"

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

TEST(ScriptReplies, AcquireAnswersOfTheScript) {
    const auto granted = read_fresh_acquire(array({integer(1), integer(1795331927095183), integer(1)}));
    EXPECT_EQ(granted.kind, FreshAcquire::Kind::granted);
    EXPECT_EQ(granted.token, 1795331927095183u);
    EXPECT_EQ(granted.count, 1u);

    const auto busy = read_fresh_acquire(array({integer(0), integer(2500)}));
    EXPECT_EQ(busy.kind, FreshAcquire::Kind::busy);
    EXPECT_EQ(busy.lease_left, 2500ms);
    // A huge TTL someone gave the key must not overflow the wait's arithmetic.
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(LLONG_MAX)})).lease_left, max_lease);

    EXPECT_EQ(read_fresh_acquire(array({integer(-2)})).kind, FreshAcquire::Kind::stale_operation);
    // "Not ours" answers a re-entry only.
    EXPECT_EQ(read_fresh_acquire(array({integer(-1)})).kind, FreshAcquire::Kind::malformed);
    EXPECT_EQ(read_reentry(array({integer(-1)})).kind, Reentry::Kind::not_ours);
    EXPECT_EQ(read_reentry(array({integer(0), integer(10)})).kind, Reentry::Kind::not_ours);
    const auto reentered = read_reentry(array({integer(1), integer(7), integer(3)}));
    EXPECT_EQ(reentered.kind, Reentry::Kind::granted);
    EXPECT_EQ(reentered.count, 3u);
}

// Found by the script_replies fuzzer: {9, 77} was read as a grant, and its
// count taken from an element that never arrived.
TEST(ScriptReplies, AcquireAnswerOutsideTheScriptsVocabularyIsMalformed) {
    for (const auto& reply : {array({integer(9), integer(77)}), array({integer(2)}), array({integer(7), integer(1), integer(1)}),
                              array({integer(-3)}), array({integer(1), integer(5)}), array({integer(0)}),
                              array({Reply::make_string("1"), integer(5), integer(1)}), array({}), integer(1), Reply{}}) {
        EXPECT_EQ(read_fresh_acquire(reply).kind, FreshAcquire::Kind::malformed);
        EXPECT_EQ(read_reentry(reply).kind, Reentry::Kind::malformed);
        EXPECT_FALSE(is_grant(reply));
    }
}

// Found by the script_replies fuzzer: a count of 2^32 became a hold with count 0.
TEST(ScriptReplies, GrantedCountIsAtLeastOneAndNeverWraps) {
    EXPECT_EQ(read_fresh_acquire(array({integer(1), integer(5), integer(4294967296)})).count, UINT_MAX);
    EXPECT_EQ(read_fresh_acquire(array({integer(1), integer(5), integer(0)})).count, 1u);
    EXPECT_EQ(read_reentry(array({integer(1), integer(5), integer(4294967296)})).count, UINT_MAX);
}

TEST(ScriptReplies, MasterVotes) {
    const auto granted = read_master_vote(array({integer(1), integer(42), integer(1)}));
    EXPECT_EQ(granted.vote, Vote::granted);
    EXPECT_EQ(granted.token, 42u);
    const auto busy = read_master_vote(array({integer(0), integer(900)}));
    EXPECT_EQ(busy.vote, Vote::held_by_another);
    EXPECT_EQ(busy.lease_left, 900);
    EXPECT_EQ(read_master_vote(array({integer(-2)})).vote, Vote::failed);
    EXPECT_EQ(read_master_vote(integer(1)).vote, Vote::failed);
}

TEST(ScriptReplies, ReleaseCountsNeverWrapToZero) {
    EXPECT_EQ(read_release(integer(0)).kind, Release::Kind::released);
    EXPECT_EQ(read_release(integer(0)).holds_left, 0u);
    EXPECT_EQ(read_release(integer(2)).holds_left, 2u);
    // The server keeps holds: the client must not end its hold.
    EXPECT_EQ(read_release(integer(4294967296)).holds_left, UINT_MAX);
    for (long long refused : {-1, -2, -3}) EXPECT_EQ(read_release(integer(refused)).kind, Release::Kind::not_ours);
    EXPECT_EQ(read_release(Reply::make_status("OK")).kind, Release::Kind::malformed);
}

TEST(ScriptReplies, RenewAndHandOff) {
    EXPECT_TRUE(read_renewed(integer(1)));
    EXPECT_FALSE(read_renewed(integer(0)));
    EXPECT_FALSE(read_renewed(Reply::make_string("1")));
    EXPECT_EQ(read_hand_off(array({integer(1), integer(77)}))->token, 77u);
    EXPECT_EQ(read_hand_off(array({integer(1), integer(77)}))->placed_arrival, 0u);
    EXPECT_EQ(read_hand_off(array({integer(1), integer(77), integer(1795331927000001)}))->placed_arrival,
              1795331927000001u);
    EXPECT_FALSE(read_hand_off(array({integer(0)})));
    EXPECT_FALSE(read_hand_off(array({integer(1)})));
    EXPECT_FALSE(read_hand_off(array({integer(1), integer(77), integer(-3)})));
    EXPECT_FALSE(read_hand_off(array({integer(1), integer(77), integer(5), integer(6)})));
    EXPECT_FALSE(read_hand_off(array({integer(1), text("77")}))) << "a token that is not a number";
}

TEST(ScriptReplies, InspectAndForceRelease) {
    auto empty = [] { return array({}); };
    // inspect.lua's tail when only the exclusive hold is there.
    auto with_tail = [&](std::vector<Reply> head) {
        head.push_back(empty());    // readers
        head.push_back(integer(0));  // line waiters
        head.push_back(integer(0));  // waiting writers
        head.push_back(integer(0));  // semaphore limit
        head.push_back(empty());    // permits
        head.push_back(integer(0));  // semaphore waiters
        Reply reply = array({});
        reply.elements = std::move(head);
        return reply;
    };
    const auto held = read_inspect(with_tail({Reply::make_string("abc:1"), integer(2), integer(900), integer(77),
                                              integer(77), Reply::make_string("host-a/pid 12/thread 3")}));
    EXPECT_TRUE(held.held);
    EXPECT_EQ(held.kind, dlock::LockInfo::Kind::exclusive);
    EXPECT_EQ(held.owner, "abc:1");
    EXPECT_EQ(held.holder, "host-a/pid 12/thread 3");
    EXPECT_EQ(held.hold_count, 2u);
    EXPECT_EQ(held.ttl, 900ms);
    const auto unlabelled = read_inspect(
        with_tail({Reply::make_string("abc:1"), integer(1), integer(900), integer(77), integer(77), Reply{}}));
    EXPECT_TRUE(unlabelled.holder.empty());
    const auto free =
        read_inspect(with_tail({Reply{}, integer(0), integer(-2), integer(0), integer(76), Reply{}}));
    EXPECT_FALSE(free.held);
    EXPECT_EQ(free.kind, dlock::LockInfo::Kind::free);
    EXPECT_EQ(free.last_fencing_token, 76u);
    // Readers and permits.
    const auto readers = read_inspect(array({Reply{}, integer(0), integer(-2), integer(0), integer(5), Reply{},
                                             array({Reply::make_string("c:1"), integer(2), integer(800), integer(5)}),
                                             integer(0), integer(1), integer(0), empty(), integer(0)}));
    EXPECT_TRUE(readers.held);
    EXPECT_EQ(readers.kind, dlock::LockInfo::Kind::shared);
    ASSERT_EQ(readers.readers.size(), 1u);
    EXPECT_EQ(readers.readers[0].owner, "c:1");
    EXPECT_EQ(readers.readers[0].hold_count, 2u);
    EXPECT_EQ(readers.waiters, 1u);
    const auto permits = read_inspect(array({Reply{}, integer(0), integer(-2), integer(0), integer(0), Reply{},
                                             empty(), integer(0), integer(0), integer(3),
                                             array({Reply::make_string("c:s7#2"), integer(900)}), integer(1)}));
    EXPECT_EQ(permits.kind, dlock::LockInfo::Kind::semaphore);
    EXPECT_EQ(permits.semaphore.limit, 3u);
    EXPECT_EQ(permits.semaphore.used, 2u);
    EXPECT_EQ(permits.semaphore.waiting, 1u);
    EXPECT_EQ(permits.holds(), 1u);
    EXPECT_THROW(read_inspect(array({integer(1)})), Error);
    // The six elements of a server running an older inspect script.
    EXPECT_THROW(read_inspect(array({Reply{}, integer(0), integer(-2), integer(0), integer(76), Reply{}})), Error);
    EXPECT_THROW(read_inspect(array({Reply{}, integer(0), integer(-2), integer(0), integer(76), Reply{}, empty(),
                                     integer(0), integer(0), integer(0), empty(), integer(-1)})),
                 Error);
    // Records cut short.
    EXPECT_THROW(read_inspect(array({Reply{}, integer(0), integer(-2), integer(0), integer(5), Reply{},
                                     array({Reply::make_string("c:1"), integer(2)}), integer(0), integer(0), integer(0),
                                     empty(), integer(0)})),
                 Error);

    EXPECT_TRUE(read_force_release(array({Reply::make_string("free")})).broken.empty());
    const auto broken = read_force_release(
        array({Reply::make_string("released"), array({Reply::make_string("abc:1"), integer(1), Reply::make_string("lock")})}));
    ASSERT_EQ(broken.broken.size(), 1u);
    EXPECT_EQ(broken.broken[0].holder, "abc:1");
    const auto refused = read_force_release(
        array({Reply::make_string("refused"), array({Reply::make_string("a:1"), integer(1), Reply::make_string("read"),
                                                     Reply::make_string("b:1"), integer(1), Reply::make_string("read")})}));
    EXPECT_TRUE(refused.refused);
    EXPECT_TRUE(refused.broken.empty());
    ASSERT_EQ(refused.would_break.size(), 2u);
    EXPECT_EQ(refused.would_break[1].kind, dlock::LockInfo::Kind::shared);
    EXPECT_THROW(read_force_release(integer(1)), Error);
    EXPECT_THROW(read_force_release(Reply{}), Error);
    EXPECT_THROW(read_force_release(array({Reply::make_string("released"), array({Reply::make_string("a")})})), Error);
}

TEST(ScriptReplies, RevocationNoticeKeepsEveryByteOfTheName) {
    // The key carries the name's tag (lock_keys.hpp): '}' and '%' percent-encoded.
    const auto notice = read_revocation("revoked abc:1:t-9 1795331927095183 dlock:{a b%7Dc%25}");
    ASSERT_TRUE(notice);
    EXPECT_EQ(notice->owner, "abc:1:t-9");
    EXPECT_EQ(notice->token, 1795331927095183u);
    EXPECT_EQ(notice->name, "a b}c%");
    for (const char* bad : {"revoked abc 12x dlock:{n}", "revoked abc 12 dlock:{n", "revoked abc 12 lock:{n}",
                            "released abc 12 dlock:{n}", "revoked abc", "revoked abc 12 dlock:{",
                            "revoked abc 12 dlock:{a}b}", "revoked abc 12 dlock:{a%7}", "revoked abc 12 dlock:{%41}"})
        EXPECT_FALSE(read_revocation(bad)) << bad;
    EXPECT_FALSE(notice->reader);
    // A reader's notice, and a permit's (which names no lock hash).
    const auto reader = read_revocation("revoked-read abc:2 77 dlock:{r}");
    ASSERT_TRUE(reader);
    EXPECT_TRUE(reader->reader);
    EXPECT_EQ(reader->owner, "abc:2");
    EXPECT_EQ(reader->name, "r");
    EXPECT_FALSE(read_revocation("revoked-permit abc:s3#1 0 dlock:sem:{p}"));
    EXPECT_TRUE(dlock::detail::is_permit_revocation("revoked-permit abc:s3#1 0 dlock:sem:{p}"));
    EXPECT_FALSE(dlock::detail::is_permit_revocation("revoked abc:1 7 dlock:{p}"));
}

// A direct grant's notice names the wait it is for by its arrival number;
// a busy answer to a caller that stands in line carries that number.
TEST(ScriptReplies, GrantNoticeAndBusyAnswerCarryTheArrival) {
    const auto notice = read_grant_notice("granted abc:1:t-9 1795331927095183 1795331927000001 dlock:{a b%7Dc}");
    ASSERT_TRUE(notice);
    EXPECT_EQ(notice->owner, "abc:1:t-9");
    EXPECT_EQ(notice->token, 1795331927095183u);
    EXPECT_EQ(notice->arrival, 1795331927000001u);
    EXPECT_EQ(notice->name, "a b}c");
    for (const char* bad : {"granted abc 12 dlock:{n}", "granted abc 12 3x dlock:{n}", "revoked abc 12 3 dlock:{n}",
                            "granted abc 12 3 dlock:{n"})
        EXPECT_FALSE(read_grant_notice(bad)) << bad;
    const auto placed = read_fresh_acquire(array({integer(0), integer(2500), integer(1795331927000001)}));
    EXPECT_EQ(placed.kind, FreshAcquire::Kind::busy);
    EXPECT_EQ(placed.arrival, 1795331927000001u);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(2500)})).arrival, 0u);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(2500), integer(-5)})).arrival, 0u);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(2500), integer(1), integer(2)})).kind,
              FreshAcquire::Kind::malformed);
}

// The read-write lock's scripts (rw_write_acquire.lua, rw_read_acquire.lua,
// rw_read_release.lua, rw_read_renew.lua) answer in acquire.lua's, release.lua's
// and renew.lua's vocabulary and are read by the same functions.
TEST(RwScriptReplies, AnswersOfTheScripts) {
    // A reader's grant: the token of the last write it follows, its count.
    const auto reader = read_fresh_acquire(array({integer(1), integer(1795331927095183), integer(3)}));
    EXPECT_EQ(reader.kind, FreshAcquire::Kind::granted);
    EXPECT_EQ(reader.token, 1795331927095183u);
    EXPECT_EQ(reader.count, 3u);
    // Must wait: until the writer's lease, or the first reader's, or a
    // waiting writer's mark ends.
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(29'000)})).lease_left, 29'000ms);
    EXPECT_EQ(read_reentry(array({integer(1), integer(5), integer(2)})).count, 2u);
    EXPECT_EQ(read_reentry(array({integer(-1)})).kind, Reentry::Kind::not_ours);
    EXPECT_EQ(read_release(integer(-3)).kind, Release::Kind::not_ours);
    EXPECT_EQ(read_release(integer(2)).holds_left, 2u);
    EXPECT_TRUE(read_renewed(integer(1)));
    EXPECT_FALSE(read_renewed(integer(0)));
}

TEST(RwScriptReplies, AWaitInThePastOrBeyondAnyLeaseIsClamped) {
    // A deadline the server's clock already passed (or a clock step) must
    // not make the waiter spin nor sleep past any lease.
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(-5)})).lease_left, 1ms);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(0)})).lease_left, 1ms);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(LLONG_MIN)})).lease_left, 1ms);
    EXPECT_EQ(read_fresh_acquire(array({integer(0), integer(LLONG_MAX)})).lease_left, max_lease);
}

TEST(RwScriptReplies, AGrantOrWaitWhoseNumbersAreNotIntegersIsMalformed) {
    // Found writing the read-write lock: {1, "x", 1} read as a grant with
    // token 0, and {0, "x"} as a wait of 1 ms; no script sends them.
    for (const auto& reply :
         {array({integer(1), Reply::make_string("1795331927095183"), integer(1)}),
          array({integer(1), integer(7), Reply::make_string("1")}), array({integer(1), Reply{}, integer(1)}),
          array({integer(1), array({integer(7)}), integer(1)}), array({integer(0), Reply::make_string("100")}),
          array({integer(0), Reply::make_error("ERR x")})}) {
        EXPECT_EQ(read_fresh_acquire(reply).kind, FreshAcquire::Kind::malformed);
        EXPECT_EQ(read_reentry(reply).kind, Reentry::Kind::malformed);
        EXPECT_FALSE(is_grant(reply));
    }
}

// Every key of one lock must hash to one cluster slot whatever its name
// holds: the tag between the braces is never empty and never ends early.
TEST(LockKeys, EveryKeyOfALockSharesItsHashSlot) {
    using dlock::detail::key_slot;
    for (std::string name : {"}", "}}", "x{}y", "{", "{}", "a}b", "%", "%7D", "plain", "with space", "}{x}"}) {
        const dlock::detail::LockKeys keys(name);
        const auto slot = key_slot(keys.lock);
        for (const auto& key : {std::string(keys.fence()), std::string(keys.channel()), std::string(keys.line()),
                                std::string(keys.places()), keys.tombstone("o:1"), std::string(keys.readers()),
                                keys.reader_state(), keys.waiting_writers(), keys.read_tombstone("o:1"),
                                keys.lock + ":inbox:abc"})
            EXPECT_EQ(key_slot(key), slot) << name << " " << key;
        const dlock::detail::SemaphoreKeys semaphore(name);
        for (const auto& key : semaphore.all) EXPECT_EQ(key_slot(key), key_slot(semaphore.permits)) << name << " " << key;
        EXPECT_EQ(dlock::detail::name_of_tag(dlock::detail::key_tag(name)), name);
    }
    // Names without '%' or '}' keep the keys they always had.
    EXPECT_EQ(dlock::detail::LockKeys("orders:42").lock, "dlock:{orders:42}");
    EXPECT_EQ(dlock::detail::LockKeys("%").lock, "dlock:{%25}");
    EXPECT_NE(dlock::detail::LockKeys("%7D").lock, dlock::detail::LockKeys("}").lock);
}

// A lock's key names are made in one buffer; each reads as the name it
// always had, in a copy too (the copy reads its own buffer).
TEST(LockKeys, EachKeyNameReadsWholeFromTheSharedBuffer) {
    const dlock::detail::LockKeys made("a}b");
    const auto keys = made;
    EXPECT_EQ(keys.lock, "dlock:{a%7Db}");
    EXPECT_EQ(keys.fence(), "dlock:{a%7Db}:fence");
    EXPECT_EQ(keys.channel(), "dlock:{a%7Db}:ch");
    EXPECT_EQ(keys.line(), "dlock:{a%7Db}:line");
    EXPECT_EQ(keys.places(), "dlock:{a%7Db}:places");
    EXPECT_EQ(keys.readers(), "dlock:{a%7Db}:readers");
    EXPECT_EQ(keys.semaphore_permits(), "dlock:sem:{a%7Db}");
    EXPECT_EQ(keys.semaphore_waiters(), "dlock:sem:{a%7Db}:waiters");
    EXPECT_EQ(keys.semaphore_permits(), dlock::detail::SemaphoreKeys("a}b").permits);
    EXPECT_EQ(keys.tombstone("o:1"), "dlock:{a%7Db}:done:o:1");
    EXPECT_EQ(keys.read_tombstone("o:1"), "dlock:{a%7Db}:rdone:o:1");
}

// The slot function against values Redis's CLUSTER KEYSLOT gives.
TEST(ClusterSlots, KeySlotAndRoutingKey) {
    using dlock::detail::key_slot;
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // an empty tag: the whole key
    EXPECT_NE(key_slot("a{}"), key_slot("b{}"));
    std::string bytes;
    const std::string_view eval[] = {"EVALSHA", "abc", "2", "dlock:{n}", "k2", "argv"};
    dlock::detail::append_command(bytes, eval);
    EXPECT_EQ(dlock::detail::routing_key(bytes), "dlock:{n}");
    bytes.clear();
    const std::string_view keyless[] = {"EVAL", "return 1", "0"};
    dlock::detail::append_command(bytes, keyless);
    EXPECT_FALSE(dlock::detail::routing_key(bytes));
    bytes.clear();
    const std::string_view get[] = {"get", "k"};
    dlock::detail::append_command(bytes, get);
    EXPECT_EQ(dlock::detail::routing_key(bytes), "k");
    for (std::string_view hostile : {"", "*", "*1\r\n$3\r\nGET\r\n", "*2\r\n$3\r\nGET\r\n$99\r\nk\r\n",
                                     "*4\r\n$4\r\nEVAL\r\n$1\r\nx\r\n$1\r\n1\r\n", "*2\r\n$-1\r\n"})
        EXPECT_FALSE(dlock::detail::routing_key(hostile)) << hostile;
}

// A permit's direct grant is told on its waiter's client inbox, naming the
// semaphore's channel (whose watch wakes the waiter); the channel is
// everything after the permit id, spaces too.
TEST(ScriptReplies, PermitGrantNoticeNamesThePermitAndTheChannel) {
    const auto notice = dlock::detail::read_permit_grant_notice("granted-permit abc:s7!!#2 dlock:sem:{a b}:channel");
    ASSERT_TRUE(notice);
    EXPECT_EQ(notice->permit, "abc:s7!!#2");
    EXPECT_EQ(notice->channel, "dlock:sem:{a b}:channel");
    for (const char* bad : {"granted-permit abc:s7!!#2", "granted-permit abc:s7!!#2 ", "granted-permit  ch",
                            "granted-permit ", "granted abc:s7!!#2 ch", "revoked-permit abc:s7!!#2 0 ch"})
        EXPECT_FALSE(dlock::detail::read_permit_grant_notice(bad)) << bad;
}
