// A force release that reaches a client before the answer that grants the
// hold it takes back: the answer and the revocation come on different
// connections (the command connection, the subscriber's), and a network
// that holds one back can deliver them together, in either order. The
// client must hear the loss within about a round trip (lock.hpp,
// force_release), not at the hold's first renewal, while the next holder
// holds what was taken back. The client's replies go through a TcpProxy
// that holds them back until both are on their way.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "dlock/semaphore.hpp"
#include "eventually.hpp"
#include "redis_server.hpp"
#include "server_keys.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::support::eventually;
using dlock::test::lock_key;
using dlock::test::semaphore_key;

namespace {

// How long two holds stood together, polled every millisecond for up to 3 s.
template <typename First, typename Second>
std::chrono::milliseconds held_together(First first_held, Second second_held) {
    const auto from = Clock::now();
    auto until = from;
    while (Clock::now() - from < 3s && first_held() && second_held()) {
        until = Clock::now();
        std::this_thread::sleep_for(1ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(until - from);
}

// Rounds in which the revoked holder still trusted its hold 200 ms after
// the next one held it; `round` returns how long both held (-1: the round
// could not be set up as meant, and does not count), `counted` the rounds that did.
template <typename Round>
int overlapping_rounds(int rounds, Round round, int& counted) {
    int overlapped = 0;
    for (int i = 0; i < rounds; ++i) {
        const auto both = round();
        if (both < 0ms) continue;
        ++counted;
        overlapped += both >= 200ms;
    }
    return overlapped;
}

}  // namespace

TEST(RevokedBeforeGranted, APermitWhoseRevocationComesWithItsGrantIsLostAtOnce) {
    int counted = 0;
    const int overlapped = overlapping_rounds(8, [] {
        dlock::support::RedisServer server;
        dlock::support::TcpProxy proxy{server.port()};
        dlock::Client admin{server.uri()}, second_client{server.uri()}, first_client{proxy.uri()};
        dlock::Semaphore first_sem(first_client, "revoked", {.limit = 2, .lease = 6s});
        dlock::Semaphore second_sem(second_client, "revoked", {.limit = 2, .lease = 6s});
        first_sem.try_acquire().release();  // its inbox listens, its scripts are known
        proxy.delay_replies(5s);            // the grant's answer and the revocation wait
        auto first = std::async(std::launch::async, [&] { return first_sem.try_acquire_for(5s); });
        // Not counted when the request was not on the server in time (a
        // loaded machine): then the revocation may not come before the answer.
        if (!eventually([&] { return server.cli({"ZCARD", semaphore_key("revoked")}) == "1"; }, 2s)) {
            proxy.delay_replies(0ms);
            std::error_code ec;
            if (auto late = first.get()) late.release(ec);
            return -1ms;
        }
        const auto id = server.cli({"ZRANGE", semaphore_key("revoked"), "0", "0"});
        EXPECT_EQ(dlock::force_release(admin, "revoked", {.holder = id}).broken.size(), 1u);
        auto second = second_sem.try_acquire(2);  // the whole limit
        proxy.delay_replies(0ms);                 // answer and revocation arrive together
        auto permit = first.get();
        if (!permit || !second) return -1ms;
        const auto both = held_together([&] { return permit.is_held(); }, [&] { return second.is_held(); });
        std::error_code ec;
        permit.release(ec);
        second.release();
        EXPECT_EQ(server.cli({"HGET", semaphore_key("revoked") + ":state", "used"}), "0") << "the count drifted";
        return both;
    }, counted);
    EXPECT_GE(counted, 2);
    EXPECT_EQ(overlapped, 0) << "a force-released permit was trusted beside a holder of the whole limit";
}

TEST(RevokedBeforeGranted, ALockWhoseRevocationComesWithItsGrantIsLostAtOnce) {
    int counted = 0;
    const int overlapped = overlapping_rounds(8, [] {
        dlock::support::RedisServer server;
        dlock::support::TcpProxy proxy{server.port()};
        dlock::Client admin{server.uri()}, second_client{server.uri()}, first_client{proxy.uri()};
        dlock::Lock first_lock(first_client, "revoked", {.lease = 6s});
        dlock::Lock second_lock(second_client, "revoked", {.lease = 6s});
        std::async(std::launch::async, [&] {
            if (first_lock.try_lock()) first_lock.unlock();  // its inbox listens, its scripts are known
        }).get();
        std::atomic<bool> second_holds{false}, second_failed{false};
        proxy.delay_replies(5s);  // the grant's answer and the revocation wait
        auto first = std::async(std::launch::async, [&] {
            if (!first_lock.try_lock_for(5s)) return -1ms;
            while (!second_holds && !second_failed) std::this_thread::sleep_for(1ms);
            const auto both = held_together([&] { return first_lock.is_held(); }, [&] { return second_holds.load(); });
            std::error_code ec;
            first_lock.unlock(ec);
            return second_holds ? both : -1ms;
        });
        if (!eventually([&] { return server.cli({"EXISTS", lock_key("revoked")}) == "1"; }, 2s)) {
            second_failed = true;  // not on the server in time (a loaded machine): not counted
            proxy.delay_replies(0ms);
            (void)first.get();
            return -1ms;
        }
        EXPECT_EQ(dlock::force_release(admin, "revoked", {.all = true}).broken.size(), 1u);
        const bool held = second_lock.try_lock();
        second_holds = held;
        second_failed = !held;
        proxy.delay_replies(0ms);  // answer and revocation arrive together
        const auto both = first.get();
        second_holds = false;
        if (held) second_lock.unlock();
        return both;
    }, counted);
    EXPECT_GE(counted, 2);
    EXPECT_EQ(overlapped, 0) << "two held one lock";
}
