#include "hold.hpp"

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::detail {

Hold::Hold(std::shared_ptr<const LockIdentity> lock_, std::shared_ptr<const std::string> owner_, const Grant& grant)
    : lock(std::move(lock_)),
      owner_name(std::move(owner_)),
      owner(*owner_name),
      grant_arrival(grant.arrival, true),
      count_(grant.count),
      token_(grant.token),
      valid_until_(valid_until(grant.sent, grant.lease_or(lock->options.lease))),
      validity_lease_(grant.lease_or(lock->options.lease)),
      slice_start_(grant.slice_start) {
    if (auto* recorder = lock->metrics.recorder(); recorder && recorder->enabled()) {
        granted_at_ = LockClock::now();
        recorder->holds_changed(lock->metrics.kind, lock->metrics.label, +1);
    }
}

void Hold::ended_locked() {
    if (granted_at_ == LockClock::time_point{}) return;  // not recorded
    auto* recorder = lock->metrics.recorder();
    recorder->held(lock->metrics.kind, lock->metrics.label, LockClock::now() - granted_at_);
    recorder->holds_changed(lock->metrics.kind, lock->metrics.label, -1);
}

Hold::View Hold::view() const {
    std::lock_guard guard(mutex_);
    return {state_, count_, token_, valid_until_, slice_start_, validity_lease_};
}

HoldState Hold::state() const {
    std::lock_guard guard(mutex_);
    return state_;
}

bool Hold::trusted(LockClock::time_point now) const {
    std::lock_guard guard(mutex_);
    return state_ == HoldState::held && now < valid_until_;
}

bool Hold::final() const {
    std::lock_guard guard(mutex_);
    return state_ == HoldState::released || state_ == HoldState::lost;
}

void Hold::extend_validity_locked(LockClock::time_point sent, std::chrono::milliseconds lease) {
    if (const auto until = valid_until(sent, lease); until > valid_until_) {
        valid_until_ = until;
        validity_lease_ = lease;
    }
}

bool Hold::reentered(unsigned count, LockClock::time_point sent, std::chrono::milliseconds lease) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    count_ = count;
    extend_validity_locked(sent, lease);
    return true;
}

bool Hold::renewed(LockClock::time_point sent) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    extend_validity_locked(sent, lock->options.lease);
    return true;
}

bool Hold::partly_released(unsigned count, LockClock::time_point sent, std::chrono::milliseconds lease) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    count_ = count;
    extend_validity_locked(sent, lease);
    return true;
}

bool Hold::recount(unsigned count) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    count_ = count;
    return true;
}

bool Hold::begin_final_release() {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    state_ = HoldState::releasing;
    return true;
}

void Hold::release_answered(unsigned left, LockClock::time_point sent) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::releasing) return;
    if (left == 0) {
        state_ = HoldState::released;
        count_ = 0;
        ended_locked();
        return;
    }
    // The server still counts holds of ours: it is still ours, and renewed.
    state_ = HoldState::held;
    count_ = left;
    extend_validity_locked(sent, lock->options.lease);
}

void Hold::release_unanswered() {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::releasing) return;
    state_ = HoldState::released;
    count_ = 0;
    ended_locked();
}

bool Hold::lose(LostReason reason) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held && state_ != HoldState::releasing) return false;
    state_ = HoldState::lost;
    loss_ = reason;
    ended_locked();
    return true;
}

bool Hold::drop() {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::held) return false;
    state_ = HoldState::released;
    count_ = 0;
    ended_locked();
    return true;
}

unsigned Hold::forget_lost_holds(unsigned holds) {
    std::lock_guard guard(mutex_);
    if (state_ != HoldState::lost) return count_;
    count_ = holds >= count_ ? 0 : count_ - holds;
    return count_;
}

template <typename Self>
auto Hold::share_of_locked(Self& self, const void* object) -> decltype(&self.first_contribution_) {
    if (self.first_contribution_.second > 0 && self.first_contribution_.first == object) return &self.first_contribution_;
    for (auto& share : self.more_contributions_)
        if (share.first == object) return &share;
    return nullptr;
}

void Hold::contribute(const void* object) {
    std::lock_guard guard(mutex_);
    if (auto* share = share_of_locked(*this, object)) return void(++share->second);
    if (first_contribution_.second == 0) first_contribution_ = {object, 1};
    else more_contributions_.emplace_back(object, 1);
}

void Hold::withdraw(const void* object) {
    std::lock_guard guard(mutex_);
    auto* share = share_of_locked(*this, object);
    if (!share && first_contribution_.second > 0) share = &first_contribution_;
    if (!share && !more_contributions_.empty()) share = &more_contributions_.front();
    if (!share || --share->second > 0) return;
    if (share == &first_contribution_) first_contribution_ = {};
    else more_contributions_.erase(more_contributions_.begin() + (share - more_contributions_.data()));
}

unsigned Hold::contribution_of(const void* object) const {
    std::lock_guard guard(mutex_);
    const auto* share = share_of_locked(*this, object);
    return share ? share->second : 0;
}


std::stop_token Hold::lost_token() {
    std::lock_guard guard(mutex_);
    if (!lost_source_) {
        lost_source_.emplace();
        // A token asked for after the loss starts stopped.
        if (state_ == HoldState::lost) lost_source_->request_stop();
    }
    return lost_source_->get_token();
}

std::optional<LostReason> Hold::loss() const {
    std::lock_guard guard(mutex_);
    return loss_;
}

std::error_code Hold::lost_reason() const {
    const auto reason = loss();
    return reason ? make_error_code(*reason) : std::error_code();
}

void Hold::request_lost_stop() {
    std::optional<std::stop_source> source;
    {
        std::lock_guard guard(mutex_);
        if (!lost_source_) return;  // nobody asked for a token; one made later starts stopped
        source = lost_source_;      // a stop_source is a shared handle
    }
    source->request_stop();  // outside the mutex: stop callbacks are the holder's code
}

void notify_lost(const std::shared_ptr<Hold>& hold, asio::io_context& io) {
    // One thread for every notice, whoever noticed the loss: the I/O thread.
    asio::post(io, [hold] {
        hold->request_lost_stop();
        const auto& options = hold->lock->options;
        if (!options.on_lost) return;
        try {
            options.on_lost(hold->lock->name, hold->lost_reason());
        } catch (...) {
            // The holder's callback must not take the I/O thread down.
        }
    });
}

void mark_lost(const std::shared_ptr<Hold>& hold, LostReason reason, asio::io_context& io) {
    if (!hold->lose(reason)) return;
    if (auto* recorder = hold->lock->metrics.recorder()) {
        const auto counted = reason == LostReason::expired   ? LossReason::expired
                             : reason == LostReason::revoked ? LossReason::revoked
                                                             : LossReason::refused;
        recorder->lost(hold->lock->metrics.kind, hold->lock->metrics.label, counted);
    }
    notify_lost(hold, io);
}

}  // namespace dlock::detail
