// dlock/semaphore.hpp — a named semaphore of N leased permits on one Redis server.
//
// A Semaphore names a resource that at most `limit` permits may use at a
// time, across every process. Each acquisition takes k permits (1 <= k <=
// limit) and is its own lease, owned by the Permit it returns (an id per
// acquisition, not per thread): any thread may release it. The limit is set
// by whoever creates the semaphore (the first acquisition, or set_limit())
// and may be changed at run time with set_limit(); a raised limit wakes the
// waiters, a lowered one takes nothing away from holders and only stops new
// grants until enough permits came back. Once the semaphore exists, a new
// request that asks with another limit fails with errc::limit_mismatch
// (SemaphoreOptions::set_limit changes the limit instead); a waiter already
// in line waits under whatever limit the semaphore has.
//
// One name is one resource: while the name is held (or waited for) as a
// semaphore, a Lock or RwLock of that name fails with errc::kind_mismatch,
// and a semaphore acquisition fails alike while the name is held as a lock.
//
// The limit holds only while leases are valid. A permit's lease is set in
// Redis when it is granted, so the permits of a holder that dies come back
// after at most one lease (those of a waiter that dies as a release grants
// them to it: at most one waiter_lease, see below). While held, the client's
// lease keeper renews it every lease/3, batched with the client's other
// renewals. As for a Lock (lock.hpp): valid_until() = send time of the
// granting request + lease - drift (a direct grant's: below); when a
// renewal finds the permit gone or validity ends unconfirmed, the permit is
// LOST: lost_token() is stop-requested and SemaphoreOptions::on_lost runs on
// the client's I/O thread, no later than valid_until(), and release()
// reports errc::lease_lost.
//
// Fairness: strict FIFO across processes. Waiters stand in one line on the
// server, in arrival order; a request is granted only when no earlier waiter
// is still in line and its k permits are free, so a large request is never
// starved by small ones (the small ones behind it wait). try_acquire() does
// not jump the line either: it fails while anyone waits. A waiter's place is
// a lease of its own (SemaphoreOptions::waiter_lease), refreshed by the
// waiting thread every waiter_lease/3; a waiter that dies loses its place
// within one waiter lease.
//
// Waiting never polls for permits: waiters sleep until a message on the
// semaphore's channel or the client's inbox (one subscriber connection per
// client, shared), until
// the next lease or place on the server runs out, or until their place is
// due for its refresh. A release (or a grant that leaves permits free, a
// waiter that gives up, a force release) grants the first waiter in line its
// permits inside that same script, and the next ones while their permits are
// free, and tells each on its client's inbox (only that client's subscriber
// reads it; on the semaphore's channel while the inbox does not listen: a
// client's first wait, or an ACL that refuses the inbox): the waiter returns holding them
// with no further round trip. Such a permit is leased on the server until the
// waiter's place would have ended; its valid_until() is the send time of the
// last request that kept the place + waiter_lease - drift (never past what
// the server keeps) until its first renewal, which the lease keeper sends a
// third of the way into that validity (or of the lease, if shorter), extends
// it to a full lease; a permit released before then costs no renewal. With
// renew = false the one renewal it gets, at once, gives it its fixed lease.
// A waiter that misses its notice (after a reconnect of the subscriber each
// waiter tries again at once) finds its permits granted and they are
// extended to a full lease from that request; a waiter that gives up
// (deadline, stop) while its grant is on its way gives it back; one that
// died holds it at most until its place would have ended. A new limit wakes
// every waiter to ask again. Permit ids carry '!!' before '#k' (this client
// takes direct grants and hears them on its inbox) or '!' (it takes them on
// the semaphore's channel); waiters of older clients, whose ids carry
// neither, are called by their ids instead and ask, as they expect.
//
// Retries: a request that fails in transit is resent with the same permit
// id, which the scripts answer as they answered the first copy: a resent
// acquire never takes permits twice, a resent release never gives back
// twice. A request whose caller walked away (deadline, stop) is given up on
// the server; a late copy of it never grants. Releasing a permit twice, or
// one that is not held, is errc::not_owner and never raises the count.
//
// Keys: dlock:sem:{NAME} and dlock:sem:{NAME}:state|queue|waiters|done (one
// hash tag, one cluster slot). The ids of released and expired permits are
// kept for SemaphoreOptions::retention (one small entry per acquisition,
// which is why its default is shorter than a Lock's); after the last permit
// and waiter are gone, nothing stays longer than lease + retention.
//
// Clocks: deadlines and validity on std::chrono::steady_clock; the server
// alone decides expiry (TIME inside its scripts). Deadlines and stop
// requests are honoured within about a round trip.
//
// Thread-safety: a Semaphore may be shared by many threads. A Permit is a
// value owned by one thread at a time (move it to hand it over); its
// queries are safe to call while another thread's lease keeper renews it.
// Errors: contention is not an error (try_acquire* return an empty Permit);
// everything else throws dlock::Error or sets ec in the error_code twins.
// Requires Redis 7.0 or later.
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
#include <vector>

#include "dlock/lock.hpp"

namespace dlock {

class Client;

namespace detail {
class SemaphoreCore;
struct AsyncAccess;
class Hold;
}  // namespace detail

inline constexpr unsigned max_semaphore_limit = 100'000;
inline constexpr std::chrono::milliseconds default_semaphore_retention = std::chrono::minutes(1);

struct SemaphoreOptions {
    // How many permits may be held at once: 1 .. max_semaphore_limit.
    // Set when this object's request creates the semaphore. A new request
    // to a semaphore that exists with another limit fails with
    // errc::limit_mismatch naming both, unless set_limit (below) is true;
    // after this object's set_limit(), its requests ask with that limit.
    // Default 1.
    unsigned limit = 1;
    // When the semaphore exists with another limit: true sets it to
    // `limit` (as set_limit() does: holders keep what they hold, waiters
    // are woken) instead of failing. Default false.
    bool set_limit = false;
    // How long a permit stays valid in Redis without renewal. min_lease
    // (10 ms) to max_lease (24 h). Default 30 s.
    std::chrono::milliseconds lease{30'000};
    // Renew each permit every lease/3 while held. Default true.
    bool renew = true;
    // How long a waiter keeps its place in line without a refresh (its
    // thread refreshes it every waiter_lease/3): a waiter that died holds
    // up the line at most this long, and permits granted to it as it died
    // at most this long. 30 ms .. 1 h; default 6 s.
    std::chrono::milliseconds waiter_lease{6'000};
    // How long the ids of released, expired and given-up permits stay in
    // Redis, so that a late or resent copy of a request is recognised.
    // Long against any retry window; 1 s .. 30 days; default 1 min.
    std::chrono::milliseconds retention = default_semaphore_retention;
    // Called once when a held permit is lost, on the client's I/O thread
    // (as LockOptions::on_lost). Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_lost;
    // Called when a Permit's destructor (which never throws) failed to
    // release it. Default none.
    std::function<void(std::string_view name, std::error_code reason)> on_release_error;
};

// k permits of one semaphore, held under one lease: the scoped guard. Moving
// hands them over; the destructor (and move-assignment) releases them if
// they are still held, never throwing (failures go to
// SemaphoreOptions::on_release_error). An empty Permit (default-constructed,
// moved-from, or what a failed try_acquire returned) holds nothing.
class Permit {
public:
    Permit() noexcept;
    Permit(Permit&&) noexcept;
    Permit& operator=(Permit&&) noexcept;
    ~Permit();

    // Gives the permits back. Throws Error: not_owner when this Permit is
    // empty or was released already (the count is not raised), lease_lost
    // when the lease was lost meanwhile, transport errors. Waits for the
    // server's answer (up to the retry window).
    void release();
    void release(std::error_code& ec) noexcept;

    // True when the semaphore granted this Permit and it was not released
    // yet (it may be lost: see is_held()).
    explicit operator bool() const noexcept;
    bool is_held() const;                                       // granted, not lost, lease valid
    unsigned count() const noexcept;                            // k; 0 when empty
    const std::string& id() const noexcept;                     // the permit id on the server; empty when empty
    std::stop_token lost_token() const;                         // never requested when empty
    // Why the permit was lost (as Lock::lost_reason()); nothing while it is
    // held, once released, or when empty.
    std::optional<LostReason> lost_reason() const;
    std::chrono::steady_clock::time_point valid_until() const;  // time_point{} when not held

private:
    friend class Semaphore;
    void release_if_held() noexcept;
    // Made only inside the library, so not exported from it.
    [[gnu::visibility("hidden")]] Permit(std::shared_ptr<detail::SemaphoreCore> core,
                                         std::shared_ptr<detail::Hold> hold) noexcept;
    std::shared_ptr<detail::SemaphoreCore> core_;
    std::shared_ptr<detail::Hold> hold_;
};

class Semaphore {
public:
    // Throws Error(invalid_argument) for an empty name or one over
    // max_lock_name_bytes, a limit of 0 or over max_semaphore_limit, or a
    // lease, waiter_lease or retention out of range. Talks to no server.
    Semaphore(Client& client, std::string name, SemaphoreOptions options = {});
    Semaphore(Semaphore&&) noexcept;
    Semaphore& operator=(Semaphore&&) noexcept;
    // Permits outlive the Semaphore they came from.
    ~Semaphore();

    // Blocks until k permits are granted. Throws Error: invalid_argument
    // when k is 0 or more than the limit (the server's, when it differs),
    // transport errors, wrong_type when a key holds other data,
    // client_closed.
    Permit acquire(unsigned k = 1);
    // As acquire(), but returns an empty Permit as soon as stop is requested.
    Permit acquire(unsigned k, std::stop_token stop);
    // One attempt, without standing in line: an empty Permit when the k
    // permits are not free or someone waits. Waits up to command_timeout
    // for the answer.
    [[nodiscard]] Permit try_acquire(unsigned k = 1);
    [[nodiscard]] Permit try_acquire(unsigned k, std::error_code& ec) noexcept;
    // Waits in line up to timeout; zero or negative means one attempt.
    // Returns within about a round trip after the deadline; throws
    // command_timeout if no attempt was answered.
    template <typename Rep, typename Period>
    [[nodiscard]] Permit try_acquire_for(const std::chrono::duration<Rep, Period>& timeout, unsigned k = 1) {
        return acquire_until(steady_deadline_in(timeout),
                             k, {});
    }
    template <typename Clock, typename Duration>
    [[nodiscard]] Permit try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline, unsigned k = 1) {
        return acquire_until(steady_deadline_at(deadline),
                             k, {});
    }
    [[nodiscard]] Permit try_acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k,
                                           std::stop_token stop);
    [[nodiscard]] Permit try_acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k,
                                           std::error_code& ec) noexcept;

    // permit.release(), for those who prefer the semaphore's vocabulary.
    void release(Permit& permit);
    void release(Permit& permit, std::error_code& ec) noexcept;

    // Sets the limit for every process (1 .. max_semaphore_limit) and wakes
    // the waiters. Returns the previous limit (0: the semaphore had none).
    // Throws like Client::eval.
    unsigned set_limit(unsigned limit);

    const std::string& name() const noexcept;

private:
    Permit acquire_until(std::chrono::steady_clock::time_point deadline, unsigned k, std::stop_token stop);
    friend struct detail::AsyncAccess;  // dlock/async.hpp
    std::shared_ptr<detail::SemaphoreCore> core_;
};

// SemaphoreInfo (what `dlock status` shows for a semaphore) is in lock.hpp.

// Reads a semaphore's state. Throws Error(invalid_argument) for a bad name,
// otherwise like Client::eval.
SemaphoreInfo inspect_semaphore(Client& client, std::string_view name);

}  // namespace dlock
