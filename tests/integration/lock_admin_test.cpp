// The operator's calls: inspect_lock, list_locks (SCAN), wait_until_free and
// force_release, on every kind a name can be held as; and one name, one
// resource: an acquisition of another kind is refused.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using dlock::support::RedisServer;
using namespace std::chrono_literals;
using Kind = dlock::LockInfo::Kind;

namespace {

auto soon(std::chrono::milliseconds ms) { return std::chrono::steady_clock::now() + ms; }

// The loss notice is heard within about a round trip: far sooner than the
// 30 s lease in these tests, after which a renewal would have found it.
bool heard_soon(const std::stop_token& lost) {
    return dlock::support::eventually([&] { return lost.stop_requested(); }, 5s);
}

template <typename Call>
std::error_code code_of(Call call) {
    try {
        call();
    } catch (const dlock::Error& e) {
        return e.code();
    }
    return {};
}

}  // namespace

// The holder label is made once per thread and kept: a forked child (a new
// process, whose thread has a new id) must name itself, not its parent.
TEST(LockAdmin, AForkedChildsGrantNamesTheChildAsHolder) {
    RedisServer server;
    dlock::Client client(server.uri());
    auto parents = client.lock("fork-label-parent", {.ownership = dlock::Ownership::handle});
    parents.lock();  // this thread's label is made, naming the parent
    const auto parent_holder = dlock::list_locks(client, "fork-label-parent").at(0).second.holder;
    ASSERT_NE(parent_holder.find(" pid=" + std::to_string(getpid()) + " "), std::string::npos) << parent_holder;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        int code = 1;
        try {
            dlock::Client own(server.uri());
            auto lock = own.lock("fork-label-child", {.ownership = dlock::Ownership::handle});
            lock.lock();
            _exit(0);  // before the lock object's end: the lock stays held for the parent to read
        } catch (...) {
        }
        _exit(code);
    }
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            FAIL() << "the child did not finish within 20 s";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    const auto locks = dlock::list_locks(client, "fork-label-child");
    ASSERT_EQ(locks.size(), 1u);
    const auto& holder = locks[0].second.holder;
    EXPECT_NE(holder.find(" pid=" + std::to_string(child) + " "), std::string::npos) << holder;
    EXPECT_EQ(holder.find(" pid=" + std::to_string(getpid()) + " "), std::string::npos) << holder;
    parents.unlock();
}

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

TEST(LockAdmin, ReadersAreSeenWaitedForAndBrokenAndEachIsTold) {
    RedisServer server;
    dlock::Client holder(server.uri()), other(server.uri()), admin(server.uri());
    dlock::RwLock mine(holder, "rw2", {.lease = 30s, .ownership = dlock::Ownership::handle});
    dlock::RwLock theirs(other, "rw2", {.lease = 30s, .ownership = dlock::Ownership::handle});
    ASSERT_TRUE(mine.try_lock_shared());
    ASSERT_TRUE(theirs.try_lock_shared());
    auto info = dlock::inspect_lock(admin, "rw2");
    EXPECT_TRUE(info.held);
    EXPECT_EQ(info.kind, Kind::shared);
    EXPECT_TRUE(info.owner.empty());
    ASSERT_EQ(info.readers.size(), 2u);
    EXPECT_EQ(info.readers[0].hold_count, 1u);
    EXPECT_GT(info.readers[0].ttl, 20s);
    const auto listed = dlock::list_locks(admin, "rw*");
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].second.readers.size(), 2u);
    EXPECT_FALSE(dlock::wait_until_free(admin, "rw2", soon(300ms)));
    // Two holds: the single-hold call refuses and breaks nothing.
    auto refused = dlock::force_release(admin, "rw2", {});
    EXPECT_TRUE(refused.refused);
    EXPECT_EQ(refused.would_break.size(), 2u);
    EXPECT_TRUE(refused.broken.empty());
    EXPECT_EQ(code_of([&] { (void)dlock::force_release(admin, "rw2"); }), dlock::errc::invalid_argument);
    EXPECT_TRUE(mine.is_held_shared());
    // One holder named.
    const auto own_id = info.readers[0].owner;
    auto one = dlock::force_release(admin, "rw2", {.holder = own_id});
    ASSERT_EQ(one.broken.size(), 1u);
    EXPECT_EQ(one.broken[0].holder, own_id);
    EXPECT_EQ(one.broken[0].kind, Kind::shared);
    // Exactly the one named hears of it.
    EXPECT_TRUE(dlock::support::eventually(
        [&] { return mine.shared_lost_token().stop_requested() != theirs.shared_lost_token().stop_requested(); }, 5s));
    // The rest, while someone waits for the name to be free.
    auto freed = std::async(std::launch::async, [&] { return dlock::wait_until_free(admin, "rw2", soon(20s)); });
    std::this_thread::sleep_for(200ms);
    auto all = dlock::force_release(admin, "rw2", {.all = true});
    EXPECT_EQ(all.broken.size(), 1u);
    EXPECT_TRUE(heard_soon(mine.shared_lost_token()));
    EXPECT_TRUE(heard_soon(theirs.shared_lost_token()));
    // Each broken reader is told why.
    EXPECT_EQ(mine.shared_lost_reason(), dlock::LostReason::revoked);
    EXPECT_EQ(theirs.shared_lost_reason(), dlock::LostReason::revoked);
    EXPECT_EQ(freed.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_FALSE(dlock::inspect_lock(admin, "rw2").held);
}

TEST(LockAdmin, PermitsAreSeenWaitedForAndBrokenAndEachIsTold) {
    RedisServer server;
    dlock::Client holder(server.uri()), admin(server.uri());
    dlock::Semaphore pool(holder, "s1", {.limit = 2, .lease = 30s});
    auto first = pool.try_acquire();
    auto second = pool.try_acquire();
    ASSERT_TRUE(first && second);
    auto info = dlock::inspect_lock(admin, "s1");
    EXPECT_TRUE(info.held);
    EXPECT_EQ(info.kind, Kind::semaphore);
    EXPECT_EQ(info.semaphore.limit, 2u);
    EXPECT_EQ(info.semaphore.used, 2u);
    EXPECT_EQ(info.holds(), 2u);
    const auto listed = dlock::list_locks(admin, "s*");
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].first, "s1");
    EXPECT_FALSE(dlock::wait_until_free(admin, "s1", soon(300ms)));
    EXPECT_TRUE(dlock::force_release(admin, "s1", {}).refused);
    auto one = dlock::force_release(admin, "s1", {.holder = first.id()});
    ASSERT_EQ(one.broken.size(), 1u);
    EXPECT_EQ(one.broken[0].kind, Kind::semaphore);
    EXPECT_TRUE(heard_soon(first.lost_token()));
    EXPECT_EQ(first.lost_reason(), dlock::LostReason::revoked);
    EXPECT_FALSE(first.is_held());
    EXPECT_TRUE(second.is_held());
    // The last permit's ordinary release wakes whoever waits for the name.
    auto freed = std::async(std::launch::async, [&] { return dlock::wait_until_free(admin, "s1", soon(20s)); });
    std::this_thread::sleep_for(200ms);
    second.release();
    EXPECT_EQ(freed.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(freed.get());
    EXPECT_EQ(code_of([&] { first.release(); }), dlock::errc::lease_lost);
}

TEST(LockAdmin, ALockBrokenByForceReleaseShowsItsKindAndItsHolderIsTold) {
    RedisServer server;
    dlock::Client holder(server.uri()), admin(server.uri());
    auto lock = holder.lock("l1", {.lease = 30s, .ownership = dlock::Ownership::handle});
    lock.lock();
    auto info = dlock::inspect_lock(admin, "l1");
    EXPECT_EQ(info.kind, Kind::exclusive);
    EXPECT_EQ(info.holds(), 1u);
    auto broken = dlock::force_release(admin, "l1", {});
    ASSERT_EQ(broken.broken.size(), 1u);
    EXPECT_EQ(broken.broken[0].kind, Kind::exclusive);
    EXPECT_TRUE(heard_soon(lock.lost_token()));
    EXPECT_EQ(lock.lost_reason(), dlock::LostReason::revoked);
    EXPECT_FALSE(dlock::force_release(admin, "l1").has_value());
}

TEST(LockAdmin, OneNameIsOneResource) {
    RedisServer server;
    dlock::Client client(server.uri());
    const dlock::LockOptions handle{.ownership = dlock::Ownership::handle};
    // Held as a semaphore: every lock kind is refused, naming what it is.
    dlock::Semaphore pool(client, "s1", {.limit = 1});
    auto permit = pool.try_acquire();
    ASSERT_TRUE(permit);
    auto lock = client.lock("s1", handle);
    try {
        (void)lock.try_lock();
        ADD_FAILURE() << "a lock was granted on a semaphore's name";
    } catch (const dlock::Error& e) {
        EXPECT_EQ(e.code(), dlock::errc::kind_mismatch);
        EXPECT_NE(std::string(e.what()).find("held as a semaphore"), std::string::npos) << e.what();
    }
    std::error_code ec;
    EXPECT_FALSE(lock.try_lock(ec));
    EXPECT_EQ(ec, dlock::errc::kind_mismatch);
    dlock::FairLock fair(client, "s1", handle);
    EXPECT_EQ(code_of([&] { (void)fair.try_lock_for(1s); }), dlock::errc::kind_mismatch);
    dlock::RwLock rw(client, "s1", {.ownership = dlock::Ownership::handle});
    EXPECT_EQ(code_of([&] { (void)rw.try_lock(); }), dlock::errc::kind_mismatch);
    EXPECT_EQ(code_of([&] { (void)rw.try_lock_shared_for(1s); }), dlock::errc::kind_mismatch);
    permit.release();
    // Free again: the name may be anything.
    ASSERT_TRUE(lock.try_lock());
    // Held as a lock: a semaphore is refused.
    EXPECT_EQ(code_of([&] { (void)pool.try_acquire(); }), dlock::errc::kind_mismatch);
    lock.unlock();
    // Read-shared: an RwLock's write side waits for the readers (contention,
    // not an error), a Lock does not wait for them and is refused.
    ASSERT_TRUE(rw.try_lock_shared());
    dlock::RwLock writer(client, "s1", {.ownership = dlock::Ownership::handle});
    EXPECT_FALSE(writer.try_lock());
    EXPECT_EQ(code_of([&] { (void)lock.try_lock(); }), dlock::errc::kind_mismatch);
    EXPECT_EQ(code_of([&] { (void)pool.try_acquire(); }), dlock::errc::kind_mismatch);
    rw.unlock_shared();
    // A Lock and an RwLock's write side are one exclusive hold.
    ASSERT_TRUE(lock.try_lock());
    EXPECT_FALSE(writer.try_lock());
    EXPECT_FALSE(rw.try_lock_shared());
    lock.unlock();
}

TEST(LockAdmin, ASemaphoreWithAnotherLimitIsRefusedUnlessItSetsTheLimit) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Semaphore one(client, "s1", {.limit = 1});
    auto held = one.try_acquire();
    ASSERT_TRUE(held);
    dlock::Semaphore two(client, "s1", {.limit = 2});
    std::error_code ec;
    EXPECT_FALSE(two.try_acquire(1, ec));
    EXPECT_EQ(ec, dlock::errc::limit_mismatch);
    EXPECT_NE(dlock::last_server_error().find("limit is 1, not 2"), std::string::npos) << dlock::last_server_error();
    dlock::Semaphore setter(client, "s1", {.limit = 2, .set_limit = true});
    auto second = setter.try_acquire();
    EXPECT_TRUE(second);
    EXPECT_EQ(dlock::inspect_semaphore(client, "s1").limit, 2u);
    // Now the first object's limit is the other one; its set_limit makes it its own again.
    EXPECT_EQ(code_of([&] { (void)one.try_acquire(); }), dlock::errc::limit_mismatch);
    one.set_limit(1);
    held.release();
    second.release();
    EXPECT_TRUE(one.try_acquire());
}

// A fair lock's waiter keeps a live place in line while the name is free (its
// holder's lease ran out); its next refresh may grant it the lock. Until then
// the name is live as a lock: a semaphore is refused and a reader waits, so
// that the grant never lands beside a permit or a read hold.
TEST(LockAdmin, AFairWaitersPlaceKeepsTheNameALock) {
    RedisServer server;
    dlock::Client holder_client(server.uri()), waiter_client(server.uri()), other(server.uri());
    dlock::FairLock holder(holder_client, "fl", {.lease = 60s, .ownership = dlock::Ownership::handle});
    dlock::FairLock waiter(waiter_client, "fl",
                           {.lease = 30s, .ownership = dlock::Ownership::handle, .waiter_lease = 1500ms});
    ASSERT_TRUE(holder.try_lock());
    auto waited = std::async(std::launch::async, [&] { return waiter.try_lock_for(20s); });
    ASSERT_TRUE(dlock::support::eventually([&] { return server.cli({"ZCARD", "dlock:{fl}:places"}) == "1"; }, 10s));
    // The holder's lease ends without a release: the state its crash leaves.
    server.cli({"DEL", "dlock:{fl}"});
    dlock::Semaphore pool(other, "fl", {.limit = 1});
    EXPECT_EQ(code_of([&] { (void)pool.try_acquire(); }), dlock::errc::kind_mismatch);
    dlock::RwLock reader(other, "fl", {.ownership = dlock::Ownership::handle});
    EXPECT_FALSE(reader.try_lock_shared());
    ASSERT_TRUE(waited.get()) << "the waiter in line was not granted the free name";
    EXPECT_EQ(server.cli({"ZCARD", "dlock:sem:{fl}"}), "0");
    EXPECT_EQ(server.cli({"ZCARD", "dlock:{fl}:readers"}), "0");
    waiter.unlock();
}

// Breaking more holds than a lock script's small reply would carry (three
// elements per hold) is answered in full.
TEST(LockAdmin, ManyReadersAreBrokenAndReportedInOneCall) {
    RedisServer server;
    dlock::Client holder(server.uri()), admin(server.uri());
    std::vector<std::unique_ptr<dlock::RwLock>> readers;
    for (int i = 0; i < 8; ++i) {
        readers.push_back(std::make_unique<dlock::RwLock>(
            holder, "many", dlock::RwLockOptions{.lease = 30s, .ownership = dlock::Ownership::handle}));
        ASSERT_TRUE(readers.back()->try_lock_shared());
    }
    auto refused = dlock::force_release(admin, "many", {});
    EXPECT_TRUE(refused.refused);
    EXPECT_EQ(refused.would_break.size(), 8u);
    auto all = dlock::force_release(admin, "many", {.all = true});
    EXPECT_EQ(all.broken.size(), 8u);
    for (auto& reader : readers) {
        EXPECT_TRUE(heard_soon(reader->shared_lost_token()));
        EXPECT_EQ(reader->shared_lost_reason(), dlock::LostReason::revoked);
    }
}
