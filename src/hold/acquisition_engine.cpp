#include "acquisition_engine.hpp"

#include <algorithm>
#include <optional>

#include "dlock/error.hpp"

#include "metrics/acquisition_meter.hpp"
#include "outage.hpp"
#include "redis/server_error_text.hpp"

namespace dlock::detail {

void AcquisitionProtocol::wait_change(std::uint64_t seen, LockClock::time_point wake_at, const std::stop_token& stop) {
    if (signal_) signal_->wait_change(seen, wake_at, stop);
    else pause_until(wake_at, stop);
}

bool AcquisitionProtocol::sleep(AcquisitionCall& call, const AttemptResult& busy, std::uint64_t seen,
                                LockClock::time_point wake_at) {
    if (busy.listens) wait_change(seen, wake_at, call.stop);
    else pause_until(wake_at, call.stop);
    return false;
}

namespace {

using Kind = AttemptResult::Kind;

// The wait, from the first attempt to the end of the call: local queue,
// attempts, listening, sleeping, outages.
class Wait {
public:
    Wait(AcquisitionProtocol& kind, AcquisitionCall& call, std::error_code& ec)
        : kind_(kind), call_(call), ec_(ec), outage_(call.deadline, kind.client_options()) {}
    ~Wait() {
        // The line first, then the local queue (whose next waiter starts
        // trying), then whatever the attempts left on the server.
        if (waiting_) kind_.end_waiting();
        if (queue_) queue_->leave(ticket_);
        if (!granted_) kind_.give_up();
    }
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

    bool run() {
        if (!call_.single_attempt) {
            if (auto* queues = kind_.queues(); queues && !enter_queue(*queues)) return granted_;
        }
        return wait_in_line();
    }

private:
    // Tries once (nobody of ours waits, or the kind may jump), then joins
    // the local queue and waits for its turn. False: the call is over
    // (granted_ when that first attempt acquired).
    bool enter_queue(QueueRegistry& queues) {
        if (kind_.jump_queue(call_) || !queues.existing_queue(kind_.queue_name())) {
            const auto result = kind_.attempt(call_, false, call_.deadline, ec_);
            if (result.kind == Kind::failed && outage_.ride(ec_, result.transient)) {
                // In line like a busy answer's, after a pause.
                pause_until(retry_at(result), call_.stop);
                if (outage_.gave_up(call_.stop, ec_)) return false;
            } else if (result.kind == Kind::busy) {
                answered_ = true;
                if (call_.past_deadline()) return false;
            } else if (result.kind != Kind::again) {
                finish(result);
                return false;
            }
        }
        call_.meter.waiting();
        queue_ = queues.queue(kind_.queue_name());
        const void* tag = kind_.seat_tag();
        ticket_ = queue_->enqueue(tag ? call_.owner() : std::string(), tag);
        return queue_->wait_turn(ticket_, call_.deadline, call_.stop);
    }

    bool wait_in_line() {
        kind_.begin_waiting(call_, queue_);
        waiting_ = true;
        bool listening = false;
        for (;;) {
            const auto seen = kind_.generation();
            const auto result = kind_.attempt(call_, !call_.single_attempt, call_.wait_until(), ec_);
            if (!call_.single_attempt && result.kind == Kind::failed && outage_.ride(ec_, result.transient)) {
                // The server is away (a failover, a restart): try again after
                // a pause, or sooner when the signal moves (a new master).
                answered_ = false;
                if (result.listens) kind_.wait_change(seen, retry_at(result), call_.stop);
                else pause_until(retry_at(result), call_.stop);
                if (outage_.gave_up(call_.stop, ec_)) return false;
                continue;
            }
            if (result.kind == Kind::again) {
                if (call_.single_attempt || call_.past_deadline()) return false;
                continue;
            }
            if (result.kind != Kind::busy || call_.single_attempt) return finish(result);
            outage_.answered();
            answered_ = true;
            call_.meter.waiting();
            if (call_.past_deadline()) return false;
            if (!listening) {
                // Listen, then try again at once: a release published before
                // the subscription was active would otherwise go unseen.
                const auto listen = kind_.listen(call_, call_.answer_by());
                listening = listen.listening;
                if (listen.try_now) continue;
            }
            const auto now = LockClock::now();
            if (call_.past_deadline()) return false;
            // Closed meanwhile: the close wakes the waiters, but not one that
            // went to sleep after it.
            if ((ec_ = kind_.usable())) return false;
            auto wake_at = now + result.sleep;
            if (call_.deadline) wake_at = std::min(wake_at, *call_.deadline);
            if (kind_.sleep(call_, result, seen, wake_at)) return granted_ = true;
            if (call_.past_deadline()) return false;
        }
    }

    // After a transient failure: the outage's pause, or the kind's own when shorter.
    LockClock::time_point retry_at(const AttemptResult& failed) const {
        if (failed.sleep.count() <= 0) return outage_.retry_at();
        return std::min(outage_.retry_at(), LockClock::now() + failed.sleep);
    }

    // An attempt that ended the call: true when acquired. Walked away
    // before any attempt was answered (or since an outage began): the
    // server never said busy, so the caller learns it timed out, or what
    // kept it from the server.
    bool finish(const AttemptResult& result) {
        if (result.kind == Kind::walked_away && !answered_ && !call_.stop.stop_requested())
            ec_ = outage_.unanswered_error();
        return granted_ = result.kind == Kind::granted;
    }

    AcquisitionProtocol& kind_;
    AcquisitionCall& call_;
    std::error_code& ec_;
    Outage outage_;
    bool answered_ = false;  // some attempt was answered busy (since the last outage)
    bool granted_ = false;
    bool waiting_ = false;
    std::shared_ptr<NameQueue> queue_;
    std::uint64_t ticket_ = 0;
};

bool acquire_metered(AcquisitionProtocol& kind, AcquisitionCall& call, std::error_code& ec) {
    ec.clear();
    clear_server_error();
    if ((ec = kind.usable())) return false;
    call.owner_ = &kind.owner();
    if (!kind.prepare(call, ec)) return false;
    // A single attempt is sent at once: it is asked to fail fast, and one
    // made before the inbox listens is covered by the renewals the inbox's
    // first confirmation sends (LockService::on_inbox).
    if (!call.single_attempt) kind.hear_revocations(call);
    std::optional<OwnerOperation> operation;
    if (auto* holds = kind.holds()) {
        operation.emplace(*holds, kind.name(), call.owner(), kind.owner_slot());
        const auto gate_until = call.single_attempt ? std::optional(call.answer_by()) : call.deadline;
        if (!operation->enter(gate_until, call.stop, ec)) return false;
        call.slot = &operation->slot();
        call.ticket = &operation->ticket;
        if (auto hold = call.slot->current(); hold && hold->trusted(LockClock::now())) {
            // Re-entry never queues behind waiters: they wait for us.
            switch (kind.reenter(call, hold, ec)) {
                case AcquisitionProtocol::Reentry::reentered: return true;
                case AcquisitionProtocol::Reentry::failed: return false;
                case AcquisitionProtocol::Reentry::not_held: break;
            }
        }
    }
    Wait wait(kind, call, ec);
    return wait.run();
}

// The call's stop: the caller's, or the client's close. The close alone
// (the caller passed none) costs nothing to make.
class CallStop {
public:
    CallStop(const std::stop_token& caller, const std::stop_token& closing) {
        if (!caller.stop_possible()) {
            token_ = closing;
            return;
        }
        std::stop_source merged;
        token_ = merged.get_token();
        from_caller_.emplace(caller, Forward{merged});
        from_close_.emplace(closing, Forward{merged});
    }
    const std::stop_token& token() const { return token_; }

private:
    struct Forward {
        std::stop_source to;
        void operator()() const noexcept { to.request_stop(); }
    };
    std::stop_token token_;
    std::optional<std::stop_callback<Forward>> from_caller_, from_close_;
};

}  // namespace

bool acquire_with(AcquisitionProtocol& kind, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                  std::error_code& ec) {
    const bool single_attempt = deadline && *deadline <= LockClock::now();
    AcquisitionMeter meter(kind.metrics(), single_attempt, stop);
    auto& gate = kind.closing();
    const auto pass = gate.enter();
    if (!pass) {
        ec = errc::client_closed;
        return meter.finish(false, ec);
    }
    const CallStop call_stop(stop, gate.closing());
    AcquisitionCall call(deadline, call_stop.token(), single_attempt, meter, kind.answer_time());
    bool acquired = acquire_metered(kind, call, ec);
    // Stopped by the close (the protocol gave back what it left on the
    // server when the call ended): the caller learns why.
    if (!acquired && !ec && gate.closed()) ec = errc::client_closed;
    // Granted after the close began: the close gives that hold back once
    // this acquisition has left, so it is not the caller's to keep.
    if (acquired && gate.closed()) acquired = false, ec = errc::client_closed;
    return meter.finish(acquired, ec);
}

}  // namespace dlock::detail
