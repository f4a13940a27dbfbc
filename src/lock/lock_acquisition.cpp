// How a Lock (or FairLock) acquires: its protocol for the acquisition
// engine (hold/acquisition_engine.hpp): acquire.lua as the attempt, a place
// in the server's line while it waits, woken by grant notices on the
// client's inbox, by this process's hand-offs, or when the holder's lease
// must have ended.
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/outage.hpp"
#include "line_seat.hpp"
#include "lock_core.hpp"
#include "lock_scripts.hpp"
#include "redis/server_error_text.hpp"
#include "replica_ack.hpp"
#include "script_replies.hpp"

namespace dlock::detail {

// A waiter's place in the server's line, while it waits: grant notices and
// the lease keeper's refreshes reach it through LineWaiters. Leaving
// without the lock gives the place back, and with it a grant that came
// too late to be confirmed (line_leave.lua), so that nobody behind waits
// for a lock that nobody will use.
class LinePlace {
public:
    LinePlace(LockCore& core, const std::string& owner, std::function<void()> wake)
        : core_(core), owner_(owner), waiter_(core.service->line_waiters().join(core.identity, owner, std::move(wake))) {}
    // The place a hand-off took for this waiter before its turn (a seat).
    LinePlace(LockCore& core, const std::string& owner, LineSeat& seat)
        : core_(core), owner_(owner), waiter_(seat.take()), taken_(true) {}
    ~LinePlace() {
        core_.service->line_waiters().leave(waiter_);
        // Named by its arrival, the wait it ends and nothing after it.
        if (taken_ && !kept_) core_.give_back_place(owner_, waiter_->arrival());
    }
    LinePlace(const LinePlace&) = delete;
    LinePlace& operator=(const LinePlace&) = delete;

    void taken() { taken_ = true; }  // an acquisition that may take a place was sent
    void kept() { kept_ = true; }    // granted: the grant took the owner out of the line
    // A busy answer: where the owner stands, and when the request that said so left.
    void placed(std::uint64_t arrival, LockClock::time_point sent) { waiter_->placed(arrival, sent); }
    std::optional<LineWaiters::TakenGrant> direct_grant() { return waiter_->direct_grant(); }
    std::uint64_t arrival() const { return waiter_->arrival(); }
    bool taken_grant_revoked() const { return waiter_->taken_grant_revoked(); }

private:
    LockCore& core_;
    const std::string& owner_;
    std::shared_ptr<LineWaiters::Waiter> waiter_;
    bool taken_ = false, kept_ = false;
};

void LockCore::give_back_place(const std::string& owner, std::uint64_t arrival) noexcept {
    try {
        const auto& id = *identity;
        send_unattended({&line_leave_script(),
                         {id.keys.lock, std::string(id.keys.fence()), std::string(id.keys.line()),
                          std::string(id.keys.places()), std::string(id.keys.channel())},
                         {owner, id.waiter_lease_ms, id.retention_ms, arrival ? std::to_string(arrival) : std::string()}});
    } catch (...) {
        // Best effort: the place ends waiter_lease after its last refresh.
    }
}

bool LockCore::record_grant(const std::shared_ptr<const std::string>& owner, OwnerSlot& slot, const Grant& grant,
                            const std::string& operation) {
    auto hold = adopt_grant(*service, identity, owner, slot, grant);
    if (!hold) {
        undo(*owner, operation);  // its lease may be over already: give it back
        return false;
    }
    contributions_.add(this, hold);
    // Force-released before the hold could be found (the revocation was
    // read before the grant's answer): lost now.
    service->lose_if_revoked(hold, false);
    return true;
}

LockCore::Answer LockCore::send_acquire(const CallOwner& call_owner, std::string_view mode, GateTicket& ticket,
                                        std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                        bool take_place, bool new_wait, std::string_view grant_arrival) {
    const auto& keys = identity->keys;
    const auto& owner = call_owner.name;
    const auto& tombstone = call_owner.tombstone;
    const auto operation = service->next_operation_id();
    std::string_view k[] = {keys.lock,
                            keys.fence(),
                            tombstone,
                            keys.readers(),
                            keys.semaphore_permits(),
                            keys.semaphore_waiters(),
                            keys.line(),
                            keys.places()};
    const auto holder = OwnerIds::holder_label();
    const std::string_view place = take_place ? std::string_view(identity->waiter_lease_ms) : std::string_view();
    std::string_view a[] = {owner, identity->lease_ms,        operation,  mode, identity->retention_ms, "1", holder,
                            place, identity->waiter_lease_ms, new_wait ? "new" : "", grant_arrival};
    // Granted after the caller gave up, or its outcome never learnt: nobody
    // will use it. The undo also keeps a late copy from applying later. The
    // handler may run after the Lock is gone, so it keeps this core alive.
    // Made only when the caller walks away.
    const auto make_undo = [&]() -> Late {
        return [self = shared_from_this(), owner, operation](std::error_code ec, const Reply& reply) {
            if (outcome_unknown(ec) || (!ec && is_grant(reply))) self->undo(owner, operation);
        };
    };
    const auto& ack = identity->options.replica_ack;
    if (ack.replicas == 0) {
        auto answer =
            run(acquire_script(), k, a, wait_until, stop, ticket, make_undo, RetriedCall::Migration::while_awaited);
        answer.operation = operation;
        if (answer.known && outcome_unknown(answer.ec)) undo(owner, operation);
        return answer;
    }
    // With replica_ack, a re-entry is acknowledged too: a failover must not
    // bring back a count the client has moved past.
    Answer answer;
    answer.operation = operation;
    answer.sent = LockClock::now();
    AcknowledgedAnswer acknowledged;
    auto carried = std::make_shared<GateTicket>();
    answer.known = eval_acknowledged(*client, acquire_script(), k, a, ack, is_grant, wait_until, stop, acknowledged,
                                     [carried, undo_unused = make_undo()](AcknowledgedAnswer&& late) {
                                         undo_unused(late.ec, late.reply);
                                     });
    if (!answer.known) {
        *carried = std::move(ticket);  // no other operation of this owner before that one settles
        carried->unanswered();
        return answer;
    }
    answer.ec = acknowledged.ec;
    answer.reply = std::move(acknowledged.reply);
    if (answer.ec) {
        // It may have been granted after all: undo exactly that operation,
        // if it was the last one.
        if (outcome_unknown(answer.ec)) undo(owner, operation);
    } else if (is_grant(answer.reply) && acknowledged.replicas < ack.replicas) {
        // Granted, but too few replicas have it: a failover could lose it.
        undo(owner, operation);
        answer.ec = errc::replicas_not_acknowledged;
    }
    return answer;
}

AcquisitionProtocol::Reentry LockCore::reenter(const std::shared_ptr<Hold>& hold, const CallOwner& owner,
                                               GateTicket& ticket, std::optional<LockClock::time_point> wait_until,
                                               std::stop_token stop, std::error_code& ec) {
    const auto answer = send_acquire(owner, "reenter", ticket, wait_until, stop, false, false, hold->grant_arrival.view());
    bool give_back = false;
    const auto verdict = apply_reentry(*service, hold, answer, stop, identity->options.lease, give_back, ec);
    if (verdict == AcquisitionProtocol::Reentry::reentered) contributions_.add(this, hold);
    if (give_back) undo(owner.name, answer.operation);
    return verdict;
}

AttemptResult LockCore::attempt(const CallOwner& call_owner, OwnerSlot& slot, GateTicket& ticket,
                               std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                               std::error_code& ec, LinePlace* place) {
    const auto& owner = call_owner.name;
    if (place) place->taken();
    // Until the server has named this wait, its attempt starts a new one;
    // once it has, the attempt names it (a grant to it is confirmed).
    const auto arrival = place ? place->arrival() : 0;
    const DecimalText arrival_text(arrival, true);
    auto answer = send_acquire(call_owner, "fresh", ticket, wait_until, stop, place != nullptr, place && arrival == 0,
                               arrival_text.view());
    if (!answer.known) return AttemptResult::walked_away();
    if (answer.ec == errc::wrong_type) {
        const auto& keys = identity->keys;
        throw Error(answer.ec, "key " + keys.lock + ", " + std::string(keys.fence()) + ", " + keys.tombstone(owner) + ", " +
                                   std::string(keys.line()) + " or " + std::string(keys.places()) +
                                   " holds data that is not a dlock lock");
    }
    if (answer.ec == errc::slot_migrating ||
        (answer.ec && answer.reply.is_error() && answer.reply.text.rfind("ASK ", 0) == 0)) {
        // A cluster migrating the lock's slot did not run it (TRYAGAIN; or
        // ASK where the call could not follow it: a replica_ack acquisition's
        // own connection). Like a busy answer: tried again shortly, within
        // the caller's deadline.
        return AttemptResult::busy(std::chrono::milliseconds(26));
    }
    FreshAcquire fresh;
    const auto result = read_attempt(answer, ec, fresh, [&](const Grant& grant) {
        // An attempt naming its wait may be answered with that wait's grant
        // from the line, which stays named by it (acquire.lua): the hold's
        // calls name it too (a grant written afresh ignores the name).
        Grant named = grant;
        named.arrival = arrival;
        return record_grant(call_owner.name_storage, slot, named, answer.operation);
    });
    if (place && result.kind == AttemptResult::Kind::busy) place->placed(fresh.arrival, answer.sent);
    if (place && result.kind == AttemptResult::Kind::granted) place->kept();  // the grant took the owner out of the line
    return result;
}

bool LockCore::take_direct_grant(LinePlace& place, const std::shared_ptr<const std::string>& owner, OwnerSlot& slot,
                                 GateTicket& ticket) {
    const auto direct = place.direct_grant();
    if (!direct || direct->place_kept == LockClock::time_point{}) return false;
    const Grant grant{direct->token, 1, direct->place_kept, LockClock::now(), identity->options.waiter_lease,
                      direct->arrival};
    const bool renewed = identity->options.renew;
    // Its renewals bring the holder's label, which the server could not write.
    auto hold = adopt_grant(*service, identity, owner, slot, grant,
                            renewed ? OwnerIds::holder_label() : std::string_view());
    if (!hold) return false;
    client->recorder().hand_off(HandOff::direct);
    contributions_.add(this, hold);
    place.kept();
    // Force-released after the notice was taken and before the hold could
    // be found by the revocation (which the inbox delivers right behind it).
    if (place.taken_grant_revoked()) {
        service->keeper().forget(hold);
        mark_lost(hold, LostReason::revoked, service->io());
        return true;
    }
    // A renewed lease needs no confirmation of its own: the lease keeper
    // renews it a third of the way into the validity it has from its place
    // (LeaseKeeper::track), and its release, hand-off or re-entry names the
    // grant by its arrival (Hold::grant_arrival), which no late copy of one
    // sent before the wait can (release.lua). A lock given back before its
    // first renewal costs the server its release and nothing more.
    if (renewed) return true;
    // A fixed lease is never renewed: its confirmation (confirm_grant.lua)
    // gives it the full lease from its send time, and an operation id newer
    // than any of this owner's. It carries the owner's gate, so nothing of
    // this owner on this lock reaches the server before it, and goes as EVAL
    // unless the server is known to have the script: no NOSCRIPT detour puts
    // it behind the owner's next call.
    auto carried = std::make_shared<GateTicket>(std::move(ticket));
    const auto& keys = identity->keys;
    const auto operation = service->next_operation_id();
    const DecimalText arrival(direct->arrival);
    const auto holder = OwnerIds::holder_label();
    std::string_view k[] = {keys.lock, keys.fence()};
    std::string_view a[] = {*owner, identity->lease_ms, operation, identity->retention_ms, arrival.view(), holder};
    const auto sent = LockClock::now();
    service->unattended().send(
        client, confirm_grant_script(), k, a, retry_window_end(),
        [service = service, hold, sent, carried](std::error_code ec, Reply&& reply) {
            service->confirmed(hold, sent, ec, !ec && is_grant(reply));
        },
        RetriedCall::Send::eval_unless_cached);
    return true;
}

// One acquisition of a Lock (FairLock: fair_), as the engine drives it.
class LockAcquisition final : public AcquisitionProtocol {
public:
    explicit LockAcquisition(LockCore& core) : core_(core) {}

    const MetricsTag& metrics() const override { return core_.identity->metrics; }
    std::error_code usable() const override { return core_.client->usable(); }
    ClosingGate& closing() override { return core_.service->closing(); }
    const ClientOptions& client_options() const override { return core_.client->options(); }
    // One attempt waits up to a command timeout for its answer (and the
    // replicas' acknowledgement, up to its own timeout).
    std::chrono::milliseconds answer_time() const override {
        const auto& ack = core_.identity->options.replica_ack;
        return core_.client->options().command_timeout +
               (ack.replicas > 0 ? ack.timeout : std::chrono::milliseconds::zero());
    }
    HoldRegistry* holds() override { return &core_.service->holds(); }
    const std::string& name() const override { return core_.identity->name; }
    const std::string& owner() override {
        owner_ = core_.calling_owner();
        return owner_->name;
    }
    std::shared_ptr<OwnerSlot> owner_slot() override { return owner_->slot; }
    Reentry reenter(AcquisitionCall& call, const std::shared_ptr<Hold>& hold, std::error_code& ec) override {
        return core_.reenter(hold, *owner_, *call.ticket, call.wait_until(), call.stop, ec);
    }
    // A FairLock has no local queue: every waiting thread stands in the
    // server's line itself (strict arrival order across threads and
    // processes), and no local hand-off skips it.
    QueueRegistry* queues() override { return core_.fair_ ? nullptr : core_.service.get(); }
    // Hand-offs (and the seats they give) go only to waiters of this lock's
    // identity that may take them: not with replica_ack (a hand-off would
    // skip the WAIT).
    const void* seat_tag() const override {
        return core_.fair_ || core_.identity->options.replica_ack.replicas > 0 ? nullptr : core_.identity.get();
    }

    AttemptResult attempt(AcquisitionCall& call, bool in_line, std::optional<LockClock::time_point> wait_until,
                          std::error_code& ec) override {
        if (std::exchange(seated_, false)) {
            // Placed in line by the hand-off that gave the lock to the head
            // before us: that answer was our first attempt's. The lock was
            // handed on with a full lease, which is the longest we sleep
            // before asking (a grant notice, a hand-off or the place's
            // refresh wake us sooner).
            return AttemptResult::busy(core_.identity->options.lease);
        }
        return core_.attempt(*owner_, *call.slot, *call.ticket, wait_until, call.stop, ec,
                             in_line && place_ ? &*place_ : nullptr);
    }

    void begin_waiting(AcquisitionCall& call, std::shared_ptr<NameQueue> queue) override {
        if (call.single_attempt) return;
        if (!queue) {
            // A queue of one (a FairLock's): its only waiter is its head,
            // which is what generation(), bump() and wait_change() work on.
            queue = std::make_shared<NameQueue>();
            (void)queue->enqueue();
        }
        std::shared_ptr<LineSeat> seat;
        if (seat_tag()) seat = std::static_pointer_cast<LineSeat>(queue->take_seat(call.deadline, call.stop));
        signal_ = std::move(queue);
        if (seat) {
            place_.emplace(core_, call.owner(), *seat);
            seated_ = true;
            return;
        }
        place_.emplace(core_, call.owner(), [weak = std::weak_ptr<NameQueue>(signal_)] {
            if (auto queue = weak.lock()) queue->bump();
        });
    }
    void end_waiting() noexcept override { place_.reset(); }

    void hear_revocations(AcquisitionCall& call) override {
        (void)core_.service->wait_for_inbox(core_.name_inbox_, call.wait_until(), call.stop);
    }

    // Grant notices come on the inbox: before the first sleep, make sure it
    // listens (it does at once, but for a client's first wait). If it
    // cannot (the subscriber is down), the waiter sleeps anyway: a refresh
    // of its place finds a grant it was not told of.
    Listening listen(AcquisitionCall& call, LockClock::time_point) override {
        // Not listening before: a grant may have come before it listened.
        const bool was = core_.service->wait_for_inbox(core_.name_inbox_, LockClock::time_point::min(), call.stop);
        if (!was) (void)core_.service->wait_for_inbox(core_.name_inbox_, call.deadline, call.stop);
        return {true, !was};
    }

    // Sleeps until the grant notice, or until the holder's lease must have
    // ended, or until a thread of this process hands the lock over.
    bool sleep(AcquisitionCall& call, const AttemptResult&, std::uint64_t seen, LockClock::time_point wake_at) override {
        const bool acknowledged = core_.identity->options.replica_ack.replicas > 0;
        // A notice for this wait that came before `seen` was read (a seat's
        // place may be granted before its waiter begins to wait): held.
        if (!acknowledged && core_.take_direct_grant(*place_, owner_->name_storage, *call.slot, *call.ticket))
            return true;
        if (core_.fair_ || acknowledged) {
            signal_->wait_change(seen, wake_at, call.stop);  // a hand-off would skip the WAIT
        } else if (auto handed = signal_->sleep_as_head(seen, wake_at, call.deadline, call.stop, call.owner(),
                                                        core_.identity->lease_ms)) {
            if (core_.record_grant(owner_->name_storage, *call.slot, handed->grant, handed->operation)) {
                place_->kept();
                core_.client->recorder().hand_off(HandOff::local);
                return true;
            }
        }
        if (call.past_deadline()) return false;
        // Woken by the grant notice for this wait: held already, no round
        // trip (with replica_ack the next attempt confirms it and WAITs).
        return !acknowledged && core_.take_direct_grant(*place_, owner_->name_storage, *call.slot, *call.ticket);
    }

private:
    LockCore& core_;
    std::shared_ptr<const LockCore::CallOwner> owner_;  // owner(), for the call
    std::optional<LinePlace> place_;
    bool seated_ = false;  // placed by a hand-off: the first attempt is not sent
};

bool LockCore::acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
    LockAcquisition acquisition(*this);
    return acquire_with(acquisition, deadline, std::move(stop), ec);
}

}  // namespace dlock::detail
