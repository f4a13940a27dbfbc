// dlock/lock.hpp — a reentrant, leased, exclusive lock on one Redis server.
//
// A Lock names a resource. Its owner is the client's random 128-bit id plus
// the calling thread (Ownership::thread, the default), or the Lock object
// itself (Ownership::handle, for async code whose work moves between
// threads). The same owner may lock again: a hold count goes up, and only the
// last unlock() releases. Another owner waits. Holds belong to the Client, by
// (name, owner): two Lock objects for one name used by one thread are one
// owner with one hold and one count.
//
// Mutual exclusion holds only while the lease is valid. The lease is set in
// Redis at acquisition, so a holder that dies frees the lock after at most
// one lease. While held, the client's lease keeper renews it every lease/3
// (unless LockOptions::renew is false). valid_until() = send time of the
// request that set the lease + lease - drift (lease / 100 + 2 ms). When a
// renewal finds the lock gone, when a force-release reaches the client's
// inbox, or when valid_until() comes before a renewal was confirmed (a
// renewal in flight does not delay it), the hold is LOST: lost_token() is
// stop-requested and LockOptions::on_lost runs (both on the client's I/O
// thread) no later than valid_until(); is_held() turns false and each
// remaining unlock() reports errc::lease_lost. Each says why (LostReason,
// dlock/error.hpp): on_lost's and unlock(ec)'s code is the reason's own
// (lease_expired, lock_revoked, lock_taken_over, renewal_refused), which
// compares equal to errc::lease_lost, and lost_reason() answers whoever
// watches lost_token(). A force-release is told as revoked when its inbox
// notice reaches the client before a renewal's refusal does (a renewal
// refused first reports taken_over). A paused process can still act
// after its lease ended without knowing it; pass fencing_token() to the
// resource so it can reject stale holders.
//
// Fencing tokens increase strictly per name on every fresh acquisition:
// max(last + 1, the server's clock in microseconds), so they keep increasing
// after the counter expired, was evicted or lost in a restart, as long as the
// server's clock does not step back. After a lock is free nothing of it stays
// in Redis longer than LockOptions::retention.
//
// Waiting never polls. Threads of one process waiting for the same name queue
// locally in arrival order, and only the first of them talks to Redis: it
// takes a place in the lock's line on the server (processes are served in
// arrival order). A release hands the lock straight to the first waiter in
// line (direct grant: a new fencing token, and a notice on that waiter's
// client's inbox, the one subscriber connection per client); only that
// waiter wakes, and it returns holding the lock without another round trip.
// Its validity until its first renewal counts waiter_lease from the send
// time of the last request the server confirmed kept its place (the grant
// is leased at least until that place would have ended), so it is short;
// the lease keeper renews it a third of the way into that validity, and a
// lock unlocked before then costs the server nothing more than its release.
// With a fixed lease (renew false) a confirmation (the full lease, from its
// own send time) leaves at once, and the owner's next call on the lock goes
// after it. With replica_ack the waiter confirms first, and WAITs for
// replicas. A place
// is kept alive by the client's lease keeper (LockOptions::waiter_lease); a
// waiter also wakes when the holder's lease must have ended. A thread of the
// same process releasing the lock may instead hand it straight to its
// process's first waiter (LockOptions::handoff_slice); a FairLock
// (fair_lock.hpp) never does, and puts every waiting thread in the line.
//
// Clocks: every deadline and validity is on std::chrono::steady_clock;
// try_lock_until accepts other clocks and converts once, at the call.
// Deadlines and stop requests are honoured within about a round trip, also
// against a server that does not answer.
//
// Thread-safety: a Lock may be shared by many threads; each thread is its own
// owner under Ownership::thread. Errors: contention is not an error
// (try_lock* return false); everything else throws dlock::Error or, in the
// error_code twins, sets ec; a moved-from Lock gives errc::invalid_argument.
// unlock() itself never throws, so std::lock_guard and std::unique_lock are
// safe; use unlock(ec) or LockOptions::on_unlock_error to hear of a failed
// release. Requires Redis 7.0 or later.
#pragma once

#include "dlock/deadline.hpp"
#include "dlock/error.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock {

class Client;

namespace detail {
class LockCore;
struct AsyncAccess;
class MultiLockCore;
}

enum class Ownership {
    thread,  // the calling thread owns its holds (std::mutex semantics)
    handle,  // the Lock object owns them: any thread may unlock, e.g. after a co_await
};

inline constexpr std::size_t max_lock_name_bytes = 512;
// Leases shorter than min_lease could never be trusted: the drift margin
// (lease / 100 + 2 ms) would eat most of them.
inline constexpr std::chrono::milliseconds min_lease{10};
inline constexpr std::chrono::milliseconds max_lease = std::chrono::hours(24);
inline constexpr std::chrono::milliseconds default_retention = std::chrono::minutes(10);

// Replica acknowledgement (Redis WAIT) for a single master with replicas.
// Redis replicates asynchronously: a master that crashes right after
// granting a lock may be replaced by a replica that never heard of it. With
// replicas > 0, each acquisition is followed by WAIT replicas timeout on the
// same dedicated connection; when fewer replicas confirm in time, the
// acquisition is undone and the call fails with
// errc::replicas_not_acknowledged (no retry: the caller decides).
// This narrows the window, it does not close it: WAIT does not make Redis
// strongly consistent, and a failover may still promote a replica that had
// not confirmed.
struct ReplicaAck {
    unsigned replicas = 0;                  // 0: no WAIT (the default)
    std::chrono::milliseconds timeout{1000};  // WAIT's timeout; 1 ms .. 1 h
    // Also WAIT after each renewal; a renewal the replicas do not confirm
    // counts as failed (retried until the lease runs out, then LOST).
    bool on_renewal = true;
};

struct LockOptions {
    // How long the lock stays valid in Redis without renewal. min_lease
    // (10 ms) to max_lease (24 h). Default 30 s.
    std::chrono::milliseconds lease{30'000};
    // Renew the lease every lease/3 while held. Default true. With false the
    // lease is fixed: the lock expires lease after acquisition (and the hold
    // is reported lost then).
    bool renew = true;
    // Who owns a hold. Default Ownership::thread.
    Ownership ownership = Ownership::thread;
    // Called once when a held lock is lost, at the moment dlock learns it
    // and no later than valid_until(). reason says why: one code per
    // LostReason (errc::lease_expired, lock_revoked, lock_taken_over,
    // renewal_refused; dlock::lost_reason_of(reason) gives the LostReason,
    // reason.message() a sentence), and each compares equal to
    // errc::lease_lost. Always runs on the client's I/O thread, whichever
    // thread noticed; it must not block, and exceptions are swallowed.
    // Not called after the Client is closed. Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_lost;
    // Called when unlock() (which never throws) fails. Runs on the unlocking
    // thread. Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_unlock_error;
    // Wait for replicas to confirm acquisitions (and renewals). Default off.
    ReplicaAck replica_ack;
    // Hand-off: when this process's threads queue for the lock, the final
    // unlock() passes it straight to the next of them (one round trip, a new
    // fencing token, no release message) instead of releasing it, for up to
    // this long after the process took it from Redis; then it is released
    // for every process's waiters to race for. The same call places the
    // thread behind that one in Redis's line, so that it waits without a
    // round trip of its own when its turn comes. Longer: more throughput
    // under contention, longer waits for other processes (with a slice of
    // seconds, a process whose threads keep handing the lock on holds it for
    // most of each slice). Zero: never hand off. Default 1 ms; at most 1 min.
    std::chrono::microseconds handoff_slice{1000};
    // How long anything of this lock stays in Redis after it is free: the
    // fence hash (the last fencing token) and each owner's release
    // tombstone (what lets a retried unlock be answered "released", and a
    // late copy of an old request be ignored). Counted from the release, or
    // from the lease's end when a holder died. Long against any retry window
    // (seconds) and any pause after which a former holder could still send
    // a request; short enough that a million names a day keep about 7,000
    // names' worth of keys. Tokens do not depend on it: they stay increasing
    // after the fence expires (lock.hpp, "Fencing tokens"). 1 s .. 30 days;
    // default 10 min.
    std::chrono::milliseconds retention = default_retention;
    // Waiting in line (see "Waiting" above): how long a waiter's place in
    // the server's line outlives its client's last refresh. The client's
    // lease keeper refreshes it every waiter_lease / 3 while the waiter
    // waits, so a waiter whose process died leaves the line within
    // waiter_lease; a lock granted to a waiter that has not confirmed it is
    // leased for the longer of the releasing client's waiter_lease and what
    // was left of the waiter's place (at most its own waiter_lease), so a
    // waiter that died just as it was granted the lock costs at most that.
    // 100 ms .. 1 min; default 1.5 s.
    std::chrono::milliseconds waiter_lease{1500};
};

class Lock {
public:
    // Throws Error(invalid_argument) for an empty name, a name over
    // max_lock_name_bytes, or a lease outside min_lease..max_lease. Talks to no server.
    Lock(Client& client, std::string name, LockOptions options = {});
    Lock(Lock&&) noexcept;
    Lock& operator=(Lock&&) noexcept;
    // Releases the holds made through this object and not unlocked (best
    // effort, as unlock() does), so a forgotten lock does not wait out its
    // lease; holds made through other Lock objects for the same name stay,
    // and so do holds that asynchronous acquisitions made through it (their
    // AsyncHold owns them, dlock/async.hpp). Move-assignment releases them
    // the same way first.
    ~Lock();

    // Blocks until acquired. Throws on failure (unreachable server, timeouts,
    // wrong_type when the key holds non-lock data, client_closed,
    // replicas_not_acknowledged with LockOptions::replica_ack).
    //
    // Failover: every call that waits (lock(), lock(stop), try_lock_for and
    // try_lock_until with time left) rides through a failover or a restart
    // of the server. A failure that one explains (connection lost or
    // refused, not_master, cluster_down, LOADING, TRYAGAIN) is tried again
    // after a backoff of 20 ms doubling up to 500 ms, while the client
    // reconnects (through the sentinels, or to the slot's new master): with
    // a deadline until then, without one until the outage has lasted
    // connect_timeout + command_timeout. Giving up during an outage throws
    // (or sets ec to) its last error, never returns false as for contention.
    // A call that finds an earlier call of the same owner still unanswered
    // (its caller walked away at a deadline) waits for it up to its own
    // deadline, then fails with command_timeout.
    void lock();
    // As lock(), but returns false as soon as stop is requested.
    [[nodiscard]] bool lock(std::stop_token stop);
    // One attempt. False when another owner holds it. During a failover it
    // fails with what kept it from the master (connection_refused,
    // not_master, ...): a single attempt does not ride through.
    [[nodiscard]] bool try_lock();
    [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;
    // Waits up to timeout; zero or negative means one attempt (which waits up
    // to command_timeout for its answer). Returns within about one round trip
    // after the deadline; throws command_timeout if no attempt was answered.
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

    // Releases one hold. Never throws. Failures (not_owner, lease_lost,
    // transport errors) go to LockOptions::on_unlock_error.
    void unlock() noexcept;
    // Releases one hold and reports the outcome: not_owner when the caller
    // holds nothing here, lease_lost when the hold was lost meanwhile (the
    // code of its LostReason, == errc::lease_lost; the local hold is gone
    // either way).
    void unlock(std::error_code& ec) noexcept;

    // Releases one hold and returns once the release is on its way, without
    // waiting for the server's answer: the caller holds nothing from the
    // return on (is_held() false, no more renewals), and any request this
    // client sends next goes out after the release on the same connection,
    // so the server runs the release first and mutual exclusion is as with
    // unlock(). (The release goes as EVAL, with the script's text, whenever
    // the client has not yet seen the server run it on this connection, so
    // that no NOSCRIPT detour can put it behind the next request; only an
    // operator's SCRIPT FLUSH on a live connection can still do that, and
    // the late release is then refused and reported.) What it does not promise: that the release has reached the
    // server (other clients may wait until it does, or, if it never does —
    // a crash, the server unreachable past the retry window — until the
    // lease ends), or that it succeeded: a release the server refuses
    // (lease_lost) or that fails goes to LockOptions::on_unlock_error, run
    // on the client's I/O thread. No hand-off to this process's waiters on
    // this path. A re-entered hold (count > 1) is released as unlock()
    // does, waiting for the answer. Right after a lock of a fixed lease
    // (renew false) granted directly from the line (see "Waiting"), it first
    // waits for that grant's confirmation to be answered (about a round
    // trip), which must reach the server before any release. Never throws.
    void unlock_nowait() noexcept;

    // All of these are about the caller's own hold (thread or handle).
    bool is_held() const;                                  // held, not lost, lease still valid
    unsigned hold_count() const;                           // 0 when not held
    std::uint64_t fencing_token() const;                   // 0 when not held
    std::stop_token lost_token() const;                    // never requested when not held
    // Why the caller's hold was lost (see LostReason, dlock/error.hpp), for
    // whoever watches lost_token(): set from the moment the token is
    // requested until the caller unlocks the lost hold or acquires again;
    // nothing while it is held or when it holds nothing.
    std::optional<LostReason> lost_reason() const;
    std::chrono::steady_clock::time_point valid_until() const;  // time_point{} when not held

    const std::string& name() const noexcept;

protected:
    struct FairTag {};
    Lock(Client& client, std::string name, LockOptions options, FairTag);

private:
    friend class detail::MultiLockCore;  // its roll-back releases within the call's deadline
    bool acquire_until(std::chrono::steady_clock::time_point deadline);
    friend struct detail::AsyncAccess;  // dlock/async.hpp
    std::shared_ptr<detail::LockCore> core_;
};

// A semaphore's state (inspect_semaphore in semaphore.hpp, LockInfo): one atomic read.
struct SemaphoreInfo {
    unsigned limit = 0;    // 0: no such semaphore (or its state expired)
    unsigned used = 0;     // permits held now
    unsigned waiting = 0;  // waiters in line
    struct Holder {
        std::string permit;           // the permit id: the client's id, an operation number, '#k'
        unsigned count = 0;           // k
        std::chrono::milliseconds ttl{0};  // lease left
    };
    std::vector<Holder> holders;
};

// One reader of an RwLock's read side (LockInfo::readers).
struct ReaderInfo {
    std::string owner;                 // the reader's owner id (its client's id, then its thread or handle)
    unsigned hold_count = 0;           // its re-entries
    std::chrono::milliseconds ttl{0};  // lease left
    std::uint64_t fencing_token = 0;   // the token of the last write it follows
};

// What `dlock status` shows: one atomic read of everything a name holds,
// whatever the kind.
//
// One name is one resource, held one way at a time. The exclusive hold is
// one lock hash that a Lock, a FairLock, a Redlock, a MultiLock's member and
// an RwLock's write side all take, so they exclude each other (a Lock and a
// FairLock share one line too). An RwLock's readers share it: a reader waits
// for any exclusive holder, and the write side waits for the readers, but a
// Lock, FairLock, Redlock or MultiLock does not and fails with
// errc::kind_mismatch while readers hold the name. A Semaphore's permits
// are the third way: while the name is held or waited for as a semaphore,
// every lock kind fails with errc::kind_mismatch, and a Semaphore fails alike
// while the name is held as a lock.
//
// Rolling upgrades: the lock hash carries its data layout. Holders of the
// previous layout (which wrote none) and of this one exclude each other; an
// exclusive acquisition that finds a later layout's lock hash fails with
// errc::layout_mismatch and changes nothing (README "Mixing versions").
struct LockInfo {
    enum class Kind {
        free,       // nothing holds it
        exclusive,  // the exclusive hold below: a Lock's, FairLock's, Redlock's, MultiLock's or RwLock writer's
        shared,     // an RwLock's readers (readers below), with no exclusive hold
        semaphore,  // a Semaphore's permits (semaphore below)
    };
    Kind kind = Kind::free;
    bool held = false;  // anything holds it: the exclusive hold, a reader, a permit
    // The exclusive hold (a Lock's, or an RwLock's write side); empty when none.
    std::string owner;
    std::string holder;                // "host=NAME pid=N thread=N" of the acquiring thread; empty when none
    unsigned hold_count = 0;
    std::chrono::milliseconds ttl{0};  // its remaining lease; 0 when none
    std::uint64_t fencing_token = 0;   // its token; 0 when none
    std::uint64_t last_fencing_token = 0;  // the newest token ever issued for this name
    std::vector<ReaderInfo> readers;   // an RwLock's readers
    unsigned waiters = 0;              // waiting in a Lock's line, or RwLock writers marked waiting
    SemaphoreInfo semaphore;           // limit 0 when the name is no semaphore
    // Where the lock lives: "host:port" of the server that answered (the
    // master a Sentinel deployment named; the master serving its slot in a
    // cluster). Empty in list_locks' entries of a standalone server.
    std::string server;
    int slot = -1;  // in a cluster, the lock's hash slot (0..16383); -1 elsewhere

    // How many holds a force_release would break: the exclusive one, each
    // reader, each permit.
    std::size_t holds() const noexcept {
        return (owner.empty() ? 0 : 1) + readers.size() + semaphore.holders.size();
    }
};

// Reads a lock's state. Throws like Client::eval.
LockInfo inspect_lock(Client& client, std::string_view name);

// Waits until name is free, of every kind (no exclusive hold, no reader,
// no permit), without taking it, or until deadline (or stop). True when it
// was seen free. Never polls: it wakes on the release messages of every
// kind and when the first lease would end (a holder that died), and checks
// again after a reconnect of the subscriber (a message may have been
// missed). The lock may be taken again by someone else at once: this is for
// "wait for that job to finish", not for exclusion. Throws like Client::eval.
bool wait_until_free(Client& client, std::string_view name, std::chrono::steady_clock::time_point deadline,
                     std::stop_token stop = {});

// The names held now, of every kind, whose names match pattern (a Redis
// glob: *, ?, [..]), each with its state, sorted by name. In a cluster every
// master's keyspace is walked. Walks the keyspace with SCAN (never KEYS,
// which blocks the server) and reads the names in pipelined batches, so the
// list is not one atomic snapshot: a lock taken or freed meanwhile may or
// may not be in it. Throws like Client::eval.
std::vector<std::pair<std::string, LockInfo>> list_locks(Client& client, std::string_view pattern = "*");

// What force_release may break.
struct ForceReleaseOptions {
    // Break every hold of the name. When false (the default) and the name has
    // more than one hold (readers, permits), nothing is broken and the
    // answer lists what would be (ForceRelease::refused).
    bool all = false;
    // Break only this holder's hold: an owner id (the exclusive holder, a
    // reader) or a permit id, as LockInfo shows them. Empty: any. Default empty.
    std::string holder;
};

// force_release's answer.
struct ForceRelease {
    struct Broken {
        std::string holder;  // owner id, or permit id
        unsigned count = 0;  // hold count, or permits
        LockInfo::Kind kind = LockInfo::Kind::exclusive;  // exclusive, shared (a reader) or semaphore (a permit)
    };
    std::vector<Broken> broken;  // the holds removed; empty when none was
    // True when the name has several holds and neither `all` nor a holder
    // was given: `would_break` lists them, and nothing changed.
    bool refused = false;
    std::vector<Broken> would_break;
};

// An operator's override: removes holds of name whoever holds them, of every
// kind (the exclusive hold, readers, permits), and wakes the waiters. Each
// holder whose hold is broken is told at once on its client's inbox (on one
// server and behind Sentinel; in a cluster, on an inbox in the name's slot),
// so that its lost_token and on_lost fire within about a round trip, not at
// the next renewal. A client's first acquisition that may wait (not a
// try_lock()) waits, up to a command timeout, for its inbox to listen, so
// that no hold is granted unheard, unless the subscriber connection fails
// (once one such wait ran out unconfirmed, later ones do not wait until a
// subscription of the client is confirmed); a hold granted before the inbox listened is renewed at once when it does,
// so a revocation it missed is found within a round trip. Throws Error(invalid_argument) for a bad name, otherwise
// like Client::eval.
ForceRelease force_release(Client& client, std::string_view name, const ForceReleaseOptions& options);

// The single-hold form: removes the hold of a name held once (or not at
// all) and returns its previous holder, or nothing when the name was free.
// Throws Error(invalid_argument) naming the holds when there are several
// (use the form above with `all` or a holder).
std::optional<std::string> force_release(Client& client, std::string_view name);

}  // namespace dlock
