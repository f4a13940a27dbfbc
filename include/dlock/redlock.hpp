// dlock/redlock.hpp — a lock granted by a majority of independent masters.
//
// A single Redis master is a single point of failure, and a replica promoted
// after a crash may not have the lock. A Redlock asks N independent masters
// (no replication between them; N odd, at least 3) at once and holds the
// lock when a majority (N/2 + 1) granted it with lease left over:
//
//   validity = lease - (time since the requests were sent) - drift,
//   drift    = lease / 100 + 2 ms,
//
// and the lock is trusted only while validity is positive. When no majority
// granted it, the grants are released on every master (including those that
// did not answer: their reply may have been lost) and the attempt is retried
// after a random delay, while the caller's deadline allows.
//
// It behaves like dlock::Lock (lock.hpp): reentrant per owner, renewed by a
// watchdog (a renewal needs a majority too; losing the majority is a LOST
// hold, reported the same way), woken by a release message from any master,
// std Lockable / TimedLockable. One difference: holds are counted in the
// Redlock object (re-entry costs no round trip), so two Redlock objects for
// the same name are two owners, even on one thread, and the second waits.
//
// Fencing tokens: each master keeps its own counter; a Redlock's token is
// the largest among the granting majority, and before the lock is reported
// held, a majority of the granting masters stand at that value (every
// lagging granter is raised to it; those beyond the majority in the
// background). Any later majority shares a master with that one, so the
// next acquisition's token is strictly greater. A master that lost its
// counter (restarted without persistence, flushed, or the counter expired
// retention after the lock was last free) starts it again at its clock in
// microseconds, past every token issued before as long as the masters'
// clocks are roughly right (within the time since those tokens were
// issued) and do not step back.
//
// What Redlock does not protect against: a process pause (GC, SIGSTOP, swap)
// longer than the remaining validity — the holder wakes up believing it holds
// the lock; pass fencing_token() to the resource. Clocks running at very
// different rates on the masters (drift covers 1 %).
//
// Clocks: std::chrono::steady_clock, as Lock. Thread-safety: as Lock.
#pragma once

#include "dlock/deadline.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/client_options.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "dlock/metrics.hpp"

namespace dlock {

class Client;

namespace detail {
class MastersCore;
class RedlockCore;
struct AsyncAccess;
}  // namespace detail

// The independent masters of a Redlock: one Client per master, all served
// by one I/O thread. A vote is written to every master by the calling
// thread; that one thread reads every answer and wakes the caller once,
// when a majority is decided (or every master answered). Each master's
// connection keeps its own timeouts: a master that stops answering delays
// no other's answers. A callback given to a master's client (client(i),
// Client::submit) runs on that shared thread and must not block.
// fork(): as a Client's (client.hpp): in a child, a Redlock through
// Masters made before the fork fails with errc::forked_child, and
// destroying them there touches nothing of the parent's.
class Masters {
public:
    // Connects in the background; does not wait. Throws Error with
    // invalid_argument unless there are an odd number, at least 3, of
    // distinct servers; invalid_uri for a malformed URL.
    explicit Masters(const std::vector<std::string>& urls, ClientOptions options = {});
    // Wakes every thread waiting in a Redlock acquisition through these
    // masters (it returns errc::client_closed), releases every Redlock
    // still held through them (best effort), then closes the clients.
    // Destroyed on the masters' own I/O thread (from a callback of client(i)),
    // it does not wait for the releases' answers, which that thread reads: it
    // sends them and returns; the clients close once every master answered
    // or timed out. Redlocks that outlive it fail with client_closed.
    ~Masters();
    Masters(const Masters&) = delete;
    Masters& operator=(const Masters&) = delete;

    std::size_t size() const noexcept;
    std::size_t quorum() const noexcept;  // size() / 2 + 1
    Client& client(std::size_t index);    // 0 <= index < size()
    // What the Redlocks through these masters did, with the masters'
    // clients' own events (metrics.hpp): ClientOptions::metrics, or one
    // shared by the masters' clients.
    Metrics& metrics() const noexcept;

    const std::shared_ptr<detail::MastersCore>& core() const noexcept { return core_; }

private:
    std::shared_ptr<detail::MastersCore> core_;
};

// What one master answered to the latest attempt.
enum class Vote {
    granted,          // it gave us the lock
    held_by_another,  // another owner holds it there
    timed_out,        // no answer within node_timeout (the request may still have run)
    failed,           // a transport or server error: see MasterOutcome::error
    not_counted,      // a majority was reached (or became impossible) before it answered
};
std::string_view to_string(Vote vote) noexcept;

struct MasterOutcome {
    std::string master;     // the master's address as Client::address() shows it (password hidden)
    Vote vote = Vote::not_counted;
    std::error_code error;  // set for timed_out and failed
};

// Thrown (or its code set) when too few masters answered for a majority
// either way. Contention is not an error: try_lock* return false then.
class QuorumError : public Error {
public:
    QuorumError(const std::string& what, std::vector<MasterOutcome> outcomes);
    const std::vector<MasterOutcome>& outcomes() const noexcept { return outcomes_; }

private:
    std::vector<MasterOutcome> outcomes_;
};

struct RedlockOptions {
    // As LockOptions: lease 1 ms .. 24 h (default 30 s), renew, ownership,
    // on_lost, on_unlock_error.
    std::chrono::milliseconds lease{30'000};
    bool renew = true;
    Ownership ownership = Ownership::thread;
    // How long one master may take to answer an acquire, renew or release
    // before it counts as timed out. Zero (the default) means lease / 50,
    // kept between 10 ms and 1 s. Must be shorter than the lease.
    std::chrono::milliseconds node_timeout{0};
    // After an attempt in which no one won a majority (a split vote, or
    // masters not answering), wait a random time up to this before trying
    // again, so contenders do not collide forever. Default 50 ms; 1 ms .. 1 min.
    std::chrono::milliseconds retry_delay{50};
    std::function<void(std::string_view name, std::error_code reason)> on_lost;
    std::function<void(std::string_view name, std::error_code reason)> on_unlock_error;
    // As LockOptions::retention: how long anything of the lock stays on a
    // master after it is free. Default 10 min.
    std::chrono::milliseconds retention = default_retention;
};

class Redlock {
public:
    // Throws Error(invalid_argument) for a bad name or option. Talks to no server.
    Redlock(Masters& masters, std::string name, RedlockOptions options = {});
    // A moved-from Redlock holds nothing: its calls give
    // errc::invalid_argument (thrown, or in ec) until another is assigned to it.
    Redlock(Redlock&&) noexcept;
    Redlock& operator=(Redlock&&) noexcept;
    // Releases every hold still made through this object (best effort).
    ~Redlock();

    // Blocks until acquired. Throws QuorumError (errc::no_quorum) when a
    // majority of masters stays unanswering for connect_timeout +
    // command_timeout; Error for other failures.
    void lock();
    [[nodiscard]] bool lock(std::stop_token stop);
    // One attempt. False on contention; QuorumError when too few answered.
    [[nodiscard]] bool try_lock();
    [[nodiscard]] bool try_lock(std::error_code& ec) noexcept;
    // Retries until the deadline (contention, split votes, masters not
    // answering). At the deadline: false on contention, QuorumError when the
    // last attempt had too few answers.
    template <typename Rep, typename Period>
    [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return acquire_until(steady_deadline_in(timeout));
    }
    template <typename Clock, typename Duration>
    [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return acquire_until(steady_deadline_at(deadline));
    }
    bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept;
    [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop);

    // Releases one hold; the last one releases on every master. Never
    // throws; failures go to on_unlock_error. Returns once a majority
    // confirmed (or the hold turned out lost).
    void unlock() noexcept;
    // lease_lost when the hold was lost meanwhile or most masters no longer
    // had it; no_quorum when too few masters confirmed the release (the
    // lease ends it anyway).
    void unlock(std::error_code& ec) noexcept;

    bool is_held() const;
    unsigned hold_count() const;
    std::uint64_t fencing_token() const;
    std::stop_token lost_token() const;
    // Why the caller's hold was lost, as Lock::lost_reason().
    std::optional<LostReason> lost_reason() const;
    std::chrono::steady_clock::time_point valid_until() const;
    const std::string& name() const noexcept;

    // Every master's answer to the latest acquisition attempt made through
    // this object (by any thread). Empty before the first.
    std::vector<MasterOutcome> last_outcomes() const;

private:
    bool acquire_until(std::chrono::steady_clock::time_point deadline);
    friend struct detail::AsyncAccess;  // dlock/async.hpp
    std::shared_ptr<detail::RedlockCore> core_;
};

}  // namespace dlock
