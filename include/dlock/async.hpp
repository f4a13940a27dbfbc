// dlock/async.hpp — the asynchronous API of every lock kind, in the style of
// Asio: each initiating function takes a completion token, so one API serves
// callbacks, asio::use_future, asio::use_awaitable (C++20 coroutines) and
// asio::experimental::deferred (Asio 1.22, as in Debian 12).
//
//   Lock lock(client, "orders:42");
//   AsyncHold hold = co_await async_lock(lock, asio::use_awaitable);
//   write(hold.fencing_token());
//   co_await async_unlock(hold, asio::use_awaitable);  // or let `hold` go: released in the background
//
// What runs: exactly the synchronous call's code (acquire, wait in line,
// hand-off, renewal, release, loss), inside a fiber of the client's one
// fiber thread (started on its first asynchronous call). Where the
// synchronous call would block its thread, the fiber parks: one thread
// carries any number of waits, with no thread per wait. Every guarantee of
// the kind's header holds as written there.
//
// Ownership: each acquisition is an owner of its own, whatever the lock's
// Ownership option says: the AsyncHold it yields owns the hold, not a
// thread, so it may move between threads and be released from any of them.
// Two asynchronous acquisitions of one lock are two owners (the second
// waits for the first; neither re-enters the other's hold).
//
// Completion signatures:
//   acquisitions: void(std::error_code, AsyncHold). A try_* that ran out of
//     time while the lock was busy completes with no error and an empty hold
//     (contention is not an error, as in the synchronous API). A failure
//     gives its error code (the synchronous call's exception's code, the
//     server's text kept in Error::server_text on the Client as usual).
//   releases and lost waits: void(std::error_code).
//
// Cancellation: per operation, through the completion handler's associated
// cancellation slot (asio::bind_cancellation_slot, awaitable operators
// racing a timer, ...). Any cancellation type is taken as a stop request:
// the waiter leaves its local queue and its place in the server's line, and
// a grant that raced the cancellation is given back; the operation then
// completes with asio::error::operation_aborted and holds nothing. A grant
// that completed before the cancellation arrived is delivered (a hold the
// caller may simply drop: it is released in the background).
//
// Executors: the handler runs on its associated executor (a coroutine's,
// or one bound with asio::bind_executor). A handler with none runs on the
// client's fiber thread; it must not block. Never on the client's I/O
// thread.
//
// Lifetime: the lock object (and its Client) must outlive its operations,
// as an Asio I/O object must. An AsyncHold owns its hold, not the lock
// object: it keeps what its release needs alive by itself, and the hold
// stays held and renewed after the lock object is destroyed, until the
// AsyncHold releases it, is dropped, or the hold is lost (its lost_token()
// and async_wait_lost tell). A lock object's destructor releases only the
// holds its synchronous calls made. Closing the Client stops its operations
// (they complete with errc::client_closed) and releases every hold, the
// AsyncHolds' included, before its connections close.
//
// Limits: at most 16,384 operations (waiting or releasing) at once in a
// process; past that an initiating function completes at once with
// std::errc::resource_unavailable_try_again. Each operation has a stack of
// 256 KiB (mapped lazily, guard page below): the library's callbacks that
// run inside an operation — on_unlock_error, on_release_error, a metrics
// sink — must not need more. A plain callback runs on the client's one
// fiber thread: a thread-owned lock taken synchronously there would be
// shared by every such callback (use the asynchronous API there instead).
// `dlock status` names that thread as the holder of asynchronous holds.
//
// Thread-safety: initiating functions may be called from any thread; an
// AsyncHold is a value owned by one thread at a time (move it to hand it
// over); its queries may run while the lease keeper renews it.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include "dlock/deadline.hpp"
#include "dlock/lock.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/rw_lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock {

namespace detail {
class AsyncHoldState;
struct AsyncAccess;
}

// What an asynchronous acquisition yields: the hold (an exclusive or shared
// lock, a Redlock, a multi-lock, or a semaphore's permits). Empty when
// default-constructed, moved from, released, or when a try_* found the lock
// busy. Movable, not copyable.
class AsyncHold {
public:
    AsyncHold() noexcept;
    AsyncHold(AsyncHold&&) noexcept;
    AsyncHold& operator=(AsyncHold&&) noexcept;  // releases what it held first (in the background)
    // Releases in the background (never blocks the destroying thread); a
    // failed release goes to the lock's on_unlock_error / on_release_error.
    ~AsyncHold();

    explicit operator bool() const noexcept;  // something to release
    // The same queries as the lock kinds', about this hold.
    bool is_held() const;  // held, not lost, lease still valid
    std::uint64_t fencing_token() const;  // 0 when empty; a semaphore's permits have none (0); a multi-lock's first name's
    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const;  // each name's (a multi-lock's: every name)
    std::chrono::steady_clock::time_point valid_until() const;  // time_point{} when empty
    // Stop-requested when the hold is lost (lease_lost), on the client's
    // I/O thread, no later than valid_until(). Never requested when empty.
    std::stop_token lost_token() const;
    // Why the hold was lost (as Lock::lost_reason()); nothing while it is
    // held, or when empty.
    std::optional<LostReason> lost_reason() const;
    const std::string& name() const noexcept;  // the lock's name; empty when empty

private:
    friend struct detail::AsyncAccess;
    std::shared_ptr<detail::AsyncHoldState> state_;
};

// The library's side of the initiating functions below (not for direct use).
namespace async_entry {

using AcquireCompletion = std::function<void(std::error_code, AsyncHold)>;
using PlainCompletion = std::function<void(std::error_code)>;

// Each runs the kind's synchronous acquisition in its client's fiber
// thread as an owner of its own, until `deadline` (none: until acquired;
// one already past: one attempt) or until `stop` is requested, then calls
// done once, on the fiber thread (outside the fiber). A closed client:
// done(client_closed) at once, on the calling thread.
void start_acquire(Lock& lock, std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                   AcquireCompletion done);
void start_acquire(RwLock& lock, bool shared, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done);
void start_acquire(Semaphore& semaphore, unsigned permits,
                   std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                   AcquireCompletion done);
void start_acquire(Redlock& lock, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done);
void start_acquire(MultiLock& lock, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done);
// Releases hold's state (empty: done(not_owner) at once) in its fiber thread.
void start_release(AsyncHold hold, PlainCompletion done);
// done(the loss's code, == lease_lost) once hold is lost, done(operation_aborted) once it is
// released or stop is requested, whichever comes first; on the fiber thread.
void start_wait_lost(const AsyncHold& hold, std::stop_source stop, PlainCompletion done);

}  // namespace async_entry

namespace detail {

// Wraps an Asio completion handler as a copyable callback that clears its
// cancellation slot and runs it on its associated executor (inline where it
// has none: the caller is dlock's fiber thread), keeping that executor's
// work alive until then. As everywhere in Asio, a cancellation slot's
// signal must be emitted on the handler's executor; a handler without an
// executor is completed (and its slot cleared) on dlock's fiber thread.
template <typename Handler, typename... Args>
std::function<void(Args...)> completion_of(Handler handler, std::stop_source stop) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) slot.assign([stop](asio::cancellation_type) mutable { stop.request_stop(); });
    using Executor = asio::associated_executor_t<Handler, asio::system_executor>;
    struct State {
        Handler handler;
        std::optional<asio::executor_work_guard<Executor>> work;
    };
    auto state = std::make_shared<State>(State{std::move(handler), std::nullopt});
    if constexpr (!std::is_same_v<Executor, asio::system_executor>)
        state->work.emplace(asio::get_associated_executor(state->handler));
    return [state](Args... args) {
        if constexpr (std::is_same_v<Executor, asio::system_executor>) {
            asio::get_associated_cancellation_slot(state->handler).clear();
            std::move(state->handler)(std::move(args)...);
        } else {
            // The slot is cleared where it is emitted: on the handler's executor.
            asio::post(state->work->get_executor(), [state, ... args = std::move(args)]() mutable {
                asio::get_associated_cancellation_slot(state->handler).clear();
                std::move(state->handler)(std::move(args)...);
            });
            // Only once the post has returned may the executor's context run
            // out of work (and its owner destroy it).
            state->work.reset();
        }
    };
}

template <typename Token, typename Start>
auto initiate_acquire(Token&& token, Start start) {
    return asio::async_initiate<Token, void(std::error_code, AsyncHold)>(
        [start = std::move(start)](auto handler) mutable {
            std::stop_source stop;
            start(stop, completion_of<decltype(handler), std::error_code, AsyncHold>(std::move(handler), stop));
        },
        token);
}

}  // namespace detail

// ---- Lock, FairLock, Redlock, MultiLock: one exclusive hold ----

template <typename Kind>
concept exclusive_lock_kind = std::derived_from<Kind, Lock> || std::same_as<Kind, Redlock> || std::same_as<Kind, MultiLock>;

// Completes once acquired (or failed, or cancelled).
template <exclusive_lock_kind Kind, typename Token>
auto async_lock(Kind& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, std::nullopt, stop, std::move(done));
    });
}
// Waits until deadline; busy then: an empty hold. A deadline already past
// (or zero timeout) means one attempt.
template <exclusive_lock_kind Kind, typename Clock, typename Duration, typename Token>
auto async_try_lock_until(Kind& lock, const std::chrono::time_point<Clock, Duration>& deadline, Token&& token) {
    std::chrono::steady_clock::time_point at;
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>)
        at = std::chrono::ceil<std::chrono::steady_clock::duration>(deadline);  // as given, even time_point::min()
    else
        at = steady_deadline_at(deadline);
    return detail::initiate_acquire(std::forward<Token>(token), [&lock, at](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, at, stop, std::move(done));
    });
}
template <exclusive_lock_kind Kind, typename Rep, typename Period, typename Token>
auto async_try_lock_for(Kind& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return async_try_lock_until(lock, steady_deadline_in(timeout), std::forward<Token>(token));
}
template <exclusive_lock_kind Kind, typename Token>
auto async_try_lock(Kind& lock, Token&& token) {
    return async_try_lock_until(lock, std::chrono::steady_clock::time_point::min(), std::forward<Token>(token));
}

// ---- RwLock (rw_lock.hpp): the write side as a Lock's, the shared side ----

template <typename Token>
auto async_lock(RwLock& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, false, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_lock_for(RwLock& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token),
                                    [&lock, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
                                        async_entry::start_acquire(lock, false, at, stop, std::move(done));
                                    });
}
template <typename Token>
auto async_lock_shared(RwLock& lock, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&lock](std::stop_source stop, auto done) {
        async_entry::start_acquire(lock, true, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_lock_shared_for(RwLock& lock, const std::chrono::duration<Rep, Period>& timeout, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token),
                                    [&lock, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
                                        async_entry::start_acquire(lock, true, at, stop, std::move(done));
                                    });
}

// ---- Semaphore (semaphore.hpp): k permits as one hold ----

template <typename Token>
auto async_acquire(Semaphore& semaphore, unsigned permits, Token&& token) {
    return detail::initiate_acquire(std::forward<Token>(token), [&semaphore, permits](std::stop_source stop, auto done) {
        async_entry::start_acquire(semaphore, permits, std::nullopt, stop, std::move(done));
    });
}
template <typename Rep, typename Period, typename Token>
auto async_try_acquire_for(Semaphore& semaphore, unsigned permits, const std::chrono::duration<Rep, Period>& timeout,
                           Token&& token) {
    return detail::initiate_acquire(
        std::forward<Token>(token), [&semaphore, permits, at = steady_deadline_in(timeout)](std::stop_source stop, auto done) {
            async_entry::start_acquire(semaphore, permits, at, stop, std::move(done));
        });
}

// ---- Holds ----

// Releases hold (left empty at once) and completes with the release's
// outcome: as the kind's unlock(ec) / release(ec) (not_owner when empty,
// lease_lost when it was lost meanwhile). Not cancellable: a release runs
// to its end (bounded by the retry window).
template <typename Token>
auto async_unlock(AsyncHold& hold, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [&hold](auto handler) {
            async_entry::start_release(std::move(hold),
                                  detail::completion_of<decltype(handler), std::error_code>(std::move(handler), {}));
        },
        token);
}

// Completes with the code of its LostReason (lease_expired, lock_revoked,
// lock_taken_over or renewal_refused, each == errc::lease_lost) when hold
// is lost (no later than its
// valid_until()), with asio::error::operation_aborted when it is released
// through the AsyncHold first or the wait is cancelled, or with
// errc::client_closed when the client closes. The lock object's
// destructor does not end it: the hold is the AsyncHold's.
template <typename Token>
auto async_wait_lost(const AsyncHold& hold, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [&hold](auto handler) {
            std::stop_source stop;
            async_entry::start_wait_lost(hold, stop,
                                    detail::completion_of<decltype(handler), std::error_code>(std::move(handler), stop));
        },
        token);
}

}  // namespace dlock
