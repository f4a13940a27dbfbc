// Closing a Client (or Masters) while one of its threads waits to acquire
// any kind of lock held elsewhere: the waiter returns at once with
// errc::client_closed, not when the holder's lease ends; and a waiting
// writer's mark (which holds back new readers) is taken back by the close.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;

namespace {

constexpr auto holder_lease = 10'000ms;  // far longer than the close may take
constexpr auto close_bound = 1'500ms;  // generous: a close waits max_close_wait (500 ms) at most

double waiting_callers(dlock::Metrics& metrics) {
    double total = 0;
    for (const char* kind : {"lock", "fair_lock", "read", "write", "semaphore", "redlock", "multi_lock"})
        total += metrics.value("dlock_waiting_callers", {{"kind", kind}});
    return total;
}

// One kind's scenario: `hold` takes the resource through another client;
// `wait` blocks until acquired, through a lock object made on the closing
// client (or masters) before the close.
struct Scenario {
    std::function<void()> hold;
    std::function<void()> wait;
    dlock::Metrics* metrics = nullptr;
    std::function<void()> close;
    std::string label;
};

struct Servers {
    std::vector<std::unique_ptr<dlock::support::RedisServer>> list;
    explicit Servers(int n) {
        for (int i = 0; i < n; ++i) list.push_back(std::make_unique<dlock::support::RedisServer>());
    }
    std::vector<std::string> urls() const {
        std::vector<std::string> out;
        for (auto& server : list) out.push_back(server->uri());
        return out;
    }
};

// Runs the waiter, closes its client once it waits, and reports how long
// the waiter took to return after the close, and what it heard.
void expect_prompt_client_closed(Scenario& s) {
    s.hold();
    std::atomic<bool> done{false};
    std::atomic<Clock::time_point> returned_at{};
    std::error_code heard;
    std::thread waiter([&] {
        try {
            s.wait();
        } catch (const dlock::Error& e) {
            heard = e.code();
        }
        returned_at = Clock::now();
        done = true;
    });
    EXPECT_TRUE(eventually([&] { return waiting_callers(*s.metrics) == 1; }));
    const auto closing = Clock::now();
    s.close();
    const bool in_time = eventually([&] { return done.load(); }, close_bound);
    waiter.join();  // the lease ends it at the latest
    const auto returned = std::chrono::duration<double>(returned_at.load() - closing).count();
    std::printf("the %s waiter returned %.3f s after the close\n", s.label.c_str(), returned);
    EXPECT_TRUE(in_time) << "the waiter returned " << returned << " s after the close";
    EXPECT_EQ(heard, dlock::errc::client_closed) << heard.message();
}

class CloseWakesWaiters : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(CloseWakesWaiters, AtOnceWithClientClosed) {
    const auto& kind = GetParam();
    const int n = kind == "redlock" ? 3 : 1;
    Servers servers(n);
    const auto uri = servers.list[0]->uri();
    const std::string name = "close-" + kind;
    dlock::Client holder_client(uri);
    // Outlives the closing client (or masters).
    const auto metrics = std::make_shared<dlock::Metrics>();
    auto client = std::make_unique<dlock::Client>(uri, dlock::ClientOptions{.metrics = metrics});
    Scenario s;
    s.metrics = metrics.get();
    s.label = kind;
    s.close = [&] { client.reset(); };
    const dlock::LockOptions long_lease{.lease = holder_lease};

    // Every object below outlives the waiter thread, and none touches
    // `client` after the close.
    dlock::Lock held_lock(holder_client, name, long_lease);
    dlock::FairLock held_fair(holder_client, name, long_lease);
    dlock::RwLock held_rw(holder_client, name, {.lease = holder_lease});
    dlock::Semaphore held_semaphore(holder_client, name, {.limit = 1, .lease = holder_lease});
    dlock::Permit held_permit;
    std::unique_ptr<dlock::Lock> lock;
    std::unique_ptr<dlock::FairLock> fair;
    std::unique_ptr<dlock::RwLock> rw;
    std::unique_ptr<dlock::Semaphore> semaphore;
    std::unique_ptr<dlock::MultiLock> multi;
    std::unique_ptr<dlock::Masters> masters, holder_masters;
    std::unique_ptr<dlock::Redlock> redlock, held_redlock;

    if (kind == "lock") {
        lock = std::make_unique<dlock::Lock>(*client, name);
        s.hold = [&] { held_lock.lock(); };
        s.wait = [&] { lock->lock(); };
    } else if (kind == "fair") {
        fair = std::make_unique<dlock::FairLock>(*client, name);
        s.hold = [&] { held_fair.lock(); };
        s.wait = [&] { fair->lock(); };
    } else if (kind == "read" || kind == "write") {
        rw = std::make_unique<dlock::RwLock>(*client, name, dlock::RwLockOptions{.lease = holder_lease});
        if (kind == "read") {
            s.hold = [&] { held_rw.lock(); };
            s.wait = [&] { rw->lock_shared(); };
        } else {
            s.hold = [&] { held_rw.lock_shared(); };
            s.wait = [&] { rw->lock(); };
        }
    } else if (kind == "semaphore") {
        semaphore = std::make_unique<dlock::Semaphore>(*client, name,
                                                       dlock::SemaphoreOptions{.limit = 1, .waiter_lease = 10'000ms});
        s.hold = [&] { held_permit = held_semaphore.acquire(); };
        s.wait = [&] { (void)semaphore->acquire(); };
    } else if (kind == "multi") {
        multi = std::make_unique<dlock::MultiLock>(*client, std::vector<std::string>{name + "-a", name});
        s.hold = [&] { held_lock.lock(); };
        s.wait = [&] { multi->lock(); };
    } else if (kind == "redlock") {
        masters = std::make_unique<dlock::Masters>(servers.urls(), dlock::ClientOptions{.metrics = metrics});
        holder_masters = std::make_unique<dlock::Masters>(servers.urls());
        redlock = std::make_unique<dlock::Redlock>(*masters, name);
        held_redlock = std::make_unique<dlock::Redlock>(*holder_masters, name, dlock::RedlockOptions{.lease = holder_lease});
        s.hold = [&] { held_redlock->lock(); };
        s.wait = [&] { redlock->lock(); };
        s.close = [&] { masters.reset(); };
    }
    expect_prompt_client_closed(s);

    if (kind == "write") {
        // The closed client's waiting writer no longer holds back readers:
        // its mark went with the close, rather than lasting its lease.
        dlock::Client reader_client(uri);
        dlock::RwLock reader(reader_client, name);
        const auto start = Clock::now();
        const bool read = reader.try_lock_shared_for(2s);
        EXPECT_TRUE(read) << "a new reader was still held back "
                          << std::chrono::duration<double>(Clock::now() - start).count()
                          << " s after the close: the closed writer's mark stayed";
        if (read) reader.unlock_shared();
    }
    if (kind == "semaphore") {
        // The closed client's waiter gave back its place in line: the
        // permit goes to a newcomer, rather than waiting for the place to
        // run out (waiter_lease).
        held_permit.release();
        dlock::Client newcomer_client(uri);
        dlock::Semaphore newcomer(newcomer_client, name, {.limit = 1, .waiter_lease = 10'000ms});
        const auto start = Clock::now();
        auto permit = newcomer.try_acquire_for(2s);
        EXPECT_TRUE(permit) << "no permit " << std::chrono::duration<double>(Clock::now() - start).count()
                            << " s after the close: the closed waiter's place stayed";
    }
}

INSTANTIATE_TEST_SUITE_P(EveryKind, CloseWakesWaiters,
                         ::testing::Values("lock", "fair", "read", "write", "semaphore", "multi", "redlock"),
                         [](const auto& info) { return info.param; });
