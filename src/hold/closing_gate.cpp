#include "closing_gate.hpp"

namespace dlock::detail {

std::optional<ClosingGate::Pass> ClosingGate::enter() {
    std::lock_guard lock(mutex_);
    if (stop_.stop_requested()) return std::nullopt;
    ++inside_;
    return std::optional<Pass>(std::in_place, *this);
}

void ClosingGate::leave() {
    std::function<void()> when_left;
    {
        std::lock_guard lock(mutex_);
        if (--inside_ != 0) return;
        left_.notify_all();
        when_left = std::move(when_left_);
    }
    if (when_left) when_left();
}

bool ClosingGate::close(LockClock::time_point until, std::function<void()> when_late) {
    // An enter() that saw no close is counted before the wait below reads the count.
    stop_.request_stop();  // wakes the waiters: their stop callbacks run here
    std::unique_lock lock(mutex_);
    if (left_.wait_until(lock, until, [this] { return inside_ == 0; })) return true;
    when_left_ = std::move(when_late);  // read by the last leave(), under this mutex
    return false;
}

}  // namespace dlock::detail
