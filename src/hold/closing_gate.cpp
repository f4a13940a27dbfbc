#include "closing_gate.hpp"

namespace dlock::detail {

std::optional<ClosingGate::Pass> ClosingGate::enter() {
    std::lock_guard lock(mutex_);
    if (stop_.stop_requested()) return std::nullopt;
    ++inside_;
    return std::optional<Pass>(std::in_place, *this);
}

void ClosingGate::leave() {
    std::lock_guard lock(mutex_);
    if (--inside_ == 0) left_.notify_all();
}

bool ClosingGate::close(LockClock::time_point until) {
    // An enter() that saw no close is counted before the wait below reads the count.
    stop_.request_stop();  // wakes the waiters: their stop callbacks run here
    std::unique_lock lock(mutex_);
    return left_.wait_until(lock, until, [this] { return inside_ == 0; });
}

}  // namespace dlock::detail
