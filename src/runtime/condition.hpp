// A condition variable that a thread or a fiber (fiber.hpp) may wait on.
//
// Every wait of a lock operation — a local queue, an owner's gate, a reply,
// a subscription's confirmation — goes through one of these: a thread
// sleeps on a futex; a fiber parks, and its runner's thread goes on with
// other fibers. That is what lets the asynchronous API run the synchronous
// code unchanged.
//
// Waits take a predicate, a deadline on steady_clock and a stop token, like
// std::condition_variable_any's. notify_one() wakes every waiter (they
// re-check their predicates): one condition may have both kinds of waiter,
// and a wake-up given to the wrong one must not be lost.
//
// Why not std::condition_variable_any: it keeps a mutex of its own, held
// while it wakes the sleepers, and the woken thread's first act is to take
// that mutex; on two cores it found it still held about once per wake-up,
// and slept again (a context switch more per hand-over of a contended lock,
// measured). A thread here sleeps on a generation word: a notify moves it
// and wakes the sleepers, with no lock of the condition's own.
//
// Contract: whatever the predicate reads changes under `lock`; notify after
// the change, under `lock` or after letting it go. A notify after letting it
// go must know the condition still exists (the waiter may have returned):
// callers that do so keep it alive through a shared_ptr.
// Thread-safety: as std::condition_variable_any. A fiber's wait must hold
// `lock` only (no other lock is held while it parks).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <vector>

#include <asio/steady_timer.hpp>

#include "fiber.hpp"
#include "fiber_runner.hpp"
#include "futex.hpp"

namespace dlock::detail {

class Condition {
public:
    void notify_one() { notify_all(); }
    void notify_all() {
        wake_fibers();
        // Moved before the sleepers are counted: a thread counted after
        // this compares the new generation and does not sleep.
        generation_.fetch_add(1, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(generation_, INT_MAX);
    }

    template <typename Lock, typename Predicate>
    bool wait(Lock& lock, std::stop_token stop, Predicate ready) {
        if (Fiber::current()) return park_until(lock, stop, std::nullopt, ready);
        return sleep_until(lock, stop, nullptr, ready);
    }
    template <typename Lock, typename Predicate>
    bool wait_until(Lock& lock, std::stop_token stop, std::chrono::steady_clock::time_point deadline,
                    Predicate ready) {
        if (Fiber::current()) return park_until(lock, stop, deadline, ready);
        return sleep_until(lock, stop, &deadline, ready);
    }
    template <typename Lock, typename Predicate>
    bool wait_until(Lock& lock, std::chrono::steady_clock::time_point deadline, Predicate ready) {
        if (Fiber::current()) return park_until(lock, std::stop_token{}, deadline, ready);
        return sleep_until(lock, std::stop_token{}, &deadline, ready);
    }
    template <typename Lock, typename Predicate>
    void wait(Lock& lock, Predicate ready) {
        if (Fiber::current()) {
            park_until(lock, std::stop_token{}, std::nullopt, ready);
            return;
        }
        sleep_until(lock, std::stop_token{}, nullptr, ready);
    }

private:
    template <typename Lock, typename Predicate>
    bool park_until(Lock& lock, std::stop_token stop, std::optional<std::chrono::steady_clock::time_point> deadline,
                    Predicate& ready) {
        auto fiber = Fiber::current()->shared_from_this();
        std::optional<asio::steady_timer> timer;
        std::optional<std::stop_callback<std::function<void()>>> on_stop;
        if (stop.stop_possible()) on_stop.emplace(stop, std::function<void()>([fiber] { fiber->wake(); }));
        while (!ready()) {
            if (stop.stop_requested()) return ready();
            if (deadline && std::chrono::steady_clock::now() >= *deadline) return ready();
            if (deadline && !timer) {
                timer.emplace(fiber->runner().io(), *deadline);
                timer->async_wait([fiber](std::error_code ec) {
                    if (!ec) fiber->wake();
                });
            }
            {
                // Registered before `lock` is let go: a notifier that
                // changes the state under `lock` finds this fiber.
                std::lock_guard guard(mutex_);
                fibers_.push_back(fiber);
            }
            lock.unlock();
            fiber->park();
            {
                std::lock_guard guard(mutex_);
                fibers_.erase(std::find(fibers_.begin(), fibers_.end(), fiber));
            }
            lock.lock();
        }
        return true;
    }

    // A thread's wait: ready() is read under `lock`, the generation before
    // `lock` is let go, so a change made under `lock` after that read moves
    // the generation the sleep compares, and the sleep returns at once.
    template <typename Lock, typename Predicate>
    bool sleep_until(Lock& lock, const std::stop_token& stop, const std::chrono::steady_clock::time_point* deadline,
                     Predicate& ready) {
        struct Wake {
            Condition* condition;
            void operator()() const noexcept { condition->notify_all(); }
        };
        std::optional<std::stop_callback<Wake>> on_stop;
        while (!ready()) {
            // Read before the stop is looked at: a stop requested after that
            // look moves the generation (the callback) past this value.
            const auto seen = generation_.load(std::memory_order_acquire);
            if (stop.stop_requested()) return ready();
            if (deadline && std::chrono::steady_clock::now() >= *deadline) return ready();
            if (stop.stop_possible() && !on_stop) {
                on_stop.emplace(stop, Wake{this});
                continue;  // the callback may have run already: look again
            }
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            lock.unlock();
            (void)futex_sleep_while(generation_, seen, deadline);
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
            lock.lock();
        }
        return true;
    }

    void wake_fibers() {
        std::vector<std::shared_ptr<Fiber>> fibers;
        {
            std::lock_guard lock(mutex_);
            if (fibers_.empty()) return;
            fibers = fibers_;
        }
        for (auto& fiber : fibers) fiber->wake();
    }

    std::atomic<std::uint32_t> generation_{0};  // a thread's sleep compares it
    std::atomic<std::uint32_t> sleepers_{0};    // threads that may be asleep on it
    std::mutex mutex_;                          // guards fibers_
    std::vector<std::shared_ptr<Fiber>> fibers_;  // parked in a wait here
};

}  // namespace dlock::detail
