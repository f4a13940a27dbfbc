// How a Redlock acquires: one attempt is a vote of every master
// (acquire.lua on each, in parallel); a majority of grants with validity
// left wins, its fencing token the largest among the granters (raised on
// every lagging granter); otherwise what was granted is released
// everywhere. The protocol the engine (hold/acquisition_engine.hpp) drives.
#include <algorithm>
#include <random>

#include "hold/acquisition_engine.hpp"
#include "hold/outage.hpp"
#include "lock_scripts.hpp"
#include "quorum.hpp"
#include "redlock_core.hpp"
#include "script_replies.hpp"

namespace dlock::detail {
namespace {

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
    const auto fence = keys.fence();
    const auto tombstone = keys.tombstone(owner);
    const auto operation = masters->runtime.next_operation_id();
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
    // This thread reads the masters' answers itself (fan_out.hpp).
    DriveScope driving(masters->may_drive(), DriveScope::Reach::fan_out);
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
    ClosingGate& closing() override { return core_.masters->runtime.closing(); }
    const ClientOptions& client_options() const override { return core_.masters->cores.front()->options(); }
    std::chrono::milliseconds answer_time() const override { return core_.identity->node_timeout; }
    HoldRegistry* holds() override { return &core_.masters->runtime.holds(); }
    const std::string& name() const override { return core_.identity->name; }
    const std::string& owner() override { return calling_owner_ = core_.current_owner(); }
    // Re-entry is counted here: the masters hold one grant per owner.
    Reentry reenter(AcquisitionCall&, const std::shared_ptr<Hold>& hold, std::error_code&) override {
        return hold->recount(hold->view().count + 1) ? Reentry::reentered : Reentry::not_held;
    }
    QueueRegistry* queues() override { return &core_.masters->runtime; }
    bool jump_queue(const AcquisitionCall&) const override { return true; }
    AttemptResult attempt(AcquisitionCall& call, bool, std::optional<LockClock::time_point>,
                          std::error_code& ec) override {
        return core_.attempt(call.owner(), *call.slot, call.deadline, ec);
    }
    // Subscribes on every master.
    Listening listen(AcquisitionCall& call, LockClock::time_point until) override {
        return {signal_->ensure_subscribed(core_.masters->cores, 1, core_.identity->keys.channel(), until, call.stop),
                true};
    }

private:
    RedlockCore& core_;
    std::string calling_owner_;  // owner(), for the call
};

bool RedlockCore::acquire(std::optional<LockClock::time_point> deadline, std::stop_token stop, std::error_code& ec) {
    RedlockAcquisition acquisition(*this);
    return acquire_with(acquisition, deadline, std::move(stop), ec);
}

}  // namespace dlock::detail
