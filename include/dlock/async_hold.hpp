// dlock/async_hold.hpp — what the asynchronous API yields (AsyncHold) and
// the library's entry points behind its initiating functions. No Asio here:
// the initiating functions are in dlock/async.hpp (standalone Asio) and
// dlock/boost_async.hpp (Boost.Asio), with the contract written there.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/error.hpp"  // every throwing call throws dlock::Error
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

}  // namespace dlock
