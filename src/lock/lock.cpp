#include "dlock/lock.hpp"

#include <algorithm>
#include <array>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_lock.hpp"
#include "hold/async_hold_state.hpp"
#include "hold/hold_queries.hpp"
#include "line_seat.hpp"
#include "lock_core.hpp"
#include "public_surface.hpp"
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
      handle_owner_(identity->options.ownership == Ownership::handle
                        ? std::make_shared<const std::string>(service->new_handle_owner())
                        : nullptr) {}

LockCore::CallOwner::CallOwner(const LockCore& core, std::uint64_t number_, std::shared_ptr<const std::string> name_)
    : service(core.service),
      identity(core.identity),
      number(number_),
      name_storage(std::move(name_)),
      name(*name_storage),
      tombstone_{identity->keys.lock, LockKeys::tombstone_infix, name},
      tombstone(tombstone_.view()),
      slot(service->holds().slot(identity->name, name)) {}

LockCore::CallOwner::~CallOwner() {
    slot.reset();
    service->holds().release_if_idle(identity->name, name);
}

std::shared_ptr<const LockCore::CallOwner> LockCore::calling_owner() const {
    const bool by_handle = identity->options.ownership == Ownership::handle && !OwnerScope::active();
    const std::uint64_t number = by_handle ? 0 : OwnerIds::calling_number();
    {
        std::lock_guard lock(owner_mutex_);
        if (last_owner_ && last_owner_->number == number) return last_owner_;
    }
    auto made = std::make_shared<const CallOwner>(*this, number, by_handle ? handle_owner_ : service->shared_thread_owner());
    std::shared_ptr<const CallOwner> replaced;  // given back outside the lock
    std::lock_guard lock(owner_mutex_);
    replaced = std::exchange(last_owner_, made);
    return made;
}

LockClock::time_point LockCore::retry_window_end() const {
    const auto& options = client->options();
    return LockClock::now() + options.connect_timeout + options.command_timeout;
}

LockCore::Answer LockCore::run(const Script& script, ClientCore::Args keys, ClientCore::Args argv,
                               std::optional<LockClock::time_point> wait_until, std::stop_token stop,
                               GateTicket& ticket, MakeLate make_undo, RetriedCall::Migration migration) {
    return run_retried(*service, client, script, keys, argv, retry_window_end(), wait_until, stop, ticket, make_undo,
                       migration);
}

void LockCore::undo(const std::string& owner, const std::string& operation, std::shared_ptr<GateTicket> ticket,
                    std::string_view placed_waiter) {
    auto call = identity->release(owner, service->next_operation_id(), "1", operation);
    if (!placed_waiter.empty()) call.argv.emplace_back(placed_waiter);  // ARGV[9], after the grant's arrival
    send_unattended(call, std::move(ticket));
}

void LockCore::send_unattended(const HoldCall& call, std::shared_ptr<GateTicket> ticket) {
    const HoldCallViews views(call);
    // Nobody waits for it; the ticket (if any) is left when it settles.
    service->unattended().send(client, *call.script, views.keys, views.argv, retry_window_end(),
                               [ticket](std::error_code, Reply&&) {});
}

bool LockCore::hand_off(const std::shared_ptr<Hold>& hold, OwnerSlot& slot, std::error_code& ec) {
    const auto slice_start = hold->view().slice_start;
    // The cheap test first: past the slice, no queue lookup (a shared mutex).
    if (LockClock::now() - slice_start >= identity->options.handoff_slice) return false;
    auto queue = service->existing_queue(identity->name);
    NameQueue::Claimed claimed;
    if (!queue || !queue->claim_head(claimed, identity.get())) return false;
    const auto& next = claimed.owner;
    const auto head = claimed.ticket;
    // The waiter behind the head takes its place in the server's line in
    // this same call (a seat), rather than with an attempt of its own once
    // the head has left: registered first, so that no grant notice for it
    // is missed.
    std::shared_ptr<LineSeat> seat;
    if (!claimed.successor.empty() && claimed.successor != hold->owner)
        seat = std::make_shared<LineSeat>(shared_from_this(), claimed.successor, queue);
    const auto& keys = identity->keys;
    const auto& fence = keys.fence();
    const auto tombstone = keys.tombstone(hold->owner);
    // The next owner's: an undo of this call that overtakes a late copy of it refuses that copy.
    const auto next_tombstone = keys.tombstone(next);
    const auto operation = service->next_operation_id();
    GateTicket no_gate;  // the releasing caller holds its own; the head waits for this call
    // The releasing caller waits for the hand-off to its end (its unlock
    // waits for an answer in any case); the head waits at most until its
    // own deadline.
    auto answer = run(hand_off_script(), {keys.lock, fence, tombstone, keys.line(), keys.places(), next_tombstone},
                      {hold->owner, next, claimed.lease_ms, operation, identity->retention_ms,
                       hold->grant_arrival.view(), seat ? std::string_view(claimed.successor) : std::string_view(),
                       seat ? std::string_view(identity->waiter_lease_ms) : std::string_view()},
                      std::nullopt, {}, no_gate, {});
    ec = answer.ec;
    const auto handed_answer = ec ? std::nullopt : read_hand_off(answer.reply);
    const std::uint64_t placed_arrival = handed_answer ? handed_answer->placed_arrival : 0;
    const bool handed = handed_answer.has_value();
    const bool seat_sent = seat != nullptr;
    // Unknown outcome: the head may own the lock now without knowing. Give
    // back exactly what the hand-off may have given (only if nothing came
    // after it), and the successor's place it may have taken, which nobody
    // listens for (release.lua ARGV[9]): sent before the successor is
    // settled, so before any place it asks for itself.
    if (ec) undo(next, operation, {}, seat_sent ? std::string_view(claimed.successor) : std::string_view());
    if (!claimed.successor.empty()) {
        // Settled before the head wakes: the successor becomes head when it
        // leaves, and waits for its seat. Not placed, or not known to be (no
        // answer): it asks for its place itself, whose new wait replaces any
        // the hand-off took. Gone meanwhile: the seat's end gives it back.
        if (seat && placed_arrival) seat->placed(placed_arrival, answer.sent);
        else seat.reset();
        (void)queue->seat_successor(claimed.successor_ticket, std::move(seat));
    }
    if (!handed && !ec) {
        // Not ours to give (lost meanwhile): the ordinary release says so.
        queue->finish_handoff(head, std::nullopt);
        return false;
    }
    hold->release_answered(0, answer.sent);
    slot.clear(hold);
    service->keeper().forget(hold);
    if (handed) {
        const Grant grant{handed_answer->token, 1, answer.sent, slice_start};
        // The head gave up waiting (its deadline, a stop): nobody will use
        // the lock it was given, so give exactly that back.
        if (!queue->finish_handoff(head, NameQueue::Handed{grant, operation})) undo(next, operation);
        return true;
    }
    // Unknown outcome (the hand-off undone above): our own hold goes too,
    // before the head tries again.
    GateTicket held_by_caller;
    (void)run(identity->release(hold->owner, service->next_operation_id(), "all", {}, hold->grant_arrival.view()), std::nullopt, {},
              held_by_caller,
              {});
    queue->finish_handoff(head, std::nullopt);
    return true;
}

void LockCore::release_holds(const std::string& owner, OwnerSlot& slot, GateTicket& ticket, unsigned holds,
                             std::error_code& ec, std::optional<LockClock::time_point> wait_until,
                             std::string_view tombstone) {
    auto hold = slot.current();
    if (refuse_release_of_final(slot, hold, holds, ec)) return;
    const auto view = hold->view();
    const bool final_release = holds >= view.count;
    if (final_release) {
        if (!hold->begin_final_release())
            return release_holds(owner, slot, ticket, holds, ec, wait_until, tombstone);
        // A hand-off waits for its answer: only for callers without a deadline.
        if (!fair_ && !wait_until && hand_off(hold, slot, ec)) return;
    }
    // The number of holds, also for the final release: if the server counts
    // more of ours than we do, it keeps them, says so, and its answer wins.
    // unlock() waits for the answer, up to the retry window; a caller with
    // a deadline only until then.
    const auto operation = service->next_operation_id();
    const auto how_many = std::to_string(holds);
    const ReleaseViews release(*identity, owner, operation, how_many, {}, tombstone, hold->grant_arrival.view());
    auto answer = run(release_script(), release.keys, release.argv, wait_until, {}, ticket, {});
    apply_release(*service, slot, hold, holds, final_release, identity->options.lease, answer, ec);
}

void LockCore::release(std::error_code& ec, std::optional<LockClock::time_point> wait_until) {
    ec.clear();
    clear_server_error();
    const auto owner = calling_owner();
    OwnerOperation operation(service->holds(), identity->name, owner->name, owner->slot);
    if (!operation.enter(wait_until, {})) {
        // Another operation of this owner is still settling: nothing was released.
        ec = errc::command_timeout;
        return;
    }
    const auto hold = operation.slot().current();
    if (hold) hold->withdraw(this);
    release_holds(owner->name, operation.slot(), operation.ticket, 1, ec, wait_until, owner->tombstone);
}

void LockCore::release_nowait(std::error_code& ec) {
    ec.clear();
    clear_server_error();
    const auto call_owner = calling_owner();
    const auto& owner = call_owner->name;
    OwnerOperation operation(service->holds(), identity->name, owner, call_owner->slot);
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
    const ReleaseViews release(*identity, owner, release_op, "1", {}, call_owner->tombstone, hold->grant_arrival.view());
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

struct LockAccess : detail::OwnedAccess<detail::LockCore> {
    static constexpr const char* kind = "dlock::Lock";
    // The owner's name as kept for the Lock object (no copy per query).
    std::shared_ptr<detail::Hold> own_hold(const Core& core) const {
        return core.hold_of(core.calling_owner()->name);
    }
};
using LockSurface = detail::PublicSurface<LockAccess>;

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

void Lock::lock() { (void)LockSurface::acquire(core_, {}, std::nullopt, {}, "lock"); }

bool Lock::lock(std::stop_token stop) { return LockSurface::acquire(core_, {}, std::nullopt, std::move(stop), "lock"); }

bool Lock::try_lock() { return acquire_until(std::chrono::steady_clock::time_point::min()); }

bool Lock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return LockSurface::acquire(core_, {}, deadline, ec);
}

bool Lock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return LockSurface::acquire(core_, {}, deadline, std::move(stop), "try_lock");
}

bool Lock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    return LockSurface::acquire(core_, {}, deadline, {}, "try_lock");
}

void Lock::unlock() noexcept { LockSurface::release_reported(core_, {}); }

void Lock::unlock(std::error_code& ec) noexcept { LockSurface::release(core_, {}, ec); }

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
std::shared_ptr<detail::Hold> callers_hold(const std::shared_ptr<detail::LockCore>& core) {
    return LockSurface::own_hold(core, {});
}
}  // namespace

bool Lock::is_held() const { return detail::hold_is_held(callers_hold(core_)); }

unsigned Lock::hold_count() const { return detail::hold_count_of(callers_hold(core_)); }

std::uint64_t Lock::fencing_token() const { return detail::fencing_token_of(callers_hold(core_)); }

std::stop_token Lock::lost_token() const { return detail::lost_token_of(callers_hold(core_)); }

std::optional<LostReason> Lock::lost_reason() const { return detail::loss_of(callers_hold(core_)); }

std::chrono::steady_clock::time_point Lock::valid_until() const { return detail::valid_until_of(callers_hold(core_)); }

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
