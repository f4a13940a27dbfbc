// The outcome of a call that one caller thread waits for and the client's
// I/O thread delivers, where the caller may walk away first (its deadline
// passed, or a stop was requested). The outcome then goes to the handler the
// caller left behind: a lock call that grants after its caller gave up must
// be undone by someone.
//
// Thread-safety: deliver() from any one thread (the I/O thread), wait() from
// one caller thread or fiber; each at most once per use. A reused object
// (reset() between uses) may be waited for by a thread after a fiber, or
// the other way round.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

#include "runtime/condition.hpp"
#include "runtime/function_ref.hpp"
#include "runtime/wake_count.hpp"
#include "redis/client_core.hpp"

namespace dlock::detail {

template <typename Outcome>
class AwaitedOutcome {
public:
    using Handler = std::function<void(Outcome&&)>;
    // Makes the handler of a caller that walks away: called only then, on
    // the caller's thread, so that a wait answered in time makes none.
    using MakeHandler = FunctionRef<Handler()>;

    // The outcome: to the waiting caller, or to the handler of one that
    // walked away. Later calls are ignored.
    void deliver(Outcome&& outcome) {
        Handler handler;
        Condition* parked = nullptr;
        bool walked_away = false;
        {
            std::lock_guard lock(mutex_);
            if (delivered_) return;
            delivered_ = true;
            walked_away = walked_away_;
            if (walked_away) handler = std::move(if_walked_away_);
            else outcome_ = std::move(outcome);
            // The wait in a fiber is woken through parked_, a thread's
            // through done_: by how this call's caller waits, not by whether
            // parked_ exists (a reused object keeps the one an earlier
            // fiber's wait made).
            if (fiber_waits_) parked = parked_.get();
        }
        if (walked_away) {
            if (handler) handler(std::move(outcome));
            return;
        }
        // parked_ lives as long as this object, which the waiter keeps
        // alive until its wait has returned.
        if (parked) return parked->notify_all();
        done_.release();
    }

    // Blocks until the outcome is delivered (true: `out` is set), or until
    // deadline (none: no deadline) or stop (false: walked away; the outcome
    // goes to the handler make_if_walked_away makes, when it comes, on the
    // delivering thread). It sleeps at once: a spin for a reply on loopback
    // cost more client CPU than the wake-up it saved, and on a busy machine
    // took the core the I/O thread needed (README "Table of targets").
    // A caller inside a DriveScope (client_core.hpp) reads its own reply
    // meanwhile, until the deadline or for at most the client's command
    // timeout.
    bool wait(ClientCore& client, std::optional<Clock::time_point> deadline, std::stop_token stop, Outcome& out,
              MakeHandler make_if_walked_away) {
        return wait_driving(deadline.value_or(Clock::now() + client.options().command_timeout), deadline, stop, out,
                            make_if_walked_away);
    }
    // As above, for a caller with no connection to read: it only sleeps.
    bool wait(std::optional<Clock::time_point> deadline, std::stop_token stop, Outcome& out,
              MakeHandler make_if_walked_away) {
        return wait_driving(std::nullopt, deadline, stop, out, make_if_walked_away);
    }

    // Ready for another call, once the last one's outcome was taken or
    // handed to its handler (nothing else uses this object any more).
    void reset() {
        std::lock_guard lock(mutex_);
        delivered_ = walked_away_ = awaited_ = fiber_waits_ = false;
        outcome_.reset();
        if_walked_away_ = nullptr;
        // A stop request's release that came after the delivery's (one
        // atomic load when there is none: WakeCount never yields).
        while (done_.try_acquire()) {
        }
    }

    // True while a caller is blocked in wait() for the outcome (any thread).
    bool awaited() {
        std::lock_guard lock(mutex_);
        return awaited_ && !delivered_;
    }

    // Walks away at once, without a sleep (a caller that never
    // waits): true with `out` set when the outcome is there already.
    bool leave_now(Outcome& out, Handler if_walked_away) {
        std::lock_guard lock(mutex_);
        if (delivered_) {
            out = std::move(*outcome_);
            return true;
        }
        if_walked_away_ = std::move(if_walked_away);
        walked_away_ = true;
        return false;
    }

private:
    bool wait_driving(std::optional<Clock::time_point> drive_until, std::optional<Clock::time_point> deadline,
                      std::stop_token stop, Outcome& out, MakeHandler make_if_walked_away) {
        if (Fiber::current()) return park(deadline, stop, out, make_if_walked_away);
        {
            std::lock_guard lock(mutex_);
            awaited_ = true;
        }
        std::atomic<bool> woken_by_stop{false};
        std::optional<std::stop_callback<std::function<void()>>> on_stop;
        if (stop.stop_possible())
            on_stop.emplace(stop, std::function<void()>([&] {
                                if (!woken_by_stop.exchange(true)) done_.release();
                            }));
        if (!drive_until || !ClientCore::drive_for(done_, *drive_until)) {
            if (deadline) (void)done_.try_acquire_until(*deadline);
            else done_.acquire();
        }
        on_stop.reset();
        return settle(out, make_if_walked_away);
    }

    // wait() in a fiber (an asynchronous operation): it parks.
    bool park(std::optional<Clock::time_point> deadline, std::stop_token stop, Outcome& out,
              MakeHandler make_if_walked_away) {
        {
            std::unique_lock lock(mutex_);
            awaited_ = true;
            fiber_waits_ = true;
            if (!parked_) parked_ = std::make_unique<Condition>();
            auto ready = [&] { return delivered_; };
            if (deadline) parked_->wait_until(lock, stop, *deadline, ready);
            else parked_->wait(lock, stop, ready);
        }
        return settle(out, make_if_walked_away);
    }
    // The wait's end: the outcome (true), or walked away from it. The
    // handler is made outside the lock, and only when walking away.
    bool settle(Outcome& out, MakeHandler make_if_walked_away) {
        {
            std::lock_guard lock(mutex_);
            if (delivered_) return take_locked(out);
        }
        Handler handler = make_if_walked_away ? make_if_walked_away() : Handler();
        std::lock_guard lock(mutex_);
        if (delivered_) return take_locked(out);  // it came meanwhile
        walked_away_ = true;
        awaited_ = false;
        if_walked_away_ = std::move(handler);
        return false;
    }
    bool take_locked(Outcome& out) {
        out = std::move(*outcome_);
        return true;
    }

    std::mutex mutex_;
    bool delivered_ = false;
    bool walked_away_ = false;
    bool awaited_ = false;  // in wait(), until it walks away
    bool fiber_waits_ = false;  // the caller waits in a fiber: park(), woken through parked_
    std::optional<Outcome> outcome_;
    Handler if_walked_away_;
    // Released by the delivery and by a stop request: hence two.
    WakeCount done_;
    // A fiber's wait, made by the first one (a thread's wait allocates none).
    std::unique_ptr<Condition> parked_;
};

}  // namespace dlock::detail
