#include "hold_steps.hpp"

#include "hold/outage.hpp"

#include "dlock/error.hpp"
#include "hold/retried_call.hpp"
#include "redis/server_error_text.hpp"

namespace dlock::detail {

ScriptAnswer run_retried(LockService& service, const std::shared_ptr<ClientCore>& client, const Script& script, ClientCore::Args keys,
                         ClientCore::Args argv, LockClock::time_point give_up_by,
                         std::optional<LockClock::time_point> wait_until, std::stop_token stop, GateTicket& ticket,
                         MakeLate make_late, RetriedCall::Migration migration) {
    // This thread reads the call's reply itself when it can (connection.hpp).
    DriveScope driving(client->may_drive());
    auto call = service.calls().start(client, script, keys, argv, give_up_by, RetriedCall::Send::evalsha, migration);
    ScriptAnswer answer;
    answer.sent = call->first_sent();
    // The gate travels with the call if the caller walks away: no other
    // operation of this owner may start before its outcome is settled.
    std::shared_ptr<GateTicket> carried;
    answer.known = call->wait_making(wait_until, stop, answer.ec, answer.reply, [&]() -> RetriedCall::Done {
        carried = std::make_shared<GateTicket>();
        return [carried, pending = service.unattended().begin(),
                late = make_late ? make_late() : Late()](std::error_code ec, Reply&& reply) {
            if (late) late(ec, reply);
        };
    });
    if (!answer.known) {
        *carried = std::move(ticket);
        carried->unanswered();
    }
    return answer;
}

std::shared_ptr<Hold> adopt_grant(LockService& service, std::shared_ptr<const LockIdentity> identity,
                                  std::shared_ptr<const std::string> owner, OwnerSlot& slot, const Grant& grant,
                                  std::string_view renewal_label) {
    // Granted, but the request waited so long (a paused server, a slow
    // network) that its lease may be over already: not a hold anyone may trust.
    if (LockClock::now() >= valid_until(grant.sent, grant.lease_or(identity->options.lease))) return nullptr;
    auto hold = std::make_shared<Hold>(std::move(identity), std::move(owner), grant);
    if (auto previous = slot.current()) {
        // A new grant replaces whatever this owner had: a final hold, or a
        // lost one the caller has not unlocked yet.
        service.keeper().forget(previous);
        mark_lost(previous, LostReason::taken_over, service.io());
    }
    slot.set(hold);
    // Before the keeper knows the hold: from then on its I/O thread reads it.
    hold->keeper.renewal_label = renewal_label;
    service.keeper().track(hold, grant.sent, grant.lease);
    return hold;
}

AttemptResult read_attempt(const ScriptAnswer& answer, std::error_code& ec, FreshAcquire& fresh,
                           FunctionRef<bool(const Grant&)> record) {
    if ((ec = answer.ec)) {
        note_server_error(answer.ec, answer.reply);
        return AttemptResult::failed(transient_failure(answer.ec, answer.reply));
    }
    fresh = read_fresh_acquire(answer.reply);
    switch (fresh.kind) {
        case FreshAcquire::Kind::malformed: ec = errc::protocol_error; return AttemptResult::failed();
        // Until the holder's lease must have ended (a holder that died releases nothing).
        case FreshAcquire::Kind::busy: return AttemptResult::busy(fresh.lease_left + std::chrono::milliseconds(1));
        // A resent copy of an attempt whose first copy was answered busy,
        // and the lock is free now: that operation may not grant any more.
        // A new attempt (a new operation id) may.
        case FreshAcquire::Kind::stale_operation: return AttemptResult::busy(std::chrono::milliseconds(2));
        case FreshAcquire::Kind::granted: break;
    }
    if (!record(Grant{fresh.token, fresh.count, answer.sent, answer.sent}))
        return AttemptResult::busy(std::chrono::milliseconds(2));
    return AttemptResult::granted();
}

AcquisitionProtocol::Reentry apply_reentry(LockService& service, const std::shared_ptr<Hold>& hold,
                                           const ScriptAnswer& answer, const std::stop_token& stop,
                                           std::chrono::milliseconds lease, bool& give_back, std::error_code& ec) {
    using Verdict = AcquisitionProtocol::Reentry;
    if (!answer.known) {
        if (!stop.stop_requested()) ec = errc::command_timeout;
        return Verdict::failed;
    }
    if ((ec = answer.ec)) {
        note_server_error(answer.ec, answer.reply);
        return Verdict::failed;
    }
    const auto reentry = read_reentry(answer.reply);
    if (reentry.kind == Reentry::Kind::malformed) {
        ec = errc::protocol_error;
        return Verdict::failed;
    }
    if (reentry.kind == Reentry::Kind::granted) {
        if (hold->reentered(reentry.count, answer.sent, lease)) return Verdict::reentered;
        // Lost locally meanwhile (validity ran out): the server's extra hold goes back.
        give_back = true;
    }
    // The server says it is not ours any more: the hold was lost, and the
    // caller acquires afresh.
    service.keeper().forget(hold);
    mark_lost(hold, LostReason::taken_over, service.io());
    return Verdict::not_held;
}

bool refuse_release_of_final(OwnerSlot& slot, const std::shared_ptr<Hold>& hold, unsigned holds,
                             std::error_code& ec) {
    if (hold && !hold->final()) return false;
    const bool lost = hold && hold->state() == HoldState::lost;
    ec = lost ? hold->lost_reason() : make_error_code(errc::not_owner);
    if (lost && hold->forget_lost_holds(holds) == 0) slot.clear(hold);
    return true;
}

void apply_release(LockService& service, OwnerSlot& slot, const std::shared_ptr<Hold>& hold, unsigned holds,
                   bool final_release, std::chrono::milliseconds lease, const ScriptAnswer& answer,
                   std::error_code& ec) {
    if (!answer.known) {
        // The caller walked away at its deadline: the release goes on
        // without it (and holds the owner's gate until it settles). The
        // caller counts these holds as given back; if the release never
        // applies, the lease ends the lock.
        ec = errc::command_timeout;
        if (final_release) {
            hold->release_unanswered();
            slot.clear(hold);
            service.keeper().forget(hold);
        } else {
            const auto count = hold->view().count;
            hold->recount(count > holds ? count - holds : 1);
        }
        return;
    }
    const auto released = read_release(answer.reply);
    if (answer.ec || released.kind == Release::Kind::malformed) {
        ec = answer.ec ? answer.ec : make_error_code(errc::protocol_error);
        note_server_error(answer.ec, answer.reply);
        if (final_release) {
            // Not renewed any more; the lease ends it.
            hold->release_unanswered();
            slot.clear(hold);
            service.keeper().forget(hold);
        }
        return;
    }
    const unsigned left = released.holds_left;
    if (released.kind == Release::Kind::not_ours) {
        // Not ours on the server (expired, force-released, taken): lost.
        service.keeper().forget(hold);
        mark_lost(hold, LostReason::taken_over, service.io());
        hold->forget_lost_holds(holds);
        ec = hold->lost_reason();  // an earlier loss's own reason, if it was lost already
        return;
    }
    if (final_release) {
        hold->release_answered(left, answer.sent);
    } else if (left == 0 ? hold->begin_final_release() : true) {
        if (left == 0) hold->release_answered(0, answer.sent);
        else hold->partly_released(left, answer.sent, lease);
    }
    if (hold->state() == HoldState::released) {
        slot.clear(hold);
        service.keeper().forget(hold);
        // Local waiters are not woken here: they wake on the same pub/sub
        // message as every other process's, so this process gets no head start.
    } else if (final_release) {
        // The server still counts holds of ours: it stays held, and renewed.
        service.keeper().track(hold, answer.sent);
    }
}

void Contributions::add(const void* object, const std::shared_ptr<Hold>& hold) {
    hold->contribute(object);
    note(hold);
}

void Contributions::note(const std::shared_ptr<Hold>& hold) {
    std::lock_guard lock(mutex_);
    if (first_.owner && *first_.owner == hold->owner) {
        first_.latest = hold;
        return;
    }
    if (auto it = find(hold->owner); it != owners_.end()) {
        it->latest = hold;
    } else if (!first_.owner) {
        first_ = {hold->owner_name, hold};
        return;
    } else {
        owners_.push_back({hold->owner_name, hold});
        if (!index_.empty()) index_.emplace(*owners_.back().owner, owners_.size() - 1);
        else if (owners_.size() >= indexed_from) reindex();
    }
    if (owners_.size() < prune_at_) return;
    // An ended hold has nothing left to release; a later hold of the same
    // owner made here notes the owner again. Amortised: the set is walked
    // each time it doubles.
    std::erase_if(owners_, [](const auto& entry) {
        auto latest = entry.latest.lock();
        return !latest || latest->final();
    });
    prune_at_ = std::max<std::size_t>(64, owners_.size() * 2);
    reindex();
}

void Contributions::hand_over(const void* object, const std::shared_ptr<Hold>& hold) {
    {
        std::lock_guard lock(mutex_);
        if (first_.owner && *first_.owner == hold->owner) {
            if (first_.latest.lock() == hold) first_ = {};
        } else if (auto it = find(hold->owner); it != owners_.end() && it->latest.lock() == hold) {
            remove(it);
        }
    }
    while (hold->contribution_of(object) > 0) hold->withdraw(object);
}

Contributions::Taken Contributions::take() {
    std::lock_guard lock(mutex_);
    index_.clear();  // its keys are the entries' names
    return {std::exchange(first_, {}), std::exchange(owners_, {})};
}

std::vector<Contributions::Entry>::iterator Contributions::find(const std::string& owner) {
    if (!index_.empty()) {
        const auto at = index_.find(owner);
        return at == index_.end() ? owners_.end() : owners_.begin() + static_cast<std::ptrdiff_t>(at->second);
    }
    return std::find_if(owners_.begin(), owners_.end(), [&](const auto& entry) { return *entry.owner == owner; });
}

void Contributions::remove(std::vector<Entry>::iterator it) {
    if (!index_.empty()) index_.erase(*it->owner);
    if (it != owners_.end() - 1) {
        *it = std::move(owners_.back());
        if (!index_.empty()) index_[*it->owner] = static_cast<std::size_t>(it - owners_.begin());
    }
    owners_.pop_back();
}

void Contributions::reindex() {
    index_.clear();
    if (owners_.size() < indexed_from) return;
    index_.reserve(owners_.size());
    for (std::size_t i = 0; i < owners_.size(); ++i) index_.emplace(*owners_[i].owner, i);
}

void release_contributed(const void* object, const Contributions::Taken& owners, HoldRegistry& registry,
                         const std::string& name,
                         const std::function<void(const std::string&, OwnerSlot&, GateTicket&, unsigned)>& release) {
    owners.each([&](const Contributions::Noted& noted) {
        const std::string& owner = *noted.owner;
        OwnerOperation operation(registry, name, owner);
        (void)operation.enter(std::nullopt, {});
        // Only what was made through this object, on the hold as it is
        // now: a hold that ended or was replaced took its share with it.
        const auto hold = operation.slot().current();
        const unsigned holds = hold ? hold->contribution_of(object) : 0;
        if (holds == 0) return;
        for (unsigned i = 0; i < holds; ++i) hold->withdraw(object);
        release(owner, operation.slot(), operation.ticket, holds);
    });
}

}  // namespace dlock::detail
