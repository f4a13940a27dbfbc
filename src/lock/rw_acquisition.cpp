// How one side of an RwLock acquires: its attempt (rw_read_acquire.lua,
// rw_write_acquire.lua) and how its answer is read, re-entry, and the
// protocol the engine (hold/acquisition_engine.hpp) drives, with a waiting
// writer's mark and its withdrawal.
#include "dlock/error.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/hold_queries.hpp"
#include "hold/outage.hpp"
#include "metrics/acquisition_meter.hpp"
#include "rw_lock_core.hpp"
#include "script_replies.hpp"

namespace dlock::detail {

RwLockCore::Answer RwLockCore::send_acquire(RwSide side, const std::string& owner, std::string_view mode,
                                            GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                            std::stop_token stop) {
    const auto operation = service->next_operation_id();
    // Granted after the caller gave up, or its outcome never learnt: nobody
    // will use it. The handler may run after the RwLock is gone.
    auto undo_unused = [self = shared_from_this(), side, owner, operation](std::error_code ec, const Reply& reply) {
        if (outcome_unknown(ec) || (!ec && is_grant(reply))) self->undo(side, owner, operation);
    };
    auto answer = run(acquire_call(side, owner, mode, operation), wait_until, stop, ticket, undo_unused,
                      RetriedCall::Migration::while_awaited);
    answer.operation = operation;
    if (answer.known && outcome_unknown(answer.ec)) undo(side, owner, operation);
    return answer;
}

bool RwLockCore::record_grant(RwSide side, const std::string& owner, OwnerSlot& slot, const Grant& grant,
                              const std::string& operation) {
    auto hold = adopt_grant(*service, identity_ptr(side), owner, slot, grant);
    if (!hold) {
        undo(side, owner, operation);  // its lease may be over already: give it back
        return false;
    }
    contributions_.add(this, hold);
    // The write side's, force-released before the hold could be found: lost
    // now (readers' revocations do not name one grant: recent_revocations.hpp).
    if (side == RwSide::write) service->lose_if_revoked(hold, false);
    return true;
}

AcquisitionProtocol::Reentry RwLockCore::reenter(RwSide side, const std::shared_ptr<Hold>& hold,
                                                 const std::string& owner, GateTicket& ticket,
                                                 std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                                 std::error_code& ec) {
    const auto answer = send_acquire(side, owner, "reenter", ticket, wait_until, stop);
    bool give_back = false;
    const auto verdict = apply_reentry(*service, hold, answer, stop, identity(side).options.lease, give_back, ec);
    if (verdict == AcquisitionProtocol::Reentry::reentered) contributions_.add(this, hold);
    if (give_back) undo(side, owner, answer.operation);
    return verdict;
}

AttemptResult RwLockCore::attempt(RwSide side, std::string_view mode, const std::string& owner, OwnerSlot& slot,
                                  GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                  std::stop_token stop, std::error_code& ec, std::string& operation) {
    auto answer = send_acquire(side, owner, mode, ticket, wait_until, stop);
    operation = answer.operation;
    if (!answer.known) return AttemptResult::walked_away();
    if (answer.ec == errc::wrong_type)
        throw Error(answer.ec, "a key of read-write lock " + write_->keys.lock + " holds data that is not a dlock lock");
    FreshAcquire fresh;
    return read_attempt(answer, ec, fresh, [&](const Grant& grant) {
        return record_grant(side, owner, slot, grant, answer.operation);
    });
}

// One acquisition of one side, as the engine (hold/acquisition_engine.hpp) drives it.
class RwAcquisition final : public AcquisitionProtocol {
public:
    RwAcquisition(RwLockCore& core, RwSide side) : core_(core), side_(side) {}

    const MetricsTag& metrics() const override { return core_.identity(side_).metrics; }
    std::error_code usable() const override { return core_.client->usable(); }
    ClosingGate& closing() override { return core_.service->closing(); }
    const ClientOptions& client_options() const override { return core_.client->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.client->options().command_timeout; }
    bool prepare(AcquisitionCall& call, std::error_code& ec) override {
        owner_ = &call.owner();
        const bool own_write = hold_is_held(core_.hold_of(RwSide::write, call.owner()));
        if (side_ == RwSide::write && !own_write && hold_is_held(core_.hold_of(RwSide::read, call.owner()))) {
            // An upgrade: two readers waiting to upgrade would wait for each
            // other for ever, so it is one attempt that fails fast (waiting
            // for its answer never past the caller's deadline).
            if (!call.deadline) {
                ec = std::make_error_code(std::errc::resource_deadlock_would_occur);
                return false;
            }
            call.single_attempt = true;
            call.meter.single_attempt();
        }
        // The writer taking the read side (a downgrade) never waits for anyone.
        downgrade_ = side_ == RwSide::read && own_write;
        // A writer marks itself waiting only from the head of this process's
        // queue: marked behind a local reader, it would hold back the very
        // reader it waits for. A single attempt never marks.
        marks_ = side_ == RwSide::write && !call.single_attempt;
        return true;
    }
    HoldRegistry* holds() override { return &core_.registry(side_); }
    const std::string& name() const override { return core_.write_->name; }
    const std::string& owner() override { return calling_owner_ = core_.current_owner(); }
    Reentry reenter(AcquisitionCall& call, const std::shared_ptr<Hold>& hold, std::error_code& ec) override {
        // Re-entry never queues (also not behind a waiting writer: that
        // writer waits for us).
        return core_.reenter(side_, hold, call.owner(), *call.ticket, call.wait_until(), call.stop, ec);
    }
    QueueRegistry* queues() override { return core_.service.get(); }
    // Readers first: this process's readers queue apart from its writers,
    // so that a waiting writer of ours does not hold them back either.
    const std::string& queue_name() const override {
        return side_ == RwSide::read && core_.prefer_readers_ ? core_.reader_queue_name_ : core_.queue_name_;
    }
    bool jump_queue(const AcquisitionCall&) const override { return downgrade_; }

    AttemptResult attempt(AcquisitionCall& call, bool in_line, std::optional<LockClock::time_point> wait_until,
                          std::error_code& ec) override {
        const std::string_view mode = side_ == RwSide::read ? "fresh" : in_line ? "wait" : "try";
        // Read after the engine read the generation (its `seen`) and before
        // the request leaves: listening then, this waiter hears whatever
        // is published after the server answers it.
        listened_at_ask_ = signal_ && signal_->listening(1);
        auto result = core_.attempt(side_, mode, call.owner(), *call.slot, *call.ticket, wait_until, call.stop, ec,
                                    last_operation_);
        // A waiting writer's mark lasts a lease: it tries again (which
        // refreshes the mark) at least every lease/3.
        if (result.kind == AttemptResult::Kind::busy && side_ == RwSide::write)
            result.sleep = std::min<std::chrono::milliseconds>(result.sleep, renew_interval(core_.write_->options.lease));
        return result;
    }
    void hear_revocations(AcquisitionCall& call) override {
        (void)core_.service->wait_for_inbox(core_.name_inbox_, call.wait_until(), call.stop);
    }
    // A waiter whose queue listened already when it asked (another thread of
    // this process waited before it) sleeps on that answer; one that made
    // the queue listen asks again at once, since a release may have been
    // published before the subscription was confirmed.
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        return {signal_->ensure_subscribed({&core_.client, 1}, 1, core_.write_->keys.channel(), until, call.stop),
                !listened_at_ask_};
    }
    // Not granted: the mark (if any attempt made one) goes, so that the
    // readers behind it go now, not when it runs out.
    void give_up() noexcept override {
        if (!marks_ || last_operation_.empty()) return;
        try {
            core_.withdraw(*owner_, last_operation_);
        } catch (...) {
            // Unsent (out of memory): the mark runs out within a lease.
        }
    }

private:
    RwLockCore& core_;
    const RwSide side_;
    const std::string* owner_ = nullptr;
    std::string calling_owner_;  // owner(), for the call
    bool downgrade_ = false;
    bool marks_ = false;
    bool listened_at_ask_ = false;  // the queue listened when the last attempt's request left
    std::string last_operation_;
};

bool RwLockCore::acquire(RwSide side, std::optional<LockClock::time_point> deadline, std::stop_token stop,
                         std::error_code& ec) {
    RwAcquisition acquisition(*this, side);
    return acquire_with(acquisition, deadline, std::move(stop), ec);
}

}  // namespace dlock::detail
