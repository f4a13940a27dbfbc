#include "dlock/redlock.hpp"

#include <algorithm>
#include <condition_variable>

#include "hold/async_hold_state.hpp"
#include "runtime/condition.hpp"

#include "hold/acquisition_engine.hpp"
#include "hold/hold_queries.hpp"
#include "hold/outage.hpp"
#include "lock_scripts.hpp"
#include "lock_validation.hpp"
#include "public_surface.hpp"
#include "quorum.hpp"
#include "redlock_core.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace detail {
namespace {

LockOptions as_lock_options(RedlockOptions& options) {
    return LockOptions{.lease = options.lease,
                       .renew = options.renew,
                       .ownership = options.ownership,
                       .on_lost = std::move(options.on_lost),
                       .on_unlock_error = std::move(options.on_unlock_error),
                       .retention = options.retention};
}

std::chrono::milliseconds checked_node_timeout(const std::string& name, const RedlockOptions& options) {
    validate_lock_request(name, options.lease);
    validate_retention(options.retention);
    auto timeout = options.node_timeout.count() == 0 ? default_node_timeout(options.lease) : options.node_timeout;
    if (timeout <= std::chrono::milliseconds::zero()) throw Error(errc::invalid_argument, "node_timeout must be positive");
    if (timeout >= options.lease)
        throw Error(errc::invalid_argument, "node_timeout (" + std::to_string(timeout.count()) +
                                                " ms) must be shorter than the lease");
    if (options.retry_delay < std::chrono::milliseconds(1) || options.retry_delay > std::chrono::minutes(1))
        throw Error(errc::invalid_argument, "retry_delay must be 1 ms .. 1 min");
    return timeout;
}

}  // namespace

RedlockCore::RedlockCore(std::shared_ptr<MastersCore> masters_, std::string name, RedlockOptions options)
    : masters(std::move(masters_)),
      identity([&] {
          auto node_timeout = checked_node_timeout(name, options);
          auto lock_options = as_lock_options(options);
          // Only a name that passed the checks takes a name label.
          auto metrics = MetricsTag::of(masters->metrics(), LockKind::redlock, name);
          return std::make_shared<const RedlockIdentity>(std::move(name), std::move(lock_options), node_timeout,
                                                         std::move(metrics));
      }()),
      retry_delay(options.retry_delay),
      object_owner_(masters->runtime.new_handle_owner()) {}

std::string RedlockCore::current_owner() const {
    return identity->options.ownership == Ownership::handle && !OwnerScope::active() ? object_owner_
                                                                                   : OwnerIds::with_thread(object_owner_);
}

std::vector<MasterOutcome> RedlockCore::last_outcomes() const {
    std::lock_guard lock(outcomes_mutex_);
    return last_outcomes_;
}

void RedlockCore::release_final(const std::shared_ptr<Hold>& hold, OwnerSlot& slot, std::error_code& ec) {
    const auto n = masters->size();
    // release.lua answers >= 0 (released) or -1 (not ours there).
    struct Tally {
        std::size_t released = 0, not_ours = 0, answered = 0;
    };
    auto tally = [](const std::vector<Ballot>& ballots) {
        Tally t;
        for (const auto& ballot : ballots) {
            if (!ballot.answered) continue;
            ++t.answered;
            if (ballot.error) continue;
            const auto answer = read_release(ballot.reply);
            if (answer.kind == Release::Kind::released) ++t.released;
            else if (answer.kind == Release::Kind::not_ours) ++t.not_ours;
        }
        return t;
    };
    const auto sent = LockClock::now();
    DriveScope driving(masters->may_drive(), DriveScope::Reach::fan_out);  // fan_out.hpp
    auto fan = masters->send_release(*identity, hold->owner);
    auto ballots = fan->wait([&](const auto& so_far) {
        auto t = tally(so_far);
        return won(n, t.released) || cannot_win(n, t.answered - t.released);
    });
    if (!fan->complete()) masters->finish_before_close(fan);
    auto result = tally(ballots);
    slot.clear(hold);
    if (won(n, result.released)) return hold->release_answered(0, sent);
    if (won(n, result.not_ours)) {
        mark_lost(hold, LostReason::taken_over, masters->keeper().io());
        ec = hold->lost_reason();
        return;
    }
    hold->release_unanswered();
    ec = errc::no_quorum;
}

void RedlockCore::release(std::error_code& ec) {
    ec.clear();
    const auto owner = current_owner();
    OwnerOperation operation(masters->runtime.holds(), identity->name, owner);
    (void)operation.enter(std::nullopt, {});
    auto* slot = &operation.slot();
    {
        auto hold = slot->current();
        if (!hold) {
            ec = errc::not_owner;
        } else if (hold->final()) {
            ec = hold->state() == HoldState::lost ? hold->lost_reason() : make_error_code(errc::lease_lost);
            if (hold->forget_lost_holds(1) == 0) slot->clear(hold);
            release_everywhere(owner, false);  // in case some master still has it
        } else if (auto view = hold->view(); view.count > 1) {
            hold->recount(view.count - 1);
        } else if (hold->begin_final_release()) {
            masters->keeper().forget(hold);  // no renewal may follow the final release
            release_final(hold, *slot, ec);
        } else {
            ec = hold->state() == HoldState::lost ? hold->lost_reason() : make_error_code(errc::lease_lost);
        }
    }
}

void RedlockCore::release_outstanding() noexcept {
    try {
        if (masters->usable()) return;
        // This object's owners, whichever threads locked it: the owner names
        // the object, so no other object's holds are among them.
        owners_.take().each([this](const Contributions::Noted& noted) {
            const std::string& owner = *noted.owner;
            auto hold = hold_of(owner);
            if (!hold || hold->final()) return;
            OwnerOperation operation(masters->runtime.holds(), identity->name, owner);
            (void)operation.enter(std::nullopt, {});
            if (!hold->begin_final_release()) return;
            masters->keeper().forget(hold);
            operation.slot().clear(hold);
            release_everywhere(owner, true);
            hold->release_answered(0, LockClock::now());
        });
    } catch (...) {
        // Best effort: the lease ends what is left.
    }
}

void RedlockCore::release_everywhere(const std::string& owner, bool wait) {
    DriveScope driving(wait && masters->may_drive(), DriveScope::Reach::fan_out);  // fan_out.hpp
    auto fan = masters->send_release(*identity, owner);
    if (wait) fan->wait([](const auto&) { return false; });
    else masters->finish_before_close(std::move(fan));
}

}  // namespace detail

QuorumError::QuorumError(const std::string& what, std::vector<MasterOutcome> outcomes)
    : Error(errc::no_quorum, what), outcomes_(std::move(outcomes)) {}

std::string_view to_string(Vote vote) noexcept {
    switch (vote) {
        case Vote::granted: return "granted";
        case Vote::held_by_another: return "held by another owner";
        case Vote::timed_out: return "timed out";
        case Vote::failed: return "failed";
        case Vote::not_counted: return "not counted";
    }
    return "unknown";
}

namespace {

[[noreturn]] void throw_failure(const detail::RedlockCore& core, std::error_code ec, const std::string& what) {
    if (ec != errc::no_quorum) throw Error(ec, what);
    auto outcomes = core.last_outcomes();
    std::string detail = what + ":";
    for (const auto& outcome : outcomes) {
        detail += " " + outcome.master + " " + std::string(to_string(outcome.vote));
        if (outcome.error) detail += " (" + outcome.error.message() + ")";
        detail += ";";
    }
    detail.pop_back();
    throw QuorumError(detail, std::move(outcomes));
}

struct RedlockAccess : detail::OwnedAccess<detail::RedlockCore> {
    static constexpr const char* kind = "dlock::Redlock";
    // A lost vote names each master's answer (QuorumError).
    [[noreturn]] void fail(Core& core, std::error_code ec, std::string_view call) {
        throw_failure(core, ec, std::string(call) + " " + core.identity->name);
    }
};
using RedlockSurface = detail::PublicSurface<RedlockAccess>;

std::shared_ptr<detail::Hold> own_hold(const std::shared_ptr<detail::RedlockCore>& core) {
    return RedlockSurface::own_hold(core, {});
}

}  // namespace

Redlock::Redlock(Masters& masters, std::string name, RedlockOptions options)
    : core_(std::make_shared<detail::RedlockCore>(masters.core(), std::move(name), std::move(options))) {}

Redlock::Redlock(Redlock&&) noexcept = default;

Redlock& Redlock::operator=(Redlock&& other) noexcept {
    if (this != &other) {
        if (core_) core_->release_outstanding();
        core_ = std::move(other.core_);
    }
    return *this;
}

Redlock::~Redlock() {
    if (core_) core_->release_outstanding();
}

bool Redlock::lock(std::stop_token stop) {
    return RedlockSurface::acquire(core_, {}, std::nullopt, std::move(stop), "lock");
}

void Redlock::lock() { (void)lock(std::stop_token{}); }

bool Redlock::try_lock() { return acquire_until(std::chrono::steady_clock::time_point::min()); }

bool Redlock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool Redlock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return RedlockSurface::acquire(core_, {}, deadline, ec);
}

bool Redlock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    return RedlockSurface::acquire(core_, {}, deadline, std::move(stop), "try_lock");
}

bool Redlock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    return try_lock_until(deadline, std::stop_token{});
}

void Redlock::unlock() noexcept { RedlockSurface::release_reported(core_, {}); }

void Redlock::unlock(std::error_code& ec) noexcept { RedlockSurface::release(core_, {}, ec); }

bool Redlock::is_held() const { return detail::hold_is_held(own_hold(core_)); }

unsigned Redlock::hold_count() const { return detail::hold_count_of(own_hold(core_)); }

std::uint64_t Redlock::fencing_token() const { return detail::fencing_token_of(own_hold(core_)); }

std::stop_token Redlock::lost_token() const { return detail::lost_token_of(own_hold(core_)); }

std::optional<LostReason> Redlock::lost_reason() const { return detail::loss_of(own_hold(core_)); }

std::chrono::steady_clock::time_point Redlock::valid_until() const { return detail::valid_until_of(own_hold(core_)); }

const std::string& Redlock::name() const noexcept {
    static const std::string moved_from;
    return core_ ? core_->identity->name : moved_from;
}

std::vector<MasterOutcome> Redlock::last_outcomes() const { return core_ ? core_->last_outcomes() : std::vector<MasterOutcome>{}; }

}  // namespace dlock

namespace dlock::async_entry {

using namespace dlock::detail;

void start_acquire(Redlock& lock, std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::stop_source stop, AcquireCompletion done) {
    auto core = AsyncAccess::core(lock);
    if (!core) return done(errc::invalid_argument, AsyncHold());
    // The first master's client carries the fiber thread.
    start_owned(core, core->masters->cores.front(), deadline, std::move(stop), std::move(done));
}

}  // namespace dlock::async_entry
