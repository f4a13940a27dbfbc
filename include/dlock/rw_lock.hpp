// dlock/rw_lock.hpp — a reentrant, leased read-write lock on one Redis server.
//
// An RwLock names a resource that many readers may use together and one
// writer alone. lock()/unlock() take and give back the write side (with
// dlock::Lock's semantics: re-entry, a fencing token, a lease kept alive by
// the client's lease keeper); lock_shared()/unlock_shared() the read side, so
// std::unique_lock and std::shared_lock work.
//
// Owners are as for Lock (lock.hpp): the client's random id plus the calling
// thread (Ownership::thread) or the RwLock object (Ownership::handle). Each
// side counts its own re-entries; only the last unlock of a side releases it.
//
// Readers: each reader (owner) holds its own lease in Redis — one member of a
// sorted set, reader -> server-time deadline, its re-entries counted in a
// hash field, never a key per re-entry — renewed by the client's lease
// keeper together with every other hold. A reader that dies frees its share
// when its lease ends (the scripts drop expired readers, by the server's
// clock). A reader's hold is lost like a writer's: a refused renewal, or
// validity running out unconfirmed.
//
// Policy (RwLockOptions::prefer_readers, default false: writers first): once
// a writer waits, new readers queue behind it, so a steady stream of readers
// cannot starve a writer. The waiting writer marks itself in Redis with a
// server-time deadline one lease ahead, refreshed while it waits (at least
// every lease/3); it takes the mark back when it stops waiting (deadline,
// stop, failure), and a waiting writer that died blocks new readers for at
// most one lease. Readers already in, and their re-entries, are never held
// back by a waiting writer. With prefer_readers a reader goes in whenever no
// writer holds the lock (writers may then starve). Among writers there is no
// queue order (as for Lock).
//
// Downgrade: the writer may take the read side (lock_shared() while holding
// the write side is granted at once); unlock() then leaves it a reader, and
// the read lease is renewed like any other. Upgrade: the write side while
// holding the read side is only ever a try — try_lock*() make exactly one
// attempt, granted only when no one else reads or writes; lock() throws
// std::errc::resource_deadlock_would_occur, since two upgraders would wait for
// each other forever.
//
// Fencing: the writer gets a token as Lock's (strictly increasing per name);
// a reader gets the token of the last write it follows (the newest token
// issued for this name when it came in; re-entry keeps it; after a
// downgrade, the writer's own). Readers do not issue tokens, except that when
// the name's counter is gone (retention, restart) it is started again from
// the server's clock, as a writer would.
//
// Waiting never polls: waiters sleep until a release message on the lock's
// channel (the writer's release, the last reader's, a waiting writer's
// withdrawal), until the lease that keeps them out must have ended, and a
// waiting writer until its mark needs refreshing; after a subscriber
// reconnect a waiter checks once at once. Threads of one process wait for one
// name in one local queue (readers and writers alike), and only its head
// talks to Redis. No hand-off between threads (LockOptions::handoff_slice)
// and no replica acknowledgement (LockOptions::replica_ack) for RwLock.
//
// Clocks, deadlines, stop tokens, errors and retries are as for Lock:
// steady_clock; try_*_until converts other clocks once; a zero or negative
// timeout is one attempt; deadlines and stops are honoured within about a
// round trip; contention is not an error; unlock()/unlock_shared() never
// throw; every operation carries an operation id so that a retried one
// changes nothing twice. Exclusion holds only while the lease is valid.
//
// Redis keys (one hash tag, one Cluster slot; every key declared in KEYS):
// dlock:{NAME} the writer (Lock's lock hash: `dlock status`, `list`,
// `release --force` and `wait-free` see the write side), :fence, :ch,
// :done:OWNER as for Lock; :readers (sorted set), :rstate (hash),
// :wwait (sorted set of waiting writers), :rdone:OWNER (read tombstones).
// Nothing stays past RwLockOptions::retention after the lock is free. Do not
// use a Lock and an RwLock on the same name: a Lock does not see readers.
//
// Thread-safety: an RwLock may be shared by many threads. Requires Redis 7.0.
#pragma once

#include "dlock/error.hpp"  // every throwing call throws dlock::Error
#include "dlock/deadline.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/lock.hpp"

namespace dlock {

class Client;

namespace detail {
class RwLockCore;
struct AsyncAccess;
}

struct RwLockOptions {
    // How long each side's hold stays valid in Redis without renewal, and
    // how long a waiting writer's mark lasts without refresh. min_lease
    // (10 ms) to max_lease (24 h). Default 30 s.
    std::chrono::milliseconds lease{30'000};
    // Renew held leases every lease/3. Default true.
    bool renew = true;
    // Who owns a hold. Default Ownership::thread.
    Ownership ownership = Ownership::thread;
    // Called once when a held side is lost (either side: look at is_held()
    // and is_held_shared()), as LockOptions::on_lost. Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_lost;
    // Called when unlock() or unlock_shared() (which never throw) fail.
    // Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_unlock_error;
    // How long anything of this lock stays in Redis after it is free (as
    // LockOptions::retention). 1 s .. 30 days; default 10 min.
    std::chrono::milliseconds retention = default_retention;
    // Readers first: a reader goes in whenever no writer holds the lock,
    // even while writers wait (which may starve them). Default false:
    // writers first. Decided by each reader's own options.
    bool prefer_readers = false;
};

class RwLock {
public:
    // Throws Error(invalid_argument) for an empty name, a name over
    // max_lock_name_bytes, a lease outside min_lease..max_lease or a
    // retention outside 1 s..30 days. Talks to no server.
    RwLock(Client& client, std::string name, RwLockOptions options = {});
    // A moved-from RwLock holds nothing: its calls give
    // errc::invalid_argument (thrown, or in ec) until another is assigned to it.
    RwLock(RwLock&&) noexcept;
    RwLock& operator=(RwLock&&) noexcept;
    // Releases the holds (both sides) made through this object and not
    // released, best effort, as Lock's destructor does.
    ~RwLock();

    // ---- Write side: exclusive, with Lock's contract. ----
    // Blocks until acquired. Throws on failure as Lock::lock(), and
    // Error(std::errc::resource_deadlock_would_occur) when the caller holds
    // the read side (an upgrade is only a try).
    void lock();
    // As lock(), but returns false as soon as stop is requested.
    [[nodiscard]] bool lock(std::stop_token stop);
    // One attempt. False when another owner reads or writes.
    [[nodiscard]] bool try_lock();
    [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;
    // Waits up to timeout (zero or negative: one attempt; holding the read
    // side: one attempt whatever the timeout).
    template <typename Rep, typename Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return acquire_until(false, steady_deadline_in(timeout));
    }
    template <typename Clock, typename Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return acquire_until(false, steady_deadline_at(deadline));
    }
    // As try_lock_until, with a failure in ec instead of thrown.
    bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
    [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop);
    // Releases one write hold. Never throws; failures go to on_unlock_error.
    void unlock() noexcept;
    // As unlock(), reporting not_owner or lease_lost.
    void unlock(std::error_code& ec) noexcept;

    // ---- Read side: shared. ----
    // Blocks until acquired (behind waiting writers unless prefer_readers).
    // Throws on failure as lock().
    void lock_shared();
    [[nodiscard]] bool lock_shared(std::stop_token stop);
    // One attempt. False when another owner writes, or (writers first) a
    // writer waits.
    [[nodiscard]] bool try_lock_shared();
    [[nodiscard]] bool try_lock_shared(std::error_code& ec) noexcept;
    template <typename Rep, typename Period>
    [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
        return acquire_until(true, steady_deadline_in(timeout));
    }
    template <typename Clock, typename Duration>
    [[nodiscard]] bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return acquire_until(true, steady_deadline_at(deadline));
    }
    bool try_lock_shared_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
    [[nodiscard]] bool try_lock_shared_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop);
    // Releases one read hold. Never throws; failures go to on_unlock_error.
    void unlock_shared() noexcept;
    void unlock_shared(std::error_code& ec) noexcept;

    // The caller's own holds (thread or handle), one side each; as Lock's.
    bool is_held() const;                      // write side held, not lost, lease valid
    unsigned hold_count() const;               // write re-entries; 0 when not held
    std::uint64_t fencing_token() const;       // the write token; 0 when not held
    std::stop_token lost_token() const;        // requested if the write hold is lost
    std::chrono::steady_clock::time_point valid_until() const;
    bool is_held_shared() const;               // read side held, not lost, lease valid
    unsigned shared_hold_count() const;        // read re-entries; 0 when not held
    std::uint64_t shared_fencing_token() const;  // the last write's token; 0 when not held
    std::stop_token shared_lost_token() const;
    // Why the caller's write hold / read hold was lost, as Lock::lost_reason().
    std::optional<LostReason> lost_reason() const;
    std::optional<LostReason> shared_lost_reason() const;
    std::chrono::steady_clock::time_point shared_valid_until() const;

    const std::string& name() const noexcept;

private:
    bool acquire_until(bool shared, std::chrono::steady_clock::time_point deadline);
    friend struct detail::AsyncAccess;  // dlock/async.hpp
    std::shared_ptr<detail::RwLockCore> core_;
};

}  // namespace dlock
