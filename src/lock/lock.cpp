#include "dlock/lock.hpp"

#include <algorithm>
#include <array>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "lock_core.hpp"
#include "hold_queries.hpp"
#include "lock_scripts.hpp"
#include "lock_validation.hpp"
#include "replica_ack.hpp"
#include "validity.hpp"

namespace dlock {
namespace detail {
namespace {

// Failures after which the call may or may not have run on the server.
bool outcome_unknown(std::error_code ec) {
    return ec == errc::connection_lost || ec == errc::command_timeout;
}

// Failures worth another try with the same operation id: the above, and a
// connection being re-established.
bool retryable(std::error_code ec) {
    return outcome_unknown(ec) || ec == errc::connect_timeout || ec == errc::not_connected ||
           ec == errc::connection_refused;
}

}  // namespace

LockCore::LockCore(std::shared_ptr<ClientCore> client_, std::string name, LockOptions options)
    : client(std::move(client_)),
      service(LockService::of(*client)),
      identity((validate_lock_request(name, options.lease), validate_replica_ack(options.replica_ack), validate_handoff_slice(options.handoff_slice), std::make_shared<const LockIdentity>(std::move(name), std::move(options)))),
      handle_owner_(identity->options.ownership == Ownership::handle ? service->new_handle_owner() : std::string()) {}

std::string LockCore::current_owner() const {
    return identity->options.ownership == Ownership::handle ? handle_owner_ : service->thread_owner();
}

void LockCore::release_owner(const std::string& owner, bool every_hold, bool wait) noexcept {
    try {
        const auto& keys = identity->keys;
        const auto fence = keys.fence(), channel = keys.channel();
        // A fresh operation id: never taken for a retry of an earlier call.
        const auto operation = service->next_operation_id();
        std::string_view k[] = {keys.lock, fence, channel};
        std::string_view a[] = {owner, identity->lease_ms, operation, every_hold ? "1" : "0"};
        std::error_code ignored;
        if (wait) client->eval(release_script(), k, a, ignored);
        else client->eval_async(release_script(), k, a, [](std::error_code, Reply&&) {});
    } catch (...) {
        // Best effort: the lease ends the lock anyway.
    }
}

Reply LockCore::eval_retrying(const Script& script, std::initializer_list<std::string_view> keys,
                              std::initializer_list<std::string_view> argv, std::error_code& ec) {
    std::optional<LockClock::time_point> give_up;
    for (;;) {
        Reply reply = client->eval(script, {keys.begin(), keys.size()}, {argv.begin(), argv.size()}, ec);
        if (!ec || !retryable(ec)) return reply;
        auto now = LockClock::now();
        if (!give_up) {
            // Nothing was sent (refused, not connected): there is no outcome
            // to learn, so fail now rather than wait out a retry window.
            if (!outcome_unknown(ec)) return reply;
            give_up = now + client->options().connect_timeout + client->options().command_timeout;
        }
        if (now >= *give_up) return reply;
        // The connection is being re-established; give it a moment.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

LockCore::Attempt LockCore::attempt(const std::string& owner, std::error_code& ec) {
    const auto& keys = identity->keys;
    const auto fence = keys.fence();
    const auto operation = service->next_operation_id();
    const auto sent = LockClock::now();
    const auto& ack = identity->options.replica_ack;
    long long acknowledged = 0;
    Reply reply = ack.replicas > 0 ? eval_acknowledged(*client, acquire_script(), std::array<std::string_view, 2>{keys.lock, fence},
                                                       std::array<std::string_view, 3>{owner, identity->lease_ms, operation},
                                                       ack, acknowledged, ec)
                                   : eval_retrying(acquire_script(), {keys.lock, fence}, {owner, identity->lease_ms, operation}, ec);
    if (ec == errc::wrong_type)
        throw Error(ec, "key " + keys.lock + " or " + fence + " holds data that is not a dlock lock");
    if (ec) {
        // It may have been granted after all; don't leave it until its lease ends.
        if (outcome_unknown(ec) && !hold_of(owner)) release_owner(owner, true, false);
        return {Outcome::failed};
    }
    if (!reply.is_array() || reply.elements.size() != 3) {
        ec = errc::protocol_error;
        return {Outcome::failed};
    }
    if (reply.elements[0].integer == 1 && acknowledged < ack.replicas) {
        // Granted, but too few replicas have it: a failover could lose it.
        // Undo this acquisition (only this one, on a re-entry) and say so.
        release_owner(owner, reply.elements[2].integer <= 1, true);
        ec = errc::replicas_not_acknowledged;
        return {Outcome::failed};
    }
    if (reply.elements[0].integer == 1) {
        // Taken from the server: a new slice of hand-offs starts now.
        record_acquired(owner, static_cast<std::uint64_t>(reply.elements[1].integer),
                        static_cast<unsigned>(reply.elements[2].integer), sent, sent);
        return {Outcome::acquired};
    }
    return {Outcome::busy, std::chrono::milliseconds(std::max<long long>(reply.elements[1].integer, 1))};
}

void LockCore::record_acquired(const std::string& owner, std::uint64_t token, unsigned count,
                               LockClock::time_point sent, LockClock::time_point slice_start) {
    const auto lease = identity->options.lease;
    // A fresh acquisition (count 1): any older local hold of this owner is gone.
    std::shared_ptr<Hold> stale;
    auto hold = holds_.obtain(identity, owner, count > 1, stale);
    if (stale) mark_lost(stale, errc::lease_lost);
    bool fresh;
    {
        std::lock_guard lock(hold->mutex);
        fresh = hold->count == 0;
        if (fresh) hold->slice_start = slice_start;
        hold->count = count;
        hold->token = token;
        hold->valid_until = valid_until(sent, lease);
    }
    if (fresh) {
        auto due = identity->options.renew ? sent + renew_interval(lease) : valid_until(sent, lease);
        service->keeper().track(hold, due);
    }
}

bool LockCore::acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
    ec.clear();
    const auto owner = current_owner();
    if (auto hold = hold_of(owner)) {
        // Reentry never queues behind waiters: they wait for us.
        bool held;
        {
            std::lock_guard lock(hold->mutex);
            held = hold->held_locked(LockClock::now());
        }
        if (held) {
            auto result = attempt(owner, ec);
            if (result.outcome == Outcome::acquired || ec) return result.outcome == Outcome::acquired;
            mark_lost(hold, errc::lease_lost);  // the server says someone else has it now
            forget(hold);
        }
    }
    const bool single_attempt = deadline && *deadline <= LockClock::now();
    // Nobody of ours is waiting: try straight away, without the queue.
    if (single_attempt || !service->existing_queue(identity->name)) {
        auto result = attempt(owner, ec);
        if (result.outcome != Outcome::busy || single_attempt) return result.outcome == Outcome::acquired;
    }
    auto queue = service->queue(identity->name);
    const auto ticket = queue->enqueue();
    struct Leave {
        NameQueue& queue;
        std::uint64_t ticket;
        ~Leave() { queue.leave(ticket); }
    } leave{*queue, ticket};
    if (!queue->wait_turn(ticket, deadline, stop)) return false;
    bool subscribed = false;
    for (;;) {
        const auto seen = queue->generation();
        auto result = attempt(owner, ec);
        if (result.outcome != Outcome::busy) return result.outcome == Outcome::acquired;
        auto now = LockClock::now();
        if (stop.stop_requested() || (deadline && now >= *deadline)) return false;
        if (!subscribed) {
            // Subscribe, then try again at once: a release published before
            // the subscription was active would otherwise go unseen.
            auto until = now + client->options().command_timeout;
            if (deadline) until = std::min(until, *deadline);
            subscribed = queue->ensure_subscribed({&client, 1}, 1, identity->keys.channel(), until);
            continue;
        }
        // Sleep until a release, or until the holder's lease must have ended,
        // or until a thread of this process hands the lock over.
        auto wake_at = now + result.pttl + std::chrono::milliseconds(1);
        if (deadline) wake_at = std::min(wake_at, *deadline);
        if (identity->options.replica_ack.replicas > 0) {
            queue->wait_change(seen, wake_at, stop);  // a hand-off would skip the WAIT
            continue;
        }
        if (auto grant = queue->sleep_as_head(seen, wake_at, stop, owner, identity->lease_ms)) {
            record_acquired(owner, grant->token, 1, grant->sent, grant->slice_start);
            return true;
        }
    }
}

bool LockCore::hand_off(const std::shared_ptr<Hold>& hold, const std::string& owner, std::error_code& ec) {
    LockClock::time_point slice_start;
    {
        std::lock_guard lock(hold->mutex);
        slice_start = hold->slice_start;
    }
    // The cheap test first: past the slice, no queue lookup (a shared mutex).
    if (LockClock::now() - slice_start >= identity->options.handoff_slice) return false;
    auto queue = service->existing_queue(identity->name);
    std::string next, next_lease;
    if (!queue || !queue->claim_head(next, next_lease)) return false;
    const auto& keys = identity->keys;
    const auto fence = keys.fence();
    const auto operation = service->next_operation_id();
    const auto sent = LockClock::now();
    Reply reply = eval_retrying(hand_off_script(), {keys.lock, fence}, {owner, next, next_lease, operation}, ec);
    const bool handed = !ec && reply.is_array() && reply.elements.size() == 2 && reply.elements[0].integer == 1;
    if (!handed && !ec) {
        // Not ours to give (lost meanwhile): the ordinary release says so.
        queue->finish_handoff(std::nullopt);
        return false;
    }
    hold->mark_count_zero();
    forget(hold);
    service->keeper().forget(hold);
    if (handed) {
        queue->finish_handoff(
            NameQueue::Grant{static_cast<std::uint64_t>(reply.elements[1].integer), sent, slice_start});
        return true;
    }
    // Unknown outcome: the waiter may own it now without knowing. Free it
    // (and our own hold, in case) before the waiter tries again.
    release_owner(next, true, true);
    release_owner(owner, true, true);
    queue->finish_handoff(std::nullopt);
    return true;
}

void LockCore::release(std::error_code& ec) {
    ec.clear();
    const auto owner = current_owner();
    auto hold = hold_of(owner);
    if (!hold) {
        ec = errc::not_owner;
        return;
    }
    bool last = false;
    {
        std::lock_guard lock(hold->mutex);
        if (hold->lost || hold->count == 0) {
            ec = errc::lease_lost;
        } else {
            last = hold->count == 1;
            // No renewal may follow the final release.
            if (last) hold->released = true;
        }
    }
    if (ec) {
        forget(hold);
        release_all_of(hold);  // in case it is still ours on the server after all
        return;
    }
    if (last && hand_off(hold, owner, ec)) return;
    const auto& keys = identity->keys;
    const auto fence = keys.fence(), channel = keys.channel();
    const auto operation = service->next_operation_id();
    Reply reply = eval_retrying(release_script(), {keys.lock, fence, channel},
                                {owner, identity->lease_ms, operation, "0"}, ec);
    if (ec) {
        if (last) {
            forget(hold);  // not renewed any more; the lease ends it
            service->keeper().forget(hold);
        }
        return;
    }
    if (reply.integer < 0) {
        mark_lost(hold, errc::lease_lost);
        hold->mark_count_zero();
        forget(hold);
        ec = errc::lease_lost;
        return;
    }
    bool released;
    {
        std::lock_guard lock(hold->mutex);
        hold->count = static_cast<unsigned>(reply.integer);
        released = hold->count == 0;
        if (released) hold->released = true;
        else hold->valid_until = valid_until(LockClock::now(), identity->options.lease);
    }
    if (released) {
        forget(hold);
        service->keeper().forget(hold);
        // Local waiters are not woken here: they wake on the same pub/sub
        // message as every other process's, so this process gets no head start.
    }
}

void LockCore::release_all_of(const std::shared_ptr<Hold>& hold) noexcept {
    {
        std::lock_guard lock(hold->mutex);
        hold->released = true;
    }
    release_owner(hold->owner, true, true);
}

}  // namespace detail

Lock::Lock(Client& client, std::string name, LockOptions options)
    : core_(std::make_shared<detail::LockCore>(client.core(), std::move(name), std::move(options))) {}

Lock::Lock(Lock&&) noexcept = default;
Lock& Lock::operator=(Lock&&) noexcept = default;

Lock::~Lock() {
    if (!core_ || core_->client->usable()) return;
    for (auto& hold : core_->all_holds()) {
        bool live;
        {
            std::lock_guard lock(hold->mutex);
            live = hold->count > 0 && !hold->released && !hold->lost;
        }
        if (live) core_->release_all_of(hold);
    }
}

void Lock::lock() {
    std::error_code ec;
    core_->acquire(std::nullopt, {}, ec);
    throw_if(ec, "lock " + name());
}

bool Lock::lock(std::stop_token stop) {
    std::error_code ec;
    bool acquired = core_->acquire(std::nullopt, stop, ec);
    throw_if(ec, "lock " + name());
    return acquired;
}

bool Lock::try_lock() {
    std::error_code ec;
    bool acquired = try_lock(ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

bool Lock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return detail::acquire_noexcept(*core_, deadline, ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    std::error_code ec;
    bool acquired = core_->acquire(deadline, stop, ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

bool Lock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    std::error_code ec;
    bool acquired = core_->acquire(deadline, {}, ec);
    throw_if(ec, "try_lock " + name());
    return acquired;
}

void Lock::unlock() noexcept {
    std::error_code ec;
    unlock(ec);
    detail::report_unlock_error(*core_->identity, ec);
}

void Lock::unlock(std::error_code& ec) noexcept { detail::release_noexcept(*core_, ec); }

bool Lock::is_held() const { return detail::hold_is_held(core_->hold_of(core_->current_owner())); }

unsigned Lock::hold_count() const { return detail::hold_count_of(core_->hold_of(core_->current_owner())); }

std::uint64_t Lock::fencing_token() const {
    return detail::fencing_token_of(core_->hold_of(core_->current_owner()));
}

std::stop_token Lock::lost_token() const { return detail::lost_token_of(core_->hold_of(core_->current_owner())); }

std::chrono::steady_clock::time_point Lock::valid_until() const {
    return detail::valid_until_of(core_->hold_of(core_->current_owner()));
}

const std::string& Lock::name() const noexcept { return core_->identity->name; }

}  // namespace dlock
