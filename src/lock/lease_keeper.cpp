#include "lease_keeper.hpp"

#include "dlock/error.hpp"
#include "validity.hpp"

namespace dlock::detail {
namespace {
constexpr std::chrono::milliseconds coalesce_window{20};
}  // namespace

void mark_lost(const std::shared_ptr<Hold>& hold, std::error_code reason) {
    std::optional<std::stop_source> source;
    {
        std::lock_guard lock(hold->mutex);
        if (hold->lost || hold->released) return;
        hold->lost = true;
        hold->lost_reason = reason;
        source = hold->lost_source;  // a token made after this sees `lost` and starts stopped
    }
    // Outside the mutex: stop callbacks are the holder's code.
    if (source) source->request_stop();
    if (hold->lock->options.on_lost) hold->lock->options.on_lost(hold->lock->name, reason);
}

LeaseKeeper::LeaseKeeper(ClientCore& timer_home, SendRenewals send)
    : home_(timer_home), send_(std::move(send)), timer_(timer_home.io()) {
    home_.on_io_shutdown([this] { shutdown(); });
}

void LeaseKeeper::shutdown() {
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
    }
    timer_.cancel();
}

void LeaseKeeper::track(const std::shared_ptr<Hold>& hold, LockClock::time_point due) { schedule(hold, due); }

void LeaseKeeper::schedule(const std::shared_ptr<Hold>& hold, LockClock::time_point due) {
    bool earlier;
    {
        std::lock_guard lock(mutex_);
        if (hold->scheduled) schedule_.erase(hold->schedule_entry);
        hold->schedule_entry = schedule_.emplace(due, hold);
        hold->scheduled = true;
        earlier = due < armed_for_;
        if (earlier) armed_for_ = due;
    }
    // Most holds fall due after the timer already set: no wake-up needed.
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
    if (!hold->scheduled) return;
    schedule_.erase(hold->schedule_entry);
    hold->scheduled = false;
}

std::vector<std::shared_ptr<Hold>> LeaseKeeper::live_holds() {
    std::vector<std::shared_ptr<Hold>> out;
    std::lock_guard lock(mutex_);
    for (auto& [due, weak] : schedule_)
        if (auto hold = weak.lock()) out.push_back(std::move(hold));
    return out;
}

void LeaseKeeper::on_timer() {
    const auto now = LockClock::now();
    std::vector<std::shared_ptr<Hold>> due;
    {
        // Holds taken one after another fall due one after another; waking
        // for each would cost a timer wake-up and a write apiece. Renewals a
        // little early (at most a tenth of their interval, 20 ms at most)
        // join this batch instead.
        std::lock_guard lock(mutex_);
        for (auto it = schedule_.begin(); it != schedule_.end() && it->first <= now + coalesce_window;) {
            auto hold = it->second.lock();
            if (hold && it->first > now && it->first - now > renew_interval(hold->lock->options.lease) / 10) {
                ++it;
                continue;
            }
            if (hold) {
                hold->scheduled = false;
                due.push_back(std::move(hold));
            }
            it = schedule_.erase(it);
        }
    }
    std::vector<std::shared_ptr<Hold>> renewable;
    for (auto& hold : due) {
        std::unique_lock lock(hold->mutex);
        if (hold->released || hold->lost || hold->count == 0) continue;  // dropped from the schedule
        if (now >= hold->valid_until) {
            auto reason = hold->last_renew_error ? hold->last_renew_error : make_error_code(errc::lease_lost);
            lock.unlock();
            mark_lost(hold, reason);
            continue;
        }
        if (!hold->lock->options.renew) {
            auto expiry = hold->valid_until;
            lock.unlock();
            schedule(hold, expiry);
            continue;
        }
        renewable.push_back(std::move(hold));
    }
    if (!renewable.empty()) send_(renewable, now);
    rearm();
}

void LeaseKeeper::renewed(const std::shared_ptr<Hold>& hold, LockClock::time_point sent) {
    const auto lease = hold->lock->options.lease;
    {
        std::lock_guard lock(hold->mutex);
        if (hold->released || hold->lost) return;
        hold->valid_until = std::max(hold->valid_until, valid_until(sent, lease));
        hold->last_renew_error.clear();
    }
    schedule(hold, sent + renew_interval(lease));
}

void LeaseKeeper::refused(const std::shared_ptr<Hold>& hold) {
    // The renewal ran and we are not the owner: gone (expired, deleted,
    // force-released, or the server lost its data).
    mark_lost(hold, errc::lease_lost);
}

void LeaseKeeper::failed(const std::shared_ptr<Hold>& hold, std::error_code ec) {
    if (ec == errc::client_closed) return;
    // Unreachable: keep trying until the lease would have run out.
    LockClock::time_point next;
    {
        std::lock_guard lock(hold->mutex);
        if (hold->released || hold->lost) return;
        hold->last_renew_error = ec;
        next = std::min(LockClock::now() + renew_retry_interval(hold->lock->options.lease), hold->valid_until);
    }
    schedule(hold, next);
}

}  // namespace dlock::detail
