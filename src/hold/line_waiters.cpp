#include "line_waiters.hpp"

#include <algorithm>

namespace dlock::detail {

LineWaiters::LineWaiters(ClientCore& home, SendRefreshes send)
    : home_(home), send_(std::move(send)), timer_(home.io()) {
    home_.on_io_shutdown([this] { shutdown(); });
}

void LineWaiters::shutdown() {
    std::vector<std::shared_ptr<Waiter>> all;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        for (auto& [key, waiter] : waiters_) all.push_back(waiter);
        waiters_.clear();
    }
    timer_.cancel();
    // The client is closed: every waiter wakes now, finds it so and fails
    // (client_closed), rather than sleep until its holder's lease ends.
    for (auto& waiter : all) waiter->wake();
}

std::shared_ptr<LineWaiters::Waiter> LineWaiters::join(std::shared_ptr<const LockIdentity> identity, std::string owner,
                                                       std::function<void()> wake) {
    auto waiter = std::make_shared<Waiter>(std::move(identity), std::move(owner), std::move(wake));
    const auto period = waiter->identity->options.waiter_lease / 3;
    bool arm_now = false;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return waiter;
        waiters_[{waiter->identity->name, waiter->owner}] = waiter;
        // Not ticking, or ticking too slowly for this waiter's place: the
        // timer is (re)armed for this period. The place was just taken: its
        // first refresh is due a period later.
        arm_now = !ticking_ || period < period_;
        if (arm_now) period_ = period;
        ticking_ = true;
    }
    if (arm_now) asio::post(home_.io(), [this, period] { arm(period); });
    return waiter;
}

void LineWaiters::leave(const std::shared_ptr<Waiter>& waiter) {
    std::lock_guard lock(mutex_);
    auto it = waiters_.find(std::pair(waiter->identity->name, waiter->owner));
    if (it != waiters_.end() && it->second == waiter) waiters_.erase(it);
}

std::shared_ptr<LineWaiters::Waiter> LineWaiters::find(std::string_view name, std::string_view owner) {
    std::lock_guard lock(mutex_);
    auto it = waiters_.find(std::pair(std::string(name), std::string(owner)));
    return it == waiters_.end() ? nullptr : it->second;
}

void LineWaiters::granted(std::string_view name, std::string_view owner, DirectGrant grant) {
    const auto waiter = find(name, owner);
    if (!waiter) return;
    {
        std::lock_guard lock(waiter->mutex_);
        waiter->notice_ = grant;
    }
    waiter->wake();
}

void LineWaiters::revoked(std::string_view name, std::string_view owner, std::uint64_t token) {
    const auto waiter = find(name, owner);
    if (!waiter) return;
    std::lock_guard lock(waiter->mutex_);
    if (waiter->notice_ && waiter->notice_->token == token) waiter->notice_.reset();
    if (waiter->taken_token_ == token) waiter->taken_revoked_ = true;
}

bool LineWaiters::Waiter::taken_grant_revoked() const {
    std::lock_guard lock(mutex_);
    return taken_revoked_;
}

void LineWaiters::Waiter::placed(std::uint64_t arrival, LockClock::time_point sent) {
    if (arrival == 0) return;
    std::lock_guard lock(mutex_);
    if (arrival != arrival_) {
        // Another wait (its place was lost and taken anew): what kept the
        // old place says nothing of the new one.
        arrival_ = arrival;
        place_kept_ = sent;
        return;
    }
    place_kept_ = std::max(place_kept_, sent);
}

std::uint64_t LineWaiters::Waiter::arrival() const {
    std::lock_guard lock(mutex_);
    return arrival_;
}

std::optional<LineWaiters::TakenGrant> LineWaiters::Waiter::direct_grant() {
    std::lock_guard lock(mutex_);
    const auto notice = std::exchange(notice_, std::nullopt);
    if (!notice || arrival_ == 0 || notice->arrival != arrival_) return std::nullopt;
    taken_token_ = notice->token;
    return TakenGrant{notice->token, notice->arrival, place_kept_};
}

void LineWaiters::wake_all() {
    std::vector<std::shared_ptr<Waiter>> all;
    {
        std::lock_guard lock(mutex_);
        for (auto& [key, waiter] : waiters_) all.push_back(waiter);
    }
    for (auto& waiter : all) waiter->wake();
}

void LineWaiters::refreshed(Waiter& waiter, std::error_code ec, const Reply& reply, LockClock::time_point sent) {
    if (ec) return;
    if (reply.is_integer() && reply.integer == 1) {
        // The place of the waiter's current wait: a refresh never makes a new one.
        std::lock_guard lock(waiter.mutex_);
        if (waiter.arrival_ != 0) waiter.place_kept_ = std::max(waiter.place_kept_, sent);
        return;
    }
    waiter.wake();
}

// Every waiter is refreshed each tick: a tick is a third of the shortest
// waiter_lease among them, so each place is refreshed at least twice before
// it would end, even when one refresh is lost.
void LineWaiters::on_tick() {
    std::vector<std::shared_ptr<Waiter>> due;
    auto period = std::chrono::milliseconds::max();
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        if (waiters_.empty()) {
            ticking_ = false;
            return;
        }
        for (auto& [key, waiter] : waiters_) {
            due.push_back(waiter);
            period = std::min(period, waiter->identity->options.waiter_lease / 3);
        }
        period_ = period;
    }
    send_(due);
    arm(period);
}

void LineWaiters::arm(std::chrono::milliseconds period) {
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
    }
    timer_.expires_after(period);  // cancels a wait armed for a longer period
    timer_.async_wait([this](std::error_code ec) {
        if (!ec) on_tick();
    });
}

}  // namespace dlock::detail
