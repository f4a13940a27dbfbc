// The asynchronous API (dlock/async.hpp) against a real server: callbacks,
// futures and coroutines for every lock kind; cancellation while queued and
// racing a grant (nothing left held); holds moved across threads and
// released from another thread; the lost notification awaited; a thousand
// waits on one fiber thread; a wait on a hold already lost leaves nothing
// behind its client.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "dlock/async.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using dlock::AsyncHold;
using dlock::support::eventually;
using dlock::support::RedisServer;

namespace {

// Waits for a future with a generous bound (a hang fails, never blocks CI).
template <typename T>
T get(std::future<T>& future, std::chrono::seconds bound = 20s) {
    if (future.wait_for(bound) != std::future_status::ready) throw std::runtime_error("no completion in time");
    return future.get();
}

bool free_for_another(dlock::Client& client, const std::string& name) {
    dlock::Lock probe(client, name);
    if (!probe.try_lock()) return false;
    probe.unlock();
    return true;
}

// An io_context run by its own thread: the executor a test's handlers are
// bound to, where their cancellation signals are emitted (as Asio requires).
struct Loop {
    asio::io_context io;
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
    std::thread thread{[this] { io.run(); }};
    ~Loop() {
        work.reset();
        thread.join();
    }
    void emit(asio::cancellation_signal& signal) {
        std::promise<void> emitted;
        asio::post(io, [&] {
            signal.emit(asio::cancellation_type::terminal);
            emitted.set_value();
        });
        emitted.get_future().wait();
    }
};

}  // namespace

TEST(Async, LockWithACallbackRunsOffTheCallersThreadAndHoldsWithAToken) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:callback");
    std::promise<std::pair<std::error_code, AsyncHold>> done;
    const auto caller = std::this_thread::get_id();
    std::atomic<bool> on_caller{true};
    dlock::async_lock(lock, [&](std::error_code ec, AsyncHold hold) {
        on_caller = std::this_thread::get_id() == caller;
        done.set_value({ec, std::move(hold)});
    });
    auto future = done.get_future();
    auto [ec, hold] = get(future);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(on_caller);
    ASSERT_TRUE(hold);
    EXPECT_TRUE(hold.is_held());
    EXPECT_GT(hold.fencing_token(), 0u);
    EXPECT_GT(hold.valid_until(), std::chrono::steady_clock::now());
    EXPECT_EQ(hold.name(), "async:callback");
    // The hold is the hold's, not the thread's: this thread does not hold it.
    EXPECT_FALSE(lock.is_held());
    EXPECT_FALSE(free_for_another(other, "async:callback"));
    auto released = dlock::async_unlock(hold, asio::use_future);
    EXPECT_FALSE(hold);
    get(released);
    EXPECT_TRUE(free_for_another(other, "async:callback"));
}

TEST(Async, AThreadsCallAfterAnAsynchronousOneIsWokenByItsAnswer) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Lock lock(client, "async:then-thread");
    // An asynchronous lock+unlock: its calls wait in a fiber, on the
    // client's fiber thread.
    auto held_future = dlock::async_lock(lock, asio::use_future);
    auto hold = get(held_future);
    ASSERT_TRUE(hold.is_held());
    auto released = dlock::async_unlock(hold, asio::use_future);
    get(released);
    // Then a thread's acquisitions through the same client, whose calls may
    // reuse what the fiber's calls were made of (once the fiber let go of
    // them): each is woken by its answer, not left asleep until its deadline.
    for (int i = 0; i < 3; ++i) {
        const auto start = std::chrono::steady_clock::now();
        ASSERT_TRUE(lock.try_lock_for(20s));
        const auto took = std::chrono::steady_clock::now() - start;
        lock.unlock_nowait();  // sends without waiting: a release could wait for ever
        ASSERT_LT(took, 10s) << "acquisition " << i << " woken only at its deadline: "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
    }
}

TEST(Async, TwoAcquisitionsOfOneLockAreTwoOwners) {
    RedisServer server;
    dlock::Client client(server.uri());
    dlock::Lock lock(client, "async:owners", {.ownership = dlock::Ownership::handle});
    auto first_future = dlock::async_lock(lock, asio::use_future);
    auto first = get(first_future);
    auto second_future = dlock::async_try_lock_for(lock, 200ms, asio::use_future);
    auto second = get(second_future);
    EXPECT_FALSE(second) << "a second asynchronous acquisition re-entered the first's hold";
    auto third_future = dlock::async_lock(lock, asio::use_future);
    EXPECT_EQ(third_future.wait_for(100ms), std::future_status::timeout);
    first = AsyncHold();  // released in the background: the waiter gets it
    auto third = get(third_future);
    EXPECT_TRUE(third.is_held());
}

TEST(Async, EveryKindWorksFromACoroutine) {
    RedisServer server, second, third;
    dlock::Client client(server.uri());
    dlock::Masters masters({server.uri(), second.uri(), third.uri()});
    dlock::Lock lock(client, "async:co:lock");
    dlock::FairLock fair(client, "async:co:fair");
    dlock::RwLock rw(client, "async:co:rw");
    dlock::Semaphore semaphore(client, "async:co:sem", {.limit = 3});
    dlock::Redlock redlock(masters, "async:co:redlock");
    dlock::MultiLock multi(client, {"async:co:a", "async:co:b"});
    asio::io_context io;
    std::vector<std::string> seen;
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            const auto home = std::this_thread::get_id();
            auto check = [&](AsyncHold& hold, const std::string& what) {
                if (hold && hold.is_held() && std::this_thread::get_id() == home) seen.push_back(what);
            };
            auto a = co_await dlock::async_lock(lock, asio::use_awaitable);
            check(a, "lock");
            auto b = co_await dlock::async_lock(fair, asio::use_awaitable);
            check(b, "fair");
            auto c = co_await dlock::async_lock_shared(rw, asio::use_awaitable);
            auto d = co_await dlock::async_lock_shared(rw, asio::use_awaitable);  // readers share
            check(c, "read");
            check(d, "read");
            auto e = co_await dlock::async_try_lock_for(rw, 100ms, asio::use_awaitable);
            if (!e) seen.push_back("writer kept out");
            co_await dlock::async_unlock(c, asio::use_awaitable);
            co_await dlock::async_unlock(d, asio::use_awaitable);
            auto f = co_await dlock::async_lock(rw, asio::use_awaitable);
            check(f, "write");
            auto g = co_await dlock::async_acquire(semaphore, 2, asio::use_awaitable);
            check(g, "permits");
            auto h = co_await dlock::async_try_acquire_for(semaphore, 2, 100ms, asio::use_awaitable);
            if (!h) seen.push_back("permits kept out");
            auto i = co_await dlock::async_lock(redlock, asio::use_awaitable);
            check(i, "redlock");
            auto j = co_await dlock::async_lock(multi, asio::use_awaitable);
            check(j, "multi");
            if (j.fencing_tokens().size() == 2) seen.push_back("two tokens");
            for (auto* hold : {&a, &b, &f, &g, &i, &j}) co_await dlock::async_unlock(*hold, asio::use_awaitable);
            finished = true;
        },
        asio::detached);
    io.run_for(30s);
    ASSERT_TRUE(finished);
    EXPECT_EQ(seen, (std::vector<std::string>{"lock", "fair", "read", "read", "writer kept out", "write", "permits",
                                              "permits kept out", "redlock", "multi", "two tokens"}));
    // Everything given back: each kind is free for another client.
    dlock::Client other(server.uri());
    EXPECT_TRUE(free_for_another(other, "async:co:lock"));
    dlock::RwLock rw_other(other, "async:co:rw");
    EXPECT_TRUE(rw_other.try_lock());
    rw_other.unlock();
    dlock::Semaphore sem_other(other, "async:co:sem", {.limit = 3});
    EXPECT_TRUE(sem_other.try_acquire(3));
}

TEST(Async, ACancelledWaitLeavesTheLineAndHoldsNothing) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock holder(other, "async:cancel");
    holder.lock();
    dlock::Lock lock(client, "async:cancel");
    Loop loop;
    asio::cancellation_signal signal;
    std::promise<std::pair<std::error_code, bool>> done;
    dlock::async_lock(lock, asio::bind_executor(loop.io, asio::bind_cancellation_slot(
                                                             signal.slot(), [&](std::error_code ec, AsyncHold hold) {
                                                                 done.set_value({ec, static_cast<bool>(hold)});
                                                             })));
    // Queued: it stands in the server's line.
    ASSERT_TRUE(eventually([&] { return dlock::inspect_lock(other, "async:cancel").held; }, 5s));
    std::this_thread::sleep_for(100ms);
    loop.emit(signal);
    auto future = done.get_future();
    auto [ec, held] = get(future);
    EXPECT_EQ(ec, asio::error::operation_aborted);
    EXPECT_FALSE(held);
    // The release goes to nobody: the lock is free for a third party at once.
    holder.unlock();
    EXPECT_TRUE(eventually([&] { return free_for_another(other, "async:cancel"); }, 5s));
}

TEST(Async, CancellationRacingAGrantLeavesNothingHeld) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock holder(other, "async:race");
    dlock::Lock lock(client, "async:race");
    Loop loop;
    for (int round = 0; round < 30; ++round) {
        holder.lock();
        asio::cancellation_signal signal;
        std::promise<void> done;
        std::optional<AsyncHold> kept;
        dlock::async_lock(lock, asio::bind_executor(loop.io, asio::bind_cancellation_slot(
                                                                 signal.slot(), [&](std::error_code, AsyncHold hold) {
                                                                     if (hold) kept.emplace(std::move(hold));
                                                                     done.set_value();
                                                                 })));
        std::this_thread::sleep_for(std::chrono::milliseconds(round % 5));
        holder.unlock();  // the grant and the cancellation race
        std::this_thread::sleep_for(std::chrono::microseconds(round * 97 % 900));
        loop.emit(signal);
        auto future = done.get_future();
        ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
        if (kept) {
            EXPECT_TRUE(kept->is_held());  // delivered: the caller's, released when dropped
        }
        kept.reset();
        ASSERT_TRUE(eventually([&] { return free_for_another(other, "async:race"); }, 5s)) << "round " << round;
    }
}

TEST(Async, AHoldMovesAcrossThreadsAndIsReleasedFromAnother) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:move");
    auto future = dlock::async_lock(lock, asio::use_future);
    AsyncHold hold = get(future);
    const auto token = hold.fencing_token();
    std::error_code released = dlock::errc::protocol_error;
    std::thread([&, moved = std::move(hold)]() mutable {
        if (moved.fencing_token() != token) return;
        std::promise<std::error_code> done;
        dlock::async_unlock(moved, [&](std::error_code ec) { done.set_value(ec); });
        auto result = done.get_future();
        released = get(result);
    }).join();
    EXPECT_FALSE(released) << released.message();
    EXPECT_TRUE(free_for_another(other, "async:move"));
}

TEST(Async, ALostHoldIsHeardByItsAwaitedNotification) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:lost", {.lease = 2000ms});
    auto future = dlock::async_lock(lock, asio::use_future);
    AsyncHold hold = get(future);
    auto lost = dlock::async_wait_lost(hold, asio::use_future);
    EXPECT_EQ(lost.wait_for(50ms), std::future_status::timeout);
    ASSERT_TRUE(dlock::force_release(other, "async:lost"));
    const auto before = std::chrono::steady_clock::now();
    // The loss is the event waited for: no error (use_future does not throw);
    // the hold says why.
    EXPECT_NO_THROW(get(lost));
    EXPECT_LT(std::chrono::steady_clock::now() - before, 2000ms);  // no later than the lease
    EXPECT_TRUE(hold.lost_token().stop_requested());
    EXPECT_EQ(hold.lost_reason(), dlock::LostReason::revoked);
    EXPECT_FALSE(hold.is_held());
    // A wait on a hold released first ends as aborted.
    auto again = dlock::async_lock(lock, asio::use_future);
    AsyncHold second = get(again);
    std::promise<std::error_code> aborted;
    dlock::async_wait_lost(second, [&](std::error_code ec) { aborted.set_value(ec); });
    second = AsyncHold();
    auto result = aborted.get_future();
    EXPECT_EQ(get(result), asio::error::operation_aborted);
}

TEST(Async, AThousandWaitsShareOneThread) {
    RedisServer server;
    dlock::Client client(server.uri());
    constexpr int waiters = 1000;
    std::vector<std::unique_ptr<dlock::Lock>> locks;
    for (int i = 0; i < waiters; ++i) locks.push_back(std::make_unique<dlock::Lock>(client, "async:many"));
    std::atomic<int> acquired{0}, in_hold{0}, overlaps{0};
    std::mutex threads_mutex;
    std::set<std::thread::id> threads;
    std::promise<void> all_done;
    for (int i = 0; i < waiters; ++i) {
        dlock::async_lock(*locks[i], [&](std::error_code ec, AsyncHold hold) {
            {
                std::lock_guard lock(threads_mutex);
                threads.insert(std::this_thread::get_id());
            }
            if (ec || !hold) return;
            if (in_hold.fetch_add(1) != 0) ++overlaps;
            in_hold.fetch_sub(1);
            hold = AsyncHold();  // released in the background: the next waiter's turn
            if (acquired.fetch_add(1) + 1 == waiters) all_done.set_value();
        });
    }
    auto future = all_done.get_future();
    ASSERT_EQ(future.wait_for(120s), std::future_status::ready) << acquired.load() << " of " << waiters;
    EXPECT_EQ(overlaps.load(), 0);
    std::lock_guard lock(threads_mutex);
    EXPECT_EQ(threads.size(), 1u) << "the completions ran on more than the one fiber thread";
}

TEST(Async, ADeadlineEndsAWaitWithAnEmptyHoldAndAClosedClientEndsOperations) {
    RedisServer server;
    dlock::Client other(server.uri());
    dlock::Lock holder(other, "async:deadline");
    holder.lock();
    auto client = std::make_unique<dlock::Client>(server.uri());
    dlock::Lock lock(*client, "async:deadline");
    const auto before = std::chrono::steady_clock::now();
    auto timed = dlock::async_try_lock_for(lock, 300ms, asio::use_future);
    AsyncHold none = get(timed);
    EXPECT_FALSE(none);
    EXPECT_GE(std::chrono::steady_clock::now() - before, 290ms);
    // The wait's end comes to a handler, not as a future's exception: the
    // fiber thread drops the promise's last hold on a stored exception after
    // this thread read it, and ThreadSanitizer cannot see the reference count
    // inside libstdc++ that orders the two (a data race reported on
    // exception_ptr::_M_release, not one of the library's).
    std::promise<std::pair<std::error_code, bool>> ended;
    dlock::async_lock(lock, [&](std::error_code ec, AsyncHold hold) { ended.set_value({ec, bool(hold)}); });
    auto waiting = ended.get_future();
    std::this_thread::sleep_for(100ms);
    client.reset();  // closes: the waiting operation ends
    ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
    const auto [ec, held] = waiting.get();
    EXPECT_FALSE(held) << "a closed client's wait completed holding the lock";
    EXPECT_EQ(ec, dlock::errc::client_closed) << ec.message();
}

TEST(Async, ADeferredOperationStartsWhenInvokedAndATryIsOneAttempt) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:deferred");
    auto deferred = dlock::async_try_lock(lock, asio::experimental::deferred);
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(free_for_another(other, "async:deferred")) << "a deferred operation started before it was invoked";
    std::promise<AsyncHold> done;
    std::move(deferred)([&](std::error_code ec, AsyncHold hold) {
        EXPECT_FALSE(ec);
        done.set_value(std::move(hold));
    });
    auto future = done.get_future();
    AsyncHold hold = get(future);
    ASSERT_TRUE(hold.is_held());
    // Busy: one attempt, an empty hold, no error.
    auto again = dlock::async_try_lock(lock, asio::use_future);
    EXPECT_FALSE(get(again));
}

TEST(Async, AWaitRacedAgainstATimerWithAwaitableOperatorsLeavesNothingBehind) {
    using namespace asio::experimental::awaitable_operators;
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock holder(other, "async:race-timer");
    holder.lock();
    dlock::Lock lock(client, "async:race-timer");
    asio::io_context io;
    int outcome = -1;  // 0: the timer won, 1: the lock won
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
            auto first = co_await (dlock::async_lock(lock, asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
            outcome = static_cast<int>(first.index() == 0 ? 1 : 0);
        },
        asio::detached);
    io.run_for(20s);
    EXPECT_EQ(outcome, 0);
    holder.unlock();
    // The cancelled waiter left the line: the lock is free for a third party.
    EXPECT_TRUE(eventually([&] { return free_for_another(other, "async:race-timer"); }, 5s));
    EXPECT_FALSE(dlock::inspect_lock(other, "async:race-timer").held);
}

TEST(Async, AMultiLockHoldsLossIsHeardByItsAwaitedNotification) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::MultiLock multi(client, {"async:ml:a", "async:ml:b"});
    auto future = dlock::async_lock(multi, asio::use_future);
    AsyncHold hold = get(future);
    ASSERT_TRUE(hold.is_held());
    auto lost = dlock::async_wait_lost(hold, asio::use_future);
    ASSERT_TRUE(dlock::force_release(other, "async:ml:b"));
    ASSERT_EQ(lost.wait_for(5s), std::future_status::ready) << "the loss of one name was not heard";
    EXPECT_NO_THROW(lost.get()) << "the loss is the event waited for, not an error";
    EXPECT_EQ(hold.lost_reason(), dlock::LostReason::revoked);
}

TEST(Async, ALostWaitEndsWhenItsClientCloses) {
    RedisServer server;
    auto client = std::make_unique<dlock::Client>(server.uri());
    dlock::Lock lock(*client, "async:lost-close");
    auto future = dlock::async_lock(lock, asio::use_future);
    AsyncHold hold = get(future);
    std::promise<std::error_code> ended;
    dlock::async_wait_lost(hold, [&](std::error_code ec) { ended.set_value(ec); });
    client.reset();
    auto result = ended.get_future();
    ASSERT_EQ(result.wait_for(10s), std::future_status::ready) << "the wait outlived its client";
    EXPECT_EQ(result.get(), dlock::errc::client_closed);
}

// A wait on a hold already lost ends at once: the thread that starts it
// hears the loss, and the fiber thread completes the wait and lets its parts
// go. The fiber thread may do that before the starting thread has put all
// the parts in place (the caller preempted as soon as it woke the fiber
// thread): the parts put in place afterwards then kept one another alive,
// and with them the hold, its lock and the fiber thread, after the Client
// had gone (a leak at exit). Here the starting thread runs at idle priority
// on the fiber thread's CPU, so the fiber thread runs the moment it is woken.
namespace {

// Runs fn on a thread of idle priority (SCHED_IDLE) bound to cpu.
void at_idle_priority_on(int cpu, const std::function<void()>& fn) {
    std::thread([&] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        sched_param none{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
        fn();
    }).join();
}

}  // namespace

TEST(Async, AWaitOnAHoldAlreadyLostLeavesNothingBehindItsClient) {
    RedisServer server;
    // This thread, and so the client's threads it starts, on one CPU (until the test ends).
    struct Pinned {
        cpu_set_t all{};
        Pinned() { pthread_getaffinity_np(pthread_self(), sizeof all, &all); }
        ~Pinned() { pthread_setaffinity_np(pthread_self(), sizeof all, &all); }
    } pinned;
    const int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    // Held by each lock's options: alive while anything of a lock is.
    auto token = std::make_shared<int>(0);
    std::weak_ptr<int> kept = token;
    {
        dlock::Client client(server.uri()), other(server.uri());
        for (int i = 0; i < 5; ++i) {
            dlock::Lock lock(client, "async:lost-first", {.on_lost = [token](std::string_view, std::error_code) {}});
            auto future = dlock::async_lock(lock, asio::use_future);
            AsyncHold hold = get(future);
            ASSERT_TRUE(dlock::force_release(other, "async:lost-first"));
            ASSERT_TRUE(eventually([&] { return hold.lost_token().stop_requested(); }, 10s));
            std::promise<std::error_code> told;
            at_idle_priority_on(cpu, [&] { dlock::async_wait_lost(hold, [&](std::error_code ec) { told.set_value(ec); }); });
            auto result = told.get_future();
            EXPECT_FALSE(get(result)) << "the loss is what was waited for";
            EXPECT_EQ(hold.lost_reason(), dlock::LostReason::revoked);
        }
        token.reset();
    }
    EXPECT_TRUE(kept.expired()) << "a wait's parts outlived their Client, keeping its lock alive";
}

// The natural race of a timer and a loss, with use_awaitable: the loss
// ends it normally (it threw "the lock's lease was lost" when a loss was
// an error), and the reason is on the hold.
TEST(Async, ALossRacedAgainstATimerEndsTheRaceWithoutAnException) {
    using namespace asio::experimental::awaitable_operators;
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:lost-race");
    auto future = dlock::async_lock(lock, asio::use_future);
    AsyncHold hold = get(future);
    asio::io_context io;
    std::string outcome = "not finished";
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer timer(io, 20s);
            try {
                auto which = co_await (timer.async_wait(asio::use_awaitable) ||
                                       dlock::async_wait_lost(hold, asio::use_awaitable));
                outcome = which.index() == 1 ? "lost" : "timer";
            } catch (const std::exception& e) {
                outcome = std::string("threw: ") + e.what();
            }
        },
        asio::detached);
    std::thread breaker([&] {
        std::this_thread::sleep_for(200ms);
        dlock::force_release(other, "async:lost-race");
    });
    io.run();
    breaker.join();
    EXPECT_EQ(outcome, "lost");
    EXPECT_EQ(hold.lost_reason(), dlock::LostReason::revoked);
}

// Cancellation emitted on the coroutine's executor while dlock completes the
// operation: the slot is cleared on that executor too (ThreadSanitizer saw
// the two threads meet in the slot when it was cleared on dlock's thread).
TEST(Async, ManyShortRacesAgainstTimersEndCleanly) {
    using namespace asio::experimental::awaitable_operators;
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Lock lock(client, "async:short-races");
    asio::io_context io;
    int rounds_done = 0;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (int round = 0; round < 200; ++round) {
                asio::steady_timer timer(co_await asio::this_coro::executor,
                                         std::chrono::microseconds(round * 37 % 400));
                auto first = co_await (dlock::async_lock(lock, asio::use_awaitable) ||
                                       timer.async_wait(asio::use_awaitable));
                if (first.index() == 0) co_await dlock::async_unlock(std::get<0>(first), asio::use_awaitable);
                ++rounds_done;
            }
        },
        asio::detached);
    io.run_for(60s);
    EXPECT_EQ(rounds_done, 200);
    EXPECT_TRUE(eventually([&] { return free_for_another(other, "async:short-races"); }, 5s));
}

// Callbacks and futures for every kind (coroutines: EveryKindWorksFromACoroutine).
TEST(Async, EveryKindCompletesACallbackAndAFuture) {
    RedisServer server, second, third;
    dlock::Client client(server.uri()), other(server.uri());
    dlock::Masters masters({server.uri(), second.uri(), third.uri()});
    dlock::FairLock fair(client, "async:cb:fair");
    dlock::RwLock rw(client, "async:cb:rw");
    dlock::Semaphore semaphore(client, "async:cb:sem", {.limit = 2});
    dlock::Redlock redlock(masters, "async:cb:redlock");
    dlock::MultiLock multi(client, {"async:cb:x", "async:cb:y"});
    auto by_callback = [](auto start) {
        std::promise<AsyncHold> done;
        start([&](std::error_code ec, AsyncHold hold) {
            if (ec) done.set_exception(std::make_exception_ptr(std::system_error(ec)));
            else done.set_value(std::move(hold));
        });
        auto future = done.get_future();
        return get(future);
    };
    std::vector<AsyncHold> holds;
    holds.push_back(by_callback([&](auto cb) { dlock::async_lock(fair, cb); }));
    holds.push_back(by_callback([&](auto cb) { dlock::async_lock_shared(rw, cb); }));
    holds.push_back(by_callback([&](auto cb) { dlock::async_acquire(semaphore, 1, cb); }));
    holds.push_back(by_callback([&](auto cb) { dlock::async_lock(redlock, cb); }));
    holds.push_back(by_callback([&](auto cb) { dlock::async_lock(multi, cb); }));
    for (auto& hold : holds) EXPECT_TRUE(hold.is_held()) << hold.name();
    for (auto& hold : holds) {
        auto released = dlock::async_unlock(hold, asio::use_future);
        EXPECT_NO_THROW(get(released)) << hold.name();
    }
    auto f1 = dlock::async_lock(fair, asio::use_future);
    auto f2 = dlock::async_lock(rw, asio::use_future);
    auto f3 = dlock::async_acquire(semaphore, 2, asio::use_future);
    auto f4 = dlock::async_lock(redlock, asio::use_future);
    auto f5 = dlock::async_lock(multi, asio::use_future);
    for (auto* future : {&f1, &f2, &f3, &f4, &f5}) EXPECT_TRUE(get(*future).is_held());  // each dropped: released
    // All given back (in the background): another client takes each at once.
    EXPECT_TRUE(eventually([&] { return free_for_another(other, "async:cb:fair"); }, 5s));
    dlock::Semaphore sem_other(other, "async:cb:sem", {.limit = 2});
    EXPECT_TRUE(eventually([&] { return static_cast<bool>(sem_other.try_acquire(2)); }, 5s));
}

// Cancelled at once, on a client whose first wait is still subscribing its
// inbox: it completes, holds nothing, and leaves nothing in line.
TEST(Async, ACancellationWhileTheFirstWaitSubscribesLeavesNothing) {
    RedisServer server;
    dlock::Client other(server.uri());
    dlock::Lock holder(other, "async:subscribing");
    holder.lock();
    Loop loop;
    for (int round = 0; round < 10; ++round) {
        dlock::Client client(server.uri());  // a new client: its first wait subscribes
        dlock::Lock lock(client, "async:subscribing");
        asio::cancellation_signal signal;
        std::promise<std::pair<std::error_code, bool>> done;
        dlock::async_lock(lock, asio::bind_executor(loop.io, asio::bind_cancellation_slot(
                                                                 signal.slot(), [&](std::error_code ec, AsyncHold hold) {
                                                                     done.set_value({ec, static_cast<bool>(hold)});
                                                                 })));
        std::this_thread::sleep_for(std::chrono::microseconds(round * 300));
        loop.emit(signal);
        auto future = done.get_future();
        auto [ec, held] = get(future);
        EXPECT_EQ(ec, asio::error::operation_aborted) << "round " << round;
        EXPECT_FALSE(held);
    }
    holder.unlock();
    EXPECT_TRUE(eventually([&] { return free_for_another(other, "async:subscribing"); }, 5s));
}

// An AsyncHold owns its hold, not the lock object it was made through: the
// object's destructor leaves it held and renewed (past several leases), and
// nobody else takes the name until the AsyncHold lets it go.
namespace {

template <typename Acquire>
void check_outlives_its_lock_object(const std::string& name, Acquire acquire) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    AsyncHold hold = acquire(client, name);
    ASSERT_TRUE(hold.is_held()) << name;
    std::promise<std::error_code> told;
    dlock::async_wait_lost(hold, [&told](std::error_code ec) { told.set_value(ec); });
    auto lost = told.get_future();
    // The lock object is gone (acquire's); three leases of 1 s go by.
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(hold.is_held()) << name;
    EXPECT_FALSE(hold.lost_token().stop_requested()) << name;
    EXPECT_EQ(lost.wait_for(0s), std::future_status::timeout) << name;
    EXPECT_FALSE(free_for_another(other, name)) << name << " was taken while its AsyncHold held it";
    hold = AsyncHold();  // released in the background
    EXPECT_TRUE(eventually([&] { return free_for_another(other, name); }, 5s)) << name;
    EXPECT_EQ(get(lost), asio::error::operation_aborted) << name;
}

}  // namespace

TEST(Async, AHoldOutlivesTheLockObjectItWasMadeThrough) {
    constexpr auto lease = 1000ms;
    check_outlives_its_lock_object("async:outlive:lock", [&](dlock::Client& client, const std::string& name) {
        dlock::Lock lock(client, name, {.lease = lease});
        auto future = dlock::async_lock(lock, asio::use_future);
        return get(future);
    });
    check_outlives_its_lock_object("async:outlive:fair", [&](dlock::Client& client, const std::string& name) {
        dlock::FairLock lock(client, name, {.lease = lease});
        auto future = dlock::async_try_lock_for(lock, 5s, asio::use_future);
        return get(future);
    });
    check_outlives_its_lock_object("async:outlive:write", [&](dlock::Client& client, const std::string& name) {
        dlock::RwLock lock(client, name, {.lease = lease});
        auto future = dlock::async_lock(lock, asio::use_future);
        return get(future);
    });
    check_outlives_its_lock_object("async:outlive:multi", [&](dlock::Client& client, const std::string& name) {
        dlock::MultiLock lock(client, {name}, {.lease = lease});
        auto future = dlock::async_lock(lock, asio::use_future);
        return get(future);
    });
}

// The read side: a writer cannot take the name while the AsyncHold reads.
TEST(Async, ASharedHoldOutlivesItsRwLock) {
    RedisServer server;
    dlock::Client client(server.uri()), other(server.uri());
    AsyncHold hold;
    {
        dlock::RwLock lock(client, "async:outlive:read", {.lease = 1000ms});
        auto future = dlock::async_lock_shared(lock, asio::use_future);
        hold = get(future);
    }
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(hold.is_held());
    EXPECT_FALSE(hold.lost_token().stop_requested());
    dlock::RwLock writer(other, "async:outlive:read");
    EXPECT_FALSE(writer.try_lock()) << "a writer got in while the AsyncHold read";
    hold = AsyncHold();
    EXPECT_TRUE(eventually([&] { return writer.try_lock(); }, 5s));
    writer.unlock();
}

// Several masters: the Redlock object goes, its AsyncHold keeps the name.
TEST(Async, ARedlockHoldOutlivesItsRedlock) {
    RedisServer a, b, c;
    dlock::Masters masters({a.uri(), b.uri(), c.uri()}), others({a.uri(), b.uri(), c.uri()});
    AsyncHold hold;
    {
        dlock::Redlock lock(masters, "async:outlive:redlock", {.lease = 1000ms});
        auto future = dlock::async_lock(lock, asio::use_future);
        hold = get(future);
    }
    std::this_thread::sleep_for(3s);
    EXPECT_TRUE(hold.is_held());
    EXPECT_FALSE(hold.lost_token().stop_requested());
    dlock::Redlock rival(others, "async:outlive:redlock");
    EXPECT_FALSE(rival.try_lock()) << "taken while the AsyncHold held it";
    hold = AsyncHold();
    EXPECT_TRUE(eventually([&] { return rival.try_lock(); }, 5s));
    rival.unlock();
}
