#include "dlock/redlock.hpp"

#include <algorithm>
#include <condition_variable>

#include "hold/async_hold_state.hpp"
#include "runtime/condition.hpp"
#include <random>

#include "hold/acquisition_engine.hpp"
#include "hold/hold_queries.hpp"
#include "hold/outage.hpp"
#include "lock_scripts.hpp"
#include "lock_validation.hpp"
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

// One master's answer to acquire.lua: {1, token, count} or {0, pttl, 0}.
struct AcquireAnswer {
    Vote vote = Vote::not_counted;
    std::error_code error;
    std::uint64_t token = 0;
    long long pttl = 0;
};

AcquireAnswer read_acquire(const Ballot& ballot) {
    if (!ballot.answered) return {};
    if (ballot.error)
        return {ballot.error == errc::command_timeout ? Vote::timed_out : Vote::failed, ballot.error};
    const auto vote = read_master_vote(ballot.reply);
    if (vote.vote == Vote::failed) return {Vote::failed, errc::protocol_error};
    return {vote.vote, {}, vote.token, vote.lease_left};
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
      object_owner_(masters->ids.new_handle_owner()) {}

std::string RedlockCore::current_owner() const {
    return identity->options.ownership == Ownership::handle && !OwnerScope::active() ? object_owner_
                                                                                   : OwnerIds::with_thread(object_owner_);
}

std::vector<MasterOutcome> RedlockCore::last_outcomes() const {
    std::lock_guard lock(outcomes_mutex_);
    return last_outcomes_;
}

void RedlockCore::record_outcomes(const std::vector<Ballot>& ballots) {
    std::vector<MasterOutcome> outcomes;
    for (std::size_t i = 0; i < ballots.size(); ++i) {
        auto answer = read_acquire(ballots[i]);
        outcomes.push_back({masters->addresses[i], answer.vote, answer.error});
    }
    std::lock_guard lock(outcomes_mutex_);
    last_outcomes_ = std::move(outcomes);
}

std::chrono::milliseconds RedlockCore::random_retry_delay() {
    thread_local std::minstd_rand random{std::random_device{}()};
    return std::chrono::milliseconds(
        std::uniform_int_distribution<long long>(1, std::max<long long>(retry_delay.count(), 1))(random));
}

bool RedlockCore::settle_token(const std::vector<Ballot>& ballots, const std::vector<std::uint64_t>& tokens,
                               std::uint64_t token, LockClock::time_point deadline) {
    const auto n = masters->size();
    std::size_t at_token = 0;
    std::vector<std::shared_ptr<ClientCore>> lagging;
    for (std::size_t i = 0; i < n; ++i) {
        if (read_acquire(ballots[i]).vote != Vote::granted) continue;
        if (tokens[i] >= token) ++at_token;
        else lagging.push_back(masters->cores[i]);
    }
    if (lagging.empty()) return won(n, at_token);  // the usual case: the masters' counters agree
    // Every lagging granter is raised, not only as many as a majority needs:
    // a master left behind would let a later majority that includes it
    // issue a smaller token.
    const auto fence = identity->keys.fence();
    const auto value = std::to_string(token);
    const auto keep = std::to_string((identity->options.lease + identity->options.retention).count());
    std::string_view k[] = {fence};
    std::string_view a[] = {value, keep};
    auto raise = FanOut::send(lagging, raise_fence_script(), k, a, deadline);
    if (won(n, at_token)) {
        masters->finish_before_close(std::move(raise));  // the majority stands already: do not wait
        return true;
    }
    auto raised = raise->wait([&](const auto& answers) {
        std::size_t ok = 0;
        for (const auto& answer : answers) ok += answer.answered && !answer.error;
        return won(n, at_token + ok);
    });
    if (!raise->complete()) masters->finish_before_close(std::move(raise));
    for (const auto& answer : raised) at_token += answer.answered && !answer.error;
    return won(n, at_token);
}

AttemptResult RedlockCore::attempt(const std::string& owner, OwnerSlot& slot,
                                   std::optional<LockClock::time_point> caller_deadline, std::error_code& ec) {
    if ((ec = masters->usable())) return AttemptResult::failed();
    const auto n = masters->size();
    const auto& keys = identity->keys;
    const auto fence = keys.fence(), tombstone = keys.tombstone(owner);
    const auto operation = masters->ids.next_operation_id();
    const auto sent = LockClock::now();
    // Each master gets its node timeout, and the caller's deadline is kept
    // (a single attempt still gets its node timeout).
    auto deadline = sent + identity->node_timeout;
    if (caller_deadline && *caller_deadline > sent) deadline = std::min(deadline, *caller_deadline);
    std::string_view k[] = {keys.lock, fence, tombstone, keys.readers(), keys.semaphore_permits(),
                            keys.semaphore_waiters()};
    // Counters are floored at the clock only when missing: the masters'
    // counters then agree, and settling a token costs no extra round trip.
    const auto holder = OwnerIds::holder_label();
    std::string_view a[] = {owner, identity->lease_ms, operation, "fresh", identity->retention_ms, "0", holder};
    // Stop as soon as a majority granted. A failure waits for every answer
    // (at most the node timeout), so that it can say what each master said.
    auto fan = FanOut::send(masters->cores, acquire_script(), k, a, deadline);
    auto ballots = fan->wait([n](const auto& so_far) {
        std::size_t granted = 0;
        for (const auto& ballot : so_far) granted += read_acquire(ballot).vote == Vote::granted;
        return won(n, granted);
    });
    record_outcomes(ballots);

    std::size_t granted = 0, held_by_another = 0;
    std::uint64_t token = 0;
    long long shortest_pttl = identity->options.lease.count();
    std::vector<std::uint64_t> tokens(n, 0);
    bool wrong_type = false;
    for (std::size_t i = 0; i < n; ++i) {
        auto answer = read_acquire(ballots[i]);
        wrong_type |= answer.error == errc::wrong_type;
        if (answer.vote == Vote::granted) {
            ++granted;
            tokens[i] = answer.token;
            token = std::max(token, answer.token);
        } else if (answer.vote == Vote::held_by_another) {
            ++held_by_another;
            shortest_pttl = std::min(shortest_pttl, std::clamp<long long>(answer.pttl, 1, max_lease.count()));
        }
    }
    if (won(n, granted) && remaining_validity(sent, LockClock::now(), identity->options.lease).count() > 0 &&
        // Settling is one more round trip, kept within the caller's
        // deadline too: cut short, the grants are undone below.
        settle_token(ballots, tokens, token, deadline) &&
        remaining_validity(sent, LockClock::now(), identity->options.lease).count() > 0) {
        record_acquired(owner, slot, token, sent);
        raise_late_granters(fan, token, ballots);
        return AttemptResult::granted();
    }
    // Not ours: undo every grant, also where no answer came (it may have
    // been granted), unless every master answered that someone else has it.
    if (held_by_another < n) release_everywhere(owner, false);
    if (wrong_type) {
        ec = errc::wrong_type;
        return AttemptResult::failed();
    }
    if (granted + held_by_another < majority(n)) {
        // Masters that do not answer (a failover, a restart): ridden
        // through as every kind's waiters do (outage.hpp), pausing a random
        // time up to retry_delay that only stop cuts short.
        ec = errc::no_quorum;
        auto unanswered = AttemptResult::failed(true);
        unanswered.sleep = random_retry_delay();
        unanswered.listens = false;
        return unanswered;
    }
    // Until a release on any master, or until the holder's lease must have ended.
    if (granted == 0) return AttemptResult::busy(std::chrono::milliseconds(shortest_pttl + 1));
    // A split vote: back off a random time. Only stop cuts it short: release
    // messages are our own and the contenders' and must not end the pause.
    return AttemptResult::busy(random_retry_delay(), false);
}

void RedlockCore::raise_late_granters(const std::shared_ptr<FanOut>& fan, std::uint64_t token,
                                      const std::vector<Ballot>& counted) {
    if (fan->complete()) return;
    // Masters that answered after the majority was counted granted too, and
    // may stand below the token: raise them as well, in the background.
    std::vector<bool> seen;
    for (const auto& ballot : counted) seen.push_back(ballot.answered);
    std::weak_ptr<MastersCore> weak = masters;  // the callback must not keep the masters alive
    auto identity_ = identity;
    masters->finish_before_close(fan);
    fan->when_complete([weak, identity_, token, seen](const std::vector<Ballot>& all) {
        auto core = weak.lock();
        if (!core || core->usable()) return;
        std::vector<std::shared_ptr<ClientCore>> lagging;
        for (std::size_t i = 0; i < all.size(); ++i) {
            auto answer = read_acquire(all[i]);
            if (!seen[i] && answer.vote == Vote::granted && answer.token < token) lagging.push_back(core->cores[i]);
        }
        if (lagging.empty()) return;
        const auto fence = identity_->keys.fence();
        const auto value = std::to_string(token);
        const auto keep = std::to_string((identity_->options.lease + identity_->options.retention).count());
        std::string_view k[] = {fence};
        std::string_view a[] = {value, keep};
        core->finish_before_close(
            FanOut::send(lagging, raise_fence_script(), k, a, Clock::now() + identity_->node_timeout));
    });
}

void RedlockCore::record_acquired(const std::string& owner, OwnerSlot& slot, std::uint64_t token,
                                  LockClock::time_point sent) {
    auto hold = std::make_shared<Hold>(identity, owner, Grant{token, 1, sent, sent});
    if (auto previous = slot.current()) {
        masters->keeper().forget(previous);
        mark_lost(previous, LostReason::taken_over, masters->keeper().io());
    }
    slot.set(hold);
    masters->keeper().track(hold, sent);
    owners_.note(hold);
}

// One acquisition, as the engine (hold/acquisition_engine.hpp) drives it:
// the attempt is a vote of every master; threads of this process queue for
// the name, and only the head asks the masters.
class RedlockAcquisition final : public AcquisitionProtocol {
public:
    explicit RedlockAcquisition(RedlockCore& core) : core_(core) {}

    const MetricsTag& metrics() const override { return core_.identity->metrics; }
    std::error_code usable() const override { return core_.masters->usable(); }
    ClosingGate& closing() override { return core_.masters->closing; }
    const ClientOptions& client_options() const override { return core_.masters->cores.front()->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.identity->node_timeout; }
    HoldRegistry* holds() override { return &core_.masters->holds; }
    const std::string& name() const override { return core_.identity->name; }
    std::string owner() const override { return core_.current_owner(); }
    // Re-entry is counted here: the masters hold one grant per owner.
    Reentry reenter(AcquisitionCall&, const std::shared_ptr<Hold>& hold, std::error_code&) override {
        return hold->recount(hold->view().count + 1) ? Reentry::reentered : Reentry::not_held;
    }
    QueueRegistry* queues() override { return &core_.masters->queues; }
    bool jump_queue(const AcquisitionCall&) const override { return true; }
    AttemptResult attempt(AcquisitionCall& call, bool, std::optional<LockClock::time_point>,
                          std::error_code& ec) override {
        return core_.attempt(call.owner, *call.slot, call.deadline, ec);
    }
    // Subscribes on every master.
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        return {signal_->ensure_subscribed(core_.masters->cores, 1, core_.identity->keys.channel(), until, call.stop),
                true};
    }

private:
    RedlockCore& core_;
};

bool RedlockCore::acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
    RedlockAcquisition acquisition(*this);
    return acquire_with(acquisition, deadline, std::move(stop), ec);
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
    OwnerOperation operation(masters->holds, identity->name, owner);
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
        for (const auto& owner : owners_.take()) {
            auto hold = hold_of(owner);
            if (!hold || hold->final()) continue;
            OwnerOperation operation(masters->holds, identity->name, owner);
            (void)operation.enter(std::nullopt, {});
            if (!hold->begin_final_release()) continue;
            masters->keeper().forget(hold);
            operation.slot().clear(hold);
            release_everywhere(owner, true);
            hold->release_answered(0, LockClock::now());
        }
    } catch (...) {
        // Best effort: the lease ends what is left.
    }
}

void RedlockCore::release_everywhere(const std::string& owner, bool wait) {
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
    std::error_code ec;
    bool acquired = core_->acquire(std::nullopt, stop, ec);
    if (ec) throw_failure(*core_, ec, "lock " + name());
    return acquired;
}

void Redlock::lock() { (void)lock(std::stop_token{}); }

bool Redlock::try_lock() { return acquire_until(std::chrono::steady_clock::time_point::min()); }

bool Redlock::try_lock(std::error_code& ec) noexcept {
    return try_lock_until(std::chrono::steady_clock::time_point::min(), ec);
}

bool Redlock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::error_code& ec) noexcept {
    return detail::acquire_noexcept(*core_, deadline, ec);
}

bool Redlock::try_lock_until(std::chrono::steady_clock::time_point deadline, std::stop_token stop) {
    std::error_code ec;
    bool acquired = core_->acquire(deadline, stop, ec);
    if (ec) throw_failure(*core_, ec, "try_lock " + name());
    return acquired;
}

bool Redlock::acquire_until(std::chrono::steady_clock::time_point deadline) {
    return try_lock_until(deadline, std::stop_token{});
}

void Redlock::unlock() noexcept {
    std::error_code ec;
    unlock(ec);
    detail::report_unlock_error(*core_->identity, ec);
}

void Redlock::unlock(std::error_code& ec) noexcept { detail::release_noexcept(*core_, ec); }

bool Redlock::is_held() const { return detail::hold_is_held(core_->hold_of(core_->current_owner())); }

unsigned Redlock::hold_count() const { return detail::hold_count_of(core_->hold_of(core_->current_owner())); }

std::uint64_t Redlock::fencing_token() const {
    return detail::fencing_token_of(core_->hold_of(core_->current_owner()));
}

std::stop_token Redlock::lost_token() const { return detail::lost_token_of(core_->hold_of(core_->current_owner())); }

std::optional<LostReason> Redlock::lost_reason() const {
    return detail::loss_of(core_->hold_of(core_->current_owner()));
}

std::chrono::steady_clock::time_point Redlock::valid_until() const {
    return detail::valid_until_of(core_->hold_of(core_->current_owner()));
}

const std::string& Redlock::name() const noexcept { return core_->identity->name; }

std::vector<MasterOutcome> Redlock::last_outcomes() const { return core_->last_outcomes(); }

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
