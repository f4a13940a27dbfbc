#include "dlock/lock.hpp"

#include <algorithm>
#include <array>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "hold/async_hold_state.hpp"
#include "hold/hold_queries.hpp"
#include "lock_core.hpp"
#include "lock_scripts.hpp"
#include "lock_validation.hpp"
#include "metrics/acquisition_meter.hpp"
#include "redis/server_error_text.hpp"
#include "replica_ack.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace detail {
namespace {

std::shared_ptr<const LockIdentity> make_identity(std::string name, LockOptions options, const ClientCore& client,
                                                  LockKind kind) {
    validate_lock_request(name, options.lease);
    validate_replica_ack(options.replica_ack);
    validate_handoff_slice(options.handoff_slice);
    validate_retention(options.retention);
    validate_waiter_lease(options.waiter_lease);
    // Only a name that passed the checks takes a name label.
    auto metrics = MetricsTag::of(client.metrics(), kind, name);
    return std::make_shared<const LockIdentity>(std::move(name), std::move(options), std::move(metrics));
}

}  // namespace

LockCore::LockCore(std::shared_ptr<ClientCore> client_, std::string name, LockOptions options, bool fair)
    : client(std::move(client_)),
      service(LockService::of(*client)),
      identity(make_identity(std::move(name), std::move(options), *client, fair ? LockKind::fair_lock : LockKind::lock)),
      fair_(fair),
      name_inbox_(service->name_inbox(identity->keys.lock)),
      handle_owner_(identity->options.ownership == Ownership::handle ? service->new_handle_owner() : std::string()) {}

std::string LockCore::current_owner() const {
    return identity->options.ownership == Ownership::handle && !OwnerScope::active() ? handle_owner_
                                                                                   : service->thread_owner();
}

LockClock::time_point LockCore::retry_window_end() const {
    const auto& options = client->options();
    return LockClock::now() + options.connect_timeout + options.command_timeout;
}

LockCore::Answer LockCore::run(const Script& script, ClientCore::Args keys, ClientCore::Args argv,
                               std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                               GateTicket& ticket, std::function<void(std::error_code, const Reply&)> undo,
                               RetriedCall::Migration migration) {
    return run_retried(*service, client, script, keys, argv, retry_window_end(), wait_until, stop, ticket, std::move(undo),
                       migration);
}

void LockCore::undo(const std::string& owner, const std::string& operation, std::shared_ptr<GateTicket> ticket) {
    send_unattended(identity->release(owner, service->next_operation_id(), "1", operation), std::move(ticket));
}

void LockCore::send_unattended(const HoldCall& call, std::shared_ptr<GateTicket> ticket) {
    const HoldCallViews views(call);
    // Nobody waits for it; the ticket (if any) is left when it settles.
    service->unattended().send(client, *call.script, views.keys, views.argv, retry_window_end(),
                               [ticket](std::error_code, Reply&&) {});
}

// A waiter's place in the server's line, while it waits: grant notices and
// the lease keeper's refreshes reach it through LineWaiters. Leaving
// without the lock gives the place back, and with it a grant that came
// too late to be confirmed (line_leave.lua), so that nobody behind waits
// for a lock that nobody will use.
class LinePlace {
public:
    LinePlace(LockCore& core, const std::string& owner, std::function<void()> wake)
        : core_(core), owner_(owner), waiter_(core.service->line_waiters().join(core.identity, owner, std::move(wake))) {}
    ~LinePlace() {
        core_.service->line_waiters().leave(waiter_);
        if (!taken_ || kept_) return;
        try {
            const auto& id = *core_.identity;
            // Named by its arrival, the wait it ends and nothing after it.
            const auto arrival = waiter_->arrival();
            core_.send_unattended({&line_leave_script(),
                                   {id.keys.lock, id.keys.fence(), id.keys.line(), id.keys.places(), id.keys.channel()},
                                   {owner_, id.waiter_lease_ms, id.retention_ms,
                                    arrival ? std::to_string(arrival) : std::string()}});
        } catch (...) {
            // Best effort: the place ends waiter_lease after its last refresh.
        }
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

bool LockCore::record_grant(const std::string& owner, OwnerSlot& slot, const Grant& grant,
                            const std::string& operation) {
    auto hold = adopt_grant(*service, identity, owner, slot, grant);
    if (!hold) {
        undo(owner, operation);  // its lease may be over already: give it back
        return false;
    }
    contributions_.add(this, hold);
    return true;
}

LockCore::Answer LockCore::send_acquire(const std::string& owner, std::string_view mode, GateTicket& ticket,
                                        std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                        bool take_place, bool new_wait) {
    const auto& keys = identity->keys;
    const auto tombstone = keys.tombstone(owner);
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
                            place, identity->waiter_lease_ms, new_wait ? "new" : ""};
    // Granted after the caller gave up, or its outcome never learnt: nobody
    // will use it. The undo also keeps a late copy from applying later. The
    // handler may run after the Lock is gone, so it keeps this core alive.
    auto undo_unused = [self = shared_from_this(), owner, operation](std::error_code ec, const Reply& reply) {
        if (outcome_unknown(ec) || (!ec && is_grant(reply))) self->undo(owner, operation);
    };
    const auto& ack = identity->options.replica_ack;
    if (ack.replicas == 0) {
        auto answer =
            run(acquire_script(), k, a, wait_until, stop, ticket, undo_unused, RetriedCall::Migration::while_awaited);
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
                                     [carried, undo_unused](AcknowledgedAnswer&& late) {
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

bool LockCore::reenter(const std::shared_ptr<Hold>& hold, const std::string& owner, GateTicket& ticket,
                       std::optional<LockClock::time_point> wait_until, std::stop_token stop, std::error_code& ec,
                       bool& lost) {
    auto answer = send_acquire(owner, "reenter", ticket, wait_until, stop);
    if (!answer.known) {
        if (!stop.stop_requested()) ec = errc::command_timeout;
        return false;
    }
    if ((ec = answer.ec)) {
        note_server_error(answer.ec, answer.reply);
        return false;
    }
    bool give_back = false;
    if (apply_reentry(*service, hold, read_reentry(answer.reply), answer.sent, identity->options.lease, lost,
                      give_back, ec)) {
        contributions_.add(this, hold);
        return true;
    }
    if (give_back) undo(owner, answer.operation);
    return false;
}

LockCore::Attempt LockCore::attempt(const std::string& owner, OwnerSlot& slot, GateTicket& ticket,
                                    std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                    std::error_code& ec, bool take_place, bool new_wait) {
    auto answer = send_acquire(owner, "fresh", ticket, wait_until, stop, take_place, new_wait);
    if (!answer.known) return {Outcome::walked_away};
    if (answer.ec == errc::wrong_type) {
        const auto& keys = identity->keys;
        throw Error(answer.ec, "key " + keys.lock + ", " + keys.fence() + ", " + keys.tombstone(owner) + ", " +
                                   keys.line() + " or " + keys.places() + " holds data that is not a dlock lock");
    }
    if (answer.ec == errc::slot_migrating ||
        (answer.ec && answer.reply.is_error() && answer.reply.text.rfind("ASK ", 0) == 0)) {
        // A cluster migrating the lock's slot did not run it (TRYAGAIN; or
        // ASK where the call could not follow it: a replica_ack acquisition's
        // own connection). Like a busy answer: tried again shortly, within
        // the caller's deadline.
        return {Outcome::busy, std::chrono::milliseconds(25)};
    }
    if ((ec = answer.ec)) {
        note_server_error(answer.ec, answer.reply);
        Attempt failed{Outcome::failed};
        failed.transient = transient_failure(answer.ec, answer.reply);
        return failed;
    }
    const auto fresh = read_fresh_acquire(answer.reply);
    switch (fresh.kind) {
        case FreshAcquire::Kind::malformed: ec = errc::protocol_error; return {Outcome::failed};
        case FreshAcquire::Kind::busy: return {Outcome::busy, fresh.lease_left, fresh.arrival, answer.sent};
        // A resent copy of an attempt whose first copy was answered busy,
        // and the lock is free now: that operation may not grant any more.
        // A new attempt (a new operation id) may.
        case FreshAcquire::Kind::stale_operation: return {Outcome::busy, std::chrono::milliseconds(1)};
        case FreshAcquire::Kind::granted: break;
    }
    if (!record_grant(owner, slot, Grant{fresh.token, fresh.count, answer.sent, answer.sent}, answer.operation))
        return {Outcome::busy, std::chrono::milliseconds(1)};
    return {Outcome::acquired};
}

bool LockCore::acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
    const bool single_attempt = deadline && *deadline <= LockClock::now();
    AcquisitionMeter meter(identity->metrics, single_attempt, stop);
    return meter.finish(acquire_metered(deadline, single_attempt, stop, ec, meter), ec);
}

bool LockCore::acquire_metered(std::optional<LockClock::time_point> deadline, bool single_attempt,
                               std::stop_token stop, std::error_code& ec, AcquisitionMeter& meter) {
    ec.clear();
    clear_server_error();
    if ((ec = client->usable())) return false;
    const auto owner = current_owner();
    OwnerOperation operation(service->holds(), identity->name, owner);
    auto* slot = &operation.slot();
    // One attempt still waits for its answer, up to a command timeout (and
    // the replicas' acknowledgement, up to its own timeout).
    const auto wait_until = [&]() -> std::optional<LockClock::time_point> {
        if (!single_attempt) return deadline;
        const auto& ack = identity->options.replica_ack;
        return LockClock::now() + client->options().command_timeout +
               (ack.replicas > 0 ? ack.timeout : std::chrono::milliseconds::zero());
    };
    if (!operation.enter(single_attempt ? std::optional(wait_until()) : deadline, stop, ec)) return false;
    auto& ticket_of_call = operation.ticket;

    if (auto hold = slot->current(); hold && hold->trusted(LockClock::now())) {
        // Re-entry never queues behind waiters: they wait for us.
        bool lost = false;
        if (reenter(hold, owner, ticket_of_call, wait_until(), stop, ec, lost)) return true;
        if (!lost) return false;
    }

    // A caller that waits rides through a failover (outage.hpp).
    Outage outage(deadline, client->options());
    if (fair_) {
        // Every waiting thread stands in the server's line itself: strict
        // arrival order across threads and processes.
        if (single_attempt) return acquired(attempt(owner, *slot, ticket_of_call, wait_until(), stop, ec), false, stop, ec);
        // A queue of one: its only waiter is its head, which is what
        // generation(), bump() and wait_change() work on.
        auto signal = std::make_shared<NameQueue>();
        (void)signal->enqueue();
        return wait_in_line(owner, *slot, ticket_of_call, deadline, stop, ec, signal, false, false, meter, outage);
    }
    bool answered = false;
    // Nobody of ours is waiting: try straight away, without the queue.
    if (single_attempt || !service->existing_queue(identity->name)) {
        auto result = attempt(owner, *slot, ticket_of_call, wait_until(), stop, ec);
        if (!single_attempt && result.outcome == Outcome::failed && outage.ride(ec, result.transient)) {
            // In line like a busy answer's, after a pause.
            pause_until(outage.retry_at(), stop);
            if (outage.gave_up(stop, ec)) return false;
        } else {
            if (result.outcome != Outcome::busy || single_attempt) return acquired(result, false, stop, ec);
            answered = true;
        }
    }
    meter.waiting();
    auto queue = service->queue(identity->name);
    const auto ticket = queue->enqueue();
    struct Leave {
        NameQueue& queue;
        std::uint64_t ticket;
        ~Leave() { queue.leave(ticket); }
    } leave{*queue, ticket};
    if (!queue->wait_turn(ticket, deadline, stop)) return false;
    // Only the first of this process's waiters stands in the server's line.
    return wait_in_line(owner, *slot, ticket_of_call, deadline, stop, ec, queue, true, answered, meter, outage);
}

bool LockCore::wait_in_line(const std::string& owner, OwnerSlot& slot, GateTicket& ticket,
                            std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec,
                            const std::shared_ptr<NameQueue>& signal, bool local_queue, bool answered, AcquisitionMeter& meter,
                            Outage& outage) {
    LinePlace place(*this, owner, [weak = std::weak_ptr<NameQueue>(signal)] {
        if (auto queue = weak.lock()) queue->bump();
    });
    bool inbox_checked = false;
    const bool acknowledged = identity->options.replica_ack.replicas > 0;
    for (;;) {
        const auto seen = signal->generation();
        place.taken();
        // Until the server has named this wait, its attempt starts a new one.
        auto result = attempt(owner, slot, ticket, deadline, stop, ec, true, place.arrival() == 0);
        if (result.outcome == Outcome::acquired) place.kept();
        if (result.outcome == Outcome::failed && outage.ride(ec, result.transient)) {
            // The server is away (a failover, a restart): try again after a
            // pause, or sooner when the client sees a new master.
            answered = false;
            signal->wait_change(seen, outage.retry_at(), stop);
            if (outage.gave_up(stop, ec)) return false;
            continue;
        }
        if (result.outcome != Outcome::busy) return acquired(result, answered, stop, ec, &outage);
        outage.answered();
        answered = true;
        meter.waiting();  // a fair lock's first attempt is made here, in line
        place.placed(result.arrival, result.sent);
        if (stop.stop_requested() || (deadline && LockClock::now() >= *deadline)) return false;
        if (!inbox_checked) {
            // Grant notices come on the inbox: before the first sleep, make
            // sure it listens (it does at once, but for a client's first
            // wait). If it cannot (the subscriber is down), the waiter sleeps
            // anyway: a refresh of its place finds a grant it was not told of.
            inbox_checked = true;
            if (!wait_for_inbox(deadline, stop)) continue;  // a grant may have come before it listened
        }
        const auto now = LockClock::now();
        if (stop.stop_requested() || (deadline && now >= *deadline)) return false;
        // Closed meanwhile: the close wakes the waiters in line, but not one
        // that took its place after that (it is marked closed first).
        if ((ec = client->usable())) return false;
        // Sleep until the grant notice, or until the holder's lease must
        // have ended (a holder that died releases nothing), or until a
        // thread of this process hands the lock over.
        auto wake_at = now + result.pttl + std::chrono::milliseconds(1);
        if (deadline) wake_at = std::min(wake_at, *deadline);
        if (!local_queue || acknowledged) {
            signal->wait_change(seen, wake_at, stop);  // a hand-off would skip the WAIT
        } else if (auto handed = signal->sleep_as_head(seen, wake_at, deadline, stop, owner, identity->lease_ms)) {
            if (record_grant(owner, slot, handed->grant, handed->operation)) {
                place.kept();
                client->recorder().hand_off(HandOff::local);
                return true;
            }
        }
        if (stop.stop_requested() || (deadline && LockClock::now() >= *deadline)) return false;
        // Woken by the grant notice for this wait: held already, no round
        // trip (with replica_ack the next attempt confirms it and WAITs).
        if (!acknowledged && take_direct_grant(place, owner, slot, ticket)) return true;
    }
}

bool LockCore::take_direct_grant(LinePlace& place, const std::string& owner, OwnerSlot& slot, GateTicket& ticket) {
    const auto direct = place.direct_grant();
    if (!direct || direct->place_kept == LockClock::time_point{}) return false;
    const Grant grant{direct->token, 1, direct->place_kept, LockClock::now(), identity->options.waiter_lease};
    auto hold = adopt_grant(*service, identity, owner, slot, grant);
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
    // The confirmation (confirm_grant.lua): the full lease from its send
    // time, and an operation id newer than any of this owner's, which late
    // copies of its older requests cannot pass. It carries the owner's gate,
    // so nothing of this owner on this lock reaches the server before it
    // (release.lua refuses to release a grant that is not confirmed), and
    // goes as EVAL unless the server is known to have the script: no
    // NOSCRIPT detour puts it behind the owner's next call.
    auto carried = std::make_shared<GateTicket>(std::move(ticket));
    const auto& keys = identity->keys;
    const auto operation = service->next_operation_id();
    const auto arrival = std::to_string(direct->arrival);
    const auto holder = OwnerIds::holder_label();
    std::string_view k[] = {keys.lock, keys.fence()};
    std::string_view a[] = {owner, identity->lease_ms, operation, identity->retention_ms, arrival, holder};
    const auto sent = LockClock::now();
    service->unattended().send(
        client, confirm_grant_script(), k, a, retry_window_end(),
        [service = service, hold, sent, carried](std::error_code ec, Reply&& reply) {
            service->confirmed(hold, sent, ec, reply);
        },
        RetriedCall::Send::eval_unless_cached);
    return true;
}

bool LockCore::acquired(const Attempt& attempt, bool answered, const std::stop_token& stop, std::error_code& ec,
                        const Outage* outage) {
    // Walked away at the deadline before any attempt was answered (or
    // since an outage began): the server never said busy, so the caller
    // learns it timed out, or what kept it from the server.
    if (attempt.outcome == Outcome::walked_away && !answered && !stop.stop_requested())
        ec = outage ? outage->unanswered_error() : make_error_code(errc::command_timeout);
    return attempt.outcome == Outcome::acquired;
}

bool LockCore::wait_for_inbox(std::optional<LockClock::time_point> deadline, std::stop_token stop) {
    auto active = [&](LockClock::time_point until) {
        return name_inbox_ ? name_inbox_.wait_active(until) : service->inbox_active(until);
    };
    if (active(LockClock::time_point::min())) return true;
    auto until = LockClock::now() + client->options().command_timeout;
    if (deadline) until = std::min(until, *deadline);
    // In slices, so that a stop request is honoured within one.
    constexpr std::chrono::milliseconds slice{10};
    while (!stop.stop_requested()) {
        const auto now = LockClock::now();
        if (now >= until || active(std::min(until, now + slice))) return false;
    }
    return false;
}

bool LockCore::hand_off(const std::shared_ptr<Hold>& hold, OwnerSlot& slot, std::error_code& ec) {
    const auto slice_start = hold->view().slice_start;
    // The cheap test first: past the slice, no queue lookup (a shared mutex).
    if (LockClock::now() - slice_start >= identity->options.handoff_slice) return false;
    auto queue = service->existing_queue(identity->name);
    std::string next, next_lease;
    std::uint64_t head = 0;
    if (!queue || !queue->claim_head(next, next_lease, head)) return false;
    const auto& keys = identity->keys;
    const auto& fence = keys.fence();
    const auto tombstone = keys.tombstone(hold->owner);
    const auto operation = service->next_operation_id();
    GateTicket no_gate;  // the releasing caller holds its own; the head waits for this call
    // The releasing caller waits for the hand-off to its end (its unlock
    // waits for an answer in any case); the head waits at most until its
    // own deadline.
    auto answer = run(hand_off_script(), {keys.lock, fence, tombstone, keys.line(), keys.places()},
                      {hold->owner, next, next_lease, operation, identity->retention_ms}, std::nullopt, {}, no_gate, {});
    ec = answer.ec;
    const auto handed_token = ec ? std::nullopt : read_hand_off(answer.reply);
    const bool handed = handed_token.has_value();
    if (!handed && !ec) {
        // Not ours to give (lost meanwhile): the ordinary release says so.
        queue->finish_handoff(head, std::nullopt);
        return false;
    }
    hold->release_answered(0, answer.sent);
    slot.clear(hold);
    service->keeper().forget(hold);
    if (handed) {
        const Grant grant{*handed_token, 1, answer.sent, slice_start};
        // The head gave up waiting (its deadline, a stop): nobody will use
        // the lock it was given, so give exactly that back.
        if (!queue->finish_handoff(head, NameQueue::Handed{grant, operation})) undo(next, operation);
        return true;
    }
    // Unknown outcome: the waiter may own it now without knowing. Give back
    // exactly what the hand-off may have given (only if nothing came after
    // it), then our own hold, before the waiter tries again.
    undo(next, operation);
    GateTicket held_by_caller;
    (void)run(identity->release(hold->owner, service->next_operation_id(), "all"), std::nullopt, {}, held_by_caller,
              {});
    queue->finish_handoff(head, std::nullopt);
    return true;
}

void LockCore::release_holds(const std::string& owner, OwnerSlot& slot, GateTicket& ticket, unsigned holds,
                             std::error_code& ec, std::optional<LockClock::time_point> wait_until) {
    auto hold = slot.current();
    if (refuse_release_of_final(slot, hold, holds, ec)) return;
    const auto view = hold->view();
    const bool final_release = holds >= view.count;
    if (final_release) {
        if (!hold->begin_final_release()) return release_holds(owner, slot, ticket, holds, ec, wait_until);
        // A hand-off waits for its answer: only for callers without a deadline.
        if (!fair_ && !wait_until && hand_off(hold, slot, ec)) return;
    }
    // The number of holds, also for the final release: if the server counts
    // more of ours than we do, it keeps them, says so, and its answer wins.
    // unlock() waits for the answer, up to the retry window; a caller with
    // a deadline only until then.
    const auto operation = service->next_operation_id();
    const auto how_many = std::to_string(holds);
    const ReleaseViews release(*identity, owner, operation, how_many);
    auto answer = run(release_script(), release.keys, release.argv, wait_until, {}, ticket, {});
    apply_release(*service, slot, hold, holds, final_release, identity->options.lease, answer, ec);
}

void LockCore::release(std::error_code& ec, std::optional<LockClock::time_point> wait_until) {
    ec.clear();
    clear_server_error();
    const auto owner = current_owner();
    OwnerOperation operation(service->holds(), identity->name, owner);
    if (!operation.enter(wait_until, {})) {
        // Another operation of this owner is still settling: nothing was released.
        ec = errc::command_timeout;
        return;
    }
    const auto hold = operation.slot().current();
    if (hold) hold->withdraw(this);
    release_holds(owner, operation.slot(), operation.ticket, 1, ec, wait_until);
}

void LockCore::release_nowait(std::error_code& ec) {
    ec.clear();
    clear_server_error();
    const auto owner = current_owner();
    OwnerOperation operation(service->holds(), identity->name, owner);
    if (!operation.enter(std::nullopt, {})) {
        ec = errc::command_timeout;
        return;
    }
    auto& slot = operation.slot();
    const auto hold = slot.current();
    if (hold) hold->withdraw(this);
    if (refuse_release_of_final(slot, hold, 1, ec)) return;
    if (hold->view().count > 1 || !hold->begin_final_release())
        return release_holds(owner, slot, operation.ticket, 1, ec);
    // Released here from now on: not renewed, not counted, not held. The
    // owner's next request is sent after this one on the same connection,
    // so the server runs the release first; a resent copy that arrives
    // after the owner's next acquisition is an older operation and is
    // ignored (release.lua). If it never applies, the lease ends the lock.
    hold->release_unanswered();
    slot.clear(hold);
    service->keeper().forget(hold);
    const auto release_op = service->next_operation_id();
    const ReleaseViews release(*identity, owner, release_op, "1");
    service->unattended().send(client, release_script(), release.keys, release.argv, retry_window_end(),
                               [identity = identity](std::error_code outcome, Reply&& reply) {
                                   if (!outcome) {
                                       const auto released = read_release(reply);
                                       if (released.kind == Release::Kind::not_ours)
                                           outcome = make_error_code(LostReason::taken_over);
                                       else if (released.kind == Release::Kind::malformed)
                                           outcome = errc::protocol_error;
                                   }
                                   report_unlock_error(*identity, outcome);
                               },
                               // Never the NOSCRIPT detour: its EVAL would leave after the owner's next request.
                               RetriedCall::Send::eval_unless_cached);
}

void LockCore::release_outstanding() noexcept {
    try {
        if (client->usable()) return;  // a closed client released everything already
        release_contributed(this, contributions_.take(), service->holds(), identity->name,
                            [this](const std::string& owner, OwnerSlot& slot, GateTicket& ticket, unsigned holds) {
                                std::error_code ignored;
                                release_holds(owner, slot, ticket, holds, ignored);
                            });
    } catch (...) {
        // Best effort: the lease ends what is left.
    }
}

}  // namespace detail

namespace {

detail::LockCore& checked(const std::shared_ptr<detail::LockCore>& core) {
    if (!core) throw Error(errc::invalid_argument, "use of a moved-from dlock::Lock");
    return *core;
}

}  // namespace

Lock::Lock(Client& client, std::string name, LockOptions options)
    : core_(std::make_shared<detail::LockCore>(client.core(), std::move(name), std::move(options))) {}

Lock::Lock(Client& client, std::string name, LockOptions options, FairTag)
    : core_(std::make_shared<detail::LockCore>(client.core(), std::move(name), std::move(options), true)) {}

FairLock::FairLock(Client& client, std::string name, LockOptions options)
    : Lock(client, std::move(name), std::move(options), FairTag{}) {}

Lock::Lock(Lock&&) noexcept = default;

Lock& Lock::operator=(Lock&& other) noexcept {
    if (this != &other) {
        // The holds made through the object being replaced would otherwise
        // be neither released nor unlockable through it.
        if (core_) core_->release_outstanding();
        core_ = std::move(other.core_);
    }
    return *this;
}

Lock::~Lock() {
    if (core_) core_->release_outstanding();
}

void Lock::lock() {
    std::error_code ec;
    checked(core_).acquire(std::nullopt, {}, ec);
    throw_if(ec, "lock " + name());
}

bool Lock::lock(std::stop_token stop) {
    std::error_code ec;
    bool acquired = checked(core_).acquire(std::nullopt, stop, ec);
    throw_if(ec, "lock " + name());
    return acquired;
}

bool Lock::try_lock() {
    std::error_code ec;
    bool acquired = try_lock(ec);
    throw_if(ec, "try_lock " + (core_ ? name() : std::string("(moved-from)")));
    return acquired;
}

bool Lock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    if (!core_) {
        ec = errc::invalid_argument;
        return false;
    }
    return detail::acquire_noexcept(*core_, deadline, ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    std::error_code ec;
    bool acquired = checked(core_).acquire(deadline, stop, ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

bool Lock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    std::error_code ec;
    bool acquired = checked(core_).acquire(deadline, {}, ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

void Lock::unlock() noexcept {
    std::error_code ec;
    unlock(ec);
    if (core_) detail::report_unlock_error(*core_->identity, ec);
}

void Lock::unlock(std::error_code& ec) noexcept {
    if (!core_) {
        ec = errc::invalid_argument;
        return;
    }
    detail::release_noexcept(*core_, ec);
}

void Lock::unlock_nowait() noexcept {
    if (!core_) return;
    std::error_code ec;
    try {
        core_->release_nowait(ec);
    } catch (...) {
        ec = std::make_error_code(std::errc::not_enough_memory);
    }
    detail::report_unlock_error(*core_->identity, ec);
}

namespace {
std::shared_ptr<detail::Hold> own_hold(const std::shared_ptr<detail::LockCore>& core) {
    return core ? core->hold_of(core->current_owner()) : nullptr;
}
}  // namespace

bool Lock::is_held() const { return detail::hold_is_held(own_hold(core_)); }

unsigned Lock::hold_count() const { return detail::hold_count_of(own_hold(core_)); }

std::uint64_t Lock::fencing_token() const { return detail::fencing_token_of(own_hold(core_)); }

std::stop_token Lock::lost_token() const { return detail::lost_token_of(own_hold(core_)); }

std::optional<LostReason> Lock::lost_reason() const { return detail::loss_of(own_hold(core_)); }

std::chrono::steady_clock::time_point Lock::valid_until() const { return detail::valid_until_of(own_hold(core_)); }

const std::string& Lock::name() const noexcept {
    static const std::string moved_from;
    return core_ ? core_->identity->name : moved_from;
}

}  // namespace dlock

namespace dlock::async_entry {

using namespace dlock::detail;

void start_acquire(Lock& lock, std::optional<std::chrono::steady_clock::time_point> deadline, std::stop_source stop,
                   AcquireCompletion done) {
    auto core = AsyncAccess::core(lock);
    if (!core) return done(errc::invalid_argument, AsyncHold());
    start_owned(core, core->client, deadline, std::move(stop), std::move(done));
}

}  // namespace dlock::async_entry
