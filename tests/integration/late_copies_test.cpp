// Requests that reach the server late, and replies no lock would send: a
// late copy of a request (the retry path sends byte-identical copies, and a
// copy can sit in the buffer of a connection the client gave up on) is
// replayed from the server's own log, and must change nothing; a lease left
// of absurd length must not break the waiter's clock arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "eventually.hpp"
#include "lock/lock_scripts.hpp"
#include "redis_server.hpp"
#include "warm_up.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::warm_up;

using dlock::test::lock_key;

namespace {

// Every command the server runs is logged (slowlog threshold 0): the exact
// bytes of an earlier request, for replaying them as a late copy.
void start_capture(dlock::Client& c) {
    c.command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    c.command({"CONFIG", "SET", "slowlog-max-len", "100000"});
    c.command({"SLOWLOG", "RESET"});
}

// The arguments of logged EVALSHA calls of `sha`, oldest first.
std::vector<std::vector<std::string>> captured(dlock::Client& c, const std::string& sha) {
    auto log = c.command({"SLOWLOG", "GET", "100000"});
    std::vector<std::vector<std::string>> out;
    for (auto& entry : log.elements) {
        if (entry.elements.size() < 4) continue;
        auto& args = entry.elements[3];
        if (args.elements.size() < 2 || args.elements[1].text != sha) continue;
        std::vector<std::string> a;
        for (auto& e : args.elements) a.push_back(e.text);
        out.push_back(std::move(a));
    }
    std::reverse(out.begin(), out.end());
    return out;
}

dlock::Reply replay(dlock::Client& c, const std::vector<std::string>& args) {
    std::vector<std::string_view> v(args.begin(), args.end());
    return c.command(dlock::Client::Args(v.data(), v.size()));
}

}  // namespace

TEST(LateCopies, ALateCopyOfAHandOffDoesNotMakeTwoHolders) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), admin(server.uri());
    warm_up(client);
    start_capture(admin);
    dlock::LockOptions o;
    o.lease = 30s;
    o.handoff_slice = 30s;
    dlock::Lock lock(client, "ho", o);
    lock.lock();  // T1

    std::promise<void> t2_got, t2_released, t1_again, replayed, t2_done;
    std::atomic<bool> t2_held_again{false};
    std::thread t2([&] {
        lock.lock();  // queues; receives the hand-off
        t2_got.set_value();
        lock.unlock();  // no waiter: a real release
        t2_released.set_value();
        replayed.get_future().wait();
        // The server now says T2 owns it; T2 asks afresh and is granted.
        t2_held_again = lock.try_lock();
        t2_done.set_value();
        std::this_thread::sleep_for(300ms);
        if (t2_held_again) lock.unlock();
    });
    std::this_thread::sleep_for(300ms);  // T2 is queued as head
    lock.unlock();                       // hand-off to T2
    t2_got.get_future().wait();
    t2_released.get_future().wait();
    lock.lock();  // T1 again, count 1
    auto handoffs = captured(admin, dlock::detail::hand_off_script().sha1());
    ASSERT_EQ(handoffs.size(), 1u);
    auto r = replay(admin, handoffs[0]);  // the late copy
    std::printf("replayed hand-off answered: %s\n", r.is_array() && !r.elements.empty() ? std::to_string(r.elements[0].integer).c_str() : "?");
    replayed.set_value();
    t2_done.get_future().wait();
    const bool t1_held = lock.is_held();
    std::printf("T1 is_held=%d  T2 try_lock=%d  server owner=%s\n", t1_held, t2_held_again.load(),
                server.cli({"HGET", lock_key("ho"), "owner"}).c_str());
    EXPECT_FALSE(t1_held && t2_held_again) << "two threads both hold 'ho'";
    t2.join();
    if (lock.hold_count()) lock.unlock();
}

TEST(LateCopies, ALateCopyOfAnAttemptAnsweredBusyGrantsNothing) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri()), b(server.uri()), admin(server.uri());
    warm_up(a);
    warm_up(b);
    start_capture(admin);
    dlock::LockOptions o;
    o.lease = 20s;
    dlock::Lock la(a, "busy-copy", o), lb(b, "busy-copy", o);
    lb.lock();
    ASSERT_FALSE(la.try_lock());  // answered busy; a gives up
    lb.unlock();
    auto acquires = captured(admin, dlock::detail::acquire_script().sha1());
    ASSERT_EQ(acquires.size(), 2u);  // b's grant, then a's busy attempt
    // The late copy of a's attempt reaches a free lock: it must not grant a
    // hold that a's client gave up on (nobody would renew or release it,
    // and the name would be taken for a whole lease).
    auto r = replay(admin, acquires[1]);
    ASSERT_TRUE(r.is_array() && !r.elements.empty());
    EXPECT_EQ(r.elements[0].integer, -2);
    EXPECT_EQ(server.cli({"EXISTS", lock_key("busy-copy")}), "0");
    EXPECT_TRUE(lb.try_lock());
    lb.unlock();
    // A fresh attempt of a's (a new operation id) is granted as usual.
    EXPECT_TRUE(la.try_lock());
    la.unlock();
}

// The scripts' side of an operation whose outcome the client never learnt
// (no answer within the retry window): the client sends an undo (a release
// only if that operation was the last), and a copy of the operation that
// arrives after the undo must not apply.
TEST(LateCopies, AnOperationUndoneBeforeItAppliedNeverApplies) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    const std::string lock = lock_key("undone"), fence = lock + ":fence", owner = "c0ffee:t1",
                      tombstone = lock + ":done:" + owner;
    auto acquire = [&](const std::string& op, const std::string& mode) {
        // The other kinds' keys of the name (lock_keys.hpp) come next.
        const std::string readers = lock + ":readers", permits = "dlock:sem:{undone}",
                          waiters = permits + ":waiters";
        std::string_view keys[] = {lock, fence, tombstone, readers, permits, waiters};
        std::string_view args[] = {owner, "30000", op, mode, "600000", "1"};
        return client.eval(dlock::detail::acquire_script(), keys, args);
    };
    auto undo = [&](const std::string& op, const std::string& undone) {
        const std::string channel = lock + ":ch";
        std::string_view keys[] = {lock, fence, channel, tombstone};
        std::string_view args[] = {owner, "30000", op, "1", "600000", undone};
        return client.eval(dlock::detail::release_script(), keys, args).integer;
    };
    // A fresh acquisition (operation 5) undone before it arrived.
    EXPECT_EQ(undo("6", "5"), -1);
    auto late = acquire("5", "fresh");
    EXPECT_EQ(late.elements[0].integer, -2);
    EXPECT_EQ(server.cli({"EXISTS", lock}), "0") << "a late copy granted a hold nobody tracks";
    // A re-entry (operation 8) undone before it arrived, while the owner holds.
    ASSERT_EQ(acquire("7", "fresh").elements[0].integer, 1);
    EXPECT_EQ(undo("9", "8"), -3);
    late = acquire("8", "reenter");
    EXPECT_EQ(late.elements[0].integer, -2);
    EXPECT_EQ(server.cli({"HGET", lock, "count"}), "1") << "a late re-entry counted a hold nobody will release";
    // The owner's next operations go on as usual.
    EXPECT_EQ(acquire("10", "reenter").elements[0].integer, 1);
    EXPECT_EQ(server.cli({"HGET", lock, "count"}), "2");
}

TEST(LateCopies, AHugeLeaseLeftOnTheServerDoesNotMakeAWaiterSpin) {
    dlock::support::RedisServer server;
    dlock::Client a(server.uri());
    warm_up(a);
    server.cli({"HSET", lock_key("huge"), "owner", "someone:1", "count", "1", "seq", "1", "token", "1"});
    server.cli({"PEXPIRE", lock_key("huge"), "9000000000000000000"});
    std::printf("PTTL: %s\n", server.cli({"PTTL", lock_key("huge")}).c_str());
    auto lock = a.lock("huge");
    const long before = server.command_calls("evalsha");
    auto t0 = Clock::now();
    bool got = lock.try_lock_for(1s);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    const long calls = server.command_calls("evalsha") - before;
    std::printf("try_lock_for(1s) returned %d after %lld ms, %ld EVALSHA calls\n", got, (long long)took.count(), calls);
    EXPECT_LT(calls, 20);
}

// A hand-off whose answer is lost is undone (LockCore::hand_off: release.lua
// in the next owner's name, naming the hand-off's operation), and the undo
// may overtake a late copy of the hand-off (a retry on a new connection).
// That copy finds the giver still holding once: it must not give the lock to
// a next owner who has gone back to asking for it, and who would hold it
// without knowing. The copy replayed here is the client's own call.
TEST(LateCopies, AHandOffUndoneBeforeItsLateCopyArrivesNeverApplies) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri()), admin(server.uri());
    warm_up(client);
    const std::string name = "ho-undone", key = lock_key(name);
    dlock::Lock lock(client, name, {.lease = 30s, .handoff_slice = 30s});
    lock.lock();
    // The giver's hold as it was before the hand-off: restored below, as
    // if the hand-off had never applied.
    const auto held = admin.command({"HGETALL", key});
    start_capture(admin);
    std::thread next([&] {
        lock.lock();  // handed the lock
        lock.unlock();
    });
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"ZCARD", key + ":line"}) == "1"; }));
    std::this_thread::sleep_for(100ms);  // asleep as the head of the queue
    lock.unlock();
    next.join();
    const auto calls = captured(admin, std::string(dlock::detail::hand_off_script().sha1()));
    ASSERT_EQ(calls.size(), 1u) << "no hand-off";
    const auto& call = calls[0];  // EVALSHA sha numkeys keys... argv...
    const auto argv_at = 3 + std::stoul(call[2]);
    const auto& giver = call[argv_at], & next_owner = call[argv_at + 1], & operation = call[argv_at + 3];

    std::vector<std::string> restore{"HSET", key};
    for (const auto& field : held.elements) restore.push_back(field.text);
    std::vector<std::string_view> restore_args(restore.begin(), restore.end());
    admin.command(dlock::Client::Args(restore_args.data(), restore_args.size()));
    admin.command({"PEXPIRE", key, "30000"});
    ASSERT_EQ(server.cli({"HGET", key, "owner"}), giver);
    // The undo first (LockCore::undo).
    const std::string fence = key + ":fence", channel = key + ":ch", next_tombstone = key + ":done:" + next_owner,
                      line = key + ":line", places = key + ":places", undo_op = operation + "1";
    std::string_view keys[] = {key, fence, channel, next_tombstone, line, places};
    std::string_view args[] = {next_owner, "30000", undo_op, "1", "600000", operation, "60000", ""};
    EXPECT_EQ(admin.eval(dlock::detail::release_script(), keys, args).integer, -1);
    // Then the late copy.
    const auto late = replay(admin, call);
    ASSERT_FALSE(late.elements.empty());
    EXPECT_EQ(late.elements[0].integer, 0) << "the late copy handed the lock on after its undo";
    EXPECT_EQ(server.cli({"HGET", key, "owner"}), giver);
}

namespace {

// A lock held through the client, handed by the raw script (hand_off.lua as
// LockCore::hand_off sends it) to "x:head", with "x:behind" placed behind it
// (a seat); undo() is LockCore::undo of that hand-off naming the seat.
struct SeatedHandOff {
    explicit SeatedHandOff(const std::string& name) : key(lock_key(name)), holder(client.lock(name, {.waiter_lease = 20s})) {
        holder.lock();
        const auto giver = server.cli({"HGET", key, "owner"});
        const std::string giver_tombstone = key + ":done:" + giver;
        std::string_view keys[] = {key, fence, giver_tombstone, line, places, next_tombstone};
        std::string_view args[] = {giver, "x:head", "30000", "999999", "600000", "", "x:behind", "20000"};
        placed = client.eval(dlock::detail::hand_off_script(), keys, args).elements.size() == 3;
    }
    long long undo() {
        std::string_view keys[] = {key, fence, channel, next_tombstone, line, places};
        std::string_view args[] = {"x:head", "30000", "1000000", "1", "600000", "999999", "20000", "", "x:behind"};
        return client.eval(dlock::detail::release_script(), keys, args).integer;
    }
    dlock::support::RedisServer server;
    dlock::Client client{server.uri()};
    const std::string key, fence = key + ":fence", line = key + ":line", places = key + ":places",
                           next_tombstone = key + ":done:x:head", channel = key + ":ch";
    dlock::Lock holder;
    bool placed = false;
};

}  // namespace

// The undo of a hand-off whose answer was lost also takes out the place that
// hand-off took for the waiter behind the next owner (a seat, hand_off.lua
// ARGV[7]; release.lua ARGV[9]): its client never learnt that place, so
// nobody would hear the lock granted to it, and every waiter would wait out
// that grant's lease.
TEST(LateCopies, TheUndoOfAHandOffTakesTheSeatItPlacedWithIt) {
    SeatedHandOff h("ho-undone-seat");
    ASSERT_TRUE(h.placed) << "the waiter behind was not placed";
    ASSERT_EQ(h.server.cli({"ZCARD", h.line}), "1");
    EXPECT_EQ(h.undo(), 0);
    EXPECT_EQ(h.server.cli({"EXISTS", h.key}), "0") << "granted to " << h.server.cli({"HGET", h.key, "owner"});
    EXPECT_EQ(h.server.cli({"ZCARD", h.line}), "0");
    auto head = h.client.lock("ho-undone-seat", {.waiter_lease = 20s});
    std::thread t([&] {
        const bool got = head.try_lock_for(1s);
        EXPECT_TRUE(got) << "the lock waits for a place nobody listens for";
        if (got) head.unlock();
    });
    t.join();
    h.holder.unlock();
}

// That undo may come late (a retry), once the waiter behind has become the
// head of its process's queue and asked for a place of its own: a new wait,
// which the undo must leave alone (it names the seat's arrival, not the
// waiter): the lock goes to that wait, first in line, not past it.
TEST(LateCopies, TheUndoOfAHandOffLeavesALaterWaitOfTheSeatedWaiterInLine) {
    SeatedHandOff h("ho-undone-later-wait");
    ASSERT_TRUE(h.placed) << "the waiter behind was not placed";
    // Its own wait, as take_place makes a new one: a later arrival, the place kept.
    const auto seat_arrival = std::stoull(h.server.cli({"ZSCORE", h.line, "x:behind"}));
    const auto own_arrival = std::to_string(seat_arrival + 1000);
    h.client.command({"ZADD", h.line, own_arrival, "x:behind"});
    h.client.command({"ZADD", h.places, "99999999999999", "x:behind"});
    EXPECT_EQ(h.undo(), 0);
    EXPECT_EQ(h.server.cli({"HGET", h.key, "owner"}), "x:behind") << "the undo took the waiter's own later place";
    EXPECT_EQ(h.server.cli({"HGET", h.key, "granted"}), own_arrival);
}
