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
// Boost.Asio (Debian's Boost): dlock/boost_async.hpp offers the same
// initiating functions, in namespace dlock::boost_asio (see there).
//
// Completion signatures:
//   acquisitions: void(std::error_code, AsyncHold). A try_* that ran out of
//     time while the lock was busy completes with no error and an empty hold
//     (contention is not an error, as in the synchronous API). A failure
//     gives its error code (the synchronous call's exception's code, the
//     server's text kept in Error::server_text on the Client as usual).
//   releases and lost waits: void(std::error_code). A lost wait completes
//     without error when the loss happens (async_wait_lost below).
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

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include "dlock/async_hold.hpp"
#include "dlock/deadline.hpp"
#include "dlock/error.hpp"  // every throwing call throws dlock::Error

namespace dlock {
namespace detail {
using completion_error = std::error_code;
inline std::error_code to_completion_error(std::error_code ec) noexcept { return ec; }
}  // namespace detail

#define DLOCK_ASYNC_CANCELLATION 1
#include "dlock/async_functions.hpp"
#undef DLOCK_ASYNC_CANCELLATION

}  // namespace dlock
