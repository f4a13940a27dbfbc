#include "lease_keeper.hpp"

#include "dlock/error.hpp"
#include "validity.hpp"

namespace dlock::detail {
namespace {

constexpr std::chrono::milliseconds coalesce_window{20};

// The margin scales with the lease the validity counts from: a direct
// grant's first validity (a waiter_lease, maybe far shorter than the lease)
// keeps most of itself for its first renewal.
LockClock::time_point watch_time(const Hold::View& view) {
    return view.valid_until - loss_notice_margin(view.validity_lease);
}

LockClock::time_point watch_time(const Hold& hold) { return watch_time(hold.view()); }

}  // namespace

LeaseKeeper::LeaseKeeper(ClientCore& timer_home, SendRenewals send)
    : home_(timer_home), send_(std::move(send)), timer_(timer_home.io()) {
    spare_entries_.reserve(max_spare_entries);
    home_.on_io_shutdown([this] { shutdown(); });
}

void LeaseKeeper::shutdown() {
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
    }
    timer_.cancel();
}

LockClock::time_point LeaseKeeper::renewal_deadline(const Hold& hold, LockClock::time_point sent,
                                                    std::chrono::milliseconds command_timeout) {
    return std::min(sent + command_timeout, hold.view().valid_until);
}

void LeaseKeeper::track(const std::shared_ptr<Hold>& hold, LockClock::time_point sent,
                        std::chrono::milliseconds first_lease) {
    const auto& options = hold->lock->options;
    if (!options.renew) return schedule(hold, watch_time(*hold));
    const auto watch = watch_time(*hold);
    if (first_lease.count()) {
        // Its first renewal must leave before its validity is watched over
        // (a first validity of a few tens of ms keeps little beyond its
        // margin): at once when a third of the way is not before that.
        const auto renewal = sent + renew_interval(std::min(first_lease, options.lease));
        return schedule(hold, renewal < watch ? renewal : LockClock::now());
    }
    // Its validity counts the lock's own lease: renewed a third of the way
    // in, or watched from its end on if that comes first (a lease too short
    // to keep a margin beyond a third).
    schedule(hold, std::min(sent + renew_interval(options.lease), watch));
}

void LeaseKeeper::unschedule_locked(Hold& hold) {
    if (!hold.keeper.scheduled) return;
    auto node = schedule_.extract(hold.keeper.at);
    hold.keeper.scheduled = false;
    // Kept for the next hold: a lock taken and released in a loop makes
    // no schedule entry per call.
    if (spare_entries_.size() < max_spare_entries) {
        node.mapped().reset();
        spare_entries_.push_back(std::move(node));
    }
}

void LeaseKeeper::schedule_locked(const std::shared_ptr<Hold>& hold, LockClock::time_point at, bool& earlier) {
    unschedule_locked(*hold);
    if (spare_entries_.empty()) {
        hold->keeper.at = schedule_.emplace(at, hold);
    } else {
        auto node = std::move(spare_entries_.back());
        spare_entries_.pop_back();
        node.key() = at;
        node.mapped() = hold;
        hold->keeper.at = schedule_.insert(std::move(node));
    }
    hold->keeper.scheduled = true;
    earlier = at < armed_for_;
    if (earlier) armed_for_ = at;
}

void LeaseKeeper::schedule(const std::shared_ptr<Hold>& hold, LockClock::time_point at) {
    bool earlier;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        schedule_locked(hold, at, earlier);
    }
    // Most entries fall due after the timer already set: no wake-up needed.
    if (earlier) asio::post(home_.io(), [this] { rearm(); });
}

void LeaseKeeper::rearm() {
    LockClock::time_point next;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        next = schedule_.empty() ? LockClock::time_point::max() : schedule_.begin()->first;
        armed_for_ = next;
    }
    if (next == LockClock::time_point::max()) {
        timer_.cancel();
        return;
    }
    timer_.expires_at(next);
    timer_.async_wait([this](std::error_code ec) {
        if (!ec) on_timer();
    });
}

void LeaseKeeper::forget(const std::shared_ptr<Hold>& hold) {
    std::lock_guard lock(mutex_);
    unschedule_locked(*hold);
}

std::vector<std::shared_ptr<Hold>> LeaseKeeper::live_holds() {
    std::vector<std::shared_ptr<Hold>> out;
    std::lock_guard lock(mutex_);
    out.reserve(schedule_.size());
    for (auto& [at, hold] : schedule_) out.push_back(hold);
    return out;
}

void LeaseKeeper::renew_all_now() {
    for (auto& hold : live_holds()) renew_now(hold);
}

void LeaseKeeper::renew_now(const std::shared_ptr<Hold>& hold) {
    bool earlier = false;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_ || !hold->keeper.scheduled || hold->keeper.renewal_in_flight) return;
        if (!hold->lock->options.renew) return;  // fixed leases are only watched
        schedule_locked(hold, LockClock::now(), earlier);
    }
    if (earlier) asio::post(home_.io(), [this] { rearm(); });
}

void LeaseKeeper::on_timer() {
    const auto now = LockClock::now();
    std::vector<std::shared_ptr<Hold>> renewable, lost;
    {
        std::lock_guard lock(mutex_);
        for (auto it = schedule_.begin(); it != schedule_.end() && it->first <= now + coalesce_window;) {
            auto hold = it->second;
            auto& entry = hold->keeper;
            const auto& options = hold->lock->options;
            const bool renewal_due = options.renew && !entry.renewal_in_flight;
            // Renewals a little early (at most a tenth of their interval)
            // join this batch rather than cost a wake-up and a write apiece.
            // A validity watch is never early.
            const auto slack = renewal_due ? renew_interval(options.lease) / 10 : std::chrono::milliseconds(0);
            if (it->first > now && it->first - now > slack) {
                ++it;
                continue;
            }
            it = schedule_.erase(it);
            entry.scheduled = false;
            const auto view = hold->view();
            if (view.state != HoldState::held) continue;  // released or lost: no longer watched
            if (now >= watch_time(view)) {
                lost.push_back(std::move(hold));
                continue;
            }
            bool ignored;
            if (renewal_due) {
                entry.renewal_in_flight = true;
                entry.renewal_sent = now;
                renewable.push_back(hold);
            }
            // Until the renewal's answer (or for a fixed lease, for good):
            // watch the validity's end.
            schedule_locked(hold, watch_time(view), ignored);
        }
    }
    for (auto& hold : lost) mark_lost(hold, LostReason::expired, home_.io());
    if (!renewable.empty()) send_(renewable, now);
    rearm();
}

namespace {
void count_renewal(const Hold& hold, RenewalResult result, LeaseKeeper::Answer answer = LeaseKeeper::Answer::renewal) {
    auto* recorder = hold.lock->metrics.recorder();
    if (!recorder) return;
    if (answer == LeaseKeeper::Answer::grant_confirmation) recorder->grant_confirmation(result);
    else recorder->renewal(result);
}
}  // namespace

void LeaseKeeper::renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent, Answer answer) {
    count_renewal(*hold, RenewalResult::renewed, answer);
    {
        std::lock_guard lock(mutex_);
        hold->keeper.renewal_in_flight = false;
    }
    // Too late (validity already over: lost) or released meanwhile: nothing to do.
    if (!hold->renewed(sent)) return forget(hold);
    schedule(hold, sent + renew_interval(hold->lock->options.lease));
}

void LeaseKeeper::refused(const std::shared_ptr<Hold>& hold, LostReason reason, Answer answer) {
    count_renewal(*hold, RenewalResult::refused, answer);
    forget(hold);
    mark_lost(hold, reason, home_.io());
}

void LeaseKeeper::failed(const std::shared_ptr<Hold>& hold, std::error_code ec) {
    {
        std::lock_guard lock(mutex_);
        hold->keeper.renewal_in_flight = false;
    }
    if (ec == errc::client_closed) return;
    // Answers that another try would only repeat: an ACL that forbids the
    // renewal, a key that now holds another kind of value.
    if (ec == errc::permission_denied) return refused(hold, LostReason::renewal_refused);
    if (ec == errc::wrong_type) return refused(hold, LostReason::taken_over);
    count_renewal(*hold, RenewalResult::failed);
    if (hold->state() != HoldState::held) return forget(hold);
    // Unreachable or too slow: try again soon, until validity runs out.
    const auto retry_at = LockClock::now() + renew_retry_interval(hold->lock->options.lease);
    schedule(hold, std::min(retry_at, watch_time(*hold)));
}

}  // namespace dlock::detail
