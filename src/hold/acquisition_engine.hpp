// The one acquisition loop under every lock kind.
//
// Every kind acquires the same way: is the client usable; which owner; the
// owner's gate (one operation of an owner on a name at a time); how long a
// single attempt waits for its answer; re-entry; this process's local queue
// for the name (only its head talks to the server); "listen, then try again
// at once" (a release published before the subscription was active would go
// unseen); sleep until woken or until what keeps the caller out must have
// ended; ride through an outage (outage.hpp); give up at the deadline or on
// stop; meter the call. acquire_with() is that loop, written once.
//
// What differs between kinds is a protocol (AcquisitionProtocol): its
// attempt (a script call, or a fan-out over masters, or a sequence of other
// acquisitions) and how it reads the answer (granted, busy with how long to
// sleep, again at once, failed, walked away); what wakes its waiter; how it
// gives up. A protocol object is made per call: it carries the call's own
// state (a place in the server's line, a permit id, a writer's mark).
//
// Time: one clock (LockClock, steady). The caller's deadline bounds every
// wait in here — the gate, each attempt's answer, the local queue, the
// listen step, each sleep — and a single attempt waits for its answer at
// most answer_time(), never past a deadline still ahead.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/client_options.hpp"
#include "closing_gate.hpp"
#include "hold.hpp"
#include "hold_registry.hpp"
#include "name_queue.hpp"

namespace dlock::detail {

class AcquisitionMeter;
struct MetricsTag;

// What one attempt came to.
struct AttemptResult {
    enum class Kind {
        granted,      // held: the protocol recorded its hold
        busy,         // another owner keeps the caller out: wait, then try again
        again,        // no answer about contention (a stale request id, a grant given back): try again at once
        failed,       // ec set (or, with no ec, the call ends not granted)
        walked_away,  // no answer before the attempt's wait ended (deadline, stop)
    };
    Kind kind = Kind::failed;
    // busy: the longest the waiter sleeps before it tries again; failed and
    // ridden through: the kind's own pause, when shorter than the outage's
    std::chrono::milliseconds sleep{0};
    bool listens = true;     // a wake signal may end that sleep (or pause); false: only stop does
    bool transient = false;  // failed: for a moment only (outage.hpp): ridden through

    static AttemptResult granted() { return {Kind::granted}; }
    static AttemptResult busy(std::chrono::milliseconds sleep, bool listens = true) {
        return {Kind::busy, sleep, listens};
    }
    static AttemptResult again() { return {Kind::again}; }
    static AttemptResult failed(bool transient = false) { return {Kind::failed, {}, true, transient}; }
    static AttemptResult walked_away() { return {Kind::walked_away}; }
};

// One acquisition call as the engine runs it; protocols read it.
struct AcquisitionCall {
    AcquisitionCall(std::optional<LockClock::time_point> deadline, std::stop_token stop, bool single_attempt,
                    AcquisitionMeter& meter, std::chrono::milliseconds answer_time)
        : deadline(deadline),
          stop(std::move(stop)),
          single_attempt(single_attempt),
          meter(meter),
          answer_time(answer_time) {}

    const std::optional<LockClock::time_point> deadline;  // the caller's; none: no limit
    const std::stop_token stop;
    bool single_attempt;  // one attempt, never in line (a protocol's prepare() may set it)
    AcquisitionMeter& meter;
    const std::chrono::milliseconds answer_time;
    // The protocol's owner(), valid for the call; empty for kinds without owners.
    const std::string& owner() const noexcept { return *owner_; }
    const std::string* owner_ = &no_owner;
    OwnerSlot* slot = nullptr;    // the owner's slot, its gate entered (kinds with holds() only)
    GateTicket* ticket = nullptr;

    static inline const std::string no_owner;

    bool past_deadline() const { return stop.stop_requested() || (deadline && LockClock::now() >= *deadline); }
    // Until when one attempt waits for its answer: the deadline, or for a
    // single attempt answer_time from now (never past a deadline still ahead).
    std::optional<LockClock::time_point> wait_until() const {
        if (!single_attempt) return deadline;
        return answer_by();
    }
    LockClock::time_point answer_by() const {
        const auto now = LockClock::now();
        const auto by = now + answer_time;
        return deadline && *deadline > now ? std::min(by, *deadline) : by;
    }
};

// What a lock kind supplies. Made per call; the engine calls it from the
// calling thread (or fiber) only.
class AcquisitionProtocol {
public:
    enum class Reentry { not_held, reentered, failed };
    struct Listening {
        bool listening = true;  // false: listen() again at the next busy answer
        bool try_now = false;   // true: try again at once (a message may have gone unseen)
    };

    virtual ~AcquisitionProtocol() = default;

    // What the call is.
    virtual const MetricsTag& metrics() const = 0;
    virtual std::error_code usable() const = 0;
    // The gate of the client (or masters) the call goes through: its close
    // stops the call, wherever it waits, and the call ends client_closed.
    virtual ClosingGate& closing() = 0;
    virtual const ClientOptions& client_options() const = 0;  // the outage window (outage.hpp)
    // How long a single attempt waits for its answer (and the listen step at most).
    virtual std::chrono::milliseconds answer_time() const = 0;
    // After the owner is known, before its gate: may make the call one
    // attempt (call.single_attempt, and the meter told), or refuse it (false, ec set).
    virtual bool prepare(AcquisitionCall&, std::error_code&) { return true; }
    // Before the first attempt of a call that may wait: makes sure a
    // revocation of a hold this call may be granted will be heard (the
    // client's inbox listens), waiting at most until call.wait_until().
    // Instant once it listens.
    virtual void hear_revocations(AcquisitionCall&) {}

    // The owner's gate and re-entry: kinds whose holds are named by owner.
    virtual HoldRegistry* holds() { return nullptr; }
    virtual const std::string& name() const = 0;
    // The calling owner, valid until the call ends (the protocol keeps it).
    virtual const std::string& owner() { return AcquisitionCall::no_owner; }
    // The owner's slot in holds(), when the protocol keeps it already;
    // null: the engine looks it up.
    virtual std::shared_ptr<OwnerSlot> owner_slot() { return nullptr; }
    // The owner holds it already (a trusted hold): re-enters, or not_held
    // to acquire afresh.
    virtual Reentry reenter(AcquisitionCall&, const std::shared_ptr<Hold>&, std::error_code&) {
        return Reentry::not_held;
    }

    // This process's local queue for the name; null: every waiter talks to
    // the server itself.
    virtual QueueRegistry* queues() { return nullptr; }
    virtual const std::string& queue_name() const { return name(); }
    // Which lock (and options) a waiter in the local queue waits with, when
    // a hand-off of that lock may place it in the server's line before its
    // turn (NameQueue's seats); null: never placed by another.
    virtual const void* seat_tag() const { return nullptr; }
    // Try once even while others of this process wait (they wait for us).
    virtual bool jump_queue(const AcquisitionCall&) const { return false; }

    // One attempt. in_line: the caller waits (its attempts may take a place
    // in the server's line); false for the try before queueing and for a
    // single attempt. wait_until: how long to wait for the answer.
    virtual AttemptResult attempt(AcquisitionCall& call, bool in_line, std::optional<LockClock::time_point> wait_until,
                                  std::error_code& ec) = 0;

    // Waiting. begin_waiting: the caller is about to wait in line (queue:
    // its local queue, it is the head; null without one); end_waiting: it
    // leaves the line, before the local queue.
    virtual void begin_waiting(AcquisitionCall&, std::shared_ptr<NameQueue> queue) { signal_ = std::move(queue); }
    virtual void end_waiting() noexcept {}
    virtual std::uint64_t generation() { return signal_ ? signal_->generation() : 0; }
    // Sleeps until the signal moves past seen, until wake_at, or stop.
    virtual void wait_change(std::uint64_t seen, LockClock::time_point wake_at, const std::stop_token& stop);
    // The first busy answer: listen for what wakes the waiter (until: at most then).
    virtual Listening listen(AcquisitionCall&, LockClock::time_point) { return {}; }
    // Sleeps after a busy answer; true when the sleep ended holding the lock
    // (a hand-off, a direct grant).
    virtual bool sleep(AcquisitionCall& call, const AttemptResult& busy, std::uint64_t seen,
                       LockClock::time_point wake_at);
    // The call ends without the lock: withdraw what its attempts left on
    // the server (a waiting writer's mark, a place in a semaphore's line).
    virtual void give_up() noexcept {}

protected:
    std::shared_ptr<NameQueue> signal_;
};

// Runs the acquisition (metered): true when acquired. ec: why not, when it
// was not contention, the deadline or stop (client_closed when the client
// closed meanwhile).
bool acquire_with(AcquisitionProtocol& kind, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                  std::error_code& ec);

}  // namespace dlock::detail
