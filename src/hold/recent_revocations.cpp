#include "recent_revocations.hpp"

namespace dlock::detail {

std::string RecentRevocations::hold(std::string_view name, std::string_view owner, std::uint64_t token) {
    // The separator is a byte neither a name's key tag nor an owner id holds.
    std::string key;
    key.reserve(name.size() + owner.size() + 24);
    key.append("h\n").append(name).append("\n").append(owner).append("\n").append(std::to_string(token));
    return key;
}

std::string RecentRevocations::permit(std::string_view id) { return "p\n" + std::string(id); }

void RecentRevocations::forget_old_locked(LockClock::time_point now) {
    while (!order_.empty() && (order_.size() > max_kept || now - order_.front().first > keep_for)) {
        kept_.erase(order_.front().second);
        order_.pop_front();
    }
    kept_count_.store(kept_.size(), std::memory_order_release);
}

void RecentRevocations::note(std::string key) {
    const auto now = LockClock::now();
    std::lock_guard lock(mutex_);
    if (!kept_.insert(key).second) return;  // a resent notice: kept already
    order_.emplace_back(now, std::move(key));
    forget_old_locked(now);
}

bool RecentRevocations::heard_of(const Hold& hold, bool is_permit) {
    if (kept_count_.load(std::memory_order_acquire) == 0) return false;
    const auto key = is_permit ? permit(hold.owner) : RecentRevocations::hold(hold.lock->name, hold.owner, hold.view().token);
    std::lock_guard lock(mutex_);
    forget_old_locked(LockClock::now());
    return kept_.count(key) > 0;
}

}  // namespace dlock::detail
