// A condition variable that a thread or a fiber (fiber.hpp) may wait on.
//
// Every wait of a lock operation — a local queue, an owner's gate, a reply,
// a subscription's confirmation — goes through one of these: a thread
// sleeps as on std::condition_variable_any; a fiber parks, and its runner's
// thread goes on with other fibers. That is what lets the asynchronous API
// run the synchronous code unchanged.
//
// Waits take a predicate, a deadline on any clock Asio's timers take
// (steady_clock here) and a stop token, like std::condition_variable_any's.
// notify_one() wakes every waiter (they re-check their predicates): one
// condition may have both kinds of waiter, and a wake-up given to the wrong
// one must not be lost.
//
// Thread-safety: as std::condition_variable_any. A fiber's wait must hold
// `lock` only (no other lock is held while it parks).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <vector>

#include <asio/steady_timer.hpp>

#include "fiber.hpp"
#include "fiber_runner.hpp"

namespace dlock::detail {

class Condition {
public:
    void notify_one() { notify_all(); }
    void notify_all() {
        std::vector<std::shared_ptr<Fiber>> fibers;
        {
            std::lock_guard lock(mutex_);
            fibers = fibers_;
        }
        for (auto& fiber : fibers) fiber->wake();
        threads_.notify_all();
    }

    template <typename Lock, typename Predicate>
    bool wait(Lock& lock, std::stop_token stop, Predicate ready) {
        if (Fiber::current()) return park_until(lock, stop, std::nullopt, ready);
        return threads_.wait(lock, stop, ready);
    }
    template <typename Lock, typename Predicate>
    bool wait_until(Lock& lock, std::stop_token stop, std::chrono::steady_clock::time_point deadline,
                    Predicate ready) {
        if (Fiber::current()) return park_until(lock, stop, deadline, ready);
        return threads_.wait_until(lock, stop, deadline, ready);
    }
    template <typename Lock, typename Predicate>
    bool wait_until(Lock& lock, std::chrono::steady_clock::time_point deadline, Predicate ready) {
        if (Fiber::current()) return park_until(lock, std::stop_token{}, deadline, ready);
        return threads_.wait_until(lock, deadline, ready);
    }
    template <typename Lock, typename Predicate>
    void wait(Lock& lock, Predicate ready) {
        if (Fiber::current()) {
            park_until(lock, std::stop_token{}, std::nullopt, ready);
            return;
        }
        threads_.wait(lock, ready);
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

    std::condition_variable_any threads_;
    std::mutex mutex_;
    std::vector<std::shared_ptr<Fiber>> fibers_;  // parked in a wait here
};

}  // namespace dlock::detail
