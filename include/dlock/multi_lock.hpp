// dlock/multi_lock.hpp — several lock names taken as one: all or nothing.
//
// A MultiLock holds one dlock::Lock per distinct name, all on one Client with
// the same LockOptions, and drives them together. Everything a Lock promises
// holds for each name (lock.hpp): the lease kept by the client's one lease
// keeper (renewals of all names due together are pipelined), the loss told
// through LockOptions::on_lost and a stop token, waiting woken by the
// release message (no polling), retries that are answered once, a fencing
// token per name. A MultiLock adds:
//
// * Canonical order. The names are sorted bytewise and duplicates collapse
//   ({"b", "a", "b"} is {"a", "b"}). Every acquisition takes them in that
//   order, whatever order the caller gave, so two MultiLocks (in any
//   processes) that share names cannot deadlock: whoever holds the lowest
//   contended name can always go on.
// * All or nothing. A call returns true holding every name. When one name
//   cannot be had — the deadline passed, a stop request, an error — what
//   this call took is released again, in reverse order, before it returns.
//   Those releases wait for their answers only until the deadline (or 20 ms
//   past the moment the call gave up, when the deadline had passed); one
//   not answered by then goes on without the caller, who holds nothing of
//   it — if it never reaches the server, that name's lease ends it. A name
//   lost while the call waited for a later one is not handed over: the
//   call gives everything back and starts again (time permitting).
// * One deadline for the whole call. Each name waits with what is left of
//   it. A deadline already passed at the call (try_lock(), try_lock_for(0))
//   means one attempt per name; otherwise a deadline that runs out between
//   two names ends the call (false) without a further attempt.
// * Hold-and-wait. While a name is held by someone else, the call waits for
//   it (pushed by its release message, as Lock does) keeping the names
//   before it. Releasing everything and starting over after each wait
//   would keep fewer names idle, but it can starve a MultiLock behind a
//   stream of single-name lockers and costs a full round of acquisitions
//   per wake-up; with the canonical order, waiting while holding cannot
//   deadlock.
// * One hold. is_held() is true while every name is held with a valid
//   lease; valid_until() is the earliest validity of the names; a loss of
//   any name is a loss of the multi-hold: lost_token() is requested (on the
//   client's I/O thread, with the name's own on_lost callback) no later
//   than that name's valid_until().
//
// Owners and re-entry are the Lock's: with Ownership::thread the calling
// thread owns the holds, so locking again re-enters each name (each name's
// count goes up; fencing tokens do not change), and a name this thread
// already holds through another Lock object is re-entered too, not waited
// for. With Ownership::handle this MultiLock owns them. After a loss, each
// name behaves as Lock: the lost name's next acquisition is fresh (count 1,
// new token) while the others re-enter; unlock() as many times as you locked.
//
// Redis Cluster is not supported by dlock yet. Each name is its own slot
// (its keys carry its own hash tag), so on one server a MultiLock of n names
// costs n acquire and n release round trips.
//
// Clocks: std::chrono::steady_clock, as Lock; try_lock_until converts other
// clocks once, at the call. Thread-safety: a MultiLock may be shared by many
// threads; each is its own owner under Ownership::thread. Errors: contention
// is not an error (try_lock* return false); failures throw dlock::Error (the
// failing name's own error) or set ec in the error_code twins, with
// last_server_error() kept through the rollback. A moved-from MultiLock gives
// errc::invalid_argument. unlock() never throws, so std::scoped_lock and
// std::unique_lock are safe. Mutual exclusion holds only while every lease is
// valid: pass each name's fencing token to its resource.
#pragma once

#include "dlock/error.hpp"  // every throwing call throws dlock::Error
#include "dlock/deadline.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/lock.hpp"

namespace dlock {

class Client;

namespace detail {
class MultiLockCore;
struct AsyncAccess;
}

class MultiLock {
public:
    // Throws Error(invalid_argument) for an empty list, an empty name, a
    // name over max_lock_name_bytes, or options a Lock refuses. Talks to no
    // server. The MultiLock may outlive the Client; its calls then fail
    // with errc::client_closed.
    MultiLock(Client& client, std::vector<std::string> names, LockOptions options = {});
    MultiLock(MultiLock&&) noexcept;
    MultiLock& operator=(MultiLock&&) noexcept;
    // Releases the holds made through this object and not unlocked (best
    // effort, as Lock's destructor does). Move-assignment does so first.
    ~MultiLock();

    // Blocks until every name is held. Throws the failing name's error
    // (after giving back the others), as Lock::lock() does.
    void lock();
    // As lock(), but returns false (holding nothing new) as soon as stop is
    // requested.
    [[nodiscard]] bool lock(std::stop_token stop);
    // One attempt per name. False when one is held by another owner.
    [[nodiscard]] bool try_lock();
    [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;
    // Waits up to timeout for all of them together; zero or negative means
    // one attempt per name. Returns within about a round trip after the
    // deadline; throws command_timeout when a name's attempts were never
    // answered.
    template <typename Rep, typename Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return acquire_until(steady_deadline_in(timeout));
    }
    template <typename Clock, typename Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return acquire_until(steady_deadline_at(deadline));
    }
    bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
    // Waits until deadline or until stop is requested, whichever is first.
    [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop);

    // Releases one hold of every name, in reverse canonical order. Never
    // throws; each name's failure goes to LockOptions::on_unlock_error with
    // that name.
    void unlock() noexcept;
    // As unlock(); ec is lease_lost when any name was lost meanwhile, else
    // the first other failure in canonical order (not_owner when the caller
    // held nothing). Every name is released either way.
    void unlock(std::error_code& ec) noexcept;

    // All of these are about the caller's own holds (thread or handle).
    bool is_held() const;        // every name held, none lost, every lease valid
    unsigned hold_count() const;  // the smallest hold count among the names; 0 when one is not held
    // (name, token) for every name in canonical order; 0 for a name not held.
    std::vector<std::pair<std::string, std::uint64_t>> fencing_tokens() const;
    std::uint64_t fencing_token(std::string_view name) const;  // 0 when not held or not one of names()
    // Requested when any name of the current multi-hold is lost; never
    // requested when not held. A new multi-hold after a loss has a new one.
    std::stop_token lost_token() const;
    // Why the caller's multi-hold was lost: the reason of the first name (in
    // canonical order) whose hold was lost; nothing while every name is held.
    std::optional<LostReason> lost_reason() const;
    std::chrono::steady_clock::time_point valid_until() const;  // the earliest; time_point{} when not held

    // The distinct names in canonical (bytewise) order.
    const std::vector<std::string>& names() const noexcept;

private:
    bool acquire_until(std::chrono::steady_clock::time_point deadline);
    friend struct detail::AsyncAccess;  // dlock/async.hpp
    std::shared_ptr<detail::MultiLockCore> core_;
};

}  // namespace dlock
