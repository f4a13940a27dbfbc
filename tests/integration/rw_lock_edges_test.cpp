// The read-write lock at its edges: readers first inside one process, an
// upgrade's deadline, dead writers' marks, crashed readers' state, late
// copies, lost replies, a force-release. Each test states what the contract
// (include/dlock/rw_lock.hpp) promises and checks it against a real server.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <stop_token>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "child_process.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/rw_lock.hpp"
#include "eventually.hpp"
#include "held_reader.hpp"
#include "redis_server.hpp"
#include "reply_lost.hpp"
#include "tcp_proxy.hpp"
#include "scripts_run.hpp"
#include "server_keys.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

using dlock::test::lock_key;
using dlock::test::scripts_run;

namespace {

long marks(const dlock::support::RedisServer& server, const std::string& name) {
    return std::stol(server.cli({"ZCARD", lock_key(name) + ":wwait"}));
}

long ms_since(Clock::time_point t) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
}

using Reader = dlock::support::HeldReader;

// The members of a name's writer marks (:wwait), one per waiting writer.
std::set<std::string> mark_owners(const dlock::support::RedisServer& server, const std::string& name) {
    std::set<std::string> owners;
    std::istringstream lines(server.cli({"ZRANGE", lock_key(name) + ":wwait", "0", "-1"}));
    for (std::string line; std::getline(lines, line);)
        if (!line.empty()) owners.insert(line);
    return owners;
}

// A child process whose writer marks itself waiting (lease `lease`), then is
// killed: its mark stays in :wwait with a deadline that passes. The child's
// own mark is waited for (a member that was not there before), not a count:
// a waiting writer's refresh may already have cleared the earlier children's
// expired marks, however long this child took to start.
void leave_a_dead_writers_mark(dlock::support::RedisServer& server, const std::string& name,
                               std::chrono::milliseconds lease) {
    const auto before = mark_owners(server, name);
    const pid_t child = dlock::support::run_in_child([&] {
        dlock::Client own(server.uri());
        auto writer = own.rw_lock(name, {.lease = lease});
        writer.lock();
        return 0;
    });
    // Generous: a child process under a sanitizer on a loaded machine takes seconds to start.
    ASSERT_TRUE(eventually(
        [&] {
            for (const auto& owner : mark_owners(server, name))
                if (!before.count(owner)) return true;
            return false;
        },
        std::chrono::seconds(30)));
    kill(child, SIGKILL);
    dlock::support::wait_child(child);
}

}  // namespace

// Contract: "With prefer_readers a reader goes in whenever no writer holds the
// lock (writers may then starve)" — also a reader that waits in a process
// where a writer waits too: the readers of a readers-first lock queue apart
// from the process's writers.
TEST(RwLockEdges, ReadersFirstReaderIsNotHeldBehindAWaitingWriterOfItsOwnClient) {
    dlock::support::RedisServer server;
    dlock::Client remote(server.uri());
    auto remote_lock = remote.rw_lock("doc");
    Reader first(remote_lock);  // another process reads: the writer below waits

    dlock::Client client(server.uri());
    auto writer_lock = client.rw_lock("doc");
    std::thread writer([&] {
        EXPECT_TRUE(writer_lock.try_lock_for(6s));
        writer_lock.unlock();
    });
    ASSERT_TRUE(eventually([&] { return marks(server, "doc") == 1; }));

    // The server would let a readers-first reader in right now: one in a
    // third process does.
    dlock::Client third(server.uri());
    auto third_eager = third.rw_lock("doc", {.prefer_readers = true});
    EXPECT_TRUE(third_eager.try_lock_shared_for(1500ms)) << "readers first, another process";
    third_eager.unlock_shared();

    auto eager = client.rw_lock("doc", {.prefer_readers = true});
    const auto start = Clock::now();
    bool got = false;
    std::thread reader([&] {
        got = eager.try_lock_shared_for(1500ms);
        if (got) eager.unlock_shared();
    });
    reader.join();
    EXPECT_TRUE(got) << "readers first, same process as the waiting writer: not acquired after " << ms_since(start)
                     << " ms although no writer holds the lock";
    first.release();
    writer.join();
}

// Contract: "deadlines and stops are honoured within about a round trip";
// "holding the read side: one attempt whatever the timeout". An upgrade's
// one attempt waits for its answer no longer than the caller's deadline,
// also on a connection that does not answer.
TEST(RwLockEdges, AnUpgradeTryKeepsTheCallersDeadline) {
    dlock::support::RedisServer server;
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), {.command_timeout = 2000ms});
    auto lock = client.rw_lock("doc");
    lock.lock_shared();
    proxy.black_hole(true);

    // Baseline: a plain writer (another thread: another owner).
    long plain_ms = 0;
    std::thread other([&] {
        const auto start = Clock::now();
        try {
            (void)lock.try_lock_for(100ms);
        } catch (const dlock::Error&) {
        }
        plain_ms = ms_since(start);
    });
    other.join();

    const auto start = Clock::now();
    std::string outcome = "returned";
    try {
        (void)lock.try_lock_for(100ms);  // an upgrade: one attempt
    } catch (const dlock::Error& e) {
        outcome = std::string("threw ") + e.what();
    }
    const long upgrade_ms = ms_since(start);
    proxy.black_hole(false);
    EXPECT_LT(plain_ms, 600) << "baseline";
    EXPECT_LT(upgrade_ms, 600) << "upgrade try_lock_for(100ms) took " << upgrade_ms << " ms and " << outcome;
    lock.unlock_shared();
}

// Contract: a waiting writer "takes the mark back when it stops waiting
// (deadline, stop, failure)", so that "the readers queued behind it go at
// once, not when the mark runs out" — also when a writer that died waiting
// left a mark that has run out (it holds nobody back, and must not keep the
// withdrawal from waking the readers).
TEST(RwLockEdges, AWithdrawnMarkWakesReadersAlsoWhenAKilledWriterProcessMarkRanOut) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri());
    auto holder_lock = holder.rw_lock("doc");
    Reader first(holder_lock);

    leave_a_dead_writers_mark(server, "doc", 300ms);  // expired 300 ms later, never removed

    dlock::Client writer_client(server.uri());
    auto writer_lock = writer_client.rw_lock("doc", {.lease = 8s});
    std::atomic<bool> writer_done{false};
    Clock::time_point gave_up;
    std::thread writer([&] {
        EXPECT_FALSE(writer_lock.try_lock_for(1500ms));
        gave_up = Clock::now();
        writer_done = true;
    });
    ASSERT_TRUE(eventually([&] { return marks(server, "doc") == 2; }));

    dlock::Client reader_client(server.uri());
    auto reader_lock = reader_client.rw_lock("doc");
    bool got = false;
    Clock::time_point got_at;
    std::thread reader([&] {
        got = reader_lock.try_lock_shared_for(5s);
        got_at = Clock::now();
        if (got) reader_lock.unlock_shared();
    });
    writer.join();
    reader.join();
    const long after_withdrawal =
        static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(got_at - gave_up).count());
    EXPECT_EQ(marks(server, "doc"), 0) << "the withdrawal also clears the dead writer's mark that ran out";
    EXPECT_TRUE(got && after_withdrawal < 500)
        << "reader acquired=" << got << ", " << after_withdrawal << " ms after the writer withdrew its mark";
}

// Marks of writers that died waiting leave the set at the next mark a
// waiting writer sets (its refresh, every lease/3), so the set cannot grow
// without bound on a name that stays contended.
TEST(RwLockEdges, MarksOfKilledWriterProcessesDoNotAccumulate) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri());
    auto holder_lock = holder.rw_lock("doc");
    Reader first(holder_lock);
    dlock::Client writer_client(server.uri());
    auto writer_lock = writer_client.rw_lock("doc", {.lease = 3s});
    // Keeps the set alive (its mark live) until the checks are done, however
    // long the children take to start (seconds each under a sanitizer).
    std::stop_source done;
    std::thread writer([&] { EXPECT_FALSE(writer_lock.try_lock_until(Clock::now() + 120s, done.get_token())); });
    ASSERT_TRUE(eventually([&] { return marks(server, "doc") == 1; }));
    constexpr int dead = 5;
    for (int i = 0; i < dead; ++i) leave_a_dead_writers_mark(server, "doc", 100ms);
    EXPECT_TRUE(eventually([&] { return marks(server, "doc") == 1; }, 3s))
        << marks(server, "doc") << " marks in " << lock_key("doc") << ":wwait, one of them live";
    done.request_stop();
    writer.join();
}

// Contract: the writer "takes the mark back when it stops waiting", also a
// program that gives up and closes its Client at once (the common end of a
// CLI run or a short-lived job): readers are not held back by a mark nobody
// refreshes.
TEST(RwLockEdges, AWritersMarkOutlivesAClientClosedRightAfterItGaveUp) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri());
    auto holder_lock = holder.rw_lock("doc");
    Reader first(holder_lock);
    {
        dlock::Client quitter(server.uri());
        auto writer = quitter.rw_lock("doc");  // lease 30 s
        EXPECT_FALSE(writer.try_lock_for(300ms));
    }  // the Client closes right after
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(marks(server, "doc"), 0) << "the mark of a writer that gave up and left stays for its lease";
    dlock::Client reader_client(server.uri());
    auto reader_lock = reader_client.rw_lock("doc");
    const auto start = Clock::now();
    EXPECT_TRUE(reader_lock.try_lock_shared_for(1s)) << "no writer holds or waits, yet after " << ms_since(start)
                                                        << " ms no read";
    if (reader_lock.is_held_shared()) reader_lock.unlock_shared();
}

// Expected to hold: force-releasing the write side lets queued readers in
// and tells the writer at once.
TEST(RwLockEdges, ForceReleaseOfTheWriteSideWakesReadersAndTellsTheWriter) {
    dlock::support::RedisServer server;
    std::atomic<int> lost{0};
    dlock::Client writer_client(server.uri());
    auto writer = writer_client.rw_lock("doc", {.on_lost = [&](std::string_view, std::error_code) { ++lost; }});
    writer.lock();
    auto lost_token = writer.lost_token();
    dlock::Client reader_client(server.uri());
    auto reader = reader_client.rw_lock("doc");
    std::atomic<bool> read{false};
    std::thread t([&] {
        EXPECT_TRUE(reader.try_lock_shared_for(5s));
        read = true;
        reader.unlock_shared();
    });
    std::this_thread::sleep_for(300ms);
    dlock::Client admin(server.uri());
    const auto forced = Clock::now();
    EXPECT_TRUE(dlock::force_release(admin, "doc").has_value());
    t.join();
    EXPECT_LT(ms_since(forced), 500);
    EXPECT_TRUE(eventually([&] { return lost_token.stop_requested() && lost.load() == 1; }, 1s));
    EXPECT_FALSE(writer.is_held());
}

namespace {

// A reader process killed while it reads (lease 200 ms): nothing of it
// renews or releases its hold.
void kill_a_reader(const dlock::support::RedisServer& server, const std::string& name) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = dlock::support::run_in_child([&] {
        dlock::Client own(server.uri());
        auto reader = own.rw_lock(name, {.lease = 200ms});
        reader.lock_shared();
        char byte = 1;
        (void)!write(ready[1], &byte, 1);
        sleep(60);
        return 0;
    });
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    close(ready[1]);
    kill(child, SIGKILL);
    dlock::support::wait_child(child);
}

}  // namespace

// A crashed reader's count, last operation and token leave the reader state
// with its lease, also when a live reader's renewal is the first script to
// run after that lease ended (the common case): the state hash does not grow
// by three fields per crashed reader for as long as the name is read.
TEST(RwLockEdges, StateOfKilledReaderProcessesLeavesWhenARenewalPrunesThem) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto lock = client.rw_lock("doc", {.lease = 300ms});
    lock.lock_shared();  // a live reader that renews every 100 ms
    constexpr int crashed = 4;
    for (int i = 0; i < crashed; ++i) kill_a_reader(server, "doc");
    std::this_thread::sleep_for(1s);  // every crashed reader's lease is over; ours was renewed
    EXPECT_EQ(std::stol(server.cli({"ZCARD", lock_key("doc") + ":readers"})), 1);
    EXPECT_EQ(std::stol(server.cli({"HLEN", lock_key("doc") + ":rstate"})), 3)
        << "fields of pruned readers left in " << lock_key("doc") << ":rstate: "
        << server.cli({"HKEYS", lock_key("doc") + ":rstate"});
    lock.unlock_shared();
}

// The last reader to leave takes the reader set and the state hash with
// it: also the member and state of a killed reader whose lease ended
// (nothing pruned it: no renewal ran, no reader came since).
TEST(RwLockEdges, TheLastReadersReleaseTakesTheStateOfAKilledReader) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    auto live = client.rw_lock("doc", {.lease = 30s, .renew = false});
    live.lock_shared();
    kill_a_reader(server, "doc");
    std::this_thread::sleep_for(400ms);  // its lease is over
    EXPECT_EQ(std::stol(server.cli({"ZCARD", lock_key("doc") + ":readers"})), 2);
    EXPECT_EQ(std::stol(server.cli({"HLEN", lock_key("doc") + ":rstate"})), 6);
    live.unlock_shared();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":readers", lock_key("doc") + ":rstate"}), "0");
}

// Expected to hold: a waiting writer that walks away while its 'wait'
// attempt sits unsent in a stalled connection never ends up holding the
// lock, and nothing of it stays (the late copy may grant; the grant is
// undone; the mark is withdrawn).
TEST(RwLockEdges, ALateCopyOfAWalkedAwayWriteAttemptLeavesNoHoldAndNoMark) {
    dlock::support::RedisServer server;
    dlock::Client holder(server.uri());
    auto holder_lock = holder.rw_lock("doc");
    auto reader = std::make_unique<Reader>(holder_lock);
    dlock::support::TcpProxy proxy(server.port());
    dlock::Client client(proxy.uri(), {.connect_timeout = 500ms, .command_timeout = 300ms});
    auto writer = client.rw_lock("doc");
    std::thread t([&] {
        std::this_thread::sleep_for(150ms);
        proxy.hold_requests(true);  // the next attempts (and the withdrawal) stall
    });
    try {
        EXPECT_FALSE(writer.try_lock_for(400ms));
    } catch (const dlock::Error&) {
    }
    t.join();
    reader->release();  // the lock is free when the stalled copies arrive
    reader.reset();
    proxy.hold_requests(false);
    std::this_thread::sleep_for(1500ms);
    EXPECT_FALSE(writer.is_held());
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc")}), "0");
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":wwait"}), "0");
    dlock::Client other(server.uri());
    auto other_lock = other.rw_lock("doc");
    EXPECT_TRUE(other_lock.try_lock_shared());
    other_lock.unlock_shared();
}

// Expected to hold: read re-entry and read release whose replies are lost
// (server paused, client resends) count once each, on both sides.
TEST(RwLockEdges, LostRepliesOfReadReentryAndReleaseCountOnce) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri(), dlock::support::cut_options());
    // with_reply_lost runs the action on another thread: one owner for both.
    auto lock = client.rw_lock("doc", {.lease = 5s, .ownership = dlock::Ownership::handle});
    lock.lock_shared();
    dlock::support::with_reply_lost(server, [&] { lock.lock_shared(); });
    EXPECT_EQ(lock.shared_hold_count(), 2u);
    const auto state = server.cli({"HVALS", lock_key("doc") + ":rstate"});
    EXPECT_EQ(state.substr(0, 2), "2\n") << state;
    std::error_code ec;
    dlock::support::with_reply_lost(server, [&] { lock.unlock_shared(ec); });
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(lock.shared_hold_count(), 1u);
    lock.unlock_shared(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":readers"}), "0");
}

// A reader whose state (count, last operation, token) was lost while it read
// (evicted, deleted) is still a member of the reader set: its re-entry cannot
// count on a state that is gone, so the hold is told lost and the read side is
// taken afresh, with a state that expires. (The script failed half-way, leaving
// a state hash with no expiry, and the re-entry failed.)
TEST(RwLockEdges, AReentryOfAReaderWhoseStateWasLostTellsTheLossAndTakesTheReadSideAfresh) {
    dlock::support::RedisServer server;
    dlock::Client client(server.uri());
    std::mutex told_mutex;
    std::vector<std::error_code> told;  // what on_lost was called with (on the client's thread)
    auto lock = client.rw_lock("doc", {.lease = 5s,
                                       .ownership = dlock::Ownership::handle,
                                       .on_lost = [&](std::string_view, std::error_code ec) {
                                           std::lock_guard guard(told_mutex);
                                           told.push_back(ec);
                                       }});
    lock.lock_shared();
    const auto lost_before = lock.shared_lost_token();
    const std::string state = lock_key("doc") + ":rstate";
    ASSERT_EQ(server.cli({"DEL", state}), "1");
    EXPECT_NO_THROW(lock.lock_shared());
    // Told on the client's thread, soon after the answer.
    EXPECT_TRUE(eventually([&] { return lost_before.stop_requested(); })) << "the hold whose state was lost was not told lost";
    EXPECT_TRUE(eventually([&] {
        std::lock_guard guard(told_mutex);
        return !told.empty();
    }));
    {
        std::lock_guard guard(told_mutex);
        ASSERT_EQ(told.size(), 1u);
        EXPECT_EQ(told[0], dlock::errc::lock_taken_over) << told[0].message();
    }
    EXPECT_TRUE(lock.is_held_shared());
    EXPECT_EQ(lock.shared_hold_count(), 1u);
    const long ttl = std::stol(server.cli({"PTTL", state}));
    EXPECT_GT(ttl, 0) << state << " has no expiry: " << server.cli({"HGETALL", state});
    std::error_code ec;
    lock.unlock_shared(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server.cli({"EXISTS", lock_key("doc") + ":readers", state}), "0");
}

// A writer that becomes the head of its process's queue while that queue
// listens already (another thread of the process waited before it) asks
// once and sleeps on that busy answer: nothing published after the server
// answered it can go unheard. (The thread that made the queue listen asks
// again once it does.) The release that follows wakes it, and it takes the lock.
TEST(RwLockEdges, AWriterThatFindsItsQueueListeningAsksOnceBeforeItSleeps) {
    dlock::support::RedisServer server;
    dlock::Client holder_client{server.uri()}, waiter_client{server.uri()};
    // Long leases: no renewal or mark refresh falls in the counted window.
    dlock::RwLock holder(holder_client, "once", {.lease = 60s});
    dlock::RwLock waiters(waiter_client, "once", {.lease = 60s});
    holder.lock();
    holder.unlock();  // the server knows the release script: no NOSCRIPT detour below
    holder.lock();
    std::mutex mutex;
    std::condition_variable changed;
    bool first_holds = false, first_may_release = false;
    auto first = std::thread([&] {
        ASSERT_TRUE(waiters.try_lock_for(30s));
        std::unique_lock lock(mutex);
        first_holds = true;
        changed.notify_all();
        changed.wait_for(lock, 30s, [&] { return first_may_release; });
        lock.unlock();
        waiters.unlock();
    });
    ASSERT_TRUE(eventually([&] { return marks(server, "once") == 1; }));
    std::this_thread::sleep_for(300ms);  // subscribed, asked again, asleep
    std::atomic<bool> second_held{false};
    auto second = std::thread([&] {
        ASSERT_TRUE(waiters.try_lock_for(30s));
        second_held = true;
        waiters.unlock();
    });
    std::this_thread::sleep_for(300ms);  // in its process's queue behind the first
    const long before = scripts_run(server);
    holder.unlock();  // the first takes the lock; the second becomes the head and asks
    {
        std::unique_lock lock(mutex);
        ASSERT_TRUE(changed.wait_for(lock, 10s, [&] { return first_holds; }));
    }
    std::this_thread::sleep_for(500ms);  // the second asked, was answered busy, sleeps
    const long ran = scripts_run(server) - before;
    {
        std::lock_guard lock(mutex);
        first_may_release = true;
    }
    changed.notify_all();
    first.join();
    second.join();
    EXPECT_TRUE(second_held.load());
    // The holder's release, the first's granted request, the second's one busy answer.
    EXPECT_EQ(ran, 3) << "the second writer asked again after its busy answer before it slept";
}
