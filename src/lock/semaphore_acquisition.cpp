// How a Semaphore acquires: one request per waiting thread under a permit
// id of its own (semaphore_acquire.lua), its answer read, and the protocol
// the engine (hold/acquisition_engine.hpp) drives, with a ChannelWatch that
// wakes it and its place in line given back when it gives up.
#include "dlock/error.hpp"
#include "hold/acquisition_engine.hpp"
#include "hold/channel_watch.hpp"
#include "hold/outage.hpp"
#include "hold/retried_call.hpp"
#include "redis/server_error_text.hpp"
#include "semaphore_core.hpp"
#include "script_replies.hpp"
#include "semaphore_replies.hpp"

namespace dlock::detail {

SemaphoreCore::Asked SemaphoreCore::ask(const std::string& permit, std::string_view k_text, std::string_view mode,
                                        std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                                        std::error_code& ec) {
    // The limit this object last set (set_limit), else its option's.
    const auto limit_text = std::to_string(limit_.load(std::memory_order_relaxed));
    std::string_view argv[] = {permit,
                               k_text,
                               identity->lease_ms,
                               limit_text,
                               mode,
                               identity->waiter_lease_ms,
                               identity->retention_ms,
                               identity->set_limit ? "set" : ""};
    // This thread reads the answer itself when it can (the read baton,
    // redis/connection.hpp): no wake-up of the I/O thread.
    DriveScope driving(client->may_drive());
    auto call = RetriedCall::start(client, semaphore_acquire_script(), identity->acquire_keys_args(), argv,
                                   retry_window_end(),
                                   RetriedCall::Send::evalsha, RetriedCall::Migration::while_awaited);
    Asked asked;
    asked.sent = call->first_sent();
    // The handler may outlive the Semaphore object: it keeps this core.
    asked.known = call->wait(wait_until, stop, ec, asked.reply,
                             [self = shared_from_this(), permit](std::error_code, Reply&&) { self->undo(permit); });
    return asked;
}

std::shared_ptr<Hold> SemaphoreCore::track(const std::string& permit, const Grant& grant) {
    if (LockClock::now() >= valid_until(grant.sent, grant.lease_or(identity->options.lease))) {
        // Granted after so long (a paused server, a slow network) that its
        // lease may be over: not a permit anyone may trust. Give it back.
        undo(permit);
        return nullptr;
    }
    auto hold = std::make_shared<Hold>(identity, permit, grant);
    service->keeper().track(hold, grant.sent, grant.lease);
    // Force-released before its hold could be found (the revocation came
    // before the grant's answer or notice was read): lost now.
    service->lose_if_revoked(hold, true);
    return hold;
}

std::shared_ptr<Hold> SemaphoreCore::take_direct(const std::string& permit, unsigned k,
                                                 LockClock::time_point place_kept) {
    auto hold = track(permit, Grant{0, k, place_kept, LockClock::now(), identity->waiter_lease});
    if (!hold) return nullptr;
    client->recorder().hand_off(HandOff::direct);
    // A renewed permit needs no confirmation of its own: the lease keeper
    // renews it a third of the way into the validity it has from its place
    // (track), and a permit released before then costs the server nothing
    // more. The permit is the waiter's alone from the grant on (its id is
    // new, and a release compares nothing else), so nothing waits for that
    // renewal.
    if (identity->options.renew) return hold;
    // A fixed lease is never renewed: its confirmation is the one renewal
    // (semaphore_renew.lua) that gives it the full lease from its send time.
    // Unattended, as EVAL unless the server is known to have the script, so
    // that no NOSCRIPT detour puts it behind the caller's release of the
    // permit.
    const auto renewal = identity->renewal(permit);
    const HoldCallViews views(renewal);
    const auto sent = LockClock::now();
    service->unattended().send(
        client, *renewal.script, views.keys, views.argv, retry_window_end(),
        [service = service, hold, sent](std::error_code ec, Reply&& reply) {
            service->confirmed(hold, sent, ec, !ec && read_renewed(reply));
        },
        RetriedCall::Send::eval_unless_cached);
    return hold;
}

// One acquisition of k permits, as the engine (hold/acquisition_engine.hpp)
// drives it: every waiting thread asks the server itself, under a permit id
// of its own, and a ChannelWatch wakes it.
class SemaphoreAcquisition final : public AcquisitionProtocol {
public:
    SemaphoreAcquisition(SemaphoreCore& core, unsigned k) : core_(core), k_(k), k_text_(std::to_string(k)) {}

    const MetricsTag& metrics() const override { return core_.identity->metrics; }
    std::error_code usable() const override { return core_.client->usable(); }
    ClosingGate& closing() override { return core_.service->closing(); }
    const ClientOptions& client_options() const override { return core_.client->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.client->options().command_timeout; }
    const std::string& name() const override { return core_.identity->name; }
    bool prepare(AcquisitionCall& call, std::error_code&) override {
        if (k_ == 0) throw Error(errc::invalid_argument, "acquire of 0 permits");
        // Over the limit is the server's to say (its limit wins over this
        // object's, and set_limit may have raised it); over any limit is ours.
        if (k_ > max_semaphore_limit)
            throw Error(errc::invalid_argument, "acquire of " + k_text_ + " permits, over any limit (" +
                                                    std::to_string(max_semaphore_limit) + ")");
        permit_ = core_.new_permit_id(k_);
        if (!call.single_attempt) {
            // Another thread of this client waits on this semaphore, so its
            // watch listens already: known to it before the first request
            // leaves, and its generation read before that request (the
            // engine's `seen`), this waiter misses nothing that request's
            // answer does not tell, and need not ask again once it listens.
            if ((watch_ = core_.service->watches().existing(core_.identity->semaphore_keys.channel()))) {
                watch_->expect(permit_);
                heard_since_first_ask_ = watch_->listening();
            }
        }
        return true;
    }

    AttemptResult attempt(AcquisitionCall& call, bool, std::optional<LockClock::time_point> wait_until,
                          std::error_code& ec) override {
        const auto asked = core_.ask(permit_, k_text_, call.single_attempt ? "try" : "wait", wait_until, call.stop, ec);
        if (!asked.known) return AttemptResult::walked_away();
        if (ec) {
            // It may be in line already: the same request again after an
            // outage, or given up when the call ends.
            if (outcome_unknown(ec)) armed_ = true;
            if (ec == errc::wrong_type)
                throw Error(ec, "a key of semaphore " + core_.identity->name + " (" +
                                    core_.identity->semaphore_keys.permits + "*) holds data that is not a dlock semaphore");
            note_server_error(ec, asked.reply);
            return AttemptResult::failed(transient_failure(ec, asked.reply));
        }
        const auto answer = read_semaphore_acquire(asked.reply);
        switch (answer.kind) {
            case SemaphoreAcquire::Kind::malformed:
                armed_ = true;
                ec = errc::protocol_error;
                return AttemptResult::failed();
            case SemaphoreAcquire::Kind::over_limit:
                throw Error(errc::invalid_argument, "acquire of " + k_text_ + " permits, over semaphore " +
                                                        core_.identity->name + "'s limit of " +
                                                        std::to_string(answer.limit));
            case SemaphoreAcquire::Kind::stale:
                // This id was given up or expired without our knowing (an
                // answer lost in transit): ask again under a new one.
                renew_id();
                armed_ = false;
                return AttemptResult::again();
            case SemaphoreAcquire::Kind::granted:
                armed_ = false;
                if ((hold_ = core_.take(permit_, k_, asked.sent))) return AttemptResult::granted();
                renew_id();  // given back: ask again under a new id
                return AttemptResult::again();
            case SemaphoreAcquire::Kind::not_granted: break;
        }
        if (!call.single_attempt) {
            armed_ = true;  // in line on the server from here
            // Its place lasts waiter_lease from this request's send at least:
            // a direct grant is trusted that long (take_direct).
            place_kept_ = std::max(place_kept_, asked.sent);
        }
        // Sleep until called (our permits are free and we are first in line),
        // until the limit changes, until the next lease or place on the
        // server runs out, or until our place is due for its refresh.
        const auto refresh = std::max(core_.identity->waiter_lease / 3, std::chrono::milliseconds(1));
        return AttemptResult::busy(std::min<std::chrono::milliseconds>(answer.wake + std::chrono::milliseconds(1), refresh));
    }

    ~SemaphoreAcquisition() override {
        if (watch_) watch_->forget(permit_);
    }

    std::uint64_t generation() override { return watch_ ? watch_->generation() : 0; }
    void wait_change(std::uint64_t seen, LockClock::time_point wake_at, const std::stop_token& stop) override {
        if (watch_) (void)watch_->wait_change(permit_, seen, wake_at, stop);
        else pause_until(wake_at, stop);
    }
    // Sleeps until called, or granted: a grant notice for this request means
    // the server granted it its permits already (serve_line), and it returns
    // holding them with no further round trip. Past the deadline (or
    // stopped) it does not take them: give_up() gives them back.
    bool sleep(AcquisitionCall& call, const AttemptResult&, std::uint64_t seen, LockClock::time_point wake_at) override {
        if (!watch_) {
            pause_until(wake_at, call.stop);
            return false;
        }
        if (!watch_->wait_change(permit_, seen, wake_at, call.stop) || call.past_deadline()) return false;
        armed_ = false;
        if ((hold_ = core_.take_direct(permit_, k_, place_kept_))) return true;
        renew_id();  // given back (its validity is over already): ask again under a new id
        return false;
    }
    void hear_revocations(AcquisitionCall& call) override {
        (void)core_.service->wait_for_inbox(core_.name_inbox, call.wait_until(), call.stop);
    }
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        const auto& channel = core_.identity->semaphore_keys.channel();
        if (!watch_) watch_ = core_.service->watches().watch(channel, core_.service->id() + ":");
        // Known to the watch before the next request leaves: a grant notice
        // that comes before this waiter first sleeps is kept for it, not
        // dropped (it slept to its next refresh, its permits held for nobody).
        watch_->expect(permit_);
        (void)watch_->ensure_subscribed(*core_.client, channel, until, call.stop);
        // Else a grant or a call may have come before the watch knew this
        // waiter or listened: it asks again at once.
        return {true, !heard_since_first_ask_};
    }
    // Leaving the line (deadline, stop, failure) gives the request up on the server.
    void give_up() noexcept override {
        if (!armed_) return;
        try {
            core_.undo(permit_);
        } catch (...) {
            // Unsent (out of memory): the place ends waiter_lease after its last refresh.
        }
    }

    const std::shared_ptr<Hold>& hold() const { return hold_; }

private:
    void renew_id() {
        if (watch_) watch_->forget(permit_);
        permit_ = core_.new_permit_id(k_);
        place_kept_ = {};
        if (watch_) watch_->expect(permit_);
    }

    SemaphoreCore& core_;
    const unsigned k_;
    const std::string k_text_;
    std::string permit_;
    LockClock::time_point place_kept_{};  // send time of the last request answered "in line" under permit_
    bool armed_ = false;  // the request may stand on the server: give it up when the call ends without it
    // The watch listened, knew this waiter and gave the engine its
    // generation before the first request left (prepare).
    bool heard_since_first_ask_ = false;
    std::shared_ptr<ChannelWatch> watch_;
    std::shared_ptr<Hold> hold_;
};

std::shared_ptr<Hold> SemaphoreCore::acquire(unsigned k, std::optional<LockClock::time_point> deadline,
                                             std::stop_token stop, std::error_code& ec) {
    SemaphoreAcquisition acquisition(*this, k);
    return acquire_with(acquisition, deadline, std::move(stop), ec) ? acquisition.hold() : nullptr;
}

}  // namespace dlock::detail
